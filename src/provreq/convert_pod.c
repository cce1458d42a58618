/* Pods and their terms → sched_pod_spec (convert.h): label selectors,
 * tolerations, node affinity, pod (anti-)affinity terms, topology spread,
 * containers and their host ports, from a pod spec's JSON and from a
 * decoded bound pod. */
#include "provreq/convert_int.h"
#include "provreq/dra.h"
#include "util/buf.h"

#include <stdio.h>
#include <string.h>

/* ---- selectors --------------------------------------------------------- */

static int conv_op(const char *s, bool node, sched_sel_op *op)
{
	if(!s) return -1;
	if(!strcmp(s, "In")) *op = SCHED_OP_IN;
	else if(!strcmp(s, "NotIn")) *op = SCHED_OP_NOT_IN;
	else if(!strcmp(s, "Exists")) *op = SCHED_OP_EXISTS;
	else if(!strcmp(s, "DoesNotExist")) *op = SCHED_OP_DOES_NOT_EXIST;
	else if(node && !strcmp(s, "Gt")) *op = SCHED_OP_GT;
	else if(node && !strcmp(s, "Lt")) *op = SCHED_OP_LT;
	else return -1;
	return 0;
}

static int conv_requirements(arena *a, json_object *exprs, bool node, const char *field,
			     sched_requirement **out, size_t *n, prd_err *err)
{
	size_t i, j, cnt = arr_len(exprs);
	sched_requirement *r;
	int rc;
	*out = NULL;
	*n = 0;
	if((rc = want_type(exprs, json_type_array, field, "a list", err)))
		return rc;
	if(!cnt)
		return 0;
	r = arena_array(a, cnt, sizeof(*r));
	if(!r)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < cnt; i++) {
		json_object *e = json_object_array_get_idx(exprs, i), *vals;
		const char *opname = NULL;
		const char **vv;
		char f[160];
		snprintf(f, sizeof(f), "%s[%zu]", field, i);
		if((rc = want_type(e, json_type_object, f, "an object", err)) ||
		   (rc = get_string(e, "key", f, &r[i].key, err)) ||
		   (rc = get_string(e, "operator", f, &opname, err)))
			return rc;
		if(!r[i].key)
			return prd_err_set(err, PRD_EINVAL, "%s.key: required", f);
		if(conv_op(opname, node, &r[i].op))
			return prd_err_set(err, PRD_EINVAL, "%s.operator: unknown operator \"%s\"", f,
					   opname ? opname : "");
		vals = get(e, "values");
		if((rc = want_type(vals, json_type_array, f, "a list of strings", err)))
			return rc;
		r[i].n_values = arr_len(vals);
		vv = arena_array(a, r[i].n_values + 1, sizeof(*vv));
		if(!vv)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		for(j = 0; j < r[i].n_values; j++) {
			json_object *x = json_object_array_get_idx(vals, j);
			if(!json_object_is_type(x, json_type_string))
				return prd_err_set(err, PRD_EINVAL, "%s.values[%zu]: must be a string", f, j);
			vv[j] = json_object_get_string(x);
		}
		r[i].values = vv;
	}
	*out = r;
	*n = cnt;
	return 0;
}

int pr_conv_label_selector(arena *a, json_object *sel, const char *field, sched_label_selector **out,
			   prd_err *err)
{
	sched_label_selector *s;
	sched_label *ml;
	sched_requirement *ex;
	char f[160];
	int rc;

	*out = NULL;
	if(!sel)
		return 0;
	if((rc = want_type(sel, json_type_object, field, "a label selector", err)))
		return rc;
	s = arena_alloc(a, sizeof(*s));
	if(!s)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	snprintf(f, sizeof(f), "%s.matchLabels", field);
	if((rc = pr__conv_labels(a, get(sel, "matchLabels"), f, &ml, &s->n_match_labels, err)))
		return rc;
	s->match_labels = ml;
	snprintf(f, sizeof(f), "%s.matchExpressions", field);
	if((rc = conv_requirements(a, get(sel, "matchExpressions"), false, f, &ex, &s->n_exprs, err)))
		return rc;
	s->exprs = ex;
	*out = s;
	return 0;
}

/* ---- pod spec ---------------------------------------------------------- */

static int conv_tolerations(arena *a, json_object *tl, sched_pod_spec *p, prd_err *err)
{
	size_t i, n = arr_len(tl);
	sched_toleration *t;
	int rc;
	if((rc = want_type(tl, json_type_array, "spec.tolerations", "a list", err)))
		return rc;
	t = arena_array(a, n + 1, sizeof(*t));
	if(!t)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(tl, i);
		const char *op = NULL, *eff = NULL;
		char f[64];
		snprintf(f, sizeof(f), "spec.tolerations[%zu]", i);
		if((rc = want_type(e, json_type_object, f, "an object", err)) ||
		   (rc = get_string(e, "key", f, &t[i].key, err)) ||
		   (rc = get_string(e, "operator", f, &op, err)) ||
		   (rc = get_string(e, "value", f, &t[i].value, err)) ||
		   (rc = get_string(e, "effect", f, &eff, err)))
			return rc;
		if(!op || !*op || !strcmp(op, "Equal"))
			t[i].op = SCHED_TOL_EQUAL;
		else if(!strcmp(op, "Exists"))
			t[i].op = SCHED_TOL_EXISTS;
		else
			return prd_err_set(err, PRD_EINVAL, "%s.operator: unknown operator \"%s\"", f, op);
		if(pr__conv_effect(eff, &t[i].effect))
			return prd_err_set(err, PRD_EINVAL, "%s.effect: unknown effect \"%s\"", f, eff);
	}
	p->tolerations = t;
	p->n_tolerations = n;
	return 0;
}

static int conv_node_affinity(arena *a, json_object *na, sched_pod_spec *p, prd_err *err)
{
	json_object *req = get(na, "requiredDuringSchedulingIgnoredDuringExecution"), *terms;
	sched_node_term *t;
	size_t i, n;
	int rc;
	if(!req)
		return 0;
	terms = get(req, "nodeSelectorTerms");
	if((rc = want_type(terms, json_type_array, "spec.affinity.nodeAffinity.required.nodeSelectorTerms",
			   "a list", err)))
		return rc;
	n = arr_len(terms);
	t = arena_array(a, n + 1, sizeof(*t));
	if(!t)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		json_object *term = json_object_array_get_idx(terms, i);
		sched_requirement *r;
		char f[128];
		snprintf(f, sizeof(f), "spec.affinity.nodeAffinity.required.nodeSelectorTerms[%zu]", i);
		if(arr_len(get(term, "matchFields")))
			return prd_err_set(err, PRD_EUNSUPPORTED, "%s.matchFields: not supported by the simulator", f);
		strncat(f, ".matchExpressions", sizeof(f) - strlen(f) - 1);
		if((rc = conv_requirements(a, get(term, "matchExpressions"), true, f, &r, &t[i].n_exprs, err)))
			return rc;
		t[i].exprs = r;
	}
	p->affinity_terms = t;
	p->n_affinity_terms = n;
	p->has_node_affinity = true;
	return 0;
}

static int conv_pod_terms(arena *a, json_object *aff, const char *field, const sched_pod_term **out,
			  size_t *nout, prd_err *err)
{
	json_object *req = get(aff, "requiredDuringSchedulingIgnoredDuringExecution");
	sched_pod_term *t;
	size_t i, j, n = arr_len(req);
	int rc;
	*out = NULL;
	*nout = 0;
	if((rc = want_type(req, json_type_array, field, "a list", err)))
		return rc;
	if(!n)
		return 0;
	t = arena_array(a, n, sizeof(*t));
	if(!t)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(req, i), *nss, *nsel;
		sched_label_selector *ls;
		const char **names;
		char f[160];
		snprintf(f, sizeof(f), "%s[%zu]", field, i);
		if((rc = get_string(e, "topologyKey", f, &t[i].topology_key, err)))
			return rc;
		if(!t[i].topology_key)
			return prd_err_set(err, PRD_EINVAL, "%s.topologyKey: required", f);
		if(strcmp(t[i].topology_key, SCHED_KEY_HOSTNAME) && strcmp(t[i].topology_key, SCHED_KEY_ZONE))
			return prd_err_set(err, PRD_EUNSUPPORTED, "%s.topologyKey: \"%s\" is not supported "
					   "(only %s and %s)", f, t[i].topology_key, SCHED_KEY_HOSTNAME, SCHED_KEY_ZONE);
		strncat(f, ".labelSelector", sizeof(f) - strlen(f) - 1);
		if((rc = pr_conv_label_selector(a, get(e, "labelSelector"), f, &ls, err)))
			return rc;
		t[i].selector = ls;
		nsel = get(e, "namespaceSelector");
		if(nsel) {
			if(!json_object_is_type(nsel, json_type_object) || json_object_object_length(nsel) != 0)
				return prd_err_set(err, PRD_EUNSUPPORTED,
						   "%s[%zu].namespaceSelector: only {} (all namespaces) is supported", field, i);
			t[i].all_namespaces = true;
		}
		nss = get(e, "namespaces");
		t[i].n_namespaces = arr_len(nss);
		names = arena_array(a, t[i].n_namespaces + 1, sizeof(*names));
		if(!names)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		for(j = 0; j < t[i].n_namespaces; j++) {
			json_object *x = json_object_array_get_idx(nss, j);
			if(!json_object_is_type(x, json_type_string))
				return prd_err_set(err, PRD_EINVAL, "%s[%zu].namespaces[%zu]: must be a string", field, i, j);
			names[j] = json_object_get_string(x);
		}
		t[i].namespaces = names;
	}
	*out = t;
	*nout = n;
	return 0;
}

/* matchLabelKeys: the pod's own values of those labels are ANDed into the
 * constraint's selector, as kube-scheduler does. */
static int add_match_label_keys(arena *a, json_object *keys, const sched_pod_spec *p, sched_spread *sp,
				const char *field, prd_err *err)
{
	sched_label_selector *ns;
	sched_label *ml;
	size_t i, n = arr_len(keys), have;
	if(!n)
		return 0;
	if(!sp->selector)
		return 0;
	have = sp->selector->n_match_labels;
	ns = arena_alloc(a, sizeof(*ns));
	ml = arena_array(a, have + n, sizeof(*ml));
	if(!ns || !ml)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	*ns = *sp->selector;
	if(have)
		memcpy(ml, sp->selector->match_labels, have * sizeof(*ml));
	for(i = 0; i < n; i++) {
		json_object *k = json_object_array_get_idx(keys, i);
		size_t j;
		if(!json_object_is_type(k, json_type_string))
			return prd_err_set(err, PRD_EINVAL, "%s.matchLabelKeys[%zu]: must be a string", field, i);
		for(j = 0; j < p->n_labels; j++) {
			if(!strcmp(p->labels[j].key, json_object_get_string(k))) {
				ml[have].key = p->labels[j].key;
				ml[have].value = p->labels[j].value;
				have++;
				break;
			}
		}
	}
	ns->match_labels = ml;
	ns->n_match_labels = have;
	sp->selector = ns;
	return 0;
}

/* nodeTaintsPolicy and nodeAffinityPolicy of spread constraint i. */
static int conv_spread_policies(json_object *e, sched_spread *s, size_t i, prd_err *err)
{
	const char *taints = NULL, *aff = NULL;
	char f[96];
	int rc;
	snprintf(f, sizeof(f), "spec.topologySpreadConstraints[%zu]", i);
	if((rc = get_string(e, "nodeTaintsPolicy", f, &taints, err)) ||
	   (rc = get_string(e, "nodeAffinityPolicy", f, &aff, err)))
		return rc;
	if(taints && strcmp(taints, "Honor") && strcmp(taints, "Ignore"))
		return prd_err_set(err, PRD_EINVAL, "%s.nodeTaintsPolicy: \"%s\" is not Honor or Ignore", f, taints);
	if(aff && strcmp(aff, "Honor") && strcmp(aff, "Ignore"))
		return prd_err_set(err, PRD_EINVAL, "%s.nodeAffinityPolicy: \"%s\" is not Honor or Ignore", f, aff);
	s->honor_taints = taints && !strcmp(taints, "Honor");
	s->ignore_affinity = aff && !strcmp(aff, "Ignore");
	return 0;
}

static int conv_spread(arena *a, json_object *tsc, sched_pod_spec *p, prd_err *err)
{
	size_t i, n = arr_len(tsc);
	sched_spread *s;
	int rc;
	if((rc = want_type(tsc, json_type_array, "spec.topologySpreadConstraints", "a list", err)))
		return rc;
	if(!n)
		return 0;
	s = arena_array(a, n, sizeof(*s));
	if(!s)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(tsc, i), *v;
		const char *when = NULL;
		sched_label_selector *ls;
		char f[96];
		snprintf(f, sizeof(f), "spec.topologySpreadConstraints[%zu]", i);
		if((rc = get_string(e, "topologyKey", f, &s[i].topology_key, err)) ||
		   (rc = get_string(e, "whenUnsatisfiable", f, &when, err)))
			return rc;
		if(!s[i].topology_key)
			return prd_err_set(err, PRD_EINVAL, "%s.topologyKey: required", f);
		v = get(e, "maxSkew");
		if(!v || !json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
		   json_object_get_int64(v) > INT32_MAX)
			return prd_err_set(err, PRD_EINVAL, "%s.maxSkew: must be an integer >= 1", f);
		s[i].max_skew = (int32_t)json_object_get_int64(v);
		v = get(e, "minDomains");
		if(v && (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
			 json_object_get_int64(v) > INT32_MAX))
			return prd_err_set(err, PRD_EINVAL, "%s.minDomains: must be an integer >= 1", f);
		s[i].min_domains = v ? (int32_t)json_object_get_int64(v) : 0;
		if(!when || !strcmp(when, "DoNotSchedule"))
			s[i].when = SCHED_DO_NOT_SCHEDULE;
		else if(!strcmp(when, "ScheduleAnyway"))
			s[i].when = SCHED_SCHEDULE_ANYWAY;
		else
			return prd_err_set(err, PRD_EINVAL, "%s.whenUnsatisfiable: unknown value \"%s\"", f, when);
		if(s[i].when == SCHED_DO_NOT_SCHEDULE && strcmp(s[i].topology_key, SCHED_KEY_HOSTNAME) &&
		   strcmp(s[i].topology_key, SCHED_KEY_ZONE))
			return prd_err_set(err, PRD_EUNSUPPORTED, "%s.topologyKey: \"%s\" is not supported "
					   "(only %s and %s)", f, s[i].topology_key, SCHED_KEY_HOSTNAME, SCHED_KEY_ZONE);
		strncat(f, ".labelSelector", sizeof(f) - strlen(f) - 1);
		if((rc = pr_conv_label_selector(a, get(e, "labelSelector"), f, &ls, err)))
			return rc;
		s[i].selector = ls;
		if((rc = add_match_label_keys(a, get(e, "matchLabelKeys"), p, &s[i], f, err)) ||
		   (rc = conv_spread_policies(e, &s[i], i, err)))
			return rc;
	}
	p->spread = s;
	p->n_spread = n;
	return 0;
}

/* Containers, sidecars, init containers and their host ports. */
static int conv_containers(arena *a, json_object *spec, sched_pod_spec *p, prd_err *err)
{
	json_object *cs = get(spec, "containers"), *ics = get(spec, "initContainers");
	size_t nc = arr_len(cs), ni = arr_len(ics), i, j, nports = 0;
	sched_container *c, *ic;
	sched_res *over = NULL, *eff;
	size_t nover = 0, neff = 0;
	sched_host_port *hp;
	int rc;

	if((rc = want_type(cs, json_type_array, "spec.containers", "a list", err)) ||
	   (rc = want_type(ics, json_type_array, "spec.initContainers", "a list", err)))
		return rc;
	c = arena_array(a, nc + 1, sizeof(*c));
	ic = arena_array(a, ni + 1, sizeof(*ic));
	eff = arena_array(a, SCHED_RES_MAX, sizeof(*eff));
	if(!c || !ic || !eff)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < nc; i++) {
		char f[64];
		json_object *ct = json_object_array_get_idx(cs, i);
		snprintf(f, sizeof(f), "spec.containers[%zu]", i);
		if((rc = want_type(ct, json_type_object, f, "an object", err)) ||
		   (rc = pr__conv_container_requests(a, ct, f, &c[i], err)))
			return rc;
		nports += arr_len(get(ct, "ports"));
	}
	for(i = 0; i < ni; i++) {
		char f[64];
		const char *rp = NULL;
		json_object *ct = json_object_array_get_idx(ics, i);
		snprintf(f, sizeof(f), "spec.initContainers[%zu]", i);
		if((rc = want_type(ct, json_type_object, f, "an object", err)) ||
		   (rc = pr__conv_container_requests(a, ct, f, &ic[i], err)) ||
		   (rc = get_string(ct, "restartPolicy", f, &rp, err)))
			return rc;
		ic[i].restartable = rp && !strcmp(rp, "Always");
		if(ic[i].restartable)
			nports += arr_len(get(ct, "ports"));
	}
	if((rc = pr_conv_resources(a, get(spec, "overhead"), "spec.overhead", &over, &nover, err)))
		return rc;
	if((rc = sched_pod_requests(c, nc, ic, ni, over, nover, eff, &neff, err)))
		return rc;
	p->requests = eff;
	p->n_requests = neff;

	hp = arena_array(a, nports + 1, sizeof(*hp));
	if(!hp)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	nports = 0;
	for(i = 0; i < nc + ni; i++) {
		json_object *ct = i < nc ? json_object_array_get_idx(cs, i) : json_object_array_get_idx(ics, i - nc);
		json_object *ports = get(ct, "ports");
		if(i >= nc && !ic[i - nc].restartable)
			continue;
		for(j = 0; j < arr_len(ports); j++) {
			json_object *pt = json_object_array_get_idx(ports, j), *hv = get(pt, "hostPort");
			const char *proto = NULL;
			char f[80];
			snprintf(f, sizeof(f), "spec.containers[%zu].ports[%zu]", i, j);
			if(!hv)
				continue;
			if(!json_object_is_type(hv, json_type_int) || json_object_get_int64(hv) < 0 ||
			   json_object_get_int64(hv) > 65535)
				return prd_err_set(err, PRD_EINVAL, "%s.hostPort: must be 0..65535", f);
			if(json_object_get_int64(hv) == 0)
				continue;
			if((rc = get_string(pt, "protocol", f, &proto, err)) ||
			   (rc = get_string(pt, "hostIP", f, &hp[nports].host_ip, err)))
				return rc;
			hp[nports].port = (int32_t)json_object_get_int64(hv);
			if(!proto || !strcmp(proto, "TCP"))
				hp[nports].proto = SCHED_PROTO_TCP;
			else if(!strcmp(proto, "UDP"))
				hp[nports].proto = SCHED_PROTO_UDP;
			else if(!strcmp(proto, "SCTP"))
				hp[nports].proto = SCHED_PROTO_SCTP;
			else
				return prd_err_set(err, PRD_EINVAL, "%s.protocol: unknown protocol \"%s\"", f, proto);
			nports++;
		}
	}
	p->host_ports = hp;
	p->n_host_ports = nports;
	return 0;
}

/* Fields that matter to scheduling and that the simulation does not model
 * (docs/user-guide.md, "What the simulation checks"): a pod another
 * scheduler places cannot be answered (PRD_EUNSUPPORTED, never a wrong
 * yes); DRA claims are pr_dra_pod's; volumes from PersistentVolumeClaims
 * and generic ephemeral volumes are answered, with a caveat saying they
 * were not checked. */
static int conv_not_modelled(arena *a, json_object *spec, sched_pod_spec *p, prd_err *err)
{
	json_object *vols = get(spec, "volumes");
	const char *sched = NULL;
	size_t i, n = arr_len(vols);
	buf b;
	int rc;
	if((rc = get_string(spec, "schedulerName", "spec", &sched, err)))
		return rc;
	if(sched && *sched && strcmp(sched, "default-scheduler"))
		return prd_err_set(err, PRD_EUNSUPPORTED,
				   "spec.schedulerName \"%.100s\": these pods are placed by another scheduler, whose "
				   "decisions provreqd does not simulate",
				   sched);
	buf_init(&b);
	for(i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(vols, i), *pvc = get(v, "persistentVolumeClaim");
		const char *name = json_object_get_string(get(pvc ? pvc : v, pvc ? "claimName" : "name"));
		if(pvc || get(v, "ephemeral"))
			buf_printf(&b, "%s%s %s", b.len ? ", " : "", pvc ? "PersistentVolumeClaim" : "ephemeral volume",
				   name ? name : "?");
	}
	if(b.len) {
		bool ok = buf_printf(&b, " (volume binding is not simulated)") == 0;
		p->caveat = ok ? arena_strdup(a, buf_str(&b)) : NULL;
		buf_free(&b);
		if(!p->caveat)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	buf_free(&b);
	return 0;
}

int pr_conv_pod(arena *a, json_object *spec, json_object *metadata, const char *ns, sched_pod_spec *p,
		prd_err *err)
{
	return pr_conv_pod_dra(a, spec, metadata, ns, NULL, p, err);
}

int pr_conv_pod_dra(arena *a, json_object *spec, json_object *metadata, const char *ns, const pr_dra *dra,
		    sched_pod_spec *p, prd_err *err)
{
	json_object *aff;
	sched_label *l;
	int rc;

	memset(p, 0, sizeof(*p));
	if(!spec || !json_object_is_type(spec, json_type_object))
		return prd_err_set(err, PRD_EINVAL, "spec: missing or not an object");
	p->namespace = ns ? ns : "default";
	if((rc = pr__conv_labels(a, get(metadata, "labels"), "metadata.labels", &l, &p->n_labels, err)))
		return rc;
	p->labels = l;
	if((rc = get_string(spec, "nodeName", "spec", &p->node_name, err)))
		return rc;
	if(p->node_name && !*p->node_name)
		p->node_name = NULL;
	if((rc = pr__conv_labels(a, get(spec, "nodeSelector"), "spec.nodeSelector", &l, &p->n_node_selector, err)))
		return rc;
	p->node_selector = l;
	if((rc = conv_containers(a, spec, p, err)) ||
	   (rc = conv_tolerations(a, get(spec, "tolerations"), p, err)))
		return rc;
	aff = get(spec, "affinity");
	if((rc = want_type(aff, json_type_object, "spec.affinity", "an object", err)) ||
	   (rc = conv_node_affinity(a, get(aff, "nodeAffinity"), p, err)) ||
	   (rc = conv_pod_terms(a, get(aff, "podAffinity"),
				"spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
				&p->pod_affinity, &p->n_pod_affinity, err)) ||
	   (rc = conv_pod_terms(a, get(aff, "podAntiAffinity"),
				"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
				&p->pod_anti_affinity, &p->n_pod_anti_affinity, err)) ||
	   (rc = conv_spread(a, get(spec, "topologySpreadConstraints"), p, err)) ||
	   (rc = conv_not_modelled(a, spec, p, err)) ||
	   (rc = pr_dra_pod(dra, a, spec, p->namespace, p, err)))
		return rc;
	return sched_pod_validate(p, err);
}

/* ---- decoded objects --------------------------------------------------- */

static void put_json(void *o)
{
	json_object_put(o);
}

int pr_conv_kube_pod(arena *a, const kube_pod *p, sched_pod_spec *out, prd_err *err)
{
	sched_res *req;
	sched_host_port *hp;
	size_t i;
	int rc;
	memset(out, 0, sizeof(*out));
	out->namespace = p->meta.ns;
	out->labels = pr__conv_kv_labels(a, p->labels, p->nlabels);
	out->n_labels = p->nlabels;
	hp = arena_array(a, (size_t)p->nhost_ports + 1, sizeof(*hp));
	if(!out->labels || !hp)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	rc = pr_conv_kube_res(a, p->requests, p->nrequests, "requests", &req, &out->n_requests, err);
	if(rc)
		return prd_err_prefix(err, "Pod %s/%s", p->meta.ns, p->meta.name);
	/* The snapshot counts the pod slot itself. */
	for(i = 0; i < out->n_requests; i++) {
		if(!strcmp(req[i].name, "pods")) {
			req[i] = req[out->n_requests - 1];
			out->n_requests--;
			break;
		}
	}
	out->requests = req;
	for(i = 0; i < p->nhost_ports; i++) {
		hp[i].port = p->host_ports[i].port;
		hp[i].proto = p->host_ports[i].protocol == 1 ? SCHED_PROTO_UDP
			      : p->host_ports[i].protocol == 2 ? SCHED_PROTO_SCTP : SCHED_PROTO_TCP;
		hp[i].host_ip = p->host_ports[i].host_ip;
	}
	out->host_ports = hp;
	out->n_host_ports = p->nhost_ports;
	if(p->affinity_json) {
		/* Only required pod (anti-)affinity matters for pods already bound.
		 * The specs borrow strings from the parsed tree, so the arena
		 * releases it when it is freed. */
		json_object *aff = json_tokener_parse(p->affinity_json);
		if(!aff)
			return prd_err_set(err, PRD_EINVAL, "Pod %s/%s: spec.affinity is not valid JSON", p->meta.ns,
					   p->meta.name);
		if(arena_defer(a, put_json, aff))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		rc = conv_pod_terms(a, get(aff, "podAffinity"), "spec.affinity.podAffinity", &out->pod_affinity,
				    &out->n_pod_affinity, err);
		if(!rc)
			rc = conv_pod_terms(a, get(aff, "podAntiAffinity"), "spec.affinity.podAntiAffinity",
					    &out->pod_anti_affinity, &out->n_pod_anti_affinity, err);
		if(rc)
			return prd_err_prefix(err, "Pod %s/%s", p->meta.ns, p->meta.name);
	}
	return 0;
}

/* Pod → kube_pod: identity, placement, consume annotations and the
 * scheduling-relevant parts of the spec, with requests summed the way the
 * scheduler sums them (k8s.io/component-helpers/resource PodRequests). */
#include "kube/objects.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

/* A scratch resource list while summing; names are borrowed from the JSON
 * being decoded. */
typedef struct rlist {
	struct {
		const char *name;
		qty q;
	} *v;
	size_t n, cap;
} rlist;

static void rl_free(rlist *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

static qty *rl_slot(rlist *l, const char *name, int *rc)
{
	size_t i;
	*rc = PRD_OK;
	for(i = 0; i < l->n; i++)
		if(strcmp(l->v[i].name, name) == 0)
			return &l->v[i].q;
	if(l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 8;
		void *p = realloc(l->v, ncap * sizeof(*l->v));
		if(!p) {
			*rc = PRD_ENOMEM;
			return NULL;
		}
		l->v = p;
		l->cap = ncap;
	}
	l->v[l->n].name = name;
	memset(&l->v[l->n].q, 0, sizeof(qty));
	return &l->v[l->n++].q;
}

/* dst[name] += q */
static int rl_add(rlist *dst, const char *name, const qty *q)
{
	int rc;
	qty *s = rl_slot(dst, name, &rc);
	if(!s)
		return rc;
	return qty_add(s, q);
}

static int rl_add_all(rlist *dst, const rlist *src)
{
	size_t i;
	int rc;
	for(i = 0; i < src->n; i++)
		if((rc = rl_add(dst, src->v[i].name, &src->v[i].q)) != 0)
			return rc;
	return PRD_OK;
}

/* dst[name] = max(dst[name], src[name]) for every name in src. */
static int rl_max_all(rlist *dst, const rlist *src)
{
	size_t i;
	int rc;
	for(i = 0; i < src->n; i++) {
		qty *s = rl_slot(dst, src->v[i].name, &rc);
		if(!s)
			return rc;
		if(qty_cmp(&src->v[i].q, s) > 0)
			*s = src->v[i].q;
	}
	return PRD_OK;
}

/* Read a container's (or the pod's) resources.requests into l. */
static int read_requests(kube__dctx *c, json_object *holder, const char *path, rlist *l)
{
	json_object *res, *req;
	char sub[160];
	int rc;

	l->n = 0;
	snprintf(sub, sizeof(sub), "%s.resources", path);
	if((rc = kube__obj(c, holder, "resources", path, &res)) != 0 ||
	   (rc = kube__obj(c, res, "requests", sub, &req)) != 0)
		return rc;
	if(!req)
		return PRD_OK;
	json_object_object_foreach(req, k, v) {
		char p[256];
		qty q;
		snprintf(p, sizeof(p), "%s.requests.%s", sub, k);
		if((rc = kube__qty(c, v, p, &q)) != 0)
			return rc;
		if((rc = rl_add(l, k, &q)) != 0)
			return kube__fail(c, rc, p, rc == PRD_ENOMEM ? "out of memory" : "sum out of range");
	}
	return PRD_OK;
}

static bool is_sidecar(json_object *ctr)
{
	json_object *rp = NULL;
	return json_object_object_get_ex(ctr, "restartPolicy", &rp) &&
	       json_object_is_type(rp, json_type_string) &&
	       strcmp(json_object_get_string(rp), "Always") == 0;
}

/* Collect the host ports of one container. */
static int read_ports(kube__dctx *c, json_object *ctr, const char *path, kube_host_port **hp, uint16_t *n,
		      size_t *cap)
{
	json_object *ports;
	size_t i, len;
	char p[160];
	int rc;

	if((rc = kube__arr(c, ctr, "ports", path, &ports)) != 0 || !ports)
		return rc;
	len = json_object_array_length(ports);
	for(i = 0; i < len; i++) {
		json_object *pt = json_object_array_get_idx(ports, i);
		int64_t port = 0;
		bool has = false;
		const char *proto = NULL;
		kube_host_port *h;

		snprintf(p, sizeof(p), "%s.ports[%zu]", path, i);
		if(!pt || !json_object_is_type(pt, json_type_object))
			return kube__fail(c, PRD_EINVAL, p, "expected an object");
		if((rc = kube__int(c, pt, "hostPort", p, &port, &has)) != 0)
			return rc;
		if(!has || port == 0)
			continue;
		if(port < 0 || port > 65535)
			return kube__fail(c, PRD_EINVAL, p, "hostPort %lld out of range", (long long)port);
		if((rc = kube__str(c, pt, "protocol", p, &proto)) != 0)
			return rc;
		if(*n == UINT16_MAX)
			return kube__fail(c, PRD_EINVAL, p, "too many host ports");
		if(*n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 2;
			void *np = realloc(*hp, ncap * sizeof(**hp));
			if(!np)
				return kube__fail(c, PRD_ENOMEM, p, "out of memory");
			*hp = np;
			*cap = ncap;
		}
		h = &(*hp)[*n];
		memset(h, 0, sizeof(*h));
		h->port = (int32_t)port;
		if(!proto || strcmp(proto, "TCP") == 0)
			h->protocol = 0;
		else if(strcmp(proto, "UDP") == 0)
			h->protocol = 1;
		else if(strcmp(proto, "SCTP") == 0)
			h->protocol = 2;
		else
			return kube__fail(c, PRD_EINVAL, p, "unknown protocol \"%.32s\"", proto);
		(*n)++;
		if((rc = kube__istr(c, pt, "hostIP", p, &h->host_ip)) != 0)
			return rc;
	}
	return PRD_OK;
}

/* Add the requests of spec.containers to `total` and collect their host
 * ports. `cur` is scratch space; *pcap is the capacity of the ports. */
static int sum_containers(kube__dctx *c, kube_pod *pod, json_object *ctrs, rlist *total, rlist *cur,
			  size_t *pcap)
{
	size_t i, len = ctrs ? json_object_array_length(ctrs) : 0;
	char p[64];
	int rc = PRD_OK;

	for(i = 0; i < len && !rc; i++) {
		json_object *ct = json_object_array_get_idx(ctrs, i);
		snprintf(p, sizeof(p), "spec.containers[%zu]", i);
		if(!ct || !json_object_is_type(ct, json_type_object)) {
			rc = kube__fail(c, PRD_EINVAL, p, "expected an object");
			break;
		}
		if(!(rc = read_requests(c, ct, p, cur)) && (rc = rl_add_all(total, cur)) != 0)
			rc = kube__fail(c, rc, p, "requests: sum out of range");
		if(!rc)
			rc = read_ports(c, ct, p, &pod->host_ports, &pod->nhost_ports, pcap);
	}
	return rc;
}

/* spec.initContainers: sidecars add to `total` (and their host ports are
 * collected); the largest init container step, counting the sidecars
 * started before it, is the floor of `total`. */
static int sum_init_containers(kube__dctx *c, kube_pod *pod, json_object *inits, rlist *total, rlist *cur,
			       size_t *pcap)
{
	rlist side = { 0 }, initmax = { 0 }, tmp = { 0 };
	size_t i, len = inits ? json_object_array_length(inits) : 0;
	char p[64];
	int rc = PRD_OK;

	for(i = 0; i < len && !rc; i++) {
		json_object *ct = json_object_array_get_idx(inits, i);
		snprintf(p, sizeof(p), "spec.initContainers[%zu]", i);
		if(!ct || !json_object_is_type(ct, json_type_object)) {
			rc = kube__fail(c, PRD_EINVAL, p, "expected an object");
			break;
		}
		if((rc = read_requests(c, ct, p, cur)) != 0)
			break;
		tmp.n = 0;
		if(is_sidecar(ct)) {
			/* A sidecar runs beside everything after it: it adds to
			 * the pod total and to every later init container. */
			if((rc = rl_add_all(total, cur)) != 0 || (rc = rl_add_all(&side, cur)) != 0 ||
			   (rc = rl_add_all(&tmp, &side)) != 0) {
				rc = kube__fail(c, rc, p, "requests: sum out of range");
				break;
			}
			rc = read_ports(c, ct, p, &pod->host_ports, &pod->nhost_ports, pcap);
		} else if((rc = rl_add_all(&tmp, cur)) != 0 || (rc = rl_add_all(&tmp, &side)) != 0) {
			rc = kube__fail(c, rc, p, "requests: sum out of range");
			break;
		}
		if(!rc && (rc = rl_max_all(&initmax, &tmp)) != 0)
			rc = kube__fail(c, rc, p, "out of memory");
	}
	if(!rc && (rc = rl_max_all(total, &initmax)) != 0)
		rc = kube__fail(c, rc, "spec", "out of memory");
	rl_free(&side);
	rl_free(&initmax);
	rl_free(&tmp);
	return rc;
}

/* Pod-level requests (spec.resources) replace the container sum for the
 * resources they name that pod-level resources support. */
static int apply_pod_requests(kube__dctx *c, json_object *spec, rlist *total, rlist *cur)
{
	size_t i;
	int rc;

	if((rc = read_requests(c, spec, "spec", cur)) != 0)
		return rc;
	for(i = 0; i < cur->n && !rc; i++) {
		const char *n = cur->v[i].name;
		qty *s;
		if(strcmp(n, "cpu") && strcmp(n, "memory") && !str_starts_with(n, "hugepages-"))
			continue;
		s = rl_slot(total, n, &rc);
		if(s)
			*s = cur->v[i].q;
		else
			rc = kube__fail(c, rc, "spec.resources", "out of memory");
	}
	return rc;
}

/* spec.overhead adds to the total. */
static int add_overhead(kube__dctx *c, json_object *ovh, rlist *total)
{
	int rc = PRD_OK;

	json_object_object_foreach(ovh, k, v) {
		char op[160];
		qty q;
		snprintf(op, sizeof(op), "spec.overhead.%s", k);
		if((rc = kube__qty(c, v, op, &q)) != 0)
			break;
		if((rc = rl_add(total, k, &q)) != 0) {
			rc = kube__fail(c, rc, op, "sum out of range");
			break;
		}
	}
	return rc;
}

/* Store the summed requests in the pod, names interned. */
static int store_requests(kube__dctx *c, kube_pod *pod, const rlist *total)
{
	size_t i;

	if(total->n > UINT16_MAX)
		return kube__fail(c, PRD_EINVAL, "spec", "too many resources");
	if(!(pod->requests = calloc(total->n, sizeof(kube_res))))
		return kube__fail(c, PRD_ENOMEM, "spec", "out of memory");
	for(i = 0; i < total->n; i++) {
		pod->requests[i].q = total->v[i].q;
		pod->requests[i].name = kube_intern_get(c->in, total->v[i].name);
		if(!pod->requests[i].name)
			return kube__fail(c, PRD_ENOMEM, "spec", "out of memory");
		pod->nrequests++;
	}
	return PRD_OK;
}

/* Sum requests over containers, sidecars and init containers, and collect
 * host ports (containers and sidecars; plain init containers have exited by
 * the time the pod's ports are bound). */
static int pod_requests(kube__dctx *c, kube_pod *pod, json_object *spec)
{
	json_object *ctrs, *inits, *ovh, *podres;
	rlist total = { 0 }, cur = { 0 };
	size_t pcap = 0;
	int rc;

	if((rc = kube__arr(c, spec, "containers", "spec", &ctrs)) != 0 ||
	   (rc = kube__arr(c, spec, "initContainers", "spec", &inits)) != 0 ||
	   (rc = kube__obj(c, spec, "overhead", "spec", &ovh)) != 0 ||
	   (rc = kube__obj(c, spec, "resources", "spec", &podres)) != 0)
		return rc;

	rc = sum_containers(c, pod, ctrs, &total, &cur, &pcap);
	if(!rc)
		rc = sum_init_containers(c, pod, inits, &total, &cur, &pcap);
	if(!rc && podres)
		rc = apply_pod_requests(c, spec, &total, &cur);
	if(!rc && ovh)
		rc = add_overhead(c, ovh, &total);
	if(!rc && total.n)
		rc = store_requests(c, pod, &total);
	rl_free(&total);
	rl_free(&cur);
	return rc;
}

static int pod_tolerations(kube__dctx *c, kube_pod *pod, json_object *spec)
{
	json_object *arr;
	size_t i, len;
	char p[64];
	int rc;

	if((rc = kube__arr(c, spec, "tolerations", "spec", &arr)) != 0 || !arr)
		return rc;
	len = json_object_array_length(arr);
	if(len > UINT16_MAX)
		return kube__fail(c, PRD_EINVAL, "spec.tolerations", "too many");
	if(!len)
		return PRD_OK;
	pod->tolerations = calloc(len, sizeof(*pod->tolerations));
	if(!pod->tolerations)
		return kube__fail(c, PRD_ENOMEM, "spec.tolerations", "out of memory");
	for(i = 0; i < len; i++) {
		json_object *t = json_object_array_get_idx(arr, i);
		kube_toleration *to = &pod->tolerations[i];
		const char *op = NULL, *eff = NULL, *key = NULL;
		snprintf(p, sizeof(p), "spec.tolerations[%zu]", i);
		if(!t || !json_object_is_type(t, json_type_object))
			return kube__fail(c, PRD_EINVAL, p, "expected an object");
		pod->ntolerations++;
		if((rc = kube__str(c, t, "key", p, &key)) != 0 || (rc = kube__str(c, t, "operator", p, &op)) != 0 ||
		   (rc = kube__str(c, t, "effect", p, &eff)) != 0 ||
		   (rc = kube__int(c, t, "tolerationSeconds", p, &to->seconds, &to->has_seconds)) != 0)
			return rc;
		if(!op || !*op || strcmp(op, "Equal") == 0)
			to->op = KUBE_TOL_EQUAL;
		else if(strcmp(op, "Exists") == 0)
			to->op = KUBE_TOL_EXISTS;
		else
			return kube__fail(c, PRD_EINVAL, p, "unknown operator \"%.32s\"", op);
		if((rc = kube__effect(c, eff, true, p, &to->effect)) != 0)
			return rc;
		if(key && *key && (rc = kube__istr(c, t, "key", p, &to->key)) != 0)
			return rc;
		if((rc = kube__istr(c, t, "value", p, &to->value)) != 0)
			return rc;
	}
	return PRD_OK;
}

/* The JSON text of a non-empty object or array, owned by the caller. */
static int raw_json(kube__dctx *c, json_object *v, const char *path, char **out)
{
	*out = NULL;
	if(!v)
		return PRD_OK;
	if(json_object_is_type(v, json_type_object) && json_object_object_length(v) == 0)
		return PRD_OK;
	if(json_object_is_type(v, json_type_array) && json_object_array_length(v) == 0)
		return PRD_OK;
	*out = str_dup(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
	return *out ? PRD_OK : kube__fail(c, PRD_ENOMEM, path, "out of memory");
}

static int pod_owner(kube__dctx *c, kube_pod *pod, json_object *md)
{
	json_object *refs, *pick = NULL;
	size_t i, len;
	int rc;

	if((rc = kube__arr(c, md, "ownerReferences", "metadata", &refs)) != 0 || !refs)
		return rc;
	len = json_object_array_length(refs);
	for(i = 0; i < len; i++) {
		json_object *r = json_object_array_get_idx(refs, i);
		bool ctl = false;
		if(!r || !json_object_is_type(r, json_type_object))
			return kube__fail(c, PRD_EINVAL, "metadata.ownerReferences", "expected objects");
		if((rc = kube__bool(c, r, "controller", "metadata.ownerReferences", &ctl)) != 0)
			return rc;
		if(!pick || ctl)
			pick = r;
		if(ctl)
			break;
	}
	if(!pick)
		return PRD_OK;
	if((rc = kube__istr(c, pick, "kind", "metadata.ownerReferences", &pod->owner_kind)) != 0)
		return rc;
	return kube__istr(c, pick, "name", "metadata.ownerReferences", &pod->owner_name);
}

static int pod_status(kube__dctx *c, kube_pod *pod, json_object *obj)
{
	json_object *st, *conds;
	const char *phase = NULL;
	size_t i, len;
	int rc;

	if((rc = kube__obj(c, obj, "status", "", &st)) != 0 || !st)
		return rc;
	if((rc = kube__str(c, st, "phase", "status", &phase)) != 0)
		return rc;
	if(!phase || !*phase || strcmp(phase, "Pending") == 0)
		pod->phase = KUBE_POD_PENDING;
	else if(strcmp(phase, "Running") == 0)
		pod->phase = KUBE_POD_RUNNING;
	else if(strcmp(phase, "Succeeded") == 0)
		pod->phase = KUBE_POD_SUCCEEDED;
	else if(strcmp(phase, "Failed") == 0)
		pod->phase = KUBE_POD_FAILED;
	else
		pod->phase = KUBE_POD_UNKNOWN;
	if((rc = kube__arr(c, st, "conditions", "status", &conds)) != 0 || !conds)
		return rc;
	len = json_object_array_length(conds);
	for(i = 0; i < len; i++) {
		json_object *cd = json_object_array_get_idx(conds, i);
		const char *type = NULL, *status = NULL, *reason = NULL;
		if(!cd || !json_object_is_type(cd, json_type_object))
			return kube__fail(c, PRD_EINVAL, "status.conditions", "expected objects");
		if((rc = kube__str(c, cd, "type", "status.conditions", &type)) != 0 ||
		   (rc = kube__str(c, cd, "status", "status.conditions", &status)) != 0 ||
		   (rc = kube__str(c, cd, "reason", "status.conditions", &reason)) != 0)
			return rc;
		if(str_eq(type, "PodScheduled") && str_eq(status, "False") && str_eq(reason, "Unschedulable"))
			pod->unschedulable = true;
	}
	return PRD_OK;
}

int kube__decode_pod(kube__dctx *c, json_object *obj, kube_meta **out)
{
	kube_pod *pod = calloc(1, sizeof(*pod));
	json_object *md = NULL, *spec = NULL, *labels = NULL, *ann = NULL, *sel = NULL, *v;
	int64_t prio = 0;
	int rc;

	if(!pod)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	pod->meta.kind = KUBE_KIND_POD;
	if((rc = kube__meta(c, obj, true, &pod->meta)) != 0) {
		free(pod);
		return rc;
	}
	json_object_object_get_ex(obj, "metadata", &md);
	if((rc = kube__obj(c, md, "labels", "metadata", &labels)) ||
	   (rc = kube__kvs(c, labels, "metadata.labels", NULL, &pod->labels, &pod->nlabels)) ||
	   (rc = kube__obj(c, md, "annotations", "metadata", &ann)) || (rc = pod_owner(c, pod, md)))
		goto fail;
	if(ann) {
		/* Check every annotation value is a string while looking for
		 * the ones we keep. */
		json_object_object_foreach(ann, k, av) {
			if(!av || !json_object_is_type(av, json_type_string)) {
				rc = kube__fail(c, PRD_EINVAL, "metadata.annotations", "%s: expected a string", k);
				goto fail;
			}
		}
		if(!(rc = kube__istr(c, ann, KUBE_ANN_CONSUME, "metadata.annotations", &pod->consume)) &&
		   !pod->consume)
			rc = kube__istr(c, ann, KUBE_ANN_CONSUME_OLD, "metadata.annotations", &pod->consume);
		if(!rc && !(rc = kube__istr(c, ann, KUBE_ANN_PR_CLASS, "metadata.annotations", &pod->pr_class)) &&
		   !pod->pr_class)
			rc = kube__istr(c, ann, KUBE_ANN_PR_CLASS_OLD, "metadata.annotations", &pod->pr_class);
		if(rc)
			goto fail;
	}
	if((rc = kube__obj(c, obj, "spec", "", &spec)) != 0)
		goto fail;
	if(spec) {
		const char *nn = NULL;
		bool has_prio = false;
		if((rc = kube__str(c, spec, "nodeName", "spec", &nn)) != 0)
			goto fail;
		if(nn && *nn && (rc = kube__istr(c, spec, "nodeName", "spec", &pod->node_name)) != 0)
			goto fail;
		if((rc = kube__obj(c, spec, "nodeSelector", "spec", &sel)) ||
		   (rc = kube__kvs(c, sel, "spec.nodeSelector", NULL, &pod->node_selector, &pod->nnode_selector)) ||
		   (rc = kube__int(c, spec, "priority", "spec", &prio, &has_prio)) ||
		   (rc = pod_requests(c, pod, spec)) || (rc = pod_tolerations(c, pod, spec)))
			goto fail;
		pod->priority = (int32_t)prio;
		if((rc = kube__obj(c, spec, "affinity", "spec", &v)) || (rc = raw_json(c, v, "spec.affinity", &pod->affinity_json)) ||
		   (rc = kube__arr(c, spec, "topologySpreadConstraints", "spec", &v)) ||
		   (rc = raw_json(c, v, "spec.topologySpreadConstraints", &pod->spread_json)))
			goto fail;
	}
	if((rc = pod_status(c, pod, obj)) != 0)
		goto fail;
	kube__pod_share(c->in, pod);
	*out = &pod->meta;
	return PRD_OK;
fail:
	kube__free_pod(c->in, &pod->meta);
	return rc;
}

void kube__free_pod(kube_intern *in, kube_meta *m)
{
	kube_pod *pod = (kube_pod *)m;
	kube__pod_release(in, pod);
	free((char *)(uintptr_t)m->name);
	free(pod->affinity_json);
	free(pod->spread_json);
	free(pod->host_ports);
	free(pod);
}

/* Pod request arithmetic and validation of caller-built pod specs. */
#include "sched/sched.h"
#include "util/str.h"

#include <string.h>

static int res_slot(sched_res out[SCHED_RES_MAX], size_t *n, const char *name, prd_err *e)
{
	size_t i;
	for(i = 0; i < *n; i++)
		if(strcmp(out[i].name, name) == 0)
			return (int)i;
	if(*n == SCHED_RES_MAX)
		return prd_err_set(e, PRD_ERANGE, "more than %d distinct resource names",
		                   SCHED_RES_MAX);
	out[*n].name = name;
	out[*n].value = 0;
	return (int)(*n)++;
}

static int check_res(const sched_res *r, prd_err *e)
{
	if(!r->name || !r->name[0])
		return prd_err_set(e, PRD_EINVAL, "resource without a name");
	if(r->value < 0 || r->value > SCHED_QTY_MAX)
		return prd_err_set(e, PRD_EINVAL, "resource %s: value %lld out of range [0, %lld]",
		                   r->name, (long long)r->value, (long long)SCHED_QTY_MAX);
	return 0;
}

/* acc[name] += or max= value, creating the slot. Values are bounded by
 * SCHED_QTY_MAX each, and sums of at most a few hundred containers cannot
 * overflow int64, but stay saturating to be safe against many. */
static int accumulate(sched_res acc[SCHED_RES_MAX], size_t *n, const sched_res *r,
		      size_t nr, bool take_max, prd_err *e)
{
	size_t i;
	for(i = 0; i < nr; i++) {
		int rc = check_res(&r[i], e), slot;
		if(rc)
			return rc;
		slot = res_slot(acc, n, r[i].name, e);
		if(slot < 0)
			return slot;
		if(take_max) {
			if(r[i].value > acc[slot].value)
				acc[slot].value = r[i].value;
		} else if(__builtin_add_overflow(acc[slot].value, r[i].value, &acc[slot].value)) {
			return prd_err_set(e, PRD_ERANGE, "resource %s overflows", r[i].name);
		}
	}
	return 0;
}

/* Merge `b` into `a` with max per resource. */
static int max_into(sched_res a[SCHED_RES_MAX], size_t *na, const sched_res *b, size_t nb,
		    prd_err *e)
{
	return accumulate(a, na, b, nb, true, e);
}

int sched_pod_requests(const sched_container *containers, size_t n_containers,
		       const sched_container *init_containers, size_t n_init,
		       const sched_res *overhead, size_t n_overhead,
		       sched_res out[SCHED_RES_MAX], size_t *n_out, prd_err *e)
{
	sched_res regular[SCHED_RES_MAX], sidecars[SCHED_RES_MAX], initmax[SCHED_RES_MAX];
	sched_res step[SCHED_RES_MAX];
	size_t nreg = 0, nside = 0, ninit = 0, nstep, i;
	int rc = 0;

	if(!n_out || !out || (n_containers && !containers) || (n_init && !init_containers) ||
	   (n_overhead && !overhead))
		return prd_err_set(e, PRD_EINVAL, "sched_pod_requests: NULL argument");
	*n_out = 0;
	for(i = 0; i < n_containers && !rc; i++)
		rc = accumulate(regular, &nreg, containers[i].requests, containers[i].n_requests,
		                false, e);
	for(i = 0; i < n_init && !rc; i++) {
		const sched_container *c = &init_containers[i];
		if(c->restartable) {
			/* A sidecar keeps running: it adds to everything after it,
			 * and while it starts, all earlier sidecars run too. */
			rc = accumulate(sidecars, &nside, c->requests, c->n_requests, false, e);
			if(!rc)
				rc = max_into(initmax, &ninit, sidecars, nside, e);
		} else {
			nstep = 0;
			rc = accumulate(step, &nstep, sidecars, nside, false, e);
			if(!rc)
				rc = accumulate(step, &nstep, c->requests, c->n_requests, false, e);
			if(!rc)
				rc = max_into(initmax, &ninit, step, nstep, e);
		}
	}
	if(!rc)
		rc = accumulate(regular, &nreg, sidecars, nside, false, e);
	if(!rc)
		rc = max_into(regular, &nreg, initmax, ninit, e);
	if(!rc)
		rc = accumulate(regular, &nreg, overhead, n_overhead, false, e);
	if(rc)
		return rc;
	for(i = 0; i < nreg; i++)
		if(regular[i].value > SCHED_QTY_MAX)
			return prd_err_set(e, PRD_ERANGE, "resource %s: total %lld too large",
			                   regular[i].name, (long long)regular[i].value);
	memcpy(out, regular, nreg * sizeof(*out));
	*n_out = nreg;
	return 0;
}

static int check_labels(const sched_label *l, size_t n, const char *what, prd_err *e)
{
	size_t i;
	if(n && !l)
		return prd_err_set(e, PRD_EINVAL, "%s: NULL list", what);
	for(i = 0; i < n; i++)
		if(!l[i].key || !l[i].key[0])
			return prd_err_set(e, PRD_EINVAL, "%s: empty key", what);
	return 0;
}

static int check_reqs(const sched_requirement *r, size_t n, bool node, const char *what,
		      prd_err *e)
{
	size_t i, j;
	int64_t v;
	if(n && !r)
		return prd_err_set(e, PRD_EINVAL, "%s: NULL list", what);
	for(i = 0; i < n; i++) {
		if(!r[i].key || !r[i].key[0])
			return prd_err_set(e, PRD_EINVAL, "%s: requirement without key", what);
		if(r[i].n_values && !r[i].values)
			return prd_err_set(e, PRD_EINVAL, "%s: NULL values", what);
		for(j = 0; j < r[i].n_values; j++)
			if(!r[i].values[j])
				return prd_err_set(e, PRD_EINVAL, "%s: NULL value", what);
		switch(r[i].op) {
		case SCHED_OP_IN:
		case SCHED_OP_NOT_IN:
			if(!r[i].n_values)
				return prd_err_set(e, PRD_EINVAL, "%s: key %s: In/NotIn need values",
				                   what, r[i].key);
			break;
		case SCHED_OP_EXISTS:
		case SCHED_OP_DOES_NOT_EXIST:
			if(r[i].n_values)
				return prd_err_set(e, PRD_EINVAL,
				                   "%s: key %s: Exists/DoesNotExist take no values",
				                   what, r[i].key);
			break;
		case SCHED_OP_GT:
		case SCHED_OP_LT:
			if(!node)
				return prd_err_set(e, PRD_EINVAL, "%s: key %s: Gt/Lt only in node selectors",
				                   what, r[i].key);
			if(r[i].n_values != 1 || str_to_int64(r[i].values[0], &v))
				return prd_err_set(e, PRD_EINVAL, "%s: key %s: Gt/Lt need one integer",
				                   what, r[i].key);
			break;
		default:
			return prd_err_set(e, PRD_EINVAL, "%s: key %s: unknown operator %d", what,
			                   r[i].key, (int)r[i].op);
		}
	}
	return 0;
}

static int check_selector(const sched_label_selector *s, const char *what, prd_err *e)
{
	int rc;
	if(!s)
		return 0;
	rc = check_labels(s->match_labels, s->n_match_labels, what, e);
	if(!rc)
		rc = check_reqs(s->exprs, s->n_exprs, false, what, e);
	return rc;
}

static int check_topology(const char *key, const char *what, prd_err *e)
{
	if(!key)
		return prd_err_set(e, PRD_EINVAL, "%s: no topology key", what);
	if(strcmp(key, SCHED_KEY_HOSTNAME) && strcmp(key, SCHED_KEY_ZONE))
		return prd_err_set(e, PRD_EUNSUPPORTED, "%s: topology key %s not supported", what,
		                   key);
	return 0;
}

static int check_terms(const sched_pod_term *t, size_t n, const char *what, prd_err *e)
{
	size_t i, j;
	int rc;
	if(n && !t)
		return prd_err_set(e, PRD_EINVAL, "%s: NULL list", what);
	for(i = 0; i < n; i++) {
		if((rc = check_topology(t[i].topology_key, what, e)))
			return rc;
		if((rc = check_selector(t[i].selector, what, e)))
			return rc;
		if(t[i].n_namespaces && !t[i].namespaces)
			return prd_err_set(e, PRD_EINVAL, "%s: NULL namespaces", what);
		for(j = 0; j < t[i].n_namespaces; j++)
			if(!t[i].namespaces[j])
				return prd_err_set(e, PRD_EINVAL, "%s: NULL namespace", what);
	}
	return 0;
}

static bool effect_ok(sched_effect f)
{
	return f == SCHED_EFFECT_NONE || f == SCHED_EFFECT_NO_SCHEDULE ||
	       f == SCHED_EFFECT_PREFER_NO_SCHEDULE || f == SCHED_EFFECT_NO_EXECUTE;
}

static int check_dev_requests(const sched_pod_spec *pod, prd_err *e)
{
	size_t i, k;
	if(pod->n_dev_requests && !pod->dev_requests)
		return prd_err_set(e, PRD_EINVAL, "device requests: NULL list");
	if(pod->n_dev_requests > SCHED_DEV_REQ_MAX)
		return prd_err_set(e, PRD_ERANGE, "more than %d device requests", SCHED_DEV_REQ_MAX);
	for(i = 0; i < pod->n_dev_requests; i++) {
		const sched_dev_request *q = &pod->dev_requests[i];
		if(!q->all && (q->count < 1 || q->count > SCHED_DEV_MAX))
			return prd_err_set(e, PRD_EINVAL, "device request %s: count %lld out of range [1, %d]",
			                   q->label ? q->label : "", (long long)q->count, SCHED_DEV_MAX);
		if(q->n_selectors && !q->selectors)
			return prd_err_set(e, PRD_EINVAL, "device request: NULL selector list");
		for(k = 0; k < q->n_selectors; k++)
			if(!q->selectors[k])
				return prd_err_set(e, PRD_EINVAL, "device request: NULL selector");
	}
	return 0;
}

int sched_pod_validate(const sched_pod_spec *pod, prd_err *e)
{
	size_t i;
	int rc;

	if(!pod)
		return prd_err_set(e, PRD_EINVAL, "NULL pod spec");
	if(pod->n_dev_requests && (rc = check_dev_requests(pod, e)))
		return rc;
	if(!pod->namespace)
		return prd_err_set(e, PRD_EINVAL, "pod without namespace");
	if((rc = check_labels(pod->labels, pod->n_labels, "labels", e)))
		return rc;
	if(pod->n_requests && !pod->requests)
		return prd_err_set(e, PRD_EINVAL, "requests: NULL list");
	for(i = 0; i < pod->n_requests; i++) {
		if((rc = check_res(&pod->requests[i], e)))
			return rc;
		if(strcmp(pod->requests[i].name, "pods") == 0)
			return prd_err_set(e, PRD_EINVAL, "requests: \"pods\" is implied");
	}
	if((rc = check_labels(pod->node_selector, pod->n_node_selector, "nodeSelector", e)))
		return rc;
	if(pod->n_affinity_terms && !pod->affinity_terms)
		return prd_err_set(e, PRD_EINVAL, "nodeAffinity: NULL list");
	for(i = 0; i < pod->n_affinity_terms; i++)
		if((rc = check_reqs(pod->affinity_terms[i].exprs, pod->affinity_terms[i].n_exprs,
		                    true, "nodeAffinity", e)))
			return rc;
	if(pod->n_tolerations && !pod->tolerations)
		return prd_err_set(e, PRD_EINVAL, "tolerations: NULL list");
	for(i = 0; i < pod->n_tolerations; i++) {
		const sched_toleration *t = &pod->tolerations[i];
		if(!effect_ok(t->effect))
			return prd_err_set(e, PRD_EINVAL, "toleration: unknown effect %d", (int)t->effect);
		if(t->op != SCHED_TOL_EQUAL && t->op != SCHED_TOL_EXISTS)
			return prd_err_set(e, PRD_EINVAL, "toleration: unknown operator %d", (int)t->op);
		if(t->op == SCHED_TOL_EXISTS && t->value && t->value[0])
			return prd_err_set(e, PRD_EINVAL, "toleration: Exists takes no value");
	}
	if(pod->n_host_ports && !pod->host_ports)
		return prd_err_set(e, PRD_EINVAL, "hostPorts: NULL list");
	for(i = 0; i < pod->n_host_ports; i++) {
		const sched_host_port *p = &pod->host_ports[i];
		if(p->port < 0 || p->port > 65535)
			return prd_err_set(e, PRD_EINVAL, "hostPort %d out of range", (int)p->port);
		if(p->proto != SCHED_PROTO_TCP && p->proto != SCHED_PROTO_UDP &&
		   p->proto != SCHED_PROTO_SCTP)
			return prd_err_set(e, PRD_EINVAL, "hostPort: unknown protocol %d", (int)p->proto);
	}
	if((rc = check_terms(pod->pod_affinity, pod->n_pod_affinity, "podAffinity", e)))
		return rc;
	if((rc = check_terms(pod->pod_anti_affinity, pod->n_pod_anti_affinity, "podAntiAffinity",
	                     e)))
		return rc;
	if(pod->n_spread && !pod->spread)
		return prd_err_set(e, PRD_EINVAL, "topologySpreadConstraints: NULL list");
	for(i = 0; i < pod->n_spread; i++) {
		const sched_spread *c = &pod->spread[i];
		if((rc = check_topology(c->topology_key, "topologySpreadConstraint", e)))
			return rc;
		if(c->max_skew < 1)
			return prd_err_set(e, PRD_EINVAL, "topologySpreadConstraint: maxSkew %d < 1",
			                   (int)c->max_skew);
		if(c->min_domains < 0)
			return prd_err_set(e, PRD_EINVAL, "topologySpreadConstraint: minDomains < 0");
		if(c->when != SCHED_DO_NOT_SCHEDULE && c->when != SCHED_SCHEDULE_ANYWAY)
			return prd_err_set(e, PRD_EINVAL,
			                   "topologySpreadConstraint: unknown whenUnsatisfiable %d",
			                   (int)c->when);
		if((rc = check_selector(c->selector, "topologySpreadConstraint", e)))
			return rc;
	}
	return 0;
}

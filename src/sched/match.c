/* Matchers with Kubernetes semantics: label selectors, node affinity terms,
 * taints and tolerations, host ports, pod affinity terms. */
#include "sched/match.h"
#include "util/str.h"

#include <string.h>

static const char *nz(const char *s)
{
	return s ? s : "";
}

const char *sched_label_get(const sched_label *labels, size_t n, const char *key)
{
	size_t i;
	if(!key)
		return NULL;
	for(i = 0; i < n; i++)
		if(labels[i].key && strcmp(labels[i].key, key) == 0)
			return nz(labels[i].value);
	return NULL;
}

static bool in_values(const sched_requirement *r, const char *v)
{
	size_t i;
	for(i = 0; i < r->n_values; i++)
		if(r->values[i] && strcmp(r->values[i], v) == 0)
			return true;
	return false;
}

bool sched_requirement_matches(const sched_requirement *r, const sched_label *labels,
			       size_t n)
{
	const char *v = sched_label_get(labels, n, r->key);
	int64_t lv, rv;

	switch(r->op) {
	case SCHED_OP_IN:
		return v && in_values(r, v);
	case SCHED_OP_NOT_IN:
		return !v || !in_values(r, v);
	case SCHED_OP_EXISTS:
		return v != NULL;
	case SCHED_OP_DOES_NOT_EXIST:
		return v == NULL;
	case SCHED_OP_GT:
	case SCHED_OP_LT:
		if(!v || r->n_values != 1 || !r->values[0])
			return false;
		if(str_to_int64(v, &lv) || str_to_int64(r->values[0], &rv))
			return false;
		return r->op == SCHED_OP_GT ? lv > rv : lv < rv;
	}
	return false;
}

bool sched_selector_matches(const sched_label_selector *sel, const sched_label *labels,
			    size_t n)
{
	size_t i;
	if(!sel)
		return false;
	for(i = 0; i < sel->n_match_labels; i++) {
		const char *v = sched_label_get(labels, n, sel->match_labels[i].key);
		if(!v || strcmp(v, nz(sel->match_labels[i].value)) != 0)
			return false;
	}
	for(i = 0; i < sel->n_exprs; i++)
		if(!sched_requirement_matches(&sel->exprs[i], labels, n))
			return false;
	return true;
}

bool sched_node_term_matches(const sched_node_term *t, const sched_label *labels, size_t n)
{
	size_t i;
	if(t->n_exprs == 0)
		return false;
	for(i = 0; i < t->n_exprs; i++)
		if(!sched_requirement_matches(&t->exprs[i], labels, n))
			return false;
	return true;
}

bool sched_node_affinity_matches(const sched_pod_spec *pod, const sched_label *labels,
				 size_t n)
{
	size_t i;
	for(i = 0; i < pod->n_node_selector; i++) {
		const char *v = sched_label_get(labels, n, pod->node_selector[i].key);
		if(!v || strcmp(v, nz(pod->node_selector[i].value)) != 0)
			return false;
	}
	if(!pod->has_node_affinity)
		return true;
	for(i = 0; i < pod->n_affinity_terms; i++)
		if(sched_node_term_matches(&pod->affinity_terms[i], labels, n))
			return true;
	return false;
}

bool sched_toleration_tolerates(const sched_toleration *t, const sched_taint *taint)
{
	if(t->effect != SCHED_EFFECT_NONE && t->effect != taint->effect)
		return false;
	if(t->key && t->key[0] && strcmp(t->key, nz(taint->key)) != 0)
		return false;
	switch(t->op) {
	case SCHED_TOL_EQUAL:
		return strcmp(nz(t->value), nz(taint->value)) == 0;
	case SCHED_TOL_EXISTS:
		return true;
	}
	return false;
}

static bool tolerated(const sched_pod_spec *pod, const sched_taint *taint)
{
	size_t i;
	for(i = 0; i < pod->n_tolerations; i++)
		if(sched_toleration_tolerates(&pod->tolerations[i], taint))
			return true;
	return false;
}

bool sched_taints_tolerated(const sched_pod_spec *pod, const sched_taint *taints, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++) {
		if(taints[i].effect != SCHED_EFFECT_NO_SCHEDULE &&
		   taints[i].effect != SCHED_EFFECT_NO_EXECUTE)
			continue;
		if(!tolerated(pod, &taints[i]))
			return false;
	}
	return true;
}

bool sched_tolerates_unschedulable(const sched_pod_spec *pod)
{
	sched_taint t = { SCHED_TAINT_UNSCHEDULABLE, NULL, SCHED_EFFECT_NO_SCHEDULE };
	return tolerated(pod, &t);
}

static bool wildcard_ip(const char *ip)
{
	return !ip || !ip[0] || strcmp(ip, "0.0.0.0") == 0 || strcmp(ip, "::") == 0;
}

bool sched_host_ports_conflict(const sched_host_port *a, const sched_host_port *b)
{
	if(a->port == 0 || b->port == 0 || a->port != b->port || a->proto != b->proto)
		return false;
	if(wildcard_ip(a->host_ip) || wildcard_ip(b->host_ip))
		return true;
	return strcmp(a->host_ip, b->host_ip) == 0;
}

bool sched_pod_term_matches(const sched_pod_term *t, const char *owner_ns,
			    const char *ns, const sched_label *labels, size_t n)
{
	size_t i;
	bool ns_ok = false;

	if(t->all_namespaces)
		ns_ok = true;
	else if(t->n_namespaces == 0)
		ns_ok = strcmp(nz(owner_ns), nz(ns)) == 0;
	else
		for(i = 0; i < t->n_namespaces && !ns_ok; i++)
			ns_ok = t->namespaces[i] && strcmp(t->namespaces[i], nz(ns)) == 0;
	return ns_ok && sched_selector_matches(t->selector, labels, n);
}

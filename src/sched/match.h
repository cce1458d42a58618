/* Small matchers with Kubernetes semantics: label selectors, node selector
 * requirements, taints and tolerations, host ports. Pure functions over
 * borrowed inputs; inputs are assumed to have passed sched_pod_validate()
 * (an invalid operator simply does not match). */
#ifndef PRD_SCHED_MATCH_H
#define PRD_SCHED_MATCH_H

#include "sched/sched.h"

/* Value of `key` in a label list, or NULL. */
const char *sched_label_get(const sched_label *labels, size_t n, const char *key);

/* One requirement against a label set. In: present with a listed value;
 * NotIn: absent or not listed; Exists / DoesNotExist; Gt / Lt: present and
 * both the label and the single value parse as integers and compare. */
bool sched_requirement_matches(const sched_requirement *r, const sched_label *labels,
			       size_t n);

/* NULL selector: nothing. Empty selector: everything. */
bool sched_selector_matches(const sched_label_selector *sel, const sched_label *labels,
			    size_t n);

/* A node selector term: AND of its expressions; no expressions: no match. */
bool sched_node_term_matches(const sched_node_term *t, const sched_label *labels, size_t n);

/* nodeSelector (every pair equal) and required node affinity (any term). */
bool sched_node_affinity_matches(const sched_pod_spec *pod, const sched_label *labels,
				 size_t n);

/* v1.Toleration.ToleratesTaint. */
bool sched_toleration_tolerates(const sched_toleration *t, const sched_taint *taint);

/* Every NoSchedule / NoExecute taint is tolerated (PreferNoSchedule and
 * effect-less taints never block). */
bool sched_taints_tolerated(const sched_pod_spec *pod, const sched_taint *taints, size_t n);

/* Does the pod tolerate node.kubernetes.io/unschedulable:NoSchedule? */
bool sched_tolerates_unschedulable(const sched_pod_spec *pod);

/* Two host ports collide: same port and protocol, and addresses overlap
 * (equal, or either is a wildcard). Port 0 never collides. */
bool sched_host_ports_conflict(const sched_host_port *a, const sched_host_port *b);

/* Does a pod (namespace + labels) fall under a pod term owned by a pod in
 * `owner_ns`? */
bool sched_pod_term_matches(const sched_pod_term *t, const char *owner_ns,
			    const char *ns, const sched_label *labels, size_t n);

#endif

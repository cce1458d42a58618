/* Binpacking estimator: how many new nodes of one node group (described by
 * its template node) the given podSets need.
 *
 * Semantics (checked against a pod-by-pod reference in the tests):
 * first-fit decreasing. PodSets are taken largest first relative to the
 * template's allocatable (sched_estimate_order); each pod goes to the first
 * new node, in creation order, that passes every predicate; when none does
 * and the limits allow, a fresh node is opened for it; a pod that does not
 * fit even a fresh node is left out. Existing nodes take no pods (place
 * what fits there first with sched_place), but they count for spread
 * domains and (anti-)affinity, exactly as in sched_place. */
#ifndef PRD_SCHED_ESTIMATOR_H
#define PRD_SCHED_ESTIMATOR_H

#include "sched/place.h"

typedef struct sched_est_limits {
	int64_t group_room;       /* max size - target size of the group, >= 0 */
	int64_t max_nodes_total;  /* cluster-wide node cap, 0 = none */
	int64_t cluster_nodes;    /* nodes in the cluster now (for max_nodes_total) */
	int64_t max_new_nodes;    /* per scale-up cap, 0 = none */
} sched_est_limits;

typedef enum sched_est_limit {
	SCHED_EST_UNLIMITED = 0,  /* no limit stopped the estimate */
	SCHED_EST_GROUP_MAX,
	SCHED_EST_TOTAL_MAX,
	SCHED_EST_SCALEUP_MAX
} sched_est_limit;

typedef struct sched_est_result {
	sched_place_result place;  /* per podSet: placed, and per new-node ordinal
	                              (0 = first new node) how many */
	int64_t new_nodes;
	sched_est_limit limited_by; /* the limit that left pods out, if any */
} sched_est_result;

void sched_est_result_free(sched_est_result *r);

/* Order podSets largest first relative to the template's allocatable. */
int sched_estimate_order(const sched_snapshot *s, const sched_node_spec *tmpl,
			 const sched_podset *sets, size_t n, size_t *order, prd_err *e);

/* Estimate. The snapshot is used read-only in effect: the estimator works
 * in a fork it reverts before returning. *out is the caller's to free with
 * sched_est_result_free(). Fresh nodes are named "<template>/new-<i>". */
int sched_estimate(sched_snapshot *s, const sched_node_spec *tmpl, const sched_podset *sets,
		   size_t n, const sched_est_limits *lim, sched_est_result *out, prd_err *e);

#endif

/* Predicates and group placement of podSets onto a snapshot.
 *
 * Semantics (the contract the property test checks): pods are placed one
 * podSet at a time in sched_place_order() order, and within a podSet the
 * result is exactly what placing the pods one by one would give when each
 * pod goes to the first node, in snapshot index order, that passes every
 * predicate at that moment (first fit). The implementation evaluates the
 * static predicates once per (podSet, node), computes how many copies a
 * node can take, and places copies in batches; topology spread constraints
 * are followed step by step at the granularity where their minimum can
 * change, so the result stays identical to the pod-by-pod one. */
#ifndef PRD_SCHED_PLACE_H
#define PRD_SCHED_PLACE_H

#include "sched/sched.h"

typedef struct sched_podset {
	const sched_pod_spec *pod;   /* borrowed */
	int64_t count;               /* 0..SCHED_COUNT_MAX */
} sched_podset;

typedef struct sched_assign {
	size_t node;                 /* snapshot node index (estimator: new-node ordinal) */
	int64_t count;
} sched_assign;

typedef struct sched_set_result {
	int64_t requested;
	int64_t placed;
	sched_assign *assign;        /* ascending node, one entry per node used */
	size_t n_assign, cap_assign;
	size_t group;                /* internal: who holds the devices placed (0 = none) */
} sched_set_result;

typedef struct sched_place_result {
	bool fits_all;
	int64_t requested;
	int64_t placed;
	size_t n_sets;
	sched_set_result *sets;      /* in the caller's podSet order */
	size_t *order;               /* the order they were placed in */
} sched_place_result;

/* Release what a result owns (safe on a zeroed or already-freed result). */
void sched_place_result_free(sched_place_result *r);

/* Why a pod does not fit a node (the first failing predicate). */
typedef enum sched_fit {
	SCHED_FIT_OK = 0,
	SCHED_FIT_NODE_NAME,
	SCHED_FIT_UNSCHEDULABLE,
	SCHED_FIT_NODE_AFFINITY,     /* nodeSelector or required node affinity */
	SCHED_FIT_TAINTS,
	SCHED_FIT_RESOURCES,
	SCHED_FIT_HOST_PORTS,
	SCHED_FIT_ANTI_AFFINITY,     /* incoming or existing pods' anti-affinity */
	SCHED_FIT_AFFINITY,
	SCHED_FIT_SPREAD,            /* skew or missing topology label */
	SCHED_FIT_DEVICES            /* DRA: not enough matching free devices */
} sched_fit;

const char *sched_fit_str(sched_fit f);

/* Would one copy of `pod` fit node `idx` now? *why gets SCHED_FIT_OK or
 * the first failing predicate. Does not change the snapshot. */
int sched_check_pod(sched_snapshot *s, const sched_pod_spec *pod, size_t idx,
		    sched_fit *why, prd_err *e);

/* Placement order, largest first: by dominant share of the cluster's total
 * allocatable (max over resources of request / total), ties by the request
 * vector (cpu, memory, ...) descending, then by input position. Writes a
 * permutation of 0..n-1 into `order`. */
int sched_place_order(const sched_snapshot *s, const sched_podset *sets, size_t n,
		      size_t *order, prd_err *e);

/* Place every podSet (largest first) onto the snapshot's nodes, mutating
 * the snapshot: placed pods become bound pods that later podSets and later
 * calls see (fork first to try without keeping them). Pods that do not fit
 * are left out; *out tells how many of each set were placed and where.
 * On error the snapshot may hold part of the placement: call inside a fork
 * and revert on failure. *out is owned by the caller
 * (sched_place_result_free). */
int sched_place(sched_snapshot *s, const sched_podset *sets, size_t n,
		sched_place_result *out, prd_err *e);

/* The devices (DRA) the placement `r` (one podSet of a sched_place
 * result, before the snapshot is reverted) allocated on node idx:
 * fn(ud, device) for each. */
void sched_snapshot_placed_devices(const sched_snapshot *s, const sched_set_result *r, size_t idx,
				   void (*fn)(void *ud, const sched_device *d), void *ud);

#endif

/* Internal to src/sched: the per-podSet placement engine shared by
 * sched_place() and the estimator. */
#ifndef PRD_SCHED_PLACE_INT_H
#define PRD_SCHED_PLACE_INT_H

#include "sched/place.h"
#include "sched/sched_int.h"

/* Reusable scratch space for placement; zero-initialise, release with
 * sched__ws_free(). */
typedef struct sched__ws sched__ws;

sched__ws *sched__ws_new(void);
void sched__ws_free(sched__ws *w);

/* Place up to `count` copies of `pod` on nodes [lo, hi) by first fit, with
 * every predicate evaluated against the whole snapshot (spread domains and
 * affinity counts include nodes outside the range). Placed pods are added
 * to the snapshot as group *gi (created when *gi == SIZE_MAX) and appended
 * to res->assign (not merged with earlier entries); *placed gets the
 * number. */
int sched__place_set(sched_snapshot *s, sched__ws *w, const sched_pod_spec *pod,
		     int64_t count, size_t lo, size_t hi, size_t *gi, int64_t *placed,
		     sched_set_result *res);

/* Sort res->assign by node and merge duplicates. */
void sched__set_result_normalize(sched_set_result *res);

/* Order podSets largest first relative to `ref` (see sched_place_order). */
void sched__order(const sched_snapshot *s, const sched_podset *sets, size_t n,
		  const int64_t ref[SCHED_RES_MAX], size_t *order);

#endif

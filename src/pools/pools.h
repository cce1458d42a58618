/* ResourcePool node population (docs/design.md §8): keep the spec.quota.hard of a
 * Capsule ResourcePool (capsule.clastix.io/v1beta2) equal to the
 * allocatable capacity of the nodes a label selector picks.
 *
 * Three layers, each usable on its own:
 *
 *  1. Annotations → pool_spec (pool_spec_parse): what a pool asks for.
 *  2. pool_spec + pool + nodes → pool_plan (pool_plan_compute): the value of
 *     every managed quota key, pure arithmetic on exact quantities, no I/O.
 *  3. pool_ctl: the reconciler. It lists pools through a kube_api, computes
 *     plans against the nodes the caller hands it, writes the difference
 *     with a JSON merge patch carrying metadata.resourceVersion (re-reading
 *     and recomputing on 409 Conflict), records Events and metrics, and
 *     debounces node churn on an injectable clock.
 *
 * Annotation syntax (docs/pools.md has the long form):
 *   provreqd.io/populate-from-nodes      label selector, string syntax
 *                                        ("pool=gold,zone in (a,b)");
 *                                        present = opted in, "" = all nodes
 *   provreqd.io/populate-resources       "cpu,memory,nvidia.com/gpu";
 *                                        default cpu, memory,
 *                                        ephemeral-storage, pods and every
 *                                        extended resource on the nodes
 *   provreqd.io/populate-headroom        comma list of items, each
 *                                        "P%" (every resource),
 *                                        "<resource>=P%" or
 *                                        "<resource>=<quantity>";
 *                                        e.g. "10%", "cpu=2,memory=4Gi",
 *                                        "5%,nvidia.com/gpu=1"
 *   provreqd.io/populate-limits-factor   decimal >= 0 ("1", "1.5");
 *                                        also sets limits.cpu and
 *                                        limits.memory = requests × factor
 * Written by provreqd:
 *   provreqd.io/last-population          "nodes=N,time=RFC3339"
 *   provreqd.io/populated-keys           the quota keys it manages, sorted
 *
 * Arithmetic is exact: sums and absolute headroom are plain quantity
 * additions; percent headroom and the limits factor are exact rationals,
 * and their result is rounded down to 1m for cpu and to a whole unit for
 * every other resource (never promise capacity that is not there).
 *
 * Ownership and threads: functions returning allocated memory say who
 * frees it. pool_ctl is driven by one thread (the controller worker);
 * only pool_ctl_mark_dirty() may be called from other threads (informer
 * handlers), it is lock-free. */
#ifndef PRD_POOLS_POOLS_H
#define PRD_POOLS_POOLS_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/api.h"
#include "kube/objects.h"
#include "kube/quantity.h"
#include "kube/selector.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/hmap.h"

#define POOL_ANN_SELECTOR "provreqd.io/populate-from-nodes"
#define POOL_ANN_RESOURCES "provreqd.io/populate-resources"
#define POOL_ANN_HEADROOM "provreqd.io/populate-headroom"
#define POOL_ANN_FACTOR "provreqd.io/populate-limits-factor"
#define POOL_ANN_LAST "provreqd.io/last-population"
#define POOL_ANN_KEYS "provreqd.io/populated-keys"

/* Longest quota key ("requests." + a 253+1+63 character resource name). */
#define POOL_KEY_MAX 340

/* ------------------------------------------------------------ mapping */

/* The quota key for an allocatable resource name: cpu → requests.cpu,
 * memory → requests.memory, ephemeral-storage → requests.ephemeral-storage,
 * pods → pods, hugepages-X → requests.hugepages-X, an extended resource
 * a.b/c (a domain outside kubernetes.io) → requests.a.b/c. Returns false
 * (out "") for anything else ("storage", "attachable-volumes-x",
 * "kubernetes.io/x", malformed names): those are never populated. */
bool pool_quota_key(const char *resource, char *out, size_t n);

/* Is `resource` an extended resource (domain-qualified, outside the
 * kubernetes.io namespaces, a valid qualified name)? */
bool pool_is_extended(const char *resource);

/* ------------------------------------------------------ exact decimals */

/* A non-negative exact decimal num / den, den a power of ten <= 10^9. */
typedef struct pool_ratio {
	int64_t num;
	int64_t den;
} pool_ratio;

/* Parse "1", "1.5", "0.125", ".5" (at most 9 fractional digits, at most
 * 10^9 in value, no sign, no exponent). PRD_EINVAL with a reason in err. */
int pool_ratio_parse(const char *s, pool_ratio *out, prd_err *err);

/* *out = q × r rounded down (toward zero) to a multiple of gran_nano nano
 * units (1000000 for 1m, 1000000000 for a whole unit; 1 = no rounding
 * beyond 1n), keeping q's format. PRD_ERANGE when the result leaves the
 * quantity range; *out is then untouched. */
int pool_qty_scale(const qty *q, const pool_ratio *r, int64_t gran_nano, qty *out);

/* The rounding step for results of `resource`: 1m for cpu, 1 otherwise. */
int64_t pool_granularity(const char *resource);

/* ------------------------------------------------------------ pool_spec */

typedef struct pool_headroom {
	char *resource;      /* owned; NULL = the default for every resource */
	bool percent;        /* pct is set, else amount */
	pool_ratio pct;      /* percent, 0..100 */
	qty amount;          /* absolute amount, >= 0 */
} pool_headroom;

typedef struct pool_spec {
	sel *selector;                 /* owned */
	char *selector_text;           /* owned; the annotation value */
	char **resources;              /* owned; NULL when the default set applies */
	size_t nresources;
	pool_headroom *headroom;       /* owned */
	size_t nheadroom;
	bool has_factor;
	pool_ratio factor;
} pool_spec;

/* Parse a pool's annotations (borrowed). PRD_ENOTFOUND when the pool has
 * no provreqd.io/populate-from-nodes annotation (not opted in). PRD_EINVAL
 * for a bad value, with a message that starts with the annotation key and
 * says what is wrong, e.g. `provreqd.io/populate-headroom: item "cpu=lots":
 * bad quantity ...`. On success the caller frees *out with
 * pool_spec_free(); on failure *out holds nothing to free. */
int pool_spec_parse(const kube_kv *ann, size_t nann, pool_spec *out, prd_err *err);
void pool_spec_free(pool_spec *s);

/* ------------------------------------------------------------ pool_plan */

typedef struct pool_filter {
	bool include_unschedulable;    /* count cordoned nodes too */
	bool include_not_ready;        /* count nodes whose Ready is not True */
} pool_filter;

typedef struct pool_entry {
	char key[POOL_KEY_MAX];        /* quota key, e.g. "requests.cpu" */
	char resource[POOL_KEY_MAX];   /* node resource it comes from ("cpu") */
	qty total;       /* sum over the selected nodes */
	qty computed;    /* after headroom (and × factor for limits keys) */
	qty value;       /* what the key should hold: max(computed, used) */
	qty used;        /* status.allocation.used (0 when absent) */
	bool clamped;    /* value was raised to used */
	bool vanished;   /* an extended resource that left every node */
	bool retire;     /* vanished and unclaimed: stop managing after this */
} pool_entry;

typedef struct pool_plan {
	pool_entry *entries;           /* owned; sorted by key */
	size_t n;
	size_t nodes;                  /* nodes selected and counted */
} pool_plan;

/* Compute the managed keys of `pool` from `nodes` (all borrowed). A key
 * this pool managed before (provreqd.io/populated-keys) for an extended
 * resource that is now on no selected node becomes a `vanished` entry with
 * computed 0. The caller frees *out with pool_plan_free(). PRD_ERANGE
 * (message names the key) when a sum leaves the quantity range. */
int pool_plan_compute(const pool_spec *s, const kube_resourcepool *pool, const kube_node *const *nodes,
		      size_t nnodes, const pool_filter *f, pool_plan *out, prd_err *err);
void pool_plan_free(pool_plan *p);

/* Does the node count under filter f (Ready, schedulable, not being
 * deleted)? */
bool pool_node_counts(const kube_node *node, const pool_filter *f);

/* ------------------------------------------------------------ pool_ctl */

/* Metrics hooks, one per family of docs/metrics.md's provreqd_pool_*.
 * Each may be NULL. Called on the worker thread; strings are borrowed for
 * the call. `amount` is the populated value in base units (cores, bytes). */
typedef struct pool_metrics_ops {
	void (*nodes)(void *ud, const char *pool, size_t nodes);
	void (*populated)(void *ud, const char *pool, const char *key, double amount, bool clamped);
	void (*update)(void *ud, const char *pool, const char *result); /* written|unchanged|conflict|error|invalid */
	void (*forget)(void *ud, const char *pool);   /* the pool opted out or is gone */
	void *ud;
} pool_metrics_ops;

/* Hooks that feed the process metrics registry (ops/metrics.h):
 * provreqd_pool_nodes_selected{pool}, provreqd_pool_populated_amount and
 * provreqd_pool_clamped{pool,resource}, provreqd_pool_updates_total{pool,
 * result}. `children` (caller-owned, hmap_init'ed with no value
 * destructor, freed by the caller after the pool_ctl) remembers which
 * children exist so a pool that opts out or is deleted takes them away. */
pool_metrics_ops pool_metrics_registry(hmap *children);

/* An Event sink: type "Normal"/"Warning", a CamelCase reason, a message.
 * The pool JSON is the object the Event is about (borrowed). */
typedef void (*pool_event_fn)(void *ud, json_object *pool, const char *type, const char *reason, const char *msg);

typedef struct pool_opts {
	const kube_api *api;           /* borrowed; required */
	const clk *clock;              /* default clk_real() */
	int64_t debounce_ns;           /* at most one sync per interval; default 2 s */
	/* ResourcePools are not watched, so a pool created or edited while no
	 * node changes would wait for the next node event: with resync_ns, a
	 * sync is also due this long after the last one. 0 = only when marked. */
	int64_t resync_ns;
	int max_conflict_retries;      /* default 5 */
	pool_filter filter;            /* default: Ready and schedulable only */
	int64_t warning_repeat_ns;     /* an identical Warning is repeated after; default 10 min */
	/* Events: NULL = write core/v1 Events through `api` (namespace
	 * "default", as client-go does for cluster-scoped objects). */
	pool_event_fn event;
	void *event_ud;
	pool_metrics_ops metrics;
} pool_opts;

/* Counters since creation, for tests, logs and `simulate` summaries. */
typedef struct pool_ctl_stats {
	unsigned long syncs;           /* pool_ctl_sync runs */
	unsigned long reconciles;      /* opted-in pools looked at */
	unsigned long writes;          /* successful PATCHes */
	unsigned long unchanged;       /* reconciles that found nothing to write */
	unsigned long conflicts;       /* 409s answered by re-reading */
	unsigned long errors;          /* reconciles that gave up */
	unsigned long invalid;         /* pools left alone for bad annotations */
	unsigned long clamped;         /* keys raised to their claimed amount */
	unsigned long events;          /* Events emitted (after de-duplication) */
} pool_ctl_stats;

typedef struct pool_ctl pool_ctl;

/* Create a reconciler. opts is copied (its pointers stay borrowed). Caller
 * frees with pool_ctl_free(). Starts dirty, so the first pool_ctl_due()
 * says a sync is due. */
int pool_ctl_new(const pool_opts *opts, pool_ctl **out, prd_err *err);
void pool_ctl_free(pool_ctl *c);

/* Something changed (a node or a pool was added, updated or deleted):
 * the next due sync must look again. Safe from any thread. */
void pool_ctl_mark_dirty(pool_ctl *c);

/* Is a sync due now? True when dirty and at least debounce_ns passed
 * since the last sync started, or (with resync_ns) when resync_ns passed
 * since then. When false, *wait_ns (may be NULL) is how long until it will
 * be; -1 when clean and there is no resync. */
bool pool_ctl_due(pool_ctl *c, int64_t *wait_ns);

/* List every ResourcePool through the API and reconcile the opted-in ones
 * against `nodes` (borrowed; all nodes of the cluster, the filter and each
 * pool's selector pick from them). A change marked while the sync runs
 * keeps the controller dirty. Per-pool failures are logged, counted and
 * reported as Events; the return value is nonzero only when the pool list
 * itself could not be read. */
int pool_ctl_sync(pool_ctl *c, const kube_node *const *nodes, size_t nnodes, prd_err *err);

/* Reconcile one pool given as the apiserver's JSON (borrowed). 0 when the
 * pool is in the desired state afterwards, was not opted in, or was left
 * alone because of bad annotations; a PRD_E* code when it could not be
 * written. */
int pool_ctl_reconcile(pool_ctl *c, json_object *pool, const kube_node *const *nodes, size_t nnodes,
		       prd_err *err);

void pool_ctl_get_stats(const pool_ctl *c, pool_ctl_stats *out);

/* --------------------------------------------------------- node lists */

/* Nodes decoded from a LIST, for callers without an informer cache. */
typedef struct pool_nodelist {
	kube_intern *intern;           /* owned */
	const kube_node **nodes;       /* owned objects, decoded with intern */
	size_t n;
	size_t skipped;                /* items that did not decode (logged) */
} pool_nodelist;

/* LIST /api/v1/nodes through api and decode every node. Caller frees with
 * pool_nodelist_free() (also after a failure). */
int pool_nodelist_load(const kube_api *api, pool_nodelist *out, prd_err *err);
void pool_nodelist_free(pool_nodelist *l);

/* ------------------------------------------------------------- events */

/* Write one core/v1 Event about a cluster-scoped object (JSON, borrowed)
 * into namespace "default" through api. Errors are returned and logged;
 * callers usually ignore them (an Event is never worth failing for). */
int pool_event_write(const kube_api *api, const clk *clock, json_object *obj, const char *type,
		     const char *reason, const char *msg, prd_err *err);

#endif

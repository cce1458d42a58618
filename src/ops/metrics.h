/* Process-wide metrics registry, rendered in the Prometheus text exposition
 * format 0.0.4.
 *
 * The registry is the second (and last) allowed piece of global mutable
 * state besides the logger. Every function here is safe to call from any
 * thread at any time; one mutex guards the registry, and an update costs a
 * hash lookup of the label values under it.
 *
 * Families are identified by a small integer id. The families provreqd
 * itself exports are pre-registered by metrics_init() under the ids of
 * `enum metrics_id` (their names, help, labels and buckets are in the table
 * in metrics.c and documented in docs/metrics.md; the docs check fails when
 * the two disagree). Tests and future code may add more with
 * metrics_register().
 *
 * Label values are passed as a NULL-terminated array, most easily with
 * METRICS_L:
 *
 *     metrics_counter_add(M_SCALEUPS, METRICS_L("group-a", "attempted"), 1);
 *     metrics_gauge_set(M_LEADER, NULL, 1);          (no labels)
 *     metrics_observe(M_RECONCILE_DURATION, METRICS_L("provreq"), 0.012);
 *
 * A call with the wrong number of label values, an unknown id, a call of
 * the wrong kind (a gauge update on a counter), or a negative counter
 * increment is a programming error; it is dropped and logged once per
 * family (never a crash). Label values are copied; the caller keeps
 * ownership of what it passes. Before metrics_init() and after
 * metrics_shutdown() updates are silently ignored. */
#ifndef PRD_OPS_METRICS_H
#define PRD_OPS_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/buf.h"
#include "util/err.h"

/* Label values for one child: METRICS_L("a", "b"). */
#define METRICS_L(...) ((const char *const[]){ __VA_ARGS__, NULL })

enum metrics_type {
	METRICS_COUNTER = 0,
	METRICS_GAUGE = 1,
	METRICS_HISTOGRAM = 2
};

/* The families provreqd exports (labels in brackets). */
enum metrics_id {
	M_BUILD_INFO = 0,          /* provreqd_build_info{version} gauge = 1 */
	M_REQUESTS,                /* provreqd_provisioning_requests{class,condition} */
	M_RECONCILE_DURATION,      /* provreqd_reconcile_duration_seconds{controller} */
	M_RECONCILE_ERRORS,        /* provreqd_reconcile_errors_total{controller,reason} */
	M_TIME_TO_PROVISIONED,     /* provreqd_request_time_to_provisioned_seconds{class} */
	M_TIME_TO_FAILED,          /* provreqd_request_time_to_failed_seconds{class,reason} */
	M_SCALEUPS,                /* provreqd_scaleups_total{node_group,result} result=attempted|succeeded|rolled_back */
	M_NODEGROUP_SIZE,          /* provreqd_node_group_size{node_group} */
	M_NODEGROUP_TARGET,        /* provreqd_node_group_target_size{node_group} */
	M_NODEGROUP_MIN,           /* provreqd_node_group_min_size{node_group} */
	M_NODEGROUP_MAX,           /* provreqd_node_group_max_size{node_group} */
	M_NODEGROUP_BACKOFF,       /* provreqd_node_group_backoff{node_group} 1 = backed off */
	M_BOOKINGS,                /* provreqd_bookings_held{class} */
	M_WATCH_RESTARTS,          /* provreqd_watch_restarts_total{resource} */
	M_RELISTS,                 /* provreqd_relists_total{resource} */
	M_API_REQUESTS,            /* provreqd_api_requests_total{verb,code} */
	M_API_LATENCY,             /* provreqd_api_request_duration_seconds{verb} */
	M_API_CONNECTIONS,         /* provreqd_api_connections_total */
	M_POOL_NODES,              /* provreqd_pool_nodes_selected{pool} */
	M_POOL_POPULATED,          /* provreqd_pool_populated_amount{pool,resource} */
	M_POOL_CLAMPED,            /* provreqd_pool_clamped{pool,resource} 1 = clamped to used */
	M_POOL_UPDATES,            /* provreqd_pool_updates_total{pool,result} */
	M_LEADER,                  /* provreqd_leader gauge 1 = this replica leads */
	M_LEADER_TRANSITIONS,      /* provreqd_leader_transitions_total{event} event=acquired|lost */
	M_LEADER_ACQUIRE_WAIT,     /* provreqd_leader_acquire_wait_seconds (failover time) */
	M_STATE_ERRORS,            /* provreqd_state_store_errors_total{op} */
	M_UNOWNED,                 /* provreqd_unowned_requests_total: requests of a class nobody here serves */
	M_SCALE_DOWNS,             /* provreqd_scale_downs_total{node_group}: idle nodes provreqd added and removed */
	M_STATE_ROWS,              /* provreqd_state_rows{table} */
	M_FOREIGN_INSTANCES,       /* provreqd_node_group_foreign_instances{node_group}: not an open plan's, appeared while it runs */
	M_PLAN_CONFLICTS,          /* provreqd_scaleup_conflicts_total{node_group,cause} cause=target_moved|duplicate_instances|late_call */
	M_API_BOOKINGS,            /* provreqd_bookings_from_api: bookings counted from requests' statuses, not the local store */
	M_SHARD_ORDER,             /* provreqd_placed_for_other_shards_total: older requests of other shards placed first */
	M_LEDGER_WRITES,           /* provreqd_booking_ledger_writes_total{outcome} outcome=booked|released|conflict|error */
	M_LEDGER_OBJECTS,          /* provreqd_booking_ledger_objects: the head and its overflow objects, as last read or written */
	M_LEDGER_BYTES,            /* provreqd_booking_ledger_bytes: bytes of entries in them */
	M_PROCESS_CPU,             /* process_cpu_seconds_total (ops/procstat.c, the Prometheus client's names) */
	M_PROCESS_START,           /* process_start_time_seconds */
	M_PROCESS_RSS,             /* process_resident_memory_bytes */
	M_PROCESS_VMEM,            /* process_virtual_memory_bytes */
	M_PROCESS_FDS,             /* process_open_fds */
	M_PROCESS_MAX_FDS,         /* process_max_fds */
	M_PCLASSES,                /* provreqd_provisioning_classes{usable}: ProvisioningClass objects */
	M_PLAN_REFUSED,            /* provreqd_plan_records_refused_total{reason}: plan records in statuses not believed */
	M_PLAN_KEY,                /* provreqd_plan_key_loaded gauge 1 = plan records are sealed and verified */
	M_BUILTIN_COUNT
};

/* A family description for metrics_register(). Strings are copied. */
typedef struct metrics_desc {
	const char *name;          /* [a-zA-Z_:][a-zA-Z0-9_:]* */
	const char *help;
	enum metrics_type type;
	const char *const *labels; /* NULL-terminated label names, or NULL */
	const double *buckets;     /* histogram upper bounds, strictly increasing,
	                            * without +Inf; NULL = metrics_default_buckets */
	size_t n_buckets;
} metrics_desc;

/* 5 ms … 10 s, the Prometheus client defaults. */
extern const double metrics_default_buckets[];
extern const size_t metrics_n_default_buckets;

/* Create the registry and register the built-in families. Idempotent (a
 * second call is a no-op returning 0). 0 or PRD_ENOMEM. */
int metrics_init(void);
/* Free the registry and every child. Later updates are ignored until the
 * next metrics_init(). */
void metrics_shutdown(void);

/* Register a family; *id receives its id. PRD_EINVAL for a bad name, label
 * name or bucket list (message in err), PRD_EEXIST when the name is taken. */
int metrics_register(const metrics_desc *d, int *id, prd_err *err);

/* Counter: add v >= 0. */
void metrics_counter_add(int id, const char *const *labels, double v);
/* Counter mirrored from a monotonic source (CPU time read from /proc):
 * raise the value to v; a smaller v changes nothing. */
void metrics_counter_raise(int id, const char *const *labels, double v);
/* Gauge: set or add (v may be negative). */
void metrics_gauge_set(int id, const char *const *labels, double v);
void metrics_gauge_add(int id, const char *const *labels, double v);
/* Histogram: record one observation. */
void metrics_observe(int id, const char *const *labels, double v);
/* Forget one child (a node group or pool that no longer exists). */
void metrics_remove(int id, const char *const *labels);
/* Forget every child whose label number `label` (0-based) is `value`:
 * all the series of a node group that is gone, whatever its other
 * labels. */
void metrics_remove_where(int id, size_t label, const char *value);

/* Current value of a counter or gauge child, or the observation count of a
 * histogram child; false when the child does not exist. For tests and for
 * `provreqd simulate` summaries. */
bool metrics_get(int id, const char *const *labels, double *value);

/* Append the whole registry in text format 0.0.4 to out. Families appear in
 * id order, children sorted by label values. 0 or PRD_ENOMEM. */
int metrics_render(buf *out);

/* Name of family `id` (NULL when there is no such family). The string
 * lives until metrics_shutdown(). */
const char *metrics_name(int id);
/* Type and label names (NULL-terminated; borrowed, valid until
 * metrics_shutdown()) of family `id`; either pointer may be NULL. 0, or
 * PRD_ENOTFOUND when there is no such family. */
int metrics_describe(int id, enum metrics_type *type, const char *const **labels);
/* "counter", "gauge" or "histogram". */
const char *metrics_type_name(enum metrics_type t);
/* Number of registered families (ids are 0 … count-1). */
int metrics_count(void);

/* The content type of metrics_render's output. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif

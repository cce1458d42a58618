/* The ProvisioningRequest controller (docs/design.md §5).
 *
 * pr_ctl_pass() is one level-triggered pass: it reads the cluster through
 * a kube_api (every Node, Pod, PodTemplate and ProvisioningRequest), the
 * state store (bookings, backoff, open scale-up intents) and the drivers'
 * node groups, decides what every request of our classes needs, acts, and
 * writes status conditions and Events. A pass is idempotent: running it
 * twice, or after a crash at any point, never doubles a scale-up or loses
 * a booking, because every multi-step cloud action is an intent row in the
 * state store written before the action.
 *
 * Threads: everything here runs on the controller's single worker thread;
 * drivers are called only from it. */
#ifndef PRD_PROVREQ_CONTROLLER_H
#define PRD_PROVREQ_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "driver/loader.h"
#include "kube/api.h"
#include "kube/informer.h"
#include "ops/reslimit.h"
#include "state/state.h"
#include "util/clock.h"
#include "util/err.h"

typedef struct pr_config {
	int64_t booking_ttl_ns;         /* how long Provisioned capacity is held: 10 min */
	int64_t provision_timeout_ns;   /* new nodes must be Ready by then: 15 min */
	int64_t template_grace_ns;      /* wait for missing PodTemplates: 5 min */
	int64_t max_age_ns;             /* not provisioned after this: Failed/Expired, 7 d */
	int64_t gc_after_ns;            /* delete terminal requests after this, 7 d */
	int64_t state_retention_ns;     /* closed scale-up plans kept in the state store: 24 h */
	const char *processor_instance; /* serve only requests naming it (NULL: those naming none) */
	const char *expander;           /* expander chain, default "least-waste" */
	int64_t max_nodes_total;        /* 0 = no limit */
	int64_t max_nodes_per_scaleup;  /* 0 = no limit */
	bool scale_down;                /* remove idle nodes provreqd added: on */
	int64_t scale_down_idle_ns;     /* ... after this long idle: 10 min */
	int64_t driver_call_timeout_ns; /* a driver class's provision call: 10 s */
	/* Node auto-provisioning (classes/nap.c): off; at most this many
	 * auto-provisioned groups (15). */
	bool nap;
	int64_t nap_max_groups;
	/* Cluster-wide totals over every node (borrowed; none by default). */
	const cfg_res_limit *res_limits;
	size_t nres_limits;
	/* Status writes ending the decisions of a pass go out this many at a
	 * time (1: one after another, the default; at most
	 * PR_STATUS_WRITERS_MAX). */
	unsigned status_writers;
	/* Check a request's pods against its namespace's ResourceQuotas
	 * before booking or scaling (reason QuotaExceeded): on. */
	bool quota_check;
	/* Tests: whenever a pass reuses the kept snapshot, also build it anew
	 * and compare, and compare what else is kept between passes (the
	 * PodTemplate copies) with the caches (stats.snapshot_mismatches
	 * counts differences). */
	bool verify_snapshot;
	/* Decide every request in every pass, not only those affected by what
	 * changed, and derive the node and pod summaries from the caches anew
	 * instead of from their journals (informer mode; docs/operator.md "How
	 * a pass is driven"). Tests compare the two. */
	bool full_passes;
	/* "NAMESPACE/NAME" of the booking ledger ConfigMap that every replica
	 * and shard changes before it writes a booking (ledger.c); NULL: none
	 * (one instance alone). */
	const char *booking_ledger;
	/* Bytes of entries one object of the booking ledger holds at most (0:
	 * PR_LEDGER_OBJECT_MAX): the ConfigMap limit is 1 MiB of data. Tests
	 * and benchmarks set it low to spill with few bookings. */
	size_t ledger_object_bytes;
} pr_config;

#define PR_LEDGER_OBJECT_MAX ((size_t)960 * 1024)

#define PR_STATUS_WRITERS_MAX 32

void pr_config_default(pr_config *cfg);

typedef struct pr_stats {
	uint64_t passes;
	uint64_t status_writes;
	uint64_t status_conflicts;
	uint64_t events;
	uint64_t scaleups_started;
	uint64_t scaleups_succeeded;
	uint64_t scaleups_rolled_back;
	uint64_t scaledown_nodes;       /* idle nodes of provreqd's removed */
	uint64_t marks_written;         /* provisioned-for annotations written on a plan's nodes */
	uint64_t marks_stamped;         /* a plan's nodes that named the request already (the owner label stamped on creation): no write */
	uint64_t requests_seen;         /* of our classes, last pass */
	uint64_t requests_decided;      /* of those, decided (the rest were not affected), last pass */
	uint64_t bookings_held;         /* last pass */
	uint64_t bookings_from_api;     /* last pass: bookings read from requests' statuses (other shards', or missing here) */
	uint64_t shard_reads;           /* requests whose status was read for bookings and plans (cumulative) */
	uint64_t placed_for_others;     /* other shards' older waiting requests placed before own ones (cumulative) */
	uint64_t snapshot_reuses;       /* passes that reused the snapshot of unchanged nodes and pods */
	uint64_t snapshot_node_adds;    /* nodes added to a reused snapshot (registrations) */
	uint64_t snapshot_mismatches;   /* verify_snapshot: kept snapshots (or copies) that differed from a rebuild */
	uint64_t snapshot_pod_entries;  /* the last snapshot built: its running pods' entries (one per workload and node) */
	uint64_t ledger_writes;         /* booking ledger writes that landed (cumulative) */
	uint64_t ledger_conflicts;      /* ... refused: another instance wrote it first (cumulative) */
	uint64_t ledger_objects;        /* objects the booking ledger spans (the head and its overflow objects), as last read or written */
	uint64_t ledger_bytes;          /* bytes of entries in it, as last read or written */
	uint64_t ledger_objects_written; /* objects created or replaced by its writes (cumulative) */
	uint64_t ledger_bytes_written;  /* bytes of entries those writes sent (cumulative) */
	uint64_t ledger_objects_read;   /* objects fetched by its reads (cumulative; an overflow object is fetched once) */
} pr_stats;

typedef struct pr_ctl pr_ctl;

/* Everything passed is borrowed and must outlive the controller. `drivers`
 * may be NULL (check-capacity only). The classes the drivers serve
 * (provisioning_classes) are registered beside the built-in ones; a class
 * served twice is refused (PRD_EEXIST, naming both providers). Caller
 * frees with pr_ctl_free(). */
int pr_ctl_new(const pr_config *cfg, const clk *clock, const kube_api *api, state_db *db,
	       cloud_drivers *drivers, pr_ctl **out, prd_err *err);
void pr_ctl_free(pr_ctl *c);

/* Record Events through `api` (borrowed; e.g. a client with a rate budget
 * of its own) instead of the controller's; with `senders` > 0
 * asynchronously on that many threads (a pass never waits for an Event).
 * 0 or PRD_ENOMEM. */
int pr_ctl_use_event_api(pr_ctl *c, const kube_api *api, unsigned senders, prd_err *err);

/* One pass. *next_wake_ns (optional) gets the wall time by which another
 * pass is due for timers to fire (backoff ends, bookings expire, scale-up
 * deadlines); INT64_MAX when nothing is pending. Errors reading the
 * cluster abort the pass (nothing is written); errors on one request are
 * logged, recorded on that request and do not stop the others. */
int pr_ctl_pass(pr_ctl *c, int64_t *next_wake_ns, prd_err *err);

const pr_stats *pr_ctl_stats(const pr_ctl *c);

/* Read the cluster from informer caches instead of listing it through the
 * kube_api on every pass (writes still go through the kube_api). All four
 * must be synced before the first pass and outlive the controller. A pass
 * holds the caches' read locks (in the order nodes, pods, podtemplates,
 * provisioningrequests) only while it copies what it needs: the
 * scheduling snapshot, node and consumer-pod summaries, the templates and
 * the requests. Driver calls and writes happen after the locks are
 * released, so the reflectors are never held up by a slow cloud. */
typedef struct pr_informers {
	kube_intern *intern;          /* the table the informers decode with (the
	                                 controller's copies of cached requests
	                                 hold its strings: free it after the
	                                 controller) */
	kube_informer *nodes;
	kube_informer *pods;
	kube_informer *podtemplates;
	kube_informer *provreqs;
	/* resource.k8s.io/v1 (DRA); all NULL when the cluster does not serve
	 * it or provreqd may not read it: pods with resourceClaims are then
	 * refused with a condition saying so. Locked after the four above. */
	kube_informer *resourceslices;
	kube_informer *deviceclasses;
	kube_informer *claimtemplates;
	kube_informer *claims;
	/* provreqd.io/v1alpha1 ProvisioningClasses; NULL when the cluster
	 * does not serve them (requests naming one are then left alone). */
	kube_informer *provclasses;
} pr_informers;

void pr_ctl_use_informers(pr_ctl *c, const pr_informers *inf);

/* Fencing (docs/design.md §7): `may_act` is asked before every cloud call and
 * every status write; when it answers false (the lease may have expired)
 * the pass stops acting at once: nothing more is written or asked of the
 * cloud until a later pass finds it true again. Every cloud action is
 * preceded by its intent row, so stopping between two calls loses
 * nothing. NULL (the default) means always allowed. */
typedef bool (*pr_fence_fn)(void *ud);
void pr_ctl_set_fence(pr_ctl *c, pr_fence_fn may_act, void *ud);

/* Ask for the local state store to be rebuilt from the apiserver (bookings,
 * attempts and next-attempt times, node-group backoff, plans in flight)
 * before the next decision: call it when this replica takes the lease. The
 * first pass after pr_ctl_new always rebuilds. */
void pr_ctl_rebuild_from_api(pr_ctl *c);

/* The leader term this replica acts in: the election's key (the lease's
 * name, a label value: "" or NULL when not leader-elected), the holder's
 * identity and the lease's transition count when it was taken. Every
 * scale-up plan records the term that made it ("identity#transitions"),
 * in the state store and in the request's status; drivers that can fence
 * (ABI 1.4 PRD_CLOUD_CAP_FENCE) get (key, transitions + 1) with every
 * call, and each group is fenced with it before the term acts on it. */
void pr_ctl_set_term(pr_ctl *c, const char *key, const char *identity, int64_t transitions);

/* The plan key (classes/plan_seal.h): PR_PLAN_KEY_LEN (32) bytes every
 * replica and shard shares, copied. With it, every scale-up plan record
 * this controller writes into a status is sealed, and a record in a
 * status is adopted or believed only when its seal verifies. Without it
 * (the default, or key NULL), plans run from the local store only:
 * nothing is adopted from a status and a status never moves a local plan
 * (each refusal is a Warning Event and provreqd_plan_records_refused_total
 * {reason="no_key"}). `run` loads it with pr_plan_key_load; `simulate`
 * and tests set their own. */
void pr_ctl_set_plan_key(pr_ctl *c, const uint8_t *key, size_t len);

/* The name of the plan key's Secret, in provreqd's own namespace. */
#define PR_PLAN_KEY_SECRET "provreqd-plan-key"

/* Read the plan key from the Secret PR_PLAN_KEY_SECRET in namespace `ns`;
 * when there is none, create it with 32 random bytes (a create never
 * overwrites: on 409 the winner's key is read). *created (optional) says
 * whether this call made it. 0, or the API's error (PRD_EPERM when RBAC
 * does not allow it), or PRD_ECORRUPT for a Secret whose data.key is not
 * 32 bytes in base64. */
int pr_plan_key_load(const kube_api *api, const char *ns, uint8_t key[32], bool *created, prd_err *err);

/* Terms only go up (operator.md, "A recreated Lease"): when a group's
 * fence is refused because the group records term R of this election,
 * above this replica's, while `may_act` still says this replica holds the
 * lease, the controller asks `raise` to move the election's count to at
 * least R (leaseTransitions := R, so the term becomes R + 1; conditional
 * on the Lease's resourceVersion) and, on 0, acts in that term from the
 * next pass: a Lease recreated at 0 costs one pass. Raised at most
 * PR_TERM_RAISES_MAX times between two pr_ctl_set_term calls of the
 * caller's (each taking of the lease): terms that keep rising past ours
 * are another live election with the same key, which is left to lead.
 * NULL (the default): never raised. */
#define PR_TERM_RAISES_MAX 3
typedef int (*pr_term_raise_fn)(void *ud, int64_t transitions, prd_err *err);
void pr_ctl_set_term_raise(pr_ctl *c, pr_term_raise_fn raise, void *ud);

/* Why the last pass could act on nothing, for /readyz: true, with the
 * cause in `why`, when it was fenced out (a group records a newer term,
 * or the lease was not held with a margin); false when it acted. */
bool pr_ctl_fenced_out(const pr_ctl *c, char *why, size_t n);

/* The Event type ("Warning" or "Normal") recorded when a request's
 * condition `type` changes to `status` with `reason`. Warning marks what an
 * operator must look at: Failed=True, CapacityRevoked=True,
 * BookingExpired=True/CapacityReservationTimeExpired and
 * Provisioned=False/ScaleUpFailed. A Provisioned=False that comes with
 * Failed=True records no Event of its own. docs/user-guide.md lists it per
 * reason; tests/unit/test_docs.sh compares the two. */
const char *pr_event_type(const char *type, const char *status, const char *reason);

/* Replace the priority expander's table (cluster-autoscaler's
 * priority -> regexes; borrowed for the call, compiled and copied). The
 * table comes from outside the controller (a ConfigMap re-read by `run`,
 * a file for `simulate`); until one is set, "priority" in the chain is
 * skipped. On error the old table stays. Call between passes, from the
 * worker thread. */
struct sched_priority;
int pr_ctl_set_priorities(pr_ctl *c, const struct sched_priority *prio, size_t n, prd_err *err);

#endif

/* Provisioning-class modules (docs/design.md §3).
 *
 * A class module serves one or more provisioningClassName values. The
 * controller owns the pass: it reads the cluster, orders the requests,
 * validates them, applies deadlines, retry backoff and missing-template
 * waits, tracks bookings of Provisioned requests, and writes status. For
 * each request whose class a module serves and which needs a decision, it
 * calls the module's `decide` with a narrow host table: the cluster view
 * (a scheduling snapshot the module may fork), conditions with reasons,
 * provisioningClassDetails, booking, wake-up time, and the node groups of
 * the loaded drivers. A module never reaches into the controller, and
 * nothing in src/classes includes src/provreq.
 *
 * In the spirit of SQLite's VFS: the module is a const table of function
 * pointers; the host is a table the controller fills for each call.
 *
 * Threads: everything runs on the controller's worker thread. */
#ifndef PRD_CLASSES_CLASS_H
#define PRD_CLASSES_CLASS_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "driver/loader.h"
#include "kube/objects.h"
#include "ops/reslimit.h"
#include "sched/expander.h"
#include "sched/place.h"
#include "state/state.h"
#include "classes/vocab.h"
#include "util/arena.h"
#include "util/err.h"

/* One instance of a node group, copied from the driver's answer. The
 * strings live in the listing's block (pr_group_unlist frees it at once). */
typedef struct pr_class_inst {
	char *id;                 /* never NULL */
	char *node;               /* the Node's name, or NULL until it registers */
	int32_t state;            /* prd_cloud_instance_state */
	int32_t errclass;         /* prd_cloud_error_class */
	char *errmsg;             /* "code: message" when errclass != NONE, else NULL */
	char *owner;              /* the owner token the cloud reports (ABI 1.3), or NULL */
	int64_t created_ns;       /* when the cloud created it (ABI 1.3), 0 unknown */
} pr_class_inst;

/* One node group of a loaded driver, as seen this pass. */
typedef struct pr_class_group {
	cloud_driver *drv;
	char *id;
	int32_t min, max, target;
	bool has_tmpl;
	sched_node_spec tmpl;     /* arrays in the pass arena */
	json_object *tmpl_json;   /* keeps the template's strings alive */
	bool backed_off;
	int64_t backoff_until;
	bool busy;                /* an open plan already targets it */
	bool busy_elsewhere;      /* ... another shard's (the API says so): stays busy this pass */
	/* The fencing token every increase and decrease carries (ABI 1.4):
	 * the election key (borrowed, NULL none) and this replica's term. */
	const char *fence_key;
	uint64_t fence_term;
	/* `target` was read before a call that may have changed it (an
	 * increase that failed may still have taken effect): read it again
	 * (pr_group_refresh_target) before trusting it. */
	bool target_stale;
	/* The group's instances, listed at most once a pass (pr_group_list). */
	bool listed;
	int list_rc;              /* 0, or the error of the listing */
	char *list_err;
	pr_class_inst *inst;
	size_t ninst;
	unsigned list_seq;        /* moves whenever the listing is forgotten */
	/* Node auto-provisioning (ABI 1.5, classes/nap.c): the token the
	 * group was created with when a driver's create_group made it (NULL
	 * for other groups), and, for a group a plan is to create and the
	 * cloud does not list yet, what to create (NULL otherwise). */
	char *nap_owner;
	struct nap_new *nap_new;
} pr_class_group;

/* A plan's owner token (ABI 1.3 prd_cloud_increase.owner): its intent id
 * ("uid/ns#i") with '/' and '#' made '.' and '-', a valid label value. The
 * atomic class marks instances with it; the shards view recognises another
 * instance's plans by it. */
#define PR_OWNER_MAX 64
void pr_owner_token(const char *intent_id, char out[PR_OWNER_MAX]);
/* When a plan began: the time in its id ("uid/ns" or "uid/ns#i"), 0 when
 * the id carries none. */
int64_t pr_plan_began(const char *plan_id);
/* How far clocks (a cloud's, another replica's) may disagree with ours
 * when an instance's time is compared with a plan's. */
#define PR_CLOCK_SKEW_NS (60LL * PRD_NS_PER_SEC)

/* List the group's instances once this pass (later calls return the same
 * answer). The driver's answer is checked (every instance needs an id) and
 * copied. 0, or an error naming the driver and the group. */
int pr_group_list(pr_class_group *g, prd_err *err);
/* Delete the group's instances by id: through the driver's delete_fenced
 * with the group's fencing token when it fences (ABI 1.4), else
 * delete_instances. A driver with neither (pr_group_deletes_ids false)
 * deletes only what has a Node: `ids` are then node names, through
 * delete_nodes. 0 or a PRD_CLOUD_E* code with *de filled. */
int pr_group_delete(pr_class_group *g, const char *const *ids, size_t n, prd_cloud_error *de);
/* Whether pr_group_delete can delete by instance id (else only by node). */
bool pr_group_deletes_ids(const pr_class_group *g);

/* Forget the listing, so the next pr_group_list asks the cloud again. */
void pr_group_unlist(pr_class_group *g);
/* Ask the driver for the group's sizes again (when target_stale): 0 and
 * target_stale cleared, or an error (target_stale stays set). */
int pr_group_refresh_target(pr_class_group *g, prd_err *err);

/* Limits and durations a module may need (copied from the controller's
 * configuration). Durations in nanoseconds. */
typedef struct pr_class_limits {
	int64_t booking_ttl_ns;
	int64_t provision_timeout_ns;
	int64_t max_nodes_total;        /* 0 = no limit */
	int64_t max_nodes_per_scaleup;  /* 0 = no limit */
	/* Node auto-provisioning (classes/nap.c). */
	bool nap;                       /* create groups of the drivers' shapes */
	int64_t nap_max_groups;         /* auto-provisioned groups at most */
	int64_t scale_down_idle_ns;     /* an empty auto-provisioned group goes after this */
	/* Cluster-wide totals over every node (--cores-total, ...); borrowed. */
	const cfg_res_limit *res_limits;
	size_t nres_limits;
} pr_class_limits;

/* What Node a name refers to in this pass. */
typedef enum pr_node_state {
	PR_NODE_ABSENT = 0,
	PR_NODE_NOT_READY,  /* exists, not Ready or being deleted */
	PR_NODE_READY       /* Ready and not being deleted: usable */
} pr_node_state;

typedef struct pr_class_ctx pr_class_ctx; /* the controller's, opaque */

typedef enum pr_class_stat {
	PR_STAT_SCALEUP_STARTED = 0,   /* the cloud was asked */
	PR_STAT_SCALEUP_SUCCEEDED,
	PR_STAT_SCALEUP_ROLLED_BACK,   /* a rollback the cloud confirmed */
	PR_STAT_KEPT_MISMATCH          /* (verify) something the module kept differed from its source */
} pr_class_stat;

/* The request being decided. Everything is borrowed for the call. */
typedef struct pr_class_req {
	const kube_provreq *pr;
	const char *class_name;   /* as written on the request */
	bool no_retry;
	bool terminal;            /* Failed, BookingExpired or CapacityRevoked, or
	                             being deleted */
	bool deleting;            /* has a deletionTimestamp */
	sched_podset *sets;       /* the podSets resolved against their templates;
	                             NULL for a request in flight whose templates
	                             are gone */
	size_t nsets;
} pr_class_req;

/* Services of the controller, valid for one call. */
typedef struct pr_class_host {
	pr_class_ctx *ctx;
	int64_t now;                    /* wall time of the pass */
	const pr_class_limits *limits;
	arena *ar;                      /* freed at the end of the pass */
	/* The called module's own slot for the pass: NULL at its start, kept
	 * across its calls of the pass (what it points to must live in `ar`,
	 * with arena_defer for anything to release). */
	void **pass_data;
	/* The module's own slot kept across passes: NULL when the controller
	 * starts; what it points to is the module's, released by its
	 * `kept_free` when the controller is freed. NULL when out of memory
	 * (the module then keeps nothing). */
	void **kept;
	/* Tests: check what the module keeps against where it came from, and
	 * count differences (count(PR_STAT_KEPT_MISMATCH)). */
	bool verify;
	/* The pass's scheduling snapshot: existing nodes and pods, with every
	 * booking and every module's reservations (pr_class_module.reserve)
	 * in it. Prepared when first asked for in a pass (a pass that
	 * places nothing never reads the bookings), the same snapshot after
	 * that. NULL when the bookings cannot be read: the pass then acts no
	 * further (may_act is false) and the module must not answer the
	 * request. */
	sched_snapshot *(*snapshot)(pr_class_ctx *ctx);
	state_db *db;                   /* NULL when running without a store */
	const char *term;               /* the leader term acting ("" when not leader-elected) */
	/* The same as a fencing token (ABI 1.4): the election key (NULL
	 * none) and this replica's term in it (0: not leader-elected). */
	const char *fence_key;
	uint64_t fence_term;
	sched_expander *expander;
	pr_class_group *groups;         /* node groups of every loaded driver */
	size_t ngroups;
	int64_t cluster_nodes;          /* Node objects in the cluster */
	/* Per limits->res_limits entry: that resource's capacity summed over
	 * every Node of the cluster this pass (whoever made it). */
	const int64_t *res_totals;
	/* Every loaded driver (node auto-provisioning asks them for shapes). */
	const cloud_drivers *drivers;
	/* Every loaded driver listed its node groups this pass: a group none
	 * of them lists is served by no driver here (not merely unlisted). */
	bool groups_complete;
	/* The plan key (classes/plan_seal.h; PR_PLAN_KEY_LEN bytes), or NULL
	 * when this replica has none: then no plan record in a status is
	 * believed. */
	const uint8_t *plan_key;

	/* Set a condition on the request; a transition records an Event and
	 * metrics. */
	void (*set_cond)(pr_class_ctx *ctx, const char *type, const char *status, const char *reason,
			 const char *msg);
	/* Provisioned=True with this reason and message. */
	void (*provisioned)(pr_class_ctx *ctx, const char *reason, const char *msg);
	/* A negative answer: Provisioned=False, then a retry after the
	 * request's backoff, or Failed=True with noRetry. */
	void (*not_provisioned)(pr_class_ctx *ctx, const char *reason, const char *msg);
	/* A final failure regardless of noRetry. */
	void (*failed)(pr_class_ctx *ctx, const char *reason, const char *msg);
	/* Book what `res` placed (per node, the pods' requests) for the
	 * request, until the booking TTL. */
	int (*book)(pr_class_ctx *ctx, const sched_podset *sets, size_t n, const sched_place_result *res,
		    prd_err *err);
	/* The same, held until wall time `until_ns` instead of the TTL. */
	int (*book_until)(pr_class_ctx *ctx, const sched_podset *sets, size_t n, const sched_place_result *res,
			  int64_t until_ns, prd_err *err);
	/* Set (value non-NULL) or remove one provisioningClassDetails key. */
	void (*set_detail)(pr_class_ctx *ctx, const char *key, const char *value);
	/* Ask for another pass by wall time t. */
	void (*wake_at)(pr_class_ctx *ctx, int64_t t);
	/* Fencing: false once this replica may have lost the lease. Ask
	 * before every cloud call; on false act no further. */
	bool (*may_act)(pr_class_ctx *ctx);
	/* Write the request's status now (conditions and details so far),
	 * before a cloud call that must be recorded in the API first. 0, or
	 * an error (the module must then not make the call). */
	int (*write_now)(pr_class_ctx *ctx, prd_err *err);
	/* What the cluster knows of a Node by name. */
	pr_node_state (*node_state)(pr_class_ctx *ctx, const char *node_name);
	/* Does a pod run on the Node (by name) other than the request's own
	 * (its consumer pods; DaemonSet and mirror pods aside, as for
	 * scale-down)? Without a request, any such pod counts. True too when
	 * the pods cannot be read. */
	bool (*node_busy)(pr_class_ctx *ctx, const char *node_name);
	/* The node cache's generation this pass read (0 when the pass did
	 * not read Nodes from a cache), and fn(ud, name) for every Node
	 * added, changed or deleted after an earlier pass's generation
	 * `gen`. False when that cannot be told (no cache, or its journal no
	 * longer reaches back): look at every node again. */
	uint64_t nodes_gen;
	bool (*nodes_changed_since)(pr_class_ctx *ctx, uint64_t gen, void (*fn)(void *ud, const char *node),
				    void *ud);
	/* fn(ud, name) for every Node created at or after wall time t. */
	void (*nodes_since)(pr_class_ctx *ctx, int64_t t, void (*fn)(void *ud, const char *node), void *ud);
	/* A Node (JSON, borrowed for the call) as the simulator sees it, in
	 * the pass arena: what node auto-provisioning makes of a shape. 0 or
	 * an error saying what is wrong with it. */
	int (*node_spec)(pr_class_ctx *ctx, json_object *node, sched_node_spec *out, prd_err *err);
	/* A PodTemplate's `template` of the request's namespace (borrowed),
	 * or NULL. */
	json_object *(*template_json)(pr_class_ctx *ctx, const char *name);
	/* An Event on the request (when there is one) that is not a condition
	 * transition: type "Normal" or "Warning". */
	void (*event)(pr_class_ctx *ctx, const char *type, const char *reason, const char *msg);
	/* The same on any request of the pass (from the pass hooks). */
	void (*event_on)(pr_class_ctx *ctx, const kube_provreq *pr, const char *type, const char *reason,
			 const char *msg);
	/* Mark a Node as made by a plan of this request, so it is removed
	 * when it stays empty after the request's booking ended. */
	void (*mark_node)(pr_class_ctx *ctx, const char *node_name);
	/* Hold the request (a finalizer) while the module has cloud work in
	 * flight for it, so deleting it waits until that work is undone even
	 * across a failover; release when the work is over. 0 or an error. */
	int (*hold)(pr_class_ctx *ctx, bool on, prd_err *err);
	/* Count an event of a scale-up in the controller's statistics. */
	void (*count)(pr_class_ctx *ctx, pr_class_stat what);
} pr_class_host;

/* The view of all requests, for the hooks that run around the requests. */
typedef struct pr_class_pass {
	const kube_provreq *const *prs;  /* every request of the pass, ordered */
	size_t nprs;
	/* Is this request served here (its class is this module's and its
	 * processorInstance is ours)? */
	bool (*ours)(pr_class_ctx *ctx, const kube_provreq *pr);
	/* The first pass of this replica's term (its start, or taking the
	 * lease): what the module keeps locally may be stale; where the API
	 * contradicts it, the API wins. */
	bool term_began;
} pr_class_pass;

typedef struct pr_class_module pr_class_module;

struct pr_class_module {
	const char *name;               /* canonical provisioningClassName */
	const char *const *aliases;     /* NULL-terminated; may be NULL */
	const char *short_name;         /* metric label and plugin short name */
	void *ud;                       /* the module's own (a driver, for driver classes) */

	/* What the controller knows of the class without calling it (the
	 * shards view reads it of another instance's requests, the topology
	 * gate before the module decides, `simulate` in its report). All
	 * false for a driver's class: nothing here can foresee its answer. */
	/* It answers from the nodes that exist and never adds one, all of a
	 * request's pods or none (check-capacity): another instance's waiting
	 * request of it is placed whole or not at all, and the topology gate
	 * counts no room on new nodes for it. */
	bool existing_nodes_only;
	/* It scales up through plans it records in the request's
	 * provisioningClassDetails (phase, node groups): a plan the status
	 * shows open holds its groups busy for every instance. */
	bool records_plans;
	/* Another instance's request of it that waits for an answer takes
	 * room in decision order: the shards view places it ahead of this
	 * instance's younger requests, as its instance will place it. */
	bool placed_for_others;

	/* Optional. Before any request is decided: adopt and index state. */
	void (*pass_begin)(const pr_class_module *m, const pr_class_host *h, const pr_class_pass *p);
	/* Optional. Reserve capacity in the pass's snapshot that no request
	 * may count (h->snapshot returns it): called at most once a pass,
	 * when the snapshot is first asked for, after the bookings are in it
	 * and after pass_begin. */
	void (*reserve)(const pr_class_module *m, const pr_class_host *h, const pr_class_pass *p);
	/* Optional. A request of this class that has something in flight
	 * (the module says so): it is handed to `decide` even when terminal,
	 * in backoff or past its deadline. */
	bool (*in_flight)(const pr_class_module *m, const pr_class_host *h, const kube_provreq *pr);
	/* Decide one request. */
	void (*decide)(const pr_class_module *m, const pr_class_host *h, const pr_class_req *req);
	/* Optional. After every request: finish work of requests that are
	 * gone or were not decided this pass. */
	void (*pass_end)(const pr_class_module *m, const pr_class_host *h, const pr_class_pass *p);
	/* Optional. Release what the module kept in pr_class_host.kept. */
	void (*kept_free)(void *kept);
};

/* ---- the registry ------------------------------------------------------ */

typedef struct pr_class_registry pr_class_registry;

/* Caller frees with pr_class_registry_free(). */
int pr_class_registry_new(pr_class_registry **out, prd_err *err);
void pr_class_registry_free(pr_class_registry *r);

/* Register a module under its name and aliases; `provider` ("built-in",
 * or the driver's name) names who serves it in messages. Refused when a
 * name is already served, with a message naming both providers. The
 * module is borrowed and must outlive the registry. */
int pr_class_register(pr_class_registry *r, const pr_class_module *m, const char *provider, prd_err *err);

/* The module serving a class name (or alias), or NULL. */
const pr_class_module *pr_class_lookup(const pr_class_registry *r, const char *class_name);

/* Every registered module, in registration order. */
size_t pr_class_modules(const pr_class_registry *r, const pr_class_module *const **out);

/* Append "; not checked: ..." to msg (of size len) for what the pods of
 * these podSets need that the simulation does not model (their caveats),
 * so a positive answer says what it did not look at. */
void pr_class_caveats(const sched_podset *sets, size_t n, char *msg, size_t len);

/* Built-in modules. */
extern const pr_class_module pr_class_check_capacity;
extern const pr_class_module pr_class_atomic;

/* Every built-in module, NULL-terminated, in the order the controller
 * registers them (before any driver's class). A new built-in class is
 * added here (registry.c) and nowhere else in the controller. */
extern const pr_class_module *const pr_class_builtins[];

/* The built-in module serving a class name or alias, or NULL: for code
 * that has no registry (`simulate` labels and checks what-if requests). */
const pr_class_module *pr_class_builtin(const char *class_name);

#endif

/* Internals of the ProvisioningRequest controller shared by its files and
 * the provisioning classes in src/classes/ (check-capacity, atomic
 * scale-up). Everything here runs on the controller's worker thread.
 *
 * A pass is a pipeline of stages (docs/development.md, "The pass"), each
 * a file with one entry point, run in this order by controller.c's pass
 * driver (pr_ctl_pass). Under "the stages" below, each file also declares
 * what later stages use from it and what the driver frees at the end of
 * the pass with:
 *   world.c         pr__world_read    caches (or the API) -> pr_world
 *                   pr__world_done    (world_nodes.c: groups, node table)
 *   snapshot.c      pr__snapshot_build  pr_world -> w->snap (kept base,
 *                                     fingerprints, verify mode), called by
 *                                     the driver between the two world
 *                                     calls, while the caches are locked
 *                                     (after rebuild.c and shards.c);
 *                                     snapshot_book.c: bookings on first
 *                                     use (pr__snap)
 *   decide.c        pr__decide        each request through the class
 *                                     registry -> queued writes, store rows
 *   write.c         pr__write         queued marks and statuses -> the API;
 *                                     modules' pass_end; scale-down
 *   housekeeping.c  pr__housekeeping  pruning, gauges, end of pass
 * The state they share is the data below (pr_world for one pass, pr_ctl
 * across passes). Every call goes to a file of the same or a lower layer
 * (src/provreq/layers.txt, checked by tests/check-layers.sh): the
 * look-ups of a pass (lookup.c, pclass_use.c) and the helpers (ctl_int.c,
 * dirty.c, ledger.c, status.c, scaledown.c) sit below the stages, and no
 * file calls controller.c. */
#ifndef PRD_PROVREQ_CTL_INT_H
#define PRD_PROVREQ_CTL_INT_H

#include <json-c/json.h>
#include <stdint.h>

#include "classes/class.h"
#include "driver/loader.h"
#include "kube/events.h"
#include "kube/objects.h"
#include "provreq/controller.h"
#include "provreq/dra.h"
#include "provreq/request.h"
#include "sched/expander.h"
#include "sched/place.h"
#include "util/arena.h"
#include "util/hmap.h"

typedef pr_class_group pr_group;

/* A node provreqd's plan made (see scaledown.c). Strings in the arena. */
typedef struct pr_marked {
	const char *name, *uid;
	bool cordoned, opted_out, unschedulable;
	/* Known by the owner label alone (stamped at creation, before the
	 * plan's outcome is known), not by the annotation written on success. */
	bool by_label;
	/* Per c->limits.res_limits: the node's capacity (pass arena; NULL
	 * without limits). Scale-down keeps every total at its MIN. */
	int64_t *res;
} pr_marked;

/* Everything read at the start of a pass. */
typedef struct pr_world {
	kube_intern *in;
	kube_meta **objs;         /* every decoded object, for freeing */
	size_t nobjs, capobjs;
	/* The cluster as read at the start of the pass. nodes and pods are
	 * valid only while the world is being built (in informer mode they
	 * live in the caches, whose locks are released before any request is
	 * decided); everything below them is owned by the world. */
	kube_node **nodes;
	size_t nnodes;
	kube_pod **pods;
	size_t npods;
	kube_provreq **prs;       /* owned: decoded, or cloned from the cache; or the controller's kept copies */
	size_t nprs;
	bool prs_kept;            /* prs point at pr_ctl.prs (not owned) */
	const hmap *nodes_by_name; /* name → PR_NODE_USABLE or PR_NODE_PRESENT (the controller's) */
	hmap uids;                /* uid of every request of the pass (no values) */
	hmap blocking;            /* node → non-NULL when a non-DaemonSet pod runs there */
	pr_marked *marked;        /* nodes provreqd made */
	size_t nmarked, capmarked;
	/* "ns/name" → PodTemplate `template` JSON: own_tpls, or in informer
	 * mode the controller's kept copies (pr_ctl.tpls). */
	hmap *tpls;
	hmap own_tpls;
	hmap class_data;          /* module name → its pass slot (void **, arena) */
	pr_group *groups;
	size_t ngroups;
	arena ar;
	sched_snapshot *snap;
	int64_t ready_nodes;
	/* Informer mode: the caches' generations when they were read. The
	 * snapshot of nodes and pods is then kept between passes (pr_ctl's
	 * base) and reused while they do not change; a pass works in a fork
	 * of it, reverted at the end. */
	bool cacheable;
	bool locked;              /* the four caches' read locks are held (pr__world_read) */
	uint64_t gen_nodes, gen_pods, gen_tpls;
	bool snap_shared;         /* w->snap is the controller's base */
	/* pr__snap prepared w->snap (bookings and reservations in it), or
	 * failed to (snap_failed; the pass acts no further). */
	bool snap_booked, snap_failed;
	bool groups_incomplete;   /* some driver could not list its node groups this pass */
	int64_t *res_totals;      /* per c->limits.res_limits: capacity over every Node (pr__node_totals) */
	size_t skipped_pods;      /* scheduled pods whose node is not in the snapshot */
	bool pods_read;           /* pods/npods hold the pods (informer mode: borrowed when needed) */
	const pr_informers *inf;  /* non-NULL: prs are clones made with inf->intern */
	pr_dra dra;               /* resource.k8s.io: devices per node, claims, classes */
	bool term_began;          /* the local store was rebuilt from the API this pass */
	struct pr_pc_world *pc;   /* ProvisioningClasses applied (pclass_use.c), or NULL */
	struct pr_quota_world *quota; /* quotas read and answers given this pass (quota_use.c), or NULL */
} pr_world;

/* The key of a booking row's resources JSON that lists the DRA devices it
 * holds ("driver/pool/device" strings) beside the resource amounts. */
#define PR_BOOKING_DEVICES "resource.k8s.io/devices"
/* ... or, in a booking rebuilt from a request's status (which records pods
 * per node, not devices), {"<podSet index>": pods}: the devices those pods
 * need are allocated anew on the node when the booking is applied. */
#define PR_BOOKING_DEVICE_PODS "resource.k8s.io/devicePods"

/* Values of pr_world.nodes_by_name. */
#define PR_NODE_PRESENT ((void *)(uintptr_t)1)
#define PR_NODE_USABLE ((void *)(uintptr_t)2)

/* The booking ledger (ledger.c). */
typedef struct pr_ledger {
	bool on;
	char ns[254], name[254];
	bool exists;              /* the ConfigMap exists (PUT, else POST) */
	char *rv;                 /* its resourceVersion as read or written */
	json_object *data;        /* its data as read or written */
	uint64_t read_pass;       /* the pass (stats.passes + 1) that read it; 0: read again */
	uint64_t conflict_pass;   /* the pass whose write of it was refused (409) */
	hmap uids;                /* requests whose entry this pass booked from the ledger */
	hmap gone;                /* entries of deleted requests, dropped with the next write */
	/* The layout (ledger.c, "Layout"): entries in the head (the ConfigMap
	 * above) and in immutable overflow ConfigMaps the head names. */
	size_t obj_max;           /* bytes of entries one object may hold */
	size_t inline_max;        /* ... that the head keeps before it spills */
	struct pr_ledger_obj *objs; /* the overflow objects the head names, as read or written */
	size_t nobjs;
	hmap where;               /* uid -> index + 1 into objs of the object holding it (absent: the head) */
	hmap cache;               /* overflow object name -> its data (json_object *): each is read once */
} pr_ledger;

/* One request's booking change for pr__ledger_commit. */
typedef struct pr_ledger_change {
	const char *uid, *key;    /* key "ns/name" */
	bool add;                 /* record its local rows (false: remove its entry) */
	bool too_large;           /* out: its entry does not fit one object; not recorded */
} pr_ledger_change;

/* The controller's side of a class call (pr_class_host.ctx). */
struct pr_class_ctx {
	pr_ctl *c;
	pr_world *w;
	const kube_provreq *pr;
	const pr_params *pp;
	pr_conds *conds;
	const char *rv;           /* the version the next status write is based on */
	char *rv_owned;           /* ... when a write_now made a newer one */
	bool dropped;             /* the object is gone (404): write nothing more */
	bool release;             /* remove provreqd's finalizer after the status write */
	/* The details this decision's writes sent already (pr__write_status:
	 * a merge of their patches), over what `pr` shows: what the API holds
	 * when the seal of the plan record is worked out. Freed with the
	 * decision. */
	json_object *sent;
};

/* The bookings and open plans the requests' statuses record (shards.c). */
typedef struct pr_shards {
	bool valid;               /* entries follow the request cache as of gen */
	uint64_t gen;
	hmap entries;             /* "ns/name" → what its status says (owned) */
	hmap foreign;             /* uids of requests another instance serves */
	hmap live;                /* uid → entry with a booking */
	hmap plans;               /* uid → entry of another instance's open plan */
	hmap waiting;             /* uid → entry of another instance's request it has yet to answer */
	/* This pass: those due now, in decision order (pass arena), and how
	 * many were placed so far. */
	struct pr_shard_cand *cands;
	size_t ncands, next;
} pr_shards;

/* The state store is pruned at most this often. */
#define PR_PRUNE_EVERY_NS (60 * PRD_NS_PER_SEC)

struct pr_ctl {
	pr_config cfg;
	const clk *clock;
	kube_api api;
	state_db *db;
	cloud_drivers *drivers;
	sched_expander *expander;
	kube_recorder *recorder;
	bool use_inf;
	pr_informers inf;
	/* uid → the resourceVersion a successful status write was based on. A
	 * cache that still shows that version has not seen our write yet, so
	 * the request is skipped rather than decided twice. */
	hmap written;
	/* provisioningClassDetails to write with the current request's status
	 * (a merge patch: null removes a key; set while deciding one request,
	 * consumed by its status write). */
	json_object *details;
	pr_class_limits limits;
	hmap unowned;             /* uids of requests of a class nobody here serves, logged once */
	pr_class_registry *classes; /* built-in modules and the drivers' classes */
	kube_api ev_api;          /* what the recorder writes Events through, when set */
	sched_snapshot *base;     /* nodes and pods as of base_gen_* (informer mode), or NULL */
	uint64_t base_gen_nodes, base_gen_pods;
	uint64_t base_nodes_fp, base_pods_fp; /* fingerprints of what the base holds */
	uint64_t base_dra_fp;     /* devices and claims' allocations the base holds */
	size_t base_skipped;      /* scheduled pods left out: their node was not in it */
	int64_t base_ready;
	pr_class_module **dclasses; /* the drivers' class modules (owned) */
	size_t ndclasses;
	hmap idle_since;          /* node → int64_t* when it became idle (scale-down) */
	/* Per loaded driver (index in drivers->v), for nodes_changed: the
	 * Node cache generation it was last told up to, and whether it has
	 * been told at all (else the next call is a full set). */
	uint64_t *fed_gen;
	bool *fed;
	size_t nfed;
	/* Which requests a pass decides (dirty.c; informer mode). */
	struct {
		bool ready;       /* the last pass ran to its end: gen[] is where to follow the journals from */
		bool lost;        /* something could not be remembered this pass */
		bool all;         /* this pass decides every request */
		bool node_gone;   /* a Node was deleted since the last pass */
		uint64_t gen[4];  /* nodes, pods, podtemplates, provreqs read by the last pass */
		uint64_t dra_gen[3]; /* resourceslices, deviceclasses, claimtemplates, the same */
		hmap memo;        /* "ns/name" of a request → what its last decision left */
		hmap keys;        /* "ns/name" of requests marked this pass */
		hmap tpl_ns;      /* namespaces whose PodTemplates changed */
	} dirty;
	/* What the pods give a pass besides the snapshot (digest_pods), kept
	 * while the pod cache's generation stays pods_digest_gen. */
	bool pods_digested;
	uint64_t pods_digest_gen;
	hmap consumers;           /* "ns/name" of a request → scheduled consumer pods */
	hmap pod_blocked;         /* node → (void *)1 where a pod that blocks scale-down runs */
	/* node → whose pods block scale-down there: "ns/name" of the one
	 * request they all consume, or "" (others' pods); owned strings. A
	 * rollback asks (pr_class_host.node_busy). */
	hmap pod_users;
	/* The usable nodes' fingerprint (nodes_fp) as of node cache generation
	 * nfp_gen, kept from the cache's journal: name → uint64_t fp. */
	bool nfp_valid;
	uint64_t nfp_gen, nfp_sum;
	hmap nfp;
	/* Every node's presence and readiness (pr_world.nodes_by_name), its
	 * creationTimestamp (born: name → int64_t *) and the nodes provreqd's
	 * plans made (made: names), as of node cache generation nbn_gen, kept
	 * from the cache's journal. */
	bool nbn_valid;
	uint64_t nbn_gen;
	hmap nodes_by_name;
	hmap born;
	hmap made;
	hmap tmpl_said; /* group id -> why it has no usable template, as last logged */
	/* Bookings' resources parsed, by their text (snapshot_book.c pr_bres),
	 * and how many distinct texts the last pass's bookings had. */
	hmap bres;
	arena bres_ar;
	size_t bres_live;
	/* Module name → its slot kept across passes (pr_class_host.kept; the
	 * cells are malloc'd). */
	hmap class_kept;
	/* Informer mode: copies of the cached requests ("ns/name" →
	 * kube_provreq *, made with inf.intern) as of cache generation
	 * prs_gen, kept from the cache's journal. */
	bool prs_valid;
	uint64_t prs_gen;
	/* The requests' gauges were exported from the kept requests at
	 * request cache generation gauges_gen. */
	bool gauges_valid;
	uint64_t gauges_gen;
	hmap prs;
	bool prs_added_or_gone;   /* since the templates were last copied */
	/* The PodTemplates requests name, copied out of the template cache
	 * ("ns/name" → `template` JSON), as of its generation tpl_gen. */
	bool tpl_valid;
	uint64_t tpl_gen;
	hmap tpls;
	bool deciding;            /* a request is being decided: wakes are its own too */
	int64_t req_wake;         /* ... the earliest it asked for */
	bool req_in_flight;       /* ... and whether it had cloud work in flight */
	int64_t sizes_exported;   /* when node-group sizes were last listed */
	int64_t pruned_at;        /* when the state store was last pruned (0 = never) */
	pr_shards shards;
	pr_ledger ledger;
	pr_stats stats;
	int64_t now;
	int64_t next_wake;
	pr_fence_fn may_act;      /* NULL: always allowed */
	void *may_act_ud;
	bool fenced;              /* may_act said no during this pass */
	bool need_rebuild;        /* rebuild the local store from the API first */
	char term[300];           /* pr_ctl_set_term */
	char fence_key[64];       /* pr_ctl_set_term: the election, "" none */
	uint64_t fence_term;      /* ... and the term in it, 0 none */
	uint8_t plan_key[32];     /* pr_ctl_set_plan_key (classes/plan_seal.h) */
	bool plan_key_set;
	hmap fenced_groups;       /* groups fenced in this term (no values) */
	char term_id[256];        /* pr_ctl_set_term: the holder's identity */
	pr_term_raise_fn raise;   /* pr_ctl_set_term_raise */
	void *raise_ud;
	unsigned raises;          /* terms raised since the caller last set one */
	char fenced_out[600];     /* why the pass was fenced out ("" it was not; pr_ctl_fenced_out) */
	hmap groups_exported;     /* node groups whose series the metrics hold (housekeeping.c) */
	hmap conds_logged;        /* condition changes logged as written this pass (status.c) */
	struct pr_status_write *writes; /* status writes deferred to the end of the pass */
	size_t nwrites;
	struct pr_node_mark *marks; /* node marks deferred to the end of the pass */
	size_t nmarks, capmarks;
	struct pr_pcs *pcs;       /* the ProvisioningClass objects (pclass_use.c) */
	bool quota_warned;        /* ResourceQuotas could not be read (forbidden): said once */
};

/* src/provreq/ctl_int.c. Fencing: may the controller call the cloud or
 * write status now? Once it says no, the rest of the pass acts on nothing. */
bool pr__may_act(pr_ctl *c);

/* src/provreq/plan_key.c. Does the scale-up plan record in pr's status
 * verify under this controller's plan key (classes/plan_seal.h)? */
bool pr__plan_sealed(const pr_ctl *c, const kube_provreq *pr);

/* src/provreq/ctl_int.c. pr_ctl_set_term without starting the count of
 * raises again (the term raised above a recorded one: world_nodes.c). */
void pr__term_apply(pr_ctl *c, const char *key, const char *identity, int64_t transitions);

/* Ask for another pass by wall time t (the earliest request wins). */
void pr__wake_at(pr_ctl *c, int64_t t);
/* Run fn(ud, 0..n-1) on up to `par` threads (the caller's among them; fewer
 * when threads cannot be made), each index once; returns when all ran. */
void pr__parallel(unsigned par, size_t n, void (*fn)(void *ud, size_t i), void *ud);
/* Remove the keys of `m` that are not in `live`. */
void pr__forget_vanished(hmap *m, const hmap *live);
/* A json_object as a free function (hmap values, arena_defer). */
static inline void pr__put_json(void *o)
{
	json_object_put(o);
}

/* Ready and not being deleted: a node the simulation may use. */
static inline bool pr__node_usable(const kube_node *n)
{
	return n->ready == KUBE_COND_TRUE && !n->meta.deleted_ns;
}
/* May this pass keep what it derives from the caches up to date from their
 * journals (else it derives it anew; cfg.full_passes is the reference the
 * tests compare with)? */
static inline bool pr__incremental(const pr_ctl *c, const pr_world *w)
{
	return w->cacheable && !c->cfg.full_passes;
}

/* ---- the look-ups of a pass (lookup.c) ----------------------------------- */

/* The module serving a class name, or NULL. */
const pr_class_module *pr__module_for(const pr_ctl *c, const char *class_name);
/* Resolve the request's PodTemplates into sched podSets. Returns 0, or
 * PRD_ENOTFOUND naming the first missing template in `missing`, or another
 * code when a template cannot be simulated. */
int pr__resolve_podsets(pr_world *w, const kube_provreq *pr, sched_podset *sets, char *missing, size_t mlen,
			prd_err *err);
/* The node group `id` of the pass, or NULL. */
pr_group *pr__find_group(pr_world *w, const char *id);

/* ---- the stages ---------------------------------------------------------- */

/* src/provreq/world.c: read the pass's world. In informer mode it returns
 * with the caches' read locks held (w->locked), also on an error; the
 * caller builds from what they guard, then calls pr__world_done with its
 * own result, which lets them go and (when rc is 0) puts the requests in
 * decision order and applies the ProvisioningClasses; it returns rc or
 * its own error. On an error the world is still freed with
 * pr__world_free after pr__snapshot_release. */
int pr__world_read(pr_ctl *c, pr_world *w, prd_err *err);
int pr__world_done(pr_ctl *c, pr_world *w, int rc, prd_err *err);
void pr__world_free(pr_world *w);
/* The kept copies of the cached requests (c->prs), dropped. */
void pr__drop_kept_requests(pr_ctl *c);
/* In informer mode the pods are borrowed from the cache only when a pass
 * needs them: when they changed, or the snapshot is built anew. */
int pr__need_pods(pr_ctl *c, pr_world *w, prd_err *err);

/* src/provreq/world_nodes.c (for world.c): the node groups of the loaded
 * drivers, each driver told about the Nodes and its groups fenced first;
 * the node table (c->nodes_by_name, c->born, c->made); the nodes provreqd
 * made (w->marked). */
int pr__load_groups(pr_ctl *c, pr_world *w, prd_err *err);
int pr__node_table(pr_ctl *c, pr_world *w);
int pr__marked_nodes(pr_ctl *c, pr_world *w);
/* w->res_totals: each limited resource's capacity summed over every Node
 * (none without limits). 0 or PRD_ENOMEM. */
int pr__node_totals(pr_ctl *c, pr_world *w);

/* src/provreq/snapshot.c: the snapshot of nodes and pods for the pass
 * (world.c calls it with the caches locked) and, at the end of the pass,
 * the kept base given back as it was built. */
int pr__snapshot_build(pr_ctl *c, pr_world *w, prd_err *err);
void pr__snapshot_release(pr_ctl *c, pr_world *w);
/* src/provreq/snapshot_book.c: the pass's snapshot with every booking and the modules' reservations in
 * it, prepared on first use (pr_class_host.snapshot). NULL when the
 * bookings cannot be read: the pass is then fenced (acts no further). */
sched_snapshot *pr__snap(pr_ctl *c, pr_world *w);
/* The texts of bookings that ended stay parsed until they outnumber those
 * in use; then everything is parsed anew on the next pass. Call once the
 * pass's snapshot is gone (it borrows them). */
void pr__bres_trim(pr_ctl *c);

/* src/provreq/decide.c: every request of the pass, in order. */
void pr__decide(pr_ctl *c, pr_world *w);
/* src/provreq/write.c: the queued writes sent, the modules' pass_end,
 * scale-down. */
void pr__write(pr_ctl *c, pr_world *w);
/* src/provreq/housekeeping.c: pruning, gauges, the end of the pass. */
void pr__housekeeping(pr_ctl *c, pr_world *w);

/* src/provreq/host.c: the services a class module gets (pr_class_host). */
void pr__host_init(pr_class_host *h, pr_class_ctx *x);
/* The module's slot for this pass (pr_class_host.pass_data) and the one
 * kept across passes (pr_class_host.kept); NULL when out of memory. */
void **pr__class_slot(pr_world *w, const pr_class_module *m);
void **pr__class_kept(pr_ctl *c, const pr_class_module *m);
/* Does this instance decide the request (pr_class_pass.ours)? */
bool pr__class_ours(pr_class_ctx *x, const kube_provreq *pr);
/* Call every class module's hook of the pass: pass_begin, reserve (from
 * pr__snap, once the bookings are in) or pass_end. */
typedef enum { PR_HOOK_BEGIN, PR_HOOK_RESERVE, PR_HOOK_END } pr_hook;
void pr__modules_hook(pr_ctl *c, pr_world *w, pr_hook which);
/* Set a condition and, on a transition, record an Event and metrics.
 * `quiet`: no Event (another condition of the same decision has one). */
void pr__set_cond(pr_ctl *c, const kube_provreq *pr, pr_conds *conds, const char *type, const char *status,
		  const char *reason, const char *msg, bool quiet);
/* src/provreq/status.c. Write the edited conditions and details
 * (x->c->details) with x->rv as a precondition, now. */
int pr__write_status(pr_class_ctx *x, prd_err *err);
/* The write that ends a decision (and the finalizer's release after it):
 * queued until pr__status_flush at the end of the pass, which sends the
 * queue cfg.status_writers at a time and handles the outcomes in order.
 * Discard frees a queue that will not be sent. */
void pr__status_defer(pr_class_ctx *x);
void pr__status_flush(pr_ctl *c);
void pr__status_discard(pr_ctl *c);
/* provreqd's finalizer on a request with cloud work in flight, added or
 * removed (status.c, beside the status writes it is ordered with). */
#define PR_FINALIZER KUBE_PR_FINALIZER
int pr__hold(pr_ctl *c, const kube_provreq *pr, bool on, prd_err *err);
/* src/provreq/rebuild.c: the bookings (ledger, statuses), attempts and
 * backoffs the API records, into the local store (after a restart or a
 * failover). 0, or the error that keeps the term from acting. */
int pr__rebuild_from_api(pr_ctl *c, pr_world *w);
/* The same when this pass begins a term that has not rebuilt yet (not in
 * a pass that may not act: a term whose groups are not all fenced yet
 * rebuilds in the first pass that may); a failure fences the pass and
 * asks for another in a second. */
void pr__rebuild_on_new_term(pr_ctl *c, pr_world *w);
/* src/provreq/shards.c: when the booking a request's status records ends
 * (0: none holds): a Provisioned request's, the booking TTL after it was
 * Provisioned; the room a scale-up in flight holds, the plan's deadline
 * plus the hold margin (*plan, freed by the caller, gets that plan: the
 * local store may know it ended). Nothing for a request final or being
 * deleted. */
int64_t pr__status_booking_end(const pr_ctl *c, const kube_provreq *pr, char **plan);
/* The local store has plan "uid/ns" ended or rolling back (shards.c). */
bool pr__plan_ended_here(const pr_ctl *c, const char *plan);
/* Pods of podSet `set` placed on `node`: one item of pr__store_bookings. */
typedef struct pr_booked {
	size_t set;
	const char *node;
	int64_t pods;
} pr_booked;
/* Store the request's booking (the items, per podSet and node) until
 * `expires` in the local store, one row per node; `snap`/`res`/`nsets`
 * (may be NULL/0) give the DRA devices placed. */
int pr__store_bookings(pr_ctl *c, const kube_provreq *pr, const sched_podset *sets, const pr_booked *items,
		       size_t nitems, int64_t expires, const sched_snapshot *snap, const sched_place_result *res,
		       size_t nsets, prd_err *err);

/* src/provreq/dirty.c: which requests a pass decides. */
void pr__dirty_init(pr_ctl *c);
void pr__dirty_free(pr_ctl *c);
/* What changed since the last pass (the caches' read locks held). */
void pr__dirty_collect(pr_ctl *c);
/* Does this pass decide the request? */
bool pr__dirty_decide(pr_ctl *c, const kube_provreq *pr);
/* What its decision left: the earliest wake it asked for, whether it is
 * open with cloud work possibly in flight, whether it is not terminal. */
void pr__dirty_decided(pr_ctl *c, const kube_provreq *pr, int64_t wake, bool open_in_flight, bool live);
/* A time a request asked to be decided at after its decision was recorded
 * (a deferred status write that failed): it is decided from then on. */
void pr__dirty_wake(pr_ctl *c, const kube_provreq *pr, int64_t t);
/* End of a pass: `complete` when it ran to its end unfenced. */
void pr__dirty_done(pr_ctl *c, bool complete);
/* Forget the decisions of requests whose "ns/name" is not in `live`. */
void pr__dirty_prune(pr_ctl *c, const hmap *live);

/* src/provreq/shards.c: the bookings and open plans of the API. */
void pr__shards_init(pr_ctl *c);
void pr__shards_free(pr_ctl *c);
/* Does this instance decide the request (a class served here, and its
 * processorInstance is this instance's)? */
bool pr__shards_ours(const pr_ctl *c, const kube_provreq *pr);
/* The one call a pass makes (digest, the request cache's lock held, the
 * templates copied, the node groups loaded): bring the view up to date
 * when the request cache moved; mark the node groups of other instances'
 * open plans busy and keep the nodes their bookings hold. Out of memory,
 * the pass is fenced. */
void pr__shards_sync(pr_ctl *c, pr_world *w);
/* From book_snapshot: is the request another instance's (its local
 * booking rows are not used)? */
bool pr__shards_foreign(const pr_ctl *c, const char *uid);
/* ... and then the bookings the statuses record into w->snap: other
 * instances', and own ones of a uid no row of `rows` has (the local
 * store's active bookings, ordered by request uid). */
void pr__shards_book(pr_ctl *c, pr_world *w, const state_booking *rows, size_t nrows);
/* Before the class decides `pr` (and places its pods): place the pods of
 * other instances' waiting requests that are due now and older than `pr`,
 * as they will be, so that of two requests racing for one room on two
 * instances the older gets it whichever instance runs first. */
void pr__shards_before(pr_ctl *c, pr_world *w, const kube_provreq *pr);

/* src/provreq/pclass_use.c: ProvisioningClass objects (classes/pclass.h).
 * pr__pclass_read (world.c, before the caches are locked) reads them;
 * pr__pclass_resolve (world.c, once the requests are in decision order)
 * puts every request that names one in the world as a request of the
 * class it names with the merged parameters; pr__pclass_world_free puts
 * the originals back (before the world is freed). */
int pr__pclass_read(pr_ctl *c, prd_err *err);
int pr__pclass_resolve(pr_ctl *c, pr_world *w, prd_err *err);
void pr__pclass_world_free(pr_world *w);
void pr__pclass_free(pr_ctl *c);
/* What became of a request that names a ProvisioningClass this pass:
 * refused (reason and message: the decide stage fails it), to be decided
 * later (its namespace could not be read), or served (the class's name
 * and the effective parameters as JSON, for its status details). NULL for
 * a request that names none. */
typedef struct pr_pclass_use {
	const char *pclass;
	const char *reason, *msg;
	bool later;
	const char *params_json;
} pr_pclass_use;
const pr_pclass_use *pr__pclass_use(const pr_world *w, const kube_provreq *pr);
/* The class a request is served as (for what reads requests outside the
 * world, such as shards.c): the ProvisioningClass's target when it names
 * a usable one, check-capacity (which refuses it) when it names one that
 * is not, else its own class name. */
const char *pr__effective_class(const pr_ctl *c, const kube_provreq *pr);

/* src/provreq/quota_use.c: quota before capacity (classes/quota.h). The
 * gate (decide.c, before a class decides a request that is not in flight)
 * answers Provisioned=False/QuotaExceeded and returns true when the
 * namespace's ResourceQuotas would not admit the request's pods (or
 * returns true having asked for a later pass when they cannot be read
 * now); pr__quota_note records what a positive answer holds for the rest
 * of the pass. */
bool pr__quota_gate(pr_class_ctx *x, const pr_class_host *h, const pr_class_req *req);
void pr__quota_note(pr_class_ctx *x, const pr_class_req *req);
void pr__quota_world_free(pr_world *w);

/* src/provreq/topology_use.c: one topology domain per gang. The gate
 * (decide.c, after the quota gate, before a class decides a request that
 * is not in flight) picks the domain for the podSets Kueue's topology
 * annotations mark and narrows them to it (*domain "LABEL=VALUE", or NULL
 * when unconstrained); it returns 1 when it answered the request itself.
 * pin narrows the podSets of a request in flight to the domain its status
 * records; after records the domain with a positive answer (or removes a
 * stale one). */
int pr__topology_gate(pr_class_ctx *x, const pr_class_host *h, pr_class_req *req, const char **domain);
int pr__topology_pin(pr_class_ctx *x, pr_class_req *req);
void pr__topology_after(pr_class_ctx *x, const char *domain);

/* src/provreq/ledger.c: the booking ledger. `where` "NAMESPACE/NAME" or
 * NULL (off). */
void pr__ledger_init(pr_ctl *c, const char *where, size_t obj_max);
void pr__ledger_free(pr_ctl *c);
/* Read it (a pass that places, once). */
int pr__ledger_read(pr_ctl *c, prd_err *err);
/* Its live entries as booking rows (free with state_booking_list_free),
 * except requests `own` (local rows, ordered by uid) has; remembers
 * their uids for pr__ledger_has. */
int pr__ledger_rows(pr_ctl *c, const state_booking *own, size_t nown, const hmap *live, state_booking **out,
		    size_t *n);
/* The request `uid` was deleted: its entry goes with the next write. */
void pr__ledger_gone(pr_ctl *c, const char *uid);
/* End of a pass: write the ledger when only removals are pending. */
void pr__ledger_tidy(pr_ctl *c);
bool pr__ledger_has(const pr_ctl *c, const char *uid);
/* A new term's first write: the ledger read and written back with this
 * term noted, so that a conditional write a former leader decided on an
 * earlier version (stalled in or before the call) is refused from now on.
 * 0 (also with the ledger off), or the error (the term acts on nothing
 * until it succeeds). */
int pr__ledger_fence(pr_ctl *c, prd_err *err);
/* The live entry of the request in the ledger last read, as booking rows
 * (free with state_booking_list_free); 0 rows when it has none. */
int pr__ledger_entry_rows(pr_ctl *c, const char *uid, state_booking **out, size_t *n);
/* The ledger last read holds an entry (live or not) for the request. */
bool pr__ledger_lists(const pr_ctl *c, const char *uid);
/* Record the changes (adds from the local store's rows) with the version
 * read as a precondition. PRD_ECONFLICT: another instance wrote it since;
 * the statuses that book must not be written. */
int pr__ledger_commit(pr_ctl *c, pr_ledger_change *ch, size_t n, prd_err *err);
/* The bytes the entry of request `uid` ("ns/name" key) would take in the
 * ledger, from the local store's rows; 0 when the ledger is off or the
 * store holds no live rows of it. A booking whose entry is over
 * c->ledger.obj_max cannot be recorded (pr__ledger_commit refuses it). */
size_t pr__ledger_entry_bytes(pr_ctl *c, const char *uid, const char *key);
/* Does a status patch (or the details alone) change a booking? */
bool pr__ledger_change_of(json_object *patch_or_details, bool is_details, bool *add);

#endif

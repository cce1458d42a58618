/* Internals of the atomic scale-up class, shared by atomic.c (the module:
 * starting and progressing plans), the atomic_plan_*.c files (what the
 * cloud shows of a plan, the plan in the API, rollback steps; their own
 * internals are in atomic_plan_int.h) and atomic_choose.c (which node
 * groups, by how much). */
#ifndef PRD_CLASSES_ATOMIC_INT_H
#define PRD_CLASSES_ATOMIC_INT_H

#include "classes/class.h"
#include "util/hmap.h"

#define AT_NS_PER_S PRD_NS_PER_SEC
#define AT_POLL_NS (2 * AT_NS_PER_S)
#define AT_RETRY_NS (5 * AT_NS_PER_S)

/* A plan: one intent row per node group, all of one request, opened
 * together and closed together. */
typedef struct at_plan {
	state_intent *v;
	size_t n;
} at_plan;

/* The store's open intents, read again only when the store's intent
 * version moved (state_intent_version, looked at once a pass) or the
 * module wrote one: kept across passes while nothing writes an intent. Every intent write of the module goes through the
 * at_intent_* wrappers below, which make the next call read the store
 * again. The list is borrowed until the end of the pass (it stays valid
 * after a write; it is then merely out of date). 0, or an error when the
 * store cannot be read. */
int at_open_intents(const pr_class_host *h, const state_intent **out, size_t *n);
/* A plan's progress detail (nodesProgress) changes at most this often
 * while it waits for nodes: a 1,000-node scale-up would otherwise write
 * the request's status once per registration. */
#define AT_PROGRESS_EVERY_NS AT_POLL_NS
/* May the progress detail of the plan (by its first intent's id) change
 * now? at_progress_noted records that it did. */
bool at_progress_due(const pr_class_host *h, const char *plan_id);
void at_progress_noted(const pr_class_host *h, const char *plan_id);
/* Drop what is kept across passes for plans no longer in `open`. */
void at_kept_forget(const pr_class_host *h, const state_intent *open, size_t n);
/* Release what the module keeps across passes (pr_class_module.kept_free). */
void at_kept_free(void *kept);
int at_intent_begin(const pr_class_host *h, const state_intent *in, prd_err *err);
int at_intent_advance(const pr_class_host *h, const char *plan_id, state_phase to, const char *error, prd_err *err);
int at_intent_close(const pr_class_host *h, const char *plan_id, state_phase final_phase, const char *error,
		    prd_err *err);
int at_intent_set_known(const pr_class_host *h, const char *plan_id, const char *names, prd_err *err);
int at_intent_add_nodes(const pr_class_host *h, const char *plan_id, const char *const *node_names, size_t n,
			prd_err *err);

/* The open plan of a request (every open intent of its uid, copied
 * without node lists: only the pass hook reads those, from
 * at_open_intents). False when there is none. Caller frees with
 * at_plan_free. */
bool at_plan_open(const pr_class_host *h, const char *uid, at_plan *out);
/* Does the request have an open plan? */
bool at_plan_exists(const pr_class_host *h, const char *uid);
/* Is some intent of the plan `any_id` belongs to open (*open)? False when
 * the store cannot be read. */
bool at_plan_id_open(const pr_class_host *h, const char *any_id, bool *open);
void at_plan_free(at_plan *p);
/* Every intent of the plan `any_id` belongs to, open or closed. */
bool at_plan_all(const pr_class_host *h, const char *any_id, at_plan *out);
#define AT_MAX_GROUPS 16
/* The plan id the intents share: the intent id up to its last '/'. */
void at_plan_base(const char *intent_id, char *out, size_t len);

pr_class_group *at_find_group(const pr_class_host *h, const char *id);

/* How a plan tells its instances from the rest of its group (docs/
 * operator.md, "Other actors on provreqd's node groups"), by what the
 * group's driver can report; recorded with the plan (its known text). */
typedef enum at_own {
	AT_OWN_DIFF = 0, /* whatever was not in the group when it began (drivers before ABI 1.3) */
	AT_OWN_TIME,     /* ... and created after it began (PRD_CLOUD_CAP_CREATION_TIME) */
	AT_OWN_MARK      /* carries the plan's owner token (PRD_CLOUD_CAP_OWNER_MARK) */
} at_own;
/* The rule a new plan on group g uses, and the rule plan `in` uses. */
at_own at_own_of_group(const pr_class_group *g);
at_own at_own_of(const state_intent *in);
#define AT_OWNER_MAX PR_OWNER_MAX
#define AT_CLOCK_SKEW_NS PR_CLOCK_SKEW_NS

/* What the cloud shows of one intent of a plan. */
typedef struct at_view {
	size_t n;              /* the intent's instances listed now */
	size_t live;           /* ... not being deleted */
	size_t named, ready;   /* ... with a registered Node / a Ready one */
	size_t failed, failed_oor;
	size_t extra;          /* new instances beyond delta: not the plan's */
	size_t foreign;        /* appeared since the plan began, not the plan's (another actor's) */
	size_t surplus;        /* (AT_OWN_MARK) the plan's own beyond its delta: to delete */
	const pr_class_inst **sur; /* ... those (arena) */
	size_t live_all;       /* every instance of the group listed and not being deleted */
	const char *fail_msg;  /* the first failure (borrowed from the group) */
	const pr_class_inst **v; /* the intent's instances (arena) */
} at_view;

/* The group's instances before a call, as the plan's "known" text. */
char *at_known_encode(const pr_class_group *g);
/* Which of the group's instances are the intent's (the group must be
 * listed). */
int at_view_of(const pr_class_host *h, pr_class_group *g, const state_intent *in, at_view *pv);

/* Ask the cloud for `delta` more instances of g for intent `in`: through
 * the driver's increase() (ABI 1.3) with the plan's owner token and, when
 * expected >= 0, only if the group's target is `expected` when the cloud
 * applies it (PRD_CLOUD_ECONFLICT otherwise, nothing done); else through
 * increase_size or atomic_increase_size. The group's listing and target
 * are stale afterwards. 0 or a PRD_CLOUD_E* code with *de filled. */
int at_increase(pr_class_group *g, const state_intent *in, int32_t delta, int32_t expected, prd_cloud_error *de);
/* When the plan's ready nodes were first found taken by other requests'
 * bookings or pods (remembered from this call on, in memory; now when not
 * yet noted). */
int64_t at_taken_since(const pr_class_host *h, const char *plan_id);
/* How long a plan whose nodes are ready waits for its pods to fit before
 * it concludes that other pods took the capacity: another replica's or
 * shard's view may hold room for a while that a status write not yet
 * landed gives back. */
#define AT_TAKEN_GRACE_NS (60 * AT_NS_PER_S)

/* decrease_target_size, conditional on `expected` (>= 0) and fenced where the
 * driver can (ABI 1.4 decrease, else 1.3 decrease_target_size_if). */
int at_decrease(pr_class_group *g, int32_t delta, int32_t expected, prd_cloud_error *de);

/* At most every `every` ns: in each group whose driver marks instances,
 * delete those carrying the token of a plan this store closed as rolled
 * back at least `grace` ns ago (its call landed after it ended). */
void at_sweep_late(const pr_class_host *h, int64_t every, int64_t grace);

/* The plan in the request's provisioningClassDetails. */
void at_put_details(const pr_class_host *h, const at_plan *p, state_phase phase);
/* The plan is over: only its outcome stays. */
void at_clear_details(const pr_class_host *h, const char *phase);
/* The request's status shows this open plan ended by another writer:
 * closed locally as it says (true), nothing asked of the cloud. */
bool at_ended_in_api(const pr_class_host *h, const kube_provreq *pr, const at_plan *p);

/* The first pass of a term: close the open intents whose request's status
 * names another plan, or shows theirs ended, or whose request is gone
 * (another replica finished, replaced or ended it while this one's store
 * was away). Nothing is asked of the cloud. */
void at_drop_contradicted(const pr_class_host *h, const pr_class_pass *p);
/* Adopt a plan the request's status names and the store does not know. */
void at_adopt(const pr_class_host *h, const kube_provreq *pr);
int64_t at_plan_began(const state_intent *in);

/* One rollback step of one intent. True once the cloud confirms: none of
 * its instances listed and the target no higher than before (the intent
 * is then closed). */
/* True at most once a minute per plan id (log rate limit). */
bool at_say_again(const char *plan_id, int64_t now);
bool at_roll_back_step(const pr_class_host *h, const pr_class_req *req, pr_class_group *g, const state_intent *in);
/* Close an intent whose cloud call never took effect: nothing to undo. */
void at_close_without_effect(const pr_class_host *h, pr_class_group *g, const state_intent *in, const char *why);

/* One group of a choice and how many nodes it adds. */
typedef struct at_part {
	pr_class_group *g;
	int64_t delta;
} at_part;

typedef struct at_choice {
	at_part *parts;        /* arena */
	size_t n;
	int64_t remaining;     /* pods that do not fit existing nodes */
	char *podset_groups;   /* "podSet:group,..." (arena) */
} at_choice;

/* Choose the groups for the pods that do not fit existing nodes: one group
 * when one can take them all, else a split across groups. Returns 1 with
 * *out filled, 0 when no choice exists (the request is answered here), or
 * 2 when everything already fits (booked and answered here). */
int at_choose(const pr_class_host *h, const pr_class_req *req, at_choice *out);

/* The cause a plan's other groups close with when one group fails. */
#define FOLLOWER "another group of the plan failed"
/* Causes that begin so are provreqd's own interruption, not a failure. */
#define INTERRUPTED "provreqd was interrupted"

/* Shared by atomic.c and atomic_progress.c (said at their definitions). */
void at__groups_words(const at_plan *p, char *out, size_t len);
bool at__roll_back_all(const pr_class_host *h, const pr_class_req *req, at_plan *p);
void at__start_roll_back(const pr_class_host *h, const pr_class_req *req, at_plan *p, const bool *failing,
			 const char *cause);
void at__succeed(const pr_class_host *h, const pr_class_req *req, at_plan *p);
bool at__progress(const pr_class_host *h, const pr_class_req *req, at_plan *p);

#endif

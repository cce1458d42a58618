/* SQLite state store (docs/design.md §7): everything provreqd must remember across
 * restarts — per-request retry state, node-group backoff, scale-up intents
 * and capacity bookings.
 *
 * Threads: a state_db is one SQLite connection opened without SQLite's own
 * mutexes. It belongs to the controller's worker thread; every function
 * here must be called from that thread only (or, more precisely, never from
 * two threads at once). Reflector threads never touch it.
 *
 * Transactions: every function that writes does all of its work inside one
 * transaction, so a crash at any point leaves either the old or the new
 * rows, never a mixture. Read functions see one consistent snapshot.
 *
 * Time: every "now" comes from the clk passed to state_open, in nanoseconds
 * since the Unix epoch, and every stored time is in the same unit.
 *
 * Errors: functions return 0 or a negative PRD_E* code and, when `err` is
 * not NULL, a message that names the database file and carries SQLite's own
 * error text. Codes used: PRD_EINVAL (bad argument, illegal phase
 * transition), PRD_ENOTFOUND (no such row), PRD_EEXIST (row already
 * exists), PRD_EIO (file or disk failure), PRD_EPERM (permissions),
 * PRD_ECORRUPT (damaged database), PRD_EUNSUPPORTED (schema from a newer
 * provreqd), PRD_EAGAIN (database locked by another process past the busy
 * timeout), PRD_ENOMEM.
 *
 * Ownership: structs filled by a get/list function own their strings.
 * Release one filled struct with its *_clear function and an array returned
 * by a list function with its *_list_free function. Input structs and
 * strings are borrowed for the duration of the call only. */
#ifndef PRD_STATE_STATE_H
#define PRD_STATE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/clock.h"
#include "util/err.h"

/* The schema version this build writes; databases with a higher
 * PRAGMA user_version are refused. */
#define STATE_SCHEMA_VERSION 5

typedef struct state_db state_db;

/* Tunables. Durations are nanoseconds. Fill with state_config_default and
 * override what you need. */
typedef struct state_config {
	int64_t request_backoff_initial_ns; /* first retry delay; default 1 min */
	int64_t request_backoff_max_ns;     /* cap; default 10 min */
	int64_t group_backoff_initial_ns;   /* first node-group backoff; 5 min */
	int64_t group_backoff_max_ns;       /* cap; default 30 min */
	int64_t group_backoff_reset_ns;     /* a failure older than this starts
	                                       the next backoff from the initial
	                                       value again; default 3 h */
	int busy_timeout_ms;                /* wait for another process's lock;
	                                       default 5000 */
} state_config;

void state_config_default(state_config *cfg);

/* ---- opening ---------------------------------------------------------- */

/* Open (creating if needed) the database at `path`, or a private in-memory
 * database when path is ":memory:". `clock` is borrowed and must outlive
 * the handle; `cfg` is copied (NULL = defaults).
 *
 * A file database is created with mode 0600. An existing file whose mode
 * grants any access to group or others is tightened to 0600 (the store
 * holds no secrets, but it is nobody else's business and a world-writable
 * file would let anyone corrupt the controller's memory) — only after it
 * has been checked and migrated, so a wrong path naming some other file
 * never has its mode changed; if it cannot be tightened the open fails
 * with PRD_EPERM. The path must be a regular file.
 *
 * On open the connection gets WAL journaling, the busy timeout, foreign
 * keys, and a `PRAGMA quick_check`; then pending schema migrations run, all
 * in one transaction. A file that is not a database or fails the check
 * gives PRD_ECORRUPT; a schema version newer than STATE_SCHEMA_VERSION gives
 * PRD_EUNSUPPORTED; a path that cannot be created or opened gives PRD_EIO or
 * PRD_EPERM. Each message names the file.
 *
 * On success *out owns the connection: close it with state_close. On
 * failure *out is NULL. */
int state_open(const char *path, const clk *clock, const state_config *cfg,
	       state_db **out, prd_err *err);

/* Finalize cached statements and close the connection. NULL is a no-op. */
void state_close(state_db *db);

/* The schema version of the open database (STATE_SCHEMA_VERSION after a
 * successful open). */
int state_schema_version(state_db *db, int *version, prd_err *err);

/* The tables, and how many rows each holds now (for the row-count gauge). */
#define STATE_NTABLES 5
extern const char *const state_tables[STATE_NTABLES];
int state_row_counts(state_db *db, int64_t counts[STATE_NTABLES], prd_err *err);

/* The delay before retry number `attempt` (1 = first retry):
 * initial * 2^(attempt-1), capped at max; 0 for attempt <= 0. Exposed so
 * callers and tests share one definition of the arithmetic. */
int64_t state_backoff_delay(int64_t initial_ns, int64_t max_ns, int64_t attempt);

/* ---- request state ---------------------------------------------------- */

/* Retry bookkeeping for one ProvisioningRequest, keyed by its UID; the
 * namespace and name are stored for people reading the database. */
typedef struct state_request {
	char *uid;
	char *ns;
	char *name;
	int64_t first_seen_ns;
	bool has_valid_until;        /* false: no ValidUntilSeconds deadline */
	int64_t valid_until_ns;      /* meaningful only if has_valid_until */
	int64_t attempts;            /* failed attempts so far */
	int64_t next_attempt_ns;     /* 0 = may run now */
	char *last_outcome;          /* free text; "" when none */
} state_request;

/* Fetch the row for `uid` into *out (caller releases with
 * state_request_clear). PRD_ENOTFOUND if there is none. */
int state_request_get(state_db *db, const char *uid, state_request *out, prd_err *err);

/* Make sure a row for `uid` exists: insert one with first_seen = now,
 * attempts 0 and no deadline if absent; an existing row is left as it is.
 * When `out` is not NULL it receives the row as stored (caller releases
 * with state_request_clear). */
int state_request_ensure(state_db *db, const char *uid, const char *ns,
			 const char *name, state_request *out, prd_err *err);

/* Insert or replace the row for r->uid with exactly the fields of `r`
 * (uid, ns and name must be non-NULL; last_outcome NULL stores ""). */
int state_request_put(state_db *db, const state_request *r, prd_err *err);

/* Record one more failed attempt for `uid`: attempts += 1, next attempt =
 * now + state_backoff_delay(request backoff, attempts), last outcome =
 * `outcome` (NULL keeps the old text). *next_attempt_ns (optional) gets the
 * new next-attempt time. PRD_ENOTFOUND if there is no row. */
int state_request_bump(state_db *db, const char *uid, const char *outcome,
		       int64_t *next_attempt_ns, prd_err *err);

/* Delete the row for `uid`. PRD_ENOTFOUND if there was none (callers that
 * garbage-collect may ignore that code). */
int state_request_delete(state_db *db, const char *uid, prd_err *err);

/* Every request row, ordered by first seen then uid. *out is NULL when
 * *n is 0; caller releases with state_request_list_free. */
int state_request_list(state_db *db, state_request **out, size_t *n, prd_err *err);

void state_request_clear(state_request *r);
void state_request_list_free(state_request *v, size_t n);

/* ---- node-group backoff ----------------------------------------------- */

typedef struct state_group_backoff {
	char *group_id;
	int64_t failures;         /* consecutive failures in this streak */
	int64_t duration_ns;      /* length of the current backoff */
	int64_t last_failure_ns;
	int64_t until_ns;         /* backed off while now < until_ns */
	char *last_error;         /* reason given with the last failure; "" if none */
} state_group_backoff;

/* Record a failure of node group `group_id` at now. If the group has no
 * row, or its last failure is at least group_backoff_reset_ns old, the
 * backoff restarts at group_backoff_initial_ns; otherwise it doubles the
 * previous duration, capped at group_backoff_max_ns. `reason` (may be
 * NULL) is kept for metrics and events. *until_ns (optional) gets the end
 * of the new backoff. */
int state_group_fail(state_db *db, const char *group_id, const char *reason,
		     int64_t *until_ns, prd_err *err);

/* Record a success: the group's backoff and failure streak are forgotten
 * (like cluster-autoscaler's RemoveBackoff). Not an error if there was no
 * backoff. */
int state_group_success(state_db *db, const char *group_id, prd_err *err);

/* Restore a backoff another replica recorded (in the API): the group is
 * backed off until `until_ns` after `failures` failures, unless the local
 * row already says so for longer. A time in the past is a no-op. */
int state_group_restore(state_db *db, const char *group_id, int64_t failures, int64_t until_ns,
			const char *reason, prd_err *err);

/* Is the group backed off now? *backed_off is set; *until_ns (optional)
 * gets the end of the backoff, or 0 when the group is not backed off. */
int state_group_backed_off(state_db *db, const char *group_id, bool *backed_off,
			   int64_t *until_ns, prd_err *err);

/* Fetch the group's row (caller releases with state_group_clear).
 * PRD_ENOTFOUND if the group never failed or succeeded since. */
int state_group_get(state_db *db, const char *group_id, state_group_backoff *out,
		    prd_err *err);

/* Every group row (expired backoffs included, for metrics), ordered by
 * group id. Caller releases with state_group_list_free. */
int state_group_list(state_db *db, state_group_backoff **out, size_t *n, prd_err *err);

void state_group_clear(state_group_backoff *g);
void state_group_list_free(state_group_backoff *v, size_t n);

/* ---- scale-up intents ------------------------------------------------- */

/* The life of one scale-up plan. Allowed transitions:
 *
 *   planned ──> increasing ──> waiting-for-nodes ──> done
 *      │             │                 │
 *      │             └────────┬────────┘
 *      ├──────────────> rolling-back ──> rolled-back
 *      └──────────────────────────────-> rolled-back
 *
 * planned → rolled-back is the crash-recovery path for a plan whose cloud
 * call never started (nothing to undo). done and rolled-back are terminal:
 * an intent in either is "closed". Re-entering the current phase is
 * accepted as a no-op so that a reconcile repeated after a crash is
 * harmless. */
typedef enum state_phase {
	STATE_PHASE_PLANNED = 0,
	STATE_PHASE_INCREASING,
	STATE_PHASE_WAITING_FOR_NODES,
	STATE_PHASE_DONE,
	STATE_PHASE_ROLLING_BACK,
	STATE_PHASE_ROLLED_BACK
} state_phase;

/* Stable text of a phase as stored in the database ("planned",
 * "waiting-for-nodes", ...); "unknown" for an out-of-range value. */
const char *state_phase_name(state_phase p);
/* Parse the stored text; PRD_EINVAL for anything else. */
int state_phase_parse(const char *s, state_phase *out);
bool state_phase_is_terminal(state_phase p);
/* Is `from` → `to` allowed (see the diagram; from == to is allowed)? */
bool state_phase_can_advance(state_phase from, state_phase to);

typedef struct state_intent {
	char *plan_id;
	char *request_uid;
	char *node_group;
	int64_t delta;             /* nodes to add, > 0 */
	int64_t target_before;     /* the group's target size before the plan */
	state_phase phase;
	int64_t deadline_ns;       /* nodes must be Ready by then */
	int64_t created_ns;
	int64_t updated_ns;
	char *last_error;          /* why it is rolling back; "" if none */
	char **nodes;              /* nodes created so far, in the order added */
	char *known_before;        /* the group's instances before the cloud call,
	                              newline-separated; "" until recorded */
	size_t n_nodes;
	char *term;                /* the leader term that began it ("identity#transitions"),
	                              "" when not leader-elected; written by begin */
} state_intent;

/* Write a new intent in phase `planned` before acting on it. Reads
 * plan_id, request_uid, node_group, delta, target_before, deadline_ns and term (may be NULL)
 * from `in` (everything else is ignored; created/updated = now).
 * PRD_EEXIST if the plan id is taken; PRD_EINVAL for delta <= 0 or a
 * negative target_before. */
int state_intent_begin(state_db *db, const state_intent *in, prd_err *err);

/* Move intent `plan_id` to phase `to`, stamping updated = now. `error`
 * (may be NULL = keep) replaces last_error. PRD_EINVAL for a transition the
 * diagram forbids (the row is unchanged), PRD_ENOTFOUND for an unknown
 * plan. */
int state_intent_advance(state_db *db, const char *plan_id, state_phase to,
			 const char *error, prd_err *err);

/* Close the intent: advance it to a terminal phase (done or rolled-back;
 * anything else is PRD_EINVAL). Closed intents stay readable with
 * state_intent_get until state_intent_prune removes them. */
int state_intent_close(state_db *db, const char *plan_id, state_phase final_phase,
		       const char *error, prd_err *err);

/* Close the intent as `final_phase` (done or rolled-back) from whatever
 * phase it is in: only for what another replica's record proves (the API
 * shows the plan ended so), never for this store's own steps, which go
 * through state_intent_advance. PRD_ENOTFOUND if unknown. */
int state_intent_settle(state_db *db, const char *plan_id, state_phase final_phase, const char *error, prd_err *err);

/* Delete the closed rows of plan `plan` (a plan id "uid/ns", all its
 * intents "uid/ns#i"; open rows are kept): only when the API proves this
 * store's end of the plan wrong (another leader carried it on after this
 * store closed it), so the plan can be adopted from the API again. */
int state_intent_forget(state_db *db, const char *plan, size_t *deleted, prd_err *err);

/* Record the group's instance names as they were before the cloud call
 * (newline-separated text, stored as given), so that after a crash the
 * nodes the call created are the group's instances minus these. Only on an
 * open intent. */
int state_intent_set_known(state_db *db, const char *plan_id, const char *names, prd_err *err);

/* Record that node `node_name` was created for the plan, so a rollback
 * knows exactly what to delete. Adding the same name twice is a no-op.
 * PRD_EINVAL if the intent is closed, PRD_ENOTFOUND if unknown. */
int state_intent_add_node(state_db *db, const char *plan_id, const char *node_name,
			  prd_err *err);
/* The same for n nodes in one transaction (all or none recorded). */
int state_intent_add_nodes(state_db *db, const char *plan_id, const char *const *node_names, size_t n,
			   prd_err *err);

/* Fetch one intent with its nodes (caller releases with
 * state_intent_clear). PRD_ENOTFOUND if unknown. */
int state_intent_get(state_db *db, const char *plan_id, state_intent *out, prd_err *err);

/* Every intent not yet closed, oldest first (then by plan id): what
 * crash recovery must resume or roll back on startup. Caller releases with
 * state_intent_list_free. */
int state_intent_list_open(state_db *db, state_intent **out, size_t *n, prd_err *err);

/* A number that moves whenever the intents may have changed: on every
 * intent write through this handle (tried, whether or not it took effect)
 * and on every commit to the file by another connection. While it stays
 * the same, a list of open intents read earlier is still what the store
 * holds, so a caller may keep it instead of reading it again. When it
 * cannot tell, it moves. */
uint64_t state_intent_version(state_db *db);

/* Delete closed intents last updated before `before_ns` (their node lists
 * go with them). *deleted (optional) gets the number removed. */
int state_intent_prune(state_db *db, int64_t before_ns, size_t *deleted, prd_err *err);

void state_intent_clear(state_intent *it);
void state_intent_list_free(state_intent *v, size_t n);

/* ---- bookings --------------------------------------------------------- */

/* Capacity a Provisioned request holds on one node until it is consumed or
 * expires. resources_json is a JSON object of resource name → canonical
 * quantity string; the store keeps it verbatim and never parses it. */
typedef struct state_booking {
	char *request_uid;
	char *node_name;
	char *resources_json;
	int64_t created_ns;
	int64_t expires_ns;
} state_booking;

/* Book `resources_json` on `node_name` for `request_uid` until
 * `expires_ns` (created = now). An existing booking of the same request on
 * the same node is replaced, so repeating a reconcile is harmless. */
int state_booking_add(state_db *db, const char *request_uid, const char *node_name,
		      const char *resources_json, int64_t expires_ns, prd_err *err);

/* Replace all bookings of `request_uid` with the `n` bookings in `items`
 * (their request_uid and created_ns are ignored), in one transaction: a
 * request books all of its nodes or none. */
int state_booking_set(state_db *db, const char *request_uid,
		      const state_booking *items, size_t n, int64_t expires_ns,
		      prd_err *err);

/* Bookings of one request (expired ones included), ordered by node name.
 * Caller releases with state_booking_list_free. */
int state_booking_list_request(state_db *db, const char *request_uid,
			       state_booking **out, size_t *n, prd_err *err);

/* Every booking with expires > now, ordered by request uid then node
 * name: the capacity other requests must not count. */
int state_booking_list_active(state_db *db, state_booking **out, size_t *n, prd_err *err);

/* Delete all bookings of a request; *deleted (optional) gets the count. */
int state_booking_delete_request(state_db *db, const char *request_uid,
				 size_t *deleted, prd_err *err);

/* Delete bookings with expires <= now; *deleted (optional) gets the count. */
int state_booking_delete_expired(state_db *db, size_t *deleted, prd_err *err);

void state_booking_clear(state_booking *b);
void state_booking_list_free(state_booking *v, size_t n);

/* ---- auto-provisioned node groups (classes/nap.c) ---------------------- */

/* One record: the group's id and the module's text about it. */
typedef struct state_nap {
	char *group_id;
	char *spec;
} state_nap;

void state_nap_clear(state_nap *r);
void state_nap_list_free(state_nap *v, size_t n);
/* Write (or replace) the record of a group. */
int state_nap_put(state_db *db, const char *group_id, const char *spec, prd_err *err);
/* The record of a group into *out (caller clears); PRD_ENOTFOUND when
 * there is none. */
int state_nap_get(state_db *db, const char *group_id, state_nap *out, prd_err *err);
/* Every record, by group id (caller frees with state_nap_list_free). */
int state_nap_list(state_db *db, state_nap **out, size_t *n, prd_err *err);
/* Forget a group's record (none is not an error). */
int state_nap_delete(state_db *db, const char *group_id, prd_err *err);

#endif

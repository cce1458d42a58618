/* Scale-up intents: a plan is written before the cloud is touched, moves
 * through its phases as the work happens, records each node it creates,
 * and is closed at the end. Whatever is still open after a crash is what
 * recovery must resume or roll back. */
#include "state/state_int.h"

#include <stdlib.h>
#include <string.h>

#define INT_COLS "plan_id, request_uid, node_group, delta, target_before, phase, " \
	"deadline_ns, created_ns, updated_ns, last_error, known_before, term"
#define TERMINAL_SQL "('done', 'rolled-back')"

static const char sql_insert[] =
	"INSERT INTO scaleup_intent (plan_id, request_uid, node_group, delta, target_before,"
	" phase, deadline_ns, created_ns, updated_ns, term) VALUES (?1, ?2, ?3, ?4, ?5, 'planned',"
	" ?6, ?7, ?7, COALESCE(?8, ''))";
static const char sql_get[] = "SELECT " INT_COLS " FROM scaleup_intent WHERE plan_id = ?1";
static const char sql_list_open[] =
	"SELECT " INT_COLS " FROM scaleup_intent WHERE phase NOT IN " TERMINAL_SQL
	" ORDER BY created_ns, plan_id";
static const char sql_phase[] = "SELECT phase FROM scaleup_intent WHERE plan_id = ?1";
static const char sql_set_phase[] =
	"UPDATE scaleup_intent SET phase = ?2, updated_ns = ?3,"
	" last_error = COALESCE(?4, last_error) WHERE plan_id = ?1";
static const char sql_set_known[] =
	"UPDATE scaleup_intent SET known_before = ?2, updated_ns = ?3 WHERE plan_id = ?1"
	" AND phase NOT IN " TERMINAL_SQL;
static const char sql_data_version[] = "PRAGMA data_version";
static const char sql_touch[] = "UPDATE scaleup_intent SET updated_ns = ?2 WHERE plan_id = ?1";
static const char sql_nodes[] =
	"SELECT node_name FROM scaleup_intent_node WHERE plan_id = ?1 ORDER BY seq";
static const char sql_add_node[] =
	"INSERT INTO scaleup_intent_node (plan_id, node_name, seq, added_ns)"
	" SELECT ?1, ?2, COALESCE(MAX(seq), 0) + 1, ?3 FROM scaleup_intent_node WHERE plan_id = ?1"
	" ON CONFLICT (plan_id, node_name) DO NOTHING";
/* The closed rows of one plan (its id, or its id followed by "#i"). */
static const char sql_forget[] =
	"DELETE FROM scaleup_intent WHERE phase IN " TERMINAL_SQL
	" AND (plan_id = ?1 OR (substr(plan_id, 1, length(?1) + 1) = ?1 || '#'))";

static const char sql_prune[] =
	"DELETE FROM scaleup_intent WHERE phase IN " TERMINAL_SQL " AND updated_ns < ?1";

static const char *const phase_names[] = {
	[STATE_PHASE_PLANNED] = "planned",
	[STATE_PHASE_INCREASING] = "increasing",
	[STATE_PHASE_WAITING_FOR_NODES] = "waiting-for-nodes",
	[STATE_PHASE_DONE] = "done",
	[STATE_PHASE_ROLLING_BACK] = "rolling-back",
	[STATE_PHASE_ROLLED_BACK] = "rolled-back",
};
#define N_PHASES (sizeof(phase_names) / sizeof(phase_names[0]))

const char *state_phase_name(state_phase p)
{
	if((unsigned)p >= N_PHASES)
		return "unknown";
	return phase_names[p];
}

int state_phase_parse(const char *s, state_phase *out)
{
	size_t i;

	for(i = 0; s && i < N_PHASES; i++) {
		if(strcmp(s, phase_names[i]) == 0) {
			*out = (state_phase)i;
			return 0;
		}
	}
	return PRD_EINVAL;
}

bool state_phase_is_terminal(state_phase p)
{
	return p == STATE_PHASE_DONE || p == STATE_PHASE_ROLLED_BACK;
}

bool state_phase_can_advance(state_phase from, state_phase to)
{
	if((unsigned)from >= N_PHASES || (unsigned)to >= N_PHASES)
		return false;
	if(from == to)
		return true;
	switch(from) {
	case STATE_PHASE_PLANNED:
		return to == STATE_PHASE_INCREASING || to == STATE_PHASE_ROLLING_BACK ||
		       to == STATE_PHASE_ROLLED_BACK;
	case STATE_PHASE_INCREASING:
		return to == STATE_PHASE_WAITING_FOR_NODES || to == STATE_PHASE_ROLLING_BACK;
	case STATE_PHASE_WAITING_FOR_NODES:
		return to == STATE_PHASE_DONE || to == STATE_PHASE_ROLLING_BACK;
	case STATE_PHASE_ROLLING_BACK:
		return to == STATE_PHASE_ROLLED_BACK;
	case STATE_PHASE_DONE:
	case STATE_PHASE_ROLLED_BACK:
		return false;
	}
	return false;
}

void state_intent_clear(state_intent *it)
{
	size_t i;

	if(!it)
		return;
	free(it->plan_id);
	free(it->request_uid);
	free(it->node_group);
	free(it->last_error);
	free(it->known_before);
	free(it->term);
	for(i = 0; it->nodes && i < it->n_nodes; i++)
		free(it->nodes[i]);
	free(it->nodes);
	memset(it, 0, sizeof(*it));
}

void state_intent_list_free(state_intent *v, size_t n)
{
	size_t i;

	for(i = 0; v && i < n; i++)
		state_intent_clear(&v[i]);
	free(v);
}

/* Fill *it from a row of INT_COLS (nodes are loaded separately). A phase
 * text this build does not know means the row was damaged or written by
 * something else: PRD_ECORRUPT. */
static int read_row(state_db *db, sqlite3_stmt *st, state_intent *it, prd_err *err)
{
	const char *phase;
	int rc;

	memset(it, 0, sizeof(*it));
	rc = state__col_text(st, 0, &it->plan_id);
	if(!rc)
		rc = state__col_text(st, 1, &it->request_uid);
	if(!rc)
		rc = state__col_text(st, 2, &it->node_group);
	if(!rc)
		rc = state__col_text(st, 9, &it->last_error);
	if(!rc)
		rc = state__col_text(st, 10, &it->known_before);
	if(!rc)
		rc = state__col_text(st, 11, &it->term);
	if(rc) {
		prd_err_set(err, rc, "state: reading scale-up intent: out of memory");
		goto done;
	}
	phase = (const char *)sqlite3_column_text(st, 5);
	if(state_phase_parse(phase, &it->phase) != 0) {
		rc = prd_err_set(err, PRD_ECORRUPT, "state database %s: intent %s has unknown phase '%s'",
		                 db->path, it->plan_id, phase ? phase : "");
		goto done;
	}
	it->delta = sqlite3_column_int64(st, 3);
	it->target_before = sqlite3_column_int64(st, 4);
	it->deadline_ns = sqlite3_column_int64(st, 6);
	it->created_ns = sqlite3_column_int64(st, 7);
	it->updated_ns = sqlite3_column_int64(st, 8);
done:
	if(rc)
		state_intent_clear(it);
	return rc;
}

/* Load the node list of it->plan_id into it->nodes. */
static int load_nodes(state_db *db, state_intent *it, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	char **grown;
	int src = SQLITE_DONE, rc = 0;

	rc = state__prep(db, sql_nodes, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, it->plan_id, err);
	while(!rc && (src = sqlite3_step(st)) == SQLITE_ROW) {
		if(it->n_nodes == cap) {
			cap = cap ? cap * 2 : 4;
			grown = realloc(it->nodes, cap * sizeof(*grown));
			if(!grown) {
				rc = prd_err_set(err, PRD_ENOMEM, "state: reading intent nodes: out of memory");
				break;
			}
			it->nodes = grown;
		}
		rc = state__col_text(st, 0, &it->nodes[it->n_nodes]);
		if(rc)
			prd_err_set(err, rc, "state: reading intent nodes: out of memory");
		else
			it->n_nodes++;
	}
	if(!rc && src != SQLITE_DONE)
		rc = state__sqlerr(db, err, src, "reading intent nodes");
	state__release(st);
	return rc;
}

int state_intent_begin(state_db *db, const state_intent *in, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;
	state__intents_touched(db);

	if(!in)
		return prd_err_set(err, PRD_EINVAL, "state_intent_begin: intent is required");
	rc = state__need(in->plan_id, "plan id", err);
	if(!rc)
		rc = state__need(in->request_uid, "request uid", err);
	if(!rc)
		rc = state__need(in->node_group, "node group", err);
	if(!rc && (in->delta <= 0 || in->target_before < 0))
		rc = prd_err_set(err, PRD_EINVAL,
		                 "state: intent %s: delta must be positive and target size "
		                 "non-negative (got %lld, %lld)", in->plan_id,
		                 (long long)in->delta, (long long)in->target_before);
	if(!rc)
		rc = state__prep(db, sql_insert, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, in->plan_id, err);
	if(!rc)
		rc = state__bind_text(db, st, 2, in->request_uid, err);
	if(!rc)
		rc = state__bind_text(db, st, 3, in->node_group, err);
	if(!rc)
		rc = state__bind_i64(db, st, 4, in->delta, err);
	if(!rc)
		rc = state__bind_i64(db, st, 5, in->target_before, err);
	if(!rc)
		rc = state__bind_i64(db, st, 6, in->deadline_ns, err);
	if(!rc)
		rc = state__bind_i64(db, st, 7, state__now(db), err);
	if(!rc && in->term && in->term[0])
		rc = state__bind_text(db, st, 8, in->term, err);
	if(!rc) {
		rc = state__step_done(db, st, "writing scale-up intent", err);
		if(rc == PRD_EEXIST)
			prd_err_set(err, rc, "state: scale-up intent %s already exists", in->plan_id);
	}
	state__release(st);
	return rc;
}

/* The current phase of a plan, inside the caller's transaction. */
static int current_phase(state_db *db, const char *plan_id, state_phase *out, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	const char *text;
	int src, rc = 0;

	rc = state__prep(db, sql_phase, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, plan_id, err);
	if(rc)
		goto done;
	src = sqlite3_step(st);
	if(src == SQLITE_DONE) {
		rc = prd_err_set(err, PRD_ENOTFOUND, "state: no scale-up intent %s", plan_id);
		goto done;
	}
	if(src != SQLITE_ROW) {
		rc = state__sqlerr(db, err, src, "reading intent phase");
		goto done;
	}
	text = (const char *)sqlite3_column_text(st, 0);
	if(state_phase_parse(text, out) != 0)
		rc = prd_err_set(err, PRD_ECORRUPT, "state database %s: intent %s has unknown phase '%s'",
		                 db->path, plan_id, text ? text : "");
done:
	state__release(st);
	return rc;
}

int state_intent_advance(state_db *db, const char *plan_id, state_phase to,
			 const char *error, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	state_phase from = STATE_PHASE_PLANNED;
	int rc = state__need(plan_id, "plan id", err);
	state__intents_touched(db);
	if(!rc && (unsigned)to >= N_PHASES)
		rc = prd_err_set(err, PRD_EINVAL, "state: intent %s: invalid phase %d", plan_id, (int)to);
	if(!rc)
		rc = state__begin(db, err);
	if(rc)
		return rc;
	rc = current_phase(db, plan_id, &from, err);
	if(rc)
		goto done;
	if(!state_phase_can_advance(from, to)) {
		rc = prd_err_set(err, PRD_EINVAL, "state: intent %s: cannot go from %s to %s",
		                 plan_id, state_phase_name(from), state_phase_name(to));
		goto done;
	}
	if(from != to) {
		rc = state__prep(db, sql_set_phase, &st, err);
		if(!rc)
			rc = state__bind_text(db, st, 1, plan_id, err);
		if(!rc)
			rc = state__bind_text(db, st, 2, state_phase_name(to), err);
		if(!rc)
			rc = state__bind_i64(db, st, 3, state__now(db), err);
		if(!rc)
			rc = state__bind_text(db, st, 4, error, err);
		if(!rc)
			rc = state__step_done(db, st, "advancing scale-up intent", err);
		state__release(st);
		if(rc)
			goto done;
	}
	rc = state__commit(db, err);
done:
	if(rc)
		state__rollback(db);
	return rc;
}

int state_intent_close(state_db *db, const char *plan_id, state_phase final_phase,
		       const char *error, prd_err *err)
{
	if(!state_phase_is_terminal(final_phase))
		return prd_err_set(err, PRD_EINVAL,
		                   "state: intent %s: close needs done or rolled-back, not %s",
		                   plan_id ? plan_id : "?", state_phase_name(final_phase));
	return state_intent_advance(db, plan_id, final_phase, error, err);
}

int state_intent_settle(state_db *db, const char *plan_id, state_phase final_phase, const char *error, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__need(plan_id, "plan id", err);
	if(!rc && !state_phase_is_terminal(final_phase))
		rc = prd_err_set(err, PRD_EINVAL, "state: intent %s: settle needs done or rolled-back", plan_id);
	state__intents_touched(db);
	if(!rc)
		rc = state__prep(db, sql_set_phase, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, plan_id, err);
	if(!rc)
		rc = state__bind_text(db, st, 2, state_phase_name(final_phase), err);
	if(!rc)
		rc = state__bind_i64(db, st, 3, state__now(db), err);
	if(!rc && error)
		rc = state__bind_text(db, st, 4, error, err);
	if(!rc)
		rc = state__step_done(db, st, "settling a scale-up intent", err);
	state__release(st);
	if(!rc && sqlite3_changes(db->sql) == 0)
		rc = prd_err_set(err, PRD_ENOTFOUND, "state: intent %s is missing", plan_id);
	return rc;
}

int state_intent_set_known(state_db *db, const char *plan_id, const char *names, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__need(plan_id, "plan id", err);
	state__intents_touched(db);
	if(!rc)
		rc = state__prep(db, sql_set_known, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, plan_id, err);
	if(!rc)
		rc = state__bind_text(db, st, 2, names ? names : "", err);
	if(!rc)
		rc = state__bind_i64(db, st, 3, state__now(db), err);
	if(!rc)
		rc = state__step_done(db, st, "recording the group's instances", err);
	state__release(st);
	if(!rc && sqlite3_changes(db->sql) == 0)
		rc = prd_err_set(err, PRD_EINVAL, "state: intent %s is missing or closed", plan_id);
	return rc;
}

/* One node row; *added tells whether it was new. In the caller's
 * transaction. */
static int add_node_row(state_db *db, const char *plan_id, const char *node_name, int64_t now, bool *added,
			prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__need(node_name, "node name", err);
	if(!rc)
		rc = state__prep(db, sql_add_node, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, plan_id, err);
	if(!rc)
		rc = state__bind_text(db, st, 2, node_name, err);
	if(!rc)
		rc = state__bind_i64(db, st, 3, now, err);
	if(!rc)
		rc = state__step_done(db, st, "recording intent node", err);
	state__release(st);
	if(!rc && sqlite3_changes(db->sql) > 0)
		*added = true;
	return rc;
}

int state_intent_add_nodes(state_db *db, const char *plan_id, const char *const *node_names, size_t n,
			   prd_err *err)
{
	sqlite3_stmt *st = NULL;
	state_phase phase = STATE_PHASE_PLANNED;
	int64_t now = state__now(db);
	bool added = false;
	size_t i;
	int rc = state__need(plan_id, "plan id", err);
	state__intents_touched(db);
	if(!rc && n == 0)
		return 0;
	if(!rc)
		rc = state__begin(db, err);
	if(rc)
		return rc;
	rc = current_phase(db, plan_id, &phase, err);
	if(rc)
		goto done;
	if(state_phase_is_terminal(phase)) {
		rc = prd_err_set(err, PRD_EINVAL, "state: intent %s is closed (%s); cannot add node %s",
		                 plan_id, state_phase_name(phase), node_names[0] ? node_names[0] : "");
		goto done;
	}
	for(i = 0; !rc && i < n; i++)
		rc = add_node_row(db, plan_id, node_names[i], now, &added, err);
	if(!rc && added) {
		rc = state__prep(db, sql_touch, &st, err);
		if(!rc)
			rc = state__bind_text(db, st, 1, plan_id, err);
		if(!rc)
			rc = state__bind_i64(db, st, 2, now, err);
		if(!rc)
			rc = state__step_done(db, st, "updating scale-up intent", err);
		state__release(st);
	}
	if(!rc)
		rc = state__commit(db, err);
done:
	if(rc)
		state__rollback(db);
	return rc;
}

int state_intent_add_node(state_db *db, const char *plan_id, const char *node_name,
			  prd_err *err)
{
	int rc = state__need(node_name, "node name", err);
	return rc ? rc : state_intent_add_nodes(db, plan_id, &node_name, 1, err);
}

int state_intent_get(state_db *db, const char *plan_id, state_intent *out, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int src, rc = 0;

	if(!out)
		return prd_err_set(err, PRD_EINVAL, "state_intent_get: out is required");
	memset(out, 0, sizeof(*out));
	rc = state__need(plan_id, "plan id", err);
	if(!rc)
		rc = state__begin_read(db, err);
	if(rc)
		return rc;
	rc = state__prep(db, sql_get, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, plan_id, err);
	if(rc)
		goto done;
	src = sqlite3_step(st);
	if(src == SQLITE_DONE) {
		rc = prd_err_set(err, PRD_ENOTFOUND, "state: no scale-up intent %s", plan_id);
		goto done;
	}
	if(src != SQLITE_ROW) {
		rc = state__sqlerr(db, err, src, "reading scale-up intent");
		goto done;
	}
	rc = read_row(db, st, out, err);
	state__release(st);
	st = NULL;
	if(!rc)
		rc = load_nodes(db, out, err);
	if(!rc)
		rc = state__commit(db, err);
done:
	state__release(st);
	if(rc) {
		state__rollback(db);
		state_intent_clear(out);
	}
	return rc;
}

static int collect_row(state_db *db, sqlite3_stmt *st, void *row, prd_err *err)
{
	return read_row(db, st, row, err);
}

static void clear_row(void *row)
{
	state_intent_clear(row);
}

int state_intent_list_open(state_db *db, state_intent **out, size_t *n, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	size_t i;
	int rc;

	if(!out || !n)
		return prd_err_set(err, PRD_EINVAL, "state_intent_list_open: out and n are required");
	*out = NULL;
	*n = 0;
	rc = state__begin_read(db, err);
	if(rc)
		return rc;
	rc = state__prep(db, sql_list_open, &st, err);
	rc = state__collect(db, st, rc, sizeof(**out), collect_row, clear_row, "listing open scale-up intents",
			    (void **)out, n, err);
	/* Nodes are read after the intent cursor is released: one statement
	 * cache slot cannot serve two live cursors. */
	for(i = 0; !rc && i < *n; i++)
		rc = load_nodes(db, &(*out)[i], err);
	if(!rc)
		rc = state__commit(db, err);
	if(rc) {
		state__rollback(db);
		state_intent_list_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

int state_intent_prune(state_db *db, int64_t before_ns, size_t *deleted, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__prep(db, sql_prune, &st, err);
	state__intents_touched(db);
	if(!rc)
		rc = state__bind_i64(db, st, 1, before_ns, err);
	if(!rc)
		rc = state__step_done(db, st, "pruning closed scale-up intents", err);
	if(!rc && deleted)
		*deleted = (size_t)sqlite3_changes(db->sql);
	state__release(st);
	return rc;
}

int state_intent_forget(state_db *db, const char *plan, size_t *deleted, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__prep(db, sql_forget, &st, err);
	state__intents_touched(db);
	if(!rc)
		rc = state__bind_text(db, st, 1, plan, err);
	if(!rc)
		rc = state__step_done(db, st, "forgetting a closed scale-up plan", err);
	if(!rc && deleted)
		*deleted = (size_t)sqlite3_changes(db->sql);
	state__release(st);
	return rc;
}

uint64_t state_intent_version(state_db *db)
{
	sqlite3_stmt *st = NULL;
	int64_t dv = 0;
	bool known = false;
	/* data_version moves when another connection commits to the file (a
	 * second process, an operator's sqlite3 shell); this handle's own
	 * writes are counted by state__intents_touched. */
	if(state__prep(db, sql_data_version, &st, NULL) == 0 && sqlite3_step(st) == SQLITE_ROW) {
		dv = sqlite3_column_int64(st, 0);
		known = true;
	}
	state__release(st);
	if(!known || dv != db->data_version) {
		db->data_version = dv;
		db->intent_version++;
	}
	return db->intent_version;
}

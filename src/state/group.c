/* Node-group backoff: exponential, capped, and forgotten after a quiet
 * period, persisted so a restart does not hammer a failing cloud. */
#include "state/state_int.h"

#include <stdlib.h>
#include <string.h>

#define GRP_COLS "group_id, failures, duration_ns, last_failure_ns, until_ns, last_error"

static const char sql_get[] = "SELECT " GRP_COLS " FROM group_backoff WHERE group_id = ?1";
static const char sql_list[] = "SELECT " GRP_COLS " FROM group_backoff ORDER BY group_id";
static const char sql_put[] =
	"INSERT INTO group_backoff (" GRP_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
	" ON CONFLICT (group_id) DO UPDATE SET failures = excluded.failures,"
	" duration_ns = excluded.duration_ns, last_failure_ns = excluded.last_failure_ns,"
	" until_ns = excluded.until_ns, last_error = excluded.last_error";
static const char sql_delete[] = "DELETE FROM group_backoff WHERE group_id = ?1";

void state_group_clear(state_group_backoff *g)
{
	if(!g)
		return;
	free(g->group_id);
	free(g->last_error);
	memset(g, 0, sizeof(*g));
}

void state_group_list_free(state_group_backoff *v, size_t n)
{
	size_t i;

	for(i = 0; v && i < n; i++)
		state_group_clear(&v[i]);
	free(v);
}

static int read_row(sqlite3_stmt *st, state_group_backoff *g)
{
	int rc;

	memset(g, 0, sizeof(*g));
	rc = state__col_text(st, 0, &g->group_id);
	if(!rc)
		rc = state__col_text(st, 5, &g->last_error);
	if(rc) {
		state_group_clear(g);
		return rc;
	}
	g->failures = sqlite3_column_int64(st, 1);
	g->duration_ns = sqlite3_column_int64(st, 2);
	g->last_failure_ns = sqlite3_column_int64(st, 3);
	g->until_ns = sqlite3_column_int64(st, 4);
	return 0;
}

/* Read the group's row into *out; *found says whether there was one. */
static int get_row(state_db *db, const char *group_id, state_group_backoff *out,
		   bool *found, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int src, rc = 0;

	*found = false;
	memset(out, 0, sizeof(*out));
	rc = state__prep(db, sql_get, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, group_id, err);
	if(rc)
		goto done;
	src = sqlite3_step(st);
	if(src == SQLITE_DONE)
		goto done;
	if(src != SQLITE_ROW) {
		rc = state__sqlerr(db, err, src, "reading node-group backoff");
		goto done;
	}
	rc = read_row(st, out);
	if(rc)
		prd_err_set(err, rc, "state: reading node-group backoff: out of memory");
	else
		*found = true;
done:
	state__release(st);
	return rc;
}

int state_group_fail(state_db *db, const char *group_id, const char *reason,
		     int64_t *until_ns, prd_err *err)
{
	const state_config *c = &db->cfg;
	state_group_backoff g;
	sqlite3_stmt *st = NULL;
	int64_t now = state__now(db), failures, duration, until = 0;
	bool found = false;
	int rc = 0;

	memset(&g, 0, sizeof(g));
	rc = state__need(group_id, "node group id", err);
	if(!rc)
		rc = state__begin(db, err);
	if(rc)
		return rc;
	rc = get_row(db, group_id, &g, &found, err);
	if(rc)
		goto done;
	/* Like cluster-autoscaler: a streak ends when the last failure is
	 * older than the reset period; then the next backoff starts over. */
	if(!found || now - g.last_failure_ns > c->group_backoff_reset_ns) {
		failures = 1;
		duration = c->group_backoff_initial_ns;
	} else {
		failures = g.failures < INT64_MAX ? g.failures + 1 : g.failures;
		duration = g.duration_ns > c->group_backoff_max_ns / 2 ? c->group_backoff_max_ns
		                                                      : g.duration_ns * 2;
		if(duration < c->group_backoff_initial_ns)
			duration = c->group_backoff_initial_ns;
		if(duration > c->group_backoff_max_ns)
			duration = c->group_backoff_max_ns;
	}
	until = state__add_sat(now, duration);
	rc = state__prep(db, sql_put, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, group_id, err);
	if(!rc)
		rc = state__bind_i64(db, st, 2, failures, err);
	if(!rc)
		rc = state__bind_i64(db, st, 3, duration, err);
	if(!rc)
		rc = state__bind_i64(db, st, 4, now, err);
	if(!rc)
		rc = state__bind_i64(db, st, 5, until, err);
	if(!rc)
		rc = state__bind_text(db, st, 6, reason ? reason : "", err);
	if(!rc)
		rc = state__step_done(db, st, "writing node-group backoff", err);
	state__release(st);
	if(!rc)
		rc = state__commit(db, err);
done:
	state_group_clear(&g);
	if(rc)
		state__rollback(db);
	else if(until_ns)
		*until_ns = until;
	return rc;
}

int state_group_success(state_db *db, const char *group_id, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__need(group_id, "node group id", err);

	if(!rc)
		rc = state__prep(db, sql_delete, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, group_id, err);
	if(!rc)
		rc = state__step_done(db, st, "clearing node-group backoff", err);
	state__release(st);
	return rc;
}

int state_group_backed_off(state_db *db, const char *group_id, bool *backed_off,
			   int64_t *until_ns, prd_err *err)
{
	state_group_backoff g;
	bool found = false;
	int rc = 0;

	memset(&g, 0, sizeof(g));
	if(!backed_off)
		return prd_err_set(err, PRD_EINVAL, "state_group_backed_off: backed_off is required");
	*backed_off = false;
	if(until_ns)
		*until_ns = 0;
	rc = state__need(group_id, "node group id", err);
	if(!rc)
		rc = get_row(db, group_id, &g, &found, err);
	if(!rc && found && state__now(db) < g.until_ns) {
		*backed_off = true;
		if(until_ns)
			*until_ns = g.until_ns;
	}
	state_group_clear(&g);
	return rc;
}

int state_group_get(state_db *db, const char *group_id, state_group_backoff *out,
		    prd_err *err)
{
	bool found = false;
	int rc = 0;

	if(!out)
		return prd_err_set(err, PRD_EINVAL, "state_group_get: out is required");
	memset(out, 0, sizeof(*out));
	rc = state__need(group_id, "node group id", err);
	if(!rc)
		rc = get_row(db, group_id, out, &found, err);
	if(!rc && !found)
		rc = prd_err_set(err, PRD_ENOTFOUND, "state: node group %s has no backoff", group_id);
	return rc;
}

static int collect_row(state_db *db, sqlite3_stmt *st, void *row, prd_err *err)
{
	int rc = read_row(st, row);
	(void)db;
	return rc ? prd_err_set(err, rc, "state: listing node groups: out of memory") : 0;
}

static void clear_row(void *row)
{
	state_group_clear(row);
}

int state_group_list(state_db *db, state_group_backoff **out, size_t *n, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if(!out || !n)
		return prd_err_set(err, PRD_EINVAL, "state_group_list: out and n are required");
	rc = state__prep(db, sql_list, &st, err);
	return state__collect(db, st, rc, sizeof(**out), collect_row, clear_row, "listing node-group backoffs",
			      (void **)out, n, err);
}

int state_group_restore(state_db *db, const char *group_id, int64_t failures, int64_t until_ns,
			const char *reason, prd_err *err)
{
	state_group_backoff g;
	sqlite3_stmt *st = NULL;
	int64_t now = state__now(db), duration;
	bool found = false;
	int rc;

	memset(&g, 0, sizeof(g));
	if(until_ns <= now || failures <= 0)
		return 0;
	rc = state__need(group_id, "node group id", err);
	if(!rc)
		rc = state__begin(db, err);
	if(rc)
		return rc;
	rc = get_row(db, group_id, &g, &found, err);
	if(rc || (found && g.until_ns >= until_ns))
		goto done;
	duration = until_ns - now;
	rc = state__prep(db, sql_put, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, group_id, err);
	if(!rc)
		rc = state__bind_i64(db, st, 2, failures, err);
	if(!rc)
		rc = state__bind_i64(db, st, 3, duration, err);
	if(!rc)
		rc = state__bind_i64(db, st, 4, now, err);
	if(!rc)
		rc = state__bind_i64(db, st, 5, until_ns, err);
	if(!rc)
		rc = state__bind_text(db, st, 6, reason ? reason : "", err);
	if(!rc)
		rc = state__step_done(db, st, "restoring node-group backoff", err);
	state__release(st);
done:
	if(!rc)
		rc = state__commit(db, err);
	state_group_clear(&g);
	if(rc)
		state__rollback(db);
	return rc;
}

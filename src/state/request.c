/* Per-request retry state: first seen, ValidUntil deadline, attempts and
 * the backoff before the next one. */
#include "state/state_int.h"

#include <stdlib.h>
#include <string.h>

#define REQ_COLS "uid, namespace, name, first_seen_ns, valid_until_ns, attempts, " \
	"next_attempt_ns, last_outcome"

static const char sql_get[] = "SELECT " REQ_COLS " FROM request_state WHERE uid = ?1";
static const char sql_list[] =
	"SELECT " REQ_COLS " FROM request_state ORDER BY first_seen_ns, uid";
static const char sql_insert_new[] =
	"INSERT INTO request_state (uid, namespace, name, first_seen_ns) VALUES (?1, ?2, ?3, ?4)"
	" ON CONFLICT (uid) DO NOTHING";
static const char sql_put[] =
	"INSERT INTO request_state (" REQ_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
	" ON CONFLICT (uid) DO UPDATE SET namespace = excluded.namespace, name = excluded.name,"
	" first_seen_ns = excluded.first_seen_ns, valid_until_ns = excluded.valid_until_ns,"
	" attempts = excluded.attempts, next_attempt_ns = excluded.next_attempt_ns,"
	" last_outcome = excluded.last_outcome";
static const char sql_attempts[] = "SELECT attempts FROM request_state WHERE uid = ?1";
static const char sql_bump[] =
	"UPDATE request_state SET attempts = ?2, next_attempt_ns = ?3,"
	" last_outcome = COALESCE(?4, last_outcome) WHERE uid = ?1";
static const char sql_delete[] = "DELETE FROM request_state WHERE uid = ?1";

void state_request_clear(state_request *r)
{
	if(!r)
		return;
	free(r->uid);
	free(r->ns);
	free(r->name);
	free(r->last_outcome);
	memset(r, 0, sizeof(*r));
}

void state_request_list_free(state_request *v, size_t n)
{
	size_t i;

	for(i = 0; v && i < n; i++)
		state_request_clear(&v[i]);
	free(v);
}

/* Fill *r from the current row of a statement selecting REQ_COLS. On
 * failure *r is left cleared. */
static int read_row(sqlite3_stmt *st, state_request *r)
{
	int rc = 0;

	memset(r, 0, sizeof(*r));
	rc = state__col_text(st, 0, &r->uid);
	if(!rc)
		rc = state__col_text(st, 1, &r->ns);
	if(!rc)
		rc = state__col_text(st, 2, &r->name);
	if(!rc)
		rc = state__col_text(st, 7, &r->last_outcome);
	if(rc) {
		state_request_clear(r);
		return rc;
	}
	r->first_seen_ns = sqlite3_column_int64(st, 3);
	r->has_valid_until = sqlite3_column_type(st, 4) != SQLITE_NULL;
	r->valid_until_ns = r->has_valid_until ? sqlite3_column_int64(st, 4) : 0;
	r->attempts = sqlite3_column_int64(st, 5);
	r->next_attempt_ns = sqlite3_column_int64(st, 6);
	return 0;
}

/* The body of state_request_get, for use inside a caller's transaction. */
static int get_row(state_db *db, const char *uid, state_request *out, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int src, rc = 0;

	rc = state__prep(db, sql_get, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, uid, err);
	if(rc)
		goto done;
	src = sqlite3_step(st);
	if(src == SQLITE_DONE) {
		rc = prd_err_set(err, PRD_ENOTFOUND, "state: no request state for uid %s", uid);
		goto done;
	}
	if(src != SQLITE_ROW) {
		rc = state__sqlerr(db, err, src, "reading request state");
		goto done;
	}
	rc = read_row(st, out);
	if(rc)
		prd_err_set(err, rc, "state: reading request state: out of memory");
done:
	state__release(st);
	return rc;
}

int state_request_get(state_db *db, const char *uid, state_request *out, prd_err *err)
{
	int rc = state__need(uid, "request uid", err);

	if(out)
		memset(out, 0, sizeof(*out));
	if(!rc && !out)
		rc = prd_err_set(err, PRD_EINVAL, "state_request_get: out is required");
	if(!rc)
		rc = get_row(db, uid, out, err);
	return rc;
}

int state_request_ensure(state_db *db, const char *uid, const char *ns,
			 const char *name, state_request *out, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;

	if(out)
		memset(out, 0, sizeof(*out));
	rc = state__need(uid, "request uid", err);
	if(!rc)
		rc = state__need(ns, "request namespace", err);
	if(!rc)
		rc = state__need(name, "request name", err);
	if(!rc)
		rc = state__begin(db, err);
	if(rc)
		return rc;
	rc = state__prep(db, sql_insert_new, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, uid, err);
	if(!rc)
		rc = state__bind_text(db, st, 2, ns, err);
	if(!rc)
		rc = state__bind_text(db, st, 3, name, err);
	if(!rc)
		rc = state__bind_i64(db, st, 4, state__now(db), err);
	if(!rc)
		rc = state__step_done(db, st, "inserting request state", err);
	state__release(st);
	if(!rc && out)
		rc = get_row(db, uid, out, err);
	if(!rc)
		rc = state__commit(db, err);
	if(rc) {
		state__rollback(db);
		state_request_clear(out);
	}
	return rc;
}

int state_request_put(state_db *db, const state_request *r, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = 0;

	if(!r)
		return prd_err_set(err, PRD_EINVAL, "state_request_put: request is required");
	rc = state__need(r->uid, "request uid", err);
	if(!rc)
		rc = state__need(r->ns, "request namespace", err);
	if(!rc)
		rc = state__need(r->name, "request name", err);
	if(!rc && r->attempts < 0)
		rc = prd_err_set(err, PRD_EINVAL, "state: request %s: attempts must not be negative",
		                 r->uid);
	if(!rc)
		rc = state__prep(db, sql_put, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, r->uid, err);
	if(!rc)
		rc = state__bind_text(db, st, 2, r->ns, err);
	if(!rc)
		rc = state__bind_text(db, st, 3, r->name, err);
	if(!rc)
		rc = state__bind_i64(db, st, 4, r->first_seen_ns, err);
	if(!rc && r->has_valid_until)
		rc = state__bind_i64(db, st, 5, r->valid_until_ns, err);
	if(!rc)
		rc = state__bind_i64(db, st, 6, r->attempts, err);
	if(!rc)
		rc = state__bind_i64(db, st, 7, r->next_attempt_ns, err);
	if(!rc)
		rc = state__bind_text(db, st, 8, r->last_outcome ? r->last_outcome : "", err);
	if(!rc)
		rc = state__step_done(db, st, "writing request state", err);
	state__release(st);
	return rc;
}

int state_request_bump(state_db *db, const char *uid, const char *outcome,
		       int64_t *next_attempt_ns, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int64_t attempts = 0, next = 0;
	int src, rc = 0;

	rc = state__need(uid, "request uid", err);
	if(!rc)
		rc = state__begin(db, err);
	if(rc)
		return rc;
	rc = state__prep(db, sql_attempts, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, uid, err);
	if(rc)
		goto done;
	src = sqlite3_step(st);
	if(src == SQLITE_DONE) {
		rc = prd_err_set(err, PRD_ENOTFOUND, "state: no request state for uid %s", uid);
		goto done;
	}
	if(src != SQLITE_ROW) {
		rc = state__sqlerr(db, err, src, "reading request attempts");
		goto done;
	}
	attempts = sqlite3_column_int64(st, 0);
	state__release(st);
	if(attempts < INT64_MAX)
		attempts++;
	next = state__add_sat(state__now(db),
	                      state_backoff_delay(db->cfg.request_backoff_initial_ns,
	                                          db->cfg.request_backoff_max_ns, attempts));
	rc = state__prep(db, sql_bump, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, uid, err);
	if(!rc)
		rc = state__bind_i64(db, st, 2, attempts, err);
	if(!rc)
		rc = state__bind_i64(db, st, 3, next, err);
	if(!rc)
		rc = state__bind_text(db, st, 4, outcome, err);
	if(!rc)
		rc = state__step_done(db, st, "updating request attempts", err);
	state__release(st);
	st = NULL;
	if(!rc)
		rc = state__commit(db, err);
done:
	state__release(st);
	if(rc)
		state__rollback(db);
	else if(next_attempt_ns)
		*next_attempt_ns = next;
	return rc;
}

int state_request_delete(state_db *db, const char *uid, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__need(uid, "request uid", err);

	if(!rc)
		rc = state__prep(db, sql_delete, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, uid, err);
	if(!rc)
		rc = state__step_done(db, st, "deleting request state", err);
	if(!rc && sqlite3_changes(db->sql) == 0)
		rc = prd_err_set(err, PRD_ENOTFOUND, "state: no request state for uid %s", uid);
	state__release(st);
	return rc;
}

static int collect_row(state_db *db, sqlite3_stmt *st, void *row, prd_err *err)
{
	int rc = read_row(st, row);
	(void)db;
	return rc ? prd_err_set(err, rc, "state: listing requests: out of memory") : 0;
}

static void clear_row(void *row)
{
	state_request_clear(row);
}

int state_request_list(state_db *db, state_request **out, size_t *n, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if(!out || !n)
		return prd_err_set(err, PRD_EINVAL, "state_request_list: out and n are required");
	rc = state__prep(db, sql_list, &st, err);
	return state__collect(db, st, rc, sizeof(**out), collect_row, clear_row, "listing requests", (void **)out, n,
			      err);
}

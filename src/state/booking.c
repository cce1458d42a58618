/* Capacity bookings: what a Provisioned request holds on which node until
 * its pods consume it or the booking expires. */
#include "state/state_int.h"

#include <stdlib.h>
#include <string.h>

#define BK_COLS "request_uid, node_name, resources_json, created_ns, expires_ns"

/* A repeated booking keeps its original creation time: it is the same
 * booking, refreshed. */
static const char sql_upsert[] =
	"INSERT INTO booking (" BK_COLS ") VALUES (?1, ?2, ?3, ?4, ?5)"
	" ON CONFLICT (request_uid, node_name) DO UPDATE SET"
	" resources_json = excluded.resources_json, expires_ns = excluded.expires_ns";
static const char sql_insert[] = "INSERT INTO booking (" BK_COLS ") VALUES (?1, ?2, ?3, ?4, ?5)";
static const char sql_list_request[] =
	"SELECT " BK_COLS " FROM booking WHERE request_uid = ?1 ORDER BY node_name";
static const char sql_list_active[] =
	"SELECT " BK_COLS " FROM booking WHERE expires_ns > ?1 ORDER BY request_uid, node_name";
static const char sql_delete_request[] = "DELETE FROM booking WHERE request_uid = ?1";
static const char sql_delete_expired[] = "DELETE FROM booking WHERE expires_ns <= ?1";

void state_booking_clear(state_booking *b)
{
	if(!b)
		return;
	free(b->request_uid);
	free(b->node_name);
	free(b->resources_json);
	memset(b, 0, sizeof(*b));
}

void state_booking_list_free(state_booking *v, size_t n)
{
	size_t i;

	for(i = 0; v && i < n; i++)
		state_booking_clear(&v[i]);
	free(v);
}

/* Bind and run one insert or upsert of a booking row. */
static int write_row(state_db *db, const char *sql, const char *uid, const char *node,
		     const char *json, int64_t created, int64_t expires, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__need(node, "booking node name", err);

	if(!rc)
		rc = state__need(json, "booking resources", err);
	if(!rc)
		rc = state__prep(db, sql, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, uid, err);
	if(!rc)
		rc = state__bind_text(db, st, 2, node, err);
	if(!rc)
		rc = state__bind_text(db, st, 3, json, err);
	if(!rc)
		rc = state__bind_i64(db, st, 4, created, err);
	if(!rc)
		rc = state__bind_i64(db, st, 5, expires, err);
	if(!rc) {
		rc = state__step_done(db, st, "writing booking", err);
		if(rc == PRD_EEXIST)
			prd_err_set(err, rc, "state: request %s books node %s twice", uid, node);
	}
	state__release(st);
	return rc;
}

int state_booking_add(state_db *db, const char *request_uid, const char *node_name,
		      const char *resources_json, int64_t expires_ns, prd_err *err)
{
	int rc = state__need(request_uid, "request uid", err);

	if(!rc)
		rc = write_row(db, sql_upsert, request_uid, node_name, resources_json,
		               state__now(db), expires_ns, err);
	return rc;
}

int state_booking_set(state_db *db, const char *request_uid,
		      const state_booking *items, size_t n, int64_t expires_ns,
		      prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int64_t now = state__now(db);
	size_t i;
	int rc = state__need(request_uid, "request uid", err);

	if(!rc && n && !items)
		rc = prd_err_set(err, PRD_EINVAL, "state_booking_set: items is NULL but n is %zu", n);
	if(!rc)
		rc = state__begin(db, err);
	if(rc)
		return rc;
	rc = state__prep(db, sql_delete_request, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, request_uid, err);
	if(!rc)
		rc = state__step_done(db, st, "replacing bookings", err);
	state__release(st);
	for(i = 0; !rc && i < n; i++)
		rc = write_row(db, sql_insert, request_uid, items[i].node_name,
		               items[i].resources_json, now, expires_ns, err);
	if(!rc)
		rc = state__commit(db, err);
	if(rc)
		state__rollback(db);
	return rc;
}

/* Run a booking query whose parameter 1 is `text` (or `num` when text is
 * NULL) and collect the rows. */
static int collect_row(state_db *db, sqlite3_stmt *st, void *row, prd_err *err)
{
	state_booking *b = row;
	int rc = state__col_text(st, 0, &b->request_uid);
	(void)db;
	if(!rc)
		rc = state__col_text(st, 1, &b->node_name);
	if(!rc)
		rc = state__col_text(st, 2, &b->resources_json);
	if(rc) {
		state_booking_clear(b);
		return prd_err_set(err, rc, "state: listing bookings: out of memory");
	}
	b->created_ns = sqlite3_column_int64(st, 3);
	b->expires_ns = sqlite3_column_int64(st, 4);
	return 0;
}

static void clear_row(void *row)
{
	state_booking_clear(row);
}

static int list_rows(state_db *db, const char *sql, const char *text, int64_t num,
		     state_booking **out, size_t *n, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if(!out || !n)
		return prd_err_set(err, PRD_EINVAL, "state: listing bookings: out and n are required");
	rc = state__prep(db, sql, &st, err);
	if(!rc)
		rc = text ? state__bind_text(db, st, 1, text, err) : state__bind_i64(db, st, 1, num, err);
	return state__collect(db, st, rc, sizeof(**out), collect_row, clear_row, "listing bookings", (void **)out, n,
			      err);
}

int state_booking_list_request(state_db *db, const char *request_uid,
			       state_booking **out, size_t *n, prd_err *err)
{
	int rc = state__need(request_uid, "request uid", err);

	if(!rc)
		rc = list_rows(db, sql_list_request, request_uid, 0, out, n, err);
	return rc;
}

int state_booking_list_active(state_db *db, state_booking **out, size_t *n, prd_err *err)
{
	return list_rows(db, sql_list_active, NULL, state__now(db), out, n, err);
}

/* Run a DELETE whose parameter 1 is `text` (or `num` when text is NULL). */
static int delete_rows(state_db *db, const char *sql, const char *text, int64_t num,
		       size_t *deleted, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__prep(db, sql, &st, err);

	if(!rc)
		rc = text ? state__bind_text(db, st, 1, text, err) : state__bind_i64(db, st, 1, num, err);
	if(!rc)
		rc = state__step_done(db, st, "deleting bookings", err);
	if(!rc && deleted)
		*deleted = (size_t)sqlite3_changes(db->sql);
	state__release(st);
	return rc;
}

int state_booking_delete_request(state_db *db, const char *request_uid,
				 size_t *deleted, prd_err *err)
{
	int rc = state__need(request_uid, "request uid", err);

	if(!rc)
		rc = delete_rows(db, sql_delete_request, request_uid, 0, deleted, err);
	return rc;
}

int state_booking_delete_expired(state_db *db, size_t *deleted, prd_err *err)
{
	return delete_rows(db, sql_delete_expired, NULL, state__now(db), deleted, err);
}

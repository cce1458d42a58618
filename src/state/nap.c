/* Records of node groups provreqd auto-provisions (classes/nap.c): one
 * text per group id, written before the cloud is asked to create the
 * group and removed once the group is gone. The text's format is the
 * class module's; the store only keeps it. */
#include "state/state_int.h"

#include <stdlib.h>
#include <string.h>

static const char sql_get[] = "SELECT group_id, spec FROM nap_group WHERE group_id = ?1";
static const char sql_list[] = "SELECT group_id, spec FROM nap_group ORDER BY group_id";
static const char sql_put[] = "INSERT INTO nap_group (group_id, spec) VALUES (?1, ?2)"
			      " ON CONFLICT (group_id) DO UPDATE SET spec = excluded.spec";
static const char sql_delete[] = "DELETE FROM nap_group WHERE group_id = ?1";

void state_nap_clear(state_nap *r)
{
	if(!r)
		return;
	free(r->group_id);
	free(r->spec);
	memset(r, 0, sizeof(*r));
}

void state_nap_list_free(state_nap *v, size_t n)
{
	size_t i;
	for(i = 0; v && i < n; i++)
		state_nap_clear(&v[i]);
	free(v);
}

static int read_row(sqlite3_stmt *st, state_nap *r)
{
	int rc;
	memset(r, 0, sizeof(*r));
	rc = state__col_text(st, 0, &r->group_id);
	if(!rc)
		rc = state__col_text(st, 1, &r->spec);
	if(rc)
		state_nap_clear(r);
	return rc;
}

int state_nap_put(state_db *db, const char *group_id, const char *spec, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__need(group_id, "node group id", err);
	if(!rc)
		rc = state__need(spec, "auto-provisioned group record", err);
	if(!rc)
		rc = state__prep(db, sql_put, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, group_id, err);
	if(!rc)
		rc = state__bind_text(db, st, 2, spec, err);
	if(!rc)
		rc = state__step_done(db, st, "recording an auto-provisioned group", err);
	state__release(st);
	return rc;
}

int state_nap_get(state_db *db, const char *group_id, state_nap *out, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int src, rc = state__need(group_id, "node group id", err);
	memset(out, 0, sizeof(*out));
	if(!rc)
		rc = state__prep(db, sql_get, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, group_id, err);
	if(rc)
		goto done;
	src = sqlite3_step(st);
	if(src == SQLITE_DONE)
		rc = prd_err_set(err, PRD_ENOTFOUND, "state: no auto-provisioned group %s", group_id);
	else if(src != SQLITE_ROW)
		rc = state__sqlerr(db, err, src, "reading an auto-provisioned group");
	else if((rc = read_row(st, out)))
		prd_err_set(err, rc, "state: reading an auto-provisioned group: out of memory");
done:
	state__release(st);
	return rc;
}

static int collect_row(state_db *db, sqlite3_stmt *st, void *row, prd_err *err)
{
	int rc = read_row(st, row);
	(void)db;
	return rc ? prd_err_set(err, rc, "state: listing auto-provisioned groups: out of memory") : 0;
}

static void clear_row(void *row)
{
	state_nap_clear(row);
}

int state_nap_list(state_db *db, state_nap **out, size_t *n, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;
	if(!out || !n)
		return prd_err_set(err, PRD_EINVAL, "state_nap_list: out and n are required");
	rc = state__prep(db, sql_list, &st, err);
	return state__collect(db, st, rc, sizeof(**out), collect_row, clear_row, "listing auto-provisioned groups",
			      (void **)out, n, err);
}

int state_nap_delete(state_db *db, const char *group_id, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__need(group_id, "node group id", err);
	if(!rc)
		rc = state__prep(db, sql_delete, &st, err);
	if(!rc)
		rc = state__bind_text(db, st, 1, group_id, err);
	if(!rc)
		rc = state__step_done(db, st, "forgetting an auto-provisioned group", err);
	state__release(st);
	return rc;
}

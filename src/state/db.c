/* Opening and closing the state database, schema migration, and the
 * helpers every table's code shares (statement cache, transactions, error
 * mapping). */
#include "state/state_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/metrics.h"
#include "util/str.h"

#define MEMORY_PATH ":memory:"

void state_config_default(state_config *cfg)
{
	cfg->request_backoff_initial_ns = 60 * PRD_NS_PER_SEC;
	cfg->request_backoff_max_ns = 10 * 60 * PRD_NS_PER_SEC;
	cfg->group_backoff_initial_ns = 5 * 60 * PRD_NS_PER_SEC;
	cfg->group_backoff_max_ns = 30 * 60 * PRD_NS_PER_SEC;
	cfg->group_backoff_reset_ns = 3 * 3600 * PRD_NS_PER_SEC;
	cfg->busy_timeout_ms = 5000;
}

static int config_check(const state_config *c, prd_err *err)
{
	if(c->request_backoff_initial_ns <= 0 || c->request_backoff_max_ns < c->request_backoff_initial_ns)
		return prd_err_set(err, PRD_EINVAL,
		                   "state config: request backoff needs 0 < initial <= max");
	if(c->group_backoff_initial_ns <= 0 || c->group_backoff_max_ns < c->group_backoff_initial_ns)
		return prd_err_set(err, PRD_EINVAL,
		                   "state config: node-group backoff needs 0 < initial <= max");
	if(c->group_backoff_reset_ns <= 0)
		return prd_err_set(err, PRD_EINVAL,
		                   "state config: node-group backoff reset must be positive");
	if(c->busy_timeout_ms < 0)
		return prd_err_set(err, PRD_EINVAL, "state config: busy timeout must not be negative");
	return 0;
}

int64_t state_backoff_delay(int64_t initial_ns, int64_t max_ns, int64_t attempt)
{
	int64_t d = initial_ns;
	int64_t i;

	if(attempt <= 0 || initial_ns <= 0)
		return 0;
	/* Doubling stops as soon as it would pass the cap, so this runs at
	 * most ~63 times whatever `attempt` is. */
	for(i = 1; i < attempt && d < max_ns; i++)
		d = d > max_ns / 2 ? max_ns : d * 2;
	return d > max_ns ? max_ns : d;
}

int64_t state__add_sat(int64_t a, int64_t b)
{
	if(b > 0 && a > INT64_MAX - b)
		return INT64_MAX;
	return a + b;
}

int state__need(const char *s, const char *what, prd_err *err)
{
	if(!s || !*s)
		return prd_err_set(err, PRD_EINVAL, "state: %s must be a non-empty string", what);
	return 0;
}

/* The op label of provreqd_state_store_errors_total for a failure whose
 * message says `what`: a handful of values an alert can group by, from
 * the phrases this module's call sites use (docs/metrics.md lists them). */
static const char *error_op(const char *what)
{
	static const char *const open_words[] = { "opening", "configuring", "setting ", "enabling ",
						  "checking integrity", "reading schema", "migrating", NULL };
	size_t i;

	for(i = 0; open_words[i]; i++)
		if(strncmp(what, open_words[i], strlen(open_words[i])) == 0)
			return "open";
	if(strncmp(what, "beginning", 9) == 0 || strncmp(what, "committing", 10) == 0)
		return "transaction";
	if(strncmp(what, "preparing", 9) == 0 || strncmp(what, "binding", 7) == 0)
		return "statement";
	if(strncmp(what, "reading", 7) == 0 || strncmp(what, "listing", 7) == 0 ||
	   strncmp(what, "counting", 8) == 0)
		return "read";
	return "write";
}

int state__sqlerr(state_db *db, prd_err *err, int src, const char *what)
{
	int code;
	const char *msg = db && db->sql ? sqlite3_errmsg(db->sql) : sqlite3_errstr(src);

	switch(src & 0xff) {
	case SQLITE_NOMEM: code = PRD_ENOMEM; break;
	case SQLITE_BUSY:
	case SQLITE_LOCKED: code = PRD_EAGAIN; break;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB: code = PRD_ECORRUPT; break;
	case SQLITE_PERM:
	case SQLITE_AUTH:
	case SQLITE_READONLY: code = PRD_EPERM; break;
	case SQLITE_CONSTRAINT:
		if(src == SQLITE_CONSTRAINT_PRIMARYKEY || src == SQLITE_CONSTRAINT_UNIQUE)
			code = PRD_EEXIST;
		else if(src == SQLITE_CONSTRAINT_FOREIGNKEY)
			code = PRD_ENOTFOUND;
		else
			code = PRD_EINVAL;
		break;
	case SQLITE_MISUSE:
	case SQLITE_RANGE: code = PRD_EINTERNAL; break;
	default: code = PRD_EIO; break;
	}
	metrics_counter_add(M_STATE_ERRORS, METRICS_L(error_op(what)), 1);
	return prd_err_set(err, code, "state database %s: %s: %s",
	                   db && db->path ? db->path : "?", what, msg);
}

int state__prep(state_db *db, const char *sql, sqlite3_stmt **out, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	size_t i;
	int src;

	*out = NULL;
	for(i = 0; i < db->n_cache; i++) {
		if(db->cache[i].sql == sql) {
			sqlite3_reset(db->cache[i].stmt);
			sqlite3_clear_bindings(db->cache[i].stmt);
			*out = db->cache[i].stmt;
			return 0;
		}
	}
	if(db->n_cache == STATE__CACHE_MAX)
		return prd_err_set(err, PRD_EINTERNAL, "state: statement cache full (%d)",
		                   STATE__CACHE_MAX);
	src = sqlite3_prepare_v3(db->sql, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
	if(src != SQLITE_OK) {
		sqlite3_finalize(st);
		return state__sqlerr(db, err, src, "preparing statement");
	}
	db->cache[db->n_cache].sql = sql;
	db->cache[db->n_cache].stmt = st;
	db->n_cache++;
	*out = st;
	return 0;
}

void state__release(sqlite3_stmt *st)
{
	if(st) {
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
}

int state__collect(state_db *db, sqlite3_stmt *st, int rc, size_t size,
		   int (*read)(state_db *db, sqlite3_stmt *st, void *row, prd_err *err),
		   void (*clear)(void *row), const char *what, void **out, size_t *n, prd_err *err)
{
	char *v = NULL, *grown;
	size_t len = 0, cap = 0, i;
	int src = SQLITE_DONE;

	*out = NULL;
	*n = 0;
	while(!rc && (src = sqlite3_step(st)) == SQLITE_ROW) {
		if(len == cap) {
			cap = cap ? cap * 2 : 8;
			grown = realloc(v, cap * size);
			if(!grown) {
				rc = prd_err_set(err, PRD_ENOMEM, "state: %s: out of memory", what);
				break;
			}
			v = grown;
		}
		memset(v + len * size, 0, size);
		rc = read(db, st, v + len * size, err);
		if(!rc)
			len++;
	}
	if(!rc && src != SQLITE_DONE)
		rc = state__sqlerr(db, err, src, what);
	state__release(st);
	if(rc || !len) {
		for(i = 0; i < len; i++)
			clear(v + i * size);
		free(v);
		return rc;
	}
	*out = v;
	*n = len;
	return 0;
}

int state__bind_text(state_db *db, sqlite3_stmt *st, int i, const char *s, prd_err *err)
{
	int src = s ? sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
	return src == SQLITE_OK ? 0 : state__sqlerr(db, err, src, "binding a value");
}

int state__bind_i64(state_db *db, sqlite3_stmt *st, int i, int64_t v, prd_err *err)
{
	int src = sqlite3_bind_int64(st, i, (sqlite3_int64)v);
	return src == SQLITE_OK ? 0 : state__sqlerr(db, err, src, "binding a value");
}

int state__step_done(state_db *db, sqlite3_stmt *st, const char *what, prd_err *err)
{
	int src = sqlite3_step(st);
	if(src == SQLITE_DONE)
		return 0;
	/* With extended result codes on, the step result already carries the
	 * precise constraint code; reset would only repeat it. */
	return state__sqlerr(db, err, src, what);
}

int state__col_text(sqlite3_stmt *st, int i, char **out)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	if(!t && sqlite3_column_type(st, i) != SQLITE_NULL)
		return PRD_ENOMEM;
	*out = str_dup(t ? (const char *)t : "");
	return *out ? 0 : PRD_ENOMEM;
}

/* Run one cached statement that takes no parameters and returns no rows. */
static int exec_cached(state_db *db, const char *sql, const char *what, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = state__prep(db, sql, &st, err);

	if(!rc)
		rc = state__step_done(db, st, what, err);
	state__release(st);
	return rc;
}

static const char sql_begin_immediate[] = "BEGIN IMMEDIATE";
static const char sql_begin_deferred[] = "BEGIN";
static const char sql_commit[] = "COMMIT";

int state__begin(state_db *db, prd_err *err)
{
	if(!sqlite3_get_autocommit(db->sql))
		return prd_err_set(err, PRD_EINTERNAL, "state: nested transaction");
	return exec_cached(db, sql_begin_immediate, "beginning a transaction", err);
}

int state__begin_read(state_db *db, prd_err *err)
{
	if(!sqlite3_get_autocommit(db->sql))
		return prd_err_set(err, PRD_EINTERNAL, "state: nested transaction");
	return exec_cached(db, sql_begin_deferred, "beginning a transaction", err);
}

int state__commit(state_db *db, prd_err *err)
{
	int rc = exec_cached(db, sql_commit, "committing", err);
	if(rc)
		state__rollback(db);
	return rc;
}

void state__rollback(state_db *db)
{
	if(db && db->sql && !sqlite3_get_autocommit(db->sql))
		(void)sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
}

/* Create the file with mode 0600 ourselves before SQLite sees it: SQLite
 * would create it with 0644 & ~umask. The WAL and shared-memory files
 * SQLite creates later copy the main file's mode. *loose says an existing
 * file grants group or others access; the caller tightens it only once the
 * file has proved to be a provreqd database, so a mistyped --state-db
 * pointing at some other file never has its mode changed. Our descriptor
 * is closed before SQLite opens the file: closing a descriptor later would
 * drop SQLite's POSIX locks on it. */
static int prepare_file(const char *path, bool *loose, prd_err *err)
{
	struct stat st;
	bool created = true;
	int fd, e, rc = 0;

	*loose = false;
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if(fd < 0 && errno == EEXIST) {
		created = false;
		fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if(fd < 0) {
		e = errno;
		rc = prd_err_set(err, (e == EACCES || e == EPERM || e == EROFS) ? PRD_EPERM : PRD_EIO,
		                 "state database %s: cannot open or create it: %s%s", path,
		                 strerror(e),
		                 e == ENOENT || e == ENOTDIR ? " (does its directory exist?)" : "");
		goto done;
	}
	if(fstat(fd, &st) != 0) {
		rc = prd_err_set(err, PRD_EIO, "state database %s: stat: %s", path, strerror(errno));
		goto done;
	}
	if(!S_ISREG(st.st_mode)) {
		rc = prd_err_set(err, PRD_EINVAL, "state database %s: not a regular file", path);
		goto done;
	}
	/* A umask can only have removed bits from a new file; put them back. */
	if(created && (st.st_mode & 0777) != 0600 && fchmod(fd, 0600) != 0) {
		rc = prd_err_set(err, PRD_EPERM, "state database %s: cannot set mode 0600: %s",
		                 path, strerror(errno));
		goto done;
	}
	*loose = !created && (st.st_mode & 077) != 0;
done:
	if(fd >= 0)
		close(fd);
	return rc;
}

/* Set mode 0600 on a validated database file and on the WAL and
 * shared-memory files SQLite created with the old mode. */
static int tighten_mode(state_db *db, prd_err *err)
{
	static const char *const suffix[] = { "", "-wal", "-shm" };
	char p[4096];
	size_t i;

	for(i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		if((size_t)snprintf(p, sizeof(p), "%s%s", db->path, suffix[i]) >= sizeof(p))
			return prd_err_set(err, PRD_EINVAL, "state database %s: path too long", db->path);
		if(chmod(p, 0600) != 0 && !(i > 0 && errno == ENOENT))
			return prd_err_set(err, PRD_EPERM,
			                   "state database %s: other users may read or write it and "
			                   "its mode cannot be changed to 0600: %s", p, strerror(errno));
	}
	return 0;
}

/* A single integer from a one-row query such as a PRAGMA. */
static int query_int(state_db *db, const char *sql, int *out, const char *what, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	int src, rc = 0;

	src = sqlite3_prepare_v2(db->sql, sql, -1, &st, NULL);
	if(src != SQLITE_OK) {
		rc = state__sqlerr(db, err, src, what);
		goto done;
	}
	src = sqlite3_step(st);
	if(src != SQLITE_ROW) {
		rc = state__sqlerr(db, err, src == SQLITE_DONE ? SQLITE_INTERNAL : src, what);
		goto done;
	}
	*out = sqlite3_column_int(st, 0);
done:
	sqlite3_finalize(st);
	return rc;
}

/* PRAGMA quick_check: "ok" or a list of problems. Any failure to even read
 * the file (not a database, unreadable header) is reported as corruption
 * with advice, since that is what an operator must act on. */
static int check_integrity(state_db *db, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	const char *first;
	int src, rc = 0;

	src = sqlite3_prepare_v2(db->sql, "PRAGMA quick_check(5)", -1, &st, NULL);
	if(src == SQLITE_OK)
		src = sqlite3_step(st);
	if(src != SQLITE_ROW) {
		rc = state__sqlerr(db, err, src, "checking integrity");
		if(rc == PRD_ECORRUPT)
			prd_err_set(err, rc, "state database %s: damaged or not an SQLite database: %s "
			            "(move it aside to start with empty state, or restore a backup)",
			            db->path, sqlite3_errmsg(db->sql));
		goto done;
	}
	first = (const char *)sqlite3_column_text(st, 0);
	if(!first || strcmp(first, "ok") != 0) {
		rc = prd_err_set(err, PRD_ECORRUPT,
		                 "state database %s: failed integrity check: %s (move it aside "
		                 "to start with empty state, or restore a backup)",
		                 db->path, first ? first : "no result");
		goto done;
	}
done:
	sqlite3_finalize(st);
	return rc;
}

static int set_wal(state_db *db, bool memory, prd_err *err)
{
	sqlite3_stmt *st = NULL;
	const char *mode;
	int src, rc = 0;

	src = sqlite3_prepare_v2(db->sql, "PRAGMA journal_mode=WAL", -1, &st, NULL);
	if(src == SQLITE_OK)
		src = sqlite3_step(st);
	if(src != SQLITE_ROW) {
		rc = state__sqlerr(db, err, src, "enabling WAL journal mode");
		goto done;
	}
	mode = (const char *)sqlite3_column_text(st, 0);
	/* An in-memory database has no journal file and reports "memory". */
	if(!memory && (!mode || strcmp(mode, "wal") != 0)) {
		rc = prd_err_set(err, PRD_EUNSUPPORTED,
		                 "state database %s: cannot use WAL journal mode (got \"%s\"); "
		                 "is it on a file system without shared memory support?",
		                 db->path, mode ? mode : "?");
		goto done;
	}
done:
	sqlite3_finalize(st);
	return rc;
}

/* Bring the schema to STATE_SCHEMA_VERSION. All pending steps and the
 * version bump run in one IMMEDIATE transaction, so a crash or an error
 * leaves the database exactly at its old version. */
static int migrate(state_db *db, prd_err *err)
{
	const state__migration *last = &state__migrations[state__n_migrations - 1];
	char setver[64];
	int version = 0, tables = 0, src, rc = 0;
	size_t i;

	if(last->version != STATE_SCHEMA_VERSION)
		return prd_err_set(err, PRD_EINTERNAL, "state: migration list ends at %d, not %d",
		                   last->version, STATE_SCHEMA_VERSION);
	rc = state__begin(db, err);
	if(rc)
		goto done;
	rc = query_int(db, "PRAGMA user_version", &version, "reading schema version", err);
	if(rc)
		goto done;
	if(version > STATE_SCHEMA_VERSION) {
		rc = prd_err_set(err, PRD_EUNSUPPORTED,
		                 "state database %s: schema version %d is newer than this provreqd "
		                 "supports (%d); it was written by a newer provreqd, so run that "
		                 "version or move the file aside",
		                 db->path, version, STATE_SCHEMA_VERSION);
		goto done;
	}
	if(version < 0) {
		rc = prd_err_set(err, PRD_ECORRUPT, "state database %s: invalid schema version %d",
		                 db->path, version);
		goto done;
	}
	if(version == 0) {
		rc = query_int(db, "SELECT count(*) FROM sqlite_master", &tables,
		               "reading schema", err);
		if(rc)
			goto done;
		if(tables > 0) {
			rc = prd_err_set(err, PRD_EINVAL,
			                 "state database %s: has tables but no provreqd schema version; "
			                 "it is not a provreqd state database", db->path);
			goto done;
		}
	}
	for(i = 0; i < state__n_migrations; i++) {
		const state__migration *m = &state__migrations[i];
		if(m->version <= version)
			continue;
		src = sqlite3_exec(db->sql, m->sql, NULL, NULL, NULL);
		if(src == SQLITE_OK) {
			snprintf(setver, sizeof(setver), "PRAGMA user_version = %d", m->version);
			src = sqlite3_exec(db->sql, setver, NULL, NULL, NULL);
		}
		if(src != SQLITE_OK) {
			char what[64];
			snprintf(what, sizeof(what), "migrating schema to version %d", m->version);
			rc = state__sqlerr(db, err, src, what);
			goto done;
		}
	}
	rc = state__commit(db, err);
done:
	if(rc)
		state__rollback(db);
	return rc;
}

int state_open(const char *path, const clk *clock, const state_config *cfg,
	       state_db **out, prd_err *err)
{
	state_db *db = NULL;
	bool memory, loose = false;
	int src, rc = 0;

	if(out)
		*out = NULL;
	if(!path || !*path || !clock || !out)
		return prd_err_set(err, PRD_EINVAL, "state_open: path, clock and out are required");
	db = calloc(1, sizeof(*db));
	if(!db)
		return prd_err_set(err, PRD_ENOMEM, "state database %s: out of memory", path);
	db->clock = clock;
	if(cfg)
		db->cfg = *cfg;
	else
		state_config_default(&db->cfg);
	rc = config_check(&db->cfg, err);
	if(rc)
		goto done;
	db->path = str_dup(path);
	if(!db->path) {
		rc = prd_err_set(err, PRD_ENOMEM, "state database %s: out of memory", path);
		goto done;
	}
	memory = strcmp(path, MEMORY_PATH) == 0;
	if(!memory) {
		rc = prepare_file(path, &loose, err);
		if(rc)
			goto done;
	}
	src = sqlite3_open_v2(path, &db->sql,
	                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
	                      NULL);
	if(src != SQLITE_OK) {
		rc = state__sqlerr(db, err, src, "opening");
		goto done;
	}
	sqlite3_extended_result_codes(db->sql, 1);
	src = sqlite3_busy_timeout(db->sql, db->cfg.busy_timeout_ms);
	if(src == SQLITE_OK)
		src = sqlite3_exec(db->sql, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
	if(src != SQLITE_OK) {
		rc = state__sqlerr(db, err, src, "configuring the connection");
		goto done;
	}
	rc = check_integrity(db, err);
	if(!rc)
		rc = set_wal(db, memory, err);
	/* Commits reach the WAL file before they return, so a killed process
	 * loses nothing; only an OS crash or a power loss can lose the last
	 * commits (never corrupt the file). Everything the store holds is also
	 * in the requests' status, written before provreqd acts on it, and the
	 * store is rebuilt from there on start, so an fsync per commit (5 ms
	 * each on a busy disk; two per decided request) buys nothing. */
	if(!rc && sqlite3_exec(db->sql, "PRAGMA synchronous = NORMAL", NULL, NULL, NULL) != SQLITE_OK)
		rc = state__sqlerr(db, err, sqlite3_errcode(db->sql), "setting synchronous = NORMAL");
	if(!rc)
		rc = migrate(db, err);
	if(!rc && loose)
		rc = tighten_mode(db, err);
done:
	if(rc) {
		state_close(db);
		return rc;
	}
	*out = db;
	return 0;
}

void state_close(state_db *db)
{
	size_t i;

	if(!db)
		return;
	for(i = 0; i < db->n_cache; i++)
		sqlite3_finalize(db->cache[i].stmt);
	if(db->sql) {
		state__rollback(db);
		/* sqlite3_close_v2 cannot fail once every statement is finalized;
		 * it checkpoints the WAL on the last connection. */
		sqlite3_close_v2(db->sql);
	}
	free(db->path);
	free(db);
}

int state_schema_version(state_db *db, int *version, prd_err *err)
{
	return query_int(db, "PRAGMA user_version", version, "reading schema version", err);
}

const char *const state_tables[STATE_NTABLES] = { "request_state", "group_backoff", "scaleup_intent",
						  "scaleup_intent_node", "booking" };

int state_row_counts(state_db *db, int64_t counts[STATE_NTABLES], prd_err *err)
{
	size_t i;
	for(i = 0; i < STATE_NTABLES; i++) {
		char sql[96];
		int n = 0, rc;
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", state_tables[i]);
		rc = query_int(db, sql, &n, "counting rows", err);
		if(rc)
			return rc;
		counts[i] = n;
	}
	return 0;
}

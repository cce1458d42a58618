/* Tests for the SQLite state store (src/state). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/metrics.h"
#include "state/state.h"
#include "testutil.h"

#define SEC PRD_NS_PER_SEC
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define T0 (1700000000LL * SEC)

/* Expect success; on failure show the store's message before stopping. */
#define OK(expr) do { \
		int ok_rc_; \
		prd_err_clear(&e); \
		ok_rc_ = (expr); \
		if(ok_rc_) \
			fprintf(stderr, "\n%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #expr, ok_rc_, e.msg); \
		CU_ASSERT_EQUAL_FATAL(ok_rc_, 0); \
	} while(0)

/* Expect a specific error code. */
#define FAILS(code, expr) do { \
		int f_rc_; \
		prd_err_clear(&e); \
		f_rc_ = (expr); \
		if(f_rc_ != (code)) \
			fprintf(stderr, "\n%s:%d: %s -> %d (want %d): %s\n", __FILE__, __LINE__, #expr, \
			        f_rc_, (code), e.msg); \
		CU_ASSERT_EQUAL(f_rc_, (code)); \
	} while(0)

#define CONTAINS(hay, needle) CU_ASSERT_PTR_NOT_NULL(strstr((hay), (needle)))

/* A path inside this process's temporary directory (static buffer). */
static const char *tpath(const char *name)
{
	static char p[512];
	snprintf(p, sizeof(p), "%s/%s", test_tmpdir(), name);
	return p;
}

/* Run SQL on a file through a raw connection of our own, as another tool
 * (or an older provreqd) would. Returns the SQLite result code. */
static int raw_exec(const char *path, const char *sql)
{
	sqlite3 *h = NULL;
	int src = sqlite3_open(path, &h);

	if(src == SQLITE_OK)
		src = sqlite3_exec(h, sql, NULL, NULL, NULL);
	if(src != SQLITE_OK)
		fprintf(stderr, "raw_exec %s: %s\n", path, h ? sqlite3_errmsg(h) : "?");
	sqlite3_close(h);
	return src;
}

/* One integer from a query run through a raw connection; -1 on error. */
static long long raw_int(const char *path, const char *sql)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	long long v = -1;

	if(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	   sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
	   sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

static int write_bytes(const char *path, const void *data, size_t len, off_t at, int flags)
{
	int fd = open(path, O_WRONLY | O_CREAT | flags, 0600);
	ssize_t w;

	if(fd < 0)
		return -1;
	w = pwrite(fd, data, len, at);
	close(fd);
	return w == (ssize_t)len ? 0 : -1;
}

static state_db *open_mem(clk *c)
{
	state_db *db = NULL;
	prd_err e;

	clk_fake_init(c, T0);
	OK(state_open(":memory:", c, NULL, &db, &e));
	return db;
}

/* ---- config and opening ---------------------------------------------- */

static void test_config(void)
{
	state_config cfg, bad;
	/* Non-NULL on purpose: a failed open must reset *out to NULL. */
	state_db *db = (state_db *)&cfg;
	clk c;
	prd_err e;

	clk_fake_init(&c, T0);
	state_config_default(&cfg);
	CU_ASSERT_EQUAL(cfg.request_backoff_initial_ns, 1 * MIN);
	CU_ASSERT_EQUAL(cfg.request_backoff_max_ns, 10 * MIN);
	CU_ASSERT_EQUAL(cfg.group_backoff_initial_ns, 5 * MIN);
	CU_ASSERT_EQUAL(cfg.group_backoff_max_ns, 30 * MIN);
	CU_ASSERT_EQUAL(cfg.group_backoff_reset_ns, 3 * HOUR);
	CU_ASSERT(cfg.busy_timeout_ms > 0);

	bad = cfg;
	bad.request_backoff_initial_ns = 0;
	FAILS(PRD_EINVAL, state_open(":memory:", &c, &bad, &db, &e));
	CU_ASSERT_PTR_NULL(db);
	CONTAINS(e.msg, "request backoff");
	bad = cfg;
	bad.group_backoff_max_ns = bad.group_backoff_initial_ns - 1;
	FAILS(PRD_EINVAL, state_open(":memory:", &c, &bad, &db, &e));
	bad = cfg;
	bad.group_backoff_reset_ns = 0;
	FAILS(PRD_EINVAL, state_open(":memory:", &c, &bad, &db, &e));
	bad = cfg;
	bad.busy_timeout_ms = -1;
	FAILS(PRD_EINVAL, state_open(":memory:", &c, &bad, &db, &e));
	FAILS(PRD_EINVAL, state_open(NULL, &c, NULL, &db, &e));
	FAILS(PRD_EINVAL, state_open("", &c, NULL, &db, &e));
	FAILS(PRD_EINVAL, state_open(":memory:", NULL, NULL, &db, &e));
	CU_ASSERT_PTR_NULL(db);
	state_close(NULL);
}

static void test_open_memory(void)
{
	clk c;
	state_db *db = open_mem(&c);
	int v = 0;
	prd_err e;

	OK(state_schema_version(db, &v, &e));
	CU_ASSERT_EQUAL(v, STATE_SCHEMA_VERSION);
	CU_ASSERT_EQUAL(v, STATE_SCHEMA_VERSION);
	state_close(db);
}

static void test_file_mode_and_wal(void)
{
	const char *p;
	char path[512];
	struct stat st;
	state_db *db = NULL;
	mode_t old;
	clk c;
	prd_err e;

	clk_fake_init(&c, T0);
	snprintf(path, sizeof(path), "%s", tpath("mode.db"));
	/* Even a permissive umask must not loosen the file. */
	old = umask(0);
	OK(state_open(path, &c, NULL, &db, &e));
	umask(old);
	CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
	OK(state_request_ensure(db, "u1", "ns", "n", NULL, &e));
	/* WAL mode: the -wal file exists while a connection has written. */
	p = tpath("mode.db-wal");
	CU_ASSERT_EQUAL(stat(p, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 077, 0);
	state_close(db);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM request_state"), 1);

	/* journal_mode=WAL is persistent in the file header. */
	{
		sqlite3 *h = NULL;
		sqlite3_stmt *q = NULL;
		CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
		CU_ASSERT_EQUAL_FATAL(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
		CU_ASSERT_EQUAL_FATAL(sqlite3_step(q), SQLITE_ROW);
		CU_ASSERT_STRING_EQUAL((const char *)sqlite3_column_text(q, 0), "wal");
		sqlite3_finalize(q);
		sqlite3_close(h);
	}

	/* An existing database readable by others is tightened, and so are
	 * the WAL files SQLite created from its old mode. */
	CU_ASSERT_EQUAL_FATAL(chmod(path, 0644), 0);
	OK(state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
	OK(state_request_ensure(db, "u2", "ns", "n", NULL, &e));
	CU_ASSERT_EQUAL_FATAL(stat(tpath("mode.db-wal"), &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
	CU_ASSERT_EQUAL_FATAL(stat(tpath("mode.db-shm"), &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
	state_close(db);

	/* A file that is not a database is refused without touching its mode. */
	snprintf(path, sizeof(path), "%s", tpath("notmine.txt"));
	CU_ASSERT_EQUAL_FATAL(write_bytes(path, "hello, not a database at all\n", 29, 0, O_TRUNC), 0);
	CU_ASSERT_EQUAL_FATAL(chmod(path, 0644), 0);
	FAILS(PRD_ECORRUPT, state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_PTR_NULL(db);
	CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0644);

	/* So is a pre-created empty file, which becomes a fresh database. */
	snprintf(path, sizeof(path), "%s", tpath("precreated.db"));
	CU_ASSERT_EQUAL_FATAL(write_bytes(path, "", 0, 0, O_TRUNC), 0);
	CU_ASSERT_EQUAL_FATAL(chmod(path, 0666), 0);
	OK(state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 07777, 0600);
	state_close(db);
	CU_ASSERT_EQUAL(raw_int(path, "PRAGMA user_version"), STATE_SCHEMA_VERSION);
}

/* ---- request state ---------------------------------------------------- */

static void test_request_roundtrip(void)
{
	clk c;
	state_db *db = open_mem(&c);
	state_request r, w;
	state_request *list = NULL;
	size_t n = 99;
	prd_err e;

	OK(state_request_ensure(db, "uid-a", "team-a", "job-1", &r, &e));
	CU_ASSERT_STRING_EQUAL(r.uid, "uid-a");
	CU_ASSERT_STRING_EQUAL(r.ns, "team-a");
	CU_ASSERT_STRING_EQUAL(r.name, "job-1");
	CU_ASSERT_EQUAL(r.first_seen_ns, T0);
	CU_ASSERT_FALSE(r.has_valid_until);
	CU_ASSERT_EQUAL(r.attempts, 0);
	CU_ASSERT_EQUAL(r.next_attempt_ns, 0);
	CU_ASSERT_STRING_EQUAL(r.last_outcome, "");
	state_request_clear(&r);
	CU_ASSERT_PTR_NULL(r.uid);

	/* ensure again later: the first-seen time must not move. */
	clk_fake_advance(&c, 90 * SEC);
	OK(state_request_ensure(db, "uid-a", "team-a", "job-1", &r, &e));
	CU_ASSERT_EQUAL(r.first_seen_ns, T0);
	state_request_clear(&r);
	OK(state_request_ensure(db, "uid-b", "team-b", "job-2", NULL, &e));

	memset(&w, 0, sizeof(w));
	w.uid = "uid-a";
	w.ns = "team-a";
	w.name = "job-1";
	w.first_seen_ns = T0 - 5 * SEC;
	w.has_valid_until = true;
	w.valid_until_ns = T0 + HOUR;
	w.attempts = 3;
	w.next_attempt_ns = T0 + 4 * MIN;
	w.last_outcome = "CapacityIsNotFound: 2 pods do not fit";
	OK(state_request_put(db, &w, &e));
	OK(state_request_get(db, "uid-a", &r, &e));
	CU_ASSERT_EQUAL(r.first_seen_ns, T0 - 5 * SEC);
	CU_ASSERT_TRUE(r.has_valid_until);
	CU_ASSERT_EQUAL(r.valid_until_ns, T0 + HOUR);
	CU_ASSERT_EQUAL(r.attempts, 3);
	CU_ASSERT_EQUAL(r.next_attempt_ns, T0 + 4 * MIN);
	CU_ASSERT_STRING_EQUAL(r.last_outcome, "CapacityIsNotFound: 2 pods do not fit");
	state_request_clear(&r);

	/* Unsetting valid-until and a NULL outcome round-trip too. */
	w.has_valid_until = false;
	w.valid_until_ns = 12345;
	w.last_outcome = NULL;
	OK(state_request_put(db, &w, &e));
	OK(state_request_get(db, "uid-a", &r, &e));
	CU_ASSERT_FALSE(r.has_valid_until);
	CU_ASSERT_EQUAL(r.valid_until_ns, 0);
	CU_ASSERT_STRING_EQUAL(r.last_outcome, "");
	state_request_clear(&r);

	/* A value of INT64_MAX and a negative time survive exactly. */
	w.uid = "uid-c";
	w.has_valid_until = true;
	w.valid_until_ns = INT64_MAX;
	w.first_seen_ns = -1;
	OK(state_request_put(db, &w, &e));
	OK(state_request_get(db, "uid-c", &r, &e));
	CU_ASSERT_EQUAL(r.valid_until_ns, INT64_MAX);
	CU_ASSERT_EQUAL(r.first_seen_ns, -1);
	state_request_clear(&r);

	OK(state_request_list(db, &list, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 3);
	/* Ordered by first seen: uid-c (-1), uid-a (T0-5s), uid-b (T0+90s). */
	CU_ASSERT_STRING_EQUAL(list[0].uid, "uid-c");
	CU_ASSERT_STRING_EQUAL(list[1].uid, "uid-a");
	CU_ASSERT_STRING_EQUAL(list[2].uid, "uid-b");
	CU_ASSERT_STRING_EQUAL(list[2].ns, "team-b");
	state_request_list_free(list, n);

	FAILS(PRD_ENOTFOUND, state_request_get(db, "nope", &r, &e));
	CONTAINS(e.msg, "nope");
	CU_ASSERT_PTR_NULL(r.uid);
	OK(state_request_delete(db, "uid-a", &e));
	FAILS(PRD_ENOTFOUND, state_request_get(db, "uid-a", &r, &e));
	FAILS(PRD_ENOTFOUND, state_request_delete(db, "uid-a", &e));
	FAILS(PRD_EINVAL, state_request_get(db, "", &r, &e));
	FAILS(PRD_EINVAL, state_request_ensure(db, "x", NULL, "n", NULL, &e));
	w.attempts = -1;
	FAILS(PRD_EINVAL, state_request_put(db, &w, &e));

	OK(state_request_delete(db, "uid-b", &e));
	OK(state_request_delete(db, "uid-c", &e));
	OK(state_request_list(db, &list, &n, &e));
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NULL(list);
	state_close(db);
}

static void test_backoff_delay(void)
{
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, 0), 0);
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, -3), 0);
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, 1), 1 * MIN);
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, 2), 2 * MIN);
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, 3), 4 * MIN);
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, 4), 8 * MIN);
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, 5), 10 * MIN);
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, 1000000), 10 * MIN);
	CU_ASSERT_EQUAL(state_backoff_delay(MIN, 10 * MIN, INT64_MAX), 10 * MIN);
	/* No overflow when the cap is enormous. */
	CU_ASSERT_EQUAL(state_backoff_delay(1, INT64_MAX, 63), 1LL << 62);
	CU_ASSERT_EQUAL(state_backoff_delay(1, INT64_MAX, 64), INT64_MAX);
	CU_ASSERT_EQUAL(state_backoff_delay(1, INT64_MAX, 500), INT64_MAX);
}

static void test_request_bump(void)
{
	static const int64_t want[] = { 1 * MIN, 2 * MIN, 4 * MIN, 8 * MIN, 10 * MIN, 10 * MIN };
	state_config cfg;
	state_request r;
	state_db *db;
	int64_t next = 0;
	size_t i;
	clk c;
	prd_err e;

	db = open_mem(&c);
	OK(state_request_ensure(db, "u", "ns", "n", NULL, &e));
	for(i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		clk_fake_advance(&c, 7 * SEC);
		OK(state_request_bump(db, "u", "CapacityIsNotFound", &next, &e));
		CU_ASSERT_EQUAL(next, clk_wall(&c) + want[i]);
		OK(state_request_get(db, "u", &r, &e));
		CU_ASSERT_EQUAL(r.attempts, (int64_t)i + 1);
		CU_ASSERT_EQUAL(r.next_attempt_ns, clk_wall(&c) + want[i]);
		CU_ASSERT_STRING_EQUAL(r.last_outcome, "CapacityIsNotFound");
		state_request_clear(&r);
	}
	/* NULL outcome keeps the previous text. */
	OK(state_request_bump(db, "u", NULL, NULL, &e));
	OK(state_request_get(db, "u", &r, &e));
	CU_ASSERT_EQUAL(r.attempts, 7);
	CU_ASSERT_STRING_EQUAL(r.last_outcome, "CapacityIsNotFound");
	state_request_clear(&r);
	FAILS(PRD_ENOTFOUND, state_request_bump(db, "missing", "x", &next, &e));
	CONTAINS(e.msg, "missing");
	state_close(db);

	/* Configured backoff: 10 s doubling to a 25 s cap. */
	state_config_default(&cfg);
	cfg.request_backoff_initial_ns = 10 * SEC;
	cfg.request_backoff_max_ns = 25 * SEC;
	OK(state_open(":memory:", &c, &cfg, &db, &e));
	OK(state_request_ensure(db, "u", "ns", "n", NULL, &e));
	OK(state_request_bump(db, "u", "a", &next, &e));
	CU_ASSERT_EQUAL(next, clk_wall(&c) + 10 * SEC);
	OK(state_request_bump(db, "u", "b", &next, &e));
	CU_ASSERT_EQUAL(next, clk_wall(&c) + 20 * SEC);
	OK(state_request_bump(db, "u", "c", &next, &e));
	CU_ASSERT_EQUAL(next, clk_wall(&c) + 25 * SEC);
	state_close(db);
}

/* ---- node-group backoff ----------------------------------------------- */

static void test_group_backoff(void)
{
	clk c;
	state_db *db = open_mem(&c);
	state_group_backoff g;
	bool off = true;
	int64_t until = 0, last;
	prd_err e;

	OK(state_group_backed_off(db, "ng-1", &off, &until, &e));
	CU_ASSERT_FALSE(off);
	CU_ASSERT_EQUAL(until, 0);
	FAILS(PRD_ENOTFOUND, state_group_get(db, "ng-1", &g, &e));

	/* 5, 10, 20, 30, 30 minutes while failures keep coming. */
	OK(state_group_fail(db, "ng-1", "quota exceeded", &until, &e));
	CU_ASSERT_EQUAL(until, T0 + 5 * MIN);
	OK(state_group_backed_off(db, "ng-1", &off, &until, &e));
	CU_ASSERT_TRUE(off);
	CU_ASSERT_EQUAL(until, T0 + 5 * MIN);
	clk_fake_advance(&c, 5 * MIN - 1);
	OK(state_group_backed_off(db, "ng-1", &off, NULL, &e));
	CU_ASSERT_TRUE(off);
	clk_fake_advance(&c, 1);
	OK(state_group_backed_off(db, "ng-1", &off, &until, &e));
	CU_ASSERT_FALSE(off);
	CU_ASSERT_EQUAL(until, 0);

	OK(state_group_fail(db, "ng-1", "quota exceeded", &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 10 * MIN);
	clk_fake_advance(&c, 10 * MIN);
	OK(state_group_fail(db, "ng-1", "timeout", &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 20 * MIN);
	clk_fake_advance(&c, 20 * MIN);
	OK(state_group_fail(db, "ng-1", "timeout", &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 30 * MIN);
	clk_fake_advance(&c, 30 * MIN);
	OK(state_group_fail(db, "ng-1", "still failing", &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 30 * MIN);
	OK(state_group_get(db, "ng-1", &g, &e));
	CU_ASSERT_STRING_EQUAL(g.group_id, "ng-1");
	CU_ASSERT_EQUAL(g.failures, 5);
	CU_ASSERT_EQUAL(g.duration_ns, 30 * MIN);
	CU_ASSERT_EQUAL(g.last_failure_ns, clk_wall(&c));
	CU_ASSERT_EQUAL(g.until_ns, clk_wall(&c) + 30 * MIN);
	CU_ASSERT_STRING_EQUAL(g.last_error, "still failing");
	state_group_clear(&g);

	/* Exactly 3 h after the last failure the streak still counts... */
	OK(state_group_success(db, "ng-1", &e));
	OK(state_group_fail(db, "ng-1", NULL, &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 5 * MIN);
	clk_fake_advance(&c, 3 * HOUR);
	OK(state_group_fail(db, "ng-1", NULL, &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 10 * MIN);
	/* ...but a failure more than 3 h after the last one starts over. */
	last = clk_wall(&c);
	clk_fake_set(&c, last + 3 * HOUR + 1);
	OK(state_group_fail(db, "ng-1", "again", &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 5 * MIN);
	OK(state_group_get(db, "ng-1", &g, &e));
	CU_ASSERT_EQUAL(g.failures, 1);
	CU_ASSERT_EQUAL(g.duration_ns, 5 * MIN);
	CU_ASSERT_STRING_EQUAL(g.last_error, "again");
	state_group_clear(&g);
	/* Reset from the cap, too. */
	OK(state_group_fail(db, "ng-1", NULL, NULL, &e));
	OK(state_group_fail(db, "ng-1", NULL, NULL, &e));
	OK(state_group_fail(db, "ng-1", NULL, &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 30 * MIN);
	clk_fake_advance(&c, 4 * HOUR);
	OK(state_group_fail(db, "ng-1", NULL, &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 5 * MIN);

	/* Success forgets the backoff. */
	OK(state_group_success(db, "ng-1", &e));
	OK(state_group_backed_off(db, "ng-1", &off, &until, &e));
	CU_ASSERT_FALSE(off);
	FAILS(PRD_ENOTFOUND, state_group_get(db, "ng-1", &g, &e));
	OK(state_group_success(db, "never-failed", &e));
	FAILS(PRD_EINVAL, state_group_fail(db, "", NULL, NULL, &e));
	FAILS(PRD_EINVAL, state_group_backed_off(db, "ng-1", NULL, NULL, &e));
	state_close(db);
}

static void test_group_list_and_config(void)
{
	state_config cfg;
	state_group_backoff *v = NULL;
	state_db *db;
	size_t n = 0;
	int64_t until = 0;
	clk c;
	prd_err e;

	clk_fake_init(&c, T0);
	state_config_default(&cfg);
	cfg.group_backoff_initial_ns = 1 * SEC;
	cfg.group_backoff_max_ns = 3 * SEC;
	cfg.group_backoff_reset_ns = 10 * SEC;
	OK(state_open(":memory:", &c, &cfg, &db, &e));
	OK(state_group_list(db, &v, &n, &e));
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NULL(v);
	OK(state_group_fail(db, "b", NULL, &until, &e));
	CU_ASSERT_EQUAL(until, T0 + 1 * SEC);
	OK(state_group_fail(db, "b", NULL, &until, &e));
	CU_ASSERT_EQUAL(until, T0 + 2 * SEC);
	OK(state_group_fail(db, "b", NULL, &until, &e));
	CU_ASSERT_EQUAL(until, T0 + 3 * SEC);
	OK(state_group_fail(db, "a", "boom", NULL, &e));
	clk_fake_advance(&c, 11 * SEC);
	OK(state_group_fail(db, "b", NULL, &until, &e));
	CU_ASSERT_EQUAL(until, clk_wall(&c) + 1 * SEC);

	/* List includes expired backoffs (a's ended 10 s ago), sorted by id. */
	OK(state_group_list(db, &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[0].group_id, "a");
	CU_ASSERT_STRING_EQUAL(v[0].last_error, "boom");
	CU_ASSERT(v[0].until_ns < clk_wall(&c));
	CU_ASSERT_STRING_EQUAL(v[1].group_id, "b");
	CU_ASSERT_EQUAL(v[1].failures, 1);
	state_group_list_free(v, n);
	state_close(db);
}

/* ---- scale-up intents ------------------------------------------------- */

static state_intent mk_intent(const char *plan, int64_t delta, int64_t before)
{
	state_intent in;

	memset(&in, 0, sizeof(in));
	in.plan_id = (char *)plan;
	in.request_uid = "req-uid-1";
	in.node_group = "ng-gpu";
	in.delta = delta;
	in.target_before = before;
	in.deadline_ns = T0 + 15 * MIN;
	return in;
}

static void test_phase_table(void)
{
	/* allowed[from][to], in enum order: planned, increasing, waiting,
	 * done, rolling-back, rolled-back. */
	static const int allowed[6][6] = {
		{ 1, 1, 0, 0, 1, 1 },
		{ 0, 1, 1, 0, 1, 0 },
		{ 0, 0, 1, 1, 1, 0 },
		{ 0, 0, 0, 1, 0, 0 },
		{ 0, 0, 0, 0, 1, 1 },
		{ 0, 0, 0, 0, 0, 1 },
	};
	static const char *const names[6] = {
		"planned", "increasing", "waiting-for-nodes", "done", "rolling-back", "rolled-back"
	};
	state_phase p;
	int from, to;

	for(from = 0; from < 6; from++) {
		for(to = 0; to < 6; to++)
			CU_ASSERT_EQUAL(state_phase_can_advance((state_phase)from, (state_phase)to),
			                allowed[from][to] != 0);
		CU_ASSERT_STRING_EQUAL(state_phase_name((state_phase)from), names[from]);
		CU_ASSERT_EQUAL(state_phase_parse(names[from], &p), 0);
		CU_ASSERT_EQUAL(p, (state_phase)from);
	}
	CU_ASSERT_FALSE(state_phase_can_advance((state_phase)6, STATE_PHASE_DONE));
	CU_ASSERT_FALSE(state_phase_can_advance(STATE_PHASE_PLANNED, (state_phase)-1));
	CU_ASSERT_STRING_EQUAL(state_phase_name((state_phase)42), "unknown");
	CU_ASSERT_EQUAL(state_phase_parse("Planned", &p), PRD_EINVAL);
	CU_ASSERT_EQUAL(state_phase_parse(NULL, &p), PRD_EINVAL);
	CU_ASSERT_TRUE(state_phase_is_terminal(STATE_PHASE_DONE));
	CU_ASSERT_TRUE(state_phase_is_terminal(STATE_PHASE_ROLLED_BACK));
	CU_ASSERT_FALSE(state_phase_is_terminal(STATE_PHASE_ROLLING_BACK));
	CU_ASSERT_FALSE(state_phase_is_terminal(STATE_PHASE_WAITING_FOR_NODES));
}

static void test_intent_lifecycle(void)
{
	clk c;
	state_db *db = open_mem(&c);
	state_intent in = mk_intent("plan-1", 3, 2), it, *v = NULL;
	size_t n = 0;
	prd_err e;

	OK(state_intent_begin(db, &in, &e));
	FAILS(PRD_EEXIST, state_intent_begin(db, &in, &e));
	CONTAINS(e.msg, "plan-1");
	OK(state_intent_get(db, "plan-1", &it, &e));
	CU_ASSERT_STRING_EQUAL(it.plan_id, "plan-1");
	CU_ASSERT_STRING_EQUAL(it.request_uid, "req-uid-1");
	CU_ASSERT_STRING_EQUAL(it.node_group, "ng-gpu");
	CU_ASSERT_EQUAL(it.delta, 3);
	CU_ASSERT_EQUAL(it.target_before, 2);
	CU_ASSERT_EQUAL(it.phase, STATE_PHASE_PLANNED);
	CU_ASSERT_EQUAL(it.deadline_ns, T0 + 15 * MIN);
	CU_ASSERT_EQUAL(it.created_ns, T0);
	CU_ASSERT_EQUAL(it.updated_ns, T0);
	CU_ASSERT_STRING_EQUAL(it.last_error, "");
	CU_ASSERT_STRING_EQUAL(it.known_before, "");
	CU_ASSERT_EQUAL(it.n_nodes, 0);
	state_intent_clear(&it);
	/* The group's instances before the cloud call. */
	OK(state_intent_set_known(db, "plan-1", "gpu-a\ngpu-b", &e));
	OK(state_intent_get(db, "plan-1", &it, &e));
	CU_ASSERT_STRING_EQUAL(it.known_before, "gpu-a\ngpu-b");
	state_intent_clear(&it);
	FAILS(PRD_EINVAL, state_intent_set_known(db, "no-such-plan", "x", &e));

	clk_fake_advance(&c, SEC);
	OK(state_intent_advance(db, "plan-1", STATE_PHASE_INCREASING, NULL, &e));
	clk_fake_advance(&c, SEC);
	OK(state_intent_add_node(db, "plan-1", "node-b", &e));
	OK(state_intent_add_node(db, "plan-1", "node-a", &e));
	OK(state_intent_add_node(db, "plan-1", "node-b", &e));
	OK(state_intent_add_node(db, "plan-1", "node-c", &e));
	/* Re-entering the current phase is a harmless no-op. */
	OK(state_intent_advance(db, "plan-1", STATE_PHASE_INCREASING, NULL, &e));
	OK(state_intent_get(db, "plan-1", &it, &e));
	CU_ASSERT_EQUAL(it.phase, STATE_PHASE_INCREASING);
	CU_ASSERT_EQUAL(it.created_ns, T0);
	CU_ASSERT_EQUAL(it.updated_ns, T0 + 2 * SEC);
	CU_ASSERT_EQUAL_FATAL(it.n_nodes, 3);
	/* In the order they were created, without the duplicate. */
	CU_ASSERT_STRING_EQUAL(it.nodes[0], "node-b");
	CU_ASSERT_STRING_EQUAL(it.nodes[1], "node-a");
	CU_ASSERT_STRING_EQUAL(it.nodes[2], "node-c");
	state_intent_clear(&it);
	/* Several in one transaction: all or none. */
	{
		const char *some[] = { "node-d", "node-a", "node-e", "node-d" };
		const char *bad[] = { "node-f", NULL };
		FAILS(PRD_EINVAL, state_intent_add_nodes(db, "plan-1", bad, 2, &e));
		OK(state_intent_add_nodes(db, "plan-1", some, 4, &e));
		OK(state_intent_add_nodes(db, "plan-1", some, 0, &e));
		FAILS(PRD_ENOTFOUND, state_intent_add_nodes(db, "no-such-plan", some, 1, &e));
		OK(state_intent_get(db, "plan-1", &it, &e));
		CU_ASSERT_EQUAL_FATAL(it.n_nodes, 5);
		CU_ASSERT_STRING_EQUAL(it.nodes[3], "node-d");
		CU_ASSERT_STRING_EQUAL(it.nodes[4], "node-e");
		state_intent_clear(&it);
	}

	OK(state_intent_advance(db, "plan-1", STATE_PHASE_WAITING_FOR_NODES, NULL, &e));
	in = mk_intent("plan-2", 1, 0);
	clk_fake_advance(&c, SEC);
	OK(state_intent_begin(db, &in, &e));
	OK(state_intent_list_open(db, &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[0].plan_id, "plan-1");
	CU_ASSERT_EQUAL(v[0].phase, STATE_PHASE_WAITING_FOR_NODES);
	CU_ASSERT_EQUAL(v[0].n_nodes, 5);
	CU_ASSERT_STRING_EQUAL(v[1].plan_id, "plan-2");
	CU_ASSERT_EQUAL(v[1].n_nodes, 0);
	state_intent_list_free(v, n);

	OK(state_intent_close(db, "plan-1", STATE_PHASE_DONE, NULL, &e));
	OK(state_intent_list_open(db, &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(v[0].plan_id, "plan-2");
	state_intent_list_free(v, n);
	/* A closed intent stays readable and frozen. */
	OK(state_intent_get(db, "plan-1", &it, &e));
	CU_ASSERT_EQUAL(it.phase, STATE_PHASE_DONE);
	CU_ASSERT_EQUAL(it.n_nodes, 5);
	state_intent_clear(&it);
	FAILS(PRD_EINVAL, state_intent_add_node(db, "plan-1", "node-d", &e));
	CONTAINS(e.msg, "closed");
	OK(state_intent_close(db, "plan-1", STATE_PHASE_DONE, NULL, &e));

	/* Bad input. */
	in = mk_intent("plan-3", 0, 1);
	FAILS(PRD_EINVAL, state_intent_begin(db, &in, &e));
	in = mk_intent("plan-3", 1, -1);
	FAILS(PRD_EINVAL, state_intent_begin(db, &in, &e));
	in = mk_intent("", 1, 1);
	FAILS(PRD_EINVAL, state_intent_begin(db, &in, &e));
	FAILS(PRD_ENOTFOUND, state_intent_get(db, "plan-3", &it, &e));
	FAILS(PRD_ENOTFOUND, state_intent_add_node(db, "plan-3", "n", &e));
	state_close(db);
}

static void test_intent_illegal_transitions(void)
{
	clk c;
	state_db *db = open_mem(&c);
	state_intent in = mk_intent("p", 2, 0), it;
	prd_err e;

	OK(state_intent_begin(db, &in, &e));
	clk_fake_advance(&c, MIN);
	FAILS(PRD_EINVAL, state_intent_advance(db, "p", STATE_PHASE_WAITING_FOR_NODES, NULL, &e));
	CONTAINS(e.msg, "planned");
	CONTAINS(e.msg, "waiting-for-nodes");
	FAILS(PRD_EINVAL, state_intent_advance(db, "p", STATE_PHASE_DONE, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_advance(db, "p", (state_phase)17, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_close(db, "p", STATE_PHASE_ROLLING_BACK, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_close(db, "p", STATE_PHASE_INCREASING, NULL, &e));
	FAILS(PRD_ENOTFOUND, state_intent_advance(db, "q", STATE_PHASE_INCREASING, NULL, &e));
	/* The rejected transitions left the row untouched. */
	OK(state_intent_get(db, "p", &it, &e));
	CU_ASSERT_EQUAL(it.phase, STATE_PHASE_PLANNED);
	CU_ASSERT_EQUAL(it.updated_ns, T0);
	state_intent_clear(&it);

	OK(state_intent_advance(db, "p", STATE_PHASE_INCREASING, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_advance(db, "p", STATE_PHASE_PLANNED, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_close(db, "p", STATE_PHASE_DONE, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_advance(db, "p", STATE_PHASE_ROLLED_BACK, NULL, &e));
	OK(state_intent_add_node(db, "p", "n-1", &e));
	OK(state_intent_advance(db, "p", STATE_PHASE_ROLLING_BACK, "cloud: quota exceeded", &e));
	FAILS(PRD_EINVAL, state_intent_advance(db, "p", STATE_PHASE_WAITING_FOR_NODES, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_close(db, "p", STATE_PHASE_DONE, NULL, &e));
	OK(state_intent_get(db, "p", &it, &e));
	CU_ASSERT_EQUAL(it.phase, STATE_PHASE_ROLLING_BACK);
	CU_ASSERT_STRING_EQUAL(it.last_error, "cloud: quota exceeded");
	CU_ASSERT_EQUAL(it.n_nodes, 1);
	state_intent_clear(&it);
	/* NULL error keeps the recorded cause. */
	OK(state_intent_close(db, "p", STATE_PHASE_ROLLED_BACK, NULL, &e));
	OK(state_intent_get(db, "p", &it, &e));
	CU_ASSERT_EQUAL(it.phase, STATE_PHASE_ROLLED_BACK);
	CU_ASSERT_STRING_EQUAL(it.last_error, "cloud: quota exceeded");
	state_intent_clear(&it);
	FAILS(PRD_EINVAL, state_intent_advance(db, "p", STATE_PHASE_PLANNED, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_advance(db, "p", STATE_PHASE_ROLLING_BACK, NULL, &e));
	FAILS(PRD_EINVAL, state_intent_close(db, "p", STATE_PHASE_DONE, NULL, &e));

	/* Crash recovery of a plan that never reached the cloud. */
	in = mk_intent("p2", 1, 0);
	OK(state_intent_begin(db, &in, &e));
	OK(state_intent_close(db, "p2", STATE_PHASE_ROLLED_BACK, "not started before restart", &e));
	state_close(db);
}

static void test_intent_prune(void)
{
	const char *path = tpath("prune.db");
	state_intent in;
	state_db *db = NULL;
	size_t n = 99;
	clk c;
	prd_err e;

	clk_fake_init(&c, T0);
	OK(state_open(path, &c, NULL, &db, &e));
	in = mk_intent("old-done", 1, 0);
	OK(state_intent_begin(db, &in, &e));
	OK(state_intent_advance(db, "old-done", STATE_PHASE_INCREASING, NULL, &e));
	OK(state_intent_add_node(db, "old-done", "n1", &e));
	OK(state_intent_add_node(db, "old-done", "n2", &e));
	OK(state_intent_advance(db, "old-done", STATE_PHASE_WAITING_FOR_NODES, NULL, &e));
	OK(state_intent_close(db, "old-done", STATE_PHASE_DONE, NULL, &e));
	in = mk_intent("old-open", 1, 0);
	OK(state_intent_begin(db, &in, &e));
	OK(state_intent_advance(db, "old-open", STATE_PHASE_INCREASING, NULL, &e));
	OK(state_intent_add_node(db, "old-open", "n3", &e));
	clk_fake_advance(&c, HOUR);
	in = mk_intent("new-done", 1, 0);
	OK(state_intent_begin(db, &in, &e));
	OK(state_intent_close(db, "new-done", STATE_PHASE_ROLLED_BACK, NULL, &e));

	OK(state_intent_prune(db, T0 + 30 * MIN, &n, &e));
	CU_ASSERT_EQUAL(n, 1);
	FAILS(PRD_ENOTFOUND, state_intent_get(db, "old-done", &in, &e));
	OK(state_intent_get(db, "old-open", &in, &e));
	state_intent_clear(&in);
	OK(state_intent_get(db, "new-done", &in, &e));
	state_intent_clear(&in);
	state_close(db);
	/* The pruned plan's node rows went with it (foreign keys are on). */
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM scaleup_intent_node"), 1);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM scaleup_intent_node WHERE node_name='n3'"), 1);
}

/* Broken stores caught: a version that stays put after an intent write
 * through this handle, or after another connection's commit to the file
 * (a caller would then keep a stale list of open plans), and one that
 * moves on a mere read (a caller could then keep nothing). */
static void test_intent_version(void)
{
	const char *path = tpath("version.db");
	const char *two[] = { "n1", "n2" };
	state_intent in, *v = NULL;
	state_db *db = NULL, *other = NULL;
	uint64_t ver;
	size_t n = 0;
	clk c;
	prd_err e;

	clk_fake_init(&c, T0);
	OK(state_open(path, &c, NULL, &db, &e));
	OK(state_open(path, &c, NULL, &other, &e));
	ver = state_intent_version(db);
	OK(state_intent_list_open(db, &v, &n, &e));
	state_intent_list_free(v, n);
	CU_ASSERT_EQUAL(state_intent_version(db), ver);
	in = mk_intent("p", 2, 0);
	OK(state_intent_begin(db, &in, &e));
	CU_ASSERT_NOT_EQUAL(state_intent_version(db), ver);
	ver = state_intent_version(db);
	CU_ASSERT_EQUAL(state_intent_version(db), ver);
	OK(state_intent_advance(db, "p", STATE_PHASE_INCREASING, NULL, &e));
	CU_ASSERT_NOT_EQUAL(state_intent_version(db), ver);
	ver = state_intent_version(db);
	OK(state_intent_add_nodes(db, "p", two, 2, &e));
	CU_ASSERT_NOT_EQUAL(state_intent_version(db), ver);
	ver = state_intent_version(db);
	OK(state_intent_set_known(db, "p", "h1:0", &e));
	CU_ASSERT_NOT_EQUAL(state_intent_version(db), ver);
	ver = state_intent_version(db);
	OK(state_intent_get(db, "p", &in, &e));
	state_intent_clear(&in);
	CU_ASSERT_EQUAL(state_intent_version(db), ver);
	/* Another process writes to the same file. */
	OK(state_intent_advance(other, "p", STATE_PHASE_WAITING_FOR_NODES, NULL, &e));
	OK(state_intent_close(other, "p", STATE_PHASE_DONE, NULL, &e));
	CU_ASSERT_NOT_EQUAL(state_intent_version(db), ver);
	ver = state_intent_version(db);
	CU_ASSERT_EQUAL(state_intent_version(db), ver);
	OK(state_intent_prune(db, T0 + HOUR, &n, &e));
	CU_ASSERT_NOT_EQUAL(state_intent_version(db), ver);
	state_close(other);
	state_close(db);
}

/* ---- bookings --------------------------------------------------------- */

/* Records of auto-provisioned groups (classes/nap.c): written, replaced,
 * listed by id, forgotten; a missing one is PRD_ENOTFOUND. */
static void test_nap_records(void)
{
	clk c;
	state_db *db = open_mem(&c);
	state_nap r, *v = NULL;
	size_t n = 0;
	prd_err e;

	FAILS(PRD_ENOTFOUND, state_nap_get(db, "nap-a", &r, &e));
	OK(state_nap_put(db, "nap-b", "{\"plan\":\"p1\"}", &e));
	OK(state_nap_put(db, "nap-a", "{\"plan\":\"p0\"}", &e));
	OK(state_nap_put(db, "nap-b", "{\"plan\":\"p2\"}", &e));
	OK(state_nap_get(db, "nap-b", &r, &e));
	CU_ASSERT_STRING_EQUAL(r.spec, "{\"plan\":\"p2\"}");
	state_nap_clear(&r);
	OK(state_nap_list(db, &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[0].group_id, "nap-a");
	CU_ASSERT_STRING_EQUAL(v[1].group_id, "nap-b");
	state_nap_list_free(v, n);
	OK(state_nap_delete(db, "nap-a", &e));
	OK(state_nap_delete(db, "nap-a", &e));
	FAILS(PRD_ENOTFOUND, state_nap_get(db, "nap-a", &r, &e));
	FAILS(PRD_EINVAL, state_nap_put(db, "nap-c", NULL, &e));
	state_close(db);
}

static void test_bookings(void)
{
	clk c;
	state_db *db = open_mem(&c);
	state_booking *v = NULL, items[3];
	size_t n = 0, del = 0;
	prd_err e;

	OK(state_booking_list_active(db, &v, &n, &e));
	CU_ASSERT_EQUAL(n, 0);
	OK(state_booking_add(db, "r1", "node-b", "{\"cpu\":\"2\",\"memory\":\"4Gi\"}",
	                     T0 + 10 * MIN, &e));
	OK(state_booking_add(db, "r1", "node-a", "{\"cpu\":\"500m\"}", T0 + 10 * MIN, &e));
	OK(state_booking_add(db, "r2", "node-a", "{\"nvidia.com/gpu\":\"1\"}", T0 + 5 * MIN, &e));

	OK(state_booking_list_request(db, "r1", &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[0].node_name, "node-a");
	CU_ASSERT_STRING_EQUAL(v[0].resources_json, "{\"cpu\":\"500m\"}");
	CU_ASSERT_STRING_EQUAL(v[1].node_name, "node-b");
	CU_ASSERT_STRING_EQUAL(v[1].resources_json, "{\"cpu\":\"2\",\"memory\":\"4Gi\"}");
	CU_ASSERT_STRING_EQUAL(v[1].request_uid, "r1");
	CU_ASSERT_EQUAL(v[1].created_ns, T0);
	CU_ASSERT_EQUAL(v[1].expires_ns, T0 + 10 * MIN);
	state_booking_list_free(v, n);

	/* Booking the same node again refreshes it; created time is kept. */
	clk_fake_advance(&c, MIN);
	OK(state_booking_add(db, "r1", "node-a", "{\"cpu\":\"1\"}", T0 + 11 * MIN, &e));
	OK(state_booking_list_request(db, "r1", &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[0].resources_json, "{\"cpu\":\"1\"}");
	CU_ASSERT_EQUAL(v[0].created_ns, T0);
	CU_ASSERT_EQUAL(v[0].expires_ns, T0 + 11 * MIN);
	state_booking_list_free(v, n);

	/* r2 expires at T0+5m: active just before, expired exactly then. */
	clk_fake_set(&c, T0 + 5 * MIN - 1);
	OK(state_booking_list_active(db, &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 3);
	CU_ASSERT_STRING_EQUAL(v[0].request_uid, "r1");
	CU_ASSERT_STRING_EQUAL(v[2].request_uid, "r2");
	state_booking_list_free(v, n);
	clk_fake_set(&c, T0 + 5 * MIN);
	OK(state_booking_list_active(db, &v, &n, &e));
	CU_ASSERT_EQUAL(n, 2);
	state_booking_list_free(v, n);
	OK(state_booking_delete_expired(db, &del, &e));
	CU_ASSERT_EQUAL(del, 1);
	OK(state_booking_list_request(db, "r2", &v, &n, &e));
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_PTR_NULL(v);

	/* set replaces a request's bookings all at once... */
	memset(items, 0, sizeof(items));
	items[0].node_name = "node-x";
	items[0].resources_json = "{\"cpu\":\"3\"}";
	items[1].node_name = "node-y";
	items[1].resources_json = "{\"cpu\":\"4\"}";
	OK(state_booking_set(db, "r1", items, 2, T0 + 20 * MIN, &e));
	OK(state_booking_list_request(db, "r1", &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[0].node_name, "node-x");
	CU_ASSERT_STRING_EQUAL(v[1].node_name, "node-y");
	CU_ASSERT_EQUAL(v[1].expires_ns, T0 + 20 * MIN);
	CU_ASSERT_EQUAL(v[1].created_ns, T0 + 5 * MIN);
	state_booking_list_free(v, n);
	/* ...or not at all: a duplicate node aborts the whole set. */
	items[0].node_name = "node-z";
	items[2].node_name = "node-y";
	items[2].resources_json = "{}";
	FAILS(PRD_EEXIST, state_booking_set(db, "r1", items, 3, T0 + 30 * MIN, &e));
	CONTAINS(e.msg, "node-y");
	items[1].resources_json = NULL;
	FAILS(PRD_EINVAL, state_booking_set(db, "r1", items, 2, T0 + 30 * MIN, &e));
	OK(state_booking_list_request(db, "r1", &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[0].node_name, "node-x");
	CU_ASSERT_EQUAL(v[0].expires_ns, T0 + 20 * MIN);
	state_booking_list_free(v, n);

	OK(state_booking_delete_request(db, "r1", &del, &e));
	CU_ASSERT_EQUAL(del, 2);
	OK(state_booking_delete_request(db, "r1", &del, &e));
	CU_ASSERT_EQUAL(del, 0);
	OK(state_booking_set(db, "r3", NULL, 0, T0, &e));
	FAILS(PRD_EINVAL, state_booking_add(db, "r1", "n", NULL, T0, &e));
	FAILS(PRD_EINVAL, state_booking_add(db, NULL, "n", "{}", T0, &e));
	FAILS(PRD_EINVAL, state_booking_set(db, "r1", NULL, 2, T0, &e));
	state_close(db);
}

/* ---- persistence ------------------------------------------------------ */

static void test_survives_reopen(void)
{
	const char *p = tpath("reopen.db");
	char path[512];
	state_intent in, *v = NULL;
	state_request r;
	state_booking *b = NULL;
	state_db *db = NULL;
	bool off = false;
	int64_t until = 0;
	size_t n = 0;
	clk c;
	prd_err e;

	snprintf(path, sizeof(path), "%s", p);
	clk_fake_init(&c, T0);
	OK(state_open(path, &c, NULL, &db, &e));
	OK(state_request_ensure(db, "u1", "ns", "req", NULL, &e));
	OK(state_request_bump(db, "u1", "CapacityIsNotFound", NULL, &e));
	OK(state_group_fail(db, "ng", "quota", NULL, &e));
	in = mk_intent("crashy", 2, 4);
	OK(state_intent_begin(db, &in, &e));
	OK(state_intent_advance(db, "crashy", STATE_PHASE_INCREASING, NULL, &e));
	OK(state_intent_add_node(db, "crashy", "ng-node-1", &e));
	in = mk_intent("finished", 1, 0);
	OK(state_intent_begin(db, &in, &e));
	OK(state_intent_close(db, "finished", STATE_PHASE_ROLLED_BACK, NULL, &e));
	OK(state_booking_add(db, "u1", "node-1", "{\"cpu\":\"1\"}", T0 + 10 * MIN, &e));
	/* "Crash": the handle is closed with the intent still open. */
	state_close(db);

	clk_fake_advance(&c, 2 * MIN);
	OK(state_open(path, &c, NULL, &db, &e));
	OK(state_request_get(db, "u1", &r, &e));
	CU_ASSERT_EQUAL(r.attempts, 1);
	CU_ASSERT_EQUAL(r.first_seen_ns, T0);
	CU_ASSERT_EQUAL(r.next_attempt_ns, T0 + MIN);
	CU_ASSERT_STRING_EQUAL(r.last_outcome, "CapacityIsNotFound");
	state_request_clear(&r);
	OK(state_group_backed_off(db, "ng", &off, &until, &e));
	CU_ASSERT_TRUE(off);
	CU_ASSERT_EQUAL(until, T0 + 5 * MIN);
	OK(state_intent_list_open(db, &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(v[0].plan_id, "crashy");
	CU_ASSERT_EQUAL(v[0].phase, STATE_PHASE_INCREASING);
	CU_ASSERT_EQUAL(v[0].delta, 2);
	CU_ASSERT_EQUAL(v[0].target_before, 4);
	CU_ASSERT_EQUAL_FATAL(v[0].n_nodes, 1);
	CU_ASSERT_STRING_EQUAL(v[0].nodes[0], "ng-node-1");
	state_intent_list_free(v, n);
	OK(state_booking_list_active(db, &b, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(b[0].resources_json, "{\"cpu\":\"1\"}");
	state_booking_list_free(b, n);
	/* Recovery closes it; a third open sees nothing to recover. */
	OK(state_intent_advance(db, "crashy", STATE_PHASE_ROLLING_BACK, "restart", &e));
	OK(state_intent_close(db, "crashy", STATE_PHASE_ROLLED_BACK, NULL, &e));
	state_close(db);
	OK(state_open(path, &c, NULL, &db, &e));
	OK(state_intent_list_open(db, &v, &n, &e));
	CU_ASSERT_EQUAL(n, 0);
	state_close(db);
}

/* Schema version 1 exactly as src/state/schema.c shipped it. Kept here
 * verbatim so that editing a released migration breaks this test. */
static const char v1_schema[] =
	"CREATE TABLE request_state ("
	" uid             TEXT NOT NULL PRIMARY KEY,"
	" namespace       TEXT NOT NULL,"
	" name            TEXT NOT NULL,"
	" first_seen_ns   INTEGER NOT NULL,"
	" valid_until_ns  INTEGER,"
	" attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),"
	" next_attempt_ns INTEGER NOT NULL DEFAULT 0,"
	" last_outcome    TEXT NOT NULL DEFAULT ''"
	") WITHOUT ROWID;"
	"CREATE TABLE group_backoff ("
	" group_id        TEXT NOT NULL PRIMARY KEY,"
	" failures        INTEGER NOT NULL CHECK (failures > 0),"
	" duration_ns     INTEGER NOT NULL CHECK (duration_ns > 0),"
	" last_failure_ns INTEGER NOT NULL,"
	" until_ns        INTEGER NOT NULL"
	") WITHOUT ROWID;"
	"CREATE TABLE scaleup_intent ("
	" plan_id       TEXT NOT NULL PRIMARY KEY,"
	" request_uid   TEXT NOT NULL,"
	" node_group    TEXT NOT NULL,"
	" delta         INTEGER NOT NULL CHECK (delta > 0),"
	" target_before INTEGER NOT NULL CHECK (target_before >= 0),"
	" phase         TEXT NOT NULL CHECK (phase IN ('planned','increasing',"
	"                 'waiting-for-nodes','done','rolling-back','rolled-back')),"
	" deadline_ns   INTEGER NOT NULL,"
	" created_ns    INTEGER NOT NULL,"
	" updated_ns    INTEGER NOT NULL"
	");"
	"CREATE INDEX scaleup_intent_phase ON scaleup_intent(phase);"
	"CREATE TABLE booking ("
	" request_uid    TEXT NOT NULL,"
	" node_name      TEXT NOT NULL,"
	" resources_json TEXT NOT NULL,"
	" created_ns     INTEGER NOT NULL,"
	" expires_ns     INTEGER NOT NULL,"
	" PRIMARY KEY (request_uid, node_name)"
	") WITHOUT ROWID;";

static void test_migration_from_v1(void)
{
	const char *p = tpath("v1.db");
	char path[512];
	state_request r;
	state_group_backoff g;
	state_intent it, *v = NULL;
	state_booking *b = NULL;
	state_db *db = NULL;
	size_t n = 0;
	clk c;
	prd_err e;

	snprintf(path, sizeof(path), "%s", p);
	CU_ASSERT_EQUAL_FATAL(raw_exec(path, "PRAGMA journal_mode=WAL"), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(raw_exec(path, v1_schema), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(raw_exec(path,
		"PRAGMA user_version = 1;"
		"INSERT INTO request_state VALUES ('u-old','ns1','old-req',111,222,3,333,'CapacityIsNotFound');"
		"INSERT INTO request_state (uid, namespace, name, first_seen_ns) VALUES ('u-new','ns2','r',5);"
		"INSERT INTO group_backoff VALUES ('ng-a',2,600000000000,1000,600000001000);"
		"INSERT INTO scaleup_intent VALUES ('plan-v1','u-old','ng-a',3,1,'increasing',9000,100,200);"
		"INSERT INTO scaleup_intent VALUES ('plan-v1-done','u-old','ng-a',1,0,'done',9000,100,300);"
		"INSERT INTO booking VALUES ('u-old','node-1','{\"cpu\":\"2\"}',10,9223372036854775807);"),
		SQLITE_OK);
	CU_ASSERT_EQUAL(raw_int(path, "PRAGMA user_version"), 1);

	clk_fake_init(&c, T0);
	OK(state_open(path, &c, NULL, &db, &e));
	{
		int ver = 0;
		OK(state_schema_version(db, &ver, &e));
		CU_ASSERT_EQUAL(ver, STATE_SCHEMA_VERSION);
	}
	/* Every v1 row survived unchanged. */
	OK(state_request_get(db, "u-old", &r, &e));
	CU_ASSERT_STRING_EQUAL(r.ns, "ns1");
	CU_ASSERT_STRING_EQUAL(r.name, "old-req");
	CU_ASSERT_EQUAL(r.first_seen_ns, 111);
	CU_ASSERT_TRUE(r.has_valid_until);
	CU_ASSERT_EQUAL(r.valid_until_ns, 222);
	CU_ASSERT_EQUAL(r.attempts, 3);
	CU_ASSERT_EQUAL(r.next_attempt_ns, 333);
	CU_ASSERT_STRING_EQUAL(r.last_outcome, "CapacityIsNotFound");
	state_request_clear(&r);
	OK(state_request_get(db, "u-new", &r, &e));
	CU_ASSERT_FALSE(r.has_valid_until);
	CU_ASSERT_EQUAL(r.attempts, 0);
	state_request_clear(&r);
	OK(state_group_get(db, "ng-a", &g, &e));
	CU_ASSERT_EQUAL(g.failures, 2);
	CU_ASSERT_EQUAL(g.duration_ns, 10 * MIN);
	CU_ASSERT_EQUAL(g.until_ns, 600000001000LL);
	CU_ASSERT_STRING_EQUAL(g.last_error, "");
	state_group_clear(&g);
	OK(state_intent_list_open(db, &v, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(v[0].plan_id, "plan-v1");
	CU_ASSERT_EQUAL(v[0].phase, STATE_PHASE_INCREASING);
	CU_ASSERT_EQUAL(v[0].delta, 3);
	CU_ASSERT_EQUAL(v[0].target_before, 1);
	CU_ASSERT_EQUAL(v[0].deadline_ns, 9000);
	CU_ASSERT_EQUAL(v[0].created_ns, 100);
	CU_ASSERT_EQUAL(v[0].updated_ns, 200);
	CU_ASSERT_EQUAL(v[0].n_nodes, 0);
	CU_ASSERT_STRING_EQUAL(v[0].last_error, "");
	state_intent_list_free(v, n);
	OK(state_booking_list_request(db, "u-old", &b, &n, &e));
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(b[0].resources_json, "{\"cpu\":\"2\"}");
	CU_ASSERT_EQUAL(b[0].expires_ns, INT64_MAX);
	state_booking_list_free(b, n);

	/* The v2 schema is in place: node lists and error texts work on the
	 * migrated rows. */
	OK(state_intent_add_node(db, "plan-v1", "ng-a-xyz", &e));
	OK(state_intent_advance(db, "plan-v1", STATE_PHASE_ROLLING_BACK, "timed out", &e));
	OK(state_intent_get(db, "plan-v1", &it, &e));
	CU_ASSERT_EQUAL_FATAL(it.n_nodes, 1);
	CU_ASSERT_STRING_EQUAL(it.nodes[0], "ng-a-xyz");
	CU_ASSERT_STRING_EQUAL(it.last_error, "timed out");
	state_intent_clear(&it);
	OK(state_group_fail(db, "ng-a", "quota", NULL, &e));
	OK(state_group_get(db, "ng-a", &g, &e));
	CU_ASSERT_STRING_EQUAL(g.last_error, "quota");
	state_group_clear(&g);
	state_close(db);
	CU_ASSERT_EQUAL(raw_int(path, "PRAGMA user_version"), STATE_SCHEMA_VERSION);
	/* v3: the instance snapshot column exists, empty for old intents. */
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM scaleup_intent WHERE known_before = ''"),
			raw_int(path, "SELECT count(*) FROM scaleup_intent"));
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name='booking_expires'"), 1);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name='scaleup_intent_node'"), 1);
}

static void test_newer_schema_refused(void)
{
	const char *p = tpath("future.db");
	char path[512];
	state_db *db = (state_db *)&path;
	clk c;
	prd_err e;

	snprintf(path, sizeof(path), "%s", p);
	clk_fake_init(&c, T0);
	CU_ASSERT_EQUAL_FATAL(raw_exec(path, "CREATE TABLE from_the_future (x); PRAGMA user_version = 6"),
	                      SQLITE_OK);
	FAILS(PRD_EUNSUPPORTED, state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_PTR_NULL(db);
	CONTAINS(e.msg, path);
	CONTAINS(e.msg, "newer");
	CONTAINS(e.msg, "6");
	/* The file was left alone. */
	CU_ASSERT_EQUAL(raw_int(path, "PRAGMA user_version"), 6);
	CU_ASSERT_EQUAL(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name='booking'"), 0);
}

static void test_foreign_db_refused(void)
{
	const char *p = tpath("foreign.db");
	char path[512];
	state_db *db = NULL;
	clk c;
	prd_err e;

	snprintf(path, sizeof(path), "%s", p);
	clk_fake_init(&c, T0);
	CU_ASSERT_EQUAL_FATAL(raw_exec(path, "CREATE TABLE somebody_elses (x)"), SQLITE_OK);
	FAILS(PRD_EINVAL, state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_PTR_NULL(db);
	CONTAINS(e.msg, "not a provreqd state database");
}

static void test_corrupt_file(void)
{
	const char *p = tpath("garbage.db");
	char path[512];
	unsigned char junk[8192];
	state_db *db = NULL;
	size_t i;
	clk c;
	prd_err e;

	clk_fake_init(&c, T0);
	for(i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 131 + 7);
	snprintf(path, sizeof(path), "%s", p);
	CU_ASSERT_EQUAL_FATAL(write_bytes(path, junk, sizeof(junk), 0, O_TRUNC), 0);
	FAILS(PRD_ECORRUPT, state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_PTR_NULL(db);
	CONTAINS(e.msg, path);
	CONTAINS(e.msg, "not a database");

	/* A real database with one damaged page fails the integrity check. */
	snprintf(path, sizeof(path), "%s", tpath("damaged.db"));
	OK(state_open(path, &c, NULL, &db, &e));
	for(i = 0; i < 50; i++) {
		char uid[32];
		snprintf(uid, sizeof(uid), "uid-%03zu", i);
		OK(state_request_ensure(db, uid, "some-namespace", "some-request-name", NULL, &e));
	}
	state_close(db);
	db = NULL;
	CU_ASSERT_EQUAL_FATAL(write_bytes(path, junk, 4096, 4096, 0), 0);
	FAILS(PRD_ECORRUPT, state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_PTR_NULL(db);
	CONTAINS(e.msg, path);
}

static void test_unwritable_location(void)
{
	char path[512];
	state_db *db = NULL;
	clk c;
	prd_err e;

	clk_fake_init(&c, T0);
	snprintf(path, sizeof(path), "%s/no/such/dir/state.db", test_tmpdir());
	FAILS(PRD_EIO, state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_PTR_NULL(db);
	CONTAINS(e.msg, path);
	CONTAINS(e.msg, "directory");

	/* A parent that is a file, not a directory. */
	snprintf(path, sizeof(path), "%s", tpath("plainfile"));
	CU_ASSERT_EQUAL_FATAL(write_bytes(path, "x", 1, 0, O_TRUNC), 0);
	snprintf(path, sizeof(path), "%s/plainfile/state.db", test_tmpdir());
	FAILS(PRD_EIO, state_open(path, &c, NULL, &db, &e));
	CONTAINS(e.msg, path);

	/* The path is a directory. */
	FAILS(PRD_EIO, state_open(test_tmpdir(), &c, NULL, &db, &e));
	CONTAINS(e.msg, test_tmpdir());
	CU_ASSERT_PTR_NULL(db);

	/* Permission checks only bite when not running as root. */
	if(geteuid() != 0) {
		snprintf(path, sizeof(path), "%s", tpath("ro"));
		CU_ASSERT_EQUAL_FATAL(mkdir(path, 0500), 0);
		snprintf(path, sizeof(path), "%s/ro/state.db", test_tmpdir());
		FAILS(PRD_EPERM, state_open(path, &c, NULL, &db, &e));
		CONTAINS(e.msg, path);
		snprintf(path, sizeof(path), "%s", tpath("ro"));
		CU_ASSERT_EQUAL(chmod(path, 0700), 0);
	}
}

static void test_sqlite_errors_reported(void)
{
	const char *p = tpath("errors.db");
	char path[512];
	state_config cfg;
	sqlite3 *h = NULL;
	state_db *db = NULL;
	clk c;
	prd_err e;

	snprintf(path, sizeof(path), "%s", p);
	clk_fake_init(&c, T0);
	state_config_default(&cfg);
	cfg.busy_timeout_ms = 0;
	OK(state_open(path, &c, &cfg, &db, &e));
	OK(state_request_ensure(db, "u", "ns", "n", NULL, &e));

	/* Another process holds the write lock: a clear "locked" error. */
	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	FAILS(PRD_EAGAIN, state_request_bump(db, "u", "x", NULL, &e));
	CONTAINS(e.msg, path);
	CONTAINS(e.msg, "locked");
	CU_ASSERT_EQUAL(sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	/* The failed attempt left nothing behind; the next one works. */
	OK(state_request_bump(db, "u", "x", NULL, &e));

	/* A table dropped behind our back: SQLite's own text comes through. */
	CU_ASSERT_EQUAL(sqlite3_exec(h, "DROP TABLE booking", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	FAILS(PRD_EIO, state_booking_add(db, "u", "n", "{}", T0, &e));
	CONTAINS(e.msg, "no such table: booking");
	CONTAINS(e.msg, path);
	state_close(db);
}

/* provreqd_state_store_errors_total counts each failure once, by op. */
static void test_errors_counted(void)
{
	char path[512];
	state_config cfg;
	sqlite3 *h = NULL;
	state_db *db = NULL;
	double v = -1;
	clk c;
	prd_err e;

	snprintf(path, sizeof(path), "%s", tpath("counted.db"));
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	clk_fake_init(&c, T0);
	state_config_default(&cfg);
	cfg.busy_timeout_ms = 0;
	OK(state_open(path, &c, &cfg, &db, &e));
	OK(state_request_ensure(db, "u", "ns", "n", NULL, &e));
	CU_ASSERT_FALSE(metrics_get(M_STATE_ERRORS, METRICS_L("transaction"), &v));

	CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &h), SQLITE_OK);
	CU_ASSERT_EQUAL_FATAL(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	FAILS(PRD_EAGAIN, state_request_bump(db, "u", "x", NULL, &e));
	FAILS(PRD_EAGAIN, state_request_bump(db, "u", "x", NULL, &e));
	CU_ASSERT_TRUE(metrics_get(M_STATE_ERRORS, METRICS_L("transaction"), &v));
	CU_ASSERT_DOUBLE_EQUAL(v, 2, 1e-9);
	CU_ASSERT_EQUAL(sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	OK(state_request_bump(db, "u", "x", NULL, &e));
	CU_ASSERT_TRUE(metrics_get(M_STATE_ERRORS, METRICS_L("transaction"), &v));
	CU_ASSERT_DOUBLE_EQUAL(v, 2, 1e-9);

	CU_ASSERT_EQUAL(sqlite3_exec(h, "DROP TABLE booking", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	FAILS(PRD_EIO, state_booking_add(db, "u", "n", "{}", T0, &e));
	CU_ASSERT_TRUE(metrics_get(M_STATE_ERRORS, METRICS_L("write"), &v));
	CU_ASSERT_DOUBLE_EQUAL(v, 1, 1e-9);
	state_close(db);

	/* Not a database at all: counted as an open failure. */
	{
		unsigned char junk[4096];
		size_t i;
		for(i = 0; i < sizeof(junk); i++)
			junk[i] = (unsigned char)(i * 131 + 7);
		snprintf(path, sizeof(path), "%s", tpath("counted-junk.db"));
		CU_ASSERT_EQUAL_FATAL(write_bytes(path, junk, sizeof(junk), 0, O_TRUNC), 0);
	}
	db = NULL;
	FAILS(PRD_ECORRUPT, state_open(path, &c, NULL, &db, &e));
	CU_ASSERT_TRUE(metrics_get(M_STATE_ERRORS, METRICS_L("open"), &v));
	CU_ASSERT_DOUBLE_EQUAL(v, 1, 1e-9);
	metrics_shutdown();
}

static const test_case cases[] = {
	{ "config", test_config },
	{ "open_memory", test_open_memory },
	{ "file_mode_and_wal", test_file_mode_and_wal },
	{ "request_roundtrip", test_request_roundtrip },
	{ "backoff_delay", test_backoff_delay },
	{ "request_bump", test_request_bump },
	{ "group_backoff", test_group_backoff },
	{ "group_list_and_config", test_group_list_and_config },
	{ "phase_table", test_phase_table },
	{ "intent_lifecycle", test_intent_lifecycle },
	{ "intent_illegal_transitions", test_intent_illegal_transitions },
	{ "intent_prune", test_intent_prune },
	{ "intent_version", test_intent_version },
	{ "bookings", test_bookings },
	{ "auto-provisioned group records", test_nap_records },
	{ "survives_reopen", test_survives_reopen },
	{ "migration_from_v1", test_migration_from_v1 },
	{ "newer_schema_refused", test_newer_schema_refused },
	{ "foreign_db_refused", test_foreign_db_refused },
	{ "corrupt_file", test_corrupt_file },
	{ "unwritable_location", test_unwritable_location },
	{ "sqlite_errors_reported", test_sqlite_errors_reported },
	{ "errors_counted", test_errors_counted },
	{ NULL, NULL },
};

TEST_MAIN("state", cases)

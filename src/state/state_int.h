/* Internals shared by the state store's source files: the connection
 * struct, the prepared-statement cache, transactions, error mapping and
 * column helpers. Not for use outside src/state/. */
#ifndef PRD_STATE_STATE_INT_H
#define PRD_STATE_STATE_INT_H

#include <sqlite3.h>

#include "state/state.h"

/* Upper bound on distinct cached statements; raising it costs nothing but
 * a few pointers per connection. */
#define STATE__CACHE_MAX 64

typedef struct state__cached {
	const char *sql;        /* identity is the pointer to a static string */
	sqlite3_stmt *stmt;
} state__cached;

struct state_db {
	sqlite3 *sql;
	const clk *clock;
	state_config cfg;
	char *path;             /* for messages */
	state__cached cache[STATE__CACHE_MAX];
	size_t n_cache;
	uint64_t intent_version; /* state_intent_version */
	int64_t data_version;    /* SQLite's, as last seen by it */
};

/* An intent write is about to be tried: lists kept by callers are stale. */
static inline void state__intents_touched(state_db *db) { db->intent_version++; }

/* One migration step: the SQL that takes the schema from version - 1 to
 * version. */
typedef struct state__migration {
	int version;
	const char *sql;
} state__migration;

/* The ordered migration list (schema.c). */
extern const state__migration state__migrations[];
extern const size_t state__n_migrations;

static inline int64_t state__now(const state_db *db) { return clk_wall(db->clock); }

/* a + b for a time and a non-negative duration, saturating at INT64_MAX. */
int64_t state__add_sat(int64_t a, int64_t b);

/* Map an SQLite result code to a PRD_E* code and fill `err` with
 * "state database PATH: WHAT: sqlite message". Returns the PRD code. */
int state__sqlerr(state_db *db, prd_err *err, int src, const char *what);

/* The cached prepared statement for the static string `sql`, reset and
 * with bindings cleared. The statement stays owned by the cache; release
 * it with state__release when done so its read lock is dropped. */
int state__prep(state_db *db, const char *sql, sqlite3_stmt **out, prd_err *err);
void state__release(sqlite3_stmt *st);

/* Step a prepared statement (rc: the result of preparing and binding it)
 * and collect every row into a growing array of `size`-byte elements.
 * read() fills one zeroed element, returning 0 or a code with err set and
 * the element left cleared; clear() releases one element. On success
 * *out is the array (NULL when empty; free each element with clear(), then
 * the array) and *n its length; on failure nothing is handed out. The
 * statement is released in every case. `what` names the query in errors. */
int state__collect(state_db *db, sqlite3_stmt *st, int rc, size_t size,
		   int (*read)(state_db *db, sqlite3_stmt *st, void *row, prd_err *err),
		   void (*clear)(void *row), const char *what, void **out, size_t *n, prd_err *err);

/* BEGIN IMMEDIATE (writers) or BEGIN (readers wanting one snapshot) /
 * COMMIT / ROLLBACK. Transactions do not nest. state__rollback is safe to
 * call when no transaction is open and never fails (a failed rollback
 * leaves SQLite to roll back on close). */
int state__begin(state_db *db, prd_err *err);
int state__begin_read(state_db *db, prd_err *err);
int state__commit(state_db *db, prd_err *err);
void state__rollback(state_db *db);

/* Bind helpers that turn a bind failure into a PRD code with a message. */
int state__bind_text(state_db *db, sqlite3_stmt *st, int i, const char *s, prd_err *err);
int state__bind_i64(state_db *db, sqlite3_stmt *st, int i, int64_t v, prd_err *err);

/* Step a statement expected to finish without rows (SQLITE_DONE). */
int state__step_done(state_db *db, sqlite3_stmt *st, const char *what, prd_err *err);

/* Copy text column i into a fresh string (caller frees with free());
 * SQL NULL gives "". PRD_ENOMEM on allocation failure. */
int state__col_text(sqlite3_stmt *st, int i, char **out);

/* Reject NULL or empty required string arguments with a message. */
int state__need(const char *s, const char *what, prd_err *err);

#endif

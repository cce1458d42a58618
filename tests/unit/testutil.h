/* Shared CUnit scaffolding: every test program is one process with a
 * timeout, registers its cases in a table and returns an automake exit code
 * (0 pass, 1 fail, 99 hard error). */
#ifndef PRD_TESTUTIL_H
#define PRD_TESTUTIL_H

#include <CUnit/CUnit.h>

typedef struct test_case {
	const char *name;
	void (*fn)(void);
} test_case;

/* Run one suite of cases; returns the process exit code. The process is
 * killed by SIGALRM after `PRD_TEST_TIMEOUT` seconds (default 300). With
 * `PRD_TEST_ONLY` set, only the cases whose name contains it run. */
int test_run(const char *suite, const test_case *cases);

/* Path of a file under the source tree's tests/ directory (static buffer). */
const char *test_srcpath(const char *rel);
/* A fresh empty temporary directory (static buffer), removed at exit. */
const char *test_tmpdir(void);

#define TEST_MAIN(suite, table) \
	int main(void) { return test_run(suite, table); }

#endif

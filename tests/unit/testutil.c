#include "testutil.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

static void rm_tmpdir(void)
{
	char cmd[300];
	if(tmpdir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if(system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmpdir);
	}
}

const char *test_tmpdir(void)
{
	if(!tmpdir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(tmpdir, sizeof(tmpdir), "%s/prdtest.XXXXXX", base ? base : "/tmp");
		if(!mkdtemp(tmpdir)) {
			perror("mkdtemp");
			exit(99);
		}
		atexit(rm_tmpdir);
	}
	return tmpdir;
}

const char *test_srcpath(const char *rel)
{
	static char path[1024];
	const char *srcdir = getenv("srcdir");
	snprintf(path, sizeof(path), "%s/tests/%s", srcdir ? srcdir : ".", rel);
	return path;
}

int test_run(const char *suite_name, const test_case *cases)
{
	CU_pSuite suite;
	const char *to = getenv("PRD_TEST_TIMEOUT"), *only = getenv("PRD_TEST_ONLY");
	unsigned failed, run;
	int i;

	alarm(to ? (unsigned)atoi(to) : 300);
	if(CU_initialize_registry() != CUE_SUCCESS)
		return 99;
	suite = CU_add_suite(suite_name, NULL, NULL);
	if(!suite)
		goto hard;
	for(i = 0; cases[i].name; i++)
		if((!only || !only[0] || strstr(cases[i].name, only)) && !CU_add_test(suite, cases[i].name, cases[i].fn))
			goto hard;
	CU_basic_set_mode(CU_BRM_VERBOSE);
	if(CU_basic_run_tests() != CUE_SUCCESS)
		goto hard;
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	run = CU_get_number_of_asserts();
	/* One machine-readable line per program; tests/summary.sh adds them up. */
	printf("PRD-ASSERTS: %u run, %u failed\n", run, CU_get_number_of_failures());
	CU_cleanup_registry();
	return failed ? 1 : 0;
hard:
	fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
	CU_cleanup_registry();
	return 99;
}

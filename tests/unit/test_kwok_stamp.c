/* The kwok driver's template directory stamp (kwok_templates_stamp),
 * built into this program from the driver's sources so that the time it
 * compares file times with can be given: no wall clock, and no waiting for
 * file times to age. The times given are derived from the directory's own
 * change time. */
#include "testutil.h"
#include "kwok/kwok_config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NS 1000000000LL

static char dir[1024];

static void put_file(const char *name)
{
	char path[1200];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n", name);
	fclose(f);
}

/* Set the directory's modification time back by `back` seconds (its
 * change time becomes now) and return that change time plus `after` s. */
static int64_t age_dir(int back, int after)
{
	struct stat st;
	struct timespec t[2];
	CU_ASSERT_EQUAL_FATAL(stat(dir, &st), 0);
	t[0].tv_sec = 0;
	t[0].tv_nsec = UTIME_OMIT;
	t[1] = st.st_mtim;
	t[1].tv_sec -= back;
	CU_ASSERT_EQUAL_FATAL(utimensat(AT_FDCWD, dir, t, 0), 0);
	CU_ASSERT_EQUAL_FATAL(stat(dir, &st), 0);
	return (int64_t)st.st_ctim.tv_sec * NS + st.st_ctim.tv_nsec + (int64_t)after * NS;
}

/* The file names are read again exactly when the directory changed: the
 * same names array is kept while it did not, and a file added or removed
 * shows in the next stamp even though each file's own times would not
 * tell (catches a driver that keeps the names whatever the directory
 * says). */
static void test_names_follow_the_directory(void)
{
	kwok k;
	uint64_t s1, s2, s3;
	bool trust;
	char **names;
	char path[1200];
	int64_t now;
	memset(&k, 0, sizeof(k));
	snprintf(dir, sizeof(dir), "%s/tpl", test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
	k.template_dir = dir;
	put_file("a.yaml");
	put_file(".hidden.yaml");
	put_file("notes.txt");
	now = age_dir(100, 10);
	CU_ASSERT_EQUAL_FATAL(kwok_templates_stamp(&k, now, &s1, &trust), 0);
	CU_ASSERT(trust);
	CU_ASSERT_EQUAL_FATAL(k.tmpl_names.n, 1);
	CU_ASSERT_STRING_EQUAL(k.tmpl_names.names[0], "a.yaml");
	CU_ASSERT(k.tmpl_names.ok);
	names = k.tmpl_names.names;
	CU_ASSERT_EQUAL(kwok_templates_stamp(&k, now, &s2, &trust), 0);
	CU_ASSERT_EQUAL(s2, s1);
	CU_ASSERT(k.tmpl_names.names == names); /* not read again */
	/* Added: the directory's times moved. */
	put_file("b.yml");
	now = age_dir(0, 10);
	CU_ASSERT_EQUAL_FATAL(kwok_templates_stamp(&k, now, &s2, &trust), 0);
	CU_ASSERT_NOT_EQUAL(s2, s1);
	CU_ASSERT_EQUAL_FATAL(k.tmpl_names.n, 2);
	CU_ASSERT_STRING_EQUAL(k.tmpl_names.names[1], "b.yml");
	/* Removed. */
	snprintf(path, sizeof(path), "%s/a.yaml", dir);
	CU_ASSERT_EQUAL_FATAL(unlink(path), 0);
	now = age_dir(0, 10);
	CU_ASSERT_EQUAL_FATAL(kwok_templates_stamp(&k, now, &s3, &trust), 0);
	CU_ASSERT_NOT_EQUAL(s3, s2);
	CU_ASSERT_EQUAL_FATAL(k.tmpl_names.n, 1);
	CU_ASSERT_STRING_EQUAL(k.tmpl_names.names[0], "b.yml");
	kwok_dir_names_free(&k.tmpl_names);
}

/* A directory changed less than 2 s before the stamp is listed again at
 * the next one: another entry may arrive within the same timestamp tick
 * and leave its times as they are. Catches a driver that relies on a
 * directory's times at once. */
static void test_fresh_directory_is_not_relied_on(void)
{
	kwok k;
	uint64_t s;
	bool trust;
	int64_t now;
	memset(&k, 0, sizeof(k));
	snprintf(dir, sizeof(dir), "%s/fresh", test_tmpdir());
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
	k.template_dir = dir;
	put_file("a.yaml");
	now = age_dir(100, 1);
	CU_ASSERT_EQUAL_FATAL(kwok_templates_stamp(&k, now, &s, &trust), 0);
	CU_ASSERT(!k.tmpl_names.ok);
	CU_ASSERT(!trust);
	now += 2 * NS;
	CU_ASSERT_EQUAL_FATAL(kwok_templates_stamp(&k, now, &s, &trust), 0);
	CU_ASSERT(k.tmpl_names.ok);
	CU_ASSERT(trust);
	kwok_dir_names_free(&k.tmpl_names);
	/* A directory that cannot be read has no stamp. */
	k.template_dir = "/nonexistent/provreqd-templates";
	CU_ASSERT_EQUAL(kwok_templates_stamp(&k, now, &s, &trust), -1);
	CU_ASSERT_EQUAL(k.tmpl_names.n, 0);
}

static const test_case cases[] = {
	{"the file names follow the directory", test_names_follow_the_directory},
	{"a fresh directory is listed again", test_fresh_directory_is_not_relied_on},
	{NULL, NULL}};

TEST_MAIN("kwok template stamp", cases)

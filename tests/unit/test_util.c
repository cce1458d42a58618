/* Unit tests of src/util: buffers, strings, the hash map, clocks, RFC 3339
 * times, errors and PRD_ASSERT. */
#include "testutil.h"
#include "util/assert.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/hmap.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_buf_basic(void)
{
	buf b;
	int i;
	char *s;
	buf_init(&b);
	CU_ASSERT_STRING_EQUAL(buf_str(&b), "");
	CU_ASSERT_EQUAL(buf_append_str(&b, "hello"), 0);
	CU_ASSERT_EQUAL(buf_append_char(&b, ' '), 0);
	CU_ASSERT_EQUAL(buf_printf(&b, "%s-%d", "world", 42), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&b), "hello world-42");
	CU_ASSERT_EQUAL(b.len, 14);
	for(i = 0; i < 1000; i++)
		buf_append(&b, "0123456789", 10);
	CU_ASSERT_EQUAL(b.len, 10014);
	CU_ASSERT_EQUAL(b.data[b.len], '\0');
	buf_consume(&b, 14);
	CU_ASSERT_EQUAL(b.len, 10000);
	CU_ASSERT_EQUAL(memcmp(b.data, "0123456789", 10), 0);
	s = buf_detach(&b);
	CU_ASSERT_EQUAL(strlen(s), 10000);
	CU_ASSERT_PTR_NULL(b.data);
	free(s);
	buf_free(&b);
}

static void test_buf_max_sticky(void)
{
	buf b;
	buf_init_max(&b, 8);
	CU_ASSERT_EQUAL(buf_append_str(&b, "12345678"), 0);
	CU_ASSERT_EQUAL(buf_append_str(&b, "9"), PRD_ERANGE);
	/* Failed buffers stay failed and hold no memory. */
	CU_ASSERT_PTR_NULL(b.data);
	CU_ASSERT_EQUAL(buf_append_str(&b, "x"), PRD_ERANGE);
	CU_ASSERT_PTR_NULL(buf_detach(&b));
	buf_free(&b);
}

static void test_str_closest(void)
{
	static const char *const flags[] = { "class", "template", "count", "context" };
	char longw[200];
	CU_ASSERT_EQUAL(str_edit_distance("", ""), 0);
	CU_ASSERT_EQUAL(str_edit_distance("kitten", "sitting"), 3);
	CU_ASSERT_EQUAL(str_edit_distance("check-capacity", "chek-capacity"), 1);
	CU_ASSERT_EQUAL(str_edit_distance("abc", ""), 3);
	CU_ASSERT_STRING_EQUAL(str_closest("clas", flags, 4), "class");
	CU_ASSERT_STRING_EQUAL(str_closest("contxt", flags, 4), "context");
	CU_ASSERT_STRING_EQUAL(str_closest("temp1ate", flags, 4), "template");
	/* too far from everything: no suggestion rather than a wild guess */
	CU_ASSERT_PTR_NULL(str_closest("image", flags, 4));
	CU_ASSERT_PTR_NULL(str_closest("x", flags, 0));
	memset(longw, 'a', sizeof(longw) - 1);
	longw[sizeof(longw) - 1] = '\0';
	CU_ASSERT_EQUAL(str_edit_distance(longw, "a"), (size_t)-1);
	CU_ASSERT_PTR_NULL(str_closest(longw, flags, 4));
}

static void test_str_helpers(void)
{
	char t[32] = "  padded \t\n";
	char small[4];
	char *p;
	CU_ASSERT_STRING_EQUAL(str_trim(t), "padded");
	CU_ASSERT_TRUE(str_starts_with("autoscaling.x-k8s.io", "autoscaling"));
	CU_ASSERT_FALSE(str_starts_with("auto", "autoscaling"));
	CU_ASSERT_TRUE(str_ends_with("NodeList", "List"));
	CU_ASSERT_FALSE(str_ends_with("List", "NodeList"));
	CU_ASSERT_TRUE(str_eq(NULL, NULL));
	CU_ASSERT_FALSE(str_eq("a", NULL));
	CU_ASSERT_FALSE(str_copy(small, sizeof(small), "abcdef"));
	CU_ASSERT_STRING_EQUAL(small, "abc");
	CU_ASSERT_TRUE(str_copy(small, sizeof(small), "ab"));
	p = str_printf("%s/%s", "ns", "name");
	CU_ASSERT_STRING_EQUAL(p, "ns/name");
	free(p);
	p = str_ndup("abcdef", 3);
	CU_ASSERT_STRING_EQUAL(p, "abc");
	free(p);
	CU_ASSERT_PTR_NULL(str_dup(NULL));
}

static void test_str_int64(void)
{
	int64_t v = 0;
	CU_ASSERT_EQUAL(str_to_int64("42", &v), 0);
	CU_ASSERT_EQUAL(v, 42);
	CU_ASSERT_EQUAL(str_to_int64("-9223372036854775808", &v), 0);
	CU_ASSERT_EQUAL(v, INT64_MIN);
	CU_ASSERT_EQUAL(str_to_int64("9223372036854775807", &v), 0);
	CU_ASSERT_EQUAL(v, INT64_MAX);
	CU_ASSERT_EQUAL(str_to_int64("9223372036854775808", &v), PRD_ERANGE);
	CU_ASSERT_EQUAL(str_to_int64("", &v), PRD_EINVAL);
	CU_ASSERT_EQUAL(str_to_int64("-", &v), PRD_EINVAL);
	CU_ASSERT_EQUAL(str_to_int64(" 1", &v), PRD_EINVAL);
	CU_ASSERT_EQUAL(str_to_int64("1x", &v), PRD_EINVAL);
	CU_ASSERT_EQUAL(str_to_int64(NULL, &v), PRD_EINVAL);
}

static void test_str_bool_dns(void)
{
	bool b = false;
	CU_ASSERT_EQUAL(str_to_bool("TRUE", &b), 0);
	CU_ASSERT_TRUE(b);
	CU_ASSERT_EQUAL(str_to_bool("false", &b), 0);
	CU_ASSERT_FALSE(b);
	CU_ASSERT_EQUAL(str_to_bool("yes", &b), PRD_EINVAL);
	CU_ASSERT_TRUE(str_is_dns_subdomain("check-capacity.autoscaling.x-k8s.io"));
	CU_ASSERT_FALSE(str_is_dns_subdomain("Upper.case"));
	CU_ASSERT_FALSE(str_is_dns_subdomain("a..b"));
	CU_ASSERT_FALSE(str_is_dns_subdomain("-a"));
	CU_ASSERT_FALSE(str_is_dns_subdomain(""));
	CU_ASSERT_TRUE(str_is_dns_label("pod-template-1"));
	CU_ASSERT_FALSE(str_is_dns_label("a.b"));
	CU_ASSERT_FALSE(str_is_dns_label("0123456789012345678901234567890123456789012345678901234567890123"));
}

static void test_str_duration(void)
{
	int64_t ns = 0;
	CU_ASSERT_EQUAL(str_parse_duration("10m", &ns), 0);
	CU_ASSERT_EQUAL(ns, 600 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(str_parse_duration("1h30m15s", &ns), 0);
	CU_ASSERT_EQUAL(ns, 5415 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(str_parse_duration("500ms", &ns), 0);
	CU_ASSERT_EQUAL(ns, 500 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(str_parse_duration("7d", &ns), 0);
	CU_ASSERT_EQUAL(ns, 7 * 86400 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(str_parse_duration("0", &ns), 0);
	CU_ASSERT_EQUAL(ns, 0);
	CU_ASSERT_EQUAL(str_parse_duration("10", &ns), PRD_EINVAL);
	CU_ASSERT_EQUAL(str_parse_duration("m", &ns), PRD_EINVAL);
	CU_ASSERT_EQUAL(str_parse_duration("5x", &ns), PRD_EINVAL);
	CU_ASSERT_EQUAL(str_parse_duration("", &ns), PRD_EINVAL);
	CU_ASSERT_EQUAL(str_parse_duration("99999999999999h", &ns), PRD_ERANGE);
}

static int free_count;
static void count_free(void *p)
{
	free_count++;
	free(p);
}

static void test_hmap(void)
{
	hmap m;
	hmap_iter it;
	const char *k;
	void *v;
	char key[32];
	int i, seen = 0;

	hmap_init(&m, count_free);
	for(i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "node-%d", i);
		CU_ASSERT_EQUAL_FATAL(hmap_put(&m, key, str_dup(key)), 0);
	}
	CU_ASSERT_EQUAL(hmap_len(&m), 5000);
	CU_ASSERT_STRING_EQUAL(hmap_get(&m, "node-4321"), "node-4321");
	CU_ASSERT_PTR_NULL(hmap_get(&m, "node-5000"));
	for(i = 0; i < 5000; i += 2) {
		snprintf(key, sizeof(key), "node-%d", i);
		CU_ASSERT_TRUE(hmap_del(&m, key));
	}
	CU_ASSERT_EQUAL(free_count, 2500);
	CU_ASSERT_EQUAL(hmap_len(&m), 2500);
	CU_ASSERT_FALSE(hmap_has(&m, "node-0"));
	CU_ASSERT_TRUE(hmap_has(&m, "node-1"));
	CU_ASSERT_FALSE(hmap_del(&m, "node-0"));
	/* Replacing destroys the old value. */
	CU_ASSERT_EQUAL(hmap_put(&m, "node-1", str_dup("replaced")), 0);
	CU_ASSERT_EQUAL(free_count, 2501);
	CU_ASSERT_STRING_EQUAL(hmap_get(&m, "node-1"), "replaced");
	v = hmap_take(&m, "node-3");
	CU_ASSERT_STRING_EQUAL(v, "node-3");
	free(v);
	CU_ASSERT_EQUAL(free_count, 2501);
	/* Re-adding after deletes reuses tombstoned space correctly. */
	for(i = 0; i < 5000; i += 2) {
		snprintf(key, sizeof(key), "node-%d", i);
		CU_ASSERT_EQUAL_FATAL(hmap_put(&m, key, str_dup(key)), 0);
	}
	CU_ASSERT_EQUAL(hmap_len(&m), 4999);
	hmap_iter_init(&it, &m);
	while(hmap_iter_next(&it, &k, &v)) {
		CU_ASSERT_PTR_NOT_NULL(v);
		seen++;
	}
	CU_ASSERT_EQUAL(seen, 4999);
	hmap_free(&m);
	CU_ASSERT_EQUAL(free_count, 2501 + 4999);
}

static void test_clock_fake(void)
{
	clk c;
	const clk *r = clk_real();
	clk_fake_init(&c, 1000 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(clk_wall(&c), 1000 * PRD_NS_PER_SEC);
	clk_fake_advance(&c, 5 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(clk_wall(&c), 1005 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(clk_mono(&c), 5 * PRD_NS_PER_SEC);
	clk_fake_set(&c, 1010 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(clk_mono(&c), 10 * PRD_NS_PER_SEC);
	/* Setting wall time backwards never moves the monotonic clock back. */
	clk_fake_set(&c, 900 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(clk_mono(&c), 10 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(clk_wall(r) > 1600000000LL * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(clk_mono(r) <= clk_mono(r));
	/* Sleeping on a fake clock moves it by exactly the time asked for
	 * and returns at once; nothing for a wait of zero or less. */
	clk_sleep(&c, 250 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(clk_wall(&c), 900 * PRD_NS_PER_SEC + 250 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(clk_mono(&c), 10 * PRD_NS_PER_SEC + 250 * PRD_NS_PER_MS);
	clk_sleep(&c, 0);
	clk_sleep(&c, -5);
	CU_ASSERT_EQUAL(clk_mono(&c), 10 * PRD_NS_PER_SEC + 250 * PRD_NS_PER_MS);
	/* The real clock really waits: never less than asked (a lower bound
	 * only, so a busy machine cannot make this fail). */
	{
		int64_t t0 = clk_mono(r);
		clk_sleep(r, 2 * PRD_NS_PER_MS);
		CU_ASSERT_TRUE(clk_mono(r) - t0 >= 2 * PRD_NS_PER_MS);
	}
}

struct ts_case {
	const char *in;
	int64_t sec;
	int64_t nsec;
};

static void test_rfc3339_parse(void)
{
	static const struct ts_case ok[] = {
		{ "1970-01-01T00:00:00Z", 0, 0 },
		{ "2024-05-01T10:00:00Z", 1714557600, 0 },
		{ "2024-05-01t10:00:00z", 1714557600, 0 },
		{ "2024-05-01T10:00:00.5Z", 1714557600, 500000000 },
		{ "2024-05-01T10:00:00.123456Z", 1714557600, 123456000 },
		{ "2024-05-01T10:00:00.123456789123Z", 1714557600, 123456789 },
		{ "2024-05-01T12:00:00+02:00", 1714557600, 0 },
		{ "2024-05-01T05:30:00-04:30", 1714557600, 0 },
		{ "2024-02-29T00:00:00Z", 1709164800, 0 },
		{ "2000-02-29T23:59:59Z", 951868799, 0 },
		{ "1969-12-31T23:59:59Z", -1, 0 },
		{ "2100-12-31T00:00:00Z", 4133894400, 0 },
	};
	static const char *const bad[] = {
		"", "2024-05-01", "2024-05-01T10:00:00", "2024-05-01 10:00:00Z",
		"2024-13-01T10:00:00Z", "2024-02-30T10:00:00Z", "2023-02-29T00:00:00Z",
		"2024-05-01T24:00:00Z", "2024-05-01T10:60:00Z", "2024-05-01T10:00:60Z",
		"2024-05-01T10:00:00.Z", "2024-05-01T10:00:00ZZ", "2024-05-01T10:00:00+0200",
		"2024-05-01T10:00:00+25:00", "abcd-ef-ghTij:kl:mnZ", "2024-05-01T10:00:00 Z",
	};
	size_t i;
	prd_err e;
	for(i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int64_t ns = -42;
		int rc = rfc3339_parse(ok[i].in, &ns, &e);
		CU_ASSERT_EQUAL(rc, 0);
		CU_ASSERT_EQUAL(ns, ok[i].sec * PRD_NS_PER_SEC + ok[i].nsec);
		if(rc || ns != ok[i].sec * PRD_NS_PER_SEC + ok[i].nsec)
			fprintf(stderr, "rfc3339 case %s failed\n", ok[i].in);
	}
	for(i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t ns;
		prd_err_clear(&e);
		CU_ASSERT_EQUAL(rfc3339_parse(bad[i], &ns, &e), PRD_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "invalid RFC 3339"));
	}
	CU_ASSERT_EQUAL(rfc3339_parse(NULL, &(int64_t){ 0 }, NULL), PRD_EINVAL);
	/* Outside what nanoseconds in an int64 hold: an error, not an
	 * overflow (found by the text-decoder tests under UBSan). */
	{
		static const char *const far[] = { "0001-01-01T00:00:00Z", "1677-01-01T00:00:00Z", "2263-01-01T00:00:00Z",
						   "9999-12-31T23:59:59Z" };
		int64_t ns;
		for(i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
			prd_err_clear(&e);
			CU_ASSERT_EQUAL(rfc3339_parse(far[i], &ns, &e), PRD_EINVAL);
			CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "out of range"));
		}
		CU_ASSERT_EQUAL(rfc3339_parse("1678-01-01T00:00:00Z", &ns, &e), 0);
		CU_ASSERT_EQUAL(rfc3339_parse("2261-12-31T23:59:59Z", &ns, &e), 0);
	}
}

static void test_rfc3339_format(void)
{
	char out[RFC3339_MAX];
	int64_t back;
	CU_ASSERT_EQUAL(rfc3339_format(1714557600LL * PRD_NS_PER_SEC + 999999999, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "2024-05-01T10:00:00Z");
	CU_ASSERT_EQUAL(rfc3339_format_micro(1714557600LL * PRD_NS_PER_SEC + 123456789, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "2024-05-01T10:00:00.123456Z");
	CU_ASSERT_EQUAL(rfc3339_format(-1 * PRD_NS_PER_SEC, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "1969-12-31T23:59:59Z");
	CU_ASSERT_EQUAL(rfc3339_format(951868799LL * PRD_NS_PER_SEC, out, sizeof(out)), 0);
	CU_ASSERT_STRING_EQUAL(out, "2000-02-29T23:59:59Z");
	CU_ASSERT_EQUAL(rfc3339_format(0, out, 10), PRD_ERANGE);
	/* Round trip through every day of four years, leap day included. */
	{
		int64_t t;
		int bad = 0;
		for(t = 1704067200LL; t < 1704067200LL + 4 * 366 * 86400LL; t += 86400 + 3661) {
			rfc3339_format(t * PRD_NS_PER_SEC, out, sizeof(out));
			if(rfc3339_parse(out, &back, NULL) || back != t * PRD_NS_PER_SEC)
				bad++;
		}
		CU_ASSERT_EQUAL(bad, 0);
	}
}

static void test_err(void)
{
	prd_err e;
	CU_ASSERT_EQUAL(prd_err_set(&e, PRD_ENOTFOUND, "node %s", "n1"), PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(e.code, PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(prd_err_prefix(&e, "loading %s", "cluster.yaml"), PRD_ENOTFOUND);
	CU_ASSERT_STRING_EQUAL(e.msg, "loading cluster.yaml: node n1");
	CU_ASSERT_EQUAL(prd_err_set(NULL, PRD_EIO, "ignored"), PRD_EIO);
	CU_ASSERT_STRING_EQUAL(prd_strerror(PRD_ECONFLICT), "ECONFLICT");
	CU_ASSERT_STRING_EQUAL(prd_strerror(-999), "EUNKNOWN");
}

/* PRD_ASSERT: a false invariant aborts with file:line and the expression
 * in a checking build (this one, when configured with sanitizers), and is
 * not evaluated in a release build. */
static int assert_calls;
static int assert_arg(int v)
{
	assert_calls++;
	return v;
}

static void test_prd_assert(void)
{
	int fds[2], status = 0;
	char out[512] = "";
	ssize_t n;
	pid_t pid;
	PRD_ASSERT(assert_arg(1) == 1);
	CU_ASSERT_EQUAL(assert_calls, PRD_ASSERTS_ON ? 1 : 0);
	if(!PRD_ASSERTS_ON)
		return;
	CU_ASSERT_FATAL(pipe(fds) == 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if(pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		/* The child's abort is the point: keep ASan's and the core's
		 * reports out of the way. */
		signal(SIGABRT, SIG_DFL);
		PRD_ASSERT(assert_arg(2) == 3);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], out, sizeof(out) - 1);
	out[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	CU_ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "test_util.c:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "assertion failed: assert_arg(2) == 3"));
}

static const test_case cases[] = {
	{ "buf basic", test_buf_basic },
	{ "buf max and sticky failure", test_buf_max_sticky },
	{ "string helpers", test_str_helpers },
	{ "edit distance and did-you-mean", test_str_closest },
	{ "str_to_int64", test_str_int64 },
	{ "bool and DNS names", test_str_bool_dns },
	{ "durations", test_str_duration },
	{ "hash map", test_hmap },
	{ "fake clock", test_clock_fake },
	{ "rfc3339 parse", test_rfc3339_parse },
	{ "rfc3339 format", test_rfc3339_format },
	{ "error messages", test_err },
	{ "PRD_ASSERT", test_prd_assert },
	{ NULL, NULL }
};

TEST_MAIN("util", cases)

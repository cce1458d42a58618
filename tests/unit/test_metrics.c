/* Metrics registry: exposition format golden checks, escaping, histogram
 * buckets, misuse that must not crash, and concurrent updates. */
#include "testutil.h"
#include <config.h>
#include "ops/log.h"
#include "ops/metrics.h"
#include "ops/procstat.h"

#include <sys/stat.h>
#include <unistd.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Render the registry and return the lines of families whose name starts
 * with `prefix` (HELP/TYPE included). Caller frees. */
static char *render_prefix(const char *prefix)
{
	buf all, out;
	const char *p;
	buf_init(&all);
	buf_init(&out);
	CU_ASSERT_EQUAL_FATAL(metrics_render(&all), 0);
	for(p = buf_str(&all); *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);
		const char *name = p;
		if(strncmp(p, "# HELP ", 7) == 0 || strncmp(p, "# TYPE ", 7) == 0)
			name = p + 7;
		if(strncmp(name, prefix, strlen(prefix)) == 0)
			buf_append(&out, p, n);
		p += n;
	}
	buf_free(&all);
	return buf_detach(&out);
}

static int reg(const char *name, const char *help, enum metrics_type t, const char *const *labels,
	       const double *bk, size_t nb)
{
	metrics_desc d = { name, help, t, labels, bk, nb };
	prd_err e;
	int id = -1;
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), 0);
	return id;
}

static void test_counter_golden(void)
{
	int id;
	char *s;
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	id = reg("t_requests_total", "Requests served.", METRICS_COUNTER, METRICS_L("code", "path"), NULL, 0);
	metrics_counter_add(id, METRICS_L("200", "/b"), 1);
	metrics_counter_add(id, METRICS_L("200", "/a"), 2);
	metrics_counter_add(id, METRICS_L("200", "/a"), 0.5);
	metrics_counter_add(id, METRICS_L("500", "/a"), 1e21);
	s = render_prefix("t_requests_total");
	CU_ASSERT_STRING_EQUAL(s,
			       "# HELP t_requests_total Requests served.\n"
			       "# TYPE t_requests_total counter\n"
			       "t_requests_total{code=\"200\",path=\"/a\"} 2.5\n"
			       "t_requests_total{code=\"200\",path=\"/b\"} 1\n"
			       "t_requests_total{code=\"500\",path=\"/a\"} 1e+21\n");
	free(s);
	metrics_shutdown();
}

static void test_gauge_and_escaping(void)
{
	int id;
	char *s;
	double v;
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	id = reg("t_temp", "Help with \\ backslash\nand newline \"quoted\".", METRICS_GAUGE, METRICS_L("v"), NULL, 0);
	metrics_gauge_set(id, METRICS_L("a\\b\"c\nd"), 3);
	metrics_gauge_add(id, METRICS_L("a\\b\"c\nd"), -4.25);
	metrics_gauge_set(id, METRICS_L("inf"), INFINITY);
	metrics_gauge_set(id, METRICS_L("ninf"), -INFINITY);
	metrics_gauge_set(id, METRICS_L("nan"), NAN);
	metrics_gauge_set(id, METRICS_L("third"), 0.1 + 0.2);
	reg("t_nolabels", "No labels.", METRICS_GAUGE, NULL, NULL, 0);
	s = render_prefix("t_");
	CU_ASSERT_STRING_EQUAL(s,
			       "# HELP t_temp Help with \\\\ backslash\\nand newline \"quoted\".\n"
			       "# TYPE t_temp gauge\n"
			       "t_temp{v=\"a\\\\b\\\"c\\nd\"} -1.25\n"
			       "t_temp{v=\"inf\"} +Inf\n"
			       "t_temp{v=\"nan\"} NaN\n"
			       "t_temp{v=\"ninf\"} -Inf\n"
			       "t_temp{v=\"third\"} 0.30000000000000004\n"
			       "# HELP t_nolabels No labels.\n"
			       "# TYPE t_nolabels gauge\n"
			       "t_nolabels 0\n");
	free(s);
	CU_ASSERT_TRUE(metrics_get(id, METRICS_L("a\\b\"c\nd"), &v));
	CU_ASSERT_DOUBLE_EQUAL(v, -1.25, 1e-12);
	metrics_remove(id, METRICS_L("inf"));
	CU_ASSERT_FALSE(metrics_get(id, METRICS_L("inf"), &v));
	metrics_shutdown();
}

static void test_histogram_golden(void)
{
	static const double bk[] = { 0.1, 1, 2.5 };
	int id;
	char *s;
	double v;
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	id = reg("t_latency_seconds", "Latency.", METRICS_HISTOGRAM, METRICS_L("verb"), bk, 3);
	metrics_observe(id, METRICS_L("get"), 0.05);
	metrics_observe(id, METRICS_L("get"), 0.1); /* le is inclusive */
	metrics_observe(id, METRICS_L("get"), 2);
	metrics_observe(id, METRICS_L("get"), 7);
	metrics_observe(id, METRICS_L("list"), 1);
	s = render_prefix("t_latency");
	CU_ASSERT_STRING_EQUAL(s,
			       "# HELP t_latency_seconds Latency.\n"
			       "# TYPE t_latency_seconds histogram\n"
			       "t_latency_seconds_bucket{verb=\"get\",le=\"0.1\"} 2\n"
			       "t_latency_seconds_bucket{verb=\"get\",le=\"1\"} 2\n"
			       "t_latency_seconds_bucket{verb=\"get\",le=\"2.5\"} 3\n"
			       "t_latency_seconds_bucket{verb=\"get\",le=\"+Inf\"} 4\n"
			       "t_latency_seconds_sum{verb=\"get\"} 9.15\n"
			       "t_latency_seconds_count{verb=\"get\"} 4\n"
			       "t_latency_seconds_bucket{verb=\"list\",le=\"0.1\"} 0\n"
			       "t_latency_seconds_bucket{verb=\"list\",le=\"1\"} 1\n"
			       "t_latency_seconds_bucket{verb=\"list\",le=\"2.5\"} 1\n"
			       "t_latency_seconds_bucket{verb=\"list\",le=\"+Inf\"} 1\n"
			       "t_latency_seconds_sum{verb=\"list\"} 1\n"
			       "t_latency_seconds_count{verb=\"list\"} 1\n");
	free(s);
	CU_ASSERT_TRUE(metrics_get(id, METRICS_L("get"), &v));
	CU_ASSERT_DOUBLE_EQUAL(v, 4, 0);
	metrics_shutdown();
}

static void test_histogram_no_labels_default_buckets(void)
{
	int id;
	char *s;
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	id = reg("t_h", "H.", METRICS_HISTOGRAM, NULL, NULL, 0);
	metrics_observe(id, NULL, 0.007);
	s = render_prefix("t_h");
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "t_h_bucket{le=\"0.005\"} 0\nt_h_bucket{le=\"0.01\"} 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "t_h_bucket{le=\"10\"} 1\nt_h_bucket{le=\"+Inf\"} 1\n"
					 "t_h_sum 0.007\nt_h_count 1\n"));
	free(s);
	metrics_shutdown();
}

static void test_register_errors(void)
{
	static const double bad[] = { 1, 1 };
	metrics_desc d = { "t_x", "", METRICS_COUNTER, NULL, NULL, 0 };
	prd_err e;
	int id;
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), PRD_EINVAL); /* not initialised */
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	CU_ASSERT_EQUAL(metrics_init(), 0); /* idempotent */
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), 0);
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), PRD_EEXIST);
	d.name = "provreqd_leader";
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), PRD_EEXIST);
	d.name = "9bad";
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), PRD_EINVAL);
	d.name = "t_y";
	d.labels = METRICS_L("__reserved");
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), PRD_EINVAL);
	d.labels = METRICS_L("le");
	d.type = METRICS_HISTOGRAM;
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "'le'"));
	d.labels = NULL;
	d.buckets = bad;
	d.n_buckets = 2;
	CU_ASSERT_EQUAL(metrics_register(&d, &id, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "strictly increasing"));
	metrics_shutdown();
}

/* Misuse is dropped (and logged once), never a crash or a bogus sample. */
static void test_misuse_dropped(void)
{
	int id;
	double v;
	FILE *f;
	char *mem = NULL;
	size_t len = 0;
	f = open_memstream(&mem, &len);
	log_setup(PRD_LOG_WARN, PRD_LOG_TEXT, f);
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	id = reg("t_c_total", "C.", METRICS_COUNTER, METRICS_L("a", "b"), NULL, 0);
	metrics_counter_add(id, METRICS_L("only-one"), 1);
	metrics_counter_add(id, METRICS_L("x", "y", "z"), 1);
	metrics_counter_add(id, METRICS_L("x", "y"), -1);
	metrics_gauge_set(id, METRICS_L("x", "y"), 5);
	metrics_counter_add(9999, NULL, 1);
	metrics_observe(-1, NULL, 1);
	CU_ASSERT_FALSE(metrics_get(id, METRICS_L("x", "y"), &v));
	CU_ASSERT_FALSE(metrics_get(id, METRICS_L("only-one"), &v));
	metrics_shutdown();
	metrics_counter_add(id, METRICS_L("x", "y"), 1); /* after shutdown: ignored */
	fclose(f);
	log_setup(PRD_LOG_INFO, PRD_LOG_TEXT, NULL);
	/* one warning for the family, not one per call */
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "wrong number of labels"));
	CU_ASSERT_PTR_NULL(strstr(mem, "wrong kind"));
	free(mem);
}

static void test_builtin_families(void)
{
	char *s;
	double v;
	int i;
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	CU_ASSERT_EQUAL(metrics_count(), M_BUILTIN_COUNT);
	for(i = 0; i < M_BUILTIN_COUNT; i++) {
		CU_ASSERT_PTR_NOT_NULL(metrics_name(i));
		CU_ASSERT_TRUE(strncmp(metrics_name(i), "provreqd_", 9) == 0 ||
			       strncmp(metrics_name(i), "process_", 8) == 0);
	}
	CU_ASSERT_STRING_EQUAL(metrics_name(M_SCALEUPS), "provreqd_scaleups_total");
	metrics_counter_add(M_SCALEUPS, METRICS_L("group-a", "attempted"), 1);
	metrics_gauge_set(M_LEADER, NULL, 1);
	metrics_observe(M_RECONCILE_DURATION, METRICS_L("provreq"), 0.2);
	metrics_observe(M_TIME_TO_PROVISIONED, METRICS_L("check-capacity.autoscaling.x-k8s.io"), 42);
	CU_ASSERT_TRUE(metrics_get(M_SCALEUPS, METRICS_L("group-a", "attempted"), &v));
	CU_ASSERT_DOUBLE_EQUAL(v, 1, 0);
	s = render_prefix("provreqd_");
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "provreqd_build_info{version=\"" PACKAGE_VERSION "\"} 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "# TYPE provreqd_leader gauge\nprovreqd_leader 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "provreqd_scaleups_total{node_group=\"group-a\",result=\"attempted\"} 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "provreqd_reconcile_duration_seconds_bucket{controller=\"provreq\",le=\"0.25\"} 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "provreqd_request_time_to_provisioned_seconds_bucket{class=\"check-capacity.autoscaling.x-k8s.io\",le=\"60\"} 1\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "# TYPE provreqd_api_request_duration_seconds histogram\n"));
	free(s);
	metrics_shutdown();
}

#define NTHREADS 8
#define NITER 20000

static void *hammer(void *arg)
{
	int id = *(int *)arg, i;
	char lbl[8];
	for(i = 0; i < NITER; i++) {
		snprintf(lbl, sizeof(lbl), "l%d", i % 3);
		metrics_counter_add(id, METRICS_L(lbl), 1);
		metrics_observe(M_API_LATENCY, METRICS_L("get"), 0.001);
		metrics_gauge_add(M_BOOKINGS, METRICS_L("c"), 1);
		metrics_gauge_add(M_BOOKINGS, METRICS_L("c"), -1);
	}
	return NULL;
}

static void test_concurrent_updates(void)
{
	pthread_t th[NTHREADS];
	int id, i;
	double a = 0, b = 0, c = 0, n = 0, g = -1;
	buf out;
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	id = reg("t_conc_total", "C.", METRICS_COUNTER, METRICS_L("l"), NULL, 0);
	for(i = 0; i < NTHREADS; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, hammer, &id), 0);
	/* Render concurrently with the writers: must not crash or tear. */
	for(i = 0; i < 20; i++) {
		buf_init(&out);
		CU_ASSERT_EQUAL(metrics_render(&out), 0);
		buf_free(&out);
	}
	for(i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	CU_ASSERT_TRUE(metrics_get(id, METRICS_L("l0"), &a));
	CU_ASSERT_TRUE(metrics_get(id, METRICS_L("l1"), &b));
	CU_ASSERT_TRUE(metrics_get(id, METRICS_L("l2"), &c));
	CU_ASSERT_DOUBLE_EQUAL(a + b + c, (double)NTHREADS * NITER, 0);
	CU_ASSERT_DOUBLE_EQUAL(a, (double)NTHREADS * ((NITER + 2) / 3), 0);
	CU_ASSERT_TRUE(metrics_get(M_API_LATENCY, METRICS_L("get"), &n));
	CU_ASSERT_DOUBLE_EQUAL(n, (double)NTHREADS * NITER, 0);
	CU_ASSERT_TRUE(metrics_get(M_BOOKINGS, METRICS_L("c"), &g));
	CU_ASSERT_DOUBLE_EQUAL(g, 0, 0);
	metrics_shutdown();
}

/* Write root/name (its directory made) with the given text. */
static void put_file(const char *root, const char *name, const char *text)
{
	char path[1024], *slash;
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", root, name);
	for(slash = strchr(path + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

/* process_* from a procfs laid out in a directory: a command name with
 * spaces and parentheses, 250+150 ticks at 100 Hz, started 1234 ticks
 * after boot, 300 pages of 4096 bytes, 3 descriptors. */
static void test_process_metrics(void)
{
	char root[512], *s;
	procstat p;
	prd_err e;
	double v;

	snprintf(root, sizeof(root), "%s/proc", test_tmpdir());
	mkdir(root, 0755);
	put_file(root, "self/stat",
		 "4242 (provreqd (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 150 0 0 20 0 5 0 "
		 "1234 104857600 300 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 0 0\n");
	put_file(root, "stat", "cpu  1 2 3 4\nintr 5\nbtime 1700000000\nprocesses 9\n");
	put_file(root, "self/limits",
		 "Limit                     Soft Limit           Hard Limit           Units\n"
		 "Max open files            1024                 524288               files\n");
	put_file(root, "self/fd/0", "");
	put_file(root, "self/fd/1", "");
	put_file(root, "self/fd/2", "");
	CU_ASSERT_EQUAL_FATAL(procstat_read(root, 100, 4096, &p, &e), 0);
	CU_ASSERT_DOUBLE_EQUAL(p.cpu_seconds, 4.0, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(p.start_time, 1700000012.34, 1e-6);
	CU_ASSERT_DOUBLE_EQUAL(p.virtual_bytes, 104857600, 0);
	CU_ASSERT_DOUBLE_EQUAL(p.resident_bytes, 300.0 * 4096, 0);
	CU_ASSERT_DOUBLE_EQUAL(p.open_fds, 3, 0);
	CU_ASSERT_DOUBLE_EQUAL(p.max_fds, 1024, 0);

	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	procstat_publish(&p);
	s = render_prefix("process_");
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 4\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "process_start_time_seconds 1700000012.34\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "process_resident_memory_bytes 1228800\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "process_open_fds 3\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "process_max_fds 1024\n"));
	free(s);
	/* CPU time is a counter: a smaller reading never lowers it. */
	p.cpu_seconds = 1;
	procstat_publish(&p);
	CU_ASSERT_TRUE(metrics_get(M_PROCESS_CPU, NULL, &v));
	CU_ASSERT_DOUBLE_EQUAL(v, 4, 0);

	/* Unlimited descriptors: process_max_fds is +Inf. */
	put_file(root, "self/limits", "Max open files            unlimited            unlimited            files\n");
	CU_ASSERT_EQUAL(procstat_read(root, 100, 4096, &p, &e), 0);
	CU_ASSERT_DOUBLE_EQUAL(p.max_fds, -1, 0);
	procstat_publish(&p);
	s = render_prefix("process_max_fds");
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "process_max_fds +Inf\n"));
	free(s);
	/* Damaged files are refused with the file named, never misread. */
	put_file(root, "self/stat", "4242 provreqd S 1\n");
	CU_ASSERT_EQUAL(procstat_read(root, 100, 4096, &p, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "self/stat"));
	put_file(root, "self/stat",
		 "1 (a) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 100 3 0\n");
	put_file(root, "stat", "cpu 1\n");
	CU_ASSERT_EQUAL(procstat_read(root, 100, 4096, &p, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "btime"));

	/* The real procfs of this process reads and is plausible. */
	CU_ASSERT_EQUAL(procstat_read("/proc", sysconf(_SC_CLK_TCK), sysconf(_SC_PAGESIZE), &p, &e), 0);
	CU_ASSERT_TRUE(p.resident_bytes > 0);
	CU_ASSERT_TRUE(p.open_fds >= 3);
	CU_ASSERT_TRUE(p.start_time > 1e9);
	metrics_shutdown();
}

static const test_case cases[] = {
	{ "counter_golden", test_counter_golden },
	{ "gauge_and_escaping", test_gauge_and_escaping },
	{ "histogram_golden", test_histogram_golden },
	{ "histogram_no_labels_default_buckets", test_histogram_no_labels_default_buckets },
	{ "register_errors", test_register_errors },
	{ "misuse_dropped", test_misuse_dropped },
	{ "builtin_families", test_builtin_families },
	{ "concurrent_updates", test_concurrent_updates },
	{ "process_metrics", test_process_metrics },
	{ NULL, NULL }
};

TEST_MAIN("metrics", cases)

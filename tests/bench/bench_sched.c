/* Benchmarks for src/sched. Built by `make bench`, never run by
 * `make check`. Each scenario runs in its own child process so that
 * maxrss_kb is that scenario's peak; inside it the measured operation is
 * repeated (fork, run, revert) and the best and median times printed.
 *
 *   bench_sched [scenario] [reps]
 *
 * scenarios: check_capacity, check_capacity_aa, estimator, estimator_aa,
 * scaling (check_capacity at 500 / 5000 / 15000 nodes), all (default). */
#include "sched/estimator.h"
#include "sched/place.h"
#include "sched/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MI ((int64_t)1 << 20)
#define GI ((int64_t)1 << 30)
#define NSETS_CHECK 32
#define COUNT_CHECK 16384
#define NSETS_EST 51
#define COUNT_EST 1000

static const char *const zone_names[] = { "zone-a", "zone-b", "zone-c" };

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long maxrss_kb(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what, int rc, const prd_err *e)
{
	fprintf(stderr, "bench_sched: %s: %s (%s)\n", what, prd_strerror(rc), e ? e->msg : "");
	exit(1);
}

/* Pod templates: one per podSet, optionally with hostname anti-affinity
 * (against running pods of "dep-<i>") and zone spread (maxSkew 1) over
 * its own pods. Storage lives in a static table. */
typedef struct tmpl {
	sched_pod_spec spec;
	sched_label labels[1];
	char app[32], avoid[32];
	sched_res req[2];
	sched_label anti_ml[1], sp_ml[1];
	sched_label_selector anti_sel, sp_sel;
	sched_pod_term anti[1];
	sched_spread spread[1];
} tmpl;

static tmpl tmpls[64];

static void make_tmpl(tmpl *t, int i, int64_t cpu, int64_t mem, bool aa, bool self_anti)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->app, sizeof(t->app), "ps-%d", i);
	snprintf(t->avoid, sizeof(t->avoid), "dep-%d", i);
	t->labels[0] = (sched_label){ "app", t->app };
	t->req[0] = (sched_res){ "cpu", cpu };
	t->req[1] = (sched_res){ "memory", mem };
	t->spec.namespace = "batch";
	t->spec.labels = t->labels;
	t->spec.n_labels = 1;
	t->spec.requests = t->req;
	t->spec.n_requests = 2;
	if(aa) {
		t->anti_ml[0] = (sched_label){ "app", self_anti ? t->app : t->avoid };
		t->anti_sel = (sched_label_selector){ t->anti_ml, 1, NULL, 0 };
		t->anti[0] = (sched_pod_term){ SCHED_KEY_HOSTNAME, &t->anti_sel, NULL, 0, true };
		t->spec.pod_anti_affinity = t->anti;
		t->spec.n_pod_anti_affinity = 1;
		t->sp_ml[0] = (sched_label){ "app", t->app };
		t->sp_sel = (sched_label_selector){ t->sp_ml, 1, NULL, 0 };
		t->spread[0] = (sched_spread){ SCHED_KEY_ZONE, 1, 0, SCHED_DO_NOT_SCHEDULE, &t->sp_sel, false, false };
		t->spec.spread = t->spread;
		t->spec.n_spread = 1;
	}
}

static void add_node(sched_snapshot *s, int i, int64_t cpu, int64_t mem, int64_t pods)
{
	char name[32];
	sched_label labels[3];
	sched_res alloc[] = { { "cpu", cpu }, { "memory", mem }, { "pods", pods },
	                      { "ephemeral-storage", 100 * GI } };
	sched_node_spec n = { 0 };
	prd_err e = { 0 };
	int rc;

	snprintf(name, sizeof(name), "node-%05d", i);
	labels[0] = (sched_label){ SCHED_KEY_HOSTNAME, name };
	labels[1] = (sched_label){ SCHED_KEY_ZONE, zone_names[i % 3] };
	labels[2] = (sched_label){ "node.kubernetes.io/instance-type", "m.16xlarge" };
	n.name = name;
	n.labels = labels;
	n.n_labels = 3;
	n.allocatable = alloc;
	n.n_allocatable = 4;
	if((rc = sched_snapshot_add_node(s, &n, NULL, &e)))
		die("add_node", rc, &e);
}

/* A cluster of `nodes` nodes running 30 pods each from 300 deployments in
 * 20 namespaces. */
static sched_snapshot *build_cluster(int nodes, int64_t *running)
{
	sched_snapshot *s = sched_snapshot_new();
	int i, j;
	uint64_t x = 12345;
	if(!s)
		die("snapshot_new", PRD_ENOMEM, NULL);
	for(i = 0; i < nodes; i++)
		add_node(s, i, 96000, 384 * GI, 250);
	*running = 0;
	for(i = 0; i < nodes; i++)
		for(j = 0; j < 30; j++) {
			char app[32], ns[16];
			sched_label l[2];
			sched_res req[2];
			sched_pod_spec p = { 0 };
			int dep, rc;
			prd_err e = { 0 };
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			dep = (int)((x >> 33) % 300);
			snprintf(app, sizeof(app), "dep-%d", dep);
			snprintf(ns, sizeof(ns), "team-%d", dep % 20);
			l[0] = (sched_label){ "app", app };
			l[1] = (sched_label){ "tier", dep % 2 ? "web" : "worker" };
			req[0] = (sched_res){ "cpu", 100 + 50 * (dep % 8) };
			req[1] = (sched_res){ "memory", (128 + 64 * (dep % 8)) * MI };
			p.namespace = dep < 32 ? "batch" : ns;
			p.labels = l;
			p.n_labels = 2;
			p.requests = req;
			p.n_requests = 2;
			if((rc = sched_snapshot_add_pods(s, (size_t)i, &p, 1, &e)))
				die("add_pods", rc, &e);
			(*running)++;
		}
	return s;
}

static void report(const char *bench, const char *extra, double *ms, int reps, double build_ms,
		   int64_t pods, int64_t placed, bool fits)
{
	double best, median;
	qsort(ms, (size_t)reps, sizeof(double), cmp_d);
	best = ms[0];
	median = ms[reps / 2];
	printf("bench=%s %s build_ms=%.1f ms=%.3f median_ms=%.3f pods_per_s=%.0f placed=%lld "
	       "fits=%d reps=%d maxrss_kb=%ld\n",
	       bench, extra, build_ms, best, median, best > 0 ? (double)pods / (best / 1e3) : 0.0,
	       (long long)placed, fits, reps, maxrss_kb());
	fflush(stdout);
}

static void run_check(const char *bench, int nodes, bool aa, bool self_anti, int reps)
{
	sched_podset sets[NSETS_CHECK];
	sched_place_result r;
	double t0, build_ms, *ms = calloc((size_t)reps, sizeof(double));
	int64_t running, placed = 0;
	bool fits = false;
	char extra[160];
	prd_err e = { 0 };
	int i, rc;
	sched_snapshot *s;

	t0 = now_ms();
	s = build_cluster(nodes, &running);
	build_ms = now_ms() - t0;
	for(i = 0; i < NSETS_CHECK; i++) {
		make_tmpl(&tmpls[i], i, 50 + 25 * (i % 12), (64 + 32 * (i % 16)) * MI, aa, self_anti);
		sets[i] = (sched_podset){ &tmpls[i].spec, COUNT_CHECK };
	}
	for(i = 0; i < reps; i++) {
		sched_snapshot_fork(s);
		t0 = now_ms();
		if((rc = sched_place(s, sets, NSETS_CHECK, &r, &e)))
			die("place", rc, &e);
		ms[i] = now_ms() - t0;
		placed = r.placed;
		fits = r.fits_all;
		sched_place_result_free(&r);
		sched_snapshot_revert(s);
	}
	snprintf(extra, sizeof(extra), "nodes=%d pods=%lld podsets=%d count=%d variant=%s", nodes,
	         (long long)running, NSETS_CHECK, COUNT_CHECK,
	         !aa ? "plain" : self_anti ? "self_anti_zone_spread" : "anti_zone_spread");
	report(bench, extra, ms, reps, build_ms, (int64_t)NSETS_CHECK * COUNT_CHECK, placed, fits);
	free(ms);
	sched_snapshot_free(s);
}

/* 51 podSets x 1000 pods of mixed shapes onto one 16-cpu / 64 GiB
 * template. With aa, 3 existing nodes (one per zone) already run 1000
 * pods of every podSet in zones a and c, so zone spread lets zone b (the
 * template's) take its share. */
static void run_estimator(bool aa, int reps)
{
	static const int64_t cpus[] = { 500, 750, 1000, 1250 };
	static const int64_t mems[] = { 1, 2, 3, 4 };
	sched_podset sets[NSETS_EST];
	sched_snapshot *s = sched_snapshot_new();
	sched_label tl[] = { { SCHED_KEY_ZONE, "zone-b" }, { "pool", "general" } };
	sched_res ta[] = { { "cpu", 16000 }, { "memory", 64 * GI }, { "pods", 110 } };
	sched_node_spec t = { .name = "general-template", .labels = tl, .n_labels = 2,
	                      .allocatable = ta, .n_allocatable = 3 };
	sched_est_limits lim = { 100000, 0, 0, 0 };
	sched_est_result r;
	double t0, build_ms, *ms = calloc((size_t)reps, sizeof(double));
	int64_t placed = 0, new_nodes = 0;
	bool fits = false;
	char extra[160];
	prd_err e = { 0 };
	int i, rc;

	t0 = now_ms();
	for(i = 0; i < 3; i++)
		add_node(s, i, 96000, 384 * GI, 250);
	for(i = 0; i < NSETS_EST; i++) {
		make_tmpl(&tmpls[i], i, cpus[i % 4], mems[(i / 4) % 4] * GI / 2, aa, true);
		sets[i] = (sched_podset){ &tmpls[i].spec, COUNT_EST };
		if(aa) {
			/* Running replicas elsewhere, without constraints of their own. */
			sched_pod_spec run = tmpls[i].spec;
			run.n_pod_anti_affinity = 0;
			run.n_spread = 0;
			if((rc = sched_snapshot_add_pods(s, 0, &run, COUNT_EST, &e)) ||
			   (rc = sched_snapshot_add_pods(s, 2, &run, COUNT_EST, &e)))
				die("add_pods", rc, &e);
		}
	}
	build_ms = now_ms() - t0;
	for(i = 0; i < reps; i++) {
		t0 = now_ms();
		if((rc = sched_estimate(s, &t, sets, NSETS_EST, &lim, &r, &e)))
			die("estimate", rc, &e);
		ms[i] = now_ms() - t0;
		placed = r.place.placed;
		fits = r.place.fits_all;
		new_nodes = r.new_nodes;
		sched_est_result_free(&r);
	}
	snprintf(extra, sizeof(extra), "pending=%d podsets=%d new_nodes=%lld variant=%s",
	         NSETS_EST * COUNT_EST, NSETS_EST, (long long)new_nodes,
	         aa ? "self_anti_zone_spread" : "plain");
	report(aa ? "estimator_aa" : "estimator", extra, ms, reps, build_ms,
	       (int64_t)NSETS_EST * COUNT_EST, placed, fits);
	free(ms);
	sched_snapshot_free(s);
}

static void run_scenario(const char *name, int reps)
{
	if(strcmp(name, "check_capacity") == 0)
		run_check(name, 5000, false, false, reps);
	else if(strcmp(name, "check_capacity_aa") == 0)
		run_check(name, 5000, true, false, reps);
	else if(strcmp(name, "check_capacity_self_aa") == 0)
		run_check(name, 5000, true, true, reps);
	else if(strcmp(name, "estimator") == 0)
		run_estimator(false, reps);
	else if(strcmp(name, "estimator_aa") == 0)
		run_estimator(true, reps);
	else if(strcmp(name, "scaling_500") == 0)
		run_check("scaling", 500, false, false, reps);
	else if(strcmp(name, "scaling_5000") == 0)
		run_check("scaling", 5000, false, false, reps);
	else if(strcmp(name, "scaling_15000") == 0)
		run_check("scaling", 15000, false, false, reps);
	else {
		fprintf(stderr, "bench_sched: unknown scenario %s\n", name);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	static const char *const all[] = { "check_capacity", "check_capacity_aa",
	                                   "check_capacity_self_aa", "estimator", "estimator_aa",
	                                   "scaling_500", "scaling_5000", "scaling_15000" };
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	size_t i;

	if(reps < 1)
		reps = 1;
	if(argc > 1 && strcmp(argv[1], "all") != 0) {
		run_scenario(argv[1], reps);
		return 0;
	}
	/* One child per scenario so maxrss_kb is per scenario. */
	for(i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		pid_t pid = fork();
		int st;
		if(pid < 0) {
			perror("fork");
			return 1;
		}
		if(pid == 0) {
			run_scenario(all[i], reps);
			_exit(0);
		}
		if(waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "bench_sched: scenario %s failed\n", all[i]);
			return 1;
		}
	}
	return 0;
}

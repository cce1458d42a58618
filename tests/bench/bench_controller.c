/* The whole controller on a large cluster: informer caches fed by the
 * in-memory API (the same list/watch seam as against a real apiserver:
 * lists are JSON text parsed and decoded as the client does), the real
 * pr_ctl passes, and the kwok driver for the scale-up figures.
 *
 * Cluster: NODES nodes (96 cpu, 384 GiB, 250 pods, 3 zones) running PODS
 * pods spread evenly over them, 300 PodTemplates. Figures, one line each:
 *
 *   bench=controller_initial_sync  wall_ms, cpu_ms (all four informers, the
 *                                  in-memory server's JSON writing included),
 *                                  server_cpu_ms (the in-memory server's
 *                                  share: lists and watch events answered)
 *                                  and client_cpu_ms (the rest: what the
 *                                  controller spends against a real
 *                                  apiserver); synced_mb and peak_mb, the
 *                                  resident set once synced and its peak
 *                                  so far, less what the loaded server held
 *   bench=controller_one_by_one    creation -> Provisioned written, p50/p99/max
 *                                  over N check-capacity requests created one
 *                                  at a time (each: the informer sees it, one
 *                                  pass decides and writes)
 *   bench=controller_burst         200 requests created at once -> all final
 *                                  (passes run back to back until then),
 *                                  and the worker's CPU in those passes
 *   bench=controller_registration  CPU of the worker per node-registration
 *                                  event (a new node turning Ready, seen by
 *                                  the informer, one pass) during an atomic
 *                                  scale-up of SCALE nodes; sampled over the
 *                                  first SAMPLE registrations
 *   bench=controller_other_shard   a second shard (processorInstance
 *                                  "other") after the burst: its first pass
 *                                  (wall, and the worker's CPU),
 *                                  idle passes against the first shard's,
 *                                  and a decision counting the first
 *                                  shard's bookings from the statuses
 *   bench=controller_rss           peak resident set; the in-memory server
 *                                  shares the process, so controller_mb is
 *                                  the peak less the loaded server's share;
 *                                  one_controller_mb the same before the
 *                                  second shard's controller started
 *
 * What `run` adds on top (the 100 ms quiet period after an event before a
 * pass) is not included: these are the controller's own costs.
 *
 * Usage: bench_controller [nodes] [pods] [requests] [scale] [sample] [text|tree]
 * (defaults 5000 150000 100 1000 50 text). `text` hands the informers
 * objects as JSON text (kube_list_text/kube_watch_text, decoded by the
 * text decoders), as `run` does; `tree` parses every page and event with
 * json-c first, as before the text decoders, for comparing the two in one
 * run of the same binary. Build without sanitizers
 * (./configure CFLAGS=-O2) and run from the build tree (it loads
 * cloud/kwok/.libs/kwok.so). */
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "classes/vocab.h"
#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/api.h"
#include "kube/informer.h"
#include "kube/memapi.h"
#include "kube/objects.h"
#include "kube/reflector.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/controller.h"
#include "state/state.h"
#include "util/buf.h"
#include "util/clock.h"

#define NTEMPLATES 300

static const char *const zones[] = { "zone-a", "zone-b", "zone-c" };

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double cpu_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long rss_kb(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(field);
	if(!f)
		return -1;
	while(fgets(line, sizeof(line), f))
		if(strncmp(line, field, n) == 0) {
			v = atol(line + n + 1);
			break;
		}
	fclose(f);
	return v;
}

static void die(const char *what, const char *msg)
{
	fprintf(stderr, "bench_controller: %s: %s\n", what, msg ? msg : "failed");
	exit(1);
}

static void post(memapi *m, const char *path, buf *b)
{
	long status = 0;
	char *resp = NULL;
	size_t len = 0;
	if(memapi_request(m, "POST", path, "application/json", buf_str(b), b->len, &status, &resp, &len))
		die(path, resp);
	free(resp);
}

static void add_node(memapi *m, long i)
{
	buf b;
	buf_init(&b);
	buf_printf(&b,
		   "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%05ld\",\"labels\":{"
		   "\"kubernetes.io/hostname\":\"node-%05ld\",\"topology.kubernetes.io/zone\":\"%s\","
		   "\"kubernetes.io/os\":\"linux\"}},\"spec\":{},\"status\":{"
		   "\"capacity\":{\"cpu\":\"96\",\"memory\":\"384Gi\",\"pods\":\"250\"},"
		   "\"allocatable\":{\"cpu\":\"96\",\"memory\":\"384Gi\",\"pods\":\"250\"},"
		   "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
		   i, i, zones[i % 3]);
	post(m, "/api/v1/nodes", &b);
	buf_free(&b);
}

static void add_pod(memapi *m, long i, long nodes)
{
	char path[128];
	buf b;
	long dep = i % NTEMPLATES;
	buf_init(&b);
	buf_printf(&b,
		   "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"d%03ld-%06ld\",\"namespace\":\"ns-%ld\","
		   "\"labels\":{\"app\":\"d%03ld\"}},\"spec\":{\"nodeName\":\"node-%05ld\",\"containers\":[{\"name\":\"c\","
		   "\"image\":\"registry.example/app:1\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"4Gi\"}}}]},"
		   "\"status\":{\"phase\":\"Running\"}}",
		   dep, i, dep % 10, dep, i % nodes);
	snprintf(path, sizeof(path), "/api/v1/namespaces/ns-%ld/pods", dep % 10);
	post(m, path, &b);
	buf_free(&b);
}

static void add_template(memapi *m, long i)
{
	char path[128];
	buf b;
	buf_init(&b);
	/* Template 0 is the atomic one: only nodes of the bench group match. */
	buf_printf(&b,
		   "{\"apiVersion\":\"v1\",\"kind\":\"PodTemplate\",\"metadata\":{\"name\":\"t%03ld\",\"namespace\":\"team\"},"
		   "\"template\":{\"metadata\":{\"labels\":{\"job\":\"t%03ld\"}},\"spec\":{%s\"containers\":[{\"name\":\"c\","
		   "\"image\":\"registry.example/job:1\",\"resources\":{\"requests\":{\"cpu\":\"%s\",\"memory\":\"2Gi\"}}}]}}}",
		   i, i, i == 0 ? "\"nodeSelector\":{\"group\":\"bench\"}," : "", i == 0 ? "15" : "1");
	snprintf(path, sizeof(path), "/api/v1/namespaces/team/podtemplates");
	post(m, path, &b);
	buf_free(&b);
}

static void add_request(memapi *m, const char *name, const char *cls, long tmpl, long count)
{
	buf b;
	buf_init(&b);
	buf_printf(&b,
		   "{\"apiVersion\":\"autoscaling.x-k8s.io/v1\",\"kind\":\"ProvisioningRequest\",\"metadata\":{"
		   "\"name\":\"%s\",\"namespace\":\"team\"},\"spec\":{\"provisioningClassName\":\"%s\","
		   "\"podSets\":[{\"podTemplateRef\":{\"name\":\"t%03ld\"},\"count\":%ld}]}}",
		   name, cls, tmpl, count);
	post(m, "/apis/autoscaling.x-k8s.io/v1/namespaces/team/provisioningrequests", &b);
	buf_free(&b);
}

/* Informer events wake whoever waits for a count of them. */
typedef struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned long events;
} waiter;

static waiter W = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static void bump(void)
{
	pthread_mutex_lock(&W.mu);
	W.events++;
	pthread_cond_broadcast(&W.cv);
	pthread_mutex_unlock(&W.mu);
}
static void h_add(void *ud, const kube_meta *o) { (void)ud; (void)o; bump(); }
static void h_upd(void *ud, const kube_meta *a, const kube_meta *b) { (void)ud; (void)a; (void)b; bump(); }
static void h_del(void *ud, const kube_meta *o) { (void)ud; (void)o; bump(); }

static unsigned long events_now(void)
{
	unsigned long v;
	pthread_mutex_lock(&W.mu);
	v = W.events;
	pthread_mutex_unlock(&W.mu);
	return v;
}

/* The ProvisioningRequest informer, to wait for a request to be in it,
 * and the Node informer, to wait for a node to be Ready in it. */
static kube_informer *PR_INF, *NODE_INF;

/* Wait until the request `name` is in the controller's cache (counting
 * events is not enough: the echo of the previous pass's status write may
 * be the event that arrives first). */
static void wait_cached(const char *name)
{
	for(;;) {
		bool have;
		kube_informer_rdlock(PR_INF);
		have = kube_informer_get(PR_INF, "team", name) != NULL;
		kube_informer_rdunlock(PR_INF);
		if(have)
			return;
		usleep(100);
	}
}

/* Wait until `n` more events than `base` arrived. */
/* Wait until the controller's Node cache shows `name` Ready (a count of
 * events is not enough: the request's own status write is an event too,
 * and may be the one counted). */
static void wait_node_ready(const char *name)
{
	for(;;) {
		const kube_node *n;
		bool ready;
		kube_informer_rdlock(NODE_INF);
		n = (const kube_node *)kube_informer_get(NODE_INF, NULL, name);
		ready = n && n->ready == KUBE_COND_TRUE;
		kube_informer_rdunlock(NODE_INF);
		if(ready)
			return;
		usleep(50);
	}
}

/* Wait until the controller's request cache holds the request as the API
 * does now: after a pass wrote its status, the next pass decides it only
 * once the cache saw that write (it waits for it, as `run` does, rather
 * than decide on what it overwrote). */
static void wait_request_current(const kube_api *api, const char *name)
{
	char path[256], rv[64];
	json_object *o = NULL;
	snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/team/provisioningrequests/%s", name);
	if(kube_api_call(api, "GET", path, NULL, NULL, &o, NULL, NULL))
		die("get request", name);
	snprintf(rv, sizeof(rv), "%s",
		 json_object_get_string(json_object_object_get(json_object_object_get(o, "metadata"), "resourceVersion")));
	json_object_put(o);
	for(;;) {
		const kube_meta *mt;
		bool same;
		kube_informer_rdlock(PR_INF);
		mt = kube_informer_get(PR_INF, "team", name);
		same = mt && !strcmp(mt->rv, rv);
		kube_informer_rdunlock(PR_INF);
		if(same)
			return;
		usleep(50);
	}
}

static void wait_events(unsigned long base, unsigned long n)
{
	pthread_mutex_lock(&W.mu);
	while(W.events < base + n)
		pthread_cond_wait(&W.cv, &W.mu);
	pthread_mutex_unlock(&W.mu);
}

/* Provisioned / final state of one request, read from the API. */
static int request_state(const kube_api *api, const char *name, bool *provisioned, bool *final)
{
	char path[256];
	json_object *o = NULL, *conds;
	size_t i;
	*provisioned = *final = false;
	snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/team/provisioningrequests/%s", name);
	if(kube_api_call(api, "GET", path, NULL, NULL, &o, NULL, NULL))
		return -1;
	conds = json_object_object_get(json_object_object_get(o, "status"), "conditions");
	for(i = 0; conds && i < json_object_array_length(conds); i++) {
		json_object *c = json_object_array_get_idx(conds, i);
		const char *t = json_object_get_string(json_object_object_get(c, "type"));
		const char *s = json_object_get_string(json_object_object_get(c, "status"));
		if(!t || !s || strcmp(s, "True"))
			continue;
		if(!strcmp(t, "Provisioned"))
			*provisioned = *final = true;
		if(!strcmp(t, "Failed"))
			*final = true;
	}
	json_object_put(o);
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void pass(pr_ctl *ctl)
{
	prd_err e;
	if(pr_ctl_pass(ctl, NULL, &e))
		die("pass", e.msg);
}

static void bench_one_by_one(memapi *m, const kube_api *api, pr_ctl *ctl, long n)
{
	double *lat = calloc((size_t)n, sizeof(*lat));
	long i, ok = 0;
	if(!lat)
		die("calloc", NULL);
	for(i = 0; i < n; i++) {
		char name[64];
		unsigned long base = events_now();
		bool prov, fin;
		double t0 = now_ms();
		snprintf(name, sizeof(name), "one-%04ld", i);
		add_request(m, name, PR_CLASS_CHECK, 1 + i % (NTEMPLATES - 1), 10);
		wait_events(base, 1);
		wait_cached(name);
		pass(ctl);
		lat[i] = now_ms() - t0;
		if(request_state(api, name, &prov, &fin) == 0 && prov)
			ok++;
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_d);
	printf("bench=controller_one_by_one requests=%ld provisioned=%ld p50_ms=%.1f p99_ms=%.1f max_ms=%.1f\n", n, ok,
	       lat[n / 2], lat[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], lat[n - 1]);
	fflush(stdout);
	free(lat);
}

static void bench_burst(memapi *m, const kube_api *api, pr_ctl *ctl, long n)
{
	unsigned long base = events_now();
	double t0 = now_ms(), cpu = 0;
	long i, final = 0, prov = 0, passes = 0;
	for(i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "burst-%04ld", i);
		add_request(m, name, PR_CLASS_CHECK, 1 + i % (NTEMPLATES - 1), 5);
	}
	wait_events(base, (unsigned long)n);
	while(final < n && passes < 50) {
		double c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
		pass(ctl);
		cpu += cpu_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
		passes++;
		final = prov = 0;
		for(i = 0; i < n; i++) {
			char name[64];
			bool p, f;
			snprintf(name, sizeof(name), "burst-%04ld", i);
			if(request_state(api, name, &p, &f) == 0) {
				final += f;
				prov += p;
			}
		}
	}
	printf("bench=controller_burst requests=%ld final=%ld provisioned=%ld passes=%ld all_final_ms=%.0f passes_cpu_ms=%.0f\n",
	       n, final, prov, passes, now_ms() - t0, cpu);
	fflush(stdout);
}

/* A second shard (processorInstance "other", its own store) on the same
 * caches, after the first one booked its requests: the pass that first
 * reads their statuses (the view of others' bookings), passes with nothing
 * changed against the first shard's own (ratios in one run), and a pass
 * that decides one request of "other" with every booking of the first
 * shard counted from the statuses. */
static void bench_other_shard(memapi *m, const kube_api *api, pr_ctl *ctl, const pr_informers *pi)
{
	state_config sc;
	state_db *db2 = NULL;
	pr_config cfg;
	pr_ctl *other = NULL;
	prd_err e;
	double t0, c0, first, first_cpu, idle_other, idle_own, decide;
	uint64_t reads;
	bool prov, fin;
	int k;
	state_config_default(&sc);
	if(state_open(":memory:", clk_real(), &sc, &db2, &e))
		die("state", e.msg);
	pr_config_default(&cfg);
	cfg.processor_instance = "other";
	if(pr_ctl_new(&cfg, clk_real(), api, db2, NULL, &other, &e))
		die("controller", e.msg);
	pr_ctl_use_informers(other, pi);
	t0 = now_ms();
	c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
	pass(other);
	first_cpu = cpu_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
	first = now_ms() - t0;
	reads = pr_ctl_stats(other)->shard_reads;
	pass(other);
	t0 = now_ms();
	for(k = 0; k < 20; k++)
		pass(other);
	idle_other = (now_ms() - t0) / 20;
	t0 = now_ms();
	for(k = 0; k < 20; k++)
		pass(ctl);
	idle_own = (now_ms() - t0) / 20;
	{
		unsigned long base = events_now();
		buf b;
		buf_init(&b);
		buf_printf(&b,
			   "{\"apiVersion\":\"autoscaling.x-k8s.io/v1\",\"kind\":\"ProvisioningRequest\",\"metadata\":{"
			   "\"name\":\"other-one\",\"namespace\":\"team\"},\"spec\":{\"provisioningClassName\":\"%s\",\"parameters\":{"
			   "\"processorInstance\":\"other\"},\"podSets\":[{\"podTemplateRef\":{\"name\":\"t001\"},"
			   "\"count\":10}]}}",
			   PR_CLASS_CHECK);
		post(m, "/apis/autoscaling.x-k8s.io/v1/namespaces/team/provisioningrequests", &b);
		buf_free(&b);
		wait_events(base, 1);
		wait_cached("other-one");
	}
	t0 = now_ms();
	pass(other);
	decide = now_ms() - t0;
	if(request_state(api, "other-one", &prov, &fin) || !fin)
		die("other shard", "other-one was not answered");
	printf("bench=controller_other_shard statuses_read=%llu first_pass_ms=%.1f first_pass_cpu_ms=%.1f idle_pass_ms=%.2f "
	       "own_idle_pass_ms=%.2f decide_pass_ms=%.1f bookings_from_api=%llu provisioned=%s\n",
	       (unsigned long long)reads, first, first_cpu, idle_other, idle_own, decide,
	       (unsigned long long)pr_ctl_stats(other)->bookings_from_api, prov ? "yes" : "no");
	fflush(stdout);
	pr_ctl_free(other);
	state_close(db2);
}

/* Nodes the kwok driver made, not yet Ready, in creation order. */
static int pending_nodes(const kube_api *api, char ***out, size_t *n)
{
	json_object *list = NULL, *items;
	size_t i;
	*out = NULL;
	*n = 0;
	if(kube_api_call(api, "GET", "/api/v1/nodes?labelSelector=group%3Dbench", NULL, NULL, &list, NULL, NULL))
		return -1;
	items = json_object_object_get(list, "items");
	*out = calloc(json_object_array_length(items) + 1, sizeof(char *));
	for(i = 0; items && i < json_object_array_length(items); i++) {
		json_object *node = json_object_array_get_idx(items, i);
		json_object *conds = json_object_object_get(json_object_object_get(node, "status"), "conditions");
		bool ready = false;
		size_t k;
		for(k = 0; conds && k < json_object_array_length(conds); k++) {
			json_object *c = json_object_array_get_idx(conds, k);
			if(!strcmp(json_object_get_string(json_object_object_get(c, "type")), "Ready") &&
			   !strcmp(json_object_get_string(json_object_object_get(c, "status")), "True"))
				ready = true;
		}
		if(!ready)
			(*out)[(*n)++] = strdup(
				json_object_get_string(json_object_object_get(json_object_object_get(node, "metadata"), "name")));
	}
	json_object_put(list);
	return 0;
}

static void make_ready(const kube_api *api, const char *name)
{
	char path[300];
	json_object *patch = json_tokener_parse("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
						"\"reason\":\"KubeletReady\"}]}}");
	snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", name);
	if(kube_api_call(api, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL, NULL))
		die("patch node", path);
	json_object_put(patch);
}

static void bench_registration(memapi *m, const kube_api *api, pr_ctl *ctl, long scale, long sample)
{
	unsigned long base = events_now();
	char **names = NULL;
	size_t n = 0, i;
	double cpu = 0, worst = 0, t0;
	bool prov, fin;
	pr_stats s0;
	unsigned long long decisions = 0;
	add_request(m, "atomic", PR_CLASS_ATOMIC, 0, scale);
	wait_events(base, 1);
	wait_cached("atomic");
	t0 = now_ms();
	pass(ctl); /* starts the scale-up: the driver creates the nodes */
	if(pending_nodes(api, &names, &n) || n == 0)
		die("scale-up", "the pass created no nodes (is the kwok driver loaded?)");
	printf("bench=controller_scaleup_start nodes=%zu first_pass_ms=%.0f\n", n, now_ms() - t0);
	fflush(stdout);
	/* Let the informer catch up with the node creations. */
	wait_events(base, 1 + n);
	s0 = *pr_ctl_stats(ctl);
	for(i = 0; i < n; i++) {
		double c0, d;
		make_ready(api, names[i]);
		wait_node_ready(names[i]);
		wait_request_current(api, "atomic");
		if((long)i < sample) {
			c0 = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
			pass(ctl);
			d = cpu_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
			decisions += pr_ctl_stats(ctl)->requests_decided;
			cpu += d;
			if(d > worst)
				worst = d;
		}
	}
	pass(ctl);
	request_state(api, "atomic", &prov, &fin);
	printf("bench=controller_registration nodes=%zu sampled=%ld cpu_ms_per_event=%.2f worst_ms=%.2f provisioned=%s "
	       "passes=%llu snapshot_rebuilds=%llu decisions=%llu\n",
	       n, sample < (long)n ? sample : (long)n, cpu / (double)(sample < (long)n ? sample : (long)n), worst,
	       prov ? "yes" : "no", (unsigned long long)(pr_ctl_stats(ctl)->passes - s0.passes),
	       (unsigned long long)(pr_ctl_stats(ctl)->passes - s0.passes -
				    (pr_ctl_stats(ctl)->snapshot_reuses - s0.snapshot_reuses)),
	       decisions);
	fflush(stdout);
	for(i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static char *write_template_dir(long scale)
{
	char *dir = strdup("/tmp/bench-controller-XXXXXX"), path[600];
	FILE *f;
	if(!dir || !mkdtemp(dir))
		die("mkdtemp", NULL);
	snprintf(path, sizeof(path), "%s/bench.yaml", dir);
	f = fopen(path, "w");
	if(!f)
		die("template", path);
	fprintf(f,
		"apiVersion: v1\nkind: Node\nmetadata:\n  name: bench\n  annotations:\n"
		"    provreqd.io/min-size: \"0\"\n    provreqd.io/max-size: \"%ld\"\n"
		"  labels:\n    group: bench\n    topology.kubernetes.io/zone: zone-a\n"
		"status:\n  capacity: {cpu: \"16\", memory: 64Gi, pods: \"110\"}\n"
		"  allocatable: {cpu: \"16\", memory: 64Gi, pods: \"110\"}\n",
		scale + 10);
	fclose(f);
	return dir;
}

int main(int argc, char **argv)
{
	long nodes = argc > 1 ? atol(argv[1]) : 5000, pods = argc > 2 ? atol(argv[2]) : 150000;
	long reqs = argc > 3 ? atol(argv[3]) : 100, scale = argc > 4 ? atol(argv[4]) : 1000;
	long sample = argc > 5 ? atol(argv[5]) : 50, i, server_kb, one_ctl_kb;
	bool tree = argc > 6 && strcmp(argv[6], "tree") == 0;
	static const kube_kind kinds[4] = { KUBE_KIND_NODE, KUBE_KIND_POD, KUBE_KIND_PODTEMPLATE, KUBE_KIND_PROVREQ };
	const kube_resource *res[4] = { &KUBE_NODES, &KUBE_PODS, &KUBE_PODTEMPLATES, &KUBE_PROVREQS };
	kube_informer *inf[4];
	kube_listwatch lw[4];
	const clk *clock = clk_real();
	memapi *m = NULL;
	kube_api api;
	kube_intern *intern;
	state_config sc;
	state_db *db = NULL;
	cloud_drivers drivers;
	cloud_host_impl host;
	pr_config cfg;
	pr_ctl *ctl = NULL;
	pr_informers pi;
	prd_err e;
	char *dir, *config;
	double t0, c0, c1, server_ms;
	uint64_t server0;
	struct rusage ru;

	log_setup(PRD_LOG_ERROR, PRD_LOG_TEXT, stderr);
	metrics_init();
	if(memapi_new(clock, 0, &m))
		die("memapi", NULL);
	api = kube_api_from_memapi(m);
	t0 = now_ms();
	for(i = 0; i < nodes; i++)
		add_node(m, i);
	for(i = 0; i < pods; i++)
		add_pod(m, i, nodes);
	for(i = 0; i < NTEMPLATES; i++)
		add_template(m, i);
	fprintf(stderr, "loaded %ld nodes, %ld pods, %d templates in %.0f ms\n", nodes, pods, NTEMPLATES, now_ms() - t0);
	server_kb = rss_kb("VmRSS:");

	intern = kube_intern_new();
	if(!intern)
		die("intern", NULL);
	getrusage(RUSAGE_SELF, &ru);
	c0 = ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 + ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
	server0 = memapi_listwatch_server_ns(m);
	t0 = now_ms();
	for(i = 0; i < 4; i++) {
		kube_informer_opts io;
		kube_handler h = { h_add, h_upd, h_del, NULL };
		memset(&io, 0, sizeof(io));
		io.kind = kinds[i];
		io.intern = intern;
		io.reflector.name = res[i]->resource;
		memapi_listwatch(m, res[i], &lw[i]);
		if(tree)
			lw[i].list_text = NULL, lw[i].watch_text = NULL;
		if(kube_informer_new(&io, &inf[i], &e) || kube_informer_add_handler(inf[i], &h) ||
		   kube_informer_start(inf[i], &lw[i], &e))
			die("informer", e.msg);
	}
	PR_INF = inf[3];
	NODE_INF = inf[0];
	for(i = 0; i < 4; i++)
		if(!kube_informer_wait_synced(inf[i]))
			die("informer", "stopped before its first list");
	getrusage(RUSAGE_SELF, &ru);
	c1 = ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 + ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3 - c0;
	server_ms = (double)(memapi_listwatch_server_ns(m) - server0) / 1e6;
	printf("bench=controller_initial_sync decode=%s nodes=%ld pods=%ld wall_ms=%.0f cpu_ms=%.0f server_cpu_ms=%.0f "
	       "client_cpu_ms=%.0f synced_mb=%.0f peak_mb=%.0f\n",
	       tree ? "tree" : "text", nodes, pods, now_ms() - t0, c1, server_ms, c1 - server_ms,
	       (rss_kb("VmRSS:") - server_kb) / 1024.0, (rss_kb("VmHWM:") - server_kb) / 1024.0);
	fflush(stdout);

	state_config_default(&sc);
	if(state_open(":memory:", clock, &sc, &db, &e))
		die("state", e.msg);
	dir = write_template_dir(scale);
	config = NULL;
	{
		buf b;
		buf_init(&b);
		buf_printf(&b, "templateDir: %s\n", dir);
		config = strdup(buf_str(&b));
		buf_free(&b);
	}
	cloud_drivers_init(&drivers);
	cloud_host_init(&host, "driver", clock, cloud_host_memapi_request, m);
	if(cloud_drivers_load(&drivers, "cloud/kwok/.libs/kwok.so", &host.host, config, NULL, &e))
		die("kwok driver (run from the build tree)", e.msg);
	pr_config_default(&cfg);
	if(pr_ctl_new(&cfg, clock, &api, db, &drivers, &ctl, &e))
		die("controller", e.msg);
	memset(&pi, 0, sizeof(pi)); /* no DRA informers */
	pi.intern = intern;
	pi.nodes = inf[0];
	pi.pods = inf[1];
	pi.podtemplates = inf[2];
	pi.provreqs = inf[3];
	pr_ctl_use_informers(ctl, &pi);
	pass(ctl); /* the first pass rebuilds the state store from the API */

	bench_one_by_one(m, &api, ctl, reqs);
	bench_burst(m, &api, ctl, 200);
	/* The second shard's controller below shares this process; a
	 * deployment runs one controller per process. */
	one_ctl_kb = rss_kb("VmHWM:") - server_kb;
	bench_other_shard(m, &api, ctl, &pi);
	if(scale > 0)
		bench_registration(m, &api, ctl, scale, sample);
	/* The in-memory server's objects live in this process too: the
	 * controller's share is the peak less what the loaded server held. */
	printf("bench=controller_rss peak_mb=%.0f server_mb=%.0f controller_mb=%.0f one_controller_mb=%.0f\n",
	       rss_kb("VmHWM:") / 1024.0, server_kb / 1024.0, (rss_kb("VmHWM:") - server_kb) / 1024.0, one_ctl_kb / 1024.0);

	pr_ctl_free(ctl);
	for(i = 0; i < 4; i++) {
		kube_informer_stop(inf[i]);
		kube_informer_free(inf[i]);
	}
	cloud_drivers_free(&drivers);
	state_close(db);
	kube_intern_free(intern);
	memapi_free(m);
	free(config);
	{
		char path[600];
		snprintf(path, sizeof(path), "%s/bench.yaml", dir);
		unlink(path);
		rmdir(dir);
	}
	free(dir);
	return 0;
}

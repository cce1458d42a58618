/* Deciding only the affected requests gives what deciding every request
 * gives. Two worlds, each an in-memory API with its own informers, state
 * store, example driver and controller, share one fake clock and get the
 * same random sequence of events: nodes registering, turning NotReady,
 * deleted; consumer pods bound and deleted; check-capacity and atomic
 * requests created and deleted; templates arriving late or changing; the driver's new
 * instances registering; time passing (backoff, bookings, deadlines);
 * caches that trail the API for a pass. World A decides only the affected
 * requests and keeps its node and pod summaries (node table, the nodes'
 * fingerprint, consumer pods) from the caches' journals; world B decides
 * every request in every pass and derives those anew (cfg.full_passes).
 * After every pass the requests' conditions, the controllers' counters and
 * the node group's target must be the same, and every kept scheduling
 * snapshot must equal a rebuild (verify_snapshot).
 *
 * The informers are fed synchronously from the API's event log (no
 * reflector threads), so a run depends on its seed only. A failure prints
 * the seed and the step; PRD_TEST_SEED=N runs that seed alone. */
#include "testutil.h"
#include "driver/host.h"
#include "kube/informer.h"
#include "ops/metrics.h"
#include "provreq/controller.h"
#include "util/rand.h"
#include "util/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 (1714557600LL * PRD_NS_PER_SEC)
#define SEC PRD_NS_PER_SEC

#define CC "check-capacity.autoscaling.x-k8s.io"
#define ATOMIC "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

static clk fake;

typedef struct world {
	memapi *m;
	kube_api api;
	state_db *db;
	cloud_drivers drivers;
	cloud_host_impl host;
	pr_ctl *ctl;
	kube_intern *in;
	kube_informer *inf[4];
	const kube_resource *res[4];
	uint64_t rv[4];             /* what each informer was fed up to */
	uint64_t skipped;           /* requests not decided, summed over passes */
} world;

static int host_request(void *ud, const char *method, const char *path, const char *ct, const char *body,
			size_t len, long *status, char **resp, size_t *resp_len, prd_cloud_error *err)
{
	int rc = memapi_request(ud, method, path, ct, body, len, status, resp, resp_len);
	if(rc && err) {
		err->code = PRD_CLOUD_EIO;
		snprintf(err->message, sizeof(err->message), "%s %s: HTTP %ld", method, path, *status);
	}
	return rc ? PRD_CLOUD_EIO : 0;
}

static void world_open(world *w, bool full)
{
	static const kube_kind kinds[4] = { KUBE_KIND_NODE, KUBE_KIND_POD, KUBE_KIND_PODTEMPLATE, KUBE_KIND_PROVREQ };
	const kube_store_ops *ops = kube_informer_store_ops();
	state_config sc;
	pr_config cfg;
	pr_informers pi;
	prd_err e;
	char path[600];
	const char *b = getenv("PRD_BUILDDIR");
	int i;
	memset(w, 0, sizeof(*w));
	CU_ASSERT_EQUAL_FATAL(memapi_new(&fake, 0, &w->m), 0);
	w->api = kube_api_from_memapi(w->m);
	state_config_default(&sc);
	CU_ASSERT_EQUAL_FATAL(state_open(":memory:", &fake, &sc, &w->db, &e), 0);
	cloud_drivers_init(&w->drivers);
	snprintf(path, sizeof(path), "%s/tests/drivers/.libs/drv_example.so", b ? b : ".");
	cloud_host_init(&w->host, "driver/example", &fake, host_request, w->m);
	CU_ASSERT_EQUAL_FATAL(cloud_drivers_load(&w->drivers, path, &w->host.host, "small 0 6 0 4 16Gi 110\n", NULL, &e),
			      0);
	pr_config_default(&cfg);
	cfg.provision_timeout_ns = 4 * 60 * SEC;
	cfg.full_passes = full;
	cfg.verify_snapshot = true; /* and every kept snapshot against a rebuild */
	CU_ASSERT_EQUAL_FATAL(pr_ctl_new(&cfg, &fake, &w->api, w->db, &w->drivers, &w->ctl, &e), 0);
	w->in = kube_intern_new();
	w->res[0] = memapi_resource_for_kind(w->m, "v1", "Node");
	w->res[1] = memapi_resource_for_kind(w->m, "v1", "Pod");
	w->res[2] = memapi_resource_for_kind(w->m, "v1", "PodTemplate");
	w->res[3] = memapi_resource_for_kind(w->m, "autoscaling.x-k8s.io/v1", "ProvisioningRequest");
	for(i = 0; i < 4; i++) {
		kube_informer_opts o;
		memset(&o, 0, sizeof(o));
		o.kind = kinds[i];
		o.intern = w->in;
		CU_ASSERT_EQUAL_FATAL(kube_informer_new(&o, &w->inf[i], &e), 0);
		/* An empty first list; everything after comes as events. */
		ops->list_begin(w->inf[i]);
		ops->list_end(w->inf[i], true, "0");
	}
	memset(&pi, 0, sizeof(pi)); /* no DRA informers */
	pi.intern = w->in;
	pi.nodes = w->inf[0];
	pi.pods = w->inf[1];
	pi.podtemplates = w->inf[2];
	pi.provreqs = w->inf[3];
	pr_ctl_use_informers(w->ctl, &pi);
}

static void world_close(world *w)
{
	int i;
	pr_ctl_free(w->ctl);
	for(i = 0; i < 4; i++)
		kube_informer_free(w->inf[i]);
	kube_intern_free(w->in);
	cloud_drivers_free(&w->drivers);
	state_close(w->db);
	memapi_free(w->m);
}

static int feed_event(void *ud, const char *type, json_object *obj)
{
	kube_event_type t = !strcmp(type, "ADDED") ? KUBE_EV_ADDED : !strcmp(type, "DELETED") ? KUBE_EV_DELETED
											   : KUBE_EV_MODIFIED;
	kube_informer_store_ops()->event(ud, t, obj);
	return 0;
}

/* Bring informer i up to date with the API. */
static void pump(world *w, int i)
{
	CU_ASSERT_EQUAL(memapi_events_since(w->m, w->res[i], NULL, w->rv[i], feed_event, w->inf[i], &w->rv[i]), 0);
}

static void post(world *w, const char *path, const char *yaml)
{
	json_object *o;
	prd_err e;
	CU_ASSERT_EQUAL_FATAL(yj_parse_one(yaml, strlen(yaml), &o, &e), 0);
	kube_api_call(&w->api, "POST", path, NULL, o, NULL, NULL, &e);
	json_object_put(o);
}

static void call(world *w, const char *method, const char *path, const char *json)
{
	json_object *o = json ? json_tokener_parse(json) : NULL;
	prd_err e;
	kube_api_call(&w->api, method, path, json ? "application/merge-patch+json" : NULL, o, NULL, NULL, &e);
	json_object_put(o);
}

static void add_node(world *w, const char *name, int cpu)
{
	char y[1400];
	snprintf(y, sizeof(y),
		 "metadata: {name: %s, labels: {kubernetes.io/hostname: %s}}\n"
		 "status:\n  allocatable: {cpu: \"%d\", memory: 16Gi, pods: \"110\"}\n"
		 "  conditions: [{type: Ready, status: \"True\"}]\n", name, name, cpu);
	post(w, "/api/v1/nodes", y);
}

static void add_template(world *w, const char *name, int cpu)
{
	char y[1400];
	snprintf(y, sizeof(y),
		 "metadata: {name: %s}\n"
		 "template:\n  metadata: {labels: {app: %s}}\n"
		 "  spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: \"%d\", memory: 1Gi}}}]}\n",
		 name, name, cpu);
	post(w, "/api/v1/namespaces/r/podtemplates", y);
}

static void add_pr(world *w, const char *name, const char *cls, const char *tpl, int count, bool no_retry)
{
	char y[1400];
	snprintf(y, sizeof(y),
		 "metadata: {name: %s}\n"
		 "spec:\n  provisioningClassName: %s\n  podSets: [{podTemplateRef: {name: %s}, count: %d}]\n%s",
		 name, cls, tpl, count, no_retry ? "  parameters: {noRetry: \"true\"}\n" : "");
	post(w, "/apis/autoscaling.x-k8s.io/v1/namespaces/r/provisioningrequests", y);
}

static void add_consumer(world *w, const char *name, const char *pr, const char *node)
{
	char y[1400];
	snprintf(y, sizeof(y),
		 "metadata: {name: %s, annotations: {autoscaling.x-k8s.io/consume-provisioning-request: %s}}\n"
		 "spec: {nodeName: %s, containers: [{name: c, image: x, resources: {requests: {cpu: \"1\"}}}]}\n"
		 "status: {phase: Running}\n", name, pr, node);
	post(w, "/api/v1/namespaces/r/pods", y);
}

/* The driver's instances that have no Node yet register (Ready). */
static void register_instances(world *w)
{
	cloud_driver *d = w->drivers.v[0];
	prd_cloud_instance *v = NULL;
	size_t n = 0, i;
	prd_cloud_error de;
	if(d->api->instances(d->state, "small", &v, &n, &de))
		return;
	for(i = 0; i < n; i++) {
		char path[300];
		json_object *o = NULL;
		prd_err e;
		if(!v[i].node_name)
			continue;
		snprintf(path, sizeof(path), "/api/v1/nodes/%s", v[i].node_name);
		if(kube_api_call(&w->api, "GET", path, NULL, NULL, &o, NULL, &e) == PRD_ENOTFOUND)
			add_node(w, v[i].node_name, 4);
		json_object_put(o);
	}
	d->api->release_instances(d->state, v, n);
}

/* Every request's conditions as one line each, sorted by the API's list
 * order (by name). Caller frees. */
static char *outcome(world *w)
{
	json_object *o = NULL, *items;
	prd_err e;
	size_t i, k;
	char *out = calloc(1, 1);
	size_t len = 0;
	if(kube_api_call(&w->api, "GET", "/apis/autoscaling.x-k8s.io/v1/namespaces/r/provisioningrequests", NULL, NULL,
			 &o, NULL, &e))
		return out;
	items = json_object_object_get(o, "items");
	for(i = 0; items && i < json_object_array_length(items); i++) {
		json_object *it = json_object_array_get_idx(items, i);
		json_object *cs = json_object_object_get(json_object_object_get(it, "status"), "conditions");
		char line[2048];
		size_t n = (size_t)snprintf(line, sizeof(line), "%s:",
					    json_object_get_string(json_object_object_get(
						    json_object_object_get(it, "metadata"), "name")));
		for(k = 0; cs && k < json_object_array_length(cs) && n < sizeof(line); k++) {
			json_object *c = json_object_array_get_idx(cs, k);
			n += (size_t)snprintf(line + n, sizeof(line) - n, " %s=%s/%s@%s",
					      json_object_get_string(json_object_object_get(c, "type")),
					      json_object_get_string(json_object_object_get(c, "status")),
					      json_object_get_string(json_object_object_get(c, "reason")),
					      json_object_get_string(json_object_object_get(c, "lastTransitionTime")));
		}
		if(n >= sizeof(line))
			n = sizeof(line) - 1;
		out = realloc(out, len + n + 2);
		memcpy(out + len, line, n);
		len += n;
		out[len++] = '\n';
		out[len] = '\0';
	}
	json_object_put(o);
	return out;
}

static int32_t target_of(world *w)
{
	cloud_driver *d = w->drivers.v[0];
	prd_cloud_node_group *g = NULL;
	size_t n = 0;
	prd_cloud_error de;
	int32_t t = -1;
	if(d->api->node_groups(d->state, &g, &n, &de) == 0 && n)
		t = g[0].target_size;
	d->api->release_node_groups(d->state, g, n);
	return t;
}

/* One random event, the same in both worlds. */
static void step_event(world *ws, uint64_t *rng, int step, int *nn, int *np, int *nr)
{
	int what = (int)(prd_splitmix64(rng) % 14), i;
	uint64_t a = prd_splitmix64(rng), b = prd_splitmix64(rng);
	char name[64], path[200], js[300];
	switch(what) {
	case 0: /* a node registers */
		snprintf(name, sizeof(name), "n%d", ++*nn);
		for(i = 0; i < 2; i++)
			add_node(&ws[i], name, 1 + (int)(a % 6));
		break;
	case 1: /* a node turns NotReady or Ready */
		snprintf(path, sizeof(path), "/api/v1/nodes/n%d/status", (int)(a % (uint64_t)(*nn + 1)));
		snprintf(js, sizeof(js), "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
			 b % 2 ? "True" : "False");
		for(i = 0; i < 2; i++)
			call(&ws[i], "PATCH", path, js);
		break;
	case 2: /* a node is deleted (perhaps one the driver made) */
		if(b % 3 == 0)
			snprintf(path, sizeof(path), "/api/v1/nodes/small-%d", (int)(a % 6));
		else
			snprintf(path, sizeof(path), "/api/v1/nodes/n%d", (int)(a % (uint64_t)(*nn + 1)));
		for(i = 0; i < 2; i++)
			call(&ws[i], "DELETE", path, NULL);
		break;
	case 3:
	case 4: /* a consumer pod is bound */
		snprintf(name, sizeof(name), "p%d", ++*np);
		snprintf(js, sizeof(js), "q%d", 1 + (int)(a % (uint64_t)(*nr + 1)));
		snprintf(path, sizeof(path), "n%d", (int)(b % (uint64_t)(*nn + 1)));
		for(i = 0; i < 2; i++)
			add_consumer(&ws[i], name, js, path);
		break;
	case 5: /* a pod is deleted */
		snprintf(path, sizeof(path), "/api/v1/namespaces/r/pods/p%d", 1 + (int)(a % (uint64_t)(*np + 1)));
		for(i = 0; i < 2; i++)
			call(&ws[i], "DELETE", path, NULL);
		break;
	case 6:
	case 7: /* a check-capacity request */
		snprintf(name, sizeof(name), "q%d", ++*nr);
		for(i = 0; i < 2; i++)
			add_pr(&ws[i], name, CC, b % 5 ? "one" : "late", 1 + (int)(a % 6), b % 3 == 0);
		break;
	case 8: /* an atomic request */
		snprintf(name, sizeof(name), "q%d", ++*nr);
		for(i = 0; i < 2; i++)
			add_pr(&ws[i], name, ATOMIC, "two", 1 + (int)(a % 5), b % 4 == 0);
		break;
	case 9: /* a request is deleted */
		snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/r/provisioningrequests/q%d",
			 1 + (int)(a % (uint64_t)(*nr + 1)));
		for(i = 0; i < 2; i++)
			call(&ws[i], "DELETE", path, NULL);
		break;
	case 10: /* the late template arrives, or goes again, or a template changes */
		if(b % 3 == 2) {
			snprintf(path, sizeof(path), "/api/v1/namespaces/r/podtemplates/%s", a % 2 ? "one" : "two");
			snprintf(js, sizeof(js),
				 "{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\","
				 "\"resources\":{\"requests\":{\"cpu\":\"%d\",\"memory\":\"1Gi\"}}}]}}}",
				 1 + (int)(a % 3));
			for(i = 0; i < 2; i++)
				call(&ws[i], "PATCH", path, js);
			break;
		}
		for(i = 0; i < 2; i++) {
			if(b % 2)
				add_template(&ws[i], "late", 1);
			else
				call(&ws[i], "DELETE", "/api/v1/namespaces/r/podtemplates/late", NULL);
		}
		break;
	case 11: /* the driver's new instances register */
		for(i = 0; i < 2; i++)
			register_instances(&ws[i]);
		break;
	default: /* time passes: seconds, or minutes */
		clk_fake_advance(&fake, (int64_t)(b % 4 ? 1 + a % 20 : 30 + a % 300) * SEC);
		break;
	}
	(void)step;
}

/* Run one seed; false (after saying why) when the worlds differ. */
static bool run_seed(uint64_t seed, int steps)
{
	world ws[2];
	uint64_t rng = seed;
	int step, i, nn = 0, np = 0, nr = 0;
	bool same = true;
	clk_fake_init(&fake, T0);
	metrics_shutdown();
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	world_open(&ws[0], false);
	world_open(&ws[1], true);
	for(i = 0; i < 2; i++) {
		add_template(&ws[i], "one", 1);
		add_template(&ws[i], "two", 2);
		add_node(&ws[i], "n0", 4);
	}
	for(step = 0; step < steps && same; step++) {
		/* Sometimes a cache trails the API for a pass (our own status
		 * writes not yet seen, a node change arriving late). */
		uint64_t lag = prd_splitmix64(&rng);
		char *oa, *ob;
		const pr_stats *sa, *sb;
		step_event(ws, &rng, step, &nn, &np, &nr);
		for(i = 0; i < 2; i++) {
			int k;
			prd_err e;
			for(k = 0; k < 4; k++)
				if(lag % 5 || (int)((lag >> 8) % 4) != k)
					pump(&ws[i], k);
			CU_ASSERT_EQUAL(pr_ctl_pass(ws[i].ctl, NULL, &e), 0);
			ws[i].skipped += pr_ctl_stats(ws[i].ctl)->requests_seen - pr_ctl_stats(ws[i].ctl)->requests_decided;
		}
		oa = outcome(&ws[0]);
		ob = outcome(&ws[1]);
		sa = pr_ctl_stats(ws[0].ctl);
		sb = pr_ctl_stats(ws[1].ctl);
		if(strcmp(oa, ob) || sa->status_writes != sb->status_writes || sa->events != sb->events ||
		   sa->scaleups_started != sb->scaleups_started || sa->scaleups_rolled_back != sb->scaleups_rolled_back ||
		   sa->scaleups_succeeded != sb->scaleups_succeeded || target_of(&ws[0]) != target_of(&ws[1])) {
			fprintf(stderr,
				"seed %llu step %d: deciding only affected requests differs from deciding all\n"
				"-- affected only (writes %llu, events %llu, scale-ups %llu/%llu/%llu, target %d):\n%s"
				"-- all (writes %llu, events %llu, scale-ups %llu/%llu/%llu, target %d):\n%s",
				(unsigned long long)seed, step, (unsigned long long)sa->status_writes,
				(unsigned long long)sa->events, (unsigned long long)sa->scaleups_started,
				(unsigned long long)sa->scaleups_succeeded, (unsigned long long)sa->scaleups_rolled_back,
				(int)target_of(&ws[0]), oa, (unsigned long long)sb->status_writes,
				(unsigned long long)sb->events, (unsigned long long)sb->scaleups_started,
				(unsigned long long)sb->scaleups_succeeded, (unsigned long long)sb->scaleups_rolled_back,
				(int)target_of(&ws[1]), ob);
			same = false;
		}
		free(oa);
		free(ob);
	}
	if(same)
		fprintf(stderr, "seed %llu: %d steps, %llu status writes, %llu scale-ups started, %llu decisions skipped\n",
			(unsigned long long)seed, steps, (unsigned long long)pr_ctl_stats(ws[0].ctl)->status_writes,
			(unsigned long long)pr_ctl_stats(ws[0].ctl)->scaleups_started, (unsigned long long)ws[0].skipped);
	CU_ASSERT_EQUAL(pr_ctl_stats(ws[0].ctl)->snapshot_mismatches, 0);
	CU_ASSERT_EQUAL(pr_ctl_stats(ws[1].ctl)->snapshot_mismatches, 0);
	/* Deciding every request in world A would make the test vacuous. */
	CU_ASSERT_TRUE(ws[0].skipped > 0);
	CU_ASSERT_EQUAL(ws[1].skipped, 0);
	world_close(&ws[0]);
	world_close(&ws[1]);
	metrics_shutdown();
	return same;
}

static void test_affected_equals_all(void)
{
	const char *env = getenv("PRD_TEST_SEED");
	uint64_t seed;
	if(env && *env) {
		CU_ASSERT_TRUE(run_seed(strtoull(env, NULL, 10), 400));
		return;
	}
	for(seed = 1; seed <= 8; seed++)
		if(!run_seed(seed, 250)) {
			CU_FAIL("deciding only affected requests differs (see the seed above)");
			return;
		}
}

/* A decision's status write goes out at the end of the pass; when it
 * fails, the request is decided again 5 s later even though nothing in
 * the caches names it. Catches a retry time that reaches the pass's wake
 * but not what deciding only affected requests remembers of the request
 * (its booking expiry, 10 minutes away): the status would stay unwritten.
 * (A 500 may have been applied: the retry first writes the release of
 * the booking whose fate is unknown, decide.c leftover_fenced, and the
 * pass after it books again.) */
static void test_failed_write_is_retried(void)
{
	world w;
	prd_err e;
	int i;
	char *o;
	clk_fake_init(&fake, T0);
	metrics_shutdown();
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	world_open(&w, false);
	add_template(&w, "one", 1);
	add_node(&w, "n0", 4);
	add_pr(&w, "late", CC, "one", 2, false);
	memapi_inject_fault(w.m, "PATCH", "/apis/autoscaling.x-k8s.io/v1/namespaces/r/provisioningrequests/late/status",
			    500, 1);
	for(i = 0; i < 4; i++)
		pump(&w, i);
	CU_ASSERT_EQUAL(pr_ctl_pass(w.ctl, NULL, &e), 0);
	CU_ASSERT_EQUAL(pr_ctl_stats(w.ctl)->status_writes, 0);
	/* Nothing changes in the caches; the retry time comes. */
	clk_fake_advance(&fake, 6 * SEC);
	CU_ASSERT_EQUAL(pr_ctl_pass(w.ctl, NULL, &e), 0);
	CU_ASSERT_EQUAL(pr_ctl_stats(w.ctl)->status_writes, 1);
	for(i = 0; i < 4; i++)
		pump(&w, i);
	clk_fake_advance(&fake, SEC);
	CU_ASSERT_EQUAL(pr_ctl_pass(w.ctl, NULL, &e), 0);
	CU_ASSERT_EQUAL(pr_ctl_stats(w.ctl)->status_writes, 2);
	o = outcome(&w);
	CU_ASSERT_PTR_NOT_NULL(strstr(o, "CapacityIsFound"));
	if(!strstr(o, "CapacityIsFound"))
		fprintf(stderr, "after the retry:\n%s", o);
	free(o);
	world_close(&w);
	metrics_shutdown();
}

static const test_case cases[] = {
	{ "deciding affected requests equals deciding all", test_affected_equals_all },
	{ "a failed deferred status write is retried", test_failed_write_is_retried },
	{ NULL, NULL }
};

TEST_MAIN("controller_dirty", cases)

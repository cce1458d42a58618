/* Integration tests of the pool reconciler against the in-memory API:
 * following nodes, clamping, leaving other keys and pools alone, debounced
 * bursts, conflicts, bad annotations, opting out. */
#include "testutil.h"
#include "kube/memapi.h"
#include "ops/metrics.h"
#include "pools/pools.h"
#include "util/str.h"

#include <stdio.h>
#include <string.h>

#define POOLS "/apis/capsule.clastix.io/v1beta2/resourcepools"

typedef struct fixture {
	clk clock;
	memapi *m;
	kube_api inner;          /* the store */
	kube_api api;            /* counting wrapper the reconciler uses */
	unsigned long patches;   /* PATCHes of ResourcePools */
	/* Run once before the next ResourcePool PATCH reaches the store: a
	 * concurrent writer. */
	void (*before_patch)(struct fixture *f);
	pool_ctl *ctl;
} fixture;

static fixture F;

/* What the metrics hooks were told last. */
static struct {
	size_t nodes;
	double cpu;
	bool cpu_clamped;
	int forgets, writes;
} M;

static void m_nodes(void *ud, const char *pool, size_t n)
{
	(void)ud;
	(void)pool;
	M.nodes = n;
}

static void m_populated(void *ud, const char *pool, const char *key, double amount, bool clamped)
{
	(void)ud;
	if(!strcmp(pool, "busy") && !strcmp(key, "requests.cpu")) {
		M.cpu = amount;
		M.cpu_clamped = clamped;
	}
}

static void m_update(void *ud, const char *pool, const char *result)
{
	(void)ud;
	(void)pool;
	if(!strcmp(result, "written"))
		M.writes++;
}

static void m_forget(void *ud, const char *pool)
{
	(void)ud;
	(void)pool;
	M.forgets++;
}

static int counting(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
		    long *status, char **resp, size_t *rlen)
{
	fixture *f = ud;
	if(!strcmp(method, "PATCH") && str_starts_with(path, POOLS "/")) {
		f->patches++;
		if(f->before_patch) {
			void (*hook)(fixture *) = f->before_patch;
			f->before_patch = NULL;
			hook(f);
		}
	}
	return f->inner.request(f->inner.ud, method, path, ct, body, len, status, resp, rlen);
}

static void fx_up_resync(int64_t debounce_ns, int64_t resync_ns)
{
	pool_opts o = { 0 };
	prd_err e;

	memset(&F, 0, sizeof(F));
	clk_fake_init(&F.clock, 1700000000LL * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL_FATAL(memapi_new(&F.clock, 0, &F.m), 0);
	F.inner = kube_api_from_memapi(F.m);
	F.api.request = counting;
	F.api.ud = &F;
	o.api = &F.api;
	o.clock = &F.clock;
	o.debounce_ns = debounce_ns;
	o.resync_ns = resync_ns;
	o.metrics.nodes = m_nodes;
	o.metrics.populated = m_populated;
	o.metrics.update = m_update;
	o.metrics.forget = m_forget;
	memset(&M, 0, sizeof(M));
	CU_ASSERT_EQUAL_FATAL(pool_ctl_new(&o, &F.ctl, &e), 0);
}

static void fx_up(int64_t debounce_ns)
{
	fx_up_resync(debounce_ns, 0);
}

static void fx_down(void)
{
	pool_ctl_free(F.ctl);
	memapi_free(F.m);
	memset(&F, 0, sizeof(F));
}

/* Send a request with a JSON text body straight to the store. */
static int call(const char *method, const char *path, const char *ct, const char *body, json_object **out)
{
	json_object *b = body ? json_tokener_parse(body) : NULL;
	prd_err e;
	int rc;
	CU_ASSERT_FATAL(!body || b);
	rc = kube_api_call(&F.inner, method, path, ct, b, out, NULL, &e);
	json_object_put(b);
	return rc;
}

static void add_node(const char *name, const char *pool, const char *cpu, const char *mem)
{
	char body[1024];
	snprintf(body, sizeof(body),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"pool\":\"%s\"}},"
		 "\"status\":{\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"110\"},"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
		 name, pool, cpu, mem);
	CU_ASSERT_EQUAL_FATAL(call("POST", "/api/v1/nodes", NULL, body, NULL), 0);
	/* The status subresource, as the kubelet (or kwok) would. */
	char path[256];
	snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", name);
	CU_ASSERT_EQUAL_FATAL(call("PATCH", path, "application/merge-patch+json", body, NULL), 0);
}

static void del_node(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
	CU_ASSERT_EQUAL(call("DELETE", path, NULL, NULL, NULL), 0);
}

/* Create a pool with annotations (JSON object text) and hard (JSON); set
 * status.allocation.used when used is given. */
static void add_pool(const char *name, const char *ann, const char *hard, const char *used)
{
	char body[2048], path[256];
	snprintf(body, sizeof(body),
		 "{\"apiVersion\":\"capsule.clastix.io/v1beta2\",\"kind\":\"ResourcePool\",\"metadata\":{\"name\":"
		 "\"%s\",\"annotations\":%s},\"spec\":{\"quota\":{\"hard\":%s},\"selectors\":[{\"matchLabels\":"
		 "{\"tenant\":\"t\"}}]}}",
		 name, ann, hard);
	CU_ASSERT_EQUAL_FATAL(call("POST", POOLS, NULL, body, NULL), 0);
	if(used) {
		snprintf(path, sizeof(path), POOLS "/%s/status", name);
		snprintf(body, sizeof(body), "{\"status\":{\"allocation\":{\"used\":%s}}}", used);
		CU_ASSERT_EQUAL_FATAL(call("PATCH", path, "application/merge-patch+json", body, NULL), 0);
	}
}

static json_object *get_pool(const char *name)
{
	char path[256];
	json_object *o = NULL;
	snprintf(path, sizeof(path), POOLS "/%s", name);
	CU_ASSERT_EQUAL_FATAL(call("GET", path, NULL, NULL, &o), 0);
	return o;
}

/* spec.quota.hard[key] of the pool ("-" when absent), in buf. */
static const char *hard(const char *name, const char *key, char out[64])
{
	json_object *o = get_pool(name), *h = NULL, *v = NULL;
	str_copy(out, 64, "-");
	json_object_object_get_ex(json_object_object_get(json_object_object_get(o, "spec"), "quota"), "hard", &h);
	if(json_object_object_get_ex(h, key, &v))
		str_copy(out, 64, json_object_get_string(v));
	json_object_put(o);
	return out;
}

static const char *annotation(const char *name, const char *key, char out[256])
{
	json_object *o = get_pool(name), *a = NULL, *v = NULL;
	str_copy(out, 256, "-");
	json_object_object_get_ex(json_object_object_get(o, "metadata"), "annotations", &a);
	if(json_object_object_get_ex(a, key, &v))
		str_copy(out, 256, json_object_get_string(v));
	json_object_put(o);
	return out;
}

static char *rv_of(const char *name)
{
	json_object *o = get_pool(name);
	char *rv = str_dup(json_object_get_string(
		json_object_object_get(json_object_object_get(o, "metadata"), "resourceVersion")));
	json_object_put(o);
	return rv;
}

/* Events about pool `name` with `reason`; *msg (if given) gets the last
 * message (static buffer). */
static int events(const char *name, const char *reason, const char **msg)
{
	static char last[1100];
	json_object *list = NULL, *items;
	size_t i, n;
	int count = 0;

	CU_ASSERT_EQUAL_FATAL(call("GET", "/api/v1/namespaces/default/events", NULL, NULL, &list), 0);
	items = json_object_object_get(list, "items");
	n = json_object_array_length(items);
	for(i = 0; i < n; i++) {
		json_object *ev = json_object_array_get_idx(items, i);
		json_object *inv = json_object_object_get(ev, "involvedObject");
		if(strcmp(json_object_get_string(json_object_object_get(inv, "name")), name) ||
		   strcmp(json_object_get_string(json_object_object_get(ev, "reason")), reason))
			continue;
		count++;
		str_copy(last, sizeof(last), json_object_get_string(json_object_object_get(ev, "message")));
	}
	if(msg)
		*msg = last;
	json_object_put(list);
	return count;
}

/* One sync with the store's current nodes. */
static void sync_now(void)
{
	pool_nodelist nl;
	prd_err e;
	CU_ASSERT_EQUAL_FATAL(pool_nodelist_load(&F.inner, &nl, &e), 0);
	CU_ASSERT_EQUAL(nl.skipped, 0);
	CU_ASSERT_EQUAL(pool_ctl_sync(F.ctl, nl.nodes, nl.n, &e), 0);
	pool_nodelist_free(&nl);
}

#define GOLD "{\"" POOL_ANN_SELECTOR "\":\"pool=gold\"}"

static void test_follows_nodes(void)
{
	char b[64], a[256];
	const char *msg;

	fx_up(0);
	add_node("g1", "gold", "4", "16Gi");
	add_node("g2", "gold", "2500m", "8Gi");
	add_node("s1", "silver", "64", "256Gi");
	add_pool("gold", GOLD, "{}", NULL);
	sync_now();
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "6500m");
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.memory", b), "24Gi");
	CU_ASSERT_STRING_EQUAL(hard("gold", "pods", b), "220");
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.ephemeral-storage", b), "0");
	CU_ASSERT_TRUE(str_starts_with(annotation("gold", POOL_ANN_LAST, a), "nodes=2,time=2023-11-14T22:13:20Z"));
	CU_ASSERT_STRING_EQUAL(annotation("gold", POOL_ANN_KEYS, a),
			       "pods,requests.cpu,requests.ephemeral-storage,requests.memory");
	CU_ASSERT_EQUAL(events("gold", "Populated", &msg), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "requests.cpu (unset) -> 6500m"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "2 node(s)"));

	/* A node joins. */
	add_node("g3", "gold", "1", "1Gi");
	pool_ctl_mark_dirty(F.ctl);
	CU_ASSERT_FALSE(pool_ctl_due(F.ctl, NULL));      /* within the 2 s default */
	clk_fake_advance(&F.clock, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(pool_ctl_due(F.ctl, NULL));
	sync_now();
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "7500m");
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.memory", b), "25Gi");
	CU_ASSERT_TRUE(str_starts_with(annotation("gold", POOL_ANN_LAST, a), "nodes=3,"));

	/* Nodes leave; a silver node changing does not write the gold pool. */
	del_node("g1");
	del_node("g3");
	sync_now();
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "2500m");
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.memory", b), "8Gi");
	unsigned long before = F.patches;
	del_node("s1");
	sync_now();
	CU_ASSERT_EQUAL(F.patches, before);
	CU_ASSERT_EQUAL(events("gold", "Populated", NULL), 3);
	fx_down();
}

static void test_clamped(void)
{
	char b[64];
	const char *msg;
	pool_ctl_stats st;

	fx_up(0);
	add_node("g1", "gold", "4", "16Gi");
	add_pool("busy", GOLD, "{\"requests.cpu\":\"10\"}", "{\"requests.cpu\":\"6\",\"requests.memory\":\"1Gi\"}");
	sync_now();
	CU_ASSERT_STRING_EQUAL(hard("busy", "requests.cpu", b), "6");
	CU_ASSERT_STRING_EQUAL(hard("busy", "requests.memory", b), "16Gi");
	CU_ASSERT_EQUAL(events("busy", "PopulationClamped", &msg), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "requests.cpu"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "nodes provide 4"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "claims hold 6"));
	pool_ctl_get_stats(F.ctl, &st);
	CU_ASSERT_EQUAL(st.clamped, 1);
	/* The same standing clamp is not repeated on every sync... */
	pool_ctl_mark_dirty(F.ctl);
	sync_now();
	CU_ASSERT_EQUAL(events("busy", "PopulationClamped", NULL), 1);
	/* ...but is again once the repeat window passed. */
	clk_fake_advance(&F.clock, 601 * PRD_NS_PER_SEC);
	sync_now();
	CU_ASSERT_EQUAL(events("busy", "PopulationClamped", NULL), 2);
	fx_down();
}

static void test_untouched(void)
{
	char b[64];
	char *rv_plain, *rv_other;

	fx_up(0);
	add_node("g1", "gold", "4", "16Gi");
	add_pool("mixed", "{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_RESOURCES "\":\"cpu\"}",
		 "{\"requests.storage\":\"5Gi\",\"count/persistentvolumeclaims\":\"3\",\"requests.memory\":\"1Gi\"}", NULL);
	add_pool("plain", "{\"team\":\"x\"}", "{\"requests.cpu\":\"1\"}", NULL);
	add_pool("other", "{\"provreqd.io/populate-from-nodez\":\"pool=gold\"}", "{\"requests.cpu\":\"2\"}", NULL);
	rv_plain = rv_of("plain");
	rv_other = rv_of("other");
	sync_now();
	CU_ASSERT_STRING_EQUAL(hard("mixed", "requests.cpu", b), "4");
	CU_ASSERT_STRING_EQUAL(hard("mixed", "requests.storage", b), "5Gi");
	CU_ASSERT_STRING_EQUAL(hard("mixed", "count/persistentvolumeclaims", b), "3");
	CU_ASSERT_STRING_EQUAL(hard("mixed", "requests.memory", b), "1Gi");   /* not listed: not ours */
	char *rv_now = rv_of("plain");
	CU_ASSERT_STRING_EQUAL(rv_now, rv_plain);
	free(rv_now);
	rv_now = rv_of("other");
	CU_ASSERT_STRING_EQUAL(rv_now, rv_other);
	free(rv_now);
	CU_ASSERT_EQUAL(F.patches, 1);
	free(rv_plain);
	free(rv_other);
	fx_down();
}

static void test_numeric_compare(void)
{
	fx_up(0);
	add_node("g1", "gold", "4", "16Gi");
	/* Same amounts, other spellings, with the annotations already right:
	 * nothing to write. */
	add_pool("same", "{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_KEYS
		 "\":\"pods,requests.cpu,requests.ephemeral-storage,requests.memory\",\"" POOL_ANN_LAST
		 "\":\"nodes=1,time=2023-01-01T00:00:00Z\"}",
		 "{\"requests.cpu\":\"4000m\",\"requests.memory\":\"16384Mi\",\"pods\":\"0.11k\","
		 "\"requests.ephemeral-storage\":\"0Gi\"}", NULL);
	sync_now();
	CU_ASSERT_EQUAL(F.patches, 0);
	fx_down();
}

/* Node changes arrive every 10 ms of fake time; the controller syncs
 * whenever it is due. */
static void test_burst_debounced(void)
{
	char name[32], b[64];
	pool_ctl_stats st;
	int64_t wait;
	int i;

	fx_up(2 * PRD_NS_PER_SEC);
	add_pool("gold", GOLD, "{}", NULL);
	for(i = 0; i < 500; i++) {
		snprintf(name, sizeof(name), "n%03d", i);
		add_node(name, "gold", "2", "4Gi");
		pool_ctl_mark_dirty(F.ctl);
		if(pool_ctl_due(F.ctl, NULL))
			sync_now();
		clk_fake_advance(&F.clock, 10 * PRD_NS_PER_MS);
	}
	/* The tail of the burst is picked up once the interval has passed. */
	CU_ASSERT_FALSE(pool_ctl_due(F.ctl, &wait));
	CU_ASSERT_TRUE(wait > 0 && wait <= 2 * PRD_NS_PER_SEC);
	clk_fake_advance(&F.clock, wait);
	CU_ASSERT_TRUE(pool_ctl_due(F.ctl, NULL));
	sync_now();
	CU_ASSERT_FALSE(pool_ctl_due(F.ctl, &wait));
	CU_ASSERT_EQUAL(wait, -1);
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "1k");
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.memory", b), "2000Gi");
	pool_ctl_get_stats(F.ctl, &st);
	/* 5 s of churn at one sync per 2 s: syncs at 0, 2, 4 s and the tail. */
	CU_ASSERT_TRUE(F.patches <= 4);
	CU_ASSERT_EQUAL(st.writes, F.patches);
	CU_ASSERT_TRUE(st.syncs <= 4);
	fx_down();
}

/* ResourcePools are not watched: with a resync interval, a pool created
 * (or edited) while no node changes is found at the next resync, and
 * without one it waits for a node event. */
static void test_resync_finds_new_pool(void)
{
	char b[64];
	int64_t wait;

	fx_up_resync(2 * PRD_NS_PER_SEC, 30 * PRD_NS_PER_SEC);
	add_node("n1", "gold", "4", "16Gi");
	CU_ASSERT_TRUE(pool_ctl_due(F.ctl, NULL));
	sync_now();
	add_pool("gold", GOLD, "{}", NULL); /* no pool_ctl_mark_dirty */
	CU_ASSERT_FALSE(pool_ctl_due(F.ctl, &wait));
	CU_ASSERT_EQUAL(wait, 30 * PRD_NS_PER_SEC);
	clk_fake_advance(&F.clock, 29 * PRD_NS_PER_SEC);
	CU_ASSERT_FALSE(pool_ctl_due(F.ctl, &wait));
	CU_ASSERT_EQUAL(wait, PRD_NS_PER_SEC);
	clk_fake_advance(&F.clock, wait);
	CU_ASSERT_TRUE_FATAL(pool_ctl_due(F.ctl, &wait));
	CU_ASSERT_EQUAL(wait, 0);
	sync_now();
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "4");
	/* The resync clock restarts at each sync. */
	CU_ASSERT_FALSE(pool_ctl_due(F.ctl, &wait));
	CU_ASSERT_EQUAL(wait, 30 * PRD_NS_PER_SEC);
	fx_down();

	fx_up(2 * PRD_NS_PER_SEC);
	sync_now();
	add_pool("gold", GOLD, "{}", NULL);
	clk_fake_advance(&F.clock, 3600 * PRD_NS_PER_SEC);
	CU_ASSERT_FALSE(pool_ctl_due(F.ctl, &wait));
	CU_ASSERT_EQUAL(wait, -1);
	fx_down();
}

static void concurrent_writer(fixture *f)
{
	(void)f;
	CU_ASSERT_EQUAL(call("PATCH", POOLS "/gold", "application/merge-patch+json",
			     "{\"metadata\":{\"annotations\":{\"someone\":\"else\"}},"
			     "\"spec\":{\"quota\":{\"hard\":{\"requests.storage\":\"7Gi\"}}}}", NULL), 0);
}

static void test_conflict_retried(void)
{
	char b[64], a[256];
	pool_ctl_stats st;

	fx_up(0);
	add_node("g1", "gold", "4", "16Gi");
	add_pool("gold", GOLD, "{}", NULL);
	F.before_patch = concurrent_writer;
	sync_now();
	pool_ctl_get_stats(F.ctl, &st);
	CU_ASSERT_EQUAL(st.conflicts, 1);
	CU_ASSERT_EQUAL(st.writes, 1);
	CU_ASSERT_EQUAL(F.patches, 2);
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "4");
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.storage", b), "7Gi");
	CU_ASSERT_STRING_EQUAL(annotation("gold", "someone", a), "else");

	/* A 409 answered by the store (injected) is retried as well. */
	add_node("g2", "gold", "4", "16Gi");
	memapi_inject_fault(F.m, "PATCH", POOLS "/gold", 409, 2);
	sync_now();
	pool_ctl_get_stats(F.ctl, &st);
	CU_ASSERT_EQUAL(st.conflicts, 3);
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "8");

	/* Conflicts past the retry budget: an error, and still dirty. */
	add_node("g3", "gold", "4", "16Gi");
	pool_ctl_mark_dirty(F.ctl);
	memapi_inject_fault(F.m, "PATCH", POOLS "/gold", 409, 100);
	sync_now();
	pool_ctl_get_stats(F.ctl, &st);
	CU_ASSERT_EQUAL(st.errors, 1);
	clk_fake_advance(&F.clock, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(pool_ctl_due(F.ctl, NULL));
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "8");
	memapi_inject_fault(F.m, "PATCH", POOLS "/gold", 409, 0);
	fx_down();
}

static void test_bad_annotations(void)
{
	static const struct { const char *name, *ann, *says; } t[] = {
		{ "bad-sel", "{\"" POOL_ANN_SELECTOR "\":\"pool in (gold\"}", POOL_ANN_SELECTOR },
		{ "bad-res", "{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_RESOURCES "\":\"cpu,disk\"}",
		  POOL_ANN_RESOURCES ": \"disk\"" },
		{ "bad-head", "{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_HEADROOM "\":\"cpu=much\"}",
		  POOL_ANN_HEADROOM },
		{ "bad-factor", "{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_FACTOR "\":\"x1.5\"}",
		  POOL_ANN_FACTOR },
	};
	pool_ctl_stats st;
	size_t i;
	char b[64];

	fx_up(0);
	add_node("g1", "gold", "4", "16Gi");
	for(i = 0; i < 4; i++)
		add_pool(t[i].name, t[i].ann, "{\"requests.cpu\":\"1\"}", NULL);
	sync_now();
	pool_ctl_mark_dirty(F.ctl);
	sync_now();
	for(i = 0; i < 4; i++) {
		const char *msg;
		CU_ASSERT_EQUAL(events(t[i].name, "InvalidPopulateAnnotation", &msg), 1);
		CU_ASSERT_PTR_NOT_NULL(strstr(msg, t[i].says));
		CU_ASSERT_STRING_EQUAL(hard(t[i].name, "requests.cpu", b), "1");
	}
	CU_ASSERT_EQUAL(F.patches, 0);
	pool_ctl_get_stats(F.ctl, &st);
	CU_ASSERT_EQUAL(st.invalid, 8);
	fx_down();
}

static void test_opt_out(void)
{
	char b[64];

	fx_up(0);
	add_node("g1", "gold", "4", "16Gi");
	add_pool("gold", GOLD, "{}", NULL);
	sync_now();
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "4");
	CU_ASSERT_EQUAL(call("PATCH", POOLS "/gold", "application/merge-patch+json",
			     "{\"metadata\":{\"annotations\":{\"" POOL_ANN_SELECTOR "\":null}}}", NULL), 0);
	add_node("g2", "gold", "4", "16Gi");
	unsigned long before = F.patches;
	sync_now();
	CU_ASSERT_EQUAL(F.patches, before);
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.cpu", b), "4");
	fx_down();
}

static void test_vanished_extended(void)
{
	char b[64], a[256];

	fx_up(0);
	CU_ASSERT_EQUAL_FATAL(call("POST", "/api/v1/nodes", NULL,
				   "{\"metadata\":{\"name\":\"gpu1\",\"labels\":{\"pool\":\"gold\"}},\"status\":{"
				   "\"allocatable\":{\"cpu\":\"8\",\"nvidia.com/gpu\":\"4\",\"example.com/fpga\":\"1\"},"
				   "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}", NULL), 0);
	CU_ASSERT_EQUAL_FATAL(call("PATCH", "/api/v1/nodes/gpu1/status", "application/merge-patch+json",
				   "{\"status\":{\"allocatable\":{\"cpu\":\"8\",\"nvidia.com/gpu\":\"4\","
				   "\"example.com/fpga\":\"1\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
				   NULL), 0);
	add_pool("gold", GOLD, "{}", "{\"requests.nvidia.com/gpu\":\"3\"}");
	sync_now();
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.nvidia.com/gpu", b), "4");
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.example.com/fpga", b), "1");
	del_node("gpu1");
	add_node("c1", "gold", "2", "1Gi");
	sync_now();
	/* Claimed GPUs stay (clamped), the unclaimed FPGA goes to zero and
	 * leaves management; neither key is deleted. */
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.nvidia.com/gpu", b), "3");
	CU_ASSERT_STRING_EQUAL(hard("gold", "requests.example.com/fpga", b), "0");
	CU_ASSERT_STRING_EQUAL(annotation("gold", POOL_ANN_KEYS, a),
			       "pods,requests.cpu,requests.ephemeral-storage,requests.memory,requests.nvidia.com/gpu");
	CU_ASSERT_EQUAL(events("gold", "PopulationClamped", NULL), 1);
	fx_down();
}

static void test_metrics_hooks(void)
{
	/* The hooks see node counts, amounts per key, clamps, and forget a
	 * pool that opts out or is deleted. */
	fx_up(0);
	add_node("g1", "gold", "1500m", "1Gi");
	add_node("g2", "gold", "1", "1Gi");
	add_pool("gold", GOLD, "{}", NULL);
	add_pool("busy", GOLD, "{}", "{\"requests.cpu\":\"3\"}");
	sync_now();
	CU_ASSERT_EQUAL(M.nodes, 2);
	CU_ASSERT_EQUAL(M.writes, 2);
	CU_ASSERT_DOUBLE_EQUAL(M.cpu, 3.0, 1e-9);   /* 2500m from the nodes, clamped to 3 */
	CU_ASSERT_TRUE(M.cpu_clamped);
	CU_ASSERT_EQUAL(call("DELETE", POOLS "/busy", NULL, NULL, NULL), 0);
	CU_ASSERT_EQUAL(call("PATCH", POOLS "/gold", "application/merge-patch+json",
			     "{\"metadata\":{\"annotations\":{\"" POOL_ANN_SELECTOR "\":null}}}", NULL), 0);
	sync_now();
	CU_ASSERT_EQUAL(M.forgets, 2);
	fx_down();
}

static void test_metrics_registry(void)
{
	pool_opts o = { 0 };
	pool_ctl *pc;
	hmap children;
	pool_nodelist nl;
	prd_err e;
	double v;

	fx_up(0);
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	hmap_init(&children, NULL);
	o.api = &F.api;
	o.clock = &F.clock;
	o.metrics = pool_metrics_registry(&children);
	CU_ASSERT_EQUAL_FATAL(pool_ctl_new(&o, &pc, &e), 0);
	add_node("g1", "gold", "1500m", "1Gi");
	add_node("g2", "gold", "1", "1Gi");
	add_pool("gold", GOLD, "{}", "{\"requests.memory\":\"3Gi\"}");
	CU_ASSERT_EQUAL_FATAL(pool_nodelist_load(&F.inner, &nl, &e), 0);
	CU_ASSERT_EQUAL(pool_ctl_sync(pc, nl.nodes, nl.n, &e), 0);
	CU_ASSERT_TRUE(metrics_get(M_POOL_NODES, METRICS_L("gold"), &v) && v == 2);
	CU_ASSERT_TRUE(metrics_get(M_POOL_POPULATED, METRICS_L("gold", "requests.cpu"), &v) && v == 2.5);
	CU_ASSERT_TRUE(metrics_get(M_POOL_CLAMPED, METRICS_L("gold", "requests.cpu"), &v) && v == 0);
	CU_ASSERT_TRUE(metrics_get(M_POOL_CLAMPED, METRICS_L("gold", "requests.memory"), &v) && v == 1);
	CU_ASSERT_TRUE(metrics_get(M_POOL_UPDATES, METRICS_L("gold", "written"), &v) && v == 1);
	/* Opting out removes the pool's gauges. */
	CU_ASSERT_EQUAL(call("PATCH", POOLS "/gold", "application/merge-patch+json",
			     "{\"metadata\":{\"annotations\":{\"" POOL_ANN_SELECTOR "\":null}}}", NULL), 0);
	CU_ASSERT_EQUAL(pool_ctl_sync(pc, nl.nodes, nl.n, &e), 0);
	CU_ASSERT_FALSE(metrics_get(M_POOL_NODES, METRICS_L("gold"), &v));
	CU_ASSERT_FALSE(metrics_get(M_POOL_POPULATED, METRICS_L("gold", "requests.cpu"), &v));
	CU_ASSERT_FALSE(metrics_get(M_POOL_CLAMPED, METRICS_L("gold", "requests.memory"), &v));
	CU_ASSERT_EQUAL(hmap_len(&children), 0);
	pool_nodelist_free(&nl);
	pool_ctl_free(pc);
	hmap_free(&children);
	metrics_shutdown();
	fx_down();
}

static const test_case cases[] = {
	{ "a pool follows nodes joining and leaving", test_follows_nodes },
	{ "clamped to what claims hold, with a Warning", test_clamped },
	{ "unmanaged keys and other pools untouched", test_untouched },
	{ "numeric comparison: no write for another spelling", test_numeric_compare },
	{ "500 node changes, debounced, a few writes", test_burst_debounced },
	{ "a new pool is found by the resync", test_resync_finds_new_pool },
	{ "409 Conflict re-read and retried, other writer kept", test_conflict_retried },
	{ "bad annotations: Warning Event, no change", test_bad_annotations },
	{ "opting out leaves the values", test_opt_out },
	{ "vanished extended resources", test_vanished_extended },
	{ "metrics hooks", test_metrics_hooks },
	{ "metrics registry families", test_metrics_registry },
	{ NULL, NULL }
};

TEST_MAIN("pools_ctl", cases)

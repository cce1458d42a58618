/* Unit tests for pool population arithmetic: the resource → quota key
 * mapping, annotation parsing, exact headroom and limits-factor
 * arithmetic, node selection and clamping. */
#include "testutil.h"
#include "pools/pools.h"

#include <stdio.h>
#include <string.h>

static kube_intern *in;

/* A Node decoded from a small JSON description. */
static kube_meta *node(const char *name, const char *labels, const char *alloc, bool ready, bool cordoned)
{
	char text[2048];
	json_object *o;
	kube_meta *m = NULL;
	prd_err e;

	snprintf(text, sizeof(text),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":%s},"
		 "\"spec\":{\"unschedulable\":%s},\"status\":{\"allocatable\":%s,"
		 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
		 name, labels, cordoned ? "true" : "false", alloc, ready ? "True" : "False");
	o = json_tokener_parse(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_NODE, o, in, &m, &e), 0);
	json_object_put(o);
	return m;
}

/* A ResourcePool with the given annotations (JSON object text), hard and
 * used maps. */
static kube_meta *pool(const char *ann, const char *hard, const char *used)
{
	char text[4096];
	json_object *o;
	kube_meta *m = NULL;
	prd_err e;

	snprintf(text, sizeof(text),
		 "{\"apiVersion\":\"capsule.clastix.io/v1beta2\",\"kind\":\"ResourcePool\",\"metadata\":{\"name\":"
		 "\"p\",\"annotations\":%s},\"spec\":{\"quota\":{\"hard\":%s}},\"status\":{\"allocation\":{\"used\":%s}}}",
		 ann, hard, used);
	o = json_tokener_parse(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_RESOURCEPOOL, o, in, &m, &e), 0);
	json_object_put(o);
	return m;
}

static const pool_entry *entry(const pool_plan *p, const char *key)
{
	size_t i;
	for(i = 0; i < p->n; i++)
		if(!strcmp(p->entries[i].key, key))
			return &p->entries[i];
	return NULL;
}

/* The canonical value of key in the plan ("-" when absent). */
static const char *val(const pool_plan *p, const char *key)
{
	static char b[8][QTY_STR_MAX];
	static int i;
	const pool_entry *e = entry(p, key);
	if(!e)
		return "-";
	i = (i + 1) % 8;
	return qty_str(&e->value, b[i]);
}

/* Parse the pool's annotations and compute its plan over nodes. */
static int plan_for(const kube_meta *pm, kube_meta **nodes, size_t n, pool_plan *out, prd_err *e)
{
	const kube_resourcepool *rp = kube_as_resourcepool(pm);
	pool_spec s;
	pool_filter f = { false, false };
	int rc = pool_spec_parse(rp->annotations, rp->nannotations, &s, e);
	if(rc)
		return rc;
	rc = pool_plan_compute(&s, rp, (const kube_node *const *)(const void *)nodes, n, &f, out, e);
	pool_spec_free(&s);
	return rc;
}

static void test_mapping_table(void)
{
	static const struct { const char *res, *key; } t[] = {
		{ "cpu", "requests.cpu" },
		{ "memory", "requests.memory" },
		{ "ephemeral-storage", "requests.ephemeral-storage" },
		{ "pods", "pods" },
		{ "hugepages-2Mi", "requests.hugepages-2Mi" },
		{ "hugepages-1Gi", "requests.hugepages-1Gi" },
		{ "nvidia.com/gpu", "requests.nvidia.com/gpu" },
		{ "example.com/foo-bar", "requests.example.com/foo-bar" },
		/* Not populated: no quota key in this scheme. */
		{ "storage", NULL },
		{ "attachable-volumes-aws-ebs", NULL },
		{ "kubernetes.io/batteries", NULL },
		{ "node.kubernetes.io/thing", NULL },
		{ "requests.example.com/x", NULL },
		{ "hugepages-", NULL },
		{ "Bad Name/x", NULL },
		{ "", NULL },
	};
	char key[POOL_KEY_MAX];
	size_t i;

	for(i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		bool ok = pool_quota_key(t[i].res, key, sizeof(key));
		CU_ASSERT_EQUAL(ok, t[i].key != NULL);
		if(ok && t[i].key)
			CU_ASSERT_STRING_EQUAL(key, t[i].key);
		if(!ok)
			CU_ASSERT_STRING_EQUAL(key, "");
	}
	/* Too small a buffer fails cleanly instead of cutting the key. */
	CU_ASSERT_FALSE(pool_quota_key("memory", key, 8));
	CU_ASSERT_STRING_EQUAL(key, "");
}

static void test_ratio_parse(void)
{
	pool_ratio r;
	prd_err e;

	CU_ASSERT_EQUAL(pool_ratio_parse("1.5", &r, &e), 0);
	CU_ASSERT_EQUAL(r.num, 15);
	CU_ASSERT_EQUAL(r.den, 10);
	CU_ASSERT_EQUAL(pool_ratio_parse("2", &r, &e), 0);
	CU_ASSERT_EQUAL(r.num, 2);
	CU_ASSERT_EQUAL(r.den, 1);
	CU_ASSERT_EQUAL(pool_ratio_parse(".125", &r, &e), 0);
	CU_ASSERT_EQUAL(r.num, 125);
	CU_ASSERT_EQUAL(r.den, 1000);
	CU_ASSERT_EQUAL(pool_ratio_parse("0.000000001", &r, &e), 0);
	CU_ASSERT_EQUAL(r.den, 1000000000);
	CU_ASSERT_EQUAL(pool_ratio_parse("0.0000000001", &r, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(pool_ratio_parse("-1", &r, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(pool_ratio_parse("1e3", &r, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(pool_ratio_parse("1.2.3", &r, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(pool_ratio_parse(".", &r, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(pool_ratio_parse("", &r, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(pool_ratio_parse("99999999999", &r, &e), PRD_ERANGE);
}

/* q × ratio with rounding, as canonical strings. */
static const char *scaled(const char *q, const char *ratio, int64_t gran)
{
	static char out[QTY_STR_MAX];
	pool_ratio r;
	qty a, b;
	CU_ASSERT_EQUAL_FATAL(qty_parse(q, &a, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(pool_ratio_parse(ratio, &r, NULL), 0);
	if(pool_qty_scale(&a, &r, gran, &b))
		return "ERANGE";
	return qty_str(&b, out);
}

static void test_scale_exact(void)
{
	CU_ASSERT_STRING_EQUAL(scaled("7", "1.5", PRD_NS_PER_MS), "10500m");
	CU_ASSERT_STRING_EQUAL(scaled("16Gi", "1.5", PRD_NS_PER_SEC), "24Gi");
	CU_ASSERT_STRING_EQUAL(scaled("3Gi", "1.1", PRD_NS_PER_SEC), "3543348019");   /* 3543348019.2 floored */
	CU_ASSERT_STRING_EQUAL(scaled("1", "0.3333", PRD_NS_PER_MS), "333m");
	CU_ASSERT_STRING_EQUAL(scaled("1", "0.3333", 1), "333300u");
	CU_ASSERT_STRING_EQUAL(scaled("100m", "1", PRD_NS_PER_MS), "100m");
	CU_ASSERT_STRING_EQUAL(scaled("0", "2", PRD_NS_PER_SEC), "0");
	/* Beyond int64 in base units still exact. */
	CU_ASSERT_STRING_EQUAL(scaled("1000E", "1.5", PRD_NS_PER_SEC), "1500E");
	CU_ASSERT_STRING_EQUAL(scaled("1e21", "2", PRD_NS_PER_SEC), "2e21");
	CU_ASSERT_STRING_EQUAL(scaled("4Ei", "1.5", PRD_NS_PER_SEC), "6Ei");
	/* Past the quantity range: an error, not a wrong number. */
	CU_ASSERT_STRING_EQUAL(scaled("1e29", "1000", PRD_NS_PER_SEC), "ERANGE");
	CU_ASSERT_EQUAL(pool_granularity("cpu"), PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(pool_granularity("memory"), PRD_NS_PER_SEC);
}

static void test_spec_parse_ok(void)
{
	const kube_kv ann[] = {
		{ POOL_ANN_SELECTOR, "pool=gold, zone in (a,b)" },
		{ POOL_ANN_RESOURCES, " cpu , memory,nvidia.com/gpu" },
		{ POOL_ANN_HEADROOM, "10%, memory=4Gi, nvidia.com/gpu=50%" },
		{ POOL_ANN_FACTOR, "1.5" },
	};
	pool_spec s;
	prd_err e;

	CU_ASSERT_EQUAL_FATAL(pool_spec_parse(ann, 4, &s, &e), 0);
	CU_ASSERT_EQUAL(s.nresources, 3);
	CU_ASSERT_STRING_EQUAL(s.resources[2], "nvidia.com/gpu");
	CU_ASSERT_EQUAL(s.nheadroom, 3);
	CU_ASSERT_PTR_NULL(s.headroom[0].resource);
	CU_ASSERT_TRUE(s.headroom[0].percent);
	CU_ASSERT_STRING_EQUAL(s.headroom[1].resource, "memory");
	CU_ASSERT_FALSE(s.headroom[1].percent);
	CU_ASSERT_TRUE(s.has_factor);
	CU_ASSERT_EQUAL(s.factor.num, 15);
	pool_spec_free(&s);

	/* Not opted in. */
	CU_ASSERT_EQUAL(pool_spec_parse(ann + 1, 3, &s, &e), PRD_ENOTFOUND);
	/* "" selects every node. */
	const kube_kv all[] = { { POOL_ANN_SELECTOR, "" } };
	CU_ASSERT_EQUAL_FATAL(pool_spec_parse(all, 1, &s, &e), 0);
	CU_ASSERT_TRUE(sel_is_everything(s.selector));
	CU_ASSERT_PTR_NULL(s.resources);
	pool_spec_free(&s);
}

static void test_spec_parse_errors(void)
{
	static const struct { const char *key, *value, *says; } t[] = {
		{ POOL_ANN_SELECTOR, "pool in (gold", POOL_ANN_SELECTOR ": bad label selector" },
		{ POOL_ANN_SELECTOR, "pool=gold=x", POOL_ANN_SELECTOR },
		{ POOL_ANN_RESOURCES, "cpu,storage", "\"storage\" is not a resource" },
		{ POOL_ANN_RESOURCES, "cpu,,memory", "empty item" },
		{ POOL_ANN_RESOURCES, "cpu,cpu", "listed twice" },
		{ POOL_ANN_RESOURCES, " ", "lists no resource" },
		{ POOL_ANN_HEADROOM, "ten percent", "not a percentage" },
		{ POOL_ANN_HEADROOM, "150%", "more than 100%" },
		{ POOL_ANN_HEADROOM, "cpu=lots", "item \"cpu=lots\": bad quantity" },
		{ POOL_ANN_HEADROOM, "cpu=-1", "negative headroom" },
		{ POOL_ANN_HEADROOM, "10%,5%", "given twice" },
		{ POOL_ANN_HEADROOM, "cpu=1,cpu=2", "given twice" },
		{ POOL_ANN_HEADROOM, "storage=1", "\"storage\" is not a resource" },
		{ POOL_ANN_FACTOR, "one and a half", POOL_ANN_FACTOR ": \"one and a half\" is not a decimal" },
		{ POOL_ANN_FACTOR, "-2", POOL_ANN_FACTOR },
	};
	size_t i;

	for(i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		kube_kv ann[2] = { { POOL_ANN_SELECTOR, "pool=gold" }, { t[i].key, t[i].value } };
		pool_spec s;
		prd_err e = { 0 };
		size_t n = strcmp(t[i].key, POOL_ANN_SELECTOR) ? 2 : 1;
		if(n == 1)
			ann[0].value = t[i].value;
		CU_ASSERT_EQUAL(pool_spec_parse(ann, n, &s, &e), PRD_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, t[i].says));
		/* Every message names the annotation it is about. */
		CU_ASSERT_EQUAL(strncmp(e.msg, t[i].key, strlen(t[i].key)), 0);
		if(!strstr(e.msg, t[i].says) || strncmp(e.msg, t[i].key, strlen(t[i].key)))
			fprintf(stderr, "case %zu: %s\n", i, e.msg);
	}
}

static void test_sums_and_selection(void)
{
	kube_meta *n[5];
	kube_meta *p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=gold\"}", "{}", "{}");
	pool_plan plan;
	prd_err e;

	n[0] = node("g1", "{\"pool\":\"gold\"}",
		    "{\"cpu\":\"4\",\"memory\":\"16Gi\",\"ephemeral-storage\":\"100Gi\",\"pods\":\"110\","
		    "\"hugepages-2Mi\":\"1Gi\",\"nvidia.com/gpu\":\"2\",\"attachable-volumes-x\":\"39\"}",
		    true, false);
	n[1] = node("g2", "{\"pool\":\"gold\"}", "{\"cpu\":\"3500m\",\"memory\":\"8Gi\",\"pods\":\"110\"}", true, false);
	n[2] = node("g3-notready", "{\"pool\":\"gold\"}", "{\"cpu\":\"64\",\"memory\":\"1Ti\"}", false, false);
	n[3] = node("g4-cordoned", "{\"pool\":\"gold\"}", "{\"cpu\":\"64\",\"memory\":\"1Ti\"}", true, true);
	n[4] = node("s1", "{\"pool\":\"silver\"}", "{\"cpu\":\"64\",\"memory\":\"1Ti\"}", true, false);

	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 5, &plan, &e), 0);
	CU_ASSERT_EQUAL(plan.nodes, 2);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.cpu"), "7500m");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.memory"), "24Gi");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.ephemeral-storage"), "100Gi");
	CU_ASSERT_STRING_EQUAL(val(&plan, "pods"), "220");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.nvidia.com/gpu"), "2");
	/* hugepages are populated only when listed; unknown names never. */
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.hugepages-2Mi"), "-");
	CU_ASSERT_EQUAL(plan.n, 5);
	/* Sorted by key. */
	CU_ASSERT_STRING_EQUAL(plan.entries[0].key, "pods");
	pool_plan_free(&plan);

	/* Counting cordoned and NotReady nodes when configured. */
	{
		const kube_resourcepool *rp = kube_as_resourcepool(p);
		pool_spec s;
		pool_filter f = { true, true };
		CU_ASSERT_EQUAL_FATAL(pool_spec_parse(rp->annotations, rp->nannotations, &s, &e), 0);
		CU_ASSERT_EQUAL_FATAL(pool_plan_compute(&s, rp, (const kube_node *const *)(const void *)n, 5, &f,
							&plan, &e), 0);
		CU_ASSERT_EQUAL(plan.nodes, 4);
		CU_ASSERT_STRING_EQUAL(val(&plan, "requests.cpu"), "135500m");
		pool_plan_free(&plan);
		pool_spec_free(&s);
	}

	/* An explicit list, with hugepages and a resource no node has. */
	kube_obj_free(in, p);
	p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_RESOURCES
		 "\":\"cpu,hugepages-2Mi,example.com/fpga\"}", "{}", "{}");
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 5, &plan, &e), 0);
	CU_ASSERT_EQUAL(plan.n, 3);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.hugepages-2Mi"), "1Gi");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.example.com/fpga"), "0");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.memory"), "-");
	pool_plan_free(&plan);

	/* No node selected: every default key is zero. */
	kube_obj_free(in, p);
	p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=platinum\"}", "{}", "{}");
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 5, &plan, &e), 0);
	CU_ASSERT_EQUAL(plan.nodes, 0);
	CU_ASSERT_EQUAL(plan.n, 4);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.cpu"), "0");
	pool_plan_free(&plan);

	kube_obj_free(in, p);
	for(size_t i = 0; i < 5; i++)
		kube_obj_free(in, n[i]);
}

static void test_headroom_and_factor(void)
{
	kube_meta *n[2];
	kube_meta *p;
	pool_plan plan;
	prd_err e;

	n[0] = node("a", "{\"pool\":\"gold\"}", "{\"cpu\":\"4\",\"memory\":\"16Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"1\"}",
		    true, false);
	n[1] = node("b", "{\"pool\":\"gold\"}", "{\"cpu\":\"3\",\"memory\":\"16Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"2\"}",
		    true, false);

	/* 10% of everything: 7 cores → 6300m; 32Gi → 28.8Gi = 30923764531.2
	 * bytes, floored to a whole byte; 220 pods → 198; 3 GPUs → 2.7 → 2. */
	p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_HEADROOM "\":\"10%\"}", "{}", "{}");
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 2, &plan, &e), 0);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.cpu"), "6300m");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.memory"), "30923764531");
	CU_ASSERT_STRING_EQUAL(val(&plan, "pods"), "198");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.nvidia.com/gpu"), "2");
	CU_ASSERT_STRING_EQUAL(val(&plan, "limits.cpu"), "-");
	pool_plan_free(&plan);
	kube_obj_free(in, p);

	/* Absolute headroom per resource, a resource's own percent, and a
	 * headroom larger than the total (zero, never negative). */
	p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_HEADROOM
		 "\":\"cpu=1500m,memory=4Gi,pods=12.5%,nvidia.com/gpu=5\"}", "{}", "{}");
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 2, &plan, &e), 0);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.cpu"), "5500m");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.memory"), "28Gi");
	CU_ASSERT_STRING_EQUAL(val(&plan, "pods"), "192");          /* 220 × 0.875 = 192.5 */
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.nvidia.com/gpu"), "0");
	CU_ASSERT_STRING_EQUAL(entry(&plan, "requests.cpu") ? qty_str(&entry(&plan, "requests.cpu")->total,
								       (char[QTY_STR_MAX]){0}) : "-", "7");
	pool_plan_free(&plan);
	kube_obj_free(in, p);

	/* Limits = requests after headroom × factor; only cpu and memory. */
	p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_HEADROOM "\":\"cpu=1\",\"" POOL_ANN_FACTOR
		 "\":\"1.5\"}", "{}", "{}");
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 2, &plan, &e), 0);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.cpu"), "6");
	CU_ASSERT_STRING_EQUAL(val(&plan, "limits.cpu"), "9");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.memory"), "32Gi");
	CU_ASSERT_STRING_EQUAL(val(&plan, "limits.memory"), "48Gi");
	CU_ASSERT_STRING_EQUAL(val(&plan, "limits.pods"), "-");
	CU_ASSERT_EQUAL(plan.n, 7);
	pool_plan_free(&plan);
	kube_obj_free(in, p);

	/* A factor below one with a repeating fraction: 7 × 0.333 = 2.331. */
	p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_FACTOR "\":\"0.333\"}", "{}", "{}");
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 2, &plan, &e), 0);
	CU_ASSERT_STRING_EQUAL(val(&plan, "limits.cpu"), "2331m");
	CU_ASSERT_STRING_EQUAL(val(&plan, "limits.memory"), "11441792876");   /* 34359738368 × 0.333, floored */
	pool_plan_free(&plan);
	kube_obj_free(in, p);

	kube_obj_free(in, n[0]);
	kube_obj_free(in, n[1]);
}

static void test_clamp_and_vanished(void)
{
	kube_meta *n[1];
	kube_meta *p;
	pool_plan plan;
	const pool_entry *en;
	prd_err e;

	n[0] = node("a", "{\"pool\":\"gold\"}", "{\"cpu\":\"4\",\"memory\":\"16Gi\",\"pods\":\"110\"}", true, false);
	/* Claims hold 6 cores and 2 GPUs, but the nodes give 4 and the GPU
	 * nodes are gone; memory is claimed below the total. */
	p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_KEYS
		 "\":\"pods,requests.cpu,requests.example.com/fpga,requests.memory,requests.nvidia.com/gpu\"}",
		 "{\"requests.cpu\":\"8\",\"requests.nvidia.com/gpu\":\"4\",\"requests.example.com/fpga\":\"1\"}",
		 "{\"requests.cpu\":\"6\",\"requests.memory\":\"1Gi\",\"requests.nvidia.com/gpu\":\"2\"}");
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 1, &plan, &e), 0);
	en = entry(&plan, "requests.cpu");
	CU_ASSERT_PTR_NOT_NULL_FATAL(en);
	CU_ASSERT_TRUE(en->clamped);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.cpu"), "6");
	CU_ASSERT_STRING_EQUAL(qty_str(&en->computed, (char[QTY_STR_MAX]){0}), "4");
	en = entry(&plan, "requests.memory");
	CU_ASSERT_FALSE(en->clamped);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.memory"), "16Gi");
	/* The GPU left every node but claims hold 2: kept at 2, still managed. */
	en = entry(&plan, "requests.nvidia.com/gpu");
	CU_ASSERT_PTR_NOT_NULL_FATAL(en);
	CU_ASSERT_TRUE(en->vanished);
	CU_ASSERT_TRUE(en->clamped);
	CU_ASSERT_FALSE(en->retire);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.nvidia.com/gpu"), "2");
	/* The FPGA left too and nobody holds it: zero, then no longer managed. */
	en = entry(&plan, "requests.example.com/fpga");
	CU_ASSERT_PTR_NOT_NULL_FATAL(en);
	CU_ASSERT_TRUE(en->vanished);
	CU_ASSERT_TRUE(en->retire);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.example.com/fpga"), "0");
	pool_plan_free(&plan);
	kube_obj_free(in, p);

	/* Keys that are not extended resources are never "vanished" (they are
	 * always computed), and keys another tool wrote are not ours. */
	p = pool("{\"" POOL_ANN_SELECTOR "\":\"pool=gold\",\"" POOL_ANN_KEYS "\":\"requests.storage,limits.cpu\"}",
		 "{\"requests.storage\":\"5Gi\",\"limits.cpu\":\"3\"}", "{}");
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 1, &plan, &e), 0);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.storage"), "-");
	CU_ASSERT_STRING_EQUAL(val(&plan, "limits.cpu"), "-");
	CU_ASSERT_EQUAL(plan.n, 4);
	pool_plan_free(&plan);
	kube_obj_free(in, p);
	kube_obj_free(in, n[0]);
}

static void test_many_nodes_exact(void)
{
	/* 1000 nodes of 1500m and 3Gi+512Ki: the sums are exact. */
	kube_meta *n[1000];
	kube_meta *p = pool("{\"" POOL_ANN_SELECTOR "\":\"\"}", "{}", "{}");
	pool_plan plan;
	prd_err e;
	size_t i;
	char name[32];

	for(i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "n%zu", i);
		n[i] = node(name, "{}", "{\"cpu\":\"1500m\",\"memory\":\"3146240Ki\"}", true, false);
	}
	CU_ASSERT_EQUAL_FATAL(plan_for(p, n, 1000, &plan, &e), 0);
	CU_ASSERT_EQUAL(plan.nodes, 1000);
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.cpu"), "1500");
	CU_ASSERT_STRING_EQUAL(val(&plan, "requests.memory"), "3072500Mi");
	pool_plan_free(&plan);
	kube_obj_free(in, p);
	for(i = 0; i < 1000; i++)
		kube_obj_free(in, n[i]);
}

static void setup(void)
{
	if(!in)
		in = kube_intern_new();
}

static void test_setup(void)
{
	setup();
	CU_ASSERT_PTR_NOT_NULL(in);
}

static void test_teardown(void)
{
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
	in = NULL;
}

static const test_case cases[] = {
	{ "setup", test_setup },
	{ "mapping table", test_mapping_table },
	{ "decimal ratio parsing", test_ratio_parse },
	{ "exact scaling and rounding", test_scale_exact },
	{ "annotation parsing", test_spec_parse_ok },
	{ "annotation errors name the annotation", test_spec_parse_errors },
	{ "sums over selected Ready schedulable nodes", test_sums_and_selection },
	{ "headroom and limits factor", test_headroom_and_factor },
	{ "clamping to used, vanished resources", test_clamp_and_vanished },
	{ "1000 nodes sum exactly", test_many_nodes_exact },
	{ "teardown: nothing left interned", test_teardown },
	{ NULL, NULL }
};

TEST_MAIN("pools", cases)

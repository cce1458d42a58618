/* The text decoders (kube_decode_text) against the json-c decoders: for
 * many generated Nodes and Pods, odd ones included, and for every
 * truncation and many corruptions of them, both give the same object or
 * the same error. Canonical objects must be decoded without json-c. */
#include "testutil.h"
#include "decode_same.h"
#include "kube/jscan.h"
#include "kube/objects.h"
#include "util/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH 126

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static const char *pick(const char *const *v, size_t n)
{
	return v[rnd((unsigned)n)];
}
#define PICK(arr) pick(arr, sizeof(arr) / sizeof(arr[0]))

/* How odd the generated objects may be: 0 = what an apiserver sends, 1 =
 * valid but unusual (escapes, unknown fields, nulls, big numbers), 2 =
 * also invalid (wrong types, bad values, duplicate keys). */
static int oddness;

static const char *const strs[] = {
	"web", "a\\/b", "caf\\u00e9", "\\\"quoted\\\"", "tab\\there", "\\ud83d\\ude00", "x", "", "kubernetes.io\\/hostname",
	"\\u0041\\u00DF\\u6C34", "back\\\\slash",
};
static const char *const qtys[] = { "\"100m\"", "\"1\"", "\"4Gi\"", "\"1e3\"", "\"2.5\"", "\"1Ki\"", "\"0\"", "\"12E-1\"" };
static const char *const bad_qtys[] = { "\"lots\"", "2", "1.5e3", "null", "true", "\"\"", "{}" };
static const char *const junk[] = {
	"{\"deep\":[[[{\"x\":[1,2,{\"y\":null}]}]]]}", "[1,-2.5e-3,true,false,null,\"s\"]", "123456789012345678901234567890",
	"-0.0E+5", "\"\\u00e9\\n\"", "null", "{}", "[]",
};

static void s_rand(buf *b)
{
	buf_printf(b, "\"%s\"", oddness ? PICK(strs) : "app");
}

/* An unknown field (when odd), before a comma-terminated member list. */
static void unknown(buf *b)
{
	if(oddness && rnd(3) == 0)
		buf_printf(b, "\"zz%u\":%s,", rnd(100), PICK(junk));
}

static void value_or_null(buf *b, const char *v)
{
	buf_append_str(b, oddness && rnd(12) == 0 ? "null" : v);
}

static void quantity(buf *b)
{
	if(oddness == 2 && rnd(15) == 0)
		buf_append_str(b, PICK(bad_qtys));
	else
		buf_append_str(b, oddness ? PICK(qtys) : "\"1\"");
}

static void kvs(buf *b, const char *prefix)
{
	unsigned i, n = rnd(5);
	buf_append_char(b, '{');
	for(i = 0; i < n; i++) {
		buf_printf(b, "%s\"%sk%u\":", i ? "," : "", prefix, oddness == 2 && rnd(6) == 0 ? 0 : i);
		if(oddness == 2 && rnd(20) == 0)
			buf_append_str(b, "7");
		else
			s_rand(b);
	}
	buf_append_char(b, '}');
}

static void resmap(buf *b)
{
	static const char *const names[] = { "cpu", "memory", "nvidia.com\\/gpu", "hugepages-2Mi", "pods", "ephemeral-storage" };
	unsigned i, n = rnd(4), start = rnd(6);
	buf_append_char(b, '{');
	for(i = 0; i < n; i++) {
		buf_printf(b, "%s\"%s\":", i ? "," : "", oddness == 2 && rnd(8) == 0 ? "cpu" : names[(start + i) % 6]);
		quantity(b);
	}
	buf_append_char(b, '}');
}

static void meta(buf *b, bool namespaced)
{
	static const char *const times[] = { "\"2024-05-01T10:00:00Z\"", "\"2024-05-01T10:00:00.123456789+02:00\"", "null" };
	buf_append_str(b, "\"metadata\":{");
	unknown(b);
	buf_printf(b, "\"name\":\"obj-%u%s\"", rnd(1000), oddness ? "\\u00e9" : "");
	if(namespaced || rnd(3) == 0)
		buf_printf(b, ",\"namespace\":\"ns-%u\"", rnd(3));
	buf_printf(b, ",\"uid\":\"u-%u\",\"resourceVersion\":\"%u\"", rnd(100000), rnd(100000));
	buf_append_str(b, ",\"creationTimestamp\":");
	buf_append_str(b, oddness == 2 && rnd(10) == 0 ? "\"yesterday\"" : oddness ? PICK(times) : times[0]);
	if(rnd(4) == 0)
		buf_printf(b, ",\"deletionTimestamp\":%s", times[rnd(2)]);
	if(rnd(2))
		buf_printf(b, ",\"generation\":%s", oddness == 2 && rnd(5) == 0 ? "1e2" : oddness ? "9223372036854775807" : "3");
	buf_append_str(b, ",\"labels\":");
	kvs(b, "l");
	if(rnd(2)) {
		buf_append_str(b, ",\"annotations\":{\"provreqd.io\\/x\":\"1\"");
		if(rnd(2))
			buf_printf(b, ",\"%s\":\"pr-%u\"", rnd(2) ? KUBE_ANN_CONSUME : KUBE_ANN_CONSUME_OLD, rnd(3));
		if(rnd(2))
			buf_printf(b, ",\"%s\":\"check\"", rnd(2) ? KUBE_ANN_PR_CLASS : KUBE_ANN_PR_CLASS_OLD);
		if(oddness == 2 && rnd(10) == 0)
			buf_append_str(b, ",\"num\":5");
		buf_append_str(b, ",\"kubectl.kubernetes.io\\/last-applied-configuration\":\"{\\\"a\\\":1}\"}");
	}
	if(namespaced && rnd(2)) {
		unsigned i, n = 1 + rnd(3);
		buf_append_str(b, ",\"ownerReferences\":[");
		for(i = 0; i < n; i++)
			buf_printf(b, "%s{\"kind\":\"RS%u\",\"name\":\"o%u\"%s}", i ? "," : "", i, i,
				   rnd(3) == 0 ? ",\"controller\":true" : rnd(2) ? ",\"controller\":false" : "");
		buf_append_char(b, ']');
	}
	buf_append_char(b, '}');
}

static void container(buf *b, bool init)
{
	static const char *const protos[] = { "\"TCP\"", "\"UDP\"", "\"SCTP\"", "null" };
	buf_append_char(b, '{');
	unknown(b);
	buf_append_str(b, "\"name\":\"c\",\"image\":\"img\",\"resources\":{\"limits\":");
	resmap(b);
	buf_append_str(b, ",\"requests\":");
	resmap(b);
	buf_append_char(b, '}');
	if(init && rnd(2))
		buf_printf(b, ",\"restartPolicy\":%s", rnd(3) ? "\"Always\"" : "\"OnFailure\"");
	if(rnd(3) == 0) {
		unsigned port = oddness == 2 && rnd(6) == 0 ? 70000 : rnd(3) ? 8000 + rnd(3) : 0;
		buf_printf(b, ",\"ports\":[{\"containerPort\":80,\"hostPort\":%u,\"protocol\":%s%s}]", port,
			   oddness == 2 && rnd(6) == 0 ? "\"XX\"" : protos[rnd(4)], rnd(3) == 0 ? ",\"hostIP\":\"10.0.0.1\"" : "");
	}
	buf_append_char(b, '}');
}

static void containers(buf *b, const char *key, bool init)
{
	unsigned i, n = rnd(init ? 3 : 4);
	buf_printf(b, ",\"%s\":[", key);
	for(i = 0; i < n; i++) {
		if(i)
			buf_append_char(b, ',');
		container(b, init);
	}
	buf_append_char(b, ']');
}

static void tolerations(buf *b)
{
	static const char *const ops[] = { "\"Equal\"", "\"Exists\"", "\"\"", "null" };
	static const char *const effs[] = { "\"NoSchedule\"", "\"NoExecute\"", "\"PreferNoSchedule\"", "\"\"", "null" };
	unsigned i, n = rnd(3);
	buf_append_str(b, ",\"tolerations\":[");
	for(i = 0; i < n; i++)
		buf_printf(b, "%s{\"key\":%s,\"operator\":%s,\"value\":\"v\",\"effect\":%s%s}", i ? "," : "",
			   rnd(4) ? "\"k\"" : "\"\"", oddness == 2 && rnd(8) == 0 ? "\"Like\"" : PICK(ops),
			   oddness == 2 && rnd(8) == 0 ? "\"Sometimes\"" : PICK(effs), rnd(2) ? ",\"tolerationSeconds\":300" : "");
	buf_append_char(b, ']');
}

static void pod(buf *b)
{
	static const char *const phases[] = { "Running", "Pending", "Succeeded", "Failed", "", "Weird" };
	buf_append_char(b, '{');
	unknown(b);
	buf_append_str(b, "\"apiVersion\":\"v1\",\"kind\":\"Pod\",");
	meta(b, true);
	buf_append_str(b, ",\"spec\":{");
	unknown(b);
	buf_printf(b, "\"nodeName\":\"%s\"", rnd(3) ? "node-1" : "");
	buf_append_str(b, ",\"nodeSelector\":");
	kvs(b, "s");
	if(rnd(2))
		buf_printf(b, ",\"priority\":%s", oddness == 2 && rnd(5) == 0 ? "\"high\"" : oddness ? "4294967297" : "100");
	containers(b, "containers", false);
	if(rnd(2))
		containers(b, "initContainers", true);
	if(rnd(4) == 0) {
		buf_append_str(b, ",\"overhead\":");
		resmap(b);
	}
	if(rnd(4) == 0) {
		buf_append_str(b, ",\"resources\":{\"requests\":");
		resmap(b);
		buf_append_char(b, '}');
	}
	tolerations(b);
	if(rnd(3) == 0) {
		static const char *const odd_aff[] = {
			"\"x\":[1,-0,1.50,2e3,-7,9223372036854775807,92233720368547758070,true,false,null]",
			"\"s\":\"a\\u0001b\\u001F\\/\\t\\\"q\\u00e9\\ud83d\\ude00\177\\b\\f\\r\\n\"",
			"\"d\":{\"k\":1,\"k\":2}", "\"e\":{},\"f\":[],\"g\":[[],[{}]]", "\"k:1\":1,\"k\":2", "\"\":\"\"",
		};
		buf_append_str(b, ",\"affinity\":{");
		if(oddness && rnd(2))
			buf_printf(b, "%s,", PICK(odd_aff));
		buf_append_str(b, "\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{"
				  "\"labelSelector\":{\"matchLabels\":{\"app\":\"w\\/eb\"}},\"topologyKey\":\"kubernetes.io\\/hostname\"}]}}");
	}
	if(rnd(3) == 0)
		buf_append_str(b, rnd(2) ? ",\"topologySpreadConstraints\":[]"
					 : ",\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"zone\","
					   "\"whenUnsatisfiable\":\"DoNotSchedule\",\"labelSelector\":{}}]");
	buf_append_str(b, "},\"status\":{\"phase\":");
	buf_printf(b, "\"%s\"", oddness ? PICK(phases) : "Running");
	buf_append_str(b, ",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},{\"type\":\"PodScheduled\","
			  "\"status\":");
	value_or_null(b, rnd(2) ? "\"False\"" : "\"True\"");
	buf_append_str(b, ",\"reason\":\"Unschedulable\"}]}}");
}

static void node(buf *b)
{
	static const char *const effs[] = { "\"NoSchedule\"", "\"NoExecute\"", "\"PreferNoSchedule\"" };
	unsigned i, n = rnd(3);
	buf_append_char(b, '{');
	unknown(b);
	buf_append_str(b, "\"kind\":\"Node\",");
	meta(b, false);
	buf_append_str(b, ",\"spec\":{");
	unknown(b);
	buf_printf(b, "\"providerID\":\"kwok:\\/\\/n%u\",\"unschedulable\":%s,\"taints\":[", rnd(9), rnd(4) ? "false" : "true");
	for(i = 0; i < n; i++)
		buf_printf(b, "%s{\"key\":%s,\"value\":\"v\",\"effect\":%s}", i ? "," : "",
			   oddness == 2 && rnd(8) == 0 ? "\"\"" : "\"dedicated\"",
			   oddness == 2 && rnd(8) == 0 ? "\"Never\"" : PICK(effs));
	buf_append_str(b, "]},\"status\":{\"capacity\":");
	resmap(b);
	buf_append_str(b, ",\"allocatable\":");
	resmap(b);
	buf_printf(b, ",\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\"},{\"type\":\"Ready\",\"status\":%s}]}}",
		   rnd(3) ? "\"True\"" : rnd(2) ? "\"False\"" : "\"Unknown\"");
}

static void check(kube_kind kind, const char *json, size_t len, kube_intern *in)
{
	const char *why = ds_check(kind, json, len, DEPTH, in, NULL);
	if(why) {
		fprintf(stderr, "\n%s for %s: %.*s\n", why, kube_kind_name(kind), (int)(len > 2000 ? 2000 : len), json);
		CU_FAIL("the two decoders disagree");
	}
}

/* Canonical objects never need json-c, and agree with it. */
static void test_canonical_direct(void)
{
	kube_intern *in = kube_intern_new();
	int i;
	oddness = 0;
	for(i = 0; i < 400; i++) {
		kube_kind kind = i % 2 ? KUBE_KIND_POD : KUBE_KIND_NODE;
		kube_meta *m = NULL;
		buf b;
		buf_init(&b);
		(kind == KUBE_KIND_POD ? pod : node)(&b);
		CU_ASSERT_EQUAL(kube__decode_text_direct(kind, b.data, b.len, DEPTH, in, &m), 0);
		kube_obj_free(in, m);
		check(kind, b.data, b.len, in);
		buf_free(&b);
	}
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* Valid but unusual input: most of it still direct, all of it agreeing. */
static void test_unusual(void)
{
	kube_intern *in = kube_intern_new();
	int i, direct = 0;
	oddness = 1;
	for(i = 0; i < 2000; i++) {
		kube_kind kind = i % 2 ? KUBE_KIND_POD : KUBE_KIND_NODE;
		kube_meta *m = NULL;
		buf b;
		buf_init(&b);
		(kind == KUBE_KIND_POD ? pod : node)(&b);
		if(kube__decode_text_direct(kind, b.data, b.len, DEPTH, in, &m) == 0)
			direct++;
		kube_obj_free(in, m);
		check(kind, b.data, b.len, in);
		buf_free(&b);
	}
	/* Only the bare-number and exotic cases need json-c. */
	CU_ASSERT(direct > 1000);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* Invalid values, wrong types, duplicate keys: the same errors. */
static void test_invalid(void)
{
	kube_intern *in = kube_intern_new();
	int i;
	oddness = 2;
	for(i = 0; i < 3000; i++) {
		kube_kind kind = i % 2 ? KUBE_KIND_POD : KUBE_KIND_NODE;
		buf b;
		buf_init(&b);
		(kind == KUBE_KIND_POD ? pod : node)(&b);
		check(kind, b.data, b.len, in);
		buf_free(&b);
	}
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* Every prefix of some objects, and random byte changes: never a crash,
 * the same answer both ways, and truncation is a clear error. */
static void test_truncated_and_corrupt(void)
{
	static const char flips[] = "{}[]\",:\\ 0a-eEu.ntf\x01\xff";
	kube_intern *in = kube_intern_new();
	int i;
	size_t cut;
	oddness = 1;
	for(i = 0; i < 6; i++) {
		kube_kind kind = i % 2 ? KUBE_KIND_POD : KUBE_KIND_NODE;
		buf b;
		buf_init(&b);
		(kind == KUBE_KIND_POD ? pod : node)(&b);
		for(cut = 0; cut < b.len; cut++) {
			kube_meta *m = NULL;
			prd_err e;
			char *copy = malloc(cut + 1);
			memcpy(copy, b.data, cut);
			/* Not NUL-terminated where the decoder could see it. */
			CU_ASSERT_EQUAL(kube_decode_text(kind, copy, cut, DEPTH, in, &m, &e), PRD_EINVAL);
			CU_ASSERT_PTR_NULL(m);
			CU_ASSERT(strstr(e.msg, "not valid JSON") != NULL);
			check(kind, copy, cut, in);
			free(copy);
		}
		for(cut = 0; cut < 3000; cut++) {
			char *copy = malloc(b.len);
			memcpy(copy, b.data, b.len);
			copy[rnd((unsigned)b.len)] = flips[rnd(sizeof(flips) - 1)];
			if(rnd(2))
				copy[rnd((unsigned)b.len)] = flips[rnd(sizeof(flips) - 1)];
			check(kind, copy, b.len, in);
			free(copy);
		}
		buf_free(&b);
	}
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* Hand-picked cases, each checked both ways; `direct` says whether the
 * text decoder must take it without json-c. */
static void test_cases(void)
{
	static const struct {
		kube_kind kind;
		const char *json;
		int direct;
	} cases[] = {
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"}}", 1 },
		/* The later of two keys wins in json-c; the text decoder defers. */
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"name\":\"q\"}}", 0 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"labels\":{\"a\":\"1\",\"a\":\"2\"}}}", 0 },
		{ KUBE_KIND_POD, "{\"spec\":{},\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"nodeName\":\"x\"}}", 0 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"containers\":[{\"resources\":"
				 "{\"requests\":{\"cpu\":\"1\",\"cpu\":\"2\"}}}]}}", 0 },
		/* Unicode escapes, escaped quotes, surrogate pairs. */
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\\u0041\",\"namespace\":\"n\",\"labels\":{\"k\\\"q\":\"\\ud83d\\ude00\"}}}", 1 },
		/* A lone surrogate and \u0000: json-c's own way. */
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"labels\":{\"k\":\"\\ud800\"}}}", 0 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"labels\":{\"k\":\"a\\u0000b\"}}}", 0 },
		/* Numbers in exponent form where an integer is expected: an error. */
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"priority\":1e3}}", 0 },
		{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\",\"generation\":1E2}}", 0 },
		/* Quantities as bare numbers. */
		{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\"},\"status\":{\"capacity\":{\"cpu\":4,\"memory\":1.5e3}}}", 0 },
		/* Unknown fields with nested arrays, nulls everywhere. */
		{ KUBE_KIND_NODE, "{\"x\":[[[]],[{\"y\":[null,1.5e-7,\"\\/\"]}]],\"metadata\":{\"name\":\"n\",\"labels\":null,"
				  "\"annotations\":null},\"spec\":null,\"status\":{\"capacity\":null,\"conditions\":null}}", 1 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"ownerReferences\":null},\"spec\":"
				 "{\"containers\":null,\"tolerations\":null,\"affinity\":null},\"status\":null}", 1 },
		/* Wrong shapes. */
		{ KUBE_KIND_POD, "[]", 0 },
		{ KUBE_KIND_POD, "null", 0 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\"}}", 0 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"containers\":[null]}}", 0 },
		{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"\"}}", 0 },
		/* json-c leniencies: trailing commas, comments, single quotes. */
		{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\",},}", 0 },
		{ KUBE_KIND_NODE, "/* c */{\"metadata\":{\"name\":\"n\"}}", 0 },
		{ KUBE_KIND_NODE, "{'metadata':{'name':'n'}}", 0 },
		{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\"}} trailing", 0 },
		{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\",\"generation\":-0}}", 0 },
		{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\",\"generation\":99999999999999999999}}", 0 },
		{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\",\"generation\":-9223372036854775808}}", 1 },
		/* spec.affinity is kept as json-c prints it: escapes, numbers,
		 * empty containers printed the same; merged keys and integers
		 * json-c prints its own way are left to json-c. */
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"affinity\":{\"a/b\":"
				 "\"x\\u0001\\/\\u00e9\\t\\\"\", \"n\" : [ 1, -2, 1.50, 2E+3, true, null, {}, [] ],\"k:\":{\"\":0}}}}", 1 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"affinity\":{\"a\":1,\"a\":2}}}", 0 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"affinity\":{\"a\":-0}}}", 0 },
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"affinity\":{},"
				 "\"topologySpreadConstraints\":[]}}", 1 },
		/* A repeated key after a string was interned: nothing kept
		 * (found by fuzz_decode_text). */
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"containers\":[{\"ports\":"
				 "[{\"hostPort\":53,\"hostIP\":\"10.0.0.1\",\"hostPort\":54}]}]}}", 0 },
		/* Pod-level requests replace cpu/memory; overhead adds. */
		{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"overhead\":{\"cpu\":\"100m\"},"
				 "\"resources\":{\"requests\":{\"cpu\":\"2\",\"nvidia.com/gpu\":\"1\"}},\"initContainers\":[{"
				 "\"restartPolicy\":\"Always\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}},"
				 "{\"resources\":{\"requests\":{\"cpu\":\"3\"}}}],\"containers\":[{\"resources\":{\"requests\":"
				 "{\"memory\":\"2Gi\"}}}]}}", 1 },
	};
	kube_intern *in = kube_intern_new();
	size_t i;
	for(i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kube_meta *m = NULL;
		int d = kube__decode_text_direct(cases[i].kind, cases[i].json, strlen(cases[i].json), DEPTH, in, &m);
		kube_obj_free(in, m);
		if((d == 0) != cases[i].direct)
			fprintf(stderr, "\ncase %zu: direct=%d, expected %d\n", i, d == 0, cases[i].direct);
		CU_ASSERT_EQUAL(d == 0, cases[i].direct);
		check(cases[i].kind, cases[i].json, strlen(cases[i].json), in);
	}
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* A huge string value, and nesting at json-c's depth limit and past it. */
static void test_huge_and_deep(void)
{
	kube_intern *in = kube_intern_new();
	buf b;
	int i;
	buf_init(&b);
	buf_append_str(&b, "{\"metadata\":{\"name\":\"n\",\"labels\":{\"big\":\"");
	for(i = 0; i < 200000; i++)
		buf_append_str(&b, i % 97 ? "x" : "\\u00e9");
	buf_append_str(&b, "\"}}}");
	check(KUBE_KIND_NODE, b.data, b.len, in);
	for(i = 8; i <= 11; i++) {
		int k;
		buf_reset(&b);
		buf_append_str(&b, "{\"metadata\":{\"name\":\"n\"},\"z\":");
		for(k = 0; k < i; k++)
			buf_append_char(&b, '[');
		for(k = 0; k < i; k++)
			buf_append_char(&b, ']');
		buf_append_char(&b, '}');
		/* A depth limit of 10: nine arrays inside the object fit. */
		CU_ASSERT_PTR_NULL(ds_check(KUBE_KIND_NODE, b.data, b.len, 10, in, NULL));
	}
	buf_free(&b);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* The identity scan agrees with kube_json_meta or declines. */
static void test_text_id(void)
{
	static const char *const docs[] = {
		"{\"metadata\":{\"name\":\"a\",\"namespace\":\"n\",\"resourceVersion\":\"7\"},\"spec\":{}}",
		"{\"kind\":\"X\",\"metadata\":{\"name\":\"a\\/b\"}}",
		"{\"metadata\":{\"name\":\"a\"},\"metadata\":{\"name\":\"b\"}}",
		"{\"metadata\":{\"namespace\":\"n\"}}",
		"{\"metadata\":{\"name\":\"a\",\"namespace\":5}}",
		"{\"metadata\":{\"name\":\"a\"}",
	};
	size_t i;
	for(i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		kube_text_id id;
		json_object *o = json_tokener_parse(docs[i]);
		const char *ns = NULL, *name = NULL, *rv = NULL;
		int jr = o ? kube_json_meta(o, &ns, &name, &rv) : PRD_EINVAL;
		if(kube_text_id_scan(docs[i], strlen(docs[i]), DEPTH, &id) == 0) {
			/* No name: kube_json_meta refuses the object. */
			CU_ASSERT_EQUAL(jr == 0, id.name[0] != '\0');
			if(!jr) {
				CU_ASSERT_STRING_EQUAL(id.ns, ns);
				CU_ASSERT_STRING_EQUAL(id.name, name);
				CU_ASSERT_STRING_EQUAL(id.rv, rv);
			}
		}
		json_object_put(o);
	}
	{
		kube_text_id id;
		CU_ASSERT_EQUAL(kube_text_id_scan(docs[0], strlen(docs[0]), DEPTH, &id), 0);
		CU_ASSERT_STRING_EQUAL(id.name, "a");
		CU_ASSERT_STRING_EQUAL(id.rv, "7");
		CU_ASSERT_EQUAL(kube_text_id_scan(docs[1], strlen(docs[1]), DEPTH, &id), 0);
		CU_ASSERT_STRING_EQUAL(id.name, "a/b");
	}
}

/* Pages: items found as json-c finds them, or left to json-c. */
static void test_page_scan(void)
{
	kube_page pg;
	const char *p1 = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"12\",\"continue\":\"c\\/1\"},"
			 "\"items\":[{\"a\":1},{\"b\":[2]}]}";
	const char *p2 = "{\"metadata\":{\"continue\":\"x\"},\"items\":[],\"metadata\":{\"resourceVersion\":\"3\"}}";
	CU_ASSERT_EQUAL(kube__page_scan(p1, strlen(p1), DEPTH, &pg), 0);
	CU_ASSERT_EQUAL(pg.nitems, 2);
	CU_ASSERT_STRING_EQUAL(pg.rv, "12");
	CU_ASSERT_STRING_EQUAL(pg.cont, "c/1");
	CU_ASSERT_EQUAL(pg.items[1].len, strlen("{\"b\":[2]}"));
	CU_ASSERT_EQUAL(memcmp(pg.items[1].s, "{\"b\":[2]}", pg.items[1].len), 0);
	kube__page_free(&pg);
	/* The later metadata replaces the earlier whole (no continue). */
	CU_ASSERT_EQUAL(kube__page_scan(p2, strlen(p2), DEPTH, &pg), 0);
	CU_ASSERT_PTR_NULL(pg.cont);
	CU_ASSERT_STRING_EQUAL(pg.rv, "3");
	kube__page_free(&pg);
	CU_ASSERT_EQUAL(kube__page_scan("{\"items\":[1]}", 13, DEPTH, &pg), KUBE_JS_BAIL);
	kube__page_free(&pg);
	CU_ASSERT_EQUAL(kube__page_scan("{\"metadata\":{}}", 15, DEPTH, &pg), KUBE_JS_BAIL);
	kube__page_free(&pg);
	CU_ASSERT_EQUAL(kube__page_scan("{\"items\":[{}],}", 15, DEPTH, &pg), KUBE_JS_BAIL);
	kube__page_free(&pg);
}

static const test_case cases[] = {
	{ "canonical objects decode without json-c", test_canonical_direct },
	{ "unusual valid objects agree", test_unusual },
	{ "invalid objects give the same errors", test_invalid },
	{ "truncated and corrupted text", test_truncated_and_corrupt },
	{ "hand-picked cases", test_cases },
	{ "huge strings and depth limits", test_huge_and_deep },
	{ "identity scan", test_text_id },
	{ "page scan", test_page_scan },
	{ NULL, NULL },
};

TEST_MAIN("kube_decode_text", cases)

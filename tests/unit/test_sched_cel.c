/* The CEL subset for DRA device selectors: what compiles, what it
 * evaluates to for a device, what is refused (unsupported constructs and
 * malformed text), and runtime errors. */
#include "testutil.h"

#include "sched/cel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof((a)[0]))

static sched_dev_attr attrs[4];
static sched_dev_cap caps[2];
static sched_device dev;

static void setup(void)
{
	attrs[0] = (sched_dev_attr){ "gpu.example.com/model", SCHED_ATTR_STRING, 0, false, "a100" };
	attrs[1] = (sched_dev_attr){ "gpu.example.com/index", SCHED_ATTR_INT, 3, false, NULL };
	attrs[2] = (sched_dev_attr){ "ext.example.com/mig", SCHED_ATTR_BOOL, 0, true, NULL };
	attrs[3] = (sched_dev_attr){ "gpu.example.com/driverVersion", SCHED_ATTR_VERSION, 0, false, "1.2.3" };
	caps[0].name = "gpu.example.com/memory";
	CU_ASSERT_EQUAL_FATAL(qty_parse("40Gi", &caps[0].value, NULL), 0);
	caps[1].name = "gpu.example.com/cores";
	caps[1].value = qty_from_int64(128, QTY_DECIMAL_SI);
	dev = (sched_device){ "gpu.example.com", "node-1", "gpu-3", attrs, N(attrs), caps, N(caps) };
}

/* Compile and evaluate: 1, 0, or the (negative) error code. */
static int run(const char *expr)
{
	sched_cel *c = NULL;
	prd_err e;
	int rc = sched_cel_compile(expr, &c, &e);
	if(rc)
		return rc;
	rc = sched_cel_eval(c, &dev, &e);
	sched_cel_free(c);
	return rc;
}

static void test_true_false(void)
{
	static const struct { const char *expr; int want; } t[] = {
		{ "device.driver == 'gpu.example.com'", 1 },
		{ "device.driver == \"other.example.com\"", 0 },
		{ "device.driver != 'other.example.com'", 1 },
		{ "device.attributes[\"gpu.example.com\"].model == \"a100\"", 1 },
		{ "device.attributes['gpu.example.com']['model'] == 'a100'", 1 },
		{ "device.attributes[\"gpu.example.com\"].model == \"h100\"", 0 },
		{ "device.attributes[\"gpu.example.com\"].index >= 2", 1 },
		{ "device.attributes[\"gpu.example.com\"].index < 2", 0 },
		{ "device.attributes[\"gpu.example.com\"].index == 0x3", 1 },
		{ "device.attributes[\"gpu.example.com\"].index > -1", 1 },
		{ "device.attributes[\"ext.example.com\"].mig", 1 },
		{ "!device.attributes[\"ext.example.com\"].mig", 0 },
		{ "device.attributes[\"ext.example.com\"].mig == true", 1 },
		{ "device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"40Gi\")) == 0", 1 },
		{ "device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"80Gi\")) < 0", 1 },
		{ "device.capacity['gpu.example.com'].memory.compareTo(quantity('16Gi')) >= 0", 1 },
		{ "device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('41Gi'))", 0 },
		{ "device.capacity['gpu.example.com'].memory.isLessThan(quantity('41Gi'))", 1 },
		{ "device.capacity['gpu.example.com'].memory == quantity('40960Mi')", 1 },
		{ "device.capacity['gpu.example.com'].cores.isGreaterThan(quantity('100'))", 1 },
		{ "device.driver == 'gpu.example.com' && (device.attributes['gpu.example.com'].index == 1 || "
		  "device.attributes['gpu.example.com'].index == 3)", 1 },
		{ "device.driver == 'x' || device.attributes['gpu.example.com'].model == 'a100'", 1 },
		{ "true && !false", 1 },
		{ "'b' > 'a'", 1 },
		/* CEL's error absorption: false && error is false, true || error true. */
		{ "device.driver == 'x' && device.attributes['gpu.example.com'].missing == 1", 0 },
		{ "device.attributes['gpu.example.com'].missing == 1 || true", 1 },
	};
	size_t i;
	for(i = 0; i < N(t); i++) {
		int got = run(t[i].expr);
		if(got != t[i].want)
			fprintf(stderr, "expr %s: got %d want %d\n", t[i].expr, got, t[i].want);
		CU_ASSERT_EQUAL(got, t[i].want);
	}
}

static void test_runtime_errors(void)
{
	static const char *const t[] = {
		"device.attributes['gpu.example.com'].missing == 1",
		"device.attributes['nope.example.com'].model == 'a100'",
		"device.capacity['gpu.example.com'].missing.compareTo(quantity('1')) > 0",
		"device.attributes['gpu.example.com'].model == 1",       /* string vs int */
		"device.attributes['gpu.example.com'].index",            /* not a bool */
		"device.attributes['gpu.example.com'].driverVersion == '1.2.3'", /* version */
		"device.attributes['gpu.example.com'].missing == 1 && true",
		"device.attributes['gpu.example.com'].index.compareTo(quantity('1')) == 0",
	};
	size_t i;
	for(i = 0; i < N(t); i++) {
		int got = run(t[i]);
		if(got >= 0)
			fprintf(stderr, "expr %s: got %d, want a runtime error\n", t[i], got);
		CU_ASSERT(got < 0);
		CU_ASSERT(got != PRD_EUNSUPPORTED); /* it compiled */
	}
}

static void test_unsupported(void)
{
	static const struct { const char *expr; const char *names; } t[] = {
		{ "device.capacity['gpu.example.com'].memory >= quantity('1Gi')", "ordering operator on a quantity" },
		{ "quantity('1Gi') < device.capacity['gpu.example.com'].memory", "ordering operator on a quantity" },
		{ "'model' in device.attributes['gpu.example.com']", "operator `in`" },
		{ "device.driver.startsWith('gpu')", "method or field .startsWith" },
		{ "device.attributes['gpu.example.com'].model.matches('a.*')", "method or field .matches" },
		{ "has(device.attributes['gpu.example.com'].model)", "function has()" },
		{ "semver('1.0.0') == semver('1.0.0')", "function semver()" },
		{ "device.attributes['gpu.example.com'].index + 1 == 4", "arithmetic" },
		{ "device.attributes['gpu.example.com'].index == 1 ? true : false", "conditional operator" },
		{ "device.attributes['gpu.example.com'].index == 1.0", "double literal" },
		{ "device.attributes['gpu.example.com'].index == 1u", "unsigned integer literal" },
		{ "device.driver in ['a', 'b']", "operator `in`" },
		{ "['a'].size() == 1", "list literal" },
		{ "{'a': 1}['a'] == 1", "map literal" },
		{ "self.x == 1", "identifier `self`" },
		{ "device.allowMultipleAllocations", "device field" },
		{ "device == device", "use of `device`" },
		{ "device.attributes == 1", "bare map" },
		{ "device.attributes['gpu.example.com'] == 1", "bare map" },
		{ "device.attributes[device.driver].model == 'a'", "non-literal map key" },
		{ "r'raw' == 'raw'", "raw or bytes string" },
		{ "'''x''' == 'x'", "triple-quoted string" },
		{ "'\\x41' == 'A'", "string escape" },
		{ "1 < 2 < 3", "chained comparison" },
		{ "-device.attributes['gpu.example.com'].index == -3", "unary minus" },
		{ "device.driver == 'a'[0]", "index into a non-map value" },
		{ "quantity(device.driver) == quantity('1')", "quantity() of a non-literal" },
	};
	size_t i;
	for(i = 0; i < N(t); i++) {
		sched_cel *c = NULL;
		prd_err e;
		int rc = sched_cel_compile(t[i].expr, &c, &e);
		if(rc != PRD_EUNSUPPORTED || !strstr(e.msg, t[i].names))
			fprintf(stderr, "expr %s: rc %d msg '%s'\n", t[i].expr, rc, rc ? e.msg : "");
		CU_ASSERT_EQUAL(rc, PRD_EUNSUPPORTED);
		CU_ASSERT_PTR_NULL(c);
		if(rc)
			CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, t[i].names));
		sched_cel_free(c);
	}
}

static void test_malformed(void)
{
	static const char *const t[] = {
		"", "   ", "(", ")", "device.driver ==", "== 1", "device.", "device.attributes[",
		"device.attributes['a'", "device.attributes['a'].", "'unterminated", "\"x' == 'x'",
		"device.driver == 'a' &&", "(device.driver == 'a'", "quantity('1Gi'",
		"quantity('not a quantity') == quantity('1')", "99999999999999999999 == 1",
		"0x == 1", "12abc == 1", "device.driver == 'a' )", "@", "true false",
		"device.capacity['a'].memory.compareTo(quantity('1')",
		"device.capacity['a'].memory.compareTo", "'a\nb' == 'a'",
	};
	size_t i;
	for(i = 0; i < N(t); i++) {
		sched_cel *c = NULL;
		prd_err e;
		int rc = sched_cel_compile(t[i], &c, &e);
		if(rc != PRD_EINVAL)
			fprintf(stderr, "expr [%s]: rc %d msg '%s'\n", t[i], rc, rc ? e.msg : "");
		CU_ASSERT_EQUAL(rc, PRD_EINVAL);
		CU_ASSERT_PTR_NULL(c);
		sched_cel_free(c);
	}
}

static void test_limits(void)
{
	char deep[4096], *big;
	sched_cel *c = NULL;
	size_t i, n = 0;
	prd_err e;
	/* Deep nesting is refused, never a stack overflow. */
	for(i = 0; i < 1000; i++)
		deep[n++] = '(';
	deep[n++] = 't';
	deep[n++] = 'r';
	deep[n++] = 'u';
	deep[n++] = 'e';
	for(i = 0; i < 1000; i++)
		deep[n++] = ')';
	deep[n] = '\0';
	CU_ASSERT_EQUAL(sched_cel_compile(deep, &c, &e), PRD_EINVAL);
	n = 0;
	for(i = 0; i < 1000; i++)
		deep[n++] = '!';
	memcpy(deep + n, "true", 5);
	CU_ASSERT_EQUAL(sched_cel_compile(deep, &c, &e), PRD_EINVAL);
	/* Long but flat is fine up to the limit. */
	big = malloc(SCHED_CEL_MAX_LEN + 16);
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	memcpy(big, "true", 4);
	n = 4;
	while(n + 9 < SCHED_CEL_MAX_LEN) {
		memcpy(big + n, " && true", 8);
		n += 8;
	}
	big[n] = '\0';
	CU_ASSERT_EQUAL(sched_cel_compile(big, &c, &e), 0);
	CU_ASSERT_EQUAL(sched_cel_eval(c, &dev, &e), 1);
	CU_ASSERT_STRING_EQUAL(sched_cel_text(c), big);
	sched_cel_free(c);
	memset(big, ' ', SCHED_CEL_MAX_LEN + 8);
	big[SCHED_CEL_MAX_LEN + 8] = '\0';
	CU_ASSERT_EQUAL(sched_cel_compile(big, &c, &e), PRD_EINVAL);
	free(big);
	CU_ASSERT_EQUAL(sched_cel_compile(NULL, &c, &e), PRD_EINVAL);
}

static void test_all(void)
{
	setup();
	test_true_false();
	test_runtime_errors();
	test_unsupported();
	test_malformed();
	test_limits();
}

static const test_case cases[] = {
	{ "cel subset", test_all },
	{ NULL, NULL },
};

TEST_MAIN("sched_cel", cases)

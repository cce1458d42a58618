#include "testutil.h"
#include "util/yamljson.h"

#include <string.h>

static json_object *parse_one(const char *y)
{
	json_object *o = NULL;
	prd_err e;
	int rc = yj_parse_one(y, strlen(y), &o, &e);
	CU_ASSERT_EQUAL(rc, 0);
	if(rc)
		fprintf(stderr, "parse failed: %s\n", e.msg);
	return o;
}

static const char *get_str(json_object *o, const char *k)
{
	json_object *v;
	if(!json_object_object_get_ex(o, k, &v))
		return NULL;
	return json_object_get_string(v);
}

static void test_scalars(void)
{
	json_object *o = parse_one(
		"s: hello\n"
		"q: \"123\"\n"
		"sq: 'true'\n"
		"i: 42\n"
		"neg: -7\n"
		"hex: 0x1F\n"
		"f: 1.5\n"
		"e: 1e3\n"
		"t: true\n"
		"F: False\n"
		"n: null\n"
		"tilde: ~\n"
		"empty:\n"
		"qty: 100Mi\n"
		"ver: 1.2.3\n"
		"tagged: !!str 5\n"
		"block: |\n  line1\n  line2\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_TRUE(json_object_is_type(json_object_object_get(o, "s"), json_type_string));
	CU_ASSERT_TRUE(json_object_is_type(json_object_object_get(o, "q"), json_type_string));
	CU_ASSERT_STRING_EQUAL(get_str(o, "q"), "123");
	CU_ASSERT_TRUE(json_object_is_type(json_object_object_get(o, "sq"), json_type_string));
	CU_ASSERT_TRUE(json_object_is_type(json_object_object_get(o, "i"), json_type_int));
	CU_ASSERT_EQUAL(json_object_get_int64(json_object_object_get(o, "i")), 42);
	CU_ASSERT_EQUAL(json_object_get_int64(json_object_object_get(o, "neg")), -7);
	CU_ASSERT_EQUAL(json_object_get_int64(json_object_object_get(o, "hex")), 31);
	CU_ASSERT_TRUE(json_object_is_type(json_object_object_get(o, "f"), json_type_double));
	/* Floats keep their original spelling when serialised again. */
	CU_ASSERT_STRING_EQUAL(json_object_to_json_string(json_object_object_get(o, "e")), "1e3");
	CU_ASSERT_TRUE(json_object_get_boolean(json_object_object_get(o, "t")));
	CU_ASSERT_TRUE(json_object_is_type(json_object_object_get(o, "F"), json_type_boolean));
	CU_ASSERT_FALSE(json_object_get_boolean(json_object_object_get(o, "F")));
	CU_ASSERT_TRUE(json_object_object_get_ex(o, "n", NULL));
	CU_ASSERT_PTR_NULL(json_object_object_get(o, "n"));
	CU_ASSERT_PTR_NULL(json_object_object_get(o, "tilde"));
	CU_ASSERT_PTR_NULL(json_object_object_get(o, "empty"));
	CU_ASSERT_STRING_EQUAL(get_str(o, "qty"), "100Mi");
	CU_ASSERT_STRING_EQUAL(get_str(o, "ver"), "1.2.3");
	CU_ASSERT_TRUE(json_object_is_type(json_object_object_get(o, "tagged"), json_type_string));
	CU_ASSERT_STRING_EQUAL(get_str(o, "block"), "line1\nline2\n");
	json_object_put(o);
}

static void test_nested_and_flow(void)
{
	json_object *o = parse_one("spec: {podSets: [{count: 3, podTemplateRef: {name: a}}, {count: 1}]}\n");
	json_object *ps;
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	ps = json_object_object_get(json_object_object_get(o, "spec"), "podSets");
	CU_ASSERT_EQUAL(json_object_array_length(ps), 2);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_array_get_idx(ps, 0), "count")), 3);
	json_object_put(o);
}

static void test_anchors_merge(void)
{
	json_object *o = parse_one(
		"base: &b {cpu: 1, memory: 2Gi}\n"
		"copy: *b\n"
		"derived:\n"
		"  <<: *b\n"
		"  cpu: 4\n");
	json_object *copy, *der;
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	copy = json_object_object_get(o, "copy");
	der = json_object_object_get(o, "derived");
	CU_ASSERT_STRING_EQUAL(get_str(copy, "memory"), "2Gi");
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(der, "cpu")), 4);
	CU_ASSERT_STRING_EQUAL(get_str(der, "memory"), "2Gi");
	CU_ASSERT_FALSE(json_object_object_get_ex(der, "<<", NULL));
	json_object_put(o);
}

static void test_multi_doc_and_list(void)
{
	json_object *objs = NULL, *docs = NULL;
	const char *multi = "---\na: 1\n---\n---\nb: 2\n...\n";
	prd_err e;
	CU_ASSERT_EQUAL_FATAL(yj_load_file(test_srcpath("fixtures/yaml/nodes-list.yaml"), &objs, &e), 0);
	CU_ASSERT_EQUAL(json_object_array_length(objs), 3);
	CU_ASSERT_STRING_EQUAL(get_str(json_object_array_get_idx(objs, 0), "kind"), "Node");
	CU_ASSERT_STRING_EQUAL(get_str(json_object_array_get_idx(objs, 2), "kind"), "PodTemplate");
	json_object_put(objs);

	CU_ASSERT_EQUAL(yj_parse_all(multi, strlen(multi), &docs, &e), 0);
	CU_ASSERT_EQUAL(json_object_array_length(docs), 2);
	json_object_put(docs);

	CU_ASSERT_EQUAL(yj_parse_one(multi, strlen(multi), &docs, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "exactly one"));
	CU_ASSERT_EQUAL(yj_parse_one("", 0, &docs, &e), PRD_EINVAL);
}

struct bad_case {
	const char *yaml;
	const char *want; /* substring of the message, including position */
};

static void test_errors(void)
{
	static const struct bad_case bad[] = {
		{ "a: 1\nb: [1, 2\n", "line 3, column 1" },
		{ "a: 1\n  b: 2\n", "line 2, column 4" },
		{ "a: 1\na: 2\n", "line 2, column 1: duplicate mapping key \"a\"" },
		{ "x: *nope\n", "line 1, column 4: unknown alias" },
		{ "? [a, b]\n: 1\n", "mapping keys must be scalars" },
		{ "\"unterminated\n", "line 2" },
		{ "a: \t- x\n", "line 1" },
		{ "<<: 5\n", "merge key" },
	};
	size_t i;
	for(i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_object *d = NULL;
		prd_err e;
		prd_err_clear(&e);
		CU_ASSERT_EQUAL(yj_parse_all(bad[i].yaml, strlen(bad[i].yaml), &d, &e), PRD_EINVAL);
		CU_ASSERT_PTR_NULL(d);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i].want));
		if(!strstr(e.msg, bad[i].want))
			fprintf(stderr, "case %zu: got '%s' want '%s'\n", i, e.msg, bad[i].want);
	}
}

static void test_limits(void)
{
	char deep[2000];
	json_object *d = NULL;
	prd_err e;
	int i;
	for(i = 0; i < 600; i++)
		deep[i] = '[';
	deep[600] = '\0';
	CU_ASSERT_EQUAL(yj_parse_all(deep, 600, &d, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "nesting"));
	CU_ASSERT_EQUAL(yj_load_file("/nonexistent/x.yaml", &d, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "/nonexistent/x.yaml"));
	CU_ASSERT_EQUAL(yj_load_file("/", &d, &e), PRD_EIO);
}

static void test_alias_bomb(void)
{
	/* Nine levels of ten aliases each would be 10^9 nodes if expanded. */
	const char *bomb =
		"a: &a [x,x,x,x,x,x,x,x,x,x]\n"
		"b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
		"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
		"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
		"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
		"f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
		"g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
		"h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]\n"
		"i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
	json_object *d = NULL;
	prd_err e;
	int rc = yj_parse_all(bomb, strlen(bomb), &d, &e);
	/* Either refused or bounded: deep copies stop at the alias limit. */
	if(rc == 0)
		json_object_put(d);
	CU_ASSERT_EQUAL(rc, PRD_EINVAL);
}

static const test_case cases[] = {
	{ "scalars", test_scalars },
	{ "nested and flow", test_nested_and_flow },
	{ "anchors and merge keys", test_anchors_merge },
	{ "multi-document and List", test_multi_doc_and_list },
	{ "errors with positions", test_errors },
	{ "limits", test_limits },
	{ "alias bomb", test_alias_bomb },
	{ NULL, NULL }
};

TEST_MAIN("yamljson", cases)

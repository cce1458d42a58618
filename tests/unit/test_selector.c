/* Label selector behaviour. Cases follow apimachinery's labels tests
 * (TestSelectorParse, TestSelectorMatches, TestToString,
 * TestRequirementSelectorMatching, TestSetSelectorParser,
 * TestRequirementConstructor) and metav1.LabelSelectorAsSelector. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/selector.h"
#include "testutil.h"

/* ---- parse → canonical string ---------------------------------------- */

typedef struct str_case {
	const char *in;
	const char *want;
} str_case;

static const str_case good[] = {
	{"x=a,y=b,z=c", "x=a,y=b,z=c"},
	{"", ""},
	{"   ", ""},
	{"x!=a,y=b", "x!=a,y=b"},
	{"x=", "x="},
	{"x= ", "x="},
	{"x=,z= ", "x=,z="},
	{"x= ,z= ", "x=,z="},
	{"!x", "!x"},
	{"x>1", "x>1"},
	{"x>1,z<5", "x>1,z<5"},
	{"x=a,a=x", "a=x,x=a"},
	{"a=x,x=a", "a=x,x=a"},
	{"\rx", "x"},
	{"this-is-a-dns.domain.com/key-with-dash", "this-is-a-dns.domain.com/key-with-dash"},
	{"this-is-another-dns.domain.com/key-with-dash in (so,what)",
		"this-is-another-dns.domain.com/key-with-dash in (so,what)"},
	{"0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
		"0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)"},
	{"foo  in\t (abc)", "foo in (abc)"},
	{"x notin\n (abc)", "x notin (abc)"},
	{"x in (def,abc)", "x in (abc,def)"},
	{"x in (abc,)", "x in (,abc)"},
	{"x in ()", "x in ()"},
	{"x in (,)", "x in ()"},
	{"x in (a,,b)", "x in (,a,b)"},
	{"x in (b,a,b)", "x in (a,b)"},
	{"x notin (abc,def),bar,z in (),w", "bar,w,x notin (abc,def),z in ()"},
	{"x,y in (a)", "x,y in (a)"},
	{"x==a", "x==a"},
	{"notin=in", "notin=in"},
	{"in in (notin)", "in in (notin)"},
	{"a=b,c!=d,e in (x,y),f notin (z),g,!h", "a=b,c!=d,e in (x,y),f notin (z),g,!h"},
	{"z,!z,z=1", "z,!z,z=1"},
	{" a = b , c != d ", "a=b,c!=d"},
	{"example.com/tier in (frontend, backend)", "example.com/tier in (backend,frontend)"},
	{"k>05", "k>05"},
};

static void test_parse_good(void)
{
	size_t i;
	for(i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		prd_err err = {0};
		sel *s = NULL, *again = NULL;
		char *str;
		int rc = sel_parse(good[i].in, &s, &err);

		if(rc)
			fprintf(stderr, "\n  \"%s\": %s\n", good[i].in, err.msg);
		CU_ASSERT_EQUAL(rc, 0);
		if(rc)
			continue;
		str = sel_to_string(s);
		CU_ASSERT_PTR_NOT_NULL_FATAL(str);
		if(strcmp(str, good[i].want) != 0)
			fprintf(stderr, "\n  \"%s\": got \"%s\", want \"%s\"\n", good[i].in, str, good[i].want);
		CU_ASSERT_STRING_EQUAL(str, good[i].want);
		/* the canonical string parses back to the same selector */
		CU_ASSERT_EQUAL(sel_parse(str, &again, NULL), 0);
		CU_ASSERT(again && sel_equal(s, again));
		free(str);
		sel_free(again);
		sel_free(s);
	}
}

/* ---- rejections with their messages --------------------------------------- */

typedef struct bad_case {
	const char *in;
	const char *msg;   /* a substring the message must contain */
} bad_case;

static const bad_case bad[] = {
	{"x=a||y=b", "offset 0: invalid label value \"a||y\""},
	{"x=a y=b", "offset 4: found 'y', expected: ',' or end of string"},
	{"x==a==b", "offset 4: found '==', expected: ',' or end of string"},
	{"!x=a", "offset 2: found '=', expected: ',' or end of string"},
	{"x<a", "must be an integer"},
	{"x>-1", "invalid label value"},
	{"x=a,", "found end of string, expected: identifier after ','"},
	{",x", "offset 0: found ',', expected: !, identifier, or end of string"},
	{"x in a", "offset 5: found 'a', expected: '('"},
	{"x in (a", "found end of string, expected: ',' or ')'"},
	{"x in (a b)", "found 'b', expected: ',' or ')'"},
	{"x in (=)", "found '=', expected: ',', ')' or identifier"},
	{"x notin", "found end of string, expected: '('"},
	{"x y", "offset 2: found 'y', expected: in, notin, =, ==, !=, >, <"},
	{"x!", "found '!', expected: in, notin"},
	{"x=(", "found '(', expected: identifier"},
	{"!", "found end of string, expected: identifier"},
	{"!!x", "offset 1: found '!', expected: identifier"},
	{"-x=a", "offset 0: invalid label key \"-x\""},
	{"a/b/c", "at most one '/'"},
	{"/a", "prefix part must not be empty"},
	{"Example.com/a", "DNS-1123 subdomain"},
	{"ex..com/a", "DNS-1123 subdomain"},
	{"example.com/", "name part must not be empty"},
	{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"no more than 63"},
	{"x=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"invalid label value"},
	{"x=a_", "invalid label value"},
	{"x in (a,-b)", "invalid label value \"-b\""},
	{"x=~", "invalid label value"},
};

static void test_parse_bad(void)
{
	size_t i;
	for(i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		prd_err err = {0};
		sel *s = (sel *)&err;  /* must be reset to NULL */
		int rc = sel_parse(bad[i].in, &s, &err);

		CU_ASSERT_EQUAL(rc, PRD_EINVAL);
		CU_ASSERT_PTR_NULL(s);
		if(!strstr(err.msg, bad[i].msg))
			fprintf(stderr, "\n  \"%s\": message \"%s\", want \"%s\"\n", bad[i].in, err.msg, bad[i].msg);
		CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].msg));
	}
}

/* ---- key and value rules --------------------------------------------------- */

static void test_validation(void)
{
	char long_prefix[300], key[400];

	CU_ASSERT_EQUAL(sel_validate_key("app", NULL), 0);
	CU_ASSERT_EQUAL(sel_validate_key("1234", NULL), 0);
	CU_ASSERT_EQUAL(sel_validate_key("app.kubernetes.io/name", NULL), 0);
	CU_ASSERT_EQUAL(sel_validate_key("a_b.c-D", NULL), 0);
	CU_ASSERT_EQUAL(sel_validate_key("", NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sel_validate_key("a_", NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sel_validate_key("-a.com/b", NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sel_validate_key("a-.com/b", NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sel_validate_key("a.com/b c", NULL), PRD_EINVAL);
	/* prefix at most 253, name at most 63 */
	memset(long_prefix, 'a', 253);
	long_prefix[253] = '\0';
	snprintf(key, sizeof(key), "%s/x", long_prefix);
	CU_ASSERT_EQUAL(sel_validate_key(key, NULL), 0);
	snprintf(key, sizeof(key), "a%s/x", long_prefix);
	CU_ASSERT_EQUAL(sel_validate_key(key, NULL), PRD_EINVAL);
	memset(key, 'b', 63);
	key[63] = '\0';
	CU_ASSERT_EQUAL(sel_validate_key(key, NULL), 0);
	CU_ASSERT_EQUAL(sel_validate_value(key, NULL), 0);
	key[63] = 'b';
	key[64] = '\0';
	CU_ASSERT_EQUAL(sel_validate_key(key, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sel_validate_value(key, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sel_validate_value("", NULL), 0);
	CU_ASSERT_EQUAL(sel_validate_value("v1.2_3-x", NULL), 0);
	CU_ASSERT_EQUAL(sel_validate_value("a/b", NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(sel_validate_value(".a", NULL), PRD_EINVAL);
}

/* ---- matching ------------------------------------------------------------ */

typedef struct match_case {
	const char *sel;
	const char *labels;  /* JSON object */
	bool want;
} match_case;

static const match_case matches[] = {
	{"", "{\"x\":\"y\"}", true},
	{"", "{}", true},
	{"x=y", "{\"x\":\"y\"}", true},
	{"x=y,z=w", "{\"x\":\"y\",\"z\":\"w\"}", true},
	{"x!=y,z!=w", "{\"x\":\"z\",\"z\":\"a\"}", true},
	{"notin=in", "{\"notin\":\"in\"}", true},
	{"x", "{\"x\":\"z\"}", true},
	{"!x", "{\"y\":\"z\"}", true},
	{"x>1", "{\"x\":\"2\"}", true},
	{"x<1", "{\"x\":\"0\"}", true},
	{"x=z", "{}", false},
	{"x=y", "{\"x\":\"z\"}", false},
	{"x=y,z=w", "{\"x\":\"w\",\"z\":\"w\"}", false},
	{"x!=y,z!=w", "{\"x\":\"z\",\"z\":\"w\"}", false},
	{"x", "{\"y\":\"z\"}", false},
	{"!x", "{\"x\":\"z\"}", false},
	{"x>1", "{\"x\":\"0\"}", false},
	{"x<1", "{\"x\":\"2\"}", false},
	{"z>1", "{\"z\":\"v2\"}", false},
	{"z>1", "{}", false},
	{"foo=bar,baz=blah", "{\"foo\":\"bar\",\"baz\":\"blah\"}", true},
	{"foo=bar,foobar=bar,baz=blah", "{\"foo\":\"bar\",\"baz\":\"blah\"}", false},
	{"x in (foo),y notin (alpha)", "{\"x\":\"foo\",\"y\":\"baz\"}", true},
	{"x in (foo),y in (alpha)", "{\"x\":\"foo\",\"y\":\"baz\"}", false},
	{"x notin (),y", "{\"y\":\"\"}", true},
	{"!x,y", "{\"y\":\"\"}", true},
	{"x notin (),!y", "{\"y\":\"\"}", false},
	{"x in ()", "{\"y\":\"baz\"}", false},
	{"x in ()", "{\"x\":\"\"}", true},
	{"x=", "{\"x\":\"\"}", true},
	{"x!=", "{}", true},
	{"x notin (a)", "{}", true},
	{"x", "{\"x\":7}", false},   /* non-string label values count as absent */
	{"x", "null", false},
	{"!x", "null", true},
};

static void test_matching(void)
{
	size_t i;
	for(i = 0; i < sizeof(matches) / sizeof(matches[0]); i++) {
		sel *s;
		json_object *labels = json_tokener_parse(matches[i].labels);
		bool got;

		CU_ASSERT_EQUAL_FATAL(sel_parse(matches[i].sel, &s, NULL), 0);
		got = sel_matches_json(s, labels);
		if(got != matches[i].want)
			fprintf(stderr, "\n  \"%s\" on %s: %d\n", matches[i].sel, matches[i].labels, got);
		CU_ASSERT_EQUAL(got, matches[i].want);
		json_object_put(labels);
		sel_free(s);
	}
}

static void test_matching_pairs(void)
{
	static const sel_label labels[] = {
		{"app", "web"}, {"tier", "frontend"}, {"gen", "10"}, {"app", "shadowed"},
	};
	static const struct {
		const char *sel;
		bool want;
	} cases[] = {
		{"app=web", true},
		{"app=shadowed", false},
		{"app in (db,web),tier", true},
		{"tier notin (frontend)", false},
		{"gen>9,gen<11", true},
		{"gen>10", false},
		{"!zone", true},
		{"zone", false},
	};
	size_t i;
	for(i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sel *s;
		CU_ASSERT_EQUAL_FATAL(sel_parse(cases[i].sel, &s, NULL), 0);
		CU_ASSERT_EQUAL(sel_matches_pairs(s, labels, 4), cases[i].want);
		sel_free(s);
	}
	{
		sel *s;
		CU_ASSERT_EQUAL_FATAL(sel_parse("!a", &s, NULL), 0);
		CU_ASSERT(sel_matches_pairs(s, NULL, 0));
		sel_free(s);
	}
}

/* ---- LabelSelector JSON ----------------------------------------------------- */

typedef struct json_case {
	const char *json;
	const char *want;     /* canonical string; NULL: PRD_EINVAL */
	const char *msg;      /* for errors, a substring of the message */
} json_case;

static const json_case json_cases[] = {
	{"{}", "", NULL},
	{"{\"matchLabels\":{},\"matchExpressions\":[]}", "", NULL},
	{"{\"matchLabels\":null}", "", NULL},
	{"{\"matchLabels\":{\"b\":\"2\",\"a\":\"1\"}}", "a=1,b=2", NULL},
	{"{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"b\",\"a\",\"b\"]},"
		"{\"key\":\"gpu\",\"operator\":\"Exists\"},"
		"{\"key\":\"spot\",\"operator\":\"DoesNotExist\"},"
		"{\"key\":\"arch\",\"operator\":\"NotIn\",\"values\":[\"arm64\"]}]}",
		"arch notin (arm64),gpu,!spot,zone in (a,b)", NULL},
	{"{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Exists\"}]}",
		"app=web,app", NULL},
	{"{\"matchLabels\":{\"app\":\"\"}}", "app=", NULL},
	{"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Gt\",\"values\":[\"1\"]}]}", NULL,
		"\"Gt\" is not a valid label selector operator"},
	{"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[]}]}", NULL,
		"values set can't be empty"},
	{"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}", NULL,
		"values set can't be empty"},
	{"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}", NULL,
		"values set must be empty"},
	{"{\"matchExpressions\":[{\"key\":\"a b\",\"operator\":\"Exists\"}]}", NULL,
		"matchExpressions[0]: invalid label key"},
	{"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[1]}]}", NULL,
		"values[0] must be a string"},
	{"{\"matchExpressions\":[{\"operator\":\"Exists\"}]}", NULL, "key must be a string"},
	{"{\"matchExpressions\":{}}", NULL, "matchExpressions must be an array"},
	{"{\"matchExpressions\":[7]}", NULL, "must be an object"},
	{"{\"matchLabels\":[]}", NULL, "matchLabels must be an object"},
	{"{\"matchLabels\":{\"a\":1}}", NULL, "must be a string"},
	{"{\"matchLabels\":{\"a\":\"-x\"}}", NULL, "invalid label value"},
	{"[]", NULL, "label selector must be an object"},
};

static void test_from_json(void)
{
	size_t i;
	for(i = 0; i < sizeof(json_cases) / sizeof(json_cases[0]); i++) {
		const json_case *c = &json_cases[i];
		json_object *o = json_tokener_parse(c->json);
		prd_err err = {0};
		sel *s;
		int rc;

		CU_ASSERT_PTR_NOT_NULL_FATAL(o);
		rc = sel_from_json(o, &s, &err);
		if(c->want) {
			char *str;
			if(rc)
				fprintf(stderr, "\n  %s: %s\n", c->json, err.msg);
			CU_ASSERT_EQUAL(rc, 0);
			if(!rc) {
				str = sel_to_string(s);
				CU_ASSERT_PTR_NOT_NULL_FATAL(str);
				if(strcmp(str, c->want) != 0)
					fprintf(stderr, "\n  %s: got \"%s\"\n", c->json, str);
				CU_ASSERT_STRING_EQUAL(str, c->want);
				free(str);
				sel_free(s);
			}
		} else {
			CU_ASSERT_EQUAL(rc, PRD_EINVAL);
			CU_ASSERT_PTR_NULL(s);
			if(!strstr(err.msg, c->msg))
				fprintf(stderr, "\n  %s: message \"%s\"\n", c->json, err.msg);
			CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, c->msg));
		}
		json_object_put(o);
	}
}

static void test_everything_nothing(void)
{
	json_object *labels = json_tokener_parse("{\"x\":\"y\"}");
	json_object *empty = json_object_new_object();
	sel *s;
	char *str;

	/* NULL LabelSelector selects nothing, {} selects everything */
	CU_ASSERT_EQUAL_FATAL(sel_from_json(NULL, &s, NULL), 0);
	CU_ASSERT(sel_is_nothing(s));
	CU_ASSERT(!sel_is_everything(s));
	CU_ASSERT(!sel_matches_json(s, labels));
	CU_ASSERT(!sel_matches_json(s, empty));
	str = sel_to_string(s);
	CU_ASSERT_STRING_EQUAL(str, "");
	free(str);
	sel_free(s);

	CU_ASSERT_EQUAL_FATAL(sel_from_json(empty, &s, NULL), 0);
	CU_ASSERT(sel_is_everything(s));
	CU_ASSERT(sel_matches_json(s, labels));
	CU_ASSERT(sel_matches_json(s, empty));
	sel_free(s);

	s = sel_everything();
	CU_ASSERT(sel_matches_json(s, labels));
	CU_ASSERT_EQUAL(sel_count(s), 0);
	sel_free(s);
	s = sel_nothing();
	CU_ASSERT(!sel_matches_pairs(s, NULL, 0));
	sel_free(s);
	sel_free(NULL);

	json_object_put(labels);
	json_object_put(empty);
}

static void test_accessors(void)
{
	sel *s;
	CU_ASSERT_EQUAL_FATAL(sel_parse("zone in (b,a),!spot,gpu>1", &s, NULL), 0);
	CU_ASSERT_EQUAL(sel_count(s), 3);
	CU_ASSERT_STRING_EQUAL(sel_req_key(s, 0), "gpu");
	CU_ASSERT_EQUAL(sel_req_op(s, 0), SEL_GT);
	CU_ASSERT_STRING_EQUAL(sel_req_value(s, 0, 0), "1");
	CU_ASSERT_STRING_EQUAL(sel_req_key(s, 1), "spot");
	CU_ASSERT_EQUAL(sel_req_op(s, 1), SEL_DOES_NOT_EXIST);
	CU_ASSERT_EQUAL(sel_req_nvalues(s, 1), 0);
	CU_ASSERT_EQUAL(sel_req_op(s, 2), SEL_IN);
	CU_ASSERT_EQUAL(sel_req_nvalues(s, 2), 2);
	CU_ASSERT_STRING_EQUAL(sel_req_value(s, 2, 0), "a");
	CU_ASSERT_STRING_EQUAL(sel_req_value(s, 2, 1), "b");
	sel_free(s);
}

static void test_equal(void)
{
	sel *a, *b, *c;
	CU_ASSERT_EQUAL_FATAL(sel_parse("b in (y,x),a", &a, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(sel_parse("a, b in (x,y)", &b, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(sel_parse("a,b notin (x,y)", &c, NULL), 0);
	CU_ASSERT(sel_equal(a, b));
	CU_ASSERT(!sel_equal(a, c));
	sel_free(a);
	sel_free(b);
	sel_free(c);
}

static const test_case cases[] = {
	{"parse and canonical string", test_parse_good},
	{"parse errors", test_parse_bad},
	{"key and value rules", test_validation},
	{"matching JSON labels", test_matching},
	{"matching label pairs", test_matching_pairs},
	{"LabelSelector JSON", test_from_json},
	{"everything and nothing", test_everything_nothing},
	{"accessors", test_accessors},
	{"equal", test_equal},
	{NULL, NULL}
};

TEST_MAIN("selector", cases)

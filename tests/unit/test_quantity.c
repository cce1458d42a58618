/* resource.Quantity behaviour. Expected values come from apimachinery's own
 * tests and documented examples (quantity_test.go: TestQuantityParse,
 * TestQuantityString, TestQuantityParseEmit, TestMilliNewSet, TestNewSet,
 * TestQuantityCmp) and from the results observed with apimachinery that are
 * listed in issue 2; none were produced by this implementation. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kube/quantity.h"
#include "testutil.h"

static int check_str(const char *what, const qty *q, const char *want)
{
	char buf[QTY_STR_MAX];
	const char *got = qty_str(q, buf);
	if(strcmp(got, want) != 0) {
		fprintf(stderr, "\n  %s: got \"%s\", want \"%s\"\n", what, got, want);
		return 0;
	}
	return 1;
}

/* ---- parse → canonical string ----------------------------------------- */

typedef struct parse_case {
	const char *in;
	const char *want;
	qty_format fmt;
} parse_case;

#define D QTY_DECIMAL_SI
#define B QTY_BINARY_SI
#define X QTY_DECIMAL_EXPONENT

static const parse_case parse_cases[] = {
	/* observed apimachinery results required by issue 2 */
	{"0.1m", "100u", D},
	{"3.001n", "4n", D},
	{"1.5Gi", "1536Mi", B},
	{"1024Mi", "1Gi", B},
	{"1.5Ki", "1536", B},
	{"0.5Ki", "512", B},
	{"100.035Ki", "102435840m", B},
	{"1.2e3", "1200", X},
	{"1e3", "1e3", X},
	/* zero in every format prints "0" */
	{"0", "0", D},
	{"0n", "0", D},
	{"0m", "0", D},
	{"0Ki", "0", B},
	{"0Ti", "0", B},
	{"0e5", "0", X},
	{"-0", "0", D},
	/* plain and binary suffixes */
	{"1", "1", D},
	{"9", "9", D},
	{"1Ki", "1Ki", B},
	{"8Ki", "8Ki", B},
	{"7Mi", "7Mi", B},
	{"6Gi", "6Gi", B},
	{"5Ti", "5Ti", B},
	{"4Pi", "4Pi", B},
	{"3Ei", "3Ei", B},
	{"300Mi", "300Mi", B},
	{"307200Ki", "300Mi", B},
	{"1025Mi", "1025Mi", B},
	{"1024Gi", "1Ti", B},
	{"0.5Mi", "512Ki", B},
	/* binary, not a multiple of 1024: plain digits, no decimal suffix */
	{"10701411731687.5Ki", "10958245613248000", B},
	{"+1Ki", "1Ki", B},
	/* decimal suffixes */
	{"5n", "5n", D},
	{"4u", "4u", D},
	{"3m", "3m", D},
	{"8k", "8k", D},
	{"50k", "50k", D},
	{"7M", "7M", D},
	{"1000M", "1G", D},
	{"5T", "5T", D},
	{"40T", "40T", D},
	{"300T", "300T", D},
	{"2P", "2P", D},
	{"1E", "1E", D},
	{"12E", "12E", D},
	/* fractions */
	{"1.5", "1500m", D},
	{"1.08", "1080m", D},
	{"1080000000n", "1080m", D},
	{"0.001", "1m", D},
	{".001", "1m", D},
	{"0.0005k", "500m", D},
	{".0001k", "100m", D},
	{"0.05000", "50m", D},
	{"100.035k", "100035", D},
	{"10.035M", "10035k", D},
	{"8.1k", "8100", D},
	{"7.123456M", "7123456", D},
	{"6.987654321G", "6987654321", D},
	{"5.444T", "5444G", D},
	{"40.1T", "40100G", D},
	{"2.5P", "2500T", D},
	{"1.01E", "1010P", D},
	{"1.", "1", D},
	{"1.G", "1G", D},
	{"-9.01", "-9010m", D},
	{"-1.5Gi", "-1536Mi", B},
	/* exponents keep e notation */
	{"1E-3", "1e-3", X},
	{"0.001e0", "1e-3", X},
	{"1000e-12", "1e-9", X},
	{"80e-3", "80e-3", X},
	{"300e6", "300e6", X},
	{".001e12", "1e9", X},
	{"1e9", "1e9", X},
	{"1.3E+6", "1300e3", X},
	{"1.53E12", "1530e9", X},
	/* rounding up to 1n, away from zero */
	{"1.1E-9", "2e-9", X},
	{"0.5e-9", "1e-9", X},
	{"0.0000000001", "1n", D},
	{"0.00000000050", "1n", D},
	{"0.9n", "1n", D},
	{"0.00000012345", "124n", D},
	{"0.00000012354", "124n", D},
	{"-0.9n", "-1n", D},
	/* binary below one becomes DecimalSI; tiny binary rounds up */
	{".001Ki", "1024m", B},
	{".000001Ki", "1024u", D},
	{".000000001Ki", "1024n", D},
	{".000000000001Ki", "2n", D},
	{"-.000000000001Ki", "-2n", D},
	/* binary values are capped at 2^63-1 */
	{"9Ei", "9223372036854775807", B},
	{"9223372036854775807Ki", "9223372036854775807", B},
	/* apimachinery accepts a number without digits as zero */
	{"-", "0", D},
	{".", "0", D},
	{"Ki", "0", B},
	/* large decimal values stay exact */
	{"123456789012345678901", "123456789012345678901", D},
	{"18446744073709551616", "18446744073709551616", D},
	/* DecimalSI has no suffix past E: e notation keeps the magnitude */
	{"1000E", "1e21", D},
	{"5000E", "5e21", D},
	{"1e24", "1e24", X},
};

static void test_parse_canonical(void)
{
	size_t i;
	for(i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		const parse_case *c = &parse_cases[i];
		prd_err err = {0};
		qty q, again;
		char buf[QTY_STR_MAX];
		int rc = qty_parse(c->in, &q, &err);

		CU_ASSERT_EQUAL(rc, 0);
		if(rc) {
			fprintf(stderr, "\n  parse \"%s\": %s\n", c->in, err.msg);
			continue;
		}
		CU_ASSERT(check_str(c->in, &q, c->want));
		if(qty_get_format(&q) != c->fmt)
			fprintf(stderr, "\n  \"%s\": format %d, want %d\n", c->in, (int)qty_get_format(&q), (int)c->fmt);
		CU_ASSERT_EQUAL(qty_get_format(&q), c->fmt);
		/* the canonical string parses back to the same amount */
		CU_ASSERT_EQUAL(qty_parse(qty_str(&q, buf), &again, NULL), 0);
		CU_ASSERT(qty_equal(&q, &again));
	}
}

/* ---- rejections --------------------------------------------------------- */

typedef struct bad_case {
	const char *in;
	int code;
} bad_case;

static const bad_case bad_cases[] = {
	{"", PRD_EINVAL},
	{" 1", PRD_EINVAL},
	{"1 ", PRD_EINVAL},
	{"1K", PRD_EINVAL},
	{"1ki", PRD_EINVAL},
	{"5e", PRD_EINVAL},
	{"1.2.3", PRD_EINVAL},
	{"1.1.M", PRD_EINVAL},
	{"1+1.0M", PRD_EINVAL},
	{"0.1mi", PRD_EINVAL},
	{"0.1am", PRD_EINVAL},
	{"aoeu", PRD_EINVAL},
	{".5i", PRD_EINVAL},
	{"1i", PRD_EINVAL},
	{"-3.01i", PRD_EINVAL},
	{"-3.01e-", PRD_EINVAL},
	{"1KiB", PRD_EINVAL},
	{"1e+", PRD_EINVAL},
	{"1e3.5", PRD_EINVAL},
	{"--1", PRD_EINVAL},
	{"1Mi3", PRD_EINVAL},
	{"1ee3", PRD_EINVAL},
	{"1,5", PRD_EINVAL},
	{"\t1", PRD_EINVAL},
	/* well formed but beyond what we can hold */
	{"1e30", PRD_ERANGE},
	{"200000000000E", PRD_ERANGE},
	{"1e99999999999", PRD_ERANGE},
	{"1e99999999999999999999", PRD_ERANGE},
};

static void test_parse_errors(void)
{
	size_t i;
	for(i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		prd_err err = {0};
		qty q = qty_from_int64(7, QTY_DECIMAL_SI), seven = q;
		int rc = qty_parse(bad_cases[i].in, &q, &err);

		if(rc != bad_cases[i].code)
			fprintf(stderr, "\n  \"%s\": rc %d, want %d\n", bad_cases[i].in, rc, bad_cases[i].code);
		CU_ASSERT_EQUAL(rc, bad_cases[i].code);
		CU_ASSERT(err.msg[0] != '\0');
		CU_ASSERT(qty_equal(&q, &seven));   /* untouched on failure */
	}
	/* an embedded NUL is malformed, not a terminator */
	{
		qty q;
		CU_ASSERT_EQUAL(qty_parse_n("1\0", 2, &q, NULL), PRD_EINVAL);
		CU_ASSERT_EQUAL(qty_parse_n("12Ki", 4, &q, NULL), 0);
		CU_ASSERT(check_str("parse_n", &q, "12Ki"));
		CU_ASSERT_EQUAL(qty_parse_n("12Kix", 4, &q, NULL), 0);
		CU_ASSERT_EQUAL(qty_parse(NULL, &q, NULL), PRD_EINVAL);
	}
}

/* ---- arithmetic ----------------------------------------------------------- */

typedef struct arith_case {
	const char *a;
	char op;          /* '+', '-' or '*' */
	const char *b;    /* for '*', an integer */
	const char *want; /* NULL: PRD_ERANGE and a unchanged */
	qty_format fmt;
} arith_case;

static const arith_case arith_cases[] = {
	{"1Gi", '+', "1G", "2073741824", B},
	{"3920m", '+', "4", "7920m", D},
	{"7901468Ki", '*', "2", "15802936Ki", B},
	{"100m", '+', "0", "100m", D},
	{"0", '+', "100m", "100m", D},
	{"0", '+', "1Gi", "1Gi", B},
	{"1Gi", '+', "0", "1Gi", B},
	{"1Gi", '-', "0", "1Gi", B},
	{"0", '-', "1Gi", "-1Gi", B},
	{"0", '-', "100m", "-100m", D},
	{"1Gi", '-', "512Mi", "512Mi", B},
	{"512Mi", '+', "512Mi", "1Gi", B},
	{"1k", '+', "1Ki", "2024", D},
	{"1Ki", '+', "1k", "2024", B},
	{"1e3", '+', "1e3", "2e3", X},
	{"1", '-', "1", "0", D},
	{"1", '-', "1500m", "-500m", D},
	{"1.5", '*', "3", "4500m", D},
	{"1Ki", '*', "0", "0", B},
	{"1Ki", '*', "-3", "-3Ki", B},
	{"3n", '*', "1000", "3u", D},
	{"100000000000E", '*', "2", NULL, D},
	{"100000000000E", '+', "100000000000E", NULL, D},
	{"-100000000000E", '-', "100000000000E", NULL, D},
	{"100E", '*', "1000", "100e21", D},
	{"1Ei", '*', "1024", "1024Ei", B},
	{"9Ei", '*', "9223372036854775807", NULL, B},
};

static void test_arithmetic(void)
{
	size_t i;
	for(i = 0; i < sizeof(arith_cases) / sizeof(arith_cases[0]); i++) {
		const arith_case *c = &arith_cases[i];
		qty a, b, before;
		int rc;
		char what[64];

		snprintf(what, sizeof(what), "%s %c %s", c->a, c->op, c->b);
		CU_ASSERT_EQUAL_FATAL(qty_parse(c->a, &a, NULL), 0);
		before = a;
		if(c->op == '*') {
			int64_t n;
			CU_ASSERT_EQUAL_FATAL(sscanf(c->b, "%" SCNd64, &n), 1);
			rc = qty_mul(&a, n);
		} else {
			CU_ASSERT_EQUAL_FATAL(qty_parse(c->b, &b, NULL), 0);
			rc = c->op == '+' ? qty_add(&a, &b) : qty_sub(&a, &b);
		}
		if(!c->want) {
			CU_ASSERT_EQUAL(rc, PRD_ERANGE);
			CU_ASSERT(qty_equal(&a, &before));
			CU_ASSERT_EQUAL(qty_get_format(&a), qty_get_format(&before));
			continue;
		}
		CU_ASSERT_EQUAL(rc, 0);
		CU_ASSERT(check_str(what, &a, c->want));
		CU_ASSERT_EQUAL(qty_get_format(&a), c->fmt);
	}
}

static void test_neg(void)
{
	qty q;
	CU_ASSERT_EQUAL(qty_parse("9.01", &q, NULL), 0);
	qty_neg(&q);
	CU_ASSERT(check_str("neg", &q, "-9010m"));
	CU_ASSERT_EQUAL(qty_sign(&q), -1);
	qty_neg(&q);
	CU_ASSERT(check_str("neg neg", &q, "9010m"));
	CU_ASSERT_EQUAL(qty_sign(&q), 1);
}

/* ---- comparisons ---------------------------------------------------------- */

typedef struct cmp_case {
	const char *a, *b;
	int want;
} cmp_case;

static const cmp_case cmp_cases[] = {
	{"0", "0", 0},
	{"100m", "50m", 1},
	{"50m", "100m", -1},
	{"10000T", "100Gi", 1},
	{"1Gi", "1073741824", 0},
	{"1k", "1Ki", -1},
	{"1000m", "1", 0},
	{"1e3", "1k", 0},
	{"-1", "1n", -1},
	{"0Ki", "0", 0},
	{"9.01", "9.0100", 0},
	{"900m", "9.01", -1},
	{"18446744073709551616", "9Ei", 1},
};

static void test_compare(void)
{
	size_t i;
	for(i = 0; i < sizeof(cmp_cases) / sizeof(cmp_cases[0]); i++) {
		qty a, b;
		CU_ASSERT_EQUAL_FATAL(qty_parse(cmp_cases[i].a, &a, NULL), 0);
		CU_ASSERT_EQUAL_FATAL(qty_parse(cmp_cases[i].b, &b, NULL), 0);
		CU_ASSERT_EQUAL(qty_cmp(&a, &b), cmp_cases[i].want);
		CU_ASSERT_EQUAL(qty_cmp(&b, &a), -cmp_cases[i].want);
		CU_ASSERT_EQUAL(qty_equal(&a, &b), cmp_cases[i].want == 0);
	}
}

static void test_compare_int64(void)
{
	qty q;
	CU_ASSERT_EQUAL(qty_parse("1500m", &q, NULL), 0);
	CU_ASSERT_EQUAL(qty_cmp_int64(&q, 1), 1);
	CU_ASSERT_EQUAL(qty_cmp_int64(&q, 2), -1);
	CU_ASSERT_EQUAL(qty_parse("2", &q, NULL), 0);
	CU_ASSERT_EQUAL(qty_cmp_int64(&q, 2), 0);
	CU_ASSERT_EQUAL(qty_parse("-1n", &q, NULL), 0);
	CU_ASSERT_EQUAL(qty_cmp_int64(&q, 0), -1);
	CU_ASSERT_EQUAL(qty_parse("9Ei", &q, NULL), 0);
	CU_ASSERT_EQUAL(qty_cmp_int64(&q, INT64_MAX), 0);
}

/* ---- value / milli-value ------------------------------------------------- */

typedef struct value_case {
	const char *in;
	int milli;        /* 0: qty_value, 1: qty_milli_value */
	int rc;
	int64_t want;
} value_case;

static const value_case value_cases[] = {
	{"1m", 0, 0, 1},
	{"1500m", 0, 0, 2},
	{"2", 0, 0, 2},
	{"1Gi", 0, 0, 1073741824},
	{"1", 1, 0, 1000},
	{"1.5", 1, 0, 1500},
	{"0.1m", 1, 0, 1},
	{"1n", 1, 0, 1},
	{"-1.5", 0, 0, -2},
	{"-1n", 1, 0, -1},
	{"9Ei", 0, 0, INT64_MAX},
	{"9Ei", 1, PRD_ERANGE, 0},
	{"100E", 0, PRD_ERANGE, 0},
	{"9223372036854775807", 0, 0, INT64_MAX},
	{"9223372036854775808", 0, PRD_ERANGE, 0},
	{"-9223372036854775808", 0, 0, INT64_MIN},
	{"0", 1, 0, 0},
};

static void test_values(void)
{
	size_t i;
	for(i = 0; i < sizeof(value_cases) / sizeof(value_cases[0]); i++) {
		const value_case *c = &value_cases[i];
		qty q;
		int64_t v = 42;
		int rc;

		CU_ASSERT_EQUAL_FATAL(qty_parse(c->in, &q, NULL), 0);
		rc = c->milli ? qty_milli_value(&q, &v) : qty_value(&q, &v);
		if(rc != c->rc || (rc == 0 && v != c->want))
			fprintf(stderr, "\n  %s %s: rc %d value %lld\n", c->milli ? "milli" : "value",
				c->in, rc, (long long)v);
		CU_ASSERT_EQUAL(rc, c->rc);
		if(rc == 0) {
			CU_ASSERT_EQUAL(v, c->want);
		} else {
			CU_ASSERT_EQUAL(v, 42);
		}
	}
}

/* ---- constructors ---------------------------------------------------------- */

static void test_constructors(void)
{
	qty q;
	int64_t v;

	/* TestNewSet */
	q = qty_from_int64(1, QTY_DECIMAL_SI);
	CU_ASSERT(check_str("new 1", &q, "1"));
	q = qty_from_int64(1000, QTY_DECIMAL_SI);
	CU_ASSERT(check_str("new 1000", &q, "1k"));
	q = qty_from_int64(1234000, QTY_DECIMAL_SI);
	CU_ASSERT(check_str("new 1234000", &q, "1234k"));
	q = qty_from_int64(1024, QTY_BINARY_SI);
	CU_ASSERT(check_str("new 1024 bin", &q, "1Ki"));
	q = qty_from_int64(1024 * 1024, QTY_BINARY_SI);
	CU_ASSERT(check_str("new 1Mi", &q, "1Mi"));
	q = qty_from_int64(1000000, (qty_format)42);
	CU_ASSERT(check_str("new invalid format", &q, "1e6"));
	CU_ASSERT_EQUAL(qty_get_format(&q), QTY_DECIMAL_EXPONENT);
	/* TestMilliNewSet */
	q = qty_from_milli(1, QTY_DECIMAL_SI);
	CU_ASSERT(check_str("milli 1", &q, "1m"));
	q = qty_from_milli(1000, QTY_DECIMAL_SI);
	CU_ASSERT(check_str("milli 1000", &q, "1"));
	q = qty_from_milli(1234000, QTY_DECIMAL_SI);
	CU_ASSERT(check_str("milli 1234000", &q, "1234"));
	q = qty_from_milli(1024, QTY_BINARY_SI);
	CU_ASSERT(check_str("milli 1024 bin", &q, "1024m"));
	q = qty_from_milli(1024 * 1024, QTY_BINARY_SI);
	CU_ASSERT(check_str("milli 1048576 bin", &q, "1048576m"));
	q = qty_from_milli(1000000, (qty_format)42);
	CU_ASSERT(check_str("milli invalid format", &q, "1e3"));
	CU_ASSERT_EQUAL(qty_milli_value(&q, &v), 0);
	CU_ASSERT_EQUAL(v, 1000000);
	/* extremes are exact */
	q = qty_from_int64(INT64_MIN, QTY_DECIMAL_SI);
	CU_ASSERT_EQUAL(qty_value(&q, &v), 0);
	CU_ASSERT_EQUAL(v, INT64_MIN);
	q = qty_from_milli(INT64_MAX, QTY_DECIMAL_SI);
	CU_ASSERT_EQUAL(qty_milli_value(&q, &v), 0);
	CU_ASSERT_EQUAL(v, INT64_MAX);
}

static void test_zero_and_sign(void)
{
	qty q;
	memset(&q, 0, sizeof(q));
	CU_ASSERT(qty_is_zero(&q));
	CU_ASSERT_EQUAL(qty_sign(&q), 0);
	CU_ASSERT_EQUAL(qty_get_format(&q), QTY_DECIMAL_SI);
	CU_ASSERT(check_str("memset zero", &q, "0"));
	CU_ASSERT_EQUAL(qty_parse("1n", &q, NULL), 0);
	CU_ASSERT(!qty_is_zero(&q));
	CU_ASSERT_EQUAL(qty_sign(&q), 1);
	CU_ASSERT_EQUAL(qty_parse("-0.000Ki", &q, NULL), 0);
	CU_ASSERT(qty_is_zero(&q));
	CU_ASSERT_EQUAL(qty_get_format(&q), QTY_BINARY_SI);
}

static void test_small_buffer(void)
{
	qty q;
	char small[4] = "xyz";
	CU_ASSERT_EQUAL(qty_parse("1536Mi", &q, NULL), 0);
	CU_ASSERT_EQUAL(qty_format_str(&q, small, sizeof(small)), PRD_ERANGE);
	CU_ASSERT_STRING_EQUAL(small, "");
	CU_ASSERT_EQUAL(qty_format_str(&q, small, 0), PRD_ERANGE);
}

/* The longest strings the type can produce still fit QTY_STR_MAX and
 * parse back. */
static void test_extremes_round_trip(void)
{
	static const char *const ins[] = {
		"170141183460469231731687303715.884105727", /* (2^127-1)n */
		"-170141183460469231731687303715.884105727",
		"170141183460469231731687303715884105727n",
		"1.000000001Ei",
	};
	size_t i;
	for(i = 0; i < sizeof(ins) / sizeof(ins[0]); i++) {
		qty q, again;
		char buf[QTY_STR_MAX];
		CU_ASSERT_EQUAL_FATAL(qty_parse(ins[i], &q, NULL), 0);
		CU_ASSERT_EQUAL(qty_format_str(&q, buf, sizeof(buf)), 0);
		CU_ASSERT_EQUAL(qty_parse(buf, &again, NULL), 0);
		CU_ASSERT(qty_equal(&q, &again));
	}
	{
		qty q;
		CU_ASSERT_EQUAL(qty_parse("170141183460469231731687303715.884105728", &q, NULL), PRD_ERANGE);
		CU_ASSERT_EQUAL(qty_parse("170141183460469231731687303715884105727n", &q, NULL), 0);
		CU_ASSERT(check_str("max", &q, "170141183460469231731687303715884105727n"));
	}
}

static const test_case cases[] = {
	{"parse and canonical string", test_parse_canonical},
	{"parse errors", test_parse_errors},
	{"add, sub, mul", test_arithmetic},
	{"neg", test_neg},
	{"compare", test_compare},
	{"compare with int64", test_compare_int64},
	{"value and milli-value", test_values},
	{"constructors", test_constructors},
	{"zero and sign", test_zero_and_sign},
	{"small buffer", test_small_buffer},
	{"extremes round trip", test_extremes_round_trip},
	{NULL, NULL}
};

TEST_MAIN("quantity", cases)

#include "testutil.h"
#include "ops/log.h"
#include "util/clock.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

static long long fixed_now(void)
{
	return 1714557600123456789LL; /* 2024-05-01T10:00:00.123456Z */
}

/* Point the logger at a memory stream; capture_end returns what it wrote
 * (caller frees). */
static void capture_begin(FILE **f, char **mem, size_t *len, int level, int fmt)
{
	*f = open_memstream(mem, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(*f);
	log_setup(level, fmt, *f);
	log_set_time_fn(fixed_now);
}

static char *capture_end(FILE *f, char **mem)
{
	fclose(f); /* updates *mem */
	log_setup(PRD_LOG_INFO, PRD_LOG_TEXT, NULL);
	return *mem;
}

static void test_text_line(void)
{
	FILE *f;
	char *mem;
	size_t len;
	capture_begin(&f, &mem, &len, PRD_LOG_INFO, PRD_LOG_TEXT);
	log_info("request provisioned", "namespace", "team-a", "name", "job 1", "attempts", LOGI(3));
	mem = capture_end(f, &mem);
	CU_ASSERT_STRING_EQUAL(mem, "ts=2024-05-01T10:00:00.123456Z level=info msg=\"request provisioned\" "
			       "namespace=team-a name=\"job 1\" attempts=3\n");
	free(mem);
}

/* A fake clock stamps the lines (simulate's simulated time), and moving
 * it moves the stamps; clearing it goes back to the time function. */
static void test_clock_stamps(void)
{
	FILE *f;
	char *mem;
	size_t len;
	clk c;
	clk_fake_init(&c, 1767225600LL * PRD_NS_PER_SEC); /* 2026-01-01T00:00:00Z */
	capture_begin(&f, &mem, &len, PRD_LOG_INFO, PRD_LOG_TEXT);
	log_set_clock(&c);
	log_info("a");
	clk_fake_advance(&c, 90 * PRD_NS_PER_SEC);
	log_info("b");
	log_set_clock(NULL);
	log_info("c");
	mem = capture_end(f, &mem);
	CU_ASSERT_STRING_EQUAL(mem, "ts=2026-01-01T00:00:00.000000Z level=info msg=a\n"
			       "ts=2026-01-01T00:01:30.000000Z level=info msg=b\n"
			       "ts=2024-05-01T10:00:00.123456Z level=info msg=c\n");
	free(mem);
}

static void test_json_line(void)
{
	FILE *f;
	char *mem;
	size_t len;
	json_object *o;
	capture_begin(&f, &mem, &len, PRD_LOG_DEBUG, PRD_LOG_JSON);
	log_debug("quote \" and\nnewline", "k", "v\t1", "nil", NULL);
	mem = capture_end(f, &mem);
	o = json_tokener_parse(mem);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "level")), "debug");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "msg")), "quote \" and\nnewline");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "k")), "v\t1");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "nil")), "<nil>");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "ts")), "2024-05-01T10:00:00.123456Z");
	CU_ASSERT_EQUAL(len, strlen(mem));
	CU_ASSERT_EQUAL(mem[len - 1], '\n');
	json_object_put(o);
	free(mem);
}

/* Integers given with LOGI are JSON numbers, not strings; text that only
 * looks like a number stays a string. */
static void test_json_numbers(void)
{
	FILE *f;
	char *mem;
	size_t len;
	json_object *o, *v;
	capture_begin(&f, &mem, &len, PRD_LOG_INFO, PRD_LOG_JSON);
	log_info("counts", "attempts", LOGI(3), "delta", LOGI(-42), "big", LOGI(9007199254740993LL), "name", "17",
		 "token", LOGI(5));
	mem = capture_end(f, &mem);
	o = json_tokener_parse(mem);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	v = json_object_object_get(o, "attempts");
	CU_ASSERT_TRUE(json_object_is_type(v, json_type_int));
	CU_ASSERT_EQUAL(json_object_get_int64(v), 3);
	v = json_object_object_get(o, "delta");
	CU_ASSERT_TRUE(json_object_is_type(v, json_type_int));
	CU_ASSERT_EQUAL(json_object_get_int64(v), -42);
	CU_ASSERT_EQUAL(json_object_get_int64(json_object_object_get(o, "big")), 9007199254740993LL);
	CU_ASSERT_TRUE(json_object_is_type(json_object_object_get(o, "name"), json_type_string));
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "token")), "<redacted>");
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\"attempts\":3,\"delta\":-42,"));
	json_object_put(o);
	free(mem);

	/* The marker never reaches a text line. */
	capture_begin(&f, &mem, &len, PRD_LOG_INFO, PRD_LOG_TEXT);
	log_info("counts", "attempts", LOGI(3), "delta", LOGI(-42));
	mem = capture_end(f, &mem);
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, " attempts=3 delta=-42\n"));
	CU_ASSERT_PTR_NULL(strchr(mem, LOG__NUM));
	free(mem);
}

static void test_levels_filter(void)
{
	FILE *f;
	char *mem;
	size_t len;
	capture_begin(&f, &mem, &len, PRD_LOG_WARN, PRD_LOG_TEXT);
	log_info("hidden");
	log_debug("hidden too");
	log_warn("shown");
	log_error("also shown");
	mem = capture_end(f, &mem);
	CU_ASSERT_PTR_NULL(strstr(mem, "hidden"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "msg=shown"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "level=error msg=\"also shown\""));
	free(mem);
	CU_ASSERT_FALSE(log_enabled(PRD_LOG_DEBUG));
}

static void test_secrets_redacted(void)
{
	FILE *f;
	char *mem;
	size_t len;
	capture_begin(&f, &mem, &len, PRD_LOG_INFO, PRD_LOG_TEXT);
	log_info("auth", "token", "abc123", "bearerToken", "xyz", "Authorization", "Bearer q",
		 "client-key-data", "LS0t", "password", "hunter2", "user", "alice");
	mem = capture_end(f, &mem);
	CU_ASSERT_PTR_NULL(strstr(mem, "abc123"));
	CU_ASSERT_PTR_NULL(strstr(mem, "xyz"));
	CU_ASSERT_PTR_NULL(strstr(mem, "Bearer q"));
	CU_ASSERT_PTR_NULL(strstr(mem, "LS0t"));
	CU_ASSERT_PTR_NULL(strstr(mem, "hunter2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "token=<redacted>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "user=alice"));
	free(mem);
}

static void test_parse_flags(void)
{
	int v = -1;
	CU_ASSERT_EQUAL(log_parse_format("json", &v), 0);
	CU_ASSERT_EQUAL(v, PRD_LOG_JSON);
	CU_ASSERT_EQUAL(log_parse_format("text", &v), 0);
	CU_ASSERT_EQUAL(v, PRD_LOG_TEXT);
	CU_ASSERT_NOT_EQUAL(log_parse_format("xml", &v), 0);
	CU_ASSERT_EQUAL(log_parse_level("debug", &v), 0);
	CU_ASSERT_EQUAL(v, PRD_LOG_DEBUG);
	CU_ASSERT_EQUAL(log_parse_level("WARN", &v), 0);
	CU_ASSERT_EQUAL(v, PRD_LOG_WARN);
	CU_ASSERT_EQUAL(log_parse_level("4", &v), 0);
	CU_ASSERT_EQUAL(v, PRD_LOG_TRACE);
	CU_ASSERT_EQUAL(log_parse_level("9", &v), 0);
	CU_ASSERT_EQUAL(v, PRD_LOG_TRACE);
	CU_ASSERT_NOT_EQUAL(log_parse_level("loud", &v), 0);
	CU_ASSERT_NOT_EQUAL(log_parse_level(NULL, &v), 0);
}

static const test_case cases[] = {
	{ "text line", test_text_line },
	{ "json line", test_json_line },
	{ "clock stamps", test_clock_stamps },
	{ "json numbers", test_json_numbers },
	{ "level filter", test_levels_filter },
	{ "secrets redacted", test_secrets_redacted },
	{ "parse flags", test_parse_flags },
	{ NULL, NULL }
};

TEST_MAIN("log", cases)

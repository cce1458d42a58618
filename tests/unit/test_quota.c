/* Quota before capacity: the check alone (classes/quota.h), and the
 * controller refusing to book or buy for a request its namespace's
 * ResourceQuotas would not admit. Each test says which broken controller it
 * catches. */
#include "testutil.h"
#include "ctlfix.h"
#include "classes/quota.h"
#include "classes/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the check alone ------------------------------------------------------ */

static json_object *js(const char *text)
{
	json_object *o = json_tokener_parse(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	return o;
}

static const sched_res two_cpu[2] = { { "cpu", 2000 }, { "memory", 1LL << 30 } };
static const sched_pod_spec pod2 = { .requests = two_cpu, .n_requests = 2 };

static int check(const char *quotas, const char *spec, int64_t count, int64_t held, char *msg, size_t len)
{
	json_object *q = js(quotas), *s = spec ? js(spec) : NULL;
	pr_quota_pods ask = { &pod2, s, count }, h = { &pod2, s, held };
	int rc = pr_quota_check(q, &ask, 1, &h, held ? 1 : 0, msg, len);
	json_object_put(q);
	json_object_put(s);
	return rc;
}

/* The keys a pod's requests count against, scopes, what others hold, and
 * the words of the answer. Broken controllers caught: one that ignores
 * what other booked requests hold, one that counts a quota whose scope
 * does not select the pods (or misses one that does), one that reads
 * limits.* as requests, one whose message does not say what is free. */
static void test_check(void)
{
	char msg[1024];
	const char *cpu4 = "[{\"metadata\":{\"name\":\"team\"},\"spec\":{\"hard\":{\"requests.cpu\":\"4\"}},"
			   "\"status\":{\"hard\":{\"requests.cpu\":\"4\"},\"used\":{\"requests.cpu\":\"500m\"}}}]";
	CU_ASSERT_EQUAL(check(cpu4, NULL, 1, 0, msg, sizeof(msg)), 0);
	CU_ASSERT_EQUAL(check(cpu4, NULL, 2, 0, msg, sizeof(msg)), 1);
	CU_ASSERT_STRING_EQUAL(msg, "ResourceQuota team: requests.cpu: the pods ask for 4, 3500m is free (hard 4, used 500m)");
	/* One pod fits alone, not beside another request's booked pod. */
	CU_ASSERT_EQUAL(check(cpu4, NULL, 1, 1, msg, sizeof(msg)), 1);
	CU_ASSERT_TRUE(strstr(msg, "1500m is free") && strstr(msg, "2 held by other requests"));
	/* pods and memory; memory printed in binary units. */
	CU_ASSERT_EQUAL(check("[{\"metadata\":{\"name\":\"n\"},\"spec\":{\"hard\":{\"pods\":\"3\"}},"
			      "\"status\":{\"used\":{\"pods\":\"2\"}}}]",
			      NULL, 2, 0, msg, sizeof(msg)),
			1);
	CU_ASSERT_TRUE(strstr(msg, "pods: the pods ask for 2, 1 is free") != NULL);
	CU_ASSERT_EQUAL(check("[{\"metadata\":{\"name\":\"m\"},\"spec\":{\"hard\":{\"memory\":\"2Gi\"}}}]", NULL, 3, 0, msg,
			      sizeof(msg)),
			1);
	CU_ASSERT_TRUE(strstr(msg, "the pods ask for 3Gi, 2Gi is free") != NULL);
	/* limits.* and object counts are not what the pods' requests count
	 * against. */
	CU_ASSERT_EQUAL(check("[{\"metadata\":{\"name\":\"l\"},\"spec\":{\"hard\":{\"limits.cpu\":\"1\",\"services\":\"0\"}}}]",
			      NULL, 3, 0, msg, sizeof(msg)),
			0);
	/* Scopes: BestEffort does not select pods with requests; a
	 * PriorityClass selector selects by the template's class. */
	CU_ASSERT_EQUAL(check("[{\"metadata\":{\"name\":\"be\"},\"spec\":{\"hard\":{\"pods\":\"0\"},\"scopes\":[\"BestEffort\"]}}]",
			      "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"2\"}}}]}", 1, 0, msg,
			      sizeof(msg)),
			0);
	CU_ASSERT_EQUAL(check("[{\"metadata\":{\"name\":\"nbe\"},\"spec\":{\"hard\":{\"pods\":\"0\"},\"scopes\":[\"NotBestEffort\"]}}]",
			      "{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"2\"}}}]}", 1, 0, msg,
			      sizeof(msg)),
			1);
	{
		const char *hi = "[{\"metadata\":{\"name\":\"hi\"},\"spec\":{\"hard\":{\"requests.cpu\":\"1\"},\"scopeSelector\":"
				 "{\"matchExpressions\":[{\"scopeName\":\"PriorityClass\",\"operator\":\"In\",\"values\":[\"high\"]}]}}}]";
		CU_ASSERT_EQUAL(check(hi, "{\"priorityClassName\":\"high\"}", 1, 0, msg, sizeof(msg)), 1);
		CU_ASSERT_EQUAL(check(hi, "{\"priorityClassName\":\"low\"}", 1, 0, msg, sizeof(msg)), 0);
		CU_ASSERT_EQUAL(check(hi, "{}", 1, 0, msg, sizeof(msg)), 0);
	}
	/* A Capsule pool's quota is named as the pool's. */
	CU_ASSERT_EQUAL(check("[{\"metadata\":{\"name\":\"capsule-pool-gold\"},\"spec\":{\"hard\":{\"requests.cpu\":\"1\"}}}]",
			      NULL, 1, 0, msg, sizeof(msg)),
			1);
	CU_ASSERT_TRUE(strstr(msg, "Capsule ResourcePool gold") != NULL);
	/* A value that does not parse: provreqd cannot tell, and says so. */
	CU_ASSERT_EQUAL(check("[{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"hard\":{\"requests.cpu\":\"lots\"}}}]", NULL, 1, 0,
			      msg, sizeof(msg)),
			PRD_EINVAL);
	CU_ASSERT_TRUE(strstr(msg, "does not parse") != NULL);
}

/* ---- the controller ------------------------------------------------------- */

static void add_quota(const char *ns, const char *name, const char *hard, const char *used)
{
	char y[800], path[200];
	snprintf(y, sizeof(y), "metadata: {name: %s}\nspec: {hard: %s}\nstatus: {hard: %s, used: %s}\n", name, hard, hard,
		 used ? used : "{}");
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/resourcequotas", ns);
	CU_ASSERT_EQUAL(fx_send("POST", path, y), 0);
}

static void start_q(const char *driver_cfg, bool on)
{
	pr_config cfg;
	pr_config_default(&cfg);
	cfg.quota_check = on;
	start_cfg(driver_cfg, &cfg);
}

/* A request over its namespace's quota gets QuotaExceeded and books
 * nothing (the room it would have booked goes to a request of another
 * namespace); one within it is Provisioned, and then counts against the
 * namespace's next request; with noRetry the refusal is final. Broken
 * controllers caught: one without the check (the first request would be
 * Provisioned), one that books before it checks (the other namespace's
 * request would not fit), one that forgets Provisioned requests not yet
 * consumed (the third request would be Provisioned). */
static void test_over_quota_books_nothing(void)
{
	start_q(NULL, true);
	add_node("n1", "8");
	add_template("team", "two", "2");
	add_template("other", "two", "2");
	add_quota("team", "team-quota", "{requests.cpu: \"6\", pods: \"10\"}", "{requests.cpu: \"1\"}");
	add_pr("team", "big", PR_CLASS_CHECK, "two", 3, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "big", "Provisioned"), "False/" PR_R_QUOTA_EXCEEDED);
	CU_ASSERT_STRING_EQUAL(cond("team", "big", "Failed"), "-");
	CU_ASSERT_STRING_EQUAL(cond_msg("team", "big", "Provisioned"),
			       "ResourceQuota team-quota: requests.cpu: the pods ask for 6, 5 is free (hard 6, used 1)");
	CU_ASSERT_STRING_EQUAL(detail_of("team", "big", "provreqd.io/booking"), "-");
	add_pr("other", "all", PR_CLASS_CHECK, "two", 4, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("other", "all", "Provisioned"), "True/CapacityIsFound");
	stop();

	start_q(NULL, true);
	add_node("n1", "16");
	add_template("team", "two", "2");
	add_quota("team", "team-quota", "{requests.cpu: \"6\"}", NULL);
	add_pr("team", "fits", PR_CLASS_CHECK, "two", 2, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "fits", "Provisioned"), "True/CapacityIsFound");
	clk_fake_advance(&fake, SEC);
	add_pr("team", "next", PR_CLASS_CHECK, "two", 2, "{noRetry: \"true\"}");
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "next", "Failed"), "True/" PR_R_QUOTA_EXCEEDED);
	CU_ASSERT_TRUE(strstr(cond_msg("team", "next", "Failed"), "4 held by other requests") != NULL);
	stop();
}

/* Two requests of one namespace answered in the same pass: the second
 * sees what the first was just given. Broken controller caught: one that
 * counts only what the statuses said at the start of the pass (both
 * would be Provisioned, 8 CPU against a quota of 6). */
static void test_same_pass(void)
{
	start_q(NULL, true);
	add_node("n1", "16");
	add_template("team", "two", "2");
	add_quota("team", "q", "{requests.cpu: \"6\"}", NULL);
	add_pr("team", "a", PR_CLASS_CHECK, "two", 2, NULL);
	add_pr("team", "b", PR_CLASS_CHECK, "two", 2, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "a", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_STRING_EQUAL(cond("team", "b", "Provisioned"), "False/" PR_R_QUOTA_EXCEEDED);
	stop();
}

/* An atomic request over quota buys no node. Broken controller caught:
 * one that checks quota only for check-capacity (the scale-up would
 * start). */
static void test_atomic_buys_nothing(void)
{
	start_q("small 0 5 0 4 16Gi 110\n", true);
	add_template("r", "two", "2");
	add_quota("r", "q", "{requests.cpu: \"4\"}", NULL);
	add_pr("r", "job", PR_CLASS_ATOMIC, "two", 4, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("r", "job", "Provisioned"), "False/" PR_R_QUOTA_EXCEEDED);
	CU_ASSERT_EQUAL(pr_ctl_stats(ctl)->scaleups_started, 0);
	stop();
}

/* --quota-check=false: quotas are not looked at (Kueue decides them).
 * Broken controller caught: one whose switch does nothing. */
static void test_switched_off(void)
{
	start_q(NULL, false);
	add_node("n1", "16");
	add_template("team", "two", "2");
	add_quota("team", "q", "{requests.cpu: \"1\"}", NULL);
	add_pr("team", "a", PR_CLASS_CHECK, "two", 2, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "a", "Provisioned"), "True/CapacityIsFound");
	stop();
}

/* The quotas cannot be listed for a moment (500): the request waits, and
 * is checked once they can be. Broken controllers caught: one that books
 * unchecked when the quotas cannot be read, one that fails the request on
 * a passing error. */
static void test_quota_unreadable_waits(void)
{
	start_q(NULL, true);
	add_node("n1", "16");
	add_template("team", "two", "2");
	add_quota("team", "q", "{requests.cpu: \"2\"}", NULL);
	add_pr("team", "big", PR_CLASS_CHECK, "two", 2, "{noRetry: \"true\"}");
	memapi_inject_fault(m, "GET", "/api/v1/namespaces/team/resourcequotas", 500, 1);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "big", "Provisioned"), "-");
	CU_ASSERT_STRING_EQUAL(detail_of("team", "big", "provreqd.io/booking"), "-");
	clk_fake_advance(&fake, 11 * SEC);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "big", "Failed"), "True/" PR_R_QUOTA_EXCEEDED);
	stop();
}

static const test_case cases[] = {
	{ "quotas that cannot be read: the request waits", test_quota_unreadable_waits },
	{ "the check: keys, scopes, what others hold, the words", test_check },
	{ "over quota: QuotaExceeded, nothing booked; booked requests count", test_over_quota_books_nothing },
	{ "two requests of a namespace in one pass", test_same_pass },
	{ "an atomic request over quota buys no node", test_atomic_buys_nothing },
	{ "the check can be switched off", test_switched_off },
	{ NULL, NULL }
};

TEST_MAIN("quota", cases)

/* Event recorder: creation, aggregation, spam filter, failure handling. */
#include "testutil.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/client.h"
#include "kube/events.h"
#include "test_kube_fakesrv.h"
#include "util/rfc3339.h"

typedef struct env {
	fake_store *st;
	fake_srv *srv;
	kube_config *cfg;
	kube_client *c;
	kube_api api;
	kube_recorder *rec;
	clk fc;
} env;

static void env_start(env *e, const kube_recorder_opts *ro)
{
	kube_recorder_opts o = ro ? *ro : (kube_recorder_opts){0};
	int64_t t0;
	prd_err err;

	memset(e, 0, sizeof(*e));
	rfc3339_parse("2025-03-01T12:00:00Z", &t0, NULL);
	clk_fake_init(&e->fc, t0);
	o.clock = &e->fc;
	o.instance = "unit-host";
	e->st = fake_store_new();
	e->srv = fake_start(fake_store_handler, e->st);
	CU_ASSERT_PTR_NOT_NULL_FATAL(e->srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(e->srv, &(kube_client_opts){.max_retries = -1}, &e->cfg, &e->c), 0);
	e->api = kube_api_from_client(e->c);
	CU_ASSERT_EQUAL_FATAL(kube_recorder_new(&e->api, &o, &e->rec, &err), 0);
}

static void env_stop(env *e)
{
	kube_recorder_free(e->rec);
	kube_client_free(e->c);
	kube_config_free(e->cfg);
	fake_stop(e->srv);
	fake_store_free(e->st);
}

static const kube_object_ref PR = {"ProvisioningRequest", "autoscaling.x-k8s.io/v1", "team-a",
				   "req-1", "uid-123", "42"};

/* Exactly one Event exists in the namespace. */
static void assert_one_event(env *e, const char *ns)
{
	char prefix[256];
	snprintf(prefix, sizeof(prefix), "/api/v1/namespaces/%s/events/", ns);
	CU_ASSERT_EQUAL(fake_store_len(e->st, prefix), 1);
}

static const char *sget(json_object *o, const char *a, const char *b)
{
	json_object *x, *y;
	if(!json_object_object_get_ex(o, a, &x))
		return NULL;
	if(!b)
		return json_object_get_string(x);
	if(!json_object_object_get_ex(x, b, &y))
		return NULL;
	return json_object_get_string(y);
}

static void test_create_and_aggregate(void)
{
	env e;
	kube_recorder_stats s;
	char path[512], *txt;
	json_object *ev;

	env_start(&e, NULL);
	kube_recorder_event(e.rec, &PR, "Warning", "CapacityIsNotFound", "need %d nodes of %s", 3, "m5");
	CU_ASSERT_EQUAL(fake_store_count(e.st, "POST"), 1);
	assert_one_event(&e, "team-a");
	snprintf(path, sizeof(path), "/api/v1/namespaces/team-a/events/req-1.%llx0001",
		 (unsigned long long)clk_wall(&e.fc));
	txt = fake_store_get(e.st, path);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	ev = json_tokener_parse(txt);
	free(txt);
	CU_ASSERT_STRING_EQUAL(sget(ev, "involvedObject", "kind"), "ProvisioningRequest");
	CU_ASSERT_STRING_EQUAL(sget(ev, "involvedObject", "uid"), "uid-123");
	CU_ASSERT_STRING_EQUAL(sget(ev, "involvedObject", "apiVersion"), "autoscaling.x-k8s.io/v1");
	CU_ASSERT_STRING_EQUAL(sget(ev, "involvedObject", "resourceVersion"), "42");
	CU_ASSERT_STRING_EQUAL(sget(ev, "source", "component"), "provreqd");
	CU_ASSERT_STRING_EQUAL(sget(ev, "type", NULL), "Warning");
	CU_ASSERT_STRING_EQUAL(sget(ev, "reason", NULL), "CapacityIsNotFound");
	CU_ASSERT_STRING_EQUAL(sget(ev, "message", NULL), "need 3 nodes of m5");
	CU_ASSERT_STRING_EQUAL(sget(ev, "firstTimestamp", NULL), "2025-03-01T12:00:00Z");
	CU_ASSERT_STRING_EQUAL(sget(ev, "count", NULL), "1");
	json_object_put(ev);

	/* The same event twice more within the window: count goes to 3. */
	clk_fake_advance(&e.fc, 60 * PRD_NS_PER_SEC);
	kube_recorder_event(e.rec, &PR, "Warning", "CapacityIsNotFound", "need %d nodes of %s", 3, "m5");
	clk_fake_advance(&e.fc, 60 * PRD_NS_PER_SEC);
	kube_recorder_event(e.rec, &PR, "Warning", "CapacityIsNotFound", "need %d nodes of %s", 3, "m5");
	CU_ASSERT_EQUAL(fake_store_count(e.st, "POST"), 1);
	CU_ASSERT_EQUAL(fake_store_count(e.st, "PATCH"), 2);
	txt = fake_store_get(e.st, path);
	CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
	ev = json_tokener_parse(txt);
	free(txt);
	CU_ASSERT_STRING_EQUAL(sget(ev, "count", NULL), "3");
	CU_ASSERT_STRING_EQUAL(sget(ev, "lastTimestamp", NULL), "2025-03-01T12:02:00Z");
	CU_ASSERT_STRING_EQUAL(sget(ev, "firstTimestamp", NULL), "2025-03-01T12:00:00Z");
	json_object_put(ev);

	/* A different message is a different Event. */
	kube_recorder_event(e.rec, &PR, "Warning", "CapacityIsNotFound", "need 4 nodes");
	CU_ASSERT_EQUAL(fake_store_count(e.st, "POST"), 2);
	/* After the window a repeat starts a new Event. */
	clk_fake_advance(&e.fc, 11 * 60 * PRD_NS_PER_SEC);
	kube_recorder_event(e.rec, &PR, "Warning", "CapacityIsNotFound", "need %d nodes of %s", 3, "m5");
	CU_ASSERT_EQUAL(fake_store_count(e.st, "POST"), 3);
	CU_ASSERT_EQUAL(fake_store_count(e.st, "PATCH"), 2);
	kube_recorder_get_stats(e.rec, &s);
	CU_ASSERT_EQUAL(s.created, 3);
	CU_ASSERT_EQUAL(s.aggregated, 2);
	CU_ASSERT_EQUAL(s.dropped, 0);
	CU_ASSERT_EQUAL(s.failed, 0);
	env_stop(&e);
}

static void test_cluster_scoped_and_deleted_event(void)
{
	env e;
	kube_object_ref node = {"Node", "v1", NULL, "node-1", "uid-n", NULL};
	char path[512];
	kube_recorder_stats s;

	env_start(&e, NULL);
	kube_recorder_event(e.rec, &node, "Normal", "ScaledUp", "added");
	CU_ASSERT_EQUAL(fake_store_len(e.st, "/api/v1/namespaces/default/events/node-1."), 1);
	/* The Event expired on the server (TTL): the repeat recreates it. */
	snprintf(path, sizeof(path), "/api/v1/namespaces/default/events/node-1.%llx0001",
		 (unsigned long long)clk_wall(&e.fc));
	{
		prd_err err;
		CU_ASSERT_EQUAL(kube_request(e.c, "DELETE", path, NULL, NULL, 0, NULL, NULL, &err), 0);
	}
	clk_fake_advance(&e.fc, PRD_NS_PER_SEC);
	kube_recorder_event(e.rec, &node, "Normal", "ScaledUp", "added");
	CU_ASSERT_EQUAL(fake_store_count(e.st, "PATCH"), 1);
	CU_ASSERT_EQUAL(fake_store_count(e.st, "POST"), 2);
	CU_ASSERT_EQUAL(fake_store_len(e.st, "/api/v1/namespaces/default/events/node-1."), 1);
	kube_recorder_get_stats(e.rec, &s);
	CU_ASSERT_EQUAL(s.created, 2);
	CU_ASSERT_EQUAL(s.failed, 0);
	env_stop(&e);
}

static void test_spam_filter(void)
{
	env e;
	kube_recorder_opts o = {.spam_burst = 3, .spam_refill_ns = 60 * PRD_NS_PER_SEC};
	kube_object_ref other = PR;
	kube_recorder_stats s;

	env_start(&e, &o);
	for(int i = 0; i < 6; i++) {
		clk_fake_advance(&e.fc, PRD_NS_PER_MS);
		kube_recorder_event(e.rec, &PR, "Normal", "Step", "step %d", i);
	}
	kube_recorder_get_stats(e.rec, &s);
	CU_ASSERT_EQUAL(s.created, 3);
	CU_ASSERT_EQUAL(s.dropped, 3);
	CU_ASSERT_EQUAL(fake_store_count(e.st, "POST"), 3);
	/* Another object has its own bucket. */
	other.name = "req-2";
	other.uid = "uid-456";
	kube_recorder_event(e.rec, &other, "Normal", "Step", "x");
	CU_ASSERT_EQUAL(fake_store_count(e.st, "POST"), 4);
	/* One refill period gives one more token. */
	clk_fake_advance(&e.fc, 60 * PRD_NS_PER_SEC);
	kube_recorder_event(e.rec, &PR, "Normal", "Step", "later 1");
	kube_recorder_event(e.rec, &PR, "Normal", "Step", "later 2");
	kube_recorder_get_stats(e.rec, &s);
	CU_ASSERT_EQUAL(s.created, 5);
	CU_ASSERT_EQUAL(s.dropped, 4);
	env_stop(&e);
}

static void test_failures_never_propagate(void)
{
	env e;
	kube_recorder_stats s;
	char longmsg[3000];

	env_start(&e, NULL);
	fake_store_fail(e.st, 500, 1);
	kube_recorder_event(e.rec, &PR, "Warning", "X", "boom");
	kube_recorder_get_stats(e.rec, &s);
	CU_ASSERT_EQUAL(s.failed, 1);
	CU_ASSERT_EQUAL(s.created, 0);
	/* A message longer than 1 KiB is cut, on a UTF-8 boundary. */
	memset(longmsg, 0, sizeof(longmsg));
	for(size_t i = 0; i + 2 < 2000; i += 2)
		memcpy(longmsg + i, "\xc3\xa9", 2);
	kube_recorder_event(e.rec, &PR, "Normal", "Long", "%s", longmsg);
	kube_recorder_get_stats(e.rec, &s);
	CU_ASSERT_EQUAL(s.created, 1);
	{
		char path[512], *txt;
		json_object *ev;
		/* The failed create above used sequence number 1. */
		snprintf(path, sizeof(path), "/api/v1/namespaces/team-a/events/req-1.%llx0002",
			 (unsigned long long)clk_wall(&e.fc));
		txt = fake_store_get(e.st, path);
		CU_ASSERT_PTR_NOT_NULL_FATAL(txt);
		ev = json_tokener_parse(txt);
		free(txt);
		CU_ASSERT_EQUAL(strlen(sget(ev, "message", NULL)), 1024);
		json_object_put(ev);
	}
	env_stop(&e);
}

static void test_ref_from_object(void)
{
	json_object *o = json_tokener_parse(
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"n\","
		"\"uid\":\"u\",\"resourceVersion\":\"9\"}}");
	kube_object_ref r;
	kube_events_ref_from(o, &KUBE_PODS, &r);
	CU_ASSERT_STRING_EQUAL(r.kind, "Pod");
	CU_ASSERT_STRING_EQUAL(r.api_version, "v1");
	CU_ASSERT_STRING_EQUAL(r.namespace_, "n");
	CU_ASSERT_STRING_EQUAL(r.name, "p");
	CU_ASSERT_STRING_EQUAL(r.uid, "u");
	CU_ASSERT_STRING_EQUAL(r.resource_version, "9");
	json_object_put(o);
}

/* An API whose every request waits until the test opens the gate. */
typedef struct gate_api {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool open;
	int calls;
} gate_api;

static int gate_request(void *ud, const char *method, const char *path, const char *ct, const char *body,
			size_t len, long *status, char **resp, size_t *resp_len)
{
	gate_api *g = ud;
	(void)method, (void)path, (void)ct, (void)body, (void)len;
	pthread_mutex_lock(&g->mu);
	while(!g->open)
		pthread_cond_wait(&g->cv, &g->mu);
	g->calls++;
	pthread_mutex_unlock(&g->mu);
	*status = 201;
	*resp = fake_strdup("{}");
	*resp_len = 2;
	return 0;
}

/* Asynchronous recording: the caller never waits for the apiserver;
 * repeats of one object still aggregate (its Events go through one sender,
 * in order); a full queue drops and counts; free sends what is queued.
 * Catches a recorder that writes in the caller's thread (the gate would
 * hang it), loses queued Events at free, or reorders one object's Events
 * (two POSTs instead of a POST and a PATCH). */
static void test_async_senders(void)
{
	env e;
	kube_recorder_opts o = {0};
	kube_recorder_stats s;
	gate_api g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	kube_api api = { gate_request, &g };
	kube_recorder *r;
	clk fc;
	prd_err err;
	int i;

	o.senders = 3;
	env_start(&e, &o);
	for(i = 0; i < 3; i++) {
		clk_fake_advance(&e.fc, PRD_NS_PER_SEC);
		kube_recorder_event(e.rec, &PR, "Warning", "CapacityIsNotFound", "need 3 nodes");
	}
	for(i = 0; i < 20; i++) {
		char name[32];
		kube_object_ref other = PR;
		snprintf(name, sizeof(name), "req-x%d", i);
		other.name = name;
		kube_recorder_event(e.rec, &other, "Normal", "Accepted", "accepted");
	}
	kube_recorder_flush(e.rec);
	CU_ASSERT_EQUAL(fake_store_count(e.st, "POST"), 21);
	CU_ASSERT_EQUAL(fake_store_count(e.st, "PATCH"), 2);
	kube_recorder_get_stats(e.rec, &s);
	CU_ASSERT_EQUAL(s.created, 21);
	CU_ASSERT_EQUAL(s.aggregated, 2);
	env_stop(&e);

	clk_fake_init(&fc, 0);
	memset(&o, 0, sizeof(o));
	o.clock = &fc;
	o.senders = 1;
	o.queue_max = 2;
	CU_ASSERT_EQUAL_FATAL(kube_recorder_new(&api, &o, &r, &err), 0);
	kube_recorder_event(r, &PR, "Normal", "A", "one");
	kube_recorder_event(r, &PR, "Normal", "B", "two");
	kube_recorder_event(r, &PR, "Normal", "C", "three: the queue holds two");
	kube_recorder_get_stats(r, &s);
	CU_ASSERT_EQUAL(s.queue_full, 1);
	pthread_mutex_lock(&g.mu);
	CU_ASSERT_EQUAL(g.calls, 0);
	g.open = true;
	pthread_cond_broadcast(&g.cv);
	pthread_mutex_unlock(&g.mu);
	kube_recorder_flush(r);
	CU_ASSERT_EQUAL(g.calls, 2);
	kube_recorder_event(r, &PR, "Normal", "D", "sent by free");
	kube_recorder_free(r);
	CU_ASSERT_EQUAL(g.calls, 3);
}

static const test_case cases[] = {
	{"create, then aggregate repeats within the window", test_create_and_aggregate},
	{"cluster-scoped object, Event deleted under us", test_cluster_scoped_and_deleted_event},
	{"per-object spam filter", test_spam_filter},
	{"errors are counted, not returned; long messages cut", test_failures_never_propagate},
	{"object reference from a JSON object", test_ref_from_object},
	{"asynchronous senders", test_async_senders},
	{NULL, NULL}
};

TEST_MAIN("kube_events", cases)

/* kube client: Status decoding, watch framing, and HTTP behaviour against
 * a loopback fake apiserver (retries, pagination, pacing, watch). */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/api.h"
#include "kube/client.h"
#include "kube/client_int.h"
#include "kube/lease.h"
#include "kube/memapi.h"
#include "test_kube_fakesrv.h"
#include "util/str.h"

/* ---- Status decoding ---------------------------------------------------- */

static void test_status_table(void)
{
	static const struct {
		long http;
		const char *body;
		int want;
		const char *reason;
	} t[] = {
		{404, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"pods \\\"x\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"x\",\"kind\":\"pods\"},\"code\":404}",
		 PRD_ENOTFOUND, "NotFound"},
		{409, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods \\\"x\\\" already exists\",\"reason\":\"AlreadyExists\",\"code\":409}",
		 PRD_EEXIST, "AlreadyExists"},
		{409, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Operation cannot be fulfilled on pods \\\"x\\\": the object has been modified; please apply your changes to the latest version and try again\",\"reason\":\"Conflict\",\"code\":409}",
		 PRD_ECONFLICT, "Conflict"},
		{410, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"too old resource version: 1 (5)\",\"reason\":\"Expired\",\"code\":410}",
		 PRD_EGONE, "Expired"},
		{410, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"gone\",\"reason\":\"Gone\",\"code\":410}",
		 PRD_EGONE, "Gone"},
		{403, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods is forbidden: User \\\"u\\\" cannot list resource \\\"pods\\\"\",\"reason\":\"Forbidden\",\"code\":403}",
		 PRD_EPERM, "Forbidden"},
		{401, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}",
		 PRD_EPERM, "Unauthorized"},
		{422, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"Pod \\\"BAD\\\" is invalid: metadata.name: Invalid value\",\"reason\":\"Invalid\",\"details\":{\"causes\":[{\"reason\":\"FieldValueInvalid\",\"field\":\"metadata.name\"}]},\"code\":422}",
		 PRD_EINVAL, "Invalid"},
		{400, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"bad\",\"reason\":\"BadRequest\",\"code\":400}",
		 PRD_EINVAL, "BadRequest"},
		{429, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"too many requests\",\"reason\":\"TooManyRequests\",\"details\":{\"retryAfterSeconds\":3},\"code\":429}",
		 PRD_EAGAIN, "TooManyRequests"},
		{500, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"etcdserver: leader changed\",\"reason\":\"InternalError\",\"code\":500}",
		 PRD_EAGAIN, "InternalError"},
		{503, "<html>service unavailable</html>", PRD_EAGAIN, "ServiceUnavailable"},
		{504, "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"timeout\",\"reason\":\"Timeout\",\"code\":504}",
		 PRD_ETIMEDOUT, "Timeout"},
		{404, "", PRD_ENOTFOUND, "NotFound"},
		{415, "not json", PRD_EUNSUPPORTED, "UnsupportedMediaType"},
	};
	for(size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		kube_status st;
		int rc = kube__status_decode(t[i].http, t[i].body, strlen(t[i].body), -1, &st);
		if(rc != t[i].want || strcmp(st.reason, t[i].reason) != 0)
			fprintf(stderr, "row %zu: got %s/%s want %s/%s\n", i, prd_strerror(rc), st.reason,
				prd_strerror(t[i].want), t[i].reason);
		CU_ASSERT_EQUAL(rc, t[i].want);
		CU_ASSERT_STRING_EQUAL(st.reason, t[i].reason);
		CU_ASSERT_EQUAL(st.http_code, t[i].http);
	}
	{
		kube_status st;
		const char *b = t[9].body;
		kube__status_decode(429, b, strlen(b), -1, &st);
		CU_ASSERT_EQUAL(st.retry_after_s, 3);
		kube__status_decode(404, t[0].body, strlen(t[0].body), -1, &st);
		CU_ASSERT_STRING_EQUAL(st.message, "pods \"x\" not found");
	}
}

/* ---- Watch framing ------------------------------------------------------ */

typedef struct collected {
	char log[8192];
	int n;
} collected;

static int collect_event(void *ud, const char *type, json_object *obj)
{
	collected *c = ud;
	json_object *meta, *name;
	const char *nm = "";
	size_t len = strlen(c->log);
	if(json_object_object_get_ex(obj, "metadata", &meta) && json_object_object_get_ex(meta, "name", &name))
		nm = json_object_get_string(name);
	snprintf(c->log + len, sizeof(c->log) - len, "%s:%s;", type, nm);
	c->n++;
	return 0;
}

typedef struct line_ctx {
	collected *c;
	int rc;
} line_ctx;

static int line_to_event(void *ud, char *line, size_t len)
{
	line_ctx *l = ud;
	return kube__watch_line(line, len, collect_event, l->c, NULL, NULL);
}

static const char *STREAM =
	"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"10\"}}}\n"
	"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\",\"labels\":{\"x\":\"y\\nz\"}}}}\r\n"
	"\n"
	"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"\",\"resourceVersion\":\"12\"}}}\n"
	"{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"ü-c\"}}}\n";
static const char *STREAM_WANT = "ADDED:a;MODIFIED:b;BOOKMARK:;DELETED:ü-c;";

/* Feed STREAM in chunks of the sizes `next_size` gives. */
static void feed_stream(size_t (*next_size)(size_t off, size_t left), collected *c)
{
	kube_framer f;
	line_ctx l = {c, 0};
	size_t off = 0, total = strlen(STREAM);

	memset(c, 0, sizeof(*c));
	kube__framer_init(&f, 0);
	while(off < total) {
		size_t n = next_size(off, total - off);
		if(n > total - off)
			n = total - off;
		CU_ASSERT_EQUAL(kube__framer_feed(&f, STREAM + off, n, line_to_event, &l), 0);
		/* Nothing before the incomplete line is kept, and the scan
		 * position covers all of it: no byte is looked at twice. */
		CU_ASSERT_EQUAL(f.start, 0);
		CU_ASSERT_EQUAL(f.scanned, kube__framer_pending(&f));
		off += n;
	}
	CU_ASSERT_EQUAL(kube__framer_pending(&f), 0);
	kube__framer_free(&f);
}

static size_t one_byte(size_t off, size_t left) { return 1; }
static size_t whole(size_t off, size_t left) { return left; }
static size_t random_size(size_t off, size_t left) { return 1 + (size_t)(rand() % 97); }

static void test_framer_chunks(void)
{
	collected c;
	feed_stream(one_byte, &c);
	CU_ASSERT_STRING_EQUAL(c.log, STREAM_WANT);
	feed_stream(whole, &c);
	CU_ASSERT_STRING_EQUAL(c.log, STREAM_WANT);
	srand(42);
	for(int i = 0; i < 200; i++) {
		feed_stream(random_size, &c);
		CU_ASSERT_STRING_EQUAL(c.log, STREAM_WANT);
		CU_ASSERT_EQUAL(c.n, 4);
	}
}

static int count_line(void *ud, char *line, size_t len)
{
	(*(int *)ud)++;
	return 0;
}

static void test_framer_limits(void)
{
	kube_framer f;
	int n = 0;
	char big[300];

	kube__framer_init(&f, 256);
	memset(big, 'x', sizeof(big));
	CU_ASSERT_EQUAL(kube__framer_feed(&f, big, 200, count_line, &n), 0);
	CU_ASSERT_EQUAL(kube__framer_feed(&f, big, 100, count_line, &n), PRD_ERANGE);
	kube__framer_free(&f);
	/* A 410 ERROR event ends the watch with PRD_EGONE. */
	{
		const char *l = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\","
				"\"status\":\"Failure\",\"message\":\"too old resource version: 5 (99)\","
				"\"reason\":\"Expired\",\"code\":410}}";
		kube_status st;
		prd_err e;
		collected c = {0};
		CU_ASSERT_EQUAL(kube__watch_line(l, strlen(l), collect_event, &c, &st, &e), PRD_EGONE);
		CU_ASSERT_EQUAL(st.http_code, 410);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "too old resource version"));
		CU_ASSERT_EQUAL(c.n, 0);
		l = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":500,\"reason\":\"InternalError\",\"message\":\"boom\"}}";
		CU_ASSERT_EQUAL(kube__watch_line(l, strlen(l), collect_event, &c, &st, &e), PRD_EAGAIN);
		l = "{\"type\":\"ADDED\"";
		CU_ASSERT_EQUAL(kube__watch_line(l, strlen(l), collect_event, &c, &st, &e), PRD_EINVAL);
		l = "{\"type\":\"WHAT\",\"object\":{}}";
		CU_ASSERT_EQUAL(kube__watch_line(l, strlen(l), collect_event, &c, &st, &e), PRD_EINVAL);
	}
}

static void test_paths(void)
{
	char *p = kube_path(&KUBE_PODS, "ns1", "p1", "status");
	CU_ASSERT_STRING_EQUAL(p, "/api/v1/namespaces/ns1/pods/p1/status");
	free(p);
	p = kube_path(&KUBE_PODS, NULL, NULL, NULL);
	CU_ASSERT_STRING_EQUAL(p, "/api/v1/pods");
	free(p);
	p = kube_path(&KUBE_NODES, "ignored", "n1", NULL);
	CU_ASSERT_STRING_EQUAL(p, "/api/v1/nodes/n1");
	free(p);
	p = kube_path(&KUBE_PROVREQS, "ns", "r", "status");
	CU_ASSERT_STRING_EQUAL(p, "/apis/autoscaling.x-k8s.io/v1/namespaces/ns/provisioningrequests/r/status");
	free(p);
	p = kube_path(&KUBE_LEASES, "kube-system", "provreqd", NULL);
	CU_ASSERT_STRING_EQUAL(p, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/provreqd");
	free(p);
}

/* ---- HTTP against the fake apiserver ----------------------------------- */

typedef struct scenario {
	atomic_int n;            /* requests seen */
	int mode;
	char last_url[2048];
	char last_method[16];
	char last_auth[512];
	char last_imp_user[256];
	char last_imp_groups[512];
	char last_ct[128];
	char last_body[2048];
	pthread_mutex_t mu;
} scenario;

enum { M_GET_404, M_429, M_500, M_PAGES, M_PAGES_410, M_OK, M_WATCH, M_WATCH_410, M_WATCH_ERR,
       M_WATCH_HOLD, M_CREATE_EXISTS, M_PAGE_LENIENT, M_HOLD_WATCHES, M_NOT_JSON };

static char *status_body(int code, const char *reason, const char *msg)
{
	char b[512];
	snprintf(b, sizeof(b),
		 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"%s\","
		 "\"reason\":\"%s\",\"code\":%d}", msg, reason, code);
	return fake_strdup(b);
}

static void handler(void *ud, const fake_req *rq, fake_resp *r)
{
	scenario *s = ud;
	int n = atomic_fetch_add(&s->n, 1) + 1;

	pthread_mutex_lock(&s->mu);
	str_copy(s->last_url, sizeof(s->last_url), rq->url);
	str_copy(s->last_method, sizeof(s->last_method), rq->method);
	str_copy(s->last_auth, sizeof(s->last_auth), rq->auth);
	str_copy(s->last_imp_user, sizeof(s->last_imp_user), rq->impersonate_user);
	str_copy(s->last_imp_groups, sizeof(s->last_imp_groups), rq->impersonate_groups);
	str_copy(s->last_ct, sizeof(s->last_ct), rq->content_type);
	str_copy(s->last_body, sizeof(s->last_body), rq->body);
	pthread_mutex_unlock(&s->mu);
	switch(s->mode) {
	case M_GET_404:
		r->status = 404;
		r->body = status_body(404, "NotFound", "pods \\\"x\\\" not found");
		break;
	case M_429:
		if(n <= 2) {
			r->status = 429;
			snprintf(r->retry_after, sizeof(r->retry_after), "1");
			r->body = status_body(429, "TooManyRequests", "slow down");
		} else {
			r->body = fake_strdup("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\"}}");
		}
		break;
	case M_500:
		if(n == 1) {
			r->status = 500;
			r->body = status_body(500, "InternalError", "etcd leader changed");
		} else {
			r->body = fake_strdup("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\"}}");
		}
		break;
	case M_PAGES:
	case M_PAGES_410: {
		char b[1024];
		const char *cont = strstr(rq->url, "continue=");
		if(!cont) {
			snprintf(b, sizeof(b), "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"100\",\"continue\":\"tok2\"},"
					       "\"items\":[{\"metadata\":{\"name\":\"p1\"}},{\"metadata\":{\"name\":\"p2\"}},{\"metadata\":{\"name\":\"p3\"}}]}");
		} else if(strncmp(cont, "continue=tok2", 13) == 0) {
			snprintf(b, sizeof(b), "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"100\",\"continue\":\"tok3\"},"
					       "\"items\":[{\"metadata\":{\"name\":\"p4\"}},{\"metadata\":{\"name\":\"p5\"}}]}");
		} else if(s->mode == M_PAGES_410 && n == 3) {
			r->status = 410;
			r->body = status_body(410, "Expired", "The provided continue parameter is too old");
			break;
		} else {
			snprintf(b, sizeof(b), "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"100\"},"
					       "\"items\":[{\"metadata\":{\"name\":\"p6\"}},{\"metadata\":{\"name\":\"p7\"}}]}");
		}
		r->body = fake_strdup(b);
		break;
	}
	case M_PAGE_LENIENT:
		/* Trailing commas: json-c takes them, the strict scanner does not. */
		r->body = fake_strdup("{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},"
				      "\"items\":[{\"metadata\":{\"name\":\"q1\"}},{\"metadata\":{\"name\":\"q2\"}},],}");
		break;
	case M_OK:
		r->body = fake_strdup("{\"kind\":\"Scale\",\"spec\":{\"replicas\":3},\"metadata\":{\"name\":\"x\"}}");
		break;
	case M_CREATE_EXISTS:
		r->status = 409;
		r->body = status_body(409, "AlreadyExists", "pods \\\"x\\\" already exists");
		break;
	case M_WATCH: {
		/* Events cut at awkward places, with pauses between chunks. */
		const char *all = STREAM;
		size_t len = strlen(all), cuts[] = {0, 7, 8, 60, 61, 150, 200, len};
		for(size_t i = 0; i + 1 < sizeof(cuts) / sizeof(cuts[0]); i++) {
			char *c = malloc(cuts[i + 1] - cuts[i] + 1);
			if(!c)
				abort();
			memcpy(c, all + cuts[i], cuts[i + 1] - cuts[i]);
			c[cuts[i + 1] - cuts[i]] = '\0';
			r->chunks[r->nchunks++] = c;
		}
		r->chunk_delay_ms = 30;
		break;
	}
	case M_WATCH_410:
		r->status = 410;
		r->body = status_body(410, "Expired", "too old resource version: 1 (50)");
		break;
	case M_WATCH_ERR:
		r->chunks[r->nchunks++] = fake_strdup(
			"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n{\"type\":\"ERR");
		r->chunks[r->nchunks++] = fake_strdup(
			"OR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"too old\"}}\n");
		r->chunks[r->nchunks++] = fake_strdup("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"never\"}}}\n");
		break;
	case M_WATCH_HOLD:
		r->chunks[r->nchunks++] = fake_strdup("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n");
		r->hold_ms = 20000;
		break;
	case M_NOT_JSON:
		r->body = fake_strdup("this is not JSON");
		break;
	case M_HOLD_WATCHES:
		/* Watches are held open (until cancelled); anything else is
		 * answered at once. */
		if(strstr(rq->url, "watch=")) {
			r->chunks[r->nchunks++] = fake_strdup("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n");
			r->hold_ms = 20000;
		} else {
			r->body = fake_strdup("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\"}}");
		}
		break;
	}
}

typedef struct fixture {
	scenario s;
	fake_srv *srv;
	kube_config *cfg;
	kube_client *c;
} fixture;

static void fx_start(fixture *f, int mode, const kube_client_opts *o)
{
	prd_err e;
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->s.mu, NULL);
	f->s.mode = mode;
	f->srv = fake_start(handler, &f->s);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f->srv);
	f->cfg = calloc(1, sizeof(*f->cfg));
	CU_ASSERT_PTR_NOT_NULL_FATAL(f->cfg);
	/* A config built by hand is what an embedding program may do too;
	 * it needs the credential cache the loaders create. */
	{
		kube_config *tmp = NULL;
		char dir[600], kc[700];
		FILE *fp;
		snprintf(dir, sizeof(dir), "%s", test_tmpdir());
		snprintf(kc, sizeof(kc), "%s/fake-kubeconfig", dir);
		fp = fopen(kc, "w");
		CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
		fprintf(fp, "current-context: c\nclusters:\n- name: a\n  cluster: {server: '%s'}\n"
			    "users:\n- name: u\n  user: {token: unit-test-token}\n"
			    "contexts:\n- name: c\n  context: {cluster: a, user: u, namespace: ns1}\n",
			fake_url(f->srv));
		fclose(fp);
		free(f->cfg);
		CU_ASSERT_EQUAL_FATAL(kube_config_load(kc, NULL, &tmp, &e), 0);
		f->cfg = tmp;
	}
	CU_ASSERT_EQUAL_FATAL(kube_client_new(f->cfg, o, &f->c, &e), 0);
}

static void fx_stop(fixture *f)
{
	kube_client_free(f->c);
	kube_config_free(f->cfg);
	fake_stop(f->srv);
	pthread_mutex_destroy(&f->s.mu);
}

static void test_get_404(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	json_object *o = NULL;

	fx_start(&f, M_GET_404, NULL);
	CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", &o, &st, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NULL(o);
	CU_ASSERT_EQUAL(st.http_code, 404);
	CU_ASSERT_STRING_EQUAL(st.reason, "NotFound");
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "GET /api/v1/namespaces/ns1/pods/x: 404 NotFound: pods \"x\" not found"));
	/* 404 is an answer, not a transient failure: one request. */
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 1);
	CU_ASSERT_STRING_EQUAL(f.s.last_auth, "Bearer unit-test-token");
	fx_stop(&f);
}

/* On a fake clock, so the waits are exact and take no real time. */
static void test_retry_429(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	json_object *o = NULL;
	clk fc;
	kube_client_opts opts = {.max_retries = 3, .clock = &fc};

	clk_fake_init(&fc, 1700000000LL * PRD_NS_PER_SEC);
	fx_start(&f, M_429, &opts);
	CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", &o, &st, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(o);
	json_object_put(o);
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 3);
	/* Two 429s, each with Retry-After: 1, honoured to the nanosecond. */
	CU_ASSERT_EQUAL(clk_mono(&fc), 2 * PRD_NS_PER_SEC);
	fx_stop(&f);

	/* 429 means "not processed": a POST is retried too. */
	fx_start(&f, M_429, &opts);
	o = json_object_new_object();
	CU_ASSERT_EQUAL(kube_create(f.c, &KUBE_PODS, "ns1", o, NULL, &st, &e), 0);
	json_object_put(o);
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 3);
	CU_ASSERT_EQUAL(clk_mono(&fc), 4 * PRD_NS_PER_SEC);
	fx_stop(&f);

	/* Out of retries: PRD_EAGAIN with the server's Retry-After. */
	opts.max_retries = 1;
	fx_start(&f, M_429, &opts);
	CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", NULL, &st, &e), PRD_EAGAIN);
	CU_ASSERT_EQUAL(st.http_code, 429);
	CU_ASSERT_EQUAL(st.retry_after_s, 1);
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 2);
	CU_ASSERT_EQUAL(clk_mono(&fc), 5 * PRD_NS_PER_SEC);
	fx_stop(&f);
}

static void test_retry_500(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	json_object *o = NULL;

	fx_start(&f, M_500, NULL);
	CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", &o, &st, &e), 0);
	json_object_put(o);
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 2);
	fx_stop(&f);

	/* A POST that got a 500 may have been applied: not repeated. */
	fx_start(&f, M_500, NULL);
	o = json_object_new_object();
	CU_ASSERT_EQUAL(kube_create(f.c, &KUBE_PODS, "ns1", o, NULL, &st, &e), PRD_EAGAIN);
	json_object_put(o);
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 1);
	CU_ASSERT_STRING_EQUAL(st.reason, "InternalError");
	fx_stop(&f);

	/* A PUT with a resourceVersion is idempotent and retried. */
	fx_start(&f, M_500, NULL);
	o = json_tokener_parse("{\"metadata\":{\"name\":\"x\",\"resourceVersion\":\"5\"}}");
	CU_ASSERT_EQUAL(kube_update(f.c, &KUBE_PODS, "ns1", "x", "status", o, NULL, &st, &e), 0);
	json_object_put(o);
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 2);
	CU_ASSERT_STRING_EQUAL(f.s.last_method, "PUT");
	CU_ASSERT_PTR_NOT_NULL(strstr(f.s.last_url, "/api/v1/namespaces/ns1/pods/x/status?fieldManager=provreqd"));
	fx_stop(&f);
}

/* Broken shutdown caught: a client that keeps retrying (or keeps sending)
 * after the process was told to stop, so SIGTERM waits out every backoff
 * of an apiserver that answers 429. */
static void test_shutdown_deadline(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	clk fc;
	kube_client_opts opts = {.max_retries = 3, .clock = &fc};

	clk_fake_init(&fc, 1700000000LL * PRD_NS_PER_SEC);
	/* A deadline ahead: the request goes out once, the 429 is not retried. */
	fx_start(&f, M_429, &opts);
	kube_client_set_deadline(f.c, clk_mono(&fc) + 600 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", NULL, &st, &e), PRD_EAGAIN);
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 1);
	/* Past it: nothing is sent at all. */
	clk_fake_advance(&fc, 601 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", NULL, &st, &e), PRD_ETIMEDOUT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "shutting down"));
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 1);
	fx_stop(&f);
}

typedef struct items {
	char names[256];
	int restarts;
} items;

static int collect_item(void *ud, json_object *item)
{
	items *it = ud;
	json_object *m, *n;
	if(json_object_object_get_ex(item, "metadata", &m) && json_object_object_get_ex(m, "name", &n)) {
		size_t l = strlen(it->names);
		snprintf(it->names + l, sizeof(it->names) - l, "%s,", json_object_get_string(n));
	}
	return 0;
}

static void list_restart(void *ud)
{
	items *it = ud;
	it->names[0] = '\0';
	it->restarts++;
}

static int stop_at_p4(void *ud, json_object *item)
{
	collect_item(ud, item);
	return strstr(((items *)ud)->names, "p4") ? 42 : 0;
}

static void test_pagination(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	items it = {{0}, 0};
	char *rv = NULL;
	kube_list_opts lo = {.label_selector = "app=a,tier in (x,y)", .limit = 3, .restart = list_restart};

	fx_start(&f, M_PAGES, NULL);
	CU_ASSERT_EQUAL(kube_list(f.c, &KUBE_PODS, NULL, &lo, collect_item, &it, &rv, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(it.names, "p1,p2,p3,p4,p5,p6,p7,");
	CU_ASSERT_STRING_EQUAL(rv, "100");
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 3);
	/* The selector arrives intact (the fake server decodes the query). */
	CU_ASSERT_PTR_NOT_NULL(strstr(f.s.last_url, "labelSelector=app=a,tier in (x,y)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(f.s.last_url, "limit=3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(f.s.last_url, "continue=tok3"));
	free(rv);
	rv = NULL;
	/* A callback can stop the listing; its value comes back. */
	memset(&it, 0, sizeof(it));
	CU_ASSERT_EQUAL(kube_list(f.c, &KUBE_PODS, NULL, &lo, stop_at_p4, &it, &rv, &st, &e), 42);
	CU_ASSERT_PTR_NULL(rv);
	fx_stop(&f);

	/* The third page's continue token expired: start over once. */
	memset(&it, 0, sizeof(it));
	fx_start(&f, M_PAGES_410, NULL);
	CU_ASSERT_EQUAL(kube_list(f.c, &KUBE_PODS, "ns1", &lo, collect_item, &it, &rv, &st, &e), 0);
	CU_ASSERT_EQUAL(it.restarts, 1);
	CU_ASSERT_STRING_EQUAL(it.names, "p1,p2,p3,p4,p5,p6,p7,");
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 6);
	free(rv);
	fx_stop(&f);
}

/* Text items: each parsed here (as a decoder would) and collected;
 * counts which form they came in. */
typedef struct src_ctx {
	items it;
	collected c;
	int text, tree;
	int stop_at;       /* stop (with 42) after this many items; 0 = never */
} src_ctx;

static json_object *src_tree(const kube_item_src *src, int *text, int *tree)
{
	json_tokener *tok;
	json_object *o;
	if(!src->json) {
		(*tree)++;
		return json_object_get(src->obj);
	}
	(*text)++;
	CU_ASSERT(src->max_depth > 0);
	tok = json_tokener_new_ex(src->max_depth);
	o = json_tokener_parse_ex(tok, src->json, (int)src->len);
	/* The span is exactly one object. */
	CU_ASSERT_EQUAL(json_tokener_get_parse_end(tok), src->len);
	json_tokener_free(tok);
	CU_ASSERT_PTR_NOT_NULL(o);
	return o;
}

static int collect_src(void *ud, const kube_item_src *src)
{
	src_ctx *c = ud;
	json_object *o = src_tree(src, &c->text, &c->tree);
	collect_item(&c->it, o);
	json_object_put(o);
	return c->stop_at && c->text + c->tree == c->stop_at ? 42 : 0;
}

static void src_restart(void *ud)
{
	list_restart(&((src_ctx *)ud)->it);
}

static int collect_src_event(void *ud, const char *type, const kube_item_src *src)
{
	src_ctx *c = ud;
	json_object *o = src_tree(src, &c->text, &c->tree);
	collect_event(&c->c, type, o);
	json_object_put(o);
	return 0;
}

static void test_pagination_text(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	src_ctx sc;
	char *rv = NULL;
	kube_list_opts lo = {.label_selector = "app=a", .limit = 3, .restart = src_restart};

	memset(&sc, 0, sizeof(sc));
	fx_start(&f, M_PAGES, NULL);
	CU_ASSERT_EQUAL(kube_list_text(f.c, &KUBE_PODS, NULL, &lo, collect_src, &sc, &rv, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(sc.it.names, "p1,p2,p3,p4,p5,p6,p7,");
	CU_ASSERT_EQUAL(sc.text, 7);
	CU_ASSERT_EQUAL(sc.tree, 0);
	CU_ASSERT_STRING_EQUAL(rv, "100");
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 3);
	free(rv);
	rv = NULL;
	memset(&sc, 0, sizeof(sc));
	sc.stop_at = 4;
	CU_ASSERT_EQUAL(kube_list_text(f.c, &KUBE_PODS, NULL, &lo, collect_src, &sc, &rv, &st, &e), 42);
	CU_ASSERT_PTR_NULL(rv);
	fx_stop(&f);

	/* An expired continue token starts over once, as kube_list does. */
	memset(&sc, 0, sizeof(sc));
	fx_start(&f, M_PAGES_410, NULL);
	CU_ASSERT_EQUAL(kube_list_text(f.c, &KUBE_PODS, "ns1", &lo, collect_src, &sc, &rv, &st, &e), 0);
	CU_ASSERT_EQUAL(sc.it.restarts, 1);
	CU_ASSERT_STRING_EQUAL(sc.it.names, "p1,p2,p3,p4,p5,p6,p7,");
	free(rv);
	rv = NULL;
	fx_stop(&f);

	/* A page only json-c reads: its items come as trees. */
	memset(&sc, 0, sizeof(sc));
	fx_start(&f, M_PAGE_LENIENT, NULL);
	CU_ASSERT_EQUAL(kube_list_text(f.c, &KUBE_PODS, NULL, &lo, collect_src, &sc, &rv, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(sc.it.names, "q1,q2,");
	CU_ASSERT_EQUAL(sc.text, 0);
	CU_ASSERT_EQUAL(sc.tree, 2);
	CU_ASSERT_STRING_EQUAL(rv, "7");
	free(rv);
	fx_stop(&f);
}

static void test_watch_text(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	src_ctx sc;

	memset(&sc, 0, sizeof(sc));
	fx_start(&f, M_WATCH, NULL);
	CU_ASSERT_EQUAL(kube_watch_text(f.c, &KUBE_PODS, "ns1", NULL, collect_src_event, &sc, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(sc.c.log, STREAM_WANT);
	CU_ASSERT_EQUAL(sc.text, 4);
	fx_stop(&f);
	/* The in-stream 410 ends it as it ends kube_watch. */
	memset(&sc, 0, sizeof(sc));
	fx_start(&f, M_WATCH_ERR, NULL);
	CU_ASSERT_EQUAL(kube_watch_text(f.c, &KUBE_PODS, NULL, NULL, collect_src_event, &sc, &st, &e), PRD_EGONE);
	CU_ASSERT_STRING_EQUAL(sc.c.log, "ADDED:a;");
	CU_ASSERT_STRING_EQUAL(st.reason, "Expired");
	fx_stop(&f);
	/* Unusual lines go the json-c way; bad ones fail the same way. */
	{
		const char *l = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"t\"},},}";
		memset(&sc, 0, sizeof(sc));
		CU_ASSERT_EQUAL(kube__watch_line_text(l, strlen(l), collect_src_event, &sc, &st, &e), 0);
		CU_ASSERT_STRING_EQUAL(sc.c.log, "ADDED:t;");
		CU_ASSERT_EQUAL(sc.tree, 1);
		l = "{\"type\":\"WHAT\",\"object\":{}}";
		CU_ASSERT_EQUAL(kube__watch_line_text(l, strlen(l), collect_src_event, &sc, &st, &e), PRD_EINVAL);
		l = "{\"type\":\"ADDED\"";
		CU_ASSERT_EQUAL(kube__watch_line_text(l, strlen(l), collect_src_event, &sc, &st, &e), PRD_EINVAL);
	}
}

/* The token bucket on a fake clock: the waits are exact and nothing
 * here depends on how fast the machine is. */
static void test_qps(void)
{
	fixture f;
	clk fc;
	kube_client_opts opts = {.qps = 5, .burst = 2, .clock = &fc};
	unsigned long req = 0, thr = 0;
	int64_t at[9];
	prd_err e;

	clk_fake_init(&fc, 1700000000LL * PRD_NS_PER_SEC);
	fx_start(&f, M_OK, &opts);
	for(int i = 0; i < 6; i++) {
		CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", NULL, NULL, &e), 0);
		at[i] = clk_mono(&fc);
	}
	/* Two go out at once on the burst; each further one waits for the
	 * next token, 1/qps = 200 ms later. */
	CU_ASSERT_EQUAL(at[0], 0);
	CU_ASSERT_EQUAL(at[1], 0);
	CU_ASSERT_EQUAL(at[2], 200 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(at[3], 400 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(at[4], 600 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(at[5], 800 * PRD_NS_PER_MS);
	kube_client_stats(f.c, &req, &thr);
	CU_ASSERT_EQUAL(req, 6);
	CU_ASSERT_EQUAL(thr, 4);
	CU_ASSERT_EQUAL(atomic_load(&f.s.n), 6);

	/* A second idle refills the bucket, but never beyond the burst: two
	 * at once again, then the third waits 200 ms. */
	clk_fake_advance(&fc, PRD_NS_PER_SEC);
	for(int i = 6; i < 9; i++) {
		CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", NULL, NULL, &e), 0);
		at[i] = clk_mono(&fc);
	}
	CU_ASSERT_EQUAL(at[6], 1800 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(at[7], 1800 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(at[8], 2000 * PRD_NS_PER_MS);
	kube_client_stats(f.c, &req, &thr);
	CU_ASSERT_EQUAL(req, 9);
	CU_ASSERT_EQUAL(thr, 5);
	fx_stop(&f);
}

static void test_verbs_wire(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	json_object *o;
	kube_delete_opts dopts = {.uid = "uid-1", .resource_version = "7", .propagation = "Foreground",
				  .grace_period_s = -1};
	int32_t rep = 0;

	fx_start(&f, M_OK, NULL);
	CU_ASSERT_EQUAL(kube_delete(f.c, &KUBE_PODS, "ns1", "x", &dopts, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(f.s.last_method, "DELETE");
	o = json_tokener_parse(f.s.last_body);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
				       json_object_object_get(o, "preconditions"), "uid")), "uid-1");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
				       json_object_object_get(o, "preconditions"), "resourceVersion")), "7");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "propagationPolicy")),
			       "Foreground");
	CU_ASSERT_FALSE(json_object_object_get_ex(o, "gracePeriodSeconds", NULL));
	json_object_put(o);

	CU_ASSERT_EQUAL(kube_patch(f.c, &KUBE_PROVREQS, "ns1", "r", "status", KUBE_PATCH_APPLY,
				   "{\"status\":{}}", true, NULL, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(f.s.last_method, "PATCH");
	CU_ASSERT_STRING_EQUAL(f.s.last_ct, "application/apply-patch+yaml");
	CU_ASSERT_STRING_EQUAL(f.s.last_url, "/apis/autoscaling.x-k8s.io/v1/namespaces/ns1/provisioningrequests/r/status"
					     "?fieldManager=provreqd&force=true");
	/* JSON from json-c escapes '/', which the apiserver's YAML reader
	 * refuses in an apply patch: it must arrive unescaped. */
	CU_ASSERT_EQUAL(kube_patch(f.c, &KUBE_PROVREQS, "ns1", "r", NULL, KUBE_PATCH_APPLY,
				   "{\"apiVersion\":\"autoscaling.x-k8s.io\\/v1\"}", false, NULL, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(f.s.last_body, "{\"apiVersion\":\"autoscaling.x-k8s.io/v1\"}");
	CU_ASSERT_PTR_NULL(strstr(f.s.last_url, "force"));
	CU_ASSERT_EQUAL(kube_patch(f.c, &KUBE_PODS, "ns1", "x", NULL, KUBE_PATCH_JSON,
				   "[{\"op\":\"add\",\"path\":\"/metadata/labels/a\",\"value\":\"b\"}]", false,
				   NULL, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(f.s.last_ct, "application/json-patch+json");
	CU_ASSERT_PTR_NULL(strstr(f.s.last_url, "force"));
	CU_ASSERT_EQUAL(kube_patch(f.c, &KUBE_PODS, "ns1", "x", NULL, KUBE_PATCH_MERGE, "{}", false, NULL,
				   &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(f.s.last_ct, "application/merge-patch+json");

	CU_ASSERT_EQUAL(kube_get_scale(f.c, &KUBE_PODS, "ns1", "x", &rep, &st, &e), 0);
	CU_ASSERT_EQUAL(rep, 3);
	CU_ASSERT_EQUAL(kube_set_scale(f.c, &KUBE_PODS, "ns1", "x", 5, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(f.s.last_body, "{\"spec\":{\"replicas\":5}}");
	CU_ASSERT_PTR_NOT_NULL(strstr(f.s.last_url, "/pods/x/scale"));
	fx_stop(&f);

	fx_start(&f, M_CREATE_EXISTS, NULL);
	o = json_tokener_parse("{\"metadata\":{\"name\":\"x\"}}");
	CU_ASSERT_EQUAL(kube_create(f.c, &KUBE_PODS, "ns1", o, NULL, &st, &e), PRD_EEXIST);
	json_object_put(o);
	CU_ASSERT_STRING_EQUAL(st.reason, "AlreadyExists");
	CU_ASSERT_STRING_EQUAL(f.s.last_method, "POST");
	CU_ASSERT_STRING_EQUAL(f.s.last_ct, "application/json");
	fx_stop(&f);
}

/* kubectl --as/--as-group: Impersonate-User and one Impersonate-Group
 * header per group, on every request; none without them. */
static void test_impersonation_headers(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	json_object *o = NULL;

	fx_start(&f, M_OK, NULL);
	CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", &o, &st, &e), 0);
	json_object_put(o);
	o = NULL;
	CU_ASSERT_STRING_EQUAL(f.s.last_imp_user, "");
	CU_ASSERT_STRING_EQUAL(f.s.last_imp_groups, "");
	kube_client_free(f.c);
	f.cfg->impersonate_user = strdup("jane");
	f.cfg->impersonate_groups = calloc(3, sizeof(char *));
	CU_ASSERT_PTR_NOT_NULL_FATAL(f.cfg->impersonate_groups);
	f.cfg->impersonate_groups[0] = strdup("team-a");
	f.cfg->impersonate_groups[1] = strdup("system:authenticated");
	CU_ASSERT_EQUAL_FATAL(kube_client_new(f.cfg, NULL, &f.c, &e), 0);
	CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", &o, &st, &e), 0);
	json_object_put(o);
	CU_ASSERT_STRING_EQUAL(f.s.last_imp_user, "jane");
	CU_ASSERT_STRING_EQUAL(f.s.last_imp_groups, "team-a,system:authenticated");
	/* the credentials are still sent: impersonation is on top of them */
	CU_ASSERT_STRING_EQUAL(f.s.last_auth, "Bearer unit-test-token");
	fx_stop(&f);
}

static void test_watch_stream(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	collected c;
	kube_watch_opts wo = {.resource_version = "10", .bookmarks = true, .timeout_s = 300,
			      .label_selector = "a=b"};

	memset(&c, 0, sizeof(c));
	fx_start(&f, M_WATCH, NULL);
	CU_ASSERT_EQUAL(kube_watch(f.c, &KUBE_PODS, "ns1", &wo, collect_event, &c, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(c.log, STREAM_WANT);
	CU_ASSERT_STRING_EQUAL(f.s.last_url, "/api/v1/namespaces/ns1/pods?watch=1&allowWatchBookmarks=true"
					     "&resourceVersion=10&timeoutSeconds=300&labelSelector=a=b");
	fx_stop(&f);
}

static int stop_after_first(void *ud, const char *type, json_object *obj)
{
	collect_event(ud, type, obj);
	return 7;
}

typedef struct cancel_ctx {
	collected c;
	atomic_bool cancel;
} cancel_ctx;

static int cancel_on_event(void *ud, const char *type, json_object *obj)
{
	cancel_ctx *cc = ud;
	collect_event(&cc->c, type, obj);
	atomic_store(&cc->cancel, true);
	return 0;
}

static bool is_cancelled(void *ud)
{
	return atomic_load(&((cancel_ctx *)ud)->cancel);
}

static void test_watch_errors(void)
{
	fixture f;
	kube_status st;
	prd_err e;
	collected c;

	memset(&c, 0, sizeof(c));
	fx_start(&f, M_WATCH_410, NULL);
	CU_ASSERT_EQUAL(kube_watch(f.c, &KUBE_PODS, NULL, NULL, collect_event, &c, &st, &e), PRD_EGONE);
	CU_ASSERT_EQUAL(st.http_code, 410);
	CU_ASSERT_EQUAL(c.n, 0);
	fx_stop(&f);

	memset(&c, 0, sizeof(c));
	fx_start(&f, M_WATCH_ERR, NULL);
	CU_ASSERT_EQUAL(kube_watch(f.c, &KUBE_PODS, NULL, NULL, collect_event, &c, &st, &e), PRD_EGONE);
	CU_ASSERT_STRING_EQUAL(c.log, "ADDED:a;");
	CU_ASSERT_STRING_EQUAL(st.reason, "Expired");
	fx_stop(&f);

	/* The callback's stop value comes back; later events are not seen. */
	memset(&c, 0, sizeof(c));
	fx_start(&f, M_WATCH, NULL);
	CU_ASSERT_EQUAL(kube_watch(f.c, &KUBE_PODS, NULL, NULL, stop_after_first, &c, &st, &e), 7);
	CU_ASSERT_STRING_EQUAL(c.log, "ADDED:a;");
	fx_stop(&f);

	/* Cancellation ends a watch the server holds open (20 s) promptly. */
	{
		cancel_ctx cc;
		kube_watch_opts wo = {.cancelled = is_cancelled, .cancel_ud = &cc};
		struct timespec t0, t1;
		memset(&cc, 0, sizeof(cc));
		fx_start(&f, M_WATCH_HOLD, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CU_ASSERT_EQUAL(kube_watch(f.c, &KUBE_PODS, NULL, &wo, cancel_on_event, &cc, &st, &e), 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		CU_ASSERT_STRING_EQUAL(cc.c.log, "ADDED:a;");
		/* Generous bound: far below the 20 s hold, so cancellation
		 * (not the server) ended it. */
		CU_ASSERT_TRUE(t1.tv_sec - t0.tv_sec < 10);
		fx_stop(&f);
	}
}

/* The connection-reuse test: watches that run until cancelled. */
#define REUSE_WATCHES 10

/* Watches that got their first event, signalled to the test. */
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cv = PTHREAD_COND_INITIALIZER;
static int held_ready;

typedef struct held_watch {
	fixture *f;
	atomic_bool got, cancel;
	pthread_t t;
	int rc;
} held_watch;

static int held_event(void *ud, const char *type, json_object *obj)
{
	held_watch *w = ud;
	(void)type;
	(void)obj;
	if(!atomic_exchange(&w->got, true)) {
		pthread_mutex_lock(&held_mu);
		held_ready++;
		pthread_cond_broadcast(&held_cv);
		pthread_mutex_unlock(&held_mu);
	}
	return 0;
}

static bool held_cancelled(void *ud)
{
	return atomic_load(&((held_watch *)ud)->cancel);
}

static void *held_watch_main(void *ud)
{
	held_watch *w = ud;
	kube_watch_opts wo = {.cancelled = held_cancelled, .cancel_ud = w};
	kube_status st;
	prd_err e;
	w->rc = kube_watch(w->f->c, &KUBE_PODS, NULL, &wo, held_event, w, &st, &e);
	return NULL;
}

/* Ordinary requests reuse one connection while the informers' watches
 * hold theirs open. curl's default cache of 5 connections counts the ones
 * in use, so with the watches of provreqd run (8 informers and more) every
 * request closed its connection when done and the next made a new one: a
 * TLS handshake per request, most of provreqd's CPU in a 500-node
 * scale-up. A client without CURLOPT_MAXCONNECTS opens 30 connections
 * for these 30 requests. */
static void add_connections(void *ud, long n)
{
	atomic_fetch_add((atomic_long *)ud, n);
}

static void test_connection_reuse(void)
{
	atomic_long told = 0;
	kube_client_opts opts = {.connected = add_connections, .observe_ud = &told};
	fixture f;
	held_watch w[REUSE_WATCHES];
	kube_status st;
	prd_err e;
	struct timespec until;
	int i, before, ready;

	held_ready = 0;
	fx_start(&f, M_HOLD_WATCHES, &opts);
	memset(w, 0, sizeof(w));
	for(i = 0; i < REUSE_WATCHES; i++) {
		w[i].f = &f;
		CU_ASSERT_EQUAL_FATAL(pthread_create(&w[i].t, NULL, held_watch_main, &w[i]), 0);
	}
	/* Until every watch got its event (the bound only keeps a broken
	 * client from hanging the suite). */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 60;
	pthread_mutex_lock(&held_mu);
	while(held_ready < REUSE_WATCHES && pthread_cond_timedwait(&held_cv, &held_mu, &until) == 0)
		;
	ready = held_ready;
	pthread_mutex_unlock(&held_mu);
	CU_ASSERT_EQUAL_FATAL(ready, REUSE_WATCHES);
	before = fake_connections(f.srv);
	CU_ASSERT_EQUAL(before, REUSE_WATCHES);
	for(i = 0; i < 30; i++) {
		json_object *o = NULL;
		CU_ASSERT_EQUAL(kube_get(f.c, &KUBE_PODS, "ns1", "x", &o, &st, &e), 0);
		json_object_put(o);
	}
	CU_ASSERT_EQUAL(fake_connections(f.srv) - before, 1);
	for(i = 0; i < REUSE_WATCHES; i++)
		atomic_store(&w[i].cancel, true);
	for(i = 0; i < REUSE_WATCHES; i++) {
		pthread_join(w[i].t, NULL);
		CU_ASSERT_EQUAL(w[i].rc, 0);
	}
	/* The owner is told of each connection (provreqd_api_connections_total). */
	CU_ASSERT_EQUAL(atomic_load(&told), fake_connections(f.srv));
	fx_stop(&f);
}

/* kube_api over the client: an answer's bytes reach the caller (a cloud
 * driver) as the server sent them, parsed only when asked for; failures
 * carry the apiserver's Status. */
static void test_api_over_client(void)
{
	static const char scale[] = "{\"kind\":\"Scale\",\"spec\":{\"replicas\":3},\"metadata\":{\"name\":\"x\"}}";
	fixture f;
	kube_api api;
	json_object *o = NULL;
	char *resp = NULL;
	size_t len = 0;
	long status = 0;
	prd_err e;

	fx_start(&f, M_OK, NULL);
	api = kube_api_from_client(f.c);
	CU_ASSERT_EQUAL(api.request(api.ud, "GET", "/api/v1/pods", NULL, NULL, 0, &status, &resp, &len), 0);
	CU_ASSERT_EQUAL(status, 200);
	CU_ASSERT_EQUAL(len, strlen(scale));
	CU_ASSERT_STRING_EQUAL(resp ? resp : "", scale);
	free(resp);
	CU_ASSERT_EQUAL(kube_api_call(&api, "GET", "/api/v1/pods", NULL, NULL, &o, &status, &e), 0);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o, "spec"), "replicas")), 3);
	json_object_put(o);
	CU_ASSERT_EQUAL(kube_api_call(&api, "PATCH", "/api/v1/nodes/n", "application/merge-patch+json", NULL, NULL,
				      &status, &e), 0);
	fx_stop(&f);

	fx_start(&f, M_GET_404, NULL);
	api = kube_api_from_client(f.c);
	CU_ASSERT_EQUAL(kube_api_call(&api, "GET", "/api/v1/namespaces/ns1/pods/x", NULL, NULL, &o, &status, &e),
			PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(status, 404);
	CU_ASSERT_PTR_NULL(o);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "NotFound"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "pods \"x\" not found"));
	fx_stop(&f);

	/* A 2xx answer that is not JSON is an error for a caller who wants
	 * it parsed, and its bytes for one who does not. */
	fx_start(&f, M_NOT_JSON, NULL);
	api = kube_api_from_client(f.c);
	CU_ASSERT_EQUAL(kube_api_call(&api, "GET", "/api/v1/pods", NULL, NULL, &o, &status, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NULL(o);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "not JSON"));
	CU_ASSERT_EQUAL(kube_api_call(&api, "DELETE", "/api/v1/nodes/n", NULL, NULL, NULL, &status, &e), 0);
	fx_stop(&f);
}

static void test_connection_refused(void)
{
	kube_config *cfg = NULL;
	kube_client *c = NULL;
	kube_client_opts opts = {.max_retries = 1, .connect_timeout_ms = 2000};
	kube_status st;
	prd_err e;
	char kc[700];
	FILE *fp;
	fake_srv *srv = fake_start(handler, NULL);
	int port;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	port = fake_port(srv);
	fake_stop(srv); /* nothing listens on the port any more */
	snprintf(kc, sizeof(kc), "%s/refused-kubeconfig", test_tmpdir());
	fp = fopen(kc, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
	fprintf(fp, "current-context: c\nclusters:\n- name: a\n  cluster: {server: 'http://127.0.0.1:%d'}\n"
		    "contexts:\n- name: c\n  context: {cluster: a}\n", port);
	fclose(fp);
	CU_ASSERT_EQUAL_FATAL(kube_config_load(kc, NULL, &cfg, &e), 0);
	CU_ASSERT_EQUAL_FATAL(kube_client_new(cfg, &opts, &c, &e), 0);
	CU_ASSERT_EQUAL(kube_get(c, &KUBE_NODES, NULL, "n", NULL, &st, &e), PRD_EIO);
	CU_ASSERT_EQUAL(st.http_code, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "GET /api/v1/nodes/n"));
	kube_client_free(c);
	kube_config_free(cfg);
}

/* ---- in-process transport ---------------------------------------------- */

/* The in-memory store behind a transport that fails on demand: the next
 * `fail` requests answer 500, the next `lose` get no answer. */
typedef struct tp {
	memapi *m;
	int fail, lose, calls;
	char last_ct[64];
} tp;

static int tp_send(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
		   long *status, char **resp, size_t *resp_len)
{
	tp *t = ud;
	t->calls++;
	snprintf(t->last_ct, sizeof(t->last_ct), "%s", ct ? ct : "");
	if(t->fail > 0) {
		t->fail--;
		*status = 500;
		*resp = strdup("{\"kind\":\"Status\",\"reason\":\"InternalError\",\"code\":500,\"message\":\"boom\"}");
		*resp_len = strlen(*resp);
		return PRD_EAGAIN;
	}
	if(t->lose > 0) {
		t->lose--;
		*status = 0;
		return PRD_ETIMEDOUT;
	}
	return memapi_request(t->m, method, path, ct, body, len, status, resp, resp_len);
}

/* kube_client_opts.transport: no kube_config and no HTTP, and what callers
 * rely on unchanged: Status decoding into codes and kube_status, retries
 * of idempotent requests only (after a 500, and after no answer), the
 * backoff on the client's clock, watches refused, and the lease code on
 * top of it. Broken transports caught: one that is bypassed (no config:
 * the client cannot be made), one that takes a lost answer for success or
 * repeats a POST, one whose 409 is not AlreadyExists. */
static void test_transport(void)
{
	clk fc;
	tp t;
	kube_client_opts co;
	kube_client *c = NULL;
	kube_status st;
	json_object *o = NULL;
	kube_watch_opts wo;
	kube_lease *le = NULL;
	kube_lease_opts lo = {.namespace_ = "x", .name = "l", .identity = "me"};
	bool leading = false;
	int64_t t0;
	prd_err e;

	clk_fake_init(&fc, 1700000000LL * PRD_NS_PER_SEC);
	memset(&t, 0, sizeof(t));
	CU_ASSERT_EQUAL_FATAL(memapi_new(&fc, 0, &t.m), 0);
	memset(&co, 0, sizeof(co));
	CU_ASSERT_EQUAL(kube_client_new(NULL, &co, &c, &e), PRD_EINVAL);
	co.transport = tp_send;
	co.transport_ud = &t;
	co.clock = &fc;
	co.max_retries = 2;
	CU_ASSERT_EQUAL_FATAL(kube_client_new(NULL, &co, &c, &e), 0);

	o = json_tokener_parse("{\"metadata\":{\"name\":\"x\"}}");
	CU_ASSERT_EQUAL(kube_create(c, &KUBE_NAMESPACES, NULL, o, NULL, &st, &e), 0);
	CU_ASSERT_STRING_EQUAL(t.last_ct, "application/json");
	CU_ASSERT_EQUAL(kube_create(c, &KUBE_NAMESPACES, NULL, o, NULL, &st, &e), PRD_EEXIST);
	CU_ASSERT_EQUAL(st.http_code, 409);
	CU_ASSERT_STRING_EQUAL(st.reason, "AlreadyExists");
	json_object_put(o);
	o = NULL;
	CU_ASSERT_EQUAL(kube_get(c, &KUBE_NAMESPACES, NULL, "nope", &o, &st, &e), PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "GET /api/v1/namespaces/nope: 404 NotFound"));

	/* A GET is retried after a 500 and after no answer, waiting on the
	 * client's clock. */
	t.calls = 0;
	t.fail = 1;
	t.lose = 1;
	t0 = clk_mono(&fc);
	CU_ASSERT_EQUAL(kube_get(c, &KUBE_NAMESPACES, NULL, "x", &o, &st, &e), 0);
	CU_ASSERT_EQUAL(t.calls, 3);
	CU_ASSERT_TRUE(clk_mono(&fc) > t0);
	CU_ASSERT_PTR_NOT_NULL(o);
	json_object_put(o);
	o = NULL;
	/* A POST is not: a 500, and no answer (which may have been applied). */
	o = json_tokener_parse("{\"metadata\":{\"name\":\"cm\"}}");
	t.calls = 0;
	t.fail = 1;
	CU_ASSERT_EQUAL(kube_create(c, &KUBE_CONFIGMAPS, "x", o, NULL, &st, &e), PRD_EAGAIN);
	CU_ASSERT_STRING_EQUAL(st.reason, "InternalError");
	CU_ASSERT_EQUAL(t.calls, 1);
	t.lose = 1;
	CU_ASSERT_EQUAL(kube_create(c, &KUBE_CONFIGMAPS, "x", o, NULL, &st, &e), PRD_ETIMEDOUT);
	CU_ASSERT_EQUAL(st.http_code, 0);
	CU_ASSERT_EQUAL(t.calls, 2);
	json_object_put(o);

	memset(&wo, 0, sizeof(wo));
	CU_ASSERT_EQUAL(kube_watch(c, &KUBE_CONFIGMAPS, "x", &wo, NULL, NULL, &st, &e), PRD_EUNSUPPORTED);

	/* The lease code runs over it. */
	lo.clock = &fc;
	CU_ASSERT_EQUAL_FATAL(kube_lease_new(c, &lo, &le, &e), 0);
	CU_ASSERT_EQUAL(kube_lease_step(le, &leading, NULL, &e), 0);
	CU_ASSERT_TRUE(leading);
	CU_ASSERT_TRUE(kube_lease_valid(le));
	kube_lease_free(le);
	kube_client_free(c);
	memapi_free(t.m);
}

static const test_case cases[] = {
	{"Status decoding table", test_status_table},
	{"watch framing: 1-byte, random and whole chunks", test_framer_chunks},
	{"watch framing limits and ERROR events", test_framer_limits},
	{"resource paths", test_paths},
	{"GET 404 decodes NotFound, bearer sent", test_get_404},
	{"429 retried with Retry-After for GET and POST", test_retry_429},
	{"5xx retried for GET and versioned PUT, not POST", test_retry_500},
	{"pagination over 3 pages, expired continue restarts", test_pagination},
	{"QPS/burst pacing", test_qps},
	{"a shutdown deadline stops retries and sending", test_shutdown_deadline},
	{"delete preconditions, patch types, scale, AlreadyExists", test_verbs_wire},
	{"--as/--as-group: Impersonate-User and Impersonate-Group headers", test_impersonation_headers},
	{"watch streaming across chunk boundaries", test_watch_stream},
	{"list pages as text", test_pagination_text},
	{"watch events as text", test_watch_text},
	{"watch 410, ERROR event, stop, cancel", test_watch_errors},
	{"connection refused is EIO", test_connection_refused},
	{"requests reuse a connection while watches hold theirs", test_connection_reuse},
	{"kube_api over the client: answers' bytes, Status, not JSON", test_api_over_client},
	{"an in-process transport: same codes, retries and decoding", test_transport},
	{NULL, NULL}
};

TEST_MAIN("kube_client", cases)

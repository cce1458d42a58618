/* The HTTP endpoint on an ephemeral port, queried with libcurl: /metrics,
 * /healthz and /readyz in passing and failing states, 404/405, address
 * parsing and bind errors. */
#include "testutil.h"
#include "ops/health.h"
#include "ops/http.h"
#include "ops/metrics.h"
#include "kube/metrics_authz.h"
#include "test_kube_fakesrv.h"

#include <arpa/inet.h>
#include <ifaddrs.h>

#include <curl/curl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct resp {
	long code;
	buf body;
	char ctype[128];
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	buf_append(ud, p, sz * n);
	return sz * n;
}

static void fetch_as(const char *host, int port, const char *method, const char *path, const char *token,
		     resp *r);

/* GET (or another method) http://HOST:port/path; caller frees r->body. */
static void fetch(const char *host, int port, const char *method, const char *path, resp *r)
{
	fetch_as(host, port, method, path, NULL, r);
}

/* fetch with "Authorization: Bearer TOKEN" when token is not NULL. */
static void fetch_as(const char *host, int port, const char *method, const char *path, const char *token,
		     resp *r)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[256], auth[256];
	char *ct = NULL;
	buf_init(&r->body);
	r->code = 0;
	r->ctype[0] = '\0';
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	snprintf(url, sizeof(url), "http://%s:%d%s", host, port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &r->body);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	if(token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		hdrs = curl_slist_append(hdrs, auth);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	}
	if(strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if(strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	CU_ASSERT_EQUAL(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
	if(curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
		snprintf(r->ctype, sizeof(r->ctype), "%s", ct);
	curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
}

static void test_parse_addr(void)
{
	char host[64];
	int port = -1;
	prd_err e;
	CU_ASSERT_EQUAL(http_parse_addr(":8080", host, sizeof(host), &port, &e), 0);
	CU_ASSERT_STRING_EQUAL(host, "");
	CU_ASSERT_EQUAL(port, 8080);
	CU_ASSERT_EQUAL(http_parse_addr("[::1]:9090", host, sizeof(host), &port, &e), 0);
	CU_ASSERT_STRING_EQUAL(host, "::1");
	CU_ASSERT_EQUAL(port, 9090);
	CU_ASSERT_EQUAL(http_parse_addr("127.0.0.1:0", host, sizeof(host), &port, &e), 0);
	CU_ASSERT_STRING_EQUAL(host, "127.0.0.1");
	CU_ASSERT_EQUAL(port, 0);
	CU_ASSERT_EQUAL(http_parse_addr("localhost:65535", host, sizeof(host), &port, &e), 0);
	CU_ASSERT_STRING_EQUAL(host, "localhost");

	CU_ASSERT_EQUAL(http_parse_addr("", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(http_parse_addr("8080", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "missing ':PORT'"));
	CU_ASSERT_EQUAL(http_parse_addr(":65536", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "0 to 65535"));
	CU_ASSERT_EQUAL(http_parse_addr(":http", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(http_parse_addr(":", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(http_parse_addr("::1:8080", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "brackets"));
	CU_ASSERT_EQUAL(http_parse_addr("[::1]", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(http_parse_addr("[::1:80", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(http_parse_addr("[]:80", host, sizeof(host), &port, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL(http_parse_addr("a-very-long-host-name-that-does-not-fit-in-sixty-four-bytes.example.com:1",
					host, sizeof(host), &port, &e), PRD_EINVAL);
}

static bool db_open;
static bool check_db(void *ud, buf *reason)
{
	(void)ud;
	if(!db_open)
		buf_append_str(reason, "state database is not open");
	return db_open;
}

static void test_endpoints(void)
{
	clk fake;
	health *h = NULL;
	http_server *s = NULL;
	prd_err e;
	resp r;
	int port;

	clk_fake_init(&fake, 1700000000LL * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	CU_ASSERT_EQUAL_FATAL(health_new(&fake, 30 * PRD_NS_PER_SEC, &h), 0);
	CU_ASSERT_EQUAL(health_add_flag(h, "caches-synced", false, "informer caches have not synced"), 0);
	CU_ASSERT_EQUAL(health_add_check(h, "state-store", check_db, NULL), 0);
	CU_ASSERT_EQUAL(health_add_flag(h, "leader-election", true, NULL), 0);
	CU_ASSERT_EQUAL(health_add_flag(h, "caches-synced", true, NULL), PRD_EEXIST);
	CU_ASSERT_EQUAL(health_set_flag(h, "no-such-check", true, NULL), PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(health_set_flag(h, "state-store", true, NULL), PRD_ENOTFOUND); /* a callback */
	CU_ASSERT_EQUAL_FATAL(http_start("127.0.0.1:0", h, &s, &e), 0);
	port = http_port(s);
	CU_ASSERT_TRUE_FATAL(port > 0);

	metrics_counter_add(M_SCALEUPS, METRICS_L("g\"1", "attempted"), 2);
	fetch("127.0.0.1", port, "GET", "/metrics", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	CU_ASSERT_STRING_EQUAL(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&r.body), "# TYPE provreqd_scaleups_total counter\n"));
	CU_ASSERT_PTR_NOT_NULL(
		strstr(buf_str(&r.body), "provreqd_scaleups_total{node_group=\"g\\\"1\",result=\"attempted\"} 2\n"));
	buf_free(&r.body);

	/* Alive: the count starts at creation. */
	fetch("127.0.0.1", port, "GET", "/healthz", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	CU_ASSERT_STRING_EQUAL(buf_str(&r.body), "ok\n");
	buf_free(&r.body);
	clk_fake_advance(&fake, 31 * PRD_NS_PER_SEC);
	fetch("127.0.0.1", port, "GET", "/healthz", &r);
	CU_ASSERT_EQUAL(r.code, 500);
	CU_ASSERT_STRING_EQUAL(buf_str(&r.body), "worker loop has not reported for 31.0s (threshold 30.0s)\n");
	buf_free(&r.body);
	health_beat(h);
	clk_fake_advance(&fake, 30 * PRD_NS_PER_SEC); /* exactly at the threshold: still alive */
	fetch("127.0.0.1", port, "GET", "/healthz", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	buf_free(&r.body);

	/* Not ready: every failing check listed, in registration order. */
	fetch("127.0.0.1", port, "GET", "/readyz", &r);
	CU_ASSERT_EQUAL(r.code, 503);
	CU_ASSERT_STRING_EQUAL(buf_str(&r.body), "caches-synced: informer caches have not synced\n"
						 "state-store: state database is not open\n");
	buf_free(&r.body);
	CU_ASSERT_EQUAL(health_set_flag(h, "caches-synced", true, NULL), 0);
	CU_ASSERT_EQUAL(health_set_flag(h, "leader-election", false, "lease client stopped"), 0);
	fetch("127.0.0.1", port, "GET", "/readyz", &r);
	CU_ASSERT_EQUAL(r.code, 503);
	CU_ASSERT_STRING_EQUAL(buf_str(&r.body), "state-store: state database is not open\n"
						 "leader-election: lease client stopped\n");
	buf_free(&r.body);
	db_open = true;
	CU_ASSERT_EQUAL(health_set_flag(h, "leader-election", true, NULL), 0);
	fetch("127.0.0.1", port, "GET", "/readyz", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	CU_ASSERT_STRING_EQUAL(buf_str(&r.body), "ok\n");
	buf_free(&r.body);
	/* A note is shown under "ok" while its flag is ok (a standby says
	 * it stands by), not while it fails (the reason is shown then). */
	CU_ASSERT_EQUAL(health_set_note(h, "leader-election", "standing by: the lease is held by b"), 0);
	fetch("127.0.0.1", port, "GET", "/readyz", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	CU_ASSERT_STRING_EQUAL(buf_str(&r.body), "ok\nleader-election: standing by: the lease is held by b\n");
	buf_free(&r.body);
	CU_ASSERT_EQUAL(health_set_flag(h, "leader-election", false, "fenced out"), 0);
	fetch("127.0.0.1", port, "GET", "/readyz", &r);
	CU_ASSERT_EQUAL(r.code, 503);
	CU_ASSERT_STRING_EQUAL(buf_str(&r.body), "leader-election: fenced out\n");
	buf_free(&r.body);
	CU_ASSERT_EQUAL(health_set_note(h, "leader-election", NULL), 0);
	CU_ASSERT_EQUAL(health_set_flag(h, "leader-election", true, NULL), 0);
	CU_ASSERT_EQUAL(health_set_note(h, "no-such-check", "x"), PRD_ENOTFOUND);

	fetch("127.0.0.1", port, "GET", "/nope", &r);
	CU_ASSERT_EQUAL(r.code, 404);
	buf_free(&r.body);
	fetch("127.0.0.1", port, "GET", "/metrics/extra", &r);
	CU_ASSERT_EQUAL(r.code, 404);
	buf_free(&r.body);
	fetch("127.0.0.1", port, "POST", "/metrics", &r);
	CU_ASSERT_EQUAL(r.code, 405);
	buf_free(&r.body);
	fetch("127.0.0.1", port, "HEAD", "/healthz", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	CU_ASSERT_EQUAL(r.body.len, 0);
	buf_free(&r.body);

	http_stop(s);
	health_free(h);
	metrics_shutdown();
}

static void test_bind_errors_and_restart(void)
{
	clk fake;
	health *h = NULL;
	http_server *a = NULL, *b = NULL;
	prd_err e;
	char addr[64];
	int port;
	resp r;

	clk_fake_init(&fake, 0);
	CU_ASSERT_EQUAL_FATAL(health_new(&fake, PRD_NS_PER_SEC, &h), 0);
	CU_ASSERT_EQUAL_FATAL(http_start("127.0.0.1:0", h, &a, &e), 0);
	port = http_port(a);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	CU_ASSERT_EQUAL(http_start(addr, h, &b, &e), PRD_EIO);
	CU_ASSERT_PTR_NULL(b);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, addr));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "Address already in use"));
	http_stop(a);
	/* The socket is closed: the same port can be bound again. */
	CU_ASSERT_EQUAL(http_start(addr, h, &b, &e), 0);
	fetch("127.0.0.1", port, "GET", "/healthz", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	buf_free(&r.body);
	http_stop(b);

	CU_ASSERT_EQUAL(http_start("no-such-host.invalid:0", h, &b, &e), PRD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "listen on no-such-host.invalid:0: "));
	CU_ASSERT_EQUAL(http_start("192.0.2.1:0", h, &b, &e), PRD_EIO); /* not a local address */
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "Cannot assign requested address"));
	CU_ASSERT_EQUAL(http_start("127.0.0.1", h, &b, &e), PRD_EINVAL);
	http_stop(NULL);
	health_free(h);
}

/* [::1] and the wildcard, where the machine has IPv6 loopback. */
static void test_ipv6_and_wildcard(void)
{
	clk fake;
	health *h = NULL;
	http_server *s = NULL;
	prd_err e;
	resp r;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 sa;

	clk_fake_init(&fake, 0);
	CU_ASSERT_EQUAL_FATAL(health_new(&fake, PRD_NS_PER_SEC, &h), 0);
	CU_ASSERT_EQUAL_FATAL(http_start(":0", h, &s, &e), 0);
	fetch("127.0.0.1", http_port(s), "GET", "/healthz", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	buf_free(&r.body);
	http_stop(s);

	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_addr = in6addr_loopback;
	if(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		CU_ASSERT_EQUAL_FATAL(http_start("[::1]:0", h, &s, &e), 0);
		fetch("[::1]", http_port(s), "GET", "/healthz", &r);
		CU_ASSERT_EQUAL(r.code, 200);
		buf_free(&r.body);
		http_stop(s);
	} else {
		fprintf(stderr, "no IPv6 loopback here; [::1] case not run\n");
	}
	if(fd >= 0)
		close(fd);
	health_free(h);
}

static void test_health_args(void)
{
	health *h = NULL;
	CU_ASSERT_EQUAL(health_new(clk_real(), 0, &h), PRD_EINVAL);
	CU_ASSERT_PTR_NULL(h);
	CU_ASSERT_EQUAL(health_new(clk_real(), PRD_NS_PER_SEC, &h), 0);
	CU_ASSERT_EQUAL(health_add_check(h, "x", NULL, NULL), PRD_EINVAL);
	CU_ASSERT_EQUAL(health_add_flag(h, "", true, NULL), PRD_EINVAL);
	CU_ASSERT_TRUE(health_ready(h, NULL)); /* no checks: ready */
	health_free(h);
}


/* A non-loopback IPv4 address of this machine, or false without one. */
static bool other_local_ipv4(char *out, size_t n)
{
	struct ifaddrs *all = NULL, *i;
	bool found = false;
	if(getifaddrs(&all) != 0)
		return false;
	for(i = all; i && !found; i = i->ifa_next) {
		if(!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || http_addr_is_loopback(i->ifa_addr))
			continue;
		found = inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)n) != NULL;
	}
	freeifaddrs(all);
	return found;
}

static void test_loopback_addresses(void)
{
	struct sockaddr_in a4;
	struct sockaddr_in6 a6;
	memset(&a4, 0, sizeof(a4));
	memset(&a6, 0, sizeof(a6));
	a4.sin_family = AF_INET;
	a6.sin6_family = AF_INET6;
	inet_pton(AF_INET, "127.0.0.1", &a4.sin_addr);
	CU_ASSERT_TRUE(http_addr_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET, "127.3.2.1", &a4.sin_addr);
	CU_ASSERT_TRUE(http_addr_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
	CU_ASSERT_FALSE(http_addr_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET, "128.0.0.1", &a4.sin_addr);
	CU_ASSERT_FALSE(http_addr_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET6, "::1", &a6.sin6_addr);
	CU_ASSERT_TRUE(http_addr_is_loopback((struct sockaddr *)&a6));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
	CU_ASSERT_TRUE(http_addr_is_loopback((struct sockaddr *)&a6));
	inet_pton(AF_INET6, "::ffff:10.0.0.1", &a6.sin6_addr);
	CU_ASSERT_FALSE(http_addr_is_loopback((struct sockaddr *)&a6));
	inet_pton(AF_INET6, "fe80::1", &a6.sin6_addr);
	CU_ASSERT_FALSE(http_addr_is_loopback((struct sockaddr *)&a6));
	CU_ASSERT_FALSE(http_addr_is_loopback(NULL));
}

/* --metrics-access=localhost on every address: /metrics to loopback
 * clients only, the probes' paths to everyone. */
static void test_metrics_localhost(void)
{
	http_opts o = { HTTP_ACCESS_LOCALHOST, NULL, NULL };
	enum http_access a = HTTP_ACCESS_OPEN;
	health *h = NULL;
	http_server *s = NULL;
	char other[64];
	prd_err e;
	resp r;

	CU_ASSERT_EQUAL(http_access_parse("localhost", &a), 0);
	CU_ASSERT_EQUAL(a, HTTP_ACCESS_LOCALHOST);
	CU_ASSERT_EQUAL(http_access_parse("secure", &a), PRD_EINVAL);
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	CU_ASSERT_EQUAL_FATAL(health_new(clk_real(), 30 * PRD_NS_PER_SEC, &h), 0);
	CU_ASSERT_EQUAL_FATAL(http_start_opts("0.0.0.0:0", h, &o, &s, &e), 0);
	fetch("127.0.0.1", http_port(s), "GET", "/metrics", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&r.body), "provreqd_build_info"));
	buf_free(&r.body);
	if(other_local_ipv4(other, sizeof(other))) {
		fetch(other, http_port(s), "GET", "/metrics", &r);
		CU_ASSERT_EQUAL(r.code, 403);
		CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&r.body), "localhost only"));
		CU_ASSERT_PTR_NULL(strstr(buf_str(&r.body), "provreqd_"));
		buf_free(&r.body);
		fetch(other, http_port(s), "GET", "/healthz", &r);
		CU_ASSERT_EQUAL(r.code, 200);
		buf_free(&r.body);
	} else {
		fprintf(stderr, "# no non-loopback IPv4 address here: the refusal is checked by address only\n");
	}
	http_stop(s);
	health_free(h);
	metrics_shutdown();
}

/* A stand-in for the apiserver's answer: "reader" may, "nobody" may not,
 * "down" cannot be decided, anything else does not authenticate. */
static int fake_authz(void *ud, const char *token, const char *path, buf *why)
{
	int *calls = ud;
	(*calls)++;
	CU_ASSERT_STRING_EQUAL(path, "/metrics");
	if(strcmp(token, "reader") == 0)
		return 0;
	if(strcmp(token, "nobody") == 0)
		return buf_append_str(why, "forbidden: user \"nobody\""), PRD_EPERM;
	if(strcmp(token, "down") == 0)
		return buf_append_str(why, "cannot review the token"), PRD_EIO;
	buf_append_str(why, "unauthorized: the token does not authenticate");
	return PRD_EINVAL;
}

static void test_metrics_tokenreview(void)
{
	int calls = 0;
	http_opts o = { HTTP_ACCESS_TOKENREVIEW, fake_authz, &calls };
	http_opts none = { HTTP_ACCESS_TOKENREVIEW, NULL, NULL };
	health *h = NULL;
	http_server *s = NULL;
	prd_err e;
	resp r;
	int port;

	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	CU_ASSERT_EQUAL_FATAL(health_new(clk_real(), 30 * PRD_NS_PER_SEC, &h), 0);
	CU_ASSERT_EQUAL(http_start_opts("127.0.0.1:0", h, &none, &s, &e), PRD_EINVAL);
	CU_ASSERT_EQUAL_FATAL(http_start_opts("127.0.0.1:0", h, &o, &s, &e), 0);
	port = http_port(s);
	fetch("127.0.0.1", port, "GET", "/metrics", &r);
	CU_ASSERT_EQUAL(r.code, 401);
	CU_ASSERT_PTR_NULL(strstr(buf_str(&r.body), "provreqd_"));
	buf_free(&r.body);
	CU_ASSERT_EQUAL(calls, 0); /* no token: the apiserver is not asked */
	fetch_as("127.0.0.1", port, "GET", "/metrics", "forged", &r);
	CU_ASSERT_EQUAL(r.code, 401);
	buf_free(&r.body);
	fetch_as("127.0.0.1", port, "GET", "/metrics", "nobody", &r);
	CU_ASSERT_EQUAL(r.code, 403);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&r.body), "nobody"));
	CU_ASSERT_PTR_NULL(strstr(buf_str(&r.body), "provreqd_"));
	buf_free(&r.body);
	fetch_as("127.0.0.1", port, "GET", "/metrics", "down", &r);
	CU_ASSERT_EQUAL(r.code, 503);
	buf_free(&r.body);
	fetch_as("127.0.0.1", port, "GET", "/metrics", "reader", &r);
	CU_ASSERT_EQUAL(r.code, 200);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&r.body), "provreqd_build_info"));
	buf_free(&r.body);
	CU_ASSERT_EQUAL(calls, 4);
	fetch("127.0.0.1", port, "GET", "/healthz", &r); /* the kubelet's probe has no token */
	CU_ASSERT_EQUAL(r.code, 200);
	buf_free(&r.body);
	http_stop(s);
	health_free(h);
	metrics_shutdown();
}

/* The apiserver's side of metrics_authz_kube: TokenReviews of "good" and
 * "nobody" authenticate; SubjectAccessReviews allow user "scraper" get on
 * /metrics. Requests are recorded for the checks. */
typedef struct review_srv {
	char last_sar[2048];
	int tokenreviews, sars;
	int fail_status; /* answer every request with this when non-zero */
} review_srv;

static void review_handler(void *ud, const fake_req *req, fake_resp *out_resp)
{
	review_srv *rs = ud;
	json_object *in = json_tokener_parse(req->body ? req->body : ""), *spec = NULL, *v = NULL;
	const char *tok = "", *user = "";
	char out[1024];

	if(rs->fail_status) {
		out_resp->status = rs->fail_status;
		out_resp->body = fake_strdup("{\"kind\":\"Status\",\"code\":403,\"reason\":\"Forbidden\",\"message\":\"no\"}");
		json_object_put(in);
		return;
	}
	json_object_object_get_ex(in, "spec", &spec);
	if(strcmp(req->url, "/apis/authentication.k8s.io/v1/tokenreviews") == 0) {
		rs->tokenreviews++;
		if(spec && json_object_object_get_ex(spec, "token", &v))
			tok = json_object_get_string(v);
		if(strcmp(tok, "good") == 0 || strcmp(tok, "nobody") == 0)
			snprintf(out, sizeof(out),
				 "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"%s\",\"uid\":\"u-1\","
				 "\"groups\":[\"system:serviceaccounts\"],\"extra\":{\"k\":[\"v\"]}}}}",
				 strcmp(tok, "good") == 0 ? "scraper" : "nobody");
		else
			snprintf(out, sizeof(out), "{\"status\":{\"authenticated\":false,\"error\":\"invalid bearer token\"}}");
	} else if(strcmp(req->url, "/apis/authorization.k8s.io/v1/subjectaccessreviews") == 0) {
		rs->sars++;
		snprintf(rs->last_sar, sizeof(rs->last_sar), "%s", req->body ? req->body : "");
		if(spec && json_object_object_get_ex(spec, "user", &v))
			user = json_object_get_string(v);
		snprintf(out, sizeof(out), "{\"status\":{\"allowed\":%s}}", strcmp(user, "scraper") == 0 ? "true" : "false");
	} else {
		out_resp->status = 404;
		snprintf(out, sizeof(out), "{}");
	}
	out_resp->body = fake_strdup(out);
	json_object_put(in);
}

static void test_metrics_authz_kube(void)
{
	review_srv rs;
	kube_client_opts ko;
	kube_config *cfg = NULL;
	kube_client *c = NULL;
	fake_srv *srv;
	buf why;

	memset(&rs, 0, sizeof(rs));
	memset(&ko, 0, sizeof(ko));
	ko.max_retries = -1;
	srv = fake_start(review_handler, &rs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, &ko, &cfg, &c), 0);
	buf_init(&why);
	CU_ASSERT_EQUAL(metrics_authz_kube(c, "good", "/metrics", &why), 0);
	CU_ASSERT_EQUAL(rs.tokenreviews, 1);
	CU_ASSERT_EQUAL(rs.sars, 1);
	/* The SubjectAccessReview carries the reviewed user, uid, groups and
	 * extra, and asks for get on the non-resource URL. */
	CU_ASSERT_PTR_NOT_NULL(strstr(rs.last_sar, "\"user\":\"scraper\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(rs.last_sar, "\"uid\":\"u-1\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(rs.last_sar, "\"groups\":[\"system:serviceaccounts\"]"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rs.last_sar, "\"extra\":{\"k\":[\"v\"]}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(rs.last_sar, "\"nonResourceAttributes\":{\"path\":\"\\/metrics\",\"verb\":\"get\"}") ||
			       strstr(rs.last_sar, "\"nonResourceAttributes\":{\"path\":\"/metrics\",\"verb\":\"get\"}"));
	buf_free(&why);
	buf_init(&why);
	CU_ASSERT_EQUAL(metrics_authz_kube(c, "nobody", "/metrics", &why), PRD_EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&why), "nobody"));
	buf_free(&why);
	buf_init(&why);
	CU_ASSERT_EQUAL(metrics_authz_kube(c, "stolen", "/metrics", &why), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&why), "invalid bearer token"));
	CU_ASSERT_EQUAL(rs.sars, 2); /* no access review for a token that does not authenticate */
	buf_free(&why);
	/* provreqd itself may not create TokenReviews: undecided (503), never allowed. */
	rs.fail_status = 403;
	buf_init(&why);
	CU_ASSERT_EQUAL(metrics_authz_kube(c, "good", "/metrics", &why), PRD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&why), "cannot review the token"));
	buf_free(&why);
	kube_client_free(c);
	kube_config_free(cfg);
	fake_stop(srv);
}

static const test_case cases[] = {
	{ "parse_addr", test_parse_addr },
	{ "endpoints", test_endpoints },
	{ "bind_errors_and_restart", test_bind_errors_and_restart },
	{ "ipv6_and_wildcard", test_ipv6_and_wildcard },
	{ "health_args", test_health_args },
	{ "loopback_addresses", test_loopback_addresses },
	{ "metrics_localhost", test_metrics_localhost },
	{ "metrics_tokenreview", test_metrics_tokenreview },
	{ "metrics_authz_kube", test_metrics_authz_kube },
	{ NULL, NULL }
};

int main(void)
{
	int rc;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = test_run("http", cases);
	curl_global_cleanup();
	return rc;
}

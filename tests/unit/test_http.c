/* The HTTP endpoint on an ephemeral port, queried with libcurl: /metrics,
 * /healthz and /readyz in passing and failing states, 404/405, address
 * parsing and bind errors. */
#include "testutil.h"
#include "ops/health.h"
#include "ops/http.h"
#include "ops/metrics.h"

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

/* GET (or another method) http://HOST:port/path; caller frees r->body. */
static void fetch(const char *host, int port, const char *method, const char *path, resp *r)
{
	CURL *c = curl_easy_init();
	char url[256];
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
	if(strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if(strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	CU_ASSERT_EQUAL(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
	if(curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
		snprintf(r->ctype, sizeof(r->ctype), "%s", ct);
	curl_easy_cleanup(c);
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

static const test_case cases[] = {
	{ "parse_addr", test_parse_addr },
	{ "endpoints", test_endpoints },
	{ "bind_errors_and_restart", test_bind_errors_and_restart },
	{ "ipv6_and_wildcard", test_ipv6_and_wildcard },
	{ "health_args", test_health_args },
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

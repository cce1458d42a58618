/* HTTP transport of the kube client: curl handles, TLS and credentials,
 * pacing, retries and Status decoding (or, for tests and simulations, an
 * in-process transport in curl's place: kube_client_opts.transport). The verbs are in verbs.c and the
 * watch in watch.c.
 *
 * Threading: the client is shared. Easy handles come from a mutex-guarded
 * free list; a curl share handle (connections, DNS, TLS sessions) guarded
 * by one pthread mutex per data kind lets every handle reuse every
 * connection. The token bucket has its own mutex. */
#include "kube/client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <config.h> /* autoconf: PACKAGE_VERSION */
#include "kube/client_int.h"
#include "ops/log.h"
#include "util/buf.h"
#include "util/str.h"

#define POOL_MAX 8
/* Connections the shared cache keeps (curl's default is 5, counting the
 * ones in use: the informers' long watches alone fill that, and every
 * other request then closed its connection when done, a new TLS handshake
 * for each; see CURLOPT_MAXCONNECTS). */
#define CONN_CACHE_MAX 64
#define BODY_MAX (1024u * 1024 * 1024)
#define RETRY_AFTER_MAX_S 60

struct kube_client {
	kube_config *cfg;
	kube_client_opts o;
	char *user_agent;
	char *field_manager;
	char *base_url;           /* scheme://host[:port] used in URLs */
	char *connect_to;         /* CURLOPT_CONNECT_TO entry for tls-server-name, or NULL */
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_mu;
	CURL *pool[POOL_MAX];
	int npool;
	pthread_mutex_t rl_mu;
	double tokens;
	int64_t rl_last_ns;
	unsigned long throttled;  /* requests that waited for the bucket */
	unsigned long requests;   /* HTTP requests sent (attempts) */
	/* Monotonic time after which no request is sent or kept running and
	 * nothing is retried (0 = none): set when the process shuts down. */
	_Atomic int64_t deadline_ns;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *ud)
{
	kube_client *c = ud;
	pthread_mutex_lock(&c->share_mu[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *ud)
{
	kube_client *c = ud;
	pthread_mutex_unlock(&c->share_mu[d]);
}

/* With tls-server-name the URL carries that name (so curl sends it as SNI
 * and verifies the certificate against it) and CONNECT_TO sends the
 * connection to the real host. */
static int build_urls(kube_client *c, prd_err *err)
{
	const char *srv = c->cfg->server;
	const char *hs = strstr(srv, "://");
	const char *host, *end, *port;
	char *h = NULL, *p = NULL;
	bool https;

	if(!hs)
		return prd_err_set(err, PRD_EINVAL, "server %s is not a URL", srv);
	https = str_starts_with(srv, "https://");
	host = hs + 3;
	end = strchr(host, '/');
	if(end)
		return prd_err_set(err, PRD_EINVAL, "server %s: a path prefix is not supported", srv);
	if(!c->cfg->tls_server_name) {
		c->base_url = str_dup(srv);
		return c->base_url ? 0 : prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(host[0] == '[') {
		const char *rb = strchr(host, ']');
		if(!rb)
			return prd_err_set(err, PRD_EINVAL, "server %s: bad IPv6 address", srv);
		h = str_ndup(host, (size_t)(rb - host + 1));
		port = rb[1] == ':' ? rb + 2 : NULL;
	} else {
		const char *colon = strchr(host, ':');
		h = colon ? str_ndup(host, (size_t)(colon - host)) : str_dup(host);
		port = colon ? colon + 1 : NULL;
	}
	p = str_dup(port ? port : (https ? "443" : "80"));
	if(h && p) {
		c->base_url = str_printf("%s://%s:%s", https ? "https" : "http", c->cfg->tls_server_name, p);
		c->connect_to = str_printf("%s:%s:%s:%s", c->cfg->tls_server_name, p, h, p);
	}
	free(h);
	free(p);
	if(!c->base_url || !c->connect_to)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	return 0;
}

int kube_client_new(kube_config *cfg, const kube_client_opts *opts, kube_client **out, prd_err *err)
{
	kube_client *c;
	int rc = 0;

	*out = NULL;
	if(!cfg && !(opts && opts->transport))
		return prd_err_set(err, PRD_EINVAL, "kube client: no configuration");
	/* An in-process transport needs no curl at all. */
	if(!(opts && opts->transport)) {
		pthread_once(&curl_once, curl_init_once);
		if(curl_init_rc != CURLE_OK)
			return prd_err_set(err, PRD_EIO, "curl_global_init: %s", curl_easy_strerror(curl_init_rc));
	}
	c = calloc(1, sizeof(*c));
	if(!c)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	c->cfg = cfg;
	if(opts)
		c->o = *opts;
	if(c->o.qps <= 0)
		c->o.qps = 50;
	if(c->o.burst <= 0)
		c->o.burst = 100;
	if(c->o.connect_timeout_ms <= 0)
		c->o.connect_timeout_ms = 10000;
	if(c->o.request_timeout_ms <= 0)
		c->o.request_timeout_ms = 60000;
	if(c->o.max_retries < 0)
		c->o.max_retries = 0;
	else if(c->o.max_retries == 0)
		c->o.max_retries = 5;
	if(!c->o.clock)
		c->o.clock = clk_real();
	c->user_agent = c->o.user_agent ? str_dup(c->o.user_agent) : str_dup("provreqd/" PACKAGE_VERSION);
	c->field_manager = str_dup(c->o.field_manager ? c->o.field_manager : "provreqd");
	c->o.user_agent = NULL;
	c->o.field_manager = NULL;
	for(int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&c->share_mu[i], NULL);
	pthread_mutex_init(&c->pool_mu, NULL);
	pthread_mutex_init(&c->rl_mu, NULL);
	c->tokens = c->o.burst;
	c->rl_last_ns = clk_mono(c->o.clock);
	if(!c->user_agent || !c->field_manager) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	if(c->o.transport)
		goto done;
	rc = build_urls(c, err);
	if(rc)
		goto done;
	c->share = curl_share_init();
	if(!c->share) {
		rc = prd_err_set(err, PRD_ENOMEM, "curl_share_init failed");
		goto done;
	}
	curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
done:
	if(rc) {
		kube_client_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void kube_client_free(kube_client *c)
{
	if(!c)
		return;
	for(int i = 0; i < c->npool; i++)
		curl_easy_cleanup(c->pool[i]);
	if(c->share)
		curl_share_cleanup(c->share);
	for(int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&c->share_mu[i]);
	pthread_mutex_destroy(&c->pool_mu);
	pthread_mutex_destroy(&c->rl_mu);
	free(c->user_agent);
	free(c->field_manager);
	free(c->base_url);
	free(c->connect_to);
	free(c);
}

kube_config *kube_client_config(kube_client *c)
{
	return c->cfg;
}

const char *kube__field_manager(const kube_client *c)
{
	return c->field_manager;
}

void kube_client_stats(kube_client *c, unsigned long *requests, unsigned long *throttled)
{
	pthread_mutex_lock(&c->rl_mu);
	if(requests)
		*requests = c->requests;
	if(throttled)
		*throttled = c->throttled;
	pthread_mutex_unlock(&c->rl_mu);
}

static CURL *handle_get(kube_client *c)
{
	CURL *h = NULL;
	pthread_mutex_lock(&c->pool_mu);
	if(c->npool > 0)
		h = c->pool[--c->npool];
	pthread_mutex_unlock(&c->pool_mu);
	if(h)
		curl_easy_reset(h);
	else
		h = curl_easy_init();
	return h;
}

static void handle_put(kube_client *c, CURL *h)
{
	if(!h)
		return;
	pthread_mutex_lock(&c->pool_mu);
	if(c->npool < POOL_MAX) {
		c->pool[c->npool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->pool_mu);
	if(h)
		curl_easy_cleanup(h);
}

void kube_client_set_deadline(kube_client *c, int64_t mono_ns)
{
	atomic_store(&c->deadline_ns, mono_ns);
}

static bool past_deadline(kube_client *c)
{
	int64_t d = atomic_load(&c->deadline_ns);
	return d > 0 && clk_mono(c->o.clock) >= d;
}

/* Tell the owner how many connections the transfer on h opened. */
static void count_connects(kube_client *c, CURL *h)
{
	long n = 0;
	if(c->o.connected && curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &n) == CURLE_OK && n > 0)
		c->o.connected(c->o.observe_ud, n);
}

/* Progress callback of an ordinary request: aborts it past the deadline. */
static int req_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return past_deadline(ud) ? 1 : 0;
}

/* Token bucket, client-go style: take a token, going into debt if none is
 * left, and sleep until the debt would have been refilled. Reserving under
 * the lock and sleeping outside it keeps waiters in arrival order. Both the
 * refill and the wait are on the client's clock, so with a fake clock the
 * pacing is exact and takes no real time. */
static void rate_wait(kube_client *c)
{
	int64_t now, wait = 0;

	pthread_mutex_lock(&c->rl_mu);
	now = clk_mono(c->o.clock);
	c->tokens += (double)(now - c->rl_last_ns) / PRD_NS_PER_SEC * c->o.qps;
	if(c->tokens > c->o.burst)
		c->tokens = c->o.burst;
	c->rl_last_ns = now;
	c->tokens -= 1.0;
	if(c->tokens < 0) {
		wait = (int64_t)(-c->tokens / c->o.qps * PRD_NS_PER_SEC);
		c->throttled++;
	}
	c->requests++;
	pthread_mutex_unlock(&c->rl_mu);
	clk_sleep(c->o.clock, wait);
}

typedef struct resp {
	buf body;
	int retry_after_s;
} resp;

static size_t write_body(char *ptr, size_t size, size_t n, void *ud)
{
	resp *r = ud;
	if(buf_append(&r->body, ptr, size * n))
		return 0;
	return size * n;
}

static size_t read_header(char *ptr, size_t size, size_t n, void *ud)
{
	resp *r = ud;
	size_t len = size * n;
	static const char key[] = "retry-after:";
	if(len > sizeof(key) && strncasecmp(ptr, key, sizeof(key) - 1) == 0) {
		char tmp[32];
		size_t vl = len - (sizeof(key) - 1);
		int64_t v;
		if(vl >= sizeof(tmp))
			vl = sizeof(tmp) - 1;
		memcpy(tmp, ptr + sizeof(key) - 1, vl);
		tmp[vl] = '\0';
		if(str_to_int64(str_trim(tmp), &v) == 0 && v >= 0)
			r->retry_after_s = v > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : (int)v;
	}
	return len;
}

/* Impersonate-User and one Impersonate-Group per group (kubectl --as,
 * --as-group). On failure the list is freed and *hl set to NULL. */
static int add_impersonation(struct curl_slist **hl, const kube_config *cfg)
{
	char *line = str_printf("Impersonate-User: %s", cfg->impersonate_user);
	struct curl_slist *nl = line ? curl_slist_append(*hl, line) : NULL;
	size_t i;

	free(line);
	for(i = 0; nl && cfg->impersonate_groups && cfg->impersonate_groups[i]; i++) {
		line = str_printf("Impersonate-Group: %s", cfg->impersonate_groups[i]);
		nl = line ? curl_slist_append(*hl, line) : NULL;
		free(line);
	}
	if(!nl) {
		curl_slist_free_all(*hl);
		*hl = NULL;
		return PRD_ENOMEM;
	}
	return 0;
}

/* The client certificate: the one the credentials carry (an exec plugin
 * may return one), else the kubeconfig's. curl copies both blobs. */
static void set_client_cert(const kube_config *cfg, CURL *h, const kube_credentials *cr)
{
	const char *cert = cr->client_cert_pem ? cr->client_cert_pem : cfg->client_cert_pem;
	size_t certlen = cr->client_cert_pem ? cr->client_cert_len : cfg->client_cert_len;
	const char *key = cr->client_cert_pem ? cr->client_key_pem : cfg->client_key_pem;
	size_t keylen = cr->client_cert_pem ? cr->client_key_len : cfg->client_key_len;

	if(cert && key) {
		struct curl_blob cb = {(void *)cert, certlen, CURL_BLOB_COPY};
		struct curl_blob kb = {(void *)key, keylen, CURL_BLOB_COPY};
		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	}
}

/* The request headers: Accept, Content-Type, the bearer token (or basic
 * auth set on the handle) and impersonation. Returns the list, which the
 * caller frees (clearing it: it may hold the token), or NULL when out of
 * memory. */
static struct curl_slist *build_headers(const kube_config *cfg, CURL *h, const kube_credentials *cr,
					const char *content_type)
{
	struct curl_slist *hl = NULL, *nl;
	char *auth = NULL;

	hl = curl_slist_append(hl, "Accept: application/json");
	if(hl && content_type) {
		char *ct = str_printf("Content-Type: %s", content_type);
		nl = ct ? curl_slist_append(hl, ct) : NULL;
		free(ct);
		if(!nl) {
			curl_slist_free_all(hl);
			hl = NULL;
		}
	}
	if(hl && cr->bearer) {
		auth = str_printf("Authorization: Bearer %s", cr->bearer);
		nl = auth ? curl_slist_append(hl, auth) : NULL;
		if(!nl) {
			curl_slist_free_all(hl);
			hl = NULL;
		}
	} else if(hl && cfg->username) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, cfg->username);
		curl_easy_setopt(h, CURLOPT_PASSWORD, cfg->password ? cfg->password : "");
	}
	if(hl && cfg->impersonate_user && add_impersonation(&hl, cfg))
		hl = NULL;
	if(auth) {
		explicit_bzero(auth, strlen(auth));
		free(auth);
	}
	return hl;
}

/* Options shared by ordinary requests and watches: URL, TLS, identity and
 * credentials. `hdrs` receives the header list the caller frees after the
 * transfer. */
static int setup_handle(kube_client *c, CURL *h, const char *path, const kube_credentials *cr,
			const char *content_type, struct curl_slist **hdrs, prd_err *err)
{
	const kube_config *cfg = c->cfg;
	struct curl_slist *l = NULL, *nl, *hl;
	char *url = str_printf("%s%s", c->base_url, path);
	int rc = 0;

	if(!url)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_SHARE, c->share);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->o.connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, (long)CONN_CACHE_MAX);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
	if(c->connect_to) {
		nl = curl_slist_append(NULL, c->connect_to);
		if(!nl) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			goto done;
		}
		/* Freed with the header list: link it after the headers. */
		curl_easy_setopt(h, CURLOPT_CONNECT_TO, nl);
		l = nl;
	}
	if(cfg->ca_pem) {
		struct curl_blob b = {cfg->ca_pem, cfg->ca_len, CURL_BLOB_NOCOPY};
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
	}
	if(cfg->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	set_client_cert(cfg, h, cr);
	/* The header list is built on a separate list so CONNECT_TO's entry
	 * (if any) is not sent as a header. */
	hl = build_headers(cfg, h, cr, content_type);
	if(!hl) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	hdrs[0] = hl;
done:
	hdrs[1] = l;
	free(url);
	return rc;
}

static void free_hdrs(struct curl_slist **hdrs)
{
	struct curl_slist *l;
	/* The bearer token is in one of these entries; clear it. */
	for(l = hdrs[0]; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(hdrs[0]);
	curl_slist_free_all(hdrs[1]);
	hdrs[0] = hdrs[1] = NULL;
}

static int curl_code_to_err(CURLcode cc)
{
	switch(cc) {
	case CURLE_OPERATION_TIMEDOUT: return PRD_ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY: return PRD_ENOMEM;
	default: return PRD_EIO;
	}
}

/* Transport failures after which no byte reached the server's handler, or
 * a GET that can simply be repeated. */
static bool curl_retryable(CURLcode cc)
{
	switch(cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_OPERATION_TIMEDOUT:
		return true;
	default:
		return false;
	}
}

static const char *status_reason_default(long code)
{
	switch(code) {
	case 400: return "BadRequest";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "NotFound";
	case 405: return "MethodNotAllowed";
	case 406: return "NotAcceptable";
	case 408: return "Timeout";
	case 409: return "Conflict";
	case 410: return "Expired";
	case 413: return "RequestEntityTooLarge";
	case 415: return "UnsupportedMediaType";
	case 422: return "Invalid";
	case 429: return "TooManyRequests";
	case 500: return "InternalError";
	case 503: return "ServiceUnavailable";
	case 504: return "Timeout";
	default: return "Unknown";
	}
}

int kube__status_decode(long http_code, const char *body, size_t len, int retry_after_s,
			kube_status *st)
{
	json_object *o = NULL, *v, *det;
	const char *reason = NULL, *message = NULL;
	long code = http_code;
	int ra = retry_after_s, rc;

	if(body && len) {
		json_tokener *tok = json_tokener_new();
		if(tok) {
			o = json_tokener_parse_ex(tok, body, (int)(len > INT32_MAX ? INT32_MAX : len));
			json_tokener_free(tok);
		}
		if(o && !(json_object_is_type(o, json_type_object) &&
			  json_object_object_get_ex(o, "kind", &v) &&
			  str_eq(json_object_get_string(v), "Status"))) {
			json_object_put(o);
			o = NULL;
		}
	}
	if(o) {
		if(json_object_object_get_ex(o, "reason", &v))
			reason = json_object_get_string(v);
		if(json_object_object_get_ex(o, "message", &v))
			message = json_object_get_string(v);
		if(json_object_object_get_ex(o, "code", &v) && json_object_get_int64(v) > 0 && !http_code)
			code = (long)json_object_get_int64(v);
		if(json_object_object_get_ex(o, "details", &det) &&
		   json_object_object_get_ex(det, "retryAfterSeconds", &v) && ra < 0)
			ra = json_object_get_int(v);
	}
	if(!reason || !*reason)
		reason = status_reason_default(code);
	switch(code) {
	case 400: rc = PRD_EINVAL; break;
	case 401:
	case 403: rc = PRD_EPERM; break;
	case 404: rc = PRD_ENOTFOUND; break;
	case 405:
	case 406:
	case 415: rc = PRD_EUNSUPPORTED; break;
	case 408:
	case 504: rc = PRD_ETIMEDOUT; break;
	case 409: rc = strcmp(reason, "AlreadyExists") == 0 ? PRD_EEXIST : PRD_ECONFLICT; break;
	case 410: rc = PRD_EGONE; break;
	case 413: rc = PRD_ERANGE; break;
	case 422: rc = PRD_EINVAL; break;
	case 429: rc = PRD_EAGAIN; break;
	default:
		if(code >= 500)
			rc = PRD_EAGAIN;
		else if(code >= 400)
			rc = PRD_EINVAL;
		else
			rc = PRD_EINTERNAL;
		break;
	}
	/* A Status with reason Expired/Gone inside another code still means
	 * "your resourceVersion is too old". */
	if(strcmp(reason, "Expired") == 0 || strcmp(reason, "Gone") == 0)
		rc = PRD_EGONE;
	if(st) {
		st->http_code = code;
		str_copy(st->reason, sizeof(st->reason), reason);
		str_copy(st->message, sizeof(st->message), message ? message : "");
		st->retry_after_s = ra > 0 ? ra : 0;
	}
	json_object_put(o);
	return rc;
}

/* Backoff before retry `attempt` (0-based): Retry-After when the server
 * gave one, else 200 ms doubling to 8 s with ±25 % jitter. */
static int64_t retry_delay_ns(int attempt, int retry_after_s)
{
	int64_t d;
	if(retry_after_s > 0)
		return (int64_t)retry_after_s * PRD_NS_PER_SEC;
	d = 200 * PRD_NS_PER_MS << (attempt < 6 ? attempt : 6);
	if(d > 8 * PRD_NS_PER_SEC)
		d = 8 * PRD_NS_PER_SEC;
	return d * 3 / 4 + (int64_t)(rand() % 1000) * (d / 2) / 1000;
}

static bool empty_status(const kube_status *st)
{
	return !st->reason[0];
}

static int json_parse_body(const buf *b, json_object **out, prd_err *err, const char *method,
			   const char *path)
{
	json_tokener *tok;
	json_object *o;
	enum json_tokener_error je;

	*out = NULL;
	if(b->len == 0)
		return 0;
	tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH * 4);
	if(!tok)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	o = json_tokener_parse_ex(tok, b->data, (int)b->len);
	je = json_tokener_get_error(tok);
	json_tokener_free(tok);
	if(!o || je != json_tokener_success) {
		json_object_put(o);
		return prd_err_set(err, PRD_EINVAL, "%s %s: answer is not JSON (%s)", method, path,
				   json_tokener_error_desc(je));
	}
	*out = o;
	return 0;
}

/* One request with its retries: what kube__request_ex was asked, plus the
 * answer being read. */
typedef struct req {
	kube_client *c;
	const char *method, *path, *content_type, *body;
	size_t body_len;
	bool idempotent;
	bool refreshed;           /* credentials refreshed once after a 401 */
	json_object **out;
	buf *raw;                 /* instead of out: the answer's bytes, unparsed */
	kube_status *st;
	prd_err *err;
	resp r;
	int no_answer;            /* the in-process transport's code when it got no answer (0: it did) */
} req;

/* What to do after an attempt. */
enum req_next {
	REQ_DONE,                 /* stop with the attempt's result */
	REQ_RETRY,                /* retry after a backoff, if allowed */
	REQ_AGAIN                 /* repeat at once (credentials refreshed) */
};

/* Transfer options of an ordinary request: timeout, callbacks, verb and
 * body. */
static void set_request_opts(req *q, CURL *h)
{
	kube_client *c = q->c;

	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->o.request_timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &q->r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, read_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &q->r);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, req_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, c);
	if(strcmp(q->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else {
		if(strcmp(q->method, "POST") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(q->body ? q->body_len : 0));
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body ? q->body : "");
	}
}

/* One attempt through the in-process transport (kube_client_opts): its
 * answer goes where curl's would, so everything after is the same; no
 * answer at all is q->no_answer. */
static void req_transport(req *q, long *code)
{
	kube_client *c = q->c;
	char *body = NULL;
	size_t len = 0;
	int64_t t0 = clk_mono(c->o.clock);
	int rc;

	*code = 0;
	rc = c->o.transport(c->o.transport_ud, q->method, q->path, q->body ? q->content_type : NULL, q->body,
			    q->body ? q->body_len : 0, code, &body, &len);
	if(*code <= 0) {
		*code = 0;
		q->no_answer = rc ? rc : PRD_EIO;
	} else if(body && len && buf_append(&q->r.body, body, len) && !q->r.body.failed) {
		q->r.body.failed = PRD_ENOMEM;
	}
	free(body);
	if(c->o.observe)
		c->o.observe(c->o.observe_ud, q->method, q->path, *code, clk_mono(c->o.clock) - t0);
}

/* One attempt: pacing, credentials, a pooled handle and the transfer.
 * Returns 0 with *cc and *code set once the transfer ran (the answer is in
 * q->r), or an error when nothing could be sent. */
static int req_send(req *q, CURLcode *cc, long *code)
{
	kube_client *c = q->c;
	kube_credentials cr;
	struct curl_slist *hdrs[2] = {NULL, NULL};
	CURL *h;
	int64_t t0;
	int rc;

	rate_wait(c);
	if(c->o.transport) {
		req_transport(q, code);
		*cc = CURLE_OK;
		return 0;
	}
	rc = kube_config_credentials(c->cfg, c->o.clock, false, &cr, q->err);
	if(rc) {
		prd_err_prefix(q->err, "%s %s: credentials", q->method, q->path);
		return rc;
	}
	h = handle_get(c);
	if(!h) {
		kube_credentials_clear(&cr);
		return prd_err_set(q->err, PRD_ENOMEM, "curl_easy_init failed");
	}
	rc = setup_handle(c, h, q->path, &cr, q->body ? q->content_type : NULL, hdrs, q->err);
	kube_credentials_clear(&cr);
	if(rc) {
		free_hdrs(hdrs);
		handle_put(c, h);
		return rc;
	}
	set_request_opts(q, h);
	t0 = clk_mono(clk_real());
	*cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
	count_connects(c, h);
	free_hdrs(hdrs);
	handle_put(c, h);
	/* A server that refuses a request early (401, 413, ...) may reset
	 * the stream while the body is still being sent; curl then
	 * reports a transfer error although the answer's status line
	 * arrived. The answer is what counts. */
	if(*cc != CURLE_OK && *code >= 400 && !q->r.body.failed)
		*cc = CURLE_OK;
	if(c->o.observe)
		c->o.observe(c->o.observe_ud, q->method, q->path, *cc == CURLE_OK ? *code : 0,
			     clk_mono(clk_real()) - t0);
	return 0;
}

/* An HTTP error answer: decode its Status, refresh the credentials once
 * after a 401, and say whether the request may be retried. */
static int req_error_answer(req *q, long code, enum req_next *next)
{
	int rc = kube__status_decode(code, q->r.body.data, q->r.body.len, q->r.retry_after_s, q->st);

	prd_err_set(q->err, rc, "%s %s: %ld %s: %s", q->method, q->path, code, q->st->reason,
		    q->st->message);
	if(code == 401 && !q->refreshed && q->c->cfg) {
		/* Rotated credentials: refresh once and repeat at once. */
		kube_credentials tmp;
		q->refreshed = true;
		if(kube_config_credentials(q->c->cfg, q->c->o.clock, true, &tmp, NULL) == 0) {
			kube_credentials_clear(&tmp);
			log_info("401 from the apiserver, credentials refreshed", "path", q->path);
			*next = REQ_AGAIN;
			return rc;
		}
	}
	/* 429 means the request was not processed: safe for any verb. */
	*next = code == 429 || (q->idempotent && code >= 500 && code != 501) ? REQ_RETRY : REQ_DONE;
	return rc;
}

/* The result of an attempt that ran: the decoded answer on success, else
 * an error and whether to retry. */
static int req_outcome(req *q, CURLcode cc, long code, enum req_next *next)
{
	int rc;

	*next = REQ_DONE;
	if(q->no_answer) {
		/* As a transfer that failed: a lost connection or answer. */
		prd_err_set(q->err, q->no_answer, "%s %s: no answer from the in-process transport", q->method,
			    q->path);
		if(q->idempotent)
			*next = REQ_RETRY;
		return q->no_answer;
	}
	if(cc == CURLE_ABORTED_BY_CALLBACK)
		return prd_err_set(q->err, PRD_ETIMEDOUT, "%s %s: aborted, the process is shutting down",
				   q->method, q->path);
	if(cc != CURLE_OK) {
		rc = q->r.body.failed == PRD_ERANGE ? PRD_ERANGE : curl_code_to_err(cc);
		prd_err_set(q->err, rc, "%s %s: %s", q->method, q->path,
			    q->r.body.failed == PRD_ERANGE ? "answer too large" : curl_easy_strerror(cc));
		if(q->idempotent && curl_retryable(cc))
			*next = REQ_RETRY;
		return rc;
	}
	if(q->r.body.failed)
		return prd_err_set(q->err, q->r.body.failed, "%s %s: out of memory reading the answer", q->method,
				   q->path);
	if(code >= 200 && code < 300) {
		q->st->http_code = code;
		if(q->raw) {
			/* Hand the body over; the request's own buffer starts
			 * empty again (and is freed empty). */
			buf t = *q->raw;
			*q->raw = q->r.body;
			q->r.body = t;
			buf_reset(&q->r.body);
			return 0;
		}
		return q->out ? json_parse_body(&q->r.body, q->out, q->err, q->method, q->path) : 0;
	}
	return req_error_answer(q, code, next);
}

/* Sleep before retry `attempt`, on the client's clock, in slices, so a
 * shutdown deadline set meanwhile ends the wait. */
static void req_backoff(req *q, int attempt, long code)
{
	int64_t d = retry_delay_ns(attempt, q->r.retry_after_s > 0 ? q->r.retry_after_s : q->st->retry_after_s);

	log_debug("retrying request", "method", q->method, "path", q->path, "code", LOGI(code), "attempt",
		  LOGI(attempt + 1), "delay_ms", LOGI(d / PRD_NS_PER_MS));
	while(d > 0 && atomic_load(&q->c->deadline_ns) == 0) {
		int64_t step = d < 50 * PRD_NS_PER_MS ? d : 50 * PRD_NS_PER_MS;
		clk_sleep(q->c->o.clock, step);
		d -= step;
	}
}

/* The retry loop of kube__request_ex and kube__request_raw. */
static int request_loop(req *q);

int kube__request_ex(kube_client *c, const char *method, const char *path, const char *content_type,
		     const char *body, size_t body_len, bool idempotent, json_object **out,
		     kube_status *st, prd_err *err)
{
	kube_status lst;
	req q = {.c = c, .method = method, .path = path, .content_type = content_type, .body = body,
		 .body_len = body_len, .idempotent = idempotent, .out = out, .st = st ? st : &lst, .err = err};

	if(out)
		*out = NULL;
	return request_loop(&q);
}

int kube__request_raw_ex(kube_client *c, const char *method, const char *path, const char *content_type,
			 const char *body, size_t body_len, bool idempotent, buf *out, kube_status *st,
			 prd_err *err)
{
	kube_status lst;
	req q = {.c = c, .method = method, .path = path, .content_type = content_type, .body = body,
		 .body_len = body_len, .idempotent = idempotent, .raw = out, .st = st ? st : &lst, .err = err};

	buf_reset(out);
	return request_loop(&q);
}

int kube__request_raw(kube_client *c, const char *path, buf *out, kube_status *st, prd_err *err)
{
	return kube__request_raw_ex(c, "GET", path, NULL, NULL, 0, true, out, st, err);
}

static int request_loop(req *qp)
{
	req q = *qp;
	kube_client *c = q.c;
	const char *method = q.method, *path = q.path;
	prd_err *err = q.err;
	int rc = 0, attempt = 0;

	memset(q.st, 0, sizeof(*q.st));
	buf_init_max(&q.r.body, BODY_MAX);
	for(;;) {
		CURLcode cc = CURLE_OK;
		long code = 0;
		enum req_next next;

		buf_reset(&q.r.body);
		q.r.body.failed = 0;
		q.r.retry_after_s = -1;
		q.no_answer = 0;
		memset(q.st, 0, sizeof(*q.st));
		if(past_deadline(c)) {
			rc = prd_err_set(err, PRD_ETIMEDOUT, "%s %s: not sent, the process is shutting down", method,
					 path);
			break;
		}
		rc = req_send(&q, &cc, &code);
		if(rc)
			break;
		rc = req_outcome(&q, cc, code, &next);
		if(next == REQ_AGAIN)
			continue;
		if(next != REQ_RETRY || attempt >= c->o.max_retries || atomic_load(&c->deadline_ns) > 0)
			break;
		req_backoff(&q, attempt, code);
		attempt++;
	}
	if(rc && empty_status(q.st) && q.st->http_code == 0)
		str_copy(q.st->message, sizeof(q.st->message), err ? err->msg : "");
	buf_free(&q.r.body);
	return rc;
}

/* Verbs the low-level calls retry on 5xx and transport failures. */
static bool safe_verb(const char *method)
{
	return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

int kube_request(kube_client *c, const char *method, const char *path, const char *content_type,
		 const char *body, size_t body_len, json_object **out, kube_status *st, prd_err *err)
{
	return kube__request_ex(c, method, path, content_type ? content_type : "application/json", body,
				body_len, safe_verb(method), out, st, err);
}

int kube_request_bytes(kube_client *c, const char *method, const char *path, const char *content_type,
		       const char *body, size_t body_len, char **out, size_t *out_len, kube_status *st,
		       prd_err *err)
{
	buf b;
	int rc;

	*out = NULL;
	*out_len = 0;
	buf_init_max(&b, BODY_MAX);
	rc = kube__request_raw_ex(c, method, path, content_type ? content_type : "application/json", body, body_len,
				  safe_verb(method), &b, st, err);
	if(rc == 0 && b.len > 0) {
		*out_len = b.len;
		*out = buf_detach(&b);
		if(!*out)
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	buf_free(&b);
	return rc;
}

/* Progress callback of a watch: aborts the transfer when the owner asks
 * or the client's deadline has passed. */
struct stream_ctx {
	const kube__stream *s;
	kube_client *c;
};

static int stream_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	const struct stream_ctx *x = ud;
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return past_deadline(x->c) || (x->s->cancelled && x->s->cancelled(x->s->cancel_ud)) ? 1 : 0;
}

/* Records the HTTP code from each status line ("HTTP/1.1 200 OK"), so the
 * write callback knows whether it is reading events or an error body. */
static size_t stream_header(char *ptr, size_t size, size_t n, void *ud)
{
	kube__stream *s = ud;
	size_t len = size * n;
	if(len > 12 && strncmp(ptr, "HTTP/", 5) == 0) {
		const char *sp = memchr(ptr, ' ', len);
		if(sp && (size_t)(sp - ptr) + 4 <= len)
			s->http_code = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
	}
	return len;
}

int kube__stream_get(kube_client *c, const char *path, kube__stream *s, prd_err *err)
{
	kube_credentials cr;
	struct curl_slist *hdrs[2] = {NULL, NULL};
	CURL *h = NULL;
	CURLcode cc;
	long code = 0;
	int rc;
	struct stream_ctx x = { s, c };

	s->http_code = 0;
	if(c->o.transport)
		return prd_err_set(err, PRD_EUNSUPPORTED, "WATCH %s: not over an in-process transport", path);
	rate_wait(c);
	rc = kube_config_credentials(c->cfg, c->o.clock, false, &cr, err);
	if(rc)
		return prd_err_prefix(err, "WATCH %s: credentials", path);
	/* A watch holds its connection for minutes: a handle of its own,
	 * not taken from the pool, still sharing the connection cache. */
	h = curl_easy_init();
	if(!h) {
		kube_credentials_clear(&cr);
		return prd_err_set(err, PRD_ENOMEM, "curl_easy_init failed");
	}
	rc = setup_handle(c, h, path, &cr, NULL, hdrs, err);
	kube_credentials_clear(&cr);
	if(rc)
		goto done;
	curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, NULL);
	/* No overall timeout: only a stalled connection ends the watch. */
	if(s->low_speed_time_s > 0) {
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, s->low_speed_time_s);
	}
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, stream_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, s->write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, s->write_ud);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, stream_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	count_connects(c, h);
	if(code)
		s->http_code = code;
	if(c->o.observe)
		c->o.observe(c->o.observe_ud, "WATCH", path, cc == CURLE_OK ? code : 0, 0);
	if(cc == CURLE_ABORTED_BY_CALLBACK)
		rc = 0;
	else if(cc == CURLE_WRITE_ERROR)
		rc = 1;
	else if(cc != CURLE_OK)
		rc = prd_err_set(err, curl_code_to_err(cc), "WATCH %s: %s", path, curl_easy_strerror(cc));
done:
	free_hdrs(hdrs);
	curl_easy_cleanup(h);
	return rc;
}

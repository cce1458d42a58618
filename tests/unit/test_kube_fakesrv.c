#include "test_kube_fakesrv.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct fake_srv {
	struct MHD_Daemon *d;
	fake_handler h;
	void *ud;
	int port;
	char url[64];
	atomic_int count;
	atomic_int conns;        /* TCP connections accepted */
	atomic_bool stopping;
};

typedef struct conn_state {
	char *body;
	size_t len;
} conn_state;

typedef struct stream_state {
	fake_srv *srv;
	fake_resp r;
	int next;
	size_t off;       /* bytes of chunks[next] already sent */
	int held_ms;
	bool delayed;     /* the pause before chunks[next] was taken */
} stream_state;

char *fake_strdup(const char *s)
{
	char *d = strdup(s);
	if(!d)
		abort();
	return d;
}

static void nap(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

typedef struct args_ctx {
	char *out;
	size_t cap;
	bool first;
} args_ctx;

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	args_ctx *a = cls;
	size_t n = strlen(a->out);
	snprintf(a->out + n, a->cap - n, "%c%s=%s", a->first ? '?' : '&', key, value ? value : "");
	a->first = false;
	return MHD_YES;
}

/* Collect every Impersonate-Group header (a request may carry several). */
static enum MHD_Result add_group(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	char *out = cls;
	size_t n = strlen(out);
	(void)kind;
	if(strcasecmp(key, "Impersonate-Group") == 0)
		snprintf(out + n, 512 - n, "%s%s", n ? "," : "", value ? value : "");
	return MHD_YES;
}

static ssize_t stream_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	stream_state *s = cls;
	while(s->next < s->r.nchunks) {
		const char *c = s->r.chunks[s->next];
		size_t left = strlen(c) - s->off, n;
		if(!s->delayed && s->r.chunk_delay_ms && s->next > 0)
			nap(s->r.chunk_delay_ms);
		s->delayed = true;
		if(left == 0) {
			s->next++;
			s->off = 0;
			s->delayed = false;
			continue;
		}
		n = left < max ? left : max;
		memcpy(buf, c + s->off, n);
		s->off += n;
		return (ssize_t)n;
	}
	while(s->held_ms < s->r.hold_ms && !atomic_load(&s->srv->stopping)) {
		nap(20);
		s->held_ms += 20;
	}
	return MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
	stream_state *s = cls;
	for(int i = 0; i < s->r.nchunks; i++)
		free(s->r.chunks[i]);
	free(s);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	fake_srv *srv = cls;
	conn_state *cs = *con_cls;
	struct MHD_Response *resp;
	fake_req req;
	fake_resp r;
	enum MHD_Result ret;
	const char *v;
	args_ctx a;

	if(!cs) {
		cs = calloc(1, sizeof(*cs));
		if(!cs)
			return MHD_NO;
		*con_cls = cs;
		return MHD_YES;
	}
	if(*upload_size) {
		char *nb = realloc(cs->body, cs->len + *upload_size + 1);
		if(!nb)
			return MHD_NO;
		memcpy(nb + cs->len, upload, *upload_size);
		cs->len += *upload_size;
		nb[cs->len] = '\0';
		cs->body = nb;
		*upload_size = 0;
		return MHD_YES;
	}
	memset(&req, 0, sizeof(req));
	memset(&r, 0, sizeof(r));
	snprintf(req.method, sizeof(req.method), "%s", method);
	snprintf(req.url, sizeof(req.url), "%s", url);
	a.out = req.url;
	a.cap = sizeof(req.url);
	a.first = true;
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_arg, &a);
	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	snprintf(req.auth, sizeof(req.auth), "%s", v ? v : "");
	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
	snprintf(req.content_type, sizeof(req.content_type), "%s", v ? v : "");
	v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Impersonate-User");
	snprintf(req.impersonate_user, sizeof(req.impersonate_user), "%s", v ? v : "");
	MHD_get_connection_values(conn, MHD_HEADER_KIND, add_group, req.impersonate_groups);
	req.body = cs->body ? cs->body : (char *)"";
	req.body_len = cs->len;
	r.status = 200;
	atomic_fetch_add(&srv->count, 1);
	srv->h(srv->ud, &req, &r);
	if(r.nchunks > 0) {
		stream_state *s = calloc(1, sizeof(*s));
		if(!s)
			abort();
		s->srv = srv;
		s->r = r;
		free(r.body);
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256, stream_cb, s, stream_free);
	} else {
		const char *b = r.body ? r.body : "";
		resp = MHD_create_response_from_buffer(strlen(b), (void *)b, MHD_RESPMEM_MUST_COPY);
		free(r.body);
	}
	if(!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if(r.retry_after[0])
		MHD_add_response_header(resp, "Retry-After", r.retry_after);
	ret = MHD_queue_response(conn, (unsigned)r.status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		      enum MHD_RequestTerminationCode toe)
{
	conn_state *cs = *con_cls;
	if(cs) {
		free(cs->body);
		free(cs);
		*con_cls = NULL;
	}
}

static void notify_conn(void *cls, struct MHD_Connection *conn, void **socket_context,
			enum MHD_ConnectionNotificationCode toe)
{
	fake_srv *s = cls;
	(void)conn;
	(void)socket_context;
	if(toe == MHD_CONNECTION_NOTIFY_STARTED)
		atomic_fetch_add(&s->conns, 1);
}

fake_srv *fake_start(fake_handler h, void *ud)
{
	fake_srv *s = calloc(1, sizeof(*s));
	const union MHD_DaemonInfo *info;
	struct sockaddr_in sa;

	if(!s)
		return NULL;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = 0;
	s->h = h;
	s->ud = ud;
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
					MHD_USE_ERROR_LOG,
				0, NULL, NULL, handle, s, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
				MHD_OPTION_NOTIFY_CONNECTION, notify_conn, s,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
	if(!s->d) {
		free(s);
		return NULL;
	}
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : 0;
	snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", s->port);
	return s;
}

int fake_port(const fake_srv *s)
{
	return s->port;
}

const char *fake_url(const fake_srv *s)
{
	return s->url;
}

int fake_count(fake_srv *s)
{
	return atomic_load(&s->count);
}

int fake_connections(fake_srv *s)
{
	return atomic_load(&s->conns);
}

void fake_stop(fake_srv *s)
{
	if(!s)
		return;
	atomic_store(&s->stopping, true);
	MHD_stop_daemon(s->d);
	free(s);
}

/* ---- in-memory object store ---------------------------------------------- */

#include <json-c/json.h>

#define STORE_MAX 512

struct fake_store {
	pthread_mutex_t mu;
	char *paths[STORE_MAX];
	json_object *objs[STORE_MAX];
	int n;
	long rv;
	int counts[5];
	int fail_status, fail_n;
	char fail_method[8];
};

static const char *methods[5] = {"GET", "POST", "PUT", "PATCH", "DELETE"};

fake_store *fake_store_new(void)
{
	fake_store *st = calloc(1, sizeof(*st));
	if(!st)
		abort();
	pthread_mutex_init(&st->mu, NULL);
	return st;
}

void fake_store_free(fake_store *st)
{
	for(int i = 0; i < st->n; i++) {
		free(st->paths[i]);
		json_object_put(st->objs[i]);
	}
	pthread_mutex_destroy(&st->mu);
	free(st);
}

static int store_find(fake_store *st, const char *path)
{
	for(int i = 0; i < st->n; i++)
		if(strcmp(st->paths[i], path) == 0)
			return i;
	return -1;
}

static char *store_status(int code, const char *reason, const char *msg)
{
	char b[512];
	snprintf(b, sizeof(b), "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
			       "\"message\":\"%s\",\"reason\":\"%s\",\"code\":%d}", msg, reason, code);
	return fake_strdup(b);
}

static void set_rv(fake_store *st, json_object *o)
{
	json_object *meta;
	char rv[32];
	if(!json_object_object_get_ex(o, "metadata", &meta)) {
		meta = json_object_new_object();
		json_object_object_add(o, "metadata", meta);
	}
	snprintf(rv, sizeof(rv), "%ld", ++st->rv);
	json_object_object_add(meta, "resourceVersion", json_object_new_string(rv));
}

static void merge(json_object *dst, json_object *patch)
{
	json_object_object_foreach(patch, k, v) {
		json_object *cur;
		if(json_object_is_type(v, json_type_null))
			json_object_object_del(dst, k);
		else if(json_object_is_type(v, json_type_object) && json_object_object_get_ex(dst, k, &cur) &&
			json_object_is_type(cur, json_type_object))
			merge(cur, v);
		else
			json_object_object_add(dst, k, json_object_get(v));
	}
}

void fake_store_handler(void *ud, const fake_req *rq, fake_resp *r)
{
	fake_store *st = ud;
	char path[2048], *q;
	json_object *body = NULL;
	int i;

	snprintf(path, sizeof(path), "%s", rq->url);
	q = strchr(path, '?');
	if(q)
		*q = '\0';
	pthread_mutex_lock(&st->mu);
	for(int m = 0; m < 5; m++)
		if(strcmp(rq->method, methods[m]) == 0)
			st->counts[m]++;
	if(st->fail_n > 0 && (!st->fail_method[0] || strcmp(st->fail_method, rq->method) == 0)) {
		st->fail_n--;
		r->status = st->fail_status;
		r->body = store_status(st->fail_status,
				       st->fail_status == 500 ? "InternalError" : st->fail_status == 409 ? "Conflict" : "Failure",
				       "injected");
		goto done;
	}
	if(rq->body_len)
		body = json_tokener_parse(rq->body);
	if(strcmp(rq->method, "POST") == 0) {
		json_object *meta, *name;
		char full[2300];
		if(!body || !json_object_object_get_ex(body, "metadata", &meta) ||
		   !json_object_object_get_ex(meta, "name", &name)) {
			r->status = 422;
			r->body = store_status(422, "Invalid", "metadata.name: Required value");
			goto done;
		}
		snprintf(full, sizeof(full), "%s/%s", path, json_object_get_string(name));
		if(store_find(st, full) >= 0) {
			r->status = 409;
			r->body = store_status(409, "AlreadyExists", "already exists");
			goto done;
		}
		if(st->n == STORE_MAX)
			abort();
		set_rv(st, body);
		st->paths[st->n] = fake_strdup(full);
		st->objs[st->n++] = json_object_get(body);
		r->status = 201;
		r->body = fake_strdup(json_object_to_json_string(body));
		goto done;
	}
	i = store_find(st, path);
	if(i < 0) {
		r->status = 404;
		r->body = store_status(404, "NotFound", "not found");
		goto done;
	}
	if(strcmp(rq->method, "GET") == 0) {
		r->body = fake_strdup(json_object_to_json_string(st->objs[i]));
	} else if(strcmp(rq->method, "PUT") == 0) {
		json_object *m1, *m2, *rv1, *rv2;
		if(!body) {
			r->status = 400;
			r->body = store_status(400, "BadRequest", "no body");
			goto done;
		}
		json_object_object_get_ex(body, "metadata", &m1);
		json_object_object_get_ex(st->objs[i], "metadata", &m2);
		if(json_object_object_get_ex(m1, "resourceVersion", &rv1) &&
		   json_object_object_get_ex(m2, "resourceVersion", &rv2) &&
		   strcmp(json_object_get_string(rv1), json_object_get_string(rv2)) != 0) {
			r->status = 409;
			r->body = store_status(409, "Conflict", "the object has been modified");
			goto done;
		}
		set_rv(st, body);
		json_object_put(st->objs[i]);
		st->objs[i] = json_object_get(body);
		r->body = fake_strdup(json_object_to_json_string(body));
	} else if(strcmp(rq->method, "PATCH") == 0) {
		if(!body) {
			r->status = 400;
			r->body = store_status(400, "BadRequest", "no body");
			goto done;
		}
		merge(st->objs[i], body);
		set_rv(st, st->objs[i]);
		r->body = fake_strdup(json_object_to_json_string(st->objs[i]));
	} else if(strcmp(rq->method, "DELETE") == 0) {
		free(st->paths[i]);
		json_object_put(st->objs[i]);
		st->paths[i] = st->paths[st->n - 1];
		st->objs[i] = st->objs[st->n - 1];
		st->n--;
		r->body = fake_strdup("{\"kind\":\"Status\",\"status\":\"Success\"}");
	}
done:
	pthread_mutex_unlock(&st->mu);
	json_object_put(body);
}

int fake_store_count(fake_store *st, const char *method)
{
	int n = 0;
	pthread_mutex_lock(&st->mu);
	for(int m = 0; m < 5; m++)
		if(strcmp(method, methods[m]) == 0)
			n = st->counts[m];
	pthread_mutex_unlock(&st->mu);
	return n;
}

void fake_store_fail(fake_store *st, int status, int n)
{
	pthread_mutex_lock(&st->mu);
	st->fail_status = status;
	st->fail_n = n;
	st->fail_method[0] = '\0';
	pthread_mutex_unlock(&st->mu);
}

void fake_store_fail_on(fake_store *st, const char *method, int status, int n)
{
	pthread_mutex_lock(&st->mu);
	st->fail_status = status;
	st->fail_n = n;
	snprintf(st->fail_method, sizeof(st->fail_method), "%s", method);
	pthread_mutex_unlock(&st->mu);
}

char *fake_store_get(fake_store *st, const char *path)
{
	char *s = NULL;
	int i;
	pthread_mutex_lock(&st->mu);
	i = store_find(st, path);
	if(i >= 0)
		s = fake_strdup(json_object_to_json_string(st->objs[i]));
	pthread_mutex_unlock(&st->mu);
	return s;
}

int fake_store_len(fake_store *st, const char *prefix)
{
	int n = 0;
	pthread_mutex_lock(&st->mu);
	for(int i = 0; i < st->n; i++)
		if(strncmp(st->paths[i], prefix, strlen(prefix)) == 0)
			n++;
	pthread_mutex_unlock(&st->mu);
	return n;
}

#include "kube/client.h"
#include "testutil.h"

int fake_client(const fake_srv *s, const kube_client_opts *o, kube_config **cfg, kube_client **c)
{
	static int seq;
	char kc[700];
	prd_err e;
	FILE *fp;
	int rc;

	snprintf(kc, sizeof(kc), "%s/fake-client-%d", test_tmpdir(), ++seq);
	fp = fopen(kc, "w");
	if(!fp)
		return PRD_EIO;
	fprintf(fp, "current-context: c\nclusters:\n- name: a\n  cluster: {server: '%s'}\n"
		    "users:\n- name: u\n  user: {token: unit-test-token}\n"
		    "contexts:\n- name: c\n  context: {cluster: a, user: u}\n", s->url);
	fclose(fp);
	rc = kube_config_load(kc, NULL, cfg, &e);
	if(rc)
		return rc;
	rc = kube_client_new(*cfg, o, c, &e);
	if(rc) {
		kube_config_free(*cfg);
		*cfg = NULL;
	}
	return rc;
}

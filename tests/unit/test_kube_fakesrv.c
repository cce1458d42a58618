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
#include <time.h>

struct fake_srv {
	struct MHD_Daemon *d;
	fake_handler h;
	void *ud;
	int port;
	char url[64];
	atomic_int count;
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

void fake_stop(fake_srv *s)
{
	if(!s)
		return;
	atomic_store(&s->stopping, true);
	MHD_stop_daemon(s->d);
	free(s);
}

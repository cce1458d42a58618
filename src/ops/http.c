/* The operational HTTP endpoint (libmicrohttpd): /metrics, /healthz and
 * /readyz, with /metrics access control. */
#include "ops/http.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "ops/procstat.h"
#include "util/buf.h"
#include "util/str.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result;
#else
typedef int mhd_result;
#endif

struct http_server {
	struct MHD_Daemon *d;
	health *h;
	int port;
	http_opts o;
};

int http_access_parse(const char *s, enum http_access *out)
{
	if(!s)
		return PRD_EINVAL;
	if(strcmp(s, "open") == 0)
		*out = HTTP_ACCESS_OPEN;
	else if(strcmp(s, "localhost") == 0)
		*out = HTTP_ACCESS_LOCALHOST;
	else if(strcmp(s, "tokenreview") == 0)
		*out = HTTP_ACCESS_TOKENREVIEW;
	else
		return PRD_EINVAL;
	return PRD_OK;
}

bool http_addr_is_loopback(const struct sockaddr *sa)
{
	if(!sa)
		return false;
	if(sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if(sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if(IN6_IS_ADDR_LOOPBACK(a))
			return true;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return false;
}

int http_parse_addr(const char *addr, char *host, size_t hostlen, int *port, prd_err *err)
{
	const char *colon, *hs, *he;
	int64_t p;

	if(!addr || !*addr)
		return prd_err_set(err, PRD_EINVAL, "empty address (want HOST:PORT, :PORT or [IPV6]:PORT)");
	if(addr[0] == '[') {
		he = strchr(addr, ']');
		if(!he)
			return prd_err_set(err, PRD_EINVAL, "address '%s': missing ']'", addr);
		hs = addr + 1;
		colon = he + 1;
		if(*colon != ':')
			return prd_err_set(err, PRD_EINVAL, "address '%s': missing ':PORT' after ']'", addr);
		if(he == hs)
			return prd_err_set(err, PRD_EINVAL, "address '%s': empty IPv6 address in brackets", addr);
	} else {
		colon = strrchr(addr, ':');
		if(!colon)
			return prd_err_set(err, PRD_EINVAL, "address '%s': missing ':PORT'", addr);
		hs = addr;
		he = colon;
		if(memchr(hs, ':', (size_t)(he - hs)))
			return prd_err_set(err, PRD_EINVAL, "address '%s': put an IPv6 address in brackets, e.g. [::1]:8080",
					   addr);
	}
	if(str_to_int64(colon + 1, &p) != PRD_OK || p < 0 || p > 65535)
		return prd_err_set(err, PRD_EINVAL, "address '%s': port '%s' is not a number from 0 to 65535", addr,
				   colon + 1);
	if((size_t)(he - hs) >= hostlen)
		return prd_err_set(err, PRD_EINVAL, "address '%s': host name too long", addr);
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = '\0';
	*port = (int)p;
	return PRD_OK;
}

/* Open a listening socket for host:port. The wildcard address prefers an
 * IPv6 socket that also accepts IPv4, and falls back to IPv4 where the
 * kernel has no IPv6. Returns the fd or -1 with the reason in err. */
static int listen_on(const char *addr, const char *host, int port, prd_err *err)
{
	struct addrinfo hints, *res = NULL, *ai;
	char pstr[8];
	int fd = -1, gai, saved = 0, pass;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(pstr, sizeof(pstr), "%d", port);
	gai = getaddrinfo(*host ? host : NULL, pstr, &hints, &res);
	if(gai != 0)
		return prd_err_set(err, PRD_EIO, "listen on %s: %s", addr, gai_strerror(gai)), -1;
	/* Pass 0 tries IPv6 results, pass 1 the rest, so "::" wins over
	 * "0.0.0.0" for the wildcard. */
	for(pass = 0; pass < 2 && fd < 0; pass++) {
		for(ai = res; ai && fd < 0; ai = ai->ai_next) {
			int one = 1, zero = 0;
			if((ai->ai_family == AF_INET6) != (pass == 0))
				continue;
			fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
			if(fd < 0) {
				saved = errno;
				continue;
			}
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if(ai->ai_family == AF_INET6 && !*host)
				setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			if(bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
				saved = errno;
				close(fd);
				fd = -1;
			}
		}
	}
	freeaddrinfo(res);
	if(fd < 0)
		prd_err_set(err, PRD_EIO, "listen on %s: %s", addr, strerror(saved ? saved : EADDRNOTAVAIL));
	return fd;
}

static int bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if(getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return -1;
	if(ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while(n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	log_warn("http server", "error", msg);
}

/* Queue `b` (consumed) as the answer. */
static mhd_result reply(struct MHD_Connection *conn, unsigned code, const char *ctype, buf *b)
{
	struct MHD_Response *r;
	mhd_result ret;
	size_t len = b->len;
	char *body = buf_detach(b);

	if(!body) {
		static const char oom[] = "out of memory\n";
		r = MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
		code = MHD_HTTP_INTERNAL_SERVER_ERROR;
		ctype = "text/plain; charset=utf-8";
	} else {
#if MHD_VERSION >= 0x00097100
		r = MHD_create_response_from_buffer_with_free_callback(len, body, free);
#else
		r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
#endif
		if(!r)
			free(body);
	}
	if(!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

/* May this connection read /metrics? 0 = yes; else the status to answer,
 * with the reason in b. */
static unsigned metrics_refusal(http_server *s, struct MHD_Connection *conn, buf *b)
{
	const union MHD_ConnectionInfo *ci;
	const char *auth;
	int rc;

	switch(s->o.metrics_access) {
	case HTTP_ACCESS_OPEN:
		return 0;
	case HTTP_ACCESS_LOCALHOST:
		ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if(ci && http_addr_is_loopback(ci->client_addr))
			return 0;
		buf_append_str(b, "forbidden: /metrics is served to localhost only (--metrics-access=localhost)\n");
		return MHD_HTTP_FORBIDDEN;
	case HTTP_ACCESS_TOKENREVIEW:
		auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
		if(!auth || strncasecmp(auth, "Bearer ", 7) != 0 || !auth[7]) {
			buf_append_str(b, "unauthorized: a bearer token is required (--metrics-access=tokenreview)\n");
			return MHD_HTTP_UNAUTHORIZED;
		}
		rc = s->o.authz(s->o.authz_ud, auth + 7, "/metrics", b);
		if(rc == PRD_OK)
			return 0;
		buf_append_char(b, '\n');
		return rc == PRD_EPERM ? MHD_HTTP_FORBIDDEN
		       : rc == PRD_EINVAL ? MHD_HTTP_UNAUTHORIZED : MHD_HTTP_SERVICE_UNAVAILABLE;
	}
	return MHD_HTTP_FORBIDDEN;
}

/* One request: every path answers on the first call, so there is no
 * per-connection state. */
static mhd_result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			 const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	http_server *s = cls;
	static const char text[] = "text/plain; charset=utf-8";
	unsigned code = MHD_HTTP_OK;
	const char *ctype = text;
	buf b;
	(void)version;
	(void)upload_data;
	(void)con_cls;

	buf_init(&b);
	if(strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		*upload_data_size = 0;
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
		buf_printf(&b, "method %s not allowed\n", method);
	} else if(strcmp(url, "/metrics") == 0 && (code = metrics_refusal(s, conn, &b)) != 0) {
		/* refused; b says why */
	} else if(strcmp(url, "/metrics") == 0) {
		code = MHD_HTTP_OK;
		ctype = METRICS_CONTENT_TYPE;
		procstat_update();
		if(metrics_render(&b) != PRD_OK) {
			buf_free(&b);
			buf_init(&b);
			code = MHD_HTTP_INTERNAL_SERVER_ERROR;
			ctype = text;
			buf_append_str(&b, "out of memory\n");
		}
	} else if(strcmp(url, "/healthz") == 0) {
		if(health_live(s->h, &b)) {
			buf_append_str(&b, "ok\n");
		} else {
			code = MHD_HTTP_INTERNAL_SERVER_ERROR;
			buf_append_char(&b, '\n');
		}
	} else if(strcmp(url, "/readyz") == 0) {
		if(health_ready(s->h, &b)) {
			buf_append_str(&b, "ok\n");
			health_notes(s->h, &b);
		} else {
			code = MHD_HTTP_SERVICE_UNAVAILABLE;
		}
	} else {
		code = MHD_HTTP_NOT_FOUND;
		buf_append_str(&b, "not found (try /metrics, /healthz, /readyz)\n");
	}
	if(code != MHD_HTTP_OK)
		log_debug("http request refused", "method", method, "path", url, "code", LOGI(code));
	return reply(conn, code, ctype, &b);
}

int http_start(const char *addr, health *h, http_server **out, prd_err *err)
{
	return http_start_opts(addr, h, NULL, out, err);
}

int http_start_opts(const char *addr, health *h, const http_opts *o, http_server **out, prd_err *err)
{
	static const http_opts open_access = { HTTP_ACCESS_OPEN, NULL, NULL };
	char host[256];
	int port, fd, rc;
	http_server *s;

	*out = NULL;
	if(!o)
		o = &open_access;
	if(o->metrics_access == HTTP_ACCESS_TOKENREVIEW && !o->authz)
		return prd_err_set(err, PRD_EINVAL, "--metrics-access=tokenreview needs an authorizer");
	if((rc = http_parse_addr(addr, host, sizeof(host), &port, err)) != PRD_OK)
		return rc;
	fd = listen_on(addr, host, port, err);
	if(fd < 0)
		return PRD_EIO;
	s = calloc(1, sizeof(*s));
	if(!s) {
		close(fd);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	s->h = h;
	s->o = *o;
	s->port = bound_port(fd);
	s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, s,
				MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
				MHD_OPTION_END);
	if(!s->d) {
		close(fd);
		free(s);
		return prd_err_set(err, PRD_EIO, "listen on %s: the HTTP server did not start", addr);
	}
	log_info("http endpoint listening", "addr", addr, "port", LOGI(s->port), "metrics_access",
		 o->metrics_access == HTTP_ACCESS_OPEN ? "open"
		 : o->metrics_access == HTTP_ACCESS_LOCALHOST ? "localhost" : "tokenreview");
	*out = s;
	return PRD_OK;
}

int http_port(const http_server *s)
{
	return s ? s->port : -1;
}

void http_stop(http_server *s)
{
	if(!s)
		return;
	MHD_stop_daemon(s->d); /* also closes the listening socket */
	free(s);
}

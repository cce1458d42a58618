/* The operational HTTP endpoint (libmicrohttpd): /metrics, /healthz,
 * /readyz; 404 for any other path, 405 for methods other than GET/HEAD.
 *
 *   /metrics  the metrics registry in Prometheus text format 0.0.4, to
 *             whom http_opts.metrics_access allows
 *   /healthz  200 "ok" while health_live(); else 500 with the reason
 *   /readyz   200 "ok" while health_ready(); else 503 listing each failing
 *             check as "NAME: reason"
 *
 * Ownership and threads: http_start() returns a server the caller stops
 * and frees with http_stop(). The server answers on its own thread
 * (libmicrohttpd's internal polling thread); the `health` object is
 * borrowed and must outlive the server. http_stop() returns after that
 * thread has ended and the listening socket is closed. */
#ifndef PRD_OPS_HTTP_H
#define PRD_OPS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "ops/health.h"
#include "util/buf.h"
#include "util/err.h"

typedef struct http_server http_server;

/* Who may read /metrics (--metrics-access). /healthz and /readyz answer
 * everyone in every mode: the kubelet's probes carry no token and come
 * from the node's address. */
enum http_access {
	HTTP_ACCESS_OPEN = 0,      /* anyone who reaches the port */
	HTTP_ACCESS_LOCALHOST,     /* connections from a loopback address only; 403 otherwise */
	HTTP_ACCESS_TOKENREVIEW    /* a bearer token `authz` accepts; 401 without or with a bad one, 403 denied */
};

/* Decide whether the holder of `token` may GET `path`. Returns 0 (allowed),
 * PRD_EPERM with `why` saying who was denied (403), PRD_EINVAL when the
 * token does not authenticate (401), anything else when no decision could
 * be made (503, so a scrape fails visibly rather than passing). Called on
 * the server's thread, one request at a time. */
typedef int (*http_authz_fn)(void *ud, const char *token, const char *path, buf *why);

typedef struct http_opts {
	enum http_access metrics_access;
	http_authz_fn authz;       /* required for HTTP_ACCESS_TOKENREVIEW */
	void *authz_ud;            /* borrowed; must outlive the server */
} http_opts;

/* Parse a --metrics-access value ("open", "localhost", "tokenreview"). */
int http_access_parse(const char *s, enum http_access *out);

/* A connection from this address counts as local: 127.0.0.0/8, ::1 and
 * IPv4-mapped 127.0.0.0/8. */
bool http_addr_is_loopback(const struct sockaddr *sa);

/* Parse "HOST:PORT", ":PORT" (every address), "[V6ADDR]:PORT". The host is
 * copied into `host` (size hostlen; "" for every address, brackets
 * removed). Port 0 asks for an ephemeral port. PRD_EINVAL with a message
 * naming the problem. */
int http_parse_addr(const char *addr, char *host, size_t hostlen, int *port, prd_err *err);

/* Listen on `addr` and serve. Bind failures (address in use, permission,
 * unknown host) return PRD_EIO with "listen on ADDR: reason". http_start
 * serves /metrics to everyone; http_start_opts as `o` says (PRD_EINVAL
 * for tokenreview without authz). */
int http_start(const char *addr, health *h, http_server **out, prd_err *err);
int http_start_opts(const char *addr, health *h, const http_opts *o, http_server **out, prd_err *err);

/* The port actually bound (useful after asking for port 0). */
int http_port(const http_server *s);

/* Stop serving, close the socket and free s. NULL is allowed. */
void http_stop(http_server *s);

#endif

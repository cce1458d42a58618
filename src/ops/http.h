/* The operational HTTP endpoint (libmicrohttpd): /metrics, /healthz,
 * /readyz; 404 for any other path, 405 for methods other than GET/HEAD.
 *
 *   /metrics  the metrics registry in Prometheus text format 0.0.4
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

#include <stddef.h>

#include "ops/health.h"
#include "util/err.h"

typedef struct http_server http_server;

/* Parse "HOST:PORT", ":PORT" (every address), "[V6ADDR]:PORT". The host is
 * copied into `host` (size hostlen; "" for every address, brackets
 * removed). Port 0 asks for an ephemeral port. PRD_EINVAL with a message
 * naming the problem. */
int http_parse_addr(const char *addr, char *host, size_t hostlen, int *port, prd_err *err);

/* Listen on `addr` and serve. Bind failures (address in use, permission,
 * unknown host) return PRD_EIO with "listen on ADDR: reason". */
int http_start(const char *addr, health *h, http_server **out, prd_err *err);

/* The port actually bound (useful after asking for port 0). */
int http_port(const http_server *s);

/* Stop serving, close the socket and free s. NULL is allowed. */
void http_stop(http_server *s);

#endif

/* A tiny loopback HTTP server (libmicrohttpd) for the kube client's unit
 * tests: each request is handed to a handler that fills in the answer,
 * optionally as a stream of chunks sent with pauses (watches). */
#ifndef PRD_TEST_KUBE_FAKESRV_H
#define PRD_TEST_KUBE_FAKESRV_H

#include <stddef.h>

#include "kube/client.h"

typedef struct fake_req {
	char method[16];
	char url[2048];          /* path?query, query values decoded */
	char auth[512];          /* Authorization header or "" */
	char content_type[128];
	char impersonate_user[256];   /* Impersonate-User header or "" */
	char impersonate_groups[512]; /* every Impersonate-Group, joined with ',' */
	char *body;              /* NUL-terminated request body (borrowed) */
	size_t body_len;
} fake_req;

#define FAKE_MAX_CHUNKS 32

typedef struct fake_resp {
	int status;              /* default 200 */
	char *body;              /* malloc'd; the server frees it */
	char retry_after[16];    /* Retry-After header if non-empty */
	/* Streaming: when nchunks > 0 the body is ignored and these are sent
	 * one by one, chunk_delay_ms apart, then the stream is held open for
	 * hold_ms (or until the server stops) and closed. */
	char *chunks[FAKE_MAX_CHUNKS]; /* malloc'd; the server frees them */
	int nchunks;
	int chunk_delay_ms;
	int hold_ms;
} fake_resp;

typedef void (*fake_handler)(void *ud, const fake_req *req, fake_resp *resp);

typedef struct fake_srv fake_srv;

fake_srv *fake_start(fake_handler h, void *ud);
int fake_port(const fake_srv *s);
/* "http://127.0.0.1:PORT" (static buffer inside s). */
const char *fake_url(const fake_srv *s);
/* Requests handled so far. */
int fake_count(fake_srv *s);
/* TCP connections accepted so far. */
int fake_connections(fake_srv *s);
void fake_stop(fake_srv *s);

/* strdup that aborts the test program on failure. */
char *fake_strdup(const char *s);


/* An in-memory object store behind the fake server: enough of the
 * apiserver's semantics for the recorder and lease tests (create with
 * AlreadyExists, get with NotFound, PUT with resourceVersion Conflict,
 * merge PATCH, DELETE). Objects are keyed by their URL path. */
typedef struct fake_store fake_store;

fake_store *fake_store_new(void);
void fake_store_free(fake_store *st);
/* The handler to pass to fake_start with the store as ud. */
void fake_store_handler(void *ud, const fake_req *req, fake_resp *resp);
/* Requests by method ("GET", "POST", "PUT", "PATCH", "DELETE"). */
int fake_store_count(fake_store *st, const char *method);
/* Answer the next `n` requests with `status` (a Status body). */
void fake_store_fail(fake_store *st, int status, int n);
/* Like fake_store_fail, but only requests with this method fail. */
void fake_store_fail_on(fake_store *st, const char *method, int status, int n);
/* A copy of the stored object as JSON text (caller frees) or NULL. */
char *fake_store_get(fake_store *st, const char *path);
/* Number of stored objects whose path starts with prefix. */
int fake_store_len(fake_store *st, const char *prefix);

/* A kubeconfig (token auth) pointing at the fake server, loaded into a
 * config and a client. 0 or a PRD_E* code. */
int fake_client(const fake_srv *s, const kube_client_opts *o, kube_config **cfg, kube_client **c);

#endif

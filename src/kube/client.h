/* REST client for kube-apiserver over libcurl (or, for tests and
 * simulations, over an in-process transport: kube_client_opts.transport).
 *
 * One kube_client is shared by every thread of the process: each call uses
 * its own curl easy handle taken from a small pool (connection reuse
 * through a shared connection cache), so calls may run concurrently. A
 * client-side token bucket (qps/burst) paces requests. Idempotent calls
 * (GET, LIST, DELETE with preconditions, PUT with a resourceVersion) are
 * retried on 429 (honouring Retry-After) and 5xx with backoff; others are
 * not retried.
 *
 * Errors: every call returns 0 or a PRD_E* code decoded from the
 * apiserver's Status object (or the HTTP status when the body is not a
 * Status):
 *   404 NotFound → PRD_ENOTFOUND     409 AlreadyExists → PRD_EEXIST
 *   409 Conflict → PRD_ECONFLICT     410 Gone/Expired  → PRD_EGONE
 *   401/403      → PRD_EPERM         422 Invalid, 400  → PRD_EINVAL
 *   429/5xx after retries → PRD_EAGAIN
 *   timeouts → PRD_ETIMEDOUT         connection/TLS failure → PRD_EIO
 * and fills kube_status (if given) and err with "verb path: code reason:
 * message". */
#ifndef PRD_KUBE_CLIENT_H
#define PRD_KUBE_CLIENT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/config.h"
#include "util/clock.h"
#include "util/err.h"

/* Which collection a call is about. Static descriptors for the kinds the
 * controller uses are below; drivers may build their own. */
typedef struct kube_resource {
	const char *group;     /* "" for the core group */
	const char *version;   /* "v1" */
	const char *resource;  /* plural, e.g. "pods" */
	const char *kind;      /* "Pod" */
	bool namespaced;
} kube_resource;

extern const kube_resource KUBE_NODES, KUBE_PODS, KUBE_PODTEMPLATES, KUBE_EVENTS,
	KUBE_CONFIGMAPS, KUBE_NAMESPACES, KUBE_LEASES, KUBE_PROVREQS, KUBE_RESOURCEPOOLS,
	KUBE_RESOURCESLICES, KUBE_DEVICECLASSES, KUBE_RESOURCECLAIMTEMPLATES, KUBE_RESOURCECLAIMS;

typedef struct kube_client_opts {
	double qps;                  /* default 50 */
	int burst;                   /* default 100 */
	long connect_timeout_ms;     /* default 10000 */
	long request_timeout_ms;     /* default 60000 (not applied to watches) */
	int max_retries;             /* default 5; negative = never retry */
	const char *user_agent;      /* default "provreqd/<version>" */
	const char *field_manager;   /* for apply/create/update; default "provreqd" */
	/* Paces requests (the token bucket refills and waits on it), times
	 * the waits between retries and measures the shutdown deadline.
	 * Default clk_real(). */
	const clk *clock;
	/* Observe every request (metrics): verb, resource, HTTP code (0 on
	 * transport failure), latency. Called from the calling thread. */
	void (*observe)(void *ud, const char *verb, const char *resource, long code, int64_t latency_ns);
	/* Told (with observe_ud) of every connection a request or watch had
	 * to open (TCP, and TLS for https): requests reuse the connections
	 * of earlier ones, so these count handshakes, not requests. */
	void (*connected)(void *ud, long connections);
	void *observe_ud;
	/* For tests and simulations: when set, every request is handed to
	 * this function on the calling thread instead of being sent over
	 * HTTP, and the kube_config may be NULL (it is not read: no URL, no
	 * credentials, no TLS). Everything else is as over HTTP: pacing,
	 * retries and their backoff on the client's clock, Status decoding
	 * and the error codes above, observe. The function has kube_api_fn's
	 * shape (kube/api.h): it sets *status to the HTTP status and *resp
	 * (malloc'ed, freed by the client; may stay NULL) to the answer's
	 * body, or leaves *status 0 when no answer came back, which is then
	 * a transport failure (its return code, PRD_EIO if it returned 0),
	 * retried like a lost connection. Watches are refused
	 * (PRD_EUNSUPPORTED). */
	int (*transport)(void *ud, const char *method, const char *path, const char *content_type, const char *body,
			 size_t body_len, long *status, char **resp, size_t *resp_len);
	void *transport_ud;
} kube_client_opts;

typedef struct kube_client kube_client;

/* Details of a failed call, from the apiserver's Status object. */
typedef struct kube_status {
	long http_code;        /* 0 when the request never got an answer */
	char reason[64];       /* "NotFound", "Conflict", "AlreadyExists", ... */
	char message[512];
	int retry_after_s;     /* from Retry-After or details.retryAfterSeconds */
} kube_status;

/* Create a client. The config is borrowed and must outlive the client
 * (NULL only with opts->transport). Caller frees with kube_client_free(). */
int kube_client_new(kube_config *cfg, const kube_client_opts *opts, kube_client **out, prd_err *err);
void kube_client_free(kube_client *c);
kube_config *kube_client_config(kube_client *c);
/* From now on, after the monotonic time `mono_ns` of the client's clock
 * (kube_client_opts.clock; clk_mono(clk_real()) by default),
 * requests are not sent, transfers in progress (watches included) are
 * aborted with PRD_ETIMEDOUT, and nothing is retried: for a shutdown that
 * must end within a bound whatever the apiserver does. Any thread. */
void kube_client_set_deadline(kube_client *c, int64_t mono_ns);
/* HTTP requests sent (every attempt) and how many of them had to wait for
 * the QPS/burst token bucket. Either pointer may be NULL. */
void kube_client_stats(kube_client *c, unsigned long *requests, unsigned long *throttled);

/* Path of a collection or an object: ns may be NULL for cluster-scoped
 * kinds (and for "all namespaces" lists), name NULL for the collection,
 * subresource NULL or e.g. "status", "scale". Caller frees. */
char *kube_path(const kube_resource *r, const char *ns, const char *name, const char *subresource);

/* Low level: one request. `body` may be NULL. On success *out (if given)
 * holds the parsed JSON answer (caller puts it; NULL for an empty body). */
int kube_request(kube_client *c, const char *method, const char *path, const char *content_type,
		 const char *body, size_t body_len, json_object **out, kube_status *st, prd_err *err);

/* Like kube_request, but a 2xx answer's bytes are handed over unparsed:
 * *out (NULL for an empty answer) is NUL-terminated, *out_len its length;
 * the caller frees it. Failures are decoded into st and err as by
 * kube_request. */
int kube_request_bytes(kube_client *c, const char *method, const char *path, const char *content_type,
		       const char *body, size_t body_len, char **out, size_t *out_len, kube_status *st,
		       prd_err *err);

/* Verbs. Objects passed in are borrowed; objects returned in *out are new
 * references the caller puts (out may be NULL when the answer is not
 * needed). */
int kube_get(kube_client *c, const kube_resource *r, const char *ns, const char *name,
	     json_object **out, kube_status *st, prd_err *err);

typedef struct kube_list_opts {
	const char *label_selector;
	const char *field_selector;
	long limit;                 /* page size; 0 = 500 */
	const char *resource_version; /* for the first page; NULL = most recent */
	/* Called (with kube_list's ud) when an expired continue token makes
	 * the list start over, before items are delivered again: the caller
	 * drops what it collected. NULL = nothing to drop. */
	void (*restart)(void *ud);
} kube_list_opts;

/* Called for every item of every page, in order. Return non-zero to stop
 * (that value is returned by kube_list). `item` is borrowed. */
typedef int (*kube_item_fn)(void *ud, json_object *item);

/* List all pages (limit/continue). *resource_version (if given) receives
 * the list's resourceVersion (caller frees). A continue token that expired
 * (410) restarts from the beginning once, as client-go does. */
int kube_list(kube_client *c, const kube_resource *r, const char *ns, const kube_list_opts *o,
	      kube_item_fn fn, void *ud, char **resource_version, kube_status *st, prd_err *err);

/* One object of a list or a watch, as the answer carried it: its JSON text
 * (json, len; borrowed, not NUL-terminated) when the answer was plain
 * JSON, else a json-c tree (obj, borrowed) of an answer json-c had to
 * parse whole. Exactly one of json and obj is set. max_depth is the
 * nesting json-c may use to parse the text (what the whole answer
 * allowed, less the containers around the object). */
typedef struct kube_item_src {
	const char *json;
	size_t len;
	int max_depth;
	json_object *obj;
} kube_item_src;

typedef int (*kube_src_fn)(void *ud, const kube_item_src *item);

/* kube_list, handing items over as text: no json-c tree of the page is
 * built, so a caller that decodes with kube_decode_text() never builds
 * one. Pages json-c reads its own way (see kube/jscan.h) are parsed by
 * json-c and handed over as trees. Same paging, restart and errors as
 * kube_list. */
int kube_list_text(kube_client *c, const kube_resource *r, const char *ns, const kube_list_opts *o,
		   kube_src_fn fn, void *ud, char **resource_version, kube_status *st, prd_err *err);

int kube_create(kube_client *c, const kube_resource *r, const char *ns, json_object *obj,
		json_object **out, kube_status *st, prd_err *err);
/* PUT. metadata.resourceVersion in obj gives optimistic concurrency
 * (409 → PRD_ECONFLICT). subresource: NULL or "status". */
int kube_update(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		const char *subresource, json_object *obj, json_object **out, kube_status *st, prd_err *err);

typedef struct kube_delete_opts {
	const char *uid;              /* precondition */
	const char *resource_version; /* precondition */
	const char *propagation;      /* "Background", "Foreground", "Orphan" or NULL */
	long grace_period_s;          /* -1 = server default */
} kube_delete_opts;

int kube_delete(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		const kube_delete_opts *o, kube_status *st, prd_err *err);

typedef enum kube_patch_type {
	KUBE_PATCH_MERGE,     /* application/merge-patch+json */
	KUBE_PATCH_JSON,      /* application/json-patch+json */
	KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json (built-in kinds only) */
	KUBE_PATCH_APPLY      /* application/apply-patch+yaml, fieldManager=provreqd */
} kube_patch_type;

/* PATCH. `patch` is the raw patch document (JSON text; for APPLY, JSON is
 * valid YAML, and a JSON patch with json-c's "\/" escapes is rewritten
 * without them since YAML does not accept that escape). `force` applies to
 * server-side apply only. */
int kube_patch(kube_client *c, const kube_resource *r, const char *ns, const char *name,
	       const char *subresource, kube_patch_type type, const char *patch, bool force,
	       json_object **out, kube_status *st, prd_err *err);

/* Scale subresource (autoscaling/v1 Scale). */
int kube_get_scale(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		   int32_t *replicas, kube_status *st, prd_err *err);
int kube_set_scale(kube_client *c, const kube_resource *r, const char *ns, const char *name,
		   int32_t replicas, kube_status *st, prd_err *err);

/* Watch events as they arrive. type is "ADDED", "MODIFIED", "DELETED",
 * "BOOKMARK" (obj borrowed). Return non-zero to stop the watch (returned by
 * kube_watch). */
typedef int (*kube_event_fn)(void *ud, const char *type, json_object *obj);

typedef struct kube_watch_opts {
	const char *label_selector;
	const char *field_selector;
	const char *resource_version; /* start after this version */
	long timeout_s;               /* server-side timeoutSeconds; 0 = none */
	bool bookmarks;               /* allowWatchBookmarks */
	/* Polled about once a second; return true to end the watch early
	 * (shutdown, lost leadership). May be NULL. */
	bool (*cancelled)(void *ud);
	void *cancel_ud;
} kube_watch_opts;

/* Run one watch until the server closes it (returns 0), the callback stops
 * it, it is cancelled (0), or an error: 410 as HTTP status or as an ERROR
 * event in the stream → PRD_EGONE; other ERROR events → the decoded code.
 * Events are delivered in order; the stream is split on newlines as bytes
 * arrive, never re-scanning what was already consumed. */
int kube_watch(kube_client *c, const kube_resource *r, const char *ns, const kube_watch_opts *o,
	       kube_event_fn fn, void *ud, kube_status *st, prd_err *err);

/* kube_watch, handing ADDED/MODIFIED/DELETED/BOOKMARK objects over as
 * text (kube_item_src) when the event line is plain JSON, else as trees.
 * ERROR events and errors as kube_watch. */
typedef int (*kube_src_event_fn)(void *ud, const char *type, const kube_item_src *obj);
int kube_watch_text(kube_client *c, const kube_resource *r, const char *ns, const kube_watch_opts *o,
		    kube_src_event_fn fn, void *ud, kube_status *st, prd_err *err);

#endif

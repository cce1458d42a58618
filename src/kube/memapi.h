/* An in-memory Kubernetes API: a test double of kube-apiserver's REST
 * behaviour for `provreqd simulate` and integration tests. It is never a
 * substitute for the end-to-end tests against a real apiserver (e2e/).
 *
 * It speaks the same paths, verbs, Status objects and resourceVersion rules
 * as kube-apiserver for the kinds provreqd uses: create (name or
 * generateName; uid, creationTimestamp, generation filled in), get, list
 * (labelSelector, fieldSelector on metadata.name/metadata.namespace/
 * spec.nodeName, limit/continue), update with optimistic concurrency (409
 * Conflict on a stale resourceVersion), the status subresource (spec changes
 * through it are ignored and status changes through the main resource are
 * ignored, generation bumps on spec changes), JSON merge patch (also used
 * for strategic-merge and apply patches, which it approximates), delete with
 * uid/resourceVersion preconditions, the scale subresource (for kinds added
 * with MEMAPI_SCALE), and watch from a resourceVersion with 410 Gone once
 * the event log has moved past it.
 *
 * Thread-safe: one mutex guards everything, so reflector threads and the
 * controller worker may call it concurrently. */
#ifndef PRD_KUBE_MEMAPI_H
#define PRD_KUBE_MEMAPI_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "util/clock.h"
#include "util/err.h"

typedef struct memapi memapi;

/* A new store knowing the built-in kinds (nodes, pods, podtemplates,
 * events, configmaps, secrets, namespaces, leases, ProvisioningRequests v1 and
 * v1beta1, ResourcePools). `clock` is borrowed (NULL = real clock). The
 * event log keeps the last `log_cap` events (0 = 100000). Caller frees with
 * memapi_free(). */
int memapi_new(const clk *clock, size_t log_cap, memapi **out);
void memapi_free(memapi *m);

/* Serve one REST request. `path` may carry a query string. On return
 * *status is the HTTP status and *resp (caller frees) the JSON answer.
 * Returns 0 for 2xx, else the PRD_E* code matching the Status reason. */
int memapi_request(memapi *m, const char *method, const char *path, const char *content_type,
		   const char *body, size_t body_len, long *status, char **resp, size_t *resp_len);

/* Events after `since_rv` for one resource (ns NULL = all namespaces),
 * delivered in order to fn (objects borrowed for the call). *last_rv gets
 * the newest resourceVersion seen. PRD_EGONE when since_rv is older than
 * the oldest event kept. */
int memapi_events_since(memapi *m, const kube_resource *r, const char *ns, uint64_t since_rv,
			kube_event_fn fn, void *ud, uint64_t *last_rv);

/* The same with each object as the JSON text an apiserver would write
 * for it (kube_item_src text, borrowed for the call). */
int memapi_events_since_text(memapi *m, const kube_resource *r, const char *ns, uint64_t since_rv,
			     kube_src_event_fn fn, void *ud, uint64_t *last_rv);

/* The current resourceVersion of the store. */
uint64_t memapi_resource_version(memapi *m);

/* Create every object in the array (as `kubectl create -f`); objects
 * whose kind is unknown are an error naming the object. */
int memapi_load(memapi *m, json_object *objs, prd_err *err);

/* The descriptor for apiVersion+kind, or NULL. */
const kube_resource *memapi_resource_for_kind(const memapi *m, const char *api_version, const char *kind);

enum {
	MEMAPI_STATUS = 1,     /* a status subresource */
	MEMAPI_GENERATION = 2, /* metadata.generation bumps on spec changes (CRDs) */
	MEMAPI_SCALE = 4       /* a scale subresource on spec.replicas */
};

/* Teach the store another kind (e.g. Cluster API MachineDeployments).
 * Call before the store is used from other threads; the strings of `r`
 * must outlive the store. Another version of a known group/resource shares
 * its objects. PRD_EEXIST if known, PRD_ERANGE past 64 kinds. */
int memapi_add_kind(memapi *m, const kube_resource *r, unsigned flags);

/* Fault injection for tests: the next `count` requests whose method
 * matches (NULL = any) and whose path starts with `path_prefix` are
 * answered with `http_status` and a matching Status, without effect. */
void memapi_inject_fault(memapi *m, const char *method, const char *path_prefix, long http_status,
			 int count);

/* A kube_listwatch (kube/reflector.h) over the store, so informers run on
 * the in-memory API as they do on a real one: list = GETs of the
 * collection, page by page; watch = the event log from the given
 * resourceVersion, polled every few milliseconds until the timeout,
 * cancellation, or 410. Both come in the tree and the text form (see
 * kube_listwatch), the text form going through the same page scanner and
 * text decoders as against a real apiserver. `r` and
 * `m` are borrowed and must outlive the listwatch. */
struct kube_listwatch;
void memapi_listwatch(memapi *m, const kube_resource *r, struct kube_listwatch *out);

/* CPU time (ns, summed over threads) the listwatches spent in the store:
 * answering list pages and collecting (and, in text form, printing) watch
 * events — what an apiserver would spend, so a benchmark can tell it from
 * the client's own share. */
uint64_t memapi_listwatch_server_ns(memapi *m);

/* Drop events up to the current resourceVersion, as etcd compaction does:
 * later watches from older versions get 410 Gone. */
void memapi_compact(memapi *m);

/* (memapi_valid.c) 0 when `obj`, about to be stored as `kind` by a create
 * or an update, passes the rules kube-apiserver applies that the store
 * mirrors; else -1 with the apiserver's message in `msg`. */
int memapi__validate(const char *kind, json_object *obj, bool status_only, char *msg, size_t len);

#endif

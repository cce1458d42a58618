/* Helpers shared by the node-group drivers shipped with provreqd (kwok,
 * clusterapi). Compiled into each driver; nothing here is exported from a
 * module (only provreqd_cloud_driver is). */
#ifndef PRD_CLOUD_DRV_UTIL_H
#define PRD_CLOUD_DRV_UTIL_H

#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "provreqd/cloud.h"

/* Fill err (may be NULL) and return code. */
int drv_fail(prd_cloud_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* One log line through the host (no-op without one). */
void drv_log(const prd_cloud_host *host, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
char *drv_strdup(const char *s);
/* Member `key` of `obj` as a string, or NULL when absent or not a string. */
const char *drv_jstr(json_object *obj, const char *key);
/* Member `key` of `obj` when it is an object, else NULL. */
json_object *drv_jobj(json_object *obj, const char *key);
/* One request to kube-apiserver through the host. `body` (may be NULL) is
 * serialised as JSON. On success *out (if given) is the parsed answer
 * (caller puts). *http_status (may be NULL) receives the HTTP status. */
int drv_request(const prd_cloud_host *host, const char *method, const char *path, const char *content_type,
		json_object *body, json_object **out, long *http_status, prd_cloud_error *err);
/* Percent-encode `s` for a query string into out (size n); false if cut. */
bool drv_query_escape(const char *s, char *out, size_t n);
/* List every item at `path` (which may carry a query), following continue
 * tokens. fn returns non-zero to stop (that value is returned). */
int drv_list(const prd_cloud_host *host, const char *path, int (*fn)(void *ud, json_object *item), void *ud,
	     prd_cloud_error *err);

/* create_group (ABI 1.5) request checks. A taint effect Kubernetes knows
 * (NoSchedule, PreferNoSchedule, NoExecute). */
bool drv_taint_effect_ok(const char *effect);
/* An owner token usable as a label value: 1-63 of [A-Za-z0-9-_.],
 * alphanumeric at both ends. */
bool drv_owner_token_ok(const char *token);
/* Whether label `key`'s prefix (the part before '/'; none: false) is
 * domain `dom` or a subdomain of it (x-k8s.io is not k8s.io). */
bool drv_label_in_domain(const char *key, const char *dom);

/* Run fn(ud, i) for every i in [0, n) on up to `par` threads (the
 * caller's among them; DRV_PARALLEL_MAX at most) and return when all have
 * run. fn must be safe to call from several threads at once; the host's
 * functions are. Without threads (pthread_create fails) the caller's
 * thread runs them all. */
#define DRV_PARALLEL_MAX 32
void drv_parallel(unsigned par, size_t n, void (*fn)(void *ud, size_t i), void *ud);

/* Release functions for drivers whose groups, instances and strings are
 * plain malloc'ed memory (the descriptor's release_* entries). */
void drv_instances_free(prd_cloud_instance *v, size_t n);
void drv_release_node_groups(void *state, prd_cloud_node_group *groups, size_t count);
/* release_shapes (ABI 1.5) for shapes whose name and node_json are each
 * one malloc'd string and whose zones is one malloc'd block (the array
 * with its strings after it). */
void drv_release_shapes(void *state, prd_cloud_shape *v, size_t count);
void drv_release_instances(void *state, prd_cloud_instance *v, size_t count);
void drv_release_string(void *state, char *s);

#endif

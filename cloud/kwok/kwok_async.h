/* kwok_async.c: the asynchronous mode, a cloud that answers before its
 * instances exist.
 *
 * Entry points for kwok.c; kwok_config.c calls kwok_async_parse for the
 * configuration's `async:` key. */
#ifndef PRD_CLOUD_KWOK_ASYNC_H
#define PRD_CLOUD_KWOK_ASYNC_H

#include "kwok/kwok_int.h"

int kwok_async_parse(kwok *k, json_object *v, prd_cloud_error *err);
void kwok_async_free(kwok_async *a);
int kwok_async_check_groups(const kwok *k, prd_cloud_error *err);
bool kwok_async_for(const kwok *k, const char *group);
/* PRD_CLOUD_EAGAIN with the configured probability (async groups only). */
int kwok_async_transient(kwok *k, const char *group, const char *op, prd_cloud_error *err);
/* Register what is due, finish deletes, recount each group's pending. */
int kwok_async_progress(kwok *k, prd_cloud_error *err);
/* Ask for req->delta instances, of which those past `succeed` fail with
 * error_code. A conditional request (req->expected >= 0) compares the
 * group's target, counted afresh under the state file's lock, first. */
int kwok_async_grow(kwok *k, kwok_group *g, const kwok_grow_req *req, int32_t succeed, const char *error_code,
		    prd_cloud_error *err);
/* An instance of the async cloud without a Node yet. */
typedef struct kwok_pending {
	const char *name;
	bool appeared;          /* createDelayMs has passed: the cloud reports it */
	const char *failed;     /* its error code, or NULL */
	bool deleting;
	const char *owner;      /* the owner token of its increase, or NULL */
	int64_t requested_ns;   /* when the increase asked for it (host clock) */
} kwok_pending;
/* fn for each instance of `group` without a Node yet. */
int kwok_async_each(kwok *k, const char *group, int (*fn)(void *ud, const kwok_pending *p), void *ud,
		    prd_cloud_error *err);
/* Delete (or cancel) the pending instance `name`; *found says whether it
 * was one. */
int kwok_async_delete(kwok *k, kwok_group *g, const char *name, bool *found, prd_cloud_error *err);
/* Cancel `delta` requested instances, counting `elsewhere` more the caller
 * can cancel itself; PRD_CLOUD_ERANGE (nothing cancelled) when fewer can be.
 * With expected >= 0, PRD_CLOUD_ECONFLICT (nothing cancelled) unless the
 * group's target, counted afresh under the state file's lock, is that. */
int kwok_async_cancel(kwok *k, kwok_group *g, int32_t delta, int32_t elsewhere, int32_t expected, int32_t *cancelled,
		      prd_cloud_error *err);

#endif

/* kwok_view.c: the Nodes as the host's cache tells them (ABI 1.2).
 *
 * Entry points for kwok.c; kwok_async.c calls kwok_view_created for the
 * Nodes it registers. */
#ifndef PRD_CLOUD_KWOK_VIEW_H
#define PRD_CLOUD_KWOK_VIEW_H

#include "kwok/kwok_int.h"

int kwok_view_apply(kwok *k, const prd_cloud_node *nodes, size_t count, int full, prd_cloud_error *err);
/* The driver created `node` (its JSON) / deleted the Node `name`: the
 * view shows that at once, as a list would. No-ops until view.on. */
void kwok_view_created(kwok *k, json_object *node);
void kwok_view_deleted(kwok *k, const char *name);
/* One Node of the view, as kwok_view_each gives it. */
typedef struct kwok_vinfo {
	const char *name;
	size_t name_len;
	const char *id;         /* its provider ID, or "kwok://<name>" when it has none */
	size_t id_len;
	const char *owner;      /* its provreqd.io/owner label, or NULL */
	int64_t created_ns;     /* its metadata.creationTimestamp; 0 unknown */
	bool ready, deleting;
} kwok_vinfo;
/* fn for each Node of `group` the view holds and the driver has not
 * deleted; stops at fn's first non-zero value. */
typedef int (*kwok_view_fn)(void *ud, const kwok_vinfo *n);
int kwok_view_each(const kwok *k, const char *group, kwok_view_fn fn, void *ud);
/* The view learns a Node's creation time from the driver's own creates
 * only (the host's cache does not pass it on): list `group` once to learn
 * it for Nodes the view has not been told it of. */
int kwok_view_fill_times(kwok *k, const char *group, prd_cloud_error *err);
/* How many Nodes of `group` the view holds that the driver has not
 * deleted and that are not being deleted. */
int32_t kwok_view_live(const kwok *k, const char *group);
void kwok_view_free(kwok_view *v);

#endif

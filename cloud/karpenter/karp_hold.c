/* Booked capacity is not consolidated away before its pods arrive: the
 * driver creates its NodeClaims with karpenter.sh/do-not-disrupt (and its
 * own provreqd.io/do-not-disrupt-held beside it; Karpenter copies both to
 * the Node when it registers) and lifts both, from the NodeClaim and its
 * Node (found by the owner label Karpenter copies too), once the ProvisioningRequest behind the owner token no longer
 * holds the capacity: its booking ended (BookingExpired), it failed, its
 * capacity was revoked, or it is gone.
 *
 * provreqd's owner tokens begin with the request's uid (the plan id is
 * "uid/time#i", see pr_owner_token); a token in another form names no
 * request, and its mark is lifted. When the requests cannot be listed,
 * every mark stays: holding a node too long costs money, dropping a hold
 * too early loses a booking. */
#include "karpenter/karpenter.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

#define PR_LIST "/apis/autoscaling.x-k8s.io/v1/provisioningrequests"

static bool condition_true(json_object *obj, const char *type)
{
	json_object *conds = NULL;
	size_t i, n;
	json_object_object_get_ex(drv_jobj(obj, "status"), "conditions", &conds);
	n = json_object_is_type(conds, json_type_array) ? json_object_array_length(conds) : 0;
	for(i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(conds, i);
		if(str_eq(drv_jstr(c, "type"), type))
			return str_eq(drv_jstr(c, "status"), "True");
	}
	return false;
}

typedef struct holders {
	json_object *uids; /* uid -> true for requests that still hold capacity */
} holders;

static int note_request(void *ud, json_object *pr)
{
	holders *h = ud;
	const char *uid = drv_jstr(drv_jobj(pr, "metadata"), "uid");
	if(!uid || condition_true(pr, "BookingExpired") || condition_true(pr, "Failed") ||
	   condition_true(pr, "CapacityRevoked"))
		return 0;
	return json_object_object_add(h->uids, uid, json_object_new_boolean(1)) ? PRD_CLOUD_ENOMEM : 0;
}

static bool held(json_object *uids, const char *owner)
{
	const char *dot = owner ? strchr(owner, '.') : NULL;
	char uid[64];
	if(!dot || (size_t)(dot - owner) >= sizeof(uid))
		return false;
	memcpy(uid, owner, (size_t)(dot - owner));
	uid[dot - owner] = '\0';
	return json_object_object_get_ex(uids, uid, NULL);
}

static json_object *unmark_patch(void)
{
	json_object *p = json_object_new_object(), *md = json_object_new_object(), *ann = json_object_new_object();
	if(!p || !md || !ann || json_object_object_add(ann, KARP_DND, NULL) || json_object_object_add(ann, KARP_HOLD_ANN, NULL) ||
	   json_object_object_add(md, "annotations", ann)) {
		json_object_put(p);
		json_object_put(md);
		json_object_put(ann);
		return NULL;
	}
	if(json_object_object_add(p, "metadata", md)) {
		json_object_put(p);
		json_object_put(md);
		return NULL;
	}
	return p;
}

/* May this replica write now? Only the leader lifts marks: a standby
 * (or a replica before leader election) that did would act on its own
 * view of the bookings, beside the leader's. Asked before every PATCH. */
static bool may_act(const karp *k)
{
	return !(k->host->struct_size > offsetof(prd_cloud_host, may_act) && k->host->may_act &&
		 !k->host->may_act(k->host->ctx));
}

/* Lift the marks from one object (a NodeClaim or a Node). */
static void unmark(karp *k, const char *path, const char *what, const char *name, json_object *patch)
{
	prd_cloud_error e = {0, ""};
	if(!may_act(k))
		return;
	if(drv_request(k->host, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL, &e))
		karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: lifting do-not-disrupt from %s %s: %s", what, name, e.message);
	else
		karp_log(k, PRD_CLOUD_LOG_INFO, "karpenter: %s %s: its booking ended, Karpenter may disrupt it", what, name);
}

/* The marked objects of `arr` whose request no longer holds them. */
static void unmark_all(karp *k, json_object *arr, bool nodes, json_object *uids, json_object *patch)
{
	size_t i, n = arr ? json_object_array_length(arr) : 0;
	for(i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(arr, i), *md = drv_jobj(o, "metadata");
		const char *name = drv_jstr(md, "name");
		char path[400];
		if(!name || !drv_jstr(drv_jobj(md, "annotations"), KARP_HOLD_ANN) || karp_claim_deleting(o) ||
		   held(uids, drv_jstr(drv_jobj(md, "labels"), KARP_OWNER_LABEL)))
			continue;
		snprintf(path, sizeof(path), nodes ? "/api/v1/nodes/%s" : KARP_API "/nodeclaims/%s", name);
		unmark(k, path, nodes ? "Node" : "NodeClaim", name, patch);
	}
}

static size_t count_marked(json_object *arr)
{
	size_t i, n = arr ? json_object_array_length(arr) : 0, marked = 0;
	for(i = 0; i < n; i++)
		marked += drv_jstr(drv_jobj(drv_jobj(json_object_array_get_idx(arr, i), "metadata"), "annotations"),
				   KARP_HOLD_ANN) != NULL;
	return marked;
}

static int push_item(void *ud, json_object *item)
{
	return json_object_array_add(ud, json_object_get(item)) ? PRD_CLOUD_ENOMEM : 0;
}

/* Karpenter copies a NodeClaim's annotations to its Node when it
 * registers (and may again later), so Nodes are swept on their own: every
 * Node with an owner label (copied from its NodeClaim) is looked at, and
 * the NodeClaim is unmarked before its Node. */
void karp_hold_sweep(karp *k)
{
	char path[200], q[100];
	holders h = {NULL};
	prd_cloud_error e = {0, ""};
	json_object *patch, *nodes = json_object_new_array();
	size_t marked;
	if(!may_act(k)) {
		json_object_put(nodes);
		return;
	}
	drv_query_escape(KARP_OWNER_LABEL, q, sizeof(q));
	snprintf(path, sizeof(path), "/api/v1/nodes?labelSelector=%s", q);
	if(!nodes || drv_list(k->host, path, push_item, nodes, &e)) {
		karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: cannot list Nodes to lift do-not-disrupt: %s", e.message);
		json_object_put(nodes);
		nodes = NULL;
	}
	marked = count_marked(k->claims) + count_marked(nodes);
	if(!marked || !(h.uids = json_object_new_object())) {
		json_object_put(nodes);
		return;
	}
	if(drv_list(k->host, PR_LIST, note_request, &h, &e)) {
		karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: cannot list ProvisioningRequests, keeping %zu do-not-disrupt marks: %s",
			 marked, e.message);
	} else if((patch = unmark_patch()) != NULL) {
		unmark_all(k, k->claims, false, h.uids, patch);
		unmark_all(k, nodes, true, h.uids, patch);
		json_object_put(patch);
	}
	json_object_put(h.uids);
	json_object_put(nodes);
}

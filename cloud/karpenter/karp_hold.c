/* Booked capacity is not consolidated away before its pods arrive: the
 * driver creates its NodeClaims with karpenter.sh/do-not-disrupt (and its
 * own provreqd.io/do-not-disrupt-held beside it; Karpenter copies both to
 * the Node when it registers) and lifts both, from the NodeClaim and its
 * Node, once the ProvisioningRequest behind the owner token no longer
 * holds the capacity: its booking ended (BookingExpired), it failed, its
 * capacity was revoked, or it is gone.
 *
 * provreqd's owner tokens begin with the request's uid (the plan id is
 * "uid/time#i", see pr_owner_token); a token in another form names no
 * request, and its mark is lifted. When the requests cannot be listed,
 * every mark stays: holding a node too long costs money, dropping a hold
 * too early loses a booking. */
#include "karpenter/karpenter.h"

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

/* Lift the marks from one NodeClaim and, when it carries ours, its Node. */
static void unmark(karp *k, json_object *nc, json_object *patch)
{
	const char *name = drv_jstr(drv_jobj(nc, "metadata"), "name");
	const char *node = drv_jstr(drv_jobj(nc, "status"), "nodeName");
	char path[400];
	prd_cloud_error e = {0, ""};
	json_object *obj = NULL;
	if(node && node[0]) {
		snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
		if(!drv_request(k->host, "GET", path, NULL, NULL, &obj, NULL, &e) &&
		   drv_jstr(drv_jobj(drv_jobj(obj, "metadata"), "annotations"), KARP_HOLD_ANN) &&
		   drv_request(k->host, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL, &e))
			karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: lifting do-not-disrupt from Node %s: %s", node, e.message);
		json_object_put(obj);
	}
	snprintf(path, sizeof(path), KARP_API "/nodeclaims/%s", name);
	if(drv_request(k->host, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL, &e))
		karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: lifting do-not-disrupt from NodeClaim %s: %s", name, e.message);
	else
		karp_log(k, PRD_CLOUD_LOG_INFO, "karpenter: NodeClaim %s: its booking ended, Karpenter may disrupt it", name);
}

void karp_hold_sweep(karp *k)
{
	size_t i, n = k->claims ? json_object_array_length(k->claims) : 0, marked = 0;
	holders h = {NULL};
	prd_cloud_error e = {0, ""};
	json_object *patch;
	for(i = 0; i < n; i++)
		marked += drv_jstr(drv_jobj(drv_jobj(json_object_array_get_idx(k->claims, i), "metadata"), "annotations"),
				   KARP_HOLD_ANN) != NULL;
	if(!marked || !(h.uids = json_object_new_object()))
		return;
	if(drv_list(k->host, PR_LIST, note_request, &h, &e)) {
		karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: cannot list ProvisioningRequests, keeping %zu do-not-disrupt marks: %s",
			 marked, e.message);
		json_object_put(h.uids);
		return;
	}
	patch = unmark_patch();
	for(i = 0; patch && i < n; i++) {
		json_object *nc = json_object_array_get_idx(k->claims, i), *md = drv_jobj(nc, "metadata");
		if(drv_jstr(drv_jobj(md, "annotations"), KARP_HOLD_ANN) && !karp_claim_deleting(nc) &&
		   !held(h.uids, drv_jstr(drv_jobj(md, "labels"), KARP_OWNER_LABEL)))
			unmark(k, nc, patch);
	}
	json_object_put(patch);
	json_object_put(h.uids);
}

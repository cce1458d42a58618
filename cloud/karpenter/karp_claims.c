/* NodeClaims: the instances of the karpenter driver's groups.
 *
 * An instance is a NodeClaim, its id the NodeClaim's name, its owner the
 * provreqd.io/owner label, its creation time metadata.creationTimestamp,
 * its node name status.nodeName. A launch Karpenter reports as failed
 * (Launched or Registered not True with a reason) is an instance error
 * with Karpenter's reason. Karpenter deletes a NodeClaim it cannot launch
 * for want of capacity; a NodeClaim this process made that disappears
 * before its Node registered stays reported, as a failed instance (a
 * tombstone), until the host deletes it, so a plan sees the failure
 * instead of waiting for its timeout. Tombstones live in this process only. */
#include "karpenter/karpenter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rfc3339.h"
#include "util/str.h"

/* Tombstones are forgotten after an hour: far past any provision timeout. */
#define TOMB_TTL_NS (3600LL * 1000000000LL)

static int push_item(void *ud, json_object *item)
{
	return json_object_array_add(ud, json_object_get(item)) ? PRD_CLOUD_ENOMEM : 0;
}

int karp_list_claims(karp *k, const char *pool, json_object **out, prd_cloud_error *err)
{
	char path[512], sel[300], q[400];
	json_object *arr = json_object_new_array();
	int rc;
	if(!arr)
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	snprintf(path, sizeof(path), KARP_API "/nodeclaims");
	if(pool) {
		snprintf(sel, sizeof(sel), KARP_POOL_LABEL "=%s", pool);
		if(!drv_query_escape(sel, q, sizeof(q))) {
			json_object_put(arr);
			return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter: NodePool name too long");
		}
		snprintf(path, sizeof(path), KARP_API "/nodeclaims?labelSelector=%s", q);
	}
	rc = drv_list(k->host, path, push_item, arr, err);
	if(rc) {
		json_object_put(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

static const char *claim_name(json_object *nc)
{
	return drv_jstr(drv_jobj(nc, "metadata"), "name");
}

static json_object *find_claim(json_object *claims, const char *name)
{
	size_t i, n = json_object_array_length(claims);
	for(i = 0; i < n; i++)
		if(str_eq(claim_name(json_object_array_get_idx(claims, i)), name))
			return json_object_array_get_idx(claims, i);
	return NULL;
}

/* The condition `type` of a NodeClaim, or NULL. */
static json_object *condition(json_object *nc, const char *type)
{
	json_object *conds = NULL;
	size_t i, n;
	json_object_object_get_ex(drv_jobj(nc, "status"), "conditions", &conds);
	n = json_object_is_type(conds, json_type_array) ? json_object_array_length(conds) : 0;
	for(i = 0; i < n; i++)
		if(str_eq(drv_jstr(json_object_array_get_idx(conds, i), "type"), type))
			return json_object_array_get_idx(conds, i);
	return NULL;
}

/* A launch Karpenter reports as failed: Launched or Registered False, or
 * Launched Unknown with a reason other than the initial one (Karpenter
 * keeps an unexpected launch error under Unknown/LaunchFailed, or a
 * provider's own reason, and retries until its launch timeout). Registered
 * Unknown is waiting for the Node (NodeNotFound, RegistrationHookPending),
 * not a failure. */
static json_object *failed_condition(json_object *nc)
{
	json_object *c = condition(nc, "Launched");
	const char *st = drv_jstr(c, "status"), *reason = drv_jstr(c, "reason");
	if(c && (str_eq(st, "False") || (str_eq(st, "Unknown") && reason && reason[0] &&
					    strcmp(reason, "AwaitingReconciliation") && strcmp(reason, "Unknown"))))
		return c;
	c = condition(nc, "Registered");
	return c && str_eq(drv_jstr(c, "status"), "False") ? c : NULL;
}

static bool launched(json_object *nc)
{
	return str_eq(drv_jstr(condition(nc, "Launched"), "status"), "True");
}

static const char *node_of(json_object *nc)
{
	const char *n = drv_jstr(drv_jobj(nc, "status"), "nodeName");
	return n && n[0] ? n : NULL;
}

static karp_made *made_find(const karp *k, const char *name)
{
	size_t i;
	for(i = 0; i < k->nmade; i++)
		if(!strcmp(k->made[i].name, name))
			return &k->made[i];
	return NULL;
}

static void made_drop(karp *k, size_t i)
{
	free(k->made[i].name);
	free(k->made[i].group);
	free(k->made[i].owner);
	k->made[i] = k->made[--k->nmade];
}

void karp_made_free(karp *k)
{
	while(k->nmade)
		made_drop(k, k->nmade - 1);
	free(k->made);
	k->made = NULL;
}

static bool made_in_pool(const karp_made *m, const char *pool)
{
	size_t n = pool ? strlen(pool) : 0;
	return !pool || (!strncmp(m->group, pool, n) && m->group[n] == '/');
}

/* Note what a listing says of each NodeClaim this process made: the last
 * failure Karpenter gave, whether its Node registered (then it is no longer
 * followed), whether it is gone (a tombstone, unless we deleted it). */
void karp_made_update(karp *k, const char *pool, json_object *claims)
{
	int64_t now = k->host->now_ns(k->host->ctx);
	size_t i = 0;
	while(i < k->nmade) {
		karp_made *m = &k->made[i];
		json_object *nc, *c;
		if(!made_in_pool(m, pool) || (m->tomb && now - m->created_ns < TOMB_TTL_NS)) {
			i++;
			continue;
		}
		if(m->tomb || !(nc = find_claim(claims, m->name))) {
			if(m->tomb || m->deleted_by_us) {
				made_drop(k, i);
				continue;
			}
			m->tomb = true;
			karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: NodeClaim %s of %s was deleted before its Node registered (%s%s%s)",
				 m->name, m->group, m->reason[0] ? m->reason : "Karpenter could not launch it",
				 m->message[0] ? ": " : "", m->message);
		} else if(node_of(nc)) {
			made_drop(k, i); /* registered: Karpenter's from here on */
			continue;
		} else if((c = failed_condition(nc)) != NULL) {
			snprintf(m->reason, sizeof(m->reason), "%s", drv_jstr(c, "reason") ? drv_jstr(c, "reason") : "");
			snprintf(m->message, sizeof(m->message), "%s", drv_jstr(c, "message") ? drv_jstr(c, "message") : "");
		}
		i++;
	}
}

int32_t karp_count_tombs(const karp *k, const char *group)
{
	size_t i;
	int32_t n = 0;
	for(i = 0; i < k->nmade; i++)
		n += k->made[i].tomb && !strcmp(k->made[i].group, group);
	return n;
}

int32_t karp_drop_tombs(karp *k, const karp_group *g, int32_t want)
{
	int32_t n = 0;
	size_t i = k->nmade;
	while(i-- > 0 && n < want) {
		if(k->made[i].tomb && !strcmp(k->made[i].group, g->id)) {
			made_drop(k, i);
			n++;
		}
	}
	return n;
}

static int64_t created_ns(json_object *obj)
{
	const char *ts = drv_jstr(drv_jobj(obj, "metadata"), "creationTimestamp");
	prd_err pe;
	int64_t ns = 0;
	if(!ts || rfc3339_parse(ts, &ns, &pe) || ns < 0)
		return 0;
	return ns;
}

static bool out_of_resources(const char *reason, const char *message)
{
	return (reason && (strstr(reason, "InsufficientCapacity") || strstr(reason, "Unavailable"))) ||
	       (message && strstr(message, "insufficient capacity"));
}

static int set_error(prd_cloud_instance *x, const char *code, const char *msg, bool oor)
{
	x->error_class = oor ? PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES : PRD_CLOUD_ERRCLASS_OTHER;
	x->error_code = drv_strdup(code && code[0] ? code : "LaunchFailed");
	x->error_message = drv_strdup(msg && msg[0] ? msg : "Karpenter could not launch the NodeClaim");
	return x->error_code && x->error_message ? 0 : -1;
}

/* One listed NodeClaim as an instance. */
static int claim_instance(const karp *k, json_object *nc, prd_cloud_instance *x)
{
	const char *owner = drv_jstr(drv_jobj(drv_jobj(nc, "metadata"), "labels"), KARP_OWNER_LABEL);
	json_object *c = failed_condition(nc);
	const karp_made *m = claim_name(nc) ? made_find(k, claim_name(nc)) : NULL;
	x->id = drv_strdup(claim_name(nc));
	x->node_name = node_of(nc) ? drv_strdup(node_of(nc)) : NULL;
	x->owner = owner ? drv_strdup(owner) : NULL;
	x->created_ns = created_ns(nc);
	x->state = karp_claim_deleting(nc) ? PRD_CLOUD_INSTANCE_DELETING
		   : node_of(nc)	     ? PRD_CLOUD_INSTANCE_RUNNING
					     : PRD_CLOUD_INSTANCE_CREATING;
	if(!x->id || (node_of(nc) && !x->node_name) || (owner && !x->owner))
		return -1;
	if(c)
		return set_error(x, drv_jstr(c, "reason"), drv_jstr(c, "message"),
				 out_of_resources(drv_jstr(c, "reason"), drv_jstr(c, "message")));
	if(karp_claim_deleting(nc) && !node_of(nc) && !(m && m->deleted_by_us))
		return set_error(x, launched(nc) ? "DeletedBeforeRegistration" : "DeletedBeforeLaunch",
				 "Karpenter is deleting the NodeClaim before its Node registered", !launched(nc));
	return 0;
}

static int tomb_instance(const karp_made *m, prd_cloud_instance *x)
{
	char msg[PRD_CLOUD_MSG_MAX];
	snprintf(msg, sizeof(msg), "NodeClaim %s was deleted before its Node registered%s%s", m->name,
		 m->message[0] ? ": " : " (Karpenter gives up a launch for insufficient capacity or a NodeClass that is not ready)",
		 m->message);
	x->id = drv_strdup(m->name);
	x->owner = drv_strdup(m->owner);
	x->created_ns = m->created_ns;
	x->state = PRD_CLOUD_INSTANCE_CREATING;
	if(!x->id || !x->owner)
		return -1;
	return set_error(x, m->reason[0] ? m->reason : "InsufficientCapacity", msg,
			 !m->reason[0] || out_of_resources(m->reason, m->message));
}

int karp_instances(karp *k, const karp_group *g, json_object *claims, prd_cloud_instance **out, size_t *count,
		   prd_cloud_error *err)
{
	size_t i, n = json_object_array_length(claims), c = 0;
	prd_cloud_instance *v = calloc(n + k->nmade + 1, sizeof(*v));
	int rc = 0;
	if(!v)
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < n && !rc; i++) {
		json_object *nc = json_object_array_get_idx(claims, i);
		if(karp_claim_in_group(nc, g))
			rc = claim_instance(k, nc, &v[c++]);
	}
	for(i = 0; i < k->nmade && !rc; i++)
		if(k->made[i].tomb && !strcmp(k->made[i].group, g->id))
			rc = tomb_instance(&k->made[i], &v[c++]);
	if(rc) {
		drv_instances_free(v, c);
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	*out = v;
	*count = c;
	return 0;
}

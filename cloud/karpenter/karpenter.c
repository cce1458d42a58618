/* The karpenter driver's entry points (see docs/drivers.md, "The karpenter
 * driver").
 *
 * Groups are re-read at every refresh: every NodePool (or those the config
 * names) that is not being deleted and is not a static NodePool
 * (spec.replicas), times every entry of the shape table its template
 * allows. A group's target is the number of its NodeClaims (Karpenter's
 * own included) plus the failed ones still reported; its max is what the
 * NodePool's spec.limits leave, counted over all of the NodePool's
 * NodeClaims.
 *
 * Capabilities: owner marks and creation times. Not conditional and not
 * fencing: Kubernetes cannot make creating a NodeClaim conditional on
 * another object's version, so a check of the target or of a fence record
 * followed by a create is not atomic (docs/drivers.md says more). */
#include "karpenter/karpenter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

static void groups_free(karp_group *g, size_t n)
{
	size_t i;
	for(i = 0; g && i < n; i++) {
		free(g[i].id);
		free(g[i].pool);
		json_object_put(g[i].np);
	}
	free(g);
}

static void karp_free(karp *k)
{
	size_t i;
	if(!k)
		return;
	karp_shapes_free(k->shapes, k->nshapes);
	for(i = 0; k->pools && k->pools[i]; i++)
		free(k->pools[i]);
	free(k->pools);
	groups_free(k->groups, k->ngroups);
	json_object_put(k->claims);
	json_object_put(k->nodes);
	karp_made_free(k);
	free(k);
}

static karp_group *find_group(karp *k, const char *id)
{
	size_t i;
	for(i = 0; id && i < k->ngroups; i++)
		if(!strcmp(k->groups[i].id, id))
			return &k->groups[i];
	return NULL;
}

static int no_group(prd_cloud_error *err, const char *id)
{
	return karp_fail(err, PRD_CLOUD_ENOTFOUND,
			 "karpenter: no node group '%s' (groups are <NodePool>/<instance type>/<zone|any>/<capacity "
			 "type|any> for the shapes in the driver config a NodePool allows)",
			 id ? id : "(null)");
}

static int push_item(void *ud, json_object *item)
{
	return json_object_array_add(ud, json_object_get(item)) ? PRD_CLOUD_ENOMEM : 0;
}

static int list_into(karp *k, const char *path, json_object **out, prd_cloud_error *err)
{
	json_object *arr = json_object_new_array();
	int rc = arr ? drv_list(k->host, path, push_item, arr, err) : karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	if(rc) {
		json_object_put(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

/* Nodes of the instance types whose capacity the table leaves out. */
static int list_nodes(karp *k, json_object **out, prd_cloud_error *err)
{
	char sel[1500] = KARP_IT_LABEL " in (", q[2000], path[2100];
	size_t i, used = 0;
	for(i = 0; i < k->nshapes; i++) {
		if(k->shapes[i].capacity)
			continue;
		snprintf(sel + strlen(sel), sizeof(sel) - strlen(sel), "%s%s", used++ ? "," : "", k->shapes[i].instance_type);
	}
	*out = NULL;
	if(!used)
		return 0;
	snprintf(sel + strlen(sel), sizeof(sel) - strlen(sel), ")");
	if(!drv_query_escape(sel, q, sizeof(q)))
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter: too many instance types without capacity");
	snprintf(path, sizeof(path), "/api/v1/nodes?labelSelector=%s", q);
	return list_into(k, path, out, err);
}

static bool pool_wanted(const karp *k, json_object *np)
{
	const char *name = drv_jstr(drv_jobj(np, "metadata"), "name");
	json_object *rep = NULL;
	size_t i;
	if(!name || drv_jstr(drv_jobj(np, "metadata"), "deletionTimestamp") ||
	   (json_object_object_get_ex(drv_jobj(np, "spec"), "replicas", &rep) && rep))
		return false;
	for(i = 0; k->pools && k->pools[i]; i++)
		if(!strcmp(k->pools[i], name))
			return true;
	return !k->pools;
}

static int add_group(karp *k, karp_group **v, size_t *n, json_object *np, const karp_shape *s)
{
	const char *pool = drv_jstr(drv_jobj(np, "metadata"), "name");
	karp_group *bigger = realloc(*v, (*n + 1) * sizeof(**v)), *g;
	size_t i, len;
	if(!bigger)
		return -1;
	*v = bigger;
	g = &bigger[*n];
	memset(g, 0, sizeof(*g));
	g->id = str_printf("%s/%s/%s/%s", pool, s->instance_type, s->zone ? s->zone : "any",
			   s->capacity_type ? s->capacity_type : "any");
	g->pool = drv_strdup(pool);
	if(!g->id || !g->pool) {
		free(g->id);
		free(g->pool);
		return -1;
	}
	g->shape = s;
	g->np = json_object_get(np);
	len = k->claims ? json_object_array_length(k->claims) : 0;
	for(i = 0; i < len; i++) {
		json_object *nc = json_object_array_get_idx(k->claims, i);
		g->live += karp_claim_in_group(nc, g) && !karp_claim_deleting(nc);
	}
	g->tombs = karp_count_tombs(k, g->id);
	karp_group_limits(k, g, k->claims);
	(*n)++;
	return 0;
}

/* Groups from the NodePools listed, into a new array. */
static int build_groups(karp *k, json_object *pools, karp_group **out, size_t *nout, prd_cloud_error *err)
{
	karp_group *v = NULL;
	size_t i, j, n = 0, npools = json_object_array_length(pools);
	for(i = 0; i < npools; i++) {
		json_object *np = json_object_array_get_idx(pools, i);
		size_t before = n;
		if(!pool_wanted(k, np))
			continue;
		for(j = 0; j < k->nshapes; j++) {
			char why[300];
			if(!karp_pool_allows(np, &k->shapes[j], why, sizeof(why))) {
				karp_log(k, PRD_CLOUD_LOG_DEBUG, "karpenter: NodePool %s: shape %s: %s",
					 drv_jstr(drv_jobj(np, "metadata"), "name"), k->shapes[j].instance_type, why);
				continue;
			}
			if(add_group(k, &v, &n, np, &k->shapes[j])) {
				groups_free(v, n);
				return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
			}
		}
		if(n == before)
			karp_log(k, PRD_CLOUD_LOG_DEBUG, "karpenter: NodePool %s allows no shape of the table",
				 drv_jstr(drv_jobj(np, "metadata"), "name"));
	}
	*out = v;
	*nout = n;
	return 0;
}

/* Say when what bounds a group's max size changes (a NodePool limit
 * reached, say): the host's refusal names the group and its max size, this
 * line the limit behind it. */
static void note_limits(karp *k, const karp_group *v, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++) {
		const karp_group *old = find_group(k, v[i].id);
		if(v[i].limit[0] && (!old || old->max != v[i].max || strcmp(old->limit, v[i].limit)))
			karp_log(k, PRD_CLOUD_LOG_INFO, "karpenter: %s: max size %d (%d NodeClaims; bound by %s)", v[i].id,
				 (int)v[i].max, (int)v[i].live, v[i].limit);
	}
}

static int kp_refresh(void *state, prd_cloud_error *err)
{
	karp *k = state;
	json_object *pools = NULL, *claims = NULL, *nodes = NULL;
	karp_group *v = NULL;
	size_t n = 0;
	int rc = list_into(k, KARP_API "/nodepools", &pools, err);
	if(!rc)
		rc = karp_list_claims(k, NULL, &claims, err);
	if(!rc)
		rc = list_nodes(k, &nodes, err);
	if(rc) {
		json_object_put(pools);
		json_object_put(claims);
		return rc;
	}
	json_object_put(k->claims);
	json_object_put(k->nodes);
	k->claims = claims;
	k->nodes = nodes;
	karp_made_update(k, NULL, claims);
	rc = build_groups(k, pools, &v, &n, err);
	json_object_put(pools);
	if(rc)
		return rc;
	note_limits(k, v, n);
	groups_free(k->groups, k->ngroups);
	k->groups = v;
	k->ngroups = n;
	if(k->hold)
		karp_hold_sweep(k);
	return 0;
}

static int kp_init(const prd_cloud_host *host, const char *config, void **state, prd_cloud_error *err)
{
	karp *k = calloc(1, sizeof(*k));
	prd_cloud_error e = {0, ""};
	int rc;
	if(!k)
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	k->host = host;
	rc = karp_parse_config(k, config, err);
	if(rc) {
		karp_free(k);
		return rc;
	}
	/* An apiserver away at start-up is not a configuration error. */
	if(kp_refresh(k, &e))
		karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: initial discovery failed: %s", e.message);
	*state = k;
	return 0;
}

static void kp_fini(void *state)
{
	karp_free(state);
}

static int kp_node_groups(void *state, prd_cloud_node_group **out, size_t *count, prd_cloud_error *err)
{
	karp *k = state;
	prd_cloud_node_group *v = calloc(k->ngroups + 1, sizeof(*v));
	size_t i;
	if(!v)
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < k->ngroups; i++) {
		if(!(v[i].id = drv_strdup(k->groups[i].id))) {
			drv_release_node_groups(state, v, i);
			return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
		v[i].min_size = 0;
		v[i].max_size = k->groups[i].max;
		v[i].target_size = k->groups[i].live + k->groups[i].tombs;
	}
	*out = v;
	*count = k->ngroups;
	return 0;
}

static int kp_node_group_for_node(void *state, const char *node_json, char **group_id, prd_cloud_error *err)
{
	karp *k = state;
	json_object *node = node_json ? json_tokener_parse(node_json) : NULL;
	size_t i;
	*group_id = NULL;
	if(!node)
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter: the node is not JSON");
	for(i = 0; i < k->ngroups && !*group_id; i++) {
		if(karp_claim_in_group(node, &k->groups[i]) && !(*group_id = drv_strdup(k->groups[i].id))) {
			json_object_put(node);
			return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
	}
	json_object_put(node);
	return 0;
}

/* Read g's NodeClaims afresh: its counts and limits follow. Caller puts
 * *claims. */
static int fresh(karp *k, karp_group *g, json_object **claims, prd_cloud_error *err)
{
	size_t i, n;
	int rc = karp_list_claims(k, g->pool, claims, err);
	if(rc)
		return rc;
	karp_made_update(k, g->pool, *claims);
	g->live = 0;
	n = json_object_array_length(*claims);
	for(i = 0; i < n; i++) {
		json_object *nc = json_object_array_get_idx(*claims, i);
		g->live += karp_claim_in_group(nc, g) && !karp_claim_deleting(nc);
	}
	g->tombs = karp_count_tombs(k, g->id);
	karp_group_limits(k, g, *claims);
	return 0;
}

static int kp_instances(void *state, const char *group_id, prd_cloud_instance **out, size_t *count,
			prd_cloud_error *err)
{
	karp *k = state;
	karp_group *g = find_group(k, group_id);
	json_object *claims = NULL;
	int rc;
	if(!g)
		return no_group(err, group_id);
	rc = fresh(k, g, &claims, err);
	if(!rc)
		rc = karp_instances(k, g, claims, out, count, err);
	json_object_put(claims);
	return rc;
}

static int kp_template_node(void *state, const char *group_id, char **node_json, prd_cloud_error *err)
{
	karp *k = state;
	karp_group *g = find_group(k, group_id);
	return g ? karp_template_node(k, g, node_json, err) : no_group(err, group_id);
}

static int grow(karp *k, const char *group_id, int32_t delta, bool atomic, int32_t expected, const char *owner,
		prd_cloud_error *err)
{
	karp_group *g = find_group(k, group_id);
	json_object *claims = NULL;
	int32_t target;
	int rc;
	if(!g)
		return no_group(err, group_id);
	if(delta <= 0)
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter: %s: increase by %d: must be positive", g->id, (int)delta);
	if((rc = fresh(k, g, &claims, err)))
		return rc;
	json_object_put(claims);
	target = g->live + g->tombs;
	if(expected >= 0 && expected != target)
		return karp_fail(err, PRD_CLOUD_ECONFLICT, "karpenter: %s has %d NodeClaims, not the %d expected", g->id,
				 (int)target, (int)expected);
	if((int64_t)target + delta > g->max)
		return karp_fail(err, PRD_CLOUD_ERANGE,
				 "karpenter: %s: %d more NodeClaims would exceed its maximum size %d (%s)", g->id,
				 (int)delta, (int)g->max, g->limit[0] ? g->limit : "no limit");
	return karp_create_claims(k, g, delta, atomic, owner, err);
}

static int kp_increase(void *state, const prd_cloud_increase *req, prd_cloud_error *err)
{
	if(!req || req->struct_size < offsetof(prd_cloud_increase, fence_key))
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter: increase: malformed request");
	return grow(state, req->group_id, req->delta, req->atomic != 0, req->expected_target, req->owner, err);
}

static int kp_increase_size(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	return grow(state, group_id, delta, false, -1, NULL, err);
}

static int kp_atomic_increase_size(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	return grow(state, group_id, delta, true, -1, NULL, err);
}

static int kp_delete_nodes(void *state, const char *group_id, const char *const *names, size_t count,
			   prd_cloud_error *err)
{
	karp *k = state;
	karp_group *g = find_group(k, group_id);
	return g ? karp_delete_claims(k, g, names, count, true, err) : no_group(err, group_id);
}

static int kp_delete_instances(void *state, const char *group_id, const char *const *ids, size_t count,
			       prd_cloud_error *err)
{
	karp *k = state;
	karp_group *g = find_group(k, group_id);
	return g ? karp_delete_claims(k, g, ids, count, false, err) : no_group(err, group_id);
}

/* Every instance asked for exists as a NodeClaim at once: only failed
 * ones still reported can be taken off the target. */
static int kp_decrease_target_size(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	karp *k = state;
	karp_group *g = find_group(k, group_id);
	if(!g)
		return no_group(err, group_id);
	if(delta <= 0)
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter: %s: decrease by %d: must be positive", g->id, (int)delta);
	g->tombs = karp_count_tombs(k, g->id);
	if(delta > g->tombs)
		return karp_fail(err, PRD_CLOUD_ERANGE,
				 "karpenter: %s: the target cannot go %d below its %d NodeClaims (delete NodeClaims instead)",
				 g->id, (int)(delta - g->tombs), (int)g->live);
	g->tombs -= karp_drop_tombs(k, g, delta);
	return 0;
}

static int kp_decrease(void *state, const prd_cloud_decrease *req, prd_cloud_error *err)
{
	if(!req || req->struct_size < offsetof(prd_cloud_decrease, fence_key))
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter: decrease: malformed request");
	return kp_decrease_target_size(state, req->group_id, req->delta, err);
}

static const prd_cloud_driver DRIVER = {
	.abi_major = PRD_CLOUD_ABI_MAJOR,
	.abi_minor = PRD_CLOUD_ABI_MINOR,
	.struct_size = sizeof(prd_cloud_driver),
	.name = "karpenter",
	.init = kp_init,
	.fini = kp_fini,
	.refresh = kp_refresh,
	.node_groups = kp_node_groups,
	.release_node_groups = drv_release_node_groups,
	.node_group_for_node = kp_node_group_for_node,
	.instances = kp_instances,
	.release_instances = drv_release_instances,
	.template_node = kp_template_node,
	.increase_size = kp_increase_size,
	.atomic_increase_size = kp_atomic_increase_size,
	.delete_nodes = kp_delete_nodes,
	.decrease_target_size = kp_decrease_target_size,
	.release_string = drv_release_string,
	.delete_instances = kp_delete_instances,
	.instance_size = sizeof(prd_cloud_instance),
	.capabilities = PRD_CLOUD_CAP_OWNER_MARK | PRD_CLOUD_CAP_CREATION_TIME,
	.increase = kp_increase,
	.decrease = kp_decrease,
};

const prd_cloud_driver *provreqd_cloud_driver(void);
const prd_cloud_driver *provreqd_cloud_driver(void)
{
	return &DRIVER;
}

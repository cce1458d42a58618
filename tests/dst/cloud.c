/* The DST's cloud: node groups that are asynchronous and unreliable the
 * way real ones are, behind driver ABI 1.3 (and the 1.2 entry points,
 * which the controller may still call).
 *
 * An increase only raises the target; instances appear later (with a
 * placeholder id until the "provider" assigns one, as Cluster API does,
 * when the seed says so), their Nodes register later still; instances fail
 * (out of resources, other); increases are refused (stockout) or time out
 * after taking effect; any call fails transiently; deletes take time.
 *
 * Every driver function gets the calling replica as its state, so the
 * cloud keeps its own record of every instance: who made it (a replica,
 * the outside actor, or nobody: there at the start), the owner token the
 * call passed, the plan it is of and whether the caller's lease was valid
 * when the call took effect. The oracle judges from that record. A call
 * through an entry point without an owner token (increase_size) is
 * attributed to the plan the API shows open on that group for the caller's
 * shard, of that delta (oracle.c, api_increasing): what a token would have
 * said. A delete is judged by what the API shows of the deleted
 * instance's plan when it takes effect (oracle.c, judge_delete). */
#include "config.h"
#include "dst.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

grp *group_of(const char *id)
{
	size_t i;
	for(i = 0; i < NGALL; i++)
		if(dst.g[i].exists && !strcmp(dst.g[i].id, id))
			return &dst.g[i];
	return NULL;
}

/* Instances that exist or are requested (what a group holds). */
int32_t present(const grp *g)
{
	int32_t k = 0;
	size_t i;
	for(i = 0; i < g->n; i++)
		k += !g->v[i].gone;
	return k;
}

/* An intent id (`uid/ns#i`) as the owner token the controller passes. */
void plan_token(const char *intent_id, char *out, size_t len)
{
	size_t i;
	for(i = 0; intent_id[i] && i + 1 < len; i++)
		out[i] = intent_id[i] == '/' ? '.' : intent_id[i] == '#' ? '-' : intent_id[i];
	out[i] = '\0';
}

/* A transient failure of this call? */
static bool transient(prd_cloud_error *err, const char *what)
{
	if(dst.fail_next > 0 || (dst.faults && pct(dst.p_transient))) {
		if(dst.fail_next > 0)
			dst.fail_next--;
		snprintf(err->message, sizeof(err->message), "%s: simulated transient failure (503)", what);
		err->code = PRD_CLOUD_EAGAIN;
		return true;
	}
	return false;
}

static int no_group(const char *gid, prd_cloud_error *err)
{
	snprintf(err->message, sizeof(err->message), "no group %s", gid);
	err->code = PRD_CLOUD_ENOTFOUND;
	return PRD_CLOUD_ENOTFOUND;
}

static int c_refresh(void *st, prd_cloud_error *err)
{
	(void)st;
	(void)err;
	return 0;
}

static int c_groups(void *st, prd_cloud_node_group **out, size_t *n, prd_cloud_error *err)
{
	prd_cloud_node_group *v;
	size_t i;
	call_begin(st, false);
	if(transient(err, "node groups"))
		return PRD_CLOUD_EAGAIN;
	v = calloc(NGALL, sizeof(*v));
	if(!v)
		return PRD_CLOUD_ENOMEM;
	*n = 0;
	for(i = 0; i < NGALL; i++) {
		if(!dst.g[i].exists)
			continue;
		v[*n].id = strdup(dst.g[i].id);
		v[*n].min_size = 0;
		v[*n].max_size = dst.g[i].max;
		v[(*n)++].target_size = dst.g[i].target;
	}
	*out = v;
	crash_point(st, true);
	return 0;
}

static void c_release_groups(void *st, prd_cloud_node_group *v, size_t n)
{
	size_t i;
	(void)st;
	for(i = 0; i < n; i++)
		free(v[i].id);
	free(v);
}

static void list_one(prd_cloud_instance *o, const inst *x)
{
	o->id = strdup(x->id);
	o->node_name = x->node[0] ? strdup(x->node) : NULL;
	o->state = x->deleting ? PRD_CLOUD_INSTANCE_DELETING
		 : x->node[0]  ? PRD_CLOUD_INSTANCE_RUNNING
			       : PRD_CLOUD_INSTANCE_CREATING;
	o->error_class = x->errclass;
	if(x->errclass) {
		o->error_code = strdup(x->errclass == PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES ? "OutOfCapacity"
											 : "InternalError");
		o->error_message = strdup("simulated instance failure");
	}
	/* --no-owner-marks: a cloud that takes the marks and loses them. */
	o->owner = x->owner[0] && !dst.no_marks ? strdup(x->owner) : NULL;
	o->created_ns = x->created_ns;
}

/* The single-controller mode keeps the cloud of old, which listed an
 * instance only once created; with several actors a requested one is
 * listed too (as ABI 1.3 asks), under its placeholder id. */
static int c_instances(void *st, const char *gid, prd_cloud_instance **out, size_t *n, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	prd_cloud_instance *v;
	size_t i, k = 0;
	call_begin(st, false);
	if(!g)
		return no_group(gid, err);
	if(transient(err, "instances"))
		return PRD_CLOUD_EAGAIN;
	v = calloc(g->n + 1, sizeof(*v));
	if(!v)
		return PRD_CLOUD_ENOMEM;
	for(i = 0; i < g->n; i++)
		if(!g->v[i].gone && (g->v[i].appeared || dst.multi))
			list_one(&v[k++], &g->v[i]);
	*out = v;
	*n = k;
	crash_point(st, true);
	return 0;
}

static void c_release_instances(void *st, prd_cloud_instance *v, size_t n)
{
	size_t i;
	(void)st;
	for(i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].node_name);
		free(v[i].error_code);
		free(v[i].error_message);
		free(v[i].owner);
	}
	free(v);
}

static int c_template(void *st, const char *gid, char **json, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	char tj[512];
	(void)st;
	if(!g)
		return no_group(gid, err);
	snprintf(tj, sizeof(tj),
		 "{\"metadata\":{\"name\":\"t-%s\",\"labels\":{\"group\":\"%s\"}},\"status\":{\"allocatable\":"
		 "{\"cpu\":\"%s\",\"memory\":\"32Gi\",\"pods\":\"110\"}}}",
		 g->id, g->id, g->cpu);
	*json = strdup(tj);
	return *json ? 0 : PRD_CLOUD_ENOMEM;
}

/* The cloud accepts a new target: `d` instances are requested, recorded
 * as the creator's. */
static void new_instances(grp *g, int32_t d, int creator, const char *owner, const char *plan, bool lease_ok)
{
	while(d-- > 0 && g->n < MAXI) {
		inst *x = &g->v[g->n++];
		int k = ++dst.seq;
		memset(x, 0, sizeof(*x));
		snprintf(x->provider, sizeof(x->provider), "sim://%s/i-%d", g->id, k);
		if(dst.placeholders && pct(50))
			snprintf(x->id, sizeof(x->id), "sim://%s/pending-%d", g->id, k);
		else
			memcpy(x->id, x->provider, sizeof(x->id));
		x->created_ns = now_ns();
		x->creator = creator;
		snprintf(x->owner, sizeof(x->owner), "%s", owner ? owner : "");
		snprintf(x->plan, sizeof(x->plan), "%s", plan ? plan : "");
		x->lease_ok = lease_ok;
		x->t_appear = now_ns() + rnd_in(0, 40) * SEC;
		if(dst.faults && pct(dst.p_inst_fail))
			x->errclass = pct(70) ? PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES : PRD_CLOUD_ERRCLASS_OTHER;
		else
			x->t_register = x->t_appear + rnd_in(5, 120) * SEC;
	}
}

/* An owner token as the ABI allows it: 1..63 of [A-Za-z0-9._-], first and
 * last alphanumeric. */
static bool token_ok(const char *t)
{
	size_t i, n = strlen(t);
	if(n < 1 || n > 63)
		return false;
	for(i = 0; i < n; i++) {
		char c = t[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if(!alnum && ((i == 0 || i == n - 1) || (c != '.' && c != '_' && c != '-')))
			return false;
	}
	return true;
}

/* The election a fencing key names (the lease's name: tests/dst/replica.c). */
static int fence_slot(const char *key)
{
	if(key && !strncmp(key, "lease-", 6) && key[6] >= '0' && key[6] < '0' + NLEASES && !key[7])
		return key[6] - '0';
	return -1;
}

/* ABI 1.4: a call carrying an older term than the group has seen is
 * refused; a newer one is recorded. Checked when the call takes effect. */
static int term_check(grp *g, const char *key, uint64_t term, const char *what, prd_cloud_error *err)
{
	int k;
	if(!term)
		return 0;
	k = fence_slot(key);
	if(k < 0) {
		snprintf(err->message, sizeof(err->message), "%s: unknown fencing key %s", what, key ? key : "(null)");
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	if(g->fence[k] > term) {
		snprintf(err->message, sizeof(err->message), "%s: group %s has seen term %llu of %s, newer than %llu",
			 what, g->id, (unsigned long long)g->fence[k], key, (unsigned long long)term);
		err->code = PRD_CLOUD_ECONFLICT;
		return PRD_CLOUD_ECONFLICT;
	}
	g->fence[k] = term;
	return 0;
}

/* One increase, whichever entry point: `expected` < 0 is unconditional.
 * The call is decided when it begins (a stall there delays its effect); the
 * target is compared when it takes effect. */
static int increase(replica *r, const char *gid, int32_t d, int32_t expected, const char *owner,
		    const char *fkey, uint64_t fterm, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	char plan[128] = "";
	bool ambiguous, ok, fenced = !fence_says(r);
	size_t first;
	call_begin(r, true);
	if(!g)
		return no_group(gid, err);
	if(transient(err, "increase"))
		return PRD_CLOUD_EAGAIN;
	if(dst.faults && pct(dst.p_stockout)) {
		snprintf(err->message, sizeof(err->message), "ZONE_RESOURCE_POOL_EXHAUSTED: no capacity for %d nodes", d);
		err->code = PRD_CLOUD_EIO;
		return PRD_CLOUD_EIO;
	}
	if(term_check(g, fkey, fterm, "increase", err)) {
		vlog("cloud: %s refused %s's increase +%d: %s", g->id, r->name, d, err->message);
		return err->code;
	}
	if(expected >= 0 && g->target != expected) {
		snprintf(err->message, sizeof(err->message), "target is %d, not the expected %d", g->target, expected);
		err->code = PRD_CLOUD_ECONFLICT;
		vlog("cloud: %s refused %s's increase +%d: target %d, expected %d", g->id, r->name, d, g->target,
		     expected);
		return PRD_CLOUD_ECONFLICT;
	}
	if(d <= 0 || g->target + d > g->max) {
		snprintf(err->message, sizeof(err->message), "size %d would exceed max %d", g->target + d, g->max);
		err->code = PRD_CLOUD_ERANGE;
		return PRD_CLOUD_ERANGE;
	}
	if(owner)
		snprintf(plan, sizeof(plan), "%s", owner);
	else
		api_increasing(r, g->id, d, plan, sizeof(plan));
	ok = lease_valid(r);
	ambiguous = dst.faults && pct(dst.p_ambiguous);
	g->target += d;
	first = g->n;
	new_instances(g, d, r->idx, owner, plan, ok);
	for(; first < g->n; first++)
		g->v[first].fenced = fenced;
	vlog("cloud: %s target +%d = %d by %s for %s%s%s%s", g->id, d, g->target, r->name, plan[0] ? plan : "no plan",
	     ok ? "" : " (its lease had expired)", fenced ? " (decided past its renew deadline)" : "",
	     ambiguous ? " (answer lost)" : "");
	judge_increase(r, g, plan, d, ok, fenced);
	crash_point(r, true);
	if(ambiguous) {
		snprintf(err->message, sizeof(err->message), "increase: timed out waiting for the answer");
		err->code = PRD_CLOUD_EAGAIN;
		return PRD_CLOUD_EAGAIN;
	}
	return 0;
}

static int c_increase_size(void *st, const char *gid, int32_t d, prd_cloud_error *err)
{
	return increase(st, gid, d, -1, NULL, NULL, 0, err);
}

static int c_increase(void *st, const prd_cloud_increase *req, prd_cloud_error *err)
{
	if(req->struct_size < sizeof(*req) || !req->group_id || (req->owner && !token_ok(req->owner)) ||
	   req->expected_target < -1) {
		snprintf(err->message, sizeof(err->message), "bad increase request (owner %s)",
			 req->owner ? req->owner : "none");
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	bool termed = req->struct_size >= offsetof(prd_cloud_increase, fence_term) + sizeof(req->fence_term);
	return increase(st, req->group_id, req->delta, req->expected_target, req->owner,
			termed ? req->fence_key : NULL, termed ? req->fence_term : 0, err);
}

static void start_delete(replica *r, grp *g, inst *x, const char *how)
{
	if(x->gone || x->deleting)
		return;
	if(r)
		judge_delete(r, g, x, how);
	if(!x->appeared) {
		x->gone = true;
	} else {
		x->deleting = true;
		x->t_gone = now_ns() + rnd_in(2, 40) * SEC;
	}
	g->target--;
}

static int decrease(replica *r, const char *gid, int32_t d, int32_t expected, const char *fkey, uint64_t fterm,
		    prd_cloud_error *err)
{
	grp *g = group_of(gid);
	int32_t pending = 0, existing = 0;
	size_t i;
	call_begin(r, true);
	if(!g)
		return no_group(gid, err);
	if(transient(err, "decrease target"))
		return PRD_CLOUD_EAGAIN;
	if(term_check(g, fkey, fterm, "decrease", err)) {
		vlog("cloud: %s refused %s's decrease -%d: %s", g->id, r->name, d, err->message);
		return err->code;
	}
	if(expected >= 0 && g->target != expected) {
		snprintf(err->message, sizeof(err->message), "target is %d, not the expected %d", g->target, expected);
		err->code = PRD_CLOUD_ECONFLICT;
		return PRD_CLOUD_ECONFLICT;
	}
	for(i = 0; i < g->n; i++) {
		if(g->v[i].gone || g->v[i].deleting)
			continue;
		if(g->v[i].appeared)
			existing++;
		else
			pending++;
	}
	if(d <= 0 || g->target - d < existing) {
		snprintf(err->message, sizeof(err->message), "target %d would be below the %d existing instances",
			 g->target - d, existing);
		err->code = PRD_CLOUD_ERANGE;
		return PRD_CLOUD_ERANGE;
	}
	g->target -= d;
	/* Requested instances beyond the new target are cancelled, newest
	 * first, whoever asked for them: a cloud cannot tell. */
	for(i = g->n; i-- > 0 && existing + pending > g->target;) {
		inst *x = &g->v[i];
		if(!x->gone && !x->deleting && !x->appeared) {
			judge_delete(r, g, x, "cancelled by a target decrease");
			x->gone = true;
			pending--;
		}
	}
	vlog("cloud: %s target -%d = %d by %s", g->id, d, g->target, r->name);
	crash_point(r, true);
	return 0;
}

static int c_decrease(void *st, const char *gid, int32_t d, prd_cloud_error *err)
{
	return decrease(st, gid, d, -1, NULL, 0, err);
}

static int c_decrease_if(void *st, const char *gid, int32_t d, int32_t expected, prd_cloud_error *err)
{
	if(expected < 0) {
		snprintf(err->message, sizeof(err->message), "decrease_target_size_if: expected target %d", expected);
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	return decrease(st, gid, d, expected, NULL, 0, err);
}

static int c_decrease_req(void *st, const prd_cloud_decrease *req, prd_cloud_error *err)
{
	if(req->struct_size < sizeof(*req) || !req->group_id || req->expected_target < -1) {
		snprintf(err->message, sizeof(err->message), "bad decrease request");
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	return decrease(st, req->group_id, req->delta, req->expected_target, req->fence_key, req->fence_term, err);
}

/* ABI 1.4: record a term on the group (a write to the group, which can
 * fail and stall like any other). */
/* ABI 1.6: fence() with no group records the term for group creations. */
static int fence_creations(replica *r, const char *key, uint64_t term, prd_cloud_error *err)
{
	int k = fence_slot(key);
	if(transient(err, "fence creations"))
		return PRD_CLOUD_EAGAIN;
	if(k < 0 || !term) {
		snprintf(err->message, sizeof(err->message), "fence: unknown fencing key %s or term 0", key ? key : "(null)");
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	if(dst.create_fence[k] > term) {
		snprintf(err->message, sizeof(err->message), "fence: creations have seen term %llu of %s, newer than %llu",
			 (unsigned long long)dst.create_fence[k], key, (unsigned long long)term);
		err->code = PRD_CLOUD_ECONFLICT;
		vlog("cloud: creations fenced by %s with term %llu of %s: refused", r->name, (unsigned long long)term, key);
		return PRD_CLOUD_ECONFLICT;
	}
	dst.create_fence[k] = term;
	vlog("cloud: creations fenced by %s with term %llu of %s", r->name, (unsigned long long)term, key);
	crash_point(r, true);
	return 0;
}

static int c_fence(void *st, const char *gid, const char *key, uint64_t term, prd_cloud_error *err)
{
	replica *r = st;
	grp *g;
	int rc;
	call_begin(r, true);
	if(!gid)
		return fence_creations(r, key, term, err);
	g = group_of(gid);
	if(!g)
		return no_group(gid, err);
	if(transient(err, "fence"))
		return PRD_CLOUD_EAGAIN;
	if(!term) {
		snprintf(err->message, sizeof(err->message), "fence: term 0");
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	rc = term_check(g, key, term, "fence", err);
	vlog("cloud: %s fenced by %s with term %llu of %s%s", g->id, r->name, (unsigned long long)term, key,
	     rc ? ": refused" : "");
	crash_point(r, true);
	return rc;
}

/* Delete the instances named by id, or by node name. An id the cloud does
 * not know (a placeholder since replaced) deletes nothing. */
static int delete_matching(replica *r, const char *gid, const char *const *keys, size_t n, bool by_node,
			   const char *fkey, uint64_t fterm, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	size_t i, k;
	call_begin(r, true);
	if(!g)
		return no_group(gid, err);
	if(transient(err, by_node ? "delete nodes" : "delete instances"))
		return PRD_CLOUD_EAGAIN;
	if(term_check(g, fkey, fterm, "delete", err)) {
		vlog("cloud: %s refused %s's delete of %zu instances: %s", g->id, r->name, n, err->message);
		return err->code;
	}
	for(i = 0; i < n; i++)
		for(k = 0; k < g->n; k++)
			if(!g->v[k].gone && !strcmp(by_node ? g->v[k].node : g->v[k].id, keys[i]))
				start_delete(r, g, &g->v[k], "deleted");
	vlog("cloud: %s delete %zu %s by %s, target %d", g->id, n, by_node ? "nodes" : "instances", r->name, g->target);
	crash_point(r, true);
	return 0;
}

static int c_delete_instances(void *st, const char *gid, const char *const *ids, size_t n, prd_cloud_error *err)
{
	return delete_matching(st, gid, ids, n, false, NULL, 0, err);
}

static int c_delete_nodes(void *st, const char *gid, const char *const *names, size_t n, prd_cloud_error *err)
{
	return delete_matching(st, gid, names, n, true, NULL, 0, err);
}

static int c_delete_fenced(void *st, const prd_cloud_delete *req, prd_cloud_error *err)
{
	if(req->struct_size < sizeof(*req) || !req->group_id || (req->count && !req->instance_ids)) {
		snprintf(err->message, sizeof(err->message), "bad delete request");
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	return delete_matching(st, req->group_id, req->instance_ids, req->count, false, req->fence_key,
			       req->fence_term, err);
}

static void c_release_string(void *st, char *s)
{
	(void)st;
	free(s);
}

/* ---- ABI 1.5: node auto-provisioning ---------------------------------- */

/* One shape: 16 cpu, which only the `huge` pods (12 cpu) need. */
#define SHAPE "xl"
#define SHAPE_CPU "16"
#define SHAPE_MAX 4

static int c_shapes(void *st, prd_cloud_shape **out, size_t *n, prd_cloud_error *err)
{
	prd_cloud_shape *v;
	call_begin(st, false);
	*out = NULL;
	*n = 0;
	if(transient(err, "shapes"))
		return PRD_CLOUD_EAGAIN;
	if(!dst.nap)
		return 0;
	v = calloc(1, sizeof(*v));
	if(!v)
		return PRD_CLOUD_ENOMEM;
	v->name = strdup(SHAPE);
	v->node_json = strdup("{\"metadata\":{\"labels\":{\"shape\":\"" SHAPE "\"}},\"status\":{\"allocatable\":"
			      "{\"cpu\":\"" SHAPE_CPU "\",\"memory\":\"64Gi\",\"pods\":\"110\"}}}");
	v->zones = NULL;
	v->price_micros = 2000000;
	v->max_size = SHAPE_MAX;
	*out = v;
	*n = 1;
	crash_point(st, true);
	return v->name && v->node_json ? 0 : PRD_CLOUD_ENOMEM;
}

static void c_release_shapes(void *st, prd_cloud_shape *v, size_t n)
{
	size_t i;
	(void)st;
	for(i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].node_json);
		free(v[i].zones);
	}
	free(v);
}

/* Creating fails like an increase does (transient, out of capacity), and
 * its answer may be lost after it took effect. */
static int c_create_group(void *st, const prd_cloud_group_create *req, prd_cloud_error *err)
{
	replica *r = st;
	grp *g;
	size_t i;
	int k;
	bool ambiguous;
	call_begin(r, true);
	if(req->struct_size < sizeof(*req) || !req->group_id || !req->owner || !token_ok(req->owner) ||
	   !req->shape || strcmp(req->shape, SHAPE) || req->max_size < 1 || req->max_size > SHAPE_MAX ||
	   strlen(req->group_id) >= sizeof(g->idbuf)) {
		snprintf(err->message, sizeof(err->message), "bad create_group request");
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	if(transient(err, "create group"))
		return PRD_CLOUD_EAGAIN;
	/* ABI 1.6: refused under a newer term, checked when the call takes
	 * effect like every fenced call. */
	if(req->fence_term && (k = fence_slot(req->fence_key)) >= 0 && dst.create_fence[k] > req->fence_term) {
		snprintf(err->message, sizeof(err->message), "create group: creations have seen term %llu of %s, newer than %llu",
			 (unsigned long long)dst.create_fence[k], req->fence_key, (unsigned long long)req->fence_term);
		err->code = PRD_CLOUD_ECONFLICT;
		vlog("cloud: refused %s's creation of %s: %s", r->name, req->group_id, err->message);
		return PRD_CLOUD_ECONFLICT;
	}
	if((g = group_of(req->group_id))) {
		if(g->nap && !strcmp(g->owner, req->owner))
			return term_check(g, req->fence_key, req->fence_term, "create group", err);
		snprintf(err->message, sizeof(err->message), "group %s exists", req->group_id);
		err->code = PRD_CLOUD_ECONFLICT;
		return PRD_CLOUD_ECONFLICT;
	}
	if(dst.faults && pct(dst.p_stockout)) {
		snprintf(err->message, sizeof(err->message), "QUOTA_EXCEEDED: cannot create a group of %s", SHAPE);
		err->code = PRD_CLOUD_EIO;
		return PRD_CLOUD_EIO;
	}
	for(i = NGROUPS; i < NGALL && dst.g[i].id; i++)
		;
	if(i == NGALL) {
		snprintf(err->message, sizeof(err->message), "no more groups (simulated quota)");
		err->code = PRD_CLOUD_EIO;
		return PRD_CLOUD_EIO;
	}
	g = &dst.g[i];
	memset(g, 0, sizeof(*g));
	snprintf(g->idbuf, sizeof(g->idbuf), "%s", req->group_id);
	snprintf(g->owner, sizeof(g->owner), "%s", req->owner);
	g->id = g->idbuf;
	g->cpu = SHAPE_CPU;
	g->max = req->max_size;
	g->exists = true;
	g->nap = true;
	/* Fenced from its first moment: every election's creation term, and
	 * the caller's where higher. */
	memcpy(g->fence, dst.create_fence, sizeof(g->fence));
	if(req->fence_term && (k = fence_slot(req->fence_key)) >= 0 && g->fence[k] < req->fence_term)
		g->fence[k] = req->fence_term;
	vlog("cloud: %s created group %s for %s", r->name, g->id, g->owner);
	judge_create(r, g);
	ambiguous = dst.faults && pct(dst.p_ambiguous);
	crash_point(r, true);
	if(ambiguous) {
		snprintf(err->message, sizeof(err->message), "create group: timed out waiting for the answer");
		err->code = PRD_CLOUD_EAGAIN;
		return PRD_CLOUD_EAGAIN;
	}
	return 0;
}

static int c_delete_group(void *st, const char *gid, prd_cloud_error *err)
{
	replica *r = st;
	grp *g = group_of(gid);
	call_begin(r, true);
	if(transient(err, "delete group"))
		return PRD_CLOUD_EAGAIN;
	if(!g)
		return 0;
	if(!g->nap) {
		snprintf(err->message, sizeof(err->message), "group %s was not made by create_group", gid);
		err->code = PRD_CLOUD_EINVAL;
		return PRD_CLOUD_EINVAL;
	}
	if(present(g) || g->target) {
		snprintf(err->message, sizeof(err->message), "group %s is not empty", gid);
		err->code = PRD_CLOUD_ERANGE;
		return PRD_CLOUD_ERANGE;
	}
	g->exists = false;
	vlog("cloud: %s deleted group %s", r->name, g->id);
	crash_point(r, true);
	return 0;
}

static int c_group_owner(void *st, const char *gid, char **owner, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	(void)st;
	*owner = NULL;
	if(!g)
		return no_group(gid, err);
	if(g->nap && !(*owner = strdup(g->owner)))
		return PRD_CLOUD_ENOMEM;
	return 0;
}

/* ABI 1.7: the highest term of `key` a group (or, gid NULL, the group
 * creations) has seen. A read: no crash or stall point. */
static int c_fence_recorded(void *st, const char *gid, const char *key, uint64_t *term, prd_cloud_error *err)
{
	grp *g = gid ? group_of(gid) : NULL;
	int k = fence_slot(key);
	(void)st;
	*term = 0;
	if(gid && !g)
		return no_group(gid, err);
	if(k >= 0)
		*term = g ? g->fence[k] : dst.create_fence[k];
	return 0;
}

const prd_cloud_driver sim_driver = {
	.abi_major = PRD_CLOUD_ABI_MAJOR,
	.abi_minor = PRD_CLOUD_ABI_MINOR,
	.struct_size = sizeof(prd_cloud_driver),
	.name = "dst-cloud",
	.refresh = c_refresh,
	.node_groups = c_groups,
	.release_node_groups = c_release_groups,
	.instances = c_instances,
	.release_instances = c_release_instances,
	.template_node = c_template,
	.increase_size = c_increase_size,
	.delete_nodes = c_delete_nodes,
	.decrease_target_size = c_decrease,
	.release_string = c_release_string,
	.delete_instances = c_delete_instances,
	/* ABI 1.3: the host steps through instances() by this. */
	.instance_size = sizeof(prd_cloud_instance),
	.capabilities = PRD_CLOUD_CAP_CONDITIONAL | PRD_CLOUD_CAP_OWNER_MARK | PRD_CLOUD_CAP_CREATION_TIME |
			PRD_CLOUD_CAP_FENCE,
	.increase = c_increase,
	.decrease_target_size_if = c_decrease_if,
	/* ABI 1.4 */
	.fence = c_fence,
	.decrease = c_decrease_req,
	.delete_fenced = c_delete_fenced,
	/* ABI 1.5 */
	.shape_size = sizeof(prd_cloud_shape),
	.shapes = c_shapes,
	.release_shapes = c_release_shapes,
	.create_group = c_create_group,
	.delete_group = c_delete_group,
	.group_owner = c_group_owner,
	/* ABI 1.7 */
	.fence_recorded = c_fence_recorded,
};

/* ----------------------------------------------- the cloud on its own */

static void register_node(grp *g, inst *x)
{
	char y[768];
	snprintf(x->node, sizeof(x->node), "%s-n%d", g->id, ++dst.seq);
	snprintf(y, sizeof(y),
		 "metadata: {name: %s, labels: {kubernetes.io/hostname: %s, group: %s}}\n"
		 "spec: {providerID: \"%s\"}\n"
		 "status:\n  allocatable: {cpu: \"%s\", memory: 32Gi, pods: \"110\"}\n"
		 "  conditions: [{type: Ready, status: \"True\"}]\n",
		 x->node, x->node, g->id, x->id, g->cpu);
	post("/api/v1/nodes", y);
}

static void delete_node(const char *name)
{
	char path[200];
	prd_err e;
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
	kube_api_call(&dst.raw_api, "DELETE", path, NULL, NULL, NULL, NULL, &e);
}

/* Instances there at the start: `running` registered, maybe an old failed
 * one. Nobody's plan's. */
void cloud_initial(grp *g, int running, bool failed_one)
{
	int k;
	for(k = 0; k < running + failed_one; k++) {
		inst *x = &g->v[g->n++];
		memset(x, 0, sizeof(*x));
		snprintf(x->id, sizeof(x->id), "sim://%s/i-%d", g->id, ++dst.seq);
		memcpy(x->provider, x->id, sizeof(x->provider));
		x->appeared = true;
		x->creator = BY_START;
		x->lease_ok = true;
		if(k < running)
			register_node(g, x);
		else
			x->errclass = PRD_CLOUD_ERRCLASS_OTHER;
	}
	g->target = present(g);
}

/* The cloud moves on to now: instances appear (taking their provider id),
 * register, finish deleting. */
void cloud_progress(void)
{
	int64_t now = now_ns();
	size_t gi, i;
	if(dst.profile != PROF_ABSTRACT) {
		world_progress();
		return;
	}
	for(gi = 0; gi < NGALL; gi++) {
		grp *g = &dst.g[gi];
		for(i = 0; i < g->n; i++) {
			inst *x = &g->v[i];
			if(x->gone)
				continue;
			if(x->deleting) {
				if(now >= x->t_gone) {
					x->gone = true;
					/* The outside actor's deletion is nobody's fault
					 * here, also for a request that came to hold room
					 * on the Node after the deletion began (the Node
					 * was in the API, Ready, until now). */
					if(x->node[0] && x->creator == BY_OUTSIDE)
						room_lost(x->node);
					if(x->node[0])
						delete_node(x->node);
				}
				continue;
			}
			if(!x->appeared && now >= x->t_appear) {
				x->appeared = true;
				memcpy(x->id, x->provider, sizeof(x->id));
			}
			if(x->appeared && !x->errclass && !x->node[0] && now >= x->t_register)
				register_node(g, x);
		}
	}
}

bool cloud_settled(void)
{
	size_t gi, i;
	if(dst.profile != PROF_ABSTRACT)
		return world_settled();
	for(gi = 0; gi < NGALL; gi++)
		for(i = 0; i < dst.g[gi].n; i++) {
			const inst *x = &dst.g[gi].v[i];
			if(!x->gone && (x->deleting || !x->appeared || (!x->errclass && !x->node[0])))
				return false;
		}
	return true;
}

/* The outside actor (cluster-autoscaler, a MachineHealthCheck): scales a
 * group up by an instance or two, deletes one of its own, or replaces one
 * (deleted and made anew, the target unchanged). It never passes an owner
 * token and touches only what it made; it keeps at most two instances per
 * group, so the plans still find room. */
void outside_act(void)
{
	grp *g = &dst.g[rnd_in(0, NGROUPS - 1)];
	inst *own[MAXI];
	size_t i, n = 0;
	int op = (int)rnd_in(0, 2);
	if(dst.profile != PROF_ABSTRACT) {
		world_outside();
		return;
	}
	for(i = 0; i < g->n; i++)
		if(g->v[i].creator == BY_OUTSIDE && !g->v[i].gone && !g->v[i].deleting)
			own[n++] = &g->v[i];
	if(op == 0 || n == 0) {
		int32_t k = (int32_t)rnd_in(1, 2);
		if(k > 2 - (int32_t)n)
			k = 2 - (int32_t)n;
		if(k > g->max - g->target)
			k = g->max - g->target;
		if(k <= 0)
			return;
		g->target += k;
		new_instances(g, k, BY_OUTSIDE, NULL, NULL, true);
		vlog("outside: %s target +%d = %d", g->id, k, g->target);
		return;
	}
	{
		inst *x = own[rnd_in(0, (int64_t)n - 1)];
		if(x->node[0])
			room_lost(x->node);
		start_delete(NULL, g, x, "deleted");
	}
	if(op == 2) {
		g->target++;
		new_instances(g, 1, BY_OUTSIDE, NULL, NULL, true);
	}
	vlog("outside: %s %s one of its instances, target %d", g->id, op == 2 ? "replaced" : "deleted", g->target);
}

/* ------------------------------------------------------- self-test */

/* The ABI 1.3 entry points, which the controller may not call yet, on a
 * fresh world whose ledger holds one open plan: a conditional increase
 * meets a moved target and changes nothing; one that matches marks its
 * instances; a bad token is refused; the listing reports owner and
 * creation time; decrease_target_size_if compares too. Then the oracle is
 * shown two calls it must object to. Returns what went wrong, or NULL. */
const char *cloud_selftest(replica *r)
{
	const char tok[] = "00000000-0000-4000-8000-000000000001.1714557600000000000-0";
	prd_cloud_increase in = { sizeof(in), "ga", 2, 1, 0, tok, NULL, 0 };
	prd_cloud_error e;
	prd_cloud_instance *v = NULL;
	grp *g = group_of("ga");
	int32_t before;
	size_t n = 0, i, marked = 0, start = g->n;
	plan_rec *p = &dst.plans[dst.nplans++];
	cloud_initial(g, 1, false);
	before = g->target;
	memset(p, 0, sizeof(*p));
	snprintf(p->token, sizeof(p->token), "%s", tok);
	snprintf(p->group, sizeof(p->group), "ga");
	snprintf(p->phase, sizeof(p->phase), "increasing");
	p->delta = 2;
	dst.faults = false;
	in.expected_target = before + 1;
	if(c_increase(r, &in, &e) != PRD_CLOUD_ECONFLICT || g->target != before || present(g) != before)
		return "a conditional increase with a stale target changed the group";
	in.owner = "bad/token";
	in.expected_target = before;
	if(c_increase(r, &in, &e) != PRD_CLOUD_EINVAL || g->target != before)
		return "an increase with an invalid owner token was taken";
	in.owner = tok;
	if(c_increase(r, &in, &e) || g->target != before + 2 || present(g) != before + 2)
		return "a conditional increase with the right target was not taken";
	if(c_decrease_if(r, "ga", 1, before, &e) != PRD_CLOUD_ECONFLICT || g->target != before + 2)
		return "decrease_target_size_if with a stale target changed the group";
	dst.multi = true; /* list requested instances too */
	if(c_instances(r, "ga", &v, &n, &e))
		return "instances() failed";
	for(i = 0; i < n; i++)
		marked += v[i].owner && !strcmp(v[i].owner, tok) && v[i].created_ns == now_ns();
	c_release_instances(r, v, n);
	dst.multi = false;
	if(marked != 2)
		return "instances() does not report the owner token and creation time of what the call made";
	if(dst.seed_failed)
		return "the oracle objected to a plan's own increase";
	/* And the oracle objects to what it must: an increase for a plan no
	 * request records, a delete of an instance there at the start. */
	dst.quiet = true;
	in.owner = "no-such-plan";
	in.expected_target = -1;
	c_increase(r, &in, &e);
	if(!dst.seed_failed)
		return "the oracle let an increase for a plan the API never recorded pass";
	dst.seed_failed = false;
	c_delete_instances(r, "ga", (const char *const[]){ g->v[start].id }, 1, &e);
	if(!dst.seed_failed || g->v[start].creator != BY_START)
		return "the oracle let provreqd delete an instance there at the start";
	dst.quiet = false;
	dst.seed_failed = false;
	return NULL;
}

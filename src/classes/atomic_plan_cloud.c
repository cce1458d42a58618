/* The atomic class's cloud calls (increase, decrease) and the sweep of calls that landed after their plan. */
#include "classes/atomic_plan_int.h"
#include "classes/nap.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- calls that landed after their plan ended -------------------------- */

/* The intent id an owner token names (pr_owner_token reversed: the first
 * '.' was the '/', the last '-' the '#'). False when it is not a token of
 * provreqd's. */
static bool token_intent(const char *token, char *out, size_t len)
{
	const char *dot = strchr(token, '.'), *dash = strrchr(token, '-');
	size_t n = strlen(token), i;
	if(!dot || !dash || dash < dot || n >= len)
		return false;
	for(i = 0; i <= n; i++)
		out[i] = token + i == dot ? '/' : token + i == dash ? '#' : token[i];
	return true;
}

/* Did this store's own rollback end the intent (not a closure that only
 * says this replica's call did nothing, which another replica's plan of
 * the same id may have completed)? */
static bool rolled_back_here(const state_intent *in)
{
	static const char *const no_effect[] = {
		"interrupted", "the group's target moved", "another group of the plan", "the plan could not be written",
		"not recorded", "ended by another replica", NULL
	};
	size_t i;
	for(i = 0; no_effect[i]; i++)
		if(in->last_error && !strncmp(in->last_error, no_effect[i], strlen(no_effect[i])))
			return false;
	return true;
}

/* Delete the listed instances of g whose owner token names an intent this
 * store closed as rolled back at least `grace` ago: a call of that plan
 * landed after the plan ended (a stalled replica's late call that no
 * conditional could stop, an answer lost to a timeout). */
static void sweep_group(const pr_class_host *h, pr_class_group *g, int64_t grace)
{
	const char **ids = arena_array(h->ar, g->ninst + 1, sizeof(*ids));
	size_t i, nd = 0;
	hmap seen; /* intent id -> (void *)1 late, (void *)2 not */
	hmap_init(&seen, NULL);
	for(i = 0; ids && i < g->ninst; i++) {
		const pr_class_inst *x = &g->inst[i];
		char id[AT_OWNER_MAX + 4];
		void *v;
		state_intent in;
		if(!x->owner || x->state == PRD_CLOUD_INSTANCE_DELETING || !token_intent(x->owner, id, sizeof(id)))
			continue;
		if(!(v = hmap_get(&seen, id))) {
			v = (void *)2;
			if(state_intent_get(h->db, id, &in, NULL) == 0) {
				if(in.phase == STATE_PHASE_ROLLED_BACK && in.updated_ns < h->now - grace &&
				   rolled_back_here(&in))
					v = (void *)1;
				state_intent_clear(&in);
			}
			hmap_put(&seen, id, v);
		}
		if(v == (void *)1)
			ids[nd++] = x->id;
	}
	hmap_free(&seen);
	if(nd && h->may_act(h->ctx) && pr_group_deletes_ids(g)) {
		prd_cloud_error de;
		memset(&de, 0, sizeof(de));
		metrics_counter_add(M_PLAN_CONFLICTS, METRICS_L(g->id, "late_call"), (double)nd);
		log_warn("deleting instances of scale-up plans that had already ended (a late call)", "group", g->id,
			 "instances", LOGI(nd), "result",
			 pr_group_delete(g, ids, nd, &de) ? de.message : "ok");
		g->target_stale = true;
	}
}

void at_sweep_late(const pr_class_host *h, int64_t every, int64_t grace)
{
	at_memo *m = at__memo_of(h);
	size_t i;
	if(!h->db || !m || h->now - m->swept_at < every)
		return;
	m->swept_at = h->now;
	for(i = 0; i < h->ngroups; i++) {
		pr_class_group *g = &h->groups[i];
		if(at_own_of_group(g) == AT_OWN_MARK && pr_group_list(g, NULL) == 0)
			sweep_group(h, g, grace);
	}
}

/* ---- asking the cloud --------------------------------------------------- */

int at_increase(pr_class_group *g, const state_intent *in, int32_t delta, int32_t expected, prd_cloud_error *de)
{
	const prd_cloud_driver *api = g->drv->api;
	int rc;
	memset(de, 0, sizeof(*de));
	/* A group the plan creates first (node auto-provisioning). */
	if(g->nap_new && (rc = nap_create(g, de)))
		return rc;
	if(CLOUD_DRIVER_HAS(api, increase) && api->increase) {
		char token[AT_OWNER_MAX];
		prd_cloud_increase rq;
		memset(&rq, 0, sizeof(rq));
		pr_owner_token(in->plan_id, token);
		rq.struct_size = sizeof(rq);
		rq.group_id = g->id;
		rq.delta = delta;
		rq.atomic = api->atomic_increase_size != NULL;
		rq.expected_target = expected;
		rq.owner = token;
		rq.fence_key = g->fence_key;
		rq.fence_term = g->fence_term; /* (a 1.3 driver does not read them) */
		rc = api->increase(g->drv->state, &rq, de);
	} else {
		rc = api->atomic_increase_size ? api->atomic_increase_size(g->drv->state, g->id, delta, de)
					       : api->increase_size(g->drv->state, g->id, delta, de);
	}
	de->message[sizeof(de->message) - 1] = '\0';
	pr_group_unlist(g);
	/* Even a failed increase may have taken effect (an answer lost to a
	 * timeout): the target must be read again. */
	g->target_stale = true;
	return rc;
}

int at_decrease(pr_class_group *g, int32_t delta, int32_t expected, prd_cloud_error *de)
{
	const prd_cloud_driver *api = g->drv->api;
	int rc;
	memset(de, 0, sizeof(*de));
	if(CLOUD_DRIVER_HAS(api, decrease) && api->decrease) {
		prd_cloud_decrease rq;
		memset(&rq, 0, sizeof(rq));
		rq.struct_size = sizeof(rq);
		rq.group_id = g->id;
		rq.delta = delta;
		rq.expected_target = expected;
		rq.fence_key = g->fence_key;
		rq.fence_term = g->fence_term;
		rc = api->decrease(g->drv->state, &rq, de);
	} else if(CLOUD_DRIVER_HAS(api, decrease_target_size_if) && api->decrease_target_size_if && expected >= 0) {
		rc = api->decrease_target_size_if(g->drv->state, g->id, delta, expected, de);
	} else {
		rc = api->decrease_target_size(g->drv->state, g->id, delta, de);
	}
	de->message[sizeof(de->message) - 1] = '\0';
	return rc;
}

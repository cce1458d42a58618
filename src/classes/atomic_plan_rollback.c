/* The steps of an atomic plan's rollback: lower the target, delete the plan's instances, until the cloud agrees. */
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

/* ---- rollback ---------------------------------------------------------- */

void at_close_without_effect(const pr_class_host *h, pr_class_group *g, const state_intent *in, const char *why)
{
	if(in->phase != STATE_PHASE_PLANNED)
		at_intent_advance(h, in->plan_id, STATE_PHASE_ROLLING_BACK, why, NULL);
	at_intent_close(h, in->plan_id, STATE_PHASE_ROLLED_BACK, why, NULL);
	if(g && !g->busy_elsewhere) {
		/* (Other plans may share the group: AT_OWN_MARK.) */
		const state_intent *open = NULL;
		size_t n = 0, i;
		bool others = false;
		if(at_open_intents(h, &open, &n) == 0)
			for(i = 0; i < n && !others; i++)
				others = !strcmp(open[i].node_group, g->id);
		g->busy = others;
	}
}

/* Rate limit for a message about one plan: true at most once a minute per
 * plan (a few plans remembered; the worker is single-threaded). */
bool at_say_again(const char *plan_id, int64_t now)
{
	static struct {
		uint64_t h;
		int64_t at;
	} seen[16];
	uint64_t hash = 1469598103934665603ULL;
	size_t i, oldest = 0;
	for(; plan_id && *plan_id; plan_id++)
		hash = (hash ^ (uint8_t)*plan_id) * 1099511628211ULL;
	for(i = 0; i < 16; i++) {
		if(seen[i].h == hash) {
			if(now - seen[i].at < 60 * AT_NS_PER_S)
				return false;
			seen[i].at = now;
			return true;
		}
		if(seen[i].at < seen[oldest].at)
			oldest = i;
	}
	seen[oldest].h = hash;
	seen[oldest].at = now;
	return true;
}

/* Is the rollback of `in` over? None of the plan's instances is listed,
 * and nothing the plan asked for is still to come: with owner marks or
 * creation times, the target asks for no more than what is listed (others
 * may hold it above where the plan began); else the target is back where
 * the plan found it. */
static bool rolled_back(const pr_class_group *g, const state_intent *in, const at_view *pv)
{
	/* Creation times tell only "new since the plan began": an instance
	 * another actor made since (a rollout's or a MachineHealthCheck's
	 * replacement of one the group had) looks like the plan's. Once the
	 * target is back where the plan found it, the plan's count is taken
	 * back: what is new there stands in for what was, or goes with the
	 * cloud's own reconciling (a MachineSet deletes what replicas no
	 * longer ask for), and one more delete would take the group below
	 * its size before the plan (e2e 87 rollout-rb: during the rollout's
	 * surge the rollback deleted the replacement of the group's older
	 * Machine, 1 -> 0). */
	if(at_own_of(in) == AT_OWN_TIME && g->target <= in->target_before)
		return true;
	if(pv->n)
		return false;
	switch(at_own_of(in)) {
	case AT_OWN_MARK:
		/* A cloud may list an instance only once it exists: while the
		 * target asks for more than is listed, one of them may still be
		 * the plan's (its token shows when it appears). */
		return pv->surplus == 0 && g->target <= (int64_t)pv->live_all;
	case AT_OWN_TIME:
		return g->target <= in->target_before || g->target <= (int64_t)pv->live_all;
	default:
		return g->target <= in->target_before;
	}
}

/* Lower the target by what was requested and not created, capped at the
 * plan's delta: conditional on the target just read when the driver can
 * (a stale view must not take away what someone else just asked for).
 * Returns by how much the cloud lowered it. */
static int64_t lower_target(const pr_class_host *h, pr_class_group *g, const state_intent *in, const at_view *pv)
{
	int64_t excess;
	prd_cloud_error de;
	prd_err e;
	int rc;
	if(at_own_of(in) == AT_OWN_MARK)
		return 0; /* every instance it asked for is listed: deleted below */
	excess = at_own_of(in) == AT_OWN_TIME ? (int64_t)g->target - (int64_t)pv->live_all
					      : (int64_t)g->target - in->target_before - (int64_t)pv->live;
	if(excess > in->delta)
		excess = in->delta;
	/* Never below where the plan found the group (a moment with fewer
	 * live instances - one being replaced - is not the plan's). */
	if(excess > (int64_t)g->target - in->target_before)
		excess = (int64_t)g->target - in->target_before;
	if(excess <= 0)
		return 0;
	rc = at_decrease(g, (int32_t)excess, g->target, &de);
	g->target_stale = true;
	if(rc) {
		de.message[sizeof(de.message) - 1] = '\0';
		cloud_driver_error(g->drv, "decrease target size", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
		log_warn("rollback: cannot lower the target yet; retrying", "group", g->id, "error", e.msg);
		return 0;
	}
	return excess;
}

/* How a rollback by creation time (AT_OWN_TIME) ranks an instance new
 * since the plan began: lower goes first. */
enum {
	PICK_MARKED_DOWN,  /* the driver marked it the plan's; failed, no Node, or its Node not Ready */
	PICK_MARKED_IDLE,  /* ... Ready, running no pod but the request's own */
	PICK_DOWN,         /* not told apart from another actor's; failed, no Node, not Ready */
	PICK_IDLE,         /* ... Ready and idle */
	PICK_NEVER         /* its Node runs another's pods: never deleted */
};

static int pick_rank(const pr_class_host *h, const at_kview *kv, const pr_class_inst *x)
{
	bool marked = x->owner && !strcmp(x->owner, kv->token);
	bool down = x->errclass != PRD_CLOUD_ERRCLASS_NONE || !x->node || h->node_state(h->ctx, x->node) != PR_NODE_READY;
	/* (A Node that is not Ready may still hold pods that come back with
	 * it: asked about too.) */
	if(x->node && h->node_state(h->ctx, x->node) != PR_NODE_ABSENT && (!h->node_busy || h->node_busy(h->ctx, x->node)))
		return PICK_NEVER;
	return marked ? (down ? PICK_MARKED_DOWN : PICK_MARKED_IDLE) : (down ? PICK_DOWN : PICK_IDLE);
}

/* Among the unmarked candidates (rank PICK_DOWN and beyond), keep only the
 * oldest as many as the plan's marked ones leave of `need`, when there are
 * more: the plan's increase was conditional on the target it read, so
 * every raise another actor made since came after it, and a replacement
 * comes after the Machine it replaces is gone; the Machines the plan's
 * increase asked for are the first the cloud made. Readiness does not
 * tell whose a Machine is (another actor's newer one is the one still
 * coming up), so it chooses only among these (issue 37: a rollback took
 * the autoscaler's Nodeless Machine and kept the plan's Ready one). The
 * others are not candidates (-1). Unknown creation times: no change.
 * (Machines another actor asked for just before the plan began and the
 * cloud made after it are not told apart: operator.md says to avoid two
 * actors scaling up at once. Skipping as many of the oldest as were
 * pending then takes the plan's own when the other actor has removed its
 * own since: simulation seeds 19 and 53 of the clusterapi profile.) */
static void oldest_unmarked_only(const pr_class_group *g, int *rank, size_t n, int64_t need)
{
	size_t i, j, marked = 0, unmarked = 0;
	int64_t left;
	for(i = 0; i < n; i++) {
		if(rank[i] < 0)
			continue;
		if(rank[i] <= PICK_MARKED_IDLE)
			marked++;
		else if(g->inst[i].created_ns <= 0)
			return;
		else
			unmarked++;
	}
	left = need - (int64_t)marked;
	if(left < 0)
		left = 0;
	if((int64_t)unmarked <= left)
		return;
	for(i = 0; i < n; i++) {
		int64_t older = 0;
		if(rank[i] <= PICK_MARKED_IDLE)
			continue;
		/* (Ties go by listing order.) */
		for(j = 0; j < n; j++)
			if(j != i && (rank[j] > PICK_MARKED_IDLE || rank[j] == -2) &&
			   (g->inst[j].created_ns < g->inst[i].created_ns ||
			    (g->inst[j].created_ns == g->inst[i].created_ns && j < i)))
				older++;
		if(older >= left)
			rank[i] = -2;
	}
	for(i = 0; i < n; i++)
		if(rank[i] == -2)
			rank[i] = -1;
}

/* A plan that owns by creation time cannot always tell its instances from
 * another actor's made since it began (a MachineHealthCheck's replacement
 * comes from the same MachineSet, at the same time): what is certain is
 * how many the plan added - the target above where the plan found it. So
 * `need` of the instances new since the plan began are deleted, chosen
 * safely: the ones the driver marked as the plan's first, then the failed
 * and not Ready ones, then the Ready idle ones; never one whose Node runs
 * pods other than the request's own. Fills ids (room for g->ninst) and
 * returns how many; *kept gets how many could not be chosen for that. */
static size_t pick_by_time(const pr_class_host *h, pr_class_group *g, const state_intent *in, int64_t need,
			   const char **ids, size_t *kept)
{
	at_kview *kv = at__kview_build(h, g, in);
	int *rank = kv ? arena_array(h->ar, kv->n + 1, sizeof(*rank)) : NULL;
	size_t i, n = 0, busy = 0;
	int r;
	*kept = 0;
	if(!rank || need <= 0) {
		at__kview_free(kv);
		return 0;
	}
	for(i = 0; i < kv->n; i++) {
		const pr_class_inst *x = &g->inst[i];
		uint8_t kind = kv->v[i].kind;
		rank[i] = (kind != AT_MEMBER && kind != AT_EXTRA) || x->state == PRD_CLOUD_INSTANCE_DELETING ||
				  (!x->node && !pr_group_deletes_ids(g))
			  ? -1
			  : pick_rank(h, kv, x);
	}
	oldest_unmarked_only(g, rank, kv->n, need);
	for(i = 0; i < kv->n; i++)
		busy += rank[i] == PICK_NEVER;
	for(r = PICK_MARKED_DOWN; r < PICK_NEVER; r++)
		for(i = 0; i < kv->n && (int64_t)n < need; i++)
			if(rank[i] == r)
				ids[n++] = pr_group_deletes_ids(g) ? g->inst[i].id : g->inst[i].node;
	at__kview_free(kv);
	if((int64_t)n < need)
		*kept = (size_t)need - n < busy ? (size_t)need - n : busy;
	return n;
}

/* The instances new since the plan began that a rollback by creation time
 * leaves live (not being deleted). */
static size_t live_since(const pr_class_host *h, pr_class_group *g, const state_intent *in)
{
	at_kview *kv = at__kview_build(h, g, in);
	size_t i, n = 0;
	for(i = 0; kv && i < kv->n; i++)
		n += (kv->v[i].kind == AT_MEMBER || kv->v[i].kind == AT_EXTRA) &&
		     g->inst[i].state != PRD_CLOUD_INSTANCE_DELETING;
	at__kview_free(kv);
	return n;
}

/* A rollback by creation time keeps `kept` instances it cannot tell from
 * another actor's because their Nodes run other pods: the plan stays
 * rolling back (the target stays above where the plan found it, as many
 * instances as that live) until they are idle or gone; said in the
 * request's progress detail, the log and an Event once a minute. */
static void say_kept(const pr_class_host *h, const pr_class_req *req, pr_class_group *g, const state_intent *in,
		     size_t kept)
{
	char msg[700];
	snprintf(msg, sizeof(msg),
		 "rolling back: %zu instance%s of %s created since the scale-up began cannot be told from another "
		 "actor's (a MachineHealthCheck's replacement) and %s pods other than this request's: kept until idle; "
		 "the group stays %zu above its size before the scale-up",
		 kept, kept == 1 ? "" : "s", g->id, kept == 1 ? "runs" : "run", kept);
	if(req && !req->terminal)
		h->set_detail(h->ctx, PR_DETAIL_PROGRESS, msg);
	if(!at_say_again(in->plan_id, h->now))
		return;
	log_warn("rollback keeps instances it cannot tell from another actor's: they run other pods", "group", g->id,
		 "plan", in->plan_id, "kept", LOGI(kept));
	if(req)
		h->event(h->ctx, "Warning", PR_R_ROLLBACK_KEPT, msg);
}

/* The plan's group is not listed. An auto-provisioned group every
 * driver's listing lacks was deleted, and a group is deleted only when
 * empty (no instance, target 0): nothing of the plan is left, the plan
 * closes (true). Otherwise the rollback waits (false). */
static bool roll_back_without_group(const pr_class_host *h, const state_intent *in)
{
	if(h->groups_complete && nap_group_recorded(h, in->node_group)) {
		at_intent_close(h, in->plan_id, STATE_PHASE_ROLLED_BACK, NULL, NULL);
		metrics_counter_add(M_SCALEUPS, METRICS_L(in->node_group, "rolled_back"), 1);
		h->count(h->ctx, PR_STAT_SCALEUP_ROLLED_BACK);
		log_warn("scale-up rolled back: its auto-provisioned group is gone (deleted only when empty)", "group",
			 in->node_group, "plan", in->plan_id, "cause", in->last_error);
		return true;
	}
	/* Said once a minute per plan, not every pass. */
	if(at_say_again(in->plan_id, h->now))
		log_error(h->groups_complete ? "rollback waits: no loaded driver serves the plan's node group"
					     : "rollback waits: the plan's node group is not listed by any driver",
			  "group", in->node_group, "plan", in->plan_id);
	h->wake_at(h->ctx, h->now + (h->groups_complete ? 60 * AT_NS_PER_S : AT_RETRY_NS));
	return false;
}

/* The cloud confirms the rollback (rolled_back): the plan's intent
 * closes. */
static void close_rolled_back(const pr_class_host *h, pr_class_group *g, const state_intent *in)
{
	size_t left = at_own_of(in) == AT_OWN_TIME ? live_since(h, g, in) : 0;
	at_intent_close(h, in->plan_id, STATE_PHASE_ROLLED_BACK, NULL, NULL);
	metrics_gauge_set(M_FOREIGN_INSTANCES, METRICS_L(in->node_group), 0);
	metrics_counter_add(M_SCALEUPS, METRICS_L(in->node_group, "rolled_back"), 1);
	h->count(h->ctx, PR_STAT_SCALEUP_ROLLED_BACK);
	if(left)
		/* (Creation times: the group is back at its size before
		 * the plan; what is new since stands in for instances
		 * another actor removed meanwhile.) */
		log_warn("scale-up rolled back: the group is back at its size before the plan; instances created "
			 "since it began remain, standing in for ones another actor removed",
			 "group", g->id, "plan", in->plan_id, "remaining", LOGI(left), "cause", in->last_error);
	else
		log_warn("scale-up rolled back: the cloud shows none of its instances", "group", g->id, "plan",
			 in->plan_id, "cause", in->last_error);
}

/* The instances to delete of a plan that tells its own (owner marks, or
 * instances new since the plan): its surplus and members not being
 * deleted already, by id or by node name as the group deletes. Fills a
 * pass-arena array (NULL when out of memory) and *nd. */
static const char **ids_of_view(const pr_class_host *h, pr_class_group *g, const at_view *pv, size_t *nd)
{
	const char **ids = arena_array(h->ar, pv->n + pv->surplus + 1, sizeof(*ids));
	size_t i;
	for(i = 0; ids && i < pv->surplus && pr_group_deletes_ids(g); i++)
		if(pv->sur[i]->state != PRD_CLOUD_INSTANCE_DELETING)
			ids[(*nd)++] = pv->sur[i]->id;
	for(i = 0; ids && i < pv->n; i++) {
		if(pv->v[i]->state == PRD_CLOUD_INSTANCE_DELETING)
			continue;
		if(pr_group_deletes_ids(g))
			ids[(*nd)++] = pv->v[i]->id;
		else if(pv->v[i]->node)
			ids[(*nd)++] = pv->v[i]->node;
	}
	return ids;
}

/* Delete the `nd` instances picked (when this replica may act); a failed
 * delete is said in the log and an Event, and retried next step. True
 * when the cloud took the delete. */
static bool delete_picked(const pr_class_host *h, const pr_class_req *req, pr_class_group *g, const state_intent *in,
			  const char **ids, size_t nd)
{
	prd_cloud_error de;
	prd_err e;
	if(nd && h->may_act(h->ctx)) {
		int rc;
		memset(&de, 0, sizeof(de));
		rc = pr_group_delete(g, ids, nd, &de);
		if(rc) {
			de.message[sizeof(de.message) - 1] = '\0';
			cloud_driver_error(g->drv, "delete instances", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
			log_warn("rollback: deleting the plan's instances failed; retrying", "group", g->id, "error",
				 e.msg);
			if(req && !req->terminal) {
				char msg[900];
				snprintf(msg, sizeof(msg),
					 "removing the %zu instance%s the failed scale-up of %s added: the delete failed (%s); "
					 "retrying every %ds until the cloud confirms",
					 nd, nd == 1 ? "" : "s", g->id, e.msg, (int)(AT_RETRY_NS / AT_NS_PER_S));
				h->event(h->ctx, "Warning", "RollbackDeleteFailed", msg);
			}
			return false;
		}
		log_info("rollback: deleting the plan's instances", "group", g->id, "plan", in->plan_id, "instances",
			 LOGI(nd));
		return true;
	}
	return false;
}

/* One step of a rollback. Closes the plan (true) only when the cloud
 * confirms (rolled_back). */
bool at_roll_back_step(const pr_class_host *h, const pr_class_req *req, pr_class_group *g, const state_intent *in)
{
	at_view pv;
	prd_err e;
	size_t nd = 0, kept = 0;
	int64_t lowered;
	const char **ids;
	if(!g)
		return roll_back_without_group(h, in);
	if(pr_group_list(g, &e) || at_view_of(h, g, in, &pv)) {
		log_warn("rollback waits: cannot list the group's instances; retrying", "group", g->id, "error", e.msg);
		h->wake_at(h->ctx, h->now + AT_RETRY_NS);
		return false;
	}
	if(pr_group_refresh_target(g, &e)) {
		log_warn("rollback waits: cannot read the group's target size; retrying", "group", g->id, "error",
			 e.msg);
		h->wake_at(h->ctx, h->now + AT_RETRY_NS);
		return false;
	}
	if(rolled_back(g, in, &pv)) {
		close_rolled_back(h, g, in);
		return true;
	}
	if(!h->may_act(h->ctx))
		return false;
	/* Requested but not created: lower the target first, so the cloud
	 * stops creating what the deletes below would have to chase. */
	lowered = lower_target(h, g, in, &pv);
	if(at_own_of(in) == AT_OWN_TIME && lowered > 0 && (int64_t)g->target - lowered <= in->target_before) {
		/* The decrease just took the target back where the plan found
		 * it (conditional on the target read this pass): the rollback
		 * is over now. Left for the next pass, another actor's raise
		 * in between would put the target above that again, and its
		 * new Machine would be taken for the plan's. */
		close_rolled_back(h, g, in);
		return true;
	}
	if(at_own_of(in) == AT_OWN_TIME) {
		/* What the plan added and is still there: as many deletes as
		 * the target stands above where the plan found it, never more
		 * than the plan asked for (the rest is another actor's raise). */
		int64_t need = (int64_t)g->target - lowered - in->target_before;
		if(need > in->delta)
			need = in->delta;
		ids = arena_array(h->ar, g->ninst + 1, sizeof(*ids));
		nd = ids ? pick_by_time(h, g, in, need, ids, &kept) : 0;
		if(kept)
			say_kept(h, req, g, in, kept);
		if(nd && delete_picked(h, req, g, in, ids, nd) && (int64_t)nd == need) {
			/* All the plan added is deleted (the delete lowers the
			 * target with it): over now. A later pass would count
			 * another actor's raise since as the plan's, and take its
			 * Machine (issue 37). */
			g->target_stale = true;
			close_rolled_back(h, g, in);
			return true;
		}
		nd = 0;
	} else {
		ids = ids_of_view(h, g, &pv, &nd);
	}
	delete_picked(h, req, g, in, ids, nd);
	h->wake_at(h->ctx, h->now + AT_RETRY_NS);
	return false;
}

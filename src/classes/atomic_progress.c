/* The atomic class's open plans, step by step: settling interrupted calls, waiting for nodes, success. */
#include "classes/atomic_int.h"
#include "classes/nap.h"
#include "util/hmap.h"
#include "classes/details.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/str.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- success ----------------------------------------------------------- */

void at__succeed(const pr_class_host *h, const pr_class_req *req, at_plan *p)
{
	sched_snapshot *snap = h->snapshot(h->ctx);
	sched_place_result res;
	prd_err e;
	char msg[900], gw[400];
	int64_t total = 0;
	size_t i;
	memset(&res, 0, sizeof(res));
	at__groups_words(p, gw, sizeof(gw));
	for(i = 0; i < p->n; i++)
		total += p->v[i].delta;
	if(!snap)
		return; /* the pass acts no further */
	/* A pass that may no longer act decides nothing here either: the plan
	 * closed in this store, its status unwritten, would leave its Nodes
	 * held by nothing (not the plan, not a booking the ledger or the
	 * status shows) for the passes until the end is written. */
	if(!h->may_act(h->ctx)) {
		h->wake_at(h->ctx, h->now + AT_RETRY_NS);
		return;
	}
	if(sched_snapshot_fork(snap))
		return;
	/* The plan's own reservation must not stand in its way (inside the
	 * fork: a plan that goes on waiting keeps it). */
	sched_snapshot_unbook(snap, req->pr->meta.uid, NULL);
	if(sched_place(snap, req->sets, req->nsets, &res, &e) == 0 && res.fits_all &&
	   h->book(h->ctx, req->sets, req->nsets, &res, &e) == 0) {
		sched_snapshot_commit(snap);
		for(i = 0; i < p->n; i++) {
			at_intent_close(h, p->v[i].plan_id, STATE_PHASE_DONE, NULL, NULL);
			state_group_success(h->db, p->v[i].node_group, NULL);
			metrics_gauge_set(M_FOREIGN_INSTANCES, METRICS_L(p->v[i].node_group), 0);
			metrics_counter_add(M_SCALEUPS, METRICS_L(p->v[i].node_group, "succeeded"), 1);
		}
		h->count(h->ctx, PR_STAT_SCALEUP_SUCCEEDED);
		/* Requests queued behind the plan are decided again now. */
		h->wake_at(h->ctx, h->now);
		for(i = 0; i < p->n; i++) {
			pr_class_group *g = at_find_group(h, p->v[i].node_group);
			at_view pv;
			size_t k;
			if(g && pr_group_list(g, NULL) == 0 && at_view_of(h, g, &p->v[i], &pv) == 0)
				for(k = 0; k < pv.n; k++)
					if(pv.v[k]->node)
						h->mark_node(h->ctx, pv.v[k]->node);
		}
		if(p->n == 1)
			snprintf(msg, sizeof(msg), "%lld new node%s in %s are ready; capacity for all pods is booked",
				 (long long)total, total == 1 ? "" : "s", p->v[0].node_group);
		else
			snprintf(msg, sizeof(msg), "%lld new nodes (%s) are ready; capacity for all pods is booked",
				 (long long)total, gw);
		at_clear_details(h, state_phase_name(STATE_PHASE_DONE));
		pr_class_caveats(req->sets, req->nsets, msg, sizeof(msg));
		h->provisioned(h->ctx, PR_R_PROVISIONED, msg);
		h->hold(h->ctx, false, NULL);
	} else if(h->now < at_taken_since(h, p->v[0].plan_id) + AT_TAKEN_GRACE_NS && h->now < p->v[0].deadline_ns) {
		/* Not yet: room another view still holds may come back (a
		 * booking whose end is not written yet). */
		sched_snapshot_revert(snap);
		log_info("the plan's nodes are ready but its pods do not all fit yet; waiting before retrying", "request",
			 req->pr->meta.name, "placed", LOGI((size_t)res.placed), "pods", LOGI((size_t)res.requested));
		h->wake_at(h->ctx, h->now + AT_RETRY_NS);
	} else {
		sched_snapshot_revert(snap);
		/* The nodes are there and Ready, but other pods took them: they
		 * are in use, so they stay; the plan is over and the request
		 * tries again. */
		for(i = 0; i < p->n; i++)
			at_intent_close(h, p->v[i].plan_id, STATE_PHASE_DONE, "capacity taken by other pods", NULL);
		snprintf(msg, sizeof(msg),
			 "the new nodes (%s) are ready but other pods took the capacity (%lld of %lld pods fit); the nodes "
			 "stay in use and the request is retried", gw, (long long)res.placed, (long long)res.requested);
		at_clear_details(h, state_phase_name(STATE_PHASE_DONE));
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
		h->hold(h->ctx, false, NULL);
	}
	sched_place_result_free(&res);
}

/* ---- progress of an open plan ------------------------------------------ */

static const char *failure_kind(const at_view *pv, int64_t delta)
{
	/* The ABI has one class for running out of resources; the cloud's
	 * words tell a quota from a stockout. */
	if((int64_t)pv->failed >= delta && pv->failed_oor == pv->failed && pv->fail_msg &&
	   strcasestr(pv->fail_msg, "quota"))
		return "quota exceeded";
	if((int64_t)pv->failed >= delta)
		return pv->failed_oor == pv->failed ? "stockout" : "creation failure";
	if(pv->failed_oor == pv->failed)
		return "partial creation (out of resources)";
	return "partial creation";
}

/* An intent with owner marks found in phase increasing (provreqd crashed
 * in or around the call, or another replica that lost the lease made the
 * plan): what the cloud shows with the plan's token is the plan's, and the
 * missing rest is asked for under the same token, conditional on the
 * target read now, so the plan continues instead of failing: provreqd's
 * own crash is not the cloud's failure. A late call of the stalled replica
 * then meets a moved target and does nothing (or, landing first, makes this
 * call meet one). Returns 0 (the cloud has it all), 1 (ask again next
 * pass) or -1 (the cloud refused: cause in `why`). */
static int resume_marked(const pr_class_host *h, pr_class_group *g, const state_intent *in, const at_view *pv,
			 char *why, size_t len)
{
	int64_t missing = in->delta - (int64_t)pv->n;
	prd_cloud_error de;
	prd_err e;
	int rc;
	if(missing <= 0)
		return 0;
	if(!h->may_act(h->ctx))
		return 1;
	g->target_stale = true;
	if(pr_group_refresh_target(g, &e))
		return 1;
	/* A cloud may list an instance only once it exists: while the target
	 * asks for more than is listed, the plan's may be among what is still
	 * to come (its call took effect, the answer was lost). Wait for it,
	 * until the plan's deadline. */
	if(g->target > (int64_t)pv->live_all) {
		if(h->now >= in->deadline_ns) {
			snprintf(why, len, "timeout: the interrupted increase of %s could not be told from the cloud's "
				 "pending instances before the deadline", g->id);
			return -1;
		}
		return 1;
	}
	rc = at_increase(g, in, (int32_t)missing, g->target, &de);
	if(rc == PRD_CLOUD_ECONFLICT) {
		metrics_counter_add(M_PLAN_CONFLICTS, METRICS_L(g->id, "target_moved"), 1);
		return 1;
	}
	if(rc) {
		cloud_driver_error(g->drv, "increase size", rc, &de, &e);
		snprintf(why, len, "the cloud refused the rest of the interrupted increase of %s: %s", g->id, e.msg);
		return -1;
	}
	metrics_counter_add(M_SCALEUPS, METRICS_L(g->id, "attempted"), 1);
	log_info("interrupted scale-up continues: asked the cloud for the instances it had not made yet", "group",
		 g->id, "plan", in->plan_id, "had", LOGI(pv->n), "asked", LOGI(missing));
	snprintf(why, len, INTERRUPTED " during the increase of %s with %zu of %lld instances made; "
		 "the scale-up continues", g->id, pv->n, (long long)in->delta);
	h->event(h->ctx, "Normal", PR_R_SCALE_UP_RESUMED, why);
	why[0] = '\0';
	return 0;
}

/* A driver that records which plan's increase moved a group's target
 * (PRD_CLOUD_CAP_INCREASE_RECORD), and a target above where the plan began:
 * that is no proof the plan's increase took effect (another actor may have
 * moved it by as much before the plan's conditional call could land). The
 * call repeated under the plan's token says: 0, it took effect (or takes
 * it now, the target being back where the plan began); ECONFLICT, another
 * writer moved the target and the plan's call never did. Returns 0 with
 * *took set, or 1: ask again next pass. */
static int settle_recorded(const pr_class_host *h, pr_class_group *g, const state_intent *in, bool *took)
{
	prd_cloud_error de;
	int rc;
	if(!h->may_act(h->ctx))
		return 1;
	rc = at_increase(g, in, (int32_t)in->delta, (int32_t)in->target_before, &de);
	if(rc == PRD_CLOUD_ECONFLICT && h->may_act(h->ctx)) {
		log_warn("the interrupted increase never took effect: another writer moved the group's target",
			 "group", g->id, "plan", in->plan_id, "cause", de.message);
		*took = false;
		return 0;
	}
	*took = rc == 0;
	return rc ? 1 : 0;
}

/* One intent found increasing: did the cloud take its call (*took), can
 * that not be told yet (return 1), or did a resumed call fail (-1, cause
 * in `cause`)? `part` gets why a legacy plan must be undone. */
static int settle_one(const pr_class_host *h, const pr_class_req *req, state_intent *in, bool *took, char *part,
		      size_t plen, char *cause, size_t clen)
{
	pr_class_group *g = at_find_group(h, in->node_group);
	at_view pv;
	if(!g || pr_group_list(g, NULL) || at_view_of(h, g, in, &pv))
		return 1;
	if(at_own_of(in) == AT_OWN_MARK) {
		int r;
		if(!req || req->terminal) {
			/* Nothing more is asked for a request that is over. */
			*took = pv.n > 0 || pv.surplus > 0;
			return 0;
		}
		r = resume_marked(h, g, in, &pv, cause, clen);
		*took = r == 0;
		return r;
	}
	if((cloud_driver_caps(g->drv->api) & PRD_CLOUD_CAP_INCREASE_RECORD) && g->target > in->target_before)
		return settle_recorded(h, g, in, took);
	if(g->target > in->target_before || pv.n > 0) {
		*took = true;
		/* A cloud takes an increase whole; only one that runs inside
		 * provreqd (a driver that makes the nodes itself during the
		 * call) can be cut short by its crash. */
		if(g->target < in->target_before + in->delta && (int64_t)pv.n < in->delta && !part[0])
			snprintf(part, plen,
				 INTERRUPTED " during the increase of %s, which took %zu of its %lld "
				 "nodes; undoing it to start over",
				 g->id, pv.n, (long long)in->delta);
	}
	return 0;
}

/* Interrupted around the calls (a crash, or adopted from the API): which
 * calls did the cloud take? Returns true when the plan ended without
 * effect and the request may start over in this pass. */
static bool settle_increasing(const pr_class_host *h, const pr_class_req *req, at_plan *p)
{
	size_t i, took = 0, pending = 0;
	bool *did = arena_array(h->ar, p->n + 1, sizeof(*did));
	char part[700] = "", cause[900] = "";
	if(!did)
		return false;
	for(i = 0; i < p->n; i++) {
		state_intent *in = &p->v[i];
		int r;
		if(in->phase == STATE_PHASE_PLANNED)
			continue;
		if(in->phase != STATE_PHASE_INCREASING) {
			did[i] = true;
			took++;
			continue;
		}
		r = settle_one(h, req, in, &did[i], part, sizeof(part), cause, sizeof(cause));
		if(r < 0) {
			bool *failing = arena_array(h->ar, p->n + 1, sizeof(*failing));
			if(failing)
				failing[i] = true;
			at__start_roll_back(h, req, p, failing, cause);
			return false;
		}
		pending += r == 1;
		took += did[i];
	}
	if(pending) {
		/* Cannot tell yet: ask again soon, decide nothing. */
		h->wake_at(h->ctx, h->now + AT_RETRY_NS);
		return false;
	}
	if(took == 0) {
		for(i = 0; i < p->n; i++)
			at_close_without_effect(h, at_find_group(h, p->v[i].node_group), &p->v[i],
						"interrupted; the cloud never took the increase");
		log_info("interrupted scale-up never reached the cloud; starting over", "plan", p->v[0].plan_id);
		/* (The plan ended: its status must not say increasing whatever
		 * the new decision is; a new plan writes its own.) */
		if(req && !req->terminal)
			at_clear_details(h, state_phase_name(STATE_PHASE_ROLLED_BACK));
		return true;
	}
	if(took < p->n) {
		/* Some groups took it, some never were asked: the plan cannot be
		 * completed as one; undo it without blaming any group. */
		for(i = 0; i < p->n; i++)
			if(!did[i]) {
				at_close_without_effect(h, at_find_group(h, p->v[i].node_group), &p->v[i],
							"interrupted before this group was asked");
				p->v[i].phase = STATE_PHASE_ROLLED_BACK;
			}
		at__start_roll_back(h, req, p, NULL, INTERRUPTED " between the calls of a multi-group plan");
		return false;
	}
	if(part[0]) {
		/* Not the cloud's failure: no group is backed off. */
		log_warn("interrupted increase was cut short; rolling back", "plan", p->v[0].plan_id, "cause", part);
		at__start_roll_back(h, req, p, NULL, part);
		return false;
	}
	for(i = 0; i < p->n; i++)
		if(p->v[i].phase == STATE_PHASE_INCREASING) {
			at_intent_advance(h, p->v[i].plan_id, STATE_PHASE_WAITING_FOR_NODES, NULL, NULL);
			p->v[i].phase = STATE_PHASE_WAITING_FOR_NODES;
			log_info("resuming an interrupted scale-up: the cloud took the increase", "plan", p->v[i].plan_id);
		}
	if(req && !req->terminal)
		h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_WAITING_FOR_NODES));
	return false;
}

/* The plan's progress detail, changed at most every AT_PROGRESS_EVERY_NS
 * (the pass AT_POLL_NS later writes what it is then). */
static void set_progress(const pr_class_host *h, const pr_class_req *req, const char *plan_id, const char *prog)
{
	char *was = pr_details_get(req->pr, PR_DETAIL_PROGRESS);
	if(!was || strcmp(was, prog)) {
		if(!was || at_progress_due(h, plan_id)) {
			h->set_detail(h->ctx, PR_DETAIL_PROGRESS, prog);
			at_progress_noted(h, plan_id);
		}
	}
	free(was);
}

/* Instances of the group that are not the plan's appeared while it runs
 * (another actor scales the group): said once a minute per plan, left
 * alone. Instances with the plan's token beyond its delta (a repeated
 * call, e.g. a stalled leader's late one on a driver that cannot make it
 * conditional) are the plan's own surplus: deleted. */
static void others_and_surplus(const pr_class_host *h, const pr_class_req *req, pr_class_group *g,
			       const state_intent *in, const at_view *pv)
{
	char msg[700];
	size_t i, nd = 0;
	const char **ids;
	if(at_own_of(in) != AT_OWN_DIFF)
		metrics_gauge_set(M_FOREIGN_INSTANCES, METRICS_L(g->id), (double)pv->foreign);
	if(pv->foreign && at_say_again(in->plan_id, h->now)) {
		snprintf(msg, sizeof(msg),
			 "%zu instance%s appeared in node group %s while this request's scale-up runs that %s not its own: "
			 "another actor (cluster-autoscaler, a MachineHealthCheck, another shard) is scaling the group; "
			 "provreqd leaves %s alone",
			 pv->foreign, pv->foreign == 1 ? "" : "s", g->id, pv->foreign == 1 ? "is" : "are",
			 pv->foreign == 1 ? "it" : "them");
		log_warn("another actor is scaling a group with an open plan", "group", g->id, "plan", in->plan_id,
			 "foreign", LOGI(pv->foreign));
		if(req)
			h->event(h->ctx, "Warning", PR_R_OTHER_ACTOR, msg);
	}
	if(!pv->surplus || !h->may_act(h->ctx) || !(ids = arena_array(h->ar, pv->surplus + 1, sizeof(*ids))))
		return;
	for(i = 0; i < pv->surplus; i++)
		if(pv->sur[i]->state != PRD_CLOUD_INSTANCE_DELETING)
			ids[nd++] = pv->sur[i]->id;
	if(!nd || !pr_group_deletes_ids(g))
		return;
	{
		prd_cloud_error de;
		memset(&de, 0, sizeof(de));
		metrics_counter_add(M_PLAN_CONFLICTS, METRICS_L(g->id, "duplicate_instances"), (double)nd);
		if(pr_group_delete(g, ids, nd, &de) == 0) {
			snprintf(msg, sizeof(msg),
				 "a repeated increase made %zu more instance%s of this scale-up than it asked for in %s; "
				 "deleting %s",
				 nd, nd == 1 ? "" : "s", g->id, nd == 1 ? "it" : "them");
			log_warn("deleting a plan's surplus instances", "group", g->id, "plan", in->plan_id, "surplus",
				 LOGI(nd));
			if(req)
				h->event(h->ctx, "Warning", PR_R_DUPLICATES_REMOVED, msg);
		}
		/* (The listing stays: the view points into it. The next pass
		 * lists the group again.) */
		g->target_stale = true;
	}
}

/* Every intent waiting for nodes: fail, finish or wait. */
static void progress_waiting(const pr_class_host *h, const pr_class_req *req, at_plan *p)
{
	at_view *pv = arena_array(h->ar, p->n + 1, sizeof(*pv));
	bool *failing = arena_array(h->ar, p->n + 1, sizeof(*failing));
	char cause[1100] = "", prog[400] = "";
	size_t i, ready_groups = 0, pl = 0;
	prd_err e;
	if(!pv || !failing)
		return;
	for(i = 0; i < p->n; i++) {
		state_intent *in = &p->v[i];
		pr_class_group *g = at_find_group(h, in->node_group);
		if(!g || pr_group_list(g, &e) || at_view_of(h, g, in, &pv[i])) {
			if(h->now >= in->deadline_ns) {
				failing[i] = true;
				snprintf(cause, sizeof(cause), "timeout: node group %s did not answer before the deadline",
					 in->node_group);
				at__start_roll_back(h, req, p, failing, cause);
			} else {
				log_warn("scale-up waits: cannot read the node group", "group", in->node_group, "error",
					 g ? e.msg : "not listed by any driver");
				h->wake_at(h->ctx, h->now + AT_RETRY_NS);
			}
			return;
		}
		if(pv[i].extra)
			log_warn("instances appeared in the group beyond the plan's size; they are not the plan's", "group",
				 g->id, "plan", in->plan_id, "extra", LOGI(pv[i].extra));
		others_and_surplus(h, req, g, in, &pv[i]);
		if(pv[i].failed) {
			failing[i] = true;
			if(!cause[0])
				snprintf(cause, sizeof(cause), "%s in %s: %zu of %lld instances failed (%s)",
					 failure_kind(&pv[i], in->delta), g->id, pv[i].failed, (long long)in->delta,
					 pv[i].fail_msg ? pv[i].fail_msg : "no message");
		} else if(at_own_of(in) == AT_OWN_MARK ? (int64_t)pv[i].n < in->delta && !g->target_stale &&
								   g->target <= (int64_t)pv[i].live_all
						       : g->target < in->target_before + in->delta && (int64_t)pv[i].n < in->delta) {
			/* (With owner marks the target says nothing of the plan:
			 * others move it. The plan's instances are missing for good
			 * when the cloud is making nothing more.) */
			failing[i] = true;
			if(!cause[0])
				snprintf(cause, sizeof(cause),
					 "partial creation in %s: the cloud lowered the target to %d with %zu of %lld instances "
					 "created", g->id, g->target, pv[i].n, (long long)in->delta);
		}
		if((int64_t)pv[i].ready >= in->delta)
			ready_groups++;
		pl += (size_t)snprintf(prog + pl, pl < sizeof(prog) ? sizeof(prog) - pl : 0,
				       "%s%s: %zu/%lld created, %zu registered, %zu ready", i ? "; " : "", g->id, pv[i].n,
				       (long long)in->delta, pv[i].named, pv[i].ready);
	}
	if(!req || req->terminal) {
		at__start_roll_back(h, req, p, NULL,
				req && !req->deleting ? "the request finished before its nodes were ready"
						      : "the request was deleted");
		return;
	}
	if(cause[0]) {
		at__start_roll_back(h, req, p, failing, cause);
		return;
	}
	if(ready_groups == p->n) {
		if(!req->sets)
			at__start_roll_back(h, req, p, NULL, "the request's PodTemplates disappeared");
		else
			at__succeed(h, req, p);
		return;
	}
	if(h->now >= p->v[0].deadline_ns) {
		for(i = 0; i < p->n; i++)
			failing[i] = (int64_t)pv[i].ready < p->v[i].delta;
		snprintf(cause, sizeof(cause), "timeout after %llds: %s",
			 (long long)(h->limits->provision_timeout_ns / AT_NS_PER_S), prog);
		at__start_roll_back(h, req, p, failing, cause);
		return;
	}
	set_progress(h, req, p->v[0].plan_id, prog);
	h->wake_at(h->ctx, p->v[0].deadline_ns);
	h->wake_at(h->ctx, h->now + AT_POLL_NS);
}

/* One step of an open plan. Returns true when it ended without effect and
 * the request may start over in this pass. */
bool at__progress(const pr_class_host *h, const pr_class_req *req, at_plan *p)
{
	size_t i;
	bool planned = false, rolling = false, increasing = false;
	for(i = 0; i < p->n; i++) {
		planned |= p->v[i].phase == STATE_PHASE_PLANNED;
		rolling |= p->v[i].phase == STATE_PHASE_ROLLING_BACK;
		increasing |= p->v[i].phase == STATE_PHASE_INCREASING;
	}
	if(rolling) {
		/* The rest of the plan follows the group that is rolling back
		 * (a crash between two of its rows can leave them apart). */
		for(i = 0; i < p->n; i++)
			if(p->v[i].phase != STATE_PHASE_ROLLING_BACK && !state_phase_is_terminal(p->v[i].phase)) {
				at_intent_advance(h, p->v[i].plan_id, STATE_PHASE_ROLLING_BACK,
						     FOLLOWER, NULL);
				p->v[i].phase = STATE_PHASE_ROLLING_BACK;
			}
		at__roll_back_all(h, req, p);
		return false;
	}
	if(planned && !increasing) {
		/* No cloud call is made before every intent is increasing. */
		for(i = 0; i < p->n; i++)
			at_close_without_effect(h, at_find_group(h, p->v[i].node_group), &p->v[i],
						"interrupted before the cloud call");
		log_info("scale-up plan interrupted before the cloud call; nothing to undo", "plan", p->v[0].plan_id);
		if(req && !req->terminal)
			at_clear_details(h, state_phase_name(STATE_PHASE_ROLLED_BACK));
		return true;
	}
	if(planned || increasing) {
		if(settle_increasing(h, req, p))
			return true;
		for(i = 0; i < p->n; i++)
			if(p->v[i].phase != STATE_PHASE_WAITING_FOR_NODES)
				return false;
	}
	progress_waiting(h, req, p);
	return false;
}

/* The atomic scale-up class (best-effort-atomic-scale-up.autoscaling.x-k8s.io).
 *
 * Pods that fit existing nodes are placed first; for the rest one node
 * group that fits all of them is chosen (estimator + expander). Then:
 *
 *   plan written locally (planned) ─> plan written to the API (the
 *   request's provisioningClassDetails) ─> increasing ─> cloud call ─>
 *   waiting-for-nodes ─> done (every new node Ready, pods booked)
 *                     └─> rolling-back ─> rolled-back (the cloud confirms)
 *
 * Clouds are asynchronous: the increase returns before instances exist,
 * instances get node names late, fail one by one, or never come. A plan
 * therefore follows instances, not node names: before the call it records
 * which instances the group already had (as short hashes of their ids), and
 * every instance of the group that is not among them is the plan's (at most
 * `delta` of them; a group serves one plan at a time). That set is re-read
 * from the cloud on every pass, so it needs no bookkeeping that a crash or
 * a failover could lose: the hashes are in the API with the plan.
 *
 * A rollback lowers the target for instances not yet created and deletes
 * those that exist, and the plan is closed only when the cloud shows none of
 * its instances and the target back where it was — retried every pass,
 * across restarts. A failure of the cloud backs the group off; provreqd's
 * own crash, a deleted or finished request do not.
 *
 * While a plan is open, the nodes it has made are reserved for its request
 * in every other simulation of the pass. */
#include "classes/class.h"
#include "classes/details.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "sched/estimator.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_S PRD_NS_PER_SEC
#define POLL_NS (2 * NS_PER_S)
#define RETRY_NS (5 * NS_PER_S)
#define KNOWN_PREFIX "h1:"
#define HASH_CHARS 8

/* ---- small helpers ------------------------------------------------------ */

static bool cond_is(const kube_provreq *pr, const char *type, const char *status, const char *reason)
{
	size_t i;
	for(i = 0; i < pr->nconditions; i++) {
		const kube_condition *c = &pr->conditions[i];
		if(c->type && !strcmp(c->type, type))
			return (!status || (c->status && !strcmp(c->status, status))) &&
			       (!reason || (c->reason && !strcmp(c->reason, reason)));
	}
	return false;
}

static pr_class_group *find_group(const pr_class_host *h, const char *id)
{
	size_t i;
	for(i = 0; i < h->ngroups; i++)
		if(!strcmp(h->groups[i].id, id))
			return &h->groups[i];
	return NULL;
}

/* 48 bits of FNV-1a of an instance id as 8 base64url characters: a
 * thousand-instance group costs 8 kB in the API, and two ids collide with
 * a chance of one in 2^48. */
static void id_hash(const char *id, char out[HASH_CHARS + 1])
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint64_t h = 1469598103934665603ULL;
	int i;
	for(; *id; id++) {
		h ^= (unsigned char)*id;
		h *= 1099511628211ULL;
	}
	for(i = 0; i < HASH_CHARS; i++) {
		out[i] = b64[h & 63];
		h >>= 6;
	}
	out[HASH_CHARS] = '\0';
}

/* The group's instances as the plan's "known before" text. */
static char *known_encode(const pr_class_group *g)
{
	buf b;
	size_t i;
	char hs[HASH_CHARS + 1];
	buf_init(&b);
	buf_append_str(&b, KNOWN_PREFIX);
	for(i = 0; i < g->ninst; i++) {
		id_hash(g->inst[i].id, hs);
		buf_append_str(&b, hs);
	}
	return buf_detach(&b);
}

/* Parse "known before" into a set of hashes. Plans written by older
 * versions hold node names, one per line: hash those. */
static void known_decode(const char *text, hmap *set)
{
	char hs[HASH_CHARS + 1];
	const char *p;
	if(!text)
		return;
	if(!strncmp(text, KNOWN_PREFIX, strlen(KNOWN_PREFIX))) {
		for(p = text + strlen(KNOWN_PREFIX); strlen(p) >= HASH_CHARS; p += HASH_CHARS) {
			memcpy(hs, p, HASH_CHARS);
			hs[HASH_CHARS] = '\0';
			hmap_put(set, hs, NULL);
		}
		return;
	}
	for(p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *name = str_ndup(p, len);
		if(name && *name) {
			id_hash(name, hs);
			hmap_put(set, hs, NULL);
		}
		free(name);
		p += len + (nl ? 1 : 0);
	}
}

static bool known_has(const hmap *set, const pr_class_inst *in)
{
	char hs[HASH_CHARS + 1];
	id_hash(in->id, hs);
	if(hmap_has(set, hs))
		return true;
	if(in->node) {
		id_hash(in->node, hs);
		return hmap_has(set, hs);
	}
	return false;
}

/* ---- what the cloud shows of a plan ------------------------------------ */

typedef struct plan_view {
	size_t n;              /* the plan's instances listed now */
	size_t live;           /* ... not being deleted */
	size_t named, ready;   /* ... with a registered Node / a Ready one */
	size_t failed, failed_oor;
	size_t extra;          /* new instances beyond delta: not the plan's */
	const char *fail_msg;  /* the first failure (borrowed from the group) */
	const pr_class_inst **v; /* the plan's instances (arena) */
} plan_view;

/* Which of the group's instances are the plan's. */
static int plan_view_of(const pr_class_host *h, pr_class_group *g, const state_intent *in, plan_view *pv)
{
	hmap known;
	size_t i;
	memset(pv, 0, sizeof(*pv));
	pv->v = arena_array(h->ar, g->ninst + 1, sizeof(*pv->v));
	if(!pv->v)
		return PRD_ENOMEM;
	hmap_init(&known, NULL);
	known_decode(in->known_before, &known);
	for(i = 0; i < g->ninst; i++) {
		const pr_class_inst *x = &g->inst[i];
		if(known_has(&known, x))
			continue;
		if((int64_t)pv->n >= in->delta) {
			pv->extra++;
			continue;
		}
		pv->v[pv->n++] = x;
		if(x->state != PRD_CLOUD_INSTANCE_DELETING)
			pv->live++;
		if(x->errclass != PRD_CLOUD_ERRCLASS_NONE) {
			pv->failed++;
			if(x->errclass == PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES)
				pv->failed_oor++;
			if(!pv->fail_msg)
				pv->fail_msg = x->errmsg;
			continue;
		}
		if(x->node) {
			pv->named++;
			if(x->state != PRD_CLOUD_INSTANCE_DELETING && h->node_state(h->ctx, x->node) == PR_NODE_READY)
				pv->ready++;
		}
	}
	hmap_free(&known);
	return 0;
}

/* ---- the plan in the API ----------------------------------------------- */

static void put_plan_details(const pr_class_host *h, const state_intent *in, state_phase phase)
{
	char num[32], ts[RFC3339_MAX];
	h->set_detail(h->ctx, PR_DETAIL_PLAN, in->plan_id);
	h->set_detail(h->ctx, PR_DETAIL_GROUP, in->node_group);
	snprintf(num, sizeof(num), "%lld", (long long)in->delta);
	h->set_detail(h->ctx, PR_DETAIL_DELTA, num);
	snprintf(num, sizeof(num), "%lld", (long long)in->target_before);
	h->set_detail(h->ctx, PR_DETAIL_TARGET_BEFORE, num);
	rfc3339_format(in->deadline_ns, ts, sizeof(ts));
	h->set_detail(h->ctx, PR_DETAIL_DEADLINE, ts);
	h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(phase));
	h->set_detail(h->ctx, PR_DETAIL_KNOWN, in->known_before);
}

/* The rollback is confirmed: say so on the request (same reason, no new
 * Event, no new retry). */
static void rolled_back(const pr_class_host *h, const pr_class_req *req, const state_intent *in)
{
	char msg[1400];
	if(!req || req->terminal)
		return;
	snprintf(msg, sizeof(msg), "scale-up of node group %s failed: %s; rolled back: the cloud shows none of the "
		 "instances it added and the target is back to %lld", in->node_group,
		 in->last_error && in->last_error[0] ? in->last_error : "unknown cause", (long long)in->target_before);
	h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_SCALE_UP_FAILED, msg);
	h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_ROLLED_BACK));
	h->set_detail(h->ctx, PR_DETAIL_KNOWN, NULL);
	h->set_detail(h->ctx, PR_DETAIL_TARGET_BEFORE, NULL);
	h->set_detail(h->ctx, PR_DETAIL_PROGRESS, NULL);
}

/* The plan is over: only the outcome stays in the details. */
static void clear_plan_details(const pr_class_host *h, const char *phase)
{
	h->set_detail(h->ctx, PR_DETAIL_PHASE, phase);
	h->set_detail(h->ctx, PR_DETAIL_KNOWN, NULL);
	h->set_detail(h->ctx, PR_DETAIL_TARGET_BEFORE, NULL);
	h->set_detail(h->ctx, PR_DETAIL_PROGRESS, NULL);
}

/* A request whose status names an open plan that this replica's store does
 * not know (written by the previous leader, or before a lost database):
 * adopt it, so it is finished or rolled back here, never started again. */
static void adopt(const pr_class_host *h, const kube_provreq *pr)
{
	char *plan = pr_details_get(pr, PR_DETAIL_PLAN), *group = pr_details_get(pr, PR_DETAIL_GROUP);
	char *delta = pr_details_get(pr, PR_DETAIL_DELTA), *before = pr_details_get(pr, PR_DETAIL_TARGET_BEFORE);
	char *deadline = pr_details_get(pr, PR_DETAIL_DEADLINE), *phase = pr_details_get(pr, PR_DETAIL_PHASE);
	char *known = pr_details_get(pr, PR_DETAIL_KNOWN);
	state_intent in, have;
	state_phase ph = STATE_PHASE_INCREASING;
	int64_t dl = 0, d = 0, tb = 0;
	prd_err e;
	if(!plan || !group || !delta || !deadline || !known || rfc3339_parse(deadline, &dl, NULL) ||
	   str_to_int64(delta, &d) || d <= 0 || d > INT32_MAX)
		goto out;
	if(before && (str_to_int64(before, &tb) || tb < 0))
		goto out;
	if(phase && (state_phase_parse(phase, &ph) || state_phase_is_terminal(ph)))
		goto out;
	if(state_intent_get(h->db, plan, &have, NULL) == 0) {
		state_intent_clear(&have);
		goto out; /* known here already, open or closed */
	}
	memset(&in, 0, sizeof(in));
	in.plan_id = plan;
	in.request_uid = (char *)pr->meta.uid;
	in.node_group = group;
	in.delta = d;
	in.target_before = tb;
	in.deadline_ns = dl;
	if(state_intent_begin(h->db, &in, &e) || state_intent_set_known(h->db, plan, known, &e)) {
		log_error("cannot adopt the scale-up plan of the previous leader", "request", pr->meta.name,
			  "plan", plan, "error", e.msg);
		goto out;
	}
	/* planned and increasing both mean "the call may have happened":
	 * the progress step asks the cloud which. */
	if(ph == STATE_PHASE_PLANNED)
		ph = STATE_PHASE_INCREASING;
	state_intent_advance(h->db, plan, STATE_PHASE_INCREASING, NULL, NULL);
	if(ph != STATE_PHASE_INCREASING)
		state_intent_advance(h->db, plan, ph, NULL, NULL);
	log_info("adopted a scale-up plan recorded in the request's status", "request", pr->meta.name, "namespace",
		 pr->meta.ns, "plan", plan, "group", group, "phase", state_phase_name(ph));
out:
	free(plan);
	free(group);
	free(delta);
	free(before);
	free(deadline);
	free(phase);
	free(known);
}

/* ---- pass hooks -------------------------------------------------------- */

/* Reserve the nodes a plan has made for its request: no other request of
 * this pass may count them. */
static void reserve(const pr_class_host *h, pr_class_group *g, const state_intent *in)
{
	plan_view pv;
	sched_res all = { "pods", SCHED_QTY_MAX };
	size_t i, idx;
	if(pr_group_list(g, NULL) || plan_view_of(h, g, in, &pv))
		return;
	for(i = 0; i < pv.n; i++)
		if(pv.v[i]->node && sched_snapshot_find_node(h->snap, pv.v[i]->node, &idx) == 0)
			sched_snapshot_book(h->snap, in->request_uid, idx, &all, 1, NULL);
}

static void atomic_pass_begin(const pr_class_module *m, const pr_class_host *h, const pr_class_pass *p)
{
	state_intent *open = NULL;
	size_t n = 0, i;
	(void)m;
	if(!h->db)
		return;
	for(i = 0; i < p->nprs; i++)
		if(p->ours(h->ctx, p->prs[i]) && cond_is(p->prs[i], PR_COND_PROVISIONED, "False", PR_R_SCALING_UP))
			adopt(h, p->prs[i]);
	if(state_intent_list_open(h->db, &open, &n, NULL))
		return;
	for(i = 0; i < n; i++) {
		pr_class_group *g = find_group(h, open[i].node_group);
		if(!g)
			continue;
		g->busy = true;
		reserve(h, g, &open[i]);
	}
	state_intent_list_free(open, n);
}

/* The open plan of a request, if any (caller clears *out). */
static bool open_plan(const pr_class_host *h, const char *uid, state_intent *out)
{
	state_intent *open = NULL;
	size_t n = 0, i;
	bool found = false;
	if(!h->db || state_intent_list_open(h->db, &open, &n, NULL))
		return false;
	for(i = 0; i < n && !found; i++) {
		if(!strcmp(open[i].request_uid, uid)) {
			found = true;
			*out = open[i];
			memset(&open[i], 0, sizeof(open[i]));
		}
	}
	state_intent_list_free(open, n);
	return found;
}

static bool atomic_in_flight(const pr_class_module *m, const pr_class_host *h, const kube_provreq *pr)
{
	state_intent in;
	(void)m;
	if(!open_plan(h, pr->meta.uid, &in))
		return false;
	state_intent_clear(&in);
	return true;
}

/* ---- rollback ---------------------------------------------------------- */

/* One step of a rollback. Closes the plan (true) only when the cloud shows
 * none of its instances and the target no higher than before the plan. */
static bool roll_back_step(const pr_class_host *h, const pr_class_req *req, pr_class_group *g,
			   const state_intent *in)
{
	plan_view pv;
	prd_cloud_error de;
	prd_err e;
	int64_t excess;
	size_t i, nd = 0;
	const char **ids;
	if(!g) {
		log_error("rollback waits: the plan's node group is not listed by any driver", "group", in->node_group,
			  "plan", in->plan_id);
		h->wake_at(h->ctx, h->now + RETRY_NS);
		return false;
	}
	if(pr_group_list(g, &e) || plan_view_of(h, g, in, &pv)) {
		log_warn("rollback waits: cannot list the group's instances; retrying", "group", g->id, "error", e.msg);
		h->wake_at(h->ctx, h->now + RETRY_NS);
		return false;
	}
	if(pv.n == 0 && g->target <= in->target_before) {
		state_intent_close(h->db, in->plan_id, STATE_PHASE_ROLLED_BACK, NULL, NULL);
		metrics_counter_add(M_SCALEUPS, METRICS_L(in->node_group, "rolled_back"), 1);
		h->count(h->ctx, PR_STAT_SCALEUP_ROLLED_BACK);
		log_warn("scale-up rolled back: the cloud shows none of its instances", "group", g->id, "plan",
			 in->plan_id, "cause", in->last_error);
		return true;
	}
	if(!h->may_act(h->ctx))
		return false;
	/* Requested but not created: the target minus what existed before and
	 * what of the plan still exists. Lower it first, so the cloud stops
	 * creating what the deletes below would have to chase. */
	excess = (int64_t)g->target - in->target_before - (int64_t)pv.live;
	if(excess > in->delta)
		excess = in->delta;
	if(excess > 0) {
		memset(&de, 0, sizeof(de));
		if(g->drv->api->decrease_target_size(g->drv->state, g->id, (int32_t)excess, &de)) {
			de.message[sizeof(de.message) - 1] = '\0';
			cloud_driver_error(g->drv, "decrease target size", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
			log_warn("rollback: cannot lower the target yet; retrying", "group", g->id, "error", e.msg);
		}
	}
	ids = arena_array(h->ar, pv.n + 1, sizeof(*ids));
	for(i = 0; ids && i < pv.n; i++) {
		if(pv.v[i]->state == PRD_CLOUD_INSTANCE_DELETING)
			continue;
		if(CLOUD_DRIVER_HAS(g->drv->api, delete_instances) && g->drv->api->delete_instances)
			ids[nd++] = pv.v[i]->id;
		else if(pv.v[i]->node)
			ids[nd++] = pv.v[i]->node;
	}
	if(nd && h->may_act(h->ctx)) {
		int rc;
		memset(&de, 0, sizeof(de));
		rc = CLOUD_DRIVER_HAS(g->drv->api, delete_instances) && g->drv->api->delete_instances
			     ? g->drv->api->delete_instances(g->drv->state, g->id, ids, nd, &de)
			     : g->drv->api->delete_nodes(g->drv->state, g->id, ids, nd, &de);
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
					 nd, nd == 1 ? "" : "s", g->id, e.msg, (int)(RETRY_NS / NS_PER_S));
				h->event(h->ctx, "Warning", "RollbackDeleteFailed", msg);
			}
		} else {
			log_info("rollback: deleting the plan's instances", "group", g->id, "plan", in->plan_id,
				 "instances", LOGI(nd));
		}
	}
	h->wake_at(h->ctx, h->now + RETRY_NS);
	return false;
}

/* Enter rolling-back: record why, tell the request, back the group off
 * when the cloud failed, and take the first step at once. */
static void start_roll_back(const pr_class_host *h, const pr_class_req *req, pr_class_group *g,
			    const state_intent *in, const char *cause, bool cloud_failure)
{
	char msg[1400];
	state_intent_advance(h->db, in->plan_id, STATE_PHASE_ROLLING_BACK, cause, NULL);
	if(cloud_failure) {
		int64_t until = 0;
		state_group_backoff gb;
		state_group_fail(h->db, in->node_group, cause, &until, NULL);
		if(g) {
			g->backed_off = true;
			g->backoff_until = until;
		}
		/* Recorded with the request, so a new leader keeps the backoff. */
		if(req && !req->terminal && state_group_get(h->db, in->node_group, &gb, NULL) == 0) {
			char v[400];
			snprintf(v, sizeof(v), "%s %lld %lld", in->node_group, (long long)gb.until_ns, (long long)gb.failures);
			h->set_detail(h->ctx, PR_DETAIL_GROUP_BACKOFF, v);
			state_group_clear(&gb);
		}
	}
	log_warn("scale-up failed; rolling back", "group", in->node_group, "plan", in->plan_id, "cause", cause);
	if(req && !req->terminal) {
		snprintf(msg, sizeof(msg), "scale-up of node group %s failed: %s; removing what it added%s", in->node_group,
			 cause, cloud_failure ? "; the group is backed off" : "");
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
		h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_ROLLING_BACK));
	}
	{
		state_intent now = *in;
		now.phase = STATE_PHASE_ROLLING_BACK;
		now.last_error = (char *)cause;
		if(roll_back_step(h, req, g, &now))
			rolled_back(h, req, &now);
	}
}

/* ---- success ----------------------------------------------------------- */

static void succeed(const pr_class_host *h, const pr_class_req *req, const state_intent *in)
{
	sched_place_result res;
	prd_err e;
	char msg[700];
	memset(&res, 0, sizeof(res));
	/* The plan's own reservation must not stand in its way. */
	sched_snapshot_unbook(h->snap, req->pr->meta.uid, NULL);
	if(sched_snapshot_fork(h->snap) == 0 && sched_place(h->snap, req->sets, req->nsets, &res, &e) == 0 &&
	   res.fits_all && h->book(h->ctx, req->sets, req->nsets, &res, &e) == 0) {
		sched_snapshot_commit(h->snap);
		state_intent_close(h->db, in->plan_id, STATE_PHASE_DONE, NULL, NULL);
		state_group_success(h->db, in->node_group, NULL);
		metrics_counter_add(M_SCALEUPS, METRICS_L(in->node_group, "succeeded"), 1);
		h->count(h->ctx, PR_STAT_SCALEUP_SUCCEEDED);
		snprintf(msg, sizeof(msg), "%lld new node%s in %s are ready; capacity for all pods is booked",
			 (long long)in->delta, in->delta == 1 ? "" : "s", in->node_group);
		clear_plan_details(h, state_phase_name(STATE_PHASE_DONE));
		h->provisioned(h->ctx, PR_R_PROVISIONED, msg);
	} else {
		sched_snapshot_revert(h->snap);
		/* The nodes are there and Ready, but other pods took them: they
		 * are in use, so they stay; the plan is over and the request
		 * tries again. */
		state_intent_close(h->db, in->plan_id, STATE_PHASE_DONE, "capacity taken by other pods", NULL);
		snprintf(msg, sizeof(msg),
			 "the %lld new node%s in %s are ready but other pods took the capacity (%lld of %lld pods fit); "
			 "the nodes stay in use and the request is retried",
			 (long long)in->delta, in->delta == 1 ? "" : "s", in->node_group, (long long)res.placed,
			 (long long)res.requested);
		clear_plan_details(h, state_phase_name(STATE_PHASE_DONE));
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
	}
	sched_place_result_free(&res);
}

/* ---- progress of an open plan ------------------------------------------ */

static const char *failure_kind(const plan_view *pv, int64_t delta)
{
	if(pv->failed_oor == pv->failed && (int64_t)pv->failed >= delta)
		return "stockout";
	if(pv->failed_oor == pv->failed)
		return "partial creation (out of resources)";
	return "partial creation";
}

/* Close a plan whose cloud call never took effect: nothing to undo, no
 * backoff, and the group is free again for this pass. */
static void close_without_effect(const pr_class_host *h, pr_class_group *g, const state_intent *in, const char *why)
{
	if(in->phase != STATE_PHASE_PLANNED)
		state_intent_advance(h->db, in->plan_id, STATE_PHASE_ROLLING_BACK, why, NULL);
	state_intent_close(h->db, in->plan_id, STATE_PHASE_ROLLED_BACK, why, NULL);
	if(g)
		g->busy = false;
}

/* Returns true when the plan ended without effect and the request may
 * start over in this pass. */
static bool progress(const pr_class_host *h, const pr_class_req *req, state_intent *in)
{
	pr_class_group *g = find_group(h, in->node_group);
	plan_view pv;
	prd_err e;
	char cause[1100];

	if(in->phase == STATE_PHASE_PLANNED) {
		/* The cloud was never called (the call comes after increasing). */
		close_without_effect(h, g, in, "interrupted before the cloud call");
		log_info("scale-up plan interrupted before the cloud call; nothing to undo", "plan", in->plan_id);
		return true;
	}
	if(in->phase == STATE_PHASE_ROLLING_BACK) {
		if(roll_back_step(h, req, g, in))
			rolled_back(h, req, in);
		return false;
	}
	if(!g || pr_group_list(g, &e) || plan_view_of(h, g, in, &pv)) {
		if(h->now >= in->deadline_ns) {
			snprintf(cause, sizeof(cause), "the node group %s did not answer before the deadline", in->node_group);
			start_roll_back(h, req, g, in, cause, true);
		} else {
			log_warn("scale-up waits: cannot read the node group", "group", in->node_group, "error",
				 g ? e.msg : "not listed by any driver");
			h->wake_at(h->ctx, h->now + RETRY_NS);
		}
		return false;
	}
	if(in->phase == STATE_PHASE_INCREASING) {
		/* Interrupted around the call (a crash, or adopted from the API):
		 * did the cloud act? */
		if(g->target >= in->target_before + in->delta || pv.n > 0) {
			state_intent_advance(h->db, in->plan_id, STATE_PHASE_WAITING_FOR_NODES, NULL, NULL);
			in->phase = STATE_PHASE_WAITING_FOR_NODES;
			log_info("resuming an interrupted scale-up: the cloud took the increase", "plan", in->plan_id,
				 "group", g->id);
			if(req && !req->terminal)
				h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_WAITING_FOR_NODES));
		} else if(g->target <= in->target_before) {
			close_without_effect(h, g, in, "interrupted; the cloud never took the increase");
			log_info("interrupted scale-up never reached the cloud; starting over", "plan", in->plan_id,
				 "group", g->id);
			return true;
		} else {
			state_intent_advance(h->db, in->plan_id, STATE_PHASE_WAITING_FOR_NODES, NULL, NULL);
			in->phase = STATE_PHASE_WAITING_FOR_NODES;
		}
	}
	if(!req || req->terminal) {
		start_roll_back(h, req, g, in,
				req ? "the request finished before its nodes were ready" : "the request was deleted", false);
		return false;
	}
	if(pv.extra)
		log_warn("instances appeared in the group beyond the plan's size; they are not the plan's", "group",
			 g->id, "plan", in->plan_id, "extra", LOGI(pv.extra));
	if(pv.failed) {
		snprintf(cause, sizeof(cause), "%s: %zu of %lld instances failed (%s)", failure_kind(&pv, in->delta),
			 pv.failed, (long long)in->delta, pv.fail_msg ? pv.fail_msg : "no message");
		start_roll_back(h, req, g, in, cause, true);
		return false;
	}
	if(g->target < in->target_before + in->delta && (int64_t)pv.n < in->delta) {
		snprintf(cause, sizeof(cause),
			 "partial creation: the cloud lowered the target to %d with %zu of %lld instances created",
			 g->target, pv.n, (long long)in->delta);
		start_roll_back(h, req, g, in, cause, true);
		return false;
	}
	if((int64_t)pv.ready >= in->delta) {
		if(!req->sets) {
			start_roll_back(h, req, g, in, "the request's PodTemplates disappeared", false);
			return false;
		}
		succeed(h, req, in);
		return false;
	}
	if(h->now >= in->deadline_ns) {
		snprintf(cause, sizeof(cause),
			 "timeout: %zu of %lld instances created, %zu registered, %zu Ready after %llds", pv.n,
			 (long long)in->delta, pv.named, pv.ready, (long long)(h->limits->provision_timeout_ns / NS_PER_S));
		start_roll_back(h, req, g, in, cause, true);
		return false;
	}
	{
		char prog[160];
		snprintf(prog, sizeof(prog), "%zu/%lld created, %zu registered, %zu ready", pv.n, (long long)in->delta,
			 pv.named, pv.ready);
		h->set_detail(h->ctx, PR_DETAIL_PROGRESS, prog);
	}
	h->wake_at(h->ctx, in->deadline_ns);
	h->wake_at(h->ctx, h->now + POLL_NS);
	return false;
}

/* ---- starting a plan --------------------------------------------------- */

typedef struct choice {
	pr_class_group *g;
	int64_t delta;
	int64_t remaining;
} choice;

static void fill_option(sched_option *o, const pr_class_group *g, const sched_podset *rest, size_t n,
			const sched_est_result *est)
{
	size_t k, r;
	memset(o, 0, sizeof(*o));
	o->group_id = g->id;
	o->fits_all = true;
	o->node_count = est->new_nodes;
	o->pods = est->place.placed;
	for(k = 0; k < g->tmpl.n_allocatable; k++) {
		if(!strcmp(g->tmpl.allocatable[k].name, "cpu"))
			o->node_cpu = g->tmpl.allocatable[k].value;
		if(!strcmp(g->tmpl.allocatable[k].name, "memory"))
			o->node_memory = g->tmpl.allocatable[k].value;
	}
	for(k = 0; k < n; k++)
		for(r = 0; r < rest[k].pod->n_requests; r++) {
			if(!strcmp(rest[k].pod->requests[r].name, "cpu"))
				o->req_cpu += rest[k].pod->requests[r].value * rest[k].count;
			if(!strcmp(rest[k].pod->requests[r].name, "memory"))
				o->req_memory += rest[k].pod->requests[r].value * rest[k].count;
		}
}

#define WHY(...) (wl += (size_t)snprintf(why + wl, wl < sizeof(why) ? sizeof(why) - wl : 0, __VA_ARGS__))

/* Choose the group for the pods that do not fit existing nodes. Returns 1
 * with *out filled, 0 when no group can take them (the request is answered
 * here), or 2 when everything already fits (booked and answered here). */
static int choose(const pr_class_host *h, const pr_class_req *req, choice *out)
{
	sched_place_result existing;
	sched_podset *rest = arena_array(h->ar, req->nsets + 1, sizeof(*rest));
	sched_option *opts = arena_array(h->ar, h->ngroups + 1, sizeof(*opts));
	size_t *gidx = arena_array(h->ar, h->ngroups + 1, sizeof(*gidx));
	size_t nopt = 0, i, best, wl = 0;
	char why[1024] = "", msg[1600];
	int64_t remaining = 0;
	prd_err e;

	memset(&existing, 0, sizeof(existing));
	if(!rest || !opts || !gidx)
		return 0;
	if(sched_snapshot_fork(h->snap) || sched_place(h->snap, req->sets, req->nsets, &existing, &e)) {
		sched_snapshot_revert(h->snap);
		snprintf(msg, sizeof(msg), "cannot simulate the pods: %s", e.msg);
		h->not_provisioned(h->ctx, PR_R_CHECK_FAILED, msg);
		sched_place_result_free(&existing);
		return 0;
	}
	for(i = 0; i < req->nsets; i++) {
		rest[i] = req->sets[i];
		rest[i].count = req->sets[i].count - existing.sets[i].placed;
		remaining += rest[i].count;
	}
	if(remaining == 0) {
		int rc = h->book(h->ctx, req->sets, req->nsets, &existing, &e);
		if(rc == 0) {
			sched_snapshot_commit(h->snap);
			h->provisioned(h->ctx, PR_R_PROVISIONED, "capacity for all pods already exists; no scale-up was needed");
		} else {
			sched_snapshot_revert(h->snap);
			h->not_provisioned(h->ctx, PR_R_BOOK_FAILED, e.msg);
		}
		sched_place_result_free(&existing);
		return rc == 0 ? 2 : 0;
	}
	for(i = 0; i < h->ngroups; i++) {
		pr_class_group *g = &h->groups[i];
		sched_est_limits lim;
		sched_est_result est;
		memset(&est, 0, sizeof(est));
		if(!g->has_tmpl || g->busy || (g->backed_off && g->backoff_until > h->now)) {
			WHY("%s%s: %s", wl ? "; " : "", g->id,
			    !g->has_tmpl ? "no template" : g->busy ? "scale-up in progress" : "backed off");
			continue;
		}
		lim.group_room = g->max > g->target ? g->max - g->target : 0;
		lim.max_nodes_total = h->limits->max_nodes_total;
		lim.cluster_nodes = h->cluster_nodes;
		lim.max_new_nodes = h->limits->max_nodes_per_scaleup;
		if(sched_estimate(h->snap, &g->tmpl, rest, req->nsets, &lim, &est, &e)) {
			WHY("%s%s: %s", wl ? "; " : "", g->id, e.msg);
			continue;
		}
		if(!est.place.fits_all) {
			WHY("%s%s: %lld of %lld pods fit%s", wl ? "; " : "", g->id, (long long)est.place.placed,
			    (long long)est.place.requested,
			    est.limited_by == SCHED_EST_GROUP_MAX ? " within the group's max size"
			    : est.limited_by == SCHED_EST_TOTAL_MAX ? " within max-nodes-total"
			    : est.limited_by == SCHED_EST_SCALEUP_MAX ? " within max-nodes-per-scaleup"
			    : " on its template node");
			sched_est_result_free(&est);
			continue;
		}
		fill_option(&opts[nopt], g, rest, req->nsets, &est);
		gidx[nopt++] = i;
		sched_est_result_free(&est);
	}
	sched_snapshot_revert(h->snap);
	sched_place_result_free(&existing);
	if(!nopt || sched_expander_choose(h->expander, opts, nopt, &best, &e)) {
		snprintf(msg, sizeof(msg), "no node group can provide all %lld pods that do not fit existing nodes%s%s",
			 (long long)remaining, h->ngroups ? ": " : " (no node groups are configured)", why);
		h->not_provisioned(h->ctx, PR_R_NOT_FOUND, msg);
		return 0;
	}
	out->g = &h->groups[gidx[best]];
	out->delta = opts[best].node_count;
	out->remaining = remaining;
	return 1;
}

static void start(const pr_class_host *h, const pr_class_req *req)
{
	choice ch;
	state_intent in;
	prd_cloud_error de;
	prd_err e;
	char plan[160], msg[1600], *known = NULL;
	pr_class_group *g;
	int rc;

	if(choose(h, req, &ch) != 1)
		return;
	g = ch.g;
	if(!h->db) {
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, "cannot record the scale-up plan: no state store");
		return;
	}
	/* What the group has before the call decides which instances are the
	 * plan's: no listing, no call. */
	if(pr_group_list(g, &e) || !(known = known_encode(g))) {
		snprintf(msg, sizeof(msg), "cannot read node group %s before scaling it up: %s", g->id,
			 known ? e.msg : "out of memory");
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
		return;
	}
	memset(&in, 0, sizeof(in));
	snprintf(plan, sizeof(plan), "%s/%lld", req->pr->meta.uid, (long long)h->now);
	in.plan_id = plan;
	in.request_uid = (char *)req->pr->meta.uid;
	in.node_group = g->id;
	in.delta = ch.delta;
	in.target_before = g->target;
	in.deadline_ns = h->now + h->limits->provision_timeout_ns;
	in.known_before = known;
	/* Write-ahead, locally and then in the API, before the cloud. */
	if(state_intent_begin(h->db, &in, &e) || state_intent_set_known(h->db, plan, known, &e)) {
		snprintf(msg, sizeof(msg), "cannot record the scale-up plan: %s", e.msg);
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
		free(known);
		return;
	}
	snprintf(msg, sizeof(msg), "scaling node group %s up by %lld node%s for %lld pods", g->id, (long long)ch.delta,
		 ch.delta == 1 ? "" : "s", (long long)ch.remaining);
	h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_SCALING_UP, msg);
	put_plan_details(h, &in, STATE_PHASE_INCREASING);
	if(!h->may_act(h->ctx) || h->write_now(h->ctx, &e)) {
		/* Not in the API: the cloud must not be called. */
		state_intent_close(h->db, plan, STATE_PHASE_ROLLED_BACK, "the plan could not be written to the API", NULL);
		log_warn("scale-up not started: the plan could not be recorded in the request's status", "request",
			 req->pr->meta.name, "error", h->may_act(h->ctx) ? e.msg : "fenced");
		h->wake_at(h->ctx, h->now + RETRY_NS);
		free(known);
		return;
	}
	free(known);
	g->busy = true;
	if(state_intent_advance(h->db, plan, STATE_PHASE_INCREASING, NULL, &e) || !h->may_act(h->ctx)) {
		/* The API says increasing; whoever continues asks the cloud. */
		h->wake_at(h->ctx, h->now + RETRY_NS);
		return;
	}
	memset(&de, 0, sizeof(de));
	metrics_counter_add(M_SCALEUPS, METRICS_L(g->id, "attempted"), 1);
	h->count(h->ctx, PR_STAT_SCALEUP_STARTED);
	rc = g->drv->api->atomic_increase_size
		     ? g->drv->api->atomic_increase_size(g->drv->state, g->id, (int32_t)ch.delta, &de)
		     : g->drv->api->increase_size(g->drv->state, g->id, (int32_t)ch.delta, &de);
	pr_group_unlist(g);
	state_intent_get(h->db, plan, &in, NULL);
	if(rc) {
		de.message[sizeof(de.message) - 1] = '\0';
		cloud_driver_error(g->drv, "increase size", rc, &de, &e);
		snprintf(msg, sizeof(msg), "the cloud refused the increase: %s", e.msg);
		/* Like cluster-autoscaler: any failed increase backs the group
		 * off, a stockout reported as "try again" included. */
		start_roll_back(h, req, g, &in, msg, true);
	} else {
		state_intent_advance(h->db, plan, STATE_PHASE_WAITING_FOR_NODES, NULL, NULL);
		h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_WAITING_FOR_NODES));
		h->wake_at(h->ctx, h->now + POLL_NS);
		h->wake_at(h->ctx, in.deadline_ns);
	}
	state_intent_clear(&in);
}

/* ---- the module --------------------------------------------------------- */

static void atomic_decide(const pr_class_module *m, const pr_class_host *h, const pr_class_req *req)
{
	state_intent in;
	(void)m;
	if(open_plan(h, req->pr->meta.uid, &in)) {
		bool again = progress(h, req, &in);
		state_intent_clear(&in);
		if(!again || req->terminal || !req->sets)
			return;
	} else if(req->terminal || !req->sets) {
		return;
	}
	start(h, req);
}

/* Plans whose request is gone (deleted) still finish: they roll back. */
static void atomic_pass_end(const pr_class_module *m, const pr_class_host *h, const pr_class_pass *p)
{
	state_intent *open = NULL;
	size_t n = 0, i, j;
	(void)m;
	if(!h->db || state_intent_list_open(h->db, &open, &n, NULL))
		return;
	for(i = 0; i < n; i++) {
		bool present = false;
		for(j = 0; j < p->nprs && !present; j++)
			present = !strcmp(p->prs[j]->meta.uid, open[i].request_uid);
		if(!present && h->may_act(h->ctx))
			progress(h, NULL, &open[i]);
	}
	state_intent_list_free(open, n);
}

static const char *const atomic_aliases[] = { "atomic-scale-up.kubernetes.io", NULL };

const pr_class_module pr_class_atomic = {
	.name = PR_CLASS_ATOMIC,
	.aliases = atomic_aliases,
	.short_name = "atomic-scale-up",
	.pass_begin = atomic_pass_begin,
	.in_flight = atomic_in_flight,
	.decide = atomic_decide,
	.pass_end = atomic_pass_end,
};

/* The atomic scale-up class (best-effort-atomic-scale-up.autoscaling.x-k8s.io).
 *
 * Pods that fit existing nodes are placed first; for the rest one node
 * group that fits all of them is chosen (estimator + expander), or a split
 * across several groups (atomic_choose.c). A plan is one intent per group,
 * all-or-nothing across them:
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
 * `delta` of them; a group serves one plan at a time), or, where the driver
 * marks instances (AT_OWN_MARK), exactly those carrying the plan's owner
 * token: several plans then share a group (a burst of requests, planned in
 * one pass; atomic_choose.c). That set is re-read
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
#include "classes/atomic_int.h"
#include "classes/nap.h"
#include "util/hmap.h"
#include "classes/details.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT_SWEEP_EVERY_NS (30 * AT_NS_PER_S)
#define AT_SWEEP_GRACE_NS (30 * AT_NS_PER_S)

/* "a by 3 and b by 1" */
void at__groups_words(const at_plan *p, char *out, size_t len)
{
	size_t i, l = 0;
	out[0] = '\0';
	for(i = 0; i < p->n && l < len; i++)
		l += (size_t)snprintf(out + l, len - l, "%s%s by %lld", i == 0 ? "" : i + 1 == p->n ? " and " : ", ",
				      p->v[i].node_group, (long long)p->v[i].delta);
}

/* ---- pass hooks -------------------------------------------------------- */

/* Reserve the nodes a plan has made for its request: no other request of
 * this pass may count them. */
static void reserve_node(const pr_class_host *h, const state_intent *in, const char *node)
{
	sched_res all = { "pods", SCHED_QTY_MAX };
	sched_snapshot *snap = h->snapshot(h->ctx); /* (prepared: this runs in the reserve hook) */
	size_t idx;
	if(snap && sched_snapshot_find_node(snap, node, &idx) == 0)
		sched_snapshot_book(snap, in->request_uid, idx, &all, 1, NULL);
}

typedef struct reserve_ctx {
	const pr_class_host *h;
	const state_intent *in;
	const state_intent *open; /* every open plan, for their recorded nodes */
	size_t nopen;
	const hmap *booked;       /* nodes some request has booked */
	const hmap *named;        /* node -> 1 + index of the listed group naming it */
	bool skip_own;            /* the plan's group could not be listed: its names do not count */
} reserve_ctx;

/* A node some group this pass listed names (other than the plan's when
 * that could not be listed) is known: not one the plan may have made
 * unseen. */
static bool named_by_listing(const reserve_ctx *r, const char *node)
{
	uintptr_t at = (uintptr_t)hmap_get(r->named, node);
	return at && !(r->skip_own && !strcmp(r->h->groups[at - 1].id, r->in->node_group));
}

static void reserve_cb(void *ud, const char *node)
{
	reserve_ctx *r = ud;
	size_t i, k;
	for(i = 0; i < r->nopen; i++)
		for(k = 0; &r->open[i] != r->in && k < r->open[i].n_nodes; k++)
			if(!strcmp(r->open[i].nodes[k], node))
				return; /* another plan's */
	if(hmap_has(r->booked, node))
		return; /* some request's already (a plan that ended, a Provisioned request) */
	if(!named_by_listing(r, node))
		reserve_node(r->h, r->in, node);
}

/* Does the cloud list an instance of the plan, healthy and staying, whose
 * Node it does not name yet? That Node may have joined already: Cluster
 * API names a Machine's Node (status.nodeRef) and Karpenter a NodeClaim's
 * (status.nodeName) only after it registers. */
static bool has_unnamed(const pr_class_host *h, pr_class_group *g, const state_intent *in)
{
	at_view pv;
	size_t i;
	if(!g || pr_group_list(g, NULL) || at_view_of(h, g, in, &pv))
		return false;
	for(i = 0; i < pv.n; i++)
		if(!pv.v[i]->node && pv.v[i]->errclass == PRD_CLOUD_ERRCLASS_NONE &&
		   pv.v[i]->state != PRD_CLOUD_INSTANCE_DELETING)
			return true;
	return false;
}

/* A set of borrowed names, sized once (open addressing): what the intent
 * recorded, asked about once per instance of a plan that may have a
 * thousand, every pass; an hmap would copy every name. */
typedef struct name_set {
	const char **slot;
	size_t mask;
} name_set;

static bool name_set_init(name_set *s, const char *const *names, size_t n, arena *ar)
{
	size_t cap = 16, i;
	while(cap < 2 * n)
		cap *= 2;
	s->mask = cap - 1;
	if(!(s->slot = arena_array(ar, cap, sizeof(*s->slot))))
		return false;
	for(i = 0; i < n; i++) {
		size_t k = (size_t)str_hash(names[i], strlen(names[i])) & s->mask;
		while(s->slot[k] && strcmp(s->slot[k], names[i]))
			k = (k + 1) & s->mask;
		s->slot[k] = names[i];
	}
	return true;
}

static bool name_set_has(const name_set *s, const char *name)
{
	size_t k = (size_t)str_hash(name, strlen(name)) & s->mask;
	for(; s->slot[k]; k = (k + 1) & s->mask)
		if(!strcmp(s->slot[k], name))
			return true;
	return false;
}

/* Node and apiserver clocks may disagree this much. */

/* What the cloud lists for an intent beyond the nodes it recorded: the
 * named, healthy instances whose node is not recorded yet, into
 * (*out)[*n] (arena). False when the group cannot be listed (or out of
 * memory). */
static bool unrecorded(const pr_class_host *h, pr_class_group *g, const state_intent *in, const char ***out,
		       size_t *n)
{
	at_view pv;
	name_set recorded;
	size_t i;
	*out = NULL;
	*n = 0;
	if(!g || pr_group_list(g, NULL) || at_view_of(h, g, in, &pv))
		return false;
	/* A set, not a scan: a plan of 1,000 nodes is looked at every pass. */
	if(!name_set_init(&recorded, (const char *const *)in->nodes, in->n_nodes, h->ar) ||
	   !(*out = arena_array(h->ar, pv.n + 1, sizeof(**out))))
		return false;
	for(i = 0; i < pv.n; i++)
		if(pv.v[i]->node && pv.v[i]->errclass == PRD_CLOUD_ERRCLASS_NONE &&
		   !name_set_has(&recorded, pv.v[i]->node))
			(*out)[(*n)++] = pv.v[i]->node;
	return true;
}

/* The nodes the plan is known to have made are recorded with its intent, so
 * that they stay reserved in a pass where the cloud cannot be asked (a
 * failed instance listing used to leave them free for other requests, and
 * the plan's request then had to scale up a second time): the ones that
 * registered since the last pass, in one transaction (out of memory: in a
 * later pass). */
static void record(const pr_class_host *h, pr_class_group *g, const state_intent *in)
{
	const char **add;
	size_t nadd;
	if(unrecorded(h, g, in, &add, &nadd) && nadd && !state_phase_is_terminal(in->phase))
		at_intent_add_nodes(h, in->plan_id, add, nadd, NULL);
}

/* Is the request of this module's class (by name or alias)? */
static bool of_class(const pr_class_module *m, const kube_provreq *pr)
{
	size_t i;
	if(!pr->class_name)
		return false;
	if(!strcmp(pr->class_name, m->name))
		return true;
	for(i = 0; m->aliases && m->aliases[i]; i++)
		if(!strcmp(pr->class_name, m->aliases[i]))
			return true;
	return false;
}

static void atomic_pass_begin(const pr_class_module *m, const pr_class_host *h, const pr_class_pass *p)
{
	const state_intent *open = NULL;
	size_t n = 0, i;
	if(!h->db)
		return;
	if(p->term_began)
		at_drop_contradicted(h, p);
	/* A plan the API shows open (scaling up or rolling back) and this
	 * store does not know is adopted. */
	for(i = 0; i < p->nprs; i++) {
		char *phase;
		state_phase ph;
		/* (Cheaper checks first than reading details.) */
		if(!of_class(m, p->prs[i]) || !p->ours(h->ctx, p->prs[i]) || at_plan_exists(h, p->prs[i]->meta.uid) ||
		   !(phase = pr_details_get(p->prs[i], PR_DETAIL_PHASE)))
			continue;
		if(state_phase_parse(phase, &ph) == 0 && !state_phase_is_terminal(ph))
			at_adopt(h, p->prs[i]);
		free(phase);
	}
	if(at_open_intents(h, &open, &n))
		return;
	for(i = 0; i < n; i++) {
		pr_class_group *g = at_find_group(h, open[i].node_group);
		if(g)
			g->busy = true;
		record(h, g, &open[i]);
	}
}

/* For the plans marked in `unseen` (UNSEEN_*), hold the Nodes that
 * registered since they began (an adopted plan: when the previous leader
 * began it, not when this store took it up), except those another open
 * plan recorded, a request booked, or a listing names. */
enum { UNSEEN_NONE, UNSEEN_UNLISTED, UNSEEN_UNNAMED };
static void hold_unseen(const pr_class_host *h, const state_intent *open, size_t n, const uint8_t *unseen)
{
	state_booking *b = NULL;
	size_t nb = 0, i, k;
	hmap booked, named;
	hmap_init(&booked, NULL);
	hmap_init(&named, NULL);
	if(state_booking_list_active(h->db, &b, &nb, NULL) == 0) {
		for(k = 0; k < nb; k++)
			hmap_put(&booked, b[k].node_name, NULL);
		state_booking_list_free(b, nb);
	}
	for(i = 0; i < h->ngroups; i++)
		for(k = 0; h->groups[i].listed && !h->groups[i].list_rc && k < h->groups[i].ninst; k++)
			if(h->groups[i].inst[k].node)
				hmap_put(&named, h->groups[i].inst[k].node, (void *)(uintptr_t)(i + 1));
	for(i = 0; i < n; i++) {
		reserve_ctx r = { h, &open[i], open, n, &booked, &named, unseen[i] == UNSEEN_UNLISTED };
		if(unseen[i] != UNSEEN_NONE)
			h->nodes_since(h->ctx, at_plan_began(&open[i]) - AT_CLOCK_SKEW_NS, reserve_cb, &r);
	}
	hmap_free(&named);
	hmap_free(&booked);
}

/* Hold, in the pass's snapshot, the nodes each open plan made: no other
 * request may count them. Where a Node may be the plan's though no listing
 * names it (the cloud cannot be asked, or lists instances of the plan
 * whose Node it does not name yet), every Node that registered since the
 * plan began and no listing names is held for this pass too. */
static void atomic_reserve(const pr_class_module *m, const pr_class_host *h, const pr_class_pass *p)
{
	const state_intent *open = NULL;
	const char **more;
	size_t n = 0, i, k, nmore;
	uint8_t *unseen;
	bool any = false;
	(void)m;
	(void)p;
	if(!h->db || at_open_intents(h, &open, &n) || !(unseen = arena_array(h->ar, n + 1, sizeof(*unseen))))
		return;
	for(i = 0; i < n; i++) {
		pr_class_group *g = at_find_group(h, open[i].node_group);
		for(k = 0; k < open[i].n_nodes; k++)
			reserve_node(h, &open[i], open[i].nodes[k]);
		/* A group no loaded driver serves (a plan adopted from a replica
		 * with other drivers, or a driver removed from the config): its
		 * nodes cannot be told from others, and holding every new Node
		 * for a plan nothing here can progress would starve the cluster. */
		if(!unrecorded(h, g, &open[i], &more, &nmore)) {
			unseen[i] = g || !h->groups_complete ? UNSEEN_UNLISTED : UNSEEN_NONE;
			any |= unseen[i] != UNSEEN_NONE;
			continue;
		}
		for(k = 0; k < nmore; k++)
			reserve_node(h, &open[i], more[k]);
		if(has_unnamed(h, g, &open[i])) {
			unseen[i] = UNSEEN_UNNAMED;
			any = true;
		}
	}
	if(any)
		hold_unseen(h, open, n, unseen);
}

static bool atomic_in_flight(const pr_class_module *m, const pr_class_host *h, const kube_provreq *pr)
{
	(void)m;
	return at_plan_exists(h, pr->meta.uid);
}

/* ---- rollback ---------------------------------------------------------- */

/* A plan that will not provision its request gives the held room back. */
static void release_held(const pr_class_host *h, const pr_class_req *req)
{
	if(!req || !h->db)
		return;
	state_booking_delete_request(h->db, req->pr->meta.uid, NULL, NULL);
	if(!req->terminal)
		h->set_detail(h->ctx, PR_DETAIL_BOOKING, NULL);
}

static void say_rolled_back(const pr_class_host *h, const pr_class_req *req, const at_plan *open)
{
	char msg[1400], gw[400];
	const char *cause = "unknown cause";
	at_plan all;
	const at_plan *p = open;
	size_t i;
	/* A request that failed for good is told too: its Failed condition
	 * said the rollback had begun, this says it is over. */
	if(!req || req->deleting)
		return;
	/* The room it held goes with it, also when this store took the plan
	 * up already rolling back (at__start_roll_back released it where the
	 * rollback began; the status and the booking ledger still show it). */
	release_held(h, req);
	/* The whole plan, closed rows included: the failing group's cause, not
	 * a follower's. */
	memset(&all, 0, sizeof(all));
	if(open->n && at_plan_all(h, open->v[0].plan_id, &all))
		p = &all;
	else
		at_plan_free(&all);
	for(i = 0; i < p->n; i++)
		if(p->v[i].last_error && p->v[i].last_error[0] &&
		   (!strcmp(cause, "unknown cause") || !strncmp(cause, FOLLOWER, strlen(FOLLOWER))))
			cause = p->v[i].last_error;
	at__groups_words(p, gw, sizeof(gw));
	if(!strncmp(cause, INTERRUPTED, strlen(INTERRUPTED))) {
		/* provreqd's own crash: no failure of the request's, no backoff;
		 * the next pass starts the scale-up again. */
		snprintf(msg, sizeof(msg), "%s; what it had made is undone and the scale-up starts again", cause);
		if(p == &all)
			at_plan_free(&all);
		h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_SCALING_UP, msg);
		h->event(h->ctx, "Normal", PR_R_SCALE_UP_ROLLED_BACK, msg);
		at_clear_details(h, state_phase_name(STATE_PHASE_ROLLED_BACK));
		h->wake_at(h->ctx, h->now);
		return;
	}
	snprintf(msg, sizeof(msg), "scale-up of %s failed: %s; rolled back: the cloud shows none of the instances it "
		 "added and every target is back where it was", gw, cause);
	if(p == &all)
		at_plan_free(&all);
	h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_SCALE_UP_FAILED, msg);
	h->event(h->ctx, "Normal", PR_R_SCALE_UP_ROLLED_BACK, msg);
	at_clear_details(h, state_phase_name(STATE_PHASE_ROLLED_BACK));
}

/* One rollback step for every intent of the plan; true once all are
 * confirmed gone. */
bool at__roll_back_all(const pr_class_host *h, const pr_class_req *req, at_plan *p)
{
	size_t i, closed = 0;
	/* The API says rolling-back before anything is deleted. A rollback
	 * whose status was not written (a crash, a 409, a fence) left the API
	 * saying "increasing" while the cloud had deleted the plan's
	 * instances; a new leader adopting the plan from the status then
	 * found none of them and asked the cloud again: one plan, made twice
	 * (DST mixed seed 21041). No write when the API says so already. */
	if(req && !req->terminal) {
		prd_err e;
		h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_ROLLING_BACK));
		if(!h->may_act(h->ctx) || h->write_now(h->ctx, &e)) {
			log_warn("rollback waits: the request's status could not say rolling-back", "request",
				 req->pr->meta.name, "plan", p->n ? p->v[0].plan_id : "?", "error",
				 h->may_act(h->ctx) ? e.msg : "fenced");
			h->wake_at(h->ctx, h->now + AT_RETRY_NS);
			return false;
		}
	}
	for(i = 0; i < p->n; i++) {
		if(state_phase_is_terminal(p->v[i].phase) ||
		   at_roll_back_step(h, req, at_find_group(h, p->v[i].node_group), &p->v[i])) {
			p->v[i].phase = STATE_PHASE_ROLLED_BACK;
			closed++;
		}
	}
	if(closed < p->n)
		return false;
	/* Requests queued behind the plan are decided again now. */
	h->wake_at(h->ctx, h->now);
	say_rolled_back(h, req, p);
	if(req)
		h->hold(h->ctx, false, NULL);
	return true;
}

/* Enter rolling-back for the whole plan. `failing` (may be NULL) marks the
 * intents whose group failed: only those groups are backed off. */
/* The pods of the request that fit existing nodes keep that room while its
 * plan runs (else a later request takes it and the plan, once its nodes
 * are Ready, finds too little room and the request scales up again):
 * booked until `until_ns`, the plan's deadline with a margin. */
static void hold_existing(const pr_class_host *h, const pr_class_req *req, int64_t until_ns)
{
	sched_snapshot *snap = h->snapshot(h->ctx);
	sched_place_result res;
	prd_err e;
	int64_t placed = 0;
	size_t i;
	memset(&res, 0, sizeof(res));
	if(!snap || sched_snapshot_fork(snap))
		return;
	if(sched_place(snap, req->sets, req->nsets, &res, &e) == 0) {
		for(i = 0; i < req->nsets; i++)
			placed += res.sets[i].placed;
		if(placed > 0 && h->book_until(h->ctx, req->sets, req->nsets, &res, until_ns, &e) == 0) {
			sched_snapshot_commit(snap);
			sched_place_result_free(&res);
			return;
		}
	}
	sched_snapshot_revert(snap);
	sched_place_result_free(&res);
}

void at__start_roll_back(const pr_class_host *h, const pr_class_req *req, at_plan *p, const bool *failing,
			 const char *cause)
{
	char msg[1600], gw[400];
	size_t i;
	bool any_backoff = false;
	for(i = 0; i < p->n; i++) {
		state_intent *in = &p->v[i];
		bool fail = failing && failing[i];
		const char *why = fail || !failing ? cause : FOLLOWER;
		if(state_phase_is_terminal(in->phase))
			continue;
		at_intent_advance(h, in->plan_id, STATE_PHASE_ROLLING_BACK, why, NULL);
		in->phase = STATE_PHASE_ROLLING_BACK;
		free(in->last_error);
		in->last_error = str_dup(fail || !failing ? cause : why);
		if(fail) {
			pr_class_group *g = at_find_group(h, in->node_group);
			state_group_backoff gb;
			int64_t until = 0;
			state_group_fail(h->db, in->node_group, cause, &until, NULL);
			nap_fail_shape(h, in->node_group, cause);
			any_backoff = true;
			if(g) {
				g->backed_off = true;
				g->backoff_until = until;
			}
			/* Recorded with the request, so a new leader keeps it. */
			if(req && !req->terminal && state_group_get(h->db, in->node_group, &gb, NULL) == 0) {
				char v[400], when[RFC3339_MAX];
				rfc3339_format_micro(gb.until_ns, when, sizeof(when));
				snprintf(v, sizeof(v), "%s %s %lld", in->node_group, when, (long long)gb.failures);
				h->set_detail(h->ctx, PR_DETAIL_GROUP_BACKOFF, v);
				state_group_clear(&gb);
			}
		}
		/* A request deleted or ended before its nodes came is no
		 * failure: said at info, not as one. */
		if(!req || req->terminal)
			log_info("the request ended before its plan did; rolling back", "group", in->node_group, "plan",
				 in->plan_id, "cause", why);
		else
			log_warn("scale-up failed; rolling back", "group", in->node_group, "plan", in->plan_id, "cause",
				 why);
	}
	if(req && !req->terminal && !strncmp(cause, INTERRUPTED, strlen(INTERRUPTED))) {
		/* Not the request's failure: no ScaleUpFailed, no backoff. */
		h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_SCALING_UP, cause);
		h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_ROLLING_BACK));
	} else if(req && !req->terminal) {
		at__groups_words(p, gw, sizeof(gw));
		snprintf(msg, sizeof(msg), "scale-up of %s failed: %s; removing what it added%s", gw, cause,
			 any_backoff ? "; the failing group is backed off" : "");
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
		h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_ROLLING_BACK));
	}
	release_held(h, req);
	at__roll_back_all(h, req, p);
}

/* ---- starting a plan --------------------------------------------------- */

/* Write the plan locally: one intent per group, in phase planned. */
static int begin_plan(const pr_class_host *h, const pr_class_req *req, const at_choice *ch, at_plan *p, prd_err *e)
{
	size_t i;
	int rc = 0;
	p->v = calloc(ch->n + 1, sizeof(*p->v));
	if(!p->v)
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	for(i = 0; i < ch->n && !rc; i++) {
		state_intent *in = &p->v[i];
		char id[400];
		snprintf(id, sizeof(id), "%s/%lld#%zu", req->pr->meta.uid, (long long)h->now, i);
		in->plan_id = str_dup(id);
		in->request_uid = str_dup(req->pr->meta.uid);
		in->node_group = str_dup(ch->parts[i].g->id);
		in->delta = ch->parts[i].delta;
		in->target_before = ch->parts[i].g->target;
		in->deadline_ns = h->now + h->limits->provision_timeout_ns;
		in->known_before = at_known_encode(ch->parts[i].g);
		in->term = str_dup(h->term ? h->term : "");
		p->n++;
		if(!in->plan_id || !in->request_uid || !in->node_group || !in->known_before || !in->term)
			rc = prd_err_set(e, PRD_ENOMEM, "out of memory");
		if(!rc)
			rc = at_intent_begin(h, in, e);
		if(!rc)
			rc = at_intent_set_known(h, in->plan_id, in->known_before, e);
	}
	return rc;
}

/* The conditional increase of group `i` found its target moved since the
 * plan read it: someone else (another replica's late call, another shard,
 * cluster-autoscaler) scales the group, and the call did nothing. Groups
 * not asked yet are closed untouched, groups asked before are rolled back
 * (no group is to blame, none is backed off), and the request plans again
 * from what the cloud shows now. */
static void target_moved(const pr_class_host *h, const pr_class_req *req, at_plan *p, size_t i, const char *why)
{
	char msg[1100];
	size_t k;
	metrics_counter_add(M_PLAN_CONFLICTS, METRICS_L(p->v[i].node_group, "target_moved"), 1);
	log_warn("scale-up not made: the group's target moved since the plan was made (or a newer leader fenced it); "
		 "planning again", "group", p->v[i].node_group, "plan", p->v[i].plan_id, "cause", why);
	for(k = i; k < p->n; k++) {
		at_close_without_effect(h, at_find_group(h, p->v[k].node_group), &p->v[k],
					k == i ? "the group's target moved before the call took effect"
					       : "another group of the plan was not asked");
		p->v[k].phase = STATE_PHASE_ROLLED_BACK;
	}
	/* Soon: the target was read a moment ago, a cache may trail it. */
	h->wake_at(h->ctx, h->now + AT_NS_PER_S);
	if(i == 0) {
		if(req && !req->terminal) {
			at_clear_details(h, state_phase_name(STATE_PHASE_ROLLED_BACK));
			snprintf(msg, sizeof(msg), "node group %s changed size while the scale-up was being made (%s); "
				 "planning again", p->v[i].node_group, why);
			h->event(h->ctx, "Normal", PR_R_SCALE_UP_REPLANNED, msg);
		}
		release_held(h, req);
		h->hold(h->ctx, false, NULL);
		return;
	}
	snprintf(msg, sizeof(msg), "node group %s changed size while the plan was being made (%s)", p->v[i].node_group,
		 why);
	at__start_roll_back(h, req, p, NULL, msg);
}

/* Ask the cloud, group by group, each call conditional on the target the
 * plan was made from. A failed call rolls the whole plan back and backs
 * that group (only) off. */
static void call_cloud(const pr_class_host *h, const pr_class_req *req, at_plan *p)
{
	size_t i;
	for(i = 0; i < p->n; i++) {
		state_intent *in = &p->v[i];
		pr_class_group *g = at_find_group(h, in->node_group);
		prd_cloud_error de;
		prd_err e;
		int rc;
		if(!g || !h->may_act(h->ctx)) {
			/* Fenced (or the group vanished): the API says increasing;
			 * whoever continues asks the cloud what it took. */
			h->wake_at(h->ctx, h->now + AT_RETRY_NS);
			return;
		}
		metrics_counter_add(M_SCALEUPS, METRICS_L(g->id, "attempted"), 1);
		rc = at_increase(g, in, (int32_t)in->delta, (int32_t)in->target_before, &de);
		if(rc == PRD_CLOUD_ECONFLICT) {
			target_moved(h, req, p, i, de.message);
			return;
		}
		if(rc) {
			char msg[1100];
			bool *failing = arena_array(h->ar, p->n + 1, sizeof(*failing));
			size_t k;
			cloud_driver_error(g->drv, "increase size", rc, &de, &e);
			snprintf(msg, sizeof(msg), "the cloud refused the increase of %s: %s", g->id, e.msg);
			/* Groups not asked yet were never touched. */
			for(k = i + 1; k < p->n; k++) {
				at_close_without_effect(h, at_find_group(h, p->v[k].node_group), &p->v[k],
							"another group of the plan failed before this one was asked");
				p->v[k].phase = STATE_PHASE_ROLLED_BACK;
			}
			/* Like cluster-autoscaler: any failed increase backs the
			 * group off, a stockout reported as "try again" included. */
			if(failing)
				failing[i] = true;
			at__start_roll_back(h, req, p, failing, msg);
			return;
		}
		at_intent_advance(h, in->plan_id, STATE_PHASE_WAITING_FOR_NODES, NULL, NULL);
		in->phase = STATE_PHASE_WAITING_FOR_NODES;
	}
	h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(STATE_PHASE_WAITING_FOR_NODES));
	h->wake_at(h->ctx, h->now + AT_POLL_NS);
	h->wake_at(h->ctx, p->v[0].deadline_ns);
}

/* Record the groups the plan creates (node auto-provisioning). */
static int record_new_groups(const pr_class_host *h, const at_choice *ch, const at_plan *p, prd_err *e)
{
	size_t i;
	int rc = 0;
	for(i = 0; i < ch->n && i < p->n && !rc; i++)
		if(ch->parts[i].g->nap_new)
			rc = nap_record(h, ch->parts[i].g, p->v[i].plan_id, e);
	return rc;
}

/* Cluster-wide limits, before anything is written or asked: true when
 * they keep the plan out (the request answered here). Kept out only by
 * the nodes plans in flight still add: it waits for them (no request
 * backoff). */
static bool over_limits(const pr_class_host *h, const at_choice *ch)
{
	char msg[1600];
	if(!nap_within_limits(h, ch, true, msg, sizeof(msg))) {
		char later[1200];
		metrics_counter_add(M_SCALEUPS, METRICS_L(ch->parts[0].g->id, "limit_refused"), 1);
		if(nap_within_limits(h, ch, false, later, sizeof(later))) {
			/* Cut to fit (the result is looked at: the compiler then
			 * knows the cut is meant). */
			if(snprintf(later, sizeof(later), PR_MSG_QUEUED " %s: %s; decided again when a plan ends",
				    ch->parts[0].g->id, msg) >= (int)sizeof(later))
				later[sizeof(later) - 1] = '\0';
			h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_WAITING_SCALE_UP, later);
			h->wake_at(h->ctx, h->now + AT_RETRY_NS);
			return true;
		}
		h->not_provisioned(h->ctx, PR_R_NOT_FOUND, msg);
		return true;
	}
	return false;
}

/* What each group has before the call decides which instances are the
 * plan's: no listing, no call (false, the request answered here). */
static bool groups_listed(const pr_class_host *h, const at_choice *ch)
{
	char msg[1600];
	prd_err e;
	size_t i;
	for(i = 0; i < ch->n; i++)
		if(pr_group_list(ch->parts[i].g, &e)) {
			snprintf(msg, sizeof(msg), "cannot read node group %s before scaling it up: %s", ch->parts[i].g->id,
				 e.msg);
			h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
			return false;
		}
	return true;
}

/* The plan written locally: say it in the request (condition, details),
 * for the write that follows. */
static void say_scaling_up(const pr_class_host *h, const at_choice *ch, const at_plan *p)
{
	char msg[1600], gw[400];
	size_t i;
	{
		/* The groups it creates go into the status with the plan: a
		 * new leader adopts the plan before they exist too. */
		char *spec = nap_spec_of(ch, p->n);
		h->set_detail(h->ctx, PR_DETAIL_NAP_SPEC, spec);
		free(spec);
	}
	at__groups_words(p, gw, sizeof(gw));
	snprintf(msg, sizeof(msg), "scaling node group%s %s node%s for %lld pods%s%s", p->n > 1 ? "s" : "", gw,
		 p->n == 1 && p->v[0].delta == 1 ? "" : "s", (long long)ch->remaining,
		 ch->podset_groups ? "; podSet:group=pods " : "", ch->podset_groups ? ch->podset_groups : "");
	for(i = 0; i < ch->n; i++)
		if(ch->parts[i].g->nap_new) {
			char nw[300];
			size_t ml = strlen(msg);
			nap_words(ch->parts[i].g, nw, sizeof(nw));
			snprintf(msg + ml, sizeof(msg) - ml, "; %s (auto-provisioned)", nw);
			h->set_detail(h->ctx, PR_DETAIL_NAP_GROUP, nw);
		}
	h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_SCALING_UP, msg);
	at_put_details(h, p, STATE_PHASE_INCREASING);
	if(ch->podset_groups)
		h->set_detail(h->ctx, PR_DETAIL_PODSET_GROUPS, ch->podset_groups);
}

/* The plan could not be written to the API (e says why): the cloud must
 * not be called; the plan closes without effect. */
static void not_in_api(const pr_class_host *h, const pr_class_req *req, const at_plan *p, const prd_err *e)
{
	char why[600];
	size_t i;
	for(i = 0; i < p->n; i++)
		at_close_without_effect(h, NULL, &p->v[i], "the plan could not be written to the API");
	release_held(h, req);
	log_warn("scale-up not started: the plan could not be recorded in the request (status and finalizer)", "request",
		 req->pr->meta.name, "error", h->may_act(h->ctx) ? e->msg : "fenced");
	/* The status this pass writes at its end must not show the
	 * plan open (the status may have landed and the finalizer
	 * not): a new leader would adopt and run a plan this store
	 * has closed, and whose held room it has given back. */
	snprintf(why, sizeof(why), "the scale-up plan could not be recorded in the request (%s); it is planned again",
		 h->may_act(h->ctx) ? e->msg : "fenced");
	h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_SCALING_UP, why);
	at_clear_details(h, state_phase_name(STATE_PHASE_ROLLED_BACK));
	h->wake_at(h->ctx, h->now + AT_RETRY_NS);
}

/* The plan is in the API: its intents move to increasing. False when one
 * cannot (the API says increasing; whoever continues asks the cloud). */
static bool all_increasing(const pr_class_host *h, at_choice *ch, at_plan *p)
{
	prd_err e;
	size_t i;
	for(i = 0; i < p->n; i++) {
		ch->parts[i].g->busy = true;
		if(at_intent_advance(h, p->v[i].plan_id, STATE_PHASE_INCREASING, NULL, &e)) {
			h->wake_at(h->ctx, h->now + AT_RETRY_NS);
			return false;
		}
		p->v[i].phase = STATE_PHASE_INCREASING;
	}
	return true;
}

static void start(const pr_class_host *h, const pr_class_req *req)
{
	at_choice ch;
	at_plan p;
	prd_err e;
	char msg[1600];
	size_t i;

	if(at_choose(h, req, &ch) != 1)
		return;
	if(!h->db) {
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, "cannot record the scale-up plan: no state store");
		return;
	}
	if(over_limits(h, &ch) || !groups_listed(h, &ch))
		return;
	memset(&p, 0, sizeof(p));
	/* Write-ahead, locally and then in the API, before the cloud; a
	 * group the plan creates is recorded with it. */
	if(begin_plan(h, req, &ch, &p, &e) || record_new_groups(h, &ch, &p, &e)) {
		for(i = 0; i < p.n; i++)
			at_intent_close(h, p.v[i].plan_id, STATE_PHASE_ROLLED_BACK, "not recorded", NULL);
		snprintf(msg, sizeof(msg), "cannot record the scale-up plan: %s", e.msg);
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
		at_plan_free(&p);
		return;
	}
	hold_existing(h, req, p.v[0].deadline_ns + PR_HOLD_MARGIN_NS);
	say_scaling_up(h, &ch, &p);
	if(!h->may_act(h->ctx) || h->write_now(h->ctx, &e) || h->hold(h->ctx, true, &e)) {
		not_in_api(h, req, &p, &e);
		at_plan_free(&p);
		return;
	}
	if(!all_increasing(h, &ch, &p)) {
		at_plan_free(&p);
		return;
	}
	h->count(h->ctx, PR_STAT_SCALEUP_STARTED);
	call_cloud(h, req, &p);
	at_plan_free(&p);
}

/* ---- the module --------------------------------------------------------- */

/* The API still shows a plan in flight that this store has closed: the
 * status write that ended it was lost (a crash right after closing it, an
 * apiserver error). Say now how it ended, instead of deciding the request
 * afresh and scaling up a second time. true when handled. (Safe on a
 * forged status: what is written comes from this store's rows; the
 * status only names the plan id, and nothing is asked of the cloud.) */
static bool finish_recorded(const pr_class_host *h, const pr_class_req *req)
{
	char *plan = pr_details_get(req->pr, PR_DETAIL_PLAN), *phase = pr_details_get(req->pr, PR_DETAIL_PHASE);
	state_phase ph;
	at_plan p;
	bool handled = false, done = true, open;
	size_t i;
	if(!plan || !phase || state_phase_parse(phase, &ph) || state_phase_is_terminal(ph) || !h->db)
		goto out;
	/* The common case, a plan in flight, without reading its rows. */
	if(at_plan_id_open(h, plan, &open) && open)
		goto out;
	if(!at_plan_all(h, plan, &p))
		goto free_plan; /* (at_plan_all may have allocated) */
	for(i = 0; i < p.n; i++) {
		if(!state_phase_is_terminal(p.v[i].phase))
			goto free_plan; /* open: progress() has it */
		done = done && p.v[i].phase == STATE_PHASE_DONE;
	}
	handled = true;
	log_info("the end of a scale-up plan was not in the API yet; writing it", "request", req->pr->meta.name,
		 "plan", plan, "outcome", done ? "done" : "rolled back");
	if(done) {
		at__succeed(h, req, &p);
	} else {
		char msg[900];
		const char *why = "";
		for(i = 0; i < p.n && !why[0]; i++)
			if(p.v[i].last_error && p.v[i].last_error[0])
				why = p.v[i].last_error;
		snprintf(msg, sizeof(msg), "the scale-up was rolled back%s%s", why[0] ? ": " : "", why);
		at_clear_details(h, state_phase_name(STATE_PHASE_ROLLED_BACK));
		h->not_provisioned(h->ctx, PR_R_SCALE_UP_FAILED, msg);
		h->hold(h->ctx, false, NULL);
	}
free_plan:
	at_plan_free(&p);
out:
	free(plan);
	free(phase);
	return handled;
}

/* The status shows a plan in flight that this store neither has nor could
 * adopt yet (a node group it names is not listed this pass: plan_plausible
 * cannot tell): deciding the request afresh now would scale up (or book)
 * a second time beside that plan. Wait for a pass that lists the groups.
 * (A forged record can only delay the request here, never have anything
 * deleted: adopting it is at_adopt's, which checks its seal.) */
static bool unadopted_plan(const pr_class_host *h, const pr_class_req *req)
{
	char *plan, *phase;
	state_phase ph;
	bool wait;
	/* (A plan this store has closed was written by finish_recorded.) */
	if(h->groups_complete || !(plan = pr_details_get(req->pr, PR_DETAIL_PLAN)))
		return false;
	phase = pr_details_get(req->pr, PR_DETAIL_PHASE);
	wait = phase && state_phase_parse(phase, &ph) == 0 && !state_phase_is_terminal(ph);
	if(wait) {
		log_info("the request's status shows a scale-up plan that cannot be adopted until its node groups are "
			 "listed; waiting",
			 "request", req->pr->meta.name, "plan", plan);
		h->wake_at(h->ctx, h->now + AT_RETRY_NS);
	}
	free(plan);
	free(phase);
	return wait;
}

/* The status of an open plan says which term carries it now: the term
 * that made it, or the one that took it over since (so a replica that
 * ended the plan in an older term learns from the API that another leader
 * carried it on: reopen_carried_on). Written before this term acts on the
 * plan: a leader that adopted a plan, called the cloud for it and died
 * before its deferred write left the API naming the old term, and the old
 * leader, back in a newer term with the plan closed in its store ("the
 * target moved"), wrote it rolled back over the instances the other had
 * made (DST mixed seed 23624, (ii)). False: not written; act on the plan
 * no further this pass. */
static bool claim_term(const pr_class_host *h, const pr_class_req *req)
{
	char *was;
	bool ok = true;
	if(req->terminal || !h->term || !h->term[0])
		return true;
	was = pr_details_get(req->pr, PR_DETAIL_TERM);
	if(!was || strcmp(was, h->term)) {
		prd_err e;
		h->set_detail(h->ctx, PR_DETAIL_TERM, h->term);
		if(!h->may_act(h->ctx) || h->write_now(h->ctx, &e)) {
			log_warn("a scale-up plan waits: the request's status could not name this leader's term",
				 "request", req->pr->meta.name, "error", h->may_act(h->ctx) ? e.msg : "fenced");
			h->wake_at(h->ctx, h->now + AT_RETRY_NS);
			ok = false;
		}
	}
	free(was);
	return ok;
}

static void atomic_decide(const pr_class_module *m, const pr_class_host *h, const pr_class_req *req)
{
	at_plan p;
	(void)m;
	if(!req->terminal && req->sets && finish_recorded(h, req))
		return;
	if(at_plan_open(h, req->pr->meta.uid, &p)) {
		bool again;
		if(at_ended_in_api(h, req->pr, &p)) {
			at_plan_free(&p);
			h->wake_at(h->ctx, h->now);
			return;
		}
		if(!claim_term(h, req)) {
			at_plan_free(&p);
			return;
		}
		/* A plan in flight keeps its request until it ends: the
		 * finalizer start() adds after recording the plan may be
		 * missing (a crash between the two, a refused write), and a
		 * request deleted without it vanishes with the plan's instances
		 * in the cloud. (No finalizer can be added once deletion has
		 * begun.) */
		if(!req->deleting && !req->pr->held && h->may_act(h->ctx)) {
			prd_err e;
			if(h->hold(h->ctx, true, &e))
				log_warn("cannot add provreqd's finalizer to a request whose scale-up is in flight; retrying",
					 "request", req->pr->meta.name, "error", e.msg);
		}
		again = at__progress(h, req, &p);
		at_plan_free(&p);
		if(again)
			h->hold(h->ctx, false, NULL);
		if(!again || req->terminal || !req->sets)
			return;
	} else if(req->terminal || !req->sets) {
		return;
	} else if(unadopted_plan(h, req)) {
		return;
	}
	start(h, req);
}

/* Plans whose request is gone (deleted) still finish: they roll back. */
static void atomic_pass_end(const pr_class_module *m, const pr_class_host *h, const pr_class_pass *p)
{
	const state_intent *open = NULL;
	size_t n = 0, i, j;
	hmap done;
	(void)m;
	if(!h->db || at_open_intents(h, &open, &n))
		return;
	at_kept_forget(h, open, n);
	hmap_init(&done, NULL);
	for(i = 0; i < n; i++) {
		bool present = false;
		at_plan plan;
		for(j = 0; j < p->nprs && !present; j++)
			present = !strcmp(p->prs[j]->meta.uid, open[i].request_uid);
		if(present || hmap_has(&done, open[i].request_uid) || !h->may_act(h->ctx))
			continue;
		hmap_put(&done, open[i].request_uid, NULL);
		if(at_plan_open(h, open[i].request_uid, &plan)) {
			at__progress(h, NULL, &plan);
			at_plan_free(&plan);
		}
	}
	hmap_free(&done);
	/* A late call lands at most a driver call's timeout after its plan
	 * ended; a minute is plenty, and an instance being made by a
	 * rollback's own deletes is never looked at. */
	at_sweep_late(h, AT_SWEEP_EVERY_NS, AT_SWEEP_GRACE_NS);
	/* Empty auto-provisioned groups go. */
	nap_sweep(h, (const kube_provreq *const *)p->prs, p->nprs);
}

static const char *const atomic_aliases[] = { "atomic-scale-up.kubernetes.io", NULL };

const pr_class_module pr_class_atomic = {
	.name = PR_CLASS_ATOMIC,
	.aliases = atomic_aliases,
	.short_name = "atomic-scale-up",
	.records_plans = true,
	.placed_for_others = true,
	.pass_begin = atomic_pass_begin,
	.reserve = atomic_reserve,
	.in_flight = atomic_in_flight,
	.decide = atomic_decide,
	.pass_end = atomic_pass_end,
	.kept_free = at_kept_free,
};

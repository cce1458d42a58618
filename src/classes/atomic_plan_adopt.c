/* The atomic class's plan in the request's status: writing it, adopting it, and the store catching up. */
#include "classes/atomic_plan_int.h"
#include "classes/nap.h"
#include "classes/details.h"
#include "classes/plan_seal.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the plan in the API ----------------------------------------------- */

void at_put_details(const pr_class_host *h, const at_plan *p, state_phase phase)
{
	char base[200], ts[RFC3339_MAX];
	buf groups, deltas, before, known;
	size_t i;
	if(!p->n)
		return;
	buf_init(&groups);
	buf_init(&deltas);
	buf_init(&before);
	buf_init(&known);
	for(i = 0; i < p->n; i++) {
		const char *sep = i ? "," : "";
		buf_printf(&groups, "%s%s", sep, p->v[i].node_group);
		buf_printf(&deltas, "%s%lld", sep, (long long)p->v[i].delta);
		buf_printf(&before, "%s%lld", sep, (long long)p->v[i].target_before);
		buf_printf(&known, "%s%s", i ? "|" : "", p->v[i].known_before ? p->v[i].known_before : "");
	}
	at_plan_base(p->v[0].plan_id, base, sizeof(base));
	h->set_detail(h->ctx, PR_DETAIL_PLAN, base);
	h->set_detail(h->ctx, PR_DETAIL_GROUP, buf_str(&groups));
	h->set_detail(h->ctx, PR_DETAIL_DELTA, buf_str(&deltas));
	h->set_detail(h->ctx, PR_DETAIL_TARGET_BEFORE, buf_str(&before));
	rfc3339_format(p->v[0].deadline_ns, ts, sizeof(ts));
	h->set_detail(h->ctx, PR_DETAIL_DEADLINE, ts);
	h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(phase));
	h->set_detail(h->ctx, PR_DETAIL_KNOWN, buf_str(&known));
	h->set_detail(h->ctx, PR_DETAIL_TERM, p->v[0].term && p->v[0].term[0] ? p->v[0].term : NULL);
	buf_free(&groups);
	buf_free(&deltas);
	buf_free(&before);
	buf_free(&known);
}

void at_clear_details(const pr_class_host *h, const char *phase)
{
	h->set_detail(h->ctx, PR_DETAIL_PHASE, phase);
	h->set_detail(h->ctx, PR_DETAIL_KNOWN, NULL);
	h->set_detail(h->ctx, PR_DETAIL_TARGET_BEFORE, NULL);
	h->set_detail(h->ctx, PR_DETAIL_PROGRESS, NULL);
}

/* The i-th item of a `sep`-separated list (copied into `out`). */
static bool nth(const char *list, char sep, size_t i, char *out, size_t len)
{
	const char *p = list, *end;
	for(; i > 0 && p; i--) {
		p = strchr(p, sep);
		if(p)
			p++;
	}
	if(!p)
		return false;
	end = strchr(p, sep);
	snprintf(out, len, "%.*s", (int)(end ? (size_t)(end - p) : strlen(p)), p);
	return true;
}

/* Write one adopted intent to the store. */
static int adopt_one(const pr_class_host *h, const kube_provreq *pr, const char *id, const char *group, int64_t delta,
		     int64_t before, int64_t deadline, const char *known, state_phase ph, prd_err *e)
{
	state_intent in;
	int rc;
	memset(&in, 0, sizeof(in));
	in.plan_id = (char *)id;
	in.request_uid = (char *)pr->meta.uid;
	in.node_group = (char *)group;
	in.delta = delta;
	in.target_before = before;
	in.deadline_ns = deadline;
	/* The term that carries the plan on from now: the status this term
	 * writes says who last took the plan over (at_reopen_carried_on). */
	in.term = (char *)(h->term ? h->term : "");
	rc = at_intent_begin(h, &in, e);
	if(!rc)
		rc = at_intent_set_known(h, id, known, e);
	/* planned and increasing both mean "the call may have happened":
	 * the progress step asks the cloud which. */
	if(!rc)
		rc = at_intent_advance(h, id, STATE_PHASE_INCREASING, NULL, e);
	if(!rc && ph != STATE_PHASE_INCREASING && ph != STATE_PHASE_PLANNED)
		rc = at_intent_advance(h, id, ph, NULL, e);
	return rc;
}

/* How much an ownership rule proves (a larger rank proves more). */
static int own_rank(at_own o)
{
	return o == AT_OWN_MARK ? 2 : o == AT_OWN_TIME ? 1 : 0;
}

static const char *own_words(at_own o)
{
	return o == AT_OWN_MARK ? "owner marks" : o == AT_OWN_TIME ? "creation times" : "instances new since the plan";
}

/* The ownership rule a plan's "known before" text names. */
static at_own own_of_text(const char *k)
{
	state_intent in;
	memset(&in, 0, sizeof(in));
	in.known_before = (char *)k;
	return at_own_of(&in);
}

/* The ownership rule of each group in `known` ('|'-separated) against
 * what the group's driver offers: a record whose rule proves less than
 * the cloud can (an "h1:" text, with no known instances, on a group
 * whose driver marks its instances) would let a rollback take instances
 * by "not known before" that the cloud would show are not the plan's.
 * 0, or -1 with the reason. */
static int own_matches(const pr_class_group *g, const char *known, size_t i, char *why, size_t len)
{
	size_t klen = strlen(known) + 1;
	char *kn = malloc(klen);
	at_own want = at_own_of_group(g), have;
	if(!kn)
		return snprintf(why, len, "out of memory"), -1;
	if(!nth(known, '|', i, kn, klen)) {
		free(kn);
		return snprintf(why, len, "it records no instances-before for %.200s", g->id), -1;
	}
	have = own_of_text(kn);
	free(kn);
	if(own_rank(have) < own_rank(want))
		return snprintf(why, len,
				"its ownership rule for %.200s (%s) proves less than the group's driver offers (%s)", g->id,
				own_words(have), own_words(want)),
		       -1;
	return 0;
}

/* Is the plan in the request's status one provreqd could have written?
 * Anyone allowed to write provisioningrequests/status can write these
 * fields: at_adopt checks the record's seal first, and every field is
 * checked here too (against the groups the drivers list, their sizes, and
 * the ownership rule their drivers offer) before the cloud is asked
 * anything on their strength (the records of the groups it creates are
 * taken into the store on the way: nap_adopt_specs checks them). 0, 1
 * when it cannot be told yet (the groups are not all listed), or -1 with
 * the reason in `why` and its metric label in *reason. */
static int plan_plausible(const pr_class_host *h, const kube_provreq *pr, const char *plan, const char *groups,
			  const char *deltas, const char *before, const char *known, int64_t dl, char *why, size_t len,
			  const char **reason)
{
	char group[300], num[40];
	size_t i, uidlen = strlen(pr->meta.uid);
	int64_t d, tb;
	*reason = "implausible";
	if(strncmp(plan, pr->meta.uid, uidlen) || plan[uidlen] != '/')
		return snprintf(why, len, "the plan id %.200s is not this request's", plan), -1;
	/* The groups it creates, as its status records them, into the store
	 * first: a group not created yet is then known (nap_pending_group). */
	if(!nap_adopt_specs(h, pr, plan, why, len))
		return -1;
	if(dl > h->now + h->limits->provision_timeout_ns + AT_CLOCK_SKEW_NS)
		return snprintf(why, len, "its deadline is further away than --provision-timeout allows"), -1;
	for(i = 0; nth(groups, ',', i, group, sizeof(group)); i++) {
		pr_class_group *g = at_find_group(h, group);
		if(i >= AT_MAX_GROUPS)
			return snprintf(why, len, "it names more than %d node groups", AT_MAX_GROUPS), -1;
		if(!g)
			return h->groups_complete ? (snprintf(why, len, "no driver serves its node group %.200s", group), -1)
						  : 1;
		if(!nth(deltas, ',', i, num, sizeof(num)) || str_to_int64(num, &d) || d <= 0 || d > g->max)
			return snprintf(why, len, "its size for %.200s is not within 1..%d (the group's maximum)", group,
					g->max), -1;
		if(before && nth(before, ',', i, num, sizeof(num)) && (str_to_int64(num, &tb) || tb < 0 || tb > g->max))
			return snprintf(why, len, "its starting size for %.200s is not within 0..%d", group, g->max), -1;
		if(own_matches(g, known, i, why, len)) {
			*reason = "ownership";
			return -1;
		}
	}
	if(!groups[0])
		return snprintf(why, len, "it names no node group"), -1;
	return 0;
}

/* Say that a plan record in pr's status is not believed: a Warning Event
 * on the request, a log line and provreqd_plan_records_refused_total
 * {reason}, at most once a minute per request (kept per controller; a
 * record that stays is refused every pass). */
static bool refuse_due(const pr_class_host *h, const kube_provreq *pr)
{
	at_memo *m = at__memo_of(h);
	int64_t *at;
	if(!m)
		return true;
	if(hmap_len(&m->refused_at) > 4096) {
		hmap_free(&m->refused_at);
		hmap_init(&m->refused_at, free);
	}
	at = hmap_get(&m->refused_at, pr->meta.uid);
	if(at && h->now >= *at && h->now < *at + 60 * AT_NS_PER_S)
		return false;
	if(!at && (!(at = malloc(sizeof(*at))) || hmap_put(&m->refused_at, pr->meta.uid, at))) {
		free(at);
		return true;
	}
	*at = h->now;
	return true;
}

static void refuse(const pr_class_host *h, const kube_provreq *pr, const char *plan, const char *reason,
		   const char *why, const char *what)
{
	char msg[700];
	if(!refuse_due(h, pr))
		return;
	snprintf(msg, sizeof(msg), "the scale-up plan in this request's status was not %s: %s", what, why);
	metrics_counter_add(M_PLAN_REFUSED, METRICS_L(reason), 1);
	log_warn("refused a scale-up plan record in a request's status", "request", pr->meta.name, "namespace",
		 pr->meta.ns, "plan", plan ? plan : "", "reason", reason, "cause", why);
	h->event_on(h->ctx, pr, "Warning", PR_R_PLAN_REFUSED, msg);
}

/* Was the plan record in pr's status written by provreqd, as it stands
 * (classes/plan_seal.h)? Anyone allowed to patch
 * provisioningrequests/status can write it, so nothing in it is acted on
 * (adopted, or allowed to move or close a local plan) unless its seal
 * verifies under the plan key. When not, and `what` is given, says so
 * (refuse). */
static bool sealed(const pr_class_host *h, const kube_provreq *pr, const char *plan, const char *what)
{
	char why[400];
	pr_seal_check c = pr_plan_seal_verify(h->plan_key, pr, why, sizeof(why));
	if(c != PR_SEAL_OK && what)
		refuse(h, pr, plan, pr_seal_check_name(c), why, what);
	return c == PR_SEAL_OK;
}

/* A request whose status names an open plan that this replica's store does
 * not know (written by the previous leader, or before a lost database):
 * adopt it, so it is finished or rolled back here, never started again.
 * Only a record provreqd sealed is adopted, and only when plan_plausible
 * finds it consistent with the cloud (its groups, sizes, deadline, and an
 * ownership rule as strong as the group's driver offers); anything else is
 * refused with a Warning Event and left alone: nothing is deleted on its
 * word. */
void at_adopt(const pr_class_host *h, const kube_provreq *pr)
{
	char *plan = pr_details_get(pr, PR_DETAIL_PLAN), *groups = pr_details_get(pr, PR_DETAIL_GROUP);
	char *deltas = pr_details_get(pr, PR_DETAIL_DELTA), *before = pr_details_get(pr, PR_DETAIL_TARGET_BEFORE);
	char *deadline = pr_details_get(pr, PR_DETAIL_DEADLINE), *phase = pr_details_get(pr, PR_DETAIL_PHASE);
	char *known = pr_details_get(pr, PR_DETAIL_KNOWN), group[300], num[40], id[400], *kn = NULL, why[400];
	const char *reason = NULL;
	state_phase ph = STATE_PHASE_INCREASING;
	int64_t dl = 0, d = 0, tb = 0;
	size_t i;
	prd_err e;
	int ok;
	if(!plan || !groups || !deltas || !deadline || !known || rfc3339_parse(deadline, &dl, NULL))
		goto out;
	if(phase && (state_phase_parse(phase, &ph) || state_phase_is_terminal(ph)))
		goto out;
	if(at_plan_exists(h, pr->meta.uid))
		goto out; /* known here already */
	if(!sealed(h, pr, plan, "adopted"))
		goto out;
	if((ok = plan_plausible(h, pr, plan, groups, deltas, before, known, dl, why, sizeof(why), &reason))) {
		if(ok < 0)
			refuse(h, pr, plan, reason, why, "adopted");
		goto out;
	}
	for(i = 0; nth(groups, ',', i, group, sizeof(group)); i++) {
		state_intent old;
		size_t klen = strlen(known) + 1;
		snprintf(id, sizeof(id), "%s#%zu", plan, i);
		if(state_intent_get(h->db, id, &old, NULL) == 0) {
			state_intent_clear(&old);
			continue; /* closed here already */
		}
		free(kn);
		kn = malloc(klen);
		if(!kn || !nth(deltas, ',', i, num, sizeof(num)) || str_to_int64(num, &d) || d <= 0 || d > INT32_MAX ||
		   !nth(known, '|', i, kn, klen))
			break;
		tb = 0;
		if(before && nth(before, ',', i, num, sizeof(num)) && (str_to_int64(num, &tb) || tb < 0))
			break;
		if(adopt_one(h, pr, id, group, d, tb, dl, kn, ph, &e)) {
			log_error("cannot adopt the scale-up plan of the previous leader", "request", pr->meta.name,
				  "plan", id, "error", e.msg);
			break;
		}
		log_info("adopted a scale-up plan recorded in the request's status", "request", pr->meta.name,
			 "namespace", pr->meta.ns, "plan", id, "group", group, "phase", state_phase_name(ph));
	}
out:
	free(kn);
	free(plan);
	free(groups);
	free(deltas);
	free(before);
	free(deadline);
	free(phase);
	free(known);
}

/* Close an open intent the API shows ended as `api_phase` (done or
 * rolled-back) by another replica: recorded locally, nothing asked of the
 * cloud. */
static void close_as_api_says(const pr_class_host *h, const state_intent *in, state_phase api_phase)
{
	prd_err e;
	if(state_intent_settle(h->db, in->plan_id, api_phase,
			       "ended by another replica (the request's status says so)", &e))
		log_warn("cannot close a local scale-up plan another replica ended", "plan", in->plan_id, "error", e.msg);
	at__written(h);
}

/* The request's status shows this open plan ended (done or rolled back)
 * by another writer since this term began: a former leader's status write
 * that was on its way when it stalled, landing after this replica took the
 * plan up. The API wins here too, as when a term begins
 * (at_drop_contradicted): the local rows close as it says, and nothing is
 * asked of the cloud. Else a request deleted after such an end had this
 * replica roll back the instances of a plan that had succeeded (DST mixed
 * seed 78401, (vii)). True when closed. */
bool at_ended_in_api(const pr_class_host *h, const kube_provreq *pr, const at_plan *p)
{
	char *plan, *phase, base[200];
	state_phase ph;
	bool ended = false;
	size_t i;
	if(!p->n || !h->db || !(plan = pr_details_get(pr, PR_DETAIL_PLAN)))
		return false;
	phase = pr_details_get(pr, PR_DETAIL_PHASE);
	at_plan_base(p->v[0].plan_id, base, sizeof(base));
	/* (A record provreqd did not seal says nothing: closing the rows as
	 * rolled back would have the late-call sweep delete the plan's
	 * instances.) */
	if(!strcmp(plan, base) && phase && state_phase_parse(phase, &ph) == 0 && state_phase_is_terminal(ph) &&
	   sealed(h, pr, plan, "believed")) {
		for(i = 0; i < p->n; i++)
			if(!state_phase_is_terminal(p->v[i].phase))
				close_as_api_says(h, &p->v[i], ph);
		log_warn("closing a local scale-up plan another writer ended since this term began", "plan", base,
			 "phase", phase, "request", pr->meta.name);
		ended = true;
	}
	free(plan);
	free(phase);
	return ended;
}

/* How far a plan's phase has come (open phases). */
static int phase_rank(state_phase ph)
{
	switch(ph) {
	case STATE_PHASE_PLANNED: return 0;
	case STATE_PHASE_INCREASING: return 1;
	case STATE_PHASE_WAITING_FOR_NODES: return 2;
	case STATE_PHASE_ROLLING_BACK: return 3;
	default: return 4;
	}
}

/* The status shows the plan further along than this store does (another
 * leader adopted it and went on: called the cloud, or began to roll it
 * back): the local rows follow, so this replica neither closes a plan the
 * cloud did act on as "interrupted before the call" nor takes up a plan
 * another leader had begun to undo. Planned becomes increasing (the call
 * may have happened: the progress step asks the cloud which); a plan the
 * status shows rolling back rolls back here too. (Reached only for a
 * record whose seal verified: at_drop_contradicted.) */
static void catch_up(const pr_class_host *h, const state_intent *in, state_phase api, const kube_provreq *pr)
{
	const char *why = "rolled back by another replica (the request's status says so)";
	if(phase_rank(api) <= phase_rank(in->phase) || phase_rank(api) > 3)
		return;
	if(in->phase == STATE_PHASE_PLANNED)
		at_intent_advance(h, in->plan_id, STATE_PHASE_INCREASING, NULL, NULL);
	/* (Increasing is not moved on to waiting: from increasing, the
	 * progress step asks the cloud what the calls made.) */
	if(api == STATE_PHASE_ROLLING_BACK)
		at_intent_advance(h, in->plan_id, STATE_PHASE_ROLLING_BACK, why, NULL);
	else if(in->phase != STATE_PHASE_PLANNED)
		return;
	log_warn("a local scale-up plan is behind the request's status (another leader carried it on); following it",
		 "plan", in->plan_id, "local_phase", state_phase_name(in->phase), "api_phase", state_phase_name(api),
		 "request", pr->meta.name);
}

/* The status says another leader carried a plan to success that this
 * store rolled back (its own rollback ended, its status write was lost):
 * the plan's instances are in use, and the late-call sweep, which deletes
 * instances carrying the token of a plan this store rolled back, must not
 * take them. The local rows say done, as the API does. */
static void settle_done_here(const pr_class_host *h, const kube_provreq *pr, const char *plan)
{
	char id[400];
	size_t i;
	for(i = 0; i < AT_MAX_GROUPS; i++) {
		state_intent in;
		bool rolled_back;
		snprintf(id, sizeof(id), "%s#%zu", plan, i);
		if(state_intent_get(h->db, id, &in, NULL))
			break;
		rolled_back = in.phase == STATE_PHASE_ROLLED_BACK;
		state_intent_clear(&in);
		if(rolled_back && state_intent_settle(h->db, id, STATE_PHASE_DONE, "another replica carried it to success",
						      NULL) == 0) {
			at__written(h);
			log_warn("another leader carried to success a scale-up plan this store had rolled back; its "
				 "instances are the plan's",
				 "plan", id, "request", pr->meta.name);
		}
	}
}

/* This store began to roll a plan back, but the status shows the plan
 * short of rolling back under another term's hand: the decision was never
 * written (a rollback deletes nothing before the status says rolling-back:
 * roll_back_all), and another leader adopted the plan from the status
 * since and carried it on - it may have asked the cloud again and made
 * the plan's instances, and another request may have booked room on
 * them. Rolling back on the old decision would delete them (DST mixed seed
 * 16491: a replica stalled inside a refused increase decided to roll back,
 * the next leader made the nodes, the first led again and deleted them
 * under a request that had booked them). The API wins: the local rows are
 * forgotten and the plan is adopted again from the status (which
 * at_adopt checks as any other). True when forgotten. (Reached only for a
 * record whose seal verified: at_drop_contradicted.) */
static bool rollback_overtaken(const pr_class_host *h, const state_intent *in, state_phase api,
			       const kube_provreq *pr)
{
	char *term, base[200], id[400];
	size_t gone = 0, i;
	bool other;
	if(in->phase != STATE_PHASE_ROLLING_BACK || phase_rank(api) >= phase_rank(STATE_PHASE_ROLLING_BACK))
		return false;
	term = pr_details_get(pr, PR_DETAIL_TERM);
	other = term && term[0] && strcmp(term, in->term ? in->term : "");
	at_plan_base(in->plan_id, base, sizeof(base));
	/* (Forgetting takes closed rows only: closed first, as the API's
	 * record proves this store's rows wrong.) */
	for(i = 0; other && i < AT_MAX_GROUPS; i++) {
		snprintf(id, sizeof(id), "%s#%zu", base, i);
		if(state_intent_settle(h->db, id, STATE_PHASE_ROLLED_BACK, "another leader carried the plan on", NULL))
			break;
	}
	if(other && state_intent_forget(h->db, base, &gone, NULL) == 0 && gone) {
		at__written(h);
		log_warn("another leader carried on a scale-up plan this store had begun to roll back without saying "
			 "so; adopting it again from the request's status",
			 "plan", in->plan_id, "request", pr->meta.name, "local_term", in->term ? in->term : "",
			 "api_term", term, "api_phase", state_phase_name(api));
	} else {
		other = false;
	}
	free(term);
	return other;
}

/* The reverse of at_drop_contradicted: a plan this store closed (its last
 * call refused, its rows ended while this replica was stalled or deposed)
 * that the API shows open under another term's hand: another leader
 * adopted it and carried it on (it may have made the plan's instances).
 * The API wins: the local end is forgotten and the plan adopted again,
 * never written over the other leader's record as this store's end. The
 * same term's record (this replica closed it and died before the status
 * write) is left to finish_recorded. */
static void reopen_carried_on(const pr_class_host *h, const pr_class_pass *p)
{
	size_t i;
	for(i = 0; i < p->nprs; i++) {
		const kube_provreq *pr = p->prs[i];
		char *plan = NULL, *phase = NULL, *term = NULL, id[400];
		state_intent old;
		state_phase ph;
		bool open = false;
		size_t gone = 0;
		if(!p->ours(h->ctx, pr) || !(plan = pr_details_get(pr, PR_DETAIL_PLAN)))
			continue;
		if(!sealed(h, pr, plan, NULL)) {
			free(plan);
			continue; /* (at_drop_contradicted or at_adopt says so) */
		}
		phase = pr_details_get(pr, PR_DETAIL_PHASE);
		term = pr_details_get(pr, PR_DETAIL_TERM);
		snprintf(id, sizeof(id), "%s#0", plan);
		if(phase && state_phase_parse(phase, &ph) == 0 && ph == STATE_PHASE_DONE)
			settle_done_here(h, pr, plan);
		else if(phase && state_phase_parse(phase, &ph) == 0 && !state_phase_is_terminal(ph) &&
		   at_plan_id_open(h, plan, &open) && !open && state_intent_get(h->db, id, &old, NULL) == 0) {
			if(strcmp(old.term ? old.term : "", term ? term : "") &&
			   state_intent_forget(h->db, plan, &gone, NULL) == 0 && gone) {
				at__written(h);
				log_warn("another leader carried on a scale-up plan this store had ended; adopting it again "
					 "from the request's status",
					 "plan", plan, "request", pr->meta.name, "local_term", old.term ? old.term : "",
					 "api_term", term ? term : "");
			}
			state_intent_clear(&old);
		}
		free(plan);
		free(phase);
		free(term);
	}
}

/* Where the API contradicts this store as a term begins, the API wins -
 * but only a plan record provreqd sealed speaks for the API: an unsealed
 * or changed record leaves the local plan to its own steps. (A request
 * gone from the API is the apiserver's word, not a status's: provreqd's
 * finalizer holds a request while its plan is open.) */
void at_drop_contradicted(const pr_class_host *h, const pr_class_pass *p)
{
	const state_intent *open = NULL;
	size_t n = 0, i, j;
	/* (Closing writes the store, which retires the list being walked;
	 * a retired list stays valid until the next pass.) */
	if(!h->db)
		return;
	reopen_carried_on(h, p);
	if(at_open_intents(h, &open, &n))
		return;
	for(i = 0; i < n; i++) {
		const state_intent *in = &open[i];
		char base[200], *plan = NULL, *phase = NULL;
		state_phase ph;
		for(j = 0; j < p->nprs && strcmp(p->prs[j]->meta.uid, in->request_uid); j++)
			;
		if(j == p->nprs) {
			/* provreqd's finalizer holds a request while its plan is
			 * open in the API: gone means whoever led meanwhile ended
			 * the plan (done or rolled back) and let it go. */
			log_warn("closing a local scale-up plan whose request is gone (another replica ended it)", "plan",
				 in->plan_id);
			close_as_api_says(h, in, STATE_PHASE_ROLLED_BACK);
			continue;
		}
		if(!(plan = pr_details_get(p->prs[j], PR_DETAIL_PLAN)))
			continue; /* no plan in the API: the plan's own steps decide */
		if(!sealed(h, p->prs[j], plan, "believed")) {
			/* A record provreqd did not seal moves no local plan:
			 * closing it (the sweep then deletes its instances) or
			 * rolling it back on a forged word would delete what
			 * the plan made. The plan's own steps decide. */
			free(plan);
			continue;
		}
		phase = pr_details_get(p->prs[j], PR_DETAIL_PHASE);
		at_plan_base(in->plan_id, base, sizeof(base));
		if(strcmp(plan, base)) {
			log_warn("dropping a local scale-up plan: the request's status names another plan", "plan",
				 in->plan_id, "api_plan", plan, "request", p->prs[j]->meta.name);
			close_as_api_says(h, in, STATE_PHASE_ROLLED_BACK);
		} else if(phase && state_phase_parse(phase, &ph) == 0 && state_phase_is_terminal(ph)) {
			log_warn("closing a local scale-up plan another replica ended", "plan", in->plan_id, "phase",
				 phase, "request", p->prs[j]->meta.name);
			close_as_api_says(h, in, ph);
		} else if(phase && state_phase_parse(phase, &ph) == 0 && !rollback_overtaken(h, in, ph, p->prs[j])) {
			catch_up(h, in, ph, p->prs[j]);
		}
		free(plan);
		free(phase);
	}
}

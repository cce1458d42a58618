/* The DST's oracle: invariants judged from the cloud's own record of every
 * instance (cloud.c) and from the in-memory API, never from a controller's
 * state store, which a stale or lost file can make say anything, and which
 * is the controller's own word.
 *
 * The ledger holds every plan the API has shown: a request's
 * provisioningClassDetails name its plan (scaleUpPlan), the groups and
 * deltas (nodeGroup, nodesRequested) and its phase (scaleUpPhase); a plan is
 * written there before the cloud is called. The ledger remembers what the
 * API showed after the request moved on to a later plan or vanished.
 *
 * A call without an owner token (increase_size) is attributed to the plan
 * the API shows open on that group for the caller's shard (api_increasing);
 * a delete is allowed by what the API shows of the instance's plan when it
 * takes effect (judge_delete). No replica's store is opened here. */
#include "config.h"
#include "dst.h"
#include "util/rfc3339.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The API's requests and nodes as of the last scan (ledger_scan), and the
 * count of API writes then: nothing in the API moves between writes. */
static json_object *reqs, *nodes;
static uint64_t reqs_at, nodes_at;

static const char *str_at(json_object *o, const char *a, const char *b)
{
	json_object *x = NULL;
	if(!json_object_object_get_ex(o, a, &x))
		return NULL;
	if(b && !json_object_object_get_ex(x, b, &x))
		return NULL;
	return json_object_is_type(x, json_type_string) ? json_object_get_string(x) : NULL;
}

static const char *detail(json_object *pr, const char *key)
{
	json_object *st = NULL, *d = NULL, *v = NULL;
	if(!json_object_object_get_ex(pr, "status", &st) ||
	   !json_object_object_get_ex(st, "provisioningClassDetails", &d) || !json_object_object_get_ex(d, key, &v))
		return NULL;
	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The i-th item of a comma-separated list. */
static bool nth(const char *list, size_t i, char *out, size_t len)
{
	const char *p = list, *end;
	for(; i > 0 && p; i--)
		if((p = strchr(p, ',')))
			p++;
	if(!p || !*p)
		return false;
	end = strchr(p, ',');
	snprintf(out, len, "%.*s", (int)(end ? (size_t)(end - p) : strlen(p)), p);
	return true;
}

static plan_rec *find(const char *token)
{
	int i;
	for(i = 0; i < dst.nplans; i++)
		if(!strcmp(dst.plans[i].token, token))
			return &dst.plans[i];
	return NULL;
}

/* The ledger as of the last check (every step, every turn of a stall,
 * so a plan's end is there before a late call lands), read anew only for
 * a plan it does not hold: one written to the API in this pass. */
plan_rec *ledger_find(const char *token)
{
	plan_rec *p = find(token);
	if(!p) {
		ledger_scan();
		p = find(token);
	}
	return p;
}

/* One request's plan into the ledger; earlier plans of it are superseded. */
static void ledger_take(json_object *pr)
{
	const char *uid = str_at(pr, "metadata", "uid"), *name = str_at(pr, "metadata", "name");
	const char *plan = detail(pr, "scaleUpPlan"), *groups = detail(pr, "nodeGroup");
	const char *deltas = detail(pr, "nodesRequested"), *phase = detail(pr, "scaleUpPhase");
	char base[128], id[200], tok[128], grp_[32], dl[32];
	size_t i;
	int k;
	if(!uid || !plan || !groups || !deltas)
		return;
	plan_token(plan, base, sizeof(base));
	for(i = 0; nth(groups, i, grp_, sizeof(grp_)); i++) {
		plan_rec *p;
		snprintf(id, sizeof(id), "%s#%zu", plan, i);
		plan_token(id, tok, sizeof(tok));
		if(!(p = find(tok))) {
			if(dst.nplans == MAXPLANS)
				return;
			p = &dst.plans[dst.nplans++];
			memset(p, 0, sizeof(*p));
			snprintf(p->token, sizeof(p->token), "%s", tok);
			snprintf(p->base, sizeof(p->base), "%s", base);
			snprintf(p->uid, sizeof(p->uid), "%s", uid);
			snprintf(p->req, sizeof(p->req), "%s", name ? name : "?");
			snprintf(p->group, sizeof(p->group), "%s", grp_);
			p->delta = nth(deltas, i, dl, sizeof(dl)) ? strtoll(dl, NULL, 10) : 0;
		}
		snprintf(p->phase, sizeof(p->phase), "%s", phase ? phase : "");
		p->seen_done |= phase && !strcmp(phase, "done");
	}
	for(k = 0; k < dst.nplans; k++)
		if(!strcmp(dst.plans[k].uid, uid) && strcmp(dst.plans[k].base, base))
			dst.plans[k].superseded = true;
}

static json_object *api_list(const char *path)
{
	json_object *o = NULL, *items = NULL;
	prd_err e;
	if(kube_api_call(&dst.raw_api, "GET", path, NULL, NULL, &o, NULL, &e) || !o)
		return NULL;
	if(json_object_object_get_ex(o, "items", &items))
		json_object_get(items);
	json_object_put(o);
	return items;
}

void ledger_scan(void)
{
	size_t i, n;
	int k;
	if(reqs && reqs_at == dst.api_writes)
		return;
	if(reqs)
		json_object_put(reqs);
	reqs_at = dst.api_writes;
	if(!(reqs = api_list(PR_PATH)))
		return;
	n = json_object_array_length(reqs);
	for(i = 0; i < n; i++)
		ledger_take(json_object_array_get_idx(reqs, i));
	for(k = 0; k < dst.nplans; k++) {
		bool there = false;
		for(i = 0; i < n && !there; i++) {
			const char *uid = str_at(json_object_array_get_idx(reqs, i), "metadata", "uid");
			there = uid && !strcmp(uid, dst.plans[k].uid);
		}
		dst.plans[k].request_gone = !there;
	}
}

/* The bookings the requests' statuses record, for the one reading a
 * violation. */
void dump_bookings(void)
{
	size_t i;
	fprintf(stderr, "bookings the API shows:\n");
	for(i = 0; reqs && i < json_object_array_length(reqs); i++) {
		json_object *pr = json_object_array_get_idx(reqs, i);
		const char *text = detail(pr, "provreqd.io/booking"), *plan = detail(pr, "scaleUpPlan");
		const char *phase = detail(pr, "scaleUpPhase");
		if(text)
			fprintf(stderr, "  %s %s\n", str_at(pr, "metadata", "name"), text);
		if(dst.trace && plan)
			fprintf(stderr, "  %s plan %s %s\n", str_at(pr, "metadata", "name"), plan, phase ? phase : "-");
	}
}

void ledger_free(void)
{
	if(reqs)
		json_object_put(reqs);
	if(nodes)
		json_object_put(nodes);
	reqs = nodes = NULL;
	reqs_at = nodes_at = 0;
}

/* Instances the cloud made for a plan: all of them, or those still there. */
static int64_t made_for(const char *token, bool live_only)
{
	int64_t k = 0;
	size_t gi, i;
	for(gi = 0; gi < NGALL; gi++)
		for(i = 0; i < dst.g[gi].n; i++) {
			const inst *x = &dst.g[gi].v[i];
			k += x->creator >= 0 && x->creator < NREP && !x->undone && !strcmp(x->plan, token) &&
			     (!live_only || !x->gone || x->reclaimed);
		}
	return k;
}

/* Live instances of a plan that a call made after its caller's lease had
 * expired. */
static int64_t late_for(const char *token)
{
	int64_t k = 0;
	size_t gi, i;
	for(gi = 0; gi < NGALL; gi++)
		for(i = 0; i < dst.g[gi].n; i++) {
			const inst *x = &dst.g[gi].v[i];
			k += !x->gone && !x->lease_ok && x->creator >= 0 && x->creator < NREP && !strcmp(x->plan, token);
		}
	return k;
}

static bool ended_unsuccessfully(const plan_rec *p)
{
	return !p->seen_done && (!strcmp(p->phase, "rolled-back") || p->superseded);
}

/* The cloud took an increase of `d` for `plan` (an owner token, "" none)
 * from replica r: (i) a plan the API records, still open, never more than
 * its delta; (vi) the same for a call that took effect after the caller's
 * lease had expired. `fenced`: the caller made it past its renew deadline
 * (only an unfenced controller does), which the message says. */
void judge_increase(const replica *r, const grp *g, const char *plan, int32_t d, bool lease_ok, bool fenced)
{
	const char *inv = lease_ok ? "(i)" : "(vi)";
	const char *late = fenced     ? " (the call was made past the caller's renew deadline: its fence should have said no)"
			   : lease_ok ? ""
				      : " (the call took effect after the caller's lease had expired)";
	const plan_rec *p;
	if(!plan[0]) {
		violation("(i) replica %s scaled %s up by %d for no plan: no owner token, no intent of its increasing", r->name,
			  g->id, d);
		return;
	}
	/* A cloud that cannot refuse a late call (no fencing) takes a request
	 * that was on its way when its caller stalled: what it makes must be
	 * gone once settled (check_plans), not refused now. */
	if(!lease_ok && !dst.fenced_cloud && (p = ledger_find(plan)) && !strcmp(p->group, g->id) &&
	   (p->seen_done || ended_unsuccessfully(p) || !strcmp(p->phase, "done") || made_for(plan, false) > p->delta)) {
		vlog("oracle: a late call of replica %s made %d for plan %s of request %s (%s): it must be gone once settled",
		     r->name, d, plan, p->req, p->phase);
		return;
	}
	if(!(p = ledger_find(plan)))
		violation("%s replica %s scaled %s up by %d for plan %s, which no request's status records%s", inv, r->name,
			  g->id, d, plan, late);
	else if(strcmp(p->group, g->id))
		violation("%s replica %s scaled %s up by %d for plan %s, which is a plan of group %s%s", inv, r->name,
			  g->id, d, plan, p->group, late);
	else if(p->seen_done || ended_unsuccessfully(p) || !strcmp(p->phase, "done"))
		violation("%s replica %s scaled %s up by %d for plan %s of request %s, which had already ended (%s%s)%s",
			  inv, r->name, g->id, d, plan, p->req, p->phase, p->superseded ? ", a later plan replaced it" : "",
			  late);
	else if(made_for(plan, false) > p->delta && !dst.fenced_cloud)
		vlog("oracle: replica %s made %lld for plan %s of request %s, which asked for %lld: the surplus must be "
		     "gone once settled (the cloud cannot refuse a late call)", r->name, (long long)made_for(plan, false),
		     plan, p->req, (long long)p->delta);
	else if(made_for(plan, false) > p->delta)
		violation("%s replica %s scaled %s up by %d for plan %s of request %s, which asked for %lld: the cloud has "
			  "now made %lld for it%s",
			  inv, r->name, g->id, d, plan, p->req, (long long)p->delta, (long long)made_for(plan, false), late);
}

/* The cloud took a create_group from replica r: (i) for a plan the API
 * records, of that group, still open. */
void judge_create(const replica *r, const grp *g)
{
	const plan_rec *p = ledger_find(g->owner);
	if(!p)
		violation("(i) replica %s created group %s for plan %s, which no request's status records", r->name, g->id,
			  g->owner);
	else if(strcmp(p->group, g->id))
		violation("(i) replica %s created group %s for plan %s, which is a plan of group %s", r->name, g->id,
			  g->owner, p->group);
	else if(p->seen_done || ended_unsuccessfully(p) || !strcmp(p->phase, "done"))
		violation("(i) replica %s created group %s for plan %s of request %s, which had already ended (%s)", r->name,
			  g->id, g->owner, p->req, p->phase);
}

/* The time in a plan token (`uid.ns-i`, plan_token of `uid/ns#i`): when
 * the plan was made. */
static long long token_ns(const char *tok)
{
	const char *dot = strrchr(tok, '.');
	return dot ? strtoll(dot + 1, NULL, 10) : 0;
}

/* The shard a request of the ledger is for, as its spec says ("" the
 * default shard); NULL when the API no longer shows the request. */
static const char *shard_of(const char *uid)
{
	size_t i;
	for(i = 0; reqs && i < json_object_array_length(reqs); i++) {
		json_object *pr = json_object_array_get_idx(reqs, i), *spec = NULL, *par = NULL;
		const char *u = str_at(pr, "metadata", "uid"), *s;
		if(!u || strcmp(u, uid))
			continue;
		if(!json_object_object_get_ex(pr, "spec", &spec) || !json_object_object_get_ex(spec, "parameters", &par))
			return "";
		return (s = str_at(par, "processorInstance", NULL)) ? s : "";
	}
	return NULL;
}

/* The plan an increase of `d` on `group` without an owner token is for,
 * as the API shows it when the call takes effect: a plan of a request of
 * the caller's shard on that group whose status says planned or
 * increasing (the controller writes it before the call), of that delta
 * for which the cloud made nothing yet, the latest first. The token to
 * out; false when the API shows none: then the call was for no plan. */
bool api_increasing(const replica *r, const char *group, int64_t d, char *out, size_t len)
{
	int k, best_rank = -1;
	long long best_ns = -1;
	ledger_scan();
	for(k = 0; k < dst.nplans; k++) {
		const plan_rec *p = &dst.plans[k];
		const char *shard = shard_of(p->uid);
		int rank;
		if(strcmp(p->group, group) || p->seen_done || p->superseded ||
		   (strcmp(p->phase, "increasing") && strcmp(p->phase, "planned")) || !shard ||
		   strcmp(shard, r->shard ? r->shard : ""))
			continue;
		rank = (p->delta == d) * 2 + (made_for(p->token, false) == 0);
		if(rank > best_rank || (rank == best_rank && token_ns(p->token) > best_ns)) {
			best_rank = rank;
			best_ns = token_ns(p->token);
			snprintf(out, len, "%s", p->token);
		}
	}
	return best_rank >= 0;
}

/* Is the request being deleted (a deletionTimestamp; provreqd's
 * finalizer keeps it listed until its plan is undone)? */
static bool request_deleting(const char *uid)
{
	size_t i;
	for(i = 0; reqs && i < json_object_array_length(reqs); i++) {
		json_object *pr = json_object_array_get_idx(reqs, i), *md = NULL, *dt = NULL;
		const char *u = str_at(pr, "metadata", "uid");
		if(u && !strcmp(u, uid))
			return json_object_object_get_ex(pr, "metadata", &md) &&
			       json_object_object_get_ex(md, "deletionTimestamp", &dt);
	}
	return false;
}

/* Is the plan being undone, as the API shows it: its request's status
 * says rolling-back or rolled-back, a later plan of the request replaced
 * it, or the request is deleted or being deleted (its plan is then rolled
 * back, and no status says so); and it was never shown done. */
static bool undoing(const plan_rec *p)
{
	return !p->seen_done && (!strcmp(p->phase, "rolling-back") || !strcmp(p->phase, "rolled-back") ||
				 p->superseded || p->request_gone || request_deleting(p->uid));
}

static bool booked_elsewhere(const char *node, const char *except_req, char *who, size_t len);

/* (vii) replica r deletes (or cancels) instance x: only an instance of a
 * plan the API shows being undone, or the surplus of a plan beyond its
 * size; never one a succeeded plan needs, never anyone else's. Judged from
 * the cloud's record (who made x, for which plan) and the API as it is
 * when the delete takes effect (the controller says rolling-back there
 * before it deletes anything): never from the caller's store, which would
 * be the controller's own word. */
void judge_delete(const replica *r, const grp *g, const inst *x, const char *how)
{
	const plan_rec *p;
	int64_t live;
	if(x->creator < 0 || x->creator >= NREP) {
		violation("(vii) replica %s %s instance %s of %s, which %s made: no plan of provreqd's", r->name, how,
			  x->id, g->id, x->creator == BY_START ? "nobody (there at the start)"
					: x->mhc ? "a MachineHealthCheck (a replacement)" : "the outside actor");
		return;
	}
	if(!x->plan[0]) {
		violation("(vii) replica %s %s instance %s of %s, which replica %s made for no plan", r->name, how, x->id,
			  g->id, dst.r[x->creator].name);
		return;
	}
	ledger_scan();
	if(!(p = find(x->plan))) {
		violation("(vii) replica %s %s instance %s of %s, made by replica %s for plan %s, which no request's "
			  "status records",
			  r->name, how, x->id, g->id, dst.r[x->creator].name, x->plan);
		return;
	}
	/* (ix) Never a Node another request books (a burst's plans share
	 * groups: a failed one's rollback must tell its instances from its
	 * neighbours'). */
	if(dst.burst && x->node[0]) {
		char who[64];
		if(booked_elsewhere(x->node, p->req, who, sizeof(who)))
			violation("(ix) replica %s %s instance %s (Node %s) of %s for plan %s of request %s: request %s "
				  "books that Node", r->name, how, x->id, x->node, g->id, x->plan, p->req, who);
	}
	live = made_for(x->plan, true);
	if(undoing(p) || live > p->delta)
		return;
	if(p->seen_done)
		violation("(vii) replica %s %s instance %s of %s: its plan %s (request %s) had succeeded", r->name, how,
			  x->id, g->id, x->plan, p->req);
	else
		violation("(vii) replica %s %s instance %s of %s, made by replica %s%s for plan %s of request %s, which "
			  "the API shows %s, not rolling back",
			  r->name, how, x->id, g->id, dst.r[x->creator].name,
			  dst.r[x->creator].shard ? " of shard-b" : "", x->plan, p->req, p->phase[0] ? p->phase : "without a phase");
}

/* Would judge_delete let replica r's delete of x pass (without saying
 * anything)? For the requested instances a replicas decrease cancels
 * (drivers.c): they are a count, not objects, so the cancelled ones are
 * those provreqd may cancel when there are such. */
bool may_delete(const inst *x)
{
	const plan_rec *p;
	if(x->creator < 0 || x->creator >= NREP || !x->plan[0])
		return false;
	ledger_scan();
	if(!(p = find(x->plan)))
		return false;
	return undoing(p) || made_for(x->plan, true) > p->delta;
}

/* The live instances the record gives to plan `token`. */
int64_t plan_live(const char *token)
{
	return made_for(token, true);
}

/* Does a Provisioned, unexpired request book room on `node`? Its name to
 * `who`. */
bool booked_by_any(const char *node, char *who, size_t len)
{
	ledger_scan();
	return booked_elsewhere(node, "", who, len);
}

/* Does request `req` (Provisioned, unexpired) book room on `node`? */
bool booked_by(const char *node, const char *req)
{
	char who[64];
	size_t i;
	ledger_scan();
	for(i = 0; reqs && i < json_object_array_length(reqs); i++) {
		const char *name = str_at(json_object_array_get_idx(reqs, i), "metadata", "name");
		if(name && strcmp(name, req) && booked_elsewhere(node, name, who, sizeof(who)) && !strcmp(who, req))
			return true;
	}
	return false;
}

/* Live instances of each ledger plan, counted once per check: live_of
 * counts a plan's instances Karpenter consolidated within its delta as
 * still held (a plan that succeeded keeps its count), held_of only those
 * the cloud still has (what a plan that did not succeed leaves behind:
 * one Karpenter reclaimed costs nothing and is no leftover). */
static int64_t live_of[MAXPLANS], held_of[MAXPLANS];

static void count_live(void)
{
	size_t gi, i;
	int k;
	memset(live_of, 0, sizeof(live_of));
	memset(held_of, 0, sizeof(held_of));
	for(gi = 0; gi < NGALL; gi++)
		for(i = 0; i < dst.g[gi].n; i++) {
			const inst *x = &dst.g[gi].v[i];
			if((x->gone && !x->reclaimed) || x->creator < 0 || x->creator >= NREP || !x->plan[0])
				continue;
			for(k = 0; k < dst.nplans; k++)
				if(!strcmp(dst.plans[k].token, x->plan)) {
					live_of[k]++;
					held_of[k] += !x->gone;
					break;
				}
		}
}

/* Another actor deletes a Node: every request whose booking (or the room
 * its plan holds on existing nodes) the API shows on it has lost that room
 * through nobody's fault here, and may rightly scale up again (iii). So
 * has a request whose scale-up the API shows still open: the plan's end
 * places its pods on existing nodes as well as new ones, and the room it
 * counted on there may not be in its status yet (a status write that
 * failed, or a pass that could not write). */
void room_lost(const char *node)
{
	size_t i, n = strlen(node);
	ledger_scan();
	for(i = 0; reqs && i < json_object_array_length(reqs); i++) {
		json_object *pr = json_object_array_get_idx(reqs, i);
		const char *text = detail(pr, "provreqd.io/booking"), *p, *name = str_at(pr, "metadata", "name");
		const char *phase = detail(pr, "scaleUpPhase");
		int k;
		if(phase && (!strcmp(phase, "planned") || !strcmp(phase, "increasing") ||
			     !strcmp(phase, "waiting-for-nodes")) && name && sscanf(name, "r%d", &k) == 1 && k >= 0 &&
		   k < MAXREQ) {
			dst.lost_room[k] = true;
			vlog("oracle: %s's scale-up is open while %s goes", name, node);
			continue;
		}
		for(p = text; p && (p = strstr(p, node)); p += n)
			if((p == text || strchr(":,", p[-1])) && p[n] == '=' && name && sscanf(name, "r%d", &k) == 1 &&
			   k >= 0 && k < MAXREQ) {
				dst.lost_room[k] = true;
				vlog("oracle: %s loses the room it holds on %s", name, node);
				break;
			}
	}
}

/* (iii) for the request of plan i, when i is its first ledger entry: at
 * most one of its plans done, at most one not done holding instances
 * (unless another actor deleted a Node the request held room on). */
static void check_request(int i)
{
	int dones = 0, holding = 0, j, k;
	for(j = 0; j < i; j++)
		if(!strcmp(dst.plans[j].uid, dst.plans[i].uid))
			return;
	for(j = i; j < dst.nplans; j++) {
		bool first = true, done = false;
		int64_t live = 0;
		if(strcmp(dst.plans[j].uid, dst.plans[i].uid))
			continue;
		for(k = i; k < j && first; k++)
			first = strcmp(dst.plans[k].base, dst.plans[j].base) != 0;
		if(!first)
			continue;
		for(k = j; k < dst.nplans; k++)
			if(!strcmp(dst.plans[k].base, dst.plans[j].base)) {
				done |= dst.plans[k].seen_done;
				live += live_of[k];
			}
		dones += done;
		holding += !done && live > 0;
	}
	if(dones > 1 && !(sscanf(dst.plans[i].req, "r%d", &k) == 1 && k >= 0 && k < MAXREQ && dst.lost_room[k]))
		violation("(iii) request %s was scaled up twice (%d plans done)", dst.plans[i].req, dones);
	else if(holding > 1)
		violation("(iii) request %s has %d plans holding instances at once", dst.plans[i].req, holding);
}

/* A plan whose request vanished before the API showed its end may have
 * succeeded (the status write that said so lost, then the request
 * deleted): all its instances, or none. */
static bool gone_maybe_done(const plan_rec *p, int64_t live)
{
	return p->request_gone && !p->superseded && live == p->delta;
}

static bool phase_terminal(const char *ph)
{
	return !strcmp(ph, "done") || !strcmp(ph, "rolled-back");
}

/* (ii) A plan that did not succeed holds `live` instances. When a call
 * that took effect after its caller's lease had expired made them, the
 * late call is the cause: (vi). */
static void leftover(const plan_rec *p, int64_t live, const char *what)
{
	int64_t late = late_for(p->token);
	if(late)
		violation("(vi) plan %s of request %s %s %lld instances of %s, %lld of them made by a call that took "
			  "effect after its caller's lease had expired (%s)",
			  p->token, p->req, what, (long long)live, p->group, (long long)late,
			  p->superseded ? "superseded" : p->phase);
	else
		violation("(ii) plan %s of request %s %s %lld instances of %s (%s)", p->token, p->req, what,
			  (long long)live, p->group, p->superseded ? "superseded" : p->phase);
}

/* (i) and (ii) per plan, (iii) per request; with `final`, (iv). */
static void check_plans(bool final)
{
	int i;
	for(i = 0; i < dst.nplans; i++) {
		const plan_rec *p = &dst.plans[i];
		int64_t live = live_of[i], held = held_of[i];
		if(live > p->delta && (final || dst.fenced_cloud))
			violation("(i) plan %s of request %s holds %lld instances of %s, more than the %lld it asked for",
				  p->token, p->req, (long long)live, p->group, (long long)p->delta);
		else if(held && !strcmp(p->phase, "rolled-back") && !p->superseded && !p->seen_done &&
			(final || dst.fenced_cloud || !late_for(p->token)))
			leftover(p, held, "is rolled back but holds");
		else if(final && p->seen_done && live != p->delta)
			violation("(ii) plan %s of request %s succeeded, and holds %lld of the %lld instances it asked for "
				  "once settled: %s",
				  p->token, p->req, (long long)live, (long long)p->delta,
				  made_for(p->token, false) < p->delta ? "it counted instances it did not make"
									: "its instances were deleted after it succeeded");
		else if(final && !p->seen_done && held && !gone_maybe_done(p, live))
			leftover(p, held, p->request_gone ? "(its request deleted) still holds, once settled," : "still holds, once settled,");
		check_request(i);
		if(final && !p->request_gone && !p->superseded && !phase_terminal(p->phase))
			violation("(iv) plan %s of request %s is still %s once faults stopped and everything settled",
				  p->token, p->req, p->phase[0] ? p->phase : "without a phase");
	}
}

/* ------------------------------------------------------------ bookings */

static json_object *field(json_object *o, const char *k)
{
	json_object *x = NULL;
	return o && json_object_object_get_ex(o, k, &x) ? x : NULL;
}

/* Is condition `type` True on the request? Its lastTransitionTime to *ltt. */
static bool cond_true(json_object *pr, const char *type, int64_t *ltt)
{
	json_object *cs = field(field(pr, "status"), "conditions");
	size_t i;
	for(i = 0; cs && i < json_object_array_length(cs); i++) {
		json_object *c = json_object_array_get_idx(cs, i);
		const char *t = str_at(c, "type", NULL), *s = str_at(c, "status", NULL);
		if(t && s && !strcmp(t, type)) {
			const char *lt = str_at(c, "lastTransitionTime", NULL);
			if(ltt && (!lt || rfc3339_parse(lt, ltt, NULL)))
				*ltt = 0;
			return !strcmp(s, "True");
		}
	}
	return false;
}

/* The CPU one pod of podSet `set` asks for (the harness made the
 * templates: small 2, big 6). */
static int64_t pod_mcpu(json_object *pr, size_t set)
{
	json_object *sets = field(field(pr, "spec"), "podSets"), *ps;
	const char *t;
	if(!sets || set >= json_object_array_length(sets))
		return 0;
	ps = json_object_array_get_idx(sets, set);
	t = str_at(ps, "podTemplateRef", "name");
	return t && !strcmp(t, "big") ? 6000 : 2000;
}

static int64_t mcpu(const char *q)
{
	char *end;
	int64_t v = q ? strtoll(q, &end, 10) : 0;
	return q && *end == 'm' ? v : v * 1000;
}

typedef struct nbook {
	char node[48];
	int64_t mcpu;
	char who[300];
} nbook;

/* Add a request's booking text ("set:node=pods,...;set:...") to v. */
static size_t add_booking(json_object *pr, const char *text, nbook *v, size_t n, size_t cap)
{
	const char *p = text, *name = str_at(pr, "metadata", "name");
	json_object *par = field(field(pr, "spec"), "parameters");
	const char *shard = str_at(par, "processorInstance", NULL);
	while(*p) {
		char *end;
		size_t set = strtoul(p, &end, 10), k;
		if(*end != ':')
			return n;
		for(p = end + 1; *p && *p != ';';) {
			const char *eq = strchr(p, '='), *stop = p + strcspn(p, ",;");
			int64_t pods;
			if(!eq || eq > stop)
				return n;
			pods = strtoll(eq + 1, NULL, 10);
			for(k = 0; k < n; k++)
				if(strlen(v[k].node) == (size_t)(eq - p) && !strncmp(v[k].node, p, (size_t)(eq - p)))
					break;
			if(k == n && n < cap) {
				memset(&v[n], 0, sizeof(v[n]));
				snprintf(v[n++].node, sizeof(v[0].node), "%.*s", (int)(eq - p), p);
			}
			if(k < n) {
				size_t l = strlen(v[k].who);
				v[k].mcpu += pods * pod_mcpu(pr, set);
				snprintf(v[k].who + l, sizeof(v[k].who) - l, "%s%s%s%s %lldx%lldm", l ? ", " : "",
					 name ? name : "?", shard ? "@" : "", shard ? shard : "", (long long)pods,
					 (long long)pod_mcpu(pr, set));
			}
			p = *stop == ',' ? stop + 1 : stop;
		}
		if(*p == ';')
			p++;
	}
	return n;
}

/* (ix) Does a Provisioned, unexpired request other than `except_req`
 * book Node `node`, as the API shows? Its name to who. */
static bool booked_elsewhere(const char *node, const char *except_req, char *who, size_t len)
{
	size_t i, n = strlen(node);
	int64_t ttl = dst.r[0].cfg.booking_ttl_ns;
	for(i = 0; reqs && i < json_object_array_length(reqs); i++) {
		json_object *pr = json_object_array_get_idx(reqs, i);
		const char *text = detail(pr, "provreqd.io/booking"), *name = str_at(pr, "metadata", "name"), *p;
		int64_t ltt = 0;
		if(!text || !name || !strcmp(name, except_req) || field(field(pr, "metadata"), "deletionTimestamp") ||
		   !cond_true(pr, "Provisioned", &ltt) || cond_true(pr, "BookingExpired", NULL) ||
		   cond_true(pr, "CapacityRevoked", NULL) || cond_true(pr, "Failed", NULL) || ltt + ttl <= now_ns())
			continue;
		for(p = text; (p = strstr(p, node)); p += n)
			if((p == text || strchr(":,", p[-1])) && p[n] == '=') {
				snprintf(who, len, "%s", name);
				return true;
			}
	}
	return false;
}

/* (viii) The pods the Provisioned, unexpired requests book on a node fit
 * its allocatable CPU: nothing is booked twice, across shards included. */
static void check_bookings(void)
{
	nbook v[64];
	size_t n = 0, i, k;
	int64_t ttl = dst.r[0].cfg.booking_ttl_ns;
	for(i = 0; reqs && i < json_object_array_length(reqs); i++) {
		json_object *pr = json_object_array_get_idx(reqs, i);
		const char *text = detail(pr, "provreqd.io/booking");
		int64_t ltt = 0;
		if(!text || field(field(pr, "metadata"), "deletionTimestamp") || !cond_true(pr, "Provisioned", &ltt) ||
		   cond_true(pr, "BookingExpired", NULL) || cond_true(pr, "CapacityRevoked", NULL) ||
		   cond_true(pr, "Failed", NULL) || ltt + ttl <= now_ns())
			continue;
		n = add_booking(pr, text, v, n, sizeof(v) / sizeof(v[0]));
	}
	if(!n)
		return;
	if(!nodes || nodes_at != dst.api_writes) {
		if(nodes)
			json_object_put(nodes);
		nodes_at = dst.api_writes;
		nodes = api_list("/api/v1/nodes");
	}
	for(k = 0; k < n; k++)
		for(i = 0; nodes && i < json_object_array_length(nodes); i++) {
			json_object *nd = json_object_array_get_idx(nodes, i);
			const char *name = str_at(nd, "metadata", "name");
			int64_t alloc;
			if(!name || strcmp(name, v[k].node))
				continue;
			alloc = mcpu(str_at(field(nd, "status"), "allocatable", "cpu"));
			if(v[k].mcpu > alloc)
				violation("(viii) node %s is booked for %lldm CPU of its %lldm: %s", v[k].node,
					  (long long)v[k].mcpu, (long long)alloc, v[k].who);
			break;
		}
}

/* ------------------------------------------------------------ the rest */

void check(bool final)
{
	int i;
	ledger_scan();
	count_live();
	check_plans(final);
	check_bookings();
	if(!final)
		return;
	for(i = 0; i < NGALL; i++) {
		const grp *g = &dst.g[i];
		const plan_rec *p;
		if(!g->exists)
			continue;
		if(g->target != present(g))
			violation("(ii) group %s has target %d with %d instances once settled", g->id, g->target, present(g));
		/* (x) a plan that rolled back takes the group it made with it. */
		if(g->nap && !present(g) && (!(p = ledger_find(g->owner)) || ended_unsuccessfully(p)))
			violation("(x) auto-provisioned group %s of plan %s%s is left behind once settled", g->id, g->owner,
				  p ? " (rolled back)" : " (which no request's status records)");
	}
}

/* Nothing left to wait for: every plan the API showed (as of the last
 * check) has ended and kept what it should, the cloud is still. */
bool settled(void)
{
	int i;
	count_live();
	for(i = 0; i < dst.nplans; i++) {
		const plan_rec *p = &dst.plans[i];
		if((!p->seen_done && held_of[i] && !gone_maybe_done(p, live_of[i])) || live_of[i] > p->delta ||
		   (!p->request_gone && !p->superseded && !phase_terminal(p->phase)))
			return false;
	}
	return cloud_settled();
}

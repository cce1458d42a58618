/* The API as the one truth across shards and replicas (docs/design.md §7):
 * the bookings and open scale-up plans the requests' statuses record, kept
 * as a view of the request cache.
 *
 * Each shard (--processor-instance) decides only its own requests and keeps
 * its own state store, so what another shard booked, or which node groups
 * its open plans are scaling, is known here only from the API: a
 * Provisioned request's status records its booking (provreqd.io/booking,
 * "podSet:node=pods,...;..."), an atomic request's status its plan
 * (scaleUpPhase, nodeGroup; see at_put_details). Reading them once at
 * start (pr__rebuild_from_api) let two running shards hand out the same
 * room. So:
 *
 *   - the view is updated whenever the request cache moves, from its
 *     journal (only the requests that changed are read again); without a
 *     kept cache (listing mode, full passes) every pass reads it anew;
 *   - a booking recorded in the status of a request another instance
 *     serves goes into every pass's snapshot (the rows the local store may
 *     hold for such a request, rebuilt at start, are not used: the API
 *     says when it ends); so does one of this instance's own requests
 *     whose status shows a live booking the local store lacks (another
 *     replica made it);
 *   - a node group named by another instance's open plan is busy here
 *     (pr_class_group.busy), so two shards never scale one group at once,
 *     and the Nodes that plan has made so far are held for its request
 *     (hold_plan_nodes);
 *   - nodes another instance's live booking holds are not scaled down;
 *   - two instances deciding at the same moment cannot see each other's
 *     answer yet (it is being written), so they agree on an order instead:
 *     the order every instance decides its own requests in (oldest
 *     creationTimestamp, then name, then namespace). Before deciding one
 *     of its requests, an instance places the pods of every older request
 *     another instance is about to decide (not Provisioned, not final, no
 *     plan open, due: first seen or its retry time has come, within
 *     PR_SHARD_DUE_AHEAD_NS ahead and PR_SHARD_DUE_WITHIN_NS behind) as
 *     that instance would (check-capacity: all or none; atomic: what fits
 *     the existing nodes), so the younger of two requests racing for one
 *     room yields whichever instance runs first. An instance that never
 *     decides its requests (stopped) holds nothing once they are
 *     PR_SHARD_DUE_WITHIN_NS past due.
 *
 * A pass walks the live bookings, open plans and other instances' waiting
 * requests only, not every request.
 * Everything here runs on the controller's worker; the request cache's
 * read lock is held during pr__shards_sync.
 *
 * One of the bookings core (host.c, shards.c, snapshot_book.c), the one
 * cycle left among the files of src/provreq: they call each other and are
 * read and changed together (docs/development.md, "Layers"). */
#include "classes/details.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/ctl_int.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Another instance's request counts as about to be decided from this long
 * before its due time (its retry, as its status records it) ... */
#define PR_SHARD_DUE_AHEAD_NS PRD_NS_PER_SEC
/* ... until this long after it: a running instance decides a due request
 * within a pass; one that does not (stopped, or its shard gone) must not
 * hold room for ever. */
#define PR_SHARD_DUE_WITHIN_NS (30 * PRD_NS_PER_SEC)

/* Pods of one podSet booked on one node, and the room they hold. */
typedef struct sh_item {
	char *node;
	size_t set;
	int64_t pods;
	sched_res *res;           /* names owned */
	size_t nres;
} sh_item;

/* What one request's status says (values of pr_shards.entries). */
typedef struct sh_entry {
	char *key;                /* "ns/name" */
	char *uid;
	bool foreign;             /* another instance serves it */
	int64_t until;            /* its recorded booking holds until then (0: none) */
	char *plan;               /* own request: the scale-up plan whose held room it is */
	bool resolved;            /* items[].res hold the room (from its PodTemplates) */
	bool devices;             /* some podSet needs DRA devices */
	sh_item *items;
	size_t nitems;
	char *groups;             /* another instance's open plan: its node groups, "a,b" */
	/* Another instance's request it has yet to answer (values of
	 * pr_shards.waiting): due then, all or none (check-capacity) or what
	 * fits (atomic). */
	bool waiting, all_or_none;
	int64_t due;
	const kube_provreq *pr;   /* the request, while the pass that read it lasts (listing mode) */
} sh_entry;

/* One of another instance's waiting requests a pass places before the
 * younger ones it decides itself. */
struct pr_shard_cand {
	sh_entry *e;
	const kube_provreq *pr;
};

/* Forget the items' room (resolved again when needed). */
static void clear_room(sh_entry *e)
{
	size_t i, k;
	for(i = 0; i < e->nitems; i++) {
		for(k = 0; k < e->items[i].nres; k++)
			free((char *)e->items[i].res[k].name);
		free(e->items[i].res);
		e->items[i].res = NULL;
		e->items[i].nres = 0;
	}
	e->resolved = false;
	e->devices = false;
}

static void entry_free(void *p)
{
	sh_entry *e = p;
	size_t i;
	if(!e)
		return;
	clear_room(e);
	for(i = 0; i < e->nitems; i++)
		free(e->items[i].node);
	free(e->items);
	free(e->key);
	free(e->uid);
	free(e->plan);
	free(e->groups);
	free(e);
}

void pr__shards_init(pr_ctl *c)
{
	memset(&c->shards, 0, sizeof(c->shards));
	hmap_init(&c->shards.entries, entry_free);
	hmap_init(&c->shards.foreign, NULL);
	hmap_init(&c->shards.live, NULL);
	hmap_init(&c->shards.plans, NULL);
	hmap_init(&c->shards.waiting, NULL);
}

void pr__shards_free(pr_ctl *c)
{
	hmap_free(&c->shards.live);
	hmap_free(&c->shards.plans);
	hmap_free(&c->shards.waiting);
	hmap_free(&c->shards.foreign);
	hmap_free(&c->shards.entries);
}

/* The raw processorInstance parameter: decided before anything else, so an
 * instance never reads, adopts or acts on another instance's requests,
 * whatever else their parameters say. */
static const char *processor_of(const kube_provreq *pr)
{
	size_t i;
	for(i = 0; i < pr->nparameters; i++)
		if(pr->parameters[i].key && !strcmp(pr->parameters[i].key, "processorInstance"))
			return pr->parameters[i].value;
	return NULL;
}

bool pr__shards_ours(const pr_ctl *c, const kube_provreq *pr)
{
	const char *want = c->cfg.processor_instance ? c->cfg.processor_instance : "";
	const char *have = processor_of(pr);
	return pr__module_for(c, pr__effective_class(c, pr)) && str_eq(have ? have : "", want);
}

bool pr__shards_foreign(const pr_ctl *c, const char *uid)
{
	return hmap_has(&c->shards.foreign, uid);
}

/* The node groups of an open plan the status records ("a,b"), or NULL:
 * phase planned, increasing, waiting-for-nodes or rolling-back. Caller
 * frees. */
static char *open_plan_groups(const pr_ctl *c, const kube_provreq *pr)
{
	const pr_class_module *m = pr__module_for(c, pr__effective_class(c, pr));
	if(!m || !m->records_plans || !pr_details_plan_open(pr))
		return NULL;
	return pr_details_get(pr, PR_DETAIL_GROUP);
}

int64_t pr__status_booking_end(const pr_ctl *c, const kube_provreq *pr, char **plan)
{
	const kube_condition *prov = pr_cond(pr, PR_COND_PROVISIONED);
	char *phase, *deadline;
	int64_t end = 0, dl = 0;
	state_phase ph;
	*plan = NULL;
	/* (Being deleted: it books nothing any more.) */
	if(pr_is_terminal(pr) || pr->meta.deleted_ns)
		return 0;
	if(prov && pr_cond_true(pr, PR_COND_PROVISIONED))
		return prov->last_transition_ns + c->cfg.booking_ttl_ns;
	if(!(phase = pr_details_get(pr, PR_DETAIL_PHASE)))
		return 0;
	deadline = pr_details_get(pr, PR_DETAIL_DEADLINE);
	if(deadline && state_phase_parse(phase, &ph) == 0 &&
	   (ph == STATE_PHASE_INCREASING || ph == STATE_PHASE_WAITING_FOR_NODES) &&
	   rfc3339_parse(deadline, &dl, NULL) == 0 && (*plan = pr_details_get(pr, PR_DETAIL_PLAN)))
		end = dl + PR_HOLD_MARGIN_NS;
	free(phase);
	free(deadline);
	return end;
}

/* Another instance's request that it has yet to answer: of a class whose
 * requests are placed for others (pr_class_module.placed_for_others), not
 * final, not being deleted, not Provisioned, no plan open.
 * *due: when it decides it (its recorded retry time, else when it was last
 * answered or created). */
static bool waiting_at(const pr_ctl *c, const kube_provreq *pr, bool open_plan, int64_t *due)
{
	const kube_condition *prov = pr_cond(pr, PR_COND_PROVISIONED);
	const pr_class_module *m = pr__module_for(c, pr__effective_class(c, pr));
	char *next;
	int64_t t = 0;
	if(!m || !m->placed_for_others || pr_is_terminal(pr) || pr->meta.deleted_ns || open_plan ||
	   pr_cond_true(pr, PR_COND_PROVISIONED))
		return false;
	if(prov && (next = pr_details_get(pr, PR_DETAIL_NEXT_ATTEMPT))) {
		if(!pr_details_time(next, &t))
			t = 0;
		free(next);
	}
	*due = t ? t : prov ? prov->last_transition_ns : pr->meta.created_ns;
	return true;
}

/* The room `pods` pods of podSet `set` hold, into it. 0 or PRD_ENOMEM. */
static int item_room(sh_item *it, const sched_podset *set)
{
	const sched_pod_spec *ps = set->pod;
	size_t k;
	if(!(it->res = calloc(ps->n_requests + 1, sizeof(*it->res))))
		return PRD_ENOMEM;
	for(k = 0; k <= ps->n_requests; k++) {
		const char *name = k < ps->n_requests ? ps->requests[k].name : "pods";
		int64_t each = k < ps->n_requests ? ps->requests[k].value : 1;
		if(!(it->res[k].name = str_dup(name)))
			return PRD_ENOMEM;
		it->nres++;
		/* (A status is outside input: saturate, never overflow.) */
		it->res[k].value = each > 0 && it->pods > SCHED_QTY_MAX / each ? SCHED_QTY_MAX : each * it->pods;
	}
	return 0;
}

/* One "node=pods" of podSet `set` into e->items. */
static int add_item(sh_entry *e, size_t *cap, size_t set, const char *node, size_t nlen, int64_t pods)
{
	sh_item *it;
	if(e->nitems == *cap) {
		sh_item *nv = realloc(e->items, (*cap = *cap ? *cap * 2 : 8) * sizeof(*nv));
		if(!nv)
			return PRD_ENOMEM;
		e->items = nv;
	}
	it = &e->items[e->nitems];
	memset(it, 0, sizeof(*it));
	it->set = set;
	it->pods = pods;
	if(!(it->node = str_ndup(node, nlen)))
		return PRD_ENOMEM;
	e->nitems++;
	return 0;
}

/* Parse "podSet:node=pods,node=pods;podSet:..." into e->items. 0,
 * PRD_EINVAL (not a booking: ignored) or PRD_ENOMEM. */
static int parse_booking(sh_entry *e, const char *text, size_t nsets)
{
	const char *p = text;
	size_t cap = 0;
	int rc;
	while(*p) {
		char *end;
		size_t set = strtoul(p, &end, 10);
		if(end == p || *end != ':' || set >= nsets)
			return PRD_EINVAL;
		for(p = end + 1; *p && *p != ';';) {
			const char *eq = strchr(p, '='), *stop = p + strcspn(p, ",;");
			int64_t pods;
			if(!eq || eq > stop || eq == p || str_to_int64_n(eq + 1, (size_t)(stop - eq - 1), &pods) || pods <= 0)
				return PRD_EINVAL;
			if((rc = add_item(e, &cap, set, p, (size_t)(eq - p), pods)))
				return rc;
			p = *stop == ',' ? stop + 1 : stop;
		}
		if(*p == ';')
			p++;
	}
	return 0;
}

/* The request of an entry, as the pass has it: the kept copy, or (listing
 * mode, where every pass reads the view anew) the pass's own. */
static const kube_provreq *request_of(pr_ctl *c, pr_world *w, const sh_entry *e)
{
	return w->prs_kept ? hmap_get(&c->prs, e->key) : e->pr;
}

/* The podSets of an entry's request (pass arena), or NULL (its PodTemplates
 * are not all there: tried again next pass). */
static sched_podset *podsets_of(pr_ctl *c, pr_world *w, const sh_entry *e)
{
	const kube_provreq *pr = request_of(c, w, e);
	sched_podset *sets;
	char missing[300];
	prd_err err;
	if(!pr || !str_eq(pr->meta.uid, e->uid) || !(sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*sets))) ||
	   pr__resolve_podsets(w, pr, sets, missing, sizeof(missing), &err))
		return NULL;
	return sets;
}

/* The room of each item, from the request's PodTemplates: resolved when a
 * pass first books it (an own request's booking is almost always in the
 * local store, and is then never resolved here). */
static bool resolve_room(pr_ctl *c, pr_world *w, sh_entry *e)
{
	sched_podset *sets;
	size_t i;
	if(e->resolved)
		return true;
	if(!(sets = podsets_of(c, w, e)))
		return false;
	for(i = 0; i < e->nitems; i++) {
		if(item_room(&e->items[i], &sets[e->items[i].set])) {
			clear_room(e);
			return false;
		}
		e->devices |= sets[e->items[i].set].pod->n_dev_requests > 0;
	}
	e->resolved = true;
	return true;
}

/* The node groups an open plan in pr's status holds busy here: none when
 * this controller has the plan key and the record's seal does not verify
 * (a record provreqd did not write, refused by at_adopt too), so that a
 * forged record cannot hold a group, and the requests that want it,
 * forever (e2e 93). Caller frees. */
static char *held_groups(pr_ctl *c, const kube_provreq *pr)
{
	if(c->plan_key_set && !pr__plan_sealed(c, pr)) {
		log_debug("an open plan in a request's status holds no group: its seal does not verify", "request",
			  pr->meta.name, "namespace", pr->meta.ns);
		return NULL;
	}
	return open_plan_groups(c, pr);
}

/* The entry for a request, or NULL when its status says nothing this view
 * keeps (own requests without a recorded booking). *rc: PRD_ENOMEM. */
static sh_entry *derive(pr_ctl *c, const char *key, const kube_provreq *pr, int *rc)
{
	sh_entry *e;
	char *plan = NULL, *text;
	bool foreign = !pr__shards_ours(c, pr);
	int64_t until = pr__status_booking_end(c, pr, &plan);
	*rc = 0;
	/* An own request's plan rolling back holds no booking, but its Nodes
	 * are held all the same until they are gone (own_plan_here): a
	 * leader that cannot adopt it yet (its groups not listed) booked
	 * other requests on them, and the rollback deleted them under those
	 * bookings (DST mixed seed 20268). */
	if(!foreign && !until && !plan && pr_details_plan_open(pr))
		plan = pr_details_get(pr, PR_DETAIL_PLAN);
	if((!foreign && !until && !plan) || !pr->meta.uid) {
		free(plan);
		return NULL;
	}
	if(!(e = calloc(1, sizeof(*e))) || !(e->uid = str_dup(pr->meta.uid)) || !(e->key = str_dup(key))) {
		entry_free(e);
		free(plan);
		*rc = PRD_ENOMEM;
		return NULL;
	}
	e->foreign = foreign;
	e->plan = foreign ? NULL : plan;
	e->pr = pr;
	if(foreign) {
		const pr_class_module *m = pr__module_for(c, pr__effective_class(c, pr));
		bool open = pr_details_plan_open(pr);
		free(plan);
		e->groups = held_groups(c, pr);
		e->waiting = !until && waiting_at(c, pr, open, &e->due);
		e->all_or_none = m && m->existing_nodes_only;
	}
	if(until && (text = pr_details_get(pr, PR_DETAIL_BOOKING))) {
		int prc = parse_booking(e, text, pr->npod_sets);
		free(text);
		if(prc == PRD_ENOMEM) {
			entry_free(e);
			*rc = PRD_ENOMEM;
			return NULL;
		}
		if(prc == 0 && e->nitems)
			e->until = until;
	}
	/* An own request's open plan: held like another instance's while the
	 * local store does not carry it (own_plan_here). */
	if(!foreign && e->plan)
		e->groups = held_groups(c, pr);
	if(!foreign && !e->until && !e->groups) {
		entry_free(e);
		return NULL;
	}
	return e;
}

/* Forget what the view holds for "ns/name". */
static void forget(pr_ctl *c, const char *key)
{
	sh_entry *e = hmap_take(&c->shards.entries, key);
	if(!e)
		return;
	hmap_del(&c->shards.foreign, e->uid);
	hmap_del(&c->shards.live, e->uid);
	hmap_del(&c->shards.plans, e->uid);
	hmap_del(&c->shards.waiting, e->uid);
	entry_free(e);
}

/* Read one request's status into the view ("ns/name"; pr NULL: gone). */
static int note(pr_ctl *c, const char *key, const kube_provreq *pr)
{
	sh_entry *e;
	int rc = 0;
	forget(c, key);
	if(!pr)
		return 0;
	c->stats.shard_reads++;
	if(!(e = derive(c, key, pr, &rc)))
		return rc;
	if(hmap_put(&c->shards.entries, key, e)) {
		entry_free(e);
		return PRD_ENOMEM;
	}
	if((e->foreign && hmap_put(&c->shards.foreign, e->uid, NULL)) ||
	   (e->until && hmap_put(&c->shards.live, e->uid, e)) ||
	   (e->groups && hmap_put(&c->shards.plans, e->uid, e)) ||
	   (e->waiting && hmap_put(&c->shards.waiting, e->uid, e)))
		return PRD_ENOMEM;
	return 0;
}

static int changed(void *ud, const char *ns, const char *name)
{
	pr_ctl *c = ud;
	char key[600];
	snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
	return note(c, key, hmap_get(&c->prs, key));
}

/* Read every request's status anew. */
static int resync(pr_ctl *c, pr_world *w)
{
	size_t i;
	int rc = 0;
	pr__shards_free(c);
	pr__shards_init(c);
	for(i = 0; i < w->nprs && !rc; i++) {
		char key[600];
		snprintf(key, sizeof(key), "%s/%s", w->prs[i]->meta.ns, w->prs[i]->meta.name);
		rc = note(c, key, w->prs[i]);
	}
	return rc;
}

/* Another instance's open plans: their node groups are busy here. */
/* An own request's open plan the local store carries (adopted or made
 * here): the atomic class holds its group and Nodes itself. One it does
 * not carry yet (a new leader waiting to adopt it until its groups are
 * listed) is held here like another instance's: else a request decided
 * meanwhile takes the Nodes it brought up, and once adopted it finds its
 * pods do not fit and scales up again (DST mixed seed 30908, (iii)). */
static bool own_plan_here(const pr_ctl *c, const sh_entry *e)
{
	state_intent in;
	char id[400];
	bool open;
	if(e->foreign || !e->plan || !c->db)
		return false;
	snprintf(id, sizeof(id), "%s#0", e->plan);
	if(state_intent_get(c->db, id, &in, NULL))
		return false;
	/* A plan this store closed while the status shows it open (its end
	 * not written yet: a crash, a refused write) is held here too: the
	 * atomic class holds open plans only, and the booking its end made
	 * may have expired meanwhile (the booking's time counts from the
	 * decision). Requests decided before the end is written took its
	 * Nodes, and the end, written from the store, found its pods did not
	 * fit (DST mixed seed 44218, (iii)). succeed() lets the request's own
	 * hold go before it places. */
	open = !state_phase_is_terminal(in.phase);
	state_intent_clear(&in);
	return open;
}

static void mark_busy(pr_ctl *c, pr_world *w)
{
	hmap_iter it;
	void *v;
	hmap_iter_init(&it, &c->shards.plans);
	while(hmap_iter_next(&it, NULL, &v)) {
		const char *p = ((const sh_entry *)v)->groups;
		if(own_plan_here(c, v))
			continue;
		while(*p) {
			size_t n = strcspn(p, ",");
			char id[256];
			pr_group *g;
			snprintf(id, sizeof(id), "%.*s", (int)(n < sizeof(id) - 1 ? n : sizeof(id) - 1), p);
			if((g = pr__find_group(w, id)) && !g->busy) {
				g->busy = true;
				g->busy_elsewhere = true;
				log_debug("node group busy with another instance's scale-up", "group", id);
			}
			p += n + (p[n] == ',');
		}
	}
}

/* Nodes another instance's live booking holds are not scaled down here
 * (its request is not in the local store's bookings). */
static void keep_booked_nodes(pr_ctl *c, pr_world *w)
{
	hmap_iter it;
	void *v;
	size_t i;
	if(!c->cfg.scale_down || !w->nmarked)
		return;
	hmap_iter_init(&it, &c->shards.live);
	while(hmap_iter_next(&it, NULL, &v)) {
		const sh_entry *e = v;
		for(i = 0; e->foreign && e->until > c->now && i < e->nitems; i++)
			hmap_put(&w->blocking, e->items[i].node, (void *)1);
	}
}

static int cand_cmp(const void *a, const void *b)
{
	const struct pr_shard_cand *x = a, *y = b;
	return pr_order_cmp(&x->pr, &y->pr);
}

/* Another instance's requests due about now, in the order requests are
 * decided (the pass's list, in its arena). */
static void due_candidates(pr_ctl *c, pr_world *w)
{
	pr_shards *s = &c->shards;
	hmap_iter it;
	void *v;
	s->cands = NULL;
	s->ncands = s->next = 0;
	if(!hmap_len(&s->waiting) ||
	   !(s->cands = arena_array(&w->ar, hmap_len(&s->waiting) + 1, sizeof(*s->cands))))
		return;
	hmap_iter_init(&it, &s->waiting);
	while(hmap_iter_next(&it, NULL, &v)) {
		sh_entry *e = v;
		const kube_provreq *pr;
		if(e->due > c->now + PR_SHARD_DUE_AHEAD_NS || e->due < c->now - PR_SHARD_DUE_WITHIN_NS ||
		   !(pr = request_of(c, w, e)) || !str_eq(pr->meta.uid, e->uid))
			continue;
		s->cands[s->ncands].e = e;
		s->cands[s->ncands++].pr = pr;
	}
	qsort(s->cands, s->ncands, sizeof(*s->cands), cand_cmp);
}

/* Place another instance's waiting request in the pass's snapshot as its
 * instance will: check-capacity all pods or none, atomic the pods that fit
 * the existing nodes (the room its plan would hold). */
static void place_for_other(pr_ctl *c, pr_world *w, const struct pr_shard_cand *k)
{
	sched_snapshot *snap = pr__snap(c, w);
	sched_podset *sets;
	sched_place_result res;
	prd_err err;
	if(!snap || !(sets = podsets_of(c, w, k->e)))
		return;
	memset(&res, 0, sizeof(res));
	if(sched_snapshot_fork(snap))
		return;
	if(sched_place(snap, sets, k->pr->npod_sets, &res, &err) == 0 &&
	   (res.fits_all || (!k->e->all_or_none && res.placed > 0))) {
		sched_snapshot_commit(snap);
		c->stats.placed_for_others++;
		metrics_counter_add(M_SHARD_ORDER, NULL, 1);
		log_debug("room held for another instance's older request", "namespace", k->pr->meta.ns, "request",
			  k->pr->meta.name, "pods", LOGI(res.placed));
	} else {
		sched_snapshot_revert(snap);
	}
	sched_place_result_free(&res);
}

void pr__shards_before(pr_ctl *c, pr_world *w, const kube_provreq *pr)
{
	pr_shards *s = &c->shards;
	while(s->next < s->ncands && pr_order_cmp(&s->cands[s->next].pr, &pr) < 0)
		place_for_other(c, w, &s->cands[s->next++]);
}

void pr__shards_sync(pr_ctl *c, pr_world *w)
{
	pr_shards *s = &c->shards;
	bool kept = w->prs_kept && c->prs_valid;
	int rc = 0;
	c->stats.bookings_from_api = 0;
	s->cands = NULL;
	s->ncands = s->next = 0;
	if(!kept || !s->valid || (s->gen != c->prs_gen && kube_informer_changes(c->inf.provreqs, s->gen, changed, c)))
		rc = resync(c, w);
	s->valid = kept && !rc;
	s->gen = c->prs_gen;
	if(rc) {
		/* Not knowing every booking, place nothing this pass (like a
		 * pass that cannot read the local bookings). */
		log_error("cannot read the bookings recorded in the requests' statuses; this pass acts no further");
		c->fenced = true;
		pr__wake_at(c, c->now + PRD_NS_PER_SEC);
		return;
	}
	mark_busy(c, w);
	keep_booked_nodes(c, w);
	due_candidates(c, w);
}

/* The local store knows plan "uid/ns" ended, or rolling back (a status
 * write that said so was lost): the room it held went back, whatever the
 * status still shows. */
bool pr__plan_ended_here(const pr_ctl *c, const char *plan)
{
	state_intent in;
	char id[400];
	bool ended = false;
	if(!plan || !c->db)
		return false;
	snprintf(id, sizeof(id), "%s#0", plan);
	if(state_intent_get(c->db, id, &in, NULL) == 0) {
		ended = in.phase != STATE_PHASE_INCREASING && in.phase != STATE_PHASE_WAITING_FOR_NODES &&
			in.phase != STATE_PHASE_PLANNED;
		state_intent_clear(&in);
	}
	return ended;
}

/* A booking's DRA devices: what its pods would be allocated on each node
 * now (the status records pods, not devices). */
static void book_devices(pr_ctl *c, pr_world *w, const sh_entry *e)
{
	sched_podset *sets = podsets_of(c, w, e);
	prd_err err;
	size_t i, idx;
	if(!sets)
		return;
	for(i = 0; i < e->nitems; i++)
		if(sets[e->items[i].set].pod->n_dev_requests &&
		   sched_snapshot_find_node(w->snap, e->items[i].node, &idx) == 0)
			sched_snapshot_book_pod_devices(w->snap, e->uid, idx, sets[e->items[i].set].pod,
							e->items[i].pods, NULL, &err);
}

/* Is instance x of group number `i` of another instance's plan `base`
 * ("uid/ns") that plan's? By its owner token where the cloud marks
 * instances, else by when it (or its Node) appeared: since the plan began,
 * less the clock skew the atomic class allows. */
static bool of_plan(pr_ctl *c, const char *base, size_t i, int64_t began, const pr_class_inst *x)
{
	char id[300], token[PR_OWNER_MAX];
	const int64_t *born;
	if(x->owner) {
		snprintf(id, sizeof(id), "%s#%zu", base, i);
		pr_owner_token(id, token);
		return !strcmp(x->owner, token);
	}
	if(x->created_ns > 0)
		return x->created_ns >= began - PR_CLOCK_SKEW_NS;
	born = hmap_get(&c->born, x->node);
	return born && *born >= began - PR_CLOCK_SKEW_NS;
}

/* The group of another instance's plan cannot be listed this pass (or no
 * driver here lists it): which Nodes are the plan's cannot be told, so
 * every Node that registered since the plan began is held for its request
 * this pass, as the atomic class does for its own plans. Too much held for
 * a pass delays a decision; too little lets a request here take the room
 * the plan is bringing up. */
static void hold_since(pr_ctl *c, pr_world *w, const sh_entry *e, const char *group, int64_t began,
		       const uint8_t *booked)
{
	sched_res all = { "pods", SCHED_QTY_MAX };
	hmap_iter it;
	const char *name;
	void *born;
	size_t idx, i, k;
	hmap listed;
	/* Except Nodes known not to be the plan's in this group (a plan here
	 * waiting for them would find them held and scale up a second time):
	 * those of groups this pass did list, other than the plan's, those
	 * some request had booked room on before (a plan's new Node is held
	 * from the pass that first sees it: held, it is not booked) ... */
	hmap_init(&listed, NULL);
	/* ... and the Nodes this store's own open plans have recorded. */
	if(c->db) {
		state_intent *own = NULL;
		size_t nown = 0;
		if(state_intent_list_open(c->db, &own, &nown, NULL) == 0) {
			for(i = 0; i < nown; i++)
				for(k = 0; k < own[i].n_nodes; k++)
					hmap_put(&listed, own[i].nodes[k], NULL);
			state_intent_list_free(own, nown);
		}
	}
	for(i = 0; i < w->ngroups; i++) {
		const pr_group *g = &w->groups[i];
		if(!g->listed || g->list_rc || !strcmp(g->id, group))
			continue;
		for(k = 0; k < g->ninst; k++)
			if(g->inst[k].node)
				hmap_put(&listed, g->inst[k].node, NULL);
	}
	hmap_iter_init(&it, &c->born);
	while(hmap_iter_next(&it, &name, &born))
		if(*(const int64_t *)born >= began - PR_CLOCK_SKEW_NS && !hmap_has(&listed, name) &&
		   sched_snapshot_find_node(w->snap, name, &idx) == 0 && !(booked && booked[idx]))
			sched_snapshot_book(w->snap, e->uid, idx, &all, 1, NULL);
	hmap_free(&listed);
}

/* Another instance's open plan: the Nodes it has made so far are held for
 * its request in this pass's snapshot (on the word of its status, sealed or
 * not: a forged plan here only holds room, nothing is deleted), as the atomic class holds its own
 * plans' Nodes, so no request decided here takes the room that plan is
 * bringing up (the plan would then find its Nodes taken and scale up
 * again). */
static void hold_plan_nodes(pr_ctl *c, pr_world *w, const sh_entry *e, const uint8_t *booked)
{
	const kube_provreq *pr = request_of(c, w, e);
	char *plan = pr ? pr_details_get(pr, PR_DETAIL_PLAN) : NULL, id[256];
	const char *p = e->groups;
	sched_res all = { "pods", SCHED_QTY_MAX };
	int64_t began = plan ? pr_plan_began(plan) : 0;
	size_t i, k, idx;
	for(i = 0; began > 0 && *p; i++) {
		size_t n = strcspn(p, ",");
		pr_group *g;
		snprintf(id, sizeof(id), "%.*s", (int)(n < sizeof(id) - 1 ? n : sizeof(id) - 1), p);
		p += n + (p[n] == ',');
		if(!(g = pr__find_group(w, id)) || pr_group_list(g, NULL)) {
			hold_since(c, w, e, id, began, booked);
			continue;
		}
		for(k = 0; k < g->ninst; k++)
			if(g->inst[k].node && of_plan(c, plan, i, began, &g->inst[k]) &&
			   sched_snapshot_find_node(w->snap, g->inst[k].node, &idx) == 0 && !(booked && booked[idx]))
				sched_snapshot_book(w->snap, e->uid, idx, &all, 1, NULL);
	}
	free(plan);
}

static int row_uid_cmp(const void *key, const void *row)
{
	return strcmp(key, ((const state_booking *)row)->request_uid);
}

void pr__shards_book(pr_ctl *c, pr_world *w, const state_booking *rows, size_t nrows)
{
	hmap_iter it;
	void *v;
	size_t i, idx, nn;
	uint8_t *booked;
	hmap_iter_init(&it, &c->shards.live);
	while(hmap_iter_next(&it, NULL, &v)) {
		sh_entry *e = v;
		prd_err err;
		if(e->until <= c->now || !hmap_has(&w->uids, e->uid) || pr__ledger_has(c, e->uid) ||
		   (!e->foreign && ((nrows && bsearch(e->uid, rows, nrows, sizeof(*rows), row_uid_cmp)) ||
				    pr__plan_ended_here(c, e->plan))) ||
		   !resolve_room(c, w, e))
			continue;
		for(i = 0; i < e->nitems; i++)
			if(sched_snapshot_find_node(w->snap, e->items[i].node, &idx) == 0 &&
			   sched_snapshot_book(w->snap, e->uid, idx, e->items[i].res, e->items[i].nres, &err))
				log_warn("booking recorded in a request's status ignored", "request_uid", e->uid, "error",
					 err.msg);
		if(e->devices)
			book_devices(c, w, e);
		c->stats.bookings_from_api++;
	}
	metrics_gauge_set(M_API_BOOKINGS, NULL, (double)c->stats.bookings_from_api);
	/* (The Nodes booked before any plan is held: bookings, here or in
	 * the API, are never on a plan's new Node, which is held from the
	 * pass that first sees it. Null when out of memory: held as before.) */
	if(!hmap_len(&c->shards.plans))
		return;
	nn = sched_snapshot_node_count(w->snap);
	booked = malloc(nn + 1);
	if(booked)
		sched_snapshot_booked_mask(w->snap, booked, nn);
	hmap_iter_init(&it, &c->shards.plans);
	while(hmap_iter_next(&it, NULL, &v))
		if(hmap_has(&w->uids, ((sh_entry *)v)->uid) && !own_plan_here(c, v))
			hold_plan_nodes(c, w, v, booked);
	free(booked);
}

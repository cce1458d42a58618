/* Which node groups an atomic scale-up uses, and by how much.
 *
 * Pods that fit existing nodes are placed first. For the rest, every group
 * that could take all of them alone is an option and the expander picks
 * one. When no group can, the pods are split: podSet by podSet (largest
 * count first), each to the group the expander picks among those that take
 * the whole podSet, or — when none can — as many as the best group takes,
 * the rest to the next. Each group's share is estimated again as a whole
 * (so podSets sharing a group pack together), and the split is taken only
 * if every pod is placed within every limit.
 *
 * Several plans may share a group whose driver marks each instance with
 * its plan's owner token (AT_OWN_MARK): each plan's instances, rollback and
 * membership are told apart by token. A group without owner marks serves
 * one plan at a time. Every limit counts the plans in flight (this store's
 * open plans): the group's max through its target, which their calls
 * raised; max-nodes-per-scaleup through the nodes they asked for;
 * max-nodes-total through those not registered yet. A request that only
 * the plans in flight keep out (it fits once they are not counted) waits:
 * Provisioned=False/WaitingForScaleUp, no request backoff, decided again
 * when a plan ends. Requests are decided oldest first, so when the limits
 * hold only some of a burst, the oldest get the room. */
#include "classes/atomic_int.h"
#include "classes/nap.h"
#include "ops/log.h"
#include "sched/estimator.h"
#include "util/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHY(...) (wl += (size_t)snprintf(why + wl, wl < sizeof(why) ? sizeof(why) - wl : 0, __VA_ARGS__))

static void fill_option(sched_option *o, const pr_class_group *g, const sched_podset *rest, size_t n,
			const sched_est_result *est)
{
	size_t k, r;
	memset(o, 0, sizeof(*o));
	o->group_id = g->id;
	o->fits_all = true;
	if(g->nap_new && g->nap_new->has_price) {
		o->has_price = true;
		o->price_micros = g->nap_new->price_micros;
	}
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
				o->req_cpu += rest[k].pod->requests[r].value * est->place.sets[k].placed;
			if(!strcmp(rest[k].pod->requests[r].name, "memory"))
				o->req_memory += rest[k].pod->requests[r].value * est->place.sets[k].placed;
		}
}

/* This store's open plans on group `id` (NULL: on every group). */
typedef struct inflight {
	int64_t plans;
	int64_t delta;     /* the nodes they asked for */
	int64_t pending;   /* ... not registered as Nodes yet */
	bool exclusive;    /* one of them cannot share its group (no owner marks) */
} inflight;

static void inflight_of(const pr_class_host *h, const char *id, inflight *f)
{
	const state_intent *open = NULL;
	size_t n = 0, i;
	memset(f, 0, sizeof(*f));
	if(!h->db || at_open_intents(h, &open, &n))
		return;
	for(i = 0; i < n; i++) {
		int64_t left = open[i].delta - (int64_t)open[i].n_nodes;
		if(id && strcmp(open[i].node_group, id))
			continue;
		f->plans++;
		f->delta += open[i].delta;
		f->pending += left > 0 ? left : 0;
		f->exclusive |= at_own_of(&open[i]) != AT_OWN_MARK;
	}
}

/* Is g held by plans in flight that a new plan cannot join (another
 * shard's, or one of this store's on a group without owner marks)? */
static bool held(const pr_class_host *h, const pr_class_group *g)
{
	inflight f;
	if(!g->busy)
		return false;
	if(g->busy_elsewhere)
		return true;
	inflight_of(h, g->id, &f);
	return f.plans > 0 && (f.exclusive || at_own_of_group(g) != AT_OWN_MARK);
}

/* `relaxed`: as if no plan were in flight (would the request fit once
 * they end?). */
static bool usable(const pr_class_host *h, const pr_class_group *g, bool relaxed)
{
	return g->has_tmpl && !(g->backed_off && g->backoff_until > h->now) && (relaxed || !held(h, g));
}

static const char *unusable_why(const pr_class_host *h, const pr_class_group *g)
{
	return !g->has_tmpl ? "no template"
	       : (g->backed_off && g->backoff_until > h->now) ? "backed off"
							    : "scale-up in progress";
}

/* Estimate `sets` on group g with `added` nodes of the request already
 * planned elsewhere (max-nodes-total) and `taken` of g's room used; the
 * plans in flight count, unless `relaxed`. */
static int estimate(const pr_class_host *h, const pr_class_group *g, const sched_podset *sets, size_t n,
		    int64_t added, int64_t taken, bool relaxed, sched_est_result *est, prd_err *e)
{
	sched_est_limits lim;
	inflight all, mine;
	int64_t target = g->target, room;
	inflight_of(h, NULL, &all);
	inflight_of(h, g->id, &mine);
	if(relaxed) {
		/* (Their calls raised the target.) */
		target = target > mine.delta ? target - mine.delta : 0;
		memset(&all, 0, sizeof(all));
	}
	room = g->max > target ? g->max - target : 0;
	memset(est, 0, sizeof(*est));
	lim.group_room = room > taken ? room - taken : 0;
	lim.max_nodes_total = h->limits->max_nodes_total;
	lim.cluster_nodes = h->cluster_nodes + added + all.pending;
	lim.max_new_nodes =
		h->limits->max_nodes_per_scaleup ? h->limits->max_nodes_per_scaleup - added - all.delta : 0;
	if(h->limits->max_nodes_per_scaleup && lim.max_new_nodes <= 0)
		lim.max_new_nodes = -1;
	if(lim.max_new_nodes < 0)
		return prd_err_set(e, PRD_ERANGE, "max-nodes-per-scaleup reached");
	return sched_estimate(h->snapshot(h->ctx), &g->tmpl, sets, n, &lim, est, e);
}

static const char *limit_words(sched_est_limit l)
{
	return l == SCHED_EST_GROUP_MAX ? " within the group's max size"
	       : l == SCHED_EST_TOTAL_MAX ? " within max-nodes-total"
	       : l == SCHED_EST_SCALEUP_MAX ? " within max-nodes-per-scaleup"
					     : " on its template node";
}

/* One group of `groups` for everything: the classic atomic choice (the
 * existing groups, or the new ones auto-provisioning offers). */
static bool choose_one(const pr_class_host *h, pr_class_group *groups, size_t ngroups, const sched_podset *rest,
		       size_t n, bool relaxed, at_choice *out, char *why, size_t whylen)
{
	sched_option *opts = arena_array(h->ar, ngroups + 1, sizeof(*opts));
	size_t *gidx = arena_array(h->ar, ngroups + 1, sizeof(*gidx));
	size_t nopt = 0, i, best, wl = 0;
	prd_err e;
	(void)whylen;
	if(!opts || !gidx)
		return false;
	for(i = 0; i < ngroups; i++) {
		pr_class_group *g = &groups[i];
		sched_est_result est;
		if(!usable(h, g, relaxed)) {
			wl += (size_t)snprintf(why + wl, wl < whylen ? whylen - wl : 0, "%s%s: %s", wl ? "; " : "", g->id,
					       unusable_why(h, g));
			continue;
		}
		if(estimate(h, g, rest, n, 0, 0, relaxed, &est, &e)) {
			wl += (size_t)snprintf(why + wl, wl < whylen ? whylen - wl : 0, "%s%s: %s", wl ? "; " : "", g->id,
					       e.msg);
			continue;
		}
		if(!est.place.fits_all) {
			wl += (size_t)snprintf(why + wl, wl < whylen ? whylen - wl : 0, "%s%s: %lld of %lld pods fit%s",
					       wl ? "; " : "", g->id, (long long)est.place.placed,
					       (long long)est.place.requested, limit_words(est.limited_by));
			sched_est_result_free(&est);
			continue;
		}
		fill_option(&opts[nopt], g, rest, n, &est);
		gidx[nopt++] = i;
		sched_est_result_free(&est);
	}
	if(!nopt || sched_expander_choose(h->expander, opts, nopt, &best, &e))
		return false;
	out->parts = arena_array(h->ar, 1, sizeof(*out->parts));
	if(!out->parts)
		return false;
	out->parts[0].g = &groups[gidx[best]];
	out->parts[0].delta = opts[best].node_count;
	out->n = 1;
	return true;
}

/* Share of one group in a split: its pods per podSet. */
typedef struct share {
	int64_t *pods;          /* per podSet */
	int64_t nodes;          /* provisional */
} share;

/* Give `want` pods of podSet `s` to groups; returns how many were placed. */
static int64_t split_podset(const pr_class_host *h, const sched_podset *rest, size_t s, int64_t want, share *sh,
			    int64_t *added, bool relaxed)
{
	sched_option *opts = arena_array(h->ar, h->ngroups + 1, sizeof(*opts));
	size_t *gidx = arena_array(h->ar, h->ngroups + 1, sizeof(*gidx));
	int64_t placed_total = 0;
	prd_err e;
	while(want > 0 && opts && gidx) {
		sched_podset one = rest[s];
		size_t i, nopt = 0, best = 0, most = 0;
		int64_t most_placed = 0, most_nodes = 0;
		bool any_full = false;
		one.count = want;
		for(i = 0; i < h->ngroups; i++) {
			pr_class_group *g = &h->groups[i];
			sched_est_result est;
			if(!usable(h, g, relaxed) || estimate(h, g, &one, 1, *added, sh[i].nodes, relaxed, &est, &e))
				continue;
			if(est.place.fits_all) {
				fill_option(&opts[nopt], g, &one, 1, &est);
				gidx[nopt++] = i;
				any_full = true;
			} else if(est.place.placed > most_placed) {
				most_placed = est.place.placed;
				most_nodes = est.new_nodes;
				most = i;
			}
			sched_est_result_free(&est);
		}
		if(any_full && sched_expander_choose(h->expander, opts, nopt, &best, &e) == 0) {
			sh[gidx[best]].pods[s] += want;
			sh[gidx[best]].nodes += opts[best].node_count;
			*added += opts[best].node_count;
			return placed_total + want;
		}
		if(most_placed <= 0)
			return placed_total;
		sh[most].pods[s] += most_placed;
		sh[most].nodes += most_nodes;
		*added += most_nodes;
		placed_total += most_placed;
		want -= most_placed;
	}
	return placed_total;
}

/* Split across groups; false when some pod finds no place. */
static bool choose_split(const pr_class_host *h, const sched_podset *rest, size_t n, bool relaxed, at_choice *out,
			 char *why, size_t whylen)
{
	share *sh = arena_array(h->ar, h->ngroups + 1, sizeof(*sh));
	size_t i, s, *order = arena_array(h->ar, n + 1, sizeof(*order));
	int64_t added = 0;
	buf pg;
	prd_err e;
	if(!sh || !order || h->ngroups < 2)
		return false;
	for(i = 0; i < h->ngroups; i++)
		if(!(sh[i].pods = arena_array(h->ar, n + 1, sizeof(*sh[i].pods))))
			return false;
	/* Largest podSet first. */
	for(i = 0; i < n; i++)
		order[i] = i;
	for(i = 1; i < n; i++)
		for(s = i; s > 0 && rest[order[s]].count > rest[order[s - 1]].count; s--) {
			size_t t = order[s];
			order[s] = order[s - 1];
			order[s - 1] = t;
		}
	for(i = 0; i < n; i++) {
		s = order[i];
		if(rest[s].count > 0 && split_podset(h, rest, s, rest[s].count, sh, &added, relaxed) < rest[s].count) {
			snprintf(why, whylen, "split across groups: podSet %zu does not fit the groups' remaining room", s);
			return false;
		}
	}
	/* Each group's share as a whole, for its real node count. */
	out->parts = arena_array(h->ar, h->ngroups + 1, sizeof(*out->parts));
	if(!out->parts)
		return false;
	out->n = 0;
	added = 0;
	buf_init(&pg);
	for(i = 0; i < h->ngroups; i++) {
		sched_podset *mine = arena_array(h->ar, n + 1, sizeof(*mine));
		sched_est_result est;
		bool used = false;
		if(!mine)
			break;
		for(s = 0; s < n; s++) {
			mine[s] = rest[s];
			mine[s].count = sh[i].pods[s];
			if(sh[i].pods[s]) {
				used = true;
				buf_printf(&pg, "%s%zu:%s=%lld", pg.len ? "," : "", s, h->groups[i].id, (long long)sh[i].pods[s]);
			}
		}
		if(!used)
			continue;
		if(estimate(h, &h->groups[i], mine, n, added, 0, relaxed, &est, &e) || !est.place.fits_all) {
			snprintf(why, whylen, "split across groups: the share of %s does not fit it", h->groups[i].id);
			sched_est_result_free(&est);
			buf_free(&pg);
			return false;
		}
		out->parts[out->n].g = &h->groups[i];
		out->parts[out->n++].delta = est.new_nodes;
		added += est.new_nodes;
		sched_est_result_free(&est);
	}
	out->podset_groups = arena_strdup(h->ar, buf_str(&pg));
	buf_free(&pg);
	return out->n > 0;
}

/* Only the plans in flight keep the request out (`ch` is its choice when
 * they are not counted): it waits for them, with no request backoff. The
 * condition names the group and what keeps the request out now. */
static void wait_for_plans(const pr_class_host *h, const at_choice *ch, const sched_podset *rest, size_t n)
{
	const pr_class_group *g = ch->parts[0].g;
	inflight all;
	sched_est_result est;
	prd_err e;
	char msg[900];
	inflight_of(h, NULL, &all);
	if(g->busy_elsewhere) {
		snprintf(msg, sizeof(msg), PR_MSG_QUEUED " %s (another instance's); decided again when it ends",
			 g->id);
	} else if(held(h, g)) {
		snprintf(msg, sizeof(msg), PR_MSG_QUEUED " %s, which serves one plan at a time (its driver does not "
			 "mark instances with their plan); decided again when it ends", g->id);
	} else if(estimate(h, g, rest, n, 0, 0, false, &est, &e) == 0) {
		snprintf(msg, sizeof(msg), PR_MSG_QUEUED " %s: with the %lld node%s of the %lld plan%s in flight, %lld of "
			 "%lld pods fit%s; decided again when a plan ends", g->id, (long long)all.delta,
			 all.delta == 1 ? "" : "s", (long long)all.plans, all.plans == 1 ? "" : "s",
			 (long long)est.place.placed, (long long)est.place.requested, limit_words(est.limited_by));
		sched_est_result_free(&est);
	} else {
		snprintf(msg, sizeof(msg), PR_MSG_QUEUED " %s: with the %lld node%s of the %lld plan%s in flight, %s; "
			 "decided again when a plan ends", g->id, (long long)all.delta, all.delta == 1 ? "" : "s",
			 (long long)all.plans, all.plans == 1 ? "" : "s", e.msg);
	}
	log_debug("request waits for the scale-ups in flight", "group", g->id);
	h->set_cond(h->ctx, PR_COND_PROVISIONED, "False", PR_R_WAITING_SCALE_UP, msg);
	/* (A plan that ends wakes the next pass at once; this covers another
	 * instance's.) */
	h->wake_at(h->ctx, h->now + AT_RETRY_NS);
}

int at_choose(const pr_class_host *h, const pr_class_req *req, at_choice *out)
{
	sched_snapshot *snap;
	sched_place_result existing;
	sched_podset *rest = arena_array(h->ar, req->nsets + 1, sizeof(*rest));
	char why[1024] = "", why2[300] = "", why3[1024] = "", msg[2600];
	pr_class_group *cands = NULL;
	size_t ncands = 0;
	int64_t remaining = 0;
	size_t i;
	bool ok;
	prd_err e;

	memset(out, 0, sizeof(*out));
	memset(&existing, 0, sizeof(existing));
	if(!rest || !(snap = h->snapshot(h->ctx)))
		return 0; /* (no snapshot: the pass acts no further) */
	/* A plan started earlier in this pass raised its group's target:
	 * the room left is what the cloud says now. */
	for(i = 0; i < h->ngroups; i++)
		if(h->groups[i].target_stale && pr_group_refresh_target(&h->groups[i], &e))
			log_warn("cannot read a node group's target size again", "group", h->groups[i].id, "error", e.msg);
	if(sched_snapshot_fork(snap) || sched_place(snap, req->sets, req->nsets, &existing, &e)) {
		sched_snapshot_revert(snap);
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
			sched_snapshot_commit(snap);
			h->provisioned(h->ctx, PR_R_PROVISIONED, "capacity for all pods already exists; no scale-up was needed");
		} else {
			sched_snapshot_revert(snap);
			h->not_provisioned(h->ctx, PR_R_BOOK_FAILED, e.msg);
		}
		sched_place_result_free(&existing);
		return rc == 0 ? 2 : 0;
	}
	/* Estimates run with the existing placement in place: the pods that
	 * fit there take that room. */
	ok = choose_one(h, h->groups, h->ngroups, rest, req->nsets, false, out, why, sizeof(why)) ||
	     choose_split(h, rest, req->nsets, false, out, why2, sizeof(why2));
	if(!ok) {
		/* Would it fit once the plans in flight end? Then it waits for
		 * them (before a new group is made for it). */
		at_choice later;
		char ignore[1024];
		memset(&later, 0, sizeof(later));
		if(choose_one(h, h->groups, h->ngroups, rest, req->nsets, true, &later, ignore, sizeof(ignore)) ||
		   choose_split(h, rest, req->nsets, true, &later, ignore, sizeof(ignore))) {
			wait_for_plans(h, &later, rest, req->nsets);
			sched_snapshot_revert(snap);
			sched_place_result_free(&existing);
			return 0;
		}
	}
	if(!ok) {
		/* No group can: a new one of a shape the cloud offers. */
		nap_candidates(h, req->pr->meta.uid, rest, req->nsets, &cands, &ncands, why3, sizeof(why3));
		if(ncands) {
			size_t wl = strlen(why3);
			snprintf(why3 + wl, sizeof(why3) - wl, "%sauto-provisioning: ", wl ? "; " : "");
			wl = strlen(why3);
			ok = choose_one(h, cands, ncands, rest, req->nsets, false, out, why3 + wl, sizeof(why3) - wl);
		}
	}
	sched_snapshot_revert(snap);
	sched_place_result_free(&existing);
	if(!ok) {
		snprintf(msg, sizeof(msg), "no node group can provide all %lld pods that do not fit existing nodes, alone "
			 "or split across groups%s%s%s%s%s%s", (long long)remaining,
			 h->ngroups ? ": " : " (no node groups are configured)", why, why2[0] ? "; " : "", why2,
			 why3[0] ? "; " : "", why3);
		h->not_provisioned(h->ctx, PR_R_NOT_FOUND, msg);
		return 0;
	}
	out->remaining = remaining;
	return 1;
}

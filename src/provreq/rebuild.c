/* A new leader term (or a restart) rebuilds what the local store keeps
 * from what the API records, the truth (docs/design.md §7): each request's booking
 * (the booking ledger first, then the request's status), its attempts and
 * next attempt, and node-group backoffs the last leader recorded.
 *
 * What a status writer other than provreqd can do here (docs/operator.md,
 * "What someone with status-write can and cannot make provreqd do"):
 * nothing is deleted or asked of the cloud on these records; a plan's
 * phase ends a booking only in a sealed plan record (booking_over); a
 * forged booking holds room, and without the ledger a changed one moves
 * it (the ledger, which only provreqd writes, wins where it is on). */
#include "classes/details.h"
#include "ops/log.h"
#include "provreq/ctl_int.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* When the booking a request's status records ends (pr__status_booking_end),
 * unless this store knows better: a plan the status shows in flight that
 * the store has rolling back or ended holds nothing (a status write that
 * said so was lost). */
static int64_t recorded_booking_end(const pr_ctl *c, const kube_provreq *pr)
{
	char *plan = NULL;
	int64_t end = pr__status_booking_end(c, pr, &plan);
	if(pr__plan_ended_here(c, plan))
		end = 0;
	free(plan);
	return end;
}

/* The status says no booking of the request can hold any more: it is
 * being deleted, final, or its plan is rolling back or rolled back (the
 * room it held went back). Local rows are then stale whatever the ledger,
 * whose entry is removed with the next write, still lists. The phase
 * counts only in a plan record provreqd sealed: a forged "rolling-back"
 * would free the room of a live booking for another request. (A status
 * writer can still make a request final - Failed, BookingExpired: that
 * ends its booking by the upstream contract, docs/operator.md.) */
static bool booking_over(const pr_ctl *c, const kube_provreq *pr)
{
	char *phase;
	bool over;
	if(pr->meta.deleted_ns || pr_is_terminal(pr))
		return true;
	phase = pr_details_get(pr, PR_DETAIL_PHASE);
	over = phase && !pr_cond_true(pr, PR_COND_PROVISIONED) &&
	       (!strcmp(phase, "rolling-back") || !strcmp(phase, "rolled-back")) && pr__plan_sealed(c, pr);
	free(phase);
	return over;
}

/* The status shows a plan in flight that this store closed as done: the
 * booking its end made is in the store, and the status write saying so
 * was cut off (a crash): the plan's end is written from the store
 * (finish_recorded), with that booking. Not when the status names another
 * term than the one this store carried the plan in: another leader took
 * the plan over after this store's end (the atomic class forgets that end
 * and adopts the plan again: reopen_carried_on), and the rows this store
 * kept are its own stale decision - kept, they let this replica hand the
 * room the plan holds to another request (DST mixed seed 18592). */
static bool done_here_unwritten(const pr_ctl *c, const kube_provreq *pr)
{
	char *plan = pr_details_get(pr, PR_DETAIL_PLAN), *term = NULL, id[400];
	state_intent in;
	bool r = false;
	if(plan && pr_details_plan_open(pr)) {
		snprintf(id, sizeof(id), "%s#0", plan);
		if(state_intent_get(c->db, id, &in, NULL) == 0) {
			term = pr_details_get(pr, PR_DETAIL_TERM);
			r = in.phase == STATE_PHASE_DONE && !strcmp(term ? term : "", in.term ? in.term : "");
			state_intent_clear(&in);
		}
	}
	free(term);
	free(plan);
	return r;
}

/* The booking ledger first: every booking is entered there before its
 * status is written, so a live entry is at least as new as what the
 * status shows (a former leader's status write may still be on its way,
 * or lost). True when that settled the request's booking: rebuilt from
 * its entry, or this store's own live rows kept (below). */
static bool from_ledger(pr_ctl *c, const kube_provreq *pr)
{
	state_booking *rows = NULL, *have = NULL;
	size_t nrows = 0, nhave = 0, k;
	bool live_here = false;
	prd_err e;
	/* ... unless this store's live rows are the booking of a plan it
	 * closed as done, whose ledger and status writes a crash cut off
	 * (the plan's end, written again from the store, books it anew). Not
	 * merely rows newer than the entry: those may be this replica's own
	 * decision of an earlier term that was never written (another
	 * leader's is the one that holds). */
	if(state_booking_list_request(c->db, pr->meta.uid, &have, &nhave, NULL) == 0) {
		for(k = 0; k < nhave; k++)
			if(have[k].expires_ns > c->now)
				live_here = true;
		state_booking_list_free(have, nhave);
	}
	if(pr__ledger_entry_rows(c, pr->meta.uid, &rows, &nrows) == 0 && nrows && live_here &&
	   done_here_unwritten(c, pr)) {
		state_booking_list_free(rows, nrows);
		return true;
	}
	if(nrows && state_booking_set(c->db, pr->meta.uid, rows, nrows, rows[0].expires_ns, &e) == 0) {
		log_info("booking rebuilt from the booking ledger", "request", pr->meta.name, "namespace", pr->meta.ns,
			 "nodes", LOGI(nrows));
		state_booking_list_free(rows, nrows);
		return true;
	}
	state_booking_list_free(rows, nrows);
	return false;
}

/* The API is the truth (docs/design.md §7): a live booking the status records
 * (`text`, or NULL) replaces the local one (another replica may have
 * booked the request anew while this one did not lead: its old rows would
 * hold the wrong nodes and leave the right ones to be handed out twice).
 * True when the live local booking stays: where the status records none
 * (the status write may be the one lost in a crash: the room is held
 * either way). Otherwise the local rows are dropped. */
static bool local_stays(pr_ctl *c, const kube_provreq *pr, const char *text, bool ledger_read)
{
	state_booking *have = NULL;
	size_t nhave = 0, k;
	bool live = false;
	if(state_booking_list_request(c->db, pr->meta.uid, &have, &nhave, NULL) || !nhave)
		return false;
	for(k = 0; k < nhave; k++)
		live |= have[k].expires_ns > c->now;
	state_booking_list_free(have, nhave);
	/* ... unless the booking ledger, read for this rebuild, lists nothing
	 * for the request: every booking a status may show is entered there
	 * first, so the local rows are a booking another leader ended while
	 * this one did not lead (or one never announced). Held, it would keep
	 * room from a request booked there meanwhile. Kept all the same: the
	 * booking of a plan this store closed as done, whose end the status
	 * does not show yet (it is written from the store); dropped all the
	 * same: rows of a booking the status says is over. */
	if(live && !booking_over(c, pr) &&
	   ((!text && !(ledger_read && !pr__ledger_lists(c, pr->meta.uid))) || done_here_unwritten(c, pr)))
		return true;
	if(live && !text)
		log_info("dropped a local booking that neither the request's status nor the booking ledger records",
			 "request", pr->meta.name, "namespace", pr->meta.ns);
	state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
	return false;
}

/* The booking a status records ("set:node=pods,node=pods;set:..."), into
 * items (node names in the pass arena; caller frees *items). 0, or -1 when
 * the text is malformed or memory runs out. */
static int parse_booking_text(pr_world *w, const kube_provreq *pr, const char *text, pr_booked **items,
			      size_t *ni)
{
	size_t cap = 0;
	const char *p;
	for(p = text; *p;) {
		size_t set = 0;
		char *end;
		set = strtoul(p, &end, 10);
		if(*end != ':' || set >= pr->npod_sets)
			return -1;
		for(p = end + 1; *p && *p != ';';) {
			const char *eq = strchr(p, '='), *stop = p + strcspn(p, ",;");
			int64_t pods;
			char *nm;
			if(!eq || eq > stop || str_to_int64_n(eq + 1, (size_t)(stop - eq - 1), &pods) || pods <= 0)
				return -1;
			if(*ni == cap) {
				pr_booked *nv = realloc(*items, (cap = cap ? cap * 2 : 16) * sizeof(*nv));
				if(!nv)
					return -1;
				*items = nv;
			}
			(*items)[*ni].set = set;
			(*items)[*ni].pods = pods;
			nm = str_ndup(p, (size_t)(eq - p));
			(*items)[(*ni)++].node = nm ? arena_strdup(&w->ar, nm) : NULL;
			free(nm);
			if(!(*items)[*ni - 1].node)
				return -1;
			p = *stop == ',' ? stop + 1 : stop;
		}
		if(*p == ';')
			p++;
	}
	return 0;
}

/* Rebuild the local bookings of a request: from the booking ledger, else
 * from its status (a Provisioned request's, and the room a request with a
 * scale-up in flight holds). The ledger is asked only for this instance's
 * requests when the status does not say no booking can hold (a plan
 * rolling back, a request being deleted: their room went back, whatever
 * the entry, not yet removed, says): another shard's booking is read from
 * the ledger and its status on every pass, never from rows here (which
 * would hide its entry: pr__ledger_rows). */
static void rebuild_booking(pr_ctl *c, pr_world *w, const kube_provreq *pr, bool ledger_read)
{
	int64_t expires = recorded_booking_end(c, pr);
	char *text = NULL, missing[300];
	sched_podset *sets;
	pr_booked *items = NULL;
	size_t ni = 0;
	prd_err e;
	if(ledger_read && !booking_over(c, pr) && pr__shards_ours(c, pr) && from_ledger(c, pr))
		return;
	if(expires > c->now)
		text = pr_details_get(pr, PR_DETAIL_BOOKING);
	if(local_stays(c, pr, text, ledger_read) || !text)
		goto out;
	sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*sets));
	if(!sets || pr__resolve_podsets(w, pr, sets, missing, sizeof(missing), &e) ||
	   parse_booking_text(w, pr, text, &items, &ni))
		goto out;
	if(pr__store_bookings(c, pr, sets, items, ni, expires, NULL, NULL, 0, &e) == 0)
		log_info("booking rebuilt from the request's status", "request", pr->meta.name, "namespace", pr->meta.ns,
			 "nodes", LOGI(ni));
out:
	free(items);
	free(text);
}

/* A node-group backoff the last leader recorded with a failed scale-up. */
static void rebuild_group_backoff(pr_ctl *c, const kube_provreq *pr)
{
	char *v = pr_details_get(pr, PR_DETAIL_GROUP_BACKOFF), group[256], when[64];
	long long failures = 0;
	int64_t until = 0;
	if(v && sscanf(v, "%255s %63s %lld", group, when, &failures) == 3 && pr_details_time(when, &until) &&
	   state_group_restore(c->db, group, failures, until, "recorded by the previous leader", NULL) == 0 &&
	   until > c->now)
		log_info("node-group backoff rebuilt from a request's status", "group", group, "request", pr->meta.name);
	free(v);
}

/* Attempts and the next attempt, as the last leader recorded them. */
static void rebuild_attempts(pr_ctl *c, const kube_provreq *pr)
{
	char *a = pr_details_get(pr, PR_DETAIL_ATTEMPTS), *n = pr_details_get(pr, PR_DETAIL_NEXT_ATTEMPT);
	int64_t attempts = 0, next = 0;
	state_request rs;
	if(a && n && str_to_int64(a, &attempts) == 0 && pr_details_time(n, &next) && attempts > 0 &&
	   state_request_ensure(c->db, pr->meta.uid, pr->meta.ns, pr->meta.name, &rs, NULL) == 0) {
		if(rs.attempts < attempts) {
			rs.attempts = attempts;
			rs.next_attempt_ns = next;
			state_request_put(c->db, &rs, NULL);
		}
		state_request_clear(&rs);
	}
	free(a);
	free(n);
}

int pr__rebuild_from_api(pr_ctl *c, pr_world *w)
{
	size_t i;
	bool ledger_read = false;
	prd_err e;
	int rc;
	if(!c->db)
		return 0;
	if(c->ledger.on) {
		/* Read, and written with this term noted first: a booking a
		 * former leader decided on an earlier version is refused from
		 * now on, and every one it made is in what was read. */
		if((rc = pr__ledger_fence(c, &e))) {
			log_warn("cannot write the booking ledger for this leader term; the pass acts on nothing until it "
				 "can",
				 "error", e.msg);
			return rc;
		}
		ledger_read = true;
	}
	for(i = 0; i < w->nprs; i++) {
		if(!pr__module_for(c, w->prs[i]->class_name))
			continue;
		rebuild_booking(c, w, w->prs[i], ledger_read);
		rebuild_attempts(c, w->prs[i]);
		rebuild_group_backoff(c, w->prs[i]);
	}
	log_info("local state rebuilt from the apiserver", "requests", LOGI(w->nprs));
	return 0;
}

void pr__rebuild_on_new_term(pr_ctl *c, pr_world *w)
{
	if(!c->need_rebuild || !c->db || c->fenced)
		return;
	if(pr__rebuild_from_api(c, w)) {
		c->fenced = true;
		pr__wake_at(c, c->now + PRD_NS_PER_SEC);
	} else {
		c->need_rebuild = false;
		w->term_began = true;
	}
}

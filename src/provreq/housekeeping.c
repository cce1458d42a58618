/* The housekeeping stage: what keeps the controller's memory and the
 * store bounded, and the figures it exports (see docs/development.md, "The
 * pass"). Entry point: pr__housekeeping.
 *
 * Reads: the world's requests, the local store's request rows and row
 * counts, the kept requests (c->prs) for the gauges.
 * Writes: at most once a minute and only in a pass that may act, the
 * store pruned (rows and bookings of vanished requests, closed plans past
 * cfg.state_retention_ns) and the controller's per-uid memory of vanished
 * requests forgotten (c->written, c->unowned, dirty.c's); the requests'
 * and state rows' gauges; the end of the pass for dirty.c
 * (pr__dirty_done). */
#include "provreq/ctl_int.h"
#include "ops/log.h"
#include "ops/metrics.h"

#include <stdio.h>
#include <string.h>

/* The state a request is in, for the requests gauge. */
static const char *pr_state(const kube_provreq *pr)
{
	if(pr_cond_true(pr, PR_COND_FAILED))
		return PR_COND_FAILED;
	if(pr_cond_true(pr, PR_COND_REVOKED))
		return PR_COND_REVOKED;
	if(pr_cond_true(pr, PR_COND_BOOKING_EXPIRED))
		return PR_COND_BOOKING_EXPIRED;
	if(pr_cond_true(pr, PR_COND_PROVISIONED))
		return PR_COND_PROVISIONED;
	if(pr_cond_true(pr, PR_COND_ACCEPTED))
		return PR_COND_ACCEPTED;
	return "Pending";
}

/* A node group that is gone (deleted, or no longer listed by its driver)
 * takes its series with it: a dashboard of group sizes must not show a
 * group that no longer exists at its last size. Only when every driver
 * listed its groups (a driver that could not list them says nothing of
 * its groups). c->groups_exported holds the groups of the last pass
 * that listed them all. */
static void forget_gone_groups(pr_ctl *c, const pr_world *w)
{
	static const int fams[] = { M_NODEGROUP_SIZE, M_NODEGROUP_TARGET,  M_NODEGROUP_MIN,   M_NODEGROUP_MAX,
				    M_NODEGROUP_BACKOFF, M_SCALE_DOWNS, M_FOREIGN_INSTANCES, M_SCALEUPS,
				    M_PLAN_CONFLICTS };
	hmap now, *was = &c->groups_exported;
	hmap_iter it;
	const char *id;
	size_t i, f;
	if(w->groups_incomplete)
		return;
	hmap_init(&now, NULL);
	for(i = 0; i < w->ngroups; i++)
		if(hmap_put(&now, w->groups[i].id, NULL)) {
			hmap_free(&now);
			return;
		}
	hmap_iter_init(&it, was);
	while(hmap_iter_next(&it, &id, NULL))
		if(!hmap_has(&now, id))
			for(f = 0; f < sizeof(fams) / sizeof(fams[0]); f++)
				metrics_remove_where(fams[f], 0, id);
	hmap_free(was);
	*was = now;
}

/* Gauges recomputed every pass from what the pass read (the conditions as
 * they were at the start of the pass) and from the node groups. */
static void export_gauges(pr_ctl *c, pr_world *w)
{
	static const char *const states[] = { "Pending", PR_COND_ACCEPTED, PR_COND_PROVISIONED, PR_COND_FAILED,
					      PR_COND_BOOKING_EXPIRED, PR_COND_REVOKED };
	const pr_class_module *const *mods;
	size_t nm = pr_class_modules(c->classes, &mods), i, k, s;
	double (*counts)[6] = arena_array(&w->ar, nm + 1, sizeof(*counts));
	double *booked = arena_array(&w->ar, nm + 1, sizeof(*booked));
	if(!counts || !booked)
		return;
	/* The requests' gauges change only when a request did. */
	bool recount = !(w->prs_kept && c->gauges_valid && c->gauges_gen == c->prs_gen);
	c->gauges_valid = w->prs_kept;
	c->gauges_gen = c->prs_gen;
	for(i = 0; recount && i < w->nprs; i++) {
		const pr_class_module *m = pr__module_for(c, w->prs[i]->class_name);
		const char *st;
		if(!m)
			continue;
		for(k = 0; k < nm && mods[k] != m; k++)
			;
		st = pr_state(w->prs[i]);
		for(s = 0; s < 6; s++)
			if(!strcmp(states[s], st))
				counts[k][s]++;
		if(!strcmp(st, PR_COND_PROVISIONED))
			booked[k]++;
	}
	for(k = 0; recount && k < nm; k++) {
		const char *cn = mods[k]->short_name;
		for(s = 0; s < 6; s++)
			metrics_gauge_set(M_REQUESTS, METRICS_L(cn, states[s]), counts[k][s]);
		metrics_gauge_set(M_BOOKINGS, METRICS_L(cn), booked[k]);
	}
	/* Listing instances costs a cloud call per group: refresh the size
	 * gauge at most every 15 s. */
	bool sizes = c->now >= c->sizes_exported + 15 * PRD_NS_PER_SEC;
	if(sizes)
		c->sizes_exported = c->now;
	for(i = 0; i < w->ngroups; i++) {
		pr_group *g = &w->groups[i];
		if(sizes) {
			size_t j, live = 0;
			if(pr_group_list(g, NULL) == 0) {
				for(j = 0; j < g->ninst; j++)
					live += g->inst[j].state != PRD_CLOUD_INSTANCE_DELETING;
				metrics_gauge_set(M_NODEGROUP_SIZE, METRICS_L(g->id), (double)live);
			}
		}
		metrics_gauge_set(M_NODEGROUP_TARGET, METRICS_L(g->id), g->target);
		metrics_gauge_set(M_NODEGROUP_MIN, METRICS_L(g->id), g->min);
		metrics_gauge_set(M_NODEGROUP_MAX, METRICS_L(g->id), g->max);
		metrics_gauge_set(M_NODEGROUP_BACKOFF, METRICS_L(g->id), g->backed_off && g->backoff_until > c->now);
	}
	forget_gone_groups(c, w);
}

/* Drop what only vanished requests used: their state rows and bookings
 * (the state store), and the controller's own per-uid memory. */
static size_t prune_vanished(pr_ctl *c, const pr_world *w)
{
	state_request *rows = NULL;
	size_t n = 0, i, gone = 0;
	if(c->db && state_request_list(c->db, &rows, &n, NULL) == 0) {
		for(i = 0; i < n; i++) {
			if(hmap_has(&w->uids, rows[i].uid))
				continue;
			if(state_request_delete(c->db, rows[i].uid, NULL) == 0)
				gone++;
			state_booking_delete_request(c->db, rows[i].uid, NULL, NULL);
		}
		state_request_list_free(rows, n);
	}
	pr__forget_vanished(&c->written, &w->uids);
	pr__forget_vanished(&c->unowned, &w->uids);
	{
		hmap keys;
		bool ok = true;
		hmap_init(&keys, NULL);
		for(i = 0; i < w->nprs && ok; i++) {
			char k[600];
			snprintf(k, sizeof(k), "%s/%s", w->prs[i]->meta.ns, w->prs[i]->meta.name);
			ok = hmap_put(&keys, k, NULL) == 0;
		}
		if(ok)
			pr__dirty_prune(c, &keys);
		hmap_free(&keys);
	}
	return gone;
}

/* Keep the state store bounded, at most once a minute: rows of requests
 * that no longer exist (deleted by Kueue, a user or a namespace deletion)
 * and closed scale-up plans older than the retention period; then export
 * the row counts. */
static void prune_state(pr_ctl *c, const pr_world *w)
{
	int64_t counts[STATE_NTABLES];
	size_t vanished, plans = 0, i;
	if(c->pruned_at && c->now < c->pruned_at + PR_PRUNE_EVERY_NS)
		return;
	c->pruned_at = c->now;
	vanished = prune_vanished(c, w);
	if(c->db && c->cfg.state_retention_ns > 0)
		state_intent_prune(c->db, c->now - c->cfg.state_retention_ns, &plans, NULL);
	if(vanished || plans)
		log_info("pruned the state store", "vanished_requests", LOGI(vanished), "closed_plans", LOGI(plans));
	if(c->db && state_row_counts(c->db, counts, NULL) == 0)
		for(i = 0; i < STATE_NTABLES; i++)
			metrics_gauge_set(M_STATE_ROWS, METRICS_L(state_tables[i]), (double)counts[i]);
}

void pr__housekeeping(pr_ctl *c, pr_world *w)
{
	if(!c->fenced)
		prune_state(c, w);
	json_object_put(c->details);
	c->details = NULL;
	export_gauges(c, w);
	pr__dirty_done(c, !c->fenced);
}

/* The atomic scale-up class (best-effort-atomic-scale-up.autoscaling.x-k8s.io):
 * pods that fit existing nodes are placed first; for the rest one node
 * group that fits all of them is chosen (estimator + expander), the plan is
 * written to the state store before the cloud is called, and the nodes are
 * waited for until Ready, or everything the plan made is rolled back. */
#include "kube/quantity.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/ctl_int.h"
#include "sched/estimator.h"
#include "sched/expander.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The plan as provisioningClassDetails: kept by the apiserver, so a
 * replica that takes over the lease (with its own, empty state store) can
 * adopt the plan instead of starting another scale-up. NULL on failure. */
static json_object *plan_details(pr_ctl *c, const char *plan)
{
	state_intent in;
	json_object *d;
	char ts[RFC3339_MAX];
	buf b;
	size_t i;
	if(state_intent_get(c->db, plan, &in, NULL))
		return NULL;
	d = json_object_new_object();
	buf_init(&b);
	for(i = 0; i < in.n_nodes; i++) {
		if(i)
			buf_append_char(&b, ',');
		buf_append_str(&b, in.nodes[i]);
	}
	rfc3339_format(in.deadline_ns, ts, sizeof(ts));
	if(d && !b.failed) {
		char delta[32];
		snprintf(delta, sizeof(delta), "%lld", (long long)in.delta);
		json_object_object_add(d, PR_DETAIL_PLAN, json_object_new_string(plan));
		json_object_object_add(d, PR_DETAIL_GROUP, json_object_new_string(in.node_group));
		json_object_object_add(d, PR_DETAIL_DELTA, json_object_new_string(delta));
		json_object_object_add(d, PR_DETAIL_NODES, json_object_new_string(buf_str(&b)));
		json_object_object_add(d, PR_DETAIL_DEADLINE, json_object_new_string(ts));
	}
	buf_free(&b);
	state_intent_clear(&in);
	return d;
}

/* A request whose status names a plan in progress that this replica's
 * state store does not know (written by the previous leader): adopt it,
 * so it is finished or rolled back here, never started again. */
void pr__adopt_plan(pr_ctl *c, const kube_provreq *pr)
{
	const char *plan = NULL, *group = NULL, *nodes = NULL, *deadline = NULL, *delta = NULL;
	const kube_condition *prov = pr_cond(pr, PR_COND_PROVISIONED);
	state_intent in, have;
	int64_t dl = 0, d = 0;
	size_t i;
	prd_err e;
	if(!c->db || !prov || !prov->reason || strcmp(prov->reason, PR_R_SCALING_UP))
		return;
	for(i = 0; i < pr->nclass_details; i++) {
		const char *k = pr->class_details[i].key, *v = pr->class_details[i].value;
		if(!strcmp(k, PR_DETAIL_PLAN)) plan = v;
		else if(!strcmp(k, PR_DETAIL_GROUP)) group = v;
		else if(!strcmp(k, PR_DETAIL_NODES)) nodes = v;
		else if(!strcmp(k, PR_DETAIL_DEADLINE)) deadline = v;
		else if(!strcmp(k, PR_DETAIL_DELTA)) delta = v;
	}
	if(!plan || !group || !nodes || !deadline || !delta || rfc3339_parse(deadline, &dl, NULL) ||
	   str_to_int64(delta, &d) || d <= 0)
		return;
	if(state_intent_get(c->db, plan, &have, NULL) == 0) {
		state_intent_clear(&have);
		return;   /* known here already, open or closed */
	}
	memset(&in, 0, sizeof(in));
	in.plan_id = (char *)plan;
	in.request_uid = (char *)pr->meta.uid;
	in.node_group = (char *)group;
	in.delta = d;
	in.deadline_ns = dl;
	in.phase = STATE_PHASE_PLANNED;
	if(state_intent_begin(c->db, &in, &e)) {
		log_error("cannot adopt the scale-up plan of the previous leader", "request", pr->meta.name,
			  "plan", plan, "error", e.msg);
		return;
	}
	while(*nodes) {
		const char *comma = strchr(nodes, ',');
		size_t len = comma ? (size_t)(comma - nodes) : strlen(nodes);
		char *n = str_ndup(nodes, len);
		if(n && *n)
			state_intent_add_node(c->db, plan, n, NULL);
		free(n);
		nodes = comma ? comma + 1 : nodes + len;
	}
	state_intent_set_known(c->db, plan, "", NULL);
	state_intent_advance(c->db, plan, STATE_PHASE_INCREASING, NULL, NULL);
	state_intent_advance(c->db, plan, STATE_PHASE_WAITING_FOR_NODES, NULL, NULL);
	log_info("adopted the scale-up plan of the previous leader", "request", pr->meta.name, "namespace",
		 pr->meta.ns, "plan", plan, "group", group);
}

/* Store the group's instance names (newline-separated) with the plan. */
static int record_known(pr_ctl *c, const char *plan, const hmap *names, prd_err *err)
{
	hmap_iter it;
	const char *name;
	buf b;
	int rc;
	buf_init(&b);
	hmap_iter_init(&it, names);
	while(hmap_iter_next(&it, &name, NULL)) {
		buf_append_str(&b, name);
		buf_append_char(&b, '\n');
	}
	if(b.failed)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	rc = state_intent_set_known(c->db, plan, buf_str(&b), err);
	buf_free(&b);
	return rc;
}

/* Start an atomic scale-up: choose a group that fits every remaining pod,
 * record the plan, ask the cloud, remember the nodes it created. */
void pr__start_scale_up(pr_ctl *c, pr_world *w, const kube_provreq *pr, const pr_params *pp,
			   sched_podset *sets, pr_conds *conds)
{
	sched_place_result existing;
	sched_podset *rest;
	sched_option *opts;
	size_t *gidx, nopt = 0, i, best;
	char why[1024] = "", msg[1600], plan[128];
	size_t wl = 0;
	prd_err e;
	int64_t remaining = 0;

	memset(&existing, 0, sizeof(existing));
	rest = arena_array(&w->ar, pr->npod_sets, sizeof(*rest));
	opts = arena_array(&w->ar, w->ngroups + 1, sizeof(*opts));
	gidx = arena_array(&w->ar, w->ngroups + 1, sizeof(*gidx));
	if(!rest || !opts || !gidx)
		return;
	/* Pods that fit existing nodes are placed first (in a fork: they only
	 * decide what is left for new nodes). */
	if(sched_snapshot_fork(w->snap) || sched_place(w->snap, sets, pr->npod_sets, &existing, &e)) {
		sched_snapshot_revert(w->snap);
		snprintf(msg, sizeof(msg), "cannot simulate the pods: %s", e.msg);
		pr__not_provisioned(c, pr, pp, conds, PR_R_CHECK_FAILED, msg);
		sched_place_result_free(&existing);
		return;
	}
	for(i = 0; i < pr->npod_sets; i++) {
		rest[i] = sets[i];
		rest[i].count = sets[i].count - existing.sets[i].placed;
		remaining += rest[i].count;
	}
	if(remaining == 0) {
		/* Everything fits already: book it as check-capacity would. */
		if(pr__book_placement(c, w, pr, sets, pr->npod_sets, &existing, &e) == 0) {
			sched_snapshot_commit(w->snap);
			pr__set_cond(c, pr, conds, PR_COND_PROVISIONED, "True", PR_R_PROVISIONED,
				 "capacity for all pods already exists; no scale-up was needed");
			pr__wake_at(c, c->now + c->cfg.booking_ttl_ns);
		} else {
			sched_snapshot_revert(w->snap);
			pr__not_provisioned(c, pr, pp, conds, PR_R_BOOK_FAILED, e.msg);
		}
		sched_place_result_free(&existing);
		return;
	}
	for(i = 0; i < w->ngroups; i++) {
		pr_group *g = &w->groups[i];
		sched_est_limits lim;
		sched_est_result est;
		size_t k;
		memset(&est, 0, sizeof(est));
		if(!g->has_tmpl || g->busy || g->backed_off) {
			wl += (size_t)snprintf(why + wl, wl < sizeof(why) ? sizeof(why) - wl : 0, "%s%s: %s", wl ? "; " : "",
					       g->id, !g->has_tmpl ? "no template" : g->busy ? "scale-up in progress"
											   : "backed off");
			continue;
		}
		lim.group_room = g->max > g->target ? g->max - g->target : 0;
		lim.max_nodes_total = c->cfg.max_nodes_total;
		lim.cluster_nodes = (int64_t)w->nnodes;
		lim.max_new_nodes = c->cfg.max_nodes_per_scaleup;
		if(sched_estimate(w->snap, &g->tmpl, rest, pr->npod_sets, &lim, &est, &e)) {
			wl += (size_t)snprintf(why + wl, wl < sizeof(why) ? sizeof(why) - wl : 0, "%s%s: %s",
					       wl ? "; " : "", g->id, e.msg);
			continue;
		}
		if(!est.place.fits_all) {
			wl += (size_t)snprintf(why + wl, wl < sizeof(why) ? sizeof(why) - wl : 0,
					       "%s%s: %lld of %lld pods fit%s", wl ? "; " : "", g->id,
					       (long long)est.place.placed, (long long)est.place.requested,
					       est.limited_by == SCHED_EST_GROUP_MAX ? " within the group's max size"
					       : est.limited_by == SCHED_EST_TOTAL_MAX ? " within max-nodes-total"
					       : est.limited_by == SCHED_EST_SCALEUP_MAX ? " within max-nodes-per-scaleup"
					       : " on its template node");
			sched_est_result_free(&est);
			continue;
		}
		opts[nopt].group_id = g->id;
		opts[nopt].fits_all = true;
		opts[nopt].node_count = est.new_nodes;
		opts[nopt].pods = est.place.placed;
		for(k = 0; k < g->tmpl.n_allocatable; k++) {
			if(!strcmp(g->tmpl.allocatable[k].name, "cpu"))
				opts[nopt].node_cpu = g->tmpl.allocatable[k].value;
			if(!strcmp(g->tmpl.allocatable[k].name, "memory"))
				opts[nopt].node_memory = g->tmpl.allocatable[k].value;
		}
		for(k = 0; k < pr->npod_sets; k++) {
			size_t r;
			for(r = 0; r < rest[k].pod->n_requests; r++) {
				if(!strcmp(rest[k].pod->requests[r].name, "cpu"))
					opts[nopt].req_cpu += rest[k].pod->requests[r].value * rest[k].count;
				if(!strcmp(rest[k].pod->requests[r].name, "memory"))
					opts[nopt].req_memory += rest[k].pod->requests[r].value * rest[k].count;
			}
		}
		gidx[nopt++] = i;
		sched_est_result_free(&est);
	}
	sched_snapshot_revert(w->snap);
	sched_place_result_free(&existing);
	if(!nopt || sched_expander_choose(c->expander, opts, nopt, &best, &e)) {
		snprintf(msg, sizeof(msg), "no node group can provide all %lld pods that do not fit existing nodes%s%s",
			 (long long)remaining, w->ngroups ? ": " : " (no node groups are configured)", why);
		pr__not_provisioned(c, pr, pp, conds, PR_R_NOT_FOUND, msg);
		return;
	}
	{
		pr_group *g = &w->groups[gidx[best]];
		state_intent in;
		prd_cloud_error de;
		hmap before, after;
		hmap_iter it;
		const char *name;
		int64_t delta = opts[best].node_count;
		int rc;

		memset(&in, 0, sizeof(in));
		snprintf(plan, sizeof(plan), "%s/%lld", pr->meta.uid, (long long)c->now);
		in.plan_id = plan;
		in.request_uid = (char *)pr->meta.uid;
		in.node_group = g->id;
		in.delta = delta;
		in.target_before = g->target;
		in.phase = STATE_PHASE_PLANNED;
		in.deadline_ns = c->now + c->cfg.provision_timeout_ns;
		/* The plan is on disk before the cloud is touched. */
		if(!c->db || state_intent_begin(c->db, &in, &e)) {
			snprintf(msg, sizeof(msg), "cannot record the scale-up plan: %s", c->db ? e.msg : "no state store");
			pr__not_provisioned(c, pr, pp, conds, PR_R_SCALE_UP_FAILED, msg);
			return;
		}
		hmap_init(&before, NULL);
		hmap_init(&after, NULL);
		/* What the group had before the call goes on disk with the plan:
		 * after a crash during the call, anything else is ours. */
		if(pr__group_instances(g, &before, NULL, &e) || record_known(c, plan, &before, &e) ||
		   state_intent_advance(c->db, plan, STATE_PHASE_INCREASING, NULL, &e)) {
			state_intent_close(c->db, plan, STATE_PHASE_ROLLED_BACK, e.msg, NULL);
			hmap_free(&before);
			hmap_free(&after);
			snprintf(msg, sizeof(msg), "cannot start the scale-up of %s: %s", g->id, e.msg);
			pr__not_provisioned(c, pr, pp, conds, PR_R_SCALE_UP_FAILED, msg);
			return;
		}
		memset(&de, 0, sizeof(de));
		c->stats.scaleups_started++;
		metrics_counter_add(M_SCALEUPS, METRICS_L(g->id, "attempted"), 1);
		rc = g->drv->api->atomic_increase_size
			? g->drv->api->atomic_increase_size(g->drv->state, g->id, (int32_t)delta, &de)
			: g->drv->api->increase_size(g->drv->state, g->id, (int32_t)delta, &de);
		/* Whatever happened, remember every node the call created so a
		 * rollback removes exactly those. */
		pr__group_instances(g, &after, NULL, NULL);
		hmap_iter_init(&it, &after);
		while(hmap_iter_next(&it, &name, NULL))
			if(!hmap_has(&before, name))
				state_intent_add_node(c->db, plan, name, NULL);
		hmap_free(&before);
		hmap_free(&after);
		g->busy = true;
		if(rc) {
			cloud_driver_error(g->drv, "increase size", rc, &de, &e);
			state_intent_advance(c->db, plan, STATE_PHASE_ROLLING_BACK, e.msg, NULL);
			log_warn("scale-up failed; rolling back", "group", g->id, "request", pr->meta.name, "error", e.msg);
			pr__wake_at(c, c->now + 1);
		} else {
			state_intent_advance(c->db, plan, STATE_PHASE_WAITING_FOR_NODES, NULL, NULL);
			pr__wake_at(c, in.deadline_ns);
			c->details = plan_details(c, plan);
		}
		snprintf(msg, sizeof(msg), "scaling node group %s up by %lld node%s for %lld pods", g->id,
			 (long long)delta, delta == 1 ? "" : "s", (long long)remaining);
		pr__set_cond(c, pr, conds, PR_COND_PROVISIONED, "False", PR_R_SCALING_UP, msg);
	}
}

/* Names in `live` that are not lines of `known`, copied into a new array
 * *out (caller frees each and the array). Returns how many. */
static size_t unrecorded_nodes(const hmap *live, const char *known, char ***out)
{
	hmap kn;
	hmap_iter it;
	const char *name, *p = known ? known : "";
	size_t n = 0;
	char **v = calloc(hmap_len(live) + 1, sizeof(*v));
	*out = v;
	if(!v)
		return 0;
	hmap_init(&kn, NULL);
	while(*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *k = str_ndup(p, len);
		if(k) {
			hmap_put(&kn, k, NULL);
			free(k);
		}
		p = nl ? nl + 1 : p + len;
	}
	hmap_iter_init(&it, live);
	while(hmap_iter_next(&it, &name, NULL))
		if(!hmap_has(&kn, name) && (v[n] = str_dup(name)) != NULL)
			n++;
	hmap_free(&kn);
	return n;
}

/* Delete what a plan created, close it rolled back, back the group off. */
void pr__roll_back(pr_ctl *c, pr_world *w, const state_intent *in, const char *cause)
{
	pr_group *g = pr__find_group(w, in->node_group);
	const char **names = NULL;
	char **extra = NULL;
	size_t i, n = 0, nextra = 0;
	hmap live;
	prd_err e;

	state_intent_advance(c->db, in->plan_id, STATE_PHASE_ROLLING_BACK, cause, NULL);
	if(!g) {
		log_error("rollback: node group is gone; nothing to delete", "group", in->node_group);
		goto closed;
	}
	hmap_init(&live, NULL);
	if(pr__group_instances(g, &live, NULL, &e)) {
		log_error("rollback: cannot list the group's instances; retrying", "group", g->id, "error", e.msg);
		pr__wake_at(c, c->now + 10 * PRD_NS_PER_SEC);
		hmap_free(&live);
		return;
	}
	/* Interrupted during the cloud call: the call's nodes were never
	 * recorded, but everything the group did not have before it is the
	 * plan's. Record them first, so a retry of this rollback finds them
	 * even after the phase moved on. */
	if(in->phase == STATE_PHASE_INCREASING) {
		nextra = unrecorded_nodes(&live, in->known_before, &extra);
		for(i = 0; i < nextra; i++)
			state_intent_add_node(c->db, in->plan_id, extra[i], NULL);
	}
	names = calloc(in->n_nodes + nextra + 1, sizeof(*names));
	if(!names) {
		hmap_free(&live);
		goto out;
	}
	/* Each live node of the plan once (hmap_take removes it from live). */
	for(i = 0; i < in->n_nodes + nextra; i++) {
		const char *nm = i < in->n_nodes ? in->nodes[i] : extra[i - in->n_nodes];
		if(hmap_has(&live, nm)) {
			hmap_take(&live, nm);
			names[n++] = nm;
		}
	}
	hmap_free(&live);
	if(n) {
		prd_cloud_error de;
		memset(&de, 0, sizeof(de));
		if(g->drv->api->delete_nodes(g->drv->state, g->id, names, n, &de)) {
			cloud_driver_error(g->drv, "delete nodes", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
			log_error("rollback could not delete nodes; retrying", "group", g->id, "error", e.msg);
			pr__wake_at(c, c->now + 10 * PRD_NS_PER_SEC);
			goto out;
		}
	}
closed:
	state_intent_close(c->db, in->plan_id, STATE_PHASE_ROLLED_BACK, cause, NULL);
	state_group_fail(c->db, in->node_group, cause, NULL, NULL);
	c->stats.scaleups_rolled_back++;
	metrics_counter_add(M_SCALEUPS, METRICS_L(in->node_group, "rolled_back"), 1);
	log_warn("scale-up rolled back", "group", in->node_group, "plan", in->plan_id, "deleted", LOGI(n),
		 "cause", cause);
out:
	for(i = 0; i < nextra; i++)
		free(extra[i]);
	free(extra);
	free(names);
}

/* Drive an open intent one step. Returns true when the request's status
 * was decided here (caller writes it). */
void pr__progress_intent(pr_ctl *c, pr_world *w, const state_intent *in, const kube_provreq *pr,
			    const pr_params *pp, sched_podset *sets, pr_conds *conds)
{
	pr_group *g = pr__find_group(w, in->node_group);
	char msg[1200];
	size_t i, ready = 0, errored = 0;
	hmap live;

	if(g)
		g->busy = true;
	if(!pr || pr_is_terminal(pr)) {
		pr__roll_back(c, w, in, pr ? "the request finished before its nodes were ready" : "the request was deleted");
		return;
	}
	switch(in->phase) {
	case STATE_PHASE_PLANNED:
	case STATE_PHASE_INCREASING:
		/* A crash between writing the plan and recording the nodes: the
		 * cloud may or may not have acted. Roll back what is recorded,
		 * and let the request retry. */
		pr__roll_back(c, w, in, "provreqd restarted during the scale-up");
		pr__not_provisioned(c, pr, pp, conds, PR_R_SCALE_UP_FAILED,
				pp->no_retry ? "the scale-up was interrupted by a restart and rolled back"
					     : "the scale-up was interrupted by a restart and rolled back; it will be retried");
		return;
	case STATE_PHASE_ROLLING_BACK:
		pr__roll_back(c, w, in, in->last_error && in->last_error[0] ? in->last_error : "rollback resumed");
		snprintf(msg, sizeof(msg), "scale-up of %s failed and was rolled back: %s", in->node_group,
			 in->last_error && in->last_error[0] ? in->last_error : "unknown cause");
		pr__not_provisioned(c, pr, pp, conds, PR_R_SCALE_UP_FAILED, msg);
		return;
	case STATE_PHASE_WAITING_FOR_NODES:
		break;
	default:
		return;
	}
	hmap_init(&live, NULL);
	if(!g || pr__group_instances(g, &live, &errored, NULL)) {
		hmap_free(&live);
		if(c->now >= in->deadline_ns) {
			pr__roll_back(c, w, in, "the node group stopped answering");
			pr__not_provisioned(c, pr, pp, conds, PR_R_SCALE_UP_FAILED,
					"the node group stopped answering before its nodes were ready; rolled back");
		}
		return;
	}
	for(i = 0; i < in->n_nodes; i++) {
		void *state = hmap_get(&w->nodes_by_name, in->nodes[i]);
		uintptr_t cls = (uintptr_t)hmap_get(&live, in->nodes[i]);
		if(cls > 1)
			errored++;
		if(state == PR_NODE_USABLE)
			ready++;
	}
	hmap_free(&live);
	if(in->n_nodes < (size_t)in->delta || errored) {
		snprintf(msg, sizeof(msg), "the cloud provided %zu of %lld nodes in %s%s; rolled back", in->n_nodes - errored,
			 (long long)in->delta, in->node_group, errored ? " (out of resources)" : "");
		pr__roll_back(c, w, in, msg);
		pr__not_provisioned(c, pr, pp, conds, PR_R_SCALE_UP_FAILED, msg);
		return;
	}
	if(ready == in->n_nodes) {
		sched_place_result res;
		prd_err e;
		memset(&res, 0, sizeof(res));
		/* Every node is Ready: place the pods for real and book. */
		if(sched_snapshot_fork(w->snap) == 0 && sched_place(w->snap, sets, pr->npod_sets, &res, &e) == 0 &&
		   res.fits_all && pr__book_placement(c, w, pr, sets, pr->npod_sets, &res, &e) == 0) {
			sched_snapshot_commit(w->snap);
			state_intent_close(c->db, in->plan_id, STATE_PHASE_DONE, NULL, NULL);
			state_group_success(c->db, in->node_group, NULL);
			c->stats.scaleups_succeeded++;
			metrics_counter_add(M_SCALEUPS, METRICS_L(in->node_group, "succeeded"), 1);
			snprintf(msg, sizeof(msg), "%lld new node%s in %s are ready; capacity for all pods is booked",
				 (long long)in->delta, in->delta == 1 ? "" : "s", in->node_group);
			pr__set_cond(c, pr, conds, PR_COND_PROVISIONED, "True", PR_R_PROVISIONED, msg);
			pr__wake_at(c, c->now + c->cfg.booking_ttl_ns);
		} else {
			sched_snapshot_revert(w->snap);
			snprintf(msg, sizeof(msg), "the new nodes in %s are ready but the pods do not fit them: %s",
				 in->node_group, res.fits_all ? e.msg : "capacity was taken by other pods");
			pr__roll_back(c, w, in, msg);
			pr__not_provisioned(c, pr, pp, conds, PR_R_SCALE_UP_FAILED, msg);
		}
		sched_place_result_free(&res);
		return;
	}
	if(c->now >= in->deadline_ns) {
		snprintf(msg, sizeof(msg), "only %zu of %zu new nodes in %s became ready within %llds; rolled back", ready,
			 in->n_nodes, in->node_group, (long long)(c->cfg.provision_timeout_ns / PRD_NS_PER_SEC));
		pr__roll_back(c, w, in, msg);
		pr__not_provisioned(c, pr, pp, conds, PR_R_SCALE_UP_FAILED, msg);
		return;
	}
	pr__wake_at(c, in->deadline_ns);
	/* Poll again soon: nodes come Ready in seconds. */
	pr__wake_at(c, c->now + 2 * PRD_NS_PER_SEC);
}

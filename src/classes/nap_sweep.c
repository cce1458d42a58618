/* Node auto-provisioning's clean-up: deleting empty auto-provisioned groups, forgetting the records of gone ones. */
#include "classes/nap_int.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/str.h"
#include "classes/details.h"
#include "classes/vocab.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAP_RETRY_NS (5 * AT_NS_PER_S)

/* ---- deleting empty groups -------------------------------------------- */

/* Did plan `plan_id` end without success (rolled back, or closed before
 * the cloud took it)? */
static bool plan_rolled_back(const pr_class_host *h, const char *plan_id)
{
	at_plan p;
	bool open = false, done = false;
	size_t i;
	if(!plan_id || !plan_id[0] || !at_plan_id_open(h, plan_id, &open) || open)
		return false;
	memset(&p, 0, sizeof(p));
	if(!at_plan_all(h, plan_id, &p)) {
		at_plan_free(&p);
		return false;
	}
	for(i = 0; i < p.n; i++)
		done = done || p.v[i].phase == STATE_PHASE_DONE;
	at_plan_free(&p);
	return !done;
}

static bool plan_open(const pr_class_host *h, const char *plan_id)
{
	bool open = false;
	return plan_id && plan_id[0] && at_plan_id_open(h, plan_id, &open) && open;
}

/* Ask the driver to delete the group (refused unless it is empty); true
 * when it is gone (its record is then forgotten). */
static bool delete_group(const pr_class_host *h, cloud_driver *drv, const char *id, const char *why)
{
	prd_cloud_error de;
	prd_err e;
	int rc;
	if(!h->may_act(h->ctx))
		return false;
	memset(&de, 0, sizeof(de));
	rc = drv->api->delete_group(drv->state, id, &de);
	de.message[sizeof(de.message) - 1] = '\0';
	if(rc == 0) {
		log_info("deleted an auto-provisioned node group", "group", id, "why", why);
		metrics_counter_add(M_SCALEUPS, METRICS_L(id, "group_deleted"), 1);
		if(state_nap_delete(h->db, id, &e))
			log_warn("cannot forget a deleted auto-provisioned group", "group", id, "error", e.msg);
		return true;
	}
	if(rc != PRD_CLOUD_ERANGE)
		log_warn("cannot delete an auto-provisioned node group; retrying", "group", id, "error", de.message);
	h->wake_at(h->ctx, h->now + NAP_RETRY_NS);
	return false;
}

/* A group this store has no record of (another replica made it, or the
 * store was lost): is the plan its owner token names over, as the API
 * tells? Its request is gone (deleted), or its status shows that plan
 * rolled back, or a later plan (the group's plan ended before it; the
 * group, empty, served nothing that is still booked). */
static bool owner_plan_over(const char *owner, const kube_provreq *const *prs, size_t nprs)
{
	char base[200], token[PR_OWNER_MAX];
	const char *dot = owner ? strchr(owner, '.') : NULL;
	size_t i, ulen;
	if(!dot || dot == owner || !prs)
		return false;
	ulen = (size_t)(dot - owner);
	for(i = 0; i < nprs; i++) {
		const kube_provreq *pr = prs[i];
		char *plan, *phase;
		bool over = false;
		if(strlen(pr->meta.uid) != ulen || strncmp(pr->meta.uid, owner, ulen))
			continue;
		plan = pr_details_get(pr, PR_DETAIL_PLAN);
		phase = pr_details_get(pr, PR_DETAIL_PHASE);
		if(plan && phase) {
			snprintf(base, sizeof(base), "%s#", plan);
			pr_owner_token(base, token);
			over = strncmp(owner, token, strlen(token)) || !strcmp(phase, "rolled-back");
		}
		free(plan);
		free(phase);
		return over;
	}
	/* Its request is gone: the plan ended with it (its own store rolled
	 * it back, or none will: the group is empty either way). */
	return true;
}

/* One listed auto-provisioned group. */
static void sweep_group(const pr_class_host *h, pr_class_group *g, const kube_provreq *const *prs, size_t nprs)
{
	json_object *o = nap__record_get(h->db, g->id);
	int64_t since;
	prd_err e;
	if(g->busy || g->target_stale) {
		json_object_put(o);
		return;
	}
	if(!o && g->target == 0 && owner_plan_over(g->nap_owner, prs, nprs)) {
		delete_group(h, g->drv, g->id, "the plan that created it is over (the API says so)");
		return;
	}
	if(!o) {
		/* Made by another replica or before the store was lost: kept
		 * from now on like one of ours. */
		o = json_object_new_object();
		json_object_object_add(o, "driver", json_object_new_string(g->drv->api->name));
		json_object_object_add(o, "owner", json_object_new_string(g->nap_owner));
		json_object_object_add(o, "plan", json_object_new_string(""));
		json_object_object_add(o, "created", json_object_new_boolean(true));
		json_object_object_add(o, "emptySince", json_object_new_int64(0));
	}
	since = nap__jint(o, "emptySince");
	if(g->target > 0) {
		if(since) {
			json_object_object_add(o, "emptySince", json_object_new_int64(0));
			nap__put_record(h->db, g->id, o, &e);
		}
		json_object_put(o);
		return;
	}
	if(plan_rolled_back(h, nap__jstr(o, "plan"))) {
		json_object_put(o);
		delete_group(h, g->drv, g->id, "the plan that created it was rolled back");
		return;
	}
	if(!since) {
		json_object_object_add(o, "emptySince", json_object_new_int64(h->now));
		json_object_object_add(o, "created", json_object_new_boolean(true));
		nap__put_record(h->db, g->id, o, &e);
		since = h->now;
	}
	json_object_put(o);
	if(h->now >= since + h->limits->scale_down_idle_ns)
		delete_group(h, g->drv, g->id, "empty for the scale-down idle time");
	else
		h->wake_at(h->ctx, since + h->limits->scale_down_idle_ns);
}

void nap_sweep(const pr_class_host *h, const kube_provreq *const *prs, size_t nprs)
{
	state_nap *v = NULL;
	size_t n = 0, i, k;
	if(!h->db || !h->drivers || !h->may_act(h->ctx))
		return;
	for(i = 0; i < h->ngroups; i++)
		if(h->groups[i].nap_owner && cloud_driver_naps(h->groups[i].drv->api))
			sweep_group(h, &h->groups[i], prs, nprs);
	if(!h->groups_complete || state_nap_list(h->db, &v, &n, NULL))
		return;
	/* Records of groups the cloud did not list when the pass began: a
	 * plan that ended before creating its group, one that created it in
	 * this pass and rolled back, or a group gone. Once the plan is over
	 * the driver is asked to delete it (a group that is gone is no error,
	 * a created one must be empty), and the record goes with it. */
	for(i = 0; i < n; i++) {
		json_object *o;
		cloud_driver *drv;
		bool listed = false;
		for(k = 0; k < h->ngroups && !listed; k++)
			listed = !strcmp(h->groups[k].id, v[i].group_id);
		if(listed || !(o = json_tokener_parse(v[i].spec)))
			continue;
		drv = nap__jstr(o, "driver") ? cloud_drivers_find(h->drivers, nap__jstr(o, "driver")) : NULL;
		if(!plan_open(h, nap__jstr(o, "plan"))) {
			if(!drv || !cloud_driver_naps(drv->api)) {
				log_info("forgetting an auto-provisioned group whose driver is not loaded", "group",
					 v[i].group_id);
				state_nap_delete(h->db, v[i].group_id, NULL);
			} else {
				delete_group(h, drv, v[i].group_id,
					     nap__jbool(o, "created") ? "its plan ended and the cloud no longer lists it"
								 : "its plan ended before it was created");
			}
		}
		json_object_put(o);
	}
	state_nap_list_free(v, n);
}

/* The decide stage: every request of the pass, in order, through the
 * class registry (see docs/development.md, "The pass"). Entry point:
 * pr__decide.
 *
 * Reads: the world (requests, PodTemplates, node groups), the snapshot
 * (pr__snap), the local store's request rows and bookings, what earlier
 * passes left (c->written, dirty.c's memory).
 * Writes: each request's conditions and details, as status writes queued
 * for the write stage (pr__status_defer) and the node marks the classes
 * ask for; the local store's request rows and bookings; the class modules'
 * decisions (pass_begin, decide); a finished request past cfg.gc_after_ns
 * is deleted (gc_terminal); c->next_wake, and what each decision left for
 * dirty.c (pr__dirty_decided). */
#include "provreq/ctl_int.h"
#include "classes/details.h"
#include "classes/pclass.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/rfc3339.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t total_pods(const kube_provreq *pr)
{
	int64_t t = 0;
	size_t i;
	for(i = 0; i < pr->npod_sets; i++)
		t += pr->pod_sets[i].count;
	return t;
}

/* The nodes of the booking the request's status records ("set:node=pods,
 * ...;set:...") that are gone: what the local rows say when an earlier
 * pass deleted them but the status that ended the booking was not written
 * (the room is then held from the status, pr__shards_book). */
static size_t status_nodes_gone(const pr_world *w, const kube_provreq *pr)
{
	char *text = pr_details_get(pr, PR_DETAIL_BOOKING), *p, *tok, *save = NULL;
	size_t gone = 0;
	if(!text)
		return 0;
	for(tok = strtok_r(text, ",;", &save); tok; tok = strtok_r(NULL, ",;", &save)) {
		char *eq = strchr(tok, '=');
		if((p = strchr(tok, ':')) && (!eq || p < eq))
			tok = p + 1;
		if(eq)
			*eq = '\0';
		if(*tok && !hmap_has(w->nodes_by_name, tok))
			gone++;
	}
	free(text);
	return gone;
}

static void track_booking(pr_ctl *c, pr_world *w, const kube_provreq *pr, pr_conds *conds)
{
	const kube_condition *prov = pr_cond(pr, PR_COND_PROVISIONED);
	int64_t expires = prov->last_transition_ns + c->cfg.booking_ttl_ns, scheduled = 0, want = total_pods(pr);
	state_booking *b = NULL;
	size_t nb = 0, i, gone = 0;
	char msg[512];
	{
		char key[600];
		snprintf(key, sizeof(key), "%s/%s", pr->meta.ns, pr->meta.name);
		scheduled = (int64_t)(uintptr_t)hmap_get(&c->consumers, key);
	}
	if(c->db && state_booking_list_request(c->db, pr->meta.uid, &b, &nb, NULL) == 0) {
		int64_t promised = 0;
		for(i = 0; i < nb; i++) {
			if(!hmap_has(w->nodes_by_name, b[i].node_name))
				gone++;
			if(b[i].expires_ns > promised)
				promised = b[i].expires_ns;
		}
		/* The end the rows were booked with is the one promised: a
		 * restart with a shorter --booking-ttl does not cut it. */
		if(promised > expires)
			expires = promised;
		state_booking_list_free(b, nb);
	}
	if(!nb)
		gone = status_nodes_gone(w, pr);
	if(scheduled >= want) {
		snprintf(msg, sizeof(msg), "all %lld consumer pods are scheduled; the booking is released", (long long)want);
		pr__set_cond(c, pr, conds, PR_COND_BOOKING_EXPIRED, "True", PR_R_CONSUMED, msg, false);
	} else if(gone) {
		snprintf(msg, sizeof(msg), "%zu booked node%s disappeared before the pods arrived", gone, gone == 1 ? "" : "s");
		pr__set_cond(c, pr, conds, PR_COND_REVOKED, "True", PR_R_NODES_REMOVED, msg, false);
	} else if(c->now >= expires) {
		snprintf(msg, sizeof(msg), "the booking expired after %llds with %lld of %lld pods scheduled",
			 (long long)((expires - prov->last_transition_ns) / PRD_NS_PER_SEC), (long long)scheduled,
			 (long long)want);
		pr__set_cond(c, pr, conds, PR_COND_BOOKING_EXPIRED, "True", PR_R_RESERVATION_EXPIRED, msg, false);
	} else {
		pr__wake_at(c, expires);
		return;
	}
	/* The room stays held in this pass's snapshot: the status that ends
	 * the booking is written at the end of the pass and may fail (409:
	 * the request still reads Provisioned with its booking). Handing the
	 * room to a request decided later in this pass would book it twice
	 * until the next write lands. From the next pass on, the status says
	 * whether it ended (a booking the status still shows is held from it
	 * when the local rows are gone: pr__shards_book). */
	if(c->db)
		state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
	pr_details_put(c->details, PR_DETAIL_BOOKING, NULL, NULL);
}

static void gc_terminal(pr_ctl *c, const kube_provreq *pr)
{
	int64_t last = 0;
	size_t i;
	char path[700];
	json_object *opts, *pre;
	prd_err e;
	int rc;
	for(i = 0; i < pr->nconditions; i++)
		if(pr->conditions[i].last_transition_ns > last)
			last = pr->conditions[i].last_transition_ns;
	if(c->now < last + c->cfg.gc_after_ns) {
		pr__wake_at(c, last + c->cfg.gc_after_ns);
		return;
	}
	snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/%s/provisioningrequests/%s", pr->meta.ns,
		 pr->meta.name);
	/* This request, not whatever now has its name: a request recreated
	 * under the same name since the read (a batch system resubmitting a
	 * job) fails the uid precondition with a Conflict, and the one that
	 * finished is gone then. */
	opts = json_object_new_object();
	pre = json_object_new_object();
	if(!opts || !pre || !pr->meta.uid) {
		json_object_put(opts);
		json_object_put(pre);
		return;
	}
	json_object_object_add(opts, "kind", json_object_new_string("DeleteOptions"));
	json_object_object_add(opts, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(pre, "uid", json_object_new_string(pr->meta.uid));
	json_object_object_add(opts, "preconditions", pre);
	/* A delete is a write: none from a replica that may have lost the
	 * lease (a former leader's clock or config may say "expired" where
	 * the new one's does not). */
	if(!pr__may_act(c)) {
		json_object_put(opts);
		return;
	}
	rc = kube_api_call(&c->api, "DELETE", path, NULL, opts, NULL, NULL, &e);
	json_object_put(opts);
	if(rc && rc != PRD_ENOTFOUND && rc != PRD_ECONFLICT) {
		log_warn("cannot garbage-collect request", "request", pr->meta.name, "namespace", pr->meta.ns,
			 "error", e.msg);
		return;
	}
	if(rc == PRD_ECONFLICT)
		log_info("finished request already replaced by a new one of the same name; the new one is kept",
			 "namespace", pr->meta.ns, "request", pr->meta.name, "uid", pr->meta.uid);
	else
		log_info("deleted finished request", "namespace", pr->meta.ns, "request", pr->meta.name);
	if(c->db) {
		state_request_delete(c->db, pr->meta.uid, NULL);
		state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
	}
}

/* A request of a class nobody here serves: say so once. */
static void note_unowned(pr_ctl *c, const kube_provreq *pr)
{
	if(hmap_has(&c->unowned, pr->meta.uid))
		return;
	if(hmap_put(&c->unowned, pr->meta.uid, NULL))
		return;
	metrics_counter_add(M_UNOWNED, NULL, 1);
	log_info("no provisioning class here serves this request; leaving it alone", "namespace", pr->meta.ns,
		 "request", pr->meta.name, "class", pr->class_name ? pr->class_name : "");
}

/* Deadlines: ValidUntilSeconds and the overall maximum age. True when the
 * request expired here. */
static bool expired(pr_class_ctx *x, const pr_params *pp)
{
	pr_ctl *c = x->c;
	const kube_provreq *pr = x->pr;
	int64_t max_age = pr->meta.created_ns + c->cfg.max_age_ns, deadline = max_age;
	char msg[300];
	if(pp->has_valid_until && pp->valid_until_s < (INT64_MAX - pr->meta.created_ns) / PRD_NS_PER_SEC &&
	   pr->meta.created_ns + pp->valid_until_s * PRD_NS_PER_SEC < deadline)
		deadline = pr->meta.created_ns + pp->valid_until_s * PRD_NS_PER_SEC;
	if(c->now < deadline) {
		pr__wake_at(c, deadline);
		return false;
	}
	if(deadline < max_age)
		snprintf(msg, sizeof(msg), "not provisioned within ValidUntilSeconds=%lld", (long long)pp->valid_until_s);
	else
		snprintf(msg, sizeof(msg), "not provisioned within %lld hours of creation",
			 (long long)(c->cfg.max_age_ns / (3600 * PRD_NS_PER_SEC)));
	pr__set_cond(c, pr, x->conds, PR_COND_PROVISIONED, "False", PR_R_EXPIRED, msg, true);
	pr__set_cond(c, pr, x->conds, PR_COND_FAILED, "True", PR_R_EXPIRED, msg, false);
	return true;
}

/* Resolve the templates; on a miss, wait for them (within the grace) or
 * fail. Returns the podSets, or NULL when the request was answered. */
static sched_podset *podsets_or_wait(pr_class_ctx *x, const state_request *rs)
{
	pr_ctl *c = x->c;
	const kube_provreq *pr = x->pr;
	sched_podset *sets = arena_array(&x->w->ar, pr->npod_sets + 1, sizeof(*sets));
	char missing[300], msg[1024];
	prd_err e;
	int rc;
	if(!sets)
		return NULL;
	rc = pr__resolve_podsets(x->w, pr, sets, missing, sizeof(missing), &e);
	if(rc == 0)
		return sets;
	if(rc == PRD_ENOTFOUND) {
		int64_t since = rs->first_seen_ns ? rs->first_seen_ns : pr->meta.created_ns;
		int64_t until = since + c->cfg.template_grace_ns;
		/* `missing` is a PodTemplate's name, or "Kind name" for the
		 * DRA objects a template refers to. */
		const char *kind = strchr(missing, ' ') ? "" : "PodTemplate ";
		/* DeviceClasses are cluster-scoped: no namespace to name. */
		char where[300] = "";
		if(strncmp(missing, "DeviceClass ", 12))
			snprintf(where, sizeof(where), " in namespace %s", pr->meta.ns);
		if(c->now < until) {
			snprintf(msg, sizeof(msg), "waiting for %s%s%s", kind, missing, where);
			pr__set_cond(c, pr, x->conds, PR_COND_PROVISIONED, "False", PR_R_WAITING_TEMPLATES, msg, false);
			pr__wake_at(c, c->now + 10 * PRD_NS_PER_SEC < until ? c->now + 10 * PRD_NS_PER_SEC : until);
			return NULL;
		}
		snprintf(msg, sizeof(msg), "%s%s not found%s after waiting %llds", kind, missing, where,
			 (long long)(c->cfg.template_grace_ns / PRD_NS_PER_SEC));
	} else {
		snprintf(msg, sizeof(msg), "%s", e.msg);
	}
	pr__set_cond(c, pr, x->conds, PR_COND_PROVISIONED, "False", PR_R_CREATE_PODS_FAILED, msg, true);
	pr__set_cond(c, pr, x->conds, PR_COND_FAILED, "True", PR_R_CREATE_PODS_FAILED, msg, false);
	return NULL;
}

/* Everything the controller decides before a class gets the request.
 * Returns the podSets for the class, or NULL when the request is answered
 * (or waits) without it. */
/* A leftover booking (rows of a request the status shows neither
 * Provisioned nor scaling up) is released only once no status write that
 * booked it can still land. The write that booked it may be on its way:
 * a former leader's, stalled past its lease (it checked the lease before
 * sending), or this replica's own that timed out. Every status write is
 * conditional on the resourceVersion its writer read, so one write of
 * ours, conditional on a status that shows no booking, settles it: if it
 * lands, any write made on an older read is refused (409); if the
 * booking's write lands first, ours is refused and the next pass reads
 * the request Provisioned. Until our write is seen, the room stays held
 * and the request waits: the stamp names the booking (its end), so a
 * later booking of the same request needs its own. Released at once
 * without the store's rows (nothing held) or when they have expired.
 * True when the rows are held this pass (the stamp goes out with the
 * request's status; c->details). (DST replicas seed 150, (viii): a
 * stalled leader's CapacityIsFound landed after the new leader had
 * handed the same room to another request.) */
static bool leftover_fenced(pr_ctl *c, const kube_provreq *pr)
{
	state_booking *b = NULL;
	size_t nb = 0, k;
	int64_t end = 0;
	char stamp[RFC3339_MAX], *have;
	bool hold;
	if(!c->db || state_booking_list_request(c->db, pr->meta.uid, &b, &nb, NULL))
		return false;
	for(k = 0; k < nb; k++)
		if(b[k].expires_ns > c->now && b[k].expires_ns > end)
			end = b[k].expires_ns;
	state_booking_list_free(b, nb);
	if(!end)
		return false;
	rfc3339_format_micro(end, stamp, sizeof(stamp));
	have = pr_details_get(pr, PR_DETAIL_RELEASE);
	hold = !have || strcmp(have, stamp);
	free(have);
	if(hold && c->details) {
		pr_details_put(c->details, PR_DETAIL_RELEASE, stamp, NULL);
		pr__wake_at(c, c->now);
	}
	return hold;
}

static sched_podset *gate(pr_class_ctx *x, const pr_params *pp, int prc, const prd_err *pe, const state_request *rs,
			  const pr_pclass_use *use)
{
	pr_ctl *c = x->c;
	const kube_provreq *pr = x->pr;
	if(use && use->reason) {
		/* A ProvisioningClass the request may not use: said on the
		 * request, final (the spec cannot change). */
		pr__set_cond(c, pr, x->conds, PR_COND_ACCEPTED, "False", use->reason, use->msg, true);
		pr__set_cond(c, pr, x->conds, PR_COND_FAILED, "True", use->reason, use->msg, false);
		return NULL;
	}
	if(prc) {
		pr__set_cond(c, pr, x->conds, PR_COND_ACCEPTED, "False", PR_R_INVALID, pe->msg, true);
		pr__set_cond(c, pr, x->conds, PR_COND_FAILED, "True", PR_R_INVALID, pe->msg, false);
		return NULL;
	}
	if(!pr_cond_true(pr, PR_COND_ACCEPTED))
		pr__set_cond(c, pr, x->conds, PR_COND_ACCEPTED, "True", PR_R_ACCEPTED, "the request is accepted", false);
	if(pr_cond_true(pr, PR_COND_PROVISIONED)) {
		track_booking(c, x->w, pr, x->conds);
		return NULL;
	}
	if(expired(x, pp))
		return NULL;
	if(rs->next_attempt_ns > c->now) {
		pr__wake_at(c, rs->next_attempt_ns);
		return NULL;
	}
	return podsets_or_wait(x, rs);
}

/* Is the request this instance's to decide in this pass? It is counted
 * seen and decided on the way; false when it is another class's or
 * instance's, or left for a later pass. */
static bool decides_now(pr_class_ctx *x, const pr_class_module *m, const pr_pclass_use *use)
{
	pr_ctl *c = x->c;
	const kube_provreq *pr = x->pr;
	const char *seen;
	if(!m) {
		note_unowned(c, pr);
		return false;
	}
	if(!pr__class_ours(x, pr))
		return false;
	c->stats.requests_seen++;
	if(!pr__dirty_decide(c, pr))
		return false;
	c->stats.requests_decided++;
	if(use && use->later) {
		/* Its namespace could not be read (allowedNamespaces): ask again. */
		pr__wake_at(c, c->now + 10 * PRD_NS_PER_SEC);
		return false;
	}
	seen = hmap_get(&c->written, pr->meta.uid);
	if(seen && !strcmp(seen, pr->meta.rv)) {
		pr__wake_at(c, c->now + PRD_NS_PER_SEC);
		return false;
	}
	if(seen)
		hmap_del(&c->written, pr->meta.uid);
	return true;
}

/* A request being deleted or final with nothing in flight: let go of it
 * (or wait for a store that knows its plan). True when that is all this
 * pass does with it. */
static bool settled(pr_ctl *c, pr_world *w, const kube_provreq *pr, bool in_flight)
{
	prd_err e;
	if(in_flight)
		return false;
	if(pr->meta.deleted_ns && pr_details_plan_open(pr) && w->groups_incomplete) {
		/* Its status shows a plan in flight that this store could not
		 * take up yet (the node groups are not all listed): the plan's
		 * instances may be in the cloud, and only a store that knows
		 * the plan rolls them back. The finalizer stays until it does
		 * (a plan refused as implausible, once the groups are listed,
		 * lets the request go). */
		pr__wake_at(c, c->now + PRD_NS_PER_SEC);
		return true;
	}
	if(pr->meta.deleted_ns) {
		/* Being deleted with nothing in flight: let it go. */
		if(pr__hold(c, pr, false, &e) && e.code != PRD_ENOTFOUND)
			log_warn("cannot release a deleted request", "request", pr->meta.name, "error", e.msg);
		return true;
	}
	if(pr_is_terminal(pr)) {
		gc_terminal(c, pr);
		return true;
	}
	return false;
}

/* The decision's provisioningClassDetails start empty, with the
 * ProvisioningClass it was served through recorded. */
static void details_begin(pr_ctl *c, const pr_pclass_use *use)
{
	json_object_put(c->details);
	c->details = json_object_new_object();
	if(use && !use->reason && use->params_json && c->details) {
		pr_details_put(c->details, PR_DETAIL_PCLASS, use->pclass, NULL);
		pr_details_put(c->details, PR_DETAIL_EFFECTIVE_PARAMS, use->params_json, NULL);
	}
}

/* The request as its module sees it, its podSets not resolved yet. */
static void req_init(pr_class_req *req, const kube_provreq *pr, const pr_params *pp)
{
	memset(req, 0, sizeof(*req));
	req->pr = pr;
	req->class_name = pr->class_name;
	req->no_retry = pp->no_retry;
	req->deleting = pr->meta.deleted_ns != 0;
	req->terminal = pr_is_terminal(pr) || req->deleting;
	req->nsets = pr->npod_sets;
}

/* The podSets of a request in flight: NULL when its templates are gone
 * (its module finishes the work all the same). */
static sched_podset *sets_in_flight(pr_world *w, const kube_provreq *pr)
{
	char missing[300];
	prd_err e;
	sched_podset *sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*sets));
	if(sets && pr__resolve_podsets(w, pr, sets, missing, sizeof(missing), &e))
		sets = NULL;
	return sets;
}

/* Bookings of a request that is neither Provisioned nor scaling up are
 * leftovers (a status write that failed after booking, the room an ended
 * plan held): gone before it is decided, which books again if it
 * provisions. Requests decided earlier in this pass saw them held. Not
 * while its status shows a plan open that the local store does not carry
 * yet (a new leader waits to adopt it): what is held then are the Nodes
 * that plan brought up (shards.c), and releasing them handed them to
 * younger requests of the same pass (DST mixed seed 30908, (iii)). A
 * leftover whose booking's status write may still land stays held
 * (leftover_fenced): true then, and the request waits this pass. */
static bool drop_leftovers(pr_ctl *c, pr_world *w, const kube_provreq *pr)
{
	sched_snapshot *snap;
	size_t released = 0;
	if(pr_cond_true(pr, PR_COND_PROVISIONED) || pr_details_plan_open(pr))
		return false;
	if(leftover_fenced(c, pr))
		return true;
	snap = pr__snap(c, w); /* (NULL: fenced, nothing is written) */
	if(snap)
		sched_snapshot_unbook(snap, pr->meta.uid, &released);
	if(released && c->db)
		state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
	return false;
}

/* The gates a new decision passes (quota, the shards' order, one
 * topology domain; a request in flight only keeps its domain), the
 * module's decision, and what the gates note of it. */
static void gates_and_decide(pr_class_ctx *x, pr_class_host *h, pr_class_req *req, const pr_class_module *m,
			     bool in_flight)
{
	const char *domain = NULL;
	if(req->sets && !in_flight && pr__quota_gate(x, h, req))
		req->sets = NULL;
	if(req->sets && !in_flight)
		pr__shards_before(x->c, x->w, x->pr);
	if(req->sets && !in_flight && pr__topology_gate(x, h, req, &domain)) {
		req->sets = NULL;
		pr__topology_after(x, NULL);
	}
	if(req->sets && in_flight && pr__topology_pin(x, req))
		req->sets = NULL;
	if(req->sets || in_flight)
		m->decide(m, h, req);
	if(req->sets && !in_flight) {
		pr__quota_note(x, req);
		pr__topology_after(x, domain);
	}
}

/* Decide one request: whether to, its deletion or end, the checks before
 * its class (gate), the gates and its class module's decision; the status
 * write is queued. */
static void reconcile(pr_ctl *c, pr_world *w, const kube_provreq *pr)
{
	const pr_class_module *m = pr__module_for(c, pr->class_name);
	const pr_pclass_use *use = pr__pclass_use(w, pr);
	pr_class_ctx x;
	pr_class_host h;
	pr_class_req req;
	pr_params pp;
	pr_conds conds;
	state_request rs;
	prd_err e;
	bool in_flight;
	int prc;

	memset(&x, 0, sizeof(x));
	x.c = c;
	x.w = w;
	x.pr = pr;
	if(!decides_now(&x, m, use))
		return;
	prc = pr_params_parse(pr, &pp, &e);
	pr__host_init(&h, &x);
	h.pass_data = pr__class_slot(w, m);
	h.kept = pr__class_kept(c, m);
	in_flight = m->in_flight && m->in_flight(m, &h, pr);
	c->req_in_flight = in_flight;
	if(settled(c, w, pr, in_flight) || pr_conds_init(&conds, pr, NULL))
		return;
	x.pp = &pp;
	x.conds = &conds;
	x.rv = pr->meta.rv;
	details_begin(c, use);
	memset(&rs, 0, sizeof(rs));
	if(c->db && state_request_ensure(c->db, pr->meta.uid, pr->meta.ns, pr->meta.name, &rs, &e))
		log_error("state store: cannot record request", "request", pr->meta.name, "error", e.msg);
	req_init(&req, pr, &pp);
	if(in_flight) {
		req.sets = sets_in_flight(w, pr);
	} else {
		req.sets = drop_leftovers(c, w, pr) ? NULL : gate(&x, &pp, prc, &e, &rs, use);
	}
	gates_and_decide(&x, &h, &req, m, in_flight);
	pr__status_defer(&x);
	free(x.rv_owned);
	json_object_put(x.sent);
	pr_conds_free(&conds);
	state_request_clear(&rs);
}

/* reconcile, remembering what the decision left for the next passes
 * (which of them must decide it again: dirty.c). */
static void decide(pr_ctl *c, pr_world *w, const kube_provreq *pr)
{
	const pr_class_module *m = pr__module_for(c, pr->class_name);
	uint64_t before = c->stats.requests_decided;
	bool open = m && m->in_flight && !pr_is_terminal(pr) && !pr_cond_true(pr, PR_COND_PROVISIONED);
	c->deciding = true;
	c->req_wake = INT64_MAX;
	c->req_in_flight = false;
	reconcile(c, w, pr);
	c->deciding = false;
	if(c->stats.requests_decided != before)
		pr__dirty_decided(c, pr, c->req_wake, open || c->req_in_flight, !pr_is_terminal(pr));
}

void pr__decide(pr_ctl *c, pr_world *w)
{
	size_t i;
	pr__modules_hook(c, w, PR_HOOK_BEGIN);
	for(i = 0; i < w->nprs; i++)
		decide(c, w, w->prs[i]);
}

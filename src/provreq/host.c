/* The controller's side of the class interface: what a class module may
 * ask of the controller while it decides one request (src/classes/class.h),
 * the bookings it stores (and records in the request's status so that a
 * replica taking over the lease loses nothing: rebuild.c reads them back),
 * and the modules' slots and hooks of a pass.
 *
 * One of the bookings core (host.c, shards.c, snapshot_book.c), the one
 * cycle left among the files of src/provreq: they call each other and are
 * read and changed together (docs/development.md, "Layers"). */
#include "classes/details.h"
#include "kube/events.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/convert.h"
#include "provreq/ctl_int.h"
#include "provreq/scaledown.h"
#include "util/assert.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- conditions and Events -------------------------------------------- */

static void emit_event(pr_ctl *c, const kube_provreq *pr, const char *type, const char *reason, const char *msg)
{
	kube_object_ref ref;
	/* An Event is a write too: none from a replica that may have lost
	 * the lease. */
	if(!pr__may_act(c))
		return;
	memset(&ref, 0, sizeof(ref));
	ref.kind = "ProvisioningRequest";
	ref.api_version = "autoscaling.x-k8s.io/v1";
	ref.namespace_ = pr->meta.ns;
	ref.name = pr->meta.name;
	ref.uid = pr->meta.uid;
	ref.resource_version = pr->meta.rv;
	/* The recorder aggregates repeats and drops floods; it never fails. */
	kube_recorder_event(c->recorder, &ref, type, reason, "%s", msg);
	c->stats.events++;
}

/* Transitions an operator must look at. */
static bool warning_worthy(const char *type, const char *status, const char *reason)
{
	if(!strcmp(status, "True"))
		return !strcmp(type, PR_COND_FAILED) || !strcmp(type, PR_COND_REVOKED) ||
		       (!strcmp(type, PR_COND_BOOKING_EXPIRED) && !strcmp(reason, PR_R_RESERVATION_EXPIRED));
	return !strcmp(type, PR_COND_PROVISIONED) && !strcmp(reason, PR_R_SCALE_UP_FAILED);
}

const char *pr_event_type(const char *type, const char *status, const char *reason)
{
	return warning_worthy(type, status, reason) ? "Warning" : "Normal";
}

void pr__set_cond(pr_ctl *c, const kube_provreq *pr, pr_conds *conds, const char *type, const char *status,
		  const char *reason, const char *msg, bool quiet)
{
	const char *old = pr_conds_status(conds, type), *old_reason = pr_conds_reason(conds, type);
	bool transition = !old || strcmp(old, status) || !old_reason || strcmp(old_reason, reason);
	pr_conds_set(conds, type, status, reason, msg, c->now, pr->meta.generation);
	if(transition && !strcmp(status, "True") && pr->meta.created_ns) {
		double age = (double)(c->now - pr->meta.created_ns) / (double)PRD_NS_PER_SEC;
		const pr_class_module *m = pr__module_for(c, pr->class_name);
		const char *cls = m ? m->short_name : "other";
		if(!strcmp(type, PR_COND_PROVISIONED))
			metrics_observe(M_TIME_TO_PROVISIONED, METRICS_L(cls), age);
		else if(!strcmp(type, PR_COND_FAILED))
			metrics_observe(M_TIME_TO_FAILED, METRICS_L(cls, reason), age);
	}
	if(transition) {
		if(!quiet)
			emit_event(c, pr, pr_event_type(type, status, reason), reason, msg);
		/* Decided only: "request condition" is logged at info when the
		 * status write carrying it lands (status.c), not before. */
		log_debug("request condition decided", "namespace", pr->meta.ns, "request", pr->meta.name, "class",
			  pr->named_class ? pr->named_class : pr->class_name, "served_as", pr->class_name, "condition",
			  type, "status", status, "reason", reason, "message", msg);
	}
}

/* ---- bookings ----------------------------------------------------------- */

/* "podSet:node=pods,node=pods;podSet:..." of a placement. */
static char *booking_text(const pr_class_host *h, const sched_podset *sets, size_t n, const sched_place_result *res)
{
	buf b;
	size_t i, j;
	(void)sets;
	buf_init(&b);
	for(i = 0; i < n; i++) {
		if(!res->sets[i].n_assign)
			continue;
		if(b.len)
			buf_append_char(&b, ';');
		buf_printf(&b, "%zu:", i);
		for(j = 0; j < res->sets[i].n_assign; j++)
			buf_printf(&b, "%s%s=%lld", j ? "," : "",
				   sched_snapshot_node_name(h->snapshot(h->ctx), res->sets[i].assign[j].node),
				   (long long)res->sets[i].assign[j].count);
	}
	return buf_detach(&b);
}

typedef struct dev_ids {
	json_object *arr;
} dev_ids;

static void add_dev_id(void *ud, const sched_device *d)
{
	dev_ids *x = ud;
	char id[800];
	snprintf(id, sizeof(id), "%s/%s/%s", d->driver, d->pool, d->name);
	json_object_array_add(x->arr, json_object_new_string(id));
}

/* The DRA devices `res` placed on `node` ("driver/pool/device"), as a JSON
 * array, or NULL when none (or no placement: a rebuilt booking). */
static json_object *placed_devices(const sched_snapshot *snap, const sched_place_result *res, size_t n,
				   const char *node)
{
	dev_ids x = { NULL };
	size_t i, j, idx;
	if(!snap || !res || sched_snapshot_find_node(snap, node, &idx))
		return NULL;
	x.arr = json_object_new_array();
	for(i = 0; x.arr && i < n; i++)
		for(j = 0; j < res->sets[i].n_assign; j++)
			if(res->sets[i].assign[j].node == idx)
				sched_snapshot_placed_devices(snap, &res->sets[i], idx, add_dev_id, &x);
	if(x.arr && json_object_array_length(x.arr) == 0) {
		json_object_put(x.arr);
		x.arr = NULL;
	}
	return x.arr;
}

/* One state_booking per node for `items` (pods per podSet and node): the
 * podSets that share a node are summed into its one row (two rows for one
 * node broke the store's key, and a request of two podSets whose pods
 * shared a node could never be booked). */
int pr__store_bookings(pr_ctl *c, const kube_provreq *pr, const sched_podset *sets, const pr_booked *items,
		       size_t nitems, int64_t expires, const sched_snapshot *snap, const sched_place_result *res,
		       size_t nsets, prd_err *err)
{
	state_booking *v = calloc(nitems + 1, sizeof(*v));
	size_t i, j, k, nv = 0;
	int rc = 0;
	if(!v)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < nitems; i++) {
		json_object *m;
		int64_t pods = 0;
		char b[64];
		bool seen = false;
		for(j = 0; j < i && !seen; j++)
			seen = !strcmp(items[j].node, items[i].node);
		if(seen)
			continue;
		m = json_object_new_object();
		for(j = i; j < nitems; j++) {
			const sched_pod_spec *ps = sets[items[j].set].pod;
			if(strcmp(items[j].node, items[i].node))
				continue;
			pods += items[j].pods;
			for(k = 0; k < ps->n_requests; k++) {
				const char *name = ps->requests[k].name;
				json_object *have = NULL;
				int64_t val = ps->requests[k].value * items[j].pods;
				if(json_object_object_get_ex(m, name, &have))
					val += strtoll(json_object_get_string(have), NULL, 10);
				snprintf(b, sizeof(b), !strcmp(name, "cpu") ? "%lldm" : "%lld", (long long)val);
				json_object_object_add(m, name, json_object_new_string(b));
			}
		}
		snprintf(b, sizeof(b), "%lld", (long long)pods);
		json_object_object_add(m, "pods", json_object_new_string(b));
		{
			json_object *devs = placed_devices(snap, res, nsets, items[i].node), *dp = NULL;
			if(devs)
				json_object_object_add(m, PR_BOOKING_DEVICES, devs);
			for(j = i; !snap && j < nitems; j++) {
				char set[24];
				if(strcmp(items[j].node, items[i].node) || !sets[items[j].set].pod->n_dev_requests)
					continue;
				if(!dp && !(dp = json_object_new_object()))
					break;
				snprintf(set, sizeof(set), "%zu", items[j].set);
				json_object_object_add(dp, set, json_object_new_int64(items[j].pods));
			}
			if(dp)
				json_object_object_add(m, PR_BOOKING_DEVICE_PODS, dp);
		}
		v[nv].request_uid = (char *)pr->meta.uid;
		v[nv].node_name = (char *)items[i].node;
		v[nv].resources_json = str_dup(json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN));
		json_object_put(m);
		if(!v[nv++].resources_json) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			goto done;
		}
	}
	/* The store keys a booking by (request, node): one row per node. */
	for(i = 0; PRD_ASSERTS_ON && i < nv; i++)
		for(j = i + 1; j < nv; j++)
			PRD_ASSERT(strcmp(v[i].node_name, v[j].node_name) != 0);
	if(c->db)
		rc = state_booking_set(c->db, pr->meta.uid, v, nv, expires, err);
done:
	for(i = 0; i < nv; i++)
		free(v[i].resources_json);
	free(v);
	return rc;
}

static void h_failed(pr_class_ctx *x, const char *reason, const char *msg);

/* A booking its records cannot hold: its rows go, the request fails with
 * a condition that says so (waiting would not make it fit, and written
 * anyway it would not be seen by the other instances). `what` names the
 * record, `limit` its size in bytes. */
static int book_too_large(pr_class_ctx *x, size_t nodes, size_t need, const char *what, size_t limit, prd_err *err)
{
	char msg[700];
	size_t most = need ? (size_t)((double)nodes * (double)limit / (double)need) : 0;
	if(x->c->db)
		state_booking_delete_request(x->c->db, x->pr->meta.uid, NULL, NULL);
	snprintf(msg, sizeof(msg),
		 "the booking of %zu node%s needs %zu bytes in %s, more than the %zu bytes it can hold; split the "
		 "request into requests of at most about %zu nodes each",
		 nodes, nodes == 1 ? "" : "s", need, what, limit, most);
	log_warn("booking too large to record; the request fails", "request", x->pr->meta.name, "namespace",
		 x->pr->meta.ns, "nodes", LOGI((long long)nodes), "bytes", LOGI((long long)need), "record", what);
	h_failed(x, PR_R_BOOKING_TOO_LARGE, msg);
	return prd_err_set(err, PRD_ERANGE, "%s", msg);
}

static int h_book_until(pr_class_ctx *x, const sched_podset *sets, size_t n, const sched_place_result *res,
			int64_t until_ns, prd_err *err)
{
	pr_class_host h;
	pr_booked *items;
	size_t ni = 0, i, j, cap = 0;
	char *text;
	int rc;
	pr__host_init(&h, x);
	for(i = 0; i < n; i++)
		cap += res->sets[i].n_assign;
	items = calloc(cap + 1, sizeof(*items));
	if(!items)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++)
		for(j = 0; j < res->sets[i].n_assign; j++) {
			items[ni].set = i;
			items[ni].node = sched_snapshot_node_name(x->w->snap, res->sets[i].assign[j].node);
			PRD_ASSERT(items[ni].node); /* a placement names nodes of this snapshot */
			items[ni++].pods = res->sets[i].assign[j].count;
		}
	rc = pr__store_bookings(x->c, x->pr, sets, items, ni, until_ns, x->w->snap, res, n, err);
	free(items);
	if(rc)
		return rc;
	/* Its entry in the booking ledger must fit one object of it. */
	if(x->c->ledger.on) {
		char key[600];
		size_t need;
		state_booking *rows = NULL;
		size_t nrows = 0;
		snprintf(key, sizeof(key), "%s/%s", x->pr->meta.ns, x->pr->meta.name);
		need = pr__ledger_entry_bytes(x->c, x->pr->meta.uid, key);
		if(need > x->c->ledger.obj_max) {
			if(x->c->db)
				state_booking_list_request(x->c->db, x->pr->meta.uid, &rows, &nrows, NULL);
			state_booking_list_free(rows, nrows);
			return book_too_large(x, nrows, need, "the booking ledger", x->c->ledger.obj_max, err);
		}
	}
	text = booking_text(&h, sets, n, res);
	if(!text)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(pr_details_put(x->c->details, PR_DETAIL_BOOKING, text, err)) {
		size_t need = strlen(text);
		free(text);
		return book_too_large(x, ni, need, "the request's provisioningClassDetails",
				      (size_t)PR_DETAIL_CHUNK * PR_DETAIL_MAX_CHUNKS, err);
	}
	free(text);
	return 0;
}

static int h_book(pr_class_ctx *x, const sched_podset *sets, size_t n, const sched_place_result *res, prd_err *err)
{
	return h_book_until(x, sets, n, res, x->c->now + x->c->cfg.booking_ttl_ns, err);
}

/* ---- the host table ---------------------------------------------------- */

static void h_set_cond(pr_class_ctx *x, const char *type, const char *status, const char *reason, const char *msg)
{
	pr__set_cond(x->c, x->pr, x->conds, type, status, reason, msg, false);
}

static void h_provisioned(pr_class_ctx *x, const char *reason, const char *msg)
{
	pr__set_cond(x->c, x->pr, x->conds, PR_COND_PROVISIONED, "True", reason, msg, false);
	pr__wake_at(x->c, x->c->now + x->c->cfg.booking_ttl_ns);
}

static void h_failed(pr_class_ctx *x, const char *reason, const char *msg)
{
	/* One Warning for a final failure, not a Normal and a Warning. */
	pr__set_cond(x->c, x->pr, x->conds, PR_COND_PROVISIONED, "False", reason, msg, true);
	pr__set_cond(x->c, x->pr, x->conds, PR_COND_FAILED, "True", reason, msg, false);
}

static void h_not_provisioned(pr_class_ctx *x, const char *reason, const char *msg)
{
	pr_ctl *c = x->c;
	int64_t next = 0;
	state_request rs;
	if(x->pp->no_retry) {
		h_failed(x, reason, msg);
		return;
	}
	pr__set_cond(c, x->pr, x->conds, PR_COND_PROVISIONED, "False", reason, msg, false);
	if(c->db && state_request_bump(c->db, x->pr->meta.uid, reason, &next, NULL) == 0 &&
	   state_request_get(c->db, x->pr->meta.uid, &rs, NULL) == 0) {
		char num[32], when[RFC3339_MAX];
		pr__wake_at(c, next);
		snprintf(num, sizeof(num), "%lld", (long long)rs.attempts);
		pr_details_put(c->details, PR_DETAIL_ATTEMPTS, num, NULL);
		rfc3339_format_micro(rs.next_attempt_ns, when, sizeof(when));
		pr_details_put(c->details, PR_DETAIL_NEXT_ATTEMPT, when, NULL);
		state_request_clear(&rs);
	}
}

static void h_set_detail(pr_class_ctx *x, const char *key, const char *value)
{
	prd_err e;
	if(pr_details_put(x->c->details, key, value, &e))
		log_warn("a provisioningClassDetails value is too large to record", "request", x->pr->meta.name, "error",
			 e.msg);
}

static void h_wake_at(pr_class_ctx *x, int64_t t)
{
	pr__wake_at(x->c, t);
}

static sched_snapshot *h_snapshot(pr_class_ctx *x)
{
	return pr__snap(x->c, x->w);
}

static bool h_may_act(pr_class_ctx *x)
{
	return !x->dropped && pr__may_act(x->c);
}

static int h_write_now(pr_class_ctx *x, prd_err *err)
{
	if(x->dropped)
		return prd_err_set(err, PRD_ENOTFOUND, "the request is gone");
	return pr__write_status(x, err);
}

static pr_node_state h_node_state(pr_class_ctx *x, const char *name)
{
	void *v = hmap_get(x->w->nodes_by_name, name);
	return v == PR_NODE_USABLE ? PR_NODE_READY : v == PR_NODE_PRESENT ? PR_NODE_NOT_READY : PR_NODE_ABSENT;
}

static bool h_node_busy(pr_class_ctx *x, const char *name)
{
	const char *who = hmap_get(&x->c->pod_users, name);
	char key[600];
	if(!who)
		return false;
	if(!x->pr || !who[0])
		return true;
	snprintf(key, sizeof(key), "%s/%s", x->pr->meta.ns, x->pr->meta.name);
	return strcmp(who, key) != 0;
}

static void h_nodes_since(pr_class_ctx *x, int64_t t, void (*fn)(void *ud, const char *node), void *ud)
{
	hmap_iter it;
	const char *name;
	void *born;
	/* Not w->nodes: in informer mode they belong to the caches, whose
	 * locks are released before anything is decided. */
	hmap_iter_init(&it, &x->c->born);
	while(hmap_iter_next(&it, &name, &born))
		if(*(const int64_t *)born >= t)
			fn(ud, name);
}

typedef struct changed_walk {
	void (*fn)(void *ud, const char *node);
	void *ud;
} changed_walk;

static int changed_one(void *ud, const char *ns, const char *name)
{
	changed_walk *cw = ud;
	(void)ns;
	cw->fn(cw->ud, name);
	return 0;
}

static bool h_nodes_changed_since(pr_class_ctx *x, uint64_t gen, void (*fn)(void *ud, const char *node), void *ud)
{
	changed_walk cw = { fn, ud };
	int rc;
	/* (The journal may also name Nodes changed after this pass read
	 * them: reported now and again next time, which is only more work.) */
	if(!x->c->use_inf || !x->w->cacheable || x->c->cfg.full_passes || !gen)
		return false;
	kube_informer_rdlock(x->c->inf.nodes);
	rc = kube_informer_changes(x->c->inf.nodes, gen, changed_one, &cw);
	kube_informer_rdunlock(x->c->inf.nodes);
	return rc == 0;
}

static json_object *h_template_json(pr_class_ctx *x, const char *name)
{
	char key[600];
	snprintf(key, sizeof(key), "%s/%s", x->pr ? x->pr->meta.ns : "", name);
	return hmap_get(x->w->tpls, key);
}

static void h_event(pr_class_ctx *x, const char *type, const char *reason, const char *msg)
{
	if(x->pr && !x->dropped)
		emit_event(x->c, x->pr, type, reason, msg);
}

static void h_event_on(pr_class_ctx *x, const kube_provreq *pr, const char *type, const char *reason, const char *msg)
{
	emit_event(x->c, pr, type, reason, msg);
}

static void h_mark_node(pr_class_ctx *x, const char *node)
{
	if(x->pr)
		pr__mark_node(x->c, x->w, x->pr, node);
}

static int h_hold(pr_class_ctx *x, bool on, prd_err *err)
{
	int rc;
	if(!x->pr || x->dropped)
		return on ? prd_err_set(err, PRD_ENOTFOUND, "the request is gone") : 0;
	if(!on) {
		/* After the status write of this decision (a release first
		 * would make that write's resourceVersion stale). */
		x->release = true;
		return 0;
	}
	/* A release this decision asked for earlier (a plan that ended
	 * before a new one began in the same decision) is void: the new plan
	 * needs the finalizer. */
	x->release = false;
	rc = pr__hold(x->c, x->pr, on, err);
	if(rc == 0 && on) {
		/* The hold made a new version: the status write that follows is
		 * based on it. Read it back through the same path. */
		json_object *o = NULL;
		char path[700];
		prd_err e;
		snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/%s/provisioningrequests/%s",
			 x->pr->meta.ns, x->pr->meta.name);
		if(kube_api_call(&x->c->api, "GET", path, NULL, NULL, &o, NULL, &e) == 0) {
			const char *rv = json_object_get_string(
				json_object_object_get(json_object_object_get(o, "metadata"), "resourceVersion"));
			char *next = str_dup(rv);
			if(next) {
				free(x->rv_owned);
				x->rv = x->rv_owned = next;
			}
			json_object_put(o);
		}
	}
	return rc;
}

static int h_node_spec(pr_class_ctx *x, json_object *node, sched_node_spec *out, prd_err *err)
{
	return pr_conv_node(&x->w->ar, node, out, err);
}

static void h_count(pr_class_ctx *x, pr_class_stat what)
{
	if(what == PR_STAT_SCALEUP_STARTED)
		x->c->stats.scaleups_started++;
	else if(what == PR_STAT_SCALEUP_SUCCEEDED)
		x->c->stats.scaleups_succeeded++;
	else if(what == PR_STAT_SCALEUP_ROLLED_BACK)
		x->c->stats.scaleups_rolled_back++;
	else
		x->c->stats.snapshot_mismatches++;
}

void pr__host_init(pr_class_host *h, pr_class_ctx *x)
{
	memset(h, 0, sizeof(*h));
	h->ctx = x;
	h->now = x->c->now;
	h->limits = &x->c->limits;
	h->verify = x->c->cfg.verify_snapshot;
	h->ar = &x->w->ar;
	h->snapshot = h_snapshot;
	h->db = x->c->db;
	h->term = x->c->term;
	h->fence_key = x->c->fence_term ? x->c->fence_key : NULL;
	h->fence_term = x->c->fence_term;
	h->expander = x->c->expander;
	h->groups = x->w->groups;
	h->ngroups = x->w->ngroups;
	h->cluster_nodes = (int64_t)hmap_len(x->w->nodes_by_name);
	h->groups_complete = !x->w->groups_incomplete;
	h->plan_key = x->c->plan_key_set ? x->c->plan_key : NULL;
	h->res_totals = x->w->res_totals;
	h->drivers = x->c->drivers;
	h->set_cond = h_set_cond;
	h->provisioned = h_provisioned;
	h->not_provisioned = h_not_provisioned;
	h->failed = h_failed;
	h->book = h_book;
	h->book_until = h_book_until;
	h->set_detail = h_set_detail;
	h->wake_at = h_wake_at;
	h->may_act = h_may_act;
	h->write_now = h_write_now;
	h->node_state = h_node_state;
	h->node_busy = h_node_busy;
	h->nodes_since = h_nodes_since;
	h->nodes_gen = x->w->cacheable ? x->w->gen_nodes : 0;
	h->nodes_changed_since = h_nodes_changed_since;
	h->template_json = h_template_json;
	h->node_spec = h_node_spec;
	h->count = h_count;
	h->event = h_event;
	h->event_on = h_event_on;
	h->mark_node = h_mark_node;
	h->hold = h_hold;
}

/* ---- the class modules' slots and pass hooks -------------------------- */

/* The module's slot for this pass (pr_class_host.pass_data); NULL when
 * out of memory (the module then keeps nothing). */
void **pr__class_slot(pr_world *w, const pr_class_module *m)
{
	void **cell = hmap_get(&w->class_data, m->name);
	if(cell)
		return cell;
	cell = arena_alloc(&w->ar, sizeof(*cell));
	if(!cell || hmap_put(&w->class_data, m->name, cell))
		return NULL;
	return cell;
}

/* The module's slot kept across passes (pr_class_host.kept); NULL when
 * out of memory. */
void **pr__class_kept(pr_ctl *c, const pr_class_module *m)
{
	void **cell = hmap_get(&c->class_kept, m->name);
	if(cell)
		return cell;
	cell = calloc(1, sizeof(*cell));
	if(!cell || hmap_put(&c->class_kept, m->name, cell)) {
		free(cell);
		return NULL;
	}
	return cell;
}

bool pr__class_ours(pr_class_ctx *x, const kube_provreq *pr)
{
	return pr__shards_ours(x->c, pr);
}

/* Call every module's pass hook (begin, reserve or end). */
void pr__modules_hook(pr_ctl *c, pr_world *w, pr_hook which)
{
	const pr_class_module *const *mods;
	pr_class_ctx x;
	pr_class_host h;
	pr_class_pass p;
	size_t i, n = pr_class_modules(c->classes, &mods);
	memset(&x, 0, sizeof(x));
	x.c = c;
	x.w = w;
	pr__host_init(&h, &x);
	p.prs = (const kube_provreq *const *)w->prs;
	p.nprs = w->nprs;
	p.ours = pr__class_ours;
	p.term_began = w->term_began;
	for(i = 0; i < n; i++) {
		const pr_class_module *m = mods[i];
		h.pass_data = pr__class_slot(w, m);
		h.kept = pr__class_kept(c, m);
		if(which == PR_HOOK_BEGIN && m->pass_begin)
			m->pass_begin(m, &h, &p);
		if(which == PR_HOOK_RESERVE && m->reserve)
			m->reserve(m, &h, &p);
		if(which == PR_HOOK_END && m->pass_end)
			m->pass_end(m, &h, &p);
	}
}

#include "provreq/controller.h"
#include "provreq/ctl_int.h"
#include "kube/events.h"
#include "kube/objects.h"
#include "kube/quantity.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/convert.h"
#include "provreq/request.h"
#include "sched/expander.h"
#include "sched/place.h"
#include "util/arena.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MIN (60 * PRD_NS_PER_SEC)

void pr_config_default(pr_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->booking_ttl_ns = 10 * NS_PER_MIN;
	cfg->provision_timeout_ns = 15 * NS_PER_MIN;
	cfg->template_grace_ns = 5 * NS_PER_MIN;
	cfg->max_age_ns = 7 * 24 * 60 * NS_PER_MIN;
	cfg->gc_after_ns = 7 * 24 * 60 * NS_PER_MIN;
	cfg->expander = "least-waste";
}

int pr_ctl_new(const pr_config *cfg, const clk *clock, const kube_api *api, state_db *db,
	       cloud_drivers *drivers, pr_ctl **out, prd_err *err)
{
	pr_ctl *c = calloc(1, sizeof(*c));
	int rc;
	if(!c)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	c->cfg = *cfg;
	c->clock = clock ? clock : clk_real();
	c->api = *api;
	c->db = db;
	c->drivers = drivers;
	hmap_init(&c->written, free);
	rc = sched_expander_new(cfg->expander, NULL, 0, 1, &c->expander, err);
	if(rc) {
		free(c);
		return prd_err_prefix(err, "expander");
	}
	{
		kube_recorder_opts ro;
		memset(&ro, 0, sizeof(ro));
		ro.clock = c->clock;
		rc = kube_recorder_new(&c->api, &ro, &c->recorder, err);
		if(rc) {
			sched_expander_free(c->expander);
			free(c);
			return prd_err_prefix(err, "event recorder");
		}
	}
	*out = c;
	return 0;
}

void pr_ctl_free(pr_ctl *c)
{
	if(!c)
		return;
	sched_expander_free(c->expander);
	kube_recorder_free(c->recorder);
	hmap_free(&c->written);
	free(c);
}

const pr_stats *pr_ctl_stats(const pr_ctl *c)
{
	return &c->stats;
}

void pr_ctl_use_informers(pr_ctl *c, const pr_informers *inf)
{
	c->inf = *inf;
	c->use_inf = true;
}

void pr_ctl_set_fence(pr_ctl *c, pr_fence_fn may_act, void *ud)
{
	c->may_act = may_act;
	c->may_act_ud = ud;
}

void pr_ctl_rebuild_from_api(pr_ctl *c)
{
	c->need_rebuild = true;
}

bool pr__may_act(pr_ctl *c)
{
	if(c->fenced)
		return false;
	if(c->may_act && !c->may_act(c->may_act_ud)) {
		c->fenced = true;
		log_warn("leadership may have been lost; this pass stops acting");
		metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", "fenced"), 1);
		return false;
	}
	return true;
}

void pr__wake_at(pr_ctl *c, int64_t t)
{
	if(t > c->now && t < c->next_wake)
		c->next_wake = t;
}

/* ---- reading the world ------------------------------------------------- */

static void put_json(void *o)
{
	json_object_put(o);
}

static void world_free(pr_world *w)
{
	size_t i;
	for(i = 0; i < w->nobjs; i++)
		kube_obj_free(w->in, w->objs[i]);
	if(w->inf) {
		for(i = 0; i < w->nprs; i++)
			kube_obj_free(w->inf->intern, &w->prs[i]->meta);
	}
	free(w->objs);
	free(w->nodes);
	free(w->pods);
	free(w->prs);
	hmap_free(&w->nodes_by_name);
	hmap_free(&w->tpls);
	hmap_free(&w->consumers);
	for(i = 0; i < w->ngroups; i++) {
		free(w->groups[i].id);
		json_object_put(w->groups[i].tmpl_json);
	}
	free(w->groups);
	sched_snapshot_free(w->snap);
	arena_free(&w->ar);
	if(w->in)
		kube_intern_free(w->in);
	memset(w, 0, sizeof(*w));
}

typedef struct collect {
	void **v;
	size_t n, cap;
} collect;

static int collect_obj(void *ud, const kube_meta *obj)
{
	collect *cl = ud;
	if(cl->n == cl->cap) {
		size_t nc = cl->cap ? cl->cap * 2 : 256;
		void **nv = realloc(cl->v, nc * sizeof(*nv));
		if(!nv)
			return PRD_ENOMEM;
		cl->v = nv;
		cl->cap = nc;
	}
	cl->v[cl->n++] = (void *)obj;
	return 0;
}

/* Borrow every cached object of one informer (read lock already held). */
static int borrow_all(kube_informer *inf, void ***out, size_t *n, prd_err *err)
{
	collect cl = { NULL, 0, 0 };
	if(kube_informer_foreach(inf, collect_obj, &cl)) {
		free(cl.v);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(!cl.v && !(cl.v = calloc(1, sizeof(*cl.v))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	*out = cl.v;
	*n = cl.n;
	return 0;
}

static int keep_obj(pr_world *w, kube_meta *m)
{
	if(w->nobjs == w->capobjs) {
		size_t n = w->capobjs ? w->capobjs * 2 : 256;
		kube_meta **v = realloc(w->objs, n * sizeof(*v));
		if(!v)
			return PRD_ENOMEM;
		w->objs = v;
		w->capobjs = n;
	}
	w->objs[w->nobjs++] = m;
	return 0;
}

/* List one collection and decode its items. Objects that fail to decode
 * are logged and skipped: one malformed object must not stop the rest. */
static int list_kind(pr_ctl *c, pr_world *w, const char *path, kube_kind kind, void ***out, size_t *n,
		     prd_err *err)
{
	json_object *list = NULL, *items;
	size_t i, len;
	void **v;
	int rc = kube_api_call(&c->api, "GET", path, NULL, NULL, &list, NULL, err);
	if(rc)
		return rc;
	items = json_object_object_get(list, "items");
	len = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
	v = calloc(len + 1, sizeof(*v));
	if(!v) {
		json_object_put(list);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	*n = 0;
	for(i = 0; i < len; i++) {
		kube_meta *m = NULL;
		prd_err de;
		if(kube_decode(kind, json_object_array_get_idx(items, i), w->in, &m, &de)) {
			log_warn("skipping an object that does not decode", "kind", kube_kind_name(kind), "error", de.msg);
			continue;
		}
		if(keep_obj(w, m)) {
			kube_obj_free(w->in, m);
			free(v);
			json_object_put(list);
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		}
		v[(*n)++] = m;
	}
	json_object_put(list);
	*out = v;
	return 0;
}

static int load_groups(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t d, i;
	if(!c->drivers)
		return 0;
	for(d = 0; d < c->drivers->n; d++) {
		cloud_driver *drv = c->drivers->v[d];
		prd_cloud_node_group *g = NULL;
		prd_cloud_error de;
		size_t n = 0;
		pr_group *nv;
		memset(&de, 0, sizeof(de));
		if(drv->api->refresh(drv->state, &de) || drv->api->node_groups(drv->state, &g, &n, &de)) {
			prd_err e;
			cloud_driver_error(drv, "listing node groups", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
			log_error("cannot list node groups; scale-ups through this driver wait", "error", e.msg);
			continue;
		}
		nv = realloc(w->groups, (w->ngroups + n + 1) * sizeof(*nv));
		if(!nv) {
			drv->api->release_node_groups(drv->state, g, n);
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		}
		w->groups = nv;
		for(i = 0; i < n; i++) {
			pr_group *pg = &w->groups[w->ngroups];
			char *js = NULL;
			prd_err ce;
			memset(pg, 0, sizeof(*pg));
			pg->drv = drv;
			pg->id = str_dup(g[i].id);
			pg->min = g[i].min_size;
			pg->max = g[i].max_size;
			pg->target = g[i].target_size;
			if(!pg->id)
				continue;
			w->ngroups++;
			if(drv->api->template_node(drv->state, g[i].id, &js, &de) == 0 && js) {
				pg->tmpl_json = json_tokener_parse(js);
				drv->api->release_string(drv->state, js);
				if(pg->tmpl_json && pr_conv_node(&w->ar, pg->tmpl_json, &pg->tmpl, &ce) == 0)
					pg->has_tmpl = true;
				else
					log_warn("node group template is not a usable Node", "group", pg->id,
						 "error", pg->tmpl_json ? ce.msg : "not JSON");
			} else {
				log_warn("node group has no template node", "group", pg->id, "error", de.message);
			}
			if(c->db)
				state_group_backed_off(c->db, pg->id, &pg->backed_off, &pg->backoff_until, NULL);
		}
		drv->api->release_node_groups(drv->state, g, n);
	}
	return 0;
}

pr_group *pr__find_group(pr_world *w, const char *id)
{
	size_t i;
	for(i = 0; i < w->ngroups; i++)
		if(!strcmp(w->groups[i].id, id))
			return &w->groups[i];
	return NULL;
}

/* Parse a booking's resources ({"cpu":"500m",...}) into base units. */
static int booking_res(arena *a, const char *js, sched_res **out, size_t *n, prd_err *err)
{
	json_object *o = json_tokener_parse(js);
	int rc;
	if(!o)
		return prd_err_set(err, PRD_ECORRUPT, "booking resources are not JSON");
	if(arena_defer(a, put_json, o))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	rc = pr_conv_resources(a, o, "booking", out, n, err);
	return rc;
}

/* Ready and not being deleted: a node the simulation may use. */
static bool node_usable(const kube_node *n)
{
	return n->ready == KUBE_COND_TRUE && !n->meta.deleted_ns;
}

static int build_snapshot(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t i;
	int rc;
	w->snap = sched_snapshot_new();
	if(!w->snap)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < w->nnodes; i++) {
		sched_node_spec ns;
		prd_err ce;
		if(!node_usable(w->nodes[i]))
			continue;
		if(pr_conv_kube_node(&w->ar, w->nodes[i], &ns, &ce) ||
		   sched_snapshot_add_node(w->snap, &ns, NULL, &ce)) {
			log_warn("node left out of the simulation", "node", w->nodes[i]->meta.name, "error", ce.msg);
			continue;
		}
		w->ready_nodes++;
	}
	for(i = 0; i < w->npods; i++) {
		const kube_pod *p = w->pods[i];
		sched_pod_spec ps;
		size_t idx;
		prd_err ce;
		if(!p->node_name || p->phase == KUBE_POD_SUCCEEDED || p->phase == KUBE_POD_FAILED)
			continue;
		if(sched_snapshot_find_node(w->snap, p->node_name, &idx))
			continue;
		if(pr_conv_kube_pod(&w->ar, p, &ps, &ce) || sched_snapshot_add_pods(w->snap, idx, &ps, 1, &ce))
			log_warn("pod left out of the simulation", "pod", p->meta.name, "namespace", p->meta.ns,
				 "error", ce.msg);
	}
	/* Bookings of requests that still hold capacity. */
	if(c->db) {
		state_booking *b = NULL;
		size_t nb = 0;
		rc = state_booking_list_active(c->db, &b, &nb, err);
		if(rc)
			return rc;
		for(i = 0; i < nb; i++) {
			sched_res *res;
			size_t nres, idx;
			prd_err ce;
			if(sched_snapshot_find_node(w->snap, b[i].node_name, &idx))
				continue;
			if(booking_res(&w->ar, b[i].resources_json, &res, &nres, &ce) ||
			   sched_snapshot_book(w->snap, b[i].request_uid, idx, res, nres, &ce))
				log_warn("booking ignored", "request_uid", b[i].request_uid, "error", ce.msg);
			else
				c->stats.bookings_held++;
		}
		state_booking_list_free(b, nb);
	}
	return 0;
}

/* Everything the pass needs from the objects, in memory the world owns:
 * node presence and readiness, scheduled consumer pods per request, the
 * PodTemplates' templates, and the scheduling snapshot. */
static int digest(pr_ctl *c, pr_world *w, void **tp, size_t ntp, prd_err *err)
{
	size_t i;
	for(i = 0; i < w->nnodes; i++)
		if(hmap_put(&w->nodes_by_name, w->nodes[i]->meta.name,
			    node_usable(w->nodes[i]) ? PR_NODE_USABLE : PR_NODE_PRESENT))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < w->npods; i++) {
		const kube_pod *p = w->pods[i];
		char key[600];
		if(!p->node_name || !p->consume || p->phase == KUBE_POD_FAILED)
			continue;
		snprintf(key, sizeof(key), "%s/%s", p->meta.ns, p->consume);
		if(hmap_put(&w->consumers, key, (void *)((uintptr_t)hmap_get(&w->consumers, key) + 1)))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	for(i = 0; i < ntp; i++) {
		const kube_podtemplate *t = tp[i];
		json_object *copy = NULL;
		char key[600];
		snprintf(key, sizeof(key), "%s/%s", t->meta.ns, t->meta.name);
		if(json_object_deep_copy(t->tmpl, &copy, NULL) || hmap_put(&w->tpls, key, copy)) {
			json_object_put(copy);
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		}
	}
	return build_snapshot(c, w, err);
}

static int load_world(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t i;
	void **tp = NULL, **cached = NULL;
	size_t ntp = 0;
	int rc;

	memset(w, 0, sizeof(*w));
	arena_init(&w->ar);
	hmap_init(&w->nodes_by_name, NULL);
	hmap_init(&w->tpls, put_json);
	hmap_init(&w->consumers, NULL);
	w->in = kube_intern_new();
	if(!w->in)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	/* Driver calls first: no cache lock is held while a cloud answers. */
	if((rc = load_groups(c, w, err)))
		return rc;
	if(c->use_inf) {
		kube_informer_rdlock(c->inf.nodes);
		kube_informer_rdlock(c->inf.pods);
		kube_informer_rdlock(c->inf.podtemplates);
		kube_informer_rdlock(c->inf.provreqs);
		rc = borrow_all(c->inf.nodes, (void ***)&w->nodes, &w->nnodes, err);
		if(!rc)
			rc = borrow_all(c->inf.pods, (void ***)&w->pods, &w->npods, err);
		if(!rc)
			rc = borrow_all(c->inf.podtemplates, &tp, &ntp, err);
		if(!rc)
			rc = borrow_all(c->inf.provreqs, &cached, &w->nprs, err);
		if(!rc)
			rc = digest(c, w, tp, ntp, err);
		if(!rc) {
			w->prs = calloc(w->nprs + 1, sizeof(*w->prs));
			w->inf = &c->inf;
			for(i = 0; w->prs && i < w->nprs; i++) {
				w->prs[i] = (kube_provreq *)kube_obj_clone(c->inf.intern, cached[i]);
				if(!w->prs[i])
					break;
			}
			if(!w->prs || i < w->nprs) {
				w->nprs = w->prs ? i : 0;
				rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			}
		}
		kube_informer_rdunlock(c->inf.provreqs);
		kube_informer_rdunlock(c->inf.podtemplates);
		kube_informer_rdunlock(c->inf.pods);
		kube_informer_rdunlock(c->inf.nodes);
		free(cached);
		/* The borrowed arrays point into the caches: gone now. */
		free(w->nodes);
		free(w->pods);
		w->nodes = NULL;
		w->pods = NULL;
		if(rc)
			goto done;
	} else {
		if((rc = list_kind(c, w, "/api/v1/nodes", KUBE_KIND_NODE, (void ***)&w->nodes, &w->nnodes, err)) ||
		   (rc = list_kind(c, w, "/api/v1/pods", KUBE_KIND_POD, (void ***)&w->pods, &w->npods, err)) ||
		   (rc = list_kind(c, w, "/api/v1/podtemplates", KUBE_KIND_PODTEMPLATE, &tp, &ntp, err)) ||
		   (rc = list_kind(c, w, "/apis/autoscaling.x-k8s.io/v1/provisioningrequests", KUBE_KIND_PROVREQ,
				   (void ***)&w->prs, &w->nprs, err)) ||
		   (rc = digest(c, w, tp, ntp, err)))
			goto done;
	}
	qsort(w->prs, w->nprs, sizeof(*w->prs), pr_order_cmp);
done:
	free(tp);
	return rc;
}

/* ---- writing ----------------------------------------------------------- */

static void emit_event(pr_ctl *c, const kube_provreq *pr, const char *type, const char *reason, const char *msg)
{
	kube_object_ref ref;
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

/* Write the edited conditions with the object's resourceVersion as a
 * precondition; a 409 means someone else wrote first: the next pass reads
 * their version and decides again. */
static int write_status(pr_ctl *c, const kube_provreq *pr, pr_conds *conds, json_object *details)
{
	json_object *patch, *md, *st, *answer = NULL;
	char path[700];
	const char *new_rv;
	prd_err e;
	int rc;
	if(!conds->changed && !details)
		return 0;
	patch = json_object_new_object();
	md = json_object_new_object();
	st = json_object_new_object();
	json_object_object_add(md, "resourceVersion", json_object_new_string(pr->meta.rv));
	json_object_object_add(patch, "metadata", md);
	json_object_object_add(st, "conditions", json_object_get(conds->list));
	if(details)
		json_object_object_add(st, "provisioningClassDetails", json_object_get(details));
	json_object_object_add(patch, "status", st);
	snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/%s/provisioningrequests/%s/status",
		 pr->meta.ns, pr->meta.name);
	rc = kube_api_call(&c->api, "PATCH", path, "application/merge-patch+json", patch, &answer, NULL, &e);
	json_object_put(patch);
	if(rc == PRD_ECONFLICT) {
		c->stats.status_conflicts++;
		log_info("status changed under us; retrying on the next pass", "request", pr->meta.name,
			 "namespace", pr->meta.ns);
		pr__wake_at(c, c->now + 1);
		return rc;
	}
	if(rc) {
		log_error("cannot write request status", "request", pr->meta.name, "namespace", pr->meta.ns,
			  "error", e.msg);
		pr__wake_at(c, c->now + 5 * PRD_NS_PER_SEC);
		return rc;
	}
	c->stats.status_writes++;
	new_rv = json_object_get_string(json_object_object_get(json_object_object_get(answer, "metadata"),
							       "resourceVersion"));
	/* Only a write that made a new version can be waited for. */
	if(new_rv && strcmp(new_rv, pr->meta.rv)) {
		char *rv = str_dup(pr->meta.rv);
		if(rv && hmap_put(&c->written, pr->meta.uid, rv))
			free(rv);
	}
	json_object_put(answer);
	return 0;
}

/* Set a condition and, when it is a transition, record an Event. */
void pr__set_cond(pr_ctl *c, const kube_provreq *pr, pr_conds *conds, const char *type, const char *status,
		     const char *reason, const char *msg)
{
	const char *old = pr_conds_status(conds, type), *old_reason = pr_conds_reason(conds, type);
	bool transition = !old || strcmp(old, status) || !old_reason || strcmp(old_reason, reason);
	pr_conds_set(conds, type, status, reason, msg, c->now, pr->meta.generation);
	if(transition && !strcmp(status, "True") && pr->meta.created_ns) {
		double age = (double)(c->now - pr->meta.created_ns) / (double)PRD_NS_PER_SEC;
		const char *cls = pr_class_name(pr_class_of(pr->class_name));
		if(!strcmp(type, PR_COND_PROVISIONED))
			metrics_observe(M_TIME_TO_PROVISIONED, METRICS_L(cls), age);
		else if(!strcmp(type, PR_COND_FAILED))
			metrics_observe(M_TIME_TO_FAILED, METRICS_L(cls, reason), age);
	}
	if(transition) {
		bool warn = (!strcmp(type, PR_COND_FAILED) || !strcmp(type, PR_COND_REVOKED)) && !strcmp(status, "True");
		emit_event(c, pr, warn ? "Warning" : "Normal", reason, msg);
		log_info("request condition", "namespace", pr->meta.ns, "request", pr->meta.name,
			 "class", pr->class_name, "condition", type, "status", status, "reason", reason, "message", msg);
	}
}

/* ---- per-request logic ------------------------------------------------- */

/* Resolve the request's PodTemplates into sched podSets. Returns 0, or
 * PRD_ENOTFOUND naming the first missing template in `missing`, or another
 * code when a template cannot be simulated. */
static int resolve_podsets(pr_world *w, const kube_provreq *pr, sched_podset *sets, char *missing, size_t mlen,
			   prd_err *err)
{
	size_t i;
	for(i = 0; i < pr->npod_sets; i++) {
		char key[600];
		json_object *t;
		sched_pod_spec *ps;
		json_object *md;
		snprintf(key, sizeof(key), "%s/%s", pr->meta.ns, pr->pod_sets[i].template_name);
		t = hmap_get(&w->tpls, key);
		if(!t) {
			snprintf(missing, mlen, "%s", pr->pod_sets[i].template_name);
			return PRD_ENOTFOUND;
		}
		ps = arena_alloc(&w->ar, sizeof(*ps));
		if(!ps)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		md = json_object_object_get(t, "metadata");
		if(pr_conv_pod(&w->ar, json_object_object_get(t, "spec"), md, pr->meta.ns, ps, err))
			return prd_err_prefix(err, "PodTemplate %s", pr->pod_sets[i].template_name);
		sets[i].pod = ps;
		sets[i].count = pr->pod_sets[i].count;
	}
	return 0;
}

/* Bookings for a placement: per node, the placed pods' requests. */
int pr__book_placement(pr_ctl *c, pr_world *w, const kube_provreq *pr, const sched_podset *sets, size_t n,
			  const sched_place_result *res, prd_err *err)
{
	state_booking *items = NULL;
	size_t nitems = 0, cap = 0, i, j, k;
	int rc = 0;
	for(i = 0; i < n; i++) {
		for(j = 0; j < res->sets[i].n_assign; j++) {
			const sched_assign *as = &res->sets[i].assign[j];
			json_object *m = json_object_new_object();
			char b[64];
			if(nitems == cap) {
				state_booking *nv;
				cap = cap ? cap * 2 : 16;
				nv = realloc(items, cap * sizeof(*nv));
				if(!nv) {
					json_object_put(m);
					rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
					goto done;
				}
				items = nv;
			}
			for(k = 0; k < sets[i].pod->n_requests; k++) {
				const sched_res *r = &sets[i].pod->requests[k];
				int64_t v = r->value * as->count;
				if(!strcmp(r->name, "cpu"))
					snprintf(b, sizeof(b), "%lldm", (long long)v);
				else
					snprintf(b, sizeof(b), "%lld", (long long)v);
				json_object_object_add(m, r->name, json_object_new_string(b));
			}
			snprintf(b, sizeof(b), "%lld", (long long)as->count);
			json_object_object_add(m, "pods", json_object_new_string(b));
			memset(&items[nitems], 0, sizeof(items[nitems]));
			items[nitems].request_uid = (char *)pr->meta.uid;
			items[nitems].node_name = (char *)sched_snapshot_node_name(w->snap, as->node);
			items[nitems].resources_json = str_dup(json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN));
			json_object_put(m);
			if(!items[nitems].resources_json) {
				rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
				goto done;
			}
			nitems++;
		}
	}
	if(c->db)
		rc = state_booking_set(c->db, pr->meta.uid, items, nitems, c->now + c->cfg.booking_ttl_ns, err);
done:
	for(i = 0; i < nitems; i++)
		free(items[i].resources_json);
	free(items);
	return rc;
}

static int64_t total_pods(const kube_provreq *pr)
{
	int64_t t = 0;
	size_t i;
	for(i = 0; i < pr->npod_sets; i++)
		t += pr->pod_sets[i].count;
	return t;
}

/* A negative answer: retry after the request's backoff, or fail for good
 * with noRetry. */
void pr__not_provisioned(pr_ctl *c, const kube_provreq *pr, const pr_params *pp, pr_conds *conds,
			    const char *reason, const char *msg)
{
	int64_t next = 0;
	pr__set_cond(c, pr, conds, PR_COND_PROVISIONED, "False", reason, msg);
	if(pp->no_retry) {
		pr__set_cond(c, pr, conds, PR_COND_FAILED, "True", reason, msg);
		return;
	}
	if(c->db && state_request_bump(c->db, pr->meta.uid, reason, &next, NULL) == 0)
		pr__wake_at(c, next);
}

/* Names of the group's instances right now (a hash set). */
int pr__group_instances(pr_group *g, hmap *names, size_t *errored, prd_err *err)
{
	prd_cloud_instance *inst = NULL;
	prd_cloud_error de;
	size_t n = 0, i;
	memset(&de, 0, sizeof(de));
	if(g->drv->api->instances(g->drv->state, g->id, &inst, &n, &de))
		return cloud_driver_error(g->drv, "instances", de.code ? de.code : PRD_CLOUD_EIO, &de, err);
	if(errored)
		*errored = 0;
	for(i = 0; i < n; i++) {
		if(inst[i].node_name)
			hmap_put(names, inst[i].node_name, (void *)(uintptr_t)(inst[i].error_class + 1));
		if(errored && inst[i].error_class != PRD_CLOUD_ERRCLASS_NONE)
			(*errored)++;
	}
	g->drv->api->release_instances(g->drv->state, inst, n);
	return 0;
}

static const kube_provreq *find_pr_by_uid(pr_world *w, const char *uid)
{
	size_t i;
	for(i = 0; i < w->nprs; i++)
		if(!strcmp(w->prs[i]->meta.uid, uid))
			return w->prs[i];
	return NULL;
}

/* Provisioned=True: watch the booking until consumed, expired or revoked. */
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
		scheduled = (int64_t)(uintptr_t)hmap_get(&w->consumers, key);
	}
	if(c->db && state_booking_list_request(c->db, pr->meta.uid, &b, &nb, NULL) == 0) {
		for(i = 0; i < nb; i++)
			if(!hmap_has(&w->nodes_by_name, b[i].node_name))
				gone++;
		state_booking_list_free(b, nb);
	}
	if(scheduled >= want) {
		snprintf(msg, sizeof(msg), "all %lld consumer pods are scheduled; the booking is released", (long long)want);
		pr__set_cond(c, pr, conds, PR_COND_BOOKING_EXPIRED, "True", PR_R_CONSUMED, msg);
	} else if(gone) {
		snprintf(msg, sizeof(msg), "%zu booked node%s disappeared before the pods arrived", gone, gone == 1 ? "" : "s");
		pr__set_cond(c, pr, conds, PR_COND_REVOKED, "True", PR_R_NODES_REMOVED, msg);
	} else if(c->now >= expires) {
		snprintf(msg, sizeof(msg), "the booking expired after %llds with %lld of %lld pods scheduled",
			 (long long)(c->cfg.booking_ttl_ns / PRD_NS_PER_SEC), (long long)scheduled, (long long)want);
		pr__set_cond(c, pr, conds, PR_COND_BOOKING_EXPIRED, "True", PR_R_RESERVATION_EXPIRED, msg);
	} else {
		pr__wake_at(c, expires);
		return;
	}
	if(c->db)
		state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
	sched_snapshot_unbook(w->snap, pr->meta.uid, NULL);
}

static void gc_terminal(pr_ctl *c, const kube_provreq *pr)
{
	int64_t last = 0;
	size_t i;
	char path[700];
	prd_err e;
	for(i = 0; i < pr->nconditions; i++)
		if(pr->conditions[i].last_transition_ns > last)
			last = pr->conditions[i].last_transition_ns;
	if(c->now < last + c->cfg.gc_after_ns) {
		pr__wake_at(c, last + c->cfg.gc_after_ns);
		return;
	}
	snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/%s/provisioningrequests/%s", pr->meta.ns,
		 pr->meta.name);
	if(kube_api_call(&c->api, "DELETE", path, NULL, NULL, NULL, NULL, &e) && e.code != PRD_ENOTFOUND) {
		log_warn("cannot garbage-collect request", "request", pr->meta.name, "namespace", pr->meta.ns,
			 "error", e.msg);
		return;
	}
	log_info("deleted finished request", "namespace", pr->meta.ns, "request", pr->meta.name);
	if(c->db) {
		state_request_delete(c->db, pr->meta.uid, NULL);
		state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
	}
}

static void reconcile(pr_ctl *c, pr_world *w, const kube_provreq *pr, state_intent *intents, size_t nint)
{
	pr_class cls = pr_class_of(pr->class_name);
	pr_params pp;
	pr_conds conds;
	state_request rs;
	sched_podset *sets;
	char missing[300], msg[1024];
	prd_err e;
	int64_t deadline;
	size_t i;
	int rc;
	const char *want_proc = c->cfg.processor_instance ? c->cfg.processor_instance : "";

	if(cls == PR_CLASS_OTHER)
		return;
	{
		const char *seen = hmap_get(&c->written, pr->meta.uid);
		if(seen && !strcmp(seen, pr->meta.rv)) {
			pr__wake_at(c, c->now + PRD_NS_PER_SEC);
			return;
		}
		if(seen)
			hmap_del(&c->written, pr->meta.uid);
	}
	rc = pr_params_parse(pr, &pp, &e);
	if(!str_eq(pp.processor ? pp.processor : "", want_proc))
		return;
	c->stats.requests_seen++;
	if(pr_is_terminal(pr)) {
		gc_terminal(c, pr);
		return;
	}
	if(pr_conds_init(&conds, pr, NULL))
		return;
	memset(&rs, 0, sizeof(rs));
	if(c->db && state_request_ensure(c->db, pr->meta.uid, pr->meta.ns, pr->meta.name, &rs, &e))
		log_error("state store: cannot record request", "request", pr->meta.name, "error", e.msg);
	if(rc) {
		pr__set_cond(c, pr, &conds, PR_COND_ACCEPTED, "False", PR_R_INVALID, e.msg);
		pr__set_cond(c, pr, &conds, PR_COND_FAILED, "True", PR_R_INVALID, e.msg);
		goto write;
	}
	if(!pr_cond_true(pr, PR_COND_ACCEPTED))
		pr__set_cond(c, pr, &conds, PR_COND_ACCEPTED, "True", PR_R_ACCEPTED, "the request is accepted");

	/* An atomic request with a plan in flight follows its plan. */
	for(i = 0; i < nint; i++) {
		if(!strcmp(intents[i].request_uid, pr->meta.uid) && !state_phase_is_terminal(intents[i].phase)) {
			sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*sets));
			if(sets && resolve_podsets(w, pr, sets, missing, sizeof(missing), &e) == 0)
				pr__progress_intent(c, w, &intents[i], pr, &pp, sets, &conds);
			else
				pr__roll_back(c, w, &intents[i], "the request's PodTemplates disappeared");
			intents[i].phase = STATE_PHASE_DONE; /* handled this pass */
			goto write;
		}
	}
	if(pr_cond_true(pr, PR_COND_PROVISIONED)) {
		track_booking(c, w, pr, &conds);
		goto write;
	}
	/* Deadlines: ValidUntilSeconds and the overall maximum age. */
	deadline = pr->meta.created_ns + c->cfg.max_age_ns;
	if(pp.has_valid_until && pr->meta.created_ns + pp.valid_until_s * PRD_NS_PER_SEC < deadline)
		deadline = pr->meta.created_ns + pp.valid_until_s * PRD_NS_PER_SEC;
	if(c->now >= deadline) {
		if(pp.has_valid_until && deadline < pr->meta.created_ns + c->cfg.max_age_ns)
			snprintf(msg, sizeof(msg), "not provisioned within ValidUntilSeconds=%lld",
				 (long long)pp.valid_until_s);
		else
			snprintf(msg, sizeof(msg), "not provisioned within %lld hours of creation",
				 (long long)(c->cfg.max_age_ns / (3600 * PRD_NS_PER_SEC)));
		pr__set_cond(c, pr, &conds, PR_COND_PROVISIONED, "False", PR_R_EXPIRED, msg);
		pr__set_cond(c, pr, &conds, PR_COND_FAILED, "True", PR_R_EXPIRED, msg);
		goto write;
	}
	pr__wake_at(c, deadline);
	if(rs.next_attempt_ns > c->now) {
		pr__wake_at(c, rs.next_attempt_ns);
		goto write;
	}
	sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*sets));
	if(!sets)
		goto write;
	rc = resolve_podsets(w, pr, sets, missing, sizeof(missing), &e);
	if(rc == PRD_ENOTFOUND) {
		int64_t since = rs.first_seen_ns ? rs.first_seen_ns : pr->meta.created_ns;
		if(c->now < since + c->cfg.template_grace_ns) {
			snprintf(msg, sizeof(msg), "waiting for PodTemplate %s in namespace %s", missing, pr->meta.ns);
			pr__set_cond(c, pr, &conds, PR_COND_PROVISIONED, "False", PR_R_WAITING_TEMPLATES, msg);
			pr__wake_at(c, c->now + 10 * PRD_NS_PER_SEC < since + c->cfg.template_grace_ns
					  ? c->now + 10 * PRD_NS_PER_SEC : since + c->cfg.template_grace_ns);
		} else {
			snprintf(msg, sizeof(msg), "PodTemplate %s not found in namespace %s after waiting %llds", missing,
				 pr->meta.ns, (long long)(c->cfg.template_grace_ns / PRD_NS_PER_SEC));
			pr__set_cond(c, pr, &conds, PR_COND_PROVISIONED, "False", PR_R_CREATE_PODS_FAILED, msg);
			pr__set_cond(c, pr, &conds, PR_COND_FAILED, "True", PR_R_CREATE_PODS_FAILED, msg);
		}
		goto write;
	}
	if(rc) {
		pr__set_cond(c, pr, &conds, PR_COND_PROVISIONED, "False", PR_R_CREATE_PODS_FAILED, e.msg);
		pr__set_cond(c, pr, &conds, PR_COND_FAILED, "True", PR_R_CREATE_PODS_FAILED, e.msg);
		goto write;
	}
	/* A booking left by an earlier pass whose status write failed must not
	 * stand in the request's own way. */
	sched_snapshot_unbook(w->snap, pr->meta.uid, NULL);
	if(cls == PR_CLASS_CHECK_CAPACITY)
		pr__check_capacity(c, w, pr, &pp, sets, &conds);
	else
		pr__start_scale_up(c, w, pr, &pp, sets, &conds);
write:
	write_status(c, pr, &conds, c->details);
	json_object_put(c->details);
	c->details = NULL;
	pr_conds_free(&conds);
	state_request_clear(&rs);
}

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

/* Gauges recomputed every pass from what the pass read (the conditions as
 * they were at the start of the pass) and from the node groups. */
static void export_gauges(pr_ctl *c, pr_world *w)
{
	static const char *const states[] = { "Pending", PR_COND_ACCEPTED, PR_COND_PROVISIONED, PR_COND_FAILED,
					      PR_COND_BOOKING_EXPIRED, PR_COND_REVOKED };
	static const pr_class classes[] = { PR_CLASS_CHECK_CAPACITY, PR_CLASS_ATOMIC_SCALE_UP };
	double counts[2][6], booked[2] = { 0, 0 };
	size_t i, k, s;
	memset(counts, 0, sizeof(counts));
	for(i = 0; i < w->nprs; i++) {
		pr_class cls = pr_class_of(w->prs[i]->class_name);
		const char *st;
		if(cls == PR_CLASS_OTHER)
			continue;
		k = cls == PR_CLASS_CHECK_CAPACITY ? 0 : 1;
		st = pr_state(w->prs[i]);
		for(s = 0; s < 6; s++)
			if(!strcmp(states[s], st))
				counts[k][s]++;
		if(!strcmp(st, PR_COND_PROVISIONED))
			booked[k]++;
	}
	for(k = 0; k < 2; k++) {
		const char *cn = pr_class_name(classes[k]);
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
			hmap live;
			hmap_init(&live, NULL);
			if(pr__group_instances(g, &live, NULL, NULL) == 0)
				metrics_gauge_set(M_NODEGROUP_SIZE, METRICS_L(g->id), (double)hmap_len(&live));
			hmap_free(&live);
		}
		metrics_gauge_set(M_NODEGROUP_TARGET, METRICS_L(g->id), g->target);
		metrics_gauge_set(M_NODEGROUP_MIN, METRICS_L(g->id), g->min);
		metrics_gauge_set(M_NODEGROUP_MAX, METRICS_L(g->id), g->max);
		metrics_gauge_set(M_NODEGROUP_BACKOFF, METRICS_L(g->id), g->backed_off && g->backoff_until > c->now);
	}
}

int pr_ctl_pass(pr_ctl *c, int64_t *next_wake_ns, prd_err *err)
{
	int64_t t0 = clk_mono(clk_real());
	pr_world w;
	state_intent *intents = NULL;
	size_t nint = 0, i;
	int rc;

	c->now = clk_wall(c->clock);
	c->next_wake = INT64_MAX;
	c->stats.passes++;
	c->fenced = false;
	c->stats.requests_seen = 0;
	c->stats.bookings_held = 0;
	rc = load_world(c, &w, err);
	if(rc) {
		world_free(&w);
		metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", prd_strerror(rc)), 1);
		return prd_err_prefix(err, "reading the cluster");
	}
	if(c->db) {
		state_booking_delete_expired(c->db, NULL, NULL);
		for(i = 0; i < w.nprs; i++)
			if(pr_class_of(w.prs[i]->class_name) == PR_CLASS_ATOMIC_SCALE_UP && !pr_is_terminal(w.prs[i]))
				pr__adopt_plan(c, w.prs[i]);
		if(state_intent_list_open(c->db, &intents, &nint, err)) {
			world_free(&w);
			metrics_counter_add(M_STATE_ERRORS, METRICS_L("intent_list"), 1);
			return prd_err_prefix(err, "reading open scale-up plans");
		}
		for(i = 0; i < nint; i++) {
			pr_group *g = pr__find_group(&w, intents[i].node_group);
			if(g)
				g->busy = true;
		}
	}
	for(i = 0; i < w.nprs; i++)
		reconcile(c, &w, w.prs[i], intents, nint);
	/* Plans whose request is gone (deleted): roll them back. */
	for(i = 0; i < nint; i++)
		if(!state_phase_is_terminal(intents[i].phase) && !find_pr_by_uid(&w, intents[i].request_uid))
			pr__roll_back(c, &w, &intents[i], "the request was deleted");
	state_intent_list_free(intents, nint);
	export_gauges(c, &w);
	world_free(&w);
	metrics_observe(M_RECONCILE_DURATION, METRICS_L("provreq"),
			(double)(clk_mono(clk_real()) - t0) / (double)PRD_NS_PER_SEC);
	if(next_wake_ns)
		*next_wake_ns = c->next_wake;
	return 0;
}

#include "provreq/controller.h"
#include "provreq/ctl_int.h"
#include "classes/details.h"
#include "classes/driver_class.h"
#include "provreq/scaledown.h"
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

static void drop_kept_requests(pr_ctl *c);

void pr_config_default(pr_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->booking_ttl_ns = 10 * NS_PER_MIN;
	cfg->provision_timeout_ns = 15 * NS_PER_MIN;
	cfg->template_grace_ns = 5 * NS_PER_MIN;
	cfg->max_age_ns = 7 * 24 * 60 * NS_PER_MIN;
	cfg->gc_after_ns = 7 * 24 * 60 * NS_PER_MIN;
	cfg->state_retention_ns = 24 * 60 * NS_PER_MIN;
	cfg->expander = "least-waste";
	cfg->scale_down = true;
	cfg->scale_down_idle_ns = 10 * NS_PER_MIN;
	cfg->driver_call_timeout_ns = 10 * PRD_NS_PER_SEC;
	cfg->status_writers = 1;
}

/* The built-in classes, then every class a loaded driver serves. */
static int register_classes(pr_ctl *c, prd_err *err)
{
	size_t i, k;
	int rc = pr_class_registry_new(&c->classes, err);
	if(!rc)
		rc = pr_class_register(c->classes, &pr_class_check_capacity, "built-in", err);
	if(!rc)
		rc = pr_class_register(c->classes, &pr_class_atomic, "built-in", err);
	for(i = 0; !rc && c->drivers && i < c->drivers->n; i++) {
		cloud_driver *d = c->drivers->v[i];
		const char *const *names;
		if(!d->api->provisioning_classes || !d->api->provision)
			continue;
		names = d->api->provisioning_classes(d->state);
		for(k = 0; !rc && names && names[k]; k++) {
			pr_class_module *m = NULL, **v;
			char who[200];
			v = realloc(c->dclasses, (c->ndclasses + 1) * sizeof(*v));
			if(!v)
				return prd_err_set(err, PRD_ENOMEM, "out of memory");
			c->dclasses = v;
			rc = pr_driver_class_new(d, names[k], c->cfg.driver_call_timeout_ns, &m, err);
			if(rc)
				break;
			c->dclasses[c->ndclasses++] = m;
			snprintf(who, sizeof(who), "driver %s (%s)", d->api->name, d->path ? d->path : "?");
			rc = pr_class_register(c->classes, m, who, err);
			if(!rc)
				log_info("provisioning class served by a driver", "class", names[k], "driver", d->api->name);
		}
	}
	return rc;
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
	hmap_init(&c->unowned, NULL);
	hmap_init(&c->idle_since, free);
	hmap_init(&c->consumers, NULL);
	hmap_init(&c->pod_blocked, NULL);
	hmap_init(&c->nfp, free);
	hmap_init(&c->nodes_by_name, NULL);
	hmap_init(&c->tpls, pr__put_json);
	hmap_init(&c->born, free);
	hmap_init(&c->made, NULL);
	hmap_init(&c->bres, NULL);
	arena_init(&c->bres_ar);
	hmap_init(&c->class_kept, free);
	hmap_init(&c->prs, NULL);
	hmap_init(&c->fenced_groups, NULL);
	pr__dirty_init(c);
	pr__shards_init(c);
	c->need_rebuild = true;
	c->limits.booking_ttl_ns = cfg->booking_ttl_ns;
	c->limits.provision_timeout_ns = cfg->provision_timeout_ns;
	c->limits.max_nodes_total = cfg->max_nodes_total;
	c->limits.max_nodes_per_scaleup = cfg->max_nodes_per_scaleup;
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
	rc = register_classes(c, err);
	if(rc) {
		pr_ctl_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* What the modules kept across passes, while the modules are still there. */
static void free_class_kept(pr_ctl *c)
{
	const pr_class_module *const *mods;
	size_t i, n = c->classes ? pr_class_modules(c->classes, &mods) : 0;
	for(i = 0; i < n; i++) {
		void **cell = hmap_get(&c->class_kept, mods[i]->name);
		if(cell && *cell && mods[i]->kept_free)
			mods[i]->kept_free(*cell);
	}
	hmap_free(&c->class_kept);
}

void pr_ctl_free(pr_ctl *c)
{
	size_t i;
	if(!c)
		return;
	free_class_kept(c);
	pr_class_registry_free(c->classes);
	sched_snapshot_free(c->base);
	for(i = 0; i < c->ndclasses; i++)
		pr_driver_class_free(c->dclasses[i]);
	free(c->dclasses);
	sched_expander_free(c->expander);
	kube_recorder_free(c->recorder);
	pr__status_discard(c);
	pr__marks_discard(c);
	free(c->marks);
	hmap_free(&c->written);
	hmap_free(&c->unowned);
	hmap_free(&c->idle_since);
	json_object_put(c->details);
	free(c->fed_gen);
	free(c->fed);
	pr__dirty_free(c);
	pr__shards_free(c);
	hmap_free(&c->consumers);
	hmap_free(&c->pod_blocked);
	hmap_free(&c->nfp);
	hmap_free(&c->nodes_by_name);
	hmap_free(&c->tpls);
	hmap_free(&c->born);
	hmap_free(&c->made);
	hmap_free(&c->bres);
	arena_free(&c->bres_ar);
	drop_kept_requests(c);
	hmap_free(&c->prs);
	hmap_free(&c->fenced_groups);
	free(c);
}

int pr_ctl_use_event_api(pr_ctl *c, const kube_api *api, unsigned senders, prd_err *err)
{
	kube_recorder_opts ro;
	kube_recorder *r = NULL;
	int rc;
	memset(&ro, 0, sizeof(ro));
	ro.clock = c->clock;
	ro.senders = senders;
	c->ev_api = *api;
	rc = kube_recorder_new(&c->ev_api, &ro, &r, err);
	if(rc)
		return prd_err_prefix(err, "event recorder");
	kube_recorder_free(c->recorder);
	c->recorder = r;
	return 0;
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

void pr_ctl_set_term(pr_ctl *c, const char *key, const char *identity, int64_t transitions)
{
	uint64_t t = key && key[0] && transitions >= 0 ? (uint64_t)transitions + 1 : 0;
	if(identity && identity[0])
		snprintf(c->term, sizeof(c->term), "%s#%lld", identity, (long long)transitions);
	else
		c->term[0] = '\0';
	if(t != c->fence_term || strcmp(c->fence_key, key && t ? key : "")) {
		hmap_free(&c->fenced_groups);
		hmap_init(&c->fenced_groups, NULL);
	}
	str_copy(c->fence_key, sizeof(c->fence_key), key && t ? key : "");
	c->fence_term = t;
}

/* ---- reading the world ------------------------------------------------- */

static void world_free(pr_world *w)
{
	size_t i;
	for(i = 0; i < w->nobjs; i++)
		kube_obj_free(w->in, w->objs[i]);
	if(w->inf && !w->prs_kept) {
		for(i = 0; i < w->nprs; i++)
			kube_obj_free(w->inf->intern, &w->prs[i]->meta);
	}
	free(w->objs);
	free(w->nodes);
	free(w->pods);
	free(w->prs);
	hmap_free(&w->uids);
	hmap_free(&w->blocking);
	free(w->marked);
	hmap_free(&w->own_tpls);
	hmap_free(&w->class_data);
	for(i = 0; i < w->ngroups; i++) {
		pr_group_unlist(&w->groups[i]);
		free(w->groups[i].id);
		json_object_put(w->groups[i].tmpl_json);
	}
	free(w->groups);
	sched_snapshot_free(w->snap);
	pr_dra_free(&w->dra);
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

/* The DRA devices a new node of the group publishes, when its driver
 * declares them (ABI 1.2). */
static int template_devices(pr_world *w, cloud_driver *drv, pr_group *pg, prd_err *err)
{
	prd_cloud_error de;
	json_object *arr;
	char *js = NULL;
	int rc;
	if(!CLOUD_DRIVER_HAS(drv->api, template_resource_slices) || !drv->api->template_resource_slices)
		return 0;
	memset(&de, 0, sizeof(de));
	if(drv->api->template_resource_slices(drv->state, pg->id, &js, &de))
		return prd_err_set(err, PRD_EIO, "template ResourceSlices: %s", de.message);
	if(!js)
		return 0;
	arr = json_tokener_parse(js);
	drv->api->release_string(drv->state, js);
	if(!arr)
		return prd_err_set(err, PRD_EINVAL, "template ResourceSlices: not JSON");
	rc = pr_dra_template_devices(&w->ar, arr, pg->tmpl.name, &pg->tmpl.devices, &pg->tmpl.n_devices, err);
	if(!rc && pg->tmpl.n_devices && arena_defer(&w->ar, pr__put_json, arr)) {
		json_object_put(arr);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(rc || !pg->tmpl.n_devices)
		json_object_put(arr);
	return rc;
}

/* ---- telling drivers about Nodes (ABI 1.2 nodes_changed) --------------- */

typedef struct node_feed {
	kube_informer *inf;
	arena ar;
	hmap names;               /* names already in v */
	prd_cloud_node *v;
	size_t n, cap;
	bool nomem;
} node_feed;

/* One Node as the cache has it now (NULL: gone), copied into the feed's
 * arena: the driver is called after the cache lock is released. */
static void feed_node(node_feed *f, const char *name, const kube_node *kn)
{
	prd_cloud_node *d;
	size_t i;
	if(f->nomem || hmap_has(&f->names, name))
		return;
	if(f->n == f->cap) {
		size_t nc = f->cap ? f->cap * 2 : 64;
		prd_cloud_node *nv = realloc(f->v, nc * sizeof(*nv));
		if(!nv) {
			f->nomem = true;
			return;
		}
		f->v = nv;
		f->cap = nc;
	}
	d = &f->v[f->n];
	memset(d, 0, sizeof(*d));
	d->name = arena_strdup(&f->ar, name);
	if(!d->name || hmap_put(&f->names, d->name, NULL)) {
		f->nomem = true;
		return;
	}
	f->n++;
	if(!kn)
		return;
	d->present = 1;
	d->ready = kn->ready == KUBE_COND_TRUE;
	d->deleting = kn->meta.deleted_ns != 0;
	d->provider_id = kn->provider_id ? arena_strdup(&f->ar, kn->provider_id) : NULL;
	if(kn->nlabels) {
		prd_cloud_label *l = arena_array(&f->ar, kn->nlabels, sizeof(*l));
		if(!l) {
			f->nomem = true;
			return;
		}
		for(i = 0; i < kn->nlabels; i++) {
			l[i].key = arena_strdup(&f->ar, kn->labels[i].key);
			l[i].value = arena_strdup(&f->ar, kn->labels[i].value ? kn->labels[i].value : "");
			f->nomem |= !l[i].key || !l[i].value;
		}
		d->labels = l;
		d->nlabels = kn->nlabels;
	}
	f->nomem |= kn->provider_id && !d->provider_id;
}

static int feed_all(void *ud, const kube_meta *m)
{
	feed_node(ud, m->name, (const kube_node *)m);
	return 0;
}

static int feed_key(void *ud, const char *ns, const char *name)
{
	node_feed *f = ud;
	feed_node(f, name, (const kube_node *)kube_informer_get(f->inf, ns, name));
	return 0;
}

/* Tell a driver that reads Nodes what changed in the Node cache since it
 * was last told (everything the first time, or when the cache's journal
 * no longer reaches back that far), so its refresh need not list Nodes. */
static void feed_nodes(pr_ctl *c, size_t d)
{
	cloud_driver *drv = c->drivers->v[d];
	node_feed f;
	uint64_t gen;
	bool full;
	prd_cloud_error de;
	int rc;
	if(!c->use_inf || !CLOUD_DRIVER_HAS(drv->api, nodes_changed) || !drv->api->nodes_changed)
		return;
	if(c->nfed < c->drivers->n) {
		uint64_t *g = realloc(c->fed_gen, c->drivers->n * sizeof(*g));
		bool *b = g ? realloc(c->fed, c->drivers->n * sizeof(*b)) : NULL;
		if(g)
			c->fed_gen = g;
		if(!b)
			return; /* the driver lists, as without this */
		c->fed = b;
		memset(c->fed + c->nfed, 0, (c->drivers->n - c->nfed) * sizeof(*b));
		c->nfed = c->drivers->n;
	}
	memset(&f, 0, sizeof(f));
	f.inf = c->inf.nodes;
	arena_init(&f.ar);
	hmap_init(&f.names, NULL);
	kube_informer_rdlock(c->inf.nodes);
	gen = kube_informer_generation(c->inf.nodes);
	full = !c->fed[d];
	if(!full && gen != c->fed_gen[d] && kube_informer_changes(c->inf.nodes, c->fed_gen[d], feed_key, &f)) {
		full = true; /* lost track: everything */
		f.n = 0;
		hmap_free(&f.names);
		hmap_init(&f.names, NULL);
	}
	if(full)
		kube_informer_foreach(c->inf.nodes, feed_all, &f);
	kube_informer_rdunlock(c->inf.nodes);
	memset(&de, 0, sizeof(de));
	if(f.nomem)
		rc = PRD_CLOUD_ENOMEM;
	else if(!full && f.n == 0)
		rc = 0; /* nothing changed: nothing to say */
	else
		rc = drv->api->nodes_changed(drv->state, f.v, f.n, full, &de);
	c->fed[d] = rc == 0;
	c->fed_gen[d] = gen;
	if(rc)
		log_warn("cannot tell a driver about Nodes; it is told everything next pass", "driver",
			 drv->api->name, "error", f.nomem ? "out of memory" : de.message);
	hmap_free(&f.names);
	arena_free(&f.ar);
	free(f.v);
}

/* Before a term acts on a group, the group records the term (ABI 1.4
 * fence), so that a late call of an earlier leader (stalled inside or
 * before the call) is refused by the cloud. Until every group of a fencing
 * driver has confirmed it, the pass acts on nothing (retried a second
 * later): a former leader's call may still land on a group that has not.
 * A group that has seen a newer term says this replica no longer leads. */
static void fence_group(pr_ctl *c, pr_group *g)
{
	const prd_cloud_driver *api = g->drv->api;
	prd_cloud_error de;
	int rc;
	if(!c->fence_term || !(cloud_driver_caps(api) & PRD_CLOUD_CAP_FENCE) || !CLOUD_DRIVER_HAS(api, fence) ||
	   !api->fence || hmap_has(&c->fenced_groups, g->id) || !pr__may_act(c))
		return;
	memset(&de, 0, sizeof(de));
	rc = api->fence(g->drv->state, g->id, c->fence_key, c->fence_term, &de);
	de.message[sizeof(de.message) - 1] = '\0';
	if(rc == 0 && hmap_put(&c->fenced_groups, g->id, NULL) == 0) {
		log_debug("node group fenced for this leader term", "group", g->id, "term", c->term);
		return;
	}
	c->fenced = true;
	metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", "fenced"), 1);
	if(rc == PRD_CLOUD_ECONFLICT) {
		log_warn("a node group has seen a newer leader term: this replica no longer leads; the pass stops "
			 "acting",
			 "group", g->id, "term", c->term, "error", de.message);
		return;
	}
	if(c->next_wake > c->now + PRD_NS_PER_SEC)
		c->next_wake = c->now + PRD_NS_PER_SEC;
	log_warn("cannot fence a node group for this leader term: the pass acts on nothing until every group is "
		 "fenced; retrying",
		 "group", g->id, "error", rc ? de.message : "out of memory");
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
		feed_nodes(c, d);
		if(drv->api->refresh(drv->state, &de) || drv->api->node_groups(drv->state, &g, &n, &de)) {
			prd_err e;
			cloud_driver_error(drv, "listing node groups", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
			log_error("cannot list node groups; scale-ups through this driver wait", "error", e.msg);
			w->groups_incomplete = true;
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
				if(pg->tmpl_json && pr_conv_node(&w->ar, pg->tmpl_json, &pg->tmpl, &ce) == 0 &&
				   template_devices(w, drv, pg, &ce) == 0)
					pg->has_tmpl = true;
				else
					log_warn("node group template is not a usable Node", "group", pg->id,
						 "error", pg->tmpl_json ? ce.msg : "not JSON");
			} else {
				log_warn("node group has no template node", "group", pg->id, "error", de.message);
			}
			if(c->db)
				state_group_backed_off(c->db, pg->id, &pg->backed_off, &pg->backoff_until, NULL);
			if(c->fence_term) {
				pg->fence_key = c->fence_key;
				pg->fence_term = c->fence_term;
			}
			fence_group(c, pg);
		}
		drv->api->release_node_groups(drv->state, g, n);
	}
	return 0;
}

/* Ready and not being deleted: a node the simulation may use. */
static bool node_usable(const kube_node *n)
{
	return n->ready == KUBE_COND_TRUE && !n->meta.deleted_ns;
}

/* ---- what the snapshot is built from, as one number ----------------------
 *
 * FNV-1a over what a node or pod gives the simulation (not its status
 * heartbeats or conditions), summed over all objects with their keys, so
 * the order of the caches does not matter. Two equal fingerprints mean a
 * rebuilt snapshot would hold the same nodes and pods. */

#define FP_PRIME 1099511628211ULL
#define FP_BASIS 14695981039346656037ULL

static uint64_t fp_str(uint64_t h, const char *s)
{
	for(; s && *s; s++)
		h = (h ^ (uint8_t)*s) * FP_PRIME;
	return (h ^ 0xffu) * FP_PRIME; /* a separator: "ab","c" differs from "a","bc" */
}

static uint64_t fp_int(uint64_t h, uint64_t v)
{
	int i;
	for(i = 0; i < 8; i++, v >>= 8)
		h = (h ^ (v & 0xffu)) * FP_PRIME;
	return h;
}

static uint64_t fp_kvs(uint64_t h, const kube_kv *kv, size_t n)
{
	size_t i;
	h = fp_int(h, n);
	for(i = 0; i < n; i++)
		h = fp_str(fp_str(h, kv[i].key), kv[i].value);
	return h;
}

static uint64_t fp_res(uint64_t h, const kube_res *r, size_t n)
{
	size_t i;
	h = fp_int(h, n);
	for(i = 0; i < n; i++)
		h = fp_int(fp_int(fp_str(h, r[i].name), r[i].q.lo), (uint64_t)r[i].q.hi);
	return h;
}

/* Mix a key's hash with its content's, to be summed (order-free). */
static uint64_t fp_mix(uint64_t key, uint64_t content)
{
	uint64_t x = key ^ (content * 0x9e3779b97f4a7c15ULL);
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

static uint64_t node_fp(const kube_node *n)
{
	uint64_t h = FP_BASIS;
	size_t i;
	if(!node_usable(n))
		return 0; /* not in the snapshot */
	h = fp_kvs(h, n->labels, n->nlabels);
	h = fp_res(h, n->allocatable, n->nallocatable);
	h = fp_int(h, n->ntaints);
	for(i = 0; i < n->ntaints; i++)
		h = fp_int(fp_str(fp_str(h, n->taints[i].key), n->taints[i].value), n->taints[i].effect);
	h = fp_int(h, n->unschedulable);
	return fp_mix(fp_str(FP_BASIS, n->meta.name), h);
}

static uint64_t pod_fp(const kube_pod *p)
{
	uint64_t h = FP_BASIS;
	size_t i;
	if(!p->node_name || p->phase == KUBE_POD_SUCCEEDED || p->phase == KUBE_POD_FAILED)
		return 0; /* not in the snapshot */
	h = fp_str(fp_str(h, p->meta.ns), p->node_name);
	h = fp_kvs(h, p->labels, p->nlabels);
	h = fp_res(h, p->requests, p->nrequests);
	h = fp_int(h, p->nhost_ports);
	for(i = 0; i < p->nhost_ports; i++)
		h = fp_int(fp_int(fp_str(h, p->host_ports[i].host_ip), (uint64_t)p->host_ports[i].port),
			   p->host_ports[i].protocol);
	h = fp_str(h, p->affinity_json);
	return fp_mix(fp_str(fp_str(FP_BASIS, p->meta.ns), p->meta.name), h);
}

/* In informer mode the pods are borrowed from the cache only when a pass
 * needs them: when they changed, or the snapshot is built anew. */
static int need_pods(pr_ctl *c, pr_world *w, prd_err *err)
{
	if(w->pods_read)
		return 0;
	w->pods_read = true;
	return borrow_all(c->inf.pods, (void ***)&w->pods, &w->npods, err);
}

static uint64_t nodes_fp(const pr_world *w)
{
	uint64_t sum = 0;
	size_t i;
	for(i = 0; i < w->nnodes; i++)
		sum += node_fp(w->nodes[i]);
	return sum;
}

static uint64_t pods_fp(const pr_world *w)
{
	uint64_t sum = 0;
	size_t i;
	for(i = 0; i < w->npods; i++)
		sum += pod_fp(w->pods[i]);
	return sum;
}

/* A Node as the snapshot needs it, with the devices its ResourceSlices
 * publish. */
static int node_spec(pr_world *w, const kube_node *n, sched_node_spec *ns, prd_err *err)
{
	int rc = pr_conv_kube_node(&w->ar, n, ns, err);
	if(!rc)
		ns->devices = pr_dra_node_devices(&w->dra, n->meta.name, &ns->n_devices);
	return rc;
}

/* Devices ResourceClaims hold. */
static void take_devices(pr_world *w, sched_snapshot *s)
{
	size_t i, idx;
	for(i = 0; i < w->dra.ntaken; i++) {
		prd_err ce;
		if(sched_snapshot_find_node(s, w->dra.taken_node[i], &idx))
			continue; /* a node left out of the simulation */
		if(sched_snapshot_take_device(s, idx, w->dra.taken[i], &ce))
			log_warn("allocated device not marked taken", "error", ce.msg);
	}
}

/* Nodes and pods into a new snapshot. */
static int snapshot_nodes_pods(pr_world *w, prd_err *err)
{
	size_t i;
	w->snap = sched_snapshot_new();
	if(!w->snap)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < w->nnodes; i++) {
		sched_node_spec ns;
		prd_err ce;
		if(!node_usable(w->nodes[i]))
			continue;
		if(node_spec(w, w->nodes[i], &ns, &ce) ||
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
		if(sched_snapshot_find_node(w->snap, p->node_name, &idx)) {
			w->skipped_pods++;
			continue;
		}
		if(pr_conv_kube_pod(&w->ar, p, &ps, &ce) || sched_snapshot_add_pods(w->snap, idx, &ps, 1, &ce))
			log_warn("pod left out of the simulation", "pod", p->meta.name, "namespace", p->meta.ns,
				 "error", ce.msg);
	}
	take_devices(w, w->snap);
	return 0;
}

/* ---- the nodes' fingerprint, kept from the node cache's journal ------- */

/* May this pass keep what it derives from the caches up to date from their
 * journals (else it derives it anew; cfg.full_passes is the reference the
 * tests compare with)? */
static bool incremental(const pr_ctl *c, const pr_world *w)
{
	return w->cacheable && !c->cfg.full_passes;
}

typedef struct nfp_walk {
	pr_ctl *c;
	bool nomem;
} nfp_walk;

static void nfp_set(nfp_walk *nw, const char *name, uint64_t fp)
{
	pr_ctl *c = nw->c;
	uint64_t *old = hmap_get(&c->nfp, name), *v;
	c->nfp_sum += fp - (old ? *old : 0);
	if(!fp) {
		hmap_del(&c->nfp, name);
		return;
	}
	if(old) {
		*old = fp;
		return;
	}
	v = malloc(sizeof(*v));
	if(!v || hmap_put(&c->nfp, name, v)) {
		free(v);
		nw->nomem = true;
		return;
	}
	*v = fp;
}

static int nfp_changed(void *ud, const char *ns, const char *name)
{
	nfp_walk *nw = ud;
	const kube_node *n = (const kube_node *)kube_informer_get(nw->c->inf.nodes, ns, name);
	nfp_set(nw, name, n ? node_fp(n) : 0);
	return nw->nomem;
}

/* nodes_fp(w), in informer mode from the changes since the previous pass
 * instead of every node (read locks held). */
static uint64_t nodes_fp_now(pr_ctl *c, pr_world *w)
{
	nfp_walk nw = { c, false };
	size_t i;
	if(!incremental(c, w))
		return nodes_fp(w);
	if(c->nfp_valid && c->nfp_gen == w->gen_nodes)
		return c->nfp_sum;
	if(!c->nfp_valid || kube_informer_changes(c->inf.nodes, c->nfp_gen, nfp_changed, &nw)) {
		hmap_free(&c->nfp);
		hmap_init(&c->nfp, free);
		c->nfp_sum = 0;
		nw.nomem = false;
		for(i = 0; i < w->nnodes && !nw.nomem; i++)
			nfp_set(&nw, w->nodes[i]->meta.name, node_fp(w->nodes[i]));
	}
	c->nfp_valid = !nw.nomem; /* (only reached when incremental) */
	c->nfp_gen = w->gen_nodes;
	return nw.nomem ? nodes_fp(w) : c->nfp_sum;
}

static int node_name_cmp(const void *a, const void *b)
{
	return strcmp((*(const kube_node *const *)a)->meta.name, (*(const kube_node *const *)b)->meta.name);
}

typedef struct new_nodes {
	pr_ctl *c;
	pr_world *w;
	hmap seen;
	const kube_node **v;
	size_t n, cap;
	uint64_t added;
	bool nomem;
} new_nodes;

/* A usable node not in the base yet, once. */
static void new_node(new_nodes *nn, const kube_node *node)
{
	size_t idx;
	if(!node || !node_usable(node) || hmap_has(&nn->seen, node->meta.name) ||
	   sched_snapshot_find_node(nn->c->base, node->meta.name, &idx) == 0)
		return;
	if(nn->n == nn->cap) {
		size_t cap = nn->cap ? nn->cap * 2 : 64;
		const kube_node **v = realloc(nn->v, cap * sizeof(*v));
		if(!v) {
			nn->nomem = true;
			return;
		}
		nn->v = v;
		nn->cap = cap;
	}
	if(hmap_put(&nn->seen, node->meta.name, NULL)) {
		nn->nomem = true;
		return;
	}
	nn->v[nn->n++] = node;
	nn->added += node_fp(node);
}

static int new_node_key(void *ud, const char *ns, const char *name)
{
	new_nodes *nn = ud;
	new_node(nn, (const kube_node *)kube_informer_get(nn->c->inf.nodes, ns, name));
	return nn->nomem;
}

/* Nodes that turned usable and are not in the base yet, when that is all
 * that changed (the node registrations of a scale-up): add them to the
 * base. False when anything else changed. In informer mode only the nodes
 * changed since the base was last current are looked at. */
static bool base_add_nodes(pr_ctl *c, pr_world *w, uint64_t nfp)
{
	new_nodes nn;
	size_t i, n;
	const kube_node **v;
	bool ok;
	if(c->base_skipped)
		return false; /* pods wait for nodes not in the base: rebuild */
	memset(&nn, 0, sizeof(nn));
	nn.c = c;
	nn.w = w;
	hmap_init(&nn.seen, NULL);
	if(!incremental(c, w) || kube_informer_changes(c->inf.nodes, c->base_gen_nodes, new_node_key, &nn)) {
		nn.n = 0;
		nn.added = 0;
		nn.nomem = false;
		hmap_free(&nn.seen);
		hmap_init(&nn.seen, NULL);
		for(i = 0; i < w->nnodes && !nn.nomem; i++)
			new_node(&nn, w->nodes[i]);
	}
	hmap_free(&nn.seen);
	ok = !nn.nomem && nn.n && nfp - nn.added == c->base_nodes_fp;
	/* By name: the same nodes go into the snapshot in the same order
	 * whichever way they were found (the order placement tries them). */
	if(ok)
		qsort(nn.v, nn.n, sizeof(*nn.v), node_name_cmp);
	v = arena_array(&w->ar, nn.n + 1, sizeof(*v));
	if(ok && v)
		memcpy(v, nn.v, nn.n * sizeof(*v));
	n = nn.n;
	free(nn.v);
	if(!ok || !v)
		return false;
	for(i = 0; i < n; i++) {
		sched_node_spec ns;
		prd_err ce;
		if(node_spec(w, v[i], &ns, &ce))
			return false; /* a rebuild says which */
		if(sched_snapshot_add_node(c->base, &ns, NULL, &ce)) {
			/* Part added: the base is no longer what its records say. */
			sched_snapshot_free(c->base);
			c->base = NULL;
			return false;
		}
		c->base_ready++;
	}
	c->base_nodes_fp = nfp;
	c->stats.snapshot_node_adds += n;
	return true;
}

/* verify_snapshot: the reused base against a snapshot built anew from the
 * same objects, node by node (by name: the order may differ), on every
 * resource the simulation knows. */
static void verify_base(pr_ctl *c, pr_world *w)
{
	static const char *const res[] = { "cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu" };
	sched_snapshot *fresh;
	int64_t ready = w->ready_nodes;
	size_t skipped = w->skipped_pods, i, k, n, bad = 0;
	prd_err e;
	w->snap = NULL;
	w->ready_nodes = 0;
	if(need_pods(c, w, &e) || snapshot_nodes_pods(w, &e)) {
		sched_snapshot_free(w->snap);
		w->snap = NULL;
		return;
	}
	fresh = w->snap;
	w->snap = NULL;
	w->ready_nodes = ready;
	w->skipped_pods = skipped;
	n = sched_snapshot_node_count(fresh);
	if(n != sched_snapshot_node_count(c->base))
		bad++;
	for(i = 0; i < n && !bad; i++) {
		size_t j;
		if(sched_snapshot_find_node(c->base, sched_snapshot_node_name(fresh, i), &j)) {
			bad++;
			break;
		}
		for(k = 0; k < sizeof(res) / sizeof(res[0]); k++) {
			int64_t a = 0, b = 0;
			sched_snapshot_node_free(fresh, i, res[k], &a);
			sched_snapshot_node_free(c->base, j, res[k], &b);
			bad += a != b;
		}
		{
			size_t fa = 0, fb = 0;
			bad += sched_snapshot_node_devices(fresh, i, &fa) != sched_snapshot_node_devices(c->base, j, &fb);
			bad += fa != fb;
		}
	}
	if(bad) {
		c->stats.snapshot_mismatches++;
		log_warn("the kept scheduling snapshot differs from a rebuild", "nodes", LOGI(n));
	}
	sched_snapshot_free(fresh);
}

/* Can the base serve this pass (updated in place where it can)? */
static bool base_serves(pr_ctl *c, pr_world *w)
{
	bool nodes_same, pods_same;
	prd_err e;
	if(!w->cacheable || !c->base)
		return false;
	/* Devices or claims' allocations changed: rebuild (rare; a device
	 * list is read whole). */
	if(w->dra.fp != c->base_dra_fp)
		return false;
	nodes_same = c->base_gen_nodes == w->gen_nodes;
	pods_same = c->base_gen_pods == w->gen_pods;
	/* Something changed; most changes (heartbeats, pod conditions)
	 * change nothing the simulation reads. */
	if(!pods_same)
		pods_same = need_pods(c, w, &e) == 0 && pods_fp(w) == c->base_pods_fp;
	if(pods_same && !nodes_same) {
		uint64_t nfp = nodes_fp_now(c, w);
		nodes_same = nfp == c->base_nodes_fp || base_add_nodes(c, w, nfp);
	}
	if(!c->base || !nodes_same || !pods_same)
		return false;
	c->base_gen_nodes = w->gen_nodes;
	c->base_gen_pods = w->gen_pods;
	return true;
}

/* The snapshot of nodes and pods: the controller's base when the caches
 * have not changed since it was built in a way the simulation reads (a
 * pass then costs nothing for a cluster that only gained a request), or
 * changed only by nodes that turned usable; else a new one, kept as the
 * base in informer mode. The pass works in a fork of a shared base. */
static int snapshot_for_pass(pr_ctl *c, pr_world *w, prd_err *err)
{
	int rc;
	if(base_serves(c, w)) {
		if(c->cfg.verify_snapshot)
			verify_base(c, w);
		w->snap = c->base;
		w->ready_nodes = c->base_ready;
		w->snap_shared = true;
		c->stats.snapshot_reuses++;
	} else {
		if((rc = need_pods(c, w, err)) || (rc = snapshot_nodes_pods(w, err)))
			return rc;
		if(w->cacheable) {
			sched_snapshot_free(c->base);
			c->base = w->snap;
			c->base_nodes_fp = nodes_fp_now(c, w);
			c->base_pods_fp = pods_fp(w);
			c->base_dra_fp = w->dra.fp;
			c->base_skipped = w->skipped_pods;
			c->base_gen_nodes = w->gen_nodes;
			c->base_gen_pods = w->gen_pods;
			c->base_ready = w->ready_nodes;
			w->snap_shared = true;
		}
	}
	if(w->snap_shared && sched_snapshot_fork(w->snap)) {
		/* Cannot protect the base: the pass owns it, it is not kept. */
		c->base = NULL;
		w->snap_shared = false;
	}
	return 0;
}

/* End of a pass: give the base back as it was built. */
static void release_snapshot(pr_ctl *c, pr_world *w)
{
	if(!w->snap_shared)
		return;
	w->snap_shared = false;
	if(sched_snapshot_depth(w->snap) != 1) {
		/* Unbalanced forks: what the base holds is not known; world_free
		 * frees it and the next pass builds anew. */
		log_warn("scheduling snapshot left forked at the end of a pass; rebuilding it", "depth",
			 LOGI(sched_snapshot_depth(w->snap)));
		c->base = NULL;
		return;
	}
	sched_snapshot_revert(w->snap);
	w->snap = NULL;
}

/* What the pods give a pass besides the snapshot: the scheduled consumer
 * pods of each request, and the nodes where a pod that blocks scale-down
 * runs. Kept while the pod cache's generation does not move (a scale-up's
 * node registrations change no pod). */
static int digest_pods(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t i;
	int rc;
	if(incremental(c, w) && c->pods_digested && c->pods_digest_gen == w->gen_pods)
		return 0;
	if((rc = need_pods(c, w, err)))
		return rc;
	c->pods_digested = false;
	hmap_free(&c->consumers);
	hmap_free(&c->pod_blocked);
	hmap_init(&c->consumers, NULL);
	hmap_init(&c->pod_blocked, NULL);
	for(i = 0; i < w->npods; i++) {
		const kube_pod *p = w->pods[i];
		char key[600];
		if(pr__pod_blocks_scaledown(p) && hmap_put(&c->pod_blocked, p->node_name, (void *)1))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		if(!p->node_name || !p->consume || p->phase == KUBE_POD_FAILED)
			continue;
		snprintf(key, sizeof(key), "%s/%s", p->meta.ns, p->consume);
		if(hmap_put(&c->consumers, key, (void *)((uintptr_t)hmap_get(&c->consumers, key) + 1)))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	c->pods_digested = incremental(c, w);
	c->pods_digest_gen = w->gen_pods;
	return 0;
}

static bool made_by_us(const kube_node *n)
{
	size_t i;
	for(i = 0; i < n->nannotations; i++)
		if(!strcmp(n->annotations[i].key, PR_ANN_PROVISIONED_FOR_UID))
			return true;
	return false;
}

/* One node into the node tables. 0 or PRD_ENOMEM. */
static int node_note(pr_ctl *c, const kube_node *n)
{
	int64_t *born = hmap_get(&c->born, n->meta.name);
	if(hmap_put(&c->nodes_by_name, n->meta.name, node_usable(n) ? PR_NODE_USABLE : PR_NODE_PRESENT))
		return PRD_ENOMEM;
	if(!born) {
		born = malloc(sizeof(*born));
		if(!born || hmap_put(&c->born, n->meta.name, born)) {
			free(born);
			return PRD_ENOMEM;
		}
	}
	*born = n->meta.created_ns;
	if(!made_by_us(n))
		hmap_del(&c->made, n->meta.name);
	else if(hmap_put(&c->made, n->meta.name, NULL))
		return PRD_ENOMEM;
	return 0;
}

static int node_state_changed(void *ud, const char *ns, const char *name)
{
	pr_ctl *c = ud;
	const kube_node *n = (const kube_node *)kube_informer_get(c->inf.nodes, ns, name);
	if(!n) {
		hmap_del(&c->nodes_by_name, name);
		hmap_del(&c->born, name);
		hmap_del(&c->made, name);
		return 0;
	}
	return node_note(c, n);
}

/* verify_snapshot: the node tables kept from the journal against the
 * nodes. */
static void verify_node_table(pr_ctl *c, const pr_world *w)
{
	size_t i, made = 0, bad = 0;
	for(i = 0; i < w->nnodes; i++) {
		const kube_node *n = w->nodes[i];
		const int64_t *born = hmap_get(&c->born, n->meta.name);
		bool m = made_by_us(n);
		made += m;
		bad += hmap_get(&c->nodes_by_name, n->meta.name) != (node_usable(n) ? PR_NODE_USABLE : PR_NODE_PRESENT);
		bad += !born || *born != n->meta.created_ns;
		bad += m != hmap_has(&c->made, n->meta.name);
	}
	bad += hmap_len(&c->nodes_by_name) != w->nnodes || hmap_len(&c->born) != w->nnodes ||
	       hmap_len(&c->made) != made;
	if(bad) {
		c->stats.snapshot_mismatches++;
		log_warn("the node table kept from the journal differs from the nodes", "differences", LOGI(bad));
	}
}

/* Every node's presence and readiness (w->nodes_by_name), creation time
 * (c->born) and whether a plan of provreqd's made it (c->made): in
 * informer mode kept from the node cache's journal, else built anew. */
static int node_table(pr_ctl *c, pr_world *w)
{
	size_t i;
	int rc = 0;
	w->nodes_by_name = &c->nodes_by_name;
	if(incremental(c, w) && c->nbn_valid &&
	   (c->nbn_gen == w->gen_nodes || kube_informer_changes(c->inf.nodes, c->nbn_gen, node_state_changed, c) == 0)) {
		c->nbn_gen = w->gen_nodes;
		if(c->cfg.verify_snapshot)
			verify_node_table(c, w);
		return 0;
	}
	hmap_free(&c->nodes_by_name);
	hmap_free(&c->born);
	hmap_free(&c->made);
	hmap_init(&c->nodes_by_name, NULL);
	hmap_init(&c->born, free);
	hmap_init(&c->made, NULL);
	for(i = 0; i < w->nnodes && !rc; i++)
		rc = node_note(c, w->nodes[i]);
	c->nbn_valid = incremental(c, w) && !rc;
	c->nbn_gen = w->gen_nodes;
	return rc;
}

/* The nodes provreqd's plans made (w->marked, for scale-down), by name. In
 * informer mode from the node table's list of them, else from every node. */
static int marked_nodes(pr_ctl *c, pr_world *w)
{
	size_t i;
	if(!c->cfg.scale_down)
		return 0;
	if(incremental(c, w)) {
		hmap_iter it;
		const char *name;
		hmap_iter_init(&it, &c->made);
		while(hmap_iter_next(&it, &name, NULL)) {
			const kube_node *n = (const kube_node *)kube_informer_get(c->inf.nodes, "", name);
			if(n && pr__scaledown_digest(w, n))
				return PRD_ENOMEM;
		}
	} else {
		for(i = 0; i < w->nnodes; i++)
			if(pr__scaledown_digest(w, w->nodes[i]))
				return PRD_ENOMEM;
	}
	/* One order whichever way they were found: removals at a group's min
	 * size depend on it. */
	if(w->nmarked)
		qsort(w->marked, w->nmarked, sizeof(*w->marked), pr__marked_cmp);
	return 0;
}

static int tpl_changed(void *ud, const char *ns, const char *name)
{
	char key[600];
	snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
	hmap_del(ud, key);
	return 0;
}

/* verify_snapshot: every kept template copy against the cache. */
static void verify_templates(pr_ctl *c)
{
	hmap_iter it;
	const char *k;
	void *v;
	hmap_iter_init(&it, &c->tpls);
	while(hmap_iter_next(&it, &k, &v)) {
		const char *slash = strchr(k, '/');
		char ns[300];
		const kube_podtemplate *t;
		snprintf(ns, sizeof(ns), "%.*s", slash ? (int)(slash - k) : 0, k);
		t = (const kube_podtemplate *)kube_informer_get(c->inf.podtemplates, ns, slash ? slash + 1 : k);
		if(!t || !json_object_equal(t->tmpl, v)) {
			c->stats.snapshot_mismatches++;
			log_warn("a kept PodTemplate copy differs from the cache", "template", k);
		}
	}
}

/* The PodTemplates some request names, copied out of the cache (its own
 * objects cannot be used once its locks are released; on a large cluster
 * most templates belong to no request). In informer mode the copies are
 * kept between passes and only those the template cache's journal names
 * are copied again (a node registering copies none); else every pass
 * copies anew from `tp`. 0 or PRD_ENOMEM. */
static int copy_templates(pr_ctl *c, pr_world *w, void **tp, size_t ntp)
{
	hmap need;
	size_t i, k;
	int rc = 0;
	bool keep = incremental(c, w);
	if(keep && c->tpl_valid && c->tpl_gen == w->gen_tpls && w->prs_kept && !c->prs_added_or_gone) {
		/* Neither the templates nor the set of requests changed. */
		w->tpls = &c->tpls;
		if(c->cfg.verify_snapshot)
			verify_templates(c);
		return 0;
	}
	hmap_init(&need, NULL);
	for(i = 0; i < w->nprs && !rc; i++)
		for(k = 0; k < w->prs[i]->npod_sets && !rc; k++) {
			char key[600];
			snprintf(key, sizeof(key), "%s/%s", w->prs[i]->meta.ns,
				 w->prs[i]->pod_sets[k].template_name ? w->prs[i]->pod_sets[k].template_name : "");
			rc = hmap_put(&need, key, NULL);
		}
	if(keep) {
		w->tpls = &c->tpls;
		if(!c->tpl_valid ||
		   (c->tpl_gen != w->gen_tpls && kube_informer_changes(c->inf.podtemplates, c->tpl_gen, tpl_changed, &c->tpls))) {
			hmap_free(&c->tpls);
			hmap_init(&c->tpls, pr__put_json);
		}
		c->tpl_valid = false; /* until the copies below are all made */
		pr__forget_vanished(&c->tpls, &need);
		if(c->cfg.verify_snapshot)
			verify_templates(c);
	}
	for(i = 0; i < ntp && !rc; i++) {
		const kube_podtemplate *t = tp[i];
		json_object *copy = NULL;
		char key[600];
		snprintf(key, sizeof(key), "%s/%s", t->meta.ns, t->meta.name);
		if(!hmap_has(&need, key) || hmap_has(w->tpls, key))
			continue;
		if(json_object_deep_copy(t->tmpl, &copy, NULL) || hmap_put(w->tpls, key, copy)) {
			json_object_put(copy);
			rc = PRD_ENOMEM;
		}
	}
	hmap_free(&need);
	if(keep) {
		c->tpl_valid = !rc;
		c->tpl_gen = w->gen_tpls;
		c->prs_added_or_gone = rc != 0;
	}
	return rc;
}

/* Everything the pass needs from the objects, in memory the world owns:
 * node presence and readiness, scheduled consumer pods per request, the
 * PodTemplates' templates, and the scheduling snapshot. */
static int digest(pr_ctl *c, pr_world *w, void **tp, size_t ntp, prd_err *err)
{
	size_t i;
	int rc;
	for(i = 0; i < w->nprs; i++)
		if(hmap_put(&w->uids, w->prs[i]->meta.uid, NULL))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(node_table(c, w) || marked_nodes(c, w))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if((rc = digest_pods(c, w, err)))
		return rc;
	/* Only the marked nodes' pods matter. */
	for(i = 0; i < w->nmarked; i++)
		if(hmap_put(&w->blocking, w->marked[i].name, hmap_get(&c->pod_blocked, w->marked[i].name)))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if((rc = copy_templates(c, w, tp, ntp)))
		return prd_err_set(err, rc, "out of memory");
	/* (Not in a pass that may not act: a term whose groups are not all
	 * fenced yet rebuilds in the first pass that may.) */
	if(c->need_rebuild && c->db && !c->fenced) {
		pr__rebuild_from_api(c, w);
		c->need_rebuild = false;
		w->term_began = true;
	}
	pr__shards_sync(c, w);
	/* (The bookings go in when the pass first asks for it: pr__snap.) */
	return snapshot_for_pass(c, w, err);
}

/* The resource.k8s.io objects from the informers (locked here, after the
 * other four), when there are any. */
static int dra_from_informers(pr_ctl *c, pr_world *w, prd_err *err)
{
	kube_informer *inf[4] = { c->inf.resourceslices, c->inf.deviceclasses, c->inf.claimtemplates,
				  c->inf.claims };
	collect all = { NULL, 0, 0 };
	size_t i;
	int rc = 0;
	for(i = 0; i < 4; i++)
		if(!inf[i])
			return 0;
	for(i = 0; i < 4; i++)
		kube_informer_rdlock(inf[i]);
	for(i = 0; i < 4 && !rc; i++)
		if(kube_informer_foreach(inf[i], collect_obj, &all))
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(!rc)
		rc = pr_dra_load(&w->dra, &w->ar, (const kube_meta *const *)all.v, all.n, NULL, err);
	for(i = 4; i > 0; i--)
		kube_informer_rdunlock(inf[i - 1]);
	free(all.v);
	return rc;
}

/* The same by listing; a cluster that does not serve resource.k8s.io/v1
 * (or forbids reading it) just has no DRA. */
static int dra_from_api(pr_ctl *c, pr_world *w, prd_err *err)
{
	static const char *const paths[4] = { "/apis/resource.k8s.io/v1/resourceslices",
					      "/apis/resource.k8s.io/v1/deviceclasses",
					      "/apis/resource.k8s.io/v1/resourceclaimtemplates",
					      "/apis/resource.k8s.io/v1/resourceclaims" };
	static const kube_kind kinds[4] = { KUBE_KIND_RESOURCESLICE, KUBE_KIND_DEVICECLASS,
					    KUBE_KIND_RESOURCECLAIMTEMPLATE, KUBE_KIND_RESOURCECLAIM };
	collect all = { NULL, 0, 0 };
	size_t i, j;
	int rc = 0;
	for(i = 0; i < 4 && !rc; i++) {
		void **v = NULL;
		size_t n = 0;
		prd_err le;
		rc = list_kind(c, w, paths[i], kinds[i], &v, &n, &le);
		if(rc == PRD_ENOTFOUND || rc == PRD_EPERM) {
			free(all.v);
			return 0;
		}
		if(rc) {
			if(err)
				*err = le;
			break;
		}
		for(j = 0; j < n && !rc; j++)
			if(collect_obj(&all, v[j]))
				rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		free(v);
	}
	if(!rc)
		rc = pr_dra_load(&w->dra, &w->ar, (const kube_meta *const *)all.v, all.n, NULL, err);
	free(all.v);
	return rc;
}

static void free_kept_request(pr_ctl *c, kube_provreq *pr)
{
	if(pr)
		kube_obj_free(c->inf.intern, &pr->meta);
}

static void drop_kept_requests(pr_ctl *c)
{
	hmap_iter it;
	void *v;
	hmap_iter_init(&it, &c->prs);
	while(hmap_iter_next(&it, NULL, &v))
		free_kept_request(c, v);
	hmap_free(&c->prs);
	hmap_init(&c->prs, NULL);
	c->prs_valid = false;
}

static int keep_request(pr_ctl *c, const char *key, const kube_meta *m)
{
	kube_provreq *pr = (kube_provreq *)kube_obj_clone(c->inf.intern, m);
	if(!pr || hmap_put(&c->prs, key, pr)) {
		free_kept_request(c, pr);
		return PRD_ENOMEM;
	}
	return 0;
}

/* Do two versions of a request name the same PodTemplates? */
static bool same_templates(const kube_provreq *a, const kube_meta *bm)
{
	const kube_provreq *b = (const kube_provreq *)bm;
	size_t i;
	if(!str_eq(a->meta.uid, bm->uid) || a->npod_sets != b->npod_sets)
		return false;
	for(i = 0; i < a->npod_sets; i++)
		if(!str_eq(a->pod_sets[i].template_name, b->pod_sets[i].template_name))
			return false;
	return true;
}

static int request_changed(void *ud, const char *ns, const char *name)
{
	pr_ctl *c = ud;
	const kube_meta *m = kube_informer_get(c->inf.provreqs, ns, name);
	char key[600];
	kube_provreq *old;
	snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name);
	old = hmap_take(&c->prs, key);
	/* Which templates are needed changes with a request added or gone
	 * (a spec is immutable; checked all the same). */
	if(!old || !m || !same_templates(old, m))
		c->prs_added_or_gone = true;
	free_kept_request(c, old);
	return m ? keep_request(c, key, m) : 0;
}

static int keep_cached_request(void *ud, const kube_meta *m)
{
	char key[600];
	snprintf(key, sizeof(key), "%s/%s", m->ns ? m->ns : "", m->name);
	return keep_request(ud, key, m);
}

/* verify_snapshot: the kept copies against the cache, by resourceVersion
 * (a cached object is replaced, never changed in place). */
static int verify_request(void *ud, const kube_meta *m)
{
	pr_ctl *c = ud;
	const kube_provreq *pr;
	char key[600];
	snprintf(key, sizeof(key), "%s/%s", m->ns ? m->ns : "", m->name);
	pr = hmap_get(&c->prs, key);
	if(!pr || !str_eq(pr->meta.rv, m->rv) || !str_eq(pr->meta.uid, m->uid)) {
		c->stats.snapshot_mismatches++;
		log_warn("a kept copy of a request differs from the cache", "request", key);
	}
	return 0;
}

/* Informer mode: the requests (w->prs), copies of the cached objects kept
 * between passes and copied again only when the request cache's journal
 * names them (a pass after a node registered copies the one request whose
 * status changed, not all of them). The world borrows them. */
static int kept_requests(pr_ctl *c, pr_world *w, prd_err *err)
{
	uint64_t gen = kube_informer_generation(c->inf.provreqs);
	hmap_iter it;
	void *v;
	size_t n = 0;
	int rc = 0;
	if(!c->prs_valid || (c->prs_gen != gen && kube_informer_changes(c->inf.provreqs, c->prs_gen, request_changed, c))) {
		drop_kept_requests(c);
		c->prs_added_or_gone = true;
		rc = kube_informer_foreach(c->inf.provreqs, keep_cached_request, c);
	}
	c->prs_valid = !rc;
	c->prs_gen = gen;
	if(rc) {
		drop_kept_requests(c);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(c->cfg.verify_snapshot) {
		kube_informer_foreach(c->inf.provreqs, verify_request, c);
		if(hmap_len(&c->prs) != kube_informer_len(c->inf.provreqs))
			c->stats.snapshot_mismatches++;
	}
	if(!(w->prs = calloc(hmap_len(&c->prs) + 1, sizeof(*w->prs))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	hmap_iter_init(&it, &c->prs);
	while(hmap_iter_next(&it, NULL, &v))
		w->prs[n++] = v;
	w->nprs = n;
	w->prs_kept = true;
	w->inf = &c->inf;
	return 0;
}

static int load_world(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t i;
	void **tp = NULL, **cached = NULL;
	size_t ntp = 0;
	int rc;

	memset(w, 0, sizeof(*w));
	arena_init(&w->ar);
	w->nodes_by_name = &c->nodes_by_name;
	hmap_init(&w->uids, NULL);
	hmap_init(&w->blocking, NULL);
	hmap_init(&w->own_tpls, pr__put_json);
	w->tpls = &w->own_tpls;
	hmap_init(&w->class_data, NULL);
	pr_dra_init(&w->dra);
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
		w->cacheable = true;
		w->gen_nodes = kube_informer_generation(c->inf.nodes);
		w->gen_pods = kube_informer_generation(c->inf.pods);
		w->gen_tpls = kube_informer_generation(c->inf.podtemplates);
		rc = borrow_all(c->inf.nodes, (void ***)&w->nodes, &w->nnodes, err);
		if(!rc)
			rc = borrow_all(c->inf.podtemplates, &tp, &ntp, err);
		if(!rc && incremental(c, w))
			rc = kept_requests(c, w, err);
		else if(!rc)
			rc = borrow_all(c->inf.provreqs, &cached, &w->nprs, err);
		if(!rc && !w->prs_kept) {
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
		if(!rc)
			rc = dra_from_informers(c, w, err);
		if(!rc) {
			pr__dirty_collect(c);
			rc = digest(c, w, tp, ntp, err);
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
		w->pods_read = true;
		if((rc = list_kind(c, w, "/api/v1/nodes", KUBE_KIND_NODE, (void ***)&w->nodes, &w->nnodes, err)) ||
		   (rc = list_kind(c, w, "/api/v1/pods", KUBE_KIND_POD, (void ***)&w->pods, &w->npods, err)) ||
		   (rc = list_kind(c, w, "/api/v1/podtemplates", KUBE_KIND_PODTEMPLATE, &tp, &ntp, err)) ||
		   (rc = list_kind(c, w, "/apis/autoscaling.x-k8s.io/v1/provisioningrequests", KUBE_KIND_PROVREQ,
				   (void ***)&w->prs, &w->nprs, err)) ||
		   (rc = dra_from_api(c, w, err)) ||
		   (rc = digest(c, w, tp, ntp, err)))
			goto done;
	}
	qsort(w->prs, w->nprs, sizeof(*w->prs), pr_order_cmp);
done:
	free(tp);
	return rc;
}

/* ---- per-request logic ------------------------------------------------- */

static int64_t total_pods(const kube_provreq *pr)
{
	int64_t t = 0;
	size_t i;
	for(i = 0; i < pr->npod_sets; i++)
		t += pr->pod_sets[i].count;
	return t;
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
		for(i = 0; i < nb; i++)
			if(!hmap_has(w->nodes_by_name, b[i].node_name))
				gone++;
		state_booking_list_free(b, nb);
	}
	if(scheduled >= want) {
		snprintf(msg, sizeof(msg), "all %lld consumer pods are scheduled; the booking is released", (long long)want);
		pr__set_cond(c, pr, conds, PR_COND_BOOKING_EXPIRED, "True", PR_R_CONSUMED, msg, false);
	} else if(gone) {
		snprintf(msg, sizeof(msg), "%zu booked node%s disappeared before the pods arrived", gone, gone == 1 ? "" : "s");
		pr__set_cond(c, pr, conds, PR_COND_REVOKED, "True", PR_R_NODES_REMOVED, msg, false);
	} else if(c->now >= expires) {
		snprintf(msg, sizeof(msg), "the booking expired after %llds with %lld of %lld pods scheduled",
			 (long long)(c->cfg.booking_ttl_ns / PRD_NS_PER_SEC), (long long)scheduled, (long long)want);
		pr__set_cond(c, pr, conds, PR_COND_BOOKING_EXPIRED, "True", PR_R_RESERVATION_EXPIRED, msg, false);
	} else {
		pr__wake_at(c, expires);
		return;
	}
	if(c->db)
		state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
	if(w->snap_booked && !w->snap_failed)
		sched_snapshot_unbook(w->snap, pr->meta.uid, NULL); /* (else read without it) */
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
static sched_podset *gate(pr_class_ctx *x, const pr_params *pp, int prc, const prd_err *pe, const state_request *rs)
{
	pr_ctl *c = x->c;
	const kube_provreq *pr = x->pr;
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

static void reconcile(pr_ctl *c, pr_world *w, const kube_provreq *pr)
{
	const pr_class_module *m = pr__module_for(c, pr->class_name);
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
	if(!m) {
		note_unowned(c, pr);
		return;
	}
	if(!pr__class_ours(&x, pr))
		return;
	c->stats.requests_seen++;
	if(!pr__dirty_decide(c, pr))
		return;
	c->stats.requests_decided++;
	{
		const char *seen = hmap_get(&c->written, pr->meta.uid);
		if(seen && !strcmp(seen, pr->meta.rv)) {
			pr__wake_at(c, c->now + PRD_NS_PER_SEC);
			return;
		}
		if(seen)
			hmap_del(&c->written, pr->meta.uid);
	}
	prc = pr_params_parse(pr, &pp, &e);
	pr__host_init(&h, &x);
	h.pass_data = pr__class_slot(w, m);
	h.kept = pr__class_kept(c, m);
	in_flight = m->in_flight && m->in_flight(m, &h, pr);
	c->req_in_flight = in_flight;
	if(pr->meta.deleted_ns && !in_flight) {
		/* Being deleted with nothing in flight: let it go. */
		if(pr__hold(c, pr, false, &e) && e.code != PRD_ENOTFOUND)
			log_warn("cannot release a deleted request", "request", pr->meta.name, "error", e.msg);
		return;
	}
	if(pr_is_terminal(pr) && !in_flight) {
		gc_terminal(c, pr);
		return;
	}
	if(pr_conds_init(&conds, pr, NULL))
		return;
	x.pp = &pp;
	x.conds = &conds;
	x.rv = pr->meta.rv;
	json_object_put(c->details);
	c->details = json_object_new_object();
	memset(&rs, 0, sizeof(rs));
	if(c->db && state_request_ensure(c->db, pr->meta.uid, pr->meta.ns, pr->meta.name, &rs, &e))
		log_error("state store: cannot record request", "request", pr->meta.name, "error", e.msg);
	memset(&req, 0, sizeof(req));
	req.pr = pr;
	req.class_name = pr->class_name;
	req.no_retry = pp.no_retry;
	req.deleting = pr->meta.deleted_ns != 0;
	req.terminal = pr_is_terminal(pr) || req.deleting;
	req.nsets = pr->npod_sets;
	if(in_flight) {
		char missing[300];
		req.sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*req.sets));
		if(req.sets && pr__resolve_podsets(w, pr, req.sets, missing, sizeof(missing), &e))
			req.sets = NULL;
	} else {
		/* Bookings of a request that is neither Provisioned nor scaling
		 * up are leftovers (a status write that failed after booking, the
		 * room an ended plan held): gone before it is decided, which books
		 * again if it provisions. Requests decided earlier in this pass
		 * saw them held. */
		if(!pr_cond_true(pr, PR_COND_PROVISIONED)) {
			sched_snapshot *snap = pr__snap(c, w); /* (NULL: fenced, nothing is written) */
			size_t released = 0;
			if(snap)
				sched_snapshot_unbook(snap, pr->meta.uid, &released);
			if(released && c->db)
				state_booking_delete_request(c->db, pr->meta.uid, NULL, NULL);
		}
		req.sets = gate(&x, &pp, prc, &e, &rs);
	}
	if(req.sets && !in_flight)
		pr__shards_before(c, w, pr);
	if(req.sets || in_flight)
		m->decide(m, &h, &req);
	pr__status_defer(&x);
	free(x.rv_owned);
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

int pr_ctl_pass(pr_ctl *c, int64_t *next_wake_ns, prd_err *err)
{
	int64_t t0 = clk_mono(clk_real());
	pr_world w;
	size_t i;
	int rc;

	c->now = clk_wall(c->clock);
	c->next_wake = INT64_MAX;
	c->stats.passes++;
	c->fenced = false;
	c->stats.requests_seen = 0;
	c->stats.requests_decided = 0;
	rc = load_world(c, &w, err);
	if(rc) {
		release_snapshot(c, &w);
		world_free(&w);
		metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", prd_strerror(rc)), 1);
		return prd_err_prefix(err, "reading the cluster");
	}
	pr__modules_hook(c, &w, PR_HOOK_BEGIN);
	for(i = 0; i < w.nprs; i++)
		decide(c, &w, w.prs[i]);
	pr__marks_flush(c);
	pr__status_flush(c);
	pr__modules_hook(c, &w, PR_HOOK_END);
	pr__scaledown(c, &w);
	if(!c->fenced)
		prune_state(c, &w);
	json_object_put(c->details);
	c->details = NULL;
	export_gauges(c, &w);
	pr__dirty_done(c, !c->fenced);
	release_snapshot(c, &w);
	world_free(&w);
	pr__bres_trim(c); /* (the snapshot no longer borrows them) */
	metrics_observe(M_RECONCILE_DURATION, METRICS_L("provreq"),
			(double)(clk_mono(clk_real()) - t0) / (double)PRD_NS_PER_SEC);
	if(next_wake_ns)
		*next_wake_ns = c->next_wake;
	return 0;
}

int pr_ctl_set_priorities(pr_ctl *c, const struct sched_priority *prio, size_t n, prd_err *err)
{
	return sched_expander_set_priorities(c->expander, prio, n, err);
}

/* The world stage: everything a pass reads, into pr_world (see
 * docs/development.md, "The pass"). Entry points: pr__world_read, then
 * pr__world_done (and pr__world_free at the end of the pass).
 *
 * Reads: the node groups from the drivers first (world_nodes.c: no cache
 * lock is held while a cloud answers); then, under the caches' read locks,
 * the informer caches (Nodes, Pods, PodTemplates, ProvisioningRequests,
 * and the resource.k8s.io objects), or without informers the same kinds
 * listed from the API.
 * Writes: pr_world (the requests in decision order, their uids, the
 * PodTemplates they name, the DRA view, the node groups, the nodes
 * provreqd made, the nodes a pod blocks); the controller's copies kept
 * between passes (c->prs, c->tpls, c->consumers, c->pod_blocked, and
 * world_nodes.c's node table); what changed for dirty.c
 * (pr__dirty_collect). In informer mode pr__world_read returns with the
 * caches' read locks held: the pass driver rebuilds the local store on a
 * new term, syncs the shards' view and builds the snapshot from what the
 * locks still guard, then pr__world_done lets them go and puts the
 * requests in decision order. This file calls only files below it
 * (tests/check-layers.sh). */
#include "provreq/ctl_int.h"
#include "provreq/convert.h"
#include "provreq/scaledown.h"
#include "ops/log.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading the caches and the API -------------------------------------- */

void pr__world_free(pr_world *w)
{
	size_t i;
	pr__pclass_world_free(w);
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
		free(w->groups[i].nap_owner);
		json_object_put(w->groups[i].tmpl_json);
	}
	free(w->groups);
	free(w->res_totals);
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

/* In informer mode the pods are borrowed from the cache only when a pass
 * needs them: when they changed, or the snapshot is built anew. */
int pr__need_pods(pr_ctl *c, pr_world *w, prd_err *err)
{
	if(w->pods_read)
		return 0;
	w->pods_read = true;
	return borrow_all(c->inf.pods, (void ***)&w->pods, &w->npods, err);
}

/* What the pods give a pass besides the snapshot: the scheduled consumer
 * pods of each request, and the nodes where a pod that blocks scale-down
 * runs. Kept while the pod cache's generation does not move (a scale-up's
 * node registrations change no pod). */
static int digest_pods(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t i;
	int rc;
	if(pr__incremental(c, w) && c->pods_digested && c->pods_digest_gen == w->gen_pods)
		return 0;
	if((rc = pr__need_pods(c, w, err)))
		return rc;
	c->pods_digested = false;
	hmap_free(&c->consumers);
	hmap_free(&c->pod_blocked);
	hmap_free(&c->pod_users);
	hmap_init(&c->consumers, NULL);
	hmap_init(&c->pod_blocked, NULL);
	hmap_init(&c->pod_users, free);
	for(i = 0; i < w->npods; i++) {
		const kube_pod *p = w->pods[i];
		char key[600];
		if(pr__pod_blocks_scaledown(p) && hmap_put(&c->pod_blocked, p->node_name, (void *)1))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		if(pr__pod_blocks_scaledown(p)) {
			const char *was = hmap_get(&c->pod_users, p->node_name);
			char *who;
			snprintf(key, sizeof(key), "%s/%s", p->meta.ns, p->consume ? p->consume : "");
			if(!p->consume)
				key[0] = '\0';
			if(!was || strcmp(was, key)) {
				if(!(who = str_dup(was ? "" : key)))
					return prd_err_set(err, PRD_ENOMEM, "out of memory");
				if(hmap_put(&c->pod_users, p->node_name, who)) {
					free(who);
					return prd_err_set(err, PRD_ENOMEM, "out of memory");
				}
			}
		}
		if(!p->node_name || !p->consume || p->phase == KUBE_POD_FAILED)
			continue;
		snprintf(key, sizeof(key), "%s/%s", p->meta.ns, p->consume);
		if(hmap_put(&c->consumers, key, (void *)((uintptr_t)hmap_get(&c->consumers, key) + 1)))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	c->pods_digested = pr__incremental(c, w);
	c->pods_digest_gen = w->gen_pods;
	return 0;
}

/* ---- PodTemplates, and the digest of what was read ---------------------- */

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
	bool keep = pr__incremental(c, w);
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
 * PodTemplates' templates. (The snapshot is built from them next, while
 * the caches are still locked: pr__world_read's caller.) */
static int digest(pr_ctl *c, pr_world *w, void **tp, size_t ntp, prd_err *err)
{
	size_t i;
	int rc;
	for(i = 0; i < w->nprs; i++)
		if(hmap_put(&w->uids, w->prs[i]->meta.uid, NULL))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(pr__node_table(c, w) || pr__marked_nodes(c, w) || pr__node_totals(c, w))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if((rc = digest_pods(c, w, err)))
		return rc;
	/* Only the marked nodes' pods matter. */
	for(i = 0; i < w->nmarked; i++)
		if(hmap_put(&w->blocking, w->marked[i].name, hmap_get(&c->pod_blocked, w->marked[i].name)))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if((rc = copy_templates(c, w, tp, ntp)))
		return prd_err_set(err, rc, "out of memory");
	return 0;
}

/* ---- resource.k8s.io ------------------------------------------------------ */

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

/* ---- the requests, kept between passes (informer mode) ------------------- */

static void free_kept_request(pr_ctl *c, kube_provreq *pr)
{
	if(pr)
		kube_obj_free(c->inf.intern, &pr->meta);
}

void pr__drop_kept_requests(pr_ctl *c)
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
		pr__drop_kept_requests(c);
		c->prs_added_or_gone = true;
		rc = kube_informer_foreach(c->inf.provreqs, keep_cached_request, c);
	}
	c->prs_valid = !rc;
	c->prs_gen = gen;
	if(rc) {
		pr__drop_kept_requests(c);
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

/* ---- the stage ------------------------------------------------------------ */

/* Informer mode: read the four caches under their read locks, which stay
 * held when this returns 0 (w->locked). */
static int read_caches(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t i;
	void **tp = NULL, **cached = NULL;
	size_t ntp = 0;
	int rc;
	kube_informer_rdlock(c->inf.nodes);
	kube_informer_rdlock(c->inf.pods);
	kube_informer_rdlock(c->inf.podtemplates);
	kube_informer_rdlock(c->inf.provreqs);
	w->locked = true;
	w->cacheable = true;
	w->gen_nodes = kube_informer_generation(c->inf.nodes);
	w->gen_pods = kube_informer_generation(c->inf.pods);
	w->gen_tpls = kube_informer_generation(c->inf.podtemplates);
	rc = borrow_all(c->inf.nodes, (void ***)&w->nodes, &w->nnodes, err);
	if(!rc)
		rc = borrow_all(c->inf.podtemplates, &tp, &ntp, err);
	if(!rc && pr__incremental(c, w))
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
	free(cached);
	free(tp);
	return rc;
}

/* Without informers: list the same kinds from the API. */
static int read_api(pr_ctl *c, pr_world *w, prd_err *err)
{
	void **tp = NULL;
	size_t ntp = 0;
	int rc;
	w->pods_read = true;
	if(!(rc = list_kind(c, w, "/api/v1/nodes", KUBE_KIND_NODE, (void ***)&w->nodes, &w->nnodes, err)) &&
	   !(rc = list_kind(c, w, "/api/v1/pods", KUBE_KIND_POD, (void ***)&w->pods, &w->npods, err)) &&
	   !(rc = list_kind(c, w, "/api/v1/podtemplates", KUBE_KIND_PODTEMPLATE, &tp, &ntp, err)) &&
	   !(rc = list_kind(c, w, "/apis/autoscaling.x-k8s.io/v1/provisioningrequests", KUBE_KIND_PROVREQ,
			    (void ***)&w->prs, &w->nprs, err)) &&
	   !(rc = dra_from_api(c, w, err)))
		rc = digest(c, w, tp, ntp, err);
	free(tp);
	return rc;
}

int pr__world_read(pr_ctl *c, pr_world *w, prd_err *err)
{
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
	if((rc = pr__load_groups(c, w, err)))
		return rc;
	if((rc = pr__pclass_read(c, err)))
		return rc;
	return c->use_inf ? read_caches(c, w, err) : read_api(c, w, err);
}

int pr__world_done(pr_ctl *c, pr_world *w, int rc, prd_err *err)
{
	if(w->locked) {
		kube_informer_rdunlock(c->inf.provreqs);
		kube_informer_rdunlock(c->inf.podtemplates);
		kube_informer_rdunlock(c->inf.pods);
		kube_informer_rdunlock(c->inf.nodes);
		w->locked = false;
		/* The borrowed arrays point into the caches: gone now. */
		free(w->nodes);
		free(w->pods);
		w->nodes = NULL;
		w->pods = NULL;
	}
	if(rc)
		return rc;
	qsort(w->prs, w->nprs, sizeof(*w->prs), pr_order_cmp);
	return pr__pclass_resolve(c, w, err);
}


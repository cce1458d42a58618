/* ProvisioningClass objects applied to the requests of a pass (part of the
 * world stage; see classes/pclass.h for the object).
 *
 * A request whose spec.provisioningClassName is not a class a module
 * serves but names a ProvisioningClass is, for the rest of the pass, a
 * request of the class the object names with the merged parameters: the
 * world's entry is replaced by a copy (pass arena) carrying those, so the
 * class modules, drivers and every stage after the world see nothing
 * else. The originals come back before the world is freed.
 *
 * A request that may not use the object (it is malformed, its class is
 * served by nobody here, or the request's namespace is not allowed) is
 * refused by the decide stage's gate (pr__pclass_use gives the reason).
 * Until then it needs some module: check-capacity, which every instance
 * serves, stands in, so the instance that owns the request by its
 * processorInstance is the one that refuses it.
 *
 * Reads: the ProvisioningClass informer (run) or the API's list (simulate,
 * tests; a cluster without the CRD has none), the Namespaces of requests
 * of classes that limit namespaces (one read per namespace and pass).
 * Writes: c->pcs (the parsed objects, kept while they do not change), an
 * Event on each object the first time a version is found unusable, the
 * world's request entries, c->dirty.all when the objects changed (so a
 * change applies to every request not yet decided). */
#include "provreq/ctl_int.h"
#include "classes/pclass.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kept across passes. */
struct pr_pcs {
	pr_pclass *v;             /* sorted by name */
	size_t n;
	bool have;                /* v reflects the objects of fingerprint fp */
	uint64_t fp;
	hmap warned;              /* name → "rv" whose problem was reported */
	bool list_warned;         /* the list was forbidden: said once */
	bool changed;             /* since the last pr__pclass_resolve */
};

/* One pass. */
struct pr_pc_world {
	kube_provreq **orig;      /* per w->prs index: the request replaced, or NULL */
	size_t n;
	hmap use;                 /* uid → pr_pclass_use * (arena) */
	hmap ns;                  /* namespace → json labels (owned) or NS_GONE */
};

#define NS_GONE ((void *)(uintptr_t)1)

static void put_ns(void *v)
{
	if(v != NS_GONE)
		json_object_put(v);
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for(; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (h ^ 0xff) * 1099511628211ULL;
}

/* Order-independent fingerprint of a set of objects by name and version. */
static uint64_t obj_fp(const kube_meta *m)
{
	return fnv(fnv(14695981039346656037ULL, m->name), m->rv);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const pr_pclass *)a)->name, ((const pr_pclass *)b)->name);
}

static void table_clear(struct pr_pcs *t)
{
	size_t i;
	for(i = 0; i < t->n; i++)
		pr_pclass_clear(&t->v[i]);
	free(t->v);
	t->v = NULL;
	t->n = 0;
	t->have = false;
}

void pr__pclass_free(pr_ctl *c)
{
	if(!c->pcs)
		return;
	table_clear(c->pcs);
	hmap_free(&c->pcs->warned);
	free(c->pcs);
	c->pcs = NULL;
}

static const pr_pclass *pr__pclass_find(const pr_ctl *c, const char *name)
{
	pr_pclass key;
	if(!c->pcs || !c->pcs->have || !name)
		return NULL;
	key.name = (char *)(uintptr_t)name;
	return bsearch(&key, c->pcs->v, c->pcs->n, sizeof(key), name_cmp);
}

/* A parameter value the controller would refuse on a request is refused
 * on the class, where the administrator can fix it for every request. */
static void check_values(pr_pclass *p)
{
	kube_provreq fake;
	pr_params pp;
	prd_err e;
	memset(&fake, 0, sizeof(fake));
	fake.parameters = p->params;
	fake.nparameters = (uint16_t)p->nparams;
	if(pr_params_parse(&fake, &pp, &e))
		pr_pclass_refuse(p, "spec.parameters: %s", e.msg);
}

/* Tell the administrator, once per version of the object. */
static void warn_once(pr_ctl *c, const pr_pclass *p, const char *reason, const char *msg)
{
	const char *seen = hmap_get(&c->pcs->warned, p->name);
	kube_object_ref ref;
	char *rv;
	if(seen && !strcmp(seen, p->rv))
		return;
	if(!pr__may_act(c))
		return;
	if(!(rv = str_dup(p->rv)) || hmap_put(&c->pcs->warned, p->name, rv)) {
		free(rv);
		return;
	}
	log_warn("ProvisioningClass cannot be used", "provisioning_class", p->name, "reason", reason, "message", msg);
	memset(&ref, 0, sizeof(ref));
	ref.kind = PR_PCLASS_KIND;
	ref.api_version = PR_PCLASS_API_VERSION;
	ref.name = p->name;
	ref.uid = p->uid;
	ref.resource_version = p->rv;
	kube_recorder_event(c->recorder, &ref, "Warning", reason, "%s", msg);
	c->stats.events++;
}

/* Why a request of this class cannot be served here, or NULL. */
static const char *unusable(pr_ctl *c, const pr_pclass *p, char *msg, size_t len)
{
	if(p->error) {
		snprintf(msg, len, "ProvisioningClass %s cannot be used: %s", p->name, p->error);
		return PR_R_PCLASS_INVALID;
	}
	if(pr__module_for(c, p->name)) {
		/* Requests naming it go to the built-in (or driver) class of
		 * that name, never through this object: say so, not nothing. */
		snprintf(msg, len,
			 "ProvisioningClass %s has the name of a provisioning class provreqd serves itself: requests "
			 "naming %s are served by that class and never read this object; give it another name",
			 p->name, p->name);
		return PR_R_PCLASS_INVALID;
	}
	if(!pr__module_for(c, p->target)) {
		snprintf(msg, len,
			 "ProvisioningClass %s names provisioning class %s, which no module or driver of this provreqd "
			 "serves",
			 p->name, p->target);
		return PR_R_PCLASS_INVALID;
	}
	return NULL;
}

static void export_gauges(pr_ctl *c)
{
	size_t i, bad = 0;
	for(i = 0; i < c->pcs->n; i++) {
		char msg[700];
		const char *why = unusable(c, &c->pcs->v[i], msg, sizeof(msg));
		if(why) {
			bad++;
			warn_once(c, &c->pcs->v[i], why, msg);
		} else {
			hmap_del(&c->pcs->warned, c->pcs->v[i].name);
		}
	}
	metrics_gauge_set(M_PCLASSES, METRICS_L("true"), (double)(c->pcs->n - bad));
	metrics_gauge_set(M_PCLASSES, METRICS_L("false"), (double)bad);
}

/* Rebuild the table from `objs` when their fingerprint moved. */
static int table_load(pr_ctl *c, const kube_meta *const *objs, size_t n, prd_err *err)
{
	struct pr_pcs *t = c->pcs;
	uint64_t fp = 0x9e3779b97f4a7c15ULL;
	size_t i;
	for(i = 0; i < n; i++)
		fp += obj_fp(objs[i]);
	if(t->have && t->fp == fp)
		return 0;
	table_clear(t);
	if(!(t->v = calloc(n + 1, sizeof(*t->v))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		const kube_provclass *o = kube_as_provclass(objs[i]);
		if(!o)
			continue;
		if(pr_pclass_parse(o, &t->v[t->n], err)) {
			pr_pclass_clear(&t->v[t->n]);
			table_clear(t);
			return PRD_ENOMEM;
		}
		if(!t->v[t->n].error)
			check_values(&t->v[t->n]);
		t->n++;
	}
	qsort(t->v, t->n, sizeof(*t->v), name_cmp);
	t->have = true;
	t->fp = fp;
	/* The objects changed: every request not yet decided sees them now
	 * (pr__pclass_resolve), and the shards' view derives what it keeps of
	 * each request with the classes they now mean. */
	t->changed = true;
	c->shards.valid = false;
	return 0;
}

typedef struct objs {
	const kube_meta **v;
	size_t n, cap;
} objs;

static int collect(void *ud, const kube_meta *m)
{
	objs *o = ud;
	if(o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 16;
		const kube_meta **v = realloc(o->v, cap * sizeof(*v));
		if(!v)
			return PRD_ENOMEM;
		o->v = v;
		o->cap = cap;
	}
	o->v[o->n++] = m;
	return 0;
}

/* The objects from the informer, or listed from the API. */
static int read_objects(pr_ctl *c, prd_err *err)
{
	objs o = { NULL, 0, 0 };
	int rc = 0;
	if(c->use_inf) {
		if(!c->inf.provclasses)
			return table_load(c, NULL, 0, err);
		kube_informer_rdlock(c->inf.provclasses);
		if(kube_informer_foreach(c->inf.provclasses, collect, &o))
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		else
			rc = table_load(c, o.v, o.n, err);
		kube_informer_rdunlock(c->inf.provclasses);
	} else {
		json_object *list = NULL, *items;
		kube_intern *in = kube_intern_new();
		size_t i, len;
		prd_err le;
		if(!in)
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		rc = kube_api_call(&c->api, "GET", PR_PCLASS_PATH, NULL, NULL, &list, NULL, &le);
		if(rc == PRD_ENOTFOUND || rc == PRD_EPERM) {
			/* No CRD (or not allowed to read it): no classes. */
			if(rc == PRD_EPERM && !c->pcs->list_warned) {
				log_warn("ProvisioningClasses cannot be listed; requests naming one are left alone", "error",
					 le.msg);
				c->pcs->list_warned = true;
			}
			rc = table_load(c, NULL, 0, err);
		} else if(rc) {
			if(err)
				*err = le;
		} else {
			items = json_object_object_get(list, "items");
			len = items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
			for(i = 0; i < len && !rc; i++) {
				kube_meta *m = NULL;
				prd_err de;
				if(kube_decode(KUBE_KIND_PROVCLASS, json_object_array_get_idx(items, i), in, &m, &de)) {
					log_warn("skipping an object that does not decode", "kind", "ProvisioningClass", "error",
						 de.msg);
					continue;
				}
				if(collect(&o, m)) {
					kube_obj_free(in, m);
					rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
				}
			}
			if(!rc)
				rc = table_load(c, o.v, o.n, err);
			for(i = 0; i < o.n; i++)
				kube_obj_free(in, (kube_meta *)(uintptr_t)o.v[i]);
		}
		json_object_put(list);
		kube_intern_free(in);
	}
	free(o.v);
	return rc;
}

/* The labels of a namespace (borrowed from the pass), NULL when it has
 * none; *ok false when it could not be read. */
static const json_object *ns_labels(pr_ctl *c, struct pr_pc_world *pw, const char *ns, bool *ok)
{
	char path[400];
	json_object *o = NULL, *labels = NULL;
	void *have;
	prd_err e;
	int rc;
	*ok = true;
	if((have = hmap_get(&pw->ns, ns)))
		return have == NS_GONE ? NULL : have;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s", ns);
	rc = kube_api_call(&c->api, "GET", path, NULL, NULL, &o, NULL, &e);
	if(rc && rc != PRD_ENOTFOUND) {
		log_warn("cannot read a namespace to check a ProvisioningClass's allowedNamespaces; trying again later",
			 "namespace", ns, "error", e.msg);
		*ok = false;
		return NULL;
	}
	if(!rc)
		labels = json_object_get(json_object_object_get(json_object_object_get(o, "metadata"), "labels"));
	json_object_put(o);
	if(hmap_put(&pw->ns, ns, labels ? (void *)labels : NS_GONE)) {
		json_object_put(labels);
		*ok = false;
		return NULL;
	}
	return labels;
}

static int add_use(pr_world *w, const kube_provreq *pr, const pr_pclass *p, const char *reason, const char *msg,
		   bool later, const kube_kv *params, size_t nparams)
{
	pr_pclass_use *u = arena_alloc(&w->ar, sizeof(*u));
	if(!u)
		return PRD_ENOMEM;
	memset(u, 0, sizeof(*u));
	u->pclass = arena_strdup(&w->ar, p->name);
	u->reason = reason;
	u->msg = msg ? arena_strdup(&w->ar, msg) : NULL;
	u->later = later;
	if(!later && !reason) {
		char *js = pr_pclass_params_json(params, nparams);
		u->params_json = js ? arena_strdup(&w->ar, js) : NULL;
		free(js);
		if(!u->params_json)
			return PRD_ENOMEM;
	}
	if(!u->pclass || (msg && !u->msg))
		return PRD_ENOMEM;
	return hmap_put(&w->pc->use, pr->meta.uid, u);
}

/* Replace w->prs[i] by a copy of class `cls` with these parameters. */
static int substitute(pr_world *w, size_t i, const char *cls, kube_kv *params, size_t nparams)
{
	kube_provreq *copy = arena_alloc(&w->ar, sizeof(*copy));
	if(!copy)
		return PRD_ENOMEM;
	*copy = *w->prs[i];
	copy->named_class = w->prs[i]->class_name;
	if(!(copy->class_name = arena_strdup(&w->ar, cls)))
		return PRD_ENOMEM;
	if(params) {
		copy->parameters = params;
		copy->nparameters = (uint16_t)nparams;
	}
	w->pc->orig[i] = w->prs[i];
	w->prs[i] = copy;
	return 0;
}

static int resolve_one(pr_ctl *c, pr_world *w, size_t i)
{
	const kube_provreq *pr = w->prs[i];
	const pr_pclass *p;
	const char *why;
	char msg[900];
	kube_kv *params = NULL;
	size_t nparams = 0;
	bool ok;
	const json_object *labels;
	if(!pr->class_name || pr__module_for(c, pr->class_name) || !(p = pr__pclass_find(c, pr->class_name)))
		return 0;
	if((why = unusable(c, p, msg, sizeof(msg)))) {
		if(add_use(w, pr, p, why, msg, false, NULL, 0))
			return PRD_ENOMEM;
		return substitute(w, i, PR_CLASS_CHECK, NULL, 0);
	}
	/* (A request already answered for good, or Provisioned, is not
	 * decided by a class again: its namespace need not be read.) */
	if(p->allowed && !pr_is_terminal(pr) && !pr_cond_true(pr, PR_COND_PROVISIONED)) {
		labels = ns_labels(c, w->pc, pr->meta.ns, &ok);
		if(!ok) {
			if(add_use(w, pr, p, NULL, NULL, true, NULL, 0))
				return PRD_ENOMEM;
		} else if(!pr_pclass_allows(p, labels)) {
			snprintf(msg, sizeof(msg),
				 "ProvisioningClass %s is not offered to namespace %s: its allowedNamespaces selector is "
				 "\"%s\"",
				 p->name, pr->meta.ns, p->allowed_text ? p->allowed_text : "");
			if(add_use(w, pr, p, PR_R_NS_NOT_ALLOWED, msg, false, NULL, 0))
				return PRD_ENOMEM;
			return substitute(w, i, p->target, NULL, 0);
		}
	}
	if(pr_pclass_merge(p, pr->parameters, pr->nparameters, &w->ar, &params, &nparams))
		return PRD_ENOMEM;
	if(!hmap_has(&w->pc->use, pr->meta.uid) && add_use(w, pr, p, NULL, NULL, false, params, nparams))
		return PRD_ENOMEM;
	return substitute(w, i, p->target, params, nparams);
}

int pr__pclass_read(pr_ctl *c, prd_err *err)
{
	int rc;
	if(!c->pcs) {
		if(!(c->pcs = calloc(1, sizeof(*c->pcs))))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		hmap_init(&c->pcs->warned, free);
	}
	if((rc = read_objects(c, err)))
		return rc;
	export_gauges(c);
	return 0;
}

int pr__pclass_resolve(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t i;
	if(c->pcs && c->pcs->changed) {
		c->dirty.all = true;
		c->pcs->changed = false;
	}
	if(!c->pcs || !c->pcs->n)
		return 0;
	if(!(w->pc = arena_alloc(&w->ar, sizeof(*w->pc))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	memset(w->pc, 0, sizeof(*w->pc));
	hmap_init(&w->pc->use, NULL);
	hmap_init(&w->pc->ns, put_ns);
	w->pc->n = w->nprs;
	if(!(w->pc->orig = calloc(w->nprs + 1, sizeof(*w->pc->orig))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < w->nprs; i++)
		if(resolve_one(c, w, i))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	return 0;
}

void pr__pclass_world_free(pr_world *w)
{
	size_t i;
	if(!w->pc)
		return;
	for(i = 0; i < w->pc->n && i < w->nprs; i++)
		if(w->pc->orig[i])
			w->prs[i] = w->pc->orig[i];
	free(w->pc->orig);
	hmap_free(&w->pc->use);
	hmap_free(&w->pc->ns);
	w->pc = NULL;
}

const pr_pclass_use *pr__pclass_use(const pr_world *w, const kube_provreq *pr)
{
	return w->pc ? hmap_get(&w->pc->use, pr->meta.uid) : NULL;
}

const char *pr__effective_class(const pr_ctl *c, const kube_provreq *pr)
{
	const pr_pclass *p;
	if(!pr->class_name || pr__module_for(c, pr->class_name) || !(p = pr__pclass_find(c, pr->class_name)))
		return pr->class_name;
	if(p->error || !pr__module_for(c, p->target))
		return PR_CLASS_CHECK;
	return p->target;
}

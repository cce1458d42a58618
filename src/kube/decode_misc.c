/* The small kinds: PodTemplate, ProvisioningRequest, ResourcePool,
 * ConfigMap, Lease. */
#include "kube/objects.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

/* ---------------------------------------------------------- PodTemplate */

int kube__decode_podtemplate(kube__dctx *c, json_object *obj, kube_meta **out)
{
	kube_podtemplate *t = calloc(1, sizeof(*t));
	json_object *tmpl;
	int rc;

	if(!t)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	t->meta.kind = KUBE_KIND_PODTEMPLATE;
	if((rc = kube__meta(c, obj, true, &t->meta)) != 0) {
		free(t);
		return rc;
	}
	if((rc = kube__obj(c, obj, "template", "", &tmpl)) != 0)
		goto fail;
	if(!tmpl) {
		rc = kube__fail(c, PRD_EINVAL, "template", "missing");
		goto fail;
	}
	/* A deep copy, so the cache never shares nodes (or reference counts)
	 * with the page of the list it came from. */
	if(json_object_deep_copy(tmpl, &t->tmpl, NULL) != 0) {
		t->tmpl = NULL;
		rc = kube__fail(c, PRD_ENOMEM, "template", "out of memory");
		goto fail;
	}
	*out = &t->meta;
	return PRD_OK;
fail:
	kube__free_podtemplate(c->in, &t->meta);
	return rc;
}

void kube__free_podtemplate(kube_intern *in, kube_meta *m)
{
	kube_podtemplate *t = (kube_podtemplate *)m;
	kube__meta_free(in, m);
	if(t->tmpl)
		json_object_put(t->tmpl);
	free(t);
}

/* ------------------------------------------------------ resource.k8s.io */

/* A deep copy of child `key` of o (an object), or NULL when absent. */
static int copy_child(kube__dctx *c, json_object *o, const char *key, const char *path, json_object **out)
{
	json_object *v;
	int rc;
	*out = NULL;
	if((rc = kube__obj(c, o, key, path, &v)) != 0 || !v)
		return rc;
	if(json_object_deep_copy(v, out, NULL) != 0) {
		*out = NULL;
		return kube__fail(c, PRD_ENOMEM, key, "out of memory");
	}
	return 0;
}

int kube__decode_draobj(kube__dctx *c, kube_kind kind, json_object *obj, kube_meta **out)
{
	kube_draobj *d = calloc(1, sizeof(*d));
	bool namespaced = kind == KUBE_KIND_RESOURCECLAIMTEMPLATE || kind == KUBE_KIND_RESOURCECLAIM;
	json_object *status = NULL;
	int rc;

	if(!d)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	d->meta.kind = (uint8_t)kind;
	if((rc = kube__meta(c, obj, namespaced, &d->meta)) != 0) {
		free(d);
		return rc;
	}
	if((rc = copy_child(c, obj, "spec", "", &d->spec)) != 0)
		goto fail;
	if(kind == KUBE_KIND_RESOURCECLAIM &&
	   ((rc = kube__obj(c, obj, "status", "", &status)) != 0 ||
	    (status && (rc = copy_child(c, status, "allocation", "status", &d->allocation)) != 0)))
		goto fail;
	*out = &d->meta;
	return PRD_OK;
fail:
	kube__free_draobj(c->in, &d->meta);
	return rc;
}

void kube__free_draobj(kube_intern *in, kube_meta *m)
{
	kube_draobj *d = (kube_draobj *)m;
	kube__meta_free(in, m);
	if(d->spec)
		json_object_put(d->spec);
	if(d->allocation)
		json_object_put(d->allocation);
	free(d);
}

/* ------------------------------------------------------ ProvisioningClass */

int kube__decode_provclass(kube__dctx *c, json_object *obj, kube_meta **out)
{
	kube_provclass *p = calloc(1, sizeof(*p));
	int rc;
	if(!p)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	p->meta.kind = KUBE_KIND_PROVCLASS;
	if((rc = kube__meta(c, obj, false, &p->meta)) != 0) {
		free(p);
		return rc;
	}
	if((rc = copy_child(c, obj, "spec", "", &p->spec)) != 0) {
		kube__free_provclass(c->in, &p->meta);
		return rc;
	}
	*out = &p->meta;
	return PRD_OK;
}

void kube__free_provclass(kube_intern *in, kube_meta *m)
{
	kube_provclass *p = (kube_provclass *)m;
	kube__meta_free(in, m);
	if(p->spec)
		json_object_put(p->spec);
	free(p);
}

/* ---------------------------------------------------- ProvisioningRequest */

static int pr_podsets(kube__dctx *c, kube_provreq *pr, json_object *spec)
{
	json_object *arr;
	size_t i, len;
	char p[48];
	int rc;

	if((rc = kube__arr(c, spec, "podSets", "spec", &arr)) != 0 || !arr)
		return rc;
	len = json_object_array_length(arr);
	if(len > UINT16_MAX)
		return kube__fail(c, PRD_EINVAL, "spec.podSets", "too many");
	if(!len)
		return PRD_OK;
	pr->pod_sets = calloc(len, sizeof(*pr->pod_sets));
	if(!pr->pod_sets)
		return kube__fail(c, PRD_ENOMEM, "spec.podSets", "out of memory");
	for(i = 0; i < len; i++) {
		json_object *ps = json_object_array_get_idx(arr, i), *ref;
		kube_pr_podset *o = &pr->pod_sets[i];
		int64_t count = 0;
		bool has = false;
		snprintf(p, sizeof(p), "spec.podSets[%zu]", i);
		if(!ps || !json_object_is_type(ps, json_type_object))
			return kube__fail(c, PRD_EINVAL, p, "expected an object");
		pr->npod_sets++;
		if((rc = kube__int(c, ps, "count", p, &count, &has)) != 0 ||
		   (rc = kube__obj(c, ps, "podTemplateRef", p, &ref)) != 0)
			return rc;
		if(!has || count < 1 || count > INT32_MAX)
			return kube__fail(c, PRD_EINVAL, p, "count must be a positive 32-bit integer");
		o->count = (int32_t)count;
		if((rc = kube__istr(c, ref, "name", p, &o->template_name)) != 0)
			return rc;
		if(!o->template_name || !*o->template_name)
			return kube__fail(c, PRD_EINVAL, p, "podTemplateRef.name is required");
	}
	return PRD_OK;
}

static int pr_conditions(kube__dctx *c, kube_provreq *pr, json_object *st)
{
	json_object *arr;
	size_t i, len;
	char p[48];
	int rc;

	if((rc = kube__arr(c, st, "conditions", "status", &arr)) != 0 || !arr)
		return rc;
	len = json_object_array_length(arr);
	if(len > UINT16_MAX)
		return kube__fail(c, PRD_EINVAL, "status.conditions", "too many");
	if(!len)
		return PRD_OK;
	pr->conditions = calloc(len, sizeof(*pr->conditions));
	if(!pr->conditions)
		return kube__fail(c, PRD_ENOMEM, "status.conditions", "out of memory");
	for(i = 0; i < len; i++) {
		json_object *cd = json_object_array_get_idx(arr, i);
		kube_condition *o = &pr->conditions[i];
		snprintf(p, sizeof(p), "status.conditions[%zu]", i);
		if(!cd || !json_object_is_type(cd, json_type_object))
			return kube__fail(c, PRD_EINVAL, p, "expected an object");
		pr->nconditions++;
		if((rc = kube__istr(c, cd, "type", p, &o->type)) || (rc = kube__istr(c, cd, "status", p, &o->status)) ||
		   (rc = kube__istr(c, cd, "reason", p, &o->reason)) ||
		   (rc = kube__istr(c, cd, "message", p, &o->message)) ||
		   (rc = kube__time(c, cd, "lastTransitionTime", p, &o->last_transition_ns)) ||
		   (rc = kube__int(c, cd, "observedGeneration", p, &o->observed_generation, NULL)))
			return rc;
		if(!o->type || !*o->type || !o->status)
			return kube__fail(c, PRD_EINVAL, p, "type and status are required");
	}
	return PRD_OK;
}

int kube__decode_provreq(kube__dctx *c, json_object *obj, kube_meta **out)
{
	kube_provreq *pr = calloc(1, sizeof(*pr));
	json_object *spec, *st, *v;
	int rc;

	if(!pr)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	pr->meta.kind = KUBE_KIND_PROVREQ;
	if((rc = kube__meta(c, obj, true, &pr->meta)) != 0) {
		free(pr);
		return rc;
	}
	if((rc = kube__obj(c, obj, "spec", "", &spec)))
		goto fail;
	if(!spec) {
		rc = kube__fail(c, PRD_EINVAL, "spec", "missing");
		goto fail;
	}
	{
		json_object *md = NULL, *fin = NULL;
		size_t i, n;
		if(json_object_object_get_ex(obj, "metadata", &md) && json_object_object_get_ex(md, "finalizers", &fin) &&
		   json_object_is_type(fin, json_type_array))
			for(i = 0, n = json_object_array_length(fin); i < n && !pr->held; i++) {
				const char *f = json_object_get_string(json_object_array_get_idx(fin, i));
				pr->held = f && !strcmp(f, KUBE_PR_FINALIZER);
			}
	}
	if((rc = kube__istr(c, spec, "provisioningClassName", "spec", &pr->class_name)) || (rc = pr_podsets(c, pr, spec)) ||
	   (rc = kube__obj(c, spec, "parameters", "spec", &v)) ||
	   (rc = kube__kvs(c, v, "spec.parameters", NULL, &pr->parameters, &pr->nparameters)) ||
	   (rc = kube__obj(c, obj, "status", "", &st)) || (rc = pr_conditions(c, pr, st)) ||
	   (rc = kube__obj(c, st, "provisioningClassDetails", "status", &v)) ||
	   (rc = kube__kvs(c, v, "status.provisioningClassDetails", NULL, &pr->class_details, &pr->nclass_details)))
		goto fail;
	*out = &pr->meta;
	return PRD_OK;
fail:
	kube__free_provreq(c->in, &pr->meta);
	return rc;
}

void kube__free_provreq(kube_intern *in, kube_meta *m)
{
	kube_provreq *pr = (kube_provreq *)m;
	size_t i;
	kube__meta_free(in, m);
	kube_intern_put(in, pr->class_name);
	for(i = 0; i < pr->npod_sets; i++)
		kube_intern_put(in, pr->pod_sets[i].template_name);
	free(pr->pod_sets);
	for(i = 0; i < pr->nconditions; i++) {
		kube_intern_put(in, pr->conditions[i].type);
		kube_intern_put(in, pr->conditions[i].status);
		kube_intern_put(in, pr->conditions[i].reason);
		kube_intern_put(in, pr->conditions[i].message);
	}
	free(pr->conditions);
	kube__kvs_free(in, pr->parameters, pr->nparameters);
	kube__kvs_free(in, pr->class_details, pr->nclass_details);
	free(pr);
}

/* Copy of a decoded ProvisioningRequest with the same intern table (every
 * interned string gets one more reference), freed with kube_obj_free. */
static kube_kv *kvs_clone(kube_intern *in, const kube_kv *v, size_t n, bool *ok)
{
	kube_kv *o;
	size_t i;
	if(!n)
		return NULL;
	o = calloc(n, sizeof(*o));
	if(!o) {
		*ok = false;
		return NULL;
	}
	for(i = 0; i < n; i++) {
		o[i].key = kube_intern_ref(in, v[i].key);
		o[i].value = kube_intern_ref(in, v[i].value);
	}
	return o;
}

kube_meta *kube__clone_provreq(kube_intern *in, const kube_meta *m)
{
	const kube_provreq *src = (const kube_provreq *)m;
	kube_provreq *pr = calloc(1, sizeof(*pr));
	size_t ln, lu, lr, i;
	char *blk;
	bool ok = true;
	if(!pr)
		return NULL;
	ln = strlen(m->name) + 1;
	lu = strlen(m->uid) + 1;
	lr = strlen(m->rv) + 1;
	blk = malloc(ln + lu + lr);
	if(!blk) {
		free(pr);
		return NULL;
	}
	pr->meta = *m;
	pr->held = src->held;
	memcpy(blk, m->name, ln);
	memcpy(blk + ln, m->uid, lu);
	memcpy(blk + ln + lu, m->rv, lr);
	pr->meta.name = blk;
	pr->meta.uid = blk + ln;
	pr->meta.rv = blk + ln + lu;
	pr->meta.ns = kube_intern_ref(in, m->ns);
	pr->class_name = kube_intern_ref(in, src->class_name);
	if(src->npod_sets) {
		pr->pod_sets = calloc(src->npod_sets, sizeof(*pr->pod_sets));
		if(pr->pod_sets) {
			pr->npod_sets = src->npod_sets;
			for(i = 0; i < src->npod_sets; i++) {
				pr->pod_sets[i] = src->pod_sets[i];
				pr->pod_sets[i].template_name = kube_intern_ref(in, src->pod_sets[i].template_name);
			}
		} else {
			ok = false;
		}
	}
	if(src->nconditions) {
		pr->conditions = calloc(src->nconditions, sizeof(*pr->conditions));
		if(pr->conditions) {
			pr->nconditions = src->nconditions;
			for(i = 0; i < src->nconditions; i++) {
				kube_condition *d = &pr->conditions[i];
				*d = src->conditions[i];
				d->type = kube_intern_ref(in, d->type);
				d->status = kube_intern_ref(in, d->status);
				d->reason = kube_intern_ref(in, d->reason);
				d->message = kube_intern_ref(in, d->message);
			}
		} else {
			ok = false;
		}
	}
	pr->parameters = kvs_clone(in, src->parameters, src->nparameters, &ok);
	pr->nparameters = pr->parameters ? src->nparameters : 0;
	pr->class_details = kvs_clone(in, src->class_details, src->nclass_details, &ok);
	pr->nclass_details = pr->class_details ? src->nclass_details : 0;
	if(!ok) {
		kube__free_provreq(in, &pr->meta);
		return NULL;
	}
	return &pr->meta;
}

/* ----------------------------------------------------------- ResourcePool */

static bool keep_pool_annotation(const char *key)
{
	return strcmp(key, "kubectl.kubernetes.io/last-applied-configuration") != 0;
}

int kube__decode_resourcepool(kube__dctx *c, json_object *obj, kube_meta **out)
{
	kube_resourcepool *p = calloc(1, sizeof(*p));
	json_object *md = NULL, *v, *spec, *quota, *st, *alloc;
	int rc;

	if(!p)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	p->meta.kind = KUBE_KIND_RESOURCEPOOL;
	if((rc = kube__meta(c, obj, false, &p->meta)) != 0) {
		free(p);
		return rc;
	}
	json_object_object_get_ex(obj, "metadata", &md);
	if((rc = kube__obj(c, md, "annotations", "metadata", &v)) ||
	   (rc = kube__kvs(c, v, "metadata.annotations", keep_pool_annotation, &p->annotations, &p->nannotations)) ||
	   (rc = kube__obj(c, obj, "spec", "", &spec)) || (rc = kube__obj(c, spec, "quota", "spec", &quota)) ||
	   (rc = kube__obj(c, quota, "hard", "spec.quota", &v)) ||
	   (rc = kube__res(c, v, "spec.quota.hard", &p->hard, &p->nhard)) ||
	   (rc = kube__obj(c, obj, "status", "", &st)) || (rc = kube__obj(c, st, "allocation", "status", &alloc)) ||
	   (rc = kube__obj(c, alloc, "used", "status.allocation", &v)) ||
	   (rc = kube__res(c, v, "status.allocation.used", &p->used, &p->nused)) ||
	   (rc = kube__obj(c, alloc, "hard", "status.allocation", &v)) ||
	   (rc = kube__res(c, v, "status.allocation.hard", &p->alloc_hard, &p->nalloc_hard))) {
		kube__free_resourcepool(c->in, &p->meta);
		return rc;
	}
	*out = &p->meta;
	return PRD_OK;
}

void kube__free_resourcepool(kube_intern *in, kube_meta *m)
{
	kube_resourcepool *p = (kube_resourcepool *)m;
	kube__meta_free(in, m);
	kube__kvs_free(in, p->annotations, p->nannotations);
	kube__res_free(in, p->hard, p->nhard);
	kube__res_free(in, p->used, p->nused);
	kube__res_free(in, p->alloc_hard, p->nalloc_hard);
	free(p);
}

/* -------------------------------------------------------------- ConfigMap */

int kube__decode_configmap(kube__dctx *c, json_object *obj, kube_meta **out)
{
	kube_configmap *cm = calloc(1, sizeof(*cm));
	json_object *v;
	int rc;

	if(!cm)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	cm->meta.kind = KUBE_KIND_CONFIGMAP;
	if((rc = kube__meta(c, obj, true, &cm->meta)) != 0) {
		free(cm);
		return rc;
	}
	if((rc = kube__obj(c, obj, "data", "", &v)) || (rc = kube__kvs(c, v, "data", NULL, &cm->data, &cm->ndata))) {
		kube__free_configmap(c->in, &cm->meta);
		return rc;
	}
	*out = &cm->meta;
	return PRD_OK;
}

void kube__free_configmap(kube_intern *in, kube_meta *m)
{
	kube_configmap *cm = (kube_configmap *)m;
	kube__meta_free(in, m);
	kube__kvs_free(in, cm->data, cm->ndata);
	free(cm);
}

/* ------------------------------------------------------------------ Lease */

int kube__decode_lease(kube__dctx *c, json_object *obj, kube_meta **out)
{
	kube_lease *l = calloc(1, sizeof(*l));
	json_object *spec;
	int64_t dur = 0, tr = 0;
	int rc;

	if(!l)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	l->meta.kind = KUBE_KIND_LEASE;
	if((rc = kube__meta(c, obj, true, &l->meta)) != 0) {
		free(l);
		return rc;
	}
	if((rc = kube__obj(c, obj, "spec", "", &spec)) || (rc = kube__istr(c, spec, "holderIdentity", "spec", &l->holder)) ||
	   (rc = kube__int(c, spec, "leaseDurationSeconds", "spec", &dur, NULL)) ||
	   (rc = kube__int(c, spec, "leaseTransitions", "spec", &tr, NULL)) ||
	   (rc = kube__time(c, spec, "acquireTime", "spec", &l->acquire_ns)) ||
	   (rc = kube__time(c, spec, "renewTime", "spec", &l->renew_ns)))
		goto fail;
	if(dur < 0 || dur > INT32_MAX || tr < 0 || tr > INT32_MAX) {
		rc = kube__fail(c, PRD_EINVAL, "spec", "leaseDurationSeconds/leaseTransitions out of range");
		goto fail;
	}
	l->duration_s = (int32_t)dur;
	l->transitions = (int32_t)tr;
	*out = &l->meta;
	return PRD_OK;
fail:
	kube__free_lease(c->in, &l->meta);
	return rc;
}

void kube__free_lease(kube_intern *in, kube_meta *m)
{
	kube_lease *l = (kube_lease *)m;
	kube__meta_free(in, m);
	kube_intern_put(in, l->holder);
	free(l);
}

/* Node → kube_node: what scheduling simulation and pool population read. */
#include "kube/objects.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

const char *const kube_node_annotation_prefixes[] = {
	"cluster-autoscaler.kubernetes.io/",
	"autoscaling.x-k8s.io/",
	"provreqd.io/",
	"cluster.x-k8s.io/",
	"kwok.x-k8s.io/",
	NULL
};

static bool keep_annotation(const char *key)
{
	size_t i;
	for(i = 0; kube_node_annotation_prefixes[i]; i++)
		if(str_starts_with(key, kube_node_annotation_prefixes[i]))
			return true;
	return false;
}

static int node_taints(kube__dctx *c, kube_node *n, json_object *spec)
{
	json_object *arr;
	size_t i, len;
	char p[48];
	int rc;

	if((rc = kube__arr(c, spec, "taints", "spec", &arr)) != 0 || !arr)
		return rc;
	len = json_object_array_length(arr);
	if(len > UINT16_MAX)
		return kube__fail(c, PRD_EINVAL, "spec.taints", "too many");
	if(!len)
		return PRD_OK;
	n->taints = calloc(len, sizeof(*n->taints));
	if(!n->taints)
		return kube__fail(c, PRD_ENOMEM, "spec.taints", "out of memory");
	for(i = 0; i < len; i++) {
		json_object *t = json_object_array_get_idx(arr, i);
		kube_taint *ta = &n->taints[i];
		const char *eff = NULL;
		snprintf(p, sizeof(p), "spec.taints[%zu]", i);
		if(!t || !json_object_is_type(t, json_type_object))
			return kube__fail(c, PRD_EINVAL, p, "expected an object");
		n->ntaints++;
		if((rc = kube__str(c, t, "effect", p, &eff)) != 0 || (rc = kube__effect(c, eff, false, p, &ta->effect)) != 0 ||
		   (rc = kube__istr(c, t, "key", p, &ta->key)) != 0 || (rc = kube__istr(c, t, "value", p, &ta->value)) != 0)
			return rc;
		if(!ta->key || !*ta->key)
			return kube__fail(c, PRD_EINVAL, p, "key is required");
	}
	return PRD_OK;
}

static int node_status(kube__dctx *c, kube_node *n, json_object *obj)
{
	json_object *st, *v, *conds;
	size_t i, len;
	int rc;

	if((rc = kube__obj(c, obj, "status", "", &st)) != 0 || !st)
		return rc;
	if((rc = kube__obj(c, st, "allocatable", "status", &v)) ||
	   (rc = kube__res(c, v, "status.allocatable", &n->allocatable, &n->nallocatable)) ||
	   (rc = kube__obj(c, st, "capacity", "status", &v)) ||
	   (rc = kube__res(c, v, "status.capacity", &n->capacity, &n->ncapacity)) ||
	   (rc = kube__arr(c, st, "conditions", "status", &conds)) || !conds)
		return rc;
	len = json_object_array_length(conds);
	for(i = 0; i < len; i++) {
		json_object *cd = json_object_array_get_idx(conds, i);
		const char *type = NULL, *status = NULL;
		if(!cd || !json_object_is_type(cd, json_type_object))
			return kube__fail(c, PRD_EINVAL, "status.conditions", "expected objects");
		if((rc = kube__str(c, cd, "type", "status.conditions", &type)) != 0 ||
		   (rc = kube__str(c, cd, "status", "status.conditions", &status)) != 0)
			return rc;
		if(!str_eq(type, "Ready"))
			continue;
		if(str_eq(status, "True"))
			n->ready = KUBE_COND_TRUE;
		else if(str_eq(status, "False"))
			n->ready = KUBE_COND_FALSE;
		else
			n->ready = KUBE_COND_UNKNOWN;
	}
	return PRD_OK;
}

int kube__decode_node(kube__dctx *c, json_object *obj, kube_meta **out)
{
	kube_node *n = calloc(1, sizeof(*n));
	json_object *md = NULL, *v, *spec;
	int rc;

	if(!n)
		return kube__fail(c, PRD_ENOMEM, NULL, "out of memory");
	n->meta.kind = KUBE_KIND_NODE;
	if((rc = kube__meta(c, obj, false, &n->meta)) != 0) {
		free(n);
		return rc;
	}
	json_object_object_get_ex(obj, "metadata", &md);
	if((rc = kube__obj(c, md, "labels", "metadata", &v)) ||
	   (rc = kube__kvs(c, v, "metadata.labels", NULL, &n->labels, &n->nlabels)) ||
	   (rc = kube__obj(c, md, "annotations", "metadata", &v)) ||
	   (rc = kube__kvs(c, v, "metadata.annotations", keep_annotation, &n->annotations, &n->nannotations)) ||
	   (rc = kube__obj(c, obj, "spec", "", &spec)) ||
	   (rc = kube__bool(c, spec, "unschedulable", "spec", &n->unschedulable)) ||
	   (rc = kube__istr(c, spec, "providerID", "spec", &n->provider_id)) || (rc = node_taints(c, n, spec)) ||
	   (rc = node_status(c, n, obj))) {
		kube__free_node(c->in, &n->meta);
		return rc;
	}
	*out = &n->meta;
	return PRD_OK;
}

void kube__free_node(kube_intern *in, kube_meta *m)
{
	kube_node *n = (kube_node *)m;
	size_t i;
	kube__meta_free(in, m);
	kube__kvs_free(in, n->labels, n->nlabels);
	kube__kvs_free(in, n->annotations, n->nannotations);
	for(i = 0; i < n->ntaints; i++) {
		kube_intern_put(in, n->taints[i].key);
		kube_intern_put(in, n->taints[i].value);
	}
	free(n->taints);
	kube__res_free(in, n->allocatable, n->nallocatable);
	kube__res_free(in, n->capacity, n->ncapacity);
	kube_intern_put(in, n->provider_id);
	free(n);
}

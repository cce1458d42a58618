/* Nodes → sched_node_spec (convert.h), from JSON and from decoded
 * objects; also the labels and taint effects pods share with them. */
#include "provreq/convert_int.h"

#include <stdio.h>
#include <string.h>

/* ---- labels and taint effects ----------------------------------------- */

int pr__conv_labels(arena *a, json_object *map, const char *field, sched_label **out, size_t *n,
		       prd_err *err)
{
	size_t i = 0;
	sched_label *l;
	*out = NULL;
	*n = 0;
	if(!map)
		return 0;
	if(!json_object_is_type(map, json_type_object))
		return prd_err_set(err, PRD_EINVAL, "%s: must be a map of strings", field);
	l = arena_array(a, (size_t)json_object_object_length(map) + 1, sizeof(*l));
	if(!l)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	json_object_object_foreach(map, k, v) {
		if(!json_object_is_type(v, json_type_string))
			return prd_err_set(err, PRD_EINVAL, "%s.%s: must be a string", field, k);
		l[i].key = k;
		l[i].value = json_object_get_string(v);
		i++;
	}
	*out = l;
	*n = i;
	return 0;
}

int pr__conv_effect(const char *s, sched_effect *e)
{
	if(!s || !*s) *e = SCHED_EFFECT_NONE;
	else if(!strcmp(s, "NoSchedule")) *e = SCHED_EFFECT_NO_SCHEDULE;
	else if(!strcmp(s, "PreferNoSchedule")) *e = SCHED_EFFECT_PREFER_NO_SCHEDULE;
	else if(!strcmp(s, "NoExecute")) *e = SCHED_EFFECT_NO_EXECUTE;
	else return -1;
	return 0;
}

sched_label *pr__conv_kv_labels(arena *a, const kube_kv *kv, size_t n)
{
	sched_label *l = arena_array(a, n + 1, sizeof(*l));
	size_t i;
	if(!l)
		return NULL;
	for(i = 0; i < n; i++) {
		l[i].key = kv[i].key;
		l[i].value = kv[i].value;
	}
	return l;
}

/* ---- nodes ------------------------------------------------------------ */

int pr_conv_node(arena *a, json_object *node, sched_node_spec *out, prd_err *err)
{
	json_object *md = get(node, "metadata"), *spec = get(node, "spec"), *taints, *un;
	sched_label *l;
	sched_res *alloc;
	sched_taint *t;
	size_t i, n;
	int rc;

	memset(out, 0, sizeof(*out));
	if((rc = get_string(md, "name", "metadata", &out->name, err)))
		return rc;
	if(!out->name)
		return prd_err_set(err, PRD_EINVAL, "metadata.name: required");
	if((rc = pr__conv_labels(a, get(md, "labels"), "metadata.labels", &l, &out->n_labels, err)))
		return rc;
	out->labels = l;
	if((rc = pr_conv_resources(a, get(get(node, "status"), "allocatable"), "status.allocatable", &alloc,
				   &out->n_allocatable, err)))
		return rc;
	out->allocatable = alloc;
	un = get(spec, "unschedulable");
	if((rc = want_type(un, json_type_boolean, "spec.unschedulable", "a boolean", err)))
		return rc;
	out->unschedulable = un && json_object_get_boolean(un);
	taints = get(spec, "taints");
	if((rc = want_type(taints, json_type_array, "spec.taints", "a list", err)))
		return rc;
	n = arr_len(taints);
	t = arena_array(a, n + 1, sizeof(*t));
	if(!t)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(taints, i);
		const char *eff = NULL;
		char f[48];
		snprintf(f, sizeof(f), "spec.taints[%zu]", i);
		if((rc = want_type(e, json_type_object, f, "an object", err)) ||
		   (rc = get_string(e, "key", f, &t[i].key, err)) ||
		   (rc = get_string(e, "value", f, &t[i].value, err)) ||
		   (rc = get_string(e, "effect", f, &eff, err)))
			return rc;
		if(!t[i].key)
			return prd_err_set(err, PRD_EINVAL, "%s.key: required", f);
		if(pr__conv_effect(eff, &t[i].effect))
			return prd_err_set(err, PRD_EINVAL, "%s.effect: unknown effect \"%s\"", f, eff);
	}
	out->taints = t;
	out->n_taints = n;
	return 0;
}

int pr_conv_kube_node(arena *a, const kube_node *n, sched_node_spec *out, prd_err *err)
{
	sched_taint *t;
	sched_res *alloc;
	size_t i;
	int rc;
	memset(out, 0, sizeof(*out));
	out->name = n->meta.name;
	out->labels = pr__conv_kv_labels(a, n->labels, n->nlabels);
	out->n_labels = n->nlabels;
	t = arena_array(a, (size_t)n->ntaints + 1, sizeof(*t));
	if(!out->labels || !t)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n->ntaints; i++) {
		t[i].key = n->taints[i].key;
		t[i].value = n->taints[i].value;
		switch(n->taints[i].effect) {
		case KUBE_EFFECT_NO_SCHEDULE: t[i].effect = SCHED_EFFECT_NO_SCHEDULE; break;
		case KUBE_EFFECT_PREFER_NO_SCHEDULE: t[i].effect = SCHED_EFFECT_PREFER_NO_SCHEDULE; break;
		case KUBE_EFFECT_NO_EXECUTE: t[i].effect = SCHED_EFFECT_NO_EXECUTE; break;
		default: t[i].effect = SCHED_EFFECT_NONE; break;
		}
	}
	out->taints = t;
	out->n_taints = n->ntaints;
	rc = pr_conv_kube_res(a, n->allocatable, n->nallocatable, "status.allocatable", &alloc, &out->n_allocatable, err);
	if(rc)
		return prd_err_prefix(err, "Node %s", n->meta.name);
	out->allocatable = alloc;
	out->unschedulable = n->unschedulable;
	return 0;
}

/* The template Node of a karpenter group: the labels Karpenter gives a
 * Node of the NodePool (its template labels and single-valued In
 * requirements, the NodePool label) and of the shape (instance type, the
 * pinned zone and capacity type, the table's labels), the NodePool's taints
 * (startup taints go away once a Node initialises, so they are left out),
 * and the capacity from the shape table or a Node of that instance type.
 * A shape with no known capacity has no template: it is reported, never
 * guessed. */
#include "karpenter/karpenter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add(json_object *o, const char *key, json_object *v)
{
	if(!v || json_object_object_add(o, key, v)) {
		json_object_put(v);
		return -1;
	}
	return 0;
}

static int add_str(json_object *o, const char *key, const char *v)
{
	return v ? add(o, key, json_object_new_string(v)) : 0;
}

static json_object *copied(json_object *src)
{
	json_object *dst = NULL;
	if(!src)
		return json_object_new_object();
	return json_object_deep_copy(src, &dst, NULL) ? NULL : dst;
}

/* Labels of a new Node of g (a new object, caller puts), or NULL. */
static json_object *template_labels(const karp_group *g, const char *name)
{
	json_object *tmpl = drv_jobj(drv_jobj(g->np, "spec"), "template");
	json_object *labels = copied(drv_jobj(drv_jobj(tmpl, "metadata"), "labels")), *reqs = NULL;
	size_t i, n;
	int rc = labels ? 0 : -1;
	json_object_object_get_ex(drv_jobj(tmpl, "spec"), "requirements", &reqs);
	n = json_object_is_type(reqs, json_type_array) ? json_object_array_length(reqs) : 0;
	for(i = 0; !rc && i < n; i++) {
		json_object *r = json_object_array_get_idx(reqs, i), *vals = NULL;
		if(drv_jstr(r, "key") && !strcmp(drv_jstr(r, "operator") ? drv_jstr(r, "operator") : "", "In") &&
		   json_object_object_get_ex(r, "values", &vals) && json_object_is_type(vals, json_type_array) &&
		   json_object_array_length(vals) == 1)
			rc = add_str(labels, drv_jstr(r, "key"), json_object_get_string(json_object_array_get_idx(vals, 0)));
	}
	if(!rc && g->shape->labels) {
		json_object_object_foreach(g->shape->labels, key, v) {
			if((rc = add_str(labels, key, json_object_get_string(v))))
				break;
		}
	}
	if(rc || add_str(labels, KARP_POOL_LABEL, g->pool) || add_str(labels, KARP_IT_LABEL, g->shape->instance_type) ||
	   add_str(labels, KARP_ZONE_LABEL, g->shape->zone) || add_str(labels, KARP_CT_LABEL, g->shape->capacity_type) ||
	   add_str(labels, "kubernetes.io/hostname", name)) {
		json_object_put(labels);
		return NULL;
	}
	return labels;
}

int karp_template_node(karp *k, const karp_group *g, char **node_json, prd_cloud_error *err)
{
	json_object *cap = karp_shape_capacity(k, g->shape, false), *alloc = karp_shape_capacity(k, g->shape, true);
	json_object *node, *md, *spec, *status, *taints = NULL;
	char name[300];
	const char *text;
	int rc = 0;
	if(!cap)
		return karp_fail(err, PRD_CLOUD_ENOTFOUND,
				 "karpenter: %s: nothing is known of instance type %s: give its capacity in the shape table "
				 "or run one Node of that type",
				 g->id, g->shape->instance_type);
	snprintf(name, sizeof(name), "template-%s", g->id);
	for(char *p = name; *p; p++)
		if(*p == '/')
			*p = '-';
	node = json_object_new_object();
	md = json_object_new_object();
	spec = json_object_new_object();
	status = json_object_new_object();
	/* The node owns the three members from here on: one put frees all. */
	if(!node || add(node, "metadata", md) || add(node, "spec", spec) || add(node, "status", status)) {
		json_object_put(node);
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	json_object_object_get_ex(drv_jobj(drv_jobj(drv_jobj(g->np, "spec"), "template"), "spec"), "taints", &taints);
	if(add(node, "apiVersion", json_object_new_string("v1")) || add(node, "kind", json_object_new_string("Node")) ||
	   add(md, "name", json_object_new_string(name)) || add(md, "labels", template_labels(g, name)) ||
	   (taints && add(spec, "taints", copied(taints))) || add(status, "capacity", copied(cap)) ||
	   add(status, "allocatable", copied(alloc)))
		rc = -1;
	text = rc ? NULL : json_object_to_json_string_ext(node, JSON_C_TO_STRING_PLAIN);
	*node_json = text ? drv_strdup(text) : NULL;
	json_object_put(node);
	return *node_json ? 0 : karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
}

/* The karpenter driver's configuration (--cloud-config, YAML):
 *
 *   nodePools: [general, gpu]   # optional: only these NodePools (default all)
 *   doNotDisrupt: true          # optional: hold booked NodeClaims (default true)
 *   shapes:                     # the shapes that become node groups
 *   - instanceType: c-4x-amd64-linux
 *     zone: test-zone-a         # optional: pin the zone
 *     capacityType: on-demand   # optional: pin the capacity type
 *     maxSize: 10               # optional: a cap below the NodePool's limits
 *     labels: {kubernetes.io/arch: amd64}
 *     capacity: {cpu: "4", memory: 16Gi, pods: "110"}   # optional
 *     allocatable: {cpu: 3900m, memory: 15Gi, pods: "110"}
 *
 * A shape without capacity takes it from a Node of its instance type. Two
 * entries of one instance type must not overlap (each NodeClaim belongs to
 * at most one group): where one pins a zone or capacity type, the other
 * must pin a different one. */
#include "karpenter/karpenter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/quantity.h"
#include "util/str.h"
#include "util/yamljson.h"

void karp_shapes_free(karp_shape *v, size_t n)
{
	size_t i;
	for(i = 0; v && i < n; i++) {
		free(v[i].instance_type);
		free(v[i].zone);
		free(v[i].capacity_type);
		json_object_put(v[i].labels);
		json_object_put(v[i].capacity);
		json_object_put(v[i].allocatable);
	}
	free(v);
}

/* A label value (1..63 of [A-Za-z0-9._-], alphanumeric at both ends). */
static bool label_value(const char *s)
{
	size_t i, n = s ? strlen(s) : 0;
	if(n == 0 || n > 63)
		return false;
	for(i = 0; i < n; i++) {
		char c = s[i];
		bool an = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if(!an && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

/* A mapping of resource name -> quantity (strings or numbers). */
static int resource_map(json_object *v, const char *what, size_t idx, prd_cloud_error *err)
{
	if(!json_object_is_type(v, json_type_object) || !json_object_object_length(v))
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes[%zu].%s must be a non-empty mapping",
				 idx, what);
	json_object_object_foreach(v, key, q) {
		prd_err pe = {0};
		qty x;
		const char *s = json_object_get_string(q);
		if((!json_object_is_type(q, json_type_string) && !json_object_is_type(q, json_type_int)) ||
		   qty_parse(s, &x, &pe) || qty_sign(&x) < 0)
			return karp_fail(err, PRD_CLOUD_EINVAL,
					 "karpenter config: shapes[%zu].%s.%s: '%s' is not a non-negative quantity", idx,
					 what, key, s ? s : "");
	}
	return 0;
}

static int shape_string(json_object *v, char **dst, const char *key, size_t idx, prd_cloud_error *err)
{
	const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
	if(!label_value(s))
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes[%zu].%s must be a label value, got '%s'",
				 idx, key, json_object_get_string(v));
	if(!(*dst = drv_strdup(s)))
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	return 0;
}

static int shape_member(karp_shape *s, const char *key, json_object *v, size_t idx, prd_cloud_error *err)
{
	if(!strcmp(key, "instanceType"))
		return shape_string(v, &s->instance_type, key, idx, err);
	if(!strcmp(key, "zone"))
		return shape_string(v, &s->zone, key, idx, err);
	if(!strcmp(key, "capacityType"))
		return shape_string(v, &s->capacity_type, key, idx, err);
	if(!strcmp(key, "maxSize")) {
		if(!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
		   json_object_get_int64(v) > INT32_MAX)
			return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes[%zu].maxSize must be a non-negative integer",
					 idx);
		s->max_size = (int32_t)json_object_get_int64(v);
		return 0;
	}
	if(!strcmp(key, "labels")) {
		if(!json_object_is_type(v, json_type_object))
			return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes[%zu].labels must be a mapping", idx);
		json_object_object_foreach(v, lk, lv) {
			(void)lk;
			if(!json_object_is_type(lv, json_type_string))
				return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes[%zu].labels values must be strings", idx);
		}
		s->labels = json_object_get(v);
		return 0;
	}
	if(!strcmp(key, "capacity") || !strcmp(key, "allocatable")) {
		int rc = resource_map(v, key, idx, err);
		if(!rc)
			*(key[0] == 'c' ? &s->capacity : &s->allocatable) = json_object_get(v);
		return rc;
	}
	return karp_fail(err, PRD_CLOUD_EINVAL,
			 "karpenter config: shapes[%zu]: unknown key '%s' (known: instanceType, zone, capacityType, maxSize, "
			 "labels, capacity, allocatable)",
			 idx, key);
}

/* Pinned values of one dimension overlap when either is unpinned or both
 * are equal. */
static bool dim_overlaps(const char *a, const char *b)
{
	return !a || !b || !strcmp(a, b);
}

static int check_shapes(const karp *k, prd_cloud_error *err)
{
	size_t i, j;
	for(i = 0; i < k->nshapes; i++) {
		const karp_shape *a = &k->shapes[i];
		if(!a->instance_type)
			return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes[%zu] has no instanceType", i);
		if(a->allocatable && !a->capacity)
			return karp_fail(err, PRD_CLOUD_EINVAL,
					 "karpenter config: shapes[%zu] has allocatable but no capacity", i);
		for(j = 0; j < i; j++) {
			const karp_shape *b = &k->shapes[j];
			if(!strcmp(a->instance_type, b->instance_type) && dim_overlaps(a->zone, b->zone) &&
			   dim_overlaps(a->capacity_type, b->capacity_type))
				return karp_fail(err, PRD_CLOUD_EINVAL,
						 "karpenter config: shapes[%zu] and shapes[%zu] overlap (both %s; pin different "
						 "zones or capacity types)",
						 j, i, a->instance_type);
		}
	}
	return 0;
}

static int parse_shapes(karp *k, json_object *arr, prd_cloud_error *err)
{
	size_t i, n;
	int rc = 0;
	if(!json_object_is_type(arr, json_type_array))
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes must be a list");
	n = json_object_array_length(arr);
	if(!(k->shapes = calloc(n + 1, sizeof(*k->shapes))))
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < n && !rc; i++) {
		json_object *e = json_object_array_get_idx(arr, i);
		karp_shape *s = &k->shapes[k->nshapes++];
		s->max_size = -1;
		if(!json_object_is_type(e, json_type_object))
			return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes[%zu] must be a mapping", i);
		json_object_object_foreach(e, key, v) {
			if((rc = shape_member(s, key, v, i, err)))
				break;
		}
	}
	return rc ? rc : check_shapes(k, err);
}

static int parse_pools(karp *k, json_object *arr, prd_cloud_error *err)
{
	size_t i, n;
	if(!json_object_is_type(arr, json_type_array))
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: nodePools must be a list of NodePool names");
	n = json_object_array_length(arr);
	if(!(k->pools = calloc(n + 1, sizeof(*k->pools))))
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(arr, i);
		const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
		if(!s || !str_is_dns_subdomain(s))
			return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: nodePools[%zu] must be a NodePool name", i);
		if(!(k->pools[i] = drv_strdup(s)))
			return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	return 0;
}

static int parse_top(karp *k, json_object *doc, prd_cloud_error *err)
{
	int rc = 0;
	json_object_object_foreach(doc, key, v) {
		if(!strcmp(key, "shapes")) {
			rc = parse_shapes(k, v, err);
		} else if(!strcmp(key, "nodePools")) {
			rc = parse_pools(k, v, err);
		} else if(!strcmp(key, "doNotDisrupt")) {
			if(!json_object_is_type(v, json_type_boolean))
				rc = karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: doNotDisrupt must be true or false");
			else
				k->hold = json_object_get_boolean(v);
		} else {
			rc = karp_fail(err, PRD_CLOUD_EINVAL,
				       "karpenter config: unknown key '%s' (known: shapes, nodePools, doNotDisrupt)", key);
		}
		if(rc)
			break;
	}
	return rc;
}

int karp_parse_config(karp *k, const char *config, prd_cloud_error *err)
{
	json_object *doc = NULL;
	prd_err pe = {0};
	int rc;
	k->hold = true;
	if(!config || !config[strspn(config, " \t\r\n")])
		return karp_fail(err, PRD_CLOUD_EINVAL,
				 "karpenter config: a shape table is needed (shapes: - instanceType: ...): a group's "
				 "template node is never guessed");
	if(yj_parse_one(config, strlen(config), &doc, &pe))
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: %s", pe.msg);
	if(!json_object_is_type(doc, json_type_object)) {
		json_object_put(doc);
		return karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config must be a YAML mapping");
	}
	rc = parse_top(k, doc, err);
	json_object_put(doc);
	if(!rc && !k->nshapes)
		rc = karp_fail(err, PRD_CLOUD_EINVAL, "karpenter config: shapes is empty");
	return rc;
}

/* NodePools as node groups: which shapes a NodePool's template allows,
 * which group a NodeClaim belongs to, and how far the NodePool's
 * spec.limits let a group grow. */
#include "karpenter/karpenter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/quantity.h"
#include "util/str.h"

/* The value the shape gives label `key`, or NULL when it says nothing. */
static const char *shape_label(const karp_shape *s, const char *key)
{
	if(!strcmp(key, KARP_IT_LABEL))
		return s->instance_type;
	if(!strcmp(key, KARP_ZONE_LABEL))
		return s->zone;
	if(!strcmp(key, KARP_CT_LABEL))
		return s->capacity_type;
	return s->labels ? drv_jstr(s->labels, key) : NULL;
}

static bool values_have(json_object *values, const char *v)
{
	size_t i, n = json_object_is_type(values, json_type_array) ? json_object_array_length(values) : 0;
	for(i = 0; i < n; i++) {
		const char *x = json_object_get_string(json_object_array_get_idx(values, i));
		if(x && !strcmp(x, v))
			return true;
	}
	return false;
}

/* One requirement against a known value (NULL: the shape does not say). */
static bool requirement_holds(const char *op, json_object *values, const char *v)
{
	int64_t a, b;
	const char *first = json_object_is_type(values, json_type_array) && json_object_array_length(values)
				    ? json_object_get_string(json_object_array_get_idx(values, 0))
				    : NULL;
	if(!strcmp(op, "Exists"))
		return v != NULL;
	if(!strcmp(op, "DoesNotExist"))
		return v == NULL;
	if(!v)
		return true; /* nothing known: Karpenter resolves it at launch */
	if(!strcmp(op, "In"))
		return values_have(values, v);
	if(!strcmp(op, "NotIn"))
		return !values_have(values, v);
	if(!first || str_to_int64(v, &a) || str_to_int64(first, &b))
		return false;
	return !strcmp(op, "Gt") ? a > b : !strcmp(op, "Lt") ? a < b : !strcmp(op, "Gte") ? a >= b : a <= b;
}

bool karp_pool_allows(json_object *np, const karp_shape *s, char *why, size_t n)
{
	json_object *reqs = NULL;
	size_t i, len;
	json_object_object_get_ex(drv_jobj(drv_jobj(drv_jobj(np, "spec"), "template"), "spec"), "requirements", &reqs);
	len = json_object_is_type(reqs, json_type_array) ? json_object_array_length(reqs) : 0;
	for(i = 0; i < len; i++) {
		json_object *r = json_object_array_get_idx(reqs, i), *values = NULL;
		const char *key = drv_jstr(r, "key"), *op = drv_jstr(r, "operator");
		const char *v;
		if(!key || !op)
			continue;
		v = shape_label(s, key);
		json_object_object_get_ex(r, "values", &values);
		if((v || !strcmp(op, "Exists") || !strcmp(op, "DoesNotExist")) && !requirement_holds(op, values, v)) {
			snprintf(why, n, "requirement %s %s %s refuses %s", key, op,
				 values ? json_object_to_json_string_ext(values, JSON_C_TO_STRING_PLAIN) : "[]",
				 v ? v : "(unset)");
			return false;
		}
	}
	return true;
}

/* The single value of an In requirement on `key`, or NULL. */
static const char *pinned(json_object *nc, const char *key)
{
	json_object *reqs = NULL;
	size_t i, n;
	json_object_object_get_ex(drv_jobj(nc, "spec"), "requirements", &reqs);
	n = json_object_is_type(reqs, json_type_array) ? json_object_array_length(reqs) : 0;
	for(i = 0; i < n; i++) {
		json_object *r = json_object_array_get_idx(reqs, i), *values = NULL;
		const char *k = drv_jstr(r, "key"), *op = drv_jstr(r, "operator");
		if(k && op && !strcmp(k, key) && !strcmp(op, "In") && json_object_object_get_ex(r, "values", &values) &&
		   json_object_is_type(values, json_type_array) && json_object_array_length(values) == 1)
			return json_object_get_string(json_object_array_get_idx(values, 0));
	}
	return NULL;
}

static const char *claim_value(json_object *nc, const char *key)
{
	const char *v = drv_jstr(drv_jobj(drv_jobj(nc, "metadata"), "labels"), key);
	return v ? v : pinned(nc, key);
}

void karp_claim_shape(json_object *nc, const char **pool, const char **it, const char **zone, const char **ct)
{
	*pool = claim_value(nc, KARP_POOL_LABEL);
	*it = claim_value(nc, KARP_IT_LABEL);
	*zone = claim_value(nc, KARP_ZONE_LABEL);
	*ct = claim_value(nc, KARP_CT_LABEL);
}

bool karp_claim_in_group(json_object *nc, const karp_group *g)
{
	const char *pool, *it, *zone, *ct;
	karp_claim_shape(nc, &pool, &it, &zone, &ct);
	return str_eq(pool, g->pool) && str_eq(it, g->shape->instance_type) &&
	       (!g->shape->zone || str_eq(zone, g->shape->zone)) &&
	       (!g->shape->capacity_type || str_eq(ct, g->shape->capacity_type));
}

bool karp_claim_deleting(json_object *nc)
{
	return drv_jstr(drv_jobj(nc, "metadata"), "deletionTimestamp") != NULL;
}

json_object *karp_shape_capacity(const karp *k, const karp_shape *s, bool allocatable)
{
	size_t i, n;
	if(s->capacity)
		return allocatable && s->allocatable ? s->allocatable : s->capacity;
	n = k->nodes ? json_object_array_length(k->nodes) : 0;
	for(i = 0; i < n; i++) {
		json_object *node = json_object_array_get_idx(k->nodes, i);
		json_object *st = drv_jobj(node, "status");
		json_object *res = drv_jobj(st, allocatable ? "allocatable" : "capacity");
		if(str_eq(drv_jstr(drv_jobj(drv_jobj(node, "metadata"), "labels"), KARP_IT_LABEL), s->instance_type) && res &&
		   json_object_object_length(res))
			return res;
	}
	return NULL;
}

/* Resource `r` of map `res` in milli-units; false when absent or bad. */
static bool milli_of(json_object *res, const char *r, int64_t *out)
{
	const char *s = res ? drv_jstr(res, r) : NULL;
	json_object *v;
	prd_err pe = {0};
	qty q;
	if(!s && res && json_object_object_get_ex(res, r, &v) && json_object_is_type(v, json_type_int))
		s = json_object_get_string(v);
	return s && !qty_parse(s, &q, &pe) && !qty_milli_value(&q, out);
}

/* What NodeClaim nc takes of resource r: its status.capacity, else the
 * capacity of its shape when the table knows its instance type, else 0
 * (a NodeClaim Karpenter has not launched yet has no type). */
static int64_t claim_uses(const karp *k, json_object *nc, const char *r)
{
	const char *pool, *it, *zone, *ct;
	int64_t v = 0;
	size_t i;
	if(!strcmp(r, "nodes"))
		return 1000;
	if(milli_of(drv_jobj(drv_jobj(nc, "status"), "capacity"), r, &v))
		return v;
	karp_claim_shape(nc, &pool, &it, &zone, &ct);
	for(i = 0; it && i < k->nshapes; i++)
		if(!strcmp(k->shapes[i].instance_type, it) && milli_of(karp_shape_capacity(k, &k->shapes[i], false), r, &v))
			return v;
	return 0;
}

/* Room for more nodes of g's shape under one limit; -1 when the limit does
 * not bound this shape. */
static int64_t room_under(karp *k, karp_group *g, json_object *claims, const char *r, int64_t limit, int64_t *used_out)
{
	int64_t per = 1000, used = 0;
	size_t i, n = json_object_array_length(claims);
	if(strcmp(r, "nodes") && (!milli_of(karp_shape_capacity(k, g->shape, false), r, &per) || per <= 0))
		return -1;
	for(i = 0; i < n; i++) {
		json_object *nc = json_object_array_get_idx(claims, i);
		if(str_eq(claim_value(nc, KARP_POOL_LABEL), g->pool))
			used += claim_uses(k, nc, r);
	}
	*used_out = used;
	return used >= limit ? 0 : (limit - used) / per;
}

void karp_group_limits(karp *k, karp_group *g, json_object *claims)
{
	json_object *limits = drv_jobj(drv_jobj(g->np, "spec"), "limits");
	int64_t room = INT32_MAX, target = (int64_t)g->live + g->tombs;
	g->limit[0] = '\0';
	if(limits) {
		json_object_object_foreach(limits, r, v) {
			int64_t limit, used = 0, x;
			(void)v;
			if(!milli_of(limits, r, &limit))
				continue;
			x = room_under(k, g, claims, r, limit, &used);
			if(x >= 0 && x < room) {
				room = x;
				snprintf(g->limit, sizeof(g->limit), "NodePool %s limit %s=%s (%lld.%03lld used)", g->pool, r,
					 drv_jstr(limits, r) ? drv_jstr(limits, r) : json_object_get_string(v),
					 (long long)(used / 1000), (long long)(used % 1000));
			}
		}
	}
	if(g->shape->max_size >= 0 && g->shape->max_size - (int64_t)g->live < room) {
		room = g->shape->max_size > g->live ? g->shape->max_size - g->live : 0;
		snprintf(g->limit, sizeof(g->limit), "shape maxSize %d", (int)g->shape->max_size);
	}
	g->max = target + room > INT32_MAX ? INT32_MAX : (int32_t)(target + room);
}

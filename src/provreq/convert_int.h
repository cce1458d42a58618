/* Internal header of the conversions (convert_pod.c, convert_node.c,
 * convert_res.c; the public one is convert.h): the small JSON helpers they
 * all use and the pieces one of them converts for another. */
#ifndef PRD_PROVREQ_CONVERT_INT_H
#define PRD_PROVREQ_CONVERT_INT_H

#include "provreq/convert.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- small JSON helpers ------------------------------------------------ */

static inline json_object *get(json_object *o, const char *k)
{
	json_object *v = NULL;
	if(o && json_object_is_type(o, json_type_object))
		json_object_object_get_ex(o, k, &v);
	return v;
}

/* A string field: NULL when absent or null, error when another type. */
static inline int get_string(json_object *o, const char *k, const char *field, const char **out, prd_err *err)
{
	json_object *v = get(o, k);
	*out = NULL;
	if(!v)
		return 0;
	if(!json_object_is_type(v, json_type_string))
		return prd_err_set(err, PRD_EINVAL, "%s.%s: must be a string", field, k);
	*out = json_object_get_string(v);
	return 0;
}

static inline int want_type(json_object *v, json_type t, const char *field, const char *what, prd_err *err)
{
	if(v && !json_object_is_type(v, t))
		return prd_err_set(err, PRD_EINVAL, "%s: must be %s", field, what);
	return 0;
}

static inline size_t arr_len(json_object *v)
{
	return v && json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
}

/* convert_res.c: the requests of one container (its `resources`), with
 * limits standing in for missing requests. */
int pr__conv_container_requests(arena *a, json_object *c, const char *field, sched_container *out,
				prd_err *err);

/* convert_node.c: a label map; a taint effect (-1 when unknown); decoded
 * key/value pairs as labels (NULL when out of memory). */
int pr__conv_labels(arena *a, json_object *map, const char *field, sched_label **out, size_t *n,
		    prd_err *err);
int pr__conv_effect(const char *s, sched_effect *e);
sched_label *pr__conv_kv_labels(arena *a, const kube_kv *kv, size_t n);

#endif

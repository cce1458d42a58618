/* Resource quantities and requests → sched_res arrays (convert.h): resource
 * maps, a container's requests, and the decoded objects' quantities. */
#include "provreq/convert_int.h"
#include "kube/quantity.h"

#include <stdio.h>
#include <string.h>

/* ---- resources --------------------------------------------------------- */

static int to_base_units(const char *name, json_object *v, const char *field, int64_t *out, prd_err *err)
{
	qty q;
	prd_err qe;
	char text[64];
	const char *s;
	int rc;

	if(json_object_is_type(v, json_type_string)) {
		s = json_object_get_string(v);
	} else if(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) {
		/* Quantities may be JSON numbers; their original spelling is kept. */
		snprintf(text, sizeof(text), "%s", json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
		s = text;
	} else {
		return prd_err_set(err, PRD_EINVAL, "%s.%s: must be a quantity", field, name);
	}
	rc = qty_parse(s, &q, &qe);
	if(rc)
		return prd_err_set(err, PRD_EINVAL, "%s.%s: %s", field, name, qe.msg);
	if(qty_sign(&q) < 0)
		return prd_err_set(err, PRD_EINVAL, "%s.%s: must not be negative (%s)", field, name, s);
	rc = strcmp(name, "cpu") == 0 ? qty_milli_value(&q, out) : qty_value(&q, out);
	if(rc || *out < 0 || *out > SCHED_QTY_MAX)
		return prd_err_set(err, PRD_ERANGE, "%s.%s: %s is too large", field, name, s);
	return 0;
}

int pr_conv_resources(arena *a, json_object *map, const char *field, sched_res **out, size_t *n, prd_err *err)
{
	size_t i = 0, cnt;
	sched_res *v;
	int rc;

	*out = NULL;
	*n = 0;
	if(!map)
		return 0;
	if(!json_object_is_type(map, json_type_object))
		return prd_err_set(err, PRD_EINVAL, "%s: must be a map of quantities", field);
	cnt = (size_t)json_object_object_length(map);
	if(cnt > SCHED_RES_MAX)
		return prd_err_set(err, PRD_ERANGE, "%s: more than %d resources", field, SCHED_RES_MAX);
	v = arena_array(a, cnt + 1, sizeof(*v));
	if(!v)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	json_object_object_foreach(map, k, val) {
		rc = to_base_units(k, val, field, &v[i].value, err);
		if(rc)
			return rc;
		v[i].name = k;
		i++;
	}
	*out = v;
	*n = i;
	return 0;
}

/* Requests of one container: requests, with limits standing in for
 * missing requests (API defaulting). */
int pr__conv_container_requests(arena *a, json_object *c, const char *field, sched_container *out, prd_err *err)
{
	json_object *res = get(c, "resources");
	sched_res *req = NULL, *lim = NULL, *all;
	size_t nreq = 0, nlim = 0, i, j, n;
	char f[128];
	int rc;

	snprintf(f, sizeof(f), "%s.resources.requests", field);
	rc = pr_conv_resources(a, get(res, "requests"), f, &req, &nreq, err);
	if(rc)
		return rc;
	snprintf(f, sizeof(f), "%s.resources.limits", field);
	rc = pr_conv_resources(a, get(res, "limits"), f, &lim, &nlim, err);
	if(rc)
		return rc;
	all = arena_array(a, nreq + nlim + 1, sizeof(*all));
	if(!all)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(nreq)
		memcpy(all, req, nreq * sizeof(*req));
	n = nreq;
	for(i = 0; i < nlim; i++) {
		for(j = 0; j < nreq; j++)
			if(!strcmp(req[j].name, lim[i].name))
				break;
		if(j == nreq)
			all[n++] = lim[i];
	}
	if(n > SCHED_RES_MAX)
		return prd_err_set(err, PRD_ERANGE, "%s: more than %d resources", field, SCHED_RES_MAX);
	out->requests = all;
	out->n_requests = n;
	return 0;
}

int pr_conv_kube_res(arena *a, const kube_res *res, size_t n, const char *field, sched_res **out, size_t *nout,
		     prd_err *err)
{
	sched_res *v;
	size_t i;
	*out = NULL;
	*nout = 0;
	if(n > SCHED_RES_MAX)
		return prd_err_set(err, PRD_ERANGE, "%s: more than %d resources", field, SCHED_RES_MAX);
	v = arena_array(a, n + 1, sizeof(*v));
	if(!v)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		int rc;
		if(qty_sign(&res[i].q) < 0)
			return prd_err_set(err, PRD_EINVAL, "%s.%s: must not be negative", field, res[i].name);
		rc = strcmp(res[i].name, "cpu") == 0 ? qty_milli_value(&res[i].q, &v[i].value)
						      : qty_value(&res[i].q, &v[i].value);
		if(rc || v[i].value > SCHED_QTY_MAX)
			return prd_err_set(err, PRD_ERANGE, "%s.%s: too large", field, res[i].name);
		v[i].name = res[i].name;
	}
	*out = v;
	*nout = n;
	return 0;
}

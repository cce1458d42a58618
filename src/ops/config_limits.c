/* The cluster-wide limits of the configuration (--cores-total,
 * --memory-total, --gpu-total): their forms checked, and parsed into
 * cfg_res_limit entries (cfg_res_limits, ops/config.h). */
#include "ops/config.h"
#include "ops/config_int.h"
#include "util/buf.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One whole number of "MIN:MAX", p up to end, times `unit`: PRD_EINVAL
 * when it is not digits, PRD_ERANGE when it does not fit. */
static int min_max_part(const char *p, const char *end, int64_t unit, int64_t *out)
{
	const char *q;
	int64_t v = 0;
	if(p == end)
		return PRD_EINVAL;
	for(q = p; q < end; q++)
		if(*q < '0' || *q > '9')
			return PRD_EINVAL;
	for(; p < end; p++) {
		if(v > (INT64_MAX / unit - (*p - '0')) / 10)
			return PRD_ERANGE;
		v = v * 10 + (*p - '0');
	}
	*out = v * unit;
	return PRD_OK;
}

/* "MIN:MAX" of non-negative integers, MIN <= MAX, scaled by `unit`; the
 * messages quote `whole` (the flag's text) and name its `form`. */
static int parse_min_max(const char *s, const char *whole, const char *form, int64_t unit, int64_t *min, int64_t *max,
			 buf *why)
{
	const char *colon = strchr(s, ':');
	int ra, rb;
	if(!colon || strchr(colon + 1, ':'))
		goto bad;
	ra = min_max_part(s, colon, unit, min);
	rb = min_max_part(colon + 1, colon + strlen(colon), unit, max);
	if(ra == PRD_EINVAL || rb == PRD_EINVAL)
		goto bad;
	if(ra == PRD_ERANGE || rb == PRD_ERANGE) {
		buf_printf(why, "'%s': %s is too large (at most %lld)", whole, ra == PRD_ERANGE ? "MIN" : "MAX",
			   (long long)(INT64_MAX / unit));
		return PRD_EINVAL;
	}
	if(*min > *max) {
		buf_printf(why, "'%s': MIN is above MAX", whole);
		return PRD_EINVAL;
	}
	return PRD_OK;
bad:
	buf_printf(why, "'%s' is not %s (whole numbers)", whole, form);
	return PRD_EINVAL;
}

int cfg__check_cores_total(const cfg *c, buf *why)
{
	int64_t a, b;
	return c->cores_total[0] ? parse_min_max(c->cores_total, c->cores_total, "MIN:MAX", 1000, &a, &b, why) : PRD_OK;
}

int cfg__check_memory_total(const cfg *c, buf *why)
{
	int64_t a, b;
	return c->memory_total[0] ? parse_min_max(c->memory_total, c->memory_total, "MIN:MAX", 1LL << 30, &a, &b, why) : PRD_OK;
}

/* One "TYPE:MIN:MAX": the resource name into out (size 254). */
static int parse_gpu(const char *s, char *name, int64_t *min, int64_t *max, buf *why)
{
	const char *colon = strchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : 0;
	if(!colon || n == 0 || n > 253) {
		buf_printf(why, "'%s' is not TYPE:MIN:MAX (TYPE: an extended resource such as nvidia.com/gpu)", s);
		return PRD_EINVAL;
	}
	memcpy(name, s, n);
	name[n] = '\0';
	if(!strchr(name, '/') || !strcmp(name, "cpu") || !strcmp(name, "memory")) {
		buf_printf(why, "'%s': TYPE must be an extended resource name with a domain (nvidia.com/gpu)", s);
		return PRD_EINVAL;
	}
	return parse_min_max(colon + 1, s, "TYPE:MIN:MAX", 1, min, max, why);
}

int cfg__check_gpu_total(const cfg *c, buf *why)
{
	char name[254];
	int64_t a, b;
	size_t i, j;
	for(i = 0; i < c->gpu_total.n; i++) {
		if(parse_gpu(c->gpu_total.v[i], name, &a, &b, why))
			return PRD_EINVAL;
		for(j = 0; j < i; j++)
			if(!strncmp(c->gpu_total.v[j], name, strlen(name)) && c->gpu_total.v[j][strlen(name)] == ':') {
				buf_printf(why, "%s is limited twice", name);
				return PRD_EINVAL;
			}
	}
	return PRD_OK;
}

int cfg_res_limits(const cfg *c, cfg_res_limit **out, size_t *n, buf *why)
{
	cfg_res_limit *v = calloc(c->gpu_total.n + 3, sizeof(*v));
	size_t k = 0, i;
	int rc = PRD_OK;
	*out = NULL;
	*n = 0;
	if(!v)
		return PRD_ENOMEM;
	if(c->cores_total[0] && !(rc = parse_min_max(c->cores_total, c->cores_total, "MIN:MAX", 1000, &v[k].min, &v[k].max, why))) {
		snprintf(v[k].resource, sizeof(v[k].resource), "cpu");
		snprintf(v[k++].flag, sizeof(v[0].flag), "--cores-total");
	}
	if(!rc && c->memory_total[0] &&
	   !(rc = parse_min_max(c->memory_total, c->memory_total, "MIN:MAX", 1LL << 30, &v[k].min, &v[k].max, why))) {
		snprintf(v[k].resource, sizeof(v[k].resource), "memory");
		snprintf(v[k++].flag, sizeof(v[0].flag), "--memory-total");
	}
	for(i = 0; !rc && i < c->gpu_total.n; i++) {
		rc = parse_gpu(c->gpu_total.v[i], v[k].resource, &v[k].min, &v[k].max, why);
		if(!rc)
			snprintf(v[k++].flag, sizeof(v[0].flag), "--gpu-total");
	}
	if(rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n = k;
	return PRD_OK;
}

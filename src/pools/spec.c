/* Parsing a ResourcePool's provreqd.io/populate-* annotations. */
#include "pools/pools.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

void pool_spec_free(pool_spec *s)
{
	size_t i;

	if(!s)
		return;
	sel_free(s->selector);
	free(s->selector_text);
	for(i = 0; i < s->nresources; i++)
		free(s->resources[i]);
	free(s->resources);
	for(i = 0; i < s->nheadroom; i++)
		free(s->headroom[i].resource);
	free(s->headroom);
	memset(s, 0, sizeof(*s));
}

/* Split a comma list into trimmed items and call fn on each; an empty
 * item ("a,,b", a trailing comma) is an error, an all-blank list is none. */
static int each_item(const char *list, int (*fn)(void *ud, char *item, prd_err *err), void *ud, prd_err *err)
{
	char *copy = str_dup(list), *p, *next;
	int rc = 0;

	if(!copy)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(!*str_trim(copy))
		goto done;
	for(p = copy; p && !rc; p = next) {
		next = strchr(p, ',');
		if(next)
			*next++ = '\0';
		str_trim(p);
		if(!*p) {
			rc = prd_err_set(err, PRD_EINVAL, "empty item in \"%s\"", list);
			break;
		}
		rc = fn(ud, p, err);
	}
done:
	free(copy);
	return rc;
}

static int add_resource(void *ud, char *item, prd_err *err)
{
	pool_spec *s = ud;
	char key[POOL_KEY_MAX];
	char **grown;
	size_t i;

	if(!pool_quota_key(item, key, sizeof(key)))
		return prd_err_set(err, PRD_EINVAL,
				   "\"%s\" is not a resource that maps to a quota key (cpu, memory, ephemeral-storage, "
				   "pods, hugepages-<size> or an extended resource like nvidia.com/gpu)", item);
	for(i = 0; i < s->nresources; i++)
		if(!strcmp(s->resources[i], item))
			return prd_err_set(err, PRD_EINVAL, "\"%s\" is listed twice", item);
	grown = realloc(s->resources, (s->nresources + 1) * sizeof(*grown));
	if(!grown)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	s->resources = grown;
	if(!(s->resources[s->nresources] = str_dup(item)))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	s->nresources++;
	return 0;
}

/* "P%" with P a decimal in 0..100. */
static int parse_percent(const char *s, pool_ratio *out, prd_err *err)
{
	size_t n = strlen(s);
	char num[32];
	pool_ratio r;
	int rc;

	if(n < 2 || s[n - 1] != '%' || n - 1 >= sizeof(num))
		return prd_err_set(err, PRD_EINVAL, "\"%s\" is not a percentage like 10%%", s);
	memcpy(num, s, n - 1);
	num[n - 1] = '\0';
	if((rc = pool_ratio_parse(num, &r, err)))
		return rc;
	if(r.num > 100 * r.den)
		return prd_err_set(err, PRD_EINVAL, "%s is more than 100%%", s);
	*out = r;
	return 0;
}

static int add_headroom(void *ud, char *item, prd_err *err)
{
	pool_spec *s = ud;
	pool_headroom h = { 0 };
	char *eq = strchr(item, '=');
	pool_headroom *grown;
	char key[POOL_KEY_MAX];
	size_t i;
	int rc;

	if(!eq) {
		if((rc = parse_percent(item, &h.pct, err))) {
			prd_err_prefix(err, "item \"%s\"", item);
			return rc;
		}
		h.percent = true;
	} else {
		char *val = eq + 1;
		*eq = '\0';
		str_trim(item);
		str_trim(val);
		if(!pool_quota_key(item, key, sizeof(key)))
			return prd_err_set(err, PRD_EINVAL, "item \"%s=%s\": \"%s\" is not a resource that maps to a "
					   "quota key", item, val, item);
		if(*val && val[strlen(val) - 1] == '%') {
			if((rc = parse_percent(val, &h.pct, err))) {
				prd_err_prefix(err, "item \"%s=%s\"", item, val);
				return rc;
			}
			h.percent = true;
		} else {
			prd_err qe;
			if(qty_parse(val, &h.amount, &qe))
				return prd_err_set(err, PRD_EINVAL, "item \"%s=%s\": bad quantity: %s", item, val, qe.msg);
			if(qty_sign(&h.amount) < 0)
				return prd_err_set(err, PRD_EINVAL, "item \"%s=%s\": negative headroom", item, val);
		}
	}
	for(i = 0; i < s->nheadroom; i++)
		if(str_eq(s->headroom[i].resource, eq ? item : NULL))
			return prd_err_set(err, PRD_EINVAL, "%s%s is given twice", eq ? "resource " : "the default percentage",
					   eq ? item : "");
	if(eq && !(h.resource = str_dup(item)))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	grown = realloc(s->headroom, (s->nheadroom + 1) * sizeof(*grown));
	if(!grown) {
		free(h.resource);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	s->headroom = grown;
	s->headroom[s->nheadroom++] = h;
	return 0;
}

int pool_spec_parse(const kube_kv *ann, size_t nann, pool_spec *out, prd_err *err)
{
	const char *selector = kube_kv_get(ann, nann, POOL_ANN_SELECTOR);
	const char *resources = kube_kv_get(ann, nann, POOL_ANN_RESOURCES);
	const char *headroom = kube_kv_get(ann, nann, POOL_ANN_HEADROOM);
	const char *factor = kube_kv_get(ann, nann, POOL_ANN_FACTOR);
	pool_spec s = { 0 };
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if(!selector)
		return prd_err_set(err, PRD_ENOTFOUND, "%s is not set", POOL_ANN_SELECTOR);
	if(!(s.selector_text = str_dup(selector))) {
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		goto done;
	}
	if((rc = sel_parse(selector, &s.selector, err))) {
		prd_err_prefix(err, "%s: bad label selector \"%s\"", POOL_ANN_SELECTOR, selector);
		goto done;
	}
	if(resources) {
		if((rc = each_item(resources, add_resource, &s, err))) {
			prd_err_prefix(err, "%s", POOL_ANN_RESOURCES);
			goto done;
		}
		if(!s.nresources) {
			rc = prd_err_set(err, PRD_EINVAL, "%s: lists no resource (remove the annotation for the default set)",
					 POOL_ANN_RESOURCES);
			goto done;
		}
	}
	if(headroom && (rc = each_item(headroom, add_headroom, &s, err))) {
		prd_err_prefix(err, "%s", POOL_ANN_HEADROOM);
		goto done;
	}
	if(factor) {
		char *f = str_dup(factor);
		if(!f) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			goto done;
		}
		rc = pool_ratio_parse(str_trim(f), &s.factor, err);
		free(f);
		if(rc) {
			prd_err_prefix(err, "%s", POOL_ANN_FACTOR);
			goto done;
		}
		s.has_factor = true;
	}
done:
	if(rc)
		pool_spec_free(&s);
	else
		*out = s;
	return rc;
}

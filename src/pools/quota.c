/* Resource name → quota key mapping and exact scaling of quantities. */
#include "pools/pools.h"
#include "util/str.h"

#include <stdio.h>
#include <string.h>

__extension__ typedef __int128 i128;

bool pool_is_extended(const char *resource)
{
	const char *slash = resource ? strchr(resource, '/') : NULL;
	size_t dlen;

	if(!slash || sel_validate_key(resource, NULL))
		return false;
	/* Kubernetes keeps the kubernetes.io namespace (and subdomains of
	 * it) for itself; "requests." would clash with quota prefixes. */
	dlen = (size_t)(slash - resource);
	if((dlen == 13 && !strncmp(resource, "kubernetes.io", 13)) ||
	   (dlen > 14 && !strncmp(slash - 14, ".kubernetes.io", 14)))
		return false;
	return !str_starts_with(resource, "requests.");
}

bool pool_quota_key(const char *resource, char *out, size_t n)
{
	const char *prefix = NULL;

	if(n)
		out[0] = '\0';
	if(!resource || !resource[0])
		return false;
	if(!strcmp(resource, "pods"))
		prefix = "";
	else if(!strcmp(resource, "cpu") || !strcmp(resource, "memory") || !strcmp(resource, "ephemeral-storage"))
		prefix = "requests.";
	else if(str_starts_with(resource, "hugepages-") && resource[10] && !sel_validate_key(resource, NULL))
		prefix = "requests.";
	else if(pool_is_extended(resource))
		prefix = "requests.";
	if(!prefix)
		return false;
	int w = snprintf(out, n, "%s%s", prefix, resource);
	if(w < 0 || (size_t)w >= n) {
		if(n)
			out[0] = '\0';
		return false;
	}
	return true;
}

int64_t pool_granularity(const char *resource)
{
	return resource && !strcmp(resource, "cpu") ? PRD_NS_PER_MS : PRD_NS_PER_SEC;
}

int pool_ratio_parse(const char *s, pool_ratio *out, prd_err *err)
{
	int64_t num = 0, den = 1;
	bool dot = false, digits = false;
	const char *p;

	if(!s || !*s)
		return prd_err_set(err, PRD_EINVAL, "empty number");
	for(p = s; *p; p++) {
		if(*p == '.' && !dot) {
			dot = true;
			continue;
		}
		if(*p < '0' || *p > '9')
			return prd_err_set(err, PRD_EINVAL, "\"%s\" is not a decimal number like 1.5", s);
		digits = true;
		if(dot) {
			if(den == 1000000000)
				return prd_err_set(err, PRD_EINVAL, "\"%s\" has more than 9 decimal places", s);
			den *= 10;
		}
		num = num * 10 + (*p - '0');
		if(num / den > 1000000000)
			return prd_err_set(err, PRD_ERANGE, "\"%s\" is too large", s);
	}
	if(!digits)
		return prd_err_set(err, PRD_EINVAL, "\"%s\" is not a decimal number like 1.5", s);
	out->num = num;
	out->den = den;
	return 0;
}

/* The exact amount of q in nano units. The quantity type keeps its amount
 * private, so read it back from the canonical DecimalSI string, whose
 * mantissa is always a whole number followed by an SI suffix or an
 * exponent. */
static int qty_nano(const qty *q, i128 *out)
{
	static const struct { char c; int exp; } sfx[] = {
		{ 'n', -9 }, { 'u', -6 }, { 'm', -3 }, { 'k', 3 }, { 'M', 6 },
		{ 'G', 9 }, { 'T', 12 }, { 'P', 15 }, { 'E', 18 } };
	char s[QTY_STR_MAX];
	qty d = *q;
	const char *p = s;
	i128 v = 0;
	bool neg = false;
	int exp = 0, k;
	size_t i;

	qty_set_format(&d, QTY_DECIMAL_SI);
	if(qty_format_str(&d, s, sizeof(s)))
		return PRD_ERANGE;
	if(*p == '-') {
		neg = true;
		p++;
	}
	for(; *p >= '0' && *p <= '9'; p++)
		if(__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *p - '0', &v))
			return PRD_ERANGE;
	if(*p == 'e' || *p == 'E') {
		int64_t e;
		if(str_to_int64(p + 1, &e) || e < -9 || e > 60)
			return PRD_ERANGE;
		exp = (int)e;
	} else if(*p) {
		for(i = 0; i < sizeof(sfx) / sizeof(sfx[0]) && sfx[i].c != *p; i++)
			;
		if(i == sizeof(sfx) / sizeof(sfx[0]) || p[1])
			return PRD_ERANGE;
		exp = sfx[i].exp;
	}
	for(k = 0; k < exp + 9; k++)
		if(__builtin_mul_overflow(v, 10, &v))
			return PRD_ERANGE;
	*out = neg ? -v : v;
	return 0;
}

/* A quantity of exactly v nano units in format f. */
static int qty_from_nano(i128 v, qty_format f, qty *out)
{
	char s[64], *p = s + sizeof(s);
	bool neg = v < 0;
	unsigned __int128 u = neg ? -(unsigned __int128)v : (unsigned __int128)v;
	qty r;

	*--p = '\0';
	*--p = 'n';
	do {
		*--p = (char)('0' + (int)(u % 10));
		u /= 10;
	} while(u);
	if(neg)
		*--p = '-';
	if(qty_parse(p, &r, NULL))
		return PRD_ERANGE;
	qty_set_format(&r, f);
	*out = r;
	return 0;
}

int pool_qty_scale(const qty *q, const pool_ratio *r, int64_t gran_nano, qty *out)
{
	i128 v, m;

	if(r->den <= 0 || r->num < 0 || gran_nano <= 0)
		return PRD_EINVAL;
	if(qty_nano(q, &v) || __builtin_mul_overflow(v, (i128)r->num, &m))
		return PRD_ERANGE;
	/* Dividing by den and then flooring to gran is one floor by den*gran
	 * (both positive), then a multiplication back; C division truncates
	 * toward zero, which is the floor for the non-negative amounts here
	 * and rounds a negative one toward zero too. */
	i128 step = (i128)r->den * gran_nano;
	m = m / step;
	if(__builtin_mul_overflow(m, (i128)gran_nano, &m))
		return PRD_ERANGE;
	return qty_from_nano(m, qty_get_format(q), out);
}

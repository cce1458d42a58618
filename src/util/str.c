/* Small string helpers: copies, formatting, numbers, durations, hashing,
 * edit distance, Kubernetes name and label-value checks. */
#include "util/str.h"
#include "util/err.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

char *str_dup(const char *s)
{
	return s ? str_ndup(s, strlen(s)) : NULL;
}

char *str_ndup(const char *s, size_t n)
{
	char *p;
	if(!s)
		return NULL;
	p = malloc(n + 1);
	if(!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *str_printf(const char *fmt, ...)
{
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if(n < 0)
		return NULL;
	p = malloc((size_t)n + 1);
	if(!p)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

bool str_eq(const char *a, const char *b)
{
	if(!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

bool str_starts_with(const char *s, const char *prefix)
{
	return s && prefix && strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_ends_with(const char *s, const char *suffix)
{
	size_t ls, lx;
	if(!s || !suffix)
		return false;
	ls = strlen(s);
	lx = strlen(suffix);
	return lx <= ls && memcmp(s + ls - lx, suffix, lx) == 0;
}

bool str_copy(char *dst, size_t n, const char *src)
{
	size_t l;
	if(!n)
		return false;
	l = strlen(src);
	if(l >= n) {
		memcpy(dst, src, n - 1);
		dst[n - 1] = '\0';
		return false;
	}
	memcpy(dst, src, l + 1);
	return true;
}

char *str_trim(char *s)
{
	size_t l;
	char *p = s;
	while(*p && isspace((unsigned char)*p))
		p++;
	if(p != s)
		memmove(s, p, strlen(p) + 1);
	l = strlen(s);
	while(l && isspace((unsigned char)s[l - 1]))
		s[--l] = '\0';
	return s;
}

int str_to_int64_n(const char *s, size_t n, int64_t *out)
{
	size_t i = 0;
	int neg = 0;
	uint64_t v = 0, lim;

	if(!s || !n)
		return PRD_EINVAL;
	if(s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-';
		i = 1;
	}
	if(i == n)
		return PRD_EINVAL;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for(; i < n; i++) {
		unsigned d;
		if(s[i] < '0' || s[i] > '9')
			return PRD_EINVAL;
		d = (unsigned)(s[i] - '0');
		if(v > (lim - d) / 10)
			return PRD_ERANGE;
		v = v * 10 + d;
	}
	if(neg)
		*out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
	else
		*out = (int64_t)v;
	return PRD_OK;
}

int str_to_int64(const char *s, int64_t *out)
{
	return s ? str_to_int64_n(s, strlen(s), out) : PRD_EINVAL;
}

int str_to_bool(const char *s, bool *out)
{
	if(!s)
		return PRD_EINVAL;
	if(strcasecmp(s, "true") == 0)
		*out = true;
	else if(strcasecmp(s, "false") == 0)
		*out = false;
	else
		return PRD_EINVAL;
	return PRD_OK;
}

static bool dns_label_n(const char *s, size_t n)
{
	size_t i;
	if(n == 0 || n > 63)
		return false;
	for(i = 0; i < n; i++) {
		char c = s[i];
		if(!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return s[0] != '-' && s[n - 1] != '-';
}

bool str_is_dns_label(const char *s)
{
	return s && dns_label_n(s, strlen(s));
}

bool str_is_dns_subdomain(const char *s)
{
	size_t n, start = 0, i;
	if(!s)
		return false;
	n = strlen(s);
	if(n == 0 || n > 253)
		return false;
	for(i = 0; i <= n; i++) {
		if(i == n || s[i] == '.') {
			if(!dns_label_n(s + start, i - start))
				return false;
			start = i + 1;
		}
	}
	return true;
}

int str_parse_duration(const char *s, int64_t *out_ns)
{
	static const struct { const char *u; int64_t ns; } units[] = {
		{ "ns", 1LL }, { "us", 1000LL }, { "ms", 1000000LL },
		{ "s", 1000000000LL }, { "m", 60000000000LL },
		{ "h", 3600000000000LL }, { "d", 86400000000000LL },
	};
	const char *p = s;
	int64_t total = 0;

	if(!s || !*s)
		return PRD_EINVAL;
	if(strcmp(s, "0") == 0) {
		*out_ns = 0;
		return PRD_OK;
	}
	while(*p) {
		int64_t v = 0;
		const char *num = p;
		size_t ul = 0, best = 0;
		int64_t mul = 0;
		size_t k;

		while(*p >= '0' && *p <= '9') {
			if(v > (INT64_MAX - 9) / 10)
				return PRD_ERANGE;
			v = v * 10 + (*p - '0');
			p++;
		}
		if(p == num)
			return PRD_EINVAL;
		for(k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
			ul = strlen(units[k].u);
			if(strncmp(p, units[k].u, ul) == 0 && ul > best) {
				best = ul;
				mul = units[k].ns;
			}
		}
		if(!best)
			return PRD_EINVAL;
		p += best;
		if(v > (INT64_MAX - total) / mul)
			return PRD_ERANGE;
		total += v * mul;
	}
	*out_ns = total;
	return PRD_OK;
}

uint64_t str_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	size_t i;
	for(i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ULL;
	}
	return h;
}

size_t str_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j;
	size_t row[128];
	if(lb >= 128 || la >= 128)
		return (size_t)-1;
	for(j = 0; j <= lb; j++)
		row[j] = j;
	for(i = 1; i <= la; i++) {
		size_t prev = row[0];
		row[0] = i;
		for(j = 1; j <= lb; j++) {
			size_t cur = row[j];
			size_t best = prev + (a[i - 1] != b[j - 1]);
			if(row[j] + 1 < best)
				best = row[j] + 1;
			if(row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			prev = cur;
		}
	}
	return row[lb];
}

const char *str_closest(const char *word, const char *const *cands, size_t n)
{
	size_t i, best = (size_t)-1, limit = strlen(word) / 3;
	const char *pick = NULL;
	if(limit < 2)
		limit = 2;
	for(i = 0; i < n; i++) {
		size_t d = str_edit_distance(word, cands[i]);
		if(d < best) {
			best = d;
			pick = cands[i];
		}
	}
	return best <= limit ? pick : NULL;
}

bool str_is_qualified_name(const char *s, size_t n)
{
	const char *slash = memchr(s, '/', n);
	size_t i;

	if(slash) {
		char prefix[254];
		size_t pl = (size_t)(slash - s);
		if(pl == 0 || pl > 253)
			return false;
		memcpy(prefix, s, pl);
		prefix[pl] = '\0';
		if(!str_is_dns_subdomain(prefix))
			return false;
		n -= pl + 1;
		s = slash + 1;
	}
	if(n == 0 || n > 63)
		return false;
	for(i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if(!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

bool str_is_label_value(const char *v)
{
	return *v == '\0' || (!strchr(v, '/') && str_is_qualified_name(v, strlen(v)));
}

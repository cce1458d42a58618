/* Strict JSON pull scanner (see jscan.h for what it refuses and why). */
#include "kube/jscan.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

#define BAIL KUBE_JS_BAIL

void kube__js_init(kube_js *j, const char *data, size_t len, int max_depth)
{
	memset(j, 0, sizeof(*j));
	j->p = data;
	j->end = data + len;
	j->max_depth = max_depth;
}

void kube__js_free(kube_js *j)
{
	free(j->tmp);
	j->tmp = NULL;
	j->tmpcap = 0;
}

static inline void ws(kube_js *j)
{
	while(j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
		j->p++;
}

int kube__js_peek(kube_js *j)
{
	ws(j);
	return j->p < j->end ? (unsigned char)*j->p : -1;
}

static bool literal(kube_js *j, const char *lit, size_t n)
{
	if((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
		return false;
	j->p += n;
	return true;
}

bool kube__js_null(kube_js *j)
{
	ws(j);
	return literal(j, "null", 4);
}

static int open_container(kube_js *j, char c)
{
	ws(j);
	if(j->p >= j->end || *j->p != c || j->depth >= j->max_depth)
		return BAIL;
	j->p++;
	j->depth++;
	j->first = true;
	return 0;
}

int kube__js_obj_begin(kube_js *j)
{
	return open_container(j, '{');
}

int kube__js_arr_begin(kube_js *j)
{
	return open_container(j, '[');
}

/* Before the next member: the closing byte (more = false) or, unless this
 * is the first member, a comma. */
static int next_member(kube_js *j, char close, bool *more)
{
	ws(j);
	if(j->p >= j->end)
		return BAIL;
	if(*j->p == close) {
		j->p++;
		j->depth--;
		j->first = false;
		*more = false;
		return 0;
	}
	if(!j->first) {
		if(*j->p != ',')
			return BAIL;
		j->p++;
		ws(j);
	}
	j->first = false;
	*more = true;
	return 0;
}

int kube__js_arr_next(kube_js *j, bool *more)
{
	return next_member(j, ']', more);
}

int kube__js_obj_next(kube_js *j, kube_jstr *key, bool *more)
{
	int rc = next_member(j, '}', more);
	if(rc || !*more)
		return rc;
	if((rc = kube__js_str(j, key)) != 0)
		return rc;
	ws(j);
	if(j->p >= j->end || *j->p != ':')
		return BAIL;
	j->p++;
	return 0;
}

static int hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	int i;
	for(i = 0; i < 4; i++) {
		char c = p[i];
		v <<= 4;
		if(c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if(c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if(c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return BAIL;
	}
	*out = v;
	return 0;
}

static size_t utf8_put(char *o, unsigned cp)
{
	if(cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if(cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if(cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* One \u escape at p (just after the 'u'), a surrogate pair included;
 * *adv is how many input bytes it took after the 'u'. */
static int unicode_escape(const char *p, const char *end, unsigned *cp, size_t *adv)
{
	unsigned hi, lo;
	if(end - p < 4 || hex4(p, &hi))
		return BAIL;
	*adv = 4;
	if(hi == 0 || (hi >= 0xDC00 && hi <= 0xDFFF))
		return BAIL;
	if(hi >= 0xD800 && hi <= 0xDBFF) {
		if(end - p < 10 || p[4] != '\\' || p[5] != 'u' || hex4(p + 6, &lo) || lo < 0xDC00 || lo > 0xDFFF)
			return BAIL;
		*cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
		*adv = 10;
		return 0;
	}
	*cp = hi;
	return 0;
}

/* The string from the first escape on, unescaped into j->tmp. `start` is
 * the first content byte, j->p the first backslash. */
static int unescape(kube_js *j, const char *start, kube_jstr *out)
{
	size_t need, n;
	char *o;
	const char *p;

	/* Find the closing quote first: unescaped text is never longer than
	 * the escaped input, so that bounds the buffer (the rest of a large
	 * page would not be a sensible bound). */
	for(p = j->p; p < j->end && *p != '"'; p++)
		if(*p == '\\' && ++p == j->end)
			break;
	if(p >= j->end)
		return BAIL;
	need = (size_t)(p - start) + 1;
	if(need > j->tmpcap) {
		size_t cap = j->tmpcap ? j->tmpcap : 256;
		char *t;
		while(cap < need)
			cap *= 2;
		t = realloc(j->tmp, cap);
		if(!t)
			return BAIL;
		j->tmp = t;
		j->tmpcap = cap;
	}
	n = (size_t)(j->p - start);
	memcpy(j->tmp, start, n);
	o = j->tmp + n;
	for(p = j->p; p < j->end;) {
		unsigned char c = (unsigned char)*p;
		if(c == '"') {
			*o = '\0';
			out->s = j->tmp;
			out->len = (size_t)(o - j->tmp);
			j->p = p + 1;
			return 0;
		}
		if(c < 0x20)
			return BAIL;
		if(c != '\\') {
			*o++ = (char)c;
			p++;
			continue;
		}
		if(++p >= j->end)
			return BAIL;
		switch(*p) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp;
			size_t adv;
			if(unicode_escape(p + 1, j->end, &cp, &adv))
				return BAIL;
			o += utf8_put(o, cp);
			p += adv;
			break;
		}
		default: return BAIL;
		}
		p++;
	}
	return BAIL;
}

int kube__js_str(kube_js *j, kube_jstr *out)
{
	const char *start, *p;
	ws(j);
	if(j->p >= j->end || *j->p != '"')
		return BAIL;
	start = p = j->p + 1;
	for(; p < j->end; p++) {
		unsigned char c = (unsigned char)*p;
		if(c == '"') {
			out->s = start;
			out->len = (size_t)(p - start);
			j->p = p + 1;
			return 0;
		}
		if(c == '\\') {
			j->p = p;
			return unescape(j, start, out);
		}
		if(c < 0x20)
			return BAIL;
	}
	return BAIL;
}

/* Skip a string without copying it (escapes still checked). */
static int skip_str(kube_js *j)
{
	const char *p = j->p + 1;
	for(; p < j->end; p++) {
		unsigned char c = (unsigned char)*p;
		if(c == '"') {
			j->p = p + 1;
			return 0;
		}
		if(c < 0x20)
			return BAIL;
		if(c == '\\') {
			if(++p >= j->end)
				return BAIL;
			if(*p == 'u') {
				unsigned cp;
				size_t adv;
				if(unicode_escape(p + 1, j->end, &cp, &adv))
					return BAIL;
				p += adv;
			} else if(!*p || !strchr("\"\\/bfnrt", *p)) {
				return BAIL;
			}
		}
	}
	return BAIL;
}

/* Bytes that may follow a number or a literal. */
static bool delim(const char *p, const char *end)
{
	return p >= end || *p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == ',' || *p == ']' || *p == '}';
}

static bool digit(const char *p, const char *end)
{
	return p < end && *p >= '0' && *p <= '9';
}

/* A number by the RFC 8259 grammar; *plain says it had no fraction or
 * exponent. */
static int number(kube_js *j, const char **start, bool *plain)
{
	const char *p = j->p;
	*start = p;
	*plain = true;
	if(p < j->end && *p == '-')
		p++;
	if(!digit(p, j->end))
		return BAIL;
	if(*p == '0')
		p++;
	else
		while(digit(p, j->end))
			p++;
	if(p < j->end && *p == '.') {
		*plain = false;
		if(!digit(++p, j->end))
			return BAIL;
		while(digit(p, j->end))
			p++;
	}
	if(p < j->end && (*p == 'e' || *p == 'E')) {
		*plain = false;
		p++;
		if(p < j->end && (*p == '+' || *p == '-'))
			p++;
		if(!digit(p, j->end))
			return BAIL;
		while(digit(p, j->end))
			p++;
	}
	/* A number must end at a delimiter: json-c reads "1x" its own way. */
	if(!delim(p, j->end))
		return BAIL;
	j->p = p;
	return 0;
}

int kube__js_int(kube_js *j, int64_t *out)
{
	const char *s, *p;
	bool plain, neg;
	uint64_t v = 0, lim;
	ws(j);
	if(number(j, &s, &plain) || !plain)
		return BAIL;
	neg = *s == '-';
	p = s + neg;
	if(neg && *p == '0')
		return BAIL;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	for(; p < j->p; p++) {
		unsigned d = (unsigned)(*p - '0');
		if(v > (lim - d) / 10)
			return BAIL;
		v = v * 10 + d;
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

int kube__js_bool(kube_js *j, bool *out)
{
	ws(j);
	if(literal(j, "true", 4))
		*out = true;
	else if(literal(j, "false", 5))
		*out = false;
	else
		return BAIL;
	return delim(j->p, j->end) ? 0 : BAIL;
}

int kube__js_skip(kube_js *j)
{
	const char *s;
	bool more, plain, b;
	kube_jstr k;
	int rc, c = kube__js_peek(j);

	switch(c) {
	case '"':
		return skip_str(j);
	case '{':
		if((rc = kube__js_obj_begin(j)) != 0)
			return rc;
		while(!(rc = kube__js_obj_next(j, &k, &more)) && more)
			if((rc = kube__js_skip(j)) != 0)
				return rc;
		return rc;
	case '[':
		if((rc = kube__js_arr_begin(j)) != 0)
			return rc;
		while(!(rc = kube__js_arr_next(j, &more)) && more)
			if((rc = kube__js_skip(j)) != 0)
				return rc;
		return rc;
	case 't':
	case 'f':
		return kube__js_bool(j, &b);
	case 'n':
		if(!kube__js_null(j))
			return BAIL;
		return delim(j->p, j->end) ? 0 : BAIL;
	default:
		return number(j, &s, &plain);
	}
}

int kube__js_end(kube_js *j)
{
	ws(j);
	return j->p == j->end ? 0 : BAIL;
}

/* ------------------------------------------------------------- framing */

void kube__page_free(kube_page *pg)
{
	free(pg->items);
	free(pg->rv);
	free(pg->cont);
	memset(pg, 0, sizeof(*pg));
}

/* A copy of a string value into *dst (replacing an earlier one). */
static int dup_str(kube_js *j, char **dst)
{
	kube_jstr v;
	char *c;
	if(kube__js_str(j, &v))
		return BAIL;
	c = malloc(v.len + 1);
	if(!c)
		return PRD_ENOMEM;
	memcpy(c, v.s, v.len);
	c[v.len] = '\0';
	free(*dst);
	*dst = c;
	return 0;
}

static int page_meta(kube_js *j, kube_page *pg)
{
	kube_jstr k;
	bool more;
	int rc;
	/* A later "metadata" replaces an earlier one whole. */
	free(pg->rv);
	free(pg->cont);
	pg->rv = pg->cont = NULL;
	if(kube__js_null(j))
		return 0;
	if((rc = kube__js_obj_begin(j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(j, &k, &more)) && more) {
		/* json-c gives a null or non-string continue or
		 * resourceVersion its own meaning: let it. */
		if(KUBE_JS_IS(&k, "continue"))
			rc = dup_str(j, &pg->cont);
		else if(KUBE_JS_IS(&k, "resourceVersion"))
			rc = dup_str(j, &pg->rv);
		else
			rc = kube__js_skip(j);
		if(rc)
			return rc;
	}
	return rc;
}

static int page_items(kube_js *j, kube_page *pg)
{
	bool more;
	int rc;
	pg->nitems = 0;
	if(kube__js_null(j))
		return 0;
	if((rc = kube__js_arr_begin(j)) != 0)
		return rc;
	while(!(rc = kube__js_arr_next(j, &more)) && more) {
		const char *start;
		if(kube__js_peek(j) != '{')
			return BAIL;
		start = j->p;
		if((rc = kube__js_skip(j)) != 0)
			return rc;
		if(pg->nitems == pg->cap) {
			size_t ncap = pg->cap ? pg->cap * 2 : 64;
			kube_jstr *n = realloc(pg->items, ncap * sizeof(*n));
			if(!n)
				return PRD_ENOMEM;
			pg->items = n;
			pg->cap = ncap;
		}
		pg->items[pg->nitems].s = start;
		pg->items[pg->nitems].len = (size_t)(j->p - start);
		pg->nitems++;
	}
	return rc;
}

int kube__page_scan(const char *data, size_t len, int max_depth, kube_page *pg)
{
	kube_js j;
	kube_jstr k;
	bool more, have_items = false;
	int rc;

	memset(pg, 0, sizeof(*pg));
	kube__js_init(&j, data, len, max_depth);
	if((rc = kube__js_obj_begin(&j)) != 0)
		goto done;
	while(!(rc = kube__js_obj_next(&j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "items")) {
			have_items = true;
			rc = page_items(&j, pg);
		} else if(KUBE_JS_IS(&k, "metadata")) {
			rc = page_meta(&j, pg);
		} else {
			rc = kube__js_skip(&j);
		}
		if(rc)
			goto done;
	}
	if(!rc)
		rc = kube__js_end(&j);
	/* A page without items is an error the json-c path words. */
	if(!rc && !have_items)
		rc = BAIL;
done:
	kube__js_free(&j);
	return rc;
}

int kube__event_scan(const char *line, size_t len, int max_depth, char type[16], kube_jstr *obj)
{
	kube_js j;
	kube_jstr k, v;
	bool more, have_type = false, have_obj = false;
	int rc;

	kube__js_init(&j, line, len, max_depth);
	if((rc = kube__js_obj_begin(&j)) != 0)
		goto done;
	while(!(rc = kube__js_obj_next(&j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "type")) {
			if(have_type || kube__js_str(&j, &v) || v.len >= 16 || memchr(v.s, '\0', v.len)) {
				rc = BAIL;
				goto done;
			}
			memcpy(type, v.s, v.len);
			type[v.len] = '\0';
			have_type = true;
		} else if(KUBE_JS_IS(&k, "object")) {
			if(have_obj || kube__js_peek(&j) != '{') {
				rc = BAIL;
				goto done;
			}
			obj->s = j.p;
			if((rc = kube__js_skip(&j)) != 0)
				goto done;
			obj->len = (size_t)(j.p - obj->s);
			have_obj = true;
		} else if((rc = kube__js_skip(&j)) != 0) {
			goto done;
		}
	}
	if(!rc)
		rc = kube__js_end(&j);
	if(!rc && (!have_type || !have_obj))
		rc = BAIL;
done:
	kube__js_free(&j);
	return rc;
}

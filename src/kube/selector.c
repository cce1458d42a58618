/* Kubernetes label selectors (see selector.h). The lexer and parser follow
 * k8s.io/apimachinery/pkg/labels/selector.go token for token, so the same
 * strings are accepted and rejected. */
#include "kube/selector.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/str.h"

typedef struct sel_req {
	char *key;
	sel_op op;
	char **values;
	size_t nvalues;
} sel_req;

struct sel {
	bool nothing;
	sel_req *reqs;
	size_t n, cap;
};

/* ---- key and value validation ----------------------------------------- */

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], n > 0 */
static bool is_name(const char *s, size_t n)
{
	size_t i;
	if(n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for(i = 1; i + 1 < n; i++)
		if(!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* DNS-1123 subdomain: dot-separated labels of [a-z0-9-] that start and end
 * with [a-z0-9], at most 253 characters in all. */
static bool is_dns_subdomain(const char *s, size_t n)
{
	size_t i, start = 0;
	if(n == 0 || n > 253)
		return false;
	for(i = 0; i <= n; i++) {
		if(i == n || s[i] == '.') {
			if(i == start || !is_lower_alnum(s[start]) || !is_lower_alnum(s[i - 1]))
				return false;
			start = i + 1;
		} else if(!is_lower_alnum(s[i]) && s[i] != '-') {
			return false;
		}
	}
	return true;
}

int sel_validate_key(const char *key, prd_err *err)
{
	const char *slash = strchr(key, '/');
	const char *name = key;
	size_t n;

	if(slash) {
		size_t plen = (size_t)(slash - key);
		if(strchr(slash + 1, '/'))
			return prd_err_set(err, PRD_EINVAL,
				"invalid label key \"%.80s\": at most one '/' is allowed", key);
		if(plen == 0)
			return prd_err_set(err, PRD_EINVAL,
				"invalid label key \"%.80s\": prefix part must not be empty", key);
		if(!is_dns_subdomain(key, plen))
			return prd_err_set(err, PRD_EINVAL,
				"invalid label key \"%.80s\": prefix part must be a DNS-1123 subdomain "
				"(lowercase alphanumerics, '-' and '.', at most 253 characters)", key);
		name = slash + 1;
	}
	n = strlen(name);
	if(n == 0)
		return prd_err_set(err, PRD_EINVAL,
			"invalid label key \"%.80s\": name part must not be empty", key);
	if(n > 63)
		return prd_err_set(err, PRD_EINVAL,
			"invalid label key \"%.80s\": name part must be no more than 63 characters", key);
	if(!is_name(name, n))
		return prd_err_set(err, PRD_EINVAL,
			"invalid label key \"%.80s\": name part must consist of alphanumerics, '-', '_' "
			"or '.', and must start and end with an alphanumeric", key);
	return 0;
}

int sel_validate_value(const char *value, prd_err *err)
{
	size_t n = strlen(value);
	if(n > 63)
		return prd_err_set(err, PRD_EINVAL,
			"invalid label value \"%.80s\": must be no more than 63 characters", value);
	if(n > 0 && !is_name(value, n))
		return prd_err_set(err, PRD_EINVAL,
			"invalid label value \"%.80s\": must be empty or consist of alphanumerics, "
			"'-', '_' or '.', and must start and end with an alphanumeric", value);
	return 0;
}

/* Go's strconv.ParseInt(s, 10, 64). */
static bool parse_int64(const char *s, int64_t *out)
{
	int64_t v;
	if(str_to_int64(s, &v) != 0)
		return false;
	*out = v;
	return true;
}

/* ---- construction ------------------------------------------------------- */

static void req_clear(sel_req *r)
{
	size_t i;
	free(r->key);
	for(i = 0; i < r->nvalues; i++)
		free(r->values[i]);
	free(r->values);
	memset(r, 0, sizeof(*r));
}

void sel_free(sel *s)
{
	size_t i;
	if(!s)
		return;
	for(i = 0; i < s->n; i++)
		req_clear(&s->reqs[i]);
	free(s->reqs);
	free(s);
}

static sel *sel_new(bool nothing)
{
	sel *s = calloc(1, sizeof(*s));
	if(s)
		s->nothing = nothing;
	return s;
}

sel *sel_everything(void)
{
	return sel_new(false);
}

sel *sel_nothing(void)
{
	return sel_new(true);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Check a requirement the way labels.NewRequirement does and append it to
 * s, taking ownership of r's strings (freed here on failure). */
static int add_req(sel *s, sel_req *r, prd_err *err)
{
	size_t i;
	int rc = sel_validate_key(r->key, err);

	if(!rc) {
		switch(r->op) {
		case SEL_IN:
		case SEL_NOT_IN:
			if(r->nvalues == 0)
				rc = prd_err_set(err, PRD_EINVAL,
					"key \"%.80s\": for 'in', 'notin' operators, values set can't be empty", r->key);
			break;
		case SEL_EQUALS:
		case SEL_DOUBLE_EQUALS:
		case SEL_NOT_EQUALS:
			if(r->nvalues != 1)
				rc = prd_err_set(err, PRD_EINVAL,
					"key \"%.80s\": exact-match compatibility requires one single value", r->key);
			break;
		case SEL_EXISTS:
		case SEL_DOES_NOT_EXIST:
			if(r->nvalues != 0)
				rc = prd_err_set(err, PRD_EINVAL,
					"key \"%.80s\": values set must be empty for exists and does not exist", r->key);
			break;
		case SEL_GT:
		case SEL_LT: {
			int64_t v;
			if(r->nvalues != 1)
				rc = prd_err_set(err, PRD_EINVAL,
					"key \"%.80s\": for 'Gt', 'Lt' operators, exactly one value is required", r->key);
			else if(!parse_int64(r->values[0], &v))
				rc = prd_err_set(err, PRD_EINVAL,
					"key \"%.80s\": for 'Gt', 'Lt' operators, the value must be an integer", r->key);
			break;
		}
		default:
			rc = prd_err_set(err, PRD_EINVAL, "unknown selector operator %d", (int)r->op);
		}
	}
	for(i = 0; !rc && i < r->nvalues; i++)
		rc = sel_validate_value(r->values[i], err);
	if(!rc && s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 4;
		sel_req *nr = realloc(s->reqs, ncap * sizeof(*nr));
		if(!nr)
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		else {
			s->reqs = nr;
			s->cap = ncap;
		}
	}
	if(rc) {
		req_clear(r);
		return rc;
	}
	if(r->nvalues > 1)
		qsort(r->values, r->nvalues, sizeof(r->values[0]), cmp_str);
	s->reqs[s->n++] = *r;
	memset(r, 0, sizeof(*r));
	return 0;
}

/* Sort requirements by key, keeping the order of equal keys (Kubernetes
 * sorts with sort.Sort, which is an insertion sort for the handful of
 * requirements a selector has). */
static void sort_reqs(sel *s)
{
	size_t i, j;
	for(i = 1; i < s->n; i++) {
		sel_req t = s->reqs[i];
		for(j = i; j > 0 && strcmp(s->reqs[j - 1].key, t.key) > 0; j--)
			s->reqs[j] = s->reqs[j - 1];
		s->reqs[j] = t;
	}
}

/* Add a copy of v to r's values unless it is already there: the values are
 * a set, as in Kubernetes. */
static int req_add_value(sel_req *r, const char *v, size_t len)
{
	char **nv, *copy;
	size_t i;

	for(i = 0; i < r->nvalues; i++)
		if(strlen(r->values[i]) == len && memcmp(r->values[i], v, len) == 0)
			return 0;
	copy = str_ndup(v, len);
	if(!copy)
		return PRD_ENOMEM;
	nv = realloc(r->values, (r->nvalues + 1) * sizeof(*nv));
	if(!nv) {
		free(copy);
		return PRD_ENOMEM;
	}
	nv[r->nvalues++] = copy;
	r->values = nv;
	return 0;
}

/* ---- lexer --------------------------------------------------------------- */

typedef enum tok_kind {
	T_END, T_IDENT, T_IN, T_NOTIN, T_BANG, T_NE, T_EQ, T_EQEQ,
	T_LPAREN, T_RPAREN, T_COMMA, T_GT, T_LT
} tok_kind;

typedef struct token {
	tok_kind kind;
	size_t off, len;
} token;

/* Parser contexts of the Kubernetes parser: where a value may appear, the
 * keywords "in" and "notin" are plain identifiers. */
enum { CTX_KEY_AND_OP, CTX_VALUES };

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_special(char c)
{
	return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

static token lex_at(const char *s, size_t pos, int ctx)
{
	token t = {T_END, pos, 0};

	while(is_ws(s[pos]))
		pos++;
	t.off = pos;
	if(!s[pos])
		return t;
	if(is_special(s[pos])) {
		char c = s[pos], d = s[pos + 1];
		t.len = 1;
		switch(c) {
		case '!':
			t.kind = T_BANG;
			if(d == '=') {
				t.kind = T_NE;
				t.len = 2;
			}
			break;
		case '=':
			t.kind = T_EQ;
			if(d == '=') {
				t.kind = T_EQEQ;
				t.len = 2;
			}
			break;
		case '(': t.kind = T_LPAREN; break;
		case ')': t.kind = T_RPAREN; break;
		case ',': t.kind = T_COMMA; break;
		case '>': t.kind = T_GT; break;
		default: t.kind = T_LT; break;
		}
		return t;
	}
	while(s[pos] && !is_ws(s[pos]) && !is_special(s[pos]))
		pos++;
	t.len = pos - t.off;
	t.kind = T_IDENT;
	if(ctx == CTX_KEY_AND_OP) {
		if(t.len == 2 && memcmp(s + t.off, "in", 2) == 0)
			t.kind = T_IN;
		else if(t.len == 5 && memcmp(s + t.off, "notin", 5) == 0)
			t.kind = T_NOTIN;
	}
	return t;
}

typedef struct parser {
	const char *s;
	size_t pos;
	prd_err *err;
} parser;

static token peek(parser *p, int ctx)
{
	return lex_at(p->s, p->pos, ctx);
}

static token next(parser *p, int ctx)
{
	token t = lex_at(p->s, p->pos, ctx);
	p->pos = t.off + t.len;
	return t;
}

/* "offset N: found 'x', expected: what" */
static int unexpected(parser *p, token t, const char *what)
{
	if(t.kind == T_END)
		return prd_err_set(p->err, PRD_EINVAL,
			"offset %zu: found end of string, expected: %s", t.off, what);
	return prd_err_set(p->err, PRD_EINVAL, "offset %zu: found '%.*s', expected: %s",
		t.off, (int)(t.len > 64 ? 64 : t.len), p->s + t.off, what);
}

/* Kubernetes parseIdentifiersList, including its treatment of empty
 * entries: "(,", ",,", ",)" each contribute "". */
static int parse_ident_list(parser *p, sel_req *r)
{
	for(;;) {
		token t = next(p, CTX_VALUES), t2;
		int rc;

		if(t.kind == T_IDENT) {
			if((rc = req_add_value(r, p->s + t.off, t.len)))
				return rc;
			t2 = peek(p, CTX_VALUES);
			if(t2.kind == T_COMMA)
				continue;
			if(t2.kind == T_RPAREN)
				return 0;
			return unexpected(p, t2, "',' or ')'");
		} else if(t.kind == T_COMMA) {
			if(r->nvalues == 0 && (rc = req_add_value(r, "", 0)))
				return rc;
			t2 = peek(p, CTX_VALUES);
			if(t2.kind == T_RPAREN)
				return req_add_value(r, "", 0);
			if(t2.kind == T_COMMA) {
				next(p, CTX_VALUES);
				if((rc = req_add_value(r, "", 0)))
					return rc;
			}
		} else {
			return unexpected(p, t, "',', or identifier");
		}
	}
}

static int parse_set_values(parser *p, sel_req *r)
{
	token t = next(p, CTX_VALUES);
	int rc;

	if(t.kind != T_LPAREN)
		return unexpected(p, t, "'('");
	t = peek(p, CTX_VALUES);
	if(t.kind == T_IDENT || t.kind == T_COMMA) {
		if((rc = parse_ident_list(p, r)))
			return rc;
		t = next(p, CTX_VALUES);
		if(t.kind != T_RPAREN)
			return unexpected(p, t, "')'");
		return 0;
	}
	if(t.kind == T_RPAREN) {
		next(p, CTX_VALUES);
		return req_add_value(r, "", 0);
	}
	return unexpected(p, t, "',', ')' or identifier");
}

static int parse_exact_value(parser *p, sel_req *r)
{
	token t = peek(p, CTX_VALUES);

	if(t.kind == T_END || t.kind == T_COMMA)
		return req_add_value(r, "", 0);
	t = next(p, CTX_VALUES);
	if(t.kind == T_IDENT)
		return req_add_value(r, p->s + t.off, t.len);
	return unexpected(p, t, "identifier");
}

/* One requirement: "!key", "key", or "key <op> <values>". */
static int parse_requirement(parser *p, sel_req *r)
{
	token t = next(p, CTX_VALUES);
	size_t key_off;
	int rc;

	r->op = SEL_EQUALS;
	if(t.kind == T_BANG) {
		r->op = SEL_DOES_NOT_EXIST;
		t = next(p, CTX_VALUES);
	}
	if(t.kind != T_IDENT)
		return unexpected(p, t, "identifier");
	key_off = t.off;
	r->key = str_ndup(p->s + t.off, t.len);
	if(!r->key)
		return prd_err_set(p->err, PRD_ENOMEM, "out of memory");
	if((rc = sel_validate_key(r->key, p->err))) {
		prd_err_prefix(p->err, "offset %zu", key_off);
		return rc;
	}
	t = peek(p, CTX_VALUES);
	if(t.kind == T_END || t.kind == T_COMMA) {
		if(r->op != SEL_DOES_NOT_EXIST)
			r->op = SEL_EXISTS;
	}
	if(r->op == SEL_EXISTS || r->op == SEL_DOES_NOT_EXIST)
		return 0;

	t = next(p, CTX_KEY_AND_OP);
	switch(t.kind) {
	case T_IN: r->op = SEL_IN; break;
	case T_NOTIN: r->op = SEL_NOT_IN; break;
	case T_EQ: r->op = SEL_EQUALS; break;
	case T_EQEQ: r->op = SEL_DOUBLE_EQUALS; break;
	case T_NE: r->op = SEL_NOT_EQUALS; break;
	case T_GT: r->op = SEL_GT; break;
	case T_LT: r->op = SEL_LT; break;
	default:
		return unexpected(p, t, "in, notin, =, ==, !=, >, <");
	}
	rc = (r->op == SEL_IN || r->op == SEL_NOT_IN) ? parse_set_values(p, r)
		: parse_exact_value(p, r);
	if(rc == PRD_ENOMEM)
		return prd_err_set(p->err, PRD_ENOMEM, "out of memory");
	return rc;
}

int sel_parse(const char *str, sel **out, prd_err *err)
{
	parser p = {str ? str : "", 0, err};
	sel *s;
	int rc = 0;

	*out = NULL;
	s = sel_new(false);
	if(!s)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(;;) {
		token t = peek(&p, CTX_VALUES);
		sel_req r = {0};
		size_t at;

		if(t.kind == T_END)
			break;
		if(t.kind != T_IDENT && t.kind != T_BANG) {
			rc = unexpected(&p, t, "!, identifier, or end of string");
			break;
		}
		at = t.off;
		rc = parse_requirement(&p, &r);
		if(rc) {
			req_clear(&r);
			break;
		}
		/* the value and operator checks of labels.NewRequirement */
		if((rc = add_req(s, &r, err))) {
			if(rc != PRD_ENOMEM)
				prd_err_prefix(err, "offset %zu", at);
			break;
		}
		t = next(&p, CTX_VALUES);
		if(t.kind == T_END)
			break;
		if(t.kind != T_COMMA) {
			rc = unexpected(&p, t, "',' or end of string");
			break;
		}
		t = peek(&p, CTX_VALUES);
		if(t.kind != T_IDENT && t.kind != T_BANG) {
			rc = unexpected(&p, t, "identifier after ','");
			break;
		}
	}
	if(rc) {
		sel_free(s);
		return rc;
	}
	sort_reqs(s);
	*out = s;
	return 0;
}

/* ---- LabelSelector JSON ---------------------------------------------------- */

static const char *jstr(const json_object *o)
{
	/* json-c's getter is not const-qualified but does not modify o. */
	return json_object_get_string((json_object *)(uintptr_t)o);
}

static int json_expr(sel *s, const json_object *e, size_t idx, prd_err *err)
{
	static const struct { const char *name; sel_op op; } ops[] = {
		{"In", SEL_IN}, {"NotIn", SEL_NOT_IN},
		{"Exists", SEL_EXISTS}, {"DoesNotExist", SEL_DOES_NOT_EXIST},
	};
	json_object *key, *op, *vals;
	sel_req r = {0};
	size_t i, n;
	bool found = false;
	int rc;

	if(!json_object_is_type(e, json_type_object))
		return prd_err_set(err, PRD_EINVAL, "matchExpressions[%zu]: must be an object", idx);
	if(!json_object_object_get_ex(e, "key", &key) || !json_object_is_type(key, json_type_string))
		return prd_err_set(err, PRD_EINVAL, "matchExpressions[%zu]: key must be a string", idx);
	if(!json_object_object_get_ex(e, "operator", &op) || !json_object_is_type(op, json_type_string))
		return prd_err_set(err, PRD_EINVAL, "matchExpressions[%zu]: operator must be a string", idx);
	for(i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		if(strcmp(jstr(op), ops[i].name) == 0) {
			r.op = ops[i].op;
			found = true;
		}
	}
	if(!found)
		return prd_err_set(err, PRD_EINVAL,
			"matchExpressions[%zu]: \"%.40s\" is not a valid label selector operator", idx, jstr(op));
	if(json_object_object_get_ex(e, "values", &vals) && vals) {
		if(!json_object_is_type(vals, json_type_array))
			return prd_err_set(err, PRD_EINVAL, "matchExpressions[%zu]: values must be an array", idx);
		n = json_object_array_length(vals);
		for(i = 0; i < n; i++) {
			json_object *v = json_object_array_get_idx(vals, i);
			if(!json_object_is_type(v, json_type_string)) {
				req_clear(&r);
				return prd_err_set(err, PRD_EINVAL,
					"matchExpressions[%zu]: values[%zu] must be a string", idx, i);
			}
			if(req_add_value(&r, jstr(v), strlen(jstr(v)))) {
				req_clear(&r);
				return prd_err_set(err, PRD_ENOMEM, "out of memory");
			}
		}
	}
	r.key = str_dup(jstr(key));
	if(!r.key) {
		req_clear(&r);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if((rc = add_req(s, &r, err)) && rc != PRD_ENOMEM)
		prd_err_prefix(err, "matchExpressions[%zu]", idx);
	return rc;
}

int sel_from_json(const json_object *ls, sel **out, prd_err *err)
{
	json_object *ml, *me;
	sel *s;
	int rc = 0;

	*out = NULL;
	if(!ls) {
		*out = sel_nothing();
		return *out ? 0 : prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(!json_object_is_type(ls, json_type_object))
		return prd_err_set(err, PRD_EINVAL, "label selector must be an object");
	s = sel_new(false);
	if(!s)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(json_object_object_get_ex(ls, "matchLabels", &ml) && ml) {
		if(!json_object_is_type(ml, json_type_object)) {
			rc = prd_err_set(err, PRD_EINVAL, "matchLabels must be an object");
		} else {
			json_object_object_foreach(ml, k, v) {
				sel_req r = {0};
				if(!json_object_is_type(v, json_type_string)) {
					rc = prd_err_set(err, PRD_EINVAL,
						"matchLabels[\"%.80s\"] must be a string", k);
					break;
				}
				r.op = SEL_EQUALS;
				r.key = str_dup(k);
				if(!r.key || req_add_value(&r, jstr(v), strlen(jstr(v)))) {
					req_clear(&r);
					rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
					break;
				}
				if((rc = add_req(s, &r, err))) {
					if(rc != PRD_ENOMEM)
						prd_err_prefix(err, "matchLabels");
					break;
				}
			}
		}
	}
	if(!rc && json_object_object_get_ex(ls, "matchExpressions", &me) && me) {
		if(!json_object_is_type(me, json_type_array)) {
			rc = prd_err_set(err, PRD_EINVAL, "matchExpressions must be an array");
		} else {
			size_t i, n = json_object_array_length(me);
			for(i = 0; !rc && i < n; i++)
				rc = json_expr(s, json_object_array_get_idx(me, i), i, err);
		}
	}
	if(rc) {
		sel_free(s);
		return rc;
	}
	sort_reqs(s);
	*out = s;
	return 0;
}

/* ---- matching ---------------------------------------------------------- */

/* Labels in one of the two supported shapes. */
typedef struct label_src {
	const json_object *obj;
	const sel_label *pairs;
	size_t n;
} label_src;

static const char *label_get(const label_src *ls, const char *key)
{
	size_t i;
	if(ls->pairs) {
		for(i = 0; i < ls->n; i++)
			if(ls->pairs[i].key && strcmp(ls->pairs[i].key, key) == 0)
				return ls->pairs[i].value ? ls->pairs[i].value : "";
		return NULL;
	}
	if(ls->obj && json_object_is_type(ls->obj, json_type_object)) {
		json_object *v;
		if(json_object_object_get_ex(ls->obj, key, &v) && json_object_is_type(v, json_type_string))
			return jstr(v);
	}
	return NULL;
}

static bool has_value(const sel_req *r, const char *v)
{
	size_t i;
	for(i = 0; i < r->nvalues; i++)
		if(strcmp(r->values[i], v) == 0)
			return true;
	return false;
}

/* labels.Requirement.Matches */
static bool req_matches(const sel_req *r, const label_src *ls)
{
	const char *v = label_get(ls, r->key);
	int64_t lv, rv;

	switch(r->op) {
	case SEL_IN:
	case SEL_EQUALS:
	case SEL_DOUBLE_EQUALS:
		return v && has_value(r, v);
	case SEL_NOT_IN:
	case SEL_NOT_EQUALS:
		return !v || !has_value(r, v);
	case SEL_EXISTS:
		return v != NULL;
	case SEL_DOES_NOT_EXIST:
		return v == NULL;
	case SEL_GT:
	case SEL_LT:
		if(!v || r->nvalues != 1 || !parse_int64(v, &lv) || !parse_int64(r->values[0], &rv))
			return false;
		return r->op == SEL_GT ? lv > rv : lv < rv;
	}
	return false;
}

static bool matches(const sel *s, const label_src *ls)
{
	size_t i;
	if(s->nothing)
		return false;
	for(i = 0; i < s->n; i++)
		if(!req_matches(&s->reqs[i], ls))
			return false;
	return true;
}

bool sel_matches_json(const sel *s, const json_object *labels)
{
	label_src ls = {labels, NULL, 0};
	return matches(s, &ls);
}

bool sel_matches_pairs(const sel *s, const sel_label *labels, size_t n)
{
	static const sel_label none[1] = {{NULL, NULL}};
	label_src ls = {NULL, labels ? labels : none, labels ? n : 0};
	return matches(s, &ls);
}

/* ---- printing and access ------------------------------------------------ */

char *sel_to_string(const sel *s)
{
	static const char *const opstr[] = {
		[SEL_EQUALS] = "=", [SEL_DOUBLE_EQUALS] = "==", [SEL_NOT_EQUALS] = "!=",
		[SEL_GT] = ">", [SEL_LT] = "<",
	};
	buf b;
	size_t i, j;

	buf_init(&b);
	for(i = 0; !s->nothing && i < s->n; i++) {
		const sel_req *r = &s->reqs[i];
		if(i)
			buf_append_char(&b, ',');
		switch(r->op) {
		case SEL_EXISTS:
			buf_append_str(&b, r->key);
			break;
		case SEL_DOES_NOT_EXIST:
			buf_append_char(&b, '!');
			buf_append_str(&b, r->key);
			break;
		case SEL_IN:
		case SEL_NOT_IN:
			buf_append_str(&b, r->key);
			buf_append_str(&b, r->op == SEL_IN ? " in (" : " notin (");
			for(j = 0; j < r->nvalues; j++) {
				if(j)
					buf_append_char(&b, ',');
				buf_append_str(&b, r->values[j]);
			}
			buf_append_char(&b, ')');
			break;
		default:
			buf_append_str(&b, r->key);
			buf_append_str(&b, opstr[r->op]);
			buf_append_str(&b, r->nvalues ? r->values[0] : "");
		}
	}
	if(b.failed) {
		buf_free(&b);
		return NULL;
	}
	return buf_detach(&b);
}

bool sel_is_everything(const sel *s)
{
	return !s->nothing && s->n == 0;
}

bool sel_is_nothing(const sel *s)
{
	return s->nothing;
}

bool sel_equal(const sel *a, const sel *b)
{
	size_t i, j;
	if(a->nothing != b->nothing || a->n != b->n)
		return false;
	for(i = 0; i < a->n; i++) {
		const sel_req *x = &a->reqs[i], *y = &b->reqs[i];
		if(x->op != y->op || strcmp(x->key, y->key) != 0 || x->nvalues != y->nvalues)
			return false;
		for(j = 0; j < x->nvalues; j++)
			if(strcmp(x->values[j], y->values[j]) != 0)
				return false;
	}
	return true;
}

size_t sel_count(const sel *s)
{
	return s->nothing ? 0 : s->n;
}

const char *sel_req_key(const sel *s, size_t i)
{
	return s->reqs[i].key;
}

sel_op sel_req_op(const sel *s, size_t i)
{
	return s->reqs[i].op;
}

size_t sel_req_nvalues(const sel *s, size_t i)
{
	return s->reqs[i].nvalues;
}

const char *sel_req_value(const sel *s, size_t i, size_t j)
{
	return s->reqs[i].values[j];
}

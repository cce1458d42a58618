/* The CEL subset of cel.h: a tokenizer, a recursive-descent parser into a
 * small tree, and a tree-walking evaluator.
 *
 * Why our own: the only CEL implementations are Go, C++ (with protobuf and
 * abseil) and Rust; device selectors use a handful of constructs, and
 * refusing everything else explicitly is the point. Paths into the device
 * (device.attributes["d"].x) are resolved while parsing, so evaluation
 * never sees a bare map. */
#include "sched/cel.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CEL_DEPTH_MAX 64

typedef enum kind {
	K_BOOL, K_INT, K_STR, K_QTY,       /* literals */
	K_DRIVER, K_ATTR, K_CAP,           /* device paths */
	K_NOT, K_AND, K_OR,
	K_EQ, K_NE, K_LT, K_LE, K_GT, K_GE,
	K_CMPTO, K_QGT, K_QLT              /* quantity methods */
} kind;

typedef struct cnode {
	kind k;
	struct cnode *a, *b;
	int64_t i;                 /* K_BOOL, K_INT */
	char *s;                   /* K_STR; K_ATTR/K_CAP: qualified name */
	qty q;                     /* K_QTY */
} cnode;

struct sched_cel {
	char *text;
	cnode *root;
};

/* Value types during evaluation. */
typedef enum vtype { V_ERR, V_BOOL, V_INT, V_STR, V_QTY, V_VER } vtype;

typedef struct val {
	vtype t;
	int64_t i;
	const char *s;
	qty q;
} val;

typedef struct parser {
	const char *src, *p;
	prd_err *e;
	int rc;
	int depth;
} parser;

/* ---- lexing helpers ----------------------------------------------------- */

static void skip_ws(parser *ps)
{
	while(*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
		ps->p++;
}

static bool is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident(char c)
{
	return is_ident_start(c) || (c >= '0' && c <= '9');
}

static int fail(parser *ps, int code, const char *what, const char *detail)
{
	if(!ps->rc)
		ps->rc = prd_err_set(ps->e, code, "%s %s at offset %zu", what, detail,
		                     (size_t)(ps->p - ps->src));
	return ps->rc;
}

static int unsupported(parser *ps, const char *construct)
{
	return fail(ps, PRD_EUNSUPPORTED, "unsupported CEL construct:", construct);
}

static int malformed(parser *ps, const char *detail)
{
	return fail(ps, PRD_EINVAL, "malformed CEL:", detail);
}

/* Accept the punctuation `tok` (after white space). */
static bool accept(parser *ps, const char *tok)
{
	size_t n = strlen(tok);
	skip_ws(ps);
	if(strncmp(ps->p, tok, n) != 0)
		return false;
	ps->p += n;
	return true;
}

/* An identifier into buf (truncated names are refused by the caller's
 * comparison, never overflow). */
static bool ident(parser *ps, char *buf, size_t len)
{
	size_t n = 0;
	skip_ws(ps);
	if(!is_ident_start(*ps->p))
		return false;
	while(is_ident(*ps->p)) {
		if(n + 1 < len)
			buf[n++] = *ps->p;
		ps->p++;
	}
	buf[n] = '\0';
	return true;
}

/* A quoted string literal ('..' or ".."); escapes \\ \' \" \n \t \r.
 * Returns a malloc'd string or NULL with ps->rc set. */
static char *string_lit(parser *ps)
{
	char q = *ps->p, *out;
	size_t n = 0;
	const char *p;

	if(ps->p[1] == q && ps->p[2] == q) {
		unsupported(ps, "triple-quoted string");
		return NULL;
	}
	out = malloc(strlen(ps->p) + 1);
	if(!out) {
		ps->rc = prd_err_set(ps->e, PRD_ENOMEM, "out of memory");
		return NULL;
	}
	for(p = ps->p + 1; *p && *p != q; p++) {
		char c = *p;
		if(c == '\n' || c == '\r')
			break;
		if(c == '\\') {
			switch(*++p) {
			case '\\': c = '\\'; break;
			case '\'': c = '\''; break;
			case '"': c = '"'; break;
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			default:
				ps->p = p;
				free(out);
				unsupported(ps, "string escape");
				return NULL;
			}
		}
		out[n++] = c;
	}
	if(*p != q) {
		ps->p = p;
		free(out);
		malformed(ps, "unterminated string");
		return NULL;
	}
	out[n] = '\0';
	ps->p = p + 1;
	return out;
}

/* ---- tree --------------------------------------------------------------- */

static void node_free(cnode *n)
{
	if(!n)
		return;
	node_free(n->a);
	node_free(n->b);
	free(n->s);
	free(n);
}

static cnode *node_new(parser *ps, kind k, cnode *a, cnode *b)
{
	cnode *n = calloc(1, sizeof(*n));
	if(!n) {
		ps->rc = prd_err_set(ps->e, PRD_ENOMEM, "out of memory");
		node_free(a);
		node_free(b);
		return NULL;
	}
	n->k = k;
	n->a = a;
	n->b = b;
	return n;
}

static cnode *parse_or(parser *ps);

/* `[ "key" ]` or `.key` after a map: the key, malloc'd. */
static char *map_key(parser *ps, const char *map)
{
	char buf[128], *k;
	if(accept(ps, "[")) {
		skip_ws(ps);
		if(!*ps->p) {
			malformed(ps, "unexpected end of expression");
			return NULL;
		}
		if(*ps->p != '"' && *ps->p != '\'') {
			unsupported(ps, "non-literal map key");
			return NULL;
		}
		if(!(k = string_lit(ps)))
			return NULL;
		if(!accept(ps, "]")) {
			free(k);
			malformed(ps, "expected ]");
			return NULL;
		}
		return k;
	}
	if(accept(ps, ".")) {
		if(!ident(ps, buf, sizeof(buf))) {
			malformed(ps, "expected a field name after .");
			return NULL;
		}
		if(!(k = str_dup(buf)))
			ps->rc = prd_err_set(ps->e, PRD_ENOMEM, "out of memory");
		return k;
	}
	fail(ps, PRD_EUNSUPPORTED, "unsupported CEL construct: bare map", map);
	return NULL;
}

/* device.driver, device.attributes[d].x, device.capacity[d].x */
static cnode *device_path(parser *ps)
{
	char field[64], *dom = NULL, *id = NULL;
	cnode *n;
	kind k;
	size_t len;

	if(!accept(ps, ".") || !ident(ps, field, sizeof(field))) {
		if(!*ps->p)
			return malformed(ps, "unexpected end of expression"), NULL;
		unsupported(ps, "use of `device` other than device.driver, device.attributes, device.capacity");
		return NULL;
	}
	if(!strcmp(field, "driver"))
		return node_new(ps, K_DRIVER, NULL, NULL);
	if(!strcmp(field, "attributes"))
		k = K_ATTR;
	else if(!strcmp(field, "capacity"))
		k = K_CAP;
	else {
		unsupported(ps, "device field (only driver, attributes, capacity)");
		return NULL;
	}
	if(!(dom = map_key(ps, k == K_ATTR ? "device.attributes" : "device.capacity")))
		return NULL;
	if(!(id = map_key(ps, k == K_ATTR ? "device.attributes[domain]" : "device.capacity[domain]"))) {
		free(dom);
		return NULL;
	}
	if(!(n = node_new(ps, k, NULL, NULL)))
		goto done;
	len = strlen(dom) + strlen(id) + 2;
	if(!(n->s = malloc(len))) {
		ps->rc = prd_err_set(ps->e, PRD_ENOMEM, "out of memory");
		node_free(n);
		n = NULL;
		goto done;
	}
	snprintf(n->s, len, "%s/%s", dom, id);
done:
	free(dom);
	free(id);
	return n;
}

/* quantity("...") */
static cnode *quantity_call(parser *ps)
{
	cnode *n = NULL;
	char *s;
	prd_err qe;
	qty q;

	if(!accept(ps, "("))
		return unsupported(ps, "identifier `quantity` without a call"), NULL;
	skip_ws(ps);
	if(*ps->p != '"' && *ps->p != '\'')
		return unsupported(ps, "quantity() of a non-literal"), NULL;
	if(!(s = string_lit(ps)))
		return NULL;
	if(qty_parse(s, &q, &qe)) {
		malformed(ps, "quantity() of an invalid quantity");
		free(s);
		return NULL;
	}
	free(s);
	if(!accept(ps, ")"))
		return malformed(ps, "expected ) after quantity(\"...\""), NULL;
	if((n = node_new(ps, K_QTY, NULL, NULL)))
		n->q = q;
	return n;
}

static cnode *number(parser *ps, bool neg)
{
	const char *p = ps->p;
	uint64_t v = 0;
	int base = 10;
	cnode *n;
	bool any = false;

	if(p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	for(;; p++) {
		int d;
		if(*p >= '0' && *p <= '9')
			d = *p - '0';
		else if(base == 16 && *p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if(base == 16 && *p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			break;
		any = true;
		if(v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return ps->p = p, malformed(ps, "integer out of range"), NULL;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	ps->p = p;
	if(!any)
		return malformed(ps, "expected digits"), NULL;
	if(*p == '.' || *p == 'e' || *p == 'E')
		return unsupported(ps, "double literal"), NULL;
	if(*p == 'u' || *p == 'U')
		return unsupported(ps, "unsigned integer literal"), NULL;
	if(is_ident(*p))
		return malformed(ps, "junk after a number"), NULL;
	if(v > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
		return malformed(ps, "integer out of range"), NULL;
	if(!(n = node_new(ps, K_INT, NULL, NULL)))
		return NULL;
	n->i = neg ? (int64_t)(0 - v) : (int64_t)v;
	return n;
}

static cnode *primary(parser *ps)
{
	char id[64];
	cnode *n;

	skip_ws(ps);
	if(accept(ps, "(")) {
		n = parse_or(ps);
		if(n && !accept(ps, ")")) {
			node_free(n);
			return malformed(ps, "expected )"), NULL;
		}
		return n;
	}
	if(*ps->p == '"' || *ps->p == '\'') {
		char *s = string_lit(ps);
		if(!s)
			return NULL;
		if(!(n = node_new(ps, K_STR, NULL, NULL))) {
			free(s);
			return NULL;
		}
		n->s = s;
		return n;
	}
	if(*ps->p >= '0' && *ps->p <= '9')
		return number(ps, false);
	if(*ps->p == '-') {
		ps->p++;
		skip_ws(ps);
		if(*ps->p >= '0' && *ps->p <= '9')
			return number(ps, true);
		return unsupported(ps, "unary minus on a non-literal"), NULL;
	}
	if(*ps->p == '[')
		return unsupported(ps, "list literal"), NULL;
	if(*ps->p == '{')
		return unsupported(ps, "map literal"), NULL;
	if(!ident(ps, id, sizeof(id))) {
		if(!*ps->p)
			return malformed(ps, "unexpected end of expression"), NULL;
		return malformed(ps, "unexpected character"), NULL;
	}
	if(!strcmp(id, "true") || !strcmp(id, "false")) {
		if((n = node_new(ps, K_BOOL, NULL, NULL)))
			n->i = id[0] == 't';
		return n;
	}
	if(!strcmp(id, "device"))
		return device_path(ps);
	if(!strcmp(id, "quantity"))
		return quantity_call(ps);
	if((id[0] == 'r' || id[0] == 'R' || id[0] == 'b' || id[0] == 'B') && !id[1] &&
	   (*ps->p == '"' || *ps->p == '\''))
		return unsupported(ps, "raw or bytes string literal"), NULL;
	skip_ws(ps);
	if(*ps->p == '(') {
		char what[96];
		snprintf(what, sizeof(what), "function %s()", id);
		return unsupported(ps, what), NULL;
	}
	{
		char what[96];
		snprintf(what, sizeof(what), "identifier `%s`", id);
		return unsupported(ps, what), NULL;
	}
}

/* Quantity methods after a primary; every other method or index is
 * refused. */
static cnode *postfix(parser *ps)
{
	cnode *n = primary(ps), *arg;
	char m[64], what[96];
	kind k;

	while(n) {
		skip_ws(ps);
		if(*ps->p == '[') {
			node_free(n);
			return unsupported(ps, "index into a non-map value"), NULL;
		}
		if(*ps->p != '.')
			return n;
		ps->p++;
		if(!ident(ps, m, sizeof(m))) {
			node_free(n);
			return malformed(ps, "expected a method name after ."), NULL;
		}
		if(!strcmp(m, "compareTo"))
			k = K_CMPTO;
		else if(!strcmp(m, "isGreaterThan"))
			k = K_QGT;
		else if(!strcmp(m, "isLessThan"))
			k = K_QLT;
		else {
			node_free(n);
			snprintf(what, sizeof(what), "method or field .%s", m);
			return unsupported(ps, what), NULL;
		}
		if(!accept(ps, "(")) {
			node_free(n);
			return malformed(ps, "expected ( after a method name"), NULL;
		}
		if(!(arg = parse_or(ps))) {
			node_free(n);
			return NULL;
		}
		if(!accept(ps, ")")) {
			node_free(n);
			node_free(arg);
			return malformed(ps, "expected ) after a method argument"), NULL;
		}
		n = node_new(ps, k, n, arg);
	}
	return n;
}

static cnode *unary(parser *ps)
{
	cnode *n;
	if(++ps->depth > CEL_DEPTH_MAX) {
		ps->depth--;
		return malformed(ps, "expression nested too deeply"), NULL;
	}
	skip_ws(ps);
	if(*ps->p == '!' && ps->p[1] != '=') {
		ps->p++;
		n = unary(ps);
		n = n ? node_new(ps, K_NOT, n, NULL) : NULL;
	} else {
		n = postfix(ps);
	}
	ps->depth--;
	return n;
}

/* Capacity paths and quantity literals (and methods that return a
 * quantity: none in the subset) are quantities. */
static bool is_qty(const cnode *n)
{
	return n->k == K_QTY || n->k == K_CAP;
}

static cnode *relation(parser *ps)
{
	static const struct { const char *tok; kind k; } ops[] = {
		{ "==", K_EQ }, { "!=", K_NE }, { "<=", K_LE }, { ">=", K_GE },
		{ "<", K_LT }, { ">", K_GT },
	};
	cnode *a = unary(ps), *b;
	size_t i;

	if(!a)
		return NULL;
	skip_ws(ps);
	for(i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if(accept(ps, ops[i].tok))
			break;
	if(i == sizeof(ops) / sizeof(ops[0]))
		return a;
	if(!(b = unary(ps))) {
		node_free(a);
		return NULL;
	}
	if(ops[i].k >= K_LT && (is_qty(a) || is_qty(b))) {
		node_free(a);
		node_free(b);
		return unsupported(ps, "ordering operator on a quantity (Kubernetes CEL has none: use compareTo)"), NULL;
	}
	skip_ws(ps);
	if((ps->p[0] == '=' && ps->p[1] == '=') || ps->p[0] == '<' || ps->p[0] == '>' ||
	   (ps->p[0] == '!' && ps->p[1] == '=')) {
		node_free(a);
		node_free(b);
		return unsupported(ps, "chained comparison"), NULL;
	}
	return node_new(ps, ops[i].k, a, b);
}

static cnode *parse_and(parser *ps)
{
	cnode *n = relation(ps);
	while(n && accept(ps, "&&")) {
		cnode *b = relation(ps);
		if(!b) {
			node_free(n);
			return NULL;
		}
		n = node_new(ps, K_AND, n, b);
	}
	return n;
}

static cnode *parse_or(parser *ps)
{
	cnode *n;
	if(++ps->depth > CEL_DEPTH_MAX) {
		ps->depth--;
		return malformed(ps, "expression nested too deeply"), NULL;
	}
	n = parse_and(ps);
	while(n && accept(ps, "||")) {
		cnode *b = parse_and(ps);
		if(!b) {
			node_free(n);
			n = NULL;
			break;
		}
		n = node_new(ps, K_OR, n, b);
	}
	ps->depth--;
	return n;
}

/* What a leftover character most likely means, for the message. */
static const char *trailing_construct(const char *p)
{
	if(*p == '?')
		return "conditional operator ?:";
	if(*p == '+' || *p == '-' || *p == '*' || *p == '/' || *p == '%')
		return "arithmetic";
	if(!strncmp(p, "in", 2) && !is_ident(p[2]))
		return "operator `in`";
	return NULL;
}

int sched_cel_compile(const char *expr, sched_cel **out, prd_err *e)
{
	parser ps;
	sched_cel *c;
	cnode *root;
	const char *what;

	if(!out)
		return prd_err_set(e, PRD_EINVAL, "cel: NULL argument");
	*out = NULL;
	if(!expr)
		return prd_err_set(e, PRD_EINVAL, "cel: NULL expression");
	if(strlen(expr) > SCHED_CEL_MAX_LEN)
		return prd_err_set(e, PRD_EINVAL, "CEL expression longer than %d bytes", SCHED_CEL_MAX_LEN);
	memset(&ps, 0, sizeof(ps));
	ps.src = ps.p = expr;
	ps.e = e;
	root = parse_or(&ps);
	if(root) {
		skip_ws(&ps);
		if(*ps.p) {
			node_free(root);
			root = NULL;
			if((what = trailing_construct(ps.p)))
				unsupported(&ps, what);
			else
				malformed(&ps, "unexpected text after the expression");
		}
	}
	if(!root)
		return ps.rc ? ps.rc : prd_err_set(e, PRD_EINTERNAL, "cel: parse failed");
	c = calloc(1, sizeof(*c));
	if(!c || !(c->text = str_dup(expr))) {
		free(c);
		node_free(root);
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	}
	c->root = root;
	*out = c;
	return 0;
}

void sched_cel_free(sched_cel *c)
{
	if(!c)
		return;
	node_free(c->root);
	free(c->text);
	free(c);
}

const char *sched_cel_text(const sched_cel *c)
{
	return c ? c->text : NULL;
}

/* ---- evaluation --------------------------------------------------------- */

static val verr(prd_err *e, const char *msg)
{
	val v;
	memset(&v, 0, sizeof(v));
	v.t = V_ERR;
	prd_err_set(e, PRD_EINVAL, "%s", msg);
	return v;
}

static val missing(prd_err *e, const char *what, const char *name)
{
	val v;
	memset(&v, 0, sizeof(v));
	v.t = V_ERR;
	prd_err_set(e, PRD_EINVAL, "no such %s: %s", what, name);
	return v;
}

static val attr_val(const sched_device *d, const char *name, prd_err *e)
{
	val v;
	size_t i;
	memset(&v, 0, sizeof(v));
	for(i = 0; i < d->n_attrs; i++) {
		const sched_dev_attr *a = &d->attrs[i];
		if(strcmp(a->name, name) != 0)
			continue;
		switch(a->type) {
		case SCHED_ATTR_INT: v.t = V_INT; v.i = a->i; break;
		case SCHED_ATTR_BOOL: v.t = V_BOOL; v.i = a->b; break;
		case SCHED_ATTR_STRING: v.t = V_STR; v.s = a->s ? a->s : ""; break;
		case SCHED_ATTR_VERSION: v.t = V_VER; v.s = a->s ? a->s : ""; break;
		}
		return v;
	}
	return missing(e, "attribute", name);
}

static val cap_val(const sched_device *d, const char *name, prd_err *e)
{
	val v;
	size_t i;
	memset(&v, 0, sizeof(v));
	for(i = 0; i < d->n_caps; i++)
		if(!strcmp(d->caps[i].name, name)) {
			v.t = V_QTY;
			v.q = d->caps[i].value;
			return v;
		}
	return missing(e, "capacity", name);
}

static val eval(const cnode *n, const sched_device *d, prd_err *e);

static val mk(vtype t, int64_t i)
{
	val v;
	memset(&v, 0, sizeof(v));
	v.t = t;
	v.i = i;
	return v;
}

/* && and || with CEL's error absorption. */
static val logic(const cnode *n, const sched_device *d, prd_err *e)
{
	bool is_and = n->k == K_AND;
	val a = eval(n->a, d, e), b;
	prd_err eb;

	if(a.t == V_BOOL && a.i == !is_and)
		return a;
	b = eval(n->b, d, &eb);
	if(b.t == V_BOOL && b.i == !is_and)
		return b;
	if(a.t == V_ERR)
		return a;
	if(b.t == V_ERR) {
		if(e)
			*e = eb;
		return b;
	}
	if(a.t != V_BOOL || b.t != V_BOOL)
		return verr(e, is_and ? "&& needs bool operands" : "|| needs bool operands");
	return mk(V_BOOL, is_and);
}

static val compare(const cnode *n, val a, val b, prd_err *e)
{
	int c;
	if(a.t != b.t)
		return verr(e, "no such overload: comparing values of different types");
	switch(a.t) {
	case V_BOOL:
	case V_INT: c = a.i < b.i ? -1 : a.i > b.i; break;
	case V_STR: c = strcmp(a.s, b.s); c = c < 0 ? -1 : c > 0; break;
	case V_QTY: c = qty_cmp(&a.q, &b.q); break;
	default: return verr(e, "cannot compare version attributes (semver is not supported)");
	}
	switch(n->k) {
	case K_EQ: return mk(V_BOOL, c == 0);
	case K_NE: return mk(V_BOOL, c != 0);
	case K_LT: return mk(V_BOOL, c < 0);
	case K_LE: return mk(V_BOOL, c <= 0);
	case K_GT: return mk(V_BOOL, c > 0);
	case K_GE: return mk(V_BOOL, c >= 0);
	default: break;
	}
	if(a.t != V_QTY)
		return verr(e, "quantity method on a non-quantity");
	if(n->k == K_CMPTO)
		return mk(V_INT, c);
	return mk(V_BOOL, n->k == K_QGT ? c > 0 : c < 0);
}

static val eval(const cnode *n, const sched_device *d, prd_err *e)
{
	val a, b, v;
	memset(&v, 0, sizeof(v));
	switch(n->k) {
	case K_BOOL: return mk(V_BOOL, n->i);
	case K_INT: return mk(V_INT, n->i);
	case K_STR: v.t = V_STR; v.s = n->s; return v;
	case K_QTY: v.t = V_QTY; v.q = n->q; return v;
	case K_DRIVER: v.t = V_STR; v.s = d->driver ? d->driver : ""; return v;
	case K_ATTR: return attr_val(d, n->s, e);
	case K_CAP: return cap_val(d, n->s, e);
	case K_NOT:
		a = eval(n->a, d, e);
		if(a.t == V_ERR)
			return a;
		if(a.t != V_BOOL)
			return verr(e, "! needs a bool operand");
		return mk(V_BOOL, !a.i);
	case K_AND:
	case K_OR:
		return logic(n, d, e);
	default:
		break;
	}
	a = eval(n->a, d, e);
	if(a.t == V_ERR)
		return a;
	b = eval(n->b, d, e);
	if(b.t == V_ERR)
		return b;
	if((n->k == K_CMPTO || n->k == K_QGT || n->k == K_QLT) && (a.t != V_QTY || b.t != V_QTY))
		return verr(e, "compareTo/isGreaterThan/isLessThan need quantities");
	return compare(n, a, b, e);
}

int sched_cel_eval(const sched_cel *c, const sched_device *d, prd_err *e)
{
	val v;
	if(!c || !d)
		return prd_err_set(e, PRD_EINVAL, "cel: NULL argument");
	v = eval(c->root, d, e);
	if(v.t == V_ERR)
		return e ? e->code : PRD_EINVAL;
	if(v.t != V_BOOL)
		return prd_err_set(e, PRD_EINVAL, "the expression does not evaluate to a bool");
	return v.i ? 1 : 0;
}

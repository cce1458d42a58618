/* YAML to JSON: every object, config file and fixture is read into a json-c
 * tree here, with YAML 1.2 core-schema scalars. */
#include "util/yamljson.h"
#include "util/str.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#define YJ_MAX_DEPTH 256
#define YJ_MAX_ALIASES 10000
#define YJ_MAX_ANCHORS 4096
/* Nodes that aliases may copy in one stream: bounds "billion laughs". */
#define YJ_MAX_ALIAS_NODES 1000000

/* One open container while events stream in. For a mapping, `key` holds
 * the pending key between the key event and the value event. */
typedef struct yj_frame {
	json_object *obj;
	bool is_map;
	char *key;
	char *anchor;
	json_object *merges; /* values of "<<" keys, applied when the map ends */
} yj_frame;

typedef struct yj_anchor {
	char *name;
	json_object *obj;
	size_t nodes;   /* size of the subtree, charged on every alias */
} yj_anchor;

typedef struct yj_ctx {
	yj_frame stack[YJ_MAX_DEPTH];
	int depth;
	json_object *root;
	bool have_root;
	yj_anchor anchors[YJ_MAX_ANCHORS];
	int nanchors;
	int aliases;
	size_t alias_nodes;
	prd_err *err;
} yj_ctx;

static int yj_fail(yj_ctx *c, const yaml_mark_t *m, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int yj_fail(yj_ctx *c, const yaml_mark_t *m, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return prd_err_set(c->err, PRD_EINVAL, "line %zu, column %zu: %s",
			   m->line + 1, m->column + 1, what);
}

static void yj_anchors_clear(yj_ctx *c)
{
	int i;
	for(i = 0; i < c->nanchors; i++) {
		free(c->anchors[i].name);
		json_object_put(c->anchors[i].obj);
	}
	c->nanchors = 0;
}

static size_t yj_count_nodes(json_object *o)
{
	size_t n = 1, i;
	if(json_object_is_type(o, json_type_array)) {
		for(i = 0; i < json_object_array_length(o); i++)
			n += yj_count_nodes(json_object_array_get_idx(o, i));
	} else if(json_object_is_type(o, json_type_object)) {
		json_object_object_foreach(o, k, v) {
			(void)k;
			n += yj_count_nodes(v);
		}
	}
	return n;
}

static int yj_anchor_add(yj_ctx *c, const char *name, json_object *obj, const yaml_mark_t *m)
{
	int i;
	for(i = 0; i < c->nanchors; i++) {
		if(strcmp(c->anchors[i].name, name) == 0) {
			/* YAML allows redefining an anchor; later aliases see the new one. */
			json_object_put(c->anchors[i].obj);
			c->anchors[i].obj = json_object_get(obj);
			c->anchors[i].nodes = yj_count_nodes(obj);
			return 0;
		}
	}
	if(c->nanchors == YJ_MAX_ANCHORS)
		return yj_fail(c, m, "too many anchors");
	c->anchors[c->nanchors].name = str_dup(name);
	if(!c->anchors[c->nanchors].name)
		return prd_err_set(c->err, PRD_ENOMEM, "out of memory");
	c->anchors[c->nanchors].obj = json_object_get(obj);
	c->anchors[c->nanchors].nodes = yj_count_nodes(obj);
	c->nanchors++;
	return 0;
}

static bool match_int(const char *s, int64_t *v)
{
	if(str_to_int64(s, v) == 0)
		return true;
	if((s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) && s[2]) {
		char *end;
		unsigned long long u;
		errno = 0;
		u = strtoull(s + 2, &end, s[1] == 'x' ? 16 : 8);
		if(!*end && !errno && u <= (unsigned long long)INT64_MAX) {
			*v = (int64_t)u;
			return true;
		}
	}
	return false;
}

/* YAML 1.2 core-schema float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool match_float(const char *s)
{
	const char *p = s;
	bool digits = false;
	if(*p == '+' || *p == '-')
		p++;
	while(*p >= '0' && *p <= '9') {
		p++;
		digits = true;
	}
	if(*p == '.') {
		p++;
		while(*p >= '0' && *p <= '9') {
			p++;
			digits = true;
		}
	}
	if(!digits)
		return false;
	if(*p == 'e' || *p == 'E') {
		p++;
		if(*p == '+' || *p == '-')
			p++;
		if(!(*p >= '0' && *p <= '9'))
			return false;
		while(*p >= '0' && *p <= '9')
			p++;
	}
	return *p == '\0';
}

/* Turn a scalar event into a JSON value. Quoted, block and !!str-tagged
 * scalars are strings; plain scalars are resolved by the core schema. */
static json_object *yj_scalar(const yaml_event_t *ev)
{
	const char *v = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *tag = (const char *)ev->data.scalar.tag;
	int64_t iv;

	if(tag && strcmp(tag, YAML_STR_TAG) == 0)
		return json_object_new_string_len(v, (int)len);
	if(ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return json_object_new_string_len(v, (int)len);
	if(len == 0 || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL"))
		return NULL;
	if(!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
		return json_object_new_boolean(1);
	if(!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
		return json_object_new_boolean(0);
	if(strlen(v) == len && match_int(v, &iv))
		return json_object_new_int64(iv);
	if(strlen(v) == len && match_float(v))
		return json_object_new_double_s(strtod(v, NULL), v);
	return json_object_new_string_len(v, (int)len);
}

/* Merge keys ("<<: *base"): copy keys of the merged mapping(s) that the
 * target does not set itself. */
static int yj_merge(yj_ctx *c, json_object *target, json_object *src, const yaml_mark_t *m)
{
	size_t i;
	if(json_object_is_type(src, json_type_array)) {
		for(i = 0; i < json_object_array_length(src); i++) {
			int rc = yj_merge(c, target, json_object_array_get_idx(src, i), m);
			if(rc)
				return rc;
		}
		return 0;
	}
	if(!json_object_is_type(src, json_type_object))
		return yj_fail(c, m, "merge key '<<' needs a mapping or a list of mappings");
	json_object_object_foreach(src, k, v) {
		if(!json_object_object_get_ex(target, k, NULL))
			json_object_object_add(target, k, json_object_get(v));
	}
	return 0;
}

/* Attach a finished value to the current container (or make it the root).
 * Takes ownership of `val` in every case. */
static int yj_attach(yj_ctx *c, json_object *val, const yaml_event_t *ev)
{
	yj_frame *f;
	const yaml_mark_t *m = &ev->start_mark;

	if(c->depth == 0) {
		c->root = val;
		c->have_root = true;
		return 0;
	}
	f = &c->stack[c->depth - 1];
	if(!f->is_map) {
		if(json_object_array_add(f->obj, val)) {
			json_object_put(val);
			return prd_err_set(c->err, PRD_ENOMEM, "out of memory");
		}
		return 0;
	}
	if(!f->key) {
		/* This value is a key. Only scalars may be keys. */
		if(ev->type != YAML_SCALAR_EVENT && ev->type != YAML_ALIAS_EVENT) {
			json_object_put(val);
			return yj_fail(c, m, "mapping keys must be scalars");
		}
		if(val && !json_object_is_type(val, json_type_string) &&
		   !json_object_is_type(val, json_type_int) &&
		   !json_object_is_type(val, json_type_boolean) &&
		   !json_object_is_type(val, json_type_double)) {
			json_object_put(val);
			return yj_fail(c, m, "mapping keys must be scalars");
		}
		f->key = str_dup(val ? json_object_get_string(val) : "null");
		if(ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
		   !strcmp((const char *)ev->data.scalar.value, "<<")) {
			free(f->key);
			f->key = str_dup("\x01merge");
		}
		json_object_put(val);
		if(!f->key)
			return prd_err_set(c->err, PRD_ENOMEM, "out of memory");
		if(strcmp(f->key, "\x01merge") && json_object_object_get_ex(f->obj, f->key, NULL)) {
			int rc = yj_fail(c, m, "duplicate mapping key \"%.100s\"", f->key);
			free(f->key);
			f->key = NULL;
			return rc;
		}
		return 0;
	}
	if(!strcmp(f->key, "\x01merge")) {
		/* Explicit keys win over merged ones wherever they appear, so the
		 * merge waits until the mapping is complete. */
		free(f->key);
		f->key = NULL;
		if(!f->merges && !(f->merges = json_object_new_array())) {
			json_object_put(val);
			return prd_err_set(c->err, PRD_ENOMEM, "out of memory");
		}
		json_object_array_add(f->merges, val);
		return 0;
	}
	json_object_object_add(f->obj, f->key, val);
	free(f->key);
	f->key = NULL;
	return 0;
}

static int yj_push(yj_ctx *c, bool is_map, const yaml_event_t *ev, const char *anchor)
{
	yj_frame *f;
	if(c->depth == YJ_MAX_DEPTH)
		return yj_fail(c, &ev->start_mark, "nesting deeper than 256 levels");
	f = &c->stack[c->depth];
	memset(f, 0, sizeof(*f));
	f->is_map = is_map;
	f->obj = is_map ? json_object_new_object() : json_object_new_array();
	if(!f->obj)
		return prd_err_set(c->err, PRD_ENOMEM, "out of memory");
	if(anchor && !(f->anchor = str_dup(anchor))) {
		json_object_put(f->obj);
		return prd_err_set(c->err, PRD_ENOMEM, "out of memory");
	}
	c->depth++;
	return 0;
}

static int yj_pop(yj_ctx *c, const yaml_event_t *ev)
{
	yj_frame f = c->stack[--c->depth];
	int rc = 0;
	free(f.key);
	if(f.merges) {
		size_t i;
		for(i = 0; i < json_object_array_length(f.merges) && !rc; i++)
			rc = yj_merge(c, f.obj, json_object_array_get_idx(f.merges, i), &ev->start_mark);
		json_object_put(f.merges);
	}
	if(!rc && f.anchor)
		rc = yj_anchor_add(c, f.anchor, f.obj, &ev->start_mark);
	free(f.anchor);
	if(rc) {
		json_object_put(f.obj);
		return rc;
	}
	return yj_attach(c, f.obj, ev);
}

static void yj_unwind(yj_ctx *c)
{
	while(c->depth > 0) {
		yj_frame *f = &c->stack[--c->depth];
		free(f->key);
		free(f->anchor);
		json_object_put(f->merges);
		json_object_put(f->obj);
	}
	if(c->have_root)
		json_object_put(c->root);
	c->root = NULL;
	c->have_root = false;
}

/* Handle one parser event; documents finished are appended to `docs`. */
static int yj_event(yj_ctx *c, const yaml_event_t *ev, json_object *docs)
{
	int rc;
	switch(ev->type) {
	case YAML_DOCUMENT_START_EVENT:
		c->have_root = false;
		c->root = NULL;
		return 0;
	case YAML_DOCUMENT_END_EVENT:
		yj_anchors_clear(c);
		if(c->have_root && c->root) {
			json_object_array_add(docs, c->root);
		}
		c->root = NULL;
		c->have_root = false;
		return 0;
	case YAML_MAPPING_START_EVENT:
		return yj_push(c, true, ev, (const char *)ev->data.mapping_start.anchor);
	case YAML_SEQUENCE_START_EVENT:
		return yj_push(c, false, ev, (const char *)ev->data.sequence_start.anchor);
	case YAML_MAPPING_END_EVENT:
	case YAML_SEQUENCE_END_EVENT:
		return yj_pop(c, ev);
	case YAML_SCALAR_EVENT: {
		json_object *v = yj_scalar(ev);
		if(ev->data.scalar.anchor) {
			rc = yj_anchor_add(c, (const char *)ev->data.scalar.anchor, v, &ev->start_mark);
			if(rc) {
				json_object_put(v);
				return rc;
			}
		}
		return yj_attach(c, v, ev);
	}
	case YAML_ALIAS_EVENT: {
		int i;
		const char *name = (const char *)ev->data.alias.anchor;
		if(++c->aliases > YJ_MAX_ALIASES)
			return yj_fail(c, &ev->start_mark, "too many aliases (limit 10000)");
		for(i = c->nanchors - 1; i >= 0; i--) {
			if(strcmp(c->anchors[i].name, name) == 0) {
				/* Deep copy so a later edit of one place does not change
				 * the other; the node budget above bounds the cost. */
				json_object *cp = NULL;
				c->alias_nodes += c->anchors[i].nodes;
				if(c->alias_nodes > YJ_MAX_ALIAS_NODES)
					return yj_fail(c, &ev->start_mark,
						       "aliases expand to more than 1000000 nodes");
				if(c->anchors[i].obj && json_object_deep_copy(c->anchors[i].obj, &cp, NULL))
					return prd_err_set(c->err, PRD_ENOMEM, "out of memory");
				return yj_attach(c, cp, ev);
			}
		}
		return yj_fail(c, &ev->start_mark, "unknown alias \"*%.100s\"", name);
	}
	default:
		return 0;
	}
}

int yj_parse_all(const char *data, size_t len, json_object **docs_out, prd_err *err)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	yj_ctx *c;
	json_object *docs;
	int rc = 0, done = 0;

	*docs_out = NULL;
	c = calloc(1, sizeof(*c));
	docs = json_object_new_array();
	if(!c || !docs || !yaml_parser_initialize(&parser)) {
		free(c);
		json_object_put(docs);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	c->err = err;
	yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
	while(!done) {
		if(!yaml_parser_parse(&parser, &ev)) {
			rc = prd_err_set(err, PRD_EINVAL, "line %zu, column %zu: %s%s%s",
					 parser.problem_mark.line + 1, parser.problem_mark.column + 1,
					 parser.problem ? parser.problem : "invalid YAML",
					 parser.context ? " " : "", parser.context ? parser.context : "");
			break;
		}
		done = ev.type == YAML_STREAM_END_EVENT;
		rc = yj_event(c, &ev, docs);
		yaml_event_delete(&ev);
		if(rc)
			break;
	}
	yj_unwind(c);
	yj_anchors_clear(c);
	yaml_parser_delete(&parser);
	free(c);
	if(rc) {
		json_object_put(docs);
		return rc;
	}
	*docs_out = docs;
	return 0;
}

static bool is_list_kind(json_object *o)
{
	json_object *kind, *items;
	const char *k;
	if(!json_object_is_type(o, json_type_object) ||
	   !json_object_object_get_ex(o, "kind", &kind) ||
	   !json_object_object_get_ex(o, "items", &items) ||
	   !json_object_is_type(items, json_type_array))
		return false;
	k = json_object_get_string(kind);
	return k && str_ends_with(k, "List");
}

int yj_parse_objects(const char *data, size_t len, json_object **objs, prd_err *err)
{
	json_object *docs, *out;
	size_t i, j;
	int rc = yj_parse_all(data, len, &docs, err);
	if(rc)
		return rc;
	out = json_object_new_array();
	if(!out) {
		json_object_put(docs);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	for(i = 0; i < json_object_array_length(docs); i++) {
		json_object *d = json_object_array_get_idx(docs, i);
		if(is_list_kind(d)) {
			json_object *items = json_object_object_get(d, "items");
			for(j = 0; j < json_object_array_length(items); j++)
				json_object_array_add(out, json_object_get(json_object_array_get_idx(items, j)));
		} else {
			json_object_array_add(out, json_object_get(d));
		}
	}
	json_object_put(docs);
	*objs = out;
	return 0;
}

int yj_parse_one(const char *data, size_t len, json_object **doc, prd_err *err)
{
	json_object *docs;
	size_t n;
	int rc = yj_parse_all(data, len, &docs, err);
	if(rc)
		return rc;
	n = json_object_array_length(docs);
	if(n != 1) {
		json_object_put(docs);
		return prd_err_set(err, PRD_EINVAL, "expected exactly one YAML document, found %zu", n);
	}
	*doc = json_object_get(json_object_array_get_idx(docs, 0));
	json_object_put(docs);
	return 0;
}

int yj_read_file(const char *path, size_t max, char **data, size_t *len, prd_err *err)
{
	FILE *f;
	struct stat st;
	char *p;
	size_t n;

	f = fopen(path, "rb");
	if(!f)
		return prd_err_set(err, errno == ENOENT ? PRD_ENOTFOUND : PRD_EIO,
				   "cannot open %s: %s", path, strerror(errno));
	if(fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		fclose(f);
		return prd_err_set(err, PRD_EIO, "%s is not a regular file", path);
	}
	if((size_t)st.st_size > max) {
		fclose(f);
		return prd_err_set(err, PRD_ERANGE, "%s is larger than %zu bytes", path, max);
	}
	p = malloc((size_t)st.st_size + 1);
	if(!p) {
		fclose(f);
		return prd_err_set(err, PRD_ENOMEM, "out of memory reading %s", path);
	}
	n = fread(p, 1, (size_t)st.st_size, f);
	if(ferror(f)) {
		free(p);
		fclose(f);
		return prd_err_set(err, PRD_EIO, "error reading %s", path);
	}
	fclose(f);
	p[n] = '\0';
	*data = p;
	*len = n;
	return 0;
}

int yj_load_file(const char *path, json_object **objs, prd_err *err)
{
	char *data;
	size_t len;
	int rc = yj_read_file(path, 64u << 20, &data, &len, err);
	if(rc)
		return rc;
	rc = yj_parse_objects(data, len, objs, err);
	free(data);
	if(rc)
		prd_err_prefix(err, "%s", path);
	return rc;
}

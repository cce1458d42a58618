/* The priority expander's table in cluster-autoscaler's format: parsed from
 * the ConfigMap's YAML and matched against node-group names. */
#include "sched/priorities.h"
#include "util/str.h"
#include "util/yamljson.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

void sched_priorities_free(sched_priorities *p)
{
	size_t i;
	if(!p)
		return;
	for(i = 0; i < p->n; i++)
		free((void *)p->v[i].regexes);
	free(p->v);
	json_object_put(p->doc);
	memset(p, 0, sizeof(*p));
}

static int by_priority_desc(const void *a, const void *b)
{
	const sched_priority *x = a, *y = b;
	return x->priority < y->priority ? 1 : x->priority > y->priority ? -1 : 0;
}

/* One "PRIORITY: [regex, ...]" entry into p->v[p->n]. */
static int add_entry(sched_priorities *p, const char *where, const char *key, json_object *list,
		     prd_err *e)
{
	sched_priority *s = &p->v[p->n];
	const char **rv;
	size_t i, n;
	int64_t prio;

	if(str_to_int64(key, &prio))
		return prd_err_set(e, PRD_EINVAL, "%spriority \"%s\": not an integer", where, key);
	if(!json_object_is_type(list, json_type_array) || json_object_array_length(list) == 0)
		return prd_err_set(e, PRD_EINVAL,
		                   "%spriority %s: want a non-empty list of node-group name regular "
		                   "expressions", where, key);
	n = json_object_array_length(list);
	if(!(rv = calloc(n, sizeof(*rv))))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++) {
		json_object *it = json_object_array_get_idx(list, i);
		regex_t re;
		int r;
		if(!json_object_is_type(it, json_type_string) || !json_object_get_string(it)[0]) {
			free(rv);
			return prd_err_set(e, PRD_EINVAL,
			                   "%spriority %s, item %zu: want a regular expression (a non-empty "
			                   "string; quote it if YAML reads it as another type)", where, key, i + 1);
		}
		rv[i] = json_object_get_string(it);
		if((r = regcomp(&re, rv[i], REG_EXTENDED | REG_NOSUB))) {
			char msg[128];
			regerror(r, NULL, msg, sizeof(msg));
			free(rv);
			return prd_err_set(e, PRD_EINVAL, "%spriority %s: \"%s\" is not a regular expression: %s",
			                   where, key, json_object_get_string(it), msg);
		}
		regfree(&re);
	}
	s->priority = prio;
	s->regexes = rv;
	s->n_regexes = n;
	p->n++;
	return 0;
}

/* The map itself (`table`, owned by `holder`). */
static int parse_table(json_object *holder, json_object *table, const char *where,
		       sched_priorities *out, prd_err *e)
{
	sched_priorities p;
	size_t n;
	int rc = 0;

	memset(&p, 0, sizeof(p));
	if(!json_object_is_type(table, json_type_object) || json_object_object_length(table) == 0)
		return prd_err_set(e, PRD_EINVAL,
		                   "%swant a map of integer priority to a list of node-group name regular "
		                   "expressions (cluster-autoscaler-priority-expander format)", where);
	n = (size_t)json_object_object_length(table);
	if(!(p.v = calloc(n, sizeof(*p.v))))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	json_object_object_foreach(table, key, val) {
		if(rc)
			break;
		rc = add_entry(&p, where, key, val, e);
	}
	if(rc) {
		sched_priorities_free(&p);
		return rc;
	}
	qsort(p.v, p.n, sizeof(*p.v), by_priority_desc);
	p.doc = json_object_get(holder);
	*out = p;
	return 0;
}

int sched_priorities_from_json(json_object *doc, sched_priorities *out, prd_err *e)
{
	json_object *kind = json_object_object_get(doc, "kind"), *data, *text, *table = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if(!kind)
		return parse_table(doc, doc, "", out, e);
	if(!str_eq(json_object_get_string(kind), "ConfigMap"))
		return prd_err_set(e, PRD_EINVAL, "kind %s: want a ConfigMap or the bare priorities map",
		                   json_object_get_string(kind));
	data = json_object_object_get(doc, "data");
	text = json_object_object_get(data, SCHED_PRIORITIES_KEY);
	if(!text || !json_object_is_type(text, json_type_string))
		return prd_err_set(e, PRD_EINVAL, "the ConfigMap has no string data." SCHED_PRIORITIES_KEY);
	rc = yj_parse_one(json_object_get_string(text), (size_t)json_object_get_string_len(text), &table, e);
	if(rc)
		return prd_err_prefix(e, "data." SCHED_PRIORITIES_KEY);
	rc = parse_table(table, table, "data." SCHED_PRIORITIES_KEY ": ", out, e);
	json_object_put(table);
	return rc;
}

int sched_priorities_parse(const char *text, size_t len, sched_priorities *out, prd_err *e)
{
	json_object *doc = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if((rc = yj_parse_one(text, len, &doc, e)))
		return rc;
	rc = sched_priorities_from_json(doc, out, e);
	json_object_put(doc);
	return rc;
}

int sched_priorities_read_file(const char *path, sched_priorities *out, prd_err *e)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = yj_read_file(path, 1u << 20, &text, &len, e);
	if(!rc)
		rc = sched_priorities_parse(text, len, out, e);
	free(text);
	return rc ? prd_err_prefix(e, "%s", path) : 0;
}

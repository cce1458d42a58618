/* The kwok driver's configuration (the --cloud-config text, YAML) and its
 * Node templates (YAML files in a directory, or the values of a
 * ConfigMap). Everything read here comes from outside, so every problem
 * becomes an init/refresh error naming the source and the field. */
#include "kwok/kwok_config.h"
#include "kwok/kwok_nap.h"
#include "kwok/kwok_async.h"
#include "kwok/kwok_dra.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/quantity.h"
#include "util/str.h"
#include "util/yamljson.h"

static const char *const op_names[KWOK_OP_COUNT] = {
	[KWOK_OP_REFRESH] = "refresh",
	[KWOK_OP_NODE_GROUPS] = "node-groups",
	[KWOK_OP_INSTANCES] = "instances",
	[KWOK_OP_TEMPLATE_NODE] = "template-node",
	[KWOK_OP_INCREASE] = "increase",
	[KWOK_OP_ATOMIC_INCREASE] = "atomic-increase",
	[KWOK_OP_DELETE] = "delete",
	[KWOK_OP_DECREASE] = "decrease",
};

const char *kwok_op_name(int op)
{
	return op >= 0 && op < KWOK_OP_COUNT ? op_names[op] : "?";
}

void kwok_faults_free(kwok_fault *faults, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++) {
		free(faults[i].group);
		free(faults[i].fail_message);
		free(faults[i].error_code);
	}
	free(faults);
}

void kwok_group_clear(kwok_group *g)
{
	size_t j;
	free(g->id);
	free(g->source);
	json_object_put(g->tmpl);
	for(j = 0; j < g->nfailed; j++) {
		free(g->failed[j].name);
		free(g->failed[j].code);
		free(g->failed[j].message);
		free(g->failed[j].owner);
	}
	free(g->failed);
	free(g->owner);
	free(g->shape);
	free(g->zone);
	memset(g, 0, sizeof(*g));
}

void kwok_groups_free(kwok_group *groups, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++)
		kwok_group_clear(&groups[i]);
	free(groups);
}

/* A non-negative integer from a YAML value that is an integer or a string
 * of digits (annotations are strings in Kubernetes, but hand-written YAML
 * often leaves them unquoted). */
static int nonneg_int(json_object *v, int32_t *out)
{
	int64_t x;
	if(json_object_is_type(v, json_type_int)) {
		x = json_object_get_int64(v);
	} else if(json_object_is_type(v, json_type_string)) {
		if(str_to_int64(json_object_get_string(v), &x))
			return -1;
	} else {
		return -1;
	}
	if(x < 0 || x > INT32_MAX)
		return -1;
	*out = (int32_t)x;
	return 0;
}

/* One key of a `faults:` entry. */
static int fault_key(kwok_fault *out, const char *key, json_object *v, size_t index, int *has_effect,
		     prd_cloud_error *err)
{
	const char *opname = NULL;
	if(!strcmp(key, "operation")) {
		int op;
		opname = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
		for(op = 0; op < KWOK_OP_COUNT; op++)
			if(!strcmp(op_names[op], opname))
				out->op = op;
		if(out->op < 0)
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: faults[%zu].operation '%s' is not one of refresh, "
					 "node-groups, instances, template-node, increase, atomic-increase, "
					 "delete, decrease",
					 index, opname);
	} else if(!strcmp(key, "group")) {
		if(!json_object_is_type(v, json_type_string))
			return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: faults[%zu].group must be a string",
					 index);
		free(out->group);
		out->group = kwok_strdup(json_object_get_string(v));
		if(!out->group)
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	} else if(!strcmp(key, "fail")) {
		if(!json_object_is_type(v, json_type_string) || !json_object_get_string_len(v))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: faults[%zu].fail must be the error message (a string)",
					 index);
		free(out->fail_message);
		out->fail_message = kwok_strdup(json_object_get_string(v));
		if(!out->fail_message)
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		*has_effect = 1;
	} else if(!strcmp(key, "failCode")) {
		const char *c = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
		if(!strcmp(c, "EIO"))
			out->fail_code = PRD_CLOUD_EIO;
		else if(!strcmp(c, "EAGAIN"))
			out->fail_code = PRD_CLOUD_EAGAIN;
		else if(!strcmp(c, "EUNSUPPORTED"))
			out->fail_code = PRD_CLOUD_EUNSUPPORTED;
		else if(!strcmp(c, "ECONFLICT"))
			out->fail_code = PRD_CLOUD_ECONFLICT;
		else
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: faults[%zu].failCode '%s' is not one of EIO, EAGAIN, "
					 "EUNSUPPORTED, ECONFLICT",
					 index, c);
	} else if(!strcmp(key, "succeed")) {
		if(nonneg_int(v, &out->succeed))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: faults[%zu].succeed must be a non-negative integer", index);
		*has_effect = 1;
	} else if(!strcmp(key, "errorCode")) {
		if(!json_object_is_type(v, json_type_string) || !json_object_get_string_len(v))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: faults[%zu].errorCode must be a non-empty string", index);
		free(out->error_code);
		out->error_code = kwok_strdup(json_object_get_string(v));
		if(!out->error_code)
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	} else if(!strcmp(key, "delayMs")) {
		int32_t d;
		if(nonneg_int(v, &d))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: faults[%zu].delayMs must be a non-negative integer", index);
		out->delay_ms = d;
		*has_effect = 1;
	} else if(!strcmp(key, "times")) {
		if(nonneg_int(v, &out->times) || out->times == 0)
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: faults[%zu].times must be a positive integer", index);
	} else {
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: faults[%zu]: unknown key '%s' (known: operation, group, fail, "
				 "failCode, succeed, errorCode, delayMs, times)",
				 index, key);
	}
	return 0;
}

/* The checks across the keys of a `faults:` entry. */
static int fault_check(kwok_fault *out, size_t index, int has_effect, prd_cloud_error *err)
{
	if(out->op < 0)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: faults[%zu] needs an operation", index);
	if(!has_effect)
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: faults[%zu] (%s) does nothing: give fail, succeed or delayMs", index,
				 op_names[out->op]);
	if(out->fail_message && out->succeed >= 0)
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: faults[%zu] has both fail and succeed; use one", index);
	if(out->succeed >= 0 && out->op != KWOK_OP_INCREASE && out->op != KWOK_OP_ATOMIC_INCREASE)
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: faults[%zu].succeed applies to increase and atomic-increase only, "
				 "not %s",
				 index, op_names[out->op]);
	if(out->error_code && out->succeed < 0)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: faults[%zu].errorCode needs succeed", index);
	if(out->succeed >= 0 && !out->error_code) {
		out->error_code = kwok_strdup("OutOfResources");
		if(!out->error_code)
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	return 0;
}

/* One `faults:` entry. */
static int parse_fault(json_object *f, size_t index, kwok_fault *out, prd_cloud_error *err)
{
	int has_effect = 0, rc;
	memset(out, 0, sizeof(*out));
	out->op = -1;
	out->succeed = -1;
	out->times = -1;
	out->fail_code = PRD_CLOUD_EIO;
	if(!json_object_is_type(f, json_type_object))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: faults[%zu] must be a mapping", index);
	json_object_object_foreach(f, key, v) {
		rc = fault_key(out, key, v, index, &has_effect, err);
		if(rc)
			return rc;
	}
	return fault_check(out, index, has_effect, err);
}

/* The config's templateConfigMap, "NAMESPACE/NAME", into k. */
static int config_cm(kwok *k, json_object *v, prd_cloud_error *err)
{
	const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
	const char *slash = strchr(s, '/');
	if(!slash || slash == s || strchr(slash + 1, '/') || !str_is_dns_subdomain(slash + 1) ||
	   (size_t)(slash - s) > 63)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: templateConfigMap '%s' must be NAMESPACE/NAME", s);
	free(k->cm_namespace);
	free(k->cm_name);
	k->cm_namespace = str_ndup(s, (size_t)(slash - s));
	k->cm_name = kwok_strdup(slash + 1);
	if(!k->cm_namespace || !k->cm_name)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	if(!str_is_dns_label(k->cm_namespace))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: templateConfigMap namespace '%s' is not a DNS label",
				 k->cm_namespace);
	return 0;
}

/* The config's faults list into k (replacing any before). */
static int config_faults(kwok *k, json_object *v, prd_cloud_error *err)
{
	size_t i, n;
	int rc = 0;
	if(!json_object_is_type(v, json_type_array))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: faults must be a list");
	n = json_object_array_length(v);
	kwok_faults_free(k->faults, k->nfaults);
	k->nfaults = 0;
	k->faults = calloc(n + 1, sizeof(*k->faults));
	if(!k->faults)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < n && !rc; i++) {
		rc = parse_fault(json_object_array_get_idx(v, i), i, &k->faults[i], err);
		k->nfaults = i + 1; /* free what parse_fault filled, even on error */
	}
	return rc;
}

int kwok_parse_config(kwok *k, const char *config, prd_cloud_error *err)
{
	json_object *doc = NULL;
	prd_err pe = {0};
	int rc = 0;

	if(!config || !config[strspn(config, " \t\r\n")])
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config is empty: set templateDir or templateConfigMap (see docs/drivers.md)");
	if(yj_parse_one(config, strlen(config), &doc, &pe))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: %s", pe.msg);
	if(!json_object_is_type(doc, json_type_object)) {
		json_object_put(doc);
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config must be a YAML mapping");
	}
	json_object_object_foreach(doc, key, v) {
		if(rc)
			break;
		if(!strcmp(key, "templateDir")) {
			if(!json_object_is_type(v, json_type_string) || !json_object_get_string_len(v)) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: templateDir must be a path");
				break;
			}
			free(k->template_dir);
			k->template_dir = kwok_strdup(json_object_get_string(v));
			if(!k->template_dir)
				rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		} else if(!strcmp(key, "templateConfigMap")) {
			rc = config_cm(k, v, err);
		} else if(!strcmp(key, "createInitialNodes")) {
			if(!json_object_is_type(v, json_type_boolean)) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL,
					       "kwok config: createInitialNodes must be true or false");
				break;
			}
			k->create_initial = json_object_get_boolean(v);
		} else if(!strcmp(key, "createParallelism")) {
			if(!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
			   json_object_get_int64(v) > DRV_PARALLEL_MAX) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL,
					       "kwok config: createParallelism must be an integer from 1 to %d",
					       DRV_PARALLEL_MAX);
				break;
			}
			k->create_parallelism = (unsigned)json_object_get_int64(v);
		} else if(!strcmp(key, "autoProvisioning")) {
			rc = kwok_nap_parse(k, v, err);
		} else if(!strcmp(key, "async")) {
			rc = kwok_async_parse(k, v, err);
		} else if(!strcmp(key, "resourceSlices")) {
			rc = kwok_slices_parse(k, v, err);
		} else if(!strcmp(key, "faults")) {
			rc = config_faults(k, v, err);
		} else {
			rc = kwok_fail(err, PRD_CLOUD_EINVAL,
				       "kwok config: unknown key '%s' (known: templateDir, templateConfigMap, "
				       "createInitialNodes, createParallelism, faults, async, resourceSlices, "
				       "autoProvisioning)",
				       key);
		}
	}
	json_object_put(doc);
	if(rc)
		return rc;
	if(!k->template_dir && !k->cm_name)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: set templateDir or templateConfigMap");
	if(k->template_dir && k->cm_name)
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: set only one of templateDir and templateConfigMap");
	return 0;
}

int kwok_check_fault_groups(const kwok *k, prd_cloud_error *err)
{
	size_t i, j;
	for(i = 0; i < k->nfaults; i++) {
		if(!k->faults[i].group)
			continue;
		for(j = 0; j < k->ngroups; j++)
			if(!strcmp(k->groups[j].id, k->faults[i].group))
				break;
		if(j == k->ngroups)
			return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: faults[%zu].group '%s' is not a node group",
					 i, k->faults[i].group);
	}
	return 0;
}

/* Check a resource list (status.capacity/allocatable) and rewrite every
 * value as a canonical quantity string. */
static int check_resources(json_object *list, const char *source, const char *what, prd_cloud_error *err)
{
	json_object_object_foreach(list, name, v) {
		char buf[QTY_STR_MAX];
		const char *text;
		prd_err pe = {0};
		qty q;
		if(json_object_is_type(v, json_type_string) || json_object_is_type(v, json_type_int) ||
		   json_object_is_type(v, json_type_double))
			text = json_object_get_string(v);
		else
			return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s.%s must be a quantity", source, what, name);
		if(qty_parse(text, &q, &pe))
			return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s.%s: '%s' is not a quantity: %s", source, what,
					 name, text, pe.msg);
		if(qty_sign(&q) < 0)
			return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s.%s is negative", source, what, name);
		qty_format_str(&q, buf, sizeof(buf));
		json_object_object_add(list, name, json_object_new_string(buf));
	}
	return 0;
}

static int check_string_map(json_object *m, const char *source, const char *what, prd_cloud_error *err)
{
	if(!m)
		return 0;
	if(!json_object_is_type(m, json_type_object))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s must be a mapping", source, what);
	json_object_object_foreach(m, key, v) {
		if(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_boolean) ||
		   json_object_is_type(v, json_type_double)) {
			/* Unquoted YAML scalars: Kubernetes wants strings. */
			json_object_object_add(m, key, json_object_new_string(json_object_get_string(v)));
		} else if(!json_object_is_type(v, json_type_string)) {
			return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s.%s must be a string", source, what, key);
		}
	}
	return 0;
}

static int check_taints(json_object *taints, const char *source, prd_cloud_error *err)
{
	size_t i, n;
	if(!taints)
		return 0;
	if(!json_object_is_type(taints, json_type_array))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: spec.taints must be a list", source);
	n = json_object_array_length(taints);
	for(i = 0; i < n; i++) {
		json_object *t = json_object_array_get_idx(taints, i);
		const char *key = kwok_jstr(t, "key"), *effect = kwok_jstr(t, "effect");
		if(!json_object_is_type(t, json_type_object) || !key || !key[0])
			return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: spec.taints[%zu] needs a key", source, i);
		if(!effect || (strcmp(effect, "NoSchedule") && strcmp(effect, "PreferNoSchedule") &&
			       strcmp(effect, "NoExecute")))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "%s: spec.taints[%zu].effect '%s' is not NoSchedule, PreferNoSchedule or "
					 "NoExecute",
					 source, i, effect ? effect : "");
	}
	return 0;
}

/* Validate one template Node and turn it into a group (the template is
 * borrowed; the group keeps a copy). */
/* The group's sizes from the template's annotations (min 0, max
 * KWOK_DEFAULT_MAX, initial = min unless given). */
static int template_sizes(json_object *ann, const char *source, kwok_group *g, prd_cloud_error *err)
{
	static const char *const keys[3] = {KWOK_MIN_ANNOTATION, KWOK_MAX_ANNOTATION, KWOK_INITIAL_ANNOTATION};
	int32_t *dst[3] = {&g->min, &g->max, &g->initial};
	int i;
	g->min = 0;
	g->max = KWOK_DEFAULT_MAX;
	g->initial = -1;
	for(i = 0; i < 3; i++) {
		json_object *v;
		if(ann && json_object_object_get_ex(ann, keys[i], &v) && nonneg_int(v, dst[i]))
			return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: annotation %s='%s' must be a non-negative integer",
					 source, keys[i], json_object_get_string(v));
	}
	if(g->max < g->min)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s (%d) is below %s (%d)", source, KWOK_MAX_ANNOTATION,
				 (int)g->max, KWOK_MIN_ANNOTATION, (int)g->min);
	if(g->initial < 0)
		g->initial = g->min; /* not given: start at the minimum */
	if(g->initial > g->max || g->initial < g->min)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s (%d) is outside [%d, %d]", source,
				 KWOK_INITIAL_ANNOTATION, (int)g->initial, (int)g->min, (int)g->max);
	return 0;
}

static int template_to_group(json_object *node, const char *where, kwok_group *g, prd_cloud_error *err)
{
	json_object *md, *status, *cap, *alloc, *spec, *copy = NULL;
	const char *name, *kind = kwok_jstr(node, "kind"), *api = kwok_jstr(node, "apiVersion");
	char source[800];
	int rc;

	memset(g, 0, sizeof(*g));
	if(!kind || strcmp(kind, "Node") || (api && strcmp(api, "v1")))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: a node template must be a v1 Node, found %s %s", where,
				 api ? api : "(no apiVersion)", kind ? kind : "(no kind)");
	md = kwok_jobj(node, "metadata");
	name = kwok_jstr(md, "name");
	if(!name || !str_is_dns_label(name) || strlen(name) > KWOK_GROUP_NAME_MAX)
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "%s: metadata.name '%s' must be a DNS label of at most %d characters (it names "
				 "the node group and prefixes its nodes)",
				 where, name ? name : "", KWOK_GROUP_NAME_MAX);
	snprintf(source, sizeof(source), "%s (node group %s)", where, name);
	if(json_object_deep_copy(node, &copy, NULL) || !copy)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	md = kwok_jobj(copy, "metadata");
	rc = check_string_map(json_object_object_get(md, "labels"), source, "metadata.labels", err);
	if(!rc)
		rc = check_string_map(json_object_object_get(md, "annotations"), source, "metadata.annotations",
				      err);
	if(rc)
		goto fail;
	rc = template_sizes(kwok_jobj(md, "annotations"), source, g, err);
	if(rc)
		goto fail;
	spec = json_object_object_get(copy, "spec");
	if(spec && !json_object_is_type(spec, json_type_object)) {
		rc = kwok_fail(err, PRD_CLOUD_EINVAL, "%s: spec must be a mapping", source);
		goto fail;
	}
	rc = check_taints(spec ? json_object_object_get(spec, "taints") : NULL, source, err);
	if(rc)
		goto fail;
	status = kwok_jobj(copy, "status");
	cap = kwok_jobj(status, "capacity");
	alloc = kwok_jobj(status, "allocatable");
	if(!cap || !json_object_object_length(cap)) {
		rc = kwok_fail(err, PRD_CLOUD_EINVAL, "%s: status.capacity is missing or empty", source);
		goto fail;
	}
	rc = check_resources(cap, source, "status.capacity", err);
	if(!rc && alloc)
		rc = check_resources(alloc, source, "status.allocatable", err);
	if(rc)
		goto fail;
	if(!alloc) {
		/* No allocatable: the whole capacity is schedulable. */
		if(json_object_deep_copy(cap, &alloc, NULL) || !alloc) {
			rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
			goto fail;
		}
		json_object_object_add(status, "allocatable", alloc);
	}
	g->id = kwok_strdup(name);
	g->source = kwok_strdup(where);
	if(!g->id || !g->source) {
		rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		goto fail;
	}
	g->tmpl = copy;
	return 0;
fail:
	free(g->id);
	free(g->source);
	json_object_put(copy);
	memset(g, 0, sizeof(*g));
	return rc;
}

int kwok_template_group(json_object *node, const char *where, kwok_group *g, prd_cloud_error *err)
{
	return template_to_group(node, where, g, err);
}

/* Append the templates in `objs` (from one file or ConfigMap key). */
static int add_templates(json_object *objs, const char *where, kwok_group **groups, size_t *n,
			 prd_cloud_error *err)
{
	size_t i, j, count = json_object_array_length(objs);
	for(i = 0; i < count; i++) {
		kwok_group g, *bigger;
		char at[600];
		int rc;
		if(count > 1)
			snprintf(at, sizeof(at), "%s, document %zu", where, i + 1);
		else
			snprintf(at, sizeof(at), "%s", where);
		rc = template_to_group(json_object_array_get_idx(objs, i), at, &g, err);
		if(rc)
			return rc;
		for(j = 0; j < *n; j++) {
			if(!strcmp((*groups)[j].id, g.id)) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL, "node group %s is defined twice: in %s and in %s",
					       g.id, (*groups)[j].source, g.source);
				free(g.id);
				free(g.source);
				json_object_put(g.tmpl);
				return rc;
			}
		}
		bigger = realloc(*groups, (*n + 1) * sizeof(**groups));
		if(!bigger) {
			free(g.id);
			free(g.source);
			json_object_put(g.tmpl);
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
		*groups = bigger;
		(*groups)[(*n)++] = g;
	}
	return 0;
}

static int is_template_file(const struct dirent *d)
{
	return d->d_name[0] != '.' &&
	       (str_ends_with(d->d_name, ".yaml") || str_ends_with(d->d_name, ".yml") ||
		str_ends_with(d->d_name, ".json"));
}

static uint64_t stamp_mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;
	for(i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h;
}

#define KWOK_STAMP_TRUST_NS (2LL * 1000000000LL)

void kwok_dir_names_free(kwok_dir_names *d)
{
	size_t i;
	for(i = 0; i < d->n; i++)
		free(d->names[i]);
	free(d->names);
	memset(d, 0, sizeof(*d));
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

/* Keep the directory's template file names (in name order, as load_dir
 * reads them) unless the directory is the one they were read from and has
 * not changed since; dst is what stat says of it now. A directory
 * changed within the last 2 s is read again at the next call too (an entry
 * added within its timestamp granularity may leave the times as they were). */
static int dir_names(kwok *k, const struct stat *dst, int64_t now)
{
	kwok_dir_names *d = &k->tmpl_names;
	struct dirent **ents = NULL;
	int64_t key[6];
	int count, i;
	char **names;
	bool copied;
	key[0] = (int64_t)dst->st_dev;
	key[1] = (int64_t)dst->st_ino;
	key[2] = (int64_t)dst->st_mtim.tv_sec;
	key[3] = (int64_t)dst->st_mtim.tv_nsec;
	key[4] = (int64_t)dst->st_ctim.tv_sec;
	key[5] = (int64_t)dst->st_ctim.tv_nsec;
	if(d->ok && !memcmp(d->key, key, sizeof(key)))
		return 0;
	kwok_dir_names_free(d);
	count = scandir(k->template_dir, &ents, is_template_file, alphasort);
	if(count < 0)
		return -1;
	names = calloc((size_t)count + 1, sizeof(*names));
	copied = names != NULL;
	for(i = 0; i < count; i++) {
		if(copied && !(names[i] = kwok_strdup(ents[i]->d_name)))
			copied = false;
		free(ents[i]);
	}
	free(ents);
	if(!copied) {
		for(i = 0; names && i < count; i++)
			free(names[i]);
		free(names);
		return -1;
	}
	d->names = names;
	d->n = (size_t)count;
	memcpy(d->key, key, sizeof(key));
	d->ok = ts_ns(&dst->st_mtim) < now - KWOK_STAMP_TRUST_NS && ts_ns(&dst->st_ctim) < now - KWOK_STAMP_TRUST_NS;
	return 0;
}

int kwok_templates_stamp(kwok *k, int64_t now_ns, uint64_t *stamp, bool *trust)
{
	struct stat dst;
	uint64_t h = 1469598103934665603ULL;
	int64_t newest = 0;
	size_t i;
	*stamp = 0;
	*trust = false;
	if(!k->template_dir || stat(k->template_dir, &dst))
		return -1;
	if(dir_names(k, &dst, now_ns))
		return -1;
	for(i = 0; i < k->tmpl_names.n; i++) {
		const char *name = k->tmpl_names.names[i];
		char path[4096];
		struct stat st;
		int64_t v[6];
		snprintf(path, sizeof(path), "%s/%s", k->template_dir, name);
		if(stat(path, &st)) {
			k->tmpl_names.ok = false; /* gone: read the directory again */
			return -1;
		}
		v[0] = (int64_t)st.st_size;
		v[1] = (int64_t)st.st_ino;
		v[2] = (int64_t)st.st_mtim.tv_sec;
		v[3] = (int64_t)st.st_mtim.tv_nsec;
		v[4] = (int64_t)st.st_ctim.tv_sec;
		v[5] = (int64_t)st.st_ctim.tv_nsec;
		h = stamp_mix(h, name, strlen(name) + 1);
		h = stamp_mix(h, v, sizeof(v));
		if(ts_ns(&st.st_mtim) > newest)
			newest = ts_ns(&st.st_mtim);
		if(ts_ns(&st.st_ctim) > newest)
			newest = ts_ns(&st.st_ctim);
	}
	*stamp = h;
	*trust = newest < now_ns - KWOK_STAMP_TRUST_NS;
	return 0;
}

static int load_dir(const kwok *k, kwok_group **groups, size_t *n, prd_cloud_error *err)
{
	struct dirent **names = NULL;
	int count, i, rc = 0;
	count = scandir(k->template_dir, &names, is_template_file, alphasort);
	if(count < 0)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: cannot read templateDir %s: %s", k->template_dir,
				 strerror(errno));
	for(i = 0; i < count; i++) {
		char path[4096];
		json_object *objs = NULL;
		prd_err pe = {0};
		if(rc) {
			free(names[i]);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", k->template_dir, names[i]->d_name);
		free(names[i]);
		if(yj_load_file(path, &objs, &pe)) {
			rc = kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s", path, pe.msg);
			continue;
		}
		rc = add_templates(objs, path, groups, n, err);
		json_object_put(objs);
	}
	free(names);
	if(!rc && *n == 0)
		rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: templateDir %s holds no node templates (*.yaml, *.yml, *.json)",
			       k->template_dir);
	return rc;
}

static int load_configmap(kwok *k, kwok_group **groups, size_t *n, prd_cloud_error *err)
{
	char path[512];
	json_object *cm = NULL, *data;
	int rc;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps/%s", k->cm_namespace, k->cm_name);
	rc = kwok_request(k, "GET", path, NULL, NULL, &cm, NULL, err);
	if(rc) {
		char m[PRD_CLOUD_MSG_MAX];
		snprintf(m, sizeof(m), "%s", err ? err->message : "");
		return kwok_fail(err, rc == PRD_CLOUD_ENOTFOUND ? PRD_CLOUD_EINVAL : rc,
				 "kwok: cannot read templateConfigMap %s/%s: %s", k->cm_namespace, k->cm_name, m);
	}
	data = kwok_jobj(cm, "data");
	if(data) {
		json_object_object_foreach(data, key, v) {
			char where[512];
			json_object *objs = NULL;
			prd_err pe = {0};
			const char *text = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
			snprintf(where, sizeof(where), "ConfigMap %s/%s key %s", k->cm_namespace, k->cm_name, key);
			if(yj_parse_objects(text, strlen(text), &objs, &pe)) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL, "%s: %s", where, pe.msg);
				break;
			}
			rc = add_templates(objs, where, groups, n, err);
			json_object_put(objs);
			if(rc)
				break;
		}
	}
	json_object_put(cm);
	if(!rc && *n == 0)
		rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: templateConfigMap %s/%s holds no node templates",
			       k->cm_namespace, k->cm_name);
	return rc;
}

int kwok_load_templates(kwok *k, kwok_group **groups, size_t *ngroups, prd_cloud_error *err)
{
	kwok_group *v = NULL;
	size_t n = 0;
	int rc = k->template_dir ? load_dir(k, &v, &n, err) : load_configmap(k, &v, &n, err);
	if(rc) {
		kwok_groups_free(v, n);
		return rc;
	}
	*groups = v;
	*ngroups = n;
	return 0;
}

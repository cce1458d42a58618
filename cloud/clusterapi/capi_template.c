/* What a new node of a Cluster API node group looks like.
 *
 * Scale from zero: the capacity.cluster-autoscaler.kubernetes.io/
 * annotations on the MachineDeployment/MachineSet/MachinePool, as the
 * upstream cluster-autoscaler reads them:
 *   cpu, memory          required (both), quantities
 *   ephemeral-disk       quantity → ephemeral-storage
 *   maxPods              integer, default 110
 *   gpu-type, gpu-count  extended resource name (default nvidia.com/gpu)
 *                        and how many
 *   labels               "k1=v1,k2=v2"
 *   taints               "k1=v1:NoSchedule,k2:NoExecute"
 * or the same published by the infrastructure machine template
 * (status.capacity: cpu, memory, ephemeral-storage, pods, nvidia.com/gpu;
 * status.nodeInfo: architecture, operatingSystem as labels), the group's
 * annotations overriding the template's values key by key.
 * Without either, the template is a copy of one of the group's Nodes. */
#include "clusterapi/clusterapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/quantity.h"
#include "util/str.h"

#define ANN(k) CAPI_CAPACITY_PREFIX k

/* Add resource `name` = canonical form of `text` to both lists. */
static int add_quantity(json_object *cap, json_object *alloc, const char *name, const char *text, const char *key,
			const capi_group *g, prd_cloud_error *err)
{
	char buf[QTY_STR_MAX];
	prd_err pe = {0};
	qty q;
	if(qty_parse(text, &q, &pe) || qty_sign(&q) < 0)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: annotation %s='%s' is not a non-negative quantity",
				 g->id, key, text);
	qty_format_str(&q, buf, sizeof(buf));
	json_object_object_add(cap, name, json_object_new_string(buf));
	json_object_object_add(alloc, name, json_object_new_string(buf));
	return 0;
}

/* Split "a=b,c=d" into labels (values may be empty). */
static int parse_labels(const char *text, json_object *labels, const capi_group *g, prd_cloud_error *err)
{
	char *copy = capi_strdup(text), *save = NULL, *item;
	int rc = 0;
	if(!copy)
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(item = strtok_r(copy, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
		char *eq;
		prd_err pe = {0};
		str_trim(item);
		if(!item[0])
			continue;
		eq = strchr(item, '=');
		if(!eq) {
			rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: annotation %s: '%s' is not key=value", g->id,
				       ANN("labels"), item);
			break;
		}
		*eq = '\0';
		if(sel_validate_key(item, &pe) || sel_validate_value(eq + 1, &pe)) {
			rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: annotation %s: label '%s': %s", g->id,
				       ANN("labels"), item, pe.msg);
			break;
		}
		json_object_object_add(labels, item, json_object_new_string(eq + 1));
	}
	free(copy);
	return rc;
}

/* Split "k=v:Effect,k:Effect" into a taint list. */
static int parse_taints(const char *text, json_object *taints, const capi_group *g, prd_cloud_error *err)
{
	char *copy = capi_strdup(text), *save = NULL, *item;
	int rc = 0;
	if(!copy)
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(item = strtok_r(copy, ",", &save); item && !rc; item = strtok_r(NULL, ",", &save)) {
		char *colon, *eq;
		json_object *t;
		prd_err pe = {0};
		str_trim(item);
		if(!item[0])
			continue;
		colon = strrchr(item, ':');
		if(!colon || (strcmp(colon + 1, "NoSchedule") && strcmp(colon + 1, "PreferNoSchedule") &&
			      strcmp(colon + 1, "NoExecute"))) {
			rc = capi_fail(err, PRD_CLOUD_EINVAL,
				       "clusterapi: %s: annotation %s: '%s' is not key=value:Effect with Effect one of "
				       "NoSchedule, PreferNoSchedule, NoExecute",
				       g->id, ANN("taints"), item);
			break;
		}
		*colon = '\0';
		eq = strchr(item, '=');
		if(eq)
			*eq = '\0';
		if(sel_validate_key(item, &pe) || (eq && sel_validate_value(eq + 1, &pe))) {
			rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: annotation %s: taint '%s': %s", g->id,
				       ANN("taints"), item, pe.msg);
			break;
		}
		t = json_object_new_object();
		json_object_object_add(t, "key", json_object_new_string(item));
		if(eq && eq[1])
			json_object_object_add(t, "value", json_object_new_string(eq + 1));
		json_object_object_add(t, "effect", json_object_new_string(colon + 1));
		json_object_array_add(taints, t);
	}
	free(copy);
	return rc;
}

static int from_annotations(const capi_group *g, json_object *ann, char **node_json, prd_cloud_error *err)
{
	const char *cpu = capi_jstr(ann, ANN("cpu")), *mem = capi_jstr(ann, ANN("memory"));
	const char *disk = capi_jstr(ann, ANN("ephemeral-disk")), *pods = capi_jstr(ann, ANN("maxPods"));
	const char *gtype = capi_jstr(ann, ANN("gpu-type")), *gcount = capi_jstr(ann, ANN("gpu-count"));
	const char *ltext = capi_jstr(ann, ANN("labels")), *ttext = capi_jstr(ann, ANN("taints"));
	json_object *node = json_object_new_object(), *md = json_object_new_object();
	json_object *labels = json_object_new_object(), *spec = json_object_new_object();
	json_object *status = json_object_new_object(), *cap = json_object_new_object();
	json_object *alloc = json_object_new_object(), *taints = json_object_new_array();
	json_object *conds = json_object_new_array(), *ready = json_object_new_object();
	char name[700];
	int64_t n;
	int rc = 0;

	json_object_object_add(node, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(node, "kind", json_object_new_string("Node"));
	json_object_object_add(node, "metadata", md);
	json_object_object_add(node, "spec", spec);
	json_object_object_add(node, "status", status);
	json_object_object_add(status, "capacity", cap);
	json_object_object_add(status, "allocatable", alloc);
	snprintf(name, sizeof(name), "template-node-for-%s-%s", g->ns, g->name);
	json_object_object_add(md, "name", json_object_new_string(name));
	json_object_object_add(md, "labels", labels);
	/* The well-known labels a kubelet sets; the labels annotation may
	 * override them. */
	json_object_object_add(labels, "kubernetes.io/os", json_object_new_string("linux"));
	json_object_object_add(labels, "kubernetes.io/arch", json_object_new_string("amd64"));
	json_object_object_add(labels, "kubernetes.io/hostname", json_object_new_string(name));
	if(!cpu || !mem)
		rc = capi_fail(err, PRD_CLOUD_EINVAL,
			       "clusterapi: %s: scale from zero needs both %s and %s (only %s is set)", g->id, ANN("cpu"),
			       ANN("memory"), cpu ? ANN("cpu") : ANN("memory"));
	if(!rc)
		rc = add_quantity(cap, alloc, "cpu", cpu, ANN("cpu"), g, err);
	if(!rc)
		rc = add_quantity(cap, alloc, "memory", mem, ANN("memory"), g, err);
	if(!rc && disk)
		rc = add_quantity(cap, alloc, "ephemeral-storage", disk, ANN("ephemeral-disk"), g, err);
	if(!rc) {
		if(pods && (str_to_int64(pods, &n) || n <= 0 || n > 1000000))
			rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: annotation %s='%s' is not a positive integer",
				       g->id, ANN("maxPods"), pods);
		else
			rc = add_quantity(cap, alloc, "pods", pods ? pods : "110", ANN("maxPods"), g, err);
	}
	if(!rc && gcount) {
		prd_err pe = {0};
		if(str_to_int64(gcount, &n) || n < 0)
			rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: annotation %s='%s' is not a non-negative integer",
				       g->id, ANN("gpu-count"), gcount);
		else if(gtype && sel_validate_key(gtype, &pe))
			rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: annotation %s='%s' is not a resource name: %s",
				       g->id, ANN("gpu-type"), gtype, pe.msg);
		else if(n > 0)
			rc = add_quantity(cap, alloc, gtype ? gtype : "nvidia.com/gpu", gcount, ANN("gpu-count"), g, err);
	}
	if(!rc && ltext)
		rc = parse_labels(ltext, labels, g, err);
	if(!rc && ttext)
		rc = parse_taints(ttext, taints, g, err);
	if(json_object_array_length(taints))
		json_object_object_add(spec, "taints", json_object_get(taints));
	json_object_put(taints);
	json_object_object_add(ready, "type", json_object_new_string("Ready"));
	json_object_object_add(ready, "status", json_object_new_string("True"));
	json_object_array_add(conds, ready);
	json_object_object_add(status, "conditions", conds);
	if(!rc) {
		*node_json = capi_strdup(
			json_object_to_json_string_ext(node, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
		if(!*node_json)
			rc = capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	json_object_put(node);
	return rc;
}

/* A copy of one of the group's Nodes with what is particular to that
 * node (identity, addresses, images, conditions but Ready) removed. */
static int from_node(capi *c, const capi_group *g, char **node_json, prd_cloud_error *err)
{
	json_object *machines = NULL, *node = NULL, *copy, *md, *status;
	size_t i, n;
	int rc = capi_group_machines(c, g, false, &machines, err);
	if(rc)
		return rc;
	n = json_object_array_length(machines);
	for(i = 0; i < n && !node && !rc; i++) {
		const char *name = capi_jstr(capi_jobj(capi_jobj(json_object_array_get_idx(machines, i), "status"), "nodeRef"),
					     "name");
		char path[400];
		if(!name)
			continue;
		snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
		rc = capi_wrequest(c, "GET", path, NULL, NULL, &node, NULL, err);
		if(rc == PRD_CLOUD_ENOTFOUND)
			rc = 0;
	}
	json_object_put(machines);
	if(rc)
		return rc;
	if(!node)
		return capi_fail(err, PRD_CLOUD_ENOTFOUND,
				 "clusterapi: %s has no Node to copy and no scale-from-zero annotations: set %s and %s",
				 g->id, ANN("cpu"), ANN("memory"));
	copy = json_object_new_object();
	md = json_object_new_object();
	status = json_object_new_object();
	json_object_object_add(copy, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(copy, "kind", json_object_new_string("Node"));
	json_object_object_add(copy, "metadata", md);
	{
		char name[700];
		json_object *labels = NULL;
		snprintf(name, sizeof(name), "template-node-for-%s-%s", g->ns, g->name);
		json_object_object_add(md, "name", json_object_new_string(name));
		json_object_deep_copy(json_object_object_get(capi_jobj(node, "metadata"), "labels"), &labels, NULL);
		if(labels && json_object_is_type(labels, json_type_object))
			json_object_object_add(labels, "kubernetes.io/hostname", json_object_new_string(name));
		json_object_object_add(md, "labels", labels);
	}
	{
		json_object *taints = NULL, *spec = json_object_new_object();
		json_object_deep_copy(json_object_object_get(capi_jobj(node, "spec"), "taints"), &taints, NULL);
		if(taints)
			json_object_object_add(spec, "taints", taints);
		json_object_object_add(copy, "spec", spec);
	}
	{
		json_object *cap = NULL, *alloc = NULL, *conds = json_object_new_array(), *ready = json_object_new_object();
		json_object_deep_copy(json_object_object_get(capi_jobj(node, "status"), "capacity"), &cap, NULL);
		json_object_deep_copy(json_object_object_get(capi_jobj(node, "status"), "allocatable"), &alloc, NULL);
		json_object_object_add(status, "capacity", cap);
		json_object_object_add(status, "allocatable", alloc);
		json_object_object_add(ready, "type", json_object_new_string("Ready"));
		json_object_object_add(ready, "status", json_object_new_string("True"));
		json_object_array_add(conds, ready);
		json_object_object_add(status, "conditions", conds);
	}
	json_object_object_add(copy, "status", status);
	*node_json = capi_strdup(json_object_to_json_string_ext(copy, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(copy);
	json_object_put(node);
	return *node_json ? 0 : capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
}

/* The plural of an infrastructure template kind, as Cluster API derives
 * CRD names (lower case; -s -> -ses, consonant+y -> -ies, else -s). */
static void kind_plural(const char *kind, char *out, size_t n)
{
	size_t i, len = strlen(kind);
	for(i = 0; i < len && i + 4 < n; i++)
		out[i] = (char)(kind[i] >= 'A' && kind[i] <= 'Z' ? kind[i] - 'A' + 'a' : kind[i]);
	out[i] = '\0';
	if(i && out[i - 1] == 's')
		snprintf(out + i, n - i, "es");
	else if(i > 1 && out[i - 1] == 'y' && !strchr("aeiou", out[i - 2]))
		snprintf(out + i - 1, n - i + 1, "ies");
	else
		snprintf(out + i, n - i, "s");
}

/* GET the group's infrastructure machine template (spec.template.spec.
 * infrastructureRef: v1beta2's apiGroup, or v1beta1's apiVersion; for an
 * apiGroup the served version is asked of discovery). *tpl is NULL when the
 * group names none or it is not there. */
static int infra_template(capi *c, const capi_group *g, json_object **tpl, prd_cloud_error *err)
{
	json_object *ref = capi_jobj(capi_jobj(capi_jobj(capi_jobj(g->obj, "spec"), "template"), "spec"),
				     "infrastructureRef");
	const char *kind = capi_jstr(ref, "kind"), *name = capi_jstr(ref, "name");
	const char *gv = capi_jstr(ref, "apiVersion"), *grp = capi_jstr(ref, "apiGroup");
	char path[900], plural[128], ver[256] = "";
	json_object *disc = NULL;
	int rc;
	*tpl = NULL;
	if(!kind || !name || (!gv && !grp))
		return 0;
	if(!gv && c->colls && capi_jstr(c->disco, grp)) {
		/* Watching: the group's version as discovery said it before (a
		 * template the watch cannot find asks discovery again). */
		snprintf(ver, sizeof(ver), "%s", capi_jstr(c->disco, grp));
		gv = ver;
	}
	if(!gv) {
		snprintf(path, sizeof(path), "/apis/%s", grp);
		rc = capi_request(c, "GET", path, NULL, NULL, &disc, NULL, err);
		if(rc)
			return rc == PRD_CLOUD_ENOTFOUND ? 0 : rc;
		gv = capi_jstr(capi_jobj(disc, "preferredVersion"), "groupVersion");
		snprintf(ver, sizeof(ver), "%s", gv ? gv : "");
		json_object_put(disc);
		if(!ver[0])
			return 0;
		gv = ver;
		if(c->colls && (c->disco || (c->disco = json_object_new_object())))
			json_object_object_add(c->disco, grp, json_object_new_string(ver));
	}
	kind_plural(kind, plural, sizeof(plural));
	rc = capi_watch_get(c, gv, g->ns, plural, g->ns, name, tpl);
	if(rc == 0)
		return 0;
	if(rc == PRD_CLOUD_ENOTFOUND && c->disco)
		json_object_object_del(c->disco, grp ? grp : "");
	snprintf(path, sizeof(path), "/apis/%s/namespaces/%s/%s/%s", gv, g->ns, plural, name);
	rc = capi_request(c, "GET", path, NULL, NULL, tpl, NULL, err);
	return rc == PRD_CLOUD_ENOTFOUND ? 0 : rc;
}

/* Scale-from-zero annotations as the template's status publishes them
 * (capacity, nodeInfo), overlaid with the group's own annotations, which
 * win. A new object (caller puts), or NULL when the template publishes no
 * cpu and memory. */
static json_object *merged_capacity(json_object *tpl, json_object *ann)
{
	json_object *st = capi_jobj(tpl, "status"), *cap = capi_jobj(st, "capacity"), *info = capi_jobj(st, "nodeInfo");
	json_object *out;
	const char *arch = capi_jstr(info, "architecture"), *os = capi_jstr(info, "operatingSystem");
	const char *own = capi_jstr(ann, ANN("labels"));
	char labels[2048] = "";
	if(!capi_jstr(cap, "cpu") || !capi_jstr(cap, "memory") || !(out = json_object_new_object()))
		return NULL;
	json_object_object_foreach(cap, k, v) {
		const char *key = !strcmp(k, "cpu")		  ? ANN("cpu")
				  : !strcmp(k, "memory")	  ? ANN("memory")
				  : !strcmp(k, "ephemeral-storage") ? ANN("ephemeral-disk")
				  : !strcmp(k, "pods")		  ? ANN("maxPods")
				  : !strcmp(k, "nvidia.com/gpu")  ? ANN("gpu-count")
								  : NULL;
		if(key && json_object_is_type(v, json_type_string))
			json_object_object_add(out, key, json_object_get(v));
	}
	snprintf(labels, sizeof(labels), "%s%s%s%s%s%s%s", arch ? "kubernetes.io/arch=" : "", arch ? arch : "",
		 arch && os ? "," : "", os ? "kubernetes.io/os=" : "", os ? os : "", (arch || os) && own ? "," : "",
		 own ? own : "");
	if(labels[0])
		json_object_object_add(out, ANN("labels"), json_object_new_string(labels));
	json_object_object_foreach(ann, ak, av) {
		if(!strncmp(ak, CAPI_CAPACITY_PREFIX, strlen(CAPI_CAPACITY_PREFIX)) && strcmp(ak, ANN("labels")))
			json_object_object_add(out, ak, json_object_get(av));
	}
	return out;
}

/* allow_node: without scale-from-zero data, copy one of the group's
 * Nodes. */
static int template_node(capi *c, const capi_group *g, bool allow_node, char **node_json, prd_cloud_error *err)
{
	json_object *ann = capi_jobj(capi_jobj(g->obj, "metadata"), "annotations"), *tpl = NULL, *merged = NULL;
	json_object *ref = capi_jobj(capi_jobj(capi_jobj(capi_jobj(g->obj, "spec"), "template"), "spec"),
				     "infrastructureRef");
	const char *kind = capi_jstr(ref, "kind"), *name = capi_jstr(ref, "name");
	bool have_tpl;
	int rc;
	*node_json = NULL;
	rc = infra_template(c, g, &tpl, err);
	if(rc)
		return rc;
	have_tpl = tpl != NULL;
	merged = tpl ? merged_capacity(tpl, ann) : NULL;
	json_object_put(tpl);
	if(merged) {
		rc = from_annotations(g, merged, node_json, err);
		json_object_put(merged);
		return rc;
	}
	if(capi_jstr(ann, ANN("cpu")) || capi_jstr(ann, ANN("memory")))
		return from_annotations(g, ann, node_json, err);
	rc = allow_node ? from_node(c, g, node_json, err) : PRD_CLOUD_ENOTFOUND;
	/* Say every source that was tried: on CAPA or CAPG the operator most
	 * likely expected the infrastructure template to publish capacity. */
	if(rc == PRD_CLOUD_ENOTFOUND) {
		char what[600];
		if(!kind || !name)
			snprintf(what, sizeof(what), "its machine template names no infrastructure template");
		else if(have_tpl)
			snprintf(what, sizeof(what),
				 "its infrastructure template %s %s publishes no cpu and memory in status.capacity "
				 "(Cluster API's autoscaling contract)",
				 kind, name);
		else
			snprintf(what, sizeof(what), "its infrastructure template %s %s is not there (or not readable)",
				 kind, name);
		rc = capi_fail(err, rc,
			       "clusterapi: %s has no template node: %s, %sno scale-from-zero annotations (set %s and %s)",
			       g->id, what, allow_node ? "it has no Node to copy and " : "", ANN("cpu"), ANN("memory"));
	}
	return rc;
}

int capi_template_node(capi *c, const capi_group *g, char **node_json, prd_cloud_error *err)
{
	return template_node(c, g, true, node_json, err);
}

int capi_template_zero(capi *c, const capi_group *g, char **node_json, prd_cloud_error *err)
{
	return template_node(c, g, false, node_json, err);
}

/* The objects kubectl-create-provisioningrequest creates. Keys are added in
 * the order kubectl prints them (apiVersion, kind, metadata, spec), since
 * json-c keeps insertion order and -o yaml/json show it. */
#include "plugin/plugin.h"

#include <stdbool.h>
#include <stdio.h>

/* json_object_object_add that remembers whether every value existed, so a
 * builder checks allocation once at the end. */
static void put(json_object *o, const char *key, json_object *v, bool *ok)
{
	if(!o || !v || json_object_object_add(o, key, v) != 0) {
		json_object_put(v);
		*ok = false;
	}
}

static void push(json_object *a, json_object *v, bool *ok)
{
	if(!a || !v || json_object_array_add(a, v) != 0) {
		json_object_put(v);
		*ok = false;
	}
}

static json_object *str(const char *s)
{
	return json_object_new_string(s);
}

static json_object *metadata(const char *name, const char *ns, bool *ok)
{
	json_object *m = json_object_new_object();
	put(m, "name", str(name), ok);
	if(ns)
		put(m, "namespace", str(ns), ok);
	return m;
}

/* A JSON object of the KEY=VALUE pairs (n > 0); NULL and *ok false when
 * out of memory. */
static json_object *pairs(const plug_param *kv, size_t n, bool *ok)
{
	json_object *m = json_object_new_object();
	size_t i;
	if(!m) {
		*ok = false;
		return NULL;
	}
	for(i = 0; i < n; i++)
		put(m, kv[i].key, str(kv[i].value), ok);
	return m;
}

json_object *plug_build_request(const plug_opts *o, const char *ns)
{
	json_object *obj = json_object_new_object(), *spec = json_object_new_object(),
		    *sets = json_object_new_array(), *meta;
	bool ok = obj && spec && sets;
	size_t i;

	put(obj, "apiVersion", str("autoscaling.x-k8s.io/v1"), &ok);
	put(obj, "kind", str("ProvisioningRequest"), &ok);
	meta = metadata(o->name, ns, &ok);
	if(o->n_labels)
		put(meta, "labels", pairs(o->labels, o->n_labels, &ok), &ok);
	if(o->n_annotations)
		put(meta, "annotations", pairs(o->annotations, o->n_annotations, &ok), &ok);
	put(obj, "metadata", meta, &ok);
	put(spec, "provisioningClassName", str(o->class_name), &ok);
	for(i = 0; i < o->n_podsets; i++) {
		json_object *ps = json_object_new_object(), *ref = json_object_new_object();
		put(ref, "name", str(o->podsets[i].template_name), &ok);
		put(ps, "podTemplateRef", ref, &ok);
		put(ps, "count", json_object_new_int(o->podsets[i].count), &ok);
		push(sets, ps, &ok);
	}
	put(spec, "podSets", sets, &ok);
	sets = NULL;
	if(o->n_params) {
		json_object *params = json_object_new_object();
		for(i = 0; i < o->n_params; i++)
			put(params, o->params[i].key, str(o->params[i].value), &ok);
		put(spec, "parameters", params, &ok);
	}
	put(obj, "spec", spec, &ok);
	spec = NULL;
	if(!ok) {
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

json_object *plug_build_template(const plug_opts *o, const char *ns)
{
	json_object *obj = json_object_new_object(), *tmpl = json_object_new_object(),
		    *pspec = json_object_new_object(), *containers = json_object_new_array(),
		    *c = json_object_new_object(), *res = json_object_new_object(),
		    *req = json_object_new_object();
	bool ok = obj && tmpl && pspec && containers && c && res && req;
	const char *name = o->n_podsets ? o->podsets[0].template_name : o->name;

	put(obj, "apiVersion", str("v1"), &ok);
	put(obj, "kind", str("PodTemplate"), &ok);
	put(obj, "metadata", metadata(name, ns, &ok), &ok);
	put(c, "name", str("main"), &ok);
	put(c, "image", str(o->image ? o->image : PLUG_DEFAULT_IMAGE), &ok);
	if(o->cpu)
		put(req, "cpu", str(o->cpu), &ok);
	if(o->memory)
		put(req, "memory", str(o->memory), &ok);
	if(o->gpu) {
		json_object *lim = json_object_new_object(), *tols = json_object_new_array(),
			    *tol = json_object_new_object();
		char n[24];
		snprintf(n, sizeof(n), "%lld", (long long)o->gpu);
		put(req, PLUG_GPU_RESOURCE, str(n), &ok);
		put(lim, PLUG_GPU_RESOURCE, str(n), &ok);
		put(res, "requests", req, &ok);
		req = NULL;
		put(res, "limits", lim, &ok);
		put(tol, "key", str(PLUG_GPU_RESOURCE), &ok);
		put(tol, "operator", str("Exists"), &ok);
		put(tol, "effect", str("NoSchedule"), &ok);
		push(tols, tol, &ok);
		put(c, "resources", res, &ok);
		res = NULL;
		push(containers, c, &ok);
		c = NULL;
		put(pspec, "containers", containers, &ok);
		containers = NULL;
		put(pspec, "tolerations", tols, &ok);
	} else {
		if(json_object_object_length(req))
			put(res, "requests", req, &ok);
		else
			json_object_put(req);
		req = NULL;
		if(json_object_object_length(res))
			put(c, "resources", res, &ok);
		else
			json_object_put(res);
		res = NULL;
		push(containers, c, &ok);
		c = NULL;
		put(pspec, "containers", containers, &ok);
		containers = NULL;
	}
	put(tmpl, "spec", pspec, &ok);
	pspec = NULL;
	put(obj, "template", tmpl, &ok);
	tmpl = NULL;
	if(!ok) {
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

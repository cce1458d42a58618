/* Reading a ProvisioningClass and merging its parameters (pclass.h). */
#include "classes/pclass.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

void pr_pclass_clear(pr_pclass *p)
{
	size_t i;
	if(!p)
		return;
	free(p->name);
	free(p->uid);
	free(p->rv);
	free(p->target);
	free(p->description);
	for(i = 0; i < p->nparams; i++) {
		free((char *)(uintptr_t)p->params[i].key);
		free((char *)(uintptr_t)p->params[i].value);
	}
	free(p->params);
	for(i = 0; i < p->nfixed; i++)
		free(p->fixed[i]);
	free(p->fixed);
	sel_free(p->allowed);
	free(p->allowed_text);
	free(p->error);
	memset(p, 0, sizeof(*p));
}

void pr_pclass_refuse(pr_pclass *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	if(p->error)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* (Out of memory leaves error NULL; the caller's next allocation
	 * check reports it.) */
	p->error = str_dup(msg);
}

static int kv_cmp(const void *a, const void *b)
{
	return strcmp(((const kube_kv *)a)->key, ((const kube_kv *)b)->key);
}

static int read_params(pr_pclass *p, json_object *o)
{
	size_t n = 0;
	if(!o)
		return 0;
	if(!json_object_is_type(o, json_type_object)) {
		pr_pclass_refuse(p, "spec.parameters must be a map of strings");
		return 0;
	}
	if(json_object_object_length(o) > PR_PCLASS_MAX_PARAMS) {
		pr_pclass_refuse(p, "spec.parameters has %d entries; at most %d", json_object_object_length(o),
				 PR_PCLASS_MAX_PARAMS);
		return 0;
	}
	if(!(p->params = calloc((size_t)json_object_object_length(o) + 1, sizeof(*p->params))))
		return PRD_ENOMEM;
	json_object_object_foreach(o, key, val)
	{
		const char *v;
		if(!json_object_is_type(val, json_type_string)) {
			pr_pclass_refuse(p, "spec.parameters.%.100s must be a string", key);
			return 0;
		}
		v = json_object_get_string(val);
		if(strlen(v) > PR_PCLASS_MAX_VALUE) {
			pr_pclass_refuse(p, "spec.parameters.%.100s is longer than %d characters", key, PR_PCLASS_MAX_VALUE);
			return 0;
		}
		/* The instance that serves a request is chosen before its class is
		 * looked at (and by instances that may not read this object). */
		if(!strcmp(key, "processorInstance")) {
			pr_pclass_refuse(p, "spec.parameters.processorInstance cannot be given by a class: it chooses the "
					    "provreqd instance, which each request names itself");
			return 0;
		}
		/* (Counted at once: a refusal further on still frees it.) */
		p->params[n].key = str_dup(key);
		p->params[n].value = str_dup(v);
		p->nparams = ++n;
		if(!p->params[n - 1].key || !p->params[n - 1].value)
			return PRD_ENOMEM;
	}
	qsort(p->params, n, sizeof(*p->params), kv_cmp);
	return 0;
}

static bool has_param(const pr_pclass *p, const char *key)
{
	size_t i;
	for(i = 0; i < p->nparams; i++)
		if(!strcmp(p->params[i].key, key))
			return true;
	return false;
}

static int read_fixed(pr_pclass *p, json_object *o)
{
	size_t i, len;
	if(!o)
		return 0;
	if(!json_object_is_type(o, json_type_array)) {
		pr_pclass_refuse(p, "spec.fixedParameters must be a list of parameter names");
		return 0;
	}
	len = json_object_array_length(o);
	if(!(p->fixed = calloc(len + 1, sizeof(*p->fixed))))
		return PRD_ENOMEM;
	for(i = 0; i < len; i++) {
		json_object *v = json_object_array_get_idx(o, i);
		const char *s;
		if(!v || !json_object_is_type(v, json_type_string)) {
			pr_pclass_refuse(p, "spec.fixedParameters[%zu] must be a string", i);
			return 0;
		}
		s = json_object_get_string(v);
		/* A fixed key without a value would fix nothing, which is not what
		 * its author meant. */
		if(!has_param(p, s)) {
			pr_pclass_refuse(p, "spec.fixedParameters names %.100s, which spec.parameters does not set", s);
			return 0;
		}
		if(!(p->fixed[p->nfixed] = str_dup(s)))
			return PRD_ENOMEM;
		p->nfixed++;
	}
	return 0;
}

static int read_selector(pr_pclass *p, json_object *o)
{
	prd_err e;
	int rc;
	if(!o)
		return 0;
	if(!json_object_is_type(o, json_type_object)) {
		pr_pclass_refuse(p, "spec.allowedNamespaces must be a label selector (matchLabels, matchExpressions)");
		return 0;
	}
	if((rc = sel_from_json(o, &p->allowed, &e))) {
		if(rc == PRD_ENOMEM)
			return rc;
		pr_pclass_refuse(p, "spec.allowedNamespaces: %s", e.msg);
		return 0;
	}
	if(!(p->allowed_text = sel_to_string(p->allowed)))
		return PRD_ENOMEM;
	return 0;
}

int pr_pclass_parse(const kube_provclass *o, pr_pclass *out, prd_err *err)
{
	json_object *spec = o->spec, *v = NULL;
	int rc = 0;
	memset(out, 0, sizeof(*out));
	out->name = str_dup(o->meta.name);
	out->uid = str_dup(o->meta.uid ? o->meta.uid : "");
	out->rv = str_dup(o->meta.rv ? o->meta.rv : "");
	if(!out->name || !out->uid || !out->rv)
		goto oom;
	if(!spec || !json_object_is_type(spec, json_type_object)) {
		pr_pclass_refuse(out, "spec is missing");
		goto done;
	}
	if(!json_object_object_get_ex(spec, "provisioningClassName", &v) || !json_object_is_type(v, json_type_string)) {
		pr_pclass_refuse(out, "spec.provisioningClassName is required: the class provreqd serves it with");
		goto done;
	}
	if(!str_is_dns_subdomain(json_object_get_string(v)) || strlen(json_object_get_string(v)) > 253) {
		pr_pclass_refuse(out, "spec.provisioningClassName '%.100s' is not a DNS subdomain", json_object_get_string(v));
		goto done;
	}
	if(!(out->target = str_dup(json_object_get_string(v))))
		goto oom;
	if(json_object_object_get_ex(spec, "description", &v) && v) {
		if(!json_object_is_type(v, json_type_string))
			pr_pclass_refuse(out, "spec.description must be a string");
		else if(!(out->description = str_dup(json_object_get_string(v))))
			goto oom;
	}
	if((rc = read_params(out, json_object_object_get(spec, "parameters"))) ||
	   (rc = read_fixed(out, json_object_object_get(spec, "fixedParameters"))) ||
	   (rc = read_selector(out, json_object_object_get(spec, "allowedNamespaces"))))
		goto oom;
done:
	if(out->error) {
		free(out->target);
		out->target = NULL;
	}
	return 0;
oom:
	return prd_err_set(err, PRD_ENOMEM, "out of memory");
}

static bool is_fixed(const pr_pclass *p, const char *key)
{
	size_t i;
	for(i = 0; i < p->nfixed; i++)
		if(!strcmp(p->fixed[i], key))
			return true;
	return false;
}

int pr_pclass_merge(const pr_pclass *p, const kube_kv *req, size_t nreq, arena *ar, kube_kv **out, size_t *nout)
{
	kube_kv *v = arena_array(ar, p->nparams + nreq + 1, sizeof(*v));
	size_t n = 0, i, k;
	if(!v)
		return PRD_ENOMEM;
	for(i = 0; i < p->nparams; i++)
		v[n++] = p->params[i];
	for(i = 0; i < nreq; i++) {
		if(!req[i].key)
			continue;
		for(k = 0; k < n && strcmp(v[k].key, req[i].key); k++)
			;
		if(k < n && is_fixed(p, req[i].key))
			continue;
		v[k] = req[i];
		if(k == n)
			n++;
	}
	qsort(v, n, sizeof(*v), kv_cmp);
	*out = v;
	*nout = n;
	return 0;
}

bool pr_pclass_allows(const pr_pclass *p, const json_object *ns_labels)
{
	if(!p->allowed)
		return true;
	if(ns_labels)
		return sel_matches_json(p->allowed, ns_labels);
	/* A namespace without labels: matched against no labels. */
	return sel_matches_pairs(p->allowed, NULL, 0);
}

char *pr_pclass_params_json(const kube_kv *kv, size_t n)
{
	json_object *o = json_object_new_object();
	char *s = NULL;
	size_t i;
	if(!o)
		return NULL;
	for(i = 0; i < n; i++)
		json_object_object_add(o, kv[i].key, json_object_new_string(kv[i].value ? kv[i].value : ""));
	s = str_dup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

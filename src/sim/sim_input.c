/* The input of `provreqd simulate`: the cluster (files, a directory, a
 * `kubectl get ... -o yaml` dump), the --request what-if files, and the
 * cloud config's templateDir. Whatever is skipped is logged as a warning
 * naming it and saying why, so a dump with kinds simulate does not model
 * still loads and nothing disappears silently. */
#include "sim/sim.h"

#include "ops/log.h"
#include "util/str.h"
#include "util/yamljson.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SIM_MAX_FILE (64u << 20)

void sim_objs_init(sim_objs *o)
{
	o->objs = json_object_new_array();
	o->where = json_object_new_array();
}

void sim_objs_free(sim_objs *o)
{
	json_object_put(o->objs);
	json_object_put(o->where);
	o->objs = o->where = NULL;
}

static const char *jstr(json_object *o, const char *key)
{
	json_object *v = json_object_object_get(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static int add_obj(sim_objs *out, json_object *obj, const char *where)
{
	json_object *w = json_object_new_string(where);
	if(!w || !out->objs || !out->where)
		return PRD_ENOMEM;
	json_object_array_add(out->objs, json_object_get(obj));
	json_object_array_add(out->where, w);
	return 0;
}

/* The documents of one file: JSON files through json-c (JSON with tab
 * indentation is not YAML), the rest through the YAML reader. */
static int parse_file(const char *path, json_object **docs, prd_err *err)
{
	char *data = NULL;
	size_t len = 0;
	int rc = yj_read_file(path, SIM_MAX_FILE, &data, &len, err);
	if(rc)
		return rc;
	if(str_ends_with(path, ".json")) {
		json_tokener *tok = json_tokener_new();
		json_object *doc = tok ? json_tokener_parse_ex(tok, data, (int)len) : NULL;
		if(!tok)
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		else if(!doc)
			rc = prd_err_set(err, PRD_EINVAL, "%s: not JSON: %s at offset %zu", path,
					 json_tokener_error_desc(json_tokener_get_error(tok)),
					 (size_t)json_tokener_get_parse_end(tok));
		else if(!(*docs = json_object_new_array()))
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		else
			json_object_array_add(*docs, doc), doc = NULL;
		json_object_put(doc);
		if(tok)
			json_tokener_free(tok);
	} else {
		prd_err pe;
		rc = yj_parse_all(data, len, docs, &pe);
		if(rc)
			prd_err_set(err, rc, "%s: %s", path, pe.msg);
	}
	free(data);
	return rc;
}

/* "Kind ns/name" or "Kind name" of an object, for messages. */
static void obj_label(json_object *o, char *out, size_t n)
{
	json_object *md = json_object_object_get(o, "metadata");
	const char *kind = jstr(o, "kind"), *ns = jstr(md, "namespace"), *name = jstr(md, "name");
	snprintf(out, n, "%s %s%s%s", kind ? kind : "(no kind)", ns ? ns : "", ns ? "/" : "",
		 name ? name : jstr(md, "generateName") ? jstr(md, "generateName") : "(no name)");
}

/* Documents become objects; Lists (kind ending in "List" with items)
 * contribute their items. `strict` turns what would be skipped into an
 * error. */
static int collect(const char *path, json_object *docs, sim_objs *out, bool strict, prd_err *err)
{
	size_t d, i;
	for(d = 0; d < json_object_array_length(docs); d++) {
		json_object *doc = json_object_array_get_idx(docs, d), *items;
		const char *kind = jstr(doc, "kind");
		char where[600];
		int rc;
		if(!json_object_is_type(doc, json_type_object)) {
			if(strict)
				return prd_err_set(err, PRD_EINVAL, "%s document %zu: not a Kubernetes object (a mapping)",
						   path, d + 1);
			log_warn("simulate: document ignored: not a Kubernetes object (a mapping)", "file", path,
				 "document", LOGI(d + 1));
			continue;
		}
		items = json_object_object_get(doc, "items");
		if(kind && str_ends_with(kind, "List") && items && json_object_is_type(items, json_type_array)) {
			for(i = 0; i < json_object_array_length(items); i++) {
				json_object *it = json_object_array_get_idx(items, i);
				snprintf(where, sizeof(where), "%s document %zu item %zu", path, d + 1, i + 1);
				if(!json_object_is_type(it, json_type_object)) {
					if(strict)
						return prd_err_set(err, PRD_EINVAL, "%s: not a Kubernetes object (a mapping)",
								   where);
					log_warn("simulate: list item ignored: not a Kubernetes object (a mapping)",
						 "where", where);
					continue;
				}
				if((rc = add_obj(out, it, where)))
					return prd_err_set(err, rc, "out of memory");
			}
			continue;
		}
		snprintf(where, sizeof(where), "%s document %zu", path, d + 1);
		if((rc = add_obj(out, doc, where)))
			return prd_err_set(err, rc, "out of memory");
	}
	return 0;
}

static int read_one(const char *path, sim_objs *out, bool strict, prd_err *err)
{
	json_object *docs = NULL;
	int rc = parse_file(path, &docs, err);
	if(!rc)
		rc = collect(path, docs, out, strict, err);
	json_object_put(docs);
	return rc;
}

int sim_input_read(const char *path, sim_objs *out, prd_err *err)
{
	struct dirent **names = NULL;
	struct stat st;
	int n, i, rc = 0;

	if(stat(path, &st))
		return prd_err_set(err, PRD_ENOTFOUND, "--cluster %s: no such file or directory", path);
	if(!S_ISDIR(st.st_mode))
		return read_one(path, out, false, err);
	n = scandir(path, &names, NULL, alphasort);
	if(n < 0)
		return prd_err_set(err, PRD_EIO, "--cluster %s: cannot read the directory", path);
	for(i = 0; i < n; i++) {
		const char *nm = names[i]->d_name;
		char *fp = NULL;
		struct stat fst;
		if(!rc && strcmp(nm, ".") && strcmp(nm, "..") && strcmp(nm, "cloud-config.yaml")) {
			fp = str_printf("%s/%s", path, nm);
			if(!fp)
				rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
			else if(stat(fp, &fst) == 0 && S_ISDIR(fst.st_mode))
				log_warn("simulate: directory ignored: --cluster reads the files of one directory, "
					 "not its subdirectories", "path", fp);
			else if(str_ends_with(nm, ".yaml") || str_ends_with(nm, ".yml") || str_ends_with(nm, ".json"))
				rc = read_one(fp, out, false, err);
			else
				log_warn("simulate: file ignored: not .yaml, .yml or .json", "path", fp);
		}
		free(fp);
		free(names[i]);
	}
	free(names);
	return rc;
}

/* Create one object; a refusal is returned in err (with the store's
 * message), the object untouched. */
static int create_one(memapi *m, json_object *o, prd_err *err)
{
	json_object *one = json_object_new_array();
	int rc;
	if(!one)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	json_object_array_add(one, json_object_get(o));
	rc = memapi_load(m, one, err);
	json_object_put(one);
	return rc;
}

/* Why an object cannot be created, or NULL when it can be tried. */
static const char *unusable(memapi *m, json_object *o)
{
	json_object *md = json_object_object_get(o, "metadata");
	if(!jstr(o, "kind") || !jstr(o, "apiVersion"))
		return "no kind or apiVersion";
	if(!memapi_resource_for_kind(m, jstr(o, "apiVersion"), jstr(o, "kind")))
		return "kind not simulated (simulate models Nodes, Pods, PodTemplates, ProvisioningRequests, "
		       "ProvisioningClasses, Namespaces, ResourceQuotas, ConfigMaps, Events, Leases, ResourcePools, and "
		       "resource.k8s.io/v1 ResourceSlices, DeviceClasses, ResourceClaimTemplates and ResourceClaims)";
	if(!json_object_is_type(md, json_type_object) || (!jstr(md, "name") && !jstr(md, "generateName")))
		return "no metadata.name";
	return NULL;
}

int sim_input_load(memapi *m, const sim_objs *in, size_t *loaded, prd_err *err)
{
	size_t i;
	*loaded = 0;
	for(i = 0; i < json_object_array_length(in->objs); i++) {
		json_object *o = json_object_array_get_idx(in->objs, i);
		const char *where = json_object_get_string(json_object_array_get_idx(in->where, i));
		const char *why = unusable(m, o);
		char label[400];
		prd_err e;
		int rc;
		obj_label(o, label, sizeof(label));
		if(why) {
			log_warn("simulate: object ignored", "object", label, "where", where, "reason", why);
			continue;
		}
		rc = create_one(m, o, &e);
		if(rc == PRD_ENOMEM)
			return prd_err_set(err, rc, "out of memory");
		if(rc) {
			log_warn("simulate: object ignored", "object", label, "where", where, "reason", e.msg);
			continue;
		}
		(*loaded)++;
	}
	return 0;
}

/* The CRD's (and the apiserver's object name) pattern:
 * [a-z0-9]([-a-z0-9]*[a-z0-9])? parts joined by dots, at most 253. */
static bool subdomain_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0, i;
	if(n == 0 || n > 253)
		return false;
	for(i = 0; i < n; i++) {
		char c = s[i], prev = i ? s[i - 1] : '.', next = s[i + 1];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if(c == '.' && (prev == '.' || prev == '-' || next == '\0' || next == '-'))
			return false;
		if(c == '-' && (prev == '.' || next == '\0' || next == '.'))
			return false;
		if(!alnum && c != '.' && c != '-')
			return false;
	}
	return s[0] != '.';
}

#define SUBDOMAIN_RULE "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253"

/* spec.parameters as the CRD has it: a map of at most 100 strings of at
 * most 255 characters. NULL when it holds. */
static const char *params_problem(json_object *params, char *why, size_t n)
{
	if(!params || json_object_is_type(params, json_type_null))
		return NULL;
	if(!json_object_is_type(params, json_type_object))
		return "spec.parameters must be a map of strings";
	if(json_object_object_length(params) > 100) {
		snprintf(why, n, "spec.parameters has %d entries, at most 100 are allowed",
			 json_object_object_length(params));
		return why;
	}
	json_object_object_foreach(params, k, v) {
		if(!json_object_is_type(v, json_type_string)) {
			snprintf(why, n,
				 "spec.parameters.%s must be a string (quote it: %s: \"%s\"); the apiserver refuses "
				 "other types",
				 k, k, v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN) : "null");
			return why;
		}
		if(json_object_get_string_len(v) > 255) {
			snprintf(why, n, "spec.parameters.%s is %d characters long, at most 255 are allowed", k,
				 json_object_get_string_len(v));
			return why;
		}
	}
	return NULL;
}

/* One podSet; NULL when it holds. */
static const char *podset_problem(json_object *ps, size_t i, char *why, size_t n)
{
	json_object *ref = json_object_object_get(ps, "podTemplateRef"), *count = json_object_object_get(ps, "count");
	const char *name = jstr(ref, "name");
	int64_t c;
	if(!name) {
		snprintf(why, n, "spec.podSets[%zu].podTemplateRef.name is missing", i);
		return why;
	}
	if(!subdomain_ok(name)) {
		snprintf(why, n, "spec.podSets[%zu].podTemplateRef.name \"%.300s\" is not a valid name (" SUBDOMAIN_RULE ")",
			 i, name);
		return why;
	}
	c = json_object_is_type(count, json_type_int) ? json_object_get_int64(count) : 0;
	if(!json_object_is_type(count, json_type_int) || c < 1 || c > INT32_MAX) {
		snprintf(why, n, "spec.podSets[%zu].count must be an integer from 1 to 2147483647", i);
		return why;
	}
	return NULL;
}

/* What a what-if ProvisioningRequest needs before the controller sees it,
 * checked as the apiserver checks it against the CRD's schema; NULL when
 * it has it. */
static const char *request_problem(json_object *o, char *why, size_t n)
{
	json_object *spec = json_object_object_get(o, "spec"), *sets = json_object_object_get(spec, "podSets");
	const char *cls, *problem;
	size_t i;
	if(!json_object_is_type(spec, json_type_object))
		return "no spec";
	if(!(cls = jstr(spec, "provisioningClassName")))
		return "spec.provisioningClassName is missing (or not a string)";
	if(!subdomain_ok(cls)) {
		snprintf(why, n, "spec.provisioningClassName \"%.300s\" is not a valid class name (" SUBDOMAIN_RULE ")", cls);
		return why;
	}
	if(!json_object_is_type(sets, json_type_array) || json_object_array_length(sets) == 0)
		return "spec.podSets is missing or empty";
	if(json_object_array_length(sets) > 32) {
		snprintf(why, n, "spec.podSets has %zu items, at most 32 are allowed", json_object_array_length(sets));
		return why;
	}
	for(i = 0; i < json_object_array_length(sets); i++)
		if((problem = podset_problem(json_object_array_get_idx(sets, i), i, why, n)))
			return problem;
	return params_problem(json_object_object_get(spec, "parameters"), why, n);
}

/* metadata.name and .namespace as the apiserver checks them. */
static const char *meta_problem(json_object *md, char *why, size_t n)
{
	const char *name = jstr(md, "name"), *ns = jstr(md, "namespace");
	if(!name)
		return "no metadata.name";
	if(!subdomain_ok(name)) {
		snprintf(why, n, "metadata.name \"%.300s\" is not a valid name (" SUBDOMAIN_RULE ")", name);
		return why;
	}
	if(ns && !str_is_dns_label(ns)) {
		snprintf(why, n, "metadata.namespace \"%.300s\" is not a valid namespace (lowercase letters, digits and "
			 "'-', starting and ending with a letter or digit, at most 63)", ns);
		return why;
	}
	return NULL;
}

int sim_requests_read(const char *path, sim_objs *out, prd_err *err)
{
	size_t first = json_object_array_length(out->objs), i;
	int rc = read_one(path, out, true, err);
	for(i = first; !rc && i < json_object_array_length(out->objs); i++) {
		json_object *o = json_object_array_get_idx(out->objs, i), *md = json_object_object_get(o, "metadata");
		const char *where = json_object_get_string(json_object_array_get_idx(out->where, i));
		const char *kind = jstr(o, "kind"), *problem = NULL;
		char label[400], pb[512];
		obj_label(o, label, sizeof(label));
		if(!kind || (strcmp(kind, "ProvisioningRequest") && strcmp(kind, "PodTemplate")))
			problem = "only ProvisioningRequests and PodTemplates belong in a --request file";
		else if(!jstr(o, "apiVersion"))
			problem = "no apiVersion";
		else
			problem = meta_problem(md, pb, sizeof(pb));
		if(!problem && !strcmp(kind, "ProvisioningRequest"))
			problem = request_problem(o, pb, sizeof(pb));
		if(problem)
			rc = prd_err_set(err, PRD_EINVAL, "%s (%s): %s", where, label, problem);
	}
	if(!rc && json_object_array_length(out->objs) == first)
		rc = prd_err_set(err, PRD_EINVAL, "--request %s: no ProvisioningRequest or PodTemplate in it", path);
	return rc;
}

int sim_requests_load(memapi *m, const sim_objs *in, prd_err *err)
{
	size_t i;
	int rc = 0;
	for(i = 0; !rc && i < json_object_array_length(in->objs); i++) {
		json_object *o = json_object_array_get_idx(in->objs, i);
		const char *where = json_object_get_string(json_object_array_get_idx(in->where, i));
		char label[400];
		prd_err e;
		obj_label(o, label, sizeof(label));
		if(!memapi_resource_for_kind(m, jstr(o, "apiVersion"), jstr(o, "kind")))
			return prd_err_set(err, PRD_EINVAL, "%s (%s): unknown apiVersion \"%s\"", where, label,
					   jstr(o, "apiVersion"));
		if((rc = create_one(m, o, &e)))
			rc = prd_err_set(err, rc, "%s (%s): %s%s", where, label, e.msg,
					 rc == PRD_EEXIST ? " (the cluster input has it already)" : "");
	}
	/* Every podTemplateRef must name a PodTemplate that now exists. */
	for(i = 0; !rc && i < json_object_array_length(in->objs); i++) {
		json_object *o = json_object_array_get_idx(in->objs, i), *md = json_object_object_get(o, "metadata");
		json_object *sets = json_object_object_get(json_object_object_get(o, "spec"), "podSets");
		const char *ns = jstr(md, "namespace") ? jstr(md, "namespace") : "default";
		size_t k;
		if(strcmp(jstr(o, "kind"), "ProvisioningRequest"))
			continue;
		for(k = 0; !rc && k < json_object_array_length(sets); k++) {
			const char *tn = jstr(json_object_object_get(json_object_array_get_idx(sets, k), "podTemplateRef"),
					      "name");
			char *path = str_printf("/api/v1/namespaces/%s/podtemplates/%s", ns, tn);
			char *resp = NULL;
			size_t rl;
			long status = 0;
			if(!path)
				return prd_err_set(err, PRD_ENOMEM, "out of memory");
			if(memapi_request(m, "GET", path, NULL, NULL, 0, &status, &resp, &rl) && status == 404)
				rc = prd_err_set(err, PRD_EINVAL,
						 "%s (ProvisioningRequest %s/%s): podSets[%zu] uses PodTemplate %s/%s, "
						 "which is neither in the --request files nor in the cluster input",
						 json_object_get_string(json_object_array_get_idx(in->where, i)), ns,
						 jstr(md, "name"), k, ns, tn);
			free(resp);
			free(path);
		}
	}
	return rc;
}

int sim_cloud_config_resolve(const char *cfg_path, const char *text, char **out, prd_err *err)
{
	json_object *doc = NULL;
	const char *td, *slash = strrchr(cfg_path, '/');
	prd_err pe;
	int rc = 0;

	*out = NULL;
	if(text && yj_parse_one(text, strlen(text), &doc, &pe) == 0 && json_object_is_type(doc, json_type_object) &&
	   (td = jstr(doc, "templateDir")) != NULL && td[0] != '/' && slash) {
		char *abs = str_printf("%.*s/%s", (int)(slash - cfg_path), cfg_path, td);
		if(!abs) {
			rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		} else {
			json_object_object_add(doc, "templateDir", json_object_new_string(abs));
			*out = str_dup(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN));
			free(abs);
		}
	} else if(text) {
		*out = str_dup(text);
	}
	json_object_put(doc);
	if(!rc && text && !*out)
		rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
	return rc;
}

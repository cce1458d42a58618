/* The in-memory API's object validation: the rules kube-apiserver applies
 * to the kinds provreqd and simulate write, so that what the in-memory
 * store accepts a real apiserver accepts too (and "works in simulate"
 * means it works on a cluster). Answers the same 422 message shape the
 * apiserver does ("<field>: <Kind of error>: <detail>"). Rules mirrored:
 *  - metadata.labels: qualified-name keys, label values (every kind);
 *  - Node: spec.taints keys, effects, and unique by key and effect;
 *  - PodTemplate: template.spec.containers is required and non-empty;
 *  - ProvisioningRequest: the CRD's podSets limits (1..32, count 1..2^31-1,
 *    podTemplateRef.name set).
 * Not mirrored (docs/simulate.md lists them): resource quantities in pod
 * specs, annotations' total size, and every other kind's schema. */
#include "kube/memapi.h"

#include <json-c/json.h>

#include "util/str.h"

#include <stdio.h>
#include <string.h>

static const char *str_of(json_object *o, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : NULL;
}

static bool check_labels(json_object *obj, char *msg, size_t len)
{
	json_object *md, *lab;
	if(!json_object_object_get_ex(obj, "metadata", &md) || !json_object_object_get_ex(md, "labels", &lab) ||
	   !json_object_is_type(lab, json_type_object))
		return true;
	json_object_object_foreach(lab, k, v) {
		const char *val = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
		if(!str_is_qualified_name(k, strlen(k))) {
			snprintf(msg, len, "metadata.labels: Invalid value: \"%.200s\": name part must consist of "
				 "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
				 "character, with an optional DNS subdomain prefix and '/'", k);
			return false;
		}
		if(!str_is_label_value(val)) {
			snprintf(msg, len, "metadata.labels: Invalid value: \"%.200s\": a valid label must be an empty "
				 "string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
				 "an alphanumeric character (at most 63 characters)", val);
			return false;
		}
	}
	return true;
}

static bool check_node(json_object *obj, char *msg, size_t len)
{
	json_object *spec, *taints;
	size_t i, j, n;
	if(!json_object_object_get_ex(obj, "spec", &spec) || !json_object_object_get_ex(spec, "taints", &taints) ||
	   !json_object_is_type(taints, json_type_array))
		return true;
	n = json_object_array_length(taints);
	for(i = 0; i < n; i++) {
		json_object *t = json_object_array_get_idx(taints, i);
		const char *key = str_of(t, "key"), *eff = str_of(t, "effect"), *val = str_of(t, "value");
		if(!key || !str_is_qualified_name(key, strlen(key))) {
			snprintf(msg, len, "spec.taints[%zu].key: Invalid value: \"%.200s\": must be a qualified name", i,
				 key ? key : "");
			return false;
		}
		if(val && !str_is_label_value(val)) {
			snprintf(msg, len, "spec.taints[%zu].value: Invalid value: \"%.200s\": a valid label value", i,
				 val);
			return false;
		}
		if(!eff || (strcmp(eff, "NoSchedule") && strcmp(eff, "PreferNoSchedule") && strcmp(eff, "NoExecute"))) {
			snprintf(msg, len, "spec.taints[%zu].effect: Unsupported value: \"%.100s\": supported values: "
				 "\"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"", i, eff ? eff : "");
			return false;
		}
		for(j = 0; j < i; j++) {
			json_object *u = json_object_array_get_idx(taints, j);
			const char *uk = str_of(u, "key"), *ue = str_of(u, "effect");
			if(uk && ue && !strcmp(uk, key) && !strcmp(ue, eff)) {
				snprintf(msg, len, "spec.taints[%zu]: Duplicate value: {\"effect\":\"%s\",\"key\":\"%.200s\"}: "
					 "taints must be unique by key and effect pair", i, eff, key);
				return false;
			}
		}
	}
	return true;
}

static bool check_podtemplate(json_object *obj, char *msg, size_t len)
{
	json_object *tmpl, *spec, *cs;
	if(!json_object_object_get_ex(obj, "template", &tmpl) || !json_object_is_type(tmpl, json_type_object)) {
		snprintf(msg, len, "template.spec.containers: Required value");
		return false;
	}
	if(!json_object_object_get_ex(tmpl, "spec", &spec) || !json_object_object_get_ex(spec, "containers", &cs) ||
	   !json_object_is_type(cs, json_type_array) || json_object_array_length(cs) == 0) {
		snprintf(msg, len, "template.spec.containers: Required value");
		return false;
	}
	return true;
}

static bool check_provreq(json_object *obj, char *msg, size_t len)
{
	json_object *spec, *sets;
	size_t i, n;
	if(!json_object_object_get_ex(obj, "spec", &spec) || !json_object_object_get_ex(spec, "podSets", &sets) ||
	   !json_object_is_type(sets, json_type_array)) {
		snprintf(msg, len, "spec.podSets: Required value");
		return false;
	}
	n = json_object_array_length(sets);
	if(n < 1 || n > 32) {
		snprintf(msg, len, "spec.podSets: Invalid value: %zu: spec.podSets in body should have %s", n,
			 n < 1 ? "at least 1 items" : "at most 32 items");
		return false;
	}
	for(i = 0; i < n; i++) {
		json_object *ps = json_object_array_get_idx(sets, i), *cnt, *ref;
		int64_t c;
		if(!json_object_object_get_ex(ps, "count", &cnt) || !json_object_is_type(cnt, json_type_int)) {
			snprintf(msg, len, "spec.podSets[%zu].count: Required value", i);
			return false;
		}
		c = json_object_get_int64(cnt);
		if(c < 1 || c > 2147483647) {
			snprintf(msg, len, "spec.podSets[%zu].count: Invalid value: %lld: should be %s", i, (long long)c,
				 c < 1 ? "greater than or equal to 1" : "less than or equal to 2147483647");
			return false;
		}
		if(!json_object_object_get_ex(ps, "podTemplateRef", &ref) || !str_of(ref, "name") ||
		   !str_of(ref, "name")[0]) {
			snprintf(msg, len, "spec.podSets[%zu].podTemplateRef.name: Required value", i);
			return false;
		}
	}
	return true;
}

/* 0 when `obj`, about to be stored as `kind` (a create, or an update's
 * result), passes; else -1 with the apiserver's kind of message in `msg`.
 * Status-only writes of a ProvisioningRequest skip the spec rules (the
 * spec cannot change through /status). */
int memapi__validate(const char *kind, json_object *obj, bool status_only, char *msg, size_t len)
{
	if(!check_labels(obj, msg, len))
		return -1;
	if(!strcmp(kind, "Node"))
		return check_node(obj, msg, len) ? 0 : -1;
	if(!strcmp(kind, "PodTemplate"))
		return check_podtemplate(obj, msg, len) ? 0 : -1;
	if(!strcmp(kind, "ProvisioningRequest") && !status_only)
		return check_provreq(obj, msg, len) ? 0 : -1;
	return 0;
}

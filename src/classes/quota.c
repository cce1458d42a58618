/* Checking a request's pods against ResourceQuotas (quota.h). */
#include "classes/quota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/quantity.h"
#include "util/err.h"

static const char *jstr(const json_object *o, const char *key)
{
	json_object *v = NULL;
	if(!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

static json_object *jget(const json_object *o, const char *key)
{
	json_object *v = NULL;
	if(!o || !json_object_object_get_ex(o, key, &v))
		return NULL;
	return v;
}

/* Does any container (or init container) give requests or limits? */
static bool has_resources(const json_object *spec)
{
	static const char *const lists[2] = { "containers", "initContainers" };
	size_t l, i;
	for(l = 0; l < 2; l++) {
		json_object *cs = jget(spec, lists[l]);
		for(i = 0; cs && json_object_is_type(cs, json_type_array) && i < json_object_array_length(cs); i++) {
			json_object *r = jget(json_object_array_get_idx(cs, i), "resources");
			json_object *req = jget(r, "requests"), *lim = jget(r, "limits");
			if((req && json_object_object_length(req) > 0) || (lim && json_object_object_length(lim) > 0))
				return true;
		}
	}
	return false;
}

/* Does a pod (anti-)affinity term of the spec reach other namespaces? */
static bool cross_namespace(const json_object *spec)
{
	static const char *const kinds[2] = { "podAffinity", "podAntiAffinity" };
	static const char *const lists[2] = { "requiredDuringSchedulingIgnoredDuringExecution",
					      "preferredDuringSchedulingIgnoredDuringExecution" };
	json_object *aff = jget(spec, "affinity");
	size_t k, l, i;
	for(k = 0; k < 2; k++)
		for(l = 0; l < 2; l++) {
			json_object *terms = jget(jget(aff, kinds[k]), lists[l]);
			for(i = 0; terms && json_object_is_type(terms, json_type_array) && i < json_object_array_length(terms);
			    i++) {
				json_object *t = json_object_array_get_idx(terms, i);
				if(l == 1)
					t = jget(t, "podAffinityTerm");
				if(jget(t, "namespaceSelector") ||
				   (jget(t, "namespaces") && json_object_array_length(jget(t, "namespaces"))))
					return true;
			}
		}
	return false;
}

static bool scope_holds(const char *scope, const char *op, const json_object *values, const json_object *spec)
{
	const char *pc = jstr(spec, "priorityClassName");
	size_t i;
	if(!strcmp(scope, "Terminating"))
		return jget(spec, "activeDeadlineSeconds") != NULL;
	if(!strcmp(scope, "NotTerminating"))
		return jget(spec, "activeDeadlineSeconds") == NULL;
	if(!strcmp(scope, "BestEffort"))
		return !has_resources(spec);
	if(!strcmp(scope, "NotBestEffort"))
		return has_resources(spec);
	if(!strcmp(scope, "CrossNamespacePodAffinity"))
		return cross_namespace(spec);
	if(!strcmp(scope, "PriorityClass")) {
		bool in = false;
		if(!op || !strcmp(op, "Exists"))
			return pc != NULL;
		if(!strcmp(op, "DoesNotExist"))
			return pc == NULL;
		for(i = 0; pc && values && json_object_is_type(values, json_type_array) && i < json_object_array_length(values);
		    i++) {
			json_object *v = json_object_array_get_idx((json_object *)values, i);
			in |= v && json_object_is_type(v, json_type_string) && !strcmp(json_object_get_string(v), pc);
		}
		if(!strcmp(op, "In"))
			return in;
		if(!strcmp(op, "NotIn"))
			return !in;
		return false;
	}
	/* Scopes of other objects (VolumeAttributesClass: claims) select no
	 * pod. */
	return false;
}

bool pr_quota_applies(const json_object *quota, const json_object *pod_spec)
{
	json_object *spec = jget(quota, "spec"), *scopes = jget(spec, "scopes");
	json_object *exprs = jget(jget(spec, "scopeSelector"), "matchExpressions");
	size_t i;
	for(i = 0; scopes && json_object_is_type(scopes, json_type_array) && i < json_object_array_length(scopes); i++) {
		json_object *s = json_object_array_get_idx(scopes, i);
		if(!s || !json_object_is_type(s, json_type_string) ||
		   !scope_holds(json_object_get_string(s), NULL, NULL, pod_spec))
			return false;
	}
	for(i = 0; exprs && json_object_is_type(exprs, json_type_array) && i < json_object_array_length(exprs); i++) {
		json_object *e = json_object_array_get_idx(exprs, i);
		const char *scope = jstr(e, "scopeName"), *op = jstr(e, "operator");
		if(!scope || !op || !scope_holds(scope, op, jget(e, "values"), pod_spec))
			return false;
	}
	return true;
}

static const char *res_of_key(const char *key)
{
	if(!strcmp(key, "cpu") || !strcmp(key, "memory") || !strcmp(key, "ephemeral-storage"))
		return key;
	if(!strncmp(key, "requests.", 9) && key[9] && strcmp(key + 9, "storage"))
		return key + 9;
	return NULL;
}

static bool counted(const char *key)
{
	return !strcmp(key, "pods") || !strcmp(key, "count/pods") || res_of_key(key);
}

bool pr_quota_per_pod(const char *key, const sched_pod_spec *pod, int64_t *out)
{
	const char *res;
	size_t i;
	if(!strcmp(key, "pods") || !strcmp(key, "count/pods")) {
		*out = 1;
		return true;
	}
	if(!(res = res_of_key(key)))
		return false;
	*out = 0;
	for(i = 0; i < pod->n_requests; i++)
		if(pod->requests[i].name && !strcmp(pod->requests[i].name, res))
			*out = pod->requests[i].value;
	return true;
}

static bool is_cpu(const char *key)
{
	return !strcmp(key, "cpu") || !strcmp(key, "requests.cpu");
}

static bool binary_key(const char *key)
{
	const char *r = res_of_key(key);
	return r && (!strcmp(r, "memory") || !strcmp(r, "ephemeral-storage") || !strncmp(r, "hugepages-", 10));
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* A key's amount as a person reads it. */
static void show(const char *key, int64_t v, char *out, size_t len)
{
	char b[QTY_STR_MAX];
	qty q;
	if(is_cpu(key)) {
		if(v % 1000 == 0)
			snprintf(out, len, "%lld", (long long)(v / 1000));
		else
			snprintf(out, len, "%lldm", (long long)v);
		return;
	}
	if(binary_key(key) && v >= 0 && v < SCHED_QTY_MAX) {
		q = qty_from_int64(v, QTY_BINARY_SI);
		snprintf(out, len, "%s", qty_str(&q, b));
		return;
	}
	snprintf(out, len, "%lld", (long long)v);
}

/* A quantity of the quota in the units of key (0 when absent). */
static int value_of(const json_object *list, const char *key, int64_t *out)
{
	const char *s = jstr(list, key);
	qty q;
	*out = 0;
	if(!s)
		return 0;
	if(qty_parse(s, &q, NULL))
		return PRD_EINVAL;
	return is_cpu(key) ? qty_milli_value(&q, out) : qty_value(&q, out);
}

static int64_t amount(const char *key, const json_object *quota, const pr_quota_pods *p, size_t n)
{
	int64_t sum = 0, each;
	size_t i;
	for(i = 0; i < n; i++)
		if(p[i].pod && pr_quota_applies(quota, p[i].spec) && pr_quota_per_pod(key, p[i].pod, &each))
			sum = sat_add(sum, sat_mul(each, p[i].count));
	return sum;
}

static void name_quota(const char *name, char *out, size_t len)
{
	/* Capsule's pools provision the namespace's bound claims as this. */
	if(!strncmp(name, "capsule-pool-", 13) && name[13])
		snprintf(out, len, "ResourceQuota %s (the claims of Capsule ResourcePool %s in this namespace)", name,
			 name + 13);
	else
		snprintf(out, len, "ResourceQuota %s", name);
}

int pr_quota_check(const json_object *quotas, const pr_quota_pods *ask, size_t nask, const pr_quota_pods *held,
		   size_t nheld, char *msg, size_t len)
{
	size_t i;
	for(i = 0; quotas && json_object_is_type(quotas, json_type_array) && i < json_object_array_length(quotas); i++) {
		json_object *rq = json_object_array_get_idx(quotas, i), *status = jget(rq, "status");
		json_object *hard = jget(status, "hard") ? jget(status, "hard") : jget(jget(rq, "spec"), "hard");
		json_object *used = jget(status, "used");
		const char *name = jstr(jget(rq, "metadata"), "name");
		char who[300];
		name_quota(name ? name : "?", who, sizeof(who));
		if(!hard || !json_object_is_type(hard, json_type_object))
			continue;
		json_object_object_foreach(hard, key, hv)
		{
			int64_t h, u, want, have, free_;
			char a[64], f[64], hs[64], us[64], hs2[64];
			(void)hv;
			if(!counted(key))
				continue;
			want = amount(key, rq, ask, nask);
			if(want == 0)
				continue;
			if(value_of(hard, key, &h) || value_of(used, key, &u)) {
				snprintf(msg, len, "%s: %s does not parse as a quantity; provreqd cannot tell what is free", who,
					 key);
				return PRD_EINVAL;
			}
			have = amount(key, rq, held, nheld);
			free_ = h - u - have;
			if(want <= free_)
				continue;
			show(key, want, a, sizeof(a));
			show(key, free_ > 0 ? free_ : 0, f, sizeof(f));
			show(key, h, hs, sizeof(hs));
			show(key, u, us, sizeof(us));
			show(key, have, hs2, sizeof(hs2));
			if(have)
				snprintf(msg, len,
					 "%s: %s: the pods ask for %s, %s is free (hard %s, used %s, %s held by other requests of "
					 "the namespace that are booked and not yet consumed)",
					 who, key, a, f, hs, us, hs2);
			else
				snprintf(msg, len, "%s: %s: the pods ask for %s, %s is free (hard %s, used %s)", who, key, a, f, hs,
					 us);
			return 1;
		}
	}
	return 0;
}

/* Fencing terms (driver ABI 1.4) on Cluster API scalable resources.
 *
 * The record is an annotation on the group's own object (the
 * MachineDeployment, MachineSet or MachinePool):
 *
 *   provreqd.io/fence-<key>: "<term>"
 *
 * It lives in the same object, hence under the same resourceVersion, as
 * spec.replicas. A call reads the object once (annotations, replicas,
 * resourceVersion), judges the term, and writes replicas through the scale
 * subresource with that resourceVersion: a fence another process wrote
 * after the read changes the resourceVersion, so the apiserver refuses the
 * write with 409 and nothing changes. Neither half is a note in this
 * process: any replica, any process, checks the same record atomically
 * with its own change. */
#include "clusterapi/clusterapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

/* Room for the longest prefix's domain + a 63-character name. */
#define FENCE_ANN_MAX 100

/* A key the ABI allows: 1..63 of [A-Za-z0-9._-], alphanumeric at both
 * ends. */
static bool key_ok(const char *k)
{
	size_t i, n = k ? strlen(k) : 0;
	if(n < 1 || n > 63)
		return false;
	for(i = 0; i < n; i++) {
		char ch = k[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
		if(!alnum && ((i == 0 || i == n - 1) || (ch != '.' && ch != '_' && ch != '-')))
			return false;
	}
	return true;
}

/* The annotation name for a key. An annotation's name part holds at most
 * 63 characters and "fence-" takes 6: a key longer than 57 keeps its first
 * 48 characters and gains an FNV-1a hash of the whole key, so two long keys
 * with one beginning still get two records. */
void capi_fence_annotation(const char *prefix, const char *key, char *out, size_t n)
{
	size_t len = strlen(key);
	uint32_t h = 2166136261u;
	size_t i;
	if(len <= 57) {
		snprintf(out, n, "%s%s", prefix, key);
		return;
	}
	for(i = 0; i < len; i++) {
		h ^= (unsigned char)key[i];
		h *= 16777619u;
	}
	snprintf(out, n, "%s%.48s-%08x", prefix, key, (unsigned)h);
}

/* The term recorded for `ann` on obj: 0 when none; -1 when the value is not
 * a decimal term (someone wrote it by hand). */
static int recorded_term(json_object *obj, const char *ann, uint64_t *term)
{
	const char *v = capi_jstr(capi_jobj(capi_jobj(obj, "metadata"), "annotations"), ann);
	uint64_t x = 0;
	size_t i;
	*term = 0;
	if(!v)
		return 0;
	if(!v[0] || strlen(v) > 20)
		return -1;
	for(i = 0; v[i]; i++) {
		unsigned d;
		if(v[i] < '0' || v[i] > '9')
			return -1;
		d = (unsigned)(v[i] - '0');
		if(x > (UINT64_MAX - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	*term = x;
	return 0;
}

/* Read the group's object into *v (replicas, resourceVersion) and the term
 * recorded for `key` (when key is not NULL) into v->term. */
static int read_object(capi *c, const capi_group *g, const char *prefix, const char *key, capi_view *v,
		       prd_cloud_error *err)
{
	char path[800], ann[FENCE_ANN_MAX];
	json_object *obj = NULL, *r;
	const char *rv;
	int rc;
	capi_path(c, path, sizeof(path), capi_kind_plural(g->kind), g->ns, g->name, NULL);
	rc = capi_request(c, "GET", path, NULL, NULL, &obj, NULL, err);
	if(rc)
		return rc;
	memset(v, 0, sizeof(*v));
	if(json_object_object_get_ex(capi_jobj(obj, "spec"), "replicas", &r) && json_object_is_type(r, json_type_int))
		v->replicas = (int32_t)json_object_get_int64(r);
	rv = capi_jstr(capi_jobj(obj, "metadata"), "resourceVersion");
	snprintf(v->rv, sizeof(v->rv), "%s", rv ? rv : "");
	rv = capi_jstr(capi_jobj(capi_jobj(obj, "metadata"), "annotations"), CAPI_INCREASE_ANNOTATION);
	snprintf(v->increased_by, sizeof(v->increased_by), "%.*s", rv ? (int)strcspn(rv, " ") : 0, rv ? rv : "");
	if(key) {
		capi_fence_annotation(prefix, key, ann, sizeof(ann));
		if(recorded_term(obj, ann, &v->term))
			rc = capi_fail(err, PRD_CLOUD_EIO,
				       "clusterapi: %s: annotation %s is '%s', not a term; nothing changed (remove it "
				       "to let leaders fence the group again)",
				       g->id, ann, capi_jstr(capi_jobj(capi_jobj(obj, "metadata"), "annotations"), ann));
	}
	json_object_put(obj);
	return rc;
}

/* Record `term` for `key` on the object, conditional on v->rv; on success
 * v->rv is the new resourceVersion. A 409 is PRD_CLOUD_ECONFLICT. */
static int write_fence(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t term,
		       capi_view *v, prd_cloud_error *err)
{
	char path[800], ann[FENCE_ANN_MAX], val[24];
	json_object *patch = json_object_new_object(), *md = json_object_new_object(), *anns = json_object_new_object();
	json_object *out = NULL;
	const char *rv;
	long status = 0;
	int rc;
	if(!patch || !md || !anns) {
		json_object_put(patch);
		json_object_put(md);
		json_object_put(anns);
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	capi_fence_annotation(prefix, key, ann, sizeof(ann));
	snprintf(val, sizeof(val), "%llu", (unsigned long long)term);
	json_object_object_add(anns, ann, json_object_new_string(val));
	json_object_object_add(md, "annotations", anns);
	json_object_object_add(md, "resourceVersion", json_object_new_string(v->rv));
	json_object_object_add(patch, "metadata", md);
	capi_path(c, path, sizeof(path), capi_kind_plural(g->kind), g->ns, g->name, NULL);
	rc = capi_request(c, "PATCH", path, "application/merge-patch+json", patch, &out, &status, err);
	json_object_put(patch);
	if(rc && status == 409)
		rc = capi_fail(err, PRD_CLOUD_ECONFLICT,
			       "clusterapi: %s: the object changed between reading and fencing it (409 Conflict)", g->id);
	if(!rc) {
		rv = capi_jstr(capi_jobj(out, "metadata"), "resourceVersion");
		snprintf(v->rv, sizeof(v->rv), "%s", rv ? rv : "");
	}
	json_object_put(out);
	return rc;
}

static int stale_term(const capi_group *g, const char *key, uint64_t recorded, uint64_t term, prd_cloud_error *err)
{
	return capi_fail(err, PRD_CLOUD_ECONFLICT,
			 "clusterapi: %s: term %llu of '%s' is recorded, this call carries %llu (a newer leader "
			 "fenced the group); nothing changed",
			 g->id, (unsigned long long)recorded, key, (unsigned long long)term);
}

int capi_fence_check_key(const char *key, prd_cloud_error *err)
{
	if(!key_ok(key))
		return capi_fail(err, PRD_CLOUD_EINVAL,
				 "clusterapi: fence key '%s' is not 1..63 of [A-Za-z0-9._-] beginning and ending "
				 "alphanumeric",
				 key ? key : "(null)");
	return 0;
}

int capi_read_fenced(capi *c, const capi_group *g, const char *key, uint64_t term, capi_view *v,
		     prd_cloud_error *err)
{
	return capi_read_fenced_with(c, g, CAPI_FENCE_PREFIX, key, term, v, err);
}

int capi_read_fenced_with(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t term,
			  capi_view *v, prd_cloud_error *err)
{
	int rc = capi_fence_check_key(key, err);
	if(!rc)
		rc = read_object(c, g, prefix, key, v, err);
	if(rc)
		return rc;
	if(v->term > term)
		return stale_term(g, key, v->term, term, err);
	if(v->term < term) {
		rc = write_fence(c, g, prefix, key, term, v, err);
		if(!rc)
			v->term = term;
	}
	return rc;
}

int capi_fence(capi *c, const capi_group *g, const char *key, uint64_t term, prd_cloud_error *err)
{
	return capi_fence_with(c, g, CAPI_FENCE_PREFIX, key, term, err);
}

int capi_fence_recorded(json_object *obj, const char *prefix, const char *key, uint64_t *term)
{
	char ann[FENCE_ANN_MAX];
	capi_fence_annotation(prefix, key, ann, sizeof(ann));
	return recorded_term(obj, ann, term);
}

int capi_fence_with(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t term,
		    prd_cloud_error *err)
{
	capi_view v;
	return capi_fence_view(c, g, prefix, key, term, &v, err);
}

/* The object as the fence found it (v->replicas as of the fence: a write of
 * an older term after it is refused). */
int capi_fence_view(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t term, capi_view *out,
		    prd_cloud_error *err)
{
	capi_view v;
	int attempt, rc = capi_fence_check_key(key, err);
	if(!rc && term == 0)
		rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: fence term 0 (terms begin at 1)", g->id);
	/* A 409 on the write means someone wrote the object since the read:
	 * read once more, since the writer may have been a rollout rather
	 * than a newer leader. */
	for(attempt = 0; !rc && attempt < 2; attempt++) {
		rc = read_object(c, g, prefix, key, &v, err);
		if(rc)
			break;
		if(v.term > term)
			return stale_term(g, key, v.term, term, err);
		if(v.term == term) {
			*out = v;
			return 0;
		}
		rc = write_fence(c, g, prefix, key, term, &v, err);
		if(rc == PRD_CLOUD_ECONFLICT && attempt == 0)
			rc = 0;
		else
			break;
	}
	if(!rc) {
		v.term = term;
		*out = v;
	}
	return rc;
}

int capi_read_object(capi *c, const capi_group *g, capi_view *v, prd_cloud_error *err)
{
	return read_object(c, g, CAPI_FENCE_PREFIX, NULL, v, err);
}

int capi_fence_read(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t *term,
		    prd_cloud_error *err)
{
	capi_view v;
	int rc = capi_fence_check_key(key, err);
	*term = 0;
	if(!rc)
		rc = read_object(c, g, prefix, key, &v, err);
	if(!rc)
		*term = v.term;
	return rc;
}

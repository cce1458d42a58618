/* Creating and deleting the karpenter driver's NodeClaims.
 *
 * A NodeClaim is made the way Karpenter makes its own from a NodePool
 * (the template's labels, annotations and spec; the NodePool as owner; its
 * hash annotations, so drift works as usual), with the group's shape
 * pinned by single-valued In requirements, the owner token as a label and,
 * unless configured off, karpenter.sh/do-not-disrupt until its booking
 * ends (karp_hold.c). */
#include "karpenter/karpenter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

static int put(json_object *o, const char *key, json_object *v)
{
	if(!v || json_object_object_add(o, key, v)) {
		json_object_put(v);
		return -1;
	}
	return 0;
}

static json_object *copy_of(json_object *src)
{
	json_object *dst = NULL;
	if(!src)
		return json_object_new_object();
	return json_object_deep_copy(src, &dst, NULL) ? NULL : dst;
}

static int pin(json_object *reqs, const char *key, const char *value)
{
	json_object *r = json_object_new_object(), *vals = json_object_new_array();
	if(!r || !vals || put(r, "key", json_object_new_string(key)) || put(r, "operator", json_object_new_string("In")) ||
	   json_object_array_add(vals, json_object_new_string(value)) || put(r, "values", vals)) {
		json_object_put(r);
		return -1;
	}
	return json_object_array_add(reqs, r) ? (json_object_put(r), -1) : 0;
}

/* The template's requirements without those on the pinned keys, then the
 * pins. A new array (caller puts), or NULL. */
static json_object *requirements(const karp_group *g, json_object *tspec)
{
	json_object *src = NULL, *out = json_object_new_array();
	const karp_shape *s = g->shape;
	size_t i, n;
	json_object_object_get_ex(tspec, "requirements", &src);
	n = json_object_is_type(src, json_type_array) ? json_object_array_length(src) : 0;
	for(i = 0; out && i < n; i++) {
		json_object *r = json_object_array_get_idx(src, i);
		const char *key = drv_jstr(r, "key");
		if(str_eq(key, KARP_IT_LABEL) || str_eq(key, KARP_POOL_LABEL) || (s->zone && str_eq(key, KARP_ZONE_LABEL)) ||
		   (s->capacity_type && str_eq(key, KARP_CT_LABEL)))
			continue;
		if(json_object_array_add(out, copy_of(r)))
			goto fail;
	}
	if(!out || pin(out, KARP_POOL_LABEL, g->pool) || pin(out, KARP_IT_LABEL, s->instance_type) ||
	   (s->zone && pin(out, KARP_ZONE_LABEL, s->zone)) || (s->capacity_type && pin(out, KARP_CT_LABEL, s->capacity_type)))
		goto fail;
	return out;
fail:
	json_object_put(out);
	return NULL;
}

static json_object *claim_metadata(const karp *k, const karp_group *g, json_object *tmeta, const char *owner)
{
	json_object *md = json_object_new_object(), *npmd = drv_jobj(g->np, "metadata");
	json_object *labels = copy_of(drv_jobj(tmeta, "labels")), *ann = copy_of(drv_jobj(tmeta, "annotations"));
	json_object *refs = json_object_new_array(), *ref = json_object_new_object();
	char gen[80];
	snprintf(gen, sizeof(gen), "%.60s-", g->pool);
	if(!md || !labels || !ann || !refs || !ref || put(labels, KARP_POOL_LABEL, json_object_new_string(g->pool)) ||
	   (owner && put(labels, KARP_OWNER_LABEL, json_object_new_string(owner))) ||
	   (drv_jstr(drv_jobj(npmd, "annotations"), KARP_HASH) &&
	    put(ann, KARP_HASH, json_object_new_string(drv_jstr(drv_jobj(npmd, "annotations"), KARP_HASH)))) ||
	   (drv_jstr(drv_jobj(npmd, "annotations"), KARP_HASH_VERSION) &&
	    put(ann, KARP_HASH_VERSION, json_object_new_string(drv_jstr(drv_jobj(npmd, "annotations"), KARP_HASH_VERSION)))) ||
	   (k->hold && (put(ann, KARP_DND, json_object_new_string("true")) ||
			put(ann, KARP_HOLD_ANN, json_object_new_string("true")))) ||
	   put(ref, "apiVersion", json_object_new_string("karpenter.sh/v1")) ||
	   put(ref, "kind", json_object_new_string("NodePool")) ||
	   put(ref, "name", json_object_new_string(g->pool)) ||
	   put(ref, "uid", json_object_new_string(drv_jstr(npmd, "uid") ? drv_jstr(npmd, "uid") : ""))) {
		json_object_put(md);
		json_object_put(labels);
		json_object_put(ann);
		json_object_put(refs);
		json_object_put(ref);
		return NULL;
	}
	if(json_object_array_add(refs, ref))
		json_object_put(ref);
	if(put(md, "generateName", json_object_new_string(gen)) || put(md, "labels", labels) ||
	   put(md, "annotations", ann) || put(md, "ownerReferences", refs)) {
		json_object_put(md);
		return NULL;
	}
	return md;
}

/* A new NodeClaim for group g (caller puts), or NULL when out of memory. */
static json_object *claim_body(const karp *k, const karp_group *g, const char *owner)
{
	static const char *const keep[] = {"nodeClassRef", "taints", "startupTaints", "expireAfter",
					   "terminationGracePeriod"};
	json_object *tmpl = drv_jobj(drv_jobj(g->np, "spec"), "template"), *tspec = drv_jobj(tmpl, "spec");
	json_object *nc = json_object_new_object(), *spec = json_object_new_object();
	size_t i;
	if(!nc || !spec || put(nc, "apiVersion", json_object_new_string("karpenter.sh/v1")) ||
	   put(nc, "kind", json_object_new_string("NodeClaim")) ||
	   put(nc, "metadata", claim_metadata(k, g, drv_jobj(tmpl, "metadata"), owner)))
		goto fail;
	for(i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		json_object *v = NULL;
		if(json_object_object_get_ex(tspec, keep[i], &v) && v && put(spec, keep[i], copy_of(v)))
			goto fail;
	}
	if(put(spec, "requirements", requirements(g, tspec)) || put(spec, "resources", json_object_new_object()) ||
	   put(nc, "spec", spec))
		goto fail_nc;
	return nc;
fail:
	json_object_put(spec);
fail_nc:
	json_object_put(nc);
	return NULL;
}

static int made_add(karp *k, const karp_group *g, json_object *created, const char *owner)
{
	karp_made *bigger = realloc(k->made, (k->nmade + 1) * sizeof(*bigger)), *m;
	const char *name = drv_jstr(drv_jobj(created, "metadata"), "name");
	if(!bigger)
		return -1;
	k->made = bigger;
	m = &k->made[k->nmade];
	memset(m, 0, sizeof(*m));
	m->name = drv_strdup(name);
	m->group = drv_strdup(g->id);
	m->owner = drv_strdup(owner ? owner : "");
	m->created_ns = k->host->now_ns(k->host->ctx);
	if(!m->name || !m->group || !m->owner) {
		free(m->name);
		free(m->group);
		free(m->owner);
		return -1;
	}
	k->nmade++;
	return 0;
}

static int delete_claim(karp *k, const char *name, const char *uid, prd_cloud_error *err)
{
	char path[400];
	long st = 0;
	json_object *opts = NULL, *pre;
	int rc;
	karp_made *m;
	size_t i;
	if(uid && (opts = json_object_new_object()) && (pre = json_object_new_object())) {
		put(pre, "uid", json_object_new_string(uid));
		put(opts, "preconditions", pre);
	}
	snprintf(path, sizeof(path), KARP_API "/nodeclaims/%s", name);
	rc = drv_request(k->host, "DELETE", path, NULL, opts, NULL, &st, err);
	json_object_put(opts);
	if(rc && (st == 404 || st == 409))
		rc = 0; /* gone, or a new object of that name: not ours */
	for(i = 0, m = k->made; !rc && i < k->nmade; i++)
		if(!strcmp(m[i].name, name))
			m[i].deleted_by_us = true;
	return rc;
}

/* Create delta NodeClaims; on an atomic call that fails part way, delete
 * what it made. */
int karp_create_claims(karp *k, karp_group *g, int32_t delta, bool atomic, const char *owner, prd_cloud_error *err)
{
	char **names = calloc((size_t)delta + 1, sizeof(*names));
	int32_t i, made = 0;
	int rc = 0;
	if(!names)
		return karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < delta && !rc; i++) {
		json_object *body, *created = NULL;
		if(k->host->struct_size > offsetof(prd_cloud_host, may_act) && k->host->may_act &&
		   !k->host->may_act(k->host->ctx)) {
			rc = karp_fail(err, PRD_CLOUD_EAGAIN, "karpenter: %s: stopped after %d of %d NodeClaims: the host may no "
					 "longer act", g->id, (int)made, (int)delta);
			break;
		}
		if(!(body = claim_body(k, g, owner))) {
			rc = karp_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
			break;
		}
		rc = drv_request(k->host, "POST", KARP_API "/nodeclaims", NULL, body, &created, NULL, err);
		json_object_put(body);
		if(!rc) {
			names[made] = drv_strdup(drv_jstr(drv_jobj(created, "metadata"), "name"));
			if(!names[made] || made_add(k, g, created, owner))
				karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: out of memory following NodeClaim %s",
					 names[made] ? names[made] : "?");
			made++;
			g->live++;
		}
		json_object_put(created);
	}
	if(rc && atomic && rc != PRD_CLOUD_EAGAIN) {
		for(i = 0; i < made; i++) {
			prd_cloud_error e = {0, ""};
			if(names[i] && !delete_claim(k, names[i], NULL, &e))
				g->live--;
			else if(names[i])
				karp_log(k, PRD_CLOUD_LOG_WARN, "karpenter: undoing NodeClaim %s: %s", names[i], e.message);
		}
	}
	for(i = 0; i < made; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* The NodeClaim of g that `id` names (its name, or by_node its Node's),
 * from `claims`; NULL when it is not listed. */
static json_object *claim_for(json_object *claims, const karp_group *g, const char *id, bool by_node)
{
	size_t i, n = json_object_array_length(claims);
	for(i = 0; i < n; i++) {
		json_object *nc = json_object_array_get_idx(claims, i);
		const char *key = by_node ? drv_jstr(drv_jobj(nc, "status"), "nodeName")
					  : drv_jstr(drv_jobj(nc, "metadata"), "name");
		if(str_eq(key, id) && (!by_node || karp_claim_in_group(nc, g)))
			return nc;
	}
	return NULL;
}

static bool is_tomb(const karp *k, const karp_group *g, const char *id)
{
	size_t i;
	for(i = 0; i < k->nmade; i++)
		if(k->made[i].tomb && !strcmp(k->made[i].name, id) && !strcmp(k->made[i].group, g->id))
			return true;
	return false;
}

static void drop_tomb(karp *k, const char *id)
{
	size_t i;
	for(i = 0; i < k->nmade; i++) {
		if(k->made[i].tomb && !strcmp(k->made[i].name, id)) {
			k->made[i].tomb = false;
			k->made[i].deleted_by_us = true; /* dropped at the next update */
			k->made[i].created_ns = 0;
		}
	}
}

/* Delete NodeClaims of g named by `ids` (instance ids, or by_node Node
 * names). Everything is checked before anything is deleted: an id of
 * another group is refused. */
int karp_delete_claims(karp *k, karp_group *g, const char *const *ids, size_t count, bool by_node,
		       prd_cloud_error *err)
{
	json_object *claims = NULL;
	size_t i;
	int rc = karp_list_claims(k, g->pool, &claims, err);
	for(i = 0; !rc && i < count; i++) {
		json_object *nc = claim_for(claims, g, ids[i], by_node);
		if((nc && !karp_claim_in_group(nc, g)) || (!nc && by_node))
			rc = karp_fail(err, PRD_CLOUD_ENOTFOUND, "karpenter: %s has no NodeClaim %s%s", g->id,
				       by_node ? "for node " : "", ids[i]);
	}
	for(i = 0; !rc && i < count; i++) {
		json_object *nc = claim_for(claims, g, ids[i], by_node);
		if(!by_node && is_tomb(k, g, ids[i])) {
			drop_tomb(k, ids[i]);
			g->tombs--;
		} else if(nc && !karp_claim_deleting(nc)) {
			rc = delete_claim(k, drv_jstr(drv_jobj(nc, "metadata"), "name"),
					  drv_jstr(drv_jobj(nc, "metadata"), "uid"), err);
			if(!rc)
				g->live--;
		}
	}
	json_object_put(claims);
	return rc;
}

/* Node auto-provisioning and cluster-wide limits (see classes/nap.h).
 *
 * What a new group carries beyond its shape follows GKE's node
 * auto-provisioning rules, the one public description of the problem:
 * the pods' nodeSelector labels the shape's node lacks become the group's
 * labels, a toleration (operator Equal, effect NoSchedule or NoExecute)
 * whose key and value the pods also select becomes a taint of the group
 * (workload separation), and a zone the pods select picks the zone.
 * Labels in the kubernetes.io and k8s.io domains are the kubelet's and
 * are never invented.
 *
 * The record of a group (state store, classes' text) is a JSON object:
 * driver, shape, zone, labels, taints, max, owner (the plan's owner
 * token, which the cloud keeps with the group), plan (the intent id),
 * created, emptySince (wall ns, 0 while not empty). */
#include "classes/nap_int.h"
#include "classes/atomic_plan_int.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/str.h"
#include "classes/details.h"
#include "classes/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAP_ID_MAX 40

void nap_shape_key(const char *driver, const char *shape, char *out, size_t len)
{
	snprintf(out, len, "shape:%s/%s", driver, shape);
}

/* The kubernetes.io and k8s.io domains and their subdomains: a label
 * prefix equal to one or ending in "." and one. A prefix that merely ends
 * in the same letters is another domain: node.cluster.x-k8s.io (Cluster
 * API, whose labels it copies from Machines to Nodes) is not k8s.io. */
static bool in_domain(const char *key, size_t dl, const char *dom)
{
	size_t n = strlen(dom);
	return dl >= n && !strncmp(key + dl - n, dom, n) && (dl == n || key[dl - n - 1] == '.');
}

static bool reserved_key(const char *key)
{
	const char *slash = strchr(key, '/');
	size_t dl = slash ? (size_t)(slash - key) : 0;
	if(!slash)
		return false;
	return in_domain(key, dl, "kubernetes.io") || in_domain(key, dl, "k8s.io");
}

static const char *effect_name(sched_effect e)
{
	return e == SCHED_EFFECT_NO_EXECUTE ? "NoExecute" : e == SCHED_EFFECT_PREFER_NO_SCHEDULE ? "PreferNoSchedule"
											 : "NoSchedule";
}

static void free_json(void *p)
{
	json_object_put(p);
}

/* Groups of the pass arena that are in no world: their listings (made
 * once the cloud has them) are freed with the pass. */
typedef struct group_run {
	pr_class_group *v;
	size_t n;
} group_run;

static void unlist_run(void *p)
{
	group_run *r = p;
	size_t i;
	for(i = 0; i < r->n; i++)
		pr_group_unlist(&r->v[i]);
}

static int defer_unlist(const pr_class_host *h, pr_class_group *v, size_t n)
{
	group_run *r = arena_alloc(h->ar, sizeof(*r));
	if(!r)
		return PRD_ENOMEM;
	r->v = v;
	r->n = n;
	return arena_defer(h->ar, unlist_run, r);
}

/* ---- what the pods need of a new group ------------------------------- */

typedef struct needs {
	const char *zone;            /* the zone every podSet selects, or NULL */
	prd_cloud_label *labels;     /* selected labels (zone and hostname aside) */
	size_t nlabels;
	prd_cloud_taint *taints;     /* taints every podSet tolerates (workload separation) */
	size_t ntaints;
	char conflict[200];          /* non-empty: no group can serve every podSet */
} needs;

static const char *selected(const sched_pod_spec *p, const char *key)
{
	size_t i;
	for(i = 0; i < p->n_node_selector; i++)
		if(!strcmp(p->node_selector[i].key, key))
			return p->node_selector[i].value;
	return NULL;
}

static bool tolerates(const sched_pod_spec *p, const char *key, const char *value, sched_effect eff)
{
	size_t i;
	for(i = 0; i < p->n_tolerations; i++) {
		const sched_toleration *t = &p->tolerations[i];
		bool key_ok = !t->key || !t->key[0] ? t->op == SCHED_TOL_EXISTS : !strcmp(t->key, key);
		bool val_ok = t->op == SCHED_TOL_EXISTS || str_eq(t->value ? t->value : "", value ? value : "");
		bool eff_ok = t->effect == SCHED_EFFECT_NONE || t->effect == eff;
		if(key_ok && val_ok && eff_ok)
			return true;
	}
	return false;
}

static void pods_need(const pr_class_host *h, const sched_podset *rest, size_t n, needs *nd)
{
	size_t s, i, k;
	const sched_pod_spec *first = NULL;
	memset(nd, 0, sizeof(*nd));
	for(s = 0; s < n; s++) {
		const sched_pod_spec *p = rest[s].pod;
		if(rest[s].count <= 0)
			continue;
		if(!first)
			first = p;
		for(i = 0; i < p->n_node_selector; i++) {
			const sched_label *l = &p->node_selector[i];
			if(!strcmp(l->key, SCHED_KEY_HOSTNAME))
				continue;
			if(!strcmp(l->key, SCHED_KEY_ZONE)) {
				if(nd->zone && strcmp(nd->zone, l->value))
					snprintf(nd->conflict, sizeof(nd->conflict), "the podSets select zones %s and %s",
						 nd->zone, l->value);
				nd->zone = l->value;
				continue;
			}
			for(k = 0; k < nd->nlabels; k++)
				if(!strcmp(nd->labels[k].key, l->key))
					break;
			if(k < nd->nlabels) {
				if(strcmp(nd->labels[k].value, l->value))
					snprintf(nd->conflict, sizeof(nd->conflict), "the podSets select %s=%s and %s=%s",
						 l->key, nd->labels[k].value, l->key, l->value);
				continue;
			}
			{
				prd_cloud_label *nv = arena_array(h->ar, nd->nlabels + 1, sizeof(*nv));
				if(!nv)
					return;
				if(nd->nlabels)
					memcpy(nv, nd->labels, nd->nlabels * sizeof(*nv));
				nv[nd->nlabels].key = l->key;
				nv[nd->nlabels++].value = l->value;
				nd->labels = nv;
			}
		}
	}
	if(!first)
		return;
	/* Taints: what the first podSet tolerates and selects, if every
	 * other tolerates it too. */
	for(i = 0; i < first->n_tolerations; i++) {
		const sched_toleration *t = &first->tolerations[i];
		sched_effect eff = t->effect == SCHED_EFFECT_NONE ? SCHED_EFFECT_NO_SCHEDULE : t->effect;
		const char *sel;
		bool all = true;
		prd_cloud_taint *nv;
		if(t->op != SCHED_TOL_EQUAL || !t->key || !t->key[0] || eff == SCHED_EFFECT_PREFER_NO_SCHEDULE)
			continue;
		sel = selected(first, t->key);
		if(!sel || !str_eq(sel, t->value ? t->value : ""))
			continue;
		for(s = 0; s < n && all; s++)
			if(rest[s].count > 0)
				all = tolerates(rest[s].pod, t->key, t->value, eff);
		if(!all)
			continue;
		nv = arena_array(h->ar, nd->ntaints + 1, sizeof(*nv));
		if(!nv)
			return;
		if(nd->ntaints)
			memcpy(nv, nd->taints, nd->ntaints * sizeof(*nv));
		nv[nd->ntaints].key = t->key;
		nv[nd->ntaints].value = t->value;
		nv[nd->ntaints++].effect = effect_name(eff);
		nd->taints = nv;
	}
}

/* ---- a shape as a group --------------------------------------------- */

/* Does the Node's taint array `tv` hold a taint with t's key and effect? */
static bool taint_present(json_object *tv, const prd_cloud_taint *t)
{
	size_t i, n = json_object_array_length(tv);
	for(i = 0; i < n; i++) {
		json_object *x = json_object_array_get_idx(tv, i), *k, *e;
		if(json_object_object_get_ex(x, "key", &k) && json_object_object_get_ex(x, "effect", &e) &&
		   !strcmp(json_object_get_string(k), t->key) && !strcmp(json_object_get_string(e), t->effect))
			return true;
	}
	return false;
}

/* shape_group's first step: the Node `node` is named `id` and labelled
 * with what the pods select that its nodes do not carry yet (those become
 * *labels, *nlabels, in the pass arena) and the zone. false with `why`
 * when a label conflicts or cannot be given. */
static bool shape_labels(const pr_class_host *h, json_object *node, const char *id, const char *zone,
			 const prd_cloud_label **labels_io, size_t *nlabels_io, char *why, size_t len)
{
	const prd_cloud_label *labels = *labels_io;
	size_t nlabels = *nlabels_io, i, nextra = 0;
	json_object *md, *lab;
	prd_cloud_label *extra;
	if(!json_object_object_get_ex(node, "metadata", &md) || !json_object_is_type(md, json_type_object)) {
		md = json_object_new_object();
		json_object_object_add(node, "metadata", md);
	}
	json_object_object_add(md, "name", json_object_new_string(id));
	if(!json_object_object_get_ex(md, "labels", &lab) || !json_object_is_type(lab, json_type_object)) {
		lab = json_object_new_object();
		json_object_object_add(md, "labels", lab);
	}
	extra = arena_array(h->ar, nlabels + 1, sizeof(*extra));
	if(!extra) {
		snprintf(why, len, "out of memory");
		return false;
	}
	for(i = 0; i < nlabels; i++) {
		json_object *have;
		if(json_object_object_get_ex(lab, labels[i].key, &have)) {
			if(strcmp(json_object_get_string(have), labels[i].value)) {
				snprintf(why, len, "its nodes carry %s=%s, the pods select %s", labels[i].key,
					 json_object_get_string(have), labels[i].value);
				return false;
			}
			continue;
		}
		if(reserved_key(labels[i].key)) {
			snprintf(why, len, "the pods select %s=%s, which its nodes do not carry (a kubelet's label: "
				 "no group can be given it)", labels[i].key, labels[i].value);
			return false;
		}
		json_object_object_add(lab, labels[i].key, json_object_new_string(labels[i].value));
		extra[nextra++] = labels[i];
	}
	*labels_io = extra;
	*nlabels_io = nextra;
	if(zone)
		json_object_object_add(lab, SCHED_KEY_ZONE, json_object_new_string(zone));
	return true;
}

/* shape_group's second step: the taints the pods tolerate go on the Node,
 * but for those its nodes already carry; the ones added become *taints,
 * *ntaints (pass arena). false with `why` when out of memory. */
static bool shape_taints(const pr_class_host *h, json_object *node, const prd_cloud_taint **taints_io,
			 size_t *ntaints_io, char *why, size_t len)
{
	const prd_cloud_taint *taints = *taints_io;
	size_t ntaints = *ntaints_io, i, netaints = 0;
	json_object *spec, *tv;
	prd_cloud_taint *etaints;
	if(!json_object_object_get_ex(node, "spec", &spec) || !json_object_is_type(spec, json_type_object)) {
		spec = json_object_new_object();
		json_object_object_add(node, "spec", spec);
	}
	if(!json_object_object_get_ex(spec, "taints", &tv) || !json_object_is_type(tv, json_type_array)) {
		tv = json_object_new_array();
		json_object_object_add(spec, "taints", tv);
	}
	/* A taint the shape's nodes already carry (same key and effect) is
	 * not added again: the apiserver refuses a Node whose taints repeat a
	 * key and effect pair (the arm64 example: the shape is tainted
	 * kubernetes.io/arch=arm64:NoSchedule and the pods tolerate it). */
	etaints = arena_array(h->ar, ntaints + 1, sizeof(*etaints));
	if(!etaints) {
		snprintf(why, len, "out of memory");
		return false;
	}
	for(i = 0; i < ntaints; i++) {
		json_object *t;
		if(taint_present(tv, &taints[i]))
			continue;
		etaints[netaints++] = taints[i];
		t = json_object_new_object();
		json_object_object_add(t, "key", json_object_new_string(taints[i].key));
		if(taints[i].value && taints[i].value[0])
			json_object_object_add(t, "value", json_object_new_string(taints[i].value));
		json_object_object_add(t, "effect", json_object_new_string(taints[i].effect));
		json_object_array_add(tv, t);
	}
	*taints_io = etaints;
	*ntaints_io = netaints;
	return true;
}

/* shape_group's last step: the group of the pass (arena) with the Node
 * `node` as its template and what its creation needs (nap_new). NULL with
 * `why` when the Node is not usable or out of memory. */
static pr_class_group *shape_new_group(const pr_class_host *h, cloud_driver *drv, const prd_cloud_shape *sh,
				       json_object *node, const char *id, const char *zone,
				       const prd_cloud_label *labels, size_t nlabels, const prd_cloud_taint *taints,
				       size_t ntaints, int32_t max, char *why, size_t len)
{
	pr_class_group *g;
	nap_new *nn;
	prd_err e;
	size_t i;
	g = arena_alloc(h->ar, sizeof(*g));
	nn = arena_alloc(h->ar, sizeof(*nn));
	if(!g || !nn) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	memset(g, 0, sizeof(*g));
	memset(nn, 0, sizeof(*nn));
	if(h->node_spec(h->ctx, node, &g->tmpl, &e)) {
		snprintf(why, len, "its node is not a usable Node: %.200s", e.msg);
		return NULL;
	}
	g->drv = drv;
	g->id = arena_strdup(h->ar, id);
	g->max = max;
	/* Its calls carry this leader's term like a listed group's. */
	g->fence_key = h->fence_key;
	g->fence_term = h->fence_term;
	g->has_tmpl = true;
	g->tmpl_json = node;
	g->listed = true;
	g->nap_new = nn;
	nn->db = h->db;
	nn->shape = arena_strdup(h->ar, sh->name);
	nn->zone = zone ? arena_strdup(h->ar, zone) : NULL;
	nn->labels = arena_array(h->ar, nlabels + 1, sizeof(*nn->labels));
	nn->taints = arena_array(h->ar, ntaints + 1, sizeof(*nn->taints));
	nn->max_size = max;
	nn->has_price = sh->price_micros >= 0;
	nn->price_micros = sh->price_micros;
	if(!g->id || !nn->shape || (zone && !nn->zone) || !nn->labels || !nn->taints) {
		snprintf(why, len, "out of memory");
		return NULL;
	}
	for(i = 0; i < nlabels; i++) {
		nn->labels[i].key = arena_strdup(h->ar, labels[i].key);
		nn->labels[i].value = arena_strdup(h->ar, labels[i].value);
	}
	nn->nlabels = nlabels;
	for(i = 0; i < ntaints; i++) {
		nn->taints[i].key = arena_strdup(h->ar, taints[i].key);
		nn->taints[i].value = taints[i].value ? arena_strdup(h->ar, taints[i].value) : NULL;
		nn->taints[i].effect = arena_strdup(h->ar, taints[i].effect);
	}
	nn->ntaints = ntaints;
	return g;
}

/* The group `id` of shape `sh` with the extra labels, taints and zone, in
 * the pass arena; NULL with `why` filled when the shape cannot carry them
 * or its node is unusable. */
static pr_class_group *shape_group(const pr_class_host *h, cloud_driver *drv, const prd_cloud_shape *sh,
				   const char *id, const char *zone, const prd_cloud_label *labels, size_t nlabels,
				   const prd_cloud_taint *taints, size_t ntaints, int32_t max, char *why, size_t len)
{
	json_object *node = sh->node_json ? json_tokener_parse(sh->node_json) : NULL;
	if(!node || !json_object_is_type(node, json_type_object) || arena_defer(h->ar, free_json, node)) {
		json_object_put(node);
		snprintf(why, len, "its node is not JSON");
		return NULL;
	}
	if(!shape_labels(h, node, id, zone, &labels, &nlabels, why, len) ||
	   !shape_taints(h, node, &taints, &ntaints, why, len))
		return NULL;
	return shape_new_group(h, drv, sh, node, id, zone, labels, nlabels, taints, ntaints, max, why, len);
}

/* The zone a group of shape `sh` is made in for pods selecting `want`
 * (NULL: any): that zone when offered, else the first the shape lists.
 * false when the shape is not offered in `want`. */
static bool pick_zone(const pr_class_host *h, const prd_cloud_shape *sh, const char *want, const char **zone)
{
	const char *z = sh->zones && sh->zones[0] ? sh->zones : NULL, *p;
	*zone = NULL;
	if(!z)
		return !want; /* a cloud without zones cannot promise one */
	for(p = z; *p;) {
		size_t n = strcspn(p, ",");
		if(!want || (strlen(want) == n && !strncmp(p, want, n))) {
			char *c = arena_alloc(h->ar, n + 1);
			if(c)
				snprintf(c, n + 1, "%.*s", (int)n, p);
			*zone = c;
			return c != NULL;
		}
		p += n;
		if(*p == ',')
			p++;
	}
	return false;
}

static uint64_t fnv(const char *a, int64_t b)
{
	uint64_t x = 1469598103934665603ULL;
	size_t i;
	for(i = 0; a[i]; i++)
		x = (x ^ (unsigned char)a[i]) * 1099511628211ULL;
	for(i = 0; i < 8; i++)
		x = (x ^ (uint64_t)((b >> (8 * i)) & 0xff)) * 1099511628211ULL;
	return x;
}

/* "nap-<shape>-<8 hex>": a DNS label of at most NAP_ID_MAX characters,
 * unique to the request and the moment (the plan's id has both). */
static void make_id(const char *shape, const char *uid, int64_t now, const char *zone, char out[NAP_ID_MAX + 1])
{
	char seed[400];
	size_t n = strlen(shape);
	snprintf(seed, sizeof(seed), "%s/%s/%s", uid, shape, zone ? zone : "");
	if(n > NAP_ID_MAX - 13)
		n = NAP_ID_MAX - 13;
	while(n > 0 && shape[n - 1] == '-')
		n--;
	snprintf(out, NAP_ID_MAX + 1, "nap-%.*s-%08llx", (int)n, shape,
		 (unsigned long long)(fnv(seed, now) & 0xffffffffULL));
}

/* Auto-provisioned groups that exist or are being made. */
static int64_t count_groups(const pr_class_host *h)
{
	state_nap *v = NULL;
	size_t n = 0, i, k;
	int64_t count = 0;
	for(i = 0; i < h->ngroups; i++)
		count += h->groups[i].nap_owner != NULL;
	if(h->db && state_nap_list(h->db, &v, &n, NULL) == 0) {
		for(i = 0; i < n; i++) {
			bool listed = false;
			for(k = 0; k < h->ngroups && !listed; k++)
				listed = !strcmp(h->groups[k].id, v[i].group_id);
			count += !listed;
		}
		state_nap_list_free(v, n);
	}
	return count;
}

#define WHY(...) (wl += (size_t)snprintf(why + wl, wl < len ? len - wl : 0, __VA_ARGS__))

void nap_candidates(const pr_class_host *h, const char *req_uid, const sched_podset *rest, size_t nsets,
		    pr_class_group **out, size_t *n, char *why, size_t len)
{
	needs nd;
	size_t d, i, wl = strlen(why), cap = 0;
	pr_class_group *v = NULL;
	int64_t have;
	*out = NULL;
	*n = 0;
	if(!h->limits->nap || !h->drivers || !h->db)
		return;
	if(!h->groups_complete) {
		/* An unlisted group might serve the pods: no new one now. */
		WHY("%sauto-provisioning waits: a driver could not list its node groups this pass", wl ? "; " : "");
		return;
	}
	have = count_groups(h);
	if(have >= h->limits->nap_max_groups) {
		WHY("%sauto-provisioning: %lld groups exist, the most allowed (--max-autoprovisioned-groups)",
		    wl ? "; " : "", (long long)have);
		return;
	}
	pods_need(h, rest, nsets, &nd);
	if(nd.conflict[0]) {
		WHY("%sauto-provisioning: no one group can serve them: %s", wl ? "; " : "", nd.conflict);
		return;
	}
	for(d = 0; d < h->drivers->n; d++) {
		cloud_driver *drv = h->drivers->v[d];
		prd_cloud_shape *sv = NULL;
		prd_cloud_error de;
		size_t ns = 0;
		if(!cloud_driver_naps(drv->api))
			continue;
		memset(&de, 0, sizeof(de));
		if(drv->api->shapes(drv->state, &sv, &ns, &de)) {
			de.message[sizeof(de.message) - 1] = '\0';
			WHY("%sauto-provisioning: driver %s cannot list its shapes: %s", wl ? "; " : "", drv->api->name,
			    de.message);
			continue;
		}
		for(i = 0; i < ns; i++) {
			const prd_cloud_shape *sh = cloud_shape_at(drv->api, sv, i);
			char id[NAP_ID_MAX + 1], key[300], w[300] = "";
			const char *zone = NULL;
			bool off = false;
			int64_t until = 0;
			pr_class_group *g, *nv;
			if(!sh->name || !str_is_dns_label(sh->name) || sh->max_size < 1) {
				WHY("%sshape %s of %s: malformed (name or max size)", wl ? "; " : "",
				    sh->name ? sh->name : "?", drv->api->name);
				continue;
			}
			nap_shape_key(drv->api->name, sh->name, key, sizeof(key));
			if(state_group_backed_off(h->db, key, &off, &until, NULL) == 0 && off) {
				WHY("%sshape %s: backed off after a failed creation", wl ? "; " : "", sh->name);
				continue;
			}
			if(!pick_zone(h, sh, nd.zone, &zone)) {
				WHY("%sshape %s: not offered in zone %s", wl ? "; " : "", sh->name,
				    nd.zone ? nd.zone : "(the cloud names none)");
				continue;
			}
			make_id(sh->name, req_uid, h->now, zone, id);
			g = shape_group(h, drv, sh, id, zone, nd.labels, nd.nlabels, nd.taints, nd.ntaints, sh->max_size,
					w, sizeof(w));
			if(!g) {
				WHY("%sshape %s: %s", wl ? "; " : "", sh->name, w);
				continue;
			}
			if(*n == cap) {
				cap = cap ? 2 * cap : 8;
				nv = arena_array(h->ar, cap, sizeof(*nv));
				if(!nv)
					break;
				if(*n)
					memcpy(nv, v, *n * sizeof(*nv));
				v = nv;
			}
			v[(*n)++] = *g;
		}
		drv->api->release_shapes(drv->state, sv, ns);
	}
	if(*n && defer_unlist(h, v, *n)) {
		*n = 0;
		v = NULL;
	}
	*out = v;
}

/* ---- records ---------------------------------------------------------- */

static json_object *record_of(const pr_class_group *g, bool created, int64_t empty_since)
{
	const nap_new *nn = g->nap_new;
	json_object *o = json_object_new_object(), *lab = json_object_new_object(), *tv = json_object_new_array();
	size_t i;
	json_object_object_add(o, "driver", json_object_new_string(g->drv->api->name));
	json_object_object_add(o, "shape", json_object_new_string(nn->shape));
	if(nn->zone)
		json_object_object_add(o, "zone", json_object_new_string(nn->zone));
	for(i = 0; i < nn->nlabels; i++)
		json_object_object_add(lab, nn->labels[i].key, json_object_new_string(nn->labels[i].value));
	json_object_object_add(o, "labels", lab);
	for(i = 0; i < nn->ntaints; i++) {
		json_object *t = json_object_new_object();
		json_object_object_add(t, "key", json_object_new_string(nn->taints[i].key));
		json_object_object_add(t, "value", json_object_new_string(nn->taints[i].value ? nn->taints[i].value : ""));
		json_object_object_add(t, "effect", json_object_new_string(nn->taints[i].effect));
		json_object_array_add(tv, t);
	}
	json_object_object_add(o, "taints", tv);
	json_object_object_add(o, "max", json_object_new_int(nn->max_size));
	json_object_object_add(o, "owner", json_object_new_string(nn->owner ? nn->owner : ""));
	json_object_object_add(o, "plan", json_object_new_string(nn->plan_id ? nn->plan_id : ""));
	json_object_object_add(o, "created", json_object_new_boolean(created));
	json_object_object_add(o, "emptySince", json_object_new_int64(empty_since));
	return o;
}

int nap__put_record(state_db *db, const char *id, json_object *o, prd_err *e)
{
	return state_nap_put(db, id, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), e);
}

int nap_record(const pr_class_host *h, pr_class_group *g, const char *plan_id, prd_err *e)
{
	char owner[AT_OWNER_MAX];
	json_object *o;
	int rc;
	if(!g->nap_new)
		return 0;
	pr_owner_token(plan_id, owner);
	g->nap_new->plan_id = arena_strdup(h->ar, plan_id);
	g->nap_new->owner = arena_strdup(h->ar, owner);
	if(!g->nap_new->plan_id || !g->nap_new->owner)
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	o = record_of(g, false, 0);
	rc = nap__put_record(h->db, g->id, o, e);
	json_object_put(o);
	return rc;
}


char *nap_spec_of(const at_choice *ch, size_t nparts)
{
	json_object *all = NULL;
	char *out = NULL;
	size_t i;
	for(i = 0; i < ch->n && i < nparts; i++) {
		pr_class_group *g = ch->parts[i].g;
		if(!g->nap_new || !g->nap_new->plan_id)
			continue;
		if(!all && !(all = json_object_new_object()))
			return NULL;
		json_object_object_add(all, g->id, record_of(g, false, 0));
	}
	if(all)
		out = str_dup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN));
	json_object_put(all);
	return out;
}

/* Which place group `id` has in the plan's comma-separated group list, or
 * -1. */
static int place_of(const char *groups, const char *id)
{
	size_t n = strlen(id);
	const char *p = groups;
	int i = 0;
	while(p && *p) {
		size_t k = strcspn(p, ",");
		if(k == n && !strncmp(p, id, n))
			return i;
		p += k + (p[k] == ',');
		i++;
	}
	return -1;
}

bool nap_adopt_specs(const pr_class_host *h, const kube_provreq *pr, const char *plan, char *why, size_t len)
{
	char *text = pr_details_get(pr, PR_DETAIL_NAP_SPEC), *groups = pr_details_get(pr, PR_DETAIL_GROUP);
	json_object *all = NULL;
	bool ok = true;
	if(!text || !groups || !h->db || !h->drivers)
		goto out;
	all = json_tokener_parse(text);
	if(!all || !json_object_is_type(all, json_type_object)) {
		snprintf(why, len, "its auto-provisioned groups are not a JSON object");
		ok = false;
		goto out;
	}
	json_object_object_foreach(all, id, rec) {
		char intent[400], token[PR_OWNER_MAX];
		const char *dname = nap__jstr(rec, "driver");
		cloud_driver *drv = dname ? cloud_drivers_find(h->drivers, dname) : NULL;
		int at = place_of(groups, id);
		json_object *copy = NULL;
		if(at < 0 || !json_object_is_type(rec, json_type_object) || !nap__jstr(rec, "shape") || !drv ||
		   !cloud_driver_naps(drv->api) || nap__jint(rec, "max") < 1) {
			snprintf(why, len, "its auto-provisioned group %.100s is not one of its groups or not one a loaded "
				 "driver can make", id);
			ok = false;
			break;
		}
		snprintf(intent, sizeof(intent), "%s#%d", plan, at);
		pr_owner_token(intent, token);
		if(!nap__jstr(rec, "owner") || strcmp(nap__jstr(rec, "owner"), token) || !nap__jstr(rec, "plan") ||
		   strcmp(nap__jstr(rec, "plan"), intent)) {
			snprintf(why, len, "its auto-provisioned group %.100s names another plan", id);
			ok = false;
			break;
		}
		if(nap_group_recorded(h, id))
			continue; /* known here */
		/* Not created as far as this store knows: nap_pending_group
		 * waits for every driver's listing before trusting that. */
		if(json_object_deep_copy(rec, &copy, NULL) == 0) {
			prd_err e;
			json_object_object_add(copy, "created", json_object_new_boolean(false));
			json_object_object_add(copy, "emptySince", json_object_new_int64(0));
			if(nap__put_record(h->db, id, copy, &e))
				log_warn("cannot take up an auto-provisioned group from a request's status", "group", id,
					 "error", e.msg);
			else
				log_info("took up an auto-provisioned group a plan in a request's status creates", "group",
					 id, "request", pr->meta.name);
			json_object_put(copy);
		}
	}
out:
	json_object_put(all);
	free(text);
	free(groups);
	return ok;
}

int nap_create(pr_class_group *g, prd_cloud_error *de)
{
	nap_new *nn = g->nap_new;
	prd_cloud_group_create rq;
	prd_err e;
	char key[300];
	int rc;
	if(!nn)
		return 0;
	memset(de, 0, sizeof(*de));
	memset(&rq, 0, sizeof(rq));
	rq.struct_size = sizeof(rq);
	rq.group_id = g->id;
	rq.shape = nn->shape;
	rq.zone = nn->zone;
	rq.labels = nn->labels;
	rq.nlabels = nn->nlabels;
	rq.taints = nn->taints;
	rq.ntaints = nn->ntaints;
	rq.max_size = nn->max_size;
	rq.owner = nn->owner;
	rq.fence_key = g->fence_term ? g->fence_key : NULL;
	rq.fence_term = g->fence_term; /* (a 1.5 driver does not read them) */
	rc = g->drv->api->create_group(g->drv->state, &rq, de);
	de->message[sizeof(de->message) - 1] = '\0';
	nap_shape_key(g->drv->api->name, nn->shape, key, sizeof(key));
	if(rc) {
		metrics_counter_add(M_SCALEUPS, METRICS_L(g->id, "group_create_failed"), 1);
		log_warn("cannot create an auto-provisioned node group; the shape is backed off", "group", g->id, "shape",
			 nn->shape, "error", de->message);
		if(nn->db)
			state_group_fail(nn->db, key, de->message, NULL, NULL);
		/* Someone else's group of that name is no conflict of targets:
		 * the plan fails and rolls back like any refused call. */
		return rc == PRD_CLOUD_ECONFLICT ? PRD_CLOUD_EIO : rc;
	}
	log_info("created an auto-provisioned node group", "group", g->id, "shape", nn->shape, "zone",
		 nn->zone ? nn->zone : "", "plan", nn->plan_id ? nn->plan_id : "");
	if(nn->db) {
		json_object *o = record_of(g, true, 0);
		if(nap__put_record(nn->db, g->id, o, &e))
			log_warn("cannot note the creation of an auto-provisioned group (the next pass finds it listed)",
				 "group", g->id, "error", e.msg);
		json_object_put(o);
		state_group_success(nn->db, key, NULL);
	}
	g->nap_owner = NULL; /* (arena-owned groups keep no copy) */
	g->nap_new = NULL;
	return 0;
}

/* A record's JSON (caller puts), or NULL. */
json_object *nap__record_get(state_db *db, const char *id)
{
	state_nap r;
	json_object *o = NULL;
	if(state_nap_get(db, id, &r, NULL) == 0) {
		o = json_tokener_parse(r.spec);
		state_nap_clear(&r);
	}
	return o;
}

const char *nap__jstr(json_object *o, const char *k)
{
	json_object *v;
	return o && json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : NULL;
}

int64_t nap__jint(json_object *o, const char *k)
{
	json_object *v;
	return o && json_object_object_get_ex(o, k, &v) ? json_object_get_int64(v) : 0;
}

bool nap__jbool(json_object *o, const char *k)
{
	json_object *v;
	return o && json_object_object_get_ex(o, k, &v) && json_object_get_boolean(v);
}

void nap_fail_shape(const pr_class_host *h, const char *id, const char *cause)
{
	json_object *o = h->db ? nap__record_get(h->db, id) : NULL;
	const char *drv = nap__jstr(o, "driver"), *shape = nap__jstr(o, "shape");
	char key[300];
	if(drv && shape) {
		nap_shape_key(drv, shape, key, sizeof(key));
		state_group_fail(h->db, key, cause, NULL, NULL);
		log_warn("a plan on an auto-provisioned group failed; its shape is backed off", "group", id, "shape",
			 shape, "cause", cause);
	}
	json_object_put(o);
}

bool nap_group_recorded(const pr_class_host *h, const char *id)
{
	state_nap r;
	if(!h->db || state_nap_get(h->db, id, &r, NULL))
		return false;
	state_nap_clear(&r);
	return true;
}

/* The pass's cache of pending groups (by id) lives in the arena. */
typedef struct pend {
	struct pend *next;
	pr_class_group *g;
} pend;

pr_class_group *nap_pending_group(const pr_class_host *h, const char *id)
{
	json_object *o, *lab, *tv;
	const char *dname, *shape, *zone;
	cloud_driver *drv;
	prd_cloud_shape *sv = NULL;
	prd_cloud_label *labels = NULL;
	prd_cloud_taint *taints = NULL;
	size_t ns = 0, i, nl = 0, nt = 0;
	pr_class_group *g = NULL;
	prd_cloud_error de;
	char why[300];
	/* Only a group the cloud surely does not have: every driver listed
	 * its groups and the record says it was never created. Anything else
	 * is a group whose instances cannot be told now (wait for a listing). */
	if(!h->db || !h->drivers || !h->groups_complete || !(o = nap__record_get(h->db, id)))
		return NULL;
	if(nap__jbool(o, "created"))
		goto done;
	dname = nap__jstr(o, "driver");
	shape = nap__jstr(o, "shape");
	zone = nap__jstr(o, "zone");
	drv = dname ? cloud_drivers_find(h->drivers, dname) : NULL;
	if(!drv || !shape || !cloud_driver_naps(drv->api))
		goto done;
	if(json_object_object_get_ex(o, "labels", &lab) && json_object_is_type(lab, json_type_object)) {
		labels = arena_array(h->ar, (size_t)json_object_object_length(lab) + 1, sizeof(*labels));
		json_object_object_foreach(lab, k, v) {
			if(!labels)
				break;
			labels[nl].key = arena_strdup(h->ar, k);
			labels[nl++].value = arena_strdup(h->ar, json_object_get_string(v));
		}
	}
	if(json_object_object_get_ex(o, "taints", &tv) && json_object_is_type(tv, json_type_array)) {
		size_t count = json_object_array_length(tv);
		taints = arena_array(h->ar, count + 1, sizeof(*taints));
		for(i = 0; taints && i < count; i++) {
			json_object *t = json_object_array_get_idx(tv, i);
			taints[nt].key = arena_strdup(h->ar, nap__jstr(t, "key") ? nap__jstr(t, "key") : "");
			taints[nt].value = arena_strdup(h->ar, nap__jstr(t, "value") ? nap__jstr(t, "value") : "");
			taints[nt++].effect = arena_strdup(h->ar, nap__jstr(t, "effect") ? nap__jstr(t, "effect") : "NoSchedule");
		}
	}
	memset(&de, 0, sizeof(de));
	if(drv->api->shapes(drv->state, &sv, &ns, &de))
		goto done;
	for(i = 0; i < ns && !g; i++) {
		const prd_cloud_shape *sh = cloud_shape_at(drv->api, sv, i);
		if(sh->name && !strcmp(sh->name, shape))
			g = shape_group(h, drv, sh, id, zone, labels, nl, taints, nt, (int32_t)nap__jint(o, "max"), why,
					sizeof(why));
	}
	drv->api->release_shapes(drv->state, sv, ns);
	if(g && defer_unlist(h, g, 1))
		g = NULL;
	if(g) {
		g->nap_new->plan_id = arena_strdup(h->ar, nap__jstr(o, "plan") ? nap__jstr(o, "plan") : "");
		g->nap_new->owner = arena_strdup(h->ar, nap__jstr(o, "owner") ? nap__jstr(o, "owner") : "");
		if(!g->nap_new->plan_id || !g->nap_new->owner || !g->nap_new->owner[0])
			g = NULL;
	}
done:
	json_object_put(o);
	return g;
}

/* A group of the pass by id, or one a plan creates that the cloud does
 * not list yet (here, below the plan's files, since those groups are this
 * file's records): at_find_group in atomic_int.h. */
pr_class_group *at_find_group(const pr_class_host *h, const char *id)
{
	size_t i;
	hmap *nap;
	pr_class_group *g;
	for(i = 0; i < h->ngroups; i++)
		if(!strcmp(h->groups[i].id, id))
			return &h->groups[i];
	/* A group a plan creates (node auto-provisioning) that the cloud
	 * does not list yet: the same object for the whole pass. */
	nap = at__pass_nap(h);
	if(nap && (g = hmap_get(nap, id)))
		return g;
	g = nap_pending_group(h, id);
	if(g && nap)
		hmap_put(nap, g->id, g);
	return g;
}

const char *nap_words(const pr_class_group *g, char *out, size_t len)
{
	if(g->nap_new)
		snprintf(out, len, "new node group %s of shape %s%s%s", g->id, g->nap_new->shape,
			 g->nap_new->zone ? " in zone " : "", g->nap_new->zone ? g->nap_new->zone : "");
	else
		snprintf(out, len, "%s", g->id);
	return out;
}

/* resource.k8s.io/v1 objects → what the scheduling simulation needs
 * (see dra.h for what is modelled and what is refused). */
#include "provreq/dra.h"
#include "ops/log.h"
#include "sched/cel.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FP_PRIME 1099511628211ULL
#define FP_BASIS 14695981039346656037ULL

static json_object *get(json_object *o, const char *k)
{
	json_object *v = NULL;
	if(o && json_object_is_type(o, json_type_object))
		json_object_object_get_ex(o, k, &v);
	return v;
}

static const char *get_str(json_object *o, const char *k)
{
	json_object *v = get(o, k);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static size_t arr_len(json_object *v)
{
	return v && json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
}

static void put_json(void *p)
{
	json_object_put(p);
}

static uint64_t fp_str(uint64_t h, const char *s)
{
	for(; s && *s; s++)
		h = (h ^ (uint8_t)*s) * FP_PRIME;
	return (h ^ 0xffu) * FP_PRIME;
}

static uint64_t fp_mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

void pr_dra_init(pr_dra *d)
{
	memset(d, 0, sizeof(*d));
	hmap_init(&d->classes, put_json);
	hmap_init(&d->templates, put_json);
	hmap_init(&d->nodes, NULL);
	hmap_init(&d->where, NULL);
}

void pr_dra_free(pr_dra *d)
{
	hmap_free(&d->classes);
	hmap_free(&d->templates);
	hmap_free(&d->nodes);
	hmap_free(&d->where);
	memset(d, 0, sizeof(*d));
}

/* ---- ResourceSlices ------------------------------------------------------ */

/* "domain/id" for an attribute or capacity name of a device of `driver`. */
static const char *qualify(arena *a, const char *driver, const char *name)
{
	char q[600];
	if(strchr(name, '/'))
		return arena_strdup(a, name);
	snprintf(q, sizeof(q), "%s/%s", driver, name);
	return arena_strdup(a, q);
}

static int conv_attrs(arena *a, const char *driver, json_object *map, sched_device *dv)
{
	sched_dev_attr *at;
	size_t n = 0;
	if(!map || !json_object_is_type(map, json_type_object))
		return 0;
	at = arena_array(a, (size_t)json_object_object_length(map) + 1, sizeof(*at));
	if(!at)
		return PRD_ENOMEM;
	json_object_object_foreach(map, k, v) {
		json_object *x;
		memset(&at[n], 0, sizeof(at[n]));
		if(!(at[n].name = qualify(a, driver, k)))
			return PRD_ENOMEM;
		if((x = get(v, "int")) && json_object_is_type(x, json_type_int)) {
			at[n].type = SCHED_ATTR_INT;
			at[n].i = json_object_get_int64(x);
		} else if((x = get(v, "bool")) && json_object_is_type(x, json_type_boolean)) {
			at[n].type = SCHED_ATTR_BOOL;
			at[n].b = json_object_get_boolean(x);
		} else if((x = get(v, "string")) && json_object_is_type(x, json_type_string)) {
			at[n].type = SCHED_ATTR_STRING;
			at[n].s = json_object_get_string(x);
		} else if((x = get(v, "version")) && json_object_is_type(x, json_type_string)) {
			at[n].type = SCHED_ATTR_VERSION;
			at[n].s = json_object_get_string(x);
		} else {
			continue; /* no value of a known type: as if absent */
		}
		n++;
	}
	dv->attrs = at;
	dv->n_attrs = n;
	return 0;
}

static int conv_caps(arena *a, const char *driver, json_object *map, sched_device *dv)
{
	sched_dev_cap *cp;
	size_t n = 0;
	if(!map || !json_object_is_type(map, json_type_object))
		return 0;
	cp = arena_array(a, (size_t)json_object_object_length(map) + 1, sizeof(*cp));
	if(!cp)
		return PRD_ENOMEM;
	json_object_object_foreach(map, k, v) {
		const char *val = get_str(v, "value");
		if(!val || qty_parse(val, &cp[n].value, NULL))
			continue; /* unreadable: as if absent (selectors on it fail) */
		if(!(cp[n].name = qualify(a, driver, k)))
			return PRD_ENOMEM;
		n++;
	}
	dv->caps = cp;
	dv->n_caps = n;
	return 0;
}

static uint64_t device_fp(const char *node, const sched_device *dv)
{
	uint64_t h = fp_str(fp_str(fp_str(fp_str(FP_BASIS, node), dv->driver), dv->pool), dv->name);
	char q[QTY_STR_MAX];
	size_t i;
	for(i = 0; i < dv->n_attrs; i++) {
		char num[32];
		snprintf(num, sizeof(num), "%d:%lld:%d", (int)dv->attrs[i].type, (long long)dv->attrs[i].i,
			 (int)dv->attrs[i].b);
		h = fp_str(fp_str(fp_str(h, dv->attrs[i].name), num), dv->attrs[i].s);
	}
	for(i = 0; i < dv->n_caps; i++)
		h = fp_str(fp_str(h, dv->caps[i].name), qty_str(&dv->caps[i].value, q));
	return fp_mix(h);
}

/* Append a slice's devices to its node's list (`node`, when not NULL,
 * instead of spec.nodeName: a node group template's). */
static int load_slice(pr_dra *d, arena *a, const char *slice, json_object *spec, const char *node)
{
	const char *driver = get_str(spec, "driver");
	const char *pool = get_str(get(spec, "pool"), "name");
	json_object *devs = get(spec, "devices");
	size_t i, n = arr_len(devs), k;
	pr_dra_node *nd;
	sched_device *v;

	if(!node)
		node = get_str(spec, "nodeName");
	if(!driver || !pool) {
		log_warn("ResourceSlice without driver or pool left out", "slice", slice);
		return 0;
	}
	if(!node || !*node) {
		d->skipped_slices++;
		return 0;
	}
	nd = hmap_get(&d->nodes, node);
	if(!nd) {
		if(!(nd = arena_alloc(a, sizeof(*nd))) || hmap_put(&d->nodes, node, nd))
			return PRD_ENOMEM;
		memset(nd, 0, sizeof(*nd));
	}
	if(!(v = arena_array(a, nd->n + n + 1, sizeof(*v))))
		return PRD_ENOMEM;
	if(nd->n)
		memcpy(v, nd->devs, nd->n * sizeof(*v));
	k = nd->n;
	if(!(node = arena_strdup(a, node)))
		return PRD_ENOMEM;
	for(i = 0; i < n && k < SCHED_DEV_MAX; i++) {
		json_object *dv = json_object_array_get_idx(devs, i);
		const char *name = get_str(dv, "name");
		char id[800];
		int rc;
		/* Tainted devices and partitions of shared counters are never
		 * offered: provreqd does not model tolerations of device taints
		 * or counter sets, so counting them could be a wrong yes. */
		if(!name || arr_len(get(dv, "taints")) || arr_len(get(dv, "consumesCounters")))
			continue;
		memset(&v[k], 0, sizeof(v[k]));
		v[k].driver = driver;
		v[k].pool = pool;
		v[k].name = name;
		if((rc = conv_attrs(a, driver, get(dv, "attributes"), &v[k])) ||
		   (rc = conv_caps(a, driver, get(dv, "capacity"), &v[k])))
			return rc;
		snprintf(id, sizeof(id), "%s/%s/%s", driver, pool, name);
		if(hmap_put(&d->where, id, (void *)node))
			return PRD_ENOMEM;
		d->fp += device_fp(node, &v[k]);
		k++;
	}
	if(k == SCHED_DEV_MAX && i < n)
		log_warn("node publishes more devices than the simulation keeps; the rest are left out", "node", node,
			 "kept", LOGI(SCHED_DEV_MAX));
	nd->devs = v;
	nd->n = k;
	return 0;
}

/* The newest generation of each pool ("driver/pool" → generation). */
static int pool_generations(const kube_meta *const *objs, size_t n, hmap *gen, arena *a)
{
	size_t i;
	for(i = 0; i < n; i++) {
		const kube_draobj *o = kube_as_draobj(objs[i]);
		json_object *pool, *g;
		const char *driver, *name;
		int64_t *have, v;
		char key[600];
		if(!o || o->meta.kind != KUBE_KIND_RESOURCESLICE)
			continue;
		pool = get(o->spec, "pool");
		driver = get_str(o->spec, "driver");
		name = get_str(pool, "name");
		g = get(pool, "generation");
		if(!driver || !name)
			continue;
		v = g && json_object_is_type(g, json_type_int) ? json_object_get_int64(g) : 0;
		snprintf(key, sizeof(key), "%s/%s", driver, name);
		have = hmap_get(gen, key);
		if(!have) {
			if(!(have = arena_alloc(a, sizeof(*have))) || hmap_put(gen, key, have))
				return PRD_ENOMEM;
			*have = v;
		} else if(v > *have) {
			*have = v;
		}
	}
	return 0;
}

static bool newest(const hmap *gen, json_object *spec)
{
	json_object *pool = get(spec, "pool"), *g = get(pool, "generation");
	const char *driver = get_str(spec, "driver"), *name = get_str(pool, "name");
	const int64_t *have;
	char key[600];
	if(!driver || !name)
		return true; /* load_slice says why it is left out */
	snprintf(key, sizeof(key), "%s/%s", driver, name);
	have = hmap_get(gen, key);
	return !have || (g && json_object_is_type(g, json_type_int) ? json_object_get_int64(g) : 0) == *have;
}

/* ---- ResourceClaims -------------------------------------------------------- */

static int load_claim(pr_dra *d, arena *a, const kube_draobj *o, size_t *cap)
{
	json_object *res = get(get(o->allocation, "devices"), "results");
	size_t i, n = arr_len(res);
	for(i = 0; i < n; i++) {
		json_object *r = json_object_array_get_idx(res, i);
		const char *driver = get_str(r, "driver"), *pool = get_str(r, "pool"), *dev = get_str(r, "device");
		const char *node;
		char id[800];
		if(!driver || !pool || !dev)
			continue;
		snprintf(id, sizeof(id), "%s/%s/%s", driver, pool, dev);
		if(!(node = hmap_get(&d->where, id)))
			continue; /* a device of no node the simulation knows */
		if(d->ntaken == *cap) {
			size_t nc = *cap ? *cap * 2 : 64;
			const char **t = arena_array(a, nc, sizeof(*t)), **tn = arena_array(a, nc, sizeof(*tn));
			if(!t || !tn)
				return PRD_ENOMEM;
			if(d->ntaken) {
				memcpy(t, d->taken, d->ntaken * sizeof(*t));
				memcpy(tn, d->taken_node, d->ntaken * sizeof(*tn));
			}
			d->taken = t;
			d->taken_node = tn;
			*cap = nc;
		}
		if(!(d->taken[d->ntaken] = arena_strdup(a, id)))
			return PRD_ENOMEM;
		d->taken_node[d->ntaken++] = node;
		d->fp += fp_mix(fp_str(fp_str(FP_BASIS ^ 0x5a5a, node), id));
	}
	return 0;
}

int pr_dra_load(pr_dra *d, arena *a, const kube_meta *const *objs, size_t n, const hmap *need,
		prd_err *err)
{
	hmap gen;
	size_t i, cap = 0;
	int rc = 0;

	d->served = true;
	hmap_init(&gen, NULL);
	if((rc = pool_generations(objs, n, &gen, a)))
		goto done;
	/* Slices first: claims name their devices by pool. */
	for(i = 0; i < n && !rc; i++) {
		const kube_draobj *o = kube_as_draobj(objs[i]);
		if(o && o->meta.kind == KUBE_KIND_RESOURCESLICE && o->spec && newest(&gen, o->spec))
			rc = load_slice(d, a, o->meta.name, o->spec, NULL);
	}
	for(i = 0; i < n && !rc; i++) {
		const kube_draobj *o = kube_as_draobj(objs[i]);
		json_object *copy = NULL;
		char key[600];
		if(!o)
			continue;
		switch(o->meta.kind) {
		case KUBE_KIND_RESOURCECLAIM:
			if(o->allocation)
				rc = load_claim(d, a, o, &cap);
			break;
		case KUBE_KIND_DEVICECLASS:
		case KUBE_KIND_RESOURCECLAIMTEMPLATE:
			if(o->meta.kind == KUBE_KIND_DEVICECLASS)
				snprintf(key, sizeof(key), "%s", o->meta.name);
			else
				snprintf(key, sizeof(key), "%s/%s", o->meta.ns, o->meta.name);
			if(o->meta.kind == KUBE_KIND_RESOURCECLAIMTEMPLATE && need && !hmap_has(need, key))
				break;
			if(!o->spec)
				break;
			if(json_object_deep_copy(o->spec, &copy, NULL) ||
			   hmap_put(o->meta.kind == KUBE_KIND_DEVICECLASS ? &d->classes : &d->templates, key, copy)) {
				json_object_put(copy);
				rc = PRD_ENOMEM;
			}
			break;
		default:
			break;
		}
	}
done:
	hmap_free(&gen);
	if(rc)
		return prd_err_set(err, rc, "reading resource.k8s.io objects: %s", prd_strerror(rc));
	return 0;
}

int pr_dra_template_devices(arena *a, json_object *slices, const char *node, const sched_device **devs,
			    size_t *n, prd_err *err)
{
	pr_dra d;
	size_t i, len = arr_len(slices);
	int rc = 0;
	*devs = NULL;
	*n = 0;
	if(slices && !json_object_is_type(slices, json_type_array))
		return prd_err_set(err, PRD_EINVAL, "template ResourceSlices: not a JSON array");
	pr_dra_init(&d);
	for(i = 0; i < len && !rc; i++) {
		json_object *o = json_object_array_get_idx(slices, i), *spec = get(o, "spec");
		json_object *pool = get(spec, "pool");
		char slice[64];
		snprintf(slice, sizeof(slice), "template slice %zu", i);
		if(!spec || !get_str(spec, "driver"))
			rc = prd_err_set(err, PRD_EINVAL, "%s: no spec.driver", slice);
		else if(!get_str(pool, "name"))
			rc = prd_err_set(err, PRD_EINVAL, "%s: no spec.pool.name", slice);
		else
			rc = load_slice(&d, a, slice, spec, node);
	}
	if(!rc)
		*devs = pr_dra_node_devices(&d, node, n);
	pr_dra_free(&d);
	return rc;
}

const sched_device *pr_dra_node_devices(const pr_dra *d, const char *node, size_t *n)
{
	const pr_dra_node *nd = d ? hmap_get(&d->nodes, node) : NULL;
	*n = nd ? nd->n : 0;
	return nd ? nd->devs : NULL;
}

/* ---- a pod's claims -------------------------------------------------------- */

static void free_cel(void *p)
{
	sched_cel_free(p);
}

/* Compile the CEL selectors of `sels` (a DeviceClass's or a request's)
 * onto out[*n]. `where` names them for messages. */
static int add_selectors(arena *a, json_object *sels, const char *where, const sched_cel **out, size_t *n,
			 size_t cap, prd_err *err)
{
	size_t i, len = arr_len(sels);
	for(i = 0; i < len; i++) {
		json_object *cel = get(json_object_array_get_idx(sels, i), "cel");
		const char *expr = get_str(cel, "expression");
		sched_cel *c = NULL;
		prd_err ce;
		int rc;
		if(!expr)
			return prd_err_set(err, PRD_EUNSUPPORTED,
					   "%s.selectors[%zu]: a selector other than cel: provreqd cannot tell whether "
					   "devices match", where, i);
		if(*n == cap)
			return prd_err_set(err, PRD_ERANGE, "%s: more than %zu selectors", where, cap);
		if((rc = sched_cel_compile(expr, &c, &ce)))
			return prd_err_set(err, rc == PRD_EUNSUPPORTED ? PRD_EUNSUPPORTED : PRD_EINVAL,
					   "%s selector in %s.selectors[%zu]: %s: provreqd cannot tell whether devices "
					   "match",
					   rc == PRD_EUNSUPPORTED ? "unsupported" : "invalid", where, i, ce.msg);
		if(arena_defer(a, free_cel, c)) {
			sched_cel_free(c);
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		}
		out[(*n)++] = c;
	}
	return 0;
}

#define SELS_MAX 64

/* One request of a ResourceClaimTemplate → q. */
static int conv_request(const pr_dra *d, arena *a, json_object *r, const char *where, sched_dev_request *q,
			prd_err *err)
{
	json_object *ex = get(r, "exactly"), *cnt, *admin, *cls_spec;
	const char *cls, *mode;
	const sched_cel **sels;
	char w2[500];
	size_t n = 0;
	int rc;

	if(arr_len(get(r, "firstAvailable")))
		return prd_err_set(err, PRD_EUNSUPPORTED,
				   "%s.firstAvailable: prioritized alternatives are not simulated", where);
	if(!ex)
		return prd_err_set(err, PRD_EINVAL, "%s: neither exactly nor firstAvailable", where);
	admin = get(ex, "adminAccess");
	if(admin && json_object_get_boolean(admin))
		return prd_err_set(err, PRD_EUNSUPPORTED, "%s.exactly.adminAccess: admin access is not simulated",
				   where);
	if(get(ex, "capacity"))
		return prd_err_set(err, PRD_EUNSUPPORTED,
				   "%s.exactly.capacity: consumable capacity requests are not simulated", where);
	cls = get_str(ex, "deviceClassName");
	if(!cls || !*cls)
		return prd_err_set(err, PRD_EINVAL, "%s.exactly.deviceClassName: required", where);
	if(!hmap_has(&d->classes, cls))
		return prd_err_set(err, PRD_ENOTFOUND, "DeviceClass %s", cls);
	cls_spec = hmap_get(&d->classes, cls);
	if(!(sels = arena_array(a, SELS_MAX, sizeof(*sels))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	snprintf(w2, sizeof(w2), "DeviceClass %s spec", cls);
	if((rc = add_selectors(a, get(cls_spec, "selectors"), w2, sels, &n, SELS_MAX, err)))
		return rc;
	snprintf(w2, sizeof(w2), "%.400s.exactly", where);
	if((rc = add_selectors(a, get(ex, "selectors"), w2, sels, &n, SELS_MAX, err)))
		return rc;
	mode = get_str(ex, "allocationMode");
	q->all = mode && !strcmp(mode, "All");
	if(mode && *mode && !q->all && strcmp(mode, "ExactCount"))
		return prd_err_set(err, PRD_EINVAL, "%s.exactly.allocationMode: unknown mode \"%.50s\"", where, mode);
	cnt = get(ex, "count");
	q->count = 1;
	if(cnt && !q->all) {
		if(!json_object_is_type(cnt, json_type_int) || json_object_get_int64(cnt) < 1 ||
		   json_object_get_int64(cnt) > SCHED_DEV_MAX)
			return prd_err_set(err, PRD_EINVAL, "%s.exactly.count: must be an integer in [1, %d]", where,
					   SCHED_DEV_MAX);
		q->count = json_object_get_int64(cnt);
	}
	q->selectors = (const struct sched_cel *const *)sels;
	q->n_selectors = n;
	q->label = arena_strdup(a, where);
	return q->label ? 0 : prd_err_set(err, PRD_ENOMEM, "out of memory");
}

/* The requests of one pod claim (spec.resourceClaims[i]) onto q[*n]. */
static int conv_claim(const pr_dra *d, arena *a, json_object *pc, size_t i, const char *ns, sched_dev_request *q,
		      size_t *n, prd_err *err)
{
	const char *name = get_str(pc, "name"), *tmpl = get_str(pc, "resourceClaimTemplateName");
	const char *shared = get_str(pc, "resourceClaimName");
	json_object *spec, *devs, *reqs;
	char key[600];
	size_t j, nr;
	int rc;

	if(shared && *shared)
		return prd_err_set(err, PRD_EUNSUPPORTED,
				   "spec.resourceClaims[%zu] (%s): resourceClaimName %.100s: a ResourceClaim shared by "
				   "the pods is not simulated (only resourceClaimTemplateName)",
				   i, name ? name : "?", shared);
	if(!tmpl || !*tmpl)
		return prd_err_set(err, PRD_EINVAL, "spec.resourceClaims[%zu]: resourceClaimTemplateName required", i);
	snprintf(key, sizeof(key), "%s/%s", ns, tmpl);
	if(!(spec = hmap_get(&d->templates, key)))
		return prd_err_set(err, PRD_ENOTFOUND, "ResourceClaimTemplate %s", tmpl);
	devs = get(get(spec, "spec"), "devices");
	if(arr_len(get(devs, "constraints")))
		return prd_err_set(err, PRD_EUNSUPPORTED,
				   "ResourceClaimTemplate %s: spec.devices.constraints (matchAttribute) are not simulated",
				   tmpl);
	reqs = get(devs, "requests");
	nr = arr_len(reqs);
	for(j = 0; j < nr; j++) {
		char where[400];
		const char *rn = get_str(json_object_array_get_idx(reqs, j), "name");
		if(*n == SCHED_DEV_REQ_MAX)
			return prd_err_set(err, PRD_ERANGE, "more than %d device requests in one pod", SCHED_DEV_REQ_MAX);
		snprintf(where, sizeof(where), "ResourceClaimTemplate %s spec.devices.requests[%zu] (%s)", tmpl, j,
			 rn ? rn : "?");
		if((rc = conv_request(d, a, json_object_array_get_idx(reqs, j), where, &q[*n], err)))
			return rc;
		(*n)++;
	}
	return 0;
}

int pr_dra_pod(const pr_dra *d, arena *a, json_object *spec, const char *ns, sched_pod_spec *p,
	       prd_err *err)
{
	json_object *claims = get(spec, "resourceClaims");
	size_t i, n = arr_len(claims), nq = 0;
	sched_dev_request *q;
	int rc;

	if(!n)
		return 0;
	if(!d || !d->served)
		return prd_err_set(err, PRD_EUNSUPPORTED,
				   "spec.resourceClaims: the pods claim devices through Dynamic Resource Allocation, "
				   "and provreqd cannot read resource.k8s.io/v1 objects here");
	if(!(q = arena_array(a, SCHED_DEV_REQ_MAX, sizeof(*q))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++)
		if((rc = conv_claim(d, a, json_object_array_get_idx(claims, i), i, ns, q, &nq, err)))
			return rc;
	p->dev_requests = q;
	p->n_dev_requests = nq;
	return 0;
}

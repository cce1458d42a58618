/* The snapshot stage: the pass's scheduling snapshot of nodes and pods,
 * and the bookings in it (see docs/development.md, "The pass"). Entry
 * point: pr__snapshot_build, which world.c calls while the caches are
 * locked; pr__snap books into it when the pass first asks for it, and
 * pr__snapshot_release gives the kept base back at the end of the pass.
 *
 * Reads: the world's Nodes, Pods and DRA view; the base kept from earlier
 * passes (c->base) and the fingerprints it was built from; the local
 * store's active bookings (state_booking_list_active) and the other
 * instances' (shards.c).
 * Writes: w->snap (a fork of c->base, or a new snapshot kept as the base
 * in informer mode), c->base_* and the nodes' fingerprint (c->nfp*); the
 * bookings and the class modules' reservations (PR_HOOK_RESERVE) into
 * w->snap, c->stats.bookings_held and snapshot_reuses/_mismatches (the
 * verify mode, cfg.verify_snapshot), the parsed bookings kept in c->bres;
 * a booking of a deleted request is removed from the store. */
#include "provreq/ctl_int.h"
#include "provreq/convert.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

/* ---- what the snapshot is built from, as one number ----------------------
 *
 * FNV-1a over what a node or pod gives the simulation (not its status
 * heartbeats or conditions), summed over all objects with their keys, so
 * the order of the caches does not matter. Two equal fingerprints mean a
 * rebuilt snapshot would hold the same nodes and pods. */

#define FP_PRIME 1099511628211ULL
#define FP_BASIS 14695981039346656037ULL

static uint64_t fp_str(uint64_t h, const char *s)
{
	for(; s && *s; s++)
		h = (h ^ (uint8_t)*s) * FP_PRIME;
	return (h ^ 0xffu) * FP_PRIME; /* a separator: "ab","c" differs from "a","bc" */
}

static uint64_t fp_int(uint64_t h, uint64_t v)
{
	int i;
	for(i = 0; i < 8; i++, v >>= 8)
		h = (h ^ (v & 0xffu)) * FP_PRIME;
	return h;
}

static uint64_t fp_kvs(uint64_t h, const kube_kv *kv, size_t n)
{
	size_t i;
	h = fp_int(h, n);
	for(i = 0; i < n; i++)
		h = fp_str(fp_str(h, kv[i].key), kv[i].value);
	return h;
}

static uint64_t fp_res(uint64_t h, const kube_res *r, size_t n)
{
	size_t i;
	h = fp_int(h, n);
	for(i = 0; i < n; i++)
		h = fp_int(fp_int(fp_str(h, r[i].name), r[i].q.lo), (uint64_t)r[i].q.hi);
	return h;
}

/* Mix a key's hash with its content's, to be summed (order-free). */
static uint64_t fp_mix(uint64_t key, uint64_t content)
{
	uint64_t x = key ^ (content * 0x9e3779b97f4a7c15ULL);
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

static uint64_t node_fp(const kube_node *n)
{
	uint64_t h = FP_BASIS;
	size_t i;
	if(!pr__node_usable(n))
		return 0; /* not in the snapshot */
	h = fp_kvs(h, n->labels, n->nlabels);
	h = fp_res(h, n->allocatable, n->nallocatable);
	h = fp_int(h, n->ntaints);
	for(i = 0; i < n->ntaints; i++)
		h = fp_int(fp_str(fp_str(h, n->taints[i].key), n->taints[i].value), n->taints[i].effect);
	h = fp_int(h, n->unschedulable);
	return fp_mix(fp_str(FP_BASIS, n->meta.name), h);
}

static uint64_t pod_fp(const kube_pod *p)
{
	uint64_t h = FP_BASIS;
	size_t i;
	if(!p->node_name || p->phase == KUBE_POD_SUCCEEDED || p->phase == KUBE_POD_FAILED)
		return 0; /* not in the snapshot */
	h = fp_str(fp_str(h, p->meta.ns), p->node_name);
	h = fp_kvs(h, p->labels, p->nlabels);
	h = fp_res(h, p->requests, p->nrequests);
	h = fp_int(h, p->nhost_ports);
	for(i = 0; i < p->nhost_ports; i++)
		h = fp_int(fp_int(fp_str(h, p->host_ports[i].host_ip), (uint64_t)p->host_ports[i].port),
			   p->host_ports[i].protocol);
	h = fp_str(h, p->affinity_json);
	return fp_mix(fp_str(fp_str(FP_BASIS, p->meta.ns), p->meta.name), h);
}

static uint64_t nodes_fp(const pr_world *w)
{
	uint64_t sum = 0;
	size_t i;
	for(i = 0; i < w->nnodes; i++)
		sum += node_fp(w->nodes[i]);
	return sum;
}

static uint64_t pods_fp(const pr_world *w)
{
	uint64_t sum = 0;
	size_t i;
	for(i = 0; i < w->npods; i++)
		sum += pod_fp(w->pods[i]);
	return sum;
}

/* A Node as the snapshot needs it, with the devices its ResourceSlices
 * publish; the conversion lives in arena `a`. */
static int node_spec(pr_world *w, arena *a, const kube_node *n, sched_node_spec *ns, prd_err *err)
{
	int rc = pr_conv_kube_node(a, n, ns, err);
	if(!rc)
		ns->devices = pr_dra_node_devices(&w->dra, n->meta.name, &ns->n_devices);
	return rc;
}

/* Devices ResourceClaims hold. */
static void take_devices(pr_world *w, sched_snapshot *s)
{
	size_t i, idx;
	for(i = 0; i < w->dra.ntaken; i++) {
		prd_err ce;
		if(sched_snapshot_find_node(s, w->dra.taken_node[i], &idx))
			continue; /* a node left out of the simulation */
		if(sched_snapshot_take_device(s, idx, w->dra.taken[i], &ce))
			log_warn("allocated device not marked taken", "error", ce.msg);
	}
}

/* Nodes and pods into a new snapshot.
 *
 * The snapshot copies what it keeps of a node or a pod: each one's
 * conversion lives in a scratch arena let go every SNAP_SCRATCH objects,
 * not in the pass's arena (600,000 running pods held about 100 MB there
 * until the pass ended).
 *
 * Pods go in node by node: a group of identical pods keeps one entry per
 * node it runs on, and consecutive pods of a group on one node make one
 * entry, where the cache's order made one per pod (600,000 entries at
 * 20,000 nodes and 600,000 pods in tests/bench, against 60,000 node by
 * node). The order costs two arrays of a 32-bit number per pod while the
 * pods go in; without them the pods go in in the cache's order. */
#define SNAP_SCRATCH 4096
#define NO_NODE UINT32_MAX

/* The snapshot's node of each pod that runs in it (NO_NODE for the
 * others), and the pods in node order: order[] holds the indexes into
 * w->pods of node k's pods from end[k - 1] (0 for k = 0) to end[k].
 * False when out of memory (nothing to free then). */
static bool pods_by_node(pr_world *w, size_t nnodes, uint32_t **order, uint32_t **end)
{
	uint32_t *at = NULL;
	size_t i;
	*order = NULL;
	*end = NULL;
	if(w->npods > NO_NODE || !(at = malloc((w->npods + 1) * sizeof(*at))) ||
	   !(*end = calloc(nnodes + 1, sizeof(**end))) || !(*order = malloc((w->npods + 1) * sizeof(**order)))) {
		free(at);
		free(*end);
		*end = NULL;
		return false;
	}
	for(i = 0; i < w->npods; i++) {
		const kube_pod *p = w->pods[i];
		size_t idx;
		at[i] = NO_NODE;
		if(!p->node_name || p->phase == KUBE_POD_SUCCEEDED || p->phase == KUBE_POD_FAILED)
			continue;
		if(sched_snapshot_find_node(w->snap, p->node_name, &idx)) {
			w->skipped_pods++;
			continue;
		}
		at[i] = (uint32_t)idx;
		(*end)[idx]++;
	}
	/* Counts to starts, then each pod to its node's next place: end[k]
	 * ends at node k's end. */
	{
		uint32_t sum = 0, c;
		size_t k;
		for(k = 0; k < nnodes; k++) {
			c = (*end)[k];
			(*end)[k] = sum;
			sum += c;
		}
	}
	for(i = 0; i < w->npods; i++)
		if(at[i] != NO_NODE)
			(*order)[(*end)[at[i]]++] = (uint32_t)i;
	free(at);
	return true;
}

/* Put pod p on node idx (its conversion in `scratch`, let go every
 * SNAP_SCRATCH pods). */
static void snapshot_pod(pr_world *w, arena *scratch, size_t *converted, const kube_pod *p, size_t idx)
{
	sched_pod_spec ps;
	prd_err ce;
	if(pr_conv_kube_pod(scratch, p, &ps, &ce) || sched_snapshot_add_pods(w->snap, idx, &ps, 1, &ce))
		log_warn("pod left out of the simulation", "pod", p->meta.name, "namespace", p->meta.ns, "error",
			 ce.msg);
	if(++*converted % SNAP_SCRATCH == 0) {
		arena_free(scratch);
		arena_init(scratch);
	}
}

static int snapshot_nodes_pods(pr_world *w, prd_err *err)
{
	size_t i, k, n, converted = 0;
	uint32_t *order, *end;
	arena scratch;
	w->snap = sched_snapshot_new();
	if(!w->snap || sched_snapshot_reserve_nodes(w->snap, w->nnodes))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	arena_init(&scratch);
	for(i = 0; i < w->nnodes; i++) {
		sched_node_spec ns;
		prd_err ce;
		if(!pr__node_usable(w->nodes[i]))
			continue;
		if(i % SNAP_SCRATCH == 0) {
			arena_free(&scratch);
			arena_init(&scratch);
		}
		if(node_spec(w, &scratch, w->nodes[i], &ns, &ce) ||
		   sched_snapshot_add_node(w->snap, &ns, NULL, &ce)) {
			log_warn("node left out of the simulation", "node", w->nodes[i]->meta.name, "error", ce.msg);
			continue;
		}
		w->ready_nodes++;
	}
	arena_free(&scratch);
	arena_init(&scratch);
	n = sched_snapshot_node_count(w->snap);
	if(pods_by_node(w, n, &order, &end)) {
		for(k = 0; k < n; k++)
			for(i = k ? end[k - 1] : 0; i < end[k]; i++)
				snapshot_pod(w, &scratch, &converted, w->pods[order[i]], k);
		free(order);
		free(end);
	} else {
		for(i = 0; i < w->npods; i++) {
			const kube_pod *p = w->pods[i];
			size_t idx;
			if(!p->node_name || p->phase == KUBE_POD_SUCCEEDED || p->phase == KUBE_POD_FAILED)
				continue;
			if(sched_snapshot_find_node(w->snap, p->node_name, &idx)) {
				w->skipped_pods++;
				continue;
			}
			snapshot_pod(w, &scratch, &converted, p, idx);
		}
	}
	arena_free(&scratch);
	take_devices(w, w->snap);
	return 0;
}

/* ---- the nodes' fingerprint, kept from the node cache's journal ------- */

typedef struct nfp_walk {
	pr_ctl *c;
	bool nomem;
} nfp_walk;

static void nfp_set(nfp_walk *nw, const char *name, uint64_t fp)
{
	pr_ctl *c = nw->c;
	uint64_t *old = hmap_get(&c->nfp, name), *v;
	c->nfp_sum += fp - (old ? *old : 0);
	if(!fp) {
		hmap_del(&c->nfp, name);
		return;
	}
	if(old) {
		*old = fp;
		return;
	}
	v = malloc(sizeof(*v));
	if(!v || hmap_put(&c->nfp, name, v)) {
		free(v);
		nw->nomem = true;
		return;
	}
	*v = fp;
}

static int nfp_changed(void *ud, const char *ns, const char *name)
{
	nfp_walk *nw = ud;
	const kube_node *n = (const kube_node *)kube_informer_get(nw->c->inf.nodes, ns, name);
	nfp_set(nw, name, n ? node_fp(n) : 0);
	return nw->nomem;
}

/* nodes_fp(w), in informer mode from the changes since the previous pass
 * instead of every node (read locks held). */
static uint64_t nodes_fp_now(pr_ctl *c, pr_world *w)
{
	nfp_walk nw = { c, false };
	size_t i;
	if(!pr__incremental(c, w))
		return nodes_fp(w);
	if(c->nfp_valid && c->nfp_gen == w->gen_nodes)
		return c->nfp_sum;
	if(!c->nfp_valid || kube_informer_changes(c->inf.nodes, c->nfp_gen, nfp_changed, &nw)) {
		hmap_free(&c->nfp);
		hmap_init(&c->nfp, free);
		c->nfp_sum = 0;
		nw.nomem = false;
		for(i = 0; i < w->nnodes && !nw.nomem; i++)
			nfp_set(&nw, w->nodes[i]->meta.name, node_fp(w->nodes[i]));
	}
	c->nfp_valid = !nw.nomem; /* (only reached when incremental) */
	c->nfp_gen = w->gen_nodes;
	return nw.nomem ? nodes_fp(w) : c->nfp_sum;
}

static int node_name_cmp(const void *a, const void *b)
{
	return strcmp((*(const kube_node *const *)a)->meta.name, (*(const kube_node *const *)b)->meta.name);
}

typedef struct new_nodes {
	pr_ctl *c;
	pr_world *w;
	hmap seen;
	const kube_node **v;
	size_t n, cap;
	uint64_t added;
	bool nomem;
} new_nodes;

/* A usable node not in the base yet, once. */
static void new_node(new_nodes *nn, const kube_node *node)
{
	size_t idx;
	if(!node || !pr__node_usable(node) || hmap_has(&nn->seen, node->meta.name) ||
	   sched_snapshot_find_node(nn->c->base, node->meta.name, &idx) == 0)
		return;
	if(nn->n == nn->cap) {
		size_t cap = nn->cap ? nn->cap * 2 : 64;
		const kube_node **v = realloc(nn->v, cap * sizeof(*v));
		if(!v) {
			nn->nomem = true;
			return;
		}
		nn->v = v;
		nn->cap = cap;
	}
	if(hmap_put(&nn->seen, node->meta.name, NULL)) {
		nn->nomem = true;
		return;
	}
	nn->v[nn->n++] = node;
	nn->added += node_fp(node);
}

static int new_node_key(void *ud, const char *ns, const char *name)
{
	new_nodes *nn = ud;
	new_node(nn, (const kube_node *)kube_informer_get(nn->c->inf.nodes, ns, name));
	return nn->nomem;
}

/* Nodes that turned usable and are not in the base yet, when that is all
 * that changed (the node registrations of a scale-up): add them to the
 * base. False when anything else changed. In informer mode only the nodes
 * changed since the base was last current are looked at. */
static bool base_add_nodes(pr_ctl *c, pr_world *w, uint64_t nfp)
{
	new_nodes nn;
	size_t i, n;
	const kube_node **v;
	bool ok;
	if(c->base_skipped)
		return false; /* pods wait for nodes not in the base: rebuild */
	memset(&nn, 0, sizeof(nn));
	nn.c = c;
	nn.w = w;
	hmap_init(&nn.seen, NULL);
	if(!pr__incremental(c, w) || kube_informer_changes(c->inf.nodes, c->base_gen_nodes, new_node_key, &nn)) {
		nn.n = 0;
		nn.added = 0;
		nn.nomem = false;
		hmap_free(&nn.seen);
		hmap_init(&nn.seen, NULL);
		for(i = 0; i < w->nnodes && !nn.nomem; i++)
			new_node(&nn, w->nodes[i]);
	}
	hmap_free(&nn.seen);
	ok = !nn.nomem && nn.n && nfp - nn.added == c->base_nodes_fp;
	/* By name: the same nodes go into the snapshot in the same order
	 * whichever way they were found (the order placement tries them). */
	if(ok)
		qsort(nn.v, nn.n, sizeof(*nn.v), node_name_cmp);
	v = arena_array(&w->ar, nn.n + 1, sizeof(*v));
	if(ok && v)
		memcpy(v, nn.v, nn.n * sizeof(*v));
	n = nn.n;
	free(nn.v);
	if(!ok || !v)
		return false;
	for(i = 0; i < n; i++) {
		sched_node_spec ns;
		prd_err ce;
		if(node_spec(w, &w->ar, v[i], &ns, &ce))
			return false; /* a rebuild says which */
		if(sched_snapshot_add_node(c->base, &ns, NULL, &ce)) {
			/* Part added: the base is no longer what its records say. */
			sched_snapshot_free(c->base);
			c->base = NULL;
			return false;
		}
		c->base_ready++;
	}
	c->base_nodes_fp = nfp;
	c->stats.snapshot_node_adds += n;
	return true;
}

/* verify_snapshot: the reused base against a snapshot built anew from the
 * same objects, node by node (by name: the order may differ), on every
 * resource the simulation knows. */
static void verify_base(pr_ctl *c, pr_world *w)
{
	static const char *const res[] = { "cpu", "memory", "pods", "ephemeral-storage", "nvidia.com/gpu" };
	sched_snapshot *fresh;
	int64_t ready = w->ready_nodes;
	size_t skipped = w->skipped_pods, i, k, n, bad = 0;
	prd_err e;
	w->snap = NULL;
	w->ready_nodes = 0;
	if(pr__need_pods(c, w, &e) || snapshot_nodes_pods(w, &e)) {
		sched_snapshot_free(w->snap);
		w->snap = NULL;
		return;
	}
	fresh = w->snap;
	w->snap = NULL;
	w->ready_nodes = ready;
	w->skipped_pods = skipped;
	n = sched_snapshot_node_count(fresh);
	if(n != sched_snapshot_node_count(c->base))
		bad++;
	for(i = 0; i < n && !bad; i++) {
		size_t j;
		if(sched_snapshot_find_node(c->base, sched_snapshot_node_name(fresh, i), &j)) {
			bad++;
			break;
		}
		for(k = 0; k < sizeof(res) / sizeof(res[0]); k++) {
			int64_t a = 0, b = 0;
			sched_snapshot_node_free(fresh, i, res[k], &a);
			sched_snapshot_node_free(c->base, j, res[k], &b);
			bad += a != b;
		}
		{
			size_t fa = 0, fb = 0;
			bad += sched_snapshot_node_devices(fresh, i, &fa) != sched_snapshot_node_devices(c->base, j, &fb);
			bad += fa != fb;
		}
	}
	if(bad) {
		c->stats.snapshot_mismatches++;
		log_warn("the kept scheduling snapshot differs from a rebuild", "nodes", LOGI(n));
	}
	sched_snapshot_free(fresh);
}

/* Can the base serve this pass (updated in place where it can)? */
static bool base_serves(pr_ctl *c, pr_world *w)
{
	bool nodes_same, pods_same;
	prd_err e;
	if(!w->cacheable || !c->base)
		return false;
	/* Devices or claims' allocations changed: rebuild (rare; a device
	 * list is read whole). */
	if(w->dra.fp != c->base_dra_fp)
		return false;
	nodes_same = c->base_gen_nodes == w->gen_nodes;
	pods_same = c->base_gen_pods == w->gen_pods;
	/* Something changed; most changes (heartbeats, pod conditions)
	 * change nothing the simulation reads. */
	if(!pods_same)
		pods_same = pr__need_pods(c, w, &e) == 0 && pods_fp(w) == c->base_pods_fp;
	if(pods_same && !nodes_same) {
		uint64_t nfp = nodes_fp_now(c, w);
		nodes_same = nfp == c->base_nodes_fp || base_add_nodes(c, w, nfp);
	}
	if(!c->base || !nodes_same || !pods_same)
		return false;
	c->base_gen_nodes = w->gen_nodes;
	c->base_gen_pods = w->gen_pods;
	return true;
}

/* The snapshot of nodes and pods: the controller's base when the caches
 * have not changed since it was built in a way the simulation reads (a
 * pass then costs nothing for a cluster that only gained a request), or
 * changed only by nodes that turned usable; else a new one, kept as the
 * base in informer mode. The pass works in a fork of a shared base. */
int pr__snapshot_build(pr_ctl *c, pr_world *w, prd_err *err)
{
	int rc;
	if(base_serves(c, w)) {
		if(c->cfg.verify_snapshot)
			verify_base(c, w);
		w->snap = c->base;
		w->ready_nodes = c->base_ready;
		w->snap_shared = true;
		c->stats.snapshot_reuses++;
	} else {
		/* A base that cannot serve goes before its successor is built:
		 * two snapshots of a large cluster at once were a rebuilding
		 * pass's peak. */
		sched_snapshot_free(c->base);
		c->base = NULL;
		if((rc = pr__need_pods(c, w, err)) || (rc = snapshot_nodes_pods(w, err)))
			return rc;
		c->stats.snapshot_pod_entries = sched_snapshot_pod_entries(w->snap);
		if(w->cacheable) {
			c->base = w->snap;
			c->base_nodes_fp = nodes_fp_now(c, w);
			c->base_pods_fp = pods_fp(w);
			c->base_dra_fp = w->dra.fp;
			c->base_skipped = w->skipped_pods;
			c->base_gen_nodes = w->gen_nodes;
			c->base_gen_pods = w->gen_pods;
			c->base_ready = w->ready_nodes;
			w->snap_shared = true;
		}
	}
	if(w->snap_shared && sched_snapshot_fork(w->snap)) {
		/* Cannot protect the base: the pass owns it, it is not kept. */
		c->base = NULL;
		w->snap_shared = false;
	}
	return 0;
}

/* End of a pass: give the base back as it was built. */
void pr__snapshot_release(pr_ctl *c, pr_world *w)
{
	if(!w->snap_shared)
		return;
	w->snap_shared = false;
	if(sched_snapshot_depth(w->snap) != 1) {
		/* Unbalanced forks: what the base holds is not known; pr__world_free
		 * frees it and the next pass builds anew. */
		log_warn("scheduling snapshot left forked at the end of a pass; rebuilding it", "depth",
			 LOGI(sched_snapshot_depth(w->snap)));
		c->base = NULL;
		return;
	}
	sched_snapshot_revert(w->snap);
	w->snap = NULL;
}

/* ---- bookings ------------------------------------------------------------ */

/* A booking's resources as booking_res parsed them, in c->bres_ar. */
typedef struct pr_bres {
	sched_res *res;
	size_t nres;
	const char **devs;
	size_t ndevs;
	json_object *dev_pods;
	uint64_t pass;            /* the last pass that used it */
} pr_bres;

/* Parse a booking's resources ({"cpu":"500m",...}) into base units, the
 * DRA devices it holds (PR_BOOKING_DEVICES) into *devs (arena), and the
 * pods whose devices are to be allocated anew (PR_BOOKING_DEVICE_PODS,
 * borrowed until the arena is freed) into *dev_pods. */
static int booking_res(arena *a, const char *js, sched_res **out, size_t *n, const char ***devs, size_t *ndevs,
		       json_object **dev_pods, prd_err *err)
{
	json_object *o = json_tokener_parse(js), *d = NULL;
	size_t i, len;
	int rc;
	*devs = NULL;
	*ndevs = 0;
	*dev_pods = NULL;
	if(!o)
		return prd_err_set(err, PRD_ECORRUPT, "booking resources are not JSON");
	if(arena_defer(a, pr__put_json, o))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(json_object_object_get_ex(o, PR_BOOKING_DEVICES, &d) && json_object_is_type(d, json_type_array)) {
		len = json_object_array_length(d);
		if(!(*devs = arena_array(a, len + 1, sizeof(**devs))))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		for(i = 0; i < len; i++) {
			json_object *s = json_object_array_get_idx(d, i);
			if(json_object_is_type(s, json_type_string))
				(*devs)[(*ndevs)++] = json_object_get_string(s);
		}
		json_object_get(d); /* the strings stay with o, which keeps the array */
		json_object_object_del(o, PR_BOOKING_DEVICES);
		if(arena_defer(a, pr__put_json, d))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(json_object_object_get_ex(o, PR_BOOKING_DEVICE_PODS, &d) && json_object_is_type(d, json_type_object)) {
		json_object_get(d);
		json_object_object_del(o, PR_BOOKING_DEVICE_PODS);
		if(arena_defer(a, pr__put_json, d))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		*dev_pods = d;
	}
	rc = pr_conv_resources(a, o, "booking", out, n, err);
	return rc;
}

/* booking_res, kept by the booking's text (parsing is a function of the
 * text alone): a pass parses only the texts no earlier pass has, the
 * bookings made since. The parsed forms are borrowed until pr__bres_trim. */
static int booking_res_kept(pr_ctl *c, const char *js, const pr_bres **out, prd_err *err)
{
	pr_bres *b = hmap_get(&c->bres, js);
	int rc;
	if(!b) {
		if(!(b = arena_alloc(&c->bres_ar, sizeof(*b))))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		if((rc = booking_res(&c->bres_ar, js, &b->res, &b->nres, &b->devs, &b->ndevs, &b->dev_pods, err)))
			return rc;
		if(hmap_put(&c->bres, js, b))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(b->pass != c->stats.passes) {
		b->pass = c->stats.passes;
		c->bres_live++;
	}
	*out = b;
	return 0;
}

/* The texts of bookings that ended stay parsed until they outnumber those
 * in use; then everything is parsed anew on the next pass. */
void pr__bres_trim(pr_ctl *c)
{
	if(hmap_len(&c->bres) <= 2 * c->bres_live + 256)
		return;
	hmap_free(&c->bres);
	arena_free(&c->bres_ar);
	hmap_init(&c->bres, NULL);
	arena_init(&c->bres_ar);
}

/* A rebuilt booking's devices: what its pods (per podSet) would be
 * allocated on node idx now. */
static int book_rebuilt_devices(pr_world *w, const char *uid, size_t idx, json_object *dev_pods, prd_err *err)
{
	const kube_provreq *pr = NULL;
	sched_podset *sets;
	char missing[300];
	size_t i;
	int rc = 0;
	for(i = 0; i < w->nprs && !pr; i++)
		if(!strcmp(w->prs[i]->meta.uid, uid))
			pr = w->prs[i];
	if(!pr)
		return 0;
	if(!(sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*sets))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if((rc = pr__resolve_podsets(w, pr, sets, missing, sizeof(missing), err)))
		return rc == PRD_ENOTFOUND ? prd_err_set(err, rc, "%s not found", missing) : rc;
	json_object_object_foreach(dev_pods, k, v) {
		int64_t set;
		if(rc || str_to_int64(k, &set) || set < 0 || (size_t)set >= pr->npod_sets)
			continue;
		rc = sched_snapshot_book_pod_devices(w->snap, uid, idx, sets[set].pod, json_object_get_int64(v), NULL,
						     err);
	}
	return rc;
}

/* The booking ledger's live entries (ledger.c) of requests the local store
 * holds no rows of: another instance's bookings, including those whose
 * status write has not landed (or been seen) yet. Not reading it, the pass
 * places nothing. */
static int book_ledger(pr_ctl *c, pr_world *w, const state_booking *own, size_t nown, const hmap *dying,
		       prd_err *err)
{
	state_booking *v = NULL;
	size_t n = 0, i, idx;
	state_booking *mine = NULL;
	size_t nmine = 0;
	int rc = pr__ledger_read(c, err);
	if(rc)
		return rc;
	/* Only the rows of this instance's own requests stand for their
	 * entries: another shard's rows here (rebuilt from its status) are
	 * not booked (book_snapshot), so its entry must be. */
	if(nown && !(mine = malloc(nown * sizeof(*mine))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	for(i = 0; i < nown; i++)
		if(!pr__shards_foreign(c, own[i].request_uid))
			mine[nmine++] = own[i];
	/* A request being deleted books nothing, whoever's it is: its entry
	 * goes with the next write (its room is free now, as for a request
	 * gone). */
	{
		hmap_iter it;
		const char *uid;
		hmap_iter_init(&it, dying);
		while(hmap_iter_next(&it, &uid, NULL))
			pr__ledger_gone(c, uid);
	}
	rc = pr__ledger_rows(c, mine, nmine, &w->uids, &v, &n);
	free(mine);
	if(rc)
		return prd_err_set(err, rc, "out of memory");
	for(i = 0; i < n; i++) {
		const pr_bres *br = NULL;
		prd_err ce;
		if(sched_snapshot_find_node(w->snap, v[i].node_name, &idx))
			continue;
		if(booking_res_kept(c, v[i].resources_json, &br, &ce) ||
		   sched_snapshot_book(w->snap, v[i].request_uid, idx, br->res, br->nres, &ce))
			log_warn("booking ledger entry ignored", "request_uid", v[i].request_uid, "error", ce.msg);
		else
			c->stats.bookings_held++;
	}
	state_booking_list_free(v, n);
	return 0;
}

/* The bookings of requests that still hold capacity, into the pass's
 * snapshot. */
static int book_snapshot(pr_ctl *c, pr_world *w, prd_err *err)
{
	hmap dying;
	state_booking *b = NULL;
	size_t nb = 0, i;
	int rc;
	if(c->db && (rc = state_booking_list_active(c->db, &b, &nb, err)))
		return rc;
	c->bres_live = 0;
	c->stats.bookings_held = 0;
	hmap_init(&dying, NULL);
	for(i = 0; i < w->nprs; i++)
		if(w->prs[i]->meta.deleted_ns)
			hmap_put(&dying, w->prs[i]->meta.uid, NULL);
	for(i = 0; i < nb; i++) {
		const pr_bres *br = NULL;
		size_t idx;
		prd_err ce;
		/* Being deleted (a finalizer keeps it while its scale-up is
		 * undone): it books nothing any more. */
		if(hmap_has(&dying, b[i].request_uid))
			continue;
		/* The request is gone: its capacity is free at once, so a
		 * request recreated for the same pods gets it this pass. */
		if(!hmap_has(&w->uids, b[i].request_uid)) {
			if(i == 0 || strcmp(b[i - 1].request_uid, b[i].request_uid)) {
				state_booking_delete_request(c->db, b[i].request_uid, NULL, NULL);
				pr__ledger_gone(c, b[i].request_uid);
				log_info("released the booking of a deleted request", "request_uid", b[i].request_uid);
			}
			continue;
		}
		/* Another instance's request: its status says what it holds
		 * (pr__shards_book), not rows this store rebuilt from it. */
		if(pr__shards_foreign(c, b[i].request_uid))
			continue;
		if(sched_snapshot_find_node(w->snap, b[i].node_name, &idx))
			continue;
		if(booking_res_kept(c, b[i].resources_json, &br, &ce) ||
		   sched_snapshot_book(w->snap, b[i].request_uid, idx, br->res, br->nres, &ce) ||
		   (br->ndevs &&
		    sched_snapshot_book_devices(w->snap, b[i].request_uid, idx, br->devs, br->ndevs, NULL, &ce)) ||
		   (br->dev_pods && book_rebuilt_devices(w, b[i].request_uid, idx, br->dev_pods, &ce)))
			log_warn("booking ignored", "request_uid", b[i].request_uid, "error", ce.msg);
		else
			c->stats.bookings_held++;
	}
	rc = c->ledger.on ? book_ledger(c, w, b, nb, &dying, err) : 0;
	hmap_free(&dying);
	if(rc) {
		state_booking_list_free(b, nb);
		return rc;
	}
	pr__shards_book(c, w, b, nb);
	state_booking_list_free(b, nb);
	return 0;
}

sched_snapshot *pr__snap(pr_ctl *c, pr_world *w)
{
	prd_err e;
	int rc;
	if(w->snap_booked)
		return w->snap_failed ? NULL : w->snap;
	w->snap_booked = true;
	if((rc = book_snapshot(c, w, &e))) {
		/* Placing without the bookings would hand out booked room: like
		 * a pass that cannot read the cluster, this one acts no more. */
		w->snap_failed = true;
		c->fenced = true;
		log_error("cannot read the bookings; this pass acts no further", "error", e.msg);
		metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", prd_strerror(rc)), 1);
		pr__wake_at(c, c->now + PRD_NS_PER_SEC);
		return NULL;
	}
	pr__modules_hook(c, w, PR_HOOK_RESERVE);
	return w->snap;
}

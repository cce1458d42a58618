/* The snapshot stage: the pass's scheduling snapshot of nodes and pods
 * (see docs/development.md, "The pass"). Entry point:
 * pr__snapshot_build, which world.c calls while the caches are locked;
 * pr__snap (snapshot_book.c) books into it when the pass first asks for
 * it, and pr__snapshot_release gives the kept base back at the end of the
 * pass.
 *
 * Reads: the world's Nodes, Pods and DRA view; the base kept from earlier
 * passes (c->base) and the fingerprints it was built from.
 * Writes: w->snap (a fork of c->base, or a new snapshot kept as the base
 * in informer mode), c->base_* and the nodes' fingerprint (c->nfp*),
 * snapshot_reuses/_mismatches (the verify mode, cfg.verify_snapshot). */
#include "provreq/ctl_int.h"
#include "provreq/convert.h"
#include "ops/log.h"

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

/* Property test: fast group placement and the estimator against a
 * straightforward pod-by-pod reference, on thousands of random clusters.
 *
 * What "same" means. The library's contract (place.h, estimator.h) is
 * defined pod by pod: podSets in sched_place_order / sched_estimate_order
 * order (the order is a policy shared by both sides, not something this
 * test checks), and each pod goes to the first node in index order that
 * passes every predicate at that moment; the estimator opens a fresh
 * template node only when no new node takes the pod and the limits allow.
 * Under that contract the answer is unique, so the test compares the full
 * result - fit/no-fit, how many of each podSet were placed, how many new
 * nodes were needed, and how many pods of each podSet each node got - not
 * just counts. Any batching shortcut in the library that is not exactly
 * equivalent shows up as a difference.
 *
 * The reference below recomputes every predicate from scratch for every
 * pod and node from a flat list of pods: resources, pod slots, host ports,
 * anti-affinity both ways, affinity with the first-pod rule, and topology
 * spread with domains, minimum and minDomains. It shares only the label /
 * taint matchers with the library (table-tested in test_sched.c). */
#include "testutil.h"

#include "sched/estimator.h"
#include "sched/match.h"
#include "sched/place.h"
#include "sched/sched.h"
#include "util/rand.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRIALS 5000
#define MAXN 48
#define MAXP 256
#define MAXSHAPES 10
#define GI ((int64_t)1 << 30)

static uint64_t rng;

static uint64_t rnd(void)
{
	return prd_splitmix64(&rng);
}

static int ri(int n)
{
	return (int)(rnd() % (uint64_t)n);
}

static bool chance(int pct)
{
	return ri(100) < pct;
}

static const char *const zones[] = { "z0", "z1", "z2", "z3" };
static const char *const apps[] = { "a0", "a1", "a2" };
static const char *const nss[] = { "ns0", "ns1" };
static const char *const ranks[] = { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9" };
static const char *const zone01[] = { "z0", "z1" };
static const char *const four[] = { "4" };
static const char *const ssd[] = { "ssd" };

/* ---- random pod shapes ---------------------------------------------- */

typedef struct shape {
	sched_pod_spec spec;
	sched_label labels[2];
	sched_res req[3];
	sched_label nodesel[1];
	sched_requirement areq[1];
	sched_node_term aterm[1];
	sched_toleration tol[3];
	sched_host_port port[1];
	sched_label anti_ml[1], aff_ml[1], sp_ml[2];
	sched_label_selector anti_sel, aff_sel, sp_sel[2];
	sched_pod_term anti[1], aff[1];
	sched_spread spread[2];
	char node_name[16];
} shape;

static const char *topo(void)
{
	return chance(50) ? SCHED_KEY_HOSTNAME : SCHED_KEY_ZONE;
}

static void gen_shape(shape *h, int n_nodes)
{
	sched_pod_spec *p = &h->spec;
	size_t n = 0;
	static const int64_t cpus[] = { 0, 250, 500, 1000, 1500, 3000 };
	static const int64_t mems[] = { 0, 1, 2, 4 };

	memset(h, 0, sizeof(*h));
	p->namespace = nss[chance(75) ? 0 : 1];
	h->labels[n++] = (sched_label){ "app", apps[ri(3)] };
	if(chance(50))
		h->labels[n++] = (sched_label){ "tier", chance(50) ? "t0" : "t1" };
	p->labels = h->labels;
	p->n_labels = n;

	n = 0;
	h->req[n++] = (sched_res){ "cpu", cpus[ri(6)] };
	if(chance(80))
		h->req[n++] = (sched_res){ "memory", mems[ri(4)] * GI };
	if(chance(10))
		h->req[n++] = (sched_res){ "nvidia.com/gpu", 1 };
	p->requests = h->req;
	p->n_requests = n;

	if(chance(5)) {
		snprintf(h->node_name, sizeof(h->node_name), "n%d", ri(n_nodes + 2));
		p->node_name = h->node_name;
	}
	if(chance(15)) {
		h->nodesel[0] = (sched_label){ "disk", "ssd" };
		p->node_selector = h->nodesel;
		p->n_node_selector = 1;
	}
	if(chance(18)) {
		switch(ri(4)) {
		case 0: h->areq[0] = (sched_requirement){ SCHED_KEY_ZONE, SCHED_OP_IN, zone01, 2 }; break;
		case 1: h->areq[0] = (sched_requirement){ "rank", SCHED_OP_GT, four, 1 }; break;
		case 2: h->areq[0] = (sched_requirement){ "disk", SCHED_OP_NOT_IN, ssd, 1 }; break;
		default: h->areq[0] = (sched_requirement){ "rank", SCHED_OP_LT, four, 1 }; break;
		}
		h->aterm[0] = (sched_node_term){ h->areq, chance(10) ? 0 : 1 };
		p->affinity_terms = h->aterm;
		p->n_affinity_terms = 1;
		p->has_node_affinity = true;
	}
	n = 0;
	if(chance(25))
		h->tol[n++] = (sched_toleration){ "dedicated", SCHED_TOL_EQUAL, "x", SCHED_EFFECT_NO_SCHEDULE };
	if(chance(8))
		h->tol[n++] = (sched_toleration){ NULL, SCHED_TOL_EXISTS, NULL, SCHED_EFFECT_NONE };
	if(chance(10))
		h->tol[n++] = (sched_toleration){ SCHED_TAINT_UNSCHEDULABLE, SCHED_TOL_EXISTS, NULL,
		                                  SCHED_EFFECT_NO_SCHEDULE };
	p->tolerations = h->tol;
	p->n_tolerations = n;
	if(chance(10)) {
		h->port[0] = (sched_host_port){ 8080, SCHED_PROTO_TCP, NULL };
		p->host_ports = h->port;
		p->n_host_ports = 1;
	}
	if(chance(22)) {
		h->anti_ml[0] = (sched_label){ "app", apps[ri(3)] };
		h->anti_sel = (sched_label_selector){ h->anti_ml, 1, NULL, 0 };
		h->anti[0] = (sched_pod_term){ topo(), &h->anti_sel, NULL, 0, chance(20) };
		p->pod_anti_affinity = h->anti;
		p->n_pod_anti_affinity = 1;
	}
	if(chance(12)) {
		h->aff_ml[0] = (sched_label){ "app", chance(50) ? h->labels[0].value : apps[ri(3)] };
		h->aff_sel = (sched_label_selector){ h->aff_ml, 1, NULL, 0 };
		h->aff[0] = (sched_pod_term){ topo(), &h->aff_sel, NULL, 0, chance(20) };
		p->pod_affinity = h->aff;
		p->n_pod_affinity = 1;
	}
	if(chance(30)) {
		size_t k, ns = chance(25) ? 2 : 1;
		for(k = 0; k < ns; k++) {
			h->sp_ml[k] = (sched_label){ "app", chance(65) ? h->labels[0].value : apps[ri(3)] };
			h->sp_sel[k] = (sched_label_selector){ h->sp_ml, 1, NULL, 0 };
			h->sp_sel[k].match_labels = &h->sp_ml[k];
			h->spread[k] = (sched_spread){ topo(), 1 + ri(3), chance(25) ? 1 + ri(4) : 0,
			                               chance(90) ? SCHED_DO_NOT_SCHEDULE
			                                          : SCHED_SCHEDULE_ANYWAY,
			                               &h->sp_sel[k], chance(30), chance(30) };
		}
		p->spread = h->spread;
		p->n_spread = ns;
	}
}

/* ---- the model and the reference ------------------------------------ */

typedef struct mnode {
	char name[24];
	sched_label labels[4];
	size_t n_labels;
	int zone;
	sched_taint taint;
	size_t n_taints;
	bool unsched;
	sched_res alloc[4];
	size_t n_alloc;
	int64_t booked_cpu;
} mnode;

typedef struct mpod {
	const sched_pod_spec *spec;
	int node;
} mpod;

typedef struct model {
	mnode nodes[MAXN];
	int n_nodes;
	mpod pods[MAXP];
	int n_pods;
} model;

static int64_t alloc_of(const mnode *n, const char *res)
{
	size_t i;
	for(i = 0; i < n->n_alloc; i++)
		if(strcmp(n->alloc[i].name, res) == 0)
			return n->alloc[i].value;
	return 0;
}

static int64_t req_of(const sched_pod_spec *p, const char *res)
{
	size_t i;
	int64_t v = 0;
	for(i = 0; i < p->n_requests; i++)
		if(strcmp(p->requests[i].name, res) == 0)
			v += p->requests[i].value;
	return v;
}

static bool is_host(const char *k)
{
	return strcmp(k, SCHED_KEY_HOSTNAME) == 0;
}

/* Same topology domain of nodes a and b for `key`. */
static bool same_dom(const model *m, const char *key, int a, int b)
{
	if(is_host(key))
		return a == b;
	return m->nodes[a].zone >= 0 && m->nodes[a].zone == m->nodes[b].zone;
}

static bool has_key(const model *m, const char *key, int n)
{
	return is_host(key) || m->nodes[n].zone >= 0;
}

static bool matches_all_aff(const sched_pod_spec *owner, const sched_pod_spec *p)
{
	size_t i;
	for(i = 0; i < owner->n_pod_affinity; i++)
		if(!sched_pod_term_matches(&owner->pod_affinity[i], owner->namespace, p->namespace,
		                           p->labels, p->n_labels))
			return false;
	return true;
}

/* Does spread constraint c count node n: its keys, and the inclusion
 * policies (nodeAffinityPolicy, nodeTaintsPolicy)? */
static bool spread_counted(const model *m, const sched_pod_spec *p, const sched_spread *c, int n)
{
	size_t i;
	const mnode *nd = &m->nodes[n];
	for(i = 0; i < p->n_spread; i++)
		if(p->spread[i].when == SCHED_DO_NOT_SCHEDULE && !has_key(m, p->spread[i].topology_key, n))
			return false;
	if(!c->ignore_affinity && !sched_node_affinity_matches(p, nd->labels, nd->n_labels))
		return false;
	return !c->honor_taints || sched_taints_tolerated(p, &nd->taint, nd->n_taints);
}

static bool spread_eligible(const model *m, const sched_pod_spec *p, int n)
{
	size_t i;
	const mnode *nd = &m->nodes[n];
	if(!sched_node_affinity_matches(p, nd->labels, nd->n_labels))
		return false;
	for(i = 0; i < p->n_spread; i++)
		if(p->spread[i].when == SCHED_DO_NOT_SCHEDULE && !has_key(m, p->spread[i].topology_key, n))
			return false;
	return true;
}

static bool ref_fits(const model *m, const sched_pod_spec *p, int n)
{
	const mnode *nd = &m->nodes[n];
	static const char *const res[] = { "cpu", "memory", "nvidia.com/gpu" };
	int64_t used[3] = { 0, 0, 0 }, pods = 0;
	int i, r;
	size_t t, u;

	if(p->node_name && strcmp(p->node_name, nd->name) != 0)
		return false;
	if(nd->unsched && !sched_tolerates_unschedulable(p))
		return false;
	if(!sched_node_affinity_matches(p, nd->labels, nd->n_labels))
		return false;
	if(!sched_taints_tolerated(p, &nd->taint, nd->n_taints))
		return false;

	/* resources and pod slots */
	used[0] = nd->booked_cpu;
	for(i = 0; i < m->n_pods; i++) {
		if(m->pods[i].node != n)
			continue;
		pods++;
		for(r = 0; r < 3; r++)
			used[r] += req_of(m->pods[i].spec, res[r]);
	}
	if(pods + 1 > alloc_of(nd, "pods"))
		return false;
	for(r = 0; r < 3; r++) {
		int64_t q = req_of(p, res[r]);
		if(q > 0 && used[r] + q > alloc_of(nd, res[r]))
			return false;
	}
	/* host ports */
	for(i = 0; i < m->n_pods; i++) {
		if(m->pods[i].node != n)
			continue;
		for(t = 0; t < p->n_host_ports; t++)
			for(u = 0; u < m->pods[i].spec->n_host_ports; u++)
				if(sched_host_ports_conflict(&p->host_ports[t], &m->pods[i].spec->host_ports[u]))
					return false;
	}
	/* anti-affinity, the pod's own and the existing pods' */
	for(i = 0; i < m->n_pods; i++) {
		const mpod *e = &m->pods[i];
		for(t = 0; t < p->n_pod_anti_affinity; t++) {
			const sched_pod_term *a = &p->pod_anti_affinity[t];
			if(sched_pod_term_matches(a, p->namespace, e->spec->namespace, e->spec->labels,
			                          e->spec->n_labels) &&
			   same_dom(m, a->topology_key, e->node, n))
				return false;
		}
		for(t = 0; t < e->spec->n_pod_anti_affinity; t++) {
			const sched_pod_term *a = &e->spec->pod_anti_affinity[t];
			if(sched_pod_term_matches(a, e->spec->namespace, p->namespace, p->labels,
			                          p->n_labels) &&
			   same_dom(m, a->topology_key, e->node, n))
				return false;
		}
	}
	/* affinity */
	if(p->n_pod_affinity) {
		bool ok = true, any = false, any_host = false;
		for(t = 0; t < p->n_pod_affinity; t++) {
			const sched_pod_term *a = &p->pod_affinity[t];
			bool found = false;
			if(!has_key(m, a->topology_key, n))
				return false;
			any_host |= is_host(a->topology_key);
			for(i = 0; i < m->n_pods && !found; i++)
				found = matches_all_aff(p, m->pods[i].spec) &&
				        same_dom(m, a->topology_key, m->pods[i].node, n);
			ok &= found;
		}
		for(i = 0; i < m->n_pods; i++)
			if(matches_all_aff(p, m->pods[i].spec) &&
			   (any_host || m->nodes[m->pods[i].node].zone >= 0))
				any = true;
		if(!ok && !(!any && matches_all_aff(p, p)))
			return false;
	}
	/* topology spread */
	for(t = 0; t < p->n_spread; t++) {
		const sched_spread *c = &p->spread[t];
		int64_t cnt[MAXN] = { 0 }, min = -1, self;
		bool dom[MAXN] = { false };
		int ndom = 0, j, d;
		if(c->when != SCHED_DO_NOT_SCHEDULE)
			continue;
		if(!spread_eligible(m, p, n))
			return false;
		for(j = 0; j < m->n_nodes; j++) {
			if(!spread_counted(m, p, c, j))
				continue;
			d = is_host(c->topology_key) ? j : m->nodes[j].zone;
			if(!dom[d])
				ndom++;
			dom[d] = true;
		}
		for(i = 0; i < m->n_pods; i++) {
			const mpod *e = &m->pods[i];
			if(strcmp(e->spec->namespace, p->namespace) != 0 || !spread_counted(m, p, c, e->node) ||
			   !sched_selector_matches(c->selector, e->spec->labels, e->spec->n_labels))
				continue;
			cnt[is_host(c->topology_key) ? e->node : m->nodes[e->node].zone]++;
		}
		for(j = 0; j < MAXN; j++)
			if(dom[j] && (min < 0 || cnt[j] < min))
				min = cnt[j];
		if(c->min_domains > 0 && ndom < c->min_domains)
			min = 0;
		self = sched_selector_matches(c->selector, p->labels, p->n_labels);
		d = is_host(c->topology_key) ? n : m->nodes[n].zone;
		if(cnt[d] + self - min > c->max_skew)
			return false;
	}
	return true;
}

/* ---- building both sides -------------------------------------------- */

static void gen_node(mnode *n, const char *name, int zone)
{
	static const int64_t cpus[] = { 2000, 4000, 8000 };
	static const int64_t mems[] = { 4, 8, 16 };
	static const int64_t pods[] = { 3, 5, 10, 110 };
	int k;
	memset(n, 0, sizeof(*n));
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->zone = zone;
	if(zone >= 0)
		n->labels[n->n_labels++] = (sched_label){ SCHED_KEY_ZONE, zones[zone] };
	n->labels[n->n_labels++] = (sched_label){ "disk", chance(50) ? "ssd" : "hdd" };
	n->labels[n->n_labels++] = (sched_label){ "rank", ranks[ri(10)] };
	n->alloc[n->n_alloc++] = (sched_res){ "cpu", cpus[ri(3)] };
	n->alloc[n->n_alloc++] = (sched_res){ "memory", mems[ri(3)] * GI };
	n->alloc[n->n_alloc++] = (sched_res){ "pods", pods[ri(4)] };
	if(chance(20))
		n->alloc[n->n_alloc++] = (sched_res){ "nvidia.com/gpu", 1 + ri(2) };
	k = ri(100);
	if(k < 15)
		n->taint = (sched_taint){ "dedicated", "x", SCHED_EFFECT_NO_SCHEDULE };
	else if(k < 22)
		n->taint = (sched_taint){ "maint", NULL, SCHED_EFFECT_NO_EXECUTE };
	else if(k < 27)
		n->taint = (sched_taint){ "soft", NULL, SCHED_EFFECT_PREFER_NO_SCHEDULE };
	else if(k < 30)
		n->taint = (sched_taint){ "odd", NULL, SCHED_EFFECT_NONE };
	n->n_taints = k < 30;
	n->unsched = chance(8);
}

static sched_node_spec node_spec(const mnode *n)
{
	sched_node_spec s = { 0 };
	s.name = n->name;
	s.labels = n->labels;
	s.n_labels = n->n_labels;
	s.taints = &n->taint;
	s.n_taints = n->n_taints;
	s.allocatable = n->alloc;
	s.n_allocatable = n->n_alloc;
	s.unschedulable = n->unsched;
	return s;
}

typedef struct trial {
	model m;
	sched_snapshot *s;
	shape shapes[MAXSHAPES];
	int n_exist_shapes;
	sched_podset sets[3];
	int n_sets;
} trial;

static void build(trial *t)
{
	int i, nn = 1 + ri(12), np;
	sched_res book = { "cpu", 500 };

	memset(&t->m, 0, sizeof(t->m));
	t->s = sched_snapshot_new();
	CU_ASSERT_PTR_NOT_NULL_FATAL(t->s);
	for(i = 0; i < nn; i++) {
		char name[16];
		sched_node_spec ns;
		snprintf(name, sizeof(name), "n%d", i);
		gen_node(&t->m.nodes[i], name, chance(10) ? -1 : ri(3));
		ns = node_spec(&t->m.nodes[i]);
		CU_ASSERT_EQUAL_FATAL(sched_snapshot_add_node(t->s, &ns, NULL, NULL), 0);
	}
	t->m.n_nodes = nn;
	t->n_exist_shapes = 1 + ri(5);
	for(i = 0; i < t->n_exist_shapes; i++)
		gen_shape(&t->shapes[i], nn);
	np = ri(31);
	for(i = 0; i < np; i++) {
		int k = ri(t->n_exist_shapes), n = ri(nn);
		CU_ASSERT_EQUAL_FATAL(sched_snapshot_add_pods(t->s, (size_t)n, &t->shapes[k].spec, 1,
		                                              NULL), 0);
		t->m.pods[t->m.n_pods++] = (mpod){ &t->shapes[k].spec, n };
	}
	for(i = ri(4); i > 0; i--) {
		int n = ri(nn);
		CU_ASSERT_EQUAL_FATAL(sched_snapshot_book(t->s, chance(50) ? "u1" : "u2", (size_t)n,
		                                          &book, 1, NULL), 0);
		t->m.nodes[n].booked_cpu += 500;
	}
	t->n_sets = 1 + ri(3);
	for(i = 0; i < t->n_sets; i++) {
		shape *h = &t->shapes[t->n_exist_shapes + i];
		/* Sometimes reuse an existing shape: pods joining their own kind. */
		if(chance(25))
			*h = t->shapes[ri(t->n_exist_shapes)];
		else
			gen_shape(h, nn);
		/* Re-point the copied arrays at this copy's storage. */
		h->spec.labels = h->labels;
		h->spec.requests = h->req;
		t->sets[i] = (sched_podset){ &h->spec, 1 + ri(12) };
	}
}

/* The copy above moved the inline storage; fix every interior pointer. */
static void fix_shape_ptrs(shape *h)
{
	size_t k;
	sched_pod_spec *p = &h->spec;
	p->labels = h->labels;
	p->requests = h->req;
	if(p->node_name)
		p->node_name = h->node_name;
	if(p->n_node_selector)
		p->node_selector = h->nodesel;
	if(p->has_node_affinity) {
		h->aterm[0].exprs = h->areq;
		p->affinity_terms = h->aterm;
	}
	p->tolerations = h->tol;
	if(p->n_host_ports)
		p->host_ports = h->port;
	if(p->n_pod_anti_affinity) {
		h->anti_sel.match_labels = h->anti_ml;
		h->anti[0].selector = &h->anti_sel;
		p->pod_anti_affinity = h->anti;
	}
	if(p->n_pod_affinity) {
		h->aff_sel.match_labels = h->aff_ml;
		h->aff[0].selector = &h->aff_sel;
		p->pod_affinity = h->aff;
	}
	for(k = 0; k < p->n_spread; k++) {
		h->sp_sel[k].match_labels = &h->sp_ml[k];
		h->spread[k].selector = &h->sp_sel[k];
	}
	if(p->n_spread)
		p->spread = h->spread;
}

static int64_t ref_counts[3][MAXN];
static int64_t ref_placed[3];

static void report(const char *what, unsigned trial_no)
{
	fprintf(stderr, "property %s: mismatch in trial %u\n", what, trial_no);
}

/* Placement: library vs reference. Returns false on a mismatch. */
static bool check_place(trial *t, unsigned no)
{
	sched_place_result r;
	size_t order[3];
	int i, k, c, n;
	bool same = true;
	prd_err e = { 0 };

	CU_ASSERT_EQUAL_FATAL(sched_snapshot_fork(t->s), 0);
	if(sched_place(t->s, t->sets, (size_t)t->n_sets, &r, &e) != 0) {
		fprintf(stderr, "place failed: %s\n", e.msg);
		CU_FAIL("sched_place failed");
		return false;
	}
	CU_ASSERT_EQUAL_FATAL(sched_snapshot_revert(t->s), 0);
	CU_ASSERT_EQUAL_FATAL(sched_place_order(t->s, t->sets, (size_t)t->n_sets, order, NULL), 0);

	memset(ref_counts, 0, sizeof(ref_counts));
	memset(ref_placed, 0, sizeof(ref_placed));
	{
		int saved = t->m.n_pods;
		for(i = 0; i < t->n_sets; i++) {
			k = (int)order[i];
			CU_ASSERT_EQUAL(r.order[i], order[i]);
			for(c = 0; c < t->sets[k].count; c++)
				for(n = 0; n < t->m.n_nodes; n++)
					if(ref_fits(&t->m, t->sets[k].pod, n)) {
						t->m.pods[t->m.n_pods++] = (mpod){ t->sets[k].pod, n };
						ref_counts[k][n]++;
						ref_placed[k]++;
						break;
					}
		}
		t->m.n_pods = saved;
	}
	for(k = 0; k < t->n_sets; k++) {
		int64_t got[MAXN] = { 0 };
		size_t a;
		if(r.sets[k].placed != ref_placed[k])
			same = false;
		for(a = 0; a < r.sets[k].n_assign; a++)
			got[r.sets[k].assign[a].node] += r.sets[k].assign[a].count;
		for(n = 0; n < t->m.n_nodes; n++)
			if(got[n] != ref_counts[k][n])
				same = false;
	}
	if(!same) {
		report("place", no);
		for(k = 0; k < t->n_sets; k++)
			fprintf(stderr, "  set %d: lib %lld ref %lld of %lld\n", k,
			        (long long)r.sets[k].placed, (long long)ref_placed[k],
			        (long long)t->sets[k].count);
	}
	CU_ASSERT_TRUE(same);
	{
		bool all = true;
		for(k = 0; k < t->n_sets; k++)
			all &= ref_placed[k] == t->sets[k].count;
		CU_ASSERT_EQUAL(r.fits_all, all);
	}
	sched_place_result_free(&r);
	return same;
}

/* Estimator: library vs pod-by-pod first-fit decreasing. */
static bool check_estimate(trial *t, unsigned no)
{
	mnode tm;
	sched_node_spec ts;
	sched_est_limits lim;
	sched_est_result r;
	int64_t max_new, ref_new = 0;
	size_t order[3];
	int i, k, c, n, n0 = t->m.n_nodes, saved_pods = t->m.n_pods;
	bool same = true, ref_limited = false;
	prd_err e = { 0 };

	gen_node(&tm, "tmpl", ri(4));
	tm.unsched = false;
	ts = node_spec(&tm);
	lim.group_room = ri(16);
	lim.max_nodes_total = chance(30) ? n0 + ri(10) : 0;
	lim.cluster_nodes = n0;
	lim.max_new_nodes = chance(30) ? 1 + ri(8) : 0;
	max_new = lim.group_room;
	if(lim.max_nodes_total > 0 && lim.max_nodes_total - n0 < max_new)
		max_new = lim.max_nodes_total - n0;
	if(lim.max_new_nodes > 0 && lim.max_new_nodes < max_new)
		max_new = lim.max_new_nodes;

	if(sched_estimate(t->s, &ts, t->sets, (size_t)t->n_sets, &lim, &r, &e) != 0) {
		fprintf(stderr, "estimate failed: %s\n", e.msg);
		CU_FAIL("sched_estimate failed");
		return false;
	}
	CU_ASSERT_EQUAL_FATAL(sched_estimate_order(t->s, &ts, t->sets, (size_t)t->n_sets, order,
	                                           NULL), 0);
	memset(ref_counts, 0, sizeof(ref_counts));
	memset(ref_placed, 0, sizeof(ref_placed));
	for(i = 0; i < t->n_sets; i++) {
		k = (int)order[i];
		for(c = 0; c < t->sets[k].count; c++) {
			bool done = false;
			for(n = n0; n < t->m.n_nodes && !done; n++)
				if(ref_fits(&t->m, t->sets[k].pod, n)) {
					t->m.pods[t->m.n_pods++] = (mpod){ t->sets[k].pod, n };
					ref_counts[k][n - n0]++;
					ref_placed[k]++;
					done = true;
				}
			if(done)
				continue;
			if(ref_new >= max_new) {
				ref_limited = true;
				continue;
			}
			/* Open a fresh node; keep it only if the pod fits it. */
			n = t->m.n_nodes;
			t->m.nodes[n] = tm;
			snprintf(t->m.nodes[n].name, sizeof(t->m.nodes[n].name), "tmpl/new-%d", n - n0);
			t->m.n_nodes++;
			if(ref_fits(&t->m, t->sets[k].pod, n)) {
				t->m.pods[t->m.n_pods++] = (mpod){ t->sets[k].pod, n };
				ref_counts[k][n - n0]++;
				ref_placed[k]++;
				ref_new++;
			} else {
				t->m.n_nodes--;
			}
		}
	}
	t->m.n_nodes = n0;
	t->m.n_pods = saved_pods;

	if(r.new_nodes != ref_new)
		same = false;
	for(k = 0; k < t->n_sets; k++) {
		int64_t got[MAXN] = { 0 };
		size_t a;
		if(r.place.sets[k].placed != ref_placed[k])
			same = false;
		for(a = 0; a < r.place.sets[k].n_assign; a++)
			if(r.place.sets[k].assign[a].node < MAXN)
				got[r.place.sets[k].assign[a].node] += r.place.sets[k].assign[a].count;
			else
				same = false;
		for(n = 0; n < MAXN; n++)
			if(got[n] != ref_counts[k][n])
				same = false;
	}
	if(ref_limited != (r.limited_by != SCHED_EST_UNLIMITED) && !r.place.fits_all)
		same = false;
	if(!same) {
		report("estimate", no);
		fprintf(stderr, "  new nodes: lib %lld ref %lld (max %lld)\n", (long long)r.new_nodes,
		        (long long)ref_new, (long long)max_new);
		for(k = 0; k < t->n_sets; k++)
			fprintf(stderr, "  set %d: lib %lld ref %lld of %lld\n", k,
			        (long long)r.place.sets[k].placed, (long long)ref_placed[k],
			        (long long)t->sets[k].count);
	}
	CU_ASSERT_TRUE(same);
	CU_ASSERT_EQUAL(sched_snapshot_node_count(t->s), (size_t)n0);
	sched_est_result_free(&r);
	return same;
}

static void run_trials(uint64_t seed, unsigned trials, bool estimate)
{
	static trial t;
	unsigned i, bad = 0;
	int k;
	for(i = 0; i < trials && bad < 5; i++) {
		rng = seed * 1000003u + i;
		build(&t);
		for(k = 0; k < t.n_exist_shapes + t.n_sets; k++)
			fix_shape_ptrs(&t.shapes[k]);
		if(estimate ? !check_estimate(&t, i) : !check_place(&t, i))
			bad++;
		sched_snapshot_free(t.s);
	}
}

static void test_place_vs_reference(void)
{
	run_trials(1, TRIALS, false);
}

static void test_estimate_vs_reference(void)
{
	run_trials(2, TRIALS, true);
}

/* Placing in one call equals placing the podSets in consecutive calls in
 * the same order (the snapshot carries what earlier sets placed). */
static void test_place_incremental(void)
{
	static trial t;
	unsigned i;
	int k;
	for(i = 0; i < 500; i++) {
		sched_place_result all, one;
		size_t order[3];
		int64_t placed = 0;
		rng = 77 * 1000003u + i;
		build(&t);
		for(k = 0; k < t.n_exist_shapes + t.n_sets; k++)
			fix_shape_ptrs(&t.shapes[k]);
		CU_ASSERT_EQUAL_FATAL(sched_snapshot_fork(t.s), 0);
		CU_ASSERT_EQUAL_FATAL(sched_place(t.s, t.sets, (size_t)t.n_sets, &all, NULL), 0);
		CU_ASSERT_EQUAL_FATAL(sched_snapshot_revert(t.s), 0);
		CU_ASSERT_EQUAL_FATAL(sched_place_order(t.s, t.sets, (size_t)t.n_sets, order, NULL), 0);
		CU_ASSERT_EQUAL_FATAL(sched_snapshot_fork(t.s), 0);
		for(k = 0; k < t.n_sets; k++) {
			CU_ASSERT_EQUAL_FATAL(sched_place(t.s, &t.sets[order[k]], 1, &one, NULL), 0);
			CU_ASSERT_EQUAL(one.placed, all.sets[order[k]].placed);
			placed += one.placed;
			sched_place_result_free(&one);
		}
		CU_ASSERT_EQUAL(placed, all.placed);
		CU_ASSERT_EQUAL_FATAL(sched_snapshot_revert(t.s), 0);
		sched_place_result_free(&all);
		sched_snapshot_free(t.s);
	}
}

static const test_case cases[] = {
	{ "place_vs_reference", test_place_vs_reference },
	{ "estimate_vs_reference", test_estimate_vs_reference },
	{ "place_incremental", test_place_incremental },
	{ NULL, NULL }
};

TEST_MAIN("sched_prop", cases)

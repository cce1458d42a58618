/* Group placement: decide per (podSet, node) once, then place copies in
 * batches while reproducing pod-by-pod first fit exactly.
 *
 * Why batching is exact. Within one podSet every copy is identical, so a
 * node's feasibility can only change through copies placed on it or on
 * nodes sharing a topology domain with it:
 *  - resources, host ports, hostname anti-affinity: placing on node n only
 *    lowers n's own capacity, by exactly one per copy;
 *  - zone anti-affinity against itself: the zone closes after one copy;
 *  - pod affinity: the allowed domains never shrink, except for the "first
 *    pod of a self-affine series" rule, which narrows everything to the
 *    first node's domain - and that node was the first feasible one;
 *  - topology spread (the only non-monotone rule): a domain closes when it
 *    reaches min + maxSkew and everything reopens when the minimum rises.
 * So while no minimum rises, feasibility only shrinks and the first
 * feasible node stays first until it is exhausted: placing min(capacity,
 * spread allowance) copies there at once equals placing them one by one.
 * A batch is cut to one copy whenever it would raise a minimum; after a
 * hostname minimum rises, skipped nodes are looked at again.
 *
 * Finding the first feasible node fast: candidate nodes are bucketed by
 * zone, each bucket scanned by a pointer that only moves forward past
 * nodes that cannot take a copy (until a hostname minimum rises). The
 * first feasible node overall is the smallest head among buckets whose
 * zone is open. */
#include "sched/place_int.h"
#include "sched/match.h"

#include <stdlib.h>
#include <string.h>

#define INF INT64_MAX
#define SPREAD_MAX 16

/* F_ELIG: the node carries every topology key of the pod's spread
 * constraints; F_AFF: the pod's node affinity admits it; F_TOL: the pod
 * tolerates its NoSchedule/NoExecute taints (computed only when a
 * constraint honours taints). */
enum { F_ELIG = 1, F_HFORB = 2, F_HAFF = 4, F_AFF = 8, F_TOL = 16 };
enum { Z_FORB = 1, Z_AFF = 2 };

typedef struct spread_st {
	const sched_spread *c;
	bool host;
	int64_t self;          /* 1 when the pod matches its own selector */
	int64_t *cnt;          /* per node (host) or per zone */
	int64_t m;             /* current minimum over domains */
	size_t n_at_min;
	size_t n_dom;
	bool m_fixed;          /* fewer domains than minDomains: minimum is 0 */
} spread_st;

struct sched__ws {
	size_t cap_nodes, cap_zones;
	int64_t *cap;          /* copies node can still take (0 = not now) */
	int64_t *placed;
	uint8_t *flags;
	size_t *touched;
	size_t *list;          /* candidates bucketed by zone */
	int64_t *spcnt[SPREAD_MAX];
	uint8_t *zflags;
	int64_t *zcap;
	size_t *gstart, *gend, *gptr;
	int64_t *zspcnt[SPREAD_MAX];
};

/* Per-call state of one podSet. */
typedef struct pctx {
	sched_snapshot *s;
	sched__ws *w;
	const sched_pod_spec *pod;
	int64_t req[SCHED_RES_MAX];
	bool impossible;
	bool has_ports;
	bool self_anti_host, self_anti_zone;
	size_t n_aff;
	bool aff_host, aff_zone;   /* affinity terms on each topology */
	bool aff_none;             /* nothing can satisfy the affinity */
	bool wildcard;             /* first-pod rule in force */
	bool restrict_first;       /* after the first-pod rule: only first's domain */
	size_t first;
	bool tol_unsched;
	bool dra;                  /* the pod requests DRA devices */
	spread_st sp[SPREAD_MAX];
	size_t n_sp;
	bool sp_zone;              /* some spread constraint is on zones */
} pctx;

sched__ws *sched__ws_new(void)
{
	return calloc(1, sizeof(sched__ws));
}

void sched__ws_free(sched__ws *w)
{
	int i;
	if(!w)
		return;
	free(w->cap);
	free(w->placed);
	free(w->flags);
	free(w->touched);
	free(w->list);
	free(w->zflags);
	free(w->zcap);
	free(w->gstart);
	free(w->gend);
	free(w->gptr);
	for(i = 0; i < SPREAD_MAX; i++) {
		free(w->spcnt[i]);
		free(w->zspcnt[i]);
	}
	free(w);
}

static int ws_reserve(sched__ws *w, size_t nn, size_t nz, size_t nsp)
{
	size_t i;
	if(nn > w->cap_nodes) {
		size_t c = nn + nn / 2 + 16;
#define RE(p) do { void *q = realloc((p), c * sizeof(*(p))); if(!q) return PRD_ENOMEM; (p) = q; } while(0)
		RE(w->cap);
		RE(w->placed);
		RE(w->flags);
		RE(w->touched);
		RE(w->list);
		for(i = 0; i < SPREAD_MAX; i++)
			if(w->spcnt[i])
				RE(w->spcnt[i]);
		w->cap_nodes = c;
	}
	for(i = 0; i < nsp; i++)
		if(!w->spcnt[i] && !(w->spcnt[i] = malloc(w->cap_nodes * sizeof(int64_t))))
			return PRD_ENOMEM;
	if(nz + 2 > w->cap_zones) {
		size_t c = nz + 16;
		RE(w->zflags);
		RE(w->zcap);
		RE(w->gstart);
		RE(w->gend);
		RE(w->gptr);
		for(i = 0; i < SPREAD_MAX; i++)
			if(w->zspcnt[i])
				RE(w->zspcnt[i]);
#undef RE
		w->cap_zones = c;
	}
	for(i = 0; i < nsp; i++)
		if(!w->zspcnt[i] && !(w->zspcnt[i] = malloc(w->cap_zones * sizeof(int64_t))))
			return PRD_ENOMEM;
	return 0;
}

static bool is_host(const char *key)
{
	return strcmp(key, SCHED_KEY_HOSTNAME) == 0;
}

/* Mark the domains (node or zone, per the term's topology) of every pod
 * of group g as forbidden. */
static void forbid_group(pctx *c, const sched__group *g, bool host)
{
	size_t i;
	for(i = 0; i < g->n_ents; i++) {
		const sched__gent *en = &g->ents[i];
		int32_t z;
		if(en->count <= 0)
			continue;
		if(host) {
			c->w->flags[en->node] |= F_HFORB;
		} else {
			z = c->s->nodes[en->node].zone;
			if(z >= 0)
				c->w->zflags[z] |= Z_FORB;
		}
	}
}

static bool spread_allows_dom(const spread_st *sp, size_t d)
{
	/* A domain the constraint does not count (-1) is never a feasible
	 * node's: the filters that exclude it from counting reject it. */
	return (sp->cnt[d] < 0 ? 0 : sp->cnt[d]) + sp->self - sp->m <= sp->c->max_skew;
}

/* Minimum over the constraint's domains and how many sit at it. */
static void spread_min(pctx *c, spread_st *sp)
{
	sched_snapshot *s = c->s;
	size_t i, n = sp->host ? s->n_nodes : s->n_zones;
	bool any = false;

	sp->n_at_min = 0;
	sp->n_dom = 0;
	sp->m = 0;
	for(i = 0; i < n; i++) {
		if(sp->cnt[i] < 0)
			continue; /* not a domain of this constraint */
		sp->n_dom++;
		if(!any || sp->cnt[i] < sp->m) {
			sp->m = sp->cnt[i];
			sp->n_at_min = 0;
			any = true;
		}
		if(sp->cnt[i] == sp->m)
			sp->n_at_min++;
	}
	if(sp->c->min_domains > 0 && sp->n_dom < (size_t)sp->c->min_domains) {
		sp->m = 0;
		sp->m_fixed = true;
	}
}

/* The pod's DoNotSchedule spread constraints (ScheduleAnyway ones do not
 * filter), at most SPREAD_MAX. */
static int collect_spread(pctx *c)
{
	const sched_pod_spec *pod = c->pod;
	size_t i;

	for(i = 0; i < pod->n_spread; i++) {
		if(pod->spread[i].when != SCHED_DO_NOT_SCHEDULE)
			continue;
		if(c->n_sp == SPREAD_MAX)
			return PRD_ERANGE;
		c->sp[c->n_sp].c = &pod->spread[i];
		c->sp[c->n_sp].host = is_host(pod->spread[i].topology_key);
		if(!c->sp[c->n_sp].host)
			c->sp_zone = true;
		c->n_sp++;
	}
	return 0;
}

/* What the spread constraints need to know of each node: does it carry
 * every topology key, does the pod's node affinity admit it, does the pod
 * tolerate its taints. */
static void mark_spread_eligible(pctx *c)
{
	const sched_snapshot *s = c->s;
	sched__ws *w = c->w;
	bool taints = false;
	size_t i;

	for(i = 0; i < c->n_sp; i++)
		taints |= c->sp[i].c->honor_taints;
	for(i = 0; i < s->n_nodes; i++) {
		const sched__node *n = &s->nodes[i];
		if(c->sp_zone && n->zone < 0)
			continue;
		w->flags[i] |= F_ELIG;
		if(sched_node_affinity_matches(c->pod, n->labels, n->n_labels))
			w->flags[i] |= F_AFF;
		if(taints && sched_taints_tolerated(c->pod, n->taints, n->n_taints))
			w->flags[i] |= F_TOL;
	}
}

/* Does constraint sp count node i (its domain and its pods)? The node
 * inclusion policies: nodeAffinityPolicy (default Honor) and
 * nodeTaintsPolicy (default Ignore). */
static bool spread_counts(const spread_st *sp, uint8_t flags)
{
	return (flags & F_ELIG) && (sp->c->ignore_affinity || (flags & F_AFF)) &&
	       (!sp->c->honor_taints || (flags & F_TOL));
}

/* The pod's own anti-affinity against pods already there, and whether a
 * term matches the pod itself. */
static void forbid_own_anti(pctx *c)
{
	const sched_snapshot *s = c->s;
	const sched_pod_spec *pod = c->pod;
	const char *ns = pod->namespace;
	size_t i, j;

	for(i = 0; i < pod->n_pod_anti_affinity; i++) {
		const sched_pod_term *t = &pod->pod_anti_affinity[i];
		bool host = is_host(t->topology_key);
		if(sched_pod_term_matches(t, ns, ns, pod->labels, pod->n_labels)) {
			if(host)
				c->self_anti_host = true;
			else
				c->self_anti_zone = true;
		}
		for(j = 0; j < s->n_groups; j++) {
			const sched__group *g = &s->groups[j];
			if(g->total > 0 && sched_pod_term_matches(t, ns, g->ns, g->labels, g->n_labels))
				forbid_group(c, g, host);
		}
	}
}

/* Existing pods' anti-affinity against this pod (symmetry). */
static void forbid_their_anti(pctx *c)
{
	const sched_snapshot *s = c->s;
	const sched_pod_spec *pod = c->pod;
	size_t j, k;

	for(j = 0; s->n_anti_groups && j < s->n_groups; j++) {
		const sched__group *g = &s->groups[j];
		if(!g->n_anti || g->total <= 0)
			continue;
		for(k = 0; k < g->n_anti; k++)
			if(sched_pod_term_matches(&g->anti[k], g->ns, pod->namespace, pod->labels,
			                          pod->n_labels))
				forbid_group(c, g, is_host(g->anti[k].topology_key));
	}
}

/* Required pod affinity: domains holding pods that match every term. When
 * none does, the first-pod rule applies if the pod matches every term
 * itself, and nothing can satisfy the affinity otherwise. */
static void mark_affinity(pctx *c)
{
	const sched_snapshot *s = c->s;
	const sched_pod_spec *pod = c->pod;
	const char *ns = pod->namespace;
	sched__ws *w = c->w;
	bool self_all = true, any_match = false;
	size_t i, j, k;

	c->n_aff = pod->n_pod_affinity;
	if(!c->n_aff)
		return;
	for(i = 0; i < c->n_aff; i++) {
		const sched_pod_term *t = &pod->pod_affinity[i];
		if(is_host(t->topology_key))
			c->aff_host = true;
		else
			c->aff_zone = true;
		if(!sched_pod_term_matches(t, ns, ns, pod->labels, pod->n_labels))
			self_all = false;
	}
	for(j = 0; j < s->n_groups; j++) {
		const sched__group *g = &s->groups[j];
		bool all = g->total > 0;
		for(i = 0; i < c->n_aff && all; i++)
			all = sched_pod_term_matches(&pod->pod_affinity[i], ns, g->ns, g->labels,
			                             g->n_labels);
		if(!all)
			continue;
		for(k = 0; k < g->n_ents; k++) {
			const sched__gent *en = &g->ents[k];
			int32_t z = s->nodes[en->node].zone;
			if(en->count <= 0)
				continue;
			w->flags[en->node] |= F_HAFF;
			if(z >= 0)
				w->zflags[z] |= Z_AFF;
			if(c->aff_host || z >= 0)
				any_match = true;
		}
	}
	if(!any_match) {
		c->wildcard = self_all;
		c->aff_none = !self_all;
	}
}

/* Spread counts: matching pods in the pod's namespace on eligible nodes,
 * per domain; then each constraint's minimum. */
static void count_spread(pctx *c)
{
	const sched_snapshot *s = c->s;
	const sched_pod_spec *pod = c->pod;
	sched__ws *w = c->w;
	size_t i, j, k;

	for(i = 0; i < c->n_sp; i++) {
		spread_st *sp = &c->sp[i];
		size_t nd = sp->host ? s->n_nodes : s->n_zones;
		sp->cnt = sp->host ? w->spcnt[i] : w->zspcnt[i];
		/* -1: not a domain of this constraint (no node it counts). */
		for(j = 0; j < nd; j++)
			sp->cnt[j] = -1;
		for(j = 0; j < s->n_nodes; j++)
			if(spread_counts(sp, w->flags[j]))
				sp->cnt[sp->host ? j : (size_t)s->nodes[j].zone] = 0;
		sp->self = sched_selector_matches(sp->c->selector, pod->labels, pod->n_labels);
		for(j = 0; j < s->n_groups; j++) {
			const sched__group *g = &s->groups[j];
			if(g->total <= 0 || strcmp(g->ns, pod->namespace) != 0 ||
			   !sched_selector_matches(sp->c->selector, g->labels, g->n_labels))
				continue;
			for(k = 0; k < g->n_ents; k++) {
				const sched__gent *en = &g->ents[k];
				if(en->count <= 0 || !spread_counts(sp, w->flags[en->node]))
					continue;
				if(sp->host)
					sp->cnt[en->node] += en->count;
				else
					sp->cnt[s->nodes[en->node].zone] += en->count;
			}
		}
		spread_min(c, sp);
	}
}

/* Everything about the pod that does not depend on the node: request
 * vector, anti-affinity / affinity domains, spread counts and minima. */
static int prepare(pctx *c, sched_snapshot *s, sched__ws *w, const sched_pod_spec *pod)
{
	size_t i, nn = s->n_nodes, nz = s->n_zones;
	int rc;

	memset(c, 0, sizeof(*c));
	c->s = s;
	c->w = w;
	c->pod = pod;
	if((rc = collect_spread(c)))
		return rc;
	if((rc = ws_reserve(w, nn, nz, c->n_sp)))
		return rc;
	memset(w->flags, 0, nn);
	memset(w->zflags, 0, nz);
	sched__req_vector(s, pod->requests, pod->n_requests, c->req, &c->impossible);
	for(i = 0; i < pod->n_host_ports; i++)
		c->has_ports |= pod->host_ports[i].port != 0;
	c->tol_unsched = sched_tolerates_unschedulable(pod);
	c->dra = pod->n_dev_requests > 0;
	if(c->n_sp)
		mark_spread_eligible(c);
	forbid_own_anti(c);
	forbid_their_anti(c);
	mark_affinity(c);
	count_spread(c);
	return 0;
}

/* Checks that do not change while this podSet is placed. */
static sched_fit static_fit(const pctx *c, size_t i)
{
	const sched__node *n = &c->s->nodes[i];
	const sched_pod_spec *pod = c->pod;

	if(pod->node_name && strcmp(pod->node_name, n->name) != 0)
		return SCHED_FIT_NODE_NAME;
	if(n->unschedulable && !c->tol_unsched)
		return SCHED_FIT_UNSCHEDULABLE;
	if(!sched_node_affinity_matches(pod, n->labels, n->n_labels))
		return SCHED_FIT_NODE_AFFINITY;
	if(!sched_taints_tolerated(pod, n->taints, n->n_taints))
		return SCHED_FIT_TAINTS;
	if(c->impossible)
		return SCHED_FIT_RESOURCES;
	if(c->n_sp && !(c->w->flags[i] & F_ELIG))
		return SCHED_FIT_SPREAD;
	if(c->aff_zone && n->zone < 0)
		return SCHED_FIT_AFFINITY;
	return SCHED_FIT_OK;
}

static int64_t res_cap(const pctx *c, const sched__node *n)
{
	int64_t cap = INF;
	size_t r;
	for(r = 0; r < c->s->n_res; r++) {
		int64_t f, k;
		if(c->req[r] <= 0)
			continue;
		f = n->alloc[r] - n->used[r];
		if(f < c->req[r])
			return 0;
		k = f / c->req[r];
		if(k < cap)
			cap = k;
	}
	return cap;
}

static bool ports_conflict(const pctx *c, const sched__node *n)
{
	size_t i, j;
	for(i = 0; i < c->pod->n_host_ports; i++)
		for(j = 0; j < n->n_ports; j++)
			if(sched_host_ports_conflict(&c->pod->host_ports[i], &n->ports[j]))
				return true;
	return false;
}

static bool aff_ok(const pctx *c, size_t i)
{
	const sched__node *n = &c->s->nodes[i];
	if(!c->n_aff || c->wildcard)
		return true;
	if(c->aff_none)
		return false;
	if(c->restrict_first)
		return (!c->aff_host || i == c->first) &&
		       (!c->aff_zone || n->zone == c->s->nodes[c->first].zone);
	return (!c->aff_host || (c->w->flags[i] & F_HAFF)) &&
	       (!c->aff_zone || (c->w->zflags[n->zone] & Z_AFF));
}

static bool host_spread_ok(const pctx *c, size_t i)
{
	size_t k;
	for(k = 0; k < c->n_sp; k++)
		if(c->sp[k].host && !spread_allows_dom(&c->sp[k], i))
			return false;
	return true;
}

static bool zone_spread_ok(const pctx *c, int32_t z)
{
	size_t k;
	if(z < 0)
		return true;
	for(k = 0; k < c->n_sp; k++)
		if(!c->sp[k].host && !spread_allows_dom(&c->sp[k], (size_t)z))
			return false;
	return true;
}

/* Copies the node's free devices can serve, at most cap (0 = none). Last
 * of the checks (evaluating selectors is the dearest) and kept out of
 * line, so pods without claims pay one branch. Out of memory counts as no
 * room, never as room. */
static __attribute__((noinline)) int64_t dra_cap(const pctx *c, const sched__node *n, int64_t cap)
{
	int64_t fit = 0;
	if(!n->dev || sched__dra_fit(n->dev->devs, n->dev->n, n->dev->holder, c->pod, cap, &fit, NULL, NULL))
		return 0;
	return fit;
}

/* Copies node i could take now, ignoring spread (0 = none), and why not. */
static int64_t node_cap(const pctx *c, size_t i, sched_fit *why)
{
	const sched__node *n = &c->s->nodes[i];
	int64_t cap;
	sched_fit f = static_fit(c, i);

	if(f != SCHED_FIT_OK)
		goto no;
	cap = res_cap(c, n);
	if(cap == 0) {
		f = SCHED_FIT_RESOURCES;
		goto no;
	}
	if(c->has_ports) {
		if(ports_conflict(c, n)) {
			f = SCHED_FIT_HOST_PORTS;
			goto no;
		}
		cap = 1;
	}
	if((c->w->flags[i] & F_HFORB) || (n->zone >= 0 && (c->w->zflags[n->zone] & Z_FORB))) {
		f = SCHED_FIT_ANTI_AFFINITY;
		goto no;
	}
	if(c->self_anti_host && cap > 1)
		cap = 1;
	if(!aff_ok(c, i)) {
		f = SCHED_FIT_AFFINITY;
		goto no;
	}
	if(c->dra && !(cap = dra_cap(c, n, cap))) {
		f = SCHED_FIT_DEVICES;
		goto no;
	}
	if(why)
		*why = SCHED_FIT_OK;
	return cap;
no:
	if(why)
		*why = f;
	return 0;
}

int sched_check_pod(sched_snapshot *s, const sched_pod_spec *pod, size_t idx,
		    sched_fit *why, prd_err *e)
{
	sched__ws *w;
	pctx c;
	int rc;

	if(!s || !why)
		return prd_err_set(e, PRD_EINVAL, "check_pod: NULL argument");
	if((rc = sched_pod_validate(pod, e)))
		return rc;
	if(idx >= s->n_nodes)
		return prd_err_set(e, PRD_EINVAL, "check_pod: node index %zu out of range", idx);
	if(!(w = sched__ws_new()))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	rc = prepare(&c, s, w, pod);
	if(rc) {
		sched__ws_free(w);
		return prd_err_set(e, rc, "check_pod: %s", prd_strerror(rc));
	}
	node_cap(&c, idx, why);
	if(*why == SCHED_FIT_OK) {
		int32_t z = s->nodes[idx].zone;
		if(!host_spread_ok(&c, idx) || !zone_spread_ok(&c, z))
			*why = SCHED_FIT_SPREAD;
	}
	sched__ws_free(w);
	return 0;
}

/* Drop nodes that can take nothing more from the bucket lists and rewind
 * every bucket (after a hostname spread minimum rose). */
static void compact(pctx *c, size_t ng)
{
	sched__ws *w = c->w;
	size_t g, i, o;
	for(g = 0; g < ng; g++) {
		o = w->gstart[g];
		for(i = w->gstart[g]; i < w->gend[g]; i++) {
			size_t x = w->list[i];
			if(w->cap[x] > 0 && aff_ok(c, x))
				w->list[o++] = x;
		}
		w->gend[g] = o;
		w->gptr[g] = w->gstart[g];
	}
}

/* The spread constraint whose rounds may be batched, or NULL: exactly one
 * constraint changes with placement (it matches the pod itself), it is on
 * zones with maxSkew 1 and a real minimum, and no zone closes after one
 * copy. Every other constraint is then static for this podSet. */
static spread_st *round_batching(pctx *c)
{
	spread_st *only = NULL;
	size_t k;
	if(c->self_anti_zone)
		return NULL;
	for(k = 0; k < c->n_sp; k++) {
		if(!c->sp[k].self)
			continue;
		if(only)
			return NULL;
		only = &c->sp[k];
	}
	if(!only || only->host || only->c->max_skew != 1 || only->m_fixed)
		return NULL;
	return only;
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

static int assign_push(sched_set_result *r, size_t node, int64_t count)
{
	if(r->n_assign == r->cap_assign) {
		size_t nc = r->cap_assign ? r->cap_assign * 2 : 16;
		void *p = realloc(r->assign, nc * sizeof(*r->assign));
		if(!p)
			return PRD_ENOMEM;
		r->assign = p;
		r->cap_assign = nc;
	}
	r->assign[r->n_assign].node = node;
	r->assign[r->n_assign].count = count;
	r->n_assign++;
	return 0;
}

/* Capacities of nodes [lo, hi), then the candidates among them bucketed by
 * zone (no zone last), each bucket's scan pointer at its start; and how
 * many copies each zone may still take. */
static void fill_buckets(pctx *c, const sched_snapshot *s, sched__ws *w, size_t lo, size_t hi)
{
	size_t nz = s->n_zones, ng = nz + 1, g, i;

	for(g = 0; g <= ng; g++)
		w->gstart[g] = 0;
	for(i = lo; i < hi; i++) {
		w->placed[i] = 0;
		w->cap[i] = node_cap(c, i, NULL);
		if(w->cap[i] > 0) {
			int32_t z = s->nodes[i].zone;
			w->gstart[(z < 0 ? nz : (size_t)z) + 1]++;
		}
	}
	for(g = 1; g <= ng; g++)
		w->gstart[g] += w->gstart[g - 1];
	for(g = 0; g < ng; g++)
		w->gptr[g] = w->gend[g] = w->gstart[g];
	for(i = lo; i < hi; i++)
		if(w->cap[i] > 0) {
			int32_t z = s->nodes[i].zone;
			g = z < 0 ? nz : (size_t)z;
			w->list[w->gend[g]++] = i;
		}
	for(g = 0; g < nz; g++)
		w->zcap[g] = c->self_anti_zone ? 1 : INF;
}

/* The first node that can take a copy now, or SIZE_MAX: the smallest head
 * among the open zones' buckets, after moving each head past nodes that
 * cannot. */
static size_t first_feasible(const pctx *c, sched__ws *w, size_t nz)
{
	size_t ng = nz + 1, best = SIZE_MAX, g;

	for(g = 0; g < ng; g++) {
		if(w->gptr[g] == w->gend[g])
			continue;
		if(g < nz && (w->zcap[g] == 0 || !zone_spread_ok(c, (int32_t)g)))
			continue;
		while(w->gptr[g] < w->gend[g]) {
			size_t x = w->list[w->gptr[g]];
			if(w->cap[x] > 0 && aff_ok(c, x) && host_spread_ok(c, x))
				break;
			w->gptr[g]++;
		}
		if(w->gptr[g] < w->gend[g] && w->list[w->gptr[g]] < best)
			best = w->list[w->gptr[g]];
	}
	return best;
}

/* Balanced zones under maxSkew 1: first fit gives every zone one copy per
 * round, each on that zone's first feasible node. While every zone has
 * such a node and it can take R more copies, R rounds are identical: place
 * them at once. Returns whether it did (and took them off *rem). */
static bool place_rounds(pctx *c, sched__ws *w, size_t nz, spread_st *round_sp,
			 int64_t *rem, size_t *n_touched)
{
	size_t heads = 0, g;
	int64_t rounds;

	if(round_sp->n_at_min != round_sp->n_dom || c->wildcard ||
	   *rem < (int64_t)round_sp->n_dom)
		return false;
	rounds = *rem / (int64_t)round_sp->n_dom;
	for(g = 0; g < nz; g++)
		if(w->gptr[g] < w->gend[g]) {
			size_t x = w->list[w->gptr[g]];
			heads++;
			if(w->cap[x] < rounds)
				rounds = w->cap[x];
		}
	if(heads != round_sp->n_dom || rounds <= 1)
		return false;
	for(g = 0; g < nz; g++)
		if(w->gptr[g] < w->gend[g]) {
			size_t x = w->list[w->gptr[g]];
			if(w->placed[x] == 0)
				w->touched[(*n_touched)++] = x;
			w->placed[x] += rounds;
			w->cap[x] -= rounds;
			round_sp->cnt[g] += rounds;
		}
	round_sp->m += rounds;
	*rem -= rounds * (int64_t)heads;
	return true;
}

/* How many copies go on `best` at once: bounded by its capacity, its
 * zone's, each self-matching spread constraint's allowance, and cut to one
 * when the copy would raise a minimum. */
static int64_t batch_size(const pctx *c, const sched__ws *w, size_t best, int32_t z, int64_t rem)
{
	int64_t take = rem < w->cap[best] ? rem : w->cap[best];
	size_t k;

	if(z >= 0 && w->zcap[z] < take)
		take = w->zcap[z];
	for(k = 0; k < c->n_sp; k++) {
		const spread_st *sp = &c->sp[k];
		size_t d = sp->host ? best : (size_t)z;
		int64_t allow;
		if(!sp->self)
			continue;
		allow = sp->c->max_skew + sp->m - sp->cnt[d];
		if(allow < take)
			take = allow;
		if(!sp->m_fixed && sp->cnt[d] == sp->m && sp->n_at_min == 1)
			take = 1;
	}
	return take;
}

/* Place `take` copies on `best`: capacities, spread counts and minima,
 * the first-pod rule. Returns whether a hostname minimum rose. */
static bool apply_batch(pctx *c, sched__ws *w, size_t best, int32_t z, int64_t take,
			size_t *n_touched)
{
	bool host_phase = false;
	size_t k;

	if(w->placed[best] == 0)
		w->touched[(*n_touched)++] = best;
	w->placed[best] += take;
	w->cap[best] -= take;
	if(z >= 0 && w->zcap[z] != INF)
		w->zcap[z] -= take;
	for(k = 0; k < c->n_sp; k++) {
		spread_st *sp = &c->sp[k];
		size_t d = sp->host ? best : (size_t)z;
		int64_t old = sp->cnt[d];
		if(!sp->self)
			continue;
		sp->cnt[d] += take;
		if(sp->m_fixed || old != sp->m)
			continue;
		if(--sp->n_at_min == 0) {
			spread_min(c, sp);
			if(sp->host)
				host_phase = true;
		}
	}
	if(c->wildcard) {
		c->wildcard = false;
		c->restrict_first = true;
		c->first = best;
	}
	return host_phase;
}

/* Add the copies placed on the touched nodes to the snapshot as group *gi
 * (created when SIZE_MAX), in node order, and append them to res. */
static int commit_placed(const pctx *c, sched_snapshot *s, sched__ws *w, size_t n_touched,
			 size_t *gi, sched_set_result *res)
{
	size_t i;
	int rc;

	for(i = 1; i < n_touched; i++)
		if(w->touched[i - 1] > w->touched[i]) {
			qsort(w->touched, n_touched, sizeof(size_t), cmp_size);
			break;
		}
	if(*gi == SIZE_MAX && (rc = sched__group_new(s, c->pod, c->req, gi)))
		return rc;
	for(i = 0; i < n_touched; i++) {
		size_t x = w->touched[i];
		if((rc = sched__group_place(s, *gi, x, w->placed[x])))
			return rc;
		if(c->dra) {
			if(*gi >= (size_t)INT32_MAX)
				return PRD_ERANGE;
			if((rc = sched__dra_take(s, x, c->pod, w->placed[x], (int32_t)(*gi + 1))))
				return rc;
			if(res)
				res->group = *gi + 1;
		}
		if(res && (rc = assign_push(res, x, w->placed[x])))
			return rc;
	}
	return 0;
}

int sched__place_set(sched_snapshot *s, sched__ws *w, const sched_pod_spec *pod,
		     int64_t count, size_t lo, size_t hi, size_t *gi, int64_t *placed,
		     sched_set_result *res)
{
	size_t nz = s->n_zones, ng = nz + 1, n_touched = 0;
	int64_t rem = count;
	spread_st *round_sp;
	pctx c;
	int rc;

	*placed = 0;
	if(count <= 0 || lo >= hi)
		return 0;
	if((rc = prepare(&c, s, w, pod)))
		return rc;
	fill_buckets(&c, s, w, lo, hi);
	round_sp = round_batching(&c);

	while(rem > 0) {
		size_t best = first_feasible(&c, w, nz);
		int64_t take;
		int32_t z;

		if(best == SIZE_MAX)
			break;
		if(round_sp && place_rounds(&c, w, nz, round_sp, &rem, &n_touched))
			continue;
		z = s->nodes[best].zone;
		take = batch_size(&c, w, best, z, rem);
		rem -= take;
		if(apply_batch(&c, w, best, z, take, &n_touched))
			compact(&c, ng);
	}

	*placed = count - rem;
	if(*placed == 0)
		return 0;
	return commit_placed(&c, s, w, n_touched, gi, res);
}

static int cmp_assign(const void *a, const void *b)
{
	const sched_assign *x = a, *y = b;
	return x->node < y->node ? -1 : x->node > y->node;
}

void sched__set_result_normalize(sched_set_result *r)
{
	size_t i, o = 0;
	if(r->n_assign < 2)
		return;
	for(i = 1; i < r->n_assign; i++)
		if(r->assign[i - 1].node > r->assign[i].node) {
			qsort(r->assign, r->n_assign, sizeof(*r->assign), cmp_assign);
			break;
		}
	for(i = 1; i < r->n_assign; i++) {
		if(r->assign[i].node == r->assign[o].node)
			r->assign[o].count += r->assign[i].count;
		else
			r->assign[++o] = r->assign[i];
	}
	r->n_assign = o + 1;
}

/* Largest-first key: dominant share against `ref`, then the raw vector. */
static double dominant_share(const int64_t req[SCHED_RES_MAX], const int64_t ref[SCHED_RES_MAX],
			     size_t nres)
{
	double best = 0;
	size_t r;
	for(r = 0; r < nres; r++) {
		double sh;
		if(r == SCHED_RES_PODS || req[r] <= 0)
			continue;
		if(ref[r] <= 0)
			return 1e300;
		sh = (double)req[r] / (double)ref[r];
		if(sh > best)
			best = sh;
	}
	return best;
}

/* Is set a placed before set b? */
static bool bigger(double sa, const int64_t *ra, size_t ia, double sb, const int64_t *rb,
		   size_t ib)
{
	size_t r;
	if(sa != sb)
		return sa > sb;
	for(r = 0; r < SCHED_RES_MAX; r++)
		if(ra[r] != rb[r])
			return ra[r] > rb[r];
	return ia < ib;
}

void sched__order(const sched_snapshot *s, const sched_podset *sets, size_t n,
		  const int64_t ref[SCHED_RES_MAX], size_t *order)
{
	int64_t(*req)[SCHED_RES_MAX] = NULL;
	double *share = NULL;
	size_t i, j;
	bool imp;

	for(i = 0; i < n; i++)
		order[i] = i;
	req = malloc((n ? n : 1) * sizeof(*req));
	share = malloc((n ? n : 1) * sizeof(*share));
	if(!req || !share) {
		/* Without memory for keys keep input order: still deterministic. */
		free(req);
		free(share);
		return;
	}
	for(i = 0; i < n; i++) {
		sched__req_vector(s, sets[i].pod->requests, sets[i].pod->n_requests, req[i], &imp);
		share[i] = imp ? 1e300 : dominant_share(req[i], ref, s->n_res);
	}
	for(i = 1; i < n; i++)
		for(j = i; j > 0; j--) {
			size_t a = order[j - 1], b = order[j], t;
			if(!bigger(share[b], req[b], b, share[a], req[a], a))
				break;
			t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	free(req);
	free(share);
}

static int check_sets(const sched_podset *sets, size_t n, prd_err *e)
{
	size_t i;
	int rc;
	if(n && !sets)
		return prd_err_set(e, PRD_EINVAL, "NULL podSet list");
	for(i = 0; i < n; i++) {
		if(sets[i].count < 0 || sets[i].count > SCHED_COUNT_MAX)
			return prd_err_set(e, PRD_EINVAL, "podSet %zu: count %lld out of range [0, %lld]",
			                   i, (long long)sets[i].count, (long long)SCHED_COUNT_MAX);
		if((rc = sched_pod_validate(sets[i].pod, e))) {
			prd_err_prefix(e, "podSet %zu", i);
			return rc;
		}
	}
	return 0;
}

int sched_place_order(const sched_snapshot *s, const sched_podset *sets, size_t n,
		      size_t *order, prd_err *e)
{
	int64_t total[SCHED_RES_MAX] = { 0 };
	size_t i, r;
	int rc;
	if(!s || (n && !order))
		return prd_err_set(e, PRD_EINVAL, "place_order: NULL argument");
	if((rc = check_sets(sets, n, e)))
		return rc;
	for(i = 0; i < s->n_nodes; i++)
		for(r = 0; r < SCHED_RES_MAX; r++)
			total[r] = sched__sat_add(total[r], s->nodes[i].alloc[r]);
	sched__order(s, sets, n, total, order);
	return 0;
}

void sched_place_result_free(sched_place_result *r)
{
	size_t i;
	if(!r)
		return;
	for(i = 0; i < r->n_sets && r->sets; i++)
		free(r->sets[i].assign);
	free(r->sets);
	free(r->order);
	memset(r, 0, sizeof(*r));
}

int sched_place(sched_snapshot *s, const sched_podset *sets, size_t n,
		sched_place_result *out, prd_err *e)
{
	sched__ws *w = NULL;
	size_t i;
	int rc;

	if(!out)
		return prd_err_set(e, PRD_EINVAL, "place: NULL result");
	memset(out, 0, sizeof(*out));
	if(!s)
		return prd_err_set(e, PRD_EINVAL, "place: NULL snapshot");
	if((rc = check_sets(sets, n, e)))
		return rc;
	out->sets = calloc(n ? n : 1, sizeof(*out->sets));
	out->order = calloc(n ? n : 1, sizeof(*out->order));
	w = sched__ws_new();
	if(!out->sets || !out->order || !w) {
		rc = prd_err_set(e, PRD_ENOMEM, "out of memory");
		goto done;
	}
	out->n_sets = n;
	if((rc = sched_place_order(s, sets, n, out->order, e)))
		goto done;
	out->fits_all = true;
	for(i = 0; i < n; i++) {
		size_t k = out->order[i], gi = SIZE_MAX;
		sched_set_result *r = &out->sets[k];
		r->requested = sets[k].count;
		rc = sched__place_set(s, w, sets[k].pod, sets[k].count, 0, s->n_nodes, &gi,
		                      &r->placed, r);
		if(rc) {
			prd_err_set(e, rc, "placing podSet %zu: %s", k, prd_strerror(rc));
			goto done;
		}
		out->requested += r->requested;
		out->placed += r->placed;
		if(r->placed < r->requested)
			out->fits_all = false;
	}
done:
	sched__ws_free(w);
	if(rc)
		sched_place_result_free(out);
	return rc;
}

const char *sched_fit_str(sched_fit f)
{
	switch(f) {
	case SCHED_FIT_OK: return "fits";
	case SCHED_FIT_NODE_NAME: return "node(s) didn't match the requested node name";
	case SCHED_FIT_UNSCHEDULABLE: return "node(s) were unschedulable";
	case SCHED_FIT_NODE_AFFINITY: return "node(s) didn't match Pod's node affinity/selector";
	case SCHED_FIT_TAINTS: return "node(s) had untolerated taint";
	case SCHED_FIT_RESOURCES: return "Insufficient resources";
	case SCHED_FIT_HOST_PORTS: return "node(s) didn't have free ports for the requested pod ports";
	case SCHED_FIT_ANTI_AFFINITY: return "node(s) didn't match pod anti-affinity rules";
	case SCHED_FIT_AFFINITY: return "node(s) didn't match pod affinity rules";
	case SCHED_FIT_SPREAD: return "node(s) didn't match pod topology spread constraints";
	case SCHED_FIT_DEVICES: return "node(s) didn't have enough free devices matching the pod's resource claims";
	}
	return "unknown";
}

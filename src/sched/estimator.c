/* First-fit-decreasing estimator over fresh copies of a template node.
 *
 * A podSet first fills the new nodes opened so far (one group placement
 * over them), then opens as many fresh nodes at once as its remaining pods
 * could need if every fresh node took the template's upper bound, places
 * onto just those, and trims the fresh nodes left empty. This equals
 * opening nodes one pod at a time because fresh nodes are identical and
 * an empty trailing node is only used once every earlier node is full -
 * and because a new node that refused a copy keeps refusing while only
 * fresh nodes receive copies (capacity, ports and anti-affinity only
 * tighten; the template's zone can only close for zone spread, since the
 * other zones' counts are fixed here). Hostname spread is the exception:
 * empty nodes are spread domains at count 0 and a rising minimum can reopen
 * earlier new nodes, so podSets with it open one node at a time and place
 * over all new nodes each time. */
#include "sched/estimator.h"
#include "sched/match.h"
#include "sched/place_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sched_est_result_free(sched_est_result *r)
{
	if(!r)
		return;
	sched_place_result_free(&r->place);
	memset(r, 0, sizeof(*r));
}

static int check_input(const sched_snapshot *s, const sched_node_spec *tmpl,
		       const sched_podset *sets, size_t n, prd_err *e)
{
	size_t i;
	int rc;
	if(!s || !tmpl || !tmpl->name || (n && !sets))
		return prd_err_set(e, PRD_EINVAL, "estimate: NULL argument");
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

/* Add the template inside the caller's fork, copy its interned form into
 * *proto and take it out again. */
static int make_proto(sched_snapshot *s, const sched_node_spec *tmpl, sched__node *proto,
		      sched__ndev *hdr, prd_err *e)
{
	sched_node_spec t = *tmpl;
	char name[300];
	size_t idx;
	int rc;

	snprintf(name, sizeof(name), "%.250s/template", tmpl->name);
	t.name = name;
	if((rc = sched_snapshot_add_node(s, &t, &idx, e)))
		return rc;
	*proto = s->nodes[idx];
	/* The template's device list outlives it (arena); its holders are
	 * freed with it, and fresh copies get their own. */
	proto->dev = NULL;
	if(s->nodes[idx].dev) {
		hdr->devs = s->nodes[idx].dev->devs;
		hdr->n = s->nodes[idx].dev->n;
		proto->dev = hdr;
	}
	proto->ports = NULL;
	proto->n_ports = proto->cap_ports = 0;
	sched__node_pop(s);
	return 0;
}

int sched_estimate_order(const sched_snapshot *s, const sched_node_spec *tmpl,
			 const sched_podset *sets, size_t n, size_t *order, prd_err *e)
{
	int64_t ref[SCHED_RES_MAX] = { 0 };
	size_t i;
	int rc, id;

	if((rc = check_input(s, tmpl, sets, n, e)))
		return rc;
	if(n && !order)
		return prd_err_set(e, PRD_EINVAL, "estimate_order: NULL order");
	for(i = 0; i < tmpl->n_allocatable; i++)
		if(tmpl->allocatable[i].name && (id = sched__res_find(s, tmpl->allocatable[i].name)) >= 0)
			ref[id] = tmpl->allocatable[i].value;
	sched__order(s, sets, n, ref, order);
	return 0;
}

/* Upper bound on the copies of `pod` one fresh node can take. */
static int64_t fresh_bound(const sched_snapshot *s, const sched__node *proto,
			   const sched_pod_spec *pod)
{
	int64_t req[SCHED_RES_MAX], cap = INT64_MAX;
	bool impossible;
	size_t r, i;

	sched__req_vector(s, pod->requests, pod->n_requests, req, &impossible);
	if(impossible)
		return 0;
	for(r = 0; r < s->n_res; r++) {
		int64_t k;
		if(req[r] <= 0)
			continue;
		k = proto->alloc[r] / req[r];
		if(k < cap)
			cap = k;
	}
	for(i = 0; i < pod->n_host_ports; i++)
		if(pod->host_ports[i].port)
			cap = cap > 1 ? 1 : cap;
	for(i = 0; i < pod->n_pod_anti_affinity; i++) {
		const sched_pod_term *t = &pod->pod_anti_affinity[i];
		if(strcmp(t->topology_key, SCHED_KEY_HOSTNAME) == 0 &&
		   sched_pod_term_matches(t, pod->namespace, pod->namespace, pod->labels,
		                          pod->n_labels))
			cap = cap > 1 ? 1 : cap;
	}
	if(pod->n_dev_requests && cap > 0) {
		/* The template's devices, all free. */
		int64_t fit = 0;
		if(!proto->dev || sched__dra_fit(proto->dev->devs, proto->dev->n, NULL, pod, cap, &fit, NULL, NULL))
			fit = 0;
		cap = fit;
	}
	return cap;
}

static bool has_host_spread(const sched_pod_spec *pod)
{
	size_t i;
	for(i = 0; i < pod->n_spread; i++)
		if(pod->spread[i].when == SCHED_DO_NOT_SCHEDULE &&
		   strcmp(pod->spread[i].topology_key, SCHED_KEY_HOSTNAME) == 0)
			return true;
	return false;
}

static int add_fresh(sched_snapshot *s, const sched__node *proto, const char *tname,
		     size_t ordinal)
{
	char name[300];
	const char *copy;
	snprintf(name, sizeof(name), "%.250s/new-%zu", tname, ordinal);
	if(!(copy = sched__arena_str(&s->arena, name)))
		return PRD_ENOMEM;
	return sched__node_add_copied(s, proto, copy, NULL);
}

/* Pop trailing new nodes that received nothing (new nodes only ever get
 * pods from this estimate, so an empty one has no pods at all). */
static void trim(sched_snapshot *s, size_t first_new)
{
	while(s->n_nodes > first_new && s->nodes[s->n_nodes - 1].used[SCHED_RES_PODS] == 0)
		sched__node_pop(s);
}

static int64_t limit_of(const sched_est_limits *lim, sched_est_limit *kind)
{
	int64_t max = lim->group_room;
	*kind = SCHED_EST_GROUP_MAX;
	if(lim->max_nodes_total > 0) {
		int64_t t = lim->max_nodes_total - lim->cluster_nodes;
		if(t < 0)
			t = 0;
		if(t < max) {
			max = t;
			*kind = SCHED_EST_TOTAL_MAX;
		}
	}
	if(lim->max_new_nodes > 0 && lim->max_new_nodes < max) {
		max = lim->max_new_nodes;
		*kind = SCHED_EST_SCALEUP_MAX;
	}
	return max;
}

/* Place podSet `set` (its result r) first on the new nodes opened so far,
 * then on fresh nodes opened as needed, at most max_new in all. Records in
 * out->limited_by when the limit stopped it. */
static int estimate_set(sched_snapshot *s, sched__ws *w, const sched__node *proto,
			const char *tname, size_t first_new, int64_t max_new,
			sched_est_limit kind, const sched_podset *set, sched_set_result *r,
			sched_est_result *out)
{
	const sched_pod_spec *pod = set->pod;
	bool hs = has_host_spread(pod);
	int64_t rem = set->count, p;
	size_t gi = SIZE_MAX;
	int rc;

	r->requested = rem;
	if((rc = sched__place_set(s, w, pod, rem, first_new, s->n_nodes, &gi, &p, r)))
		return rc;
	rem -= p;
	while(rem > 0) {
		int64_t avail = max_new - (int64_t)(s->n_nodes - first_new), bound, add, a;
		size_t start = s->n_nodes;
		if(avail <= 0) {
			out->limited_by = kind;
			break;
		}
		bound = fresh_bound(s, proto, pod);
		if(bound <= 0)
			break;
		add = hs ? 1 : (rem + bound - 1) / bound;
		if(add > avail)
			add = avail;
		for(a = 0; a < add; a++)
			if((rc = add_fresh(s, proto, tname, s->n_nodes - first_new)))
				return rc;
		rc = sched__place_set(s, w, pod, rem, hs ? first_new : start, s->n_nodes, &gi, &p, r);
		if(rc)
			return rc;
		trim(s, first_new);
		rem -= p;
		if(p == 0)
			break;
	}
	r->placed = r->requested - rem;
	return 0;
}

/* Assignments are reported relative to the first new node. */
static void rebase_new(sched_place_result *pr, size_t first_new)
{
	size_t i, j;

	for(i = 0; i < pr->n_sets; i++) {
		sched_set_result *r = &pr->sets[i];
		for(j = 0; j < r->n_assign; j++)
			r->assign[j].node -= first_new;
		sched__set_result_normalize(r);
	}
}

int sched_estimate(sched_snapshot *s, const sched_node_spec *tmpl, const sched_podset *sets,
		   size_t n, const sched_est_limits *lim, sched_est_result *out, prd_err *e)
{
	sched_place_result *pr;
	sched__ws *w = NULL;
	sched__node proto;
	sched__ndev hdr;
	sched_est_limit kind;
	int64_t max_new;
	size_t first_new, i;
	bool forked = false;
	int rc;

	if(!out)
		return prd_err_set(e, PRD_EINVAL, "estimate: NULL result");
	memset(out, 0, sizeof(*out));
	pr = &out->place;
	if((rc = check_input(s, tmpl, sets, n, e)))
		return rc;
	if(!lim || lim->group_room < 0 || lim->max_nodes_total < 0 || lim->cluster_nodes < 0 ||
	   lim->max_new_nodes < 0)
		return prd_err_set(e, PRD_EINVAL, "estimate: missing or negative limits");
	max_new = limit_of(lim, &kind);
	if((size_t)max_new > SCHED_NODES_MAX - s->n_nodes)
		max_new = (int64_t)(SCHED_NODES_MAX - s->n_nodes);

	pr->sets = calloc(n ? n : 1, sizeof(*pr->sets));
	pr->order = calloc(n ? n : 1, sizeof(*pr->order));
	w = sched__ws_new();
	if(!pr->sets || !pr->order || !w) {
		rc = prd_err_set(e, PRD_ENOMEM, "out of memory");
		goto done;
	}
	pr->n_sets = n;
	if((rc = sched_snapshot_fork(s))) {
		prd_err_set(e, rc, "estimate: cannot fork snapshot (depth %d)", s->depth);
		goto done;
	}
	forked = true;
	if((rc = make_proto(s, tmpl, &proto, &hdr, e)))
		goto done;
	if((rc = sched_estimate_order(s, tmpl, sets, n, pr->order, e)))
		goto done;
	first_new = s->n_nodes;
	pr->fits_all = true;

	for(i = 0; i < n; i++) {
		size_t k = pr->order[i];
		sched_set_result *r = &pr->sets[k];
		rc = estimate_set(s, w, &proto, tmpl->name, first_new, max_new, kind, &sets[k], r, out);
		if(rc) {
			prd_err_set(e, rc, "estimate: %s", prd_strerror(rc));
			goto done;
		}
		pr->requested += r->requested;
		pr->placed += r->placed;
		if(r->placed < r->requested)
			pr->fits_all = false;
	}
	out->new_nodes = (int64_t)(s->n_nodes - first_new);
	rebase_new(pr, first_new);
	if(pr->fits_all)
		out->limited_by = SCHED_EST_UNLIMITED;
done:
	if(forked)
		sched_snapshot_revert(s);
	sched__ws_free(w);
	if(rc)
		sched_est_result_free(out);
	return rc;
}

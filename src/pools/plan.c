/* From a pool's spec and the cluster's nodes to the value of every quota
 * key the pool's population manages. Pure computation: no I/O, no clock. */
#include "pools/pools.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

static const char *const default_resources[] = { "cpu", "memory", "ephemeral-storage", "pods" };

void pool_plan_free(pool_plan *p)
{
	if(!p)
		return;
	free(p->entries);
	memset(p, 0, sizeof(*p));
}

bool pool_node_counts(const kube_node *node, const pool_filter *f)
{
	if(node->meta.deleted_ns)
		return false;
	if(node->unschedulable && !f->include_unschedulable)
		return false;
	if(node->ready != KUBE_COND_TRUE && !f->include_not_ready)
		return false;
	return true;
}

/* Append an entry for `key` (from `resource`) and return it, or NULL when
 * out of memory. Entries are few (a dozen), so the array grows by one. */
static pool_entry *add_entry(pool_plan *p, const char *key, const char *resource)
{
	pool_entry *grown = realloc(p->entries, (p->n + 1) * sizeof(*grown));
	pool_entry *e;

	if(!grown)
		return NULL;
	p->entries = grown;
	e = &p->entries[p->n++];
	memset(e, 0, sizeof(*e));
	str_copy(e->key, sizeof(e->key), key);
	str_copy(e->resource, sizeof(e->resource), resource);
	return e;
}

static pool_entry *find_entry(pool_plan *p, const char *key)
{
	size_t i;
	for(i = 0; i < p->n; i++)
		if(!strcmp(p->entries[i].key, key))
			return &p->entries[i];
	return NULL;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const pool_entry *)a)->key, ((const pool_entry *)b)->key);
}

/* The headroom item that applies to `resource`: its own, else the default
 * percentage, else NULL. */
static const pool_headroom *headroom_for(const pool_spec *s, const char *resource)
{
	const pool_headroom *def = NULL;
	size_t i;

	for(i = 0; i < s->nheadroom; i++) {
		if(!s->headroom[i].resource)
			def = &s->headroom[i];
		else if(!strcmp(s->headroom[i].resource, resource))
			return &s->headroom[i];
	}
	return def;
}

/* total minus the headroom for the entry's resource, never below zero. */
static int apply_headroom(const pool_spec *s, pool_entry *e)
{
	const pool_headroom *h = headroom_for(s, e->resource);
	int rc;

	e->computed = e->total;
	if(!h)
		return 0;
	if(h->percent) {
		pool_ratio keep = { 100 * h->pct.den - h->pct.num, 100 * h->pct.den };
		rc = pool_qty_scale(&e->total, &keep, pool_granularity(e->resource), &e->computed);
	} else {
		rc = qty_sub(&e->computed, &h->amount);
	}
	if(!rc && qty_sign(&e->computed) < 0) {
		qty_format f = qty_get_format(&e->total);
		e->computed = qty_from_int64(0, f);
	}
	return rc;
}

/* Add a `vanished` entry for every extended-resource key of the pool's
 * populated-keys list that the nodes no longer offer. */
static int add_vanished(pool_plan *p, const char *list)
{
	const char *q = list;
	char key[POOL_KEY_MAX];

	while(q && *q) {
		const char *end = strchr(q, ',');
		size_t len = end ? (size_t)(end - q) : strlen(q);
		if(len < sizeof(key)) {
			memcpy(key, q, len);
			key[len] = '\0';
			if(str_starts_with(key, "requests.") && pool_is_extended(key + 9) && !find_entry(p, key)) {
				pool_entry *e = add_entry(p, key, key + 9);
				if(!e)
					return PRD_ENOMEM;
				e->vanished = true;
			}
		}
		q = end ? end + 1 : NULL;
	}
	return 0;
}

/* The resource set: listed, or the defaults (every extended resource a
 * selected node offers joins later). Each gets an entry, so a listed
 * resource no node has is populated as zero. PRD_ENOMEM or 0. */
static int seed_entries(const pool_spec *s, pool_plan *p)
{
	char key[POOL_KEY_MAX];
	size_t i;

	if(s->resources) {
		for(i = 0; i < s->nresources; i++) {
			if(!pool_quota_key(s->resources[i], key, sizeof(key)))
				continue;
			if(!find_entry(p, key) && !add_entry(p, key, s->resources[i]))
				return PRD_ENOMEM;
		}
	} else {
		for(i = 0; i < sizeof(default_resources) / sizeof(default_resources[0]); i++) {
			pool_quota_key(default_resources[i], key, sizeof(key));
			if(!add_entry(p, key, default_resources[i]))
				return PRD_ENOMEM;
		}
	}
	return 0;
}

/* Does the pool's selector select node n? PRD_ENOMEM or 0. */
static int node_selected(const pool_spec *s, const kube_node *n, bool *match)
{
	sel_label stack[32], *labels = stack;
	size_t j;

	if(n->nlabels > 32 && !(labels = malloc(n->nlabels * sizeof(*labels))))
		return PRD_ENOMEM;
	for(j = 0; j < n->nlabels; j++) {
		labels[j].key = n->labels[j].key;
		labels[j].value = n->labels[j].value;
	}
	*match = sel_matches_pairs(s->selector, labels, n->nlabels);
	if(labels != stack)
		free(labels);
	return 0;
}

/* Count the selected nodes and add their allocatable to the entries'
 * totals. */
static int sum_nodes(const pool_spec *s, const kube_node *const *nodes, size_t nnodes,
		     const pool_filter *f, pool_plan *p, prd_err *err)
{
	char key[POOL_KEY_MAX];
	size_t i, j;
	int rc;

	for(i = 0; i < nnodes; i++) {
		const kube_node *n = nodes[i];
		bool match;

		if(!pool_node_counts(n, f))
			continue;
		if(node_selected(s, n, &match))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		if(!match)
			continue;
		p->nodes++;
		for(j = 0; j < n->nallocatable; j++) {
			const kube_res *r = &n->allocatable[j];
			pool_entry *e;
			if(!pool_quota_key(r->name, key, sizeof(key)))
				continue;
			e = find_entry(p, key);
			if(!e && !s->resources && pool_is_extended(r->name) && !(e = add_entry(p, key, r->name)))
				return prd_err_set(err, PRD_ENOMEM, "out of memory");
			if(e && (rc = qty_add(&e->total, &r->q)))
				return prd_err_set(err, rc, "%s: the sum over the nodes is out of range", key);
		}
	}
	return 0;
}

/* A limits.cpu / limits.memory entry for each of the first nreq (requests)
 * entries on cpu and memory: the computed request times the factor. */
static int derive_limits(const pool_spec *s, pool_plan *p, size_t nreq, prd_err *err)
{
	char key[POOL_KEY_MAX];
	size_t i;
	int rc;

	for(i = 0; i < nreq; i++) {
		pool_entry *req = &p->entries[i], *lim;
		char res[POOL_KEY_MAX];
		qty computed;
		/* A copy: add_entry below may move the array. */
		str_copy(res, sizeof(res), req->resource);
		if(req->vanished || (strcmp(res, "cpu") && strcmp(res, "memory")))
			continue;
		if((rc = pool_qty_scale(&req->computed, &s->factor, pool_granularity(res), &computed)))
			return prd_err_set(err, rc, "limits.%s: factor arithmetic is out of range", res);
		str_copy(key, sizeof(key), "limits.");
		str_copy(key + 7, sizeof(key) - 7, res);
		if(!(lim = add_entry(p, key, res)))
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		req = &p->entries[i];
		lim->total = req->total;
		lim->computed = computed;
	}
	return 0;
}

/* Each entry's value: its computed amount, never below what claims hold. */
static void clamp_to_used(const kube_resourcepool *pool, pool_plan *p)
{
	size_t i;

	for(i = 0; i < p->n; i++) {
		pool_entry *e = &p->entries[i];
		const qty *used = pool ? kube_res_get(pool->used, pool->nused, e->key) : NULL;
		e->used = used ? *used : qty_from_int64(0, QTY_DECIMAL_SI);
		e->value = e->computed;
		if(qty_cmp(&e->computed, &e->used) < 0) {
			e->value = e->used;
			e->clamped = true;
		}
		if(e->vanished)
			e->retire = qty_sign(&e->used) <= 0;
	}
}

int pool_plan_compute(const pool_spec *s, const kube_resourcepool *pool, const kube_node *const *nodes,
		      size_t nnodes, const pool_filter *f, pool_plan *out, prd_err *err)
{
	pool_filter nofilter = { false, false };
	pool_plan p = { 0 };
	size_t i, nreq;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if(!f)
		f = &nofilter;
	if(seed_entries(s, &p))
		goto nomem;
	if((rc = sum_nodes(s, nodes, nnodes, f, &p, err)))
		goto done;
	if(!s->resources && pool) {
		const char *prev = kube_kv_get(pool->annotations, pool->nannotations, POOL_ANN_KEYS);
		if(prev && (rc = add_vanished(&p, prev)))
			goto nomem;
	}

	/* Headroom on the requests side, then the limits derived from it. */
	nreq = p.n;
	for(i = 0; i < nreq; i++) {
		if((rc = apply_headroom(s, &p.entries[i]))) {
			rc = prd_err_set(err, rc, "%s: headroom arithmetic is out of range", p.entries[i].key);
			goto done;
		}
	}
	if(s->has_factor && (rc = derive_limits(s, &p, nreq, err)))
		goto done;
	clamp_to_used(pool, &p);
	qsort(p.entries, p.n, sizeof(*p.entries), cmp_entry);
	*out = p;
	return 0;

nomem:
	rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
done:
	pool_plan_free(&p);
	return rc;
}


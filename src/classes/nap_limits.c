/* Cluster-wide limits (--cores-total, --memory-total, --gpu-total): is a plan within them? */
#include "classes/nap_int.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/str.h"
#include "classes/details.h"
#include "classes/vocab.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cluster-wide limits -------------------------------------------- */

/* What one node of g has of `res` (capacity, else allocatable), base
 * units. */
static int64_t node_has(const pr_class_group *g, const char *res)
{
	json_object *st, *cap, *v;
	size_t i;
	if(g->tmpl_json && json_object_object_get_ex(g->tmpl_json, "status", &st) &&
	   json_object_object_get_ex(st, "capacity", &cap) && json_object_object_get_ex(cap, res, &v)) {
		qty q;
		int64_t out = 0;
		const char *s = json_object_get_string(v);
		if(s && qty_parse(s, &q, NULL) == 0 &&
		   (!strcmp(res, "cpu") ? qty_milli_value(&q, &out) : qty_value(&q, &out)) == 0)
			return out;
	}
	for(i = 0; i < g->tmpl.n_allocatable; i++)
		if(!strcmp(g->tmpl.allocatable[i].name, res))
			return g->tmpl.allocatable[i].value;
	return 0;
}

static void amount_words(const cfg_res_limit *l, int64_t v, char *out, size_t len)
{
	if(!strcmp(l->resource, "cpu"))
		snprintf(out, len, v % 1000 ? "%lld.%03lld cores" : "%lld cores", (long long)(v / 1000),
			 (long long)(v % 1000));
	else if(!strcmp(l->resource, "memory"))
		snprintf(out, len, "%.2f GiB", (double)v / (double)(1LL << 30));
	else
		snprintf(out, len, "%lld %.60s", (long long)v, l->resource);
}

static int64_t sat_add(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
	return a && b > INT64_MAX / a ? INT64_MAX : a * b;
}

bool nap_within_limits(const pr_class_host *h, const at_choice *ch, bool count_coming, char *msg, size_t len)
{
	const state_intent *open = NULL;
	size_t nopen = 0, l, i;
	if(!h->limits->nres_limits || !h->res_totals)
		return true;
	if(h->db && count_coming)
		at_open_intents(h, &open, &nopen);
	for(l = 0; l < h->limits->nres_limits; l++) {
		const cfg_res_limit *lim = &h->limits->res_limits[l];
		int64_t now = h->res_totals[l], coming = 0, need = 0;
		char a[64], b[64], c[64], m[64];
		for(i = 0; i < nopen; i++) {
			const state_intent *in = &open[i];
			pr_class_group *g;
			int64_t left = in->delta - (int64_t)in->n_nodes;
			/* Nodes a plan in flight still adds (its named ones are
			 * Nodes already). */
			if(left <= 0 || (in->phase != STATE_PHASE_PLANNED && in->phase != STATE_PHASE_INCREASING &&
					 in->phase != STATE_PHASE_WAITING_FOR_NODES))
				continue;
			if((g = at_find_group(h, in->node_group)))
				coming = sat_add(coming, sat_mul(left, node_has(g, lim->resource)));
		}
		for(i = 0; i < ch->n; i++)
			need = sat_add(need, sat_mul(ch->parts[i].delta, node_has(ch->parts[i].g, lim->resource)));
		if(need > 0 && sat_add(sat_add(now, coming), need) > lim->max) {
			amount_words(lim, now, a, sizeof(a));
			amount_words(lim, coming, b, sizeof(b));
			amount_words(lim, need, c, sizeof(c));
			amount_words(lim, lim->max, m, sizeof(m));
			snprintf(msg, len, "the scale-up would pass the cluster-wide limit %s (%s at most): the cluster's "
				 "nodes have %s%s%s%s, the request's new nodes need %s more; no node was added",
				 lim->flag, m, a, coming ? " (plus " : "", coming ? b : "",
				 coming ? " coming for plans in flight)" : "", c);
			return false;
		}
	}
	return true;
}

/* Expanders: a chain of strategies (priority, least-waste, most-pods, ...)
 * that picks one node-group option among those that fit every pod. */
#include "sched/expander.h"
#include "util/rand.h"
#include "util/str.h"

#include <regex.h>
#include <stdlib.h>
#include <string.h>

enum strat { S_LEAST_WASTE, S_MOST_PODS, S_LEAST_NODES, S_PRIORITY, S_RANDOM, S_PRICE };

#define CHAIN_MAX 8

typedef struct prio_re {
	int64_t priority;
	regex_t re;
} prio_re;

struct sched_expander {
	enum strat chain[CHAIN_MAX];
	size_t n_chain;
	prio_re *prio;
	size_t n_prio;
	uint64_t rng;
};

static const struct {
	const char *name;
	enum strat s;
} names[] = {
	{ "least-waste", S_LEAST_WASTE }, { "most-pods", S_MOST_PODS },
	{ "least-nodes", S_LEAST_NODES }, { "priority", S_PRIORITY },
	{ "random", S_RANDOM }, { "price", S_PRICE },
};

void sched_expander_free(sched_expander *x)
{
	size_t i;
	if(!x)
		return;
	for(i = 0; i < x->n_prio; i++)
		regfree(&x->prio[i].re);
	free(x->prio);
	free(x);
}

static int parse_chain(sched_expander *x, const char *chain, prd_err *e)
{
	const char *p = chain && chain[0] ? chain : "least-waste";
	while(*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p), i;
		bool found = false;
		while(len && (*p == ' ')) {
			p++;
			len--;
		}
		while(len && p[len - 1] == ' ')
			len--;
		for(i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if(strlen(names[i].name) == len && strncmp(names[i].name, p, len) == 0) {
				if(x->n_chain == CHAIN_MAX)
					return prd_err_set(e, PRD_EINVAL, "expander chain longer than %d",
					                   CHAIN_MAX);
				x->chain[x->n_chain++] = names[i].s;
				found = true;
			}
		if(!found)
			return prd_err_set(e, PRD_EINVAL, "unknown expander \"%.*s\"", (int)len, p);
		if(!end)
			break;
		p = end + 1;
	}
	return 0;
}

static void free_prio(prio_re *v, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++)
		regfree(&v[i].re);
	free(v);
}

/* Compile a priority table into *out and *nout (caller frees with free_prio;
 * NULL/0 for an empty table). */
static int compile_prio(const sched_priority *prio, size_t n_prio, prio_re **out, size_t *nout,
			prd_err *e)
{
	prio_re *v = NULL;
	size_t i, j, total = 0, k = 0;

	*out = NULL;
	*nout = 0;
	if(n_prio && !prio)
		return prd_err_set(e, PRD_EINVAL, "expander: NULL priority table");
	for(i = 0; i < n_prio; i++) {
		if(prio[i].n_regexes && !prio[i].regexes)
			return prd_err_set(e, PRD_EINVAL, "priority %lld: NULL regex list",
			                   (long long)prio[i].priority);
		total += prio[i].n_regexes;
	}
	if(total && !(v = calloc(total, sizeof(*v))))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n_prio; i++)
		for(j = 0; j < prio[i].n_regexes; j++) {
			const char *re = prio[i].regexes[j];
			int r;
			if(!re) {
				free_prio(v, k);
				return prd_err_set(e, PRD_EINVAL, "priority %lld: NULL regex",
				                   (long long)prio[i].priority);
			}
			r = regcomp(&v[k].re, re, REG_EXTENDED | REG_NOSUB);
			if(r) {
				char msg[128];
				regerror(r, NULL, msg, sizeof(msg));
				free_prio(v, k);
				return prd_err_set(e, PRD_EINVAL, "priority %lld: bad regex \"%s\": %s",
				                   (long long)prio[i].priority, re, msg);
			}
			v[k++].priority = prio[i].priority;
		}
	*out = v;
	*nout = k;
	return 0;
}

int sched_expander_new(const char *chain, const sched_priority *prio, size_t n_prio,
		       uint64_t seed, sched_expander **out, prd_err *e)
{
	sched_expander *x;
	int rc;

	if(!out)
		return prd_err_set(e, PRD_EINVAL, "expander: NULL argument");
	*out = NULL;
	if(!(x = calloc(1, sizeof(*x))))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	x->rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
	rc = parse_chain(x, chain, e);
	if(!rc)
		rc = compile_prio(prio, n_prio, &x->prio, &x->n_prio, e);
	if(rc) {
		sched_expander_free(x);
		return rc;
	}
	*out = x;
	return 0;
}

int sched_expander_set_priorities(sched_expander *x, const sched_priority *prio, size_t n_prio,
				  prd_err *e)
{
	prio_re *v;
	size_t n;
	int rc;

	if(!x)
		return prd_err_set(e, PRD_EINVAL, "expander: NULL argument");
	if((rc = compile_prio(prio, n_prio, &v, &n, e)))
		return rc;
	free_prio(x->prio, x->n_prio);
	x->prio = v;
	x->n_prio = n;
	return 0;
}

bool sched_expander_uses_priority(const sched_expander *x)
{
	size_t i;
	for(i = 0; x && i < x->n_chain; i++)
		if(x->chain[i] == S_PRIORITY)
			return true;
	return false;
}


/* Unused share of cpu plus memory across the option's new nodes, as
 * upstream's least-waste computes it (0 = nothing wasted, 2 = all). */
static double waste(const sched_option *o)
{
	long double ac = (long double)o->node_cpu * (long double)o->node_count;
	long double am = (long double)o->node_memory * (long double)o->node_count;
	long double w = 0;
	if(ac > 0)
		w += (ac - (long double)o->req_cpu) / ac;
	if(am > 0)
		w += (am - (long double)o->req_memory) / am;
	return (double)w;
}

/* What the option's new nodes cost an hour (only with a known price). */
static long double cost(const sched_option *o)
{
	return (long double)o->price_micros * (long double)o->node_count;
}

/* Highest priority matching the id, or false when nothing matches. */
static bool prio_of(const sched_expander *x, const char *id, int64_t *out)
{
	bool found = false;
	size_t i;
	for(i = 0; i < x->n_prio; i++)
		if(regexec(&x->prio[i].re, id, 0, NULL, 0) == 0 &&
		   (!found || x->prio[i].priority > *out)) {
			*out = x->prio[i].priority;
			found = true;
		}
	return found;
}

/* Keep in idx[0..*n) only the options best by strategy st. */
static void filter(sched_expander *x, enum strat st, const sched_option *o, size_t *idx,
		   size_t *n)
{
	size_t i, k = 0;
	double best_d = 0;
	int64_t best_i = 0;
	size_t best_at = 0;
	bool have = false;

	if(st == S_RANDOM) {
		idx[0] = idx[prd_splitmix64(&x->rng) % *n];
		*n = 1;
		return;
	}
	/* First pass: the best value; second: keep the ties. */
	for(i = 0; i < *n; i++) {
		const sched_option *p = &o[idx[i]];
		int64_t v = 0;
		double d = 0;
		switch(st) {
		case S_LEAST_WASTE:
			d = waste(p);
			if(!have || d < best_d)
				best_d = d;
			break;
		case S_MOST_PODS:
			v = p->pods;
			if(!have || v > best_i)
				best_i = v;
			break;
		case S_LEAST_NODES:
			v = p->node_count;
			if(!have || v < best_i)
				best_i = v;
			break;
		case S_PRIORITY:
			if(!prio_of(x, p->group_id, &v))
				continue;
			if(!have || v > best_i)
				best_i = v;
			break;
		case S_PRICE:
			if(!p->has_price)
				continue;
			if(!have || cost(p) < cost(&o[idx[best_at]]))
				best_at = i;
			break;
		case S_RANDOM:
			break;
		}
		have = true;
	}
	if(!have)
		return; /* strategy kept nothing: skip it */
	for(i = 0; i < *n; i++) {
		const sched_option *p = &o[idx[i]];
		int64_t v;
		bool keep = false;
		switch(st) {
		case S_LEAST_WASTE: keep = waste(p) == best_d; break;
		case S_MOST_PODS: keep = p->pods == best_i; break;
		case S_LEAST_NODES: keep = p->node_count == best_i; break;
		case S_PRIORITY: keep = prio_of(x, p->group_id, &v) && v == best_i; break;
		case S_PRICE: keep = p->has_price && cost(p) == cost(&o[idx[best_at]]); break;
		case S_RANDOM: break;
		}
		if(keep)
			idx[k++] = idx[i];
	}
	*n = k;
}

int sched_expander_choose(sched_expander *x, const sched_option *opts, size_t n, size_t *best,
			  prd_err *e)
{
	size_t *idx, m = 0, i;

	if(!x || !best || (n && !opts))
		return prd_err_set(e, PRD_EINVAL, "expander: NULL argument");
	for(i = 0; i < n; i++) {
		const sched_option *o = &opts[i];
		if(!o->group_id || o->node_count < 0 || o->pods < 0 || o->node_cpu < 0 ||
		   o->node_memory < 0 || o->req_cpu < 0 || o->req_memory < 0)
			return prd_err_set(e, PRD_EINVAL, "expander: option %zu is malformed", i);
	}
	if(!(idx = malloc((n ? n : 1) * sizeof(*idx))))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n; i++)
		if(opts[i].fits_all)
			idx[m++] = i;
	if(m == 0) {
		free(idx);
		return prd_err_set(e, PRD_ENOTFOUND, "no node group fits every pod");
	}
	for(i = 0; i < x->n_chain && m > 1; i++)
		filter(x, x->chain[i], opts, idx, &m);
	*best = idx[0];
	free(idx);
	return 0;
}

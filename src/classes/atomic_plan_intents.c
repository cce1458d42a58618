/* The atomic class's open intents as a pass reads them, its intent writes, and the module's kept and pass slots. */
#include "classes/atomic_plan_int.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void at_plan_base(const char *id, char *out, size_t len)
{
	const char *hash = strrchr(id, '#');
	size_t n = hash ? (size_t)(hash - id) : strlen(id);
	snprintf(out, len, "%.*s", (int)n, id);
}

/* ---- the open intents of a pass ---------------------------------------- */

static void lists_free(at_list *l)
{
	at_list *next;
	for(; l; l = next) {
		next = l->next;
		state_intent_list_free(l->v, l->n);
		free(l);
	}
}

static void memo_retire(at_memo *m)
{
	if(!m || !m->cur)
		return;
	m->cur->next = m->retired;
	m->retired = m->cur;
	m->cur = NULL;
}

void at_kept_free(void *p)
{
	at_memo *m = p;
	if(!m)
		return;
	memo_retire(m);
	lists_free(m->retired);
	hmap_free(&m->progress_at);
	hmap_free(&m->taken_at);
	hmap_free(&m->kviews);
	hmap_free(&m->refused_at);
	free(m);
}

static void pass_free(void *p)
{
	hmap_free(&((at_pass *)p)->views);
	hmap_free(&((at_pass *)p)->nap);
}

/* The pass's slot, made on its first call in a pass; that call also
 * releases the readings retired in earlier passes (nothing of those passes
 * is walked now). NULL when out of memory. */
at_pass *at__pass_of(const pr_class_host *h)
{
	at_pass *p;
	if(!h->pass_data)
		return NULL;
	if(*h->pass_data)
		return *h->pass_data;
	if(!(p = arena_alloc(h->ar, sizeof(*p))))
		return NULL;
	hmap_init(&p->views, NULL);
	hmap_init(&p->nap, NULL);
	p->version_seen = false;
	if(arena_defer(h->ar, pass_free, p))
		return NULL;
	if(h->kept && *h->kept) {
		at_memo *m = *h->kept;
		lists_free(m->retired);
		m->retired = NULL;
	}
	*h->pass_data = p;
	return p;
}

hmap *at__pass_nap(const pr_class_host *h)
{
	at_pass *p = at__pass_of(h);
	return p ? &p->nap : NULL;
}

at_memo *at__memo_of(const pr_class_host *h)
{
	if(!h->kept)
		return NULL;
	at__pass_of(h);
	if(!*h->kept && (*h->kept = calloc(1, sizeof(at_memo)))) {
		hmap_init(&((at_memo *)*h->kept)->progress_at, free);
		hmap_init(&((at_memo *)*h->kept)->taken_at, free);
		hmap_init(&((at_memo *)*h->kept)->kviews, at__kview_free);
		hmap_init(&((at_memo *)*h->kept)->refused_at, free);
	}
	return *h->kept;
}

bool at_progress_due(const pr_class_host *h, const char *plan_id)
{
	at_memo *m = at__memo_of(h);
	const int64_t *at = m ? hmap_get(&m->progress_at, plan_id) : NULL;
	return !at || h->now >= *at + AT_PROGRESS_EVERY_NS || h->now < *at;
}

void at_progress_noted(const pr_class_host *h, const char *plan_id)
{
	at_memo *m = at__memo_of(h);
	int64_t *at = m ? hmap_get(&m->progress_at, plan_id) : NULL;
	if(!m)
		return;
	if(!at && (!(at = malloc(sizeof(*at))) || hmap_put(&m->progress_at, plan_id, at))) {
		free(at);
		return;
	}
	*at = h->now;
}

int64_t at_taken_since(const pr_class_host *h, const char *plan_id)
{
	at_memo *m = at__memo_of(h);
	int64_t *at = m ? hmap_get(&m->taken_at, plan_id) : NULL;
	if(!m)
		return h->now;
	if(!at) {
		if(!(at = malloc(sizeof(*at))) || hmap_put(&m->taken_at, plan_id, at)) {
			free(at);
			return h->now;
		}
		*at = h->now;
	}
	return *at;
}

/* Drop the keys of `m` (plan ids) that no intent in `open` has. */
static void forget_closed(hmap *m, const state_intent *open, size_t n)
{
	hmap_iter it;
	const char *id;
	void *v;
	char **gone = NULL;
	size_t ngone = 0, i, k;
	if(!hmap_len(m) || !(gone = calloc(hmap_len(m), sizeof(*gone))))
		return;
	hmap_iter_init(&it, m);
	while(hmap_iter_next(&it, &id, &v)) {
		for(k = 0; k < n && strcmp(open[k].plan_id, id); k++)
			;
		if(k == n)
			gone[ngone++] = str_dup(id);
	}
	for(i = 0; i < ngone; i++) {
		if(gone[i])
			hmap_del(m, gone[i]);
		free(gone[i]);
	}
	free(gone);
}

void at_kept_forget(const pr_class_host *h, const state_intent *open, size_t n)
{
	at_memo *m = at__memo_of(h);
	if(!m)
		return;
	forget_closed(&m->progress_at, open, n);
	forget_closed(&m->taken_at, open, n);
	forget_closed(&m->kviews, open, n);
}

static bool intent_same(const state_intent *a, const state_intent *b)
{
	size_t i;
	if(strcmp(a->plan_id, b->plan_id) || strcmp(a->request_uid, b->request_uid) ||
	   strcmp(a->node_group, b->node_group) || a->delta != b->delta || a->target_before != b->target_before ||
	   a->phase != b->phase || a->deadline_ns != b->deadline_ns || !str_eq(a->last_error, b->last_error) ||
	   !str_eq(a->known_before, b->known_before) || a->n_nodes != b->n_nodes)
		return false;
	for(i = 0; i < a->n_nodes; i++)
		if(strcmp(a->nodes[i], b->nodes[i]))
			return false;
	return true;
}

/* h->verify: the reading kept against the store read anew. */
static void verify_memo(const pr_class_host *h, const at_list *l)
{
	state_intent *v = NULL;
	size_t n = 0, i;
	bool same;
	if(state_intent_list_open(h->db, &v, &n, NULL))
		return;
	same = n == l->n;
	for(i = 0; same && i < n; i++)
		same = intent_same(&v[i], &l->v[i]);
	state_intent_list_free(v, n);
	if(!same) {
		log_warn("the open scale-up plans kept for the pass differ from the state store");
		h->count(h->ctx, PR_STAT_KEPT_MISMATCH);
	}
}

int at_open_intents(const pr_class_host *h, const state_intent **out, size_t *n)
{
	at_memo *m = at__memo_of(h);
	at_pass *p = at__pass_of(h);
	at_list *l;
	int rc;
	*out = NULL;
	*n = 0;
	if(!h->db || !m)
		return PRD_ENOMEM;
	/* Written by someone else (another connection)? Asked once a pass:
	 * the module's own writes retire the reading themselves. */
	if(m->cur && (!p || !p->version_seen) && m->version != state_intent_version(h->db))
		memo_retire(m);
	if(p)
		p->version_seen = true;
	if(m->cur && h->verify)
		verify_memo(h, m->cur);
	if(!m->cur) {
		/* (The version before the reading: a commit during it moves it.) */
		uint64_t version = state_intent_version(h->db);
		if(!(l = calloc(1, sizeof(*l))))
			return PRD_ENOMEM;
		if((rc = state_intent_list_open(h->db, &l->v, &l->n, NULL))) {
			free(l);
			return rc;
		}
		m->cur = l;
		m->version = version;
	}
	*out = m->cur->v;
	*n = m->cur->n;
	return 0;
}

void at__written(const pr_class_host *h)
{
	memo_retire(at__memo_of(h));
}

int at_intent_begin(const pr_class_host *h, const state_intent *in, prd_err *err)
{
	int rc = state_intent_begin(h->db, in, err);
	at__written(h);
	return rc;
}

int at_intent_advance(const pr_class_host *h, const char *plan_id, state_phase to, const char *error, prd_err *err)
{
	int rc = state_intent_advance(h->db, plan_id, to, error, err);
	at__written(h);
	return rc;
}

int at_intent_close(const pr_class_host *h, const char *plan_id, state_phase final_phase, const char *error,
		    prd_err *err)
{
	int rc = state_intent_close(h->db, plan_id, final_phase, error, err);
	at__written(h);
	return rc;
}

int at_intent_set_known(const pr_class_host *h, const char *plan_id, const char *names, prd_err *err)
{
	int rc = state_intent_set_known(h->db, plan_id, names, err);
	at__written(h);
	return rc;
}

int at_intent_add_nodes(const pr_class_host *h, const char *plan_id, const char *const *node_names, size_t n,
			prd_err *err)
{
	int rc = state_intent_add_nodes(h->db, plan_id, node_names, n, err);
	at__written(h);
	return rc;
}

bool at_plan_exists(const pr_class_host *h, const char *uid)
{
	const state_intent *open;
	size_t n, i;
	if(at_open_intents(h, &open, &n))
		return false;
	for(i = 0; i < n; i++)
		if(!strcmp(open[i].request_uid, uid))
			return true;
	return false;
}

bool at_plan_id_open(const pr_class_host *h, const char *any_id, bool *open_out)
{
	const state_intent *open;
	char base[300], b[300];
	size_t n, i;
	*open_out = false;
	if(at_open_intents(h, &open, &n))
		return false;
	at_plan_base(any_id, base, sizeof(base));
	for(i = 0; i < n && !*open_out; i++) {
		at_plan_base(open[i].plan_id, b, sizeof(b));
		*open_out = !strcmp(b, base);
	}
	return true;
}

/* A copy of an intent without its node list. */
static int intent_copy(state_intent *dst, const state_intent *src)
{
	*dst = *src;
	dst->nodes = NULL;
	dst->n_nodes = 0;
	dst->plan_id = str_dup(src->plan_id);
	dst->request_uid = str_dup(src->request_uid);
	dst->node_group = str_dup(src->node_group);
	dst->last_error = src->last_error ? str_dup(src->last_error) : NULL;
	dst->known_before = src->known_before ? str_dup(src->known_before) : NULL;
	dst->term = src->term ? str_dup(src->term) : NULL;
	if(!dst->plan_id || !dst->request_uid || !dst->node_group || (src->last_error && !dst->last_error) ||
	   (src->known_before && !dst->known_before) || (src->term && !dst->term)) {
		state_intent_clear(dst);
		return PRD_ENOMEM;
	}
	return 0;
}

bool at_plan_open(const pr_class_host *h, const char *uid, at_plan *out)
{
	const state_intent *open;
	size_t n = 0, i, mine = 0;
	memset(out, 0, sizeof(*out));
	if(at_open_intents(h, &open, &n))
		return false;
	for(i = 0; i < n; i++)
		mine += !strcmp(open[i].request_uid, uid);
	if(!mine || !(out->v = calloc(mine + 1, sizeof(*out->v))))
		return false;
	for(i = 0; i < n; i++) {
		if(strcmp(open[i].request_uid, uid))
			continue;
		if(intent_copy(&out->v[out->n], &open[i])) {
			at_plan_free(out);
			return false;
		}
		out->n++;
	}
	return true;
}

bool at_plan_all(const pr_class_host *h, const char *any_id, at_plan *out)
{
	char base[300], id[340];
	size_t i;
	memset(out, 0, sizeof(*out));
	at_plan_base(any_id, base, sizeof(base));
	out->v = calloc(AT_MAX_GROUPS + 1, sizeof(*out->v));
	if(!out->v || !h->db)
		return false;
	for(i = 0; i < AT_MAX_GROUPS; i++) {
		snprintf(id, sizeof(id), "%s#%zu", base, i);
		if(state_intent_get(h->db, id, &out->v[out->n], NULL))
			break;
		out->n++;
	}
	if(!out->n && state_intent_get(h->db, any_id, &out->v[0], NULL) == 0)
		out->n = 1; /* a plan of an older version: one intent, no '#' */
	return out->n > 0;
}

void at_plan_free(at_plan *p)
{
	size_t i;
	for(i = 0; i < p->n; i++)
		state_intent_clear(&p->v[i]);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

void at__kview_free(void *p)
{
	at_kview *kv = p;
	size_t i;
	if(!kv)
		return;
	for(i = 0; i < kv->n; i++) {
		free(kv->v[i].id);
		free(kv->v[i].node);
		free(kv->v[i].owner);
	}
	free(kv->v);
	free(kv->known);
	hmap_free(&kv->known_set);
	hmap_free(&kv->by_node);
	free(kv);
}

/* The ResourcePool population reconciler: list pools, compute, write the
 * difference with optimistic concurrency, report. */
#include "pools/pools.h"
#include "ops/log.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define POOLS_PATH "/apis/capsule.clastix.io/v1beta2/resourcepools"
#define WARNED_MAX 4096

struct pool_ctl {
	pool_opts o;
	_Atomic uint64_t dirty_gen;   /* bumped by pool_ctl_mark_dirty */
	uint64_t clean_gen;           /* dirty_gen as of the last complete sync */
	int64_t last_sync_mono;
	bool synced_once;
	pool_ctl_stats st;
	kube_intern *intern;
	hmap warned;                  /* pool\nreason\nmessage → int64 wall ns */
	hmap managed;                 /* pool names with metrics out */
};

static void free_ptr(void *p)
{
	free(p);
}

int pool_ctl_new(const pool_opts *opts, pool_ctl **out, prd_err *err)
{
	pool_ctl *c;

	*out = NULL;
	if(!opts || !opts->api || !opts->api->request)
		return prd_err_set(err, PRD_EINVAL, "pool_ctl_new: an API is required");
	if(opts->debounce_ns < 0 || opts->resync_ns < 0 || opts->max_conflict_retries < 0 || opts->warning_repeat_ns < 0)
		return prd_err_set(err, PRD_EINVAL, "pool_ctl_new: negative interval or retry count");
	if(!(c = calloc(1, sizeof(*c))))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	c->o = *opts;
	if(!c->o.clock)
		c->o.clock = clk_real();
	if(!c->o.debounce_ns)
		c->o.debounce_ns = 2 * PRD_NS_PER_SEC;
	if(!c->o.max_conflict_retries)
		c->o.max_conflict_retries = 5;
	if(!c->o.warning_repeat_ns)
		c->o.warning_repeat_ns = 600 * PRD_NS_PER_SEC;
	if(!(c->intern = kube_intern_new())) {
		free(c);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	hmap_init(&c->warned, free_ptr);
	hmap_init(&c->managed, NULL);
	atomic_init(&c->dirty_gen, 1);
	*out = c;
	return 0;
}

void pool_ctl_free(pool_ctl *c)
{
	if(!c)
		return;
	hmap_free(&c->warned);
	hmap_free(&c->managed);
	kube_intern_free(c->intern);
	free(c);
}

void pool_ctl_mark_dirty(pool_ctl *c)
{
	atomic_fetch_add(&c->dirty_gen, 1);
}

bool pool_ctl_due(pool_ctl *c, int64_t *wait_ns)
{
	int64_t now, next;

	if(atomic_load(&c->dirty_gen) == c->clean_gen) {
		if(c->o.resync_ns > 0 && c->synced_once) {
			now = clk_mono(c->o.clock);
			next = c->last_sync_mono + c->o.resync_ns;
			if(wait_ns)
				*wait_ns = now >= next ? 0 : next - now;
			return now >= next;
		}
		if(wait_ns)
			*wait_ns = -1;
		return false;
	}
	now = clk_mono(c->o.clock);
	next = c->last_sync_mono + c->o.debounce_ns;
	if(!c->synced_once || now >= next) {
		if(wait_ns)
			*wait_ns = 0;
		return true;
	}
	if(wait_ns)
		*wait_ns = next - now;
	return false;
}

void pool_ctl_get_stats(const pool_ctl *c, pool_ctl_stats *out)
{
	*out = c->st;
}

/* ------------------------------------------------------------ reporting */

/* Forget warnings older than the repeat window once the table is large, so
 * a pool whose clamp message changes every sync cannot grow it forever. */
static void prune_warned(pool_ctl *c, int64_t now)
{
	hmap_iter it;
	const char *k;
	void *v;
	char **old = NULL;
	size_t n = 0, i;

	if(hmap_len(&c->warned) < WARNED_MAX)
		return;
	old = malloc(hmap_len(&c->warned) * sizeof(*old));
	if(!old)
		return;
	hmap_iter_init(&it, &c->warned);
	while(hmap_iter_next(&it, &k, &v))
		if(now - *(int64_t *)v >= c->o.warning_repeat_ns)
			old[n++] = (char *)k;
	for(i = 0; i < n; i++) {
		char *key = str_dup(old[i]);   /* hmap_del frees the stored key */
		if(key)
			hmap_del(&c->warned, key);
		free(key);
	}
	free(old);
}

/* Record an Event about pool (JSON, borrowed). An identical Warning for
 * the same pool within warning_repeat_ns is dropped: a bad annotation or a
 * standing clamp would otherwise repeat on every sync. */
static void emit(pool_ctl *c, json_object *pool, const char *name, const char *type, const char *reason,
		 const char *msg)
{
	if(!strcmp(type, "Warning")) {
		int64_t now = clk_wall(c->o.clock), *at;
		char *key = str_printf("%s\n%s\n%s", name, reason, msg);
		if(!key)
			return;
		at = hmap_get(&c->warned, key);
		if(at && now - *at < c->o.warning_repeat_ns) {
			free(key);
			return;
		}
		prune_warned(c, now);
		if(!at && (at = malloc(sizeof(*at))) && hmap_put(&c->warned, key, at)) {
			free(at);
			at = NULL;
		}
		if(at)
			*at = now;
		free(key);
		log_warn("pool event", "pool", name, "reason", reason, "message", msg);
	} else {
		log_info("pool event", "pool", name, "reason", reason, "message", msg);
	}
	c->st.events++;
	if(c->o.event)
		c->o.event(c->o.event_ud, pool, type, reason, msg);
	else
		pool_event_write(c->o.api, c->o.clock, pool, type, reason, msg, NULL);
}

/* Base units of q (cores, bytes) as a double, for gauges. */
static double qty_double(const qty *q)
{
	int64_t v;
	if(!qty_milli_value(q, &v))
		return (double)v / 1000.0;
	if(!qty_value(q, &v))
		return (double)v;
	return qty_sign(q) < 0 ? -1e30 : 1e30;
}

static void note_update(pool_ctl *c, const char *pool, const char *result)
{
	if(c->o.metrics.update)
		c->o.metrics.update(c->o.metrics.ud, pool, result);
}

static void forget(pool_ctl *c, const char *pool)
{
	if(!hmap_has(&c->managed, pool))
		return;
	if(c->o.metrics.forget)
		c->o.metrics.forget(c->o.metrics.ud, pool);
	hmap_del(&c->managed, pool);
}

static void publish(pool_ctl *c, const char *pool, const pool_plan *p)
{
	size_t i;

	hmap_put(&c->managed, pool, NULL);
	if(c->o.metrics.nodes)
		c->o.metrics.nodes(c->o.metrics.ud, pool, p->nodes);
	if(c->o.metrics.populated)
		for(i = 0; i < p->n; i++)
			c->o.metrics.populated(c->o.metrics.ud, pool, p->entries[i].key,
					       qty_double(&p->entries[i].value), p->entries[i].clamped);
}

/* ------------------------------------------------------------ decisions */

/* The node count recorded in provreqd.io/last-population, or -1. */
static int64_t recorded_nodes(const kube_resourcepool *rp)
{
	const char *v = kube_kv_get(rp->annotations, rp->nannotations, POOL_ANN_LAST);
	const char *end;
	int64_t n;

	if(!v || !str_starts_with(v, "nodes="))
		return -1;
	v += 6;
	end = strchr(v, ',');
	if(str_to_int64_n(v, end ? (size_t)(end - v) : strlen(v), &n))
		return -1;
	return n;
}

/* The populated-keys value for plan p (caller frees): every entry that
 * stays managed, in key order. */
static char *keys_list(const pool_plan *p)
{
	buf b;
	size_t i;
	bool first = true;

	buf_init(&b);
	for(i = 0; i < p->n; i++) {
		if(p->entries[i].retire)
			continue;
		if(!first)
			buf_append_char(&b, ',');
		buf_append_str(&b, p->entries[i].key);
		first = false;
	}
	return buf_detach(&b);
}

/* Fill `changes` (a person's summary) and return whether any managed key
 * differs numerically from the pool's spec.quota.hard. */
static bool diff(const kube_resourcepool *rp, const pool_plan *p, buf *changes)
{
	char a[QTY_STR_MAX], b[QTY_STR_MAX];
	bool any = false;
	size_t i;

	for(i = 0; i < p->n; i++) {
		const pool_entry *e = &p->entries[i];
		const qty *cur = kube_res_get(rp->hard, rp->nhard, e->key);
		if(cur && !qty_cmp(cur, &e->value))
			continue;
		buf_printf(changes, "%s%s %s -> %s", any ? ", " : "", e->key, cur ? qty_str(cur, a) : "(unset)",
			   qty_str(&e->value, b));
		any = true;
	}
	return any;
}

/* The merge patch: the managed keys (canonical strings), our annotations
 * and the resourceVersion the plan was computed from, which turns the
 * patch into a compare-and-swap. A new reference the caller puts. */
static json_object *build_patch(pool_ctl *c, const kube_resourcepool *rp, const pool_plan *p, const char *keys)
{
	json_object *root = json_object_new_object(), *meta = json_object_new_object(),
		    *ann = json_object_new_object(), *spec = json_object_new_object(),
		    *quota = json_object_new_object(), *hard = json_object_new_object();
	char when[RFC3339_MAX], last[96], v[QTY_STR_MAX];
	size_t i;

	if(!root || !meta || !ann || !spec || !quota || !hard) {
		json_object_put(root);
		json_object_put(meta);
		json_object_put(ann);
		json_object_put(spec);
		json_object_put(quota);
		json_object_put(hard);
		return NULL;
	}
	json_object_object_add(root, "metadata", meta);
	json_object_object_add(root, "spec", spec);
	json_object_object_add(spec, "quota", quota);
	json_object_object_add(quota, "hard", hard);
	json_object_object_add(meta, "resourceVersion", json_object_new_string(rp->meta.rv));
	json_object_object_add(meta, "annotations", ann);
	if(rfc3339_format(clk_wall(c->o.clock), when, sizeof(when)))
		str_copy(when, sizeof(when), "unknown");
	snprintf(last, sizeof(last), "nodes=%zu,time=%s", p->nodes, when);
	json_object_object_add(ann, POOL_ANN_LAST, json_object_new_string(last));
	json_object_object_add(ann, POOL_ANN_KEYS, json_object_new_string(keys));
	for(i = 0; i < p->n; i++)
		json_object_object_add(hard, p->entries[i].key, json_object_new_string(qty_str(&p->entries[i].value, v)));
	return root;
}

/* ------------------------------------------------------------ reconcile */

static int get_pool(pool_ctl *c, const char *name, json_object **out, prd_err *err)
{
	char *path = str_printf("%s/%s", POOLS_PATH, name);
	int rc;

	if(!path)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	rc = kube_api_call(c->o.api, "GET", path, NULL, NULL, out, NULL, err);
	free(path);
	return rc;
}

static void warn_clamps(pool_ctl *c, json_object *pool, const char *name, const pool_plan *p)
{
	char t[QTY_STR_MAX], k[QTY_STR_MAX], u[QTY_STR_MAX], msg[1024];
	size_t i;

	for(i = 0; i < p->n; i++) {
		const pool_entry *e = &p->entries[i];
		if(!e->clamped)
			continue;
		c->st.clamped++;
		snprintf(msg, sizeof(msg),
			 "%s: the selected nodes provide %s (%s after headroom/factor) but claims hold %s; keeping %s "
			 "(a quota below the claimed amount is refused)",
			 e->key, qty_str(&e->total, t), qty_str(&e->computed, k), qty_str(&e->used, u),
			 qty_str(&e->value, u));
		emit(c, pool, name, "Warning", "PopulationClamped", msg);
	}
}

/* One reconcile of one pool: what it holds, released by pool_ctl_reconcile. */
typedef struct recon {
	json_object *pool;             /* the pool as last read (a reference) */
	json_object *fresh;            /* the re-read after a conflict */
	kube_meta *m;
	const kube_resourcepool *rp;   /* decoded from pool, inside m */
	pool_spec spec;
	pool_plan plan;
	char name[256];
	char *keys;                    /* keys_list(&plan) */
	buf changes;
} recon;

/* What a write attempt or re-read leads to. */
typedef enum {
	STEP_STOP,       /* finished: rc says how, nothing to publish */
	STEP_PUBLISH,    /* the pool holds the plan: warn about clamps, publish */
	STEP_CONFLICT,   /* someone else wrote the pool: re-read and retry */
	STEP_RETRY       /* re-read done: compute and write again */
} recon_step;

/* Compute the plan against r->rp and write it if the pool differs. */
static recon_step write_plan(pool_ctl *c, recon *r, const kube_node *const *nodes, size_t nnodes,
			     int attempt, int *rc, prd_err *err)
{
	bool changed;
	const char *prev_keys;
	json_object *patch, *answer = NULL;
	char *path;

	pool_plan_free(&r->plan);
	free(r->keys);
	r->keys = NULL;
	buf_reset(&r->changes);
	if((*rc = pool_plan_compute(&r->spec, r->rp, nodes, nnodes, &c->o.filter, &r->plan, err))) {
		c->st.errors++;
		note_update(c, r->name, "error");
		emit(c, r->pool, r->name, "Warning", "PopulationFailed", err ? err->msg : prd_strerror(*rc));
		return STEP_STOP;
	}
	if(!(r->keys = keys_list(&r->plan))) {
		*rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		return STEP_STOP;
	}
	prev_keys = kube_kv_get(r->rp->annotations, r->rp->nannotations, POOL_ANN_KEYS);
	changed = diff(r->rp, &r->plan, &r->changes);
	if(!changed && str_eq(prev_keys, r->keys) && recorded_nodes(r->rp) == (int64_t)r->plan.nodes) {
		c->st.unchanged++;
		note_update(c, r->name, "unchanged");
		return STEP_PUBLISH;
	}
	if(!(patch = build_patch(c, r->rp, &r->plan, r->keys)) ||
	   !(path = str_printf("%s/%s", POOLS_PATH, r->name))) {
		json_object_put(patch);
		*rc = prd_err_set(err, PRD_ENOMEM, "out of memory");
		return STEP_STOP;
	}
	*rc = kube_api_call(c->o.api, "PATCH", path, "application/merge-patch+json", patch, &answer, NULL, err);
	free(path);
	json_object_put(patch);
	json_object_put(answer);
	if(!*rc) {
		char msg[1024];
		c->st.writes++;
		note_update(c, r->name, "written");
		if(changed) {
			snprintf(msg, sizeof(msg), "populated from %zu node(s) selected by \"%s\": %s", r->plan.nodes,
				 r->spec.selector_text, buf_str(&r->changes));
			emit(c, r->pool, r->name, "Normal", "Populated", msg);
		}
		return STEP_PUBLISH;
	}
	if(*rc == PRD_ENOTFOUND) {   /* deleted under us: nothing to keep */
		*rc = 0;
		forget(c, r->name);
		return STEP_STOP;
	}
	if(*rc != PRD_ECONFLICT || attempt >= c->o.max_conflict_retries) {
		c->st.errors++;
		note_update(c, r->name, *rc == PRD_ECONFLICT ? "conflict" : "error");
		log_error("pool: write failed", "pool", r->name, "error", err ? err->msg : prd_strerror(*rc));
		return STEP_STOP;
	}
	return STEP_CONFLICT;
}

/* Someone else wrote the pool since we read it: read it again and take its
 * annotations anew, so their keys survive and our clamp sees their used. */
static recon_step reread(pool_ctl *c, recon *r, int *rc, prd_err *err)
{
	prd_err e2;

	c->st.conflicts++;
	note_update(c, r->name, "conflict");
	json_object_put(r->fresh);
	r->fresh = NULL;
	if((*rc = get_pool(c, r->name, &r->fresh, err))) {
		if(*rc == PRD_ENOTFOUND) {
			*rc = 0;
			forget(c, r->name);
			return STEP_STOP;
		}
		c->st.errors++;
		return STEP_STOP;
	}
	kube_obj_free(c->intern, r->m);
	r->m = NULL;
	if((*rc = kube_decode(KUBE_KIND_RESOURCEPOOL, r->fresh, c->intern, &r->m, err))) {
		c->st.errors++;
		return STEP_STOP;
	}
	r->rp = kube_as_resourcepool(r->m);
	json_object_put(r->pool);
	r->pool = json_object_get(r->fresh);
	pool_spec_free(&r->spec);
	*rc = pool_spec_parse(r->rp->annotations, r->rp->nannotations, &r->spec, &e2);
	if(*rc == PRD_ENOTFOUND) {
		forget(c, r->name);
		*rc = 0;
		return STEP_STOP;
	}
	if(*rc) {
		c->st.invalid++;
		emit(c, r->pool, r->name, "Warning", "InvalidPopulateAnnotation", e2.msg);
		*rc = *rc == PRD_ENOMEM ? *rc : 0;
		return STEP_STOP;
	}
	return STEP_RETRY;
}

int pool_ctl_reconcile(pool_ctl *c, json_object *pool_in, const kube_node *const *nodes, size_t nnodes,
		       prd_err *err)
{
	recon r = { .pool = json_object_get(pool_in) };
	recon_step step;
	prd_err e2;
	int rc, attempt;

	buf_init(&r.changes);
	if((rc = kube_decode(KUBE_KIND_RESOURCEPOOL, r.pool, c->intern, &r.m, err))) {
		c->st.errors++;
		log_error("pool: undecodable ResourcePool", "error", err ? err->msg : prd_strerror(rc));
		goto done;
	}
	r.rp = kube_as_resourcepool(r.m);
	str_copy(r.name, sizeof(r.name), r.rp->meta.name);

	rc = pool_spec_parse(r.rp->annotations, r.rp->nannotations, &r.spec, &e2);
	if(rc == PRD_ENOTFOUND) {
		forget(c, r.name);
		rc = 0;
		goto done;
	}
	if(rc) {
		c->st.invalid++;
		note_update(c, r.name, "invalid");
		emit(c, r.pool, r.name, "Warning", "InvalidPopulateAnnotation", e2.msg);
		rc = rc == PRD_ENOMEM ? rc : 0;
		goto done;
	}
	c->st.reconciles++;

	for(attempt = 0;; attempt++) {
		step = write_plan(c, &r, nodes, nnodes, attempt, &rc, err);
		if(step == STEP_CONFLICT)
			step = reread(c, &r, &rc, err);
		if(step != STEP_RETRY)
			break;
	}
	if(step == STEP_PUBLISH) {
		warn_clamps(c, r.pool, r.name, &r.plan);
		publish(c, r.name, &r.plan);
	}
	pool_spec_free(&r.spec);
	pool_plan_free(&r.plan);
done:
	free(r.keys);
	buf_free(&r.changes);
	kube_obj_free(c->intern, r.m);
	json_object_put(r.fresh);
	json_object_put(r.pool);
	return rc;
}

int pool_ctl_sync(pool_ctl *c, const kube_node *const *nodes, size_t nnodes, prd_err *err)
{
	uint64_t gen = atomic_load(&c->dirty_gen);
	json_object *list = NULL, *items = NULL;
	hmap seen;
	hmap_iter it;
	const char *k;
	void *v;
	size_t i, n;
	int rc, failed = 0;

	c->last_sync_mono = clk_mono(c->o.clock);
	c->synced_once = true;
	c->st.syncs++;
	rc = kube_api_call(c->o.api, "GET", POOLS_PATH, NULL, NULL, &list, NULL, err);
	if(rc == PRD_ENOTFOUND) {
		/* No ResourcePool CRD: nothing to populate (yet). */
		c->clean_gen = gen;
		return 0;
	}
	if(rc) {
		log_error("pool: cannot list ResourcePools", "error", err ? err->msg : prd_strerror(rc));
		return rc;
	}
	hmap_init(&seen, NULL);
	json_object_object_get_ex(list, "items", &items);
	n = json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
	for(i = 0; i < n; i++) {
		json_object *item = json_object_array_get_idx(items, i);
		const char *ns, *name, *rv;
		prd_err e;
		if(!kube_json_meta(item, &ns, &name, &rv))
			hmap_put(&seen, name, NULL);
		if(pool_ctl_reconcile(c, item, nodes, nnodes, &e))
			failed++;
	}
	/* Pools that are gone take their metrics with them. */
	{
		char **gone = malloc((hmap_len(&c->managed) + 1) * sizeof(*gone));
		size_t ngone = 0, j;
		if(gone) {
			hmap_iter_init(&it, &c->managed);
			while(hmap_iter_next(&it, &k, &v))
				if(!hmap_has(&seen, k))
					gone[ngone++] = str_dup(k);
			for(j = 0; j < ngone; j++) {
				if(gone[j])
					forget(c, gone[j]);
				free(gone[j]);
			}
			free(gone);
		}
	}
	hmap_free(&seen);
	json_object_put(list);
	/* A pool that could not be written keeps the controller dirty, so the
	 * next interval tries again. */
	if(!failed)
		c->clean_gen = gen;
	return 0;
}

/* ------------------------------------------------------------ node lists */

void pool_nodelist_free(pool_nodelist *l)
{
	size_t i;

	if(!l)
		return;
	for(i = 0; i < l->n; i++)
		kube_obj_free(l->intern, (kube_meta *)(void *)l->nodes[i]);
	free(l->nodes);
	kube_intern_free(l->intern);
	memset(l, 0, sizeof(*l));
}

int pool_nodelist_load(const kube_api *api, pool_nodelist *out, prd_err *err)
{
	json_object *list = NULL, *items = NULL;
	size_t i, n;
	int rc;

	memset(out, 0, sizeof(*out));
	if(!(out->intern = kube_intern_new()))
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if((rc = kube_api_call(api, "GET", "/api/v1/nodes", NULL, NULL, &list, NULL, err)))
		return rc;
	json_object_object_get_ex(list, "items", &items);
	n = json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
	if(n && !(out->nodes = calloc(n, sizeof(*out->nodes)))) {
		json_object_put(list);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	for(i = 0; i < n; i++) {
		kube_meta *m = NULL;
		prd_err e;
		rc = kube_decode(KUBE_KIND_NODE, json_object_array_get_idx(items, i), out->intern, &m, &e);
		if(rc == PRD_ENOMEM) {
			json_object_put(list);
			return prd_err_set(err, rc, "out of memory");
		}
		if(rc) {
			out->skipped++;
			log_warn("pool: skipping undecodable Node", "error", e.msg);
			continue;
		}
		out->nodes[out->n++] = kube_as_node(m);
	}
	json_object_put(list);
	return 0;
}

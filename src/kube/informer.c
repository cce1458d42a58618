#include "kube/informer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/log.h"
#include "util/hmap.h"
#include "util/str.h"

/* ------------------------------------------------------------ ptrset */

/* A set of object pointers: open addressing, linear probing, deletion by
 * backward shift (no tombstones). Index buckets are these. */
typedef struct ptrset {
	const kube_meta **slots;
	uint32_t cap, len;
} ptrset;

static size_t ptr_hash(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)x;
}

static int ps_grow(ptrset *s)
{
	uint32_t ncap = s->cap ? s->cap * 2 : 4, i;
	const kube_meta **n = calloc(ncap, sizeof(*n));
	if(!n)
		return PRD_ENOMEM;
	for(i = 0; i < s->cap; i++) {
		size_t j;
		if(!s->slots[i])
			continue;
		for(j = ptr_hash(s->slots[i]) & (ncap - 1); n[j]; j = (j + 1) & (ncap - 1))
			;
		n[j] = s->slots[i];
	}
	free(s->slots);
	s->slots = n;
	s->cap = ncap;
	return PRD_OK;
}

static int ps_add(ptrset *s, const kube_meta *p)
{
	size_t i;
	if((s->len + 1) * 4 > s->cap * 3 && ps_grow(s))
		return PRD_ENOMEM;
	for(i = ptr_hash(p) & (s->cap - 1); s->slots[i]; i = (i + 1) & (s->cap - 1))
		if(s->slots[i] == p)
			return PRD_OK;
	s->slots[i] = p;
	s->len++;
	return PRD_OK;
}

/* Is `home` cyclically within (i, j]? */
static bool cyc_between(size_t i, size_t home, size_t j)
{
	return i <= j ? (i < home && home <= j) : (i < home || home <= j);
}

static void ps_del(ptrset *s, const kube_meta *p)
{
	size_t mask, i, j;
	if(!s->cap)
		return;
	mask = s->cap - 1;
	for(i = ptr_hash(p) & mask; s->slots[i] != p; i = (i + 1) & mask)
		if(!s->slots[i])
			return;
	s->slots[i] = NULL;
	s->len--;
	for(j = (i + 1) & mask; s->slots[j]; j = (j + 1) & mask) {
		if(cyc_between(i, ptr_hash(s->slots[j]) & mask, j))
			continue;
		s->slots[i] = s->slots[j];
		s->slots[j] = NULL;
		i = j;
	}
}

static void ps_free(void *p)
{
	ptrset *s = p;
	if(!s)
		return;
	free(s->slots);
	free(s);
}

static int ps_foreach(const ptrset *s, kube_obj_fn fn, void *ud)
{
	uint32_t i;
	int rc;
	for(i = 0; s && i < s->cap; i++)
		if(s->slots[i] && (rc = fn(ud, s->slots[i])) != 0)
			return rc;
	return PRD_OK;
}

/* ------------------------------------------------------------ objtab */

/* The namespace/name table: open addressing of object pointers; the key
 * is read from the object itself so no key copy is stored. */
typedef struct objtab {
	kube_meta **slots;
	size_t cap, len;
} objtab;

static size_t key_hash(const char *ns, const char *name)
{
	uint64_t h = 1469598103934665603ULL;
	const unsigned char *p;
	for(p = (const unsigned char *)ns; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	h = (h ^ '/') * 1099511628211ULL;
	for(p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (size_t)h;
}

static size_t obj_hash(const kube_meta *m)
{
	return key_hash(m->ns, m->name);
}

static int ot_grow(objtab *t)
{
	size_t ncap = t->cap ? t->cap * 2 : 64, i;
	kube_meta **n = calloc(ncap, sizeof(*n));
	if(!n)
		return PRD_ENOMEM;
	for(i = 0; i < t->cap; i++) {
		size_t j;
		if(!t->slots[i])
			continue;
		for(j = obj_hash(t->slots[i]) & (ncap - 1); n[j]; j = (j + 1) & (ncap - 1))
			;
		n[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = n;
	t->cap = ncap;
	return PRD_OK;
}

static size_t ot_slot(const objtab *t, const char *ns, const char *name)
{
	size_t i, mask = t->cap - 1;
	for(i = key_hash(ns, name) & mask; t->slots[i]; i = (i + 1) & mask)
		if(strcmp(t->slots[i]->name, name) == 0 && strcmp(t->slots[i]->ns, ns) == 0)
			return i;
	return i;
}

static kube_meta *ot_get(const objtab *t, const char *ns, const char *name)
{
	if(!t->cap)
		return NULL;
	return t->slots[ot_slot(t, ns, name)];
}

/* Insert or replace; *old receives the replaced object (or NULL). */
static int ot_put(objtab *t, kube_meta *m, kube_meta **old)
{
	size_t i;
	*old = NULL;
	if((t->len + 1) * 4 > t->cap * 3 && ot_grow(t))
		return PRD_ENOMEM;
	i = ot_slot(t, m->ns, m->name);
	if(t->slots[i])
		*old = t->slots[i];
	else
		t->len++;
	t->slots[i] = m;
	return PRD_OK;
}

static void ot_del(objtab *t, const kube_meta *m)
{
	size_t mask, i, j;
	if(!t->cap)
		return;
	mask = t->cap - 1;
	i = ot_slot(t, m->ns, m->name);
	if(!t->slots[i])
		return;
	t->slots[i] = NULL;
	t->len--;
	for(j = (i + 1) & mask; t->slots[j]; j = (j + 1) & mask) {
		if(cyc_between(i, obj_hash(t->slots[j]) & mask, j))
			continue;
		t->slots[i] = t->slots[j];
		t->slots[j] = NULL;
		i = j;
	}
}

/* ------------------------------------------------------------ indexes */

enum { IDX_NODE, IDX_CONSUME, IDX_FIXED };

/* Everything that a relist swaps at once: the table and its indexes. */
typedef struct tables {
	objtab objs;
	hmap *idx;       /* IDX_FIXED + number of label indexes; value -> ptrset* */
} tables;

struct kube_informer {
	kube_kind kind;
	kube_intern *in;
	char **label_keys;
	size_t nlabel_keys, nidx;

	kube_handler *handlers;
	size_t nhandlers;

	pthread_rwlock_t lock;   /* readers vs the reflector thread's writes */
	tables cur;              /* guarded by lock */

	/* Reflector-thread only: the table being built by a list. */
	tables next;
	bool listing;

	pthread_mutex_t sync_mu;
	pthread_cond_t sync_cv;
	atomic_bool synced;
	atomic_bool stopped;

	kube_reflector *refl;
	kube_listwatch lw;
	kube_reflector_opts ropts;
	char *name;
};

static bool cluster_scoped(kube_kind k)
{
	return k == KUBE_KIND_NODE || k == KUBE_KIND_RESOURCEPOOL;
}

static const kube_kv *labels_of(const kube_meta *m, size_t *n)
{
	if(m->kind == KUBE_KIND_POD) {
		*n = ((const kube_pod *)m)->nlabels;
		return ((const kube_pod *)m)->labels;
	}
	if(m->kind == KUBE_KIND_NODE) {
		*n = ((const kube_node *)m)->nlabels;
		return ((const kube_node *)m)->labels;
	}
	*n = 0;
	return NULL;
}

/* The index values of m, one per index (NULL = not indexed there). The
 * consume value "ns/name" is written into cbuf. */
static void index_values(kube_informer *inf, const kube_meta *m, const char **vals, char *cbuf, size_t cbuflen)
{
	size_t i, nl;
	const kube_kv *l;
	memset(vals, 0, inf->nidx * sizeof(*vals));
	if(m->kind == KUBE_KIND_POD) {
		const kube_pod *p = (const kube_pod *)m;
		vals[IDX_NODE] = p->node_name;
		if(p->consume) {
			size_t a = strlen(m->ns), b = strlen(p->consume);
			if(a + 1 + b < cbuflen) {
				memcpy(cbuf, m->ns, a);
				cbuf[a] = '/';
				memcpy(cbuf + a + 1, p->consume, b + 1);
				vals[IDX_CONSUME] = cbuf;
			}
		}
	}
	l = labels_of(m, &nl);
	for(i = 0; i < inf->nlabel_keys; i++)
		vals[IDX_FIXED + i] = kube_kv_get(l, nl, inf->label_keys[i]);
}

#define CBUF 600

static int idx_add(kube_informer *inf, tables *t, const kube_meta *m)
{
	const char *vals[IDX_FIXED + 16];
	char cbuf[CBUF];
	size_t i;
	index_values(inf, m, vals, cbuf, sizeof(cbuf));
	for(i = 0; i < inf->nidx; i++) {
		ptrset *s;
		if(!vals[i])
			continue;
		s = hmap_get(&t->idx[i], vals[i]);
		if(!s) {
			s = calloc(1, sizeof(*s));
			if(!s || hmap_put(&t->idx[i], vals[i], s)) {
				free(s);
				return PRD_ENOMEM;
			}
		}
		if(ps_add(s, m))
			return PRD_ENOMEM;
	}
	return PRD_OK;
}

static void idx_del(kube_informer *inf, tables *t, const kube_meta *m)
{
	const char *vals[IDX_FIXED + 16];
	char cbuf[CBUF];
	size_t i;
	index_values(inf, m, vals, cbuf, sizeof(cbuf));
	for(i = 0; i < inf->nidx; i++) {
		ptrset *s;
		if(!vals[i] || !(s = hmap_get(&t->idx[i], vals[i])))
			continue;
		ps_del(s, m);
		if(!s->len)
			hmap_del(&t->idx[i], vals[i]);
	}
}

static int tables_init(kube_informer *inf, tables *t)
{
	size_t i;
	memset(t, 0, sizeof(*t));
	t->idx = calloc(inf->nidx, sizeof(*t->idx));
	if(!t->idx)
		return PRD_ENOMEM;
	for(i = 0; i < inf->nidx; i++)
		hmap_init(&t->idx[i], ps_free);
	return PRD_OK;
}

/* Free the table structures (not the objects). */
static void tables_free(kube_informer *inf, tables *t)
{
	size_t i;
	if(t->idx)
		for(i = 0; i < inf->nidx; i++)
			hmap_free(&t->idx[i]);
	free(t->idx);
	free(t->objs.slots);
	memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------ lifecycle */

int kube_informer_new(const kube_informer_opts *o, kube_informer **out, prd_err *err)
{
	kube_informer *inf;
	size_t n = 0;

	*out = NULL;
	if(!o || !o->intern)
		return prd_err_set(err, PRD_EINVAL, "informer: an intern table is required");
	if(!strcmp(kube_kind_name(o->kind), "?"))
		return prd_err_set(err, PRD_EINVAL, "informer: unknown kind %d", (int)o->kind);
	while(o->label_indexes && o->label_indexes[n])
		n++;
	if(n > 16)
		return prd_err_set(err, PRD_EINVAL, "informer: at most 16 label indexes");
	inf = calloc(1, sizeof(*inf));
	if(!inf)
		return prd_err_set(err, PRD_ENOMEM, "informer: out of memory");
	inf->kind = o->kind;
	inf->in = o->intern;
	inf->nidx = IDX_FIXED + n;
	inf->label_keys = calloc(n + 1, sizeof(char *));
	if(!inf->label_keys)
		goto nomem;
	for(inf->nlabel_keys = 0; inf->nlabel_keys < n; inf->nlabel_keys++)
		if(!(inf->label_keys[inf->nlabel_keys] = str_dup(o->label_indexes[inf->nlabel_keys])))
			goto nomem;
	inf->ropts = o->reflector;
	inf->name = str_dup(o->reflector.name ? o->reflector.name : kube_kind_name(o->kind));
	if(!inf->name)
		goto nomem;
	inf->ropts.name = inf->name;
	if(tables_init(inf, &inf->cur))
		goto nomem;
	pthread_rwlock_init(&inf->lock, NULL);
	pthread_mutex_init(&inf->sync_mu, NULL);
	pthread_cond_init(&inf->sync_cv, NULL);
	atomic_init(&inf->synced, false);
	atomic_init(&inf->stopped, false);
	*out = inf;
	return PRD_OK;
nomem:
	free(inf->name);
	if(inf->label_keys)
		for(n = 0; n < inf->nlabel_keys; n++)
			free(inf->label_keys[n]);
	free(inf->label_keys);
	free(inf);
	return prd_err_set(err, PRD_ENOMEM, "informer: out of memory");
}

int kube_informer_add_handler(kube_informer *inf, const kube_handler *h)
{
	kube_handler *n;
	if(inf->refl)
		return PRD_EINVAL;
	n = realloc(inf->handlers, (inf->nhandlers + 1) * sizeof(*n));
	if(!n)
		return PRD_ENOMEM;
	n[inf->nhandlers++] = *h;
	inf->handlers = n;
	return PRD_OK;
}

static void emit_add(kube_informer *inf, const kube_meta *m)
{
	size_t i;
	for(i = 0; i < inf->nhandlers; i++)
		if(inf->handlers[i].on_add)
			inf->handlers[i].on_add(inf->handlers[i].ud, m);
}

static void emit_update(kube_informer *inf, const kube_meta *old, const kube_meta *m)
{
	size_t i;
	for(i = 0; i < inf->nhandlers; i++)
		if(inf->handlers[i].on_update)
			inf->handlers[i].on_update(inf->handlers[i].ud, old, m);
}

static void emit_delete(kube_informer *inf, const kube_meta *old)
{
	size_t i;
	for(i = 0; i < inf->nhandlers; i++)
		if(inf->handlers[i].on_delete)
			inf->handlers[i].on_delete(inf->handlers[i].ud, old);
}

/* ------------------------------------------------------------ store */

/* Decode obj for the cache; PRD_EINVAL (logged) for malformed input. */
static int decode(kube_informer *inf, json_object *obj, kube_meta **out)
{
	prd_err e;
	int rc;
	prd_err_clear(&e);
	rc = kube_decode(inf->kind, obj, inf->in, out, &e);
	if(rc == PRD_EINVAL)
		log_warn("informer: skipping malformed object", "error", e.msg);
	return rc;
}

/* An object whose metadata cannot be read: let the decoder say why (it
 * will fail) and report it as malformed. */
static int reject(kube_informer *inf, json_object *obj)
{
	kube_meta *m = NULL;
	if(decode(inf, obj, &m) == PRD_OK)
		kube_obj_free(inf->in, m);
	return PRD_EINVAL;
}

/* Free the objects of `next` that are not shared with `cur`. */
static void drop_next(kube_informer *inf)
{
	size_t i;
	for(i = 0; i < inf->next.objs.cap; i++) {
		kube_meta *m = inf->next.objs.slots[i];
		if(m && ot_get(&inf->cur.objs, m->ns, m->name) != m)
			kube_obj_free(inf->in, m);
	}
	tables_free(inf, &inf->next);
	inf->listing = false;
}

static int st_list_begin(void *ud)
{
	kube_informer *inf = ud;
	if(inf->listing)
		drop_next(inf);
	if(tables_init(inf, &inf->next))
		return PRD_ENOMEM;
	inf->listing = true;
	return PRD_OK;
}

static int st_list_item(void *ud, json_object *item)
{
	kube_informer *inf = ud;
	const char *ns, *name, *rv;
	kube_meta *m, *old, *dup = NULL;
	int rc;

	if(kube_json_meta(item, &ns, &name, &rv))
		return reject(inf, item);
	if(cluster_scoped(inf->kind))
		ns = "";
	/* Unchanged objects are carried over, not decoded again. Reading cur
	 * without the lock is fine: only this thread writes it. */
	old = ot_get(&inf->cur.objs, ns, name);
	if(old && *rv && strcmp(old->rv, rv) == 0)
		m = old;
	else if((rc = decode(inf, item, &m)) != 0)
		return rc;
	rc = ot_put(&inf->next.objs, m, &dup);
	if(!rc && dup) {
		/* The same name twice in one list: the later one wins. */
		idx_del(inf, &inf->next, dup);
		if(dup != old)
			kube_obj_free(inf->in, dup);
	}
	if(!rc)
		rc = idx_add(inf, &inf->next, m);
	if(rc) {
		if(m != old && ot_get(&inf->next.objs, m->ns, m->name) != m)
			kube_obj_free(inf->in, m);
		return rc;
	}
	return PRD_OK;
}

static void mark_synced(kube_informer *inf)
{
	pthread_mutex_lock(&inf->sync_mu);
	atomic_store(&inf->synced, true);
	pthread_cond_broadcast(&inf->sync_cv);
	pthread_mutex_unlock(&inf->sync_mu);
}

static int st_list_end(void *ud, bool ok, const char *rv)
{
	kube_informer *inf = ud;
	tables old;
	size_t i;

	if(!inf->listing)
		return ok ? PRD_EINTERNAL : PRD_OK;
	if(!ok) {
		drop_next(inf);
		return PRD_OK;
	}
	pthread_rwlock_wrlock(&inf->lock);
	old = inf->cur;
	inf->cur = inf->next;
	pthread_rwlock_unlock(&inf->lock);
	memset(&inf->next, 0, sizeof(inf->next));
	inf->listing = false;

	/* Now cur is the new contents and `old` is reachable only from here.
	 * Adds and updates first, then deletes, then free what nobody holds. */
	for(i = 0; i < inf->cur.objs.cap; i++) {
		kube_meta *m = inf->cur.objs.slots[i], *o;
		if(!m)
			continue;
		o = ot_get(&old.objs, m->ns, m->name);
		if(!o)
			emit_add(inf, m);
		else if(o != m)
			emit_update(inf, o, m);
	}
	for(i = 0; i < old.objs.cap; i++) {
		kube_meta *o = old.objs.slots[i], *m;
		if(!o)
			continue;
		m = ot_get(&inf->cur.objs, o->ns, o->name);
		if(!m)
			emit_delete(inf, o);
		if(m != o)
			kube_obj_free(inf->in, o);
	}
	tables_free(inf, &old);
	if(!atomic_load(&inf->synced))
		mark_synced(inf);
	log_debug("informer: list committed", "kind", kube_kind_name(inf->kind), "objects",
		  LOGI(inf->cur.objs.len), "resourceVersion", rv);
	return PRD_OK;
}

static int st_event(void *ud, kube_event_type type, json_object *obj)
{
	kube_informer *inf = ud;
	const char *ns, *name, *rv;
	kube_meta *m = NULL, *old, *dup = NULL;
	int rc;

	if(kube_json_meta(obj, &ns, &name, &rv))
		return reject(inf, obj);
	if(cluster_scoped(inf->kind))
		ns = "";
	else if(!*ns)
		return reject(inf, obj);
	old = ot_get(&inf->cur.objs, ns, name);

	if(type == KUBE_EV_DELETED) {
		if(!old)
			return PRD_OK;
		pthread_rwlock_wrlock(&inf->lock);
		ot_del(&inf->cur.objs, old);
		idx_del(inf, &inf->cur, old);
		pthread_rwlock_unlock(&inf->lock);
		emit_delete(inf, old);
		kube_obj_free(inf->in, old);
		return PRD_OK;
	}
	/* A replayed event for a version we hold changes nothing. */
	if(old && *rv && strcmp(old->rv, rv) == 0)
		return PRD_OK;
	if((rc = decode(inf, obj, &m)) != 0)
		return rc;
	pthread_rwlock_wrlock(&inf->lock);
	if(old)
		idx_del(inf, &inf->cur, old);
	rc = ot_put(&inf->cur.objs, m, &dup);
	if(!rc)
		rc = idx_add(inf, &inf->cur, m);
	if(rc) {
		/* Out of memory half way: take the new object out again and
		 * drop the old one as well; the reflector relists. */
		ot_del(&inf->cur.objs, m);
		idx_del(inf, &inf->cur, m);
	}
	pthread_rwlock_unlock(&inf->lock);
	if(rc) {
		kube_obj_free(inf->in, m);
		if(old) {
			emit_delete(inf, old);
			kube_obj_free(inf->in, old);
		}
		return rc;
	}
	if(old)
		emit_update(inf, old, m);
	else
		emit_add(inf, m);
	kube_obj_free(inf->in, old);
	return PRD_OK;
}

static const kube_store_ops store_ops = { st_list_begin, st_list_item, st_list_end, st_event };

const kube_store_ops *kube_informer_store_ops(void)
{
	return &store_ops;
}

int kube_informer_start(kube_informer *inf, const kube_listwatch *lw, prd_err *err)
{
	int rc;
	if(inf->refl)
		return prd_err_set(err, PRD_EINVAL, "informer: already started");
	inf->lw = *lw;
	rc = kube_reflector_new(&inf->lw, &store_ops, inf, &inf->ropts, &inf->refl, err);
	if(rc)
		return rc;
	rc = kube_reflector_start(inf->refl, err);
	if(rc) {
		kube_reflector_free(inf->refl);
		inf->refl = NULL;
	}
	return rc;
}

void kube_informer_stop(kube_informer *inf)
{
	if(!inf)
		return;
	kube_reflector_stop(inf->refl);
	pthread_mutex_lock(&inf->sync_mu);
	atomic_store(&inf->stopped, true);
	pthread_cond_broadcast(&inf->sync_cv);
	pthread_mutex_unlock(&inf->sync_mu);
}

void kube_informer_free(kube_informer *inf)
{
	size_t i;
	if(!inf)
		return;
	kube_informer_stop(inf);
	kube_reflector_free(inf->refl);
	if(inf->listing)
		drop_next(inf);
	for(i = 0; i < inf->cur.objs.cap; i++)
		kube_obj_free(inf->in, inf->cur.objs.slots[i]);
	tables_free(inf, &inf->cur);
	for(i = 0; i < inf->nlabel_keys; i++)
		free(inf->label_keys[i]);
	free(inf->label_keys);
	free(inf->handlers);
	free(inf->name);
	pthread_rwlock_destroy(&inf->lock);
	pthread_mutex_destroy(&inf->sync_mu);
	pthread_cond_destroy(&inf->sync_cv);
	free(inf);
}

bool kube_informer_has_synced(kube_informer *inf)
{
	return atomic_load(&inf->synced);
}

bool kube_informer_wait_synced(kube_informer *inf)
{
	bool s;
	pthread_mutex_lock(&inf->sync_mu);
	while(!atomic_load(&inf->synced) && !atomic_load(&inf->stopped))
		pthread_cond_wait(&inf->sync_cv, &inf->sync_mu);
	s = atomic_load(&inf->synced);
	pthread_mutex_unlock(&inf->sync_mu);
	return s;
}

void kube_informer_get_stats(kube_informer *inf, kube_reflector_stats *out)
{
	if(inf->refl)
		kube_reflector_get_stats(inf->refl, out);
	else
		memset(out, 0, sizeof(*out));
}

/* ------------------------------------------------------------ reads */

void kube_informer_rdlock(kube_informer *inf)
{
	pthread_rwlock_rdlock(&inf->lock);
}

void kube_informer_rdunlock(kube_informer *inf)
{
	pthread_rwlock_unlock(&inf->lock);
}

size_t kube_informer_len(kube_informer *inf)
{
	return inf->cur.objs.len;
}

const kube_meta *kube_informer_get(kube_informer *inf, const char *ns, const char *name)
{
	if(!name)
		return NULL;
	if(!ns || cluster_scoped(inf->kind))
		ns = "";
	return ot_get(&inf->cur.objs, ns, name);
}

int kube_informer_foreach(kube_informer *inf, kube_obj_fn fn, void *ud)
{
	size_t i;
	int rc;
	for(i = 0; i < inf->cur.objs.cap; i++)
		if(inf->cur.objs.slots[i] && (rc = fn(ud, inf->cur.objs.slots[i])) != 0)
			return rc;
	return PRD_OK;
}

static const ptrset *bucket(kube_informer *inf, size_t idx, const char *value)
{
	if(idx >= inf->nidx || !value)
		return NULL;
	return hmap_get(&inf->cur.idx[idx], value);
}

int kube_informer_by_node(kube_informer *inf, const char *node, kube_obj_fn fn, void *ud)
{
	return ps_foreach(bucket(inf, IDX_NODE, node), fn, ud);
}

size_t kube_informer_count_by_node(kube_informer *inf, const char *node)
{
	const ptrset *s = bucket(inf, IDX_NODE, node);
	return s ? s->len : 0;
}

static const ptrset *consumer_bucket(kube_informer *inf, const char *ns, const char *name)
{
	char key[CBUF];
	size_t a, b;
	if(!ns || !name)
		return NULL;
	a = strlen(ns);
	b = strlen(name);
	if(a + 1 + b >= sizeof(key))
		return NULL;
	memcpy(key, ns, a);
	key[a] = '/';
	memcpy(key + a + 1, name, b + 1);
	return bucket(inf, IDX_CONSUME, key);
}

int kube_informer_by_consumer(kube_informer *inf, const char *ns, const char *name, kube_obj_fn fn, void *ud)
{
	return ps_foreach(consumer_bucket(inf, ns, name), fn, ud);
}

size_t kube_informer_count_by_consumer(kube_informer *inf, const char *ns, const char *name)
{
	const ptrset *s = consumer_bucket(inf, ns, name);
	return s ? s->len : 0;
}

int kube_informer_by_label(kube_informer *inf, const char *key, const char *value, kube_obj_fn fn, void *ud)
{
	size_t i;
	for(i = 0; i < inf->nlabel_keys; i++)
		if(strcmp(inf->label_keys[i], key) == 0)
			return ps_foreach(bucket(inf, IDX_FIXED + i, value), fn, ud);
	return PRD_ENOTFOUND;
}

/* Informer: a reflector feeding a cache of typed objects of one kind,
 * looked up by namespace/name or walked whole, with change handlers. */
#include "kube/informer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/log.h"
#include "util/str.h"

/* ------------------------------------------------------------ objtab */

/* The namespace/name table: open addressing of object pointers; the key
 * is read from the object itself so no key copy is stored. Each slot
 * keeps its key's hash beside the pointer, so a probe or a growth reads
 * the object only when the hashes match (the objects are spread over the
 * heap: at 600,000 pods a probe that read each object it passed was a
 * cache miss per step). */
typedef struct otslot {
	kube_meta *m;
	size_t h;
} otslot;

typedef struct objtab {
	otslot *slots;
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
	/* FNV's low bits (the ones a mask keeps) mix poorly: fold. */
	h ^= h >> 29;
	return (size_t)h;
}

/* Is `home` cyclically within (i, j]? */
static bool cyc_between(size_t i, size_t home, size_t j)
{
	return i <= j ? (i < home && home <= j) : (i < home || home <= j);
}

static int ot_grow(objtab *t)
{
	size_t ncap = t->cap ? t->cap * 2 : 64, i;
	otslot *n = calloc(ncap, sizeof(*n));
	if(!n)
		return PRD_ENOMEM;
	for(i = 0; i < t->cap; i++) {
		size_t j;
		if(!t->slots[i].m)
			continue;
		for(j = t->slots[i].h & (ncap - 1); n[j].m; j = (j + 1) & (ncap - 1))
			;
		n[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = n;
	t->cap = ncap;
	return PRD_OK;
}

static size_t ot_slot_h(const objtab *t, const char *ns, const char *name, size_t h)
{
	size_t i, mask = t->cap - 1;
	for(i = h & mask; t->slots[i].m; i = (i + 1) & mask)
		if(t->slots[i].h == h && strcmp(t->slots[i].m->name, name) == 0 && strcmp(t->slots[i].m->ns, ns) == 0)
			return i;
	return i;
}

static kube_meta *ot_get(const objtab *t, const char *ns, const char *name)
{
	if(!t->cap)
		return NULL;
	return t->slots[ot_slot_h(t, ns, name, key_hash(ns, name))].m;
}

/* Insert or replace; *old receives the replaced object (or NULL). */
static int ot_put(objtab *t, kube_meta *m, kube_meta **old)
{
	size_t i, h = key_hash(m->ns, m->name);
	*old = NULL;
	if((t->len + 1) * 4 > t->cap * 3 && ot_grow(t))
		return PRD_ENOMEM;
	i = ot_slot_h(t, m->ns, m->name, h);
	if(t->slots[i].m)
		*old = t->slots[i].m;
	else
		t->len++;
	t->slots[i].m = m;
	t->slots[i].h = h;
	return PRD_OK;
}

static void ot_del(objtab *t, const kube_meta *m)
{
	size_t mask, i, j;
	if(!t->cap)
		return;
	mask = t->cap - 1;
	i = ot_slot_h(t, m->ns, m->name, key_hash(m->ns, m->name));
	if(!t->slots[i].m)
		return;
	t->slots[i].m = NULL;
	t->len--;
	for(j = (i + 1) & mask; t->slots[j].m; j = (j + 1) & mask) {
		if(cyc_between(i, t->slots[j].h & mask, j))
			continue;
		t->slots[i] = t->slots[j];
		t->slots[j].m = NULL;
		i = j;
	}
}

/* Free the table (not the objects). */
static void ot_free(objtab *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------ journal */

/* The keys of the most recent changes, each with the generation it made,
 * so that a reader can update what it derives from the cache from the
 * changes alone. A ring of JOURNAL_CAP entries; `floor` is the generation
 * after which every change is in the ring (a relist, an overflow or a
 * failed allocation raises it: readers from before then walk the whole
 * cache). */
#define JOURNAL_CAP 16384

typedef struct jentry {
	uint64_t gen;
	char *key;               /* "ns\0name\0" in one allocation */
} jentry;

typedef struct journal {
	jentry *v;               /* JOURNAL_CAP entries once the first is recorded */
	size_t head, len;        /* the oldest entry and how many there are */
	uint64_t floor;
} journal;

static void journal_clear(journal *j, uint64_t floor)
{
	size_t i;
	for(i = 0; i < j->len; i++)
		free(j->v[(j->head + i) % JOURNAL_CAP].key);
	j->head = j->len = 0;
	j->floor = floor;
}

/* The key for the journal, made before the write lock is taken (NULL when
 * out of memory: journal_push then gives up on the past). */
static char *journal_key(const char *ns, const char *name)
{
	size_t a = strlen(ns) + 1, b = strlen(name) + 1;
	char *k = malloc(a + b);
	if(k) {
		memcpy(k, ns, a);
		memcpy(k + a, name, b);
	}
	return k;
}

/* Record that `key` (owned by the journal from here) changed in
 * generation `gen`. Write lock held. */
static void journal_push(journal *j, char *key, uint64_t gen)
{
	if(!key || (!j->v && !(j->v = calloc(JOURNAL_CAP, sizeof(*j->v))))) {
		free(key);
		journal_clear(j, gen);
		return;
	}
	if(j->len == JOURNAL_CAP) {
		/* The oldest falls out: changes up to its generation are lost. */
		jentry *old = &j->v[j->head];
		j->floor = old->gen;
		free(old->key);
		j->head = (j->head + 1) % JOURNAL_CAP;
		j->len--;
	}
	j->v[(j->head + j->len) % JOURNAL_CAP] = (jentry){ gen, key };
	j->len++;
}

/* ------------------------------------------------------------ informer */

struct kube_informer {
	kube_kind kind;
	kube_intern *in;

	kube_handler *handlers;
	size_t nhandlers;

	pthread_rwlock_t lock;   /* readers vs the reflector thread's writes */
	objtab cur;              /* guarded by lock */
	uint64_t gen;            /* guarded by lock: bumped by every change of cur */
	journal jr;              /* guarded by lock: which keys the last changes touched */

	/* Reflector-thread only: the table being built by a list, swapped
	 * in whole when the list ends. */
	objtab next;
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
	return k == KUBE_KIND_NODE || k == KUBE_KIND_RESOURCEPOOL || k == KUBE_KIND_RESOURCESLICE ||
	       k == KUBE_KIND_DEVICECLASS || k == KUBE_KIND_PROVCLASS;
}

/* ------------------------------------------------------------ lifecycle */

int kube_informer_new(const kube_informer_opts *o, kube_informer **out, prd_err *err)
{
	kube_informer *inf;

	*out = NULL;
	if(!o || !o->intern)
		return prd_err_set(err, PRD_EINVAL, "informer: an intern table is required");
	if(!strcmp(kube_kind_name(o->kind), "?"))
		return prd_err_set(err, PRD_EINVAL, "informer: unknown kind %d", (int)o->kind);
	inf = calloc(1, sizeof(*inf));
	if(!inf)
		return prd_err_set(err, PRD_ENOMEM, "informer: out of memory");
	inf->kind = o->kind;
	inf->in = o->intern;
	inf->ropts = o->reflector;
	inf->name = str_dup(o->reflector.name ? o->reflector.name : kube_kind_name(o->kind));
	if(!inf->name) {
		free(inf);
		return prd_err_set(err, PRD_ENOMEM, "informer: out of memory");
	}
	inf->ropts.name = inf->name;
	pthread_rwlock_init(&inf->lock, NULL);
	pthread_mutex_init(&inf->sync_mu, NULL);
	pthread_cond_init(&inf->sync_cv, NULL);
	atomic_init(&inf->synced, false);
	atomic_init(&inf->stopped, false);
	*out = inf;
	return PRD_OK;
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
	for(i = 0; i < inf->next.cap; i++) {
		kube_meta *m = inf->next.slots[i].m;
		if(m && ot_get(&inf->cur, m->ns, m->name) != m)
			kube_obj_free(inf->in, m);
	}
	ot_free(&inf->next);
	inf->listing = false;
}

static int st_list_begin(void *ud)
{
	kube_informer *inf = ud;
	if(inf->listing)
		drop_next(inf);
	memset(&inf->next, 0, sizeof(inf->next));
	inf->listing = true;
	return PRD_OK;
}

/* Decode an object given as text; PRD_EINVAL (logged) for malformed
 * input. */
static int decode_src(kube_informer *inf, const kube_item_src *src, kube_meta **out)
{
	prd_err e;
	int rc;
	prd_err_clear(&e);
	rc = kube_decode_text(inf->kind, src->json, src->len, src->max_depth, inf->in, out, &e);
	if(rc == PRD_EINVAL)
		log_warn("informer: skipping malformed object", "error", e.msg);
	return rc;
}

/* Put a listed object into the table being built (old: what cur holds
 * under its key, carried over when m is old). */
static int list_put(kube_informer *inf, kube_meta *m, kube_meta *old)
{
	kube_meta *dup = NULL;
	int rc = ot_put(&inf->next, m, &dup);
	if(rc) {
		/* Out of memory growing the table: m was not inserted. */
		if(m != old)
			kube_obj_free(inf->in, m);
		return rc;
	}
	/* The same name twice in one list: the later one wins. */
	if(dup && dup != old)
		kube_obj_free(inf->in, dup);
	return PRD_OK;
}

static int st_list_item(void *ud, json_object *item)
{
	kube_informer *inf = ud;
	const char *ns, *name, *rv;
	kube_meta *m, *old;
	int rc;

	if(kube_json_meta(item, &ns, &name, &rv))
		return reject(inf, item);
	if(cluster_scoped(inf->kind))
		ns = "";
	/* Unchanged objects are carried over, not decoded again. Reading cur
	 * without the lock is fine: only this thread writes it. */
	old = ot_get(&inf->cur, ns, name);
	if(old && *rv && strcmp(old->rv, rv) == 0)
		m = old;
	else if((rc = decode(inf, item, &m)) != 0)
		return rc;
	return list_put(inf, m, old);
}

static int st_event(void *ud, kube_event_type type, json_object *obj);

/* Text the identity scan leaves to json-c goes the tree way. */
static int with_tree(kube_informer *inf, const kube_item_src *src, kube_event_type type, bool list)
{
	json_tokener *tok = json_tokener_new_ex(src->max_depth);
	json_object *obj;
	enum json_tokener_error je;
	int rc;

	if(!tok)
		return PRD_ENOMEM;
	obj = json_tokener_parse_ex(tok, src->json, (int)src->len);
	je = json_tokener_get_error(tok);
	json_tokener_free(tok);
	if(je != json_tokener_success) {
		json_object_put(obj);
		log_warn("informer: skipping malformed object", "kind", kube_kind_name(inf->kind), "error",
			 json_tokener_error_desc(je));
		return PRD_EINVAL;
	}
	rc = list ? st_list_item(inf, obj) : st_event(inf, type, obj);
	json_object_put(obj);
	return rc;
}

static int st_list_item_src(void *ud, const kube_item_src *src)
{
	kube_informer *inf = ud;
	kube_text_id id;
	kube_meta *m, *old;
	int rc;

	if(src->obj)
		return st_list_item(ud, src->obj);
	/* Nothing cached (the first list): nothing to carry over, so no need
	 * to read the identity ahead of the decoder. */
	if(inf->cur.len == 0) {
		if((rc = decode_src(inf, src, &m)) != 0)
			return rc;
		return list_put(inf, m, NULL);
	}
	if(kube_text_id_scan(src->json, src->len, src->max_depth, &id) || !id.name[0])
		return with_tree(inf, src, KUBE_EV_ADDED, true);
	old = ot_get(&inf->cur, cluster_scoped(inf->kind) ? "" : id.ns, id.name);
	if(old && id.rv[0] && strcmp(old->rv, id.rv) == 0)
		m = old;
	else if((rc = decode_src(inf, src, &m)) != 0)
		return rc;
	return list_put(inf, m, old);
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
	objtab old;
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
	inf->gen++;
	/* Which keys a relist changed is worked out below, outside the lock;
	 * readers of the journal walk the whole cache instead. */
	journal_clear(&inf->jr, inf->gen);
	pthread_rwlock_unlock(&inf->lock);
	memset(&inf->next, 0, sizeof(inf->next));
	inf->listing = false;

	/* Now cur is the new contents and `old` is reachable only from here.
	 * Adds and updates first, then deletes, then free what nobody holds. */
	for(i = 0; i < inf->cur.cap; i++) {
		kube_meta *m = inf->cur.slots[i].m, *o;
		if(!m)
			continue;
		o = ot_get(&old, m->ns, m->name);
		if(!o)
			emit_add(inf, m);
		else if(o != m)
			emit_update(inf, o, m);
	}
	for(i = 0; i < old.cap; i++) {
		kube_meta *o = old.slots[i].m, *m;
		if(!o)
			continue;
		m = ot_get(&inf->cur, o->ns, o->name);
		if(!m)
			emit_delete(inf, o);
		if(m != o)
			kube_obj_free(inf->in, o);
	}
	ot_free(&old);
	if(!atomic_load(&inf->synced))
		mark_synced(inf);
	log_debug("informer: list committed", "kind", kube_kind_name(inf->kind), "objects",
		  LOGI(inf->cur.len), "resourceVersion", rv);
	return PRD_OK;
}

/* One event on the object ns/name at rv, given as obj or src. */
static int event_apply(kube_informer *inf, kube_event_type type, const char *ns, const char *name, const char *rv,
		       json_object *obj, const kube_item_src *src)
{
	kube_meta *m = NULL, *old, *replaced = NULL;
	char *key;
	int rc;

	old = ot_get(&inf->cur, ns, name);

	if(type == KUBE_EV_DELETED) {
		if(!old)
			return PRD_OK;
		key = journal_key(old->ns, old->name);
		pthread_rwlock_wrlock(&inf->lock);
		ot_del(&inf->cur, old);
		inf->gen++;
		journal_push(&inf->jr, key, inf->gen);
		pthread_rwlock_unlock(&inf->lock);
		emit_delete(inf, old);
		kube_obj_free(inf->in, old);
		return PRD_OK;
	}
	/* A replayed event for a version we hold changes nothing. */
	if(old && *rv && strcmp(old->rv, rv) == 0)
		return PRD_OK;
	if((rc = src ? decode_src(inf, src, &m) : decode(inf, obj, &m)) != 0)
		return rc;
	key = journal_key(m->ns, m->name);
	/* Same key, so what m replaces is old. */
	pthread_rwlock_wrlock(&inf->lock);
	rc = ot_put(&inf->cur, m, &replaced);
	if(!rc) {
		inf->gen++;
		journal_push(&inf->jr, key, inf->gen);
		key = NULL;
	}
	pthread_rwlock_unlock(&inf->lock);
	free(key);
	if(rc) {
		/* Out of memory growing the table: nothing changed, the cache
		 * still holds old; the reflector relists. */
		kube_obj_free(inf->in, m);
		return rc;
	}
	if(old)
		emit_update(inf, old, m);
	else
		emit_add(inf, m);
	kube_obj_free(inf->in, old);
	return PRD_OK;
}

static int st_event(void *ud, kube_event_type type, json_object *obj)
{
	kube_informer *inf = ud;
	const char *ns, *name, *rv;

	if(kube_json_meta(obj, &ns, &name, &rv))
		return reject(inf, obj);
	if(cluster_scoped(inf->kind))
		ns = "";
	else if(!*ns)
		return reject(inf, obj);
	return event_apply(inf, type, ns, name, rv, obj, NULL);
}

static int st_event_src(void *ud, kube_event_type type, const kube_item_src *src)
{
	kube_informer *inf = ud;
	kube_text_id id;

	if(src->obj)
		return st_event(ud, type, src->obj);
	if(kube_text_id_scan(src->json, src->len, src->max_depth, &id) || !id.name[0] ||
	   (!cluster_scoped(inf->kind) && !id.ns[0]))
		return with_tree(inf, src, type, false);
	return event_apply(inf, type, cluster_scoped(inf->kind) ? "" : id.ns, id.name, id.rv, NULL, src);
}

static const kube_store_ops store_ops = { st_list_begin, st_list_item, st_list_end, st_event, st_list_item_src,
					  st_event_src };

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
	for(i = 0; i < inf->cur.cap; i++)
		kube_obj_free(inf->in, inf->cur.slots[i].m);
	ot_free(&inf->cur);
	journal_clear(&inf->jr, 0);
	free(inf->jr.v);
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

uint64_t kube_informer_generation(kube_informer *inf)
{
	return inf->gen;
}

size_t kube_informer_len(kube_informer *inf)
{
	return inf->cur.len;
}

const kube_meta *kube_informer_get(kube_informer *inf, const char *ns, const char *name)
{
	if(!name)
		return NULL;
	if(!ns || cluster_scoped(inf->kind))
		ns = "";
	return ot_get(&inf->cur, ns, name);
}

int kube_informer_foreach(kube_informer *inf, kube_obj_fn fn, void *ud)
{
	size_t i;
	int rc;
	for(i = 0; i < inf->cur.cap; i++)
		if(inf->cur.slots[i].m && (rc = fn(ud, inf->cur.slots[i].m)) != 0)
			return rc;
	return PRD_OK;
}

int kube_informer_changes(kube_informer *inf, uint64_t since, kube_key_fn fn, void *ud)
{
	const journal *j = &inf->jr;
	size_t i;
	int rc;
	if(since > inf->gen || since < j->floor)
		return PRD_ERANGE;
	for(i = 0; i < j->len; i++) {
		const jentry *e = &j->v[(j->head + i) % JOURNAL_CAP];
		if(e->gen <= since)
			continue;
		if((rc = fn(ud, e->key, e->key + strlen(e->key) + 1)) != 0)
			return rc;
	}
	return PRD_OK;
}

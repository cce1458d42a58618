/* Informer: a reflector feeding a cache of compact typed objects (one kind
 * per informer), looked up by namespace/name or walked whole, with change
 * handlers. The controller reads every object of a kind in each pass, so
 * there are no secondary indexes.
 *
 * Relist: a full list builds a new table beside the old one and swaps it
 * in under the write lock, so a reader sees either the old contents or the
 * new, never a mix. Objects whose resourceVersion did
 * not change are carried over (not decoded again, no handler call);
 * changed ones get on_update, new ones on_add, vanished ones on_delete.
 *
 * Threads and data — who may touch what:
 *  - The reflector thread is the only writer. It decodes outside the lock
 *    and takes the write lock only to link or unlink objects.
 *  - Cached objects are immutable once inserted. A pointer obtained under
 *    the read lock (kube_informer_rdlock) stays valid until the matching
 *    kube_informer_rdunlock; after that it may be freed at any time.
 *    Readers copy what they need to keep.
 *  - Handlers run on the reflector thread, in event order, without the
 *    lock held. The objects they receive stay valid until the handler
 *    returns (an old object is freed only after every handler saw it). A
 *    handler may take the read lock; it must not block for long, since it
 *    holds up the watch. The usual handler notes that something changed
 *    and wakes the worker (see cmd_run.c).
 *  - has_synced and the counters may be read from any thread.
 *  - Handlers are registered before kube_informer_start(). */
#ifndef PRD_KUBE_INFORMER_H
#define PRD_KUBE_INFORMER_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/objects.h"
#include "kube/reflector.h"
#include "util/err.h"

typedef struct kube_handler {
	void (*on_add)(void *ud, const kube_meta *obj);
	void (*on_update)(void *ud, const kube_meta *old_obj, const kube_meta *new_obj);
	void (*on_delete)(void *ud, const kube_meta *old_obj);
	void *ud;
} kube_handler;

typedef struct kube_informer_opts {
	kube_kind kind;
	kube_intern *intern;                /* borrowed; shared between informers */
	kube_reflector_opts reflector;      /* name defaults to the kind */
} kube_informer_opts;

typedef struct kube_informer kube_informer;

/* Create an informer (not yet running). Caller frees with
 * kube_informer_free(). */
int kube_informer_new(const kube_informer_opts *o, kube_informer **out, prd_err *err);
/* Register a handler (copied). Only before start. */
int kube_informer_add_handler(kube_informer *inf, const kube_handler *h);
/* Start the reflector over lw (copied; lw->ud borrowed). */
int kube_informer_start(kube_informer *inf, const kube_listwatch *lw, prd_err *err);
/* Stop the reflector (idempotent). The cache stays readable. */
void kube_informer_stop(kube_informer *inf);
/* Stop and free every cached object. */
void kube_informer_free(kube_informer *inf);

/* True once the first list was committed and its handlers ran. */
bool kube_informer_has_synced(kube_informer *inf);
/* Block until has_synced or the informer is stopped; returns has_synced. */
bool kube_informer_wait_synced(kube_informer *inf);
void kube_informer_get_stats(kube_informer *inf, kube_reflector_stats *out);
/* The store interface, for driving the cache without a reflector thread
 * (benchmarks, tests, the in-memory API): pass inf as the ud. */
const kube_store_ops *kube_informer_store_ops(void);

/* ---- reads: only between rdlock and rdunlock ---- */
void kube_informer_rdlock(kube_informer *inf);
void kube_informer_rdunlock(kube_informer *inf);

/* Iteration callbacks return non-zero to stop; that value is returned. */
typedef int (*kube_obj_fn)(void *ud, const kube_meta *obj);

size_t kube_informer_len(kube_informer *inf);
/* A number that changes whenever the cache's contents change (an add, an
 * update, a delete or a relist); call with the read lock held. Two equal
 * readings mean the same contents. */
uint64_t kube_informer_generation(kube_informer *inf);
/* ns is "" (or NULL) for cluster-scoped kinds. NULL if absent. */
const kube_meta *kube_informer_get(kube_informer *inf, const char *ns, const char *name);
int kube_informer_foreach(kube_informer *inf, kube_obj_fn fn, void *ud);

/* The keys of the objects added, changed or deleted after generation
 * `since` (a kube_informer_generation reading), so that a reader can keep
 * what it derives from the cache up to date without walking it: fn gets
 * each key at least once, oldest change first (ns is "" for cluster-scoped
 * kinds); the caller looks it up (absent: deleted). Returns fn's non-zero
 * value, or PRD_ERANGE when the changes since then are not all known (the
 * cache was relisted, or more changes happened than the journal keeps):
 * walk the whole cache instead. */
typedef int (*kube_key_fn)(void *ud, const char *ns, const char *name);
int kube_informer_changes(kube_informer *inf, uint64_t since, kube_key_fn fn, void *ud);

#endif

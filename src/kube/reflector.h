/* Reflector: keeps a store in step with one collection of the apiserver,
 * on a thread of its own, the way client-go's Reflector does.
 *
 *   list (all pages) ──► store.list_begin / list_item… / list_end
 *   watch from the list's resourceVersion, allowWatchBookmarks ──► store.event
 *     · ADDED / MODIFIED / DELETED go to the store in arrival order
 *     · every event and BOOKMARK advances the tracked resourceVersion
 *     · the server ends the watch (timeoutSeconds, picked at random in
 *       [5, 10] min so many reflectors do not reconnect together) → watch
 *       again at once from the tracked resourceVersion
 *     · 410 Gone (HTTP status or in-stream ERROR) → relist
 *     · any other failure → wait, then watch again; the wait starts at
 *       800 ms and doubles up to 30 s, and goes back to 800 ms after a
 *       healthy watch (one that delivered an event or stayed open a minute)
 *     · a store failure other than a rejected object → relist, so nothing
 *       is silently lost
 *
 * Objects the store rejects as malformed (PRD_EINVAL) are logged, counted
 * and skipped; the resourceVersion still advances past them.
 *
 * The reflector talks to the server through a kube_listwatch: production
 * code builds one over kube_list_text()/kube_watch_text() with
 * kube_listwatch_client() (objects reach the store as JSON text);
 * tests pass fakes that feed pages, events, bookmarks, 410s and
 * disconnects.
 *
 * Threads: the store callbacks, the listwatch functions and the sleep hook
 * run only on the reflector's thread, one at a time. kube_reflector_stop()
 * may be called from any other thread; it returns once the thread has
 * exited (a watch notices within about a second, a list at its next item,
 * a backoff wait at once). Stats may be read from any thread. */
#ifndef PRD_KUBE_REFLECTOR_H
#define PRD_KUBE_REFLECTOR_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "util/clock.h"
#include "util/err.h"

/* Where the reflector reads from. */
typedef struct kube_listwatch {
	/* List every object (all pages), calling fn for each item in order;
	 * on success *rv receives the list's resourceVersion (caller frees).
	 * A non-zero return of fn stops the list and is returned. */
	int (*list)(void *ud, kube_item_fn fn, void *fn_ud, char **rv, prd_err *err);
	/* Watch from resource version rv with bookmarks and the given
	 * server-side timeout until the server ends it (0), fn returns
	 * non-zero (that value), cancelled() turns true (0) or an error
	 * (PRD_EGONE for 410). Same contract as kube_watch(). */
	int (*watch)(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
		     kube_event_fn fn, void *fn_ud, prd_err *err);
	void *ud;
	/* Optional, used instead of list and watch when the store has the
	 * *_src functions too: the same, handing objects over as JSON text
	 * where the answer allows (kube_item_src, see kube_list_text), so no
	 * json-c tree is built on the way to the typed decoders. */
	int (*list_text)(void *ud, kube_src_fn fn, void *fn_ud, char **rv, prd_err *err);
	int (*watch_text)(void *ud, const char *rv, long timeout_s, bool (*cancelled)(void *), void *cancel_ud,
			  kube_src_event_fn fn, void *fn_ud, prd_err *err);
} kube_listwatch;

/* Where the reflector writes to (the informer cache implements this). */
typedef enum kube_event_type {
	KUBE_EV_ADDED,
	KUBE_EV_MODIFIED,
	KUBE_EV_DELETED
} kube_event_type;

typedef struct kube_store_ops {
	/* A list starts: collect items until list_end. */
	int (*list_begin)(void *ud);
	/* One listed item (borrowed). PRD_EINVAL = malformed, skipped; any
	 * other error aborts the list. */
	int (*list_item)(void *ud, json_object *item);
	/* The list ended: commit (ok, rv is the list's resourceVersion) or
	 * discard what was collected (!ok). Commit replaces the store's
	 * contents. Returning an error counts as a failed list. */
	int (*list_end)(void *ud, bool ok, const char *rv);
	/* One watch event (obj borrowed). PRD_EINVAL = malformed, skipped. */
	int (*event)(void *ud, kube_event_type type, json_object *obj);
	/* Optional: list_item and event for objects as kube_item_src (text
	 * or tree). */
	int (*list_item_src)(void *ud, const kube_item_src *item);
	int (*event_src)(void *ud, kube_event_type type, const kube_item_src *obj);
} kube_store_ops;

typedef struct kube_reflector_opts {
	const char *name;              /* for logs, e.g. "pods"; copied */
	const clk *clock;              /* default clk_real(); measures watch health */
	long min_watch_timeout_s;      /* default 300 */
	long max_watch_timeout_s;      /* default 600 */
	int64_t backoff_initial_ns;    /* default 800 ms */
	int64_t backoff_max_ns;        /* default 30 s */
	int64_t healthy_watch_ns;      /* default 60 s */
	unsigned seed;                 /* for the watch timeout; 0 = from the clock */
	/* Instead of waiting `ns` (interruptibly) call this; tests record the
	 * waits and return at once. NULL = really wait. */
	void (*sleep)(void *ud, int64_t ns);
	void *sleep_ud;
} kube_reflector_opts;

typedef struct kube_reflector_stats {
	uint64_t lists;          /* successful lists, the first included */
	uint64_t relists;        /* successful lists after the first */
	uint64_t list_errors;
	uint64_t watches;        /* watch calls */
	uint64_t watch_restarts; /* watches started again after one ended */
	uint64_t watch_errors;   /* watches that ended with an error other than 410 */
	uint64_t gone;           /* 410 Gone answers */
	uint64_t events;         /* ADDED/MODIFIED/DELETED delivered to the store */
	uint64_t bookmarks;
	uint64_t rejected;       /* objects the store rejected as malformed */
} kube_reflector_stats;

typedef struct kube_reflector kube_reflector;

/* Create a reflector (not yet running). lw and store are copied; store_ud
 * and lw->ud are borrowed and must outlive the reflector. Caller frees with
 * kube_reflector_free(). */
int kube_reflector_new(const kube_listwatch *lw, const kube_store_ops *store, void *store_ud,
		       const kube_reflector_opts *opts, kube_reflector **out, prd_err *err);
/* Start the thread. PRD_EINVAL if already started. */
int kube_reflector_start(kube_reflector *r, prd_err *err);
/* Ask the thread to stop and wait for it. Idempotent; safe before start. */
void kube_reflector_stop(kube_reflector *r);
/* Stop (if running) and free. */
void kube_reflector_free(kube_reflector *r);

void kube_reflector_get_stats(kube_reflector *r, kube_reflector_stats *out);
/* The last resourceVersion seen, or NULL before the first list (caller
 * frees). */
char *kube_reflector_resource_version(kube_reflector *r);

/* A kube_listwatch over a real client: kube_list() with pages of
 * `page_size` (0 = 500) and kube_watch() with bookmarks, and their text
 * forms kube_list_text() and kube_watch_text(). label_selector and
 * field_selector may be NULL. Everything passed is borrowed and must
 * outlive the listwatch. Free with kube_listwatch_client_free(). */
int kube_listwatch_client(kube_client *c, const kube_resource *r, const char *ns, const char *label_selector,
			  const char *field_selector, long page_size, kube_listwatch *out);
void kube_listwatch_client_free(kube_listwatch *lw);

#endif

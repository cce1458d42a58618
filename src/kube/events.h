/* core/v1 Event recorder.
 *
 * Records what the controller did to an object as Events, the way
 * client-go's recorder does: a repeat of the same (object, type, reason,
 * message) within the aggregation window bumps count and lastTimestamp of
 * the Event already written (PATCH) instead of creating another, and a
 * per-object token bucket (burst 25, one token per 5 minutes by default)
 * drops floods. Recording never fails the caller: errors are logged and
 * counted. It is synchronous (the caller waits for the apiserver), or with
 * `senders` > 0 asynchronous as client-go's broadcaster is: the Event is
 * stamped with its time and queued, and sender threads write it; the
 * Events of one object keep their order (one sender per object), and a
 * full queue drops the Event (counted) rather than stall the caller.
 *
 * Thread-safe: a recorder may be shared by threads (one internal lock,
 * held only around the cache, never across a request). */
#ifndef PRD_KUBE_EVENTS_H
#define PRD_KUBE_EVENTS_H

#include <stdint.h>

#include "kube/api.h"
#include "kube/client.h"
#include "util/clock.h"

typedef struct kube_object_ref {
	const char *kind;
	const char *api_version;
	const char *namespace_;      /* NULL for cluster-scoped objects */
	const char *name;
	const char *uid;
	const char *resource_version;
} kube_object_ref;

typedef struct kube_recorder_opts {
	const char *component;        /* source.component; default "provreqd" */
	const char *instance;         /* reportingInstance; default the host name */
	const clk *clock;             /* default clk_real() */
	int64_t aggregate_window_ns;  /* default 10 min */
	int spam_burst;               /* default 25 */
	int64_t spam_refill_ns;       /* one token per; default 5 min */
	size_t cache_size;            /* recent events remembered; default 4096 */
	unsigned senders;             /* 0: synchronous; else sender threads (max 16) */
	size_t queue_max;             /* queued Events at most (async); default 4096 */
} kube_recorder_opts;

typedef struct kube_recorder kube_recorder;

typedef struct kube_recorder_stats {
	unsigned long created;       /* new Event objects */
	unsigned long aggregated;    /* PATCHes of an existing Event's count */
	unsigned long dropped;       /* refused by the spam filter */
	unsigned long failed;        /* the apiserver refused or was unreachable */
	unsigned long queue_full;    /* dropped because the send queue was full (async) */
} kube_recorder_stats;

/* Events are written through `api` (copied; what it points to is borrowed
 * and must outlive the recorder): the REST client in `run`
 * (kube_api_from_client), the in-memory API in `simulate` and tests.
 * Caller frees with kube_recorder_free(). */
int kube_recorder_new(const kube_api *api, const kube_recorder_opts *o, kube_recorder **out, prd_err *err);
/* Free; an asynchronous recorder first sends what is queued (bound the
 * time with the client's deadline). */
void kube_recorder_free(kube_recorder *r);
/* Wait until every Event queued so far has been written (or failed);
 * returns at once for a synchronous recorder. */
void kube_recorder_flush(kube_recorder *r);

/* Record an Event. type is "Normal" or "Warning"; reason is CamelCase;
 * the message is printf-formatted and cut at 1024 bytes. Never fails. */
void kube_recorder_event(kube_recorder *r, const kube_object_ref *obj, const char *type,
			 const char *reason, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

void kube_recorder_get_stats(kube_recorder *r, kube_recorder_stats *out);

/* The reference of an object as the apiserver returned it (kind and
 * apiVersion from the object, falling back to `r`'s). Strings are
 * borrowed from obj. */
void kube_events_ref_from(json_object *obj, const kube_resource *r, kube_object_ref *out);

#endif

/* Rate-limited work queue of string keys, the shape of client-go's
 * workqueue.RateLimitingInterface.
 *
 * Semantics (the ones a controller relies on):
 *  - A key waiting in the queue is held once: adding it again is a no-op.
 *  - A key is never handed to two workers at once. A key added while a
 *    worker processes it is remembered ("dirty") and queued again when the
 *    worker calls wq_done().
 *  - wq_add_after() queues a key once its delay has passed (on the queue's
 *    clock); adding a key that is already waiting for a later time moves it
 *    earlier, never later.
 *  - wq_add_rate_limited() delays by max(per-key exponential backoff,
 *    overall token bucket): 5 ms doubling per failure up to 1000 s, and a
 *    bucket of 10 tokens/s with a burst of 100, as client-go's
 *    DefaultControllerRateLimiter. wq_forget() resets a key's backoff.
 *  - wq_shutdown() refuses new keys and wakes every waiter; wq_get() keeps
 *    handing out keys that are already ready, then reports shutdown.
 *
 * Time: delays are measured on the injectable clock given at creation.
 * Waiters sleep on a condition variable for the remaining delay (in real
 * time) and re-read the clock when they wake. With a fake clock, a test
 * moves the clock and then calls wq_clock_moved() so waiters re-check at
 * once; or it avoids blocking entirely with wq_try_get(). The clock is read
 * only while the queue's mutex is held and only when delayed keys exist.
 *
 * Threads: every function is safe to call from any thread. Keys are copied
 * on the way in; wq_get() hands the caller its own copy. */
#ifndef PRD_KUBE_WORKQUEUE_H
#define PRD_KUBE_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/clock.h"

typedef struct wq wq;

typedef struct wq_opts {
	const clk *clock;          /* default clk_real() */
	int64_t base_delay_ns;     /* per-key backoff start; default 5 ms */
	int64_t max_delay_ns;      /* per-key backoff cap; default 1000 s */
	double qps;                /* overall bucket refill; default 10; <0 disables the bucket */
	int burst;                 /* overall bucket size; default 100 */
} wq_opts;

/* Create a queue (opts may be NULL for the defaults). Returns NULL when out
 * of memory. Free with wq_free() once no thread uses it any more. */
wq *wq_new(const wq_opts *opts);
void wq_free(wq *q);

/* Queue `key` now. Returns 0, PRD_ENOMEM, or PRD_EGONE after shutdown (the
 * key is dropped, as client-go does). */
int wq_add(wq *q, const char *key);

/* Queue `key` once `delay_ns` has passed on the queue's clock (<= 0 means
 * now). Same return values as wq_add(). */
int wq_add_after(wq *q, const char *key, int64_t delay_ns);

/* Queue `key` after the rate limiter's delay for it and count one more
 * failure for it. Returns as wq_add(). The delay used is written to
 * *delay_ns when that is not NULL. */
int wq_add_rate_limited(wq *q, const char *key, int64_t *delay_ns);

/* Reset `key`'s failure count (call after it was processed successfully). */
void wq_forget(wq *q, const char *key);

/* How many times `key` went through wq_add_rate_limited() since it was last
 * forgotten. */
int wq_num_requeues(wq *q, const char *key);

/* Block until a key is ready, then hand it out: *key receives a copy the
 * caller frees with free() after calling wq_done(q, *key). Returns 0, or
 * PRD_EGONE when the queue is shut down and nothing is ready (then *key is
 * NULL). PRD_ENOMEM if the copy could not be made (the key stays queued). */
int wq_get(wq *q, char **key);

/* Like wq_get() but never blocks: PRD_EAGAIN when nothing is ready now. */
int wq_try_get(wq *q, char **key);

/* The worker finished `key` (the string need not be the pointer wq_get()
 * returned). If the key was added again meanwhile it is queued again. */
void wq_done(wq *q, const char *key);

/* Stop accepting keys and wake every waiter. Idempotent. */
void wq_shutdown(wq *q);
bool wq_shutting_down(wq *q);

/* Wake waiters so they re-read the clock (after a fake clock moved). */
void wq_clock_moved(wq *q);

/* Keys ready to hand out now (not counting delayed or in-process keys). */
size_t wq_len(wq *q);
/* Keys waiting for their delay to pass. */
size_t wq_delayed_len(wq *q);

#endif

#include "kube/workqueue.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/err.h"
#include "util/hmap.h"
#include "util/str.h"

#define WQ_MARK ((void *)(uintptr_t)1)

/* A key waiting for its delay; `idx` is its place in the heap so the map
 * can find and move it. */
typedef struct wq_delayed {
	int64_t due;
	size_t idx;
	char *key;
} wq_delayed;

struct wq {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const clk *clock;

	/* Ready keys in FIFO order (ring buffer of owned strings). */
	char **ring;
	size_t ring_cap, ring_head, ring_len;

	hmap dirty;        /* keys waiting or to be re-queued after done */
	hmap processing;   /* keys a worker holds */

	wq_delayed **heap; /* min-heap on due */
	size_t heap_len, heap_cap;
	hmap delayed;      /* key -> wq_delayed* (owned by the heap) */

	hmap failures;     /* key -> (uintptr_t)count */
	int64_t base_delay, max_delay;
	double qps, tokens;
	int burst;
	int64_t bucket_last;

	bool shutdown;
};

wq *wq_new(const wq_opts *opts)
{
	wq *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;

	if(!q)
		return NULL;
	q->clock = opts && opts->clock ? opts->clock : clk_real();
	q->base_delay = opts && opts->base_delay_ns > 0 ? opts->base_delay_ns : 5 * PRD_NS_PER_MS;
	q->max_delay = opts && opts->max_delay_ns > 0 ? opts->max_delay_ns : 1000 * PRD_NS_PER_SEC;
	q->qps = opts && opts->qps != 0 ? opts->qps : 10.0;
	q->burst = opts && opts->burst > 0 ? opts->burst : 100;
	q->tokens = q->burst;
	q->bucket_last = INT64_MIN;
	hmap_init(&q->dirty, NULL);
	hmap_init(&q->processing, NULL);
	hmap_init(&q->delayed, NULL);
	hmap_init(&q->failures, NULL);
	if(pthread_mutex_init(&q->mu, NULL)) {
		free(q);
		return NULL;
	}
	/* Waits are measured on CLOCK_MONOTONIC so wall clock jumps do not
	 * stretch or cut a delay. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if(pthread_cond_init(&q->cv, &ca)) {
		pthread_condattr_destroy(&ca);
		pthread_mutex_destroy(&q->mu);
		free(q);
		return NULL;
	}
	pthread_condattr_destroy(&ca);
	return q;
}

void wq_free(wq *q)
{
	size_t i;
	if(!q)
		return;
	for(i = 0; i < q->ring_len; i++)
		free(q->ring[(q->ring_head + i) % q->ring_cap]);
	free(q->ring);
	for(i = 0; i < q->heap_len; i++) {
		free(q->heap[i]->key);
		free(q->heap[i]);
	}
	free(q->heap);
	hmap_free(&q->dirty);
	hmap_free(&q->processing);
	hmap_free(&q->delayed);
	hmap_free(&q->failures);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

/* Append a copy of key to the ready ring. */
static int ring_push(wq *q, const char *key)
{
	char *k;
	if(q->ring_len == q->ring_cap) {
		size_t ncap = q->ring_cap ? q->ring_cap * 2 : 16, i;
		char **n = malloc(ncap * sizeof(*n));
		if(!n)
			return PRD_ENOMEM;
		for(i = 0; i < q->ring_len; i++)
			n[i] = q->ring[(q->ring_head + i) % q->ring_cap];
		free(q->ring);
		q->ring = n;
		q->ring_cap = ncap;
		q->ring_head = 0;
	}
	k = str_dup(key);
	if(!k)
		return PRD_ENOMEM;
	q->ring[(q->ring_head + q->ring_len) % q->ring_cap] = k;
	q->ring_len++;
	return PRD_OK;
}

static char *ring_pop(wq *q)
{
	char *k = q->ring[q->ring_head];
	q->ring_head = (q->ring_head + 1) % q->ring_cap;
	q->ring_len--;
	return k;
}

/* client-go's Add, with the mutex held. */
static int add_locked(wq *q, const char *key)
{
	int rc;
	if(q->shutdown)
		return PRD_EGONE;
	if(hmap_has(&q->dirty, key))
		return PRD_OK;
	rc = hmap_put(&q->dirty, key, WQ_MARK);
	if(rc)
		return rc;
	if(hmap_has(&q->processing, key))
		return PRD_OK;
	rc = ring_push(q, key);
	if(rc) {
		hmap_del(&q->dirty, key);
		return rc;
	}
	pthread_cond_signal(&q->cv);
	return PRD_OK;
}

int wq_add(wq *q, const char *key)
{
	int rc;
	pthread_mutex_lock(&q->mu);
	rc = add_locked(q, key);
	pthread_mutex_unlock(&q->mu);
	return rc;
}

static void heap_swap(wq *q, size_t a, size_t b)
{
	wq_delayed *t = q->heap[a];
	q->heap[a] = q->heap[b];
	q->heap[b] = t;
	q->heap[a]->idx = a;
	q->heap[b]->idx = b;
}

static void heap_up(wq *q, size_t i)
{
	while(i > 0) {
		size_t p = (i - 1) / 2;
		if(q->heap[p]->due <= q->heap[i]->due)
			break;
		heap_swap(q, p, i);
		i = p;
	}
}

static void heap_down(wq *q, size_t i)
{
	for(;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if(l < q->heap_len && q->heap[l]->due < q->heap[m]->due)
			m = l;
		if(r < q->heap_len && q->heap[r]->due < q->heap[m]->due)
			m = r;
		if(m == i)
			return;
		heap_swap(q, i, m);
		i = m;
	}
}

/* Remove and return the earliest delayed key (caller frees both). */
static wq_delayed *heap_pop(wq *q)
{
	wq_delayed *top = q->heap[0];
	q->heap_len--;
	if(q->heap_len) {
		q->heap[0] = q->heap[q->heap_len];
		q->heap[0]->idx = 0;
		heap_down(q, 0);
	}
	hmap_take(&q->delayed, top->key);
	return top;
}

/* Move every delayed key whose time has come to the ready queue. A key that
 * cannot be moved for lack of memory stays delayed and is retried on the
 * next call. */
static void promote_due(wq *q)
{
	int64_t now;
	if(!q->heap_len)
		return;
	now = clk_mono(q->clock);
	while(q->heap_len && q->heap[0]->due <= now) {
		wq_delayed *d = q->heap[0];
		int rc = add_locked(q, d->key);
		if(rc == PRD_ENOMEM)
			return;
		d = heap_pop(q);
		free(d->key);
		free(d);
	}
}

static int add_after_locked(wq *q, const char *key, int64_t delay_ns)
{
	wq_delayed *d;
	int64_t due;
	int rc;

	if(q->shutdown)
		return PRD_EGONE;
	if(delay_ns <= 0)
		return add_locked(q, key);
	due = clk_mono(q->clock) + delay_ns;
	d = hmap_get(&q->delayed, key);
	if(d) {
		if(due < d->due) {
			d->due = due;
			heap_up(q, d->idx);
			pthread_cond_broadcast(&q->cv);
		}
		return PRD_OK;
	}
	if(q->heap_len == q->heap_cap) {
		size_t ncap = q->heap_cap ? q->heap_cap * 2 : 16;
		wq_delayed **n = realloc(q->heap, ncap * sizeof(*n));
		if(!n)
			return PRD_ENOMEM;
		q->heap = n;
		q->heap_cap = ncap;
	}
	d = calloc(1, sizeof(*d));
	if(!d)
		return PRD_ENOMEM;
	d->key = str_dup(key);
	d->due = due;
	if(!d->key) {
		free(d);
		return PRD_ENOMEM;
	}
	rc = hmap_put(&q->delayed, key, d);
	if(rc) {
		free(d->key);
		free(d);
		return rc;
	}
	d->idx = q->heap_len;
	q->heap[q->heap_len++] = d;
	heap_up(q, d->idx);
	/* A waiter may be sleeping until a later deadline. */
	pthread_cond_broadcast(&q->cv);
	return PRD_OK;
}

int wq_add_after(wq *q, const char *key, int64_t delay_ns)
{
	int rc;
	pthread_mutex_lock(&q->mu);
	rc = add_after_locked(q, key, delay_ns);
	pthread_mutex_unlock(&q->mu);
	return rc;
}

/* The delay for one more failure of `key`: the larger of the per-key
 * exponential backoff and the overall token bucket's wait (which reserves
 * a token, like rate.Limiter.Reserve). */
static int64_t rate_limit_delay(wq *q, const char *key, int *rc)
{
	uintptr_t n = (uintptr_t)hmap_get(&q->failures, key);
	int64_t d = q->base_delay;
	uintptr_t i;

	for(i = 0; i < n && d < q->max_delay; i++)
		d *= 2;
	if(d > q->max_delay)
		d = q->max_delay;
	*rc = hmap_put(&q->failures, key, (void *)(n + 1));

	if(q->qps > 0) {
		int64_t now = clk_mono(q->clock), wait;
		if(q->bucket_last != INT64_MIN && now > q->bucket_last) {
			q->tokens += (double)(now - q->bucket_last) / PRD_NS_PER_SEC * q->qps;
			if(q->tokens > q->burst)
				q->tokens = q->burst;
		}
		if(q->bucket_last == INT64_MIN || now > q->bucket_last)
			q->bucket_last = now;
		q->tokens -= 1.0;
		if(q->tokens < 0) {
			wait = (int64_t)(-q->tokens / q->qps * PRD_NS_PER_SEC);
			if(wait > d)
				d = wait;
		}
	}
	return d;
}

int wq_add_rate_limited(wq *q, const char *key, int64_t *delay_ns)
{
	int rc, rc2;
	int64_t d;
	pthread_mutex_lock(&q->mu);
	if(q->shutdown) {
		pthread_mutex_unlock(&q->mu);
		return PRD_EGONE;
	}
	d = rate_limit_delay(q, key, &rc2);
	rc = add_after_locked(q, key, d);
	pthread_mutex_unlock(&q->mu);
	if(delay_ns)
		*delay_ns = d;
	return rc ? rc : rc2;
}

void wq_forget(wq *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	hmap_del(&q->failures, key);
	pthread_mutex_unlock(&q->mu);
}

int wq_num_requeues(wq *q, const char *key)
{
	uintptr_t n;
	pthread_mutex_lock(&q->mu);
	n = (uintptr_t)hmap_get(&q->failures, key);
	pthread_mutex_unlock(&q->mu);
	return (int)n;
}

/* Hand out the front key, with the mutex held and the ring non-empty. */
static int take_locked(wq *q, char **key)
{
	char *k = q->ring[q->ring_head];
	int rc = hmap_put(&q->processing, k, WQ_MARK);
	if(rc)
		return rc;
	ring_pop(q);
	hmap_del(&q->dirty, k);
	*key = k;
	return PRD_OK;
}

static void timed_wait(wq *q, int64_t delta_ns)
{
	struct timespec ts;
	int64_t t;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if(delta_ns < PRD_NS_PER_MS)
		delta_ns = PRD_NS_PER_MS;
	t = (int64_t)ts.tv_nsec + delta_ns % PRD_NS_PER_SEC;
	ts.tv_sec += (time_t)(delta_ns / PRD_NS_PER_SEC + t / PRD_NS_PER_SEC);
	ts.tv_nsec = (long)(t % PRD_NS_PER_SEC);
	pthread_cond_timedwait(&q->cv, &q->mu, &ts);
}

static int get_common(wq *q, char **key, bool block)
{
	int rc;
	*key = NULL;
	pthread_mutex_lock(&q->mu);
	for(;;) {
		promote_due(q);
		if(q->ring_len)
			break;
		if(q->shutdown) {
			pthread_mutex_unlock(&q->mu);
			return PRD_EGONE;
		}
		if(!block) {
			pthread_mutex_unlock(&q->mu);
			return PRD_EAGAIN;
		}
		if(q->heap_len)
			timed_wait(q, q->heap[0]->due - clk_mono(q->clock));
		else
			pthread_cond_wait(&q->cv, &q->mu);
	}
	rc = take_locked(q, key);
	pthread_mutex_unlock(&q->mu);
	return rc;
}

int wq_get(wq *q, char **key)
{
	return get_common(q, key, true);
}

int wq_try_get(wq *q, char **key)
{
	return get_common(q, key, false);
}

void wq_done(wq *q, const char *key)
{
	pthread_mutex_lock(&q->mu);
	hmap_del(&q->processing, key);
	if(hmap_has(&q->dirty, key)) {
		/* Re-added while processing: it waits in the ring again. If
		 * that copy cannot be made, clear the dirty mark as well so the
		 * next wq_add() of the key queues it instead of ignoring it. */
		if(ring_push(q, key))
			hmap_del(&q->dirty, key);
		else
			pthread_cond_signal(&q->cv);
	}
	pthread_mutex_unlock(&q->mu);
}

void wq_shutdown(wq *q)
{
	pthread_mutex_lock(&q->mu);
	q->shutdown = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

bool wq_shutting_down(wq *q)
{
	bool s;
	pthread_mutex_lock(&q->mu);
	s = q->shutdown;
	pthread_mutex_unlock(&q->mu);
	return s;
}

void wq_clock_moved(wq *q)
{
	pthread_mutex_lock(&q->mu);
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

size_t wq_len(wq *q)
{
	size_t n;
	pthread_mutex_lock(&q->mu);
	promote_due(q);
	n = q->ring_len;
	pthread_mutex_unlock(&q->mu);
	return n;
}

size_t wq_delayed_len(wq *q)
{
	size_t n;
	pthread_mutex_lock(&q->mu);
	n = q->heap_len;
	pthread_mutex_unlock(&q->mu);
	return n;
}

#include "testutil.h"
#include "kube/workqueue.h"
#include "util/clock.h"
#include "util/err.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fake clock whose reads and moves are serialised by a mutex, so a test
 * thread may move it while a worker thread blocked in wq_get() reads it. */
typedef struct locked_clk {
	clk c;             /* first, so a clk* is a locked_clk* */
	pthread_mutex_t mu;
	int64_t mono;
} locked_clk;

static int64_t lc_mono(const clk *c)
{
	locked_clk *l = (locked_clk *)(uintptr_t)c;
	int64_t v;
	pthread_mutex_lock(&l->mu);
	v = l->mono;
	pthread_mutex_unlock(&l->mu);
	return v;
}

static void lc_init(locked_clk *l)
{
	memset(l, 0, sizeof(*l));
	l->c.wall_ns = lc_mono;
	l->c.mono_ns = lc_mono;
	pthread_mutex_init(&l->mu, NULL);
}

static void lc_advance(locked_clk *l, int64_t d)
{
	pthread_mutex_lock(&l->mu);
	l->mono += d;
	pthread_mutex_unlock(&l->mu);
}

static char *must_get(wq *q)
{
	char *k = NULL;
	CU_ASSERT_EQUAL_FATAL(wq_try_get(q, &k), 0);
	return k;
}

static void test_dedup_and_order(void)
{
	wq *q = wq_new(NULL);
	char *k;
	CU_ASSERT_EQUAL(wq_add(q, "ns/a"), 0);
	CU_ASSERT_EQUAL(wq_add(q, "ns/b"), 0);
	CU_ASSERT_EQUAL(wq_add(q, "ns/a"), 0);
	CU_ASSERT_EQUAL(wq_len(q), 2);
	k = must_get(q);
	CU_ASSERT_STRING_EQUAL(k, "ns/a");
	wq_done(q, k);
	free(k);
	k = must_get(q);
	CU_ASSERT_STRING_EQUAL(k, "ns/b");
	wq_done(q, k);
	free(k);
	CU_ASSERT_EQUAL(wq_try_get(q, &k), PRD_EAGAIN);
	CU_ASSERT_PTR_NULL(k);
	wq_free(q);
}

static void test_no_parallel_processing(void)
{
	wq *q = wq_new(NULL);
	char *k, *k2;
	wq_add(q, "x");
	k = must_get(q);
	/* Re-added while held: not handed out again until done. */
	CU_ASSERT_EQUAL(wq_add(q, "x"), 0);
	CU_ASSERT_EQUAL(wq_add(q, "x"), 0);
	CU_ASSERT_EQUAL(wq_len(q), 0);
	CU_ASSERT_EQUAL(wq_try_get(q, &k2), PRD_EAGAIN);
	wq_done(q, k);
	free(k);
	CU_ASSERT_EQUAL(wq_len(q), 1);
	k = must_get(q);
	CU_ASSERT_STRING_EQUAL(k, "x");
	wq_done(q, k);
	free(k);
	/* Done without a re-add leaves nothing behind. */
	CU_ASSERT_EQUAL(wq_len(q), 0);
	wq_free(q);
}

static void test_add_after(void)
{
	clk c;
	wq_opts o = { 0 };
	wq *q;
	char *k;

	clk_fake_init(&c, 1000 * PRD_NS_PER_SEC);
	o.clock = &c;
	q = wq_new(&o);
	CU_ASSERT_EQUAL(wq_add_after(q, "late", 100 * PRD_NS_PER_MS), 0);
	CU_ASSERT_EQUAL(wq_add_after(q, "later", 1 * PRD_NS_PER_SEC), 0);
	/* A second add_after for a later time does not postpone it... */
	CU_ASSERT_EQUAL(wq_add_after(q, "late", 10 * PRD_NS_PER_SEC), 0);
	/* ...and one for an earlier time brings it forward. */
	CU_ASSERT_EQUAL(wq_add_after(q, "later", 50 * PRD_NS_PER_MS), 0);
	CU_ASSERT_EQUAL(wq_delayed_len(q), 2);
	CU_ASSERT_EQUAL(wq_try_get(q, &k), PRD_EAGAIN);

	clk_fake_advance(&c, 49 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(wq_try_get(q, &k), PRD_EAGAIN);
	clk_fake_advance(&c, 1 * PRD_NS_PER_MS);
	k = must_get(q);
	CU_ASSERT_STRING_EQUAL(k, "later");
	wq_done(q, k);
	free(k);
	CU_ASSERT_EQUAL(wq_try_get(q, &k), PRD_EAGAIN);
	clk_fake_advance(&c, 50 * PRD_NS_PER_MS);
	k = must_get(q);
	CU_ASSERT_STRING_EQUAL(k, "late");
	wq_done(q, k);
	free(k);
	CU_ASSERT_EQUAL(wq_delayed_len(q), 0);

	/* A zero delay is an ordinary add; a delayed key already waiting in
	 * the ready queue is not doubled. */
	CU_ASSERT_EQUAL(wq_add_after(q, "now", 0), 0);
	CU_ASSERT_EQUAL(wq_add_after(q, "now", 5 * PRD_NS_PER_MS), 0);
	clk_fake_advance(&c, 5 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(wq_len(q), 1);
	wq_free(q);
}

static void test_rate_limited_backoff(void)
{
	clk c;
	wq_opts o = { 0 };
	wq *q;
	int64_t d, want = 5 * PRD_NS_PER_MS;
	int i;

	clk_fake_init(&c, 0);
	o.clock = &c;
	q = wq_new(&o);
	for(i = 0; i < 10; i++) {
		CU_ASSERT_EQUAL(wq_add_rate_limited(q, "k", &d), 0);
		CU_ASSERT_EQUAL(d, want);
		want *= 2;
	}
	CU_ASSERT_EQUAL(wq_num_requeues(q, "k"), 10);
	for(i = 0; i < 30; i++)
		wq_add_rate_limited(q, "k", &d);
	CU_ASSERT_EQUAL(d, 1000 * PRD_NS_PER_SEC);
	/* Another key has its own count. */
	CU_ASSERT_EQUAL(wq_add_rate_limited(q, "other", &d), 0);
	CU_ASSERT_EQUAL(d, 5 * PRD_NS_PER_MS);
	wq_forget(q, "k");
	CU_ASSERT_EQUAL(wq_num_requeues(q, "k"), 0);
	CU_ASSERT_EQUAL(wq_add_rate_limited(q, "k", &d), 0);
	CU_ASSERT_EQUAL(d, 5 * PRD_NS_PER_MS);
	wq_free(q);
}

static void test_rate_limited_bucket(void)
{
	clk c;
	wq_opts o = { 0 };
	wq *q;
	int64_t d;
	char key[32];
	int i;

	clk_fake_init(&c, 0);
	o.clock = &c;
	q = wq_new(&o);
	/* The burst of 100 passes with only the per-key delay... */
	for(i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		wq_add_rate_limited(q, key, &d);
		CU_ASSERT_EQUAL(d, 5 * PRD_NS_PER_MS);
	}
	/* ...then tokens come at 10/s: 100 ms, 200 ms, ... */
	wq_add_rate_limited(q, "k100", &d);
	CU_ASSERT_EQUAL(d, 100 * PRD_NS_PER_MS);
	wq_add_rate_limited(q, "k101", &d);
	CU_ASSERT_EQUAL(d, 200 * PRD_NS_PER_MS);
	/* One second refills 10 tokens, which pay the debt of 2 and leave 8. */
	clk_fake_advance(&c, PRD_NS_PER_SEC);
	for(i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "j%d", i);
		wq_add_rate_limited(q, key, &d);
		CU_ASSERT_EQUAL(d, 5 * PRD_NS_PER_MS);
	}
	wq_add_rate_limited(q, "j8", &d);
	CU_ASSERT_EQUAL(d, 100 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(wq_delayed_len(q), 111);
	clk_fake_advance(&c, 200 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(wq_len(q), 111);
	wq_free(q);
}

typedef struct getter {
	wq *q;
	int rc;
	char *key;
} getter;

static void *getter_main(void *p)
{
	getter *g = p;
	g->rc = wq_get(g->q, &g->key);
	return NULL;
}

static void test_shutdown(void)
{
	wq *q = wq_new(NULL);
	getter g = { q, 1, NULL };
	pthread_t t;
	char *k;

	/* A blocked waiter is woken and told the queue is gone. */
	pthread_create(&t, NULL, getter_main, &g);
	wq_shutdown(q);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(g.rc, PRD_EGONE);
	CU_ASSERT_PTR_NULL(g.key);
	CU_ASSERT_TRUE(wq_shutting_down(q));
	CU_ASSERT_EQUAL(wq_add(q, "x"), PRD_EGONE);
	CU_ASSERT_EQUAL(wq_add_after(q, "x", PRD_NS_PER_SEC), PRD_EGONE);
	CU_ASSERT_EQUAL(wq_add_rate_limited(q, "x", NULL), PRD_EGONE);
	wq_free(q);

	/* Keys already ready are still handed out (drain), then shutdown. */
	q = wq_new(NULL);
	wq_add(q, "a");
	wq_add(q, "b");
	k = must_get(q);
	wq_add(q, k); /* re-added while processing */
	wq_shutdown(q);
	wq_done(q, k);
	free(k);
	k = must_get(q);
	CU_ASSERT_STRING_EQUAL(k, "b");
	wq_done(q, k);
	free(k);
	k = must_get(q);
	CU_ASSERT_STRING_EQUAL(k, "a");
	wq_done(q, k);
	free(k);
	CU_ASSERT_EQUAL(wq_get(q, &k), PRD_EGONE);
	wq_free(q);
}

static void test_fake_clock_wakes_waiter(void)
{
	locked_clk lc;
	wq_opts o = { 0 };
	wq *q;
	getter g;
	pthread_t t;

	lc_init(&lc);
	o.clock = &lc.c;
	q = wq_new(&o);
	g.q = q;
	g.rc = 1;
	g.key = NULL;
	/* An hour on the fake clock: the waiter would sleep for a real hour
	 * unless the moved clock wakes it. */
	wq_add_after(q, "timer", 3600 * PRD_NS_PER_SEC);
	pthread_create(&t, NULL, getter_main, &g);
	lc_advance(&lc, 3600 * PRD_NS_PER_SEC);
	wq_clock_moved(q);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(g.rc, 0);
	CU_ASSERT_STRING_EQUAL(g.key, "timer");
	wq_done(q, g.key);
	free(g.key);
	wq_free(q);
	pthread_mutex_destroy(&lc.mu);
}

#define NKEYS 8
#define NWORKERS 4
#define NADDS 4000

typedef struct stress {
	wq *q;
	atomic_int busy[NKEYS];
	atomic_int overlap;
	atomic_int processed[NKEYS];
	atomic_int adds_done;
} stress;

static void *stress_worker(void *p)
{
	stress *s = p;
	char *k;
	while(wq_get(s->q, &k) == 0) {
		int i = atoi(k + 1);
		if(atomic_fetch_add(&s->busy[i], 1) != 0)
			atomic_fetch_add(&s->overlap, 1);
		atomic_fetch_add(&s->processed[i], 1);
		atomic_fetch_sub(&s->busy[i], 1);
		wq_done(s->q, k);
		free(k);
	}
	return NULL;
}

static void *stress_producer(void *p)
{
	stress *s = p;
	char key[16];
	int i;
	for(i = 0; i < NADDS; i++) {
		snprintf(key, sizeof(key), "k%d", i % NKEYS);
		wq_add(s->q, key);
	}
	atomic_fetch_add(&s->adds_done, 1);
	return NULL;
}

static void test_concurrent_exclusive(void)
{
	stress s;
	pthread_t w[NWORKERS], p[2];
	int i, total = 0;

	memset(&s, 0, sizeof(s));
	s.q = wq_new(NULL);
	for(i = 0; i < NWORKERS; i++)
		pthread_create(&w[i], NULL, stress_worker, &s);
	for(i = 0; i < 2; i++)
		pthread_create(&p[i], NULL, stress_producer, &s);
	for(i = 0; i < 2; i++)
		pthread_join(p[i], NULL);
	wq_shutdown(s.q);
	for(i = 0; i < NWORKERS; i++)
		pthread_join(w[i], NULL);
	CU_ASSERT_EQUAL(atomic_load(&s.overlap), 0);
	for(i = 0; i < NKEYS; i++) {
		/* Every key was processed at least once after its last add
		 * (the drain), and de-duplication kept it under the adds. */
		CU_ASSERT_TRUE(atomic_load(&s.processed[i]) >= 1);
		total += atomic_load(&s.processed[i]);
	}
	CU_ASSERT_TRUE(total <= 2 * NADDS);
	CU_ASSERT_EQUAL(wq_len(s.q), 0);
	wq_free(s.q);
}

static const test_case cases[] = {
	{ "dedup_and_order", test_dedup_and_order },
	{ "no_parallel_processing", test_no_parallel_processing },
	{ "add_after", test_add_after },
	{ "rate_limited_backoff", test_rate_limited_backoff },
	{ "rate_limited_bucket", test_rate_limited_bucket },
	{ "shutdown", test_shutdown },
	{ "fake_clock_wakes_waiter", test_fake_clock_wakes_waiter },
	{ "concurrent_exclusive", test_concurrent_exclusive },
	{ NULL, NULL }
};

TEST_MAIN("kube_workqueue", cases)

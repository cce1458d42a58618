/* The helpers every part of the controller uses (ctl_int.h): fencing
 * (pr__may_act), the leader term applied (pr__term_apply), the time of
 * the next pass (pr__wake_at), forgetting what vanished
 * (pr__forget_vanished) and the parallel runner (pr__parallel). They read
 * and write pr_ctl's fields and nothing else, and call no other file of
 * src/provreq. */
#include "provreq/ctl_int.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool pr__may_act(pr_ctl *c)
{
	if(c->fenced)
		return false;
	if(c->may_act && !c->may_act(c->may_act_ud)) {
		c->fenced = true;
		if(!c->fenced_out[0])
			str_copy(c->fenced_out, sizeof(c->fenced_out),
				 "the leader-election lease is not held with a margin (not renewed within the renew "
				 "deadline, or taken by another replica): nothing is written");
		log_warn("leadership may have been lost; this pass stops acting");
		metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", "fenced"), 1);
		return false;
	}
	return true;
}

void pr__wake_at(pr_ctl *c, int64_t t)
{
	if(c->deciding && t < c->req_wake)
		c->req_wake = t;
	if(t > c->now && t < c->next_wake)
		c->next_wake = t;
}

/* Remove the keys of `m` that are not in `live`. */
void pr__forget_vanished(hmap *m, const hmap *live)
{
	hmap_iter it;
	const char *k;
	char **drop = NULL;
	size_t n = 0, cap = 0, i;
	hmap_iter_init(&it, m);
	while(hmap_iter_next(&it, &k, NULL)) {
		if(hmap_has(live, k))
			continue;
		if(n == cap) {
			char **v = realloc(drop, (cap = cap ? cap * 2 : 16) * sizeof(*v));
			if(!v)
				break;
			drop = v;
		}
		if(!(drop[n] = str_dup(k)))
			break;
		n++;
	}
	for(i = 0; i < n; i++) {
		hmap_del(m, drop[i]);
		free(drop[i]);
	}
	free(drop);
}

typedef struct par_job {
	void (*fn)(void *ud, size_t i);
	void *ud;
	size_t n;
	pthread_mutex_t mu;
	size_t next;
} par_job;

static void *par_worker(void *ud)
{
	par_job *j = ud;
	for(;;) {
		size_t i;
		pthread_mutex_lock(&j->mu);
		i = j->next++;
		pthread_mutex_unlock(&j->mu);
		if(i >= j->n)
			return NULL;
		j->fn(j->ud, i);
	}
}

void pr__parallel(unsigned par, size_t n, void (*fn)(void *ud, size_t i), void *ud)
{
	pthread_t tid[PR_STATUS_WRITERS_MAX];
	par_job j = { fn, ud, n, PTHREAD_MUTEX_INITIALIZER, 0 };
	unsigned k, made = 0;
	if(par > PR_STATUS_WRITERS_MAX)
		par = PR_STATUS_WRITERS_MAX;
	if(par > n)
		par = (unsigned)n;
	for(k = 1; k < par; k++)
		if(pthread_create(&tid[made], NULL, par_worker, &j) == 0)
			made++;
	par_worker(&j);
	for(k = 0; k < made; k++)
		pthread_join(tid[k], NULL);
	pthread_mutex_destroy(&j.mu);
}

void pr__term_apply(pr_ctl *c, const char *key, const char *identity, int64_t transitions)
{
	uint64_t t = key && key[0] && transitions >= 0 ? (uint64_t)transitions + 1 : 0;
	if(identity && identity[0])
		snprintf(c->term, sizeof(c->term), "%s#%lld", identity, (long long)transitions);
	else
		c->term[0] = '\0';
	str_copy(c->term_id, sizeof(c->term_id), identity ? identity : "");
	if(t != c->fence_term || strcmp(c->fence_key, key && t ? key : "")) {
		hmap_free(&c->fenced_groups);
		hmap_init(&c->fenced_groups, NULL);
	}
	str_copy(c->fence_key, sizeof(c->fence_key), key && t ? key : "");
	c->fence_term = t;
}

/* Liveness (the worker's heartbeat) and readiness (named checks) behind
 * /healthz and /readyz. */
#include "ops/health.h"
#include "util/err.h"
#include "util/str.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Checks are allocated one by one and never freed before health_free, so
 * a prober may hold a pointer to one without the lock. */
typedef struct hcheck {
	char *name;
	bool is_flag;
	bool ok;          /* flags only; guarded by mu */
	char *reason;     /* flags only; guarded by mu */
	char *note;       /* flags only, shown while ok (health_set_note); guarded by mu */
	health_check_fn fn;
	void *ud;
} hcheck;

struct health {
	const clk *clock;
	int64_t stale_after_ns;
	_Atomic int64_t last_beat;
	pthread_mutex_t mu;
	hcheck **checks;
	size_t n;
	size_t cap;
};

int health_new(const clk *clock, int64_t stale_after_ns, health **out)
{
	health *h;
	*out = NULL;
	if(!clock || stale_after_ns <= 0)
		return PRD_EINVAL;
	h = calloc(1, sizeof(*h));
	if(!h)
		return PRD_ENOMEM;
	h->clock = clock;
	h->stale_after_ns = stale_after_ns;
	atomic_store(&h->last_beat, clk_mono(clock));
	pthread_mutex_init(&h->mu, NULL);
	*out = h;
	return PRD_OK;
}

void health_free(health *h)
{
	size_t i;
	if(!h)
		return;
	for(i = 0; i < h->n; i++) {
		free(h->checks[i]->name);
		free(h->checks[i]->reason);
		free(h->checks[i]->note);
		free(h->checks[i]);
	}
	free(h->checks);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

void health_beat(health *h)
{
	atomic_store(&h->last_beat, clk_mono(h->clock));
}

bool health_live(health *h, buf *reason)
{
	int64_t age = clk_mono(h->clock) - atomic_load(&h->last_beat);
	if(age <= h->stale_after_ns)
		return true;
	if(reason)
		buf_printf(reason, "worker loop has not reported for %.1fs (threshold %.1fs)",
			   (double)age / PRD_NS_PER_SEC, (double)h->stale_after_ns / PRD_NS_PER_SEC);
	return false;
}

static hcheck *find_locked(health *h, const char *name)
{
	size_t i;
	for(i = 0; i < h->n; i++)
		if(strcmp(h->checks[i]->name, name) == 0)
			return h->checks[i];
	return NULL;
}

/* Append a check (taking ownership of c on success). */
static int add(health *h, hcheck *c)
{
	int rc = PRD_OK;
	pthread_mutex_lock(&h->mu);
	if(find_locked(h, c->name)) {
		rc = PRD_EEXIST;
	} else if(h->n == h->cap) {
		size_t ncap = h->cap ? h->cap * 2 : 8;
		hcheck **nc = realloc(h->checks, ncap * sizeof(*nc));
		if(!nc)
			rc = PRD_ENOMEM;
		else {
			h->checks = nc;
			h->cap = ncap;
		}
	}
	if(rc == PRD_OK)
		h->checks[h->n++] = c;
	pthread_mutex_unlock(&h->mu);
	return rc;
}

static int add_check(health *h, const char *name, bool is_flag, bool ok, const char *reason,
		     health_check_fn fn, void *ud)
{
	int rc;
	hcheck *c;
	if(!name || !*name || (!is_flag && !fn))
		return PRD_EINVAL;
	c = calloc(1, sizeof(*c));
	if(!c)
		return PRD_ENOMEM;
	c->name = str_dup(name);
	c->reason = reason ? str_dup(reason) : NULL;
	c->is_flag = is_flag;
	c->ok = ok;
	c->fn = fn;
	c->ud = ud;
	rc = !c->name || (reason && !c->reason) ? PRD_ENOMEM : add(h, c);
	if(rc != PRD_OK) {
		free(c->name);
		free(c->reason);
		free(c);
	}
	return rc;
}

int health_add_flag(health *h, const char *name, bool ok, const char *reason)
{
	return add_check(h, name, true, ok, reason, NULL, NULL);
}

int health_add_check(health *h, const char *name, health_check_fn fn, void *ud)
{
	return add_check(h, name, false, false, NULL, fn, ud);
}

int health_set_flag(health *h, const char *name, bool ok, const char *reason)
{
	int rc = PRD_OK;
	hcheck *c;
	pthread_mutex_lock(&h->mu);
	c = find_locked(h, name);
	if(!c || !c->is_flag) {
		rc = PRD_ENOTFOUND;
	} else {
		c->ok = ok;
		if(reason) {
			char *r = str_dup(reason);
			if(r) {
				free(c->reason);
				c->reason = r;
			} else {
				rc = PRD_ENOMEM;
			}
		}
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int health_set_note(health *h, const char *name, const char *note)
{
	int rc = PRD_OK;
	hcheck *c;
	char *n = note ? str_dup(note) : NULL;
	if(note && !n)
		return PRD_ENOMEM;
	pthread_mutex_lock(&h->mu);
	c = find_locked(h, name);
	if(!c || !c->is_flag) {
		rc = PRD_ENOTFOUND;
		free(n);
	} else {
		free(c->note);
		c->note = n;
	}
	pthread_mutex_unlock(&h->mu);
	return rc;
}

void health_notes(health *h, buf *out)
{
	size_t i;
	pthread_mutex_lock(&h->mu);
	for(i = 0; i < h->n; i++)
		if(h->checks[i]->is_flag && h->checks[i]->ok && h->checks[i]->note)
			buf_printf(out, "%s: %s\n", h->checks[i]->name, h->checks[i]->note);
	pthread_mutex_unlock(&h->mu);
}

bool health_ready(health *h, buf *report)
{
	hcheck **snap;
	size_t n, i;
	bool all = true;

	pthread_mutex_lock(&h->mu);
	n = h->n;
	snap = n ? malloc(n * sizeof(*snap)) : NULL;
	if(snap)
		memcpy(snap, h->checks, n * sizeof(*snap));
	pthread_mutex_unlock(&h->mu);
	if(n && !snap) {
		if(report)
			buf_append_str(report, "health: out of memory\n");
		return false;
	}
	for(i = 0; i < n; i++) {
		hcheck *c = snap[i];
		bool ok;
		buf why;
		buf_init(&why);
		if(c->is_flag) {
			pthread_mutex_lock(&h->mu);
			ok = c->ok;
			if(!ok)
				buf_append_str(&why, c->reason ? c->reason : "not ready");
			pthread_mutex_unlock(&h->mu);
		} else {
			ok = c->fn(c->ud, &why);
		}
		if(!ok) {
			all = false;
			if(report)
				buf_printf(report, "%s: %s\n", c->name, why.len ? buf_str(&why) : "not ready");
		}
		buf_free(&why);
	}
	free(snap);
	return all;
}

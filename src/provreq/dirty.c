/* Which requests a pass decides (informer mode): only those that what
 * changed since the last pass can affect, and those whose timers are due.
 * docs/operator.md ("How a pass is driven") lists the rules; in short, a
 * request is decided when
 *
 *   - it is new to the controller, or its object changed (the request
 *     cache's journal names it);
 *   - a time it asked to be woken at while being decided has come
 *     (backoff ends, booking expiry, plan polls and deadlines, retries of
 *     failed writes, expiry, garbage collection);
 *   - its last decision left it open (neither Provisioned nor terminal)
 *     with a class that can have cloud work in flight (atomic scale-up,
 *     driver classes), or with cloud work in flight: the cloud changes
 *     without the caches saying so, so these are decided in every pass;
 *   - a Node was deleted and its last decision left it not terminal (a
 *     booked node may be gone);
 *   - a Pod that consumes it changed (fewer consumers never change a
 *     booking's outcome, so a pod that stopped consuming marks nothing);
 *   - a PodTemplate in its namespace changed;
 *   - (every request) a ResourceSlice, DeviceClass or ResourceClaimTemplate
 *     changed (DRA);
 *   - or the controller lost track: the first pass, a rebuild of the
 *     state store, a pass that was fenced or failed, a cache relisted or
 *     changed more than its journal keeps, or cfg.full_passes.
 *
 * Everything else a full pass would decide to no effect: a request
 * waiting for its backoff, a Provisioned request whose nodes and consumer
 * pods did not change before its booking expires, a terminal request
 * before its garbage collection. tests/unit/test_controller_dirty.c runs
 * both on random event sequences and compares the outcomes. */
#include "provreq/ctl_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/objects.h"
#include "util/str.h"

/* What the last decision of a request left (values of dirty.memo). */
typedef struct pr_memo {
	int64_t wake;             /* decide again from then on (INT64_MAX: never) */
	bool open_in_flight;      /* open, of a class with cloud work in flight */
	bool live;                /* not terminal */
} pr_memo;

void pr__dirty_init(pr_ctl *c)
{
	hmap_init(&c->dirty.memo, free);
	hmap_init(&c->dirty.keys, NULL);
	hmap_init(&c->dirty.tpl_ns, NULL);
}

void pr__dirty_free(pr_ctl *c)
{
	hmap_free(&c->dirty.memo);
	hmap_free(&c->dirty.keys);
	hmap_free(&c->dirty.tpl_ns);
}

static void reset(hmap *m, void (*free_value)(void *))
{
	hmap_free(m);
	hmap_init(m, free_value);
}

static void key_of(char *out, size_t n, const char *ns, const char *name)
{
	snprintf(out, n, "%s/%s", ns ? ns : "", name ? name : "");
}

/* The request a pod consumes, as "ns/name" (false: none). */
static bool pod_consumes(const kube_pod *p, char *out, size_t n)
{
	if(!p || !p->consume)
		return false;
	key_of(out, n, p->meta.ns, p->consume);
	return true;
}

/* A pod that changed marks the request it consumes now. The request it
 * consumed before (a pod deleted, or its annotation changed) is not
 * affected: fewer consumer pods never changes a booking's outcome. */
static int on_pod(void *ud, const char *ns, const char *name)
{
	pr_ctl *c = ud;
	char k[600];
	if(!pod_consumes((const kube_pod *)kube_informer_get(c->inf.pods, ns, name), k, sizeof(k)))
		return 0;
	return hmap_put(&c->dirty.keys, k, NULL) ? PRD_ENOMEM : 0;
}

static int on_node(void *ud, const char *ns, const char *name)
{
	pr_ctl *c = ud;
	if(!kube_informer_get(c->inf.nodes, ns, name))
		c->dirty.node_gone = true;
	return 0;
}

static int on_tpl(void *ud, const char *ns, const char *name)
{
	pr_ctl *c = ud;
	(void)name;
	return hmap_put(&c->dirty.tpl_ns, ns, NULL) ? PRD_ENOMEM : 0;
}

static int on_pr(void *ud, const char *ns, const char *name)
{
	pr_ctl *c = ud;
	char k[600];
	key_of(k, sizeof(k), ns, name);
	return hmap_put(&c->dirty.keys, k, NULL) ? PRD_ENOMEM : 0;
}

/* What changed since the last pass, from the caches' journals (read locks
 * held). Anything that cannot be followed marks every request. */
void pr__dirty_collect(pr_ctl *c)
{
	kube_informer *infs[4] = { c->inf.nodes, c->inf.pods, c->inf.podtemplates, c->inf.provreqs };
	kube_key_fn fns[4] = { on_node, on_pod, on_tpl, on_pr };
	uint64_t gen[4];
	bool ready = c->dirty.ready && !c->cfg.full_passes && !c->need_rebuild;
	int i;
	reset(&c->dirty.keys, NULL);
	reset(&c->dirty.tpl_ns, NULL);
	c->dirty.node_gone = false;
	for(i = 0; i < 4; i++)
		gen[i] = kube_informer_generation(infs[i]);
	for(i = 0; ready && i < 4; i++)
		if(gen[i] != c->dirty.gen[i] && kube_informer_changes(infs[i], c->dirty.gen[i], fns[i], c))
			ready = false;
	/* DRA: devices published or withdrawn, and the ResourceClaimTemplates
	 * and DeviceClasses requests may be waiting for, change rarely:
	 * any such change decides every request. Claims are like pods: their
	 * allocations change what is free, which only requests retrying
	 * (timers) need to see. */
	{
		kube_informer *dra[3] = { c->inf.resourceslices, c->inf.deviceclasses, c->inf.claimtemplates };
		for(i = 0; i < 3; i++) {
			uint64_t g = dra[i] ? kube_informer_generation(dra[i]) : 0;
			if(g != c->dirty.dra_gen[i])
				ready = false;
			c->dirty.dra_gen[i] = g;
		}
	}
	c->dirty.all = !ready;
	memcpy(c->dirty.gen, gen, sizeof(gen));
	/* Set again once this pass ran to its end (pr__dirty_done). */
	c->dirty.ready = false;
}

void pr__dirty_done(pr_ctl *c, bool complete)
{
	c->dirty.ready = complete && c->use_inf && !c->dirty.lost;
	c->dirty.lost = false;
}

bool pr__dirty_decide(pr_ctl *c, const kube_provreq *pr)
{
	char k[600];
	const pr_memo *mm;
	if(!c->use_inf || c->dirty.all)
		return true;
	key_of(k, sizeof(k), pr->meta.ns, pr->meta.name);
	mm = hmap_get(&c->dirty.memo, k);
	if(!mm || mm->wake <= c->now || hmap_has(&c->dirty.keys, k) || hmap_has(&c->dirty.tpl_ns, pr->meta.ns))
		return true;
	if(mm->open_in_flight || (mm->live && c->dirty.node_gone))
		return true;
	/* Not decided this pass: its timer must still wake the next one (the
	 * pass's wake time is gathered from the decisions it makes). */
	pr__wake_at(c, mm->wake);
	return false;
}

void pr__dirty_decided(pr_ctl *c, const kube_provreq *pr, int64_t wake, bool open_in_flight, bool live)
{
	char k[600];
	pr_memo *mm;
	if(!c->use_inf)
		return;
	key_of(k, sizeof(k), pr->meta.ns, pr->meta.name);
	mm = hmap_get(&c->dirty.memo, k);
	if(!mm) {
		mm = malloc(sizeof(*mm));
		if(!mm || hmap_put(&c->dirty.memo, k, mm)) {
			free(mm);
			c->dirty.lost = true; /* cannot remember: decide everything next time */
			return;
		}
	}
	mm->wake = wake;
	mm->open_in_flight = open_in_flight;
	mm->live = live;
}

void pr__dirty_wake(pr_ctl *c, const kube_provreq *pr, int64_t t)
{
	char k[600];
	pr_memo *mm;
	if(!c->use_inf)
		return;
	key_of(k, sizeof(k), pr->meta.ns, pr->meta.name);
	mm = hmap_get(&c->dirty.memo, k);
	if(mm && t < mm->wake)
		mm->wake = t;
}

/* Forget what vanished requests' decisions left (`live` holds the keys of
 * the requests of the pass). */
void pr__dirty_prune(pr_ctl *c, const hmap *live)
{
	pr__forget_vanished(&c->dirty.memo, live);
}

/* Quota before capacity (part of the decide stage; see classes/quota.h).
 *
 * Before a class module gets a request that is not in flight, the
 * request's pods are checked against the ResourceQuotas of its namespace,
 * counting what other requests of the namespace hold: Provisioned ones not
 * yet consumed (their pods not yet scheduled), those with a scale-up in
 * flight, and those this pass answered positively. A request the quotas
 * would not admit gets Provisioned=False/QuotaExceeded (Failed with
 * noRetry) and no class decides it: nothing is booked, no node bought.
 *
 * Reads: the namespace's ResourceQuotas (one list per namespace and pass,
 * only when a request of it is decided), the world's requests and
 * PodTemplates, the scheduled consumer pods (c->consumers).
 * Writes: the request's conditions (through the class host's
 * not_provisioned), the pass's record of what its answers hold. */
#include "provreq/ctl_int.h"
#include "classes/details.h"
#include "classes/quota.h"
#include "ops/log.h"
#include "state/state.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pods held per namespace, growing through the pass. */
typedef struct held_list {
	pr_quota_pods *v;
	size_t n, cap;
} held_list;

struct pr_quota_world {
	hmap quotas;              /* namespace → ResourceQuota items (owned), or NO_QUOTA */
	hmap noted;               /* namespace → held_list * (arena): answered this pass */
};

#define NO_QUOTA ((void *)(uintptr_t)1)

static void put_items(void *v)
{
	if(v != NO_QUOTA)
		json_object_put(v);
}

static struct pr_quota_world *qworld(pr_world *w)
{
	if(!w->quota) {
		if(!(w->quota = arena_alloc(&w->ar, sizeof(*w->quota))))
			return NULL;
		hmap_init(&w->quota->quotas, put_items);
		hmap_init(&w->quota->noted, NULL);
	}
	return w->quota;
}

void pr__quota_world_free(pr_world *w)
{
	if(!w->quota)
		return;
	hmap_free(&w->quota->quotas);
	hmap_free(&w->quota->noted);
	w->quota = NULL;
}

/* The namespace's quotas (borrowed; NULL when it has none). *ok false when
 * they could not be read. */
static const json_object *ns_quotas(pr_ctl *c, struct pr_quota_world *q, const char *ns, bool *ok)
{
	char path[400];
	json_object *list = NULL, *items;
	void *have;
	prd_err e;
	int rc;
	*ok = true;
	if((have = hmap_get(&q->quotas, ns)))
		return have == NO_QUOTA ? NULL : have;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/resourcequotas", ns);
	rc = kube_api_call(&c->api, "GET", path, NULL, NULL, &list, NULL, &e);
	if(rc == PRD_EPERM) {
		/* Without the RBAC to read them, the check cannot run: said once,
		 * and requests are decided as if there were no quotas. */
		if(!c->quota_warned)
			log_warn("ResourceQuotas cannot be read; requests are not checked against them (grant list on "
				 "resourcequotas, or turn the check off with --quota-check=false)",
				 "error", e.msg);
		c->quota_warned = true;
		hmap_put(&q->quotas, ns, NO_QUOTA);
		return NULL;
	}
	if(rc && rc != PRD_ENOTFOUND) {
		log_warn("cannot read the namespace's ResourceQuotas; the request waits", "namespace", ns, "error", e.msg);
		*ok = false;
		return NULL;
	}
	items = rc ? NULL : json_object_object_get(list, "items");
	if(items && json_object_is_type(items, json_type_array) && json_object_array_length(items) > 0) {
		json_object_get(items);
		json_object_put(list);
		if(hmap_put(&q->quotas, ns, items)) {
			json_object_put(items);
			*ok = false;
			return NULL;
		}
		return items;
	}
	json_object_put(list);
	hmap_put(&q->quotas, ns, NO_QUOTA);
	return NULL;
}

static int held_add(arena *ar, held_list *l, const sched_pod_spec *pod, const json_object *spec, int64_t count)
{
	if(count <= 0)
		return 0;
	if(l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		pr_quota_pods *v = arena_array(ar, cap, sizeof(*v));
		if(!v)
			return PRD_ENOMEM;
		if(l->n)
			memcpy(v, l->v, l->n * sizeof(*v));
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].pod = pod;
	l->v[l->n].spec = spec;
	l->v[l->n].count = count;
	l->n++;
	return 0;
}

static const json_object *tmpl_spec(pr_world *w, const kube_provreq *pr, size_t i)
{
	char key[600];
	json_object *t;
	snprintf(key, sizeof(key), "%s/%s", pr->meta.ns, pr->pod_sets[i].template_name ? pr->pod_sets[i].template_name : "");
	t = hmap_get(w->tpls, key);
	return t ? json_object_object_get(t, "spec") : NULL;
}

/* Has the request a scale-up in flight (by what its status says)? */
static bool scaling_up(const kube_provreq *pr)
{
	char *phase = pr_details_get(pr, PR_DETAIL_PHASE);
	state_phase ph;
	bool on = phase && state_phase_parse(phase, &ph) == 0 &&
		  (ph == STATE_PHASE_INCREASING || ph == STATE_PHASE_WAITING_FOR_NODES);
	free(phase);
	return on;
}

/* What other requests of the namespace hold, into l. */
static int collect_held(pr_ctl *c, pr_world *w, const kube_provreq *self, held_list *l)
{
	struct pr_quota_world *q = w->quota;
	held_list *noted = hmap_get(&q->noted, self->meta.ns);
	size_t i, k;
	for(i = 0; i < w->nprs; i++) {
		const kube_provreq *pr = w->prs[i];
		sched_podset *sets;
		int64_t left = 0;
		char miss[300], key[600];
		if(str_eq(pr->meta.uid, self->meta.uid) || !str_eq(pr->meta.ns, self->meta.ns) || pr_is_terminal(pr) ||
		   pr->meta.deleted_ns)
			continue;
		if(pr_cond_true(pr, PR_COND_PROVISIONED)) {
			/* Consumer pods already scheduled are in the quota's used. */
			snprintf(key, sizeof(key), "%s/%s", pr->meta.ns, pr->meta.name);
			left = (int64_t)(uintptr_t)hmap_get(&c->consumers, key);
		} else if(!scaling_up(pr)) {
			continue;
		}
		if(!(sets = arena_array(&w->ar, pr->npod_sets + 1, sizeof(*sets))))
			return PRD_ENOMEM;
		if(pr__resolve_podsets(w, pr, sets, miss, sizeof(miss), NULL))
			continue;
		/* `left` counts scheduled pods: taken from the podSets in order. */
		for(k = 0; k < pr->npod_sets; k++) {
			int64_t n = sets[k].count, gone = left < n ? left : n;
			left -= gone;
			if(held_add(&w->ar, l, sets[k].pod, tmpl_spec(w, pr, k), n - gone))
				return PRD_ENOMEM;
		}
	}
	for(i = 0; noted && i < noted->n; i++)
		if(held_add(&w->ar, l, noted->v[i].pod, noted->v[i].spec, noted->v[i].count))
			return PRD_ENOMEM;
	return 0;
}

bool pr__quota_gate(pr_class_ctx *x, const pr_class_host *h, const pr_class_req *req)
{
	pr_ctl *c = x->c;
	pr_world *w = x->w;
	const kube_provreq *pr = x->pr;
	struct pr_quota_world *q;
	const json_object *quotas;
	pr_quota_pods *ask;
	held_list held = { NULL, 0, 0 };
	char msg[1024];
	bool ok;
	size_t i;
	int rc;
	if(!c->cfg.quota_check || !req->sets || !(q = qworld(w)))
		return false;
	quotas = ns_quotas(c, q, pr->meta.ns, &ok);
	if(!ok) {
		pr__wake_at(c, c->now + 10 * PRD_NS_PER_SEC);
		return true;
	}
	if(!quotas)
		return false;
	if(!(ask = arena_array(&w->ar, req->nsets + 1, sizeof(*ask))))
		return false;
	for(i = 0; i < req->nsets; i++) {
		ask[i].pod = req->sets[i].pod;
		ask[i].spec = tmpl_spec(w, pr, i);
		ask[i].count = req->sets[i].count;
	}
	if(collect_held(c, w, pr, &held)) {
		pr__wake_at(c, c->now + 10 * PRD_NS_PER_SEC);
		return true;
	}
	rc = pr_quota_check(quotas, ask, req->nsets, held.v, held.n, msg, sizeof(msg));
	if(rc == 0)
		return false;
	h->not_provisioned(h->ctx, PR_R_QUOTA_EXCEEDED, msg);
	return true;
}

void pr__quota_note(pr_class_ctx *x, const pr_class_req *req)
{
	pr_world *w = x->w;
	const char *status = pr_conds_status(x->conds, PR_COND_PROVISIONED);
	const char *reason = pr_conds_reason(x->conds, PR_COND_PROVISIONED);
	struct pr_quota_world *q;
	held_list *l;
	size_t i;
	if(!x->c->cfg.quota_check || !req->sets || !status)
		return;
	if(strcmp(status, "True") && !(reason && !strcmp(reason, PR_R_SCALING_UP)))
		return;
	if(!(q = qworld(w)))
		return;
	if(!(l = hmap_get(&q->noted, x->pr->meta.ns))) {
		if(!(l = arena_alloc(&w->ar, sizeof(*l))))
			return;
		memset(l, 0, sizeof(*l));
		if(hmap_put(&q->noted, x->pr->meta.ns, l))
			return;
	}
	for(i = 0; i < req->nsets; i++)
		held_add(&w->ar, l, req->sets[i].pod, tmpl_spec(w, x->pr, i), req->sets[i].count);
}

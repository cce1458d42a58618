/* Which of a group's instances are a plan's (the plan's view), worked out once per listing, kept across passes. */
#include "classes/atomic_plan_int.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 48 bits of FNV-1a of an instance id as 8 base64url characters: a
 * thousand-instance group costs 8 kB in the API, and two ids collide with
 * a chance of one in 2^48. */
static void id_hash(const char *id, char out[HASH_CHARS + 1])
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint64_t h = 1469598103934665603ULL;
	int i;
	for(; *id; id++) {
		h ^= (unsigned char)*id;
		h *= 1099511628211ULL;
	}
	for(i = 0; i < HASH_CHARS; i++) {
		out[i] = b64[h & 63];
		h >>= 6;
	}
	out[HASH_CHARS] = '\0';
}

at_own at_own_of_group(const pr_class_group *g)
{
	const prd_cloud_driver *api = g->drv ? g->drv->api : NULL;
	uint64_t caps = api ? cloud_driver_caps(api) : 0;
	if((caps & PRD_CLOUD_CAP_OWNER_MARK) && api->increase && cloud_instance_has_origin(api))
		return AT_OWN_MARK;
	if((caps & PRD_CLOUD_CAP_CREATION_TIME) && cloud_instance_has_origin(api))
		return AT_OWN_TIME;
	return AT_OWN_DIFF;
}

at_own at_own_of(const state_intent *in)
{
	const char *k = in->known_before ? in->known_before : "";
	if(!strncmp(k, KNOWN_PREFIX_MARK, PREFIX_LEN))
		return AT_OWN_MARK;
	if(!strncmp(k, KNOWN_PREFIX_TIME, PREFIX_LEN))
		return AT_OWN_TIME;
	return AT_OWN_DIFF;
}

/* The group's instances as the plan's "known before" text, headed by the
 * ownership rule the group's driver allows. */
char *at_known_encode(const pr_class_group *g)
{
	buf b;
	size_t i;
	char hs[HASH_CHARS + 1];
	at_own own = at_own_of_group(g);
	buf_init(&b);
	buf_append_str(&b, own == AT_OWN_MARK ? KNOWN_PREFIX_MARK : own == AT_OWN_TIME ? KNOWN_PREFIX_TIME : KNOWN_PREFIX);
	for(i = 0; i < g->ninst; i++) {
		id_hash(g->inst[i].id, hs);
		buf_append_str(&b, hs);
	}
	return buf_detach(&b);
}

/* Parse "known before" into a set of hashes. Plans written by older
 * versions hold node names, one per line: hash those. */
static void known_decode(const char *text, hmap *set)
{
	char hs[HASH_CHARS + 1];
	const char *p;
	if(!text)
		return;
	if(!strncmp(text, KNOWN_PREFIX, PREFIX_LEN) || !strncmp(text, KNOWN_PREFIX_TIME, PREFIX_LEN) ||
	   !strncmp(text, KNOWN_PREFIX_MARK, PREFIX_LEN)) {
		for(p = text + PREFIX_LEN; strlen(p) >= HASH_CHARS; p += HASH_CHARS) {
			memcpy(hs, p, HASH_CHARS);
			hs[HASH_CHARS] = '\0';
			hmap_put(set, hs, NULL);
		}
		return;
	}
	for(p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char *name = str_ndup(p, len);
		if(name && *name) {
			id_hash(name, hs);
			hmap_put(set, hs, NULL);
		}
		free(name);
		p += len + (nl ? 1 : 0);
	}
}

static bool known_has(const hmap *set, const pr_class_inst *in)
{
	char hs[HASH_CHARS + 1];
	id_hash(in->id, hs);
	if(hmap_has(set, hs))
		return true;
	if(in->node) {
		id_hash(in->node, hs);
		return hmap_has(set, hs);
	}
	return false;
}

static bool inst_ready(const pr_class_host *h, const at_kinst *k)
{
	return k->kind == AT_MEMBER && k->errclass == PRD_CLOUD_ERRCLASS_NONE && k->node &&
	       k->state != PRD_CLOUD_INSTANCE_DELETING && h->node_state(h->ctx, k->node) == PR_NODE_READY;
}

/* Copy instance x into k (its strings); false when out of memory. */
static bool kinst_set(at_kinst *k, const pr_class_inst *x)
{
	char *node = x->node ? str_dup(x->node) : NULL, *owner = x->owner ? str_dup(x->owner) : NULL;
	if((x->node && !node) || (x->owner && !owner)) {
		free(node);
		free(owner);
		return false;
	}
	free(k->node);
	k->node = node;
	free(k->owner);
	k->owner = owner;
	k->state = x->state;
	k->errclass = x->errclass;
	return true;
}

/* When the plan began: the time in its id ("uid/ns#i"; an adopted plan's
 * row is newer than the plan), else its row's creation; never later than
 * the row (an id is whatever the status said). */
int64_t at_plan_began(const state_intent *in)
{
	int64_t t = pr_plan_began(in->plan_id);
	return t > 0 && t < in->created_ns ? t : in->created_ns;
}

/* What instance x is to the plan (AT_*), by the plan's ownership rule;
 * *members counts the plan's so far. */
static uint8_t classify(const at_kview *kv, const state_intent *in, const pr_class_inst *x, size_t *members)
{
	bool known = known_has(&kv->known_set, x);
	if(kv->own == AT_OWN_MARK) {
		if(!x->owner || strcmp(x->owner, kv->token))
			return known || x->owner ? AT_KNOWN : AT_FOREIGN;
	} else if(known) {
		return AT_KNOWN;
	} else if(kv->own == AT_OWN_TIME && x->created_ns > 0 && x->created_ns < at_plan_began(in) - AT_CLOCK_SKEW_NS) {
		/* Older than the plan under an id not seen then (a Cluster API
		 * Machine's id turns into its providerID): not the plan's. */
		return AT_FOREIGN;
	} else if(kv->own == AT_OWN_TIME && x->owner && x->owner[0]) {
		/* The driver marked it once it could prove whose it is (the
		 * clusterapi driver: docs/drivers.md, "Which Machines are a
		 * plan's"): the plan's, or another plan's. The plan's marked
		 * ones are its members before any unmarked one. */
		return strcmp(x->owner, kv->token) ? AT_KNOWN : AT_MEMBER;
	}
	/* (TIME) the unmarked new ones fill what the marked ones leave. */
	if((int64_t)(*members + kv->proven) < in->delta) {
		(*members)++;
		return AT_MEMBER;
	}
	return kv->own == AT_OWN_MARK ? AT_SURPLUS : AT_EXTRA;
}

/* Work out the kept view anew from the group's listing. NULL when out of
 * memory. */
at_kview *at__kview_build(const pr_class_host *h, const pr_class_group *g, const state_intent *in)
{
	at_kview *kv = calloc(1, sizeof(*kv));
	size_t i, members = 0;
	if(!kv)
		return NULL;
	hmap_init(&kv->known_set, NULL);
	hmap_init(&kv->by_node, NULL);
	kv->nodes_gen = h->nodes_gen;
	kv->delta = in->delta;
	kv->own = at_own_of(in);
	pr_owner_token(in->plan_id, kv->token);
	kv->known = str_dup(in->known_before ? in->known_before : "");
	kv->v = calloc(g->ninst + 1, sizeof(*kv->v));
	if(!kv->known || !kv->v) {
		at__kview_free(kv);
		return NULL;
	}
	known_decode(in->known_before, &kv->known_set);
	for(i = 0; kv->own == AT_OWN_TIME && i < g->ninst; i++)
		kv->proven += g->inst[i].owner && !strcmp(g->inst[i].owner, kv->token) &&
			      !known_has(&kv->known_set, &g->inst[i]);
	for(i = 0; i < g->ninst; i++) {
		const pr_class_inst *x = &g->inst[i];
		at_kinst *k = &kv->v[kv->n++];
		if(!(k->id = str_dup(x->id)) || !kinst_set(k, x)) {
			at__kview_free(kv);
			return NULL;
		}
		k->kind = classify(kv, in, x, &members);
		k->ready = inst_ready(h, k);
		if(k->node && hmap_put(&kv->by_node, k->node, (void *)(uintptr_t)(i + 1))) {
			at__kview_free(kv);
			return NULL;
		}
	}
	return kv;
}

static void mark_dirty(void *ud, const char *node)
{
	at_kview *kv = ud;
	uintptr_t at = (uintptr_t)hmap_get(&kv->by_node, node);
	if(at)
		kv->v[at - 1].dirty = true;
}

static bool str_same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Bring a kept view up to this pass's listing. False when it cannot be
 * (other instances, another order, an instance that became or stopped
 * being known, the node changes cannot be told): build it anew. */
static bool kview_update(const pr_class_host *h, at_kview *kv, const pr_class_group *g, const state_intent *in)
{
	size_t i;
	if(kv->delta != in->delta || strcmp(kv->known, in->known_before ? in->known_before : "") ||
	   kv->n != g->ninst || !h->nodes_changed_since)
		return false;
	for(i = 0; i < kv->n; i++)
		if(strcmp(kv->v[i].id, g->inst[i].id))
			return false;
	for(i = 0; i < kv->n; i++)
		kv->v[i].dirty = false;
	if(!h->nodes_changed_since(h->ctx, kv->nodes_gen, mark_dirty, kv))
		return false;
	for(i = 0; i < kv->n; i++) {
		const pr_class_inst *x = &g->inst[i];
		at_kinst *k = &kv->v[i];
		bool same = k->state == x->state && k->errclass == x->errclass && str_same(k->node, x->node);
		if(!str_same(k->owner, x->owner))
			return false; /* marked since: its kind may change */
		if(same && !k->dirty)
			continue;
		if(!same) {
			if(!str_same(k->node, x->node))
				return false; /* a node named: it may be known, and by_node changes */
			if(!kinst_set(k, x))
				return false;
		}
		k->ready = inst_ready(h, k);
	}
	kv->nodes_gen = h->nodes_gen;
	return true;
}

/* The view from a kept one and this pass's listing (same instances). */
static int view_from_kept(const pr_class_host *h, const at_kview *kv, const pr_class_group *g, at_view *pv)
{
	size_t i;
	memset(pv, 0, sizeof(*pv));
	pv->v = arena_array(h->ar, g->ninst + 1, sizeof(*pv->v));
	if(!pv->v)
		return PRD_ENOMEM;
	for(i = 0; i < kv->n; i++) {
		const pr_class_inst *x = &g->inst[i];
		const at_kinst *k = &kv->v[i];
		if(x->state != PRD_CLOUD_INSTANCE_DELETING)
			pv->live_all++;
		if(k->kind == AT_KNOWN)
			continue;
		if(k->kind == AT_EXTRA || k->kind == AT_FOREIGN) {
			pv->extra += k->kind == AT_EXTRA;
			pv->foreign += k->kind == AT_FOREIGN;
			continue;
		}
		if(k->kind == AT_SURPLUS) {
			if(!pv->sur && !(pv->sur = arena_array(h->ar, g->ninst + 1, sizeof(*pv->sur))))
				return PRD_ENOMEM;
			pv->sur[pv->surplus++] = x;
			continue;
		}
		pv->v[pv->n++] = x;
		if(x->state != PRD_CLOUD_INSTANCE_DELETING)
			pv->live++;
		if(x->errclass != PRD_CLOUD_ERRCLASS_NONE) {
			pv->failed++;
			if(x->errclass == PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES)
				pv->failed_oor++;
			if(!pv->fail_msg)
				pv->fail_msg = x->errmsg;
			continue;
		}
		if(x->node) {
			pv->named++;
			pv->ready += k->ready;
		}
	}
	return 0;
}

/* Which of the group's instances are the plan's: from the view kept for
 * the plan when it can be brought up to date, else worked out anew (and
 * kept). */
static int view_of(const pr_class_host *h, pr_class_group *g, const state_intent *in, at_view *pv)
{
	at_memo *m = at__memo_of(h);
	at_kview *kv = m ? hmap_get(&m->kviews, in->plan_id) : NULL;
	if(kv && kview_update(h, kv, g, in))
		return view_from_kept(h, kv, g, pv);
	if(m && kv)
		hmap_del(&m->kviews, in->plan_id);
	if(!(kv = at__kview_build(h, g, in)))
		return PRD_ENOMEM;
	if(view_from_kept(h, kv, g, pv)) {
		at__kview_free(kv);
		return PRD_ENOMEM;
	}
	if(!m || hmap_put(&m->kviews, in->plan_id, kv))
		at__kview_free(kv);
	return 0;
}

/* A view worked out this pass, and what it was worked out from. */
typedef struct at_view_memo {
	const pr_class_group *g;
	unsigned list_seq;
	int64_t delta;
	const char *known;      /* the intent's known_before (arena copy) */
	at_view view;
} at_view_memo;

static bool view_memo_fits(const at_view_memo *vm, const pr_class_group *g, const state_intent *in)
{
	return vm->g == g && vm->list_seq == g->list_seq && vm->delta == in->delta &&
	       !strcmp(vm->known, in->known_before ? in->known_before : "");
}

/* h->verify: a view kept (for the pass, or across passes) against one
 * worked out anew from the listing and the node table. */
static void verify_view(const pr_class_host *h, const pr_class_group *g, const state_intent *in, const at_view *pv)
{
	at_kview *kv = at__kview_build(h, g, in);
	at_view fresh;
	if(kv && view_from_kept(h, kv, g, &fresh) == 0 &&
	   (fresh.n != pv->n || fresh.live != pv->live || fresh.named != pv->named || fresh.ready != pv->ready ||
	    fresh.failed != pv->failed || fresh.failed_oor != pv->failed_oor || fresh.extra != pv->extra ||
	    fresh.surplus != pv->surplus || fresh.foreign != pv->foreign || fresh.live_all != pv->live_all)) {
		log_warn("a plan's view kept from earlier differs from the group's listing", "plan", in->plan_id);
		h->count(h->ctx, PR_STAT_KEPT_MISMATCH);
	}
	at__kview_free(kv);
}

/* The pass asks for a plan's view several times (the pass hook, progress,
 * success): worked out once per listing of the group. */
int at_view_of(const pr_class_host *h, pr_class_group *g, const state_intent *in, at_view *pv)
{
	at_pass *p = at__pass_of(h);
	at_view_memo *vm = p ? hmap_get(&p->views, in->plan_id) : NULL;
	int rc;
	if(vm && view_memo_fits(vm, g, in)) {
		*pv = vm->view;
	} else {
		if((rc = view_of(h, g, in, pv)))
			return rc;
		if(p && (vm || (vm = arena_alloc(h->ar, sizeof(*vm)))) &&
		   (vm->known = arena_strdup(h->ar, in->known_before ? in->known_before : ""))) {
			vm->g = g;
			vm->list_seq = g->list_seq;
			vm->delta = in->delta;
			vm->view = *pv;
			if(hmap_put(&p->views, in->plan_id, vm))
				hmap_del(&p->views, in->plan_id);
		}
	}
	if(h->verify)
		verify_view(h, g, in, pv);
	return 0;
}

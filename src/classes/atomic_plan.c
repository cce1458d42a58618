/* The atomic class's plans as the cloud and the API see them: which
 * instances are a plan's, the plan in the request's status (and adopting it
 * from there), and the steps of a rollback. See atomic.c for the life of a
 * plan. */
#include "classes/atomic_int.h"
#include "classes/nap.h"
#include "classes/details.h"
#include "classes/plan_seal.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The "known before" text begins with how the plan tells its instances
 * from the rest of the group (at_own), so a plan keeps its rule whatever
 * driver version later reads it: */
#define KNOWN_PREFIX "h1:"      /* AT_OWN_DIFF: new since the plan began */
#define KNOWN_PREFIX_TIME "t1:" /* AT_OWN_TIME: created after the plan began */
#define KNOWN_PREFIX_MARK "m1:" /* AT_OWN_MARK: carries the plan's owner token */
#define PREFIX_LEN 3
#define HASH_CHARS 8


void at_plan_base(const char *id, char *out, size_t len)
{
	const char *hash = strrchr(id, '#');
	size_t n = hash ? (size_t)(hash - id) : strlen(id);
	snprintf(out, len, "%.*s", (int)n, id);
}

/* ---- the open intents of a pass ---------------------------------------- */

/* One reading of the store's open intents. */
typedef struct at_list {
	struct at_list *next;
	state_intent *v;
	size_t n;
} at_list;

/* The module's kept slot (pr_class_host.kept): `cur` is what the store
 * held at intent version `version`, kept across passes while that version
 * does not move; NULL once the module wrote an intent. A reading replaced
 * stays in `retired` until a later pass starts (pr_class_host.pass_data
 * tells a new pass), since callers of the pass that replaced it may still
 * be walking it. */
typedef struct at_memo {
	at_list *cur;
	uint64_t version;
	at_list *retired;
	hmap progress_at;  /* plan id -> when its progress detail last changed (int64_t *) */
	hmap taken_at;     /* plan id -> when its ready nodes were first found taken (int64_t *) */
	hmap kviews;       /* plan id -> at_kview (see view_of) */
	int64_t swept_at;  /* when at_sweep_late last looked */
	hmap refused_at;   /* request uid -> when a plan record in its status was last refused (int64_t *) */
} at_memo;

static void lists_free(at_list *l)
{
	at_list *next;
	for(; l; l = next) {
		next = l->next;
		state_intent_list_free(l->v, l->n);
		free(l);
	}
}

static void memo_retire(at_memo *m)
{
	if(!m || !m->cur)
		return;
	m->cur->next = m->retired;
	m->retired = m->cur;
	m->cur = NULL;
}

void at_kept_free(void *p)
{
	at_memo *m = p;
	if(!m)
		return;
	memo_retire(m);
	lists_free(m->retired);
	hmap_free(&m->progress_at);
	hmap_free(&m->taken_at);
	hmap_free(&m->kviews);
	hmap_free(&m->refused_at);
	free(m);
}

/* The module's pass slot (pr_class_host.pass_data): what one pass works
 * out and may ask for again. */
typedef struct at_pass {
	hmap views; /* plan id -> at_view_memo (arena) */
	hmap nap;   /* group id -> a group a plan creates (arena; at_find_group) */
	bool version_seen; /* the store's intent version was compared this pass */
} at_pass;

static void pass_free(void *p)
{
	hmap_free(&((at_pass *)p)->views);
	hmap_free(&((at_pass *)p)->nap);
}

/* The pass's slot, made on its first call in a pass; that call also
 * releases the readings retired in earlier passes (nothing of those passes
 * is walked now). NULL when out of memory. */
static at_pass *pass_of(const pr_class_host *h)
{
	at_pass *p;
	if(!h->pass_data)
		return NULL;
	if(*h->pass_data)
		return *h->pass_data;
	if(!(p = arena_alloc(h->ar, sizeof(*p))))
		return NULL;
	hmap_init(&p->views, NULL);
	hmap_init(&p->nap, NULL);
	p->version_seen = false;
	if(arena_defer(h->ar, pass_free, p))
		return NULL;
	if(h->kept && *h->kept) {
		at_memo *m = *h->kept;
		lists_free(m->retired);
		m->retired = NULL;
	}
	*h->pass_data = p;
	return p;
}

pr_class_group *at_find_group(const pr_class_host *h, const char *id)
{
	size_t i;
	at_pass *p;
	pr_class_group *g;
	for(i = 0; i < h->ngroups; i++)
		if(!strcmp(h->groups[i].id, id))
			return &h->groups[i];
	/* A group a plan creates (node auto-provisioning) that the cloud
	 * does not list yet: the same object for the whole pass. */
	p = pass_of(h);
	if(p && (g = hmap_get(&p->nap, id)))
		return g;
	g = nap_pending_group(h, id);
	if(g && p)
		hmap_put(&p->nap, g->id, g);
	return g;
}

static void kview_free(void *p);

static at_memo *memo_of(const pr_class_host *h)
{
	if(!h->kept)
		return NULL;
	pass_of(h);
	if(!*h->kept && (*h->kept = calloc(1, sizeof(at_memo)))) {
		hmap_init(&((at_memo *)*h->kept)->progress_at, free);
		hmap_init(&((at_memo *)*h->kept)->taken_at, free);
		hmap_init(&((at_memo *)*h->kept)->kviews, kview_free);
		hmap_init(&((at_memo *)*h->kept)->refused_at, free);
	}
	return *h->kept;
}

bool at_progress_due(const pr_class_host *h, const char *plan_id)
{
	at_memo *m = memo_of(h);
	const int64_t *at = m ? hmap_get(&m->progress_at, plan_id) : NULL;
	return !at || h->now >= *at + AT_PROGRESS_EVERY_NS || h->now < *at;
}

void at_progress_noted(const pr_class_host *h, const char *plan_id)
{
	at_memo *m = memo_of(h);
	int64_t *at = m ? hmap_get(&m->progress_at, plan_id) : NULL;
	if(!m)
		return;
	if(!at && (!(at = malloc(sizeof(*at))) || hmap_put(&m->progress_at, plan_id, at))) {
		free(at);
		return;
	}
	*at = h->now;
}

int64_t at_taken_since(const pr_class_host *h, const char *plan_id)
{
	at_memo *m = memo_of(h);
	int64_t *at = m ? hmap_get(&m->taken_at, plan_id) : NULL;
	if(!m)
		return h->now;
	if(!at) {
		if(!(at = malloc(sizeof(*at))) || hmap_put(&m->taken_at, plan_id, at)) {
			free(at);
			return h->now;
		}
		*at = h->now;
	}
	return *at;
}

/* Drop the keys of `m` (plan ids) that no intent in `open` has. */
static void forget_closed(hmap *m, const state_intent *open, size_t n)
{
	hmap_iter it;
	const char *id;
	void *v;
	char **gone = NULL;
	size_t ngone = 0, i, k;
	if(!hmap_len(m) || !(gone = calloc(hmap_len(m), sizeof(*gone))))
		return;
	hmap_iter_init(&it, m);
	while(hmap_iter_next(&it, &id, &v)) {
		for(k = 0; k < n && strcmp(open[k].plan_id, id); k++)
			;
		if(k == n)
			gone[ngone++] = str_dup(id);
	}
	for(i = 0; i < ngone; i++) {
		if(gone[i])
			hmap_del(m, gone[i]);
		free(gone[i]);
	}
	free(gone);
}

void at_kept_forget(const pr_class_host *h, const state_intent *open, size_t n)
{
	at_memo *m = memo_of(h);
	if(!m)
		return;
	forget_closed(&m->progress_at, open, n);
	forget_closed(&m->taken_at, open, n);
	forget_closed(&m->kviews, open, n);
}

static bool intent_same(const state_intent *a, const state_intent *b)
{
	size_t i;
	if(strcmp(a->plan_id, b->plan_id) || strcmp(a->request_uid, b->request_uid) ||
	   strcmp(a->node_group, b->node_group) || a->delta != b->delta || a->target_before != b->target_before ||
	   a->phase != b->phase || a->deadline_ns != b->deadline_ns || !str_eq(a->last_error, b->last_error) ||
	   !str_eq(a->known_before, b->known_before) || a->n_nodes != b->n_nodes)
		return false;
	for(i = 0; i < a->n_nodes; i++)
		if(strcmp(a->nodes[i], b->nodes[i]))
			return false;
	return true;
}

/* h->verify: the reading kept against the store read anew. */
static void verify_memo(const pr_class_host *h, const at_list *l)
{
	state_intent *v = NULL;
	size_t n = 0, i;
	bool same;
	if(state_intent_list_open(h->db, &v, &n, NULL))
		return;
	same = n == l->n;
	for(i = 0; same && i < n; i++)
		same = intent_same(&v[i], &l->v[i]);
	state_intent_list_free(v, n);
	if(!same) {
		log_warn("the open scale-up plans kept for the pass differ from the state store");
		h->count(h->ctx, PR_STAT_KEPT_MISMATCH);
	}
}

int at_open_intents(const pr_class_host *h, const state_intent **out, size_t *n)
{
	at_memo *m = memo_of(h);
	at_pass *p = pass_of(h);
	at_list *l;
	int rc;
	*out = NULL;
	*n = 0;
	if(!h->db || !m)
		return PRD_ENOMEM;
	/* Written by someone else (another connection)? Asked once a pass:
	 * the module's own writes retire the reading themselves. */
	if(m->cur && (!p || !p->version_seen) && m->version != state_intent_version(h->db))
		memo_retire(m);
	if(p)
		p->version_seen = true;
	if(m->cur && h->verify)
		verify_memo(h, m->cur);
	if(!m->cur) {
		/* (The version before the reading: a commit during it moves it.) */
		uint64_t version = state_intent_version(h->db);
		if(!(l = calloc(1, sizeof(*l))))
			return PRD_ENOMEM;
		if((rc = state_intent_list_open(h->db, &l->v, &l->n, NULL))) {
			free(l);
			return rc;
		}
		m->cur = l;
		m->version = version;
	}
	*out = m->cur->v;
	*n = m->cur->n;
	return 0;
}

static void written(const pr_class_host *h)
{
	memo_retire(memo_of(h));
}

int at_intent_begin(const pr_class_host *h, const state_intent *in, prd_err *err)
{
	int rc = state_intent_begin(h->db, in, err);
	written(h);
	return rc;
}

int at_intent_advance(const pr_class_host *h, const char *plan_id, state_phase to, const char *error, prd_err *err)
{
	int rc = state_intent_advance(h->db, plan_id, to, error, err);
	written(h);
	return rc;
}

int at_intent_close(const pr_class_host *h, const char *plan_id, state_phase final_phase, const char *error,
		    prd_err *err)
{
	int rc = state_intent_close(h->db, plan_id, final_phase, error, err);
	written(h);
	return rc;
}

int at_intent_set_known(const pr_class_host *h, const char *plan_id, const char *names, prd_err *err)
{
	int rc = state_intent_set_known(h->db, plan_id, names, err);
	written(h);
	return rc;
}

int at_intent_add_nodes(const pr_class_host *h, const char *plan_id, const char *const *node_names, size_t n,
			prd_err *err)
{
	int rc = state_intent_add_nodes(h->db, plan_id, node_names, n, err);
	written(h);
	return rc;
}

bool at_plan_exists(const pr_class_host *h, const char *uid)
{
	const state_intent *open;
	size_t n, i;
	if(at_open_intents(h, &open, &n))
		return false;
	for(i = 0; i < n; i++)
		if(!strcmp(open[i].request_uid, uid))
			return true;
	return false;
}

bool at_plan_id_open(const pr_class_host *h, const char *any_id, bool *open_out)
{
	const state_intent *open;
	char base[300], b[300];
	size_t n, i;
	*open_out = false;
	if(at_open_intents(h, &open, &n))
		return false;
	at_plan_base(any_id, base, sizeof(base));
	for(i = 0; i < n && !*open_out; i++) {
		at_plan_base(open[i].plan_id, b, sizeof(b));
		*open_out = !strcmp(b, base);
	}
	return true;
}

/* A copy of an intent without its node list. */
static int intent_copy(state_intent *dst, const state_intent *src)
{
	*dst = *src;
	dst->nodes = NULL;
	dst->n_nodes = 0;
	dst->plan_id = str_dup(src->plan_id);
	dst->request_uid = str_dup(src->request_uid);
	dst->node_group = str_dup(src->node_group);
	dst->last_error = src->last_error ? str_dup(src->last_error) : NULL;
	dst->known_before = src->known_before ? str_dup(src->known_before) : NULL;
	dst->term = src->term ? str_dup(src->term) : NULL;
	if(!dst->plan_id || !dst->request_uid || !dst->node_group || (src->last_error && !dst->last_error) ||
	   (src->known_before && !dst->known_before) || (src->term && !dst->term)) {
		state_intent_clear(dst);
		return PRD_ENOMEM;
	}
	return 0;
}

bool at_plan_open(const pr_class_host *h, const char *uid, at_plan *out)
{
	const state_intent *open;
	size_t n = 0, i, mine = 0;
	memset(out, 0, sizeof(*out));
	if(at_open_intents(h, &open, &n))
		return false;
	for(i = 0; i < n; i++)
		mine += !strcmp(open[i].request_uid, uid);
	if(!mine || !(out->v = calloc(mine + 1, sizeof(*out->v))))
		return false;
	for(i = 0; i < n; i++) {
		if(strcmp(open[i].request_uid, uid))
			continue;
		if(intent_copy(&out->v[out->n], &open[i])) {
			at_plan_free(out);
			return false;
		}
		out->n++;
	}
	return true;
}

bool at_plan_all(const pr_class_host *h, const char *any_id, at_plan *out)
{
	char base[300], id[340];
	size_t i;
	memset(out, 0, sizeof(*out));
	at_plan_base(any_id, base, sizeof(base));
	out->v = calloc(AT_MAX_GROUPS + 1, sizeof(*out->v));
	if(!out->v || !h->db)
		return false;
	for(i = 0; i < AT_MAX_GROUPS; i++) {
		snprintf(id, sizeof(id), "%s#%zu", base, i);
		if(state_intent_get(h->db, id, &out->v[out->n], NULL))
			break;
		out->n++;
	}
	if(!out->n && state_intent_get(h->db, any_id, &out->v[0], NULL) == 0)
		out->n = 1; /* a plan of an older version: one intent, no '#' */
	return out->n > 0;
}

void at_plan_free(at_plan *p)
{
	size_t i;
	for(i = 0; i < p->n; i++)
		state_intent_clear(&p->v[i]);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

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

/* What a plan's view was worked out from, kept across passes (in the
 * module's kept slot, by plan id): the group's instances as listed then,
 * which of them are the plan's, and whether each one's Node was Ready as
 * of node generation `nodes_gen`. A later pass whose listing names the same
 * instances in the same order looks again only at the instances that
 * changed and at those whose Node changed since (h->nodes_changed_since),
 * instead of asking the node table about every instance. */
enum {
	AT_KNOWN,   /* in the group before the plan began (or another plan's) */
	AT_MEMBER,  /* the plan's, up to its delta */
	AT_EXTRA,   /* (DIFF, TIME) new beyond the plan's size: not the plan's */
	AT_SURPLUS, /* (MARK) the plan's token beyond its delta: a repeated call's, to delete */
	AT_FOREIGN  /* (MARK, TIME) appeared since the plan began, not the plan's */
};

typedef struct at_kinst {
	char *id, *node;
	char *owner;    /* the owner token the cloud reports, or NULL */
	int32_t state, errclass;
	uint8_t kind;   /* AT_KNOWN, AT_MEMBER, AT_EXTRA */
	bool ready;     /* a member whose Node was Ready */
	bool dirty;     /* (during an update) its Node changed */
} at_kinst;

typedef struct at_kview {
	uint64_t nodes_gen;
	int64_t delta;
	at_own own;
	char token[AT_OWNER_MAX];
	char *known;    /* the intent's known_before */
	hmap known_set; /* decoded */
	size_t proven;  /* (TIME) instances the driver marked with the plan's token */
	at_kinst *v;
	size_t n;
	hmap by_node;   /* node name -> index + 1 */
} at_kview;

static void kview_free(void *p)
{
	at_kview *kv = p;
	size_t i;
	if(!kv)
		return;
	for(i = 0; i < kv->n; i++) {
		free(kv->v[i].id);
		free(kv->v[i].node);
		free(kv->v[i].owner);
	}
	free(kv->v);
	free(kv->known);
	hmap_free(&kv->known_set);
	hmap_free(&kv->by_node);
	free(kv);
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
static at_kview *kview_build(const pr_class_host *h, const pr_class_group *g, const state_intent *in)
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
		kview_free(kv);
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
			kview_free(kv);
			return NULL;
		}
		k->kind = classify(kv, in, x, &members);
		k->ready = inst_ready(h, k);
		if(k->node && hmap_put(&kv->by_node, k->node, (void *)(uintptr_t)(i + 1))) {
			kview_free(kv);
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
	at_memo *m = memo_of(h);
	at_kview *kv = m ? hmap_get(&m->kviews, in->plan_id) : NULL;
	if(kv && kview_update(h, kv, g, in))
		return view_from_kept(h, kv, g, pv);
	if(m && kv)
		hmap_del(&m->kviews, in->plan_id);
	if(!(kv = kview_build(h, g, in)))
		return PRD_ENOMEM;
	if(view_from_kept(h, kv, g, pv)) {
		kview_free(kv);
		return PRD_ENOMEM;
	}
	if(!m || hmap_put(&m->kviews, in->plan_id, kv))
		kview_free(kv);
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
	at_kview *kv = kview_build(h, g, in);
	at_view fresh;
	if(kv && view_from_kept(h, kv, g, &fresh) == 0 &&
	   (fresh.n != pv->n || fresh.live != pv->live || fresh.named != pv->named || fresh.ready != pv->ready ||
	    fresh.failed != pv->failed || fresh.failed_oor != pv->failed_oor || fresh.extra != pv->extra ||
	    fresh.surplus != pv->surplus || fresh.foreign != pv->foreign || fresh.live_all != pv->live_all)) {
		log_warn("a plan's view kept from earlier differs from the group's listing", "plan", in->plan_id);
		h->count(h->ctx, PR_STAT_KEPT_MISMATCH);
	}
	kview_free(kv);
}

/* The pass asks for a plan's view several times (the pass hook, progress,
 * success): worked out once per listing of the group. */
int at_view_of(const pr_class_host *h, pr_class_group *g, const state_intent *in, at_view *pv)
{
	at_pass *p = pass_of(h);
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

/* ---- calls that landed after their plan ended -------------------------- */

/* The intent id an owner token names (pr_owner_token reversed: the first
 * '.' was the '/', the last '-' the '#'). False when it is not a token of
 * provreqd's. */
static bool token_intent(const char *token, char *out, size_t len)
{
	const char *dot = strchr(token, '.'), *dash = strrchr(token, '-');
	size_t n = strlen(token), i;
	if(!dot || !dash || dash < dot || n >= len)
		return false;
	for(i = 0; i <= n; i++)
		out[i] = token + i == dot ? '/' : token + i == dash ? '#' : token[i];
	return true;
}

/* Did this store's own rollback end the intent (not a closure that only
 * says this replica's call did nothing, which another replica's plan of
 * the same id may have completed)? */
static bool rolled_back_here(const state_intent *in)
{
	static const char *const no_effect[] = {
		"interrupted", "the group's target moved", "another group of the plan", "the plan could not be written",
		"not recorded", "ended by another replica", NULL
	};
	size_t i;
	for(i = 0; no_effect[i]; i++)
		if(in->last_error && !strncmp(in->last_error, no_effect[i], strlen(no_effect[i])))
			return false;
	return true;
}

/* Delete the listed instances of g whose owner token names an intent this
 * store closed as rolled back at least `grace` ago: a call of that plan
 * landed after the plan ended (a stalled replica's late call that no
 * conditional could stop, an answer lost to a timeout). */
static void sweep_group(const pr_class_host *h, pr_class_group *g, int64_t grace)
{
	const char **ids = arena_array(h->ar, g->ninst + 1, sizeof(*ids));
	size_t i, nd = 0;
	hmap seen; /* intent id -> (void *)1 late, (void *)2 not */
	hmap_init(&seen, NULL);
	for(i = 0; ids && i < g->ninst; i++) {
		const pr_class_inst *x = &g->inst[i];
		char id[AT_OWNER_MAX + 4];
		void *v;
		state_intent in;
		if(!x->owner || x->state == PRD_CLOUD_INSTANCE_DELETING || !token_intent(x->owner, id, sizeof(id)))
			continue;
		if(!(v = hmap_get(&seen, id))) {
			v = (void *)2;
			if(state_intent_get(h->db, id, &in, NULL) == 0) {
				if(in.phase == STATE_PHASE_ROLLED_BACK && in.updated_ns < h->now - grace &&
				   rolled_back_here(&in))
					v = (void *)1;
				state_intent_clear(&in);
			}
			hmap_put(&seen, id, v);
		}
		if(v == (void *)1)
			ids[nd++] = x->id;
	}
	hmap_free(&seen);
	if(nd && h->may_act(h->ctx) && pr_group_deletes_ids(g)) {
		prd_cloud_error de;
		memset(&de, 0, sizeof(de));
		metrics_counter_add(M_PLAN_CONFLICTS, METRICS_L(g->id, "late_call"), (double)nd);
		log_warn("deleting instances of scale-up plans that had already ended (a late call)", "group", g->id,
			 "instances", LOGI(nd), "result",
			 pr_group_delete(g, ids, nd, &de) ? de.message : "ok");
		g->target_stale = true;
	}
}

void at_sweep_late(const pr_class_host *h, int64_t every, int64_t grace)
{
	at_memo *m = memo_of(h);
	size_t i;
	if(!h->db || !m || h->now - m->swept_at < every)
		return;
	m->swept_at = h->now;
	for(i = 0; i < h->ngroups; i++) {
		pr_class_group *g = &h->groups[i];
		if(at_own_of_group(g) == AT_OWN_MARK && pr_group_list(g, NULL) == 0)
			sweep_group(h, g, grace);
	}
}

/* ---- asking the cloud --------------------------------------------------- */

int at_increase(pr_class_group *g, const state_intent *in, int32_t delta, int32_t expected, prd_cloud_error *de)
{
	const prd_cloud_driver *api = g->drv->api;
	int rc;
	memset(de, 0, sizeof(*de));
	/* A group the plan creates first (node auto-provisioning). */
	if(g->nap_new && (rc = nap_create(g, de)))
		return rc;
	if(CLOUD_DRIVER_HAS(api, increase) && api->increase) {
		char token[AT_OWNER_MAX];
		prd_cloud_increase rq;
		memset(&rq, 0, sizeof(rq));
		pr_owner_token(in->plan_id, token);
		rq.struct_size = sizeof(rq);
		rq.group_id = g->id;
		rq.delta = delta;
		rq.atomic = api->atomic_increase_size != NULL;
		rq.expected_target = expected;
		rq.owner = token;
		rq.fence_key = g->fence_key;
		rq.fence_term = g->fence_term; /* (a 1.3 driver does not read them) */
		rc = api->increase(g->drv->state, &rq, de);
	} else {
		rc = api->atomic_increase_size ? api->atomic_increase_size(g->drv->state, g->id, delta, de)
					       : api->increase_size(g->drv->state, g->id, delta, de);
	}
	de->message[sizeof(de->message) - 1] = '\0';
	pr_group_unlist(g);
	/* Even a failed increase may have taken effect (an answer lost to a
	 * timeout): the target must be read again. */
	g->target_stale = true;
	return rc;
}

int at_decrease(pr_class_group *g, int32_t delta, int32_t expected, prd_cloud_error *de)
{
	const prd_cloud_driver *api = g->drv->api;
	int rc;
	memset(de, 0, sizeof(*de));
	if(CLOUD_DRIVER_HAS(api, decrease) && api->decrease) {
		prd_cloud_decrease rq;
		memset(&rq, 0, sizeof(rq));
		rq.struct_size = sizeof(rq);
		rq.group_id = g->id;
		rq.delta = delta;
		rq.expected_target = expected;
		rq.fence_key = g->fence_key;
		rq.fence_term = g->fence_term;
		rc = api->decrease(g->drv->state, &rq, de);
	} else if(CLOUD_DRIVER_HAS(api, decrease_target_size_if) && api->decrease_target_size_if && expected >= 0) {
		rc = api->decrease_target_size_if(g->drv->state, g->id, delta, expected, de);
	} else {
		rc = api->decrease_target_size(g->drv->state, g->id, delta, de);
	}
	de->message[sizeof(de->message) - 1] = '\0';
	return rc;
}

/* ---- the plan in the API ----------------------------------------------- */

void at_put_details(const pr_class_host *h, const at_plan *p, state_phase phase)
{
	char base[200], ts[RFC3339_MAX];
	buf groups, deltas, before, known;
	size_t i;
	if(!p->n)
		return;
	buf_init(&groups);
	buf_init(&deltas);
	buf_init(&before);
	buf_init(&known);
	for(i = 0; i < p->n; i++) {
		const char *sep = i ? "," : "";
		buf_printf(&groups, "%s%s", sep, p->v[i].node_group);
		buf_printf(&deltas, "%s%lld", sep, (long long)p->v[i].delta);
		buf_printf(&before, "%s%lld", sep, (long long)p->v[i].target_before);
		buf_printf(&known, "%s%s", i ? "|" : "", p->v[i].known_before ? p->v[i].known_before : "");
	}
	at_plan_base(p->v[0].plan_id, base, sizeof(base));
	h->set_detail(h->ctx, PR_DETAIL_PLAN, base);
	h->set_detail(h->ctx, PR_DETAIL_GROUP, buf_str(&groups));
	h->set_detail(h->ctx, PR_DETAIL_DELTA, buf_str(&deltas));
	h->set_detail(h->ctx, PR_DETAIL_TARGET_BEFORE, buf_str(&before));
	rfc3339_format(p->v[0].deadline_ns, ts, sizeof(ts));
	h->set_detail(h->ctx, PR_DETAIL_DEADLINE, ts);
	h->set_detail(h->ctx, PR_DETAIL_PHASE, state_phase_name(phase));
	h->set_detail(h->ctx, PR_DETAIL_KNOWN, buf_str(&known));
	h->set_detail(h->ctx, PR_DETAIL_TERM, p->v[0].term && p->v[0].term[0] ? p->v[0].term : NULL);
	buf_free(&groups);
	buf_free(&deltas);
	buf_free(&before);
	buf_free(&known);
}

void at_clear_details(const pr_class_host *h, const char *phase)
{
	h->set_detail(h->ctx, PR_DETAIL_PHASE, phase);
	h->set_detail(h->ctx, PR_DETAIL_KNOWN, NULL);
	h->set_detail(h->ctx, PR_DETAIL_TARGET_BEFORE, NULL);
	h->set_detail(h->ctx, PR_DETAIL_PROGRESS, NULL);
}

/* The i-th item of a `sep`-separated list (copied into `out`). */
static bool nth(const char *list, char sep, size_t i, char *out, size_t len)
{
	const char *p = list, *end;
	for(; i > 0 && p; i--) {
		p = strchr(p, sep);
		if(p)
			p++;
	}
	if(!p)
		return false;
	end = strchr(p, sep);
	snprintf(out, len, "%.*s", (int)(end ? (size_t)(end - p) : strlen(p)), p);
	return true;
}

/* Write one adopted intent to the store. */
static int adopt_one(const pr_class_host *h, const kube_provreq *pr, const char *id, const char *group, int64_t delta,
		     int64_t before, int64_t deadline, const char *known, state_phase ph, prd_err *e)
{
	state_intent in;
	int rc;
	memset(&in, 0, sizeof(in));
	in.plan_id = (char *)id;
	in.request_uid = (char *)pr->meta.uid;
	in.node_group = (char *)group;
	in.delta = delta;
	in.target_before = before;
	in.deadline_ns = deadline;
	/* The term that carries the plan on from now: the status this term
	 * writes says who last took the plan over (at_reopen_carried_on). */
	in.term = (char *)(h->term ? h->term : "");
	rc = at_intent_begin(h, &in, e);
	if(!rc)
		rc = at_intent_set_known(h, id, known, e);
	/* planned and increasing both mean "the call may have happened":
	 * the progress step asks the cloud which. */
	if(!rc)
		rc = at_intent_advance(h, id, STATE_PHASE_INCREASING, NULL, e);
	if(!rc && ph != STATE_PHASE_INCREASING && ph != STATE_PHASE_PLANNED)
		rc = at_intent_advance(h, id, ph, NULL, e);
	return rc;
}

/* How much an ownership rule proves (a larger rank proves more). */
static int own_rank(at_own o)
{
	return o == AT_OWN_MARK ? 2 : o == AT_OWN_TIME ? 1 : 0;
}

static const char *own_words(at_own o)
{
	return o == AT_OWN_MARK ? "owner marks" : o == AT_OWN_TIME ? "creation times" : "instances new since the plan";
}

/* The ownership rule a plan's "known before" text names. */
static at_own own_of_text(const char *k)
{
	state_intent in;
	memset(&in, 0, sizeof(in));
	in.known_before = (char *)k;
	return at_own_of(&in);
}

/* The ownership rule of each group in `known` ('|'-separated) against
 * what the group's driver offers: a record whose rule proves less than
 * the cloud can (an "h1:" text, with no known instances, on a group
 * whose driver marks its instances) would let a rollback take instances
 * by "not known before" that the cloud would show are not the plan's.
 * 0, or -1 with the reason. */
static int own_matches(const pr_class_group *g, const char *known, size_t i, char *why, size_t len)
{
	size_t klen = strlen(known) + 1;
	char *kn = malloc(klen);
	at_own want = at_own_of_group(g), have;
	if(!kn)
		return snprintf(why, len, "out of memory"), -1;
	if(!nth(known, '|', i, kn, klen)) {
		free(kn);
		return snprintf(why, len, "it records no instances-before for %.200s", g->id), -1;
	}
	have = own_of_text(kn);
	free(kn);
	if(own_rank(have) < own_rank(want))
		return snprintf(why, len,
				"its ownership rule for %.200s (%s) proves less than the group's driver offers (%s)", g->id,
				own_words(have), own_words(want)),
		       -1;
	return 0;
}

/* Is the plan in the request's status one provreqd could have written?
 * Anyone allowed to write provisioningrequests/status can write these
 * fields: at_adopt checks the record's seal first, and every field is
 * checked here too (against the groups the drivers list, their sizes, and
 * the ownership rule their drivers offer) before the cloud is asked
 * anything on their strength (the records of the groups it creates are
 * taken into the store on the way: nap_adopt_specs checks them). 0, 1
 * when it cannot be told yet (the groups are not all listed), or -1 with
 * the reason in `why` and its metric label in *reason. */
static int plan_plausible(const pr_class_host *h, const kube_provreq *pr, const char *plan, const char *groups,
			  const char *deltas, const char *before, const char *known, int64_t dl, char *why, size_t len,
			  const char **reason)
{
	char group[300], num[40];
	size_t i, uidlen = strlen(pr->meta.uid);
	int64_t d, tb;
	*reason = "implausible";
	if(strncmp(plan, pr->meta.uid, uidlen) || plan[uidlen] != '/')
		return snprintf(why, len, "the plan id %.200s is not this request's", plan), -1;
	/* The groups it creates, as its status records them, into the store
	 * first: a group not created yet is then known (nap_pending_group). */
	if(!nap_adopt_specs(h, pr, plan, why, len))
		return -1;
	if(dl > h->now + h->limits->provision_timeout_ns + AT_CLOCK_SKEW_NS)
		return snprintf(why, len, "its deadline is further away than --provision-timeout allows"), -1;
	for(i = 0; nth(groups, ',', i, group, sizeof(group)); i++) {
		pr_class_group *g = at_find_group(h, group);
		if(i >= AT_MAX_GROUPS)
			return snprintf(why, len, "it names more than %d node groups", AT_MAX_GROUPS), -1;
		if(!g)
			return h->groups_complete ? (snprintf(why, len, "no driver serves its node group %.200s", group), -1)
						  : 1;
		if(!nth(deltas, ',', i, num, sizeof(num)) || str_to_int64(num, &d) || d <= 0 || d > g->max)
			return snprintf(why, len, "its size for %.200s is not within 1..%d (the group's maximum)", group,
					g->max), -1;
		if(before && nth(before, ',', i, num, sizeof(num)) && (str_to_int64(num, &tb) || tb < 0 || tb > g->max))
			return snprintf(why, len, "its starting size for %.200s is not within 0..%d", group, g->max), -1;
		if(own_matches(g, known, i, why, len)) {
			*reason = "ownership";
			return -1;
		}
	}
	if(!groups[0])
		return snprintf(why, len, "it names no node group"), -1;
	return 0;
}

/* Say that a plan record in pr's status is not believed: a Warning Event
 * on the request, a log line and provreqd_plan_records_refused_total
 * {reason}, at most once a minute per request (kept per controller; a
 * record that stays is refused every pass). */
static bool refuse_due(const pr_class_host *h, const kube_provreq *pr)
{
	at_memo *m = memo_of(h);
	int64_t *at;
	if(!m)
		return true;
	if(hmap_len(&m->refused_at) > 4096) {
		hmap_free(&m->refused_at);
		hmap_init(&m->refused_at, free);
	}
	at = hmap_get(&m->refused_at, pr->meta.uid);
	if(at && h->now >= *at && h->now < *at + 60 * AT_NS_PER_S)
		return false;
	if(!at && (!(at = malloc(sizeof(*at))) || hmap_put(&m->refused_at, pr->meta.uid, at))) {
		free(at);
		return true;
	}
	*at = h->now;
	return true;
}

static void refuse(const pr_class_host *h, const kube_provreq *pr, const char *plan, const char *reason,
		   const char *why, const char *what)
{
	char msg[700];
	if(!refuse_due(h, pr))
		return;
	snprintf(msg, sizeof(msg), "the scale-up plan in this request's status was not %s: %s", what, why);
	metrics_counter_add(M_PLAN_REFUSED, METRICS_L(reason), 1);
	log_warn("refused a scale-up plan record in a request's status", "request", pr->meta.name, "namespace",
		 pr->meta.ns, "plan", plan ? plan : "", "reason", reason, "cause", why);
	h->event_on(h->ctx, pr, "Warning", PR_R_PLAN_REFUSED, msg);
}

/* Was the plan record in pr's status written by provreqd, as it stands
 * (classes/plan_seal.h)? Anyone allowed to patch
 * provisioningrequests/status can write it, so nothing in it is acted on
 * (adopted, or allowed to move or close a local plan) unless its seal
 * verifies under the plan key. When not, and `what` is given, says so
 * (refuse). */
static bool sealed(const pr_class_host *h, const kube_provreq *pr, const char *plan, const char *what)
{
	char why[400];
	pr_seal_check c = pr_plan_seal_verify(h->plan_key, pr, why, sizeof(why));
	if(c != PR_SEAL_OK && what)
		refuse(h, pr, plan, pr_seal_check_name(c), why, what);
	return c == PR_SEAL_OK;
}

/* A request whose status names an open plan that this replica's store does
 * not know (written by the previous leader, or before a lost database):
 * adopt it, so it is finished or rolled back here, never started again.
 * Only a record provreqd sealed is adopted, and only when plan_plausible
 * finds it consistent with the cloud (its groups, sizes, deadline, and an
 * ownership rule as strong as the group's driver offers); anything else is
 * refused with a Warning Event and left alone: nothing is deleted on its
 * word. */
void at_adopt(const pr_class_host *h, const kube_provreq *pr)
{
	char *plan = pr_details_get(pr, PR_DETAIL_PLAN), *groups = pr_details_get(pr, PR_DETAIL_GROUP);
	char *deltas = pr_details_get(pr, PR_DETAIL_DELTA), *before = pr_details_get(pr, PR_DETAIL_TARGET_BEFORE);
	char *deadline = pr_details_get(pr, PR_DETAIL_DEADLINE), *phase = pr_details_get(pr, PR_DETAIL_PHASE);
	char *known = pr_details_get(pr, PR_DETAIL_KNOWN), group[300], num[40], id[400], *kn = NULL, why[400];
	const char *reason = NULL;
	state_phase ph = STATE_PHASE_INCREASING;
	int64_t dl = 0, d = 0, tb = 0;
	size_t i;
	prd_err e;
	int ok;
	if(!plan || !groups || !deltas || !deadline || !known || rfc3339_parse(deadline, &dl, NULL))
		goto out;
	if(phase && (state_phase_parse(phase, &ph) || state_phase_is_terminal(ph)))
		goto out;
	if(at_plan_exists(h, pr->meta.uid))
		goto out; /* known here already */
	if(!sealed(h, pr, plan, "adopted"))
		goto out;
	if((ok = plan_plausible(h, pr, plan, groups, deltas, before, known, dl, why, sizeof(why), &reason))) {
		if(ok < 0)
			refuse(h, pr, plan, reason, why, "adopted");
		goto out;
	}
	for(i = 0; nth(groups, ',', i, group, sizeof(group)); i++) {
		state_intent old;
		size_t klen = strlen(known) + 1;
		snprintf(id, sizeof(id), "%s#%zu", plan, i);
		if(state_intent_get(h->db, id, &old, NULL) == 0) {
			state_intent_clear(&old);
			continue; /* closed here already */
		}
		free(kn);
		kn = malloc(klen);
		if(!kn || !nth(deltas, ',', i, num, sizeof(num)) || str_to_int64(num, &d) || d <= 0 || d > INT32_MAX ||
		   !nth(known, '|', i, kn, klen))
			break;
		tb = 0;
		if(before && nth(before, ',', i, num, sizeof(num)) && (str_to_int64(num, &tb) || tb < 0))
			break;
		if(adopt_one(h, pr, id, group, d, tb, dl, kn, ph, &e)) {
			log_error("cannot adopt the scale-up plan of the previous leader", "request", pr->meta.name,
				  "plan", id, "error", e.msg);
			break;
		}
		log_info("adopted a scale-up plan recorded in the request's status", "request", pr->meta.name,
			 "namespace", pr->meta.ns, "plan", id, "group", group, "phase", state_phase_name(ph));
	}
out:
	free(kn);
	free(plan);
	free(groups);
	free(deltas);
	free(before);
	free(deadline);
	free(phase);
	free(known);
}

/* Close an open intent the API shows ended as `api_phase` (done or
 * rolled-back) by another replica: recorded locally, nothing asked of the
 * cloud. */
static void close_as_api_says(const pr_class_host *h, const state_intent *in, state_phase api_phase)
{
	prd_err e;
	if(state_intent_settle(h->db, in->plan_id, api_phase,
			       "ended by another replica (the request's status says so)", &e))
		log_warn("cannot close a local scale-up plan another replica ended", "plan", in->plan_id, "error", e.msg);
	written(h);
}

/* The request's status shows this open plan ended (done or rolled back)
 * by another writer since this term began: a former leader's status write
 * that was on its way when it stalled, landing after this replica took the
 * plan up. The API wins here too, as when a term begins
 * (at_drop_contradicted): the local rows close as it says, and nothing is
 * asked of the cloud. Else a request deleted after such an end had this
 * replica roll back the instances of a plan that had succeeded (DST mixed
 * seed 78401, (vii)). True when closed. */
bool at_ended_in_api(const pr_class_host *h, const kube_provreq *pr, const at_plan *p)
{
	char *plan, *phase, base[200];
	state_phase ph;
	bool ended = false;
	size_t i;
	if(!p->n || !h->db || !(plan = pr_details_get(pr, PR_DETAIL_PLAN)))
		return false;
	phase = pr_details_get(pr, PR_DETAIL_PHASE);
	at_plan_base(p->v[0].plan_id, base, sizeof(base));
	/* (A record provreqd did not seal says nothing: closing the rows as
	 * rolled back would have the late-call sweep delete the plan's
	 * instances.) */
	if(!strcmp(plan, base) && phase && state_phase_parse(phase, &ph) == 0 && state_phase_is_terminal(ph) &&
	   sealed(h, pr, plan, "believed")) {
		for(i = 0; i < p->n; i++)
			if(!state_phase_is_terminal(p->v[i].phase))
				close_as_api_says(h, &p->v[i], ph);
		log_warn("closing a local scale-up plan another writer ended since this term began", "plan", base,
			 "phase", phase, "request", pr->meta.name);
		ended = true;
	}
	free(plan);
	free(phase);
	return ended;
}

/* How far a plan's phase has come (open phases). */
static int phase_rank(state_phase ph)
{
	switch(ph) {
	case STATE_PHASE_PLANNED: return 0;
	case STATE_PHASE_INCREASING: return 1;
	case STATE_PHASE_WAITING_FOR_NODES: return 2;
	case STATE_PHASE_ROLLING_BACK: return 3;
	default: return 4;
	}
}

/* The status shows the plan further along than this store does (another
 * leader adopted it and went on: called the cloud, or began to roll it
 * back): the local rows follow, so this replica neither closes a plan the
 * cloud did act on as "interrupted before the call" nor takes up a plan
 * another leader had begun to undo. Planned becomes increasing (the call
 * may have happened: the progress step asks the cloud which); a plan the
 * status shows rolling back rolls back here too. (Reached only for a
 * record whose seal verified: at_drop_contradicted.) */
static void catch_up(const pr_class_host *h, const state_intent *in, state_phase api, const kube_provreq *pr)
{
	const char *why = "rolled back by another replica (the request's status says so)";
	if(phase_rank(api) <= phase_rank(in->phase) || phase_rank(api) > 3)
		return;
	if(in->phase == STATE_PHASE_PLANNED)
		at_intent_advance(h, in->plan_id, STATE_PHASE_INCREASING, NULL, NULL);
	/* (Increasing is not moved on to waiting: from increasing, the
	 * progress step asks the cloud what the calls made.) */
	if(api == STATE_PHASE_ROLLING_BACK)
		at_intent_advance(h, in->plan_id, STATE_PHASE_ROLLING_BACK, why, NULL);
	else if(in->phase != STATE_PHASE_PLANNED)
		return;
	log_warn("a local scale-up plan is behind the request's status (another leader carried it on); following it",
		 "plan", in->plan_id, "local_phase", state_phase_name(in->phase), "api_phase", state_phase_name(api),
		 "request", pr->meta.name);
}

/* The status says another leader carried a plan to success that this
 * store rolled back (its own rollback ended, its status write was lost):
 * the plan's instances are in use, and the late-call sweep, which deletes
 * instances carrying the token of a plan this store rolled back, must not
 * take them. The local rows say done, as the API does. */
static void settle_done_here(const pr_class_host *h, const kube_provreq *pr, const char *plan)
{
	char id[400];
	size_t i;
	for(i = 0; i < AT_MAX_GROUPS; i++) {
		state_intent in;
		bool rolled_back;
		snprintf(id, sizeof(id), "%s#%zu", plan, i);
		if(state_intent_get(h->db, id, &in, NULL))
			break;
		rolled_back = in.phase == STATE_PHASE_ROLLED_BACK;
		state_intent_clear(&in);
		if(rolled_back && state_intent_settle(h->db, id, STATE_PHASE_DONE, "another replica carried it to success",
						      NULL) == 0) {
			written(h);
			log_warn("another leader carried to success a scale-up plan this store had rolled back; its "
				 "instances are the plan's",
				 "plan", id, "request", pr->meta.name);
		}
	}
}

/* This store began to roll a plan back, but the status shows the plan
 * short of rolling back under another term's hand: the decision was never
 * written (a rollback deletes nothing before the status says rolling-back:
 * roll_back_all), and another leader adopted the plan from the status
 * since and carried it on - it may have asked the cloud again and made
 * the plan's instances, and another request may have booked room on
 * them. Rolling back on the old decision would delete them (DST mixed seed
 * 16491: a replica stalled inside a refused increase decided to roll back,
 * the next leader made the nodes, the first led again and deleted them
 * under a request that had booked them). The API wins: the local rows are
 * forgotten and the plan is adopted again from the status (which
 * at_adopt checks as any other). True when forgotten. (Reached only for a
 * record whose seal verified: at_drop_contradicted.) */
static bool rollback_overtaken(const pr_class_host *h, const state_intent *in, state_phase api,
			       const kube_provreq *pr)
{
	char *term, base[200], id[400];
	size_t gone = 0, i;
	bool other;
	if(in->phase != STATE_PHASE_ROLLING_BACK || phase_rank(api) >= phase_rank(STATE_PHASE_ROLLING_BACK))
		return false;
	term = pr_details_get(pr, PR_DETAIL_TERM);
	other = term && term[0] && strcmp(term, in->term ? in->term : "");
	at_plan_base(in->plan_id, base, sizeof(base));
	/* (Forgetting takes closed rows only: closed first, as the API's
	 * record proves this store's rows wrong.) */
	for(i = 0; other && i < AT_MAX_GROUPS; i++) {
		snprintf(id, sizeof(id), "%s#%zu", base, i);
		if(state_intent_settle(h->db, id, STATE_PHASE_ROLLED_BACK, "another leader carried the plan on", NULL))
			break;
	}
	if(other && state_intent_forget(h->db, base, &gone, NULL) == 0 && gone) {
		written(h);
		log_warn("another leader carried on a scale-up plan this store had begun to roll back without saying "
			 "so; adopting it again from the request's status",
			 "plan", in->plan_id, "request", pr->meta.name, "local_term", in->term ? in->term : "",
			 "api_term", term, "api_phase", state_phase_name(api));
	} else {
		other = false;
	}
	free(term);
	return other;
}

/* The reverse of at_drop_contradicted: a plan this store closed (its last
 * call refused, its rows ended while this replica was stalled or deposed)
 * that the API shows open under another term's hand: another leader
 * adopted it and carried it on (it may have made the plan's instances).
 * The API wins: the local end is forgotten and the plan adopted again,
 * never written over the other leader's record as this store's end. The
 * same term's record (this replica closed it and died before the status
 * write) is left to finish_recorded. */
static void reopen_carried_on(const pr_class_host *h, const pr_class_pass *p)
{
	size_t i;
	for(i = 0; i < p->nprs; i++) {
		const kube_provreq *pr = p->prs[i];
		char *plan = NULL, *phase = NULL, *term = NULL, id[400];
		state_intent old;
		state_phase ph;
		bool open = false;
		size_t gone = 0;
		if(!p->ours(h->ctx, pr) || !(plan = pr_details_get(pr, PR_DETAIL_PLAN)))
			continue;
		if(!sealed(h, pr, plan, NULL)) {
			free(plan);
			continue; /* (at_drop_contradicted or at_adopt says so) */
		}
		phase = pr_details_get(pr, PR_DETAIL_PHASE);
		term = pr_details_get(pr, PR_DETAIL_TERM);
		snprintf(id, sizeof(id), "%s#0", plan);
		if(phase && state_phase_parse(phase, &ph) == 0 && ph == STATE_PHASE_DONE)
			settle_done_here(h, pr, plan);
		else if(phase && state_phase_parse(phase, &ph) == 0 && !state_phase_is_terminal(ph) &&
		   at_plan_id_open(h, plan, &open) && !open && state_intent_get(h->db, id, &old, NULL) == 0) {
			if(strcmp(old.term ? old.term : "", term ? term : "") &&
			   state_intent_forget(h->db, plan, &gone, NULL) == 0 && gone) {
				written(h);
				log_warn("another leader carried on a scale-up plan this store had ended; adopting it again "
					 "from the request's status",
					 "plan", plan, "request", pr->meta.name, "local_term", old.term ? old.term : "",
					 "api_term", term ? term : "");
			}
			state_intent_clear(&old);
		}
		free(plan);
		free(phase);
		free(term);
	}
}

/* Where the API contradicts this store as a term begins, the API wins -
 * but only a plan record provreqd sealed speaks for the API: an unsealed
 * or changed record leaves the local plan to its own steps. (A request
 * gone from the API is the apiserver's word, not a status's: provreqd's
 * finalizer holds a request while its plan is open.) */
void at_drop_contradicted(const pr_class_host *h, const pr_class_pass *p)
{
	const state_intent *open = NULL;
	size_t n = 0, i, j;
	/* (Closing writes the store, which retires the list being walked;
	 * a retired list stays valid until the next pass.) */
	if(!h->db)
		return;
	reopen_carried_on(h, p);
	if(at_open_intents(h, &open, &n))
		return;
	for(i = 0; i < n; i++) {
		const state_intent *in = &open[i];
		char base[200], *plan = NULL, *phase = NULL;
		state_phase ph;
		for(j = 0; j < p->nprs && strcmp(p->prs[j]->meta.uid, in->request_uid); j++)
			;
		if(j == p->nprs) {
			/* provreqd's finalizer holds a request while its plan is
			 * open in the API: gone means whoever led meanwhile ended
			 * the plan (done or rolled back) and let it go. */
			log_warn("closing a local scale-up plan whose request is gone (another replica ended it)", "plan",
				 in->plan_id);
			close_as_api_says(h, in, STATE_PHASE_ROLLED_BACK);
			continue;
		}
		if(!(plan = pr_details_get(p->prs[j], PR_DETAIL_PLAN)))
			continue; /* no plan in the API: the plan's own steps decide */
		if(!sealed(h, p->prs[j], plan, "believed")) {
			/* A record provreqd did not seal moves no local plan:
			 * closing it (the sweep then deletes its instances) or
			 * rolling it back on a forged word would delete what
			 * the plan made. The plan's own steps decide. */
			free(plan);
			continue;
		}
		phase = pr_details_get(p->prs[j], PR_DETAIL_PHASE);
		at_plan_base(in->plan_id, base, sizeof(base));
		if(strcmp(plan, base)) {
			log_warn("dropping a local scale-up plan: the request's status names another plan", "plan",
				 in->plan_id, "api_plan", plan, "request", p->prs[j]->meta.name);
			close_as_api_says(h, in, STATE_PHASE_ROLLED_BACK);
		} else if(phase && state_phase_parse(phase, &ph) == 0 && state_phase_is_terminal(ph)) {
			log_warn("closing a local scale-up plan another replica ended", "plan", in->plan_id, "phase",
				 phase, "request", p->prs[j]->meta.name);
			close_as_api_says(h, in, ph);
		} else if(phase && state_phase_parse(phase, &ph) == 0 && !rollback_overtaken(h, in, ph, p->prs[j])) {
			catch_up(h, in, ph, p->prs[j]);
		}
		free(plan);
		free(phase);
	}
}

/* ---- rollback ---------------------------------------------------------- */

void at_close_without_effect(const pr_class_host *h, pr_class_group *g, const state_intent *in, const char *why)
{
	if(in->phase != STATE_PHASE_PLANNED)
		at_intent_advance(h, in->plan_id, STATE_PHASE_ROLLING_BACK, why, NULL);
	at_intent_close(h, in->plan_id, STATE_PHASE_ROLLED_BACK, why, NULL);
	if(g && !g->busy_elsewhere) {
		/* (Other plans may share the group: AT_OWN_MARK.) */
		const state_intent *open = NULL;
		size_t n = 0, i;
		bool others = false;
		if(at_open_intents(h, &open, &n) == 0)
			for(i = 0; i < n && !others; i++)
				others = !strcmp(open[i].node_group, g->id);
		g->busy = others;
	}
}

/* Rate limit for a message about one plan: true at most once a minute per
 * plan (a few plans remembered; the worker is single-threaded). */
bool at_say_again(const char *plan_id, int64_t now)
{
	static struct {
		uint64_t h;
		int64_t at;
	} seen[16];
	uint64_t hash = 1469598103934665603ULL;
	size_t i, oldest = 0;
	for(; plan_id && *plan_id; plan_id++)
		hash = (hash ^ (uint8_t)*plan_id) * 1099511628211ULL;
	for(i = 0; i < 16; i++) {
		if(seen[i].h == hash) {
			if(now - seen[i].at < 60 * AT_NS_PER_S)
				return false;
			seen[i].at = now;
			return true;
		}
		if(seen[i].at < seen[oldest].at)
			oldest = i;
	}
	seen[oldest].h = hash;
	seen[oldest].at = now;
	return true;
}

/* Is the rollback of `in` over? None of the plan's instances is listed,
 * and nothing the plan asked for is still to come: with owner marks or
 * creation times, the target asks for no more than what is listed (others
 * may hold it above where the plan began); else the target is back where
 * the plan found it. */
static bool rolled_back(const pr_class_group *g, const state_intent *in, const at_view *pv)
{
	/* Creation times tell only "new since the plan began": an instance
	 * another actor made since (a rollout's or a MachineHealthCheck's
	 * replacement of one the group had) looks like the plan's. Once the
	 * target is back where the plan found it, the plan's count is taken
	 * back: what is new there stands in for what was, or goes with the
	 * cloud's own reconciling (a MachineSet deletes what replicas no
	 * longer ask for), and one more delete would take the group below
	 * its size before the plan (e2e 87 rollout-rb: during the rollout's
	 * surge the rollback deleted the replacement of the group's older
	 * Machine, 1 -> 0). */
	if(at_own_of(in) == AT_OWN_TIME && g->target <= in->target_before)
		return true;
	if(pv->n)
		return false;
	switch(at_own_of(in)) {
	case AT_OWN_MARK:
		/* A cloud may list an instance only once it exists: while the
		 * target asks for more than is listed, one of them may still be
		 * the plan's (its token shows when it appears). */
		return pv->surplus == 0 && g->target <= (int64_t)pv->live_all;
	case AT_OWN_TIME:
		return g->target <= in->target_before || g->target <= (int64_t)pv->live_all;
	default:
		return g->target <= in->target_before;
	}
}

/* Lower the target by what was requested and not created, capped at the
 * plan's delta: conditional on the target just read when the driver can
 * (a stale view must not take away what someone else just asked for).
 * Returns by how much the cloud lowered it. */
static int64_t lower_target(const pr_class_host *h, pr_class_group *g, const state_intent *in, const at_view *pv)
{
	int64_t excess;
	prd_cloud_error de;
	prd_err e;
	int rc;
	if(at_own_of(in) == AT_OWN_MARK)
		return 0; /* every instance it asked for is listed: deleted below */
	excess = at_own_of(in) == AT_OWN_TIME ? (int64_t)g->target - (int64_t)pv->live_all
					      : (int64_t)g->target - in->target_before - (int64_t)pv->live;
	if(excess > in->delta)
		excess = in->delta;
	/* Never below where the plan found the group (a moment with fewer
	 * live instances - one being replaced - is not the plan's). */
	if(excess > (int64_t)g->target - in->target_before)
		excess = (int64_t)g->target - in->target_before;
	if(excess <= 0)
		return 0;
	rc = at_decrease(g, (int32_t)excess, g->target, &de);
	g->target_stale = true;
	if(rc) {
		de.message[sizeof(de.message) - 1] = '\0';
		cloud_driver_error(g->drv, "decrease target size", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
		log_warn("rollback: cannot lower the target yet; retrying", "group", g->id, "error", e.msg);
		return 0;
	}
	return excess;
}

/* How a rollback by creation time (AT_OWN_TIME) ranks an instance new
 * since the plan began: lower goes first. */
enum {
	PICK_MARKED_DOWN,  /* the driver marked it the plan's; failed, no Node, or its Node not Ready */
	PICK_MARKED_IDLE,  /* ... Ready, running no pod but the request's own */
	PICK_DOWN,         /* not told apart from another actor's; failed, no Node, not Ready */
	PICK_IDLE,         /* ... Ready and idle */
	PICK_NEVER         /* its Node runs another's pods: never deleted */
};

static int pick_rank(const pr_class_host *h, const at_kview *kv, const pr_class_inst *x)
{
	bool marked = x->owner && !strcmp(x->owner, kv->token);
	bool down = x->errclass != PRD_CLOUD_ERRCLASS_NONE || !x->node || h->node_state(h->ctx, x->node) != PR_NODE_READY;
	/* (A Node that is not Ready may still hold pods that come back with
	 * it: asked about too.) */
	if(x->node && h->node_state(h->ctx, x->node) != PR_NODE_ABSENT && (!h->node_busy || h->node_busy(h->ctx, x->node)))
		return PICK_NEVER;
	return marked ? (down ? PICK_MARKED_DOWN : PICK_MARKED_IDLE) : (down ? PICK_DOWN : PICK_IDLE);
}

/* A plan that owns by creation time cannot always tell its instances from
 * another actor's made since it began (a MachineHealthCheck's replacement
 * comes from the same MachineSet, at the same time): what is certain is
 * how many the plan added - the target above where the plan found it. So
 * `need` of the instances new since the plan began are deleted, chosen
 * safely: the ones the driver marked as the plan's first, then the failed
 * and not Ready ones, then the Ready idle ones; never one whose Node runs
 * pods other than the request's own. Fills ids (room for g->ninst) and
 * returns how many; *kept gets how many could not be chosen for that. */
static size_t pick_by_time(const pr_class_host *h, pr_class_group *g, const state_intent *in, int64_t need,
			   const char **ids, size_t *kept)
{
	at_kview *kv = kview_build(h, g, in);
	int *rank = kv ? arena_array(h->ar, kv->n + 1, sizeof(*rank)) : NULL;
	size_t i, n = 0, busy = 0;
	int r;
	*kept = 0;
	if(!rank || need <= 0) {
		kview_free(kv);
		return 0;
	}
	for(i = 0; i < kv->n; i++) {
		const pr_class_inst *x = &g->inst[i];
		uint8_t kind = kv->v[i].kind;
		rank[i] = (kind != AT_MEMBER && kind != AT_EXTRA) || x->state == PRD_CLOUD_INSTANCE_DELETING ||
				  (!x->node && !pr_group_deletes_ids(g))
			  ? -1
			  : pick_rank(h, kv, x);
		busy += rank[i] == PICK_NEVER;
	}
	for(r = PICK_MARKED_DOWN; r < PICK_NEVER; r++)
		for(i = 0; i < kv->n && (int64_t)n < need; i++)
			if(rank[i] == r)
				ids[n++] = pr_group_deletes_ids(g) ? g->inst[i].id : g->inst[i].node;
	kview_free(kv);
	if((int64_t)n < need)
		*kept = (size_t)need - n < busy ? (size_t)need - n : busy;
	return n;
}

/* The instances new since the plan began that a rollback by creation time
 * leaves live (not being deleted). */
static size_t live_since(const pr_class_host *h, pr_class_group *g, const state_intent *in)
{
	at_kview *kv = kview_build(h, g, in);
	size_t i, n = 0;
	for(i = 0; kv && i < kv->n; i++)
		n += (kv->v[i].kind == AT_MEMBER || kv->v[i].kind == AT_EXTRA) &&
		     g->inst[i].state != PRD_CLOUD_INSTANCE_DELETING;
	kview_free(kv);
	return n;
}

/* A rollback by creation time keeps `kept` instances it cannot tell from
 * another actor's because their Nodes run other pods: the plan stays
 * rolling back (the target stays above where the plan found it, as many
 * instances as that live) until they are idle or gone; said in the
 * request's progress detail, the log and an Event once a minute. */
static void say_kept(const pr_class_host *h, const pr_class_req *req, pr_class_group *g, const state_intent *in,
		     size_t kept)
{
	char msg[700];
	snprintf(msg, sizeof(msg),
		 "rolling back: %zu instance%s of %s created since the scale-up began cannot be told from another "
		 "actor's (a MachineHealthCheck's replacement) and %s pods other than this request's: kept until idle; "
		 "the group stays %zu above its size before the scale-up",
		 kept, kept == 1 ? "" : "s", g->id, kept == 1 ? "runs" : "run", kept);
	if(req && !req->terminal)
		h->set_detail(h->ctx, PR_DETAIL_PROGRESS, msg);
	if(!at_say_again(in->plan_id, h->now))
		return;
	log_warn("rollback keeps instances it cannot tell from another actor's: they run other pods", "group", g->id,
		 "plan", in->plan_id, "kept", LOGI(kept));
	if(req)
		h->event(h->ctx, "Warning", PR_R_ROLLBACK_KEPT, msg);
}

/* One step of a rollback. Closes the plan (true) only when the cloud
 * confirms (rolled_back). */
bool at_roll_back_step(const pr_class_host *h, const pr_class_req *req, pr_class_group *g, const state_intent *in)
{
	at_view pv;
	prd_cloud_error de;
	prd_err e;
	size_t i, nd = 0, kept = 0;
	int64_t lowered;
	const char **ids;
	if(!g && h->groups_complete && nap_group_recorded(h, in->node_group)) {
		/* An auto-provisioned group every driver's listing lacks: it was
		 * deleted, and a group is deleted only when empty (no instance,
		 * target 0): nothing of the plan is left. */
		at_intent_close(h, in->plan_id, STATE_PHASE_ROLLED_BACK, NULL, NULL);
		metrics_counter_add(M_SCALEUPS, METRICS_L(in->node_group, "rolled_back"), 1);
		h->count(h->ctx, PR_STAT_SCALEUP_ROLLED_BACK);
		log_warn("scale-up rolled back: its auto-provisioned group is gone (deleted only when empty)", "group",
			 in->node_group, "plan", in->plan_id, "cause", in->last_error);
		return true;
	}
	if(!g) {
		/* Said once a minute per plan, not every pass. */
		if(at_say_again(in->plan_id, h->now))
			log_error(h->groups_complete ? "rollback waits: no loaded driver serves the plan's node group"
						     : "rollback waits: the plan's node group is not listed by any driver",
				  "group", in->node_group, "plan", in->plan_id);
		h->wake_at(h->ctx, h->now + (h->groups_complete ? 60 * AT_NS_PER_S : AT_RETRY_NS));
		return false;
	}
	if(pr_group_list(g, &e) || at_view_of(h, g, in, &pv)) {
		log_warn("rollback waits: cannot list the group's instances; retrying", "group", g->id, "error", e.msg);
		h->wake_at(h->ctx, h->now + AT_RETRY_NS);
		return false;
	}
	if(pr_group_refresh_target(g, &e)) {
		log_warn("rollback waits: cannot read the group's target size; retrying", "group", g->id, "error",
			 e.msg);
		h->wake_at(h->ctx, h->now + AT_RETRY_NS);
		return false;
	}
	if(rolled_back(g, in, &pv)) {
		size_t left = at_own_of(in) == AT_OWN_TIME ? live_since(h, g, in) : 0;
		at_intent_close(h, in->plan_id, STATE_PHASE_ROLLED_BACK, NULL, NULL);
		metrics_gauge_set(M_FOREIGN_INSTANCES, METRICS_L(in->node_group), 0);
		metrics_counter_add(M_SCALEUPS, METRICS_L(in->node_group, "rolled_back"), 1);
		h->count(h->ctx, PR_STAT_SCALEUP_ROLLED_BACK);
		if(left)
			/* (Creation times: the group is back at its size before
			 * the plan; what is new since stands in for instances
			 * another actor removed meanwhile.) */
			log_warn("scale-up rolled back: the group is back at its size before the plan; instances created "
				 "since it began remain, standing in for ones another actor removed",
				 "group", g->id, "plan", in->plan_id, "remaining", LOGI(left), "cause", in->last_error);
		else
			log_warn("scale-up rolled back: the cloud shows none of its instances", "group", g->id, "plan",
				 in->plan_id, "cause", in->last_error);
		return true;
	}
	if(!h->may_act(h->ctx))
		return false;
	/* Requested but not created: lower the target first, so the cloud
	 * stops creating what the deletes below would have to chase. */
	lowered = lower_target(h, g, in, &pv);
	if(at_own_of(in) == AT_OWN_TIME) {
		/* What the plan added and is still there: as many deletes as
		 * the target stands above where the plan found it. */
		ids = arena_array(h->ar, g->ninst + 1, sizeof(*ids));
		nd = ids ? pick_by_time(h, g, in, (int64_t)g->target - lowered - in->target_before, ids, &kept) : 0;
		if(kept)
			say_kept(h, req, g, in, kept);
		goto delete;
	}
	ids = arena_array(h->ar, pv.n + pv.surplus + 1, sizeof(*ids));
	for(i = 0; ids && i < pv.surplus && pr_group_deletes_ids(g); i++)
		if(pv.sur[i]->state != PRD_CLOUD_INSTANCE_DELETING)
			ids[nd++] = pv.sur[i]->id;
	for(i = 0; ids && i < pv.n; i++) {
		if(pv.v[i]->state == PRD_CLOUD_INSTANCE_DELETING)
			continue;
		if(pr_group_deletes_ids(g))
			ids[nd++] = pv.v[i]->id;
		else if(pv.v[i]->node)
			ids[nd++] = pv.v[i]->node;
	}
delete:
	if(nd && h->may_act(h->ctx)) {
		int rc;
		memset(&de, 0, sizeof(de));
		rc = pr_group_delete(g, ids, nd, &de);
		if(rc) {
			de.message[sizeof(de.message) - 1] = '\0';
			cloud_driver_error(g->drv, "delete instances", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
			log_warn("rollback: deleting the plan's instances failed; retrying", "group", g->id, "error",
				 e.msg);
			if(req && !req->terminal) {
				char msg[900];
				snprintf(msg, sizeof(msg),
					 "removing the %zu instance%s the failed scale-up of %s added: the delete failed (%s); "
					 "retrying every %ds until the cloud confirms",
					 nd, nd == 1 ? "" : "s", g->id, e.msg, (int)(AT_RETRY_NS / AT_NS_PER_S));
				h->event(h->ctx, "Warning", "RollbackDeleteFailed", msg);
			}
		} else {
			log_info("rollback: deleting the plan's instances", "group", g->id, "plan", in->plan_id,
				 "instances", LOGI(nd));
		}
	}
	h->wake_at(h->ctx, h->now + AT_RETRY_NS);
	return false;
}


/* Decoding straight from JSON text: Nodes and Pods without a json-c tree.
 *
 * Why: on a large cluster the initial list is dominated by building and
 * freeing json-c trees of every object (a pod's tree is tens of kilobytes
 * of small allocations) only to read a few fields from each. These
 * decoders read the text once with the strict scanner of jscan.h, skip
 * what we do not use, and fill the same structs the tree decoders fill.
 *
 * The json-c decoders (decode_node.c, decode_pod.c) stay the reference:
 * anything these decoders are not certain to read the same way — any
 * error, any JSON json-c reads its own way, duplicate keys among the
 * fields we use, a type we do not expect, sizes past small limits —
 * makes them give up (KUBE_JS_BAIL, nothing kept), and kube_decode_text()
 * decodes the same bytes through json-c instead. So both paths give the
 * same object or the same error for every input; test_kube_decode_text
 * and fuzz_decode_text check that. Other kinds always take the json-c
 * path. */
#include "kube/objects.h"

#include <stdlib.h>
#include <string.h>

#include "kube/jscan.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#define BAIL KUBE_JS_BAIL
/* A field we read met twice in one object: json-c keeps the last, and
 * undoing what the first one did is not worth it for input no apiserver
 * sends. */
#define ONCE(seen, bit) \
	do { \
		if((seen) & (bit)) \
			return BAIL; \
		(seen) |= (bit); \
	} while(0)
/* More entries than this in one map, and we leave it to json-c (the
 * duplicate check here is quadratic). */
#define MAP_MAX 256

typedef struct tdc {
	kube_js j;
	kube_intern *in;
} tdc;

/* ------------------------------------------------------------ scalars */

static int intern_span(tdc *t, const kube_jstr *s, const char **out)
{
	*out = kube_intern_getn(t->in, s->s, s->len);
	return *out ? 0 : BAIL;
}

/* A string or null (absent), interned. */
static int rd_istr(tdc *t, const char **out)
{
	kube_jstr v;
	*out = NULL;
	if(kube__js_null(&t->j))
		return 0;
	if(kube__js_str(&t->j, &v))
		return BAIL;
	return intern_span(t, &v, out);
}

/* A string or null into a fixed buffer (NUL-terminated); *set says
 * whether there was a string. */
static int rd_fixed(tdc *t, char *dst, size_t cap, bool *set)
{
	kube_jstr v;
	*set = false;
	dst[0] = '\0';
	if(kube__js_null(&t->j))
		return 0;
	if(kube__js_str(&t->j, &v) || v.len >= cap)
		return BAIL;
	memcpy(dst, v.s, v.len);
	dst[v.len] = '\0';
	*set = true;
	return 0;
}

static int rd_time(tdc *t, int64_t *out)
{
	char b[64];
	bool set;
	prd_err e;
	*out = 0;
	if(rd_fixed(t, b, sizeof(b), &set))
		return BAIL;
	if(set && rfc3339_parse(b, out, &e))
		return BAIL;
	return 0;
}

static int rd_int(tdc *t, int64_t *out, bool *has)
{
	*has = false;
	if(kube__js_null(&t->j))
		return 0;
	if(kube__js_int(&t->j, out))
		return BAIL;
	*has = true;
	return 0;
}

static int rd_bool(tdc *t, bool *out)
{
	*out = false;
	if(kube__js_null(&t->j))
		return 0;
	return kube__js_bool(&t->j, out);
}

/* A quantity given as a string (json-c prints a bare number its own way,
 * so numbers go to json-c). */
static int rd_qty(tdc *t, qty *q)
{
	kube_jstr v;
	prd_err e;
	if(kube__js_str(&t->j, &v) || qty_parse_n(v.s, v.len, q, &e))
		return BAIL;
	return 0;
}

/* An object or null: 1 = null (absent), 0 = opened. */
static int open_obj(tdc *t)
{
	if(kube__js_null(&t->j))
		return 1;
	return kube__js_obj_begin(&t->j);
}

static int open_arr(tdc *t)
{
	if(kube__js_null(&t->j))
		return 1;
	return kube__js_arr_begin(&t->j);
}

/* ------------------------------------------------------- growable arrays */

/* Append one element of `size` bytes to *v (holding *n, room for *cap). */
static void *push(void *v, size_t *n, size_t *cap, size_t size, void **out)
{
	if(*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 4;
		void *nv = realloc(v, ncap * size);
		if(!nv) {
			*out = NULL;
			return v;
		}
		v = nv;
		*cap = ncap;
	}
	*out = (char *)v + (*n)++ * size;
	return v;
}

/* A copy of n elements sized exactly (NULL for none). */
static int exact(const void *v, size_t n, size_t size, void **out)
{
	*out = NULL;
	if(!n)
		return 0;
	if(n > UINT16_MAX || !(*out = malloc(n * size)))
		return BAIL;
	memcpy(*out, v, n * size);
	return 0;
}

/* ---------------------------------------------------------------- maps */

typedef bool (*keep_fn)(const kube_jstr *key);

static void kv_put_all(kube_intern *in, kube_kv *kv, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++) {
		kube_intern_put(in, kv[i].key);
		kube_intern_put(in, kv[i].value);
	}
}

/* A string→string map (keep filters keys; values of dropped keys are not
 * looked at, as in kube__kvs). */
static int rd_kvs(tdc *t, keep_fn keep, kube_kv **out, uint16_t *nout)
{
	kube_kv *v = NULL, *e;
	size_t n = 0, cap = 0, total = 0, i;
	kube_jstr k, s;
	bool more;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		const char *key, *val;
		if(++total > MAP_MAX) {
			rc = BAIL;
			break;
		}
		if(keep && !keep(&k)) {
			if((rc = kube__js_skip(&t->j)) != 0)
				break;
			continue;
		}
		if((rc = intern_span(t, &k, &key)) != 0)
			break;
		if(kube__js_str(&t->j, &s) || intern_span(t, &s, &val)) {
			kube_intern_put(t->in, key);
			rc = BAIL;
			break;
		}
		/* Interned: equal keys are the same pointer. */
		for(i = 0; i < n && v[i].key != key; i++)
			;
		e = NULL;
		if(i == n)
			v = push(v, &n, &cap, sizeof(*v), (void **)&e);
		if(!e) {
			kube_intern_put(t->in, key);
			kube_intern_put(t->in, val);
			rc = BAIL;
			break;
		}
		e->key = key;
		e->value = val;
	}
	if(!rc && (rc = exact(v, n, sizeof(*v), (void **)out)) == 0)
		*nout = (uint16_t)n;
	if(rc)
		kv_put_all(t->in, v, n);
	free(v);
	return rc;
}

/* A name→quantity map, as kube__res reads it. */
static int rd_res(tdc *t, kube_res **out, uint16_t *nout)
{
	kube_res *v = NULL, *e;
	size_t n = 0, cap = 0, i;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		const char *name;
		qty q;
		if(n >= MAP_MAX || intern_span(t, &k, &name)) {
			rc = BAIL;
			break;
		}
		for(i = 0; i < n && v[i].name != name; i++)
			;
		if(i < n || rd_qty(t, &q)) {
			kube_intern_put(t->in, name);
			rc = BAIL;
			break;
		}
		v = push(v, &n, &cap, sizeof(*v), (void **)&e);
		if(!e) {
			kube_intern_put(t->in, name);
			rc = BAIL;
			break;
		}
		e->name = name;
		e->q = q;
	}
	if(!rc && (rc = exact(v, n, sizeof(*v), (void **)out)) == 0)
		*nout = (uint16_t)n;
	if(rc)
		for(i = 0; i < n; i++)
			kube_intern_put(t->in, v[i].name);
	free(v);
	return rc;
}

/* ------------------------------------------------------------ metadata */

/* What metadata gives before it is stored in kube_meta. */
typedef struct tmeta {
	char name[256], ns[256], uid[256], rv[256];
	bool has_name, has_ns, has_uid, has_rv;
} tmeta;

enum {
	M_NAME = 1 << 0, M_NS = 1 << 1, M_UID = 1 << 2, M_RV = 1 << 3, M_CREATED = 1 << 4,
	M_DELETED = 1 << 5, M_GEN = 1 << 6, M_LABELS = 1 << 7, M_ANN = 1 << 8, M_OWNERS = 1 << 9
};

/* The identity fields common to every kind; 1 = not one of them. */
static int meta_common(tdc *t, const kube_jstr *k, kube_meta *m, tmeta *tm, unsigned *seen)
{
	bool has;
	if(KUBE_JS_IS(k, "name")) {
		ONCE(*seen, M_NAME);
		return rd_fixed(t, tm->name, sizeof(tm->name), &tm->has_name);
	}
	if(KUBE_JS_IS(k, "namespace")) {
		ONCE(*seen, M_NS);
		return rd_fixed(t, tm->ns, sizeof(tm->ns), &tm->has_ns);
	}
	if(KUBE_JS_IS(k, "uid")) {
		ONCE(*seen, M_UID);
		return rd_fixed(t, tm->uid, sizeof(tm->uid), &tm->has_uid);
	}
	if(KUBE_JS_IS(k, "resourceVersion")) {
		ONCE(*seen, M_RV);
		return rd_fixed(t, tm->rv, sizeof(tm->rv), &tm->has_rv);
	}
	if(KUBE_JS_IS(k, "creationTimestamp")) {
		ONCE(*seen, M_CREATED);
		return rd_time(t, &m->created_ns);
	}
	if(KUBE_JS_IS(k, "deletionTimestamp")) {
		ONCE(*seen, M_DELETED);
		return rd_time(t, &m->deleted_ns);
	}
	if(KUBE_JS_IS(k, "generation")) {
		ONCE(*seen, M_GEN);
		return rd_int(t, &m->generation, &has);
	}
	return 1;
}

/* Store the identity as kube__meta does: one block for name, uid, rv. */
static int meta_store(tdc *t, bool namespaced, kube_meta *m, const tmeta *tm)
{
	size_t ln, lu, lr;
	char *blk;
	if(!tm->has_name || !tm->name[0] || (namespaced && (!tm->has_ns || !tm->ns[0])))
		return BAIL;
	ln = strlen(tm->name) + 1;
	lu = strlen(tm->uid) + 1;
	lr = strlen(tm->rv) + 1;
	if(!(blk = malloc(ln + lu + lr)))
		return BAIL;
	memcpy(blk, tm->name, ln);
	memcpy(blk + ln, tm->uid, lu);
	memcpy(blk + ln + lu, tm->rv, lr);
	if(!(m->ns = kube_intern_get(t->in, namespaced ? tm->ns : ""))) {
		free(blk);
		return BAIL;
	}
	m->name = blk;
	m->uid = blk + ln;
	m->rv = blk + ln + lu;
	return 0;
}

/* ---------------------------------------------------------------- Node */

static bool keep_node_annotation(const kube_jstr *k)
{
	size_t i;
	for(i = 0; kube_node_annotation_prefixes[i]; i++) {
		size_t n = strlen(kube_node_annotation_prefixes[i]);
		if(k->len >= n && memcmp(k->s, kube_node_annotation_prefixes[i], n) == 0)
			return true;
	}
	return false;
}

static int node_meta(tdc *t, kube_node *n, tmeta *tm)
{
	unsigned seen = 0;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		rc = meta_common(t, &k, &n->meta, tm, &seen);
		if(rc < 0)
			return rc;
		if(rc == 0)
			continue;
		if(KUBE_JS_IS(&k, "labels")) {
			ONCE(seen, M_LABELS);
			rc = rd_kvs(t, NULL, &n->labels, &n->nlabels);
		} else if(KUBE_JS_IS(&k, "annotations")) {
			ONCE(seen, M_ANN);
			rc = rd_kvs(t, keep_node_annotation, &n->annotations, &n->nannotations);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	return rc;
}

static int effect_of(const kube_jstr *s, uint8_t *out)
{
	if(KUBE_JS_IS(s, "NoSchedule"))
		*out = KUBE_EFFECT_NO_SCHEDULE;
	else if(KUBE_JS_IS(s, "PreferNoSchedule"))
		*out = KUBE_EFFECT_PREFER_NO_SCHEDULE;
	else if(KUBE_JS_IS(s, "NoExecute"))
		*out = KUBE_EFFECT_NO_EXECUTE;
	else
		return BAIL;
	return 0;
}

/* One taint into *ta (strings interned; the caller puts them on error). */
static int node_taint(tdc *t, kube_taint *ta)
{
	unsigned seen = 0;
	kube_jstr k, s;
	bool more, has_effect = false;
	int rc;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "effect")) {
			ONCE(seen, 1);
			if(kube__js_str(&t->j, &s) || effect_of(&s, &ta->effect))
				return BAIL;
			has_effect = true;
		} else if(KUBE_JS_IS(&k, "key")) {
			ONCE(seen, 2);
			rc = rd_istr(t, &ta->key);
		} else if(KUBE_JS_IS(&k, "value")) {
			ONCE(seen, 4);
			rc = rd_istr(t, &ta->value);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	if(rc || !has_effect || !ta->key || !*ta->key)
		return BAIL;
	return 0;
}

static int node_taints(tdc *t, kube_node *n)
{
	kube_taint *v = NULL, *e;
	size_t cnt = 0, cap = 0, i;
	bool more;
	int rc;

	if((rc = open_arr(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_arr_next(&t->j, &more)) && more) {
		v = push(v, &cnt, &cap, sizeof(*v), (void **)&e);
		if(!e) {
			rc = BAIL;
			break;
		}
		memset(e, 0, sizeof(*e));
		if((rc = node_taint(t, e)) != 0)
			break;
	}
	if(!rc && (rc = exact(v, cnt, sizeof(*v), (void **)&n->taints)) == 0)
		n->ntaints = (uint16_t)cnt;
	if(rc)
		for(i = 0; i < cnt; i++) {
			kube_intern_put(t->in, v[i].key);
			kube_intern_put(t->in, v[i].value);
		}
	free(v);
	return rc;
}

static int node_spec(tdc *t, kube_node *n)
{
	unsigned seen = 0;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "unschedulable")) {
			ONCE(seen, 1);
			rc = rd_bool(t, &n->unschedulable);
		} else if(KUBE_JS_IS(&k, "providerID")) {
			ONCE(seen, 2);
			rc = rd_istr(t, &n->provider_id);
		} else if(KUBE_JS_IS(&k, "taints")) {
			ONCE(seen, 4);
			rc = node_taints(t, n);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	return rc;
}

/* status.conditions: the Ready condition's status (the last one wins, as
 * in the tree decoder). */
static int node_conditions(tdc *t, kube_node *n)
{
	bool more, more2;
	kube_jstr k, s;
	int rc;

	if((rc = open_arr(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_arr_next(&t->j, &more)) && more) {
		unsigned seen = 0;
		bool ready = false;
		uint8_t st = KUBE_COND_UNKNOWN;
		if((rc = kube__js_obj_begin(&t->j)) != 0)
			return rc;
		while(!(rc = kube__js_obj_next(&t->j, &k, &more2)) && more2) {
			if(KUBE_JS_IS(&k, "type") || KUBE_JS_IS(&k, "status")) {
				bool is_type = k.s[0] == 't';
				ONCE(seen, is_type ? 1u : 2u);
				if(kube__js_null(&t->j))
					continue;
				if(kube__js_str(&t->j, &s))
					return BAIL;
				if(is_type)
					ready = KUBE_JS_IS(&s, "Ready");
				else
					st = KUBE_JS_IS(&s, "True") ? KUBE_COND_TRUE
					     : KUBE_JS_IS(&s, "False") ? KUBE_COND_FALSE : KUBE_COND_UNKNOWN;
			} else if((rc = kube__js_skip(&t->j)) != 0) {
				return rc;
			}
		}
		if(rc)
			return rc;
		if(ready)
			n->ready = st;
	}
	return rc;
}

static int node_status(tdc *t, kube_node *n)
{
	unsigned seen = 0;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "allocatable")) {
			ONCE(seen, 1);
			rc = rd_res(t, &n->allocatable, &n->nallocatable);
		} else if(KUBE_JS_IS(&k, "capacity")) {
			ONCE(seen, 2);
			rc = rd_res(t, &n->capacity, &n->ncapacity);
		} else if(KUBE_JS_IS(&k, "conditions")) {
			ONCE(seen, 4);
			rc = node_conditions(t, n);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	return rc;
}

static int node_top(tdc *t, kube_node *n, tmeta *tm)
{
	unsigned seen = 0;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "metadata")) {
			ONCE(seen, 1);
			rc = node_meta(t, n, tm);
		} else if(KUBE_JS_IS(&k, "spec")) {
			ONCE(seen, 2);
			rc = node_spec(t, n);
		} else if(KUBE_JS_IS(&k, "status")) {
			ONCE(seen, 4);
			rc = node_status(t, n);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	if(rc || !(seen & 1) || kube__js_end(&t->j))
		return BAIL;
	return meta_store(t, false, &n->meta, tm);
}

static int text_node(tdc *t, kube_meta **out)
{
	kube_node *n = calloc(1, sizeof(*n));
	tmeta tm;
	if(!n)
		return BAIL;
	n->meta.kind = KUBE_KIND_NODE;
	memset(&tm, 0, sizeof(tm));
	if(node_top(t, n, &tm)) {
		kube__free_node(t->in, &n->meta);
		return BAIL;
	}
	*out = &n->meta;
	return 0;
}

/* ------------------------------------------------------------------ Pod */

/* A resource list being summed, names interned (equal names are the same
 * pointer); each entry holds one reference to its name. The arithmetic
 * repeats decode_pod.c's step for step (qty_add onto zero, then sums and
 * maxima in the same order), so formats and rounding come out the same. */
typedef struct rlist {
	struct {
		const char *name;
		qty q;
	} *v;
	size_t n, cap;
} rlist;

static void rl_free(kube_intern *in, rlist *l)
{
	size_t i;
	for(i = 0; i < l->n; i++)
		kube_intern_put(in, l->v[i].name);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* The slot of name (a new zero one takes a reference). */
static qty *rl_slot(kube_intern *in, rlist *l, const char *name)
{
	size_t i;
	for(i = 0; i < l->n; i++)
		if(l->v[i].name == name)
			return &l->v[i].q;
	if(l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 4;
		void *p = realloc(l->v, ncap * sizeof(*l->v));
		if(!p)
			return NULL;
		l->v = p;
		l->cap = ncap;
	}
	l->v[l->n].name = kube_intern_ref(in, name);
	memset(&l->v[l->n].q, 0, sizeof(qty));
	return &l->v[l->n++].q;
}

static int rl_add(kube_intern *in, rlist *l, const char *name, const qty *q)
{
	qty *s = rl_slot(in, l, name);
	return s && qty_add(s, q) == 0 ? 0 : BAIL;
}

static int rl_add_all(kube_intern *in, rlist *dst, const rlist *src)
{
	size_t i;
	for(i = 0; i < src->n; i++)
		if(rl_add(in, dst, src->v[i].name, &src->v[i].q))
			return BAIL;
	return 0;
}

static int rl_max_all(kube_intern *in, rlist *dst, const rlist *src)
{
	size_t i;
	for(i = 0; i < src->n; i++) {
		qty *s = rl_slot(in, dst, src->v[i].name);
		if(!s)
			return BAIL;
		if(qty_cmp(&src->v[i].q, s) > 0)
			*s = src->v[i].q;
	}
	return 0;
}

/* A name→quantity map read as read_requests() reads it: each value added
 * onto a zero slot; a repeated name goes to json-c. */
static int rd_rlist(tdc *t, rlist *l)
{
	kube_jstr k;
	bool more;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		const char *name;
		size_t i;
		qty q;
		if(l->n >= MAP_MAX || intern_span(t, &k, &name))
			return BAIL;
		for(i = 0; i < l->n && l->v[i].name != name; i++)
			;
		rc = i < l->n || rd_qty(t, &q) ? BAIL : rl_add(t->in, l, name, &q);
		kube_intern_put(t->in, name);
		if(rc)
			return rc;
	}
	return rc;
}

/* `resources` of a container or of the pod: only requests. */
static int rd_resources(tdc *t, rlist *req)
{
	unsigned seen = 0;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "requests")) {
			ONCE(seen, 1);
			rc = rd_rlist(t, req);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	return rc;
}

/* One container's share: requests, host ports (those with a non-zero
 * hostPort), and whether it is a sidecar (restartPolicy Always). */
typedef struct tctr {
	rlist req;
	kube_host_port *ports;
	size_t nports, pcap;
	bool sidecar;
} tctr;

static void ctr_free(kube_intern *in, tctr *c)
{
	size_t i;
	rl_free(in, &c->req);
	for(i = 0; i < c->nports; i++)
		kube_intern_put(in, c->ports[i].host_ip);
	free(c->ports);
	memset(c, 0, sizeof(*c));
}

static int rd_port(tdc *t, tctr *c)
{
	unsigned seen = 0;
	int64_t port = 0;
	bool has = false, more;
	int proto = 0, rc;
	const char *ip = NULL;
	kube_host_port *h;
	kube_jstr k, s;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	/* No early return from here on: ip may hold a reference. */
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		unsigned bit = KUBE_JS_IS(&k, "hostPort") ? 1 : KUBE_JS_IS(&k, "protocol") ? 2 : KUBE_JS_IS(&k, "hostIP") ? 4 : 0;
		if(bit & seen) {
			rc = BAIL;
			break;
		}
		seen |= bit;
		if(bit == 1) {
			rc = rd_int(t, &port, &has);
		} else if(bit == 2) {
			if(kube__js_null(&t->j))
				continue;
			if(kube__js_str(&t->j, &s))
				rc = BAIL;
			else
				proto = KUBE_JS_IS(&s, "TCP") ? 0 : KUBE_JS_IS(&s, "UDP") ? 1 : KUBE_JS_IS(&s, "SCTP") ? 2 : 3;
		} else if(bit == 4) {
			rc = rd_istr(t, &ip);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			break;
	}
	if(!rc && has && port != 0) {
		h = NULL;
		if(port > 0 && port <= 65535 && proto < 3)
			c->ports = push(c->ports, &c->nports, &c->pcap, sizeof(*h), (void **)&h);
		if(h) {
			h->host_ip = ip;
			h->port = (int32_t)port;
			h->protocol = (uint8_t)proto;
			return 0;
		}
		rc = BAIL;
	}
	kube_intern_put(t->in, ip);
	return rc;
}

static int rd_container(tdc *t, tctr *c)
{
	unsigned seen = 0;
	kube_jstr k, s;
	bool more, more2;
	int rc;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "resources")) {
			ONCE(seen, 1);
			rc = rd_resources(t, &c->req);
		} else if(KUBE_JS_IS(&k, "ports")) {
			ONCE(seen, 2);
			if((rc = open_arr(t)) > 0)
				rc = 0;
			else
				while(!rc && !(rc = kube__js_arr_next(&t->j, &more2)) && more2)
					rc = rd_port(t, c);
		} else if(KUBE_JS_IS(&k, "restartPolicy")) {
			ONCE(seen, 4);
			if(kube__js_null(&t->j))
				continue;
			if(kube__js_str(&t->j, &s))
				return BAIL;
			c->sidecar = KUBE_JS_IS(&s, "Always");
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	return rc;
}

static int rd_containers(tdc *t, tctr **v, size_t *n)
{
	size_t cap = 0;
	bool more;
	int rc;

	if((rc = open_arr(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_arr_next(&t->j, &more)) && more) {
		tctr *c;
		*v = push(*v, n, &cap, sizeof(**v), (void **)&c);
		if(!c)
			return BAIL;
		memset(c, 0, sizeof(*c));
		if((rc = rd_container(t, c)) != 0)
			return rc;
	}
	return rc;
}

/* Everything of spec that the requests and host ports are computed from;
 * spec's keys may come in any order, so they are summed once it ends. */
typedef struct tspec {
	tctr *ctrs, *inits;
	size_t nctrs, ninits;
	rlist podreq, overhead;
	bool has_podres, has_overhead;
} tspec;

static void spec_free(kube_intern *in, tspec *s)
{
	size_t i;
	for(i = 0; i < s->nctrs; i++)
		ctr_free(in, &s->ctrs[i]);
	for(i = 0; i < s->ninits; i++)
		ctr_free(in, &s->inits[i]);
	free(s->ctrs);
	free(s->inits);
	rl_free(in, &s->podreq);
	rl_free(in, &s->overhead);
}

/* Move a container's host ports to the pod's. */
static int take_ports(kube_pod *pod, size_t *pcap, tctr *c)
{
	size_t i;
	for(i = 0; i < c->nports; i++) {
		kube_host_port *h;
		size_t n = pod->nhost_ports;
		if(n == UINT16_MAX)
			return BAIL;
		pod->host_ports = push(pod->host_ports, &n, pcap, sizeof(*h), (void **)&h);
		if(!h)
			return BAIL;
		*h = c->ports[i];
		pod->nhost_ports = (uint16_t)n;
		c->ports[i].host_ip = NULL;
	}
	return 0;
}

static int sum_inits(tdc *t, kube_pod *pod, tspec *s, rlist *total, size_t *pcap)
{
	rlist side = { 0 }, initmax = { 0 }, tmp = { 0 };
	size_t i;
	int rc = 0;

	for(i = 0; i < s->ninits && !rc; i++) {
		tctr *c = &s->inits[i];
		rl_free(t->in, &tmp);
		if(c->sidecar)
			rc = rl_add_all(t->in, total, &c->req) || rl_add_all(t->in, &side, &c->req) ||
			     rl_add_all(t->in, &tmp, &side) || take_ports(pod, pcap, c) ? BAIL : 0;
		else
			rc = rl_add_all(t->in, &tmp, &c->req) || rl_add_all(t->in, &tmp, &side) ? BAIL : 0;
		if(!rc)
			rc = rl_max_all(t->in, &initmax, &tmp);
	}
	if(!rc)
		rc = rl_max_all(t->in, total, &initmax);
	rl_free(t->in, &side);
	rl_free(t->in, &initmax);
	rl_free(t->in, &tmp);
	return rc;
}

/* decode_pod.c's pod_requests() on what spec gave. */
static int pod_sum(tdc *t, kube_pod *pod, tspec *s)
{
	rlist total = { 0 };
	size_t i, pcap = 0;
	int rc = 0;

	for(i = 0; i < s->nctrs && !rc; i++)
		rc = rl_add_all(t->in, &total, &s->ctrs[i].req) || take_ports(pod, &pcap, &s->ctrs[i]) ? BAIL : 0;
	if(!rc)
		rc = sum_inits(t, pod, s, &total, &pcap);
	for(i = 0; !rc && s->has_podres && i < s->podreq.n; i++) {
		const char *n = s->podreq.v[i].name;
		qty *q;
		if(strcmp(n, "cpu") && strcmp(n, "memory") && !str_starts_with(n, "hugepages-"))
			continue;
		if(!(q = rl_slot(t->in, &total, n)))
			rc = BAIL;
		else
			*q = s->podreq.v[i].q;
	}
	for(i = 0; !rc && s->has_overhead && i < s->overhead.n; i++)
		rc = rl_add(t->in, &total, s->overhead.v[i].name, &s->overhead.v[i].q);
	if(!rc && total.n) {
		/* The entries' references move to the pod. */
		if(total.n > UINT16_MAX || !(pod->requests = malloc(total.n * sizeof(kube_res)))) {
			rc = BAIL;
		} else {
			for(i = 0; i < total.n; i++) {
				pod->requests[i].name = total.v[i].name;
				pod->requests[i].q = total.v[i].q;
			}
			pod->nrequests = (uint16_t)total.n;
			total.n = 0;
		}
	}
	rl_free(t->in, &total);
	return rc;
}

static int rd_toleration(tdc *t, kube_toleration *to)
{
	unsigned seen = 0;
	kube_jstr k, s;
	bool more;
	int rc;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "key")) {
			ONCE(seen, 1);
			if((rc = rd_istr(t, &to->key)) == 0 && to->key && !*to->key) {
				kube_intern_put(t->in, to->key);
				to->key = NULL;
			}
		} else if(KUBE_JS_IS(&k, "value")) {
			ONCE(seen, 2);
			rc = rd_istr(t, &to->value);
		} else if(KUBE_JS_IS(&k, "operator") || KUBE_JS_IS(&k, "effect")) {
			bool op = k.s[0] == 'o';
			ONCE(seen, op ? 4u : 8u);
			if(kube__js_null(&t->j))
				continue;
			if(kube__js_str(&t->j, &s))
				return BAIL;
			if(op)
				rc = !s.len || KUBE_JS_IS(&s, "Equal") ? (to->op = KUBE_TOL_EQUAL, 0)
				     : KUBE_JS_IS(&s, "Exists")      ? (to->op = KUBE_TOL_EXISTS, 0) : BAIL;
			else
				rc = s.len ? effect_of(&s, &to->effect) : 0;
		} else if(KUBE_JS_IS(&k, "tolerationSeconds")) {
			ONCE(seen, 16);
			rc = rd_int(t, &to->seconds, &to->has_seconds);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	return rc;
}

static int rd_tolerations(tdc *t, kube_pod *pod)
{
	kube_toleration *v = NULL, *e;
	size_t n = 0, cap = 0, i;
	bool more;
	int rc;

	if((rc = open_arr(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_arr_next(&t->j, &more)) && more) {
		v = push(v, &n, &cap, sizeof(*v), (void **)&e);
		if(!e) {
			rc = BAIL;
			break;
		}
		memset(e, 0, sizeof(*e));
		if((rc = rd_toleration(t, e)) != 0)
			break;
	}
	if(!rc && (rc = exact(v, n, sizeof(*v), (void **)&pod->tolerations)) == 0)
		pod->ntolerations = (uint16_t)n;
	if(rc)
		for(i = 0; i < n; i++) {
			kube_intern_put(t->in, v[i].key);
			kube_intern_put(t->in, v[i].value);
		}
	free(v);
	return rc;
}

/* Append s as json-c prints a string: '"', '\\' and '/' escaped with a
 * backslash, the control characters json-c names (\b \f \n \r \t) by
 * name and the others as \u00xx (lowercase), every other byte as is. */
static void print_str(buf *o, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, run = 0;
	buf_append_char(o, '"');
	for(i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *e = NULL;
		char u[7];
		switch(c) {
		case '"': e = "\\\""; break;
		case '\\': e = "\\\\"; break;
		case '/': e = "\\/"; break;
		case '\b': e = "\\b"; break;
		case '\f': e = "\\f"; break;
		case '\n': e = "\\n"; break;
		case '\r': e = "\\r"; break;
		case '\t': e = "\\t"; break;
		default:
			if(c >= 0x20)
				continue;
			u[0] = '\\', u[1] = 'u', u[2] = '0', u[3] = '0', u[4] = hex[c >> 4], u[5] = hex[c & 15], u[6] = '\0';
			e = u;
		}
		buf_append(o, s + run, i - run);
		buf_append_str(o, e);
		run = i + 1;
	}
	buf_append(o, s + run, n - run);
	buf_append_char(o, '"');
}

/* A number as json-c prints it: a parsed double as its text, an integer
 * from its int64 value, which is the same text for a plain integer in
 * range; "-0" and integers past int64 go to json-c. */
static int print_num(kube_js *j, buf *o)
{
	const char *start = j->p, *p, *end;
	int64_t v;
	int rc;

	if((rc = kube__js_skip(j)) != 0)
		return rc;
	end = j->p;
	for(p = start; p < end && *p != '.' && *p != 'e' && *p != 'E'; p++)
		;
	if(p == end) {
		j->p = start;
		if(kube__js_int(j, &v) || j->p != end)
			return BAIL;
	}
	buf_append(o, start, (size_t)(end - start));
	return 0;
}

/* Print the next value as json_object_to_json_string_ext(PLAIN) prints
 * json-c's tree of it. A repeated key (json-c merges them) goes to
 * json-c. */
static int reprint(kube_js *j, buf *o)
{
	kube_jstr k;
	bool more, b;
	int rc, c = kube__js_peek(j);

	if(c == '{' || c == '[') {
		size_t keys[32], klen[32], nkeys = 0, i;
		bool obj = c == '{', first = true;
		if((rc = obj ? kube__js_obj_begin(j) : kube__js_arr_begin(j)) != 0)
			return rc;
		buf_append_char(o, (char)c);
		for(;;) {
			size_t at = o->len;
			if((rc = obj ? kube__js_obj_next(j, &k, &more) : kube__js_arr_next(j, &more)) != 0)
				return rc;
			if(!more)
				break;
			if(!first)
				buf_append_char(o, ','), at++;
			first = false;
			if(obj) {
				/* Keys print canonically, so equal keys print equal:
				 * compare with the ones printed before. */
				print_str(o, k.s, k.len);
				if(nkeys == sizeof(keys) / sizeof(keys[0]) || o->failed)
					return BAIL;
				for(i = 0; i < nkeys; i++)
					if(klen[i] == o->len - at && memcmp(o->data + keys[i], o->data + at, klen[i]) == 0)
						return BAIL;
				keys[nkeys] = at;
				klen[nkeys++] = o->len - at;
				buf_append_char(o, ':');
			}
			if((rc = reprint(j, o)) != 0)
				return rc;
		}
		buf_append_char(o, obj ? '}' : ']');
		return 0;
	}
	if(c == '"') {
		if(kube__js_str(j, &k))
			return BAIL;
		print_str(o, k.s, k.len);
		return 0;
	}
	if(c == 't' || c == 'f') {
		if(kube__js_bool(j, &b))
			return BAIL;
		buf_append_str(o, b ? "true" : "false");
		return 0;
	}
	if(c == 'n') {
		if(!kube__js_null(j))
			return BAIL;
		buf_append_str(o, "null");
		return 0;
	}
	return print_num(j, o);
}

/* spec.affinity and spec.topologySpreadConstraints are kept as the text
 * json-c prints for them (what the tree decoder stores), printed here
 * without building the tree; NULL when empty. */
static int rd_raw(tdc *t, int open, char **out)
{
	buf b;

	if(kube__js_null(&t->j))
		return 0;
	if(kube__js_peek(&t->j) != open)
		return BAIL;
	buf_init(&b);
	if(reprint(&t->j, &b) || b.failed) {
		buf_free(&b);
		return BAIL;
	}
	if(b.len == 2) {
		buf_free(&b);
		return 0;
	}
	*out = buf_detach(&b);
	return *out ? 0 : BAIL;
}

enum {
	S_NODE = 1 << 0, S_SEL = 1 << 1, S_PRIO = 1 << 2, S_CTRS = 1 << 3, S_INITS = 1 << 4, S_OVH = 1 << 5,
	S_RES = 1 << 6, S_TOL = 1 << 7, S_AFF = 1 << 8, S_SPREAD = 1 << 9
};

/* One key of spec; 1 = not ours. */
static int pod_spec_key(tdc *t, kube_pod *pod, tspec *s, const kube_jstr *k, unsigned *seen)
{
	int64_t prio = 0;
	bool has;
	int rc;

	if(KUBE_JS_IS(k, "nodeName")) {
		ONCE(*seen, S_NODE);
		if((rc = rd_istr(t, &pod->node_name)) == 0 && pod->node_name && !*pod->node_name) {
			kube_intern_put(t->in, pod->node_name);
			pod->node_name = NULL;
		}
		return rc;
	}
	if(KUBE_JS_IS(k, "nodeSelector")) {
		ONCE(*seen, S_SEL);
		return rd_kvs(t, NULL, &pod->node_selector, &pod->nnode_selector);
	}
	if(KUBE_JS_IS(k, "priority")) {
		ONCE(*seen, S_PRIO);
		rc = rd_int(t, &prio, &has);
		pod->priority = (int32_t)prio;
		return rc;
	}
	if(KUBE_JS_IS(k, "containers")) {
		ONCE(*seen, S_CTRS);
		return rd_containers(t, &s->ctrs, &s->nctrs);
	}
	if(KUBE_JS_IS(k, "initContainers")) {
		ONCE(*seen, S_INITS);
		return rd_containers(t, &s->inits, &s->ninits);
	}
	if(KUBE_JS_IS(k, "overhead")) {
		ONCE(*seen, S_OVH);
		s->has_overhead = kube__js_peek(&t->j) == '{';
		return rd_rlist(t, &s->overhead);
	}
	if(KUBE_JS_IS(k, "resources")) {
		ONCE(*seen, S_RES);
		s->has_podres = kube__js_peek(&t->j) == '{';
		return rd_resources(t, &s->podreq);
	}
	if(KUBE_JS_IS(k, "tolerations")) {
		ONCE(*seen, S_TOL);
		return rd_tolerations(t, pod);
	}
	if(KUBE_JS_IS(k, "affinity")) {
		ONCE(*seen, S_AFF);
		return rd_raw(t, '{', &pod->affinity_json);
	}
	if(KUBE_JS_IS(k, "topologySpreadConstraints")) {
		ONCE(*seen, S_SPREAD);
		return rd_raw(t, '[', &pod->spread_json);
	}
	return 1;
}

static int pod_spec(tdc *t, kube_pod *pod)
{
	tspec s;
	unsigned seen = 0;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	memset(&s, 0, sizeof(s));
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		rc = pod_spec_key(t, pod, &s, &k, &seen);
		if(rc > 0)
			rc = kube__js_skip(&t->j);
		if(rc)
			break;
	}
	if(!rc)
		rc = pod_sum(t, pod, &s);
	spec_free(t->in, &s);
	return rc;
}

/* status: phase and the PodScheduled=False/Unschedulable condition. */
static int pod_cond(tdc *t, kube_pod *pod)
{
	unsigned seen = 0, hit = 0;
	kube_jstr k, s;
	bool more;
	int rc;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		unsigned bit = KUBE_JS_IS(&k, "type") ? 1 : KUBE_JS_IS(&k, "status") ? 2 : KUBE_JS_IS(&k, "reason") ? 4 : 0;
		if(!bit) {
			if((rc = kube__js_skip(&t->j)) != 0)
				return rc;
			continue;
		}
		ONCE(seen, bit);
		if(kube__js_null(&t->j))
			continue;
		if(kube__js_str(&t->j, &s))
			return BAIL;
		if((bit == 1 && KUBE_JS_IS(&s, "PodScheduled")) || (bit == 2 && KUBE_JS_IS(&s, "False")) ||
		   (bit == 4 && KUBE_JS_IS(&s, "Unschedulable")))
			hit |= bit;
	}
	if(!rc && hit == 7)
		pod->unschedulable = true;
	return rc;
}

static int pod_status(tdc *t, kube_pod *pod)
{
	unsigned seen = 0;
	kube_jstr k, s;
	bool more, more2;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "phase")) {
			ONCE(seen, 1);
			if(kube__js_null(&t->j))
				continue;
			if(kube__js_str(&t->j, &s))
				return BAIL;
			pod->phase = !s.len || KUBE_JS_IS(&s, "Pending") ? KUBE_POD_PENDING
				     : KUBE_JS_IS(&s, "Running")        ? KUBE_POD_RUNNING
				     : KUBE_JS_IS(&s, "Succeeded")      ? KUBE_POD_SUCCEEDED
				     : KUBE_JS_IS(&s, "Failed")         ? KUBE_POD_FAILED : KUBE_POD_UNKNOWN;
		} else if(KUBE_JS_IS(&k, "conditions")) {
			ONCE(seen, 2);
			if((rc = open_arr(t)) > 0)
				rc = 0;
			else
				while(!rc && !(rc = kube__js_arr_next(&t->j, &more2)) && more2)
					rc = pod_cond(t, pod);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	return rc;
}

/* The annotations a pod keeps; every value must be a string. */
static int pod_annotations(tdc *t, kube_pod *pod)
{
	static const char *const keys[4] = { KUBE_ANN_CONSUME, KUBE_ANN_CONSUME_OLD, KUBE_ANN_PR_CLASS,
					     KUBE_ANN_PR_CLASS_OLD };
	const char *got[4] = { NULL, NULL, NULL, NULL };
	size_t total = 0, i;
	kube_jstr k, s;
	bool more;
	int rc;

	if((rc = open_obj(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		for(i = 0; i < 4 && !(k.len == strlen(keys[i]) && memcmp(k.s, keys[i], k.len) == 0); i++)
			;
		if(++total > UINT16_MAX || (i < 4 && got[i]) || kube__js_str(&t->j, &s) ||
		   (i < 4 && intern_span(t, &s, &got[i]))) {
			rc = BAIL;
			break;
		}
	}
	if(rc) {
		for(i = 0; i < 4; i++)
			kube_intern_put(t->in, got[i]);
		return rc;
	}
	pod->consume = got[0] ? got[0] : got[1];
	pod->pr_class = got[2] ? got[2] : got[3];
	kube_intern_put(t->in, got[0] ? got[1] : NULL);
	kube_intern_put(t->in, got[2] ? got[3] : NULL);
	return 0;
}

/* ownerReferences: the controller reference, else the first. */
static int pod_owners(tdc *t, kube_pod *pod)
{
	bool more, more2, picked = false, found_ctl = false;
	kube_jstr k;
	int rc;

	if((rc = open_arr(t)) != 0)
		return rc > 0 ? 0 : rc;
	while(!(rc = kube__js_arr_next(&t->j, &more)) && more) {
		const char *kind = NULL, *name = NULL;
		unsigned seen = 0;
		bool ctl = false;
		if((rc = kube__js_obj_begin(&t->j)) != 0)
			return rc;
		while(!rc && !(rc = kube__js_obj_next(&t->j, &k, &more2)) && more2) {
			if(KUBE_JS_IS(&k, "controller"))
				rc = seen & 1 ? BAIL : (seen |= 1, rd_bool(t, &ctl));
			else if(KUBE_JS_IS(&k, "kind"))
				rc = seen & 2 ? BAIL : (seen |= 2, rd_istr(t, &kind));
			else if(KUBE_JS_IS(&k, "name"))
				rc = seen & 4 ? BAIL : (seen |= 4, rd_istr(t, &name));
			else
				rc = kube__js_skip(&t->j);
		}
		if(!rc && !found_ctl && (!picked || ctl)) {
			kube_intern_put(t->in, pod->owner_kind);
			kube_intern_put(t->in, pod->owner_name);
			pod->owner_kind = kind;
			pod->owner_name = name;
			kind = name = NULL;
			picked = true;
			found_ctl = ctl;
		}
		kube_intern_put(t->in, kind);
		kube_intern_put(t->in, name);
		if(rc)
			return rc;
	}
	return rc;
}

static int pod_meta(tdc *t, kube_pod *pod, tmeta *tm)
{
	unsigned seen = 0;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		rc = meta_common(t, &k, &pod->meta, tm, &seen);
		if(rc < 0)
			return rc;
		if(rc == 0)
			continue;
		if(KUBE_JS_IS(&k, "labels")) {
			ONCE(seen, M_LABELS);
			rc = rd_kvs(t, NULL, &pod->labels, &pod->nlabels);
		} else if(KUBE_JS_IS(&k, "annotations")) {
			ONCE(seen, M_ANN);
			rc = pod_annotations(t, pod);
		} else if(KUBE_JS_IS(&k, "ownerReferences")) {
			ONCE(seen, M_OWNERS);
			rc = pod_owners(t, pod);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	return rc;
}

static int pod_top(tdc *t, kube_pod *pod, tmeta *tm)
{
	unsigned seen = 0;
	kube_jstr k;
	bool more;
	int rc;

	if((rc = kube__js_obj_begin(&t->j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(&t->j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "metadata")) {
			ONCE(seen, 1);
			rc = pod_meta(t, pod, tm);
		} else if(KUBE_JS_IS(&k, "spec")) {
			ONCE(seen, 2);
			rc = pod_spec(t, pod);
		} else if(KUBE_JS_IS(&k, "status")) {
			ONCE(seen, 4);
			rc = pod_status(t, pod);
		} else {
			rc = kube__js_skip(&t->j);
		}
		if(rc)
			return rc;
	}
	if(rc || !(seen & 1) || kube__js_end(&t->j))
		return BAIL;
	return meta_store(t, true, &pod->meta, tm);
}

static int text_pod(tdc *t, kube_meta **out)
{
	kube_pod *pod = calloc(1, sizeof(*pod));
	tmeta tm;
	if(!pod)
		return BAIL;
	pod->meta.kind = KUBE_KIND_POD;
	memset(&tm, 0, sizeof(tm));
	if(pod_top(t, pod, &tm)) {
		kube__free_pod(t->in, &pod->meta);
		return BAIL;
	}
	kube__pod_share(t->in, pod);
	*out = &pod->meta;
	return 0;
}

/* ------------------------------------------------------------- entry */

int kube__decode_text_direct(kube_kind kind, const char *json, size_t len, int max_depth, kube_intern *in,
			     kube_meta **out)
{
	tdc t;
	int rc;

	*out = NULL;
	if(kind != KUBE_KIND_NODE && kind != KUBE_KIND_POD)
		return BAIL;
	kube__js_init(&t.j, json, len, max_depth);
	t.in = in;
	rc = kind == KUBE_KIND_NODE ? text_node(&t, out) : text_pod(&t, out);
	kube__js_free(&t.j);
	if(rc) {
		*out = NULL;
		return BAIL;
	}
	return 0;
}

int kube_decode_text(kube_kind kind, const char *json, size_t len, int max_depth, kube_intern *in,
		     kube_meta **out, prd_err *err)
{
	json_tokener *tok;
	json_object *obj;
	enum json_tokener_error je;
	int rc;

	if(kube__decode_text_direct(kind, json, len, max_depth, in, out) == 0)
		return PRD_OK;
	if(len > INT32_MAX)
		return prd_err_set(err, PRD_EINVAL, "%s: object of %zu bytes is too large", kube_kind_name(kind), len);
	if(!(tok = json_tokener_new_ex(max_depth)))
		return prd_err_set(err, PRD_ENOMEM, "%s: out of memory", kube_kind_name(kind));
	obj = json_tokener_parse_ex(tok, json, (int)len);
	je = json_tokener_get_error(tok);
	json_tokener_free(tok);
	if(je != json_tokener_success) {
		json_object_put(obj);
		return prd_err_set(err, PRD_EINVAL, "%s: not valid JSON: %s", kube_kind_name(kind),
				   je == json_tokener_continue ? "unexpected end of input" : json_tokener_error_desc(je));
	}
	rc = kube_decode(kind, obj, in, out, err);
	json_object_put(obj);
	return rc;
}

/* ----------------------------------------------------------- identity */

static int id_meta(kube_js *j, kube_text_id *id)
{
	unsigned seen = 0;
	kube_jstr k, v;
	bool more;
	int rc;

	if((rc = kube__js_obj_begin(j)) != 0)
		return rc;
	while(!(rc = kube__js_obj_next(j, &k, &more)) && more) {
		char *dst = NULL;
		unsigned bit = 0;
		if(KUBE_JS_IS(&k, "name"))
			dst = id->name, bit = 1;
		else if(KUBE_JS_IS(&k, "namespace"))
			dst = id->ns, bit = 2;
		else if(KUBE_JS_IS(&k, "resourceVersion"))
			dst = id->rv, bit = 4;
		if(!dst) {
			if((rc = kube__js_skip(j)) != 0)
				return rc;
			continue;
		}
		ONCE(seen, bit);
		if(kube__js_str(j, &v) || v.len >= sizeof(id->name) || memchr(v.s, '\0', v.len))
			return BAIL;
		memcpy(dst, v.s, v.len);
		dst[v.len] = '\0';
	}
	return rc ? BAIL : 0;
}

int kube_text_id_scan(const char *json, size_t len, int max_depth, kube_text_id *id)
{
	kube_js j;
	kube_jstr k;
	bool more, seen = false;
	int rc;

	memset(id, 0, sizeof(*id));
	kube__js_init(&j, json, len, max_depth);
	if((rc = kube__js_obj_begin(&j)) != 0)
		goto done;
	while(!(rc = kube__js_obj_next(&j, &k, &more)) && more) {
		if(KUBE_JS_IS(&k, "metadata")) {
			if(seen) {
				rc = BAIL;
				break;
			}
			seen = true;
			rc = id_meta(&j, id);
		} else {
			rc = kube__js_skip(&j);
		}
		if(rc)
			break;
	}
	if(!rc && (!seen || kube__js_end(&j)))
		rc = BAIL;
done:
	kube__js_free(&j);
	return rc ? BAIL : 0;
}

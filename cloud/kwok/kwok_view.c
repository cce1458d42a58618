/* The kwok driver's view of its Nodes, kept from what the host's Node
 * cache tells it (nodes_changed, ABI 1.2) instead of listing every Node of
 * its groups on each refresh and each instances() call.
 *
 * Only Nodes carrying the group label are kept. The host's cache trails
 * the apiserver, and a list right after a create or a delete would already
 * show it, so the driver's own writes go into the view at once: a Node it
 * created counts until the cache shows it (or, after a full resync that
 * still lacks it, until KWOK_UNSEEN_MAX_NS has passed), and a Node it
 * deleted is hidden until the cache no longer has it. Until the first full
 * set arrives (a host that does not watch Nodes never sends one) the
 * driver lists, as before. */
#include "kwok/kwok.h"

#include <stdlib.h>
#include <string.h>

/* How long a Node the driver created may be missing from a full resync
 * before the view forgets it (the apiserver had it; the cache is late). */
#define KWOK_UNSEEN_MAX_NS (120LL * 1000000000LL)

struct kwok_vnode {
	char *name;
	char *group;            /* the group label's value */
	char *provider_id;      /* NULL when unset */
	bool ready, deleting;
	bool gone;              /* deleted by the driver; hidden until the cache agrees */
	bool seen;              /* the cache has shown it (or a full resync listed it) */
	int64_t created_ns;     /* when the driver created it (unseen entries) */
};

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for(; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

static void vnode_free(kwok_vnode *n)
{
	if(!n)
		return;
	free(n->name);
	free(n->group);
	free(n->provider_id);
	free(n);
}

/* The slot holding `name`, or the empty slot where it would go. */
static size_t slot_of(const kwok_view *v, const char *name)
{
	size_t mask = v->cap - 1, i = name_hash(name) & mask;
	while(v->slots[i] && strcmp(v->slots[i]->name, name))
		i = (i + 1) & mask;
	return i;
}

static kwok_vnode *view_get(const kwok_view *v, const char *name)
{
	return v->cap ? v->slots[slot_of(v, name)] : NULL;
}

static int view_grow(kwok_view *v)
{
	size_t ncap = v->cap ? v->cap * 2 : 64, i;
	kwok_vnode **old = v->slots, **ns = calloc(ncap, sizeof(*ns));
	size_t ocap = v->cap;
	if(!ns)
		return -1;
	v->slots = ns;
	v->cap = ncap;
	for(i = 0; i < ocap; i++)
		if(old[i])
			v->slots[slot_of(v, old[i]->name)] = old[i];
	free(old);
	return 0;
}

/* Remove the entry in slot i, moving later members of its run back. */
static void view_del_slot(kwok_view *v, size_t i)
{
	size_t mask = v->cap - 1, j;
	vnode_free(v->slots[i]);
	v->slots[i] = NULL;
	v->len--;
	for(j = (i + 1) & mask; v->slots[j]; j = (j + 1) & mask) {
		kwok_vnode *m = v->slots[j];
		v->slots[j] = NULL;
		v->slots[slot_of(v, m->name)] = m;
	}
}

static void view_del(kwok_view *v, const char *name)
{
	size_t i;
	if(!v->cap)
		return;
	i = slot_of(v, name);
	if(v->slots[i])
		view_del_slot(v, i);
}

/* The entry for `name`, made (empty but for its name) when missing. */
static kwok_vnode *view_upsert(kwok_view *v, const char *name)
{
	kwok_vnode *n;
	size_t i;
	if((v->len + 1) * 2 > v->cap && view_grow(v))
		return NULL;
	i = slot_of(v, name);
	if(v->slots[i])
		return v->slots[i];
	n = calloc(1, sizeof(*n));
	if(!n || !(n->name = kwok_strdup(name))) {
		free(n);
		return NULL;
	}
	v->slots[i] = n;
	v->len++;
	return n;
}

static int set_str(char **dst, const char *src)
{
	char *s = NULL;
	if(*dst && src && !strcmp(*dst, src))
		return 0;
	if(src && !(s = kwok_strdup(src)))
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

void kwok_view_free(kwok_view *v)
{
	size_t i;
	for(i = 0; i < v->cap; i++)
		vnode_free(v->slots[i]);
	free(v->slots);
	memset(v, 0, sizeof(*v));
}

static const char *group_label(const prd_cloud_node *n)
{
	size_t i;
	for(i = 0; i < n->nlabels; i++)
		if(n->labels[i].key && !strcmp(n->labels[i].key, KWOK_GROUP_LABEL))
			return n->labels[i].value;
	return NULL;
}

/* One Node as the cache now has it. */
static int apply_one(kwok_view *v, const prd_cloud_node *n)
{
	const char *g = n->present ? group_label(n) : NULL;
	kwok_vnode *e;
	if(!n->name)
		return 0;
	if(!g) {
		view_del(v, n->name); /* gone, or no longer one of ours */
		return 0;
	}
	e = view_upsert(v, n->name);
	if(!e || set_str(&e->group, g) || set_str(&e->provider_id, n->provider_id))
		return -1;
	e->ready = n->ready != 0;
	e->deleting = n->deleting != 0;
	e->seen = true;
	return 0;
}

/* A full set: what it lacks is gone, except Nodes the driver created that
 * the cache has not caught up with yet. */
static void drop_unlisted(kwok *k)
{
	kwok_view *v = &k->view;
	int64_t now = k->host->now_ns(k->host->ctx);
	size_t i = 0;
	while(i < v->cap) {
		kwok_vnode *e = v->slots[i];
		if(e && !e->seen && (e->gone || now - e->created_ns > KWOK_UNSEEN_MAX_NS)) {
			view_del_slot(v, i);
			continue; /* the slot may hold a moved entry now */
		}
		i++;
	}
}

int kwok_view_apply(kwok *k, const prd_cloud_node *nodes, size_t count, int full, prd_cloud_error *err)
{
	kwok_view *v = &k->view;
	size_t i;
	if(full) {
		for(i = 0; i < v->cap; i++)
			if(v->slots[i] && (v->slots[i]->seen || v->slots[i]->gone))
				v->slots[i]->seen = false;
	} else if(!v->on) {
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: Node changes before the first full set");
	}
	for(i = 0; i < count; i++)
		if(apply_one(v, &nodes[i])) {
			/* Half applied: list again until the next full set. */
			kwok_view_free(v);
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
	if(full)
		drop_unlisted(k);
	v->on = true;
	return 0;
}

void kwok_view_created(kwok *k, json_object *node)
{
	kwok_view *v = &k->view;
	json_object *md = kwok_jobj(node, "metadata");
	const char *name = kwok_jstr(md, "name"), *g = kwok_jstr(kwok_jobj(md, "labels"), KWOK_GROUP_LABEL);
	kwok_vnode *e;
	if(!v->on || !name || !g)
		return;
	e = view_get(v, name);
	if(e && e->seen && !e->gone)
		return; /* the cache already has it (a 409 for our own Node) */
	e = view_upsert(v, name);
	if(!e || set_str(&e->group, g) || set_str(&e->provider_id, kwok_jstr(kwok_jobj(node, "spec"), "providerID"))) {
		kwok_view_free(v); /* cannot keep it true: list until the next full set */
		return;
	}
	e->ready = e->deleting = e->gone = e->seen = false;
	e->created_ns = k->host->now_ns(k->host->ctx);
}

void kwok_view_deleted(kwok *k, const char *name)
{
	kwok_vnode *e = k->view.on ? view_get(&k->view, name) : NULL;
	if(e)
		e->gone = true;
}

int kwok_view_each(kwok *k, const char *group, kwok_view_fn fn, void *ud)
{
	const kwok_view *v = &k->view;
	size_t i;
	int rc;
	for(i = 0; i < v->cap; i++) {
		const kwok_vnode *e = v->slots[i];
		if(!e || e->gone || (group && strcmp(e->group, group)))
			continue;
		if((rc = fn(ud, e->name, e->group, e->provider_id, e->ready, e->deleting)) != 0)
			return rc;
	}
	return 0;
}

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
 * driver lists, as before.
 *
 * Each entry keeps the Node's owner label (ABI 1.3), which the cache
 * passes on, and its creation time, which it does not: that comes from
 * the apiserver's answer to the driver's own create, or from one list of
 * the group when instances() finds an entry without it. */
#include "kwok/kwok_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long a Node the driver created may be missing from a full resync
 * before the view forgets it (the apiserver had it; the cache is late). */
#define KWOK_UNSEEN_MAX_NS (120LL * 1000000000LL)

struct kwok_vnode {
	char *name;
	size_t name_len;
	/* The instance id instances() reports: the provider ID, or
	 * "kwok://<name>" when the Node has none (kept, not made per call). */
	char *id;
	size_t id_len;
	kwok_vgroup *vg;        /* its group label's members; NULL only while being set */
	size_t at;              /* its index in vg->m */
	bool ready, deleting;
	bool gone;              /* deleted by the driver; hidden until the cache agrees */
	bool seen;              /* the cache has shown it (or a full resync listed it) */
	int64_t created_ns;     /* when the driver created it (unseen entries; host clock) */
	char *owner;            /* its provreqd.io/owner label, or NULL */
	int64_t born_ns;        /* its metadata.creationTimestamp; 0 not known yet */
	bool born_asked;        /* a list was asked for born_ns already */
};

/* The entries carrying one value of the group label (a group the driver
 * does not know has one too: a template may appear at a later refresh).
 * Freed when its last member leaves. */
struct kwok_vgroup {
	char *label;
	kwok_vnode **m;
	size_t n, cap;
	int32_t live;           /* members neither gone nor being deleted */
};

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for(; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

static bool counts_live(const kwok_vnode *e)
{
	return !e->gone && !e->deleting;
}

static kwok_vgroup *vgroup_find(const kwok_view *v, const char *label)
{
	size_t i;
	for(i = 0; i < v->ngroups; i++)
		if(!strcmp(v->groups[i]->label, label))
			return v->groups[i];
	return NULL;
}

static void vgroup_free(kwok_vgroup *g)
{
	if(!g)
		return;
	free(g->label);
	free(g->m);
	free(g);
}

/* Take e out of its group (swapping the group's last member into its
 * place); a group left empty goes. */
static void vgroup_leave(kwok_view *v, kwok_vnode *e)
{
	kwok_vgroup *g = e->vg;
	size_t i;
	if(!g)
		return;
	g->live -= counts_live(e);
	g->m[e->at] = g->m[--g->n];
	g->m[e->at]->at = e->at;
	e->vg = NULL;
	if(g->n)
		return;
	for(i = 0; i < v->ngroups && v->groups[i] != g; i++)
		;
	if(i < v->ngroups)
		v->groups[i] = v->groups[--v->ngroups];
	vgroup_free(g);
}

/* Put e (in no group) into the group `label`, made when missing. */
static int vgroup_join(kwok_view *v, kwok_vnode *e, const char *label)
{
	kwok_vgroup *g = vgroup_find(v, label);
	if(!g) {
		kwok_vgroup **gs = realloc(v->groups, (v->ngroups + 1) * sizeof(*gs));
		if(!gs)
			return -1;
		v->groups = gs;
		g = calloc(1, sizeof(*g));
		if(!g || !(g->label = kwok_strdup(label))) {
			free(g);
			return -1;
		}
		v->groups[v->ngroups++] = g;
	}
	if(g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		kwok_vnode **m = realloc(g->m, cap * sizeof(*m));
		if(!m) {
			if(!g->n) {
				v->ngroups--; /* just made: it is the last one */
				vgroup_free(g);
			}
			return -1;
		}
		g->m = m;
		g->cap = cap;
	}
	e->at = g->n;
	g->m[g->n++] = e;
	e->vg = g;
	g->live += counts_live(e);
	return 0;
}

static int set_group(kwok_view *v, kwok_vnode *e, const char *label)
{
	if(e->vg && !strcmp(e->vg->label, label))
		return 0;
	vgroup_leave(v, e);
	return vgroup_join(v, e, label);
}

/* Change the flags that decide whether e counts as live, keeping its
 * group's count true. */
static void set_flags(kwok_vnode *e, bool deleting, bool gone)
{
	if(e->vg)
		e->vg->live -= counts_live(e);
	e->deleting = deleting;
	e->gone = gone;
	if(e->vg)
		e->vg->live += counts_live(e);
}

/* The instance id from the provider ID (NULL or "" when unset). */
static int set_id(kwok_vnode *e, const char *provider_id)
{
	static const char prefix[] = KWOK_PROVIDER_PREFIX;
	size_t plen = sizeof(prefix) - 1;
	char *id;
	if(provider_id && provider_id[0]) {
		if(e->id && !strcmp(e->id, provider_id))
			return 0;
		if(!(id = kwok_strdup(provider_id)))
			return -1;
	} else {
		if(e->id && !strncmp(e->id, prefix, plen) && !strcmp(e->id + plen, e->name))
			return 0;
		if(!(id = malloc(plen + e->name_len + 1)))
			return -1;
		memcpy(id, prefix, plen);
		memcpy(id + plen, e->name, e->name_len + 1);
	}
	free(e->id);
	e->id = id;
	e->id_len = strlen(id);
	return 0;
}

/* The owner label's value (NULL: none). */
static int set_owner(kwok_vnode *e, const char *owner)
{
	char *o;
	if(!owner || !owner[0]) {
		free(e->owner);
		e->owner = NULL;
		return 0;
	}
	if(e->owner && !strcmp(e->owner, owner))
		return 0;
	if(!(o = kwok_strdup(owner)))
		return -1;
	free(e->owner);
	e->owner = o;
	return 0;
}

static void vnode_free(kwok_vnode *n)
{
	if(!n)
		return;
	free(n->name);
	free(n->id);
	free(n->owner);
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
	vgroup_leave(v, v->slots[i]);
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

/* The entry for `name`, made (empty but for its name, in no group) when
 * missing. */
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
	n->name_len = strlen(name);
	v->slots[i] = n;
	v->len++;
	return n;
}

void kwok_view_free(kwok_view *v)
{
	size_t i;
	for(i = 0; i < v->cap; i++)
		vnode_free(v->slots[i]);
	free(v->slots);
	for(i = 0; i < v->ngroups; i++)
		vgroup_free(v->groups[i]);
	free(v->groups);
	memset(v, 0, sizeof(*v));
}

static const char *label_of(const prd_cloud_node *n, const char *key)
{
	size_t i;
	for(i = 0; i < n->nlabels; i++)
		if(n->labels[i].key && !strcmp(n->labels[i].key, key))
			return n->labels[i].value;
	return NULL;
}

/* One Node as the cache now has it. */
static int apply_one(kwok_view *v, const prd_cloud_node *n)
{
	const char *g = n->present ? label_of(n, KWOK_GROUP_LABEL) : NULL;
	kwok_vnode *e;
	if(!n->name)
		return 0;
	if(!g) {
		view_del(v, n->name); /* gone, or no longer one of ours */
		return 0;
	}
	e = view_upsert(v, n->name);
	if(!e || set_group(v, e, g) || set_id(e, n->provider_id) || set_owner(e, label_of(n, KWOK_OWNER_LABEL)))
		return -1;
	e->ready = n->ready != 0;
	set_flags(e, n->deleting != 0, e->gone);
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
	json_object *md = kwok_jobj(node, "metadata"), *labels = kwok_jobj(md, "labels");
	const char *name = kwok_jstr(md, "name"), *g = kwok_jstr(labels, KWOK_GROUP_LABEL);
	kwok_vnode *e;
	if(!v->on || !name || !g)
		return;
	e = view_get(v, name);
	if(e && e->seen && !e->gone)
		return; /* the cache already has it (a 409 for our own Node) */
	e = view_upsert(v, name);
	if(!e || set_group(v, e, g) || set_id(e, kwok_jstr(kwok_jobj(node, "spec"), "providerID")) ||
	   set_owner(e, kwok_jstr(labels, KWOK_OWNER_LABEL))) {
		kwok_view_free(v); /* cannot keep it true: list until the next full set */
		return;
	}
	e->ready = e->seen = false;
	set_flags(e, false, false);
	e->created_ns = k->host->now_ns(k->host->ctx);
	e->born_ns = kwok_node_created_ns(node);
	e->born_asked = false;
}

void kwok_view_deleted(kwok *k, const char *name)
{
	kwok_vnode *e = k->view.on ? view_get(&k->view, name) : NULL;
	if(e)
		set_flags(e, e->deleting, true);
}

int kwok_view_each(const kwok *k, const char *group, kwok_view_fn fn, void *ud)
{
	const kwok_vgroup *g = vgroup_find(&k->view, group);
	size_t i;
	int rc;
	for(i = 0; g && i < g->n; i++) {
		const kwok_vnode *e = g->m[i];
		kwok_vinfo n;
		if(e->gone)
			continue;
		n.name = e->name;
		n.name_len = e->name_len;
		n.id = e->id;
		n.id_len = e->id_len;
		n.owner = e->owner;
		n.created_ns = e->born_ns;
		n.ready = e->ready;
		n.deleting = e->deleting;
		if((rc = fn(ud, &n)) != 0)
			return rc;
	}
	return 0;
}

static int fill_time(void *ud, json_object *node)
{
	kwok *k = ud;
	const char *name = kwok_jstr(kwok_jobj(node, "metadata"), "name");
	kwok_vnode *e = name ? view_get(&k->view, name) : NULL;
	if(e && !e->born_ns)
		e->born_ns = kwok_node_created_ns(node);
	return 0;
}

/* Each entry is asked about once: a Node the list does not have (the
 * cache is ahead of it, or it went) reports 0 rather than list again at
 * every call. A failed list is asked again at the next call. */
int kwok_view_fill_times(kwok *k, const char *group, prd_cloud_error *err)
{
	kwok_vgroup *g = vgroup_find(&k->view, group);
	char path[256];
	size_t i;
	bool need = false;
	int rc;
	for(i = 0; g && i < g->n && !need; i++)
		need = !g->m[i]->gone && !g->m[i]->born_ns && !g->m[i]->born_asked;
	if(!need)
		return 0;
	snprintf(path, sizeof(path), "/api/v1/nodes?labelSelector=" KWOK_GROUP_LABEL "%%3D%s", group);
	rc = kwok_list(k, path, fill_time, k, err);
	if(rc)
		return rc;
	for(i = 0; i < g->n; i++)
		g->m[i]->born_asked = true;
	return 0;
}

int32_t kwok_view_live(const kwok *k, const char *group)
{
	const kwok_vgroup *g = vgroup_find(&k->view, group);
	return g ? g->live : 0;
}

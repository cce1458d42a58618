/* The cluster snapshot: nodes, pods bound to them (as groups of identical
 * pods), bookings, and an undo log for fork / commit / revert. */
#include "sched/sched_int.h"
#include "sched/place.h"
#include "sched/match.h"
#include "util/buf.h"
#include "util/str.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_MIN (64 * 1024)

void *sched__arena_alloc(sched__arena *a, size_t n)
{
	sched__chunk *c = a->head;
	size_t al = sizeof(max_align_t);
	void *p;

	n = (n + al - 1) / al * al;
	if(!n)
		n = al;
	if(!c || c->cap - c->used < n) {
		size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
		c = malloc(sizeof(*c) + cap);
		if(!c)
			return NULL;
		c->cap = cap;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	p = (char *)c->data + c->used;
	c->used += n;
	return p;
}

static void arena_free(sched__arena *a)
{
	while(a->head) {
		sched__chunk *n = a->head->next;
		free(a->head);
		a->head = n;
	}
}

char *sched__arena_str(sched__arena *a, const char *s)
{
	size_t n;
	char *p;
	if(!s)
		s = "";
	n = strlen(s) + 1;
	p = sched__arena_alloc(a, n);
	if(p)
		memcpy(p, s, n);
	return p;
}

sched_label *sched__copy_labels(sched__arena *a, const sched_label *l, size_t n)
{
	sched_label *out;
	size_t i;
	out = sched__arena_alloc(a, (n ? n : 1) * sizeof(*out));
	if(!out)
		return NULL;
	for(i = 0; i < n; i++) {
		out[i].key = sched__arena_str(a, l[i].key);
		out[i].value = sched__arena_str(a, l[i].value);
		if(!out[i].key || !out[i].value)
			return NULL;
	}
	return out;
}

static const char *const *copy_strs(sched__arena *a, const char *const *v, size_t n)
{
	const char **out = sched__arena_alloc(a, (n ? n : 1) * sizeof(*out));
	size_t i;
	if(!out)
		return NULL;
	for(i = 0; i < n; i++)
		if(!(out[i] = sched__arena_str(a, v[i])))
			return NULL;
	return out;
}

sched_label_selector *sched__copy_selector(sched__arena *a, const sched_label_selector *s)
{
	sched_label_selector *out;
	sched_requirement *r;
	size_t i;
	if(!s)
		return NULL;
	out = sched__arena_alloc(a, sizeof(*out));
	if(!out)
		return NULL;
	out->n_match_labels = s->n_match_labels;
	out->match_labels = sched__copy_labels(a, s->match_labels, s->n_match_labels);
	out->n_exprs = s->n_exprs;
	r = sched__arena_alloc(a, (s->n_exprs ? s->n_exprs : 1) * sizeof(*r));
	if(!out->match_labels || !r)
		return NULL;
	for(i = 0; i < s->n_exprs; i++) {
		r[i].key = sched__arena_str(a, s->exprs[i].key);
		r[i].op = s->exprs[i].op;
		r[i].n_values = s->exprs[i].n_values;
		r[i].values = copy_strs(a, s->exprs[i].values, s->exprs[i].n_values);
		if(!r[i].key || !r[i].values)
			return NULL;
	}
	out->exprs = r;
	return out;
}

sched_pod_term *sched__copy_terms(sched__arena *a, const sched_pod_term *t, size_t n)
{
	sched_pod_term *out = sched__arena_alloc(a, (n ? n : 1) * sizeof(*out));
	size_t i;
	if(!out)
		return NULL;
	for(i = 0; i < n; i++) {
		out[i] = t[i];
		out[i].topology_key = sched__arena_str(a, t[i].topology_key);
		out[i].namespaces = copy_strs(a, t[i].namespaces, t[i].n_namespaces);
		if(!out[i].topology_key || !out[i].namespaces)
			return NULL;
		if(t[i].selector && !(out[i].selector = sched__copy_selector(a, t[i].selector)))
			return NULL;
	}
	return out;
}

sched_host_port *sched__copy_ports(sched__arena *a, const sched_host_port *p, size_t n)
{
	sched_host_port *out = sched__arena_alloc(a, (n ? n : 1) * sizeof(*out));
	size_t i;
	if(!out)
		return NULL;
	for(i = 0; i < n; i++) {
		out[i] = p[i];
		if(p[i].host_ip && !(out[i].host_ip = sched__arena_str(a, p[i].host_ip)))
			return NULL;
	}
	return out;
}

/* Grow a malloc'd array so that one more element of `size` fits. */
static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *p;
	if(n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 16;
	if(ncap > SIZE_MAX / size)
		return PRD_ENOMEM;
	p = realloc(*arr, ncap * size);
	if(!p)
		return PRD_ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

#define GROW(arr, cap, n) grow((void **)&(arr), &(cap), (n), sizeof(*(arr)))

static int undo_push(sched_snapshot *s, uint8_t kind, uint32_t a, uint32_t b, int64_t count,
		     bool appended)
{
	sched__undo *u;
	if(s->depth == 0)
		return 0;
	if(GROW(s->undo, s->cap_undo, s->n_undo))
		return PRD_ENOMEM;
	u = &s->undo[s->n_undo++];
	u->kind = kind;
	u->a = a;
	u->b = b;
	u->count = count;
	u->appended = appended;
	return 0;
}

sched_snapshot *sched_snapshot_new(void)
{
	static const char *const fixed[] = { "cpu", "memory", "ephemeral-storage", "pods" };
	sched_snapshot *s = calloc(1, sizeof(*s));
	size_t i;
	if(!s)
		return NULL;
	hmap_init(&s->node_by_name, NULL);
	hmap_init(&s->uids, NULL);
	hmap_init(&s->zone_by_name, NULL);
	hmap_init(&s->group_by_key, NULL);
	for(i = 0; i < 4; i++)
		s->res_names[i] = fixed[i];
	s->n_res = 4;
	return s;
}

void sched_snapshot_free(sched_snapshot *s)
{
	size_t i;
	if(!s)
		return;
	for(i = 0; i < s->n_nodes; i++) {
		free(s->nodes[i].ports);
		free(s->nodes[i].dev);
	}
	for(i = 0; i < s->n_groups; i++) {
		free(s->groups[i].ents);
		free(s->groups[i].key);
	}
	free(s->nodes);
	free(s->zones);
	free(s->groups);
	free(s->bookings);
	free(s->undo);
	hmap_free(&s->node_by_name);
	hmap_free(&s->uids);
	hmap_free(&s->zone_by_name);
	hmap_free(&s->group_by_key);
	arena_free(&s->arena);
	free(s);
}

int sched__res_find(const sched_snapshot *s, const char *name)
{
	size_t i;
	for(i = 0; i < s->n_res; i++)
		if(strcmp(s->res_names[i], name) == 0)
			return (int)i;
	return -1;
}

static int res_intern(sched_snapshot *s, const char *name, prd_err *e)
{
	int id = sched__res_find(s, name);
	if(id >= 0)
		return id;
	if(s->n_res == SCHED_RES_MAX)
		return prd_err_set(e, PRD_ERANGE, "more than %d distinct resource names",
		                   SCHED_RES_MAX);
	if(!(s->res_names[s->n_res] = sched__arena_str(&s->arena, name)))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	return (int)s->n_res++;
}

void sched__req_vector(const sched_snapshot *s, const sched_res *req, size_t n,
		       int64_t out[SCHED_RES_MAX], bool *impossible)
{
	size_t i;
	memset(out, 0, sizeof(int64_t) * SCHED_RES_MAX);
	*impossible = false;
	for(i = 0; i < n; i++) {
		int id;
		if(req[i].value == 0)
			continue;
		id = sched__res_find(s, req[i].name);
		if(id < 0)
			*impossible = true;
		else
			out[id] = sched__sat_add(out[id], req[i].value);
	}
	out[SCHED_RES_PODS] = 1;
}

static int zone_intern(sched_snapshot *s, const char *zone, int32_t *out)
{
	uintptr_t v = (uintptr_t)hmap_get(&s->zone_by_name, zone);
	const char *copy;
	if(v) {
		*out = (int32_t)(v - 1);
		return 0;
	}
	if(GROW(s->zones, s->cap_zones, s->n_zones))
		return PRD_ENOMEM;
	if(!(copy = sched__arena_str(&s->arena, zone)))
		return PRD_ENOMEM;
	if(hmap_put(&s->zone_by_name, zone, (void *)(uintptr_t)(s->n_zones + 1)))
		return PRD_ENOMEM;
	s->zones[s->n_zones] = copy;
	*out = (int32_t)s->n_zones++;
	return 0;
}

int sched__node_add_copied(sched_snapshot *s, const sched__node *proto, const char *name,
			   size_t *idx)
{
	sched__node *n;
	if(s->n_nodes >= SCHED_NODES_MAX)
		return PRD_ERANGE;
	if(GROW(s->nodes, s->cap_nodes, s->n_nodes))
		return PRD_ENOMEM;
	if(s->depth > 0 && GROW(s->undo, s->cap_undo, s->n_undo))
		return PRD_ENOMEM;
	if(hmap_put(&s->node_by_name, name, (void *)(uintptr_t)(s->n_nodes + 1)))
		return PRD_ENOMEM;
	n = &s->nodes[s->n_nodes];
	*n = *proto;
	n->dev = NULL;
	if(proto->dev && proto->dev->n) {
		size_t nd = proto->dev->n;
		if(!(n->dev = calloc(1, sizeof(*n->dev) + nd * sizeof(n->dev->holder[0])))) {
			hmap_del(&s->node_by_name, name);
			return PRD_ENOMEM;
		}
		n->dev->devs = proto->dev->devs;
		n->dev->n = nd;
	}
	n->name = name;
	n->ports = NULL;
	n->n_ports = n->cap_ports = 0;
	memset(n->used, 0, sizeof(n->used));
	if(idx)
		*idx = s->n_nodes;
	s->n_nodes++;
	/* Cannot fail: room was reserved above. */
	undo_push(s, SCHED__U_NODE, (uint32_t)(s->n_nodes - 1), 0, 0, false);
	return 0;
}

static void node_drop_last(sched_snapshot *s)
{
	sched__node *n = &s->nodes[--s->n_nodes];
	hmap_del(&s->node_by_name, n->name);
	free(n->ports);
	free(n->dev);
}

void sched__node_pop(sched_snapshot *s)
{
	size_t i, last = s->n_nodes - 1;
	/* Its record is recent: only placements on other nodes follow it. */
	for(i = s->n_undo; s->depth > 0 && i > s->marks[s->depth - 1]; i--) {
		sched__undo *u = &s->undo[i - 1];
		if(u->kind == SCHED__U_NODE && u->a == last) {
			memmove(u, u + 1, (s->n_undo - i) * sizeof(*u));
			s->n_undo--;
			break;
		}
	}
	node_drop_last(s);
}

static int check_devices(const sched_node_spec *spec, prd_err *e)
{
	size_t i, k;
	if(spec->n_devices && !spec->devices)
		return prd_err_set(e, PRD_EINVAL, "node %s: NULL device list", spec->name);
	if(spec->n_devices > SCHED_DEV_MAX)
		return prd_err_set(e, PRD_ERANGE, "node %s: more than %d devices", spec->name,
		                   SCHED_DEV_MAX);
	for(i = 0; i < spec->n_devices; i++) {
		const sched_device *d = &spec->devices[i];
		if(!d->driver || !d->pool || !d->name || (d->n_attrs && !d->attrs) ||
		   (d->n_caps && !d->caps))
			return prd_err_set(e, PRD_EINVAL, "node %s: device %zu without driver, pool or name",
			                   spec->name, i);
		for(k = 0; k < d->n_attrs; k++)
			if(!d->attrs[k].name || (d->attrs[k].type != SCHED_ATTR_INT &&
			                         d->attrs[k].type != SCHED_ATTR_BOOL &&
			                         d->attrs[k].type != SCHED_ATTR_STRING &&
			                         d->attrs[k].type != SCHED_ATTR_VERSION))
				return prd_err_set(e, PRD_EINVAL, "node %s: device %s: bad attribute", spec->name,
				                   d->name);
		for(k = 0; k < d->n_caps; k++)
			if(!d->caps[k].name)
				return prd_err_set(e, PRD_EINVAL, "node %s: device %s: capacity without a name",
				                   spec->name, d->name);
	}
	return 0;
}

int sched_snapshot_add_node(sched_snapshot *s, const sched_node_spec *spec, size_t *idx,
			    prd_err *e)
{
	sched__node proto;
	sched__ndev hdr;
	const char *zone, *name;
	sched_taint *taints;
	size_t i;
	int rc;

	if(!s || !spec || !spec->name || !spec->name[0])
		return prd_err_set(e, PRD_EINVAL, "add_node: NULL or unnamed node");
	if((spec->n_labels && !spec->labels) || (spec->n_taints && !spec->taints) ||
	   (spec->n_allocatable && !spec->allocatable))
		return prd_err_set(e, PRD_EINVAL, "node %s: NULL list", spec->name);
	if(hmap_has(&s->node_by_name, spec->name))
		return prd_err_set(e, PRD_EEXIST, "node %s already in snapshot", spec->name);
	if(s->n_nodes >= SCHED_NODES_MAX)
		return prd_err_set(e, PRD_ERANGE, "more than %zu nodes", SCHED_NODES_MAX);
	for(i = 0; i < spec->n_labels; i++)
		if(!spec->labels[i].key || !spec->labels[i].key[0])
			return prd_err_set(e, PRD_EINVAL, "node %s: label with empty key", spec->name);
	for(i = 0; i < spec->n_taints; i++) {
		sched_effect f = spec->taints[i].effect;
		if(!spec->taints[i].key)
			return prd_err_set(e, PRD_EINVAL, "node %s: taint without key", spec->name);
		if(f != SCHED_EFFECT_NONE && f != SCHED_EFFECT_NO_SCHEDULE &&
		   f != SCHED_EFFECT_PREFER_NO_SCHEDULE && f != SCHED_EFFECT_NO_EXECUTE)
			return prd_err_set(e, PRD_EINVAL, "node %s: unknown taint effect %d", spec->name,
			                   (int)f);
	}
	if((rc = check_devices(spec, e)))
		return rc;
	memset(&proto, 0, sizeof(proto));
	for(i = 0; i < spec->n_allocatable; i++) {
		const sched_res *r = &spec->allocatable[i];
		if(!r->name || !r->name[0] || r->value < 0 || r->value > SCHED_QTY_MAX)
			return prd_err_set(e, PRD_EINVAL, "node %s: bad allocatable %s", spec->name,
			                   r->name ? r->name : "(null)");
	}
	for(i = 0; i < spec->n_allocatable; i++) {
		int id = res_intern(s, spec->allocatable[i].name, e);
		if(id < 0)
			return id;
		proto.alloc[id] = spec->allocatable[i].value;
	}
	proto.unschedulable = spec->unschedulable;
	proto.zone = -1;
	zone = sched_label_get(spec->labels, spec->n_labels, SCHED_KEY_ZONE);
	if(zone && zone_intern(s, zone, &proto.zone))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	proto.n_labels = (uint32_t)spec->n_labels;
	proto.labels = sched__copy_labels(&s->arena, spec->labels, spec->n_labels);
	taints = sched__arena_alloc(&s->arena, (spec->n_taints ? spec->n_taints : 1) *
	                                           sizeof(*taints));
	name = sched__arena_str(&s->arena, spec->name);
	if(!proto.labels || !taints || !name)
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	for(i = 0; i < spec->n_taints; i++) {
		taints[i].key = sched__arena_str(&s->arena, spec->taints[i].key);
		taints[i].value = sched__arena_str(&s->arena, spec->taints[i].value);
		taints[i].effect = spec->taints[i].effect;
		if(!taints[i].key || !taints[i].value)
			return prd_err_set(e, PRD_ENOMEM, "out of memory");
	}
	proto.taints = taints;
	proto.n_taints = (uint32_t)spec->n_taints;
	if(spec->n_devices) {
		if(!(hdr.devs = sched__copy_devices(&s->arena, spec->devices, spec->n_devices)))
			return prd_err_set(e, PRD_ENOMEM, "out of memory");
		hdr.n = spec->n_devices;
		proto.dev = &hdr;
	}
	rc = sched__node_add_copied(s, &proto, name, idx);
	if(rc)
		return prd_err_set(e, rc, "adding node %s: %s", spec->name, prd_strerror(rc));
	return 0;
}

int sched_snapshot_reserve_nodes(sched_snapshot *s, size_t n)
{
	sched__node *v;
	if(n > SCHED_NODES_MAX)
		n = SCHED_NODES_MAX;
	if(n <= s->cap_nodes)
		return 0;
	if(!(v = realloc(s->nodes, n * sizeof(*v))))
		return PRD_ENOMEM;
	s->nodes = v;
	s->cap_nodes = n;
	return 0;
}

size_t sched_snapshot_pod_entries(const sched_snapshot *s)
{
	size_t i, n = 0;
	for(i = 0; s && i < s->n_groups; i++)
		n += s->groups[i].n_ents;
	return n;
}

size_t sched_snapshot_node_count(const sched_snapshot *s)
{
	return s ? s->n_nodes : 0;
}

const char *sched_snapshot_node_name(const sched_snapshot *s, size_t idx)
{
	return s && idx < s->n_nodes ? s->nodes[idx].name : NULL;
}

const char *sched_snapshot_node_label(const sched_snapshot *s, size_t idx, const char *key)
{
	const sched__node *n;
	uint32_t i;
	if(!s || idx >= s->n_nodes || !key)
		return NULL;
	n = &s->nodes[idx];
	for(i = 0; i < n->n_labels; i++)
		if(n->labels[i].key && !strcmp(n->labels[i].key, key))
			return n->labels[i].value;
	return NULL;
}

int sched_snapshot_find_node(const sched_snapshot *s, const char *name, size_t *idx)
{
	uintptr_t v;
	if(!s || !name || !idx)
		return PRD_EINVAL;
	v = (uintptr_t)hmap_get(&s->node_by_name, name);
	if(!v)
		return PRD_ENOTFOUND;
	*idx = v - 1;
	return 0;
}

/* Dedupe key for plain pods: namespace, labels sorted by key and the
 * request vector, separated by bytes that cannot appear in label keys or
 * values. Caller frees; NULL when out of memory. */
static char *group_key(const sched_pod_spec *pod, const int64_t req[SCHED_RES_MAX])
{
	const sched_label **ls = NULL;
	size_t i, j;
	buf b;

	if(pod->n_labels && !(ls = malloc(pod->n_labels * sizeof(*ls))))
		return NULL;
	for(i = 0; i < pod->n_labels; i++) {
		ls[i] = &pod->labels[i];
		for(j = i; j > 0 && strcmp(ls[j - 1]->key, ls[j]->key) > 0; j--) {
			const sched_label *t = ls[j];
			ls[j] = ls[j - 1];
			ls[j - 1] = t;
		}
	}
	buf_init(&b);
	buf_append_str(&b, pod->namespace);
	buf_append_char(&b, '\x01');
	for(i = 0; i < pod->n_labels; i++) {
		buf_append_str(&b, ls[i]->key);
		buf_append_char(&b, '\x02');
		buf_append_str(&b, ls[i]->value ? ls[i]->value : "");
		buf_append_char(&b, '\x01');
	}
	for(i = 0; i < SCHED_RES_MAX; i++) {
		/* Hex digits by hand: printf here was two thirds of building
		 * the snapshot of a large cluster. */
		char hex[20];
		size_t k = sizeof(hex);
		uint64_t v = (uint64_t)req[i];
		hex[--k] = '.';
		do {
			hex[--k] = "0123456789abcdef"[v & 15];
			v >>= 4;
		} while(v);
		buf_append(&b, hex + k, sizeof(hex) - k);
	}
	free(ls);
	return buf_detach(&b);
}

int sched__group_new(sched_snapshot *s, const sched_pod_spec *pod,
		     const int64_t req[SCHED_RES_MAX], size_t *gi)
{
	sched__group *g;
	if(s->n_groups >= UINT32_MAX - 1)
		return PRD_ERANGE;
	if(GROW(s->groups, s->cap_groups, s->n_groups))
		return PRD_ENOMEM;
	g = &s->groups[s->n_groups];
	memset(g, 0, sizeof(*g));
	g->ns = sched__arena_str(&s->arena, pod->namespace);
	g->labels = sched__copy_labels(&s->arena, pod->labels, pod->n_labels);
	g->n_labels = pod->n_labels;
	g->ports = sched__copy_ports(&s->arena, pod->host_ports, pod->n_host_ports);
	g->n_ports = pod->n_host_ports;
	g->anti = sched__copy_terms(&s->arena, pod->pod_anti_affinity, pod->n_pod_anti_affinity);
	g->n_anti = pod->n_pod_anti_affinity;
	if(!g->ns || !g->labels || !g->ports || !g->anti)
		return PRD_ENOMEM;
	memcpy(g->req, req, sizeof(g->req));
	if(undo_push(s, SCHED__U_GROUP, (uint32_t)s->n_groups, 0, 0, false))
		return PRD_ENOMEM;
	if(g->n_anti)
		s->n_anti_groups++;
	*gi = s->n_groups++;
	return 0;
}

int sched__group_place(sched_snapshot *s, size_t gi, size_t ni, int64_t count)
{
	sched__group *g = &s->groups[gi];
	sched__node *n = &s->nodes[ni];
	bool appended = false;
	size_t i, nports = 0, ports_before = n->n_ports;
	int r;

	if(count <= 0)
		return 0;
	if(s->depth > 0 && GROW(s->undo, s->cap_undo, s->n_undo))
		return PRD_ENOMEM;
	for(i = 0; i < g->n_ports; i++)
		nports += g->ports[i].port != 0;
	/* Host ports are recorded once per pod; only a handful of pods with
	 * host ports can share a node, so the list stays short. */
	if(nports) {
		int64_t k;
		for(k = 0; k < count; k++)
			for(i = 0; i < g->n_ports; i++) {
				if(!g->ports[i].port)
					continue;
				if(GROW(n->ports, n->cap_ports, n->n_ports)) {
					n->n_ports = ports_before;
					return PRD_ENOMEM;
				}
				n->ports[n->n_ports++] = g->ports[i];
			}
	}
	if(g->n_ents && g->ents[g->n_ents - 1].node == ni) {
		g->ents[g->n_ents - 1].count += count;
	} else {
		if(GROW(g->ents, g->cap_ents, g->n_ents)) {
			n->n_ports = ports_before;
			return PRD_ENOMEM;
		}
		g->ents[g->n_ents].node = (uint32_t)ni;
		g->ents[g->n_ents].count = count;
		g->n_ents++;
		appended = true;
	}
	g->total += count;
	for(r = 0; r < SCHED_RES_MAX; r++)
		if(g->req[r])
			n->used[r] = sched__sat_add(n->used[r], sched__sat_mul(g->req[r], count));
	undo_push(s, SCHED__U_PODS, (uint32_t)gi, (uint32_t)ni, count, appended);
	return 0;
}

int sched_snapshot_add_pods(sched_snapshot *s, size_t idx, const sched_pod_spec *pod,
			    int64_t count, prd_err *e)
{
	int64_t req[SCHED_RES_MAX];
	bool impossible;
	size_t gi, i;
	char *key = NULL;
	uintptr_t v = 0;
	int rc;

	if(!s)
		return prd_err_set(e, PRD_EINVAL, "add_pods: NULL snapshot");
	if((rc = sched_pod_validate(pod, e)))
		return rc;
	if(idx >= s->n_nodes)
		return prd_err_set(e, PRD_EINVAL, "add_pods: node index %zu out of range", idx);
	if(count < 0 || count > SCHED_COUNT_MAX)
		return prd_err_set(e, PRD_EINVAL, "add_pods: count %lld out of range",
		                   (long long)count);
	if(count == 0)
		return 0;
	/* A bound pod may use a resource the node does not advertise; intern
	 * it so the overcommit is visible. */
	for(i = 0; i < pod->n_requests; i++)
		if(pod->requests[i].value > 0 && (rc = res_intern(s, pod->requests[i].name, e)) < 0)
			return rc;
	sched__req_vector(s, pod->requests, pod->n_requests, req, &impossible);
	if(pod->n_pod_anti_affinity == 0 && pod->n_host_ports == 0) {
		if(!(key = group_key(pod, req)))
			return prd_err_set(e, PRD_ENOMEM, "out of memory");
		v = (uintptr_t)hmap_get(&s->group_by_key, key);
	}
	if(v) {
		gi = v - 1;
		free(key);
	} else {
		if((rc = sched__group_new(s, pod, req, &gi))) {
			free(key);
			return prd_err_set(e, rc, "out of memory");
		}
		if(key) {
			if(hmap_put(&s->group_by_key, key, (void *)(uintptr_t)(gi + 1))) {
				free(key);
				return prd_err_set(e, PRD_ENOMEM, "out of memory");
			}
			s->groups[gi].key = key;
		}
	}
	if((rc = sched__group_place(s, gi, idx, count)))
		return prd_err_set(e, rc, "out of memory");
	return 0;
}

int sched_snapshot_book(sched_snapshot *s, const char *uid, size_t idx, const sched_res *res,
			size_t n_res, prd_err *e)
{
	sched__booking *b;
	size_t i;
	int r;

	if(!s || !uid || (n_res && !res))
		return prd_err_set(e, PRD_EINVAL, "book: NULL argument");
	if(idx >= s->n_nodes)
		return prd_err_set(e, PRD_EINVAL, "book: node index %zu out of range", idx);
	for(i = 0; i < n_res; i++)
		if(!res[i].name || res[i].value < 0 || res[i].value > SCHED_QTY_MAX)
			return prd_err_set(e, PRD_EINVAL, "book: bad quantity");
	if(s->n_bookings >= UINT32_MAX - 1)
		return prd_err_set(e, PRD_ERANGE, "too many bookings");
	if(GROW(s->bookings, s->cap_bookings, s->n_bookings))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	if(s->depth > 0 && GROW(s->undo, s->cap_undo, s->n_undo))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	for(i = 0; i < n_res; i++)
		if(res[i].value > 0 && (r = res_intern(s, res[i].name, e)) < 0)
			return r;
	b = &s->bookings[s->n_bookings];
	memset(b, 0, sizeof(*b));
	if(!(b->uid = hmap_get(&s->uids, uid))) {
		if(!(b->uid = sched__arena_str(&s->arena, uid)) || hmap_put(&s->uids, uid, (void *)b->uid))
			return prd_err_set(e, PRD_ENOMEM, "out of memory");
	}
	b->node = (uint32_t)idx;
	b->active = true;
	for(i = 0; i < n_res; i++)
		if(res[i].value > 0) {
			r = sched__res_find(s, res[i].name);
			b->res[r] = sched__sat_add(b->res[r], res[i].value);
		}
	for(r = 0; r < SCHED_RES_MAX; r++)
		s->nodes[idx].used[r] = sched__sat_add(s->nodes[idx].used[r], b->res[r]);
	undo_push(s, SCHED__U_BOOK, (uint32_t)s->n_bookings, 0, 0, false);
	s->n_bookings++;
	return 0;
}

static void booking_apply(sched_snapshot *s, const sched__booking *b, int sign)
{
	int r;
	for(r = 0; r < SCHED_RES_MAX; r++)
		s->nodes[b->node].used[r] = sched__sat_add(s->nodes[b->node].used[r], sign * b->res[r]);
}

/* Devices booking bi holds. */
static size_t booking_devices(const sched_snapshot *s, size_t bi)
{
	const sched__ndev *v = s->nodes[s->bookings[bi].node].dev;
	size_t d, k = 0;
	for(d = 0; v && d < v->n; d++)
		k += v->holder[d] == SCHED__HOLD_BOOKING(bi);
	return k;
}

/* Free the devices of booking bi (undo room reserved by the caller). */
static void release_devices(sched_snapshot *s, size_t bi)
{
	const sched__ndev *v = s->nodes[s->bookings[bi].node].dev;
	size_t d;
	for(d = 0; v && d < v->n; d++)
		if(v->holder[d] == SCHED__HOLD_BOOKING(bi))
			sched__dev_hold(s, s->bookings[bi].node, d, SCHED__FREE);
}

void sched_snapshot_booked_mask(const sched_snapshot *s, uint8_t *mask, size_t n)
{
	size_t i;
	memset(mask, 0, n);
	for(i = 0; s && i < s->n_bookings; i++)
		if(s->bookings[i].active && s->bookings[i].node < n)
			mask[s->bookings[i].node] = 1;
}

int sched_snapshot_unbook(sched_snapshot *s, const char *uid, size_t *released)
{
	size_t i, n = 0, need = 0;
	if(!s || !uid)
		return PRD_EINVAL;
	for(i = 0; i < s->n_bookings; i++)
		if(s->bookings[i].active && strcmp(s->bookings[i].uid, uid) == 0)
			need += 1 + booking_devices(s, i);
	/* Reserve the undo records first so the release is all or nothing. */
	if(s->depth > 0)
		while(s->cap_undo - s->n_undo < need)
			if(grow((void **)&s->undo, &s->cap_undo, s->cap_undo, sizeof(*s->undo)))
				return PRD_ENOMEM;
	for(i = 0; i < s->n_bookings; i++) {
		sched__booking *b = &s->bookings[i];
		if(!b->active || strcmp(b->uid, uid) != 0)
			continue;
		b->active = false;
		booking_apply(s, b, -1);
		undo_push(s, SCHED__U_UNBOOK, (uint32_t)i, 0, 0, false);
		release_devices(s, i);
		n++;
	}
	if(released)
		*released = n;
	return 0;
}

int sched__dev_hold(sched_snapshot *s, size_t ni, size_t di, int32_t holder)
{
	int32_t old = s->nodes[ni].dev->holder[di];
	if(undo_push(s, SCHED__U_DEV, (uint32_t)ni, (uint32_t)di, old, false))
		return PRD_ENOMEM;
	s->nodes[ni].dev->holder[di] = holder;
	return 0;
}

/* The device "driver/pool/name" of node n (a pool name may hold slashes,
 * driver and device names do not). */
static int find_device(const sched__node *n, const char *id, size_t *di)
{
	const char *a = strchr(id, '/'), *b = strrchr(id, '/');
	size_t d, ld, lp;
	if(!a || a == b)
		return PRD_EINVAL;
	ld = (size_t)(a - id);
	lp = (size_t)(b - a - 1);
	for(d = 0; n->dev && d < n->dev->n; d++) {
		const sched_device *x = &n->dev->devs[d];
		if(strlen(x->driver) == ld && !strncmp(x->driver, id, ld) && strlen(x->pool) == lp &&
		   !strncmp(x->pool, a + 1, lp) && !strcmp(x->name, b + 1)) {
			*di = d;
			return 0;
		}
	}
	return PRD_ENOTFOUND;
}

int sched_snapshot_take_device(sched_snapshot *s, size_t idx, const char *id, prd_err *e)
{
	size_t di;
	int rc;
	if(!s || !id || idx >= s->n_nodes)
		return prd_err_set(e, PRD_EINVAL, "take_device: bad argument");
	if((rc = find_device(&s->nodes[idx], id, &di)))
		return prd_err_set(e, rc, "node %s has no device %s", s->nodes[idx].name, id);
	if(sched__dev_hold(s, idx, di, SCHED__HOLD_CLAIM))
		return prd_err_set(e, PRD_ENOMEM, "out of memory");
	return 0;
}

int sched_snapshot_book_devices(sched_snapshot *s, const char *uid, size_t idx,
				const char *const *ids, size_t n, size_t *missing, prd_err *e)
{
	size_t i, di, bi, miss = 0;
	int rc;
	if(missing)
		*missing = 0;
	if(n && !ids)
		return prd_err_set(e, PRD_EINVAL, "book_devices: NULL list");
	if((rc = sched_snapshot_book(s, uid, idx, NULL, 0, e)))
		return rc;
	bi = s->n_bookings - 1;
	for(i = 0; i < n; i++) {
		if(!ids[i] || find_device(&s->nodes[idx], ids[i], &di) ||
		   s->nodes[idx].dev->holder[di] != SCHED__FREE) {
			miss++;
			continue;
		}
		if(sched__dev_hold(s, idx, di, SCHED__HOLD_BOOKING(bi)))
			return prd_err_set(e, PRD_ENOMEM, "out of memory");
	}
	if(missing)
		*missing = miss;
	return 0;
}

int sched_snapshot_book_pod_devices(sched_snapshot *s, const char *uid, size_t idx,
				    const sched_pod_spec *pod, int64_t count, int64_t *booked,
				    prd_err *e)
{
	const sched__node *n;
	uint32_t *pick = NULL;
	size_t np = 0, i, bi;
	int64_t fit = 0;
	int rc;
	if(booked)
		*booked = 0;
	if(!s || !pod || idx >= s->n_nodes || count < 0)
		return prd_err_set(e, PRD_EINVAL, "book_pod_devices: bad argument");
	if(!pod->n_dev_requests || count == 0)
		return 0;
	if((rc = sched_snapshot_book(s, uid, idx, NULL, 0, e)))
		return rc;
	bi = s->n_bookings - 1;
	n = &s->nodes[idx];
	if(!n->dev)
		return 0;
	if((rc = sched__dra_fit(n->dev->devs, n->dev->n, n->dev->holder, pod, count, &fit, &pick, &np)))
		return prd_err_set(e, rc, "out of memory");
	for(i = 0; !rc && i < np; i++)
		rc = sched__dev_hold(s, idx, pick[i], SCHED__HOLD_BOOKING(bi));
	free(pick);
	if(rc)
		return prd_err_set(e, rc, "out of memory");
	if(booked)
		*booked = fit;
	return 0;
}

void sched_snapshot_placed_devices(const sched_snapshot *s, const sched_set_result *r, size_t idx,
				   void (*fn)(void *ud, const sched_device *d), void *ud)
{
	const sched__node *n;
	size_t d;
	if(!s || !r || !fn || !r->group || idx >= s->n_nodes)
		return;
	n = &s->nodes[idx];
	for(d = 0; n->dev && d < n->dev->n; d++)
		if(n->dev->holder[d] == (int32_t)r->group)
			fn(ud, &n->dev->devs[d]);
}

size_t sched_snapshot_node_devices(const sched_snapshot *s, size_t idx, size_t *free_out)
{
	const sched__ndev *v;
	size_t d, f = 0;
	if(!s || idx >= s->n_nodes)
		return 0;
	v = s->nodes[idx].dev;
	for(d = 0; v && d < v->n; d++)
		f += v->holder[d] == SCHED__FREE;
	if(free_out)
		*free_out = f;
	return v ? v->n : 0;
}

int sched_snapshot_node_free(const sched_snapshot *s, size_t idx, const char *name,
			     int64_t *out)
{
	int id;
	int64_t f;
	if(!s || !name || !out || idx >= s->n_nodes)
		return PRD_EINVAL;
	id = sched__res_find(s, name);
	if(id < 0) {
		*out = 0;
		return 0;
	}
	f = s->nodes[idx].alloc[id] - s->nodes[idx].used[id];
	*out = f > 0 ? f : 0;
	return 0;
}

int sched_snapshot_fork(sched_snapshot *s)
{
	if(!s)
		return PRD_EINVAL;
	if(s->depth >= SCHED_FORK_MAX)
		return PRD_ERANGE;
	s->marks[s->depth++] = s->n_undo;
	return 0;
}

int sched_snapshot_commit(sched_snapshot *s)
{
	if(!s || s->depth == 0)
		return PRD_EINVAL;
	s->depth--;
	/* At the outermost level nothing can be reverted any more. */
	if(s->depth == 0)
		s->n_undo = 0;
	return 0;
}

/* Undo one record. Records are undone strictly in reverse order, so each
 * one finds the state it left behind (its group entry last, its node last,
 * its ports at the end of the node's list). */
static void undo_one(sched_snapshot *s, const sched__undo *u)
{
	sched__group *g;
	sched__node *n;
	size_t i, nports = 0;
	int r;

	switch(u->kind) {
	case SCHED__U_NODE:
		node_drop_last(s);
		break;
	case SCHED__U_GROUP:
		g = &s->groups[--s->n_groups];
		if(g->key) {
			hmap_del(&s->group_by_key, g->key);
			free(g->key);
		}
		if(g->n_anti)
			s->n_anti_groups--;
		free(g->ents);
		break;
	case SCHED__U_PODS:
		g = &s->groups[u->a];
		n = &s->nodes[u->b];
		for(i = 0; i < g->n_ports; i++)
			nports += g->ports[i].port != 0;
		n->n_ports -= nports * (size_t)u->count;
		if(u->appended)
			g->n_ents--;
		else
			g->ents[g->n_ents - 1].count -= u->count;
		g->total -= u->count;
		for(r = 0; r < SCHED_RES_MAX; r++)
			if(g->req[r])
				n->used[r] = sched__sat_add(n->used[r], -sched__sat_mul(g->req[r], u->count));
		break;
	case SCHED__U_BOOK:
		booking_apply(s, &s->bookings[u->a], -1);
		s->n_bookings--;
		break;
	case SCHED__U_UNBOOK:
		s->bookings[u->a].active = true;
		booking_apply(s, &s->bookings[u->a], +1);
		break;
	case SCHED__U_DEV:
		s->nodes[u->a].dev->holder[u->b] = (int32_t)u->count;
		break;
	}
}

int sched_snapshot_revert(sched_snapshot *s)
{
	size_t mark;
	if(!s || s->depth == 0)
		return PRD_EINVAL;
	mark = s->marks[--s->depth];
	while(s->n_undo > mark)
		undo_one(s, &s->undo[--s->n_undo]);
	return 0;
}

int sched_snapshot_depth(const sched_snapshot *s)
{
	return s ? s->depth : 0;
}

/* The world stage's nodes (world.c calls them): the node groups the
 * drivers list, what the drivers are told about Nodes, and the node table.
 *
 * Reads: the loaded drivers (node groups, templates, ABI 1.2 template
 * devices), the Node cache (under world.c's read lock) and its journal.
 * Writes: w->groups (pr__load_groups), the drivers' view of the Nodes
 * (nodes_changed, c->fed_gen) and their fences for this term
 * (c->fenced_groups); every node's presence and readiness, creation time
 * and whether provreqd made it (c->nodes_by_name, c->born, c->made:
 * pr__node_table) and the nodes provreqd made (w->marked:
 * pr__marked_nodes). */
#include "classes/class.h"
#include "provreq/ctl_int.h"
#include "provreq/convert.h"
#include "provreq/scaledown.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- node groups ---------------------------------------------------------- */

/* The DRA devices a new node of the group publishes, when its driver
 * declares them (ABI 1.2). */
static int template_devices(pr_world *w, cloud_driver *drv, pr_group *pg, prd_err *err)
{
	prd_cloud_error de;
	json_object *arr;
	char *js = NULL;
	int rc;
	if(!CLOUD_DRIVER_HAS(drv->api, template_resource_slices) || !drv->api->template_resource_slices)
		return 0;
	memset(&de, 0, sizeof(de));
	if(drv->api->template_resource_slices(drv->state, pg->id, &js, &de))
		return prd_err_set(err, PRD_EIO, "template ResourceSlices: %s", de.message);
	if(!js)
		return 0;
	arr = json_tokener_parse(js);
	drv->api->release_string(drv->state, js);
	if(!arr)
		return prd_err_set(err, PRD_EINVAL, "template ResourceSlices: not JSON");
	rc = pr_dra_template_devices(&w->ar, arr, pg->tmpl.name, &pg->tmpl.devices, &pg->tmpl.n_devices, err);
	if(!rc && pg->tmpl.n_devices && arena_defer(&w->ar, pr__put_json, arr)) {
		json_object_put(arr);
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	}
	if(rc || !pg->tmpl.n_devices)
		json_object_put(arr);
	return rc;
}

/* ---- telling drivers about Nodes (ABI 1.2 nodes_changed) --------------- */

typedef struct node_feed {
	kube_informer *inf;
	arena ar;
	hmap names;               /* names already in v */
	prd_cloud_node *v;
	size_t n, cap;
	bool nomem;
} node_feed;

/* One Node as the cache has it now (NULL: gone), copied into the feed's
 * arena: the driver is called after the cache lock is released. */
static void feed_node(node_feed *f, const char *name, const kube_node *kn)
{
	prd_cloud_node *d;
	size_t i;
	if(f->nomem || hmap_has(&f->names, name))
		return;
	if(f->n == f->cap) {
		size_t nc = f->cap ? f->cap * 2 : 64;
		prd_cloud_node *nv = realloc(f->v, nc * sizeof(*nv));
		if(!nv) {
			f->nomem = true;
			return;
		}
		f->v = nv;
		f->cap = nc;
	}
	d = &f->v[f->n];
	memset(d, 0, sizeof(*d));
	d->name = arena_strdup(&f->ar, name);
	if(!d->name || hmap_put(&f->names, d->name, NULL)) {
		f->nomem = true;
		return;
	}
	f->n++;
	if(!kn)
		return;
	d->present = 1;
	d->ready = kn->ready == KUBE_COND_TRUE;
	d->deleting = kn->meta.deleted_ns != 0;
	d->provider_id = kn->provider_id ? arena_strdup(&f->ar, kn->provider_id) : NULL;
	if(kn->nlabels) {
		prd_cloud_label *l = arena_array(&f->ar, kn->nlabels, sizeof(*l));
		if(!l) {
			f->nomem = true;
			return;
		}
		for(i = 0; i < kn->nlabels; i++) {
			l[i].key = arena_strdup(&f->ar, kn->labels[i].key);
			l[i].value = arena_strdup(&f->ar, kn->labels[i].value ? kn->labels[i].value : "");
			f->nomem |= !l[i].key || !l[i].value;
		}
		d->labels = l;
		d->nlabels = kn->nlabels;
	}
	f->nomem |= kn->provider_id && !d->provider_id;
}

static int feed_all(void *ud, const kube_meta *m)
{
	feed_node(ud, m->name, (const kube_node *)m);
	return 0;
}

static int feed_key(void *ud, const char *ns, const char *name)
{
	node_feed *f = ud;
	feed_node(f, name, (const kube_node *)kube_informer_get(f->inf, ns, name));
	return 0;
}

/* Tell a driver that reads Nodes what changed in the Node cache since it
 * was last told (everything the first time, or when the cache's journal
 * no longer reaches back that far), so its refresh need not list Nodes. */
static void feed_nodes(pr_ctl *c, size_t d)
{
	cloud_driver *drv = c->drivers->v[d];
	node_feed f;
	uint64_t gen;
	bool full;
	prd_cloud_error de;
	int rc;
	if(!c->use_inf || !CLOUD_DRIVER_HAS(drv->api, nodes_changed) || !drv->api->nodes_changed)
		return;
	if(c->nfed < c->drivers->n) {
		uint64_t *g = realloc(c->fed_gen, c->drivers->n * sizeof(*g));
		bool *b = g ? realloc(c->fed, c->drivers->n * sizeof(*b)) : NULL;
		if(g)
			c->fed_gen = g;
		if(!b)
			return; /* the driver lists, as without this */
		c->fed = b;
		memset(c->fed + c->nfed, 0, (c->drivers->n - c->nfed) * sizeof(*b));
		c->nfed = c->drivers->n;
	}
	memset(&f, 0, sizeof(f));
	f.inf = c->inf.nodes;
	arena_init(&f.ar);
	hmap_init(&f.names, NULL);
	kube_informer_rdlock(c->inf.nodes);
	gen = kube_informer_generation(c->inf.nodes);
	full = !c->fed[d];
	if(!full && gen != c->fed_gen[d] && kube_informer_changes(c->inf.nodes, c->fed_gen[d], feed_key, &f)) {
		full = true; /* lost track: everything */
		f.n = 0;
		hmap_free(&f.names);
		hmap_init(&f.names, NULL);
	}
	if(full)
		kube_informer_foreach(c->inf.nodes, feed_all, &f);
	kube_informer_rdunlock(c->inf.nodes);
	memset(&de, 0, sizeof(de));
	if(f.nomem)
		rc = PRD_CLOUD_ENOMEM;
	else if(!full && f.n == 0)
		rc = 0; /* nothing changed: nothing to say */
	else
		rc = drv->api->nodes_changed(drv->state, f.v, f.n, full, &de);
	c->fed[d] = rc == 0;
	c->fed_gen[d] = gen;
	if(rc)
		log_warn("cannot tell a driver about Nodes; it is told everything next pass", "driver",
			 drv->api->name, "error", f.nomem ? "out of memory" : de.message);
	hmap_free(&f.names);
	arena_free(&f.ar);
	free(f.v);
}

/* Before a term acts on a group, the group records the term (ABI 1.4
 * fence), so that a late call of an earlier leader (stalled inside or
 * before the call) is refused by the cloud. Until every group of a fencing
 * driver has confirmed it, the pass acts on nothing (retried a second
 * later): a former leader's call may still land on a group that has not.
 * A group that has seen a newer term: term_refused. */
/* A fence was refused: the group (or a driver's creations, gid NULL)
 * records a term of this election above this replica's. While the lease
 * is not held, a newer leader fenced it: this replica no longer leads.
 * While it is held, no newer leader can exist in this election: its count
 * started again (a recreated Lease, a lease namespace changed) below what
 * a former term recorded. The recorded term is read (ABI 1.7) and the
 * Lease's count raised to it (c->raise), so the next pass fences again
 * with a term above it; a former leader's late calls, which carry the
 * recorded term or an older one, stay refused. The pass acts on nothing
 * either way. */
static void term_refused(pr_ctl *c, cloud_driver *drv, const char *gid, const char *what, const char *id,
			 const char *msg)
{
	const prd_cloud_driver *api = drv->api;
	prd_cloud_error de;
	uint64_t rec = 0;
	char key[64], ident[256], why[300] = "";
	prd_err e;
	int rc;
	memset(&de, 0, sizeof(de));
	if(c->may_act && !c->may_act(c->may_act_ud)) {
		snprintf(c->fenced_out, sizeof(c->fenced_out),
			 "fenced out: %s %s records a newer term of '%s' than this replica's (%s), and the lease is "
			 "not held: another replica leads",
			 what, id, c->fence_key, c->term);
		log_warn("a node group has seen a newer leader term and the lease is not held: this replica no longer "
			 "leads; the pass stops acting",
			 what, id, "term", c->term, "error", msg);
		return;
	}
	rc = api->abi_minor >= 7 && CLOUD_DRIVER_HAS(api, fence_recorded) && api->fence_recorded
		     ? api->fence_recorded(drv->state, gid, c->fence_key, &rec, &de)
		     : PRD_CLOUD_EUNSUPPORTED;
	de.message[sizeof(de.message) - 1] = '\0';
	if(rc)
		snprintf(why, sizeof(why), "the recorded term cannot be read: %.200s",
			 rc == PRD_CLOUD_EUNSUPPORTED ? "the driver does not say (ABI < 1.7)" : de.message);
	else if(rec < c->fence_term)
		snprintf(why, sizeof(why), "the recorded term is %llu now; fencing again", (unsigned long long)rec);
	else if(!c->raise)
		snprintf(why, sizeof(why), "this replica cannot raise its term");
	else if(c->raises >= PR_TERM_RAISES_MAX)
		snprintf(why, sizeof(why),
			 "its term was raised %u times since it took the lease and terms keep rising past it: another "
			 "election with the same key acts on these groups; this replica stands by",
			 c->raises);
	else if(rec > (uint64_t)INT64_MAX - 1)
		snprintf(why, sizeof(why), "the recorded term is out of range");
	else if(c->raise(c->raise_ud, (int64_t)rec, &e))
		snprintf(why, sizeof(why), "raising the Lease's term failed: %.200s", e.msg);
	if(!why[0]) {
		str_copy(key, sizeof(key), c->fence_key);
		str_copy(ident, sizeof(ident), c->term_id);
		c->raises++;
		pr__term_apply(c, key, ident, (int64_t)rec);
		c->need_rebuild = true;
		log_warn("a node group records a leader term above this replica's while it holds the lease (the Lease "
			 "was recreated or its count started again): the Lease's term was raised above it; the next "
			 "pass fences again",
			 what, id, "recorded", LOGI((long long)rec), "term", c->term);
		snprintf(c->fenced_out, sizeof(c->fenced_out),
			 "%s %s records term %llu of '%s', above this replica's; the Lease's term was raised to %llu "
			 "and the next pass fences again",
			 what, id, (unsigned long long)rec, key, (unsigned long long)c->fence_term);
		pr__wake_at(c, c->now + 1);
		return;
	}
	snprintf(c->fenced_out, sizeof(c->fenced_out),
		 "fenced out while holding the lease: %s %s records a newer term of '%s' than this replica's (%s); %s",
		 what, id, c->fence_key, c->term, why);
	log_warn("a node group records a leader term above this replica's while it holds the lease; the pass acts "
		 "on nothing",
		 what, id, "term", c->term, "cause", why, "error", msg);
	pr__wake_at(c, c->now + PRD_NS_PER_SEC);
}

/* A fence was refused (rc PRD_CLOUD_ECONFLICT: term_refused) or failed
 * (`retry`, and again a second later): the pass acts on nothing. */
static void fence_failed(pr_ctl *c, cloud_driver *drv, const char *gid, int rc, const char *retry, const char *what,
			 const char *id, const char *msg)
{
	c->fenced = true;
	metrics_counter_add(M_RECONCILE_ERRORS, METRICS_L("provreq", "fenced"), 1);
	if(rc == PRD_CLOUD_ECONFLICT) {
		term_refused(c, drv, gid, what, id, msg);
		return;
	}
	if(c->next_wake > c->now + PRD_NS_PER_SEC)
		c->next_wake = c->now + PRD_NS_PER_SEC;
	snprintf(c->fenced_out, sizeof(c->fenced_out), "cannot fence %s %s for this leader term (retrying): %s", what,
		 id, msg);
	log_warn(retry, what, id, "error", msg);
}

/* True when the group was fenced by this call (its target was read
 * before: read it again). */
static bool fence_group(pr_ctl *c, pr_group *g)
{
	const prd_cloud_driver *api = g->drv->api;
	prd_cloud_error de;
	int rc;
	if(!c->fence_term || !(cloud_driver_caps(api) & PRD_CLOUD_CAP_FENCE) || !CLOUD_DRIVER_HAS(api, fence) ||
	   !api->fence || hmap_has(&c->fenced_groups, g->id) || !pr__may_act(c))
		return false;
	memset(&de, 0, sizeof(de));
	rc = api->fence(g->drv->state, g->id, c->fence_key, c->fence_term, &de);
	de.message[sizeof(de.message) - 1] = '\0';
	if(rc == 0 && hmap_put(&c->fenced_groups, g->id, NULL) == 0) {
		log_debug("node group fenced for this leader term", "group", g->id, "term", c->term);
		return true;
	}
	fence_failed(c, g->drv, g->id, rc,
		     "cannot fence a node group for this leader term: the pass acts on nothing until every group is "
		     "fenced; retrying",
		     "group", g->id, rc ? de.message : "out of memory");
	return false;
}

/* The targets of the groups w->groups[from..] of driver drv, read again
 * after a fence: a former leader's increase that landed between the first
 * read and the fence is in them (read before, it would look as if the
 * cloud never took it, and its instances would belong to no plan). A
 * group the second answer lacks, or an answer that fails, leaves the pass
 * acting on nothing (retried a second later). */
static void targets_after_fence(pr_ctl *c, pr_world *w, cloud_driver *drv, size_t from)
{
	prd_cloud_node_group *g = NULL;
	prd_cloud_error de;
	size_t n = 0, i, j;
	memset(&de, 0, sizeof(de));
	if(drv->api->node_groups(drv->state, &g, &n, &de)) {
		de.message[sizeof(de.message) - 1] = '\0';
		fence_failed(c, drv, NULL, PRD_CLOUD_EIO, "cannot read node groups again after fencing them; retrying",
			     "driver", drv->api->name, de.message);
		return;
	}
	for(i = from; i < w->ngroups; i++) {
		for(j = 0; j < n && (!g[j].id || strcmp(g[j].id, w->groups[i].id)); j++)
			;
		if(j < n)
			w->groups[i].target = g[j].target_size;
		else
			w->groups[i].target_stale = true;
	}
	drv->api->release_node_groups(drv->state, g, n);
}

/* The same for a driver's group creations (ABI 1.6, node
 * auto-provisioning): recorded once a term, so that a former leader's late
 * create_group is refused, and its late increase finds no group. */
static void fence_creations(pr_ctl *c, cloud_driver *drv)
{
	const prd_cloud_driver *api = drv->api;
	prd_cloud_error de;
	char key[300];
	int rc;
	if(!c->fence_term || !cloud_driver_naps(api) || !(cloud_driver_caps(api) & PRD_CLOUD_CAP_FENCE) ||
	   api->abi_minor < 6 || !CLOUD_DRIVER_HAS(api, fence) || !api->fence)
		return;
	snprintf(key, sizeof(key), "create/%s", api->name);
	if(hmap_has(&c->fenced_groups, key) || !pr__may_act(c))
		return;
	memset(&de, 0, sizeof(de));
	rc = api->fence(drv->state, NULL, c->fence_key, c->fence_term, &de);
	de.message[sizeof(de.message) - 1] = '\0';
	if(rc == 0 && hmap_put(&c->fenced_groups, key, NULL) == 0)
		return;
	fence_failed(c, drv, NULL, rc,
		     "cannot fence a driver's group creations for this leader term: the pass acts on nothing until it "
		     "is; retrying",
		     "driver", api->name, rc ? de.message : "out of memory");
}

/* Why a group has no usable template: at warn once, and again only when
 * the reason changes (every pass asks; a group that cannot scale from zero
 * would fill the log); at debug in between. */
static void say_no_template(pr_ctl *c, const char *group, const char *what, const char *why)
{
	char said[700];
	const char *was = hmap_get(&c->tmpl_said, group);
	char *keep;
	snprintf(said, sizeof(said), "%s: %s", what, why ? why : "");
	if(was && !strcmp(was, said)) {
		log_debug(what, "group", group, "error", why ? why : "");
		return;
	}
	log_warn(what, "group", group, "error", why ? why : "");
	if((keep = str_dup(said)) && hmap_put(&c->tmpl_said, group, keep))
		free(keep);
}

int pr__load_groups(pr_ctl *c, pr_world *w, prd_err *err)
{
	size_t d, i;
	if(!c->drivers)
		return 0;
	for(d = 0; d < c->drivers->n; d++) {
		cloud_driver *drv = c->drivers->v[d];
		prd_cloud_node_group *g = NULL;
		prd_cloud_error de;
		size_t n = 0, first = w->ngroups;
		bool fenced_now = false;
		pr_group *nv;
		memset(&de, 0, sizeof(de));
		feed_nodes(c, d);
		if(drv->api->refresh(drv->state, &de) || drv->api->node_groups(drv->state, &g, &n, &de)) {
			prd_err e;
			cloud_driver_error(drv, "listing node groups", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
			log_error("cannot list node groups; scale-ups through this driver wait", "error", e.msg);
			w->groups_incomplete = true;
			continue;
		}
		nv = realloc(w->groups, (w->ngroups + n + 1) * sizeof(*nv));
		if(!nv) {
			drv->api->release_node_groups(drv->state, g, n);
			return prd_err_set(err, PRD_ENOMEM, "out of memory");
		}
		w->groups = nv;
		for(i = 0; i < n; i++) {
			pr_group *pg = &w->groups[w->ngroups];
			char *js = NULL;
			prd_err ce;
			memset(pg, 0, sizeof(*pg));
			pg->drv = drv;
			pg->id = str_dup(g[i].id);
			pg->min = g[i].min_size;
			pg->max = g[i].max_size;
			pg->target = g[i].target_size;
			if(!pg->id)
				continue;
			w->ngroups++;
			if(drv->api->template_node(drv->state, g[i].id, &js, &de) == 0 && js) {
				pg->tmpl_json = json_tokener_parse(js);
				drv->api->release_string(drv->state, js);
				if(pg->tmpl_json && pr_conv_node(&w->ar, pg->tmpl_json, &pg->tmpl, &ce) == 0 &&
				   template_devices(w, drv, pg, &ce) == 0) {
					pg->has_tmpl = true;
					hmap_del(&c->tmpl_said, pg->id);
				} else {
					say_no_template(c, pg->id, "node group template is not a usable Node",
							pg->tmpl_json ? ce.msg : "not JSON");
				}
			} else {
				say_no_template(c, pg->id, "node group has no template node", de.message);
			}
			if(cloud_driver_naps(drv->api)) {
				char *owner = NULL;
				/* (A group the driver cannot tell about is taken as
				 * one it did not create: never deleted as idle.) */
				if(drv->api->group_owner(drv->state, pg->id, &owner, &de) == 0 && owner) {
					pg->nap_owner = str_dup(owner);
					drv->api->release_string(drv->state, owner);
				}
			}
			if(c->db)
				state_group_backed_off(c->db, pg->id, &pg->backed_off, &pg->backoff_until, NULL);
			if(c->fence_term) {
				pg->fence_key = c->fence_key;
				pg->fence_term = c->fence_term;
			}
			fenced_now |= fence_group(c, pg);
		}
		drv->api->release_node_groups(drv->state, g, n);
		/* Fence first, then read: the targets read above came before
		 * the fences this pass made. */
		if(fenced_now)
			targets_after_fence(c, w, drv, first);
		fence_creations(c, drv);
	}
	return 0;
}

/* ---- the node table ------------------------------------------------------ */

static bool made_by_us(const kube_node *n)
{
	char uidb[PR_OWNER_MAX];
	bool by_label;
	return pr__node_made_for(n, uidb, sizeof(uidb), &by_label) != NULL;
}

/* One node into the node tables. 0 or PRD_ENOMEM. */
static int node_note(pr_ctl *c, const kube_node *n)
{
	int64_t *born = hmap_get(&c->born, n->meta.name);
	if(hmap_put(&c->nodes_by_name, n->meta.name, pr__node_usable(n) ? PR_NODE_USABLE : PR_NODE_PRESENT))
		return PRD_ENOMEM;
	if(!born) {
		born = malloc(sizeof(*born));
		if(!born || hmap_put(&c->born, n->meta.name, born)) {
			free(born);
			return PRD_ENOMEM;
		}
	}
	*born = n->meta.created_ns;
	if(!made_by_us(n))
		hmap_del(&c->made, n->meta.name);
	else if(hmap_put(&c->made, n->meta.name, NULL))
		return PRD_ENOMEM;
	return 0;
}

static int node_state_changed(void *ud, const char *ns, const char *name)
{
	pr_ctl *c = ud;
	const kube_node *n = (const kube_node *)kube_informer_get(c->inf.nodes, ns, name);
	if(!n) {
		hmap_del(&c->nodes_by_name, name);
		hmap_del(&c->born, name);
		hmap_del(&c->made, name);
		return 0;
	}
	return node_note(c, n);
}

/* verify_snapshot: the node tables kept from the journal against the
 * nodes. */
static void verify_node_table(pr_ctl *c, const pr_world *w)
{
	size_t i, made = 0, bad = 0;
	for(i = 0; i < w->nnodes; i++) {
		const kube_node *n = w->nodes[i];
		const int64_t *born = hmap_get(&c->born, n->meta.name);
		bool m = made_by_us(n);
		made += m;
		bad += hmap_get(&c->nodes_by_name, n->meta.name) != (pr__node_usable(n) ? PR_NODE_USABLE : PR_NODE_PRESENT);
		bad += !born || *born != n->meta.created_ns;
		bad += m != hmap_has(&c->made, n->meta.name);
	}
	bad += hmap_len(&c->nodes_by_name) != w->nnodes || hmap_len(&c->born) != w->nnodes ||
	       hmap_len(&c->made) != made;
	if(bad) {
		c->stats.snapshot_mismatches++;
		log_warn("the node table kept from the journal differs from the nodes", "differences", LOGI(bad));
	}
}

/* Every node's presence and readiness (w->nodes_by_name), creation time
 * (c->born) and whether a plan of provreqd's made it (c->made): in
 * informer mode kept from the node cache's journal, else built anew. */
int pr__node_table(pr_ctl *c, pr_world *w)
{
	size_t i;
	int rc = 0;
	w->nodes_by_name = &c->nodes_by_name;
	if(pr__incremental(c, w) && c->nbn_valid &&
	   (c->nbn_gen == w->gen_nodes || kube_informer_changes(c->inf.nodes, c->nbn_gen, node_state_changed, c) == 0)) {
		c->nbn_gen = w->gen_nodes;
		if(c->cfg.verify_snapshot)
			verify_node_table(c, w);
		return 0;
	}
	hmap_free(&c->nodes_by_name);
	hmap_free(&c->born);
	hmap_free(&c->made);
	hmap_init(&c->nodes_by_name, NULL);
	hmap_init(&c->born, free);
	hmap_init(&c->made, NULL);
	for(i = 0; i < w->nnodes && !rc; i++)
		rc = node_note(c, w->nodes[i]);
	c->nbn_valid = pr__incremental(c, w) && !rc;
	c->nbn_gen = w->gen_nodes;
	return rc;
}

int pr__node_totals(pr_ctl *c, pr_world *w)
{
	size_t i, l, r;
	if(!c->limits.nres_limits)
		return 0;
	w->res_totals = calloc(c->limits.nres_limits, sizeof(*w->res_totals));
	if(!w->res_totals)
		return PRD_ENOMEM;
	/* Capacity, as cluster-autoscaler counts its limits: what the
	 * machines have, whoever made them, Ready or not. */
	for(i = 0; i < w->nnodes; i++) {
		const kube_node *n = w->nodes[i];
		pr_marked key = { .name = n->meta.name }, *m = NULL;
		if(w->nmarked)
			m = bsearch(&key, w->marked, w->nmarked, sizeof(*w->marked), pr__marked_cmp);
		if(m && !(m->res = arena_array(&w->ar, c->limits.nres_limits, sizeof(*m->res))))
			return PRD_ENOMEM;
		for(l = 0; l < c->limits.nres_limits; l++)
			for(r = 0; r < n->ncapacity; r++) {
				int64_t v = 0;
				if(strcmp(n->capacity[r].name, c->limits.res_limits[l].resource))
					continue;
				if(!strcmp(n->capacity[r].name, "cpu") ? qty_milli_value(&n->capacity[r].q, &v)
								       : qty_value(&n->capacity[r].q, &v))
					v = 0;
				if(v > 0 && w->res_totals[l] <= INT64_MAX - v)
					w->res_totals[l] += v;
				if(m && v > 0)
					m->res[l] = v;
			}
	}
	return 0;
}

/* The nodes provreqd's plans made (w->marked, for scale-down), by name. In
 * informer mode from the node table's list of them, else from every node. */
int pr__marked_nodes(pr_ctl *c, pr_world *w)
{
	size_t i;
	if(!c->cfg.scale_down)
		return 0;
	if(pr__incremental(c, w)) {
		hmap_iter it;
		const char *name;
		hmap_iter_init(&it, &c->made);
		while(hmap_iter_next(&it, &name, NULL)) {
			const kube_node *n = (const kube_node *)kube_informer_get(c->inf.nodes, "", name);
			if(n && pr__scaledown_digest(w, n))
				return PRD_ENOMEM;
		}
	} else {
		for(i = 0; i < w->nnodes; i++)
			if(pr__scaledown_digest(w, w->nodes[i]))
				return PRD_ENOMEM;
	}
	/* One order whichever way they were found: removals at a group's min
	 * size depend on it. */
	if(w->nmarked)
		qsort(w->marked, w->nmarked, sizeof(*w->marked), pr__marked_cmp);
	return 0;
}

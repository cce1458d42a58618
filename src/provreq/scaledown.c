/* Scale-down of the nodes provreqd added (issue: "nodes stay forever").
 *
 * Which nodes a plan made, and for which request:
 *  - where the cloud marks what it creates (PRD_CLOUD_CAP_OWNER_MARK and
 *    the mark reaches the Node: kwok stamps the label on the Node it
 *    creates, Karpenter copies its NodeClaim's labels), the Node's
 *    provreqd.io/owner label, whose token begins with the request's uid.
 *    Nothing more is written: the node costs one API write, its creation.
 *  - elsewhere (Cluster API: a MachineDeployment's node labels are the same
 *    for every Machine, whatever plan asked for it), the annotations
 *    provreqd.io/provisioned-for (namespace/name of the request) and
 *    provreqd.io/provisioned-for-uid, written on each node when the plan
 *    succeeds (pr__mark_node).
 * Both live in the API, so a new leader or a restarted replica knows them
 * with no state of its own.
 *
 * Such a node is idle when the booking of that request has ended and no pod
 * other than DaemonSet and mirror pods runs on it. The booking has ended
 * when the request is gone or final (Failed, BookingExpired,
 * CapacityRevoked); for a node known by the annotation also when the
 * request is no longer Provisioned (the annotation is written only on
 * success). A labelled node of a request that is not final may belong to a
 * plan still under way or being rolled back (the rollback deletes it): it
 * is never idle. After --scale-down-idle of idleness it is cordoned; on
 * the next pass, still idle, it is deleted through its driver (never below
 * the group's min size). Nothing is ever evicted: a pod arriving on a
 * cordoned node uncordons it. The node annotation
 * provreqd.io/scale-down-disabled: "true" opts a node out; on a group's
 * template node it opts the group out. A node on which another request
 * holds a booking is not idle. Idle times are kept in memory: a
 * restart starts them over, which only delays a removal. */
#include "classes/class.h"
#include "classes/vocab.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/ctl_int.h"
#include "provreq/scaledown.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *node_ann(const kube_node *n, const char *key)
{
	size_t i;
	for(i = 0; i < n->nannotations; i++)
		if(!strcmp(n->annotations[i].key, key))
			return n->annotations[i].value;
	return NULL;
}

static const char *node_label(const kube_node *n, const char *key)
{
	size_t i;
	for(i = 0; i < n->nlabels; i++)
		if(!strcmp(n->labels[i].key, key))
			return n->labels[i].value;
	return NULL;
}

const char *pr__node_made_for(const kube_node *n, char *out, size_t len, bool *by_label)
{
	const char *uid = node_ann(n, PR_ANN_PROVISIONED_FOR_UID), *tok, *dot;
	*by_label = false;
	if(uid && uid[0])
		return uid;
	/* pr_owner_token made '/' the first '.': what comes before it is the
	 * request's uid. A label that is no token of provreqd's names no one. */
	tok = node_label(n, PR_LABEL_OWNER);
	if(!tok || !(dot = strchr(tok, '.')) || dot == tok || (size_t)(dot - tok) >= len)
		return NULL;
	memcpy(out, tok, (size_t)(dot - tok));
	out[dot - tok] = '\0';
	*by_label = true;
	return out;
}

int pr__scaledown_digest(pr_world *w, const kube_node *n)
{
	char uidb[PR_OWNER_MAX];
	bool by_label;
	const char *uid = pr__node_made_for(n, uidb, sizeof(uidb), &by_label);
	pr_marked *m;
	if(!uid)
		return 0;
	if(w->nmarked == w->capmarked) {
		size_t nc = w->capmarked ? w->capmarked * 2 : 16;
		pr_marked *nv = realloc(w->marked, nc * sizeof(*nv));
		if(!nv)
			return PRD_ENOMEM;
		w->marked = nv;
		w->capmarked = nc;
	}
	m = &w->marked[w->nmarked];
	memset(m, 0, sizeof(*m));
	m->name = arena_strdup(&w->ar, n->meta.name);
	m->uid = arena_strdup(&w->ar, uid);
	m->cordoned = node_ann(n, PR_ANN_SCALE_DOWN_CORDONED) != NULL;
	m->opted_out = str_eq(node_ann(n, PR_ANN_SCALE_DOWN_DISABLED), "true");
	m->unschedulable = n->unschedulable;
	m->by_label = by_label;
	if(!m->name || !m->uid)
		return PRD_ENOMEM;
	w->nmarked++;
	return 0;
}

int pr__marked_cmp(const void *a, const void *b)
{
	return strcmp(((const pr_marked *)a)->name, ((const pr_marked *)b)->name);
}

bool pr__pod_blocks_scaledown(const kube_pod *p)
{
	if(!p->node_name || p->phase == KUBE_POD_SUCCEEDED || p->phase == KUBE_POD_FAILED)
		return false;
	/* DaemonSet pods run everywhere; mirror (static) pods are owned by
	 * their Node. */
	return !(p->owner_kind && (!strcmp(p->owner_kind, "DaemonSet") || !strcmp(p->owner_kind, "Node")));
}

/* A merge patch of a Node, without asking whether this replica may act
 * (the caller did). Safe on several threads at once. */
static int send_node_patch(pr_ctl *c, const char *name, const char *json, prd_err *err)
{
	json_object *patch = json_tokener_parse(json);
	char path[400];
	int rc;
	if(!patch)
		return prd_err_set(err, PRD_EINVAL, "bad patch");
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
	rc = kube_api_call(&c->api, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL, err);
	json_object_put(patch);
	return rc;
}

static int patch_node(pr_ctl *c, const char *name, const char *json, prd_err *err)
{
	if(!pr__may_act(c))
		return prd_err_set(err, PRD_EAGAIN, "fenced");
	return send_node_patch(c, name, json, err);
}

/* A mark to write at the end of the pass. */
struct pr_node_mark {
	char *node;
	char *patch;
	int rc;
	prd_err err;
};

/* Marks are written at the end of the pass with the status writes, several
 * at a time: a plan of 1,000 nodes succeeds with 1,000 PATCHes, seconds
 * of round trips one after another. Out of memory, one is written now.
 * A node whose owner label already names the request needs none: that
 * label came with its creation, and scale-down reads it. */
void pr__mark_node(pr_ctl *c, pr_world *w, const kube_provreq *pr, const char *node)
{
	struct pr_node_mark nm;
	pr_marked key = { 0 };
	const pr_marked *m;
	char js[1200];
	prd_err e;
	if(!c->cfg.scale_down)
		return;
	/* What the world read of the node (w->marked: every node a plan of
	 * provreqd's made, by name; the caches are not to be read here). */
	key.name = node;
	m = w->nmarked ? bsearch(&key, w->marked, w->nmarked, sizeof(*w->marked), pr__marked_cmp) : NULL;
	if(m && pr->meta.uid && !strcmp(m->uid, pr->meta.uid)) {
		c->stats.marks_stamped++;
		return;
	}
	snprintf(js, sizeof(js), "{\"metadata\":{\"annotations\":{\"%s\":\"%s/%s\",\"%s\":\"%s\"}}}", PR_ANN_PROVISIONED_FOR,
		 pr->meta.ns, pr->meta.name, PR_ANN_PROVISIONED_FOR_UID, pr->meta.uid);
	memset(&nm, 0, sizeof(nm));
	nm.node = str_dup(node);
	nm.patch = str_dup(js);
	if(nm.node && nm.patch && c->nmarks == c->capmarks) {
		size_t nc = c->capmarks ? c->capmarks * 2 : 64;
		struct pr_node_mark *nv = realloc(c->marks, nc * sizeof(*nv));
		if(nv) {
			c->marks = nv;
			c->capmarks = nc;
		}
	}
	if(nm.node && nm.patch && c->nmarks < c->capmarks) {
		c->marks[c->nmarks++] = nm;
		return;
	}
	free(nm.node);
	free(nm.patch);
	if(!patch_node(c, node, js, &e))
		c->stats.marks_written++;
	else
		log_warn("cannot mark a new node as provreqd's; it will not be scaled down", "node", node, "error", e.msg);
}

static void mark_one(void *ud, size_t i)
{
	pr_ctl *c = ud;
	struct pr_node_mark *m = &c->marks[i];
	/* Before each PATCH, as the status writes do (c->may_act is safe
	 * from any thread). */
	if(c->may_act && !c->may_act(c->may_act_ud)) {
		m->rc = prd_err_set(&m->err, PRD_EAGAIN, "fenced: this replica may no longer hold the lease");
		return;
	}
	m->rc = send_node_patch(c, m->node, m->patch, &m->err);
}

void pr__marks_flush(pr_ctl *c)
{
	size_t i;
	if(!c->nmarks)
		return;
	/* Fenced: the lease may be another replica's; write nothing. */
	if(!pr__may_act(c)) {
		log_warn("not marking new nodes as provreqd's: this replica may no longer lead; they will not be "
			 "scaled down", "nodes", LOGI(c->nmarks));
		pr__marks_discard(c);
		return;
	}
	pr__parallel(c->cfg.status_writers ? c->cfg.status_writers : 1, c->nmarks, mark_one, c);
	for(i = 0; i < c->nmarks; i++)
		if(c->marks[i].rc == PRD_EAGAIN && !pr__may_act(c))
			break;
	for(i = 0; i < c->nmarks; i++)
		if(c->marks[i].rc == PRD_EAGAIN)
			log_debug("node not marked: the fence closed first", "node", c->marks[i].node);
		else if(!c->marks[i].rc)
			c->stats.marks_written++;
		else
			log_warn("cannot mark a new node as provreqd's; it will not be scaled down", "node",
				 c->marks[i].node, "error", c->marks[i].err.msg);
	pr__marks_discard(c);
}

void pr__marks_discard(pr_ctl *c)
{
	size_t i;
	for(i = 0; i < c->nmarks; i++) {
		free(c->marks[i].node);
		free(c->marks[i].patch);
	}
	c->nmarks = 0;
}

static void node_event(pr_ctl *c, const char *node, const char *type, const char *reason, const char *msg)
{
	kube_object_ref ref;
	memset(&ref, 0, sizeof(ref));
	ref.kind = "Node";
	ref.api_version = "v1";
	ref.name = node;
	kube_recorder_event(c->recorder, &ref, type, reason, "%s", msg);
}

/* Has the booking of the request the node was made for ended?
 * by_uid: the pass's requests by uid. */
static bool booking_ended(const hmap *by_uid, const pr_marked *m)
{
	const kube_provreq *pr = hmap_get(by_uid, m->uid);
	if(!pr)
		return true; /* the request is gone */
	if(pr_is_terminal(pr))
		return true;
	/* The label was there from the node's creation: a request not yet
	 * Provisioned may still be waiting for it (or rolling it back). */
	if(m->by_label)
		return false;
	return pr_cond(pr, PR_COND_PROVISIONED) == NULL || !pr_cond_true(pr, PR_COND_PROVISIONED);
}

/* The group and instance a node belongs to, among the listed groups. */
static pr_group *group_of(pr_world *w, const char *node, const char **id)
{
	size_t i, k;
	for(i = 0; i < w->ngroups; i++) {
		pr_group *g = &w->groups[i];
		if(pr_group_list(g, NULL))
			continue;
		for(k = 0; k < g->ninst; k++)
			if(g->inst[k].node && !strcmp(g->inst[k].node, node)) {
				*id = g->inst[k].id;
				return g;
			}
	}
	return NULL;
}

static bool group_opted_out(const pr_group *g)
{
	json_object *a = json_object_object_get(json_object_object_get(g->tmpl_json, "metadata"), "annotations");
	return str_eq(json_object_get_string(json_object_object_get(a, PR_ANN_SCALE_DOWN_DISABLED)), "true");
}

static void remove_node(pr_ctl *c, pr_world *w, const pr_marked *m)
{
	const char *id = NULL;
	pr_group *g = group_of(w, m->name, &id);
	prd_cloud_error de;
	char msg[600];
	int rc;
	if(!g) {
		log_info("idle node of provreqd's is in no node group a driver lists; leaving it", "node", m->name);
		return;
	}
	if(group_opted_out(g))
		return;
	if(g->target - 1 < g->min) {
		log_debug("idle node kept: its group is at its min size", "node", m->name, "group", g->id);
		return;
	}
	if(!pr__may_act(c))
		return;
	memset(&de, 0, sizeof(de));
	rc = pr_group_delete(g, pr_group_deletes_ids(g) ? &id : &m->name, 1, &de);
	if(rc) {
		prd_err e;
		de.message[sizeof(de.message) - 1] = '\0';
		cloud_driver_error(g->drv, "delete instances", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
		log_warn("scale-down: deleting an idle node failed; retrying", "node", m->name, "error", e.msg);
		pr__wake_at(c, c->now + 10 * PRD_NS_PER_SEC);
		return;
	}
	g->target--;
	c->stats.scaledown_nodes++;
	metrics_counter_add(M_SCALE_DOWNS, METRICS_L(g->id), 1);
	snprintf(msg, sizeof(msg), "removed: empty for %llds after the booking it was made for ended",
		 (long long)(c->cfg.scale_down_idle_ns / PRD_NS_PER_SEC));
	node_event(c, m->name, "Normal", "ScaleDown", msg);
	log_info("scale-down: removed an idle node provreqd had added", "node", m->name, "group", g->id);
	hmap_del(&c->idle_since, m->name);
}

/* Mark as busy every marked node on which a request other than the one it
 * was made for holds a booking: a check-capacity request may book the
 * room of an idle node, and removing the node would revoke that booking.
 * Read after the requests were decided, so bookings released this pass do
 * not count and bookings made this pass do. */
static void busy_with_bookings(pr_ctl *c, pr_world *w)
{
	state_booking *b = NULL;
	size_t nb = 0, i, k;
	prd_err e;
	if(!c->db || !w->nmarked)
		return;
	if(state_booking_list_active(c->db, &b, &nb, &e)) {
		/* Not knowing the bookings, keep every node this pass. */
		log_warn("scale-down skipped this pass: cannot read bookings", "error", e.msg);
		for(k = 0; k < w->nmarked; k++)
			hmap_put(&w->blocking, w->marked[k].name, (void *)1);
		return;
	}
	/* w->marked is sorted by name: 1,000 bookings on 1,000 marked nodes
	 * were a million comparisons a pass as a scan. */
	for(i = 0; i < nb; i++) {
		pr_marked key = { .name = b[i].node_name };
		const pr_marked *m;
		/* A deleted request's booking holds nothing (its row goes when a
		 * pass next reads the bookings, or with the pruning). */
		if(!hmap_has(&w->uids, b[i].request_uid))
			continue;
		m = bsearch(&key, w->marked, w->nmarked, sizeof(*w->marked), pr__marked_cmp);
		if(m && strcmp(b[i].request_uid, m->uid))
			hmap_put(&w->blocking, m->name, (void *)1);
	}
	state_booking_list_free(b, nb);
}

/* Would removing m take a cluster-wide total below its MIN
 * (--cores-total and the like)? */
static const cfg_res_limit *below_min(const pr_ctl *c, const pr_world *w, const pr_marked *m)
{
	size_t l;
	for(l = 0; m->res && w->res_totals && l < c->limits.nres_limits; l++)
		if(c->limits.res_limits[l].min > 0 && w->res_totals[l] - m->res[l] < c->limits.res_limits[l].min)
			return &c->limits.res_limits[l];
	return NULL;
}

void pr__scaledown(pr_ctl *c, pr_world *w)
{
	hmap uids;
	size_t i;
	prd_err e;
	if(!c->cfg.scale_down || !w->nmarked)
		return;
	hmap_init(&uids, NULL);
	for(i = 0; i < w->nprs; i++)
		if(w->prs[i]->meta.uid && hmap_put(&uids, w->prs[i]->meta.uid, (void *)w->prs[i])) {
			/* Not knowing which requests exist, remove nothing. */
			log_warn("scale-down skipped this pass: out of memory");
			hmap_free(&uids);
			return;
		}
	busy_with_bookings(c, w);
	for(i = 0; i < w->nmarked; i++) {
		const pr_marked *m = &w->marked[i];
		int64_t *since = hmap_get(&c->idle_since, m->name);
		bool busy = hmap_get(&w->blocking, m->name) != NULL;
		if(m->opted_out || busy || !booking_ended(&uids, m)) {
			hmap_del(&c->idle_since, m->name);
			if(m->cordoned && busy &&
			   patch_node(c, m->name, "{\"spec\":{\"unschedulable\":null},\"metadata\":{\"annotations\":{\""
					 PR_ANN_SCALE_DOWN_CORDONED "\":null}}}", &e) == 0)
				node_event(c, m->name, "Normal", "ScaleDownCancelled", "a pod arrived; uncordoned");
			continue;
		}
		if(!since) {
			since = malloc(sizeof(*since));
			if(!since || hmap_put(&c->idle_since, m->name, since)) {
				free(since);
				continue;
			}
			*since = c->now;
		}
		if(c->now < *since + c->cfg.scale_down_idle_ns) {
			pr__wake_at(c, *since + c->cfg.scale_down_idle_ns);
			continue;
		}
		{
			const cfg_res_limit *lim = below_min(c, w, m);
			if(lim) {
				/* Kept while the cluster is at the limit's MIN (the
				 * next change of nodes looks again). */
				log_debug("idle node kept: removing it would leave the cluster below a minimum", "node",
					  m->name, "limit", lim->flag);
				continue;
			}
		}
		if(!m->cordoned) {
			char js[300], ts[RFC3339_MAX];
			rfc3339_format(c->now, ts, sizeof(ts));
			snprintf(js, sizeof(js), "{\"spec\":{\"unschedulable\":true},\"metadata\":{\"annotations\":{\"%s\":\"%s\"}}}",
				 PR_ANN_SCALE_DOWN_CORDONED, ts);
			if(patch_node(c, m->name, js, &e) == 0) {
				node_event(c, m->name, "Normal", "ScaleDownCordoned",
					   "empty since the booking it was made for ended; cordoned before removal");
				pr__wake_at(c, c->now + PRD_NS_PER_SEC);
			}
			continue;
		}
		/* Cordoned by us and still empty when looked at again. */
		remove_node(c, w, m);
		if(m->res && w->res_totals) {
			size_t l;
			for(l = 0; l < c->limits.nres_limits; l++)
				w->res_totals[l] -= m->res[l];
		}
	}
	hmap_free(&uids);
}

/* The kwok driver's operations (see docs/drivers.md, "The kwok driver").
 *
 * A node group is a Node template. Growing a group creates Node objects
 * named "<group>-<5 random chars>" that carry the kwok fake-node
 * annotation, so the kwok controller makes them Ready; shrinking deletes
 * them. The live Node list (label provreqd.io/node-group=<group>) is the
 * truth about instances; the driver itself only remembers the nodes fault
 * injection refused to create, so that instances() can report them as
 * out-of-resources errors. */
#include "kwok/kwok_async.h"
#include "kwok/kwok_config.h"
#include "kwok/kwok_dra.h"
#include "kwok/kwok_nap.h"
#include "kwok/kwok_view.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

/* ---- live Nodes ---------------------------------------------------- */

typedef struct live_count {
	kwok *k;
} live_count;

static int count_node(void *ud, json_object *node)
{
	live_count *c = ud;
	const char *group = kwok_jstr(kwok_jobj(kwok_jobj(node, "metadata"), "labels"), KWOK_GROUP_LABEL);
	size_t i;
	if(!group || kwok_node_deleting(node))
		return 0;
	for(i = 0; i < c->k->ngroups; i++)
		if(!strcmp(c->k->groups[i].id, group))
			c->k->groups[i].live++;
	return 0;
}

/* Count the live Nodes of every group: from the view the host keeps
 * current when it has one (which counts them as they change), else by
 * listing them. A host without an apiserver (`provreqd check-driver`) has
 * no Nodes: every group is then empty, so the templates can still be
 * checked. */
static int count_live(kwok *k, prd_cloud_error *err)
{
	live_count c = {k};
	size_t i;
	int rc;
	for(i = 0; i < k->ngroups; i++)
		k->groups[i].live = k->view.on ? kwok_view_live(k, k->groups[i].id) : 0;
	if(k->view.on)
		return 0;
	rc = kwok_list(k, "/api/v1/nodes?labelSelector=" KWOK_GROUP_LABEL, count_node, &c, err);
	return rc == PRD_CLOUD_EUNSUPPORTED ? 0 : rc;
}

/* ---- lifecycle ------------------------------------------------------ */

static void kwok_free(kwok *k)
{
	if(!k)
		return;
	free(k->template_dir);
	free(k->cm_namespace);
	free(k->cm_name);
	kwok_faults_free(k->faults, k->nfaults);
	kwok_groups_free(k->groups, k->ngroups);
	kwok_async_free(k->async);
	json_object_put(k->slices);
	kwok_view_free(&k->view);
	kwok_dir_names_free(&k->tmpl_names);
	kwok_nap_free(k->nap);
	free(k);
}

static int kw_init(const prd_cloud_host *host, const char *config, void **state, prd_cloud_error *err)
{
	kwok *k = calloc(1, sizeof(*k));
	size_t i;
	int rc;
	if(!k)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	k->host = host;
	k->create_parallelism = KWOK_CREATE_PARALLELISM;
	rc = kwok_parse_config(k, config, err);
	if(!rc)
		rc = kwok_load_templates(k, &k->groups, &k->ngroups, err);
	if(!rc)
		rc = kwok_check_fault_groups(k, err);
	if(!rc)
		rc = kwok_async_check_groups(k, err);
	if(!rc)
		rc = kwok_slices_check_groups(k, err);
	if(!rc)
		rc = count_live(k, err);
	if(!rc)
		rc = kwok_async_progress(k, err);
	for(i = 0; !rc && k->create_initial && i < k->ngroups; i++) {
		kwok_group *g = &k->groups[i];
		char **names = NULL;
		int32_t n = 0;
		if(g->live || !g->initial)
			continue;
		rc = kwok__create_nodes(k, g, g->initial, NULL, &names, &n, err);
		kwok__free_names(names, n);
		if(!rc)
			kwok_log(k, PRD_CLOUD_LOG_INFO, "kwok: created %d initial nodes of group %s", (int)n, g->id);
	}
	if(rc) {
		kwok_free(k);
		return rc;
	}
	kwok_log(k, PRD_CLOUD_LOG_INFO, "kwok: %zu node groups from %s%s%s%s", k->ngroups,
		 k->template_dir ? k->template_dir : "ConfigMap ", k->template_dir ? "" : k->cm_namespace,
		 k->template_dir ? "" : "/", k->template_dir ? "" : k->cm_name);
	*state = k;
	return 0;
}

static void kw_fini(void *state)
{
	kwok_free(state);
}

/* The groups stay; their counts are taken again (kept as they were when
 * that fails, like the previous groups after a failed re-read). */
static int recount(kwok *k, prd_cloud_error *err)
{
	int32_t *live = calloc(2 * k->ngroups + 1, sizeof(*live));
	size_t i;
	int rc;
	if(!live)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < k->ngroups; i++)
		live[2 * i] = k->groups[i].live, live[2 * i + 1] = k->groups[i].pending;
	rc = count_live(k, err);
	if(!rc)
		rc = kwok_async_progress(k, err);
	for(i = 0; rc && i < k->ngroups; i++)
		k->groups[i].live = live[2 * i], k->groups[i].pending = live[2 * i + 1];
	free(live);
	return rc;
}

/* Re-read the templates (a ConfigMap or files may have changed) and count
 * the live Nodes. On error the previous groups stay in use. The nodes
 * fault injection refused to create carry over to the new groups. A
 * template directory whose stamp did not change is not parsed again. */
static int kw_refresh(void *state, prd_cloud_error *err)
{
	kwok *k = state;
	kwok_group *groups = NULL, *old = k->groups;
	size_t n = 0, nold = k->ngroups, i;
	uint64_t stamp = 0;
	struct timespec now;
	bool trust = false, stamped;
	int rc = kwok__apply_faults(k, KWOK_OP_REFRESH, NULL, NULL, NULL, err);
	if(!rc)
		rc = kwok_async_transient(k, NULL, "refresh", err);
	if(rc)
		return rc;
	/* File times are real times, whatever clock the host runs on. */
	stamped = k->template_dir && clock_gettime(CLOCK_REALTIME, &now) == 0 &&
		  kwok_templates_stamp(k, (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec, &stamp, &trust) == 0;
	if(stamped && k->tmpl_stamp_ok && stamp == k->tmpl_stamp) {
		rc = kwok_nap_sync(k, err);
		return rc ? rc : recount(k, err);
	}
	k->tmpl_stamp_ok = false;
	rc = kwok_load_templates(k, &groups, &n, err);
	if(rc)
		return rc;
	for(i = 0; i < n; i++) {
		kwok_group *prev = kwok__find_group(k, groups[i].id);
		if(prev) {
			groups[i].failed = prev->failed;
			groups[i].nfailed = prev->nfailed;
			prev->failed = NULL;
			prev->nfailed = 0;
		}
	}
	k->groups = groups;
	k->ngroups = n;
	rc = kwok_check_fault_groups(k, err);
	if(!rc)
		rc = kwok_async_check_groups(k, err);
	if(!rc)
		rc = kwok_slices_check_groups(k, err);
	if(!rc)
		rc = count_live(k, err);
	if(!rc)
		rc = kwok_async_progress(k, err);
	if(rc) {
		/* Back to the old groups (with their refused nodes). */
		for(i = 0; i < n; i++) {
			kwok_group *prev;
			size_t j;
			for(j = 0, prev = NULL; j < nold; j++)
				if(!strcmp(old[j].id, groups[i].id))
					prev = &old[j];
			if(prev) {
				prev->failed = groups[i].failed;
				prev->nfailed = groups[i].nfailed;
				groups[i].failed = NULL;
				groups[i].nfailed = 0;
			}
		}
		k->groups = old;
		k->ngroups = nold;
		kwok_groups_free(groups, n);
		return rc;
	}
	kwok_groups_free(old, nold);
	k->tmpl_stamp = stamp;
	k->tmpl_stamp_ok = stamped && trust;
	/* The auto-provisioned groups beside the new templates. */
	if(k->nap) {
		rc = kwok_nap_sync(k, err);
		if(!rc)
			rc = recount(k, err);
	}
	return rc;
}

/* ---- groups --------------------------------------------------------- */

static int kw_node_groups(void *state, prd_cloud_node_group **out, size_t *count, prd_cloud_error *err)
{
	kwok *k = state;
	prd_cloud_node_group *v;
	size_t i;
	int rc = kwok__apply_faults(k, KWOK_OP_NODE_GROUPS, NULL, NULL, NULL, err);
	if(!rc)
		rc = kwok_async_transient(k, NULL, "node groups", err);
	if(rc)
		return rc;
	v = calloc(k->ngroups + 1, sizeof(*v));
	if(!v)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < k->ngroups; i++) {
		v[i].id = kwok_strdup(k->groups[i].id);
		if(!v[i].id) {
			while(i--)
				free(v[i].id);
			free(v);
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
		v[i].min_size = k->groups[i].min;
		v[i].max_size = k->groups[i].max;
		v[i].target_size = k->groups[i].live + (int32_t)k->groups[i].nfailed + k->groups[i].pending;
	}
	*out = v;
	*count = k->ngroups;
	return 0;
}

/* The group label decides; a Node labelled with a group this driver does
 * not know belongs to none of its groups. */
static int kw_node_group_for_node(void *state, const char *node_json, char **group_id, prd_cloud_error *err)
{
	kwok *k = state;
	json_object *node;
	const char *g;
	*group_id = NULL;
	node = node_json ? json_tokener_parse(node_json) : NULL;
	if(!node || !json_object_is_type(node, json_type_object)) {
		json_object_put(node);
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: node_group_for_node: the Node is not a JSON object");
	}
	g = kwok_jstr(kwok_jobj(kwok_jobj(node, "metadata"), "labels"), KWOK_GROUP_LABEL);
	if(g && kwok__find_group(k, g)) {
		*group_id = kwok_strdup(g);
		if(!*group_id) {
			json_object_put(node);
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
	}
	json_object_put(node);
	return 0;
}

/* ---- instances ------------------------------------------------------ */

/* A listing being built: each instance's strings are offsets into one
 * text buffer, and the answer is made one block (the array, then the
 * text) that kw_release_instances frees at once. */
#define KWOK_NO_STR SIZE_MAX

typedef struct inst_rec {
	size_t id, node, code, message, owner; /* offsets into text, or KWOK_NO_STR */
	int32_t state, error_class;
	int64_t created_ns;
} inst_rec;

typedef struct inst_list {
	inst_rec *v;
	size_t n, cap;
	char *text;
	size_t len, text_cap;
	int32_t live;          /* instances not being deleted */
} inst_list;

static void inst_list_free(inst_list *l)
{
	free(l->v);
	free(l->text);
}

/* Append a then b (b may be NULL) as one string; *at is where it starts. */
static int text_put(inst_list *l, const char *a, size_t alen, const char *b, size_t blen, size_t *at)
{
	size_t need = alen + blen + 1;
	if(l->text_cap - l->len < need) {
		size_t cap = l->text_cap ? l->text_cap : 1024;
		char *t;
		while(cap - l->len < need)
			cap *= 2;
		if(!(t = realloc(l->text, cap)))
			return -1;
		l->text = t;
		l->text_cap = cap;
	}
	*at = l->len;
	memcpy(l->text + l->len, a, alen);
	if(blen)
		memcpy(l->text + l->len + alen, b, blen);
	l->text[l->len + alen + blen] = '\0';
	l->len += need;
	return 0;
}

static int rec_push(inst_list *l, const inst_rec *r)
{
	if(l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		inst_rec *b = realloc(l->v, cap * sizeof(*b));
		if(!b)
			return -1;
		l->v = b;
		l->cap = cap;
	}
	l->v[l->n++] = *r;
	return 0;
}

/* An instance without a Node: "kwok://<name>" in `state`, with an
 * out-of-resources error when `code` is set. */
static int push_nodeless(inst_list *l, const char *name, int32_t state, const char *code, const char *message,
			 const char *owner, int64_t created_ns)
{
	inst_rec r = {0, KWOK_NO_STR, KWOK_NO_STR, KWOK_NO_STR, KWOK_NO_STR, state, PRD_CLOUD_ERRCLASS_NONE, created_ns};
	int rc = text_put(l, KWOK_PROVIDER_PREFIX, strlen(KWOK_PROVIDER_PREFIX), name, strlen(name), &r.id);
	if(!rc && owner)
		rc = text_put(l, owner, strlen(owner), NULL, 0, &r.owner);
	if(!rc && code) {
		r.error_class = PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES;
		rc = text_put(l, code, strlen(code), NULL, 0, &r.code);
		if(!rc)
			rc = text_put(l, message, strlen(message), NULL, 0, &r.message);
	}
	if(!rc)
		rc = rec_push(l, &r);
	return rc ? PRD_CLOUD_ENOMEM : 0;
}

/* The listing as one block (caller releases with kw_release_instances),
 * or NULL when out of memory; l is emptied either way. */
static prd_cloud_instance *inst_finish(inst_list *l)
{
	size_t head = (l->n ? l->n : 1) * sizeof(prd_cloud_instance), i;
	prd_cloud_instance *out = malloc(head + l->len);
	char *text = (char *)out + head;
	if(out) {
		memset(out, 0, head);
		if(l->len)
			memcpy(text, l->text, l->len);
		for(i = 0; i < l->n; i++) {
			const inst_rec *r = &l->v[i];
			out[i].id = text + r->id;
			out[i].node_name = r->node == KWOK_NO_STR ? NULL : text + r->node;
			out[i].error_code = r->code == KWOK_NO_STR ? NULL : text + r->code;
			out[i].error_message = r->message == KWOK_NO_STR ? NULL : text + r->message;
			out[i].state = r->state;
			out[i].error_class = r->error_class;
			out[i].owner = r->owner == KWOK_NO_STR ? NULL : text + r->owner;
			out[i].created_ns = r->created_ns;
		}
	}
	inst_list_free(l);
	memset(l, 0, sizeof(*l));
	return out;
}

/* A listing is one block (inst_finish). */
static void kw_release_instances(void *state, prd_cloud_instance *v, size_t count)
{
	(void)state;
	(void)count;
	free(v);
}

static bool node_ready(json_object *node)
{
	json_object *conds;
	size_t i, n;
	if(!json_object_object_get_ex(kwok_jobj(node, "status"), "conditions", &conds) ||
	   !json_object_is_type(conds, json_type_array))
		return false;
	n = json_object_array_length(conds);
	for(i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(conds, i);
		const char *t = kwok_jstr(c, "type"), *s = kwok_jstr(c, "status");
		if(t && !strcmp(t, "Ready"))
			return s && !strcmp(s, "True");
	}
	return false;
}

/* One Node as an instance, whether it came from a list or the view: its
 * id is n->id or, when that is empty, "kwok://<name>". Its owner and
 * creation time go with it (ABI 1.3). */
static int push_node_instance(void *ud, const kwok_vinfo *n)
{
	inst_list *l = ud;
	inst_rec r = {0, 0, KWOK_NO_STR, KWOK_NO_STR, KWOK_NO_STR, PRD_CLOUD_INSTANCE_DELETING, PRD_CLOUD_ERRCLASS_NONE,
		      n->created_ns};
	int rc = n->id_len ? text_put(l, n->id, n->id_len, NULL, 0, &r.id)
			   : text_put(l, KWOK_PROVIDER_PREFIX, strlen(KWOK_PROVIDER_PREFIX), n->name, n->name_len, &r.id);
	if(!rc)
		rc = text_put(l, n->name, n->name_len, NULL, 0, &r.node);
	if(!rc && n->owner)
		rc = text_put(l, n->owner, strlen(n->owner), NULL, 0, &r.owner);
	if(!n->deleting)
		r.state = n->ready ? PRD_CLOUD_INSTANCE_RUNNING : PRD_CLOUD_INSTANCE_CREATING;
	if(!rc)
		rc = rec_push(l, &r);
	if(rc)
		return PRD_CLOUD_ENOMEM;
	if(!n->deleting)
		l->live++;
	return 0;
}

static int add_node_instance(void *ud, json_object *node)
{
	json_object *md = kwok_jobj(node, "metadata");
	const char *pid = kwok_jstr(kwok_jobj(node, "spec"), "providerID");
	kwok_vinfo n;
	memset(&n, 0, sizeof(n));
	n.name = kwok_jstr(md, "name");
	if(!n.name)
		return 0;
	n.name_len = strlen(n.name);
	n.id = pid;
	n.id_len = pid ? strlen(pid) : 0;
	n.owner = kwok_jstr(kwok_jobj(md, "labels"), KWOK_OWNER_LABEL);
	n.created_ns = kwok_node_created_ns(node);
	n.ready = node_ready(node);
	n.deleting = kwok_node_deleting(node);
	return push_node_instance(ud, &n);
}

/* An instance of the async cloud that has no Node yet: reported once it
 * has appeared, with its provider ID and no node name. Not counted in
 * l->live: the group's pending count covers it. */
static int add_pending_instance(void *ud, const kwok_pending *p)
{
	if(!p->appeared)
		return 0;
	return push_nodeless(ud, p->name, p->deleting ? PRD_CLOUD_INSTANCE_DELETING : PRD_CLOUD_INSTANCE_CREATING,
			     p->failed, "the zone has no capacity for this instance (simulated)", p->owner,
			     p->requested_ns);
}

static int kw_instances(void *state, const char *group_id, prd_cloud_instance **out, size_t *count,
			prd_cloud_error *err)
{
	kwok *k = state;
	kwok_group *g = kwok__find_group(k, group_id);
	inst_list l;
	char path[256];
	size_t i, n;
	int rc;
	memset(&l, 0, sizeof(l));
	if(!g)
		return kwok__no_group(err, group_id);
	rc = kwok__apply_faults(k, KWOK_OP_INSTANCES, g->id, NULL, NULL, err);
	if(!rc)
		rc = kwok_async_transient(k, g->id, "instances", err);
	if(!rc && kwok_async_for(k, g->id))
		rc = kwok_async_progress(k, err);
	if(rc)
		return rc;
	if(k->view.on) {
		rc = kwok_view_fill_times(k, g->id, err);
		if(!rc)
			rc = kwok_view_each(k, g->id, push_node_instance, &l);
	} else {
		snprintf(path, sizeof(path), "/api/v1/nodes?labelSelector=" KWOK_GROUP_LABEL "%%3D%s", g->id);
		rc = kwok_list(k, path, add_node_instance, &l, err);
	}
	if(rc == PRD_CLOUD_EUNSUPPORTED)
		rc = 0; /* no apiserver: no Nodes (see count_live) */
	if(rc == PRD_CLOUD_ENOMEM)
		kwok_fail(err, rc, "out of memory");
	for(i = 0; !rc && i < g->nfailed; i++)
		if(push_nodeless(&l, g->failed[i].name, PRD_CLOUD_INSTANCE_CREATING, g->failed[i].code,
				 g->failed[i].message, g->failed[i].owner, g->failed[i].created_ns))
			rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	if(!rc && kwok_async_for(k, g->id))
		rc = kwok_async_each(k, g->id, add_pending_instance, &l, err);
	if(rc) {
		inst_list_free(&l);
		return rc;
	}
	g->live = l.live;
	n = l.n;
	if(!(*out = inst_finish(&l)))
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	*count = n;
	return 0;
}

static int kw_template_node(void *state, const char *group_id, char **node_json, prd_cloud_error *err)
{
	kwok *k = state;
	kwok_group *g = kwok__find_group(k, group_id);
	json_object *node, *conds, *ready;
	char name[96];
	int rc;
	if(!g)
		return kwok__no_group(err, group_id);
	rc = kwok__apply_faults(k, KWOK_OP_TEMPLATE_NODE, g->id, NULL, NULL, err);
	if(rc)
		return rc;
	snprintf(name, sizeof(name), "%s-template", g->id);
	node = kwok_node_for_group(g, name, NULL);
	if(!node)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	/* A new node of the group will be Ready: say so, as a real one would. */
	conds = json_object_new_array();
	ready = json_object_new_object();
	json_object_object_add(ready, "type", json_object_new_string("Ready"));
	json_object_object_add(ready, "status", json_object_new_string("True"));
	json_object_array_add(conds, ready);
	json_object_object_add(kwok_jobj(node, "status"), "conditions", conds);
	*node_json = kwok_strdup(json_object_to_json_string_ext(node, JSON_C_TO_STRING_PLAIN |
									   JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(node);
	return *node_json ? 0 : kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
}

static int kw_template_resource_slices(void *state, const char *group_id, char **slices_json,
				       prd_cloud_error *err)
{
	kwok *k = state;
	kwok_group *g = kwok__find_group(k, group_id);
	json_object *arr;
	char name[96];
	*slices_json = NULL;
	if(!g)
		return kwok__no_group(err, group_id);
	snprintf(name, sizeof(name), "%s-template", g->id);
	if(!(arr = kwok_slices_for_node(k, g->id, name)))
		return 0;
	*slices_json = kwok_strdup(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN |
									 JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(arr);
	return *slices_json ? 0 : kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
}

/* ---- shrinking ------------------------------------------------------ */

static ssize_t failed_index(const kwok_group *g, const char *name)
{
	size_t i;
	const char *bare = strncmp(name, KWOK_PROVIDER_PREFIX, strlen(KWOK_PROVIDER_PREFIX))
				   ? name
				   : name + strlen(KWOK_PROVIDER_PREFIX);
	for(i = 0; i < g->nfailed; i++)
		if(!strcmp(g->failed[i].name, bare))
			return (ssize_t)i;
	return -1;
}

static void drop_failed(kwok_group *g, size_t i)
{
	free(g->failed[i].name);
	free(g->failed[i].code);
	free(g->failed[i].message);
	free(g->failed[i].owner);
	g->failed[i] = g->failed[--g->nfailed];
}

/* Delete exactly the named Nodes, after checking every one of them is a
 * Node of this group (a name of a node fault injection refused to create
 * clears that entry). Nothing is deleted when any name is wrong or the
 * group would go below its minimum. */
static int kw_delete_nodes(void *state, const char *group_id, const char *const *names, size_t count,
			   prd_cloud_error *err)
{
	kwok *k = state;
	kwok_group *g = kwok__find_group(k, group_id);
	char **uids = NULL;
	bool *pending = NULL;
	size_t i, j, nreal = 0;
	int rc = 0;
	if(!g)
		return kwok__no_group(err, group_id);
	if(!count)
		return 0;
	rc = kwok__apply_faults(k, KWOK_OP_DELETE, g->id, NULL, NULL, err);
	if(!rc)
		rc = kwok_async_transient(k, g->id, "delete", err);
	if(rc)
		return rc;
	uids = calloc(count, sizeof(*uids));
	pending = calloc(count, sizeof(*pending));
	if(!uids || !pending) {
		rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		goto done;
	}
	for(i = 0; i < count && !rc; i++) {
		char path[320];
		json_object *node = NULL;
		const char *label, *uid;
		if(!names[i] || !names[i][0] || strchr(names[i], '/') != NULL) {
			if(names[i] && failed_index(g, names[i]) >= 0) {
				pending[i] = true;
				continue;
			}
			rc = kwok_fail(err, PRD_CLOUD_ENOTFOUND,
				       "kwok: group %s has no node or refused node request '%s'; nothing deleted",
				       g->id, names[i] ? names[i] : "(null)");
			break;
		}
		for(j = 0; j < i; j++)
			if(!strcmp(names[j], names[i]))
				break;
		if(j < i) {
			rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: group %s: node %s is listed twice", g->id, names[i]);
			break;
		}
		if(failed_index(g, names[i]) >= 0) {
			pending[i] = true;
			continue;
		}
		snprintf(path, sizeof(path), "/api/v1/nodes/%s", names[i]);
		rc = kwok_request(k, "GET", path, NULL, NULL, &node, NULL, err);
		if(rc == PRD_CLOUD_ENOTFOUND) {
			rc = kwok_fail(err, PRD_CLOUD_ENOTFOUND, "kwok: group %s has no node %s", g->id, names[i]);
		} else if(!rc) {
			label = kwok_jstr(kwok_jobj(kwok_jobj(node, "metadata"), "labels"), KWOK_GROUP_LABEL);
			uid = kwok_jstr(kwok_jobj(node, "metadata"), "uid");
			if(!label || strcmp(label, g->id))
				rc = kwok_fail(err, PRD_CLOUD_EINVAL,
					       "kwok: node %s is not in group %s (its %s label is '%s'); nothing deleted",
					       names[i], g->id, KWOK_GROUP_LABEL, label ? label : "");
			else if(!kwok_node_deleting(node))
				nreal++;
			if(!rc && uid && !(uids[i] = kwok_strdup(uid)))
				rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
		json_object_put(node);
	}
	if(!rc && nreal && g->live - (int32_t)nreal < g->min)
		rc = kwok_fail(err, PRD_CLOUD_ERANGE,
			       "kwok: group %s: deleting %zu of its %d nodes would go below its minimum size %d", g->id,
			       nreal, (int)g->live, (int)g->min);
	for(i = 0; i < count && !rc; i++) {
		if(pending[i]) {
			ssize_t at = failed_index(g, names[i]);
			if(at >= 0)
				drop_failed(g, (size_t)at);
			continue;
		}
		rc = kwok__delete_node(k, names[i], uids[i], err);
		if(!rc && g->live > 0)
			g->live--;
	}
done:
	for(i = 0; uids && i < count; i++)
		free(uids[i]);
	free(uids);
	free(pending);
	return rc;
}

/* Cancel nodes requested but never created: only the ones fault injection
 * refused, because every other kwok node exists as soon as it is asked
 * for (and, in async mode, the instances not created yet). With expected
 * >= 0, only when the target read afresh is that. */
static int decrease(kwok *k, const char *group_id, int32_t delta, int32_t expected, prd_cloud_error *err)
{
	kwok_group *g = kwok__find_group(k, group_id);
	int rc;
	if(!g)
		return kwok__no_group(err, group_id);
	if(delta <= 0)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: group %s: the decrease must be positive, got %d", g->id,
				 (int)delta);
	rc = kwok__apply_faults(k, KWOK_OP_DECREASE, g->id, NULL, NULL, err);
	if(!rc)
		rc = kwok_async_transient(k, g->id, "decrease target", err);
	if(rc)
		return rc;
	if(kwok_async_for(k, g->id)) {
		int32_t done = 0;
		rc = kwok_async_cancel(k, g, delta, (int32_t)g->nfailed, expected, &done, err);
		if(rc)
			return rc;
		delta -= done;
	} else if(expected >= 0 && (rc = kwok_check_target(k, g, expected, 0, 0, "cancelled", err))) {
		return rc;
	}
	if((size_t)delta > g->nfailed)
		return kwok_fail(err, PRD_CLOUD_ERANGE,
				 "kwok: group %s: cannot lower the target by %d: only %zu requested nodes are not "
				 "created yet (delete nodes to go lower)",
				 g->id, (int)delta, g->nfailed);
	while(delta-- > 0)
		drop_failed(g, g->nfailed - 1);
	return 0;
}

static int kw_decrease_target(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	return decrease(state, group_id, delta, -1, err);
}

/* ABI 1.3: decrease_target_size if the target is still `expected`. */
static int kw_decrease_target_if(void *state, const char *group_id, int32_t delta, int32_t expected,
				 prd_cloud_error *err)
{
	if(expected < -1)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: decrease: expected target %d (want -1 or a size)",
				 (int)expected);
	return decrease(state, group_id, delta, expected, err);
}

/* Delete instances by id, Node or not: an async instance without a Node is
 * cancelled (not created yet) or deleted (after deleteDelayMs); a refused
 * one is cleared; a Node is deleted. An id that is already gone is not an
 * error. */
static int kw_delete_instances(void *state, const char *group_id, const char *const *ids, size_t count,
			       prd_cloud_error *err)
{
	kwok *k = state;
	kwok_group *g = kwok__find_group(k, group_id);
	size_t i;
	int rc;
	if(!g)
		return kwok__no_group(err, group_id);
	rc = kwok__apply_faults(k, KWOK_OP_DELETE, g->id, NULL, NULL, err);
	if(!rc)
		rc = kwok_async_transient(k, g->id, "delete", err);
	for(i = 0; !rc && i < count; i++) {
		const char *name = ids[i] ? ids[i] : "";
		bool found = false;
		ssize_t at;
		if(!strncmp(name, KWOK_PROVIDER_PREFIX, strlen(KWOK_PROVIDER_PREFIX)))
			name += strlen(KWOK_PROVIDER_PREFIX);
		if(!name[0] || strchr(name, '/'))
			continue;
		if(kwok_async_for(k, g->id)) {
			rc = kwok_async_delete(k, g, name, &found, err);
			if(rc || found)
				continue;
		}
		if((at = failed_index(g, name)) >= 0) {
			drop_failed(g, (size_t)at);
			continue;
		}
		{
			char path[320];
			json_object *node = NULL;
			const char *label, *uid;
			snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
			rc = kwok_request(k, "GET", path, NULL, NULL, &node, NULL, err);
			if(rc == PRD_CLOUD_ENOTFOUND) {
				rc = 0; /* gone already */
				continue;
			}
			label = kwok_jstr(kwok_jobj(kwok_jobj(node, "metadata"), "labels"), KWOK_GROUP_LABEL);
			uid = kwok_jstr(kwok_jobj(node, "metadata"), "uid");
			if(!rc && (!label || strcmp(label, g->id)))
				rc = kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: node %s is not in group %s; not deleted", name,
					       g->id);
			else if(!rc && !kwok_node_deleting(node)) {
				rc = kwok__delete_node(k, name, uid, err);
				if(!rc && g->live > 0)
					g->live--;
			}
			json_object_put(node);
		}
	}
	return rc;
}

/* The host's Node cache, told (ABI 1.2): refresh and instances() then read
 * the view instead of listing Nodes. */
static int kw_nodes_changed(void *state, const prd_cloud_node *nodes, size_t count, int full, prd_cloud_error *err)
{
	return kwok_view_apply(state, nodes, count, full, err);
}

static const prd_cloud_driver descriptor = {
	.abi_major = PRD_CLOUD_ABI_MAJOR,
	.abi_minor = PRD_CLOUD_ABI_MINOR,
	.struct_size = sizeof(prd_cloud_driver),
	.name = "kwok",
	.init = kw_init,
	.fini = kw_fini,
	.refresh = kw_refresh,
	.node_groups = kw_node_groups,
	.release_node_groups = drv_release_node_groups,
	.node_group_for_node = kw_node_group_for_node,
	.instances = kw_instances,
	.release_instances = kw_release_instances,
	.template_node = kw_template_node,
	.increase_size = kwok__kw_increase_size,
	.atomic_increase_size = kwok__kw_atomic_increase,
	.delete_nodes = kw_delete_nodes,
	.decrease_target_size = kw_decrease_target,
	.release_string = drv_release_string,
	.delete_instances = kw_delete_instances,
	.template_resource_slices = kw_template_resource_slices,
	.nodes_changed = kw_nodes_changed,
	.instance_size = sizeof(prd_cloud_instance),
	/* Not PRD_CLOUD_CAP_CONDITIONAL: the expected target is compared
	 * with a listing, and the create that follows is a second request
	 * (Nodes have no compare-and-set on a count), so a writer in between
	 * is not seen. Owner marks carry the safety instead: a plan owns only
	 * the Nodes with its token, a repeated call's surplus and a late
	 * call's leftovers are recognised and deleted (docs/drivers.md). */
	.capabilities = PRD_CLOUD_CAP_OWNER_MARK | PRD_CLOUD_CAP_CREATION_TIME,
	.increase = kwok__kw_increase,
	.decrease_target_size_if = kw_decrease_target_if,
	.shape_size = sizeof(prd_cloud_shape),
	.shapes = kwok_nap_shapes,
	.release_shapes = kwok_nap_release_shapes,
	.create_group = kwok_nap_create,
	.delete_group = kwok_nap_delete,
	.group_owner = kwok_nap_owner,
};

const prd_cloud_driver *provreqd_cloud_driver(void);

const prd_cloud_driver *provreqd_cloud_driver(void)
{
	return &descriptor;
}

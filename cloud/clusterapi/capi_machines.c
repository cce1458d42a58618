/* The clusterapi driver's Machines: a group's instances, and the group of a Node. */
#include "clusterapi/clusterapi.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/rfc3339.h"
#include "util/str.h"
#include "util/yamljson.h"

/* ---- Machines ------------------------------------------------------- */

static int push_item(void *ud, json_object *item)
{
	return json_object_array_add(ud, json_object_get(item)) ? PRD_CLOUD_ENOMEM : 0;
}

int capi_group_machines(capi *c, const capi_group *g, bool live, json_object **machines, prd_cloud_error *err)
{
	char path[1400], query[800], gv[128];
	char *text;
	json_object *arr;
	int rc;
	if(!live) {
		snprintf(gv, sizeof(gv), CAPI_GROUP "/%s", c->version);
		rc = capi_watch_list(c, gv, c->ns, "machines", g->ns, g->machines, machines);
		if(rc == 0)
			return 0;
		if(rc == PRD_CLOUD_ENOMEM)
			return capi_fail(err, rc, "out of memory");
	}
	text = sel_to_string(g->machines);
	if(!text || !capi_query_escape(text, query, sizeof(query))) {
		free(text);
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: the Machine selector is too long", g->id);
	}
	free(text);
	capi_path(c, path, 1000, "machines", g->ns, NULL, NULL);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "?labelSelector=%s", query);
	arr = json_object_new_array();
	if(!arr)
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	rc = capi_list(c, path, push_item, arr, err);
	if(rc) {
		json_object_put(arr);
		return rc;
	}
	*machines = arr;
	return 0;
}

const char *capi__machine_node(json_object *m)
{
	return capi_jstr(capi_jobj(capi_jobj(m, "status"), "nodeRef"), "name");
}

bool capi__machine_deleting(json_object *m)
{
	return capi_jstr(capi_jobj(m, "metadata"), "deletionTimestamp") != NULL;
}

/* The instance ID of a Machine: its providerID, or a stable stand-in
 * while the infrastructure has not assigned one. */
void capi__machine_id(json_object *m, char *out, size_t n)
{
	const char *pid = capi_jstr(capi_jobj(m, "spec"), "providerID");
	json_object *md = capi_jobj(m, "metadata");
	if(pid && pid[0])
		snprintf(out, n, "%s", pid);
	else
		snprintf(out, n, CAPI_PENDING_PREFIX "%s/%s", capi_jstr(md, "namespace") ? capi_jstr(md, "namespace") : "",
			 capi_jstr(md, "name") ? capi_jstr(md, "name") : "");
}

/* metadata.creationTimestamp in ns since the epoch; 0 when unreadable. */
static int64_t created_ns(json_object *obj)
{
	const char *ts = capi_jstr(capi_jobj(obj, "metadata"), "creationTimestamp");
	prd_err pe;
	int64_t ns = 0;
	if(!ts || rfc3339_parse(ts, &ns, &pe) || ns < 0)
		return 0;
	return ns;
}

/* A Machine's instance: its creation time is the Machine's (ABI 1.3); its
 * owner token is the mark this driver put on it once it proved the Machine
 * a plan's (capi_claim.c), else none: Cluster API cannot mark the Machines
 * one scale call makes. A MachinePool's providerIDList entries have
 * neither. */
int capi__cp_instances(void *state, const char *group_id, prd_cloud_instance **out, size_t *count,
		       prd_cloud_error *err)
{
	capi *c = state;
	capi_group *g = capi__find_group(c, group_id);
	json_object *machines = NULL, *pids = NULL;
	prd_cloud_instance *v;
	size_t i, n, k = 0, np = 0;
	int rc;
	if(!g)
		return capi__no_group(err, group_id);
	rc = capi_group_machines(c, g, false, &machines, err);
	if(rc)
		return rc;
	capi_claim_mark(c, g, machines);
	n = json_object_array_length(machines);
	/* A MachinePool whose provider has no MachinePool Machines lists its
	 * instances in spec.providerIDList only. */
	if(g->kind == CAPI_MACHINE_POOL && !n &&
	   json_object_object_get_ex(capi_jobj(g->obj, "spec"), "providerIDList", &pids) &&
	   json_object_is_type(pids, json_type_array))
		np = json_object_array_length(pids);
	v = calloc(n + np + 1, sizeof(*v));
	if(!v) {
		json_object_put(machines);
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	for(i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(machines, i);
		const char *node = capi__machine_node(m), *fcode = NULL, *fmsg = NULL;
		int fclass = capi_machine_failure(m, &fcode, &fmsg);
		char id[600];
		capi__machine_id(m, id, sizeof(id));
		v[k].id = capi_strdup(id);
		v[k].node_name = node ? capi_strdup(node) : NULL;
		v[k].state = capi__machine_deleting(m) ? PRD_CLOUD_INSTANCE_DELETING
			     : node		 ? PRD_CLOUD_INSTANCE_RUNNING
						 : PRD_CLOUD_INSTANCE_CREATING;
		v[k].created_ns = created_ns(m);
		if(capi_machine_owner(m) && drv_owner_token_ok(capi_machine_owner(m)) &&
		   !(v[k].owner = capi_strdup(capi_machine_owner(m))))
			rc = PRD_CLOUD_ENOMEM;
		if(fclass != PRD_CLOUD_ERRCLASS_NONE) {
			v[k].error_class = fclass;
			v[k].error_code = capi_strdup(fcode);
			v[k].error_message = capi_strdup(fmsg);
			if(!v[k].error_code || !v[k].error_message)
				rc = PRD_CLOUD_ENOMEM;
		}
		if(!v[k].id || (node && !v[k].node_name))
			rc = PRD_CLOUD_ENOMEM;
		k++;
	}
	for(i = 0; i < np; i++) {
		json_object *p = json_object_array_get_idx(pids, i);
		if(!json_object_is_type(p, json_type_string))
			continue;
		v[k].id = capi_strdup(json_object_get_string(p));
		v[k].state = PRD_CLOUD_INSTANCE_RUNNING;
		if(!v[k].id)
			rc = PRD_CLOUD_ENOMEM;
		k++;
	}
	json_object_put(machines);
	if(rc) {
		drv_instances_free(v, k);
		return capi_fail(err, rc, "out of memory");
	}
	*out = v;
	*count = k;
	return 0;
}

/* The group whose Machine selector matches this Machine (same namespace). */
static capi_group *group_of_machine(capi *c, json_object *m)
{
	json_object *md = capi_jobj(m, "metadata");
	const char *ns = capi_jstr(md, "namespace");
	size_t i;
	for(i = 0; ns && i < c->ngroups; i++)
		if(!strcmp(c->groups[i].ns, ns) && sel_matches_json(c->groups[i].machines, capi_jobj(md, "labels")))
			return &c->groups[i];
	return NULL;
}

typedef struct by_provider {
	const char *pid;
	json_object *found;
} by_provider;

static int match_provider(void *ud, json_object *m)
{
	by_provider *b = ud;
	const char *pid = capi_jstr(capi_jobj(m, "spec"), "providerID");
	if(pid && !strcmp(pid, b->pid)) {
		b->found = json_object_get(m);
		return 1;
	}
	return 0;
}

/* A Node belongs to the group of its Machine: named by the Node's
 * cluster.x-k8s.io/machine annotation (Cluster API sets it), else found
 * by providerID; a MachinePool also claims the IDs in its providerIDList. */
int capi__cp_node_group_for_node(void *state, const char *node_json, char **group_id, prd_cloud_error *err)
{
	capi *c = state;
	json_object *node, *md, *ann, *machine = NULL;
	const char *mname, *mns, *pid;
	capi_group *g = NULL;
	char gv[128];
	size_t i;
	int rc = 0;
	*group_id = NULL;
	node = node_json ? json_tokener_parse(node_json) : NULL;
	if(!node || !json_object_is_type(node, json_type_object)) {
		json_object_put(node);
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: node_group_for_node: the Node is not a JSON object");
	}
	md = capi_jobj(node, "metadata");
	ann = capi_jobj(md, "annotations");
	mname = capi_jstr(ann, CAPI_NODE_MACHINE_ANNOTATION);
	mns = capi_jstr(ann, CAPI_NODE_NAMESPACE_ANNOTATION);
	pid = capi_jstr(capi_jobj(node, "spec"), "providerID");
	snprintf(gv, sizeof(gv), CAPI_GROUP "/%s", c->version);
	if(mname && mns) {
		char path[800];
		rc = capi_watch_get(c, gv, c->ns, "machines", mns, mname, &machine);
		if(rc == PRD_CLOUD_EAGAIN) {
			capi_path(c, path, sizeof(path), "machines", mns, mname, NULL);
			rc = capi_request(c, "GET", path, NULL, NULL, &machine, NULL, err);
		}
		if(rc == PRD_CLOUD_ENOTFOUND)
			rc = 0; /* the Machine is gone: try the providerID */
	}
	if(!rc && !machine && pid && pid[0]) {
		by_provider b = {pid, NULL};
		json_object *all = NULL;
		char path[600];
		rc = capi_watch_list(c, gv, c->ns, "machines", NULL, NULL, &all);
		if(rc == 0) {
			size_t j, n = json_object_array_length(all);
			for(j = 0; j < n && !b.found; j++)
				match_provider(&b, json_object_array_get_idx(all, j));
			json_object_put(all);
		} else if(rc == PRD_CLOUD_ENOTFOUND) {
			rc = 0;
		} else {
			capi_path(c, path, sizeof(path), "machines", c->ns, NULL, NULL);
			rc = capi_list(c, path, match_provider, &b, err);
			if(rc == 1)
				rc = 0;
		}
		machine = b.found;
	}
	if(!rc && machine)
		g = group_of_machine(c, machine);
	for(i = 0; !rc && !g && pid && i < c->ngroups; i++) {
		json_object *list, *p;
		size_t j, n;
		if(c->groups[i].kind != CAPI_MACHINE_POOL ||
		   !json_object_object_get_ex(capi_jobj(c->groups[i].obj, "spec"), "providerIDList", &list) ||
		   !json_object_is_type(list, json_type_array))
			continue;
		n = json_object_array_length(list);
		for(j = 0; j < n && !g; j++) {
			p = json_object_array_get_idx(list, j);
			if(json_object_is_type(p, json_type_string) && !strcmp(json_object_get_string(p), pid))
				g = &c->groups[i];
		}
	}
	if(!rc && g && !(*group_id = capi_strdup(g->id)))
		rc = capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	json_object_put(machine);
	json_object_put(node);
	return rc;
}

int capi__cp_template_node(void *state, const char *group_id, char **node_json, prd_cloud_error *err)
{
	capi *c = state;
	capi_group *g = capi__find_group(c, group_id);
	if(!g)
		return capi__no_group(err, group_id);
	return capi_template_node(c, g, node_json, err);
}

/* Creating and deleting the MachineDeployments of auto-provisioned node
 * groups (driver ABI 1.5 create_group, delete_group, group_owner), for
 * the clusterapi driver. See capi_nap.c for the configuration and the
 * marks. */
#include "clusterapi/capi_nap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

#define DEPLOYMENT_LABEL "cluster.x-k8s.io/deployment-name"
#define CLUSTER_LABEL "cluster.x-k8s.io/cluster-name"
#define TOPOLOGY_PREFIX "topology.cluster.x-k8s.io/"
#define CAP_LABELS CAPI_CAPACITY_PREFIX "labels"
#define CAP_TAINTS CAPI_CAPACITY_PREFIX "taints"

/* Whether Cluster API copies label `key` from a Machine to its Node: the
 * domains node-role.kubernetes.io, node-restriction.kubernetes.io and
 * node.cluster.x-k8s.io, and subdomains of the last two (v1.14,
 * util/labels GetManagedLabels; the manager's
 * --additional-sync-machine-labels adds others, which this driver does
 * not know). A label on the Machine alone would never reach the Node, and
 * a pod selecting it would wait for ever. */
static bool synced(const char *key)
{
	const char *slash = strchr(key, '/');
	static const char role[] = "node-role.kubernetes.io";
	return (slash && (size_t)(slash - key) == sizeof(role) - 1 && !strncmp(key, role, sizeof(role) - 1)) ||
	       drv_label_in_domain(key, "node-restriction.kubernetes.io") ||
	       drv_label_in_domain(key, "node.cluster.x-k8s.io");
}

/* What can be judged without the API: ids, token, labels and taints. */
static int check_request(const capi *c, const prd_cloud_group_create *req, prd_cloud_error *err)
{
	size_t i;
	prd_err pe = {0};
	if(!req || req->struct_size < offsetof(prd_cloud_group_create, owner) + sizeof(req->owner))
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: create_group: the request is older than ABI 1.5's");
	if(!c->nap)
		return capi_fail(err, PRD_CLOUD_EUNSUPPORTED, "clusterapi: autoProvisioning is not configured");
	if(!capi_nap_id_ok(req->group_id))
		return capi_fail(err, PRD_CLOUD_EINVAL,
				 "clusterapi: create_group: '%s' is not a group id (1..%d of [a-z0-9-], a letter first)",
				 req->group_id ? req->group_id : "", NAP_ID_MAX);
	if(!drv_owner_token_ok(req->owner))
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: create_group: the owner token is not a label value");
	if(!req->shape)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: create_group: no shape");
	for(i = 0; i < req->nlabels; i++) {
		const char *k = req->labels[i].key, *v = req->labels[i].value;
		if(!k || !v || sel_validate_key(k, &pe) || sel_validate_value(v, &pe) || !strcmp(k, NAP_ZONE_LABEL) ||
		   !synced(k))
			return capi_fail(err, PRD_CLOUD_EINVAL,
					 "clusterapi: create_group: label %s cannot be given to the group's Nodes: Cluster "
					 "API copies only labels of the node-role.kubernetes.io, "
					 "[*.]node-restriction.kubernetes.io and [*.]node.cluster.x-k8s.io domains from a "
					 "Machine to its Node%s%s",
					 k ? k : "(null)", pe.msg[0] ? ": " : "", pe.msg);
	}
	for(i = 0; i < req->ntaints; i++) {
		const prd_cloud_taint *t = &req->taints[i];
		if(!c->nap->taints)
			return capi_fail(err, PRD_CLOUD_EINVAL,
					 "clusterapi: create_group: taint %s cannot be given: Cluster API v1.14 puts a "
					 "Machine's taints on its Node only with the alpha feature gate "
					 "MachineTaintPropagation (its webhook refuses spec.template.spec.taints without it); "
					 "set autoProvisioning.machineTaints: true once the core manager runs with "
					 "--feature-gates=MachineTaintPropagation=true",
					 t->key ? t->key : "(null)");
		if(!t->key || sel_validate_key(t->key, &pe) || (t->value && t->value[0] && sel_validate_value(t->value, &pe)) ||
		   !drv_taint_effect_ok(t->effect))
			return capi_fail(err, PRD_CLOUD_EINVAL,
					 "clusterapi: create_group: taint %zu needs a qualified key, a label value and an "
					 "effect (NoSchedule, PreferNoSchedule or NoExecute)",
					 i);
	}
	return 0;
}

/* Is existing MachineDeployment o the group `req` asks for (a repeated
 * call)? */
static int same_group(json_object *o, const prd_cloud_group_create *req, prd_cloud_error *err)
{
	json_object *ann = capi_nap_annotations(o);
	const char *owner = capi_jstr(ann, CAPI_NAP_OWNER_ANN), *shape = capi_jstr(ann, CAPI_NAP_SHAPE_ANN);
	const char *zone = capi_jstr(ann, CAPI_NAP_ZONE_ANN);
	if(capi_nap_is_ours(o) && !strcmp(owner, req->owner) && !strcmp(shape, req->shape) &&
	   !strcmp(zone ? zone : "", req->zone ? req->zone : ""))
		return 0;
	return capi_fail(err, PRD_CLOUD_ECONFLICT,
			 "clusterapi: MachineDeployment %s already exists and is not the group asked for (owner %s, "
			 "shape %s)",
			 req->group_id, owner ? owner : "(not auto-provisioned)", shape ? shape : "-");
}

/* Append ",text" (or "text") to the string member `key` of ann. */
static void append_csv(json_object *ann, const char *key, const char *text)
{
	const char *old = capi_jstr(ann, key);
	char *joined;
	size_t n;
	if(!old || !old[0]) {
		json_object_object_add(ann, key, json_object_new_string(text));
		return;
	}
	n = strlen(old) + strlen(text) + 2;
	if(!(joined = malloc(n)))
		return;
	snprintf(joined, n, "%s,%s", old, text);
	json_object_object_add(ann, key, json_object_new_string(joined));
	free(joined);
}

/* new_md's annotations: what says what a new node is like carries over
 * from the template's own annotations `tann` (not its sizes, fences or
 * marks); then the sizes, the owner, the shape and zone, and the fence
 * (`key` non-NULL). */
static void md_annotations(json_object *ann, json_object *tann, const prd_cloud_group_create *req, const char *key,
			   uint64_t term)
{
	char num[24], fence_ann[100];
	json_object_object_foreach(tann, ak, av) {
		if(!strncmp(ak, CAPI_CAPACITY_PREFIX, strlen(CAPI_CAPACITY_PREFIX)))
			json_object_object_add(ann, ak, json_object_get(av));
	}
	snprintf(num, sizeof(num), "%d", (int)req->max_size);
	json_object_object_add(ann, CAPI_MIN_ANNOTATION, json_object_new_string("0"));
	json_object_object_add(ann, CAPI_MAX_ANNOTATION, json_object_new_string(num));
	json_object_object_add(ann, CAPI_NAP_OWNER_ANN, json_object_new_string(req->owner));
	json_object_object_add(ann, CAPI_NAP_SHAPE_ANN, json_object_new_string(req->shape));
	json_object_object_add(ann, CAPI_NAP_ZONE_ANN, json_object_new_string(req->zone ? req->zone : ""));
	if(key) {
		/* Fenced from its first moment (ABI 1.6). */
		capi_fence_annotation(CAPI_FENCE_PREFIX, key, fence_ann, sizeof(fence_ann));
		snprintf(num, sizeof(num), "%llu", (unsigned long long)term);
		json_object_object_add(ann, fence_ann, json_object_new_string(num));
	}
}

/* The labels of new_md's Machine template (made when missing), without
 * the template selector's own labels (but the cluster's), the topology
 * labels and the rollout's hash. */
static json_object *md_template_labels(json_object *tmpl, json_object *tsel)
{
	json_object *tmeta, *tlabels;
	size_t i;
	tmeta = capi_jobj(tmpl, "metadata");
	if(!tmeta) {
		tmeta = json_object_new_object();
		json_object_object_add(tmpl, "metadata", tmeta);
	}
	tlabels = capi_jobj(tmeta, "labels");
	if(!tlabels) {
		tlabels = json_object_new_object();
		json_object_object_add(tmeta, "labels", tlabels);
	}
	if(capi_jobj(tsel, "matchLabels")) {
		json_object_object_foreach(capi_jobj(tsel, "matchLabels"), sk, sv) {
			(void)sv;
			if(strcmp(sk, CLUSTER_LABEL))
				json_object_object_del(tlabels, sk);
		}
	}
	{
		/* (Deleting while iterating json-c objects is not safe.) */
		char *drop[64];
		size_t nd = 0;
		json_object_object_foreach(tlabels, lk, lv) {
			(void)lv;
			if(nd < 64 && (!strncmp(lk, TOPOLOGY_PREFIX, strlen(TOPOLOGY_PREFIX)) ||
				       !strcmp(lk, "machine-template-hash")))
				drop[nd++] = lk;
		}
		for(i = 0; i < nd; i++)
			json_object_object_del(tlabels, drop[i]);
	}
	return tlabels;
}

/* The labels and taints the pods need go on new_md's Machine template
 * (labels `tlabels`, spec `tspec`) and are said in its capacity
 * annotations. */
static void md_labels_taints(json_object *ann, json_object *tlabels, json_object *tspec,
			     const prd_cloud_group_create *req)
{
	char text[700];
	size_t i;
	for(i = 0; i < req->nlabels; i++) {
		json_object_object_add(tlabels, req->labels[i].key, json_object_new_string(req->labels[i].value));
		snprintf(text, sizeof(text), "%s=%s", req->labels[i].key, req->labels[i].value);
		append_csv(ann, CAP_LABELS, text);
	}
	for(i = 0; i < req->ntaints; i++) {
		const prd_cloud_taint *t = &req->taints[i];
		json_object *arr = json_object_object_get(tspec, "taints"), *jt = json_object_new_object();
		bool has_value = t->value && t->value[0];
		if(!arr || !json_object_is_type(arr, json_type_array)) {
			arr = json_object_new_array();
			json_object_object_add(tspec, "taints", arr);
		}
		json_object_object_add(jt, "key", json_object_new_string(t->key));
		if(has_value)
			json_object_object_add(jt, "value", json_object_new_string(t->value));
		json_object_object_add(jt, "effect", json_object_new_string(t->effect));
		json_object_object_add(jt, "propagation", json_object_new_string("Always"));
		json_object_array_add(arr, jt);
		snprintf(text, sizeof(text), "%s%s%s:%s", t->key, has_value ? "=" : "", has_value ? t->value : "",
			 t->effect);
		append_csv(ann, CAP_TAINTS, text);
	}
}

/* The new MachineDeployment (caller puts), or NULL with err set. */
static json_object *new_md(capi *c, json_object *tpl, const prd_cloud_group_create *req, const char *key,
			   uint64_t term, prd_cloud_error *err)
{
	json_object *md = json_object_new_object(), *meta = json_object_new_object();
	json_object *labels = json_object_new_object(), *ann = json_object_new_object(), *spec = NULL;
	json_object *tmpl, *tlabels, *tspec, *sel_obj, *ml, *tsel;
	json_object *tann = capi_nap_annotations(tpl);
	const char *ns = capi_jstr(capi_jobj(tpl, "metadata"), "namespace");
	const char *cluster = capi_jstr(capi_jobj(tpl, "spec"), "clusterName");
	char gv[128];
	sel *tpl_sel = NULL;
	prd_err pe = {0};

	if(!md || !meta || !labels || !ann || !cluster ||
	   json_object_deep_copy(capi_jobj(tpl, "spec"), &spec, NULL) || !spec ||
	   !(tmpl = capi_jobj(spec, "template")) || !(tspec = capi_jobj(tmpl, "spec"))) {
		json_object_put(md);
		json_object_put(meta);
		json_object_put(labels);
		json_object_put(ann);
		json_object_put(spec);
		capi_fail(err, PRD_CLOUD_EINVAL,
			  "clusterapi: create_group: template MachineDeployment %s/%s has no spec.clusterName or "
			  "spec.template.spec",
			  ns ? ns : "", req->shape);
		return NULL;
	}
	snprintf(gv, sizeof(gv), CAPI_GROUP "/%s", c->version);
	json_object_object_add(md, "apiVersion", json_object_new_string(gv));
	json_object_object_add(md, "kind", json_object_new_string("MachineDeployment"));
	json_object_object_add(md, "metadata", meta);
	json_object_object_add(md, "spec", spec);
	json_object_object_add(meta, "name", json_object_new_string(req->group_id));
	json_object_object_add(meta, "namespace", json_object_new_string(ns));
	json_object_object_add(meta, "labels", labels);
	json_object_object_add(meta, "annotations", ann);
	json_object_object_add(labels, CLUSTER_LABEL, json_object_new_string(cluster));
	json_object_object_add(labels, CAPI_NAP_GROUP_LABEL, json_object_new_string(req->group_id));
	md_annotations(ann, tann, req, key, term);
	json_object_object_del(spec, "replicas");
	json_object_object_del(spec, "paused");
	json_object_object_add(spec, "replicas", json_object_new_int(0));
	/* Its own selector: the template's would also pick the new group's
	 * Machines (and the template's group would count them). */
	tsel = capi_jobj(spec, "selector");
	if(tsel && sel_from_json(tsel, &tpl_sel, &pe))
		tpl_sel = NULL;
	sel_obj = json_object_new_object();
	ml = json_object_new_object();
	json_object_object_add(ml, DEPLOYMENT_LABEL, json_object_new_string(req->group_id));
	json_object_object_add(ml, CLUSTER_LABEL, json_object_new_string(cluster));
	json_object_object_add(sel_obj, "matchLabels", ml);
	tlabels = md_template_labels(tmpl, tsel);
	json_object_object_add(spec, "selector", sel_obj);
	json_object_object_add(tlabels, DEPLOYMENT_LABEL, json_object_new_string(req->group_id));
	json_object_object_add(tlabels, CLUSTER_LABEL, json_object_new_string(cluster));
	md_labels_taints(ann, tlabels, tspec, req);
	if(tpl_sel && sel_matches_json(tpl_sel, tlabels)) {
		sel_free(tpl_sel);
		json_object_put(md);
		capi_fail(err, PRD_CLOUD_EINVAL,
			  "clusterapi: create_group: the selector of template MachineDeployment %s/%s would also select "
			  "the new group's Machines (make it select cluster.x-k8s.io/deployment-name)",
			  ns, req->shape);
		return NULL;
	}
	sel_free(tpl_sel);
	return md;
}

/* The existing MachineDeployment ns/name, or *o NULL when there is none. */
static int get_md(capi *c, const char *ns, const char *name, json_object **o, prd_cloud_error *err)
{
	char path[800];
	long st = 0;
	int rc;
	*o = NULL;
	capi_path(c, path, sizeof(path), "machinedeployments", ns, name, NULL);
	rc = capi_request(c, "GET", path, NULL, NULL, o, &st, err);
	if(rc && (rc == PRD_CLOUD_ENOTFOUND || st == 404)) {
		*o = NULL;
		return 0;
	}
	return rc;
}

/* Take a MachineDeployment of ours into the group list (it is listed at
 * once, not a refresh later: the host's next call is its increase). */
static int adopt(capi *c, json_object *o, prd_cloud_error *err)
{
	capi_group g;
	int rc = capi_group_of(c, CAPI_MACHINE_DEPLOYMENT, o, &g, err);
	if(!rc) {
		rc = capi_groups_put(c, &g, err);
		capi_group_clear(&g);
	}
	return rc;
}

/* A repeated creation: the same group, whose term is checked and raised
 * as an increase does. */
static int repeated(capi *c, json_object *o, const prd_cloud_group_create *req, const char *key, uint64_t term,
		    prd_cloud_error *err)
{
	capi_group g;
	capi_view v;
	int rc = same_group(o, req, err);
	if(rc)
		return rc;
	/* Being deleted (the MachineDeployment controller's finalizer keeps
	 * it until its MachineSets are gone): it is not the group this call
	 * is to make, and it will be gone in a moment. */
	if(capi_jstr(capi_jobj(o, "metadata"), "deletionTimestamp"))
		return capi_fail(err, PRD_CLOUD_EAGAIN,
				 "clusterapi: create_group: MachineDeployment %s is being deleted; not made again until it "
				 "is gone",
				 req->group_id);
	rc = capi_group_of(c, CAPI_MACHINE_DEPLOYMENT, o, &g, err);
	if(rc)
		return rc;
	if(key)
		rc = capi_read_fenced(c, &g, key, term, &v, err);
	if(!rc)
		rc = capi_groups_put(c, &g, err);
	capi_group_clear(&g);
	return rc;
}

static bool may_act(const capi *c)
{
	const prd_cloud_host *h = c->host;
	return !(h->struct_size >= offsetof(prd_cloud_host, may_act) + sizeof(h->may_act) && h->may_act &&
		 !h->may_act(h->ctx));
}

int capi_nap_create(void *state, const prd_cloud_group_create *req, prd_cloud_error *err)
{
	capi *c = state;
	json_object *tv = NULL, *tpl = NULL, *cur = NULL, *body = NULL, *made = NULL;
	const char *key = NULL, *ns;
	uint64_t term = 0;
	char zone[64], path[800];
	char *node = NULL;
	size_t i, n;
	long st = 0;
	int rc;

	if((rc = check_request(c, req, err)))
		return rc;
	if(req->struct_size >= offsetof(prd_cloud_group_create, fence_term) + sizeof(req->fence_term) &&
	   req->fence_term) {
		key = req->fence_key;
		term = req->fence_term;
		if((rc = capi_fence_check_key(key, err)))
			return rc;
	}
	if(!may_act(c))
		return capi_fail(err, PRD_CLOUD_EAGAIN, "clusterapi: create_group: the host may not act now");
	if((rc = capi_nap_templates(c, &tv, err)))
		return rc;
	n = json_object_array_length(tv);
	for(i = 0; i < n && !tpl; i++)
		if(!strcmp(capi_jstr(capi_jobj(json_object_array_get_idx(tv, i), "metadata"), "name"), req->shape))
			tpl = json_object_array_get_idx(tv, i);
	if(!tpl) {
		rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: create_group: no template MachineDeployment for shape "
			       "'%s'", req->shape);
		goto done;
	}
	if((rc = capi_nap_shape_of(c, tpl, &node, zone, sizeof(zone), err))) {
		if(rc == PRD_CLOUD_ENOTFOUND)
			rc = PRD_CLOUD_EINVAL; /* (the message says why it is no shape) */
		goto done;
	}
	if(req->zone && strcmp(req->zone, zone)) {
		rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: create_group: shape %s is not offered in zone %s",
			       req->shape, req->zone);
		goto done;
	}
	if(req->max_size < 1 || req->max_size > c->nap->max_size) {
		rc = capi_fail(err, PRD_CLOUD_ERANGE, "clusterapi: create_group: max size %d is outside [1, %d]",
			       (int)req->max_size, (int)c->nap->max_size);
		goto done;
	}
	ns = capi_jstr(capi_jobj(tpl, "metadata"), "namespace");
	if((rc = get_md(c, ns, req->group_id, &cur, err)))
		goto done;
	if(cur) {
		rc = repeated(c, cur, req, key, term, err);
		goto done;
	}
	if(key) {
		/* The creations' record on the template: a newer leader's
		 * term refuses this creation; an older one is raised first,
		 * under the template's resourceVersion. */
		capi_group tg;
		capi_view v;
		rc = capi_nap_tmpl_view(tpl, &tg, err);
		if(!rc)
			rc = capi_read_fenced_with(c, &tg, CAPI_CREATE_FENCE_PREFIX, key, term, &v, err);
		free(tg.id);
		if(rc)
			goto done;
	}
	if(!(body = new_md(c, tpl, req, key, term, err))) {
		rc = err && err->code ? err->code : PRD_CLOUD_ENOMEM;
		goto done;
	}
	capi_path(c, path, sizeof(path), "machinedeployments", ns, NULL, NULL);
	rc = capi_request(c, "POST", path, "application/json", body, &made, &st, err);
	if(rc && st == 409) {
		/* Made by another process since the read above. */
		if(!(rc = get_md(c, ns, req->group_id, &cur, err)))
			rc = cur ? repeated(c, cur, req, key, term, err)
				 : capi_fail(err, PRD_CLOUD_EAGAIN, "clusterapi: create_group: %s: conflict; retry",
					     req->group_id);
		goto done;
	}
	if(rc)
		goto done;
	capi_nap_wait_for(c, ns, req->group_id, true);
	if(adopt(c, made, err))
		capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: created MachineDeployment %s/%s is listed from the next "
			 "refresh on: %s", ns, req->group_id, err ? err->message : "");
	rc = 0;
	capi_log(c, PRD_CLOUD_LOG_INFO, "clusterapi: created MachineDeployment %s/%s (shape %s%s%s, max %d) for "
		 "owner %s", ns, req->group_id, req->shape, req->zone ? ", zone " : "", req->zone ? req->zone : "",
		 (int)req->max_size, req->owner);
done:
	free(node);
	json_object_put(made);
	json_object_put(body);
	json_object_put(cur);
	json_object_put(tv);
	return rc;
}

static int push(void *ud, json_object *item)
{
	return json_object_array_add(ud, json_object_get(item)) ? PRD_CLOUD_ENOMEM : 0;
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* The namespace of auto-provisioned group `id`: from the listing, else
 * from the apiserver by its label; "" when there is none. */
static int group_ns(capi *c, const char *id, char *ns, size_t n, prd_cloud_error *err)
{
	capi_group *g = capi_find_group(c, id);
	json_object *arr;
	char path[1000];
	int rc;
	ns[0] = '\0';
	if(g) {
		snprintf(ns, n, "%s", g->ns);
		return 0;
	}
	if(!(arr = json_object_new_array()))
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	capi_path(c, path, 700, "machinedeployments", c->ns, NULL, NULL);
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "?labelSelector=" CAPI_NAP_GROUP_LABEL "%%3D%s", id);
	rc = capi_list(c, path, push, arr, err);
	if(!rc && json_object_array_length(arr))
		snprintf(ns, n, "%s", or_empty(capi_jstr(capi_jobj(json_object_array_get_idx(arr, 0), "metadata"), "namespace")));
	json_object_put(arr);
	return rc;
}

int capi_nap_delete(void *state, const char *group_id, prd_cloud_error *err)
{
	capi *c = state;
	json_object *o = NULL, *machines = NULL, *opts = NULL, *pre, *r;
	capi_group g;
	char ns[64], path[800];
	uint64_t t = 0;
	int32_t replicas = 0;
	long st = 0;
	int rc;
	memset(&g, 0, sizeof(g));
	if(!capi_nap_id_ok(group_id))
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s is not a group create_group made",
				 group_id ? group_id : "(null)");
	if(!may_act(c))
		return capi_fail(err, PRD_CLOUD_EAGAIN, "clusterapi: delete_group: the host may not act now");
	if((rc = group_ns(c, group_id, ns, sizeof(ns), err)))
		return rc;
	if(!ns[0] || (rc = get_md(c, ns, group_id, &o, err)) || !o) {
		if(!rc)
			capi_groups_drop(c, group_id); /* gone: not an error */
		return rc;
	}
	if(!capi_nap_is_ours(o)) {
		rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: MachineDeployment %s/%s was not made by create_group "
			       "(no %s mark); not deleted", ns, group_id, CAPI_NAP_OWNER_ANN);
		goto done;
	}
	if(c->nap && c->nap->fence_term && capi_fence_recorded(o, CAPI_FENCE_PREFIX, c->nap->fence_key, &t) == 0 &&
	   t > c->nap->fence_term) {
		rc = capi_fail(err, PRD_CLOUD_ECONFLICT, "clusterapi: %s: term %llu is recorded, this process has %llu (a "
			       "newer leader); not deleted", group_id, (unsigned long long)t,
			       (unsigned long long)c->nap->fence_term);
		goto done;
	}
	if(json_object_object_get_ex(capi_jobj(o, "spec"), "replicas", &r))
		replicas = (int32_t)json_object_get_int64(r);
	if(!(rc = capi_group_of(c, CAPI_MACHINE_DEPLOYMENT, o, &g, err)))
		rc = capi_group_machines(c, &g, true, &machines, err);
	if(rc)
		goto done;
	if(replicas > 0 || json_object_array_length(machines) > 0) {
		rc = capi_fail(err, PRD_CLOUD_ERANGE, "clusterapi: %s is not empty (replicas %d, %zu Machines); not "
			       "deleted", group_id, (int)replicas, json_object_array_length(machines));
		goto done;
	}
	/* Conditional on the read that found it empty: a scale-up or a fence
	 * since then makes it a 409 and nothing is deleted. */
	opts = json_object_new_object();
	pre = json_object_new_object();
	json_object_object_add(opts, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(opts, "kind", json_object_new_string("DeleteOptions"));
	json_object_object_add(pre, "uid", json_object_new_string(or_empty(capi_jstr(capi_jobj(o, "metadata"), "uid"))));
	json_object_object_add(pre, "resourceVersion",
			       json_object_new_string(or_empty(capi_jstr(capi_jobj(o, "metadata"), "resourceVersion"))));
	json_object_object_add(opts, "preconditions", pre);
	capi_path(c, path, sizeof(path), "machinedeployments", ns, group_id, NULL);
	rc = capi_request(c, "DELETE", path, "application/json", opts, NULL, &st, err);
	if(rc && (st == 404 || rc == PRD_CLOUD_ENOTFOUND))
		rc = 0;
	else if(rc && st == 409)
		rc = capi_fail(err, PRD_CLOUD_EAGAIN, "clusterapi: %s changed since it was found empty (409); not deleted",
			       group_id);
	if(rc)
		goto done;
	capi_groups_drop(c, group_id);
	capi_nap_wait_for(c, ns, group_id, false);
	capi_log(c, PRD_CLOUD_LOG_INFO, "clusterapi: deleted auto-provisioned MachineDeployment %s/%s", ns, group_id);
done:
	capi_group_clear(&g);
	json_object_put(opts);
	json_object_put(machines);
	json_object_put(o);
	return rc;
}

int capi_nap_owner(void *state, const char *group_id, char **owner, prd_cloud_error *err)
{
	capi *c = state;
	capi_group *g = capi_find_group(c, group_id);
	*owner = NULL;
	if(!g)
		return capi_fail(err, PRD_CLOUD_ENOTFOUND, "clusterapi: no node group %s", group_id ? group_id : "(null)");
	if(g->kind == CAPI_MACHINE_DEPLOYMENT && capi_nap_is_ours(g->obj) &&
	   !(*owner = capi_strdup(capi_jstr(capi_nap_annotations(g->obj), CAPI_NAP_OWNER_ANN))))
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	return 0;
}

/* Node auto-provisioning (driver ABI 1.5 and 1.6) for the clusterapi
 * driver: a new node group is a new MachineDeployment made from a
 * *template* MachineDeployment that the configuration names.
 *
 *   autoProvisioning:
 *     templates: [gpu-a100, team-b/highmem]   # MachineDeployments, and/or
 *     templateSelector: provreqd.io/template=true
 *     maxSize: 20              # of a created group (default 100)
 *     machineTaints: false     # true: the core manager runs with
 *                              # --feature-gates=MachineTaintPropagation=true
 *
 * Each template is one shape, named as the template, its node the
 * template's scale-from-zero node (capacity annotations or the
 * infrastructure template's status.capacity) and its zone that node's
 * topology.kubernetes.io/zone label, if any. create_group copies the
 * template's spec (the bootstrap config and infrastructure references
 * included: Cluster API clones those templates per Machine, so two
 * MachineDeployments may share them) into a new MachineDeployment named
 * as the host's group id, with replicas 0, the min/max size annotations,
 * the marks below and only labels Cluster API copies from a Machine to
 * its Node. Why not a ClusterClass machineDeployment class: see
 * docs/drivers.md ("Node auto-provisioning").
 *
 * Marks on a created MachineDeployment (all in the API, none only in
 * memory, so a restarted provreqd and a new leader read the same):
 *   label provreqd.io/auto-provisioned-group: <group id = its name>
 *   annotations provreqd.io/auto-provisioned-by (owner token),
 *   provreqd.io/shape, provreqd.io/zone, and the group's fencing term.
 * The creations' fencing term (fence() with no group) is recorded on each
 * template as creations.provreqd.io/fence-<key>. */
#include "clusterapi/capi_nap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/str.h"

#define NAP_DEFAULT_MAX 100

/* ---- configuration -------------------------------------------------- */

int capi_nap_config(capi *c, json_object *v, prd_cloud_error *err)
{
	capi_nap *n;
	json_object *names = NULL;
	size_t i, count;
	if(!json_object_is_type(v, json_type_object))
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi config: autoProvisioning must be a mapping");
	capi_nap_free(c);
	if(!(c->nap = n = calloc(1, sizeof(*n))))
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	n->max_size = NAP_DEFAULT_MAX;
	json_object_object_foreach(v, key, val) {
		if(!strcmp(key, "templates") && json_object_is_type(val, json_type_array)) {
			names = val;
		} else if(!strcmp(key, "templateSelector") && json_object_is_type(val, json_type_string)) {
			sel *s = NULL;
			prd_err pe = {0};
			if(sel_parse(json_object_get_string(val), &s, &pe))
				return capi_fail(err, PRD_CLOUD_EINVAL,
						 "clusterapi config: autoProvisioning.templateSelector: %s", pe.msg);
			sel_free(s);
			if(!(n->selector = capi_strdup(json_object_get_string(val))))
				return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		} else if(!strcmp(key, "maxSize") && json_object_is_type(val, json_type_int) &&
			  json_object_get_int64(val) >= 1 && json_object_get_int64(val) <= 100000) {
			n->max_size = (int32_t)json_object_get_int64(val);
		} else if(!strcmp(key, "machineTaints") && json_object_is_type(val, json_type_boolean)) {
			n->taints = json_object_get_boolean(val);
		} else {
			return capi_fail(err, PRD_CLOUD_EINVAL,
					 "clusterapi config: autoProvisioning: unknown or malformed key '%s' (known: "
					 "templates: a list of [namespace/]name, templateSelector: a label selector, "
					 "maxSize: 1..100000, machineTaints: true or false)",
					 key);
		}
	}
	count = names ? json_object_array_length(names) : 0;
	if(!count && !n->selector)
		return capi_fail(err, PRD_CLOUD_EINVAL,
				 "clusterapi config: autoProvisioning needs templates or a templateSelector (the "
				 "MachineDeployments new groups are made from)");
	if(count && !(n->names = calloc(count, sizeof(*n->names))))
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < count; i++) {
		json_object *e = json_object_array_get_idx(names, i);
		const char *s = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : "";
		const char *slash = strchr(s, '/');
		char full[300];
		bool ok = slash ? (size_t)(slash - s) <= 63 && str_is_dns_subdomain(slash + 1) : str_is_dns_subdomain(s);
		if(ok && slash) {
			char ns[64];
			snprintf(ns, sizeof(ns), "%.*s", (int)(slash - s), s);
			ok = str_is_dns_label(ns);
		}
		if(!ok)
			return capi_fail(err, PRD_CLOUD_EINVAL,
					 "clusterapi config: autoProvisioning.templates[%zu] '%s' is not [namespace/]name", i,
					 s);
		/* (A name without namespace is checked in capi_nap_check:
		 * `namespace` may come after this key.) */
		snprintf(full, sizeof(full), "%s", s);
		if(!(n->names[i] = capi_strdup(full)))
			return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		n->nnames = i + 1;
	}
	return 0;
}

int capi_nap_check(capi *c, prd_cloud_error *err)
{
	size_t i;
	for(i = 0; c->nap && i < c->nap->nnames; i++)
		if(!strchr(c->nap->names[i], '/') && !c->ns)
			return capi_fail(err, PRD_CLOUD_EINVAL,
					 "clusterapi config: autoProvisioning.templates[%zu] '%s' names no namespace and "
					 "there is no `namespace` key (write namespace/name)",
					 i, c->nap->names[i]);
	return 0;
}

void capi_nap_free(capi *c)
{
	size_t i;
	if(!c->nap)
		return;
	for(i = 0; i < c->nap->nnames; i++)
		free(c->nap->names[i]);
	free(c->nap->names);
	free(c->nap->selector);
	free(c->nap);
	c->nap = NULL;
}

/* ---- marks ------------------------------------------------------------ */

bool capi_nap_id_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;
	return n >= 1 && n <= NAP_ID_MAX && s[0] >= 'a' && s[0] <= 'z' && str_is_dns_label(s);
}

json_object *capi_nap_annotations(json_object *obj)
{
	return capi_jobj(capi_jobj(obj, "metadata"), "annotations");
}

bool capi_nap_is_ours(json_object *obj)
{
	json_object *md = capi_jobj(obj, "metadata");
	const char *name = capi_jstr(md, "name"), *label = capi_jstr(capi_jobj(md, "labels"), CAPI_NAP_GROUP_LABEL);
	return capi_nap_id_ok(name) && label && !strcmp(label, name) && capi_jstr(capi_nap_annotations(obj), CAPI_NAP_OWNER_ANN) &&
	       capi_jstr(capi_nap_annotations(obj), CAPI_NAP_SHAPE_ANN);
}

void capi_nap_wait_for(capi *c, const char *ns, const char *name, bool present)
{
	capi_nap *n = c->nap;
	char key[300];
	size_t i;
	if(!c->colls || !n)
		return; /* no watch: every listing reads the apiserver */
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	for(i = 0; i < n->nwait && strcmp(n->wait[i].key, key); i++)
		;
	if(i == n->nwait)
		i = n->nwait < NAP_WAIT_MAX ? n->nwait++ : 0;
	snprintf(n->wait[i].key, sizeof(n->wait[i].key), "%s", key);
	n->wait[i].present = present;
}

bool capi_nap_watch_behind(capi *c, json_object *items)
{
	capi_nap *n = c->nap;
	size_t i, j, count = json_object_array_length(items);
	bool behind = false;
	for(i = 0; n && i < n->nwait;) {
		bool seen = false;
		for(j = 0; j < count && !seen; j++) {
			json_object *md = capi_jobj(json_object_array_get_idx(items, j), "metadata");
			char key[300];
			snprintf(key, sizeof(key), "%s/%s", capi_jstr(md, "namespace") ? capi_jstr(md, "namespace") : "",
				 capi_jstr(md, "name") ? capi_jstr(md, "name") : "");
			/* (One being deleted is gone for the listing.) */
			seen = !strcmp(key, n->wait[i].key) && !capi_jstr(md, "deletionTimestamp");
		}
		if(seen != n->wait[i].present) {
			behind = true;
			i++;
		} else {
			n->wait[i] = n->wait[--n->nwait];
		}
	}
	return behind;
}

/* ---- templates and shapes ----------------------------------------------- */

static int push(void *ud, json_object *item)
{
	return json_object_array_add(ud, json_object_get(item)) ? PRD_CLOUD_ENOMEM : 0;
}

/* The template MachineDeployments as a new array (caller puts), read from
 * the apiserver: what a creation copies is never a watched copy. A named
 * template that is not there is logged and left out. */
int capi_nap_templates(capi *c, json_object **out, prd_cloud_error *err)
{
	capi_nap *n = c->nap;
	json_object *all = json_object_new_array(), *keep = json_object_new_array();
	char path[1200], q[800];
	size_t i, k, count;
	int rc = 0;
	if(!all || !keep) {
		json_object_put(all);
		json_object_put(keep);
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	for(i = 0; i < n->nnames && !rc; i++) {
		const char *s = n->names[i], *slash = strchr(s, '/');
		char ns[64];
		json_object *o = NULL;
		long st = 0;
		prd_cloud_error e = {0, ""};
		snprintf(ns, sizeof(ns), "%.*s", slash ? (int)(slash - s) : 63, slash ? s : c->ns);
		capi_path(c, path, sizeof(path), "machinedeployments", ns, slash ? slash + 1 : s, NULL);
		rc = capi_request(c, "GET", path, NULL, NULL, &o, &st, &e);
		if(rc && (rc == PRD_CLOUD_ENOTFOUND || st == 404)) {
			capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: auto-provisioning template MachineDeployment %s/%s is "
				 "not there", ns, slash ? slash + 1 : s);
			rc = 0;
			continue;
		}
		if(rc)
			rc = capi_fail(err, rc, "clusterapi: reading template MachineDeployment %s: %s", s, e.message);
		else
			json_object_array_add(all, o);
	}
	if(!rc && n->selector) {
		capi_path(c, path, 800, "machinedeployments", c->ns, NULL, NULL);
		if(!capi_query_escape(n->selector, q, sizeof(q)))
			rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: templateSelector is too long");
		else {
			snprintf(path + strlen(path), sizeof(path) - strlen(path), "?labelSelector=%s", q);
			rc = capi_list(c, path, push, all, err);
		}
	}
	count = json_object_array_length(all);
	for(i = 0; !rc && i < count; i++) {
		json_object *o = json_object_array_get_idx(all, i), *md = capi_jobj(o, "metadata");
		const char *name = capi_jstr(md, "name"), *ns = capi_jstr(md, "namespace");
		const char *cluster = capi_jstr(capi_jobj(o, "spec"), "clusterName");
		bool dup = false;
		if(!name || !ns || capi_nap_is_ours(o) || capi_jstr(capi_nap_annotations(o), CAPI_NAP_OWNER_ANN))
			continue; /* a created group is never a template */
		if(c->ns && strcmp(ns, c->ns))
			continue;
		if(c->cluster && (!cluster || strcmp(cluster, c->cluster)))
			continue;
		if(!str_is_dns_label(name) || strlen(name) > NAP_ID_MAX) {
			capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: template MachineDeployment %s/%s: its name is not a "
				 "shape name (a DNS label of at most %d characters); not offered", ns, name, NAP_ID_MAX);
			continue;
		}
		for(k = 0; k < json_object_array_length(keep) && !dup; k++)
			dup = !strcmp(capi_jstr(capi_jobj(json_object_array_get_idx(keep, k), "metadata"), "name"), name);
		if(dup) {
			capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: template MachineDeployment %s/%s: a template of that name "
				 "is listed already; not offered twice", ns, name);
			continue;
		}
		json_object_array_add(keep, json_object_get(o));
	}
	json_object_put(all);
	if(rc) {
		json_object_put(keep);
		return rc;
	}
	*out = keep;
	return 0;
}

/* A template as a group-like view for the template and fence code
 * (borrows obj; caller frees id). */
int capi_nap_tmpl_view(json_object *o, capi_group *g, prd_cloud_error *err)
{
	json_object *md = capi_jobj(o, "metadata");
	char id[400];
	memset(g, 0, sizeof(*g));
	g->kind = CAPI_MACHINE_DEPLOYMENT;
	g->ns = (char *)capi_jstr(md, "namespace");
	g->name = (char *)capi_jstr(md, "name");
	g->obj = o;
	snprintf(id, sizeof(id), "MachineDeployment/%s/%s", g->ns, g->name);
	if(!(g->id = capi_strdup(id)))
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	return 0;
}

/* The shape of template o: its node (caller frees) and zone (into zone,
 * "" for none). */
int capi_nap_shape_of(capi *c, json_object *o, char **node_json, char *zone, size_t zlen, prd_cloud_error *err)
{
	capi_group g;
	json_object *node;
	const char *z;
	int rc = capi_nap_tmpl_view(o, &g, err);
	if(!rc)
		rc = capi_template_zero(c, &g, node_json, err);
	free(g.id);
	if(rc)
		return rc;
	node = json_tokener_parse(*node_json);
	z = capi_jstr(capi_jobj(capi_jobj(node, "metadata"), "labels"), NAP_ZONE_LABEL);
	snprintf(zone, zlen, "%s", z && str_is_dns_label(z) ? z : "");
	json_object_put(node);
	return 0;
}

int capi_nap_shapes(void *state, prd_cloud_shape **out, size_t *count, prd_cloud_error *err)
{
	capi *c = state;
	json_object *tv = NULL;
	prd_cloud_shape *v;
	size_t i, n, k = 0;
	int rc;
	*out = NULL;
	*count = 0;
	if(!c->nap)
		return 0;
	if((rc = capi_nap_templates(c, &tv, err)))
		return rc;
	n = json_object_array_length(tv);
	if(!(v = calloc(n + 1, sizeof(*v)))) {
		json_object_put(tv);
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	for(i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(tv, i);
		prd_cloud_error e = {0, ""};
		char zone[64];
		char *node = NULL;
		rc = capi_nap_shape_of(c, o, &node, zone, sizeof(zone), &e);
		if(rc == PRD_CLOUD_ENOMEM)
			break;
		if(rc) {
			/* One template without scale-from-zero data does not
			 * hide the others. */
			capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: template MachineDeployment is no shape: %s", e.message);
			rc = 0;
			continue;
		}
		v[k].node_json = node;
		v[k].name = capi_strdup(capi_jstr(capi_jobj(o, "metadata"), "name"));
		v[k].zones = capi_strdup(zone);
		v[k].price_micros = -1;
		v[k].max_size = c->nap->max_size;
		k++;
		if(!v[k - 1].name || !v[k - 1].zones) {
			rc = PRD_CLOUD_ENOMEM;
			break;
		}
	}
	json_object_put(tv);
	if(rc) {
		capi_nap_release_shapes(c, v, k);
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	*out = v;
	*count = k;
	return 0;
}

void capi_nap_release_shapes(void *state, prd_cloud_shape *v, size_t count)
{
	drv_release_shapes(state, v, count);
}

/* ---- the creations' fence (ABI 1.6) ------------------------------------ */

int capi_nap_fence_recorded(capi *c, const char *key, uint64_t *term, prd_cloud_error *err)
{
	json_object *tv = NULL;
	size_t i, n;
	int rc = capi_fence_check_key(key, err);
	*term = 0;
	if(rc || !c->nap)
		return rc;
	if((rc = capi_nap_templates(c, &tv, err)))
		return rc;
	n = json_object_array_length(tv);
	for(i = 0; i < n && !rc; i++) {
		capi_group g;
		uint64_t t = 0;
		rc = capi_nap_tmpl_view(json_object_array_get_idx(tv, i), &g, err);
		if(!rc)
			rc = capi_fence_read(c, &g, CAPI_CREATE_FENCE_PREFIX, key, &t, err);
		if(!rc && t > *term)
			*term = t;
		free(g.id);
	}
	json_object_put(tv);
	return rc;
}

/* Recorded on every template, whose creation record a create_group of its
 * shape checks and raises under the template's resourceVersion. */
int capi_nap_fence(capi *c, const char *key, uint64_t term, prd_cloud_error *err)
{
	json_object *tv = NULL;
	size_t i, n;
	int rc = capi_fence_check_key(key, err);
	if(!rc && term == 0)
		rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: fence term 0 (terms begin at 1)");
	if(rc || !c->nap)
		return rc; /* without autoProvisioning nothing is created */
	if((rc = capi_nap_templates(c, &tv, err)))
		return rc;
	n = json_object_array_length(tv);
	for(i = 0; i < n && !rc; i++) {
		capi_group g;
		rc = capi_nap_tmpl_view(json_object_array_get_idx(tv, i), &g, err);
		if(!rc)
			rc = capi_fence_with(c, &g, CAPI_CREATE_FENCE_PREFIX, key, term, err);
		free(g.id);
	}
	json_object_put(tv);
	if(!rc) {
		snprintf(c->nap->fence_key, sizeof(c->nap->fence_key), "%s", key);
		c->nap->fence_term = term;
	}
	return rc;
}

/* The clusterapi driver's operations (see docs/drivers.md, "The clusterapi
 * driver").
 *
 * Node groups are re-read at every refresh: the MachineDeployments,
 * standalone MachineSets (those not owned by a MachineDeployment) and
 * MachinePools that carry both the min and the max size annotation - from
 * the watched copies of a separate management cluster (capi_watch.c) when
 * they are in step, else from the apiserver. Sizes move through the scale
 * subresource; deleting particular nodes marks their Machines with
 * cluster.x-k8s.io/delete-machine first, so the MachineSet controller
 * removes exactly those when replicas drop. Every write is planned from
 * the apiserver, never from a watched copy. */
#include "clusterapi/clusterapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rfc3339.h"
#include "util/str.h"
#include "util/yamljson.h"

static void groups_free(capi_group *g, size_t n)
{
	size_t i;
	for(i = 0; i < n; i++)
		capi_group_clear(&g[i]);
	free(g);
}

static void capi_free(capi *c)
{
	if(!c)
		return;
	free(c->ns);
	free(c->cluster);
	free(c->version);
	capi_nap_free(c);
	capi_claims_free(c);
	capi_watch_free(c); /* (its threads use the management client) */
	json_object_put(c->disco);
	capi_mgmt_free(c);
	groups_free(c->groups, c->ngroups);
	free(c);
}

capi_group *capi__find_group(capi *c, const char *id)
{
	size_t i;
	for(i = 0; id && i < c->ngroups; i++)
		if(!strcmp(c->groups[i].id, id))
			return &c->groups[i];
	return NULL;
}

capi_group *capi_find_group(capi *c, const char *id)
{
	return capi__find_group(c, id);
}

int capi__no_group(prd_cloud_error *err, const char *id)
{
	return capi_fail(err, PRD_CLOUD_ENOTFOUND,
			 "clusterapi: no node group '%s' (groups are Kind/namespace/name of a MachineDeployment, "
			 "MachineSet or MachinePool with both size annotations)",
			 id ? id : "(null)");
}

/* ---- configuration -------------------------------------------------- */

static int parse_config(capi *c, const char *config, prd_cloud_error *err)
{
	json_object *doc = NULL;
	prd_err pe = {0};
	int rc = 0;
	if(config && config[strspn(config, " \t\r\n")]) {
		if(yj_parse_one(config, strlen(config), &doc, &pe))
			return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi config: %s", pe.msg);
		if(!json_object_is_type(doc, json_type_object)) {
			json_object_put(doc);
			return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi config must be a YAML mapping");
		}
		json_object_object_foreach(doc, key, v) {
			char **dst;
			const char *s;
			if(!strcmp(key, "watch")) {
				if(!json_object_is_type(v, json_type_boolean)) {
					rc = capi_fail(err, PRD_CLOUD_EINVAL,
						       "clusterapi config: watch must be true or false, got '%s'",
						       json_object_get_string(v));
					break;
				}
				c->watch = json_object_get_boolean(v);
				continue;
			}
			if(!strcmp(key, "autoProvisioning")) {
				rc = capi_nap_config(c, v, err);
				if(rc)
					break;
				continue;
			}
			if(!strcmp(key, "managementKubeconfig") || !strcmp(key, "managementContext") ||
			   !strcmp(key, "managementInCluster")) {
				rc = capi_mgmt_config(c, key, v, err);
				if(rc)
					break;
				continue;
			}
			dst = !strcmp(key, "namespace")	 ? &c->ns
				     : !strcmp(key, "clusterName") ? &c->cluster
				     : !strcmp(key, "version")	 ? &c->version
								 : NULL;
			s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
			if(!dst) {
				rc = capi_fail(err, PRD_CLOUD_EINVAL,
					       "clusterapi config: unknown key '%s' (known: namespace, clusterName, version, "
					       "managementKubeconfig, managementContext, managementInCluster, watch, "
					       "autoProvisioning)",
					       key);
				break;
			}
			if(!s || !str_is_dns_label(s)) {
				rc = capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi config: %s must be a DNS label, got '%s'",
					       key, json_object_get_string(v));
				break;
			}
			free(*dst);
			*dst = capi_strdup(s);
			if(!*dst) {
				rc = capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
				break;
			}
		}
		json_object_put(doc);
	}
	if(!rc)
		rc = capi_nap_check(c, err);
	if(!rc && !c->version && !(c->version = capi_strdup("v1beta1")))
		rc = capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	if(!rc)
		rc = capi_mgmt_init(c, err);
	return rc;
}

/* ---- discovery ------------------------------------------------------ */

/* A strict non-negative integer annotation value. */
static int size_annotation(const char *v, int32_t *out)
{
	int64_t x;
	if(!v || str_to_int64(v, &x) || x < 0 || x > INT32_MAX)
		return -1;
	*out = (int32_t)x;
	return 0;
}

static bool owned_by_machine_deployment(json_object *obj)
{
	json_object *refs;
	size_t i, n;
	if(!json_object_object_get_ex(capi_jobj(obj, "metadata"), "ownerReferences", &refs) ||
	   !json_object_is_type(refs, json_type_array))
		return false;
	n = json_object_array_length(refs);
	for(i = 0; i < n; i++) {
		const char *k = capi_jstr(json_object_array_get_idx(refs, i), "kind");
		if(k && !strcmp(k, "MachineDeployment"))
			return true;
	}
	return false;
}

/* The selector of a group's Machines: spec.selector of a MachineDeployment
 * or MachineSet, else the label Cluster API puts on their Machines. */
static int machine_selector(capi_kind kind, json_object *obj, const char *name, sel **out, prd_err *pe)
{
	json_object *s = NULL;
	char text[400];
	if(kind != CAPI_MACHINE_POOL && json_object_object_get_ex(capi_jobj(obj, "spec"), "selector", &s) && s &&
	   json_object_is_type(s, json_type_object) && json_object_object_length(s))
		return sel_from_json(s, out, pe);
	snprintf(text, sizeof(text), "%s=%s",
		 kind == CAPI_MACHINE_DEPLOYMENT ? "cluster.x-k8s.io/deployment-name"
		 : kind == CAPI_MACHINE_SET	  ? "cluster.x-k8s.io/set-name"
						  : "cluster.x-k8s.io/pool-name",
		 name);
	return sel_parse(text, out, pe);
}

typedef struct discover {
	capi *c;
	capi_kind kind;
	capi_group *v;
	size_t n;
	int rc;
	prd_cloud_error *err;
} discover;

/* One scalable resource from a list: a node group when it carries both
 * size annotations with good values; bad values are logged and the
 * resource skipped, so one broken object does not hide the others. */
static int discover_one(void *ud, json_object *obj)
{
	discover *d = ud;
	capi *c = d->c;
	json_object *md = capi_jobj(obj, "metadata"), *ann = capi_jobj(md, "annotations");
	const char *ns = capi_jstr(md, "namespace"), *name = capi_jstr(md, "name");
	const char *smin = capi_jstr(ann, CAPI_MIN_ANNOTATION), *smax = capi_jstr(ann, CAPI_MAX_ANNOTATION);
	const char *cluster = capi_jstr(capi_jobj(obj, "spec"), "clusterName");
	const char *kind = capi_kind_name(d->kind);
	capi_group g, *bigger;
	json_object *rep;
	prd_err pe = {0};
	char id[600];

	if(!ns || !name || !smin || !smax)
		return 0;
	if(d->kind == CAPI_MACHINE_SET && owned_by_machine_deployment(obj))
		return 0; /* its MachineDeployment is the group */
	/* An auto-provisioned group this driver deleted, which the
	 * MachineDeployment controller's finalizer keeps a moment longer: no
	 * plan may count on it any more. */
	if(d->kind == CAPI_MACHINE_DEPLOYMENT && capi_jstr(md, "deletionTimestamp") && capi_nap_is_ours(obj))
		return 0;
	if(c->cluster && (!cluster || strcmp(cluster, c->cluster)))
		return 0;
	memset(&g, 0, sizeof(g));
	if(size_annotation(smin, &g.min)) {
		capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: %s %s/%s is not a node group: %s='%s' is not a non-negative integer",
			 kind, ns, name, CAPI_MIN_ANNOTATION, smin);
		return 0;
	}
	if(size_annotation(smax, &g.max)) {
		capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: %s %s/%s is not a node group: %s='%s' is not a non-negative integer",
			 kind, ns, name, CAPI_MAX_ANNOTATION, smax);
		return 0;
	}
	if(g.max < g.min) {
		capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: %s %s/%s is not a node group: max size %d is below min size %d",
			 kind, ns, name, (int)g.max, (int)g.min);
		return 0;
	}
	if(json_object_object_get_ex(capi_jobj(obj, "spec"), "replicas", &rep) && rep) {
		if(!json_object_is_type(rep, json_type_int) || json_object_get_int64(rep) < 0 ||
		   json_object_get_int64(rep) > INT32_MAX) {
			capi_log(c, PRD_CLOUD_LOG_WARN,
				 "clusterapi: %s %s/%s is not a node group: spec.replicas is not a non-negative integer", kind,
				 ns, name);
			return 0;
		}
		g.replicas = (int32_t)json_object_get_int64(rep);
	}
	if(machine_selector(d->kind, obj, name, &g.machines, &pe)) {
		capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: %s %s/%s is not a node group: spec.selector: %s", kind, ns, name,
			 pe.msg);
		return 0;
	}
	if(d->kind == CAPI_MACHINE_DEPLOYMENT && capi_nap_is_ours(obj)) {
		/* Made by create_group: the host named the group, and the name
		 * is the MachineDeployment's. */
		size_t i;
		snprintf(id, sizeof(id), "%s", name);
		for(i = 0; i < d->n; i++)
			if(!strcmp(d->v[i].id, id)) {
				capi_log(c, PRD_CLOUD_LOG_WARN,
					 "clusterapi: auto-provisioned MachineDeployment %s/%s has the name of group %s "
					 "listed already (in another namespace); ignored",
					 ns, name, id);
				sel_free(g.machines);
				return 0;
			}
	} else {
		snprintf(id, sizeof(id), "%s/%s/%s", kind, ns, name);
	}
	g.kind = d->kind;
	g.id = capi_strdup(id);
	g.ns = capi_strdup(ns);
	g.name = capi_strdup(name);
	g.obj = json_object_get(obj);
	bigger = realloc(d->v, (d->n + 1) * sizeof(*bigger));
	if(!g.id || !g.ns || !g.name || !bigger) {
		if(bigger)
			d->v = bigger;
		free(g.id);
		free(g.ns);
		free(g.name);
		json_object_put(g.obj);
		sel_free(g.machines);
		d->rc = capi_fail(d->err, PRD_CLOUD_ENOMEM, "out of memory");
		return d->rc;
	}
	d->v = bigger;
	d->v[d->n++] = g;
	return 0;
}

int capi_group_of(capi *c, capi_kind kind, json_object *obj, capi_group *g, prd_cloud_error *err)
{
	discover d;
	int rc;
	memset(&d, 0, sizeof(d));
	d.c = c;
	d.err = err;
	d.kind = kind;
	rc = discover_one(&d, obj);
	if(rc || d.n != 1) {
		groups_free(d.v, d.n);
		return rc ? rc
			  : capi_fail(err, PRD_CLOUD_ENOTFOUND, "clusterapi: the %s is not a node group",
				      capi_kind_name(kind));
	}
	*g = d.v[0];
	free(d.v);
	return 0;
}

void capi_group_clear(capi_group *g)
{
	free(g->id);
	free(g->ns);
	free(g->name);
	json_object_put(g->obj);
	sel_free(g->machines);
	memset(g, 0, sizeof(*g));
}

int capi_groups_put(capi *c, capi_group *g, prd_cloud_error *err)
{
	capi_group *old = capi__find_group(c, g->id), *bigger;
	if(old) {
		capi_group_clear(old);
		*old = *g;
		memset(g, 0, sizeof(*g));
		return 0;
	}
	bigger = realloc(c->groups, (c->ngroups + 1) * sizeof(*bigger));
	if(!bigger)
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	c->groups = bigger;
	c->groups[c->ngroups++] = *g;
	memset(g, 0, sizeof(*g));
	return 0;
}

void capi_groups_drop(capi *c, const char *id)
{
	capi_group *g = capi__find_group(c, id);
	size_t i;
	if(!g)
		return;
	i = (size_t)(g - c->groups);
	capi_group_clear(g);
	memmove(&c->groups[i], &c->groups[i + 1], (c->ngroups - i - 1) * sizeof(*g));
	c->ngroups--;
}

/* Forget the groups d collected after the first `keep`. */
static void groups_free_tail(discover *d, size_t keep)
{
	size_t i;
	for(i = keep; i < d->n; i++) {
		free(d->v[i].id);
		free(d->v[i].ns);
		free(d->v[i].name);
		json_object_put(d->v[i].obj);
		sel_free(d->v[i].machines);
	}
	d->n = keep;
}

/* Whether a watched copy of a group object is older than a write of this
 * driver: its resourceVersion is still the one the write replaced. A
 * record is dropped once the watch shows another version. */
static bool behind_own_write(capi *c, capi_kind kind, json_object *obj)
{
	json_object *md = capi_jobj(obj, "metadata");
	const char *rv = capi_jstr(md, "resourceVersion");
	char key[400];
	size_t i;
	snprintf(key, sizeof(key), "%s/%s/%s", capi_kind_plural(kind), capi_jstr(md, "namespace") ? capi_jstr(md, "namespace") : "",
		 capi_jstr(md, "name") ? capi_jstr(md, "name") : "");
	for(i = 0; i < c->nwritten; i++) {
		if(strcmp(c->written[i].key, key))
			continue;
		if(rv && !strcmp(rv, c->written[i].rv))
			return true;
		c->written[i] = c->written[--c->nwritten];
		return false;
	}
	return false;
}

/* Remember that a write replaced version `rv` of the group's object. */
static void note_write(capi *c, const capi_group *g, const char *rv)
{
	char key[400];
	size_t i;
	if(!c->colls || !rv || !rv[0])
		return;
	snprintf(key, sizeof(key), "%s/%s/%s", capi_kind_plural(g->kind), g->ns, g->name);
	for(i = 0; i < c->nwritten && strcmp(c->written[i].key, key); i++)
		;
	if(i == c->nwritten) {
		if(c->nwritten == sizeof(c->written) / sizeof(c->written[0]))
			i = 0; /* full: the oldest record is likely in step by now */
		else
			c->nwritten++;
	}
	snprintf(c->written[i].key, sizeof(c->written[i].key), "%s", key);
	snprintf(c->written[i].rv, sizeof(c->written[i].rv), "%s", rv);
}

/* One kind from the watch: 0 (every object handed to discover_one),
 * PRD_CLOUD_ENOTFOUND (not served) or PRD_CLOUD_EAGAIN (read the
 * apiserver: no watch, not in step, or a copy older than our write). */
static int discover_watched(capi *c, discover *d)
{
	json_object *items = NULL;
	char gv[128];
	size_t i, n;
	int rc;
	snprintf(gv, sizeof(gv), CAPI_GROUP "/%s", c->version);
	rc = capi_watch_list(c, gv, c->ns, capi_kind_plural(d->kind), NULL, NULL, &items);
	if(rc)
		return rc;
	n = json_object_array_length(items);
	if(d->kind == CAPI_MACHINE_DEPLOYMENT && capi_nap_watch_behind(c, items)) {
		json_object_put(items);
		return PRD_CLOUD_EAGAIN;
	}
	for(i = 0; i < n; i++)
		if(behind_own_write(c, d->kind, json_object_array_get_idx(items, i))) {
			json_object_put(items);
			return PRD_CLOUD_EAGAIN;
		}
	for(i = 0; i < n && !rc; i++)
		rc = discover_one(d, json_object_array_get_idx(items, i));
	json_object_put(items);
	return rc;
}

/* List every kind of scalable resource into a new group array. A kind
 * whose CRD is not installed (404) has no groups. */
static int discover_groups(capi *c, capi_group **out, size_t *nout, prd_cloud_error *err)
{
	discover d;
	int k, rc = 0;
	memset(&d, 0, sizeof(d));
	d.c = c;
	d.err = err;
	for(k = 0; k < CAPI_KINDS && !rc; k++) {
		char path[512];
		prd_cloud_error e = {0, ""};
		size_t before = d.n;
		d.kind = (capi_kind)k;
		rc = discover_watched(c, &d);
		if(rc == 0 || rc == PRD_CLOUD_ENOTFOUND) {
			rc = d.rc;
			continue;
		}
		if(rc != PRD_CLOUD_EAGAIN)
			break;
		/* Read the apiserver: drop what the watch handed over. */
		groups_free_tail(&d, before);
		rc = 0;
		capi_path(c, path, sizeof(path), capi_kind_plural(d.kind), c->ns, NULL, NULL);
		rc = capi_list(c, path, discover_one, &d, &e);
		if(rc == PRD_CLOUD_ENOTFOUND) {
			capi_log(c, PRD_CLOUD_LOG_DEBUG, "clusterapi: %s are not served here (%s)", capi_kind_plural(d.kind),
				 e.message);
			rc = 0;
		} else if(rc && !d.rc) {
			rc = capi_fail(err, rc, "clusterapi: listing %s: %s", capi_kind_plural(d.kind), e.message);
		}
	}
	if(rc) {
		groups_free(d.v, d.n);
		return rc;
	}
	*out = d.v;
	*nout = d.n;
	return 0;
}

static int cp_refresh(void *state, prd_cloud_error *err)
{
	capi *c = state;
	capi_group *v = NULL;
	size_t n = 0;
	int rc = discover_groups(c, &v, &n, err);
	if(rc)
		return rc;
	groups_free(c->groups, c->ngroups);
	c->groups = v;
	c->ngroups = n;
	return 0;
}

static int cp_init(const prd_cloud_host *host, const char *config, void **state, prd_cloud_error *err)
{
	capi *c = calloc(1, sizeof(*c));
	prd_cloud_error e = {0, ""};
	int rc;
	if(!c)
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	c->host = host;
	c->api = host;
	c->watch = true;
	rc = parse_config(c, config, err);
	if(rc) {
		capi_free(c);
		return rc;
	}
	capi_mgmt_probe(c);
	/* An apiserver that is away at start-up is not a configuration
	 * error: the first refresh will find the groups. */
	if(cp_refresh(c, &e))
		capi_log(c, PRD_CLOUD_LOG_WARN, "clusterapi: initial discovery failed: %s", e.message);
	*state = c;
	return 0;
}

static void cp_fini(void *state)
{
	capi_free(state);
}

static int get_scale(capi *c, capi_group *g, int32_t *replicas, char *rv, size_t rvlen, prd_cloud_error *err);

/* Reported sizes are the last listing's and this driver's own writes',
 * except after a write whose outcome is unknown (its answer lost to a
 * timeout, the write perhaps made): that group's replicas are read again
 * here, and a read that fails fails the call, so the host never takes
 * the replicas from before such a write for the group's target (it would
 * close a plan as "nothing was made" while the MachineSet makes its
 * Machines). */
static int cp_node_groups(void *state, prd_cloud_node_group **out, size_t *count, prd_cloud_error *err)
{
	capi *c = state;
	prd_cloud_node_group *v;
	size_t i;
	for(i = 0; i < c->ngroups; i++) {
		capi_group *g = &c->groups[i];
		char rv[64];
		int32_t r;
		int rc;
		if(!g->replicas_unsure)
			continue;
		if((rc = get_scale(c, g, &r, rv, sizeof(rv), err)))
			return rc;
		g->replicas = r;
		g->replicas_unsure = false;
	}
	v = calloc(c->ngroups + 1, sizeof(*v));
	if(!v)
		return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < c->ngroups; i++) {
		v[i].id = capi_strdup(c->groups[i].id);
		if(!v[i].id) {
			while(i--)
				free(v[i].id);
			free(v);
			return capi_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
		v[i].min_size = c->groups[i].min;
		v[i].max_size = c->groups[i].max;
		v[i].target_size = c->groups[i].replicas;
	}
	*out = v;
	*count = c->ngroups;
	return 0;
}

/* ---- sizes ---------------------------------------------------------- */

/* Read the scale subresource: replicas and the resourceVersion to patch
 * against. */
static int get_scale(capi *c, capi_group *g, int32_t *replicas, char *rv, size_t rvlen, prd_cloud_error *err)
{
	char path[800];
	json_object *sc = NULL, *r;
	int rc;
	capi_path(c, path, sizeof(path), capi_kind_plural(g->kind), g->ns, g->name, "scale");
	rc = capi_request(c, "GET", path, NULL, NULL, &sc, NULL, err);
	if(rc)
		return rc;
	if(!json_object_object_get_ex(capi_jobj(sc, "spec"), "replicas", &r) || !json_object_is_type(r, json_type_int))
		*replicas = 0; /* omitted when zero */
	else
		*replicas = (int32_t)json_object_get_int64(r);
	snprintf(rv, rvlen, "%s", capi_jstr(capi_jobj(sc, "metadata"), "resourceVersion") ?
					  capi_jstr(capi_jobj(sc, "metadata"), "resourceVersion") : "");
	json_object_put(sc);
	return 0;
}

/* Merge-patch spec.replicas through the scale subresource, guarded by the
 * resourceVersion read with it: a concurrent change is a 409, reported as
 * PRD_CLOUD_EAGAIN rather than overwritten. */
static int set_scale(capi *c, capi_group *g, int32_t replicas, const char *rv, prd_cloud_error *err)
{
	char path[800];
	json_object *patch = json_object_new_object(), *spec = json_object_new_object(), *md;
	long status = 0;
	int rc;
	capi_path(c, path, sizeof(path), capi_kind_plural(g->kind), g->ns, g->name, "scale");
	json_object_object_add(spec, "replicas", json_object_new_int(replicas));
	json_object_object_add(patch, "spec", spec);
	if(rv && rv[0]) {
		md = json_object_new_object();
		json_object_object_add(md, "resourceVersion", json_object_new_string(rv));
		json_object_object_add(patch, "metadata", md);
	}
	rc = capi_request(c, "PATCH", path, "application/merge-patch+json", patch, NULL, &status, err);
	json_object_put(patch);
	if(rc && status == 409)
		rc = PRD_CLOUD_EAGAIN;
	if(!rc) {
		g->replicas = replicas;
		g->replicas_unsure = false;
		note_write(c, g, rv);
	} else if(status != 409) {
		g->replicas_unsure = true;
	}
	return rc;
}

/* PUT the Scale back with the resourceVersion it was read with, for the
 * conditional calls (ABI 1.3): whoever wrote the object since makes the
 * apiserver answer 409, which is PRD_CLOUD_ECONFLICT, nothing changed.
 * With a `record` (an increase's), merge-patch the object itself instead,
 * under the same resourceVersion: its replicas and the annotation
 * CAPI_INCREASE_ANNOTATION in one write, so whoever reads the object later
 * can tell this write's move of the replicas from anyone else's. */
int capi__put_replicas(capi *c, capi_group *g, int32_t replicas, const char *rv, const char *record,
		       prd_cloud_error *err)
{
	char path[800];
	json_object *sc, *md, *spec, *ann;
	long status = 0;
	int rc;
	if(!rv || !rv[0])
		return capi_fail(err, PRD_CLOUD_EIO,
				 "clusterapi: %s: the scale subresource gave no resourceVersion to make the write "
				 "conditional on; nothing changed",
				 g->id);
	sc = json_object_new_object();
	md = json_object_new_object();
	spec = json_object_new_object();
	capi_path(c, path, sizeof(path), capi_kind_plural(g->kind), g->ns, g->name, record ? NULL : "scale");
	if(!record) {
		json_object_object_add(sc, "apiVersion", json_object_new_string("autoscaling/v1"));
		json_object_object_add(sc, "kind", json_object_new_string("Scale"));
		json_object_object_add(md, "name", json_object_new_string(g->name));
		json_object_object_add(md, "namespace", json_object_new_string(g->ns));
	} else if((ann = json_object_new_object())) {
		json_object_object_add(ann, CAPI_INCREASE_ANNOTATION, json_object_new_string(record));
		json_object_object_add(md, "annotations", ann);
	}
	json_object_object_add(md, "resourceVersion", json_object_new_string(rv));
	json_object_object_add(sc, "metadata", md);
	json_object_object_add(spec, "replicas", json_object_new_int(replicas));
	json_object_object_add(sc, "spec", spec);
	rc = capi_request(c, record ? "PATCH" : "PUT", path, record ? "application/merge-patch+json" : "application/json",
			  sc, NULL, &status, err);
	json_object_put(sc);
	if(rc && status != 409)
		g->replicas_unsure = true; /* (the answer may be lost, the write made) */
	if(rc && status == 409)
		return capi_fail(err, PRD_CLOUD_ECONFLICT,
				 "clusterapi: %s: the object was changed by another writer (its replicas, or a newer "
				 "leader's fence) between this call's read and its write (409 Conflict); nothing changed",
				 g->id);
	if(!rc) {
		g->replicas = replicas;
		g->replicas_unsure = false;
		note_write(c, g, rv);
	}
	return rc;
}

int capi__put_scale(capi *c, capi_group *g, int32_t replicas, const char *rv, prd_cloud_error *err)
{
	return capi__put_replicas(c, g, replicas, rv, NULL, err);
}

/* The replicas the conditional call was planned from are still there. */
static int check_expected(const capi_group *g, int32_t cur, int32_t expected, prd_cloud_error *err)
{
	if(expected < 0 || cur == expected)
		return 0;
	return capi_fail(err, PRD_CLOUD_ECONFLICT,
			 "clusterapi: %s: replicas are %d, not the %d this call was planned from (another writer "
			 "changed them); nothing changed",
			 g->id, (int)cur, (int)expected);
}

/* The replicas and the resourceVersion a write will be conditional on:
 * from the scale subresource, or, for a call carrying a fencing token
 * (key not NULL), from the object itself with its recorded term judged
 * (capi_read_fenced). */
int capi__read_for_write(capi *c, capi_group *g, const char *key, uint64_t term, int32_t *cur, char *rv,
			 size_t rvlen, prd_cloud_error *err)
{
	capi_view v;
	int rc;
	if(!key)
		return get_scale(c, g, cur, rv, rvlen, err);
	rc = capi_read_fenced(c, g, key, term, &v, err);
	if(!rc) {
		*cur = v.replicas;
		snprintf(rv, rvlen, "%s", v.rv);
	}
	return rc;
}

/* The object an increase with an owner token is planned from: as
 * capi__read_for_write, with the last increase's token. */
static int read_for_increase(capi *c, capi_group *g, const char *key, uint64_t term, capi_view *v,
			     prd_cloud_error *err)
{
	return key ? capi_read_fenced(c, g, key, term, v, err) : capi_read_object(c, g, v, err);
}

static int cp_increase(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	capi *c = state;
	capi_group *g = capi__find_group(c, group_id);
	int32_t cur;
	char rv[64];
	int rc;
	if(!g)
		return capi__no_group(err, group_id);
	if(delta <= 0)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: the increase must be positive, got %d", g->id,
				 (int)delta);
	rc = get_scale(c, g, &cur, rv, sizeof(rv), err);
	if(rc)
		return rc;
	if(delta > g->max - cur)
		return capi_fail(err, PRD_CLOUD_ERANGE,
				 "clusterapi: %s: increasing replicas from %d by %d would exceed its maximum size %d",
				 g->id, (int)cur, (int)delta, (int)g->max);
	return set_scale(c, g, cur + delta, rv, err);
}

/* ABI 1.3. With an expected target: read the scale, compare, and PUT it
 * back with the resourceVersion read, so a stale caller (a replica that
 * lost its lease, a plan made before someone else scaled) changes
 * nothing. Cluster API offers no way to mark the Machines one scale call
 * makes (the MachineSet controller creates them from its template), so
 * this driver does not claim PRD_CLOUD_CAP_OWNER_MARK: the owner token
 * goes on the Machines only once they are proven the call's (capi_claim.c).
 * Replicas move at once but Machines come with no all-or-nothing promise:
 * an atomic increase is not offered. */
static int cp_increase_req(void *state, const prd_cloud_increase *req, prd_cloud_error *err)
{
	capi *c = state;
	capi_group *g;
	const char *key;
	json_object *before = NULL;
	prd_cloud_error le = {0, ""};
	int32_t cur;
	int rc, attempt;
	if(!req || req->struct_size < offsetof(prd_cloud_increase, owner) + sizeof(req->owner))
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: increase: the request is %u bytes, older than "
							"ABI 1.3's",
				 req ? (unsigned)req->struct_size : 0u);
	if(!(g = capi__find_group(c, req->group_id)))
		return capi__no_group(err, req->group_id);
	if(req->atomic)
		return capi_fail(err, PRD_CLOUD_EUNSUPPORTED,
				 "clusterapi: %s: Cluster API makes no all-or-nothing promise for the Machines of a "
				 "scale-up; no atomic increase",
				 g->id);
	if(req->expected_target < -1)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: expected target %d (want -1 or a size)", g->id,
				 (int)req->expected_target);
	/* Without a term (NULL / 0) the caller is not leader-elected. */
	key = req->struct_size >= offsetof(prd_cloud_increase, fence_term) + sizeof(req->fence_term) && req->fence_term
		      ? req->fence_key
		      : NULL;
	if(req->expected_target < 0 && !key)
		return cp_increase(state, req->group_id, req->delta, err);
	if(req->delta <= 0)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: the increase must be positive, got %d", g->id,
				 (int)req->delta);
	/* A 409 says only that the object changed since the read: Cluster
	 * API's controllers write a MachineDeployment's status and
	 * annotations (at once after it is created, every time its
	 * MachineSets move) without touching its replicas. Read again and
	 * judge afresh: replicas that moved, or a newer term recorded, refuse
	 * the call as before; anything else is written again, conditional on
	 * the new read. */
	for(attempt = 0;; attempt++) {
		capi_view v;
		char record[160];
		memset(&v, 0, sizeof(v));
		rc = req->owner ? read_for_increase(c, g, key, key ? req->fence_term : 0, &v, err)
				: capi__read_for_write(c, g, key, key ? req->fence_term : 0, &v.replicas, v.rv,
						       sizeof(v.rv), err);
		/* The same plan's increase already took effect (a repeated
		 * call: its answer was lost, or the caller resumes an
		 * interrupted plan): nothing more to write, whatever the
		 * replicas are now. */
		if(!rc && req->owner && !strcmp(v.increased_by, req->owner)) {
			capi_log(c, PRD_CLOUD_LOG_INFO, "clusterapi: %s: the increase of plan %s took effect before; "
							"nothing more to write", g->id, req->owner);
			return 0;
		}
		cur = v.replicas;
		if(!rc)
			rc = check_expected(g, cur, req->expected_target, err);
		if(rc)
			return rc;
		if(req->delta > g->max - cur)
			return capi_fail(err, PRD_CLOUD_ERANGE,
					 "clusterapi: %s: increasing replicas from %d by %d would exceed its maximum size %d",
					 g->id, (int)cur, (int)req->delta, (int)g->max);
		/* The group's Machines before the write, for marking the ones it
		 * makes (capi_claim.c): only when they are exactly what the
		 * replicas ask for. */
		if(req->owner && capi_group_machines(c, g, true, &before, &le) == 0 &&
		   !capi_claim_baseline_ok(before, cur)) {
			json_object_put(before);
			before = NULL;
		}
		snprintf(record, sizeof(record), "%s %d->%d", req->owner ? req->owner : "", (int)cur,
			 (int)(cur + req->delta));
		rc = capi__put_replicas(c, g, cur + req->delta, v.rv, req->owner ? record : NULL, err);
		if(!rc && before)
			capi_claim_note(c, g, req->owner, cur, req->delta, before);
		json_object_put(before);
		before = NULL;
		if(rc != PRD_CLOUD_ECONFLICT || req->expected_target < 0 || attempt + 1 >= CAPI_WRITE_ATTEMPTS)
			return rc;
		capi_log(c, PRD_CLOUD_LOG_DEBUG, "clusterapi: %s changed between read and write; reading it again",
			 g->id);
	}
}

/* decrease_target_size, its conditional form (expected >= 0) and its
 * fenced form (key not NULL). */
static int decrease(capi *c, const char *group_id, int32_t delta, int32_t expected, const char *key, uint64_t term,
		    prd_cloud_error *err)
{
	capi_group *g = capi__find_group(c, group_id);
	json_object *machines = NULL;
	int32_t cur, existing = 0;
	size_t i, n;
	char rv[64];
	int rc;
	if(!g)
		return capi__no_group(err, group_id);
	if(delta <= 0)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: the decrease must be positive, got %d", g->id,
				 (int)delta);
	rc = capi__read_for_write(c, g, key, term, &cur, rv, sizeof(rv), err);
	if(!rc)
		rc = check_expected(g, cur, expected, err);
	if(!rc)
		rc = capi_group_machines(c, g, true, &machines, err);
	if(rc)
		return rc;
	n = json_object_array_length(machines);
	for(i = 0; i < n; i++)
		existing += !capi__machine_deleting(json_object_array_get_idx(machines, i));
	json_object_put(machines);
	if(cur - delta < existing)
		return capi_fail(err, PRD_CLOUD_ERANGE,
				 "clusterapi: %s: lowering replicas from %d by %d would go below its %d existing "
				 "Machines; delete nodes instead",
				 g->id, (int)cur, (int)delta, (int)existing);
	return expected >= 0 || key ? capi__put_scale(c, g, cur - delta, rv, err) : set_scale(c, g, cur - delta, rv, err);
}

static int cp_decrease_target(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	return decrease(state, group_id, delta, -1, NULL, 0, err);
}

static int cp_decrease_target_if(void *state, const char *group_id, int32_t delta, int32_t expected,
				 prd_cloud_error *err)
{
	if(expected < -1)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: expected target %d (want -1 or a size)",
				 group_id ? group_id : "(null)", (int)expected);
	return decrease(state, group_id, delta, expected, NULL, 0, err);
}

/* ABI 1.4: decrease_target_size with an expected target and a fencing
 * token, both checked against one read of the object and made to hold by
 * writing with its resourceVersion. */
static int cp_decrease_req(void *state, const prd_cloud_decrease *req, prd_cloud_error *err)
{
	if(!req || req->struct_size < offsetof(prd_cloud_decrease, fence_term) + sizeof(req->fence_term))
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: decrease: the request is %u bytes, older than "
							"ABI 1.4's",
				 req ? (unsigned)req->struct_size : 0u);
	if(req->expected_target < -1)
		return capi_fail(err, PRD_CLOUD_EINVAL, "clusterapi: %s: expected target %d (want -1 or a size)",
				 req->group_id ? req->group_id : "(null)", (int)req->expected_target);
	return decrease(state, req->group_id, req->delta, req->expected_target,
			req->fence_term ? req->fence_key : NULL, req->fence_term, err);
}

/* ABI 1.4: record that term `term` of leader election `key` began. */
static int cp_fence(void *state, const char *group_id, const char *key, uint64_t term, prd_cloud_error *err)
{
	capi *c = state;
	capi_group *g = capi__find_group(c, group_id);
	if(!group_id)
		return capi_nap_fence(c, key, term, err);
	capi_view v;
	int rc;
	if(!g)
		return capi__no_group(err, group_id);
	/* The size node_groups reports from now on is the one the fence read
	 * (the host reads the targets again after fencing: a former leader's
	 * increase that landed before the fence is in it, and none can land
	 * after). */
	rc = capi_fence_view(c, g, CAPI_FENCE_PREFIX, key, term, &v, err);
	if(!rc)
		g->replicas = v.replicas;
	return rc;
}

static int cp_fence_recorded(void *state, const char *group_id, const char *key, uint64_t *term,
			     prd_cloud_error *err)
{
	capi *c = state;
	capi_group *g = capi__find_group(c, group_id);
	*term = 0;
	if(!group_id)
		return capi_nap_fence_recorded(c, key, term, err);
	if(!g)
		return capi__no_group(err, group_id);
	return capi_fence_read(c, g, CAPI_FENCE_PREFIX, key, term, err);
}

static const prd_cloud_driver descriptor = {
	.abi_major = PRD_CLOUD_ABI_MAJOR,
	.abi_minor = PRD_CLOUD_ABI_MINOR,
	.struct_size = sizeof(prd_cloud_driver),
	.name = "clusterapi",
	.init = cp_init,
	.fini = cp_fini,
	.refresh = cp_refresh,
	.node_groups = cp_node_groups,
	.release_node_groups = drv_release_node_groups,
	.node_group_for_node = capi__cp_node_group_for_node,
	.instances = capi__cp_instances,
	.release_instances = drv_release_instances,
	.template_node = capi__cp_template_node,
	.increase_size = cp_increase,
	/* No atomic increase: replicas move at once, but Cluster API gives
	 * no all-or-nothing promise for the Machines behind them. */
	.atomic_increase_size = NULL,
	.delete_nodes = capi__cp_delete_nodes,
	.decrease_target_size = cp_decrease_target,
	.release_string = drv_release_string,
	.delete_instances = capi__cp_delete_instances,
	.instance_size = sizeof(prd_cloud_instance),
	/* No PRD_CLOUD_CAP_OWNER_MARK (not every Machine an increase makes
	 * can be marked): see cp_increase_req and capi_claim.c. */
	.capabilities = PRD_CLOUD_CAP_CONDITIONAL | PRD_CLOUD_CAP_CREATION_TIME | PRD_CLOUD_CAP_FENCE |
			PRD_CLOUD_CAP_INCREASE_RECORD,
	.increase = cp_increase_req,
	.decrease_target_size_if = cp_decrease_target_if,
	.fence = cp_fence,
	.decrease = cp_decrease_req,
	.delete_fenced = capi__cp_delete_fenced,
	/* Node auto-provisioning from template MachineDeployments
	 * (capi_nap.c); without `autoProvisioning` there are no shapes. */
	.shape_size = sizeof(prd_cloud_shape),
	.shapes = capi_nap_shapes,
	.release_shapes = capi_nap_release_shapes,
	.create_group = capi_nap_create,
	.delete_group = capi_nap_delete,
	.group_owner = capi_nap_owner,
	.fence_recorded = cp_fence_recorded,
};

const prd_cloud_driver *provreqd_cloud_driver(void);

const prd_cloud_driver *provreqd_cloud_driver(void)
{
	return &descriptor;
}

/* Node auto-provisioning for the kwok driver (ABI 1.5).
 *
 * Configuration:
 *
 *   autoProvisioning:
 *     groupsConfigMap: kube-system/provreqd-kwok-groups
 *     shapes:
 *     - name: gpu-4x
 *       capacity: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "4", pods: "110"}
 *       labels: {example.com/accelerator: a100}       # optional
 *       taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
 *       zones: [zone-a, zone-b]                      # optional
 *       pricePerHour: "2.5"                          # optional
 *       maxSize: 20                                  # optional, default 100
 *
 * A created group is a Node template (the shape's node with the group's
 * extra labels, taints and zone, min size 0, its max size, and the
 * creator's token, shape and zone as annotations) under the group's id in
 * the groups ConfigMap. Every refresh reads that ConfigMap, so the groups
 * survive provreqd's restart and a new leader sees the old leader's, and
 * writes go through the ConfigMap's resourceVersion (two writers never
 * lose each other's group). */
#include "kwok/kwok_nap.h"
#include "kwok/kwok_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/quantity.h"
#include "util/str.h"

#define NAP_OWNER_ANN "provreqd.io/auto-provisioned-by"
#define NAP_SHAPE_ANN "provreqd.io/shape"
#define NAP_ZONE_ANN "provreqd.io/zone"
#define NAP_ZONE_LABEL "topology.kubernetes.io/zone"
#define NAP_TYPE_LABEL "node.kubernetes.io/instance-type"
#define NAP_ID_MAX 40

void kwok_nap_free(kwok_nap *n)
{
	size_t i, j;
	if(!n)
		return;
	for(i = 0; i < n->nshapes; i++) {
		free(n->shapes[i].name);
		json_object_put(n->shapes[i].node);
		for(j = 0; j < n->shapes[i].nzones; j++)
			free(n->shapes[i].zones[j]);
		free(n->shapes[i].zones);
	}
	free(n->shapes);
	free(n->cm_namespace);
	free(n->cm_name);
	free(n);
}

/* Labels of a shape or a created group: keys in the domains Kubernetes
 * reserves are the kubelet's, never a cloud's to invent. */
static bool label_key_allowed(const char *key)
{
	return !drv_label_in_domain(key, "kubernetes.io") && !drv_label_in_domain(key, "k8s.io");
}

/* "2.5" or 2.5 as millionths; -1 when absent. */
static int parse_price(json_object *v, const char *shape, int64_t *out, prd_cloud_error *err)
{
	const char *s = json_object_get_string(v);
	int64_t whole = 0, frac = 0, scale = 100000;
	const char *p = s;
	if(!s || (!json_object_is_type(v, json_type_string) && !json_object_is_type(v, json_type_int) &&
		  !json_object_is_type(v, json_type_double)))
		goto bad;
	if(!*p)
		goto bad;
	for(; *p >= '0' && *p <= '9'; p++) {
		whole = whole * 10 + (*p - '0');
		if(whole > 1000000000)
			goto bad;
	}
	if(*p == '.') {
		for(p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
			if(scale)
				frac += (*p - '0') * scale;
	}
	if(*p || p == s)
		goto bad;
	*out = whole * 1000000 + frac;
	return 0;
bad:
	return kwok_fail(err, PRD_CLOUD_EINVAL,
			 "kwok config: autoProvisioning shape %s: pricePerHour must be a non-negative decimal number",
			 shape);
}

/* parse_shape's Node: named `name`, with its labels, spec and status
 * objects (borrowed, into the out parameters) to be filled; sh->node owns
 * it. false when out of memory. */
static bool shape_node(kwok_shape *sh, const char *name, json_object **labels_out, json_object **spec_out,
		       json_object **status_out)
{
	json_object *node, *md, *labels, *spec, *status;
	node = json_object_new_object();
	md = json_object_new_object();
	labels = json_object_new_object();
	spec = json_object_new_object();
	status = json_object_new_object();
	if(!node || !md || !labels || !spec || !status) {
		json_object_put(node);
		json_object_put(md);
		json_object_put(labels);
		json_object_put(spec);
		json_object_put(status);
		return false;
	}
	sh->node = node;
	json_object_object_add(node, "apiVersion", json_object_new_string("v1"));
	json_object_object_add(node, "kind", json_object_new_string("Node"));
	json_object_object_add(node, "metadata", md);
	json_object_object_add(md, "name", json_object_new_string(name));
	json_object_object_add(md, "labels", labels);
	json_object_object_add(node, "spec", spec);
	json_object_object_add(node, "status", status);
	*labels_out = labels;
	*spec_out = spec;
	*status_out = status;
	return true;
}

/* A shape's labels (a mapping of strings) onto its Node's `labels`. */
static int shape_labels(json_object *val, json_object *labels, const char *name, prd_cloud_error *err)
{
	if(!json_object_is_type(val, json_type_object))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: autoProvisioning shape %s: labels must be a mapping",
				 name);
	json_object_object_foreach(val, lk, lv) {
		/* (Well-known labels such as kubernetes.io/arch describe
		 * the machine: a shape may carry them.) */
		if(!json_object_is_type(lv, json_type_string))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: autoProvisioning shape %s: label %s must be a string", name, lk);
		json_object_object_add(labels, lk, json_object_get(lv));
	}
	return 0;
}

/* A shape's zones (a list of DNS labels) into sh. */
static int shape_zones(kwok_shape *sh, json_object *val, const char *name, prd_cloud_error *err)
{
	size_t z, nz;
	int rc = 0;
	if(!json_object_is_type(val, json_type_array))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: autoProvisioning shape %s: zones must be a list",
				 name);
	nz = json_object_array_length(val);
	sh->zones = calloc(nz + 1, sizeof(*sh->zones));
	if(!sh->zones)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(z = 0; z < nz && !rc; z++) {
		json_object *zv = json_object_array_get_idx(val, z);
		const char *zs = json_object_is_type(zv, json_type_string) ? json_object_get_string(zv) : "";
		if(!str_is_dns_label(zs) || strchr(zs, ','))
			rc = kwok_fail(err, PRD_CLOUD_EINVAL,
				       "kwok config: autoProvisioning shape %s: zone '%s' is not a DNS label", name, zs);
		else if(!(sh->zones[sh->nzones++] = kwok_strdup(zs)))
			rc = kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	return rc;
}

static int parse_shape(kwok_nap *n, json_object *v, size_t index, prd_cloud_error *err)
{
	kwok_shape *sh = &n->shapes[index];
	json_object *node, *labels, *spec, *status, *cap = NULL;
	const char *name = json_object_is_type(v, json_type_object) ? kwok_jstr(v, "name") : NULL;
	kwok_group check;
	char where[200];
	size_t i;
	int rc = 0;

	sh->price_micros = -1;
	sh->max_size = KWOK_DEFAULT_MAX;
	if(!name || !str_is_dns_label(name) || strlen(name) > NAP_ID_MAX)
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: autoProvisioning.shapes[%zu] needs a name: a DNS label of at most %d "
				 "characters",
				 index, NAP_ID_MAX);
	for(i = 0; i < index; i++)
		if(!strcmp(n->shapes[i].name, name))
			return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: autoProvisioning shape %s is listed twice",
					 name);
	if(!(sh->name = kwok_strdup(name)))
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	if(!shape_node(sh, name, &labels, &spec, &status))
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	node = sh->node;
	json_object_object_foreach(v, key, val) {
		if(rc)
			break;
		if(!strcmp(key, "name")) {
			continue;
		} else if(!strcmp(key, "capacity")) {
			if(!json_object_is_type(val, json_type_object) || json_object_deep_copy(val, &cap, NULL) || !cap) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL,
					       "kwok config: autoProvisioning shape %s: capacity must be a mapping", name);
				break;
			}
			json_object_object_add(status, "capacity", cap);
			json_object_object_add(status, "allocatable", json_object_get(cap));
		} else if(!strcmp(key, "labels")) {
			rc = shape_labels(val, labels, name, err);
		} else if(!strcmp(key, "taints")) {
			json_object *copy = NULL;
			if(!json_object_is_type(val, json_type_array) || json_object_deep_copy(val, &copy, NULL)) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL,
					       "kwok config: autoProvisioning shape %s: taints must be a list", name);
				break;
			}
			json_object_object_add(spec, "taints", copy);
		} else if(!strcmp(key, "zones")) {
			rc = shape_zones(sh, val, name, err);
		} else if(!strcmp(key, "pricePerHour")) {
			rc = parse_price(val, name, &sh->price_micros, err);
		} else if(!strcmp(key, "maxSize")) {
			int64_t m = json_object_is_type(val, json_type_int) ? json_object_get_int64(val) : -1;
			if(m < 1 || m > 100000) {
				rc = kwok_fail(err, PRD_CLOUD_EINVAL,
					       "kwok config: autoProvisioning shape %s: maxSize must be an integer in "
					       "[1, 100000]",
					       name);
				break;
			}
			sh->max_size = (int32_t)m;
		} else {
			rc = kwok_fail(err, PRD_CLOUD_EINVAL,
				       "kwok config: autoProvisioning shape %s: unknown key '%s' (known: name, capacity, "
				       "labels, taints, zones, pricePerHour, maxSize)",
				       name, key);
		}
	}
	if(rc)
		return rc;
	json_object_object_add(labels, NAP_TYPE_LABEL, json_object_new_string(name));
	/* The same checks as a template group's (capacity, taints). */
	snprintf(where, sizeof(where), "kwok config: autoProvisioning shape %s", name);
	rc = kwok_template_group(node, where, &check, err);
	if(rc)
		return rc;
	free(check.id);
	free(check.source);
	json_object_put(check.tmpl);
	return 0;
}

int kwok_nap_parse(kwok *k, json_object *v, prd_cloud_error *err)
{
	kwok_nap *n;
	json_object *shapes = NULL;
	const char *cm = NULL, *slash;
	size_t i, count;
	int rc = 0;
	if(!json_object_is_type(v, json_type_object))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: autoProvisioning must be a mapping");
	json_object_object_foreach(v, key, val) {
		if(!strcmp(key, "groupsConfigMap") && json_object_is_type(val, json_type_string))
			cm = json_object_get_string(val);
		else if(!strcmp(key, "shapes"))
			shapes = val;
		else
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: autoProvisioning: unknown or malformed key '%s' (known: "
					 "groupsConfigMap, shapes)",
					 key);
	}
	slash = cm ? strchr(cm, '/') : NULL;
	if(!slash || slash == cm || (size_t)(slash - cm) > 63 || strchr(slash + 1, '/') ||
	   !str_is_dns_subdomain(slash + 1))
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: autoProvisioning.groupsConfigMap must be NAMESPACE/NAME (where the groups "
				 "it creates are kept)");
	if(!shapes || !json_object_is_type(shapes, json_type_array) || !json_object_array_length(shapes))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: autoProvisioning.shapes must be a non-empty list");
	kwok_nap_free(k->nap);
	k->nap = n = calloc(1, sizeof(*n));
	count = json_object_array_length(shapes);
	if(!n || !(n->shapes = calloc(count + 1, sizeof(*n->shapes))) ||
	   !(n->cm_namespace = str_ndup(cm, (size_t)(slash - cm))) || !(n->cm_name = kwok_strdup(slash + 1)))
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	if(!str_is_dns_label(n->cm_namespace))
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: autoProvisioning.groupsConfigMap namespace '%s' is not a DNS label",
				 n->cm_namespace);
	for(i = 0; i < count && !rc; i++) {
		n->nshapes = i + 1;
		rc = parse_shape(n, json_object_array_get_idx(shapes, i), i, err);
	}
	return rc;
}

static const kwok_shape *find_shape(const kwok *k, const char *name)
{
	size_t i;
	for(i = 0; k->nap && i < k->nap->nshapes; i++)
		if(!strcmp(k->nap->shapes[i].name, name))
			return &k->nap->shapes[i];
	return NULL;
}

static kwok_group *find(kwok *k, const char *id)
{
	size_t i;
	for(i = 0; i < k->ngroups; i++)
		if(!strcmp(k->groups[i].id, id))
			return &k->groups[i];
	return NULL;
}

static int cm_path(const kwok *k, char *out, size_t n, bool with_name)
{
	snprintf(out, n, "/api/v1/namespaces/%s/configmaps%s%s", k->nap->cm_namespace, with_name ? "/" : "",
		 with_name ? k->nap->cm_name : "");
	return 0;
}

/* The groups ConfigMap, or *cm NULL when it does not exist yet. */
static int read_cm(kwok *k, json_object **cm, prd_cloud_error *err)
{
	char path[512];
	long status = 0;
	int rc;
	*cm = NULL;
	cm_path(k, path, sizeof(path), true);
	rc = kwok_request(k, "GET", path, NULL, NULL, cm, &status, err);
	if(rc == PRD_CLOUD_ENOTFOUND || (rc && status == 404)) {
		*cm = NULL;
		return 0;
	}
	if(rc == PRD_CLOUD_EUNSUPPORTED) {
		*cm = NULL; /* no apiserver (check-driver): no groups */
		return 0;
	}
	return rc;
}

/* One group from its ConfigMap entry. */
static int entry_group(const char *key, json_object *val, const kwok *k, kwok_group *g, prd_cloud_error *err)
{
	json_object *node, *ann;
	char where[300];
	const char *text = json_object_is_type(val, json_type_string) ? json_object_get_string(val) : "";
	const char *owner, *shape, *zone;
	int rc;
	snprintf(where, sizeof(where), "ConfigMap %s/%s key %s", k->nap->cm_namespace, k->nap->cm_name, key);
	node = json_tokener_parse(text);
	if(!node)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: not a JSON Node", where);
	rc = kwok_template_group(node, where, g, err);
	json_object_put(node);
	if(rc)
		return rc;
	ann = kwok_jobj(kwok_jobj(g->tmpl, "metadata"), "annotations");
	owner = kwok_jstr(ann, NAP_OWNER_ANN);
	shape = kwok_jstr(ann, NAP_SHAPE_ANN);
	zone = kwok_jstr(ann, NAP_ZONE_ANN);
	if(!owner || !shape || strcmp(key, g->id)) {
		kwok_group_clear(g);
		return kwok_fail(err, PRD_CLOUD_EINVAL, "%s: not a group this driver created (no %s / %s, or the key "
				 "is not its name)", where, NAP_OWNER_ANN, NAP_SHAPE_ANN);
	}
	g->owner = kwok_strdup(owner);
	g->shape = kwok_strdup(shape);
	g->zone = zone && zone[0] ? kwok_strdup(zone) : NULL;
	if(!g->owner || !g->shape || (zone && zone[0] && !g->zone))
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	return 0;
}

int kwok_nap_sync(kwok *k, prd_cloud_error *err)
{
	json_object *cm = NULL, *data;
	kwok_group *fresh = NULL, *merged;
	size_t nfresh = 0, cap, i, j, n = 0;
	int rc;
	if(!k->nap)
		return 0;
	rc = read_cm(k, &cm, err);
	if(rc)
		return rc;
	data = kwok_jobj(cm, "data");
	cap = data ? (size_t)json_object_object_length(data) : 0;
	fresh = calloc(cap + 1, sizeof(*fresh));
	if(!fresh) {
		json_object_put(cm);
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	if(data) {
		json_object_object_foreach(data, key, val) {
			kwok_group *same;
			if(nfresh >= cap)
				break;
			rc = entry_group(key, val, k, &fresh[nfresh], err);
			if(rc == PRD_CLOUD_ENOMEM) {
				kwok_groups_free(fresh, nfresh + 1);
				json_object_put(cm);
				return rc;
			}
			if(rc) {
				/* Someone edited the ConfigMap by hand: the other
				 * groups still serve. */
				kwok_log(k, PRD_CLOUD_LOG_WARN, "kwok: ignoring an auto-provisioned group: %s",
					 err ? err->message : "invalid");
				kwok_group_clear(&fresh[nfresh]);
				rc = 0;
				continue;
			}
			same = find(k, key);
			if(same && !same->owner) {
				kwok_log(k, PRD_CLOUD_LOG_WARN,
					 "kwok: auto-provisioned group %s has the name of a template group; ignored", key);
				kwok_group_clear(&fresh[nfresh]);
				continue;
			}
			nfresh++;
		}
	}
	json_object_put(cm);
	merged = calloc(k->ngroups + nfresh + 1, sizeof(*merged));
	if(!merged) {
		kwok_groups_free(fresh, nfresh);
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	}
	for(i = 0; i < k->ngroups; i++)
		if(!k->groups[i].owner)
			merged[n++] = k->groups[i];
	for(j = 0; j < nfresh; j++) {
		kwok_group *old = find(k, fresh[j].id);
		if(old && old->owner) {
			/* What the driver counted of the group carries over. */
			fresh[j].failed = old->failed;
			fresh[j].nfailed = old->nfailed;
			fresh[j].live = old->live;
			fresh[j].pending = old->pending;
			old->failed = NULL;
			old->nfailed = 0;
		}
		merged[n++] = fresh[j];
	}
	/* The auto groups that are no longer in the ConfigMap (and the old
	 * copies of those that are) go. */
	for(i = 0; i < k->ngroups; i++)
		if(k->groups[i].owner)
			kwok_group_clear(&k->groups[i]);
	free(k->groups);
	free(fresh);
	k->groups = merged;
	k->ngroups = n;
	return 0;
}

/* ---- the ABI 1.5 operations ------------------------------------------ */

int kwok_nap_shapes(void *state, prd_cloud_shape **out, size_t *count, prd_cloud_error *err)
{
	kwok *k = state;
	prd_cloud_shape *v;
	size_t i, z;
	*out = NULL;
	*count = 0;
	if(!k->nap)
		return 0;
	v = calloc(k->nap->nshapes + 1, sizeof(*v));
	if(!v)
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < k->nap->nshapes; i++) {
		const kwok_shape *s = &k->nap->shapes[i];
		size_t len = 1;
		v[i].name = kwok_strdup(s->name);
		v[i].node_json = kwok_strdup(json_object_to_json_string_ext(s->node, JSON_C_TO_STRING_PLAIN));
		for(z = 0; z < s->nzones; z++)
			len += strlen(s->zones[z]) + 1;
		v[i].zones = calloc(len, 1);
		v[i].price_micros = s->price_micros;
		v[i].max_size = s->max_size;
		if(!v[i].name || !v[i].node_json || !v[i].zones) {
			kwok_nap_release_shapes(k, v, i + 1);
			return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
		for(z = 0; z < s->nzones; z++) {
			if(z)
				strcat(v[i].zones, ",");
			strcat(v[i].zones, s->zones[z]);
		}
	}
	*out = v;
	*count = k->nap->nshapes;
	return 0;
}

void kwok_nap_release_shapes(void *state, prd_cloud_shape *v, size_t count)
{
	drv_release_shapes(state, v, count);
}

/* The Node template of a new group (caller puts). */
static json_object *group_template(const kwok_shape *s, const prd_cloud_group_create *req, prd_cloud_error *err)
{
	json_object *node = NULL, *md, *labels, *ann, *spec, *taints;
	char num[24];
	size_t i;
	if(json_object_deep_copy(s->node, &node, NULL) || !node) {
		kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		return NULL;
	}
	md = kwok_jobj(node, "metadata");
	labels = kwok_jobj(md, "labels");
	spec = kwok_jobj(node, "spec");
	ann = json_object_new_object();
	taints = json_object_object_get(spec, "taints");
	if(!taints) {
		taints = json_object_new_array();
		json_object_object_add(spec, "taints", taints);
	}
	json_object_object_add(md, "name", json_object_new_string(req->group_id));
	json_object_object_add(md, "annotations", ann);
	for(i = 0; i < req->nlabels; i++)
		json_object_object_add(labels, req->labels[i].key, json_object_new_string(req->labels[i].value));
	if(req->zone)
		json_object_object_add(labels, NAP_ZONE_LABEL, json_object_new_string(req->zone));
	for(i = 0; i < req->ntaints; i++) {
		json_object *t = json_object_new_object();
		json_object_object_add(t, "key", json_object_new_string(req->taints[i].key));
		if(req->taints[i].value && req->taints[i].value[0])
			json_object_object_add(t, "value", json_object_new_string(req->taints[i].value));
		json_object_object_add(t, "effect", json_object_new_string(req->taints[i].effect));
		json_object_array_add(taints, t);
	}
	snprintf(num, sizeof(num), "%d", (int)req->max_size);
	json_object_object_add(ann, KWOK_MIN_ANNOTATION, json_object_new_string("0"));
	json_object_object_add(ann, KWOK_MAX_ANNOTATION, json_object_new_string(num));
	json_object_object_add(ann, NAP_OWNER_ANN, json_object_new_string(req->owner));
	json_object_object_add(ann, NAP_SHAPE_ANN, json_object_new_string(s->name));
	json_object_object_add(ann, NAP_ZONE_ANN, json_object_new_string(req->zone ? req->zone : ""));
	return node;
}

static int check_create(const kwok *k, const prd_cloud_group_create *req, const kwok_shape **shape,
			prd_cloud_error *err)
{
	const kwok_shape *s;
	size_t i;
	bool zone_ok;
	if(!req || req->struct_size < offsetof(prd_cloud_group_create, owner) + sizeof(req->owner))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: create_group: request too small for ABI 1.5");
	if(!k->nap)
		return kwok_fail(err, PRD_CLOUD_EUNSUPPORTED, "kwok: autoProvisioning is not configured");
	if(!req->group_id || !str_is_dns_label(req->group_id) || strlen(req->group_id) > NAP_ID_MAX ||
	   !(req->group_id[0] >= 'a' && req->group_id[0] <= 'z'))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: create_group: '%s' is not a group id (1..%d of [a-z0-9-], "
				 "beginning with a letter)", req->group_id ? req->group_id : "", NAP_ID_MAX);
	if(!req->shape || !(s = find_shape(k, req->shape)))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: create_group: unknown shape '%s'",
				 req->shape ? req->shape : "");
	if(!drv_owner_token_ok(req->owner))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: create_group: the owner token is not a label value");
	if(req->max_size < 1 || req->max_size > s->max_size)
		return kwok_fail(err, PRD_CLOUD_ERANGE, "kwok: create_group: max size %d is outside [1, %d] for shape %s",
				 (int)req->max_size, (int)s->max_size, s->name);
	zone_ok = !req->zone;
	for(i = 0; i < s->nzones && !zone_ok; i++)
		zone_ok = !strcmp(s->zones[i], req->zone);
	if(!zone_ok)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: create_group: shape %s is not offered in zone %s", s->name,
				 req->zone);
	for(i = 0; i < req->nlabels; i++)
		if(!req->labels[i].key || !req->labels[i].value || !label_key_allowed(req->labels[i].key) ||
		   !strcmp(req->labels[i].key, KWOK_GROUP_LABEL) || !strcmp(req->labels[i].key, KWOK_OWNER_LABEL))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok: create_group: label %s is not one a cloud may set (the kubernetes.io and "
					 "k8s.io domains are the kubelet's; the zone is given as the zone)",
					 req->labels[i].key ? req->labels[i].key : "(null)");
	for(i = 0; i < req->ntaints; i++)
		if(!req->taints[i].key || !req->taints[i].key[0] || !drv_taint_effect_ok(req->taints[i].effect))
			return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: create_group: taint %zu needs a key and an effect "
					 "(NoSchedule, PreferNoSchedule or NoExecute)", i);
	*shape = s;
	return 0;
}

/* Is the existing group the one `req` asks for (a repeated call)? */
static int same_group(const kwok_group *g, const prd_cloud_group_create *req, prd_cloud_error *err)
{
	if(g->owner && !strcmp(g->owner, req->owner) && g->shape && !strcmp(g->shape, req->shape) &&
	   str_eq(g->zone, req->zone))
		return 0;
	return kwok_fail(err, PRD_CLOUD_ECONFLICT,
			 "kwok: node group %s already exists and is not the one asked for (owner %s, shape %s)", g->id,
			 g->owner ? g->owner : "(a template group)", g->shape ? g->shape : "-");
}

int kwok_nap_create(void *state, const prd_cloud_group_create *req, prd_cloud_error *err)
{
	kwok *k = state;
	const kwok_shape *s = NULL;
	json_object *tmpl = NULL, *cm = NULL, *data;
	kwok_group *g, *bigger, ng;
	char path[512];
	const char *text;
	int rc;

	if((rc = check_create(k, req, &s, err)))
		return rc;
	if((g = find(k, req->group_id)))
		return same_group(g, req, err);
	if(k->host->struct_size >= offsetof(prd_cloud_host, may_act) + sizeof(k->host->may_act) &&
	   k->host->may_act && !k->host->may_act(k->host->ctx))
		return kwok_fail(err, PRD_CLOUD_EAGAIN, "kwok: create_group: the host may not act now");
	if(!(tmpl = group_template(s, req, err)))
		return err ? err->code : PRD_CLOUD_ENOMEM;
	rc = kwok_template_group(tmpl, "create_group", &ng, err);
	if(rc) {
		json_object_put(tmpl);
		return rc;
	}
	text = json_object_to_json_string_ext(tmpl, JSON_C_TO_STRING_PLAIN);
	rc = read_cm(k, &cm, err);
	if(rc)
		goto done;
	if(!cm) {
		json_object *md = json_object_new_object();
		cm = json_object_new_object();
		data = json_object_new_object();
		json_object_object_add(cm, "apiVersion", json_object_new_string("v1"));
		json_object_object_add(cm, "kind", json_object_new_string("ConfigMap"));
		json_object_object_add(md, "name", json_object_new_string(k->nap->cm_name));
		json_object_object_add(md, "namespace", json_object_new_string(k->nap->cm_namespace));
		json_object_object_add(cm, "metadata", md);
		json_object_object_add(cm, "data", data);
		json_object_object_add(data, req->group_id, json_object_new_string(text));
		cm_path(k, path, sizeof(path), false);
		rc = kwok_request(k, "POST", path, "application/json", cm, NULL, NULL, err);
	} else {
		json_object *prev;
		data = kwok_jobj(cm, "data");
		if(!data) {
			data = json_object_new_object();
			json_object_object_add(cm, "data", data);
		}
		prev = json_object_object_get(data, req->group_id);
		if(prev) {
			/* Made by another process since this one's last refresh. */
			kwok_group other;
			memset(&other, 0, sizeof(other));
			rc = entry_group(req->group_id, prev, k, &other, err);
			if(!rc)
				rc = same_group(&other, req, err);
			kwok_group_clear(&other);
			if(rc)
				goto done;
		} else {
			json_object_object_add(data, req->group_id, json_object_new_string(text));
			cm_path(k, path, sizeof(path), true);
			/* The resourceVersion read above makes the write fail,
			 * changing nothing, when another writer came between. */
			rc = kwok_request(k, "PUT", path, "application/json", cm, NULL, NULL, err);
		}
	}
	if(rc)
		goto done;
	ng.owner = kwok_strdup(req->owner);
	ng.shape = kwok_strdup(req->shape);
	ng.zone = req->zone ? kwok_strdup(req->zone) : NULL;
	bigger = realloc(k->groups, (k->ngroups + 1) * sizeof(*k->groups));
	if(!ng.owner || !ng.shape || (req->zone && !ng.zone) || !bigger) {
		if(bigger)
			k->groups = bigger;
		/* It is in the ConfigMap: the next refresh lists it. */
		rc = 0;
		goto done;
	}
	k->groups = bigger;
	k->groups[k->ngroups++] = ng;
	memset(&ng, 0, sizeof(ng));
	kwok_log(k, PRD_CLOUD_LOG_INFO, "kwok: created node group %s of shape %s%s%s", req->group_id, req->shape,
		 req->zone ? " in zone " : "", req->zone ? req->zone : "");
done:
	kwok_group_clear(&ng);
	json_object_put(tmpl);
	json_object_put(cm);
	return rc;
}

int kwok_nap_delete(void *state, const char *group_id, prd_cloud_error *err)
{
	kwok *k = state;
	kwok_group *g = group_id ? find(k, group_id) : NULL;
	json_object *cm = NULL, *data;
	char path[512];
	size_t i;
	int rc;
	if(!k->nap)
		return kwok_fail(err, PRD_CLOUD_EUNSUPPORTED, "kwok: autoProvisioning is not configured");
	if(g && !g->owner)
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok: node group %s was not created by create_group", group_id);
	if(g) {
		int32_t pending = g->pending;
		rc = kwok_check_target(k, g, -1, pending, 0, "deleted", err);
		if(rc)
			return rc;
		if(g->live + g->pending + (int32_t)g->nfailed > 0)
			return kwok_fail(err, PRD_CLOUD_ERANGE, "kwok: node group %s is not empty (%d nodes, %d pending, %zu "
					 "failed); not deleted", group_id, (int)g->live, (int)g->pending, g->nfailed);
	}
	if(k->host->struct_size >= offsetof(prd_cloud_host, may_act) + sizeof(k->host->may_act) &&
	   k->host->may_act && !k->host->may_act(k->host->ctx))
		return kwok_fail(err, PRD_CLOUD_EAGAIN, "kwok: delete_group: the host may not act now");
	rc = read_cm(k, &cm, err);
	if(rc)
		return rc;
	data = kwok_jobj(cm, "data");
	if(data && group_id && json_object_object_get_ex(data, group_id, NULL)) {
		json_object_object_del(data, group_id);
		cm_path(k, path, sizeof(path), true);
		rc = kwok_request(k, "PUT", path, "application/json", cm, NULL, NULL, err);
	}
	json_object_put(cm);
	if(rc)
		return rc;
	for(i = 0; g && i < k->ngroups; i++)
		if(&k->groups[i] == g) {
			kwok_group_clear(g);
			memmove(&k->groups[i], &k->groups[i + 1], (k->ngroups - i - 1) * sizeof(*g));
			k->ngroups--;
			kwok_log(k, PRD_CLOUD_LOG_INFO, "kwok: deleted auto-provisioned node group %s", group_id);
			break;
		}
	return 0;
}

int kwok_nap_owner(void *state, const char *group_id, char **owner, prd_cloud_error *err)
{
	kwok *k = state;
	kwok_group *g = group_id ? find(k, group_id) : NULL;
	*owner = NULL;
	if(!g)
		return kwok_fail(err, PRD_CLOUD_ENOTFOUND, "kwok: no node group %s", group_id ? group_id : "(null)");
	if(g->owner && !(*owner = kwok_strdup(g->owner)))
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	return 0;
}

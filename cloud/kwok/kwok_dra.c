/* The kwok driver's DRA devices: the `resourceSlices:` key of the cloud
 * config declares, per node group, the ResourceSlices (resource.k8s.io/v1)
 * each of its nodes publishes. The driver answers template_resource_slices
 * with them, creates them for every Node it makes (a real node's DRA
 * driver would publish them) and deletes them with the Node.
 *
 * Each declared entry is a ResourceSlice spec without nodeName, pool or
 * node selection: the driver fills spec.nodeName with the node, the pool
 * with {name: <node>, generation: 1, resourceSliceCount: <the entries of
 * that driver>}, and names the object "<node>-dra-<index>". */
#include "kwok/kwok_dra.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t arr_len(json_object *v)
{
	return v && json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
}

/* One declared slice spec: a driver, devices with names, nothing the
 * driver sets itself. */
static int check_spec(json_object *s, const char *group, size_t i, prd_cloud_error *err)
{
	static const char *const owned[] = { "nodeName", "nodeSelector", "allNodes", "pool", "perDeviceNodeSelection" };
	json_object *devs, *drv;
	size_t j, n;
	if(!json_object_is_type(s, json_type_object))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: resourceSlices.%s[%zu] must be a mapping", group, i);
	if(!json_object_object_get_ex(s, "driver", &drv) || !json_object_is_type(drv, json_type_string) ||
	   !json_object_get_string_len(drv))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: resourceSlices.%s[%zu].driver is required", group,
				 i);
	for(j = 0; j < sizeof(owned) / sizeof(owned[0]); j++)
		if(json_object_object_get_ex(s, owned[j], NULL))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: resourceSlices.%s[%zu].%s is set by the driver (the slice is the "
					 "new node's)",
					 group, i, owned[j]);
	if(!json_object_object_get_ex(s, "devices", &devs) || !json_object_is_type(devs, json_type_array))
		return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: resourceSlices.%s[%zu].devices must be a list",
				 group, i);
	n = json_object_array_length(devs);
	for(j = 0; j < n; j++) {
		json_object *d = json_object_array_get_idx(devs, j), *name;
		if(!json_object_object_get_ex(d, "name", &name) || !json_object_is_type(name, json_type_string) ||
		   !json_object_get_string_len(name))
			return kwok_fail(err, PRD_CLOUD_EINVAL,
					 "kwok config: resourceSlices.%s[%zu].devices[%zu].name is required", group, i, j);
	}
	return 0;
}

int kwok_slices_parse(kwok *k, json_object *v, prd_cloud_error *err)
{
	json_object *copy = NULL;
	int rc = 0;
	if(!json_object_is_type(v, json_type_object))
		return kwok_fail(err, PRD_CLOUD_EINVAL,
				 "kwok config: resourceSlices must map node group names to lists of ResourceSlice specs");
	json_object_object_foreach(v, group, list) {
		size_t i, n;
		if(!json_object_is_type(list, json_type_array))
			return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: resourceSlices.%s must be a list", group);
		n = json_object_array_length(list);
		for(i = 0; i < n && !rc; i++)
			rc = check_spec(json_object_array_get_idx(list, i), group, i, err);
		if(rc)
			return rc;
	}
	if(json_object_deep_copy(v, &copy, NULL))
		return kwok_fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	json_object_put(k->slices);
	k->slices = copy;
	return 0;
}

int kwok_slices_check_groups(const kwok *k, prd_cloud_error *err)
{
	size_t j;
	if(!k->slices)
		return 0;
	json_object_object_foreach(k->slices, group, list) {
		(void)list;
		for(j = 0; j < k->ngroups; j++)
			if(!strcmp(k->groups[j].id, group))
				break;
		if(j == k->ngroups)
			return kwok_fail(err, PRD_CLOUD_EINVAL, "kwok config: resourceSlices.%s: no such node group", group);
	}
	return 0;
}

/* The most slices any group declares: what deleting a Node cleans up. */
static size_t max_slices(const kwok *k)
{
	size_t m = 0;
	if(!k->slices)
		return 0;
	json_object_object_foreach(k->slices, group, list) {
		(void)group;
		if(arr_len(list) > m)
			m = arr_len(list);
	}
	return m;
}

json_object *kwok_slices_for_node(const kwok *k, const char *group, const char *node)
{
	json_object *list = NULL, *out;
	size_t i, j, n;
	if(!k->slices || !json_object_object_get_ex(k->slices, group, &list) || !arr_len(list))
		return NULL;
	n = json_object_array_length(list);
	out = json_object_new_array();
	for(i = 0; out && i < n; i++) {
		json_object *spec = NULL, *o = json_object_new_object(), *md = json_object_new_object();
		json_object *labels = json_object_new_object(), *pool = json_object_new_object(), *drv;
		const char *driver;
		int32_t same = 0;
		char name[320];
		if(!o || !md || !labels || !pool ||
		   json_object_deep_copy(json_object_array_get_idx(list, i), &spec, NULL)) {
			json_object_put(o);
			json_object_put(md);
			json_object_put(labels);
			json_object_put(pool);
			json_object_put(out);
			return NULL;
		}
		json_object_object_get_ex(spec, "driver", &drv);
		driver = json_object_get_string(drv);
		for(j = 0; j < n; j++) {
			json_object *d2;
			if(json_object_object_get_ex(json_object_array_get_idx(list, j), "driver", &d2) &&
			   !strcmp(json_object_get_string(d2), driver))
				same++;
		}
		snprintf(name, sizeof(name), "%s-dra-%zu", node, i);
		json_object_object_add(o, "apiVersion", json_object_new_string("resource.k8s.io/v1"));
		json_object_object_add(o, "kind", json_object_new_string("ResourceSlice"));
		json_object_object_add(md, "name", json_object_new_string(name));
		json_object_object_add(labels, KWOK_GROUP_LABEL, json_object_new_string(group));
		json_object_object_add(md, "labels", labels);
		json_object_object_add(o, "metadata", md);
		json_object_object_add(spec, "nodeName", json_object_new_string(node));
		json_object_object_add(pool, "name", json_object_new_string(node));
		json_object_object_add(pool, "generation", json_object_new_int64(1));
		json_object_object_add(pool, "resourceSliceCount", json_object_new_int64(same));
		json_object_object_add(spec, "pool", pool);
		json_object_object_add(o, "spec", spec);
		json_object_array_add(out, o);
	}
	return out;
}

int kwok_slices_create(kwok *k, const char *group, const char *node, prd_cloud_error *err)
{
	json_object *arr = kwok_slices_for_node(k, group, node);
	size_t i, n = arr_len(arr);
	int rc = 0;
	for(i = 0; i < n && !rc; i++) {
		long status = 0;
		rc = kwok_request(k, "POST", "/apis/resource.k8s.io/v1/resourceslices", NULL,
				  json_object_array_get_idx(arr, i), NULL, &status, err);
		if(rc && status == 409)
			rc = 0; /* left over from a Node of the same name: the same devices */
	}
	json_object_put(arr);
	return rc;
}

void kwok_slices_delete(kwok *k, const char *node)
{
	size_t i, n = max_slices(k);
	for(i = 0; i < n; i++) {
		prd_cloud_error e;
		char path[400];
		long status = 0;
		memset(&e, 0, sizeof(e));
		snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s-dra-%zu", node, i);
		if(kwok_request(k, "DELETE", path, NULL, NULL, NULL, &status, &e) && status != 404)
			kwok_log(k, PRD_CLOUD_LOG_WARN, "kwok: cannot delete ResourceSlice %s-dra-%zu: %s", node, i, e.message);
	}
}

/* The kwok driver, loaded from its built module through the loader, with
 * host services whose kube_request is the in-memory API. */
#include "testutil.h"
#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/memapi.h"
#include "util/yamljson.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static memapi *m;
static clk fake;
static cloud_host_impl host;
static cloud_drivers set;
static cloud_driver *drv;
static char logbuf[8192];

static const char *module_path(void)
{
	static char path[1024];
	const char *b = getenv("PRD_BUILDDIR");
	snprintf(path, sizeof(path), "%s/cloud/kwok/.libs/kwok.so", b ? b : ".");
	return path;
}

static const char *nodegroups_dir(void)
{
	static char path[1024];
	const char *s = getenv("PRD_SRCDIR");
	snprintf(path, sizeof(path), "%s/templates/nodegroups", s ? s : "..");
	return path;
}

/* Keeps the driver's log lines so tests can check what it said. */
static void capture_log(void *ctx, int level, const char *message)
{
	size_t len = strlen(logbuf);
	(void)ctx;
	snprintf(logbuf + len, sizeof(logbuf) - len, "%d %s\n", level, message);
}

static void teardown(void)
{
	cloud_drivers_free(&set);
	drv = NULL;
	memapi_free(m);
	m = NULL;
}

static void fresh_api(void)
{
	teardown();
	clk_fake_init(&fake, 1714557600LL * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL_FATAL(memapi_new(&fake, 0, &m), 0);
	cloud_host_init(&host, "driver/kwok", &fake, cloud_host_memapi_request, m);
	host.host.log = capture_log;
	logbuf[0] = '\0';
	cloud_drivers_init(&set);
}

/* Load the driver with this config (printf-style); returns the loader's
 * code and leaves the message in *e. */
static int load_cfg(prd_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int load_cfg(prd_err *e, const char *fmt, ...)
{
	char cfg[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cfg, sizeof(cfg), fmt, ap);
	va_end(ap);
	prd_err_clear(e);
	drv = NULL;
	return cloud_drivers_load(&set, module_path(), &host.host, cfg, &drv, e);
}

/* A fresh store and the driver loaded on the shipped templates plus an
 * optional extra config text. */
static void start(const char *extra)
{
	prd_err e;
	int rc;
	fresh_api();
	rc = load_cfg(&e, "templateDir: %s\n%s", nodegroups_dir(), extra ? extra : "");
	if(rc)
		fprintf(stderr, "load: %s\n", e.msg);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
}

static json_object *api(const char *method, const char *path, const char *body, long *status)
{
	char *resp = NULL;
	size_t len = 0;
	long st = 0;
	json_object *o;
	memapi_request(m, method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0, &st,
		       &resp, &len);
	if(status)
		*status = st;
	o = resp ? json_tokener_parse(resp) : NULL;
	free(resp);
	return o;
}

/* The Nodes labelled with `group`, as a new array (caller puts). */
static json_object *group_nodes(const char *group)
{
	char path[256];
	json_object *list, *items;
	snprintf(path, sizeof(path), "/api/v1/nodes?labelSelector=provreqd.io%%2Fnode-group%%3D%s", group);
	list = api("GET", path, NULL, NULL);
	items = json_object_get(json_object_object_get(list, "items"));
	json_object_put(list);
	return items;
}

static size_t count_nodes(const char *group)
{
	json_object *items = group_nodes(group);
	size_t n = items ? json_object_array_length(items) : 0;
	json_object_put(items);
	return n;
}

static const char *path_str(json_object *o, const char *a, const char *b, const char *c)
{
	json_object *v = json_object_object_get(o, a);
	if(b)
		v = json_object_object_get(v, b);
	if(c)
		v = json_object_object_get(v, c);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static const char *name_of(json_object *node)
{
	return path_str(node, "metadata", "name", NULL);
}

static int32_t target_of(const char *group)
{
	prd_cloud_node_group *g = NULL;
	size_t n = 0, i;
	int32_t t = -1;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->node_groups(drv->state, &g, &n, &e), 0);
	for(i = 0; i < n; i++)
		if(!strcmp(g[i].id, group))
			t = g[i].target_size;
	drv->api->release_node_groups(drv->state, g, n);
	return t;
}

typedef struct inst_summary {
	size_t total, running, creating, deleting, oor;
	char first_errored[128];
	char code[64];
} inst_summary;

static inst_summary instances_of(const char *group)
{
	prd_cloud_instance *v = NULL;
	size_t n = 0, i;
	prd_cloud_error e = {0, ""};
	inst_summary s;
	memset(&s, 0, sizeof(s));
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, group, &v, &n, &e), 0);
	s.total = n;
	for(i = 0; i < n; i++) {
		if(v[i].error_class == PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES) {
			s.oor++;
			CU_ASSERT_PTR_NULL(v[i].node_name);
			CU_ASSERT_PTR_NOT_NULL(v[i].error_message);
			if(!s.first_errored[0]) {
				snprintf(s.first_errored, sizeof(s.first_errored), "%s", v[i].id);
				snprintf(s.code, sizeof(s.code), "%s", v[i].error_code ? v[i].error_code : "");
			}
		} else {
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_NONE);
			CU_ASSERT_PTR_NOT_NULL(v[i].node_name);
		}
		s.running += v[i].state == PRD_CLOUD_INSTANCE_RUNNING;
		s.creating += v[i].state == PRD_CLOUD_INSTANCE_CREATING;
		s.deleting += v[i].state == PRD_CLOUD_INSTANCE_DELETING;
	}
	drv->api->release_instances(drv->state, v, n);
	return s;
}

static bool suffix_ok(const char *name, const char *group)
{
	size_t gl = strlen(group), i;
	if(strncmp(name, group, gl) || name[gl] != '-' || strlen(name) != gl + 6)
		return false;
	for(i = gl + 1; name[i]; i++)
		if(!strchr("bcdfghjklmnpqrstvwxz2456789", name[i]))
			return false;
	return true;
}

static void test_increase_creates_nodes(void)
{
	prd_cloud_error e = {0, ""};
	json_object *items;
	size_t i;
	char provider[128];
	start(NULL);
	CU_ASSERT_EQUAL(target_of("general"), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 5, &e), 0);
	items = group_nodes("general");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(items), 5);
	for(i = 0; i < 5; i++) {
		json_object *n = json_object_array_get_idx(items, i);
		const char *name = name_of(n);
		CU_ASSERT_TRUE(suffix_ok(name, "general"));
		CU_ASSERT_STRING_EQUAL(path_str(n, "metadata", "annotations", "kwok.x-k8s.io/node"), "fake");
		CU_ASSERT_PTR_NULL(path_str(n, "metadata", "annotations", "provreqd.io/max-size"));
		CU_ASSERT_STRING_EQUAL(path_str(n, "metadata", "labels", "provreqd.io/node-group"), "general");
		CU_ASSERT_STRING_EQUAL(path_str(n, "metadata", "labels", "kubernetes.io/hostname"), name);
		CU_ASSERT_STRING_EQUAL(path_str(n, "metadata", "labels", "node.kubernetes.io/instance-type"),
				       "kwok-general-4x16");
		snprintf(provider, sizeof(provider), "kwok://%s", name);
		CU_ASSERT_STRING_EQUAL(path_str(n, "spec", "providerID", NULL), provider);
		CU_ASSERT_STRING_EQUAL(path_str(n, "status", "capacity", "cpu"), "4");
		CU_ASSERT_STRING_EQUAL(path_str(n, "status", "capacity", "memory"), "16Gi");
		CU_ASSERT_STRING_EQUAL(path_str(n, "status", "allocatable", "cpu"), "3900m");
		CU_ASSERT_STRING_EQUAL(path_str(n, "status", "allocatable", "memory"), "15Gi");
		CU_ASSERT_PTR_NULL(json_object_object_get(json_object_object_get(n, "spec"), "taints"));
	}
	/* Five distinct names. */
	for(i = 0; i < 5; i++) {
		size_t j;
		for(j = i + 1; j < 5; j++)
			CU_ASSERT_STRING_NOT_EQUAL(name_of(json_object_array_get_idx(items, i)),
						   name_of(json_object_array_get_idx(items, j)));
	}
	json_object_put(items);
	CU_ASSERT_EQUAL(target_of("general"), 5);
	CU_ASSERT_EQUAL(count_nodes("gpu"), 0);

	/* The GPU group's nodes carry its taint and extended resource. */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "gpu", 1, &e), 0);
	items = group_nodes("gpu");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(items), 1);
	{
		json_object *n = json_object_array_get_idx(items, 0), *t;
		t = json_object_object_get(json_object_object_get(n, "spec"), "taints");
		CU_ASSERT_EQUAL_FATAL(json_object_array_length(t), 1);
		CU_ASSERT_STRING_EQUAL(path_str(json_object_array_get_idx(t, 0), "key", NULL, NULL), "nvidia.com/gpu");
		CU_ASSERT_STRING_EQUAL(path_str(json_object_array_get_idx(t, 0), "effect", NULL, NULL), "NoSchedule");
		CU_ASSERT_STRING_EQUAL(path_str(n, "status", "allocatable", "nvidia.com/gpu"), "4");
	}
	json_object_put(items);
}

static void test_instances_states(void)
{
	prd_cloud_error e = {0, ""};
	json_object *items, *o;
	inst_summary s;
	char path[256], body[512];
	long st;
	start(NULL);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 3, &e), 0);
	s = instances_of("general");
	CU_ASSERT_EQUAL(s.total, 3);
	CU_ASSERT_EQUAL(s.creating, 3);
	/* The kwok controller marks a node Ready: that instance is Running. */
	items = group_nodes("general");
	snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", name_of(json_object_array_get_idx(items, 0)));
	snprintf(body, sizeof(body), "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
	o = api("PATCH", path, body, &st);
	CU_ASSERT_EQUAL(st, 200);
	json_object_put(o);
	json_object_put(items);
	s = instances_of("general");
	CU_ASSERT_EQUAL(s.running, 1);
	CU_ASSERT_EQUAL(s.creating, 2);
	/* A node being deleted is Deleting and leaves the target size. */
	o = api("POST", "/api/v1/nodes",
		"{\"metadata\":{\"name\":\"general-leave\",\"deletionTimestamp\":\"2024-05-01T10:00:00Z\","
		"\"labels\":{\"provreqd.io/node-group\":\"general\"}}}",
		&st);
	CU_ASSERT_EQUAL(st, 201);
	json_object_put(o);
	s = instances_of("general");
	CU_ASSERT_EQUAL(s.total, 4);
	CU_ASSERT_EQUAL(s.deleting, 1);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 3);
}

/* Delete exactly the named nodes; a wrong name anywhere deletes nothing. */
static void test_delete_exact(void)
{
	prd_cloud_error e = {0, ""};
	json_object *items, *left;
	const char *del[2], *other[2];
	char keep[3][64];
	size_t i;
	start(NULL);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 5, &e), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "gpu", 1, &e), 0);
	items = group_nodes("general");
	del[0] = name_of(json_object_array_get_idx(items, 1));
	del[1] = name_of(json_object_array_get_idx(items, 3));
	snprintf(keep[0], sizeof(keep[0]), "%s", name_of(json_object_array_get_idx(items, 0)));
	snprintf(keep[1], sizeof(keep[1]), "%s", name_of(json_object_array_get_idx(items, 2)));
	snprintf(keep[2], sizeof(keep[2]), "%s", name_of(json_object_array_get_idx(items, 4)));

	/* A node of another group, or one that does not exist: refused, and
	 * the valid name in the same call is not deleted either. */
	left = group_nodes("gpu");
	other[0] = del[0];
	other[1] = name_of(json_object_array_get_idx(left, 0));
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "general", other, 2, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "is not in group general"));
	json_object_put(left);
	other[1] = "general-zzzzz";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "general", other, 2, &e), PRD_CLOUD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "general-zzzzz"));
	CU_ASSERT_EQUAL(count_nodes("general"), 5);
	CU_ASSERT_EQUAL(count_nodes("gpu"), 1);
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "nosuch", del, 2, &e), PRD_CLOUD_ENOTFOUND);

	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "general", del, 2, &e), 0);
	json_object_put(items);
	left = group_nodes("general");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(left), 3);
	for(i = 0; i < 3; i++) {
		const char *n = name_of(json_object_array_get_idx(left, i));
		CU_ASSERT_TRUE(!strcmp(n, keep[0]) || !strcmp(n, keep[1]) || !strcmp(n, keep[2]));
	}
	json_object_put(left);
	CU_ASSERT_EQUAL(target_of("general"), 3);
	CU_ASSERT_EQUAL(count_nodes("gpu"), 1);
}

static void test_min_max(void)
{
	prd_cloud_error e = {0, ""};
	prd_err pe;
	json_object *items;
	const char *names[2];
	start(NULL);
	/* general: max 10. */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 11, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "would exceed its maximum size 10"));
	CU_ASSERT_EQUAL(count_nodes("general"), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 8, &e), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 3, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(drv->api->atomic_increase_size(drv->state, "general", 3, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(count_nodes("general"), 8);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 2, &e), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 0, &e), PRD_CLOUD_EINVAL);

	/* bounded: min 2, max 3 (the annotation given as a YAML integer). */
	fresh_api();
	if(load_cfg(&pe, "templateDir: %s\n", test_srcpath("fixtures/drivers/kwok-sized")))
		fprintf(stderr, "load: %s\n", pe.msg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv);
	{
		prd_cloud_node_group *g = NULL;
		size_t n = 0;
		CU_ASSERT_EQUAL_FATAL(drv->api->node_groups(drv->state, &g, &n, &e), 0);
		CU_ASSERT_EQUAL_FATAL(n, 1);
		CU_ASSERT_STRING_EQUAL(g[0].id, "bounded");
		CU_ASSERT_EQUAL(g[0].min_size, 2);
		CU_ASSERT_EQUAL(g[0].max_size, 3);
		drv->api->release_node_groups(drv->state, g, n);
	}
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "bounded", 3, &e), 0);
	items = group_nodes("bounded");
	names[0] = name_of(json_object_array_get_idx(items, 0));
	names[1] = name_of(json_object_array_get_idx(items, 1));
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "bounded", names, 2, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "below its minimum size 2"));
	CU_ASSERT_EQUAL(count_nodes("bounded"), 3);
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "bounded", names, 1, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("bounded"), 2);
	json_object_put(items);
}

static void test_fault_fail(void)
{
	prd_cloud_error e = {0, ""};
	start("faults:\n"
	      "- {operation: increase, group: general, fail: quota exhausted in zone-a}\n"
	      "- {operation: delete, fail: delete is broken, failCode: EAGAIN, times: 1}\n");
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 5, &e), PRD_CLOUD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "quota exhausted in zone-a"));
	CU_ASSERT_EQUAL(count_nodes("general"), 0);
	CU_ASSERT_EQUAL(target_of("general"), 0);
	/* Only the named group is affected. */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "gold", 2, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("gold"), 2);
	/* times: 1 fails once, then the operation works. */
	{
		json_object *items = group_nodes("gold");
		const char *name = name_of(json_object_array_get_idx(items, 0));
		CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "gold", &name, 1, &e), PRD_CLOUD_EAGAIN);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "delete is broken"));
		CU_ASSERT_EQUAL(count_nodes("gold"), 2);
		CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "gold", &name, 1, &e), 0);
		CU_ASSERT_EQUAL(count_nodes("gold"), 1);
		json_object_put(items);
	}
}

/* succeed k of n: k Nodes, n-k out-of-resources instances in the target
 * until they are deleted or the target is decreased. */
static void test_fault_partial(void)
{
	prd_cloud_error e = {0, ""};
	inst_summary s;
	const char *placeholder;
	start("faults:\n"
	      "- operation: increase\n"
	      "  group: general\n"
	      "  succeed: 2\n"
	      "  errorCode: ZONE_RESOURCE_POOL_EXHAUSTED\n");
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 5, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("general"), 2);
	CU_ASSERT_EQUAL(target_of("general"), 5);
	s = instances_of("general");
	CU_ASSERT_EQUAL(s.total, 5);
	CU_ASSERT_EQUAL(s.oor, 3);
	CU_ASSERT_EQUAL(s.creating, 5); /* 2 not Ready yet + 3 errored */
	CU_ASSERT_STRING_EQUAL(s.code, "ZONE_RESOURCE_POOL_EXHAUSTED");
	CU_ASSERT_PTR_NOT_NULL(strstr(logbuf, "created 2 of 5 nodes"));
	/* Refresh keeps them. */
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 5);
	/* Deleting an errored instance by its id clears it. */
	placeholder = s.first_errored;
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "general", &placeholder, 1, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 4);
	CU_ASSERT_EQUAL(instances_of("general").oor, 2);
	/* Decreasing the target cancels the rest, but never real nodes. */
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, "general", 3, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "only 2 requested nodes are not created yet"));
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, "general", 2, &e), 0);
	s = instances_of("general");
	CU_ASSERT_EQUAL(s.oor, 0);
	CU_ASSERT_EQUAL(s.total, 2);
	CU_ASSERT_EQUAL(target_of("general"), 2);
	CU_ASSERT_EQUAL(count_nodes("general"), 2);
	/* The errored ones count against the maximum while they exist. */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 5, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 7);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 4, &e), PRD_CLOUD_ERANGE);
}

static void test_fault_delay(void)
{
	prd_cloud_error e = {0, ""};
	struct timespec a, b;
	int64_t ms;
	start("faults:\n- {operation: increase, delayMs: 60}\n");
	clock_gettime(CLOCK_MONOTONIC, &a);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "gold", 1, &e), 0);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ms = (int64_t)(b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	/* A sleep lasts at least as long as asked: a lower bound only. */
	CU_ASSERT_TRUE(ms >= 60);
	CU_ASSERT_EQUAL(count_nodes("gold"), 1);
}

static void test_atomic(void)
{
	prd_cloud_error e = {0, ""};
	start("faults:\n- {operation: atomic-increase, group: gpu, succeed: 2}\n");
	/* All: five nodes. */
	CU_ASSERT_EQUAL(drv->api->atomic_increase_size(drv->state, "general", 5, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("general"), 5);
	/* None: two of three were created, then deleted again. */
	CU_ASSERT_EQUAL(drv->api->atomic_increase_size(drv->state, "gpu", 3, &e), PRD_CLOUD_EAGAIN);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "only 2 of 3 nodes"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "OutOfResources"));
	CU_ASSERT_EQUAL(count_nodes("gpu"), 0);
	CU_ASSERT_EQUAL(target_of("gpu"), 0);
	CU_ASSERT_EQUAL(instances_of("gpu").total, 0);
	/* Within what the fault allows, all of them. */
	CU_ASSERT_EQUAL(drv->api->atomic_increase_size(drv->state, "gpu", 2, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("gpu"), 2);
	/* Over the maximum: refused before anything is created. */
	CU_ASSERT_EQUAL(drv->api->atomic_increase_size(drv->state, "gpu", 3, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(count_nodes("gpu"), 2);
	/* The apiserver failing: nothing created, the error passed on. */
	memapi_inject_fault(m, "POST", "/api/v1/nodes", 500, 1);
	CU_ASSERT_EQUAL(drv->api->atomic_increase_size(drv->state, "gold", 2, &e), PRD_CLOUD_EAGAIN);
	CU_ASSERT_EQUAL(count_nodes("gold"), 0);
}

/* A template source in a ConfigMap, and initial sizes. */
static void test_configmap_and_initial(void)
{
	prd_err pe;
	prd_cloud_error e = {0, ""};
	json_object *cm = json_object_new_object(), *md = json_object_new_object(), *data = json_object_new_object();
	char *text = NULL;
	size_t len = 0;
	prd_err re;
	long st;
	json_object *o;
	const char *dir = nodegroups_dir();
	char path[1200];

	fresh_api();
	o = api("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"provreqd\"}}", &st);
	json_object_put(o);
	snprintf(path, sizeof(path), "%s/gold.yaml", dir);
	CU_ASSERT_EQUAL_FATAL(yj_read_file(path, 1 << 20, &text, &len, &re), 0);
	json_object_object_add(md, "name", json_object_new_string("nodegroups"));
	json_object_object_add(cm, "metadata", md);
	json_object_object_add(data, "gold.yaml", json_object_new_string(text));
	json_object_object_add(cm, "data", data);
	free(text);
	o = api("POST", "/api/v1/namespaces/provreqd/configmaps", json_object_to_json_string(cm), &st);
	CU_ASSERT_EQUAL(st, 201);
	json_object_put(o);
	json_object_put(cm);

	CU_ASSERT_EQUAL_FATAL(load_cfg(&pe, "templateConfigMap: provreqd/nodegroups\ncreateInitialNodes: true\n"), 0);
	CU_ASSERT_EQUAL(count_nodes("gold"), 2);
	CU_ASSERT_EQUAL(target_of("gold"), 2);
	CU_ASSERT_EQUAL(target_of("general"), -1);
	/* A restart finds the group's nodes and creates no more. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	CU_ASSERT_EQUAL_FATAL(load_cfg(&pe, "templateConfigMap: provreqd/nodegroups\ncreateInitialNodes: true\n"), 0);
	CU_ASSERT_EQUAL(count_nodes("gold"), 2);
	/* Without createInitialNodes nothing is created. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	{
		json_object *items = group_nodes("gold");
		size_t i;
		for(i = 0; i < json_object_array_length(items); i++) {
			snprintf(path, sizeof(path), "/api/v1/nodes/%s", name_of(json_object_array_get_idx(items, i)));
			json_object_put(api("DELETE", path, NULL, &st));
		}
		json_object_put(items);
	}
	CU_ASSERT_EQUAL_FATAL(load_cfg(&pe, "templateConfigMap: provreqd/nodegroups\n"), 0);
	CU_ASSERT_EQUAL(count_nodes("gold"), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "gold", 1, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("gold"), 1);
	/* A ConfigMap that is missing is a clear init error. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	CU_ASSERT_EQUAL(load_cfg(&pe, "templateConfigMap: provreqd/missing\n"), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "cannot read templateConfigMap provreqd/missing"));
}

static void test_node_group_for_node_and_template(void)
{
	prd_cloud_error e = {0, ""};
	char *id = NULL, *tmpl = NULL;
	json_object *t;
	start(NULL);
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
		"{\"metadata\":{\"name\":\"x\",\"labels\":{\"provreqd.io/node-group\":\"gpu\"}}}", &id, &e), 0);
	CU_ASSERT_STRING_EQUAL(id, "gpu");
	drv->api->release_string(drv->state, id);
	id = NULL;
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
		"{\"metadata\":{\"name\":\"x\",\"labels\":{\"provreqd.io/node-group\":\"other\"}}}", &id, &e), 0);
	CU_ASSERT_PTR_NULL(id);
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state, "{\"metadata\":{\"name\":\"x\"}}", &id, &e), 0);
	CU_ASSERT_PTR_NULL(id);
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state, "not json", &id, &e), PRD_CLOUD_EINVAL);

	CU_ASSERT_EQUAL_FATAL(drv->api->template_node(drv->state, "gpu", &tmpl, &e), 0);
	t = json_tokener_parse(tmpl);
	drv->api->release_string(drv->state, tmpl);
	CU_ASSERT_STRING_EQUAL(path_str(t, "metadata", "labels", "provreqd.io/node-group"), "gpu");
	CU_ASSERT_STRING_EQUAL(path_str(t, "metadata", "labels", "nvidia.com/gpu.present"), "true");
	CU_ASSERT_STRING_EQUAL(path_str(t, "status", "allocatable", "nvidia.com/gpu"), "4");
	CU_ASSERT_STRING_EQUAL(path_str(t, "status", "capacity", "cpu"), "16");
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(json_object_object_get(t, "spec"), "taints")), 1);
	json_object_put(t);
	/* No allocatable in the template: it equals capacity. */
	CU_ASSERT_EQUAL_FATAL(drv->api->template_node(drv->state, "gold", &tmpl, &e), 0);
	t = json_tokener_parse(tmpl);
	drv->api->release_string(drv->state, tmpl);
	CU_ASSERT_STRING_EQUAL(path_str(t, "status", "allocatable", "memory"), "8Gi");
	CU_ASSERT_STRING_EQUAL(path_str(t, "metadata", "labels", "pool"), "gold");
	json_object_put(t);
	CU_ASSERT_EQUAL(drv->api->template_node(drv->state, "nosuch", &tmpl, &e), PRD_CLOUD_ENOTFOUND);
}

/* A node template file in a fresh directory; returns the directory. */
static const char *template_dir_with(const char *name, const char *yaml)
{
	static char dir[1024];
	static int n;
	char path[1200];
	FILE *f;
	snprintf(dir, sizeof(dir), "%s/tpl%d", test_tmpdir(), ++n);
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(yaml, f);
	fclose(f);
	return dir;
}

/* Load with a config and expect an init error containing `want`. */
static void init_fails(const char *config, const char *want)
{
	prd_err pe;
	int rc;
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	rc = load_cfg(&pe, "%s", config);
	CU_ASSERT_EQUAL(rc, PRD_EINVAL);
	CU_ASSERT_EQUAL(set.n, 0);
	if(!strstr(pe.msg, want)) {
		fprintf(stderr, "\nwanted '%s' in: %s\n", want, pe.msg);
		CU_FAIL("init error message");
	}
}

static void bad_template(const char *yaml, const char *want)
{
	char cfg[1200];
	snprintf(cfg, sizeof(cfg), "templateDir: %s\n", template_dir_with("t.yaml", yaml));
	init_fails(cfg, want);
}

#define NODE_HEAD "apiVersion: v1\nkind: Node\nmetadata:\n  name: g\n"

static void test_bad_config(void)
{
	char cfg[1200];
	fresh_api();
	init_fails("", "kwok config is empty");
	init_fails("templateDir: [1]\n", "templateDir must be a path");
	init_fails("nodeGroups: x\n", "unknown key 'nodeGroups'");
	init_fails("- a\n", "must be a YAML mapping");
	init_fails("templateDir: /a\ntemplateConfigMap: b/c\n", "only one of templateDir and templateConfigMap");
	init_fails("createInitialNodes: yes please\n", "createInitialNodes must be true or false");
	init_fails("templateConfigMap: nonamespace\n", "must be NAMESPACE/NAME");
	init_fails("templateDir: /nonexistent/provreqd\n", "cannot read templateDir /nonexistent/provreqd");
	init_fails("templateDir: [unclosed\n", "kwok config: line");
	snprintf(cfg, sizeof(cfg), "templateDir: %s\nfaults:\n- {operation: explode, fail: x}\n", nodegroups_dir());
	init_fails(cfg, "faults[0].operation 'explode' is not one of");
	snprintf(cfg, sizeof(cfg), "templateDir: %s\nfaults:\n- {operation: delete, succeed: 1}\n", nodegroups_dir());
	init_fails(cfg, "faults[0].succeed applies to increase and atomic-increase only");
	snprintf(cfg, sizeof(cfg), "templateDir: %s\nfaults:\n- {operation: increase, group: silver, fail: x}\n",
		 nodegroups_dir());
	init_fails(cfg, "faults[0].group 'silver' is not a node group");
	snprintf(cfg, sizeof(cfg), "templateDir: %s\nfaults:\n- {operation: increase}\n", nodegroups_dir());
	init_fails(cfg, "does nothing: give fail, succeed or delayMs");
	snprintf(cfg, sizeof(cfg), "templateDir: %s\nfaults:\n- {operation: increase, fail: x, succeed: 1}\n",
		 nodegroups_dir());
	init_fails(cfg, "has both fail and succeed");
	snprintf(cfg, sizeof(cfg), "templateDir: %s\nfaults:\n- {operation: increase, delayMs: -5}\n",
		 nodegroups_dir());
	init_fails(cfg, "delayMs must be a non-negative integer");
	snprintf(cfg, sizeof(cfg), "templateDir: %s\n", test_tmpdir());
	init_fails(cfg, "holds no node templates");

	bad_template("apiVersion: v1\nkind: Pod\nmetadata:\n  name: g\n", "a node template must be a v1 Node, found v1 Pod");
	bad_template("apiVersion: v1\nkind: Node\nmetadata:\n  name: Big_Name\nstatus:\n  capacity: {cpu: 1}\n",
		     "metadata.name 'Big_Name' must be a DNS label");
	bad_template(NODE_HEAD "status:\n  allocatable: {cpu: 1}\n", "status.capacity is missing or empty");
	bad_template(NODE_HEAD "status:\n  capacity: {cpu: lots}\n", "status.capacity.cpu: 'lots' is not a quantity");
	bad_template(NODE_HEAD "status:\n  capacity: {cpu: \"-1\"}\n", "status.capacity.cpu is negative");
	bad_template(NODE_HEAD "  annotations: {provreqd.io/min-size: two}\nstatus:\n  capacity: {cpu: 1}\n",
		     "annotation provreqd.io/min-size='two' must be a non-negative integer");
	bad_template(NODE_HEAD "  annotations: {provreqd.io/min-size: \"3\", provreqd.io/max-size: \"2\"}\n"
				"status:\n  capacity: {cpu: 1}\n",
		     "provreqd.io/max-size (2) is below provreqd.io/min-size (3)");
	bad_template(NODE_HEAD "  annotations: {provreqd.io/initial-size: \"200\"}\nstatus:\n  capacity: {cpu: 1}\n",
		     "provreqd.io/initial-size (200) is outside [0, 100]");
	bad_template(NODE_HEAD "spec:\n  taints:\n  - {key: a, effect: Sometimes}\nstatus:\n  capacity: {cpu: 1}\n",
		     "spec.taints[0].effect 'Sometimes' is not NoSchedule");
	bad_template(NODE_HEAD "status:\n  capacity: {cpu: 1}\n---\n" NODE_HEAD "status:\n  capacity: {cpu: 2}\n",
		     "node group g is defined twice");
	bad_template(NODE_HEAD "  labels: {a: [1]}\nstatus:\n  capacity: {cpu: 1}\n", "metadata.labels.a must be a string");
	bad_template("kind: Node\nmetadata: {name: g\n", "t.yaml: line");
}

/* Nodes made outside the driver count after a refresh; a template dir
 * that breaks keeps the old groups. */
static void test_refresh(void)
{
	prd_cloud_error e = {0, ""};
	json_object *o;
	long st;
	start(NULL);
	o = api("POST", "/api/v1/nodes",
		"{\"metadata\":{\"name\":\"gold-manual\",\"labels\":{\"provreqd.io/node-group\":\"gold\"}}}", &st);
	json_object_put(o);
	CU_ASSERT_EQUAL(target_of("gold"), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("gold"), 1);
	memapi_inject_fault(m, "GET", "/api/v1/nodes", 503, 1);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), PRD_CLOUD_EAGAIN);
	CU_ASSERT_EQUAL(target_of("gold"), 1);
}

static int32_t max_of(const char *group)
{
	prd_cloud_node_group *g = NULL;
	size_t n = 0, i;
	int32_t t = -1;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->node_groups(drv->state, &g, &n, &e), 0);
	for(i = 0; i < n; i++)
		if(!strcmp(g[i].id, group))
			t = g[i].max_size;
	drv->api->release_node_groups(drv->state, g, n);
	return t;
}

static void write_template(const char *dir, int max)
{
	char path[1200];
	FILE *f;
	snprintf(path, sizeof(path), "%s/t.yaml", dir);
	f = fopen(path, "r+"); /* in place: the inode stays */
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, NODE_HEAD "  annotations: {provreqd.io/max-size: \"%d\"}\nstatus:\n  capacity: {cpu: 1}\n", max);
	fclose(f);
}

/* A refresh parses a template directory only when it changed: each file's
 * size, inode and times are compared. Catches a driver that keeps the
 * groups of a file rewritten in place at the same size right after the
 * previous read (only the times tell). The shipped templates are old
 * files: test_refresh takes the path that parses nothing. */
static void test_refresh_rereads_changed_templates(void)
{
	prd_cloud_error e = {0, ""};
	prd_err pe;
	const char *dir;
	fresh_api();
	dir = template_dir_with("t.yaml", NODE_HEAD "  annotations: {provreqd.io/max-size: \"3\"}\n"
				   "status:\n  capacity: {cpu: 1}\n");
	CU_ASSERT_EQUAL_FATAL(load_cfg(&pe, "templateDir: %s\n", dir), 0);
	CU_ASSERT_EQUAL(max_of("g"), 3);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	write_template(dir, 4);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(max_of("g"), 4);
	write_template(dir, 5);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(max_of("g"), 5);
}

static bool has_group(const char *group)
{
	return max_of(group) >= 0;
}

static void put_template(const char *dir, const char *file, const char *group)
{
	char path[1200];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fprintf(f, "apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\nstatus:\n  capacity: {cpu: 1}\n", group);
	fclose(f);
}

/* A template file added, removed or renamed right after a refresh is seen
 * at the next one: the driver keeps the directory's file names between
 * refreshes and must read them again when the directory changed. These
 * changes come within the file system's timestamp granularity of each
 * other, so the directory's times alone may not move: catches a driver
 * that relies on them for a directory changed in the last 2 s. */
static void test_refresh_sees_added_and_removed_templates(void)
{
	prd_cloud_error e = {0, ""};
	char from[1200], to[1200];
	prd_err pe;
	const char *dir;
	fresh_api();
	dir = template_dir_with("a.yaml", NODE_HEAD "status:\n  capacity: {cpu: 1}\n");
	CU_ASSERT_EQUAL_FATAL(load_cfg(&pe, "templateDir: %s\n", dir), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT(has_group("g"));
	put_template(dir, "b.yaml", "h");
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT(has_group("g") && has_group("h"));
	snprintf(from, sizeof(from), "%s/a.yaml", dir);
	CU_ASSERT_EQUAL(unlink(from), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT(!has_group("g") && has_group("h"));
	/* Renamed out of the template names, another one in. */
	snprintf(from, sizeof(from), "%s/b.yaml", dir);
	snprintf(to, sizeof(to), "%s/b.yaml.off", dir);
	put_template(dir, "c.yml", "k");
	CU_ASSERT_EQUAL(rename(from, to), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT(!has_group("h") && has_group("k"));
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT(has_group("k"));
}

/* Without an apiserver (`provreqd check-driver`) the templates still load
 * and every group is empty; creating nodes fails clearly. */
static void test_no_apiserver(void)
{
	prd_cloud_error e = {0, ""};
	prd_err pe;
	fresh_api();
	cloud_host_init(&host, "driver/kwok", &fake, NULL, NULL);
	host.host.log = capture_log;
	CU_ASSERT_EQUAL_FATAL(load_cfg(&pe, "templateDir: %s\n", nodegroups_dir()), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("gpu"), 0);
	CU_ASSERT_EQUAL(instances_of("gpu").total, 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "gpu", 1, &e), PRD_CLOUD_EUNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "no apiserver connection"));
}

/* The instances of a group: how many, how many without a node name, how
 * many failed, and their ids (up to 8). */
typedef struct async_view {
	size_t n, nameless, failed, deleting;
	char ids[8][128];
} async_view;

static int async_list(const char *group, async_view *out)
{
	prd_cloud_instance *v = NULL;
	size_t n = 0, i;
	prd_cloud_error e = {0, ""};
	int rc = drv->api->instances(drv->state, group, &v, &n, &e);
	memset(out, 0, sizeof(*out));
	if(rc)
		return rc;
	out->n = n;
	for(i = 0; i < n; i++) {
		CU_ASSERT_PTR_NOT_NULL(v[i].id);
		out->nameless += v[i].node_name == NULL;
		out->failed += v[i].error_class != PRD_CLOUD_ERRCLASS_NONE;
		out->deleting += v[i].state == PRD_CLOUD_INSTANCE_DELETING;
		if(i < 8)
			snprintf(out->ids[i], sizeof(out->ids[i]), "%s", v[i].id);
	}
	drv->api->release_instances(drv->state, v, n);
	return 0;
}

static void async_cfg(char *buf, size_t len, const char *state, const char *extra)
{
	snprintf(buf, len,
		 "async:\n  stateFile: %s\n  seed: 7\n  createDelayMs: 1000\n  registerDelayMs: 2000\n"
		 "  deleteDelayMs: 1000\n%s",
		 state, extra ? extra : "");
}

/* Broken cloud caught: one whose increase creates Nodes at once (what every
 * controller test against kwok proved was only the happy path). The async
 * cloud answers first; instances appear without a node name, then their
 * Nodes register; what was asked for survives the driver (provreqd) being
 * restarted; stockouts, instance failures and transient errors happen as
 * configured; cancelling and deleting what is not created yet works. */
static void test_async_cloud(void)
{
	char state[600], cfg[1200];
	prd_cloud_error e = {0, ""};
	async_view av;
	snprintf(state, sizeof(state), "%s/kwok-async-%d.json", test_tmpdir(), rand());
	async_cfg(cfg, sizeof(cfg), state, NULL);
	start(cfg);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 3, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("general"), 0);
	CU_ASSERT_EQUAL(target_of("general"), 3);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.n, 0); /* not even reported yet */
	clk_fake_advance(&fake, 1100 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.n, 3);
	CU_ASSERT_EQUAL(av.nameless, 3);
	CU_ASSERT_EQUAL(strncmp(av.ids[0], "kwok://general-", 15), 0);
	/* provreqd restarts: the cloud still knows the three. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	{
		prd_err pe;
		char full[2600];
		snprintf(full, sizeof(full), "templateDir: %s\n%s", nodegroups_dir(), cfg);
		CU_ASSERT_EQUAL_FATAL(cloud_drivers_load(&set, module_path(), &host.host, full, &drv, &pe), 0);
	}
	CU_ASSERT_EQUAL(target_of("general"), 3);
	clk_fake_advance(&fake, 2000 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.n, 3);
	CU_ASSERT_EQUAL(av.nameless, 0);
	CU_ASSERT_EQUAL(count_nodes("general"), 3);
	/* The same id before and after the Node registered. */
	{
		char want[128];
		json_object *items = group_nodes("general");
		snprintf(want, sizeof(want), "kwok://%s", name_of(json_object_array_get_idx(items, 0)));
		CU_ASSERT_TRUE(!strcmp(av.ids[0], want) || !strcmp(av.ids[1], want) || !strcmp(av.ids[2], want));
		json_object_put(items);
	}
	/* Cancel two requested and not created; a third cannot be. */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 2, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 5);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, "general", 3, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, "general", 2, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 3);
	clk_fake_advance(&fake, 5 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.n, 3);
	/* An instance that appeared is deleted through its id, Node or not. */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	clk_fake_advance(&fake, 1100 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.nameless, 1);
	{
		size_t i;
		for(i = 0; i < av.n; i++) {
			const char *id = av.ids[i];
			json_object *items = group_nodes("general");
			bool named = false;
			size_t k;
			for(k = 0; k < json_object_array_length(items); k++) {
				char p[128];
				snprintf(p, sizeof(p), "kwok://%s", name_of(json_object_array_get_idx(items, k)));
				named = named || !strcmp(p, id);
			}
			json_object_put(items);
			if(!named) {
				const char *ids[1] = { id };
				CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, "general", ids, 1, &e), 0);
			}
		}
	}
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.deleting, 1);
	CU_ASSERT_EQUAL(target_of("general"), 3);
	clk_fake_advance(&fake, 3 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.n, 3);
	CU_ASSERT_EQUAL(count_nodes("general"), 3);
	unlink(state);

	/* Every instance fails; every increase is a stockout; every call fails. */
	snprintf(state, sizeof(state), "%s/kwok-async-%d.json", test_tmpdir(), rand());
	async_cfg(cfg, sizeof(cfg), state, "  instanceFailurePercent: 100\n");
	start(cfg);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 2, &e), 0);
	clk_fake_advance(&fake, 10 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.n, 2);
	CU_ASSERT_EQUAL(av.failed, 2);
	CU_ASSERT_EQUAL(count_nodes("general"), 0);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, "general", 2, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 0);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.n, 0);
	unlink(state);
	async_cfg(cfg, sizeof(cfg), state, "  stockoutPercent: 100\n");
	start(cfg);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 2, &e), PRD_CLOUD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "ZONE_RESOURCE_POOL_EXHAUSTED"));
	CU_ASSERT_EQUAL(target_of("general"), 0);
	unlink(state);
	/* A `succeed: K` fault: the instances beyond K fail with its code; an
	 * atomic increase fails as one. */
	async_cfg(cfg, sizeof(cfg), state,
		  "faults:\n- {operation: increase, group: general, succeed: 1, errorCode: QUOTA_EXCEEDED}\n"
		  "- {operation: atomic-increase, group: general, succeed: 1}\n");
	start(cfg);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 3, &e), 0);
	CU_ASSERT_EQUAL(drv->api->atomic_increase_size(drv->state, "general", 2, &e), 0);
	clk_fake_advance(&fake, 1100 * PRD_NS_PER_MS);
	{
		prd_cloud_instance *v = NULL;
		size_t n = 0, i, quota = 0, oor = 0, ok = 0;
		CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, "general", &v, &n, &e), 0);
		CU_ASSERT_EQUAL(n, 5);
		for(i = 0; i < n; i++) {
			if(v[i].error_class == PRD_CLOUD_ERRCLASS_NONE)
				ok++;
			else if(v[i].error_class == PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES && v[i].error_code &&
				!strcmp(v[i].error_code, "QUOTA_EXCEEDED"))
				quota++;
			else if(v[i].error_class == PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES && v[i].error_code &&
				!strcmp(v[i].error_code, "OutOfResources"))
				oor++;
		}
		drv->api->release_instances(drv->state, v, n);
		CU_ASSERT_EQUAL(ok, 1);
		CU_ASSERT_EQUAL(quota, 2);
		CU_ASSERT_EQUAL(oor, 2);
	}
	unlink(state);
	async_cfg(cfg, sizeof(cfg), state, "  transientPercent: 100\n  groups: [gpu]\n");
	start(cfg);
	CU_ASSERT_EQUAL(async_list("gpu", &av), PRD_CLOUD_EAGAIN);
	CU_ASSERT_EQUAL(async_list("general", &av), 0); /* not an async group */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("general"), 1); /* synchronous */
	unlink(state);
	/* Config errors. */
	fresh_api();
	{
		prd_err pe;
		CU_ASSERT_EQUAL(load_cfg(&pe, "templateDir: %s\nasync: {seed: 1}\n", nodegroups_dir()), PRD_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "stateFile"));
		CU_ASSERT_EQUAL(load_cfg(&pe, "templateDir: %s\nasync: {stateFile: /tmp/x, stockoutPercent: 101}\n",
					 nodegroups_dir()),
				PRD_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "stockoutPercent"));
		CU_ASSERT_EQUAL(load_cfg(&pe, "templateDir: %s\nasync: {stateFile: /tmp/x, groups: [nope]}\n",
					 nodegroups_dir()),
				PRD_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "nope"));
	}
}


/* resourceSlices: the template's devices, a slice per new node (named for
 * it, with the node's name and pool), gone with the node; bad
 * declarations are refused. */
static void test_resource_slices(void)
{
	static const char cfg[] =
		"resourceSlices:\n"
		"  gpu:\n"
		"  - driver: gpu.example.com\n"
		"    devices: [{name: gpu-0, attributes: {index: {int: 0}}}, {name: gpu-1}]\n";
	prd_cloud_error e = {0, ""};
	json_object *items, *arr, *sl;
	char *js = NULL, path[256];
	const char *del[1];
	char name[64];
	long st = 0;
	prd_err le;
	start(cfg);
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->template_resource_slices);
	CU_ASSERT_EQUAL(drv->api->template_resource_slices(drv->state, "gpu", &js, &e), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(js);
	arr = json_tokener_parse(js);
	drv->api->release_string(drv->state, js);
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(arr), 1);
	sl = json_object_array_get_idx(arr, 0);
	CU_ASSERT_STRING_EQUAL(path_str(sl, "spec", "nodeName", NULL), "gpu-template");
	CU_ASSERT_STRING_EQUAL(path_str(sl, "spec", "driver", NULL), "gpu.example.com");
	CU_ASSERT_STRING_EQUAL(path_str(sl, "spec", "pool", "name"), "gpu-template");
	json_object_put(arr);
	/* A group without a declaration publishes nothing. */
	js = (char *)"x";
	CU_ASSERT_EQUAL(drv->api->template_resource_slices(drv->state, "general", &js, &e), 0);
	CU_ASSERT_PTR_NULL(js);
	CU_ASSERT_EQUAL(drv->api->template_resource_slices(drv->state, "nosuch", &js, &e), PRD_CLOUD_ENOTFOUND);

	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "gpu", 1, &e), 0);
	items = group_nodes("gpu");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(items), 1);
	snprintf(name, sizeof(name), "%s", name_of(json_object_array_get_idx(items, 0)));
	json_object_put(items);
	snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s-dra-0", name);
	sl = api("GET", path, NULL, &st);
	CU_ASSERT_EQUAL(st, 200);
	CU_ASSERT_STRING_EQUAL(path_str(sl, "spec", "nodeName", NULL), name);
	CU_ASSERT_STRING_EQUAL(path_str(sl, "spec", "pool", "name"), name);
	CU_ASSERT_STRING_EQUAL(path_str(sl, "metadata", "labels", "provreqd.io/node-group"), "gpu");
	json_object_put(sl);
	del[0] = name;
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "gpu", del, 1, &e), 0);
	sl = api("GET", path, NULL, &st);
	CU_ASSERT_EQUAL(st, 404);
	json_object_put(sl);
	/* Nodes of other groups get no slices. */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	sl = api("GET", "/apis/resource.k8s.io/v1/resourceslices", NULL, &st);
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(sl, "items")), 0);
	json_object_put(sl);

	fresh_api();
	CU_ASSERT_EQUAL(load_cfg(&le, "templateDir: %s\nresourceSlices: {nosuch: [{driver: d, devices: []}]}\n",
				 nodegroups_dir()), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(le.msg, "resourceSlices.nosuch: no such node group"));
	fresh_api();
	CU_ASSERT_EQUAL(load_cfg(&le, "templateDir: %s\nresourceSlices: {gpu: [{driver: d, nodeName: x, devices: []}]}\n",
				 nodegroups_dir()), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(le.msg, "nodeName is set by the driver"));
	fresh_api();
	CU_ASSERT_EQUAL(load_cfg(&le, "templateDir: %s\nresourceSlices: {gpu: [{devices: []}]}\n", nodegroups_dir()),
			PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(le.msg, "driver is required"));
	fresh_api();
	CU_ASSERT_EQUAL(load_cfg(&le, "templateDir: %s\nresourceSlices: {gpu: [{driver: d, devices: [{}]}]}\n",
				 nodegroups_dir()), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(le.msg, "devices[0].name is required"));
}

/* One Node as the host's cache would tell it. */
static prd_cloud_node told(const char *name, const char *group, bool ready, prd_cloud_label *lab)
{
	prd_cloud_node n;
	memset(&n, 0, sizeof(n));
	n.name = name;
	n.present = 1;
	n.ready = ready;
	lab[0].key = "kubernetes.io/hostname";
	lab[0].value = name;
	lab[1].key = "provreqd.io/node-group";
	lab[1].value = group;
	n.labels = lab;
	n.nlabels = group ? 2 : 1;
	return n;
}

static prd_cloud_node gone(const char *name)
{
	prd_cloud_node n;
	memset(&n, 0, sizeof(n));
	n.name = name;
	return n;
}

/* Told about Nodes (ABI 1.2), the driver answers from what it was told
 * instead of listing: a Node only the host's cache has counts, one only
 * the apiserver has does not; its own creates and deletes show at once;
 * a full set forgets what it lacks, except a Node the driver created that
 * the cache may not have yet (for two minutes). */
static void test_nodes_changed(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_label la[2], lx[2], ly[2];
	prd_cloud_node v[3];
	json_object *items;
	const char *names[1];
	char a[64], b[64];
	start(NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->nodes_changed);
	/* Changes before a full set are refused: the driver keeps listing. */
	v[0] = gone("nothing");
	CU_ASSERT_EQUAL(drv->api->nodes_changed(drv->state, v, 1, 0, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 2, &e), 0);
	items = group_nodes("general");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(items), 2);
	snprintf(a, sizeof(a), "%s", name_of(json_object_array_get_idx(items, 0)));
	snprintf(b, sizeof(b), "%s", name_of(json_object_array_get_idx(items, 1)));
	json_object_put(items);
	/* The cache has a (Ready), x (not in the apiserver) and y (no group). */
	v[0] = told(a, "general", true, la);
	v[1] = told("general-xxxxx", "general", false, lx);
	v[2] = told("y", NULL, true, ly);
	CU_ASSERT_EQUAL(drv->api->nodes_changed(drv->state, v, 3, 1, &e), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(instances_of("general").total, 2);
	CU_ASSERT_EQUAL(instances_of("general").running, 1);
	CU_ASSERT_EQUAL(instances_of("general").creating, 1);
	CU_ASSERT_EQUAL(target_of("general"), 2);
	/* Its own create counts before the cache says so. */
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(instances_of("general").total, 3);
	CU_ASSERT_EQUAL(target_of("general"), 3);
	/* Its own delete is gone at once, and stays gone while the cache
	 * still shows the Node. */
	names[0] = a;
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "general", names, 1, &e), 0);
	CU_ASSERT_EQUAL(instances_of("general").total, 2);
	v[0] = told(a, "general", true, la);
	v[1] = gone("general-xxxxx");
	CU_ASSERT_EQUAL(drv->api->nodes_changed(drv->state, v, 2, 0, &e), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(instances_of("general").total, 1); /* the one created above */
	CU_ASSERT_EQUAL(target_of("general"), 1);
	/* A full set without it: kept for two minutes, then forgotten. */
	CU_ASSERT_EQUAL(drv->api->nodes_changed(drv->state, v, 0, 1, &e), 0);
	CU_ASSERT_EQUAL(instances_of("general").total, 1);
	clk_fake_advance(&fake, 121 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(drv->api->nodes_changed(drv->state, v, 0, 1, &e), 0);
	CU_ASSERT_EQUAL(instances_of("general").total, 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 0);
	(void)b;
}

/* What the host's cache says of one Node in test_view_groups' model. */
typedef struct model_node {
	char name[16];
	bool present, ready, deleting;
	int group;              /* index into model_groups; -1: no group label */
	int pid;                /* 0: no providerID, 1: "", 2: "fake://<name>" */
	char pid_buf[32];
	prd_cloud_label lab[2];
} model_node;

static const char *const model_groups[] = {"general", "gpu", "gold", "elsewhere"};
#define MODEL_NODES 24

static prd_cloud_node model_told(model_node *n)
{
	prd_cloud_node c;
	if(!n->present)
		return gone(n->name);
	c = told(n->name, n->group >= 0 ? model_groups[n->group] : NULL, n->ready, n->lab);
	c.deleting = n->deleting;
	snprintf(n->pid_buf, sizeof(n->pid_buf), "fake://%s", n->name);
	c.provider_id = n->pid == 0 ? NULL : n->pid == 1 ? "" : n->pid_buf;
	return c;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The driver's instances and target of `group` against the model: every
 * present Node labelled with it, with the id its providerID gives. */
static bool model_matches(model_node *nodes, int group)
{
	const char *want[MODEL_NODES], *got[MODEL_NODES + 1];
	char want_ids[MODEL_NODES][40];
	prd_cloud_instance *v = NULL;
	prd_cloud_error e = {0, ""};
	size_t n = 0, nw = 0, i;
	int32_t live = 0;
	bool ok = true;
	for(i = 0; i < MODEL_NODES; i++) {
		const model_node *mn = &nodes[i];
		if(!mn->present || mn->group != group)
			continue;
		snprintf(want_ids[nw], sizeof(want_ids[nw]), "%s%.15s", mn->pid == 2 ? "fake://" : "kwok://", mn->name);
		want[nw] = want_ids[nw];
		nw++;
		live += !mn->deleting;
	}
	if(drv->api->instances(drv->state, model_groups[group], &v, &n, &e) || n != nw)
		return false;
	for(i = 0; i < n; i++) {
		const model_node *mn = NULL;
		size_t j;
		got[i] = v[i].id;
		for(j = 0; j < MODEL_NODES; j++)
			if(v[i].node_name && !strcmp(nodes[j].name, v[i].node_name))
				mn = &nodes[j];
		if(!mn || v[i].state != (mn->deleting ? PRD_CLOUD_INSTANCE_DELETING
					 : mn->ready  ? PRD_CLOUD_INSTANCE_RUNNING
						      : PRD_CLOUD_INSTANCE_CREATING))
			ok = false;
	}
	qsort(want, nw, sizeof(*want), cmp_str);
	qsort(got, n, sizeof(*got), cmp_str);
	for(i = 0; ok && i < n; i++)
		ok = !strcmp(want[i], got[i]);
	drv->api->release_instances(drv->state, v, n);
	if(!ok || drv->api->refresh(drv->state, &e))
		return false;
	return target_of(model_groups[group]) == live;
}

/* The view keeps each group's Nodes and live count as Nodes change group,
 * readiness, deletion, providerID, or go: after each of many random
 * changes (some told one by one, some as a full set), the instances and
 * target size of every group are what a walk over the model gives.
 * Catches a view whose per-group members or counts miss a change. */
static void test_view_groups(void)
{
	prd_cloud_error e = {0, ""};
	model_node nodes[MODEL_NODES];
	prd_cloud_node v[MODEL_NODES];
	uint64_t rng = 42;
	int step, i, g;
	start(NULL);
	memset(nodes, 0, sizeof(nodes));
	for(i = 0; i < MODEL_NODES; i++)
		snprintf(nodes[i].name, sizeof(nodes[i].name), "n%02d", i);
	CU_ASSERT_EQUAL_FATAL(drv->api->nodes_changed(drv->state, v, 0, 1, &e), 0);
	for(step = 0; step < 600; step++) {
		model_node *mn;
		size_t nv = 0;
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		mn = &nodes[(rng >> 33) % MODEL_NODES];
		switch((rng >> 40) % 6) {
		case 0: mn->present = !mn->present; break;
		case 1: mn->group = (int)((rng >> 20) % 5) - 1; break;
		case 2: mn->ready = !mn->ready; break;
		case 3: mn->deleting = !mn->deleting; break;
		case 4: mn->pid = (int)((rng >> 24) % 3); break;
		default: mn->present = true; mn->group = (int)((rng >> 20) % 3); break;
		}
		if((rng >> 50) % 10 == 0) {
			for(i = 0; i < MODEL_NODES; i++)
				if(nodes[i].present)
					v[nv++] = model_told(&nodes[i]);
			CU_ASSERT_EQUAL_FATAL(drv->api->nodes_changed(drv->state, v, nv, 1, &e), 0);
		} else {
			v[0] = model_told(mn);
			CU_ASSERT_EQUAL_FATAL(drv->api->nodes_changed(drv->state, v, 1, 0, &e), 0);
		}
		for(g = 0; g < 3; g++)
			if(!model_matches(nodes, g)) {
				fprintf(stderr, "\nstep %d: group %s differs from the model\n", step, model_groups[g]);
				CU_FAIL_FATAL("view against the model");
			}
	}
}


/* ---- ABI 1.3: conditional calls, owner marks, creation times ------------ */

#define OWNER_A "3f1c9b7e-0d2a-4c55-9e1b-7a2f0c8d9e10.1764198000123456789-0"
#define OWNER_B "0c0ffee0-1111-4222-8333-944445555666.1764198000999999999-1"
#define T0_NS (1714557600LL * PRD_NS_PER_SEC)

static int increase_if(const char *group, int32_t delta, int atomic, int32_t expected, const char *owner,
		       prd_cloud_error *e)
{
	prd_cloud_increase req;
	memset(&req, 0, sizeof(req));
	req.struct_size = sizeof(req);
	req.group_id = group;
	req.delta = delta;
	req.atomic = atomic;
	req.expected_target = expected;
	req.owner = owner;
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->increase);
	return drv->api->increase(drv->state, &req, e);
}

/* A Node of `group` made by someone else, straight in the apiserver. */
static void other_writer_node(const char *name, const char *group)
{
	char body[512];
	long st = 0;
	snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"provreqd.io/node-group\":\"%s\"}}}",
		 name, group);
	json_object_put(api("POST", "/api/v1/nodes", body, &st));
	CU_ASSERT_EQUAL_FATAL(st, 201);
}

/* How many of the group's instances carry `owner` (NULL: none), and the
 * created_ns of the instance whose node (or, without one, id) is `who`. */
static size_t owned_by(const char *group, const char *owner, const char *who, int64_t *created)
{
	prd_cloud_instance *v = NULL;
	size_t n = 0, i, hits = 0;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, group, &v, &n, &e), 0);
	for(i = 0; i < n; i++) {
		hits += owner ? v[i].owner && !strcmp(v[i].owner, owner) : v[i].owner == NULL;
		if(who && created && ((v[i].node_name && !strcmp(v[i].node_name, who)) || !strcmp(v[i].id, who)))
			*created = v[i].created_ns;
	}
	drv->api->release_instances(drv->state, v, n);
	return hits;
}

/* The descriptor says what the driver promises, and the loader took it. */
static void test_abi13_descriptor(void)
{
	start(NULL);
	CU_ASSERT_EQUAL(drv->api->abi_minor, PRD_CLOUD_ABI_MINOR);
	CU_ASSERT_EQUAL(drv->api->instance_size, sizeof(prd_cloud_instance));
	/* Not conditional: listing and creating are two requests (issue 37,
	 * item 6); the expected target is compared best effort. */
	CU_ASSERT_EQUAL(drv->api->capabilities, PRD_CLOUD_CAP_OWNER_MARK | PRD_CLOUD_CAP_CREATION_TIME);
	CU_ASSERT_PTR_NOT_NULL(drv->api->increase);
	CU_ASSERT_PTR_NOT_NULL(drv->api->decrease_target_size_if);
}

/* Two replicas: the one that planned from target 2 is stale once another
 * writer added a Node it has not seen (neither its own count nor the
 * host's Node cache has it). Its conditional increase creates nothing and
 * says why; one planned from the real target goes through. Catches a
 * driver that compares with its cached count or the cache. */
static void test_conditional_increase(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_label la[2], lb[2];
	prd_cloud_node v[2];
	json_object *items;
	char a[64], b[64];
	start(NULL);
	CU_ASSERT_EQUAL(increase_if("general", 2, 0, 0, NULL, &e), 0);
	items = group_nodes("general");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(items), 2);
	snprintf(a, sizeof(a), "%s", name_of(json_object_array_get_idx(items, 0)));
	snprintf(b, sizeof(b), "%s", name_of(json_object_array_get_idx(items, 1)));
	json_object_put(items);
	v[0] = told(a, "general", true, la);
	v[1] = told(b, "general", true, lb);
	CU_ASSERT_EQUAL(drv->api->nodes_changed(drv->state, v, 2, 1, &e), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 2);
	other_writer_node("general-other", "general");
	/* Stale: planned from 2, the group is at 3. */
	CU_ASSERT_EQUAL(increase_if("general", 3, 0, 2, OWNER_A, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "target size is 3, not the 2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "nothing created"));
	CU_ASSERT_EQUAL(count_nodes("general"), 3);
	CU_ASSERT_EQUAL(increase_if("general", 3, 1, 2, OWNER_A, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(count_nodes("general"), 3);
	/* Planned from the real target: done. */
	CU_ASSERT_EQUAL(increase_if("general", 3, 0, 3, OWNER_A, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("general"), 6);
	/* The maximum (10) is checked against the target read afresh. */
	other_writer_node("general-other2", "general");
	CU_ASSERT_EQUAL(increase_if("general", 4, 0, 7, OWNER_A, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(count_nodes("general"), 7);
	/* Unconditional (-1) and the older entry points still work. */
	CU_ASSERT_EQUAL(increase_if("general", 1, 0, -1, NULL, &e), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	CU_ASSERT_EQUAL(drv->api->atomic_increase_size(drv->state, "general", 1, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("general"), 10);
	/* Bad requests change nothing. */
	CU_ASSERT_EQUAL(increase_if("gold", 1, 0, 0, "-bad", &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(increase_if("gold", 1, 0, 0, "has/slash", &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(increase_if("gold", 1, 0, -2, NULL, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(count_nodes("gold"), 0);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The driver's requests, through to the in-memory API; notes when the
 * first Node list of a group was made after spy_from_ms. */
static int64_t spy_from_ms, spy_list_ms;
static int spy_request(void *ud, const char *method, const char *path, const char *content_type, const char *body,
		       size_t body_len, long *status, char **resp, size_t *resp_len, prd_cloud_error *err)
{
	if(spy_from_ms && !spy_list_ms && !strcmp(method, "GET") &&
	   !strncmp(path, "/api/v1/nodes?labelSelector=provreqd.io/node-group%3D", 53))
		spy_list_ms = mono_ms();
	return cloud_host_memapi_request(ud, method, path, content_type, body, body_len, status, resp, resp_len, err);
}

/* A caller that stalls inside the call (here: an injected delay, as a
 * leader paused past its lease) must compare with the group as it is
 * when it goes on: the target is read after the delay, right before the
 * create. Catches a driver that reads it first and creates later. */
static void test_conditional_read_after_delay(void)
{
	prd_cloud_error e = {0, ""};
	prd_err pe;
	int64_t t0;
	fresh_api();
	cloud_host_init(&host, "driver/kwok", &fake, spy_request, m);
	host.host.log = capture_log;
	CU_ASSERT_EQUAL_FATAL(
		load_cfg(&pe, "templateDir: %s\nfaults:\n- {operation: increase, delayMs: 150}\n", nodegroups_dir()),
		0);
	spy_list_ms = 0;
	spy_from_ms = t0 = mono_ms();
	CU_ASSERT_EQUAL(increase_if("gold", 1, 0, 0, OWNER_A, &e), 0);
	spy_from_ms = 0;
	CU_ASSERT_NOT_EQUAL_FATAL(spy_list_ms, 0);
	CU_ASSERT_TRUE(spy_list_ms - t0 >= 150);
	CU_ASSERT_EQUAL(count_nodes("gold"), 1);
}

/* Every Node an increase creates carries its owner token, and instances()
 * reports it, whether the driver lists Nodes or is told about them;
 * Nodes made without a token, or by others, report none. Nodes fault
 * injection refused report their increase's token too: they are that
 * plan's errored instances. Catches Nodes created unmarked, a view that
 * drops the label, and a token not reported. */
static void test_owner_marks(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_label lab[8][3];
	prd_cloud_node v[8];
	json_object *items;
	size_t i, n, marked = 0;
	start("faults:\n- {operation: increase, group: gpu, succeed: 1}\n");
	CU_ASSERT_EQUAL(increase_if("general", 2, 0, 0, OWNER_A, &e), 0);
	CU_ASSERT_EQUAL(increase_if("general", 1, 1, 2, OWNER_B, &e), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	other_writer_node("general-other", "general");
	items = group_nodes("general");
	n = json_object_array_length(items);
	CU_ASSERT_EQUAL_FATAL(n, 5);
	for(i = 0; i < n; i++) {
		const char *o = path_str(json_object_array_get_idx(items, i), "metadata", "labels", "provreqd.io/owner");
		marked += o && !strcmp(o, OWNER_A);
	}
	CU_ASSERT_EQUAL(marked, 2);
	CU_ASSERT_EQUAL(owned_by("general", OWNER_A, NULL, NULL), 2);
	CU_ASSERT_EQUAL(owned_by("general", OWNER_B, NULL, NULL), 1);
	CU_ASSERT_EQUAL(owned_by("general", NULL, NULL, NULL), 2);
	/* Told about the Nodes (with their labels, as the host's cache has
	 * them), the driver reports the same. */
	for(i = 0; i < n; i++) {
		json_object *node = json_object_array_get_idx(items, i);
		const char *o = path_str(node, "metadata", "labels", "provreqd.io/owner");
		v[i] = told(name_of(node), "general", true, lab[i]);
		if(o) {
			lab[i][2].key = "provreqd.io/owner";
			lab[i][2].value = o;
			v[i].nlabels = 3;
		}
	}
	CU_ASSERT_EQUAL(drv->api->nodes_changed(drv->state, v, n, 1, &e), 0);
	CU_ASSERT_EQUAL(owned_by("general", OWNER_A, NULL, NULL), 2);
	CU_ASSERT_EQUAL(owned_by("general", OWNER_B, NULL, NULL), 1);
	CU_ASSERT_EQUAL(owned_by("general", NULL, NULL, NULL), 2);
	json_object_put(items);
	/* One of two created, one refused: both are OWNER_A's. */
	CU_ASSERT_EQUAL(increase_if("gpu", 2, 0, 0, OWNER_A, &e), 0);
	CU_ASSERT_EQUAL(instances_of("gpu").oor, 1);
	CU_ASSERT_EQUAL(owned_by("gpu", OWNER_A, NULL, NULL), 2);
}

/* Asynchronous cloud: an instance reports its increase's token from the
 * moment it appears, before it has a Node, and after its Node registered
 * (the Node carries the label); its creation time is the increase's until
 * then, and the Node's creationTimestamp after. Catches a state file that
 * does not keep the token. */
static void test_owner_async(void)
{
	char state[600], cfg[1200];
	prd_cloud_error e = {0, ""};
	json_object *items;
	int64_t created = -1;
	async_view av;
	snprintf(state, sizeof(state), "%s/kwok-async-owner-%d.json", test_tmpdir(), rand());
	async_cfg(cfg, sizeof(cfg), state, NULL);
	start(cfg);
	CU_ASSERT_EQUAL(increase_if("general", 2, 0, 0, OWNER_A, &e), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	clk_fake_advance(&fake, 1100 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL_FATAL(av.n, 3);
	CU_ASSERT_EQUAL(av.nameless, 3);
	CU_ASSERT_EQUAL(owned_by("general", OWNER_A, NULL, NULL), 2);
	CU_ASSERT_EQUAL(owned_by("general", NULL, NULL, NULL), 1);
	owned_by("general", OWNER_A, av.ids[0], &created);
	CU_ASSERT_EQUAL(created, T0_NS);
	clk_fake_advance(&fake, 2000 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(async_list("general", &av), 0);
	CU_ASSERT_EQUAL(av.nameless, 0);
	CU_ASSERT_EQUAL(owned_by("general", OWNER_A, NULL, NULL), 2);
	items = group_nodes("general");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(items), 3);
	{
		json_object *node = json_object_array_get_idx(items, 0);
		created = -1;
		owned_by("general", NULL, name_of(node), &created);
		CU_ASSERT_EQUAL(created, T0_NS + 3 * PRD_NS_PER_SEC); /* registered at 3.1 s; seconds kept */
	}
	json_object_put(items);
	unlink(state);
}

/* instances() reports when each Node was created (its creationTimestamp),
 * listing or told; told about a Node it did not create, the driver
 * learns the time with one list. Catches created_ns left 0. */
static void test_creation_times(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_label lab[3][2];
	prd_cloud_node v[3];
	json_object *items;
	int64_t created;
	char first[64], second[64];
	start(NULL);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	items = group_nodes("general");
	snprintf(first, sizeof(first), "%s", name_of(json_object_array_get_idx(items, 0)));
	json_object_put(items);
	clk_fake_advance(&fake, 10 * PRD_NS_PER_SEC);
	other_writer_node("general-other", "general");
	created = -1;
	owned_by("general", NULL, first, &created);
	CU_ASSERT_EQUAL(created, T0_NS);
	owned_by("general", NULL, "general-other", &created);
	CU_ASSERT_EQUAL(created, T0_NS + 10 * PRD_NS_PER_SEC);
	/* Told: the cache gives no times. */
	v[0] = told(first, "general", true, lab[0]);
	v[1] = told("general-other", "general", true, lab[1]);
	CU_ASSERT_EQUAL(drv->api->nodes_changed(drv->state, v, 2, 1, &e), 0);
	clk_fake_advance(&fake, 10 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 1, &e), 0);
	items = group_nodes("general");
	for(size_t i = 0; i < json_object_array_length(items); i++) {
		const char *nm = name_of(json_object_array_get_idx(items, i));
		if(strcmp(nm, first) && strcmp(nm, "general-other"))
			snprintf(second, sizeof(second), "%s", nm);
	}
	json_object_put(items);
	created = -1;
	owned_by("general", NULL, first, &created);
	CU_ASSERT_EQUAL(created, T0_NS);
	owned_by("general", NULL, "general-other", &created);
	CU_ASSERT_EQUAL(created, T0_NS + 10 * PRD_NS_PER_SEC);
	owned_by("general", NULL, second, &created);
	CU_ASSERT_EQUAL(created, T0_NS + 20 * PRD_NS_PER_SEC);
}

/* decrease_target_size_if cancels only when the target is what the caller
 * planned from, read afresh: a Node another writer added makes it refuse
 * and cancel nothing. Catches a decrease that is not conditional. */
static void test_conditional_decrease(void)
{
	char state[600], cfg[1200];
	prd_cloud_error e = {0, ""};
	start("faults:\n- {operation: increase, group: general, succeed: 2}\n");
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->decrease_target_size_if);
	CU_ASSERT_EQUAL(increase_if("general", 5, 0, 0, OWNER_A, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 5);
	other_writer_node("general-other", "general");
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, "general", 2, 5, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "nothing cancelled"));
	CU_ASSERT_EQUAL(instances_of("general").oor, 3);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, "general", 2, 6, &e), 0);
	CU_ASSERT_EQUAL(instances_of("general").oor, 1);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, "general", 1, -1, &e), 0);
	CU_ASSERT_EQUAL(instances_of("general").oor, 0);

	/* Asynchronous: instances not created yet are cancelled only when the
	 * target is as planned. */
	snprintf(state, sizeof(state), "%s/kwok-async-dec-%d.json", test_tmpdir(), rand());
	async_cfg(cfg, sizeof(cfg), state, NULL);
	start(cfg);
	CU_ASSERT_EQUAL(increase_if("general", 3, 0, 0, OWNER_A, &e), 0);
	other_writer_node("general-other", "general");
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, "general", 2, 3, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 4);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, "general", 2, 4, &e), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 2);
	unlink(state);
}

/* Two replicas sharing one asynchronous cloud (its state file): the
 * first asks for 3; the second, whose view still says 0, asks for 3 more
 * on that plan: refused, nothing asked for. What the instances without a
 * Node count is read under the state file's lock, not from the last
 * refresh. */
static void test_conditional_async_two_replicas(void)
{
	char state[600], cfg[1200], full[2600];
	prd_cloud_error e = {0, ""};
	cloud_drivers other;
	cloud_driver *d2 = NULL;
	prd_cloud_increase req;
	prd_err pe;
	snprintf(state, sizeof(state), "%s/kwok-async-2r-%d.json", test_tmpdir(), rand());
	async_cfg(cfg, sizeof(cfg), state, NULL);
	start(cfg);
	snprintf(full, sizeof(full), "templateDir: %s\n%s", nodegroups_dir(), cfg);
	cloud_drivers_init(&other);
	CU_ASSERT_EQUAL_FATAL(cloud_drivers_load(&other, module_path(), &host.host, full, &d2, &pe), 0);
	CU_ASSERT_EQUAL(d2->api->refresh(d2->state, &e), 0);
	CU_ASSERT_EQUAL(increase_if("general", 3, 0, 0, OWNER_A, &e), 0);
	memset(&req, 0, sizeof(req));
	req.struct_size = sizeof(req);
	req.group_id = "general";
	req.delta = 3;
	req.expected_target = 0;
	req.owner = OWNER_B;
	CU_ASSERT_EQUAL(d2->api->increase(d2->state, &req, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "target size is 3, not the 0"));
	CU_ASSERT_EQUAL(d2->api->refresh(d2->state, &e), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 3);
	clk_fake_advance(&fake, 1100 * PRD_NS_PER_MS);
	CU_ASSERT_EQUAL(owned_by("general", OWNER_B, NULL, NULL), 0);
	CU_ASSERT_EQUAL(owned_by("general", OWNER_A, NULL, NULL), 3);
	req.expected_target = 3;
	CU_ASSERT_EQUAL(d2->api->increase(d2->state, &req, &e), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(target_of("general"), 6);
	cloud_drivers_free(&other);
	unlink(state);
}

/* A fence that closes after `fence_left` more answers of yes. */
static int fence_left;
static int fence_countdown(void *ud)
{
	(void)ud;
	return fence_left-- > 0;
}

/* The host's lease lapses in the middle of a 5-Node increase (a pause
 * longer than the lease). Broken driver caught: one that goes on creating
 * Nodes once the process resumes (a stale leader's call completes, the
 * group ends up with more than one plan asked for). */
static void test_increase_stops_when_the_host_may_not_act(void)
{
	prd_cloud_error e = {0, ""};
	start(NULL);
	fence_left = 2;
	cloud_host_set_fence(&host, fence_countdown, NULL);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 5, &e), PRD_CLOUD_EAGAIN);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "may no longer act"));
	CU_ASSERT_EQUAL(count_nodes("general"), 2);
	CU_ASSERT_EQUAL(target_of("general"), 2);
	cloud_host_set_fence(&host, NULL, NULL);
}

/* ABI 1.5: shapes, and the groups create_group makes, kept in the groups
 * ConfigMap: listed at once, again by a new driver instance (a restarted
 * provreqd), owned by the token they were made with, deleted only when
 * empty. Broken driver caught: one that keeps its groups in memory (the
 * restarted instance would not list the group, and provreqd would lose
 * track of what it made), or deletes a group that still has nodes. */
static void test_auto_provisioned_groups(void)
{
	static const char nap[] =
		"autoProvisioning:\n"
		"  groupsConfigMap: kube-system/kwok-groups\n"
		"  shapes:\n"
		"  - {name: big, capacity: {cpu: \"32\", memory: 128Gi, pods: \"110\"}, zones: [za, zb],\n"
		"     pricePerHour: \"2.25\", maxSize: 5}\n";
	prd_cloud_shape *sv = NULL;
	prd_cloud_error e;
	prd_err pe;
	size_t n = 0;
	char *owner = NULL, *tj = NULL;
	prd_cloud_label lab[] = { { "team", "ml" } };
	prd_cloud_taint tnt[] = { { "team", "ml", "NoSchedule" } };
	prd_cloud_group_create rq;
	memset(&e, 0, sizeof(e));
	start(nap);
	CU_ASSERT_TRUE_FATAL(cloud_driver_naps(drv->api));
	CU_ASSERT_EQUAL_FATAL(drv->api->shapes(drv->state, &sv, &n, &e), 0);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(sv[0].name, "big");
	CU_ASSERT_STRING_EQUAL(sv[0].zones, "za,zb");
	CU_ASSERT_EQUAL(sv[0].price_micros, 2250000);
	CU_ASSERT_EQUAL(sv[0].max_size, 5);
	drv->api->release_shapes(drv->state, sv, n);

	memset(&rq, 0, sizeof(rq));
	rq.struct_size = sizeof(rq);
	rq.group_id = "nap-big-0001";
	rq.shape = "big";
	rq.zone = "zb";
	rq.labels = lab;
	rq.nlabels = 1;
	rq.taints = tnt;
	rq.ntaints = 1;
	rq.max_size = 3;
	rq.owner = "plan.one";
	CU_ASSERT_EQUAL(drv->api->create_group(drv->state, &rq, &e), 0);
	/* Repeated: no error; another owner: a conflict. */
	CU_ASSERT_EQUAL(drv->api->create_group(drv->state, &rq, &e), 0);
	rq.owner = "plan.two";
	CU_ASSERT_EQUAL(drv->api->create_group(drv->state, &rq, &e), PRD_CLOUD_ECONFLICT);
	rq.owner = "plan.one";
	/* What a cloud may not set, and a zone the shape is not in. */
	rq.group_id = "nap-big-0002";
	lab[0].key = "node-role.kubernetes.io/gpu";
	CU_ASSERT_EQUAL(drv->api->create_group(drv->state, &rq, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "node-role.kubernetes.io/gpu"));
	lab[0].key = "team";
	rq.zone = "zc";
	CU_ASSERT_EQUAL(drv->api->create_group(drv->state, &rq, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "zone zc"));

	CU_ASSERT_EQUAL(drv->api->group_owner(drv->state, "nap-big-0001", &owner, &e), 0);
	CU_ASSERT_STRING_EQUAL(owner ? owner : "", "plan.one");
	drv->api->release_string(drv->state, owner);
	CU_ASSERT_EQUAL(drv->api->group_owner(drv->state, "general", &owner, &e), 0);
	CU_ASSERT_PTR_NULL(owner);
	CU_ASSERT_EQUAL(drv->api->template_node(drv->state, "nap-big-0001", &tj, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(tj ? tj : "", "\"team\":\"ml\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(tj ? tj : "", "\"topology.kubernetes.io/zone\":\"zb\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(tj ? tj : "", "NoSchedule"));
	drv->api->release_string(drv->state, tj);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "nap-big-0001", 2, &e), 0);
	CU_ASSERT_EQUAL(count_nodes("nap-big-0001"), 2);

	/* A new instance of the driver (provreqd restarted) on the same API. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	CU_ASSERT_EQUAL_FATAL(load_cfg(&pe, "templateDir: %s\n%s", nodegroups_dir(), nap), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	{
		prd_cloud_node_group *g = NULL;
		size_t k, ng = 0;
		int found = 0;
		CU_ASSERT_EQUAL_FATAL(drv->api->node_groups(drv->state, &g, &ng, &e), 0);
		for(k = 0; k < ng; k++)
			if(!strcmp(g[k].id, "nap-big-0001")) {
				found = 1;
				CU_ASSERT_EQUAL(g[k].min_size, 0);
				CU_ASSERT_EQUAL(g[k].max_size, 3);
				CU_ASSERT_EQUAL(g[k].target_size, 2);
			}
		CU_ASSERT_TRUE(found);
		drv->api->release_node_groups(drv->state, g, ng);
	}
	CU_ASSERT_EQUAL(drv->api->group_owner(drv->state, "nap-big-0001", &owner, &e), 0);
	CU_ASSERT_STRING_EQUAL(owner ? owner : "", "plan.one");
	drv->api->release_string(drv->state, owner);
	/* Not empty: not deleted. A template group: never. */
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-big-0001", &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "general", &e), PRD_CLOUD_EINVAL);
	{
		prd_cloud_instance *v = NULL;
		size_t ni = 0, k;
		const char *ids[4];
		CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, "nap-big-0001", &v, &ni, &e), 0);
		for(k = 0; k < ni && k < 4; k++)
			ids[k] = v[k].id;
		CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, "nap-big-0001", ids, ni, &e), 0);
		drv->api->release_instances(drv->state, v, ni);
	}
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-big-0001", &e), 0);
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-big-0001", &e), 0); /* gone: no error */
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(drv->api->group_owner(drv->state, "nap-big-0001", &owner, &e), PRD_CLOUD_ENOTFOUND);
	/* A bad configuration says what is wrong. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	CU_ASSERT_NOT_EQUAL(load_cfg(&pe, "templateDir: %s\nautoProvisioning: {shapes: []}\n", nodegroups_dir()), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "groupsConfigMap"));
	teardown();
}

/* Node creates in flight at once, as the host saw them. */
static pthread_mutex_t par_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t par_cv = PTHREAD_COND_INITIALIZER;
static int par_inflight, par_max, par_posts, par_want;
static bool par_released;

/* The in-memory API, counting the Node creates in flight. The first ones
 * are held until `par_want` are in flight together, so a driver that
 * creates in parallel shows it whatever the machine's timing; a driver
 * that sends one at a time never gets there, and its first create goes
 * on after a safety wait (not a time the test asserts anything on). */
static int counting_request(void *ud, const char *method, const char *path, const char *content_type,
			    const char *body, size_t body_len, long *http_status, char **resp_body, size_t *resp_len,
			    prd_cloud_error *err)
{
	bool post = !strcmp(method, "POST") && !strcmp(path, "/api/v1/nodes");
	int rc;
	if(post) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 20;
		pthread_mutex_lock(&par_mu);
		par_posts++;
		if(++par_inflight > par_max)
			par_max = par_inflight;
		while(!par_released && par_inflight < par_want &&
		      pthread_cond_timedwait(&par_cv, &par_mu, &until) == 0)
			;
		par_released = true;
		pthread_cond_broadcast(&par_cv);
		pthread_mutex_unlock(&par_mu);
	}
	rc = cloud_host_memapi_request(ud, method, path, content_type, body, body_len, http_status, resp_body, resp_len,
				       err);
	if(post) {
		pthread_mutex_lock(&par_mu);
		par_inflight--;
		pthread_mutex_unlock(&par_mu);
	}
	return rc;
}

/* An increase creates its Nodes createParallelism at a time, never more.
 * Broken drivers caught: one that creates one Node after another (a
 * 1,000-node increase took 27 s of round trips), and one that sends them
 * all at once, unbounded. */
static void test_parallel_creates(void)
{
	prd_cloud_error e = {0, ""};
	prd_err pe;
	json_object *items;
	size_t i, n;
	fresh_api();
	cloud_host_init(&host, "driver/kwok", &fake, counting_request, m);
	par_inflight = par_max = par_posts = 0;
	par_want = 4;
	par_released = false;
	CU_ASSERT_EQUAL_FATAL(load_cfg(&pe, "templateDir: %s\ncreateParallelism: 4\n", nodegroups_dir()), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "general", 10, &e), 0);
	CU_ASSERT_EQUAL(par_posts, 10);
	CU_ASSERT_EQUAL(par_max, 4);
	CU_ASSERT_EQUAL(count_nodes("general"), 10);
	CU_ASSERT_EQUAL(target_of("general"), 10);
	/* Ten different Nodes (listed in name order). */
	items = group_nodes("general");
	n = items ? json_object_array_length(items) : 0;
	CU_ASSERT_EQUAL(n, 10);
	for(i = 1; i < n; i++)
		CU_ASSERT_STRING_NOT_EQUAL(
			json_object_get_string(json_object_object_get(
				json_object_object_get(json_object_array_get_idx(items, i), "metadata"), "name")),
			json_object_get_string(json_object_object_get(
				json_object_object_get(json_object_array_get_idx(items, i - 1), "metadata"), "name")));
	json_object_put(items);
	/* Out of range. */
	fresh_api();
	CU_ASSERT_NOT_EQUAL(load_cfg(&pe, "templateDir: %s\ncreateParallelism: 0\n", nodegroups_dir()), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "createParallelism"));
}

/* nameSeed: the same seed draws the same Node names in a fresh world (what
 * the deterministic simulation replays a seed by); another seed others. */
static void names_for_seed(const char *seed, char out[3][64])
{
	prd_cloud_error e = {0, ""};
	json_object *items;
	size_t i;
	char cfg[64];
	snprintf(cfg, sizeof(cfg), "createParallelism: 1\nnameSeed: %s\n", seed);
	start(cfg);
	CU_ASSERT_EQUAL_FATAL(drv->api->increase_size(drv->state, "general", 3, &e), 0);
	items = group_nodes("general");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(items), 3);
	for(i = 0; i < 3; i++)
		snprintf(out[i], 64, "%s", name_of(json_object_array_get_idx(items, i)));
	json_object_put(items);
}

static void test_name_seed(void)
{
	char a[3][64], b[3][64], c[3][64];
	prd_err e;
	size_t i;
	names_for_seed("42", a);
	names_for_seed("42", b);
	names_for_seed("43", c);
	for(i = 0; i < 3; i++) {
		CU_ASSERT_STRING_EQUAL(a[i], b[i]);
		CU_ASSERT_STRING_NOT_EQUAL(a[i], c[i]);
		CU_ASSERT_EQUAL(strncmp(a[i], "general-", 8), 0);
	}
	fresh_api();
	CU_ASSERT_EQUAL(load_cfg(&e, "templateDir: %s\nnameSeed: -1\n", nodegroups_dir()), PRD_CLOUD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "nameSeed must be an integer >= 0"));
	teardown();
}

static const test_case cases[] = {
	{ "auto-provisioned groups (ABI 1.5)", test_auto_provisioned_groups },
	{ "an increase stops when the host may no longer act", test_increase_stops_when_the_host_may_not_act },
	{ "resourceSlices of a node group", test_resource_slices },
	{ "an increase creates its Nodes in parallel, bounded", test_parallel_creates },
	{"increase creates nodes from the template", test_increase_creates_nodes},
	{"nameSeed replays Node names", test_name_seed},
	{"instance states follow the Nodes", test_instances_states},
	{"delete removes exactly the named nodes", test_delete_exact},
	{"min and max are enforced", test_min_max},
	{"fault: fail", test_fault_fail},
	{"fault: partial success", test_fault_partial},
	{"fault: delay", test_fault_delay},
	{"atomic increase is all or none", test_atomic},
	{"ConfigMap templates and initial size", test_configmap_and_initial},
	{"node_group_for_node and template_node", test_node_group_for_node_and_template},
	{"bad config and templates", test_bad_config},
	{"refresh", test_refresh},
	{"refresh re-reads changed templates", test_refresh_rereads_changed_templates},
	{"refresh sees added and removed templates", test_refresh_sees_added_and_removed_templates},
	{"no apiserver", test_no_apiserver},
	{"asynchronous cloud", test_async_cloud},
	{"told about Nodes", test_nodes_changed},
	{"the view's groups follow their Nodes", test_view_groups},
	{"ABI 1.3 descriptor", test_abi13_descriptor},
	{"a stale conditional increase creates nothing", test_conditional_increase},
	{"the conditional target is read after a stall", test_conditional_read_after_delay},
	{"created Nodes carry their owner token", test_owner_marks},
	{"async instances report their owner token", test_owner_async},
	{"instances report creation times", test_creation_times},
	{"a stale conditional decrease cancels nothing", test_conditional_decrease},
	{"two replicas on one async cloud", test_conditional_async_two_replicas},
	{NULL, NULL}};

int main(void)
{
	int rc = test_run("kwok driver", cases);
	teardown();
	return rc;
}

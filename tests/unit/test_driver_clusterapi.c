/* The clusterapi driver, loaded from its built module through the loader,
 * against the in-memory API taught the Cluster API kinds (with the scale
 * subresource). */
#include "testutil.h"
#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/memapi.h"
#include "test_kube_fakesrv.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static memapi *m;
static clk fake;
static cloud_host_impl host;
static cloud_drivers set;
static cloud_driver *drv;
static char logbuf[16384];
/* The management-cluster tests: `m` is served over HTTP as the management
 * cluster, `wl` is the workload cluster the host talks to. */
static fake_srv *mgmt_srv;
static memapi *wl;

#define CAPI "/apis/cluster.x-k8s.io/v1beta1"
#define MIN_ANN "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
#define MAX_ANN "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
#define CAP "capacity.cluster-autoscaler.kubernetes.io/"

static const kube_resource MDS = {"cluster.x-k8s.io", "v1beta1", "machinedeployments", "MachineDeployment", true};
static const kube_resource MSS = {"cluster.x-k8s.io", "v1beta1", "machinesets", "MachineSet", true};
static const kube_resource MPS = {"cluster.x-k8s.io", "v1beta1", "machinepools", "MachinePool", true};
static const kube_resource MACHINES = {"cluster.x-k8s.io", "v1beta1", "machines", "Machine", true};

static const char *module_path(void)
{
	static char path[1024];
	const char *b = getenv("PRD_BUILDDIR");
	snprintf(path, sizeof(path), "%s/cloud/clusterapi/.libs/clusterapi.so", b ? b : ".");
	return path;
}

/* Also called from the driver's watch threads (the host's log may be
 * called from any thread). */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static void capture_log(void *ctx, int level, const char *message)
{
	size_t len;
	(void)ctx;
	pthread_mutex_lock(&log_mu);
	len = strlen(logbuf);
	snprintf(logbuf + len, sizeof(logbuf) - len, "%d %s\n", level, message);
	pthread_mutex_unlock(&log_mu);
}

static void teardown(void)
{
	cloud_drivers_free(&set);
	drv = NULL;
	if(mgmt_srv)
		fake_stop(mgmt_srv);
	mgmt_srv = NULL;
	memapi_free(wl);
	wl = NULL;
	memapi_free(m);
	m = NULL;
}

static void fresh_api(void)
{
	teardown();
	clk_fake_init(&fake, 1714557600LL * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL_FATAL(memapi_new(&fake, 0, &m), 0);
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &MDS, MEMAPI_STATUS | MEMAPI_GENERATION | MEMAPI_SCALE), 0);
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &MSS, MEMAPI_STATUS | MEMAPI_GENERATION | MEMAPI_SCALE), 0);
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &MPS, MEMAPI_STATUS | MEMAPI_GENERATION | MEMAPI_SCALE), 0);
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &MACHINES, MEMAPI_STATUS | MEMAPI_GENERATION), 0);
	cloud_host_init(&host, "driver/clusterapi", &fake, cloud_host_memapi_request, m);
	host.host.log = capture_log;
	logbuf[0] = '\0';
	cloud_drivers_init(&set);
}

static json_object *api(const char *method, const char *path, const char *body, long *status)
{
	char *resp = NULL;
	size_t len = 0;
	long st = 0;
	json_object *o;
	memapi_request(m, method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0, &st, &resp,
		       &len);
	if(status)
		*status = st;
	o = resp ? json_tokener_parse(resp) : NULL;
	free(resp);
	return o;
}

/* POST a printf-formatted object to a collection; it must be created. */
static void create(const char *collection, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void create(const char *collection, const char *fmt, ...)
{
	char body[4096];
	long st;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	json_object_put(api("POST", collection, body, &st));
	if(st != 201)
		fprintf(stderr, "\ncreate %s: %ld for %s\n", collection, st, body);
	CU_ASSERT_EQUAL_FATAL(st, 201);
}

static void load(const char *config)
{
	prd_err e;
	int rc;
	prd_err_clear(&e);
	rc = cloud_drivers_load(&set, module_path(), &host.host, config, &drv, &e);
	if(rc)
		fprintf(stderr, "\nload: %s\n", e.msg);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static int group_sizes(const char *id, int32_t *min, int32_t *max, int32_t *target)
{
	prd_cloud_node_group *g = NULL;
	size_t n = 0, i;
	int found = 0;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->node_groups(drv->state, &g, &n, &e), 0);
	for(i = 0; i < n; i++) {
		if(!strcmp(g[i].id, id)) {
			found = 1;
			if(min)
				*min = g[i].min_size;
			if(max)
				*max = g[i].max_size;
			if(target)
				*target = g[i].target_size;
		}
	}
	drv->api->release_node_groups(drv->state, g, n);
	return found;
}

static size_t group_count(void)
{
	prd_cloud_node_group *g = NULL;
	size_t n = 0;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->node_groups(drv->state, &g, &n, &e), 0);
	drv->api->release_node_groups(drv->state, g, n);
	return n;
}

/* spec.replicas of an object as stored (-1 when absent). */
static int64_t stored_replicas(const char *plural, const char *name)
{
	char path[512];
	json_object *o, *r;
	int64_t v = -1;
	snprintf(path, sizeof(path), CAPI "/namespaces/ns1/%s/%s", plural, name);
	o = api("GET", path, NULL, NULL);
	if(json_object_object_get_ex(json_object_object_get(o, "spec"), "replicas", &r))
		v = json_object_get_int64(r);
	json_object_put(o);
	return v;
}

/* The delete-machine annotation of a Machine, or NULL (static buffer). */
static const char *delete_mark(const char *machine)
{
	static char buf[128];
	char path[512];
	json_object *o, *v;
	const char *r = NULL;
	snprintf(path, sizeof(path), CAPI "/namespaces/ns1/machines/%s", machine);
	o = api("GET", path, NULL, NULL);
	v = json_object_object_get(json_object_object_get(json_object_object_get(o, "metadata"), "annotations"),
				   "cluster.x-k8s.io/delete-machine");
	if(v) {
		snprintf(buf, sizeof(buf), "%s", json_object_get_string(v));
		r = buf;
	}
	json_object_put(o);
	return r;
}

static void md(const char *name, const char *annotations, int replicas)
{
	create(CAPI "/namespaces/ns1/machinedeployments",
	       "{\"metadata\":{\"name\":\"%s\",\"annotations\":{%s}},\"spec\":{\"clusterName\":\"c1\",\"replicas\":%d,"
	       "\"selector\":{\"matchLabels\":{\"cluster.x-k8s.io/deployment-name\":\"%s\"}}}}",
	       name, annotations, replicas, name);
}

/* A Machine of MachineDeployment `owner` with a Node (NULL: none yet) and
 * extra status members (may be ""). */
static void machine(const char *name, const char *owner, const char *node, const char *extra_status)
{
	char noderef[256] = "";
	if(node)
		snprintf(noderef, sizeof(noderef), "\"nodeRef\":{\"kind\":\"Node\",\"name\":\"%s\"}", node);
	create(CAPI "/namespaces/ns1/machines",
	       "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"cluster.x-k8s.io/deployment-name\":\"%s\","
	       "\"cluster.x-k8s.io/cluster-name\":\"c1\"}},\"spec\":{\"clusterName\":\"c1\"%s%s%s},"
	       "\"status\":{%s%s%s}}",
	       name, owner, node ? ",\"providerID\":\"test://" : "", node ? node : "", node ? "\"" : "", noderef,
	       node && extra_status[0] ? "," : "", extra_status);
}

#define SIZES(min, max) "\"" MIN_ANN "\":\"" min "\",\"" MAX_ANN "\":\"" max "\""

static void test_discovery(void)
{
	int32_t min = -1, max = -1, target = -1;
	fresh_api();
	md("md-a", SIZES("0", "5"), 2);
	md("md-nomax", "\"" MIN_ANN "\":\"1\"", 1);
	md("md-none", "", 1);
	md("md-badmin", SIZES("abc", "5"), 1);
	md("md-inverted", SIZES("4", "2"), 3);
	/* A MachineSet owned by a MachineDeployment is not a group of its own. */
	create(CAPI "/namespaces/ns1/machinesets",
	       "{\"metadata\":{\"name\":\"md-a-xyz\",\"annotations\":{" SIZES("0", "5") "},"
	       "\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"MachineDeployment\","
	       "\"name\":\"md-a\",\"uid\":\"u1\"}]},\"spec\":{\"clusterName\":\"c1\",\"replicas\":2}}");
	create(CAPI "/namespaces/ns1/machinesets",
	       "{\"metadata\":{\"name\":\"ms-alone\",\"annotations\":{" SIZES("1", "3") "}},"
	       "\"spec\":{\"clusterName\":\"c1\",\"replicas\":1}}");
	create(CAPI "/namespaces/ns1/machinepools",
	       "{\"metadata\":{\"name\":\"mp\",\"annotations\":{" SIZES("0", "7") "}},"
	       "\"spec\":{\"clusterName\":\"c2\",\"replicas\":0,\"providerIDList\":[]}}");
	load(NULL);
	CU_ASSERT_EQUAL(group_count(), 3);
	CU_ASSERT_TRUE(group_sizes("MachineDeployment/ns1/md-a", &min, &max, &target));
	CU_ASSERT_EQUAL(min, 0);
	CU_ASSERT_EQUAL(max, 5);
	CU_ASSERT_EQUAL(target, 2);
	CU_ASSERT_TRUE(group_sizes("MachineSet/ns1/ms-alone", &min, &max, &target));
	CU_ASSERT_EQUAL(min, 1);
	CU_ASSERT_EQUAL(target, 1);
	CU_ASSERT_TRUE(group_sizes("MachinePool/ns1/mp", &min, &max, &target));
	CU_ASSERT_EQUAL(max, 7);
	CU_ASSERT_EQUAL(target, 0);
	CU_ASSERT_FALSE(group_sizes("MachineDeployment/ns1/md-nomax", NULL, NULL, NULL));
	CU_ASSERT_FALSE(group_sizes("MachineSet/ns1/md-a-xyz", NULL, NULL, NULL));
	/* Bad values are reported, naming the object, the annotation and the value. */
	CU_ASSERT_PTR_NOT_NULL(strstr(logbuf, "MachineDeployment ns1/md-badmin is not a node group: " MIN_ANN
					      "='abc' is not a non-negative integer"));
	CU_ASSERT_PTR_NOT_NULL(strstr(logbuf, "MachineDeployment ns1/md-inverted is not a node group: max size 2 is "
					      "below min size 4"));
	/* A clusterName filter keeps only that cluster's groups. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	load("clusterName: c2\n");
	CU_ASSERT_EQUAL(group_count(), 1);
	CU_ASSERT_TRUE(group_sizes("MachinePool/ns1/mp", NULL, NULL, NULL));
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	load("namespace: other\n");
	CU_ASSERT_EQUAL(group_count(), 0);
}

static void test_bad_config(void)
{
	static const char *const cases[][2] = {
		{"cluster: x\n", "unknown key 'cluster'"},
		{"namespace: Not_A_Label\n", "namespace must be a DNS label"},
		{"- a\n", "must be a YAML mapping"},
		{"namespace: [x\n", "clusterapi config: line"},
	};
	size_t i;
	fresh_api();
	for(i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		prd_err e;
		prd_err_clear(&e);
		CU_ASSERT_EQUAL(cloud_drivers_load(&set, module_path(), &host.host, cases[i][0], NULL, &e), PRD_EINVAL);
		if(!strstr(e.msg, cases[i][1])) {
			fprintf(stderr, "\nwanted '%s' in: %s\n", cases[i][1], e.msg);
			CU_FAIL("config error message");
		}
	}
	CU_ASSERT_EQUAL(set.n, 0);
}

static void test_replicas(void)
{
	prd_cloud_error e = {0, ""};
	int32_t target = -1;
	const char *id = "MachineDeployment/ns1/md-a";
	fresh_api();
	md("md-a", SIZES("0", "5"), 1);
	machine("m-1", "md-a", "node-1", "");
	load(NULL);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, id, 3, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	CU_ASSERT_TRUE(group_sizes(id, NULL, NULL, &target));
	CU_ASSERT_EQUAL(target, 4);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, id, 2, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "would exceed its maximum size 5"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, id, 0, &e), PRD_CLOUD_EINVAL);
	/* Decrease cancels replicas without Machines, never below them. */
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, id, 3, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 1);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, id, 1, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "below its 1 existing Machines"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 1);
	/* To zero and back from zero. */
	md("md-z", SIZES("0", "3"), 1);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, "MachineDeployment/ns1/md-z", 1, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-z"), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_TRUE(group_sizes("MachineDeployment/ns1/md-z", NULL, NULL, &target));
	CU_ASSERT_EQUAL(target, 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "MachineDeployment/ns1/md-z", 2, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-z"), 2);
	/* MachineSets and MachinePools scale the same way. */
	create(CAPI "/namespaces/ns1/machinepools",
	       "{\"metadata\":{\"name\":\"mp\",\"annotations\":{" SIZES("0", "7") "}},\"spec\":{\"replicas\":0}}");
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "MachinePool/ns1/mp", 7, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinepools", "mp"), 7);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "nope", 1, &e), PRD_CLOUD_ENOTFOUND);
	/* The scale call failing is passed on. */
	memapi_inject_fault(m, "PATCH", CAPI "/namespaces/ns1/machinedeployments/md-z/scale", 503, 1);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, "MachineDeployment/ns1/md-z", 1, &e), PRD_CLOUD_EAGAIN);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-z"), 2);
}

static void test_delete_nodes(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a", *names[2];
	fresh_api();
	md("md-a", SIZES("1", "5"), 3);
	md("md-b", SIZES("0", "5"), 1);
	machine("m-1", "md-a", "node-1", "");
	machine("m-2", "md-a", "node-2", "");
	machine("m-3", "md-a", "node-3", "");
	machine("m-b", "md-b", "node-b", "");
	load(NULL);
	names[0] = "node-2";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 1, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-2"));
	CU_ASSERT_STRING_EQUAL(delete_mark("m-2"), "2024-05-01T10:00:00Z");
	CU_ASSERT_PTR_NULL(delete_mark("m-1"));
	CU_ASSERT_PTR_NULL(delete_mark("m-3"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);

	/* The scale call fails: the mark is removed again, replicas stay. */
	memapi_inject_fault(m, "PUT", CAPI "/namespaces/ns1/machinedeployments/md-a/scale", 500, 1);
	names[0] = "node-3";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 1, &e), PRD_CLOUD_EAGAIN);
	CU_ASSERT_PTR_NULL(delete_mark("m-3"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-2")); /* the earlier, successful one stays */

	/* A node of another group: refused, nothing marked. */
	names[0] = "node-3";
	names[1] = "node-b";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 2, &e), PRD_CLOUD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "has no Machine for node node-b"));
	CU_ASSERT_PTR_NULL(delete_mark("m-3"));
	CU_ASSERT_PTR_NULL(delete_mark("m-b"));
	/* Below the minimum (1): replicas 2, deleting 2 is refused. */
	names[0] = "node-1";
	names[1] = "node-3";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 2, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "below its minimum size 1"));
	CU_ASSERT_PTR_NULL(delete_mark("m-1"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	/* Marking a Machine failing: nothing scaled. */
	memapi_inject_fault(m, "PATCH", CAPI "/namespaces/ns1/machines/m-b", 500, 1);
	names[0] = "node-b";
	CU_ASSERT_NOT_EQUAL(drv->api->delete_nodes(drv->state, "MachineDeployment/ns1/md-b", names, 1, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-b"), 1);
	CU_ASSERT_PTR_NULL(delete_mark("m-b"));
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "MachineDeployment/ns1/md-b", names, 1, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-b"), 0);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-b"));
}

static json_object *template_of(const char *id, int want_rc, char *msg, size_t msglen)
{
	prd_cloud_error e = {0, ""};
	char *json = NULL;
	json_object *t = NULL;
	int rc = drv->api->template_node(drv->state, id, &json, &e);
	CU_ASSERT_EQUAL(rc, want_rc);
	if(msg)
		snprintf(msg, msglen, "%s", e.message);
	if(json) {
		t = json_tokener_parse(json);
		drv->api->release_string(drv->state, json);
	}
	return t;
}

static const char *res(json_object *t, const char *list, const char *name)
{
	json_object *v = json_object_object_get(json_object_object_get(json_object_object_get(t, "status"), list), name);
	return v ? json_object_get_string(v) : NULL;
}

static void test_scale_from_zero_template(void)
{
	json_object *t, *taints, *labels;
	char msg[PRD_CLOUD_MSG_MAX];
	fresh_api();
	md("md-gpu",
	   SIZES("0", "5") ",\"" CAP "cpu\":\"16\",\"" CAP "memory\":\"128G\",\"" CAP "ephemeral-disk\":\"100Gi\","
			   "\"" CAP "maxPods\":\"200\",\"" CAP "gpu-type\":\"nvidia.com/gpu\",\"" CAP "gpu-count\":\"2\","
			   "\"" CAP "labels\":\"key1=value1,key2=value2\","
			   "\"" CAP "taints\":\"key1=value1:NoSchedule,key2=value2:NoExecute\"",
	   0);
	md("md-small", SIZES("0", "5") ",\"" CAP "cpu\":\"2\",\"" CAP "memory\":\"4Gi\"", 0);
	md("md-badmem", SIZES("0", "5") ",\"" CAP "cpu\":\"2\",\"" CAP "memory\":\"lots\"", 0);
	md("md-onlycpu", SIZES("0", "5") ",\"" CAP "cpu\":\"2\"", 0);
	md("md-badtaint", SIZES("0", "5") ",\"" CAP "cpu\":\"2\",\"" CAP "memory\":\"1Gi\",\"" CAP "taints\":\"a=b:Sometimes\"", 0);
	md("md-badlabel", SIZES("0", "5") ",\"" CAP "cpu\":\"2\",\"" CAP "memory\":\"1Gi\",\"" CAP "labels\":\"novalue\"", 0);
	md("md-badpods", SIZES("0", "5") ",\"" CAP "cpu\":\"2\",\"" CAP "memory\":\"1Gi\",\"" CAP "maxPods\":\"-3\"", 0);
	md("md-copy", SIZES("0", "5"), 1);
	md("md-empty", SIZES("0", "5"), 0);
	machine("m-c", "md-copy", "node-c", "");
	create("/api/v1/nodes",
	       "{\"metadata\":{\"name\":\"node-c\",\"uid\":\"x\",\"labels\":{\"size\":\"xl\"}},"
	       "\"spec\":{\"taints\":[{\"key\":\"dedicated\",\"value\":\"ml\",\"effect\":\"NoSchedule\"}]},"
	       "\"status\":{\"capacity\":{\"cpu\":\"32\",\"memory\":\"256Gi\"},"
	       "\"allocatable\":{\"cpu\":\"31\",\"memory\":\"250Gi\"},\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"}]}}");
	load(NULL);

	t = template_of("MachineDeployment/ns1/md-gpu", 0, NULL, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	CU_ASSERT_STRING_EQUAL(res(t, "capacity", "cpu"), "16");
	CU_ASSERT_STRING_EQUAL(res(t, "capacity", "memory"), "128G");
	CU_ASSERT_STRING_EQUAL(res(t, "capacity", "ephemeral-storage"), "100Gi");
	CU_ASSERT_STRING_EQUAL(res(t, "capacity", "pods"), "200");
	CU_ASSERT_STRING_EQUAL(res(t, "capacity", "nvidia.com/gpu"), "2");
	CU_ASSERT_STRING_EQUAL(res(t, "allocatable", "cpu"), "16");
	CU_ASSERT_STRING_EQUAL(res(t, "allocatable", "nvidia.com/gpu"), "2");
	labels = json_object_object_get(json_object_object_get(t, "metadata"), "labels");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(labels, "key1")), "value1");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(labels, "key2")), "value2");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(labels, "kubernetes.io/os")), "linux");
	taints = json_object_object_get(json_object_object_get(t, "spec"), "taints");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(taints), 2);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(json_object_array_get_idx(taints, 0), "key")), "key1");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(json_object_array_get_idx(taints, 0), "value")), "value1");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(json_object_array_get_idx(taints, 0), "effect")), "NoSchedule");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(json_object_array_get_idx(taints, 1), "effect")), "NoExecute");
	json_object_put(t);

	t = template_of("MachineDeployment/ns1/md-small", 0, NULL, 0);
	CU_ASSERT_STRING_EQUAL(res(t, "capacity", "pods"), "110");
	CU_ASSERT_PTR_NULL(res(t, "capacity", "nvidia.com/gpu"));
	CU_ASSERT_PTR_NULL(res(t, "capacity", "ephemeral-storage"));
	json_object_put(t);

	CU_ASSERT_PTR_NULL(template_of("MachineDeployment/ns1/md-badmem", PRD_CLOUD_EINVAL, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, CAP "memory='lots' is not a non-negative quantity"));
	CU_ASSERT_PTR_NULL(template_of("MachineDeployment/ns1/md-onlycpu", PRD_CLOUD_EINVAL, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "needs both"));
	CU_ASSERT_PTR_NULL(template_of("MachineDeployment/ns1/md-badtaint", PRD_CLOUD_EINVAL, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "'a=b:Sometimes' is not key=value:Effect"));
	CU_ASSERT_PTR_NULL(template_of("MachineDeployment/ns1/md-badlabel", PRD_CLOUD_EINVAL, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "'novalue' is not key=value"));
	CU_ASSERT_PTR_NULL(template_of("MachineDeployment/ns1/md-badpods", PRD_CLOUD_EINVAL, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "maxPods='-3' is not a positive integer"));

	/* No annotations: a copy of the group's Node, without its identity. */
	t = template_of("MachineDeployment/ns1/md-copy", 0, NULL, 0);
	CU_ASSERT_STRING_EQUAL(res(t, "allocatable", "cpu"), "31");
	CU_ASSERT_STRING_EQUAL(res(t, "capacity", "memory"), "256Gi");
	CU_ASSERT_PTR_NULL(res(t, "addresses", "x"));
	CU_ASSERT_PTR_NULL(json_object_object_get(json_object_object_get(t, "status"), "addresses"));
	CU_ASSERT_PTR_NULL(json_object_object_get(json_object_object_get(t, "metadata"), "uid"));
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
				       json_object_object_get(json_object_object_get(t, "metadata"), "labels"), "size")),
			       "xl");
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(json_object_object_get(t, "spec"), "taints")), 1);
	json_object_put(t);
	CU_ASSERT_PTR_NULL(template_of("MachineDeployment/ns1/md-empty", PRD_CLOUD_ENOTFOUND, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "no Node to copy and no scale-from-zero annotations"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "names no infrastructure template"));
}

static void test_instances(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v = NULL;
	size_t n = 0, i;
	int running = 0, creating = 0, deleting = 0, failed = 0;
	fresh_api();
	md("md-a", SIZES("0", "9"), 4);
	machine("m-ok", "md-a", "node-ok", "");
	machine("m-new", "md-a", NULL, "");
	machine("m-bad", "md-a", NULL, "\"failureReason\":\"CreateError\",\"failureMessage\":\"instance quota exceeded\"");
	create(CAPI "/namespaces/ns1/machines",
	       "{\"metadata\":{\"name\":\"m-gone\",\"deletionTimestamp\":\"2024-05-01T09:00:00Z\","
	       "\"labels\":{\"cluster.x-k8s.io/deployment-name\":\"md-a\"}},"
	       "\"spec\":{\"providerID\":\"test://node-gone\"},\"status\":{\"nodeRef\":{\"name\":\"node-gone\"}}}");
	machine("m-other", "md-b", "node-other", "");
	load(NULL);
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, "MachineDeployment/ns1/md-a", &v, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 4);
	for(i = 0; i < n; i++) {
		running += v[i].state == PRD_CLOUD_INSTANCE_RUNNING;
		creating += v[i].state == PRD_CLOUD_INSTANCE_CREATING;
		deleting += v[i].state == PRD_CLOUD_INSTANCE_DELETING;
		if(v[i].error_class != PRD_CLOUD_ERRCLASS_NONE) {
			failed++;
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_OTHER);
			CU_ASSERT_STRING_EQUAL(v[i].error_code, "CreateError");
			CU_ASSERT_STRING_EQUAL(v[i].error_message, "instance quota exceeded");
			CU_ASSERT_STRING_EQUAL(v[i].id, "clusterapi://ns1/m-bad");
			CU_ASSERT_PTR_NULL(v[i].node_name);
		}
		if(v[i].node_name && !strcmp(v[i].node_name, "node-ok"))
			CU_ASSERT_STRING_EQUAL(v[i].id, "test://node-ok");
	}
	CU_ASSERT_EQUAL(running, 1);
	CU_ASSERT_EQUAL(creating, 2);
	CU_ASSERT_EQUAL(deleting, 1);
	CU_ASSERT_EQUAL(failed, 1);
	drv->api->release_instances(drv->state, v, n);
	/* A failed Machine with no Node can be deleted by its instance ID. */
	{
		const char *id = "clusterapi://ns1/m-bad";
		CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "MachineDeployment/ns1/md-a", &id, 1, &e), 0);
		CU_ASSERT_PTR_NOT_NULL(delete_mark("m-bad"));
		CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	}
}

/* Rollback removes a scale-up's Machines by instance ID, whether or not
 * they ever got a Node: without delete_instances the host could delete
 * only Machines with a node, and a plan whose Machines all failed was
 * never rolled back (decrease_target_size is refused while they exist). */
static void test_delete_instances(void)
{
	prd_cloud_error e = {0, ""};
	const char *ids[3];
	fresh_api();
	md("md-a", SIZES("0", "9"), 4);
	machine("m-ok", "md-a", "node-ok", "");
	machine("m-new", "md-a", NULL, "");
	machine("m-bad", "md-a", NULL, "\"failureReason\":\"CreateError\",\"failureMessage\":\"quota\"");
	machine("m-other", "md-b", "node-other", "");
	load(NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->delete_instances);
	/* Lowering the target is refused while the failed Machines exist. */
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, "MachineDeployment/ns1/md-a", 2, &e), PRD_CLOUD_ERANGE);
	ids[0] = "clusterapi://ns1/m-new";
	ids[1] = "clusterapi://ns1/m-bad";
	ids[2] = "test://long-gone"; /* already gone: not an error, not counted */
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, "MachineDeployment/ns1/md-a", ids, 3, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-new"));
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-bad"));
	CU_ASSERT_PTR_NULL(delete_mark("m-ok"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	/* By ID only: a node name is no instance ID, and another group's
	 * Machine is not this group's. */
	ids[0] = "node-ok";
	ids[1] = "test://node-other";
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, "MachineDeployment/ns1/md-a", ids, 2, &e), 0);
	CU_ASSERT_PTR_NULL(delete_mark("m-ok"));
	CU_ASSERT_PTR_NULL(delete_mark("m-other"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	ids[0] = "test://node-ok";
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, "MachineDeployment/ns1/md-a", ids, 1, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-ok"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 1);
}

/* A rollback asks again for Machines it marked while they are still
 * listed (the real MachineDeployment controller took 5 s mid-rollout to
 * act on the lower replicas, e2e 87): replicas already dropped for them,
 * so the repeat lowers nothing and marks nothing. Catches a driver that
 * counted its own earlier mark again (md-rb went 3 -> 1 -> 0, and the
 * Machine from before the plan was deleted). A mark no decrement covers
 * (set by someone who did not lower replicas) still counts. */
static void test_delete_repeated_is_not_counted_twice(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a", *ids[2];
	fresh_api();
	md("md-a", SIZES("0", "9"), 3);
	machine("m-before", "md-a", "node-before", "");
	machine("m-p1", "md-a", NULL, "");
	machine("m-p2", "md-a", NULL, "");
	md("md-b", SIZES("0", "9"), 2);
	machine("m-x", "md-b", "node-x", "");
	create(CAPI "/namespaces/ns1/machines",
	       "{\"metadata\":{\"name\":\"m-y\",\"labels\":{\"cluster.x-k8s.io/deployment-name\":\"md-b\"},"
	       "\"annotations\":{\"cluster.x-k8s.io/delete-machine\":\"someone-else\"}},"
	       "\"spec\":{\"clusterName\":\"c1\",\"providerID\":\"test://node-y\"},"
	       "\"status\":{\"nodeRef\":{\"kind\":\"Node\",\"name\":\"node-y\"}}}");
	load(NULL);
	ids[0] = "clusterapi://ns1/m-p1";
	ids[1] = "clusterapi://ns1/m-p2";
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, id, ids, 2, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 1);
	/* Both still listed, neither being deleted yet: asked again. */
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, id, ids, 2, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 1);
	ids[0] = "clusterapi://ns1/m-p2";
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, id, ids, 1, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 1);
	CU_ASSERT_PTR_NULL(delete_mark("m-before"));
	/* md-b: 2 replicas for 2 Machines, one marked by someone who did not
	 * lower replicas: deleting it lowers them, and the mark stays theirs. */
	ids[0] = "test://node-y";
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, "MachineDeployment/ns1/md-b", ids, 1, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-b"), 1);
	CU_ASSERT_STRING_EQUAL(delete_mark("m-y") ? delete_mark("m-y") : "", "someone-else");
	CU_ASSERT_PTR_NULL(delete_mark("m-x"));
}

/* A stalled former leader's late rollback (term 3) after the new leader
 * (term 4) fenced the group and carried the plan on: its fenced delete is
 * refused, no Machine is marked and replicas stay; the current term's
 * delete goes. Catches a driver whose delete ignores the term (it would
 * remove the nodes the new leader's plan succeeded with). */
static void test_fenced_delete_refuses_older_terms(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a", *ids[1] = { "clusterapi://ns1/m-new" };
	prd_cloud_delete rq;
	fresh_api();
	md("md-a", SIZES("0", "9"), 2);
	machine("m-ok", "md-a", "node-ok", "");
	machine("m-new", "md-a", NULL, "");
	load(NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->delete_fenced);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 4, &e), 0);
	memset(&rq, 0, sizeof(rq));
	rq.struct_size = sizeof(rq);
	rq.group_id = id;
	rq.instance_ids = ids;
	rq.count = 1;
	rq.fence_key = "provreqd";
	rq.fence_term = 3;
	CU_ASSERT_EQUAL(drv->api->delete_fenced(drv->state, &rq, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NULL(delete_mark("m-new"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	rq.fence_term = 4;
	CU_ASSERT_EQUAL(drv->api->delete_fenced(drv->state, &rq, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-new"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 1);
}

static void test_node_group_for_node(void)
{
	prd_cloud_error e = {0, ""};
	char *id = NULL;
	fresh_api();
	md("md-a", SIZES("0", "9"), 1);
	machine("m-1", "md-a", "node-1", "");
	machine("m-x", "md-x", "node-x", "");
	load(NULL);
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
		"{\"metadata\":{\"name\":\"node-1\",\"annotations\":{\"cluster.x-k8s.io/machine\":\"m-1\","
		"\"cluster.x-k8s.io/cluster-namespace\":\"ns1\"}}}", &id, &e), 0);
	CU_ASSERT_STRING_EQUAL(id, "MachineDeployment/ns1/md-a");
	drv->api->release_string(drv->state, id);
	id = NULL;
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
		"{\"metadata\":{\"name\":\"node-1\"},\"spec\":{\"providerID\":\"test://node-1\"}}", &id, &e), 0);
	CU_ASSERT_STRING_EQUAL(id, "MachineDeployment/ns1/md-a");
	drv->api->release_string(drv->state, id);
	id = NULL;
	/* A Machine of no group, and a Node of no Machine. */
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
		"{\"metadata\":{\"name\":\"node-x\"},\"spec\":{\"providerID\":\"test://node-x\"}}", &id, &e), 0);
	CU_ASSERT_PTR_NULL(id);
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state, "{\"metadata\":{\"name\":\"stray\"}}", &id, &e), 0);
	CU_ASSERT_PTR_NULL(id);
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state, "[]", &id, &e), PRD_CLOUD_EINVAL);
}


/* ---- ABI 1.3: conditional calls and creation times ------------------------ */

/* Each call is its own plan's: a token of its own (a call repeated with one
 * token is the same plan's, test_increase_record). */
static int increase_if(const char *id, int32_t delta, int atomic, int32_t expected, prd_cloud_error *e)
{
	static int calls;
	char token[80];
	prd_cloud_increase req;
	snprintf(token, sizeof(token), "3f1c9b7e-0d2a-4c55-9e1b-7a2f0c8d9e10.1764198000123456789-%d", calls++);
	memset(&req, 0, sizeof(req));
	req.struct_size = sizeof(req);
	req.group_id = id;
	req.delta = delta;
	req.atomic = atomic;
	req.expected_target = expected;
	req.owner = token;
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->increase);
	return drv->api->increase(drv->state, &req, e);
}

/* Another writer sets spec.replicas (as a user or a second replica would). */
static void other_writer_scales(const char *name, int replicas)
{
	char path[512], body[128];
	long st = 0;
	snprintf(path, sizeof(path), CAPI "/namespaces/ns1/machinedeployments/%s/scale", name);
	snprintf(body, sizeof(body), "{\"spec\":{\"replicas\":%d}}", replicas);
	json_object_put(api("PATCH", path, body, &st));
	CU_ASSERT_EQUAL_FATAL(st, 200);
}

/* A call planned from replicas that have moved since (another writer
 * scaled the group after the caller read it) changes nothing, increase or
 * decrease; one planned from the real count goes through. Catches a
 * driver that ignores expected_target. */
static void test_conditional(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	fresh_api();
	md("md-a", SIZES("0", "6"), 1);
	machine("m-1", "md-a", "node-1", "");
	load(NULL);
	CU_ASSERT_EQUAL(drv->api->capabilities, PRD_CLOUD_CAP_CONDITIONAL | PRD_CLOUD_CAP_CREATION_TIME |
							PRD_CLOUD_CAP_FENCE | PRD_CLOUD_CAP_INCREASE_RECORD);
	CU_ASSERT_EQUAL(drv->api->instance_size, sizeof(prd_cloud_instance));
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->decrease_target_size_if);
	CU_ASSERT_EQUAL(increase_if(id, 2, 0, 1, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	other_writer_scales("md-a", 4);
	CU_ASSERT_EQUAL(increase_if(id, 1, 0, 3, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "replicas are 4, not the 3"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, id, 1, 3, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, id, 2, 4, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	CU_ASSERT_EQUAL(increase_if(id, 1, 0, 2, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	/* Sizes are still checked; unconditional still works; no atomic. */
	CU_ASSERT_EQUAL(increase_if(id, 4, 0, 3, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, id, 3, 3, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(increase_if(id, 1, 0, -1, &e), 0);
	CU_ASSERT_EQUAL(increase_if(id, 1, 1, 4, &e), PRD_CLOUD_EUNSUPPORTED);
	CU_ASSERT_EQUAL(increase_if(id, 1, 0, -5, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, id, 1, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 5);
}

/* When set, the next PUT of a scale subresource is preceded by another
 * writer setting md-a's replicas to race_replicas: the write lands
 * between the driver's read and its write. */
static int race_replicas = -1;
static const char *race_fence; /* when set: another leader's fence lands there instead */
static void other_leader_fences(const char *name, const char *term);
static const char *race_mark_on_undo; /* when set: another actor marks that Machine before our undo */
static const char *race_machine; /* when set: another writer changes that Machine before its PATCH */
static void other_writer_labels(const char *machine);
/* A write of md-a's replicas: the scale subresource's PUT, or an
 * increase's merge-patch of the object (with its record). */
static bool replicas_write(const char *method, const char *path)
{
	return (!strcmp(method, "PUT") && strstr(path, "/scale")) ||
	       (!strcmp(method, "PATCH") && strstr(path, "/machinedeployments/") && !strstr(path, "/scale"));
}

static int racing_request(void *ud, const char *method, const char *path, const char *content_type,
			  const char *body, size_t body_len, long *status, char **resp, size_t *resp_len,
			  prd_cloud_error *err)
{
	if(race_mark_on_undo && !strcmp(method, "PATCH") && strstr(path, "/machines/") && body &&
	   strstr(body, "delete-machine\":null")) {
		char p2[512];
		long st = 0;
		snprintf(p2, sizeof(p2), CAPI "/namespaces/ns1/machines/%s", race_mark_on_undo);
		race_mark_on_undo = NULL;
		json_object_put(api("PATCH", p2,
				    "{\"metadata\":{\"annotations\":{\"cluster.x-k8s.io/delete-machine\":\"someone-else\"}}}",
				    &st));
		CU_ASSERT_EQUAL(st, 200);
	}
	if(race_machine && !strcmp(method, "PATCH") && strstr(path, "/machines/") &&
	   !strcmp(strrchr(path, '/') + 1, race_machine)) {
		const char *mname = race_machine;
		race_machine = NULL;
		other_writer_labels(mname);
	}
	if(race_fence && replicas_write(method, path) && !(body && strstr(body, "provreqd.io/fence-"))) {
		const char *t = race_fence;
		race_fence = NULL;
		other_leader_fences("md-a", t);
	}
	if(race_replicas >= 0 && replicas_write(method, path) && !(body && strstr(body, "provreqd.io/fence-"))) {
		int r = race_replicas;
		race_replicas = -1;
		other_writer_scales("md-a", r);
	}
	return cloud_host_memapi_request(ud, method, path, content_type, body, body_len, status, resp, resp_len, err);
}

/* Another writer between the driver's read of the scale and its write:
 * the write carries the resourceVersion read, the apiserver answers 409,
 * the driver reads again, finds the replicas moved, and the call is
 * PRD_CLOUD_ECONFLICT with the other writer's replicas kept. Catches a
 * write that is not conditional on what was read. */
static void test_conflict_on_write(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	fresh_api();
	cloud_host_init(&host, "driver/clusterapi", &fake, racing_request, m);
	host.host.log = capture_log;
	md("md-a", SIZES("0", "9"), 2);
	load(NULL);
	race_replicas = 5;
	CU_ASSERT_EQUAL(increase_if(id, 2, 0, 2, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "another writer"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 5);
	race_replicas = 7;
	CU_ASSERT_EQUAL(drv->api->decrease_target_size_if(drv->state, id, 1, 5, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 7);
	race_replicas = -1;
	/* A 409 for a change that left the replicas as planned (Cluster
	 * API's controllers write a new MachineDeployment's status at once)
	 * is read again and written, conditional on the new read: one call.
	 * Catches a driver that fails the plan for any write to the object
	 * (e2e 87 path nap: a new group's first increase "target moved"). */
	memapi_inject_fault(m, "PATCH", CAPI "/namespaces/ns1/machinedeployments/md-a", 409, 1);
	CU_ASSERT_EQUAL(increase_if(id, 1, 0, 7, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 8);
	/* ... a bounded number of times: 409 on every attempt is a
	 * conflict, nothing changed. */
	memapi_inject_fault(m, "PATCH", CAPI "/namespaces/ns1/machinedeployments/md-a", 409, 3 /* CAPI_WRITE_ATTEMPTS */);
	CU_ASSERT_EQUAL(increase_if(id, 1, 0, 8, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "409"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 8);
	CU_ASSERT_EQUAL(increase_if(id, 1, 0, 8, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 9);
}

/* When set, the next write of a scale subresource takes effect and its
 * answer is lost (a timeout after the apiserver wrote it). */
static bool lose_scale_answer;
static int losing_request(void *ud, const char *method, const char *path, const char *content_type,
			  const char *body, size_t body_len, long *status, char **resp, size_t *resp_len,
			  prd_cloud_error *err)
{
	int rc = cloud_host_memapi_request(ud, method, path, content_type, body, body_len, status, resp, resp_len, err);
	if(lose_scale_answer && strcmp(method, "GET") && (strstr(path, "/scale") || strstr(path, "/machinedeployments/md-a"))) {
		lose_scale_answer = false;
		free(*resp);
		*resp = NULL;
		*resp_len = 0;
		*status = 0;
		snprintf(err->message, sizeof(err->message), "simulated: timeout awaiting the answer");
		err->code = PRD_CLOUD_EIO;
		return PRD_CLOUD_EIO;
	}
	return rc;
}

/* Issue 37 item (iii). A scale write that took effect but whose answer was
 * lost fails the call; node_groups must then report the replicas the
 * apiserver has, not the ones from before the write. Catches a driver that
 * reports its cached replicas after such a failure: the host reads the
 * target again after a failed increase, sees it where the plan began, and
 * closes the plan "the cloud shows none of its instances" while the
 * MachineSet makes its Machines. */
static void test_lost_scale_answer_reads_replicas_again(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	int32_t min = 0, max = 0, target = 0;
	fresh_api();
	cloud_host_init(&host, "driver/clusterapi", &fake, losing_request, m);
	host.host.log = capture_log;
	md("md-a", SIZES("0", "9"), 1);
	machine("m-1", "md-a", "node-1", "");
	load(NULL);
	lose_scale_answer = true;
	CU_ASSERT_NOT_EQUAL(increase_if(id, 2, 0, 1, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	CU_ASSERT_EQUAL_FATAL(group_sizes(id, &min, &max, &target), 1);
	CU_ASSERT_EQUAL(target, 3);
	/* The same for a decrease, and for a plain increase. */
	lose_scale_answer = true;
	CU_ASSERT_NOT_EQUAL(drv->api->decrease_target_size_if(drv->state, id, 1, 3, &e), 0);
	CU_ASSERT_EQUAL_FATAL(group_sizes(id, &min, &max, &target), 1);
	CU_ASSERT_EQUAL(target, 2);
	lose_scale_answer = true;
	CU_ASSERT_NOT_EQUAL(drv->api->increase_size(drv->state, id, 1, &e), 0);
	CU_ASSERT_EQUAL_FATAL(group_sizes(id, &min, &max, &target), 1);
	CU_ASSERT_EQUAL(target, 3);
	/* A read that cannot be made fails node_groups rather than guess. */
	lose_scale_answer = true;
	CU_ASSERT_NOT_EQUAL(drv->api->increase_size(drv->state, id, 1, &e), 0);
	memapi_inject_fault(m, "GET", CAPI "/namespaces/ns1/machinedeployments/md-a/scale", 503, 1);
	{
		prd_cloud_node_group *v = NULL;
		size_t n = 0;
		CU_ASSERT_NOT_EQUAL(drv->api->node_groups(drv->state, &v, &n, &e), 0);
		if(v)
			drv->api->release_node_groups(drv->state, v, n);
	}
	CU_ASSERT_EQUAL_FATAL(group_sizes(id, &min, &max, &target), 1);
	CU_ASSERT_EQUAL(target, 4);
}

/* Each Machine's instance reports the Machine's creationTimestamp.
 * Catches created_ns left 0. */
static void test_creation_times(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v = NULL;
	size_t n = 0, i, seen = 0;
	const int64_t t0 = 1714557600LL * PRD_NS_PER_SEC;
	fresh_api();
	md("md-a", SIZES("0", "9"), 2);
	machine("m-old", "md-a", "node-old", "");
	clk_fake_advance(&fake, 90 * PRD_NS_PER_SEC);
	machine("m-new", "md-a", NULL, "");
	load(NULL);
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, "MachineDeployment/ns1/md-a", &v, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 2);
	for(i = 0; i < n; i++) {
		CU_ASSERT_PTR_NULL(v[i].owner);
		if(!strcmp(v[i].id, "test://node-old")) {
			CU_ASSERT_EQUAL(v[i].created_ns, t0);
			seen++;
		} else if(!strcmp(v[i].id, "clusterapi://ns1/m-new")) {
			CU_ASSERT_EQUAL(v[i].created_ns, t0 + 90 * PRD_NS_PER_SEC);
			seen++;
		}
	}
	CU_ASSERT_EQUAL(seen, 2);
	drv->api->release_instances(drv->state, v, n);
}

/* ---- fencing terms (ABI 1.4) ----------------------------------------- */

#define FENCE_ANN "provreqd.io/fence-provreqd"

/* Another leader records its term on md-a, as its fence() would. */
static void other_leader_fences(const char *name, const char *term)
{
	char path[512], body[256];
	long st = 0;
	snprintf(path, sizeof(path), CAPI "/namespaces/ns1/machinedeployments/%s", name);
	snprintf(body, sizeof(body), "{\"metadata\":{\"annotations\":{\"" FENCE_ANN "\":\"%s\"}}}", term);
	json_object_put(api("PATCH", path, body, &st));
	CU_ASSERT_EQUAL_FATAL(st, 200);
}

/* An annotation of MachineDeployment `name` as stored, or "(none)" (static
 * buffer). */
static const char *md_annotation(const char *name, const char *key)
{
	static char buf[128];
	char path[512];
	json_object *o, *v;
	const char *r = "(none)";
	snprintf(path, sizeof(path), CAPI "/namespaces/ns1/machinedeployments/%s", name);
	o = api("GET", path, NULL, NULL);
	v = json_object_object_get(json_object_object_get(json_object_object_get(o, "metadata"), "annotations"), key);
	if(v) {
		snprintf(buf, sizeof(buf), "%s", json_object_get_string(v));
		r = buf;
	}
	json_object_put(o);
	return r;
}

static int increase_fenced(const char *id, int32_t delta, int32_t expected, const char *key, uint64_t term,
			   prd_cloud_error *e)
{
	prd_cloud_increase req;
	memset(&req, 0, sizeof(req));
	req.struct_size = sizeof(req);
	req.group_id = id;
	req.delta = delta;
	req.expected_target = expected;
	req.fence_key = key;
	req.fence_term = term;
	return drv->api->increase(drv->state, &req, e);
}

static int decrease_fenced(const char *id, int32_t delta, int32_t expected, const char *key, uint64_t term,
			   prd_cloud_error *e)
{
	prd_cloud_decrease req;
	memset(&req, 0, sizeof(req));
	req.struct_size = sizeof(req);
	req.group_id = id;
	req.delta = delta;
	req.expected_target = expected;
	req.fence_key = key;
	req.fence_term = term;
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->decrease);
	return drv->api->decrease(drv->state, &req, e);
}

/* A stalled former leader (term 3) wakes up after the new leader (term 4)
 * fenced the group: its late increase is refused and changes nothing,
 * even though the replicas it expects are still there (value conditions
 * alone would let it through). The new leader's calls go on. A fence with
 * a lower term is refused too; the same term is idempotent. Catches a
 * driver that ignores the term or keeps it in its own memory. */
static void test_fence_refuses_older_terms(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	fresh_api();
	md("md-a", SIZES("0", "9"), 2);
	load(NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(drv->api->fence);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 3, &e), 0);
	CU_ASSERT_STRING_EQUAL(md_annotation("md-a", FENCE_ANN), "3");
	CU_ASSERT_EQUAL(increase_fenced(id, 1, 2, "provreqd", 3, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	/* The new leader fences; the old one's late call comes after. */
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 4, &e), 0);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 4, &e), 0);
	CU_ASSERT_EQUAL(increase_fenced(id, 2, 3, "provreqd", 3, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "term 4"));
	CU_ASSERT_EQUAL(decrease_fenced(id, 1, 3, "provreqd", 3, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(increase_fenced(id, 2, -1, "provreqd", 3, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 3, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_STRING_EQUAL(md_annotation("md-a", FENCE_ANN), "4");
	/* The current term acts; a higher one is recorded by the call. */
	CU_ASSERT_EQUAL(increase_fenced(id, 2, 3, "provreqd", 4, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 5);
	CU_ASSERT_EQUAL(decrease_fenced(id, 1, 5, "provreqd", 6, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	CU_ASSERT_STRING_EQUAL(md_annotation("md-a", FENCE_ANN), "6");
	CU_ASSERT_EQUAL(increase_fenced(id, 1, 4, "provreqd", 5, &e), PRD_CLOUD_ECONFLICT);
	/* Keys are separate elections; terms are judged per key. */
	CU_ASSERT_EQUAL(increase_fenced(id, 1, 4, "other-shard", 1, &e), 0);
	CU_ASSERT_STRING_EQUAL(md_annotation("md-a", "provreqd.io/fence-other-shard"), "1");
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 5);
	/* The record outlives the driver: a new process sees it. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	load(NULL);
	CU_ASSERT_EQUAL(increase_fenced(id, 1, 5, "provreqd", 5, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 5);
}

/* The size node_groups reports after fence() is the one the fence read: a
 * former leader's increase that landed after refresh and before the fence
 * is in it (the host reads the targets again after fencing). Catches a
 * fence that leaves the size of the refresh (the new leader closed the
 * former leader's plan as "the cloud never took the increase"). */
static void test_fence_reads_the_size(void)
{
	prd_cloud_error e = {0, ""};
	int32_t target = -1;
	long st = 0;
	const char *id = "MachineDeployment/ns1/md-a";
	fresh_api();
	md("md-a", SIZES("0", "9"), 2);
	load(NULL);
	CU_ASSERT_TRUE(group_sizes(id, NULL, NULL, &target));
	CU_ASSERT_EQUAL(target, 2);
	/* The former leader's increase lands. */
	json_object_put(api("PATCH", CAPI "/namespaces/ns1/machinedeployments/md-a",
			    "{\"spec\":{\"replicas\":4}}", &st));
	CU_ASSERT_EQUAL_FATAL(st, 200);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 2, &e), 0);
	CU_ASSERT_TRUE(group_sizes(id, NULL, NULL, &target));
	CU_ASSERT_EQUAL(target, 4);
	/* Fenced already (the same term): the size is read all the same. */
	json_object_put(api("PATCH", CAPI "/namespaces/ns1/machinedeployments/md-a",
			    "{\"spec\":{\"replicas\":5}}", &st));
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 2, &e), 0);
	CU_ASSERT_TRUE(group_sizes(id, NULL, NULL, &target));
	CU_ASSERT_EQUAL(target, 5);
}

/* ---- which Machines are a plan's (capi_claim.c) ---------------------- */

static int increase_size_of(const char *id, int32_t delta)
{
	prd_cloud_error e = {0, ""};
	return drv->api->increase_size(drv->state, id, delta, &e);
}


static int increase_owned(const char *id, int32_t delta, int32_t expected, const char *owner, prd_cloud_error *e)
{
	prd_cloud_increase req;
	memset(&req, 0, sizeof(req));
	req.struct_size = sizeof(req);
	req.group_id = id;
	req.delta = delta;
	req.expected_target = expected;
	req.owner = owner;
	return drv->api->increase(drv->state, &req, e);
}

/* The owner token instances() reports for the instance whose id ends in
 * `name` (a pending Machine's name, or its Node's in the providerID): "-"
 * none, "?" not listed (static buffer). */
static const char *owner_of(const char *group, const char *name)
{
	static char buf[80];
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v = NULL;
	size_t n = 0, i;
	size_t len = strlen(name);
	snprintf(buf, sizeof(buf), "?");
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, group, &v, &n, &e), 0);
	for(i = 0; i < n; i++)
		if(strlen(v[i].id) > len && !strcmp(v[i].id + strlen(v[i].id) - len, name) &&
		   v[i].id[strlen(v[i].id) - len - 1] == '/')
			snprintf(buf, sizeof(buf), "%s", v[i].owner ? v[i].owner : "-");
	drv->api->release_instances(drv->state, v, n);
	return buf;
}

/* The provreqd.io/owner label of Machine `name` as stored ("-" none). */
static const char *stored_owner(const char *name)
{
	static char buf[80];
	char path[512];
	json_object *o, *v;
	snprintf(path, sizeof(path), CAPI "/namespaces/ns1/machines/%s", name);
	o = api("GET", path, NULL, NULL);
	v = json_object_object_get(json_object_object_get(json_object_object_get(o, "metadata"), "labels"),
				   "provreqd.io/owner");
	snprintf(buf, sizeof(buf), "%s", v ? json_object_get_string(v) : "-");
	json_object_put(o);
	return buf;
}

/* Issue 37 item 3. The Machines an increase made are marked with the
 * plan's token once the driver can prove them its own (the group had
 * exactly its replicas before, none of them has gone since, nobody moved
 * the replicas); once a Machine of the group before is replaced (a
 * MachineHealthCheck deleted it), nothing more is marked, and the marks
 * made stay. Broken drivers caught: one that marks nothing (a rollback
 * cannot tell the plan's Machines from a replacement), one that marks a
 * replacement made while the plan's Machines come. */
static void test_marks_the_machines_an_increase_made(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	long st = 0;
	fresh_api();
	md("md-a", SIZES("0", "9"), 2);
	machine("m-1", "md-a", "node-1", "");
	machine("m-2", "md-a", "node-2", "");
	load(NULL);
	CU_ASSERT_EQUAL(increase_owned(id, 2, 2, "plan-a.1-0", &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	/* The MachineSet makes the first of the plan's Machines. */
	machine("m-3", "md-a", NULL, "");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-3"), "plan-a.1-0");
	CU_ASSERT_STRING_EQUAL(stored_owner("m-3"), "plan-a.1-0");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "node-1"), "-");
	/* A MachineHealthCheck deletes m-1; its replacement and the plan's
	 * second Machine come from the same MachineSet: neither is marked. */
	json_object_put(api("DELETE", CAPI "/namespaces/ns1/machines/m-1", NULL, &st));
	CU_ASSERT_EQUAL_FATAL(st, 200);
	machine("m-r", "md-a", NULL, "");
	machine("m-4", "md-a", NULL, "");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-r"), "-");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-4"), "-");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-3"), "plan-a.1-0");
	CU_ASSERT_STRING_EQUAL(stored_owner("m-r"), "-");
	/* Another increase, from a group that is what its replicas say: all
	 * of its Machines are marked, and nothing after them. */
	CU_ASSERT_EQUAL(increase_owned(id, 1, 4, "plan-b.1-0", &e), 0);
	machine("m-5", "md-a", NULL, "");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-5"), "plan-b.1-0");
	CU_ASSERT_EQUAL(increase_size_of(id, 1), 0);
	machine("m-6", "md-a", NULL, "");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-6"), "-");
}

/* Issue 37 (seed 57 of the clusterapi simulation). An increase records,
 * in the same conditional write as its replicas, which plan moved them
 * from what to what; the same plan's call repeated (its answer lost, or a
 * replica resuming the interrupted plan) answers 0 and writes nothing,
 * whoever moved the replicas since; another plan's call whose expected
 * target another writer moved by exactly its delta is a conflict. Broken
 * driver caught: one that cannot tell its own landed increase from another
 * actor's identical move, so the host takes the other actor's Machine for
 * the plan's (the plan "succeeds" with nothing of its own). */
static void test_increase_record(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	fresh_api();
	md("md-a", SIZES("0", "9"), 2);
	load(NULL);
	CU_ASSERT_EQUAL(increase_owned(id, 2, 2, "plan-a.1-0", &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	CU_ASSERT_STRING_EQUAL(md_annotation("md-a", "provreqd.io/increase"), "plan-a.1-0 2->4");
	/* The same plan again, planned from where it began: it took effect. */
	CU_ASSERT_EQUAL(increase_owned(id, 2, 2, "plan-a.1-0", &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
	other_writer_scales("md-a", 5);
	CU_ASSERT_EQUAL(increase_owned(id, 2, 2, "plan-a.1-0", &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 5);
	/* Plan b read 5 and was interrupted before its call; another writer
	 * moved the replicas by b's delta: b's call never took effect. */
	other_writer_scales("md-a", 6);
	CU_ASSERT_EQUAL(increase_owned(id, 1, 5, "plan-b.1-0", &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 6);
	CU_ASSERT_STRING_EQUAL(md_annotation("md-a", "provreqd.io/increase"), "plan-a.1-0 2->4");
	/* The same under a fencing term (the object read judges the term and
	 * gives the record). */
	{
		prd_cloud_increase req;
		memset(&req, 0, sizeof(req));
		req.struct_size = sizeof(req);
		req.group_id = id;
		req.delta = 1;
		req.expected_target = 6;
		req.owner = "plan-c.1-0";
		req.fence_key = "provreqd";
		req.fence_term = 3;
		CU_ASSERT_EQUAL(drv->api->increase(drv->state, &req, &e), 0);
		CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 7);
		other_writer_scales("md-a", 8);
		CU_ASSERT_EQUAL(drv->api->increase(drv->state, &req, &e), 0);
		CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 8);
		CU_ASSERT_STRING_EQUAL(md_annotation("md-a", "provreqd.io/increase"), "plan-c.1-0 6->7");
	}
}

/* A group whose Machines are not what its replicas say when the increase
 * is made (one still to come, one being deleted): nothing it makes can be
 * proven the plan's, and nothing is marked. */
static void test_no_marks_without_a_settled_group(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	fresh_api();
	md("md-a", SIZES("0", "9"), 2);
	machine("m-1", "md-a", "node-1", "");
	load(NULL);
	CU_ASSERT_EQUAL(increase_owned(id, 1, 2, "plan-a.1-0", &e), 0);
	machine("m-2", "md-a", NULL, "");
	machine("m-3", "md-a", NULL, "");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-2"), "-");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-3"), "-");
	/* Nor when someone else moves the replicas after the increase. */
	fresh_api();
	md("md-a", SIZES("0", "9"), 1);
	machine("m-1", "md-a", "node-1", "");
	load(NULL);
	CU_ASSERT_EQUAL(increase_owned(id, 1, 1, "plan-a.1-0", &e), 0);
	CU_ASSERT_EQUAL(increase_size_of(id, 1), 0);
	machine("m-2", "md-a", NULL, "");
	CU_ASSERT_STRING_EQUAL(owner_of(id, "m-2"), "-");
}

/* A newer leader's fence lands between this call's read and its write:
 * the write carries the resourceVersion read, the apiserver answers 409,
 * the read again finds the newer term, and the call is
 * PRD_CLOUD_ECONFLICT with replicas unchanged. A fence
 * whose write meets a 409 reads once more (the other writer was not a
 * leader) and succeeds. Catches a scale write made without the
 * resourceVersion of the read that judged the term. */
static void test_fence_stale_resource_version(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	fresh_api();
	cloud_host_init(&host, "driver/clusterapi", &fake, racing_request, m);
	host.host.log = capture_log;
	md("md-a", SIZES("0", "9"), 2);
	load(NULL);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 7, &e), 0);
	race_fence = "8";
	CU_ASSERT_EQUAL(increase_fenced(id, 3, 2, "provreqd", 7, &e), PRD_CLOUD_ECONFLICT);
	/* (The 409 makes the driver read again: the newer term refuses.) */
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "term 8"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	race_fence = "9";
	CU_ASSERT_EQUAL(decrease_fenced(id, 1, 2, "provreqd", 8, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	race_fence = NULL;
	memapi_inject_fault(m, "PATCH", CAPI "/namespaces/ns1/machinedeployments/md-a", 409, 1);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 10, &e), 0);
	CU_ASSERT_STRING_EQUAL(md_annotation("md-a", FENCE_ANN), "10");
	memapi_inject_fault(m, "PATCH", CAPI "/namespaces/ns1/machinedeployments/md-a", 409, 2);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "provreqd", 11, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_STRING_EQUAL(md_annotation("md-a", FENCE_ANN), "10");
}

/* Keys the ABI refuses, a long key (an annotation name holds 63
 * characters), and a record someone garbled by hand. */
static void test_fence_keys(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	const char *long_a = "a-very-long-leader-election-lease-name-for-provreqd-shard-0001";
	const char *long_b = "a-very-long-leader-election-lease-name-for-provreqd-shard-0002";
	fresh_api();
	md("md-a", SIZES("0", "9"), 2);
	load(NULL);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "-bad", 1, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "a/b", 1, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "", 1, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, "ok", 0, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, "MachineDeployment/ns1/nope", "ok", 1, &e), PRD_CLOUD_ENOTFOUND);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, long_a, 5, &e), 0);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, long_b, 2, &e), 0);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, id, long_a, 4, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(increase_fenced(id, 1, -1, long_b, 2, &e), 0);
	other_leader_fences("md-a", "x7");
	CU_ASSERT_EQUAL(increase_fenced(id, 1, -1, "provreqd", 9, &e), PRD_CLOUD_EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "not a term"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	/* Not leader-elected (term 0): no term is judged or written. */
	CU_ASSERT_EQUAL(increase_fenced(id, 1, 3, "provreqd", 0, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 4);
}

/* Cluster API v1beta2 removed status.failureReason/failureMessage: a
 * failure shows as an InfrastructureReady or BootstrapConfigReady
 * condition that is False with the provider's reason (or under
 * status.deprecated.v1beta1). A stockout or quota reason is out of
 * resources; a bootstrap failure is other; NotReady or WaitingFor... is
 * a Machine under way, not a failure. Catches a driver that only reads the
 * v1beta1 fields (no failure seen until the provision timeout). */
static void test_v1beta2_failures(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v = NULL;
	size_t n = 0, i;
	int seen = 0;
#define COND(type, reason, msg)                                                                                        \
	"\"conditions\":[{\"type\":\"" type "\",\"status\":\"False\",\"reason\":\"" reason "\",\"message\":\"" msg "\","     \
	"\"lastTransitionTime\":\"2024-05-01T09:00:00Z\"}]"
	fresh_api();
	md("md-a", SIZES("0", "9"), 5);
	machine("m-stock", "md-a", NULL, COND("InfrastructureReady", "InsufficientCapacity", "zone e2e-a is out"));
	machine("m-boot", "md-a", NULL, COND("BootstrapConfigReady", "BootstrapFailed", "no join token"));
	machine("m-wait", "md-a", NULL, COND("InfrastructureReady", "NotReady", "E2EMachine is not provisioned"));
	machine("m-wait2", "md-a", NULL, COND("BootstrapConfigReady", "WaitingForDataSecret", ""));
	machine("m-dep", "md-a", NULL,
		"\"deprecated\":{\"v1beta1\":{\"failureReason\":\"QuotaExceeded\",\"failureMessage\":\"vCPU quota\"}}");
#undef COND
	load(NULL);
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, "MachineDeployment/ns1/md-a", &v, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 5);
	for(i = 0; i < n; i++) {
		const char *id = v[i].id;
		if(!strcmp(id, "clusterapi://ns1/m-stock")) {
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES);
			CU_ASSERT_STRING_EQUAL(v[i].error_code, "InsufficientCapacity");
			CU_ASSERT_STRING_EQUAL(v[i].error_message, "zone e2e-a is out");
			seen++;
		} else if(!strcmp(id, "clusterapi://ns1/m-boot")) {
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_OTHER);
			CU_ASSERT_STRING_EQUAL(v[i].error_code, "BootstrapFailed");
			seen++;
		} else if(!strcmp(id, "clusterapi://ns1/m-dep")) {
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_OTHER);
			CU_ASSERT_STRING_EQUAL(v[i].error_message, "vCPU quota");
			seen++;
		} else {
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_NONE);
			CU_ASSERT_EQUAL(v[i].state, PRD_CLOUD_INSTANCE_CREATING);
			seen++;
		}
	}
	CU_ASSERT_EQUAL(seen, 5);
	drv->api->release_instances(drv->state, v, n);
}

/* Machines another actor deletes (a MachineDeployment rollout, a
 * MachineHealthCheck) report their teardown in InfrastructureReady:
 * False/ObjectDeleted "E2EMachine has been deleted" (Cluster API v1beta2,
 * seen in e2e 87: the plan failed as a "partial creation" while a rollout
 * replaced its Machines). Such a Machine is Deleting, not failed; a
 * Machine whose infrastructure object is not made yet (ObjectDoesNotExist)
 * is Creating. Catches a driver that reads every False reason it does not
 * know as a failure, or judges a Machine on its way out. */
static void test_v1beta2_teardown_is_no_failure(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v = NULL;
	size_t n = 0, i;
	int seen = 0;
	fresh_api();
	md("md-a", SIZES("0", "9"), 3);
	create(CAPI "/namespaces/ns1/machines",
	       "{\"metadata\":{\"name\":\"m-going\",\"deletionTimestamp\":\"2024-05-01T09:00:00Z\","
	       "\"finalizers\":[\"machine.cluster.x-k8s.io\"],"
	       "\"labels\":{\"cluster.x-k8s.io/deployment-name\":\"md-a\"}},"
	       "\"spec\":{\"clusterName\":\"c1\",\"providerID\":\"test://node-going\"},"
	       "\"status\":{\"nodeRef\":{\"kind\":\"Node\",\"name\":\"node-going\"},"
	       "\"conditions\":[{\"type\":\"InfrastructureReady\",\"status\":\"False\",\"reason\":\"ObjectDeleted\","
	       "\"message\":\"E2EMachine has been deleted\",\"lastTransitionTime\":\"2024-05-01T09:00:00Z\"}]}}");
	machine("m-new", "md-a", NULL,
		"\"conditions\":[{\"type\":\"InfrastructureReady\",\"status\":\"False\",\"reason\":\"ObjectDoesNotExist\","
		"\"message\":\"E2EMachine does not exist\",\"lastTransitionTime\":\"2024-05-01T09:00:00Z\"}]");
	/* The same reason on a Machine nobody deletes: its infrastructure
	 * went away under it, a failure. */
	machine("m-lost", "md-a", NULL,
		"\"conditions\":[{\"type\":\"InfrastructureReady\",\"status\":\"False\",\"reason\":\"ObjectDeleted\","
		"\"message\":\"E2EMachine has been deleted while the Machine still exists\","
		"\"lastTransitionTime\":\"2024-05-01T09:00:00Z\"}]");
	load(NULL);
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, "MachineDeployment/ns1/md-a", &v, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 3);
	for(i = 0; i < n; i++) {
		if(!strcmp(v[i].id, "test://node-going")) {
			CU_ASSERT_EQUAL(v[i].state, PRD_CLOUD_INSTANCE_DELETING);
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_NONE);
			seen++;
		} else if(!strcmp(v[i].id, "clusterapi://ns1/m-new")) {
			CU_ASSERT_EQUAL(v[i].state, PRD_CLOUD_INSTANCE_CREATING);
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_NONE);
			seen++;
		} else if(!strcmp(v[i].id, "clusterapi://ns1/m-lost")) {
			CU_ASSERT_EQUAL(v[i].error_class, PRD_CLOUD_ERRCLASS_OTHER);
			CU_ASSERT_STRING_EQUAL(v[i].error_code ? v[i].error_code : "", "ObjectDeleted");
			seen++;
		}
	}
	CU_ASSERT_EQUAL(seen, 3);
	drv->api->release_instances(drv->state, v, n);
}

/* Scale from zero from the infrastructure machine template's published
 * status.capacity and status.nodeInfo (Cluster API's autoscaling contract),
 * the group's capacity annotations overriding it key by key. Catches a
 * driver that reads only the annotations (no template: memory 16Gi only). */
static void test_template_from_infra_template(void)
{
	static const kube_resource TPLS = {"infrastructure.e2e.provreqd.io", "v1alpha1", "e2emachinetemplates",
					   "E2EMachineTemplate", true};
	prd_cloud_error e = {0, ""};
	char *node = NULL;
	json_object *o, *cap, *labels;
	fresh_api();
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &TPLS, MEMAPI_STATUS), 0);
	create("/apis/infrastructure.e2e.provreqd.io/v1alpha1/namespaces/ns1/e2emachinetemplates",
	       "{\"metadata\":{\"name\":\"big\"},\"spec\":{\"template\":{\"spec\":{}}},"
	       "\"status\":{\"capacity\":{\"cpu\":\"8\",\"memory\":\"32Gi\",\"nvidia.com/gpu\":\"2\"},"
	       "\"nodeInfo\":{\"architecture\":\"arm64\",\"operatingSystem\":\"linux\"}}}");
	create(CAPI "/namespaces/ns1/machinedeployments",
	       "{\"metadata\":{\"name\":\"md-t\",\"annotations\":{" SIZES("0", "5") ",\"" CAP "memory\":\"16Gi\","
	       "\"" CAP "labels\":\"pool=big\"}},\"spec\":{\"replicas\":0,\"template\":{\"spec\":{"
	       "\"infrastructureRef\":{\"apiVersion\":\"infrastructure.e2e.provreqd.io/v1alpha1\","
	       "\"kind\":\"E2EMachineTemplate\",\"name\":\"big\"}}}}}");
	load(NULL);
	CU_ASSERT_EQUAL_FATAL(drv->api->template_node(drv->state, "MachineDeployment/ns1/md-t", &node, &e), 0);
	o = json_tokener_parse(node);
	cap = json_object_object_get(json_object_object_get(o, "status"), "capacity");
	labels = json_object_object_get(json_object_object_get(o, "metadata"), "labels");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(cap, "cpu")), "8");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(cap, "memory")), "16Gi");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(cap, "nvidia.com/gpu")), "2");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(labels, "kubernetes.io/arch")), "arm64");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(labels, "pool")), "big");
	json_object_put(o);
	drv->api->release_string(drv->state, node);
}

/* A group whose infrastructure template publishes no capacity, with no
 * annotations and no Node: the reason names the template and what it
 * lacks (a driver that blamed only the annotations sent the operator of a
 * CAPA/CAPG install to the wrong place), and a missing template says so. */
static void test_template_infra_says_nothing(void)
{
	static const kube_resource TPLS = {"infrastructure.e2e.provreqd.io", "v1alpha1", "e2emachinetemplates",
					   "E2EMachineTemplate", true};
	char msg[PRD_CLOUD_MSG_MAX];
	fresh_api();
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &TPLS, MEMAPI_STATUS), 0);
	create("/apis/infrastructure.e2e.provreqd.io/v1alpha1/namespaces/ns1/e2emachinetemplates",
	       "{\"metadata\":{\"name\":\"bare\"},\"spec\":{\"template\":{\"spec\":{}}}}");
	create(CAPI "/namespaces/ns1/machinedeployments",
	       "{\"metadata\":{\"name\":\"md-bare\",\"annotations\":{" SIZES("0", "5") "}},\"spec\":{\"replicas\":0,"
	       "\"template\":{\"spec\":{\"infrastructureRef\":{\"apiVersion\":\"infrastructure.e2e.provreqd.io/v1alpha1\","
	       "\"kind\":\"E2EMachineTemplate\",\"name\":\"bare\"}}}}}");
	create(CAPI "/namespaces/ns1/machinedeployments",
	       "{\"metadata\":{\"name\":\"md-gone\",\"annotations\":{" SIZES("0", "5") "}},\"spec\":{\"replicas\":0,"
	       "\"template\":{\"spec\":{\"infrastructureRef\":{\"apiVersion\":\"infrastructure.e2e.provreqd.io/v1alpha1\","
	       "\"kind\":\"E2EMachineTemplate\",\"name\":\"gone\"}}}}}");
	load(NULL);
	CU_ASSERT_PTR_NULL(template_of("MachineDeployment/ns1/md-bare", PRD_CLOUD_ENOTFOUND, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "E2EMachineTemplate bare publishes no cpu and memory in status.capacity"));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, CAP "cpu"));
	CU_ASSERT_PTR_NULL(template_of("MachineDeployment/ns1/md-gone", PRD_CLOUD_ENOTFOUND, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "E2EMachineTemplate gone is not there"));
}

/* ---- a separate management cluster --------------------------------------- */

/* Reads the management server answered: LISTs and GETs (not watches),
 * and watch requests. Counted on the server's threads. */
static atomic_int mgmt_reads, mgmt_watches;
/* While set, watches deliver no event (the driver's cache falls behind). */
static atomic_bool watch_paused;

typedef struct watch_lines {
	fake_resp *resp;
} watch_lines;

static int watch_line(void *ud, const char *type, json_object *obj)
{
	watch_lines *w = ud;
	json_object *ev;
	if(w->resp->nchunks >= FAKE_MAX_CHUNKS - 1)
		return 1;
	ev = json_object_new_object();
	json_object_object_add(ev, "type", json_object_new_string(type));
	json_object_object_add(ev, "object", json_object_get(obj));
	w->resp->chunks[w->resp->nchunks++] =
		fake_strdup(json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	{ /* one event per line */
		char *line = w->resp->chunks[w->resp->nchunks - 1];
		size_t n = strlen(line);
		char *nl = malloc(n + 2);
		if(!nl)
			abort();
		memcpy(nl, line, n);
		nl[n] = '\n';
		nl[n + 1] = '\0';
		free(line);
		w->resp->chunks[w->resp->nchunks - 1] = nl;
	}
	json_object_put(ev);
	return 0;
}

/* A watch of the management store: the events after the request's
 * resourceVersion, then the stream is held briefly and closed (the client
 * watches again from the last version it saw). */
static void serve_watch(memapi *store, const fake_req *req, fake_resp *resp)
{
	static const kube_resource *const kinds[] = {&MDS, &MSS, &MPS, &MACHINES, NULL};
	const kube_resource *r = NULL;
	const char *q = strchr(req->url, '?'), *rvp = strstr(req->url, "resourceVersion="), *nsp;
	char ns[128] = "", path[2048];
	uint64_t since = rvp ? strtoull(rvp + strlen("resourceVersion="), NULL, 10) : 0;
	watch_lines w = {resp};
	size_t i, plen = q ? (size_t)(q - req->url) : strlen(req->url);
	snprintf(path, sizeof(path), "%.*s", (int)plen, req->url);
	for(i = 0; kinds[i] && !r; i++) {
		size_t n = strlen(kinds[i]->resource);
		if(plen > n && !strcmp(path + plen - n, kinds[i]->resource) && path[plen - n - 1] == '/')
			r = kinds[i];
	}
	if((nsp = strstr(path, "/namespaces/")))
		sscanf(nsp + strlen("/namespaces/"), "%127[^/]", ns);
	if(!r) {
		resp->status = 404;
		resp->body = fake_strdup("{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}");
		return;
	}
	if(atomic_load(&watch_paused)) {
		resp->chunks[resp->nchunks++] = fake_strdup("\n");
		resp->hold_ms = 100;
		return;
	}
	if(memapi_events_since(store, r, ns[0] ? ns : NULL, since, watch_line, &w, NULL) == PRD_EGONE) {
		for(i = 0; i < (size_t)resp->nchunks; i++)
			free(resp->chunks[i]);
		resp->nchunks = 0;
		resp->status = 410;
		resp->body = fake_strdup("{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}");
		return;
	}
	if(!resp->nchunks)
		resp->chunks[resp->nchunks++] = fake_strdup("\n");
	resp->hold_ms = 100;
}

/* The fake server's handler: the request as the management apiserver `m`
 * answers it. */
static void serve_mgmt(void *ud, const fake_req *req, fake_resp *resp)
{
	char *out = NULL;
	size_t len = 0;
	long st = 0;
	if(strstr(req->url, "watch=1")) {
		atomic_fetch_add(&mgmt_watches, 1);
		serve_watch(ud, req, resp);
		return;
	}
	if(!strcmp(req->method, "GET"))
		atomic_fetch_add(&mgmt_reads, 1);
	memapi_request(ud, req->method, req->url, req->content_type[0] ? req->content_type : NULL, req->body,
		       req->body_len, &st, &out, &len);
	resp->status = (int)st;
	resp->body = out;
}

/* `m` (the Cluster API kinds) becomes the management cluster, served on
 * loopback; the host's requests go to a new store `wl` (the workload
 * cluster: Nodes only). */
static void split_clusters(void)
{
	fresh_api();
	CU_ASSERT_EQUAL_FATAL(memapi_new(&fake, 0, &wl), 0);
	cloud_host_init(&host, "driver/clusterapi", &fake, cloud_host_memapi_request, wl);
	host.host.log = capture_log;
	mgmt_srv = fake_start(serve_mgmt, m);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mgmt_srv);
	atomic_store(&mgmt_reads, 0);
	atomic_store(&mgmt_watches, 0);
	atomic_store(&watch_paused, false);
}

/* A kubeconfig for the management cluster (bearer token) at `path`. */
static void write_mgmt_kubeconfig(const char *path)
{
	FILE *fp = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
	fprintf(fp, "apiVersion: v1\nkind: Config\ncurrent-context: mgmt\nclusters:\n- name: mgmt\n  cluster: {server: '%s'}\n"
		    "users:\n- name: capi\n  user: {token: management-token}\n"
		    "contexts:\n- name: mgmt\n  context: {cluster: mgmt, user: capi}\n",
		fake_url(mgmt_srv));
	fclose(fp);
}

static void wl_node(const char *name, const char *machine)
{
	char body[1024];
	long st = 0;
	char *resp = NULL;
	size_t len = 0;
	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"pool\":\"wl\"},\"annotations\":{"
		 "\"cluster.x-k8s.io/machine\":\"%s\",\"cluster.x-k8s.io/cluster-namespace\":\"ns1\"}},"
		 "\"spec\":{\"providerID\":\"test://%s\"},\"status\":{\"capacity\":{\"cpu\":\"6\",\"memory\":\"12Gi\","
		 "\"pods\":\"110\"},\"allocatable\":{\"cpu\":\"6\",\"memory\":\"12Gi\",\"pods\":\"110\"}}}",
		 name, machine, name);
	memapi_request(wl, "POST", "/api/v1/nodes", "application/json", body, strlen(body), &st, &resp, &len);
	free(resp);
	CU_ASSERT_EQUAL_FATAL(st, 201);
}

static long wl_status(const char *path)
{
	long st = 0;
	char *resp = NULL;
	size_t len = 0;
	memapi_request(wl, "GET", path, NULL, NULL, 0, &st, &resp, &len);
	free(resp);
	return st;
}

/* Machines and MachineDeployments in a management cluster of their own,
 * Nodes in the workload cluster: discovery, scaling, the template from a
 * Node, a Node's group and deletion all reach the right cluster. Fails on
 * a driver that reads Cluster API objects through the host only (no group
 * is found: the workload cluster has none) or rejects
 * managementKubeconfig. */
static void test_management_cluster(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a", *names[1];
	char kc[600], cfg[800], *node = NULL, *gid = NULL;
	int32_t target = -1;
	json_object *o;
	split_clusters();
	md("md-a", SIZES("0", "5"), 1);
	machine("m-1", "md-a", "node-1", "");
	wl_node("node-1", "m-1");
	snprintf(kc, sizeof(kc), "%s/mgmt-kubeconfig", test_tmpdir());
	write_mgmt_kubeconfig(kc);
	snprintf(cfg, sizeof(cfg), "namespace: ns1\nmanagementKubeconfig: %s\n", kc);
	load(cfg);
	CU_ASSERT_EQUAL(group_count(), 1);
	CU_ASSERT_TRUE(group_sizes(id, NULL, NULL, &target));
	CU_ASSERT_EQUAL(target, 1);
	/* The workload cluster serves no Cluster API kinds at all. */
	CU_ASSERT_EQUAL(wl_status(CAPI "/namespaces/ns1/machinedeployments/md-a"), 404);

	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, id, 2, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);

	/* No capacity annotations: the template is a copy of the group's Node,
	 * which only the workload cluster has. */
	CU_ASSERT_EQUAL_FATAL(drv->api->template_node(drv->state, id, &node, &e), 0);
	o = json_tokener_parse(node);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
		json_object_object_get(json_object_object_get(o, "status"), "capacity"), "cpu")), "6");
	json_object_put(o);
	drv->api->release_string(drv->state, node);

	/* The Node's Machine is looked up in the management cluster. */
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
		"{\"metadata\":{\"name\":\"node-1\",\"annotations\":{\"cluster.x-k8s.io/machine\":\"m-1\","
		"\"cluster.x-k8s.io/cluster-namespace\":\"ns1\"}}}", &gid, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(gid);
	if(gid)
		CU_ASSERT_STRING_EQUAL(gid, id);
	drv->api->release_string(drv->state, gid);

	names[0] = "node-1";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 1, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-1"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
	/* Everything Cluster API went to the management server. */
	CU_ASSERT_TRUE(fake_count(mgmt_srv) >= 6);
}

/* A management kubeconfig that is missing or broken: the driver loads
 * (provreqd keeps serving check-capacity and its other drivers), every
 * call that needs the management cluster fails naming the file, and once
 * the file is good the next refresh finds the groups - no restart. Fails
 * on a driver that refuses to load, or that reads the file only once. */
static void test_management_kubeconfig_broken(void)
{
	prd_cloud_error e = {0, ""};
	char kc[600], cfg[800];
	FILE *fp;
	split_clusters();
	md("md-a", SIZES("0", "5"), 1);
	snprintf(kc, sizeof(kc), "%s/mgmt-kubeconfig-late", test_tmpdir());
	remove(kc);
	snprintf(cfg, sizeof(cfg), "managementKubeconfig: %s\n", kc);
	load(cfg);
	CU_ASSERT_PTR_NOT_NULL(strstr(logbuf, kc)); /* reported at start-up */
	CU_ASSERT_NOT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "managementKubeconfig"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, kc));
	CU_ASSERT_EQUAL(group_count(), 0);
	/* Garbage in the file: still an error that names it. */
	fp = fopen(kc, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
	fputs("clusters: [this is: not, a kubeconfig\n", fp);
	fclose(fp);
	e.message[0] = '\0';
	CU_ASSERT_NOT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, kc));
	/* Fixed: found at the next refresh. */
	write_mgmt_kubeconfig(kc);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_EQUAL(group_count(), 1);
}

/* Contradictory management settings are configuration errors. */
static void test_management_config(void)
{
	prd_err pe;
	fresh_api();
	prd_err_clear(&pe);
	CU_ASSERT_NOT_EQUAL(cloud_drivers_load(&set, module_path(), &host.host,
					       "managementKubeconfig: /x\nmanagementInCluster: true\n", &drv, &pe), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "exclude each other"));
	prd_err_clear(&pe);
	CU_ASSERT_NOT_EQUAL(cloud_drivers_load(&set, module_path(), &host.host, "managementContext: c\n", &drv, &pe), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "managementContext needs managementKubeconfig"));
	prd_err_clear(&pe);
	CU_ASSERT_NOT_EQUAL(cloud_drivers_load(&set, module_path(), &host.host, "managementInCluster: yes-please\n", &drv,
					       &pe), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(pe.msg, "managementInCluster must be true or false"));
	/* Not running in a pod: the driver loads, the calls say why they fail. */
	if(!getenv("KUBERNETES_SERVICE_HOST")) {
		prd_cloud_error e = {0, ""};
		load("managementInCluster: true\n");
		CU_ASSERT_NOT_EQUAL(drv->api->refresh(drv->state, &e), 0);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "KUBERNETES_SERVICE_HOST"));
	}
}

/* Another writer (a MachineHealthCheck, a rollout, an operator) changes a
 * Machine. */
static void other_writer_labels(const char *machine)
{
	char path[512];
	long st = 0;
	snprintf(path, sizeof(path), CAPI "/namespaces/ns1/machines/%s", machine);
	json_object_put(api("PATCH", path, "{\"metadata\":{\"labels\":{\"touched\":\"yes\"}}}", &st));
	CU_ASSERT_EQUAL(st, 200);
}

/* Deleting chosen Machines is one conflict-checked step: the marks are
 * conditional on the Machines as listed, the replica decrement on the
 * group as read, and a conflict on either leaves replicas and marks as
 * they were. Catches blind marks (a Machine changed since the read is
 * marked anyway and replicas drop) and a decrement written without the
 * resourceVersion read (another writer's replicas are overwritten). */
static void test_delete_is_conditional(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a", *names[2];
	fresh_api();
	cloud_host_init(&host, "driver/clusterapi", &fake, racing_request, m);
	host.host.log = capture_log;
	md("md-a", SIZES("0", "9"), 3);
	machine("m-1", "md-a", "node-1", "");
	machine("m-2", "md-a", "node-2", "");
	machine("m-3", "md-a", "node-3", "");
	load(NULL);

	/* m-2 changes between the listing and its mark. */
	race_machine = "m-2";
	names[0] = "node-1";
	names[1] = "node-2";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 2, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "Machine m-2 changed"));
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	CU_ASSERT_PTR_NULL(delete_mark("m-1")); /* marked first, taken back */
	CU_ASSERT_PTR_NULL(delete_mark("m-2"));

	/* Another writer scales between the marks and the decrement. */
	race_replicas = 5;
	names[0] = "node-3";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 1, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 5);
	CU_ASSERT_PTR_NULL(delete_mark("m-3"));
	race_replicas = -1;

	/* Nothing racing: both go in one call. */
	names[0] = "node-1";
	names[1] = "node-3";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 2, &e), 0);
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 3);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-1"));
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-3"));
	CU_ASSERT_PTR_NULL(delete_mark("m-2"));
}

/* Taking a mark back is conditional too: when someone else marked the
 * Machine again after ours (their own scale-down chose it), their mark
 * stays. Catches an undo that removes the annotation blindly. */
static void test_unmark_keeps_foreign_mark(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a", *names[1];
	fresh_api();
	cloud_host_init(&host, "driver/clusterapi", &fake, racing_request, m);
	host.host.log = capture_log;
	md("md-a", SIZES("0", "9"), 2);
	machine("m-1", "md-a", "node-1", "");
	machine("m-2", "md-a", "node-2", "");
	load(NULL);
	/* The decrement fails; before our undo lands, another actor sets its
	 * own mark on m-1 (the race hook fires on the undo's PATCH). */
	memapi_inject_fault(m, "PUT", CAPI "/namespaces/ns1/machinedeployments/md-a/scale", 500, 1);
	race_machine = NULL;
	race_mark_on_undo = "m-1";
	names[0] = "node-1";
	CU_ASSERT_NOT_EQUAL(drv->api->delete_nodes(drv->state, id, names, 1, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(delete_mark("m-1"));
	if(delete_mark("m-1"))
		CU_ASSERT_STRING_EQUAL(delete_mark("m-1"), "someone-else");
	CU_ASSERT_EQUAL(stored_replicas("machinedeployments", "md-a"), 2);
}

/* One refresh; the management reads it made. */
static int refresh_reads(void)
{
	prd_cloud_error e = {0, ""};
	int before = atomic_load(&mgmt_reads);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	return atomic_load(&mgmt_reads) - before;
}

/* Wait (at most about 10 s: a thread of the driver is lagging, no time is
 * asserted) until `done` holds. */
static bool eventually(bool (*done)(void))
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	int i;
	for(i = 0; i < 1000; i++) {
		if(done())
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

static bool refresh_reads_nothing(void)
{
	return refresh_reads() == 0;
}

static int32_t wanted_target;
static bool target_is_wanted(void)
{
	int32_t t = -1;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	group_sizes("MachineDeployment/ns1/md-a", NULL, NULL, &t);
	return t == wanted_target;
}

/* With a management cluster the driver lists its Cluster API objects once
 * and then watches them: a pass (refresh, a group's instances, a Node's
 * group) reads nothing from the management apiserver, others' changes
 * arrive through the watch, and the driver's own scale is seen at once
 * even before its watch event. Fails on a driver that polls (every
 * refresh lists each kind), and on one that trusts a cache older than its
 * own write (the target would be the old one). `watch: false` polls, as
 * the figures of the note compare. */
static void test_management_watch(void)
{
	prd_cloud_error e = {0, ""};
	const char *id = "MachineDeployment/ns1/md-a";
	char kc[600], cfg[800], *gid = NULL;
	prd_cloud_instance *v = NULL;
	size_t n = 0;
	int32_t t = -1;
	int i, polled = 0;
	split_clusters();
	md("md-a", SIZES("0", "9"), 1);
	machine("m-1", "md-a", "node-1", "");
	snprintf(kc, sizeof(kc), "%s/mgmt-kubeconfig-watch", test_tmpdir());
	write_mgmt_kubeconfig(kc);

	/* Polling, for comparison: every refresh lists the three kinds. */
	snprintf(cfg, sizeof(cfg), "namespace: ns1\nmanagementKubeconfig: %s\nwatch: false\n", kc);
	load(cfg);
	for(i = 0; i < 3; i++)
		polled += refresh_reads();
	CU_ASSERT_EQUAL(polled, 9);
	CU_ASSERT_EQUAL(atomic_load(&mgmt_watches), 0);
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);

	snprintf(cfg, sizeof(cfg), "namespace: ns1\nmanagementKubeconfig: %s\n", kc);
	load(cfg);
	/* Machines are watched from their first use. */
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, id, &v, &n, &e), 0);
	drv->api->release_instances(drv->state, v, n);
	CU_ASSERT_TRUE_FATAL(eventually(refresh_reads_nothing));
	{
		int before = atomic_load(&mgmt_reads);
		bool machines_cached = false;
		for(i = 0; i < 1000 && !machines_cached; i++) {
			struct timespec ts = {0, 10 * 1000 * 1000};
			before = atomic_load(&mgmt_reads);
			CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, id, &v, &n, &e), 0);
			drv->api->release_instances(drv->state, v, n);
			machines_cached = atomic_load(&mgmt_reads) == before;
			if(!machines_cached)
				nanosleep(&ts, NULL);
		}
		CU_ASSERT_TRUE(machines_cached);
		before = atomic_load(&mgmt_reads);
		for(i = 0; i < 5; i++)
			CU_ASSERT_EQUAL(refresh_reads(), 0);
		CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, id, &v, &n, &e), 0);
		CU_ASSERT_EQUAL(n, 1);
		drv->api->release_instances(drv->state, v, n);
		CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
			"{\"metadata\":{\"name\":\"node-1\",\"annotations\":{\"cluster.x-k8s.io/machine\":\"m-1\","
			"\"cluster.x-k8s.io/cluster-namespace\":\"ns1\"}}}", &gid, &e), 0);
		CU_ASSERT_PTR_NOT_NULL(gid);
		drv->api->release_string(drv->state, gid);
		CU_ASSERT_EQUAL(atomic_load(&mgmt_reads) - before, 0);
	}
	CU_ASSERT_TRUE(atomic_load(&mgmt_watches) >= 2);

	/* Another writer scales: the watch brings it. */
	other_writer_scales("md-a", 4);
	wanted_target = 4;
	CU_ASSERT_TRUE(eventually(target_is_wanted));

	/* The driver's own scale: with the watch held back, the next refresh
	 * still says 6 (it reads the apiserver while the cache is older than
	 * the write). */
	atomic_store(&watch_paused, true);
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, id, 2, &e), 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_TRUE(group_sizes(id, NULL, NULL, &t));
	CU_ASSERT_EQUAL(t, 6);
	atomic_store(&watch_paused, false);
	/* Once the watch has it, refreshes read nothing again. */
	CU_ASSERT_TRUE(eventually(refresh_reads_nothing));
	CU_ASSERT_TRUE(group_sizes(id, NULL, NULL, &t));
	CU_ASSERT_EQUAL(t, 6);
	/* A new Machine appears in the group's instances through the watch. */
	machine("m-2", "md-a", NULL, "");
	wanted_target = 6;
	{
		bool seen = false;
		for(i = 0; i < 1000 && !seen; i++) {
			struct timespec ts = {0, 10 * 1000 * 1000};
			CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, id, &v, &n, &e), 0);
			seen = n == 2;
			drv->api->release_instances(drv->state, v, n);
			if(!seen)
				nanosleep(&ts, NULL);
		}
		CU_ASSERT_TRUE(seen);
	}
}

static const test_case cases[] = {
	{"fence: the size after it is the one the fence read", test_fence_reads_the_size},
	{"marks: the Machines an increase made, while they can be proven its own", test_marks_the_machines_an_increase_made},
	{"an increase records its plan: a repeated call is no second increase", test_increase_record},
	{"marks: none from a group that was not settled", test_no_marks_without_a_settled_group},
	{"discovery: annotated groups only, bad values reported", test_discovery},
	{"bad config", test_bad_config},
	{"replicas move through the scale subresource", test_replicas},
	{"delete marks Machines and undoes the mark on failure", test_delete_nodes},
	{"scale-from-zero template", test_scale_from_zero_template},
	{"instances and failed Machines", test_instances},
	{"delete_instances removes Machines by ID, Node or not", test_delete_instances},
	{"node_group_for_node", test_node_group_for_node},
	{"a stale conditional call changes nothing", test_conditional},
	{"a write racing another writer is a conflict", test_conflict_on_write},
	{"instances report creation times", test_creation_times},
	{"a scale write whose answer was lost: replicas read again", test_lost_scale_answer_reads_replicas_again},
	{"fence: a late call with an older term is refused", test_fence_refuses_older_terms},
	{"fence: a late delete with an older term is refused", test_fenced_delete_refuses_older_terms},
	{"fence: a fence between read and write is a conflict", test_fence_stale_resource_version},
	{"fence: keys and garbled records", test_fence_keys},
	{"v1beta2 failures: conditions and deprecated fields", test_v1beta2_failures},
	{"v1beta2: a Machine's teardown is no failure", test_v1beta2_teardown_is_no_failure},
	{"scale from zero from the infrastructure template's status", test_template_from_infra_template},
	{"a template that says nothing: the reason names the template", test_template_infra_says_nothing},
	{"management cluster: Machines there, Nodes in the workload cluster", test_management_cluster},
	{"management cluster: a broken kubeconfig is reported and read again", test_management_kubeconfig_broken},
	{"management cluster: contradictory settings", test_management_config},
	{"delete: marks and decrement are conditional on one read", test_delete_is_conditional},
	{"delete: a repeated delete is not counted twice", test_delete_repeated_is_not_counted_twice},
	{"delete: taking a mark back keeps someone else's", test_unmark_keeps_foreign_mark},
	{"management cluster: list once, then watch", test_management_watch},
	{NULL, NULL}};

int main(void)
{
	int rc = test_run("clusterapi driver", cases);
	teardown();
	return rc;
}

/* Node auto-provisioning of the clusterapi driver (capi_nap.c,
 * capi_nap_group.c): template MachineDeployments as shapes, a new
 * MachineDeployment per created group. The built module, loaded through
 * the loader, against the in-memory API. */
#include "testutil.h"
#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/memapi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static memapi *m;
static clk fake;
static cloud_host_impl host;
static cloud_drivers set;
static cloud_driver *drv;

#define CAPI "/apis/cluster.x-k8s.io/v1beta1"
#define MIN_ANN "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
#define MAX_ANN "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
#define CAP "capacity.cluster-autoscaler.kubernetes.io/"
#define OWNER "3f1c9b7e-0d2a-4c55-9e1b-7a2f0c8d9e10.1764198000123456789-0"

static const kube_resource MDS = {"cluster.x-k8s.io", "v1beta1", "machinedeployments", "MachineDeployment", true};
static const kube_resource MACHINES = {"cluster.x-k8s.io", "v1beta1", "machines", "Machine", true};

static const char *module_path(void)
{
	static char path[1024];
	const char *b = getenv("PRD_BUILDDIR");
	snprintf(path, sizeof(path), "%s/cloud/clusterapi/.libs/clusterapi.so", b ? b : ".");
	return path;
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
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &MDS, MEMAPI_STATUS | MEMAPI_GENERATION | MEMAPI_SCALE), 0);
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &MACHINES, MEMAPI_STATUS | MEMAPI_GENERATION), 0);
	cloud_host_init(&host, "driver/clusterapi", &fake, cloud_host_memapi_request, m);
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

/* A MachineDeployment in ns1 of cluster c1 with these annotations and
 * labels (JSON members, may be ""), its Machines selected by its name and
 * its template naming bootstrap and infrastructure templates. */
static void md(const char *name, const char *annotations, const char *labels, int replicas)
{
	create(CAPI "/namespaces/ns1/machinedeployments",
	       "{\"metadata\":{\"name\":\"%s\",\"annotations\":{%s},\"labels\":{%s}},\"spec\":{\"clusterName\":\"c1\","
	       "\"replicas\":%d,\"selector\":{\"matchLabels\":{\"cluster.x-k8s.io/deployment-name\":\"%s\","
	       "\"pool\":\"%s\"}},\"template\":{\"metadata\":{\"labels\":{\"cluster.x-k8s.io/deployment-name\":\"%s\","
	       "\"pool\":\"%s\",\"team\":\"a\"}},\"spec\":{\"clusterName\":\"c1\",\"version\":\"v1.36.3\","
	       "\"bootstrap\":{\"configRef\":{\"apiVersion\":\"bootstrap.cluster.x-k8s.io/v1beta1\",\"kind\":"
	       "\"KubeadmConfigTemplate\",\"name\":\"%s-boot\"}},\"infrastructureRef\":{\"apiVersion\":"
	       "\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"E2EMachineTemplate\",\"name\":\"%s-infra\"}}}}}",
	       name, annotations, labels, replicas, name, name, name, name, name, name);
}

#define SIZES(min, max) "\"" MIN_ANN "\":\"" min "\",\"" MAX_ANN "\":\"" max "\""
#define GPU_CAP "\"" CAP "cpu\":\"16\",\"" CAP "memory\":\"64Gi\",\"" CAP "gpu-count\":\"4\","
#define ZONE_A "\"" CAP "labels\":\"topology.kubernetes.io/zone=zone-a\""

/* Two templates (one named, one by label; one is also a node group), one
 * MachineDeployment without scale-from-zero data and a plain group. */
static void templates(void)
{
	md("gpu", SIZES("0", "3") "," GPU_CAP ZONE_A, "", 0);
	md("highmem", "\"" CAP "cpu\":\"4\",\"" CAP "memory\":\"256Gi\"", "\"provreqd.io/template\":\"yes\"", 0);
	md("nodata", "", "\"provreqd.io/template\":\"yes\"", 0);
	md("plain", SIZES("0", "5") ",\"" CAP "cpu\":\"2\",\"" CAP "memory\":\"4Gi\"", "", 1);
}

#define CONFIG "namespace: ns1\nautoProvisioning:\n  templates: [gpu]\n  templateSelector: provreqd.io/template=yes\n" \
	"  maxSize: 8\n"

static json_object *stored(const char *name)
{
	char path[512];
	long st = 0;
	json_object *o;
	snprintf(path, sizeof(path), CAPI "/namespaces/ns1/machinedeployments/%s", name);
	o = api("GET", path, NULL, &st);
	if(st != 200) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* The string at a path of members (a digit: an array index), or NULL. */
static const char *at(json_object *o, const char *const *path)
{
	for(; *path && o; path++)
		o = json_object_is_type(o, json_type_array) ? json_object_array_get_idx(o, (size_t)strtoul(*path, NULL, 10))
							    : json_object_object_get(o, *path);
	return o ? json_object_get_string(o) : NULL;
}
#define AT(o, ...) at(o, (const char *const[]){__VA_ARGS__, NULL})
/* (NULL-safe: a missing member fails the assertion, not the process.) */
#define EQ(a, b) CU_ASSERT_STRING_EQUAL((a) ? (a) : "(absent)", b)

static prd_cloud_group_create request(const char *id, const char *shape, const char *zone,
				      const prd_cloud_label *labels, size_t nl, const prd_cloud_taint *taints, size_t nt)
{
	prd_cloud_group_create r;
	memset(&r, 0, sizeof(r));
	r.struct_size = sizeof(r);
	r.group_id = id;
	r.shape = shape;
	r.zone = zone;
	r.labels = labels;
	r.nlabels = nl;
	r.taints = taints;
	r.ntaints = nt;
	r.max_size = 4;
	r.owner = OWNER;
	return r;
}

static int make(const prd_cloud_group_create *r, prd_cloud_error *e)
{
	memset(e, 0, sizeof(*e));
	return drv->api->create_group(drv->state, r, e);
}

static bool listed(const char *id, int32_t *max, int32_t *target)
{
	prd_cloud_node_group *g = NULL;
	size_t n = 0, i;
	bool found = false;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->node_groups(drv->state, &g, &n, &e), 0);
	for(i = 0; i < n; i++)
		if(!strcmp(g[i].id, id)) {
			found = true;
			if(max)
				*max = g[i].max_size;
			if(target)
				*target = g[i].target_size;
		}
	drv->api->release_node_groups(drv->state, g, n);
	return found;
}

static size_t count_mds(void)
{
	json_object *l = api("GET", CAPI "/namespaces/ns1/machinedeployments", NULL, NULL);
	size_t n = json_object_array_length(json_object_object_get(l, "items"));
	json_object_put(l);
	return n;
}

static void test_shapes(void)
{
	prd_cloud_shape *v = NULL;
	prd_cloud_error e = {0, ""};
	size_t n = 0, i;
	json_object *node;
	fresh_api();
	templates();
	load("namespace: ns1\n");
	/* Without autoProvisioning: no shapes, yet the five entries exist. */
	CU_ASSERT_EQUAL(drv->api->shapes(drv->state, &v, &n, &e), 0);
	CU_ASSERT_EQUAL(n, 0);
	drv->api->release_shapes(drv->state, v, n);
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	load(CONFIG);
	CU_ASSERT_EQUAL_FATAL(drv->api->shapes(drv->state, &v, &n, &e), 0);
	/* gpu (named) and highmem (selected); nodata has no capacity. */
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[0].name, "gpu");
	CU_ASSERT_STRING_EQUAL(v[0].zones, "zone-a");
	CU_ASSERT_EQUAL(v[0].max_size, 8);
	CU_ASSERT_EQUAL(v[0].price_micros, -1);
	node = json_tokener_parse(v[0].node_json);
	EQ(AT(node, "status", "capacity", "nvidia.com/gpu"), "4");
	EQ(AT(node, "status", "capacity", "cpu"), "16");
	json_object_put(node);
	CU_ASSERT_STRING_EQUAL(v[1].name, "highmem");
	CU_ASSERT_STRING_EQUAL(v[1].zones, "");
	for(i = 0; i < n; i++)
		CU_ASSERT_NOT_EQUAL(strcmp(v[i].name, "plain"), 0);
	drv->api->release_shapes(drv->state, v, n);
}

static void test_create(void)
{
	prd_cloud_label lab[] = {{"node.cluster.x-k8s.io/accelerator", "a100"}};
	prd_cloud_group_create r = request("nap-gpu-0a1b2c3d", "gpu", "zone-a", lab, 1, NULL, 0);
	prd_cloud_error e;
	json_object *o, *node;
	int32_t max = 0, target = -1;
	char *tn = NULL;
	fresh_api();
	templates();
	load(CONFIG);
	CU_ASSERT_EQUAL_FATAL(make(&r, &e), 0);
	o = stored("nap-gpu-0a1b2c3d");
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	EQ(AT(o, "spec", "replicas"), "0");
	EQ(AT(o, "spec", "clusterName"), "c1");
	EQ(AT(o, "metadata", "annotations", MIN_ANN), "0");
	EQ(AT(o, "metadata", "annotations", MAX_ANN), "4");
	EQ(AT(o, "metadata", "annotations", "provreqd.io/auto-provisioned-by"), OWNER);
	EQ(AT(o, "metadata", "annotations", "provreqd.io/shape"), "gpu");
	EQ(AT(o, "metadata", "annotations", "provreqd.io/zone"), "zone-a");
	EQ(AT(o, "metadata", "labels", "provreqd.io/auto-provisioned-group"), "nap-gpu-0a1b2c3d");
	/* Its own selector; the template's references shared. */
	EQ(AT(o, "spec", "selector", "matchLabels", "cluster.x-k8s.io/deployment-name"),
			       "nap-gpu-0a1b2c3d");
	CU_ASSERT_PTR_NULL(AT(o, "spec", "selector", "matchLabels", "pool"));
	CU_ASSERT_PTR_NULL(AT(o, "spec", "template", "metadata", "labels", "pool"));
	EQ(AT(o, "spec", "template", "metadata", "labels", "team"), "a");
	EQ(AT(o, "spec", "template", "metadata", "labels", "cluster.x-k8s.io/deployment-name"),
			       "nap-gpu-0a1b2c3d");
	EQ(AT(o, "spec", "template", "metadata", "labels", "node.cluster.x-k8s.io/accelerator"),
			       "a100");
	EQ(AT(o, "spec", "template", "spec", "infrastructureRef", "name"), "gpu-infra");
	EQ(AT(o, "spec", "template", "spec", "bootstrap", "configRef", "name"), "gpu-boot");
	/* Not the template's sizes. */
	CU_ASSERT_STRING_NOT_EQUAL(AT(o, "metadata", "annotations", MAX_ANN) ? AT(o, "metadata", "annotations", MAX_ANN) : "3", "3");
	json_object_put(o);
	/* Listed at once under the host's id (its increase comes next), with
	 * the label in its template node. */
	CU_ASSERT_TRUE(listed("nap-gpu-0a1b2c3d", &max, &target));
	CU_ASSERT_EQUAL(max, 4);
	CU_ASSERT_EQUAL(target, 0);
	CU_ASSERT_EQUAL_FATAL(drv->api->template_node(drv->state, "nap-gpu-0a1b2c3d", &tn, &e), 0);
	node = json_tokener_parse(tn);
	EQ(AT(node, "metadata", "labels", "node.cluster.x-k8s.io/accelerator"), "a100");
	EQ(AT(node, "metadata", "labels", "topology.kubernetes.io/zone"), "zone-a");
	EQ(AT(node, "status", "capacity", "nvidia.com/gpu"), "4");
	json_object_put(node);
	drv->api->release_string(drv->state, tn);
	/* The created group is never a template. */
	{
		prd_cloud_shape *v = NULL;
		size_t n = 0;
		CU_ASSERT_EQUAL(drv->api->shapes(drv->state, &v, &n, &e), 0);
		CU_ASSERT_EQUAL(n, 2);
		drv->api->release_shapes(drv->state, v, n);
	}
}

static void test_create_refuses(void)
{
	prd_cloud_label bad[] = {{"example.com/team", "b"}};
	prd_cloud_label role[] = {{"node-role.kubernetes.io/gpu", ""}, {"x.node-restriction.kubernetes.io/a", "b"}};
	prd_cloud_taint taint[] = {{"nvidia.com/gpu", "true", "NoSchedule"}};
	prd_cloud_group_create r;
	prd_cloud_error e;
	json_object *o;
	size_t before;
	fresh_api();
	templates();
	load(CONFIG);
	before = count_mds();
	r = request("nap-gpu-11111111", "gpu", NULL, bad, 1, NULL, 0);
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "example.com/team"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "node.cluster.x-k8s.io"));
	r = request("nap-gpu-22222222", "gpu", NULL, NULL, 0, taint, 1);
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "MachineTaintPropagation"));
	r = request("nap-gpu-33333333", "gpu", "zone-b", NULL, 0, NULL, 0);
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_EINVAL);
	r = request("nap-nodata-44444444", "nodata", NULL, NULL, 0, NULL, 0);
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_EINVAL);
	r = request("nap-gpu-55555555", "gpu", NULL, NULL, 0, NULL, 0);
	r.max_size = 9;
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(count_mds(), before);
	/* The domains Cluster API copies to Nodes are allowed. */
	r = request("nap-gpu-66666666", "gpu", NULL, role, 2, NULL, 0);
	CU_ASSERT_EQUAL(make(&r, &e), 0);
	CU_ASSERT_EQUAL(count_mds(), before + 1);
	/* Taints, once the operator says the feature gate is on. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	load(CONFIG "  machineTaints: true\n");
	r = request("nap-gpu-77777777", "gpu", NULL, NULL, 0, taint, 1);
	CU_ASSERT_EQUAL_FATAL(make(&r, &e), 0);
	o = stored("nap-gpu-77777777");
	EQ(AT(o, "spec", "template", "spec", "taints", "0", "key"), "nvidia.com/gpu");
	json_object_put(o);
}

static void test_create_repeated(void)
{
	prd_cloud_group_create r = request("nap-highmem-0000beef", "highmem", NULL, NULL, 0, NULL, 0);
	prd_cloud_error e;
	json_object *o;
	long st = 0;
	size_t before;
	fresh_api();
	templates();
	load(CONFIG);
	before = count_mds();
	CU_ASSERT_EQUAL_FATAL(make(&r, &e), 0);
	CU_ASSERT_EQUAL(make(&r, &e), 0); /* the host lost the answer */
	CU_ASSERT_EQUAL(count_mds(), before + 1);
	r.owner = "another-plan";
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_ECONFLICT);
	r = request("nap-highmem-0000beef", "gpu", NULL, NULL, 0, NULL, 0);
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_ECONFLICT);
	/* An existing MachineDeployment of that name that is not ours. */
	r = request("plain", "gpu", NULL, NULL, 0, NULL, 0);
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_EQUAL(count_mds(), before + 1);
	/* Ours but being deleted (the MachineDeployment controller's
	 * finalizer holds it a moment): not a group made, a retry later.
	 * Catches a driver that answers "made" for a group about to vanish
	 * (the plan would then wait for it until its deadline). */
	o = stored("nap-highmem-0000beef");
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	json_object_object_add(json_object_object_get(o, "metadata"), "finalizers",
			       json_tokener_parse("[\"cluster.x-k8s.io/machinedeployment\"]"));
	json_object_put(api("PUT", CAPI "/namespaces/ns1/machinedeployments/nap-highmem-0000beef",
			    json_object_to_json_string(o), &st));
	json_object_put(o);
	CU_ASSERT_EQUAL(st, 200);
	json_object_put(api("DELETE", CAPI "/namespaces/ns1/machinedeployments/nap-highmem-0000beef", NULL, &st));
	o = stored("nap-highmem-0000beef");
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	CU_ASSERT_PTR_NOT_NULL(json_object_object_get(json_object_object_get(o, "metadata"), "deletionTimestamp"));
	json_object_put(o);
	r = request("nap-highmem-0000beef", "highmem", NULL, NULL, 0, NULL, 0);
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_EAGAIN);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "being deleted"));
}

static void test_delete(void)
{
	prd_cloud_group_create r = request("nap-gpu-0000dead", "gpu", NULL, NULL, 0, NULL, 0);
	prd_cloud_error e = {0, ""};
	json_object *o;
	long st;
	fresh_api();
	templates();
	load(CONFIG);
	CU_ASSERT_EQUAL_FATAL(make(&r, &e), 0);
	/* Groups it did not make: refused, or (without its marks, nothing
	 * of that id was made) not there; either way nothing is deleted. */
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "MachineDeployment/ns1/plain", &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(o = stored("plain"));
	json_object_put(o);
	md("nap-gpu-99999999", SIZES("0", "3"), "", 0);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	drv->api->delete_group(drv->state, "nap-gpu-99999999", &e);
	CU_ASSERT_PTR_NOT_NULL(o = stored("nap-gpu-99999999"));
	json_object_put(o);
	/* Marked by hand as ours, but no longer with the group label: not
	 * ours either. */
	json_object_put(api("PATCH", CAPI "/namespaces/ns1/machinedeployments/nap-gpu-99999999",
			    "{\"metadata\":{\"labels\":{\"provreqd.io/auto-provisioned-group\":\"nap-gpu-99999999\"}}}",
			    &st));
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-gpu-99999999", &e), PRD_CLOUD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(o = stored("nap-gpu-99999999"));
	json_object_put(o);
	/* Not empty: replicas, then a Machine left. */
	json_object_put(api("PATCH", CAPI "/namespaces/ns1/machinedeployments/nap-gpu-0000dead",
			    "{\"spec\":{\"replicas\":1}}", &st));
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-gpu-0000dead", &e), PRD_CLOUD_ERANGE);
	json_object_put(api("PATCH", CAPI "/namespaces/ns1/machinedeployments/nap-gpu-0000dead",
			    "{\"spec\":{\"replicas\":0}}", &st));
	create(CAPI "/namespaces/ns1/machines",
	       "{\"metadata\":{\"name\":\"m1\",\"labels\":{\"cluster.x-k8s.io/deployment-name\":\"nap-gpu-0000dead\","
	       "\"cluster.x-k8s.io/cluster-name\":\"c1\"}},\"spec\":{\"clusterName\":\"c1\"}}");
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-gpu-0000dead", &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_PTR_NOT_NULL(o = stored("nap-gpu-0000dead"));
	json_object_put(o);
	json_object_put(api("DELETE", CAPI "/namespaces/ns1/machines/m1", NULL, &st));
	/* Empty and ours: gone, and no longer listed. */
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-gpu-0000dead", &e), 0);
	CU_ASSERT_PTR_NULL(stored("nap-gpu-0000dead"));
	CU_ASSERT_FALSE(listed("nap-gpu-0000dead", NULL, NULL));
	/* Gone is not an error. */
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-gpu-0000dead", &e), 0);
	CU_ASSERT_PTR_NOT_NULL(o = stored("plain"));
	json_object_put(o);
	/* Deleted but held a moment by the MachineDeployment controller's
	 * finalizer: no longer listed after a refresh, so no plan counts on
	 * a group about to vanish. Catches a driver that lists it (a plan
	 * made on it then waits for nodes that never come, e2e 87 path nap). */
	r = request("nap-gpu-0000f1a1", "gpu", NULL, NULL, 0, NULL, 0);
	CU_ASSERT_EQUAL_FATAL(make(&r, &e), 0);
	json_object_put(api("PATCH", CAPI "/namespaces/ns1/machinedeployments/nap-gpu-0000f1a1",
			    "{\"metadata\":{\"finalizers\":[\"cluster.x-k8s.io/machinedeployment\"]}}", &st));
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-gpu-0000f1a1", &e), 0);
	CU_ASSERT_PTR_NOT_NULL(o = stored("nap-gpu-0000f1a1"));
	json_object_put(o);
	CU_ASSERT_EQUAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_FALSE(listed("nap-gpu-0000f1a1", NULL, NULL));
}

static void test_owner_after_restart(void)
{
	prd_cloud_group_create r = request("nap-gpu-00c0ffee", "gpu", NULL, NULL, 0, NULL, 0);
	prd_cloud_error e = {0, ""};
	char *owner = NULL;
	fresh_api();
	templates();
	load(CONFIG);
	CU_ASSERT_EQUAL_FATAL(make(&r, &e), 0);
	/* A new process: only the API knows. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	load(CONFIG);
	CU_ASSERT_EQUAL_FATAL(drv->api->refresh(drv->state, &e), 0);
	CU_ASSERT_TRUE(listed("nap-gpu-00c0ffee", NULL, NULL));
	CU_ASSERT_EQUAL_FATAL(drv->api->group_owner(drv->state, "nap-gpu-00c0ffee", &owner, &e), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(owner);
	CU_ASSERT_STRING_EQUAL(owner, OWNER);
	drv->api->release_string(drv->state, owner);
	owner = NULL;
	CU_ASSERT_EQUAL(drv->api->group_owner(drv->state, "MachineDeployment/ns1/plain", &owner, &e), 0);
	CU_ASSERT_PTR_NULL(owner);
	CU_ASSERT_EQUAL(drv->api->group_owner(drv->state, "nap-none-00000000", &owner, &e), PRD_CLOUD_ENOTFOUND);
	/* A repeat after the restart is still the same group. */
	CU_ASSERT_EQUAL(make(&r, &e), 0);
}

static void test_creation_fence(void)
{
	prd_cloud_group_create r = request("nap-gpu-000fe0ce", "gpu", NULL, NULL, 0, NULL, 0);
	prd_cloud_error e = {0, ""};
	json_object *o;
	fresh_api();
	templates();
	load(CONFIG);
	/* Term 5 begins: recorded on every template. */
	CU_ASSERT_EQUAL_FATAL(drv->api->fence(drv->state, NULL, "provreqd", 5, &e), 0);
	o = stored("gpu");
	EQ(AT(o, "metadata", "annotations", "creations.provreqd.io/fence-provreqd"), "5");
	json_object_put(o);
	o = stored("highmem");
	EQ(AT(o, "metadata", "annotations", "creations.provreqd.io/fence-provreqd"), "5");
	json_object_put(o);
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, NULL, "provreqd", 4, &e), PRD_CLOUD_ECONFLICT);
	/* A stalled leader of term 4 creates nothing. */
	r.fence_key = "provreqd";
	r.fence_term = 4;
	CU_ASSERT_EQUAL(make(&r, &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NULL(stored("nap-gpu-000fe0ce"));
	/* Term 5 creates the group fenced from its first moment. */
	r.fence_term = 5;
	CU_ASSERT_EQUAL_FATAL(make(&r, &e), 0);
	o = stored("nap-gpu-000fe0ce");
	EQ(AT(o, "metadata", "annotations", "provreqd.io/fence-provreqd"), "5");
	json_object_put(o);
	/* A newer leader fenced the group: this process's delete refuses. */
	CU_ASSERT_EQUAL(drv->api->fence(drv->state, "nap-gpu-000fe0ce", "provreqd", 6, &e), 0);
	CU_ASSERT_EQUAL(drv->api->delete_group(drv->state, "nap-gpu-000fe0ce", &e), PRD_CLOUD_ECONFLICT);
	CU_ASSERT_PTR_NOT_NULL(o = stored("nap-gpu-000fe0ce"));
	json_object_put(o);
}

static void test_config(void)
{
	prd_err e;
	fresh_api();
	/* The namespace may come after the templates. */
	load("autoProvisioning:\n  templates: [gpu]\nnamespace: ns1\n");
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	prd_err_clear(&e);
	CU_ASSERT_NOT_EQUAL(cloud_drivers_load(&set, module_path(), &host.host, "autoProvisioning:\n  templates: [gpu]\n",
					       &drv, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "names no namespace"));
	CU_ASSERT_NOT_EQUAL(cloud_drivers_load(&set, module_path(), &host.host, "autoProvisioning: {maxSize: 3}\n", &drv,
					       &e), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "needs templates or a templateSelector"));
	CU_ASSERT_NOT_EQUAL(cloud_drivers_load(&set, module_path(), &host.host,
					       "autoProvisioning: {templates: [a], colour: blue}\n", &drv, &e),
			    0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "unknown or malformed key 'colour'"));
}

static const test_case cases[] = {
	{"config: autoProvisioning keys", test_config},
	{"shapes: one per template with scale-from-zero data", test_shapes},
	{"create_group: a MachineDeployment from the template", test_create},
	{"create_group: labels, taints, zones and sizes it refuses", test_create_refuses},
	{"create_group: repeated is the same group, else a conflict; one being deleted is a retry", test_create_repeated},
	{"delete_group: only an empty group it made", test_delete},
	{"group_owner after a restart: the marks are in the API", test_owner_after_restart},
	{"fence: the creations' term on the templates", test_creation_fence},
	{NULL, NULL}};

int main(void)
{
	int rc = test_run("clusterapi node auto-provisioning", cases);
	teardown();
	return rc;
}

/* The karpenter driver, loaded from its built module through the loader,
 * against the in-memory API taught NodePools and NodeClaims. Karpenter
 * itself is played by the test: it writes NodeClaim status and deletes
 * NodeClaims the way Karpenter's controllers do. */
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
static char logbuf[16384];
static int fail_post_at; /* fail the Nth POST of a NodeClaim (0 = none) */
static int posts;

#define KARP "/apis/karpenter.sh/v1"
#define C4 "general/c-4x/zone-a/on-demand"

static const kube_resource NODEPOOLS = {"karpenter.sh", "v1", "nodepools", "NodePool", false};
static const kube_resource NODECLAIMS = {"karpenter.sh", "v1", "nodeclaims", "NodeClaim", false};

static const char *CONFIG = "shapes:\n"
			    "- instanceType: c-4x\n"
			    "  zone: zone-a\n"
			    "  capacityType: on-demand\n"
			    "  labels: {kubernetes.io/arch: amd64}\n"
			    "  capacity: {cpu: \"4\", memory: 16Gi, pods: \"110\"}\n"
			    "  allocatable: {cpu: 3900m, memory: 15Gi, pods: \"110\"}\n"
			    "- instanceType: c-8x\n"
			    "- instanceType: m-2x\n"
			    "  capacityType: spot\n";

static const char *module_path(void)
{
	static char path[1024];
	const char *b = getenv("PRD_BUILDDIR");
	snprintf(path, sizeof(path), "%s/cloud/karpenter/.libs/karpenter.so", b ? b : ".");
	return path;
}

static void capture_log(void *ctx, int level, const char *message)
{
	size_t len = strlen(logbuf);
	(void)ctx;
	snprintf(logbuf + len, sizeof(logbuf) - len, "%d %s\n", level, message);
}

/* The memapi, with the Nth POST of a NodeClaim failing when asked. */
static int request(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
		   long *status, char **resp, size_t *resp_len, prd_cloud_error *err)
{
	if(!strcmp(method, "POST") && strstr(path, "/nodeclaims") && ++posts == fail_post_at) {
		*status = 500;
		*resp = NULL;
		*resp_len = 0;
		snprintf(err->message, sizeof(err->message), "injected");
		return PRD_CLOUD_EIO;
	}
	return cloud_host_memapi_request(ud, method, path, ct, body, len, status, resp, resp_len, err);
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
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &NODEPOOLS, MEMAPI_STATUS | MEMAPI_GENERATION), 0);
	CU_ASSERT_EQUAL_FATAL(memapi_add_kind(m, &NODECLAIMS, MEMAPI_STATUS | MEMAPI_GENERATION), 0);
	cloud_host_init(&host, "driver/karpenter", &fake, request, m);
	host.host.log = capture_log;
	logbuf[0] = '\0';
	fail_post_at = 0;
	posts = 0;
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

static void refresh(void)
{
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->refresh(drv->state, &e), 0);
}

/* min/max/target of a group; false when there is no such group. */
static bool sizes(const char *id, int32_t *max, int32_t *target)
{
	prd_cloud_node_group *g = NULL;
	size_t n = 0, i;
	bool found = false;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->node_groups(drv->state, &g, &n, &e), 0);
	for(i = 0; i < n; i++) {
		if(!strcmp(g[i].id, id)) {
			found = true;
			CU_ASSERT_EQUAL(g[i].min_size, 0);
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

/* A NodePool with a KWOKNodeClass ref, template labels, a taint, the given
 * requirements (JSON list members) and limits (JSON map members). */
static void nodepool(const char *name, const char *reqs, const char *limits, const char *extra_spec)
{
	create(KARP "/nodepools",
	       "{\"metadata\":{\"name\":\"%s\",\"annotations\":{\"karpenter.sh/nodepool-hash\":\"h1\"}},"
	       "\"spec\":{%s\"template\":{\"metadata\":{\"labels\":{\"team\":\"ml\"}},\"spec\":{"
	       "\"nodeClassRef\":{\"group\":\"karpenter.kwok.sh\",\"kind\":\"KWOKNodeClass\",\"name\":\"default\"},"
	       "\"taints\":[{\"key\":\"gpu\",\"effect\":\"NoSchedule\"}],"
	       "\"startupTaints\":[{\"key\":\"boot\",\"effect\":\"NoSchedule\"}],"
	       "\"expireAfter\":\"720h\",\"requirements\":[%s]}},\"limits\":{%s}}}",
	       name, extra_spec, reqs, limits);
}

static void general(const char *limits)
{
	nodepool("general",
		 "{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\",\"values\":[\"c-4x\",\"c-8x\"]},"
		 "{\"key\":\"karpenter.sh/capacity-type\",\"operator\":\"In\",\"values\":[\"on-demand\"]},"
		 "{\"key\":\"topology.kubernetes.io/zone\",\"operator\":\"In\",\"values\":[\"zone-a\",\"zone-b\"]}",
		 limits, "");
}

static json_object *get(const char *path)
{
	long st = 0;
	json_object *o = api("GET", path, NULL, &st);
	CU_ASSERT_EQUAL(st, 200);
	return o;
}

static json_object *jpath(json_object *o, const char *a, const char *b, const char *c)
{
	json_object *v = json_object_object_get(o, a);
	if(b)
		v = json_object_object_get(v, b);
	if(c)
		v = json_object_object_get(v, c);
	return v;
}

static const char *jstr(json_object *o, const char *a, const char *b, const char *c)
{
	json_object *v = jpath(o, a, b, c);
	return v ? json_object_get_string(v) : NULL;
}

static size_t claim_count(void)
{
	json_object *l = get(KARP "/nodeclaims");
	size_t n = json_object_array_length(json_object_object_get(l, "items"));
	json_object_put(l);
	return n;
}

static int grow(const char *group, int32_t delta, const char *owner, prd_cloud_error *e)
{
	prd_cloud_increase rq;
	memset(&rq, 0, sizeof(rq));
	rq.struct_size = sizeof(rq);
	rq.group_id = group;
	rq.delta = delta;
	rq.atomic = 1;
	rq.expected_target = -1;
	rq.owner = owner;
	return drv->api->increase(drv->state, &rq, e);
}

static prd_cloud_instance *instances(const char *group, size_t *n)
{
	prd_cloud_instance *v = NULL;
	prd_cloud_error e = {0, ""};
	CU_ASSERT_EQUAL_FATAL(drv->api->instances(drv->state, group, &v, n, &e), 0);
	return v;
}

/* The only NodeClaim (a new reference), failing the test unless there is
 * exactly one. */
static json_object *only_claim(void)
{
	json_object *l = get(KARP "/nodeclaims"), *items = json_object_object_get(l, "items"), *c;
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(items), 1);
	c = json_object_get(json_object_array_get_idx(items, 0));
	json_object_put(l);
	return c;
}

/* Play Karpenter: set a NodeClaim's status (JSON members). */
static void claim_status(const char *name, const char *status)
{
	char path[300], body[2048];
	json_object *o, *st;
	long code;
	snprintf(path, sizeof(path), KARP "/nodeclaims/%s", name);
	o = get(path);
	st = json_tokener_parse(status);
	CU_ASSERT_PTR_NOT_NULL_FATAL(st);
	json_object_object_add(o, "status", st);
	snprintf(body, sizeof(body), "%s", json_object_to_json_string(o));
	json_object_put(o);
	snprintf(path, sizeof(path), KARP "/nodeclaims/%s/status", name);
	json_object_put(api("PUT", path, body, &code));
	CU_ASSERT_EQUAL(code, 200);
}

static void test_groups_from_nodepools(void)
{
	int32_t max = -1, target = -1;
	fresh_api();
	general("");
	nodepool("other", "{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"NotIn\",\"values\":[\"c-4x\"]}",
		 "", "");
	nodepool("static", "", "", "\"replicas\":2,");
	nodepool("arm", "{\"key\":\"kubernetes.io/arch\",\"operator\":\"In\",\"values\":[\"arm64\"]}", "", "");
	load(CONFIG);
	/* general: c-4x (its zone and capacity type allowed) and c-8x (nothing
	 * pinned); m-2x is spot, general wants on-demand. other: not c-4x.
	 * static NodePools are Karpenter's alone; arm refuses c-4x's amd64
	 * and allows what does not say its arch. */
	CU_ASSERT_TRUE(sizes(C4, &max, &target));
	CU_ASSERT_EQUAL(target, 0);
	CU_ASSERT_EQUAL(max, INT32_MAX);
	CU_ASSERT_TRUE(sizes("general/c-8x/any/any", NULL, NULL));
	CU_ASSERT_FALSE(sizes("general/m-2x/any/spot", NULL, NULL));
	CU_ASSERT_FALSE(sizes("other/c-4x/zone-a/on-demand", NULL, NULL));
	CU_ASSERT_TRUE(sizes("other/c-8x/any/any", NULL, NULL));
	CU_ASSERT_TRUE(sizes("other/m-2x/any/spot", NULL, NULL));
	CU_ASSERT_FALSE(sizes("static/c-8x/any/any", NULL, NULL));
	CU_ASSERT_FALSE(sizes("arm/c-4x/zone-a/on-demand", NULL, NULL));
	CU_ASSERT_TRUE(sizes("arm/c-8x/any/any", NULL, NULL));
	CU_ASSERT_EQUAL(group_count(), 6);
	/* Malformed NodePools are no crash: a bad requirement refuses
	 * nothing it cannot read, a bad limit bounds nothing. */
	create(KARP "/nodepools", "{\"metadata\":{\"name\":\"odd\"},\"spec\":{\"limits\":\"cpu\",\"template\":{"
				  "\"metadata\":{\"labels\":[1]},\"spec\":{\"requirements\":[{\"key\":\"karpenter.sh/capacity-type\","
				  "\"operator\":\"Gt\",\"values\":\"x\"},7,{\"key\":\"node.kubernetes.io/instance-type\","
				  "\"operator\":\"In\"}]}}}}");
	create(KARP "/nodepools", "{\"metadata\":{\"name\":\"odd2\"},\"spec\":{\"limits\":{\"cpu\":[1],\"memory\":\"lots\"},"
				  "\"template\":{\"spec\":{\"requirements\":{}}}}}");
	refresh();
	CU_ASSERT_TRUE(sizes("odd2/c-4x/zone-a/on-demand", &max, NULL));
	CU_ASSERT_EQUAL(max, INT32_MAX);
	{
		char *json = NULL;
		prd_cloud_error e = {0, ""};
		if(sizes("odd/c-8x/any/any", NULL, NULL)) {
			CU_ASSERT_EQUAL(drv->api->template_node(drv->state, "odd/c-8x/any/any", &json, &e), PRD_CLOUD_ENOTFOUND);
		}
		CU_ASSERT_EQUAL(grow("odd2/c-4x/zone-a/on-demand", 1, "tok", &e), 0);
	}
	/* The config can name the NodePools. */
	cloud_drivers_free(&set);
	cloud_drivers_init(&set);
	{
		char cfg[1024];
		snprintf(cfg, sizeof(cfg), "nodePools: [other]\n%s", CONFIG);
		load(cfg);
	}
	CU_ASSERT_EQUAL(group_count(), 2);
	CU_ASSERT_EQUAL(drv->api->capabilities, PRD_CLOUD_CAP_OWNER_MARK | PRD_CLOUD_CAP_CREATION_TIME);
}

static void test_bad_config(void)
{
	static const char *const cases[][2] = {
		{"", "a shape table is needed"},
		{"shapes: []\n", "shapes is empty"},
		{"shapes:\n- zone: a\n", "shapes[0] has no instanceType"},
		{"shapes:\n- instanceType: a\n  capacity: {cpu: lots}\n", "shapes[0].capacity.cpu: 'lots' is not"},
		{"shapes:\n- instanceType: a\n- instanceType: a\n  zone: z\n", "shapes[0] and shapes[1] overlap"},
		{"shapes:\n- instanceType: a\n  zonez: z\n", "unknown key 'zonez'"},
		{"shape: []\n", "unknown key 'shape'"},
		{"shapes:\n- instanceType: -a\n", "shapes[0].instanceType must be a label value"},
		{"doNotDisrupt: maybe\nshapes:\n- instanceType: a\n", "doNotDisrupt must be true or false"},
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
	/* Two entries of one type that pin different zones do not overlap. */
	load("shapes:\n- instanceType: a\n  zone: z1\n- instanceType: a\n  zone: z2\n");
}

static json_object *template_of(const char *id, int want_rc, char *msg, size_t n)
{
	prd_cloud_error e = {0, ""};
	char *json = NULL;
	json_object *t = NULL;
	CU_ASSERT_EQUAL(drv->api->template_node(drv->state, id, &json, &e), want_rc);
	if(msg)
		snprintf(msg, n, "%s", e.message);
	if(json) {
		t = json_tokener_parse(json);
		drv->api->release_string(drv->state, json);
	}
	return t;
}

static void test_template(void)
{
	json_object *t;
	char msg[PRD_CLOUD_MSG_MAX];
	fresh_api();
	general("");
	nodepool("other", "", "", "");
	/* A c-8x Node already in the cluster tells c-8x's capacity. */
	create("/api/v1/nodes", "{\"metadata\":{\"name\":\"n8\",\"labels\":{\"node.kubernetes.io/instance-type\":\"c-8x\"}},"
				"\"status\":{\"capacity\":{\"cpu\":\"8\",\"memory\":\"32Gi\"},"
				"\"allocatable\":{\"cpu\":\"7800m\",\"memory\":\"30Gi\"}}}");
	load(CONFIG);
	t = template_of(C4, 0, NULL, 0);
	CU_ASSERT_STRING_EQUAL(jstr(t, "status", "capacity", "cpu"), "4");
	CU_ASSERT_STRING_EQUAL(jstr(t, "status", "allocatable", "cpu"), "3900m");
	CU_ASSERT_STRING_EQUAL(jstr(t, "metadata", "labels", "team"), "ml");
	CU_ASSERT_STRING_EQUAL(jstr(t, "metadata", "labels", "karpenter.sh/nodepool"), "general");
	CU_ASSERT_STRING_EQUAL(jstr(t, "metadata", "labels", "node.kubernetes.io/instance-type"), "c-4x");
	CU_ASSERT_STRING_EQUAL(jstr(t, "metadata", "labels", "topology.kubernetes.io/zone"), "zone-a");
	CU_ASSERT_STRING_EQUAL(jstr(t, "metadata", "labels", "karpenter.sh/capacity-type"), "on-demand");
	CU_ASSERT_STRING_EQUAL(jstr(t, "metadata", "labels", "kubernetes.io/arch"), "amd64");
	/* The NodePool's taint, not its startup taint. */
	CU_ASSERT_EQUAL(json_object_array_length(jpath(t, "spec", "taints", NULL)), 1);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
				       json_object_array_get_idx(jpath(t, "spec", "taints", NULL), 0), "key")),
			       "gpu");
	json_object_put(t);
	t = template_of("general/c-8x/any/any", 0, NULL, 0);
	CU_ASSERT_STRING_EQUAL(jstr(t, "status", "capacity", "cpu"), "8");
	CU_ASSERT_STRING_EQUAL(jstr(t, "status", "allocatable", "cpu"), "7800m");
	CU_ASSERT_PTR_NULL(jpath(t, "metadata", "labels", "topology.kubernetes.io/zone"));
	json_object_put(t);
	/* Nothing known of m-2x: reported, not guessed. */
	CU_ASSERT_PTR_NULL(template_of("other/m-2x/any/spot", PRD_CLOUD_ENOTFOUND, msg, sizeof(msg)));
	CU_ASSERT_PTR_NOT_NULL(strstr(msg, "nothing is known of instance type m-2x"));
	CU_ASSERT_PTR_NULL(template_of("nope", PRD_CLOUD_ENOTFOUND, NULL, 0));
}

static bool has_requirement(json_object *nc, const char *key, const char *op, const char *values)
{
	json_object *reqs = jpath(nc, "spec", "requirements", NULL);
	size_t i, n = json_object_array_length(reqs);
	for(i = 0; i < n; i++) {
		json_object *r = json_object_array_get_idx(reqs, i);
		if(!strcmp(json_object_get_string(json_object_object_get(r, "key")), key))
			return !strcmp(json_object_get_string(json_object_object_get(r, "operator")), op) &&
			       !strcmp(json_object_to_json_string_ext(json_object_object_get(r, "values"),
								      JSON_C_TO_STRING_PLAIN),
				       values);
	}
	return false;
}

static void test_increase_makes_pinned_nodeclaims(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v;
	json_object *nc;
	char name[128];
	size_t n = 0;
	int32_t target = -1;
	fresh_api();
	general("");
	load(CONFIG);
	CU_ASSERT_EQUAL(grow(C4, 1, "tok-1", &e), 0);
	nc = only_claim();
	CU_ASSERT_STRING_EQUAL(jstr(nc, "metadata", "labels", "provreqd.io/owner"), "tok-1");
	CU_ASSERT_STRING_EQUAL(jstr(nc, "metadata", "labels", "karpenter.sh/nodepool"), "general");
	CU_ASSERT_STRING_EQUAL(jstr(nc, "metadata", "labels", "team"), "ml");
	CU_ASSERT_STRING_EQUAL(jstr(nc, "metadata", "annotations", "karpenter.sh/do-not-disrupt"), "true");
	CU_ASSERT_STRING_EQUAL(jstr(nc, "metadata", "annotations", "karpenter.sh/nodepool-hash"), "h1");
	CU_ASSERT_STRING_EQUAL(jstr(json_object_array_get_idx(jpath(nc, "metadata", "ownerReferences", NULL), 0), "kind",
				    NULL, NULL),
			       "NodePool");
	CU_ASSERT_STRING_EQUAL(jstr(nc, "spec", "nodeClassRef", "name"), "default");
	CU_ASSERT_STRING_EQUAL(jstr(nc, "spec", "expireAfter", NULL), "720h");
	/* The shape pinned: one value each, the NodePool's wider lists gone. */
	CU_ASSERT_TRUE(has_requirement(nc, "node.kubernetes.io/instance-type", "In", "[\"c-4x\"]"));
	CU_ASSERT_TRUE(has_requirement(nc, "topology.kubernetes.io/zone", "In", "[\"zone-a\"]"));
	CU_ASSERT_TRUE(has_requirement(nc, "karpenter.sh/capacity-type", "In", "[\"on-demand\"]"));
	CU_ASSERT_TRUE(has_requirement(nc, "karpenter.sh/nodepool", "In", "[\"general\"]"));
	CU_ASSERT_EQUAL(json_object_array_length(jpath(nc, "spec", "requirements", NULL)), 4);
	json_object_put(nc);
	CU_ASSERT_TRUE(sizes(C4, NULL, &target));
	CU_ASSERT_EQUAL(target, 1);
	/* The instance: the NodeClaim by name, owner and creation time, no
	 * node yet. */
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(v[0].owner, "tok-1");
	CU_ASSERT_EQUAL(v[0].created_ns, 1714557600LL * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(v[0].state, PRD_CLOUD_INSTANCE_CREATING);
	CU_ASSERT_PTR_NULL(v[0].node_name);
	CU_ASSERT_EQUAL(v[0].error_class, PRD_CLOUD_ERRCLASS_NONE);
	/* Karpenter launches it and its Node registers. */
	claim_status(v[0].id, "{\"nodeName\":\"node-1\",\"conditions\":[{\"type\":\"Launched\",\"status\":\"True\","
			      "\"reason\":\"Launched\"},{\"type\":\"Registered\",\"status\":\"True\",\"reason\":\"Registered\"}]}");
	drv->api->release_instances(drv->state, v, n);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_STRING_EQUAL(v[0].node_name, "node-1");
	CU_ASSERT_EQUAL(v[0].state, PRD_CLOUD_INSTANCE_RUNNING);
	snprintf(name, sizeof(name), "%s", v[0].id);
	drv->api->release_instances(drv->state, v, n);
	/* Another group's NodeClaims are not this group's instances. */
	v = instances("general/c-8x/any/any", &n);
	CU_ASSERT_EQUAL(n, 0);
	drv->api->release_instances(drv->state, v, n);
	/* An expected target that is not the group's: nothing made. */
	{
		prd_cloud_increase rq;
		memset(&rq, 0, sizeof(rq));
		rq.struct_size = sizeof(rq);
		rq.group_id = C4;
		rq.delta = 1;
		rq.expected_target = 0;
		CU_ASSERT_EQUAL(drv->api->increase(drv->state, &rq, &e), PRD_CLOUD_ECONFLICT);
	}
	CU_ASSERT_EQUAL(claim_count(), 1);
	/* Once registered it is Karpenter's: consolidated away, it is gone,
	 * not a failure. */
	{
		char path[300];
		long st;
		snprintf(path, sizeof(path), KARP "/nodeclaims/%s", name);
		json_object_put(api("DELETE", path, NULL, &st));
		CU_ASSERT_EQUAL(st, 200);
	}
	v = instances(C4, &n);
	CU_ASSERT_EQUAL(n, 0);
	drv->api->release_instances(drv->state, v, n);
}

static void test_limits(void)
{
	prd_cloud_error e = {0, ""};
	int32_t max = -1, target = -1;
	fresh_api();
	/* cpu 10 leaves room for two c-4x (4 cpu each). */
	general("\"cpu\":\"10\"");
	load(CONFIG);
	CU_ASSERT_TRUE(sizes(C4, &max, &target));
	CU_ASSERT_EQUAL(max, 2);
	CU_ASSERT_EQUAL(grow(C4, 3, "tok-1", &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "NodePool general limit cpu=10"));
	CU_ASSERT_EQUAL(claim_count(), 0);
	/* A NodeClaim Karpenter made for itself counts, by its capacity. */
	create(KARP "/nodeclaims",
	       "{\"metadata\":{\"name\":\"own-1\",\"labels\":{\"karpenter.sh/nodepool\":\"general\"}},"
	       "\"spec\":{\"nodeClassRef\":{\"group\":\"g\",\"kind\":\"K\",\"name\":\"default\"},\"requirements\":[]}}");
	claim_status("own-1", "{\"capacity\":{\"cpu\":\"3\"}}");
	refresh();
	CU_ASSERT_TRUE(sizes(C4, &max, &target));
	CU_ASSERT_EQUAL(max, 1);
	CU_ASSERT_EQUAL(target, 0);
	CU_ASSERT_EQUAL(grow(C4, 2, "tok-1", &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(grow(C4, 1, "tok-1", &e), 0);
	CU_ASSERT_TRUE(sizes(C4, &max, &target));
	CU_ASSERT_EQUAL(target, 1);
	CU_ASSERT_EQUAL(grow(C4, 1, "tok-1", &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(claim_count(), 2);
	/* A nodes limit counts every NodeClaim of the NodePool. */
	fresh_api();
	general("\"nodes\":\"3\"");
	create(KARP "/nodeclaims",
	       "{\"metadata\":{\"name\":\"own-1\",\"labels\":{\"karpenter.sh/nodepool\":\"general\"}},"
	       "\"spec\":{\"nodeClassRef\":{\"group\":\"g\",\"kind\":\"K\",\"name\":\"default\"},\"requirements\":[]}}");
	load(CONFIG);
	CU_ASSERT_TRUE(sizes(C4, &max, NULL));
	CU_ASSERT_EQUAL(max, 2);
	CU_ASSERT_TRUE(sizes("general/c-8x/any/any", &max, NULL));
	CU_ASSERT_EQUAL(max, 2);
}

static void test_launch_failures(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v;
	const char *ids[1];
	char name[128];
	size_t n = 0;
	int32_t target = -1;
	long st;
	fresh_api();
	general("");
	load(CONFIG);
	CU_ASSERT_EQUAL(grow(C4, 2, "tok-1", &e), 0);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	/* Karpenter reports the first launch as failed. */
	claim_status(v[0].id, "{\"conditions\":[{\"type\":\"Launched\",\"status\":\"Unknown\",\"reason\":\"LaunchFailed\","
			      "\"message\":\"instance type not found\"}]}");
	snprintf(name, sizeof(name), "%s", v[1].id);
	drv->api->release_instances(drv->state, v, n);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(v[0].error_class, PRD_CLOUD_ERRCLASS_OTHER);
	CU_ASSERT_STRING_EQUAL(v[0].error_code, "LaunchFailed");
	CU_ASSERT_STRING_EQUAL(v[0].error_message, "instance type not found");
	CU_ASSERT_EQUAL(v[1].error_class, PRD_CLOUD_ERRCLASS_NONE);
	/* Launched, waiting for its Node (Registered Unknown/NodeNotFound, as
	 * Karpenter says right after a launch): no failure. */
	claim_status(v[1].id, "{\"conditions\":[{\"type\":\"Launched\",\"status\":\"True\",\"reason\":\"Launched\"},"
			      "{\"type\":\"Registered\",\"status\":\"Unknown\",\"reason\":\"NodeNotFound\","
			      "\"message\":\"Node not registered with cluster\"}]}");
	drv->api->release_instances(drv->state, v, n);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(v[1].error_class, PRD_CLOUD_ERRCLASS_NONE);
	CU_ASSERT_PTR_NULL(v[1].error_code);
	drv->api->release_instances(drv->state, v, n);
	/* Karpenter deletes the second for insufficient capacity before it
	 * registers: it stays reported, failed, until deleted. */
	{
		char path[300];
		snprintf(path, sizeof(path), KARP "/nodeclaims/%s", name);
		json_object_put(api("DELETE", path, NULL, &st));
		CU_ASSERT_EQUAL(st, 200);
	}
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(v[1].id, name);
	CU_ASSERT_STRING_EQUAL(v[1].owner, "tok-1");
	CU_ASSERT_EQUAL(v[1].error_class, PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES);
	CU_ASSERT_PTR_NOT_NULL(strstr(v[1].error_message, "was deleted before its Node registered"));
	drv->api->release_instances(drv->state, v, n);
	CU_ASSERT_PTR_NOT_NULL(strstr(logbuf, "was deleted before its Node registered"));
	refresh();
	CU_ASSERT_TRUE(sizes(C4, NULL, &target));
	CU_ASSERT_EQUAL(target, 2);
	/* The target cannot drop below the NodeClaims that exist; the
	 * failed one can be taken off. */
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, C4, 2, &e), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(drv->api->decrease_target_size(drv->state, C4, 1, &e), 0);
	CU_ASSERT_TRUE(sizes(C4, NULL, &target));
	CU_ASSERT_EQUAL(target, 1);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL(n, 1);
	drv->api->release_instances(drv->state, v, n);
	/* Rolling back deletes the rest; an id already gone is no error. */
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	ids[0] = v[0].id;
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, C4, ids, 1, &e), 0);
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, C4, ids, 1, &e), 0);
	drv->api->release_instances(drv->state, v, n);
	CU_ASSERT_EQUAL(claim_count(), 0);
	CU_ASSERT_TRUE(sizes(C4, NULL, &target));
	CU_ASSERT_EQUAL(target, 0);
}

static void test_tombstone_deleted_by_host(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v;
	const char *ids[1];
	char path[300];
	size_t n = 0;
	long st;
	fresh_api();
	general("");
	load(CONFIG);
	CU_ASSERT_EQUAL(grow(C4, 1, "tok-1", &e), 0);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	snprintf(path, sizeof(path), KARP "/nodeclaims/%s", v[0].id);
	json_object_put(api("DELETE", path, NULL, &st));
	drv->api->release_instances(drv->state, v, n);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	ids[0] = v[0].id;
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, C4, ids, 1, &e), 0);
	drv->api->release_instances(drv->state, v, n);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL(n, 0);
	drv->api->release_instances(drv->state, v, n);
	/* A tombstone nobody deletes is forgotten after an hour. */
	CU_ASSERT_EQUAL(grow(C4, 1, "tok-3", &e), 0);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	snprintf(path, sizeof(path), KARP "/nodeclaims/%s", v[0].id);
	json_object_put(api("DELETE", path, NULL, &st));
	drv->api->release_instances(drv->state, v, n);
	clk_fake_advance(&fake, 59 * 60 * PRD_NS_PER_SEC);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL(n, 1);
	drv->api->release_instances(drv->state, v, n);
	clk_fake_advance(&fake, 2 * 60 * PRD_NS_PER_SEC);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL(n, 0);
	drv->api->release_instances(drv->state, v, n);
	/* A NodeClaim deleted by the host is no failure. */
	CU_ASSERT_EQUAL(grow(C4, 1, "tok-2", &e), 0);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	ids[0] = v[0].id;
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, C4, ids, 1, &e), 0);
	drv->api->release_instances(drv->state, v, n);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL(n, 0);
	drv->api->release_instances(drv->state, v, n);
}

static void test_delete(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v, *w;
	const char *ids[2];
	size_t n = 0, nw = 0;
	fresh_api();
	general("");
	create("/api/v1/nodes", "{\"metadata\":{\"name\":\"n8\",\"labels\":{\"node.kubernetes.io/instance-type\":\"c-8x\"}},"
				"\"status\":{\"capacity\":{\"cpu\":\"8\"}}}");
	load(CONFIG);
	CU_ASSERT_EQUAL(grow(C4, 2, "tok-1", &e), 0);
	CU_ASSERT_EQUAL(grow("general/c-8x/any/any", 1, "tok-1", &e), 0);
	v = instances(C4, &n);
	w = instances("general/c-8x/any/any", &nw);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL_FATAL(nw, 1);
	/* An instance of another group: refused, nothing deleted. */
	ids[0] = v[0].id;
	ids[1] = w[0].id;
	CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, C4, ids, 2, &e), PRD_CLOUD_ENOTFOUND);
	CU_ASSERT_EQUAL(claim_count(), 3);
	/* By Node name. */
	claim_status(v[1].id, "{\"nodeName\":\"node-x\"}");
	ids[0] = "node-x";
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, "general/c-8x/any/any", ids, 1, &e), PRD_CLOUD_ENOTFOUND);
	CU_ASSERT_EQUAL(drv->api->delete_nodes(drv->state, C4, ids, 1, &e), 0);
	CU_ASSERT_EQUAL(claim_count(), 2);
	drv->api->release_instances(drv->state, v, n);
	drv->api->release_instances(drv->state, w, nw);
	/* A NodeClaim held by a finalizer is reported as being deleted. */
	{
		char path[300], body[600];
		long st;
		v = instances(C4, &n);
		CU_ASSERT_EQUAL_FATAL(n, 1);
		snprintf(path, sizeof(path), KARP "/nodeclaims/%s", v[0].id);
		snprintf(body, sizeof(body), "{\"metadata\":{\"finalizers\":[\"karpenter.sh/termination\"]}}");
		{
			char *resp = NULL;
			size_t len = 0;
			memapi_request(m, "PATCH", path, "application/merge-patch+json", body, strlen(body), &st, &resp, &len);
			CU_ASSERT_EQUAL(st, 200);
			free(resp);
		}
		ids[0] = v[0].id;
		CU_ASSERT_EQUAL(drv->api->delete_instances(drv->state, C4, ids, 1, &e), 0);
		drv->api->release_instances(drv->state, v, n);
		v = instances(C4, &n);
		CU_ASSERT_EQUAL_FATAL(n, 1);
		CU_ASSERT_EQUAL(v[0].state, PRD_CLOUD_INSTANCE_DELETING);
		CU_ASSERT_EQUAL(v[0].error_class, PRD_CLOUD_ERRCLASS_NONE); /* we deleted it */
		drv->api->release_instances(drv->state, v, n);
	}
}

static void test_atomic_undo(void)
{
	prd_cloud_error e = {0, ""};
	int32_t target = -1;
	fresh_api();
	general("");
	load(CONFIG);
	fail_post_at = 3;
	CU_ASSERT_EQUAL(grow(C4, 3, "tok-1", &e), PRD_CLOUD_EIO);
	CU_ASSERT_EQUAL(claim_count(), 0);
	CU_ASSERT_TRUE(sizes(C4, NULL, &target));
	CU_ASSERT_EQUAL(target, 0);
	/* Not atomic: what was made stays. */
	posts = 0;
	CU_ASSERT_EQUAL(drv->api->increase_size(drv->state, C4, 3, &e), PRD_CLOUD_EIO);
	CU_ASSERT_EQUAL(claim_count(), 2);
}

static int stop_acting(void *ud)
{
	(void)ud;
	return posts < 1;
}

static void test_may_act(void)
{
	prd_cloud_error e = {0, ""};
	fresh_api();
	general("");
	cloud_host_set_fence(&host, stop_acting, NULL);
	load(CONFIG);
	CU_ASSERT_EQUAL(grow(C4, 3, "tok-1", &e), PRD_CLOUD_EAGAIN);
	CU_ASSERT_EQUAL(claim_count(), 1);
	cloud_host_set_fence(&host, NULL, NULL);
}

/* The PR's uid, as memapi gave it. */
static void request_uid(char *uid, size_t n)
{
	json_object *pr = get("/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests/pr1");
	snprintf(uid, n, "%s", jstr(pr, "metadata", "uid", NULL));
	json_object_put(pr);
}

static const char *claim_ann(const char *key)
{
	static char buf[64];
	json_object *nc = only_claim();
	const char *v = jstr(nc, "metadata", "annotations", key);
	snprintf(buf, sizeof(buf), "%s", v ? v : "");
	json_object_put(nc);
	return v ? buf : NULL;
}

static void test_do_not_disrupt_while_booked(void)
{
	prd_cloud_error e = {0, ""};
	prd_cloud_instance *v;
	char uid[64], token[80];
	size_t n = 0;
	json_object *node;
	long st;
	fresh_api();
	general("");
	create("/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests",
	       "{\"metadata\":{\"name\":\"pr1\"},\"spec\":{\"provisioningClassName\":\"best-effort-atomic-scale-up."
	       "autoscaling.x-k8s.io\",\"podSets\":[{\"podTemplateRef\":{\"name\":\"t\"},\"count\":1}]}}");
	request_uid(uid, sizeof(uid));
	snprintf(token, sizeof(token), "%.36s.1714557600000000000", uid);
	load(CONFIG);
	CU_ASSERT_EQUAL(grow(C4, 1, token, &e), 0);
	v = instances(C4, &n);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	/* Registered: Karpenter copied the annotations to the Node. */
	create("/api/v1/nodes",
	       "{\"metadata\":{\"name\":\"node-1\",\"labels\":{\"provreqd.io/owner\":\"%s\"},\"annotations\":{"
	       "\"karpenter.sh/do-not-disrupt\":\"true\",\"provreqd.io/do-not-disrupt-held\":\"true\"}}}",
	       token);
	/* A Node someone else marked, of a request that is gone. */
	create("/api/v1/nodes", "{\"metadata\":{\"name\":\"node-2\",\"labels\":{\"provreqd.io/owner\":\"x.1-0\"},"
				"\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"}}}");
	claim_status(v[0].id, "{\"nodeName\":\"node-1\"}");
	drv->api->release_instances(drv->state, v, n);
	refresh();
	CU_ASSERT_STRING_EQUAL(claim_ann("karpenter.sh/do-not-disrupt"), "true");
	/* Until its booking ends (the request holds no BookingExpired yet): held. */
	{
		char body[1024];
		json_object *pr = get("/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests/pr1");
		json_object_object_add(pr, "status", json_tokener_parse("{\"conditions\":[{\"type\":\"BookingExpired\","
									   "\"status\":\"True\",\"reason\":\"CapacityBookingConsumed\","
									   "\"message\":\"m\",\"lastTransitionTime\":\"2024-05-01T10:00:00Z\"}]}"));
		snprintf(body, sizeof(body), "%s", json_object_to_json_string(pr));
		json_object_put(pr);
		refresh();
		CU_ASSERT_STRING_EQUAL(claim_ann("karpenter.sh/do-not-disrupt"), "true");
		/* The booking ends: the marks go, from the NodeClaim and its Node. */
		json_object_put(api("PUT", "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests/pr1/status",
				    body, &st));
		CU_ASSERT_EQUAL(st, 200);
	}
	refresh();
	CU_ASSERT_PTR_NULL(claim_ann("karpenter.sh/do-not-disrupt"));
	CU_ASSERT_PTR_NULL(claim_ann("provreqd.io/do-not-disrupt-held"));
	node = get("/api/v1/nodes/node-1");
	CU_ASSERT_PTR_NULL(jpath(node, "metadata", "annotations", "karpenter.sh/do-not-disrupt"));
	json_object_put(node);
	node = get("/api/v1/nodes/node-2");
	CU_ASSERT_STRING_EQUAL(jstr(node, "metadata", "annotations", "karpenter.sh/do-not-disrupt"), "true");
	json_object_put(node);
	/* Karpenter copies the NodeClaim's old annotations to the Node again:
	 * the next refresh lifts them again. */
	{
		char *resp = NULL;
		size_t len = 0;
		const char *b = "{\"metadata\":{\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\","
				"\"provreqd.io/do-not-disrupt-held\":\"true\"}}}";
		memapi_request(m, "PATCH", "/api/v1/nodes/node-1", "application/merge-patch+json", b, strlen(b), &st, &resp,
			       &len);
		free(resp);
		CU_ASSERT_EQUAL(st, 200);
	}
	refresh();
	node = get("/api/v1/nodes/node-1");
	CU_ASSERT_PTR_NULL(jpath(node, "metadata", "annotations", "karpenter.sh/do-not-disrupt"));
	json_object_put(node);
	/* A mark someone else set is not ours to lift. */
	CU_ASSERT_EQUAL(grow(C4, 1, "someone-else", &e), 0);
	{
		json_object *l = get(KARP "/nodeclaims");
		CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(l, "items")), 2);
		json_object_put(l);
	}
}

/* Marks stay when the requests cannot be listed; then only the mark of
 * the NodeClaim whose request is gone is lifted. */
static void test_marks_kept_without_requests(void)
{
	prd_cloud_error e = {0, ""};
	char uid[64], token[80];
	fresh_api();
	general("");
	create("/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests",
	       "{\"metadata\":{\"name\":\"pr1\"},\"spec\":{\"provisioningClassName\":\"best-effort-atomic-scale-up."
	       "autoscaling.x-k8s.io\",\"podSets\":[{\"podTemplateRef\":{\"name\":\"t\"},\"count\":1}]}}");
	request_uid(uid, sizeof(uid));
	snprintf(token, sizeof(token), "%.36s.1714557600000000000", uid);
	load(CONFIG);
	CU_ASSERT_EQUAL(grow(C4, 1, token, &e), 0);
	CU_ASSERT_EQUAL(grow(C4, 1, "gone.1-0", &e), 0);
	memapi_inject_fault(m, "GET", "/apis/autoscaling.x-k8s.io/v1/provisioningrequests", 503, 1);
	refresh();
	CU_ASSERT_PTR_NOT_NULL(strstr(logbuf, "cannot list ProvisioningRequests, keeping 2 do-not-disrupt marks"));
	{
		json_object *l = get(KARP "/nodeclaims"), *items = json_object_object_get(l, "items");
		size_t i, marked = 0;
		for(i = 0; i < json_object_array_length(items); i++)
			marked += jpath(json_object_array_get_idx(items, i), "metadata", "annotations",
					"karpenter.sh/do-not-disrupt") != NULL;
		CU_ASSERT_EQUAL(marked, 2);
		/* Then the one whose request is gone is lifted, the other kept. */
		refresh();
		json_object_put(l);
		l = get(KARP "/nodeclaims");
		items = json_object_object_get(l, "items");
		for(i = 0, marked = 0; i < json_object_array_length(items); i++) {
			json_object *nc = json_object_array_get_idx(items, i);
			bool mark = jpath(nc, "metadata", "annotations", "karpenter.sh/do-not-disrupt") != NULL;
			CU_ASSERT_EQUAL(mark, !strcmp(jstr(nc, "metadata", "labels", "provreqd.io/owner"), token));
			marked += mark;
		}
		CU_ASSERT_EQUAL(marked, 1);
		json_object_put(l);
	}
}

static void test_node_group_for_node(void)
{
	prd_cloud_error e = {0, ""};
	char *id = NULL;
	fresh_api();
	general("");
	load(CONFIG);
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
						      "{\"metadata\":{\"name\":\"n\",\"labels\":{\"karpenter.sh/nodepool\":\"general\","
						      "\"node.kubernetes.io/instance-type\":\"c-4x\",\"topology.kubernetes.io/zone\":"
						      "\"zone-a\",\"karpenter.sh/capacity-type\":\"on-demand\"}}}",
						      &id, &e),
			0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(id);
	CU_ASSERT_STRING_EQUAL(id, C4);
	drv->api->release_string(drv->state, id);
	id = NULL;
	CU_ASSERT_EQUAL(drv->api->node_group_for_node(drv->state,
						      "{\"metadata\":{\"name\":\"n\",\"labels\":{\"karpenter.sh/nodepool\":\"general\","
						      "\"node.kubernetes.io/instance-type\":\"c-4x\",\"topology.kubernetes.io/zone\":"
						      "\"zone-b\"}}}",
						      &id, &e),
			0);
	CU_ASSERT_PTR_NULL(id);
}

static const test_case cases[] = {
	{"NodePools x shapes become groups", test_groups_from_nodepools},
	{"bad config", test_bad_config},
	{"template node from the table or a Node", test_template},
	{"increase makes NodeClaims with the shape pinned", test_increase_makes_pinned_nodeclaims},
	{"NodePool limits bound max, counting every NodeClaim", test_limits},
	{"launch failures are instance errors", test_launch_failures},
	{"a failed NodeClaim is reported until deleted", test_tombstone_deleted_by_host},
	{"delete by instance id and by node", test_delete},
	{"an atomic increase that fails part way leaves nothing", test_atomic_undo},
	{"a host that may no longer act stops the increase", test_may_act},
	{"do-not-disrupt while booked", test_do_not_disrupt_while_booked},
	{"marks stay while requests cannot be listed", test_marks_kept_without_requests},
	{"node_group_for_node", test_node_group_for_node},
	{NULL, NULL}};

int main(void)
{
	int rc = test_run("karpenter driver", cases);
	teardown();
	return rc;
}

#include "testutil.h"
#include "kube/memapi.h"

#include <stdlib.h>
#include <string.h>

static memapi *m;
static clk fake;

/* One request; returns the parsed answer (caller puts) and the status. */
static json_object *req(const char *method, const char *path, const char *ctype, const char *body,
			long *status, int *rc)
{
	char *resp = NULL;
	size_t len = 0;
	json_object *o;
	*rc = memapi_request(m, method, path, ctype, body, body ? strlen(body) : 0, status, &resp, &len);
	o = resp ? json_tokener_parse(resp) : NULL;
	free(resp);
	return o;
}

static const char *s(json_object *o, const char *a, const char *b)
{
	json_object *v = json_object_object_get(o, a);
	if(b)
		v = json_object_object_get(v, b);
	return v ? json_object_get_string(v) : NULL;
}

static void setup(void)
{
	clk_fake_init(&fake, 1714557600LL * PRD_NS_PER_SEC);
	memapi_free(m);
	m = NULL;
	CU_ASSERT_EQUAL_FATAL(memapi_new(&fake, 8, &m), 0);
}

static void test_create_get_conflicts(void)
{
	long st;
	int rc;
	json_object *o;
	setup();
	o = req("POST", "/api/v1/namespaces/team-a/podtemplates", "application/json",
		"{\"metadata\":{\"name\":\"tpl\"},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}", &st, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(st, 201);
	CU_ASSERT_STRING_EQUAL(s(o, "metadata", "namespace"), "team-a");
	CU_ASSERT_STRING_EQUAL(s(o, "metadata", "creationTimestamp"), "2024-05-01T10:00:00Z");
	CU_ASSERT_STRING_EQUAL(s(o, "kind", NULL), "PodTemplate");
	CU_ASSERT_PTR_NOT_NULL(s(o, "metadata", "uid"));
	json_object_put(o);

	o = req("POST", "/api/v1/namespaces/team-a/podtemplates", "application/json",
		"{\"metadata\":{\"name\":\"tpl\"},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}", &st, &rc);
	CU_ASSERT_EQUAL(rc, PRD_EEXIST);
	CU_ASSERT_EQUAL(st, 409);
	CU_ASSERT_STRING_EQUAL(s(o, "reason", NULL), "AlreadyExists");
	json_object_put(o);

	o = req("GET", "/api/v1/namespaces/team-b/podtemplates/tpl", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(rc, PRD_ENOTFOUND);
	CU_ASSERT_EQUAL(st, 404);
	CU_ASSERT_STRING_EQUAL(s(o, "message", NULL), "podtemplates \"tpl\" not found");
	json_object_put(o);

	o = req("POST", "/api/v1/namespaces/team-a/pods", "application/json",
		"{\"metadata\":{\"generateName\":\"job-\"}}", &st, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(strncmp(s(o, "metadata", "name"), "job-", 4), 0);
	CU_ASSERT_EQUAL(strlen(s(o, "metadata", "name")), 9);
	json_object_put(o);

	o = req("POST", "/api/v1/namespaces/team-a/pods", "application/json", "{\"metadata\":{}}", &st, &rc);
	CU_ASSERT_EQUAL(rc, PRD_EINVAL);
	CU_ASSERT_EQUAL(st, 422);
	json_object_put(o);

	o = req("POST", "/api/v1/namespaces/team-a/pods", "application/json", "{not json", &st, &rc);
	CU_ASSERT_EQUAL(st, 400);
	json_object_put(o);

	o = req("GET", "/apis/nope.io/v1/things", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(st, 404);
	json_object_put(o);
}

static const char *PR =
	"{\"apiVersion\":\"autoscaling.x-k8s.io/v1\",\"kind\":\"ProvisioningRequest\","
	"\"metadata\":{\"name\":\"pr1\",\"namespace\":\"ns\"},"
	"\"spec\":{\"provisioningClassName\":\"check-capacity.autoscaling.x-k8s.io\","
	"\"podSets\":[{\"count\":2,\"podTemplateRef\":{\"name\":\"t\"}}]}}";

static void test_update_status_generation(void)
{
	long st;
	int rc;
	json_object *o, *o2;
	char body[1024];
	const char *rv1;
	setup();
	o = req("POST", "/apis/autoscaling.x-k8s.io/v1/namespaces/ns/provisioningrequests", NULL, PR, &st, &rc);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o, "metadata"), "generation")), 1);
	rv1 = s(o, "metadata", "resourceVersion");

	/* Status through /status is kept; the generation does not move. */
	snprintf(body, sizeof(body),
		 "{\"metadata\":{\"name\":\"pr1\",\"resourceVersion\":\"%s\"},\"spec\":{\"changed\":true},"
		 "\"status\":{\"conditions\":[{\"type\":\"Accepted\",\"status\":\"True\"}]}}", rv1);
	o2 = req("PUT", "/apis/autoscaling.x-k8s.io/v1/namespaces/ns/provisioningrequests/pr1/status", NULL, body, &st, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_PTR_NOT_NULL(json_object_object_get(o2, "status"));
	CU_ASSERT_PTR_NULL(json_object_object_get(json_object_object_get(o2, "spec"), "changed"));
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o2, "metadata"), "generation")), 1);
	CU_ASSERT_STRING_NOT_EQUAL(s(o2, "metadata", "resourceVersion"), rv1);
	json_object_put(o2);

	/* The same stale resourceVersion now conflicts. */
	o2 = req("PUT", "/apis/autoscaling.x-k8s.io/v1/namespaces/ns/provisioningrequests/pr1/status", NULL, body, &st, &rc);
	CU_ASSERT_EQUAL(rc, PRD_ECONFLICT);
	CU_ASSERT_EQUAL(st, 409);
	CU_ASSERT_STRING_EQUAL(s(o2, "reason", NULL), "Conflict");
	json_object_put(o2);

	/* The main resource ignores status and bumps generation on spec change;
	 * the v1beta1 view sees the same object. */
	o2 = req("PATCH", "/apis/autoscaling.x-k8s.io/v1beta1/namespaces/ns/provisioningrequests/pr1",
		 "application/merge-patch+json", "{\"spec\":{\"parameters\":{\"noRetry\":\"true\"}},\"status\":null}", &st, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o2, "metadata"), "generation")), 2);
	CU_ASSERT_PTR_NOT_NULL(json_object_object_get(o2, "status"));
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
		json_object_object_get(json_object_object_get(o2, "spec"), "parameters"), "noRetry")), "true");
	json_object_put(o2);

	/* JSON patch is refused clearly rather than misapplied. */
	o2 = req("PATCH", "/apis/autoscaling.x-k8s.io/v1/namespaces/ns/provisioningrequests/pr1",
		 "application/json-patch+json", "[]", &st, &rc);
	CU_ASSERT_EQUAL(st, 415);
	json_object_put(o2);
	json_object_put(o);
}

static void test_delete_preconditions(void)
{
	long st;
	int rc;
	json_object *o;
	setup();
	json_object_put(req("POST", "/api/v1/nodes", NULL, "{\"metadata\":{\"name\":\"n1\"}}", &st, &rc));
	o = req("DELETE", "/api/v1/nodes/n1", NULL, "{\"preconditions\":{\"uid\":\"wrong\"}}", &st, &rc);
	CU_ASSERT_EQUAL(rc, PRD_ECONFLICT);
	json_object_put(o);
	o = req("DELETE", "/api/v1/nodes/n1", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_STRING_EQUAL(s(o, "metadata", "name"), "n1");
	json_object_put(o);
	o = req("DELETE", "/api/v1/nodes/n1", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(rc, PRD_ENOTFOUND);
	json_object_put(o);
}

static void test_list_selectors_pages(void)
{
	long st;
	int rc, i;
	char body[256];
	json_object *o;
	const char *cont;
	char path[256];
	setup();
	for(i = 0; i < 5; i++) {
		snprintf(body, sizeof(body),
			 "{\"metadata\":{\"name\":\"p%d\",\"labels\":{\"app\":\"%s\"}},\"spec\":{\"nodeName\":\"%s\"}}",
			 i, i % 2 ? "web" : "db", i < 2 ? "n1" : "n2");
		json_object_put(req("POST", "/api/v1/namespaces/a/pods", NULL, body, &st, &rc));
	}
	json_object_put(req("POST", "/api/v1/namespaces/b/pods", NULL, "{\"metadata\":{\"name\":\"other\"}}", &st, &rc));
	o = req("GET", "/api/v1/pods", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(o, "items")), 6);
	CU_ASSERT_STRING_EQUAL(s(o, "kind", NULL), "PodList");
	json_object_put(o);
	o = req("GET", "/api/v1/namespaces/a/pods?labelSelector=app%3Dweb", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(o, "items")), 2);
	json_object_put(o);
	o = req("GET", "/api/v1/namespaces/a/pods?labelSelector=app+in+%28web%2Cdb%29&fieldSelector=spec.nodeName%3Dn2", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(o, "items")), 3);
	json_object_put(o);
	o = req("GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(st, 400);
	json_object_put(o);
	o = req("GET", "/api/v1/pods?labelSelector=%21%21bad", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(st, 400);
	json_object_put(o);
	/* Pages of two: 2 + 2 + 2, continue tokens link them. */
	o = req("GET", "/api/v1/pods?limit=2", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(o, "items")), 2);
	cont = s(o, "metadata", "continue");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cont);
	snprintf(path, sizeof(path), "/api/v1/pods?limit=2&continue=%s", cont);
	json_object_put(o);
	o = req("GET", path, NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(o, "items")), 2);
	cont = s(o, "metadata", "continue");
	CU_ASSERT_PTR_NOT_NULL_FATAL(cont);
	snprintf(path, sizeof(path), "/api/v1/pods?limit=2&continue=%s", cont);
	json_object_put(o);
	o = req("GET", path, NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(json_object_array_length(json_object_object_get(o, "items")), 2);
	CU_ASSERT_PTR_NULL(s(o, "metadata", "continue"));
	json_object_put(o);
}

struct seen {
	int n;
	char types[16][12];
	char names[16][32];
};

static int on_event(void *ud, const char *type, json_object *obj)
{
	struct seen *sn = ud;
	if(sn->n < 16) {
		snprintf(sn->types[sn->n], 12, "%s", type);
		snprintf(sn->names[sn->n], 32, "%s", s(obj, "metadata", "name"));
	}
	sn->n++;
	return 0;
}

static void test_watch_log(void)
{
	long st;
	int rc, i;
	struct seen sn;
	uint64_t last = 0, start;
	char body[128];
	setup();
	start = memapi_resource_version(m);
	json_object_put(req("POST", "/api/v1/nodes", NULL, "{\"metadata\":{\"name\":\"n1\"}}", &st, &rc));
	json_object_put(req("PATCH", "/api/v1/nodes/n1", "application/merge-patch+json", "{\"spec\":{\"unschedulable\":true}}", &st, &rc));
	/* A no-op patch changes nothing and emits no event. */
	json_object_put(req("PATCH", "/api/v1/nodes/n1", "application/merge-patch+json", "{\"spec\":{\"unschedulable\":true}}", &st, &rc));
	json_object_put(req("POST", "/api/v1/namespaces/x/pods", NULL, "{\"metadata\":{\"name\":\"p\"}}", &st, &rc));
	json_object_put(req("DELETE", "/api/v1/nodes/n1", NULL, NULL, &st, &rc));
	memset(&sn, 0, sizeof(sn));
	CU_ASSERT_EQUAL(memapi_events_since(m, &(kube_resource){ "", "v1", "nodes", "Node", false }, NULL, start, on_event, &sn, &last), 0);
	CU_ASSERT_EQUAL(sn.n, 3);
	CU_ASSERT_STRING_EQUAL(sn.types[0], "ADDED");
	CU_ASSERT_STRING_EQUAL(sn.types[1], "MODIFIED");
	CU_ASSERT_STRING_EQUAL(sn.types[2], "DELETED");
	CU_ASSERT_EQUAL(last, memapi_resource_version(m));
	/* Nothing new after `last`. */
	memset(&sn, 0, sizeof(sn));
	CU_ASSERT_EQUAL(memapi_events_since(m, &(kube_resource){ "", "v1", "nodes", "Node", false }, NULL, last, on_event, &sn, NULL), 0);
	CU_ASSERT_EQUAL(sn.n, 0);
	/* The ring holds 8 events: overflowing it makes the start too old. */
	for(i = 0; i < 10; i++) {
		snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"n%d\"}}", i + 10);
		json_object_put(req("POST", "/api/v1/nodes", NULL, body, &st, &rc));
	}
	CU_ASSERT_EQUAL(memapi_events_since(m, &(kube_resource){ "", "v1", "nodes", "Node", false }, NULL, start, on_event, &sn, NULL), PRD_EGONE);
	last = memapi_resource_version(m);
	memapi_compact(m);
	CU_ASSERT_EQUAL(memapi_events_since(m, &(kube_resource){ "", "v1", "nodes", "Node", false }, NULL, last - 1, on_event, &sn, NULL), PRD_EGONE);
	CU_ASSERT_EQUAL(memapi_events_since(m, &(kube_resource){ "", "v1", "nodes", "Node", false }, NULL, last, on_event, &sn, NULL), 0);
}

static void test_faults_and_load(void)
{
	long st;
	int rc;
	json_object *o, *objs;
	prd_err e;
	setup();
	memapi_inject_fault(m, "GET", "/api/v1/nodes", 500, 2);
	o = req("GET", "/api/v1/nodes", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(st, 500);
	CU_ASSERT_EQUAL(rc, PRD_EAGAIN);
	json_object_put(o);
	json_object_put(req("GET", "/api/v1/nodes", NULL, NULL, &st, &rc));
	CU_ASSERT_EQUAL(st, 500);
	json_object_put(req("GET", "/api/v1/nodes", NULL, NULL, &st, &rc));
	CU_ASSERT_EQUAL(st, 200);

	objs = json_tokener_parse("[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}},"
				  "{\"apiVersion\":\"v1\",\"kind\":\"PodTemplate\",\"metadata\":{\"name\":\"t\"},"
				  "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}]");
	CU_ASSERT_EQUAL(memapi_load(m, objs, &e), 0);
	json_object_put(objs);
	o = req("GET", "/api/v1/namespaces/default/podtemplates/t", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	json_object_put(o);
	objs = json_tokener_parse("[{\"apiVersion\":\"v9\",\"kind\":\"Gizmo\",\"metadata\":{\"name\":\"g\"}}]");
	CU_ASSERT_EQUAL(memapi_load(m, objs, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "unknown apiVersion/kind \"v9/Gizmo\""));
	json_object_put(objs);
	objs = json_tokener_parse("[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}}]");
	CU_ASSERT_EQUAL(memapi_load(m, objs, &e), PRD_EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "already exists"));
	json_object_put(objs);
	memapi_free(m);
	m = NULL;
}

static void test_extra_kind_scale(void)
{
	static const kube_resource md = { "cluster.x-k8s.io", "v1beta1", "machinedeployments", "MachineDeployment", true };
	long st;
	int rc;
	json_object *o;
	setup();
	CU_ASSERT_EQUAL(memapi_add_kind(m, &md, MEMAPI_STATUS | MEMAPI_SCALE | MEMAPI_GENERATION), 0);
	CU_ASSERT_EQUAL(memapi_add_kind(m, &md, 0), PRD_EEXIST);
	CU_ASSERT_PTR_EQUAL(memapi_resource_for_kind(m, "cluster.x-k8s.io/v1beta1", "MachineDeployment")->resource,
			    md.resource);
	json_object_put(req("POST", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments", NULL,
			    "{\"metadata\":{\"name\":\"md1\"},\"spec\":{\"replicas\":2}}", &st, &rc));
	CU_ASSERT_EQUAL(rc, 0);
	o = req("GET", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_STRING_EQUAL(s(o, "kind", NULL), "Scale");
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o, "spec"), "replicas")), 2);
	json_object_put(o);
	o = req("PATCH", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale",
		"application/merge-patch+json", "{\"spec\":{\"replicas\":0}}", &st, &rc);
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o, "spec"), "replicas")), 0);
	json_object_put(o);
	o = req("GET", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o, "spec"), "replicas")), 0);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o, "metadata"), "generation")), 2);
	json_object_put(o);
	o = req("PATCH", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale",
		"application/merge-patch+json", "{\"spec\":{\"replicas\":-1}}", &st, &rc);
	CU_ASSERT_EQUAL(st, 422);
	json_object_put(o);
	o = req("GET", "/api/v1/nodes/x/scale", NULL, NULL, &st, &rc);
	CU_ASSERT_EQUAL(st, 404);
	json_object_put(o);
	/* A write that sends the resourceVersion it read is refused once
	 * the object moved on, PUT or merge patch, and changes nothing. */
	{
		char stale[64], body[256];
		o = req("GET", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale", NULL,
			NULL, &st, &rc);
		snprintf(stale, sizeof(stale), "%s", s(o, "metadata", "resourceVersion"));
		json_object_put(o);
		json_object_put(req("PATCH", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale",
				    "application/merge-patch+json", "{\"spec\":{\"replicas\":3}}", &st, &rc));
		CU_ASSERT_EQUAL(st, 200);
		snprintf(body, sizeof(body),
			 "{\"apiVersion\":\"autoscaling/v1\",\"kind\":\"Scale\",\"metadata\":{\"name\":\"md1\","
			 "\"namespace\":\"capi\",\"resourceVersion\":\"%s\"},\"spec\":{\"replicas\":5}}",
			 stale);
		json_object_put(req("PUT", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale",
				    "application/json", body, &st, &rc));
		CU_ASSERT_EQUAL(st, 409);
		snprintf(body, sizeof(body), "{\"metadata\":{\"resourceVersion\":\"%s\"},\"spec\":{\"replicas\":5}}",
			 stale);
		json_object_put(req("PATCH", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale",
				    "application/merge-patch+json", body, &st, &rc));
		CU_ASSERT_EQUAL(st, 409);
		o = req("GET", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale", NULL,
			NULL, &st, &rc);
		CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_object_get(o, "spec"), "replicas")), 3);
		snprintf(body, sizeof(body),
			 "{\"metadata\":{\"name\":\"md1\",\"resourceVersion\":\"%s\"},\"spec\":{\"replicas\":4}}",
			 s(o, "metadata", "resourceVersion"));
		json_object_put(o);
		json_object_put(req("PUT", "/apis/cluster.x-k8s.io/v1beta1/namespaces/capi/machinedeployments/md1/scale",
				    "application/json", body, &st, &rc));
		CU_ASSERT_EQUAL(st, 200);
	}
}


/* What kube-apiserver refuses the store refuses too (memapi_valid.c), so
 * "works in simulate" means it works on a cluster: the arm64 auto-
 * provisioning example once made a Node with a repeated taint that only a
 * real apiserver refused. */
static void test_validation(void)
{
	long st;
	int rc;
	json_object *o;
	static const char *const bad[][2] = {
		{ "/api/v1/nodes",
		  "{\"metadata\":{\"name\":\"n1\"},\"spec\":{\"taints\":[{\"key\":\"kubernetes.io/arch\",\"value\":\"arm64\","
		  "\"effect\":\"NoSchedule\"},{\"key\":\"kubernetes.io/arch\",\"value\":\"arm64\",\"effect\":\"NoSchedule\"}]}}" },
		{ "/api/v1/nodes",
		  "{\"metadata\":{\"name\":\"n2\"},\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"Sometimes\"}]}}" },
		{ "/api/v1/nodes", "{\"metadata\":{\"name\":\"n3\",\"labels\":{\"-bad\":\"x\"}}}" },
		{ "/api/v1/nodes", "{\"metadata\":{\"name\":\"n4\",\"labels\":{\"ok\":\"bad value\"}}}" },
		{ "/api/v1/namespaces/t/podtemplates", "{\"metadata\":{\"name\":\"p1\"}}" },
		{ "/api/v1/namespaces/t/podtemplates",
		  "{\"metadata\":{\"name\":\"p2\"},\"template\":{\"spec\":{\"containers\":[]}}}" },
		{ "/apis/autoscaling.x-k8s.io/v1/namespaces/t/provisioningrequests",
		  "{\"metadata\":{\"name\":\"r1\"},\"spec\":{\"provisioningClassName\":\"c\",\"podSets\":[{\"count\":0,"
		  "\"podTemplateRef\":{\"name\":\"p\"}}]}}" },
		{ "/apis/autoscaling.x-k8s.io/v1/namespaces/t/provisioningrequests",
		  "{\"metadata\":{\"name\":\"r2\"},\"spec\":{\"provisioningClassName\":\"c\",\"podSets\":[{\"count\":2147483648,"
		  "\"podTemplateRef\":{\"name\":\"p\"}}]}}" },
	};
	size_t i;
	setup();
	for(i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = req("POST", bad[i][0], "application/json", bad[i][1], &st, &rc);
		CU_ASSERT_EQUAL(st, 422);
		CU_ASSERT_EQUAL(rc, PRD_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(o ? strstr(s(o, "message", NULL), "is invalid: ") : NULL);
		json_object_put(o);
	}
	/* The same objects, valid: accepted; an update that breaks one is
	 * refused and leaves it as it was. */
	o = req("POST", "/api/v1/nodes", "application/json",
		"{\"metadata\":{\"name\":\"n1\",\"labels\":{\"kubernetes.io/arch\":\"arm64\"}},\"spec\":{\"taints\":["
		"{\"key\":\"kubernetes.io/arch\",\"value\":\"arm64\",\"effect\":\"NoSchedule\"},"
		"{\"key\":\"kubernetes.io/arch\",\"value\":\"arm64\",\"effect\":\"NoExecute\"}]}}", &st, &rc);
	CU_ASSERT_EQUAL(st, 201);
	json_object_put(o);
	o = req("PATCH", "/api/v1/nodes/n1", "application/merge-patch+json",
		"{\"spec\":{\"taints\":[{\"key\":\"x\",\"effect\":\"NoSchedule\"},{\"key\":\"x\",\"value\":\"y\","
		"\"effect\":\"NoSchedule\"}]}}", &st, &rc);
	CU_ASSERT_EQUAL(st, 422);
	json_object_put(o);
	o = req("GET", "/api/v1/nodes/n1", NULL, NULL, &st, &rc);
	CU_ASSERT_PTR_NOT_NULL(o ? strstr(json_object_to_json_string(o), "NoExecute") : NULL);
	json_object_put(o);
	o = req("POST", "/api/v1/namespaces/t/podtemplates", "application/json",
		"{\"metadata\":{\"name\":\"p1\"},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}}", &st, &rc);
	CU_ASSERT_EQUAL(st, 201);
	json_object_put(o);
}

static const test_case cases[] = {
	{ "validation as kube-apiserver does", test_validation },
	{ "extra kind with scale", test_extra_kind_scale },
	{ "create, get, conflicts", test_create_get_conflicts },
	{ "update, status subresource, generation", test_update_status_generation },
	{ "delete preconditions", test_delete_preconditions },
	{ "list selectors and pages", test_list_selectors_pages },
	{ "watch event log and 410", test_watch_log },
	{ "faults and load", test_faults_and_load },
	{ NULL, NULL }
};

TEST_MAIN("memapi", cases)

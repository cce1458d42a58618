#include "testutil.h"
#include "kube/objects.h"
#include "util/err.h"
#include "util/rfc3339.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_object *load(const char *name)
{
	char rel[128];
	json_object *o;
	snprintf(rel, sizeof(rel), "fixtures/objects/%s", name);
	o = json_object_from_file(test_srcpath(rel));
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	return o;
}

static json_object *parse(const char *text)
{
	json_object *o = json_tokener_parse(text);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	return o;
}

static int64_t ts(const char *s)
{
	int64_t v = 0;
	CU_ASSERT_EQUAL(rfc3339_parse(s, &v, NULL), 0);
	return v;
}

/* The canonical string of a resource amount in r, or "-" if absent. */
static const char *res_str(const kube_res *r, size_t n, const char *name, char buf[QTY_STR_MAX])
{
	const qty *q = kube_res_get(r, n, name);
	if(!q)
		return "-";
	return qty_str(q, buf);
}

static void test_node(void)
{
	kube_intern *in = kube_intern_new();
	json_object *o = load("node.json");
	kube_meta *m = NULL;
	const kube_node *n;
	char b[QTY_STR_MAX];
	prd_err e;

	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_NODE, o, in, &m, &e), 0);
	n = kube_as_node(m);
	CU_ASSERT_PTR_NOT_NULL_FATAL(n);
	CU_ASSERT_PTR_NULL(kube_as_pod(m));
	CU_ASSERT_STRING_EQUAL(m->name, "gpu-node-1");
	CU_ASSERT_STRING_EQUAL(m->ns, "");
	CU_ASSERT_STRING_EQUAL(m->uid, "5a0b7c1e-2d3f-4a5b-9c8d-1e2f3a4b5c6d");
	CU_ASSERT_STRING_EQUAL(m->rv, "48213");
	CU_ASSERT_EQUAL(m->created_ns, ts("2024-05-01T10:00:00Z"));
	CU_ASSERT_EQUAL(n->nlabels, 5);
	CU_ASSERT_STRING_EQUAL(kube_kv_get(n->labels, n->nlabels, "topology.kubernetes.io/zone"), "europe-west4-a");
	/* Only the annotations under the kept prefixes survive. */
	CU_ASSERT_EQUAL(n->nannotations, 2);
	CU_ASSERT_STRING_EQUAL(kube_kv_get(n->annotations, n->nannotations,
					   "cluster-autoscaler.kubernetes.io/scale-down-disabled"), "true");
	CU_ASSERT_PTR_NULL(kube_kv_get(n->annotations, n->nannotations, "node.alpha.kubernetes.io/ttl"));
	CU_ASSERT_EQUAL_FATAL(n->ntaints, 2);
	CU_ASSERT_STRING_EQUAL(n->taints[0].key, "nvidia.com/gpu");
	CU_ASSERT_STRING_EQUAL(n->taints[0].value, "present");
	CU_ASSERT_EQUAL(n->taints[0].effect, KUBE_EFFECT_NO_SCHEDULE);
	CU_ASSERT_PTR_NULL(n->taints[1].value);
	CU_ASSERT_EQUAL(n->taints[1].effect, KUBE_EFFECT_NO_EXECUTE);
	CU_ASSERT_TRUE(n->unschedulable);
	CU_ASSERT_EQUAL(n->ready, KUBE_COND_TRUE);
	CU_ASSERT_STRING_EQUAL(n->provider_id, "kwok://gpu-node-1");
	CU_ASSERT_EQUAL(n->nallocatable, 6);
	CU_ASSERT_STRING_EQUAL(res_str(n->allocatable, n->nallocatable, "cpu", b), "11500m");
	CU_ASSERT_STRING_EQUAL(res_str(n->allocatable, n->nallocatable, "memory", b), "83Gi");
	CU_ASSERT_STRING_EQUAL(res_str(n->allocatable, n->nallocatable, "nvidia.com/gpu", b), "1");
	CU_ASSERT_STRING_EQUAL(res_str(n->capacity, n->ncapacity, "cpu", b), "12");
	kube_obj_free(in, m);
	json_object_put(o);
	/* Every interned string went back with the object. */
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

static void test_pod(void)
{
	kube_intern *in = kube_intern_new();
	json_object *o = load("pod.json");
	kube_meta *m = NULL;
	const kube_pod *p;
	char b[QTY_STR_MAX];
	prd_err e;

	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_POD, o, in, &m, &e), 0);
	p = kube_as_pod(m);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_STRING_EQUAL(m->ns, "ml");
	CU_ASSERT_STRING_EQUAL(m->name, "trainer-7d9f8b6c5-x2k4p");
	CU_ASSERT_STRING_EQUAL(m->rv, "50001");
	CU_ASSERT_EQUAL(m->deleted_ns, ts("2024-05-01T11:00:00Z"));
	CU_ASSERT_STRING_EQUAL(p->node_name, "gpu-node-1");
	CU_ASSERT_EQUAL(p->phase, KUBE_POD_RUNNING);
	CU_ASSERT_FALSE(p->unschedulable);
	CU_ASSERT_EQUAL(p->priority, 1000);
	CU_ASSERT_STRING_EQUAL(p->consume, "train-job");
	CU_ASSERT_STRING_EQUAL(p->pr_class, "check-capacity.autoscaling.x-k8s.io");
	/* The controller reference wins over an earlier plain one. */
	CU_ASSERT_STRING_EQUAL(p->owner_kind, "ReplicaSet");
	CU_ASSERT_STRING_EQUAL(p->owner_name, "trainer-7d9f8b6c5");
	CU_ASSERT_STRING_EQUAL(kube_kv_get(p->labels, p->nlabels, "app"), "trainer");
	CU_ASSERT_EQUAL(p->nnode_selector, 2);
	CU_ASSERT_STRING_EQUAL(kube_kv_get(p->node_selector, p->nnode_selector, "provreqd.io/node-group"), "gpu");
	/* containers 1600m/3Gi+128Mi + sidecar 250m/64Mi = 1850m/3264Mi;
	 * init fetch-data + sidecar = 3250m/1088Mi/10Gi; max, then +50m. */
	CU_ASSERT_EQUAL(p->nrequests, 4);
	CU_ASSERT_STRING_EQUAL(res_str(p->requests, p->nrequests, "cpu", b), "3300m");
	CU_ASSERT_STRING_EQUAL(res_str(p->requests, p->nrequests, "memory", b), "3264Mi");
	CU_ASSERT_STRING_EQUAL(res_str(p->requests, p->nrequests, "nvidia.com/gpu", b), "1");
	CU_ASSERT_STRING_EQUAL(res_str(p->requests, p->nrequests, "ephemeral-storage", b), "10Gi");
	CU_ASSERT_EQUAL_FATAL(p->ntolerations, 3);
	CU_ASSERT_EQUAL(p->tolerations[0].op, KUBE_TOL_EXISTS);
	CU_ASSERT_EQUAL(p->tolerations[0].effect, KUBE_EFFECT_NO_SCHEDULE);
	CU_ASSERT_TRUE(p->tolerations[1].has_seconds);
	CU_ASSERT_EQUAL(p->tolerations[1].seconds, 300);
	CU_ASSERT_FALSE(p->tolerations[0].has_seconds);
	CU_ASSERT_EQUAL(p->tolerations[2].op, KUBE_TOL_EQUAL);
	CU_ASSERT_EQUAL(p->tolerations[2].effect, KUBE_EFFECT_ALL);
	CU_ASSERT_STRING_EQUAL(p->tolerations[2].value, "ml");
	CU_ASSERT_EQUAL_FATAL(p->nhost_ports, 2);
	CU_ASSERT_EQUAL(p->host_ports[0].port, 8080);
	CU_ASSERT_EQUAL(p->host_ports[0].protocol, 0);
	CU_ASSERT_PTR_NULL(p->host_ports[0].host_ip);
	CU_ASSERT_EQUAL(p->host_ports[1].port, 5353);
	CU_ASSERT_EQUAL(p->host_ports[1].protocol, 1);
	CU_ASSERT_STRING_EQUAL(p->host_ports[1].host_ip, "10.0.0.1");
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->affinity_json);
	CU_ASSERT_PTR_NOT_NULL(strstr(p->affinity_json, "europe-west4-a"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->spread_json);
	CU_ASSERT_PTR_NOT_NULL(strstr(p->spread_json, "DoNotSchedule"));
	kube_obj_free(in, m);
	json_object_put(o);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

static void test_pod_pending_pod_level(void)
{
	kube_intern *in = kube_intern_new();
	json_object *o = load("pod-pending.json");
	kube_meta *m = NULL;
	const kube_pod *p;
	char b[QTY_STR_MAX];

	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_POD, o, in, &m, NULL), 0);
	p = kube_as_pod(m);
	CU_ASSERT_PTR_NULL(p->node_name);
	CU_ASSERT_EQUAL(p->phase, KUBE_POD_PENDING);
	CU_ASSERT_TRUE(p->unschedulable);
	/* The deprecated annotation is honoured. */
	CU_ASSERT_STRING_EQUAL(p->consume, "legacy-req");
	CU_ASSERT_PTR_NULL(p->pr_class);
	CU_ASSERT_PTR_NULL(p->owner_kind);
	CU_ASSERT_PTR_NULL(p->affinity_json);
	CU_ASSERT_PTR_NULL(p->spread_json);
	/* Pod-level requests replace cpu and memory of the container sum. */
	CU_ASSERT_STRING_EQUAL(res_str(p->requests, p->nrequests, "cpu", b), "4");
	CU_ASSERT_STRING_EQUAL(res_str(p->requests, p->nrequests, "memory", b), "10Gi");
	kube_obj_free(in, m);
	json_object_put(o);
	kube_intern_free(in);
}

static void test_interning_shares(void)
{
	kube_intern *in = kube_intern_new();
	json_object *o = load("pod.json");
	kube_meta *a = NULL, *b = NULL;
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_POD, o, in, &a, NULL), 0);
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_POD, o, in, &b, NULL), 0);
	CU_ASSERT_PTR_EQUAL(a->ns, b->ns);
	CU_ASSERT_PTR_EQUAL(kube_as_pod(a)->labels[0].value, kube_as_pod(b)->labels[0].value);
	CU_ASSERT_PTR_EQUAL(kube_as_pod(a)->node_name, kube_as_pod(b)->node_name);
	kube_obj_free(in, a);
	CU_ASSERT_STRING_EQUAL(kube_as_pod(b)->node_name, "gpu-node-1");
	kube_obj_free(in, b);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	json_object_put(o);
	kube_intern_free(in);
}

/* Pods of one workload hold one copy of their labels, node selector,
 * requests and tolerations, whichever decoder read them (the text
 * decoders and json-c fill padding differently: shared all the same), and
 * each copy lives until its last pod goes. */
static void test_pods_share_arrays(void)
{
	kube_intern *in = kube_intern_new();
	json_object *o = load("pod.json"), *other;
	const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	kube_meta *a = NULL, *b = NULL, *c = NULL;
	const kube_pod *pa, *pb, *pc;
	size_t strings;
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_POD, o, in, &a, NULL), 0);
	strings = kube_intern_count(in);
	CU_ASSERT_EQUAL_FATAL(kube_decode_text(KUBE_KIND_POD, text, strlen(text), 64, in, &b, NULL), 0);
	/* The second pod added no string and no array. */
	CU_ASSERT_EQUAL(kube_intern_count(in), strings);
	pa = kube_as_pod(a);
	pb = kube_as_pod(b);
	CU_ASSERT_PTR_EQUAL(pa->labels, pb->labels);
	CU_ASSERT_PTR_EQUAL(pa->node_selector, pb->node_selector);
	CU_ASSERT_PTR_EQUAL(pa->requests, pb->requests);
	CU_ASSERT_PTR_EQUAL(pa->tolerations, pb->tolerations);
	/* Another workload's labels: its own array, the rest shared. */
	other = parse("{\"app\":\"other\"}");
	json_object_object_add(json_object_object_get(o, "metadata"), "labels", other);
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_POD, o, in, &c, NULL), 0);
	pc = kube_as_pod(c);
	CU_ASSERT_PTR_NOT_EQUAL(pc->labels, pa->labels);
	CU_ASSERT_EQUAL(pc->nlabels, 1);
	CU_ASSERT_STRING_EQUAL(kube_kv_get(pc->labels, pc->nlabels, "app"), "other");
	CU_ASSERT_PTR_EQUAL(pc->requests, pa->requests);
	/* Whichever pod goes first, the others still read their arrays. */
	kube_obj_free(in, a);
	CU_ASSERT_STRING_EQUAL(kube_kv_get(pb->labels, pb->nlabels, "app"), "trainer");
	CU_ASSERT_STRING_EQUAL(pb->tolerations[2].value, "ml");
	CU_ASSERT_EQUAL(pb->tolerations[1].seconds, 300);
	CU_ASSERT_PTR_NOT_NULL(kube_res_get(pb->requests, pb->nrequests, "nvidia.com/gpu"));
	kube_obj_free(in, b);
	CU_ASSERT_STRING_EQUAL(kube_kv_get(pc->node_selector, pc->nnode_selector, "provreqd.io/node-group"), "gpu");
	kube_obj_free(in, c);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	CU_ASSERT_EQUAL(kube_intern_bytes(in), 0);
	json_object_put(o);
	kube_intern_free(in);
}

static void test_podtemplate(void)
{
	kube_intern *in = kube_intern_new();
	json_object *o = load("podtemplate.json"), *spec = NULL;
	kube_meta *m = NULL;
	const kube_podtemplate *t;

	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_PODTEMPLATE, o, in, &m, NULL), 0);
	/* The template outlives the input it was decoded from. */
	json_object_put(o);
	t = kube_as_podtemplate(m);
	CU_ASSERT_STRING_EQUAL(m->ns, "ml");
	CU_ASSERT_STRING_EQUAL(m->name, "trainer-tmpl");
	CU_ASSERT_PTR_NOT_NULL_FATAL(t->tmpl);
	CU_ASSERT_TRUE(json_object_object_get_ex(t->tmpl, "spec", &spec));
	CU_ASSERT_PTR_NOT_NULL(strstr(json_object_to_json_string(spec), "trainer:1.0"));
	kube_obj_free(in, m);
	kube_intern_free(in);
}

static void test_provreq(void)
{
	kube_intern *in = kube_intern_new();
	json_object *o = load("provreq.json");
	kube_meta *m = NULL;
	const kube_provreq *pr;
	const kube_condition *c;

	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_PROVREQ, o, in, &m, NULL), 0);
	pr = kube_as_provreq(m);
	CU_ASSERT_STRING_EQUAL(m->ns, "ml");
	CU_ASSERT_STRING_EQUAL(m->name, "train-job");
	CU_ASSERT_EQUAL(m->generation, 1);
	CU_ASSERT_EQUAL(m->created_ns, ts("2024-05-01T10:00:30Z"));
	CU_ASSERT_STRING_EQUAL(pr->class_name, "check-capacity.autoscaling.x-k8s.io");
	CU_ASSERT_EQUAL_FATAL(pr->npod_sets, 2);
	CU_ASSERT_STRING_EQUAL(pr->pod_sets[0].template_name, "trainer-tmpl");
	CU_ASSERT_EQUAL(pr->pod_sets[0].count, 4);
	CU_ASSERT_STRING_EQUAL(pr->pod_sets[1].template_name, "driver-tmpl");
	CU_ASSERT_STRING_EQUAL(kube_kv_get(pr->parameters, pr->nparameters, "ValidUntilSeconds"), "3600");
	CU_ASSERT_EQUAL(pr->nconditions, 2);
	c = kube_provreq_condition(pr, "Provisioned");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(c->status, "True");
	CU_ASSERT_STRING_EQUAL(c->reason, "CapacityIsFound");
	CU_ASSERT_STRING_EQUAL(c->message, "Capacity is found in the cluster");
	CU_ASSERT_EQUAL(c->observed_generation, 1);
	CU_ASSERT_EQUAL(c->last_transition_ns, ts("2024-05-01T10:00:32Z"));
	CU_ASSERT_PTR_NULL(kube_provreq_condition(pr, "Failed"));
	CU_ASSERT_STRING_EQUAL(kube_kv_get(pr->class_details, pr->nclass_details, "bookedUntil"),
			       "2024-05-01T10:10:32Z");
	kube_obj_free(in, m);
	json_object_put(o);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

static void test_resourcepool_configmap_lease(void)
{
	kube_intern *in = kube_intern_new();
	json_object *o = load("resourcepool.json");
	kube_meta *m = NULL;
	char b[QTY_STR_MAX];
	const kube_resourcepool *p;
	const kube_configmap *cm;
	const kube_lease *l;

	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_RESOURCEPOOL, o, in, &m, NULL), 0);
	p = kube_as_resourcepool(m);
	CU_ASSERT_STRING_EQUAL(m->ns, "");
	CU_ASSERT_STRING_EQUAL(m->name, "gpu-pool");
	CU_ASSERT_EQUAL(p->nannotations, 2);
	CU_ASSERT_PTR_NULL(kube_kv_get(p->annotations, p->nannotations, "kubectl.kubernetes.io/last-applied-configuration"));
	CU_ASSERT_STRING_EQUAL(kube_kv_get(p->annotations, p->nannotations, "provreqd.io/populate-from-nodes"),
			       "provreqd.io/node-group=gpu");
	CU_ASSERT_STRING_EQUAL(res_str(p->hard, p->nhard, "requests.memory", b), "332Gi");
	CU_ASSERT_STRING_EQUAL(res_str(p->used, p->nused, "requests.cpu", b), "6");
	CU_ASSERT_STRING_EQUAL(res_str(p->alloc_hard, p->nalloc_hard, "requests.nvidia.com/gpu", b), "4");
	kube_obj_free(in, m);
	json_object_put(o);

	o = load("configmap.json");
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_CONFIGMAP, o, in, &m, NULL), 0);
	cm = kube_as_configmap(m);
	CU_ASSERT_EQUAL(cm->ndata, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(kube_kv_get(cm->data, cm->ndata, "priorities"), ".*gpu.*"));
	kube_obj_free(in, m);
	json_object_put(o);

	o = load("lease.json");
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_LEASE, o, in, &m, NULL), 0);
	l = kube_as_lease(m);
	CU_ASSERT_STRING_EQUAL(l->holder, "provreqd-0_3f2a");
	CU_ASSERT_EQUAL(l->duration_s, 15);
	CU_ASSERT_EQUAL(l->transitions, 2);
	CU_ASSERT_EQUAL(l->renew_ns, ts("2024-05-01T10:10:02.123456Z"));
	kube_obj_free(in, m);
	json_object_put(o);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* Each garbage input must fail with PRD_EINVAL and a message containing
 * `needle`, leak nothing and leave *out NULL. */
typedef struct garbage {
	kube_kind kind;
	const char *json;
	const char *needle;
} garbage;

static const garbage garbages[] = {
	{ KUBE_KIND_POD, "[]", "expected a JSON object" },
	{ KUBE_KIND_POD, "{}", "metadata: missing" },
	{ KUBE_KIND_POD, "{\"metadata\":[]}", "metadata: expected an object" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"namespace\":\"d\"}}", "metadata.name: missing" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"\",\"namespace\":\"d\"}}", "metadata.name: missing" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"name\":7,\"namespace\":\"d\"}}", "name: expected a string, got int" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\"}}", "metadata.namespace: missing" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"labels\":{\"a\":1}}}",
	  "Pod d/p: metadata.labels: a: expected a string" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"creationTimestamp\":\"yesterday\"}}",
	  "bad timestamp" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":{}}}",
	  "containers: expected an array" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[5]}}",
	  "spec.containers[0]: expected an object" },
	{ KUBE_KIND_POD,
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{\"resources\":"
	  "{\"requests\":{\"cpu\":\"lots\"}}}]}}",
	  "spec.containers[0].resources.requests.cpu: bad quantity \"lots\"" },
	{ KUBE_KIND_POD,
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{\"resources\":"
	  "{\"requests\":{\"cpu\":true}}}]}}",
	  "expected a quantity" },
	{ KUBE_KIND_POD,
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"containers\":[{\"ports\":"
	  "[{\"hostPort\":70000}]}]}}",
	  "out of range" },
	{ KUBE_KIND_POD,
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"tolerations\":[{\"operator\":\"Maybe\"}]}}",
	  "unknown operator" },
	{ KUBE_KIND_POD,
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"spec\":{\"tolerations\":[{\"effect\":\"Sometimes\"}]}}",
	  "unknown effect" },
	{ KUBE_KIND_POD,
	  "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"annotations\":{\"x\":{}}}}", "x: expected a string" },
	{ KUBE_KIND_POD, "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"},\"status\":{\"conditions\":[1]}}",
	  "status.conditions" },
	{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\"},\"status\":{\"allocatable\":{\"cpu\":\"1x\"}}}",
	  "Node n: status.allocatable.cpu: bad quantity" },
	{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"taints\":[{\"key\":\"k\"}]}}", "effect is required" },
	{ KUBE_KIND_NODE, "{\"metadata\":{\"name\":\"n\"},\"spec\":{\"unschedulable\":\"yes\"}}", "expected a boolean" },
	{ KUBE_KIND_PODTEMPLATE, "{\"metadata\":{\"name\":\"t\",\"namespace\":\"d\"}}", "template: missing" },
	{ KUBE_KIND_PROVREQ, "{\"metadata\":{\"name\":\"r\",\"namespace\":\"d\"}}", "spec: missing" },
	{ KUBE_KIND_PROVREQ,
	  "{\"metadata\":{\"name\":\"r\",\"namespace\":\"d\"},\"spec\":{\"podSets\":[{\"count\":0,"
	  "\"podTemplateRef\":{\"name\":\"t\"}}]}}",
	  "count must be a positive" },
	{ KUBE_KIND_PROVREQ,
	  "{\"metadata\":{\"name\":\"r\",\"namespace\":\"d\"},\"spec\":{\"podSets\":[{\"count\":1}]}}",
	  "podTemplateRef.name is required" },
	{ KUBE_KIND_PROVREQ,
	  "{\"metadata\":{\"name\":\"r\",\"namespace\":\"d\"},\"spec\":{},\"status\":{\"conditions\":[{\"type\":\"A\"}]}}",
	  "type and status are required" },
	{ KUBE_KIND_RESOURCEPOOL, "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"quota\":{\"hard\":{\"pods\":\"1.2.3\"}}}}",
	  "spec.quota.hard.pods: bad quantity" },
	{ KUBE_KIND_CONFIGMAP, "{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\"},\"data\":{\"k\":[1]}}",
	  "data: k: expected a string" },
	{ KUBE_KIND_LEASE, "{\"metadata\":{\"name\":\"l\",\"namespace\":\"d\"},\"spec\":{\"leaseDurationSeconds\":\"15\"}}",
	  "expected an integer" },
	{ KUBE_KIND_LEASE, "{\"metadata\":{\"name\":\"l\",\"namespace\":\"d\"},\"spec\":{\"leaseDurationSeconds\":-1}}",
	  "out of range" },
	{ (kube_kind)99, "{\"metadata\":{\"name\":\"x\"}}", "unknown object kind" },
};

static void test_garbage(void)
{
	kube_intern *in = kube_intern_new();
	size_t i;
	for(i = 0; i < sizeof(garbages) / sizeof(garbages[0]); i++) {
		json_object *o = parse(garbages[i].json);
		kube_meta *m = (kube_meta *)&i;
		prd_err e;
		int rc;
		prd_err_clear(&e);
		rc = kube_decode(garbages[i].kind, o, in, &m, &e);
		CU_ASSERT_EQUAL(rc, PRD_EINVAL);
		CU_ASSERT_PTR_NULL(m);
		if(!strstr(e.msg, garbages[i].needle)) {
			fprintf(stderr, "garbage %zu: message \"%s\" lacks \"%s\"\n", i, e.msg, garbages[i].needle);
			CU_FAIL("message does not say what is wrong");
		}
		json_object_put(o);
	}
	/* NULL input and a scalar never crash. */
	{
		kube_meta *m = NULL;
		json_object *s = json_object_new_string("pod");
		CU_ASSERT_EQUAL(kube_decode(KUBE_KIND_POD, NULL, in, &m, NULL), PRD_EINVAL);
		CU_ASSERT_EQUAL(kube_decode(KUBE_KIND_NODE, s, in, &m, NULL), PRD_EINVAL);
		json_object_put(s);
	}
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

/* Every truncation of every fixture is either rejected by the JSON parser
 * or decoded/rejected without leaking; every field swapped for each JSON
 * type in turn is decoded or rejected cleanly. */
static void mutate_all(kube_kind kind, json_object *root, json_object *o, kube_intern *in, int depth)
{
	static json_object *repl[5];
	size_t r;
	if(!repl[0]) {
		repl[0] = json_object_new_int(-1);
		repl[1] = json_object_new_string("??");
		repl[2] = json_object_new_array();
		repl[3] = json_object_new_object();
		repl[4] = json_object_new_boolean(1);
	}
	if(depth > 6 || !json_object_is_type(o, json_type_object))
		return;
	json_object_object_foreach(o, k, v) {
		json_object *orig = json_object_get(v);
		for(r = 0; r < 5; r++) {
			kube_meta *m = NULL;
			json_object_object_add(o, k, json_object_get(repl[r]));
			if(kube_decode(kind, root, in, &m, NULL) == 0)
				kube_obj_free(in, m);
		}
		json_object_object_add(o, k, orig);
		mutate_all(kind, root, orig, in, depth + 1);
	}
	if(depth == 0)
		for(r = 0; r < 5; r++) {
			json_object_put(repl[r]);
			repl[r] = NULL;
		}
}

static void test_mutations(void)
{
	static const struct {
		kube_kind kind;
		const char *file;
	} fx[] = {
		{ KUBE_KIND_NODE, "node.json" },       { KUBE_KIND_POD, "pod.json" },
		{ KUBE_KIND_POD, "pod-pending.json" }, { KUBE_KIND_PODTEMPLATE, "podtemplate.json" },
		{ KUBE_KIND_PROVREQ, "provreq.json" }, { KUBE_KIND_RESOURCEPOOL, "resourcepool.json" },
		{ KUBE_KIND_CONFIGMAP, "configmap.json" }, { KUBE_KIND_LEASE, "lease.json" },
	};
	kube_intern *in = kube_intern_new();
	size_t i;
	for(i = 0; i < sizeof(fx) / sizeof(fx[0]); i++) {
		json_object *o = load(fx[i].file);
		mutate_all(fx[i].kind, o, o, in, 0);
		json_object_put(o);
	}
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	kube_intern_free(in);
}

static void test_json_meta_and_key(void)
{
	json_object *o = load("pod.json");
	const char *ns, *name, *rv;
	kube_intern *in = kube_intern_new();
	kube_meta *m = NULL;
	char key[64], tiny[4];

	CU_ASSERT_EQUAL(kube_json_meta(o, &ns, &name, &rv), 0);
	CU_ASSERT_STRING_EQUAL(ns, "ml");
	CU_ASSERT_STRING_EQUAL(name, "trainer-7d9f8b6c5-x2k4p");
	CU_ASSERT_STRING_EQUAL(rv, "50001");
	CU_ASSERT_EQUAL(kube_decode(KUBE_KIND_POD, o, in, &m, NULL), 0);
	CU_ASSERT_TRUE(kube_meta_key(m, key, sizeof(key)));
	CU_ASSERT_STRING_EQUAL(key, "ml/trainer-7d9f8b6c5-x2k4p");
	CU_ASSERT_FALSE(kube_meta_key(m, tiny, sizeof(tiny)));
	kube_obj_free(in, m);
	json_object_put(o);
	o = parse("{\"metadata\":{\"namespace\":\"x\"}}");
	CU_ASSERT_EQUAL(kube_json_meta(o, &ns, &name, &rv), PRD_EINVAL);
	json_object_put(o);
	kube_intern_free(in);
}

static void test_intern_table(void)
{
	kube_intern *in = kube_intern_new();
	const char *a, *b, *c;
	char buf[16];
	int i;
	a = kube_intern_get(in, "zone-a");
	b = kube_intern_getn(in, "zone-abc", 6);
	CU_ASSERT_PTR_EQUAL(a, b);
	c = kube_intern_ref(in, a);
	CU_ASSERT_PTR_EQUAL(c, a);
	CU_ASSERT_EQUAL(kube_intern_count(in), 1);
	/* Many strings, then drop them in another order: lookups stay right
	 * through the backward-shift deletions. */
	for(i = 0; i < 5000; i++) {
		snprintf(buf, sizeof(buf), "s%d", i);
		kube_intern_get(in, buf);
	}
	for(i = 0; i < 5000; i += 2) {
		snprintf(buf, sizeof(buf), "s%d", i);
		kube_intern_put(in, kube_intern_get(in, buf));
		kube_intern_put(in, kube_intern_get(in, buf) /* the lookup's ref */);
		kube_intern_put(in, kube_intern_get(in, buf));
	}
	CU_ASSERT_EQUAL(kube_intern_count(in), 1 + 5000);
	for(i = 0; i < 5000; i++) {
		const char *s;
		snprintf(buf, sizeof(buf), "s%d", i);
		s = kube_intern_get(in, buf);
		CU_ASSERT_STRING_EQUAL(s, buf);
		kube_intern_put(in, s);
		kube_intern_put(in, s);
	}
	CU_ASSERT_EQUAL(kube_intern_count(in), 1);
	kube_intern_put(in, a);
	kube_intern_put(in, b);
	kube_intern_put(in, c);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	CU_ASSERT_EQUAL(kube_intern_bytes(in), 0);
	kube_intern_free(in);
}

/* Shared arrays sit in the string table but never stand for a string of
 * the same bytes: dropping one leaves the other whole. */
static void test_intern_blobs(void)
{
	kube_intern *in = kube_intern_new();
	const char *s = kube_intern_getn(in, "abcdefgh", 8);
	const void *b1, *b2;
	bool had = true;
	b1 = kube__blob_get(in, "abcdefgh", 8, &had);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b1);
	CU_ASSERT_FALSE(had);
	CU_ASSERT_PTR_NOT_EQUAL(b1, s);
	b2 = kube__blob_get(in, "abcdefgh", 8, &had);
	CU_ASSERT_TRUE(had);
	CU_ASSERT_PTR_EQUAL(b1, b2);
	CU_ASSERT_EQUAL(kube_intern_count(in), 2);
	CU_ASSERT_FALSE(kube__blob_put(in, b2));
	kube_intern_put(in, s);
	CU_ASSERT_EQUAL(memcmp(b1, "abcdefgh", 8), 0);
	/* The string went with its last reference; a new one is not the blob. */
	s = kube_intern_get(in, "abcdefgh");
	CU_ASSERT_PTR_NOT_EQUAL(s, b1);
	kube_intern_put(in, s);
	CU_ASSERT_TRUE(kube__blob_put(in, b1));
	kube__blob_free(b1);
	CU_ASSERT_EQUAL(kube_intern_count(in), 0);
	CU_ASSERT_EQUAL(kube_intern_bytes(in), 0);
	kube_intern_free(in);
}

static const test_case cases[] = {
	{ "node", test_node },
	{ "pod", test_pod },
	{ "pod_pending_pod_level", test_pod_pending_pod_level },
	{ "interning_shares", test_interning_shares },
	{ "pods_share_arrays", test_pods_share_arrays },
	{ "podtemplate", test_podtemplate },
	{ "provreq", test_provreq },
	{ "resourcepool_configmap_lease", test_resourcepool_configmap_lease },
	{ "garbage", test_garbage },
	{ "mutations", test_mutations },
	{ "json_meta_and_key", test_json_meta_and_key },
	{ "intern_table", test_intern_table },
	{ "intern_blobs", test_intern_blobs },
	{ NULL, NULL }
};

TEST_MAIN("kube_decode", cases)

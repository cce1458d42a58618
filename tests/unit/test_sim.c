/* `provreqd simulate`'s own pieces (src/sim): reading the cluster and
 * what-if input, recording transitions and sizes in simulated time, the
 * report document and the SVG plot. */
#include "testutil.h"
#include "ops/log.h"
#include "sim/sim.h"
#include "util/clock.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define T0 (1767225600LL * PRD_NS_PER_SEC) /* 2026-01-01T00:00:00Z */
#define MIN (60 * PRD_NS_PER_SEC)

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs(text, f);
	fclose(f);
}

/* Capture warnings while `body` runs: begin, then end returns the text
 * (caller frees). */
static FILE *warn_begin(char **mem, size_t *len)
{
	FILE *f = open_memstream(mem, len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	log_setup(PRD_LOG_WARN, PRD_LOG_TEXT, f);
	return f;
}

static char *warn_end(FILE *f, char **mem)
{
	fclose(f);
	log_setup(PRD_LOG_INFO, PRD_LOG_TEXT, NULL);
	return *mem;
}

static json_object *pr_json(const char *ns, const char *name, const char *conds)
{
	char *s = str_printf("{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\"},\"status\":{\"conditions\":[%s]}}",
			     ns, name, conds);
	json_object *o = json_tokener_parse(s);
	free(s);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	return o;
}

static void record_one(sim_record *r, int64_t t, const char *conds, bool initial)
{
	json_object *o = pr_json("team-a", "job", conds);
	CU_ASSERT_EQUAL(sim_record_request(r, t, o, initial), 0);
	json_object_put(o);
}

#define ACC "{\"type\":\"Accepted\",\"status\":\"True\",\"reason\":\"Accepted\",\"message\":\"ok\"}"
#define SCALING "{\"type\":\"Provisioned\",\"status\":\"False\",\"reason\":\"ScaleUpInProgress\",\"message\":\"m\"}"
#define PROV "{\"type\":\"Provisioned\",\"status\":\"True\",\"reason\":\"CapacityIsProvisioned\",\"message\":\"m\"}"
#define EXPIRED "{\"type\":\"BookingExpired\",\"status\":\"True\",\"reason\":\"CapacityReservationTimeExpired\"}"

/* A condition is recorded when its status, reason or message changes, at
 * the time it was seen; the same conditions seen again add nothing. */
static void test_record_transitions(void)
{
	sim_record r;
	sim_record_init(&r, T0, T0 + 60 * MIN);
	record_one(&r, T0, ACC, true);
	record_one(&r, T0 + MIN, ACC "," SCALING, false);
	record_one(&r, T0 + MIN, ACC "," SCALING, false);
	record_one(&r, T0 + 3 * MIN, ACC "," PROV, false);
	record_one(&r, T0 + 13 * MIN, ACC "," PROV "," EXPIRED, false);
	CU_ASSERT_EQUAL_FATAL(r.ntr, 4);
	CU_ASSERT(r.tr[0].initial);
	CU_ASSERT_STRING_EQUAL(r.tr[1].type, "Provisioned");
	CU_ASSERT_STRING_EQUAL(r.tr[1].reason, "ScaleUpInProgress");
	CU_ASSERT_EQUAL(r.tr[1].t, T0 + MIN);
	CU_ASSERT_STRING_EQUAL(r.tr[2].status, "True");
	CU_ASSERT_EQUAL(r.tr[2].t, T0 + 3 * MIN);
	CU_ASSERT_STRING_EQUAL(r.tr[3].type, "BookingExpired");
	CU_ASSERT_STRING_EQUAL(r.tr[3].message, "");
	CU_ASSERT_EQUAL(r.nreq, 1);
	sim_record_free(&r);
}

/* The request's states over time: pending, scaling up, provisioned, then
 * its booking expired until the end. */
static void test_record_spans(void)
{
	sim_record r;
	sim_span *sp = NULL;
	size_t n = 0;
	sim_record_init(&r, T0, T0 + 60 * MIN);
	record_one(&r, T0, ACC, true);
	record_one(&r, T0 + MIN, ACC "," SCALING, false);
	record_one(&r, T0 + 3 * MIN, ACC "," PROV, false);
	record_one(&r, T0 + 13 * MIN, ACC "," PROV "," EXPIRED, false);
	CU_ASSERT_EQUAL_FATAL(sim_record_spans(&r, 0, &sp, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	CU_ASSERT_EQUAL(sp[0].state, SIM_PENDING);
	CU_ASSERT_EQUAL(sp[0].from, T0);
	CU_ASSERT_EQUAL(sp[0].to, T0 + MIN);
	CU_ASSERT_EQUAL(sp[1].state, SIM_SCALEUP);
	CU_ASSERT_EQUAL(sp[2].state, SIM_PROVISIONED);
	CU_ASSERT_EQUAL(sp[2].to, T0 + 13 * MIN);
	CU_ASSERT_EQUAL(sp[3].state, SIM_BOOKING_EXPIRED);
	CU_ASSERT_EQUAL(sp[3].to, T0 + 60 * MIN);
	free(sp);
	sim_record_free(&r);
}

static void test_state_of(void)
{
	CU_ASSERT_EQUAL(sim_state_of(NULL, NULL, NULL, NULL), SIM_PENDING);
	CU_ASSERT_EQUAL(sim_state_of("False", "CapacityIsNotFound", NULL, NULL), SIM_PENDING);
	CU_ASSERT_EQUAL(sim_state_of("False", "ScaleUpInProgress", NULL, NULL), SIM_SCALEUP);
	CU_ASSERT_EQUAL(sim_state_of("True", "CapacityIsFound", NULL, NULL), SIM_PROVISIONED);
	CU_ASSERT_EQUAL(sim_state_of("True", "CapacityIsFound", NULL, "True"), SIM_BOOKING_EXPIRED);
	CU_ASSERT_EQUAL(sim_state_of("False", "CapacityIsNotFound", "True", NULL), SIM_FAILED);
	CU_ASSERT_STRING_EQUAL(sim_state_name(SIM_SCALEUP), "ScaleUpInProgress");
}

/* Sizes are kept when they change, per group. */
static void test_record_sizes(void)
{
	sim_record r;
	sim_record_init(&r, T0, T0 + 60 * MIN);
	CU_ASSERT_EQUAL(sim_record_size(&r, T0, "a", 0, 0), 0);
	CU_ASSERT_EQUAL(sim_record_size(&r, T0, "b", 1, 1), 0);
	CU_ASSERT_EQUAL(sim_record_size(&r, T0 + MIN, "a", 0, 0), 0);
	CU_ASSERT_EQUAL(sim_record_size(&r, T0 + MIN, "a", 3, 0), 0);
	CU_ASSERT_EQUAL(sim_record_size(&r, T0 + 2 * MIN, "a", 3, 3), 0);
	CU_ASSERT_EQUAL(r.nsmp, 4);
	CU_ASSERT_EQUAL(r.ngroups, 2);
	CU_ASSERT_EQUAL(r.smp[3].ready, 3);
	sim_record_free(&r);
}

static void test_offsets(void)
{
	char b[32];
	sim_offset_str(T0, T0, b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "+0s");
	sim_offset_str(T0, T0 + 90 * PRD_NS_PER_SEC, b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "+1m30s");
	sim_offset_str(T0, T0 + 60 * MIN, b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "+1h");
	sim_offset_str(T0, T0 + 65 * MIN + 7 * PRD_NS_PER_SEC, b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "+1h05m07s");
	sim_time_str(T0 + MIN, b, sizeof(b));
	CU_ASSERT_STRING_EQUAL(b, "2026-01-01T00:01:00Z");
}

/* The report document: transitions with simulated time and offsets (the
 * input's own conditions are not changes), sizes, and the parts handed
 * in. */
static void test_report_doc(void)
{
	sim_record r;
	json_object *doc, *tr, *t0, *sz;
	sim_record_init(&r, T0, T0 + 60 * MIN);
	record_one(&r, T0, ACC, true);
	record_one(&r, T0 + 5 * MIN, ACC "," PROV, false);
	sim_record_size(&r, T0, "general", 0, 0);
	sim_record_size(&r, T0 + 4 * MIN, "general", 2, 1);
	doc = sim_report_doc(&r, json_object_new_array(), json_object_new_array(), json_object_new_object());
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	tr = json_object_object_get(doc, "transitions");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(tr), 1);
	t0 = json_object_array_get_idx(tr, 0);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(t0, "time")), "2026-01-01T00:05:00Z");
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(t0, "offsetSeconds")), 300);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(t0, "namespace")), "team-a");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(t0, "type")), "Provisioned");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(t0, "reason")), "CapacityIsProvisioned");
	sz = json_object_object_get(doc, "nodeGroupSizes");
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(sz), 2);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_array_get_idx(sz, 1), "target")), 2);
	CU_ASSERT_EQUAL(json_object_get_int(json_object_object_get(json_object_array_get_idx(sz, 1), "ready")), 1);
	CU_ASSERT_PTR_NOT_NULL(json_object_object_get(doc, "requests"));
	CU_ASSERT_PTR_NOT_NULL(json_object_object_get(doc, "requestStates"));
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(doc, "start")), "2026-01-01T00:00:00Z");
	json_object_put(doc);
	sim_record_free(&r);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for(hay = strstr(hay, needle); hay; hay = strstr(hay + 1, needle))
		n++;
	return n;
}

/* The plot: one line and one shade per group, a bar segment per state,
 * time labels in simulated time, the legend, names escaped. */
static void test_svg(void)
{
	sim_record r;
	json_object *o = pr_json("team-a", "a<b&c", ACC "," PROV);
	buf b;
	sim_record_init(&r, T0, T0 + 60 * MIN);
	sim_record_request(&r, T0, o, true);
	sim_record_size(&r, T0, "general", 0, 0);
	sim_record_size(&r, T0 + 4 * MIN, "general", 2, 2);
	sim_record_size(&r, T0, "gpu", 1, 1);
	buf_init(&b);
	CU_ASSERT_EQUAL_FATAL(sim_svg(&r, &b), 0);
	CU_ASSERT(str_starts_with(buf_str(&b), "<?xml"));
	CU_ASSERT(str_ends_with(buf_str(&b), "</svg>\n"));
	CU_ASSERT_EQUAL(count(buf_str(&b), "<path "), 4);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), "team-a/a&lt;b&amp;c"));
	CU_ASSERT_PTR_NULL(strstr(buf_str(&b), "a<b"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), ">+30m<"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), ">+1h<"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), "2026-01-01T00:00:00Z"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), "\nProvisioned from +0s to +1h\nProvisioned: CapacityIsProvisioned: m</title>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), ">BookingExpired<"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&b), ">gpu<"));
	buf_free(&b);
	json_object_put(o);
	sim_record_free(&r);
}

/* Long names are cut in the middle to fit the margin, the full name in the
 * label's tooltip; each state segment's tooltip names the request, the
 * state, when, and the reason and message (for Pending: why it waits). */
#define NOTFOUND "{\"type\":\"Provisioned\",\"status\":\"False\",\"reason\":\"CapacityIsNotFound\"," \
	"\"message\":\"only 0 of 3 pods fit\"}"
static void test_svg_labels_and_reasons(void)
{
	static const char long_name[] = "distributed-training-run-with-a-very-long-name-0017";
	sim_record r;
	json_object *o1 = pr_json("research-team-alpha", long_name, ACC);
	json_object *o2 = pr_json("research-team-alpha", long_name, ACC "," NOTFOUND);
	json_object *o3 = pr_json("research-team-alpha", long_name, ACC "," PROV);
	const char *svg;
	buf b;

	sim_record_init(&r, T0, T0 + 60 * MIN);
	sim_record_request(&r, T0, o1, true);
	sim_record_request(&r, T0 + 2 * MIN, o2, false);
	sim_record_request(&r, T0 + 10 * MIN, o3, false);
	sim_record_size(&r, T0, "a-node-group-with-a-long-descriptive-name", 0, 0);
	buf_init(&b);
	CU_ASSERT_EQUAL_FATAL(sim_svg(&r, &b), 0);
	svg = buf_str(&b);
	/* The label is cut to the margin; the tooltip has it whole. */
	CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">research-tea\xe2\x80\xa6ng-name-0017<title>research-team-alpha/"
					   "distributed-training-run-with-a-very-long-name-0017</title></text>"));
	CU_ASSERT_PTR_NULL(strstr(svg, "\"end\">research-team-alpha/distributed"));
	/* The group legend too. */
	CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>a-node-group-with-a-long-descriptive-name</title>"));
	/* Pending says why it waits, Provisioned what provisioned it. */
	CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>research-team-alpha/distributed-training-run-with-a-very-long-name-0017\n"
					   "Pending from +0s to +10m\nProvisioned: CapacityIsNotFound: only 0 of 3 pods fit</title>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(svg, "\nProvisioned from +10m to +1h\nProvisioned: CapacityIsProvisioned: m</title>"));
	buf_free(&b);
	json_object_put(o1);
	json_object_put(o2);
	json_object_put(o3);
	sim_record_free(&r);

	/* Two conditions changing at one instant (Provisioned=False/Expired
	 * and Failed=True): the Pending stretch keeps the reason it had, the
	 * Failed one gets the new ones. */
	sim_record_init(&r, T0, T0 + 60 * MIN);
	o1 = pr_json("team-a", "late", ACC);
	o2 = pr_json("team-a", "late", ACC "," NOTFOUND);
	o3 = pr_json("team-a", "late", ACC ",{\"type\":\"Provisioned\",\"status\":\"False\",\"reason\":\"Expired\","
		     "\"message\":\"too late\"},{\"type\":\"Failed\",\"status\":\"True\",\"reason\":\"Expired\","
		     "\"message\":\"too late\"}");
	sim_record_request(&r, T0, o1, true);
	sim_record_request(&r, T0 + 5 * MIN, o2, false);
	sim_record_request(&r, T0 + 7 * MIN, o3, false);
	buf_init(&b);
	CU_ASSERT_EQUAL_FATAL(sim_svg(&r, &b), 0);
	svg = buf_str(&b);
	CU_ASSERT_PTR_NOT_NULL(strstr(svg, "team-a/late\nPending from +0s to +7m\nProvisioned: CapacityIsNotFound: only 0 of 3 pods fit</title>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(svg, "team-a/late\nFailed from +7m to +1h\nFailed: Expired: too late</title>"));
	buf_free(&b);
	json_object_put(o1);
	json_object_put(o2);
	json_object_put(o3);
	sim_record_free(&r);
}

/* A kubectl dump (a List), a JSON file and files simulate does not read:
 * the objects come out with where they came from, and every skipped file
 * is named in a warning. */
static void test_input_dir(void)
{
	const char *dir = test_tmpdir();
	char path[512], *mem = NULL;
	size_t len = 0;
	sim_objs in;
	prd_err e;
	FILE *f;

	snprintf(path, sizeof(path), "%s/dump.yaml", dir);
	write_text(path, "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n"
			 "- {apiVersion: v1, kind: Node, metadata: {name: n2}}\nmetadata: {resourceVersion: \"\"}\n");
	snprintf(path, sizeof(path), "%s/cluster.json", dir);
	write_text(path, "{\n\t\"apiVersion\": \"v1\",\n\t\"kind\": \"Node\",\n\t\"metadata\": {\"name\": \"n3\"}\n}\n");
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	write_text(path, "not for simulate\n");
	snprintf(path, sizeof(path), "%s/sub", dir);
	mkdir(path, 0755);
	sim_objs_init(&in);
	f = warn_begin(&mem, &len);
	CU_ASSERT_EQUAL(sim_input_read(dir, &in, &e), 0);
	mem = warn_end(f, &mem);
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(in.objs), 3);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
		json_object_object_get(json_object_array_get_idx(in.objs, 0), "metadata"), "name")), "n3");
	CU_ASSERT_PTR_NOT_NULL(strstr(json_object_get_string(json_object_array_get_idx(in.where, 2)),
				      "dump.yaml document 1 item 2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "notes.txt"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "not .yaml, .yml or .json"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "/sub"));
	free(mem);
	sim_objs_free(&in);
}

/* Objects simulate cannot create are skipped, each with a warning naming
 * it and the reason; the rest load. */
static void test_input_load_skips(void)
{
	clk c;
	memapi *m = NULL;
	sim_objs in;
	size_t loaded = 0;
	char *mem = NULL;
	size_t len = 0;
	prd_err e;
	FILE *f;
	json_object *objs = json_tokener_parse(
		"[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}},"
		"{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"}},"
		"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"namespace\":\"default\"}},"
		"{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}}]");
	size_t i;

	clk_fake_init(&c, T0);
	CU_ASSERT_EQUAL_FATAL(memapi_new(&c, 0, &m), 0);
	sim_objs_init(&in);
	for(i = 0; i < json_object_array_length(objs); i++) {
		json_object_array_add(in.objs, json_object_get(json_object_array_get_idx(objs, i)));
		json_object_array_add(in.where, json_object_new_string("dump.yaml"));
	}
	f = warn_begin(&mem, &len);
	CU_ASSERT_EQUAL(sim_input_load(m, &in, &loaded, &e), 0);
	mem = warn_end(f, &mem);
	CU_ASSERT_EQUAL(loaded, 1);
	CU_ASSERT_EQUAL(count(mem, "object ignored"), 3);
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\"Deployment default/web\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "kind not simulated"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "no metadata.name"));
	CU_ASSERT_PTR_NOT_NULL(strstr(mem, "already exists"));
	free(mem);
	json_object_put(objs);
	sim_objs_free(&in);
	memapi_free(m);
}

/* A --request file is strict: the error names the file, the document and
 * the object. */
static void test_requests_errors(void)
{
	static const struct {
		const char *yaml, *want;
	} cases[] = {
		{ "apiVersion: v1\nkind: Node\nmetadata: {name: x}\n", "document 1 (Node x): only ProvisioningRequests" },
		{ "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: t, namespace: a}\n---\n"
		  "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: r, namespace: a}\n"
		  "spec: {provisioningClassName: check-capacity.autoscaling.x-k8s.io}\n",
		  "document 2 (ProvisioningRequest a/r): spec.podSets is missing" },
		{ "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: r}\n"
		  "spec: {provisioningClassName: x, podSets: [{podTemplateRef: {name: t}, count: 0}]}\n",
		  "spec.podSets[0].count must be an integer from 1 to 2147483647" },
		{ "- 1\n", "document 1: not a Kubernetes object" },
		{ "", "no ProvisioningRequest or PodTemplate" },
	};
	char path[512];
	size_t i;
	snprintf(path, sizeof(path), "%s/req.yaml", test_tmpdir());
	for(i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sim_objs in;
		prd_err e;
		write_text(path, cases[i].yaml);
		sim_objs_init(&in);
		CU_ASSERT_NOT_EQUAL(sim_requests_read(path, &in, &e), 0);
		if(!strstr(e.msg, cases[i].want))
			fprintf(stderr, "case %zu: %s\n", i, e.msg);
		CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].want));
		sim_objs_free(&in);
	}
}

/* A what-if request whose PodTemplate is nowhere, or that clashes with
 * the cluster, is refused naming the document; a good one loads. */
static void test_requests_load(void)
{
	clk c;
	memapi *m = NULL;
	char path[512];
	sim_objs in;
	prd_err e;

	clk_fake_init(&c, T0);
	CU_ASSERT_EQUAL_FATAL(memapi_new(&c, 0, &m), 0);
	snprintf(path, sizeof(path), "%s/whatif.yaml", test_tmpdir());
	write_text(path, "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: r, namespace: a}\n"
			 "spec: {provisioningClassName: x, podSets: [{podTemplateRef: {name: t}, count: 2}]}\n");
	sim_objs_init(&in);
	CU_ASSERT_EQUAL_FATAL(sim_requests_read(path, &in, &e), 0);
	CU_ASSERT_NOT_EQUAL(sim_requests_load(m, &in, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "whatif.yaml document 1"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "PodTemplate a/t"));
	sim_objs_free(&in);
	memapi_free(m);

	CU_ASSERT_EQUAL_FATAL(memapi_new(&c, 0, &m), 0);
	write_text(path, "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: t, namespace: a}\n"
			 "template: {spec: {containers: [{name: c, image: i}]}}\n---\n"
			 "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\nmetadata: {name: r, namespace: a}\n"
			 "spec: {provisioningClassName: x, podSets: [{podTemplateRef: {name: t}, count: 2}]}\n");
	sim_objs_init(&in);
	CU_ASSERT_EQUAL_FATAL(sim_requests_read(path, &in, &e), 0);
	CU_ASSERT_EQUAL(sim_requests_load(m, &in, &e), 0);
	/* loading the same again clashes */
	CU_ASSERT_NOT_EQUAL(sim_requests_load(m, &in, &e), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "document 1 (PodTemplate a/t)"));
	sim_objs_free(&in);
	memapi_free(m);
}

static void test_cloud_config_resolve(void)
{
	char *out = NULL;
	prd_err e;
	json_object *o;
	CU_ASSERT_EQUAL(sim_cloud_config_resolve("/etc/x/cloud.yaml", "templateDir: ../groups\n", &out, &e), 0);
	o = json_tokener_parse(out);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(o, "templateDir")), "/etc/x/../groups");
	json_object_put(o);
	free(out);
	CU_ASSERT_EQUAL(sim_cloud_config_resolve("/etc/x/cloud.yaml", "templateDir: /abs\n", &out, &e), 0);
	CU_ASSERT_STRING_EQUAL(out, "templateDir: /abs\n");
	free(out);
	CU_ASSERT_EQUAL(sim_cloud_config_resolve("cloud.yaml", "templateDir: t\n", &out, &e), 0);
	CU_ASSERT_STRING_EQUAL(out, "templateDir: t\n");
	free(out);
	CU_ASSERT_EQUAL(sim_cloud_config_resolve("d/cloud.yaml", "[not, a, mapping]", &out, &e), 0);
	CU_ASSERT_STRING_EQUAL(out, "[not, a, mapping]");
	free(out);
}

static const test_case cases[] = {
	{ "record transitions", test_record_transitions },
	{ "record spans", test_record_spans },
	{ "state of conditions", test_state_of },
	{ "record sizes", test_record_sizes },
	{ "time offsets", test_offsets },
	{ "report document", test_report_doc },
	{ "svg plot", test_svg },
	{ "svg labels and reasons", test_svg_labels_and_reasons },
	{ "input directory", test_input_dir },
	{ "input load skips", test_input_load_skips },
	{ "request file errors", test_requests_errors },
	{ "request load", test_requests_load },
	{ "cloud config templateDir", test_cloud_config_resolve },
	{ NULL, NULL }
};

TEST_MAIN("sim", cases)

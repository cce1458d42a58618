#include "ctlfix.h"
#include "testutil.h"
#include "classes/pclass.h"
#include "ops/metrics.h"
#include "util/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

memapi *m;
clk fake;
state_db *db;
pr_ctl *ctl;
kube_api api;
cloud_drivers drivers;
static cloud_host_impl host;



/* The plan key, as `provreqd run` has it (pr_plan_key_load): read from,
 * or created in, the Secret in provreqd's namespace of the test's API, so
 * every replica of a test shares it. */
static void use_plan_key(pr_ctl *c)
{
	uint8_t key[32];
	prd_err e;
	CU_ASSERT_EQUAL_FATAL(pr_plan_key_load(&api, "provreqd", key, NULL, &e), 0);
	pr_ctl_set_plan_key(c, key, sizeof(key));
}

static int host_request(void *ud, const char *method, const char *path, const char *ct, const char *body,
			size_t len, long *status, char **resp, size_t *resp_len, prd_cloud_error *err)
{
	int rc = memapi_request(ud, method, path, ct, body, len, status, resp, resp_len);
	if(rc && err) {
		err->code = PRD_CLOUD_EIO;
		snprintf(err->message, sizeof(err->message), "%s %s: HTTP %ld", method, path, *status);
	}
	return rc ? PRD_CLOUD_EIO : 0;
}

int fx_send(const char *method, const char *path, const char *yaml)
{
	json_object *o;
	prd_err e;
	int rc;
	CU_ASSERT_EQUAL_FATAL(yj_parse_one(yaml, strlen(yaml), &o, &e), 0);
	rc = kube_api_call(&api, method, path, !strcmp(method, "PATCH") ? "application/merge-patch+json" : NULL, o, NULL,
			   NULL, &e);
	if(rc)
		fprintf(stderr, "%s %s: %s\n", method, path, e.msg);
	json_object_put(o);
	return rc;
}

void add_node_l(const char *name, const char *cpu, const char *labels)
{
	char y[800];
	snprintf(y, sizeof(y),
		 "metadata: {name: %s, labels: {kubernetes.io/hostname: %s%s%s}}\n"
		 "status:\n  allocatable: {cpu: \"%s\", memory: 16Gi, pods: \"110\"}\n"
		 "  conditions: [{type: Ready, status: \"True\"}]\n",
		 name, name, labels ? ", " : "", labels ? labels : "", cpu);
	fx_send("POST", "/api/v1/nodes", y);
}

void add_ns(const char *name, const char *labels)
{
	char y[300];
	snprintf(y, sizeof(y), "metadata: {name: %s, labels: {%s}}\n", name, labels ? labels : "");
	fx_send("POST", "/api/v1/namespaces", y);
}

void add_template(const char *ns, const char *name, const char *cpu)
{
	char y[600], path[256];
	snprintf(y, sizeof(y),
		 "metadata: {name: %s}\n"
		 "template:\n  spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: \"%s\"}}}]}\n",
		 name, cpu);
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/podtemplates", ns);
	fx_send("POST", path, y);
}

void add_pr(const char *ns, const char *name, const char *cls, const char *tpl, int count, const char *params)
{
	char y[800], path[256];
	snprintf(y, sizeof(y),
		 "metadata: {name: %s}\n"
		 "spec:\n  provisioningClassName: %s\n  podSets: [{podTemplateRef: {name: %s}, count: %d}]\n%s%s\n",
		 name, cls, tpl, count, params ? "  parameters: " : "", params ? params : "");
	snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/%s/provisioningrequests", ns);
	fx_send("POST", path, y);
}

void add_pclass(const char *name, const char *spec)
{
	char y[1000];
	snprintf(y, sizeof(y), "apiVersion: provreqd.io/v1alpha1\nkind: ProvisioningClass\nmetadata: {name: %s}\nspec: %s\n",
		 name, spec);
	CU_ASSERT_EQUAL(fx_send("POST", PR_PCLASS_PATH, y), 0);
}

void edit_pclass(const char *name, const char *spec_patch)
{
	char y[1000], path[300];
	snprintf(y, sizeof(y), "spec: %s\n", spec_patch);
	snprintf(path, sizeof(path), "%s/%s", PR_PCLASS_PATH, name);
	CU_ASSERT_EQUAL(fx_send("PATCH", path, y), 0);
}

json_object *get_pr(const char *ns, const char *name)
{
	char path[300];
	json_object *o = NULL;
	prd_err e;
	snprintf(path, sizeof(path), "/apis/autoscaling.x-k8s.io/v1/namespaces/%s/provisioningrequests/%s", ns, name);
	if(kube_api_call(&api, "GET", path, NULL, NULL, &o, NULL, &e))
		return NULL;
	return o;
}

/* "status/reason" of a condition, or "-" when absent (static buffers). */
const char *cond(const char *ns, const char *name, const char *type)
{
	static char out[8][160];
	static int slot;
	json_object *o = get_pr(ns, name), *cs;
	size_t i;
	char *r = out[slot++ % 8];
	snprintf(r, 160, "-");
	cs = json_object_object_get(json_object_object_get(o, "status"), "conditions");
	for(i = 0; cs && i < json_object_array_length(cs); i++) {
		json_object *c = json_object_array_get_idx(cs, i);
		if(!strcmp(json_object_get_string(json_object_object_get(c, "type")), type))
			snprintf(r, 160, "%s/%s", json_object_get_string(json_object_object_get(c, "status")),
				 json_object_get_string(json_object_object_get(c, "reason")));
	}
	json_object_put(o);
	return r;
}

/* A condition's message, or "" (static buffer). */
const char *cond_msg(const char *ns, const char *name, const char *type)
{
	static char out[600];
	json_object *o = get_pr(ns, name), *cs;
	size_t i;
	out[0] = 0;
	cs = json_object_object_get(json_object_object_get(o, "status"), "conditions");
	for(i = 0; cs && i < json_object_array_length(cs); i++) {
		json_object *c = json_object_array_get_idx(cs, i);
		if(!strcmp(json_object_get_string(json_object_object_get(c, "type")), type))
			snprintf(out, sizeof(out), "%s", json_object_get_string(json_object_object_get(c, "message")));
	}
	json_object_put(o);
	return out;
}

const char *detail_of(const char *ns, const char *name, const char *key)
{
	static char out[600];
	json_object *o = get_pr(ns, name), *v;
	snprintf(out, sizeof(out), "-");
	v = json_object_object_get(json_object_object_get(json_object_object_get(o, "status"), "provisioningClassDetails"),
				   key);
	if(v)
		snprintf(out, sizeof(out), "%s", json_object_get_string(v));
	json_object_put(o);
	return out;
}

/* An Event of this reason about an object of this kind in namespace ns. */
bool has_event(const char *ns, const char *kind, const char *reason)
{
	json_object *o = NULL, *items;
	char path[200];
	prd_err e;
	bool found = false;
	size_t i;
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns);
	if(kube_api_call(&api, "GET", path, NULL, NULL, &o, NULL, &e))
		return false;
	items = json_object_object_get(o, "items");
	for(i = 0; items && i < json_object_array_length(items); i++) {
		json_object *ev = json_object_array_get_idx(items, i);
		json_object *r = json_object_object_get(ev, "reason");
		json_object *k = json_object_object_get(json_object_object_get(ev, "involvedObject"), "kind");
		found |= r && k && !strcmp(json_object_get_string(r), reason) && !strcmp(json_object_get_string(k), kind);
	}
	json_object_put(o);
	return found;
}

void pass(void)
{
	prd_err e;
	int64_t wake;
	int rc = pr_ctl_pass(ctl, &wake, &e);
	CU_ASSERT_EQUAL(rc, 0);
	if(rc)
		fprintf(stderr, "pass: %s\n", e.msg);
}

void start_cfg(const char *driver_cfg, const pr_config *override)
{
	pr_config cfg;
	state_config sc;
	prd_err e;
	char dbpath[600];
	clk_fake_init(&fake, T0);
	metrics_shutdown();
	CU_ASSERT_EQUAL_FATAL(metrics_init(), 0);
	CU_ASSERT_EQUAL_FATAL(memapi_new(&fake, 0, &m), 0);
	api = kube_api_from_memapi(m);
	state_config_default(&sc);
	snprintf(dbpath, sizeof(dbpath), "%s/pclass-%lld.db", test_tmpdir(), (long long)rand());
	CU_ASSERT_EQUAL_FATAL(state_open(dbpath, &fake, &sc, &db, &e), 0);
	cloud_drivers_init(&drivers);
	if(driver_cfg) {
		char path[600];
		const char *b = getenv("PRD_BUILDDIR");
		snprintf(path, sizeof(path), "%s/tests/drivers/.libs/drv_example.so", b ? b : ".");
		cloud_host_init(&host, "driver/example", &fake, host_request, m);
		if(cloud_drivers_load(&drivers, path, &host.host, driver_cfg, NULL, &e))
			fprintf(stderr, "driver: %s\n", e.msg);
	}
	pr_config_default(&cfg);
	if(override)
		cfg = *override;
	CU_ASSERT_EQUAL_FATAL(pr_ctl_new(&cfg, &fake, &api, db, &drivers, &ctl, &e), 0);
	use_plan_key(ctl);
}

void stop(void)
{
	metrics_shutdown();
	pr_ctl_free(ctl);
	cloud_drivers_free(&drivers);
	state_close(db);
	memapi_free(m);
	ctl = NULL;
	db = NULL;
	m = NULL;
}


/* kube-e2e-client: drives provreqd's Kubernetes client library from the
 * e2e scenarios, one subcommand per behaviour under test.
 *
 * Usage: kube-e2e-client [--kubeconfig F] [--context C] [--manager M] CMD ARGS
 *   whoami                                 user name per SelfSubjectReview
 *   get RES NS NAME                        print the object (JSON)
 *   list RES NS [SELECTOR] [LIMIT]         print "items=N pages... rv=RV" and names
 *   create RES NS FILE                     create from a YAML/JSON file, print the name
 *   delete RES NS NAME [UID]               delete (with a uid precondition)
 *   patch RES NS NAME TYPE PATCH [SUB]     TYPE: merge|json|apply|apply-force
 *   rmw-condition NS NAME TYPE WAITFILE READYFILE
 *       read a ProvisioningRequest, create READYFILE, wait for WAITFILE,
 *       then add condition TYPE to its status with a read-modify-write
 *       loop (PUT status with resourceVersion, re-read on 409); prints
 *       "conflicts=N"
 *   apply-condition NS NAME TYPE STATUS REASON
 *       server-side apply of one status condition (field manager --manager)
 *   lease NS NAME IDENTITY                 contend for the Lease; prints
 *       "LEADING id" / "STOPPED id"; SIGTERM releases and exits
 * RES is one of: pods, configmaps, namespaces, nodes, events, leases,
 * provisioningrequests. NS "-" means none.
 * Errors: one line "ERR <code> http=<n> reason=<r>: <message>" on stderr,
 * exit status 3. */
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/client.h"
#include "kube/lease.h"
#include "ops/log.h"
#include "util/rfc3339.h"
#include "util/str.h"
#include "util/yamljson.h"

static const kube_resource *resource(const char *name)
{
	static const struct {
		const char *n;
		const kube_resource *r;
	} t[] = {{"pods", &KUBE_PODS},		 {"configmaps", &KUBE_CONFIGMAPS},
		 {"namespaces", &KUBE_NAMESPACES}, {"nodes", &KUBE_NODES},
		 {"events", &KUBE_EVENTS},	 {"leases", &KUBE_LEASES},
		 {"provisioningrequests", &KUBE_PROVREQS}};
	for(size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if(strcmp(t[i].n, name) == 0)
			return t[i].r;
	return NULL;
}

static int fail(int rc, const kube_status *st, const prd_err *e)
{
	fprintf(stderr, "ERR %s http=%ld reason=%s: %s\n", prd_strerror(rc), st ? st->http_code : 0,
		st && st->reason[0] ? st->reason : "-", e ? e->msg : "");
	return 3;
}

static const char *ns_arg(const char *s)
{
	return strcmp(s, "-") == 0 ? NULL : s;
}

static int print_name(void *ud, json_object *item)
{
	json_object *m, *n;
	(*(long *)ud)++;
	if(json_object_object_get_ex(item, "metadata", &m) && json_object_object_get_ex(m, "name", &n))
		printf("%s\n", json_object_get_string(n));
	return 0;
}

static int cmd_whoami(kube_client *c)
{
	const char *body = "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"SelfSubjectReview\"}";
	json_object *out = NULL, *s, *ui, *u;
	kube_status st;
	prd_err e;
	int rc = kube_request(c, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
			      "application/json", body, strlen(body), &out, &st, &e);
	if(rc)
		return fail(rc, &st, &e);
	if(json_object_object_get_ex(out, "status", &s) && json_object_object_get_ex(s, "userInfo", &ui) &&
	   json_object_object_get_ex(ui, "username", &u))
		printf("%s\n", json_object_get_string(u));
	json_object_put(out);
	return 0;
}

/* Add (or replace) condition `type` in status.conditions of obj. */
static void set_condition(json_object *obj, const char *type, const char *status, const char *reason)
{
	json_object *st, *conds, *c;
	char ts[RFC3339_MAX];

	rfc3339_format(clk_wall(clk_real()), ts, sizeof(ts));
	if(!json_object_object_get_ex(obj, "status", &st) || !json_object_is_type(st, json_type_object)) {
		st = json_object_new_object();
		json_object_object_add(obj, "status", st);
	}
	if(!json_object_object_get_ex(st, "conditions", &conds) || !json_object_is_type(conds, json_type_array)) {
		conds = json_object_new_array();
		json_object_object_add(st, "conditions", conds);
	}
	for(size_t i = 0; i < json_object_array_length(conds); i++) {
		json_object *t;
		c = json_object_array_get_idx(conds, i);
		if(json_object_object_get_ex(c, "type", &t) && str_eq(json_object_get_string(t), type)) {
			json_object_array_del_idx(conds, i, 1);
			break;
		}
	}
	c = json_object_new_object();
	json_object_object_add(c, "type", json_object_new_string(type));
	json_object_object_add(c, "status", json_object_new_string(status));
	json_object_object_add(c, "reason", json_object_new_string(reason));
	json_object_object_add(c, "message", json_object_new_string("set by kube-e2e-client"));
	json_object_object_add(c, "lastTransitionTime", json_object_new_string(ts));
	json_object_array_add(conds, c);
}

static void wait_file(const char *path)
{
	struct timespec ts = {0, 50 * 1000000L};
	for(int i = 0; i < 1200 && access(path, F_OK) != 0; i++)
		nanosleep(&ts, NULL);
}

static int cmd_rmw(kube_client *c, char **a)
{
	const char *ns = a[0], *name = a[1], *type = a[2], *waitf = a[3], *readyf = a[4];
	json_object *obj = NULL;
	kube_status st;
	prd_err e;
	int rc = 0, conflicts = 0;
	bool first = true;

	for(int attempt = 0; attempt < 10; attempt++) {
		json_object_put(obj);
		obj = NULL;
		rc = kube_get(c, &KUBE_PROVREQS, ns, name, &obj, &st, &e);
		if(rc)
			break;
		if(first) {
			/* Let the other writer in between our read and write. */
			FILE *f = fopen(readyf, "w");
			if(f)
				fclose(f);
			wait_file(waitf);
			first = false;
		}
		set_condition(obj, type, "True", "E2ETest");
		rc = kube_update(c, &KUBE_PROVREQS, ns, name, "status", obj, NULL, &st, &e);
		if(rc == PRD_ECONFLICT) {
			conflicts++;
			continue;
		}
		break;
	}
	json_object_put(obj);
	if(rc)
		return fail(rc, &st, &e);
	printf("conflicts=%d\n", conflicts);
	return 0;
}

static int cmd_apply_condition(kube_client *c, char **a)
{
	json_object *obj = json_object_new_object(), *meta = json_object_new_object();
	const char *body;
	kube_status st;
	prd_err e;
	int rc;

	json_object_object_add(obj, "apiVersion", json_object_new_string("autoscaling.x-k8s.io/v1"));
	json_object_object_add(obj, "kind", json_object_new_string("ProvisioningRequest"));
	json_object_object_add(obj, "metadata", meta);
	json_object_object_add(meta, "name", json_object_new_string(a[1]));
	json_object_object_add(meta, "namespace", json_object_new_string(a[0]));
	set_condition(obj, a[2], a[3], a[4]);
	body = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	rc = kube_patch(c, &KUBE_PROVREQS, a[0], a[1], "status", KUBE_PATCH_APPLY, body, true, NULL, &st, &e);
	json_object_put(obj);
	if(rc)
		return fail(rc, &st, &e);
	printf("applied\n");
	return 0;
}

static void lease_started(void *ud)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	printf("LEADING %s %lld\n", (const char *)ud, (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	fflush(stdout);
}

static void lease_stopped(void *ud)
{
	printf("STOPPED %s\n", (const char *)ud);
	fflush(stdout);
}

static int cmd_lease(kube_client *c, char **a)
{
	kube_lease_opts o = {.namespace_ = a[0], .name = a[1], .identity = a[2],
			     .on_started = lease_started, .on_stopped = lease_stopped, .ud = a[2]};
	kube_lease *le = NULL;
	prd_err e;
	sigset_t set;
	int rc, sig = 0;

	/* Block the stop signals before the lease thread exists, so it
	 * inherits the mask and only sigwait() below receives them. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	rc = kube_lease_new(c, &o, &le, &e);
	if(!rc)
		rc = kube_lease_start(le, &e);
	if(rc) {
		kube_lease_free(le);
		return fail(rc, NULL, &e);
	}
	printf("CANDIDATE %s\n", a[2]);
	fflush(stdout);
	sigwait(&set, &sig);
	kube_lease_free(le); /* stops the thread and releases the lease */
	return 0;
}

static int run(kube_client *c, const char *cmd, int argc, char **a)
{
	const kube_resource *r = argc > 0 ? resource(a[0]) : NULL;
	json_object *obj = NULL;
	kube_status st;
	prd_err e = {0};
	int rc;

	if(strcmp(cmd, "whoami") == 0)
		return cmd_whoami(c);
	if(strcmp(cmd, "rmw-condition") == 0 && argc == 5)
		return cmd_rmw(c, a);
	if(strcmp(cmd, "apply-condition") == 0 && argc == 5)
		return cmd_apply_condition(c, a);
	if(strcmp(cmd, "lease") == 0 && argc == 3)
		return cmd_lease(c, a);
	if(!r) {
		fprintf(stderr, "unknown command or resource\n");
		return 2;
	}
	if(strcmp(cmd, "get") == 0 && argc == 3) {
		rc = kube_get(c, r, ns_arg(a[1]), a[2], &obj, &st, &e);
		if(rc)
			return fail(rc, &st, &e);
		printf("%s\n", json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN));
		json_object_put(obj);
		return 0;
	}
	if(strcmp(cmd, "list") == 0 && argc >= 2) {
		kube_list_opts lo = {.label_selector = argc > 2 ? a[2] : NULL,
				     .limit = argc > 3 ? strtol(a[3], NULL, 10) : 0};
		long n = 0;
		char *rv = NULL;
		rc = kube_list(c, r, ns_arg(a[1]), &lo, print_name, &n, &rv, &st, &e);
		if(rc)
			return fail(rc, &st, &e);
		printf("items=%ld rv=%s\n", n, rv ? rv : "");
		free(rv);
		return 0;
	}
	if(strcmp(cmd, "create") == 0 && argc == 3) {
		json_object *out = NULL, *m, *n;
		rc = yj_load_file(a[2], &obj, &e);
		if(rc)
			return fail(rc, NULL, &e);
		rc = kube_create(c, r, ns_arg(a[1]), json_object_array_get_idx(obj, 0), &out, &st, &e);
		json_object_put(obj);
		if(rc)
			return fail(rc, &st, &e);
		if(json_object_object_get_ex(out, "metadata", &m) && json_object_object_get_ex(m, "name", &n))
			printf("%s\n", json_object_get_string(n));
		json_object_put(out);
		return 0;
	}
	if(strcmp(cmd, "delete") == 0 && argc >= 3) {
		kube_delete_opts d = {.uid = argc > 3 ? a[3] : NULL, .grace_period_s = -1};
		rc = kube_delete(c, r, ns_arg(a[1]), a[2], &d, &st, &e);
		if(rc)
			return fail(rc, &st, &e);
		printf("deleted\n");
		return 0;
	}
	if(strcmp(cmd, "patch") == 0 && argc >= 5) {
		kube_patch_type t;
		bool force = false;
		if(strcmp(a[3], "merge") == 0)
			t = KUBE_PATCH_MERGE;
		else if(strcmp(a[3], "json") == 0)
			t = KUBE_PATCH_JSON;
		else if(strcmp(a[3], "apply") == 0)
			t = KUBE_PATCH_APPLY;
		else if(strcmp(a[3], "apply-force") == 0) {
			t = KUBE_PATCH_APPLY;
			force = true;
		} else {
			fprintf(stderr, "unknown patch type %s\n", a[3]);
			return 2;
		}
		rc = kube_patch(c, r, ns_arg(a[1]), a[2], argc > 5 ? a[5] : NULL, t, a[4], force, &obj, &st, &e);
		if(rc)
			return fail(rc, &st, &e);
		printf("%s\n", json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN));
		json_object_put(obj);
		return 0;
	}
	fprintf(stderr, "bad arguments for %s\n", cmd);
	return 2;
}

int main(int argc, char **argv)
{
	const char *kubeconfig = NULL, *context = NULL, *manager = NULL;
	kube_config *cfg = NULL;
	kube_client *c = NULL;
	kube_client_opts o = {0};
	prd_err e = {0};
	int i = 1, rc;

	log_setup(getenv("E2E_CLIENT_DEBUG") ? PRD_LOG_DEBUG : PRD_LOG_WARN, PRD_LOG_TEXT, stderr);
	for(; i + 1 < argc && str_starts_with(argv[i], "--"); i += 2) {
		if(strcmp(argv[i], "--kubeconfig") == 0)
			kubeconfig = argv[i + 1];
		else if(strcmp(argv[i], "--context") == 0)
			context = argv[i + 1];
		else if(strcmp(argv[i], "--manager") == 0)
			manager = argv[i + 1];
		else
			break;
	}
	if(i >= argc) {
		fprintf(stderr, "usage: kube-e2e-client [--kubeconfig F] [--context C] [--manager M] CMD ARGS\n");
		return 2;
	}
	rc = kube_config_auto(kubeconfig, context, &cfg, &e);
	if(rc)
		return fail(rc, NULL, &e);
	o.field_manager = manager;
	rc = kube_client_new(cfg, &o, &c, &e);
	if(rc) {
		kube_config_free(cfg);
		return fail(rc, NULL, &e);
	}
	rc = run(c, argv[i], argc - i - 1, argv + i + 1);
	kube_client_free(c);
	kube_config_free(cfg);
	return rc;
}

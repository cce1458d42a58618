/* kubectl-create-provisioningrequest: the kubectl plugin behind
 * `kubectl create provisioningrequest NAME ...` (kubectl ≥ 1.30 runs
 * kubectl-create-<x> for `kubectl create <x>`, passing every argument on).
 *
 * It builds the ProvisioningRequest (and, with --image/--cpu/--memory/--gpu,
 * its PodTemplate), then either prints it (--dry-run=client) or sends it
 * with the project's REST client. A PodTemplate it created is deleted again
 * when the request cannot be created, and otherwise gets an owner reference
 * to the request so the garbage collector removes it with the request. */
#include "config.h"
#include "kube/client.h"
#include "kube/config.h"
#include "ops/log.h"
#include "plugin/plugin.h"
#include "sched/sched.h"
#include "util/yamljson.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROVREQ_KIND_NAME "provisioningrequest.autoscaling.x-k8s.io"
#define TEMPLATE_KIND_NAME "podtemplate"

/* Print every line of `errs` as "error: <line>". */
static void print_errors(const char *errs)
{
	const char *p = errs;
	while(*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		fprintf(stderr, "error: %.*s\n", (int)n, p);
		p += n + (nl ? 1 : 0);
	}
}

/* A 404 on the ProvisioningRequest collection itself: the apiserver does
 * not serve the resource (a missing namespace also answers 404, but with
 * `namespaces "x" not found`). The generic answer is a Status saying "the
 * server could not find the requested resource", or a bare "404 page not
 * found" that is no Status at all. */
static bool crd_missing(const kube_resource *r, const kube_status *st)
{
	return r == &KUBE_PROVREQS && st->http_code == 404 &&
	       (!st->message[0] || strstr(st->message, "could not find the requested resource"));
}

/* An apiserver error the way kubectl words it, naming the server, since
 * with several kubeconfigs, contexts and --server the user may not know
 * which one answered. */
static void report_api_error(const kube_resource *r, const kube_status *st, const prd_err *e, const char *server)
{
	if(st->http_code <= 0) {
		fprintf(stderr, "error: cannot reach the apiserver at %s: %s\n", server, e->msg);
		return;
	}
	if(crd_missing(r, st)) {
		fprintf(stderr, "error: the apiserver at %s does not serve provisioningrequests.autoscaling.x-k8s.io "
				"(404): is the ProvisioningRequest CRD installed? "
				"kubectl apply -f crd/provisioningrequests.yaml\n", server);
		return;
	}
	fprintf(stderr, "Error from server (%s): %s%s (server %s)\n", st->reason[0] ? st->reason : "Unknown",
		st->message[0] ? st->message : e->msg,
		strlen(st->message) + 1 >= sizeof(st->message) ? " [message truncated]" : "", server);
}

/* kubectl hides managedFields unless asked; so do we. */
static void strip_managed_fields(json_object *obj)
{
	json_object *meta;
	if(json_object_object_get_ex(obj, "metadata", &meta))
		json_object_object_del(meta, "managedFields");
}

/* Print the objects as -o asks. `dry` adds kubectl's " (dry run)" /
 * " (server dry run)" note to the default form. */
static int print_objects(const plug_opts *o, json_object *tmpl, json_object *req)
{
	const char *note = o->dry_run == PLUG_DRY_CLIENT ? " (dry run)" :
			   o->dry_run == PLUG_DRY_SERVER ? " (server dry run)" : "";
	json_object *items[2];
	size_t n = 0, i;
	int rc = 0;

	if(tmpl)
		items[n++] = tmpl;
	items[n++] = req;
	for(i = 0; i < n; i++)
		strip_managed_fields(items[i]);
	switch(o->output) {
	case PLUG_OUT_DEFAULT:
	case PLUG_OUT_NAME:
		for(i = 0; i < n; i++) {
			json_object *meta = NULL, *name = NULL;
			json_object_object_get_ex(items[i], "metadata", &meta);
			json_object_object_get_ex(meta, "name", &name);
			printf("%s/%s%s%s\n", items[i] == req ? PROVREQ_KIND_NAME : TEMPLATE_KIND_NAME,
			       json_object_get_string(name), o->output == PLUG_OUT_NAME ? "" : " created",
			       o->output == PLUG_OUT_NAME ? "" : note);
		}
		return 0;
	case PLUG_OUT_YAML:
	case PLUG_OUT_JSON: {
		json_object *doc = req, *list = NULL;
		buf b;
		if(n > 1) {
			json_object *arr = json_object_new_array();
			list = json_object_new_object();
			if(!arr || !list) {
				json_object_put(arr);
				json_object_put(list);
				return PRD_ENOMEM;
			}
			json_object_object_add(list, "apiVersion", json_object_new_string("v1"));
			json_object_object_add(list, "kind", json_object_new_string("List"));
			for(i = 0; i < n; i++)
				json_object_array_add(arr, json_object_get(items[i]));
			json_object_object_add(list, "items", arr);
			doc = list;
		}
		buf_init(&b);
		if(o->output == PLUG_OUT_YAML) {
			rc = yj_print_yaml(doc, &b);
		} else {
			const char *s = json_object_to_json_string_ext(
				doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
			rc = s ? buf_printf(&b, "%s\n", s) : PRD_ENOMEM;
		}
		if(!rc)
			fputs(buf_str(&b), stdout);
		buf_free(&b);
		json_object_put(list);
		return rc;
	}
	}
	return 0;
}

/* POST `obj` to the collection of `r` in `ns`, with dryRun=All for a server
 * dry run. *out gets the stored (or would-be stored) object. */
static int create(kube_client *c, const plug_opts *o, const kube_resource *r, const char *ns, json_object *obj,
		  json_object **out, kube_status *st, prd_err *e)
{
	char *path = kube_path(r, ns, NULL, NULL);
	char *full = path ? str_printf("%s?fieldManager=kubectl-create%s", path,
				       o->dry_run == PLUG_DRY_SERVER ? "&dryRun=All" : "") : NULL;
	const char *body = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);
	int rc;

	if(!full || !body)
		rc = prd_err_set(e, PRD_ENOMEM, "out of memory");
	else
		rc = kube_request(c, "POST", full, "application/json", body, strlen(body), out, st, e);
	free(full);
	free(path);
	return rc;
}

/* Make the PodTemplate owned by the request, so deleting the request
 * deletes it. Failure only costs the clean-up, so it is a warning. */
static void adopt_template(kube_client *c, const char *ns, const char *tmpl_name, json_object *req)
{
	json_object *meta = NULL, *uid = NULL, *name = NULL;
	kube_status st;
	prd_err e;
	char *patch;

	memset(&st, 0, sizeof(st));
	prd_err_clear(&e);
	json_object_object_get_ex(req, "metadata", &meta);
	json_object_object_get_ex(meta, "uid", &uid);
	json_object_object_get_ex(meta, "name", &name);
	if(!uid || !name)
		return;
	patch = str_printf("{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"autoscaling.x-k8s.io/v1\","
			   "\"kind\":\"ProvisioningRequest\",\"name\":\"%s\",\"uid\":\"%s\"}]}}",
			   json_object_get_string(name), json_object_get_string(uid));
	if(!patch || kube_patch(c, &KUBE_PODTEMPLATES, ns, tmpl_name, NULL, KUBE_PATCH_MERGE, patch, false, NULL,
				&st, &e))
		fprintf(stderr, "warning: podtemplate/%s is not owned by the request and will not be deleted "
				"with it: %s\n", tmpl_name, patch ? e.msg : "out of memory");
	free(patch);
}

/* The request could not be created: take back the PodTemplate created
 * for it, saying whether that worked. */
static void delete_template(kube_client *c, const char *ns, const char *tmpl_name)
{
	kube_status st;
	prd_err e;

	memset(&st, 0, sizeof(st));
	if(kube_delete(c, &KUBE_PODTEMPLATES, ns, tmpl_name, NULL, &st, &e) == 0)
		fprintf(stderr, "podtemplate/%s deleted again, since the request was not created\n", tmpl_name);
	else
		fprintf(stderr, "warning: podtemplate/%s was created but could not be deleted: %s\n", tmpl_name,
			e.msg);
}

/* A --template that does not exist (yet) is no error: a request may come
 * before its PodTemplate. But it is usually a typo, and the request would
 * wait for it and then fail: say so. Only a 404 is reported; a user who
 * may not read PodTemplates is told nothing. */
static void warn_missing_templates(kube_client *c, const plug_opts *o, const char *ns)
{
	size_t i;
	for(i = 0; i < o->n_podsets; i++) {
		const char *t = o->podsets[i].template_name;
		json_object *got = NULL;
		kube_status st;
		prd_err e;
		memset(&st, 0, sizeof(st));
		if(kube_get(c, &KUBE_PODTEMPLATES, ns, t, &got, &st, &e) == PRD_ENOTFOUND)
			fprintf(stderr, "warning: podtemplate/%s does not exist in namespace %s: the request waits for it, "
					"and provreqd fails it if it is not created within --missing-template-grace (default 5m)\n",
				t, ns);
		json_object_put(got);
	}
}

/* A count above what provreqd can plan is valid for the CRD (and maybe for
 * another autoscaler), so it is a warning, not a refusal. */
static void warn_counts(const plug_opts *o)
{
	size_t i;
	for(i = 0; i < o->n_podsets; i++)
		if((int64_t)o->podsets[i].count > SCHED_COUNT_MAX)
			fprintf(stderr, "warning: --count %ld: provreqd plans at most %lld pods of one pod set and fails "
					"this request at once (Failed=True/InvalidRequest)\n",
				(long)o->podsets[i].count, (long long)SCHED_COUNT_MAX);
}

static int run(const plug_opts *o)
{
	kube_config *kc = NULL;
	kube_client *c = NULL;
	kube_client_opts copts;
	kube_config_overrides ov;
	json_object *req = NULL, *tmpl = NULL, *req_out = NULL, *tmpl_out = NULL;
	const char *ns = o->namespace_;
	kube_status st;
	prd_err e;
	int rc = 1;

	memset(&st, 0, sizeof(st));
	prd_err_clear(&e);
	memset(&ov, 0, sizeof(ov));
	ov.context = o->context;
	ov.cluster = o->cluster;
	ov.user = o->user;
	ov.server = o->server;
	ov.token = o->token;
	ov.insecure_skip_tls_verify = o->insecure;
	ov.impersonate_user = o->as_user;
	ov.impersonate_groups = o->as_groups;
	if(!ns || o->dry_run != PLUG_DRY_CLIENT) {
		if(kube_config_auto_with(o->kubeconfig, &ov, &kc, &e)) {
			/* A client-side dry run needs no cluster; unless the
			 * flags name a kubeconfig or an entry of one, it prints
			 * for "default". */
			if(o->dry_run != PLUG_DRY_CLIENT || o->kubeconfig || o->context || o->cluster || o->user) {
				fprintf(stderr, "error: cannot load the kubeconfig: %s\n", e.msg);
				goto done;
			}
		}
		if(!ns)
			ns = kc && kc->namespace_ && kc->namespace_[0] ? kc->namespace_ : "default";
	}
	/* Like kubectl, a client-side dry run shows metadata.namespace only
	 * when -n was given. */
	warn_counts(o);
	req = plug_build_request(o, o->dry_run == PLUG_DRY_CLIENT ? o->namespace_ : ns);
	if(o->make_template)
		tmpl = plug_build_template(o, o->dry_run == PLUG_DRY_CLIENT ? o->namespace_ : ns);
	if(!req || (o->make_template && !tmpl)) {
		fputs("error: out of memory\n", stderr);
		goto done;
	}
	if(o->dry_run == PLUG_DRY_CLIENT) {
		rc = print_objects(o, tmpl, req) ? 1 : 0;
		goto done;
	}

	memset(&copts, 0, sizeof(copts));
	copts.user_agent = PLUG_PROGRAM "/" PACKAGE_VERSION;
	copts.field_manager = "kubectl-create";
	copts.max_retries = 2;
	if(o->request_timeout_ms > 0)
		copts.request_timeout_ms = o->request_timeout_ms;
	if(kube_client_new(kc, &copts, &c, &e)) {
		fprintf(stderr, "error: %s\n", e.msg);
		goto done;
	}
	if(!tmpl)
		warn_missing_templates(c, o, ns);
	if(tmpl && create(c, o, &KUBE_PODTEMPLATES, ns, tmpl, &tmpl_out, &st, &e)) {
		report_api_error(&KUBE_PODTEMPLATES, &st, &e, kc->server);
		goto done;
	}
	if(create(c, o, &KUBE_PROVREQS, ns, req, &req_out, &st, &e)) {
		report_api_error(&KUBE_PROVREQS, &st, &e, kc->server);
		if(tmpl_out && o->dry_run == PLUG_DRY_NONE)
			delete_template(c, ns, o->podsets[0].template_name);
		goto done;
	}
	if(tmpl_out && o->dry_run == PLUG_DRY_NONE)
		adopt_template(c, ns, o->podsets[0].template_name, req_out);
	rc = print_objects(o, tmpl_out, req_out ? req_out : req) ? 1 : 0;
done:
	json_object_put(req);
	json_object_put(tmpl);
	json_object_put(req_out);
	json_object_put(tmpl_out);
	kube_client_free(c);
	kube_config_free(kc);
	return rc;
}

int main(int argc, char **argv)
{
	plug_opts o;
	buf errs;
	int rc;

	log_setup(PRD_LOG_WARN, PRD_LOG_TEXT, stderr);
	buf_init(&errs);
	rc = plug_parse(argc - 1, argv + 1, &o, &errs);
	if(o.help) {
		fputs(plug_usage(), stdout);
		rc = 0;
	} else if(rc == PRD_ENOMEM) {
		fputs("error: out of memory\n", stderr);
		rc = 1;
	} else if(rc) {
		print_errors(buf_str(&errs));
		fputs("See '" PLUG_COMMAND " --help' for usage.\n", stderr);
		rc = 1;
	} else {
		rc = run(&o);
	}
	buf_free(&errs);
	plug_opts_free(&o);
	return rc;
}

/* ProvisioningClass (provreqd.io/v1alpha1): reading the object, merging
 * parameters, and the controller serving requests that name one, against
 * the in-memory API, a real state store and a fake clock. Each test says
 * which broken controller it catches. */
#include "testutil.h"
#include "ctlfix.h"
#include "classes/pclass.h"
#include "classes/vocab.h"
#include "driver/host.h"
#include "ops/metrics.h"
#include "provreq/controller.h"
#include "util/yamljson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* ---- the object alone ----------------------------------------------------- */

static int parse_yaml(const char *yaml, pr_pclass *out)
{
	json_object *o;
	kube_intern *in = kube_intern_new();
	kube_meta *km = NULL;
	prd_err e;
	int rc;
	CU_ASSERT_EQUAL_FATAL(yj_parse_one(yaml, strlen(yaml), &o, &e), 0);
	CU_ASSERT_EQUAL_FATAL(kube_decode(KUBE_KIND_PROVCLASS, o, in, &km, &e), 0);
	rc = pr_pclass_parse(kube_as_provclass(km), out, &e);
	kube_obj_free(in, km);
	kube_intern_free(in);
	json_object_put(o);
	return rc;
}

/* A well-formed object reads back whole; every malformed one is refused
 * with a message naming the field. Broken controller caught: one that
 * serves requests through a class whose spec it cannot read (a missing
 * class name, a fixed key without a value, a selector that does not
 * parse, a processorInstance that would move requests between shards). */
static void test_parse(void)
{
	static const struct {
		const char *spec, *words;
	} bad[] = {
		{ "{}", "spec.provisioningClassName is required" },
		{ "{provisioningClassName: \"Not_A_Name\"}", "is not a DNS subdomain" },
		{ "{provisioningClassName: a.b, parameters: [x]}", "spec.parameters must be a map" },
		{ "{provisioningClassName: a.b, parameters: {x: {y: z}}}", "spec.parameters.x must be a string" },
		/* (A value refused after others were read: those were leaked
		 * until the fuzzer found it; the sanitizers' build of this test
		 * fails on such a leak.) */
		{ "{provisioningClassName: a.b, parameters: {a: \"1\", b: \"2\", x: [y]}}", "spec.parameters.x must be a string" },
		{ "{provisioningClassName: a.b, parameters: {x: \"1\"}, fixedParameters: [y]}",
		  "spec.fixedParameters names y" },
		{ "{provisioningClassName: a.b, parameters: {processorInstance: one}}", "processorInstance cannot be given" },
		{ "{provisioningClassName: a.b, allowedNamespaces: {matchExpressions: [{key: t, operator: Sometimes}]}}",
		  "spec.allowedNamespaces" },
	};
	pr_pclass p;
	size_t i;
	CU_ASSERT_EQUAL(parse_yaml("metadata: {name: gpu-2h, uid: u1, resourceVersion: \"7\"}\n"
				   "spec:\n  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io\n"
				   "  description: GPU gangs\n"
				   "  parameters: {ValidUntilSeconds: \"7200\", a: b}\n"
				   "  fixedParameters: [ValidUntilSeconds]\n"
				   "  allowedNamespaces: {matchLabels: {team: ml}}\n",
				   &p),
			0);
	CU_ASSERT_PTR_NULL(p.error);
	CU_ASSERT_STRING_EQUAL(p.name, "gpu-2h");
	CU_ASSERT_STRING_EQUAL(p.rv, "7");
	CU_ASSERT_STRING_EQUAL(p.target, PR_CLASS_ATOMIC);
	CU_ASSERT_STRING_EQUAL(p.description, "GPU gangs");
	CU_ASSERT_EQUAL_FATAL(p.nparams, 2);
	CU_ASSERT_STRING_EQUAL(p.params[0].key, "ValidUntilSeconds");
	CU_ASSERT_STRING_EQUAL(p.params[1].key, "a");
	CU_ASSERT_EQUAL(p.nfixed, 1);
	CU_ASSERT_STRING_EQUAL(p.allowed_text, "team=ml");
	pr_pclass_clear(&p);
	for(i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char y[600];
		snprintf(y, sizeof(y), "metadata: {name: c%zu}\nspec: %s\n", i, bad[i].spec);
		CU_ASSERT_EQUAL(parse_yaml(y, &p), 0);
		CU_ASSERT_PTR_NOT_NULL(p.error);
		CU_ASSERT_PTR_NULL(p.target);
		if(!p.error || !strstr(p.error, bad[i].words))
			fprintf(stderr, "case %zu: got \"%s\", want \"%s\"\n", i, p.error ? p.error : "(none)", bad[i].words);
		CU_ASSERT_TRUE(p.error && strstr(p.error, bad[i].words));
		pr_pclass_clear(&p);
	}
}

/* The request's own parameters win, except those the class fixes; the
 * result is in key order. Broken controller caught: one where the class's
 * defaults override the request, or a fixed key can still be overridden. */
static void test_merge(void)
{
	pr_pclass p;
	kube_kv req[2] = { { "noRetry", "true" }, { "ValidUntilSeconds", "99" } }, *out = NULL;
	size_t n = 0;
	arena ar;
	char *js;
	arena_init(&ar);
	CU_ASSERT_EQUAL_FATAL(parse_yaml("metadata: {name: c}\n"
					 "spec: {provisioningClassName: a.b, parameters: {ValidUntilSeconds: \"15\", "
					 "noRetry: \"false\", x: y}}\n",
					 &p),
			      0);
	CU_ASSERT_EQUAL(pr_pclass_merge(&p, req, 2, &ar, &out, &n), 0);
	js = pr_pclass_params_json(out, n);
	CU_ASSERT_STRING_EQUAL(js, "{\"ValidUntilSeconds\":\"99\",\"noRetry\":\"true\",\"x\":\"y\"}");
	free(js);
	pr_pclass_clear(&p);
	CU_ASSERT_EQUAL_FATAL(parse_yaml("metadata: {name: c}\n"
					 "spec: {provisioningClassName: a.b, parameters: {ValidUntilSeconds: \"15\"}, "
					 "fixedParameters: [ValidUntilSeconds]}\n",
					 &p),
			      0);
	CU_ASSERT_EQUAL(pr_pclass_merge(&p, req, 2, &ar, &out, &n), 0);
	js = pr_pclass_params_json(out, n);
	CU_ASSERT_STRING_EQUAL(js, "{\"ValidUntilSeconds\":\"15\",\"noRetry\":\"true\"}");
	free(js);
	pr_pclass_clear(&p);
	arena_free(&ar);
}

/* ---- the controller ------------------------------------------------------- */

/* A class's ValidUntilSeconds applies to a request that names the class
 * and says nothing of it; the request shows which class served it and
 * with what. Broken controllers caught: one that leaves a request naming
 * a ProvisioningClass alone (no condition at all), one that serves it
 * without the class's parameters (it would still be retrying at 16 s),
 * one that does not show the effective parameters. */
static void test_class_parameters_apply(void)
{
	start(NULL);
	add_node("n1", "2");
	add_template("team", "big", "8");
	add_pclass("short", "{provisioningClassName: check-capacity.autoscaling.x-k8s.io, parameters: {ValidUntilSeconds: "
			    "\"15\"}}");
	add_pr("team", "job", "short", "big", 1, NULL);
	add_pr("team", "mine", "short", "big", 1, "{ValidUntilSeconds: \"100\"}");
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "job", "Accepted"), "True/Accepted");
	CU_ASSERT_STRING_EQUAL(cond("team", "job", "Provisioned"), "False/CapacityIsNotFound");
	CU_ASSERT_STRING_EQUAL(detail_of("team", "job", PR_DETAIL_PCLASS), "short");
	CU_ASSERT_STRING_EQUAL(detail_of("team", "job", PR_DETAIL_EFFECTIVE_PARAMS), "{\"ValidUntilSeconds\":\"15\"}");
	CU_ASSERT_STRING_EQUAL(detail_of("team", "mine", PR_DETAIL_EFFECTIVE_PARAMS), "{\"ValidUntilSeconds\":\"100\"}");
	clk_fake_advance(&fake, 16 * SEC);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "job", "Failed"), "True/Expired");
	CU_ASSERT_TRUE(strstr(cond_msg("team", "job", "Failed"), "ValidUntilSeconds=15") != NULL);
	/* The request's own value won where the class did not fix it. */
	CU_ASSERT_STRING_EQUAL(cond("team", "mine", "Failed"), "-");
	/* The class's name never reached the status as a class of its own. */
	{
		double v = -1;
		CU_ASSERT_TRUE(metrics_get(M_PCLASSES, METRICS_L("true"), &v));
		CU_ASSERT_EQUAL(v, 1);
	}
	stop();
}

/* A fixed parameter is the class's whatever the request says. Broken
 * controller caught: one that lets the request override it (the request
 * would still retry at 16 s). */
static void test_fixed_parameter(void)
{
	start(NULL);
	add_node("n1", "2");
	add_template("team", "big", "8");
	add_pclass("short", "{provisioningClassName: check-capacity.autoscaling.x-k8s.io, parameters: {ValidUntilSeconds: "
			    "\"15\"}, fixedParameters: [ValidUntilSeconds]}");
	add_pr("team", "mine", "short", "big", 1, "{ValidUntilSeconds: \"100\"}");
	pass();
	CU_ASSERT_STRING_EQUAL(detail_of("team", "mine", PR_DETAIL_EFFECTIVE_PARAMS), "{\"ValidUntilSeconds\":\"15\"}");
	clk_fake_advance(&fake, 16 * SEC);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "mine", "Failed"), "True/Expired");
	stop();
}

/* allowedNamespaces: a request from a namespace the selector does not
 * match fails saying so; one from a matching namespace is served. Broken
 * controller caught: one that ignores allowedNamespaces, or that refuses
 * every namespace once a selector is set. */
static void test_allowed_namespaces(void)
{
	start(NULL);
	add_node("n1", "4");
	add_ns("ml", "team: ml");
	add_ns("web", "team: web");
	add_template("ml", "one", "1");
	add_template("web", "one", "1");
	add_pclass("ml-only", "{provisioningClassName: check-capacity.autoscaling.x-k8s.io, allowedNamespaces: "
			      "{matchLabels: {team: ml}}}");
	add_pr("ml", "ok", "ml-only", "one", 1, NULL);
	add_pr("web", "no", "ml-only", "one", 1, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "ok", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_STRING_EQUAL(cond("web", "no", "Failed"), "True/" PR_R_NS_NOT_ALLOWED);
	CU_ASSERT_STRING_EQUAL(cond("web", "no", "Accepted"), "False/" PR_R_NS_NOT_ALLOWED);
	CU_ASSERT_STRING_EQUAL(cond("web", "no", "Provisioned"), "-");
	CU_ASSERT_TRUE(strstr(cond_msg("web", "no", "Failed"), "team=ml") != NULL);
	CU_ASSERT_TRUE(strstr(cond_msg("web", "no", "Failed"), "namespace web") != NULL);
	stop();
}

/* A malformed class, and one naming a class nobody here serves: requests
 * naming them fail with the reason, the object gets a Warning Event, the
 * gauge counts them, and the rest of the pass goes on. Broken controllers
 * caught: one that leaves such requests waiting forever with nothing said
 * (the typo the issue is about), one that stops the pass on a bad object,
 * one that tells the administrator nothing. */
static void test_unusable_classes(void)
{
	double v = -1;
	start(NULL);
	add_node("n1", "4");
	add_template("team", "one", "1");
	add_pclass("broken", "{provisioningClassName: check-capacity.autoscaling.x-k8s.io, parameters: {ValidUntilSeconds: "
			     "soon}}");
	add_pclass("typo", "{provisioningClassName: chek-capacity.autoscaling.x-k8s.io}");
	add_pr("team", "a", "broken", "one", 1, NULL);
	add_pr("team", "b", "typo", "one", 1, NULL);
	add_pr("team", "c", PR_CLASS_CHECK, "one", 1, NULL);
	add_pr("team", "d", "example.com/nobody", "one", 1, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "a", "Failed"), "True/" PR_R_PCLASS_INVALID);
	CU_ASSERT_TRUE(strstr(cond_msg("team", "a", "Failed"), "ValidUntilSeconds") != NULL);
	CU_ASSERT_STRING_EQUAL(cond("team", "b", "Failed"), "True/" PR_R_PCLASS_INVALID);
	CU_ASSERT_TRUE(strstr(cond_msg("team", "b", "Failed"), "chek-capacity.autoscaling.x-k8s.io") != NULL);
	CU_ASSERT_STRING_EQUAL(cond("team", "c", "Provisioned"), "True/CapacityIsFound");
	/* A class name that is no ProvisioningClass is still left alone. */
	CU_ASSERT_STRING_EQUAL(cond("team", "d", "Accepted"), "-");
	CU_ASSERT_TRUE(has_event("default", "ProvisioningClass", PR_R_PCLASS_INVALID));
	CU_ASSERT_TRUE(metrics_get(M_PCLASSES, METRICS_L("false"), &v));
	CU_ASSERT_EQUAL(v, 2);
	stop();
}

/* A ProvisioningClass with the name of a class provreqd serves itself is
 * never read (requests naming it go to the built-in class): the
 * administrator is told, with a Warning Event on the object, and it counts
 * as unusable. Broken controller caught: one that ignores it silently
 * (issue 41), and one that lets it take over the built-in name (the
 * request would scale up through the atomic target). */
static void test_class_named_like_builtin(void)
{
	double v = -1;
	start(NULL);
	add_node("n1", "4");
	add_template("team", "one", "1");
	add_pclass(PR_CLASS_CHECK, "{provisioningClassName: " PR_CLASS_ATOMIC "}");
	add_pr("team", "a", PR_CLASS_CHECK, "one", 1, NULL);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("team", "a", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_TRUE(has_event("default", "ProvisioningClass", PR_R_PCLASS_INVALID));
	CU_ASSERT_TRUE(metrics_get(M_PCLASSES, METRICS_L("false"), &v));
	CU_ASSERT_EQUAL(v, 1);
	stop();
}

/* A request of an atomic class through a ProvisioningClass scales up once,
 * and later passes follow the plan rather than start another. Broken
 * controllers caught: one that leaves a request naming a class whose
 * target is the atomic class alone (no scale-up), one that plans again on
 * each pass. */
static void test_atomic_through_class(void)
{
	start("small 0 5 0 4 16Gi 110\n");
	add_template("r", "two", "2");
	add_pclass("gang", "{provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io, parameters: "
			   "{ValidUntilSeconds: \"3600\"}}");
	add_pr("r", "job", "gang", "two", 4, NULL);
	pass();
	CU_ASSERT_EQUAL(pr_ctl_stats(ctl)->scaleups_started, 1);
	CU_ASSERT_STRING_EQUAL(cond("r", "job", "Provisioned"), "False/ScaleUpInProgress");
	CU_ASSERT_STRING_EQUAL(detail_of("r", "job", PR_DETAIL_PCLASS), "gang");
	clk_fake_advance(&fake, 5 * SEC);
	pass();
	clk_fake_advance(&fake, 5 * SEC);
	pass();
	CU_ASSERT_EQUAL(pr_ctl_stats(ctl)->scaleups_started, 1); /* (counted since the start: no second plan) */
	CU_ASSERT_STRING_EQUAL(cond("r", "job", "Provisioned"), "False/ScaleUpInProgress");
	stop();
}

/* ---- informer mode: a change applies to requests not yet decided -------- */

static uint64_t gen_of(kube_informer *inf)
{
	uint64_t g;
	kube_informer_rdlock(inf);
	g = kube_informer_generation(inf);
	kube_informer_rdunlock(inf);
	return g;
}

static void seen_after(kube_informer *inf, uint64_t g)
{
	int k;
	for(k = 0; k < 2000 && gen_of(inf) == g; k++)
		usleep(1000);
}

/* Informers for the four core kinds and ProvisioningClasses. */
static void use_informers(kube_informer *inf[5], kube_listwatch lw[5], kube_intern *in)
{
	static const kube_kind kinds[5] = { KUBE_KIND_NODE, KUBE_KIND_POD, KUBE_KIND_PODTEMPLATE, KUBE_KIND_PROVREQ,
					    KUBE_KIND_PROVCLASS };
	const kube_resource *res[5];
	pr_informers pi;
	prd_err e;
	int i;
	res[0] = memapi_resource_for_kind(m, "v1", "Node");
	res[1] = memapi_resource_for_kind(m, "v1", "Pod");
	res[2] = memapi_resource_for_kind(m, "v1", "PodTemplate");
	res[3] = memapi_resource_for_kind(m, "autoscaling.x-k8s.io/v1", "ProvisioningRequest");
	res[4] = memapi_resource_for_kind(m, PR_PCLASS_API_VERSION, PR_PCLASS_KIND);
	for(i = 0; i < 5; i++) {
		kube_informer_opts o;
		memset(&o, 0, sizeof(o));
		o.kind = kinds[i];
		o.intern = in;
		CU_ASSERT_PTR_NOT_NULL_FATAL(res[i]);
		CU_ASSERT_EQUAL_FATAL(kube_informer_new(&o, &inf[i], &e), 0);
		memapi_listwatch(m, res[i], &lw[i]);
		CU_ASSERT_EQUAL_FATAL(kube_informer_start(inf[i], &lw[i], &e), 0);
		CU_ASSERT_TRUE(kube_informer_wait_synced(inf[i]));
	}
	memset(&pi, 0, sizeof(pi));
	pi.intern = in;
	pi.nodes = inf[0];
	pi.pods = inf[1];
	pi.podtemplates = inf[2];
	pi.provreqs = inf[3];
	pi.provclasses = inf[4];
	pr_ctl_use_informers(ctl, &pi);
}

/* In informer mode a pass decides only the requests something changed
 * for. A request waiting on a class whose ValidUntilSeconds is an hour is
 * decided again when the administrator shortens it, and a request naming
 * a class created after it is served once the class appears. Broken
 * controllers caught: one that keeps using the class as it was when the
 * request was first decided, one that never looks at a request whose
 * class arrived late (neither changed the request itself). */
static void test_changes_apply_to_undecided(void)
{
	kube_informer *inf[5];
	kube_listwatch lw[5];
	kube_intern *in = kube_intern_new();
	uint64_t g;
	int i;
	start(NULL);
	add_node("n1", "2");
	add_template("team", "big", "8");
	add_template("team", "one", "1");
	add_pclass("slow", "{provisioningClassName: check-capacity.autoscaling.x-k8s.io, parameters: {ValidUntilSeconds: "
			   "\"3600\"}}");
	use_informers(inf, lw, in);
	g = gen_of(inf[3]);
	add_pr("team", "job", "slow", "big", 1, NULL);
	add_pr("team", "late", "later", "one", 1, NULL);
	seen_after(inf[3], g);
	for(i = 0; i < 2500 && strcmp(cond("team", "job", "Provisioned"), "False/CapacityIsNotFound"); i++) {
		usleep(2000);
		pass();
	}
	CU_ASSERT_STRING_EQUAL(cond("team", "job", "Provisioned"), "False/CapacityIsNotFound");
	CU_ASSERT_STRING_EQUAL(cond("team", "late", "Accepted"), "-");
	/* A minute on, nothing changed but the class. */
	clk_fake_advance(&fake, MIN);
	g = gen_of(inf[4]);
	edit_pclass("slow", "{parameters: {ValidUntilSeconds: \"30\"}}");
	add_pclass("later", "{provisioningClassName: check-capacity.autoscaling.x-k8s.io}");
	seen_after(inf[4], g);
	for(i = 0; i < 2500 && (strcmp(cond("team", "job", "Failed"), "True/Expired") ||
			      strcmp(cond("team", "late", "Provisioned"), "True/CapacityIsFound"));
	    i++) {
		usleep(2000);
		pass();
	}
	CU_ASSERT_STRING_EQUAL(cond("team", "job", "Failed"), "True/Expired");
	CU_ASSERT_STRING_EQUAL(cond("team", "late", "Provisioned"), "True/CapacityIsFound");
	CU_ASSERT_STRING_EQUAL(detail_of("team", "late", PR_DETAIL_PCLASS), "later");
	pr_ctl_free(ctl); /* (its copies of cached requests use the informers' strings) */
	ctl = NULL;
	for(i = 0; i < 5; i++)
		kube_informer_free(inf[i]);
	kube_intern_free(in);
	stop();
}

/* The request's Namespace cannot be read (the apiserver answers 500): the
 * request waits and is decided once it can be, neither failed nor served
 * unchecked in between. Broken controllers caught: one that fails the
 * request on a passing error, one that serves it without checking. */
static void test_namespace_unreadable_waits(void)
{
	start(NULL);
	add_node("n1", "4");
	add_ns("ml", "team: ml");
	add_template("ml", "one", "1");
	add_pclass("ml-only", "{provisioningClassName: check-capacity.autoscaling.x-k8s.io, allowedNamespaces: "
			      "{matchLabels: {team: ml}}}");
	add_pr("ml", "ok", "ml-only", "one", 1, NULL);
	memapi_inject_fault(m, "GET", "/api/v1/namespaces/ml", 500, 1);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "ok", "Accepted"), "-");
	CU_ASSERT_STRING_EQUAL(cond("ml", "ok", "Failed"), "-");
	clk_fake_advance(&fake, 11 * SEC);
	pass();
	CU_ASSERT_STRING_EQUAL(cond("ml", "ok", "Provisioned"), "True/CapacityIsFound");
	stop();
}

static const test_case cases[] = {
	{ "a Namespace that cannot be read: the request waits", test_namespace_unreadable_waits },
	{ "a ProvisioningClass is read and checked", test_parse },
	{ "request parameters over the class's, except fixed ones", test_merge },
	{ "a class's parameters apply to its requests", test_class_parameters_apply },
	{ "a fixed parameter cannot be overridden", test_fixed_parameter },
	{ "allowedNamespaces", test_allowed_namespaces },
	{ "malformed classes and unknown targets are refused and reported", test_unusable_classes },
	{ "a class named like a built-in one is reported, never used", test_class_named_like_builtin },
	{ "an atomic scale-up through a class", test_atomic_through_class },
	{ "informer mode: class changes apply to requests not yet decided", test_changes_apply_to_undecided },
	{ NULL, NULL }
};

TEST_MAIN("pclass", cases)

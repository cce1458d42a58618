/* kubectl-create-provisioningrequest without an apiserver: the command line
 * (every accepted form and every refusal, with its message), the objects
 * built from it, and the YAML printer (read back through our YAML reader,
 * so a string never comes back as another type). */
#include "testutil.h"

#include "plugin/plugin.h"
#include "util/str.h"
#include "util/yamljson.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAXARGS 80

/* Parse a NULL-terminated argument list; returns plug_parse's code. The
 * messages are left in `errs` (caller frees). */
static int parse(plug_opts *o, buf *errs, ...)
{
	char *argv[MAXARGS];
	int argc = 0;
	va_list ap;
	const char *a;

	buf_init(errs);
	va_start(ap, errs);
	while((a = va_arg(ap, const char *)) != NULL && argc < MAXARGS)
		argv[argc++] = (char *)a;
	va_end(ap);
	return plug_parse(argc, argv, o, errs);
}

/* The parse fails and its messages contain `needle`. */
#define REFUSED(needle, ...)                                                              \
	do {                                                                              \
		plug_opts o_;                                                             \
		buf e_;                                                                   \
		int rc_ = parse(&o_, &e_, __VA_ARGS__, (const char *)NULL);               \
		CU_ASSERT_EQUAL(rc_, PRD_EINVAL);                                         \
		if(!strstr(buf_str(&e_), needle)) {                                       \
			fprintf(stderr, "expected '%s' in: %s\n", needle, buf_str(&e_)); \
			CU_FAIL("message");                                               \
		}                                                                         \
		buf_free(&e_);                                                            \
		plug_opts_free(&o_);                                                      \
	} while(0)

static void test_class_names(void)
{
	char *s;
	s = plug_class_resolve("check-capacity");
	CU_ASSERT_STRING_EQUAL(s, "check-capacity.autoscaling.x-k8s.io");
	free(s);
	s = plug_class_resolve("atomic-scale-up");
	CU_ASSERT_STRING_EQUAL(s, "best-effort-atomic-scale-up.autoscaling.x-k8s.io");
	free(s);
	s = plug_class_resolve("best-effort-atomic-scale-up");
	CU_ASSERT_STRING_EQUAL(s, "best-effort-atomic-scale-up.autoscaling.x-k8s.io");
	free(s);
	/* the older aliases and other classes are full names: passed as is */
	s = plug_class_resolve("atomic-scale-up.kubernetes.io");
	CU_ASSERT_STRING_EQUAL(s, "atomic-scale-up.kubernetes.io");
	free(s);
	s = plug_class_resolve("queued-provisioning.gke.io");
	CU_ASSERT_STRING_EQUAL(s, "queued-provisioning.gke.io");
	free(s);
	CU_ASSERT_PTR_NULL(plug_class_resolve("check"));
	CU_ASSERT_PTR_NULL(plug_class_resolve("Check-Capacity.x.io"));
	CU_ASSERT_PTR_NULL(plug_class_resolve(""));
	CU_ASSERT_PTR_NULL(plug_class_resolve("a..b"));
}

static void test_parse_basic(void)
{
	plug_opts o;
	buf e;
	CU_ASSERT_EQUAL(parse(&o, &e, "job-1", "--class=check-capacity", "--template=tpl", "--count=3", NULL), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&e), "");
	CU_ASSERT_STRING_EQUAL(o.name, "job-1");
	CU_ASSERT_STRING_EQUAL(o.class_name, "check-capacity.autoscaling.x-k8s.io");
	CU_ASSERT_EQUAL(o.n_podsets, 1);
	CU_ASSERT_STRING_EQUAL(o.podsets[0].template_name, "tpl");
	CU_ASSERT_EQUAL(o.podsets[0].count, 3);
	CU_ASSERT_PTR_NULL(o.namespace_);
	CU_ASSERT_EQUAL(o.dry_run, PLUG_DRY_NONE);
	CU_ASSERT_EQUAL(o.output, PLUG_OUT_DEFAULT);
	CU_ASSERT_FALSE(o.make_template);
	buf_free(&e);
	plug_opts_free(&o);
}

/* --flag v, --flag=v, -n v, -nv, -n=v; flags before and after NAME. */
static void test_parse_forms(void)
{
	plug_opts o;
	buf e;
	CU_ASSERT_EQUAL(parse(&o, &e, "--namespace", "team-a", "--class", "atomic-scale-up", "big.job", "--template",
			      "a", "--count", "2", "-o", "yaml", "--kubeconfig", "/k", "--context=ctx", NULL),
			0);
	CU_ASSERT_STRING_EQUAL(o.name, "big.job");
	CU_ASSERT_STRING_EQUAL(o.namespace_, "team-a");
	CU_ASSERT_STRING_EQUAL(o.class_name, "best-effort-atomic-scale-up.autoscaling.x-k8s.io");
	CU_ASSERT_EQUAL(o.output, PLUG_OUT_YAML);
	CU_ASSERT_STRING_EQUAL(o.kubeconfig, "/k");
	CU_ASSERT_STRING_EQUAL(o.context, "ctx");
	buf_free(&e);
	plug_opts_free(&o);

	CU_ASSERT_EQUAL(parse(&o, &e, "x", "-nteam-b", "-ojson", "--class=check-capacity", "--template=t", "--count=1",
			      NULL), 0);
	CU_ASSERT_STRING_EQUAL(o.namespace_, "team-b");
	CU_ASSERT_EQUAL(o.output, PLUG_OUT_JSON);
	buf_free(&e);
	plug_opts_free(&o);

	CU_ASSERT_EQUAL(parse(&o, &e, "x", "-n=team-c", "-o=name", "--class=check-capacity", "--template=t",
			      "--count=1", NULL), 0);
	CU_ASSERT_STRING_EQUAL(o.namespace_, "team-c");
	CU_ASSERT_EQUAL(o.output, PLUG_OUT_NAME);
	buf_free(&e);
	plug_opts_free(&o);

	/* "--" ends the flags */
	CU_ASSERT_EQUAL(parse(&o, &e, "--class=check-capacity", "--template=t", "--count=1", "--", "x", NULL), 0);
	CU_ASSERT_STRING_EQUAL(o.name, "x");
	buf_free(&e);
	plug_opts_free(&o);
}

static void test_parse_dry_run(void)
{
	plug_opts o;
	buf e;
	CU_ASSERT_EQUAL(parse(&o, &e, "x", "--class=check-capacity", "--template=t", "--count=1", "--dry-run", NULL), 0);
	CU_ASSERT_EQUAL(o.dry_run, PLUG_DRY_CLIENT);
	buf_free(&e);
	plug_opts_free(&o);
	CU_ASSERT_EQUAL(parse(&o, &e, "x", "--class=check-capacity", "--template=t", "--count=1", "--dry-run=server",
			      NULL), 0);
	CU_ASSERT_EQUAL(o.dry_run, PLUG_DRY_SERVER);
	buf_free(&e);
	plug_opts_free(&o);
	/* the next word is taken only when it is a mode */
	CU_ASSERT_EQUAL(parse(&o, &e, "--dry-run", "client", "x", "--class=check-capacity", "--template=t",
			      "--count=1", NULL), 0);
	CU_ASSERT_EQUAL(o.dry_run, PLUG_DRY_CLIENT);
	CU_ASSERT_STRING_EQUAL(o.name, "x");
	buf_free(&e);
	plug_opts_free(&o);
	CU_ASSERT_EQUAL(parse(&o, &e, "--dry-run", "x", "--class=check-capacity", "--template=t", "--count=1", NULL), 0);
	CU_ASSERT_EQUAL(o.dry_run, PLUG_DRY_CLIENT);
	CU_ASSERT_STRING_EQUAL(o.name, "x");
	buf_free(&e);
	plug_opts_free(&o);
	CU_ASSERT_EQUAL(parse(&o, &e, "x", "--class=check-capacity", "--template=t", "--count=1", "--dry-run=none",
			      NULL), 0);
	CU_ASSERT_EQUAL(o.dry_run, PLUG_DRY_NONE);
	buf_free(&e);
	plug_opts_free(&o);
	REFUSED("--dry-run maybe: must be none, client or server", "x", "--class=check-capacity", "--template=t",
		"--count=1", "--dry-run=maybe");
}

/* The i-th --count goes with the i-th --template. */
static void test_parse_podsets(void)
{
	plug_opts o;
	buf e;
	CU_ASSERT_EQUAL(parse(&o, &e, "x", "--class=atomic-scale-up", "--template=worker", "--count=4",
			      "--template=launcher", "--count=1", "--template", "ps", "--count", "2", NULL), 0);
	CU_ASSERT_EQUAL(o.n_podsets, 3);
	CU_ASSERT_STRING_EQUAL(o.podsets[0].template_name, "worker");
	CU_ASSERT_EQUAL(o.podsets[0].count, 4);
	CU_ASSERT_STRING_EQUAL(o.podsets[1].template_name, "launcher");
	CU_ASSERT_EQUAL(o.podsets[1].count, 1);
	CU_ASSERT_STRING_EQUAL(o.podsets[2].template_name, "ps");
	CU_ASSERT_EQUAL(o.podsets[2].count, 2);
	buf_free(&e);
	plug_opts_free(&o);
	/* the largest int32 is accepted */
	CU_ASSERT_EQUAL(parse(&o, &e, "x", "--class=check-capacity", "--template=t", "--count=2147483647", NULL), 0);
	CU_ASSERT_EQUAL(o.podsets[0].count, 2147483647);
	buf_free(&e);
	plug_opts_free(&o);
}

static void test_parse_params(void)
{
	plug_opts o;
	buf e;
	CU_ASSERT_EQUAL(parse(&o, &e, "x", "--class=check-capacity", "--template=t", "--count=1", "--param",
			      "ValidUntilSeconds=600", "--param=noRetry=true", "--param", "expr=a=b", "--param",
			      "empty=", NULL), 0);
	CU_ASSERT_EQUAL(o.n_params, 4);
	CU_ASSERT_STRING_EQUAL(o.params[0].key, "ValidUntilSeconds");
	CU_ASSERT_STRING_EQUAL(o.params[0].value, "600");
	CU_ASSERT_STRING_EQUAL(o.params[1].key, "noRetry");
	CU_ASSERT_STRING_EQUAL(o.params[1].value, "true");
	CU_ASSERT_STRING_EQUAL(o.params[2].key, "expr");
	CU_ASSERT_STRING_EQUAL(o.params[2].value, "a=b");
	CU_ASSERT_STRING_EQUAL(o.params[3].value, "");
	buf_free(&e);
	plug_opts_free(&o);

	REFUSED("--param noRetry: expected KEY=VALUE", "x", "--class=check-capacity", "--template=t", "--count=1",
		"--param", "noRetry");
	/* The parameters provreqd reads, by its own rules (pr_param_parse):
	 * refused here, not failed later by the controller. */
	REFUSED("--param ValidUntilSeconds: \"abc\" is not a positive whole number of seconds", "x",
		"--class=check-capacity", "--template=t", "--count=1", "--param", "ValidUntilSeconds=abc");
	REFUSED("--param ValidUntilSeconds: \"0\" is not a positive whole number of seconds", "x",
		"--class=check-capacity", "--template=t", "--count=1", "--param", "ValidUntilSeconds=0");
	REFUSED("--param noRetry: \"maybe\" is not true or false", "x", "--class=check-capacity", "--template=t",
		"--count=1", "--param", "noRetry=maybe");
	REFUSED("--param =v: expected KEY=VALUE", "x", "--class=check-capacity", "--template=t", "--count=1",
		"--param", "=v");
	REFUSED("--param a: given twice", "x", "--class=check-capacity", "--template=t", "--count=1", "--param",
		"a=1", "--param", "a=2");
	{
		char longv[300];
		memset(longv, 'v', sizeof(longv));
		memcpy(longv, "k=", 2);
		longv[258] = '\0'; /* 256 characters of value */
		REFUSED("--param k: the value is 256 characters long; at most 255", "x", "--class=check-capacity",
			"--template=t", "--count=1", "--param", longv);
		longv[257] = '\0'; /* 255: allowed */
		CU_ASSERT_EQUAL(parse(&o, &e, "x", "--class=check-capacity", "--template=t", "--count=1", "--param",
				      longv, NULL), 0);
		buf_free(&e);
		plug_opts_free(&o);
	}
}

static void test_parse_template_creation(void)
{
	plug_opts o;
	buf e;
	/* no --template: the PodTemplate is named after the request */
	CU_ASSERT_EQUAL(parse(&o, &e, "job-3", "--class=atomic-scale-up", "--count=3", "--cpu=3", "--memory=8Gi", NULL),
			0);
	CU_ASSERT_TRUE(o.make_template);
	CU_ASSERT_EQUAL(o.n_podsets, 1);
	CU_ASSERT_STRING_EQUAL(o.podsets[0].template_name, "job-3");
	CU_ASSERT_STRING_EQUAL(o.image, PLUG_DEFAULT_IMAGE);
	CU_ASSERT_STRING_EQUAL(o.cpu, "3");
	CU_ASSERT_STRING_EQUAL(o.memory, "8Gi");
	buf_free(&e);
	plug_opts_free(&o);
	CU_ASSERT_EQUAL(parse(&o, &e, "job-4", "--class=atomic-scale-up", "--template=tp", "--count=3",
			      "--image=busybox", "--gpu=2", NULL), 0);
	CU_ASSERT_STRING_EQUAL(o.podsets[0].template_name, "tp");
	CU_ASSERT_STRING_EQUAL(o.image, "busybox");
	CU_ASSERT_EQUAL(o.gpu, 2);
	buf_free(&e);
	plug_opts_free(&o);
	REFUSED("give at most one --template with them", "x", "--class=check-capacity", "--image=i", "--template=a",
		"--count=1", "--template=b", "--count=1");
	REFUSED("--cpu 0: not a positive resource quantity", "x", "--class=check-capacity", "--count=1", "--cpu=0");
	REFUSED("--cpu lots: not a positive resource quantity", "x", "--class=check-capacity", "--count=1",
		"--cpu=lots");
	REFUSED("--memory -1Gi: not a positive resource quantity", "x", "--class=check-capacity", "--count=1",
		"--memory=-1Gi");
	REFUSED("--gpu 0.5: expected a whole number of GPUs", "x", "--class=check-capacity", "--count=1",
		"--gpu=0.5");
	REFUSED("--image: must not be empty", "x", "--class=check-capacity", "--count=1", "--image=");
}

static void test_parse_refusals(void)
{
	REFUSED("NAME is required", "--class=check-capacity", "--template=t", "--count=1");
	REFUSED("exactly one NAME is expected, got 2 (a, b)", "a", "b", "--class=check-capacity", "--template=t",
		"--count=1");
	REFUSED("NAME Bad_Name: not a valid name", "Bad_Name", "--class=check-capacity", "--template=t", "--count=1");
	REFUSED("--class is required", "x", "--template=t", "--count=1");
	REFUSED("--class fast: unknown class; use check-capacity, atomic-scale-up", "x", "--class=fast",
		"--template=t", "--count=1");
	REFUSED("--count 0: must be a whole number from 1", "x", "--class=check-capacity", "--template=t",
		"--count=0");
	REFUSED("--count -2: must be a whole number from 1", "x", "--class=check-capacity", "--template=t",
		"--count", "-2");
	REFUSED("--count three: must be a whole number", "x", "--class=check-capacity", "--template=t",
		"--count=three");
	REFUSED("--count 2147483648: must be a whole number", "x", "--class=check-capacity", "--template=t",
		"--count=2147483648");
	REFUSED("2 --count for 1 --template: give one --count per --template", "x", "--class=check-capacity",
		"--template=t", "--count=1", "--count=2");
	REFUSED("1 --count for 2 --template", "x", "--class=check-capacity", "--template=t", "--template=u",
		"--count=1");
	REFUSED("--template is required", "x", "--class=check-capacity", "--count=1");
	REFUSED("--count is required", "x", "--class=check-capacity", "--template=t");
	REFUSED("--template T: not a valid PodTemplate name", "x", "--class=check-capacity", "--template=T",
		"--count=1");
	REFUSED("unknown flag: --replicas", "x", "--class=check-capacity", "--template=t", "--count=1",
		"--replicas=3");
	REFUSED("unknown shorthand flag: 'x' in -x", "x", "--class=check-capacity", "--template=t", "--count=1", "-x");
	REFUSED("flag needs an argument: --count", "x", "--class=check-capacity", "--template=t", "--count");
	REFUSED("--output wide: unsupported format; use yaml, json or name", "x", "--class=check-capacity",
		"--template=t", "--count=1", "-o", "wide");
	REFUSED("--namespace Team_A: not a valid namespace name", "x", "--class=check-capacity", "--template=t",
		"--count=1", "-n", "Team_A");
	REFUSED("--help=yes: takes no value", "x", "--help=yes");
	REFUSED("--request-timeout soon", "x", "--class=check-capacity", "--template=t", "--count=1",
		"--request-timeout=soon");
}

/* Every problem is reported in one run. */
static void test_parse_reports_all(void)
{
	plug_opts o;
	buf e;
	const char *s;
	CU_ASSERT_EQUAL(parse(&o, &e, "Bad", "--class=nope", "--template=t", "--count=0", "--bogus", NULL), PRD_EINVAL);
	s = buf_str(&e);
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "unknown flag: --bogus\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "NAME Bad:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "--class nope:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(s, "--count 0:"));
	buf_free(&e);
	plug_opts_free(&o);
}

static void test_parse_limits(void)
{
	char *argv[2 * (PLUG_MAX_PODSETS + 1) + 2];
	char names[PLUG_MAX_PODSETS + 1][32];
	plug_opts o;
	buf e;
	int argc = 0, i;

	argv[argc++] = (char *)"x";
	argv[argc++] = (char *)"--class=check-capacity";
	for(i = 0; i < PLUG_MAX_PODSETS; i++) {
		snprintf(names[i], sizeof(names[i]), "--template=t%d", i);
		argv[argc++] = names[i];
		argv[argc++] = (char *)"--count=1";
	}
	buf_init(&e);
	CU_ASSERT_EQUAL(plug_parse(argc, argv, &o, &e), 0);
	CU_ASSERT_EQUAL(o.n_podsets, PLUG_MAX_PODSETS);
	CU_ASSERT_STRING_EQUAL(o.podsets[31].template_name, "t31");
	plug_opts_free(&o);
	buf_free(&e);
	snprintf(names[i], sizeof(names[i]), "--template=t%d", i);
	argv[argc++] = names[i];
	argv[argc++] = (char *)"--count=1";
	buf_init(&e);
	CU_ASSERT_EQUAL(plug_parse(argc, argv, &o, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&e), "at most 32 pod sets"));
	plug_opts_free(&o);
	buf_free(&e);
}

static void test_help(void)
{
	plug_opts o;
	buf e;
	/* --help wins over everything else being wrong */
	CU_ASSERT_EQUAL(parse(&o, &e, "--bogus", "-h", NULL), 0);
	CU_ASSERT_TRUE(o.help);
	buf_free(&e);
	plug_opts_free(&o);
	CU_ASSERT_PTR_NOT_NULL(strstr(plug_usage(), "--template=PODTEMPLATE --count=N"));
	CU_ASSERT_PTR_NOT_NULL(strstr(plug_usage(), "--dry-run=MODE"));
	/* every flag the parser accepts is in the text */
	{
		static const char *const documented[] = {
			"--class=", "--template=", "--count=", "--param ", "--image=", "--cpu=", "--memory=",
			"--gpu=", "--label ", "--annotation ", "--dry-run=", "--output=", "--request-timeout=",
			"--namespace=", "--kubeconfig=", "--context=", "--cluster=", "--user=", "--server=",
			"--token=", "--insecure-skip-tls-verify", "--as=", "--as-group=", "--help",
		};
		size_t i;
		for(i = 0; i < sizeof(documented) / sizeof(documented[0]); i++) {
			if(!strstr(plug_usage(), documented[i])) {
				fprintf(stderr, "--help lacks %s\n", documented[i]);
				CU_FAIL("flag missing from --help");
			}
		}
	}
}

/* The value at a dotted path of a JSON tree ("spec.podSets.1.count"). */
static json_object *at(json_object *o, const char *path)
{
	char *copy = str_dup(path), *save = NULL, *part;
	for(part = strtok_r(copy, ".", &save); part && o; part = strtok_r(NULL, ".", &save)) {
		if(json_object_is_type(o, json_type_array))
			o = json_object_array_get_idx(o, (size_t)atoi(part));
		else if(!json_object_object_get_ex(o, part, &o))
			o = NULL;
	}
	free(copy);
	return o;
}

static const char *at_str(json_object *o, const char *path)
{
	json_object *v = at(o, path);
	return v ? json_object_get_string(v) : "(missing)";
}

static void test_build_request(void)
{
	plug_opts o;
	buf e;
	json_object *r;
	CU_ASSERT_EQUAL(parse(&o, &e, "job", "--class=atomic-scale-up", "--template=w", "--count=4", "--template=l",
			      "--count=1", "--param=ValidUntilSeconds=30", NULL), 0);
	r = plug_build_request(&o, "team-a");
	CU_ASSERT_STRING_EQUAL(at_str(r, "apiVersion"), "autoscaling.x-k8s.io/v1");
	CU_ASSERT_STRING_EQUAL(at_str(r, "kind"), "ProvisioningRequest");
	CU_ASSERT_STRING_EQUAL(at_str(r, "metadata.name"), "job");
	CU_ASSERT_STRING_EQUAL(at_str(r, "metadata.namespace"), "team-a");
	CU_ASSERT_STRING_EQUAL(at_str(r, "spec.provisioningClassName"), "best-effort-atomic-scale-up.autoscaling.x-k8s.io");
	CU_ASSERT_EQUAL(json_object_array_length(at(r, "spec.podSets")), 2);
	CU_ASSERT_STRING_EQUAL(at_str(r, "spec.podSets.0.podTemplateRef.name"), "w");
	CU_ASSERT_TRUE(json_object_is_type(at(r, "spec.podSets.0.count"), json_type_int));
	CU_ASSERT_EQUAL(json_object_get_int(at(r, "spec.podSets.0.count")), 4);
	CU_ASSERT_STRING_EQUAL(at_str(r, "spec.podSets.1.podTemplateRef.name"), "l");
	CU_ASSERT_EQUAL(json_object_get_int(at(r, "spec.podSets.1.count")), 1);
	/* parameter values are strings, even numeric ones */
	CU_ASSERT_TRUE(json_object_is_type(at(r, "spec.parameters.ValidUntilSeconds"), json_type_string));
	CU_ASSERT_STRING_EQUAL(at_str(r, "spec.parameters.ValidUntilSeconds"), "30");
	json_object_put(r);
	/* without a namespace and parameters, neither key is written */
	plug_opts_free(&o);
	buf_free(&e);
	CU_ASSERT_EQUAL(parse(&o, &e, "job", "--class=check-capacity", "--template=w", "--count=4", NULL), 0);
	r = plug_build_request(&o, NULL);
	CU_ASSERT_PTR_NULL(at(r, "metadata.namespace"));
	CU_ASSERT_PTR_NULL(at(r, "spec.parameters"));
	json_object_put(r);
	plug_opts_free(&o);
	buf_free(&e);
}

static void test_build_template(void)
{
	plug_opts o;
	buf e;
	json_object *t;
	CU_ASSERT_EQUAL(parse(&o, &e, "job", "--class=atomic-scale-up", "--count=4", "--cpu=3", "--memory=512Mi", NULL),
			0);
	t = plug_build_template(&o, "ns1");
	CU_ASSERT_STRING_EQUAL(at_str(t, "apiVersion"), "v1");
	CU_ASSERT_STRING_EQUAL(at_str(t, "kind"), "PodTemplate");
	CU_ASSERT_STRING_EQUAL(at_str(t, "metadata.name"), "job");
	CU_ASSERT_STRING_EQUAL(at_str(t, "metadata.namespace"), "ns1");
	CU_ASSERT_STRING_EQUAL(at_str(t, "template.spec.containers.0.name"), "main");
	CU_ASSERT_STRING_EQUAL(at_str(t, "template.spec.containers.0.image"), PLUG_DEFAULT_IMAGE);
	CU_ASSERT_STRING_EQUAL(at_str(t, "template.spec.containers.0.resources.requests.cpu"), "3");
	CU_ASSERT_STRING_EQUAL(at_str(t, "template.spec.containers.0.resources.requests.memory"), "512Mi");
	CU_ASSERT_PTR_NULL(at(t, "template.spec.containers.0.resources.limits"));
	CU_ASSERT_PTR_NULL(at(t, "template.spec.tolerations"));
	json_object_put(t);
	plug_opts_free(&o);
	buf_free(&e);

	CU_ASSERT_EQUAL(parse(&o, &e, "job", "--class=atomic-scale-up", "--template=gpu-tpl", "--count=1", "--gpu=2",
			      NULL), 0);
	t = plug_build_template(&o, NULL);
	CU_ASSERT_STRING_EQUAL(at_str(t, "metadata.name"), "gpu-tpl");
	CU_ASSERT_PTR_NULL(at(t, "metadata.namespace"));
	CU_ASSERT_PTR_NULL(at(t, "template.spec.containers.0.resources.requests.cpu"));
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
				       at(t, "template.spec.containers.0.resources.requests"), "nvidia.com/gpu")), "2");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
				       at(t, "template.spec.containers.0.resources.limits"), "nvidia.com/gpu")), "2");
	CU_ASSERT_STRING_EQUAL(at_str(t, "template.spec.tolerations.0.operator"), "Exists");
	CU_ASSERT_STRING_EQUAL(at_str(t, "template.spec.tolerations.0.effect"), "NoSchedule");
	json_object_put(t);
	plug_opts_free(&o);
	buf_free(&e);

	/* --image alone: no resources block at all */
	CU_ASSERT_EQUAL(parse(&o, &e, "job", "--class=check-capacity", "--count=1", "--image=nginx", NULL), 0);
	t = plug_build_template(&o, NULL);
	CU_ASSERT_STRING_EQUAL(at_str(t, "template.spec.containers.0.image"), "nginx");
	CU_ASSERT_PTR_NULL(at(t, "template.spec.containers.0.resources"));
	json_object_put(t);
	plug_opts_free(&o);
	buf_free(&e);
}

/* YAML printed for a tree reads back as the same tree. */
static void roundtrip(json_object *in)
{
	buf y;
	json_object *back = NULL;
	prd_err err;
	buf_init(&y);
	CU_ASSERT_EQUAL_FATAL(yj_print_yaml(in, &y), 0);
	if(yj_parse_one(buf_str(&y), y.len, &back, &err) != 0) {
		fprintf(stderr, "unreadable YAML (%s):\n%s\n", err.msg, buf_str(&y));
		CU_FAIL("yaml does not parse");
	} else if(!json_object_equal(in, back)) {
		fprintf(stderr, "YAML changed the tree:\n%s\nread back as %s\n", buf_str(&y),
			json_object_to_json_string(back));
		CU_FAIL("yaml round trip");
	}
	json_object_put(back);
	buf_free(&y);
}

static void test_yaml_strings_stay_strings(void)
{
	static const char *const tricky[] = {
		"", "3", "-2", "+7", "0.5", ".5", "1e3", "0x1F", "0o17", "1_000", "1:30", "2024-01-01",
		"2001-12-14t21:59:43.10-05:00", "true", "False", "yes", "NO", "on", "off", "y", "n", "~", "null",
		"Null", ".inf", "-.inf", ".nan", "<<", "a: b", "- x", "#c", "x #c", " lead", "trail ", "multi\nline",
		"tab\there", "quote\"s", "it's", "back\\slash", "ünïcödé", "{a}", "[b]", "*ref", "&anchor", "!tag",
		"%dir", "@at", "`tick", "|", ">", "?", ",", "3900m", "15Gi", "nvidia.com/gpu", "kwok://node-1", "---",
		"...", "=", "\x01ctl"
	};
	json_object *o = json_object_new_object(), *arr = json_object_new_array();
	size_t i;
	for(i = 0; i < sizeof(tricky) / sizeof(tricky[0]); i++) {
		json_object_array_add(arr, json_object_new_string(tricky[i]));
		/* the same strings as keys */
		json_object_object_add(o, tricky[i], json_object_new_string(tricky[i]));
	}
	json_object_object_add(o, "list", arr);
	roundtrip(o);
	json_object_put(o);
}

static void test_yaml_types_and_shape(void)
{
	json_object *o = json_tokener_parse("{\"apiVersion\":\"v1\",\"kind\":\"PodTemplate\",\"metadata\":{\"name\":"
					    "\"t\"},\"num\":3,\"neg\":-9223372036854775807,\"f\":1.5,\"b\":true,\"z\":"
					    "null,\"e\":{},\"a\":[],\"nested\":[[1,2],{\"k\":[{}]}]}");
	buf y;
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	roundtrip(o);
	buf_init(&y);
	CU_ASSERT_EQUAL(yj_print_yaml(o, &y), 0);
	/* kubectl's look: block style, two-space indent, plain where safe,
	 * keys in insertion order */
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&y), "apiVersion: v1\nkind: PodTemplate\nmetadata:\n  name: t\nnum: 3\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf_str(&y), "e: {}\na: []\n"));
	CU_ASSERT_PTR_NULL(strstr(buf_str(&y), "---"));
	buf_free(&y);
	json_object_put(o);

	/* a count is an integer in YAML, a parameter "30" a string */
	o = json_tokener_parse("{\"count\":30,\"ValidUntilSeconds\":\"30\"}");
	buf_init(&y);
	CU_ASSERT_EQUAL(yj_print_yaml(o, &y), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&y), "count: 30\nValidUntilSeconds: \"30\"\n");
	buf_free(&y);
	json_object_put(o);
}


/* kubectl's global flags, before and after NAME, as kubectl hands them on
 * (issue 15: `kubectl -n team-a create provisioningrequest x --class=...`). */
static void test_parse_global_flags(void)
{
	plug_opts o;
	buf e;
	CU_ASSERT_EQUAL(parse(&o, &e, "-n", "team-a", "--as=jane", "--as-group", "ml", "x", "--class=check-capacity",
			      "--template=t", "--count=1", "--as-group=system:authenticated", "--token", "tok",
			      "-s", "https://10.0.0.1:6443", "--user=u2", "--cluster", "c2",
			      "--insecure-skip-tls-verify", "--kubeconfig=/k", "--context", "ctx", NULL), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&e), "");
	CU_ASSERT_STRING_EQUAL(o.name, "x");
	CU_ASSERT_STRING_EQUAL(o.namespace_, "team-a");
	CU_ASSERT_STRING_EQUAL(o.class_name, "check-capacity.autoscaling.x-k8s.io");
	CU_ASSERT_STRING_EQUAL(o.as_user, "jane");
	CU_ASSERT_EQUAL(o.n_as_groups, 2);
	CU_ASSERT_STRING_EQUAL(o.as_groups[0], "ml");
	CU_ASSERT_STRING_EQUAL(o.as_groups[1], "system:authenticated");
	CU_ASSERT_PTR_NULL(o.as_groups[2]);
	CU_ASSERT_STRING_EQUAL(o.token, "tok");
	CU_ASSERT_STRING_EQUAL(o.server, "https://10.0.0.1:6443");
	CU_ASSERT_STRING_EQUAL(o.user, "u2");
	CU_ASSERT_STRING_EQUAL(o.cluster, "c2");
	CU_ASSERT_TRUE(o.insecure);
	CU_ASSERT_STRING_EQUAL(o.kubeconfig, "/k");
	CU_ASSERT_STRING_EQUAL(o.context, "ctx");
	buf_free(&e);
	plug_opts_free(&o);

	/* a boolean flag takes a value only after '=' (pflag) */
	CU_ASSERT_EQUAL(parse(&o, &e, "x", "--class=check-capacity", "--template=t", "--count=1",
			      "--insecure-skip-tls-verify=false", NULL), 0);
	CU_ASSERT_FALSE(o.insecure);
	buf_free(&e);
	plug_opts_free(&o);
	REFUSED("exactly one NAME is expected, got 2 (x, true)", "x", "--class=check-capacity", "--template=t",
		"--count=1", "--insecure-skip-tls-verify", "true");
	REFUSED("--insecure-skip-tls-verify=maybe: must be true or false", "x", "--class=check-capacity",
		"--template=t", "--count=1", "--insecure-skip-tls-verify=maybe");
	REFUSED("--as-group needs --as", "x", "--class=check-capacity", "--template=t", "--count=1", "--as-group=g");
	REFUSED("--server ftp://h: not an http(s) URL", "x", "--class=check-capacity", "--template=t", "--count=1",
		"--server=ftp://h");
	REFUSED("--token: must not be empty", "x", "--class=check-capacity", "--template=t", "--count=1",
		"--token=");
	REFUSED("--user: must not be empty", "x", "--class=check-capacity", "--template=t", "--count=1", "--user=");
}

/* Typos: the nearest flag or short class name is suggested. */
static void test_parse_suggestions(void)
{
	CU_ASSERT_STRING_EQUAL(plug_class_suggest("chek-capacity"), "check-capacity");
	CU_ASSERT_STRING_EQUAL(plug_class_suggest("atomic-scaleup"), "atomic-scale-up");
	CU_ASSERT_STRING_EQUAL(plug_class_suggest("best-effort-atomic-scaleup"), "best-effort-atomic-scale-up");
	CU_ASSERT_PTR_NULL(plug_class_suggest("fast"));
	REFUSED("--class chek-capacity: unknown class; did you mean check-capacity? use check-capacity", "x",
		"--class=chek-capacity", "--template=t", "--count=1");
	REFUSED("unknown flag: --clas (did you mean --class?)", "x", "--clas=check-capacity", "--template=t",
		"--count=1");
	REFUSED("unknown flag: --namespce (did you mean --namespace?)", "x", "--namespce=a",
		"--class=check-capacity", "--template=t", "--count=1");
	/* nothing near: no suggestion */
	{
		plug_opts o;
		buf e;
		CU_ASSERT_EQUAL(parse(&o, &e, "x", "--zzzzzzzz", "--class=fast", "--template=t", "--count=1", NULL),
				PRD_EINVAL);
		CU_ASSERT_PTR_NULL(strstr(buf_str(&e), "did you mean"));
		buf_free(&e);
		plug_opts_free(&o);
	}
}

/* --label and --annotation: validated like the apiserver does, put in the
 * request's metadata. */
static void test_labels_annotations(void)
{
	plug_opts o;
	buf e;
	json_object *r;
	CU_ASSERT_EQUAL(parse(&o, &e, "job", "--class=check-capacity", "--template=w", "--count=1", "--label",
			      "team=ml", "--label=example.com/tier=", "--annotation", "note=any text: 2 GPUs, please",
			      "--annotation=example.com/owner=jane@example.com", NULL), 0);
	CU_ASSERT_STRING_EQUAL(buf_str(&e), "");
	r = plug_build_request(&o, "ns");
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	CU_ASSERT_STRING_EQUAL(at_str(r, "metadata.labels.team"), "ml");
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_object_get(
				       json_object_object_get(json_object_object_get(r, "metadata"), "labels"),
				       "example.com/tier")), "");
	CU_ASSERT_STRING_EQUAL(at_str(r, "metadata.annotations.note"), "any text: 2 GPUs, please");
	json_object_put(r);
	buf_free(&e);
	plug_opts_free(&o);

	REFUSED("--label team: given twice", "job", "--class=check-capacity", "--template=w", "--count=1",
		"--label=team=a", "--label=team=b");
	REFUSED("--label team: expected KEY=VALUE", "job", "--class=check-capacity", "--template=w", "--count=1",
		"--label=team");
	REFUSED("--label -team: not a valid key", "job", "--class=check-capacity", "--template=w", "--count=1",
		"--label=-team=a");
	REFUSED("--label Bad_Prefix/x: not a valid key", "job", "--class=check-capacity", "--template=w",
		"--count=1", "--label=Bad_Prefix/x=a");
	REFUSED("--label team: value a b is not a valid label value", "job", "--class=check-capacity",
		"--template=w", "--count=1", "--label=team=a b");
	REFUSED("--annotation x/y/z: not a valid key", "job", "--class=check-capacity", "--template=w", "--count=1",
		"--annotation=x/y/z=1");
}

static const test_case cases[] = {
	{ "class names", test_class_names },
	{ "parse: basic", test_parse_basic },
	{ "parse: flag forms", test_parse_forms },
	{ "parse: dry run", test_parse_dry_run },
	{ "parse: pod sets pair in order", test_parse_podsets },
	{ "parse: parameters", test_parse_params },
	{ "parse: PodTemplate creation", test_parse_template_creation },
	{ "parse: refusals and their messages", test_parse_refusals },
	{ "parse: every problem reported", test_parse_reports_all },
	{ "parse: 32 pod sets at most", test_parse_limits },
	{ "parse: kubectl's global flags anywhere", test_parse_global_flags },
	{ "parse: did you mean", test_parse_suggestions },
	{ "parse and build: labels and annotations", test_labels_annotations },
	{ "help", test_help },
	{ "build: request", test_build_request },
	{ "build: template", test_build_template },
	{ "yaml: strings stay strings", test_yaml_strings_stay_strings },
	{ "yaml: types and shape", test_yaml_types_and_shape },
	{ NULL, NULL }
};

TEST_MAIN("plugin", cases)

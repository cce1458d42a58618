/* Command line of kubectl-create-provisioningrequest.
 *
 * Flags take their value as "--flag=v" or "--flag v"; the one-letter forms
 * -n and -o also as "-nv" and "-n=v", like kubectl (pflag). Boolean flags
 * (--insecure-skip-tls-verify) take a value only as "--flag=true|false".
 * Flags may come before or after NAME. Every problem is reported, not just
 * the first, so one run tells the user all they need to fix. */
#include "plugin/plugin.h"

#include "kube/quantity.h"
#include "provreq/request.h"
#include "util/err.h"
#include "util/str.h"

#include <stdlib.h>
#include <string.h>

char *plug_class_resolve(const char *arg)
{
	if(!arg || !*arg)
		return NULL;
	if(strcmp(arg, "check-capacity") == 0)
		return str_dup(PR_CLASS_CHECK);
	if(strcmp(arg, "atomic-scale-up") == 0 || strcmp(arg, "best-effort-atomic-scale-up") == 0)
		return str_dup(PR_CLASS_ATOMIC);
	if(strchr(arg, '.') && strlen(arg) <= 253 && str_is_dns_subdomain(arg))
		return str_dup(arg);
	return NULL;
}

const char *plug_class_suggest(const char *arg)
{
	static const char *const shorts[] = { "check-capacity", "atomic-scale-up", "best-effort-atomic-scale-up" };
	if(!arg)
		return NULL;
	return str_closest(arg, shorts, sizeof(shorts) / sizeof(shorts[0]));
}

void plug_opts_free(plug_opts *o)
{
	size_t i;
	free(o->class_name);
	for(i = 0; i < o->n_params; i++)
		free(o->params[i].key);
	for(i = 0; i < o->n_labels; i++)
		free(o->labels[i].key);
	for(i = 0; i < o->n_annotations; i++)
		free(o->annotations[i].key);
	memset(o, 0, sizeof(*o));
}

/* Flags that take a value. */
enum flag_id {
	F_CLASS, F_TEMPLATE, F_COUNT, F_PARAM, F_NAMESPACE, F_KUBECONFIG, F_CONTEXT, F_OUTPUT, F_IMAGE,
	F_CPU, F_MEMORY, F_GPU, F_REQUEST_TIMEOUT, F_VERBOSITY, F_DRY_RUN, F_HELP, F_LABEL, F_ANNOTATION,
	F_CLUSTER, F_USER, F_SERVER, F_TOKEN, F_INSECURE, F_AS, F_AS_GROUP
};

typedef struct flag_def {
	const char *long_name;
	char short_name;  /* 0 = none */
	enum flag_id id;
	bool optional;    /* the value may be left out (--dry-run) */
	bool no_value;    /* --help */
	bool boolean;     /* a value only as --flag=true|false */
} flag_def;

static const flag_def flags[] = {
	{ "class", 0, F_CLASS, false, false, false },
	{ "template", 0, F_TEMPLATE, false, false, false },
	{ "count", 0, F_COUNT, false, false, false },
	{ "param", 0, F_PARAM, false, false, false },
	{ "namespace", 'n', F_NAMESPACE, false, false, false },
	{ "kubeconfig", 0, F_KUBECONFIG, false, false, false },
	{ "context", 0, F_CONTEXT, false, false, false },
	{ "output", 'o', F_OUTPUT, false, false, false },
	{ "image", 0, F_IMAGE, false, false, false },
	{ "cpu", 0, F_CPU, false, false, false },
	{ "memory", 0, F_MEMORY, false, false, false },
	{ "gpu", 0, F_GPU, false, false, false },
	{ "request-timeout", 0, F_REQUEST_TIMEOUT, false, false, false },
	/* kubectl's log verbosity: accepted so `kubectl -v=6 create ...`
	 * style invocations do not break, and otherwise ignored. */
	{ "v", 'v', F_VERBOSITY, false, false, false },
	{ "dry-run", 0, F_DRY_RUN, true, false, false },
	{ "help", 'h', F_HELP, false, true, false },
	{ "label", 0, F_LABEL, false, false, false },
	{ "annotation", 0, F_ANNOTATION, false, false, false },
	/* kubectl's global connection flags, as kubectl spells them. */
	{ "cluster", 0, F_CLUSTER, false, false, false },
	{ "user", 0, F_USER, false, false, false },
	{ "server", 's', F_SERVER, false, false, false },
	{ "token", 0, F_TOKEN, false, false, false },
	{ "insecure-skip-tls-verify", 0, F_INSECURE, true, false, true },
	{ "as", 0, F_AS, false, false, false },
	{ "as-group", 0, F_AS_GROUP, false, false, false },
};

/* " (did you mean --x?)" for a mistyped long flag. */
static void suggest_flag(const char *name, size_t len, buf *errs)
{
	const char *cands[sizeof(flags) / sizeof(flags[0])];
	char w[64];
	const char *pick;
	size_t i;

	if(len >= sizeof(w))
		return;
	memcpy(w, name, len);
	w[len] = '\0';
	for(i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		cands[i] = flags[i].long_name;
	pick = str_closest(w, cands, i);
	if(pick)
		buf_printf(errs, " (did you mean --%s?)", pick);
}

static const flag_def *find_long(const char *name, size_t len)
{
	size_t i;
	for(i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if(strlen(flags[i].long_name) == len && strncmp(flags[i].long_name, name, len) == 0)
			return &flags[i];
	return NULL;
}

static const flag_def *find_short(char c)
{
	size_t i;
	for(i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if(flags[i].short_name == c)
			return &flags[i];
	return NULL;
}

/* Parse a positive int32 count. */
static bool parse_count(const char *s, int32_t *out)
{
	int64_t v;
	if(str_to_int64(s, &v) != 0 || v < 1 || v > INT32_MAX)
		return false;
	*out = (int32_t)v;
	return true;
}

/* A resource quantity that is positive. */
static bool positive_quantity(const char *s)
{
	qty q;
	return qty_parse(s, &q, NULL) == 0 && qty_sign(&q) > 0;
}

/* Values collected in order, paired up after the loop. */
typedef struct collected {
	const char *templates[PLUG_MAX_PODSETS + 1];
	size_t n_templates;
	const char *counts[PLUG_MAX_PODSETS + 1];
	size_t n_counts;
	const char *class_arg;
	const char *names[3];
	size_t n_names;
	bool too_many_templates, too_many_counts;
} collected;

typedef enum kv_kind { KV_PARAM, KV_LABEL, KV_ANNOTATION } kv_kind;

/* Add KEY=VALUE to the list of --param, --label or --annotation, refusing
 * a malformed pair, a key given twice and too many pairs. */
static int add_kv(plug_opts *o, kv_kind kind, const char *kv, buf *errs)
{
	static const char *const flagname[] = { "--param", "--label", "--annotation" };
	const char *fl = flagname[kind];
	plug_param *list = kind == KV_PARAM ? o->params : kind == KV_LABEL ? o->labels : o->annotations;
	size_t *n = kind == KV_PARAM ? &o->n_params : kind == KV_LABEL ? &o->n_labels : &o->n_annotations;
	size_t max = kind == KV_PARAM ? PLUG_MAX_PARAMS : PLUG_MAX_LABELS;
	const char *eq = strchr(kv, '=');
	size_t i, kl;
	char *key;

	if(!eq || eq == kv) {
		buf_printf(errs, "%s %s: expected KEY=VALUE\n", fl, kv);
		return PRD_EINVAL;
	}
	kl = (size_t)(eq - kv);
	if(kind == KV_PARAM && strlen(eq + 1) > PLUG_MAX_PARAM_VALUE) {
		buf_printf(errs, "--param %.*s: the value is %zu characters long; at most %d are allowed\n",
			   (int)kl, kv, strlen(eq + 1), PLUG_MAX_PARAM_VALUE);
		return PRD_EINVAL;
	}
	if(kind == KV_PARAM) {
		/* The parameters provreqd reads are checked by its own rules, so a
		 * bad value is refused here, not failed later by the controller. */
		pr_params parsed;
		prd_err pe;
		char *k = str_ndup(kv, kl);
		int bad;
		if(!k)
			return PRD_ENOMEM;
		memset(&parsed, 0, sizeof(parsed));
		bad = pr_param_parse(k, eq + 1, &parsed, &pe);
		free(k);
		if(bad) {
			buf_printf(errs, "--param %s\n", strncmp(pe.msg, "parameter ", 10) ? pe.msg : pe.msg + 10);
			return PRD_EINVAL;
		}
	}
	if(kind != KV_PARAM && !str_is_qualified_name(kv, kl)) {
		buf_printf(errs, "%s %.*s: not a valid key (an optional DNS subdomain prefix and '/', then at most "
				 "63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit)\n",
			   fl, (int)kl, kv);
		return PRD_EINVAL;
	}
	if(kind == KV_LABEL && !str_is_label_value(eq + 1)) {
		buf_printf(errs, "--label %.*s: value %s is not a valid label value (at most 63 letters, digits, "
				 "'-', '_' or '.', beginning and ending with a letter or digit, or empty)\n",
			   (int)kl, kv, eq + 1);
		return PRD_EINVAL;
	}
	for(i = 0; i < *n; i++) {
		if(strlen(list[i].key) == kl && strncmp(list[i].key, kv, kl) == 0) {
			buf_printf(errs, "%s %.*s: given twice\n", fl, (int)kl, kv);
			return PRD_EINVAL;
		}
	}
	if(*n == max) {
		buf_printf(errs, "%s: at most %zu are allowed\n", fl, max);
		return PRD_EINVAL;
	}
	key = str_ndup(kv, kl);
	if(!key)
		return PRD_ENOMEM;
	list[*n].key = key;
	list[*n].value = eq + 1;
	(*n)++;
	return 0;
}

/* false, after saying so, when the value of --cluster, --user, --as,
 * --as-group, --token or --image is empty. */
static bool nonempty(const flag_def *f, const char *v, buf *errs)
{
	if(*v)
		return true;
	buf_printf(errs, "--%s: must not be empty\n", f->long_name);
	return false;
}

/* --template and --count: kept in order, one more than allowed noted. */
static void collect(const char **list, size_t *n, bool *too_many, const char *v)
{
	if(*n <= PLUG_MAX_PODSETS)
		list[(*n)++] = v;
	else
		*too_many = true;
}

/* Who to be: --cluster, --user, --as, --as-group, --token. */
static int apply_identity(plug_opts *o, const flag_def *f, const char *v, buf *errs)
{
	if(!nonempty(f, v, errs))
		return PRD_EINVAL;
	switch(f->id) {
	case F_CLUSTER:
		o->cluster = v;
		break;
	case F_USER:
		o->user = v;
		break;
	case F_AS:
		o->as_user = v;
		break;
	case F_AS_GROUP:
		if(o->n_as_groups == PLUG_MAX_GROUPS) {
			buf_printf(errs, "--as-group: at most %d are allowed\n", PLUG_MAX_GROUPS);
			return PRD_EINVAL;
		}
		o->as_groups[o->n_as_groups++] = v;
		break;
	case F_TOKEN:
	default:
		o->token = v;
		break;
	}
	return 0;
}

static int apply_server(plug_opts *o, const char *v, buf *errs)
{
	if(!str_starts_with(v, "https://") && !str_starts_with(v, "http://")) {
		buf_printf(errs, "--server %s: not an http(s) URL (e.g. https://10.0.0.1:6443)\n", v);
		return PRD_EINVAL;
	}
	o->server = v;
	return 0;
}

/* --insecure-skip-tls-verify alone, or =true|false. */
static int apply_insecure(plug_opts *o, const char *v, buf *errs)
{
	if(!v) {
		o->insecure = true;
	} else if(str_to_bool(v, &o->insecure) != 0) {
		buf_printf(errs, "--insecure-skip-tls-verify=%s: must be true or false\n", v);
		return PRD_EINVAL;
	}
	return 0;
}

static int apply_namespace(plug_opts *o, const char *v, buf *errs)
{
	if(!str_is_dns_label(v)) {
		buf_printf(errs, "--namespace %s: not a valid namespace name (a DNS label: lower-case "
				 "letters, digits and '-', at most 63 characters)\n", v);
		return PRD_EINVAL;
	}
	o->namespace_ = v;
	return 0;
}

static int apply_output(plug_opts *o, const char *v, buf *errs)
{
	if(strcmp(v, "yaml") == 0)
		o->output = PLUG_OUT_YAML;
	else if(strcmp(v, "json") == 0)
		o->output = PLUG_OUT_JSON;
	else if(strcmp(v, "name") == 0)
		o->output = PLUG_OUT_NAME;
	else {
		buf_printf(errs, "--output %s: unsupported format; use yaml, json or name\n", v);
		return PRD_EINVAL;
	}
	return 0;
}

/* The PodTemplate to create: --image, --cpu, --memory, --gpu. */
static int apply_pod(plug_opts *o, const flag_def *f, const char *v, buf *errs)
{
	int64_t n;

	switch(f->id) {
	case F_IMAGE:
		if(!nonempty(f, v, errs))
			return PRD_EINVAL;
		o->image = v;
		break;
	case F_CPU:
	case F_MEMORY:
		if(!positive_quantity(v)) {
			buf_printf(errs, "--%s %s: not a positive resource quantity (e.g. %s)\n", f->long_name, v,
				   f->id == F_CPU ? "500m or 2" : "512Mi or 4Gi");
			return PRD_EINVAL;
		}
		if(f->id == F_CPU)
			o->cpu = v;
		else
			o->memory = v;
		break;
	case F_GPU:
	default:
		if(str_to_int64(v, &n) != 0 || n < 1 || n > 1000000) {
			buf_printf(errs, "--gpu %s: expected a whole number of GPUs, at least 1\n", v);
			return PRD_EINVAL;
		}
		o->gpu = n;
		break;
	}
	o->make_template = true;
	return 0;
}

static int apply_request_timeout(plug_opts *o, const char *v, buf *errs)
{
	int64_t ns, secs;
	/* kubectl accepts "0" (no timeout), bare seconds and durations. */
	if(str_to_int64(v, &secs) == 0 && secs >= 0)
		ns = secs * 1000000000LL;
	else if(str_parse_duration(v, &ns) != 0 || ns < 0) {
		buf_printf(errs, "--request-timeout %s: expected a duration such as 30s or 1m\n", v);
		return PRD_EINVAL;
	}
	o->request_timeout_ms = (long)(ns / 1000000);
	return 0;
}

/* --dry-run alone means client. */
static int apply_dry_run(plug_opts *o, const char *v, buf *errs)
{
	if(!v || strcmp(v, "client") == 0)
		o->dry_run = PLUG_DRY_CLIENT;
	else if(strcmp(v, "server") == 0)
		o->dry_run = PLUG_DRY_SERVER;
	else if(strcmp(v, "none") == 0)
		o->dry_run = PLUG_DRY_NONE;
	else {
		buf_printf(errs, "--dry-run %s: must be none, client or server\n", v);
		return PRD_EINVAL;
	}
	return 0;
}

/* Apply one flag with its value (NULL for an optional value left out). */
static int apply_flag(plug_opts *o, collected *c, const flag_def *f, const char *v, buf *errs)
{
	switch(f->id) {
	case F_CLASS:
		c->class_arg = v;
		return 0;
	case F_TEMPLATE:
		collect(c->templates, &c->n_templates, &c->too_many_templates, v);
		return 0;
	case F_COUNT:
		collect(c->counts, &c->n_counts, &c->too_many_counts, v);
		return 0;
	case F_PARAM:
		return add_kv(o, KV_PARAM, v, errs);
	case F_LABEL:
		return add_kv(o, KV_LABEL, v, errs);
	case F_ANNOTATION:
		return add_kv(o, KV_ANNOTATION, v, errs);
	case F_CLUSTER:
	case F_USER:
	case F_AS:
	case F_AS_GROUP:
	case F_TOKEN:
		return apply_identity(o, f, v, errs);
	case F_SERVER:
		return apply_server(o, v, errs);
	case F_INSECURE:
		return apply_insecure(o, v, errs);
	case F_NAMESPACE:
		return apply_namespace(o, v, errs);
	case F_KUBECONFIG:
		o->kubeconfig = v;
		return 0;
	case F_CONTEXT:
		o->context = v;
		return 0;
	case F_OUTPUT:
		return apply_output(o, v, errs);
	case F_IMAGE:
	case F_CPU:
	case F_MEMORY:
	case F_GPU:
		return apply_pod(o, f, v, errs);
	case F_REQUEST_TIMEOUT:
		return apply_request_timeout(o, v, errs);
	case F_VERBOSITY:
		return 0;
	case F_DRY_RUN:
		return apply_dry_run(o, v, errs);
	case F_HELP:
		o->help = true;
		return 0;
	}
	return 0;
}

/* Pair --template with --count and fill o->podsets. */
static int pair_podsets(plug_opts *o, const collected *c, buf *errs)
{
	const char *const *tmpl = c->templates;
	size_t nt = c->n_templates, i;
	const char *self[1];
	int rc = 0;

	if(c->too_many_templates || c->too_many_counts || c->n_templates > PLUG_MAX_PODSETS ||
	   c->n_counts > PLUG_MAX_PODSETS) {
		buf_printf(errs, "at most %d pod sets (--template/--count pairs) are allowed\n", PLUG_MAX_PODSETS);
		return PRD_EINVAL;
	}
	if(o->make_template) {
		if(nt > 1) {
			buf_append_str(errs, "--image/--cpu/--memory/--gpu create one PodTemplate: give at most one "
					     "--template with them\n");
			return PRD_EINVAL;
		}
		if(nt == 0) {
			if(!o->name)
				return PRD_EINVAL; /* the bad NAME is already reported */
			self[0] = o->name;
			tmpl = self;
			nt = 1;
		}
	} else if(nt == 0) {
		buf_append_str(errs, "--template is required (or --image/--cpu/--memory/--gpu to create a "
				     "PodTemplate named after the request)\n");
		rc = PRD_EINVAL;
	}
	if(c->n_counts == 0) {
		buf_append_str(errs, "--count is required: how many pods need capacity\n");
		return PRD_EINVAL;
	}
	if(rc)
		return rc;
	if(c->n_counts != nt) {
		buf_printf(errs, "%zu --count for %zu --template: give one --count per --template, in the same "
				 "order\n", c->n_counts, nt);
		return PRD_EINVAL;
	}
	for(i = 0; i < nt; i++) {
		plug_podset *ps = &o->podsets[i];
		ps->template_name = tmpl[i];
		if(!parse_count(c->counts[i], &ps->count)) {
			buf_printf(errs, "--count %s: must be a whole number from 1 to %d\n", c->counts[i], INT32_MAX);
			rc = PRD_EINVAL;
		}
		if(strlen(tmpl[i]) > 253 || !str_is_dns_subdomain(tmpl[i])) {
			buf_printf(errs, "--template %s: not a valid PodTemplate name (a DNS subdomain: lower-case "
					 "letters, digits, '-' and '.', at most 253 characters)\n", tmpl[i]);
			rc = PRD_EINVAL;
		}
	}
	o->n_podsets = nt;
	return rc;
}

/* The flag at argv[*i] and its value (NULL when an optional value is left
 * out), moving *i past a value given as the next word. PRD_EINVAL, after
 * saying why, for an unknown flag, a missing value, or a value given to a
 * flag that takes none. */
static int read_flag(int argc, char **argv, int *i, const flag_def **fp, const char **vp, buf *errs)
{
	const char *a = argv[*i], *v = NULL;
	const flag_def *f;
	bool inline_value = false;

	if(a[1] == '-') {
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		f = find_long(name, len);
		if(!f) {
			buf_printf(errs, "unknown flag: --%.*s", (int)len, name);
			suggest_flag(name, len, errs);
			buf_append_str(errs, "\n");
			return PRD_EINVAL;
		}
		if(eq) {
			v = eq + 1;
			inline_value = true;
		}
	} else {
		f = find_short(a[1]);
		if(!f) {
			buf_printf(errs, "unknown shorthand flag: '%c' in %s\n", a[1], a);
			return PRD_EINVAL;
		}
		if(a[2]) {
			v = a[2] == '=' ? a + 3 : a + 2;
			inline_value = true;
		}
	}
	if(f->no_value) {
		if(inline_value) {
			buf_printf(errs, "%s: takes no value\n", a);
			return PRD_EINVAL;
		}
	} else if(!inline_value) {
		if(f->boolean) {
			/* pflag: "--flag true" is the flag and a word */
		} else if(f->optional) {
			/* "--dry-run client" reads naturally; take the
			 * next word only when it is one of the values. */
			if(*i + 1 < argc && (strcmp(argv[*i + 1], "client") == 0 ||
					     strcmp(argv[*i + 1], "server") == 0 ||
					     strcmp(argv[*i + 1], "none") == 0))
				v = argv[++*i];
		} else if(*i + 1 < argc) {
			v = argv[++*i];
		} else {
			buf_printf(errs, "flag needs an argument: %s\n", a);
			return PRD_EINVAL;
		}
	}
	*fp = f;
	*vp = v;
	return 0;
}

/* Every word of the command line: flags applied to `o`, the rest (and
 * everything after "--") collected as names. PRD_ENOMEM at once; else
 * PRD_EINVAL when some flag was wrong, every one of them reported. */
static int read_words(int argc, char **argv, plug_opts *o, collected *c, buf *errs)
{
	int i, rc = 0, r;
	bool flags_done = false;

	for(i = 0; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		const flag_def *f = NULL;

		if(flags_done || a[0] != '-' || a[1] == '\0') {
			if(c->n_names < sizeof(c->names) / sizeof(c->names[0]))
				c->names[c->n_names] = a;
			c->n_names++;
			continue;
		}
		if(strcmp(a, "--") == 0) {
			flags_done = true;
			continue;
		}
		r = read_flag(argc, argv, &i, &f, &v, errs);
		if(!r)
			r = apply_flag(o, c, f, v, errs);
		if(r == PRD_ENOMEM)
			return r;
		if(r)
			rc = r;
	}
	return rc;
}

/* Exactly one NAME, a DNS subdomain, into o->name. */
static int check_name(plug_opts *o, const collected *c, buf *errs)
{
	size_t i;

	if(c->n_names == 0) {
		buf_append_str(errs, "NAME is required: " PLUG_COMMAND " NAME --class=... --template=... --count=...\n");
		return PRD_EINVAL;
	}
	if(c->n_names > 1) {
		buf_printf(errs, "exactly one NAME is expected, got %zu (", c->n_names);
		for(i = 0; i < c->n_names && i < 3; i++)
			buf_printf(errs, "%s%s", i ? ", " : "", c->names[i]);
		buf_append_str(errs, c->n_names > 3 ? ", ...)\n" : ")\n");
		return PRD_EINVAL;
	}
	if(strlen(c->names[0]) > 253 || !str_is_dns_subdomain(c->names[0])) {
		buf_printf(errs, "NAME %s: not a valid name (a DNS subdomain: lower-case letters, digits, '-' and "
				 "'.', at most 253 characters)\n", c->names[0]);
		return PRD_EINVAL;
	}
	o->name = c->names[0];
	return 0;
}

/* --class, required, resolved into o->class_name (allocated). */
static int check_class(plug_opts *o, const collected *c, buf *errs)
{
	const char *guess;

	if(!c->class_arg) {
		buf_append_str(errs, "--class is required: check-capacity, atomic-scale-up or a full class name\n");
		return PRD_EINVAL;
	}
	o->class_name = plug_class_resolve(c->class_arg);
	if(o->class_name)
		return 0;
	guess = plug_class_suggest(c->class_arg);
	buf_printf(errs, "--class %s: unknown class; ", c->class_arg);
	if(guess)
		buf_printf(errs, "did you mean %s? ", guess);
	buf_append_str(errs, "use check-capacity, atomic-scale-up or a full class name such as "
			     PR_CLASS_CHECK "\n");
	return PRD_EINVAL;
}

int plug_parse(int argc, char **argv, plug_opts *o, buf *errs)
{
	collected c;
	int rc, r;

	memset(o, 0, sizeof(*o));
	memset(&c, 0, sizeof(c));
	rc = read_words(argc, argv, o, &c, errs);
	if(rc == PRD_ENOMEM)
		return rc;
	if(o->help)
		return 0;
	if(o->n_as_groups && !o->as_user) {
		buf_append_str(errs, "--as-group needs --as: groups are impersonated together with a user\n");
		rc = PRD_EINVAL;
	}
	r = check_name(o, &c, errs);
	if(r)
		rc = r;
	r = check_class(o, &c, errs);
	if(r)
		rc = r;
	r = pair_podsets(o, &c, errs);
	if(r)
		rc = r;
	if(o->make_template && !o->image)
		o->image = PLUG_DEFAULT_IMAGE;
	return errs->failed ? errs->failed : rc;
}

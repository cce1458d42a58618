/* kubectl-create-provisioningrequest: the pieces that do not talk to the
 * apiserver, so they can be tested without one.
 *
 *   plug_parse()          command line → plug_opts, every flag checked
 *   plug_build_request()  plug_opts → the ProvisioningRequest object
 *   plug_build_template() plug_opts → the PodTemplate (--image/--cpu/...)
 *
 * kubectl runs a plugin with every argument after `create provisioningrequest`
 * untouched, including global flags such as --kubeconfig, --context and
 * -n/--namespace; those are parsed here too. */
#ifndef PRD_PLUGIN_PLUGIN_H
#define PRD_PLUGIN_PLUGIN_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define PLUG_PROGRAM "kubectl-create-provisioningrequest"
#define PLUG_COMMAND "kubectl create provisioningrequest"

/* Limits of the ProvisioningRequest CRD (docs/design.md §4). */
#define PLUG_MAX_PODSETS 32
#define PLUG_MAX_PARAMS 100
#define PLUG_MAX_PARAM_VALUE 255
/* Our own bounds on repeatable flags, far above any sane use. */
#define PLUG_MAX_LABELS 64
#define PLUG_MAX_GROUPS 32

typedef enum plug_dry_run {
	PLUG_DRY_NONE = 0,
	PLUG_DRY_CLIENT,     /* print the objects, send nothing */
	PLUG_DRY_SERVER      /* send with dryRun=All: validated, not stored */
} plug_dry_run;

typedef enum plug_output {
	PLUG_OUT_DEFAULT = 0, /* "<kind>/<name> created" */
	PLUG_OUT_YAML,
	PLUG_OUT_JSON,
	PLUG_OUT_NAME
} plug_output;

typedef struct plug_podset {
	const char *template_name; /* borrowed from argv or plug_opts.name */
	int32_t count;
} plug_podset;

/* KEY=VALUE of --param, --label and --annotation. */
typedef struct plug_param {
	char *key;                  /* owned */
	const char *value;          /* borrowed from argv (after the '=') */
} plug_param;

/* Parsed command line. Strings are borrowed from argv unless marked owned;
 * free with plug_opts_free(). */
typedef struct plug_opts {
	const char *name;
	char *class_name;           /* owned: the full class name */
	plug_podset podsets[PLUG_MAX_PODSETS];
	size_t n_podsets;
	plug_param params[PLUG_MAX_PARAMS];
	size_t n_params;
	plug_param labels[PLUG_MAX_LABELS];      /* --label, on the request */
	size_t n_labels;
	plug_param annotations[PLUG_MAX_LABELS]; /* --annotation, on the request */
	size_t n_annotations;
	const char *namespace_;     /* -n/--namespace, NULL when not given */
	/* kubectl's global flags, NULL when not given */
	const char *kubeconfig;
	const char *context;
	const char *cluster;        /* --cluster: kubeconfig cluster entry */
	const char *user;           /* --user: kubeconfig user entry */
	const char *server;         /* --server */
	const char *token;          /* --token */
	bool insecure;              /* --insecure-skip-tls-verify */
	const char *as_user;        /* --as */
	const char *as_groups[PLUG_MAX_GROUPS + 1]; /* --as-group, NULL-terminated */
	size_t n_as_groups;
	long request_timeout_ms;    /* 0 = the client's default */
	plug_dry_run dry_run;
	plug_output output;
	/* PodTemplate creation (make_template is true when any is given). */
	bool make_template;
	const char *image;          /* default PLUG_DEFAULT_IMAGE */
	const char *cpu;            /* quantities as typed, validated */
	const char *memory;
	int64_t gpu;                /* nvidia.com/gpu, 0 = none */
	bool help;
} plug_opts;

#define PLUG_DEFAULT_IMAGE "registry.k8s.io/pause:3.10"
#define PLUG_GPU_RESOURCE "nvidia.com/gpu"

/* Resolve a --class value: "check-capacity" and "atomic-scale-up" (also
 * "best-effort-atomic-scale-up") to the full names, a full class name (a
 * DNS subdomain with at least one dot) to itself. NULL for anything else.
 * Caller frees. */
char *plug_class_resolve(const char *arg);

/* For an unknown --class value: the short class name it is probably a typo
 * of ("chek-capacity" → "check-capacity"), or NULL. */
const char *plug_class_suggest(const char *arg);

/* Parse argv[0..argc-1] (the arguments after the program name). Every
 * problem found is appended to `errs` as one line without the "error: "
 * prefix; returns 0 when there is none, PRD_EINVAL otherwise (PRD_ENOMEM on
 * allocation failure). With --help, returns 0 with o->help set and checks
 * nothing else. Always call plug_opts_free() afterwards. */
int plug_parse(int argc, char **argv, plug_opts *o, buf *errs);
void plug_opts_free(plug_opts *o);

/* The ProvisioningRequest (autoscaling.x-k8s.io/v1), with the --label and
 * --annotation pairs in its metadata. `ns` NULL leaves out
 * metadata.namespace. Returns a new object or NULL when out of memory. */
json_object *plug_build_request(const plug_opts *o, const char *ns);

/* The PodTemplate named after the first podset, with one container "main"
 * running o->image and requesting o->cpu / o->memory / o->gpu (a GPU also
 * goes into limits, as extended resources require, and gets a toleration
 * for the nvidia.com/gpu taint). NULL when out of memory. */
json_object *plug_build_template(const plug_opts *o, const char *ns);


/* The usage text for --help. */
const char *plug_usage(void);

#endif

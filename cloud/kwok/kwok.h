/* The kwok node-group driver: node groups defined by Node templates,
 * scaled by creating and deleting fake Node objects that the kwok
 * controller (sigs.k8s.io/kwok) makes Ready.
 *
 * Internal header shared by the driver's files; nothing here is exported
 * from the module (only provreqd_cloud_driver is). */
#ifndef PRD_CLOUD_KWOK_H
#define PRD_CLOUD_KWOK_H

#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "provreqd/cloud.h"

/* Labels and annotations the driver reads and writes. */
#define KWOK_GROUP_LABEL "provreqd.io/node-group"
#define KWOK_FAKE_ANNOTATION "kwok.x-k8s.io/node"
#define KWOK_MIN_ANNOTATION "provreqd.io/min-size"
#define KWOK_MAX_ANNOTATION "provreqd.io/max-size"
#define KWOK_INITIAL_ANNOTATION "provreqd.io/initial-size"
#define KWOK_PROVIDER_PREFIX "kwok://"
#define KWOK_DEFAULT_MAX 100
/* "<group>-<5 chars>" must stay a DNS label (63). */
#define KWOK_GROUP_NAME_MAX 57

/* Operations fault injection can target. */
enum kwok_op {
	KWOK_OP_REFRESH,
	KWOK_OP_NODE_GROUPS,
	KWOK_OP_INSTANCES,
	KWOK_OP_TEMPLATE_NODE,
	KWOK_OP_INCREASE,
	KWOK_OP_ATOMIC_INCREASE,
	KWOK_OP_DELETE,
	KWOK_OP_DECREASE,
	KWOK_OP_COUNT
};

/* One `faults:` entry of the configuration. */
typedef struct kwok_fault {
	int op;                 /* kwok_op */
	char *group;            /* NULL: every group */
	char *fail_message;     /* non-NULL: the call fails with it */
	int fail_code;          /* PRD_CLOUD_E* for fail_message */
	int32_t succeed;        /* >= 0: create only this many nodes per call */
	char *error_code;       /* instance error code for the rest */
	long delay_ms;          /* sleep before the call */
	int32_t times;          /* calls left to affect; -1 = every call */
} kwok_fault;

/* A node that increase_size was asked for but could not create (fault
 * injection): reported by instances() as an out-of-resources error and
 * counted in the target size until delete_nodes or decrease_target_size
 * clears it. */
typedef struct kwok_failed {
	char *name;
	char *code;
	char *message;
} kwok_failed;

typedef struct kwok_group {
	char *id;               /* the template's metadata.name */
	char *source;           /* where the template came from, for messages */
	int32_t min, max, initial;
	json_object *tmpl;      /* the validated template Node (owned) */
	int32_t live;           /* Nodes of the group not being deleted */
	kwok_failed *failed;
	size_t nfailed;
} kwok_group;

typedef struct kwok {
	const prd_cloud_host *host;
	char *template_dir;     /* templateDir, or NULL */
	char *cm_namespace;     /* templateConfigMap, or NULL */
	char *cm_name;
	bool create_initial;    /* createInitialNodes */
	kwok_fault *faults;
	size_t nfaults;
	kwok_group *groups;
	size_t ngroups;
	uint64_t rng;           /* fallback when getrandom() is unavailable */
} kwok;

/* kwok_util.c: errors, logging, strings, JSON and API helpers. */
int kwok_fail(prd_cloud_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void kwok_log(const kwok *k, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
char *kwok_strdup(const char *s);
/* Member `key` of `obj` as a string, or NULL when absent or not a string. */
const char *kwok_jstr(json_object *obj, const char *key);
/* Member `key` of `obj` when it is an object, else NULL. */
json_object *kwok_jobj(json_object *obj, const char *key);
/* One request to kube-apiserver through the host. `body` (may be NULL) is
 * serialised as JSON. On success *out (if given) is the parsed answer
 * (caller puts). *http_status (may be NULL) receives the HTTP status. */
int kwok_request(kwok *k, const char *method, const char *path, const char *content_type,
		 json_object *body, json_object **out, long *http_status, prd_cloud_error *err);
/* List every item at `path` (which may carry a query), following continue
 * tokens. fn returns non-zero to stop (that value is returned). */
int kwok_list(kwok *k, const char *path, int (*fn)(void *ud, json_object *item), void *ud,
	      prd_cloud_error *err);
/* Five random characters from Kubernetes' generateName alphabet. */
void kwok_random_suffix(kwok *k, char out[6]);

/* kwok_config.c: the --cloud-config text and the Node templates. */
int kwok_parse_config(kwok *k, const char *config, prd_cloud_error *err);
/* Read every template from the configured source into a new array
 * (caller frees with kwok_groups_free). */
int kwok_load_templates(kwok *k, kwok_group **groups, size_t *ngroups, prd_cloud_error *err);
/* Faults naming a group must name one that exists. */
int kwok_check_fault_groups(const kwok *k, prd_cloud_error *err);
void kwok_groups_free(kwok_group *groups, size_t n);
void kwok_faults_free(kwok_fault *faults, size_t n);
const char *kwok_op_name(int op);

/* The Node a new member of `g` named `name` is created as (caller puts). */
json_object *kwok_node_for_group(const kwok_group *g, const char *name);

#endif

/* The kwok node-group driver: node groups defined by Node templates,
 * scaled by creating and deleting fake Node objects that the kwok
 * controller (sigs.k8s.io/kwok) makes Ready.
 *
 * Internal header shared by the driver's files: the types they share and
 * the helpers of kwok_util.c. Nothing here is exported from the module
 * (only provreqd_cloud_driver is).
 *
 * The driver's files, each calling only the ones listed before it:
 *   kwok_util.c    the helpers below (names, Node JSON, the target check)
 *   kwok_view.c    kwok_view.h: the Nodes as the host's cache tells them
 *   kwok_dra.c     kwok_dra.h: the ResourceSlices each group's nodes publish
 *   kwok_async.c   kwok_async.h: the asynchronous mode
 *   kwok_config.c  kwok_config.h: the --cloud-config text and the templates
 *                  (its autoProvisioning key is parsed by kwok_nap_parse)
 *   kwok_nap.c     kwok_nap.h: node auto-provisioning (ABI 1.5): machine
 *                  shapes and the groups made of them
 *   kwok_grow.c    the group look-up and injected faults every operation
 *                  starts with; creating Nodes (increases)
 *   kwok.c         the driver's operations (provreqd_cloud_driver); no
 *                  other file calls into it */
#ifndef PRD_CLOUD_KWOK_INT_H
#define PRD_CLOUD_KWOK_INT_H

#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/drv_util.h"
#include "provreqd/cloud.h"

/* Labels and annotations the driver reads and writes. */
#define KWOK_GROUP_LABEL "provreqd.io/node-group"
#define KWOK_FAKE_ANNOTATION "kwok.x-k8s.io/node"
#define KWOK_MIN_ANNOTATION "provreqd.io/min-size"
#define KWOK_MAX_ANNOTATION "provreqd.io/max-size"
#define KWOK_INITIAL_ANNOTATION "provreqd.io/initial-size"
/* ABI 1.3: the owner token of the increase that created a Node. */
#define KWOK_OWNER_LABEL "provreqd.io/owner"
#define KWOK_PROVIDER_PREFIX "kwok://"
#define KWOK_DEFAULT_MAX 100
/* createParallelism when the configuration does not say. provreqd's
 * client paces every request (its QPS and burst) whatever the number in
 * flight; 8 keeps the apiserver's round trips overlapped without holding
 * many of its connections. */
#define KWOK_CREATE_PARALLELISM 8
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
	char *owner;            /* the increase's owner token, or NULL */
	int64_t created_ns;     /* when the increase refused it (host clock) */
} kwok_failed;

/* One increase: increase_size, atomic_increase_size or (ABI 1.3)
 * increase. */
typedef struct kwok_grow_req {
	int32_t delta;
	bool atomic;
	int32_t expected;       /* the target the caller planned from; -1: any */
	const char *owner;      /* label every instance with it; NULL: none */
} kwok_grow_req;

typedef struct kwok_group {
	char *id;               /* the template's metadata.name */
	char *source;           /* where the template came from, for messages */
	int32_t min, max, initial;
	json_object *tmpl;      /* the validated template Node (owned) */
	int32_t live;           /* Nodes of the group not being deleted */
	int32_t pending;        /* async mode: requested, no Node yet, not being deleted */
	kwok_failed *failed;
	size_t nfailed;
	/* ABI 1.5: a group create_group made (kwok_nap.c): its creator's
	 * token, shape and zone (NULL for a template group). */
	char *owner;
	char *shape;
	char *zone;
} kwok_group;

/* ABI 1.5: one machine shape of `autoProvisioning.shapes`. */
typedef struct kwok_shape {
	char *name;
	json_object *node;      /* the Node a new member looks like (owned) */
	char **zones;
	size_t nzones;
	int64_t price_micros;   /* -1 unknown */
	int32_t max_size;
} kwok_shape;

/* ABI 1.5: the `autoProvisioning:` key. */
typedef struct kwok_nap {
	char *cm_namespace;     /* groupsConfigMap: where created groups are kept */
	char *cm_name;
	kwok_shape *shapes;
	size_t nshapes;
} kwok_nap;

/* The `async:` key: a cloud that answers before its instances exist (see
 * kwok_async.c). */
typedef struct kwok_async {
	char *state_file;       /* the instances asked for; survives provreqd */
	char **groups;          /* only these groups (none listed: every group) */
	size_t ngroups;
	uint64_t seed, rng;
	long create_delay_ms, register_delay_ms, delete_delay_ms;
	int instance_failure_pct, stockout_pct, transient_pct;
} kwok_async;

/* The Nodes of the driver's groups as the host's cache last told it
 * (kwok_view.c); `on` once a full set arrived. */
typedef struct kwok_vnode kwok_vnode;
typedef struct kwok_vgroup kwok_vgroup;
typedef struct kwok_view {
	bool on;
	kwok_vnode **slots;     /* open addressing by Node name */
	size_t cap, len;
	/* The same Nodes by group label value, so that listing a group or
	 * counting its live Nodes does not walk every slot. */
	kwok_vgroup **groups;
	size_t ngroups;
} kwok_view;

/* The template file names of a templateDir as last read, with the
 * directory's device, inode, and modification and change times then.
 * While those stay the same, and were old enough to rely on (`ok`), the
 * names are still the directory's: no file was added, removed or renamed. */
typedef struct kwok_dir_names {
	char **names;
	size_t n;
	int64_t key[6];
	bool ok;
} kwok_dir_names;

typedef struct kwok {
	const prd_cloud_host *host;
	char *template_dir;     /* templateDir, or NULL */
	char *cm_namespace;     /* templateConfigMap, or NULL */
	char *cm_name;
	bool create_initial;    /* createInitialNodes */
	unsigned create_parallelism; /* createParallelism: Node creates in flight at once */
	kwok_fault *faults;
	size_t nfaults;
	kwok_group *groups;
	size_t ngroups;
	uint64_t rng;           /* fallback when getrandom() is unavailable */
	kwok_async *async;      /* NULL: every increase creates its Nodes at once */
	json_object *slices;    /* resourceSlices: group → ResourceSlice specs (owned), or NULL */
	kwok_view view;         /* Nodes told by the host; not used until view.on */
	/* templateDir: the stamp of the directory the groups were read from,
	 * when it may be relied on (tmpl_stamp_ok): a refresh that finds the
	 * same stamp parses nothing. */
	uint64_t tmpl_stamp;
	bool tmpl_stamp_ok;
	kwok_dir_names tmpl_names; /* kwok_templates_stamp's list of the files */
	kwok_nap *nap;          /* autoProvisioning, or NULL */
} kwok;

/* Errors, logging, strings, JSON and API helpers: the drivers' shared
 * ones (cloud/common/drv_util.h), bound to this driver's host. */
#define kwok_fail drv_fail
#define kwok_log(k, ...) drv_log((k)->host, __VA_ARGS__)
#define kwok_strdup drv_strdup
#define kwok_jstr drv_jstr
#define kwok_jobj drv_jobj
#define kwok_request(k, ...) drv_request((k)->host, __VA_ARGS__)
#define kwok_list(k, ...) drv_list((k)->host, __VA_ARGS__)
/* Five random characters from Kubernetes' generateName alphabet. */
void kwok_random_suffix(kwok *k, char out[6]);

/* The Node a new member of `g` named `name` is created as, labelled with
 * `owner` when given (caller puts). A template's own owner label is not
 * copied. */
json_object *kwok_node_for_group(const kwok_group *g, const char *name, const char *owner);
/* A Node's metadata.creationTimestamp in ns since the epoch; 0 when
 * missing or unreadable. */
int64_t kwok_node_created_ns(json_object *node);
/* The group's target size read from the apiserver, not from a cache: its
 * live Nodes listed now, plus the nodes fault injection refused, plus
 * `pending` (async instances without a Node, counted by the caller). Sets
 * g->live. When expected >= 0 and the target differs, PRD_CLOUD_ECONFLICT
 * saying nothing was `done`; when grow > 0 would take it past the
 * maximum, PRD_CLOUD_ERANGE. */
int kwok_check_target(kwok *k, kwok_group *g, int32_t expected, int32_t pending, int32_t grow, const char *done,
		      prd_cloud_error *err);
/* A node group from a validated Node template (kwok_config.c): what
 * templateDir and templateConfigMap entries become. `where` names the
 * source in messages. */
int kwok_template_group(json_object *node, const char *where, kwok_group *g, prd_cloud_error *err);
/* Whether the Node JSON carries a deletionTimestamp. */
bool kwok_node_deleting(json_object *node);

/* kwok_grow.c, for kwok.c (said at their definitions). */
kwok_group *kwok__find_group(kwok *k, const char *id);
int kwok__no_group(prd_cloud_error *err, const char *id);
int kwok__apply_faults(kwok *k, int op, const char *group, int32_t *succeed, const char **error_code,
		       prd_cloud_error *err);
void kwok__free_names(char **names, int32_t n);
int kwok__create_nodes(kwok *k, kwok_group *g, int32_t n, const char *owner, char ***created, int32_t *ncreated,
		       prd_cloud_error *err);
int kwok__delete_node(kwok *k, const char *name, const char *uid, prd_cloud_error *err);
int kwok__kw_increase_size(void *state, const char *group_id, int32_t delta, prd_cloud_error *err);
int kwok__kw_atomic_increase(void *state, const char *group_id, int32_t delta, prd_cloud_error *err);
int kwok__kw_increase(void *state, const prd_cloud_increase *in, prd_cloud_error *err);

#endif

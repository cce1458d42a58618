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
} kwok_group;

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

/* kwok_config.c: the --cloud-config text and the Node templates. */
int kwok_parse_config(kwok *k, const char *config, prd_cloud_error *err);
/* Read every template from the configured source into a new array
 * (caller frees with kwok_groups_free). */
int kwok_load_templates(kwok *k, kwok_group **groups, size_t *ngroups, prd_cloud_error *err);
/* The template directory's stamp: a digest of each template file's name,
 * size, inode, and modification and change times. *trust is false when a
 * file changed in the last 2 s before now_ns (the real time: file times
 * are; a file rewritten again within the file system's timestamp
 * granularity keeps its stamp). 0, or -1 when the directory cannot be
 * read. The file names are read again only when the directory itself
 * changed (k->tmpl_names). */
int kwok_templates_stamp(kwok *k, int64_t now_ns, uint64_t *stamp, bool *trust);
void kwok_dir_names_free(kwok_dir_names *d);
/* Faults naming a group must name one that exists. */
int kwok_check_fault_groups(const kwok *k, prd_cloud_error *err);
void kwok_groups_free(kwok_group *groups, size_t n);
void kwok_faults_free(kwok_fault *faults, size_t n);
const char *kwok_op_name(int op);

/* kwok_async.c: the asynchronous mode. */
int kwok_async_parse(kwok *k, json_object *v, prd_cloud_error *err);
void kwok_async_free(kwok_async *a);
int kwok_async_check_groups(const kwok *k, prd_cloud_error *err);
bool kwok_async_for(const kwok *k, const char *group);
/* PRD_CLOUD_EAGAIN with the configured probability (async groups only). */
int kwok_async_transient(kwok *k, const char *group, const char *op, prd_cloud_error *err);
/* Register what is due, finish deletes, recount each group's pending. */
int kwok_async_progress(kwok *k, prd_cloud_error *err);
/* Ask for req->delta instances, of which those past `succeed` fail with
 * error_code. A conditional request (req->expected >= 0) compares the
 * group's target, counted afresh under the state file's lock, first. */
int kwok_async_grow(kwok *k, kwok_group *g, const kwok_grow_req *req, int32_t succeed, const char *error_code,
		    prd_cloud_error *err);
/* An instance of the async cloud without a Node yet. */
typedef struct kwok_pending {
	const char *name;
	bool appeared;          /* createDelayMs has passed: the cloud reports it */
	const char *failed;     /* its error code, or NULL */
	bool deleting;
	const char *owner;      /* the owner token of its increase, or NULL */
	int64_t requested_ns;   /* when the increase asked for it (host clock) */
} kwok_pending;
/* fn for each instance of `group` without a Node yet. */
int kwok_async_each(kwok *k, const char *group, int (*fn)(void *ud, const kwok_pending *p), void *ud,
		    prd_cloud_error *err);
/* Delete (or cancel) the pending instance `name`; *found says whether it
 * was one. */
int kwok_async_delete(kwok *k, kwok_group *g, const char *name, bool *found, prd_cloud_error *err);
/* Cancel `delta` requested instances, counting `elsewhere` more the caller
 * can cancel itself; PRD_CLOUD_ERANGE (nothing cancelled) when fewer can be.
 * With expected >= 0, PRD_CLOUD_ECONFLICT (nothing cancelled) unless the
 * group's target, counted afresh under the state file's lock, is that. */
int kwok_async_cancel(kwok *k, kwok_group *g, int32_t delta, int32_t elsewhere, int32_t expected, int32_t *cancelled,
		      prd_cloud_error *err);

/* kwok_dra.c: the ResourceSlices (DRA) each group's nodes publish. */
int kwok_slices_parse(kwok *k, json_object *v, prd_cloud_error *err);
int kwok_slices_check_groups(const kwok *k, prd_cloud_error *err);
/* The ResourceSlice objects of `node` of `group` (a JSON array the caller
 * puts), or NULL when the group declares none. */
json_object *kwok_slices_for_node(const kwok *k, const char *group, const char *node);
/* Create them (an existing one counts as created). */
int kwok_slices_create(kwok *k, const char *group, const char *node, prd_cloud_error *err);
/* Delete whatever slices a Node of that name may have had (logged, never
 * an error: a Node without its slices offers nothing). */
void kwok_slices_delete(kwok *k, const char *node);
/* kwok_view.c: the Nodes as the host's cache tells them (ABI 1.2). */
int kwok_view_apply(kwok *k, const prd_cloud_node *nodes, size_t count, int full, prd_cloud_error *err);
/* The driver created `node` (its JSON) / deleted the Node `name`: the
 * view shows that at once, as a list would. No-ops until view.on. */
void kwok_view_created(kwok *k, json_object *node);
void kwok_view_deleted(kwok *k, const char *name);
/* One Node of the view, as kwok_view_each gives it. */
typedef struct kwok_vinfo {
	const char *name;
	size_t name_len;
	const char *id;         /* its provider ID, or "kwok://<name>" when it has none */
	size_t id_len;
	const char *owner;      /* its provreqd.io/owner label, or NULL */
	int64_t created_ns;     /* its metadata.creationTimestamp; 0 unknown */
	bool ready, deleting;
} kwok_vinfo;
/* fn for each Node of `group` the view holds and the driver has not
 * deleted; stops at fn's first non-zero value. */
typedef int (*kwok_view_fn)(void *ud, const kwok_vinfo *n);
int kwok_view_each(const kwok *k, const char *group, kwok_view_fn fn, void *ud);
/* The view learns a Node's creation time from the driver's own creates
 * only (the host's cache does not pass it on): list `group` once to learn
 * it for Nodes the view has not been told it of. */
int kwok_view_fill_times(kwok *k, const char *group, prd_cloud_error *err);
/* How many Nodes of `group` the view holds that the driver has not
 * deleted and that are not being deleted. */
int32_t kwok_view_live(const kwok *k, const char *group);
void kwok_view_free(kwok_view *v);

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

#endif

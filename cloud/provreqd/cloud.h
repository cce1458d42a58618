/* provreqd cloud node-group driver ABI.
 *
 * A driver is a shared object that exports exactly one symbol,
 * PRD_CLOUD_ENTRY_SYMBOL, a function returning a pointer to a constant
 * prd_cloud_driver descriptor. provreqd loads it with dlopen(RTLD_NOW |
 * RTLD_LOCAL), checks the ABI version, and then calls it only from its single
 * controller worker thread: a driver needs no locking of its own unless it
 * starts threads itself. The host's functions may be called from any
 * thread, several at once.
 *
 * Versioning: the major version changes when an existing field changes
 * meaning or position; the host refuses a driver whose major differs. The
 * minor version grows when fields are appended to the end of a struct; the
 * host refuses a driver built against a newer minor than its own, and reads
 * appended fields only when the driver's `struct_size` says they exist.
 *
 * Memory: whoever allocates frees. Everything a driver hands out (groups,
 * instances, strings) is released by the host through the driver's own
 * release functions; everything the host hands out (a kube_request answer)
 * is released by the driver through host->free.
 *
 * Errors: functions return 0 or a negative PRD_CLOUD_E* code and fill the
 * prd_cloud_error they were given with a human-readable message.
 *
 * This header needs only the C standard library. */
#ifndef PROVREQD_CLOUD_H
#define PROVREQD_CLOUD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PRD_CLOUD_ABI_MAJOR 1
#define PRD_CLOUD_ABI_MINOR 7

/* The one symbol a driver exports. */
#define PRD_CLOUD_ENTRY_SYMBOL "provreqd_cloud_driver"

enum prd_cloud_rc {
	PRD_CLOUD_OK = 0,
	PRD_CLOUD_ENOMEM = -1,
	PRD_CLOUD_EINVAL = -2,       /* bad arguments or configuration */
	PRD_CLOUD_EIO = -3,          /* the cloud or apiserver call failed */
	PRD_CLOUD_ENOTFOUND = -4,    /* unknown node group or node */
	PRD_CLOUD_ERANGE = -7,       /* the size would leave [min, max] */
	PRD_CLOUD_EAGAIN = -11,      /* transient; retry later */
	PRD_CLOUD_EUNSUPPORTED = -12, /* the operation is not available */
	/* ABI 1.3: a conditional call found the group's target other than
	 * the caller expected (someone else changed it), or (1.4) the group
	 * has seen a newer leader's term: nothing was done. */
	PRD_CLOUD_ECONFLICT = -17
};

enum prd_cloud_log_level {
	PRD_CLOUD_LOG_ERROR = 0,
	PRD_CLOUD_LOG_WARN = 1,
	PRD_CLOUD_LOG_INFO = 2,
	PRD_CLOUD_LOG_DEBUG = 3
};

#define PRD_CLOUD_MSG_MAX 512

typedef struct prd_cloud_error {
	int code;
	char message[PRD_CLOUD_MSG_MAX];
} prd_cloud_error;

typedef struct prd_cloud_node_group {
	char *id;               /* stable, unique across loaded drivers */
	int32_t min_size;
	int32_t max_size;
	int32_t target_size;    /* the size the cloud is asked to reach */
} prd_cloud_node_group;

enum prd_cloud_instance_state {
	PRD_CLOUD_INSTANCE_RUNNING = 1,
	PRD_CLOUD_INSTANCE_CREATING = 2,
	PRD_CLOUD_INSTANCE_DELETING = 3
};

enum prd_cloud_error_class {
	PRD_CLOUD_ERRCLASS_NONE = 0,
	PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES = 1, /* stockout, quota: back the group off */
	PRD_CLOUD_ERRCLASS_OTHER = 2
};

/* Clouds are asynchronous: an increase returns before its instances
 * exist. An instance is reported from the first moment the cloud knows it,
 * always with a stable, unique `id` (the provider ID, or a placeholder ID
 * that stays the same until the provider ID is known — the host matches
 * instances by id across calls); `node_name` stays NULL until its Node has
 * registered. An instance that failed to be created is reported with its
 * error class until it is deleted. */
typedef struct prd_cloud_instance {
	char *id;               /* provider ID, e.g. "kwok://gold-abc12"; never NULL */
	char *node_name;        /* the Node's name once known, else NULL */
	int32_t state;          /* prd_cloud_instance_state */
	int32_t error_class;    /* prd_cloud_error_class */
	char *error_code;       /* NULL when error_class is NONE */
	char *error_message;
	/* ---- appended in ABI 1.3: the host reads these only when the
	 * driver's descriptor says instance_size covers them, and steps
	 * through the array by instance_size, so a driver built against 1.2
	 * keeps working. ---- */
	/* The owner token of the increase() call that created the instance
	 * (PRD_CLOUD_CAP_OWNER_MARK), NULL when it was not created through
	 * such a call or the cloud cannot tell. */
	char *owner;
	/* When the cloud created the instance, wall ns since the epoch
	 * (PRD_CLOUD_CAP_CREATION_TIME); 0 when unknown. */
	int64_t created_ns;
} prd_cloud_instance;

/* ABI 1.3: what a driver can promise (prd_cloud_driver.capabilities). */
enum prd_cloud_capability {
	/* increase() honours expected_target and decrease_target_size_if()
	 * exists: a call made from a stale view changes nothing. */
	PRD_CLOUD_CAP_CONDITIONAL = 1u << 0,
	/* Every instance increase() creates carries its owner token, reported
	 * by instances() for as long as the instance is listed (pending ones
	 * included), so the host can tell its plan's instances from anyone
	 * else's. */
	PRD_CLOUD_CAP_OWNER_MARK = 1u << 1,
	/* instances() reports created_ns. */
	PRD_CLOUD_CAP_CREATION_TIME = 1u << 2,
	/* ABI 1.4: fence() exists and the cloud keeps, per group and fence
	 * key, the highest term it was given; increase() and decrease() carry
	 * the caller's term and are refused when the group has seen a higher
	 * one. Value conditions (expected_target) cannot tell a stale
	 * caller's late call from a current one when the target came back to
	 * the value it had (a plan closed with nothing made); a term can. */
	PRD_CLOUD_CAP_FENCE = 1u << 3,
	/* The cloud keeps, with the group, which owner token's increase()
	 * moved its target last: an increase() carrying the token of one that
	 * already took effect answers 0 and changes nothing (its answer was
	 * lost, or the caller resumes an interrupted plan), and one whose
	 * expected_target another writer moved answers PRD_CLOUD_ECONFLICT.
	 * So the host asks the driver, not the target, whether an interrupted
	 * conditional increase took effect. (A bit added without a version
	 * change: a host that does not know it never sets a driver apart by
	 * it.) */
	PRD_CLOUD_CAP_INCREASE_RECORD = 1u << 4
};

/* ABI 1.3: one increase (prd_cloud_driver.increase). */
typedef struct prd_cloud_increase {
	uint32_t struct_size;   /* sizeof(prd_cloud_increase) as the host built it */
	const char *group_id;
	int32_t delta;          /* > 0 */
	int32_t atomic;         /* non-zero: all delta instances or none */
	/* >= 0: refuse with PRD_CLOUD_ECONFLICT, changing nothing, unless the
	 * group's target size is exactly this when the cloud applies the
	 * call; -1: unconditional. Read the target from the cloud, not from
	 * a cache: the point is to fail when someone else moved it. */
	int32_t expected_target;
	/* NULL, or a token of 1..63 characters [A-Za-z0-9._-], beginning and
	 * ending alphanumeric (a valid label value): mark every instance this
	 * call creates with it. The host uses one token per plan and may
	 * call again with the same token to finish an interrupted plan. */
	const char *owner;
	/* ---- appended in ABI 1.4 (read only when struct_size covers
	 * them) ---- */
	/* The caller's fencing token (PRD_CLOUD_CAP_FENCE): `fence_key`
	 * names the leader election it comes from (1..63 of [A-Za-z0-9._-],
	 * beginning and ending alphanumeric), `fence_term` the caller's term
	 * in it, which only grows from one leader to the next. Refuse with
	 * PRD_CLOUD_ECONFLICT, changing nothing, when the group has recorded
	 * a higher term for the key (see fence()); else record this one, if
	 * higher, and go on. NULL / 0: the caller is not leader-elected. */
	const char *fence_key;
	uint64_t fence_term;
} prd_cloud_increase;

/* ABI 1.4: one decrease of the target (prd_cloud_driver.decrease). */
typedef struct prd_cloud_decrease {
	uint32_t struct_size;   /* sizeof(prd_cloud_decrease) as the host built it */
	const char *group_id;
	int32_t delta;          /* > 0 */
	/* As in prd_cloud_increase: >= 0 the target the caller read, -1
	 * none. */
	int32_t expected_target;
	const char *fence_key;  /* as in prd_cloud_increase */
	uint64_t fence_term;
} prd_cloud_decrease;

/* ABI 1.4: one delete of particular instances (prd_cloud_driver.delete_fenced). */
typedef struct prd_cloud_delete {
	uint32_t struct_size;   /* sizeof(prd_cloud_delete) as the host built it */
	const char *group_id;
	const char *const *instance_ids; /* as delete_instances takes them */
	size_t count;
	const char *fence_key;  /* as in prd_cloud_increase */
	uint64_t fence_term;
} prd_cloud_delete;

/* Services the host offers a driver. All pointers stay valid from init
 * until fini returns. */
typedef struct prd_cloud_host {
	uint32_t struct_size;   /* sizeof(prd_cloud_host) as the host built it */
	void *ctx;              /* pass back as the first argument */
	/* One log line attributed to the driver. */
	void (*log)(void *ctx, int level, const char *message);
	/* An authenticated request to kube-apiserver. `path` starts with "/"
	 * (e.g. "/api/v1/nodes"); body/content_type may be NULL. On return
	 * *http_status holds the HTTP status (0 if no answer) and *resp_body
	 * (NUL-terminated, *resp_len bytes) the answer, released with
	 * host->free. Returns 0 for a 2xx answer, else a PRD_CLOUD_E* code with
	 * the apiserver's message in err. */
	int (*kube_request)(void *ctx, const char *method, const char *path,
			    const char *content_type, const char *body, size_t body_len,
			    long *http_status, char **resp_body, size_t *resp_len,
			    prd_cloud_error *err);
	/* Wall-clock time in nanoseconds since the Unix epoch; follows the
	 * host's clock, which tests and `provreqd simulate` move by hand. */
	int64_t (*now_ns)(void *ctx);
	/* Release memory the host handed to the driver. */
	void (*free)(void *ctx, void *ptr);
	/* ---- appended in ABI 1.3 (read it only when struct_size covers
	 * it) ---- */
	/* Non-zero while the host may still change the cloud (its
	 * leader-election lease is valid with a margin). A driver whose one
	 * operation makes many calls (a Node per instance, say) asks before
	 * each and, on zero, stops and returns PRD_CLOUD_EAGAIN with what it
	 * did so far reported through instances(): a replica paused past its
	 * lease must not go on changing the cloud when it resumes. */
	int (*may_act)(void *ctx);
} prd_cloud_host;

/* A Node as the host's cache holds it (ABI 1.2, nodes_changed). Strings
 * are valid during the call only. */
typedef struct prd_cloud_label {
	const char *key;
	const char *value;
} prd_cloud_label;

typedef struct prd_cloud_node {
	const char *name;
	const char *provider_id;       /* spec.providerID; NULL when unset */
	const prd_cloud_label *labels;
	size_t nlabels;
	int32_t present;               /* 0: the Node is gone (nothing else is set) */
	int32_t ready;                 /* the Ready condition is True */
	int32_t deleting;              /* metadata.deletionTimestamp is set */
} prd_cloud_node;

enum prd_cloud_outcome_state {
	PRD_CLOUD_OUTCOME_PENDING = 0,     /* still working; call again later */
	PRD_CLOUD_OUTCOME_PROVISIONED = 1, /* capacity is there */
	PRD_CLOUD_OUTCOME_NOT_PROVISIONED = 2, /* not now; retry with backoff */
	PRD_CLOUD_OUTCOME_FAILED = 3       /* final */
};

/* ABI 1.5: one taint (node auto-provisioning). */
typedef struct prd_cloud_taint {
	const char *key;
	const char *value;             /* may be NULL (= "") */
	const char *effect;            /* "NoSchedule", "PreferNoSchedule" or "NoExecute" */
} prd_cloud_taint;

/* ABI 1.5: a machine shape the cloud can launch node groups of (node
 * auto-provisioning). The host steps through the array the driver returns
 * by prd_cloud_driver.shape_size. */
typedef struct prd_cloud_shape {
	char *name;             /* unique within the driver: 1..40 of [a-z0-9-] */
	/* A new node of the shape as a Kubernetes Node (JSON): its labels,
	 * taints, status.capacity and status.allocatable, as template_node
	 * gives them for a group. */
	char *node_json;
	/* The zones (topology.kubernetes.io/zone values) a group of the
	 * shape may be created in, comma-separated; NULL or "" when the
	 * cloud has no zones or chooses itself. */
	char *zones;
	/* Price of one node for an hour in millionths of the cloud's
	 * currency unit; -1 when unknown. Only compared between shapes of
	 * one driver. */
	int64_t price_micros;
	/* The largest group of the shape the cloud allows (>= 1). */
	int32_t max_size;
} prd_cloud_shape;

/* ABI 1.5: create a node group of a shape (prd_cloud_driver.create_group). */
typedef struct prd_cloud_group_create {
	uint32_t struct_size;   /* sizeof(prd_cloud_group_create) as the host built it */
	/* The new group's id, chosen by the host: 1..40 of [a-z0-9-],
	 * beginning with a letter and ending alphanumeric; unique across the
	 * host's drivers. */
	const char *group_id;
	const char *shape;      /* a prd_cloud_shape.name */
	const char *zone;       /* one of the shape's zones, or NULL */
	/* Labels and taints the group's nodes carry beyond the shape's own
	 * (what the pods the group is made for select or tolerate). A driver
	 * refuses, with PRD_CLOUD_EINVAL, those its cloud does not allow. */
	const prd_cloud_label *labels;
	size_t nlabels;
	const prd_cloud_taint *taints;
	size_t ntaints;
	int32_t max_size;       /* 1..the shape's max_size; min size is 0 */
	/* The creator's token (rules as prd_cloud_increase.owner), kept with
	 * the group and reported by group_owner() for as long as the group
	 * exists. Creating a group that exists with the same token, shape
	 * and zone is not an error (the host repeats a call whose answer it
	 * lost); with anything else it is PRD_CLOUD_ECONFLICT. */
	const char *owner;
	/* ---- appended in ABI 1.6 (read only when struct_size covers
	 * them) ---- */
	/* The caller's fencing token, as in prd_cloud_increase. A driver with
	 * PRD_CLOUD_CAP_FENCE refuses the creation with PRD_CLOUD_ECONFLICT,
	 * creating nothing, when its creations have recorded a higher term
	 * for the key (fence() with group_id NULL); else the new group starts
	 * with the higher of the two terms recorded as its own fence, so that
	 * the group is fenced from its first moment. Repeating a creation
	 * (same token, shape and zone) checks and records the term on the
	 * group as increase() does. NULL / 0: not leader-elected. */
	const char *fence_key;
	uint64_t fence_term;
} prd_cloud_group_create;

typedef struct prd_cloud_outcome {
	int32_t state;                     /* prd_cloud_outcome_state */
	char reason[64];                   /* CamelCase condition reason */
	char message[PRD_CLOUD_MSG_MAX];
} prd_cloud_outcome;

typedef struct prd_cloud_driver {
	uint32_t abi_major;     /* PRD_CLOUD_ABI_MAJOR */
	uint32_t abi_minor;     /* PRD_CLOUD_ABI_MINOR */
	uint32_t struct_size;   /* sizeof(prd_cloud_driver) */
	const char *name;       /* short unique name, [a-z0-9-]{1,63} */

	/* Optional. Parse `config` (the contents of --cloud-config, may be
	 * NULL) and create the driver's state, returned in *state. */
	int (*init)(const prd_cloud_host *host, const char *config, void **state,
		    prd_cloud_error *err);
	/* Optional. Release the state. */
	void (*fini)(void *state);

	/* Re-read the cloud's view; called once per controller loop before
	 * the other functions. */
	int (*refresh)(void *state, prd_cloud_error *err);

	/* All node groups. Release with release_node_groups. */
	int (*node_groups)(void *state, prd_cloud_node_group **groups, size_t *count,
			   prd_cloud_error *err);
	void (*release_node_groups)(void *state, prd_cloud_node_group *groups, size_t count);

	/* Optional since 1.1 (NULL if absent). The group a Node belongs to,
	 * given the Node as JSON. *group_id is NULL (and 0 returned) when the
	 * node belongs to no group of this driver. Release the string with
	 * release_string. */
	int (*node_group_for_node)(void *state, const char *node_json, char **group_id,
				   prd_cloud_error *err);

	/* Instances of a group. Release with release_instances. */
	int (*instances)(void *state, const char *group_id, prd_cloud_instance **instances,
			 size_t *count, prd_cloud_error *err);
	void (*release_instances)(void *state, prd_cloud_instance *instances, size_t count);

	/* What a new node of the group looks like: a Kubernetes Node as JSON
	 * (labels, taints, status.capacity and status.allocatable). Release
	 * with release_string. */
	int (*template_node)(void *state, const char *group_id, char **node_json,
			     prd_cloud_error *err);

	/* Grow the group by delta > 0 nodes. May create fewer: instances()
	 * then reports the missing ones with their error. */
	int (*increase_size)(void *state, const char *group_id, int32_t delta,
			     prd_cloud_error *err);
	/* Optional (NULL if absent). All delta nodes or none. */
	int (*atomic_increase_size)(void *state, const char *group_id, int32_t delta,
				    prd_cloud_error *err);
	/* Delete these nodes (by Node name) from the group and lower its
	 * target size accordingly. */
	int (*delete_nodes)(void *state, const char *group_id, const char *const *node_names,
			    size_t count, prd_cloud_error *err);
	/* Lower the target size by delta > 0 without deleting existing
	 * instances (cancels requested instances not yet created). Refused
	 * with PRD_CLOUD_ERANGE when the target would fall below the number of
	 * instances that exist and are not being deleted. */
	int (*decrease_target_size)(void *state, const char *group_id, int32_t delta,
				    prd_cloud_error *err);

	void (*release_string)(void *state, char *s);

	/* Optional: extra provisioning class names this driver serves (a
	 * NULL-terminated list owned by the driver, valid until fini) and the
	 * function that serves them. `request_json` is the ProvisioningRequest,
	 * `templates_json` a JSON array of its PodTemplates. The driver fills
	 * the outcome; the host writes conditions from it. */
	const char *const *(*provisioning_classes)(void *state);
	int (*provision)(void *state, const char *class_name, const char *request_json,
			 const char *templates_json, struct prd_cloud_outcome *outcome,
			 prd_cloud_error *err);

	/* ---- appended in ABI 1.1 ---- */

	/* Delete these instances (by prd_cloud_instance.id) from the group,
	 * whether or not their Node has registered yet, and lower the target
	 * size by `count`. Deleting an instance that is already being deleted
	 * or is gone is not an error. Optional (NULL if absent): the host then
	 * deletes only instances with a node name, through delete_nodes. */
	int (*delete_instances)(void *state, const char *group_id, const char *const *instance_ids,
				size_t count, prd_cloud_error *err);

	/* ---- appended in ABI 1.2 ---- */

	/* Dynamic Resource Allocation: the ResourceSlices (resource.k8s.io/v1
	 * objects, as a JSON array) a new node of the group will publish, so
	 * that pods claiming devices can be planned onto new nodes.
	 * spec.nodeName is ignored (each slice is the new node's);
	 * spec.driver, spec.pool.name and spec.devices are read. *slices_json
	 * is NULL, or "[]", when the group's nodes publish none. Optional (NULL
	 * if absent, or a driver built for ABI < 1.2): the group's nodes are
	 * then planned without devices. Release with release_string. */
	int (*template_resource_slices)(void *state, const char *group_id, char **slices_json,
					prd_cloud_error *err);
	/* Optional (NULL if absent). What the host's Node cache holds, so a
	 * driver that reads Nodes need not list them on every refresh. Called
	 * right before refresh, only by a host that watches Nodes: the first
	 * call, and any after which the host lost track of changes (or this
	 * function failed), has `full` set and gives every Node; later calls
	 * give only the Nodes added, changed or deleted (present = 0) since
	 * the previous call, possibly none. The cache trails the apiserver: a
	 * Node the driver itself just created or deleted may appear or vanish
	 * a few calls later. */
	int (*nodes_changed)(void *state, const prd_cloud_node *nodes, size_t count, int full,
			     prd_cloud_error *err);

	/* ---- appended in ABI 1.3 ---- */

	/* sizeof(prd_cloud_instance) as the driver was built: the stride of
	 * the arrays instances() returns. */
	uint32_t instance_size;
	/* PRD_CLOUD_CAP_* bits. */
	uint64_t capabilities;
	/* Optional (NULL if absent: the host uses increase_size and
	 * atomic_increase_size). Grow a group as `req` says. */
	int (*increase)(void *state, const prd_cloud_increase *req, prd_cloud_error *err);
	/* Optional. decrease_target_size, applied only when the group's target
	 * is `expected_target` when the cloud applies it (else
	 * PRD_CLOUD_ECONFLICT, nothing changed). */
	int (*decrease_target_size_if)(void *state, const char *group_id, int32_t delta,
				       int32_t expected_target, prd_cloud_error *err);

	/* ---- appended in ABI 1.4 (all three required with
	 * PRD_CLOUD_CAP_FENCE, else optional) ---- */

	/* Record on the group that term `term` of the leader election `key`
	 * has begun, so that any call carrying a lower term of that key is
	 * refused from now on: a leader calls it for every group before it
	 * trusts what the group shows, which makes a stalled former leader's
	 * late call do nothing. Idempotent for the same term; refused with
	 * PRD_CLOUD_ECONFLICT when the group has recorded a higher term (the
	 * caller is no longer the leader). The record must be one a later
	 * call of any process checks atomically with its own change (the
	 * same object and version, say), not a note in this process. */
	/* ABI 1.6, for a driver that also has create_group: group_id NULL
	 * records the term for the driver's group creations (see
	 * prd_cloud_group_create.fence_term), the same way: a leader calls it
	 * once a term, so a stalled former leader's late creation does
	 * nothing, and the groups it would have made are never there to take
	 * its late increases. */
	int (*fence)(void *state, const char *group_id, const char *key, uint64_t term,
		     prd_cloud_error *err);
	/* decrease_target_size as `req` says (expected target, fencing
	 * token). */
	int (*decrease)(void *state, const prd_cloud_decrease *req, prd_cloud_error *err);
	/* delete_instances as `req` says, refused with PRD_CLOUD_ECONFLICT,
	 * deleting nothing, when the group has recorded a higher term for the
	 * key (checked atomically with the change, as for increase): a
	 * stalled former leader's late rollback must not delete what the new
	 * leader's plan carried on to success. */
	int (*delete_fenced)(void *state, const prd_cloud_delete *req, prd_cloud_error *err);

	/* ---- appended in ABI 1.5: node auto-provisioning (all five or
	 * none; NULL if absent) ---- */

	/* sizeof(prd_cloud_shape) as the driver was built: the stride of the
	 * arrays shapes() returns. */
	uint32_t shape_size;
	/* The machine shapes the cloud can launch. Release with
	 * release_shapes. */
	int (*shapes)(void *state, prd_cloud_shape **shapes, size_t *count, prd_cloud_error *err);
	void (*release_shapes)(void *state, prd_cloud_shape *shapes, size_t count);
	/* Create a node group as `req` says, with target size 0. The group
	 * is listed by node_groups() after the next refresh at the latest,
	 * and its state is kept where another process of the host finds it
	 * (the cloud, the API), never only in the driver's memory. */
	int (*create_group)(void *state, const prd_cloud_group_create *req, prd_cloud_error *err);
	/* Delete a group create_group made, only when it is empty (no
	 * instances, target 0): PRD_CLOUD_ERANGE, nothing done, when it is
	 * not; PRD_CLOUD_EINVAL for a group create_group did not make.
	 * Deleting a group that is gone is not an error. */
	int (*delete_group)(void *state, const char *group_id, prd_cloud_error *err);
	/* The owner token a group was created with (*owner, released with
	 * release_string), or *owner NULL for a group create_group did not
	 * make. PRD_CLOUD_ENOTFOUND for an unknown group. */
	int (*group_owner)(void *state, const char *group_id, char **owner, prd_cloud_error *err);

	/* ---- appended in ABI 1.7 (NULL if absent) ---- */

	/* The highest term recorded for `key` on the group (group_id NULL:
	 * on the driver's group creations, as fence(NULL, ...) records it),
	 * 0 when none; changes nothing. The host asks after fence() was
	 * refused: a leader whose election counts its terms from the start
	 * again (a recreated Lease) raises its own term above the recorded
	 * one and fences again, instead of standing fenced out for good. */
	int (*fence_recorded)(void *state, const char *group_id, const char *key, uint64_t *term,
			      prd_cloud_error *err);
} prd_cloud_driver;

/* The entry point every driver exports (defined by the driver):
 *
 *   const prd_cloud_driver *provreqd_cloud_driver(void);
 */
typedef const prd_cloud_driver *(*prd_cloud_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif

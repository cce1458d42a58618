/* Scheduling simulation: plain-C descriptions of nodes and pods, pod
 * request arithmetic and the cluster snapshot.
 *
 * Nothing here knows about the Kubernetes API client or JSON: callers
 * convert API objects into these structs (quantities already in base units:
 * cpu in millicores, memory / ephemeral-storage / hugepages in bytes, pods
 * and extended resources such as `nvidia.com/gpu` as counts).
 *
 * Ownership: every input struct (sched_node_spec, sched_pod_spec and what
 * they point to) is borrowed for the duration of the call only. The
 * snapshot deep-copies whatever it keeps, so callers may free their inputs
 * as soon as a call returns.
 *
 * Limits (bad input beyond them is PRD_EINVAL / PRD_ERANGE, never a crash):
 * SCHED_RES_MAX distinct resource names per snapshot, quantities in
 * [0, SCHED_QTY_MAX], podSet counts in [0, SCHED_COUNT_MAX], at most
 * SCHED_NODES_MAX nodes.
 *
 * Topology: the only topology keys understood by pod (anti-)affinity and
 * spread constraints are SCHED_KEY_HOSTNAME and SCHED_KEY_ZONE (others are
 * PRD_EUNSUPPORTED). The hostname domain of a node is the node itself (the
 * `kubernetes.io/hostname` label is unique per node in every real cluster);
 * the zone domain is the value of the node's `topology.kubernetes.io/zone`
 * label. */
#ifndef PRD_SCHED_SCHED_H
#define PRD_SCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/quantity.h"
#include "util/err.h"

#define SCHED_RES_MAX 16
#define SCHED_QTY_MAX ((int64_t)1 << 50)
#define SCHED_COUNT_MAX ((int64_t)1 << 24)
#define SCHED_NODES_MAX ((size_t)1 << 22)

/* Resource ids fixed in every snapshot; extended resources follow. */
enum {
	SCHED_RES_CPU = 0,
	SCHED_RES_MEMORY = 1,
	SCHED_RES_EPHEMERAL = 2,
	SCHED_RES_PODS = 3,
	SCHED_RES_FIRST_EXTRA = 4
};

#define SCHED_KEY_HOSTNAME "kubernetes.io/hostname"
#define SCHED_KEY_ZONE "topology.kubernetes.io/zone"
#define SCHED_TAINT_UNSCHEDULABLE "node.kubernetes.io/unschedulable"

typedef struct sched_res {
	const char *name;   /* "cpu", "memory", "nvidia.com/gpu", ... */
	int64_t value;      /* base units, >= 0 */
} sched_res;

typedef struct sched_label {
	const char *key;
	const char *value;
} sched_label;

typedef enum sched_effect {
	SCHED_EFFECT_NONE = 0,          /* "": on a toleration, every effect */
	SCHED_EFFECT_NO_SCHEDULE,
	SCHED_EFFECT_PREFER_NO_SCHEDULE,
	SCHED_EFFECT_NO_EXECUTE
} sched_effect;

typedef struct sched_taint {
	const char *key;
	const char *value;      /* may be NULL (= "") */
	sched_effect effect;    /* NONE is ignored by the filter, like kube-scheduler */
} sched_taint;

typedef enum sched_tol_op {
	SCHED_TOL_EQUAL = 0,    /* also the API's empty operator */
	SCHED_TOL_EXISTS
} sched_tol_op;

typedef struct sched_toleration {
	const char *key;        /* NULL or "" with EXISTS tolerates every taint */
	sched_tol_op op;
	const char *value;      /* NULL = "" */
	sched_effect effect;    /* NONE matches every effect */
} sched_toleration;

typedef enum sched_sel_op {
	SCHED_OP_IN = 0,
	SCHED_OP_NOT_IN,
	SCHED_OP_EXISTS,
	SCHED_OP_DOES_NOT_EXIST,
	SCHED_OP_GT,            /* node selectors only */
	SCHED_OP_LT             /* node selectors only */
} sched_sel_op;

typedef struct sched_requirement {
	const char *key;
	sched_sel_op op;
	const char *const *values;
	size_t n_values;
} sched_requirement;

/* metav1.LabelSelector: matchLabels AND matchExpressions. An empty selector
 * matches everything; a NULL selector pointer matches nothing. */
typedef struct sched_label_selector {
	const sched_label *match_labels;
	size_t n_match_labels;
	const sched_requirement *exprs;
	size_t n_exprs;
} sched_label_selector;

/* One nodeSelectorTerm: its expressions are AND'ed; a term without
 * expressions matches no node (as in Kubernetes). matchFields is not
 * supported. */
typedef struct sched_node_term {
	const sched_requirement *exprs;
	size_t n_exprs;
} sched_node_term;

/* A required pod (anti-)affinity term. Namespaces: the listed ones, or
 * every namespace when all_namespaces (the API's `namespaceSelector: {}`),
 * or the owning pod's namespace when neither is given. */
typedef struct sched_pod_term {
	const char *topology_key;             /* SCHED_KEY_HOSTNAME or SCHED_KEY_ZONE */
	const sched_label_selector *selector; /* NULL matches nothing */
	const char *const *namespaces;
	size_t n_namespaces;
	bool all_namespaces;
} sched_pod_term;

typedef enum sched_unsat {
	SCHED_DO_NOT_SCHEDULE = 0,
	SCHED_SCHEDULE_ANYWAY       /* a scoring hint only: ignored here */
} sched_unsat;

/* topologySpreadConstraint. Counts pods in the incoming pod's namespace.
 * Default policies: nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore. */
typedef struct sched_spread {
	const char *topology_key;
	int32_t max_skew;        /* >= 1 */
	int32_t min_domains;     /* 0 = unset, else >= 1 */
	sched_unsat when;
	const sched_label_selector *selector; /* NULL matches nothing */
	bool honor_taints;       /* nodeTaintsPolicy Honor (default Ignore) */
	bool ignore_affinity;    /* nodeAffinityPolicy Ignore (default Honor) */
} sched_spread;

typedef enum sched_proto {
	SCHED_PROTO_TCP = 0,
	SCHED_PROTO_UDP,
	SCHED_PROTO_SCTP
} sched_proto;

typedef struct sched_host_port {
	int32_t port;            /* 1..65535; 0 = no host port (ignored) */
	sched_proto proto;
	const char *host_ip;     /* NULL, "" or "0.0.0.0" = every address */
} sched_host_port;

/* ---- Dynamic Resource Allocation (resource.k8s.io/v1) ----------------- */

typedef enum sched_attr_type {
	SCHED_ATTR_INT = 0,
	SCHED_ATTR_BOOL,
	SCHED_ATTR_STRING,
	SCHED_ATTR_VERSION      /* semver text; the CEL subset cannot compare it */
} sched_attr_type;

/* A device attribute. `name` is qualified ("domain/id"): an unqualified
 * name from a ResourceSlice gets the driver's name as its domain. */
typedef struct sched_dev_attr {
	const char *name;
	sched_attr_type type;
	int64_t i;
	bool b;
	const char *s;          /* STRING and VERSION */
} sched_dev_attr;

typedef struct sched_dev_cap {
	const char *name;       /* qualified, like attributes */
	qty value;
} sched_dev_cap;

/* One device a node offers (from the ResourceSlices published for it). */
typedef struct sched_device {
	const char *driver;
	const char *pool;
	const char *name;
	const sched_dev_attr *attrs;
	size_t n_attrs;
	const sched_dev_cap *caps;
	size_t n_caps;
} sched_device;

struct sched_cel;

/* One device request of a pod (a ResourceClaim's `exactly` request, with
 * its DeviceClass's selectors first): `count` distinct devices of one node
 * for which every selector is true. A pod's requests (all its claims
 * together) never share a device. */
typedef struct sched_dev_request {
	const char *label;      /* "claim/request" for messages */
	const struct sched_cel *const *selectors;
	size_t n_selectors;
	int64_t count;          /* >= 1; ignored when all */
	bool all;               /* allocationMode All: every matching device, >= 1 */
} sched_dev_request;

#define SCHED_DEV_MAX 1024          /* devices per node */
#define SCHED_DEV_REQ_MAX 32        /* device requests per pod */

typedef struct sched_node_spec {
	const char *name;
	const sched_label *labels;
	size_t n_labels;
	const sched_taint *taints;
	size_t n_taints;
	const sched_res *allocatable;  /* a node without "pods" accepts no pod */
	size_t n_allocatable;
	bool unschedulable;
	const sched_device *devices;   /* DRA devices, at most SCHED_DEV_MAX */
	size_t n_devices;
} sched_node_spec;

/* Everything scheduling needs from a pod (template). `requests` are the
 * pod's effective requests (see sched_pod_requests); the pod slot
 * ("pods": 1) is implied and must not be listed. */
typedef struct sched_pod_spec {
	const char *namespace;
	const sched_label *labels;
	size_t n_labels;
	const sched_res *requests;
	size_t n_requests;
	const char *node_name;                  /* NULL = any node */
	const sched_label *node_selector;
	size_t n_node_selector;
	const sched_node_term *affinity_terms;  /* required node affinity, OR'ed */
	size_t n_affinity_terms;
	bool has_node_affinity;                 /* true with zero terms matches nothing */
	const sched_toleration *tolerations;
	size_t n_tolerations;
	const sched_host_port *host_ports;
	size_t n_host_ports;
	const sched_pod_term *pod_affinity;
	size_t n_pod_affinity;
	const sched_pod_term *pod_anti_affinity;
	size_t n_pod_anti_affinity;
	const sched_spread *spread;
	size_t n_spread;
	/* DRA: devices each pod needs, from its ResourceClaimTemplates. */
	const sched_dev_request *dev_requests;
	size_t n_dev_requests;
	/* What the pods need that the simulation does not check, said with a
	 * positive answer ("PersistentVolumeClaim data"); NULL when nothing. */
	const char *caveat;
} sched_pod_spec;

/* ---- pod requests ---------------------------------------------------- */

typedef struct sched_container {
	const sched_res *requests;
	size_t n_requests;
	bool restartable;     /* init containers only: restartPolicy Always (sidecar) */
} sched_container;

/* Effective pod requests as Kubernetes computes them:
 *   max( sum(containers) + sum(sidecars),
 *        for each non-sidecar init container: its requests + sidecars
 *        started before it,
 *        for each sidecar: the sidecars started up to and including it )
 *   + overhead
 * per resource. Writes at most SCHED_RES_MAX entries into `out` (names are
 * borrowed from the inputs) and their number into *n_out; entries are in
 * order of first appearance. PRD_EINVAL on negative or oversized values or
 * NULL names, PRD_ERANGE when more than SCHED_RES_MAX names appear. */
int sched_pod_requests(const sched_container *containers, size_t n_containers,
		       const sched_container *init_containers, size_t n_init,
		       const sched_res *overhead, size_t n_overhead,
		       sched_res out[SCHED_RES_MAX], size_t *n_out, prd_err *e);

/* Check a pod spec for values the simulator refuses (negative or oversized
 * quantities, unknown operators or effects, malformed Gt/Lt values,
 * unsupported topology keys, maxSkew < 1, NULL where a string is needed). */
int sched_pod_validate(const sched_pod_spec *pod, prd_err *e);

/* ---- snapshot -------------------------------------------------------- */

typedef struct sched_snapshot sched_snapshot;

/* New empty snapshot; NULL when out of memory. Free with
 * sched_snapshot_free(). */
sched_snapshot *sched_snapshot_new(void);
void sched_snapshot_free(sched_snapshot *s);

/* Add a node; its index (dense, in insertion order, which is also the order
 * first-fit placement visits nodes) goes to *idx when idx is not NULL.
 * PRD_EEXIST for a duplicate name, PRD_ERANGE beyond the limits. */
int sched_snapshot_add_node(sched_snapshot *s, const sched_node_spec *node,
			    size_t *idx, prd_err *e);
/* Room for n nodes in all (a builder that knows how many are coming: the
 * node array otherwise doubles, and a snapshot kept between passes kept
 * up to half of it unused). PRD_ENOMEM, or 0. */
int sched_snapshot_reserve_nodes(sched_snapshot *s, size_t n);
/* Entries the pods take: identical pods (a workload's) make one entry per
 * node they run on when added to it one after another, else one each. */
size_t sched_snapshot_pod_entries(const sched_snapshot *s);
size_t sched_snapshot_node_count(const sched_snapshot *s);
/* Borrowed; valid until the node is reverted away or the snapshot freed. */
const char *sched_snapshot_node_name(const sched_snapshot *s, size_t idx);
int sched_snapshot_find_node(const sched_snapshot *s, const char *name, size_t *idx);
/* The value of label `key` on node idx (borrowed like the name), or NULL. */
const char *sched_snapshot_node_label(const sched_snapshot *s, size_t idx, const char *key);

/* Bind `count` identical pods to node `idx` (running pods or pods the
 * scheduler already placed). Uses the pod's namespace, labels, requests,
 * host ports and required anti-affinity terms (existing pods' anti-affinity
 * is honoured symmetrically). Pods may overcommit a node: the simulator
 * records what is there. */
int sched_snapshot_add_pods(sched_snapshot *s, size_t idx, const sched_pod_spec *pod,
			    int64_t count, prd_err *e);

/* Hold capacity on a node for a request uid (a Provisioned request whose
 * pods have not arrived yet). Several bookings per uid are allowed. */
int sched_snapshot_book(sched_snapshot *s, const char *uid, size_t idx,
			const sched_res *res, size_t n_res, prd_err *e);
/* Which nodes hold a booking now: mask[idx] = 1 for each node idx < n that
 * some active booking holds room on, else 0. */
void sched_snapshot_booked_mask(const sched_snapshot *s, uint8_t *mask, size_t n);
/* Release every booking of `uid`; *released (optional) gets how many. */
int sched_snapshot_unbook(sched_snapshot *s, const char *uid, size_t *released);

/* DRA. A device is named "driver/pool/device".
 *
 * Mark a device of node idx as allocated (a ResourceClaim's allocation
 * result): no simulated pod or booking gets it. PRD_ENOTFOUND when the
 * node publishes no such device. */
int sched_snapshot_take_device(sched_snapshot *s, size_t idx, const char *id, prd_err *e);
/* Book the listed devices of node idx for uid (a recorded booking): those
 * still free are held until unbooked; *missing (optional) counts the rest
 * (gone, or taken by a claim meanwhile). */
int sched_snapshot_book_devices(sched_snapshot *s, const char *uid, size_t idx,
				const char *const *ids, size_t n, size_t *missing, prd_err *e);
/* Book for uid the devices `count` pods like `pod` would be allocated on
 * node idx now (a booking rebuilt from pod counts); *booked (optional)
 * gets for how many pods devices were found. */
int sched_snapshot_book_pod_devices(sched_snapshot *s, const char *uid, size_t idx,
				    const sched_pod_spec *pod, int64_t count, int64_t *booked,
				    prd_err *e);
/* Devices on node idx, and (optional) how many of them are free. */
size_t sched_snapshot_node_devices(const sched_snapshot *s, size_t idx, size_t *free_out);

/* Free (allocatable - used - booked, floored at 0) of resource `name` on
 * node `idx`; a resource the snapshot has never seen is 0. */
int sched_snapshot_node_free(const sched_snapshot *s, size_t idx, const char *name,
			     int64_t *out);

/* Fork / commit / revert. Every change made after a fork (nodes, pods,
 * bookings, placements) is recorded in an undo log; revert undoes back to
 * the matching fork, commit keeps the changes (a nested commit hands them
 * to the enclosing fork, which can still revert them). Forks nest up to
 * SCHED_FORK_MAX deep. Commit/revert without a fork: PRD_EINVAL. */
#define SCHED_FORK_MAX 8
int sched_snapshot_fork(sched_snapshot *s);
int sched_snapshot_commit(sched_snapshot *s);
int sched_snapshot_revert(sched_snapshot *s);
int sched_snapshot_depth(const sched_snapshot *s);

#endif

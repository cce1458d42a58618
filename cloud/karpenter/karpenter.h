/* The karpenter node-group driver: each Karpenter NodePool, narrowed to one
 * launchable shape from the driver's shape table, is a node group; an
 * increase creates NodeClaims from the NodePool's template with the shape's
 * requirements pinned, which Karpenter then launches (see docs/drivers.md,
 * "The karpenter driver").
 *
 * Internal header shared by the driver's files; only provreqd_cloud_driver
 * is exported from the module. */
#ifndef PRD_CLOUD_KARPENTER_H
#define PRD_CLOUD_KARPENTER_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/drv_util.h"
#include "provreqd/cloud.h"

#define KARP_API "/apis/karpenter.sh/v1"
#define KARP_POOL_LABEL "karpenter.sh/nodepool"
#define KARP_CT_LABEL "karpenter.sh/capacity-type"
#define KARP_IT_LABEL "node.kubernetes.io/instance-type"
#define KARP_ZONE_LABEL "topology.kubernetes.io/zone"
#define KARP_DND "karpenter.sh/do-not-disrupt"
#define KARP_HASH "karpenter.sh/nodepool-hash"
#define KARP_HASH_VERSION "karpenter.sh/nodepool-hash-version"
/* The owner token of the increase that made a NodeClaim. */
#define KARP_OWNER_LABEL "provreqd.io/owner"
/* Set beside do-not-disrupt when this driver put that mark there, so it
 * only ever lifts its own marks. */
#define KARP_HOLD_ANN "provreqd.io/do-not-disrupt-held"

/* One entry of the shape table (config `shapes`). */
typedef struct karp_shape {
	char *instance_type;
	char *zone;            /* NULL: Karpenter picks */
	char *capacity_type;   /* NULL: Karpenter picks */
	json_object *labels;   /* further labels its Nodes carry, or NULL */
	json_object *capacity; /* resource -> quantity, or NULL: learnt from Nodes */
	json_object *allocatable; /* NULL: the capacity */
	int32_t max_size;      /* -1: none beyond the NodePool's limits */
} karp_shape;

typedef struct karp_group {
	char *id;              /* "<nodepool>/<instance-type>/<zone|any>/<capacity-type|any>" */
	char *pool;
	const karp_shape *shape; /* borrowed from the config */
	json_object *np;       /* the NodePool as last listed (owned) */
	int32_t live;          /* its NodeClaims not being deleted */
	int32_t tombs;         /* failed NodeClaims it still reports */
	int32_t max;
	char limit[200];       /* what bounds max, for messages ("" = nothing) */
} karp_group;

/* A NodeClaim this process created, followed until its Node registers
 * (then Karpenter owns its fate and the entry goes) or it disappears first (a failed launch:
 * a tombstone reported as a failed instance until it is deleted). */
typedef struct karp_made {
	char *name, *group, *owner;
	int64_t created_ns;
	bool deleted_by_us;
	bool tomb;             /* gone before registering */
	char reason[64];
	char message[300];
} karp_made;

typedef struct karp {
	const prd_cloud_host *host;
	karp_shape *shapes;
	size_t nshapes;
	char **pools;          /* config nodePools (NULL-terminated) or NULL: all */
	bool hold;             /* config doNotDisrupt (default true) */
	karp_group *groups;
	size_t ngroups;
	json_object *claims;   /* every NodeClaim as last listed (array, owned) */
	json_object *nodes;    /* Nodes of the shapes' instance types (array, owned) */
	karp_made *made;
	size_t nmade;
} karp;

#define karp_fail drv_fail
#define karp_log(k, ...) drv_log((k)->host, __VA_ARGS__)

/* karp_config.c: parse --cloud-config into k (shapes, nodePools,
 * doNotDisrupt). */
int karp_parse_config(karp *k, const char *config, prd_cloud_error *err);
void karp_shapes_free(karp_shape *v, size_t n);

/* karp_pool.c: NodePools into groups, and limits. */
/* Does the NodePool's template allow the shape? On false, *why says which
 * requirement refuses it. */
bool karp_pool_allows(json_object *np, const karp_shape *s, char *why, size_t n);
/* What a NodeClaim says of itself: its pool, instance type, zone and
 * capacity type (labels first, else single-valued In requirements). */
void karp_claim_shape(json_object *nc, const char **pool, const char **it, const char **zone, const char **ct);
/* Is NodeClaim nc one of group g's? */
bool karp_claim_in_group(json_object *nc, const karp_group *g);
bool karp_claim_deleting(json_object *nc);
/* Set g->max (and g->limit) from the NodePool's spec.limits, what its
 * NodeClaims (in `claims`) use, and the shape's max_size. */
void karp_group_limits(karp *k, karp_group *g, json_object *claims);
/* The capacity of the shape (config, else a Node of its instance type),
 * borrowed, or NULL when unknown. */
json_object *karp_shape_capacity(const karp *k, const karp_shape *s, bool allocatable);

/* karp_claims.c: NodeClaims. */
int karp_list_claims(karp *k, const char *pool, json_object **out, prd_cloud_error *err);
/* Follow what this process made against a fresh listing (pool NULL: all). */
void karp_made_update(karp *k, const char *pool, json_object *claims);
void karp_made_free(karp *k);
int karp_instances(karp *k, const karp_group *g, json_object *claims, prd_cloud_instance **out, size_t *count,
		   prd_cloud_error *err);
int karp_create_claims(karp *k, karp_group *g, int32_t delta, bool atomic, const char *owner,
		       prd_cloud_error *err);
int karp_delete_claims(karp *k, karp_group *g, const char *const *ids, size_t count, bool by_node,
		       prd_cloud_error *err);
/* Drop up to n tombstones of g; returns how many were dropped. */
int32_t karp_drop_tombs(karp *k, const karp_group *g, int32_t n);
int32_t karp_count_tombs(const karp *k, const char *group);

/* karp_hold.c: do-not-disrupt while a booking holds the capacity. */
void karp_hold_sweep(karp *k);

/* karp_template.c */
int karp_template_node(karp *k, const karp_group *g, char **node_json, prd_cloud_error *err);

#endif

/* The clusterapi node-group driver: Cluster API MachineDeployments,
 * MachineSets and MachinePools that carry the cluster-autoscaler min/max
 * size annotations are node groups, scaled through their scale
 * subresource (see docs/drivers.md, "The clusterapi driver").
 *
 * Internal header shared by the driver's files; only provreqd_cloud_driver
 * is exported from the module. */
#ifndef PRD_CLOUD_CLUSTERAPI_H
#define PRD_CLOUD_CLUSTERAPI_H

#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "kube/selector.h"
#include "common/drv_util.h"
#include "provreqd/cloud.h"

#define CAPI_GROUP "cluster.x-k8s.io"
#define CAPI_MIN_ANNOTATION "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
#define CAPI_MAX_ANNOTATION "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
#define CAPI_DELETE_ANNOTATION "cluster.x-k8s.io/delete-machine"
#define CAPI_NODE_MACHINE_ANNOTATION "cluster.x-k8s.io/machine"
#define CAPI_NODE_NAMESPACE_ANNOTATION "cluster.x-k8s.io/cluster-namespace"
#define CAPI_CAPACITY_PREFIX "capacity.cluster-autoscaler.kubernetes.io/"
#define CAPI_PENDING_PREFIX "clusterapi://"
#define CAPI_FENCE_PREFIX "provreqd.io/fence-"
/* The record an increase writes with its replicas (cp_increase_req):
 * "<owner token> <from>-><to>". */
#define CAPI_INCREASE_ANNOTATION "provreqd.io/increase"
/* A conditional write refused (409) for a change that is not the one it
 * is conditional on is tried again this many times in all. */
#define CAPI_WRITE_ATTEMPTS 3
/* Node auto-provisioning (capi_nap.c): the marks on a MachineDeployment
 * create_group made, and the record of the creations' fencing terms on
 * each template MachineDeployment. */
#define CAPI_NAP_OWNER_ANN "provreqd.io/auto-provisioned-by"
#define CAPI_NAP_SHAPE_ANN "provreqd.io/shape"
#define CAPI_NAP_ZONE_ANN "provreqd.io/zone"
#define CAPI_NAP_GROUP_LABEL "provreqd.io/auto-provisioned-group"
#define CAPI_CREATE_FENCE_PREFIX "creations.provreqd.io/fence-"
/* The mark on a Machine this driver proved a scale-up plan's (capi_claim.c):
 * the plan's owner token. */
#define CAPI_OWNER_LABEL "provreqd.io/owner"
#define CAPI_MAX_CLAIMS 16

typedef enum capi_kind { CAPI_MACHINE_DEPLOYMENT, CAPI_MACHINE_SET, CAPI_MACHINE_POOL, CAPI_KINDS } capi_kind;

typedef struct capi_group {
	char *id;              /* "<Kind>/<namespace>/<name>" */
	capi_kind kind;
	char *ns, *name;
	int32_t min, max, replicas;
	/* A write of replicas failed without a refusal (a timeout, a lost
	 * answer): it may have taken effect, so `replicas` is read again
	 * before it is reported. */
	bool replicas_unsure;
	json_object *obj;      /* the scalable resource as last listed (owned) */
	sel *machines;         /* selects the group's Machines (owned) */
} capi_group;

typedef struct capi_mgmt capi_mgmt;
typedef struct capi_nap capi_nap;
typedef struct capi_claim capi_claim;

typedef struct capi {
	const prd_cloud_host *host;
	/* Where Cluster API objects are read and written: `host` itself, or
	 * the management cluster's client (capi_mgmt.c). Nodes always go
	 * through `host` (the workload cluster provreqd runs against). */
	const prd_cloud_host *api;
	capi_mgmt *mgmt;       /* NULL: no separate management cluster */
	bool watch;            /* config `watch` (default true): capi_watch.c */
	struct capi_coll *colls; /* watched collections (capi_watch.c) */
	json_object *disco;    /* API group -> "group/version" from discovery, kept while watching */
	/* Groups this driver scaled, and the resourceVersion each write
	 * replaced: until the watch delivers a newer version of the object,
	 * refresh reads the apiserver (the cache would show the old size). */
	struct capi_written {
		char key[400];  /* "<plural>/<ns>/<name>" */
		char rv[64];
	} written[16];
	size_t nwritten;
	char *ns;              /* config `namespace`: only this one, or NULL */
	char *cluster;         /* config `clusterName`: only this cluster, or NULL */
	char *version;         /* config `version`, default v1beta1 */
	capi_group *groups;
	size_t ngroups;
	capi_nap *nap;         /* config `autoProvisioning`, or NULL (capi_nap.c) */
	capi_claim **claims;   /* increases whose Machines are still to be marked (capi_claim.c) */
	size_t nclaims;
} capi;

/* capi_util.c */
/* Errors, logging, strings, JSON and API helpers: the drivers' shared
 * ones (cloud/common/drv_util.h), bound to this driver's host. */
#define capi_fail drv_fail
#define capi_log(c, ...) drv_log((c)->host, __VA_ARGS__)
#define capi_strdup drv_strdup
#define capi_jstr drv_jstr
#define capi_jobj drv_jobj
/* Cluster API objects: the management cluster. */
#define capi_request(c, ...) drv_request((c)->api, __VA_ARGS__)
#define capi_list(c, ...) drv_list((c)->api, __VA_ARGS__)
/* Nodes: the workload cluster (provreqd's own). */
#define capi_wrequest(c, ...) drv_request((c)->host, __VA_ARGS__)
#define capi_query_escape drv_query_escape
const char *capi_kind_name(capi_kind k);
const char *capi_kind_plural(capi_kind k);
/* "/apis/cluster.x-k8s.io/<version>[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]" */
void capi_path(const capi *c, char *out, size_t n, const char *plural, const char *ns, const char *name,
	       const char *sub);

/* Whether Machine m failed, and how: v1beta1's status.failureReason /
 * failureMessage (also under v1beta2's status.deprecated.v1beta1), else a
 * v1beta2 InfrastructureReady or BootstrapConfigReady condition that is
 * False with a reason that is not "under way" (NotReady, WaitingFor...,
 * ...Provisioning...). Returns the prd_cloud_error_class (NONE: not failed;
 * OUT_OF_RESOURCES for a condition's capacity/stockout/quota reason; the
 * v1beta1 fields are always OTHER); *code and
 * *message point into m. A Machine being deleted has not failed (its
 * conditions then describe its teardown). */
int capi_machine_failure(json_object *m, const char **code, const char **message);

/* clusterapi.c: the group list. capi_find_group: the group with that id
 * or NULL. capi_group_of: the node group a listed object is (its
 * annotations judged as a listing does; PRD_CLOUD_ENOTFOUND when it is
 * none); clear it with capi_group_clear. capi_groups_put takes g over
 * into c->groups (replacing a group of the same id); capi_groups_drop
 * forgets one. */
capi_group *capi_find_group(capi *c, const char *id);
int capi_group_of(capi *c, capi_kind kind, json_object *obj, capi_group *g, prd_cloud_error *err);
void capi_group_clear(capi_group *g);
int capi_groups_put(capi *c, capi_group *g, prd_cloud_error *err);
void capi_groups_drop(capi *c, const char *id);

/* capi_nap.c: node auto-provisioning (ABI 1.5/1.6) from template
 * MachineDeployments (see docs/drivers.md). capi_nap_config parses the
 * `autoProvisioning` value; capi_nap_is_ours says whether a listed object
 * is a MachineDeployment create_group made (its group id is then its
 * name); capi_nap_watch_behind whether the watched MachineDeployments
 * `items` do not show a creation or deletion of this driver yet (read the
 * apiserver instead). */
int capi_nap_config(capi *c, json_object *v, prd_cloud_error *err);
/* After every key: a template named without namespace needs `namespace`. */
int capi_nap_check(capi *c, prd_cloud_error *err);
void capi_nap_free(capi *c);
bool capi_nap_is_ours(json_object *obj);
bool capi_nap_watch_behind(capi *c, json_object *items);
int capi_nap_shapes(void *state, prd_cloud_shape **out, size_t *count, prd_cloud_error *err);
void capi_nap_release_shapes(void *state, prd_cloud_shape *v, size_t count);
int capi_nap_create(void *state, const prd_cloud_group_create *req, prd_cloud_error *err);
int capi_nap_delete(void *state, const char *group_id, prd_cloud_error *err);
int capi_nap_owner(void *state, const char *group_id, char **owner, prd_cloud_error *err);
/* fence() with no group (ABI 1.6): the term for the creations, recorded
 * on every template MachineDeployment. */
int capi_nap_fence(capi *c, const char *key, uint64_t term, prd_cloud_error *err);
/* The highest creation term recorded for key over the templates (0: none). */
int capi_nap_fence_recorded(capi *c, const char *key, uint64_t *term, prd_cloud_error *err);

/* capi_claim.c: marking the Machines of a plan's increase once they are
 * proven its own. capi_claim_baseline_ok: may an increase from `replicas`
 * be claimed, given the group's Machines listed before it (exactly that
 * many, none being deleted)? capi_claim_note records the claim after the
 * increase landed (replacing the group's earlier one); capi_claim_mark
 * marks, in the apiserver and in `machines` (a listing of the group's
 * Machines), those the claim proves the plan's, and drops the claim once it
 * is done or can prove no more. capi_machine_owner: a Machine's mark, or
 * NULL. */
bool capi_claim_baseline_ok(json_object *machines, int32_t replicas);
void capi_claim_note(capi *c, const capi_group *g, const char *token, int32_t from, int32_t delta,
		     json_object *machines);
void capi_claim_mark(capi *c, const capi_group *g, json_object *machines);
const char *capi_machine_owner(json_object *m);
void capi_claims_free(capi *c);

/* capi_mgmt.c: the management cluster. capi_mgmt_config takes one of the
 * config keys managementKubeconfig, managementContext,
 * managementInCluster; capi_mgmt_init (after every key) points c->api at
 * the management cluster when one is configured, else at c->host;
 * capi_mgmt_probe logs whether it can be reached; capi_mgmt_free undoes
 * all of it. */
int capi_mgmt_config(capi *c, const char *key, json_object *v, prd_cloud_error *err);
int capi_mgmt_init(capi *c, prd_cloud_error *err);
void capi_mgmt_probe(capi *c);
void capi_mgmt_free(capi *c);

/* The management cluster's client, connected if it can be; NULL without
 * a management cluster or when it cannot be used now. */
struct kube_client;
struct kube_client *capi_mgmt_client(capi *c);

/* capi_watch.c: watched collections of the management cluster. A
 * collection is (apiVersion gv, namespace ns or NULL for all, plural); it
 * starts on first use. capi_watch_list gives deep copies of its objects in
 * namespace only_ns (NULL: all) whose labels match `match` (NULL: all) as
 * a new array; capi_watch_get one object (a new reference). Both answer
 * PRD_CLOUD_EAGAIN when there is no watch or it is not in step (read the
 * apiserver instead) and PRD_CLOUD_ENOTFOUND when the kind is not served
 * (or, for get, the object is not there). */
typedef struct capi_coll capi_coll;
int capi_watch_list(capi *c, const char *gv, const char *ns, const char *plural, const char *only_ns,
		    const sel *match, json_object **items);
int capi_watch_get(capi *c, const char *gv, const char *ns, const char *plural, const char *obj_ns,
		   const char *name, json_object **obj);
void capi_watch_stats(capi *c, unsigned long *lists, unsigned long *events);
void capi_watch_free(capi *c);

/* capi_fence.c: fencing terms (ABI 1.4), recorded as the annotation
 * provreqd.io/fence-<key> on the group's object. */
typedef struct capi_view {
	int32_t replicas;      /* spec.replicas (0 when omitted) */
	char rv[64];           /* the object's resourceVersion */
	uint64_t term;         /* the term recorded for the key, 0 for none */
	char increased_by[64]; /* the owner token CAPI_INCREASE_ANNOTATION names, "" for none */
} capi_view;
/* EINVAL unless key is 1..63 of [A-Za-z0-9._-], alphanumeric at both ends. */
int capi_fence_check_key(const char *key, prd_cloud_error *err);
/* Read the group's object for a write carrying (key, term): ECONFLICT when
 * a higher term is recorded; a lower one is raised to `term` first
 * (conditional on the resourceVersion read; 409 is ECONFLICT). On success
 * v->rv is what the write must be conditional on. */
int capi_read_fenced(capi *c, const capi_group *g, const char *key, uint64_t term, capi_view *v,
		     prd_cloud_error *err);
/* The driver's fence(): record `term` unless a higher one is recorded
 * (ECONFLICT); idempotent; a 409 on the write reads once more. */
int capi_fence(capi *c, const capi_group *g, const char *key, uint64_t term, prd_cloud_error *err);
/* The same two under another annotation prefix (the creations' record,
 * CAPI_CREATE_FENCE_PREFIX), and the term obj records under it (0: none;
 * -1 when the value is not a term). */
int capi_read_fenced_with(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t term,
			  capi_view *v, prd_cloud_error *err);
int capi_fence_with(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t term,
		    prd_cloud_error *err);
/* capi_fence_with, and the object as the fence read it (its replicas are
 * the group's size as of the fence, the read the fence's write was
 * conditional on). */
int capi_fence_view(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t term, capi_view *v,
		    prd_cloud_error *err);
int capi_fence_recorded(json_object *obj, const char *prefix, const char *key, uint64_t *term);
/* Read the term recorded for key under prefix on the group's object (0:
 * none), changing nothing (ABI 1.7 fence_recorded). */
int capi_fence_read(capi *c, const capi_group *g, const char *prefix, const char *key, uint64_t *term,
		    prd_cloud_error *err);
/* Read the group's object (replicas, resourceVersion, the last increase's
 * owner token) without judging any term. */
int capi_read_object(capi *c, const capi_group *g, capi_view *v, prd_cloud_error *err);
/* The annotation name of key's record under prefix (n >= 100). */
void capi_fence_annotation(const char *prefix, const char *key, char *out, size_t n);

/* capi_template.c: the template Node of a group, from the capacity
 * annotations (scale from zero) or from one of its Nodes. Caller frees
 * *node_json with free(). */
int capi_template_node(capi *c, const capi_group *g, char **node_json, prd_cloud_error *err);
/* The same from scale-from-zero data only (PRD_CLOUD_ENOTFOUND without):
 * the node of an auto-provisioning shape, which has no Node to copy. */
int capi_template_zero(capi *c, const capi_group *g, char **node_json, prd_cloud_error *err);
/* Machines of a group (as a new JSON array, caller puts): from the watch
 * when `live` is false and it is in step, else from the apiserver (what a
 * write is planned from). */
int capi_group_machines(capi *c, const capi_group *g, bool live, json_object **machines, prd_cloud_error *err);

/* Shared by clusterapi.c (groups, sizes), capi_machines.c and
 * capi_delete.c, said at their definitions. */
capi_group *capi__find_group(capi *c, const char *id);
int capi__no_group(prd_cloud_error *err, const char *id);
const char *capi__machine_node(json_object *m);
bool capi__machine_deleting(json_object *m);
void capi__machine_id(json_object *m, char *out, size_t n);
int capi__put_scale(capi *c, capi_group *g, int32_t replicas, const char *rv, prd_cloud_error *err);
int capi__put_replicas(capi *c, capi_group *g, int32_t replicas, const char *rv, const char *record,
		       prd_cloud_error *err);
int capi__read_for_write(capi *c, capi_group *g, const char *key, uint64_t term, int32_t *cur, char *rv,
			 size_t rvlen, prd_cloud_error *err);
int capi__cp_delete_nodes(void *state, const char *group_id, const char *const *names, size_t count,
			  prd_cloud_error *err);
int capi__cp_delete_instances(void *state, const char *group_id, const char *const *ids, size_t count,
			      prd_cloud_error *err);
int capi__cp_delete_fenced(void *state, const prd_cloud_delete *req, prd_cloud_error *err);
int capi__cp_instances(void *state, const char *group_id, prd_cloud_instance **out, size_t *count,
		       prd_cloud_error *err);
int capi__cp_node_group_for_node(void *state, const char *node_json, char **group_id, prd_cloud_error *err);
int capi__cp_template_node(void *state, const char *group_id, char **node_json, prd_cloud_error *err);

#endif

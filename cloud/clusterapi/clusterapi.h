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

typedef enum capi_kind { CAPI_MACHINE_DEPLOYMENT, CAPI_MACHINE_SET, CAPI_MACHINE_POOL, CAPI_KINDS } capi_kind;

typedef struct capi_group {
	char *id;              /* "<Kind>/<namespace>/<name>" */
	capi_kind kind;
	char *ns, *name;
	int32_t min, max, replicas;
	json_object *obj;      /* the scalable resource as last listed (owned) */
	sel *machines;         /* selects the group's Machines (owned) */
} capi_group;

typedef struct capi {
	const prd_cloud_host *host;
	char *ns;              /* config `namespace`: only this one, or NULL */
	char *cluster;         /* config `clusterName`: only this cluster, or NULL */
	char *version;         /* config `version`, default v1beta1 */
	capi_group *groups;
	size_t ngroups;
} capi;

/* capi_util.c */
/* Errors, logging, strings, JSON and API helpers: the drivers' shared
 * ones (cloud/common/drv_util.h), bound to this driver's host. */
#define capi_fail drv_fail
#define capi_log(c, ...) drv_log((c)->host, __VA_ARGS__)
#define capi_strdup drv_strdup
#define capi_jstr drv_jstr
#define capi_jobj drv_jobj
#define capi_request(c, ...) drv_request((c)->host, __VA_ARGS__)
#define capi_list(c, ...) drv_list((c)->host, __VA_ARGS__)
#define capi_query_escape drv_query_escape
const char *capi_kind_name(capi_kind k);
const char *capi_kind_plural(capi_kind k);
/* "/apis/cluster.x-k8s.io/<version>[/namespaces/<ns>]/<plural>[/<name>[/<sub>]]" */
void capi_path(const capi *c, char *out, size_t n, const char *plural, const char *ns, const char *name,
	       const char *sub);

/* capi_template.c: the template Node of a group, from the capacity
 * annotations (scale from zero) or from one of its Nodes. Caller frees
 * *node_json with free(). */
int capi_template_node(capi *c, const capi_group *g, char **node_json, prd_cloud_error *err);
/* Machines of a group (as a new JSON array, caller puts). */
int capi_group_machines(capi *c, const capi_group *g, json_object **machines, prd_cloud_error *err);

#endif

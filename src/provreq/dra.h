/* Dynamic Resource Allocation (resource.k8s.io/v1) for the simulation:
 * what the ResourceSlices say each node offers, which devices
 * ResourceClaims already hold, and a pod's device requests from its
 * ResourceClaimTemplates and their DeviceClasses.
 *
 * What is modelled (docs/user-guide.md, "Dynamic Resource Allocation"):
 *  - devices of ResourceSlices published for one node (spec.nodeName), of
 *    the newest generation of each pool; devices with taints or
 *    consumesCounters are left out (never offered), as are slices for
 *    several nodes (nodeSelector, allNodes, perDeviceNodeSelection);
 *  - a pod's spec.resourceClaims that name a resourceClaimTemplateName;
 *    each request `exactly` with allocationMode ExactCount (count) or All,
 *    the DeviceClass's selectors and the request's, in the CEL subset of
 *    src/sched/cel.h.
 * Refused, with a message naming the field (PRD_EUNSUPPORTED): a
 * resourceClaimName (a claim shared by the pods), firstAvailable,
 * adminAccess, consumable capacity requests, claim constraints, CEL
 * outside the subset. A ResourceClaimTemplate or DeviceClass that does not
 * exist is PRD_ENOTFOUND, naming it.
 *
 * Threads: built and read on the controller's worker thread only. */
#ifndef PRD_PROVREQ_DRA_H
#define PRD_PROVREQ_DRA_H

#include <json-c/json.h>

#include "kube/objects.h"
#include "sched/sched.h"
#include "util/arena.h"
#include "util/err.h"
#include "util/hmap.h"

typedef struct pr_dra_node {
	sched_device *devs;
	size_t n;
} pr_dra_node;

typedef struct pr_dra {
	bool served;              /* the four kinds were read (the cluster serves them) */
	hmap classes;             /* DeviceClass name → spec (owned copy) */
	hmap templates;           /* "ns/name" → ResourceClaimTemplate spec (owned copy) */
	hmap nodes;               /* node name → pr_dra_node* (arena) */
	hmap where;               /* "driver/pool/device" → node name (arena) */
	const char **taken;       /* "driver/pool/device" allocated by ResourceClaims (arena) */
	const char **taken_node;
	size_t ntaken;
	size_t skipped_slices;    /* slices for several nodes: not modelled */
	uint64_t fp;              /* devices and allocations, order-free */
} pr_dra;

void pr_dra_init(pr_dra *d);
void pr_dra_free(pr_dra *d);

/* Read the borrowed objects (kube_draobj of the four kinds, in any order
 * and mix) into d: ResourceSlices become per-node devices, ResourceClaims'
 * allocations the taken list, DeviceClasses and ResourceClaimTemplates
 * are copied for later lookups (only templates some `need` key "ns/name"
 * names, when need is not NULL). Sets d->served. Bad objects are logged
 * and skipped; errors are PRD_ENOMEM only. */
int pr_dra_load(pr_dra *d, arena *a, const kube_meta *const *objs, size_t n, const hmap *need,
		prd_err *err);

/* The devices published for a node (NULL and 0 when none). */
const sched_device *pr_dra_node_devices(const pr_dra *d, const char *node, size_t *n);

/* The devices a node group's template node `node` would publish, from
 * the ResourceSlice objects a driver declares for it (a JSON array;
 * spec.nodeName is ignored). *devs lives in the arena. */
int pr_dra_template_devices(arena *a, json_object *slices, const char *node, const sched_device **devs,
			    size_t *n, prd_err *err);

/* A pod spec's spec.resourceClaims → p->dev_requests (arena; compiled
 * selectors are freed with the arena). Nothing happens for a pod without
 * claims. d NULL or not served: claims are PRD_EUNSUPPORTED. */
int pr_dra_pod(const pr_dra *d, arena *a, json_object *spec, const char *ns, sched_pod_spec *p,
	       prd_err *err);

#endif

/* Kubernetes objects (JSON) → scheduling simulator structs (sched.h).
 *
 * Everything the results point to (arrays, strings) lives in the arena
 * given, or is borrowed from the JSON tree: keep both alive as long as the
 * sched structs are used. Quantities become base units: cpu in millicores
 * (rounded up, like MilliValue), everything else in whole units (rounded
 * up, like Value). Bad input (wrong JSON types, bad quantities, unknown
 * operators, negative numbers) is PRD_EINVAL with a message naming the
 * field; features the simulator cannot honour (matchFields, a non-empty
 * namespaceSelector, other topology keys) are PRD_EUNSUPPORTED.
 *
 * The conversions are split by what they convert: convert_pod.c (pods and
 * their terms: label selectors, tolerations, affinity, spread, containers),
 * convert_node.c (nodes, and the labels and taint effects pods share with
 * them) and convert_res.c (resource quantities and requests), with
 * convert_int.h as their internal header. */
#ifndef PRD_PROVREQ_CONVERT_H
#define PRD_PROVREQ_CONVERT_H

#include <json-c/json.h>

#include "sched/sched.h"
#include "util/arena.h"
#include "util/err.h"

/* A resource map ({"cpu": "500m", "memory": "1Gi"}) → sched_res array
 * (convert_res.c). */
int pr_conv_resources(arena *a, json_object *map, const char *field, sched_res **out, size_t *n,
		      prd_err *err);

/* A Pod's or PodTemplate's pod spec (`spec` / `template.spec`) and its
 * metadata (labels) in namespace `ns` → sched_pod_spec, with effective
 * requests (containers, sidecars, init containers, overhead; a limit
 * without a request counts as the request, as API defaulting does). */
int pr_conv_pod(arena *a, json_object *spec, json_object *metadata, const char *ns, sched_pod_spec *out,
		prd_err *err);

/* The same, with the pods' DRA claims (spec.resourceClaims) resolved
 * against `dra` (provreq/dra.h); pr_conv_pod refuses pods with claims. A
 * ResourceClaimTemplate or DeviceClass that does not exist is
 * PRD_ENOTFOUND with "ResourceClaimTemplate NAME" or "DeviceClass NAME" as
 * the message. */
struct pr_dra;
int pr_conv_pod_dra(arena *a, json_object *spec, json_object *metadata, const char *ns,
		    const struct pr_dra *dra, sched_pod_spec *out, prd_err *err);

/* A Node → sched_node_spec (name, labels, taints, status.allocatable,
 * spec.unschedulable). */
int pr_conv_node(arena *a, json_object *node, sched_node_spec *out, prd_err *err);

/* A metav1.LabelSelector → sched_label_selector; NULL json → *out NULL
 * (matches nothing). */
int pr_conv_label_selector(arena *a, json_object *sel, const char *field, sched_label_selector **out,
			   prd_err *err);

#include "kube/objects.h"

/* Decoded objects (kube/objects.h) → sched specs. Strings are borrowed from
 * the objects; arrays live in the arena. */
int pr_conv_kube_res(arena *a, const kube_res *res, size_t n, const char *field, sched_res **out, size_t *nout,
		     prd_err *err);
int pr_conv_kube_node(arena *a, const kube_node *n, sched_node_spec *out, prd_err *err);
/* A bound pod as the snapshot needs it: namespace, labels, requests, host
 * ports and required (anti-)affinity terms (from the pod's affinity JSON). */
int pr_conv_kube_pod(arena *a, const kube_pod *p, sched_pod_spec *out, prd_err *err);

#endif

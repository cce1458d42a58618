/* Internal header of the clusterapi driver's node auto-provisioning
 * (capi_nap.c: configuration, templates, shapes, the creations' fence;
 * capi_nap_group.c: creating and deleting MachineDeployments). */
#ifndef PRD_CLOUD_CAPI_NAP_H
#define PRD_CLOUD_CAPI_NAP_H

#include "clusterapi/clusterapi.h"

#define NAP_ID_MAX 40
#define NAP_ZONE_LABEL "topology.kubernetes.io/zone"
#define NAP_WAIT_MAX 16

struct capi_nap {
	char **names;          /* "[ns/]name" of each named template */
	size_t nnames;
	char *selector;        /* templateSelector, or NULL */
	int32_t max_size;
	bool taints;           /* machineTaints */
	/* The last creations' term fence(NULL) recorded, by key: a deletion
	 * refuses a group that has seen a newer term. */
	char fence_key[64];
	uint64_t fence_term;
	/* MachineDeployments this driver created (present) or deleted: until
	 * the watch shows it, listings read the apiserver. */
	struct {
		char key[300]; /* "<ns>/<name>" */
		bool present;
	} wait[NAP_WAIT_MAX];
	size_t nwait;
};

/* A group id the host may give: 1..40 of [a-z0-9-], a letter first. */
bool capi_nap_id_ok(const char *s);
json_object *capi_nap_annotations(json_object *obj);
/* Listings read the apiserver until the watch shows ns/name present (or
 * gone). */
void capi_nap_wait_for(capi *c, const char *ns, const char *name, bool present);
/* The template MachineDeployments, from the apiserver, as a new array
 * (caller puts); a created group is never one. */
int capi_nap_templates(capi *c, json_object **out, prd_cloud_error *err);
/* A group-like view of template o for the template and fence code: it
 * borrows o and its strings; free only g->id. */
int capi_nap_tmpl_view(json_object *o, capi_group *g, prd_cloud_error *err);
/* The shape of template o: its node (caller frees) and zone ("" none). */
int capi_nap_shape_of(capi *c, json_object *o, char **node_json, char *zone, size_t zlen, prd_cloud_error *err);

#endif

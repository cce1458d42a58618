/* kwok_nap.c: node auto-provisioning (ABI 1.5) for the kwok driver.
 *
 * The `autoProvisioning:` key of the configuration lists machine shapes;
 * create_group makes a node group of one, kept as a Node template in a
 * ConfigMap (`groupsConfigMap`), so that the groups survive a restart of
 * provreqd and every replica sees the same ones. Entry points for kwok.c. */
#ifndef PRD_CLOUD_KWOK_NAP_H
#define PRD_CLOUD_KWOK_NAP_H

#include "kwok/kwok_int.h"

/* Parse the `autoProvisioning:` value into k->nap. */
int kwok_nap_parse(kwok *k, json_object *v, prd_cloud_error *err);
void kwok_nap_free(kwok_nap *n);
/* Read the groups ConfigMap and make k->groups hold exactly its groups
 * beside the template groups (nothing to do without autoProvisioning).
 * Call only when nothing holds a pointer into k->groups. */
int kwok_nap_sync(kwok *k, prd_cloud_error *err);

/* The ABI 1.5 operations (see provreqd/cloud.h). */
int kwok_nap_shapes(void *state, prd_cloud_shape **out, size_t *count, prd_cloud_error *err);
void kwok_nap_release_shapes(void *state, prd_cloud_shape *v, size_t count);
int kwok_nap_create(void *state, const prd_cloud_group_create *req, prd_cloud_error *err);
int kwok_nap_delete(void *state, const char *group_id, prd_cloud_error *err);
int kwok_nap_owner(void *state, const char *group_id, char **owner, prd_cloud_error *err);

#endif

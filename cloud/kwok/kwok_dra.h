/* kwok_dra.c: the ResourceSlices (DRA) each group's nodes publish.
 *
 * Entry points for kwok.c; kwok_config.c calls kwok_slices_parse for the
 * `resourceSlices:` key and kwok_async.c kwok_slices_create for the Nodes
 * it registers. */
#ifndef PRD_CLOUD_KWOK_DRA_H
#define PRD_CLOUD_KWOK_DRA_H

#include "kwok/kwok_int.h"

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

#endif

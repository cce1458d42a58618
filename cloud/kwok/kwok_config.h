/* kwok_config.c: the --cloud-config text and the Node templates.
 *
 * Entry points for kwok.c (and for tests/unit/test_kwok_stamp.c). */
#ifndef PRD_CLOUD_KWOK_CONFIG_H
#define PRD_CLOUD_KWOK_CONFIG_H

#include "kwok/kwok_int.h"

int kwok_parse_config(kwok *k, const char *config, prd_cloud_error *err);
/* Read every template from the configured source into a new array
 * (caller frees with kwok_groups_free). */
int kwok_load_templates(kwok *k, kwok_group **groups, size_t *ngroups, prd_cloud_error *err);
/* The template directory's stamp: a digest of each template file's name,
 * size, inode, and modification and change times. *trust is false when a
 * file changed in the last 2 s before now_ns (the real time: file times
 * are; a file rewritten again within the file system's timestamp
 * granularity keeps its stamp). 0, or -1 when the directory cannot be
 * read. The file names are read again only when the directory itself
 * changed (k->tmpl_names). */
int kwok_templates_stamp(kwok *k, int64_t now_ns, uint64_t *stamp, bool *trust);
void kwok_dir_names_free(kwok_dir_names *d);
/* Faults naming a group must name one that exists. */
int kwok_check_fault_groups(const kwok *k, prd_cloud_error *err);
void kwok_groups_free(kwok_group *groups, size_t n);
/* Free what one group holds and zero it. */
void kwok_group_clear(kwok_group *g);
void kwok_faults_free(kwok_fault *faults, size_t n);
const char *kwok_op_name(int op);

#endif

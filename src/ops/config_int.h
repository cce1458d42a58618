/* Inside the configuration (config.c, config_limits.c): the checks of the
 * option table's limit rows, defined in config_limits.c. */
#ifndef PRD_OPS_CONFIG_INT_H
#define PRD_OPS_CONFIG_INT_H

#include "ops/config.h"
#include "util/buf.h"

int cfg__check_cores_total(const cfg *c, buf *why);
int cfg__check_memory_total(const cfg *c, buf *why);
int cfg__check_gpu_total(const cfg *c, buf *why);

#endif

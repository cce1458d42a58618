/* A cluster-wide limit on the total of one resource over every node
 * (--cores-total, --memory-total, --gpu-total): its own header so that
 * the controller and the class modules use it without the whole
 * configuration (ops/config.h fills it). */
#ifndef PRD_OPS_RESLIMIT_H
#define PRD_OPS_RESLIMIT_H

#include <stdint.h>

/* In the resource's base units (millicores, bytes, devices). */
typedef struct cfg_res_limit {
	char resource[254];
	char flag[16];                  /* the flag that set it, for messages */
	int64_t min, max;
} cfg_res_limit;

#endif

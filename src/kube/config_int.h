/* Internals shared by config.c and exec.c. */
#ifndef PRD_KUBE_CONFIG_INT_H
#define PRD_KUBE_CONFIG_INT_H

#include "kube/config.h"

/* The rotating-credential cache hung off every kube_config. */
struct kube_cred_cache *kube__cred_cache_new(void);
void kube__cred_cache_free(struct kube_cred_cache *c);

#endif

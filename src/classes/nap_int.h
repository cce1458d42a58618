/* Internals of node auto-provisioning, shared by nap.c (candidates and
 * the records of the groups plans create), nap_limits.c (cluster-wide
 * limits) and nap_sweep.c (deleting empty groups). */
#ifndef PRD_CLASSES_NAP_INT_H
#define PRD_CLASSES_NAP_INT_H

#include "classes/nap.h"

/* Shared by nap.c and nap_sweep.c (said at their definitions). */
int nap__put_record(state_db *db, const char *id, json_object *o, prd_err *e);
json_object *nap__record_get(state_db *db, const char *id);
const char *nap__jstr(json_object *o, const char *k);
int64_t nap__jint(json_object *o, const char *k);
bool nap__jbool(json_object *o, const char *k);

#endif

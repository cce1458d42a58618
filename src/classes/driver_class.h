/* Classes served by a cloud driver's own `provision` (see driver_class.c). */
#ifndef PRD_CLASSES_DRIVER_CLASS_H
#define PRD_CLASSES_DRIVER_CLASS_H

#include "classes/class.h"

/* A module for `class_name` served by `drv` (borrowed; outlives the
 * module). Each provision call is waited for at most timeout_ns (<= 0:
 * 10 s). Free with pr_driver_class_free. */
int pr_driver_class_new(cloud_driver *drv, const char *class_name, int64_t timeout_ns, pr_class_module **out,
			prd_err *err);
void pr_driver_class_free(pr_class_module *m);
/* Is this module a driver's class? */
bool pr_driver_class_is(const pr_class_module *m);

#endif

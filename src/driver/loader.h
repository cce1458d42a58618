/* Loading node-group drivers (.so files built against provreqd/cloud.h).
 *
 * A cloud_drivers set owns the loaded modules: it refuses bare names,
 * symbolic links, files (or their directories) that someone other than
 * root or provreqd's user could change, files without the entry symbol, ABI
 * mismatches (different major, newer minor, struct too small, required
 * functions missing), invalid and duplicate driver names — each with a
 * message that names the file and the reason. Functions here are called
 * from the controller's worker thread only. */
#ifndef PRD_DRIVER_LOADER_H
#define PRD_DRIVER_LOADER_H

#include <stdbool.h>
#include <stddef.h>

#include "provreqd/cloud.h"
#include "util/err.h"

typedef struct cloud_driver {
	char *path;
	void *handle;                 /* from dlopen */
	const prd_cloud_driver *api;  /* the driver's descriptor */
	void *state;                  /* from api->init, or NULL */
	const prd_cloud_host *host;   /* borrowed; outlives the driver */
} cloud_driver;

typedef struct cloud_drivers {
	cloud_driver **v;
	size_t n;
} cloud_drivers;

/* True when the driver's descriptor is large enough to hold `field`. */
#define CLOUD_DRIVER_HAS(api, field) \
	((api)->struct_size >= offsetof(prd_cloud_driver, field) + sizeof((api)->field))

/* The size of prd_cloud_instance in ABI 1.0-1.2 (before owner and
 * created_ns were appended). */
#define CLOUD_INSTANCE_SIZE_1_2 offsetof(prd_cloud_instance, owner)

/* The stride of the driver's instance arrays: its instance_size (the
 * loader refuses 0 from a descriptor that has the field; a driver table
 * made in process that leaves it 0 was built against this header), the
 * 1.2 size for older drivers. */
static inline size_t cloud_driver_instance_size(const prd_cloud_driver *api)
{
	if(!CLOUD_DRIVER_HAS(api, instance_size))
		return CLOUD_INSTANCE_SIZE_1_2;
	return api->instance_size ? api->instance_size : sizeof(prd_cloud_instance);
}

/* The i-th instance of an array the driver returned. Its owner and
 * created_ns may be read only when cloud_instance_has_origin(). */
static inline const prd_cloud_instance *cloud_instance_at(const prd_cloud_driver *api, const prd_cloud_instance *v,
							  size_t i)
{
	return (const prd_cloud_instance *)(const void *)((const char *)v + i * cloud_driver_instance_size(api));
}

static inline bool cloud_instance_has_origin(const prd_cloud_driver *api)
{
	return cloud_driver_instance_size(api) >= offsetof(prd_cloud_instance, created_ns) + sizeof(int64_t);
}

/* The driver's PRD_CLOUD_CAP_* bits (0 before ABI 1.3). */
static inline uint64_t cloud_driver_caps(const prd_cloud_driver *api)
{
	return CLOUD_DRIVER_HAS(api, capabilities) ? api->capabilities : 0;
}

/* ABI 1.5: does the driver auto-provision node groups (shapes,
 * create_group, delete_group and group_owner)? The loader refuses a
 * driver that sets only some of them. */
static inline bool cloud_driver_naps(const prd_cloud_driver *api)
{
	return CLOUD_DRIVER_HAS(api, group_owner) && api->shapes && api->release_shapes && api->create_group &&
	       api->delete_group && api->group_owner;
}

/* The i-th shape of an array shapes() returned (stride shape_size, or
 * this header's size when a driver table made in process leaves it 0). */
static inline const prd_cloud_shape *cloud_shape_at(const prd_cloud_driver *api, const prd_cloud_shape *v, size_t i)
{
	size_t stride = api->shape_size ? api->shape_size : sizeof(prd_cloud_shape);
	return (const prd_cloud_shape *)(const void *)((const char *)v + i * stride);
}

void cloud_drivers_init(cloud_drivers *set);
/* Call every driver's fini, dlclose them and free the set's memory. */
void cloud_drivers_free(cloud_drivers *set);

/* The checks the loader makes on a driver file before loading it, alone
 * (check-config): a path, not a bare name; not a symbolic link; a regular
 * file owned by root or provreqd's user, writable by neither group nor
 * others; its directory owned by such a user and not writable by group or
 * others unless sticky. 0 or a PRD_E* code with a message naming the file. */
int cloud_driver_check_file(const char *path, prd_err *err);

/* Test hook: when set, called between the checks on the opened file and
 * its load (a test swaps the file there; what loads is what was checked). */
extern void (*cloud_loader__between)(const char *path);

/* Load the driver at `path` (checked as cloud_driver_check_file says, then
 * loaded from the very file checked), check it, and call its init with `config`
 * (may be NULL). `host` is borrowed and must outlive the set. On success
 * the driver is added to the set and, if `out` is given, returned there
 * (owned by the set). */
int cloud_drivers_load(cloud_drivers *set, const char *path, const prd_cloud_host *host,
		       const char *config, cloud_driver **out, prd_err *err);

/* The loaded driver with this name, or NULL. */
cloud_driver *cloud_drivers_find(const cloud_drivers *set, const char *name);

/* Turn a driver's error into a prd_err message prefixed with the driver's
 * name and the operation. Returns a PRD_E* code. */
int cloud_driver_error(const cloud_driver *d, const char *op, int rc,
		       const prd_cloud_error *derr, prd_err *err);

#endif

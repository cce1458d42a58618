/* Deliberately broken drivers for the loader tests. One source, one
 * variant per build (see src/driver/local.am): each breaks the ABI in
 * exactly one way the loader must refuse. */
#include <provreqd/cloud.h>

#include <stdio.h>

static int ok_refresh(void *s, prd_cloud_error *e) { (void)s; (void)e; return 0; }
static int ok_groups(void *s, prd_cloud_node_group **g, size_t *n, prd_cloud_error *e)
{ (void)s; (void)e; *g = NULL; *n = 0; return 0; }
static void ok_release_groups(void *s, prd_cloud_node_group *g, size_t n) { (void)s; (void)g; (void)n; }
static int ok_instances(void *s, const char *g, prd_cloud_instance **i, size_t *n, prd_cloud_error *e)
{ (void)s; (void)g; (void)e; *i = NULL; *n = 0; return 0; }
static void ok_release_instances(void *s, prd_cloud_instance *i, size_t n) { (void)s; (void)i; (void)n; }
static int ok_template(void *s, const char *g, char **j, prd_cloud_error *e)
{ (void)s; (void)g; (void)j; (void)e; return PRD_CLOUD_ENOTFOUND; }
static int ok_resize(void *s, const char *g, int32_t d, prd_cloud_error *e)
{ (void)s; (void)g; (void)d; (void)e; return 0; }
#ifndef VARIANT_MISSINGFN
static int ok_delete(void *s, const char *g, const char *const *n, size_t c, prd_cloud_error *e)
{ (void)s; (void)g; (void)n; (void)c; (void)e; return 0; }
#endif
static void ok_release_string(void *s, char *p) { (void)s; (void)p; }

#ifdef VARIANT_NAPSOME
static int some_shapes(void *s, prd_cloud_shape **v, size_t *n, prd_cloud_error *e)
{ (void)s; (void)e; *v = NULL; *n = 0; return 0; }
static void some_release_shapes(void *s, prd_cloud_shape *v, size_t n) { (void)s; (void)v; (void)n; }
#endif

#ifdef VARIANT_INITFAIL
static int fail_init(const prd_cloud_host *h, const char *config, void **state, prd_cloud_error *e)
{
	(void)h;
	(void)state;
	e->code = PRD_CLOUD_EINVAL;
	snprintf(e->message, sizeof(e->message), "config says '%s', want 'zones=N'", config ? config : "");
	return PRD_CLOUD_EINVAL;
}
#endif

static const prd_cloud_driver descriptor = {
#ifdef VARIANT_BADMAJOR
	.abi_major = PRD_CLOUD_ABI_MAJOR + 1,
#else
	.abi_major = PRD_CLOUD_ABI_MAJOR,
#endif
#ifdef VARIANT_NEWMINOR
	.abi_minor = PRD_CLOUD_ABI_MINOR + 1,
#else
	.abi_minor = PRD_CLOUD_ABI_MINOR,
#endif
#ifdef VARIANT_SMALL
	.struct_size = 16,
#else
	.struct_size = sizeof(prd_cloud_driver),
#endif
#ifdef VARIANT_BADNAME
	.name = "Bad Name",
#else
	.name = "variant",
#endif
#ifdef VARIANT_INITFAIL
	.init = fail_init,
#endif
	.refresh = ok_refresh,
	.node_groups = ok_groups,
	.release_node_groups = ok_release_groups,
	/* No node_group_for_node: optional since ABI 1.1. */
	.instances = ok_instances,
	.release_instances = ok_release_instances,
	.template_node = ok_template,
	.increase_size = ok_resize,
#ifndef VARIANT_MISSINGFN
	.delete_nodes = ok_delete,
#endif
	.decrease_target_size = ok_resize,
	.release_string = ok_release_string,
	.instance_size = sizeof(prd_cloud_instance),
#ifdef VARIANT_FENCENOFN
	/* Claims fencing (ABI 1.4) without the entry points it needs. */
	.capabilities = PRD_CLOUD_CAP_FENCE,
#endif
#ifdef VARIANT_NAPSOME
	/* Lists shapes (ABI 1.5) but cannot create or delete a group. */
	.shape_size = sizeof(prd_cloud_shape),
	.shapes = some_shapes,
	.release_shapes = some_release_shapes,
#endif
};

#ifdef VARIANT_NOSYM
const prd_cloud_driver *not_the_entry_point(void);
const prd_cloud_driver *not_the_entry_point(void)
#else
const prd_cloud_driver *provreqd_cloud_driver(void);
const prd_cloud_driver *provreqd_cloud_driver(void)
#endif
{
	return &descriptor;
}

#include "testutil.h"
#include "driver/host.h"
#include "driver/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static cloud_host_impl host;

/* Path of a test driver module built by libtool. */
static const char *drv(const char *name)
{
	static char path[1024];
	const char *b = getenv("PRD_BUILDDIR");
	snprintf(path, sizeof(path), "%s/tests/drivers/.libs/drv_%s.so", b ? b : ".", name);
	return path;
}

/* Load expecting failure; return the message (static). */
static const char *load_fails(const char *path, const char *config, int want_rc)
{
	static prd_err e;
	cloud_drivers set;
	int rc;
	cloud_drivers_init(&set);
	prd_err_clear(&e);
	rc = cloud_drivers_load(&set, path, &host.host, config, NULL, &e);
	CU_ASSERT_EQUAL(rc, want_rc);
	CU_ASSERT_EQUAL(set.n, 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, path));
	cloud_drivers_free(&set);
	return e.msg;
}

static void test_rejections(void)
{
	const char *m;
	m = load_fails(drv("badmajor"), NULL, PRD_EUNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "ABI major version 2, provreqd speaks 1"));
	m = load_fails(drv("newminor"), NULL, PRD_EUNSUPPORTED);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "newer than provreqd's 1.7"));
	/* Half of node auto-provisioning: a controller would list shapes it
	 * can never create (or groups it can never delete). */
	m = load_fails(drv("napsome"), NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "node auto-provisioning needs all of shapes, release_shapes, create_group, "
					 "delete_group and group_owner"));
	m = load_fails(drv("fencenofn"), NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "claims PRD_CLOUD_CAP_FENCE without increase, fence, decrease and delete_fenced"));
	m = load_fails(drv("small"), NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "descriptor is 16 bytes"));
	m = load_fails(drv("badname"), NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "invalid driver name"));
	m = load_fails(drv("missingfn"), NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "required function delete_nodes is missing"));
	m = load_fails(drv("nosym"), NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "no entry symbol 'provreqd_cloud_driver'"));
	m = load_fails(drv("initfail"), "zones=x", PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "init: config says 'zones=x', want 'zones=N'"));
	m = load_fails("/nonexistent/driver.so", NULL, PRD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "No such file"));
	m = load_fails("/etc", NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "not a regular file"));
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	char b[8192];
	size_t n;
	CU_ASSERT_PTR_NOT_NULL_FATAL(in);
	CU_ASSERT_PTR_NOT_NULL_FATAL(out);
	while((n = fread(b, 1, sizeof(b), in)) > 0)
		CU_ASSERT_EQUAL(fwrite(b, 1, n, out), n);
	fclose(in);
	fclose(out);
	CU_ASSERT_EQUAL(chmod(to, mode), 0);
}

static void test_writable_and_garbage(void)
{
	char path[1024];
	const char *m;
	FILE *f;
	snprintf(path, sizeof(path), "%s/world.so", test_tmpdir());
	copy_file(drv("good"), path, 0666);
	m = load_fails(path, NULL, PRD_EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "writable by others"));
	snprintf(path, sizeof(path), "%s/group.so", test_tmpdir());
	copy_file(drv("good"), path, 0664);
	m = load_fails(path, NULL, PRD_EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "writable by its group"));
	/* Not an ELF file at all. */
	snprintf(path, sizeof(path), "%s/garbage.so", test_tmpdir());
	f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("this is not a shared object\n", f);
	fclose(f);
	chmod(path, 0644);
	m = load_fails(path, NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "cannot load"));
}

/* The swap the hook makes between the checks and the load: the checked
 * file's path now names another driver (through a symbolic link). */
static void swap_to_example(const char *path)
{
	CU_ASSERT_EQUAL(unlink(path), 0);
	CU_ASSERT_EQUAL(symlink(drv("example"), path), 0);
}

/* What is loaded is the file that was checked, and only a file nobody but
 * root or provreqd's user can change. Broken loaders caught: one that
 * checks a path and dlopens it again (the swap loads "example", and a
 * bare name is looked up on the library path, not where it was checked),
 * one that follows symbolic links, one that ignores the file's owner or
 * a directory anyone may write to. */
static void test_file_checks(void)
{
	char path[1100], dir[1024];
	const char *m;
	cloud_drivers set;
	cloud_driver *d = NULL;
	prd_err e;
	m = load_fails("drv_good.so", NULL, PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "give a path"));
	CU_ASSERT_EQUAL(cloud_driver_check_file("drv_good.so", &e), PRD_EINVAL);
	snprintf(path, sizeof(path), "%s/link.so", test_tmpdir());
	CU_ASSERT_EQUAL(symlink(drv("good"), path), 0);
	m = load_fails(path, NULL, PRD_EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "symbolic link"));
	/* Swapped between the checks and the load. */
	snprintf(path, sizeof(path), "%s/swap.so", test_tmpdir());
	copy_file(drv("good"), path, 0755);
	cloud_loader__between = swap_to_example;
	cloud_drivers_init(&set);
	CU_ASSERT_EQUAL(cloud_drivers_load(&set, path, &host.host, NULL, &d, &e), 0);
	cloud_loader__between = NULL;
	if(d)
		CU_ASSERT_STRING_EQUAL(d->api->name, "variant");
	cloud_drivers_free(&set);
	/* Two drivers loaded one after the other, the first still loaded:
	 * the second is the file asked for, not the module the dynamic
	 * linker knows by the first one's /proc/self/fd name. */
	cloud_drivers_init(&set);
	d = NULL;
	CU_ASSERT_EQUAL(cloud_drivers_load(&set, drv("good"), &host.host, NULL, &d, &e), 0);
	if(d)
		CU_ASSERT_STRING_EQUAL(d->api->name, "variant");
	d = NULL;
	CU_ASSERT_EQUAL(cloud_drivers_load(&set, drv("example"), &host.host, "small 0 3 1 4 16Gi 110\n", &d, &e), 0);
	if(d)
		CU_ASSERT_STRING_EQUAL(d->api->name, "example");
	CU_ASSERT_EQUAL(set.n, 2);
	cloud_drivers_free(&set);
	/* A directory others may write to (they could replace the file). */
	snprintf(dir, sizeof(dir), "%s/open", test_tmpdir());
	CU_ASSERT_EQUAL(mkdir(dir, 0700), 0);
	CU_ASSERT_EQUAL(chmod(dir, 0777), 0);
	snprintf(path, sizeof(path), "%s/drv.so", dir);
	copy_file(drv("good"), path, 0755);
	m = load_fails(path, NULL, PRD_EPERM);
	CU_ASSERT_PTR_NOT_NULL(strstr(m, "writable by others"));
	CU_ASSERT_EQUAL(cloud_driver_check_file(path, &e), PRD_EPERM);
	/* ... unless sticky: then only the file's owner may replace it. */
	CU_ASSERT_EQUAL(chmod(dir, 01777), 0);
	CU_ASSERT_EQUAL(cloud_driver_check_file(path, &e), 0);
	/* A file owned by another user (only root can make one here). */
	if(geteuid() == 0) {
		snprintf(path, sizeof(path), "%s/other.so", test_tmpdir());
		copy_file(drv("good"), path, 0755);
		CU_ASSERT_EQUAL(chown(path, 4242, 4242), 0);
		m = load_fails(path, NULL, PRD_EPERM);
		CU_ASSERT_PTR_NOT_NULL(strstr(m, "owned by uid 4242"));
	}
}

static void test_good_and_duplicate(void)
{
	cloud_drivers set;
	cloud_driver *d = NULL;
	char copy[1024];
	prd_err e;
	cloud_drivers_init(&set);
	CU_ASSERT_EQUAL_FATAL(cloud_drivers_load(&set, drv("good"), &host.host, NULL, &d, &e), 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_STRING_EQUAL(d->api->name, "variant");
	CU_ASSERT_PTR_NULL(d->api->node_group_for_node); /* optional since ABI 1.1 */
	CU_ASSERT_PTR_EQUAL(cloud_drivers_find(&set, "variant"), d);
	CU_ASSERT_PTR_NULL(cloud_drivers_find(&set, "other"));
	CU_ASSERT_PTR_NULL(d->api->atomic_increase_size);
	CU_ASSERT_TRUE(CLOUD_DRIVER_HAS(d->api, provision));
	/* Same name from another file is refused, naming both files. */
	snprintf(copy, sizeof(copy), "%s/again.so", test_tmpdir());
	copy_file(drv("good"), copy, 0755);
	prd_err_clear(&e);
	CU_ASSERT_EQUAL(cloud_drivers_load(&set, copy, &host.host, NULL, NULL, &e), PRD_EEXIST);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "a driver named 'variant' is already loaded from"));
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, drv("good")));
	CU_ASSERT_EQUAL(set.n, 1);
	cloud_drivers_free(&set);
	CU_ASSERT_EQUAL(set.n, 0);
}

/* The worked example from docs/examples: load it and drive every call. */
static void test_example_driver(void)
{
	cloud_drivers set;
	cloud_driver *d = NULL;
	const prd_cloud_driver *a;
	prd_cloud_node_group *g = NULL;
	prd_cloud_instance *inst = NULL;
	prd_cloud_error de;
	size_t n = 0, ni = 0;
	char *json = NULL, *gid = NULL;
	const char *del[1];
	prd_err e;
	const char *cfg = "# id min max target cpu memory pods\nsmall 0 3 1 4 16Gi 110\ngpu 0 2 0 8 64Gi 110\n";

	cloud_drivers_init(&set);
	CU_ASSERT_EQUAL_FATAL(cloud_drivers_load(&set, drv("example"), &host.host, cfg, &d, &e), 0);
	a = d->api;
	CU_ASSERT_STRING_EQUAL(a->name, "example");
	CU_ASSERT_EQUAL(a->refresh(d->state, &de), 0);
	CU_ASSERT_EQUAL_FATAL(a->node_groups(d->state, &g, &n, &de), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(g[0].id, "small");
	CU_ASSERT_EQUAL(g[0].max_size, 3);
	CU_ASSERT_EQUAL(g[0].target_size, 1);
	a->release_node_groups(d->state, g, n);

	CU_ASSERT_EQUAL(a->template_node(d->state, "gpu", &json, &de), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"memory\":\"64Gi\""));
	a->release_string(d->state, json);
	CU_ASSERT_EQUAL(a->template_node(d->state, "nope", &json, &de), PRD_CLOUD_ENOTFOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(de.message, "no node group nope"));

	CU_ASSERT_EQUAL(a->increase_size(d->state, "small", 2, &de), 0);
	CU_ASSERT_EQUAL(a->atomic_increase_size(d->state, "small", 1, &de), PRD_CLOUD_ERANGE);
	CU_ASSERT_EQUAL(a->increase_size(d->state, "small", 0, &de), PRD_CLOUD_EINVAL);
	CU_ASSERT_EQUAL_FATAL(a->instances(d->state, "small", &inst, &ni, &de), 0);
	CU_ASSERT_EQUAL(ni, 3);
	CU_ASSERT_EQUAL(inst[0].state, PRD_CLOUD_INSTANCE_RUNNING);
	CU_ASSERT_STRING_EQUAL(inst[1].node_name, "small-1");
	CU_ASSERT_EQUAL(a->node_group_for_node(d->state, "{\"spec\":{\"providerID\":\"example://small-2\"}}", &gid, &de), 0);
	CU_ASSERT_STRING_EQUAL(gid, "small");
	a->release_string(d->state, gid);
	CU_ASSERT_EQUAL(a->node_group_for_node(d->state, "{\"spec\":{}}", &gid, &de), 0);
	CU_ASSERT_PTR_NULL(gid);
	a->release_instances(d->state, inst, ni);

	del[0] = "small-1";
	CU_ASSERT_EQUAL(a->delete_nodes(d->state, "small", del, 1, &de), 0);
	CU_ASSERT_EQUAL(a->delete_nodes(d->state, "small", del, 1, &de), PRD_CLOUD_ENOTFOUND);
	CU_ASSERT_EQUAL_FATAL(a->instances(d->state, "small", &inst, &ni, &de), 0);
	CU_ASSERT_EQUAL(ni, 2);
	a->release_instances(d->state, inst, ni);
	CU_ASSERT_EQUAL(a->decrease_target_size(d->state, "small", 1, &de), PRD_CLOUD_EUNSUPPORTED);
	cloud_drivers_free(&set);

	/* A bad config is a clear init error. */
	cloud_drivers_init(&set);
	CU_ASSERT_EQUAL(cloud_drivers_load(&set, drv("example"), &host.host, "small 0 1\n", NULL, &e), PRD_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "config line 1"));
	cloud_drivers_free(&set);
}

static int fake_request(void *ud, const char *method, const char *path, const char *ct, const char *body,
			size_t len, long *status, char **resp, size_t *resp_len, prd_cloud_error *err)
{
	(void)ud; (void)ct; (void)body; (void)len; (void)err;
	*status = 200;
	*resp = strdup(path);
	*resp_len = strlen(path);
	return strcmp(method, "GET") == 0 ? 0 : PRD_CLOUD_EIO;
}

static void test_host_services(void)
{
	cloud_host_impl h;
	clk c;
	long st = -1;
	char *resp = NULL;
	size_t len = 0;
	prd_cloud_error de;
	clk_fake_init(&c, 42 * PRD_NS_PER_SEC);
	cloud_host_init(&h, "driver/test", &c, NULL, NULL);
	CU_ASSERT_EQUAL(h.host.struct_size, sizeof(prd_cloud_host));
	CU_ASSERT_EQUAL(h.host.now_ns(h.host.ctx), 42 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(h.host.kube_request(h.host.ctx, "GET", "/api/v1/nodes", NULL, NULL, 0, &st, &resp, &len, &de),
			PRD_CLOUD_EUNSUPPORTED);
	CU_ASSERT_EQUAL(st, 0);
	CU_ASSERT_PTR_NULL(resp);
	cloud_host_init(&h, "driver/test", &c, fake_request, NULL);
	CU_ASSERT_EQUAL(h.host.kube_request(h.host.ctx, "GET", "/api/v1/nodes", NULL, NULL, 0, &st, &resp, &len, &de), 0);
	CU_ASSERT_EQUAL(st, 200);
	CU_ASSERT_STRING_EQUAL(resp, "/api/v1/nodes");
	h.host.free(h.host.ctx, resp);
	CU_ASSERT_EQUAL(h.host.kube_request(h.host.ctx, "GET", "api/v1/nodes", NULL, NULL, 0, &st, &resp, &len, &de),
			PRD_CLOUD_EINVAL);
}

static const test_case cases[] = {
	{ "ABI rejections", test_rejections },
	{ "writable and garbage files", test_writable_and_garbage },
	{ "bare names, links, swaps, owners and directories", test_file_checks },
	{ "good driver and duplicate name", test_good_and_duplicate },
	{ "example driver end to end", test_example_driver },
	{ "host services", test_host_services },
	{ NULL, NULL }
};

int main(void)
{
	cloud_host_init(&host, "driver/test", clk_real(), NULL, NULL);
	return test_run("driver loader", cases);
}

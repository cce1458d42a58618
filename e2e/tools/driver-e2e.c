/* driver-e2e: loads a node-group driver (.so) exactly as provreqd does —
 * the loader, host services whose kube_request is the real client — and
 * runs driver operations against a real apiserver for the e2e scenarios.
 *
 * Usage: driver-e2e [--kubeconfig F] --driver SO [--config FILE] CMD [then CMD]...
 *   groups                          "ID min=N max=N target=N" per group
 *   increase GROUP N                increase_size
 *   atomic-increase GROUP N         atomic_increase_size
 *   delete GROUP NODE...            delete_nodes
 *   delete-errored GROUP N          delete_nodes on the first N instances
 *                                   that report an error, by their IDs (what
 *                                   provreqd does after a failed scale-up)
 *   decrease GROUP N                decrease_target_size
 *   instances GROUP                 "ID NODE STATE CLASS CODE" per instance
 *                                   (NODE/CODE "-" when absent)
 *   template GROUP                  the template Node (JSON)
 *   group-for-node NODE             the group of that Node, or "-"
 *   refresh                         refresh
 * Commands joined by "then" run in one process, against one loaded driver
 * (state a driver keeps in memory, such as the kwok driver's refused nodes,
 * lives only that long). The driver is refreshed once after loading.
 * Errors: "ERR <code> <message>" on stderr and exit status 3 (2 for usage). */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/client.h"
#include "ops/log.h"
#include "util/str.h"
#include "util/yamljson.h"

static const char *code_name(int rc)
{
	switch(rc) {
	case PRD_CLOUD_ENOMEM: return "ENOMEM";
	case PRD_CLOUD_EINVAL: return "EINVAL";
	case PRD_CLOUD_EIO: return "EIO";
	case PRD_CLOUD_ENOTFOUND: return "ENOTFOUND";
	case PRD_CLOUD_ERANGE: return "ERANGE";
	case PRD_CLOUD_EAGAIN: return "EAGAIN";
	case PRD_CLOUD_EUNSUPPORTED: return "EUNSUPPORTED";
	default: return "E?";
	}
}

static int fail(int rc, const char *msg)
{
	fprintf(stderr, "ERR %s %s\n", code_name(rc), msg);
	return 3;
}

static int usage(void)
{
	fprintf(stderr, "usage: driver-e2e [--kubeconfig F] --driver SO [--config FILE] CMD [then CMD]...\n");
	return 2;
}

static int parse_count(const char *s, int32_t *out)
{
	int64_t v;
	if(str_to_int64(s, &v) || v < -1000000 || v > 1000000)
		return -1;
	*out = (int32_t)v;
	return 0;
}

static const char *state_name(int32_t s)
{
	return s == PRD_CLOUD_INSTANCE_RUNNING    ? "Running"
	       : s == PRD_CLOUD_INSTANCE_CREATING ? "Creating"
	       : s == PRD_CLOUD_INSTANCE_DELETING ? "Deleting"
						  : "?";
}

static const char *class_name(int32_t c)
{
	return c == PRD_CLOUD_ERRCLASS_NONE		? "none"
	       : c == PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES ? "OutOfResources"
	       : c == PRD_CLOUD_ERRCLASS_OTHER		? "Other"
							: "?";
}

/* Run one command (argv[0] is its name, argc its word count). */
static int run_one(const prd_cloud_driver *api, void *st, kube_client *c, int argc, char **argv)
{
	prd_cloud_error e = {0, ""};
	const char *cmd = argv[0];
	int32_t n;
	int rc;

	if(!strcmp(cmd, "groups") && argc == 1) {
		prd_cloud_node_group *g = NULL;
		size_t count = 0, i;
		rc = api->node_groups(st, &g, &count, &e);
		if(rc)
			return fail(rc, e.message);
		for(i = 0; i < count; i++)
			printf("%s min=%d max=%d target=%d\n", g[i].id, (int)g[i].min_size, (int)g[i].max_size,
			       (int)g[i].target_size);
		api->release_node_groups(st, g, count);
		return 0;
	}
	if(!strcmp(cmd, "refresh") && argc == 1) {
		rc = api->refresh(st, &e);
		return rc ? fail(rc, e.message) : (printf("ok\n"), 0);
	}
	if((!strcmp(cmd, "increase") || !strcmp(cmd, "atomic-increase") || !strcmp(cmd, "decrease")) && argc == 3) {
		if(parse_count(argv[2], &n))
			return usage();
		if(!strcmp(cmd, "increase"))
			rc = api->increase_size(st, argv[1], n, &e);
		else if(!strcmp(cmd, "decrease"))
			rc = api->decrease_target_size(st, argv[1], n, &e);
		else if(api->atomic_increase_size)
			rc = api->atomic_increase_size(st, argv[1], n, &e);
		else
			return fail(PRD_CLOUD_EUNSUPPORTED, "the driver has no atomic_increase_size");
		return rc ? fail(rc, e.message) : (printf("ok\n"), 0);
	}
	if(!strcmp(cmd, "delete") && argc >= 3) {
		rc = api->delete_nodes(st, argv[1], (const char *const *)(argv + 2), (size_t)(argc - 2), &e);
		return rc ? fail(rc, e.message) : (printf("ok\n"), 0);
	}
	if(!strcmp(cmd, "delete-errored") && argc == 3) {
		prd_cloud_instance *v = NULL;
		const char **ids;
		size_t count = 0, i, k = 0;
		if(parse_count(argv[2], &n) || n < 0)
			return usage();
		rc = api->instances(st, argv[1], &v, &count, &e);
		if(rc)
			return fail(rc, e.message);
		ids = calloc(count + 1, sizeof(*ids));
		if(!ids) {
			api->release_instances(st, v, count);
			return fail(PRD_CLOUD_ENOMEM, "out of memory");
		}
		for(i = 0; i < count && k < (size_t)n; i++)
			if(v[i].error_class != PRD_CLOUD_ERRCLASS_NONE)
				ids[k++] = v[i].id;
		rc = k < (size_t)n ? PRD_CLOUD_ENOTFOUND : api->delete_nodes(st, argv[1], ids, k, &e);
		if(rc == PRD_CLOUD_ENOTFOUND && k < (size_t)n)
			snprintf(e.message, sizeof(e.message), "only %zu errored instances", k);
		free(ids);
		api->release_instances(st, v, count);
		return rc ? fail(rc, e.message) : (printf("ok\n"), 0);
	}
	if(!strcmp(cmd, "instances") && argc == 2) {
		prd_cloud_instance *v = NULL;
		size_t count = 0, i;
		rc = api->instances(st, argv[1], &v, &count, &e);
		if(rc)
			return fail(rc, e.message);
		for(i = 0; i < count; i++)
			printf("%s %s %s %s %s\n", v[i].id, v[i].node_name ? v[i].node_name : "-",
			       state_name(v[i].state), class_name(v[i].error_class),
			       v[i].error_code ? v[i].error_code : "-");
		api->release_instances(st, v, count);
		return 0;
	}
	if(!strcmp(cmd, "template") && argc == 2) {
		char *json = NULL;
		rc = api->template_node(st, argv[1], &json, &e);
		if(rc)
			return fail(rc, e.message);
		printf("%s\n", json);
		api->release_string(st, json);
		return 0;
	}
	if(!strcmp(cmd, "group-for-node") && argc == 2) {
		char path[512], *group = NULL;
		json_object *node = NULL;
		kube_status ks;
		prd_err pe = {0};
		snprintf(path, sizeof(path), "/api/v1/nodes/%s", argv[1]);
		rc = kube_request(c, "GET", path, NULL, NULL, 0, &node, &ks, &pe);
		if(rc)
			return fail(PRD_CLOUD_EIO, pe.msg);
		rc = api->node_group_for_node(st, json_object_to_json_string(node), &group, &e);
		json_object_put(node);
		if(rc)
			return fail(rc, e.message);
		printf("%s\n", group ? group : "-");
		api->release_string(st, group);
		return 0;
	}
	return usage();
}

int main(int argc, char **argv)
{
	const char *kubeconfig = NULL, *driver = NULL, *config_file = NULL;
	char *config = NULL;
	size_t config_len = 0;
	kube_config *cfg = NULL;
	kube_client *c = NULL;
	kube_client_opts o = {0};
	cloud_host_impl host;
	cloud_drivers set;
	cloud_driver *d = NULL;
	prd_err e = {0};
	prd_cloud_error ce = {0, ""};
	int i = 1, rc = 0;

	log_setup(getenv("DRIVER_E2E_DEBUG") ? PRD_LOG_DEBUG : PRD_LOG_WARN, PRD_LOG_TEXT, stderr);
	for(; i + 1 < argc && str_starts_with(argv[i], "--"); i += 2) {
		if(!strcmp(argv[i], "--kubeconfig"))
			kubeconfig = argv[i + 1];
		else if(!strcmp(argv[i], "--driver"))
			driver = argv[i + 1];
		else if(!strcmp(argv[i], "--config"))
			config_file = argv[i + 1];
		else
			return usage();
	}
	if(!driver || i >= argc)
		return usage();
	if(config_file && yj_read_file(config_file, 1 << 20, &config, &config_len, &e))
		return fail(PRD_CLOUD_EINVAL, e.msg);
	rc = kube_config_auto(kubeconfig, NULL, &cfg, &e);
	if(!rc)
		rc = kube_client_new(cfg, &o, &c, &e);
	if(rc) {
		free(config);
		kube_config_free(cfg);
		return fail(PRD_CLOUD_EIO, e.msg);
	}
	cloud_host_init(&host, "driver", clk_real(), cloud_host_kube_request, c);
	cloud_drivers_init(&set);
	rc = cloud_drivers_load(&set, driver, &host.host, config, &d, &e);
	free(config);
	if(rc) {
		rc = fail(PRD_CLOUD_EINVAL, e.msg);
		goto done;
	}
	if(d->api->refresh(d->state, &ce)) {
		rc = fail(ce.code, ce.message);
		goto done;
	}
	while(i < argc && !rc) {
		int j = i;
		while(j < argc && strcmp(argv[j], "then"))
			j++;
		if(j == i) {
			rc = usage();
			break;
		}
		rc = run_one(d->api, d->state, c, j - i, argv + i);
		fflush(stdout);
		i = j + 1;
	}
done:
	cloud_drivers_free(&set);
	kube_client_free(c);
	kube_config_free(cfg);
	return rc;
}

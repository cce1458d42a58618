/* `provreqd check-driver PATH [--cloud-config FILE] [--kubeconfig FILE
 * [--context NAME]]`: load a driver the way `run` would, and show what it
 * reports, so an integrator can check a new .so without a cluster, or a
 * real configuration against one. Exit 0 when the driver loads and every listing
 * call succeeds, 1 otherwise. */
#include "cmd.h"
#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/client.h"
#include "kube/config.h"
#include "ops/log.h"
#include "sim/sim.h"
#include "util/yamljson.h"

#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char check_driver_usage[] =
	"Usage: provreqd check-driver PATH [--cloud-config FILE] [--kubeconfig FILE [--context NAME]]\n"
	"\n"
	"Load the cloud driver at PATH (a .so built against provreqd/cloud.h; a\n"
	"path, checked as `run` checks it), check its ABI, initialise it with\n"
	"FILE's contents, and list its node groups with their sizes, template\n"
	"node capacity and instances, and the machine shapes it can\n"
	"auto-provision node groups of (ABI 1.5).\n"
	"Without --kubeconfig the requests the driver makes to kube-apiserver\n"
	"fail: no cluster is used. With it they go to that cluster (the\n"
	"context NAME, else the current one), so the clusterapi and karpenter\n"
	"drivers list what a real configuration sees. check-driver only reads:\n"
	"it calls no increase, delete or fence.\n"
	"Exit status: 0 loaded and listed, 1 it failed, 2 usage error.\n";

static void print_template(const prd_cloud_driver *a, void *state, const char *id)
{
	char *js = NULL;
	prd_cloud_error de;
	json_object *o, *alloc;
	memset(&de, 0, sizeof(de));
	if(a->template_node(state, id, &js, &de)) {
		printf("    template: error: %s\n", de.message);
		return;
	}
	o = json_tokener_parse(js);
	a->release_string(state, js);
	if(!o || !json_object_object_get_ex(json_object_object_get(o, "status"), "allocatable", &alloc)) {
		printf("    template: not a Node with status.allocatable\n");
		json_object_put(o);
		return;
	}
	printf("    template allocatable:");
	json_object_object_foreach(alloc, k, v)
		printf(" %s=%s", k, json_object_get_string(v));
	printf("\n");
	json_object_put(o);
}

/* The shapes of a driver that auto-provisions (ABI 1.5): 0, or 1 when
 * listing them failed. */
static int print_shapes(const cloud_driver *d)
{
	prd_cloud_shape *v = NULL;
	prd_cloud_error de;
	size_t n = 0, i;
	if(!cloud_driver_naps(d->api))
		return 0;
	memset(&de, 0, sizeof(de));
	if(d->api->shapes(d->state, &v, &n, &de)) {
		printf("  machine shapes: error: %s\n", de.message);
		return 1;
	}
	printf("  machine shapes: %zu\n", n);
	for(i = 0; i < n; i++) {
		const prd_cloud_shape *s = cloud_shape_at(d->api, v, i);
		json_object *o = s->node_json ? json_tokener_parse(s->node_json) : NULL, *alloc = NULL;
		printf("  - %s max=%d zones=%s price=", s->name ? s->name : "?", (int)s->max_size,
		       s->zones && s->zones[0] ? s->zones : "(any)");
		if(s->price_micros >= 0)
			printf("%lld.%06lld/h\n", (long long)(s->price_micros / 1000000), (long long)(s->price_micros % 1000000));
		else
			printf("unknown\n");
		if(o && json_object_object_get_ex(json_object_object_get(o, "status"), "allocatable", &alloc)) {
			printf("    allocatable:");
			json_object_object_foreach(alloc, k, val)
				printf(" %s=%s", k, json_object_get_string(val));
			printf("\n");
		} else {
			printf("    node: not a Node with status.allocatable\n");
		}
		json_object_put(o);
	}
	d->api->release_shapes(d->state, v, n);
	return 0;
}

/* What the driver can do, as `check-driver` prints it. */
static void print_caps(const cloud_driver *d)
{
	uint64_t caps = cloud_driver_caps(d->api);
	size_t i;
	printf("  atomic increase: %s\n", d->api->atomic_increase_size ? "yes" : "no");
	printf("  conditional increase/decrease: %s\n", caps & PRD_CLOUD_CAP_CONDITIONAL ? "yes" : "no");
	printf("  fencing terms (a stale leader's late call refused): %s\n",
	       caps & PRD_CLOUD_CAP_FENCE ? "yes" : "no");
	printf("  owner marks on instances: %s\n", caps & PRD_CLOUD_CAP_OWNER_MARK ? "yes" : "no");
	printf("  creation times of instances: %s\n", caps & PRD_CLOUD_CAP_CREATION_TIME ? "yes" : "no");
	printf("  which plan's increase moved the target: %s\n",
	       caps & PRD_CLOUD_CAP_INCREASE_RECORD ? "recorded" : "not recorded");
	printf("  a plan's instances are told by: %s\n",
	       (caps & PRD_CLOUD_CAP_OWNER_MARK) && CLOUD_DRIVER_HAS(d->api, increase) && d->api->increase
		       ? "owner token"
		       : caps & PRD_CLOUD_CAP_CREATION_TIME ? "creation time"
							    : "not being in the group before (docs/operator.md)");
	printf("  node auto-provisioning: %s\n", cloud_driver_naps(d->api) ? "yes" : "no");
	if(d->api->provisioning_classes) {
		const char *const *cls = d->api->provisioning_classes(d->state);
		printf("  extra provisioning classes:");
		for(i = 0; cls && cls[i]; i++)
			printf(" %s", cls[i]);
		printf("\n");
	}
}

/* One node group: sizes, template, instances. 0, or 1 when its instances
 * could not be listed. */
static int print_group(const cloud_driver *d, const prd_cloud_node_group *g)
{
	prd_cloud_instance *inst = NULL;
	prd_cloud_error de;
	size_t ni = 0, k, running = 0, errored = 0;
	printf("  - %s min=%d max=%d target=%d\n", g->id, (int)g->min_size, (int)g->max_size, (int)g->target_size);
	print_template(d->api, d->state, g->id);
	memset(&de, 0, sizeof(de));
	if(d->api->instances(d->state, g->id, &inst, &ni, &de)) {
		printf("    instances: error: %s\n", de.message);
		return 1;
	}
	for(k = 0; k < ni; k++) {
		const prd_cloud_instance *x = cloud_instance_at(d->api, inst, k);
		running += x->state == PRD_CLOUD_INSTANCE_RUNNING;
		errored += x->error_class != PRD_CLOUD_ERRCLASS_NONE;
	}
	printf("    instances: %zu (%zu running, %zu with errors)\n", ni, running, errored);
	d->api->release_instances(d->state, inst, ni);
	return 0;
}

/* After the options: exactly one PATH, and --context only with
 * --kubeconfig. true (after saying which is wrong) when not. */
static bool usage_wrong(int argc, char **argv, bool context_alone)
{
	if(optind == argc - 1 && !context_alone)
		return false;
	fprintf(stderr, "provreqd check-driver: usage error (see provreqd check-driver --help):\n%s%s\n",
		optind < argc - 1 ? argv[optind + 1] : "",
		optind < argc - 1 ? ": unexpected argument (one driver PATH)"
		: optind == argc  ? "the driver PATH is missing"
				  : "--context needs --kubeconfig");
	return true;
}

int cmd_check_driver(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cloud-config", required_argument, NULL, 'c' },
		{ "kubeconfig", required_argument, NULL, 'k' },
		{ "context", required_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *cfg_path = NULL, *kubeconfig = NULL, *context = NULL;
	kube_config *kc = NULL;
	kube_client *client = NULL;
	char *config = NULL;
	size_t len, i, n = 0;
	cloud_host_impl host;
	cloud_drivers set;
	cloud_driver *d = NULL;
	prd_cloud_node_group *groups = NULL;
	prd_cloud_error de;
	prd_err e;
	int c, rc = 1;

	/* 0, not 1: glibc then re-reads the option string and resets its state. */
	optind = 0;
	while((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch(c) {
		case 'c':
			cfg_path = optarg;
			break;
		case 'k':
			kubeconfig = optarg;
			break;
		case 'x':
			context = optarg;
			break;
		case 'h':
			fputs(check_driver_usage, stdout);
			return 0;
		default:
			fputs(check_driver_usage, stderr);
			return 2;
		}
	}
	if(usage_wrong(argc, argv, context && !kubeconfig))
		return 2;
	if(cfg_path) {
		/* A relative templateDir is the config file's neighbour, as in run
		 * and simulate. */
		char *text = NULL;
		int r = yj_read_file(cfg_path, 16u << 20, &text, &len, &e);
		if(!r)
			r = sim_cloud_config_resolve(cfg_path, text, &config, &e);
		free(text);
		if(r) {
			fprintf(stderr, "provreqd: --cloud-config: %s\n", e.msg);
			return 1;
		}
	}
	if(kubeconfig) {
		kube_client_opts copts;
		memset(&copts, 0, sizeof(copts));
		if(kube_config_auto(kubeconfig, context, &kc, &e) || kube_client_new(kc, &copts, &client, &e)) {
			fprintf(stderr, "provreqd: --kubeconfig %s: %s\n", kubeconfig, e.msg);
			free(config);
			kube_config_free(kc);
			return 1;
		}
	}
	cloud_host_init(&host, "check-driver", clk_real(), client ? cloud_host_kube_request : NULL, client);
	cloud_drivers_init(&set);
	if(cloud_drivers_load(&set, argv[optind], &host.host, config, &d, &e)) {
		fprintf(stderr, "provreqd: %s\n", e.msg);
		goto done;
	}
	printf("driver %s (ABI %u.%u) from %s\n", d->api->name, d->api->abi_major, d->api->abi_minor, d->path);
	print_caps(d);
	memset(&de, 0, sizeof(de));
	if(d->api->refresh(d->state, &de) || d->api->node_groups(d->state, &groups, &n, &de)) {
		cloud_driver_error(d, "listing node groups", de.code ? de.code : PRD_CLOUD_EIO, &de, &e);
		fprintf(stderr, "provreqd: %s\n", e.msg);
		goto done;
	}
	printf("  node groups: %zu\n", n);
	rc = 0;
	for(i = 0; i < n; i++)
		rc |= print_group(d, &groups[i]);
	d->api->release_node_groups(d->state, groups, n);
	if(print_shapes(d))
		rc = 1;
done:
	cloud_drivers_free(&set);
	kube_client_free(client);
	kube_config_free(kc);
	free(config);
	return rc;
}

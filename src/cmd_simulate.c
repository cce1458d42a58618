/* `provreqd simulate`: run the controller against an in-memory API loaded
 * from YAML, with a node-group driver (kwok by default) and a clock that
 * jumps from one pending timer to the next, then print what happened. */
#include "config.h"
#include "cmd.h"
#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/api.h"
#include "kube/memapi.h"
#include "kube/objects.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/controller.h"
#include "provreq/request.h"
#include "state/state.h"
#include "util/rfc3339.h"
#include "util/str.h"
#include "util/yamljson.h"

#include <dirent.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char simulate_usage[] =
	"Usage: provreqd simulate --cluster DIR|FILE [options]\n"
	"\n"
	"Load Nodes, Pods, PodTemplates and ProvisioningRequests from YAML (what\n"
	"`kubectl get -o yaml` prints; a directory means every *.yaml/*.yml in it),\n"
	"run the controller against an in-memory API with a node-group driver,\n"
	"moving a simulated clock from one pending timer to the next, and print\n"
	"the requests' conditions and the node groups' sizes.\n"
	"\n"
	"Options:\n"
	"  --cluster PATH         the cluster to load (required)\n"
	"  --until DURATION       how much simulated time to run (default 1h)\n"
	"  --cloud-driver PATH    node-group driver (default: the kwok driver)\n"
	"  --cloud-config FILE    the driver's configuration (default: PATH/cloud-config.yaml\n"
	"                         when --cluster is a directory that has one)\n"
	"  --booking-ttl DURATION how long Provisioned capacity is held (default 10m)\n"
	"  --provision-timeout D  how long new nodes may take to become Ready (default 15m)\n"
	"  --expander CHAIN       node-group choice (default least-waste)\n"
	"  --log-format text|json, --v LEVEL  logging (default: warnings only)\n"
	"  -h, --help             this help\n";

/* Collect objects from a file or every YAML file of a directory (sorted,
 * so the load order is stable). */
static int load_cluster(const char *path, json_object **all, prd_err *err)
{
	struct stat st;
	json_object *objs = json_object_new_array();
	int rc = 0;
	if(!objs)
		return prd_err_set(err, PRD_ENOMEM, "out of memory");
	if(stat(path, &st))
		rc = prd_err_set(err, PRD_ENOTFOUND, "--cluster %s: no such file or directory", path);
	else if(S_ISDIR(st.st_mode)) {
		struct dirent **names = NULL;
		int n = scandir(path, &names, NULL, alphasort), i;
		if(n < 0)
			rc = prd_err_set(err, PRD_EIO, "--cluster %s: cannot read the directory", path);
		for(i = 0; i < n; i++) {
			const char *nm = names[i]->d_name;
			if(!rc && (str_ends_with(nm, ".yaml") || str_ends_with(nm, ".yml")) &&
			   strcmp(nm, "cloud-config.yaml")) {
				char *fp = str_printf("%s/%s", path, nm);
				json_object *part = NULL;
				size_t k;
				rc = fp ? yj_load_file(fp, &part, err) : prd_err_set(err, PRD_ENOMEM, "out of memory");
				for(k = 0; !rc && k < json_object_array_length(part); k++)
					json_object_array_add(objs, json_object_get(json_object_array_get_idx(part, k)));
				json_object_put(part);
				free(fp);
			}
			free(names[i]);
		}
		free(names);
	} else {
		json_object_put(objs);
		return yj_load_file(path, all, err);
	}
	if(rc) {
		json_object_put(objs);
		return rc;
	}
	*all = objs;
	return 0;
}

/* Simulated time starts at the newest creationTimestamp in the input, so
 * a run is reproducible; objects without one are created "now". */
static int64_t start_time(json_object *objs)
{
	int64_t best = 0, t;
	size_t i;
	for(i = 0; i < json_object_array_length(objs); i++) {
		json_object *md = json_object_object_get(json_object_array_get_idx(objs, i), "metadata");
		json_object *ct = json_object_object_get(md, "creationTimestamp");
		if(ct && json_object_is_type(ct, json_type_string) &&
		   rfc3339_parse(json_object_get_string(ct), &t, NULL) == 0 && t > best)
			best = t;
	}
	return best ? best : 1767225600LL * PRD_NS_PER_SEC; /* 2026-01-01T00:00:00Z */
}

/* Play the kwok controller: fake Nodes become Ready. Returns how many. */
static int kwok_make_ready(const kube_api *api)
{
	json_object *list = NULL, *items;
	size_t i;
	int n = 0;
	if(kube_api_call(api, "GET", "/api/v1/nodes", NULL, NULL, &list, NULL, NULL))
		return 0;
	items = json_object_object_get(list, "items");
	for(i = 0; items && i < json_object_array_length(items); i++) {
		json_object *node = json_object_array_get_idx(items, i), *ann, *fake, *conds;
		const char *name;
		bool ready = false;
		size_t k;
		ann = json_object_object_get(json_object_object_get(node, "metadata"), "annotations");
		fake = json_object_object_get(ann, "kwok.x-k8s.io/node");
		if(!fake || strcmp(json_object_get_string(fake), "fake"))
			continue;
		conds = json_object_object_get(json_object_object_get(node, "status"), "conditions");
		for(k = 0; conds && k < json_object_array_length(conds); k++) {
			json_object *c = json_object_array_get_idx(conds, k);
			if(!strcmp(json_object_get_string(json_object_object_get(c, "type")), "Ready") &&
			   !strcmp(json_object_get_string(json_object_object_get(c, "status")), "True"))
				ready = true;
		}
		if(ready)
			continue;
		name = json_object_get_string(json_object_object_get(json_object_object_get(node, "metadata"), "name"));
		{
			char path[400];
			json_object *patch = json_tokener_parse(
				"{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
				"\"reason\":\"KubeletReady\",\"message\":\"simulated by provreqd simulate\"}]}}");
			snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", name);
			if(kube_api_call(api, "PATCH", path, "application/merge-patch+json", patch, NULL, NULL, NULL) == 0)
				n++;
			json_object_put(patch);
		}
	}
	json_object_put(list);
	return n;
}

static const char *cond_col(const kube_provreq *pr, const char *type)
{
	const kube_condition *c = pr_cond(pr, type);
	return c && c->status ? c->status : "";
}

static void print_requests(const kube_api *api)
{
	json_object *list = NULL, *items;
	kube_intern *in = kube_intern_new();
	size_t i;
	if(!in || kube_api_call(api, "GET", "/apis/autoscaling.x-k8s.io/v1/provisioningrequests", NULL, NULL, &list,
				NULL, NULL)) {
		if(in)
			kube_intern_free(in);
		return;
	}
	items = json_object_object_get(list, "items");
	printf("%-12s %-22s %-16s %-9s %-12s %-7s %-15s %s\n", "NAMESPACE", "NAME", "CLASS", "ACCEPTED",
	       "PROVISIONED", "FAILED", "BOOKINGEXPIRED", "REASON: MESSAGE");
	for(i = 0; items && i < json_object_array_length(items); i++) {
		kube_meta *m = NULL;
		const kube_provreq *pr;
		const kube_condition *last = NULL;
		size_t k;
		if(kube_decode(KUBE_KIND_PROVREQ, json_object_array_get_idx(items, i), in, &m, NULL))
			continue;
		pr = (const kube_provreq *)m;
		for(k = 0; k < pr->nconditions; k++)
			if(!last || pr->conditions[k].last_transition_ns >= last->last_transition_ns)
				last = &pr->conditions[k];
		printf("%-12s %-22s %-16s %-9s %-12s %-7s %-15s %s%s%s\n", pr->meta.ns, pr->meta.name,
		       pr_class_name(pr_class_of(pr->class_name)), cond_col(pr, PR_COND_ACCEPTED),
		       cond_col(pr, PR_COND_PROVISIONED), cond_col(pr, PR_COND_FAILED),
		       cond_col(pr, PR_COND_BOOKING_EXPIRED), last && last->reason ? last->reason : "",
		       last ? ": " : "", last && last->message ? last->message : "");
		kube_obj_free(in, m);
	}
	json_object_put(list);
	kube_intern_free(in);
}

/* Node-group sizes over the run, sampled after every pass: the largest
 * target seen, and the nodes added and removed (target changes between
 * passes), so the final table shows scale-ups that were later scaled
 * down. */
typedef struct sim_group {
	char *id;
	int32_t first, last, peak, added, removed;
} sim_group;

typedef struct sim_groups {
	sim_group *v;
	size_t n;
} sim_groups;

static void sim_groups_free(sim_groups *t)
{
	size_t i;
	for(i = 0; i < t->n; i++)
		free(t->v[i].id);
	free(t->v);
}

static sim_group *sim_group_get(sim_groups *t, const char *id, int32_t target)
{
	sim_group *nv;
	size_t i;
	for(i = 0; i < t->n; i++)
		if(!strcmp(t->v[i].id, id))
			return &t->v[i];
	nv = realloc(t->v, (t->n + 1) * sizeof(*nv));
	if(!nv)
		return NULL;
	t->v = nv;
	memset(&nv[t->n], 0, sizeof(*nv));
	if(!(nv[t->n].id = strdup(id)))
		return NULL;
	nv[t->n].first = nv[t->n].last = nv[t->n].peak = target;
	return &t->v[t->n++];
}

static void track_groups(cloud_drivers *drivers, sim_groups *t)
{
	size_t d, i;
	for(d = 0; d < drivers->n; d++) {
		cloud_driver *drv = drivers->v[d];
		prd_cloud_node_group *g = NULL;
		prd_cloud_error de;
		size_t n = 0;
		if(drv->api->node_groups(drv->state, &g, &n, &de))
			continue;
		for(i = 0; i < n; i++) {
			sim_group *s = g[i].id ? sim_group_get(t, g[i].id, g[i].target_size) : NULL;
			if(!s)
				continue;
			if(g[i].target_size > s->last)
				s->added += g[i].target_size - s->last;
			else
				s->removed += s->last - g[i].target_size;
			s->last = g[i].target_size;
			if(s->last > s->peak)
				s->peak = s->last;
		}
		drv->api->release_node_groups(drv->state, g, n);
	}
}

static void print_groups(cloud_drivers *drivers, sim_groups *t)
{
	size_t d, i;
	printf("\n%-24s %-5s %-5s %-7s %-6s %-6s %-6s %s\n", "NODE GROUP", "MIN", "MAX", "TARGET", "PEAK", "ADDED",
	       "REMOVED", "DRIVER");
	for(d = 0; d < drivers->n; d++) {
		cloud_driver *drv = drivers->v[d];
		prd_cloud_node_group *g = NULL;
		prd_cloud_error de;
		size_t n = 0;
		if(drv->api->node_groups(drv->state, &g, &n, &de))
			continue;
		for(i = 0; i < n; i++) {
			sim_group *s = g[i].id ? sim_group_get(t, g[i].id, g[i].target_size) : NULL;
			printf("%-24s %-5d %-5d %-7d %-6d %-6d %-7d %s\n", g[i].id, (int)g[i].min_size, (int)g[i].max_size,
			       (int)g[i].target_size, s ? (int)s->peak : (int)g[i].target_size, s ? (int)s->added : 0,
			       s ? (int)s->removed : 0, drv->api->name);
		}
		drv->api->release_node_groups(drv->state, g, n);
	}
}

/* The kwok driver next to this binary in a build tree, else installed. */
static char *default_driver(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if(n > 0) {
		char *slash, *p;
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if(slash) {
			*slash = '\0';
			/* libtool keeps the real binary in .libs/ */
			if(str_ends_with(exe, "/.libs"))
				exe[strlen(exe) - 6] = '\0';
			p = str_printf("%s/cloud/kwok/.libs/kwok.so", exe);
			if(p && access(p, R_OK) == 0)
				return p;
			free(p);
		}
	}
	return str_printf("%s/kwok.so", PRD_DRIVERDIR);
}

int cmd_simulate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "until", required_argument, NULL, 'u' },
		{ "cloud-driver", required_argument, NULL, 'd' },
		{ "cloud-config", required_argument, NULL, 'C' },
		{ "booking-ttl", required_argument, NULL, 'b' },
		{ "provision-timeout", required_argument, NULL, 't' },
		{ "expander", required_argument, NULL, 'e' },
		{ "log-format", required_argument, NULL, 'f' },
		{ "v", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *cluster = NULL, *driver_path = NULL, *cfg_path = NULL;
	char *driver_default = NULL, *config = NULL, *auto_cfg = NULL;
	int64_t until = 3600 * PRD_NS_PER_SEC, start, end;
	int level = PRD_LOG_WARN, fmt = PRD_LOG_TEXT, c, rc = 1;
	unsigned passes = 0;
	sim_groups sizes = { NULL, 0 };
	size_t len;
	pr_config cfg;
	json_object *objs = NULL;
	memapi *m = NULL;
	state_db *db = NULL;
	pr_ctl *ctl = NULL;
	cloud_drivers drivers;
	cloud_host_impl host;
	kube_api api;
	state_config sc;
	clk clock;
	prd_err e;

	pr_config_default(&cfg);
	cloud_drivers_init(&drivers);
	optind = 0;
	while((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int64_t d;
		switch(c) {
		case 'c': cluster = optarg; break;
		case 'd': driver_path = optarg; break;
		case 'C': cfg_path = optarg; break;
		case 'e': cfg.expander = optarg; break;
		case 'u':
		case 'b':
		case 't':
			if(str_parse_duration(optarg, &d) || d <= 0) {
				fprintf(stderr, "provreqd simulate: --%s: \"%s\" is not a positive duration (e.g. 30m, 2h)\n",
					c == 'u' ? "until" : c == 'b' ? "booking-ttl" : "provision-timeout", optarg);
				return 2;
			}
			if(c == 'u')
				until = d;
			else if(c == 'b')
				cfg.booking_ttl_ns = d;
			else
				cfg.provision_timeout_ns = d;
			break;
		case 'f':
			if(log_parse_format(optarg, &fmt)) {
				fprintf(stderr, "provreqd simulate: --log-format must be text or json\n");
				return 2;
			}
			break;
		case 'v':
			if(log_parse_level(optarg, &level)) {
				fprintf(stderr, "provreqd simulate: --v: unknown level \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 'h':
			fputs(simulate_usage, stdout);
			return 0;
		default:
			fputs(simulate_usage, stderr);
			return 2;
		}
	}
	if(!cluster || optind != argc) {
		fputs(simulate_usage, stderr);
		return 2;
	}
	log_setup(level, fmt, stderr);
	metrics_init();
	if(load_cluster(cluster, &objs, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		goto done;
	}
	start = start_time(objs);
	end = start + until;
	clk_fake_init(&clock, start);
	if(memapi_new(&clock, 0, &m)) {
		fprintf(stderr, "provreqd simulate: out of memory\n");
		goto done;
	}
	api = kube_api_from_memapi(m);
	if(memapi_load(m, objs, &e)) {
		fprintf(stderr, "provreqd simulate: loading %s: %s\n", cluster, e.msg);
		goto done;
	}
	state_config_default(&sc);
	if(state_open(":memory:", &clock, &sc, &db, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		goto done;
	}
	if(!cfg_path) {
		struct stat st;
		auto_cfg = str_printf("%s/cloud-config.yaml", cluster);
		if(auto_cfg && stat(auto_cfg, &st) == 0)
			cfg_path = auto_cfg;
	}
	if(cfg_path && yj_read_file(cfg_path, 16u << 20, &config, &len, &e)) {
		fprintf(stderr, "provreqd simulate: --cloud-config: %s\n", e.msg);
		goto done;
	}
	if(!driver_path)
		driver_path = driver_default = default_driver();
	cloud_host_init(&host, "driver", &clock, cloud_host_memapi_request, m);
	if(cloud_drivers_load(&drivers, driver_path, &host.host, config, NULL, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		goto done;
	}
	if(pr_ctl_new(&cfg, &clock, &api, db, &drivers, &ctl, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		goto done;
	}
	track_groups(&drivers, &sizes);
	for(;;) {
		int64_t wake;
		uint64_t rv = memapi_resource_version(m);
		if(pr_ctl_pass(ctl, &wake, &e)) {
			fprintf(stderr, "provreqd simulate: %s\n", e.msg);
			goto done;
		}
		passes++;
		track_groups(&drivers, &sizes);
		/* What the pass wrote reaches `run` through its watches and starts
		 * another pass (a request turning final lets its nodes idle, say);
		 * here it does so one simulated second later. New fake nodes
		 * turn Ready a moment after they are created. */
		if((kwok_make_ready(&api) || memapi_resource_version(m) != rv) && wake > clk_wall(&clock) + PRD_NS_PER_SEC)
			wake = clk_wall(&clock) + PRD_NS_PER_SEC;
		if(wake == INT64_MAX || wake > end || passes >= 100000)
			break;
		clk_fake_set(&clock, wake > clk_wall(&clock) ? wake : clk_wall(&clock) + PRD_NS_PER_SEC);
	}
	clk_fake_set(&clock, end);
	print_requests(&api);
	track_groups(&drivers, &sizes);
	print_groups(&drivers, &sizes);
	{
		const pr_stats *s = pr_ctl_stats(ctl);
		printf("\nsimulated %llds in %u passes: %llu scale-ups started, %llu succeeded, %llu rolled back; "
		       "%llu idle nodes scaled down; %llu status writes, %llu events\n",
		       (long long)(until / PRD_NS_PER_SEC), passes, (unsigned long long)s->scaleups_started,
		       (unsigned long long)s->scaleups_succeeded, (unsigned long long)s->scaleups_rolled_back,
		       (unsigned long long)s->scaledown_nodes, (unsigned long long)s->status_writes,
		       (unsigned long long)s->events);
	}
	rc = 0;
done:
	pr_ctl_free(ctl);
	sim_groups_free(&sizes);
	cloud_drivers_free(&drivers);
	state_close(db);
	memapi_free(m);
	json_object_put(objs);
	free(config);
	free(auto_cfg);
	free(driver_default);
	metrics_shutdown();
	return rc;
}

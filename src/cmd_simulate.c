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

/* The command line of `simulate`. */
typedef struct sim_opts {
	const char *cluster, *driver_path, *cfg_path;
	int64_t until;
	int level, fmt;
	pr_config cfg;
} sim_opts;

/* --until, --booking-ttl or --provision-timeout (getopt's `c`): false,
 * after saying why, when the value is not a positive duration. */
static bool sim_duration(int c, const char *arg, sim_opts *o)
{
	int64_t d;
	if(str_parse_duration(arg, &d) || d <= 0) {
		fprintf(stderr, "provreqd simulate: --%s: \"%s\" is not a positive duration (e.g. 30m, 2h)\n",
			c == 'u' ? "until" : c == 'b' ? "booking-ttl" : "provision-timeout", arg);
		return false;
	}
	if(c == 'u')
		o->until = d;
	else if(c == 'b')
		o->cfg.booking_ttl_ns = d;
	else
		o->cfg.provision_timeout_ns = d;
	return true;
}

/* Parse the command line into `o`. true to go on; false to end at once
 * with *exit_code (0 after --help, 2 for a bad command line). */
static bool sim_parse(int argc, char **argv, sim_opts *o, int *exit_code)
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
	int c;

	*exit_code = 2;
	optind = 0;
	while((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch(c) {
		case 'c': o->cluster = optarg; break;
		case 'd': o->driver_path = optarg; break;
		case 'C': o->cfg_path = optarg; break;
		case 'e': o->cfg.expander = optarg; break;
		case 'u':
		case 'b':
		case 't':
			if(!sim_duration(c, optarg, o))
				return false;
			break;
		case 'f':
			if(log_parse_format(optarg, &o->fmt)) {
				fprintf(stderr, "provreqd simulate: --log-format must be text or json\n");
				return false;
			}
			break;
		case 'v':
			if(log_parse_level(optarg, &o->level)) {
				fprintf(stderr, "provreqd simulate: --v: unknown level \"%s\"\n", optarg);
				return false;
			}
			break;
		case 'h':
			fputs(simulate_usage, stdout);
			*exit_code = 0;
			return false;
		default:
			fputs(simulate_usage, stderr);
			return false;
		}
	}
	if(!o->cluster || optind != argc) {
		fputs(simulate_usage, stderr);
		return false;
	}
	return true;
}

/* What sim_setup() creates and sim_teardown() frees. It stays on
 * cmd_simulate's stack for the whole run and must not move: the memory
 * API and the state store keep pointers to `clock`, the drivers to
 * `host`, the controller to `drivers`. */
typedef struct sim_ctx {
	clk clock;
	json_object *objs;
	memapi *m;
	kube_api api;
	state_db *db;
	char *config, *auto_cfg, *driver_default;
	cloud_drivers drivers;
	cloud_host_impl host;
	pr_ctl *ctl;
	sim_groups sizes;
	int64_t end;
	unsigned passes;
} sim_ctx;

/* The driver's configuration: --cloud-config, else cloud-config.yaml in
 * the --cluster directory when there is one. */
static int sim_read_cloud_config(sim_ctx *s, const sim_opts *o, prd_err *e)
{
	const char *cfg_path = o->cfg_path;
	size_t len;

	if(!cfg_path) {
		struct stat st;
		s->auto_cfg = str_printf("%s/cloud-config.yaml", o->cluster);
		if(s->auto_cfg && stat(s->auto_cfg, &st) == 0)
			cfg_path = s->auto_cfg;
	}
	if(cfg_path && yj_read_file(cfg_path, 16u << 20, &s->config, &len, e)) {
		fprintf(stderr, "provreqd simulate: --cloud-config: %s\n", e->msg);
		return 1;
	}
	return 0;
}

/* The cluster in memory, the state store, the driver and the controller,
 * the clock at the start. 0, or 1 after saying why; sim_teardown() frees
 * what was made either way. */
static int sim_setup(sim_ctx *s, const sim_opts *o)
{
	const char *driver_path = o->driver_path;
	int64_t start;
	state_config sc;
	prd_err e;

	if(load_cluster(o->cluster, &s->objs, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		return 1;
	}
	start = start_time(s->objs);
	s->end = start + o->until;
	clk_fake_init(&s->clock, start);
	if(memapi_new(&s->clock, 0, &s->m)) {
		fprintf(stderr, "provreqd simulate: out of memory\n");
		return 1;
	}
	s->api = kube_api_from_memapi(s->m);
	if(memapi_load(s->m, s->objs, &e)) {
		fprintf(stderr, "provreqd simulate: loading %s: %s\n", o->cluster, e.msg);
		return 1;
	}
	state_config_default(&sc);
	if(state_open(":memory:", &s->clock, &sc, &s->db, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		return 1;
	}
	if(sim_read_cloud_config(s, o, &e))
		return 1;
	if(!driver_path)
		driver_path = s->driver_default = default_driver();
	cloud_host_init(&s->host, "driver", &s->clock, cloud_host_memapi_request, s->m);
	if(cloud_drivers_load(&s->drivers, driver_path, &s->host.host, s->config, NULL, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		return 1;
	}
	if(pr_ctl_new(&o->cfg, &s->clock, &s->api, s->db, &s->drivers, &s->ctl, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		return 1;
	}
	return 0;
}

/* Passes until no timer is pending, the end of the simulated time, or
 * 100000 passes. 0, or 1 after saying why a pass failed. */
static int sim_loop(sim_ctx *s)
{
	prd_err e;

	track_groups(&s->drivers, &s->sizes);
	for(;;) {
		int64_t wake;
		uint64_t rv = memapi_resource_version(s->m);
		if(pr_ctl_pass(s->ctl, &wake, &e)) {
			fprintf(stderr, "provreqd simulate: %s\n", e.msg);
			return 1;
		}
		s->passes++;
		track_groups(&s->drivers, &s->sizes);
		/* What the pass wrote reaches `run` through its watches and starts
		 * another pass (a request turning final lets its nodes idle, say);
		 * here it does so one simulated second later. New fake nodes
		 * turn Ready a moment after they are created. */
		if((kwok_make_ready(&s->api) || memapi_resource_version(s->m) != rv) &&
		   wake > clk_wall(&s->clock) + PRD_NS_PER_SEC)
			wake = clk_wall(&s->clock) + PRD_NS_PER_SEC;
		if(wake == INT64_MAX || wake > s->end || s->passes >= 100000)
			break;
		clk_fake_set(&s->clock, wake > clk_wall(&s->clock) ? wake : clk_wall(&s->clock) + PRD_NS_PER_SEC);
	}
	return 0;
}

/* The tables and the summary line, at the end of the simulated time. */
static void sim_report(sim_ctx *s, int64_t until)
{
	const pr_stats *st;

	clk_fake_set(&s->clock, s->end);
	print_requests(&s->api);
	track_groups(&s->drivers, &s->sizes);
	print_groups(&s->drivers, &s->sizes);
	st = pr_ctl_stats(s->ctl);
	printf("\nsimulated %llds in %u passes: %llu scale-ups started, %llu succeeded, %llu rolled back; "
	       "%llu idle nodes scaled down; %llu status writes, %llu events\n",
	       (long long)(until / PRD_NS_PER_SEC), s->passes, (unsigned long long)st->scaleups_started,
	       (unsigned long long)st->scaleups_succeeded, (unsigned long long)st->scaleups_rolled_back,
	       (unsigned long long)st->scaledown_nodes, (unsigned long long)st->status_writes,
	       (unsigned long long)st->events);
}

static void sim_teardown(sim_ctx *s)
{
	pr_ctl_free(s->ctl);
	sim_groups_free(&s->sizes);
	cloud_drivers_free(&s->drivers);
	state_close(s->db);
	memapi_free(s->m);
	json_object_put(s->objs);
	free(s->config);
	free(s->auto_cfg);
	free(s->driver_default);
	metrics_shutdown();
}

int cmd_simulate(int argc, char **argv)
{
	sim_opts o;
	sim_ctx s;
	int rc;

	memset(&o, 0, sizeof(o));
	o.until = 3600 * PRD_NS_PER_SEC;
	o.level = PRD_LOG_WARN;
	o.fmt = PRD_LOG_TEXT;
	pr_config_default(&o.cfg);
	if(!sim_parse(argc, argv, &o, &rc))
		return rc;
	memset(&s, 0, sizeof(s));
	cloud_drivers_init(&s.drivers);
	log_setup(o.level, o.fmt, stderr);
	metrics_init();
	rc = sim_setup(&s, &o);
	if(!rc)
		rc = sim_loop(&s);
	if(!rc)
		sim_report(&s, o.until);
	sim_teardown(&s);
	return rc;
}

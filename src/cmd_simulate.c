/* `provreqd simulate`: run the controller against an in-memory API loaded
 * from YAML, with a node-group driver (kwok by default) and a clock that
 * jumps from one pending timer to the next, then print what happened. */
#include "config.h"
#include "cmd.h"
#include "classes/class.h"
#include "driver/host.h"
#include "driver/host_kube.h"
#include "driver/loader.h"
#include "kube/api.h"
#include "kube/memapi.h"
#include "kube/objects.h"
#include "ops/config.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/controller.h"
#include "provreq/request.h"
#include "sched/priorities.h"
#include "sim/sim.h"
#include "state/state.h"
#include "util/rfc3339.h"
#include "util/str.h"
#include "util/yamljson.h"

#include <errno.h>
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
	"Load Nodes, Pods, PodTemplates and ProvisioningRequests from YAML or JSON\n"
	"(what `kubectl get nodes,pods,podtemplates,provreq -A -o yaml` prints; a\n"
	"directory means every *.yaml, *.yml and *.json file in it), run the\n"
	"controller against an in-memory API with a node-group driver, moving a\n"
	"simulated clock from one pending timer to the next, and report every\n"
	"condition transition and node-group size in simulated time. Objects that\n"
	"cannot be simulated are skipped with a warning saying which and why.\n"
	"\n"
	"Options:\n"
	"  --cluster PATH         the cluster to load (required)\n"
	"  --request FILE         what-if ProvisioningRequests and their PodTemplates\n"
	"                         (a YAML stream), added before the run; repeatable\n"
	"  --until DURATION       how much simulated time to run (default 1h)\n"
	"  -o, --output FORMAT    text (default), json or yaml (schema: docs/simulate.md)\n"
	"  --plot FILE.svg        also draw node-group sizes and request states as SVG\n"
	"  --cloud-driver PATH    node-group driver (default: the kwok driver)\n"
	"  --cloud-config FILE    the driver's configuration (default: PATH/cloud-config.yaml\n"
	"                         when --cluster is a directory that has one); a relative\n"
	"                         templateDir in it is relative to the file's directory\n"
	"  --booking-ttl DURATION how long Provisioned capacity is held (default 10m)\n"
	"  --provision-timeout D  how long new nodes may take to become Ready (default 15m)\n"
	"  --expander CHAIN       node-group choice (default least-waste)\n"
	"  --priority-file FILE   the priority expander's table: a\n"
	"                         cluster-autoscaler-priority-expander ConfigMap or its\n"
	"                         priorities map (needed by --expander priority)\n"
	"  --node-autoprovisioning  create node groups of the driver's machine shapes\n"
	"                         when no group can serve a request (kwok:\n"
	"                         autoProvisioning in the cloud config)\n"
	"  --max-autoprovisioned-groups N  at most N such groups (default 15)\n"
	"  --scale-down-idle D    empty nodes and auto-provisioned groups go after D\n"
	"                         (default 10m)\n"
	"  --cores-total MIN:MAX, --memory-total MIN:MAX (GiB),\n"
	"  --gpu-total TYPE:MIN:MAX (repeatable)  cluster-wide limits, as for run\n"
	"  --log-format text|json, --v LEVEL  logging, stamped with simulated time;\n"
	"                         LEVEL as for run: 0 error, 1 warn (the default),\n"
	"                         2 info, 3 debug, 4 trace\n"
	"  -h, --help             this help\n"
	"\n"
	"Exit status: 0 done, 1 the input or a run failed, 2 usage error.\n";

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

static const char *cond_reason(const kube_provreq *pr, const char *type)
{
	const kube_condition *c = pr_cond(pr, type);
	return c && c->reason ? c->reason : NULL;
}

/* The final per-request summary as JSON rows (caller releases): class,
 * state, each condition's status, and the newest condition's reason and
 * message. */
/* The report's class column: the built-in class's short name, else
 * "other" (a driver's class, or one nobody serves). */
static const char *class_label(const char *class_name)
{
	const pr_class_module *m = pr_class_builtin(class_name);
	return m ? m->short_name : "other";
}

static json_object *request_rows(const kube_api *api)
{
	json_object *list = NULL, *items, *rows = json_object_new_array();
	kube_intern *in = kube_intern_new();
	size_t i;
	if(!rows || !in ||
	   kube_api_call(api, "GET", "/apis/autoscaling.x-k8s.io/v1/provisioningrequests", NULL, NULL, &list, NULL, NULL)) {
		if(in)
			kube_intern_free(in);
		return rows;
	}
	items = json_object_object_get(list, "items");
	for(i = 0; items && i < json_object_array_length(items); i++) {
		kube_meta *m = NULL;
		const kube_provreq *pr;
		const kube_condition *last = NULL;
		json_object *row;
		size_t k;
		if(kube_decode(KUBE_KIND_PROVREQ, json_object_array_get_idx(items, i), in, &m, NULL))
			continue;
		pr = (const kube_provreq *)m;
		for(k = 0; k < pr->nconditions; k++)
			if(!last || pr->conditions[k].last_transition_ns >= last->last_transition_ns)
				last = &pr->conditions[k];
		if((row = json_object_new_object())) {
			json_object_object_add(row, "namespace", json_object_new_string(pr->meta.ns));
			json_object_object_add(row, "name", json_object_new_string(pr->meta.name));
			json_object_object_add(row, "class", json_object_new_string(class_label(pr->class_name)));
			json_object_object_add(row, "state", json_object_new_string(sim_state_name(sim_state_of(
				cond_col(pr, PR_COND_PROVISIONED), cond_reason(pr, PR_COND_PROVISIONED),
				cond_col(pr, PR_COND_FAILED), cond_col(pr, PR_COND_BOOKING_EXPIRED)))));
			json_object_object_add(row, "accepted", json_object_new_string(cond_col(pr, PR_COND_ACCEPTED)));
			json_object_object_add(row, "provisioned", json_object_new_string(cond_col(pr, PR_COND_PROVISIONED)));
			json_object_object_add(row, "failed", json_object_new_string(cond_col(pr, PR_COND_FAILED)));
			json_object_object_add(row, "bookingExpired",
					       json_object_new_string(cond_col(pr, PR_COND_BOOKING_EXPIRED)));
			json_object_object_add(row, "reason", json_object_new_string(last && last->reason ? last->reason : ""));
			json_object_object_add(row, "message",
					       json_object_new_string(last && last->message ? last->message : ""));
			json_object_array_add(rows, row);
		}
		kube_obj_free(in, m);
	}
	json_object_put(list);
	kube_intern_free(in);
	return rows;
}

static const char *row_str(json_object *row, const char *key)
{
	const char *s = json_object_get_string(json_object_object_get(row, key));
	return s ? s : "";
}

static void print_requests(json_object *rows)
{
	size_t i;
	printf("%-12s %-22s %-16s %-9s %-12s %-7s %-15s %s\n", "NAMESPACE", "NAME", "CLASS", "ACCEPTED",
	       "PROVISIONED", "FAILED", "BOOKINGEXPIRED", "REASON: MESSAGE");
	for(i = 0; i < json_object_array_length(rows); i++) {
		json_object *r = json_object_array_get_idx(rows, i);
		printf("%-12s %-22s %-16s %-9s %-12s %-7s %-15s %s%s%s\n", row_str(r, "namespace"), row_str(r, "name"),
		       row_str(r, "class"), row_str(r, "accepted"), row_str(r, "provisioned"), row_str(r, "failed"),
		       row_str(r, "bookingExpired"), row_str(r, "reason"), *row_str(r, "reason") ? ": " : "",
		       row_str(r, "message"));
	}
}

/* Every condition change, stamped with simulated time. */
static void print_transitions(const sim_record *r)
{
	size_t i;
	printf("%-20s %-9s %-30s %-24s %s\n", "TIME", "OFFSET", "REQUEST", "CONDITION", "REASON: MESSAGE");
	for(i = 0; i < r->ntr; i++) {
		const sim_transition *t = &r->tr[i];
		char ts[64], off[32], who[300], cond[80];
		if(t->initial)
			continue;
		sim_time_str(t->t, ts, sizeof(ts));
		sim_offset_str(r->start, t->t, off, sizeof(off));
		snprintf(who, sizeof(who), "%s/%s", t->ns, t->name);
		snprintf(cond, sizeof(cond), "%s=%s", t->type, t->status);
		printf("%-20s %-9s %-30s %-24s %s%s%s\n", ts, off, who, cond, t->reason, *t->reason ? ": " : "",
		       t->message);
	}
	printf("\n");
}

/* Node-group sizes over the run, sampled after every pass: the largest
 * target seen, and the nodes added and removed (target changes between
 * passes), so the final table shows scale-ups that were later scaled
 * down. */
typedef struct sim_group {
	char *id;
	int32_t first, last, peak, added, removed;
	int32_t min, max;
	const char *driver;      /* the driver's name (borrowed from its descriptor) */
	bool listed;             /* listed by its driver at the last sample */
	bool autop;              /* auto-provisioned (the driver's group_owner says so) */
	bool deleted;            /* listed once, not any more: the driver deleted it */
	int64_t created_at, deleted_at; /* auto-provisioned: when first and last seen */
} sim_group;

typedef struct sim_groups {
	sim_group *v;
	size_t n;
	bool sampled;            /* the first sample (the input's groups) is taken */
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

/* Ready Nodes per group id (JSON object id -> count; caller releases):
 * each Ready Node is asked of every driver that can say its group. */
static json_object *ready_nodes(cloud_drivers *drivers, const kube_api *api)
{
	json_object *list = NULL, *items, *counts = json_object_new_object();
	size_t i, d, k;
	if(!counts || kube_api_call(api, "GET", "/api/v1/nodes", NULL, NULL, &list, NULL, NULL))
		return counts;
	items = json_object_object_get(list, "items");
	for(i = 0; items && i < json_object_array_length(items); i++) {
		json_object *node = json_object_array_get_idx(items, i);
		json_object *conds = json_object_object_get(json_object_object_get(node, "status"), "conditions");
		bool ready = false;
		for(k = 0; conds && k < json_object_array_length(conds); k++) {
			json_object *c = json_object_array_get_idx(conds, k);
			ready |= str_eq(json_object_get_string(json_object_object_get(c, "type")), "Ready") &&
				 str_eq(json_object_get_string(json_object_object_get(c, "status")), "True");
		}
		for(d = 0; ready && d < drivers->n; d++) {
			cloud_driver *drv = drivers->v[d];
			prd_cloud_error de;
			char *gid = NULL;
			if(!CLOUD_DRIVER_HAS(drv->api, node_group_for_node) || !drv->api->node_group_for_node ||
			   drv->api->node_group_for_node(drv->state, json_object_to_json_string(node), &gid, &de) || !gid)
				continue;
			json_object_object_add(counts, gid,
					       json_object_new_int(json_object_get_int(json_object_object_get(counts, gid)) + 1));
			drv->api->release_string(drv->state, gid);
			break;
		}
	}
	json_object_put(list);
	return counts;
}

/* Sample every group: the peak/added/removed table, and a size sample
 * (target, Ready nodes) at the current simulated time for the report. */
static void track_groups(cloud_drivers *drivers, const kube_api *api, sim_groups *t, sim_record *rec, int64_t now)
{
	json_object *ready = ready_nodes(drivers, api);
	size_t d, i;
	for(i = 0; i < t->n; i++)
		t->v[i].listed = false;
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
			s->min = g[i].min_size;
			s->max = g[i].max_size;
			s->driver = drv->api->name;
			s->listed = true;
			s->deleted = false;
			if(!s->autop && cloud_driver_naps(drv->api)) {
				char *owner = NULL;
				if(drv->api->group_owner(drv->state, g[i].id, &owner, &de) == 0 && owner) {
					s->autop = true;
					s->created_at = now;
					drv->api->release_string(drv->state, owner);
					/* Made during the run: it started empty. */
					if(t->sampled && s->first == s->last && !s->added) {
						s->added = s->last;
						s->first = 0;
					}
				}
			}
			sim_record_size(rec, now, g[i].id, g[i].target_size,
					json_object_get_int(json_object_object_get(ready, g[i].id)));
		}
		drv->api->release_node_groups(drv->state, g, n);
	}
	/* Groups the drivers no longer list (auto-provisioned ones deleted). */
	for(i = 0; i < t->n; i++)
		if(!t->v[i].listed && !t->v[i].deleted) {
			t->v[i].deleted = true;
			t->v[i].deleted_at = now;
			t->v[i].removed += t->v[i].last;
			t->v[i].last = 0;
			sim_record_size(rec, now, t->v[i].id, 0, 0);
		}
	t->sampled = true;
	json_object_put(ready);
}

/* The final node-group table as JSON rows (caller releases): every group
 * seen during the run, auto-provisioned ones (created, maybe deleted)
 * included. */
static json_object *group_rows(cloud_drivers *drivers, sim_groups *t)
{
	json_object *rows = json_object_new_array();
	size_t i;
	(void)drivers;
	for(i = 0; rows && i < t->n; i++) {
		const sim_group *s = &t->v[i];
		json_object *row = json_object_new_object();
		char ts[RFC3339_MAX];
		if(!row)
			continue;
		json_object_object_add(row, "group", json_object_new_string(s->id));
		json_object_object_add(row, "driver", json_object_new_string(s->driver ? s->driver : ""));
		json_object_object_add(row, "min", json_object_new_int(s->min));
		json_object_object_add(row, "max", json_object_new_int(s->max));
		json_object_object_add(row, "target", json_object_new_int(s->last));
		json_object_object_add(row, "peak", json_object_new_int(s->peak));
		json_object_object_add(row, "added", json_object_new_int(s->added));
		json_object_object_add(row, "removed", json_object_new_int(s->removed));
		json_object_object_add(row, "autoProvisioned", json_object_new_boolean(s->autop));
		if(s->autop) {
			rfc3339_format(s->created_at, ts, sizeof(ts));
			json_object_object_add(row, "created", json_object_new_string(ts));
		}
		if(s->deleted) {
			rfc3339_format(s->deleted_at, ts, sizeof(ts));
			json_object_object_add(row, "deleted", json_object_new_string(ts));
		}
		json_object_array_add(rows, row);
	}
	return rows;
}

static int row_int(json_object *row, const char *key)
{
	return json_object_get_int(json_object_object_get(row, key));
}

static void print_groups(json_object *rows)
{
	size_t i;
	printf("\n%-24s %-5s %-5s %-7s %-6s %-6s %-6s %s\n", "NODE GROUP", "MIN", "MAX", "TARGET", "PEAK", "ADDED",
	       "REMOVED", "DRIVER");
	for(i = 0; i < json_object_array_length(rows); i++) {
		json_object *r = json_object_array_get_idx(rows, i), *c = json_object_object_get(r, "created"),
			    *d = json_object_object_get(r, "deleted");
		printf("%-24s %-5d %-5d %-7d %-6d %-6d %-7d %s", row_str(r, "group"), row_int(r, "min"),
		       row_int(r, "max"), row_int(r, "target"), row_int(r, "peak"), row_int(r, "added"),
		       row_int(r, "removed"), row_str(r, "driver"));
		if(c)
			printf("  auto-provisioned %s%s%s", json_object_get_string(c), d ? ", deleted " : "",
			       d ? json_object_get_string(d) : "");
		printf("\n");
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
	const char *cluster, *driver_path, *cfg_path, *plot, *prio_file;
	const char **requests; /* --request files (argv strings) */
	size_t nrequests;
	int64_t until;
	int level, fmt, output;
	pr_config cfg;
	cfg limits;             /* --cores-total, --memory-total, --gpu-total (only those) */
	cfg_res_limit *res;     /* ... parsed */
} sim_opts;

enum { SIM_OUT_TEXT, SIM_OUT_JSON, SIM_OUT_YAML };

/* --until, --booking-ttl or --provision-timeout (getopt's `c`): false,
 * after saying why, when the value is not a positive duration. */
static bool sim_duration(int c, const char *arg, sim_opts *o)
{
	const char *flag = c == 'u' ? "until" : c == 'b' ? "booking-ttl" : c == 'I' ? "scale-down-idle" : "provision-timeout";
	int64_t d;
	int rc = str_parse_duration(arg, &d);
	if(rc == PRD_ERANGE) {
		fprintf(stderr, "provreqd simulate: --%s: \"%s\" is too long\n", flag, arg);
		return false;
	}
	if(rc || d <= 0) {
		fprintf(stderr, "provreqd simulate: --%s: \"%s\" is not a positive duration (e.g. 30m, 2h)\n", flag, arg);
		return false;
	}
	if(c == 'u')
		o->until = d;
	else if(c == 'b')
		o->cfg.booking_ttl_ns = d;
	else if(c == 'I')
		o->cfg.scale_down_idle_ns = d;
	else
		o->cfg.provision_timeout_ns = d;
	return true;
}

/* --v as `run` reads it (the option table's row): any level klog takes,
 * 0 and up; 4 and above is trace. */
static bool sim_level(const char *arg, int *level)
{
	int64_t v;
	if(str_to_int64(arg, &v) || v < PRD_LOG_ERROR || v > 2147483647) {
		fprintf(stderr, "provreqd simulate: --v: want an integer 0..2147483647 (0 error, 1 warn, 2 info, 3 debug, "
			"4 and above trace), got '%s'\n", arg);
		return false;
	}
	*level = v > PRD_LOG_TRACE ? PRD_LOG_TRACE : (int)v;
	return true;
}

/* --max-autoprovisioned-groups: an integer in [0, 10000]. */
static bool sim_max_groups(const char *arg, sim_opts *o)
{
	char *end;
	long long v = strtoll(arg, &end, 10);
	if(!*arg || *end || v < 0 || v > 10000) {
		fprintf(stderr, "provreqd simulate: --max-autoprovisioned-groups: \"%s\" is not a number in "
			"[0, 10000]\n", arg);
		return false;
	}
	o->cfg.nap_max_groups = v;
	return true;
}

/* --cores-total (c 'X'), --memory-total ('Y'): the last one given counts;
 * --gpu-total ('G'): each one adds a limit. Checked later (sim_check). */
static void sim_limit(int c, const char *arg, sim_opts *o)
{
	char **slot = c == 'X' ? &o->limits.cores_total : c == 'Y' ? &o->limits.memory_total : NULL;
	if(slot) {
		free(*slot);
		*slot = str_dup(arg);
	} else {
		char **nv = realloc(o->limits.gpu_total.v, (o->limits.gpu_total.n + 1) * sizeof(*nv));
		if(nv) {
			o->limits.gpu_total.v = nv;
			nv[o->limits.gpu_total.n] = str_dup(arg);
			if(nv[o->limits.gpu_total.n])
				o->limits.gpu_total.n++;
		}
	}
}

/* -o: text, json or yaml. */
static bool sim_output(const char *arg, sim_opts *o)
{
	if(!strcmp(arg, "text"))
		o->output = SIM_OUT_TEXT;
	else if(!strcmp(arg, "json"))
		o->output = SIM_OUT_JSON;
	else if(!strcmp(arg, "yaml"))
		o->output = SIM_OUT_YAML;
	else {
		fprintf(stderr, "provreqd simulate: -o: \"%s\" is not text, json or yaml\n", arg);
		return false;
	}
	return true;
}

/* After the options: the cluster-wide limits parsed, and a priority
 * expander given its table. */
static bool sim_check(sim_opts *o)
{
	{
		buf why;
		size_t n = 0;
		buf_init(&why);
		if(cfg_res_limits(&o->limits, &o->res, &n, &why)) {
			fprintf(stderr, "provreqd simulate: %s\n", why.len ? buf_str(&why) : "out of memory");
			buf_free(&why);
			return false;
		}
		buf_free(&why);
		o->cfg.res_limits = o->res;
		o->cfg.nres_limits = n;
	}
	if(o->cfg.expander) {
		buf why;
		int bad;
		buf_init(&why);
		bad = cfg_check_expander(o->cfg.expander, &why);
		if(bad)
			fprintf(stderr, "provreqd simulate: --expander: %s\n", why.len ? buf_str(&why) : "out of memory");
		buf_free(&why);
		if(bad)
			return false;
	}
	if(o->prio_file && !cfg_chain_has_priority(o->cfg.expander))
		fprintf(stderr, "provreqd simulate: warning: --priority-file: given, but --expander (%s) does not name "
			"'priority': the table is not used\n", o->cfg.expander ? o->cfg.expander : "least-waste");
	if(cfg_chain_has_priority(o->cfg.expander) && !o->prio_file) {
		fprintf(stderr, "provreqd simulate: --expander %s: 'priority' needs a priority table: give "
			"--priority-file FILE (a cluster-autoscaler-priority-expander ConfigMap, or its "
			"priorities map: integer priority -> list of node-group name regexes)\n", o->cfg.expander);
		return false;
	}
	return true;
}

/* Parse the command line into `o` (o->requests is allocated: the caller
 * frees it). true to go on; false to end at once with *exit_code (0 after
 * --help, 2 for a bad command line). */
static bool sim_parse(int argc, char **argv, sim_opts *o, int *exit_code)
{
	static const struct option opts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "request", required_argument, NULL, 'r' },
		{ "until", required_argument, NULL, 'u' },
		{ "output", required_argument, NULL, 'o' },
		{ "plot", required_argument, NULL, 'p' },
		{ "cloud-driver", required_argument, NULL, 'd' },
		{ "cloud-config", required_argument, NULL, 'C' },
		{ "booking-ttl", required_argument, NULL, 'b' },
		{ "provision-timeout", required_argument, NULL, 't' },
		{ "expander", required_argument, NULL, 'e' },
		{ "priority-file", required_argument, NULL, 'P' },
		{ "node-autoprovisioning", no_argument, NULL, 'N' },
		{ "max-autoprovisioned-groups", required_argument, NULL, 'M' },
		{ "scale-down-idle", required_argument, NULL, 'I' },
		{ "cores-total", required_argument, NULL, 'X' },
		{ "memory-total", required_argument, NULL, 'Y' },
		{ "gpu-total", required_argument, NULL, 'G' },
		{ "log-format", required_argument, NULL, 'f' },
		{ "v", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	*exit_code = 2;
	optind = 0;
	o->requests = calloc((size_t)argc + 1, sizeof(*o->requests));
	if(!o->requests) {
		fprintf(stderr, "provreqd simulate: out of memory\n");
		*exit_code = 1;
		return false;
	}
	while((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch(c) {
		case 'c': o->cluster = optarg; break;
		case 'r': o->requests[o->nrequests++] = optarg; break;
		case 'p': o->plot = optarg; break;
		case 'd': o->driver_path = optarg; break;
		case 'C': o->cfg_path = optarg; break;
		case 'e': o->cfg.expander = optarg; break;
		case 'P': o->prio_file = optarg; break;
		case 'N': o->cfg.nap = true; break;
		case 'M':
			if(!sim_max_groups(optarg, o))
				return false;
			break;
		case 'X':
		case 'Y':
		case 'G':
			sim_limit(c, optarg, o);
			break;
		case 'o':
			if(!sim_output(optarg, o))
				return false;
			break;
		case 'u':
		case 'b':
		case 't':
		case 'I':
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
			if(!sim_level(optarg, &o->level))
				return false;
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
	if(optind != argc) {
		fprintf(stderr, "provreqd simulate: usage error (see provreqd simulate --help):\n%s: unexpected argument\n",
			argv[optind]);
		return false;
	}
	if(!o->cluster) {
		fprintf(stderr, "provreqd simulate: usage error (see provreqd simulate --help):\n--cluster PATH is required\n");
		return false;
	}
	return sim_check(o);
}

/* What sim_setup() creates and sim_teardown() frees. It stays on
 * cmd_simulate's stack for the whole run and must not move: the memory
 * API, the state store and the logger keep pointers to `clock`, the
 * drivers to `host`, the controller to `drivers`. */
typedef struct sim_ctx {
	clk clock;
	sim_objs input, whatif;
	memapi *m;
	kube_api api;
	state_db *db;
	char *config, *auto_cfg, *driver_default;
	cloud_drivers drivers;
	cloud_host_impl host;
	pr_ctl *ctl;
	sim_groups sizes;
	sim_record rec;
	uint64_t seen_rv;     /* ProvisioningRequest events recorded up to here */
	int64_t end;
	unsigned passes;
} sim_ctx;

/* The driver's configuration: --cloud-config, else cloud-config.yaml in
 * the --cluster directory when there is one. A relative templateDir is
 * taken relative to the config file, so the command works from any
 * directory. */
static int sim_read_cloud_config(sim_ctx *s, const sim_opts *o, prd_err *e)
{
	const char *cfg_path = o->cfg_path;
	char *text = NULL;
	size_t len;
	int rc;

	if(!cfg_path) {
		struct stat st;
		s->auto_cfg = str_printf("%s/cloud-config.yaml", o->cluster);
		if(s->auto_cfg && stat(s->auto_cfg, &st) == 0)
			cfg_path = s->auto_cfg;
	}
	if(!cfg_path)
		return 0;
	if(yj_read_file(cfg_path, 16u << 20, &text, &len, e)) {
		fprintf(stderr, "provreqd simulate: --cloud-config: %s\n", e->msg);
		return 1;
	}
	rc = sim_cloud_config_resolve(cfg_path, text, &s->config, e);
	free(text);
	if(rc) {
		fprintf(stderr, "provreqd simulate: --cloud-config %s: %s\n", cfg_path, e->msg);
		return 1;
	}
	return 0;
}

/* A driver refused to start without a configuration: say what was looked
 * for and what to give. */
static void say_no_cloud_config(const sim_opts *o)
{
	struct stat st;
	bool dir = stat(o->cluster, &st) == 0 && S_ISDIR(st.st_mode);

	fprintf(stderr,
		"provreqd simulate: no cloud config was given: no --cloud-config, and %s%s%s.\n"
		"  Give --cloud-config FILE, or put cloud-config.yaml in the --cluster directory. For the kwok\n"
		"  driver (the default) it says where the node groups come from: 'templateDir: DIR', a\n"
		"  directory of Node templates, one per group, relative to the file (docs/drivers.md;\n"
		"  templates/examples/simulate has one).\n",
		dir ? "there is no " : "--cluster ", o->cluster,
		dir ? "/cloud-config.yaml" : " is a file, so no cloud-config.yaml beside it is read");
}

/* Called for each ProvisioningRequest write since the last look. */
static int on_request_event(void *ud, const char *type, json_object *obj)
{
	sim_ctx *s = ud;
	if(!strcmp(type, "DELETED"))
		return 0;
	return sim_record_request(&s->rec, clk_wall(&s->clock), obj, false);
}

/* Record what the controller wrote to ProvisioningRequests since the
 * last call, stamped with the simulated time. */
static void record_requests(sim_ctx *s)
{
	uint64_t last = s->seen_rv;
	if(memapi_events_since(s->m, &KUBE_PROVREQS, NULL, s->seen_rv, on_request_event, s, &last) == 0)
		s->seen_rv = last;
}

/* The requests as loaded: their conditions are the starting point. */
static int record_baseline(sim_ctx *s)
{
	json_object *list = NULL, *items;
	size_t i;
	int rc = 0;
	s->seen_rv = memapi_resource_version(s->m);
	if(kube_api_call(&s->api, "GET", "/apis/autoscaling.x-k8s.io/v1/provisioningrequests", NULL, NULL, &list,
			 NULL, NULL))
		return 0;
	items = json_object_object_get(list, "items");
	for(i = 0; !rc && items && i < json_object_array_length(items); i++)
		rc = sim_record_request(&s->rec, clk_wall(&s->clock), json_object_array_get_idx(items, i), true);
	json_object_put(list);
	return rc;
}

/* Is `cls` served here: a built-in class (or alias) or a loaded driver's? */
static bool class_served(const cloud_drivers *drivers, const char *cls)
{
	size_t i, k;
	if(pr_class_builtin(cls))
		return true;
	for(i = 0; i < drivers->n; i++) {
		const cloud_driver *d = drivers->v[i];
		const char *const *names;
		if(!d->api->provisioning_classes || !d->api->provision)
			continue;
		names = d->api->provisioning_classes(d->state);
		for(k = 0; names && names[k]; k++)
			if(!strcmp(names[k], cls))
				return true;
	}
	return false;
}

/* A what-if request of a class nobody serves would be left alone, as `run`
 * leaves it: say so once, at the start, naming it. */
static void warn_unserved(const sim_ctx *s)
{
	size_t i;
	for(i = 0; i < json_object_array_length(s->whatif.objs); i++) {
		json_object *o = json_object_array_get_idx(s->whatif.objs, i);
		json_object *spec = json_object_object_get(o, "spec");
		const char *kind = json_object_get_string(json_object_object_get(o, "kind"));
		const char *cls = json_object_get_string(json_object_object_get(spec, "provisioningClassName"));
		if(!str_eq(kind, "ProvisioningRequest") || !cls || class_served(&s->drivers, cls))
			continue;
		log_warn("simulate: what-if request of a class neither provreqd nor the driver serves: it is left alone",
			 "where", json_object_get_string(json_object_array_get_idx(s->whatif.where, i)), "class", cls);
	}
}

/* --priority-file into the controller. 0, or 1 after saying why not. */
static int sim_priorities(sim_ctx *s, const sim_opts *o)
{
	sched_priorities p;
	prd_err e;
	int rc;

	if(!o->prio_file)
		return 0;
	rc = sched_priorities_read_file(o->prio_file, &p, &e);
	if(!rc) {
		rc = pr_ctl_set_priorities(s->ctl, p.v, p.n, &e);
		sched_priorities_free(&p);
	}
	if(rc)
		fprintf(stderr, "provreqd simulate: --priority-file %s\n", e.msg);
	return rc ? 1 : 0;
}

/* The cluster in memory (what-if requests included), the state store,
 * the driver and the controller, the clock at the start. 0, or 1 after
 * saying why; sim_teardown() frees what was made either way. */
static int sim_setup(sim_ctx *s, const sim_opts *o)
{
	const char *driver_path = o->driver_path;
	int64_t start;
	state_config sc;
	size_t i, loaded = 0;
	prd_err e;

	if(!s->input.objs || !s->input.where || !s->whatif.objs || !s->whatif.where) {
		fprintf(stderr, "provreqd simulate: out of memory\n");
		return 1;
	}
	if(sim_input_read(o->cluster, &s->input, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		return 1;
	}
	for(i = 0; i < o->nrequests; i++)
		if(sim_requests_read(o->requests[i], &s->whatif, &e)) {
			fprintf(stderr, "provreqd simulate: --request: %s\n", e.msg);
			return 1;
		}
	/* The what-if requests do not move the start: they arrive "now". */
	start = start_time(s->input.objs);
	s->end = start + o->until;
	clk_fake_init(&s->clock, start);
	log_set_clock(&s->clock);
	sim_record_init(&s->rec, start, s->end);
	if(memapi_new(&s->clock, 0, &s->m)) {
		fprintf(stderr, "provreqd simulate: out of memory\n");
		return 1;
	}
	s->api = kube_api_from_memapi(s->m);
	if(sim_input_load(s->m, &s->input, &loaded, &e)) {
		fprintf(stderr, "provreqd simulate: loading %s: %s\n", o->cluster, e.msg);
		return 1;
	}
	if(!loaded)
		log_warn("simulate: the cluster input holds no object that can be simulated", "cluster", o->cluster);
	if(sim_requests_load(s->m, &s->whatif, &e)) {
		fprintf(stderr, "provreqd simulate: --request: %s\n", e.msg);
		return 1;
	}
	if(record_baseline(s)) {
		fprintf(stderr, "provreqd simulate: out of memory\n");
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
		if(!s->config)
			say_no_cloud_config(o);
		return 1;
	}
	warn_unserved(s);
	if(pr_ctl_new(&o->cfg, &s->clock, &s->api, s->db, &s->drivers, &s->ctl, &e)) {
		fprintf(stderr, "provreqd simulate: %s\n", e.msg);
		return 1;
	}
	/* The plan key as `run` has it, from the in-memory API (the loaded
	 * cluster's Secret kube-system/provreqd-plan-key when it has one,
	 * else one made for this run): plans are sealed, and a plan in a
	 * loaded status is taken up only if it verifies. */
	{
		uint8_t key[32];
		if(pr_plan_key_load(&s->api, "kube-system", key, NULL, &e)) {
			fprintf(stderr, "provreqd simulate: plan key: %s\n", e.msg);
			return 1;
		}
		pr_ctl_set_plan_key(s->ctl, key, sizeof(key));
	}
	return sim_priorities(s, o);
}

/* Passes until no timer is pending, the end of the simulated time, or
 * 100000 passes. 0, or 1 after saying why a pass failed. */
static int sim_loop(sim_ctx *s)
{
	prd_err e;

	track_groups(&s->drivers, &s->api, &s->sizes, &s->rec, clk_wall(&s->clock));
	for(;;) {
		int64_t wake;
		uint64_t rv = memapi_resource_version(s->m);
		bool readied;
		if(pr_ctl_pass(s->ctl, &wake, &e)) {
			fprintf(stderr, "provreqd simulate: %s\n", e.msg);
			return 1;
		}
		s->passes++;
		record_requests(s);
		/* What the pass wrote reaches `run` through its watches and starts
		 * another pass (a request turning final lets its nodes idle, say);
		 * here it does so one simulated second later. New fake nodes
		 * turn Ready a moment after they are created. */
		readied = kwok_make_ready(&s->api) > 0;
		track_groups(&s->drivers, &s->api, &s->sizes, &s->rec, clk_wall(&s->clock));
		if((readied || memapi_resource_version(s->m) != rv) && wake > clk_wall(&s->clock) + PRD_NS_PER_SEC)
			wake = clk_wall(&s->clock) + PRD_NS_PER_SEC;
		if(wake == INT64_MAX || wake > s->end || s->passes >= 100000)
			break;
		clk_fake_set(&s->clock, wake > clk_wall(&s->clock) ? wake : clk_wall(&s->clock) + PRD_NS_PER_SEC);
	}
	return 0;
}

/* The whole report as one JSON document (caller releases), or NULL. */
static json_object *report_doc(sim_ctx *s, int64_t until)
{
	const pr_stats *st = pr_ctl_stats(s->ctl);
	json_object *sum = json_object_new_object();
	if(sum) {
		json_object_object_add(sum, "simulatedSeconds", json_object_new_int64(until / PRD_NS_PER_SEC));
		json_object_object_add(sum, "passes", json_object_new_int64(s->passes));
		json_object_object_add(sum, "scaleUpsStarted", json_object_new_int64((int64_t)st->scaleups_started));
		json_object_object_add(sum, "scaleUpsSucceeded", json_object_new_int64((int64_t)st->scaleups_succeeded));
		json_object_object_add(sum, "scaleUpsRolledBack",
				       json_object_new_int64((int64_t)st->scaleups_rolled_back));
		json_object_object_add(sum, "idleNodesScaledDown", json_object_new_int64((int64_t)st->scaledown_nodes));
		json_object_object_add(sum, "statusWrites", json_object_new_int64((int64_t)st->status_writes));
		json_object_object_add(sum, "events", json_object_new_int64((int64_t)st->events));
	}
	return sim_report_doc(&s->rec, request_rows(&s->api), group_rows(&s->drivers, &s->sizes), sum);
}

static void print_text(sim_ctx *s, int64_t until)
{
	const pr_stats *st = pr_ctl_stats(s->ctl);
	json_object *rows = request_rows(&s->api), *groups = group_rows(&s->drivers, &s->sizes);

	print_transitions(&s->rec);
	print_requests(rows);
	print_groups(groups);
	printf("\nsimulated %llds in %u passes: %llu scale-ups started, %llu succeeded, %llu rolled back; "
	       "%llu idle nodes scaled down; %llu status writes, %llu events\n",
	       (long long)(until / PRD_NS_PER_SEC), s->passes, (unsigned long long)st->scaleups_started,
	       (unsigned long long)st->scaleups_succeeded, (unsigned long long)st->scaleups_rolled_back,
	       (unsigned long long)st->scaledown_nodes, (unsigned long long)st->status_writes,
	       (unsigned long long)st->events);
	json_object_put(rows);
	json_object_put(groups);
}

/* Write `b` to `path` whole; 0, or 1 after saying why not. */
static int write_file(const char *path, const buf *b)
{
	FILE *f = fopen(path, "w");
	int rc = 0;
	if(!f || fwrite(b->data, 1, b->len, f) != b->len)
		rc = 1;
	if(f && fclose(f))
		rc = 1;
	if(rc)
		fprintf(stderr, "provreqd simulate: --plot %s: %s\n", path, strerror(errno));
	return rc;
}

/* Can --plot's file be written? Asked before the run, so a bad path is
 * said at once rather than after the whole simulation: the file itself if
 * it exists, else its directory. 0, or 1 after saying why not. */
static int plot_writable(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	if(access(path, F_OK) == 0) {
		if(access(path, W_OK) == 0)
			return 0;
	} else {
		if(!slash)
			snprintf(dir, sizeof(dir), ".");
		else if(slash == path)
			snprintf(dir, sizeof(dir), "/");
		else
			snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
		if(access(dir, W_OK) == 0)
			return 0;
	}
	fprintf(stderr, "provreqd simulate: --plot %s: %s\n", path, strerror(errno));
	return 1;
}

/* The report at the end of the simulated time, in the chosen format, and
 * the plot. 0, or 1 after saying what failed. */
static int sim_report(sim_ctx *s, const sim_opts *o)
{
	int rc = 0;

	clk_fake_set(&s->clock, s->end);
	record_requests(s);
	track_groups(&s->drivers, &s->api, &s->sizes, &s->rec, s->end);
	if(o->output == SIM_OUT_TEXT) {
		print_text(s, o->until);
	} else {
		json_object *doc = report_doc(s, o->until);
		buf b;
		buf_init(&b);
		if(!doc)
			rc = 1;
		else if(o->output == SIM_OUT_JSON)
			rc = buf_printf(&b, "%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
									   JSON_C_TO_STRING_SPACED |
									   JSON_C_TO_STRING_NOSLASHESCAPE)) != 0;
		else
			rc = yj_print_yaml(doc, &b) != 0;
		if(rc)
			fprintf(stderr, "provreqd simulate: cannot write the report (out of memory)\n");
		else
			fwrite(b.data, 1, b.len, stdout);
		buf_free(&b);
		json_object_put(doc);
	}
	if(!rc && o->plot) {
		buf b;
		buf_init(&b);
		if(sim_svg(&s->rec, &b)) {
			fprintf(stderr, "provreqd simulate: cannot draw the plot (out of memory)\n");
			rc = 1;
		} else
			rc = write_file(o->plot, &b);
		buf_free(&b);
	}
	return rc;
}

static void sim_teardown(sim_ctx *s)
{
	log_set_clock(NULL);
	pr_ctl_free(s->ctl);
	sim_groups_free(&s->sizes);
	sim_record_free(&s->rec);
	cloud_drivers_free(&s->drivers);
	state_close(s->db);
	memapi_free(s->m);
	sim_objs_free(&s->input);
	sim_objs_free(&s->whatif);
	free(s->config);
	free(s->auto_cfg);
	free(s->driver_default);
	metrics_shutdown();
}

static void sim_free_opts(sim_opts *o)
{
	size_t i;
	free(o->requests);
	free(o->limits.cores_total);
	free(o->limits.memory_total);
	for(i = 0; i < o->limits.gpu_total.n; i++)
		free(o->limits.gpu_total.v[i]);
	free(o->limits.gpu_total.v);
	free(o->res);
}

int cmd_simulate(int argc, char **argv)
{
	sim_opts o;
	sim_ctx s;
	int rc = 2;

	memset(&o, 0, sizeof(o));
	o.until = 3600 * PRD_NS_PER_SEC;
	o.level = PRD_LOG_WARN;
	o.fmt = PRD_LOG_TEXT;
	pr_config_default(&o.cfg);
	o.limits.cores_total = str_dup("");
	o.limits.memory_total = str_dup("");
	if(!o.limits.cores_total || !o.limits.memory_total || !sim_parse(argc, argv, &o, &rc)) {
		if(!o.limits.cores_total || !o.limits.memory_total)
			rc = 1;
		sim_free_opts(&o);
		return rc;
	}
	if(o.plot && plot_writable(o.plot)) {
		sim_free_opts(&o);
		return 1;
	}
	memset(&s, 0, sizeof(s));
	sim_objs_init(&s.input);
	sim_objs_init(&s.whatif);
	cloud_drivers_init(&s.drivers);
	log_setup(o.level, o.fmt, stderr);
	metrics_init();
	rc = sim_setup(&s, &o);
	if(!rc)
		rc = sim_loop(&s);
	if(!rc)
		rc = sim_report(&s, &o);
	sim_teardown(&s);
	sim_free_opts(&o);
	return rc;
}

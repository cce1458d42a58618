/* example-driver: a complete provreqd cloud driver in one file.
 *
 * It keeps node groups in memory, configured by --cloud-config text with
 * one group per line:
 *
 *     # id     min  max  target  cpu  memory  pods
 *     small    0    10   1       4    16Gi    110
 *     maxPods  10
 *
 * It also serves a provisioning class of its own,
 * instant.example.provreqd.io: a request of that class is provisioned at
 * once when it asks for at most `maxPods` pods in all (default 10), and
 * answered not-provisioned otherwise.
 *
 * "Creating" a node only records it; a real driver would call its cloud's
 * API here and report each instance's progress in instances(). Build it
 * against the installed header:
 *
 *     cc -shared -fPIC $(pkg-config --cflags provreqd-cloud) \
 *        -o example-driver.so example-driver.c
 *
 * and load it with `provreqd check-driver ./example-driver.so
 * --cloud-config groups.txt`. */
#include <provreqd/cloud.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GROUPS 32
#define MAX_NODES 4096
#define ID_MAX 64

struct group {
	char id[ID_MAX];
	int32_t min, max, target;
	char cpu[16], memory[16], pods[16];
	int32_t next_serial;          /* names nodes <id>-<serial> */
};

struct node {
	char name[ID_MAX + 16];
	int group;                    /* index into groups, -1 = free slot */
};

struct state {
	const prd_cloud_host *host;
	struct group groups[MAX_GROUPS];
	int ngroups;
	struct node nodes[MAX_NODES];
	int nnodes;
	long max_pods;                /* the instant class's limit */
};

static int fail(prd_cloud_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	if(err) {
		err->code = code;
		va_start(ap, fmt);
		vsnprintf(err->message, sizeof(err->message), fmt, ap);
		va_end(ap);
	}
	return code;
}

static char *dupstr(const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = malloc(n);
	if(p)
		memcpy(p, s, n);
	return p;
}

static struct group *find_group(struct state *st, const char *id, int *index)
{
	int i;
	for(i = 0; i < st->ngroups; i++) {
		if(strcmp(st->groups[i].id, id) == 0) {
			if(index)
				*index = i;
			return &st->groups[i];
		}
	}
	return NULL;
}

/* Parse the configuration text; each non-comment line is one group. */
static int parse_config(struct state *st, const char *config, prd_cloud_error *err)
{
	const char *p = config;
	int line = 0;
	while(p && *p) {
		char buf[256];
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		struct group g;
		int n;
		line++;
		if(len >= sizeof(buf))
			return fail(err, PRD_CLOUD_EINVAL, "config line %d is too long", line);
		memcpy(buf, p, len);
		buf[len] = '\0';
		p = nl ? nl + 1 : NULL;
		if(buf[strspn(buf, " \t")] == '#' || buf[strspn(buf, " \t")] == '\0')
			continue;
		if(sscanf(buf, " maxPods %ld", &st->max_pods) == 1) {
			if(st->max_pods < 0)
				return fail(err, PRD_CLOUD_EINVAL, "config line %d: maxPods must be >= 0", line);
			continue;
		}
		memset(&g, 0, sizeof(g));
		n = sscanf(buf, "%63s %d %d %d %15s %15s %15s", g.id, &g.min, &g.max, &g.target,
			   g.cpu, g.memory, g.pods);
		if(n != 7)
			return fail(err, PRD_CLOUD_EINVAL,
				    "config line %d: want 'id min max target cpu memory pods'", line);
		if(g.min < 0 || g.max < g.min || g.target < g.min || g.target > g.max)
			return fail(err, PRD_CLOUD_EINVAL,
				    "config line %d: need 0 <= min <= target <= max", line);
		if(find_group(st, g.id, NULL))
			return fail(err, PRD_CLOUD_EINVAL, "config line %d: duplicate group %s", line, g.id);
		if(st->ngroups == MAX_GROUPS)
			return fail(err, PRD_CLOUD_EINVAL, "more than %d groups", MAX_GROUPS);
		st->groups[st->ngroups++] = g;
	}
	return 0;
}

static int add_nodes(struct state *st, int gi, int32_t delta)
{
	struct group *g = &st->groups[gi];
	char name[sizeof(st->nodes[0].name)];
	int32_t i;
	for(i = 0; i < delta; i++) {
		if(st->nnodes == MAX_NODES)
			return PRD_CLOUD_ERANGE;
		snprintf(name, sizeof(name), "%s-%d", g->id, (int)g->next_serial++);
		memcpy(st->nodes[st->nnodes].name, name, sizeof(name));
		st->nodes[st->nnodes].group = gi;
		st->nnodes++;
	}
	return 0;
}

static int ex_init(const prd_cloud_host *host, const char *config, void **state, prd_cloud_error *err)
{
	struct state *st = calloc(1, sizeof(*st));
	int rc, i;
	if(!st)
		return fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	st->host = host;
	st->max_pods = 10;
	rc = parse_config(st, config, err);
	for(i = 0; !rc && i < st->ngroups; i++)
		rc = add_nodes(st, i, st->groups[i].target);
	if(rc) {
		free(st);
		return rc;
	}
	host->log(host->ctx, PRD_CLOUD_LOG_INFO, "example driver ready");
	*state = st;
	return 0;
}

static void ex_fini(void *state)
{
	free(state);
}

static int ex_refresh(void *state, prd_cloud_error *err)
{
	(void)state;
	(void)err;
	return 0;
}

static int ex_node_groups(void *state, prd_cloud_node_group **out, size_t *count, prd_cloud_error *err)
{
	struct state *st = state;
	prd_cloud_node_group *v = calloc((size_t)st->ngroups + 1, sizeof(*v));
	int i;
	if(!v)
		return fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < st->ngroups; i++) {
		v[i].id = dupstr(st->groups[i].id);
		v[i].min_size = st->groups[i].min;
		v[i].max_size = st->groups[i].max;
		v[i].target_size = st->groups[i].target;
	}
	*out = v;
	*count = (size_t)st->ngroups;
	return 0;
}

static void ex_release_node_groups(void *state, prd_cloud_node_group *groups, size_t count)
{
	size_t i;
	(void)state;
	for(i = 0; i < count; i++)
		free(groups[i].id);
	free(groups);
}

/* The providerID ("example://<node>") tells which group a node is in. */
static int ex_node_group_for_node(void *state, const char *node_json, char **group_id, prd_cloud_error *err)
{
	struct state *st = state;
	const char *p = node_json ? strstr(node_json, "\"example://") : NULL;
	int i;
	*group_id = NULL;
	if(!p)
		return 0;
	p += strlen("\"example://");
	for(i = 0; i < st->nnodes; i++) {
		size_t n = strlen(st->nodes[i].name);
		if(strncmp(p, st->nodes[i].name, n) == 0 && p[n] == '"') {
			*group_id = dupstr(st->groups[st->nodes[i].group].id);
			return *group_id ? 0 : fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
	}
	return 0;
}

static int ex_instances(void *state, const char *group_id, prd_cloud_instance **out, size_t *count,
			prd_cloud_error *err)
{
	struct state *st = state;
	prd_cloud_instance *v;
	int gi, i;
	size_t n = 0;
	char id[ID_MAX + 32];
	if(!find_group(st, group_id, &gi))
		return fail(err, PRD_CLOUD_ENOTFOUND, "no node group %s", group_id);
	v = calloc((size_t)st->nnodes + 1, sizeof(*v));
	if(!v)
		return fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < st->nnodes; i++) {
		if(st->nodes[i].group != gi)
			continue;
		snprintf(id, sizeof(id), "example://%s", st->nodes[i].name);
		v[n].id = dupstr(id);
		v[n].node_name = dupstr(st->nodes[i].name);
		v[n].state = PRD_CLOUD_INSTANCE_RUNNING;
		n++;
	}
	*out = v;
	*count = n;
	return 0;
}

static void ex_release_instances(void *state, prd_cloud_instance *v, size_t count)
{
	size_t i;
	(void)state;
	for(i = 0; i < count; i++) {
		free(v[i].id);
		free(v[i].node_name);
		free(v[i].error_code);
		free(v[i].error_message);
	}
	free(v);
}

static int ex_template_node(void *state, const char *group_id, char **node_json, prd_cloud_error *err)
{
	struct state *st = state;
	struct group *g = find_group(st, group_id, NULL);
	char buf[1024];
	if(!g)
		return fail(err, PRD_CLOUD_ENOTFOUND, "no node group %s", group_id);
	snprintf(buf, sizeof(buf),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s-template\","
		 "\"labels\":{\"example.provreqd.io/group\":\"%s\"}},"
		 "\"status\":{\"capacity\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"%s\"},"
		 "\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"%s\"}}}",
		 g->id, g->id, g->cpu, g->memory, g->pods, g->cpu, g->memory, g->pods);
	*node_json = dupstr(buf);
	return *node_json ? 0 : fail(err, PRD_CLOUD_ENOMEM, "out of memory");
}

static int ex_increase(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	struct state *st = state;
	int gi;
	struct group *g = find_group(st, group_id, &gi);
	if(!g)
		return fail(err, PRD_CLOUD_ENOTFOUND, "no node group %s", group_id);
	if(delta <= 0)
		return fail(err, PRD_CLOUD_EINVAL, "delta must be positive, got %d", (int)delta);
	if(delta > g->max - g->target)
		return fail(err, PRD_CLOUD_ERANGE, "group %s: %d + %d exceeds max %d", group_id,
			    (int)g->target, (int)delta, (int)g->max);
	if(add_nodes(st, gi, delta))
		return fail(err, PRD_CLOUD_ERANGE, "the example driver holds at most %d nodes", MAX_NODES);
	g->target += delta;
	return 0;
}

static int ex_delete_nodes(void *state, const char *group_id, const char *const *names, size_t count,
			   prd_cloud_error *err)
{
	struct state *st = state;
	int gi, i;
	size_t k;
	struct group *g = find_group(st, group_id, &gi);
	if(!g)
		return fail(err, PRD_CLOUD_ENOTFOUND, "no node group %s", group_id);
	if((int32_t)count > g->target - g->min)
		return fail(err, PRD_CLOUD_ERANGE, "group %s: deleting %zu nodes goes below min %d",
			    group_id, count, (int)g->min);
	for(k = 0; k < count; k++) {
		for(i = 0; i < st->nnodes; i++)
			if(st->nodes[i].group == gi && strcmp(st->nodes[i].name, names[k]) == 0)
				break;
		if(i == st->nnodes)
			return fail(err, PRD_CLOUD_ENOTFOUND, "group %s has no node %s", group_id, names[k]);
	}
	for(k = 0; k < count; k++) {
		for(i = 0; i < st->nnodes; i++) {
			if(st->nodes[i].group == gi && strcmp(st->nodes[i].name, names[k]) == 0) {
				st->nodes[i] = st->nodes[--st->nnodes];
				g->target--;
				break;
			}
		}
	}
	return 0;
}

static int ex_decrease_target(void *state, const char *group_id, int32_t delta, prd_cloud_error *err)
{
	(void)state;
	(void)delta;
	/* Every node this driver creates exists at once, so there is never
	 * an unfulfilled request to cancel. */
	return fail(err, PRD_CLOUD_EUNSUPPORTED, "group %s has no pending nodes to cancel", group_id);
}

/* ---- the driver's own class ---------------------------------------- */

static const char *const classes[] = { "instant.example.provreqd.io", NULL };

static const char *const *ex_classes(void *state)
{
	(void)state;
	return classes;
}

/* The total pod count of the request: the sum of "count" in
 * spec.podSets. The host writes compact JSON; a real driver would use a
 * JSON parser instead of this scan. */
static long total_pods(const char *request_json)
{
	const char *p = strstr(request_json, "\"podSets\":["), *end;
	long total = 0;
	if(!p)
		return -1;
	end = strchr(p, ']');
	while((p = strstr(p, "\"count\":")) && (!end || p < end)) {
		p += strlen("\"count\":");
		total += strtol(p, NULL, 10);
	}
	return total;
}

/* provreqd may call this again for the same request (after a call that
 * timed out, a restart, another replica taking over, a PENDING answer).
 * This class creates nothing, so a repeated call is harmless; a class
 * that creates capacity must key it on the request's metadata.uid and,
 * for a uid it already acted on, report what it made instead of making
 * more. */
static int ex_provision(void *state, const char *class_name, const char *request_json,
			const char *templates_json, prd_cloud_outcome *outcome, prd_cloud_error *err)
{
	struct state *st = state;
	long pods = total_pods(request_json);
	(void)templates_json;
	if(strcmp(class_name, classes[0]) != 0)
		return fail(err, PRD_CLOUD_EINVAL, "class %s is not served here", class_name);
	if(pods < 0)
		return fail(err, PRD_CLOUD_EINVAL, "the request has no podSets");
	if(pods <= st->max_pods) {
		outcome->state = PRD_CLOUD_OUTCOME_PROVISIONED;
		snprintf(outcome->reason, sizeof(outcome->reason), "InstantCapacity");
		snprintf(outcome->message, sizeof(outcome->message),
			 "the example driver provisioned %ld pods at once (at most %ld)", pods, st->max_pods);
	} else {
		outcome->state = PRD_CLOUD_OUTCOME_NOT_PROVISIONED;
		snprintf(outcome->reason, sizeof(outcome->reason), "TooManyPods");
		snprintf(outcome->message, sizeof(outcome->message),
			 "the example driver provisions at most %ld pods per request; this one asks for %ld",
			 st->max_pods, pods);
	}
	return 0;
}

static void ex_release_string(void *state, char *s)
{
	(void)state;
	free(s);
}

static const prd_cloud_driver descriptor = {
	.abi_major = PRD_CLOUD_ABI_MAJOR,
	.abi_minor = PRD_CLOUD_ABI_MINOR,
	.struct_size = sizeof(prd_cloud_driver),
	.name = "example",
	.init = ex_init,
	.fini = ex_fini,
	.refresh = ex_refresh,
	.node_groups = ex_node_groups,
	.release_node_groups = ex_release_node_groups,
	.node_group_for_node = ex_node_group_for_node,
	.instances = ex_instances,
	.release_instances = ex_release_instances,
	.template_node = ex_template_node,
	.increase_size = ex_increase,
	.atomic_increase_size = ex_increase, /* all-or-nothing already: it checks max first */
	.delete_nodes = ex_delete_nodes,
	.decrease_target_size = ex_decrease_target,
	.release_string = ex_release_string,
	.provisioning_classes = ex_classes,
	.provision = ex_provision,
	/* ABI 1.3: the stride of the arrays instances() returns. Required
	 * once the descriptor reaches it (sizeof(prd_cloud_driver) does):
	 * the host steps through the array by it. */
	.instance_size = sizeof(prd_cloud_instance),
};

const prd_cloud_driver *provreqd_cloud_driver(void);

const prd_cloud_driver *provreqd_cloud_driver(void)
{
	return &descriptor;
}

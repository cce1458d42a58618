/* example-driver: a complete provreqd cloud driver in one file.
 *
 * It keeps node groups in memory, configured by --cloud-config text with
 * one group per line:
 *
 *     # id     min  max  target  cpu  memory  pods
 *     small    0    10   1       4    16Gi    110
 *     maxPods  10
 *     # shape  name  cpu  memory  pods  max  price-per-hour-in-micros (-1 unknown)
 *     shape    big   32   128Gi   110   20   2500000
 *
 * A `shape` line offers a machine shape for node auto-provisioning (ABI
 * 1.5): provreqd may create a group of it for pods no group can serve,
 * with the labels and taints those pods need, and delete it again once
 * empty. This example keeps such groups in memory, which a real driver
 * must not do: it keeps them in its cloud (or the API), where a restarted
 * or newly elected provreqd finds them.
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
	/* ABI 1.5: a group create_group made: its owner token and the labels
	 * and taints of its nodes as JSON members ("" for other groups). */
	char owner[64];
	char labels[512];
	char taints[512];
};

struct shape {
	char name[41];
	char cpu[16], memory[16], pods[16];
	int32_t max;
	int64_t price_micros;
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
	struct shape shapes[8];
	int nshapes;
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
		if(!strncmp(buf + strspn(buf, " \t"), "shape", 5)) {
			struct shape sh;
			long long price;
			memset(&sh, 0, sizeof(sh));
			if(sscanf(buf, " shape %40s %15s %15s %15s %d %lld", sh.name, sh.cpu, sh.memory, sh.pods, &sh.max,
				  &price) != 6 || sh.max < 1 || price < -1)
				return fail(err, PRD_CLOUD_EINVAL,
					    "config line %d: want 'shape name cpu memory pods max price-micros'", line);
			if(st->nshapes == (int)(sizeof(st->shapes) / sizeof(st->shapes[0])))
				return fail(err, PRD_CLOUD_EINVAL, "config line %d: too many shapes", line);
			sh.price_micros = price;
			st->shapes[st->nshapes++] = sh;
			continue;
		}
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
	char buf[2048];
	if(!g)
		return fail(err, PRD_CLOUD_ENOTFOUND, "no node group %s", group_id);
	snprintf(buf, sizeof(buf),
		 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s-template\","
		 "\"labels\":{\"example.provreqd.io/group\":\"%s\"%s}},\"spec\":{\"taints\":[%s]},"
		 "\"status\":{\"capacity\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"%s\"},"
		 "\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"%s\"}}}",
		 g->id, g->id, g->labels, g->taints, g->cpu, g->memory, g->pods, g->cpu, g->memory, g->pods);
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

/* ---- ABI 1.5: node auto-provisioning ------------------------------------ */

static int ex_shapes(void *state, prd_cloud_shape **out, size_t *count, prd_cloud_error *err)
{
	struct state *st = state;
	prd_cloud_shape *v = calloc((size_t)st->nshapes + 1, sizeof(*v));
	char buf[512];
	int i;
	if(!v)
		return fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	for(i = 0; i < st->nshapes; i++) {
		const struct shape *sh = &st->shapes[i];
		snprintf(buf, sizeof(buf),
			 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":"
			 "{\"node.kubernetes.io/instance-type\":\"%s\"}},\"status\":{\"capacity\":{\"cpu\":\"%s\","
			 "\"memory\":\"%s\",\"pods\":\"%s\"},\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\","
			 "\"pods\":\"%s\"}}}",
			 sh->name, sh->name, sh->cpu, sh->memory, sh->pods, sh->cpu, sh->memory, sh->pods);
		v[i].name = dupstr(sh->name);
		v[i].node_json = dupstr(buf);
		v[i].zones = NULL; /* this cloud has no zones */
		v[i].price_micros = sh->price_micros;
		v[i].max_size = sh->max;
		if(!v[i].name || !v[i].node_json) {
			*out = v;
			*count = (size_t)i + 1;
			return fail(err, PRD_CLOUD_ENOMEM, "out of memory");
		}
	}
	*out = v;
	*count = (size_t)st->nshapes;
	return 0;
}

static void ex_release_shapes(void *state, prd_cloud_shape *v, size_t count)
{
	size_t i;
	(void)state;
	for(i = 0; v && i < count; i++) {
		free(v[i].name);
		free(v[i].node_json);
		free(v[i].zones);
	}
	free(v);
}

/* Text that may go into a JSON string as it is. */
static int plain(const char *s)
{
	return s && !strpbrk(s, "\"\\");
}

/* Append `,"key":"value"` to a group's labels; false when it does not fit
 * or is not plain text. */
static int label_add(struct group *g, const char *key, const char *value)
{
	size_t used = strlen(g->labels);
	int n;
	if(!plain(key) || !plain(value))
		return 0;
	n = snprintf(g->labels + used, sizeof(g->labels) - used, ",\"%s\":\"%s\"", key, value);
	return n > 0 && (size_t)n < sizeof(g->labels) - used;
}

/* Append a taint object to a group's taints (the same rules). */
static int taint_add(struct group *g, const char *key, const char *value, const char *effect)
{
	size_t used = strlen(g->taints);
	int n;
	if(!plain(key) || !plain(value) || !plain(effect))
		return 0;
	n = snprintf(g->taints + used, sizeof(g->taints) - used, "%s{\"key\":\"%s\",\"value\":\"%s\",\"effect\":\"%s\"}",
		     used ? "," : "", key, value, effect);
	return n > 0 && (size_t)n < sizeof(g->taints) - used;
}

static int ex_create_group(void *state, const prd_cloud_group_create *req, prd_cloud_error *err)
{
	struct state *st = state;
	struct group g, *have;
	const struct shape *sh = NULL;
	size_t i;
	int k;
	if(req->struct_size < sizeof(*req) || !req->group_id || !req->shape || !req->owner)
		return fail(err, PRD_CLOUD_EINVAL, "create_group: incomplete request");
	for(k = 0; k < st->nshapes; k++)
		if(!strcmp(st->shapes[k].name, req->shape))
			sh = &st->shapes[k];
	if(!sh)
		return fail(err, PRD_CLOUD_EINVAL, "create_group: unknown shape %s", req->shape);
	if(req->zone)
		return fail(err, PRD_CLOUD_EINVAL, "create_group: this cloud has no zones");
	if(req->max_size < 1 || req->max_size > sh->max)
		return fail(err, PRD_CLOUD_ERANGE, "create_group: max size %d outside [1, %d]", (int)req->max_size,
			    (int)sh->max);
	if((have = find_group(st, req->group_id, NULL)))
		return strcmp(have->owner, req->owner)
			       ? fail(err, PRD_CLOUD_ECONFLICT, "group %s exists and is not that owner's", req->group_id)
			       : 0; /* a repeated call */
	if(strlen(req->group_id) >= ID_MAX)
		return fail(err, PRD_CLOUD_EINVAL, "create_group: id too long");
	if(st->ngroups == MAX_GROUPS)
		return fail(err, PRD_CLOUD_EIO, "create_group: quota of %d groups reached", MAX_GROUPS);
	memset(&g, 0, sizeof(g));
	snprintf(g.id, sizeof(g.id), "%s", req->group_id);
	snprintf(g.owner, sizeof(g.owner), "%s", req->owner);
	snprintf(g.cpu, sizeof(g.cpu), "%s", sh->cpu);
	snprintf(g.memory, sizeof(g.memory), "%s", sh->memory);
	snprintf(g.pods, sizeof(g.pods), "%s", sh->pods);
	g.max = req->max_size;
	for(i = 0; i < req->nlabels; i++)
		if(!label_add(&g, req->labels[i].key, req->labels[i].value))
			return fail(err, PRD_CLOUD_EINVAL, "create_group: label %s is not one this cloud takes",
				    req->labels[i].key);
	for(i = 0; i < req->ntaints; i++)
		if(!taint_add(&g, req->taints[i].key, req->taints[i].value ? req->taints[i].value : "",
			      req->taints[i].effect))
			return fail(err, PRD_CLOUD_EINVAL, "create_group: taint %s is not one this cloud takes",
				    req->taints[i].key);
	st->groups[st->ngroups++] = g;
	return 0;
}

static int ex_delete_group(void *state, const char *group_id, prd_cloud_error *err)
{
	struct state *st = state;
	int gi, i;
	struct group *g = find_group(st, group_id, &gi);
	if(!g)
		return 0; /* gone already */
	if(!g->owner[0])
		return fail(err, PRD_CLOUD_EINVAL, "group %s was not made by create_group", group_id);
	if(g->target > 0)
		return fail(err, PRD_CLOUD_ERANGE, "group %s is not empty", group_id);
	for(i = 0; i < st->nnodes; i++)
		if(st->nodes[i].group > gi)
			st->nodes[i].group--;
	memmove(&st->groups[gi], &st->groups[gi + 1], (size_t)(st->ngroups - gi - 1) * sizeof(*g));
	st->ngroups--;
	return 0;
}

static int ex_group_owner(void *state, const char *group_id, char **owner, prd_cloud_error *err)
{
	struct group *g = find_group(state, group_id, NULL);
	*owner = NULL;
	if(!g)
		return fail(err, PRD_CLOUD_ENOTFOUND, "no node group %s", group_id);
	if(g->owner[0] && !(*owner = dupstr(g->owner)))
		return fail(err, PRD_CLOUD_ENOMEM, "out of memory");
	return 0;
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
	/* ABI 1.5: node auto-provisioning (all five, and the stride of the
	 * shapes array). */
	.shape_size = sizeof(prd_cloud_shape),
	.shapes = ex_shapes,
	.release_shapes = ex_release_shapes,
	.create_group = ex_create_group,
	.delete_group = ex_delete_group,
	.group_owner = ex_group_owner,
};

const prd_cloud_driver *provreqd_cloud_driver(void);

const prd_cloud_driver *provreqd_cloud_driver(void)
{
	return &descriptor;
}

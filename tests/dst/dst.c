/* Deterministic simulation test of the atomic scale-up, in the spirit of
 * FoundationDB's and TigerBeetle's simulators.
 *
 * The real controller (pr_ctl, its classes, the SQLite state store on a
 * file) runs against the in-memory API and an in-process cloud that is
 * asynchronous and unreliable the way real ones are: an increase only
 * raises the target; instances appear later without a node name, their
 * Nodes register later still; instances fail (out of resources, other);
 * increases are refused (stockout) or time out after taking effect; any
 * call fails transiently; deletes take time. A seeded scheduler
 * interleaves controller passes, clock steps, cloud progress, API changes
 * (requests created and deleted), API write failures (500, 409) and process
 * crashes, both between passes and in the middle of one (after any cloud
 * call or API write, before or after it took effect: the pass is abandoned
 * with longjmp and a new controller starts on the same state database).
 *
 * After every step it checks:
 *  (i)   no group holds more instances than its size at the start plus the
 *        deltas of the plans that are open or done (a double scale-up, or
 *        a scale-up made without an intent recorded first);
 *  (iii) no request has two plans done, or two open at once;
 *  (v)   nothing crashes (the sanitizers run on this program in make check);
 * and once the faults stop and the cloud and the controller have settled:
 *  (ii)  every group holds exactly its size at the start plus the deltas of
 *        the plans that are done: a plan rolled back left nothing behind,
 *        and its target is back;
 *  (iv)  every plan has ended (provisioned or rolled back) within its
 *        deadline plus a bounded time.
 *
 * Usage: dst [--seeds N] [--first S] [--steps K] [--jobs J] [-v]  (1000
 * seeds by default, what make check runs; DST_SEEDS=N overrides). Seeds
 * run in batches of 500 in child processes, J at a time. 
 * Prints one line: "dst: N seeds, V invariant violations, R seeds/s"; a
 * violation prints "dst: seed S step K: WHAT" and "reproduce: dst --first S
 * --seeds 1 -v". Exit status 1 when any invariant was violated. */
#include "config.h"
#include "driver/loader.h"
#include "kube/api.h"
#include "kube/memapi.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/controller.h"
#include "state/state.h"
#include "util/clock.h"
#include "util/rand.h"
#include "util/str.h"
#include "util/yamljson.h"

#include <json-c/json.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define SEC PRD_NS_PER_SEC
#define MIN (60 * SEC)
#define NGROUPS 2
#define MAXI 64
#define MAXREQ 64
#define CLASS_ATOMIC "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#define CLASS_CHECK "check-capacity.autoscaling.x-k8s.io"
#define PR_PATH "/apis/autoscaling.x-k8s.io/v1/namespaces/d/provisioningrequests"

/* Leaks after a simulated crash are by design: the abandoned pass's memory
 * is never freed, as a killed process never frees its memory. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

/* ---------------------------------------------------------------- RNG */

static uint64_t rng;

static uint64_t rnd(void)
{
	return prd_splitmix64(&rng);
}

static int64_t rnd_in(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* true with probability p percent */
static bool pct(int p)
{
	return (int)(rnd() % 100) < p;
}

/* ---------------------------------------------------------- the cloud */

typedef struct inst {
	char id[48];
	char node[48];
	bool appeared;       /* the cloud reports it (else: requested, pending) */
	bool gone;           /* deleted or cancelled: no longer exists */
	bool deleting;
	int errclass;        /* failed to be created */
	int64_t t_appear, t_register, t_gone;
} inst;

typedef struct grp {
	const char *id;
	const char *cpu;
	int32_t max;
	int32_t target;
	int32_t initial;     /* instances at the start */
	inst v[MAXI];
	size_t n;
} grp;

static struct {
	grp g[NGROUPS];
	int seq;
	bool faults;         /* transient failures, stockouts, instance failures */
	int p_transient, p_stockout, p_ambiguous, p_inst_fail;
	int fail_next;       /* a burst: the next calls fail */
	int64_t crash_at;    /* crash at this external call of the pass (0 = no) */
	int64_t calls;       /* external calls in the current pass */
	bool crash_after;    /* the crashing call takes effect first */
} cl;

static clk fake;
static memapi *m;
static kube_api raw_api, api;
static jmp_buf crash_jb;
static bool in_pass;
static bool verbose;

static void vlog(const char *fmt, ...)
{
	va_list ap;
	if(!verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "  [t=%llds] ", (long long)((clk_wall(&fake) / SEC) % 100000));
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static grp *group_of(const char *id)
{
	size_t i;
	for(i = 0; i < NGROUPS; i++)
		if(!strcmp(cl.g[i].id, id))
			return &cl.g[i];
	return NULL;
}

/* Instances that exist or are requested (the invariants' count). */
static int32_t present(const grp *g)
{
	int32_t k = 0;
	size_t i;
	for(i = 0; i < g->n; i++)
		k += !g->v[i].gone;
	return k;
}

/* A crash point: every external call of a pass counts. */
static void crash_point(bool after)
{
	if(!in_pass || !cl.crash_at || cl.calls != cl.crash_at || cl.crash_after != after)
		return;
	vlog("crash %s external call %lld", after ? "after" : "before", (long long)cl.calls);
	cl.crash_at = 0;
	longjmp(crash_jb, 1);
}

static void call_begin(void)
{
	cl.calls++;
	crash_point(false);
}

/* A transient failure of this call? */
static bool transient(prd_cloud_error *err, const char *what)
{
	if(cl.fail_next > 0 || (cl.faults && pct(cl.p_transient))) {
		if(cl.fail_next > 0)
			cl.fail_next--;
		snprintf(err->message, sizeof(err->message), "%s: simulated transient failure (503)", what);
		err->code = PRD_CLOUD_EAGAIN;
		return true;
	}
	return false;
}

static int c_refresh(void *st, prd_cloud_error *err)
{
	(void)st;
	(void)err;
	return 0;
}

static int c_groups(void *st, prd_cloud_node_group **out, size_t *n, prd_cloud_error *err)
{
	prd_cloud_node_group *v;
	size_t i;
	(void)st;
	call_begin();
	if(transient(err, "node groups"))
		return PRD_CLOUD_EAGAIN;
	v = calloc(NGROUPS, sizeof(*v));
	if(!v)
		return PRD_CLOUD_ENOMEM;
	for(i = 0; i < NGROUPS; i++) {
		v[i].id = strdup(cl.g[i].id);
		v[i].min_size = 0;
		v[i].max_size = cl.g[i].max;
		v[i].target_size = cl.g[i].target;
	}
	*out = v;
	*n = NGROUPS;
	crash_point(true);
	return 0;
}

static void c_release_groups(void *st, prd_cloud_node_group *v, size_t n)
{
	size_t i;
	(void)st;
	for(i = 0; i < n; i++)
		free(v[i].id);
	free(v);
}

static int c_instances(void *st, const char *gid, prd_cloud_instance **out, size_t *n, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	prd_cloud_instance *v;
	size_t i, k = 0;
	(void)st;
	call_begin();
	if(!g) {
		snprintf(err->message, sizeof(err->message), "no group %s", gid);
		return PRD_CLOUD_ENOTFOUND;
	}
	if(transient(err, "instances"))
		return PRD_CLOUD_EAGAIN;
	v = calloc(g->n + 1, sizeof(*v));
	if(!v)
		return PRD_CLOUD_ENOMEM;
	for(i = 0; i < g->n; i++) {
		const inst *x = &g->v[i];
		if(!x->appeared || x->gone)
			continue;
		v[k].id = strdup(x->id);
		v[k].node_name = x->node[0] ? strdup(x->node) : NULL;
		v[k].state = x->deleting    ? PRD_CLOUD_INSTANCE_DELETING
			     : x->node[0] ? PRD_CLOUD_INSTANCE_RUNNING
					  : PRD_CLOUD_INSTANCE_CREATING;
		v[k].error_class = x->errclass;
		if(x->errclass) {
			v[k].error_code = strdup(x->errclass == PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES ? "OutOfCapacity"
												: "InternalError");
			v[k].error_message = strdup("simulated instance failure");
		}
		k++;
	}
	*out = v;
	*n = k;
	crash_point(true);
	return 0;
}

static void c_release_instances(void *st, prd_cloud_instance *v, size_t n)
{
	size_t i;
	(void)st;
	for(i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].node_name);
		free(v[i].error_code);
		free(v[i].error_message);
	}
	free(v);
}

static int c_template(void *st, const char *gid, char **json, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	char tj[512];
	(void)st;
	if(!g) {
		snprintf(err->message, sizeof(err->message), "no group %s", gid);
		return PRD_CLOUD_ENOTFOUND;
	}
	snprintf(tj, sizeof(tj),
		 "{\"metadata\":{\"name\":\"t-%s\",\"labels\":{\"group\":\"%s\"}},\"status\":{\"allocatable\":"
		 "{\"cpu\":\"%s\",\"memory\":\"32Gi\",\"pods\":\"110\"}}}",
		 g->id, g->id, g->cpu);
	*json = strdup(tj);
	return *json ? 0 : PRD_CLOUD_ENOMEM;
}

/* The cloud accepts a new target: instances are requested (pending). */
static void request_instances(grp *g, int32_t d)
{
	while(d-- > 0 && g->n < MAXI) {
		inst *x = &g->v[g->n++];
		memset(x, 0, sizeof(*x));
		snprintf(x->id, sizeof(x->id), "sim://%s/i-%d", g->id, ++cl.seq);
		x->t_appear = clk_wall(&fake) + rnd_in(0, 40) * SEC;
		if(cl.faults && pct(cl.p_inst_fail))
			x->errclass = pct(70) ? PRD_CLOUD_ERRCLASS_OUT_OF_RESOURCES : PRD_CLOUD_ERRCLASS_OTHER;
		else
			x->t_register = x->t_appear + rnd_in(5, 120) * SEC;
	}
}

static int increase(const char *gid, int32_t d, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	bool ambiguous;
	call_begin();
	if(!g) {
		snprintf(err->message, sizeof(err->message), "no group %s", gid);
		return PRD_CLOUD_ENOTFOUND;
	}
	if(transient(err, "increase"))
		return PRD_CLOUD_EAGAIN;
	if(cl.faults && pct(cl.p_stockout)) {
		snprintf(err->message, sizeof(err->message), "ZONE_RESOURCE_POOL_EXHAUSTED: no capacity for %d nodes", d);
		err->code = PRD_CLOUD_EIO;
		return PRD_CLOUD_EIO;
	}
	if(d <= 0 || g->target + d > g->max) {
		snprintf(err->message, sizeof(err->message), "size %d would exceed max %d", g->target + d, g->max);
		return PRD_CLOUD_ERANGE;
	}
	ambiguous = cl.faults && pct(cl.p_ambiguous);
	g->target += d;
	request_instances(g, d);
	vlog("cloud: %s target +%d = %d%s", g->id, d, g->target, ambiguous ? " (answer lost)" : "");
	crash_point(true);
	if(ambiguous) {
		snprintf(err->message, sizeof(err->message), "increase: timed out waiting for the answer");
		err->code = PRD_CLOUD_EAGAIN;
		return PRD_CLOUD_EAGAIN;
	}
	return 0;
}

static int c_increase(void *st, const char *gid, int32_t d, prd_cloud_error *err)
{
	(void)st;
	return increase(gid, d, err);
}

static int c_decrease(void *st, const char *gid, int32_t d, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	int32_t pending = 0, existing = 0;
	size_t i;
	(void)st;
	call_begin();
	if(!g)
		return PRD_CLOUD_ENOTFOUND;
	if(transient(err, "decrease target"))
		return PRD_CLOUD_EAGAIN;
	for(i = 0; i < g->n; i++) {
		if(g->v[i].gone || g->v[i].deleting)
			continue;
		if(g->v[i].appeared)
			existing++;
		else
			pending++;
	}
	if(d <= 0 || g->target - d < existing) {
		snprintf(err->message, sizeof(err->message), "target %d would be below the %d existing instances",
			 g->target - d, existing);
		return PRD_CLOUD_ERANGE;
	}
	g->target -= d;
	/* Requested instances beyond the new target are cancelled, newest
	 * first. */
	for(i = g->n; i-- > 0 && existing + pending > g->target;) {
		if(!g->v[i].gone && !g->v[i].deleting && !g->v[i].appeared) {
			g->v[i].gone = true;
			pending--;
		}
	}
	vlog("cloud: %s target -%d = %d", g->id, d, g->target);
	crash_point(true);
	return 0;
}

static void start_delete(grp *g, inst *x)
{
	if(x->gone || x->deleting)
		return;
	if(!x->appeared) {
		x->gone = true;
	} else {
		x->deleting = true;
		x->t_gone = clk_wall(&fake) + rnd_in(2, 40) * SEC;
	}
	g->target--;
}

/* Delete the instances named by id, or by node name. */
static int delete_matching(const char *gid, const char *const *keys, size_t n, bool by_node, prd_cloud_error *err)
{
	grp *g = group_of(gid);
	size_t i, k;
	call_begin();
	if(!g)
		return PRD_CLOUD_ENOTFOUND;
	if(transient(err, by_node ? "delete nodes" : "delete instances"))
		return PRD_CLOUD_EAGAIN;
	for(i = 0; i < n; i++)
		for(k = 0; k < g->n; k++)
			if(!strcmp(by_node ? g->v[k].node : g->v[k].id, keys[i]))
				start_delete(g, &g->v[k]);
	vlog("cloud: %s delete %zu %s, target %d", g->id, n, by_node ? "nodes" : "instances", g->target);
	crash_point(true);
	return 0;
}

static int c_delete_instances(void *st, const char *gid, const char *const *ids, size_t n, prd_cloud_error *err)
{
	(void)st;
	return delete_matching(gid, ids, n, false, err);
}

static int c_delete_nodes(void *st, const char *gid, const char *const *names, size_t n, prd_cloud_error *err)
{
	(void)st;
	return delete_matching(gid, names, n, true, err);
}

static void c_release_string(void *st, char *s)
{
	(void)st;
	free(s);
}

static const prd_cloud_driver sim_driver = {
	.abi_major = PRD_CLOUD_ABI_MAJOR,
	.abi_minor = PRD_CLOUD_ABI_MINOR,
	.struct_size = sizeof(prd_cloud_driver),
	.name = "dst-cloud",
	.refresh = c_refresh,
	.node_groups = c_groups,
	.release_node_groups = c_release_groups,
	.instances = c_instances,
	.release_instances = c_release_instances,
	.template_node = c_template,
	.increase_size = c_increase,
	.delete_nodes = c_delete_nodes,
	.decrease_target_size = c_decrease,
	.release_string = c_release_string,
	.delete_instances = c_delete_instances,
	/* ABI 1.3: the host steps through instances() by this. */
	.instance_size = sizeof(prd_cloud_instance),
};

static cloud_driver sim_drv = { NULL, NULL, &sim_driver, NULL, NULL };
static cloud_driver *sim_drvs[1] = { &sim_drv };
static cloud_drivers drivers = { sim_drvs, 1 };

/* ------------------------------------------------------------ the API */

static int post(const char *path, const char *yaml)
{
	json_object *o;
	prd_err e;
	int rc;
	if(yj_parse_one(yaml, strlen(yaml), &o, &e))
		return -1;
	rc = kube_api_call(&raw_api, "POST", path, NULL, o, NULL, NULL, &e);
	json_object_put(o);
	return rc;
}

static void register_node(grp *g, inst *x)
{
	char y[768];
	snprintf(x->node, sizeof(x->node), "%s-n%d", g->id, ++cl.seq);
	snprintf(y, sizeof(y),
		 "metadata: {name: %s, labels: {kubernetes.io/hostname: %s, group: %s}}\n"
		 "spec: {providerID: \"%s\"}\n"
		 "status:\n  allocatable: {cpu: \"%s\", memory: 32Gi, pods: \"110\"}\n"
		 "  conditions: [{type: Ready, status: \"True\"}]\n",
		 x->node, x->node, g->id, x->id, g->cpu);
	post("/api/v1/nodes", y);
}

static void delete_node(const char *name)
{
	char path[200];
	prd_err e;
	snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
	kube_api_call(&raw_api, "DELETE", path, NULL, NULL, NULL, NULL, &e);
}

/* The controller's API: writes are external calls (crash points) and may
 * fail with 500 or 409 while faults are on. */
static int sim_api(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
		   long *status, char **resp, size_t *resp_len)
{
	bool write = strcmp(method, "GET") != 0;
	int rc;
	if(write) {
		call_begin();
		if(cl.faults && pct(3)) {
			bool conflict = pct(50);
			*status = conflict ? 409 : 500;
			*resp = strdup(conflict ? "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"code\":409,"
						  "\"message\":\"simulated conflict\"}"
						: "{\"kind\":\"Status\",\"reason\":\"InternalError\",\"code\":500,"
						  "\"message\":\"simulated apiserver failure\"}");
			*resp_len = *resp ? strlen(*resp) : 0;
			return conflict ? PRD_ECONFLICT : PRD_EAGAIN;
		}
	}
	rc = memapi_request(ud, method, path, ct, body, len, status, resp, resp_len);
	if(write)
		crash_point(true);
	return rc;
}

/* The cloud moves on to `now`: instances appear, register, finish
 * deleting. */
static void cloud_progress(void)
{
	int64_t now = clk_wall(&fake);
	size_t gi, i;
	for(gi = 0; gi < NGROUPS; gi++) {
		grp *g = &cl.g[gi];
		for(i = 0; i < g->n; i++) {
			inst *x = &g->v[i];
			if(x->gone)
				continue;
			if(x->deleting) {
				if(now >= x->t_gone) {
					x->gone = true;
					if(x->node[0])
						delete_node(x->node);
				}
				continue;
			}
			if(!x->appeared && now >= x->t_appear)
				x->appeared = true;
			if(x->appeared && !x->errclass && !x->node[0] && now >= x->t_register)
				register_node(g, x);
		}
	}
}

static bool cloud_settled(void)
{
	size_t gi, i;
	for(gi = 0; gi < NGROUPS; gi++)
		for(i = 0; i < cl.g[gi].n; i++) {
			const inst *x = &cl.g[gi].v[i];
			if(!x->gone && (x->deleting || !x->appeared || (!x->errclass && !x->node[0])))
				return false;
		}
	return true;
}

/* --------------------------------------------------------- the world */

typedef struct world {
	char dbpath[512];
	state_db *db;
	sqlite3 *ro;          /* the harness's own view of the intents */
	pr_ctl *ctl;
	pr_config cfg;
	state_config sc;
	int nreq;             /* requests created so far (names r0, r1, ...) */
	char live[MAXREQ][16];
	int nlive;
	int64_t seed, step;
	int violations;
	bool seed_failed;
} world;

static void violation(world *w, const char *fmt, ...)
{
	va_list ap;
	char msg[400];
	if(w->seed_failed)
		return; /* the first violation of a seed is the one to read */
	w->seed_failed = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	w->violations++;
	printf("dst: seed %lld step %lld: %s\n", (long long)w->seed, (long long)w->step, msg);
	printf("reproduce: %s --first %lld --seeds 1 -v\n", "tests/dst/dst", (long long)w->seed);
	if(verbose && w->ro) {
		sqlite3_stmt *st = NULL;
		fprintf(stderr, "scale-up intents:\n");
		if(sqlite3_prepare_v2(w->ro,
				      "SELECT plan_id, node_group, delta, phase, last_error, created_ns / 1000000000, "
				      "updated_ns / 1000000000 FROM scaleup_intent ORDER BY created_ns",
				      -1, &st, NULL) == SQLITE_OK)
			while(sqlite3_step(st) == SQLITE_ROW)
				fprintf(stderr, "  %s %s +%d %s [%s] created %lld updated %lld\n",
					sqlite3_column_text(st, 0), sqlite3_column_text(st, 1), sqlite3_column_int(st, 2),
					sqlite3_column_text(st, 3), sqlite3_column_text(st, 4),
					(long long)(sqlite3_column_int64(st, 5) % 100000),
					(long long)(sqlite3_column_int64(st, 6) % 100000));
		sqlite3_finalize(st);
		st = NULL;
		fprintf(stderr, "bookings:\n");
		if(sqlite3_prepare_v2(w->ro,
				      "SELECT request_uid, node_name, resources_json, created_ns / 1000000000, "
				      "expires_ns / 1000000000 FROM booking ORDER BY created_ns",
				      -1, &st, NULL) == SQLITE_OK)
			while(sqlite3_step(st) == SQLITE_ROW)
				fprintf(stderr, "  %s %s %s created %lld expires %lld\n", sqlite3_column_text(st, 0),
					sqlite3_column_text(st, 1), sqlite3_column_text(st, 2),
					(long long)(sqlite3_column_int64(st, 3) % 100000),
					(long long)(sqlite3_column_int64(st, 4) % 100000));
		sqlite3_finalize(st);
	}
}

static int start_ctl(world *w)
{
	prd_err e;
	if(state_open(w->dbpath, &fake, &w->sc, &w->db, &e)) {
		fprintf(stderr, "dst: state_open: %s\n", e.msg);
		return -1;
	}
	if(pr_ctl_new(&w->cfg, &fake, &api, w->db, &drivers, &w->ctl, &e)) {
		fprintf(stderr, "dst: pr_ctl_new: %s\n", e.msg);
		return -1;
	}
	return 0;
}

/* A crash: the process is gone (its memory with it; an abandoned pass's
 * controller is never freed), the database file stays. */
static int restart(world *w, bool abandoned)
{
	if(!abandoned)
		pr_ctl_free(w->ctl);
	w->ctl = NULL;
	state_close(w->db);
	w->db = NULL;
	vlog("restart%s", abandoned ? " after a crash inside the pass" : "");
	return start_ctl(w);
}

static void pass(world *w)
{
	prd_err e;
	int64_t wake;
	cl.calls = 0;
	in_pass = true;
	if(setjmp(crash_jb) == 0) {
		pr_ctl_pass(w->ctl, &wake, &e);
		in_pass = false;
		return;
	}
	in_pass = false;
	if(restart(w, true))
		violation(w, "the controller could not restart after a crash");
}

static void create_request(world *w)
{
	char y[1024], name[16];
	int kind = (int)rnd_in(0, 9);
	snprintf(name, sizeof(name), "r%d", w->nreq++);
	if(kind < 2)
		snprintf(y, sizeof(y),
			 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_CHECK "\n"
			 "  podSets: [{podTemplateRef: {name: small}, count: %d}]\n",
			 name, (int)rnd_in(1, 4));
	else if(kind < 4)
		snprintf(y, sizeof(y),
			 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_ATOMIC "\n"
			 "  podSets: [{podTemplateRef: {name: small}, count: %d}, {podTemplateRef: {name: big}, count: %d}]\n",
			 name, (int)rnd_in(1, 4), (int)rnd_in(1, 3));
	else
		snprintf(y, sizeof(y),
			 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_ATOMIC "\n"
			 "  podSets: [{podTemplateRef: {name: %s}, count: %d}]\n",
			 name, pct(50) ? "small" : "big", (int)rnd_in(1, 6));
	if(post(PR_PATH, y) == 0 && w->nlive < MAXREQ)
		snprintf(w->live[w->nlive++], sizeof(w->live[0]), "%s", name);
	vlog("create request %s", name);
}

static void delete_request(world *w)
{
	char path[256];
	prd_err e;
	int i;
	if(!w->nlive)
		return;
	i = (int)rnd_in(0, w->nlive - 1);
	snprintf(path, sizeof(path), PR_PATH "/%s", w->live[i]);
	kube_api_call(&raw_api, "DELETE", path, NULL, NULL, NULL, NULL, &e);
	vlog("delete request %s", w->live[i]);
	w->live[i][0] = 0;
	memmove(&w->live[i], &w->live[i + 1], (size_t)(w->nlive - i - 1) * sizeof(w->live[0]));
	w->nlive--;
}

/* ---------------------------------------------------------- invariants */

typedef struct plan_row {
	char base[200], uid[64], group[64], phase[24];
	int64_t delta;
} plan_row;

static int read_plans(world *w, plan_row *v, int cap)
{
	sqlite3_stmt *st = NULL;
	int n = 0;
	if(sqlite3_prepare_v2(w->ro, "SELECT plan_id, request_uid, node_group, delta, phase FROM scaleup_intent", -1,
			      &st, NULL) != SQLITE_OK)
		return -1;
	while(n < cap && sqlite3_step(st) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(st, 0);
		const char *hash = strrchr(id, '#');
		snprintf(v[n].base, sizeof(v[n].base), "%.*s", hash ? (int)(hash - id) : (int)strlen(id), id);
		snprintf(v[n].uid, sizeof(v[n].uid), "%s", (const char *)sqlite3_column_text(st, 1));
		snprintf(v[n].group, sizeof(v[n].group), "%s", (const char *)sqlite3_column_text(st, 2));
		v[n].delta = sqlite3_column_int64(st, 3);
		snprintf(v[n].phase, sizeof(v[n].phase), "%s", (const char *)sqlite3_column_text(st, 4));
		n++;
	}
	sqlite3_finalize(st);
	return n;
}

static bool is_open(const char *phase)
{
	return strcmp(phase, "done") && strcmp(phase, "rolled-back");
}

#define MAXPLANS 512
#define DST_BATCH 500

/* (i) and (iii) after every step; with `final`, (ii) and (iv). */
static void check(world *w, bool final)
{
	static plan_row p[MAXPLANS];
	int n = read_plans(w, p, MAXPLANS), i, k;
	size_t gi;
	if(n < 0) {
		violation(w, "cannot read the state database: %s", sqlite3_errmsg(w->ro));
		return;
	}
	for(gi = 0; gi < NGROUPS; gi++) {
		const grp *g = &cl.g[gi];
		int64_t allowed = g->initial, done = g->initial;
		for(i = 0; i < n; i++) {
			if(strcmp(p[i].group, g->id))
				continue;
			if(strcmp(p[i].phase, "rolled-back"))
				allowed += p[i].delta;
			if(!strcmp(p[i].phase, "done"))
				done += p[i].delta;
		}
		if(present(g) > allowed)
			violation(w, "(i) group %s holds %d instances, more than %lld (its %d at the start plus the "
				     "deltas of its open and done plans)",
				  g->id, present(g), (long long)allowed, g->initial);
		if(final && present(g) != done)
			violation(w, "(ii) group %s holds %d instances once settled, not %lld (its %d at the start plus "
				     "the deltas of its done plans): %s",
				  g->id, present(g), (long long)done, g->initial,
				  present(g) > done ? "a rolled-back plan left instances behind" : "instances were lost");
		if(final && g->target != present(g))
			violation(w, "(ii) group %s has target %d with %d instances once settled", g->id, g->target,
				  present(g));
	}
	for(i = 0; i < n; i++) {
		int done = 0, open = 0;
		bool first = true;
		for(k = 0; k < i; k++)
			if(!strcmp(p[k].uid, p[i].uid))
				first = false;
		if(!first)
			continue;
		for(k = 0; k < n; k++) {
			bool seen = false;
			int j;
			if(strcmp(p[k].uid, p[i].uid))
				continue;
			for(j = 0; j < k; j++)
				if(!strcmp(p[j].base, p[k].base))
					seen = true;
			if(seen)
				continue;
			done += !strcmp(p[k].phase, "done");
			open += is_open(p[k].phase);
		}
		if(done > 1)
			violation(w, "(iii) request %s was scaled up twice (%d plans done)", p[i].uid, done);
		if(open > 1)
			violation(w, "(iii) request %s has %d plans open at once", p[i].uid, open);
		if(final && open)
			violation(w, "(iv) request %s still has an open plan once faults stopped and everything settled",
				  p[i].uid);
	}
}

/* ------------------------------------------------------------ one seed */

static void setup_cluster(world *w)
{
	size_t gi;
	int k;
	post("/api/v1/namespaces", "metadata: {name: d}\n");
	post("/api/v1/namespaces/d/podtemplates",
	     "metadata: {name: small}\ntemplate:\n  metadata: {labels: {app: small}}\n"
	     "  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: \"2\", memory: 1Gi}}}]}\n");
	post("/api/v1/namespaces/d/podtemplates",
	     "metadata: {name: big}\ntemplate:\n  metadata: {labels: {app: big}}\n"
	     "  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: \"6\", memory: 1Gi}}}]}\n");
	for(gi = 0; gi < NGROUPS; gi++) {
		grp *g = &cl.g[gi];
		int running = (int)rnd_in(0, 2);
		for(k = 0; k < running; k++) {
			inst *x = &g->v[g->n++];
			memset(x, 0, sizeof(*x));
			snprintf(x->id, sizeof(x->id), "sim://%s/i-%d", g->id, ++cl.seq);
			x->appeared = true;
			register_node(g, x);
		}
		/* An old failed instance that is nobody's plan's. */
		if(pct(30)) {
			inst *x = &g->v[g->n++];
			memset(x, 0, sizeof(*x));
			snprintf(x->id, sizeof(x->id), "sim://%s/i-%d", g->id, ++cl.seq);
			x->appeared = true;
			x->errclass = PRD_CLOUD_ERRCLASS_OTHER;
		}
		g->target = present(g);
		g->initial = present(g);
	}
	(void)w;
}

static void run_seed(world *w, int64_t seed, int steps, const char *dir)
{
	int s;
	prd_err e;
	memset(&cl, 0, sizeof(cl));
	rng = (uint64_t)seed * 0x2545f4914f6cdd1dULL + 1;
	cl.g[0].id = "ga";
	cl.g[0].cpu = "4";
	cl.g[0].max = 8;
	cl.g[1].id = "gb";
	cl.g[1].cpu = "8";
	cl.g[1].max = 5;
	cl.faults = true;
	cl.p_transient = (int)rnd_in(0, 25);
	cl.p_stockout = (int)rnd_in(0, 20);
	cl.p_ambiguous = (int)rnd_in(0, 10);
	cl.p_inst_fail = (int)rnd_in(0, 25);
	w->seed = seed;
	w->seed_failed = false;
	w->step = 0;
	w->nreq = 0;
	w->nlive = 0;
	clk_fake_init(&fake, 1714557600LL * SEC + seed % 1000 * SEC);
	metrics_shutdown();
	metrics_init();
	if(memapi_new(&fake, 0, &m)) {
		violation(w, "out of memory");
		return;
	}
	raw_api = kube_api_from_memapi(m);
	api.request = sim_api;
	api.ud = m;
	snprintf(w->dbpath, sizeof(w->dbpath), "%s/dst-%d-%lld.db", dir, (int)getpid(), (long long)seed);
	state_config_default(&w->sc);
	w->sc.request_backoff_initial_ns = 10 * SEC;
	w->sc.request_backoff_max_ns = 60 * SEC;
	w->sc.group_backoff_initial_ns = 30 * SEC;
	w->sc.group_backoff_max_ns = 2 * MIN;
	pr_config_default(&w->cfg);
	w->cfg.provision_timeout_ns = 3 * MIN;
	w->cfg.booking_ttl_ns = 2 * MIN;
	w->cfg.scale_down = false;
	w->cfg.state_retention_ns = 365LL * 24 * 60 * MIN;
	setup_cluster(w);
	if(start_ctl(w) || sqlite3_open_v2(w->dbpath, &w->ro, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		violation(w, "cannot start");
		goto out;
	}
	sqlite3_busy_timeout(w->ro, 1000);
	if(verbose)
		fprintf(stderr, "seed %lld: transient %d%%, stockout %d%%, ambiguous %d%%, instance failures %d%%\n",
			(long long)seed, cl.p_transient, cl.p_stockout, cl.p_ambiguous, cl.p_inst_fail);
	/* The faulty phase. */
	for(s = 0; s < steps; s++) {
		int r = (int)rnd_in(0, 99);
		w->step = s;
		if(r < 30) {
			if(pct(15)) {
				cl.crash_at = rnd_in(1, 10);
				cl.crash_after = pct(50);
			}
			pass(w);
			cl.crash_at = 0;
		} else if(r < 62) {
			clk_fake_advance(&fake, rnd_in(1, 30) * SEC);
			cloud_progress();
		} else if(r < 74) {
			if(w->nlive < 6)
				create_request(w);
		} else if(r < 79) {
			delete_request(w);
		} else if(r < 83) {
			if(restart(w, false))
				violation(w, "the controller could not restart");
		} else if(r < 87) {
			cl.fail_next = (int)rnd_in(1, 6);
		} else {
			pass(w);
		}
		if(!w->ctl)
			break;
		check(w, false);
	}
	/* Faults stop; the cloud and the controller settle. A plan ends by
	 * its deadline (3 min) plus rollback time; 2 simulated hours bound
	 * it with room to spare. */
	cl.faults = false;
	cl.fail_next = 0;
	cl.crash_at = 0;
	{
		int64_t until = clk_wall(&fake) + 120 * MIN;
		int quiet = 0;
		while(w->ctl && clk_wall(&fake) < until) {
			static plan_row p[MAXPLANS];
			int n, i, open = 0;
			w->step++;
			clk_fake_advance(&fake, rnd_in(5, 20) * SEC);
			cloud_progress();
			pass(w);
			check(w, false);
			n = read_plans(w, p, MAXPLANS);
			for(i = 0; i < n; i++)
				open += is_open(p[i].phase);
			quiet = !open && cloud_settled() ? quiet + 1 : 0;
			if(quiet >= 3)
				break;
		}
		if(w->ctl)
			check(w, true);
	}
out:
	if(w->ro)
		sqlite3_close(w->ro);
	w->ro = NULL;
	if(w->ctl)
		pr_ctl_free(w->ctl);
	w->ctl = NULL;
	state_close(w->db);
	w->db = NULL;
	memapi_free(m);
	m = NULL;
	{
		char p[600];
		unlink(w->dbpath);
		snprintf(p, sizeof(p), "%s-wal", w->dbpath);
		unlink(p);
		snprintf(p, sizeof(p), "%s-shm", w->dbpath);
		unlink(p);
	}
	(void)e;
}

int main(int argc, char **argv)
{
	int64_t seeds = 1000, first = 1;
	int steps = 120, a, jobs = 1;
	struct {
		pid_t pid;
		int fd;
	} children[16];
	world w;
	struct timespec t0, t1;
	const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	double secs;
	FILE *devnull = fopen("/dev/null", "w");

	for(a = 1; a < argc; a++) {
		if(!strcmp(argv[a], "--seeds") && a + 1 < argc)
			seeds = strtoll(argv[++a], NULL, 10);
		else if(!strcmp(argv[a], "--first") && a + 1 < argc)
			first = strtoll(argv[++a], NULL, 10);
		else if(!strcmp(argv[a], "--steps") && a + 1 < argc)
			steps = atoi(argv[++a]);
		else if(!strcmp(argv[a], "--jobs") && a + 1 < argc)
			jobs = atoi(argv[++a]);
		else if(!strcmp(argv[a], "-v"))
			verbose = true;
		else {
			fprintf(stderr, "usage: dst [--seeds N] [--first S] [--steps K] [--jobs J] [-v]\n");
			return 2;
		}
	}
	if(getenv("DST_SEEDS"))
		seeds = strtoll(getenv("DST_SEEDS"), NULL, 10);
	if(jobs < 1)
		jobs = 1;
	if(jobs > 16)
		jobs = 16;
	log_setup(verbose ? PRD_LOG_INFO : PRD_LOG_ERROR, PRD_LOG_TEXT, verbose ? stderr : devnull);
	memset(&w, 0, sizeof(w));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* Batches of seeds in child processes: what crashed passes leave
	 * behind (by design, as a killed process would) goes with each child,
	 * and --jobs runs batches side by side. */
	{
		int64_t next = 0;
		int running = 0;
		fflush(stdout);
		while(next < seeds || running > 0) {
			while(next < seeds && running < jobs) {
				int fd[2];
				int64_t n = seeds - next < DST_BATCH ? seeds - next : DST_BATCH;
				pid_t pid;
				if(pipe(fd)) {
					perror("dst: pipe");
					return 2;
				}
				pid = fork();
				if(pid < 0) {
					perror("dst: fork");
					return 2;
				}
				if(pid == 0) {
					int64_t k;
					close(fd[0]);
					for(k = 0; k < n; k++) {
						int before = w.violations;
						run_seed(&w, first + next + k, steps, dir);
						if(w.violations > before && verbose)
							fprintf(stderr, "seed %lld: %d violations\n", (long long)(first + next + k),
								w.violations - before);
					}
					fflush(stdout);
					if(write(fd[1], &w.violations, sizeof(w.violations)) != (ssize_t)sizeof(w.violations))
						_exit(3);
					_exit(0);
				}
				close(fd[1]);
				children[running].pid = pid;
				children[running].fd = fd[0];
				running++;
				next += n;
			}
			/* Wait for the oldest batch. */
			{
				int v = 0, status = 0;
				if(read(children[0].fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
					v = -1;
				close(children[0].fd);
				waitpid(children[0].pid, &status, 0);
				if(v < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
					printf("dst: (v) a batch of seeds crashed (status %d); run it with --seeds %d -v to see "
					       "where\n", status, DST_BATCH);
					w.violations++;
				} else {
					w.violations += v;
				}
				memmove(&children[0], &children[1], (size_t)(running - 1) * sizeof(children[0]));
				running--;
			}
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("dst: %lld seeds, %d invariant violations, %.1f seeds/s\n", (long long)seeds, w.violations,
	       secs > 0 ? (double)seeds / secs : 0.0);
	metrics_shutdown();
	if(devnull)
		fclose(devnull);
	return w.violations ? 1 : 0;
}

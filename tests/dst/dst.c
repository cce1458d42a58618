/* Deterministic simulation test of the atomic scale-up and the bookings,
 * in the spirit of FoundationDB's and TigerBeetle's simulators.
 *
 * The real controller (pr_ctl, its classes, the SQLite state store on a
 * file) runs against the in-memory API and an in-process cloud that is
 * asynchronous and unreliable the way real ones are (cloud.c): an increase
 * only raises the target; instances appear later, their Nodes register
 * later still; instances fail; increases are refused (stockout) or time
 * out after taking effect; any call fails transiently; deletes take time.
 * A seeded scheduler interleaves controller passes, clock steps, cloud
 * progress, API changes (requests created and deleted), API write failures
 * (500, 409) and process crashes, between passes and in the middle of one
 * (after any cloud call or API write, before or after it took effect: the
 * pass is abandoned with longjmp and a new process starts on the same
 * state file).
 *
 * A seed runs in one of two modes. The single-controller mode is the DST
 * of old: one replica, nobody else. The multi-actor mode (replica.c) runs
 * what production runs beside it:
 *  - two replicas A and B of the default shard, each on its own state
 *    file, sharing one Lease under the simulated clock through the
 *    production lease code (src/kube/lease.c over a kube_client whose
 *    in-process transport is the replica's way to the in-memory API, with
 *    its faults: 500, 409, lost answers, stalls, a replica cut off from
 *    the apiserver); the one that leads runs passes, fenced by
 *    kube_lease_valid; a new leader rebuilds from the API and takes its
 *    term as `provreqd run` does (kube_lease_new_term);
 *  - a Lease deleted (lease_delete: a namespace deleted, a chart
 *    reinstalled), made again at leaseTransitions 0 while the groups
 *    record a former, higher term: the holder raises its count past it
 *    (kube_lease_follow_raise) and goes on serving;
 *  - stalls longer than the lease, between passes and inside a call (the
 *    call is on its way and takes effect when the stall ends, so a
 *    conditional call meets whatever the other replica did meanwhile); a
 *    stalled leader goes on with its pass;
 *  - restarts with an old copy of the state file, or none; a restarted
 *    replica keeps its identity (a pod's POD_NAME) and re-takes its own
 *    lease, or gave it up on the way out (a SIGTERM);
 *  - a replica S of a second shard (processor instance "shard-b"), with
 *    requests of both classes for each shard;
 *  - an outside actor (cluster-autoscaler, MachineHealthChecks) scaling
 *    the same groups and replacing its instances, without owner tokens;
 *  - placeholder instance ids that change when the provider assigns one;
 *  - booking races (booking_race): a leader's status write that books
 *    room stalls on its way while the other shard, or the replica that
 *    takes its lease, books room on the same nodes.
 *
 * The cloud is one of four profiles (--driver). `abstract` (the default)
 * is cloud.c: conditional writes, owner marks, creation times and fencing
 * all at once, which no shipped driver has together. `kwok`, `clusterapi`
 * and `karpenter` load the shipped driver's built module
 * (cloud/NAME/.libs/NAME.so, under PRD_BUILDDIR or the current
 * directory) in every replica through the production loader, with a host
 * whose kube_request is that replica's way to the in-memory API (crash,
 * stall and fault points on its writes), and simulate what the driver
 * drives on the simulated clock (drivers.c): kwok's controller making
 * Nodes Ready, Cluster API's MachineDeployment/MachineSet/Machine
 * controllers and a MachineHealthCheck, Karpenter launching, failing and
 * consolidating NodeClaims. Their record is kept from the API writes the
 * driver made (who created each Node, Machine or NodeClaim, for which
 * plan), never from the driver's or the controller's word. The shipped
 * drivers' profiles do not auto-provision (no shapes in their worlds).
 *
 * The drivers reach the API only through the host's kube_request
 * (clusterapi's own client is for a separate management cluster, which
 * these worlds do not have; its watch is off).
 *
 * After every step (and inside stalls) the oracle (oracle.c) checks, from
 * the cloud's own record of every instance and from the API (the plans the
 * requests' statuses name), never from a controller's store (a call
 * without an owner token is attributed to the plan the API shows open on
 * that group for the caller's shard; see cloud.c):
 *  (i)    every instance a replica made is of a plan the API recorded
 *         first and had not ended, and no plan holds more than its delta;
 *  (ii)   a plan rolled back holds none of its instances;
 *  (iii)  no request has two plans done, or two holding instances at once;
 *  (v)    nothing crashes (the sanitizers run on this program in make check);
 *  (vi)   a call that took effect after the caller's lease had expired made
 *         nothing beyond what one open plan asked for (per owner token),
 *         and nothing a plan that ended leaves behind;
 *  (vii)  provreqd deletes (or cancels) only instances of a plan the API
 *         shows rolling back (or rolled back, replaced, its request
 *         deleted or being deleted) when the delete takes effect, or a
 *         plan's surplus beyond its delta: never the outside actor's,
 *         those there at the start, or a succeeded plan's;
 *  (viii) the pods booked on a node by all Provisioned, unexpired requests
 *         (their provisioningClassDetails) fit its allocatable CPU, across
 *         shards;
 *  (ix)   (--burst) a rollback deletes no instance whose Node another
 *         Provisioned, unexpired request books (its status says so);
 *  (xi)   (clusterapi) a Machine the driver marks provreqd.io/owner is
 *         the marked plan's in the record;
 *  (xii)  (karpenter) Karpenter never consolidates a NodeClaim provreqd
 *         made while its request's booking holds it;
 * and once the faults stop and everything settled:
 *  (ii)   every plan that succeeded holds exactly its delta of its own
 *         instances, every other none; every group's target is its size;
 *         with a driver that cannot refuse a late call (kwok, karpenter:
 *         no fencing, a request on its way when its caller stalls lands
 *         when the stall ends) a plan may hold more than its delta for a
 *         while, and (i)'s bound is checked here instead;
 *  (iv)   every plan the API showed has ended (done or rolled back, or a
 *         later plan of its request replaced it);
 *  (xiii) every shard still serves: a new check-capacity request for each
 *         is decided within 5 minutes (still_serving).
 * A seed stops at its first violation.
 *
 * Usage: dst [--seeds N] [--first S] [--steps K] [--jobs J] [-v]
 *            [--actors mixed|single|multi|replicas] [--unfenced] [--no-ledger] [--ledger-objects N]
 *            [--no-term] [--no-raise] [--no-owner-marks] [--nap] [--burst] [--skip vi,viii]
 *            [--driver abstract|kwok|clusterapi|karpenter]
 * 1000 seeds by default, what make check runs (DST_SEEDS=N and
 * DST_ACTORS=mode override);
 * mixed runs every fifth seed in the single-controller mode, the others
 * with several actors; replicas runs only the two replicas of one shard
 * (no second shard, no outside actor, no placeholder ids), to look at
 * failover alone. --unfenced makes every fence say yes, to show that
 * the oracle catches a controller that does not fence itself;
 * --no-ledger runs several actors without the booking ledger;
 * --ledger-objects N gives its objects N bytes (ledger.c, "Layout"), so
 * that overflow objects are made, replaced and swept in every seed; --no-term
 * keeps each replica's own fence but fences no group with its term (a
 * stalled leader's late call is then taken); --no-raise never raises a
 * Lease's count past a term the groups record (a recreated Lease then
 * stops its shard for good, (xiii)); --no-owner-marks gives a
 * cloud that claims owner marks and lists none; --burst
 * adds bursts: three to six atomic requests made at once on the shared
 * groups (several plans on one group, limits reached, the rest waiting),
 * with more instances failing part-way so plans roll back among others
 * (issue 43); --skip
 * leaves the invariants named out (to see what else fails while one is
 * being fixed: only a seed's first violation is reported). Seeds run
 * in batches of 500 in child processes, J at a time. Every replica loads
 * the plan key from the Secret setup_plan_key makes, as `provreqd run`
 * does, so plans recorded by one are adopted by another only sealed. Prints one line:
 * "dst: N seeds, V invariant violations, R seeds/s (driver D)"; a violation prints
 * "dst: seed S step K: WHAT" and the command that reproduces it. Exit
 * status 1 when any invariant was violated. */
#include "config.h"
#include "dst.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "util/rand.h"
#include "util/yamljson.h"

#include <dlfcn.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define DST_BATCH 500

/* Leaks after a simulated crash are by design: the abandoned pass's memory
 * is never freed, as a killed process never frees its memory. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}

dst_sim dst;
static uint64_t rng;
static const char *mode_flags = ""; /* for the reproduce line */
static char skip[64];               /* invariants not checked: ",vi,viii," */

/* Is the invariant a message begins with, "(vi) ...", skipped? */
static bool skipped(const char *msg)
{
	char key[16];
	size_t n;
	if(msg[0] != '(' || (n = strcspn(msg + 1, ")")) >= sizeof(key) - 2)
		return false;
	snprintf(key, sizeof(key), ",%.*s,", (int)n, msg + 1);
	return strstr(skip, key) != NULL;
}

uint64_t rnd(void)
{
	return prd_splitmix64(&rng);
}

int64_t rnd_in(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

/* true with probability p percent */
bool pct(int p)
{
	return (int)(rnd() % 100) < p;
}

int64_t now_ns(void)
{
	return clk_wall(&dst.clock);
}

void vlog(const char *fmt, ...)
{
	va_list ap;
	if(!dst.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "  [t=%llds] ", (long long)((now_ns() / SEC) % 100000));
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* What the cloud made, for the one reading a violation. */
static void dump_record(void)
{
	size_t gi, i;
	int k;
	fprintf(stderr, "the cloud's record:\n");
	for(gi = 0; gi < NGALL; gi++)
		for(i = 0; i < dst.g[gi].n; i++) {
			const inst *x = &dst.g[gi].v[i];
			fprintf(stderr, "  %s %s by %s plan %s%s%s%s\n", x->id,
				x->gone ? "gone" : x->deleting ? "deleting" : x->node[0] ? x->node : "no node",
				x->creator == BY_START ? "start" : x->creator == BY_OUTSIDE ? "outside" : dst.r[x->creator].name,
				x->plan[0] ? x->plan : "-", x->lease_ok ? "" : " LEASE EXPIRED", x->fenced ? " PAST RENEW DEADLINE" : "",
				x->errclass ? " failed" : "");
		}
	fprintf(stderr, "plans the API showed:\n");
	for(k = 0; k < dst.nplans; k++)
		fprintf(stderr, "  %s %s %s +%lld %s%s%s%s\n", dst.plans[k].token, dst.plans[k].req, dst.plans[k].group,
			(long long)dst.plans[k].delta, dst.plans[k].phase, dst.plans[k].seen_done ? " (was done)" : "",
			dst.plans[k].superseded ? " superseded" : "", dst.plans[k].request_gone ? " request gone" : "");
	dump_bookings();
	for(k = 0; k < dst.nrep; k++) {
		sqlite3_stmt *st = NULL;
		fprintf(stderr, "replica %s's store (its own view):\n", dst.r[k].name);
		if(dst.r[k].ro && sqlite3_prepare_v2(dst.r[k].ro,
						     "SELECT plan_id, node_group, delta, phase, last_error FROM scaleup_intent "
						     "ORDER BY created_ns",
						     -1, &st, NULL) == SQLITE_OK)
			while(sqlite3_step(st) == SQLITE_ROW)
				fprintf(stderr, "  %s %s +%d %s [%s]\n", sqlite3_column_text(st, 0), sqlite3_column_text(st, 1),
					sqlite3_column_int(st, 2), sqlite3_column_text(st, 3), sqlite3_column_text(st, 4));
		sqlite3_finalize(st);
	}
}

void violation(const char *fmt, ...)
{
	va_list ap;
	char msg[700];
	if(dst.seed_failed)
		return; /* the first violation of a seed is the one to read */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if(skipped(msg) && !dst.quiet)
		return;
	dst.seed_failed = true;
	if(dst.quiet)
		return;
	dst.violations++;
	printf("dst: seed %lld step %lld%s: %s\n", (long long)dst.seed, (long long)dst.step,
	       dst.stall_depth ? " (during a stall)" : "", msg);
	printf("reproduce: %s --first %lld --seeds 1%s -v\n", dst.argv0, (long long)dst.seed, mode_flags);
	if(dst.verbose)
		dump_record();
}

/* ------------------------------------------------------------ the API */

int post(const char *path, const char *yaml)
{
	json_object *o;
	prd_err e;
	int rc;
	if(yj_parse_one(yaml, strlen(yaml), &o, &e))
		return -1;
	rc = kube_api_call(&dst.raw_api, "POST", path, NULL, o, NULL, NULL, &e);
	json_object_put(o);
	return rc;
}

/* A request of either class; with several actors, for either shard. */
void create_request(void)
{
	char y[1024], name[16], params[80] = "";
	int kind = (int)rnd_in(0, 9);
	snprintf(name, sizeof(name), "r%d", dst.nreq++);
	if(dst.shards && pct(40))
		snprintf(params, sizeof(params), "  parameters: {processorInstance: %s}\n", SHARD_B);
	if(kind < 2)
		snprintf(y, sizeof(y),
			 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_CHECK "\n%s"
			 "  podSets: [{podTemplateRef: {name: small}, count: %d}]\n",
			 name, params, (int)rnd_in(1, 4));
	else if(kind < 4)
		snprintf(y, sizeof(y),
			 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_ATOMIC "\n%s"
			 "  podSets: [{podTemplateRef: {name: small}, count: %d}, {podTemplateRef: {name: big}, count: %d}]\n",
			 name, params, (int)rnd_in(1, 4), (int)rnd_in(1, 3));
	else if(dst.nap && kind >= 8)
		snprintf(y, sizeof(y),
			 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_ATOMIC "\n%s"
			 "  podSets: [{podTemplateRef: {name: huge}, count: %d}]\n",
			 name, params, (int)rnd_in(1, 3));
	else
		snprintf(y, sizeof(y),
			 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_ATOMIC "\n%s"
			 "  podSets: [{podTemplateRef: {name: %s}, count: %d}]\n",
			 name, params, pct(50) ? "small" : "big", (int)rnd_in(1, 6));
	if(post(PR_PATH, y) == 0 && dst.nlive < MAXREQ)
		snprintf(dst.live[dst.nlive++], sizeof(dst.live[0]), "%s", name);
	vlog("create request %s%s", name, params[0] ? " for shard-b" : "");
}

/* A check-capacity request for `shard` (NULL the default): what books the
 * room on existing nodes that another instance is booking (replica.c, a
 * stall inside a status write that books). */
void create_check_request(const char *shard)
{
	char y[512], name[16], params[80] = "";
	snprintf(name, sizeof(name), "r%d", dst.nreq++);
	if(shard)
		snprintf(params, sizeof(params), "  parameters: {processorInstance: %s}\n", shard);
	snprintf(y, sizeof(y),
		 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_CHECK "\n%s"
		 "  podSets: [{podTemplateRef: {name: small}, count: %d}]\n",
		 name, params, (int)rnd_in(1, 4));
	if(post(PR_PATH, y) == 0 && dst.nlive < MAXREQ)
		snprintf(dst.live[dst.nlive++], sizeof(dst.live[0]), "%s", name);
	vlog("create check-capacity request %s%s", name, shard ? " for shard-b" : "");
}

/* --burst: three to six atomic requests at once (issue 43), of the
 * template one group's node takes two of, on the groups they share. */
static void create_burst(void)
{
	int n = (int)rnd_in(3, 6), i;
	bool shard_b = dst.shards && pct(40);
	for(i = 0; i < n && dst.nlive < MAXREQ; i++) {
		char y[700], name[16];
		snprintf(name, sizeof(name), "r%d", dst.nreq++);
		snprintf(y, sizeof(y),
			 "metadata: {name: %s}\nspec:\n  provisioningClassName: " CLASS_ATOMIC "\n%s"
			 "  podSets: [{podTemplateRef: {name: small}, count: %d}]\n",
			 name, shard_b ? "  parameters: {processorInstance: " SHARD_B "}\n" : "", (int)rnd_in(1, 4));
		if(post(PR_PATH, y) == 0)
			snprintf(dst.live[dst.nlive++], sizeof(dst.live[0]), "%s", name);
	}
	dst.bursts++;
	vlog("create a burst of %d atomic requests%s", n, shard_b ? " for shard-b" : "");
}

void delete_request(void)
{
	char path[256];
	prd_err e;
	int i;
	if(!dst.nlive)
		return;
	i = (int)rnd_in(0, dst.nlive - 1);
	snprintf(path, sizeof(path), PR_PATH "/%s", dst.live[i]);
	kube_api_call(&dst.raw_api, "DELETE", path, NULL, NULL, NULL, NULL, &e);
	vlog("delete request %s", dst.live[i]);
	memmove(&dst.live[i], &dst.live[i + 1], (size_t)(dst.nlive - i - 1) * sizeof(dst.live[0]));
	dst.nlive--;
}

/* ---------------------------------------------------------- one seed */

static void setup_cluster(void)
{
	size_t gi;
	post("/api/v1/namespaces", "metadata: {name: d}\n");
	post("/api/v1/namespaces/d/podtemplates",
	     "metadata: {name: small}\ntemplate:\n  metadata: {labels: {app: small}}\n"
	     "  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: \"2\", memory: 1Gi}}}]}\n");
	post("/api/v1/namespaces/d/podtemplates",
	     "metadata: {name: big}\ntemplate:\n  metadata: {labels: {app: big}}\n"
	     "  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: \"6\", memory: 1Gi}}}]}\n");
	/* No fixed group can take it (4 and 8 cpu): only an auto-provisioned
	 * one (16). */
	post("/api/v1/namespaces/d/podtemplates",
	     "metadata: {name: huge}\ntemplate:\n  metadata: {labels: {app: huge}}\n"
	     "  spec: {containers: [{name: c, image: x, resources: {requests: {cpu: \"12\", memory: 1Gi}}}]}\n");
	if(dst.profile != PROF_ABSTRACT) {
		world_setup();
		return;
	}
	for(gi = 0; gi < NGROUPS; gi++) {
		int running = (int)rnd_in(0, 2);
		cloud_initial(&dst.g[gi], running, pct(30));
	}
}

/* The plan key's Secret, as the first replica of an installation creates
 * it (pr_plan_key_load), with bytes drawn from the seed (not from the
 * seed's random stream: old seeds draw what they drew before) so a seed
 * replays the same. Each replica loads it when it starts. */
static void setup_plan_key(int64_t seed)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	uint64_t x = (uint64_t)seed ^ 0x5ea1ed9a9e3779b9ULL;
	uint8_t key[33];
	char text[45], yaml[200];
	size_t i;
	for(i = 0; i < 32; i++) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		key[i] = (uint8_t)(z ^ (z >> 31));
	}
	key[32] = 0;
	for(i = 0; i < 11; i++) {
		uint32_t v = (uint32_t)key[3 * i] << 16 | (uint32_t)key[3 * i + 1] << 8 | key[3 * i + 2];
		text[4 * i] = b64[v >> 18 & 63];
		text[4 * i + 1] = b64[v >> 12 & 63];
		text[4 * i + 2] = b64[v >> 6 & 63];
		text[4 * i + 3] = b64[v & 63];
	}
	text[43] = '=';
	text[44] = '\0';
	post("/api/v1/namespaces", "metadata: {name: " DST_NS "}\n");
	snprintf(yaml, sizeof(yaml), "metadata: {name: %s}\ntype: Opaque\ndata: {key: \"%s\"}\n", PR_PLAN_KEY_SECRET,
		 text);
	post("/api/v1/namespaces/" DST_NS "/secrets", yaml);
}

/* --no-ledger: the replicas run without the booking ledger (ledger.c), to
 * show what it prevents (a late booking landing over another instance's). */
static bool no_ledger;
/* --no-term: the replicas fence themselves by their lease, but fence no
 * group with a term (the term rule gone); --no-owner-marks: the cloud
 * claims owner marks and its listings carry none. Each shows what the
 * mechanism prevents. */
static bool no_term, no_marks;
/* --no-raise: the replicas never raise their Lease's count past a term
 * the groups record (kube_lease_follow_raise not given to the
 * controller), so a recreated Lease fences them out for good. */
static bool no_raise;
/* --nap: auto-provisioning in the modes with several actors too. */
static bool nap_multi;
/* --ledger-objects N: objects of the booking ledger hold N bytes of
 * entries (ledger.c, "Layout"), so a few bookings spill into overflow
 * objects that are made, replaced and deleted under the faults. */
static long ledger_objects;
/* --burst: bursts of atomic requests (create_burst). */
static bool burst_mode;
/* --driver: the cloud this run simulates (enum dst_profile). */
static int profile;

static void setup_replica(replica *r, int idx, const char *name, const char *shard, int lease)
{
	r->idx = idx;
	r->name = name;
	r->shard = shard;
	r->lease = lease;
	snprintf(r->dbpath, sizeof(r->dbpath), "%s/dst-%d-%lld-%s.db", dst.dir, (int)getpid(), (long long)dst.seed,
		 name);
	snprintf(r->snappath, sizeof(r->snappath), "%s.old", r->dbpath);
	pr_config_default(&r->cfg);
	r->cfg.provision_timeout_ns = 3 * MIN;
	r->cfg.booking_ttl_ns = 2 * MIN;
	r->cfg.scale_down = false;
	r->cfg.state_retention_ns = 365LL * 24 * 60 * MIN;
	r->cfg.processor_instance = shard;
	r->cfg.nap = dst.nap;
	/* Several actors: what a deployment with leader election or shards
	 * runs (cmd_run.c). */
	if(dst.multi && !no_ledger)
		r->cfg.booking_ledger = "provreqd/provreqd-bookings";
	r->cfg.ledger_object_bytes = ledger_objects > 0 ? (size_t)ledger_objects : 0;
}

/* A fresh world for `seed`: settings, cluster, replicas. */
static int setup_seed(int64_t seed, int actors, bool unfenced, const char *dir)
{
	int i, violations = dst.violations;
	bool verbose = dst.verbose, trace = dst.trace;
	const char *argv0 = dst.argv0;
	memset(&dst, 0, sizeof(dst));
	dst.violations = violations;
	dst.verbose = verbose;
	dst.trace = trace;
	dst.argv0 = argv0;
	dst.seed = seed;
	dst.profile = profile;
	dst.fenced_cloud = profile == PROF_ABSTRACT || profile == PROF_CAPI;
	rng = (uint64_t)seed * 0x2545f4914f6cdd1dULL + 1;
	dst.multi = actors >= 2 || (actors == 0 && seed % 5 != 0);
	dst.shards = dst.multi && actors != 3;
	dst.unfenced = unfenced;
	dst.no_term = no_term;
	dst.no_raise = no_raise;
	dst.no_marks = no_marks;
	dst.dir = dir;
	dst.g[0].id = "ga";
	dst.g[0].exists = dst.g[1].exists = true;
	dst.g[0].cpu = "4";
	dst.g[0].max = dst.multi ? 10 : 8;
	dst.g[1].id = "gb";
	dst.g[1].cpu = "8";
	dst.g[1].max = dst.multi ? 6 : 5;
	dst.faults = true;
	dst.p_transient = (int)rnd_in(0, 25);
	dst.p_stockout = (int)rnd_in(0, 20);
	dst.p_ambiguous = (int)rnd_in(0, 10);
	dst.p_inst_fail = (int)rnd_in(0, 25);
	dst.placeholders = dst.shards && pct(50);
	dst.outside_on = dst.shards && pct(75);
	/* (Decided last: the seeds of old draw what they drew before.) */
	dst.nap = (!dst.multi || nap_multi) && pct(60);
	/* The shipped drivers' profiles do not auto-provision yet (their
	 * worlds have no shapes). */
	if(dst.profile != PROF_ABSTRACT)
		dst.nap = false;
	dst.burst = burst_mode;
	if(dst.burst)
		dst.p_inst_fail = (int)rnd_in(10, 35);
	clk_fake_init(&dst.clock, 1714557600LL * SEC + seed % 1000 * SEC);
	metrics_shutdown();
	metrics_init();
	if(memapi_new(&dst.clock, 0, &dst.m))
		return -1;
	dst.raw_api.request = raw_api;
	dst.raw_api.ud = NULL;
	state_config_default(&dst.sc);
	dst.sc.request_backoff_initial_ns = 10 * SEC;
	dst.sc.request_backoff_max_ns = 60 * SEC;
	dst.sc.group_backoff_initial_ns = 30 * SEC;
	dst.sc.group_backoff_max_ns = 2 * MIN;
	dst.nrep = dst.shards ? NREP : dst.multi ? 2 : 1;
	setup_replica(&dst.r[0], 0, "A", NULL, 0);
	setup_replica(&dst.r[1], 1, "B", NULL, 0);
	setup_replica(&dst.r[2], 2, "S", SHARD_B, 1);
	setup_cluster();
	setup_plan_key(seed);
	for(i = 0; i < dst.nrep; i++)
		if(replica_start(&dst.r[i]))
			return -1;
	/* A leads the default shard, S its own; B stands by. */
	dst.lease[0].holder = dst.lease[1].holder = HOLDER_NONE;
	if(dst.multi)
		leases_begin();
	if(dst.verbose)
		fprintf(stderr, "seed %lld (%s%s): transient %d%%, stockout %d%%, ambiguous %d%%, instance failures %d%%%s%s\n",
			(long long)seed, dst.shards ? "several actors" : dst.multi ? "two replicas" : "one controller",
			unfenced ? ", unfenced" : "",
			dst.p_transient, dst.p_stockout, dst.p_ambiguous, dst.p_inst_fail,
			dst.placeholders ? ", placeholder ids" : "", dst.outside_on ? ", outside actor" : "");
	return 0;
}

static void pass_step(int crash_pct)
{
	replica *r = pick_leader();
	if(!r)
		return;
	if(pct(crash_pct)) {
		r->crash_at = rnd_in(1, 10);
		r->crash_after = pct(50);
	}
	replica_pass(r);
	r->crash_at = 0;
}

/* The step of the single-controller mode (the DST of old). */
static void single_step(void)
{
	int r = (int)rnd_in(0, 99);
	if(r < 30)
		pass_step(15);
	else if(r < 62)
		advance(rnd_in(1, 30) * SEC);
	else if(r < 74) {
		if(dst.burst && pct(40) && dst.nlive < 8)
			create_burst();
		else if(dst.nlive < 6)
			create_request();
	} else if(r < 79)
		delete_request();
	else if(r < 83)
		replica_restart(&dst.r[0], false, DB_KEEP);
	else if(r < 87)
		dst.fail_next = (int)rnd_in(1, 6);
	else
		pass_step(0);
}

/* A replica stalls: between passes (then runs the pass it was about to
 * run, if it still thinks it leads), or inside a call of its next pass,
 * or inside the next call that changes the cloud, whichever pass makes
 * it. */
static void stall_step(void)
{
	replica *r = pct(70) ? pick_leader() : &dst.r[rnd_in(0, dst.nrep - 1)];
	int64_t ns = rnd_in(3, 90) * SEC;
	if(!r || !r->ctl || r->frozen)
		return;
	if(pct(50)) {
		stall(r, ns, "between passes");
		if(r->leading)
			replica_pass(r);
	} else if(r->leading) {
		int k = (int)rnd_in(0, 9);
		r->stall_at = k < 4 ? STALL_BOOKING : k < 8 ? STALL_MUTATING : rnd_in(1, 8);
		r->stall_ns = ns;
		replica_pass(r);
	}
}

/* Two instances book the same room: a leader books a new check-capacity
 * request and its status write stalls on the way (replica.c), while the
 * other shard, or the replica that takes its lease, books another. What
 * the booking ledger (ledger.c) is for. */
static void booking_race(void)
{
	replica *r = pick_leader();
	if(!r || dst.nlive >= 8)
		return;
	create_check_request(r->shard);
	r->stall_at = STALL_BOOKING;
	r->stall_ns = rnd_in(5, 60) * SEC;
	replica_pass(r);
}

static void multi_step(void)
{
	int k = (int)rnd_in(0, 99);
	replica *r = &dst.r[rnd_in(0, dst.nrep - 1)];
	if(k < 26)
		pass_step(15);
	else if(k < 56)
		advance(rnd_in(1, 30) * SEC);
	else if(k < 66) {
		if(dst.burst && pct(40) && dst.nlive < 10)
			create_burst();
		else if(dst.nlive < 8)
			create_request();
	} else if(k < 70)
		delete_request();
	else if(k < 73)
		replica_restart(r, false, pct(30) ? DB_STALE : pct(15) ? DB_LOST : DB_KEEP);
	else if(k < 76)
		dst.fail_next = (int)rnd_in(1, 6);
	else if(k < 80)
		stall_step();
	else if(k < 86) {
		if(dst.outside_on)
			outside_act();
	} else if(k < 88)
		replica_snapshot(r);
	else if(k < 90)
		r->renew_fail_until = now_ns() + rnd_in(5, 25) * SEC;
	else if(k < 94)
		booking_race();
	else if(k < 96)
		lease_delete();
	else
		pass_step(0);
}

/* Does request `name` carry a Provisioned condition (whatever its
 * status): was it decided? */
static bool decided(const char *name)
{
	char path[200];
	json_object *pr = NULL, *st, *cs;
	bool yes = false;
	size_t i;
	prd_err e;
	snprintf(path, sizeof(path), PR_PATH "/%s", name);
	if(kube_api_call(&dst.raw_api, "GET", path, NULL, NULL, &pr, NULL, &e))
		return false;
	if(json_object_object_get_ex(pr, "status", &st) && json_object_object_get_ex(st, "conditions", &cs))
		for(i = 0; !yes && i < json_object_array_length(cs); i++) {
			json_object *t = NULL;
			yes = json_object_object_get_ex(json_object_array_get_idx(cs, i), "type", &t) &&
			      !strcmp(json_object_get_string(t), "Provisioned");
		}
	json_object_put(pr);
	return yes;
}

/* (xiii) Liveness, once settled: every shard still serves. A new
 * check-capacity request for each is decided (Provisioned, True or False)
 * within 5 simulated minutes of passes by whoever leads. What it catches:
 * a replica that leads and acts on nothing for good, as one fenced out by
 * a Lease recreated below a term the groups record and never raised. */
static void still_serving(void)
{
	char probe[2][16];
	int n = dst.shards ? 2 : 1, i, k;
	int64_t until = now_ns() + 5 * MIN;
	bool all = false;
	for(k = 0; k < n; k++) {
		snprintf(probe[k], sizeof(probe[k]), "r%d", dst.nreq);
		create_check_request(k ? SHARD_B : NULL);
	}
	while(!all && now_ns() < until && !dst.seed_failed) {
		advance(rnd_in(5, 20) * SEC);
		for(i = 0; i < dst.nrep; i++)
			if(dst.r[i].ctl && (!dst.multi || dst.r[i].leading))
				replica_pass(&dst.r[i]);
		check(false);
		for(all = true, k = 0; k < n && all; k++)
			all = decided(probe[k]);
	}
	for(k = 0; k < n && !dst.seed_failed; k++)
		if(!decided(probe[k]))
			violation("(xiii) request %s (%s) was not decided within 5 minutes once everything settled: its "
				  "shard no longer serves (%d Lease%s deleted this seed)",
				  probe[k], k ? "shard-b" : "the default shard", dst.lease_deletes,
				  dst.lease_deletes == 1 ? "" : "s");
}

/* Faults stop; the cloud and the controllers settle. A plan ends by its
 * deadline (3 min) plus rollback time, within the hold margin (10 min)
 * the controller gives it; backoffs end within 2 min. 45 simulated
 * minutes bound it with room to spare (and keep a seed that never
 * settles from costing as much as ten that do). */
static void settle(void)
{
	int64_t until = now_ns() + 45 * MIN;
	int quiet = 0, i;
	dst.faults = false;
	dst.fail_next = 0;
	dst.outside_on = false;
	for(i = 0; i < dst.nrep; i++) {
		dst.r[i].crash_at = dst.r[i].stall_at = 0;
		dst.r[i].renew_fail_until = 0;
	}
	while(now_ns() < until && !dst.seed_failed) {
		dst.step++;
		advance(rnd_in(5, 20) * SEC);
		for(i = 0; i < dst.nrep; i++)
			if(dst.r[i].ctl && (!dst.multi || dst.r[i].leading))
				replica_pass(&dst.r[i]);
		check(false);
		quiet = settled() ? quiet + 1 : 0;
		if(quiet >= 3)
			break;
	}
	check(true);
	if(!dst.seed_failed)
		still_serving();
}

static void teardown_seed(void)
{
	int i;
	for(i = 0; i < NREP; i++) {
		char p[600];
		replica_close(&dst.r[i]);
		if(!dst.r[i].dbpath[0])
			continue;
		snprintf(p, sizeof(p), "%s", dst.r[i].dbpath);
		unlink(p);
		snprintf(p, sizeof(p), "%s-wal", dst.r[i].dbpath);
		unlink(p);
		snprintf(p, sizeof(p), "%s-shm", dst.r[i].dbpath);
		unlink(p);
		unlink(dst.r[i].snappath);
	}
	ledger_free();
	memapi_free(dst.m);
	dst.m = NULL;
}

static void run_seed(int64_t seed, int steps, int actors, bool unfenced, const char *dir)
{
	int s;
	dst.seed_failed = false;
	dst.step = 0;
	if(setup_seed(seed, actors, unfenced, dir)) {
		violation("cannot start");
		teardown_seed();
		return;
	}
	for(s = 0; s < steps && !dst.seed_failed; s++) {
		dst.step = s;
		if(dst.multi)
			multi_step();
		else
			single_step();
		check(false);
	}
	if(!dst.seed_failed)
		settle();
	teardown_seed();
}

/* Seeds in batches, each in a child process: what crashed passes leave
 * behind (by design, as a killed process would) goes with each child, and
 * --jobs runs batches side by side. Returns the violations. */
typedef struct run_opts {
	int64_t seeds, first;
	int steps, jobs, actors;
	bool unfenced;
	const char *dir;
} run_opts;

static pid_t start_batch(const run_opts *o, int64_t from, int64_t n, int *fd_out)
{
	int fd[2];
	pid_t pid;
	int64_t k;
	if(pipe(fd)) {
		perror("dst: pipe");
		return -1;
	}
	fflush(stdout);
	pid = fork();
	if(pid < 0) {
		perror("dst: fork");
		return -1;
	}
	if(pid > 0) {
		close(fd[1]);
		*fd_out = fd[0];
		return pid;
	}
	close(fd[0]);
	for(k = 0; k < n; k++) {
		int before = dst.violations;
		run_seed(from + k, o->steps, o->actors, o->unfenced, o->dir);
		if(dst.violations > before && dst.verbose)
			fprintf(stderr, "seed %lld: %d violations\n", (long long)(from + k), dst.violations - before);
	}
	fflush(stdout);
	if(write(fd[1], &dst.violations, sizeof(dst.violations)) != (ssize_t)sizeof(dst.violations))
		_exit(3);
	_exit(0);
}

static int run_batches(const run_opts *o)
{
	struct {
		pid_t pid;
		int fd;
	} ch[16];
	int64_t next = 0;
	int running = 0, violations = 0;
	while(next < o->seeds || running > 0) {
		while(next < o->seeds && running < o->jobs) {
			/* Batches of DST_BATCH, smaller when that leaves jobs idle. */
			int64_t per = (o->seeds + o->jobs - 1) / o->jobs;
			int64_t batch = per < DST_BATCH ? (per > 0 ? per : 1) : DST_BATCH;
			int64_t n = o->seeds - next < batch ? o->seeds - next : batch;
			if((ch[running].pid = start_batch(o, o->first + next, n, &ch[running].fd)) < 0)
				return -1;
			running++;
			next += n;
		}
		/* Wait for the oldest batch. */
		{
			int v = 0, status = 0;
			if(read(ch[0].fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
				v = -1;
			close(ch[0].fd);
			waitpid(ch[0].pid, &status, 0);
			if(v < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				printf("dst: (v) a batch of seeds crashed (status %d); run it with --seeds %d -v to see where\n",
				       status, DST_BATCH);
				violations++;
			} else {
				violations += v;
			}
			memmove(&ch[0], &ch[1], (size_t)(running - 1) * sizeof(ch[0]));
			running--;
		}
	}
	return violations;
}

/* The simulated cloud's ABI 1.3 entry points work as the header says,
 * before any seed relies on them. */
static int selftest(const char *dir)
{
	const char *what = NULL;
	bool marks_lost = no_marks;
	int prof = profile;
	no_marks = false; /* the cloud as built, not as --no-owner-marks breaks it */
	profile = PROF_ABSTRACT;
	if(setup_seed(0, 1, false, dir) == 0)
		what = cloud_selftest(&dst.r[0]);
	else
		what = "cannot set up a world";
	teardown_seed();
	metrics_shutdown();
	no_marks = marks_lost;
	profile = prof;
	dst.violations = 0;
	if(what)
		fprintf(stderr, "dst: the simulated cloud is broken: %s\n", what);
	return what != NULL;
}

/* Keep the profile's module loaded across seeds (each replica's process
 * loads and unloads it; without this handle every seed would map and
 * relocate it anew). */
static int pin_driver(void)
{
	char path[1024];
	const char *b = getenv("PRD_BUILDDIR"), *name = profile_name(profile);
	snprintf(path, sizeof(path), "%s/cloud/%s/.libs/%s.so", b ? b : ".", name, name);
	if(!dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
		fprintf(stderr, "dst: cannot load the %s driver (%s): %s; build it first (make %s)\n", name, path,
			dlerror(), "cloud/kwok/kwok.la cloud/clusterapi/clusterapi.la cloud/karpenter/karpenter.la");
		return -1;
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: dst [--seeds N] [--first S] [--steps K] [--jobs J] [-v|-vv] "
			"[--actors mixed|single|multi|replicas] [--unfenced] [--no-ledger] [--ledger-objects N] [--no-term] "
			"[--no-raise] [--no-owner-marks] [--nap] [--burst] [--driver abstract|kwok|clusterapi|karpenter] "
			"[--skip vi,viii]\n");
	return 2;
}

int main(int argc, char **argv)
{
	run_opts o = { 1000, 1, 120, 1, 0, false, NULL };
	struct timespec t0, t1;
	static char flags[260], ledger_flag[40], driver_flag[40];
	double secs;
	int a, violations;
	FILE *devnull = fopen("/dev/null", "w");

	o.dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	dst.argv0 = "tests/dst/dst";
	for(a = 1; a < argc; a++) {
		if(!strcmp(argv[a], "--seeds") && a + 1 < argc)
			o.seeds = strtoll(argv[++a], NULL, 10);
		else if(!strcmp(argv[a], "--first") && a + 1 < argc)
			o.first = strtoll(argv[++a], NULL, 10);
		else if(!strcmp(argv[a], "--steps") && a + 1 < argc)
			o.steps = (int)strtol(argv[++a], NULL, 10);
		else if(!strcmp(argv[a], "--jobs") && a + 1 < argc)
			o.jobs = (int)strtol(argv[++a], NULL, 10);
		else if(!strcmp(argv[a], "--actors") && a + 1 < argc) {
			a++;
			if(!strcmp(argv[a], "single"))
				o.actors = 1;
			else if(!strcmp(argv[a], "multi"))
				o.actors = 2;
			else if(!strcmp(argv[a], "replicas"))
				o.actors = 3;
			else if(strcmp(argv[a], "mixed"))
				return usage();
		} else if(!strcmp(argv[a], "--skip") && a + 1 < argc) {
			snprintf(skip, sizeof(skip), ",%s,", argv[++a]);
		} else if(!strcmp(argv[a], "--unfenced"))
			o.unfenced = true;
		else if(!strcmp(argv[a], "--no-ledger"))
			no_ledger = true;
		else if(!strcmp(argv[a], "--no-term"))
			no_term = true;
		else if(!strcmp(argv[a], "--no-raise"))
			no_raise = true;
		else if(!strcmp(argv[a], "--no-owner-marks"))
			no_marks = true;
		else if(!strcmp(argv[a], "--ledger-objects") && a + 1 < argc)
			ledger_objects = strtol(argv[++a], NULL, 10);
		else if(!strcmp(argv[a], "--nap"))
			nap_multi = true;
		else if(!strcmp(argv[a], "--burst"))
			burst_mode = true;
		else if(!strcmp(argv[a], "--driver") && a + 1 < argc) {
			a++;
			for(profile = PROF_ABSTRACT; profile <= PROF_KARP; profile++)
				if(!strcmp(argv[a], profile_name(profile)))
					break;
			if(profile > PROF_KARP)
				return usage();
		}
		else if(!strcmp(argv[a], "-v"))
			dst.verbose = true;
		else if(!strcmp(argv[a], "-vv"))
			dst.verbose = dst.trace = true;
		else
			return usage();
	}
	if(getenv("DST_SEEDS"))
		o.seeds = strtoll(getenv("DST_SEEDS"), NULL, 10);
	if(getenv("DST_ACTORS")) {
		const char *v = getenv("DST_ACTORS");
		o.actors = !strcmp(v, "single") ? 1 : !strcmp(v, "multi") ? 2 : !strcmp(v, "replicas") ? 3 : 0;
	}
	o.jobs = o.jobs < 1 ? 1 : o.jobs > 16 ? 16 : o.jobs;
	snprintf(ledger_flag, sizeof(ledger_flag), " --ledger-objects %ld", ledger_objects);
	snprintf(driver_flag, sizeof(driver_flag), " --driver %s", profile_name(profile));
	snprintf(flags, sizeof(flags), "%s%s%s%s%s%s%s%s%s%s%s%.*s", profile != PROF_ABSTRACT ? driver_flag : "",
		 o.actors == 1 ? " --actors single" : o.actors == 2 ? " --actors multi" : o.actors == 3 ? " --actors replicas" : "",
		 o.unfenced ? " --unfenced" : "", no_ledger ? " --no-ledger" : "", ledger_objects > 0 ? ledger_flag : "",
		 no_term ? " --no-term" : "", no_raise ? " --no-raise" : "", no_marks ? " --no-owner-marks" : "",
		 nap_multi ? " --nap" : "",
		 burst_mode ? " --burst" : "", skip[0] ? " --skip " : "", skip[0] ? (int)strlen(skip) - 2 : 0,
		 skip[0] ? skip + 1 : "");
	mode_flags = flags;
	log_setup(dst.verbose ? PRD_LOG_INFO : PRD_LOG_ERROR, PRD_LOG_TEXT, dst.verbose ? stderr : devnull);
	if(selftest(o.dir))
		return 2;
	if(profile != PROF_ABSTRACT && pin_driver())
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	violations = run_batches(&o);
	if(violations < 0)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("dst: %lld seeds, %d invariant violations, %.1f seeds/s (driver %s)\n", (long long)o.seeds, violations,
	       secs > 0 ? (double)o.seeds / secs : 0.0, profile_name(profile));
	metrics_shutdown();
	if(devnull)
		fclose(devnull);
	return violations ? 1 : 0;
}

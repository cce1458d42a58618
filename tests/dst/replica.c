/* The DST's controller replicas: each a real pr_ctl on its own state file,
 * with its own view of the API and of the cloud (the driver's state is the
 * replica, so the cloud knows who calls), its leader election (the
 * production lease code on the simulated clock), crashes (between passes
 * or at any external call of a pass, before or after it took effect),
 * stalls (between passes, or inside a call that is on its way and takes
 * effect when the stall ends) and restarts with its state file as it was,
 * an older copy of it, or none, keeping its identity. */
#include "config.h"
#include "dst.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A crash point: every external call of a pass counts. */
void crash_point(replica *r, bool after)
{
	if(!r || !r->in_pass || !r->crash_at || r->calls != r->crash_at || r->crash_after != after)
		return;
	vlog("%s crashes %s external call %lld", r->name, after ? "after" : "before", (long long)r->calls);
	r->crash_at = 0;
	longjmp(r->jb, 1);
}

/* An external call begins: it may crash before taking effect, or stall
 * (decided and on its way, taking effect when the stall ends): at the
 * call numbered stall_at, or with STALL_MUTATING at the first call that
 * changes the cloud (`mutating`), where a late effect matters most. One
 * replica stalls at a time: a stall waits while another lasts. */
void call_begin(replica *r, bool mutating)
{
	if(!r)
		return;
	r->calls++;
	crash_point(r, false);
	if(r->in_pass && r->stall_at && !dst.stall_depth &&
	   (r->calls == r->stall_at || (r->stall_at == STALL_MUTATING && mutating))) {
		r->stall_at = 0;
		stall(r, r->stall_ns, "inside a call, which takes effect when the stall ends");
	}
}

/* ------------------------------------------------------------- leases */

/* Leadership is the production code: each replica of a multi-actor seed
 * runs src/kube/lease.c on the simulated clock (kube_lease_step every
 * retry period from advance(), no thread), over its own kube_client whose
 * in-process transport is lease_api below, and fences with
 * kube_lease_valid. Its identity is its name, kept across restarts as a
 * pod keeps POD_NAME, so a restarted replica re-takes its own lease.
 * Before each pass it follows the term as `provreqd run` does
 * (kube_lease_new_term) and gives the controller kube_lease_follow_raise
 * for a Lease recreated below a term the cloud records.
 *
 * The oracle's truth is not what a replica believes but the Lease as its
 * writes took effect (dst.lease, kept by lease_api): a holder's claim
 * cannot be taken over before a full lease duration after its last write
 * took effect, since others count the duration from when they saw it. */

#define LEASE_COLLECTION "/apis/coordination.k8s.io/v1/namespaces/" DST_NS "/leases"

static void lease_name(int k, char *out, size_t n)
{
	snprintf(out, n, "lease-%d", k);
}

/* The replica whose identity is `id` (its name), or HOLDER_NONE. */
static int replica_named(const char *id)
{
	int i;
	for(i = 0; id && *id && i < NREP; i++)
		if(dst.r[i].name && !strcmp(dst.r[i].name, id))
			return i;
	return HOLDER_NONE;
}

static const char *jstr(json_object *o, const char *a, const char *b)
{
	json_object *x = NULL, *y = NULL;
	if(!o || !json_object_object_get_ex(o, a, &x) || !json_object_object_get_ex(x, b, &y) ||
	   json_object_is_type(y, json_type_null))
		return NULL;
	return json_object_get_string(y);
}

/* A write to a Lease took effect with answer `resp`: the record now. */
static void lease_written(const char *resp)
{
	json_object *o = resp ? json_tokener_parse(resp) : NULL, *spec = NULL, *t = NULL;
	const char *name = jstr(o, "metadata", "name");
	int k = name && !strncmp(name, "lease-", 6) ? atoi(name + 6) : -1;
	if(k >= 0 && k < NLEASES) {
		lease_rec *l = &dst.lease[k];
		l->holder = replica_named(jstr(o, "spec", "holderIdentity"));
		l->renew_time = now_ns();
		l->transitions = json_object_object_get_ex(o, "spec", &spec) &&
						 json_object_object_get_ex(spec, "leaseTransitions", &t)
					 ? json_object_get_int64(t)
					 : 0;
	}
	json_object_put(o);
}

/* A canned answer of the simulated apiserver. */
static int fail_answer(long code, const char *reason, const char *msg, long *status, char **resp, size_t *resp_len)
{
	char b[256];
	snprintf(b, sizeof(b), "{\"kind\":\"Status\",\"reason\":\"%s\",\"code\":%ld,\"message\":\"%s\"}", reason, code,
		 msg);
	*status = code;
	*resp = strdup(b);
	*resp_len = *resp ? strlen(*resp) : 0;
	return code == 409 ? PRD_ECONFLICT : PRD_EAGAIN;
}

/* r's lease loop's way to the API (its kube_client's transport). While
 * r->renew_fail_until is ahead nothing gets through (r is cut off from
 * the apiserver). Writes are external calls of a pass when one runs (a
 * term raise: crash and stall points, as the controller's own writes),
 * and while faults are on they may fail (500, 409), stall on their way
 * (r stands still; the write lands when the stall ends, when another may
 * have taken over: the resourceVersion it carries then conflicts) or take
 * effect with their answer lost. The Lease is not what the oracle lists,
 * so these writes leave dst.api_writes alone. */
static int lease_api(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
		     long *status, char **resp, size_t *resp_len)
{
	replica *r = ud;
	bool write = strcmp(method, "GET") != 0;
	int rc;
	*status = 0;
	if(now_ns() < r->renew_fail_until)
		return PRD_ETIMEDOUT;
	if(write) {
		call_begin(r, false);
		if(dst.faults && pct(3))
			return pct(50) ? fail_answer(409, "Conflict", "simulated conflict", status, resp, resp_len)
				       : fail_answer(500, "InternalError", "simulated apiserver failure", status, resp,
						     resp_len);
		if(dst.faults && pct(1) && !dst.stall_depth && !r->frozen)
			stall(r, rnd_in(3, 40) * SEC, "inside a lease write, which lands when the stall ends");
	}
	rc = memapi_request(dst.m, method, path, ct, body, len, status, resp, resp_len);
	if(write && rc == 0)
		lease_written(*resp);
	if(write) {
		crash_point(r, true);
		if(rc == 0 && dst.faults && pct(2)) {
			free(*resp);
			*resp = NULL;
			*resp_len = 0;
			*status = 0;
			return PRD_ETIMEDOUT;
		}
	}
	return rc;
}

/* Whether r's lease was valid at this moment, as the record says: it holds
 * it and nobody could have taken it over yet. */
bool lease_valid(const replica *r)
{
	const lease_rec *l;
	if(!dst.multi)
		return true;
	l = &dst.lease[r->lease];
	return l->holder == r->idx && now_ns() < l->renew_time + LEASE_DURATION;
}

/* The fence provreqd asks before acting: kube_lease_valid, what the
 * replica itself knows (its last renewal and the renew deadline, shorter
 * than the lease, so a fenced replica stops before another can take
 * over). */
bool fence_says(const replica *r)
{
	return !dst.multi || (r->le && kube_lease_valid(r->le));
}

static bool fence(void *ud)
{
	return dst.unfenced || fence_says(ud);
}

/* The controller's term-raise callback (pr_ctl_set_term_raise), as
 * `provreqd run` gives it. */
static int raise_term(void *ud, int64_t transitions, prd_err *err)
{
	replica *r = ud;
	int rc = kube_lease_follow_raise(r->le, &r->term, transitions, err);
	vlog("%s raises lease %d's count to %lld: %s", r->name, r->lease, (long long)transitions, rc ? err->msg : "done");
	return rc;
}

/* What `provreqd run` does before a pass (run_iteration): a new term
 * (taken, or the Lease's count changed under this holder) goes to the
 * controller, which fences every group with it before acting, and the
 * local store is rebuilt from the API. */
void term_follow(replica *r)
{
	char key[64], id[64];
	int64_t tr = 0;
	if(!dst.multi || !r->le || !kube_lease_new_term(r->le, &r->term, key, id, sizeof(id), &tr))
		return;
	/* The deliberately broken builds: no fence at all, or no term. */
	if(!dst.unfenced && !dst.no_term)
		pr_ctl_set_term(r->ctl, key, id, tr);
	pr_ctl_rebuild_from_api(r->ctl);
	vlog("%s's term begins: %s#%lld", r->name, id, (long long)tr);
}

/* One turn of r's lease loop (every retry period). */
static void lease_tick(replica *r)
{
	bool leading = false;
	if(r->frozen || !r->ctl || !r->le)
		return;
	kube_lease_step(r->le, &leading, NULL, NULL);
	if(leading != r->leading)
		vlog("%s %s lease %d", r->name, leading ? "leads with" : "no longer leads with", r->lease);
	r->leading = leading;
}

/* r's leader election, started with its process. */
static int lease_start(replica *r)
{
	kube_client_opts co;
	kube_lease_opts lo;
	char name[16];
	prd_err e;
	memset(&co, 0, sizeof(co));
	/* Never retried: the backoff's jitter is rand(), not the seed's. */
	co.max_retries = -1;
	co.qps = 1000;
	co.burst = 1000;
	co.clock = &dst.clock;
	co.transport = lease_api;
	co.transport_ud = r;
	memset(&lo, 0, sizeof(lo));
	lease_name(r->lease, name, sizeof(name));
	lo.namespace_ = DST_NS;
	lo.name = name;
	lo.identity = r->name;
	lo.lease_duration_ns = LEASE_DURATION;
	lo.renew_deadline_ns = RENEW_DEADLINE;
	lo.retry_period_ns = RETRY_PERIOD;
	lo.clock = &dst.clock;
	r->term = (kube_lease_follow)KUBE_LEASE_FOLLOW_INIT;
	r->leading = false;
	if(kube_client_new(NULL, &co, &r->lc, &e) || kube_lease_new(r->lc, &lo, &r->le, &e)) {
		fprintf(stderr, "dst: %s: lease: %s\n", r->name, e.msg);
		return -1;
	}
	return 0;
}

/* The leases at the start: A leads the default shard, S its own, B
 * stands by (each takes its first step in that order). */
void leases_begin(void)
{
	int order[NREP] = {0, 2, 1}, i;
	for(i = 0; i < NREP; i++)
		if(order[i] < dst.nrep)
			lease_tick(&dst.r[order[i]]);
}

/* The fault: a Lease is deleted (its namespace deleted, the chart
 * reinstalled); the next to step makes it again at leaseTransitions 0,
 * while the groups it fences record a former, higher term. */
void lease_delete(void)
{
	int k = dst.shards && pct(50) ? 1 : 0;
	char path[200], name[16];
	long status = 0;
	char *resp = NULL;
	size_t n = 0;
	lease_name(k, name, sizeof(name));
	snprintf(path, sizeof(path), LEASE_COLLECTION "/%s", name);
	if(memapi_request(dst.m, "DELETE", path, NULL, NULL, 0, &status, &resp, &n) == 0) {
		dst.lease[k].holder = HOLDER_NONE;
		dst.lease_deletes++;
		vlog("the Lease %s is deleted (at leaseTransitions %lld)", name, (long long)dst.lease[k].transitions);
	}
	free(resp);
}

/* Time passes: the lease loops of the replicas that run turn, the cloud
 * moves on. */
void advance(int64_t ns)
{
	while(ns > 0) {
		int64_t s = ns < RETRY_PERIOD ? ns : RETRY_PERIOD;
		int i, k0;
		clk_fake_advance(&dst.clock, s);
		ns -= s;
		if(!dst.multi)
			continue;
		k0 = (int)rnd_in(0, dst.nrep - 1);
		for(i = 0; i < dst.nrep; i++)
			lease_tick(&dst.r[(k0 + i) % dst.nrep]);
	}
	cloud_progress();
}

/* A replica that runs passes now: up, not stalled, leading (as `provreqd
 * run` runs a pass only when its lease loop says it leads). */
replica *pick_leader(void)
{
	replica *v[NREP];
	int i, n = 0;
	for(i = 0; i < dst.nrep; i++)
		if(dst.r[i].ctl && !dst.r[i].frozen && (!dst.multi || dst.r[i].leading))
			v[n++] = &dst.r[i];
	return n ? v[rnd_in(0, n - 1)] : NULL;
}

/* ----------------------------------------------------- process life */

int replica_start(replica *r)
{
	prd_err e;
	if(dst.profile == PROF_ABSTRACT) {
		r->drv.api = &sim_driver;
		r->drv.state = r;
		r->drvp = &r->drv;
		r->drivers.v = &r->drvp;
		r->drivers.n = 1;
	} else if(driver_load(r)) {
		return -1;
	}
	r->api.request = sim_api;
	r->api.ud = r;
	if(state_open(r->dbpath, &dst.clock, &dst.sc, &r->db, &e)) {
		fprintf(stderr, "dst: %s: state_open: %s\n", r->name, e.msg);
		return -1;
	}
	if(pr_ctl_new(&r->cfg, &dst.clock, &r->api, r->db, &r->drivers, &r->ctl, &e)) {
		fprintf(stderr, "dst: %s: pr_ctl_new: %s\n", r->name, e.msg);
		return -1;
	}
	if(dst.multi) {
		if(lease_start(r))
			return -1;
		pr_ctl_set_fence(r->ctl, fence, r);
		if(!dst.unfenced && !dst.no_term && !dst.no_raise)
			pr_ctl_set_term_raise(r->ctl, raise_term, r);
	}
	/* The plan key, as `provreqd run` loads it (setup_plan_key made
	 * the Secret). */
	{
		uint8_t key[32];
		if(pr_plan_key_load(&dst.raw_api, DST_NS, key, NULL, &e)) {
			fprintf(stderr, "dst: %s: plan key: %s\n", r->name, e.msg);
			return -1;
		}
		pr_ctl_set_plan_key(r->ctl, key, sizeof(key));
	}
	if(sqlite3_open_v2(r->dbpath, &r->ro, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		return -1;
	sqlite3_busy_timeout(r->ro, 1000);
	return 0;
}

static void unlink_db(const char *path)
{
	char p[600];
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

static void copy_db(sqlite3 *from, const char *to_path)
{
	sqlite3 *to = NULL;
	sqlite3_backup *b;
	if(sqlite3_open(to_path, &to) == SQLITE_OK && (b = sqlite3_backup_init(to, "main", from, "main"))) {
		sqlite3_backup_step(b, -1);
		sqlite3_backup_finish(b);
	}
	sqlite3_close(to);
}

/* Keep a copy of r's state file as it is now, for a later restart with an
 * old file (a restored volume, a node that comes back with its disk). */
void replica_snapshot(replica *r)
{
	if(!r->ro)
		return;
	unlink_db(r->snappath);
	copy_db(r->ro, r->snappath);
	r->has_snap = true;
	vlog("%s's state file copied", r->name);
}

/* The process is gone (an abandoned pass's memory with it: a killed
 * process never frees; its controller is not freed either). */
void replica_close(replica *r)
{
	if(r->ctl && !r->in_pass)
		pr_ctl_free(r->ctl);
	r->ctl = NULL;
	/* A shipped driver goes with its process; one a crash left in the
	 * middle of a call is abandoned with the pass (a killed process runs
	 * no fini). */
	if(!r->in_pass) {
		cloud_drivers_free(&r->loaded);
		kube_lease_free(r->le);
		kube_client_free(r->lc);
	}
	memset(&r->loaded, 0, sizeof(r->loaded));
	r->le = NULL;
	r->lc = NULL;
	r->leading = false;
	state_close(r->db);
	r->db = NULL;
	if(r->ro)
		sqlite3_close(r->ro);
	r->ro = NULL;
}

void replica_restart(replica *r, bool abandoned, enum db_fate fate)
{
	/* A process stopped, not killed (a rollout's SIGTERM), gives its
	 * lease up on the way out, as `provreqd run` does. */
	if(!abandoned && r->le && pct(40)) {
		kube_lease_release(r->le, NULL);
		vlog("%s gives lease %d up", r->name, r->lease);
	}
	r->in_pass = abandoned;
	replica_close(r);
	r->in_pass = false;
	r->crash_at = r->stall_at = 0;
	if(fate == DB_STALE && r->has_snap) {
		sqlite3 *from = NULL;
		unlink_db(r->dbpath);
		if(sqlite3_open_v2(r->snappath, &from, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK)
			copy_db(from, r->dbpath);
		sqlite3_close(from);
	} else if(fate == DB_LOST) {
		unlink_db(r->dbpath);
	}
	/* The new process keeps r's identity (a pod's POD_NAME): its lease
	 * loop finds the Lease its own and renews it at its first step. */
	vlog("%s restarts%s%s", r->name, abandoned ? " after a crash inside the pass" : "",
	     fate == DB_STALE && r->has_snap ? " with an old copy of its state file"
	     : fate == DB_LOST		  ? " without its state file"
					  : "");
	if(replica_start(r))
		violation("replica %s could not restart", r->name);
}

/* One pass of r; a crash inside it restarts r. */
void replica_pass(replica *r)
{
	prd_err e;
	int64_t wake;
	if(!r->ctl)
		return;
	term_follow(r);
	r->calls = 0;
	r->pass_seq++;
	r->in_pass = true;
	vlog("pass of %s%s", r->name, fence_says(r) ? "" : " (past its renew deadline)");
	if(setjmp(r->jb) == 0) {
		pr_ctl_pass(r->ctl, &wake, &e);
		r->in_pass = false;
		if(dst.trace) {
			ledger_scan();
			dump_bookings();
		}
		r->crash_at = 0;
		/* A stall waiting for a call that changes the cloud waits for
		 * a pass that makes one. */
		if(r->stall_at > 0)
			r->stall_at = 0;
		return;
	}
	replica_restart(r, true, DB_KEEP);
}

/* -------------------------------------------------------------- stalls */

/* What the others do while r stands still. */
static void others_act(void)
{
	int k = (int)rnd_in(0, 99);
	if(k < 50) {
		replica *o = pick_leader();
		if(!o)
			return;
		if(pct(10)) {
			o->crash_at = rnd_in(1, 10);
			o->crash_after = pct(50);
		}
		replica_pass(o);
		o->crash_at = 0;
	} else if(k < 60 && dst.outside_on) {
		outside_act();
	} else if(k < 65 && dst.nlive < 8) {
		create_request();
	}
}

/* r stands still for `ns` (a GC pause, a frozen VM, a partition) while
 * the clock, the cloud, the leases and the others go on. One replica
 * stalls at a time. */
void stall(replica *r, int64_t ns, const char *where)
{
	int64_t end = now_ns() + ns;
	vlog("%s stalls for %llds %s", r->name, (long long)(ns / SEC), where);
	r->frozen = true;
	dst.stall_depth++;
	while(now_ns() < end && !dst.seed_failed) {
		int64_t dt = rnd_in(3, 15) * SEC;
		if(dt > end - now_ns())
			dt = end - now_ns();
		advance(dt);
		others_act();
		check(false);
	}
	dst.stall_depth--;
	r->frozen = false;
	vlog("%s resumes%s", r->name, lease_valid(r) ? "" : ", its lease expired");
}

/* ------------------------------------------------------------ the API */

/* Does this write put a booking into a request's status (a merge patch
 * that sets provreqd.io/booking to a text, not null) and say the capacity
 * is found (what invariant (viii) counts)? The key's slash may come
 * escaped (json-c writes "\/"). */
static bool books(const char *method, const char *path, const char *body, size_t len)
{
	static const char key[] = "\"provreqd.io";
	const char *p, *end = body + len;
	size_t plen = strlen(path);
	if(strcmp(method, "PATCH") || !body || plen < 7 || strcmp(path + plen - 7, "/status") ||
	   !strstr(path, "/provisioningrequests/") || !memmem(body, len, "CapacityIsFound", 15))
		return false;
	for(p = body; p && (p = memmem(p, (size_t)(end - p), key, sizeof(key) - 1)); p++) {
		const char *v = p + sizeof(key) - 1;
		if(v < end && *v == '\\')
			v++;
		if(end - v < 9 || memcmp(v, "/booking\"", 9))
			continue;
		v += 9;
		while(v < end && (*v == ' ' || *v == ':'))
			v++;
		if(v < end && *v == '"')
			return true;
	}
	return false;
}

/* A replica's API: writes are external calls (crash and stall points)
 * and may fail with 500 or 409 while faults are on. A stall waiting for a
 * booking (STALL_BOOKING) holds the first status write that books room:
 * decided on what the replica saw, it lands when the stall ends, after
 * the others may have booked the same room (what the booking ledger,
 * written before it, guards). */
int sim_api(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
	    long *status, char **resp, size_t *resp_len)
{
	replica *r = ud;
	bool write = strcmp(method, "GET") != 0;
	int rc;
	if(write) {
		if(r && r->in_pass && r->stall_at == STALL_BOOKING && !dst.stall_depth && books(method, path, body, len)) {
			r->stall_at = 0;
			/* Someone else wants room meanwhile: the other shard,
			 * or (without one) r's own once another replica leads. */
			if(dst.nlive < MAXREQ - 1)
				create_check_request(!dst.shards ? r->shard : r->shard ? NULL : SHARD_B);
			stall(r, r->stall_ns, "inside a status write that books room, which lands when the stall ends");
		}
		call_begin(r, false);
		if(dst.faults && pct(3)) {
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
	rc = raw_api(NULL, method, path, ct, body, len, status, resp, resp_len);
	if(write)
		crash_point(r, true);
	return rc;
}

int raw_api(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
	    long *status, char **resp, size_t *resp_len)
{
	(void)ud;
	if(strcmp(method, "GET") != 0)
		dst.api_writes++;
	return memapi_request(dst.m, method, path, ct, body, len, status, resp, resp_len);
}

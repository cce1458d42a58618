/* The DST's controller replicas: each a real pr_ctl on its own state file,
 * with its own view of the API and of the cloud (the driver's state is the
 * replica, so the cloud knows who calls), its leader election on a
 * simulated Lease, crashes (between passes or at any external call of a
 * pass, before or after it took effect), stalls (between passes, or inside
 * a call that is on its way and takes effect when the stall ends) and
 * restarts with its state file as it was, an older copy of it, or none. */
#include "config.h"
#include "dst.h"

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

/* The fence provreqd asks before acting: what the replica itself knows,
 * its last renewal and the renew deadline (shorter than the lease, so a
 * fenced replica stops before another can take over). */
bool fence_says(const replica *r)
{
	return !dst.multi || (r->leading && now_ns() < r->last_renew + RENEW_DEADLINE);
}

static bool fence(void *ud)
{
	return dst.unfenced || fence_says(ud);
}

/* What `provreqd run` does when its lease loop says it took the lease:
 * the term (the election's key, the identity and leaseTransitions) goes
 * to the controller, which fences every group with it before acting. */
void term_begins(replica *r)
{
	char key[16];
	if(dst.unfenced || dst.no_term)
		return; /* the deliberately broken builds: no fence at all, or no term */
	snprintf(key, sizeof(key), "lease-%d", r->lease);
	pr_ctl_set_term(r->ctl, key, r->name, dst.lease[r->lease].transitions);
}

static void acquired(replica *r, lease_rec *l, const char *how)
{
	if(l->holder != r->idx)
		l->transitions++;
	l->holder = r->idx;
	term_begins(r);
	l->renew_time = now_ns();
	r->last_renew = now_ns();
	r->leading = true;
	pr_ctl_rebuild_from_api(r->ctl);
	vlog("%s %s lease %d", r->name, how, r->lease);
}

/* One turn of r's lease loop (client-go's, every retry period). */
static void lease_tick(replica *r)
{
	lease_rec *l = &dst.lease[r->lease];
	int64_t now = now_ns();
	if(r->frozen || !r->ctl)
		return;
	if(now < r->renew_fail_until) {
		if(r->leading && now >= r->last_renew + RENEW_DEADLINE) {
			r->leading = false;
			vlog("%s stops leading: no renewal within the renew deadline", r->name);
		}
		return;
	}
	if(l->holder == r->idx) {
		l->renew_time = now;
		r->last_renew = now;
		if(!r->leading)
			acquired(r, l, "leads again with");
		return;
	}
	if(r->leading) {
		r->leading = false;
		vlog("%s finds it lost lease %d", r->name, r->lease);
	}
	if(l->holder == HOLDER_NONE || now >= l->renew_time + LEASE_DURATION)
		acquired(r, l, "takes");
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
	if(dst.multi)
		pr_ctl_set_fence(r->ctl, fence, r);
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
	if(!r->in_pass)
		cloud_drivers_free(&r->loaded);
	memset(&r->loaded, 0, sizeof(r->loaded));
	state_close(r->db);
	r->db = NULL;
	if(r->ro)
		sqlite3_close(r->ro);
	r->ro = NULL;
}

void replica_restart(replica *r, bool abandoned, enum db_fate fate)
{
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
	/* A new process is a new identity: the record of the old one ends
	 * only when it expires. */
	if(dst.multi) {
		r->leading = false;
		if(dst.lease[r->lease].holder == r->idx)
			dst.lease[r->lease].holder = HOLDER_DEAD;
	}
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

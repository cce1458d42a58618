/* Leader election against the fake store, with a fake clock. */
#include "testutil.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/client.h"
#include "kube/lease.h"
#include "test_kube_fakesrv.h"

#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/provreqd"

typedef struct cand {
	kube_lease *le;
	clk fc;
	int started, stopped, new_leader, problems, cleared;
	char leader[64];
	char problem[512];
} cand;

static void on_problem(void *ud, const char *cause)
{
	cand *c = ud;
	if(cause) {
		c->problems++;
		snprintf(c->problem, sizeof(c->problem), "%s", cause);
	} else {
		c->cleared++;
		c->problem[0] = 0;
	}
}

static void on_started(void *ud) { ((cand *)ud)->started++; }
static void on_stopped(void *ud) { ((cand *)ud)->stopped++; }
static void on_new_leader(void *ud, const char *id)
{
	cand *c = ud;
	c->new_leader++;
	snprintf(c->leader, sizeof(c->leader), "%s", id ? id : "");
}

static void cand_init(cand *c, kube_client *cl, const char *id)
{
	kube_lease_opts o = {.namespace_ = "kube-system", .name = "provreqd", .identity = id,
			     .on_started = on_started, .on_stopped = on_stopped,
			     .on_new_leader = on_new_leader, .on_problem = on_problem};
	prd_err e;
	memset(c, 0, sizeof(*c));
	clk_fake_init(&c->fc, 1700000000LL * PRD_NS_PER_SEC);
	o.clock = &c->fc;
	o.ud = c;
	CU_ASSERT_EQUAL_FATAL(kube_lease_new(cl, &o, &c->le, &e), 0);
}

static bool step(cand *c)
{
	bool leading = false;
	prd_err e;
	int64_t next;
	kube_lease_step(c->le, &leading, &next, &e);
	CU_ASSERT_EQUAL(next, 2 * PRD_NS_PER_SEC);
	return leading;
}

static void advance(cand *a, cand *b, int64_t ns)
{
	clk_fake_advance(&a->fc, ns);
	clk_fake_advance(&b->fc, ns);
}

static json_object *lease_spec(fake_store *st)
{
	char *t = fake_store_get(st, LEASE_PATH);
	json_object *o, *spec;
	if(!t)
		return NULL;
	o = json_tokener_parse(t);
	free(t);
	spec = json_object_get(json_object_object_get(o, "spec"));
	json_object_put(o);
	return spec;
}

static const char *sget(json_object *o, const char *k)
{
	json_object *v;
	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static void test_acquire_takeover_release(void)
{
	fake_store *st = fake_store_new();
	fake_srv *srv = fake_start(fake_store_handler, st);
	kube_config *cfg;
	kube_client *cl;
	cand a, b;
	json_object *spec;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, NULL, &cfg, &cl), 0);
	cand_init(&a, cl, "host-a_1");
	cand_init(&b, cl, "host-b_2");

	/* a creates the Lease and leads; b sees it held. */
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_EQUAL(a.started, 1);
	CU_ASSERT_FALSE(step(&b));
	CU_ASSERT_STRING_EQUAL(b.leader, "host-a_1");
	spec = lease_spec(st);
	CU_ASSERT_PTR_NOT_NULL_FATAL(spec);
	CU_ASSERT_STRING_EQUAL(sget(spec, "holderIdentity"), "host-a_1");
	CU_ASSERT_STRING_EQUAL(sget(spec, "leaseDurationSeconds"), "15");
	CU_ASSERT_STRING_EQUAL(sget(spec, "leaseTransitions"), "0");
	/* MicroTime: six fractional digits. */
	CU_ASSERT_STRING_EQUAL(sget(spec, "acquireTime"), "2023-11-14T22:13:20.000000Z");
	json_object_put(spec);

	/* a renews every retry period; b never gets it. */
	for(int i = 0; i < 10; i++) {
		advance(&a, &b, 2 * PRD_NS_PER_SEC);
		CU_ASSERT_TRUE(step(&a));
		CU_ASSERT_FALSE(step(&b));
	}
	CU_ASSERT_EQUAL(a.started, 1);
	spec = lease_spec(st);
	CU_ASSERT_STRING_EQUAL(sget(spec, "acquireTime"), "2023-11-14T22:13:20.000000Z");
	CU_ASSERT_STRING_EQUAL(sget(spec, "renewTime"), "2023-11-14T22:13:40.000000Z");
	json_object_put(spec);

	/* a stops renewing (dies). b waits one lease duration from the last
	 * change it saw, then takes over. */
	advance(&a, &b, 14 * PRD_NS_PER_SEC);
	CU_ASSERT_FALSE(step(&b));
	advance(&a, &b, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&b));
	CU_ASSERT_EQUAL(b.started, 1);
	spec = lease_spec(st);
	CU_ASSERT_STRING_EQUAL(sget(spec, "holderIdentity"), "host-b_2");
	CU_ASSERT_STRING_EQUAL(sget(spec, "leaseTransitions"), "1");
	json_object_put(spec);

	/* a comes back: sees b, stops leading at once. */
	CU_ASSERT_FALSE(step(&a));
	CU_ASSERT_EQUAL(a.stopped, 1);
	CU_ASSERT_FALSE(kube_lease_is_leader(a.le));

	/* b releases on shutdown: a takes over on its next step without
	 * waiting for expiry. */
	CU_ASSERT_EQUAL(kube_lease_release(b.le, NULL), 0);
	CU_ASSERT_EQUAL(b.stopped, 1);
	spec = lease_spec(st);
	CU_ASSERT_PTR_NULL(sget(spec, "holderIdentity"));
	json_object_put(spec);
	advance(&a, &b, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_EQUAL(a.started, 2);
	spec = lease_spec(st);
	CU_ASSERT_STRING_EQUAL(sget(spec, "leaseTransitions"), "2");
	json_object_put(spec);

	kube_lease_free(a.le);
	kube_lease_free(b.le);
	kube_client_free(cl);
	kube_config_free(cfg);
	fake_stop(srv);
	fake_store_free(st);
}

static void test_renew_deadline(void)
{
	fake_store *st = fake_store_new();
	fake_srv *srv = fake_start(fake_store_handler, st);
	kube_config *cfg;
	kube_client *cl;
	kube_client_opts co = {.max_retries = -1};
	cand a;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, &co, &cfg, &cl), 0);
	cand_init(&a, cl, "host-a");
	CU_ASSERT_TRUE(step(&a));
	/* The apiserver fails; leadership holds until the renew deadline. */
	fake_store_fail(st, 500, 100);
	for(int i = 1; i <= 4; i++) {
		clk_fake_advance(&a.fc, 2 * PRD_NS_PER_SEC);
		CU_ASSERT_TRUE(step(&a));
	}
	clk_fake_advance(&a.fc, 2 * PRD_NS_PER_SEC); /* 10 s since the last renewal */
	CU_ASSERT_FALSE(step(&a));
	CU_ASSERT_EQUAL(a.stopped, 1);
	fake_store_fail(st, 500, 0);
	/* Our own unexpired record: we re-acquire it (same holder). */
	clk_fake_advance(&a.fc, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_EQUAL(a.started, 2);
	kube_lease_free(a.le);
	kube_client_free(cl);
	kube_config_free(cfg);
	fake_stop(srv);
	fake_store_free(st);
}

/* The fence: valid only while the last renewal was sent less than the
 * renew deadline ago, whether or not the renewing loop has run since (a
 * paused process, a stalled lease thread). Broken fence caught: one that
 * answers from the "leading" flag, which only the next step clears (after
 * a pause it said yes for up to a retry period while another replica
 * already held the lease). The term (identity, leaseTransitions) moves on
 * a takeover. */
static void test_valid_fences_a_stall(void)
{
	fake_store *st = fake_store_new();
	fake_srv *srv = fake_start(fake_store_handler, st);
	kube_config *cfg;
	kube_client *cl;
	kube_client_opts co = {.max_retries = -1};
	cand a, b;
	char id[64];
	int64_t tr = -1, tr_b = -1;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, &co, &cfg, &cl), 0);
	cand_init(&a, cl, "host-a");
	cand_init(&b, cl, "host-b");
	CU_ASSERT_FALSE(kube_lease_valid(a.le));
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_TRUE(kube_lease_valid(a.le));
	kube_lease_term(a.le, id, sizeof(id), &tr);
	CU_ASSERT_STRING_EQUAL(id, "host-a");
	CU_ASSERT_EQUAL(tr, 0);
	/* A pauses 9 s: still within its renew deadline (10 s). */
	clk_fake_advance(&a.fc, 9 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(kube_lease_valid(a.le));
	/* 1 s more: no step ran, yet the fence closes. */
	clk_fake_advance(&a.fc, PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(kube_lease_is_leader(a.le));
	CU_ASSERT_FALSE(kube_lease_valid(a.le));
	/* B sees A's record unchanged for a lease duration and takes over. */
	CU_ASSERT_FALSE(step(&b));
	clk_fake_advance(&b.fc, 15 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&b));
	CU_ASSERT_TRUE(kube_lease_valid(b.le));
	kube_lease_term(b.le, id, sizeof(id), &tr_b);
	CU_ASSERT_STRING_EQUAL(id, "host-b");
	CU_ASSERT_EQUAL(tr_b, 1);
	/* A wakes: still fenced, and its next step says it lost. */
	CU_ASSERT_FALSE(kube_lease_valid(a.le));
	CU_ASSERT_FALSE(step(&a));
	CU_ASSERT_FALSE(kube_lease_valid(a.le));
	kube_lease_free(a.le);
	kube_lease_free(b.le);
	kube_client_free(cl);
	kube_config_free(cfg);
	fake_stop(srv);
	fake_store_free(st);
}

static void test_conflict_loses(void)
{
	fake_store *st = fake_store_new();
	fake_srv *srv = fake_start(fake_store_handler, st);
	kube_config *cfg;
	kube_client *cl;
	cand a, b;
	prd_err e;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, NULL, &cfg, &cl), 0);
	cand_init(&a, cl, "a");
	cand_init(&b, cl, "b");
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_EQUAL(kube_lease_release(a.le, &e), 0);
	/* The lease is free, but another writer got in between b's read and
	 * its write: the PUT (with the resourceVersion b read) conflicts and
	 * b does not lead. */
	fake_store_fail_on(st, "PUT", 409, 1);
	CU_ASSERT_FALSE(step(&b));
	CU_ASSERT_EQUAL(b.started, 0);
	CU_ASSERT_TRUE(step(&b));
	CU_ASSERT_EQUAL(b.started, 1);
	/* A holder seen for the first time is respected for a full lease
	 * duration, whatever its renewTime says. */
	CU_ASSERT_EQUAL(kube_patch(cl, &KUBE_LEASES, "kube-system", "provreqd", NULL, KUBE_PATCH_MERGE,
				   "{\"spec\":{\"holderIdentity\":\"c\"}}", false, NULL, NULL, &e), 0);
	CU_ASSERT_FALSE(step(&a));
	CU_ASSERT_STRING_EQUAL(a.leader, "c");
	clk_fake_advance(&a.fc, 14 * PRD_NS_PER_SEC);
	CU_ASSERT_FALSE(step(&a));
	clk_fake_advance(&a.fc, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	/* Invalid timing is refused. */
	{
		kube_lease *bad = NULL;
		kube_lease_opts o = {.namespace_ = "n", .name = "l", .identity = "i",
				     .renew_deadline_ns = 20 * PRD_NS_PER_SEC};
		CU_ASSERT_EQUAL(kube_lease_new(cl, &o, &bad, &e), PRD_EINVAL);
		CU_ASSERT_PTR_NULL(bad);
	}
	kube_lease_free(a.le);
	kube_lease_free(b.le);
	kube_client_free(cl);
	kube_config_free(cfg);
	fake_stop(srv);
	fake_store_free(st);
}

/* Broken lease code caught: one that stays silent (and ready) when its
 * Lease cannot be written because the namespace is missing or RBAC
 * forbids it, that reports the same cause on every retry, that never
 * clears the report, or that calls another holder a problem. */
static void test_problem_reported_once(void)
{
	fake_store *st = fake_store_new();
	fake_srv *srv = fake_start(fake_store_handler, st);
	kube_config *cfg;
	kube_client *cl;
	cand a, b;
	char why[512];
	int i;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, NULL, &cfg, &cl), 0);
	cand_init(&a, cl, "a");
	cand_init(&b, cl, "b");
	/* The namespace does not exist: the create is refused with 404. */
	fake_store_fail_on(st, "POST", 404, 3);
	for(i = 0; i < 3; i++)
		CU_ASSERT_FALSE(step(&a));
	CU_ASSERT_EQUAL(a.problems, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(a.problem, "404"));
	CU_ASSERT_TRUE(kube_lease_problem(a.le, why, sizeof(why)));
	CU_ASSERT_STRING_EQUAL(why, a.problem);
	/* A different cause is reported again. */
	fake_store_fail_on(st, "POST", 403, 1);
	CU_ASSERT_FALSE(step(&a));
	CU_ASSERT_EQUAL(a.problems, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(a.problem, "403"));
	/* It works: cleared once, and a leader. */
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_EQUAL(a.cleared, 1);
	CU_ASSERT_FALSE(kube_lease_problem(a.le, why, sizeof(why)));
	CU_ASSERT_STRING_EQUAL(why, "");
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_EQUAL(a.cleared, 1);
	/* Another holder is not a problem. */
	CU_ASSERT_FALSE(step(&b));
	CU_ASSERT_EQUAL(b.problems, 0);
	CU_ASSERT_FALSE(kube_lease_problem(b.le, NULL, 0));
	kube_lease_free(a.le);
	kube_lease_free(b.le);
	kube_client_free(cl);
	kube_config_free(cfg);
	fake_stop(srv);
	fake_store_free(st);
}

static void test_thread(void)
{
	fake_store *st = fake_store_new();
	fake_srv *srv = fake_start(fake_store_handler, st);
	kube_config *cfg;
	kube_client *cl;
	kube_lease *le;
	kube_lease_opts o = {.namespace_ = "kube-system", .name = "provreqd", .identity = "t",
			     .lease_duration_ns = 3 * PRD_NS_PER_SEC,
			     .renew_deadline_ns = 2 * PRD_NS_PER_SEC,
			     .retry_period_ns = 100 * PRD_NS_PER_MS,
			     .on_started = on_started, .on_stopped = on_stopped};
	cand c;
	prd_err e;
	json_object *spec;

	memset(&c, 0, sizeof(c));
	o.ud = &c;
	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, NULL, &cfg, &cl), 0);
	CU_ASSERT_EQUAL_FATAL(kube_lease_new(cl, &o, &le, &e), 0);
	CU_ASSERT_EQUAL(kube_lease_start(le, &e), 0);
	for(int i = 0; i < 100 && !kube_lease_is_leader(le); i++) {
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
	}
	CU_ASSERT_TRUE(kube_lease_is_leader(le));
	kube_lease_stop(le);
	CU_ASSERT_FALSE(kube_lease_is_leader(le));
	CU_ASSERT_EQUAL(c.started, 1);
	CU_ASSERT_EQUAL(c.stopped, 1);
	spec = lease_spec(st);
	CU_ASSERT_PTR_NULL(sget(spec, "holderIdentity"));
	json_object_put(spec);
	kube_lease_free(le);
	kube_client_free(cl);
	kube_config_free(cfg);
	fake_stop(srv);
	fake_store_free(st);
}

/* A recreated Lease (deleted, its namespace deleted and made again)
 * starts leaseTransitions at 0: the term the holder reports follows the
 * Lease, and the holder can raise it (conditionally) above a term
 * recorded elsewhere. Only the holder with a valid fence can; a write in
 * between (a renewal, a takeover) makes the raise a Conflict that changes
 * nothing. Broken lease code caught: one whose term stays the old one
 * after it created a new Lease (the controller never learns its term
 * fell), one that lets a stalled or non-holding process raise the term
 * (a stale leader would fence the new one out), one that writes
 * leaseDurationSeconds truncated (10.9 s as 10: others wait less than
 * the fence's margin assumes). */
static void test_recreated_and_raised(void)
{
	fake_store *st = fake_store_new();
	fake_srv *srv = fake_start(fake_store_handler, st);
	kube_config *cfg;
	kube_client *cl;
	kube_client_opts co = {.max_retries = -1};
	cand a, b;
	json_object *spec;
	int64_t tr = -1;
	prd_err e;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, &co, &cfg, &cl), 0);
	cand_init(&a, cl, "host-a");
	cand_init(&b, cl, "host-b");
	CU_ASSERT_TRUE(step(&a));
	/* Raised to 7: the Lease says so, and so does the term. */
	CU_ASSERT_EQUAL(kube_lease_raise(a.le, 7, &e), 0);
	kube_lease_term(a.le, NULL, 0, &tr);
	CU_ASSERT_EQUAL(tr, 7);
	spec = lease_spec(st);
	CU_ASSERT_STRING_EQUAL(sget(spec, "leaseTransitions"), "7");
	CU_ASSERT_STRING_EQUAL(sget(spec, "holderIdentity"), "host-a");
	json_object_put(spec);
	/* Renewals keep it. */
	clk_fake_advance(&a.fc, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	kube_lease_term(a.le, NULL, 0, &tr);
	CU_ASSERT_EQUAL(tr, 7);
	/* Not the holder: refused, nothing written. */
	CU_ASSERT_FALSE(step(&b));
	CU_ASSERT_EQUAL(kube_lease_raise(b.le, 20, &e), PRD_EAGAIN);
	/* A write between the read and the raise: Conflict, unchanged. */
	fake_store_fail_on(st, "PUT", 409, 1);
	CU_ASSERT_EQUAL(kube_lease_raise(a.le, 9, &e), PRD_ECONFLICT);
	kube_lease_term(a.le, NULL, 0, &tr);
	CU_ASSERT_EQUAL(tr, 7);
	spec = lease_spec(st);
	CU_ASSERT_STRING_EQUAL(sget(spec, "leaseTransitions"), "7");
	json_object_put(spec);
	/* The Lease is deleted; the holder makes it again at 0 and its term
	 * says 0, whatever it was. */
	CU_ASSERT_EQUAL(kube_delete(cl, &KUBE_LEASES, "kube-system", "provreqd", NULL, NULL, &e), 0);
	clk_fake_advance(&a.fc, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	kube_lease_term(a.le, NULL, 0, &tr);
	CU_ASSERT_EQUAL(tr, 0);
	/* Stalled past the renew deadline: it may not raise. */
	clk_fake_advance(&a.fc, 11 * PRD_NS_PER_SEC);
	CU_ASSERT_EQUAL(kube_lease_raise(a.le, 7, &e), PRD_EAGAIN);
	spec = lease_spec(st);
	CU_ASSERT_STRING_EQUAL(sget(spec, "leaseTransitions"), "0");
	json_object_put(spec);
	kube_lease_free(a.le);
	kube_lease_free(b.le);
	/* A duration that is not whole seconds is written rounded up. */
	{
		kube_lease_opts o = {.namespace_ = "kube-system", .name = "other", .identity = "c",
				     .lease_duration_ns = 10900 * PRD_NS_PER_MS,
				     .renew_deadline_ns = 10500 * PRD_NS_PER_MS};
		char *t;
		kube_lease *c = NULL;
		bool leading = false;
		CU_ASSERT_EQUAL_FATAL(kube_lease_new(cl, &o, &c, &e), 0);
		kube_lease_step(c, &leading, NULL, &e);
		CU_ASSERT_TRUE(leading);
		t = fake_store_get(st, "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/other");
		CU_ASSERT_PTR_NOT_NULL(t ? strstr(t, "\"leaseDurationSeconds\": 11") : NULL);
		free(t);
		kube_lease_free(c);
	}
	kube_client_free(cl);
	kube_config_free(cfg);
	fake_stop(srv);
	fake_store_free(st);
}

/* The term a leader's controller follows (kube_lease_new_term, what
 * `provreqd run` and the simulation do before each pass): a new term when
 * the lease is taken, again when it is taken back after a loss, and when
 * the holder recreates a deleted Lease (its count starts again at 0);
 * none on a renewal, none while the lease is not valid, none for a raise
 * made through kube_lease_follow_raise. Broken code caught: a follower
 * that misses the recreated Lease's restart at 0, one that takes its own
 * raise for a new term (that restarts the controller's count of raises,
 * PR_TERM_RAISES_MAX, each time), one that hands a term out past the
 * renew deadline, a fencing key that is not the lease's name. */
static void test_follow_term(void)
{
	fake_store *st = fake_store_new();
	fake_srv *srv = fake_start(fake_store_handler, st);
	kube_config *cfg;
	kube_client *cl;
	kube_client_opts co = {.max_retries = -1};
	kube_lease_follow f = KUBE_LEASE_FOLLOW_INIT;
	char key[64], id[64];
	int64_t tr = -1;
	cand a, b;
	prd_err e;

	CU_ASSERT_PTR_NOT_NULL_FATAL(srv);
	CU_ASSERT_EQUAL_FATAL(fake_client(srv, &co, &cfg, &cl), 0);
	cand_init(&a, cl, "host-a");
	cand_init(&b, cl, "host-b");
	CU_ASSERT_FALSE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_TRUE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	CU_ASSERT_STRING_EQUAL(key, "provreqd");
	CU_ASSERT_STRING_EQUAL(id, "host-a");
	CU_ASSERT_EQUAL(tr, 0);
	CU_ASSERT_FALSE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	advance(&a, &b, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_FALSE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	/* Its own raise is no new term. */
	CU_ASSERT_EQUAL(kube_lease_follow_raise(a.le, &f, 7, &e), 0);
	CU_ASSERT_FALSE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	advance(&a, &b, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_FALSE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	/* The Lease deleted and made again by the same holder: a new term
	 * at 0. */
	CU_ASSERT_EQUAL(kube_delete(cl, &KUBE_LEASES, "kube-system", "provreqd", NULL, NULL, &e), 0);
	advance(&a, &b, 2 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_TRUE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	CU_ASSERT_EQUAL(tr, 0);
	/* Past the renew deadline nothing is handed out; renewed, the same
	 * term goes on. */
	advance(&a, &b, 11 * PRD_NS_PER_SEC);
	CU_ASSERT_FALSE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_FALSE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	/* Lost to b and taken back: a new term, whatever the count. */
	CU_ASSERT_FALSE(step(&b));
	advance(&a, &b, 16 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&b));
	CU_ASSERT_FALSE(step(&a));
	advance(&a, &b, 16 * PRD_NS_PER_SEC);
	CU_ASSERT_TRUE(step(&a));
	CU_ASSERT_TRUE(kube_lease_new_term(a.le, &f, key, id, sizeof(id), &tr));
	CU_ASSERT_EQUAL(tr, 2);
	kube_lease_free(a.le);
	kube_lease_free(b.le);
	/* A name longer than a label value: its first 54 characters and a
	 * hash. */
	{
		static const char longname[] = "a-lease-name-that-is-much-longer-than-any-label-value-may-ever-be-ok";
		kube_lease_opts o = {.namespace_ = "kube-system", .name = longname, .identity = "c"};
		kube_lease *c = NULL;
		char k2[64];
		CU_ASSERT_EQUAL_FATAL(kube_lease_new(cl, &o, &c, &e), 0);
		kube_lease_fence_key(c, key);
		CU_ASSERT_EQUAL(strlen(key), 63);
		CU_ASSERT_EQUAL(strncmp(key, longname, 54), 0);
		CU_ASSERT_EQUAL(key[54], '-');
		kube_lease_free(c);
		o.name = "a-lease-name-that-is-much-longer-than-any-label-value-may-ever-be-ko";
		CU_ASSERT_EQUAL_FATAL(kube_lease_new(cl, &o, &c, &e), 0);
		kube_lease_fence_key(c, k2);
		CU_ASSERT_STRING_NOT_EQUAL(key, k2);
		kube_lease_free(c);
	}
	kube_client_free(cl);
	kube_config_free(cfg);
	fake_stop(srv);
	fake_store_free(st);
}

static const test_case cases[] = {
	{ "the fence closes at the renew deadline without a step", test_valid_fences_a_stall },
	{"acquire, renew, take over after expiry, release", test_acquire_takeover_release},
	{"renew deadline ends leadership", test_renew_deadline},
	{"a conflicting write loses; a new holder is respected", test_conflict_loses},
	{"a lease that cannot be taken is reported once, and cleared", test_problem_reported_once},
	{"helper thread acquires and releases on stop", test_thread},
	{"a recreated Lease restarts the term; the holder raises it", test_recreated_and_raised},
	{"the term a leader follows: taken, recreated, not raised", test_follow_term},
	{NULL, NULL}
};

TEST_MAIN("kube_lease", cases)

/* The deterministic simulation test's shared state (see dst.c for what it
 * does and how to run it).
 *
 * One seed is one world: the simulated clock, the in-memory API, the
 * simulated cloud with its own record of every instance, the controller
 * replicas with their state files, the leases and the oracle's ledger of
 * plans. A world is single-threaded and lives in the global `dst`, reset
 * at the start of every seed: the driver and API callbacks reach it from
 * the controller's calls without a context of their own. */
#ifndef PRD_TESTS_DST_H
#define PRD_TESTS_DST_H

#include "driver/host.h"
#include "driver/loader.h"
#include "kube/api.h"
#include "kube/lease.h"
#include "kube/memapi.h"
#include "provreq/controller.h"
#include "state/state.h"
#include "util/clock.h"

#include <setjmp.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#define SEC PRD_NS_PER_SEC
#define MIN (60 * SEC)
#define NGROUPS 2
/* Node groups the controller may auto-provision (ABI 1.5), after the
 * NGROUPS fixed ones: slots never reused, so the record stays. */
#define NAPG 6
#define NGALL (NGROUPS + NAPG)
#define MAXI 160
#define MAXREQ 64
#define NREP 3
#define NLEASES 2
#define MAXPLANS 512
#define CLASS_ATOMIC "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#define CLASS_CHECK "check-capacity.autoscaling.x-k8s.io"
#define PR_PATH "/apis/autoscaling.x-k8s.io/v1/namespaces/d/provisioningrequests"
#define SHARD_B "shard-b"
#define DST_NS "provreqd" /* provreqd's own namespace: the plan key's Secret */

/* Leader election as provreqd runs it (client-go's defaults). */
#define LEASE_DURATION (15 * SEC)
#define RENEW_DEADLINE (10 * SEC)
#define RETRY_PERIOD (2 * SEC)

/* Who made an instance, besides the replicas 0..NREP-1. */
#define BY_START (-1)
#define BY_OUTSIDE NREP

/* A lease record's holder besides a replica: nobody. */
#define HOLDER_NONE (-1)

/* A stall inside a call (replica.stall_at) waiting for the first call that
 * changes the cloud, or for the first status write that books room. */
#define STALL_MUTATING (-1)
#define STALL_BOOKING (-2)

typedef struct inst {
	char id[112];         /* what instances() reports: a placeholder until the provider assigns `provider` */
	char provider[112];
	char node[80];
	bool appeared;        /* created (else: requested, pending) */
	bool gone;            /* deleted or cancelled: no longer exists */
	bool deleting;
	int errclass;         /* failed to be created */
	int64_t t_appear, t_register, t_gone;
	int64_t created_ns;
	/* The cloud's own record, which the controller cannot touch. */
	int creator;          /* BY_START, a replica, BY_OUTSIDE */
	char owner[64];       /* the owner token the creating call passed ("" none) */
	char plan[128];       /* the plan it is of, as an owner token ("" none; see cloud.c) */
	bool lease_ok;        /* the creating replica's lease was valid when the call took effect */
	bool fenced;          /* ... and its fence said no when it decided the call (--unfenced) */
	/* The shipped drivers' worlds (drivers.c): the object that is the
	 * instance (a Node, a Machine, a NodeClaim) and whether it is Ready. */
	char obj[64];
	bool ready;
	int64_t made_pass;    /* the creating replica's pass (replica.pass_seq) */
	bool undone;          /* deleted by the call that made it (an atomic increase's part): never counted as made */
	bool mhc;             /* a MachineHealthCheck's replacement (clusterapi) */
	bool reclaimed;       /* a plan's, taken back by Karpenter's consolidation after its hold: still counted as held */
} inst;

typedef struct grp {
	const char *id;       /* NULL: a slot no group was made in */
	const char *cpu;
	bool exists;          /* listed by the cloud (the fixed ones always) */
	bool nap;             /* made by create_group */
	char idbuf[48];
	char owner[64];       /* create_group's owner token */
	int32_t max;
	int32_t target;
	uint64_t fence[NLEASES]; /* the highest term of each election the group has seen (ABI 1.4) */
	inst v[MAXI];
	size_t n;
} grp;

typedef struct replica {
	int idx;
	const char *name;     /* "A", "B", "S" */
	const char *shard;    /* its processor_instance, NULL for the default shard */
	int lease;            /* the lease it competes for */
	cloud_driver drv;     /* the simulated cloud, with this replica as its state */
	cloud_host_impl host; /* a shipped driver's host (drivers.c): its requests are this replica's */
	cloud_drivers loaded; /* ... and the shipped driver loaded for this process */
	int incarnation;      /* processes started so far (a shipped driver's name seed) */
	int64_t pass_seq;     /* passes begun so far, over its incarnations */
	prd_cloud_driver shim; /* the shipped driver's descriptor, its increase() seen first (drivers.c) */
	const prd_cloud_driver *real;
	char call_owner[128]; /* the owner token of the increase() under way ("" none) */
	cloud_driver *drvp;
	cloud_drivers drivers;
	kube_api api;         /* the API, with this replica as the caller */
	char dbpath[512];
	char snappath[520];   /* an older copy of its state file */
	bool has_snap;
	state_db *db;
	sqlite3 *ro;          /* the harness's view of its store: snapshots and -v dumps, never the oracle */
	pr_ctl *ctl;
	pr_config cfg;
	jmp_buf jb;           /* a crash inside its pass lands here */
	bool in_pass;
	int64_t calls;        /* external calls in the current pass */
	int64_t crash_at;     /* crash at this call of the pass (0 = no) */
	bool crash_after;     /* ... after it took effect */
	int64_t stall_at;     /* stall at this call of the pass (0 = no, or STALL_MUTATING, STALL_BOOKING) */
	int64_t stall_ns;
	kube_client *lc;      /* its lease loop's client (in-process transport, replica.c) */
	kube_lease *le;       /* its leader election: src/kube/lease.c, identity `name` */
	kube_lease_follow term; /* the term its controller acts in (kube_lease_new_term) */
	bool leading;         /* what its lease loop last told it */
	bool frozen;          /* stalled: does nothing until the stall ends */
	int64_t renew_fail_until; /* its lease requests get no answer until then */
} replica;

/* A Lease as its writes took effect (replica.c, lease_api): the oracle's
 * truth of who may act, never a replica's belief. */
typedef struct lease_rec {
	int holder;           /* a replica, or HOLDER_NONE (released, deleted) */
	int64_t renew_time;   /* when its last write took effect */
	int64_t transitions;  /* leaseTransitions as last written */
} lease_rec;

/* A plan as the API showed it (the oracle's ledger): one per intent, that
 * is per plan and group. */
typedef struct plan_rec {
	char token[128];      /* the intent id as an owner token */
	char base[128];       /* the plan id (all its intents) as a token */
	char uid[64];         /* its request */
	char req[16];
	char group[32];
	int64_t delta;
	char phase[24];       /* the last scaleUpPhase the API showed */
	bool seen_done;       /* the API showed it done */
	bool superseded;      /* its request's status names a later plan */
	bool request_gone;
} plan_rec;

/* Which cloud a run simulates (--driver): the abstract one of cloud.c, or
 * a shipped driver's module against the in-memory API with simulated
 * controllers for what it drives (drivers.c). */
enum dst_profile { PROF_ABSTRACT, PROF_KWOK, PROF_CAPI, PROF_KARP };

typedef struct dst_sim {
	/* This seed's settings. */
	int64_t seed;
	int profile;          /* enum dst_profile */
	/* The cloud refuses a late call (fencing, ABI 1.4): a call that took
	 * effect late made nothing beyond its plan's delta even for a moment.
	 * Without it (kwok, karpenter: a request already on its way when the
	 * caller stalls lands when the stall ends) the surplus must be gone
	 * once settled instead (oracle.c). */
	bool fenced_cloud;
	bool multi;           /* several replicas (else the single controller of old) */
	bool shards;          /* ... and a second shard, the outside actor, placeholder ids */
	bool unfenced;        /* the fence always says yes (shows that the oracle catches it) */
	bool no_term;         /* --no-term: the fence works, but no term reaches the cloud */
	bool no_raise;        /* --no-raise: a term recorded above the holder's is never raised past */
	bool no_marks;        /* --no-owner-marks: the cloud claims owner marks and lists none */
	bool placeholders;    /* new instances may have a placeholder id first */
	bool faults;
	bool nap;             /* auto-provisioning on (single mode): requests no group can serve */
	bool burst;           /* --burst: several atomic requests at once on the shared groups */
	int bursts;           /* ... how many this seed made */
	int p_transient, p_stockout, p_ambiguous, p_inst_fail;
	int fail_next;        /* a burst: the next calls fail */
	bool outside_on;      /* the outside actor acts */
	/* The world. */
	clk clock;
	memapi *m;
	kube_api raw_api;     /* the harness's own API (counts its writes too) */
	uint64_t api_writes;  /* writes to the API so far: the oracle reads it anew only after one */
	state_config sc;
	grp g[NGALL];
	uint64_t create_fence[NLEASES]; /* the highest term of each election group creations have seen (ABI 1.6) */
	int seq;
	replica r[NREP];
	int nrep;
	lease_rec lease[NLEASES];
	int lease_deletes;    /* Leases deleted by the fault (lease_delete) */
	int stall_depth;
	int nreq;
	char live[MAXREQ][16];
	int nlive;
	/* The oracle. */
	plan_rec plans[MAXPLANS];
	int nplans;
	bool lost_room[MAXREQ]; /* request rN had room on a Node another actor deleted */
	/* Reporting. */
	const char *dir;
	const char *argv0;
	int64_t step;
	int violations;
	bool seed_failed;
	bool verbose;
	bool trace; /* -vv: the API's bookings after every pass */
	bool quiet;           /* the self-test: violations are noted, not printed */
} dst_sim;

extern dst_sim dst;

/* dst.c */
uint64_t rnd(void);
int64_t rnd_in(int64_t lo, int64_t hi);
bool pct(int p);
int64_t now_ns(void);
void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int post(const char *path, const char *yaml);
void create_request(void);
void create_check_request(const char *shard);
void delete_request(void);

/* cloud.c */
extern const prd_cloud_driver sim_driver;
grp *group_of(const char *id);
int32_t present(const grp *g);
void cloud_progress(void);
bool cloud_settled(void);
void cloud_initial(grp *g, int running, bool failed_one);
void outside_act(void);
void plan_token(const char *intent_id, char *out, size_t len);
const char *cloud_selftest(replica *r);

/* drivers.c: the shipped drivers' worlds (dispatched from cloud.c) */
const char *profile_name(int profile);
int driver_load(replica *r);
void world_setup(void);
void world_progress(void);
bool world_settled(void);
void world_outside(void);

/* replica.c */
int replica_start(replica *r);
enum db_fate { DB_KEEP, DB_STALE, DB_LOST };
void replica_restart(replica *r, bool abandoned, enum db_fate fate);
void replica_snapshot(replica *r);
void replica_close(replica *r);
void replica_pass(replica *r);
void crash_point(replica *r, bool after);
void call_begin(replica *r, bool mutating);
bool lease_valid(const replica *r);
bool fence_says(const replica *r);
void term_follow(replica *r);
void leases_begin(void);
void lease_delete(void);
void advance(int64_t ns);
void stall(replica *r, int64_t ns, const char *where);
replica *pick_leader(void);
int sim_api(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
	    long *status, char **resp, size_t *resp_len);
int raw_api(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
	    long *status, char **resp, size_t *resp_len);

/* oracle.c */
void ledger_scan(void);
void ledger_free(void);
void dump_bookings(void);
plan_rec *ledger_find(const char *token);
void judge_increase(const replica *r, const grp *g, const char *plan, int32_t d, bool lease_ok, bool fenced);
void judge_delete(const replica *r, const grp *g, const inst *x, const char *how);
void judge_create(const replica *r, const grp *g);
bool may_delete(const inst *x);
bool booked_by_any(const char *node, char *who, size_t len);
bool booked_by(const char *node, const char *req);
int64_t plan_live(const char *token);
bool api_increasing(const replica *r, const char *group, int64_t d, char *out, size_t len);
void check(bool final);
void room_lost(const char *node);
bool settled(void);

#endif

/* Leader election with a coordination.k8s.io/v1 Lease, as client-go's
 * leaderelection package does it.
 *
 * A candidate holds the lease while it renews it (renewTime) more often
 * than leaseDurationSeconds. Others only take the lease over when they have
 * seen the same lease record unchanged for a full lease duration on their
 * own clock (no clock comparison across machines), or when the holder
 * cleared holderIdentity on shutdown. Every write is a PUT with the
 * resourceVersion read just before, so two candidates never both win.
 *
 * Drive it either by calling kube_lease_step() from your own loop every
 * retry period, or with kube_lease_start(), which runs that loop on a
 * thread. Callbacks run on the thread that calls step. */
#ifndef PRD_KUBE_LEASE_H
#define PRD_KUBE_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/client.h"
#include "util/clock.h"

typedef struct kube_lease_opts {
	const char *namespace_;       /* required */
	const char *name;             /* required */
	const char *identity;         /* required: unique per process (host name + pid) */
	int64_t lease_duration_ns;    /* default 15 s; written as whole seconds (leaseDurationSeconds),
				       * rounded up: others wait at least this long */
	int64_t renew_deadline_ns;    /* default 10 s: give up leading after failing to renew this long */
	int64_t retry_period_ns;      /* default 2 s */
	const clk *clock;             /* default clk_real() */
	/* Called once when this process becomes leader / stops being leader
	 * (lost the lease, failed to renew within the deadline, or released).
	 * A controller must stop writing when told it is no longer leader. */
	void (*on_started)(void *ud);
	void (*on_stopped)(void *ud);
	/* Called when the observed holder changes (may be NULL/"" = none). */
	void (*on_new_leader)(void *ud, const char *identity);
	/* Called when the lease cannot be read or written for a reason other
	 * than another holder (missing namespace, forbidden, unreachable
	 * apiserver), with the cause, once per distinct cause; and with NULL
	 * once it can be again. The cause is also logged at warn. */
	void (*on_problem)(void *ud, const char *cause);
	void *ud;
} kube_lease_opts;

typedef struct kube_lease kube_lease;

/* Strings in opts are copied. The client is borrowed. */
int kube_lease_new(kube_client *c, const kube_lease_opts *o, kube_lease **out, prd_err *err);
/* Stops the helper thread if running (releasing the lease), then frees. */
void kube_lease_free(kube_lease *le);

/* One try-acquire-or-renew. Returns 0 and sets *leading; a non-zero code
 * means the apiserver could not be asked (the state machine already
 * accounted for it: leadership is kept until the renew deadline passes).
 * *next_ns (may be NULL) is the suggested delay before the next step. */
int kube_lease_step(kube_lease *le, bool *leading, int64_t *next_ns, prd_err *err);

/* Give the lease up if held: clear holderIdentity so another candidate
 * takes over at once, and call on_stopped. */
int kube_lease_release(kube_lease *le, prd_err *err);

bool kube_lease_is_leader(kube_lease *le);
/* Fencing (docs/design.md §7): true only while this process leads AND the last
 * successful renewal was sent less than the renew deadline ago on the
 * lease's clock. Others take the lease over only a full lease duration
 * after they saw that renewal, so a true answer leaves at least
 * (duration - deadline) for the action it guards. Unlike
 * kube_lease_is_leader, it turns false by itself when the renewing thread
 * stalls or the process was paused: call it right before every write.
 * Safe from any thread. */
bool kube_lease_valid(kube_lease *le);
/* This process's identity and the leaseTransitions of its current (or
 * last) term: a plan records them, so it always says which term made it. */
void kube_lease_term(kube_lease *le, char *identity, size_t n, int64_t *transitions);
/* Raise the Lease's leaseTransitions to `transitions` (when it is lower),
 * so that the next term is transitions + 1: a leader whose Lease was
 * recreated (starting again at 0) while groups it fences still record a
 * former, higher term moves its own term above theirs. Only while this
 * process holds the lease and kube_lease_valid() is true, with a PUT
 * conditional on the resourceVersion read just before: PRD_ECONFLICT when
 * another process wrote the Lease meanwhile or holds it, PRD_EAGAIN when
 * this process may not act; nothing is changed then. On success the term
 * (kube_lease_term) is the raised one. */
int kube_lease_raise(kube_lease *le, int64_t transitions, prd_err *err);
/* The election's fencing key (ABI 1.4 fence_key, a label value): the
 * lease's name when it is 63 characters or fewer, else its first 54 and
 * a hash of the whole. */
void kube_lease_fence_key(const kube_lease *le, char out[64]);

/* The term a leader's controller acts in, as the leader follows it:
 * `provreqd run` (cmd_run.c) and the deterministic simulation
 * (tests/dst/replica.c) both do
 *
 *   if(kube_lease_new_term(le, &f, key, id, sizeof(id), &tr)) {
 *           pr_ctl_set_term(ctl, key, id, tr);
 *           pr_ctl_rebuild_from_api(ctl);
 *   }
 *
 * before each pass, and hand kube_lease_follow_raise to the controller
 * as its term-raise callback (pr_ctl_set_term_raise). The caller owns f
 * (one per controller), which starts as KUBE_LEASE_FOLLOW_INIT. */
typedef struct kube_lease_follow {
	uint64_t acquisitions;  /* the lease's acquisitions when the term was last taken */
	int64_t transitions;    /* the leaseTransitions it was taken or raised at; -1 none yet */
} kube_lease_follow;
#define KUBE_LEASE_FOLLOW_INIT {0, -1}

/* Whether a new term begins now: false unless kube_lease_valid(); true
 * when this process began leading since the term f recorded (the local
 * store may be stale: another process may have led meanwhile), or the
 * Lease's count changed under this holder (the Lease was deleted and
 * this process made it again, starting at 0). Then key (the fencing key),
 * identity (n bytes) and *transitions are the new term, and f records
 * it. */
bool kube_lease_new_term(kube_lease *le, kube_lease_follow *f, char key[64], char *identity, size_t n,
			 int64_t *transitions);
/* kube_lease_raise, for the controller's term-raise callback: on success
 * f records the raised count, in which the controller already acts, so
 * kube_lease_new_term sees no new term in it (a new term would restart
 * the controller's count of raises, PR_TERM_RAISES_MAX). */
int kube_lease_follow_raise(kube_lease *le, kube_lease_follow *f, int64_t transitions, prd_err *err);

/* The current problem (see on_problem) copied into out; false when none. */
bool kube_lease_problem(kube_lease *le, char *out, size_t n);

/* Run step() on a thread every retry period (with jitter) until
 * kube_lease_stop(), which releases the lease and joins the thread. */
int kube_lease_start(kube_lease *le, prd_err *err);
void kube_lease_stop(kube_lease *le);

#endif

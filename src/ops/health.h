/* Liveness and readiness state behind /healthz and /readyz.
 *
 * Liveness: the worker loop calls health_beat() on every iteration
 * (including while it waits for caches or for the leader lease); when the
 * last beat is older than the stale threshold the process is reported not
 * alive, with the age in the reason. The count starts at health_new(), so a
 * worker that never starts is caught too.
 *
 * Readiness: named checks, each either a flag the owner flips
 * (health_set_flag; e.g. "caches-synced", "state-store", "leader-election")
 * or a callback evaluated on every probe. Ready = every check passes.
 *
 * Ownership and threads: the caller creates the object with health_new()
 * and frees it with health_free() after every user (the HTTP server, the
 * worker) has stopped. All other functions are safe to call from any thread
 * concurrently; check callbacks run on the prober's thread (the HTTP
 * server's) with no health lock held, so they may call health_* functions
 * but must be quick and must not block. */
#ifndef PRD_OPS_HEALTH_H
#define PRD_OPS_HEALTH_H

#include <stdbool.h>
#include <stdint.h>

#include "util/buf.h"
#include "util/clock.h"

typedef struct health health;

/* A readiness callback: return true when ready; otherwise may append a
 * short reason to `reason` (without a newline). */
typedef bool (*health_check_fn)(void *ud, buf *reason);

/* `clock` is borrowed and must outlive the object (clk_real() normally).
 * stale_after_ns > 0. 0, PRD_EINVAL or PRD_ENOMEM. */
int health_new(const clk *clock, int64_t stale_after_ns, health **out);
void health_free(health *h);

/* The worker loop is alive: record now. Lock-free. */
void health_beat(health *h);

/* Is the process alive? When not, appends the reason to `reason` (may be
 * NULL). */
bool health_live(health *h, buf *reason);

/* Register a readiness flag (initially `ok`, with `reason` shown while not
 * ok, may be NULL) or a callback. Names are unique: PRD_EEXIST otherwise. */
int health_add_flag(health *h, const char *name, bool ok, const char *reason);
int health_add_check(health *h, const char *name, health_check_fn fn, void *ud);
/* Set a flag registered with health_add_flag; PRD_ENOTFOUND for an unknown
 * name. `reason` (may be NULL) replaces the reason shown while not ok. */
int health_set_flag(health *h, const char *name, bool ok, const char *reason);

/* A note shown under "ok" while the flag `name` is ok (NULL: none): ready,
 * but worth saying (a standby: "standing by: the lease is held by X").
 * PRD_ENOTFOUND for an unknown name. */
int health_set_note(health *h, const char *name, const char *note);
/* Append "NAME: note\n" for every ok flag with a note. */
void health_notes(health *h, buf *out);

/* Is the process ready? Appends one line per failing check to `report`
 * (may be NULL): "NAME: reason\n", in registration order. */
bool health_ready(health *h, buf *report);

#endif

/* The priority expander's table, kept up to date from a ConfigMap
 * (cluster-autoscaler-priority-expander format, sched/priorities.h).
 *
 * `run` re-reads the ConfigMap with a GET at most every
 * PRIO_CM_REREAD_NS, before a pass (an idle provreqd passes at least
 * every 30 s), and hands the controller a new table only when the
 * ConfigMap's resourceVersion changed: a periodic re-read rather than a
 * watch, one small request per interval, no cache to keep.
 *
 *  - missing (404): the table is emptied, so "priority" is skipped and the
 *    rest of the chain decides (cluster-autoscaler does the same);
 *  - unreadable (403, network): the table in use stays;
 *  - present but malformed: the table in use stays.
 * Each problem is logged once, when it starts, naming the ConfigMap and
 * what is wrong; recovery is logged too.
 *
 * Ownership: a prio_cm is a plain value the caller owns (prio_cm_free);
 * not thread-safe (the worker thread uses it). */
#ifndef PRD_SCHED_PRIORITY_CM_H
#define PRD_SCHED_PRIORITY_CM_H

#include <stdbool.h>
#include <stdint.h>

#include "kube/api.h"
#include "sched/priorities.h"

#define PRIO_CM_REREAD_NS (10LL * 1000000000LL)

typedef struct prio_cm {
	char ns[254], name[254];
	char *rv;             /* resourceVersion of the table in use; NULL = none */
	char *bad_rv;         /* ... of the last version refused (logged once) */
	bool read_once;       /* a read was attempted */
	int64_t next_ns;      /* monotonic time of the next re-read */
	int problem;          /* what was logged last (PRIO_CM_*) */
} prio_cm;

enum { PRIO_CM_OK = 0, PRIO_CM_MISSING, PRIO_CM_UNREADABLE, PRIO_CM_MALFORMED };

void prio_cm_init(prio_cm *w, const char *ns, const char *name);
void prio_cm_free(prio_cm *w);

/* When due (now_ns monotonic; the first call always reads), GET the
 * ConfigMap. Returns 1 when *out holds a table to use instead of the
 * current one (possibly empty: the ConfigMap is gone; caller frees with
 * sched_priorities_free), 0 when nothing changes, PRD_ENOMEM. */
int prio_cm_poll(prio_cm *w, const kube_api *api, int64_t now_ns, sched_priorities *out);

#endif

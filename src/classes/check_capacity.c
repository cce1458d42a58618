/* The check-capacity class (check-capacity.autoscaling.x-k8s.io): place
 * every pod of the request on the existing nodes, counting capacity booked
 * by earlier requests; book it when all fit. */
#include "kube/quantity.h"
#include "ops/log.h"
#include "ops/metrics.h"
#include "provreq/ctl_int.h"
#include "sched/estimator.h"
#include "sched/expander.h"
#include "util/buf.h"
#include "util/rfc3339.h"
#include "util/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Place every pod on existing capacity (check-capacity). */
void pr__check_capacity(pr_ctl *c, pr_world *w, const kube_provreq *pr, const pr_params *pp,
			      sched_podset *sets, pr_conds *conds)
{
	sched_place_result res;
	prd_err e;
	char msg[700];
	memset(&res, 0, sizeof(res));
	if(sched_snapshot_fork(w->snap) || sched_place(w->snap, sets, pr->npod_sets, &res, &e)) {
		sched_snapshot_revert(w->snap);
		snprintf(msg, sizeof(msg), "cannot simulate the pods: %s", e.msg);
		pr__not_provisioned(c, pr, pp, conds, PR_R_CHECK_FAILED, msg);
		sched_place_result_free(&res);
		return;
	}
	if(res.fits_all && pr__book_placement(c, w, pr, sets, pr->npod_sets, &res, &e) == 0) {
		sched_snapshot_commit(w->snap);
		snprintf(msg, sizeof(msg), "capacity for all %lld pods is available and booked for %llds",
			 (long long)res.requested, (long long)(c->cfg.booking_ttl_ns / PRD_NS_PER_SEC));
		pr__set_cond(c, pr, conds, PR_COND_PROVISIONED, "True", PR_R_FOUND, msg);
		pr__wake_at(c, c->now + c->cfg.booking_ttl_ns);
	} else {
		sched_snapshot_revert(w->snap);
		if(res.fits_all)
			snprintf(msg, sizeof(msg), "capacity fits but could not be booked: %s", e.msg);
		else
			snprintf(msg, sizeof(msg), "only %lld of %lld pods fit on the existing nodes",
				 (long long)res.placed, (long long)res.requested);
		pr__not_provisioned(c, pr, pp, conds, res.fits_all ? PR_R_BOOK_FAILED : PR_R_NOT_FOUND, msg);
	}
	sched_place_result_free(&res);
}

/* The check-capacity class (check-capacity.autoscaling.x-k8s.io): place
 * every pod of the request on the existing nodes, counting capacity booked
 * by earlier requests and nodes reserved for scale-ups in flight; book it
 * when all fit. */
#include "classes/class.h"

#include <stdio.h>
#include <string.h>

void pr_class_caveats(const sched_podset *sets, size_t n, char *msg, size_t len)
{
	size_t i, k, at = strlen(msg);
	for(i = 0; i < n; i++) {
		const char *c = sets[i].pod ? sets[i].pod->caveat : NULL;
		bool seen = false;
		for(k = 0; c && k < i; k++)
			seen |= sets[k].pod && sets[k].pod->caveat && !strcmp(sets[k].pod->caveat, c);
		if(!c || seen || at >= len)
			continue;
		at += (size_t)snprintf(msg + at, len - at, "%s%s", strstr(msg, "; not checked: ") ? "; " : "; not checked: ", c);
	}
}

static void check_decide(const pr_class_module *m, const pr_class_host *h, const pr_class_req *req)
{
	sched_place_result res;
	sched_snapshot *snap;
	prd_err e;
	char msg[700];
	(void)m;
	if(req->terminal || !req->sets || !(snap = h->snapshot(h->ctx)))
		return;
	memset(&res, 0, sizeof(res));
	if(sched_snapshot_fork(snap) || sched_place(snap, req->sets, req->nsets, &res, &e)) {
		sched_snapshot_revert(snap);
		snprintf(msg, sizeof(msg), "cannot simulate the pods: %s", e.msg);
		h->not_provisioned(h->ctx, PR_R_CHECK_FAILED, msg);
		sched_place_result_free(&res);
		return;
	}
	if(res.fits_all && h->book(h->ctx, req->sets, req->nsets, &res, &e) == 0) {
		sched_snapshot_commit(snap);
		snprintf(msg, sizeof(msg), "capacity for all %lld pods is available and booked for %llds",
			 (long long)res.requested, (long long)(h->limits->booking_ttl_ns / PRD_NS_PER_SEC));
		pr_class_caveats(req->sets, req->nsets, msg, sizeof(msg));
		h->provisioned(h->ctx, PR_R_FOUND, msg);
	} else {
		sched_snapshot_revert(snap);
		if(res.fits_all)
			snprintf(msg, sizeof(msg), "capacity fits but could not be booked: %s", e.msg);
		else
			snprintf(msg, sizeof(msg), "only %lld of %lld pods fit on the existing nodes",
				 (long long)res.placed, (long long)res.requested);
		h->not_provisioned(h->ctx, res.fits_all ? PR_R_BOOK_FAILED : PR_R_NOT_FOUND, msg);
	}
	sched_place_result_free(&res);
}

static const char *const check_aliases[] = { "check-capacity.kubernetes.io", NULL };

const pr_class_module pr_class_check_capacity = {
	.name = PR_CLASS_CHECK,
	.aliases = check_aliases,
	.short_name = "check-capacity",
	.existing_nodes_only = true,
	.placed_for_others = true,
	.decide = check_decide,
};

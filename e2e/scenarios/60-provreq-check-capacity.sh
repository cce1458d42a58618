#!/usr/bin/env bash
# check-capacity against a real apiserver: a request whose pods fit the
# existing nodes is Provisioned=True/CapacityIsFound at once; one that does
# not fit is Provisioned=False/CapacityIsNotFound, and turns True on a
# retry after kwok nodes are added. provreqd runs without a cloud driver
# (check-capacity only), as docs/design.md §10 allows.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr60
grp=$(t_unique cc60)
PR_GROUPS+=("$grp")

# Two 4-CPU nodes: room for 4 pods of 1.5 CPU (2 per node), not 5.
pr_add_nodes "$grp" 2 4 8Gi
t_wait 60 "2 nodes of $grp are Ready" pr_ready_is "$grp" 2
pr_template small 1500m 1Gi "$grp"
pr_start --request-backoff-initial 2s --request-backoff-max 4s

# --- fits
pr_request fits check-capacity small 4
t_wait 30 "fits: Accepted=True" pr_cond_is fits Accepted True/Accepted
t_wait 30 "fits: Provisioned=True/CapacityIsFound" pr_cond_is fits Provisioned True/CapacityIsFound
t_contains "the message says it is booked" "capacity for all 4 pods is available and booked" "$(pr_msg fits Provisioned)"
t_eq "fits: not Failed" "" "$(pr_cond fits Failed)"
t_eq "observedGeneration is set" 1 \
	"$(kubectl get provreq -n "$PR_NS" fits -o 'jsonpath={.status.conditions[?(@.type=="Provisioned")].observedGeneration}')"

# --- does not fit: the booking of "fits" holds all 4 slots, so even one
# more pod does not fit; 3 more cannot fit either way.
pr_request nofit check-capacity small 3
t_wait 30 "nofit: Provisioned=False/CapacityIsNotFound" pr_cond_is nofit Provisioned False/CapacityIsNotFound
t_contains "the message counts what fits" "only 0 of 3 pods fit on the existing nodes" "$(pr_msg nofit Provisioned)"
t_eq "nofit: not Failed (it will retry)" "" "$(pr_cond nofit Failed)"
ltt=$(kubectl get provreq -n "$PR_NS" nofit -o 'jsonpath={.status.conditions[?(@.type=="Provisioned")].lastTransitionTime}')
# A few retries (backoff 2s..4s) leave it False without moving lastTransitionTime.
pr_stays 6 "nofit stays CapacityIsNotFound while nothing changes" pr_cond_is nofit Provisioned False/CapacityIsNotFound
t_eq "lastTransitionTime does not move on retries" "$ltt" \
	"$(kubectl get provreq -n "$PR_NS" nofit -o 'jsonpath={.status.conditions[?(@.type=="Provisioned")].lastTransitionTime}')"

# --- capacity arrives: 2 more nodes hold the 3 pods (2 + 1)
pr_add_nodes "$grp" 2 4 8Gi
t_wait 60 "4 nodes of $grp are Ready" pr_ready_is "$grp" 4
t_wait 30 "nofit: Provisioned=True/CapacityIsFound on retry" pr_cond_is nofit Provisioned True/CapacityIsFound
t_eq "fits is still provisioned" True/CapacityIsFound "$(pr_cond fits Provisioned)"
t_contains "an Event records the transition" "CapacityIsFound" \
	"$(kubectl get events -n "$PR_NS" --field-selector involvedObject.name=nofit -o 'jsonpath={.items[*].reason}')"
t_done

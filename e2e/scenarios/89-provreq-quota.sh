#!/usr/bin/env bash
# Quota before capacity against the real apiserver (which keeps the
# ResourceQuota's status.hard and status.used):
#  - a request whose pods the namespace's ResourceQuota would not admit gets
#    Provisioned=False/QuotaExceeded, the message naming the quota, the key,
#    what is asked and what is free, and nothing is booked (no booking in
#    its status);
#  - a request within the quota is Provisioned, and then counts against the
#    namespace's next request until its pods are scheduled;
#  - with --quota-check=false the same request is Provisioned.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr89
grp=$(t_unique q89)
PR_GROUPS+=("$grp")
pr_add_nodes "$grp" 1 8 16Gi
t_wait 60 "the node is Ready" pr_ready_is "$grp" 1
pr_template two 2 1Gi "$grp"
kubectl apply -n "$PR_NS" -f - >/dev/null <<QUOTA
apiVersion: v1
kind: ResourceQuota
metadata:
  name: team-quota
spec:
  hard: {requests.cpu: "5", pods: "10"}
QUOTA
hard_set() { [[ -n "$(kubectl get resourcequota -n "$PR_NS" team-quota -o 'jsonpath={.status.hard.requests\.cpu}')" ]]; }
t_wait 30 "the quota controller filled in the quota's status" hard_set
pr_start --request-backoff-initial 2s --request-backoff-max 4s

pr_request big check-capacity two 3
t_wait 30 "big: Provisioned=False/QuotaExceeded" pr_cond_is big Provisioned False/QuotaExceeded
t_eq "big: the message says why" \
	"ResourceQuota team-quota: requests.cpu: the pods ask for 6, 5 is free (hard 5, used 0)" "$(pr_msg big Provisioned)"
t_eq "big: nothing is booked" "" \
	"$(kubectl get provreq -n "$PR_NS" big -o 'jsonpath={.status.provisioningClassDetails.provreqd\.io/booking}')"

pr_request fits check-capacity two 2
t_wait 30 "fits: Provisioned=True/CapacityIsFound" pr_cond_is fits Provisioned True/CapacityIsFound
pr_request next check-capacity two 1 noRetry=true
t_wait 30 "next: Failed=True/QuotaExceeded (fits holds 4 of 5)" pr_cond_is next Failed True/QuotaExceeded
t_contains "next: the message counts what fits holds" "4 held by other requests" "$(pr_msg next Failed)"
t_eq "big is still refused" False/QuotaExceeded "$(pr_cond big Provisioned)"

# The switch: the same ask, quotas not looked at.
pr_stop
kubectl delete provreq -n "$PR_NS" fits next >/dev/null
pr_start --quota-check=false --request-backoff-initial 2s --request-backoff-max 4s
t_wait 40 "with --quota-check=false, big: Provisioned=True/CapacityIsFound" pr_cond_is big Provisioned True/CapacityIsFound
t_done

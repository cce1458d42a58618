#!/usr/bin/env bash
# Nothing lost on deletion or failover, against the real apiserver:
#  A. Request a books all the capacity of a group; a competing request is
#     refused; a is deleted (as Kueue does when it evicts or retries) and b,
#     for the same pods, is created: b is Provisioned at once (the deleted
#     request's booking is released in the pass that sees it gone; it used
#     to hold until its 10-minute expiry). bench= seconds.
#  B. Two replicas with leader election, each with its own empty state DB
#     (the Deployment's emptyDir). The leader books all capacity for a2, a
#     scale-up of 3 nodes on the asynchronous cloud is in flight for s2, and
#     the leader is killed with SIGKILL. The standby takes the Lease
#     (bench= failover seconds), still refuses a competing request while
#     a2's booking holds, and finishes s2's scale-up once: the group holds
#     exactly 3 nodes. Fails for a new leader that forgets bookings, or
#     that scales up a second time or rolls back a plan the cloud is
#     completing. A request r2 that did not fit waits out its 30 s retry
#     backoff: room for it appears right after the failover, and the new
#     leader still does not retry it before the next-attempt time the old
#     leader recorded (a leader that forgot the backoff would provision it
#     at once), then provisions it.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr72
lease=$(t_unique lease72)
ga=$(t_unique fa72)
gb=$(t_unique fb72)
gs=$(t_unique fs72)
gr=$(t_unique fr72)
pr_on_exit "kubectl -n kube-system delete lease $lease --wait=false >/dev/null 2>&1"
pr_group "$gs" 4 8Gi 10
pr_watch_nodes "$gs"
pr_add_nodes "$ga" 2 4 8Gi
pr_add_nodes "$gb" 2 4 8Gi
pr_add_nodes "$gr" 1 4 8Gi
t_wait 30 "the fixed nodes are Ready" bash -c "[[ \$(kubectl get nodes -l $PR_GROUP_LABEL=$ga -o jsonpath='{.items[*].status.conditions[?(@.type==\"Ready\")].status}') == 'True True' ]]"
{
	printf 'templateDir: %s\n' "$PR_WORK/templates"
	printf 'async:\n  stateFile: %s\n  groups: [%s]\n  createDelayMs: 2000\n  registerDelayMs: 6000\n' \
		"$PR_WORK/cloud-state.json" "$gs"
} >"$PR_WORK/cloud.yaml"

# --------------------------------------------------- A: delete, recreate
pr_start
pr_template wa 3 1Gi "$ga"
pr_request a check-capacity wa 2
t_wait 20 "A: a books the group's two nodes" pr_cond_is a Provisioned True/CapacityIsFound
pr_request c check-capacity wa 1
t_wait 20 "A: a competing request is refused" pr_cond_is c Provisioned False/CapacityIsNotFound
kubectl delete provreq -n "$PR_NS" a --wait=true >/dev/null
t0=$(date +%s%N)
pr_request b check-capacity wa 2
t_wait 20 "A: b, for the same pods, is Provisioned" pr_cond_is b Provisioned True/CapacityIsFound
t1=$(date +%s%N)
echo "bench=delete_recreate_provisioned_s value=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')"
pr_stop

# --------------------------------------------------- B: failover
leads() { pr_replica_leads "$1"; }
replica() { pr_replica "$1" "$lease" --provision-timeout 2m --request-backoff-initial 30s --request-backoff-max 30s; }
replica one
t_wait 20 "B: replica one leads" leads one
replica two
t_wait 20 "B: replica two is up (standing by)" pr_replica_stands_by two
pr_template wb 3 1Gi "$gb"
pr_request a2 check-capacity wb 2
t_wait 20 "B: a2 books the group's two nodes" pr_cond_is a2 Provisioned True/CapacityIsFound
pr_template ws 3 1Gi "$gs"
pr_request s2 atomic-scale-up ws 3
t_wait 20 "B: s2's scale-up is in flight" pr_cond_is s2 Provisioned False/ScaleUpInProgress
t_eq "B: no node of s2 registered yet" 0 "$(pr_count "$gs")"
pr_template wr 3 1Gi "$gr"
pr_request r2 check-capacity wr 2
t_wait 20 "B: r2 does not fit (one node for two pods)" pr_cond_is r2 Provisioned False/CapacityIsNotFound
t_wait 10 "B: r2's next attempt is recorded" bash -c "kubectl get provreq -n $PR_NS r2 -o json |
	jq -e '.status.provisioningClassDetails[\"provreqd.io/next-attempt\"]' >/dev/null"
next_at=$(kubectl get provreq -n "$PR_NS" r2 -o json | jq -r '.status.provisioningClassDetails["provreqd.io/next-attempt"]')
# An RFC 3339 time (with microseconds); date reads it.
next_ns=$(date -d "$next_at" +%s%N) || t_fail "B: r2's next attempt '$next_at' is not an RFC 3339 time"
kill -9 "${PR_REPLICA_PID[one]}"
t0=$(date +%s%N)
t_pass "B: the leader was killed with SIGKILL"
t_wait 30 "B: replica two takes the Lease" leads two
t1=$(date +%s%N)
echo "bench=failover_s value=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')"
waited=$(curl -sS --max-time 2 "http://${PR_REPLICA_HTTP[two]}/metrics" | awk '$1 == "provreqd_leader_acquire_wait_seconds" { print $2 }')
awk -v w="$waited" 'BEGIN { exit !(w > 1 && w < 120) }' ||
	t_fail "B: provreqd_leader_acquire_wait_seconds should say how long replica two waited; got '$waited'"
t_pass "B: provreqd_leader_acquire_wait_seconds says replica two waited ${waited}s"
pr_request c2 check-capacity wb 1
t_wait 20 "B: the new leader refuses a competing request while a2's booking holds" \
	pr_cond_is c2 Provisioned False/CapacityIsNotFound
# Room for r2 now; the new leader must still wait for r2's next attempt.
pr_add_nodes "$gr" 1 4 8Gi
hold=$(((next_ns - $(date +%s%N)) / 1000000000 - 2))
((hold > 3)) || t_fail "B: r2's next attempt ($next_ns) is too close to test the backoff (${hold}s)"
pr_stays "$hold" "B: the new leader does not retry r2 before its next attempt" \
	bash -c "[[ \$(kubectl get provreq -n $PR_NS r2 -o jsonpath='{.status.conditions[?(@.type==\"Provisioned\")].status}') != True ]]"
t_wait 30 "B: r2 is Provisioned at its next attempt" pr_cond_is r2 Provisioned True/CapacityIsFound
t_wait 90 "B: s2 is Provisioned by the new leader" pr_cond_is s2 Provisioned True/CapacityIsProvisioned
t_eq "B: the group holds exactly s2's 3 nodes" 3 "$(pr_count "$gs")"
t_eq "B: no node was ever created beyond the 3" 3 "$(pr_added "$gs")"
t_eq "B: a2 is still Provisioned" True/CapacityIsFound "$(pr_cond a2 Provisioned)"
kill "${PR_REPLICA_PID[two]}" 2>/dev/null || true
t_done

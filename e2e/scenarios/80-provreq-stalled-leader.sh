#!/usr/bin/env bash
# A leader stalled longer than its lease must not scale a group a second
# time. Two replicas share a Lease (4 s / 3 s / 1 s). Every increase of
# the group sleeps 8 s inside the kwok driver (a slow cloud call). Replica
# one records the plan for a 3-node request, says ScaleUpInProgress and is
# then stopped (SIGSTOP) inside that call for 25 s: replica two takes the
# Lease, adopts the plan from the request's status and makes the 3 nodes.
# Replica one is then continued: its call resumes where it stopped.
#
# Judged from the apiserver only: the group holds exactly 3 Nodes after
# replica one has had time to act, none of them created after replica one
# resumed, and the request is Provisioned. Prints
# `bench=stalled_leader_extra_nodes value=N` (N = Nodes beyond 3).
# Broken controllers caught: an unfenced leader (it goes on once resumed),
# an unconditional increase (the stale call adds on top: the 6 nodes for a
# 3-node request this scenario was written after), a plan that counts
# anything new in the group as its own (replica two would close it as
# "never took the increase" and scale again).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr80
lease=$(t_unique lease80)
g=$(t_unique st80)
pr_on_exit "kubectl -n kube-system delete lease $lease --wait=false >/dev/null 2>&1"
pr_group "$g" 4 8Gi 10
pr_watch_nodes "$g"
pr_cloud_config "- {operation: increase, group: $g, delayMs: 8000}
- {operation: atomic-increase, group: $g, delayMs: 8000}"

leads() { pr_replica_leads "$1"; }
pr_replica one "$lease" --provision-timeout 3m
t_wait 20 "replica one leads" leads one
pr_replica two "$lease" --provision-timeout 3m
t_wait 20 "replica two is up (standing by)" pr_replica_stands_by two

pr_template w 3 1Gi "$g"
pr_request job atomic-scale-up w 3
t_wait 20 "job: ScaleUpInProgress (replica one is inside its 8 s increase)" pr_cond_is job Provisioned False/ScaleUpInProgress
kill -STOP "${PR_REPLICA_PID[one]}"
t_log "replica one stopped inside its increase"
stopped_at=$(date +%s)
t_wait 20 "replica two takes the Lease" leads two
t_wait 60 "job: Provisioned by replica two" pr_cond_is job Provisioned True/CapacityIsProvisioned
while (($(date +%s) - stopped_at < 25)); do sleep 1; done
resumed=$(date -u +%Y-%m-%dT%H:%M:%SZ)
kill -CONT "${PR_REPLICA_PID[one]}"
t_log "replica one continued after $(($(date +%s) - stopped_at)) s"
# Its call had 8 s of sleep left at most; give it that and a few passes.
sleep 15
n=$(pr_count "$g")
late=$(kubectl get nodes -l "$PR_GROUP_LABEL=$g" -o json |
	jq --arg t "$resumed" '[.items[] | select(.metadata.creationTimestamp >= $t)] | length')
echo "bench=stalled_leader_extra_nodes value=$((n > 3 ? n - 3 : 0))"
t_eq "the group holds exactly the request's 3 nodes" 3 "$n"
t_eq "no node was created after replica one resumed" 0 "$late"
t_eq "job is still Provisioned" True/CapacityIsProvisioned "$(pr_cond job Provisioned)"
t_eq "nodes ever created in the group" 3 "$(pr_added "$g")"
if grep -q 'target moved\|fenced\|may have been lost\|lease' "$PR_WORK/replica-one.log"; then
	t_pass "replica one says why it stopped: $(grep -m1 -o 'target moved[^"]*\|leadership may have been lost[^"]*\|stopped leading[^"]*' "$PR_WORK/replica-one.log" || true)"
else
	t_fail "replica one's log does not say it was fenced or met a moved target"
fi
t_done

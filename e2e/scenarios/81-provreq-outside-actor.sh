#!/usr/bin/env bash
# Someone else scales the group while provreqd's plan runs and rolls back.
# The group is asynchronous (kwok driver `async`): an increase only raises
# the target, instances appear later and their Nodes register only after
# 10 minutes, so a 3-node plan times out after a minute and rolls back. While
# it waits, and again while it rolls back, an "outside actor" (what
# cluster-autoscaler or a MachineHealthCheck replacement looks like to the
# group: Nodes with the group's label that no plan of provreqd made) adds
# Nodes to the group.
#
# Judged from the apiserver and a watch of the group's Nodes only: none of
# the outside actor's Nodes is ever deleted, the rollback ends (the
# request's plan reads rolled-back and its finalizer is gone) although the
# outside actor holds the group above where the plan began, and the
# request got an OtherActorScaling Warning. Prints
# `bench=rollback_deleted_foreign_instances value=N`.
# Broken controllers caught: a plan that owns "whatever was not there
# before" (its rollback deletes the outside actor's Nodes), a rollback that
# waits for the target to come back to where the plan began (never ends,
# the request's finalizer stays), a rollback of nothing (the plan's own
# instances stay in the cloud).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr81
g=$(t_unique ox81)
pr_group "$g" 4 8Gi 20
pr_watch_nodes "$g"
{
	printf 'templateDir: %s\n' "$PR_WORK/templates"
	printf 'async:\n  stateFile: %s\n  groups: [%s]\n  createDelayMs: 1000\n  registerDelayMs: 600000\n' \
		"$PR_WORK/cloud-state.json" "$g"
} >"$PR_WORK/cloud.yaml"
pr_start --provision-timeout 1m --request-backoff-initial 10m

pr_template w 3 1Gi "$g"
pr_request job atomic-scale-up w 3
t_wait 20 "job: ScaleUpInProgress" pr_cond_is job Provisioned False/ScaleUpInProgress
pr_add_nodes "$g" 2 4 8Gi
t_log "the outside actor added 2 Nodes while the plan waits"
t_wait 120 "job: the plan timed out and rolls back" pr_cond_is job Provisioned False/ScaleUpFailed
pr_add_nodes "$g" 1 4 8Gi
t_log "the outside actor added 1 more Node during the rollback"
phase() { kubectl get provreq -n "$PR_NS" job -o jsonpath='{.status.provisioningClassDetails.scaleUpPhase}'; }
# shellcheck disable=SC2317 # used through t_wait
rolled_back() { [[ "$(phase)" == rolled-back && -z "$(kubectl get provreq -n "$PR_NS" job -o jsonpath='{.metadata.finalizers}')" ]]; }
t_wait 60 "job: the rollback ended (plan rolled-back, finalizer released)" rolled_back
mapfile -t foreign < <(pr_created_names "$g")
deleted=0
for n in "${foreign[@]}"; do
	if pr_was_deleted "$g" "$n"; then deleted=$((deleted + 1)); fi
done
echo "bench=rollback_deleted_foreign_instances value=$deleted"
t_eq "Nodes in the group (the outside actor's 3)" 3 "$(pr_count "$g")"
t_eq "the outside actor's Nodes provreqd deleted" 0 "$deleted"
# The cloud's own record: instances it still holds for the plan (asked
# for, not deleted or cancelled).
left=$(jq --arg g "$g" '[.. | objects | select(.group? == $g and ((.deleteAt // 0) == 0))] | length' \
	"$PR_WORK/cloud-state.json")
t_eq "instances of the plan the cloud still holds" 0 "$left"
t_contains "the plan's own instances are gone: the rollback says so" "rolled back" "$(pr_msg job Provisioned)"
if kubectl get events -n "$PR_NS" --field-selector reason=OtherActorScaling -o name | grep -q .; then
	t_pass "an OtherActorScaling Event was recorded on the request"
else
	t_fail "no OtherActorScaling Event"
fi
t_done

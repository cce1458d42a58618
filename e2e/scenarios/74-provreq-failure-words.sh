#!/usr/bin/env bash
# What an operator reads when an atomic scale-up fails, for each kind of
# failure, against the kwok driver's asynchronous cloud (the partial
# creation and timeout kinds are in 73-provreq-clusterapi, where the
# driver has no atomic increase):
#   * refused: the increase call is refused (ZONE_RESOURCE_POOL_EXHAUSTED);
#     the condition quotes the cloud, nothing is created, the group is
#     backed off.
#   * stockout: the increase is taken but every instance fails for lack of
#     capacity (QUOTA_EXCEEDED, out of resources); the condition says
#     "quota exceeded" (the cloud's words tell a quota from a stockout)
#     with the code, and the rollback's deletes fail twice (cloud API down): a
#     Warning Event RollbackDeleteFailed says it is retried, and the
#     rollback ends with nothing left, said in the condition and in a
#     ScaleUpRolledBack Event.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr74
state="$PR_WORK/cloud-state.json"
gr=$(t_unique fr74) gs=$(t_unique fs74)
pr_group "$gr" 4 8Gi 10
pr_group "$gs" 4 8Gi 10
cat >"$PR_WORK/cloud.yaml" <<EOF
templateDir: $PR_WORK/templates
async:
  stateFile: $state
  createDelayMs: 500
  registerDelayMs: 1000
  deleteDelayMs: 500
faults:
- {operation: atomic-increase, group: $gr, fail: "ZONE_RESOURCE_POOL_EXHAUSTED: no kwok-e2e machines left in zone a", failCode: EIO}
- {operation: atomic-increase, group: $gs, succeed: 0, errorCode: QUOTA_EXCEEDED}
- {operation: delete, group: $gs, fail: "cloud API down", failCode: EAGAIN, times: 2}
EOF
# instances GROUP: what the cloud holds for GROUP (requested or with a Node).
instances() { { grep -o "\"group\":\"$1\"" "$state" 2>/dev/null || true; } | grep -c . || true; }
instances_is() { [[ "$(instances "$1")" == "$2" && "$(pr_count "$1")" == 0 ]]; }
events_of() {
	kubectl get events -n "$PR_NS" --field-selector "involvedObject.name=$1" \
		-o 'jsonpath={range .items[*]}{.type} {.reason}: {.message}{"\n"}{end}'
}

pr_start --provision-timeout 1m
pr_template w-r 3 1Gi "$gr"
pr_template w-s 3 1Gi "$gs"

# --- refused
pr_request refused atomic-scale-up w-r 2 noRetry=true
t_wait 30 "refused: Failed=True" pr_cond_is refused Failed True/ScaleUpFailed
msg=$(pr_msg refused Provisioned)
t_contains "refused: the condition quotes the cloud" \
	"the cloud refused the increase of $gr: " "$msg"
t_contains "refused: with its words" "ZONE_RESOURCE_POOL_EXHAUSTED: no kwok-e2e machines left in zone a" "$msg"
t_eq "refused: nothing was created" 0 "$(instances "$gr")"
t_contains "refused: a Warning Event says it" "Warning ScaleUpFailed: " "$(events_of refused)"

# --- stockout, with the rollback's deletes failing twice
pr_request stockout atomic-scale-up w-s 2 noRetry=true
t_wait 30 "stockout: Failed=True" pr_cond_is stockout Failed True/ScaleUpFailed
msg=$(pr_msg stockout Provisioned)
t_contains "stockout: the condition says the quota was exceeded" "quota exceeded in $gs: 2 of 2 instances failed (QUOTA_EXCEEDED" "$msg"
t_wait 30 "stockout: a Warning Event says the delete failed and is retried" \
	bash -c "kubectl get events -n $PR_NS --field-selector involvedObject.name=stockout -o jsonpath='{.items[*].message}' |
		grep -q 'the delete failed (.*cloud API down.*); retrying every'"
t_wait 60 "stockout: the cloud holds nothing of $gs" instances_is "$gs" 0
t_wait 30 "stockout: the condition says the rollback is over" \
	bash -c "kubectl get provreq -n $PR_NS stockout -o jsonpath='{.status.conditions[?(@.type==\"Provisioned\")].message}' |
		grep -q 'rolled back: the cloud shows none of the instances it added'"
ev=$(events_of stockout)
t_contains "stockout: RollbackDeleteFailed is a Warning" "Warning RollbackDeleteFailed: " "$ev"
t_contains "stockout: a Normal ScaleUpRolledBack Event" "Normal ScaleUpRolledBack: " "$ev"
t_log "events of stockout:"
t_log "$ev"
t_done

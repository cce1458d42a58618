#!/usr/bin/env bash
# The cloud provides only k of n nodes (kwok fault injection: the first
# atomic increase creates 2 of 3): every node that was created is deleted
# again, the request is Provisioned=False/ScaleUpFailed saying so, the node
# group is backed off (later attempts skip it while the back-off lasts), and
# a retry after the back-off succeeds with exactly the nodes needed.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr64
grp=$(t_unique pa64)
pr_group "$grp" 4 8Gi 10
pr_cloud_config "- {operation: atomic-increase, group: $grp, succeed: 2, times: 1}"

# Record every node of the group that ever exists, to prove each created
# one was deleted again.
pr_watch_nodes "$grp"

pr_start --request-backoff-initial 2s --request-backoff-max 2s --group-backoff-initial 20s
pr_template worker 3 1Gi "$grp"
pr_request job atomic-scale-up worker 3
t_wait 60 "Provisioned=False/ScaleUpFailed" pr_cond_is job Provisioned False/ScaleUpFailed
fail_msg=$(pr_msg job Provisioned)
t_contains "the message says it was rolled back" "rolled back" "$fail_msg"
t_contains "and why" "only 2 of 3 nodes could be created" "$fail_msg"
t_eq "not Failed: it will be retried" "" "$(pr_cond job Failed)"
t_wait 30 "no node of the group is left" pr_count_is "$grp" 0
t_eq "2 nodes had been created" 2 "$(pr_added "$grp")"
for node in $(pr_created_names "$grp"); do
	pr_was_deleted "$grp" "$node" || t_fail "$node was created and never deleted"
done
t_pass "both were deleted"

# The group is backed off: the next attempts (every 2s) do not touch it.
t_wait 20 "the retry skips the backed-off group" \
	bash -c "[[ \"\$(kubectl get provreq -n $PR_NS job -o 'jsonpath={.status.conditions[?(@.type==\"Provisioned\")].message}')\" == *'$grp: backed off'* ]]"
if command -v sqlite3 >/dev/null; then
	t_eq "the back-off is in the state store" 1 \
		"$(sqlite3 "$PR_WORK/state.db" "SELECT failures FROM group_backoff WHERE group_id = '$grp'")"
fi
t_eq "nothing was created while backed off" 2 "$(pr_added "$grp")"

# After the 20s back-off, the retry succeeds (the fault fired only once).
t_wait 60 "Provisioned=True/CapacityIsProvisioned after the back-off" \
	pr_cond_is job Provisioned True/CapacityIsProvisioned
t_eq "exactly 3 nodes" 3 "$(pr_count "$grp")"
t_eq "all Ready" 3 "$(pr_ready "$grp")"
t_eq "5 nodes were ever created (2 rolled back + 3)" 5 "$(pr_added "$grp")"
t_done

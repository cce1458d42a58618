#!/usr/bin/env bash
# Atomic scale-up that cannot fit: 3 pods that each need a whole node of a
# group whose max size is 2. Nothing is created, the request is
# Provisioned=False/CapacityIsNotFound with a message saying why (the max
# size), and the node group is never touched, also on retries. A pod larger
# than the group's node is refused with its own reason.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr63
grp=$(t_unique tb63)
pr_group "$grp" 4 8Gi 2
pr_cloud_config
pr_start --request-backoff-initial 2s --request-backoff-max 4s

pr_template worker 3 1Gi "$grp"
pr_request job atomic-scale-up worker 3
t_wait 30 "Provisioned=False/CapacityIsNotFound" pr_cond_is job Provisioned False/CapacityIsNotFound
msg=$(pr_msg job Provisioned)
t_contains "the message says no group can do it" "no node group can provide all 3 pods" "$msg"
t_contains "and why: the group's max size" "$grp: 2 of 3 pods fit within the group's max size" "$msg"
t_eq "not Failed: it will be retried" "" "$(pr_cond job Failed)"
t_eq "no node was created" 0 "$(pr_count "$grp")"
# Retries every 2-4s never start a partial scale-up.
pr_stays 8 "the group stays at 0 nodes across retries" pr_count_is "$grp" 0
t_eq "still CapacityIsNotFound" False/CapacityIsNotFound "$(pr_cond job Provisioned)"

# A pod bigger than the group's node (5 CPU on 4-CPU nodes).
pr_template huge 5 1Gi "$grp"
pr_request huge atomic-scale-up huge 1
t_wait 30 "huge: Provisioned=False/CapacityIsNotFound" pr_cond_is huge Provisioned False/CapacityIsNotFound
t_contains "huge: the pod does not fit the group's node" "$grp: 0 of 1 pods fit on its template node" \
	"$(pr_msg huge Provisioned)"
t_eq "still no node" 0 "$(pr_count "$grp")"
if command -v sqlite3 >/dev/null; then
	t_eq "no scale-up plan was ever recorded" 0 "$(sqlite3 "$PR_WORK/state.db" 'SELECT count(*) FROM scaleup_intent')"
fi
t_done

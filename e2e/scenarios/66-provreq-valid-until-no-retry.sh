#!/usr/bin/env bash
# Parameters that end a request: ValidUntilSeconds "30" on a request that
# cannot be satisfied keeps it retrying for 30 seconds from its creation and
# then Failed=True/Expired (upstream documents but never enforces this);
# noRetry "true" makes the first negative answer final: Failed=True at once.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr66
grp=$(t_unique vu66)
PR_GROUPS+=("$grp")
# One 2-CPU node; the pods need 3 CPU each: never satisfiable.
pr_add_nodes "$grp" 1 2 4Gi
t_wait 60 "the node is Ready" pr_ready_is "$grp" 1
pr_template big 3 1Gi "$grp"
pr_start --request-backoff-initial 2s --request-backoff-max 4s

pr_request window check-capacity big 2 ValidUntilSeconds=30
created=$(date +%s)
t_wait 30 "window: Provisioned=False/CapacityIsNotFound" pr_cond_is window Provisioned False/CapacityIsNotFound

pr_request final check-capacity big 1 noRetry=true
t_wait 30 "final: Failed=True at the first negative answer" pr_cond_is final Failed True/CapacityIsNotFound
t_eq "final: Provisioned=False/CapacityIsNotFound" False/CapacityIsNotFound "$(pr_cond final Provisioned)"
t_contains "final: the message says what did not fit" "only 0 of 1 pods fit" "$(pr_msg final Failed)"

# The window is still open: not failed yet (checked up to 20s after creation).
while (($(date +%s) - created < 20)); do
	[[ -z "$(pr_cond window Failed)" ]] || t_fail "window failed after $(($(date +%s) - created))s, before its 30s"
	sleep 1
done
t_pass "window is not failed 20s after creation"
t_wait 40 "window: Failed=True/Expired once 30s have passed" pr_cond_is window Failed True/Expired
took=$(($(date +%s) - created))
((took >= 29)) || t_fail "window failed after ${took}s, before ValidUntilSeconds=30"
t_pass "window failed ${took}s after creation"
t_eq "window: Provisioned=False/Expired" False/Expired "$(pr_cond window Provisioned)"
t_contains "the message names the parameter" "ValidUntilSeconds=30" "$(pr_msg window Failed)"
t_eq "final stays failed" True/CapacityIsNotFound "$(pr_cond final Failed)"
t_done

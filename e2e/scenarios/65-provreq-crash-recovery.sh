#!/usr/bin/env bash
# kill -9 of provreqd in the middle of an atomic scale-up, then a restart on
# the same state db:
#  A. killed while waiting for its nodes (the kwok controller is stopped, so
#     the 3 new Nodes cannot become Ready): the restarted provreqd resumes
#     the recorded plan and, once kwok makes the nodes Ready, reports
#     Provisioned=True with exactly those 3 nodes: no second scale-up.
#  B. killed inside the cloud call (kwok fault injection delays the atomic
#     increase by 8s; the kill lands after the plan is recorded as
#     "increasing"): the cloud never took the increase; the restarted
#     provreqd continues the same plan (none of the group's instances
#     carries its owner token, so it asks for all 3 under that token), and
#     the group ends with exactly the 3 nodes the pods need: nothing
#     outlives the interrupted call, nothing is doubled.
#  C. killed after the cloud created the nodes while provreqd was still in
#     the pass that made the call (kwok fault injection delays the instance
#     listing by 6s), on a noRetry request: the restarted provreqd sees the
#     cloud took the increase and resumes the plan; the request is
#     Provisioned with exactly those 3 nodes. Fails for a controller that
#     treats its own crash as a cloud failure (rolls back, fails a noRetry
#     request, backs the group off) or that scales up a second time.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

cluster="$E2E_DIR/cluster.sh"
pr_init pr65
ga=$(t_unique cra65)
gb=$(t_unique crb65)
gc=$(t_unique crc65)
pr_group "$ga" 4 8Gi 10
pr_group "$gb" 4 8Gi 10
pr_group "$gc" 4 8Gi 10
pr_watch_nodes "$ga"
pr_watch_nodes "$gb"
pr_watch_nodes "$gc"
flags=(--request-backoff-initial 2s --request-backoff-max 2s --group-backoff-initial 3s)

have_sqlite=0
command -v sqlite3 >/dev/null && have_sqlite=1
# intent_phase GROUP: phase of the group's newest scale-up plan.
intent_phase() {
	sqlite3 "$PR_WORK/state.db" \
		"SELECT phase FROM scaleup_intent WHERE node_group = '$1' ORDER BY created_ns DESC LIMIT 1" 2>/dev/null
}
intent_is() { [[ "$(intent_phase "$1")" == "$2" ]]; }

# ---------------------------------------------------------------- A: resume
"$cluster" stop kwok --dir "$PROVREQD_E2E_CLUSTER_DIR" >/dev/null 2>&1
pr_on_exit "\"$cluster\" start kwok --dir \"$PROVREQD_E2E_CLUSTER_DIR\" >/dev/null 2>&1"
t_pass "the kwok controller is stopped: new nodes stay NotReady"

pr_cloud_config
pr_start "${flags[@]}"
pr_template wa 3 1Gi "$ga"
pr_request a atomic-scale-up wa 3
t_wait 30 "a: ScaleUpInProgress" pr_cond_is a Provisioned False/ScaleUpInProgress
t_eq "a: 3 nodes were created" 3 "$(pr_count "$ga")"
t_eq "a: none is Ready" 0 "$(pr_ready "$ga")"
if ((have_sqlite)); then
	t_wait 10 "a: the plan is recorded as waiting-for-nodes" intent_is "$ga" waiting-for-nodes
	# (m1: the plan owns the instances carrying its token: the kwok driver
	# marks what it creates, ABI 1.3.)
	t_eq "a: the group's instances before the call are recorded with the plan, and how it owns its own" m1: "$(sqlite3 "$PR_WORK/state.db" \
		"SELECT substr(known_before, 1, 3) FROM scaleup_intent WHERE node_group = '$ga'")"
fi
pr_kill9
t_pass "provreqd killed with SIGKILL while waiting for the nodes"
pr_start "${flags[@]}"
"$cluster" start kwok --dir "$PROVREQD_E2E_CLUSTER_DIR" >/dev/null
t_pass "the kwok controller is running again"
t_wait 90 "a: Provisioned=True/CapacityIsProvisioned after the restart" \
	pr_cond_is a Provisioned True/CapacityIsProvisioned
t_eq "a: exactly the 3 nodes" 3 "$(pr_count "$ga")"
t_eq "a: all Ready" 3 "$(pr_ready "$ga")"
t_eq "a: no node was ever created beyond the 3" 3 "$(pr_added "$ga")"
((have_sqlite)) && t_eq "a: the plan is done" done "$(intent_phase "$ga")"
pr_stays 5 "a: no second scale-up" pr_count_is "$ga" 3

# ----------------------------------------------------- B: interrupted call
pr_stop
pr_cloud_config "- {operation: atomic-increase, group: $gb, delayMs: 8000}"
pr_start "${flags[@]}"
pr_template wb 3 1Gi "$gb"
pr_request b atomic-scale-up wb 3
if ((have_sqlite)); then
	t_wait 30 "b: the plan is recorded as increasing (the cloud call is under way)" intent_is "$gb" increasing
else
	t_wait 30 "b: Accepted" pr_cond_is b Accepted True/Accepted
	sleep 3 # inside the 8s delay of the cloud call
fi
pr_kill9
t_pass "provreqd killed with SIGKILL inside the cloud call"
t_eq "b: the interrupted call created nothing" 0 "$(pr_count "$gb")"
pr_cloud_config
pr_start "${flags[@]}"
# The same plan continues under its owner token: the restarted provreqd
# asks for the 3 instances none of which carries the token yet,
# conditional on the target it reads then.
t_wait 30 "b: the interrupted plan continues (ScaleUpResumed)" bash -c \
	"kubectl get events -n '$PR_NS' --field-selector involvedObject.name=b,reason=ScaleUpResumed -o name | grep -q ."
t_wait 90 "b: Provisioned=True/CapacityIsProvisioned" pr_cond_is b Provisioned True/CapacityIsProvisioned
if ((have_sqlite)); then
	t_eq "b: one plan, done (not closed and started over)" done \
		"$(sqlite3 "$PR_WORK/state.db" "SELECT group_concat(phase) FROM scaleup_intent WHERE node_group = '$gb'")"
fi
t_eq "b: exactly 3 nodes" 3 "$(pr_count "$gb")"
t_eq "b: all Ready" 3 "$(pr_ready "$gb")"
t_eq "b: 3 nodes were ever created" 3 "$(pr_added "$gb")"
t_eq "a: untouched by b" 3 "$(pr_count "$ga")"
pr_stays 5 "b: no second scale-up" pr_count_is "$gb" 3

# ------------------------------------- C: nodes created, names not recorded
pr_stop
pr_cloud_config "- {operation: instances, group: $gc, delayMs: 6000}"
pr_start "${flags[@]}"
pr_template wc 3 1Gi "$gc"
pr_request c atomic-scale-up wc 3 noRetry=true
t_wait 60 "c: the cloud created the 3 nodes" pr_count_is "$gc" 3
pr_kill9
t_pass "provreqd killed with SIGKILL between the increase and recording its nodes"
pr_cloud_config
pr_start "${flags[@]}"
t_wait 60 "c: Provisioned=True/CapacityIsProvisioned: the interrupted plan was resumed" \
	pr_cond_is c Provisioned True/CapacityIsProvisioned
t_eq "c: not Failed" "" "$(kubectl get provreq -n "$PR_NS" c -o 'jsonpath={.status.conditions[?(@.type=="Failed")].status}')"
t_eq "c: exactly 3 nodes" 3 "$(pr_count "$gc")"
t_eq "c: 3 nodes were ever created" 3 "$(pr_added "$gc")"
pr_stays 5 "c: no second scale-up" pr_count_is "$gc" 3
t_done

#!/usr/bin/env bash
# Nothing is deleted on the word of a status (issue 37): three Nodes of a
# kwok group exist before any plan; a request's status is patched, by
# someone allowed to write provisioningrequests/status, with a forged
# scale-up plan rolling back (ownership "h1:", knowing no instance; 3
# nodes requested from a starting size of 0; no seal). provreqd refuses
# the record: no Node is deleted (counted from the apiserver, Nodes before
# against after), the request gets a Warning Event ScaleUpPlanRefused
# saying why, provreqd_plan_records_refused_total counts it, and the
# request is then served from the Nodes that exist. The plan key's Secret
# is created in provreqd's namespace (here --lease-namespace, the
# scenario's own).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr93
grp=$(t_unique fs93)
pr_group "$grp" 4 8Gi 10
pr_cloud_config
pr_watch_nodes "$grp"

# Three Nodes that were there before any plan.
pr_add_nodes "$grp" 3 4 8Gi
t_wait 60 "3 Nodes of the group are Ready" pr_ready_is "$grp" 3
before=$(pr_nodes "$grp" | sort)

# The request, and its forged status, land before provreqd's first pass.
pr_template worker 3 1Gi "$grp"
pr_request job atomic-scale-up worker 3
uid=$(kubectl get provreq -n "$PR_NS" job -o 'jsonpath={.metadata.uid}')
deadline=$(date -u -d '+60 seconds' +%Y-%m-%dT%H:%M:%SZ)
kubectl patch provreq -n "$PR_NS" job --subresource=status --type=merge -p "$(
	cat <<-JSON
		{"status": {"provisioningClassDetails": {
		  "scaleUpPlan": "$uid/1", "nodeGroup": "$grp", "nodesRequested": "3",
		  "targetSizeBefore": "0", "nodesReadyDeadline": "$deadline",
		  "scaleUpPhase": "rolling-back", "provreqd.io/instances-before": "h1:"}}}
	JSON
)" >/dev/null
t_eq "the forged plan is in the status" rolling-back \
	"$(kubectl get provreq -n "$PR_NS" job -o 'jsonpath={.status.provisioningClassDetails.scaleUpPhase}')"

pr_start --lease-namespace "$PR_NS"

refusal() {
	kubectl get events -n "$PR_NS" --field-selector involvedObject.name=job,reason=ScaleUpPlanRefused,type=Warning \
		-o 'jsonpath={range .items[*]}{.message}{"\n"}{end}' 2>/dev/null
}
# shellcheck disable=SC2317 # used through t_wait
refused() { [[ -n "$(refusal)" ]]; }
t_wait 60 "a Warning Event ScaleUpPlanRefused on the request" refused
t_contains "it says why" "carries no seal" "$(refusal)"
t_log "event: $(refusal | head -n 1)"

# Passes go on (a pass every few seconds, several rollback steps' worth).
t_wait 60 "the request is served from the Nodes that exist" \
	bash -c "[[ \"\$(kubectl get provreq -n $PR_NS job -o 'jsonpath={.status.conditions[?(@.type==\"Provisioned\")].status}')\" == True ]]"
sleep 10

after=$(pr_nodes "$grp" | sort)
deleted=$(comm -23 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep -c . || true)
echo "bench=forged_status_deleted_instances value=$deleted"
t_eq "no Node that existed before is gone" 0 "$deleted"
t_eq "no Node of the group had a DELETED event" 0 "$(grep -c '^DELETED ' "$PR_WORK/watch-$grp" || true)"
t_eq "the plan was never adopted" "" \
	"$(grep -E 'adopted a scale-up plan|rollback: deleting' "$PR_WORK/provreqd.log" || true)"

metric=$(curl -fsS "http://$PR_HTTP/metrics" | awk '/^provreqd_plan_records_refused_total\{reason="missing"\}/ { print $2 }')
t_log "provreqd_plan_records_refused_total{reason=\"missing\"} $metric"
[[ -n "$metric" ]] && awk -v v="$metric" 'BEGIN { exit !(v >= 1) }' || t_fail "the refusal is not counted"
t_pass "the refusal is counted"
t_eq "the plan key's Secret was created in provreqd's namespace" 44 \
	"$(kubectl get secret -n "$PR_NS" provreqd-plan-key -o 'jsonpath={.data.key}' | tr -d '\n' | wc -c)"
t_done

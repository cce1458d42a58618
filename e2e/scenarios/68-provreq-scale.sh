#!/usr/bin/env bash
# Scale: 200 check-capacity requests created at once (noRetry, so each one
# ends Provisioned=True or Failed=True), with room for exactly 160 of them:
# the 160 oldest get it, the other 40 fail. Then one atomic scale-up
# request for 1,000 nodes from a group whose max size is 1,000: it ends
# Provisioned=True with exactly 1,000 Ready nodes.
#
# Prints the issue's figures as `bench=` lines: wall time from creating the
# requests to every one of them being final, provreqd's CPU seconds
# (utime+stime from /proc/PID/stat) spent in each phase, and its peak RSS
# (VmHWM). Figures are printed, never asserted (machines here are shared).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

NREQ=${PROVREQD_E2E_SCALE_REQUESTS:-200}
NNODES=${PROVREQD_E2E_SCALE_NODES:-1000}
FIT=$((NREQ * 4 / 5))         # requests that fit the hand-made nodes
PER_NODE=16                   # 1-CPU pods per 16-CPU node
SMALL_NODES=$(((FIT + PER_NODE - 1) / PER_NODE))
((SMALL_NODES * PER_NODE == FIT)) || t_fail "FIT ($FIT) must be a multiple of $PER_NODE"

pr_init pr68
small=$(t_unique sc68)
big=$(t_unique bg68)
PR_GROUPS+=("$small")
pr_group "$big" 2 4Gi "$NNODES"
pr_cloud_config

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", b - a }'; }

pr_add_nodes "$small" "$SMALL_NODES" "$PER_NODE" 64Gi
t_wait 120 "$SMALL_NODES nodes of $small are Ready" pr_ready_is "$small" "$SMALL_NODES"
pr_template one 1 1Gi "$small"
pr_template whole 1500m 1Gi "$big"
pr_start --request-backoff-initial 5s
pid=$PR_PID

# ------------------------------------------------- 200 check-capacity
{
	for ((i = 0; i < NREQ; i++)); do
		cat <<EOF
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: req-$(printf '%03d' "$i")
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef: {name: one}
    count: 1
  parameters: {noRetry: "true"}
EOF
	done
} >"$PR_WORK/requests.yaml"

# states: "True/" for Provisioned=True, "/True" for Failed=True, one per line
states() {
	kubectl get provreq -n "$PR_NS" -o \
		'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Provisioned")].status}/{.status.conditions[?(@.type=="Failed")].status}{"\n"}{end}'
}
all_final() {
	local s
	s=$(states | grep -E '^req-' || true)
	[[ "$(grep -cE ' (True/|[A-Za-z]*/True)$' <<<"$s")" == "$NREQ" ]]
}

cpu0=$(pr_cpu_seconds "$pid")
t0=$(now)
kubectl create -n "$PR_NS" -f "$PR_WORK/requests.yaml" >/dev/null
t_created=$(now)
t_wait 600 "all $NREQ check-capacity requests reach a final state" all_final
t1=$(now)
cpu1=$(pr_cpu_seconds "$pid")
s=$(states | grep -E '^req-' | sort)
t_eq "$FIT are Provisioned" "$FIT" "$(grep -c ' True/$' <<<"$s" || true)"
t_eq "$((NREQ - FIT)) Failed" "$((NREQ - FIT))" "$(grep -c ' False/True$' <<<"$s" || true)"
t_eq "the $FIT oldest are the provisioned ones" \
	"$(for ((i = 0; i < FIT; i++)); do printf 'req-%03d True/\n' "$i"; done)" "$(head -n "$FIT" <<<"$s")"
echo "bench=checkcapacity_requests $NREQ"
echo "bench=checkcapacity_create_s $(elapsed "$t0" "$t_created")"
echo "bench=checkcapacity_all_final_s $(elapsed "$t0" "$t1")"
echo "bench=checkcapacity_provreqd_cpu_s $(elapsed "$cpu0" "$cpu1")"
echo "bench=checkcapacity_provreqd_vmhwm_kb $(pr_hwm_kb "$pid")"

# ------------------------------------------------- 1,000-node atomic
cpu0=$(pr_cpu_seconds "$pid")
t0=$(now)
pr_request huge atomic-scale-up whole "$NNODES"
t_wait 900 "huge: Provisioned=True/CapacityIsProvisioned" pr_cond_is huge Provisioned True/CapacityIsProvisioned
t1=$(now)
cpu1=$(pr_cpu_seconds "$pid")
t_eq "the group has exactly $NNODES nodes" "$NNODES" "$(pr_count "$big")"
t_eq "all Ready" "$NNODES" "$(pr_ready "$big")"
echo "bench=atomic_nodes $NNODES"
echo "bench=atomic_provisioned_s $(elapsed "$t0" "$t1")"
echo "bench=atomic_provreqd_cpu_s $(elapsed "$cpu0" "$cpu1")"
echo "bench=provreqd_vmhwm_kb $(pr_hwm_kb "$pid")"
t_done

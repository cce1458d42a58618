#!/usr/bin/env bash
# A burst of atomic requests is served at once (issue 43). kwok Nodes here
# take about 10 s to become Ready (the e2e.provreqd.io/ready-delay
# annotation the kwok stage honours), so plans overlap as on a real cloud.
#
#  1. Twenty atomic requests of 4 pods (3 CPU, one per 4-CPU node) made at
#     once on one group with room: all Provisioned, no node beyond the 80
#     they need. Then one request for all 80 nodes on a twin group, same
#     run: the ratio of the two times is the figure (goal: at most 1.5).
#  2. The same burst on a group whose max holds only 12 of the 20: the 12
#     oldest are Provisioned, the other 8 say they wait for the group's
#     limit (WaitingForScaleUp while plans are in flight, then the max size
#     in their message), and no node is made beyond the max.
#  3. A burst where one request's creations fail part-way (a kwok fault on
#     the group's first increase after a restart, while the plans of an
#     earlier wave are in flight and their Nodes are not Ready yet): only
#     that request's Nodes are deleted; every other request is Provisioned.
#
# Every figure comes from the apiserver (Nodes, conditions, a watch on the
# Nodes with their owner label), never from provreqd's log. Printed as
# bench= lines, never asserted as times. PROVREQD_E2E_BURST_REQUESTS
# changes the burst size (default 20; the limit case keeps 12 of them
# when it is 20, three fifths otherwise).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

NREQ=${PROVREQD_E2E_BURST_REQUESTS:-20}
PODS=4                        # per request: one 3-CPU pod per 4-CPU node
FIT=$((NREQ * 3 / 5))         # requests the limited group's max holds (12 of 20)
WAVE=4                        # requests per wave of the failure case

pr_init pr95
burst=$(t_unique bu95)
single=$(t_unique bs95)
limited=$(t_unique bl95)
failing=$(t_unique bf95)
pr_group "$burst" 4 8Gi $((NREQ * PODS + 20))
pr_group "$single" 4 8Gi $((NREQ * PODS + 20))
pr_group "$limited" 4 8Gi $((FIT * PODS))
pr_group "$failing" 4 8Gi 100
# Nodes of these groups become Ready about 10 s after they are made.
for g in "$burst" "$single" "$limited" "$failing"; do
	sed -i 's|^  annotations:$|  annotations:\n    e2e.provreqd.io/ready-delay: "10s"|' "$PR_WORK/templates/$g.yaml"
done
pr_cloud_config
pr_start --request-backoff-initial 2s --request-backoff-max 4s --group-backoff-initial 2s --group-backoff-max 4s

# ------------------------------------------------- 1. a burst with room
pr_template wb 3 1Gi "$burst"
pr_template ws 3 1Gi "$single"
pr_burst b "$NREQ" wb "$PODS" 600
burst_s=$PR_BURST_S
t_eq "the group has exactly the $((NREQ * PODS)) nodes they need" "$((NREQ * PODS))" "$(pr_count "$burst")"
t_eq "all Ready" "$((NREQ * PODS))" "$(pr_ready "$burst")"

pr_request one atomic-scale-up ws $((NREQ * PODS))
t2=$(t_now)
t_wait 600 "the single request for $((NREQ * PODS)) nodes is Provisioned" pr_cond_is one Provisioned True/CapacityIsProvisioned
t3=$(t_now)
single_s=$(t_elapsed "$t2" "$t3")
echo "bench=burst_atomic_requests value=$NREQ"
echo "bench=burst_atomic_all_provisioned_s value=$burst_s"
echo "bench=burst_atomic_single_request_s value=$single_s"
echo "bench=burst_atomic_ratio value=$(awk -v a="$burst_s" -v b="$single_s" 'BEGIN { printf "%.2f\n", (b > 0 ? a / b : 0) }')"
echo "bench=burst_atomic_extra_nodes value=$(($(pr_count "$burst") - NREQ * PODS))"

# ------------------------------------------------- 2. limits hold the oldest
pr_template wl 3 1Gi "$limited"
pr_burst_yaml l "$NREQ" wl "$PODS" >"$PR_WORK/limited.yaml"
kubectl create -n "$PR_NS" -f "$PR_WORK/limited.yaml" >/dev/null
: >"$PR_WORK/waited"
# Note which requests say they wait, while the plans are in flight.
noted_waiting() {
	kubectl get provreq -n "$PR_NS" -o \
		'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Provisioned")].reason}{"\n"}{end}' |
		awk '$1 ~ /^l-/ && $2 == "WaitingForScaleUp" { print $1 }' >>"$PR_WORK/waited"
	pr_all_provisioned l "$FIT"
}
t_wait 600 "the $FIT oldest requests are Provisioned" noted_waiting
t_eq "the $FIT oldest are the Provisioned ones" \
	"$(for ((i = 0; i < FIT; i++)); do printf 'l-%02d True/CapacityIsProvisioned\n' "$i"; done)" \
	"$(pr_states l | head -n "$FIT")"
t_eq "no other is Provisioned" 0 "$(pr_states l | tail -n +$((FIT + 1)) | grep -c ' True/' || true)"
over=0
for ((i = FIT; i < NREQ; i++)); do
	name=$(printf 'l-%02d' "$i")
	msg=$(pr_msg "$name" Provisioned)
	if ! grep -qx "$name" "$PR_WORK/waited" && [[ "$msg" != *"max size"* ]]; then
		t_fail "$name neither waited for the scale-ups in flight nor names the group's limit: $msg"
	fi
done
t_pass "the other $((NREQ - FIT)) wait for the group's limit"
(($(sort -u "$PR_WORK/waited" | grep -c . || true) > 0)) || t_fail "none said WaitingForScaleUp while plans were in flight"
t_pass "requests said WaitingForScaleUp while plans were in flight"
count=$(pr_count "$limited")
((count > FIT * PODS)) && over=$((count - FIT * PODS))
echo "bench=burst_atomic_over_limit_nodes value=$over"
t_eq "no node beyond the group's max" 0 "$over"

# ------------------------------------------------- 3. one request fails part-way
pr_template wf 3 1Gi "$failing"
kubectl get nodes -l "$PR_GROUP_LABEL=$failing" --watch --output-watch-events --no-headers \
	-o 'custom-columns=E:.type,N:.object.metadata.name,O:.object.metadata.labels.provreqd\.io/owner' \
	>"$PR_WORK/watch-fail" 2>&1 &
watch_pid=$!
pr_on_exit "kill $watch_pid 2>/dev/null; wait $watch_pid 2>/dev/null"
# Wave 1: its plans are in flight (Nodes made, not Ready yet) ...
pr_burst_yaml f "$WAVE" wf "$PODS" >"$PR_WORK/wave1.yaml"
kubectl create -n "$PR_NS" -f "$PR_WORK/wave1.yaml" >/dev/null
t_wait 60 "wave 1's Nodes are made" pr_count_is "$failing" $((WAVE * PODS))
# ... when provreqd restarts with a fault on the group's next increase:
# it creates 2 of the 4 Nodes asked for, and fails.
pr_stop
pr_cloud_config "- {operation: atomic-increase, group: $failing, succeed: 2, times: 1}"
pr_start --request-backoff-initial 2s --request-backoff-max 4s --group-backoff-initial 2s --group-backoff-max 4s
pr_burst_yaml f "$WAVE" wf "$PODS" "$WAVE" >"$PR_WORK/wave2.yaml"
kubectl create -n "$PR_NS" -f "$PR_WORK/wave2.yaml" >/dev/null
# The first increase after the restart is the oldest new request's
# (wave 1's plans had all their Nodes): the fault hits it.
fname=$(printf 'f-%02d' "$WAVE")
fuid=$(kubectl get provreq -n "$PR_NS" "$fname" -o 'jsonpath={.metadata.uid}')
t_wait 120 "$fname's scale-up failed part-way (2 of 4 Nodes made, then deleted)" \
	bash -c "awk -v u='$fuid' '\$1 == \"DELETED\" && index(\$3, u) == 1 { n++ } END { exit n < 2 }' '$PR_WORK/watch-fail'"
t_wait 600 "every request of both waves is Provisioned (the failed one after its retry)" pr_all_provisioned f $((2 * WAVE))
# The Nodes deleted, by owner token: a token begins with its request's uid.
foreign=$(awk -v u="$fuid" '$1 == "DELETED" && index($3, u) != 1 { n++ } END { print n + 0 }' "$PR_WORK/watch-fail")
own=$(awk -v u="$fuid" '$1 == "DELETED" && index($3, u) == 1 { n++ } END { print n + 0 }' "$PR_WORK/watch-fail")
echo "bench=burst_atomic_failed_request_deleted value=$own"
echo "bench=burst_atomic_foreign_rollback_deleted value=$foreign"
t_eq "the failure deleted only the failing request's Nodes" 0 "$foreign"
t_eq "the group has exactly the Nodes of the $((2 * WAVE)) requests" $((2 * WAVE * PODS)) "$(pr_count "$failing")"
t_done

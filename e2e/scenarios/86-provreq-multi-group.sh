#!/usr/bin/env bash
# Atomic scale-up across two node groups, all-or-nothing, and the removal of
# nodes nobody used (issue 14), against the real apiserver and scheduler:
#  A. A request with a GPU podSet (example.com/gpu, only on group $gpu) and a
#     CPU launcher podSet (only on group $cpu): both groups grow by exactly
#     what is needed, Provisioned only once every node of both is Ready, and
#     the consumers land on the right groups. Fails for a controller that
#     can use one group only (CapacityIsNotFound) or says Provisioned early.
#  B. The same shape with the GPU group's increase failing (kwok fault):
#     both groups are back at their size, only the GPU group is backed off,
#     the request names it. Fails for a controller that rolls back only the
#     failing group or backs off every group.
#  C. A request provisioned and never consumed: after the booking TTL plus
#     the idle time its nodes are removed; a node running a non-DaemonSet
#     pod is kept. Fails for a controller that never scales down or removes
#     a node in use.
# Prints bench= lines: seconds to Provisioned for A, seconds from booking
# end to node removal for C.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr86
gpu=$(t_unique gpu86)
cpu=$(t_unique cpu86)
gpu2=$(t_unique gpb86)
cpu2=$(t_unique cpb86)
sd=$(t_unique sd86)
pr_group "$cpu" 4 8Gi 10
pr_group "$cpu2" 4 8Gi 10
pr_group "$sd" 4 8Gi 10
for g in "$gpu" "$gpu2"; do
	pr_group "$g" 8 32Gi 10
	# The GPU groups' nodes have 4 example.com/gpu each.
	sed -i 's/pods: "110"}/pods: "110", example.com\/gpu: "4"}/' "$PR_WORK/templates/$g.yaml"
done
pr_watch_nodes "$gpu"
pr_watch_nodes "$cpu"
pr_watch_nodes "$gpu2"
pr_watch_nodes "$cpu2"
pr_watch_nodes "$sd"
pr_cloud_config "- {operation: atomic-increase, group: $gpu2, succeed: 0, times: 100}"
pr_start --request-backoff-initial 2s --request-backoff-max 2s --group-backoff-initial 60s \
	--booking-ttl 40s --scale-down-idle 10s

gpu_template() {
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: v1
kind: PodTemplate
metadata:
  name: $1
template:
  spec:
    nodeSelector: {$PR_GROUP_LABEL: $2}
    containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources:
        requests: {cpu: "1", memory: 1Gi, example.com/gpu: "2"}
        limits: {example.com/gpu: "2"}
EOF
}
two_set_request() {
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: $1
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef: {name: $2}
    count: 8
  - podTemplateRef: {name: $3}
    count: 1
EOF
}

# ------------------------------------------------------------ A: two groups
gpu_template worker "$gpu"
pr_template launcher 3 1Gi "$cpu"
t0=$(date +%s.%N)
two_set_request train worker launcher
t_wait 90 "train: Provisioned=True/CapacityIsProvisioned" pr_cond_is train Provisioned True/CapacityIsProvisioned
t1=$(date +%s.%N)
events=$(kubectl get events -n "$PR_NS" --field-selector involvedObject.name=train -o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}')
t_contains "the scale-up Event names the GPU group" "$gpu by 4" "$events"
t_contains "... and the CPU group" "$cpu by 1" "$events"
t_contains "Provisioned names both" "$gpu by 4" "$(pr_msg train Provisioned)"
t_eq "$gpu grew by exactly 4" 4 "$(pr_count "$gpu")"
t_eq "$cpu grew by exactly 1" 1 "$(pr_count "$cpu")"
t_eq "all 5 Ready" 5 "$(( $(pr_ready "$gpu") + $(pr_ready "$cpu") ))"
details=$(kubectl get provreq -n "$PR_NS" train -o 'jsonpath={.status.provisioningClassDetails.nodeGroup}')
t_contains "the plan's groups are in the details" "$gpu" "$details"
t_contains "... both" "$cpu" "$details"
echo "bench=multi_group_time_to_provisioned_s value=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')"
# Consumers land on the right groups.
for i in 0 1 2 3 4 5 6 7; do
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: worker-$i
  annotations: {autoscaling.x-k8s.io/consume-provisioning-request: train}
spec:
  nodeSelector: {$PR_GROUP_LABEL: $gpu}
  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources: {requests: {cpu: "1", memory: 1Gi, example.com/gpu: "2"}, limits: {example.com/gpu: "2"}}
EOF
done
pr_consumer launcher-0 train best-effort-atomic-scale-up.autoscaling.x-k8s.io 3 1Gi "$cpu"
t_wait 60 "train: BookingExpired=True/CapacityBookingConsumed" \
	pr_cond_is train BookingExpired True/CapacityBookingConsumed
on_gpu=$(kubectl get pods -n "$PR_NS" -o 'jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' |
	awk -v g="$gpu" '$1 ~ /^worker-/ && index($2, g) == 1' | wc -l)
t_eq "the 8 workers run on $gpu nodes" 8 "$on_gpu"
t_contains "the launcher runs on a $cpu node" "$cpu" "$(kubectl get pod -n "$PR_NS" launcher-0 -o 'jsonpath={.spec.nodeName}')"

# ------------------------------------------------ B: one group of two fails
gpu_template worker2 "$gpu2"
pr_template launcher2 3 1Gi "$cpu2"
two_set_request fails worker2 launcher2
t_wait 60 "fails: Provisioned=False/ScaleUpFailed" pr_cond_is fails Provisioned False/ScaleUpFailed
t_contains "the message names the failing group" "increase of $gpu2" "$(pr_msg fails Provisioned)"
t_wait 30 "$cpu2 is back at 0" pr_count_is "$cpu2" 0
t_wait 30 "$gpu2 is back at 0" pr_count_is "$gpu2" 0
metric() { curl -fsS "http://$PR_HTTP/metrics" | awk -v m="provreqd_node_group_backoff{node_group=\"$1\"}" '$1 == m { print $2 }'; }
t_wait 20 "$gpu2 is backed off" bash -c "[[ \"\$(curl -fsS http://$PR_HTTP/metrics | grep -F 'provreqd_node_group_backoff{node_group=\"$gpu2\"}' | awk '{print \$2}')\" == 1 ]]"
t_eq "$cpu2 is not backed off" 0 "$(metric "$cpu2")"
for node in $(pr_created_names "$cpu2"); do
	pr_was_deleted "$cpu2" "$node" || t_fail "$node of $cpu2 was created and never deleted"
done
t_pass "every node the failed plan created was deleted"

# ------------------------------------------------- C: scale-down when idle
pr_template idle 3 1Gi "$sd"
pr_request unused atomic-scale-up idle 2
t_wait 90 "unused: Provisioned" pr_cond_is unused Provisioned True/CapacityIsProvisioned
t_eq "$sd has 2 nodes" 2 "$(pr_count "$sd")"
keep=$(pr_nodes "$sd" | sort | head -1)
# An ordinary pod (not a consumer, not a DaemonSet) on one of them.
kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: squatter}
spec:
  nodeName: $keep
  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
  containers: [{name: main, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1"}}}]
EOF
t_wait 60 "unused: BookingExpired=True/CapacityReservationTimeExpired" \
	pr_cond_is unused BookingExpired True/CapacityReservationTimeExpired
te=$(date +%s.%N)
t_wait 90 "the idle node of $sd is removed" pr_count_is "$sd" 1
tr=$(date +%s.%N)
echo "bench=scale_down_booking_end_to_removal_s value=$(awk -v a="$te" -v b="$tr" 'BEGIN { printf "%.1f", b - a }')"
t_eq "the node with a running pod is kept" "$keep" "$(pr_nodes "$sd")"
pr_stays 15 "... and stays" pr_count_is "$sd" 1
t_done

#!/usr/bin/env bash
# Dynamic Resource Allocation (resource.k8s.io/v1) against the real
# apiserver: a kwok node group whose nodes publish a ResourceSlice of 8
# devices (the kwok driver's resourceSlices), a DeviceClass selecting them
# by driver, and pods claiming 4 devices each through a
# ResourceClaimTemplate. With N = 2 nodes: check-capacity for 2N + 1 pods
# does not fit (and says how many do), 2N pods fit, a later request does not
# get the devices the Provisioned one booked, and an atomic request for K = 3
# pods grows the group by exactly ceil(K / 2) = 2 nodes, whose slices the
# driver creates. A template whose selector uses CEL outside provreqd's
# subset gets a condition saying provreqd cannot tell, never a yes.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

kubectl get --raw /apis/resource.k8s.io/v1 >/dev/null 2>&1 ||
	t_fail "the apiserver does not serve resource.k8s.io/v1 (DRA is GA since 1.34)"
t_pass "the apiserver serves resource.k8s.io/v1"

pr_init pr78
grp=$(t_unique dra78)
driver="$grp.example.com"
class="$grp-gpu"
PR_GROUPS+=("$grp")
# 32 CPUs a node: devices, not CPUs, limit what fits. Two nodes at start.
cat >"$PR_WORK/templates/$grp.yaml" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $grp
  annotations:
    provreqd.io/min-size: "0"
    provreqd.io/max-size: "10"
    provreqd.io/initial-size: "2"
  labels:
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node.kubernetes.io/instance-type: kwok-e2e-gpu8
    type: kwok
status:
  capacity: {cpu: "32", memory: 128Gi, pods: "110"}
EOF
{
	printf 'templateDir: %s\ncreateInitialNodes: true\nresourceSlices:\n  %s:\n  - driver: %s\n    devices:\n' \
		"$PR_WORK/templates" "$grp" "$driver"
	for i in 0 1 2 3 4 5 6 7; do
		printf '    - {name: gpu-%d, attributes: {model: {string: gpu8}, index: {int: %d}}, capacity: {memory: {value: 40Gi}}}\n' "$i" "$i"
	done
} >"$PR_WORK/cloud.yaml"
pr_on_exit "kubectl delete deviceclass $class --ignore-not-found >/dev/null 2>&1"
pr_on_exit "kubectl delete resourceslices -l $PR_GROUP_LABEL=$grp --ignore-not-found >/dev/null 2>&1"

kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: $class
spec:
  selectors:
  - cel:
      expression: device.driver == "$driver"
EOF
claim_template() { # NAME COUNT [EXTRA SELECTOR]
	local sel=""
	if [[ -n "${3:-}" ]]; then
		sel=$'\n'"          selectors: [{cel: {expression: '$3'}}]"
	fi
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: $1
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly:
          deviceClassName: $class
          allocationMode: ExactCount
          count: $2$sel
EOF
}
gpu_template() { # NAME CLAIM-TEMPLATE
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: v1
kind: PodTemplate
metadata:
  name: $1
template:
  spec:
    nodeSelector:
      $PR_GROUP_LABEL: $grp
    resourceClaims:
    - {name: gpus, resourceClaimTemplateName: $2}
    containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources:
        requests: {cpu: "1", memory: 1Gi}
        claims: [{name: gpus}]
EOF
}
claim_template four-gpus 4
claim_template fancy 1 'device.attributes["example.com"].model.startsWith("gpu")'
gpu_template trainer four-gpus
gpu_template fancy-trainer fancy

pr_start --request-backoff-initial 2s
t_wait 60 "the 2 initial nodes are Ready" pr_ready_is "$grp" 2
slices() { kubectl get resourceslices -l "$PR_GROUP_LABEL=$grp" -o name | grep -c . || true; }
t_eq "each node published its ResourceSlice" 2 "$(slices)"
t_eq "8 devices in a node's slice" 8 "$(kubectl get resourceslices -l "$PR_GROUP_LABEL=$grp" \
	-o 'jsonpath={.items[0].spec.devices[*].name}' | wc -w)"

# 2N + 1 = 5 pods of 4 devices on 2 nodes of 8: only 4 fit.
pr_request too-many check-capacity trainer 5 noRetry=true
t_wait 60 "2N+1 pods: Provisioned=False/CapacityIsNotFound" pr_cond_is too-many Provisioned False/CapacityIsNotFound
t_contains "it says how many fit" "only 4 of 5 pods fit" "$(pr_msg too-many Provisioned)"

# 2N = 4 pods fit exactly.
pr_request fits check-capacity trainer 4
t_wait 60 "2N pods: Provisioned=True/CapacityIsFound" pr_cond_is fits Provisioned True/CapacityIsFound

# The booked devices are not given to the next request.
pr_request after check-capacity trainer 1 noRetry=true
t_wait 60 "a later request does not get the booked devices" pr_cond_is after Provisioned False/CapacityIsNotFound
t_contains "none of its pods fit" "only 0 of 1 pods fit" "$(pr_msg after Provisioned)"

# Atomic: K = 3 pods need ceil(3/2) = 2 new nodes (every existing device
# is booked).
pr_request grow atomic-scale-up trainer 3
t_wait 120 "atomic: Provisioned=True/CapacityIsProvisioned" pr_cond_is grow Provisioned True/CapacityIsProvisioned
t_eq "the group grew by exactly ceil(K/2) = 2 nodes" 4 "$(pr_count "$grp")"
t_contains "the message names the group" "2 new nodes in $grp are ready" "$(pr_msg grow Provisioned)"
t_eq "the new nodes published their slices" 4 "$(slices)"
pr_stays 6 "no further scale-up while the booking holds" pr_count_is "$grp" 4

# CEL outside the subset: a clear condition, never a yes.
pr_request fancy check-capacity fancy-trainer 1
t_wait 60 "unsupported selector: Failed=True" pr_cond_is fancy Failed True/FailedToCreatePods
t_contains "the condition names the construct" "unsupported CEL construct" "$(pr_msg fancy Failed)"
t_contains "and says provreqd cannot tell" "provreqd cannot tell whether devices match" "$(pr_msg fancy Failed)"
t_done

#!/usr/bin/env bash
# The clusterapi driver against the real apiserver with minimal Cluster API
# CRDs (e2e/crds/cluster-api-minimal.yaml: the scale subresource on
# MachineDeployments/MachineSets/MachinePools, status on Machines):
# replicas move through the scale subresource as asked (to zero and back),
# deleting a node marks its Machine with cluster.x-k8s.io/delete-machine and
# lowers replicas, the scale-from-zero template matches the capacity
# annotations, and a failed Machine is an errored instance. No Cluster API
# controllers run here, so Machines are made by the test.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

tool="$PROVREQD_BUILDDIR/e2e/tools/driver-e2e"
so="$PROVREQD_BUILDDIR/cloud/clusterapi/.libs/clusterapi.so"
crds="$PROVREQD_SRCDIR/e2e/crds/cluster-api-minimal.yaml"
[[ -x "$tool" && -f "$so" ]] || t_fail "build first: $tool and $so are missing (make all)"

ns=$(t_unique e2e-capi)
work=$(mktemp -d "${TMPDIR:-/tmp}/provreqd-e2e-capi.XXXXXX")
cleanup() {
	kubectl delete node node-2 --ignore-not-found --wait=false >/dev/null 2>&1 || true
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

kubectl apply -f "$crds" >/dev/null
for c in machinedeployments machinesets machinepools machines; do
	kubectl wait --for=condition=Established "crd/$c.cluster.x-k8s.io" --timeout=60s >/dev/null
done
t_pass "minimal Cluster API CRDs installed"
kubectl create namespace "$ns" >/dev/null
printf 'namespace: %s\n' "$ns" >"$work/config.yaml"
drv() { "$tool" --driver "$so" --config "$work/config.yaml" "$@"; }

min=cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size
max=cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size
cap=capacity.cluster-autoscaler.kubernetes.io

# md NAME REPLICAS [ANNOTATION-LINES]: a MachineDeployment sized 0..5.
md() {
	kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: $1
  annotations:
    $min: "0"
    $max: "5"
${3:-}
spec:
  clusterName: c1
  replicas: $2
  selector:
    matchLabels: {cluster.x-k8s.io/deployment-name: $1}
EOF
}

# machine NAME MD NODE: a Machine of MD whose Node is NODE (status written
# through the status subresource, as the Machine controller does).
machine() {
	kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata:
  name: $1
  labels: {cluster.x-k8s.io/deployment-name: $2, cluster.x-k8s.io/cluster-name: c1}
spec:
  clusterName: c1
  providerID: e2e://$3
EOF
	kubectl -n "$ns" patch machine "$1" --subresource=status --type=merge \
		-p "{\"status\":{\"nodeRef\":{\"kind\":\"Node\",\"name\":\"$3\"}}}" >/dev/null
}

replicas() { kubectl -n "$ns" get "$1" "$2" -o 'jsonpath={.spec.replicas}'; }
mark() { kubectl -n "$ns" get machine "$1" -o 'jsonpath={.metadata.annotations.cluster\.x-k8s\.io/delete-machine}'; }

md md-a 2
md md-z 1
md md-gpu 0 "    $cap/cpu: \"16\"
    $cap/memory: 128G
    $cap/ephemeral-disk: 100Gi
    $cap/maxPods: \"200\"
    $cap/gpu-type: nvidia.com/gpu
    $cap/gpu-count: \"2\"
    $cap/labels: key1=value1,key2=value2
    $cap/taints: key1=value1:NoSchedule,key2=value2:NoExecute"
# Only a min annotation: not a node group.
kubectl -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: md-half, annotations: {$min: "1"}}
spec: {clusterName: c1, replicas: 1, selector: {matchLabels: {x: y}}}
EOF
machine m-1 md-a node-1
machine m-2 md-a node-2

out=$(drv groups)
t_contains "MachineDeployment md-a is a group" "MachineDeployment/$ns/md-a min=0 max=5 target=2" "$out"
t_contains "scale-from-zero group at 0" "MachineDeployment/$ns/md-gpu min=0 max=5 target=0" "$out"
[[ "$out" != *md-half* ]] || t_fail "a MachineDeployment with only a min annotation became a group: $out"
t_pass "a MachineDeployment without both annotations is no group"

# --- replicas through the scale subresource
t_eq "increase md-a by 2" ok "$(drv increase "MachineDeployment/$ns/md-a" 2)"
t_eq "spec.replicas is 4" 4 "$(replicas machinedeployment md-a)"
t_eq "the scale subresource agrees" 4 \
	"$(kubectl get --raw "/apis/cluster.x-k8s.io/v1beta1/namespaces/$ns/machinedeployments/md-a/scale" | jq .spec.replicas)"
out=$(drv increase "MachineDeployment/$ns/md-a" 2 2>&1 || true)
t_contains "past max 5 is refused" "would exceed its maximum size 5" "$out"
t_eq "replicas unchanged" 4 "$(replicas machinedeployment md-a)"
t_eq "decrease md-a by 2" ok "$(drv decrease "MachineDeployment/$ns/md-a" 2)"
t_eq "spec.replicas is 2" 2 "$(replicas machinedeployment md-a)"
out=$(drv decrease "MachineDeployment/$ns/md-a" 1 2>&1 || true)
t_contains "not below the existing Machines" "below its 2 existing Machines" "$out"
t_eq "md-z to zero" ok "$(drv decrease "MachineDeployment/$ns/md-z" 1)"
t_eq "spec.replicas is 0" 0 "$(replicas machinedeployment md-z)"
t_contains "the group reports 0" "MachineDeployment/$ns/md-z min=0 max=5 target=0" "$(drv groups)"
t_eq "md-z from zero to 3" ok "$(drv increase "MachineDeployment/$ns/md-z" 3)"
t_eq "spec.replicas is 3" 3 "$(replicas machinedeployment md-z)"

# --- delete a particular node: its Machine is marked, replicas drop
t_eq "the node's group, by providerID" "MachineDeployment/$ns/md-a" \
	"$(kubectl create -f - -o name >/dev/null <<EOF && drv group-for-node node-2
apiVersion: v1
kind: Node
metadata: {name: node-2, annotations: {kwok.x-k8s.io/node: fake}}
spec: {providerID: "e2e://node-2"}
EOF
)"
kubectl delete node node-2 --wait=false >/dev/null
t_eq "delete node-2" ok "$(drv delete "MachineDeployment/$ns/md-a" node-2)"
[[ -n "$(mark m-2)" ]] || t_fail "Machine m-2 has no delete-machine annotation"
t_pass "Machine m-2 carries cluster.x-k8s.io/delete-machine ($(mark m-2))"
t_eq "Machine m-1 is not marked" "" "$(mark m-1)"
t_eq "replicas lowered to 1" 1 "$(replicas machinedeployment md-a)"
out=$(drv delete "MachineDeployment/$ns/md-a" node-9 2>&1 || true)
t_contains "a node without a Machine in the group is refused" "has no Machine for node node-9" "$out"

# --- scale-from-zero template
tmpl=$(drv template "MachineDeployment/$ns/md-gpu")
t_eq "template capacity" "16 128G 100Gi 200 2" \
	"$(jq -r '.status.capacity | "\(.cpu) \(.memory) \(."ephemeral-storage") \(.pods) \(."nvidia.com/gpu")"' <<<"$tmpl")"
t_eq "allocatable equals capacity" true "$(jq '.status.capacity == .status.allocatable' <<<"$tmpl")"
t_eq "template labels" "value1 value2" "$(jq -r '.metadata.labels | "\(.key1) \(.key2)"' <<<"$tmpl")"
t_eq "template taints" "key1=value1:NoSchedule key2=value2:NoExecute" \
	"$(jq -r '[.spec.taints[] | "\(.key)=\(.value):\(.effect)"] | join(" ")' <<<"$tmpl")"

# --- a failed Machine is an errored instance
kubectl -n "$ns" patch machine m-1 --subresource=status --type=merge \
	-p '{"status":{"failureReason":"CreateError","failureMessage":"instance quota exceeded"}}' >/dev/null
out=$(drv instances "MachineDeployment/$ns/md-a")
t_contains "failed Machine reported with its reason" "e2e://node-1 node-1 Running Other CreateError" "$out"
t_done

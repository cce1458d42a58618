#!/usr/bin/env bash
# A recreated Lease costs one pass, not the service. provreqd leads with
# leader election on (its Lease in a namespace of its own, made with
# leaseTransitions 5, so its term is 7) and a Cluster API group it has
# fenced (provreqd.io/fence-<lease>: "7" on the MachineDeployment, through
# the clusterapi driver and the small machine controller of
# 73-provreq-clusterapi). Then the Lease is deleted, and its namespace
# deleted and made again: the new Lease starts at leaseTransitions 0 (term
# 1), below the term the group records. A check-capacity and an atomic
# request made after must be served again: provreqd raises the Lease's
# count above the recorded term and fences again.
#   bench=lease_recreated_served_again_s: from the new namespace's
#   creationTimestamp to the later of the two requests' Provisioned
#   lastTransitionTime (the apiserver's times; goal under 30 s).
# Broken controllers caught: one that stays fenced out for good (nothing
# is written again, not even check-capacity statuses; "this replica no
# longer leads" in the log while it leads), and one whose /readyz stays
# ok meanwhile is not caught here (unit tests cover it).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

PR_DRIVER_SO="$PROVREQD_BUILDDIR/cloud/clusterapi/.libs/clusterapi.so"
[[ -f "$PR_DRIVER_SO" ]] || t_fail "build first: $PR_DRIVER_SO is missing (make all)"
crds="$PROVREQD_SRCDIR/e2e/crds/cluster-api-minimal.yaml"
mc="$PROVREQD_SRCDIR/e2e/tools/capi-machine-controller.sh"

pr_init pr94
lease=$(t_unique lease94)
lns=$(t_unique lns94)
pr_on_exit "kubectl delete namespace $lns --wait=false >/dev/null 2>&1"
kubectl apply -f "$crds" >/dev/null
for c in machinedeployments machinesets machinepools machines; do
	kubectl wait --for=condition=Established "crd/$c.cluster.x-k8s.io" --timeout=60s >/dev/null
done
t_pass "minimal Cluster API CRDs installed"

g=$(t_unique capi-lease)
PR_GROUPS+=("$g")
cap=capacity.cluster-autoscaler.kubernetes.io
kubectl -n "$PR_NS" apply -f - >/dev/null <<EOF
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: md-a
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "0"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "6"
    $cap/cpu: "4"
    $cap/memory: 8Gi
    $cap/maxPods: "110"
    $cap/labels: $PR_GROUP_LABEL=$g
spec:
  clusterName: c1
  replicas: 0
  selector:
    matchLabels: {cluster.x-k8s.io/deployment-name: md-a}
EOF
"$mc" "$PR_NS" >"$PR_WORK/machine-controller.log" 2>&1 &
mc_pid=$!
pr_on_exit "kill $mc_pid 2>/dev/null; wait $mc_pid 2>/dev/null"

# The Lease's namespace, and a Lease with a history: five transitions, no
# holder (a former installation released it).
lease_obj() {
	kubectl -n "$lns" apply -f - >/dev/null <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: $lease
spec:
  leaseTransitions: 5
  leaseDurationSeconds: 4
EOF
}
kubectl create namespace "$lns" >/dev/null
lease_obj
fence() { kubectl -n "$PR_NS" get md md-a -o "jsonpath={.metadata.annotations.provreqd\.io/fence-$lease}"; }
fence_is() { [[ "$(fence)" == "$1" ]]; }
fence_above() { local f; f=$(fence); [[ -n "$f" && "$f" -gt "$1" ]]; }
transitions() { kubectl -n "$lns" get lease "$lease" -o 'jsonpath={.spec.leaseTransitions}' 2>/dev/null; }
ready_body() { curl -sS --max-time 2 "http://$PR_HTTP/readyz" 2>/dev/null || true; }

printf 'namespace: %s\n' "$PR_NS" >"$PR_WORK/cloud.yaml"
pr_start --leader-elect=true --lease-name "$lease" --lease-namespace "$lns" --lease-duration 4s \
	--lease-renew-deadline 3s --lease-retry-period 1s --scale-down=false
pr_template small 1 1Gi "$g"
pr_template big 3 1Gi "$g"

pr_request first atomic-scale-up small 1
t_wait 60 "first: Provisioned=True/CapacityIsProvisioned" pr_cond_is first Provisioned True/CapacityIsProvisioned
t_wait 10 "the group records term 7 (leaseTransitions 6 + 1)" fence_is 7

# ------------------------------------------------ the Lease recreated
kubectl -n "$lns" delete lease "$lease" --wait=true >/dev/null
kubectl delete namespace "$lns" --wait=true --timeout=120s >/dev/null
kubectl create namespace "$lns" >/dev/null
born=$(kubectl get namespace "$lns" -o jsonpath='{.metadata.creationTimestamp}')
t_pass "the Lease and its namespace were deleted; the namespace is back ($born)"

pr_request after-cc check-capacity small 1
pr_request after-at atomic-scale-up big 2
t_wait 90 "after-cc: Provisioned=True/CapacityIsFound" pr_cond_is after-cc Provisioned True/CapacityIsFound
t_wait 90 "after-at: Provisioned=True/CapacityIsProvisioned" pr_cond_is after-at Provisioned True/CapacityIsProvisioned
t_wait 10 "the group records a term above 7" fence_above 7
tr=$(transitions)
[[ -n "$tr" && "$tr" -ge 7 ]] || t_fail "the new Lease's leaseTransitions should have been raised to 7 or more; got '$tr'"
t_pass "the new Lease's leaseTransitions was raised to $tr; the group records $(fence)"
t_contains "the log says the term was raised" "the Lease's term was raised above it" "$(cat "$PR_WORK/provreqd.log")"
if grep -q 'this replica no longer leads' "$PR_WORK/provreqd.log"; then
	t_fail "the log says 'this replica no longer leads' although it held the Lease"
fi
t_pass "the log never says 'this replica no longer leads'"
t_wait 10 "/readyz is ok again" pr_ready_probe
t_eq "/readyz names no fence problem" 0 "$(ready_body | grep -c '^fence:' || true)"

ts() { date -d "$1" +%s; }
cond_time() {
	kubectl get provreq -n "$PR_NS" "$1" \
		-o 'jsonpath={.status.conditions[?(@.type=="Provisioned")].lastTransitionTime}'
}
t1=$(ts "$(cond_time after-cc)") t2=$(ts "$(cond_time after-at)")
last=$((t1 > t2 ? t1 : t2))
echo "bench=lease_recreated_served_again_s value=$((last - $(ts "$born")))"
t_done

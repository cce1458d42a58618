#!/usr/bin/env bash
# One topology domain per gang, against the real apiserver: PodTemplates
# marked with Kueue's kueue.x-k8s.io/podset-required-topology:
# topology.kubernetes.io/zone, on three 2-CPU nodes (one in zone a, two in
# zone b), pods of 2 CPU:
#  - a 2-pod gang is booked in zone b, the one zone with room for both, and
#    its details say topologyDomain=topology.kubernetes.io/zone=b;
#  - a 3-pod gang (6 CPU free across the zones, at most 2 pods in one) is
#    not booked: Provisioned=False/CapacityIsNotFound, saying what fits in
#    each zone;
#  - kube-scheduler places the 2-pod gang's consumer pods, pinned to the
#    zone the details name, and the booking is consumed.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr90
grp=$(t_unique tz90)
PR_GROUPS+=("$grp")
zone_node() { # NAME ZONE
	kubectl apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {$PR_GROUP_LABEL: $grp, kubernetes.io/hostname: $1, type: kwok, topology.kubernetes.io/zone: $2}
spec:
  providerID: kwok://$1
status:
  capacity: {cpu: "2", memory: 8Gi, pods: "110"}
  allocatable: {cpu: "2", memory: 8Gi, pods: "110"}
NODE
}
zone_node "$grp-a1" "$grp-a"
zone_node "$grp-b1" "$grp-b"
zone_node "$grp-b2" "$grp-b"
t_wait 60 "the nodes are Ready" pr_ready_is "$grp" 3
kubectl apply -n "$PR_NS" -f - >/dev/null <<TEMPLATE
apiVersion: v1
kind: PodTemplate
metadata:
  name: worker
template:
  metadata:
    annotations: {kueue.x-k8s.io/podset-required-topology: topology.kubernetes.io/zone}
  spec:
    nodeSelector: {$PR_GROUP_LABEL: $grp}
    containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources:
        requests: {cpu: "2", memory: 1Gi}
TEMPLATE
pr_start --request-backoff-initial 2s --request-backoff-max 4s

pr_request three check-capacity worker 3 noRetry=true
t_wait 30 "three: Failed=True/CapacityIsNotFound" pr_cond_is three Failed True/CapacityIsNotFound
t_contains "three: the message says what fits in each zone" \
	"pods that fit in each: topology.kubernetes.io/zone=$grp-a: 1, topology.kubernetes.io/zone=$grp-b: 2" \
	"$(pr_msg three Provisioned)"
t_eq "three: nothing is booked" "" \
	"$(kubectl get provreq -n "$PR_NS" three -o 'jsonpath={.status.provisioningClassDetails.provreqd\.io/booking}')"

pr_request two check-capacity worker 2
t_wait 30 "two: Provisioned=True/CapacityIsFound" pr_cond_is two Provisioned True/CapacityIsFound
domain=$(kubectl get provreq -n "$PR_NS" two -o 'jsonpath={.status.provisioningClassDetails.topologyDomain}')
t_eq "two: details name the zone" "topology.kubernetes.io/zone=$grp-b" "$domain"
booking=$(kubectl get provreq -n "$PR_NS" two -o 'jsonpath={.status.provisioningClassDetails.provreqd\.io/booking}')
[[ "$booking" == *"$grp-b1"* && "$booking" == *"$grp-b2"* && "$booking" != *"$grp-a1"* ]] ||
	t_fail "two: the booking is not the two nodes of zone b: $booking"
t_pass "two: booked on the two nodes of zone b"

# The consumer pods, pinned to that zone as Kueue would (podSetUpdates):
# kube-scheduler places both.
for i in 0 1; do
	kubectl apply -n "$PR_NS" -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata:
  name: two-$i
  annotations:
    autoscaling.x-k8s.io/consume-provisioning-request: two
    autoscaling.x-k8s.io/provisioning-class-name: check-capacity.autoscaling.x-k8s.io
spec:
  terminationGracePeriodSeconds: 0
  nodeSelector: {$PR_GROUP_LABEL: $grp, topology.kubernetes.io/zone: ${domain#*=}}
  tolerations:
  - {key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {cpu: "2", memory: 1Gi}
POD
done
bound() { [[ "$(kubectl get pods -n "$PR_NS" -o 'jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c .)" == 2 ]]; }
t_wait 60 "kube-scheduler placed both pods in the zone" bound
t_wait 60 "two: BookingExpired=True/CapacityBookingConsumed" pr_cond_is two BookingExpired True/CapacityBookingConsumed
kubectl delete pods -n "$PR_NS" --all --wait=false >/dev/null
t_done

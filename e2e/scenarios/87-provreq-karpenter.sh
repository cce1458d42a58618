#!/usr/bin/env bash
# Atomic scale-up through the karpenter driver against real Karpenter: its
# kwok provider (sigs.k8s.io/karpenter/kwok, built by build-binaries.sh)
# runs against the e2e apiserver with the CRDs of its module, one custom
# instance type (c-2x-amd64-linux: 2 CPUs, 8Gi, on-demand in zone e2e-a),
# and the e2e's kwok controller as the kubelets of the Nodes it creates.
# Three NodePools, tainted so that only this scenario's pods count:
#   * ok: c-2x, consolidation of empty nodes at once (consolidateAfter 0s).
#     An atomic request for 3 pods of 1500m becomes 3 NodeClaims whose
#     Nodes register; it is Provisioned after the last one. The booked,
#     still empty Nodes are not consolidated while the booking holds them
#     (karpenter.sh/do-not-disrupt), while an unmarked NodeClaim made by
#     hand in the same NodePool is; once the booking expires the driver
#     lifts the mark and Karpenter removes them (only Karpenter does:
#     provreqd runs with --scale-down=false).
#   * bad: only c-9x-amd64-linux, which the provider does not offer, so
#     Karpenter reports every launch as failed (Launched, LaunchFailed). A
#     request with one pod for ok and one for bad is rolled back: no
#     NodeClaim of that plan is left, in either NodePool.
#   * capped: c-2x with limits cpu: 4. A request for 3 nodes is refused
#     (max size 2, the driver says which limit); one for 2 is Provisioned.
#   * crash: provreqd is killed (SIGKILL) once the first NodeClaim of a
#     request for 2 exists; restarted, it finishes the plan under its owner
#     token: Provisioned with exactly 2 NodeClaims.
#   * burst: c-2x, limit cpu 100. Five atomic requests of 2 pods made at
#     once: all Provisioned, each on the Nodes of its own scale-up, exactly
#     the 10 NodeClaims they need ever created (what each check catches: see
#     the path).
# Prints bench=karpenter_atomic_provisioned_s,
# bench=karpenter_rollback_leftover_nodeclaims,
# bench=karpenter_limit_overshoot_nodes,
# bench=karpenter_booked_nodes_consolidated (0: none while booked) and
# bench=karpenter_kill9_extra_nodeclaims, bench=karpenter_burst_all_provisioned_s,
# bench=karpenter_burst_extra_nodes (NodeClaims ever created beyond the 10)
# and bench=karpenter_burst_nodes_before_first_provisioned (10: planned
# together; 2: one plan at a time).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

PR_DRIVER_SO="$PROVREQD_BUILDDIR/cloud/karpenter/.libs/karpenter.so"
[[ -f "$PR_DRIVER_SO" ]] || t_fail "build first: $PR_DRIVER_SO is missing (make all)"
kdir=$(bash "$PROVREQD_SRCDIR/e2e/build-binaries.sh" --print-karpenter-dir)
kbin="$kdir/bin/karpenter-kwok"
[[ -x "$kbin" && -d "$kdir/crds" ]] || t_skip "no $kbin: run e2e/build-binaries.sh"

. "$PROVREQD_SRCDIR/e2e/versions.env"
pr_init pr87
kubectl apply --server-side -f "$kdir/crds/" >/dev/null
for c in nodepools.karpenter.sh nodeclaims.karpenter.sh kwoknodeclasses.karpenter.kwok.sh; do
	kubectl wait --for=condition=Established "crd/$c" --timeout=60s >/dev/null
done
t_pass "Karpenter's CRDs installed (from sigs.k8s.io/karpenter@$KARPENTER_VERSION)"
kubectl apply -f - >/dev/null <<EOF
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: default
EOF

taint=e2e.provreqd.io/karpenter
it=c-2x-amd64-linux
np_ok=$(t_unique kp-ok) np_bad=$(t_unique kp-bad) np_cap=$(t_unique kp-cap) np_crash=$(t_unique kp-crash)
np_burst=$(t_unique kp-burst)
g_ok="$np_ok/$it/e2e-a/on-demand" g_bad="$np_bad/c-9x-amd64-linux/any/any" g_cap="$np_cap/$it/e2e-a/on-demand"

# nodepool NAME TYPE LIMITS
nodepool() {
	kubectl apply -f - >/dev/null <<EOF
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: $1
spec:
  template:
    metadata:
      labels: {e2e.provreqd.io/pool: $1}
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      taints: [{key: $taint, value: "true", effect: NoSchedule}]
      expireAfter: Never
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [$2]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
    budgets: [{nodes: "100%"}]
  limits: {$3}
EOF
}
# claims POOL: "name node owner" of the NodePool's NodeClaims.
claims() {
	kubectl get nodeclaims -l "karpenter.sh/nodepool=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name} {.status.nodeName} {.metadata.labels.provreqd\.io/owner}{"\n"}{end}'
}
nclaims() { claims "$1" | grep -c . || true; }
nclaims_is() { [[ "$(nclaims "$1")" == "$2" ]]; }
registered() { claims "$1" | awk 'NF >= 2 && $2 != ""' | grep -c . || true; }
# owned UID: NodeClaims in any NodePool whose owner token names request UID.
owned() {
	kubectl get nodeclaims -o 'jsonpath={range .items[*]}{.metadata.labels.provreqd\.io/owner}{"\n"}{end}' |
		grep -c "^$1\." || true
}
owned_is() { [[ "$(owned "$1")" == "$2" ]]; }
owned_at_least() { (($(owned "$1") >= $2)); }
uid_of() { kubectl get provreq -n "$PR_NS" "$1" -o jsonpath='{.metadata.uid}'; }
ts() { date -d "$1" +%s; }
# tmpl NAME POOL TYPE CPU: pods for one NodePool and instance type.
tmpl() {
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: v1
kind: PodTemplate
metadata:
  name: $1
template:
  spec:
    nodeSelector: {karpenter.sh/nodepool: $2, node.kubernetes.io/instance-type: $3}
    tolerations: [{key: $taint, operator: Exists}]
    containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources:
        requests: {cpu: "$4", memory: 1Gi}
EOF
}

nodepool "$np_ok" "$it" 'cpu: "100"'
nodepool "$np_bad" c-9x-amd64-linux 'cpu: "100"'
nodepool "$np_cap" "$it" 'cpu: "4"'
nodepool "$np_crash" "$it" 'cpu: "100"'
nodepool "$np_burst" "$it" 'cpu: "100"'
pr_on_exit "kubectl delete nodepools $np_ok $np_bad $np_cap $np_crash $np_burst --wait=false >/dev/null 2>&1"

# Karpenter's kwok provider, out of cluster.
cat >"$PR_WORK/instance-types.json" <<EOF
[{"name": "$it", "architecture": "amd64", "operatingSystems": ["linux"],
  "resources": {"cpu": "2", "memory": "8Gi", "pods": "110", "ephemeral-storage": "20Gi"},
  "offerings": [{"Price": 0.1, "Available": true, "Requirements": [
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["e2e-a"]}]}]}]
EOF
kmetrics=$(pr_free_port) khealth=$(pr_free_port)
KUBECONFIG=$KUBECONFIG SYSTEM_NAMESPACE=kube-system "$kbin" --disable-leader-election \
	--metrics-port "$kmetrics" --health-probe-port "$khealth" \
	--instance-types-file-path "$PR_WORK/instance-types.json" >"$PR_WORK/karpenter.log" 2>&1 &
kpid=$!
# On the way out: Karpenter lets go of what it holds (finalizers) while
# it still runs, then stops; anything left is released by hand.
pr_on_exit "kubectl delete nodeclaims -l 'e2e.provreqd.io/pool in ($np_ok,$np_bad,$np_cap,$np_crash,$np_burst)' --timeout=30s >/dev/null 2>&1; \
kill $kpid 2>/dev/null; wait $kpid 2>/dev/null; \
for o in \$(kubectl get nodeclaims,nodes -l 'e2e.provreqd.io/pool in ($np_ok,$np_bad,$np_cap,$np_crash,$np_burst)' -o name 2>/dev/null); do \
kubectl patch \$o --type=merge -p '{\"metadata\":{\"finalizers\":null}}' >/dev/null 2>&1; kubectl delete \$o --wait=false >/dev/null 2>&1; done; \
if [[ \$rc != 0 ]]; then t_log '--- karpenter (last 40 lines)'; tail -n 40 '$PR_WORK/karpenter.log'; fi"
t_wait 90 "Karpenter's kwok provider is healthy" curl -fsS --max-time 2 "http://127.0.0.1:$khealth/healthz"

cat >"$PR_WORK/cloud.yaml" <<EOF
nodePools: [$np_ok, $np_bad, $np_cap, $np_crash, $np_burst]
shapes:
- instanceType: $it
  zone: e2e-a
  capacityType: on-demand
  labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux}
  capacity: {cpu: "2", memory: 8Gi, pods: "110"}
- instanceType: c-9x-amd64-linux
  capacity: {cpu: "2", memory: 8Gi, pods: "110"}
EOF
pr_start --provision-timeout 2m --booking-ttl 120s --scale-down=false
# check-driver against the real cluster (--kubeconfig): the NodePools and
# their NodeClaims as the running driver sees them.
out=$("$PR_BIN" check-driver "$PR_DRIVER_SO" --cloud-config "$PR_WORK/cloud.yaml" --kubeconfig "$KUBECONFIG" 2>&1) ||
	t_fail "check-driver --kubeconfig: $out"
t_contains "check-driver --kubeconfig lists NodePool $np_ok" "- $np_ok/$it/e2e-a/on-demand min=0 max=" "$out"
t_contains "check-driver --kubeconfig lists NodePool $np_crash" "- $np_crash/" "$out"
tmpl t-ok "$np_ok" "$it" 1500m
tmpl t-bad "$np_bad" c-9x-amd64-linux 1500m
tmpl t-cap "$np_cap" "$it" 1500m
tmpl t-crash "$np_crash" "$it" 1500m

# --- atomic: 3 NodeClaims that register, then Provisioned
pr_request ok atomic-scale-up t-ok 3
t_wait 180 "ok: Provisioned=True/CapacityIsProvisioned" pr_cond_is ok Provisioned True/CapacityIsProvisioned
t_eq "ok: 3 NodeClaims in $np_ok" 3 "$(nclaims "$np_ok")"
t_eq "ok: each with its Node" 3 "$(registered "$np_ok")"
t_eq "ok: all 3 carry the request's owner token" 3 "$(owned "$(uid_of ok)")"
created=$(kubectl get provreq -n "$PR_NS" ok -o jsonpath='{.metadata.creationTimestamp}')
prov=$(kubectl get provreq -n "$PR_NS" ok -o 'jsonpath={.status.conditions[?(@.type=="Provisioned")].lastTransitionTime}')
last_node=$(kubectl get nodes -l "karpenter.sh/nodepool=$np_ok" \
	-o 'jsonpath={range .items[*]}{.metadata.creationTimestamp}{"\n"}{end}' | sort | tail -n 1)
(($(ts "$prov") >= $(ts "$last_node"))) || t_fail "Provisioned at $prov, before the last Node registered at $last_node"
t_pass "Provisioned ($prov) after the last Node registered ($last_node)"
echo "bench=karpenter_atomic_provisioned_s value=$(($(ts "$prov") - $(ts "$created")))"
t_eq "ok: the Nodes carry do-not-disrupt while booked" "true true true" \
	"$(kubectl get nodes -l "karpenter.sh/nodepool=$np_ok" -o 'jsonpath={.items[*].metadata.annotations.karpenter\.sh/do-not-disrupt}')"
# Booked, empty Nodes in a NodePool that consolidates empty nodes at once
# (consolidateAfter 0s) stay while the booking (120s) holds them; an
# unmarked NodeClaim made beside them by hand shows that Karpenter does
# consolidate that NodePool meanwhile.
kubectl create -f - >/dev/null <<EOF
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  generateName: $np_ok-control-
  labels: {karpenter.sh/nodepool: $np_ok, e2e.provreqd.io/pool: $np_ok, e2e.provreqd.io/control: "true"}
spec:
  nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
  taints: [{key: $taint, value: "true", effect: NoSchedule}]
  requirements:
  - {key: karpenter.sh/nodepool, operator: In, values: [$np_ok]}
  - {key: node.kubernetes.io/instance-type, operator: In, values: [$it]}
  - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  - {key: topology.kubernetes.io/zone, operator: In, values: [e2e-a]}
EOF
control_gone() { [[ -z "$(kubectl get nodeclaims -l e2e.provreqd.io/control=true -o name)" ]]; }
control_initialized() {
	k_is True '{.items[*].status.conditions[?(@.type=="Initialized")].status}' nodeclaims -l e2e.provreqd.io/control=true
}
t_wait 60 "control: an unmarked NodeClaim beside them initialises" control_initialized
t_wait 90 "control: Karpenter consolidates it, empty" control_gone
left=$(($(ts "$prov") + 120 - $(date +%s)))
((left > 0)) || t_fail "too slow: the booking ended before the control NodeClaim was consolidated"
t_eq "ok: the 3 booked, empty nodes stay meanwhile (${left}s of booking left)" 3 "$(nclaims "$np_ok")"
echo "bench=karpenter_booked_nodes_consolidated value=$((3 - $(nclaims "$np_ok")))"

# --- some launches fail: the whole plan is rolled back
kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: mixed
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef: {name: t-ok}
    count: 1
  - podTemplateRef: {name: t-bad}
    count: 1
  parameters: {noRetry: "true"}
EOF
t_wait 180 "mixed: Provisioned=False/ScaleUpFailed" pr_cond_is mixed Provisioned False/ScaleUpFailed
msg=$(pr_msg mixed Provisioned)
t_contains "mixed: the condition names the failing group" "$g_bad" "$msg"
# Karpenter keeps an unknown instance type under Launched=Unknown/LaunchFailed
# (or, were it a capacity error, deletes the NodeClaim at once).
grep -Eq "LaunchFailed|InsufficientCapacity|deleted before its Node registered" <<<"$msg" ||
	t_fail "mixed: the condition does not give Karpenter's reason: $msg"
t_pass "mixed: with Karpenter's reason"
mixed_uid=$(uid_of mixed)
t_wait 120 "mixed: no NodeClaim of the plan is left" owned_is "$mixed_uid" 0
t_eq "mixed: none in $np_bad" 0 "$(nclaims "$np_bad")"
echo "bench=karpenter_rollback_leftover_nodeclaims value=$(owned "$mixed_uid")"

# --- over the NodePool's limit: refused, nothing made
pr_request big atomic-scale-up t-cap 3 noRetry=true
t_wait 60 "big: Provisioned=False/CapacityIsNotFound" pr_cond_is big Provisioned False/CapacityIsNotFound
t_contains "big: the group's max size refuses it" "$g_cap: 2 of 3 pods fit within the group's max size" \
	"$(pr_msg big Provisioned)"
t_contains "the driver names the limit" "$g_cap: max size 2 (0 NodeClaims; bound by NodePool $np_cap limit cpu=4" \
	"$(cat "$PR_WORK/provreqd.log")"
pr_request fits atomic-scale-up t-cap 2
t_wait 180 "fits: 2 nodes within the limit are Provisioned" pr_cond_is fits Provisioned True/CapacityIsProvisioned
t_eq "capped: exactly 2 NodeClaims" 2 "$(nclaims "$np_cap")"
echo "bench=karpenter_limit_overshoot_nodes value=$(($(nclaims "$np_cap") > 2 ? $(nclaims "$np_cap") - 2 : 0))"

# --- provreqd killed mid launch: the plan resumes under its token, no doubles
pr_request crash atomic-scale-up t-crash 2
crash_uid=$(uid_of crash)
t_wait 60 "crash: its first NodeClaim exists" owned_at_least "$crash_uid" 1
pr_kill9
launching=$(owned "$crash_uid") at_kill=$(pr_cond crash Provisioned)
pr_start --provision-timeout 2m --booking-ttl 120s --scale-down=false
t_wait 180 "crash: Provisioned=True/CapacityIsProvisioned after the restart" \
	pr_cond_is crash Provisioned True/CapacityIsProvisioned
t_eq "crash: exactly 2 NodeClaims (killed with $launching made, Provisioned '$at_kill')" 2 "$(owned "$crash_uid")"
echo "bench=karpenter_kill9_extra_nodeclaims value=$(($(owned "$crash_uid") - 2))"

# --- a burst (issue 43): five atomic requests of 2 pods made at once on
# NodePool burst (room for all: 10 of its 2-CPU nodes, one 1500m pod each;
# empty nodes consolidated at once, as in ok). Judged from Karpenter's
# NodeClaims (a watch from before the burst) and the Nodes, never from
# provreqd's store:
#   * all 5 Provisioned within 300 s: a controller that sends the requests
#     behind a busy NodePool to the request backoff or never decides them
#     again leaves some unprovisioned; so does one whose plans take each
#     other's NodeClaims (a rollback of one deleting another's);
#   * exactly the 10 NodeClaims they need were ever created and no more come:
#     one that plans a request twice, replaces NodeClaims Karpenter
#     consolidated from under an open plan, or counts another plan's
#     NodeClaims as its own surplus makes or deletes more (a surplus rolled
#     back still shows: every NodeClaim ever created counts);
#   * the time to the last one, and how many NodeClaims were created before
#     the first was Provisioned (10 when the five were planned together, 2
#     when served one plan at a time): a controller serving one plan at a
#     time passes both checks above and shows here (the karpenter driver
#     marks each NodeClaim with its plan, so plans share a NodePool).
tmpl t-burst "$np_burst" "$it" 1500m
pr_watch "$PR_WORK/nc-burst" get nodeclaims -l "karpenter.sh/nodepool=$np_burst" --no-headers \
	-o custom-columns=E:.type,N:.object.metadata.name,T:.object.metadata.creationTimestamp
pr_burst bu 5 t-burst 2 300
# (Time for a NodeClaim made beyond them to show.)
pr_stays 6 "burst: all 5 stay Provisioned" pr_all_provisioned bu 5
created=$(pr_watch_added "$PR_WORK/nc-burst")
first=$(pr_first_provisioned bu)
early=$(pr_watch_added "$PR_WORK/nc-burst" "$first")
echo "bench=karpenter_burst_all_provisioned_s value=$PR_BURST_S"
echo "bench=karpenter_burst_extra_nodes value=$((created - 10))"
echo "bench=karpenter_burst_nodes_before_first_provisioned value=$early"
t_eq "burst: exactly the 10 NodeClaims the 5 requests need were ever created" 10 "$created"
t_eq "burst: 10 NodeClaims in $np_burst" 10 "$(nclaims "$np_burst")"
registered_is() { [[ "$(registered "$1")" == "$2" ]]; }
t_wait 30 "burst: each with its Node" registered_is "$np_burst" 10
t_eq "burst: 10 Ready Nodes in $np_burst" 10 "$(kubectl get nodes -l "karpenter.sh/nodepool=$np_burst" \
	-o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')"
t_eq "burst: each was Provisioned on the Nodes of its own scale-up (none on another plan's)" 5 "$(pr_own_scaleups bu)"

# --- the booking ends: the driver lifts the mark, Karpenter consolidates
t_wait 120 "ok: BookingExpired=True/CapacityReservationTimeExpired" \
	pr_cond_is ok BookingExpired True/CapacityReservationTimeExpired
t_wait 60 "ok: the driver lifts do-not-disrupt" k_is "" \
	'{.items[*].metadata.annotations.karpenter\.sh/do-not-disrupt}' nodes -l "karpenter.sh/nodepool=$np_ok"
t_wait 180 "ok: Karpenter consolidates the empty nodes" nclaims_is "$np_ok" 0
t_done

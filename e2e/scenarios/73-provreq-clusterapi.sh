#!/usr/bin/env bash
# Atomic scale-up through the clusterapi driver, end to end: minimal Cluster
# API CRDs on the real apiserver and a small machine controller
# (e2e/tools/capi-machine-controller.sh) that turns MachineDeployment
# replicas into a MachineSet and Machines, gives each Machine a providerID
# after 1 s and a kwok Node (status.nodeRef) 2 s later.
# The same paths run against the real Cluster API in 87-provreq-capi-real
# (v1beta2, management and workload clusters apart). This scenario stays
# for what the pinned release does not let a test produce there: the
# driver's default cluster.x-k8s.io/v1beta1 API (served by the real CRDs
# only through a conversion webhook the e2e does not deploy) and Machines
# failing through v1beta1's status.failureReason/failureMessage, which
# v1beta2 providers no longer set.
#   * md-ok: an atomic request for 3 nodes grows the MachineDeployment from
#     0 to 3 and is Provisioned only after the 3 Nodes exist (a controller
#     that set Provisioned at the increase would be caught by the times);
#     exactly 3 Machines and Nodes, never more.
#   * md-bad (1 healthy Machine): its new Machines fail (failureReason, no
#     Node). The request is rolled back: replicas back to 1, the failed
#     Machines deleted, the healthy one untouched; the condition and a
#     Warning Event say the Machines failed, with the cloud's message.
#   * md-part: of 2 new Machines one fails, the other is fine. The request
#     is rolled back as a "partial creation": both Machines go (a rollback
#     that removed only the failed one is caught), replicas back to 0.
#   * md-slow: Machines are provisioned but never get a Node. At the
#     provision timeout (1m) the request is rolled back: replicas back to 0
#     and no Machine left; the condition says "timeout".
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

PR_DRIVER_SO="$PROVREQD_BUILDDIR/cloud/clusterapi/.libs/clusterapi.so"
[[ -f "$PR_DRIVER_SO" ]] || t_fail "build first: $PR_DRIVER_SO is missing (make all)"
crds="$PROVREQD_SRCDIR/e2e/crds/cluster-api-minimal.yaml"
mc="$PROVREQD_SRCDIR/e2e/tools/capi-machine-controller.sh"

pr_init pr73
kubectl apply -f "$crds" >/dev/null
for c in machinedeployments machinesets machinepools machines; do
	kubectl wait --for=condition=Established "crd/$c.cluster.x-k8s.io" --timeout=60s >/dev/null
done
t_pass "minimal Cluster API CRDs installed"

g_ok=$(t_unique capi-ok) g_bad=$(t_unique capi-bad) g_slow=$(t_unique capi-slow) g_part=$(t_unique capi-part)
PR_GROUPS+=("$g_ok" "$g_bad" "$g_slow" "$g_part")
cap=capacity.cluster-autoscaler.kubernetes.io
# md NAME REPLICAS GROUP-LABEL: a MachineDeployment sized 0..6 whose nodes
# have 4 CPUs and 8Gi and carry provreqd.io/node-group=GROUP-LABEL.
md() {
	kubectl -n "$PR_NS" apply -f - >/dev/null <<EOF
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: $1
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "0"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "6"
    $cap/cpu: "4"
    $cap/memory: 8Gi
    $cap/maxPods: "110"
    $cap/labels: $PR_GROUP_LABEL=$3
spec:
  clusterName: c1
  replicas: $2
  selector:
    matchLabels: {cluster.x-k8s.io/deployment-name: $1}
EOF
}
replicas() { kubectl -n "$PR_NS" get machinedeployment "$1" -o 'jsonpath={.spec.replicas}'; }
# machines MD: the MachineDeployment's Machines, one "name node failureReason" line each.
machines() {
	kubectl -n "$PR_NS" get machines -l "cluster.x-k8s.io/deployment-name=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name} {.status.nodeRef.name} {.status.failureReason}{"\n"}{end}'
}
nmachines() { machines "$1" | grep -c . || true; }
nmachines_is() { [[ "$(nmachines "$1")" == "$2" ]]; }
ts() { date -d "$1" +%s; }

md md-ok 0 "$g_ok"
md md-bad 1 "$g_bad"
md md-slow 0 "$g_slow"
md md-part 0 "$g_part"
"$mc" "$PR_NS" >"$PR_WORK/machine-controller.log" 2>&1 &
mc_pid=$!
pr_on_exit "kill $mc_pid 2>/dev/null; wait $mc_pid 2>/dev/null; t_log '--- machine controller (last 30 lines)'; tail -n 30 '$PR_WORK/machine-controller.log'"
t_wait 30 "md-bad's first Machine has a Ready Node" pr_ready_is "$g_bad" 1
healthy=$(machines md-bad | awk '{ print $1 }')
# From now on md-bad's new Machines fail, md-slow's never get a Node.
kubectl -n "$PR_NS" annotate machinedeployment md-bad \
	'e2e.provreqd.io/fail-machines=InsufficientCapacity: no capacity left in zone e2e-a' >/dev/null
kubectl -n "$PR_NS" annotate machinedeployment md-slow e2e.provreqd.io/hold-machines=true >/dev/null
kubectl -n "$PR_NS" annotate machinedeployment md-part e2e.provreqd.io/fail-count=1 \
	'e2e.provreqd.io/fail-machines=InsufficientCapacity: zone e2e-b ran out halfway' >/dev/null

printf 'namespace: %s\n' "$PR_NS" >"$PR_WORK/cloud.yaml"
pr_start --provision-timeout 1m --scale-down=false
pr_watch_nodes "$g_ok"
pr_template w-ok 3 1Gi "$g_ok"
pr_template w-bad 3 1Gi "$g_bad"
pr_template w-slow 3 1Gi "$g_slow"
pr_template w-part 3 1Gi "$g_part"

# --- success: 0 -> 3 Machines, Provisioned after the Nodes
pr_request ok atomic-scale-up w-ok 3
t_wait 60 "ok: Provisioned=True/CapacityIsProvisioned" pr_cond_is ok Provisioned True/CapacityIsProvisioned
t_eq "md-ok grew to 3 replicas" 3 "$(replicas md-ok)"
t_eq "3 Machines, each with a Node" 3 "$(machines md-ok | awk 'NF >= 2' | grep -c .)"
t_eq "3 Ready Nodes" 3 "$(pr_ready "$g_ok")"
created=$(kubectl get provreq -n "$PR_NS" ok -o jsonpath='{.metadata.creationTimestamp}')
prov=$(kubectl get provreq -n "$PR_NS" ok -o 'jsonpath={.status.conditions[?(@.type=="Provisioned")].lastTransitionTime}')
last_node=$(kubectl get nodes -l "$PR_GROUP_LABEL=$g_ok" -o 'jsonpath={range .items[*]}{.metadata.creationTimestamp}{"\n"}{end}' |
	sort | tail -n 1)
(($(ts "$prov") >= $(ts "$last_node"))) ||
	t_fail "Provisioned at $prov, before the last Node registered at $last_node"
t_pass "Provisioned ($prov) after the last Node registered ($last_node); created $created"
echo "bench=capi_time_to_provisioned_s value=$(($(ts "$prov") - $(ts "$created")))"

# --- failing Machines and never-joining Machines, side by side
# 3 pods: one fits on the healthy node, two need new Machines.
pr_request bad atomic-scale-up w-bad 3 noRetry=true
pr_request slow atomic-scale-up w-slow 2 noRetry=true
pr_request part atomic-scale-up w-part 2 noRetry=true
t_wait 60 "bad: Provisioned=False/ScaleUpFailed" pr_cond_is bad Provisioned False/ScaleUpFailed
msg=$(pr_msg bad Provisioned)
t_contains "bad: the condition names the group" "MachineDeployment/$PR_NS/md-bad" "$msg"
t_contains "bad: and the cloud's message" "no capacity left in zone e2e-a" "$msg"
# The two Machines fail one after the other; the first failure seen ends
# the plan: "creation failure ... 2 of 2" or "partial creation ... 1 of 2".
grep -Eq "(creation failure in MachineDeployment/$PR_NS/md-bad: 2 of 2|partial creation in MachineDeployment/$PR_NS/md-bad: 1 of 2) instances failed" <<<"$msg" ||
	t_fail "bad: the condition does not say the Machines failed: $msg"
t_pass "bad: the condition says the new Machines failed"
t_wait 60 "bad: md-bad back to its 1 replica" bash -c "[[ \$(kubectl -n $PR_NS get md md-bad -o jsonpath='{.spec.replicas}') == 1 ]]"
t_wait 60 "bad: only the healthy Machine is left" nmachines_is md-bad 1
t_eq "bad: it is the one from before" "$healthy" "$(machines md-bad | awk '{ print $1 }')"
t_eq "bad: its Node is still there" 1 "$(pr_ready "$g_bad")"
t_wait 30 "bad: the condition says the rollback is over" \
	bash -c "kubectl get provreq -n $PR_NS bad -o jsonpath='{.status.conditions[?(@.type==\"Provisioned\")].message}' | grep -q 'rolled back:'"
ev=$(kubectl get events -n "$PR_NS" --field-selector "involvedObject.name=bad,type=Warning" \
	-o 'jsonpath={range .items[*]}{.reason}: {.message}{"\n"}{end}')
t_contains "bad: a Warning Event with the cloud's message" "no capacity left in zone e2e-a" "$ev"
t_contains "bad: a Normal Event when the rollback is over" "ScaleUpRolledBack" \
	"$(kubectl get events -n "$PR_NS" --field-selector involvedObject.name=bad -o 'jsonpath={.items[*].reason}')"

t_wait 30 "part: Provisioned=False/ScaleUpFailed" pr_cond_is part Provisioned False/ScaleUpFailed
t_contains "part: the condition says partial creation" \
	"partial creation in MachineDeployment/$PR_NS/md-part: 1 of 2 instances failed (InsufficientCapacity: zone e2e-b ran out halfway)" \
	"$(pr_msg part Provisioned)"
t_wait 60 "part: md-part back to 0 replicas" bash -c "[[ \$(kubectl -n $PR_NS get md md-part -o jsonpath='{.spec.replicas}') == 0 ]]"
t_wait 60 "part: no Machine left, the healthy one included" nmachines_is md-part 0
t_wait 30 "part: no Node left" pr_count_is "$g_part" 0

t_wait 100 "slow: Provisioned=False/ScaleUpFailed at the provision timeout" pr_cond_is slow Provisioned False/ScaleUpFailed
msg=$(pr_msg slow Provisioned)
t_contains "slow: the condition says timeout" "timeout after 60s" "$msg"
t_contains "slow: with the progress it had made" "2/2 created, 0 registered, 0 ready" "$msg"
t_wait 60 "slow: md-slow back to 0 replicas" bash -c "[[ \$(kubectl -n $PR_NS get md md-slow -o jsonpath='{.spec.replicas}') == 0 ]]"
t_wait 60 "slow: no Machine left" nmachines_is md-slow 0

# Every plan is recorded as ended in its request's status, so no later
# provreqd (another scenario's, a new leader) adopts it as still open.
phase() { kubectl get provreq -n "$PR_NS" "$1" -o jsonpath='{.status.provisioningClassDetails.scaleUpPhase}'; }
phase_is() { [[ "$(phase "$1")" == "$2" ]]; }
for r in bad part slow; do
	t_wait 30 "$r: the status says rolled-back" phase_is "$r" rolled-back
done

# Nothing ran twice: md-ok still holds exactly the 3 Nodes it ever had.
t_eq "md-ok: 3 Nodes were ever created" 3 "$(pr_added "$g_ok")"
t_eq "md-ok: still 3 replicas" 3 "$(replicas md-ok)"
t_done

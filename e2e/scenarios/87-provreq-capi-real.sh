#!/usr/bin/env bash
# Atomic scale-up through the clusterapi driver against the real Cluster API
# core manager (sigs.k8s.io/cluster-api/core, CAPI_VERSION in versions.env)
# and provreqd's e2e infrastructure provider (e2e/tools/capi-real-infra-provider.sh).
# Cluster API gets a control plane of its own (e2e/tools/capi-real-lib.sh),
# so its CRDs never meet the minimal ones of 30/73 in the run's cluster.
# Layout: provreqd, its driver and the kwok Nodes use that same control
# plane (management = workload cluster; the driver has no separate
# management kubeconfig yet). v1beta2 objects only.
#   * scale from zero: md-ok (0 replicas, capacity annotations) takes an
#     atomic request for 3 nodes; the real MachineSet controller makes 3
#     Machines, the provider 3 kwok Nodes; Provisioned only after the
#     Nodes, exactly 3 Machines.
#   * scale from zero from the template: md-tpl carries no cpu/memory
#     annotations; its E2EMachineTemplate's status.capacity (published by
#     the provider) is the template node; 0 -> 2.
#   * Machines failing: md-bad's template fails every machine with an
#     InsufficientCapacity stockout (a v1beta2 condition, no failureMessage).
#     The request fails within seconds naming the stockout, md-bad goes
#     back to its 0 replicas and no Machine is left.
# Prints bench=capi_real_atomic_provisioned_s,
# bench=capi_real_scale_from_zero_provisioned_s and
# bench=capi_real_rollback_leftover_machines.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"
# shellcheck source=../tools/capi-real-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/capi-real-lib.sh"

PR_DRIVER_SO="$PROVREQD_BUILDDIR/cloud/clusterapi/.libs/clusterapi.so"
[[ -f "$PR_DRIVER_SO" ]] || t_fail "build first: $PR_DRIVER_SO is missing (make all)"
[[ -x "$CAPI_DIR/bin/capi-manager" ]] || t_skip "capi-manager is not built (e2e/build-binaries.sh builds it)"

capi_work=$(mktemp -d "${TMPDIR:-/tmp}/provreqd-e2e-capi.XXXXXX")
# shellcheck disable=SC2317 # invoked by the trap
capi_exit() {
	local rc=$?
	trap - EXIT
	set +e
	if ((rc != 0 && rc != 77)) && [[ -n "$CAPI_MGMT_KUBECONFIG" ]]; then
		t_log "--- Cluster API objects"
		capi_k get -A machinedeployments,machinesets,machines 2>&1 | head -n 40
		t_log "--- capi-manager log (last 40 lines)"
		tail -n 40 "$capi_work/capi-manager.log" 2>/dev/null
		t_log "--- infrastructure provider (last 30 lines)"
		tail -n 30 "$capi_work/provider.log" 2>/dev/null
	fi
	(exit "$rc")
	(pr_cleanup)
	capi_real_down
	rm -rf "$capi_work"
	exit "$rc"
}
trap capi_exit EXIT

capi_real_up "$capi_work"
export KUBECONFIG=$CAPI_MGMT_KUBECONFIG
pr_init pr87
trap capi_exit EXIT

g_ok=$(t_unique capi-ok) g_bad=$(t_unique capi-bad) g_tpl=$(t_unique capi-tpl)
PR_GROUPS+=("$g_ok" "$g_bad" "$g_tpl")
capi_real_provider "$PR_NS" "$CAPI_MGMT_KUBECONFIG" "$capi_work/provider.log"
capi_real_cluster "$PR_NS" c1 "$CAPI_MGMT_KUBECONFIG"

cap=capacity.cluster-autoscaler.kubernetes.io
# md NAME GROUP-LABEL [TEMPLATE-ANNOTATIONS [NO-CAPACITY-ANNOTATIONS]]: a
# MachineDeployment sized 0..6 at 0 replicas whose Machines come from
# E2EMachineTemplate NAME (4 CPUs, 8Gi, label provreqd.io/node-group=GROUP-LABEL);
# with a 4th argument its only capacity annotation is the labels one (the
# template's status.capacity says the rest).
md() {
	local capann="$cap/cpu: \"4\"
    $cap/memory: 8Gi
    $cap/maxPods: \"110\"
    "
	[[ -n "${4:-}" ]] && capann=""
	kubectl -n "$PR_NS" apply -f - >/dev/null <<EOF
apiVersion: infrastructure.e2e.provreqd.io/v1alpha1
kind: E2EMachineTemplate
metadata:
  name: $1
  annotations: {${3:-}}
spec:
  template:
    spec:
      shape: {cpu: "4", memory: 8Gi, pods: "110", labels: {$PR_GROUP_LABEL: $2}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: $1
  annotations:
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: "0"
    cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: "6"
    $capann$cap/labels: $PR_GROUP_LABEL=$2
spec:
  clusterName: c1
  replicas: 0
  selector:
    matchLabels: {cluster.x-k8s.io/deployment-name: $1}
  template:
    metadata:
      labels: {cluster.x-k8s.io/deployment-name: $1}
    spec:
      clusterName: c1
      bootstrap: {dataSecretName: bootstrap-data}
      infrastructureRef: {apiGroup: infrastructure.e2e.provreqd.io, kind: E2EMachineTemplate, name: $1}
EOF
}
replicas() { kubectl -n "$PR_NS" get machinedeployment "$1" -o 'jsonpath={.spec.replicas}'; }
# machines MD: the MachineDeployment's Machines, one "name node" line each.
machines() {
	kubectl -n "$PR_NS" get machines -l "cluster.x-k8s.io/deployment-name=$1" \
		-o 'jsonpath={range .items[*]}{.metadata.name} {.status.nodeRef.name}{"\n"}{end}'
}
nmachines() { machines "$1" | grep -c . || true; }
nmachines_is() { [[ "$(nmachines "$1")" == "$2" ]]; }
ts() { date -d "$1" +%s; }

md md-ok "$g_ok"
md md-bad "$g_bad" '"e2e.provreqd.io/fail": "InsufficientCapacity: no capacity left in zone e2e-a"'
md md-tpl "$g_tpl" "" no-capacity-annotations
t_wait 30 "the provider publishes md-tpl's template capacity" bash -c \
	"[[ \$(kubectl -n $PR_NS get e2emachinetemplate md-tpl -o jsonpath='{.status.capacity.cpu}') == 4 ]]"

printf 'namespace: %s\nversion: v1beta2\n' "$PR_NS" >"$PR_WORK/cloud.yaml"
pr_start --provision-timeout 2m --scale-down=false
pr_template w-ok 3 1Gi "$g_ok"
pr_template w-bad 3 1Gi "$g_bad"
pr_template w-tpl 3 1Gi "$g_tpl"

# --- scale from zero: 0 -> 3 Machines made by the real MachineSet controller
pr_request ok atomic-scale-up w-ok 3
t_wait 120 "ok: Provisioned=True/CapacityIsProvisioned" pr_cond_is ok Provisioned True/CapacityIsProvisioned
t_eq "md-ok grew to 3 replicas" 3 "$(replicas md-ok)"
t_eq "3 Machines, each with a Node (status.nodeRef set by Cluster API)" 3 "$(machines md-ok | awk 'NF >= 2' | grep -c .)"
t_eq "3 Ready Nodes" 3 "$(pr_ready "$g_ok")"
created=$(kubectl get provreq -n "$PR_NS" ok -o jsonpath='{.metadata.creationTimestamp}')
prov=$(kubectl get provreq -n "$PR_NS" ok -o 'jsonpath={.status.conditions[?(@.type=="Provisioned")].lastTransitionTime}')
last_node=$(kubectl get nodes -l "$PR_GROUP_LABEL=$g_ok" -o 'jsonpath={range .items[*]}{.metadata.creationTimestamp}{"\n"}{end}' |
	sort | tail -n 1)
(($(ts "$prov") >= $(ts "$last_node"))) ||
	t_fail "Provisioned at $prov, before the last Node registered at $last_node"
t_pass "Provisioned ($prov) after the last Node registered ($last_node); created $created"
echo "bench=capi_real_atomic_provisioned_s value=$(($(ts "$prov") - $(ts "$created")))"

# --- scale from zero from the infrastructure template's status.capacity
pr_request tpl atomic-scale-up w-tpl 2
t_wait 120 "tpl: Provisioned=True/CapacityIsProvisioned" pr_cond_is tpl Provisioned True/CapacityIsProvisioned
t_eq "md-tpl grew to 2 replicas" 2 "$(replicas md-tpl)"
t_eq "2 Ready Nodes of md-tpl" 2 "$(pr_ready "$g_tpl")"
created=$(kubectl get provreq -n "$PR_NS" tpl -o jsonpath='{.metadata.creationTimestamp}')
prov=$(kubectl get provreq -n "$PR_NS" tpl -o 'jsonpath={.status.conditions[?(@.type=="Provisioned")].lastTransitionTime}')
echo "bench=capi_real_scale_from_zero_provisioned_s value=$(($(ts "$prov") - $(ts "$created")))"

# --- every Machine fails with a stockout (v1beta2 condition only)
pr_request bad atomic-scale-up w-bad 2 noRetry=true
t0=$(date +%s)
t_wait 90 "bad: Provisioned=False/ScaleUpFailed" pr_cond_is bad Provisioned False/ScaleUpFailed
t_pass "bad: failed $(($(date +%s) - t0))s after the request (provision timeout is 120s)"
msg=$(pr_msg bad Provisioned)
t_contains "bad: the condition names the group" "MachineDeployment/$PR_NS/md-bad" "$msg"
t_contains "bad: and the provider's stockout message" "no capacity left in zone e2e-a" "$msg"
t_wait 90 "bad: md-bad back to 0 replicas" bash -c "[[ \$(kubectl -n $PR_NS get md md-bad -o jsonpath='{.spec.replicas}') == 0 ]]"
t_wait 90 "bad: no Machine left" nmachines_is md-bad 0
echo "bench=capi_real_rollback_leftover_machines value=$(nmachines md-bad)"
t_eq "md-ok untouched" 3 "$(nmachines md-ok)"
t_done

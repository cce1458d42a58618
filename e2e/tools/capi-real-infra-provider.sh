#!/usr/bin/env bash
# provreqd's e2e infrastructure provider for the real Cluster API controllers
# (CRDs: e2e/crds/capi-real-e2e-provider.yaml). It needs no cloud: a
# "machine" is a kwok Node in the workload cluster. It honours the v1beta2
# InfraMachine / InfraMachineTemplate / ControlPlane contracts as far as the
# Cluster API core manager reads them:
#
#   capi-real-infra-provider.sh NAMESPACE
#
# Management cluster objects are read and written with $MGMT_KUBECONFIG,
# Nodes with $WORKLOAD_KUBECONFIG (both default to $KUBECONFIG). Every
# CAPI_E2E_PERIOD seconds (default 0.5) it reads the provider's objects in
# NAMESPACE and:
#   * E2EControlPlane: status.initialization.controlPlaneInitialized=true at
#     once (the workload apiserver is already there);
#   * E2ECluster: status.initialization.provisioned=true at once (the
#     Cluster's InfrastructureReady, without which a MachineHealthCheck
#     judges no Machine);
#   * E2EMachineTemplate: publishes status.capacity (cpu, memory, pods,
#     nvidia.com/gpu from spec.template.spec.shape) and status.nodeInfo, the
#     autoscaling contract's scale-from-zero data;
#   * E2EMachine: adds the finalizer e2e.provreqd.io/machine; once the
#     provisioning delay has passed since its creation (template annotation
#     e2e.provreqd.io/provision-delay, default $CAPI_E2E_DELAY or 2 s):
#       - when the template carries e2e.provreqd.io/fail: "REASON: MESSAGE"
#         (and, when e2e.provreqd.io/fail-count is set, fewer machines
#         decided before it - oldest first - in the same pass than that
#         count): the machine fails, Ready condition False with that reason
#         and message (InsufficientCapacity is a stockout, QuotaExceeded a
#         quota error), it is never provisioned, and the provider lowers
#         fail-count by one: a budget of failures, which a rollback that
#         deletes the failed machine does not give back (a
#         MachineHealthCheck's replacement made after it provisions);
#       - else it creates the kwok Node NAME (shape of the template: cpu,
#         memory, pods, gpu, labels, taints; providerID e2e:///NS/NAME) in
#         the workload cluster - unless the template carries
#         e2e.provreqd.io/hold, a machine that never joins - then sets
#         spec.providerID and status.initialization.provisioned=true;
#       - when the template carries e2e.provreqd.io/sick, the first machine
#         provisioned after it appeared gets a sick Node: Ready=Unknown
#         (NodeStatusUnknown, a kubelet that stopped posting) and no kwok
#         annotation, so it never turns Ready; the provider then removes
#         the annotation (one sick machine per setting of it);
#   * a deleted E2EMachine: deletes its Node, removes the finalizer.
# Each action is logged on stdout with the time.
set -uo pipefail

ns=${1:?usage: capi-real-infra-provider.sh NAMESPACE}
period=${CAPI_E2E_PERIOD:-0.5}
delay=${CAPI_E2E_DELAY:-2}
mk=${MGMT_KUBECONFIG:-${KUBECONFIG:-}}
wk=${WORKLOAD_KUBECONFIG:-${KUBECONFIG:-}}
fin=e2e.provreqd.io/machine
grp=infrastructure.e2e.provreqd.io

log() { printf '%s %s\n' "$(date +%H:%M:%S.%N | cut -c1-12)" "$*"; }
m() { kubectl --kubeconfig "$mk" -n "$ns" "$@"; }
w() { kubectl --kubeconfig "$wk" "$@"; }
now_rfc() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# One pass: the actions to take, one per line, tab-separated (JSON payloads
# are compact, so they hold no tab).
plan() {
	jq -r --argjson dd "$delay" '
	def t: fromdateiso8601;
	def ann($k): .metadata.annotations[$k] // "";
	(.items | map(select(.kind == "E2EMachineTemplate"))) as $tpls |
	(.items | map(select(.kind == "E2EMachine"))) as $ms |
	(.items | map(select(.kind == "E2EControlPlane"))) as $cps |
	(.items | map(select(.kind == "E2ECluster"))) as $cls |
	def tpl_of($m): ($m | ann("cluster.x-k8s.io/cloned-from-name")) as $n |
	  ($tpls | map(select(.metadata.name == $n)) | first) // {};
	def shape: (.spec.template.spec.shape // {});
	def capacity: shape as $s |
	  {cpu: ($s.cpu // "2"), memory: ($s.memory // "4Gi"), pods: ($s.pods // "110")} +
	  (if $s.gpu then {"nvidia.com/gpu": $s.gpu} else {} end);
	(
	  ($cps[] | select(.status.initialization.controlPlaneInitialized != true) | ["cp", .metadata.name]),
	  ($cls[] | select(.status.initialization.provisioned != true) | ["cl", .metadata.name]),
	  ($tpls[] | select(.status.capacity != capacity) |
	    ["tpl", .metadata.name, ({status: {capacity: capacity,
	      nodeInfo: {architecture: "amd64", operatingSystem: "linux"}}} | tojson)]),
	  ($ms[] | . as $m | tpl_of($m) as $tp |
	    if $m.metadata.deletionTimestamp != null then
	      (if (($m.metadata.finalizers // []) | index("'$fin'")) != null then ["finalize", $m.metadata.name] else empty end)
	    elif (($m.metadata.finalizers // []) | index("'$fin'")) == null then ["adopt", $m.metadata.name]
	    elif ($m.spec.providerID // "") != "" or ($m.status.failed // false) then empty
	    elif (now - ($m.metadata.creationTimestamp | t)) < (($tp | ann("e2e.provreqd.io/provision-delay")) as $d |
	          if $d == "" then $dd else ($d | tonumber) end) then empty
	    else
	      ($m | ann("cluster.x-k8s.io/cloned-from-name")) as $tn |
	      # Machines of the template still undecided that come before this
	      # one: decided in this same pass, they count against fail-count too.
	      ($ms | map(select(ann("cluster.x-k8s.io/cloned-from-name") == $tn and (.spec.providerID // "") == "" and
	        (.status.failed // false) == false and .metadata.deletionTimestamp == null and
	        ([.metadata.creationTimestamp, .metadata.name] < [$m.metadata.creationTimestamp, $m.metadata.name]))) |
	        length) as $rank |
	      ($tp | ann("e2e.provreqd.io/fail")) as $fail | ($tp | ann("e2e.provreqd.io/fail-count")) as $fc |
	      if $fail != "" and ($fc == "" or $rank < ($fc | tonumber)) then ["fail", $m.metadata.name, $fail, $tn]
	      else ["provision", $m.metadata.name,
	            (if ($tp | ann("e2e.provreqd.io/hold")) != "" then "hold"
	             elif ($tp | ann("e2e.provreqd.io/sick")) != "" and $rank == 0 then "sick"
	             else "join" end),
	            ({cap: ($tp | capacity), labels: ($tp | shape | .labels // {}),
	              taints: ($tp | shape | .taints // [])} | tojson), $tn]
	      end
	    end)
	) | map(tostring) | @tsv'
}

# make_node NAME SHAPE [sick]: a kwok Node, or (sick) one kwok leaves alone
# whose Ready condition is Unknown.
make_node() {
	local name=$1 shape=$2 sick=${3:-}
	jq -n --arg n "$name" --arg pid "e2e:///$ns/$name" --argjson s "$shape" --arg sick "$sick" --arg t "$(now_rfc)" '{
	  apiVersion: "v1", kind: "Node",
	  metadata: {name: $n, annotations: (if $sick == "" then {"kwok.x-k8s.io/node": "fake"} else {} end),
	    labels: ({"kubernetes.io/hostname": $n, type: "kwok", "e2e.provreqd.io/machine": $n} + $s.labels)},
	  spec: ({providerID: $pid} + (if ($s.taints | length) > 0 then {taints: $s.taints} else {} end)),
	  status: ({capacity: $s.cap, allocatable: $s.cap} + (if $sick == "" then {} else
	    {conditions: [{type: "Ready", status: "Unknown", reason: "NodeStatusUnknown",
	      message: "e2e: the kubelet stopped posting node status", lastHeartbeatTime: $t, lastTransitionTime: $t}]} end))}' |
		w apply -f - >/dev/null
}

step() {
	local act a b c d out
	out=$(m get e2emachinetemplates.$grp,e2emachines.$grp,e2eclusters.$grp,e2econtrolplanes.controlplane.e2e.provreqd.io \
		-o json 2>&1) || {
		log "list failed: $out"
		return
	}
	while IFS=$'\t' read -r act a b c d; do
		case $act in
		cl)
			m patch "e2eclusters.$grp" "$a" --subresource=status --type=merge \
				-p '{"status":{"initialization":{"provisioned":true}}}' >/dev/null &&
				log "E2ECluster $a provisioned"
			;;
		cp)
			m patch e2econtrolplanes.controlplane.e2e.provreqd.io "$a" --subresource=status --type=merge \
				-p '{"status":{"initialization":{"controlPlaneInitialized":true}}}' >/dev/null &&
				log "E2EControlPlane $a initialized"
			;;
		tpl)
			m patch "e2emachinetemplates.$grp" "$a" --subresource=status --type=merge -p "$b" >/dev/null &&
				log "E2EMachineTemplate $a publishes $b"
			;;
		adopt)
			m patch "e2emachines.$grp" "$a" --type=json \
				-p "[{\"op\":\"add\",\"path\":\"/metadata/finalizers\",\"value\":[\"$fin\"]}]" >/dev/null 2>&1 ||
				m patch "e2emachines.$grp" "$a" --type=json \
					-p "[{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\",\"value\":\"$fin\"}]" >/dev/null
			;;
		fail)
			m patch "e2emachines.$grp" "$a" --subresource=status --type=merge -p "$(jq -nc \
				--arg r "${b%%:*}" --arg msg "$(sed 's/^[^:]*: *//' <<<"$b")" --arg t "$(now_rfc)" \
				'{status: {failed: true, conditions: [{type: "Ready", status: "False", reason: $r,
				  message: $msg, lastTransitionTime: $t}]}}')" >/dev/null
			log "E2EMachine $a failed: $b"
			fc=$(m get "e2emachinetemplates.$grp" "$c" -o 'jsonpath={.metadata.annotations.e2e\.provreqd\.io/fail-count}')
			if [[ -n $fc ]]; then
				m annotate --overwrite "e2emachinetemplates.$grp" "$c" "e2e.provreqd.io/fail-count=$((fc > 0 ? fc - 1 : 0))" >/dev/null
			fi
			;;
		provision)
			if [[ $b == sick ]]; then
				# One sick machine per setting of the knob: taken back
				# before the Node is made, so a failed write makes none.
				m annotate "e2emachinetemplates.$grp" "$d" e2e.provreqd.io/sick- >/dev/null || continue
			fi
			if [[ $b == join || $b == sick ]]; then
				make_node "$a" "$c" "${b/join/}" || {
					log "Node $a: create failed"
					continue
				}
			fi
			m patch "e2emachines.$grp" "$a" --type=merge -p "{\"spec\":{\"providerID\":\"e2e:///$ns/$a\"}}" >/dev/null &&
				m patch "e2emachines.$grp" "$a" --subresource=status --type=merge -p "$(jq -nc --arg t "$(now_rfc)" \
					'{status: {initialization: {provisioned: true}, conditions: [{type: "Ready", status: "True",
					  reason: "Provisioned", message: "", lastTransitionTime: $t}]}}')" >/dev/null
			log "E2EMachine $a provisioned ($b): e2e:///$ns/$a"
			;;
		finalize)
			w delete node "$a" --ignore-not-found --wait=false >/dev/null 2>&1
			m patch "e2emachines.$grp" "$a" --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null 2>&1
			log "E2EMachine $a deleted, Node $a gone"
			;;
		esac
	done < <(plan <<<"$out")
}

trap 'exit 0' TERM INT
log "e2e infrastructure provider for namespace $ns (provisioning ${delay}s)"
while :; do
	step
	sleep "$period"
done

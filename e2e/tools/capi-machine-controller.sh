#!/usr/bin/env bash
# A small Cluster API machine controller for the e2e scenarios: just enough
# of what the MachineDeployment, MachineSet and Machine controllers plus an
# infrastructure provider do for the clusterapi driver to be tried through
# provreqd against the real apiserver (with e2e/crds/cluster-api-minimal.yaml).
#
#   capi-machine-controller.sh NAMESPACE
#
# Every CAPI_PERIOD seconds (default 0.5) it reads the MachineDeployments,
# MachineSets and Machines of NAMESPACE and:
#   * keeps one MachineSet NAME-ms per MachineDeployment NAME, owned by it,
#     with the MachineDeployment's spec.replicas;
#   * keeps that many Machines per MachineSet (generateName, finalizer
#     e2e.provreqd.io/machine); when there are too many it deletes those
#     marked cluster.x-k8s.io/delete-machine first, then failed ones, then
#     ones without a Node, then the newest;
#   * CAPI_PROVIDER_DELAY seconds (default 1) after a Machine is created,
#     gives it spec.providerID kwok://NAME - or, when its MachineDeployment
#     carries the annotation e2e.provreqd.io/fail-machines: "REASON: MESSAGE",
#     fails it (status.failureReason/failureMessage, phase Failed; it never
#     gets a Node) - only while fewer than e2e.provreqd.io/fail-count of its
#     Machines have failed, when that annotation is set;
#   * CAPI_NODE_DELAY seconds (default 2) after that, creates a kwok Node
#     NAME (capacity and labels from the capacity.cluster-autoscaler
#     annotations of the MachineDeployment; the kwok controller makes it
#     Ready) and sets status.nodeRef - unless the MachineDeployment carries
#     e2e.provreqd.io/hold-machines (the Machine stays Provisioned without a
#     Node, like an instance that never joins);
#   * CAPI_DELETE_DELAY seconds (default 1) after a Machine is deleted,
#     deletes its Node and removes the finalizer.
# Each action is logged on stdout with the time.
set -uo pipefail

ns=${1:?usage: capi-machine-controller.sh NAMESPACE}
period=${CAPI_PERIOD:-0.5}
pdelay=${CAPI_PROVIDER_DELAY:-1}
ndelay=${CAPI_NODE_DELAY:-2}
ddelay=${CAPI_DELETE_DELAY:-1}
fin=e2e.provreqd.io/machine
cap=capacity.cluster-autoscaler.kubernetes.io

log() { printf '%s %s\n' "$(date +%H:%M:%S.%N | cut -c1-12)" "$*"; }
k() { kubectl -n "$ns" "$@"; }

# One pass: the actions to take, one per line, tab-separated.
plan() {
	jq -r --argjson pd "$pdelay" --argjson nd "$ndelay" --argjson dd "$ddelay" '
	def t: fromdateiso8601;
	def ann($k): .metadata.annotations[$k] // "";
	(.items | map(select(.kind == "MachineDeployment"))) as $mds |
	(.items | map(select(.kind == "MachineSet"))) as $sets |
	(.items | map(select(.kind == "Machine"))) as $machines |
	(
	  ($mds[] | . as $md | ($md.metadata.name + "-ms") as $sn |
	    ($sets | map(select(.metadata.name == $sn)) | first) as $s |
	    if $s == null then ["create-set", $md.metadata.name, $sn, $md.metadata.uid, ($md.spec.replicas // 0)]
	    elif ($s.spec.replicas // 0) != ($md.spec.replicas // 0) then ["scale-set", $sn, ($md.spec.replicas // 0)]
	    else empty end),
	  ($sets[] | . as $s | $s.metadata.name as $sn | ($s.spec.replicas // 0) as $want |
	    ($machines | map(select(.metadata.labels["cluster.x-k8s.io/set-name"] == $sn
	                            and .metadata.deletionTimestamp == null))) as $active |
	    if ($active | length) < $want then
	      range($want - ($active | length)) | ["create-machine", $sn, $s.metadata.labels["cluster.x-k8s.io/deployment-name"]]
	    elif ($active | length) > $want then
	      $active | sort_by([(if ann("cluster.x-k8s.io/delete-machine") != "" then 0 else 1 end),
	                         (if .status.failureReason then 0 else 1 end),
	                         (if .status.nodeRef then 1 else 0 end),
	                         -(.metadata.creationTimestamp | t)])
	        | .[0:(length - $want)][] | ["delete-machine", .metadata.name]
	    else empty end),
	  ($mds[] | . as $md | $md.metadata.name as $mdn |
	    ($machines | map(select(.metadata.labels["cluster.x-k8s.io/deployment-name"] == $mdn))) as $mine |
	    ($mine | map(select(.status.failureReason != null)) | length) as $nfailed |
	    ($md | ann("e2e.provreqd.io/fail-machines")) as $fail |
	    ($md | ann("e2e.provreqd.io/fail-count")) as $fc |
	    ($mine | map(select(.metadata.deletionTimestamp == null and .status.failureReason == null
	                        and (.spec.providerID // "") == ""
	                        and (now - (.metadata.creationTimestamp | t)) >= $pd)) | sort_by(.metadata.name)) as $due |
	    range($due | length) as $i | $due[$i] |
	    if $fail != "" and ($fc == "" or $nfailed + $i < ($fc | tonumber)) then ["fail", .metadata.name, $fail]
	    else ["provide", .metadata.name] end),
	  ($machines[] | . as $m | ($m.metadata.labels["cluster.x-k8s.io/deployment-name"] // "") as $mdn |
	    ($mds | map(select(.metadata.name == $mdn)) | first // {}) as $md |
	    (now - ($m.metadata.creationTimestamp | t)) as $age |
	    if $m.metadata.deletionTimestamp != null then
	      if (now - ($m.metadata.deletionTimestamp | t)) >= $dd and (($m.metadata.finalizers // []) | index("'$fin'")) != null
	      then ["finalize", $m.metadata.name, ($m.status.nodeRef.name // "")] else empty end
	    elif $m.status.failureReason != null or ($m.spec.providerID // "") == "" then empty
	    elif $m.status.nodeRef == null and $age >= ($pd + $nd) and ($md | ann("e2e.provreqd.io/hold-machines")) == "" then
	      ["node", $m.metadata.name, ($md | ann("'$cap'/cpu")), ($md | ann("'$cap'/memory")),
	       ($md | ann("'$cap'/maxPods")), ($md | ann("'$cap'/labels"))]
	    else empty end)
	) | map(tostring) | @tsv'
}

make_node() {
	local name=$1 cpu=${2:-2} mem=${3:-4Gi} pods=${4:-110} labels=${5:-} kv l=""
	IFS=, read -ra kv <<<"$labels"
	for l in "${kv[@]}"; do
		[[ -n $l ]] && printf -v l '%s\n    %s: "%s"' "" "${l%%=*}" "${l#*=}" && labels_yaml+=$l
	done
	kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations: {kwok.x-k8s.io/node: fake}
  labels:
    kubernetes.io/hostname: "$name"
    type: kwok
    $fin: "$name"${labels_yaml}
spec:
  providerID: kwok://$name
status:
  capacity: {cpu: "$cpu", memory: "$mem", pods: "$pods"}
  allocatable: {cpu: "$cpu", memory: "$mem", pods: "$pods"}
EOF
}

step() {
	local act a b c d e out labels_yaml
	out=$(k get machinedeployments,machinesets,machines -o json 2>&1) || {
		log "list failed: $out"
		return
	}
	while IFS=$'\t' read -r act a b c d e; do
		case $act in
		create-set)
			log "MachineSet $b for MachineDeployment $a, replicas $d"
			k create -f - >/dev/null <<EOF || log "creating MachineSet $b failed"
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineSet
metadata:
  name: $b
  labels: {cluster.x-k8s.io/deployment-name: $a}
  ownerReferences:
  - {apiVersion: cluster.x-k8s.io/v1beta1, kind: MachineDeployment, name: $a, uid: $c, controller: true}
spec:
  clusterName: c1
  replicas: $d
  selector:
    matchLabels: {cluster.x-k8s.io/deployment-name: $a, cluster.x-k8s.io/set-name: $b}
EOF
			;;
		scale-set)
			log "MachineSet $a replicas $b"
			k patch machineset "$a" --type=merge -p "{\"spec\":{\"replicas\":$b}}" >/dev/null
			;;
		create-machine)
			out=$(k create -o name -f - <<EOF
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata:
  generateName: $a-
  finalizers: [$fin]
  labels: {cluster.x-k8s.io/deployment-name: $b, cluster.x-k8s.io/set-name: $a, cluster.x-k8s.io/cluster-name: c1}
spec:
  clusterName: c1
EOF
)
			log "Machine created: ${out#*/}"
			;;
		delete-machine)
			log "Machine $a deleted (MachineSet has too many)"
			k delete machine "$a" --wait=false >/dev/null 2>&1
			;;
		finalize)
			log "Machine $a finalized${b:+, Node $b deleted}"
			[[ -n $b ]] && kubectl delete node "$b" --ignore-not-found --wait=false >/dev/null 2>&1
			k patch machine "$a" --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null 2>&1
			;;
		fail)
			log "Machine $a failed: $b"
			k patch machine "$a" --subresource=status --type=merge -p "$(jq -nc --arg r "${b%%:*}" \
				--arg m "$(sed 's/^[^:]*: *//' <<<"$b")" '{status: {failureReason: $r, failureMessage: $m, phase: "Failed"}}')" \
				>/dev/null
			;;
		provide)
			log "Machine $a provisioned: kwok://$a"
			k patch machine "$a" --type=merge -p "{\"spec\":{\"providerID\":\"kwok://$a\"}}" >/dev/null
			;;
		node)
			labels_yaml=""
			make_node "$a" "$b" "$c" "$d" "$e"
			k patch machine "$a" --subresource=status --type=merge \
				-p "{\"status\":{\"nodeRef\":{\"kind\":\"Node\",\"name\":\"$a\"},\"phase\":\"Running\"}}" >/dev/null
			log "Machine $a has Node $a"
			;;
		esac
	done < <(plan <<<"$out")
}

trap 'exit 0' TERM INT
log "machine controller for namespace $ns (provider ${pdelay}s, node ${ndelay}s, delete ${ddelay}s)"
while :; do
	step
	sleep "$period"
done

#!/usr/bin/env bash
# Node auto-provisioning (ABI 1.5, the kwok driver's autoProvisioning) on
# the real control plane. One node group exists (2 CPUs, at most 2 nodes);
# two machine shapes are offered: gpu4 (8 CPUs, 4 nvidia.com/gpu, tainted
# nvidia.com/gpu) and cpu8 (8 CPUs). Every pod selects the scenario's own
# label, which the group and the shapes carry, so nodes of other scenarios
# never count for placement (they do count for the cluster-wide limits,
# which are set from what the cluster has when the scenario starts).
#
#  1. pods that need GPUs no group has  -> a new gpu4 group, Provisioned
#  2. pods that select a label and tolerate a taint no group has
#                                       -> a new cpu8 group whose nodes carry
#                                          that label and taint, Provisioned
#  3. pods that fit the group's template but need more nodes than its max
#                                       -> a new cpu8 group, Provisioned
#  4. a request past --cores-total      -> Failed (noRetry), the message names
#                                          the limit, no node and no group made
#  5. a request past --memory-total     -> the same, naming --memory-total
#  6. the cloud refuses the new group's increase (provreqd restarted with a
#     kwok fault) -> ScaleUpFailed, the group it created is deleted again
#  7. requests 1-3 deleted: their nodes are scaled down after the idle time,
#     then their empty groups are deleted after it too
#
# Prints bench=nap_new_group_provisioned_s (request created to Provisioned,
# case 1), bench=nap_limit_refused_without_nodes value=1 (cases 4 and 5
# refused with no node and no group made), bench=nap_empty_groups_left
# value=N (auto-provisioned groups left at the end; 0 expected).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr92
tag=$(t_unique nap)
grp=$(t_unique pa92)
PR_GROUPS+=("$grp")
cm=nap-groups

# The existing group: 2 CPUs, at most 2 nodes, with the scenario's label.
cat >"$PR_WORK/templates/$grp.yaml" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $grp
  annotations:
    provreqd.io/min-size: "0"
    provreqd.io/max-size: "2"
  labels:
    e2e-nap: $tag
    type: kwok
status:
  capacity: {cpu: "2", memory: 8Gi, pods: "110"}
EOF

# cloud.yaml: the templates, the shapes and (FAULTS) fault injection.
nap_config() {
	cat >"$PR_WORK/cloud.yaml" <<EOF
templateDir: $PR_WORK/templates
autoProvisioning:
  groupsConfigMap: $PR_NS/$cm
  shapes:
  - name: gpu4
    capacity: {cpu: "8", memory: 32Gi, pods: "110", nvidia.com/gpu: "4"}
    labels: {e2e-nap: $tag, type: kwok}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
    zones: [zone-a]
    pricePerHour: "3"
    maxSize: 4
  - name: cpu8
    capacity: {cpu: "8", memory: 32Gi, pods: "110"}
    labels: {e2e-nap: $tag, type: kwok}
    zones: [zone-a]
    pricePerHour: "0.4"
    maxSize: 6
${1:-}
EOF
}

# The auto-provisioned groups the API holds (the driver's ConfigMap).
nap_groups() {
	kubectl get configmap -n "$PR_NS" "$cm" -o json 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin).get("data") or {}; print("\n".join(sorted(d)))' 2>/dev/null || true
}
nap_group_count() { nap_groups | grep -c . || true; }
nap_group_count_is() { [[ "$(nap_group_count)" == "$1" ]]; }
# Nodes carrying the scenario's label (every group's and shape's).
tag_nodes() { kubectl get nodes -l "e2e-nap=$tag" -o name | grep -c . || true; }
# The node group (provreqd.io/node-group) of the request's nodes: the
# groups are new, so the one whose nodes appeared since GROUPS_BEFORE.
new_group() { comm -13 <(printf '%s\n' "$1" | sort) <(nap_groups | sort) | head -n 1; }

# Sum of a resource's capacity over every Node, in cores (cpu) or GiB
# (memory), rounded up: what the limits count.
cluster_total() {
	kubectl get nodes -o "jsonpath={range .items[*]}{.status.capacity.$1}{\"\\n\"}{end}" | awk -v r="$1" '
		function val(s,   n, u) {
			n = s + 0; u = s; sub(/^[0-9.]+/, "", u)
			if (u == "m") return n / 1000
			if (u == "Ki") return n * 1024
			if (u == "Mi") return n * 1048576
			if (u == "Gi") return n * 1073741824
			if (u == "Ti") return n * 1099511627776
			if (u == "k") return n * 1000
			if (u == "M") return n * 1000000
			if (u == "G") return n * 1000000000
			return n
		}
		NF { t += val($1) }
		END { if (r == "memory") t /= 1073741824; printf "%d\n", (t == int(t)) ? t : int(t) + 1 }'
}

# Nodes of earlier scenarios may still be going away: wait until the
# cluster's totals hold still for a few seconds before reading them.
pr_on_exit "kubectl delete nodes -l e2e-nap=$tag --wait=false >/dev/null 2>&1"
prev="" same=0
for ((i = 0; i < 60 && same < 3; i++)); do
	cur="$(cluster_total cpu)/$(cluster_total memory)"
	if [[ "$cur" == "$prev" ]]; then same=$((same + 1)); else same=0; fi
	prev=$cur
	sleep 1
done
base_cores=$(cluster_total cpu)
base_mem=$(cluster_total memory)
t_log "the cluster has $base_cores cores and $base_mem GiB before the scenario"
# Cases 1-3 add 4 nodes of 8 CPUs and 32 GiB (32 cores, 128 GiB). Case 4
# needs 3 more nodes (24 cores: 56 > 50); case 5's pods (31 GiB) fit no
# node there is and need 2 more (16 cores fit, 64 GiB: 192 > 160).
cores_max=$((base_cores + 50))
mem_max=$((base_mem + 160))

nap_config
pr_start --node-autoprovisioning --expander price,least-waste \
	--cores-total "0:$cores_max" --memory-total "0:$mem_max" \
	--scale-down-idle 15s --booking-ttl 10m --request-backoff-initial 2s --request-backoff-max 2s

# A PodTemplate: NAME CPU MEM [EXTRA [RESOURCES [SELECTOR]]]: EXTRA is spec
# lines (YAML, 4 spaces in),
# RESOURCES is extra requests (", nvidia.com/gpu: \"2\""), SELECTOR an
# extra nodeSelector entry ("team: x").
nap_template() {
	local name=$1 cpu=$2 mem=$3 extra=${4:-} res=${5:-} sel="e2e-nap: $tag"
	if [[ -n "${6:-}" ]]; then
		sel+=", $6"
	fi
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: v1
kind: PodTemplate
metadata:
  name: $name
template:
  spec:
    nodeSelector: {$sel}
$extra
    containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources:
        requests: {cpu: "$cpu", memory: "$mem"$res}
        limits: {cpu: "$cpu", memory: "$mem"$res}
EOF
}

# --- 1. GPUs no group has ----------------------------------------------
nap_template gpu 1 2Gi "    tolerations: [{key: nvidia.com/gpu, operator: Equal, value: present, effect: NoSchedule}]" \
	', nvidia.com/gpu: "2"'
before=$(nap_groups)
t0=$(date +%s.%N)
pr_request gpu atomic-scale-up gpu 2
t_wait 120 "gpu: Provisioned=True/CapacityIsProvisioned" pr_cond_is gpu Provisioned True/CapacityIsProvisioned
t1=$(date +%s.%N)
g1=$(new_group "$before")
t_contains "gpu: a new gpu4 group" "nap-gpu4-" "$g1"
t_eq "gpu: one node of it (2 pods x 2 GPUs on a 4-GPU node)" 1 "$(pr_count "$g1")"
t_contains "gpu: the request's details name the new group and its shape" "new node group $g1 of shape gpu4" \
	"$(kubectl get provreq -n "$PR_NS" gpu -o jsonpath='{.status.provisioningClassDetails.autoProvisionedNodeGroup}')"
echo "bench=nap_new_group_provisioned_s value=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"

# --- 2. a label and a taint no group has ---------------------------------
nap_template sep 1 2Gi "    tolerations: [{key: team, operator: Equal, value: $tag, effect: NoSchedule}]" "" "team: $tag"
before=$(nap_groups)
pr_request sep atomic-scale-up sep 3
t_wait 120 "sep: Provisioned=True/CapacityIsProvisioned" pr_cond_is sep Provisioned True/CapacityIsProvisioned
g2=$(new_group "$before")
t_contains "sep: a new cpu8 group" "nap-cpu8-" "$g2"
n2=$(pr_nodes "$g2" | head -n 1)
t_eq "sep: its nodes carry the label" "$tag" "$(kubectl get node "$n2" -o jsonpath='{.metadata.labels.team}')"
t_eq "sep: and the taint" "team=$tag:NoSchedule" \
	"$(kubectl get node "$n2" -o jsonpath='{range .spec.taints[*]}{.key}={.value}:{.effect}{end}')"

# --- 3. more nodes than the group's max ---------------------------------
nap_template wide 1500m 2Gi ""
before=$(nap_groups)
pr_request wide atomic-scale-up wide 6
t_wait 120 "wide: Provisioned=True/CapacityIsProvisioned" pr_cond_is wide Provisioned True/CapacityIsProvisioned
g3=$(new_group "$before")
t_contains "wide: a new cpu8 group, not the 2-node group" "nap-cpu8-" "$g3"
t_eq "wide: 2 nodes of it (5 pods of 1.5 CPUs fit 8)" 2 "$(pr_count "$g3")"
t_eq "wide: the existing group was not touched" 0 "$(pr_count "$grp")"
t_eq "three groups were made" 3 "$(nap_group_count)"

# --- 4. past --cores-total ----------------------------------------------
refused_ok=1
nodes_before=$(tag_nodes)
nap_template many 7 4Gi ""
pr_request many atomic-scale-up many 3 noRetry=true
t_wait 60 "many: Failed" bash -c "[[ \"\$(kubectl get provreq -n $PR_NS many -o 'jsonpath={.status.conditions[?(@.type==\"Failed\")].status}')\" == True ]]"
msg=$(pr_msg many Failed)
t_contains "many: the message names --cores-total" "--cores-total" "$msg"
t_contains "many: and what the request needs" "24 cores more" "$msg"
t_contains "many: and the limit" "$cores_max cores at most" "$msg"
[[ "$(tag_nodes)" == "$nodes_before" ]] || refused_ok=0
[[ "$(nap_group_count)" == 3 ]] || refused_ok=0
t_eq "many: no node was made" "$nodes_before" "$(tag_nodes)"
t_eq "many: no group was made" 3 "$(nap_group_count)"

# --- 5. past --memory-total ---------------------------------------------
nap_template fat 1 31Gi ""
pr_request fat atomic-scale-up fat 2 noRetry=true
t_wait 60 "fat: Failed" bash -c "[[ \"\$(kubectl get provreq -n $PR_NS fat -o 'jsonpath={.status.conditions[?(@.type==\"Failed\")].status}')\" == True ]]"
msg=$(pr_msg fat Failed)
t_contains "fat: the message names --memory-total" "--memory-total" "$msg"
[[ "$(tag_nodes)" == "$nodes_before" ]] || refused_ok=0
[[ "$(nap_group_count)" == 3 ]] || refused_ok=0
t_eq "fat: no node was made" "$nodes_before" "$(tag_nodes)"
t_eq "fat: no group was made" 3 "$(nap_group_count)"
echo "bench=nap_limit_refused_without_nodes value=$refused_ok"

# --- 6. a plan that rolls back takes its new group with it --------------
pr_stop
nap_config "faults: [{operation: atomic-increase, fail: \"e2e stockout\", times: 1}]"
pr_start --node-autoprovisioning --expander price,least-waste \
	--cores-total "0:$cores_max" --memory-total "0:$mem_max" \
	--scale-down-idle 15s --booking-ttl 10m --request-backoff-initial 2s --request-backoff-max 2s
nap_template rb 1 2Gi "    tolerations: [{key: rb, operator: Equal, value: $tag, effect: NoSchedule}]" "" "rb: $tag"
pr_request rb atomic-scale-up rb 1
t_wait 60 "rb: Provisioned=False/ScaleUpFailed" pr_cond_is rb Provisioned False/ScaleUpFailed
t_contains "rb: the cloud's refusal is the cause" "e2e stockout" "$(pr_msg rb Provisioned)"
t_wait 60 "rb: the group it created is deleted again" nap_group_count_is 3
t_eq "rb: no node of it is left" 0 "$(kubectl get nodes -l "rb=$tag" -o name | grep -c . || true)"
kubectl delete provreq -n "$PR_NS" rb --wait=false >/dev/null

# --- 7. empty groups go after the idle time ------------------------------
kubectl delete provreq -n "$PR_NS" gpu sep wide many fat --wait=false >/dev/null
t_wait 180 "the requests' nodes are scaled down" bash -c "[[ \$(kubectl get nodes -l e2e-nap=$tag -o name | grep -c .) == 0 ]]"
t_wait 120 "their empty groups are deleted" nap_group_count_is 0
left=$(nap_group_count)
echo "bench=nap_empty_groups_left value=$left"
t_eq "no auto-provisioned group is left" 0 "$left"
t_done

#!/usr/bin/env bash
# The kwok driver against the real control plane, loaded through the same
# loader and host services as provreqd (e2e/tools/driver-e2e): increasing a
# group by 5 creates 5 Nodes that the kwok controller makes Ready, deleting
# removes exactly the named Nodes, min/max are enforced, and each fault
# injection mode leaves the state it describes.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

tool="$PROVREQD_BUILDDIR/e2e/tools/driver-e2e"
so="$PROVREQD_BUILDDIR/cloud/kwok/.libs/kwok.so"
[[ -x "$tool" && -f "$so" ]] || t_fail "build first: $tool and $so are missing (make all)"

grp=$(t_unique kd)
other=$(t_unique kdo)
small=$(t_unique kds)
work=$(mktemp -d "${TMPDIR:-/tmp}/provreqd-e2e-kwok.XXXXXX")
label=provreqd.io/node-group

cleanup() {
	for g in "$grp" "$other" "$small"; do
		kubectl delete nodes -l "$label=$g" --wait=false >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

# Node templates: the shipped general-purpose and GPU groups under unique
# names, and a group with min 2 / max 3.
mkdir -p "$work/templates"
sed "s/^  name: general$/  name: $grp/" "$PROVREQD_SRCDIR/templates/nodegroups/general.yaml" >"$work/templates/a.yaml"
sed "s/^  name: gpu$/  name: $other/" "$PROVREQD_SRCDIR/templates/nodegroups/gpu.yaml" >"$work/templates/b.yaml"
cat >"$work/templates/c.yaml" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $small
  annotations: {provreqd.io/min-size: "2", provreqd.io/max-size: "3"}
status:
  capacity: {cpu: "2", memory: 4Gi, pods: "110"}
EOF

# drv CONFIG-EXTRA ARGS...: run driver-e2e with the templates plus extra
# config lines.
drv() {
	local extra=$1
	shift
	printf 'templateDir: %s\n%s' "$work/templates" "$extra" >"$work/config.yaml"
	"$tool" --driver "$so" --config "$work/config.yaml" "$@"
}

nodes_of() { kubectl get nodes -l "$label=$1" -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}' | sort; }
count_of() { nodes_of "$1" | grep -c . || true; }
ready_count() {
	kubectl get nodes -l "$label=$1" \
		-o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
		grep -c '^True$' || true
}
all_ready() { [[ "$(ready_count "$1")" == "$2" ]]; }

# --- groups
out=$(drv "" groups)
t_contains "the group is listed with its sizes" "$grp min=0 max=10 target=0" "$out"
t_contains "the min/max annotations are read" "$small min=2 max=3 target=0" "$out"

# --- increase by 5: five Nodes, made Ready by kwok
t_eq "increase by 5" ok "$(drv "" increase "$grp" 5)"
t_eq "5 Nodes exist" 5 "$(count_of "$grp")"
t_wait 60 "kwok makes all 5 Ready" all_ready "$grp" 5
first=$(nodes_of "$grp" | head -n1)
[[ "$first" =~ ^$grp-[bcdfghjklmnpqrstvwxz2456789]{5}$ ]] || t_fail "node name $first is not $grp-<5 chars>"
t_pass "nodes are named <group>-<5 random chars>"
t_eq "kwok fake-node annotation" fake \
	"$(kubectl get node "$first" -o 'jsonpath={.metadata.annotations.kwok\.x-k8s\.io/node}')"
t_eq "providerID" "kwok://$first" "$(kubectl get node "$first" -o 'jsonpath={.spec.providerID}')"
t_eq "allocatable from the template" "3900m 15Gi" \
	"$(kubectl get node "$first" -o 'jsonpath={.status.allocatable.cpu} {.status.allocatable.memory}')"
t_eq "template labels" kwok-general-4x16 \
	"$(kubectl get node "$first" -o 'jsonpath={.metadata.labels.node\.kubernetes\.io/instance-type}')"
inst=$(drv "" instances "$grp")
t_eq "instances: 5 Running" 5 "$(grep -c ' Running none -$' <<<"$inst")"
t_contains "target size 5" "$grp min=0 max=10 target=5" "$(drv "" groups)"
t_eq "the node's group" "$grp" "$(drv "" group-for-node "$first")"

# --- delete exactly the named ones
mapfile -t before < <(nodes_of "$grp")
t_eq "delete 2 named nodes" ok "$(drv "" delete "$grp" "${before[1]}" "${before[3]}")"
t_wait 30 "${before[1]} is gone" k_gone node "${before[1]}"
t_wait 30 "${before[3]} is gone" k_gone node "${before[3]}"
t_eq "exactly the other 3 remain" "$(printf '%s\n' "${before[0]}" "${before[2]}" "${before[4]}")" "$(nodes_of "$grp")"

# A node of another group is refused, and nothing in that call is deleted.
t_eq "a GPU group node" ok "$(drv "" increase "$other" 1)"
foreign=$(nodes_of "$other")
t_eq "GPU nodes carry the taint" "nvidia.com/gpu=present:NoSchedule" \
	"$(kubectl get node "$foreign" -o 'jsonpath={.spec.taints[0].key}={.spec.taints[0].value}:{.spec.taints[0].effect}')"
out=$(drv "" delete "$grp" "${before[0]}" "$foreign" 2>&1 || true)
t_contains "deleting another group's node is refused" "ERR EINVAL" "$out"
t_contains "with the reason" "is not in group $grp" "$out"
t_eq "nothing was deleted" 3 "$(count_of "$grp")"
t_eq "the other group's node is still there" "$foreign" "$(nodes_of "$other")"

# --- max and min
out=$(drv "" increase "$grp" 8 2>&1 || true)
t_contains "increase past max 10 is refused" "ERR ERANGE" "$out"
t_contains "with the reason" "would exceed its maximum size 10" "$out"
t_eq "no node was created" 3 "$(count_of "$grp")"
t_eq "the small group grows to its max 3" ok "$(drv "" increase "$small" 3)"
mapfile -t sm < <(nodes_of "$small")
out=$(drv "" delete "$small" "${sm[0]}" "${sm[1]}" 2>&1 || true)
t_contains "deleting below min 2 is refused" "below its minimum size 2" "$out"
t_eq "all 3 remain" 3 "$(count_of "$small")"
t_eq "deleting down to min works" ok "$(drv "" delete "$small" "${sm[0]}")"
t_wait 30 "${sm[0]} is gone" k_gone node "${sm[0]}"

# --- fault: fail the whole call
out=$(drv $'faults:\n- {operation: increase, group: '"$grp"$', fail: quota exhausted}\n' increase "$grp" 2 2>&1 || true)
t_contains "an injected failure fails the call" "ERR EIO" "$out"
t_contains "with the configured message" "quota exhausted" "$out"
t_eq "and creates nothing" 3 "$(count_of "$grp")"

# --- fault: 2 of 5 succeed; the 3 others are out-of-resources instances
# until they are deleted (one) or the target is decreased (two)
cfg=$'faults:\n- {operation: increase, group: '"$grp"$', succeed: 2, errorCode: QUOTA_EXCEEDED}\n'
out=$(drv "$cfg" increase "$grp" 5 then groups then instances "$grp")
t_eq "partial increase: 2 more Nodes" 5 "$(count_of "$grp")"
t_contains "target counts the refused nodes" "$grp min=0 max=10 target=8" "$out"
t_eq "3 out-of-resources instances" 3 "$(grep -c ' - Creating OutOfResources QUOTA_EXCEEDED$' <<<"$out")"
t_wait 60 "the 2 created Nodes become Ready" all_ready "$grp" 5
out=$(drv "$cfg" increase "$grp" 5 then delete-errored "$grp" 1 then groups then instances "$grp" \
	then decrease "$grp" 2 then groups then instances "$grp")
t_contains "deleting one errored instance lowers the target" "$grp min=0 max=10 target=9" "$out"
t_contains "decreasing by 2 cancels the rest" "$grp min=0 max=10 target=7" "$out"
t_eq "no errored instance left" 0 "$(tail -n 7 <<<"$out" | grep -c OutOfResources || true)"
t_eq "real Nodes untouched by the decrease" 7 "$(count_of "$grp")"

# --- fault: atomic increase with room for only 2 of 3: none are kept
out=$(drv $'faults:\n- {operation: atomic-increase, group: '"$grp"$', succeed: 2}\n' atomic-increase "$grp" 3 2>&1 || true)
t_contains "atomic increase fails" "ERR EAGAIN" "$out"
t_contains "and says why" "only 2 of 3 nodes could be created" "$out"
t_wait 30 "the 2 it created are deleted again" bash -c "[[ \$(kubectl get nodes -l $label=$grp -o name | wc -l) == 7 ]]"
t_eq "atomic increase of 3 without faults" ok "$(drv "" atomic-increase "$grp" 3)"
t_eq "10 Nodes" 10 "$(count_of "$grp")"

# --- fault: delay, then the call does its work
t_eq "a delayed delete still deletes" ok \
	"$(drv $'faults:\n- {operation: delete, delayMs: 300}\n' delete "$grp" "$(nodes_of "$grp" | head -n1)")"
t_wait 30 "9 Nodes left" bash -c "[[ \$(kubectl get nodes -l $label=$grp -o name | wc -l) == 9 ]]"

# --- bad configuration is a clear load error
out=$("$tool" --driver "$so" groups 2>&1 || true)
t_contains "no config: refused at load" "kwok config is empty" "$out"
t_done

#!/usr/bin/env bash
# ResourcePool population from kwok nodes labelled pool=gold, driven by the
# pools-e2e tool (the reconciler over the real REST client): a pool follows
# nodes joining and leaving; a pool whose claims exceed the nodes is clamped
# with a Warning Event; unmanaged keys and an un-annotated pool are left
# alone; bad annotations give Warning Events and no change; opting out
# leaves the values; 500 node changes in a burst give a few writes.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

tool="$PROVREQD_BUILDDIR/e2e/tools/pools-e2e"
[[ -x "$tool" ]] || t_fail "$tool is not built (make all)"
kubectl get crd resourcepools.capsule.clastix.io >/dev/null 2>&1 ||
	t_fail "the ResourcePool CRD (crd/capsule-resourcepools.yaml) is not installed"

id=$(t_unique pools)
tmp=$(mktemp -d)
cleanup() {
	kubectl delete resourcepools -l "e2e-pools=$id" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	kubectl delete nodes -l "e2e-pools=$id" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# node NAME POOL CPU MEMORY [EXTRA-ALLOCATABLE-LINE]
node() {
	cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, pool: $2, e2e-pools: $id}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  capacity: {cpu: "$3", memory: $4, pods: "110"${5:+, $5}}
  allocatable: {cpu: "$3", memory: $4, pods: "110"${5:+, $5}}
---
EOF
}

# pool NAME ANNOTATIONS-FLOW HARD-FLOW
pool() {
	cat <<EOF
apiVersion: capsule.clastix.io/v1beta2
kind: ResourcePool
metadata:
  name: $1
  labels: {e2e-pools: $id}
  annotations: $2
spec:
  selectors: [{matchLabels: {capsule.clastix.io/tenant: $id}}]
  quota:
    hard: $3
---
EOF
}

hard() { kubectl get resourcepool "$1" -o "jsonpath={.spec.quota.hard.${2//./\\.}}"; }
rv() { kubectl get resourcepool "$1" -o 'jsonpath={.metadata.resourceVersion}'; }
events() {
	kubectl get events -n default --field-selector "involvedObject.name=$1,reason=$2" \
		-o 'jsonpath={range .items[*]}{.type}: {.message}{"\n"}{end}'
}
sync() { "$tool" sync; }
ready() {
	kubectl wait --for=condition=Ready "$@" --timeout=60s >/dev/null ||
		t_fail "nodes $* did not become Ready"
}

sel="pool=gold,e2e-pools=$id"
{
	node "$id-g1" gold 4 16Gi
	node "$id-g2" gold 4 16Gi '"nvidia.com/gpu": "2"'
	node "$id-s1" silver 64 256Gi
} | kubectl create -f - >/dev/null
ready "node/$id-g1" "node/$id-g2" "node/$id-s1"

{
	pool "gold-$id" "{provreqd.io/populate-from-nodes: \"$sel\"}" '{}'
	pool "mixed-$id" "{provreqd.io/populate-from-nodes: \"$sel\", provreqd.io/populate-resources: cpu}" \
		'{requests.storage: 5Gi, count/persistentvolumeclaims: "3"}'
	pool "plain-$id" '{team: x}' '{requests.cpu: "1"}'
	pool "busy-$id" "{provreqd.io/populate-from-nodes: \"$sel\", provreqd.io/populate-resources: \"cpu,memory\"}" \
		'{requests.cpu: "20"}'
	pool "bad-$id" "{provreqd.io/populate-from-nodes: \"$sel\", provreqd.io/populate-headroom: \"cpu=lots\"}" \
		'{requests.cpu: "1"}'
	pool "badsel-$id" "{provreqd.io/populate-from-nodes: \"pool in (gold\"}" '{requests.cpu: "1"}'
} | kubectl create -f - >/dev/null
kubectl patch resourcepool "busy-$id" --subresource=status --type=merge \
	-p '{"status":{"allocation":{"used":{"requests.cpu":"12"}}}}' >/dev/null
plain_rv=$(rv "plain-$id")
bad_rv=$(rv "bad-$id")

out=$(sync)
t_log "first sync: $out"
t_eq "gold pool: requests.cpu is the gold nodes' total" 8 "$(hard "gold-$id" requests.cpu)"
t_eq "gold pool: requests.memory" 32Gi "$(hard "gold-$id" requests.memory)"
t_eq "gold pool: pods" 220 "$(hard "gold-$id" pods)"
t_eq "gold pool: the extended resource" 2 "$(hard "gold-$id" requests.nvidia.com/gpu)"
t_contains "gold pool: last population recorded" "nodes=2,time=" \
	"$(kubectl get resourcepool "gold-$id" -o 'jsonpath={.metadata.annotations.provreqd\.io/last-population}')"
t_contains "gold pool: a Normal Populated Event" "Normal: populated from 2 node(s)" "$(events "gold-$id" Populated)"
t_eq "mixed pool: the listed key is populated" 8 "$(hard "mixed-$id" requests.cpu)"
t_eq "mixed pool: an unmanaged key is untouched" 5Gi "$(hard "mixed-$id" requests.storage)"
t_eq "mixed pool: another unmanaged key is untouched" 3 "$(hard "mixed-$id" count/persistentvolumeclaims)"
t_eq "mixed pool: memory is not listed, not written" "" "$(hard "mixed-$id" requests.memory)"
t_eq "un-annotated pool: not written at all" "$plain_rv" "$(rv "plain-$id")"
t_eq "busy pool: clamped to the claimed 12" 12 "$(hard "busy-$id" requests.cpu)"
t_contains "busy pool: a Warning names key, node total and claim" \
	"Warning: requests.cpu: the selected nodes provide 8 (8 after headroom/factor) but claims hold 12" \
	"$(events "busy-$id" PopulationClamped)"
t_eq "bad headroom: pool unchanged" "$bad_rv" "$(rv "bad-$id")"
t_contains "bad headroom: a Warning names the annotation" \
	"Warning: provreqd.io/populate-headroom: item \"cpu=lots\": bad quantity" \
	"$(events "bad-$id" InvalidPopulateAnnotation)"
t_contains "bad selector: a Warning names the annotation" \
	"Warning: provreqd.io/populate-from-nodes: bad label selector" \
	"$(events "badsel-$id" InvalidPopulateAnnotation)"
t_eq "bad selector: pool unchanged" 1 "$(hard "badsel-$id" requests.cpu)"

out=$(sync)
t_contains "a second sync with nothing changed writes nothing" "writes=0 " "$out"

# A node joins, another leaves, a gold node is cordoned.
node "$id-g3" gold 2 4Gi | kubectl create -f - >/dev/null
ready "node/$id-g3"
sync >/dev/null
t_eq "gold pool follows a node joining" 10 "$(hard "gold-$id" requests.cpu)"
t_eq "... and its memory" 36Gi "$(hard "gold-$id" requests.memory)"
kubectl delete node "$id-g2" >/dev/null
sync >/dev/null
t_eq "gold pool follows a node leaving" 6 "$(hard "gold-$id" requests.cpu)"
t_eq "the GPUs left every node and nobody claims them: zero, not deleted" 0 \
	"$(hard "gold-$id" requests.nvidia.com/gpu)"
kubectl cordon "$id-g3" >/dev/null
sync >/dev/null
t_eq "a cordoned node does not count" 4 "$(hard "gold-$id" requests.cpu)"
t_eq "busy pool stays at the claimed amount" 12 "$(hard "busy-$id" requests.cpu)"

# Opting out: the values stay where they are.
kubectl annotate resourcepool "gold-$id" provreqd.io/populate-from-nodes- >/dev/null
kubectl uncordon "$id-g3" >/dev/null
sync >/dev/null
t_eq "after opting out the last value stays" 4 "$(hard "gold-$id" requests.cpu)"
t_eq "the mixed pool still follows" 6 "$(hard "mixed-$id" requests.cpu)"

# A burst: 500 nodes join a fresh pool while the reconciler polls.
pool "burst-$id" "{provreqd.io/populate-from-nodes: \"e2e-burst=$id\", provreqd.io/populate-resources: cpu}" '{}' |
	kubectl create -f - >/dev/null
for i in $(seq -w 1 500); do
	node "$id-b$i" burst 1 1Gi
done | sed "s/pool: burst, /pool: burst, e2e-burst: $id, /" >"$tmp/burst.yaml"
"$tool" --debounce-ms 10000 run 15 600 >"$tmp/run.out" 2>"$tmp/run.err" &
runner=$!
t0=$SECONDS
kubectl create -f "$tmp/burst.yaml" >/dev/null
t_wait 300 "500 burst nodes Ready" \
	bash -c "[[ \$(kubectl get nodes -l e2e-burst=$id -o jsonpath='{range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}' | grep -c True) == 500 ]]"
burst_s=$((SECONDS - t0))
wait "$runner" || t_fail "pools-e2e run failed: $(cat "$tmp/run.err")"
t_log "burst of $burst_s s: $(head -1 "$tmp/run.out")"
t_eq "the burst pool holds all 500 nodes' cpu" 500 "$(hard "burst-$id" requests.cpu)"
writes=$(awk -v p="burst-$id" '$1 == "patches" && $2 == p { print $3 }' "$tmp/run.out")
limit=$((burst_s / 10 + 3))
if ((writes >= 1 && writes <= limit)); then
	t_pass "1000 node changes (500 created, 500 turned Ready) in ${burst_s}s gave $writes writes (at most $limit at one per 10s)"
else
	t_fail "burst writes: expected 1..$limit, got '$writes'"
fi
kubectl delete nodes -l "e2e-burst=$id" --wait=false >/dev/null
t_done

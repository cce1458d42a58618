#!/usr/bin/env bash
# What simulate says is what the cluster does: every bundled example under
# templates/examples (the simulate example, with and without node
# auto-provisioning, and the DRA example) runs through `provreqd run` on
# the real control plane with the kwok driver and the example's cloud
# config, and through `provreqd simulate` on a dump of the same cluster
# taken right before run started (`kubectl get ... -A -o yaml`, so both see
# the same Nodes, Pods, PodTemplates, requests and creation times, the
# leftovers of earlier scenarios included) with the same flags, for as long
# as the real run took. Then each request's final conditions (type, status,
# reason) and each node group's final size (the Nodes labelled with the
# group on the apiserver; simulate's target) must agree; any disagreement
# fails with both answers. Auto-provisioned groups are compared by shape
# (their names carry a hash).
#   bench=simulate_real_examples: examples compared
#   bench=simulate_real_disagreements: requests or groups that differ (0)
# Also, the same invalid objects on both sides: a Node with a taint twice
# and a PodTemplate without a template are refused by kube-apiserver and
# by simulate's in-memory API alike (simulate ignores the Node with the
# apiserver's message, refuses the what-if file).
# Broken simulations caught: one whose in-memory API accepts what the
# apiserver refuses (the arm64 auto-provisioning example once succeeded in
# simulate and never on a cluster: 422, a taint twice; and the taint check
# above fails if memapi stops validating taints), one that plans or orders
# requests differently from run, one whose driver grows groups differently.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr96
EX="$PROVREQD_SRCDIR/templates/examples"
NAP_CM=kube-system/provreqd-kwok-groups
examples=0
disagree=0

# ex_objects FILE: the example's objects as a JSON list for a real
# cluster: no creationTimestamp or status of Pods (the apiserver sets them),
# Nodes made kwok's fake nodes (kwok keeps them Ready).
ex_objects() {
	kubectl create --dry-run=client -f "$1" -o json |
		jq -s '[.[] | if .kind == "List" then .items[] else . end]
		    | map(del(.metadata.creationTimestamp)
			  | if .kind == "Node" then
				.metadata.annotations["kwok.x-k8s.io/node"] = "fake"
				| .spec.providerID = "kwok://" + .metadata.name
			    elif .kind == "Pod" then del(.status) else . end)'
}

# ex_cleanup JSON: delete what ex_load made, and the groups' Nodes.
ex_cleanup() {
	local objs=$1 nss ns
	nss=$(jq -r '.[] | select(.metadata.namespace != null) | .metadata.namespace' <<<"$objs" | sort -u)
	for ns in $nss; do
		kubectl delete provreq,podtemplates,pods,resourceclaimtemplates,resourceclaims --all -n "$ns" \
			--wait=false >/dev/null 2>&1 || true
	done
	jq -c '.[] | select(.metadata.namespace == null)' <<<"$objs" | while read -r o; do
		kubectl delete "$(jq -r .kind <<<"$o")" "$(jq -r .metadata.name <<<"$o")" --wait=false \
			>/dev/null 2>&1 || true
	done
	kubectl delete nodes -l provreqd.io/node-group --wait=false >/dev/null 2>&1 || true
	kubectl -n "${NAP_CM%%/*}" delete configmap "${NAP_CM#*/}" >/dev/null 2>&1 || true
}

# ex_load JSON: namespaces, then every object but the requests, then the
# requests one second apart in the example's creationTimestamp order (so
# run and the dump agree on which is older).
ex_load() {
	local objs=$1 ns o
	for ns in $(jq -r '.[] | select(.metadata.namespace != null) | .metadata.namespace' <<<"$objs" | sort -u); do
		kubectl get namespace "$ns" >/dev/null 2>&1 || kubectl create namespace "$ns" >/dev/null
	done
	jq '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind != "ProvisioningRequest")]}' <<<"$objs" |
		kubectl create -f - >/dev/null
	while read -r o; do
		kubectl create -f - <<<"$o" >/dev/null
		sleep 1
	done < <(jq -c '.[] | select(.kind == "ProvisioningRequest")' <<<"$objs")
}

# The requests' conditions and the groups' sizes, one line each, sorted:
#   request NS/NAME TYPE STATUS REASON
#   group NAME SIZE   (auto-provisioned: nap-SHAPE)
real_state() {
	local objs=$1 groups=$2
	kubectl get provreq -A -o json | jq -r --argjson want "$(jq '[.[] | select(.kind == "ProvisioningRequest")
		| .metadata.namespace + "/" + .metadata.name]' <<<"$objs")" '
		.items[] | (.metadata.namespace + "/" + .metadata.name) as $k | select(any($want[]; . == $k))
		| .status.conditions[]? | "request \($k) \(.type) \(.status) \(.reason)"'
	for g in $groups; do
		echo "group $g $(kubectl get nodes -l "provreqd.io/node-group=$g" -o name | grep -c . || true)"
	done
	kubectl get nodes -l provreqd.io/node-group -o json |
		jq -r '.items[].metadata.labels["provreqd.io/node-group"] | select(startswith("nap-"))' |
		sed 's/-[0-9a-f]\{8\}$//' | sort | uniq -c |
		awk '{ print "group " $2 " " $1 }'
}

sim_state() {
	jq -r '
		(.transitions | group_by(.namespace + "/" + .name + " " + .type)[] | last
		 | "request \(.namespace)/\(.name) \(.type) \(.status) \(.reason)"),
		(.nodeGroups[] | select(.autoProvisioned | not) | "group \(.group) \(.target)"),
		([.nodeGroups[] | select(.autoProvisioned and .target > 0)
		  | {s: (.group | sub("-[0-9a-f]{8}$"; "")), t: .target}] | group_by(.s)[]
		 | "group \(.[0].s) \(map(.t) | add)")' "$1"
}

# settled JSON: every request of the example has a final-looking state (no
# scale-up in progress), for t_wait.
settled() {
	local s
	s=$(real_state "$1" "$2")
	[[ -n "$s" ]] && ! grep -q "Provisioned False ScaleUpInProgress\|Provisioned False WaitingFor\|Provisioned Unknown" <<<"$s" &&
		[[ "$s" == "$(cat "$PR_WORK/last-state" 2>/dev/null)" ]] && return 0
	printf '%s\n' "$s" >"$PR_WORK/last-state"
	sleep 5
	return 1
}

# example NAME FILE CLOUDCONFIG GROUPS [FLAGS...]
example() {
	local name=$1 file=$2 cc=$3 groups=$4 objs kinds="nodes,pods,podtemplates,provisioningrequests.autoscaling.x-k8s.io" t0 t1
	shift 4
	objs=$(ex_objects "$file")
	ex_cleanup "$objs"
	if jq -e '.[] | select(.apiVersion | startswith("resource.k8s.io/"))' <<<"$objs" >/dev/null; then
		kinds+=",resourceslices,deviceclasses,resourceclaimtemplates,resourceclaims"
	fi
	ex_load "$objs"
	for n in $(jq -r '.[] | select(.kind == "Node") | .metadata.name' <<<"$objs"); do
		kubectl wait --for=condition=Ready "node/$n" --timeout=60s >/dev/null ||
			t_fail "$name: the example's Node $n is not Ready (kwok)"
	done
	kubectl get "$kinds" -A -o yaml >"$PR_WORK/$name-dump.yaml"
	rm -f "$PR_WORK/last-state"
	t0=$(date +%s)
	PR_DRIVER_SO=""
	cp "$cc" "$PR_WORK/cloud.yaml"
	# A relative templateDir is relative to the config file; make it the
	# example's for run as simulate does.
	sed -i "s|^templateDir: *\(\.\.*/.*\)$|templateDir: $(dirname "$cc")/\1|" "$PR_WORK/cloud.yaml"
	pr_start "$@"
	t_wait 300 "$name: run settled" settled "$objs" "$groups"
	t1=$(date +%s)
	real_state "$objs" "$groups" | sort >"$PR_WORK/$name-real.txt"
	pr_stop
	"$PR_BIN" simulate --cluster "$PR_WORK/$name-dump.yaml" --cloud-config "$PR_WORK/cloud.yaml" \
		--until "$((t1 - t0 + 5))s" -o json "$@" >"$PR_WORK/$name-sim.json" 2>"$PR_WORK/$name-sim.err" ||
		t_fail "$name: simulate failed: $(tail -5 "$PR_WORK/$name-sim.err")"
	sim_state "$PR_WORK/$name-sim.json" | grep -E "^group |^request ($(jq -r '[.[] | select(.kind == "ProvisioningRequest")
		| .metadata.namespace + "/" + .metadata.name] | join("|")' <<<"$objs")) " | sort >"$PR_WORK/$name-sim.txt"
	examples=$((examples + 1))
	if ! diff "$PR_WORK/$name-real.txt" "$PR_WORK/$name-sim.txt" >"$PR_WORK/$name.diff"; then
		disagree=$((disagree + $(grep -c '^[<>]' "$PR_WORK/$name.diff")))
		t_log "$name: real (<) and simulate (>) disagree:"
		sed 's/^/    /' "$PR_WORK/$name.diff"
	else
		t_pass "$name: simulate agrees with the real run on $(grep -c . "$PR_WORK/$name-real.txt") conditions and group sizes"
	fi
	ex_cleanup "$objs"
	rm -f "$PR_WORK/cloud.yaml"
}
pr_on_exit 'ex_cleanup "$(ex_objects "$EX/simulate/cluster.yaml")"; ex_cleanup "$(ex_objects "$EX/dra/cluster.yaml")"'

example simulate "$EX/simulate/cluster.yaml" "$EX/simulate/cloud-config.yaml" "general gold gpu"
grep -q "^request team-a/arm-batch Provisioned False CapacityIsNotFound$" "$PR_WORK/simulate-real.txt" ||
	t_fail "simulate: arm-batch should find no capacity without auto-provisioning: $(cat "$PR_WORK/simulate-real.txt")"
example simulate-nap "$EX/simulate/cluster.yaml" "$EX/simulate/cloud-config.yaml" "general gold gpu" \
	--node-autoprovisioning
grep -q "^request team-a/arm-batch Provisioned True CapacityIsProvisioned$" "$PR_WORK/simulate-nap-real.txt" ||
	t_fail "simulate-nap: arm-batch is not Provisioned on the real cluster: $(cat "$PR_WORK/simulate-nap-real.txt")"
t_pass "the arm64 auto-provisioning example is Provisioned on the real cluster"
example dra "$EX/dra/cluster.yaml" "$EX/dra/cloud-config.yaml" "dra-gpu"

# The same invalid objects refused on both sides.
bad_node="$PR_WORK/taint-twice.yaml"
cat >"$bad_node" <<EOF
apiVersion: v1
kind: Node
metadata: {name: $(t_unique taint-twice)}
spec:
  taints:
  - {key: example.com/dedicated, value: a, effect: NoSchedule}
  - {key: example.com/dedicated, value: b, effect: NoSchedule}
EOF
real_err=$(kubectl create -f "$bad_node" 2>&1) && t_fail "kube-apiserver took a Node with a taint twice"
t_contains "kube-apiserver refuses a Node with a taint twice" "must be unique by key and effect pair" "$real_err"
"$PR_BIN" simulate --cluster "$bad_node" --cloud-config "$EX/simulate/cloud-config.yaml" --until 1m \
	>/dev/null 2>"$PR_WORK/taint.err" || true
t_contains "simulate refuses it with the apiserver's reason" "must be unique by key and effect pair" "$(cat "$PR_WORK/taint.err")"
bad_tmpl="$PR_WORK/template-without-spec.yaml"
printf 'apiVersion: v1\nkind: PodTemplate\nmetadata: {name: no-spec, namespace: %s}\n' "$PR_NS" >"$bad_tmpl"
real_err=$(kubectl create -f "$bad_tmpl" 2>&1) && t_fail "kube-apiserver took a PodTemplate without a template"
t_contains "kube-apiserver refuses a PodTemplate without a template" "template.spec.containers: Required value" "$real_err"
sim_rc=0
"$PR_BIN" simulate --cluster "$EX/simulate" --request "$bad_tmpl" --until 1m >/dev/null 2>"$PR_WORK/tmpl.err" || sim_rc=$?
t_eq "simulate refuses the what-if file (exit 1)" 1 "$sim_rc"
t_contains "simulate names the apiserver's reason" "template.spec.containers: Required value" "$(cat "$PR_WORK/tmpl.err")"

echo "bench=simulate_real_examples value=$examples"
echo "bench=simulate_real_disagreements value=$disagree"
((disagree == 0)) || t_fail "$disagree lines differ between the real runs and simulate (above)"
t_done

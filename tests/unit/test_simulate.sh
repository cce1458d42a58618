#!/bin/sh
# `provreqd simulate` on the bundled example: the README's main command.
# Checks the outcome a user of the example is promised in docs.
set -eu
: "${PRD_BUILDDIR:?}" "${PRD_SRCDIR:?}"
cd "$PRD_SRCDIR"
out=$("$PRD_BUILDDIR/provreqd" simulate --cluster templates/examples/simulate --until 2h \
	--cloud-driver "$PRD_BUILDDIR/cloud/kwok/.libs/kwok.so" 2>&1)
echo "$out"
fail=0
row() { echo "$out" | awk -v ns="$1" -v n="$2" '$1 == ns && $2 == n'; }
expect() { # namespace name pattern
	row "$1" "$2" | grep -qE -- "$3" || { echo "FAIL: $1/$2 does not match: $3"; fail=1; }
}
# check-capacity that fits: provisioned, then the 10-minute booking expires unused.
expect team-a fits-now 'check-capacity +True +True +True +CapacityReservationTimeExpired'
# check-capacity with no room fails when its ValidUntilSeconds window closes.
expect team-a no-room 'False +True +Expired: not provisioned within ValidUntilSeconds=600'
# atomic scale-up: the general group grows and the request is provisioned.
expect team-b training-run 'atomic-scale-up +True +True'
# too big for any group, noRetry: failed at once, with the reason per group.
expect team-b too-big 'False +True +CapacityIsNotFound: no node group can provide all'
# fine-tune needs two kinds of nodes: 2 GPU nodes and 1 general node, in one plan.
expect team-b fine-tune 'atomic-scale-up +True +True'
# Columns: group min max target peak added removed. fine-tune goes first
# (training-run does not fit while fits-now holds its booking): general +1
# for its launcher, gpu +2 for its workers. When both bookings have
# expired, training-run's 12 pods of 3 cpu find room for 5 on existing
# nodes (2 + 2 on the workers, 1 on fine-tune's idle general node, which it
# books) and general grows by 7. Every new node is removed once the booking
# it was made for expired unused and nobody else books it: 8 and 2.
echo "$out" | grep -qE '^general +0 +10 +0 +8 +8 +8 ' || { echo "FAIL: general did not grow by 8 and shrink back"; fail=1; }
echo "$out" | grep -qE '^gpu +0 +4 +0 +2 +2 +2 ' || { echo "FAIL: gpu did not grow by 2 and shrink back"; fail=1; }
echo "$out" | grep -qE '^gold +0 +5 +0 +0 +0 +0 ' || { echo "FAIL: gold group was touched"; fail=1; }
echo "$out" | grep -q '2 scale-ups started, 2 succeeded, 0 rolled back; 10 idle nodes scaled down' ||
	{ echo "FAIL: scale-up/scale-down counts"; fail=1; }
# Scale-down must never take a node someone still holds a booking on.
echo "$out" | grep -q 'BookedNodesRemoved' && { echo "FAIL: a booked node was scaled down"; fail=1; }
# arm-batch needs arm64 nodes, which only an auto-provisioned group has:
# without --node-autoprovisioning it is never provisioned.
expect team-a arm-batch 'atomic-scale-up +True +False +CapacityIsNotFound'

# With it, a new group of the arm-8x32 shape serves arm-batch (4 pods of 3
# cpu: 2 nodes), nothing else lands on it (its nodes are tainted), and once
# the booking expired and its nodes idled out the empty group is deleted.
# Catches a simulate that does not plan with auto-provisioning, or does
# not report the groups it created and deleted.
nout=$("$PRD_BUILDDIR/provreqd" simulate --cluster templates/examples/simulate --until 2h --node-autoprovisioning \
	--cloud-driver "$PRD_BUILDDIR/cloud/kwok/.libs/kwok.so" 2>&1) || { echo "FAIL: --node-autoprovisioning"; fail=1; }
echo "$nout" | awk '$1 == "team-a" && $2 == "arm-batch"' | grep -qE 'atomic-scale-up +True +True' ||
	{ echo "FAIL: arm-batch not provisioned with --node-autoprovisioning"; fail=1; }
echo "$nout" | grep -qE '^nap-arm-8x32-[0-9a-f]{8} +0 +10 +0 +2 +2 +2 +kwok +auto-provisioned 2026-01-01T00:05:00Z, deleted ' ||
	{ echo "FAIL: the auto-provisioned group's row (created, grew by 2, deleted)"; fail=1; }
echo "$nout" | grep -qE '^general +0 +10 +0 +8 +8 +8 ' || { echo "FAIL: NAP changed what general did"; fail=1; }

# Bad input gets a clear error and exit status 1, not a crash.
printf 'apiVersion: v1\nkind: Node\nmetadata: {name: x\n' > "${TMPDIR:-/tmp}/prd-bad-$$.yaml"
if "$PRD_BUILDDIR/provreqd" simulate --cluster "${TMPDIR:-/tmp}/prd-bad-$$.yaml" \
	--cloud-driver "$PRD_BUILDDIR/cloud/kwok/.libs/kwok.so" > "${TMPDIR:-/tmp}/prd-bad-$$.out" 2>&1; then
	echo "FAIL: malformed YAML accepted"; fail=1
fi
grep -q "line 4, column 1" "${TMPDIR:-/tmp}/prd-bad-$$.out" || { echo "FAIL: no position in YAML error:"; cat "${TMPDIR:-/tmp}/prd-bad-$$.out"; fail=1; }
rm -f "${TMPDIR:-/tmp}/prd-bad-$$.yaml" "${TMPDIR:-/tmp}/prd-bad-$$.out"
if "$PRD_BUILDDIR/provreqd" simulate --cluster /nonexistent > /dev/null 2>&1; then
	echo "FAIL: missing cluster accepted"; fail=1
fi

prd() { "$PRD_BUILDDIR/provreqd" simulate --cloud-driver "$PRD_BUILDDIR/cloud/kwok/.libs/kwok.so" "$@"; }
tmp="${TMPDIR:-/tmp}/prd-sim-$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# No cloud config anywhere: the kwok driver's refusal is followed by what
# was looked for and what to give, for a directory and for a file.
mkdir -p "$tmp/nocfg"
cp templates/examples/simulate/cluster.yaml "$tmp/nocfg/"
if prd --cluster "$tmp/nocfg" > /dev/null 2> "$tmp/nocfg.err"; then
	echo "FAIL: simulate without a cloud config succeeded"; fail=1
fi
if ! grep -q "no cloud config was given: no --cloud-config, and there is no $tmp/nocfg/cloud-config.yaml" "$tmp/nocfg.err" ||
	! grep -q "templateDir: DIR" "$tmp/nocfg.err"; then
	echo "FAIL: simulate without a cloud config does not say what is missing:"; cat "$tmp/nocfg.err"; fail=1
fi
prd --cluster "$tmp/nocfg/cluster.yaml" > /dev/null 2> "$tmp/nocfg.err" && { echo "FAIL: simulate of a file without a cloud config succeeded"; fail=1; }
grep -q "is a file, so no cloud-config.yaml beside it is read" "$tmp/nocfg.err" ||
	{ echo "FAIL: simulate of a file without a cloud config does not say why:"; cat "$tmp/nocfg.err"; fail=1; }

# Transitions are stamped with simulated time: the example starts at
# 00:05:00 (its newest creationTimestamp), fits-now is provisioned at once
# and its 10-minute booking expires at 00:15:00.
echo "$out" | grep -qE '^2026-01-01T00:15:00Z +\+10m +team-a/fits-now +BookingExpired=True +CapacityReservationTimeExpired' ||
	{ echo "FAIL: no BookingExpired transition of fits-now at simulated 00:15:00"; fail=1; }
echo "$out" | grep -qE '^2026-01-01T00:05:00Z +\+0s +team-b/too-big +Failed=True' ||
	{ echo "FAIL: no Failed transition of too-big at the start"; fail=1; }
# ... and so are the log lines: every one falls in the simulated hour.
prd --cluster templates/examples/simulate --v 2 > /dev/null 2> "$tmp/log" || fail=1
grep -c 'msg="request condition"' "$tmp/log" | grep -qv '^0$' || { echo "FAIL: no condition log lines"; fail=1; }
if grep -v '^ts=2026-01-01T0[01]:' "$tmp/log" | grep -q .; then
	echo "FAIL: log lines not stamped with simulated time:"; grep -v '^ts=2026-01-01T0[01]:' "$tmp/log" | head -3; fail=1
fi

# -o json and -o yaml: the documented fields, the same transitions.
prd --cluster templates/examples/simulate -o json > "$tmp/out.json" || { echo "FAIL: -o json"; fail=1; }
for f in '"schemaVersion": 1' '"transitions": \[' '"nodeGroupSizes": \[' '"requestStates": \[' '"requests": \[' \
	'"nodeGroups": \[' '"summary": \{' '"scaleUpsStarted": 2' '"time": "2026-01-01T00:15:00Z"' \
	'"type": "BookingExpired"' '"group": "general"' '"ready": 7'; do
	grep -qE "$f" "$tmp/out.json" || { echo "FAIL: -o json lacks $f"; fail=1; }
done
prd --cluster templates/examples/simulate -o yaml > "$tmp/out.yaml" || { echo "FAIL: -o yaml"; fail=1; }
for f in '^transitions:' '^- time: "2026-01-01T00:15:00Z"' '^  type: BookingExpired' '^nodeGroupSizes:' \
	'^  target: 8' '^requests:' '^  state: Failed'; do
	grep -qE "$f" "$tmp/out.yaml" || { echo "FAIL: -o yaml lacks $f"; fail=1; }
done
[ "$(grep -c '"type":' "$tmp/out.json")" = "$(grep -c '^  type:' "$tmp/out.yaml")" ] ||
	{ echo "FAIL: json and yaml disagree on the number of transitions"; fail=1; }
if prd --cluster templates/examples/simulate -o xml > /dev/null 2>&1; then
	echo "FAIL: -o xml accepted"; fail=1
fi

# --request: a what-if request joins the example and is answered.
cat > "$tmp/whatif.yaml" <<'YAML'
apiVersion: v1
kind: PodTemplate
metadata: {name: small, namespace: team-c}
template:
  spec:
    containers: [{name: c, image: busybox, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: what-if, namespace: team-c}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: small}, count: 2}]
YAML
wout=$(prd --cluster templates/examples/simulate --request "$tmp/whatif.yaml" 2>&1) || { echo "FAIL: --request"; fail=1; }
echo "$wout" | awk '$1 == "team-c" && $2 == "what-if"' | grep -qE 'atomic-scale-up +True +True' ||
	{ echo "FAIL: the what-if request was not provisioned:"; echo "$wout" | grep what-if; fail=1; }
echo "$wout" | grep -qE '^2026-01-01T00:05:0.Z .* team-c/what-if +Accepted=True' ||
	{ echo "FAIL: the what-if request was not accepted at the start"; fail=1; }
# --request is checked as the apiserver checks it against the CRD: each
# mistake stops the command (exit 1) naming the file, the document and the
# field, instead of the request vanishing from the report.
whatif_with() { # sed expression applied to whatif.yaml -> $tmp/v.yaml
	sed "$1" "$tmp/whatif.yaml" > "$tmp/v.yaml"
}
refused() { # what-for pattern
	rc=0; prd --cluster templates/examples/simulate --request "$tmp/v.yaml" > "$tmp/v.out" 2>&1 || rc=$?
	[ "$rc" = 1 ] && grep -q -- "v.yaml document 2 (ProvisioningRequest team-c/what-if): $2" "$tmp/v.out" ||
		{ echo "FAIL: $1 not refused as it should be (exit $rc):"; cat "$tmp/v.out"; fail=1; }
}
whatif_with 's/^  podSets:/  parameters: {ValidUntilSeconds: 600}\n  podSets:/'
refused "an unquoted number parameter" 'spec.parameters.ValidUntilSeconds must be a string (quote it: ValidUntilSeconds: "600")'
whatif_with 's/count: 2}/count: 2147483648}/'
refused "count 2^31" 'spec.podSets\[0\].count must be an integer from 1 to 2147483647'
whatif_with 's/count: 2}/count: 0}/'
refused "count 0" 'spec.podSets\[0\].count must be an integer from 1 to 2147483647'
whatif_with 's/{name: what-if, namespace: team-c}/{name: What_If, namespace: team-c}/'
rc=0; prd --cluster templates/examples/simulate --request "$tmp/v.yaml" > "$tmp/v.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q 'v.yaml document 2 (ProvisioningRequest team-c/What_If): metadata.name "What_If" is not a valid name' "$tmp/v.out" ||
	{ echo "FAIL: an invalid name not refused (exit $rc):"; cat "$tmp/v.out"; fail=1; }
whatif_with 's/{podTemplateRef: {name: small}, count: 2}/{podTemplateRef: {name: small.}, count: 2}/'
refused "an invalid podTemplateRef name" 'spec.podSets\[0\].podTemplateRef.name "small." is not a valid name'
whatif_with 's/provisioningClassName: best-effort/provisioningClassName: Best-effort/'
refused "an invalid class name" 'spec.provisioningClassName "Best-effort'
sets=$(i=0; while [ $i -lt 33 ]; do printf '{podTemplateRef: {name: small}, count: 1}, '; i=$((i + 1)); done)
whatif_with "s/podSets: \[.*\]/podSets: [$sets]/"
refused "33 podSets" 'spec.podSets has 33 items, at most 32 are allowed'
params=$(i=0; while [ $i -lt 101 ]; do printf 'p%d: "x", ' $i; i=$((i + 1)); done)
whatif_with "s/^  podSets:/  parameters: {$params}\n  podSets:/"
refused "101 parameters" 'spec.parameters has 101 entries, at most 100 are allowed'
long=$(printf '%0256d' 0)
whatif_with "s/^  podSets:/  parameters: {noRetry: \"$long\"}\n  podSets:/"
refused "a 256-character parameter" 'spec.parameters.noRetry is 256 characters long, at most 255'
# The limits themselves pass.
whatif_with "s/count: 2}/count: 2147483647}/; s/^  podSets:/  parameters: {noRetry: \"$(printf '%0255d' 0)\"}\n  podSets:/"
prd --cluster templates/examples/simulate --until 1m --request "$tmp/v.yaml" > "$tmp/v.out" 2>&1 ||
	{ echo "FAIL: a request at the CRD's limits refused:"; cat "$tmp/v.out"; fail=1; }
# A class nobody serves: one warning naming it (the request is left alone,
# as run leaves it), not one per pass.
whatif_with 's/best-effort-atomic-scale-up.autoscaling.x-k8s.io/gpu.example.com/'
prd --cluster templates/examples/simulate --request "$tmp/v.yaml" > "$tmp/v.out" 2> "$tmp/v.err" ||
	{ echo "FAIL: an unknown class refused"; cat "$tmp/v.err"; fail=1; }
[ "$(grep -c 'gpu.example.com' "$tmp/v.err")" = 1 ] && grep -q 'class neither provreqd nor the driver serves.*where=".*/v.yaml document 2"' "$tmp/v.err" ||
	{ echo "FAIL: an unknown class is not warned exactly once:"; cat "$tmp/v.err"; fail=1; }
printf 'apiVersion: v1\nkind: PodTemplate\nmetadata: {name: t, namespace: a}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n' \
	> "$tmp/bad-request.yaml"
if prd --cluster templates/examples/simulate --request "$tmp/bad-request.yaml" > "$tmp/bad.out" 2>&1; then
	echo "FAIL: a Node in a --request file accepted"; fail=1
fi
grep -q 'bad-request.yaml document 2 (Node n): only ProvisioningRequests and PodTemplates' "$tmp/bad.out" ||
	{ echo "FAIL: bad --request file not explained:"; cat "$tmp/bad.out"; fail=1; }

# --plot: the committed picture in docs/ is what this build draws for the
# README's command, so it never goes stale.
prd --cluster templates/examples/simulate --plot "$tmp/plot.svg" > /dev/null || { echo "FAIL: --plot"; fail=1; }
cmp -s "$tmp/plot.svg" docs/simulate-example.svg ||
	{ echo "FAIL: docs/simulate-example.svg differs from what this build draws (regenerate it, see docs/simulate.md)"; fail=1; }
for f in '^<svg ' 'team-b/fine-tune' '>general<' '>gpu<' '>Pending/Accepted<' '>ScaleUpInProgress<' '>+30m<' '</svg>'; do
	grep -q -- "$f" "$tmp/plot.svg" || { echo "FAIL: the plot lacks $f"; fail=1; }
done
if prd --cluster templates/examples/simulate --plot /nonexistent/dir/p.svg > /dev/null 2>&1; then
	echo "FAIL: an unwritable --plot path accepted"; fail=1
fi

# A kubectl dump (a List with server fields and a kind simulate does not
# model) loads; the Deployment is skipped with a warning naming it.
prd --cluster tests/fixtures/simulate/kubectl-dump.yaml --cloud-config templates/examples/simulate/cloud-config.yaml \
	> "$tmp/dump.out" 2> "$tmp/dump.err" || { echo "FAIL: kubectl dump"; cat "$tmp/dump.err"; fail=1; }
grep -qE '^batch +job-1 +check-capacity +True +True' "$tmp/dump.out" || { echo "FAIL: job-1 of the dump not provisioned"; fail=1; }
grep -q 'object ignored.*Deployment default/web.*kind not simulated' "$tmp/dump.err" ||
	{ echo "FAIL: no warning for the Deployment of the dump"; cat "$tmp/dump.err"; fail=1; }

# A directory: cluster.json is loaded, other files are named as ignored.
mkdir -p "$tmp/dir"
cat > "$tmp/dir/cluster.json" <<'JSON'
{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "creationTimestamp": "2026-03-01T00:00:00Z"},
  "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}},
 {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t", "namespace": "a"},
  "template": {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}},
 {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "from-json", "namespace": "a"},
  "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "podSets": [{"podTemplateRef": {"name": "t"}, "count": 2}]}}]}
JSON
echo notes > "$tmp/dir/README.txt"
prd --cluster "$tmp/dir" --cloud-config templates/examples/simulate/cloud-config.yaml > "$tmp/dir.out" 2> "$tmp/dir.err" ||
	{ echo "FAIL: a directory with cluster.json"; cat "$tmp/dir.err"; fail=1; }
grep -qE '^a +from-json +check-capacity +True +True' "$tmp/dir.out" || { echo "FAIL: cluster.json not loaded"; fail=1; }
grep -q 'file ignored.*README.txt' "$tmp/dir.err" || { echo "FAIL: README.txt not named as ignored"; fail=1; }

# templateDir is relative to the cloud config, not the working directory.
(cd "$tmp" && prd --cluster "$PRD_SRCDIR/templates/examples/simulate" --until 10m) > "$tmp/cwd.out" 2>&1 ||
	{ echo "FAIL: the example does not run from another directory:"; cat "$tmp/cwd.out"; fail=1; }
grep -qE '^gpu +0 +4 ' "$tmp/cwd.out" || { echo "FAIL: node groups missing when run from another directory"; fail=1; }
# ... in every command: check-driver lists the example's groups from
# another directory, and run gets past reading the templates (it then stops
# at the unreachable apiserver the kwok driver lists Nodes from).
(cd "$tmp" && "$PRD_BUILDDIR/provreqd" check-driver "$PRD_BUILDDIR/cloud/kwok/.libs/kwok.so" \
	--cloud-config "$PRD_SRCDIR/templates/examples/simulate/cloud-config.yaml") > "$tmp/cd.out" 2>&1 ||
	{ echo "FAIL: check-driver: a relative templateDir is not the config file's neighbour:"; cat "$tmp/cd.out"; fail=1; }
grep -q 'node groups: 3' "$tmp/cd.out" || { echo "FAIL: check-driver did not list the example's 3 groups"; fail=1; }
cat > "$tmp/kubeconfig" <<'YAML'
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
YAML
(cd "$tmp" && timeout 20 "$PRD_BUILDDIR/provreqd" run --kubeconfig "$tmp/kubeconfig" --leader-elect=false \
	--http-addr 127.0.0.1:0 --state-db :memory: --cloud-driver "$PRD_BUILDDIR/cloud/kwok/.libs/kwok.so" \
	--cloud-config "$PRD_SRCDIR/templates/examples/simulate/cloud-config.yaml") > "$tmp/run.out" 2>&1 || true
grep -q 'cannot load cloud driver.*/api/v1/nodes' "$tmp/run.out" && ! grep -q 'templateDir' "$tmp/run.out" ||
	{ echo "FAIL: run: a relative templateDir is not the config file's neighbour:"; cat "$tmp/run.out"; fail=1; }

# DRA (templates/examples/dra): pods claiming 4 of a node's 8 GPUs. Two
# fit the existing node (check-capacity); five more need exactly 3 new
# nodes of the group whose template publishes 8 GPUs (2 + 2 + 1), and the
# new nodes' ResourceSlices (created by the kwok driver) make them fit.
prd --cluster templates/examples/dra --until 10m > "$tmp/dra.out" 2>&1 ||
	{ echo "FAIL: the DRA example:"; cat "$tmp/dra.out"; fail=1; }
grep -qE '^ml +on-existing +check-capacity +True +True' "$tmp/dra.out" ||
	{ echo "FAIL: DRA check-capacity not provisioned"; cat "$tmp/dra.out"; fail=1; }
grep -qE '^ml +scale-up +atomic-scale-up +True +True' "$tmp/dra.out" ||
	{ echo "FAIL: DRA scale-up not provisioned"; cat "$tmp/dra.out"; fail=1; }
grep -qE '^dra-gpu +0 +10 +3 +3 +3 ' "$tmp/dra.out" ||
	{ echo "FAIL: the DRA group did not grow by exactly 3"; cat "$tmp/dra.out"; fail=1; }
grep -q 'warn' "$tmp/dra.out" && { echo "FAIL: warnings in the DRA example"; fail=1; }


# --expander priority: the table comes from --priority-file (the
# cluster-autoscaler-priority-expander ConfigMap, or its bare map), and the
# highest matching priority wins where least-waste would tie (alpha first).
mkdir -p "$tmp/prio/groups"
for g in alpha beta; do
	cat > "$tmp/prio/groups/$g.yaml" <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $g
  annotations: {provreqd.io/min-size: "0", provreqd.io/max-size: "5", provreqd.io/initial-size: "0"}
  labels: {kubernetes.io/os: linux, type: kwok}
status:
  capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
YAML
done
echo 'templateDir: groups' > "$tmp/prio/cloud-config.yaml"
cat > "$tmp/prio/cluster.yaml" <<'YAML'
apiVersion: v1
kind: PodTemplate
metadata: {name: t, namespace: a, creationTimestamp: "2026-01-01T00:00:00Z"}
template:
  spec:
    containers: [{name: c, image: i, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: r, namespace: a, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: t}, count: 2}]
YAML
cat > "$tmp/prio/priorities.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: cluster-autoscaler-priority-expander, namespace: kube-system}
data:
  priorities: |-
    10:
      - .*
    50:
      - ^be.a$
YAML
prd --cluster "$tmp/prio" --until 10m > "$tmp/lw.out" 2>&1 || { echo "FAIL: least-waste run"; cat "$tmp/lw.out"; fail=1; }
grep -qE '^alpha +0 +5 +1 +1 +1 ' "$tmp/lw.out" || { echo "FAIL: least-waste did not pick alpha:"; cat "$tmp/lw.out"; fail=1; }
prd --cluster "$tmp/prio" --until 10m --expander priority,least-waste --priority-file "$tmp/prio/priorities.yaml" \
	> "$tmp/prio.out" 2>&1 || { echo "FAIL: --priority-file run"; cat "$tmp/prio.out"; fail=1; }
grep -qE '^beta +0 +5 +1 +1 +1 ' "$tmp/prio.out" || { echo "FAIL: priority did not pick beta:"; cat "$tmp/prio.out"; fail=1; }
printf '5: ["^alpha$"]\n1: [".*"]\n' > "$tmp/prio/bare.yaml"
prd --cluster "$tmp/prio" --until 10m --expander priority --priority-file "$tmp/prio/bare.yaml" > "$tmp/bare.out" 2>&1 ||
	{ echo "FAIL: a bare priorities map"; cat "$tmp/bare.out"; fail=1; }
grep -qE '^alpha +0 +5 +1 +1 +1 ' "$tmp/bare.out" || { echo "FAIL: bare map did not pick alpha"; cat "$tmp/bare.out"; fail=1; }
# No table: a usage error saying where one goes.
rc=0; prd --cluster "$tmp/prio" --expander priority > "$tmp/noprio.out" 2>&1 || rc=$?
[ "$rc" = 2 ] || { echo "FAIL: --expander priority without a table exited $rc, want 2"; fail=1; }
grep -q 'needs a priority table: give --priority-file' "$tmp/noprio.out" ||
	{ echo "FAIL: no hint where the priority table goes:"; cat "$tmp/noprio.out"; fail=1; }
# A bad table names the file and the entry.
printf 'ten: [".*"]\n' > "$tmp/prio/badkey.yaml"
rc=0; prd --cluster "$tmp/prio" --expander priority --priority-file "$tmp/prio/badkey.yaml" > "$tmp/badkey.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q 'badkey.yaml: priority "ten": not an integer' "$tmp/badkey.out" ||
	{ echo "FAIL: a non-integer priority not refused ($rc):"; cat "$tmp/badkey.out"; fail=1; }

# --help names the new options.
for f in --request --plot '-o, --output' templateDir --priority-file; do
	"$PRD_BUILDDIR/provreqd" simulate --help | grep -q -- "$f" || { echo "FAIL: --help lacks $f"; fail=1; }
done
exit $fail

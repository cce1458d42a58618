#!/usr/bin/env bash
# ProvisioningRequest status writes from the C client: a read-modify-write
# that races another writer gets 409 Conflict and retries without losing the
# other writer's change; server-side apply of a condition works and does not
# clobber a condition owned by another field manager.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

kc="$PROVREQD_BUILDDIR/e2e/tools/kube-e2e-client"
[[ -x "$kc" ]] || t_fail "$kc is not built (make all)"
ns=$(t_unique e2e-status)
tmp=$(mktemp -d)
bg=''
cleanup() {
	[[ -n "$bg" ]] && kill "$bg" 2>/dev/null
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

kubectl create namespace "$ns" >/dev/null
kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PodTemplate
metadata: {name: tmpl}
template:
  spec:
    containers: [{name: c, image: registry.k8s.io/pause:3.9}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: race}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: tmpl}, count: 1}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: ssa}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: tmpl}, count: 2}]
YAML
t_pass "ProvisioningRequests created"

conds() {
	kubectl -n "$ns" get provreq "$1" -o jsonpath='{range .status.conditions[*]}{.type}={.status}/{.reason} {end}'
}

# --- read-modify-write racing another writer
"$kc" rmw-condition "$ns" race Accepted "$tmp/go" "$tmp/ready" >"$tmp/rmw.out" 2>"$tmp/rmw.err" &
bg=$!
t_wait 30 "the client has read the object" test -e "$tmp/ready"
kubectl -n "$ns" patch provreq race --subresource=status --type=merge -p "{\"status\":{\"conditions\":[{\"type\":\"OtherWriter\",\"status\":\"True\",\"reason\":\"Racing\",\"message\":\"m\",\"lastTransitionTime\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}]}}" >/dev/null
t_pass "another writer changed the status in between"
touch "$tmp/go"
wait "$bg" || t_fail "rmw-condition failed: $(cat "$tmp/rmw.err")"
bg=''
t_eq "the first write got 409 and was retried once" "conflicts=1" "$(cat "$tmp/rmw.out")"
c=$(conds race)
t_contains "our condition is there" "Accepted=True/E2ETest" "$c"
t_contains "the other writer's condition survived" "OtherWriter=True/Racing" "$c"

# --- server-side apply of conditions by two field managers
t_eq "provreqd applies Accepted" applied "$("$kc" apply-condition "$ns" ssa Accepted True Accepted)"
t_eq "another manager applies Provisioned" applied \
	"$("$kc" --manager other-manager apply-condition "$ns" ssa Provisioned False CapacityIsNotFound)"
t_eq "provreqd re-applies Accepted with a new reason" applied \
	"$("$kc" apply-condition "$ns" ssa Accepted True StillAccepted)"
c=$(conds ssa)
t_contains "provreqd's condition updated" "Accepted=True/StillAccepted" "$c"
t_contains "the other manager's condition is not clobbered" "Provisioned=False/CapacityIsNotFound" "$c"
mgrs=$(kubectl -n "$ns" get provreq ssa --show-managed-fields -o jsonpath='{range .metadata.managedFields[*]}{.manager}:{.operation}:{.subresource} {end}')
t_contains "provreqd owns its fields through Apply on status" "provreqd:Apply:status" "$mgrs"
t_contains "other-manager owns its own" "other-manager:Apply:status" "$mgrs"
t_done

#!/usr/bin/env bash
# The C client against the real apiserver: get/list/create/delete/patch, and
# the apiserver's Status answers mapped to the right codes (NotFound,
# AlreadyExists, Invalid, precondition Conflict); list pagination.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

kc="$PROVREQD_BUILDDIR/e2e/tools/kube-e2e-client"
[[ -x "$kc" ]] || t_fail "$kc is not built (make all)"
ns=$(t_unique e2e-client)
tmp=$(mktemp -d)
cleanup() {
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

printf '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"%s"}}\n' "$ns" >"$tmp/ns.json"
t_eq "create a namespace" "$ns" "$("$kc" create namespaces - "$tmp/ns.json")"
t_eq "kubectl sees it" "$ns" "$(kubectl get namespace "$ns" -o jsonpath='{.metadata.name}')"

cat >"$tmp/cm.yaml" <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm-one
  labels: {e2e-client: "yes"}
data:
  k: v
YAML
t_eq "create a ConfigMap from YAML" cm-one "$("$kc" create configmaps "$ns" "$tmp/cm.yaml")"
out=$("$kc" create configmaps "$ns" "$tmp/cm.yaml" 2>&1 || true)
t_contains "creating it again is AlreadyExists" "ERR EEXIST http=409 reason=AlreadyExists" "$out"

out=$("$kc" get configmaps "$ns" no-such-cm 2>&1 || true)
t_contains "getting a missing object is NotFound" "ERR ENOTFOUND http=404 reason=NotFound" "$out"

sed 's/name: cm-one/name: Not_A_Valid_Name/' "$tmp/cm.yaml" >"$tmp/bad.yaml"
out=$("$kc" create configmaps "$ns" "$tmp/bad.yaml" 2>&1 || true)
t_contains "an invalid name is Invalid" "ERR EINVAL http=422 reason=Invalid" "$out"

got=$("$kc" get configmaps "$ns" cm-one)
t_contains "get returns the object" '"k":"v"' "$got"

"$kc" patch configmaps "$ns" cm-one merge '{"data":{"merged":"1"}}' >/dev/null
t_eq "merge patch applied" 1 "$(kubectl -n "$ns" get cm cm-one -o jsonpath='{.data.merged}')"
"$kc" patch configmaps "$ns" cm-one json '[{"op":"add","path":"/data/jsonpatched","value":"2"}]' >/dev/null
t_eq "JSON patch applied" 2 "$(kubectl -n "$ns" get cm cm-one -o jsonpath='{.data.jsonpatched}')"
out=$("$kc" patch configmaps "$ns" cm-one json '[{"op":"test","path":"/data/k","value":"other"}]' 2>&1 || true)
t_contains "a failed JSON patch test op is refused" "ERR EINVAL" "$out"

# Pagination: 7 labelled ConfigMaps listed 3 per page.
for i in 2 3 4 5 6 7; do
	kubectl -n "$ns" create configmap "cm-$i" --from-literal=i="$i" >/dev/null
	kubectl -n "$ns" label configmap "cm-$i" e2e-client=yes >/dev/null
done
list=$("$kc" list configmaps "$ns" e2e-client=yes 3)
t_contains "list across pages sees all 7" "items=7 " "$list"
t_eq "every name once, in order" "cm-2 cm-3 cm-4 cm-5 cm-6 cm-7 cm-one" \
	"$(grep -v '^items=' <<<"$list" | sort | xargs)"
rv=$(sed -n 's/^items=7 rv=//p' <<<"$list")
[[ "$rv" =~ ^[0-9]+$ ]] || t_fail "list resourceVersion '$rv' is not a number"
t_pass "list returns the collection resourceVersion ($rv)"

uid=$(kubectl -n "$ns" get cm cm-2 -o jsonpath='{.metadata.uid}')
out=$("$kc" delete configmaps "$ns" cm-2 00000000-0000-0000-0000-000000000000 2>&1 || true)
t_contains "delete with a wrong uid precondition is a Conflict" "ERR ECONFLICT http=409 reason=Conflict" "$out"
t_eq "delete with the right uid" deleted "$("$kc" delete configmaps "$ns" cm-2 "$uid")"
out=$("$kc" get configmaps "$ns" cm-2 2>&1 || true)
t_contains "and it is gone" "ERR ENOTFOUND" "$out"
out=$("$kc" delete configmaps "$ns" cm-2 2>&1 || true)
t_contains "deleting it again is NotFound" "ERR ENOTFOUND" "$out"
t_done

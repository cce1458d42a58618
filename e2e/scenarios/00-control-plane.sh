#!/usr/bin/env bash
# The local control plane is the real thing: a ready apiserver at the pinned
# version, RBAC enforced for service-account tokens, real admission, kwok
# making a fake Node Ready, the real kube-scheduler binding a Pod to it (and
# refusing one that fits nowhere), kwok running and removing the Pod, and the
# controller manager finishing namespace deletion.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

ns=$(t_unique e2e-cp)
node=$(t_unique e2e-cp-node)

cleanup() {
	kubectl delete node "$node" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

# --- apiserver
t_eq "apiserver /readyz" ok "$(kubectl get --raw /readyz)"
t_eq "apiserver version is the pinned one" "$KUBERNETES_VERSION" \
	"$(kubectl version -o json | sed -n 's/.*"gitVersion": "\([^"]*\)".*/\1/p' | tail -n1)"

# --- RBAC: a service-account token with no bindings is authenticated but
# forbidden; a RoleBinding grants exactly what it names.
kubectl create namespace "$ns" >/dev/null
t_wait 30 "default ServiceAccount created in $ns" kubectl -n "$ns" get serviceaccount default
kubectl -n "$ns" create serviceaccount nobody >/dev/null
token=$(kubectl -n "$ns" create token nobody --duration=10m)
[[ -n "$token" ]] || t_fail "kubectl create token printed nothing"

out=$(t_curl -H "Authorization: Bearer $token" "$APISERVER_URL/api/v1/nodes")
t_eq "token without bindings: list nodes is 403" 403 "$(tail -n1 <<<"$out")"
t_contains "403 is a Forbidden Status for the service account" \
	"\"reason\":\"Forbidden\"" "$(tr -d ' \n' <<<"$out")"
t_contains "403 names the service account" "system:serviceaccount:$ns:nobody" "$out"

out=$(t_curl -H "Authorization: Bearer not-a-token" "$APISERVER_URL/api/v1/nodes")
t_eq "bad token: 401" 401 "$(tail -n1 <<<"$out")"

kubectl -n "$ns" create role pod-reader --verb=get,list --resource=pods >/dev/null
kubectl -n "$ns" create rolebinding nobody-reads-pods --role=pod-reader \
	--serviceaccount="$ns:nobody" >/dev/null
code() { t_curl -H "Authorization: Bearer $token" "$1" | tail -n1; }
may_list_pods() { [[ "$(code "$APISERVER_URL/api/v1/namespaces/$ns/pods")" == 200 ]]; }
# The authorizer learns of the new binding through a watch, a moment later.
t_wait 10 "bound token may list pods in $ns" may_list_pods
t_eq "bound token still may not list pods in kube-system" 403 \
	"$(code "$APISERVER_URL/api/v1/namespaces/kube-system/pods")"
t_eq "impersonation agrees (can-i list nodes)" no \
	"$(kubectl auth can-i list nodes --as="system:serviceaccount:$ns:nobody" 2>/dev/null || true)"

# --- admission
pod_yaml() { # NAME [extra spec lines...]
	local name=$1
	shift
	printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n' "$name"
	printf '  containers:\n  - name: c\n    image: registry.invalid/none:1\n'
	printf '    resources:\n      requests:\n        cpu: 100m\n        memory: 64Mi\n'
	local l
	for l in "$@"; do printf '  %s\n' "$l"; done
}
out=$(pod_yaml p | kubectl -n "no-such-ns-$ns" create -f - 2>&1 || true)
t_contains "NamespaceLifecycle rejects a Pod in a missing namespace" \
	"namespaces \"no-such-ns-$ns\" not found" "$out"
out=$(pod_yaml p "serviceAccountName: ghost" | kubectl -n "$ns" create -f - 2>&1 || true)
t_contains "ServiceAccount admission rejects a Pod of a missing ServiceAccount" \
	'serviceaccount "ghost" not found' "$out"
out=$(pod_yaml Bad_Name | kubectl -n "$ns" create -f - 2>&1 || true)
t_contains "validation rejects an invalid Pod name" "is invalid" "$out"

# --- kwok: a fake Node becomes Ready and keeps the capacity it was given
kubectl create -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  annotations:
    kwok.x-k8s.io/node: fake
  labels:
    type: kwok
    e2e.provreqd.io/node: $node
spec:
  taints:
  - key: kwok.x-k8s.io/node
    value: fake
    effect: NoSchedule
status:
  capacity:
    cpu: "4"
    memory: 8Gi
    pods: "110"
  allocatable:
    cpu: "4"
    memory: 8Gi
    pods: "110"
EOF
t_wait 20 "kwok Node $node becomes Ready" \
	kubectl wait --for=condition=Ready "node/$node" --timeout=1s
t_eq "Node keeps its allocatable cpu" 4 \
	"$(kubectl get node "$node" -o jsonpath='{.status.allocatable.cpu}')"

# --- scheduler: binds a Pod that fits, leaves one that fits nowhere Pending
pod_yaml fits \
	"nodeSelector: {e2e.provreqd.io/node: $node}" \
	"tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]" |
	kubectl -n "$ns" create -f - >/dev/null
t_wait 20 "kube-scheduler binds Pod fits to $node" \
	k_is "$node" '{.spec.nodeName}' -n "$ns" pod fits
t_wait 20 "kwok runs Pod fits" \
	k_is Running '{.status.phase}' -n "$ns" pod fits
t_eq "Pod fits is Ready" True \
	"$(kubectl -n "$ns" get pod fits -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')"
t_contains "the binding was the scheduler's (Scheduled event)" "Successfully assigned $ns/fits to $node" \
	"$(kubectl -n "$ns" get events --field-selector involvedObject.name=fits -o jsonpath='{.items[*].message}')"

pod_yaml too-big \
	"nodeSelector: {e2e.provreqd.io/node: $node}" \
	"tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]" |
	sed 's/cpu: 100m/cpu: "5"/' | kubectl -n "$ns" create -f - >/dev/null
t_wait 20 "a Pod asking 5 cpu of a 4-cpu node is Unschedulable" \
	k_is Unschedulable '{.status.conditions[?(@.type=="PodScheduled")].reason}' -n "$ns" pod too-big
t_eq "Pod too-big is not bound" "" \
	"$(kubectl -n "$ns" get pod too-big -o jsonpath='{.spec.nodeName}')"

# --- deletion: kwok removes a deleted Pod like a kubelet; the namespace
# controller finishes a namespace deletion.
kubectl -n "$ns" delete pod fits --wait=false >/dev/null
t_wait 30 "deleted Pod fits is removed (kwok, as a kubelet would)" k_gone -n "$ns" pod fits
kubectl delete node "$node" >/dev/null
kubectl delete namespace "$ns" --wait=false >/dev/null
t_wait 60 "namespace controller finishes deleting $ns" k_gone namespace "$ns"

t_done

#!/usr/bin/env bash
# The C client authenticates with the cluster's client-certificate
# kubeconfig, with a ServiceAccount token (inline, tokenFile, and through an
# exec credential plugin), and is refused (Forbidden → EPERM) where RBAC
# says so.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

kc="$PROVREQD_BUILDDIR/e2e/tools/kube-e2e-client"
[[ -x "$kc" ]] || t_fail "$kc is not built (make all)"
ns=$(t_unique e2e-auth)
tmp=$(mktemp -d)
cleanup() {
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

t_eq "client-certificate kubeconfig: whoami" provreqd-e2e-admin "$("$kc" --kubeconfig "$KUBECONFIG" whoami)"

kubectl create namespace "$ns" >/dev/null
kubectl -n "$ns" create serviceaccount robot >/dev/null
token=$(kubectl -n "$ns" create token robot --duration=10m)
[[ -n "$token" ]] || t_fail "kubectl create token printed nothing"
server=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')
cp "$PROVREQD_E2E_CLUSTER_DIR/pki/ca.crt" "$tmp/ca.crt"
printf '%s' "$token" >"$tmp/token"

cat >"$tmp/token.kubeconfig" <<YAML
apiVersion: v1
kind: Config
current-context: robot
clusters:
- name: e2e
  cluster:
    server: $server
    certificate-authority: ca.crt
users:
- name: robot
  user:
    token: $token
- name: robot-file
  user:
    tokenFile: token
- name: robot-exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.sh
      interactiveMode: Never
contexts:
- name: robot
  context: {cluster: e2e, user: robot, namespace: $ns}
- name: robot-file
  context: {cluster: e2e, user: robot-file, namespace: $ns}
- name: robot-exec
  context: {cluster: e2e, user: robot-exec, namespace: $ns}
YAML
cat >"$tmp/plugin.sh" <<SH
#!/bin/sh
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' "\$(cat "\$(dirname "\$0")/token")"
SH
chmod +x "$tmp/plugin.sh"

want="system:serviceaccount:$ns:robot"
t_eq "token kubeconfig: whoami" "$want" "$("$kc" --kubeconfig "$tmp/token.kubeconfig" whoami)"
t_eq "tokenFile kubeconfig: whoami" "$want" "$("$kc" --kubeconfig "$tmp/token.kubeconfig" --context robot-file whoami)"
t_eq "exec plugin kubeconfig: whoami" "$want" "$("$kc" --kubeconfig "$tmp/token.kubeconfig" --context robot-exec whoami)"

out=$("$kc" --kubeconfig "$tmp/token.kubeconfig" list pods "$ns" 2>&1 || true)
t_contains "the ServiceAccount may not list pods: Forbidden" "ERR EPERM http=403 reason=Forbidden" "$out"
kubectl -n "$ns" create role pod-reader --verb=get,list --resource=pods >/dev/null
kubectl -n "$ns" create rolebinding robot-reads --role=pod-reader --serviceaccount="$ns:robot" >/dev/null
t_wait 30 "after a RoleBinding it may" "$kc" --kubeconfig "$tmp/token.kubeconfig" list pods "$ns"

printf 'not-a-valid-token' >"$tmp/token"
out=$("$kc" --kubeconfig "$tmp/token.kubeconfig" --context robot-file whoami 2>&1 || true)
t_contains "a bad token is Unauthorized (EPERM)" "ERR EPERM http=401" "$out"

sed -i "s|certificate-authority: ca.crt|certificate-authority: missing.crt|" "$tmp/token.kubeconfig"
out=$("$kc" --kubeconfig "$tmp/token.kubeconfig" whoami 2>&1 || true)
t_contains "a missing CA file is named in the error" "clusters[e2e].certificate-authority" "$out"
t_done

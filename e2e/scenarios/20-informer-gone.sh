#!/usr/bin/env bash
# A watch from a resourceVersion that etcd has compacted away gets 410 Gone,
# and provreqd's reflector relists and converges on the server's state.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

tool="$PROVREQD_BUILDDIR/e2e/tools/informer-e2e"
[[ -x "$tool" ]] || t_skip "informer-e2e not built (make e2e/tools/informer-e2e)"
command -v etcdctl >/dev/null || t_skip "etcdctl not found"
marker=$(t_unique e2e-gone)
ns=$marker
ctl=$(mktemp -d "${TMPDIR:-/tmp}/informer-gone.XXXXXX")
tool_pid=""

cleanup() {
	if [[ -n "$tool_pid" ]]; then kill "$tool_pid" 2>/dev/null || true; wait "$tool_pid" 2>/dev/null || true; fi
	kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
	rm -rf "$ctl"
}
trap cleanup EXIT

ask() {
	local i
	rm -f "$ctl/response"
	printf '%s\n' "$1" >"$ctl/.request.tmp"
	mv "$ctl/.request.tmp" "$ctl/request"
	for ((i = 0; i < 1200; i++)); do
		[[ -f "$ctl/response" ]] && { cat "$ctl/response"; return 0; }
		kill -0 "$tool_pid" 2>/dev/null || t_fail "informer-e2e exited; log: $(tail -20 "$ctl/log")"
		sleep 0.1
	done
	t_fail "informer-e2e did not answer '$1'"
}
stat() { sed -n "s/.*\\b$1=\\([0-9-]*\\).*/\\1/p" <<<"$2"; }

kubectl create namespace "$ns" >/dev/null
t_wait 60 "default ServiceAccount in $ns" kubectl -n "$ns" get serviceaccount default
old_rv=$(kubectl get --raw "/api/v1/namespaces/$ns/pods" | sed -n 's/.*"resourceVersion":"\([0-9]*\)".*/\1/p' | head -1)
[[ -n "$old_rv" ]] || t_fail "no list resourceVersion"
for i in $(seq 1 20); do
	kubectl -n "$ns" create configmap "cm$i" --from-literal=k=v >/dev/null
done
rev=$(etcdctl --endpoints "$ETCD_ENDPOINT" endpoint status -w json | sed -n 's/.*"revision":\([0-9]*\).*/\1/p')
[[ -n "$rev" ]] || t_fail "could not read the etcd revision"
etcdctl --endpoints "$ETCD_ENDPOINT" compact "$rev" >/dev/null || t_fail "etcd compaction at $rev"
t_pass "etcd compacted at revision $rev (the old list version was $old_rv)"
# The apiserver's watch cache may still hold the old version; restarting it
# makes the cache start at the compacted revision, as after a long outage.
"$E2E_DIR/cluster.sh" stop kube-apiserver --kill --dir "$PROVREQD_E2E_CLUSTER_DIR" >/dev/null ||
	t_fail "kube-apiserver stop"
"$E2E_DIR/cluster.sh" start kube-apiserver --dir "$PROVREQD_E2E_CLUSTER_DIR" >/dev/null ||
	t_fail "kube-apiserver start"
t_wait 120 "kube-apiserver ready" kubectl get --raw /readyz

# Pods in the namespace (none) and nodes matching nothing: the point is the
# first watch, which starts from the compacted version.
"$tool" --start-rv "$old_rv" "$ctl" "e2e-gone=$marker" "$ns" >"$ctl/log" 2>&1 &
tool_pid=$!
t_wait 120 "caches synced" test -f "$ctl/ready"
for ((i = 0; i < 100; i++)); do
	s=$(ask 'stats pods')
	(($(stat relists "$s") >= 1)) && break
	sleep 0.2
done
t_log "pods: $s"
t_eq "the watch from the compacted version got 410 Gone" 1 $(( $(stat gone "$s") >= 1 ))
t_eq "and the reflector relisted" 1 $(( $(stat relists "$s") >= 1 ))
kubectl -n "$ns" run pod-after-gone --image=registry.k8s.io/pause:3.9 --restart=Never \
	--overrides='{"spec":{"nodeSelector":{"e2e-nowhere":"x"}}}' >/dev/null
t_eq "after the relist the watch delivers new objects" "MATCH n=1" "$(ask 'compare pods')"
ask quit >/dev/null
wait "$tool_pid" || t_fail "informer-e2e exited with an error"
tool_pid=""

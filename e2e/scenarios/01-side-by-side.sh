#!/usr/bin/env bash
# A second cluster runs beside the shared one on its own ports and state, and
# `cluster.sh down` stops every process it started and removes its directory,
# leaving the shared cluster untouched.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

cluster_sh="$E2E_DIR/cluster.sh"
parent=$(mktemp -d "${TMPDIR:-/tmp}/provreqd-e2e-second.XXXXXX")
second="$parent/cluster"
marker=$(t_unique e2e-second)

cleanup() {
	if [[ -f "$second/.provreqd-e2e-cluster" ]]; then
		"$cluster_sh" down --dir "$second" >/dev/null 2>&1 || true
	fi
	kubectl delete namespace "$marker" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	rm -rf "$parent"
}
trap cleanup EXIT

t0=$SECONDS
env_lines=$("$cluster_sh" up --dir "$second") || t_fail "second cluster did not start"
t_pass "second cluster up in $((SECONDS - t0))s"
t_contains "up prints the second cluster's KUBECONFIG" "export KUBECONFIG='$second/kubeconfig'" "$env_lines"
t_eq "env prints the same" "$env_lines" "$("$cluster_sh" env --dir "$second")"

# shellcheck source=/dev/null
second_env() { (. "$second/cluster.env" && eval "echo \$$1"); }
for v in ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT SCHEDULER_PORT KWOK_PORT; do
	mine=$(eval "echo \$$v")
	theirs=$(second_env "$v")
	[[ "$mine" != "$theirs" ]] || t_fail "$v is $mine in both clusters"
done
t_pass "no port is shared between the clusters"

k2() { kubectl --kubeconfig "$second/kubeconfig" "$@"; }
t_eq "second apiserver /readyz" ok "$(k2 get --raw /readyz)"
t_eq "first apiserver /readyz" ok "$(kubectl get --raw /readyz)"
"$cluster_sh" status --dir "$second" >/dev/null || t_fail "status of the second cluster: $("$cluster_sh" status --dir "$second" 2>&1)"
t_pass "status reports every component of the second cluster healthy"

k2 create namespace "$marker" >/dev/null
t_eq "an object made in the second cluster exists there" "$marker" \
	"$(k2 get namespace "$marker" -o jsonpath='{.metadata.name}')"
out=$(kubectl get namespace "$marker" 2>&1 || true)
t_contains "and not in the first cluster" NotFound "$out"

# kill -9 and restart of one component keeps its port and data.
old_pid=$(cat "$second/run/kube-apiserver.pid")
"$cluster_sh" restart kube-apiserver --kill --dir "$second" >/dev/null 2>&1 ||
	t_fail "restart kube-apiserver --kill failed"
[[ "$(cat "$second/run/kube-apiserver.pid")" != "$old_pid" ]] || t_fail "apiserver pid unchanged"
kill -0 "$old_pid" 2>/dev/null && t_fail "old apiserver pid $old_pid still alive"
t_eq "after kill -9 and restart the second apiserver is ready" ok "$(k2 get --raw /readyz)"
t_eq "and still has the object" "$marker" \
	"$(k2 get namespace "$marker" -o jsonpath='{.metadata.name}')"

# Every process of the second cluster, by the pids it recorded.
pids=()
for f in "$second"/run/*.pid; do pids+=("$(cat "$f")"); done
t_eq "second cluster recorded 5 pids" 5 "${#pids[@]}"
for p in "${pids[@]}"; do
	kill -0 "$p" 2>/dev/null || t_fail "pid $p of the second cluster is not running"
done

"$cluster_sh" down --dir "$second" >/dev/null 2>&1 || t_fail "down failed"
# A zombie waiting for its parent counts as stopped, and one can be reaped
# between two reads of /proc: only a state read and not Z is a live process.
for p in "${pids[@]}"; do
	st=$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
	if [[ -n "$st" && "$st" != Z ]]; then
		cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80 || true)
		t_fail "pid $p (state $st: $cmd) still runs after down"
	fi
done
t_pass "down stopped every process of the second cluster"
leftover=()
for f in /proc/[0-9]*/cmdline; do
	args=()
	{ mapfile -d '' args <"$f"; } 2>/dev/null || continue
	[[ "${args[*]}" == *"$second/"* ]] && leftover+=("${f#/proc/}")
done
t_eq "no process has the second cluster's directory on its command line" "" "${leftover[*]}"
[[ ! -e "$second" ]] || t_fail "down left $second behind"
t_pass "down removed the second cluster's directory"

"$E2E_DIR/cluster.sh" status --dir "$PROVREQD_E2E_CLUSTER_DIR" >/dev/null ||
	t_fail "the shared cluster is unhealthy after the second went down"
t_pass "the shared cluster is still healthy"
t_done

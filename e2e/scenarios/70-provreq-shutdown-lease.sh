#!/usr/bin/env bash
# Shutdown and leader-election readiness, against the real apiserver:
#  A. The Lease's namespace does not exist: provreqd says so once at warn,
#     /readyz fails with the cause, and provreqd_leader is 0; once the
#     namespace is created it takes the Lease, says so, and /readyz is ok.
#     Fails for a provreqd that stays silent and ready while serving
#     nothing (what the README's command did on a fresh cluster).
#  B. Out of cluster with no --lease-namespace and no POD_NAMESPACE, the
#     Lease goes to kube-system (every cluster has it) and requests are
#     served; with POD_NAME/POD_NAMESPACE set, those name the holder and
#     the namespace.
#  C. SIGTERM while the caches are still listing, against a server that
#     accepts connections and never answers, and against a port where
#     nothing listens: the process ends within 5 s (it used to wait for the
#     first list forever and needed SIGKILL).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr70
lease=$(t_unique lease70)
missing=$(t_unique nons70)
pr_on_exit "kubectl delete namespace $missing --wait=false >/dev/null 2>&1"
pr_on_exit "kubectl -n kube-system delete lease $lease --wait=false >/dev/null 2>&1"

# launch LOG [FLAGS...]: provreqd in the background with leader election on.
launch() {
	local log=$1
	shift
	PR_HTTP="127.0.0.1:$(pr_free_port)"
	"$PR_BIN" run --kubeconfig "$KUBECONFIG" --state-db "$PR_WORK/state.db" --http-addr "$PR_HTTP" \
		--lease-name "$lease" --lease-retry-period 1s --lease-renew-deadline 3s --lease-duration 4s \
		"$@" >"$PR_WORK/$log" 2>&1 &
	PR_PID=$!
}
readyz() { curl -sS --max-time 2 "http://$PR_HTTP/readyz" 2>/dev/null || true; }
readyz_has() { [[ "$(readyz)" == *"$1"* ]]; }
metric() { curl -sS --max-time 2 "http://$PR_HTTP/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
warns() { grep -c 'cannot take the leader-election lease' "$PR_WORK/$1" || true; }

# ------------------------------------------------ A: missing lease namespace
launch a.log --lease-namespace "$missing"
t_wait 20 "A: /readyz fails with the lease's cause" readyz_has "leader-election: cannot take the leader-election lease"
t_contains "A: the cause names the missing namespace" "$missing" "$(readyz)"
sleep 4
t_eq "A: the cause is logged once at warn, not on every retry" 1 "$(warns a.log)"
t_contains "A: at warn level" "warn" "$(grep 'cannot take the leader-election lease' "$PR_WORK/a.log")"
t_eq "A: provreqd_leader is 0" 0 "$(metric provreqd_leader)"
kubectl create namespace "$missing" >/dev/null
t_wait 20 "A: with the namespace there, it leads and /readyz is ok" pr_ready_probe
t_contains "A: recovery is logged" "can be used again" "$(cat "$PR_WORK/a.log")"
t_eq "A: the Lease is held by this process" 1 \
	"$(kubectl -n "$missing" get lease "$lease" -o jsonpath='{.spec.holderIdentity}' | grep -c _)"
pr_stop

# -------------------------------------- B: default namespace out of cluster
launch b.log
t_wait 20 "B: ready with the Lease in kube-system" pr_ready_probe
t_wait 10 "B: the Lease exists in kube-system" kubectl -n kube-system get lease "$lease"
pr_template w 1 1Gi "$(t_unique none70)"
pr_request b check-capacity w 1
t_wait 20 "B: the leader serves requests (a decision on b)" \
	k_is False '{.status.conditions[?(@.type=="Provisioned")].status}' provreq b -n "$PR_NS"
pr_stop
POD_NAME=provreqd-e2e-pod POD_NAMESPACE="$missing" launch b2.log
t_wait 20 "B: ready with POD_NAME/POD_NAMESPACE" pr_ready_probe
t_wait 10 "B: POD_NAME holds the Lease in POD_NAMESPACE" \
	k_is provreqd-e2e-pod '{.spec.holderIdentity}' -n "$missing" lease "$lease"
pr_stop

# ----------------------------------------------- C: SIGTERM during the sync
# A server that accepts and never answers.
port=$(pr_free_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)' "$port" &
sink=$!
pr_on_exit "kill $sink 2>/dev/null"
sigterm_exit() {
	local kc=$1 name=$2 t0 t1 i
	PR_HTTP="127.0.0.1:$(pr_free_port)"
	"$PR_BIN" run --kubeconfig "$kc" --leader-elect=false --state-db "$PR_WORK/c.db" \
		--http-addr "$PR_HTTP" >"$PR_WORK/c-$name.log" 2>&1 &
	PR_PID=$!
	sleep 3
	kill -0 "$PR_PID" || t_fail "C ($name): provreqd exited before the SIGTERM: $(tail -5 "$PR_WORK/c-$name.log")"
	t_contains "C ($name): still listing when signalled" "caches-synced" "$(readyz)"
	t0=$(date +%s%N)
	kill -TERM "$PR_PID"
	for ((i = 0; i < 100; i++)); do
		kill -0 "$PR_PID" 2>/dev/null || break
		sleep 0.1
	done
	t1=$(date +%s%N)
	if kill -0 "$PR_PID" 2>/dev/null; then
		kill -KILL "$PR_PID"
		t_fail "C ($name): still running 10 s after SIGTERM: $(tail -5 "$PR_WORK/c-$name.log")"
	fi
	wait "$PR_PID" && rc=0 || rc=$?
	PR_PID=""
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
	t_eq "C ($name): exit status 0" 0 "$rc"
	awk -v s="$secs" 'BEGIN { exit !(s < 5) }' || t_fail "C ($name): took ${secs}s to exit (limit 5 s)"
	t_pass "C ($name): exited ${secs}s after SIGTERM"
	echo "bench=sigterm_during_sync_exit_s case=$name value=$secs"
}
for kind in silent refused; do
	p=$port
	[[ $kind == refused ]] && p=$(pr_free_port)
	cat >"$PR_WORK/$kind.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: x, cluster: {server: "http://127.0.0.1:$p"}}]
users: [{name: x, user: {token: t}}]
contexts: [{name: x, context: {cluster: x, user: x}}]
current-context: x
EOF
	sigterm_exit "$PR_WORK/$kind.kubeconfig" "$kind"
done
t_done

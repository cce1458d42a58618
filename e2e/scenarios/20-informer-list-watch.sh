#!/usr/bin/env bash
# provreqd's reflector + informer caches against the real apiserver:
#  - 2,000 Nodes and 2,000 Pods made by kubectl (half before the caches
#    start, so they come by the paginated list; half after, by the watch)
#    match the server's name+resourceVersion sets;
#  - updates and deletes keep matching;
#  - kube-apiserver killed with SIGKILL and restarted: the caches reconnect
#    and converge on the server's final state, with nothing lost and nothing
#    counted twice (adds - deletes seen by a handler equals the cache size).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

tool="$PROVREQD_BUILDDIR/e2e/tools/informer-e2e"
[[ -x "$tool" ]] || t_skip "informer-e2e not built (make e2e/tools/informer-e2e)"
cluster_sh="$E2E_DIR/cluster.sh"
marker=$(t_unique e2e-inf)
ns=$marker
ctl=$(mktemp -d "${TMPDIR:-/tmp}/informer-e2e.XXXXXX")
tool_pid=""
N=${PROVREQD_E2E_INFORMER_N:-2000}
half=$((N / 2))

cleanup() {
	if [[ -n "$tool_pid" ]]; then kill "$tool_pid" 2>/dev/null || true; wait "$tool_pid" 2>/dev/null || true; fi
	kubectl delete nodes -l "e2e-informer=$marker" --wait=false >/dev/null 2>&1 || true
	kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
	rm -rf "$ctl"
}
trap cleanup EXIT

# ask CMD: one request to the running informer-e2e, prints its answer.
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

# stat NAME LINE: the value of NAME=... in a stats line.
stat() { sed -n "s/.*\\b$1=\\([0-9-]*\\).*/\\1/p" <<<"$2"; }

# objects FIRST LAST: a List of Nodes and one of Pods, numbered FIRST..LAST.
nodes_list() {
	local i
	printf '{"apiVersion":"v1","kind":"List","items":['
	for ((i = $1; i <= $2; i++)); do
		((i > $1)) && printf ','
		printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s-n%04d","labels":{"e2e-informer":"%s","provreqd.io/node-group":"g%d"}},' "$marker" "$i" "$marker" $((i % 4))
		printf '"spec":{"taints":[{"key":"e2e","value":"x","effect":"NoSchedule"}]}}'
	done
	printf ']}\n'
}
pods_list() {
	local i
	printf '{"apiVersion":"v1","kind":"List","items":['
	for ((i = $1; i <= $2; i++)); do
		((i > $1)) && printf ','
		# A nodeSelector nothing matches keeps them Pending and still.
		printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p%04d","namespace":"%s","labels":{"app":"a%d"}' "$i" "$ns" $((i % 10))
		((i % 10 == 0)) && printf ',"annotations":{"autoscaling.x-k8s.io/consume-provisioning-request":"req-%d"}' $((i % 3))
		printf '},"spec":{"automountServiceAccountToken":false,"nodeSelector":{"e2e-nowhere":"%s"},' "$marker"
		printf '"containers":[{"name":"c","image":"registry.k8s.io/pause:3.9","resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}]}}'
	done
	printf ']}\n'
}

create_objects() {
	nodes_list "$1" "$2" >"$ctl/nodes.json"
	pods_list "$1" "$2" >"$ctl/pods.json"
	kubectl create -f "$ctl/nodes.json" >/dev/null || t_fail "creating nodes $1..$2"
	kubectl create -f "$ctl/pods.json" >/dev/null || t_fail "creating pods $1..$2"
}

kubectl create namespace "$ns" >/dev/null
t_wait 60 "default ServiceAccount in $ns" kubectl -n "$ns" get serviceaccount default

t0=$SECONDS
create_objects 1 "$half"
t_pass "created $half nodes and $half pods before the caches start ($((SECONDS - t0))s)"

"$tool" "$ctl" "e2e-informer=$marker" "$ns" >"$ctl/log" 2>&1 &
tool_pid=$!
t_wait 120 "caches synced" test -f "$ctl/ready"

t0=$SECONDS
create_objects $((half + 1)) "$N"
t_pass "created $((N - half)) more of each while watching ($((SECONDS - t0))s)"

t_eq "nodes: cache matches the server" "MATCH n=$N" "$(ask 'compare nodes')"
t_eq "pods: cache matches the server" "MATCH n=$N" "$(ask 'compare pods')"
# The apiserver's own JSON (managedFields, defaults, Go's escaping) is
# decoded straight from the text, with the same result as through json-c.
t_eq "nodes: decoded from the text, as json-c decodes them" "DECODE n=$N direct=$N json_c=0 differ=0" "$(ask 'decode nodes')"
t_eq "pods: decoded from the text, as json-c decodes them" "DECODE n=$N direct=$N json_c=0 differ=0" "$(ask 'decode pods')"
s=$(ask 'stats pods')
t_eq "pods: one list, no relist" "1 0" "$(stat lists "$s") $(stat relists "$s")"
t_eq "pods: the second half came as watch events" "1" "$(( $(stat events "$s") >= N - half ))"

# Updates and deletes.
kubectl -n "$ns" label pods -l app=a3 e2e-touched=yes >/dev/null
kubectl delete nodes -l "e2e-informer=$marker,provreqd.io/node-group=g1" --wait=false >/dev/null
deleted=$((N / 4))
t_eq "nodes after deletes match" "MATCH n=$((N - deleted))" "$(ask 'compare nodes')"
t_eq "pods after label updates match" "MATCH n=$N" "$(ask 'compare pods')"

# kill -9 the apiserver and start it again with the same flags and ports.
before=$(ask 'stats pods')
"$cluster_sh" stop kube-apiserver --kill --dir "$PROVREQD_E2E_CLUSTER_DIR" >/dev/null
t_pass "kube-apiserver killed (SIGKILL)"
"$cluster_sh" start kube-apiserver --dir "$PROVREQD_E2E_CLUSTER_DIR" >/dev/null ||
	t_fail "kube-apiserver did not start again"
t_wait 120 "kube-apiserver ready again" kubectl get --raw /readyz
# Changes made right away land while the caches may still be backing off:
# they must arrive through the resumed watch or a relist.
kubectl -n "$ns" delete pods -l app=a5 --wait=false >/dev/null
nodes_list $((N + 1)) $((N + 100)) >"$ctl/nodes2.json"
kubectl create -f "$ctl/nodes2.json" >/dev/null
t_eq "nodes match after the restart" "MATCH n=$((N - deleted + 100))" "$(ask 'compare nodes')"
t_eq "pods match after the restart" "MATCH n=$((N - N / 10))" "$(ask 'compare pods')"
after=$(ask 'stats pods')
t_log "pods before restart: $before"
t_log "pods after restart:  $after"
t_eq "pods: the watch was re-established" 1 $(( $(stat watches "$after") > $(stat watches "$before") ))
for r in nodes pods; do
	s=$(ask "stats $r")
	t_eq "$r: adds - deletes seen by handlers equals the cache size (nothing doubled or lost)" \
		"$(stat len "$s")" "$(stat net "$s")"
	t_eq "$r: no object rejected" 0 "$(stat rejected "$s")"
done
ask quit >/dev/null
wait "$tool_pid" || t_fail "informer-e2e exited with an error"
tool_pid=""
t_pass "informer-e2e stopped cleanly"

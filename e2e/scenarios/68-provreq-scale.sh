#!/usr/bin/env bash
# Scale: 200 check-capacity requests created at once (noRetry, so each one
# ends Provisioned=True or Failed=True), with room for exactly 160 of them:
# the 160 oldest get it, the other 40 fail. Then atomic scale-ups of a
# group with a 57-character name (node names of 63, the longest a hostname
# label takes): one request for 1,000 nodes, then one for 500 more. The
# second plan (with its record of the 500 instances that existed
# before it, which it needs to tell its own from them) must be in the
# request's status while it runs, every status write accepted; provreqd is
# then killed with SIGKILL mid scale-up and restarted WITHOUT its state DB
# (what a failover to a replica with an empty database is): it must finish
# the plan from the API alone, with exactly 1,500 Ready nodes (the old
# encoding was refused with 422 and such a restart scaled up twice), and
# without calling its own crash a failure: the plan continues under its
# owner token (no ScaleUpFailed, no rollback, no request backoff; the
# restart used to undo the nodes made and wait 60 s).
#
# Prints the issue's figures as `bench=` lines: wall time from creating the
# requests to every one of them being final, provreqd's CPU seconds
# (utime+stime from /proc/PID/stat) spent in each phase (the 1,000-node one
# a single plan), its peak RSS (VmHWM), the API writes provreqd sent per
# node the plan added (atomic_api_writes_per_node: its driver's creates, its
# marks, status writes, events, lease renewals) and the seconds from the
# last node's Ready transition to the request's Provisioned transition
# (atomic_provisioned_after_last_ready_s, from the apiserver's watch
# events, stamped as they arrive). Figures are printed, never asserted
# (machines here are shared).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

NREQ=${PROVREQD_E2E_SCALE_REQUESTS:-200}
NNODES=${PROVREQD_E2E_SCALE_NODES:-1000} # the first atomic request's
first=$NNODES
rest=$((NNODES / 2))
total=$((first + rest))
FIT=$((NREQ * 4 / 5))         # requests that fit the hand-made nodes
PER_NODE=16                   # 1-CPU pods per 16-CPU node
SMALL_NODES=$(((FIT + PER_NODE - 1) / PER_NODE))
((SMALL_NODES * PER_NODE == FIT)) || t_fail "FIT ($FIT) must be a multiple of $PER_NODE"

pr_init pr68
small=$(t_unique sc68)
big=$(t_unique bg68)
# 57 characters, the longest the kwok driver takes: node names of 63, the
# longest a Node's kubernetes.io/hostname label may carry.
big="$big-$(printf '%*s' $((56 - ${#big})) '' | tr ' ' g)"
PR_GROUPS+=("$small")
pr_group "$big" 2 4Gi "$total"
pr_cloud_config

now() { date +%s.%N; }
# Connections provreqd opened to the apiserver so far (a TLS handshake each).
api_conns() {
	curl -fsS --max-time 5 "http://$PR_HTTP/metrics" 2>/dev/null |
		awk '/^provreqd_api_connections_total / { print $2; f = 1 } END { if (!f) print 0 }'
}
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", b - a }'; }

pr_add_nodes "$small" "$SMALL_NODES" "$PER_NODE" 64Gi
t_wait 120 "$SMALL_NODES nodes of $small are Ready" pr_ready_is "$small" "$SMALL_NODES"
pr_template one 1 1Gi "$small"
pr_template whole 1500m 1Gi "$big"
pr_start --request-backoff-initial 5s
pid=$PR_PID

# ------------------------------------------------- 200 check-capacity
{
	for ((i = 0; i < NREQ; i++)); do
		cat <<EOF
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: req-$(printf '%03d' "$i")
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef: {name: one}
    count: 1
  parameters: {noRetry: "true"}
EOF
	done
} >"$PR_WORK/requests.yaml"

# states: "True/" for Provisioned=True, "/True" for Failed=True, one per line
states() {
	kubectl get provreq -n "$PR_NS" -o \
		'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Provisioned")].status}/{.status.conditions[?(@.type=="Failed")].status}{"\n"}{end}'
}
all_final() {
	local s
	s=$(states | grep -E '^req-' || true)
	[[ "$(grep -cE ' (True/|[A-Za-z]*/True)$' <<<"$s")" == "$NREQ" ]]
}

cpu0=$(pr_cpu_seconds "$pid")
conn0=$(api_conns)
t0=$(now)
kubectl create -n "$PR_NS" -f "$PR_WORK/requests.yaml" >/dev/null
t_created=$(now)
t_wait 600 "all $NREQ check-capacity requests reach a final state" all_final
t1=$(now)
cpu1=$(pr_cpu_seconds "$pid")
s=$(states | grep -E '^req-' | sort)
t_eq "$FIT are Provisioned" "$FIT" "$(grep -c ' True/$' <<<"$s" || true)"
t_eq "$((NREQ - FIT)) Failed" "$((NREQ - FIT))" "$(grep -c ' False/True$' <<<"$s" || true)"
t_eq "the $FIT oldest are the provisioned ones" \
	"$(for ((i = 0; i < FIT; i++)); do printf 'req-%03d True/\n' "$i"; done)" "$(head -n "$FIT" <<<"$s")"
echo "bench=checkcapacity_requests $NREQ"
echo "bench=checkcapacity_create_s $(elapsed "$t0" "$t_created")"
echo "bench=checkcapacity_all_final_s $(elapsed "$t0" "$t1")"
# kubectl creates them one by one (seconds on a busy machine): the last
# one's wait is what the controller adds.
echo "bench=checkcapacity_final_after_last_create_s $(elapsed "$t_created" "$t1")"
echo "bench=checkcapacity_provreqd_cpu_s $(elapsed "$cpu0" "$cpu1")"
echo "bench=checkcapacity_provreqd_vmhwm_kb $(pr_hwm_kb "$pid")"
echo "bench=checkcapacity_api_connections $(($(api_conns) - conn0))"
# Where the time went: provreqd's passes and its apiserver calls.
curl -fsS --max-time 5 "http://$PR_HTTP/metrics" 2>/dev/null |
	awk '/^provreqd_reconcile_duration_seconds_(count|sum)\{controller="provreq"/ { n = $1; sub(/\{.*/, "", n); sub(/provreqd_reconcile_duration_seconds_/, "", n); printf "bench=checkcapacity_passes_%s %s\n", n, $2 }
	     /^provreqd_api_requests_total\{/ { printf "bench=checkcapacity_api %s %s\n", $1, $2 }
	     /^provreqd_api_request_duration_seconds_(count|sum)\{verb="PATCH"/ { printf "bench=checkcapacity_patch %s %s\n", $1, $2 }' || true

# ------------------------------------------------- atomic, to 1,000 nodes
# Writes provreqd sent to the apiserver so far (the drivers' included: they
# call through provreqd's client), every verb but GET/LIST/WATCH.
api_writes() {
	curl -fsS --max-time 5 "http://$PR_HTTP/metrics" 2>/dev/null |
		awk '/^provreqd_api_requests_total\{/ && /verb="(POST|PUT|PATCH|DELETE)"/ { n += $2 } END { print n + 0 }'
}
api_writes_by_verb() {
	curl -fsS --max-time 5 "http://$PR_HTTP/metrics" 2>/dev/null |
		awk '/^provreqd_api_requests_total\{/ && /verb="(POST|PUT|PATCH|DELETE)"/ {
			v = $1; sub(/.*verb="/, "", v); sub(/".*/, "", v); n[v] += $2 }
		     END { for (v in n) printf "%s=%d ", v, n[v]; print "" }'
}
# RFC 3339 (whole seconds, as the apiserver keeps condition times) to epoch.
epoch() { date -d "$1" +%s; }
# The apiserver's watch events, each stamped (jq's `now`) when it arrived:
# the Nodes of $big with their Ready status, and request "first" with its
# Provisioned status, read raw (kubectl's own watch printing fell seconds
# behind 1,000 Nodes on a loaded box). When the last node first turned
# Ready and when the request turned Provisioned are read from these, in
# the same clock, to the millisecond. (The Nodes' own Ready
# lastTransitionTime cannot say it: kwok's node-ready stage takes the
# creation time for it, and may write the condition again from a stale
# view seconds later.)
watch_stamped() {
	local out=$1 path=$2 type=$3 pid
	kubectl get --raw "$path" 2>/dev/null > >(jq --unbuffered -r --arg t "$type" \
		'"\(now) \(.object.metadata.name) \([.object.status.conditions[]? | select(.type == $t) | .status][0] // "-")"' \
		>"$out" 2>/dev/null) &
	pid=$!
	pr_on_exit "kill $pid 2>/dev/null"
}
watch_stamped "$PR_WORK/ready-events" "/api/v1/nodes?watch=1&labelSelector=provreqd.io%2Fnode-group%3D$big" Ready
watch_stamped "$PR_WORK/provisioned-events" \
	"/apis/autoscaling.x-k8s.io/v1/namespaces/$PR_NS/provisioningrequests?watch=1&fieldSelector=metadata.name%3Dfirst" \
	Provisioned
sleep 1
cpu0=$(pr_cpu_seconds "$pid")
conn0=$(api_conns)
w0=$(api_writes)
t_log "writes before the plan: $(api_writes_by_verb)"
t0=$(now)
pr_request first atomic-scale-up whole "$first"
t_wait 900 "first: Provisioned=True/CapacityIsProvisioned" pr_cond_is first Provisioned True/CapacityIsProvisioned
t1=$(now)
cpu1=$(pr_cpu_seconds "$pid")
w1=$(api_writes)
t_log "writes after the plan: $(api_writes_by_verb)"
t_eq "the group has exactly $first nodes" "$first" "$(pr_count "$big")"
# The last node's Ready transition and the request's Provisioned
# transition: first from the watch events (each node's first event with
# Ready True; the request's first with Provisioned True), then as the
# objects record them (whole seconds; e2e/kwok-stages.yaml writes a Node's
# Ready lastTransitionTime as its creationTimestamp, so that second line
# measures from the last node's creation, not its Ready).
t_wait 30 "the watch saw first Provisioned" grep -q ' first True$' "$PR_WORK/provisioned-events"
t_wait 60 "the watch saw every node of the plan Ready" bash -c "[[ \$(awk '\$3 == \"True\" { seen[\$2] = 1 } END { print length(seen) }' '$PR_WORK/ready-events') == $first ]]"
provisioned_ev=$(awk '$2 == "first" && $3 == "True" { printf "%.3f", $1; exit }' "$PR_WORK/provisioned-events")
last_ready_ev=$(awk '$3 == "True" && !($2 in seen) { seen[$2] = $1; if ($1 > m) m = $1 } END { printf "%.3f", m }' \
	"$PR_WORK/ready-events")
last_ready=$(kubectl get nodes -l "$PR_GROUP_LABEL=$big" -o json |
	jq -r '[.items[].status.conditions[]? | select(.type == "Ready" and .status == "True") | .lastTransitionTime] | max')
provisioned_at=$(kubectl get provreq -n "$PR_NS" first -o json |
	jq -r '.status.conditions[] | select(.type == "Provisioned") | .lastTransitionTime')
echo "bench=atomic_nodes $first"
echo "bench=atomic_provisioned_s $(elapsed "$t0" "$t1")"
# One plan of $first nodes (not two smaller ones): provreqd's CPU from the
# request's creation to its Provisioned.
echo "bench=atomic_provreqd_cpu_s $(elapsed "$cpu0" "$cpu1")"
echo "bench=atomic_api_connections $(($(api_conns) - conn0))"
echo "bench=atomic_api_writes $((w1 - w0))"
echo "bench=atomic_api_writes_per_node $(awk -v w="$((w1 - w0))" -v n="$first" 'BEGIN { printf "%.3f", w / n }')"
echo "bench=atomic_provisioned_after_last_ready_s $(awk -v a="$last_ready_ev" -v b="$provisioned_ev" 'BEGIN { printf "%.3f", b - a }')"
echo "bench=atomic_conditions last_ready_transition=$last_ready provisioned_transition=$provisioned_at" \
	"difference_s=$(($(epoch "$provisioned_at") - $(epoch "$last_ready")))"
echo "bench=provreqd_vmhwm_kb $(pr_hwm_kb "$pid")"

# details KEY: the request's provisioningClassDetails keys starting with KEY.
details() {
	kubectl get provreq -n "$PR_NS" "$1" -o json | jq -r --arg k "$2" \
		'.status.provisioningClassDetails // {} | keys[] | select(startswith($k))'
}
plan_shown() { [[ -n "$(details huge scaleUpPhase)" && -n "$(details huge provreqd.io/instances-before)" ]]; }
t0=$(now)
pr_request huge atomic-scale-up whole "$rest"
t_wait 60 "huge: the plan is in the request's status while it runs" plan_shown
size=$(kubectl get provreq -n "$PR_NS" huge -o json | jq '[.status.provisioningClassDetails | to_entries[]
	| select(.key | startswith("provreqd.io/instances-before")) | .value | length] | add')
((size > 0 && size <= 32768)) || t_fail "huge: the record of $first instances takes $size bytes"
t_pass "huge: its record of the $first instances before it takes $size bytes"
echo "bench=atomic_plan_record_bytes $size"
t_eq "huge: phase" increasing "$(kubectl get provreq -n "$PR_NS" huge -o jsonpath='{.status.provisioningClassDetails.scaleUpPhase}' |
	sed 's/waiting-for-nodes/increasing/')"
if grep -E '\b422\b|Unprocessable' "$PR_WORK/provreqd.log" >/dev/null; then
	t_fail "a status write was refused: $(grep -E '\b422\b|Unprocessable' "$PR_WORK/provreqd.log" | head -n 3)"
fi
t_pass "no status write was refused"
# Mid scale-up: kill -9, and come back with an empty state DB.
t_wait 300 "huge: some of its nodes registered" bash -c "(( \$(kubectl get nodes -l $PR_GROUP_LABEL=$big -o name | wc -l) > $first + 20 ))"
pr_kill9
rm -f "$PR_WORK/state.db" "$PR_WORK/state.db-wal" "$PR_WORK/state.db-shm"
t_log "killed with $(pr_count "$big") nodes of $big; restarting without the state DB"
t_restart=$(now)
pr_start
pid=$PR_PID
t_wait 900 "huge: Provisioned=True/CapacityIsProvisioned after the restart" pr_cond_is huge Provisioned True/CapacityIsProvisioned
t1=$(now)
# provreqd's own crash is not the cloud's failure: the plan continues
# (the request never says ScaleUpFailed, no request backoff, no rollback).
if kubectl get events -n "$PR_NS" --field-selector involvedObject.name=huge,reason=ScaleUpFailed -o name | grep -q .; then
	t_fail "huge: the crash was reported as ScaleUpFailed"
fi
t_pass "huge: the crash was not reported as a failure"
echo "bench=kill9_resume_provisioned_after_restart_s $(elapsed "$t_restart" "$t1")"
t_eq "the group has exactly $total nodes: nothing was scaled up twice" "$total" "$(pr_count "$big")"
t_wait 120 "all Ready" pr_ready_is "$big" "$total"
t_eq "first is still Provisioned" True/CapacityIsProvisioned "$(pr_cond first Provisioned)"
echo "bench=atomic_second_with_restart_s $(elapsed "$t0" "$t1")"
t_done

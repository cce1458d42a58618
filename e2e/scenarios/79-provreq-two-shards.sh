#!/usr/bin/env bash
# Two shards on one cluster: two `provreqd run` processes with
# --processor-instance shard-a and shard-b, each with its own state db and
# no leader election, serve the requests that name them (processorInstance).
# Capacity is shared, so neither may hand out room the other booked:
#
#  A. shard-a books 3 cpu on each of three 4-cpu nodes (a-job, 3 pods of
#     3 cpu); then shard-b, running since before that booking, is asked for
#     2 more such pods (b-job): it must answer CapacityIsNotFound. (It used
#     to answer CapacityIsFound: it read other shards' bookings only when it
#     started.) When a-job's booking expires, b-job gets the room on its
#     retry, and shard-a's next request (a-two) is refused while b-job's
#     booking holds.
#  B. Racing: in each of ROUNDS rounds one request per shard is created in
#     one apply, each for 2 pods of 3 cpu on a group of two 4-cpu nodes,
#     room for one of them; both shards decide at once (without an agreed
#     order, about half the rounds were answered CapacityIsFound twice).
#  C. Racing retries: a request of shard-a holds that room; one request per
#     shard waits for it (retrying every 2-4 s); the holder is deleted and
#     both retry into the freed room.
#
# The booking ledger both shards share holds a-job's booking while it
# lasts and drops it when it ends.
# Judged from the apiserver only, after each answer: for the group, the
# pods of the requests that are Provisioned=True with a booking still
# holding, against the pods its Nodes' allocatable cpu holds. Prints
#   bench=shard_double_bookings value=N
# with N the pods (of 3 cpu) booked beyond what the nodes hold, summed over
# every check, and fails when N > 0.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

ROUNDS=${PR79_ROUNDS:-10}
RETRY_ROUNDS=${PR79_RETRY_ROUNDS:-4}

pr_init pr79
ga=$(t_unique sa79)
gr=$(t_unique sr79)
PR_GROUPS+=("$ga" "$gr")
pr_add_nodes "$ga" 3 4 8Gi
pr_add_nodes "$gr" 2 4 8Gi
t_wait 60 "3 nodes of $ga are Ready" pr_ready_is "$ga" 3
t_wait 60 "2 nodes of $gr are Ready" pr_ready_is "$gr" 2
pr_template t3 3 1Gi "$ga"
pr_template r3 3 1Gi "$gr"

# ---------------------------------------------------------------- shards
declare -A SH_PID SH_HTTP
shard_start() {
	local name=$1 port
	shift
	port=$(pr_free_port)
	SH_HTTP[$name]="127.0.0.1:$port"
	"$PR_BIN" run --kubeconfig "$KUBECONFIG" --leader-elect=false --state-db "$PR_WORK/$name.db" \
		--http-addr "${SH_HTTP[$name]}" --processor-instance "$name" "$@" >>"$PR_WORK/$name.log" 2>&1 &
	SH_PID[$name]=$!
	t_wait 30 "$name (pid ${SH_PID[$name]}) is ready" shard_ready "$name"
}

# shellcheck disable=SC2317 # used through t_wait
shard_ready() {
	kill -0 "${SH_PID[$1]}" 2>/dev/null || t_fail "$1 exited: $(tail -n 20 "$PR_WORK/$1.log")"
	curl -fsS --max-time 2 "http://${SH_HTTP[$1]}/readyz" >/dev/null 2>&1
}

# shellcheck disable=SC2317 # run by pr_cleanup, which has rc
shards_stop() {
	local name i
	for name in "${!SH_PID[@]}"; do
		kill -TERM "${SH_PID[$name]}" 2>/dev/null || continue
		for ((i = 0; i < 100; i++)); do
			kill -0 "${SH_PID[$name]}" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "${SH_PID[$name]}" 2>/dev/null || true
		wait "${SH_PID[$name]}" 2>/dev/null || true
	done
	if (($1 != 0 && $1 != 77)); then
		for name in "${!SH_PID[@]}"; do
			t_log "--- $name log (last 40 lines)"
			tail -n 40 "$PR_WORK/$name.log"
		done
	fi
}
pr_on_exit 'shards_stop "$rc"'

# ------------------------------------------------------------ the judge
# Pods of 3 cpu a group's Ready nodes hold (from their allocatable cpu).
group_slots() {
	kubectl get nodes -l "$PR_GROUP_LABEL=$1" \
		-o 'jsonpath={range .items[*]}{.status.allocatable.cpu}{"\n"}{end}' |
		awk '{ c = $1; if (c ~ /m$/) { sub(/m$/, "", c); c = c / 1000 } s += int(c / 3) } END { print s + 0 }'
}

# Pods booked on a group: the requests of the namespace whose pods are the
# group's (their template), Provisioned=True and none of BookingExpired,
# Failed, CapacityRevoked True (the booking holds).
group_booked() {
	kubectl get provreq -n "$PR_NS" -o json | jq --arg t "$1" '
		[.items[]
		 | select(.spec.podSets[0].podTemplateRef.name == $t)
		 | select([.status.conditions[]? | select(.type == "Provisioned" and .status == "True")] | length > 0)
		 | select([.status.conditions[]?
		           | select((.type == "BookingExpired" or .type == "Failed" or .type == "CapacityRevoked")
		                    and .status == "True")] | length == 0)
		 | .spec.podSets | map(.count) | add] | add // 0'
}

DOUBLE=0
# judge GROUP TEMPLATE WHAT: add what GROUP has booked beyond its nodes.
judge() {
	local slots booked over
	slots=$(group_slots "$1")
	booked=$(group_booked "$2")
	over=$((booked > slots ? booked - slots : 0))
	DOUBLE=$((DOUBLE + over))
	t_log "$3: $booked pods booked on $1, its nodes hold $slots"
}

# some_answer NAME...: each request has a Provisioned condition.
some_answer() {
	local n
	for n in "$@"; do
		[[ -n "$(pr_cond "$n" Provisioned)" ]] || return 1
	done
}


shard_start shard-a --booking-ttl 40s --request-backoff-initial 2s --request-backoff-max 4s
shard_start shard-b --booking-ttl 40s --request-backoff-initial 2s --request-backoff-max 4s

# ---------------------------------------------------- A: one after another
pr_request a-job check-capacity t3 3 processorInstance=shard-a
t_wait 30 "A: shard-a books a-job" pr_cond_is a-job Provisioned True/CapacityIsFound
pr_request b-job check-capacity t3 2 processorInstance=shard-b
t_wait 30 "A: shard-b answers b-job" some_answer b-job
judge "$ga" t3 "A: b-job $(pr_cond b-job Provisioned) beside a-job's booking"
t_eq "A: shard-a's request is untouched" True/CapacityIsFound "$(pr_cond a-job Provisioned)"

# Both shards keep the booking ledger (operator.md, "The booking ledger"):
# a-job's booking has its entry there, recorded before its status.
# shellcheck disable=SC2317 # used through t_wait
ledger_has() {
	kubectl -n kube-system get configmap provreqd-bookings -o json 2>/dev/null |
		jq -e --arg u "$1" '.data[$u] // empty | fromjson | .nodes | length > 0' >/dev/null
}
# shellcheck disable=SC2317 # used through t_wait
ledger_lacks() { ! ledger_has "$1"; }
a_uid=$(kubectl get provreq -n "$PR_NS" a-job -o 'jsonpath={.metadata.uid}')
t_wait 10 "A: the booking ledger holds a-job's booking" ledger_has "$a_uid"

# The booking ends: b-job gets the room on a retry; then shard-a refuses
# a-two while b-job's booking holds.
t_wait 60 "A: a-job's booking expires" pr_cond_is a-job BookingExpired True/CapacityReservationTimeExpired
t_wait 10 "A: its ledger entry goes with it" ledger_lacks "$a_uid"
t_wait 30 "A: b-job is provisioned on a retry" pr_cond_is b-job Provisioned True/CapacityIsFound
pr_request a-two check-capacity t3 2 processorInstance=shard-a noRetry=true
t_wait 30 "A: shard-a answers a-two" some_answer a-two
judge "$ga" t3 "A: a-two $(pr_cond a-two Provisioned) beside b-job's booking"

# ---------------------------------------------------------- B: racing
for ((i = 1; i <= ROUNDS; i++)); do
	# Alternate which shard's request sorts first (same second: by name).
	if ((i % 2)); then first=shard-a second=shard-b; else first=shard-b second=shard-a; fi
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: race$i-1}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: r3}, count: 2}]
  parameters: {processorInstance: "$first", noRetry: "true"}
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: race$i-2}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: r3}, count: 2}]
  parameters: {processorInstance: "$second", noRetry: "true"}
EOF
	t_wait 30 "B$i: both shards answer" some_answer "race$i-1" "race$i-2"
	judge "$gr" r3 "B$i: $(pr_cond "race$i-1" Provisioned) ($first) / $(pr_cond "race$i-2" Provisioned) ($second)"
	kubectl delete provreq -n "$PR_NS" "race$i-1" "race$i-2" --wait=true >/dev/null
done

# ---------------------------------------------------- C: racing retries
for ((i = 1; i <= RETRY_ROUNDS; i++)); do
	pr_request "hold$i" check-capacity r3 2 processorInstance=shard-a
	t_wait 30 "C$i: hold$i books the room" pr_cond_is "hold$i" Provisioned True/CapacityIsFound
	pr_request "wait$i-a" check-capacity r3 2 processorInstance=shard-a
	pr_request "wait$i-b" check-capacity r3 2 processorInstance=shard-b
	t_wait 30 "C$i: both are answered" some_answer "wait$i-a" "wait$i-b"
	judge "$gr" r3 "C$i: $(pr_cond "wait$i-a" Provisioned) (shard-a) / $(pr_cond "wait$i-b" Provisioned) (shard-b) beside hold$i"
	kubectl delete provreq -n "$PR_NS" "hold$i" --wait=true >/dev/null
	t_wait 30 "C$i: one of them gets the room" bash -c "kubectl get provreq -n $PR_NS wait$i-a wait$i-b \
		-o 'jsonpath={.items[*].status.conditions[?(@.type==\"Provisioned\")].status}' | grep -q True"
	sleep 5 # (retries every 2-4 s: the other one has had its go)
	judge "$gr" r3 "C$i: $(pr_cond "wait$i-a" Provisioned) (shard-a) / $(pr_cond "wait$i-b" Provisioned) (shard-b)"
	kubectl delete provreq -n "$PR_NS" "wait$i-a" "wait$i-b" --wait=true >/dev/null
done

echo "bench=shard_double_bookings value=$DOUBLE"
t_eq "no capacity was handed out twice" 0 "$DOUBLE"
t_done

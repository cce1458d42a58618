# shellcheck shell=bash
# Helpers for the ProvisioningRequest scenarios (e2e/scenarios/6x-*.sh),
# sourced after testlib.sh. Each scenario gets its own namespace, its own
# node groups (unique names, so nodes of other runs never count), its own
# `provreqd run` with a state db in a temporary directory, and a trap that
# stops provreqd, deletes what the scenario made and, when the scenario
# failed, shows the end of provreqd's log and the requests' conditions.
#
#   pr_init PREFIX                 namespace, work dir, trap
#   pr_group NAME CPU MEM MAX      a kwok Node template (node group) in the scenario's template dir
#   pr_cloud_config [FAULTS]       write the kwok driver config (templateDir + faults YAML)
#   pr_start [FLAGS...]            start provreqd run (the driver $PR_DRIVER_SO, default kwok, loaded
#                                  when $PR_WORK/cloud.yaml exists)
#   pr_stop / pr_kill9             SIGTERM (waits) / SIGKILL
#   pr_template NAME CPU MEM GROUP a PodTemplate whose pods need CPU/MEM and select GROUP's nodes
#   pr_request NAME CLASS TMPL N [PARAM=VALUE...]
#   pr_cond NAME TYPE              "Status/Reason" of a condition ("" when absent)
#   pr_cond_is NAME TYPE WANT      for t_wait
#   pr_msg NAME TYPE               the condition's message
#   pr_add_nodes GROUP N CPU MEM   Nodes made by hand (kwok fake nodes, labelled with GROUP)
#   pr_count GROUP / pr_ready GROUP  nodes of a group / Ready ones
#   pr_consumer NAME REQUEST TMPL  a Pod with the consume annotations
#   pr_on_exit COMMAND             run COMMAND (eval'd) first when the scenario ends
#   pr_watch_nodes GROUP           record every ADDED/DELETED node of GROUP in $PR_WORK/watch-GROUP
#   pr_burst_yaml PREFIX N TMPL PODS [FIRST]
#                                  N atomic requests PREFIX-NN of PODS pods each, one YAML stream
#   pr_states PREFIX               "name Status/Reason" of Provisioned, each request PREFIX-*
#   pr_all_provisioned PREFIX N    for t_wait: N requests PREFIX-* are Provisioned=True
#   pr_burst PREFIX N TMPL PODS SECONDS
#                                  a burst made at once, waited for; PR_BURST_S = seconds to the last
#   pr_first_provisioned PREFIX    the earliest Provisioned=True time of PREFIX-* (RFC 3339)
#   pr_watch FILE KUBECTL-ARGS...  `kubectl ARGS --watch` events into FILE, from once the watch is open
#   pr_watch_added FILE [BEFORE]   objects a pr_watch FILE saw ADDED (created before the RFC 3339 time BEFORE)
#   pr_own_scaleups PREFIX         requests PREFIX-* Provisioned on the new nodes of their own scale-up

PR_BIN="$PROVREQD_BUILDDIR/provreqd"
PR_KWOK_SO="$PROVREQD_BUILDDIR/cloud/kwok/.libs/kwok.so"
PR_DRIVER_SO=""
PR_GROUP_LABEL=provreqd.io/node-group
PR_PID=""
PR_NS=""
PR_WORK=""
PR_GROUPS=()
PR_RUNS=0
PR_EXIT_HOOKS=()

pr_init() {
	[[ -x "$PR_BIN" ]] || t_fail "build first: $PR_BIN is missing (make all)"
	[[ -f "$PR_KWOK_SO" ]] || t_fail "build first: $PR_KWOK_SO is missing (make all)"
	PR_WORK=$(mktemp -d "${TMPDIR:-/tmp}/provreqd-e2e-$1.XXXXXX")
	mkdir -p "$PR_WORK/templates"
	PR_NS=$(t_unique "$1")
	trap pr_cleanup EXIT
	kubectl create namespace "$PR_NS" >/dev/null
	t_log "namespace $PR_NS, work dir $PR_WORK"
}

# shellcheck disable=SC2317 # invoked by the trap
pr_cleanup() {
	local rc=$? g h
	set +e
	for h in "${PR_EXIT_HOOKS[@]}"; do
		eval "$h"
	done
	if ((rc != 0 && rc != 77)); then
		t_log "--- requests in $PR_NS"
		kubectl get provreq -n "$PR_NS" -o wide 2>&1 | head -n 30
		kubectl get provreq -n "$PR_NS" -o \
			'jsonpath={range .items[*]}{.metadata.name}{"\n"}{range .status.conditions[*]}{"    "}{.type}={.status} {.reason}: {.message}{"\n"}{end}{end}' \
			2>&1 | head -n 60
		for g in "${PR_GROUPS[@]}"; do
			t_log "--- nodes of $g: $(pr_count "$g") ($(pr_ready "$g") Ready)"
		done
		if [[ -f "$PR_WORK/provreqd.log" ]]; then
			t_log "--- provreqd log (last 60 lines)"
			tail -n 60 "$PR_WORK/provreqd.log"
		fi
		if [[ -f "$PR_WORK/state.db" ]] && command -v sqlite3 >/dev/null; then
			t_log "--- scale-up intents"
			sqlite3 "$PR_WORK/state.db" 'SELECT plan_id, node_group, delta, phase, last_error FROM scaleup_intent' 2>&1
		fi
	fi
	pr_stop
	[[ -n "$PR_NS" ]] && kubectl delete namespace "$PR_NS" --wait=false >/dev/null 2>&1
	for g in "${PR_GROUPS[@]}"; do
		kubectl delete nodes -l "$PR_GROUP_LABEL=$g" --wait=false >/dev/null 2>&1
	done
	[[ -n "$PR_WORK" ]] && rm -rf "$PR_WORK"
	exit "$rc"
}

pr_on_exit() { PR_EXIT_HOOKS+=("$1"); }

# pr_replica NAME LEASE [FLAGS...]: a leader-electing provreqd replica
# with the driver $PR_DRIVER_SO (default kwok) and $PR_WORK/cloud.yaml, its own state DB and log
# ($PR_WORK/replica-NAME.log), on Lease LEASE (4 s / 3 s / 1 s) in
# kube-system. Its pid and metrics address go to PR_REPLICA_PID[NAME] and
# PR_REPLICA_HTTP[NAME]; it is continued (if stopped) and killed on exit.
declare -gA PR_REPLICA_PID PR_REPLICA_HTTP
pr_replica() {
	local r=$1 lease=$2
	shift 2
	PR_REPLICA_HTTP[$r]="127.0.0.1:$(pr_free_port)"
	POD_NAME="provreqd-$r" "$PR_BIN" run --kubeconfig "$KUBECONFIG" --state-db "$PR_WORK/state-$r.db" \
		--http-addr "${PR_REPLICA_HTTP[$r]}" --cloud-driver "${PR_DRIVER_SO:-$PR_KWOK_SO}" --cloud-config "$PR_WORK/cloud.yaml" \
		--lease-namespace kube-system --lease-name "$lease" --lease-duration 4s --lease-renew-deadline 3s \
		--lease-retry-period 1s "$@" >>"$PR_WORK/replica-$r.log" 2>&1 &
	PR_REPLICA_PID[$r]=$!
	pr_on_exit "kill -CONT ${PR_REPLICA_PID[$r]} 2>/dev/null; kill -9 ${PR_REPLICA_PID[$r]} 2>/dev/null"
}

# pr_replica_leads NAME / pr_replica_stands_by NAME: what its metrics say.
pr_replica_leader_gauge() {
	curl -sS --max-time 2 "http://${PR_REPLICA_HTTP[$1]}/metrics" 2>/dev/null | awk '$1 == "provreqd_leader" { print $2 }'
}
pr_replica_leads() { [[ "$(pr_replica_leader_gauge "$1")" == 1 ]]; }
pr_replica_stands_by() { [[ "$(pr_replica_leader_gauge "$1")" == 0 ]]; }

# pr_watch_nodes GROUP: "ADDED name" / "MODIFIED name" / "DELETED name"
# lines for every node of GROUP, from now until the scenario ends.
pr_watch_nodes() {
	local pid
	kubectl get nodes -l "$PR_GROUP_LABEL=$1" --watch --output-watch-events --no-headers \
		-o custom-columns=E:.type,N:.object.metadata.name >"$PR_WORK/watch-$1" 2>&1 &
	pid=$!
	pr_on_exit "kill $pid 2>/dev/null; wait $pid 2>/dev/null"
}

# pr_added GROUP: how many nodes of GROUP were created since pr_watch_nodes.
pr_added() { grep -c '^ADDED ' "$PR_WORK/watch-$1" || true; }

# pr_all_deleted GROUP NAME...: every named node had a DELETED event.
pr_created_names() { awk '$1 == "ADDED" { print $2 }' "$PR_WORK/watch-$1"; }
pr_was_deleted() { awk -v n="$2" '$1 == "DELETED" && $2 == n { f = 1 } END { exit !f }' "$PR_WORK/watch-$1"; }

# pr_group NAME CPU MEM MAX: a node group of the kwok driver.
pr_group() {
	local name=$1 cpu=$2 mem=$3 max=$4
	PR_GROUPS+=("$name")
	cat >"$PR_WORK/templates/$name.yaml" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    provreqd.io/min-size: "0"
    provreqd.io/max-size: "$max"
  labels:
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node.kubernetes.io/instance-type: kwok-e2e
    type: kwok
status:
  capacity: {cpu: "$cpu", memory: $mem, pods: "110"}
EOF
}

# pr_cloud_config [FAULTS]: FAULTS is the YAML list under `faults:`.
pr_cloud_config() {
	{
		printf 'templateDir: %s\n' "$PR_WORK/templates"
		if [[ -n "${1:-}" ]]; then
			printf 'faults:\n%s\n' "$1"
		fi
	} >"$PR_WORK/cloud.yaml"
}

# pr_free_port: a port no socket on this machine has, in any state, below
# the ephemeral range (32768-60999): a port in that range may be taken by an
# outgoing connection between this check and provreqd's bind (a start that
# then fails with "address in use").
pr_free_port() {
	local p hex
	while :; do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
		printf -v hex ':%04X ' "$p"
		if ! awk -v h="$hex" 'FNR > 1 && index($2 " ", h) { f = 1 } END { exit !f }' \
			/proc/net/tcp /proc/net/tcp6 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# pr_running: provreqd's process is alive.
pr_running() { [[ -n "$PR_PID" ]] && kill -0 "$PR_PID" 2>/dev/null; }

# pr_start [FLAGS...]: provreqd run against the cluster, its log appended
# to $PR_WORK/provreqd.log; returns when its first pass is done.
pr_start() {
	local drv=() port
	if [[ -f "$PR_WORK/cloud.yaml" ]]; then
		drv=(--cloud-driver "${PR_DRIVER_SO:-$PR_KWOK_SO}" --cloud-config "$PR_WORK/cloud.yaml")
	fi
	port=$(pr_free_port)
	PR_HTTP="127.0.0.1:$port"
	PR_RUNS=$((PR_RUNS + 1))
	echo "=== provreqd start #$PR_RUNS: $*" >>"$PR_WORK/provreqd.log"
	"$PR_BIN" run --kubeconfig "$KUBECONFIG" --leader-elect=false --state-db "$PR_WORK/state.db" \
		--http-addr "$PR_HTTP" "${drv[@]}" "$@" >>"$PR_WORK/provreqd.log" 2>&1 &
	PR_PID=$!
	t_wait 30 "provreqd (pid $PR_PID) is ready" pr_ready_probe
}

# shellcheck disable=SC2317 # used through t_wait
pr_ready_probe() {
	pr_running || t_fail "provreqd exited: $(tail -n 20 "$PR_WORK/provreqd.log")"
	curl -fsS --max-time 2 "http://$PR_HTTP/readyz" >/dev/null 2>&1
}

pr_stop() {
	local i
	[[ -n "$PR_PID" ]] || return 0
	if kill -TERM "$PR_PID" 2>/dev/null; then
		for ((i = 0; i < 100; i++)); do
			kill -0 "$PR_PID" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$PR_PID" 2>/dev/null || true
	fi
	wait "$PR_PID" 2>/dev/null || true
	PR_PID=""
	return 0
}

pr_kill9() {
	[[ -n "$PR_PID" ]] || return 0
	kill -KILL "$PR_PID" 2>/dev/null || true
	wait "$PR_PID" 2>/dev/null || true
	echo "=== provreqd killed with SIGKILL" >>"$PR_WORK/provreqd.log"
	PR_PID=""
}

# pr_template NAME CPU MEM GROUP: pods that request CPU/MEM and may run
# only on nodes of GROUP (so other nodes in the cluster never count).
pr_template() {
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: v1
kind: PodTemplate
metadata:
  name: $1
template:
  spec:
    nodeSelector:
      $PR_GROUP_LABEL: $4
    containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources:
        requests: {cpu: "$2", memory: "$3"}
EOF
}

# pr_request NAME CLASS TEMPLATE COUNT [KEY=VALUE...]
pr_request() {
	local name=$1 class=$2 tmpl=$3 count=$4 kv params=""
	shift 4
	case "$class" in
	check-capacity) class=check-capacity.autoscaling.x-k8s.io ;;
	atomic-scale-up) class=best-effort-atomic-scale-up.autoscaling.x-k8s.io ;;
	esac
	if (($#)); then
		params=$'\n  parameters:'
		for kv in "$@"; do
			params+=$'\n'"    ${kv%%=*}: \"${kv#*=}\""
		done
	fi
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: $name
spec:
  provisioningClassName: $class
  podSets:
  - podTemplateRef: {name: $tmpl}
    count: $count$params
EOF
}

# pr_cond NAME TYPE: "Status/Reason", or "" without that condition.
pr_cond() {
	kubectl get provreq -n "$PR_NS" "$1" \
		-o "jsonpath={.status.conditions[?(@.type==\"$2\")].status}/{.status.conditions[?(@.type==\"$2\")].reason}" \
		2>/dev/null | sed 's|^/$||'
}

pr_cond_is() { [[ "$(pr_cond "$1" "$2")" == "$3" ]]; }

pr_msg() {
	kubectl get provreq -n "$PR_NS" "$1" -o "jsonpath={.status.conditions[?(@.type==\"$2\")].message}"
}

# pr_add_nodes GROUP N CPU MEM: fake Nodes as the kwok driver makes them;
# the kwok controller makes them Ready.
pr_add_nodes() {
	local g=$1 n=$2 cpu=$3 mem=$4 i name
	for ((i = 0; i < n; i++)); do
		name="$g-m$(printf '%03d' "$i")-$RANDOM"
		kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {$PR_GROUP_LABEL: $g, kubernetes.io/hostname: $name, type: kwok}
spec:
  providerID: kwok://$name
status:
  capacity: {cpu: "$cpu", memory: $mem, pods: "110"}
  allocatable: {cpu: "$cpu", memory: $mem, pods: "110"}
EOF
	done
}

pr_nodes() {
	kubectl get nodes -l "$PR_GROUP_LABEL=$1" -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}'
}

pr_count() { pr_nodes "$1" | grep -c . || true; }

pr_ready() {
	kubectl get nodes -l "$PR_GROUP_LABEL=$1" \
		-o 'jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
		grep -c '^True$' || true
}

pr_count_is() { [[ "$(pr_count "$1")" == "$2" ]]; }
pr_ready_is() { [[ "$(pr_ready "$1")" == "$2" && "$(pr_count "$1")" == "$2" ]]; }

# pr_consumer NAME REQUEST TEMPLATE-NAME CPU MEM GROUP: a Pod that consumes
# the request's capacity (the annotations Kueue puts on its pods).
pr_consumer() {
	kubectl apply -n "$PR_NS" -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  annotations:
    autoscaling.x-k8s.io/consume-provisioning-request: $2
    autoscaling.x-k8s.io/provisioning-class-name: $3
spec:
  nodeSelector:
    $PR_GROUP_LABEL: $6
  tolerations:
  - {key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {cpu: "$4", memory: "$5"}
EOF
}

# pr_stays SECONDS WHAT COMMAND...: COMMAND keeps succeeding for SECONDS
# (used to show that something does NOT happen, e.g. a second scale-up).
pr_stays() {
	local limit=$1 what=$2 start=$SECONDS
	shift 2
	while ((SECONDS - start < limit)); do
		"$@" >/dev/null 2>&1 || t_fail "$what: stopped holding after $((SECONDS - start))s"
		sleep 0.5
	done
	t_pass "$what (held ${limit}s)"
}

# pr_cpu_seconds PID: user+system CPU time of a process, in seconds.
pr_cpu_seconds() {
	local tck
	tck=$(getconf CLK_TCK)
	# fields 14 and 15 of /proc/PID/stat, after the ")" that ends comm
	sed 's/.*) //' "/proc/$1/stat" | awk -v t="$tck" '{ printf "%.2f\n", ($12 + $13) / t }'
}

# pr_hwm_kb PID: peak resident set size (VmHWM) in KiB.
pr_hwm_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# pr_burst_yaml PREFIX N TEMPLATE PODS [FIRST]: N atomic requests named
# PREFIX-FIRST, PREFIX-FIRST+1, ... (two digits), each of PODS pods of
# TEMPLATE, as one YAML stream for one `kubectl create`.
pr_burst_yaml() {
	local i first=${5:-0}
	for ((i = first; i < first + $2; i++)); do
		cat <<EOF
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: $1-$(printf '%02d' "$i")
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets:
  - podTemplateRef: {name: $3}
    count: $4
EOF
	done
}

# pr_states PREFIX: "name Status/Reason" of the Provisioned condition of
# every request whose name begins with PREFIX-, sorted by name.
pr_states() {
	kubectl get provreq -n "$PR_NS" -o \
		'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Provisioned")].status}/{.status.conditions[?(@.type=="Provisioned")].reason}{"\n"}{end}' |
		grep -E "^$1-" | sort
}
pr_provisioned_count() { pr_states "$1" | grep -c ' True/CapacityIsProvisioned$' || true; }
pr_all_provisioned() { [[ "$(pr_provisioned_count "$1")" == "$2" ]]; }

# pr_burst PREFIX N TEMPLATE PODS SECONDS: N atomic requests of PODS pods
# (pr_burst_yaml) created in one call, then waited for (at most SECONDS)
# until all are Provisioned=True. PR_BURST_S: the seconds from before the
# create to the poll that saw the last one Provisioned.
pr_burst() {
	local t0
	pr_burst_yaml "$1" "$2" "$3" "$4" >"$PR_WORK/burst-$1.yaml"
	t0=$(t_now)
	kubectl create -n "$PR_NS" -f "$PR_WORK/burst-$1.yaml" >/dev/null
	t_wait "$5" "all $2 requests $1-* (atomic, $4 pods each) are Provisioned" pr_all_provisioned "$1" "$2"
	PR_BURST_S=$(t_elapsed "$t0" "$(t_now)")
}

# pr_first_provisioned PREFIX: the earliest lastTransitionTime of a
# Provisioned=True condition among the requests PREFIX-*.
pr_first_provisioned() {
	kubectl get provreq -n "$PR_NS" -o \
		'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Provisioned")].status} {.status.conditions[?(@.type=="Provisioned")].lastTransitionTime}{"\n"}{end}' |
		awk -v p="$1-" 'index($1, p) == 1 && $2 == "True" { print $3 }' | sort | head -n 1
}

# pr_watch FILE KUBECTL-ARGS...: `kubectl KUBECTL-ARGS --watch
# --output-watch-events` (ARGS: a get with its own -o) writing to FILE from
# the background until the scenario ends; returns once the watch is open
# (kubectl's -v=6 log names the request with watch=true), so every object
# made from then on has its ADDED event in FILE.
pr_watch() {
	local f=$1 pid
	shift
	kubectl "$@" --watch --output-watch-events -v=6 >"$f" 2>"$f.log" &
	pid=$!
	pr_on_exit "kill $pid 2>/dev/null; wait $pid 2>/dev/null"
	t_wait 30 "the watch of $(basename "$f") is open" grep -q 'watch=true' "$f.log"
}

# pr_watch_added FILE [BEFORE]: how many distinct objects the pr_watch
# FILE saw ADDED (its -o custom-columns E:.type,N:name,T:creationTimestamp),
# only those created before the RFC 3339 time BEFORE when given.
pr_watch_added() {
	awk -v f="${2:-}" '$1 == "ADDED" && (f == "" || $3 < f) { print $2 }' "$1" | sort -u | grep -c . || true
}

# pr_own_scaleups PREFIX: how many requests PREFIX-* say they were
# Provisioned on new nodes of their own scale-up ("N new nodes in GROUP
# are ready"), not on room that existed ("capacity for all pods already
# exists": in a burst on an empty group, another plan's Nodes).
pr_own_scaleups() {
	kubectl get provreq -n "$PR_NS" -o \
		'jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Provisioned")].status} {.status.conditions[?(@.type=="Provisioned")].message}{"\n"}{end}' |
		awk -v p="$1-" 'index($1, p) == 1 && $2 == "True" && / new nodes? .* are ready; capacity for all pods is booked/' | grep -c . || true
}

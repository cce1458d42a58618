#!/usr/bin/env bash
# kill -9 trials against the asynchronous cloud (the kwok driver's async
# mode: increases return before instances exist, instances appear without a
# node name, their Nodes register seconds later; in every other trial
# instances fail, increases are refused as stockouts and calls fail
# transiently). Each trial creates an atomic request (noRetry) for 1-4
# nodes of a fresh group, kills provreqd with SIGKILL at a random moment of
# the scale-up, restarts it on the same state DB and waits for the request
# to end. Then, once the cloud has settled:
#   orphans  = nodes or requested instances of a request that did not end
#              Provisioned (a rollback that left something behind)
#   doubles  = nodes beyond what a Provisioned request asked for
#   stuck    = requests without an outcome 150 s after the restart
# All three must be zero; the figures are printed as bench= lines, among
# them the recovery time of the trials without faults (default backoffs:
# a crash is not a cloud failure and costs no backoff).
# E2E_KILL9_TRIALS sets the number of trials (default 30).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

trials=${E2E_KILL9_TRIALS:-30}
pr_init pr71
state="$PR_WORK/cloud-state.json"
# Default backoffs: a crash must not cost a backoff (each trial has a fresh
# group, and noRetry requests are not retried).
flags=(--provision-timeout 1m --scale-down=false)

cloud_yaml() {
	local seed=$1 faulty=$2
	{
		printf 'templateDir: %s\n' "$PR_WORK/templates"
		printf 'async:\n  stateFile: %s\n  seed: %d\n  createDelayMs: 1000\n  registerDelayMs: 2000\n' "$state" "$seed"
		printf '  deleteDelayMs: 1000\n'
		if ((faulty)); then
			printf '  instanceFailurePercent: 25\n  stockoutPercent: 10\n  transientPercent: 15\n'
		fi
	} >"$PR_WORK/cloud.yaml"
}

# pending GROUP: instances the cloud was asked for that have no Node yet.
pending() { { grep -o "\"group\":\"$1\"" "$state" 2>/dev/null || true; } | grep -c . || true; }
present() { echo $(($(pr_count "$1") + $(pending "$1"))); }
outcome() {
	if pr_cond_is "$1" Provisioned True/CapacityIsProvisioned; then
		echo provisioned
	elif [[ "$(pr_cond "$1" Failed)" == True/* ]]; then
		echo failed
	else
		echo open
	fi
}
ended() { [[ "$(outcome "$1")" != open ]]; }

orphans=0 doubles=0 stuck=0 provisioned=0 failed=0 rec_sum=0 rec_max=0 clean_max=0
for ((i = 1; i <= trials; i++)); do
	g=$(t_unique k9g$i)
	faulty=$((i % 2 == 0))
	count=$((1 + RANDOM % 4))
	pr_group "$g" 4 8Gi 10
	pr_template "w$i" 3 1Gi "$g"
	cloud_yaml "$i" "$faulty"
	pr_start "${flags[@]}"
	pr_request "r$i" atomic-scale-up "w$i" "$count" noRetry=true
	# Kill at a random moment of the first 4 s: before the plan, around
	# the cloud call, while instances appear or register.
	sleep "$((RANDOM % 4)).$((RANDOM % 10))"
	pr_kill9
	t0=$(date +%s%N)
	pr_start "${flags[@]}"
	limit=$((SECONDS + 150))
	until ended "r$i" || ((SECONDS >= limit)); do sleep 0.5; done
	t1=$(date +%s%N)
	out=$(outcome "r$i")
	rec=$(((t1 - t0) / 1000000))
	rec_sum=$((rec_sum + rec))
	((rec > rec_max)) && rec_max=$rec
	((!faulty && rec > clean_max)) && clean_max=$rec
	if [[ $out == open ]]; then
		stuck=$((stuck + 1))
		t_log "trial $i: r$i has no outcome 150 s after the restart: $(pr_cond "r$i" Provisioned) $(pr_msg "r$i" Provisioned)"
		cp "$PR_WORK/provreqd.log" "${TMPDIR:-/tmp}/provreqd-e2e-71-stuck-$i.log" 2>/dev/null || true
		command -v gdb >/dev/null && gdb -p "$PR_PID" -batch -ex "thread apply all bt" \
			>"${TMPDIR:-/tmp}/provreqd-e2e-71-stuck-$i.bt" 2>&1 || true
	fi
	# Let the cloud settle: deletes finish, nothing is pending.
	want=0
	[[ $out == provisioned ]] && want=$count
	limit=$((SECONDS + 30))
	until [[ "$(present "$g")" == "$want" && "$(pending "$g")" == 0 ]] || ((SECONDS >= limit)); do sleep 0.5; done
	have=$(present "$g")
	case $out in
	provisioned)
		provisioned=$((provisioned + 1))
		if ((have > count)); then
			doubles=$((doubles + 1))
			t_log "trial $i: r$i asked for $count nodes of $g and the group holds $have"
		fi
		;;
	*)
		[[ $out == failed ]] && failed=$((failed + 1))
		if ((have > 0)); then
			orphans=$((orphans + have))
			t_log "trial $i: r$i ended $out and $g still holds $have nodes or instances"
		fi
		;;
	esac
	t_log "trial $i ($([[ $faulty == 1 ]] && echo faults || echo clean)): $count nodes, $out after ${rec} ms; $g holds $have"
	pr_stop
	kubectl delete provreq -n "$PR_NS" "r$i" --wait=false >/dev/null 2>&1 || true
done

echo "bench=async_kill9_trials value=$trials"
echo "bench=async_kill9_provisioned value=$provisioned"
echo "bench=async_kill9_failed value=$failed"
echo "bench=async_kill9_orphan_instances value=$orphans"
echo "bench=async_kill9_double_scale_ups value=$doubles"
echo "bench=async_kill9_stuck_plans value=$stuck"
echo "bench=async_kill9_recovery_mean_s value=$(awk -v s="$rec_sum" -v n="$trials" 'BEGIN { printf "%.1f", s / n / 1000 }')"
echo "bench=async_kill9_recovery_max_s value=$(awk -v s="$rec_max" 'BEGIN { printf "%.1f", s / 1000 }')"
echo "bench=async_kill9_recovery_max_without_faults_s value=$(awk -v s="$clean_max" 'BEGIN { printf "%.1f", s / 1000 }')"
t_eq "no orphan instances after $trials kill -9 trials" 0 "$orphans"
t_eq "no double scale-up" 0 "$doubles"
t_eq "no stuck plan" 0 "$stuck"
t_eq "no crash or sanitizer report in provreqd's log" 0 \
	"$({ grep -E 'runtime error|AddressSanitizer|Segmentation' "$PR_WORK/provreqd.log" || true; } | grep -c . || true)"
t_done

#!/usr/bin/env bash
# Run provreqd's end-to-end scenarios against a real local control plane and
# report TAP, closing with "N passed, N failed" (", N skipped" when some were).
#
# Usage: run.sh [SCENARIO...]
#   SCENARIO is a file in e2e/scenarios/ (with or without .sh) or a path;
#   default: every e2e/scenarios/*.sh, in name order.
#
# It builds (or reuses) the binaries, brings one cluster up that every
# scenario shares, and always tears it down. A scenario is a bash script run
# with these in its environment:
#   KUBECONFIG                cluster-admin kubeconfig of the shared cluster
#   PROVREQD_SRCDIR           the source tree
#   PROVREQD_BUILDDIR         the build tree (where provreqd was built)
#   PROVREQD_E2E_CLUSTER_DIR  the cluster's directory (cluster.env, pki/, logs/)
#   PROVREQD_E2E_BINDIR       kubectl, etcdctl, ... (also first in PATH)
# It exits 0 when it passed, 77 when it does not apply here (skipped), and
# anything else when it failed. It removes the objects it created. A scenario
# that leaves the cluster unhealthy gets the next one a fresh cluster.
#
# Environment: PROVREQD_E2E_TIMEOUT (seconds per scenario, default 900);
# PROVREQD_E2E_LOGDIR (where component logs are copied when a scenario
# fails, default $PROVREQD_BUILDDIR/e2e-logs).
set -euo pipefail

# The whole script is one compound command, read before it runs, so editing
# this file while it runs cannot change what it does.
{

# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

PROVREQD_SRCDIR=$(cd "${PROVREQD_SRCDIR:-$E2E_DIR/..}" && pwd)
PROVREQD_BUILDDIR=$(cd "${PROVREQD_BUILDDIR:-$PROVREQD_SRCDIR}" && pwd)
export PROVREQD_SRCDIR PROVREQD_BUILDDIR
timeout_s=${PROVREQD_E2E_TIMEOUT:-900}
logdir=${PROVREQD_E2E_LOGDIR:-$PROVREQD_BUILDDIR/e2e-logs}

case "${1:-}" in
-h | --help)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac

scenarios=()
if (($#)); then
	for a in "$@"; do
		if [[ -f "$a" ]]; then
			scenarios+=("$(cd "$(dirname "$a")" && pwd)/$(basename "$a")")
		elif [[ -f "$E2E_DIR/scenarios/$a" ]]; then
			scenarios+=("$E2E_DIR/scenarios/$a")
		elif [[ -f "$E2E_DIR/scenarios/$a.sh" ]]; then
			scenarios+=("$E2E_DIR/scenarios/$a.sh")
		else
			e2e_die "no scenario '$a' in $E2E_DIR/scenarios"
		fi
	done
else
	for s in "$E2E_DIR"/scenarios/*.sh; do
		[[ -f "$s" ]] && scenarios+=("$s")
	done
fi

passed=0 failed=0 skipped=0 n=0
echo "1..${#scenarios[@]}"

summary() {
	local line="$passed passed, $failed failed"
	((skipped)) && line+=", $skipped skipped"
	echo "$line"
}

if ((${#scenarios[@]} == 0)); then
	echo "# no scenarios in $E2E_DIR/scenarios"
	summary
	exit 0
fi

"$E2E_DIR/build-binaries.sh" 2>&1 | sed -u 's/^/# /' || {
	echo "# building the control plane binaries failed"
	for s in "${scenarios[@]}"; do
		n=$((n + 1))
		failed=$((failed + 1))
		echo "not ok $n - $(basename "$s" .sh) # binaries did not build"
	done
	summary
	exit 1
}

bindir=$(e2e_bindir)
export PROVREQD_E2E_BINDIR=$bindir
export PATH="$bindir:$PATH"

work=$(mktemp -d "${TMPDIR:-/tmp}/provreqd-e2e-run.XXXXXX")
cluster="$work/cluster"

cluster_up() {
	local out
	if out=$("$E2E_DIR/cluster.sh" up --dir "$cluster" 2> >(sed -u 's/^/# /' >&2)); then
		eval "$out"
		return 0
	fi
	return 1
}

cluster_down() {
	[[ -f "$cluster/.provreqd-e2e-cluster" ]] || return 0
	"$E2E_DIR/cluster.sh" down --dir "$cluster" 2>&1 | sed -u 's/^/# /' || true
}

save_logs() {
	[[ -d "$cluster/logs" ]] || return 0
	mkdir -p "$logdir"
	cp "$cluster"/logs/*.log "$logdir"/ 2>/dev/null || true
	echo "# component logs copied to $logdir"
}

# shellcheck disable=SC2317 # invoked by the trap
finish() {
	cluster_down
	rm -rf "$work"
}
trap finish EXIT
trap 'exit 130' INT TERM

have_cluster=0
if cluster_up; then
	have_cluster=1
else
	echo "# the local control plane did not start"
	# cluster.sh keeps the logs of a failed start.
	save_logs
fi

for s in "${scenarios[@]}"; do
	n=$((n + 1))
	name=$(basename "$s" .sh)
	if ((!have_cluster)); then
		failed=$((failed + 1))
		echo "not ok $n - $name # no cluster"
		continue
	fi
	echo "# --- $name"
	t0=$SECONDS
	failfile="$work/fail.$n"
	rm -f "$failfile"
	set +e
	PROVREQD_E2E_FAILFILE="$failfile" timeout --kill-after=10 "$timeout_s" bash "$s" </dev/null 2>&1 |
		tee "$work/scenario.out" | sed -u 's/^/#   /'
	rc=${PIPESTATUS[0]}
	# A check that failed where its output was discarded (inside a
	# t_wait probe) says why here.
	if ((rc != 0)) && [[ -s "$failfile" ]] && ! grep -q '^FAIL: ' "$work/scenario.out"; then
		sed 's/^/#   /' "$failfile"
	fi
	set -e
	took=$((SECONDS - t0))
	case "$rc" in
	0)
		passed=$((passed + 1))
		echo "ok $n - $name (${took}s)"
		;;
	77)
		skipped=$((skipped + 1))
		# testlib's t_skip prints "SKIP: reason".
		reason=$(sed -n 's/^SKIP: //p' "$work/scenario.out" | tail -n1)
		echo "ok $n - $name # SKIP${reason:+ $reason}"
		;;
	*)
		failed=$((failed + 1))
		if ((rc == 124)); then
			echo "not ok $n - $name (timed out after ${timeout_s}s)"
		else
			echo "not ok $n - $name (exit $rc, ${took}s)"
		fi
		save_logs
		;;
	esac
	# A scenario may stop components on purpose; the next one gets a healthy
	# cluster either way.
	if ! "$E2E_DIR/cluster.sh" status --dir "$cluster" >/dev/null 2>&1; then
		echo "# cluster unhealthy after $name; starting a fresh one"
		"$E2E_DIR/cluster.sh" status --dir "$cluster" 2>&1 | sed 's/^/# /' || true
		cluster_down
		rm -rf "$cluster"
		have_cluster=0
		cluster_up && have_cluster=1
	fi
done

# Tear down before the summary so that it is the last line printed.
finish
trap - EXIT
summary
((failed == 0))
exit
}

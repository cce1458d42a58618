# shellcheck shell=bash
# Helpers for e2e scenarios (sourced). A scenario is a sequence of checks; the
# first failing check ends it with a message saying what was expected and what
# was seen. See run.sh for the environment a scenario gets.

set -euo pipefail

: "${KUBECONFIG:?run scenarios through e2e/run.sh (KUBECONFIG is not set)}"
: "${PROVREQD_E2E_CLUSTER_DIR:?run scenarios through e2e/run.sh}"

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=/dev/null
. "$PROVREQD_E2E_CLUSTER_DIR/cluster.env"
# shellcheck source=versions.env
. "$E2E_DIR/versions.env"

_t_checks=0

t_log() { printf '%s\n' "$*"; }

# (Also into run.sh's file for the scenario: a check failing inside a probe
# whose output t_wait discards still says why. Not a descriptor kept open:
# processes a scenario starts would inherit it and hold run.sh's pipe.)
t_fail() {
	printf 'FAIL: %s\n' "$*"
	if [[ -n "${PROVREQD_E2E_FAILFILE:-}" ]]; then
		printf 'FAIL: %s\n' "$*" >>"$PROVREQD_E2E_FAILFILE"
	fi
	exit 1
}

t_pass() {
	_t_checks=$((_t_checks + 1))
	printf 'ok: %s\n' "$*"
}

# t_skip REASON: the scenario does not apply here.
t_skip() {
	printf 'SKIP: %s\n' "$*"
	exit 77
}

# t_eq WHAT EXPECTED ACTUAL
t_eq() {
	if [[ "$2" == "$3" ]]; then
		t_pass "$1"
	else
		t_fail "$1: expected '$2', got '$3'"
	fi
}

# t_contains WHAT NEEDLE HAYSTACK
t_contains() {
	if [[ "$3" == *"$2"* ]]; then
		t_pass "$1"
	else
		t_fail "$1: expected output containing '$2', got: $3"
	fi
}

# t_wait SECONDS WHAT COMMAND...: run COMMAND until it succeeds.
t_wait() {
	local limit=$1 what=$2 start=$SECONDS
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS - start < limit)) || t_fail "$what: not true after ${limit}s"
		sleep 0.25
	done
	t_pass "$what ($((SECONDS - start))s)"
}

# t_unique PREFIX: a name unlikely to clash with a concurrent run.
t_unique() {
	printf '%s-%s%04x\n' "$1" "$(date +%s | tail -c 6)" $((RANDOM))
}

# Admin HTTPS to the apiserver with curl; prints the body, then the HTTP code
# on the last line.
t_curl() {
	curl -sS --max-time 10 --cacert "$PROVREQD_E2E_CLUSTER_DIR/pki/ca.crt" \
		-w '\n%{http_code}' "$@"
}

# k_is EXPECTED JSONPATH GET-ARGS...: `kubectl get GET-ARGS -o jsonpath=...`
# prints EXPECTED. For t_wait, which re-runs it each time.
k_is() {
	local want=$1 path=$2
	shift 2
	[[ "$(kubectl get "$@" -o "jsonpath=$path" 2>/dev/null)" == "$want" ]]
}

# k_gone GET-ARGS...: the object no longer exists.
k_gone() {
	local out
	out=$(kubectl get "$@" 2>&1) && return 1
	[[ "$out" == *NotFound* || "$out" == *"not found"* ]]
}

# t_now: the time now, in seconds with fractions (for t_elapsed).
t_now() { date +%s.%N; }

# t_elapsed FROM TO: TO - FROM in seconds, one decimal.
t_elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f\n", b - a }'; }

# t_done: the closing line of a scenario that passed.
t_done() { t_log "$_t_checks checks passed"; }

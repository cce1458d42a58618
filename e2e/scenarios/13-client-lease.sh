#!/usr/bin/env bash
# Two processes contend for a coordination.k8s.io/v1 Lease through the C
# client: one leads, the other waits; after the leader is killed with
# SIGKILL (no release) the other takes over within the lease duration
# (15 s) plus its retry periods; a leader stopped with SIGTERM releases the
# lease (holderIdentity cleared).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

kc="$PROVREQD_BUILDDIR/e2e/tools/kube-e2e-client"
[[ -x "$kc" ]] || t_fail "$kc is not built (make all)"
ns=$(t_unique e2e-lease)
tmp=$(mktemp -d)
pa='' pb=''
cleanup() {
	[[ -n "$pa" ]] && kill -9 "$pa" 2>/dev/null
	[[ -n "$pb" ]] && kill -9 "$pb" 2>/dev/null
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
kubectl create namespace "$ns" >/dev/null

holder() { kubectl -n "$ns" get lease provreqd -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }

"$kc" lease "$ns" provreqd cand-a >"$tmp/a.out" 2>"$tmp/a.err" &
pa=$!
t_wait 20 "candidate a leads" grep -q '^LEADING cand-a' "$tmp/a.out"
"$kc" lease "$ns" provreqd cand-b >"$tmp/b.out" 2>"$tmp/b.err" &
pb=$!
t_wait 10 "candidate b is running" grep -q '^CANDIDATE cand-b' "$tmp/b.out"
sleep 5
grep -q LEADING "$tmp/b.out" && t_fail "b leads while a renews: $(cat "$tmp/b.out")"
t_pass "b does not lead while a renews"
t_eq "the Lease names a" cand-a "$(holder)"
t_eq "lease duration is 15 s" 15 "$(kubectl -n "$ns" get lease provreqd -o jsonpath='{.spec.leaseDurationSeconds}')"
rt=$(kubectl -n "$ns" get lease provreqd -o jsonpath='{.spec.renewTime}')
[[ "$rt" =~ \.[0-9]{6}Z$ ]] || t_fail "renewTime '$rt' is not a MicroTime"
t_pass "renewTime is a MicroTime ($rt)"

kill -9 "$pa"
wait "$pa" 2>/dev/null || true
pa=
killed_ms=$(($(date +%s%N) / 1000000))
t_wait 25 "b takes over after a is killed" grep -q '^LEADING cand-b' "$tmp/b.out"
led_ms=$(awk '/^LEADING cand-b/ {print $3; exit}' "$tmp/b.out")
took=$((led_ms - killed_ms))
t_log "takeover took ${took} ms after SIGKILL"
# b restarts its 15 s count when it last saw a renewal, which it notices up
# to one (jittered, 2.4 s) retry period late, and checks once per retry
# period: the bound is the lease duration plus two retry periods.
((took <= 15000 + 2 * 2400 + 1000)) || t_fail "takeover took ${took} ms, more than lease duration + 2 retry periods"
t_pass "takeover within the lease duration plus retry periods (${took} ms)"
t_eq "the Lease names b" cand-b "$(holder)"
t_eq "leaseTransitions counted the takeover" 1 "$(kubectl -n "$ns" get lease provreqd -o jsonpath='{.spec.leaseTransitions}')"

kill -TERM "$pb"
wait "$pb" || t_fail "b did not exit cleanly: $(cat "$tmp/b.err")"
pb=
t_contains "b reported it stopped leading" "STOPPED cand-b" "$(cat "$tmp/b.out")"
t_eq "a released lease has no holder" "" "$(holder)"
t_done

#!/bin/sh
# The deterministic simulation with several actors (two replicas sharing a
# Lease, stalls past it, a second shard, an outside actor; issue 24), a
# small count for every `make check`: `make check-dst SEEDS=N` runs more.
#   1. the mixed mode over DST_MIXED_SEEDS seeds (default 200) reports no
#      violation;
#   2. the oracle still sees an unfenced build: replicas that ignore their
#      lease make a request scale up twice (or worse) within 50 seeds.
set -u
: "${PRD_BUILDDIR:?}"
unset DST_ACTORS DST_SEEDS # (make check sets single mode for tests/dst/dst)
dst="$PRD_BUILDDIR/tests/dst/dst"
fail=0
"$dst" --actors mixed --first 1 --seeds "${DST_MIXED_SEEDS:-200}" || {
	echo "FAIL: the mixed mode found violations (reproduce with the lines above)"
	fail=1
}
out=$("$dst" --actors replicas --unfenced --first 1 --seeds 50 2>&1)
rc=$?
echo "$out" | tail -n 3
if [ "$rc" -ne 1 ]; then
	echo "FAIL: an unfenced build was not caught in 50 seeds (exit $rc)"
	fail=1
fi
exit "$fail"

#!/bin/sh
# `provreqd simulate` on the bundled example: the README's main command.
# Checks the outcome a user of the example is promised in docs.
set -eu
: "${PRD_BUILDDIR:?}" "${PRD_SRCDIR:?}"
cd "$PRD_SRCDIR"
out=$("$PRD_BUILDDIR/provreqd" simulate --cluster templates/examples/simulate --until 2h \
	--cloud-driver "$PRD_BUILDDIR/cloud/kwok/.libs/kwok.so" 2>&1)
echo "$out"
fail=0
row() { echo "$out" | awk -v ns="$1" -v n="$2" '$1 == ns && $2 == n'; }
expect() { # namespace name pattern
	row "$1" "$2" | grep -qE -- "$3" || { echo "FAIL: $1/$2 does not match: $3"; fail=1; }
}
# check-capacity that fits: provisioned, then the 10-minute booking expires unused.
expect team-a fits-now 'check-capacity +True +True +True +CapacityReservationTimeExpired'
# check-capacity with no room fails when its ValidUntilSeconds window closes.
expect team-a no-room 'False +True +Expired: not provisioned within ValidUntilSeconds=600'
# atomic scale-up: the general group grows and the request is provisioned.
expect team-b training-run 'atomic-scale-up +True +True'
# too big for any group, noRetry: failed at once, with the reason per group.
expect team-b too-big 'False +True +CapacityIsNotFound: no node group can provide all'
# fine-tune needs two kinds of nodes: 2 GPU nodes and 1 general node, in one plan.
expect team-b fine-tune 'atomic-scale-up +True +True'
# Columns: group min max target peak added removed. fine-tune goes first
# (training-run does not fit while fits-now holds its booking): general +1
# for its launcher, gpu +2 for its workers. When both bookings have
# expired, training-run's 12 pods of 3 cpu find room for 5 on existing
# nodes (2 + 2 on the workers, 1 on fine-tune's idle general node, which it
# books) and general grows by 7. Every new node is removed once the booking
# it was made for expired unused and nobody else books it: 8 and 2.
echo "$out" | grep -qE '^general +0 +10 +0 +8 +8 +8 ' || { echo "FAIL: general did not grow by 8 and shrink back"; fail=1; }
echo "$out" | grep -qE '^gpu +0 +4 +0 +2 +2 +2 ' || { echo "FAIL: gpu did not grow by 2 and shrink back"; fail=1; }
echo "$out" | grep -qE '^gold +0 +5 +0 +0 +0 +0 ' || { echo "FAIL: gold group was touched"; fail=1; }
echo "$out" | grep -q '2 scale-ups started, 2 succeeded, 0 rolled back; 10 idle nodes scaled down' ||
	{ echo "FAIL: scale-up/scale-down counts"; fail=1; }
# Scale-down must never take a node someone still holds a booking on.
echo "$out" | grep -q 'BookedNodesRemoved' && { echo "FAIL: a booked node was scaled down"; fail=1; }

# Bad input gets a clear error and exit status 1, not a crash.
printf 'apiVersion: v1\nkind: Node\nmetadata: {name: x\n' > "${TMPDIR:-/tmp}/prd-bad-$$.yaml"
if "$PRD_BUILDDIR/provreqd" simulate --cluster "${TMPDIR:-/tmp}/prd-bad-$$.yaml" \
	--cloud-driver "$PRD_BUILDDIR/cloud/kwok/.libs/kwok.so" > "${TMPDIR:-/tmp}/prd-bad-$$.out" 2>&1; then
	echo "FAIL: malformed YAML accepted"; fail=1
fi
grep -q "line 4, column 1" "${TMPDIR:-/tmp}/prd-bad-$$.out" || { echo "FAIL: no position in YAML error:"; cat "${TMPDIR:-/tmp}/prd-bad-$$.out"; fail=1; }
rm -f "${TMPDIR:-/tmp}/prd-bad-$$.yaml" "${TMPDIR:-/tmp}/prd-bad-$$.out"
if "$PRD_BUILDDIR/provreqd" simulate --cluster /nonexistent > /dev/null 2>&1; then
	echo "FAIL: missing cluster accepted"; fail=1
fi
exit $fail

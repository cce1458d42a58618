#!/usr/bin/env bash
# Bookings (--booking-ttl 20s): a Provisioned request whose pods never come
# gets BookingExpired=True/CapacityReservationTimeExpired when the booking
# runs out, not before; a booked node that is deleted before the pods
# arrive gives CapacityRevoked=True.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr67
grp=$(t_unique bk67)
rev=$(t_unique rv67)
PR_GROUPS+=("$grp" "$rev")
pr_add_nodes "$grp" 1 4 8Gi
pr_add_nodes "$rev" 2 4 8Gi
t_wait 60 "the node of $grp is Ready" pr_ready_is "$grp" 1
t_wait 60 "the 2 nodes of $rev are Ready" pr_ready_is "$rev" 2
pr_template a 1 1Gi "$grp"
pr_template b 3 1Gi "$rev"
pr_start --booking-ttl 20s --request-backoff-initial 2s

# --- expiry
pr_request unused check-capacity a 2
t_wait 30 "unused: Provisioned=True/CapacityIsFound" pr_cond_is unused Provisioned True/CapacityIsFound
t_contains "the message gives the booking time" "booked for 20s" "$(pr_msg unused Provisioned)"
provisioned_at=$(date +%s)

# --- revocation: 2 pods of 3 CPU, one on each node of $rev
pr_request revoked check-capacity b 2
t_wait 30 "revoked: Provisioned=True/CapacityIsFound" pr_cond_is revoked Provisioned True/CapacityIsFound
victim=$(pr_nodes "$rev" | sed -n 1p)
kubectl delete node "$victim" >/dev/null
t_wait 30 "revoked: CapacityRevoked=True after $victim was deleted" pr_cond_is revoked CapacityRevoked True/BookedNodesRemoved
t_contains "the message counts the lost nodes" "1 booked node disappeared before the pods arrived" \
	"$(pr_msg revoked CapacityRevoked)"
t_eq "revoked: not BookingExpired" "" "$(pr_cond revoked BookingExpired)"

# The booking of "unused" holds until 20s after it was made.
while (($(date +%s) - provisioned_at < 15)); do
	[[ -z "$(pr_cond unused BookingExpired)" ]] ||
		t_fail "unused: BookingExpired after $(($(date +%s) - provisioned_at))s, before the 20s TTL"
	sleep 1
done
t_pass "unused: the booking still holds 15s after provisioning"
t_wait 30 "unused: BookingExpired=True/CapacityReservationTimeExpired" \
	pr_cond_is unused BookingExpired True/CapacityReservationTimeExpired
t_contains "the message says nothing came" "the booking expired after 20s with 0 of 2 pods scheduled" \
	"$(pr_msg unused BookingExpired)"
t_eq "unused: still Provisioned=True" True/CapacityIsFound "$(pr_cond unused Provisioned)"
t_eq "unused: not Failed" "" "$(pr_cond unused Failed)"

# The expired booking frees the capacity: a new request for all 4 CPU fits.
pr_template c 3900m 1Gi "$grp"
pr_request after check-capacity c 1
t_wait 30 "after: the freed capacity is found" pr_cond_is after Provisioned True/CapacityIsFound
t_done

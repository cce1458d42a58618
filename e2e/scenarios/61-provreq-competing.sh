#!/usr/bin/env bash
# Two check-capacity requests competing for the same free capacity: only
# the older one gets it (creationTimestamp decides, not the name: the
# younger one sorts first by name), the other stays Provisioned=False while
# the booking holds, and gets the capacity once the booking has expired.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr61
grp=$(t_unique cc61)
PR_GROUPS+=("$grp")

# Room for 4 pods of 1.5 CPU; each request wants 3.
pr_add_nodes "$grp" 2 4 8Gi
t_wait 60 "2 nodes of $grp are Ready" pr_ready_is "$grp" 2
pr_template t 1500m 1Gi "$grp"

# Both exist before provreqd first looks, so neither is earlier by luck.
# creationTimestamp has one-second resolution: the younger is created in a
# later second than the older.
pr_request zz-older check-capacity t 3
older_ts=$(kubectl get provreq -n "$PR_NS" zz-older -o 'jsonpath={.metadata.creationTimestamp}')
t_wait 5 "the clock moves past the older request's second" \
	bash -c "[[ \$(date -u +%Y-%m-%dT%H:%M:%SZ) > '$older_ts' ]]"
pr_request aa-younger check-capacity t 3
younger_ts=$(kubectl get provreq -n "$PR_NS" aa-younger -o 'jsonpath={.metadata.creationTimestamp}')
[[ "$younger_ts" > "$older_ts" ]] || t_fail "creation timestamps $older_ts / $younger_ts are not ordered"
t_pass "zz-older ($older_ts) is older than aa-younger ($younger_ts)"

pr_start --booking-ttl 20s --request-backoff-initial 2s --request-backoff-max 4s
t_wait 30 "zz-older: Provisioned=True/CapacityIsFound" pr_cond_is zz-older Provisioned True/CapacityIsFound
t_wait 30 "aa-younger: Provisioned=False/CapacityIsNotFound" pr_cond_is aa-younger Provisioned False/CapacityIsNotFound
t_contains "aa-younger: only 1 of 3 fits beside the booking" "only 1 of 3 pods fit" "$(pr_msg aa-younger Provisioned)"

# While the booking holds (20s from the older one's transition), retries
# every 2-4s do not give the younger one the capacity.
pr_stays 10 "aa-younger stays not provisioned while zz-older's booking holds" \
	pr_cond_is aa-younger Provisioned False/CapacityIsNotFound
t_eq "zz-older keeps its capacity" True/CapacityIsFound "$(pr_cond zz-older Provisioned)"

# The booking runs out unused; then the younger one gets the capacity.
t_wait 40 "zz-older: BookingExpired=True/CapacityReservationTimeExpired" \
	pr_cond_is zz-older BookingExpired True/CapacityReservationTimeExpired
t_wait 30 "aa-younger: Provisioned=True/CapacityIsFound after the booking expired" \
	pr_cond_is aa-younger Provisioned True/CapacityIsFound
t_done

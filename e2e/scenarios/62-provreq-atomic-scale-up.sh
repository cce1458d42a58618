#!/usr/bin/env bash
# Atomic scale-up through the kwok driver: a node group grows by exactly the
# nodes the pods need, all of them Ready, and the request is
# Provisioned=True/CapacityIsProvisioned; consumer pods carrying the consume
# annotations are then scheduled by the real kube-scheduler onto the new
# nodes, and the request gets BookingExpired=True/CapacityBookingConsumed.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr62
grp=$(t_unique at62)
other=$(t_unique ot62)
# Pods of 3 CPU: one per 4-CPU node of $grp, so 3 pods need exactly 3 nodes.
pr_group "$grp" 4 8Gi 10
# A second group the pods cannot use (their nodeSelector names $grp):
# it must not be touched.
pr_group "$other" 16 64Gi 10
pr_cloud_config
pr_start --request-backoff-initial 2s

pr_template worker 3 1Gi "$grp"
pr_request job atomic-scale-up worker 3
t_wait 30 "Accepted=True" pr_cond_is job Accepted True/Accepted
t_wait 90 "Provisioned=True/CapacityIsProvisioned" pr_cond_is job Provisioned True/CapacityIsProvisioned
t_eq "the group grew by exactly 3 nodes" 3 "$(pr_count "$grp")"
t_eq "all 3 are Ready" 3 "$(pr_ready "$grp")"
t_contains "the message names the group" "3 new nodes in $grp are ready" "$(pr_msg job Provisioned)"
t_eq "the other group is untouched" 0 "$(pr_count "$other")"
t_contains "an Event records the scale-up" "CapacityIsProvisioned" \
	"$(kubectl get events -n "$PR_NS" --field-selector involvedObject.name=job -o 'jsonpath={.items[*].reason}')"
pr_stays 6 "no further scale-up while the booking holds" pr_count_is "$grp" 3

# Consumers: the pods the capacity was for, as Kueue would create them.
mapfile -t new_nodes < <(pr_nodes "$grp" | sort)
for i in 0 1 2; do
	pr_consumer "worker-$i" job worker 3 1Gi "$grp"
done
scheduled() {
	[[ "$(kubectl get pods -n "$PR_NS" -o 'jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c .)" == 3 ]]
}
t_wait 60 "kube-scheduler binds all 3 consumer pods" scheduled
mapfile -t used < <(kubectl get pods -n "$PR_NS" -o 'jsonpath={range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort)
t_eq "the pods run on the new nodes, one each" "${new_nodes[*]}" "${used[*]}"
t_wait 30 "BookingExpired=True/CapacityBookingConsumed" pr_cond_is job BookingExpired True/CapacityBookingConsumed
t_contains "the message says the booking is released" "all 3 consumer pods are scheduled" "$(pr_msg job BookingExpired)"
t_eq "still Provisioned" True/CapacityIsProvisioned "$(pr_cond job Provisioned)"
t_eq "no node was added or removed" 3 "$(pr_count "$grp")"
t_done

#!/usr/bin/env bash
# A provisioning class served by a cloud driver, through the controller:
# the worked example driver (docs/examples/driver, built here as an
# integrator would, against the public header) serves
# instant.example.provreqd.io and provisions a request of at most maxPods
# pods (3 here) at once. A request of 2 pods is Provisioned with the
# driver's reason; one of 4 is answered not-provisioned with the driver's
# message; a request whose class nobody serves (a typo) is left alone,
# logged once and counted. A second copy of the driver serving the same
# class is refused at start with a message naming both.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr75
so="$PR_WORK/example-driver.so"
"${CC:-cc}" -std=c11 -Wall -Wextra -fPIC -shared -O2 -I "$PROVREQD_SRCDIR/cloud" \
	-Wl,--version-script="$PROVREQD_SRCDIR/docs/examples/driver/exports.map" \
	-o "$so" "$PROVREQD_SRCDIR/docs/examples/driver/example-driver.c"
t_pass "the example driver builds against the public header"
printf '# id min max target cpu memory pods\nsmall 0 10 0 4 16Gi 110\nmaxPods 3\n' >"$PR_WORK/cloud.yaml"
out=$("$PR_BIN" check-driver "$so" --cloud-config "$PR_WORK/cloud.yaml" 2>&1)
t_contains "check-driver shows the class" "extra provisioning classes: instant.example.provreqd.io" "$out"

PR_DRIVER_SO="$so"
pr_start
pr_template w 1 1Gi nowhere
pr_request small instant.example.provreqd.io w 2
pr_request big instant.example.provreqd.io w 4
pr_request typo instnat.example.provreqd.io w 1
t_wait 20 "small: Provisioned=True with the driver's reason" pr_cond_is small Provisioned True/InstantCapacity
t_contains "small: the driver's message" "the example driver provisioned 2 pods at once (at most 3)" "$(pr_msg small Provisioned)"
t_wait 20 "big: Provisioned=False with the driver's reason" pr_cond_is big Provisioned False/TooManyPods
t_contains "big: the driver's message" "provisions at most 3 pods per request; this one asks for 4" "$(pr_msg big Provisioned)"
t_eq "big: not Failed (retried with backoff)" "" "$(pr_cond big Failed)"
t_contains "small: an Event with the driver's reason" "InstantCapacity" \
	"$(kubectl get events -n "$PR_NS" --field-selector involvedObject.name=small -o 'jsonpath={.items[*].reason}')"
t_wait 20 "requests of the class are counted under its name" bash -c "curl -fsS http://$PR_HTTP/metrics |
	grep -qF 'provreqd_provisioning_requests{class=\"instant.example.provreqd.io\",condition=\"Provisioned\"} 1'"
sleep 2
t_eq "typo: left alone" "" "$(pr_cond typo Accepted)"
t_contains "typo: counted as unowned" "provreqd_unowned_requests_total 1" "$(curl -fsS "http://$PR_HTTP/metrics")"
t_eq "typo: logged once" 1 "$(grep -c 'no provisioning class here serves this request.*request=typo' "$PR_WORK/provreqd.log")"
pr_stop

# Two drivers serving one class: refused at start, naming both.
sed 's/\.name = "example"/.name = "example-two"/' "$PROVREQD_SRCDIR/docs/examples/driver/example-driver.c" >"$PR_WORK/second.c"
"${CC:-cc}" -std=c11 -fPIC -shared -O2 -I "$PROVREQD_SRCDIR/cloud" -o "$PR_WORK/second.so" "$PR_WORK/second.c"
set +e
out=$("$PR_BIN" run --kubeconfig "$KUBECONFIG" --leader-elect=false --state-db "$PR_WORK/state2.db" \
	--http-addr "127.0.0.1:$(pr_free_port)" --cloud-driver "$so" --cloud-config "$PR_WORK/cloud.yaml" \
	--cloud-driver "$PR_WORK/second.so" --cloud-config "$PR_WORK/cloud.yaml" 2>&1)
rc=$?
set -e
((rc != 0)) || t_fail "provreqd started with two drivers serving one class"
t_contains "a class served twice is refused, naming both" "instant.example.provreqd.io is served by both driver example ($so) and driver example-two" "$out"
t_done

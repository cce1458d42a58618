#!/usr/bin/env bash
# ProvisioningClass (provreqd.io/v1alpha1) against the real apiserver:
#  - a class with ValidUntilSeconds "15" in front of check-capacity makes an
#    unfittable request that names it fail with Expired about 15 s after its
#    creation, and the request's details name the class and the parameters
#    in effect;
#  - `kubectl get provisioningclasses` lists it with its printer columns;
#  - a class limited to labelled namespaces refuses a request from another
#    namespace (Failed=True/NamespaceNotAllowed);
#  - a class that names a class nobody serves (a typo) fails its requests
#    with InvalidProvisioningClass and gets a Warning Event itself;
#  - the CRD's own validation refuses a fixed parameter without a value.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

pr_init pr88
grp=$(t_unique pc88)
PR_GROUPS+=("$grp")
short=$(t_unique short)
mlonly=$(t_unique mlonly)
typo=$(t_unique typo)
pr_on_exit "kubectl delete provisioningclass $short $mlonly $typo --ignore-not-found >/dev/null 2>&1"

kubectl get crd provisioningclasses.provreqd.io >/dev/null 2>&1 ||
	t_fail "the ProvisioningClass CRD is not installed (cluster.sh applies crd/*.yaml)"

pclass() { # NAME SPEC-YAML (indented two spaces)
	kubectl apply -f - >/dev/null <<EOF
apiVersion: provreqd.io/v1alpha1
kind: ProvisioningClass
metadata:
  name: $1
spec:
$2
EOF
}
pclass "$short" "  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  description: check-capacity that gives up after 15 s
  parameters: {ValidUntilSeconds: \"15\"}
  fixedParameters: [ValidUntilSeconds]"
pclass "$mlonly" "  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  allowedNamespaces: {matchLabels: {provreqd-e2e/team: ml}}"
pclass "$typo" "  provisioningClassName: chek-capacity.autoscaling.x-k8s.io"

out=$(kubectl get provisioningclasses "$short" 2>&1)
t_contains "kubectl get provisioningclasses shows the class it serves as" "check-capacity.autoscaling.x-k8s.io" "$out"
t_contains "... and its description" "gives up after 15 s" "$out"
t_contains "... under the SERVES-AS column" "SERVES-AS" "$out"
if out=$(kubectl apply -f - 2>&1 <<EOF
apiVersion: provreqd.io/v1alpha1
kind: ProvisioningClass
metadata:
  name: $(t_unique refused)
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  fixedParameters: [noRetry]
EOF
); then
	t_fail "the apiserver took a fixed parameter without a value: $out"
fi
t_contains "the CRD refuses a fixed parameter without a value" "every fixed parameter needs a value" "$out"

# One 2-CPU node; the pods need 3 CPU each: never satisfiable.
pr_add_nodes "$grp" 1 2 4Gi
t_wait 60 "the node is Ready" pr_ready_is "$grp" 1
pr_template big 3 1Gi "$grp"
pr_template small 1 1Gi "$grp"
pr_start --request-backoff-initial 2s --request-backoff-max 4s

# The request asks for 600 s; the class fixes 15.
pr_request job "$short" big 1 ValidUntilSeconds=600
created=$(date +%s)
t_wait 30 "job: Provisioned=False/CapacityIsNotFound" pr_cond_is job Provisioned False/CapacityIsNotFound
details() { kubectl get provreq -n "$PR_NS" job -o "jsonpath={.status.provisioningClassDetails.$1}"; }
t_eq "job: details name the ProvisioningClass" "$short" "$(details provisioningClass)"
t_eq "job: details show the parameters in effect" '{"ValidUntilSeconds":"15"}' "$(details effectiveParameters)"
t_wait 40 "job: Failed=True/Expired once 15 s have passed" pr_cond_is job Failed True/Expired
took=$(($(date +%s) - created))
((took >= 14)) || t_fail "job failed after ${took}s, before the class's ValidUntilSeconds=15"
((took <= 40)) || t_fail "job failed after ${took}s: the class's 15 s were not applied"
t_pass "job failed ${took}s after creation (the class's 15 s, not the request's 600)"
t_contains "the message names the parameter" "ValidUntilSeconds=15" "$(pr_msg job Failed)"

# allowedNamespaces: $PR_NS does not carry the label.
pr_request outsider "$mlonly" small 1
t_wait 30 "outsider: Failed=True/NamespaceNotAllowed" pr_cond_is outsider Failed True/NamespaceNotAllowed
t_contains "the message says which namespaces may" "provreqd-e2e/team=ml" "$(pr_msg outsider Failed)"
kubectl label namespace "$PR_NS" provreqd-e2e/team=ml >/dev/null
pr_request insider "$mlonly" small 1
t_wait 30 "insider (namespace now labelled): Provisioned=True/CapacityIsFound" pr_cond_is insider Provisioned True/CapacityIsFound

# A class naming a class nobody serves: the typo is said, not ignored.
pr_request typoed "$typo" small 1
t_wait 30 "typoed: Failed=True/InvalidProvisioningClass" pr_cond_is typoed Failed True/InvalidProvisioningClass
t_contains "the message names the unknown class" "chek-capacity.autoscaling.x-k8s.io" "$(pr_msg typoed Failed)"
ev() {
	kubectl get events -n default --field-selector "involvedObject.name=$typo,involvedObject.kind=ProvisioningClass" \
		-o 'jsonpath={range .items[*]}{.type}/{.reason}{"\n"}{end}' 2>/dev/null
}
has_ev() { [[ "$(ev)" == *Warning/InvalidProvisioningClass* ]]; }
t_wait 30 "the ProvisioningClass has a Warning Event" has_ev
pr_running || t_fail "provreqd exited"
t_pass "provreqd keeps running"
t_done

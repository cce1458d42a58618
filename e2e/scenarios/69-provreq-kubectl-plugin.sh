#!/usr/bin/env bash
# The kubectl plugin path: with the build directory on PATH, `kubectl create
# provisioningrequest ...` runs kubectl-create-provisioningrequest; the
# requests it creates are served by provreqd, and `kubectl get provreq`
# shows the CLASS/ACCEPTED/PROVISIONED/FAILED/REASON/BOOKINGEXPIRED/REVOKED
# columns with their states (MESSAGE with -o wide).
# Also: the namespace of the kubeconfig context, --image/--cpu creating the
# PodTemplate (owned by the request, deleted again when the request cannot
# be created), --dry-run=server, and apiserver errors worded like kubectl's
# (AlreadyExists, Invalid with the field, Forbidden).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

plugin="$PROVREQD_BUILDDIR/kubectl-create-provisioningrequest"
[[ -x "$plugin" ]] || t_fail "build first: $plugin is missing (make all)"
export PATH="$PROVREQD_BUILDDIR:$PATH"

pr_init pr69
grp=$(t_unique kp69)
pr_group "$grp" 4 8Gi 10
pr_cloud_config
pr_add_nodes "$grp" 1 4 8Gi
t_wait 60 "a node of $grp is Ready" pr_ready_is "$grp" 1
pr_template small 1 1Gi "$grp"
pr_start --request-backoff-initial 2s

# kcreate ARGS...: `kubectl create provisioningrequest ARGS...`, stdout and
# stderr together in $out, exit status in $status.
kcreate() {
	set +e
	out=$(kubectl create provisioningrequest "$@" 2>&1)
	status=$?
	set -e
}

# --- check-capacity through kubectl
kcreate fits -n "$PR_NS" --class=check-capacity --template=small --count=2
t_eq "kubectl runs the plugin" "provisioningrequest.autoscaling.x-k8s.io/fits created" "$out"
t_eq "exit status 0" 0 "$status"
t_eq "the stored class is the full name" check-capacity.autoscaling.x-k8s.io \
	"$(kubectl get provreq -n "$PR_NS" fits -o 'jsonpath={.spec.provisioningClassName}')"
t_eq "the pod set" "small 2" \
	"$(kubectl get provreq -n "$PR_NS" fits -o 'jsonpath={.spec.podSets[0].podTemplateRef.name} {.spec.podSets[0].count}')"

# --- the namespace of the kubeconfig context, without -n
cp "$KUBECONFIG" "$PR_WORK/kubeconfig"
KUBECONFIG="$PR_WORK/kubeconfig" kubectl config set-context --current --namespace="$PR_NS" >/dev/null
KUBECONFIG="$PR_WORK/kubeconfig" kcreate nofit --class=check-capacity --template=small --count=9 \
	--param noRetry=true
t_eq "created in the context's namespace" "provisioningrequest.autoscaling.x-k8s.io/nofit created" "$out"
t_eq "noRetry reached the object" true \
	"$(kubectl get provreq -n "$PR_NS" nofit -o 'jsonpath={.spec.parameters.noRetry}')"

# --- atomic scale-up, PodTemplate made by the plugin
kcreate scale -n "$PR_NS" --class=atomic-scale-up --count=2 --cpu=3 --memory=1Gi -o name
t_eq "-o name lists both objects" "podtemplate/scale
provisioningrequest.autoscaling.x-k8s.io/scale" "$out"
t_eq "the PodTemplate requests 3 CPU" 3 \
	"$(kubectl get podtemplate -n "$PR_NS" scale -o 'jsonpath={.template.spec.containers[0].resources.requests.cpu}')"
t_eq "the PodTemplate is owned by the request" \
	"ProvisioningRequest/scale/$(kubectl get provreq -n "$PR_NS" scale -o 'jsonpath={.metadata.uid}')" \
	"$(kubectl get podtemplate -n "$PR_NS" scale -o 'jsonpath={.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].uid}')"

# The plugin's PodTemplate has no nodeSelector: pods may land on any node,
# so only this scenario's groups must be able to take them. The only node
# group provreqd knows is $grp.
t_wait 60 "fits: Provisioned=True" pr_cond_is fits Provisioned True/CapacityIsFound
t_wait 60 "nofit: Failed=True" pr_cond_is nofit Failed True/CapacityIsNotFound
t_wait 90 "scale: Provisioned=True/CapacityIsProvisioned" pr_cond_is scale Provisioned True/CapacityIsProvisioned

# --- kubectl get provreq: columns and states
table=$(kubectl get provreq -n "$PR_NS")
t_log "$table"
header=$(sed -n 1p <<<"$table")
for col in NAME CLASS ACCEPTED PROVISIONED FAILED REASON BOOKINGEXPIRED REVOKED AGE; do
	[[ " $header " == *" $col "* ]] || t_fail "column $col missing from: $header"
done
t_pass "the columns: $header"
row() { awk -v n="$1" '$1 == n { $NF = ""; print }' <<<"$table" | sed 's/ *$//'; }
# (empty cells vanish in these rows: no request is final by booking yet)
t_eq "fits row" "fits check-capacity.autoscaling.x-k8s.io True True CapacityIsFound" "$(row fits)"
t_eq "nofit row" "nofit check-capacity.autoscaling.x-k8s.io True False True CapacityIsNotFound" "$(row nofit)"
t_eq "scale row" "scale best-effort-atomic-scale-up.autoscaling.x-k8s.io True True CapacityIsProvisioned" "$(row scale)"
t_contains "the short name provreqs works too" scale "$(kubectl get provreqs -n "$PR_NS" -o name)"
t_contains "-o wide adds MESSAGE" MESSAGE "$(kubectl get provreq -n "$PR_NS" -o wide | sed -n 1p)"
t_contains "the MESSAGE of nofit is Provisioned's" "$(pr_msg nofit Provisioned)" \
	"$(kubectl get provreq -n "$PR_NS" nofit -o wide | sed -n 2p)"

# --- errors from the apiserver, worded like kubectl's
kcreate fits -n "$PR_NS" --class=check-capacity --template=small --count=2
t_eq "AlreadyExists: exit 1" 1 "$status"
t_eq "AlreadyExists: the message, naming the server" \
	"Error from server (AlreadyExists): provisioningrequests.autoscaling.x-k8s.io \"fits\" already exists (server $(kubectl config view --minify -o 'jsonpath={.clusters[0].cluster.server}'))" "$out"

# The PodTemplate made for a request that cannot be created is removed.
kcreate fits -n "$PR_NS" --class=check-capacity --template=orphan --count=1 --cpu=1
t_eq "a template-making create of an existing name fails" 1 "$status"
t_contains "the template is deleted again" "podtemplate/orphan deleted again" "$out"
t_wait 10 "no orphan PodTemplate" k_gone podtemplate -n "$PR_NS" orphan

# Invalid: the plugin checks what the CRD checks before sending, so the
# apiserver's refusal comes from a namespace policy here (a
# ValidatingAdmissionPolicy answering 422 Invalid).
vap=$(t_unique pr69-max5)
pr_on_exit "kubectl delete validatingadmissionpolicybinding $vap --ignore-not-found >/dev/null 2>&1; kubectl delete validatingadmissionpolicy $vap --ignore-not-found >/dev/null 2>&1"
kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: $vap}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [autoscaling.x-k8s.io]
      apiVersions: ["*"]
      operations: [CREATE]
      resources: [provisioningrequests]
  validations:
  - expression: "object.spec.podSets.all(p, p.count <= 5)"
    message: at most 5 pods per pod set in this namespace
    reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: $vap}
spec:
  policyName: $vap
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: $PR_NS}
EOF
policy_active() {
	! kubectl create provisioningrequest probe -n "$PR_NS" --class=check-capacity --template=small \
		--count=6 --dry-run=server >/dev/null 2>&1
}
t_wait 30 "the admission policy is active" policy_active
kcreate big -n "$PR_NS" --class=check-capacity --template=small --count=6
t_eq "Invalid: exit 1" 1 "$status"
t_contains "Invalid: the reason" "Error from server (Invalid):" "$out"
t_contains "Invalid: the policy's message" "at most 5 pods per pod set in this namespace" "$out"
t_log "$out"
t_eq "nothing was created" "" "$(kubectl get provreq -n "$PR_NS" big -o name --ignore-not-found)"

kubectl create serviceaccount -n "$PR_NS" nobody >/dev/null
token=$(kubectl create token -n "$PR_NS" nobody --duration=10m)
server=$(kubectl config view --minify -o 'jsonpath={.clusters[0].cluster.server}')
cat >"$PR_WORK/nobody.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "$server", certificate-authority: "$PROVREQD_E2E_CLUSTER_DIR/pki/ca.crt"}
users:
- name: nobody
  user: {token: "$token"}
contexts:
- name: nobody
  context: {cluster: c, user: nobody, namespace: $PR_NS}
current-context: nobody
EOF
kcreate denied --kubeconfig "$PR_WORK/nobody.kubeconfig" --class=check-capacity --template=small --count=1
t_eq "Forbidden: exit 1" 1 "$status"
t_contains "Forbidden: kubectl's wording" "Error from server (Forbidden): provisioningrequests.autoscaling.x-k8s.io is forbidden: User \"system:serviceaccount:$PR_NS:nobody\" cannot create resource \"provisioningrequests\"" "$out"

# --- server dry run: validated by the apiserver, nothing stored
kcreate dry -n "$PR_NS" --class=check-capacity --template=small --count=1 --dry-run=server
t_eq "server dry run" "provisioningrequest.autoscaling.x-k8s.io/dry created (server dry run)" "$out"
t_eq "nothing stored" "" "$(kubectl get provreq -n "$PR_NS" dry -o name --ignore-not-found)"

# --- refusals before any call
kcreate x -n "$PR_NS" --class=fast --template=small --count=0
t_eq "bad flags: exit 1" 1 "$status"
t_contains "bad flags: the class" "error: --class fast: unknown class" "$out"
t_contains "bad flags: the count" "error: --count 0: must be a whole number from 1" "$out"
t_done

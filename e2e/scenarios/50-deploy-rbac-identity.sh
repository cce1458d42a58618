#!/usr/bin/env bash
# provreqd runs with the deploy manifests' ServiceAccount identity (a token
# of system:serviceaccount:provreqd-system:provreqd, bound to the roles of
# templates/deploy/rbac.yaml plus driver-kwok.yaml) through an atomic
# scale-up with leader election and a ResourcePool population, and the
# apiserver never denies it anything: the roles are sufficient.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

deploy=$PROVREQD_SRCDIR/templates/deploy
sa_ns=provreqd-system
kubectl get crd resourcepools.capsule.clastix.io >/dev/null 2>&1 ||
	t_fail "the ResourcePool CRD (crd/capsule-resourcepools.yaml) is not installed"

pr_init pr51
# A run before this one may still be deleting the namespace.
if [[ "$(kubectl get namespace provreqd-system -o 'jsonpath={.status.phase}' 2>/dev/null)" == Terminating ]]; then
	t_wait 120 "the previous provreqd-system namespace is gone" k_gone namespace provreqd-system
fi
lease=$(t_unique lease51)
pool=$(t_unique pool51)
created_ns=
if ! kubectl get namespace "$sa_ns" >/dev/null 2>&1; then
	created_ns=1
fi
unbind() {
	kubectl delete resourcepool "$pool" --ignore-not-found --wait=false >/dev/null 2>&1
	kubectl -n "$sa_ns" delete lease "$lease" --ignore-not-found >/dev/null 2>&1
	kubectl delete -f "$deploy/driver-kwok.yaml" --ignore-not-found >/dev/null 2>&1
	kubectl delete -f "$deploy/rbac.yaml" --ignore-not-found >/dev/null 2>&1
	if [[ -n "$created_ns" ]]; then
		kubectl delete namespace "$sa_ns" --ignore-not-found --wait=false >/dev/null 2>&1
	fi
}
pr_on_exit unbind
kubectl apply -f "$deploy/namespace.yaml" -f "$deploy/serviceaccount.yaml" -f "$deploy/rbac.yaml" \
	-f "$deploy/driver-kwok.yaml" >/dev/null

# A kubeconfig that authenticates as the ServiceAccount (the identity the
# Deployment's pods get), against the same apiserver and CA.
token=$(kubectl -n "$sa_ns" create token provreqd --duration=1h)
server=$(kubectl config view --raw --minify -o 'jsonpath={.clusters[0].cluster.server}')
ca=$(kubectl config view --raw --minify -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}')
sa_kc=$PR_WORK/sa.kubeconfig
(
	umask 077
	cat >"$sa_kc" <<-KC
		apiVersion: v1
		kind: Config
		clusters:
		- name: e2e
		  cluster: {server: "$server", certificate-authority-data: "$ca"}
		users:
		- name: provreqd
		  user: {token: "$token"}
		contexts:
		- name: e2e
		  context: {cluster: e2e, user: provreqd}
		current-context: e2e
	KC
)
t_eq "the kubeconfig authenticates as the ServiceAccount" "no" \
	"$(kubectl --kubeconfig "$sa_kc" auth can-i get secrets -n "$sa_ns" 2>/dev/null || true)"
t_wait 20 "the ServiceAccount may watch nodes" \
	bash -c "[[ \$(kubectl --kubeconfig '$sa_kc' auth can-i watch nodes 2>/dev/null) == yes ]]"

# A pool that opts in to population from the nodes the scale-up adds.
grp=$(t_unique at51)
pr_group "$grp" 4 8Gi 10
pr_cloud_config
kubectl apply -f - >/dev/null <<-POOL
	apiVersion: capsule.clastix.io/v1beta2
	kind: ResourcePool
	metadata:
	  name: $pool
	  annotations:
	    provreqd.io/populate-from-nodes: "$PR_GROUP_LABEL=$grp"
	    provreqd.io/populate-resources: cpu,pods
	spec:
	  selectors: [{matchLabels: {capsule.clastix.io/tenant: $pool}}]
	  quota:
	    hard: {}
POOL

# Flags after pr_start's own override them: the SA kubeconfig and a Lease.
pr_start --kubeconfig "$sa_kc" --leader-elect --lease-namespace "$sa_ns" --lease-name "$lease" \
	--request-backoff-initial 2s --pool-debounce 0s
t_wait 30 "provreqd holds the Lease in $sa_ns" \
	bash -c "[[ -n \$(kubectl -n '$sa_ns' get lease '$lease' -o 'jsonpath={.spec.holderIdentity}' 2>/dev/null) ]]"

pr_template worker 3 1Gi "$grp"
pr_request job atomic-scale-up worker 2
t_wait 90 "Provisioned=True/CapacityIsProvisioned" pr_cond_is job Provisioned True/CapacityIsProvisioned
t_eq "the group grew by 2 nodes" 2 "$(pr_count "$grp")"
t_wait 60 "the pool's quota follows the 2 new nodes (8 CPUs)" \
	k_is 8 '{.spec.quota.hard.requests\.cpu}' resourcepool "$pool"
t_contains "an Event was recorded on the request" "CapacityIsProvisioned" \
	"$(kubectl get events -n "$PR_NS" --field-selector involvedObject.name=job -o 'jsonpath={.items[*].reason}')"

metrics=$(curl -fsS --max-time 5 "http://$PR_HTTP/metrics")
t_contains "metrics: this replica leads" $'\nprovreqd_leader 1\n' $'\n'"$metrics"
denials=$(grep -icE 'forbidden|\b403\b' "$PR_WORK/provreqd.log" || true)
if ((denials)); then
	t_fail "provreqd was denied $denials time(s): $(grep -iE 'forbidden|\b403\b' "$PR_WORK/provreqd.log" | head -5)"
fi
t_pass "no RBAC denial in provreqd's log"
if grep -qE 'provreqd_api_requests_total\{[^}]*code="403"' <<<"$metrics"; then
	t_fail "metrics count 403 answers: $(grep 'code="403"' <<<"$metrics")"
fi
t_pass "no 403 in provreqd_api_requests_total"
# (`|| true`: pr_stop's final kill of an already-exited process must not
# end the scenario under set -e.)
pr_stop || true
t_eq "the Lease is released on SIGTERM" "" \
	"$(kubectl -n "$sa_ns" get lease "$lease" -o 'jsonpath={.spec.holderIdentity}')"
t_done

#!/usr/bin/env bash
# The deploy manifests (templates/deploy) against the real apiserver:
#  - `kubectl apply --dry-run=server -k templates/deploy` passes (schema,
#    defaulting, admission), and so do the per-driver role files;
#  - the ServiceAccount's RBAC, applied for real, grants exactly what the
#    controller's code uses (SubjectAccessReviews for its identity) and
#    nothing it does not (secrets but its plan key, deleting nodes, creating pods, leases
#    outside its namespace); the driver roles add only their own verbs;
#  - every resource the roles name is one the code talks to.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

src=$PROVREQD_SRCDIR
deploy=$src/templates/deploy
ns=provreqd-system
sa=system:serviceaccount:$ns:provreqd
created_ns=
cleanup() {
	kubectl delete -f "$deploy/driver-kwok.yaml" --ignore-not-found >/dev/null 2>&1 || true
	kubectl delete -f "$deploy/driver-clusterapi.yaml" --ignore-not-found >/dev/null 2>&1 || true
	kubectl delete -f "$deploy/driver-kwok-configmaps.yaml" --ignore-not-found >/dev/null 2>&1 || true
	kubectl delete -f "$deploy/driver-clusterapi-nap.yaml" --ignore-not-found >/dev/null 2>&1 || true
	kubectl delete -f "$deploy/rbac.yaml" --ignore-not-found >/dev/null 2>&1 || true
	if [[ -n "$created_ns" ]]; then
		kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT
# A run before this one may still be deleting the namespace.
if [[ "$(kubectl get namespace provreqd-system -o 'jsonpath={.status.phase}' 2>/dev/null)" == Terminating ]]; then
	t_wait 120 "the previous provreqd-system namespace is gone" k_gone namespace provreqd-system
fi

kubectl kustomize "$deploy" >/dev/null || t_fail "kubectl kustomize $deploy does not render"
t_pass "the kustomization renders"

# Namespaced objects can be dry-run only into a namespace that exists.
if ! kubectl get namespace "$ns" >/dev/null 2>&1; then
	kubectl apply -f "$deploy/namespace.yaml" >/dev/null
	created_ns=1
fi
out=$(kubectl apply --dry-run=server -k "$deploy" 2>&1) || t_fail "server dry-run of -k templates/deploy: $out"
for obj in "namespace/$ns" "serviceaccount/provreqd" "clusterrole.rbac.authorization.k8s.io/provreqd" \
	"clusterrolebinding.rbac.authorization.k8s.io/provreqd" "role.rbac.authorization.k8s.io/provreqd-leader-election" \
	"rolebinding.rbac.authorization.k8s.io/provreqd-leader-election" "configmap/provreqd-config-" \
	"deployment.apps/provreqd" "service/provreqd-metrics" "clusterrole.rbac.authorization.k8s.io/provreqd-edit" \
	"clusterrole.rbac.authorization.k8s.io/provreqd-view" "poddisruptionbudget.policy/provreqd"; do
	# (the generated ConfigMap's name ends in a hash of its content)
	[[ "$out" == *"$obj "* || ("$obj" == *- && "$out" == *"$obj"*) ]] || t_fail "dry-run output does not name $obj: $out"
done
[[ "$out" != *Warning* ]] || t_fail "dry-run printed warnings: $out"
t_pass "kubectl apply --dry-run=server -k templates/deploy passes with no warnings"
for f in driver-kwok.yaml driver-kwok-configmaps.yaml driver-clusterapi.yaml driver-clusterapi-nap.yaml; do
	out=$(kubectl apply --dry-run=server -f "$deploy/$f" 2>&1) || t_fail "server dry-run of $f: $out"
done
t_pass "the driver role files pass a server dry-run"

# The Deployment as the apiserver would store it keeps what we rely on.
dep=$(kubectl apply --dry-run=server -k "$deploy" -o json 2>/dev/null |
	python3 -c 'import json,sys; d=json.load(sys.stdin); print(json.dumps([i for i in d["items"] if i["kind"]=="Deployment"][0]))')
jp() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print($1)" "$dep"; }
t_eq "2 replicas" 2 "$(jp 'd["spec"]["replicas"]')"
t_eq "priority class system-cluster-critical" system-cluster-critical "$(jp 'd["spec"]["template"]["spec"]["priorityClassName"]')"
t_eq "liveness probe on /healthz" /healthz "$(jp 'd["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["path"]')"
t_eq "readiness probe on /readyz" /readyz "$(jp 'd["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"]')"
t_eq "read-only root filesystem" True "$(jp 'd["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"]')"
t_eq "runs as non-root" True "$(jp 'd["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"]')"
t_eq "state volume at /var/lib/provreqd" /var/lib/provreqd \
	"$(jp '[m["mountPath"] for m in d["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] if m["name"]=="state"][0]')"

# The config the ConfigMap carries is valid for this build.
cm=$(kubectl kustomize "$deploy" | python3 -c 'import sys,yaml
print([d for d in yaml.safe_load_all(sys.stdin) if d and d["kind"]=="ConfigMap"][0]["data"]["provreqd.yaml"], end="")' 2>/dev/null) ||
	t_skip "python3 yaml module missing"
tmp=$(mktemp)
printf '%s' "$cm" >"$tmp"
out=$("$PROVREQD_BUILDDIR/provreqd" check-config --config "$tmp" 2>&1) || { rm -f "$tmp"; t_fail "check-config refuses the ConfigMap's config: $out"; }
rm -f "$tmp"
t_pass "provreqd check-config accepts the ConfigMap's config"

# RBAC for real, then ask the authorizer about the ServiceAccount.
kubectl apply -f "$deploy/serviceaccount.yaml" -f "$deploy/rbac.yaml" >/dev/null
# can VERB RESOURCE[.GROUP] [--subresource=S] [-n NS | -A]: yes or no, from
# a SubjectAccessReview for the ServiceAccount. (`kubectl auth can-i` maps
# names through discovery and asks about the wrong group for resources
# whose CRD is not installed, e.g. Cluster API's.)
can() {
	local verb=$1 res=$2 group='' sub='' ns='' name='' ra
	shift 2
	# RESOURCE/NAME asks about one object.
	if [[ "$res" == */* ]]; then name=${res#*/}; res=${res%%/*}; fi
	while (($#)); do
		case $1 in
		--subresource=*) sub=${1#*=} ;;
		-n) ns=$2; shift ;;
		-A) ns= ;;
		esac
		shift
	done
	if [[ "$res" == *.* ]]; then group=${res#*.}; res=${res%%.*}; fi
	ra=$(printf '{"verb":"%s","group":"%s","resource":"%s","subresource":"%s","namespace":"%s","name":"%s"}' \
		"$verb" "$group" "$res" "$sub" "$ns" "$name")
	kubectl create -o jsonpath='{.status.allowed}' -f - <<-JSON | sed 's/^true$/yes/; s/^false$/no/'
	{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview",
	 "spec":{"user":"$sa","groups":["system:serviceaccounts","system:serviceaccounts:$ns_sa","system:authenticated"],
	         "resourceAttributes":$ra}}
	JSON
}
ns_sa=$ns
is_allowed() { [[ "$(can "$@")" == yes ]]; }
is_denied() { [[ "$(can "$@")" == no ]]; }
expect_yes() {
	local r
	r=$(can "$@") || true
	[[ "$r" == yes ]] || t_fail "the role should allow: $* (got '$r')"
}
expect_no() {
	local r
	r=$(can "$@") || true
	[[ "$r" == no ]] || t_fail "the role should NOT allow: $* (got '$r')"
}
# RBAC takes effect when the authorizer's cache has it.
t_wait 20 "the binding is in effect" is_allowed watch nodes
# Exactly the verbs the code uses (src/provreq/, src/pools/,
# src/kube/lease.c, the informers in src/cmd_run.c) ...
for v in list watch; do
	for r in nodes pods podtemplates; do expect_yes "$v" "$r" -A; done
	expect_yes "$v" provisioningrequests.autoscaling.x-k8s.io -A
	for r in resourceslices deviceclasses resourceclaimtemplates resourceclaims; do
		expect_yes "$v" "$r.resource.k8s.io" -A
	done
	expect_yes "$v" provisioningclasses.provreqd.io
done
expect_yes get namespaces
expect_yes list resourcequotas -n default
expect_yes delete provisioningrequests.autoscaling.x-k8s.io -n default
expect_yes get provisioningrequests.autoscaling.x-k8s.io -n default
expect_yes patch provisioningrequests.autoscaling.x-k8s.io -n default
expect_yes patch nodes
expect_yes patch provisioningrequests.autoscaling.x-k8s.io --subresource=status -n default
for v in get list patch; do expect_yes "$v" resourcepools.capsule.clastix.io; done
expect_yes create events -n default
expect_yes patch events -n default
for v in get create update; do expect_yes "$v" leases.coordination.k8s.io -n "$ns"; done
# The booking ledger: its head read and replaced, created once; its
# overflow objects created, read, listed and deleted.
for v in get update; do expect_yes "$v" configmaps/provreqd-bookings -n "$ns"; done
for v in create get list delete; do expect_yes "$v" configmaps -n "$ns"; done
# The plan key: its one Secret read, created once.
expect_yes get secrets/provreqd-plan-key -n "$ns"
expect_yes create secrets -n "$ns"
t_pass "the ServiceAccount may do everything the controller does"
# ... and nothing it does not use.
for r in nodes pods podtemplates; do expect_no get "$r" -n default; done
expect_no update provisioningrequests.autoscaling.x-k8s.io -n default
expect_no update provisioningrequests.autoscaling.x-k8s.io --subresource=status -n default
for v in watch update; do expect_no "$v" resourcepools.capsule.clastix.io; done
expect_no create events.events.k8s.io -n default

expect_no get secrets -n "$ns"
# (ConfigMaps of the Lease's namespace only: the booking ledger's.)
for r in secrets configmaps; do
	expect_no list "$r" -A
done
expect_no get configmaps -n default
for v in create delete update get; do expect_no "$v" nodes; done
for v in create delete update patch; do expect_no "$v" pods -n default; done
expect_no create podtemplates -n default
for r in resourceslices deviceclasses resourceclaimtemplates resourceclaims; do
	expect_no create "$r.resource.k8s.io" -n default
	expect_no get "$r.resource.k8s.io" -n default
done
expect_no create provisioningrequests.autoscaling.x-k8s.io -n default
for v in create update patch delete; do expect_no "$v" provisioningclasses.provreqd.io; done
for v in list update patch; do expect_no "$v" namespaces; done
for v in get create update patch delete; do expect_no "$v" resourcequotas -n default; done
expect_no delete resourcepools.capsule.clastix.io
expect_no create resourcepools.capsule.clastix.io
expect_no delete events -n default
expect_no get leases.coordination.k8s.io -n default
expect_no delete leases.coordination.k8s.io -n "$ns"
expect_no list leases.coordination.k8s.io -n "$ns"
# (The ledger's overflow objects have generated names, so get, list and
# delete of ConfigMaps cover the whole namespace; update stays with the
# head's name.)
expect_no update configmaps/provreqd-config-x -n "$ns"
expect_no create configmaps -n default
for v in update patch delete; do expect_no "$v" secrets/provreqd-plan-key -n "$ns"; done
expect_no get secrets/provreqd-plan-key -n default
expect_no create secrets -n default
expect_no create serviceaccounts/token -n "$ns"
expect_no get machinedeployments.cluster.x-k8s.io -A
expect_no '*' '*'
t_pass "the core role grants nothing more (no secret but its plan key, no node writes but patch, no pod writes, no foreign leases)"

kubectl apply -f "$deploy/driver-kwok.yaml" >/dev/null
t_wait 20 "the kwok driver binding is in effect" is_allowed create nodes
for v in create delete get list; do expect_yes "$v" nodes; done
for v in create delete; do expect_yes "$v" resourceslices.resource.k8s.io; done
for v in get update; do expect_no "$v" resourceslices.resource.k8s.io; done
expect_no update nodes
expect_no list configmaps -A
expect_no get secrets -n kube-system
# No ConfigMap at all with a templateDir config (the base's): a kwok pod
# taken over could edit none in kube-system.
for v in get create update; do expect_no "$v" configmaps/provreqd-kwok-groups -n kube-system; done
expect_no update configmaps/kube-proxy -n kube-system
t_pass "the kwok driver role adds node create/delete/get/list and ResourceSlice create/delete only, no ConfigMap"
kubectl apply -f "$deploy/driver-kwok-configmaps.yaml" >/dev/null
t_wait 20 "the kwok ConfigMap binding is in effect" is_allowed update configmaps/provreqd-kwok-groups -n kube-system
expect_yes get configmaps/provreqd-kwok-templates -n kube-system
expect_no update configmaps/provreqd-kwok-templates -n kube-system
expect_yes get configmaps/provreqd-kwok-groups -n kube-system
expect_yes create configmaps -n kube-system
for v in get update; do expect_no "$v" configmaps/kube-proxy -n kube-system; done
expect_no get configmaps/provreqd-kwok-groups -n default
expect_no create configmaps -n default
expect_no delete configmaps/provreqd-kwok-groups -n kube-system
kubectl delete -f "$deploy/driver-kwok-configmaps.yaml" -f "$deploy/driver-kwok.yaml" >/dev/null
t_wait 20 "the kwok driver binding is gone" is_denied create nodes
t_pass "driver-kwok-configmaps.yaml adds get of the template ConfigMap, get/update of the groups ConfigMap, by name, and create in their namespace only"

kubectl apply -f "$deploy/driver-clusterapi.yaml" >/dev/null
t_wait 20 "the clusterapi driver binding is in effect" is_allowed list machinedeployments.cluster.x-k8s.io -A
for r in machinedeployments machinesets machinepools; do
	# get and patch: the fence annotation (ABI 1.4); update on scale: the
	# conditional PUT of the replica count.
	for v in get list patch; do expect_yes "$v" "$r.cluster.x-k8s.io" -n default; done
	for v in watch update; do expect_no "$v" "$r.cluster.x-k8s.io" -n default; done
	for v in get patch update; do expect_yes "$v" "$r.cluster.x-k8s.io" --subresource=scale -n default; done
done
# create and delete: the MachineDeployments of auto-provisioned groups,
# and only with driver-clusterapi-nap.yaml.
for r in machinedeployments machinesets machinepools; do
	for v in create delete; do expect_no "$v" "$r.cluster.x-k8s.io" -n default; done
done
for v in get list patch; do expect_yes "$v" machines.cluster.x-k8s.io -n default; done
for v in watch delete; do expect_no "$v" machines.cluster.x-k8s.io -n default; done
expect_yes get nodes
expect_no create nodes
t_pass "the clusterapi driver role adds the Cluster API calls the driver makes (fence annotation, conditional scale) and node get only, no MachineDeployment create/delete"
kubectl apply -f "$deploy/driver-clusterapi-nap.yaml" >/dev/null
t_wait 20 "the clusterapi auto-provisioning binding is in effect" is_allowed create machinedeployments.cluster.x-k8s.io -n default
expect_yes delete machinedeployments.cluster.x-k8s.io -n default
for r in machinesets machinepools; do
	for v in create delete; do expect_no "$v" "$r.cluster.x-k8s.io" -n default; done
done
kubectl delete -f "$deploy/driver-clusterapi-nap.yaml" >/dev/null
t_pass "driver-clusterapi-nap.yaml adds MachineDeployment create/delete only"

# Every resource a role names is one the code uses (no stale grants).
for r in nodes pods podtemplates provisioningrequests resourcepools leases events configmaps \
	machinedeployments machinesets machinepools machines resourceslices deviceclasses resourceclaimtemplates \
	resourceclaims provisioningclasses namespaces resourcequotas secrets; do
	grep -rqs -- "$r" "$src/src" "$src/cloud" || t_fail "the roles grant '$r' but no code under src/ or cloud/ mentions it"
done
t_pass "every resource in the roles is used by the code"
t_done

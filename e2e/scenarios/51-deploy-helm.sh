#!/usr/bin/env bash
# The Helm chart (charts/provreqd) against the real apiserver, beside the
# kustomize manifests (templates/deploy):
#  - `helm lint --strict` passes; the chart's default rendering and the
#    kustomization both pass `kubectl apply --dry-run=server`, with no
#    warnings, and create the same objects (kind and name); a real
#    `helm install` creates them and `helm uninstall` removes them;
#  - the chart's controller and driver ClusterRoles grant what the
#    kustomize files grant, rule for rule;
#  - a Pod of the Deployment's template is admitted in the namespace (Pod
#    Security "restricted", priority class system-cluster-critical);
#  - a kwok rendering mounts its config and templates where --cloud-config
#    says, an impossible driver mix is refused, the ServiceMonitor renders
#    when asked;
#  - values real installs need (serviceAccount.annotations, extraVolumes
#    and extraVolumeMounts, pod and container security contexts, probes,
#    config as a map merged over the defaults, metrics.access, the
#    NetworkPolicy) render as asked and pass the server's dry-run; the
#    merged config passes check-config; a driver without what it needs
#    and an unknown config key are refused; the CRD ships in crds/; NOTES
#    point at installed objects; the kustomization pins the release's
#    image and generates its ConfigMap (hash-suffixed);
#  - the chart's user ClusterRoles, applied for real, are aggregated by
#    kube-controller-manager into the built-in roles: a user bound to
#    `edit` in a namespace may create ProvisioningRequests (and the
#    PodTemplates they name, which the built-in roles leave out) there,
#    one bound to `view` may list but not create them, and neither may
#    write status.
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"

src=$PROVREQD_SRCDIR
chart=$src/charts/provreqd
deploy=$src/templates/deploy
ns=provreqd-system
pr=provisioningrequests.autoscaling.x-k8s.io

# CI builds helm (.ci/run calls e2e/build-helm.sh), so a missing one is a
# broken setup, not a reason to skip.
helm=$("$E2E_DIR/build-helm.sh" --print-bin)
[[ -x "$helm" ]] || t_fail "helm is not built ($helm missing): run e2e/build-helm.sh (.ci/run does)"
t_pass "helm: $("$helm" version --short)"

users_ns=$(t_unique helm51)
created_ns=
created_sa=
installed=
cleanup() {
	if [[ -n "$installed" ]]; then
		"$helm" uninstall provreqd -n "$ns" >/dev/null 2>&1 || true
	fi
	if [[ -n "$created_sa" ]]; then
		kubectl -n "$ns" delete serviceaccount provreqd --ignore-not-found >/dev/null 2>&1 || true
	fi
	"$helm" template provreqd "$chart" -n "$ns" --show-only templates/user-roles.yaml 2>/dev/null |
		kubectl delete -f - --ignore-not-found >/dev/null 2>&1 || true
	kubectl delete namespace "$users_ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	if [[ -n "$created_ns" ]]; then
		kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT
if [[ "$(kubectl get namespace "$ns" -o 'jsonpath={.status.phase}' 2>/dev/null)" == Terminating ]]; then
	t_wait 120 "the previous $ns namespace is gone" k_gone namespace "$ns"
fi

out=$("$helm" lint --strict "$chart" 2>&1) || t_fail "helm lint --strict: $out"
t_pass "helm lint --strict passes"

# The chart renders the Namespace only when asked (helm install
# --create-namespace is the usual way); asked here, so both sides have it.
render() { "$helm" template provreqd "$chart" -n "$ns" --set createNamespace=true "$@"; }
render >/dev/null || t_fail "helm template does not render"
# Namespaced objects can be dry-run only into a namespace that exists.
if ! kubectl get namespace "$ns" >/dev/null 2>&1; then
	kubectl apply -f "$deploy/namespace.yaml" >/dev/null
	created_ns=1
fi

# names: KIND/NAME of each object the server accepted, sorted.
names='{range .items[*]}{.kind}/{.metadata.name}{"\n"}{end}'
helm_objs=$(render | kubectl apply --dry-run=server -o "jsonpath=$names" -f - 2>&1) ||
	t_fail "server dry-run of the chart: $helm_objs"
[[ "$helm_objs" != *Warning* ]] || t_fail "the chart's dry-run printed warnings: $helm_objs"
t_pass "helm template | kubectl apply --dry-run=server passes with no warnings"
kust_objs=$(kubectl kustomize "$deploy" | kubectl apply --dry-run=server -o "jsonpath=$names" -f - 2>&1) ||
	t_fail "server dry-run of the kustomization: $kust_objs"
[[ "$kust_objs" != *Warning* ]] || t_fail "the kustomization's dry-run printed warnings: $kust_objs"
t_pass "kubectl kustomize | kubectl apply --dry-run=server passes with no warnings"
# The kustomization's configMapGenerator names the ConfigMap after a hash
# of its content (so a changed config rolls the pods); the chart does that
# with a checksum annotation. Compared without the hash.
cm_hashed=$(grep -x 'ConfigMap/provreqd-config-[a-z0-9]*' <<<"$kust_objs" || true)
[[ -n "$cm_hashed" ]] || t_fail "the kustomization's ConfigMap is not generated with a hash suffix: $kust_objs"
kust_dep=$(kubectl kustomize "$deploy" | kubectl create --dry-run=client -f - -o json |
	jq -r 'select(.kind == "Deployment") | .spec.template.spec.volumes[] | select(.name == "config") | .. | .name? // empty' | sort -u)
t_contains "the kustomized Deployment mounts the generated ConfigMap" "${cm_hashed#ConfigMap/}" "$kust_dep"
t_contains "the kustomization pins this release's image, not latest" "image: provreqd:$(sed -n 's/^appVersion: *"\(.*\)"$/\1/p' "$chart/Chart.yaml")" \
	"$(kubectl kustomize "$deploy" | grep 'image:')"
# shellcheck disable=SC2001 # one line of many, anchored: not a ${//}
kust_objs=$(sed 's|^ConfigMap/provreqd-config-[a-z0-9]*$|ConfigMap/provreqd-config|' <<<"$kust_objs")
helm_objs=$(sort <<<"$helm_objs")
kust_objs=$(sort <<<"$kust_objs")
if [[ "$helm_objs" != "$kust_objs" ]]; then
	t_fail "the chart and the kustomization create different objects:
chart:
$helm_objs
kustomize:
$kust_objs
diff (< chart, > kustomize):
$(diff <(printf '%s\n' "$helm_objs") <(printf '%s\n' "$kust_objs") || true)"
fi
for want in ClusterRole/provreqd-edit ClusterRole/provreqd-view PodDisruptionBudget/provreqd Deployment/provreqd; do
	[[ $'\n'"$helm_objs"$'\n' == *$'\n'"$want"$'\n'* ]] || t_fail "neither renders $want: $helm_objs"
done
t_pass "both create the same $(wc -l <<<"$helm_objs") objects (kind/name)"

# The rules of a ClusterRole, one canonical line each, from a rendering.
rules_of() {
	local role=$1
	kubectl apply --dry-run=server -f - -o "jsonpath={range .items[?(@.metadata.name==\"$role\")].rules[*]}{.apiGroups}{.resources}{.verbs}{\"\\n\"}{end}" |
		sort
}
a=$(render --show-only templates/rbac.yaml | rules_of provreqd)
b=$(kubectl apply --dry-run=server -f "$deploy/rbac.yaml" -o 'jsonpath={range .items[?(@.kind=="ClusterRole")].rules[*]}{.apiGroups}{.resources}{.verbs}{"\n"}{end}' | sort)
[[ -n "$a" && "$a" == "$b" ]] || t_fail "the controller ClusterRole differs: chart
$a
kustomize
$b"
for d in kwok clusterapi karpenter; do
	a=$(render --set "drivers.$d.enabled=true" --set-json 'drivers.kwok.nodeTemplates={"g":{"kind":"Node"}}' \
		--set-json 'drivers.karpenter.config={"shapes":[{"instanceType":"c-2x"}]}' \
		--show-only templates/driver-rbac.yaml | rules_of "provreqd-driver-$d")
	b=$(kubectl apply --dry-run=server -f "$deploy/driver-$d.yaml" -o 'jsonpath={range .items[?(@.kind=="ClusterRole")].rules[*]}{.apiGroups}{.resources}{.verbs}{"\n"}{end}' | sort)
	[[ -n "$a" && "$a" == "$b" ]] || t_fail "the $d driver ClusterRole differs: chart
$a
kustomize (driver-$d.yaml)
$b"
done
for r in edit view class-reader class-admin; do
	a=$(render --show-only templates/user-roles.yaml | rules_of "provreqd-$r")
	b=$(kubectl apply --dry-run=server -f "$deploy/user-roles.yaml" -o "jsonpath={range .items[?(@.metadata.name==\"provreqd-$r\")].rules[*]}{.apiGroups}{.resources}{.verbs}{\"\\n\"}{end}" | sort)
	[[ -n "$a" && "$a" == "$b" ]] || t_fail "the user role provreqd-$r differs: chart
$a
kustomize (user-roles.yaml)
$b"
done
t_pass "the chart's controller, kwok, clusterapi, karpenter, edit and view roles grant what templates/deploy grants"

# A real install and uninstall: helm's own ordering and ownership work,
# and uninstall leaves nothing behind (cluster-scoped roles included).
out=$("$helm" install provreqd "$chart" -n "$ns" --set replicaCount=1 2>&1) || t_fail "helm install: $out"
installed=1
t_eq "helm install: the release is deployed" deployed \
	"$("$helm" status provreqd -n "$ns" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["info"]["status"])')"
for o in deployment/provreqd configmap/provreqd-config poddisruptionbudget/provreqd service/provreqd-metrics \
	serviceaccount/provreqd role/provreqd-leader-election; do
	kubectl -n "$ns" get "$o" >/dev/null 2>&1 || t_fail "helm install did not create $o"
done
for o in clusterrole/provreqd clusterrole/provreqd-edit clusterrole/provreqd-view clusterrolebinding/provreqd; do
	kubectl get "$o" >/dev/null 2>&1 || t_fail "helm install did not create $o"
done
t_pass "helm install created the objects"
notes=$("$helm" get notes provreqd -n "$ns")
t_contains "NOTES point at the installed Deployment" "kubectl -n $ns rollout status deployment/provreqd" "$notes"
t_contains "NOTES point at the Lease" "get lease provreqd" "$notes"
[[ "$notes" != *"crd/provisioningrequests.yaml"* ]] || t_fail "NOTES point at a source path: $notes"
t_eq "the CRD is there (installed before, kept by helm)" provisioningrequests.autoscaling.x-k8s.io \
	"$(kubectl get crd provisioningrequests.autoscaling.x-k8s.io -o 'jsonpath={.metadata.name}')"
out=$("$helm" uninstall provreqd -n "$ns" --wait 2>&1) || t_fail "helm uninstall: $out"
installed=
t_wait 60 "helm uninstall removed the ClusterRoles and the Deployment" \
	bash -c "! kubectl get clusterrole provreqd-edit >/dev/null 2>&1 && ! kubectl -n $ns get deployment provreqd >/dev/null 2>&1"

# The Deployment's Pod is admitted in the namespace: Pod Security
# "restricted" (enforced there) and the system-cluster-critical priority.
# (Admission looks its ServiceAccount up, so that one is created for real.)
render --show-only templates/serviceaccount.yaml | kubectl apply -f - >/dev/null
created_sa=1
pod=$(render --show-only templates/deployment.yaml | kubectl create --dry-run=client -f - -o json |
	python3 -c 'import json,sys
d=json.load(sys.stdin)
t=d["spec"]["template"]
print(json.dumps({"apiVersion":"v1","kind":"Pod","metadata":{"name":"provreqd-admission-check","namespace":d["metadata"]["namespace"],"labels":t["metadata"]["labels"]},"spec":t["spec"]}))')
out=$(kubectl create --dry-run=server -f - -o 'jsonpath={.spec.priorityClassName}/{.spec.priority}' <<<"$pod" 2>&1) ||
	t_fail "a Pod of the chart's Deployment is not admitted in $ns: $out"
[[ "$out" != *Warning* ]] || t_fail "admitting the Pod printed warnings: $out"
t_eq "the Pod is admitted at priority system-cluster-critical (2000000000)" "system-cluster-critical/2000000000" "$out"

# Values as cluster-autoscaler's chart takes them: replicaCount and
# extraArgs as a map. The Deployment has 2 replicas and the flags, and the
# command line it gives provreqd is one provreqd accepts (check-config on
# the rendered arguments: --scan-interval is accepted and ignored with a
# warning; the config file is the chart's, checked above).
ca_values=$(mktemp)
cat >"$ca_values" <<-'VALUES'
	replicaCount: 2
	extraArgs: {v: 4, scan-interval: 10s}
VALUES
out=$(render -f "$ca_values" | kubectl apply --dry-run=server -f - 2>&1) || { rm -f "$ca_values"; t_fail "server dry-run with cluster-autoscaler-style values: $out"; }
dep=$(render -f "$ca_values" --show-only templates/deployment.yaml)
rm -f "$ca_values"
t_contains "replicaCount: 2 gives 2 replicas" "replicas: 2" "$dep"
t_contains "extraArgs' v: 4 is --v=4" '- "--v=4"' "$dep"
t_contains "extraArgs' scan-interval is --scan-interval=10s" '- "--scan-interval=10s"' "$dep"
mapfile -t ca_args < <(kubectl create --dry-run=client -f - -o json <<<"$dep" | python3 -c 'import json, sys
d = json.load(sys.stdin)
for a in d["spec"]["template"]["spec"]["containers"][0]["args"][1:]:
    if not a.startswith("--config="):
        print(a)')
out=$("$PROVREQD_BUILDDIR/provreqd" check-config "${ca_args[@]}" 2>&1 >/dev/null) ||
	t_fail "provreqd refuses the chart's arguments with extraArgs {v: 4, scan-interval: 10s}: $out"
t_contains "and provreqd says it ignores --scan-interval" "warning: --scan-interval: a cluster-autoscaler flag provreqd accepts and ignores" "$out"
t_pass "cluster-autoscaler-style values (replicaCount, extraArgs map) render a Deployment whose arguments provreqd accepts"

# kwok: the projected volume puts drivers/cloud-config.yaml and
# nodegroups/NAME.yaml under /etc/provreqd, where the flags point.
kwok_values=$(mktemp)
cat >"$kwok_values" <<-'VALUES'
	drivers:
	  kwok:
	    enabled: true
	    nodeTemplates:
	      general:
	        apiVersion: v1
	        kind: Node
	        metadata: {name: general, annotations: {provreqd.io/max-size: "10"}}
	        status: {capacity: {cpu: "4", memory: 16Gi, pods: "110"}}
VALUES
out=$(render -f "$kwok_values" | kubectl apply --dry-run=server -f - 2>&1) || { rm -f "$kwok_values"; t_fail "server dry-run with kwok: $out"; }
dep=$(render -f "$kwok_values" --show-only templates/deployment.yaml)
cm=$(render -f "$kwok_values" --show-only templates/configmap.yaml)
rm -f "$kwok_values"
t_contains "kwok.so is loaded" "--cloud-driver=/usr/lib/provreqd/drivers/kwok.so" "$dep"
t_contains "the cloud config is at the flag's path" "--cloud-config=/etc/provreqd/drivers/cloud-config.yaml" "$dep"
t_contains "it is projected there" "path: drivers/cloud-config.yaml" "$dep"
t_contains "the node template is projected into templateDir" "path: nodegroups/general.yaml" "$dep"
t_contains "the cloud config names that templateDir" "templateDir: /etc/provreqd/nodegroups" "$cm"
# The rendered driver config is one the kwok driver accepts.
tdir=$(mktemp -d)
mkdir -p "$tdir/nodegroups"
# (kubectl create prints each object on its own; only the drivers'
# ConfigMap has the key.)
kubectl create --dry-run=client -f - -o 'jsonpath={.data.nodegroup-general\.yaml}' \
	<<<"$cm" >"$tdir/nodegroups/general.yaml"
printf 'templateDir: %s/nodegroups\n' "$tdir" >"$tdir/cloud.yaml"
out=$("$PROVREQD_BUILDDIR/provreqd" check-driver "$PROVREQD_BUILDDIR/cloud/kwok/.libs/kwok.so" --cloud-config "$tdir/cloud.yaml" 2>&1) ||
	out="FAILED: $out"
rm -rf "$tdir"
t_contains "the kwok driver reads the chart's node template" "general min=0 max=10" "$out"
out=$("$helm" template provreqd "$chart" --set drivers.kwok.enabled=true --set drivers.clusterapi.enabled=true 2>&1) &&
	t_fail "kwok and clusterapi together rendered, though they cannot share one --cloud-config"
t_contains "kwok + clusterapi is refused with the reason" "one --cloud-config file to every driver" "$out"
t_contains "the ServiceMonitor renders when enabled" "kind: ServiceMonitor" \
	"$(render --set serviceMonitor.enabled=true --show-only templates/servicemonitor.yaml)"
t_contains "with tokenreview it sends its ServiceAccount token" "bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token" \
	"$(render --set serviceMonitor.enabled=true --set metrics.access=tokenreview --show-only templates/servicemonitor.yaml)"

# --- Values for real installs (issue 29).
# kwok without node templates renders a pod that could only crash-loop
# (the config volume hides the image's templates): refused, as is a
# custom driver on no volume and a config key provreqd does not have.
out=$("$helm" template provreqd "$chart" --set drivers.kwok.enabled=true 2>&1) &&
	t_fail "kwok without nodeTemplates rendered"
t_contains "kwok without nodeTemplates is refused with the reason" "is on no volume of extraVolumeMounts" "$out"
out=$("$helm" template provreqd "$chart" --set 'drivers.custom[0].name=mine' --set 'drivers.custom[0].path=/opt/mine/mine.so' 2>&1) &&
	t_fail "a custom driver on no volume rendered"
t_contains "a custom driver on no volume is refused" "neither in drivers.dir" "$out"
out=$("$helm" template provreqd "$chart" --set config.scaleDown.enabeld=false 2>&1) && t_fail "a misspelt config key rendered"
t_contains "a misspelt config key is refused, named" "config.scaleDown.enabeld: provreqd has no such setting" "$out"

# Everything a real install sets, at once, through the server's dry-run.
real_values=$(mktemp)
cat >"$real_values" <<-'VALUES'
	serviceAccount:
	  annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::111122223333:role/provreqd"}
	config:
	  scaleDown: {enabled: false}
	  log: {level: 3}
	podSecurityContext:
	  runAsNonRoot: true
	  runAsUser: 1001
	  runAsGroup: 1001
	  fsGroup: 1001
	  seccompProfile: {type: RuntimeDefault}
	securityContext:
	  allowPrivilegeEscalation: false
	  readOnlyRootFilesystem: true
	  capabilities: {drop: ["ALL"]}
	  seLinuxOptions: {level: "s0:c1,c2"}
	livenessProbe:
	  httpGet: {path: /healthz, port: http}
	  initialDelaySeconds: 45
	readinessProbe: null
	startupProbe:
	  httpGet: {path: /healthz, port: http}
	  failureThreshold: 30
	drivers:
	  kwok:
	    enabled: true
	    config: {templateDir: /opt/templates}
	extraVolumes:
	  - name: templates
	    configMap: {name: my-node-templates}
	extraVolumeMounts:
	  - name: templates
	    mountPath: /opt/templates
	    readOnly: true
	metrics:
	  access: tokenreview
	networkPolicy:
	  enabled: true
	  metricsFrom:
	    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
	serviceMonitor:
	  enabled: false
VALUES
out=$(render -f "$real_values" | kubectl apply --dry-run=server -f - 2>&1) || { rm -f "$real_values"; t_fail "server dry-run of a real install's values: $out"; }
[[ "$out" != *Warning* ]] || { rm -f "$real_values"; t_fail "the dry-run printed warnings: $out"; }
t_pass "a rendering with every real-install value passes the server's dry-run"
objs=$(render -f "$real_values" | kubectl create --dry-run=client -f - -o json)
rm -f "$real_values"
q() { jq -r "$1" <<<"$objs"; }
t_eq "serviceAccount.annotations land on the ServiceAccount" "arn:aws:iam::111122223333:role/provreqd" \
	"$(q 'select(.kind == "ServiceAccount") | .metadata.annotations["eks.amazonaws.com/role-arn"]')"
t_eq "podSecurityContext replaces the pod's" 1001 "$(q 'select(.kind == "Deployment") | .spec.template.spec.securityContext.runAsUser')"
t_eq "securityContext replaces the container's" "s0:c1,c2" \
	"$(q 'select(.kind == "Deployment") | .spec.template.spec.containers[0].securityContext.seLinuxOptions.level')"
t_eq "livenessProbe is overridden" 45 "$(q 'select(.kind == "Deployment") | .spec.template.spec.containers[0].livenessProbe.initialDelaySeconds')"
t_eq "readinessProbe: null drops it" null "$(q 'select(.kind == "Deployment") | .spec.template.spec.containers[0].readinessProbe')"
t_eq "startupProbe is added" 30 "$(q 'select(.kind == "Deployment") | .spec.template.spec.containers[0].startupProbe.failureThreshold')"
t_eq "extraVolumes are added" my-node-templates \
	"$(q 'select(.kind == "Deployment") | .spec.template.spec.volumes[] | select(.name == "templates") | .configMap.name')"
t_eq "extraVolumeMounts are mounted" /opt/templates \
	"$(q 'select(.kind == "Deployment") | .spec.template.spec.containers[0].volumeMounts[] | select(.name == "templates") | .mountPath')"
t_contains "kwok reads its templates from the extra volume" "templateDir: /opt/templates" \
	"$(q 'select(.kind == "ConfigMap" and (.metadata.name | endswith("-drivers"))) | .data["cloud-config.yaml"]')"
t_contains "metrics.access is passed as --metrics-access" "--metrics-access=tokenreview" \
	"$(q 'select(.kind == "Deployment") | .spec.template.spec.containers[0].args[]')"
t_contains "tokenreview: provreqd may create TokenReviews and SubjectAccessReviews" "tokenreviews subjectaccessreviews" \
	"$(q 'select(.kind == "ClusterRole" and .metadata.name == "provreqd") | [.rules[].resources[]] | join(" ")')"
t_eq "tokenreview: a metrics-reader ClusterRole for the scraper" '["/metrics"]get' \
	"$(q 'select(.kind == "ClusterRole" and .metadata.name == "provreqd-metrics-reader") | (.rules[0].nonResourceURLs | tojson) + .rules[0].verbs[0]')"
t_eq "the NetworkPolicy admits the listed peers to the http port" "http monitoring" \
	"$(q 'select(.kind == "NetworkPolicy") | "\(.spec.ingress[0].ports[0].port) \(.spec.ingress[0].from[0].namespaceSelector.matchLabels["kubernetes.io/metadata.name"])"')"
cfg=$(q 'select(.kind == "ConfigMap" and .metadata.name == "provreqd-config") | .data["provreqd.yaml"]')
tdir=$(mktemp -d)
printf '%s\n' "$cfg" >"$tdir/provreqd.yaml"
out=$("$PROVREQD_BUILDDIR/provreqd" check-config --config "$tdir/provreqd.yaml" 2>&1) || out="REFUSED: $out"
rm -rf "$tdir"
t_contains "config is merged key by key: scaleDown.enabled false" "$(printf 'scaleDown:\n  # remove nodes')" "$out"
grep -A3 '^scaleDown:' <<<"$out" | grep -q 'enabled: false' || t_fail "check-config of the merged config does not say scaleDown.enabled false: $out"
grep -A4 '^log:' <<<"$out" | grep -q 'level: 3' || t_fail "check-config of the merged config does not say log.level 3: $out"
t_contains "the keys not given keep the chart's defaults (state.db on the state volume)" 'db: "/var/lib/provreqd/state.db"' "$out"
t_pass "check-config accepts the merged config: scaleDown.enabled false, log.level 3, the rest as shipped"
t_eq "a config string still replaces the whole file" "x: 1" \
	"$(render --set-string config='x: 1' --show-only templates/configmap.yaml | kubectl create --dry-run=client -f - -o 'jsonpath={.data.provreqd\.yaml}')"

# The CRDs ship in crds/, as crd/ has them (helm prints them in file
# name order, a blank line between).
out=$("$helm" show crds "$chart")
t_eq "helm show crds is crd/provisioningclasses.yaml and crd/provisioningrequests.yaml" \
	"$(cat "$src/crd/provisioningclasses.yaml"; echo; cat "$src/crd/provisioningrequests.yaml")" "$out"
t_contains "--include-crds renders it" "name: provisioningrequests.autoscaling.x-k8s.io" "$(render --include-crds)"
t_contains "--include-crds renders the ProvisioningClass CRD" "name: provisioningclasses.provreqd.io" "$(render --include-crds)"

# The user roles, for real, aggregated by kube-controller-manager's
# clusterrole-aggregation controller into edit/admin and view.
kubectl create namespace "$users_ns" >/dev/null
kubectl -n "$users_ns" create rolebinding alice-edit --clusterrole=edit --user=alice >/dev/null
kubectl -n "$users_ns" create rolebinding bob-view --clusterrole=view --user=bob >/dev/null
kubectl -n "$users_ns" create rolebinding carol-admin --clusterrole=admin --user=carol >/dev/null
can() { kubectl auth can-i "$@" -n "$users_ns" 2>/dev/null || true; }
t_eq "before the chart's roles, edit may not create ProvisioningRequests" no "$(can create "$pr" --as=alice)"
# (Kubernetes' own edit role does not cover PodTemplates either.)
t_eq "before the chart's roles, edit may not create PodTemplates" no "$(can create podtemplates --as=alice)"
render --show-only templates/user-roles.yaml | kubectl apply -f - >/dev/null
t_wait 60 "edit is aggregated: alice may create ProvisioningRequests" \
	bash -c "[[ \$(kubectl auth can-i create $pr --as=alice -n $users_ns) == yes ]]"
t_wait 30 "view is aggregated: bob may list ProvisioningRequests" \
	bash -c "[[ \$(kubectl auth can-i list $pr --as=bob -n $users_ns) == yes ]]"
for v in update patch delete get list watch; do t_eq "edit may $v" yes "$(can "$v" "$pr" --as=alice)"; done
for v in get watch; do t_eq "view may $v" yes "$(can "$v" "$pr" --as=bob)"; done
for v in create update patch delete; do t_eq "view may not $v" no "$(can "$v" "$pr" --as=bob)"; done
for v in create update delete; do t_eq "edit may $v the PodTemplates a request names" yes "$(can "$v" podtemplates --as=alice)"; done
t_eq "view may list PodTemplates" yes "$(can list podtemplates --as=bob)"
t_eq "view may not create PodTemplates" no "$(can create podtemplates --as=bob)"
t_eq "admin may create ProvisioningRequests" yes "$(can create "$pr" --as=carol)"
t_eq "edit may not write status" no "$(can patch "$pr" --subresource=status --as=alice)"
t_eq "edit may not create them in another namespace" no \
	"$(kubectl auth can-i create "$pr" --as=alice -n default 2>/dev/null || true)"
render --show-only templates/user-roles.yaml | kubectl delete -f - >/dev/null
t_wait 60 "without the chart's roles, edit may no longer create ProvisioningRequests" \
	bash -c "[[ \$(kubectl auth can-i create $pr --as=alice -n $users_ns) == no ]]"
t_done

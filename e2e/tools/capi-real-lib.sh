# shellcheck shell=bash
# The real Cluster API for the e2e scenarios whose name contains capi-real:
# a management control plane of its own (e2e/cluster.sh, beside the run's
# cluster), the Cluster API CRDs of the pinned release (build-binaries.sh
# keeps them beside capi-manager), its webhooks registered as a real
# install does (a self-signed serving certificate on loopback, caBundle in
# the webhook configurations), the core manager, and provreqd's e2e
# infrastructure provider (capi-real-infra-provider.sh). Sourced after
# testlib.sh.
#
#   capi_real_up DIR        start all of it under DIR; sets CAPI_MGMT_KUBECONFIG
#   capi_real_down          stop what capi_real_up started (idempotent)
#   capi_real_cluster NS NAME WORKLOAD_KUBECONFIG
#                           a Cluster NAME in NS (management cluster) whose
#                           workload kubeconfig Secret points at WORKLOAD_KUBECONFIG,
#                           with an E2ECluster and an E2EControlPlane; waits for
#                           InfrastructureReady and ControlPlaneInitialized
#   capi_real_provider NS WORKLOAD_KUBECONFIG LOG
#                           start the infrastructure provider for NS

CAPI_DIR=$("$PROVREQD_SRCDIR/e2e/build-binaries.sh" --print-capi-dir)
CAPI_MGMT_DIR=""
CAPI_MGMT_KUBECONFIG=""
CAPI_MANAGER_PID=""
CAPI_PROVIDER_PIDS=()

capi_k() { kubectl --kubeconfig "$CAPI_MGMT_KUBECONFIG" "$@"; }

# Serving certificate for 127.0.0.1, self-signed: it is its own CA bundle.
capi_real_cert() {
	local d=$1
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=capi-webhook" \
		-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
		-keyout "$d/tls.key" -out "$d/tls.crt" >/dev/null 2>&1
}

# The module's webhook manifests with each service reference turned into
# a URL on loopback and the CA bundle filled in, as cert-manager's CA
# injector would.
capi_real_webhooks() {
	local port=$1 ca=$2
	python3 - "$CAPI_DIR/webhook/manifests.yaml" "$port" "$ca" <<'EOF'
import base64, sys, yaml
src, port, ca = sys.argv[1], sys.argv[2], sys.argv[3]
bundle = base64.b64encode(open(ca, "rb").read()).decode()
docs = [d for d in yaml.safe_load_all(open(src)) if d]
for d in docs:
    d["metadata"]["name"] = "capi-" + d["metadata"]["name"]
    for w in d.get("webhooks", []):
        path = w["clientConfig"]["service"]["path"]
        w["clientConfig"] = {"url": "https://127.0.0.1:%s%s" % (port, path), "caBundle": bundle}
print(yaml.safe_dump_all(docs))
EOF
}

capi_real_up() {
	local dir=$1 out wport hport dport
	CAPI_MGMT_DIR="$dir/mgmt"
	[[ -x "$CAPI_DIR/bin/capi-manager" ]] || t_fail "capi-manager is not built: run e2e/build-binaries.sh"
	out=$("$PROVREQD_SRCDIR/e2e/cluster.sh" up --dir "$CAPI_MGMT_DIR" 2>"$dir/mgmt-up.log") ||
		t_fail "the management control plane did not start: $(tail -n 20 "$dir/mgmt-up.log")"
	CAPI_MGMT_KUBECONFIG=$(sed -n 's/^export KUBECONFIG=//p' <<<"$out" | tr -d "'\"")
	[[ -f "$CAPI_MGMT_KUBECONFIG" ]] || t_fail "no KUBECONFIG in: $out"
	capi_k apply --server-side -f "$CAPI_DIR/crd/" >/dev/null
	capi_k apply --server-side -f "$PROVREQD_SRCDIR/e2e/crds/capi-real-e2e-provider.yaml" >/dev/null
	capi_k wait --for=condition=Established crd --all --timeout=60s >/dev/null
	capi_real_cert "$dir/webhook-certs"
	# A free port may be taken by someone else before the manager binds it
	# (other runs share the machine): start again on new ports then.
	local try
	for try in 1 2 3; do
		wport=$(pr_free_port)
		hport=$(pr_free_port)
		dport=$(pr_free_port)
		KUBECONFIG=$CAPI_MGMT_KUBECONFIG "$CAPI_DIR/bin/capi-manager" --webhook-port "$wport" \
			--webhook-cert-dir "$dir/webhook-certs" --health-addr "127.0.0.1:$hport" \
			--diagnostics-address "127.0.0.1:$dport" --insecure-diagnostics \
			--leader-elect=false --v=2 >"$dir/capi-manager.log" 2>&1 &
		CAPI_MANAGER_PID=$!
		t_wait 90 "capi-manager is ready" capi_real_manager_ready "$hport"
		kill -0 "$CAPI_MANAGER_PID" 2>/dev/null && break
		wait "$CAPI_MANAGER_PID" 2>/dev/null
		CAPI_MANAGER_PID=""
		grep -q "address already in use" "$dir/capi-manager.log" ||
			t_fail "capi-manager exited: $(tail -n 5 "$dir/capi-manager.log")"
		t_log "capi-manager lost a port to another process (attempt $try); new ports"
	done
	[[ -n "$CAPI_MANAGER_PID" ]] || t_fail "capi-manager could not bind its ports in 3 attempts"
	capi_real_webhooks "$wport" "$dir/webhook-certs/tls.crt" | capi_k apply -f - >/dev/null
	t_pass "real Cluster API $CAPI_VERSION: CRDs, webhooks on 127.0.0.1:$wport, core manager (pid $CAPI_MANAGER_PID)"
}

# Ready, or exited (then capi_real_up looks at why).
capi_real_manager_ready() {
	kill -0 "$CAPI_MANAGER_PID" 2>/dev/null || return 0
	curl -fsS --max-time 2 "http://127.0.0.1:$1/readyz"
}

capi_real_down() {
	local p
	for p in "${CAPI_PROVIDER_PIDS[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	CAPI_PROVIDER_PIDS=()
	if [[ -n "$CAPI_MANAGER_PID" ]]; then
		kill "$CAPI_MANAGER_PID" 2>/dev/null
		wait "$CAPI_MANAGER_PID" 2>/dev/null
		CAPI_MANAGER_PID=""
	fi
	if [[ -n "$CAPI_MGMT_DIR" && -f "$CAPI_MGMT_DIR/.provreqd-e2e-cluster" ]]; then
		"$PROVREQD_SRCDIR/e2e/cluster.sh" down --dir "$CAPI_MGMT_DIR" >/dev/null 2>&1
	fi
}

capi_real_provider() {
	MGMT_KUBECONFIG=$CAPI_MGMT_KUBECONFIG WORKLOAD_KUBECONFIG=$2 \
		"$PROVREQD_SRCDIR/e2e/tools/capi-real-infra-provider.sh" "$1" >"$3" 2>&1 &
	CAPI_PROVIDER_PIDS+=($!)
}

capi_real_cluster() {
	local ns=$1 name=$2 wkc=$3
	capi_k create namespace "$ns" >/dev/null 2>&1 || true
	capi_k -n "$ns" create secret generic "$name-kubeconfig" --from-file=value="$wkc" \
		--type=cluster.x-k8s.io/secret >/dev/null
	capi_k -n "$ns" label secret "$name-kubeconfig" "cluster.x-k8s.io/cluster-name=$name" >/dev/null
	capi_k -n "$ns" create secret generic bootstrap-data --from-literal=value='#!/bin/true' \
		--from-literal=format=cloud-config >/dev/null
	capi_k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: controlplane.e2e.provreqd.io/v1alpha1
kind: E2EControlPlane
metadata: {name: $name-cp}
spec: {}
---
apiVersion: infrastructure.e2e.provreqd.io/v1alpha1
kind: E2ECluster
metadata: {name: $name}
spec: {}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: $name}
spec:
  infrastructureRef: {apiGroup: infrastructure.e2e.provreqd.io, kind: E2ECluster, name: $name}
  controlPlaneRef: {apiGroup: controlplane.e2e.provreqd.io, kind: E2EControlPlane, name: $name-cp}
EOF
	t_wait 60 "Cluster $name: InfrastructureReady" bash -c "kubectl --kubeconfig '$CAPI_MGMT_KUBECONFIG' -n '$ns' \
		get cluster '$name' -o 'jsonpath={.status.conditions[?(@.type==\"InfrastructureReady\")].status}' | grep -qx True"
	t_wait 60 "Cluster $name: ControlPlaneInitialized" bash -c "kubectl --kubeconfig '$CAPI_MGMT_KUBECONFIG' -n '$ns' \
		get cluster '$name' -o 'jsonpath={.status.initialization.controlPlaneInitialized}' | grep -qx true"
}

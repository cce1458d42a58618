#!/usr/bin/env bash
# The container image under a real engine (podman), run as the chart's
# Deployment runs it, against the real apiserver:
#  - `make image` builds the OCI archive (incremental after the first
#    build: the work directory is in the build tree) and `podman load`
#    loads it; the image names the chart renders (provreqd:VERSION) finds it;
#  - the chart is rendered with the kwok driver and one node group, and
#    its ServiceAccount, RBAC and ConfigMaps are applied for real;
#  - e2e/tools/deployment-to-podman.py turns the rendered Deployment into
#    `podman run` arguments: its args and env, user 65532, read-only root
#    with only the Deployment's emptyDirs writable (tmpfs), every
#    capability dropped, no-new-privileges, the projected config mounted
#    read-only, and a service-account token of the chart's ServiceAccount
#    where the kubelet puts one (in-cluster config, the chart's RBAC);
#    --network host reaches the loopback apiserver;
#  - the container becomes ready and leads, the probes' paths answer on
#    the chart's port, an atomic scale-up request is Provisioned with
#    nodes of the kwok driver, and `podman stop` ends it with status 0.
# Why not `podman kube play` of the rendered Deployment: Debian 12's podman
# 4.3 refuses the chart's projected config volume ("HostPath, ConfigMap,
# EmptyDir, and PersistentVolumeClaim are currently the only supported
# VolumeSource") and has no service-account tokens.
# Prints bench=image_run_provisioned_s: from `podman run` to the request's
# Provisioned=True (the request is created right after the run starts).
#
# podman runs with a containers.conf and storage.conf of its own (runc,
# the cgroupfs cgroup manager, no default ulimits, host network, file
# events; the machine's files are not touched); its image store, and the
# image build's work directory and archive, are cached in
# ${XDG_CACHE_HOME:-$HOME/.cache}/provreqd-podman (PROVREQD_PODMAN_CACHE
# moves it). It needs root (rootless podman needs subordinate ids this
# setup does not make) and skips without it; it fails when podman or helm
# is missing (.ci/deps.sh installs podman, .ci/run builds helm).
set -euo pipefail
# shellcheck source=../testlib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../testlib.sh"
# shellcheck source=../tools/pr-e2e-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tools/pr-e2e-lib.sh"

(($(id -u) == 0)) || t_skip "podman runs rootful here; run as root"
command -v podman >/dev/null 2>&1 || t_fail "podman is missing: bash .ci/deps.sh installs it"
helm=$("$E2E_DIR/build-helm.sh" --print-bin)
[[ -x "$helm" ]] || t_fail "helm is not built ($helm missing): run e2e/build-helm.sh (.ci/run does)"
command -v jq >/dev/null 2>&1 || t_fail "jq is missing: bash .ci/deps.sh installs it"

pr_init img52
ns=$(t_unique img52sys)
release=img52
cname=$(t_unique provreqd-img52)
grp=$(t_unique img52g)
PR_GROUPS+=("$grp")
pm_dir=$PR_WORK/podman
cache=${PROVREQD_PODMAN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provreqd-podman}
mkdir -p "$pm_dir/run" "$cache/storage" "$PR_WORK/pod/serviceaccount"
cat >"$pm_dir/containers.conf" <<'EOF'
[containers]
default_ulimits = []
netns = "host"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
cat >"$pm_dir/storage.conf" <<EOF
[storage]
driver = "overlay"
runroot = "$pm_dir/run"
graphroot = "$cache/storage"
EOF
export CONTAINERS_CONF=$pm_dir/containers.conf CONTAINERS_STORAGE_CONF=$pm_dir/storage.conf
pm() { podman --events-backend file --tmpdir "$pm_dir/run" "$@"; }
# Cleanup, first thing on exit: the container's log when it failed, then
# the container, the chart's cluster-scoped objects and its namespace.
pm_cleanup() {
	local rc=$1
	if ((rc != 0 && rc != 77)) && pm container exists "$cname" 2>/dev/null; then
		t_log "--- container log (last 60 lines)"
		pm logs --tail 60 "$cname" 2>&1
	fi
	pm rm -f -t 5 "$cname" >/dev/null 2>&1
	# Older builds of the image lost their tags to this one: drop them, so
	# the cache holds one image, not one per build.
	pm image prune -f >/dev/null 2>&1
	[[ -f "$PR_WORK/rendered.yaml" ]] && kubectl delete -f "$PR_WORK/cluster-objects.yaml" --ignore-not-found >/dev/null 2>&1
	kubectl delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1
}
# shellcheck disable=SC2016 # $rc is pr_cleanup's, when the hook is eval'd
pr_on_exit 'pm_cleanup $rc'

version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$PROVREQD_SRCDIR/charts/provreqd/Chart.yaml")
# The image's build directory, downloaded .debs and archive live in the
# cache, one set per build tree (incremental, and never inside the source
# tree, which CI configures in place).
tree=$(printf '%s' "$PROVREQD_BUILDDIR" | sha256sum | cut -c1-12)
archive=$cache/provreqd-$version-$tree-oci.tar
t0=$SECONDS
out=$(make -C "$PROVREQD_BUILDDIR" image IMAGE_JOBS="${PROVREQD_E2E_IMAGE_JOBS:-1}" \
	IMAGE_WORKDIR="$cache/work-$tree" IMAGE_ARCHIVE="$archive" 2>&1) ||
	t_fail "make image: $(tail -n 20 <<<"$out")"
[[ -f "$archive" ]] || t_fail "make image left no $archive"
t_pass "make image built $(basename "$archive") ($((SECONDS - t0))s)"
t0=$SECONDS
out=$(pm load -q -i "$archive" 2>&1) || t_fail "podman load: $out"
# The archive's ref.name is the tag alone; the chart's image is
# provreqd:VERSION, which podman resolves to localhost/provreqd:VERSION.
loaded=$(sed -n 's/^Loaded image: //p' <<<"$out" | head -n 1)
[[ -n "$loaded" ]] || t_fail "podman load named no image: $out"
pm tag "$loaded" "localhost/provreqd:$version"
t_eq "the image runs as 65532:65532" 65532:65532 "$(pm image inspect "localhost/provreqd:$version" --format '{{.Config.User}}')"
t_pass "podman load: $loaded, tagged localhost/provreqd:$version ($((SECONDS - t0))s)"

# The chart with the kwok driver and one node group; the metrics port is a
# free one (the container shares the host's network).
port=$(pr_free_port)
cat >"$PR_WORK/values.yaml" <<EOF
replicas: 1
service: {port: $port}
drivers:
  kwok:
    enabled: true
    nodeTemplates:
      $grp:
        apiVersion: v1
        kind: Node
        metadata:
          name: $grp
          annotations: {provreqd.io/min-size: "0", provreqd.io/max-size: "4"}
          labels: {kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
        status:
          capacity: {cpu: "4", memory: 8Gi, pods: "110"}
EOF
"$helm" template "$release" "$PROVREQD_SRCDIR/charts/provreqd" -n "$ns" --set createNamespace=true \
	-f "$PR_WORK/values.yaml" >"$PR_WORK/rendered.yaml" || t_fail "helm template with kwok did not render"
# What a cluster install would create, except the Deployment (podman runs
# its Pod) and the PodDisruptionBudget and Service, which select nothing here.
kubectl create --dry-run=client -f "$PR_WORK/rendered.yaml" -o json |
	jq -c 'select(.kind != "Deployment" and .kind != "PodDisruptionBudget" and .kind != "Service")' \
		>"$PR_WORK/apply.json"
jq -c 'select(.metadata.namespace == null)' "$PR_WORK/apply.json" >"$PR_WORK/cluster-objects.yaml"
out=$(kubectl apply -f "$PR_WORK/apply.json" 2>&1) || t_fail "applying the chart's objects: $out"
t_pass "the chart's Namespace, ServiceAccount, RBAC and ConfigMaps are applied ($(wc -l <"$PR_WORK/apply.json") objects)"

sa=$(jq -r 'select(.kind == "ServiceAccount") | .metadata.name' "$PR_WORK/apply.json")
kubectl -n "$ns" create token "$sa" --duration 1h >"$PR_WORK/pod/serviceaccount/token"
cp "$PROVREQD_E2E_CLUSTER_DIR/pki/ca.crt" "$PR_WORK/pod/serviceaccount/ca.crt"
printf '%s' "$ns" >"$PR_WORK/pod/serviceaccount/namespace"
chmod 0755 "$PR_WORK/pod" "$PR_WORK/pod/serviceaccount"
chmod 0644 "$PR_WORK/pod/serviceaccount"/*
mapfile -t run_args < <(kubectl create --dry-run=client -f "$PR_WORK/rendered.yaml" -o json |
	python3 "$E2E_DIR/tools/deployment-to-podman.py" "$PR_WORK/pod" "$cname" "127.0.0.1:$APISERVER_PORT")
((${#run_args[@]} > 4)) || t_fail "deployment-to-podman.py gave no arguments"
t_log "podman run ${run_args[*]}"
for want in "--user 65532:65532" "--read-only" "--cap-drop=ALL" "no-new-privileges" \
	"/etc/provreqd:ro" "state:/var/lib/provreqd" "tmp:/tmp" "provreqd:$version run --config=/etc/provreqd/provreqd.yaml" \
	"--cloud-driver=/usr/lib/provreqd/drivers/kwok.so"; do
	t_contains "the run carries the Deployment's $want" "$want" "${run_args[*]}"
done

pr_template small 1500m 1Gi "$grp"
t_start=$SECONDS
pm run -d "${run_args[@]}" >/dev/null || t_fail "podman run failed"
pr_request img atomic-scale-up small 3
PR_HTTP=127.0.0.1:$port
img_running() { [[ "$(pm inspect -f '{{.State.Running}}' "$cname" 2>/dev/null)" == true ]]; }
# (Output inside t_wait is discarded: a stopped container ends the wait and
# is reported after it.)
img_ready() { ! img_running || curl -fsS --max-time 2 "http://$PR_HTTP/readyz" >/dev/null 2>&1; }
t_wait 60 "the container is ready (or stopped)" img_ready
img_running || t_fail "the container stopped: $(pm logs --tail 20 "$cname" 2>&1)"
t_pass "it is ready on the chart's port $port"
t_eq "/healthz (the liveness probe's path) answers ok" ok "$(curl -fsS --max-time 5 "http://$PR_HTTP/healthz")"
t_wait 30 "it leads (the chart's Lease, through its Role)" \
	bash -c "curl -fsS --max-time 2 http://$PR_HTTP/metrics | grep -qx 'provreqd_leader 1'"
t_wait 120 "the request is Provisioned=True/CapacityIsProvisioned" pr_cond_is img Provisioned True/CapacityIsProvisioned
took=$((SECONDS - t_start))
t_eq "the kwok driver made 2 nodes of $grp (3 pods of 1.5 CPU, 2 per 4-CPU node)" 2 "$(pr_count "$grp")"
pid=$(pm inspect -f '{{.State.Pid}}' "$cname")
t_eq "the process runs as uid 65532" 65532 "$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")"
t_eq "its root filesystem is read-only" true "$(pm inspect -f '{{.HostConfig.ReadonlyRootfs}}' "$cname")"
t_eq "it has no capabilities" 0000000000000000 "$(awk '/^CapEff:/ { print $2 }' "/proc/$pid/status")"
t_eq "it cannot gain privileges" 1 "$(awk '/^NoNewPrivs:/ { print $2 }' "/proc/$pid/status")"
pm stop -t 20 "$cname" >/dev/null
t_eq "podman stop (SIGTERM) ends it with status 0" 0 "$(pm inspect -f '{{.State.ExitCode}}' "$cname")"
t_log "bench=image_run_provisioned_s $took"
t_done

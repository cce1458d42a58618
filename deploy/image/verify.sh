#!/usr/bin/env bash
# Check an OCI archive made by build.sh without a container engine:
#
#   * the layout: oci-layout, index.json -> manifest -> config and layer,
#     every blob's sha256 and size as its descriptor says, the layer's
#     uncompressed digest as the config's diff_id, the config's user,
#     entrypoint and volumes;
#   * the image's files alone: the layer is unpacked into an empty
#     directory and the binaries run inside it with chroot, as uid 65532
#     (chroot needs root), on a read-only bind mount of that tree with
#     tmpfs at /tmp and /var/lib/provreqd when mounts are allowed here:
#     `provreqd --version`, `provreqd check-config` of the image's config,
#     `provreqd check-driver` of kwok.so (listing the example groups) and
#     of clusterapi.so and karpenter.so (they load; listing needs an
#     apiserver, karpenter.so a shape table), and the
#     kubectl plugin's --help;
#   * with --kubeconfig FILE (a kubeconfig with its certificates embedded,
#     e.g. the e2e cluster's): `provreqd run` inside the chroot, with the
#     kwok driver, against that cluster, until /readyz answers 200 and
#     /metrics serves; then SIGTERM, which must end it with status 0, and
#     the state database must be in /var/lib/provreqd. That is the image's
#     libcurl, OpenSSL and SQLite doing real work. The chroot shares the
#     host's network, so a loopback apiserver is reachable.
#
# Usage: verify.sh ARCHIVE.tar [--kubeconfig FILE [--http-port N]]
set -euo pipefail
{

die() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
ok() { printf 'ok: %s\n' "$*"; }

archive=${1:?usage: verify.sh ARCHIVE.tar [--kubeconfig FILE [--http-port N]]}
shift
kubeconfig='' http_port=18089
while (($#)); do
	case $1 in
	--kubeconfig) kubeconfig=$2; shift ;;
	--http-port) http_port=$2; shift ;;
	*) die "unknown argument: $1" ;;
	esac
	shift
done
[[ -z "$kubeconfig" || -f "$kubeconfig" ]] || die "no such kubeconfig: $kubeconfig"
[[ -f "$archive" ]] || die "no such file: $archive"
(($(id -u) == 0)) || die "verify.sh needs root (chroot)"
for t in jq sha256sum tar gzip chroot; do
	command -v "$t" >/dev/null 2>&1 || die "$t is missing"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/provreqd-image-verify.XXXXXX")
mounted=()
pid=''
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	local i
	# A provreqd still running holds the mounts.
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[$i]}" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

layout=$tmp/layout root=$tmp/root
mkdir -p "$layout" "$root"
tar -C "$layout" -xf "$archive"
[[ "$(jq -r .imageLayoutVersion "$layout/oci-layout")" == 1.0.0 ]] || die "oci-layout is not version 1.0.0"

# check_blob DIGEST SIZE: the blob exists with that sha256 and size.
check_blob() {
	local d=${1#sha256:} f
	f=$layout/blobs/sha256/$d
	[[ -f "$f" ]] || die "blob $1 is missing"
	[[ "$(sha256sum "$f" | cut -d' ' -f1)" == "$d" ]] || die "blob $1 does not hash to its name"
	[[ "$(stat -c %s "$f")" == "$2" ]] || die "blob $1 is $(stat -c %s "$f") bytes, its descriptor says $2"
}
blob() { printf '%s/blobs/sha256/%s\n' "$layout" "${1#sha256:}"; }

idx=$layout/index.json
[[ "$(jq -r '.manifests | length' "$idx")" == 1 ]] || die "index.json does not list exactly one manifest"
mdesc=$(jq -c '.manifests[0]' "$idx")
[[ "$(jq -r .mediaType <<<"$mdesc")" == application/vnd.oci.image.manifest.v1+json ]] || die "index entry is not an OCI manifest"
mdigest=$(jq -r .digest <<<"$mdesc")
check_blob "$mdigest" "$(jq -r .size <<<"$mdesc")"
man=$(blob "$mdigest")
[[ "$(jq -r .schemaVersion "$man")" == 2 ]] || die "manifest schemaVersion is not 2"
cdigest=$(jq -r .config.digest "$man")
check_blob "$cdigest" "$(jq -r .config.size "$man")"
cfg=$(blob "$cdigest")
[[ "$(jq -r '.layers | length' "$man")" == 1 ]] || die "the manifest does not have exactly one layer"
[[ "$(jq -r '.layers[0].mediaType' "$man")" == application/vnd.oci.image.layer.v1.tar+gzip ]] || die "the layer is not tar+gzip"
ldigest=$(jq -r '.layers[0].digest' "$man")
check_blob "$ldigest" "$(jq -r '.layers[0].size' "$man")"
diff=$(gzip -dc "$(blob "$ldigest")" | sha256sum | cut -d' ' -f1)
[[ "sha256:$diff" == "$(jq -r '.rootfs.diff_ids[0]' "$cfg")" ]] || die "the layer's diff_id does not match the config"
ok "layout: index -> manifest $mdigest -> config and layer, every digest and size checked"
[[ "$(jq -r .config.User "$cfg")" == 65532:65532 ]] || die "the image does not run as 65532:65532"
[[ "$(jq -c '.config.Entrypoint + .config.Cmd' "$cfg")" == '["/usr/bin/provreqd","run"]' ]] ||
	die "entrypoint + cmd is not provreqd run: $(jq -c '.config.Entrypoint + .config.Cmd' "$cfg")"
[[ "$(jq -r '.config.Volumes | keys | join(" ")' "$cfg")" == "/tmp /var/lib/provreqd" ]] ||
	die "volumes are not /tmp and /var/lib/provreqd"
ok "config: user 65532:65532, runs provreqd run, volumes /tmp and /var/lib/provreqd"

gzip -dc "$(blob "$ldigest")" | tar -C "$root" --numeric-owner -xpf -
# Owned by root, read-only for everyone else, except the state directory.
bad=$(find "$root" ! -path "$root/var/lib/provreqd" ! -user 0 -print -quit)
[[ -z "$bad" ]] || die "${bad#"$root"} is not owned by root"
[[ "$(stat -c '%u:%g %a' "$root/var/lib/provreqd")" == "65532:65532 700" ]] || die "/var/lib/provreqd is not 65532:65532 0700"
bad=$(find "$root" -perm -o+w ! -path "$root/tmp" ! -type l -print -quit)
[[ -z "$bad" ]] || die "${bad#"$root"} is writable by others"
[[ ! -e "$root/bin/sh" && ! -e "$root/usr/bin/sh" ]] || die "the image has a shell"
ok "files: root-owned, nothing world-writable but /tmp, /var/lib/provreqd is provreqd's, no shell"

# Read-only root with the two writable volumes, as the Deployment mounts it.
run_root=$root
if mount --bind "$root" "$root" 2>/dev/null; then
	mounted+=("$root")
	if mount -o remount,bind,ro "$root" 2>/dev/null &&
		mount -t tmpfs -o mode=1777 tmpfs "$root/tmp" 2>/dev/null; then
		mounted+=("$root/tmp")
		if mount -t tmpfs -o mode=0700,uid=65532,gid=65532 tmpfs "$root/var/lib/provreqd"; then
			mounted+=("$root/var/lib/provreqd")
			ok "running on a read-only root with tmpfs at /tmp and /var/lib/provreqd"
		fi
	fi
else
	printf '# mounts are not allowed here; running on the unpacked tree as it is\n'
fi

# in_image CMD...: run CMD inside the image as 65532, with an empty
# environment but PATH (as the image config sets it).
chroot_bin=$(command -v chroot)
in_image() { env -i PATH=/usr/bin "$chroot_bin" --userspec=65532:65532 "$run_root" "$@"; }

out=$(in_image /usr/bin/provreqd --version 2>&1) || die "provreqd --version: $out"
printf '%s\n' "$out" | sed 's/^/    /'
ok "provreqd --version runs inside the image"
out=$(in_image /usr/bin/provreqd check-config --config /etc/provreqd/provreqd.yaml 2>&1) ||
	die "check-config of /etc/provreqd/provreqd.yaml: $out"
ok "provreqd check-config accepts the image's /etc/provreqd/provreqd.yaml"
out=$(in_image /usr/bin/provreqd check-driver /usr/lib/provreqd/drivers/kwok.so \
	--cloud-config /etc/provreqd/drivers/kwok.yaml 2>&1) || die "check-driver kwok.so: $out"
printf '%s\n' "$out" | sed 's/^/    /'
for g in general gold gpu; do
	[[ "$out" == *"$g"* ]] || die "check-driver kwok.so does not list group $g"
done
ok "provreqd check-driver kwok.so lists the example node groups"
# clusterapi.so lists its groups from the apiserver, which check-driver
# does not use: it loads, passes the ABI check, and fails only there.
out=$(in_image /usr/bin/provreqd check-driver /usr/lib/provreqd/drivers/clusterapi.so 2>&1) || true
[[ "$out" == *"driver clusterapi (ABI "* && "$out" == *"no apiserver connection"* ]] ||
	die "check-driver clusterapi.so: $out"
ok "provreqd check-driver clusterapi.so loads and passes the ABI check (listing needs an apiserver)"
# karpenter.so without its shape table: it loads, passes the ABI check and
# its init refuses to guess a template node.
out=$(in_image /usr/bin/provreqd check-driver /usr/lib/provreqd/drivers/karpenter.so 2>&1) || true
[[ "$out" == *"(karpenter): init: karpenter config: a shape table is needed"* ]] ||
	die "check-driver karpenter.so: $out"
ok "provreqd check-driver karpenter.so loads and passes the ABI check (it needs its shape table)"
out=$(in_image /usr/bin/kubectl-create-provisioningrequest --help 2>&1) || die "kubectl plugin --help: $out"
ok "the kubectl plugin runs inside the image"

if [[ -n "$kubeconfig" ]]; then
	command -v curl >/dev/null 2>&1 || die "curl is missing (for /readyz)"
	# /readyz must come from the provreqd started here.
	! curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$http_port/" ||
		die "127.0.0.1:$http_port is taken; choose another --http-port"
	# The kubeconfig goes to the image's /tmp, readable by provreqd only.
	install -m 0600 -o 65532 -g 65532 "$kubeconfig" "$run_root/tmp/kubeconfig"
	# env and chroot exec, so $! is provreqd itself (for the SIGTERM).
	env -i PATH=/usr/bin "$chroot_bin" --userspec=65532:65532 "$run_root" /usr/bin/provreqd run --config /etc/provreqd/provreqd.yaml --kubeconfig /tmp/kubeconfig \
		--leader-elect=false --http-addr "127.0.0.1:$http_port" \
		--cloud-driver /usr/lib/provreqd/drivers/kwok.so --cloud-config /etc/provreqd/drivers/kwok.yaml \
		--log-format text >"$tmp/run.log" 2>&1 &
	pid=$!
	ready=''
	for ((i = 0; i < 240; i++)); do
		if [[ "$(curl -fsS --max-time 2 "http://127.0.0.1:$http_port/readyz" 2>/dev/null)" == ok ]]; then
			ready=1
			break
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.25
	done
	if [[ -z "$ready" ]]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		die "provreqd run in the image did not become ready: $(tail -20 "$tmp/run.log")"
	fi
	ok "provreqd run inside the image is ready against the cluster after $((i / 4))s"
	metrics=$(curl -fsS --max-time 5 "http://127.0.0.1:$http_port/metrics") || die "/metrics did not answer"
	[[ "$metrics" == *provreqd_build_info* || "$metrics" == *provreqd_* ]] || die "/metrics has no provreqd_ families"
	ok "/metrics serves $(grep -c '^# TYPE provreqd_' <<<"$metrics") provreqd metric families"
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	pid=''
	((rc == 0)) || die "provreqd run exited $rc on SIGTERM: $(tail -20 "$tmp/run.log")"
	[[ -f "$run_root/var/lib/provreqd/state.db" ]] || die "no state database in /var/lib/provreqd"
	ok "SIGTERM ends it with status 0; its state database is in /var/lib/provreqd"
	rm -f "$run_root/tmp/kubeconfig"
fi
ok "image $mdigest verified"
exit
}

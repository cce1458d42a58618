# shellcheck shell=bash
# Shared helpers for the e2e scripts. Sourced, never run.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Bump when the way binaries are built changes (flags, layout), so caches
# made by an older recipe are not reused.
E2E_BUILD_RECIPE=1

# shellcheck source=versions.env
. "$E2E_DIR/versions.env"

e2e_log() { printf '%s %s\n' "[$(date +%H:%M:%S)]" "$*" >&2; }
e2e_die() { e2e_log "error: $*"; exit 1; }

e2e_goarch() {
	case "$(uname -m)" in
	x86_64 | amd64) echo amd64 ;;
	aarch64 | arm64) echo arm64 ;;
	*) e2e_die "unsupported machine $(uname -m)" ;;
	esac
}

e2e_cache_root() {
	printf '%s\n' "${PROVREQD_E2E_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/provreqd-e2e}"
}

# The Go environment of every build here: module, build and GOPATH caches
# under the cache root, the toolchain found (no automatic switch), static
# binaries, no workspace.
e2e_go_env() {
	local root
	root=$(e2e_cache_root)
	export GOMODCACHE="$root/gomod" GOCACHE="$root/gocache" GOPATH="$root/gopath" GOFLAGS="-modcacherw"
	export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
}

# The pinned values (not the comments) of versions.env, the build recipe and
# the architecture name the cache directory of one set of binaries. The
# Cluster API and Karpenter pins (CAPI_*, KARPENTER_*) name their own
# directories (e2e_capi_dir, e2e_karpenter_dir), so
# bumping them does not rebuild the control plane.
e2e_versions_hash() {
	{
		grep -E '^[A-Z0-9_]+=' "$E2E_DIR/versions.env" | grep -Ev '^(CAPI|KARPENTER)_' | sort
		echo "E2E_BUILD_RECIPE=$E2E_BUILD_RECIPE"
		echo "GOARCH=$(e2e_goarch)"
	} | sha256sum | cut -c1-12
}

e2e_bindir() {
	printf '%s/%s/bin\n' "$(e2e_cache_root)" "$(e2e_versions_hash)"
}

# The real Cluster API core manager (capi-manager) and the CRDs and webhook
# manifests of its module (crd/, webhook/), cached by the CAPI_* pins.
e2e_capi_dir() {
	local h
	h=$({
		grep -E '^CAPI_[A-Z0-9_]+=' "$E2E_DIR/versions.env" | sort
		echo "E2E_BUILD_RECIPE=$E2E_BUILD_RECIPE"
		echo "GOARCH=$(e2e_goarch)"
	} | sha256sum | cut -c1-12)
	printf '%s/capi-%s\n' "$(e2e_cache_root)" "$h"
}

# Karpenter's kwok provider (karpenter-kwok) and the CRDs of its module
# (crds/), cached apart from the control plane.
e2e_karpenter_dir() {
	printf '%s/karpenter-%s-%s-%s\n' "$(e2e_cache_root)" "$KARPENTER_VERSION" "$KARPENTER_GO_TOOLCHAIN" "$(e2e_goarch)"
}

# The binaries build-binaries.sh builds.
# shellcheck disable=SC2034 # used by the scripts that source this file
E2E_BINARIES=(etcd etcdctl kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

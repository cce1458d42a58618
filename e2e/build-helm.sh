#!/usr/bin/env bash
# Build helm (helm.sh/helm/v3/cmd/helm) from its Go module at HELM_VERSION,
# for the chart scenario (e2e/scenarios/51-deploy-helm.sh), into a cache of
# its own outside the repository:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/provreqd-helm/<version>/bin/helm
#
# A helm already there is not rebuilt. The Go toolchain is the one
# build-binaries.sh finds or fetches, and the Go module and build caches
# are the control plane's (provreqd-e2e/gomod, provreqd-e2e/gocache), so the
# Kubernetes modules helm shares with it are not downloaded twice.
# helm's version is pinned here and not in versions.env: that file names
# the control plane's cache, and bumping helm must not rebuild it.
#
# Usage: build-helm.sh             build helm if missing, print the time taken
#        build-helm.sh --print-bin print the path helm is (or would be) at
#
# Environment: PROVREQD_HELM_CACHE overrides the cache root,
# PROVREQD_E2E_CACHE the Go caches' root (as for build-binaries.sh).
set -euo pipefail
{

HELM_VERSION=v3.18.6

# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

helm_root=${PROVREQD_HELM_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/provreqd-helm}
bindir=$helm_root/$HELM_VERSION/bin

case "${1:-}" in
--print-bin)
	printf '%s\n' "$bindir/helm"
	exit 0
	;;
"") ;;
-h | --help)
	sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*) e2e_die "unknown argument: $1 (try --help)" ;;
esac

if [[ -x "$bindir/helm" ]]; then
	e2e_log "helm $HELM_VERSION present: $bindir/helm"
	exit 0
fi
mkdir -p "$bindir"
exec 9>"$helm_root/.build.lock"
flock 9
if [[ -x "$bindir/helm" ]]; then
	e2e_log "helm $HELM_VERSION present: $bindir/helm"
	exit 0
fi

t0=$(date +%s)
GO=$("$E2E_DIR/build-binaries.sh" --print-go)
e2e_go_env
e2e_log "building helm $HELM_VERSION with $("$GO" version)"

work=$(mktemp -d "$helm_root/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
# `go install module@version` builds with helm's own go.mod, exactly the
# dependency versions its release uses. Stamp the version the way helm's
# Makefile does, and the Kubernetes version `helm template` and `helm lint`
# assume (.Capabilities.KubeVersion) from the client-go helm is built with.
modfile=$("$GO" mod download -json "helm.sh/helm/v3@$HELM_VERSION" |
	sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
[[ -f "$modfile" ]] || e2e_die "cannot read go.mod of helm.sh/helm/v3@$HELM_VERSION"
cgo=$(sed -n 's/^[[:space:]]*k8s\.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$modfile" | head -n1)
[[ -n "$cgo" ]] || e2e_die "no k8s.io/client-go requirement in $modfile"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1"
ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$cgo"
ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1"
ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$cgo"
GOBIN="$work" "$GO" install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
"$work/helm" version --short >/dev/null || e2e_die "the helm just built does not run"
mv -f "$work/helm" "$bindir/helm"
e2e_log "built helm $HELM_VERSION in $(($(date +%s) - t0))s: $bindir/helm ($("$bindir/helm" version --short))"
exit
}

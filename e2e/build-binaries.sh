#!/usr/bin/env bash
# Build the local control plane's binaries (etcd, etcdctl, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok) from their Go
# modules at the versions pinned in versions.env, into a cache outside the repository:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/provreqd-e2e/<versions-hash>/bin/
#
# and the real Cluster API core manager with its CRDs (CAPI_* pins) into
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/provreqd-e2e/capi-<capi-hash>/{bin,crd,webhook}/
#
# and Karpenter's kwok provider (with the CRDs of its module; KARPENTER_*
# pins) into
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/provreqd-e2e/karpenter-<version>-<toolchain>-<arch>/{bin,crds}/
#
# Binaries already there are not rebuilt. Each is built into a temporary
# directory and renamed into place, so an interrupted build never leaves a
# half-written binary behind. The Go module and build caches live beside it
# (provreqd-e2e/gomod, provreqd-e2e/gocache), so a rebuild after a version bump
# reuses everything that did not change.
#
# Usage: build-binaries.sh            build what is missing, print timings
#        build-binaries.sh --print-bindir
#        build-binaries.sh --print-capi-dir
#        build-binaries.sh --print-karpenter-dir
#        build-binaries.sh --print-go  find or fetch the Go toolchain, print
#                                      the path of its go command
#
# Environment: PROVREQD_E2E_CACHE overrides the cache root; GOPROXY is honoured
# (for the modules and for the Go toolchain download).
set -euo pipefail

# One compound command, read whole before it runs: editing this file during
# a long build cannot change what the build does.
{

# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

cache=$(e2e_cache_root)
bindir=$(e2e_bindir)
kdir=$(e2e_karpenter_dir)

print_go=0
case "${1:-}" in
--print-bindir)
	printf '%s\n' "$bindir"
	exit 0
	;;
--print-capi-dir)
	e2e_capi_dir
	exit 0
	;;
--print-karpenter-dir)
	printf '%s\n' "$kdir"
	exit 0
	;;
--print-go) print_go=1 ;;
"") ;;
-h | --help)
	sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*) e2e_die "unknown argument: $1 (try --help)" ;;
esac

mkdir -p "$bindir" "$cache"

missing=()
if ((print_go)); then missing=(go); fi
for b in "${E2E_BINARIES[@]}"; do
	[[ -x "$bindir/$b" ]] || missing+=("$b")
done
capidir=$(e2e_capi_dir)
[[ -x "$capidir/bin/capi-manager" ]] || missing+=(capi-manager)
[[ -x "$kdir/bin/karpenter-kwok" && -d "$kdir/crds" ]] || missing+=(karpenter-kwok)
if ((${#missing[@]} == 0)); then
	e2e_log "all binaries present in $bindir"
	exit 0
fi

# One build at a time per cache: a second caller waits, then finds the
# binaries built.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$cache/.build.lock"
	if ! flock -n 9; then
		e2e_log "another build holds $cache/.build.lock; waiting"
		flock 9
		# It may have built what we were missing.
		still=()
		for b in "${missing[@]}"; do
			if [[ "$b" == karpenter-kwok ]]; then
				[[ -x "$kdir/bin/karpenter-kwok" && -d "$kdir/crds" ]] || still+=("$b")
			elif [[ "$b" == capi-manager ]]; then
				[[ -x "$capidir/bin/capi-manager" ]] || still+=("$b")
			elif [[ "$b" == go || ! -x "$bindir/$b" ]]; then
				still+=("$b")
			fi
		done
		missing=("${still[@]}")
		if ((${#missing[@]} == 0)); then
			e2e_log "all binaries present in $bindir"
			exit 0
		fi
	fi
fi

# version_ge A B: A >= B for dotted versions (1.26.8 >= 1.26.0).
version_ge() {
	[[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" == "$2" ]]
}

# The first GOPROXY entry that is a URL (GOPROXY is a list split by , or |).
first_goproxy() {
	local p list
	list=${GOPROXY:-}
	if [[ -z "$list" ]] && command -v go >/dev/null 2>&1; then
		list=$(go env GOPROXY 2>/dev/null || true)
	fi
	[[ -n "$list" ]] || list=https://proxy.golang.org
	IFS=',|' read -r -a parts <<<"$list"
	for p in "${parts[@]}"; do
		case "$p" in
		http://* | https://*)
			printf '%s\n' "${p%/}"
			return 0
			;;
		esac
	done
	printf '%s\n' https://proxy.golang.org
}

unzip_to() {
	local zip=$1 dest=$2
	if command -v unzip >/dev/null 2>&1; then
		unzip -q "$zip" -d "$dest"
	elif command -v python3 >/dev/null 2>&1; then
		python3 -m zipfile -e "$zip" "$dest"
	elif command -v bsdtar >/dev/null 2>&1; then
		bsdtar -xf "$zip" -C "$dest"
	else
		e2e_die "need unzip (apt-get install unzip) to unpack the Go toolchain"
	fi
}

# Use the machine's go if it is at least GO_VERSION; otherwise fetch the
# toolchain module golang.org/toolchain@v0.0.1-go<VER>.linux-<arch> from the
# Go module proxy into the cache.
GO=
ensure_go() {
	local have='' cand
	for cand in "$(command -v go || true)" /usr/local/go/bin/go; do
		[[ -n "$cand" && -x "$cand" ]] || continue
		have=$("$cand" env GOVERSION 2>/dev/null || true)
		have=${have#go}
		if [[ -n "$have" ]] && version_ge "$have" "$GO_VERSION"; then
			GO=$cand
			return 0
		fi
	done
	local arch tcdir
	arch=$(e2e_goarch)
	tcdir="$cache/toolchain/go$GO_VERSION.linux-$arch"
	if [[ ! -x "$tcdir/bin/go" ]]; then
		local proxy ver url tmp
		proxy=$(first_goproxy)
		ver="v0.0.1-go$GO_VERSION.linux-$arch"
		url="$proxy/golang.org/toolchain/@v/$ver.zip"
		e2e_log "go ${have:-missing} is older than $GO_VERSION; fetching $url"
		mkdir -p "$cache/toolchain"
		tmp=$(mktemp -d "$cache/toolchain/.tmp.XXXXXX")
		curl -fsSL --retry 3 -o "$tmp/go.zip" "$url"
		unzip_to "$tmp/go.zip" "$tmp/x"
		# Module zips carry no file modes.
		chmod -R a+rX "$tmp/x"
		chmod a+x "$tmp/x/golang.org/toolchain@$ver"/bin/* \
			"$tmp/x/golang.org/toolchain@$ver"/pkg/tool/*/*
		rm -rf "$tcdir"
		mv "$tmp/x/golang.org/toolchain@$ver" "$tcdir"
		rm -rf "$tmp"
	fi
	GO="$tcdir/bin/go"
}

ensure_go
if ((print_go)); then
	printf '%s\n' "$GO"
	exit 0
fi
e2e_go_env
e2e_log "using $("$GO" version) ($GO)"
e2e_log "building ${missing[*]} into $bindir"

# quiet COMMAND...: run it, showing its output only when it fails (go get
# lists every module it adds).
quiet() {
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	if ((rc)); then
		printf '%s\n' "$out" >&2
		e2e_log "failed ($rc): $*"
	fi
	return "$rc"
}

# new_module DIR: a throwaway module to resolve one upstream's dependencies.
new_module() {
	(cd "$1" && "$GO" mod init provreqd.local/e2e-build >/dev/null 2>&1)
}

contains() {
	local x=$1
	shift
	local e
	for e in "$@"; do [[ "$e" == "$x" ]] && return 0; done
	return 1
}

# install_from TMPDIR NAME...: move freshly built binaries into bindir.
install_from() {
	local dir=$1 b
	shift
	for b in "$@"; do
		[[ -x "$dir/$b" ]] || e2e_die "build produced no $b"
		mv -f "$dir/$b" "$bindir/$b"
	done
}

timings=()
elapsed() { echo $(($(date +%s) - $1)); }

build_kubernetes() {
	local want=() b
	for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
		contains "$b" "${missing[@]}" && want+=("$b")
	done
	((${#want[@]})) || return 0
	local t0 work modfile minor staging pkgs=() ldflags v
	t0=$(date +%s)
	work=$(mktemp -d "$cache/work.k8s.XXXXXX")
	new_module "$work"
	# k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces
	# them with ./staging/src paths, which mean nothing outside its tree;
	# point each at its published release v0.<minor>.<patch> instead.
	modfile=$(cd "$work" && "$GO" mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
	[[ -f "$modfile" ]] || e2e_die "cannot read go.mod of k8s.io/kubernetes@$KUBERNETES_VERSION"
	minor="v0.${KUBERNETES_VERSION#v1.}"
	staging=$(sed -n 's|^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\) => \./staging/src/.*$|\1|p' "$modfile")
	[[ -n "$staging" ]] || e2e_die "no staging replace lines in $modfile"
	local edits=()
	for m in $staging; do
		edits+=("-replace=$m=$m@$minor")
	done
	(cd "$work" && "$GO" mod edit "${edits[@]}" "-require=k8s.io/kubernetes@$KUBERNETES_VERSION")
	for b in "${want[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
	(cd "$work" && quiet "$GO" get "${pkgs[@]/%/@$KUBERNETES_VERSION}")
	# Stamp the version the way Kubernetes' own build does, so /version and
	# kubectl report the release instead of v0.0.0-master.
	v=${KUBERNETES_VERSION#v}
	ldflags="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $p.gitVersion=$KUBERNETES_VERSION"
		ldflags+=" -X $p.gitMajor=${v%%.*}"
		v2=${v#*.}
		ldflags+=" -X $p.gitMinor=${v2%%.*}"
		ldflags+=" -X $p.gitTreeState=clean"
	done
	mkdir -p "$work/out"
	(cd "$work" && "$GO" build -trimpath -ldflags "$ldflags" -o "$work/out/" "${pkgs[@]}")
	install_from "$work/out" "${want[@]}"
	rm -rf "$work"
	timings+=("${want[*]}: $(elapsed "$t0")s")
}

# etcd is package main at the root of go.etcd.io/etcd/server/v3, etcdctl at
# the root of go.etcd.io/etcd/etcdctl/v3 (tests use it to compact etcd).
build_etcd() {
	local want=() b
	for b in etcd etcdctl; do
		contains "$b" "${missing[@]}" && want+=("$b")
	done
	((${#want[@]})) || return 0
	local t0 work
	t0=$(date +%s)
	work=$(mktemp -d "$cache/work.etcd.XXXXXX")
	new_module "$work"
	mkdir -p "$work/out"
	if contains etcd "${want[@]}"; then
		(cd "$work" && quiet "$GO" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION")
		(cd "$work" && "$GO" build -trimpath -ldflags "-s -w" -o "$work/out/etcd" go.etcd.io/etcd/server/v3)
	fi
	if contains etcdctl "${want[@]}"; then
		(cd "$work" && quiet "$GO" get "go.etcd.io/etcd/etcdctl/v3@$ETCD_VERSION")
		(cd "$work" && "$GO" build -trimpath -ldflags "-s -w" -o "$work/out/etcdctl" go.etcd.io/etcd/etcdctl/v3)
	fi
	install_from "$work/out" "${want[@]}"
	rm -rf "$work"
	timings+=("${want[*]}: $(elapsed "$t0")s")
}

build_kwok() {
	contains kwok "${missing[@]}" || return 0
	local t0 work
	t0=$(date +%s)
	work=$(mktemp -d "$cache/work.kwok.XXXXXX")
	new_module "$work"
	(cd "$work" && quiet "$GO" get "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
	mkdir -p "$work/out"
	(cd "$work" && "$GO" build -trimpath \
		-ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
		-o "$work/out/kwok" sigs.k8s.io/kwok/cmd/kwok)
	install_from "$work/out" kwok
	rm -rf "$work"
	timings+=("kwok: $(elapsed "$t0")s")
}

# The Cluster API core manager: package main sigs.k8s.io/cluster-api/core of
# the root module, with the api module replaced by the same release (the
# root module requires a pseudo-version of it). Its go.mod wants a newer Go
# than GO_VERSION, so this one build lets the go command switch to
# CAPI_GO_TOOLCHAIN (fetched from the module proxy). The module's CRDs and
# webhook manifests are kept beside the binary (crd/, webhook/).
build_capi() {
	contains capi-manager "${missing[@]}" || return 0
	local t0 work mod
	t0=$(date +%s)
	work=$(mktemp -d "$cache/work.capi.XXXXXX")
	new_module "$work"
	(cd "$work" && "$GO" mod edit "-replace=sigs.k8s.io/cluster-api/api=sigs.k8s.io/cluster-api/api@$CAPI_VERSION")
	(cd "$work" && GOTOOLCHAIN=$CAPI_GO_TOOLCHAIN quiet "$GO" get "sigs.k8s.io/cluster-api/core@$CAPI_VERSION")
	mkdir -p "$work/out/bin"
	(cd "$work" && GOTOOLCHAIN=$CAPI_GO_TOOLCHAIN "$GO" build -trimpath \
		-ldflags "-s -w -X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION" \
		-o "$work/out/bin/capi-manager" sigs.k8s.io/cluster-api/core)
	mod=$(cd "$work" && GOTOOLCHAIN=$CAPI_GO_TOOLCHAIN "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
	[[ -d "$mod/core/config/crd/bases" ]] || e2e_die "no core/config/crd/bases in $mod"
	mkdir -p "$work/out/crd" "$work/out/webhook"
	cp "$mod"/core/config/crd/bases/*.yaml "$work/out/crd/"
	cp "$mod"/core/config/webhook/manifests.yaml "$work/out/webhook/"
	chmod -R u+w "$work/out"
	rm -rf "$capidir.tmp"
	mv "$work/out" "$capidir.tmp"
	rm -rf "$capidir"
	mv "$capidir.tmp" "$capidir"
	rm -rf "$work"
	timings+=("capi-manager: $(elapsed "$t0")s")
}

# Karpenter's kwok provider: its own toolchain (its go.mod needs a newer Go
# than the control plane's), run at low priority (the machines are shared),
# and the CRDs the scenario installs copied from the module beside it.
build_karpenter() {
	contains karpenter-kwok "${missing[@]}" || return 0
	local t0 work moddir f
	t0=$(date +%s)
	work=$(mktemp -d "$cache/work.karpenter.XXXXXX")
	new_module "$work"
	(cd "$work" && GOTOOLCHAIN=$KARPENTER_GO_TOOLCHAIN quiet "$GO" get "sigs.k8s.io/karpenter/kwok@$KARPENTER_VERSION")
	mkdir -p "$work/out" "$work/crds"
	(cd "$work" && GOTOOLCHAIN=$KARPENTER_GO_TOOLCHAIN nice -n 10 "$GO" build -trimpath -ldflags "-s -w" \
		-o "$work/out/karpenter-kwok" sigs.k8s.io/karpenter/kwok)
	moddir=$(cd "$work" && GOTOOLCHAIN=$KARPENTER_GO_TOOLCHAIN "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
	# NodeOverlays too: Karpenter watches them even with the feature off.
	for f in kwok/charts/crds/karpenter.sh_nodepools.yaml kwok/charts/crds/karpenter.sh_nodeclaims.yaml \
		kwok/charts/crds/karpenter.sh_nodeoverlays.yaml kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml; do
		[[ -f "$moddir/$f" ]] || e2e_die "sigs.k8s.io/karpenter@$KARPENTER_VERSION has no $f"
		cp "$moddir/$f" "$work/crds/"
	done
	chmod -R u+w "$work/crds"
	mkdir -p "$kdir/bin"
	rm -rf "$kdir/crds"
	mv "$work/crds" "$kdir/crds"
	install_from "$work/out" karpenter-kwok
	mv -f "$bindir/karpenter-kwok" "$kdir/bin/karpenter-kwok"
	rm -rf "$work"
	timings+=("karpenter-kwok: $(elapsed "$t0")s")
}

total0=$(date +%s)
build_etcd
build_kwok
build_kubernetes
build_capi
build_karpenter
for t in "${timings[@]}"; do e2e_log "built $t"; done
e2e_log "build finished in $(elapsed "$total0")s; binaries in $bindir"
exit
}

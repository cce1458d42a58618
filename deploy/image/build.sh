#!/usr/bin/env bash
# Build provreqd's container image as an OCI archive, from this source tree
# and Debian packages, with no registry and no container engine:
#
#   1. configure (--prefix=/usr --sysconfdir=/etc) and build provreqd in a
#      work directory, and `make install-strip DESTDIR=rootfs`: provreqd,
#      the kubectl plugin, kwok.so, clusterapi.so and karpenter.so;
#   2. find the shared libraries they load (ldd), the Debian package that
#      owns each one (dpkg -S), fetch exactly those packages with
#      `apt-get download` at the archive's current version (security
#      fixes included; same soname as the one linked against) and unpack
#      them with `dpkg-deb -x`; /usr/share/provreqd/debian-packages.txt
#      lists them with their versions;
#   3. add /etc/passwd and /etc/group (user provreqd, uid/gid 65532), the
#      default config, the kwok driver's config and example node groups
#      under /etc/provreqd, an empty /tmp and /var/lib/provreqd;
#   4. write one layer (tar --sort=name --mtime=@0 --owner=0 --group=0
#      --numeric-owner, gzip -n), the image config, the manifest,
#      index.json and oci-layout by hand (sha256sum, jq), and pack that
#      layout as an OCI archive (a tar of the layout, made the same way).
#
# Why apt-get download + dpkg-deb rather than mmdebstrap --variant=custom:
# the image needs a dozen runtime libraries, not a Debian system. ldd names
# exactly the files the binaries load, so the package list is derived from
# the binaries and cannot drift from them; apt-get and dpkg-deb are on every
# Debian machine (mmdebstrap is not), and no maintainer script has to run,
# so building needs neither root nor a chroot. What that leaves out is on
# purpose: no shell, no package manager, no CA bundle (in a cluster the
# ServiceAccount's ca.crt is used).
#
# The result is reproducible for a given source tree and set of Debian
# package versions, wherever the tree and the work directory are: every
# timestamp is 0, owners are numeric, file order is sorted, gzip stores no
# name or time, and -ffile-prefix-map keeps the paths out of the binaries.
#
# Usage: build.sh --srcdir DIR [--workdir DIR] [--out FILE] [--tag TAG] [--jobs N]
#   --srcdir   a source tree with a configure script that has not been
#              configured in place (`make image` passes a fresh distdir)
#   --workdir  where the build, the downloaded .debs and the root
#              filesystem go (default: ./image-work)
#   --out      the OCI archive to write (default: ./provreqd-VERSION-oci.tar)
#   --tag      the tag recorded in index.json (default: the version)
#
# Prints the manifest digest and the archive's size on the last two lines.
set -euo pipefail
{

die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }
log() { printf '[image] %s\n' "$*" >&2; }

srcdir='' workdir=$PWD/image-work out='' tag='' jobs=2
while (($#)); do
	case $1 in
	--srcdir) srcdir=$2; shift ;;
	--workdir) workdir=$2; shift ;;
	--out) out=$2; shift ;;
	--tag) tag=$2; shift ;;
	--jobs) jobs=$2; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument: $1 (try --help)" ;;
	esac
	shift
done
[[ -n "$srcdir" ]] || die "--srcdir is required"
srcdir=$(cd "$srcdir" && pwd)
[[ -x "$srcdir/configure" ]] || die "$srcdir has no configure script (run ./autogen.sh there first)"
[[ ! -f "$srcdir/config.status" ]] ||
	die "$srcdir is configured in place; give a clean tree (make image uses a distdir)"
for t in apt-get dpkg dpkg-deb dpkg-query ldd jq sha256sum gzip tar make; do
	command -v "$t" >/dev/null 2>&1 || die "$t is missing (this script runs on Debian)"
done

arch=$(dpkg --print-architecture)
case $arch in
amd64) multiarch=x86_64-linux-gnu ;;
arm64) multiarch=aarch64-linux-gnu ;;
*) die "unsupported architecture $arch" ;;
esac
version=$(sed -n 's/^PACKAGE_VERSION=.\(.*\).$/\1/p' "$srcdir/configure")
[[ -n "$version" ]] || die "cannot read PACKAGE_VERSION from $srcdir/configure"
tag=${tag:-$version}
out=${out:-$PWD/provreqd-$version-oci.tar}
mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd)
build=$workdir/build rootfs=$workdir/rootfs debs=$workdir/debs layout=$workdir/layout
rm -rf "$rootfs" "$layout"
mkdir -p "$build" "$rootfs" "$debs" "$layout/blobs/sha256"

# 1. provreqd itself. The work directory is a path of our choosing; mapping
#    it away keeps the binaries independent of where the build ran.
if [[ ! -f "$build/config.status" ]]; then
	log "configuring in $build"
	(cd "$build" && "$srcdir/configure" --prefix=/usr --sysconfdir=/etc --localstatedir=/var \
		CFLAGS="-O2 -g -ffile-prefix-map=$srcdir=. -ffile-prefix-map=$build=." >configure.log 2>&1) ||
		die "configure failed; see $build/configure.log"
fi
log "building provreqd $version"
nice make -C "$build" -j"$jobs" >"$build/make.log" 2>&1 || die "build failed; see $build/make.log"
make -C "$build" install-strip DESTDIR="$rootfs" >"$build/install.log" 2>&1 ||
	die "make install-strip failed; see $build/install.log"
# Only what runs: no header, pkg-config file, libtool archive or man page.
rm -rf "$rootfs/usr/include" "$rootfs/usr/lib/pkgconfig" "$rootfs/usr/share/man"
find "$rootfs" -name '*.la' -delete
for f in usr/bin/provreqd usr/bin/kubectl-create-provisioningrequest \
	usr/lib/provreqd/drivers/kwok.so usr/lib/provreqd/drivers/clusterapi.so \
	usr/lib/provreqd/drivers/karpenter.so; do
	[[ -f "$rootfs/$f" ]] || die "make install did not install /$f"
done

# 2. The packages of the libraries the binaries load. ldd lists the whole
#    closure (libcurl's own libraries included) and the dynamic loader.
mapfile -t elfs < <(find "$rootfs" -type f \( -path '*/bin/*' -o -name '*.so' \) | sort)
libs=$(for f in "${elfs[@]}"; do ldd "$f"; done |
	sed -n 's/^[[:space:]]*[^ ]* => \(\/[^ ]*\) (0x.*$/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' | sort -u)
[[ -n "$libs" ]] || die "ldd found no libraries"
# owner FILE: the package (name:arch) that installed FILE; merged /usr
# makes /lib/x and /usr/lib/x one file under two names, dpkg knows one.
owner() {
	local p cand
	for cand in "$1" "$(readlink -f "$1")" "/usr$1" "${1#/usr}"; do
		p=$(dpkg -S "$cand" 2>/dev/null | sed -n '1s/: .*$//p')
		if [[ -n "$p" ]]; then
			printf '%s\n' "$p"
			return 0
		fi
	done
	return 1
}
pkgs=()
while read -r lib; do
	p=$(owner "$lib") || die "no Debian package owns $lib"
	pkgs+=("$p")
done <<<"$libs"
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
log "runtime packages: ${pkgs[*]}"
# downloaded NAME VERSION: the .deb of that version fetched earlier, if any.
downloaded() {
	local d
	for d in "$debs/$1"_*.deb; do
		[[ -f "$d" && "$(dpkg-deb -f "$d" Version)" == "$2" ]] && { printf '%s\n' "$d"; return 0; }
	done
	return 0
}
manifest_pkgs=()
for p in "${pkgs[@]}"; do
	name=${p%%:*}
	# The archive's current version (the candidate): the security fixes
	# Debian published since this machine was installed. Same package
	# name, same soname, so the ABI the binaries were linked against.
	v=$(apt-cache policy "$p" | sed -n 's/^ *Candidate: //p')
	[[ -n "$v" && "$v" != "(none)" ]] || die "apt knows no version of $p (run apt-get update)"
	deb=$(downloaded "$name" "$v")
	if [[ -z "$deb" ]]; then
		(cd "$debs" && apt-get download -qq "$p=$v" >/dev/null 2>&1) ||
			die "apt-get download $p=$v failed (run apt-get update?)"
		deb=$(downloaded "$name" "$v")
		[[ -n "$deb" ]] || die "apt-get download $p=$v left no .deb in $debs"
	fi
	dpkg-deb -x "$deb" "$rootfs"
	manifest_pkgs+=("$name $(dpkg-deb -f "$deb" Version) $(dpkg-deb -f "$deb" Architecture)")
done
# Keep each package's copyright file; drop documentation, the charset
# converters (gconv: provreqd runs in the C locale, whose ASCII and UTF-8
# conversions are built into libc) and other files nothing here reads.
find "$rootfs/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
find "$rootfs/usr/share/doc" -type l -delete 2>/dev/null || true
rm -rf "$rootfs/usr/share/man" "$rootfs/usr/share/info" "$rootfs/usr/share/lintian" \
	"$rootfs/usr/share/bug" "$rootfs/usr/share/locale" "$rootfs/usr/lib/$multiarch/gconv" \
	"$rootfs/etc/ld.so.conf.d" "$rootfs/etc/ld.so.conf"
# Every library ldd named is now in the root filesystem.
while read -r lib; do
	[[ -e "$rootfs$lib" || -e "$rootfs/usr$lib" || -e "$rootfs${lib#/usr}" ]] ||
		die "$lib is not in the root filesystem after unpacking ${pkgs[*]}"
done <<<"$libs"

# 3. Identity, configuration and the writable places.
mkdir -p "$rootfs/etc/provreqd/drivers" "$rootfs/etc/provreqd/nodegroups" "$rootfs/tmp" \
	"$rootfs/var/lib/provreqd" "$rootfs/usr/share/provreqd"
printf 'root:x:0:0:root:/root:/sbin/nologin\nprovreqd:x:65532:65532:provreqd:/var/lib/provreqd:/sbin/nologin\n' \
	>"$rootfs/etc/passwd"
printf 'root:x:0:\nprovreqd:x:65532:\n' >"$rootfs/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$rootfs/etc/nsswitch.conf"
cp "$srcdir/templates/config/provreqd.yaml" "$rootfs/etc/provreqd/provreqd.yaml"
cp "$srcdir"/templates/nodegroups/*.yaml "$rootfs/etc/provreqd/nodegroups/"
printf '# The kwok driver (--cloud-config for /usr/lib/provreqd/drivers/kwok.so):\n# node groups from the example templates beside it.\ntemplateDir: /etc/provreqd/nodegroups\n' \
	>"$rootfs/etc/provreqd/drivers/kwok.yaml"
printf '%s\n' "${manifest_pkgs[@]}" >"$rootfs/usr/share/provreqd/debian-packages.txt"
chmod -R u+rwX,go+rX,go-w "$rootfs/etc" "$rootfs/usr/share/provreqd"
chmod 1777 "$rootfs/tmp"
chmod 0700 "$rootfs/var/lib/provreqd"

# 4. The layer: everything owned by root, except the state directory, which
#    belongs to provreqd (appended last, so the order stays fixed).
tarflags=(--format=gnu --sort=name --mtime=@0 --numeric-owner)
layer_tar=$workdir/layer.tar
tar -C "$rootfs" "${tarflags[@]}" --owner=0 --group=0 --exclude=./var/lib/provreqd -cf "$layer_tar" .
tar -C "$rootfs" "${tarflags[@]}" --owner=65532 --group=65532 --no-recursion -rf "$layer_tar" ./var/lib/provreqd
diff_id=$(sha256sum "$layer_tar" | cut -d' ' -f1)
gzip -n -9 -c "$layer_tar" >"$workdir/layer.tar.gz"
layer_digest=$(sha256sum "$workdir/layer.tar.gz" | cut -d' ' -f1)
layer_size=$(stat -c %s "$workdir/layer.tar.gz")
mv "$workdir/layer.tar.gz" "$layout/blobs/sha256/$layer_digest"
rm -f "$layer_tar"

# blob FILE: move FILE into the layout under its digest; print the digest.
blob() {
	local d
	d=$(sha256sum "$1" | cut -d' ' -f1)
	mv "$1" "$layout/blobs/sha256/$d"
	printf '%s\n' "$d"
}
created=1970-01-01T00:00:00Z
jq -n --arg arch "$arch" --arg diff "sha256:$diff_id" --arg version "$version" --arg created "$created" '{
	created: $created, architecture: $arch, os: "linux",
	config: {
		User: "65532:65532",
		Entrypoint: ["/usr/bin/provreqd"],
		Cmd: ["run"],
		Env: ["PATH=/usr/bin"],
		WorkingDir: "/var/lib/provreqd",
		Volumes: {"/var/lib/provreqd": {}, "/tmp": {}},
		Labels: {
			"org.opencontainers.image.title": "provreqd",
			"org.opencontainers.image.description": "Kubernetes ProvisioningRequest controller",
			"org.opencontainers.image.version": $version,
			"org.opencontainers.image.licenses": "MIT"
		}
	},
	rootfs: {type: "layers", diff_ids: [$diff]},
	history: [{created: $created, created_by: "deploy/image/build.sh"}]
}' >"$workdir/config.json"
config_size=$(stat -c %s "$workdir/config.json")
config_digest=$(blob "$workdir/config.json")
jq -n --arg cd "sha256:$config_digest" --argjson cs "$config_size" \
	--arg ld "sha256:$layer_digest" --argjson ls "$layer_size" '{
	schemaVersion: 2,
	mediaType: "application/vnd.oci.image.manifest.v1+json",
	config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
	layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $ld, size: $ls}]
}' >"$workdir/manifest.json"
manifest_size=$(stat -c %s "$workdir/manifest.json")
manifest_digest=$(blob "$workdir/manifest.json")
# ref.name is the tag (skopeo's oci-archive:FILE:TAG); containerd's import
# reads the full name from io.containerd.image.name.
jq -n --arg md "sha256:$manifest_digest" --argjson ms "$manifest_size" --arg tag "$tag" --arg arch "$arch" '{
	schemaVersion: 2,
	mediaType: "application/vnd.oci.image.index.v1+json",
	manifests: [{
		mediaType: "application/vnd.oci.image.manifest.v1+json",
		digest: $md, size: $ms,
		platform: {architecture: $arch, os: "linux"},
		annotations: {
			"org.opencontainers.image.ref.name": $tag,
			"io.containerd.image.name": ("docker.io/library/provreqd:" + $tag)
		}
	}]
}' >"$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}\n' >"$layout/oci-layout"

tar -C "$layout" "${tarflags[@]}" --owner=0 --group=0 -cf "$out.tmp" oci-layout index.json blobs
mv -f "$out.tmp" "$out"
log "wrote $out (layer $((layer_size / 1024)) KiB compressed, $(wc -l <"$rootfs/usr/share/provreqd/debian-packages.txt") Debian packages)"
printf 'digest: sha256:%s\n' "$manifest_digest"
printf 'size: %s bytes (%s)\n' "$(stat -c %s "$out")" "$out"
exit
}

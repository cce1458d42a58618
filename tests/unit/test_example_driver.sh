#!/bin/sh
# Build the worked example driver out of tree, the way an integrator would:
# install provreqd's public header and pkg-config file into a scratch
# prefix, compile docs/examples/driver with `pkg-config --cflags
# provreqd-cloud`, then load and exercise it with `provreqd check-driver`.
set -eu
: "${PRD_BUILDDIR:?}" "${PRD_SRCDIR:?}" "${PRD_LIBDIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

${MAKE:-make} -s -C "$PRD_BUILDDIR" DESTDIR="$tmp/root" \
	install-provreqdcloudincludeHEADERS install-pkgconfigDATA >/dev/null
test -f "$tmp/root$PRD_INCLUDEDIR/provreqd/cloud.h" || { echo "header not installed"; exit 1; }

cp "$PRD_SRCDIR"/docs/examples/driver/* "$tmp/"
# The sanitizer and coverage flags of this build must not leak into the
# integrator's build: use a plain environment.
env -u CFLAGS PKG_CONFIG_PATH="$tmp/root$PRD_LIBDIR/pkgconfig" \
	PKG_CONFIG_SYSROOT_DIR="$tmp/root" \
	${MAKE:-make} -s -C "$tmp" CC="${CC:-cc}"
chmod 0755 "$tmp/example-driver.so"

# Exactly one exported driver symbol.
nm -D --defined-only "$tmp/example-driver.so" | awk '$2 ~ /[TtDdBbRr]/ {print $3}' > "$tmp/syms"
if [ "$(cat "$tmp/syms")" != "provreqd_cloud_driver" ]; then
	echo "unexpected exported symbols:"; cat "$tmp/syms"; exit 1
fi

out=$("$PRD_BUILDDIR/provreqd" check-driver "$tmp/example-driver.so" --cloud-config "$tmp/groups.txt" 2>&1)
echo "$out"
fail=0
check() { echo "$out" | grep -qF -- "$1" || { echo "missing: $1"; fail=1; }; }
check "driver example (ABI 1.7)"
check "node auto-provisioning: yes"
check "machine shapes: 1"
check "- big max=20 zones=(any) price=2.500000/h"
check "allocatable: cpu=32 memory=128Gi pods=110"
check "node groups: 2"
check "- small min=0 max=10 target=1"
check "template allocatable: cpu=4 memory=16Gi pods=110"
check "instances: 1 (1 running, 0 with errors)"
check "- gpu min=0 max=4 target=0"
check "extra provisioning classes: instant.example.provreqd.io"

# A broken config is reported, not crashed on.
printf 'small 0 1\n' > "$tmp/bad.txt"
if "$PRD_BUILDDIR/provreqd" check-driver "$tmp/example-driver.so" --cloud-config "$tmp/bad.txt" > "$tmp/bad.out" 2>&1; then
	echo "bad config accepted"; fail=1
fi
grep -q "config line 1" "$tmp/bad.out" || { echo "no clear error for bad config:"; cat "$tmp/bad.out"; fail=1; }
exit $fail

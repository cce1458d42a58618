#!/bin/sh
# Behaviour unchanged? Builds the deterministic simulation (tests/dst/dst)
# at BASE_REF, in a git worktree under /tmp, and in this tree's build, runs
# `dst -vv --seeds 1 --first S` for SEEDS seeds in both, strips what
# may differ between two builds of the same behaviour (timings, addresses,
# the binary's path) and compares the traces byte for byte.
#
# Usage: tests/dst/trace-diff.sh BASE_REF [SEEDS]   (run from the top of a
# configured build tree; SEEDS defaults to 200, from seed FIRST, default
# 1). Environment:
# CONFIGURE_FLAGS for the base build (default: --enable-werror
# --enable-sanitizers), TRACE_DIR for the traces (default /tmp/trace-diff),
# BASE_DIR for the base worktree (reused when it is already at BASE_REF).
# Exit 0 when every seed's trace is identical, 1 otherwise.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 BASE_REF [SEEDS]" >&2; exit 2; }
base_ref=$1
seeds=${2:-200}
first=${FIRST:-1}
last=$((first + seeds - 1))
top=$(pwd)
[ -f "$top/Makefile" ] || { echo "$0: run from a configured build tree" >&2; exit 2; }
src=$(git -C "$top" rev-parse --show-toplevel)
base_sha=$(git -C "$src" rev-parse --verify "$base_ref^{commit}")
base_dir=${BASE_DIR:-/tmp/trace-diff-base-$(echo "$base_sha" | cut -c1-12)}
out=${TRACE_DIR:-/tmp/trace-diff}
flags=${CONFIGURE_FLAGS:---enable-werror --enable-sanitizers}

if [ ! -d "$base_dir" ]; then
	git -C "$src" worktree add --detach "$base_dir" "$base_sha" >/dev/null
elif [ "$(git -C "$base_dir" rev-parse HEAD)" != "$base_sha" ]; then
	echo "$0: $base_dir is not at $base_ref; remove it or set BASE_DIR" >&2
	exit 2
fi
if [ ! -f "$base_dir/Makefile" ]; then
	# shellcheck disable=SC2086
	(cd "$base_dir" && ./autogen.sh && ./configure $flags) >"$base_dir.build.log" 2>&1 ||
		{ echo "$0: configuring the base failed, see $base_dir.build.log" >&2; exit 2; }
fi
echo "building the base ($base_ref, $base_dir)..."
make -C "$base_dir" -j2 tests/dst/dst >>"$base_dir.build.log" 2>&1 ||
	{ echo "$0: building the base failed, see $base_dir.build.log" >&2; exit 2; }
echo "building this tree ($top)..."
make -C "$top" -j2 tests/dst/dst >"$out.build.log" 2>&1 ||
	{ echo "$0: building this tree failed, see $out.build.log" >&2; exit 2; }

# The log's timestamps, timings and addresses change from run to run; the
# program's path changes from tree to tree.
strip() {
	sed -e 's/^ts=[^ ]* //' \
	    -e 's/[0-9][0-9]*\.[0-9]* seeds\/s/N seeds\/s/g' \
	    -e 's/0x[0-9a-fA-F][0-9a-fA-F]*/0xADDR/g' \
	    -e "s#$1/##g"
}
trace() { # TREE SEED
	(cd "$1" && ./tests/dst/dst -vv --seeds 1 --first "$2" 2>&1 || true) | strip "$1"
}
# The base's traces are kept beside its worktree: a second run against
# the same base only runs this tree.
cache=$base_dir.traces
rm -rf "$out" && mkdir -p "$out/this" "$cache"
s=$first
while [ "$s" -le "$last" ]; do
	[ -s "$cache/$s" ] || trace "$base_dir" "$s" >"$cache/$s" &
	trace "$top" "$s" >"$out/this/$s"
	wait
	s=$((s + 1))
done
mkdir -p "$out/base"
s=$first
while [ "$s" -le "$last" ]; do
	cp "$cache/$s" "$out/base/$s"
	s=$((s + 1))
done
if diff -r "$out/base" "$out/this" >"$out.diff"; then
	echo "trace-diff: $seeds seeds ($first..$last), traces identical ($(cat "$out"/this/* | wc -l | tr -d ' ') lines) against $base_ref ($base_sha)"
	exit 0
fi
echo "trace-diff: traces differ against $base_ref: $(grep -c '^diff' "$out.diff" || true) seeds, see $out.diff" >&2
exit 1

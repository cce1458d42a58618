#!/bin/sh
# Shape check (issue 42 item 3): no function in src/ or cloud/ longer than
# 100 lines, no .c file in src/classes, src/provreq or cloud/ longer than
# 1,000 lines. Known exceptions are listed in tests/shape-allow.txt.
#
# A function is counted from its opening brace to its closing brace, both
# in column 0 (the project's style, see docs/development.md); a definition
# whose brace ends the signature line is also caught. Run by `make check`;
# by hand: tests/check-shape.sh [SRCDIR].
set -eu
srcdir=${1:-${PRD_SRCDIR:-$(dirname "$0")/..}}
cd "$srcdir"
allow=tests/shape-allow.txt
max_fn=100
max_file=1000

# Listing: "fn FILE NAME LINES" and "file FILE LINES".
measure() {
	find src cloud -name '*.c' | LC_ALL=C sort | while read -r f; do
		awk -v maxfn="$max_fn" '
		function report(n, name) { if(n > maxfn) printf "fn %s %s %d\n", FILENAME, name, n }
		function name_of(s) { sub(/\(.*/, "", s); sub(/.*[ \t*]/, "", s); return s }
		!inbody && /^[A-Za-z_]/ && index($0, "(") && $0 !~ /^(typedef|struct|enum|union)[ \t]/ {
			sig = $0
			if($0 ~ /\)[ \t]*\{[ \t]*$/ && $0 !~ /=/) { inbody = 1; start = FNR; next }
		}
		!inbody && /^\{/ { inbody = 1; start = FNR; next }
		inbody && /^\}/ { inbody = 0; report(FNR - start + 1, name_of(sig)); sig = "" }
		' "$f"
		case $f in
		src/classes/*|src/provreq/*|cloud/*)
			n=$(wc -l <"$f" | tr -d ' ')
			[ "$n" -le "$max_file" ] || echo "file $f $n";;
		esac
	done
}

# An allow-list line is "fn FILE NAME" or "file FILE" (the count is left
# out, so a listed function may shrink without editing the list).
allowed() {
	[ -f "$allow" ] || return 1
	grep -v '^#' "$allow" | awk -v k="$1" -v f="$2" -v n="$3" '
		$1 == k && $2 == f && (k == "file" || $3 == n) { found = 1 } END { exit !found }'
}

over=$(measure)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "$over" | while read -r kind file a b; do
	[ -n "$kind" ] || continue
	if [ "$kind" = fn ]; then name=$a; n=$b; limit=$max_fn; else name=; n=$a; limit=$max_file; fi
	if allowed "$kind" "$file" "$name"; then
		echo "allowed: $kind $file${name:+ $name} ($n lines)"
	else
		echo "FAIL: $kind $file${name:+ $name}: $n lines (limit $limit)"
	fi
done >"$tmp"

# An entry that no longer matches anything is stale: the list only shrinks.
if [ -f "$allow" ]; then
	grep -v '^#' "$allow" | while read -r kind file name; do
		[ -n "$kind" ] || continue
		case $file in
		src/provreq/*) ;;
		*) echo "FAIL: allow-list entry outside src/provreq (fix the code instead): $kind $file $name";;
		esac
		echo "$over" | awk -v k="$kind" -v f="$file" -v n="$name" '
			$1 == k && $2 == f && (k == "file" || $3 == n) { found = 1 } END { exit !found }' ||
			echo "FAIL: stale allow-list entry (fixed: remove it): $kind $file $name"
	done >>"$tmp"
fi
cat "$tmp"
if grep -q '^FAIL' "$tmp"; then
	exit 1
fi
echo "shape: ok"

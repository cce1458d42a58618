#!/bin/sh
# The case list (tests/cases.txt): each line's command must exit with the
# status the line gives and print the fragment it gives (stdout and
# stderr together). A case that fails prints the command, what it expected
# and what came. Exit 1 when any fails, 99 when the list or a binary is
# missing.
set -u
: "${PRD_BUILDDIR:?}" "${PRD_SRCDIR:?}"
list=$PRD_SRCDIR/tests/cases.txt
prd=$PRD_BUILDDIR/provreqd
plugin=$PRD_BUILDDIR/kubectl-create-provisioningrequest
[ -r "$list" ] || { echo "cannot read $list"; exit 99; }
[ -x "$prd" ] && [ -x "$plugin" ] || { echo "build provreqd and the plugin first"; exit 99; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/run" "$tmp/home"
fails=0
n=0
# Replace the placeholders; '|' cannot occur in the paths mktemp and the
# build use.
expand() {
	printf '%s' "$1" | sed -e "s|@PRD@|$prd|g" -e "s|@PLUGIN@|$plugin|g" -e "s|@SRC@|$PRD_SRCDIR|g" \
		-e "s|@FIX@|$PRD_SRCDIR/tests/fixtures/cases|g" -e "s|@HOME@|$tmp/home|g"
}
while IFS= read -r line; do
	case $line in '#'* | '') continue ;; esac
	want=${line%% | *}
	rest=${line#* | }
	frag=$(expand "${rest%% | *}")
	cmd=$(expand "${rest#* | }")
	case $want in
	[0-9]*) ;;
	*) echo "FAIL: malformed case: $line"; fails=$((fails + 1)); continue ;;
	esac
	n=$((n + 1))
	got=0
	(cd "$tmp/run" && timeout 120 sh -c "$cmd") </dev/null >"$tmp/out" 2>&1 || got=$?
	if [ "$got" != "$want" ] || ! grep -qF -- "$frag" "$tmp/out"; then
		fails=$((fails + 1))
		echo "FAIL: $cmd"
		echo "  want exit $want and '$frag'; got exit $got:"
		head -c 1500 "$tmp/out" | sed 's/^/    /'
	fi
done <"$list"
[ "$n" -gt 30 ] || { echo "only $n cases read from $list"; exit 99; }
echo "$n cases, $fails failed"
[ "$fails" -eq 0 ]

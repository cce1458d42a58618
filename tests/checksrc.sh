#!/bin/sh
# make checksrc (and make check): the tree's layout rules, checked over the
# C sources git tracks (or, in a distdir without git, the ones found).
#
#   every file (src/, cloud/, tests/, e2e/tools/):
#     no trailing whitespace, no CR, ends with a newline;
#     indentation with tabs: leading whitespace is tabs, then at most 7
#     spaces of alignment (a run of 8 spaces is a tab that was not typed;
#     `unexpand --first-only` fixes it);
#   src/ and cloud/ only:
#     lines of at most 140 columns (tabs at 8), the width today's code
#     keeps; every .c opens with a comment whose first line says its job;
#     none of the functions CONVENTIONS.md bans (strcpy, strcat, sprintf,
#     vsprintf, gets, atoi, atol, atoll): snprintf, buf_*, str_to_int64.
#
# Each violation is one line "FILE:LINE: rule"; exit 1 when there is any.
# Usage: tests/checksrc.sh [SRCDIR]   (default: PRD_SRCDIR, else .)
set -u
top=${1:-${PRD_SRCDIR:-.}}
cd "$top" || exit 99

# Only when $top is the top of a git work tree: a distdir made inside the
# repository (make distcheck's provreqd-X.Y/) is untracked there.
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$(pwd -P)" ]; then
	all=$(git ls-files 'src/*.[ch]' 'cloud/*.[ch]' 'tests/*.[ch]' 'e2e/tools/*.[ch]')
else
	all=$(find src cloud tests e2e/tools -name '*.[ch]' 2>/dev/null | sort)
fi
[ -n "$all" ] || { echo "checksrc: no sources under $top" >&2; exit 99; }

out=$(LC_ALL=C awk -v maxw=140 '
function bad(rule) { print FILENAME ":" FNR ": " rule; n++ }
FNR == 1 {
	core = (FILENAME ~ /^(src|cloud)\//)
	if (core && FILENAME ~ /\.c$/ && $0 !~ /^\/\* [^ ]/)
		bad("a .c file opens with a comment saying its job")
}
/\r$/ { bad("CR line ending") }
/[ \t]+$/ { bad("trailing whitespace") }
/^        / { bad("indentation with spaces (indent with tabs; spaces only to align after them)") }
/^\t* +\t/ { bad("a tab after spaces in indentation") }
core {
	line = $0
	w = 0
	for (i = 1; i <= length(line); i++) {
		ch = substr(line, i, 1)
		if (ch == "\t") w += 8 - w % 8
		else if (ch < "\200" || ch >= "\300") w++  # a UTF-8 continuation byte adds no column
	}
	if (w > maxw) bad("line of " w " columns (at most " maxw ")")
	code = line
	sub(/\/\/.*/, "", code)
	if (code !~ /^[ \t]*\*/ && code !~ /^[ \t]*\/\*/ && \
	    match(code, /(^|[^A-Za-z0-9_.>])(strcpy|strcat|sprintf|vsprintf|gets|atoi|atol|atoll)[ \t]*\(/))
		bad("banned function: " substr(code, RSTART, RLENGTH))
}
END { exit n > 0 }
' $all)
rc=$?
for f in $all; do
	[ -s "$f" ] && [ -n "$(tail -c 1 "$f")" ] && { out="$out
$f: no newline at the end of the file"; rc=1; }
done
if [ $rc -ne 0 ]; then
	printf '%s\n' "$out" | sed '/^$/d'
	echo "checksrc: $(printf '%s\n' "$out" | sed '/^$/d' | wc -l) violation(s)" >&2
	exit 1
fi
echo "checksrc: $(printf '%s\n' $all | wc -l) files clean"
exit 0

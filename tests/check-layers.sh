#!/bin/sh
# Stages call only downward (issue 42): no file of src/provreq calls a
# function defined in a file of a later layer. The layers, lowest first,
# are src/provreq/layers.txt, the one place that states them. What calls
# what is read from the compiled objects with nm (a function a file
# defines is a text symbol of its object; one it calls elsewhere is an
# undefined symbol), so comments and macros cannot fool it.
#
# Prints every call that goes up, every file missing from the layers,
# and the cycles among the files (strongly connected sets of more than
# one file: within a layer files may call each other, and the bookings
# core does). Exit 0 when nothing goes up, 1 when something does, 99
# when the objects are not built.
#
# Usage: tests/check-layers.sh [builddir [srcdir]] (make check passes
# them in PRD_BUILDDIR and PRD_SRCDIR).
set -u

builddir=${1:-${PRD_BUILDDIR:-.}}
srcdir=${2:-${PRD_SRCDIR:-$builddir}}
layers=${LAYERS:-$srcdir/src/provreq/layers.txt}
objdir=$builddir/src/provreq
NM=${NM:-nm}

if [ ! -r "$layers" ]; then
	echo "check-layers: cannot read $layers" >&2
	exit 99
fi

tmp=${TMPDIR:-/tmp}/check-layers.$$
trap 'rm -f "$tmp"' EXIT INT TERM
: >"$tmp" || exit 99

# One line per symbol: "<file> D <symbol>" (a function the file defines)
# or "<file> U <symbol>" (one it uses from elsewhere). libtool keeps the
# objects in .libs/ (PIC) or beside the .lo.
n=0
for lo in "$objdir"/*.lo; do
	[ -e "$lo" ] || continue
	base=${lo##*/}
	base=${base%.lo}
	if [ -f "$objdir/.libs/$base.o" ]; then
		o=$objdir/.libs/$base.o
	elif [ -f "$objdir/$base.o" ]; then
		o=$objdir/$base.o
	else
		continue
	fi
	# Only the library's files: a test program's object is no stage.
	[ -f "$srcdir/src/provreq/$base.c" ] || continue
	"$NM" -P -g "$o" | awk -v f="$base" '
		$2 == "T" { print f, "D", $1 }
		$2 == "U" { print f, "U", $1 }' >>"$tmp" || exit 99
	n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
	echo "check-layers: no objects under $objdir (build the library first)" >&2
	exit 99
fi

awk -v layers="$layers" '
BEGIN {
	nl = 0
	while ((getline line < layers) > 0) {
		sub(/#.*/, "", line)
		if (line !~ /:/)
			continue
		name = line
		sub(/:.*/, "", name)
		gsub(/[ \t]/, "", name)
		rest = line
		sub(/^[^:]*:/, "", rest)
		nl++
		lname[nl] = name
		k = split(rest, fs, /[ \t]+/)
		for (i = 1; i <= k; i++)
			if (fs[i] != "") {
				if (fs[i] in layer)
					printf "check-layers: %s is in two layers (%s, %s)\n", fs[i], lname[layer[fs[i]]], name
				layer[fs[i]] = nl
			}
	}
}
$2 == "D" { def[$3] = $1; files[$1] = 1; next }
$2 == "U" { use[++nu] = $1 SUBSEP $3; files[$1] = 1 }
END {
	bad = 0
	for (f in files)
		if (!(f in layer)) {
			printf "check-layers: %s.c is in no layer of %s\n", f, layers
			bad = 1
		}
	for (i = 1; i <= nu; i++) {
		split(use[i], p, SUBSEP)
		f = p[1]; s = p[2]
		if (!(s in def) || def[s] == f)
			continue
		g = def[s]
		edge[f, g] = 1
		if ((f in layer) && (g in layer) && layer[g] > layer[f]) {
			printf "check-layers: %s.c (%s) calls %s of %s.c (%s, a later layer)\n", f, lname[layer[f]], s,
			       g, lname[layer[g]]
			bad = 1
		}
	}
	# Cycles: which files reach which (a closure over a few dozen files),
	# then the sets of files that reach each other.
	nf = 0
	for (f in files) {
		for (i = ++nf; i > 1 && name_of[i - 1] > f; i--)
			name_of[i] = name_of[i - 1]
		name_of[i] = f
	}
	for (a = 1; a <= nf; a++)
		for (b = 1; b <= nf; b++)
			reach[a, b] = ((name_of[a], name_of[b]) in edge)
	for (k = 1; k <= nf; k++)
		for (a = 1; a <= nf; a++)
			if (reach[a, k])
				for (b = 1; b <= nf; b++)
					if (reach[k, b])
						reach[a, b] = 1
	cycles = 0
	for (a = 1; a <= nf; a++) {
		if (done[a] || !reach[a, a])
			continue
		members = ""
		m = 0
		for (b = 1; b <= nf; b++)
			if (reach[a, b] && reach[b, a]) {
				done[b] = 1
				members = members (m ? " " : "") name_of[b]
				m++
			}
		if (m > 1) {
			cycles++
			cyc[cycles] = m " files: " members
		}
	}
	printf "check-layers: %d cycle%s among src/provreq files\n", cycles, cycles == 1 ? "" : "s"
	for (i = 1; i <= cycles; i++)
		printf "check-layers:   cycle %d, %s\n", i, cyc[i]
	exit bad
}' "$tmp"

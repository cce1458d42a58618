#!/bin/sh
# The docs check: every flag of the option table and every metric family
# the code registers is documented, the docs name no flag or metric that
# no longer exists, the example config is valid and the ConfigMap and the
# Helm chart carry it unchanged, `kubectl get provreq`'s columns (the CRD's printer columns) are
# the ones the user guide lists, and `make install` installs provreqd(8).
#
# The lists come from the binary itself (`provreqd check-config
# --list-options` and `--list-metrics`), so they cannot drift from the code.
set -eu
: "${PRD_BUILDDIR:?}" "${PRD_SRCDIR:?}"
bin=$PRD_BUILDDIR/provreqd
docs=$PRD_SRCDIR/docs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$bin" check-config --list-options >"$tmp/options" || { echo "check-config --list-options failed"; exit 99; }
"$bin" check-config --list-metrics >"$tmp/metrics" || { echo "check-config --list-metrics failed"; exit 99; }
[ -s "$tmp/options" ] && [ -s "$tmp/metrics" ] || { echo "empty option or metric list"; exit 99; }

# Flags: a row in config.md's table with the right key, type and default;
# a mention in the operator guide; an entry in the man page.
n=0
while IFS='	' read -r flag key type def; do
	n=$((n + 1))
	row=$(grep -F -- "| \`--$flag\` |" "$docs/config.md" || true)
	if [ -z "$row" ]; then
		bad "--$flag is not in docs/config.md's option table"
	else
		if [ "$key" != "-" ]; then
			case $row in *"| \`$key\` |"*) ;; *) bad "docs/config.md: --$flag: config key is not \`$key\`: $row" ;; esac
		fi
		case $type in
		strings) want="string, repeatable" ;;
		*) want=$type ;;
		esac
		case $row in *"| $want |"*) ;; *) bad "docs/config.md: --$flag: type is not '$want': $row" ;; esac
		case $def in
		'""') want="| empty |" ;;
		'[]') want="| none |" ;;
		*) want="| \`$def\` |" ;;
		esac
		case $row in *"$want"*) ;; *) bad "docs/config.md: --$flag: default is not $def: $row" ;; esac
	fi
	grep -qF -- "\`--$flag\`" "$docs/operator.md" || bad "--$flag is not in docs/operator.md"
	manflag=$(printf '%s' "$flag" | sed 's/-/\\-/g')
	grep -qF -- "\\fB\\-\\-$manflag\\fR" "$docs/man/provreqd.8" || bad "--$flag is not in docs/man/provreqd.8"
done <"$tmp/options"

# No documented flag that the code does not have.
sed -n 's/^| `--\([a-z0-9-]*\)` |.*/\1/p' "$docs/config.md" | while read -r flag; do
	grep -q "^$flag	" "$tmp/options" || echo "$flag"
done >"$tmp/stale-flags"
while read -r flag; do bad "docs/config.md documents --$flag, which the code does not have"; done <"$tmp/stale-flags"

# Metrics: a row of docs/metrics.md's table each, and no stale rows.
m=0
while read -r name; do
	m=$((m + 1))
	grep -qF -- "| \`$name\` |" "$docs/metrics.md" || bad "metric $name is not in docs/metrics.md"
done <"$tmp/metrics"
sed -n 's/^| `\(provreqd_[a-z0-9_]*\)` |.*/\1/p' "$docs/metrics.md" | while read -r name; do
	grep -qx "$name" "$tmp/metrics" || echo "$name"
done >"$tmp/stale-metrics"
while read -r name; do bad "docs/metrics.md documents $name, which the code does not register"; done <"$tmp/stale-metrics"

# The example config is valid, and the ConfigMap repeats it exactly.
cfgfile=$PRD_SRCDIR/templates/config/provreqd.yaml
"$bin" check-config --config "$cfgfile" >/dev/null 2>"$tmp/cc.err" || bad "templates/config/provreqd.yaml: $(cat "$tmp/cc.err")"
awk 'found { sub(/^    /, ""); print; next } /^  provreqd.yaml: \|$/ { found = 1 }' \
	"$PRD_SRCDIR/templates/deploy/configmap.yaml" >"$tmp/cm.yaml"
cmp -s "$tmp/cm.yaml" "$cfgfile" ||
	bad "templates/deploy/configmap.yaml does not carry templates/config/provreqd.yaml unchanged: $(diff "$cfgfile" "$tmp/cm.yaml" | head -5)"
# The Helm chart's default config is the same file (helm, like kustomize,
# reads nothing outside the chart).
cmp -s "$PRD_SRCDIR/charts/provreqd/files/provreqd.yaml" "$cfgfile" ||
	bad "charts/provreqd/files/provreqd.yaml is not templates/config/provreqd.yaml: $(diff "$cfgfile" "$PRD_SRCDIR/charts/provreqd/files/provreqd.yaml" | head -5)"

# kubectl get provreq: every printer column of the CRD has a row in the user
# guide's column table (and no row names a column the CRD lacks), and every
# served version has the same columns.
crd=$PRD_SRCDIR/crd/provisioningrequests.yaml
awk '/^  - name: / { v = $3 } /additionalPrinterColumns:/ { on = 1; next }
	on && /^    - name: / { print v, toupper($3); next } on && /^    [a-z]/ { on = 0 }' "$crd" >"$tmp/cols"
sed -n 's/^v1 //p' "$tmp/cols" >"$tmp/cols-v1"
[ -s "$tmp/cols-v1" ] || bad "no printer columns found for v1 in crd/provisioningrequests.yaml"
for v in $(cut -d' ' -f1 "$tmp/cols" | sort -u); do
	sed -n "s/^$v //p" "$tmp/cols" | cmp -s - "$tmp/cols-v1" ||
		bad "crd/provisioningrequests.yaml: the printer columns of $v differ from v1's"
done
awk '/^\| column \| shows \|$/ { on = 1; next } on && /^$/ { on = 0 } on' "$docs/user-guide.md" |
	sed -n 's/^| `\([A-Z]*\)` |.*/\1/p' >"$tmp/doc-cols"
[ -s "$tmp/doc-cols" ] || bad "docs/user-guide.md has no printer column table (| column | shows |)"
while read -r col; do
	grep -qx "$col" "$tmp/doc-cols" || bad "printer column $col is not in docs/user-guide.md's column table"
done <"$tmp/cols-v1"
while read -r col; do
	grep -qx "$col" "$tmp/cols-v1" || bad "docs/user-guide.md documents printer column $col, which the CRD lacks"
done <"$tmp/doc-cols"

# make install puts the man page in section 8.
${MAKE:-make} -s -C "$PRD_BUILDDIR" DESTDIR="$tmp/root" install-man8 >/dev/null ||
	bad "make install-man8 failed"
find "$tmp/root" -path '*/man8/provreqd.8' | grep -q . || bad "make install does not install provreqd.8"

echo "checked $n options and $m metric families"
exit $fail

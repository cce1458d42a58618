#!/bin/sh
# The docs check: every flag of the option table and every metric family
# the code registers is documented, the docs name no flag or metric that
# no longer exists, each family's type and labels and the values the code
# records for the fixed-valued labels are the documented ones, the Event
# type per condition and reason is the one the user guide gives, the
# example config is valid and the ConfigMap and the Helm chart carry it
# unchanged, `kubectl get provreq`'s columns (the CRD's printer columns) are
# the ones the user guide lists, and `make install` installs provreqd(8).
#
# The lists come from the binary itself (`provreqd check-config
# --list-options`, `--list-metrics` and `--list-metric-labels`) and from
# tests/unit/event_types (the controller's pr_event_type), so they cannot
# drift from the code; label values are read from the source.
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

# cluster-autoscaler's names: each alias has a row "| `--ALIAS` | `--OPTION` |".
"$bin" check-config --list-aliases >"$tmp/aliases" || { echo "check-config --list-aliases failed"; exit 99; }
[ -s "$tmp/aliases" ] || bad "check-config --list-aliases lists nothing"
while IFS='	' read -r alias opt; do
	grep -qF -- "| \`--$alias\` | \`--$opt\` |" "$docs/config.md" ||
		bad "docs/config.md has no row for cluster-autoscaler's --$alias (--$opt)"
done <"$tmp/aliases"

# cluster-autoscaler flags accepted and ignored: each named in a row of
# docs/config.md's table of them.
"$bin" check-config --list-ignored >"$tmp/ignored" || { echo "check-config --list-ignored failed"; exit 99; }
[ -s "$tmp/ignored" ] || bad "check-config --list-ignored lists nothing"
while IFS='	' read -r flag why; do
	grep -q -- "^| .*\`--$flag\`.* | " "$docs/config.md" ||
		bad "docs/config.md has no row for the ignored cluster-autoscaler flag --$flag ($why)"
done <"$tmp/ignored"

# The chart's README has a row for every top-level value of values.yaml.
for v in $(sed -n 's/^\([a-zA-Z][a-zA-Z0-9]*\):.*/\1/p' "$PRD_SRCDIR/charts/provreqd/values.yaml"); do
	grep -q -- "^| .*\`$v\`.* | " "$PRD_SRCDIR/charts/provreqd/README.md" ||
		bad "charts/provreqd/README.md has no row for the value $v"
done

# No documented flag that the code does not have.
sed -n 's/^| `--\([a-z0-9-]*\)`.*/\1/p' "$docs/config.md" | while read -r flag; do
	grep -q "^$flag	" "$tmp/options" || grep -q "^$flag	" "$tmp/aliases" || grep -q "^$flag	" "$tmp/ignored" ||
		echo "$flag"
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

# The example config is valid, and the kustomization's configMapGenerator
# file repeats it exactly.
cfgfile=$PRD_SRCDIR/templates/config/provreqd.yaml
"$bin" check-config --config "$cfgfile" >/dev/null 2>"$tmp/cc.err" || bad "templates/config/provreqd.yaml: $(cat "$tmp/cc.err")"
cmp -s "$PRD_SRCDIR/templates/deploy/provreqd.yaml" "$cfgfile" ||
	bad "templates/deploy/provreqd.yaml is not templates/config/provreqd.yaml: $(diff "$cfgfile" "$PRD_SRCDIR/templates/deploy/provreqd.yaml" | head -5)"
# The kustomization deploys this release's image, and the chart carries
# the CRD as crd/ has it.
version=$("$bin" version -o json | sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' | head -n 1)
grep -qx "    newTag: \"$version\"" "$PRD_SRCDIR/templates/deploy/kustomization.yaml" ||
	bad "templates/deploy/kustomization.yaml does not pin newTag \"$version\" (provreqd version)"
grep -qx "appVersion: \"$version\"" "$PRD_SRCDIR/charts/provreqd/Chart.yaml" ||
	bad "charts/provreqd/Chart.yaml's appVersion is not \"$version\" (provreqd version)"
cmp -s "$PRD_SRCDIR/charts/provreqd/crds/provisioningrequests.yaml" "$PRD_SRCDIR/crd/provisioningrequests.yaml" ||
	bad "charts/provreqd/crds/provisioningrequests.yaml is not crd/provisioningrequests.yaml"
cmp -s "$PRD_SRCDIR/charts/provreqd/crds/provisioningclasses.yaml" "$PRD_SRCDIR/crd/provisioningclasses.yaml" ||
	bad "charts/provreqd/crds/provisioningclasses.yaml is not crd/provisioningclasses.yaml"
# The Helm chart's default config is the same file (helm, like kustomize,
# reads nothing outside the chart).
# The shipped config is complete: every option with a config key is in it
# (its last path element under its section, `# ... (--flag)` above it).
while IFS='	' read -r flag key _; do
	[ "$key" = "-" ] && continue
	grep -q -- "(--$flag)\$" "$cfgfile" ||
		bad "templates/config/provreqd.yaml has no $key (--$flag): it says it holds every option"
done <"$tmp/options"
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

# Metric families: each row's type and label names are the registered ones.
"$bin" check-config --list-metric-labels >"$tmp/metric-labels" || { echo "check-config --list-metric-labels failed"; exit 99; }
while IFS='	' read -r name type labels; do
	row=$(grep -F -- "| \`$name\` |" "$docs/metrics.md" | head -1)
	[ -n "$row" ] || continue # reported above
	dtype=$(printf '%s\n' "$row" | awk -F'|' '{ gsub(/ /, "", $3); print $3 }')
	dlabels=$(printf '%s\n' "$row" | awk -F'|' '{ gsub(/[ `]/, "", $4); print $4 }')
	[ "$dlabels" = "—" ] && dlabels=-
	[ "$dtype" = "$type" ] || bad "docs/metrics.md: $name is a $type, the docs say '$dtype'"
	[ "$dlabels" = "$labels" ] || bad "docs/metrics.md: $name has labels '$labels', the docs say '$dlabels'"
done <"$tmp/metric-labels"

# Label values: the values the code records for a label, against the
# backquoted words of that label's bullet in docs/metrics.md's Labels
# section (`pattern` keeps the words that look like values of it).
bullet_values() { # prefix pattern
	awk -v p="$1" 'index($0, p) == 1 { on = 1; print; next }
		on && (/^\* / || /^#/ || /^$/) { on = 0 } on' "$docs/metrics.md" |
		grep -o '`[^`]*`' | tr -d '`' | grep -xE "$2" | grep -v '^provreqd_' | sort -u
}
same_values() { # what code-file doc-file
	comm -23 "$2" "$3" | while read -r v; do echo "$1: the code records '$v', docs/metrics.md does not list it"; done >"$tmp/vdiff"
	comm -13 "$2" "$3" | while read -r v; do echo "$1: docs/metrics.md lists '$v', the code never records it"; done >>"$tmp/vdiff"
	[ -s "$2" ] || echo "$1: no values found in the code (the extraction is broken)" >>"$tmp/vdiff"
	while read -r line; do bad "$line"; done <"$tmp/vdiff"
}
src=$PRD_SRCDIR/src
sed -n 's/.*\.short_name = "\([^"]*\)".*/\1/p' "$src"/classes/*.c | sort -u >"$tmp/c-class"
bullet_values '* `class`:' '[a-z][a-z-]*-[a-z-]*' >"$tmp/d-class"
same_values 'label class (built-in classes)' "$tmp/c-class" "$tmp/d-class"
grep -ho 'M_SCALEUPS, METRICS_L([^)]*)' "$src"/classes/*.c | sed 's/.*"\([a-z_]*\)")$/\1/' | sort -u >"$tmp/c-sresult"
bullet_values '* `result` (scale-ups)' '[a-z_]+' | grep -vx result >"$tmp/d-sresult"
same_values 'label result of provreqd_scaleups_total' "$tmp/c-sresult" "$tmp/d-sresult"
grep -h 'note_update(c, ' "$src"/pools/ctl.c | grep -o '"[a-z_]*"' | tr -d '"' | sort -u >"$tmp/c-presult"
bullet_values '* `result` (pool updates)' '[a-z_]+' | grep -vx result >"$tmp/d-presult"
same_values 'label result of provreqd_pool_updates_total' "$tmp/c-presult" "$tmp/d-presult"
grep -ho 'M_LEADER_TRANSITIONS, METRICS_L("[a-z_]*")' "$src"/*.c | sed 's/.*("\([a-z_]*\)")/\1/' | sort -u >"$tmp/c-event"
bullet_values '* `event` (leadership)' '[a-z_]+' | grep -vx event >"$tmp/d-event"
same_values 'label event of provreqd_leader_transitions_total' "$tmp/c-event" "$tmp/d-event"
# verb: the method of every apiserver call in the controller and the
# drivers, and WATCH for the streams the client reports.
grep -rhoE '(kube_api_call|kube__request_ex|send_obj|kube_request|capi_request|kwok_request)\([^,()]*, "[A-Z]+"' \
	"$src" "$PRD_SRCDIR/cloud" | sed 's/.*"\([A-Z]*\)"$/\1/' >"$tmp/c-verb"
grep -ho 'observe_ud, "[A-Z]*"' "$src"/kube/client.c | sed 's/.*"\([A-Z]*\)"$/\1/' >>"$tmp/c-verb"
sort -u -o "$tmp/c-verb" "$tmp/c-verb"
bullet_values '* `verb`, `code`' '[A-Z]+' >"$tmp/d-verb"
same_values 'label verb of the API metrics' "$tmp/c-verb" "$tmp/d-verb"

# Events on requests: the user guide's table says which are Warnings; the
# controller decides with pr_event_type() (src/provreq/host.c), asked here
# through tests/unit/event_types for every condition, status and reason.
evbin=$PRD_BUILDDIR/tests/unit/event_types
vocab=$src/classes/vocab.h
[ -x "$evbin" ] || { echo "$evbin is not built"; exit 99; }
sed -n 's/^#define PR_COND_[A-Z_]* "\(.*\)"$/\1/p' "$vocab" >"$tmp/conds"
sed -n 's/^#define PR_R_[A-Z_]* "\([^"]*\)".*/\1/p' "$vocab" >"$tmp/reasons"
echo SomeDriverReason >>"$tmp/reasons" # a reason a driver makes up
awk '/^\| Event type \| condition \| reason \| when \|$/ { on = 1; next } on && /^$/ { on = 0 }
	on && !/^\|---/' "$docs/user-guide.md" |
	awk -F'|' '{ for(i = 2; i <= 4; i++) { gsub(/[ `]/, "", $i) } print $2, $3, $4 }' >"$tmp/doc-events"
[ -s "$tmp/doc-events" ] || bad "docs/user-guide.md has no Event table (| Event type | condition | reason | when |)"
for cond in $(cat "$tmp/conds"); do
	for status in True False; do
		sed "s/^/$cond $status /" "$tmp/reasons"
	done
done >"$tmp/combos"
"$evbin" <"$tmp/combos" >"$tmp/code-events" || bad "tests/unit/event_types failed"
# Each documented condition row has the code's type (an "any" row: for
# every reason).
while read -r dtype cs reason; do
	[ "$cs" = "—" ] && continue
	cond=${cs%=*} status=${cs#*=}
	if [ "$reason" = any ]; then
		got=$(awk -v c="$cond" -v s="$status" '$1 == c && $2 == s { print $4 }' "$tmp/code-events" | sort -u | tr '\n' ' ')
	else
		got=$(awk -v c="$cond" -v s="$status" -v r="$reason" '$1 == c && $2 == s && $3 == r { print $4 }' "$tmp/code-events")
		[ -n "$got" ] || got=$(printf '%s %s %s\n' "$cond" "$status" "$reason" | "$evbin" | cut -d' ' -f4)
	fi
	[ "$got" = "$dtype" ] || [ "$got" = "$dtype " ] ||
		bad "docs/user-guide.md: an Event for $cs/$reason is $dtype, the code records ${got% }"
done <"$tmp/doc-events"
# Every transition the code records as a Warning is in the table.
awk '$4 == "Warning"' "$tmp/code-events" | while read -r cond status reason t; do
	awk -v cs="$cond=$status" -v r="$reason" '$2 == cs && ($3 == r || $3 == "any") { f = 1 } END { exit !f }' \
		"$tmp/doc-events" || echo "$cond=$status/$reason"
done >"$tmp/undoc-warn"
while read -r w; do bad "the code records a Warning Event for $w; docs/user-guide.md's Event table does not list it"; done <"$tmp/undoc-warn"
# Events that are not condition changes (h->event in src/classes), both ways.
grep -rhoE 'h->event(_on)?\(h->ctx, (pr, )?"(Normal|Warning)", [A-Za-z_"]+' "$src"/classes |
	sed 's/.*, "\([A-Za-z]*\)", \(.*\)$/\1 \2/' | while read -r t r; do
		case $r in
		\"*) r=$(printf '%s' "$r" | tr -d '"') ;;
		*) r=$(sed -n "s/^#define $r \"\([^\"]*\)\".*/\1/p" "$vocab") ;;
		esac
		echo "$t $r"
	done | sort -u >"$tmp/c-other-events"
awk '$2 == "—" { print $1, $3 }' "$tmp/doc-events" | sort -u >"$tmp/d-other-events"
[ -s "$tmp/c-other-events" ] || bad "no h->event calls found in src/classes (the extraction is broken)"
comm -23 "$tmp/c-other-events" "$tmp/d-other-events" | while read -r t r; do
	echo "the code records a $t Event $r; docs/user-guide.md's Event table does not list it (as $t)"
done >"$tmp/ediff"
comm -13 "$tmp/c-other-events" "$tmp/d-other-events" | while read -r t r; do
	echo "docs/user-guide.md lists a $t Event $r that the code does not record"
done >>"$tmp/ediff"
while read -r line; do bad "$line"; done <"$tmp/ediff"

# The example ResourcePools select nodes the example node groups make:
# each equality term (key=value) of populate-from-nodes is a label of at
# least one template in templates/nodegroups, and every term holds on one
# template (set-based terms are left out).
for rp in "$PRD_SRCDIR"/templates/examples/resourcepool-*.yaml; do
	sel=$(sed -n 's/^ *provreqd.io\/populate-from-nodes: *"\(.*\)"$/\1/p' "$rp")
	[ -n "$sel" ] || { bad "$rp: no provreqd.io/populate-from-nodes"; continue; }
	terms=$(printf '%s\n' "$sel" | sed 's/([^)]*)//g' | tr ',' '\n' | grep -E '^[^=!]+=[^=]+$' || true)
	[ -n "$terms" ] || bad "$rp: no key=value term in \"$sel\" to check"
	found=
	for ng in "$PRD_SRCDIR"/templates/nodegroups/*.yaml; do
		all=yes
		for t in $terms; do
			k=${t%%=*} v=${t#*=}
			grep -qE "^    $k: \"?$v\"?\$" "$ng" || all=
		done
		[ -n "$all" ] && found=$ng
	done
	[ -n "$found" ] || bad "$rp selects \"$sel\", which no template in templates/nodegroups carries"
done

# `help --help` is help about help (the usage line offers `help [COMMAND]`),
# not an unknown command.
"$bin" help --help >"$tmp/help-help" 2>&1 || bad "provreqd help --help exits $?: $(head -1 "$tmp/help-help")"
grep -q "help \[COMMAND\]" "$tmp/help-help" || bad "provreqd help --help does not print the usage"

# A command's options before its name are the command's (klog habit:
# `provreqd --v=3 run`); getopt's abbreviations once took --v=3 for
# --version and refused it.
"$bin" --v=3 check-config >"$tmp/v-before" 2>&1 || bad "provreqd --v=3 check-config exits $?: $(head -1 "$tmp/v-before")"
"$bin" --v 3 check-config >"$tmp/v-before" 2>&1 || bad "provreqd --v 3 check-config exits $?: $(head -1 "$tmp/v-before")"
rc=0; "$bin" --v=3 >"$tmp/v-only" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "no COMMAND after '--v=3'" "$tmp/v-only" || bad "provreqd --v=3 alone: exit $rc, $(head -1 "$tmp/v-only")"

# The man page's option entries say what `provreqd run --help` says (the
# same option table): type, help text, default and config key, so a
# changed default cannot go stale there (it did: --kube-api-qps).
"$bin" run --help | awk '/^  --/ { f = $1; t = toupper($2); getline; sub(/^      /, ""); print f "\t" t "\t" $0 }' \
	>"$tmp/help-entries"
awk '/^\\fB\\-\\-[a-z]/ && prev == ".TP" { h = $0; getline; print h "\t" $0 } { prev = $0 }' "$docs/man/provreqd.8" |
	sed 's/\\-/-/g; s/\\f[BIR]//g; s/\\e/\\/g' |
	awk -F'\t' '{ split($1, a, " "); print a[1] "\t" (a[2] ? a[2] : "") "\t" $2 }' >"$tmp/man-entries"
[ "$(wc -l <"$tmp/help-entries")" -eq "$n" ] || bad "run --help lists $(wc -l <"$tmp/help-entries") options, the table $n"
while IFS= read -r line; do
	flag=${line%%	*}
	got=$(awk -F'\t' -v f="$flag" '$1 == f' "$tmp/man-entries")
	[ -n "$got" ] || continue # reported above
	[ "$got" = "$line" ] ||
		bad "docs/man/provreqd.8: $flag differs from run --help: man: '$(printf '%s' "$got" | cut -f2- | tr '\t' ' ')' help: '$(printf '%s' "$line" | cut -f2- | tr '\t' ' ')'"
done <"$tmp/help-entries"

# make install puts the man page in section 8.
${MAKE:-make} -s -C "$PRD_BUILDDIR" DESTDIR="$tmp/root" install-man8 >/dev/null ||
	bad "make install-man8 failed"
find "$tmp/root" -path '*/man8/provreqd.8' | grep -q . || bad "make install does not install provreqd.8"

echo "checked $n options and $m metric families"
exit $fail

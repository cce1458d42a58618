#!/bin/sh
# docs/development.md's checklists, checked: every in-tree cloud driver and
# every built-in provisioning class is in each place the checklist for it
# names. The drivers are the directories under cloud/ whose sources define
# provreqd_cloud_driver(); the built-in classes are the modules of
# src/classes/registry.c's pr_class_builtins[]. A new driver or class
# that misses a place fails here with the place and the checklist's item.
set -u
top=${PRD_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top" || exit 99
fails=0
checks=0
miss() { echo "FAIL: $1: $2"; fails=$((fails + 1)); }
has() { checks=$((checks + 1)); grep -Eq -- "$2" "$1" 2>/dev/null; }
exists() { checks=$((checks + 1)); [ -e "$1" ]; }
# Any file under the tree's automake fragments.
am_files=$(find . -name '*.am' -not -path './autom4te.cache/*' -not -path './build-*/*' | sort)
in_am() { checks=$((checks + 1)); grep -Eq -- "$1" $am_files; }

drivers=$(grep -l 'provreqd_cloud_driver(' cloud/*/*.c 2>/dev/null | sed 's|^cloud/\([^/]*\)/.*|\1|' | sort -u)
[ -n "$drivers" ] || { echo "no drivers found under $top/cloud"; exit 99; }
for d in $drivers; do
	# The prefix of the driver's pins in e2e/versions.env (the cloud's
	# own controller the e2e scenarios run it against).
	case "$d" in
	clusterapi) pin=CAPI ;;
	*) pin=$(printf '%s' "$d" | tr 'a-z-' 'A-Z_') ;;
	esac
	in_am "cloud/$d/$d\.la" || miss "$d" "built: cloud/$d/$d.la in a *.am fragment (pkglibdriver_LTLIBRARIES)"
	exists "tests/unit/test_driver_$d.c" || miss "$d" "unit test: tests/unit/test_driver_$d.c"
	in_am "TESTS \+=.*tests/unit/test_driver_$d( |\$)" || miss "$d" "unit test: tests/unit/test_driver_$d in TESTS"
	has deploy/image/build.sh "drivers/$d\.so" || miss "$d" "image: deploy/image/build.sh installs drivers/$d.so"
	has deploy/image/verify.sh "$d\.so" || miss "$d" "image: deploy/image/verify.sh checks $d.so"
	has charts/provreqd/values.yaml "^  $d:" || miss "$d" "chart: drivers.$d in charts/provreqd/values.yaml"
	has charts/provreqd/templates/_helpers.tpl "/$d\.so" || miss "$d" "chart: $d.so in templates/_helpers.tpl's driver list"
	has charts/provreqd/templates/driver-rbac.yaml "eq \.name \"$d\"" ||
		miss "$d" "chart RBAC: its rules in templates/driver-rbac.yaml"
	exists "templates/deploy/driver-$d.yaml" || miss "$d" "kustomize RBAC: templates/deploy/driver-$d.yaml"
	has templates/deploy/kustomization.yaml "driver-$d\.yaml" ||
		miss "$d" "kustomize: templates/deploy/kustomization.yaml names driver-$d.yaml"
	has e2e/versions.env "^${pin}_VERSION=" || miss "$d" "e2e versions: ${pin}_VERSION in e2e/versions.env"
	has e2e/build-binaries.sh "$(printf '%s' "$pin" | tr 'A-Z_' 'a-z-')" ||
		miss "$d" "e2e build: e2e/build-binaries.sh builds what the driver's scenarios run"
	checks=$((checks + 1))
	ls e2e/scenarios/*-"$d".sh >/dev/null 2>&1 || miss "$d" "e2e: a scenario e2e/scenarios/NN-...-$d.sh"
	has e2e/scenarios/51-deploy-helm.sh "^for d in .*\b$d\b" ||
		miss "$d" "e2e: the chart-versus-kustomize loop of e2e/scenarios/51-deploy-helm.sh"
	has docs/drivers.md "^## The $d driver" || miss "$d" "docs: \"## The $d driver\" in docs/drivers.md"
	has README.md "$d" || miss "$d" "docs: README.md's feature table"
done

# Built-in classes: the module symbols of the registry's list
# (src/classes/registry.c, pr_class_builtins[]).
mods=$(sed -n 's/.*pr_class_builtins\[\] *= *{\(.*\)}.*/\1/p' src/classes/registry.c | tr ',&' '\n ' |
	sed -n 's/^ *\(pr_class_[a-z_0-9]*\) *$/\1/p')
[ -n "$mods" ] || { echo "no built-in classes in src/classes/registry.c's pr_class_builtins[]"; exit 99; }
for m in $mods; do
	file=$(grep -l "^const pr_class_module $m = {" src/classes/*.c | head -1)
	[ -n "$file" ] || { miss "$m" "module: const pr_class_module $m in src/classes/*.c"; continue; }
	macro=$(sed -n "/^const pr_class_module $m = {/,/^};/s/.*\.name = \(PR_CLASS_[A-Z_]*\),.*/\1/p" "$file")
	short=$(sed -n "/^const pr_class_module $m = {/,/^};/s/.*\.short_name = \"\([^\"]*\)\".*/\1/p" "$file")
	name=$(sed -n "s/^#define $macro \"\([^\"]*\)\"/\1/p" src/classes/vocab.h)
	[ -n "$macro" ] && [ -n "$name" ] && [ -n "$short" ] ||
		{ miss "$m" "module: .name = PR_CLASS_* (src/classes/vocab.h) and .short_name in $file"; continue; }
	has src/classes/class.h "extern const pr_class_module $m;" || miss "$name" "src/classes/class.h declares $m"
	in_am "$file" || miss "$name" "built: $file in src/provreq/local.am"
	has src/plugin/plugin_args.c "$macro" || miss "$name" "the kubectl plugin's --class in src/plugin/plugin_args.c"
	has crd/provisioningrequests.yaml "$name" || miss "$name" "CRD: crd/provisioningrequests.yaml's class list"
	has charts/provreqd/crds/provisioningrequests.yaml "$name" ||
		miss "$name" "chart CRD: charts/provreqd/crds/provisioningrequests.yaml"
	has docs/user-guide.md "$name" || miss "$name" "docs: docs/user-guide.md"
	has docs/metrics.md "\`$short\` \(\`$name\`\)" || miss "$name" "docs: the class label values in docs/metrics.md"
	has README.md "$short|$name" || miss "$name" "docs: README.md"
	has e2e/tools/pr-e2e-lib.sh "$short\) class=$name" || miss "$name" "e2e: the class names of e2e/tools/pr-e2e-lib.sh"
	checks=$((checks + 1))
	ls e2e/scenarios/*-provreq-"$short".sh >/dev/null 2>&1 ||
		miss "$name" "e2e: a scenario e2e/scenarios/NN-provreq-$short.sh"
	has tests/dst/dst.h "\"$name\"" || miss "$name" "simulation: tests/dst/dst.h"
done

echo "checklists: $(echo $drivers | wc -w) drivers, $(echo $mods | wc -w) built-in classes, $checks checks, $fails missing"
echo "PRD-ASSERTS: $checks run, $fails failed"
[ "$fails" -eq 0 ] || exit 1
exit 0

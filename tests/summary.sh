#!/bin/sh
# Add up the assertion counts that every CUnit test program prints
# ("PRD-ASSERTS: N run, M failed") in the automake test logs, and the
# per-program results, and print one closing line.
dir=${1:-.}
logs=$(find "$dir/tests" -name '*.log' ! -name 'test-suite.log' 2>/dev/null)
[ -n "$logs" ] || { echo "no test logs under $dir/tests" >&2; exit 1; }
# shellcheck disable=SC2086
awk '
/^PRD-ASSERTS:/ { run += $2; failed += $4 }
END { printf "assertions: %d passed, %d failed\n", run - failed, failed }
' $logs

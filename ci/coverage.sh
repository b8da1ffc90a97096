#!/usr/bin/env bash
# ci/coverage.sh BUILD OUTDIR — line/function coverage of the fast tests.
# Called by `make coverage` as `ci/coverage.sh build-cov build/coverage` after
# building BUILD with COVERAGE=1 (gcc --coverage -O0). Steps: reset the counters,
# run the fast tests (ci/run-tests.sh BUILD --fast), capture with lcov, drop
# system headers and libraries (/usr/*), write the HTML report with genhtml into
# OUTDIR, and print one line:
#   coverage: lines X% (a/b), functions Y%
# COVERAGE_FILTER=REGEX restricts the tests (passed to run-tests.sh --filter).
# Exit status: 2 for bad usage or missing lcov, otherwise that of the test run
# (the report is written either way).
set -u
BUILD=${1:-}; OUT=${2:-}
if [ -z "$BUILD" ] || [ -z "$OUT" ] || [ $# -ne 2 ]; then
  echo "usage: ci/coverage.sh BUILD OUTDIR" >&2; exit 2
fi
[ -d "$BUILD" ] || { echo "coverage: build directory '$BUILD' does not exist (make BUILD=$BUILD COVERAGE=1 all)" >&2; exit 2; }
for tool in lcov genhtml gcov; do
  command -v "$tool" >/dev/null 2>&1 || { echo "coverage: '$tool' not found (ci/install-deps.sh installs lcov)" >&2; exit 2; }
done
if ! find "$BUILD" -name '*.gcno' -print -quit | grep -q .; then
  echo "coverage: no .gcno files under '$BUILD': build it with COVERAGE=1" >&2; exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
INFO="$BUILD/coverage.info"
LOG="$BUILD/coverage.log"
mkdir -p "$OUT"
: >"$LOG"

lcov --quiet --zerocounters --directory "$BUILD" >>"$LOG" 2>&1
args=("$BUILD" --fast)
[ -n "${COVERAGE_FILTER:-}" ] && args+=(--filter "$COVERAGE_FILTER")
"$ROOT/ci/run-tests.sh" "${args[@]}"
test_rc=$?

if ! lcov --quiet --capture --directory "$BUILD" --base-directory "$ROOT" --output-file "$INFO.raw" >>"$LOG" 2>&1; then
  echo "coverage: lcov --capture failed (see $LOG)" >&2; tail -n 20 "$LOG" >&2; exit 2
fi
if ! lcov --quiet --remove "$INFO.raw" '/usr/*' --output-file "$INFO" >>"$LOG" 2>&1; then
  echo "coverage: lcov --remove failed (see $LOG)" >&2; tail -n 20 "$LOG" >&2; exit 2
fi
if ! genhtml --quiet --title "dpcert fast tests" --output-directory "$OUT" "$INFO" >>"$LOG" 2>&1; then
  echo "coverage: genhtml failed (see $LOG)" >&2; tail -n 20 "$LOG" >&2; exit 2
fi
summary=$(lcov --summary "$INFO" 2>&1)
# lcov prints e.g. "  lines......: 85.3% (1234 of 1446 lines)" and "  functions..: 90.1% (100 of 111 functions)"
lines=$(printf '%s\n' "$summary" | sed -n 's/^ *lines\.*: *\([0-9.]*%\) (\([0-9]*\) of \([0-9]*\) lines).*/\1 (\2\/\3)/p')
funcs=$(printf '%s\n' "$summary" | sed -n 's/^ *functions\.*: *\([0-9.]*%\).*/\1/p')
if [ -z "$lines" ]; then
  echo "coverage: cannot read lcov's summary:" >&2; printf '%s\n' "$summary" >&2; exit 2
fi
echo "HTML report: $OUT/index.html"
echo "coverage: lines $lines, functions ${funcs:-n/a}"
exit "$test_rc"

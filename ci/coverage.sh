#!/usr/bin/env bash
# ci/coverage.sh BUILD OUTDIR — line, function and branch coverage of the fast tests, and the
# floors CI enforces (docs/development.md "Coverage").
# Called by `make coverage` as `ci/coverage.sh build-cov build/coverage` after
# building BUILD with COVERAGE=1 (gcc --coverage -O0). Steps: reset the counters,
# run the fast tests (ci/run-tests.sh BUILD --fast) with a fixed seed (DPCERT_TEST_SEED,
# default 1) and a fixed number of command-line fuzzer runs (CLI_FUZZ_MAX_RUNS, default 600),
# so that two runs measure the same; then the allocation-failure sweep FAULT_SWEEP (default
# "reference train1 refdpzo compare account audit": common/tests/fault_alloc_all_slow.sh over
# every allocation of those runs, about 40 s here; traindpzo and plan are swept by the fast
# fault_alloc_sweep.sh; empty skips it); capture with lcov (branches
# included), keep the product code only (drop system headers and libraries, /usr/*,
# and the tests, benches and fuzz drivers themselves), write the HTML report with
# genhtml into OUTDIR, and print one line:
#   coverage: lines X% (a/b), functions Y%, branches Z% (c/d)
# Floors (the one place they are set; raise them as they are met): lines >= MIN_LINES,
# branches >= MIN_BRANCHES; COVERAGE_MIN_LINES / COVERAGE_MIN_BRANCHES override them
# (0 disables). Measured when set (docs/development.md "CI and coverage"): lines 95.7%, branches
# 77.9%; each floor is that minus 0.5 points (the runs are deterministic: fixed seed and fuzzer
# run count; what varies is timing, signals and thread interleaving), rounded down to a whole
# percent. Issue 29 asks branches >= 85%: not met; the floor is a ratchet until it is (most untaken
# sides are error propagation: DP_TRY chains and allocation checks, reached only by injected
# faults or failing backends). COVERAGE_FILTER=REGEX restricts the tests (passed to
# run-tests.sh --filter; the floors are then not checked: a subset is not the measure).
# Exit status: 2 for bad usage or missing lcov, 1 when a test failed or a floor is not
# met (the report is written either way), 0 otherwise.
set -u
MIN_LINES=${COVERAGE_MIN_LINES:-95}
MIN_BRANCHES=${COVERAGE_MIN_BRANCHES:-77}
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
export DPCERT_TEST_SEED=${DPCERT_TEST_SEED:-1}
export CLI_FUZZ_MAX_RUNS=${CLI_FUZZ_MAX_RUNS:-600} CLI_FUZZ_SECONDS=${CLI_FUZZ_SECONDS:-600}
args=("$BUILD" --fast)
[ -n "${COVERAGE_FILTER:-}" ] && args+=(--filter "$COVERAGE_FILTER")
"$ROOT/ci/run-tests.sh" "${args[@]}"
test_rc=$?
SWEEP=${FAULT_SWEEP-reference train1 refdpzo compare account audit}
if [ -z "${COVERAGE_FILTER:-}" ] && [ -n "$SWEEP" ]; then
  echo "coverage: allocation-failure sweep over every allocation of: $SWEEP"
  FAULT_ONLY=$SWEEP "$ROOT/ci/run-tests.sh" "$BUILD" --filter '^fault_alloc_all_slow\.sh$' || test_rc=1
fi

BR=(--rc lcov_branch_coverage=1)
if ! lcov --quiet "${BR[@]}" --capture --directory "$BUILD" --base-directory "$ROOT" --output-file "$INFO.raw" >>"$LOG" 2>&1; then
  echo "coverage: lcov --capture failed (see $LOG)" >&2; tail -n 20 "$LOG" >&2; exit 2
fi
if ! lcov --quiet "${BR[@]}" --remove "$INFO.raw" '/usr/*' '*/tests/*' '*/bench/*' '*/fuzz/*' --output-file "$INFO" >>"$LOG" 2>&1; then
  echo "coverage: lcov --remove failed (see $LOG)" >&2; tail -n 20 "$LOG" >&2; exit 2
fi
if ! genhtml --quiet --branch-coverage --title "dpcert fast tests" --output-directory "$OUT" "$INFO" >>"$LOG" 2>&1; then
  echo "coverage: genhtml failed (see $LOG)" >&2; tail -n 20 "$LOG" >&2; exit 2
fi
summary=$(lcov "${BR[@]}" --summary "$INFO" 2>&1)
# lcov prints e.g. "  lines......: 85.3% (1234 of 1446 lines)", "  functions..: 90.1% (100 of 111 functions)"
# and "  branches...: 70.2% (700 of 997 branches)"
lines=$(printf '%s\n' "$summary" | sed -n 's/^ *lines\.*: *\([0-9.]*%\) (\([0-9]*\) of \([0-9]*\) lines).*/\1 (\2\/\3)/p')
funcs=$(printf '%s\n' "$summary" | sed -n 's/^ *functions\.*: *\([0-9.]*%\).*/\1/p')
branches=$(printf '%s\n' "$summary" | sed -n 's/^ *branches\.*: *\([0-9.]*%\) (\([0-9]*\) of \([0-9]*\) branches).*/\1 (\2\/\3)/p')
if [ -z "$lines" ] || [ -z "$branches" ]; then
  echo "coverage: cannot read lcov's summary:" >&2; printf '%s\n' "$summary" >&2; exit 2
fi
echo "HTML report: $OUT/index.html"
echo "coverage: lines $lines, functions ${funcs:-n/a}, branches $branches"
rc=$test_rc
[ "$rc" = 0 ] || echo "coverage: the test run failed (exit $rc)" >&2
if [ -n "${COVERAGE_FILTER:-}" ]; then
  echo "coverage: floors not checked (COVERAGE_FILTER restricts the tests)"
else
  # below_floor NAME VALUE% FLOOR: 0 when VALUE < FLOOR
  below_floor() { awk -v v="${2%\%*}" -v f="$3" 'BEGIN { exit !(v + 0 < f + 0) }'; }
  for m in "lines ${lines%% *} $MIN_LINES" "branches ${branches%% *} $MIN_BRANCHES"; do
    set -- $m
    if below_floor "$@"; then echo "coverage: $1 $2 below the floor $3% (ci/coverage.sh)" >&2; rc=1
    else echo "coverage: $1 $2 meets the floor $3%"; fi
  done
fi
[ "$rc" = 0 ] || exit 1
exit 0

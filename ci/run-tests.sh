#!/usr/bin/env bash
# ci/run-tests.sh BUILD [--fast|--gpu] [--filter REGEX]
# Runs every test program ($BUILD/tests/*) and test script (<module>/tests/*.sh).
# Exit status of a test: 0 pass, 77 skipped (it needs what this machine lacks),
# anything else (or a timeout) fail. Logs go to $BUILD/test-logs/NAME.log.
# --fast leaves out tests whose name contains "_slow"; --gpu runs only tests whose
# name contains "gpu". JOBS (default: number of cores) tests run at once.
# Ends with the line "N passed, N failed, N skipped"; exits 1 if any failed.
set -u
BUILD=${1:?usage: ci/run-tests.sh BUILD [--fast|--gpu] [--filter REGEX]}
shift
MODE=all; FILTER=""
while [ $# -gt 0 ]; do
  case $1 in
    --fast) MODE=fast ;; --gpu) MODE=gpu ;;
    --filter) FILTER=$2; shift ;;
    *) echo "run-tests: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
export DPCERT="$BUILD/dpcert" DPCERT_BUILD="$BUILD" DPCERT_ROOT="$ROOT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# More ranks than cores (4 ranks on a 2-core CI machine): ranks waiting in MPI yield the
# core instead of spinning, or an oversubscribed run can take minutes instead of seconds.
export OMPI_MCA_mpi_yield_when_idle=1
# Sanitizer builds: leaks in third-party runtimes are suppressed (ci/lsan.supp); any
# UBSan report is fatal.
export LSAN_OPTIONS="suppressions=$ROOT/ci/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export ASAN_OPTIONS="detect_odr_violation=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
TIMEOUT=${TEST_TIMEOUT:-900}
LOGS=$BUILD/test-logs
mkdir -p "$LOGS" "$BUILD/test-tmp"

tests=()
for t in "$BUILD"/tests/*; do [ -x "$t" ] && tests+=("$t"); done
for t in "$ROOT"/*/tests/*.sh; do [ -f "$t" ] && tests+=("$t"); done
sel=()
for t in "${tests[@]}"; do
  n=$(basename "$t")
  case $MODE in
    fast) [[ $n == *_slow* ]] && continue ;;
    gpu) [[ $n == *gpu* ]] || continue ;;
  esac
  [ -n "$FILTER" ] && ! [[ $n =~ $FILTER ]] && continue
  sel+=("$t")
done

run_one() { # path -> writes $LOGS/name.status
  local t=$1 n; n=$(basename "$t")
  local start end rc
  start=$(date +%s.%N)
  local tmp; tmp=$(mktemp -d "$BUILD/test-tmp/$n.XXXXXX")
  if [[ $t == *.sh ]]; then
    (cd "$tmp" && TMPDIR="$tmp" timeout "$TIMEOUT" bash "$t") >"$LOGS/$n.log" 2>&1; rc=$?
  else
    (cd "$tmp" && TMPDIR="$tmp" timeout "$TIMEOUT" "$t") >"$LOGS/$n.log" 2>&1; rc=$?
  fi
  end=$(date +%s.%N)
  rm -rf "$tmp"
  printf "%s %s\n" "$rc" "$(awk -v a="$start" -v b="$end" "BEGIN{print b-a}")" > "$LOGS/$n.status"
}

pass=0; fail=0; skip=0; failed_names=()
report() { # name
  local n=$1 rc secs
  read -r rc secs < "$LOGS/$n.status"
  if [ "$rc" = 0 ]; then pass=$((pass+1)); printf 'PASS  %-48s %7.2fs\n' "$n" "$secs"
  elif [ "$rc" = 77 ]; then skip=$((skip+1)); printf 'SKIP  %-48s %7.2fs  (%s)\n' "$n" "$secs" "$(grep -m1 -i 'skip' "$LOGS/$n.log" | cut -c1-60)"
  else
    fail=$((fail+1)); failed_names+=("$n")
    [ "$rc" = 124 ] && rc="timeout after ${TIMEOUT}s"
    printf 'FAIL  %-48s %7.2fs  (exit %s)\n' "$n" "$secs" "$rc"
    sed 's/^/      | /' "$LOGS/$n.log" | tail -n 25
  fi
}

echo "running ${#sel[@]} tests ($MODE, $JOBS at a time); logs in $LOGS"
running=()
for t in "${sel[@]}"; do
  rm -f "$LOGS/$(basename "$t").status"
  run_one "$t" &
  running+=("$!:$(basename "$t")")
  while [ "${#running[@]}" -ge "$JOBS" ]; do
    wait -n 2>/dev/null || true
    keep=()
    for r in "${running[@]}"; do
      if kill -0 "${r%%:*}" 2>/dev/null; then keep+=("$r"); else wait "${r%%:*}" 2>/dev/null; report "${r#*:}"; fi
    done
    running=("${keep[@]}")
  done
done
for r in "${running[@]}"; do wait "${r%%:*}" 2>/dev/null; report "${r#*:}"; done

if [ "$fail" -gt 0 ]; then echo "failed: ${failed_names[*]}"; fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]

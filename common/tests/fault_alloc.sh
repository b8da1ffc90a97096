#!/usr/bin/env bash
# common/tests/fault_alloc.sh — allocation-failure injection (issue 29), bounded for `make test`:
# for each representative run of common/tests/fault_lib.bash (reference step, engine step at 2
# ranks, compare, certify of one vector, account, audit-accounting) the undisturbed run counts
# its allocations K (DPCERT_ALLOC_COUNT=1, common/alloc.h); then DPCERT_FAIL_ALLOC=N fails the
# N-th allocation for FAULT_SAMPLES (default 24) values of N in [1, K] — always 1 and K, the rest
# drawn with a printed seed (DPCERT_TEST_SEED sets it) — and DPCERT_FAIL_ALLOC=N+ (that one and
# every later allocation: the error paths must not need memory) for a quarter as many. Each run
# must end with exit 3 and "out of memory", no crash or sanitizer report (the sanitizer pass
# runs this under ASan+UBSan+LSan: a leak fails it), and no partial output file. Control: N =
# K + 1 fails nothing, so the run ends as the undisturbed one did. Every N of every run:
# common/tests/fault_alloc_all_slow.sh. Deterministic given the seed (the failing allocation is
# chosen, not random); a finding is a defect, never noise.
. "${DPCERT_ROOT:?}/common/tests/fault_lib.bash"
seed=${DPCERT_TEST_SEED:-$(( $(date +%s) % 100000 ))}
SAMPLES=${FAULT_SAMPLES:-24}
echo "fault_alloc: seed $seed (DPCERT_TEST_SEED=$seed reproduces), $SAMPLES samples per run"
RANDOM=$seed
fault_judge_selftest
fault_prepare || { echo "FAIL: preparing the compare inputs"; exit 1; }
t0=$SECONDS
for s in $FAULT_SCENARIOS; do
  fault_available "$s" || { echo "skip $s (mpirun not found)"; continue; }
  fault_baseline "$s"
  check "$s: undisturbed run counts its allocations (K=$K, exit $RC0)" [ "$K" -gt 0 ]
  fault_run "$s" "$WORK/run" DPCERT_FAIL_ALLOC=$((K + 1))
  check "$s: control N = K + 1 fails nothing (exit $RC, want $RC0)" [ "$RC" = "$RC0" ]
  n_bad=0; n_runs=0
  for spec in $(fault_samples "$K" "$SAMPLES") $(fault_samples "$K" $((SAMPLES / 4)) | sed 's/$/+/'); do
    fault_run "$s" "$WORK/run" DPCERT_FAIL_ALLOC="$spec"
    why=$(fault_judge "$s" "$WORK/run" 'out of memory')
    n_runs=$((n_runs + 1))
    if [ -n "$why" ]; then bad "$s: DPCERT_FAIL_ALLOC=$spec: $why"; n_bad=$((n_bad + 1)); fi
  done
  [ "$n_bad" = 0 ] && ok "$s: $n_runs injected allocation failures, each exit 3 with a message and no partial file"
done
echo "fault_alloc: $((SECONDS - t0)) s; $checks checks, $fails failed (seed $seed)"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

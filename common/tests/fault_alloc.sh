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
# SAMPLES one-shot failures and a quarter as many sticky ones (N+), always with 1 and K
sampled() { fault_samples "$1" "$SAMPLES"; fault_samples "$1" $((SAMPLES / 4)) +; }
t0=$SECONDS
fault_alloc_loop sampled
echo "fault_alloc: $((SECONDS - t0)) s; $checks checks, $fails failed (seed $seed)"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

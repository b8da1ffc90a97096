#!/usr/bin/env bash
# common/tests/fault_alloc_all_slow.sh — every N: the allocation-failure loop of
# common/tests/fault_alloc.sh over every allocation of each representative run (one-shot
# DPCERT_FAIL_ALLOC=N), and the sticky form N+ every FAULT_STICKY_STRIDE-th (default 7). certify
# of one vector makes about 21,000 allocations at 0.5 s a run, so it is strided too:
# FAULT_CERTIFY_STRIDE (default 41, about 520 runs; 1 runs all of them, about 3 hours on the
# 2-core machine). Same checks as fault_alloc.sh; deterministic (no sampling).
. "${DPCERT_ROOT:?}/common/tests/fault_lib.bash"
fault_prepare || { echo "FAIL: preparing the compare inputs"; exit 1; }
t0=$SECONDS
for s in $FAULT_SCENARIOS; do
  fault_available "$s" || { echo "skip $s (mpirun not found)"; continue; }
  fault_baseline "$s"
  check "$s: undisturbed run counts its allocations (K=$K)" [ "$K" -gt 0 ]
  stride=1; [ "$s" = certify ] && stride=${FAULT_CERTIFY_STRIDE:-41}
  sstride=$((stride * ${FAULT_STICKY_STRIDE:-7}))
  n_bad=0; n_runs=0
  for ((n = 1; n <= K; n++)); do
    specs=()
    (( (n - 1) % stride == 0 || n == K )) && specs+=("$n")
    (( (n - 1) % sstride == 0 )) && specs+=("$n+")
    for spec in "${specs[@]}"; do
      fault_run "$s" "$WORK/run" DPCERT_FAIL_ALLOC="$spec"
      why=$(fault_judge "$s" "$WORK/run" 'out of memory')
      n_runs=$((n_runs + 1))
      if [ -n "$why" ]; then bad "$s: DPCERT_FAIL_ALLOC=$spec: $why"; n_bad=$((n_bad + 1)); fi
    done
  done
  [ "$n_bad" = 0 ] && ok "$s: $n_runs injected allocation failures (K=$K, stride $stride), each exit 3 with a message"
  echo "  $s: $((SECONDS - t0)) s so far"
done
echo "fault_alloc_all: $((SECONDS - t0)) s; $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

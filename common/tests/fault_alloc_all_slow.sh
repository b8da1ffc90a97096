#!/usr/bin/env bash
# common/tests/fault_alloc_all_slow.sh — every N: the allocation-failure loop of
# common/tests/fault_alloc.sh over every allocation of each representative run (one-shot
# DPCERT_FAIL_ALLOC=N), and the sticky form N+ every FAULT_STICKY_STRIDE-th (default 7). certify
# of one vector makes about 21,000 allocations at 0.5 s a run, so it is strided too:
# FAULT_CERTIFY_STRIDE (default 41, about 520 runs; 1 runs all of them, about 3 hours on the
# 2-core machine). Same checks as fault_alloc.sh; deterministic (no sampling).
. "${DPCERT_ROOT:?}/common/tests/fault_lib.bash"
t0=$SECONDS
fault_alloc_loop fault_every
echo "fault_alloc_all: $((SECONDS - t0)) s; $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

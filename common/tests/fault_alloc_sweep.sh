#!/usr/bin/env bash
# common/tests/fault_alloc_sweep.sh — every allocation of the cheap representative runs of
# common/tests/fault_lib.bash (default FAULT_ONLY="traindpzo plan": the engine's DP-ZO step,
# about 410 allocations, and plan --search, about 30), one-shot DPCERT_FAIL_ALLOC=N for every
# N and the sticky N+ every 7th; each run must end with exit 3 and "out of memory", no crash or
# sanitizer report, no partial file (fault_judge). Regression for two findings of the sweep:
# train dpzo crashed (SIGSEGV) when the step's reduction buffer could not be allocated, and
# plan ignored a failed allocation (exit 0 with a silently smaller projected work and CP
# traffic). Deterministic; a few seconds (-O2), about a minute under ASan. The sampled loop over
# the other runs is fault_alloc.sh; every N of every run, fault_alloc_all_slow.sh.
FAULT_ONLY=${FAULT_ONLY:-traindpzo plan}
. "${DPCERT_ROOT:?}/common/tests/fault_lib.bash"
t0=$SECONDS
fault_alloc_loop fault_every
echo "fault_alloc_sweep: $((SECONDS - t0)) s; $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

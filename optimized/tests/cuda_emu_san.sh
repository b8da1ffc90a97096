#!/usr/bin/env bash
# optimized/tests/cuda_emu_san.sh — the CUDA kernels on the emulation under AddressSanitizer
# (+UBSan) and ThreadSanitizer, standing in for compute-sanitizer's memcheck and racecheck
# (docs/cuda.md "The emulation"): every emulated test program (the GPU tests
# test_cuda_gpu_{kernels,dp,dev,backend}.c and the emulation's own test_cuda_emu_*.cu) built in
# $DPCERT_BUILD/emu-asan and $DPCERT_BUILD/emu-tsan must pass with no sanitizer report (ASan
# aborts on its first report; TSan makes the program exit 66). Their negative controls
# (a removed barrier must be a TSan race, an off-by-one grid an ASan report) are in
# cuda_emu_negative.sh. Skips (77) in the SANITIZE=1 build, whose emulated programs are
# ASan builds already (run directly from $DPCERT_BUILD/tests).
set -u
B=${DPCERT_BUILD:?}
if [ ! -d "$B/emu-asan/tests" ] || [ ! -d "$B/emu-tsan/tests" ]; then
  echo "SKIP: no emu-asan / emu-tsan builds in $B (the SANITIZE=1 build instruments the emulation itself)"; exit 77
fi
export TSAN_OPTIONS="halt_on_error=0:exitcode=66${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
fail=0 n=0
for v in emu-asan emu-tsan; do
  for t in "$B/$v"/tests/optimized_test_cuda_emu_*; do
    [ -x "$t" ] || continue
    name="$v/$(basename "$t")"
    log="$(echo "$name" | tr / _).log"
    t0=$(date +%s.%N)
    # one OS thread per process is enough for the checks (TSan uses its own four workers)
    CU_EMU_THREADS=2 timeout 600 "$t" >"$log" 2>&1; rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    n=$((n + 1))
    if [ $rc -eq 0 ] && ! grep -q -E 'ERROR: AddressSanitizer|WARNING: ThreadSanitizer|runtime error:' "$log"; then
      echo "PASS  $name (${dt}s): $(tail -1 "$log")"
    else
      echo "FAIL  $name exited $rc (${dt}s)"; grep -m3 -E 'SUMMARY|ERROR|FAIL' "$log"; tail -5 "$log"; fail=1
    fi
  done
done
[ $n -ge 8 ] || { echo "FAIL: only $n sanitizer programs found (expected the GPU tests and the emulation tests in both builds)"; fail=1; }
[ $fail = 0 ] && echo "all $n sanitizer runs clean"
exit $fail

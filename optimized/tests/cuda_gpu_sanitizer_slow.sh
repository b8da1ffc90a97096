#!/usr/bin/env bash
# optimized/tests/cuda_gpu_sanitizer_slow.sh — compute-sanitizer memcheck and racecheck
# on the DP-kernel and model-kernel GPU tests (they must report 0 errors and still pass).
# Exits 77 without a GPU or without compute-sanitizer.
set -u
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU (nvidia-smi lists none)"; exit 77
fi
[ -x "$CS" ] || { echo "SKIP: compute-sanitizer not found"; exit 77; }
rc=0
for t in optimized_test_cuda_gpu_dp optimized_test_cuda_gpu_dev optimized_test_cuda_gpu_kernels; do
  bin="$DPCERT_BUILD/tests/$t"
  [ -x "$bin" ] || { echo "FAIL: $bin not built"; rc=1; continue; }
  for tool in memcheck racecheck; do
    echo "==> compute-sanitizer --tool $tool $t"
    "$CS" --tool "$tool" --error-exitcode 99 "$bin"; r=$?
    if [ $r != 0 ]; then echo "FAIL: $tool on $t exited $r"; rc=1; fi
  done
done
exit $rc

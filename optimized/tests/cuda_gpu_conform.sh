#!/usr/bin/env bash
# optimized/tests/cuda_gpu_conform.sh — the conformance gate of the CUDA backend:
# `dpcert conform --suite ci --backend cuda` (every case the cuda backend runs must pass
# against the reference under the derived tolerances, f64 and f32 cases alike).
# Exits 77 without a GPU.
set -u
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU (nvidia-smi lists none)"; exit 77
fi
if ! "$DPCERT" version | grep -q cuda; then
  echo "SKIP: dpcert built without the cuda backend"; exit 77
fi
nvidia-smi -L
out=$("$DPCERT" conform --suite ci --backend cuda --report "${TMPDIR:-/tmp}/conform-cuda" 2>&1); rc=$?
echo "$out"
# a run where nothing was executed on the GPU is not a pass
if ! echo "$out" | grep -qiE 'pass'; then echo "FAIL: no case ran on the cuda backend"; exit 1; fi
exit $rc

#!/usr/bin/env bash
# optimized/tests/cuda_emu_select.sh — the emulated CUDA backend is selected only by name and
# always says what it is (docs/cuda.md "Runtime selection"):
#   - `dpcert version` lists cuda-emu as the CPU emulation;
#   - `train --backend cuda-emu` runs (plugin libdpcert_cuda_emu.so next to the binary) and
#     its exports' metadata say backend cuda-emu;
#   - --backend cuda never takes the emulation: the binary alone in a directory with the
#     emulation offered as libdpcert_cuda.so, or through DPCERT_CUDA_PLUGIN, exits 3
#     "not supported: ... is the CPU emulation";
#   - --backend cuda-emu without the plugin: exit 3 "not built into this binary"; through
#     DPCERT_CUDA_EMU_PLUGIN it runs; offered a GPU build (libdpcert_cuda.so, when built):
#     exit 3 "is not the emulation".
set -u
[ -x "${DPCERT:-}" ] || { echo "SKIP: no dpcert binary"; exit 77; }
B=${DPCERT_BUILD:?}
EMU="$B/libdpcert_cuda_emu.so"
[ -f "$EMU" ] || { echo "FAIL: $EMU not built (make builds it everywhere)"; exit 1; }
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
TRAIN=(dpsgd --impl optimized --model mlp --in 5 --hidden 4 --classes 3 --dataset-size 16 --q 0.4 --clip 1 --sigma 1
       --seed 3 --noise-key 5 --steps 1)
export CU_EMU_THREADS=1
"$DPCERT" version >version.txt 2>&1
grep -q "cuda-emu" version.txt && grep -q "not a GPU" version.txt && pass "dpcert version: $(grep cuda-emu version.txt | tail -1)" \
  || { bad "dpcert version does not list cuda-emu"; cat version.txt; }
if "$DPCERT" train "${TRAIN[@]}" --backend cuda-emu --export exp >emu.log 2>&1; then
  if grep -aq '"backend":"cuda-emu"' exp/step-000001.safetensors; then pass "train --backend cuda-emu: exports say backend cuda-emu"
  else bad "the export metadata do not say cuda-emu"; fi
else bad "train --backend cuda-emu failed"; tail -5 emu.log; fi
# a binary alone in a directory
mkdir -p alone && cp "$DPCERT" alone/dpcert
ln -sf "$EMU" alone/libdpcert_cuda.so
alone/dpcert train "${TRAIN[@]}" --backend cuda >cuda-next.log 2>&1; rc=$?
if [ $rc -eq 3 ] && grep -q "not supported: backend 'cuda': plugin .* is the CPU emulation" cuda-next.log; then
  pass "--backend cuda refuses the emulation offered as libdpcert_cuda.so (exit 3)"
else bad "--backend cuda with the emulation next to it: exit $rc"; tail -3 cuda-next.log; fi
rm -f alone/libdpcert_cuda.so
DPCERT_CUDA_PLUGIN="$EMU" alone/dpcert train "${TRAIN[@]}" --backend cuda >cuda-env.log 2>&1; rc=$?
if [ $rc -eq 3 ] && grep -q "is the CPU emulation" cuda-env.log; then pass "--backend cuda refuses the emulation through DPCERT_CUDA_PLUGIN"
else bad "--backend cuda with DPCERT_CUDA_PLUGIN=emulation: exit $rc"; tail -3 cuda-env.log; fi
alone/dpcert train "${TRAIN[@]}" --backend cuda-emu >emu-none.log 2>&1; rc=$?
if [ $rc -eq 3 ] && grep -q "not supported: backend 'cuda-emu' is not built into this binary" emu-none.log; then
  pass "--backend cuda-emu without the plugin: exit 3, not built"
else bad "--backend cuda-emu without the plugin: exit $rc"; tail -3 emu-none.log; fi
if DPCERT_CUDA_EMU_PLUGIN="$EMU" alone/dpcert train "${TRAIN[@]}" --backend cuda-emu >emu-env.log 2>&1; then
  pass "--backend cuda-emu through DPCERT_CUDA_EMU_PLUGIN"
else bad "--backend cuda-emu through DPCERT_CUDA_EMU_PLUGIN failed"; tail -3 emu-env.log; fi
if [ -f "$B/libdpcert_cuda.so" ]; then
  DPCERT_CUDA_EMU_PLUGIN="$B/libdpcert_cuda.so" alone/dpcert train "${TRAIN[@]}" --backend cuda-emu >emu-gpu.log 2>&1; rc=$?
  if [ $rc -eq 3 ] && grep -q "is not the emulation" emu-gpu.log; then pass "--backend cuda-emu refuses the GPU build"
  else bad "--backend cuda-emu with the GPU plugin: exit $rc"; tail -3 emu-gpu.log; fi
else echo "NOTE: no GPU plugin built here: the cuda-emu-refuses-GPU-build check did not run"; fi
[ $fail = 0 ] && echo "all backend-selection checks passed"
exit $fail

#!/usr/bin/env bash
# optimized/tests/cuda_emu_comm.sh — the CUDA backend's NCCL paths on 2 and 4 ranks of the
# emulation (NCCL over MPI; docs/cuda.md "The emulation") and the regression tests of the
# known multi-rank defects (docs/cuda.md "Known defects, fixed"):
#   - every collective of the C API and of the operation table, exact, at 2 and 4 ranks;
#     process groups (color rank % 2) at 1, 2, 3 and 4 ranks (3: groups of 2 and of 1):
#     every collective on a group, the engine's ring of async recv + send, the byte counters;
#   - the emulated NCCL's point-to-point semantics: recv then send to each other outside an
#     NCCL group must not complete (a GPU hangs: the negative control of the backend's
#     batching), fused in a group they complete;
#   - NCCL id creation failing on rank 0 (CU_EMU_FAULT=ncclGetUniqueId): every rank fails
#     with a message within the bound (before the fix rank 1 waited forever);
#   - two ranks on one device (CU_EMU_DEVICES=1): every rank refuses with
#     DP_ERR_NOT_SUPPORTED before ncclCommInitRank (no "Duplicate GPU" from NCCL), and
#     `dpcert train --backend cuda-emu` exits 3 "not supported" naming the cause;
#   - the collective timeout: a rank 4 s late makes the other fail after 1 s naming the
#     collective, and nothing hangs.
# Needs mpirun (else 77) and the emulated test program (always built by make).
set -u
source "$(dirname "$0")/mpi_lib.bash"
BIN="$DPCERT_BUILD/tests/optimized_test_cuda_emu_comm"
[ -x "$BIN" ] || { echo "SKIP: $BIN not built"; exit 77; }
run() { # name expect-rc env-assignments... -- mpirun args...
  local name=$1 want=$2; shift 2
  local envs=() xs=()
  while [ "$1" != "--" ]; do envs+=("$1"); xs+=(-x "${1%%=*}"); shift; done; shift
  env "${envs[@]}" timeout 60 mpirun -x ASAN_OPTIONS "${xs[@]}" "$@" >"$name.log" 2>&1; local rc=$?
  if [ $rc -eq 124 ]; then bad "$name: hung (killed after 60 s)"; tail -5 "$name.log"; return 1; fi
  if [ "$want" = 0 ] && [ $rc -ne 0 ]; then bad "$name: exit $rc"; tail -15 "$name.log"; return 1; fi
  if [ "$want" != 0 ] && [ $rc -ne "$want" ]; then bad "$name: exit $rc (expected $want)"; tail -15 "$name.log"; return 1; fi
  return 0
}
for n in 2 4; do
  run "collectives-$n" 0 CU_EMU_THREADS=1 -- -n $n "$BIN" && pass "collectives and operation table on $n ranks"
done
run groups-3 0 CU_EMU_THREADS=1 -- -n 3 "$BIN" groups && pass "process groups on 3 ranks (groups of 2 and 1)"
if run p2pcross 0 CU_EMU_THREADS=1 CU_EMU_WAIT_TIMEOUT=2 -- -n 2 "$BIN" p2pcross; then
  if [ "$(grep -c 'ungrouped recv/send: cudaErrorLaunchTimeout' p2pcross.log)" = 2 ]; then
    pass "emulated NCCL: ungrouped recv + send to each other hang (timed out on both ranks), grouped they complete"
  else bad "p2pcross: the ungrouped exchange did not time out on both ranks"; cat p2pcross.log; fi
fi
if run idfail 0 CU_EMU_FAULT=ncclGetUniqueId -- -n 2 "$BIN" idfail; then
  if grep -q "rank 1: rank 0 could not create the NCCL unique id" idfail.log; then pass "NCCL id failure on rank 0 reaches rank 1"
  else bad "idfail: rank 1 did not name the cause"; cat idfail.log; fi
fi
if run overfull 0 CU_EMU_DEVICES=1 -- -n 2 "$BIN" overfull; then
  if grep -q "Duplicate GPU" overfull.log; then bad "overfull: NCCL was reached (Duplicate GPU)"; cat overfull.log
  else pass "2 ranks on 1 device: NOT_SUPPORTED on every rank before NCCL"; fi
fi
if run train-overfull 3 CU_EMU_DEVICES=1 -- -n 2 "${TRAIN[@]}" dpsgd --impl optimized --backend cuda-emu --model mlp \
     --in 6 --hidden 5 --classes 3 --dataset-size 20 --q 0.3 --clip 1 --sigma 1 --seed 4 --noise-key 9 --steps 1; then
  if grep -q "not supported: .*share 1 CUDA device" train-overfull.log && ! grep -q "Duplicate GPU" train-overfull.log; then
    pass "dpcert train --backend cuda-emu on 2 ranks and 1 device: exit 3, not supported, the reason named"
  else bad "train-overfull: wrong message"; cat train-overfull.log; fi
fi
t0=$(date +%s)
if run timeout 0 -- -n 2 "$BIN" timeout; then
  pass "collective timeout: $(grep -o "collective 'allreduce_sum' timed out[^(]*" timeout.log | head -1) ($(( $(date +%s) - t0 )) s in all)"
fi
[ $fail = 0 ] && echo "all cuda-emu communicator checks passed"
exit $fail

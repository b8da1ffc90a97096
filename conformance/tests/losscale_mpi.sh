#!/usr/bin/env bash
# conformance/tests/losscale_mpi.sh — --loss-scale on 2 MPI ranks (docs/precision.md "Loss
# scaling"): the correct pipeline static:1024 at fp16 under replicated and zero3 passes compare
# and the losscale check against the f64 reference; the injected over-shrink FAILs with its
# diagnosis; dynamic scaling's skip decision is the same on both ranks (the run completes, the
# step log and the export show the skip of step 3, the check FAILs it).
set -u
D=${DPCERT:?DPCERT not set}
source "${DPCERT_ROOT:?}/optimized/tests/mpi_lib.bash"
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
A="--model mlp --dataset-size 64 --q 0.25 --steps 3 --clip 1 --sigma 1 --seed 1 --noise-key 2"
"$D" reference dpsgd $A --export ref >/dev/null || { echo "FAIL reference"; exit 1; }
run() { timeout 300 mpirun -n 2 "${TRAIN[@]}" dpsgd --impl optimized --backend host "$@"; }
for z in replicated zero3; do
  rm -rf c; run --precision fp16 $A --sharding $z --loss-scale static:1024 --export c >/dev/null 2>err.txt \
    || { bad "$z: train failed: $(head -c 300 err.txt)"; continue; }
  if "$D" compare ref c --precision fp16 >/dev/null && "$D" losscale --check ref c --dtype fp16 >/dev/null; then
    pass "2 ranks $z fp16 static:1024: compare and losscale PASS"; else bad "2 ranks $z fp16 static:1024"; fi
done
rm -rf c; DPCERT_TEST_INJECT=1 run --precision fp16 $A --loss-scale static:1024 --inject-bug ls-unscale-after-clip --export c >/dev/null 2>&1
"$D" losscale --check ref c --dtype fp16 >out.txt; rc=$?
if [ $rc -eq 1 ] && grep -q "loss scale applied after clipping, factor 2^10" out.txt; then pass "2 ranks: injected over-shrink FAILs"
else bad "2 ranks: injected over-shrink: exit $rc $(tail -1 out.txt)"; fi
rm -rf c; run --dtype f32 $A --loss-scale dynamic:2^127:1000 --export c >log.txt 2>&1; rc=$?
"$D" losscale --check ref c >out.txt; rc2=$?
if [ $rc -eq 0 ] && grep -q "^step 3 skipped" log.txt && [ $rc2 -eq 1 ] && grep -q "^step-000003.safetensors .*was skipped" out.txt
then pass "2 ranks dynamic: step 3 skipped on both ranks, check FAILs"; else bad "2 ranks dynamic: exit $rc/$rc2 $(tail -2 log.txt)"; fi
exit $fail

#!/usr/bin/env bash
# optimized/tests/mpi_zero.sh — DP-ZeRO on MPI ranks (docs/zero.md):
#   - the ZeRO memory test (test_zero_memory: ledger peaks = the formulas) at N = 2 and 4;
#   - bad layouts exit 2 with a message: --dp N with N != world size, more shards than
#     parameters, --cp 2 with the mlp (no sequence to shard; docs/longshield.md);
#   - --memory-report prints every rank's ledger and byte counters, and zero2's
#     optimizer state per rank is half the replicated one at N = 2;
#   - `train dpsgd --sharding zero3 --dp 4` runs under mpirun -n 4.
# The element-wise agreement with the reference is the conformance cases zero*-ci-* and
# neg-zero-* (conform_ci.sh) and the default/full suites.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.bash"
MEM="$DPCERT_BUILD/tests/optimized_test_zero_memory"
[ -x "$MEM" ] || { echo "SKIP: $MEM not built"; exit 77; }

for r in 2 4; do
  if timeout 120 mpirun -x ASAN_OPTIONS -n $r "$MEM" >mem$r.log 2>&1; then pass "ZeRO memory formulas at N=$r"; grep "adamw f64" mem$r.log
  else bad "ZeRO memory formulas at N=$r"; grep -i "fail" mem$r.log | head -10; fi
done

MLP=(dpsgd --model mlp --in 6 --hidden 7,5 --classes 4 --dataset-size 40 --q 0.3 --steps 1 --clip 0.3 --sigma 0.8)
expect_exit() { # want desc ranks args...
  local want=$1 desc=$2 r=$3; shift 3
  timeout 60 mpirun -x ASAN_OPTIONS -n "$r" "${TRAIN[@]}" "$@" >bad.log 2>&1; local rc=$?
  if [ "$rc" -eq "$want" ] && grep -q -- "$desc" bad.log; then pass "exit $want: $desc"
  else bad "expected exit $want with '$desc', got $rc"; tail -3 bad.log; fi
}
expect_exit 2 "--dp 3 --cp 1" 2 "${MLP[@]}" --dp 3
# an mlp 1-1-2 has 6 parameters: 8 shards are more than the model
expect_exit 2 "8 shards but the model has only 6 parameters" 8 dpsgd --model mlp --in 1 --hidden 1 --classes 2 \
  --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --sharding zero2
# zero3 partitions every tensor: a tensor smaller than the shard count is refused
expect_exit 2 "tensor 'layers.1.bias' has 2 elements, fewer than the 4 shards" 4 dpsgd --model mlp --in 3 --hidden 5 \
  --classes 2 --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --sharding zero3
expect_exit 2 "the mlp has no positions and no attention" 2 "${MLP[@]}" --cp 2
expect_exit 2 "--sharding" 2 "${MLP[@]}" --sharding zero9

# --memory-report: zero2 halves the optimizer state per rank at N = 2 (sgd momentum: P e -> c e)
timeout 60 mpirun -x ASAN_OPTIONS -n 2 "${TRAIN[@]}" "${MLP[@]}" --memory-report >rep.log 2>&1 || { bad "memory report run"; tail -3 rep.log; }
timeout 60 mpirun -x ASAN_OPTIONS -n 2 "${TRAIN[@]}" "${MLP[@]}" --sharding zero2 --memory-report >rep2.log 2>&1 || { bad "zero2 memory report run"; tail -3 rep2.log; }
o1=$(awk '$1 == "rank" && $2 == "1:" && $3 == "optimizer_state" { print $5 }' rep.log)
o2=$(awk '$1 == "rank" && $2 == "1:" && $3 == "optimizer_state" { print $5 }' rep2.log)
rs=$(awk '$1 == "rank" && $2 == "1:" && $3 == "reduce_scatter_sum" { print $4 }' rep2.log)
if [ -n "$o1" ] && [ -n "$o2" ] && [ $((2 * o2)) -ge "$o1" ] && [ $((2 * o2)) -le $((o1 + 16)) ] && [ "${rs:-0}" -ge 1 ]; then
  pass "--memory-report: optimizer state per rank $o1 (replicated) -> $o2 (zero2, N=2), $rs reduce-scatter call(s)"
else bad "--memory-report: optimizer state $o1 -> $o2, reduce-scatter calls '${rs:-}'"; tail -25 rep2.log; fi
# the issue's acceptance run: zero3 on 4 ranks
if timeout 120 mpirun -x ASAN_OPTIONS -n 4 "${TRAIN[@]}" dpsgd --model llama --vocab 13 --dim 8 --layers 2 --heads 2 \
     --ffn 10 --seq 5 --dataset-size 24 --q 0.3 --steps 2 --clip 0.05 --sigma 0.8 --sharding zero3 --dp 4 \
     --memory-report >z3.log 2>&1 && grep -q "rank 3:   gathered_params" z3.log; then
  pass "train dpsgd --sharding zero3 --dp 4 under mpirun -n 4 ($(awk '$2 == "0:" && $3 == "gathered_params" { print "rank 0 gathered parameters peak " $5 " bytes, now " $4 }' z3.log))"
else bad "zero3 --dp 4 run"; tail -5 z3.log; fi
[ $fail = 0 ] && echo "all DP-ZeRO checks passed"
exit $fail

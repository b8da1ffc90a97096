#!/usr/bin/env bash
# optimized/tests/mpi_cp.sh — LongShield context parallelism (docs/longshield.md): the
# layouts --cp refuses exit 2 naming the option, and a --cp 2 run reports its
# reduce-scatter over the CP group in --memory-report. The element-wise agreement with
# the reference is the conformance cases cp-ci-*, cp4-ci-* and neg-cp-* (conform_ci.sh).
set -u
DRV="${DPCERT_BUILD:?}/tests/optimized_test_train_cli"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if [ -n "${DPCERT:-}" ] && "$DPCERT" train --help >/dev/null 2>&1; then TRAIN=("$DPCERT" train)
else TRAIN=("$DRV" --as-dpcert train); fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
LL=(dpsgd --model llama --vocab 11 --dim 8 --layers 1 --heads 2 --ffn 12 --seq 3 --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1)
expect_exit() { # want desc ranks args...
  local want=$1 desc=$2 r=$3; shift 3
  timeout 60 mpirun -x ASAN_OPTIONS -n "$r" "${TRAIN[@]}" "$@" >bad.log 2>&1; local rc=$?
  if [ "$rc" -eq "$want" ] && grep -q -- "$desc" bad.log; then pass "exit $want: $desc"
  else bad "expected exit $want with '$desc', got $rc"; tail -3 bad.log; fi
}
expect_exit 2 "the mlp has no positions and no attention" 2 dpsgd --model mlp --in 3 --hidden 4 --classes 2 \
  --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --cp 2
expect_exit 2 "--cp 4 is larger than --seq 3" 4 "${LL[@]}" --cp 4
expect_exit 2 "the layout needs 2 ranks, but the run has 3" 3 "${LL[@]}" --cp 2
expect_exit 2 "--sharding zero2 is not supported with context parallelism" 2 "${LL[@]}" --cp 2 --sharding zero2
expect_exit 2 "--strategy ghost is not supported with context parallelism" 2 "${LL[@]}" --cp 2 --strategy ghost
expect_exit 3 "--cp-pattern output: the output-stationary pattern is not implemented" 2 "${LL[@]}" --cp 2 --cp-pattern output
expect_exit 2 "--cp-attention and --cp-pattern apply to dpsgd with --cp M > 1" 1 "${LL[@]}" --cp-attention ring
expect_exit 2 "--cp-attention" 2 "${LL[@]}" --cp 2 --cp-attention rings
# the input-stationary reduce-scatter runs over the CP group: rank 1 reports its calls
timeout 60 mpirun -x ASAN_OPTIONS -n 2 "${TRAIN[@]}" "${LL[@]}" --cp 2 --memory-report >rep.log 2>&1 || { bad "--cp 2 run"; tail -3 rep.log; }
rs=$(awk '$1 == "rank" && $2 == "1:" && $3 == "reduce_scatter_sum" { print $4 }' rep.log)
if [ "${rs:-0}" -ge 1 ]; then pass "--cp 2 --memory-report: rank 1 made $rs reduce-scatter call(s)"
else bad "--cp 2 --memory-report: reduce-scatter calls '${rs:-}'"; tail -20 rep.log; fi
[ $fail = 0 ] && echo "all context-parallel layout checks passed"
exit $fail

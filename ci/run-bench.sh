#!/usr/bin/env bash
# ci/run-bench.sh BUILD [--gpu] — runs every benchmark program ($BUILD/bench/*; with --gpu the
# *gpu* ones, without it the others) with the warm-up and iteration counts below (a few minutes
# in all on 2 cores). Each prints the harness's header, one row per configuration and the line
# that reproduces it (docs/benchmarks.md). A program that cannot run here exits 77 (SKIP).
set -u
BUILD=${1:?usage: ci/run-bench.sh BUILD [--gpu]}
MODE=${2:-cpu}
export DPCERT="$BUILD/dpcert" DPCERT_ROOT=$(cd "$(dirname "$0")/.." && pwd)
# the flags of each program under `make bench` (-w warm-up, -n timed iterations, its own)
flags_of() {
  case $1 in
    optimized_bench_strategies) echo "-w 1 -n 3 llama" ;;
    optimized_bench_precision)  echo "-w 1 -n 5" ;;
    optimized_bench_step)       echo "-w 1 -n 3" ;;
    optimized_bench_zero)       echo "-w 1 -n 4" ;;
    optimized_bench_cp)         echo "-w 1 -n 3" ;;
    optimized_bench_ranks)      echo "-w 1 -n 3 --rounds 3" ;;
    optimized_bench_startup)    echo "-w 1 -n 3" ;;
    optimized_bench_plugin)     echo "-w 1 -n 7" ;;
    optimized_bench_cuda_emu)   echo "-w 1 -n 5" ;;
    accountant_bench_accountant) echo "-w 0 -n 3" ;;
    accountant_bench_pld_grid)  echo "-w 0 -n 3" ;;
    optimized_bench_gpu_dp)     echo "-w 3 -n 20" ;;
    optimized_bench_gpu_step)   echo "-w 3 -n 20" ;;
    *) echo "" ;; # its defaults
  esac
}
rc=0; n=0
for b in "$BUILD"/bench/*; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  if [ "$MODE" = --gpu ]; then [[ $name == *gpu* ]] || continue; else [[ $name == *gpu* ]] && continue; fi
  n=$((n+1))
  f=$(flags_of "$name")
  echo "==> $name $f"
  # shellcheck disable=SC2086 # the flags are words
  "$b" $f; r=$?
  [ $r = 0 ] || [ $r = 77 ] || rc=$r
done
[ $n -gt 0 ] || echo "no benchmarks built"
exit $rc

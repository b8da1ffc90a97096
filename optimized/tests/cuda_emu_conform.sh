#!/usr/bin/env bash
# optimized/tests/cuda_emu_conform.sh — the conformance gate of the CUDA backend on the CPU
# emulation: `dpcert conform --suite ci --backend cuda-emu --ranks 1,2,4` (NCCL emulated over
# MPI for 2 and 4 ranks; docs/cuda.md "Conformance on cuda-emu"):
#   - no run FAILs (exit 0), and at every rank count at least one run PASSes;
#   - every run listed in cuda_emu_conform.expected (what the CUDA backend supports today)
#     PASSes, against the reference under the derived tolerances, negative controls caught;
#   - every other run is NOT_SUPPORTED with the reason printed by the candidate (never a pass
#     by omission); a run that newly PASSes is listed (to be added to the expected list);
#   - the reports name the backend cuda-emu for every run.
# The selection: `make test` runs every case at 1 and 2 ranks and, at 4 ranks, the cases
# other than context parallelism plus three representatives of it (CP_R4 below: the ring
# over 4 CP ranks, a 2 x 2 DP x CP layout with zero2, the output pattern and ring
# attention, and a 2 x 2 negative control); `make test-cuda-emu-full`
# (CUDA_EMU_CONFORM_FULL=1) runs everything at 1, 2 and 4 ranks. Expected runs outside the
# selection are not checked (and said so).
set -u
D=${DPCERT:?}
EXP="$(dirname "$0")/cuda_emu_conform.expected"
[ -f "$DPCERT_BUILD/libdpcert_cuda_emu.so" ] || { echo "FAIL: $DPCERT_BUILD/libdpcert_cuda_emu.so not built"; exit 1; }
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1
# ASan build: Open MPI components leak at exit in the ranks (as conform_ci.sh)
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
# one OS thread per emulated device: the ranks share the CI machine's cores
export CU_EMU_THREADS=${CU_EMU_THREADS:-1}
CP_R4='cp4-ring-ci-llama-per-layer-microbatch-T7|cp-zero2-fused-out-ring-ci-llama-per-layer-microbatch-T7|neg-cp-zero3-stale-params'
if [ "${CUDA_EMU_CONFORM_FULL:-0}" = 1 ]; then
  echo "selection: every run at 1, 2 and 4 ranks (CUDA_EMU_CONFORM_FULL=1)"
  "$D" conform --suite ci --backend cuda-emu --ranks 1,2,4 --report rep >conform.txt 2>&1
  rc=$?
else
  # 4 ranks: every case that is not context parallelism (cp*, neg-cp-*), and CP_R4
  r4=$("$D" conform --suite ci --backend cuda-emu --ranks 4 --list 2>/dev/null | sed -n 's/@r4$//p' |
       grep -Ev '^(cp|neg-cp-)' | sed 's/[][\.^$*+?(){}|/]/\\&/g' | paste -sd'|')
  [ -n "$r4" ] || { echo "FAIL: no 4-rank case selected"; exit 1; }
  echo "selection: every run at 1 and 2 ranks; at 4 ranks all but context parallelism, and $CP_R4 (make test-cuda-emu-full: all)"
  { "$D" conform --suite ci --backend cuda-emu --ranks 1,2 --list
    "$D" conform --suite ci --backend cuda-emu --ranks 4 --filter "^($r4|$CP_R4)\$" --list; } 2>/dev/null | sort >sel-runs.txt
  "$D" conform --suite ci --backend cuda-emu --ranks 1,2 --report rep >conform.txt 2>&1
  rc=$?
  "$D" conform --suite ci --backend cuda-emu --ranks 4 --filter "^($r4|$CP_R4)\$" --report rep4 >conform4.txt 2>&1
  rc4=$?
  [ $rc = 0 ] && rc=$rc4
  cat conform4.txt >>conform.txt
  nb4=$(grep -c '"backend": "cuda-emu"' rep4/report.json)
  [ "$nb4" -ge 1 ] || { echo "FAIL: rep4/report.json names no cuda-emu run"; rc=1; }
fi
cat conform.txt
"$D" conform --suite ci --backend cuda-emu --ranks 1,2,4 --list 2>/dev/null | sort >all-runs.txt
[ -f sel-runs.txt ] || cp all-runs.txt sel-runs.txt
fail=0
[ $rc -eq 0 ] || { echo "FAIL: conform exited $rc"; fail=1; }
awk '$1 ~ /^\[[0-9]+\/[0-9]+\]$/ {print $2, $3}' conform.txt | sort >runs.txt
for r in 1 2 4; do
  n=$(awk -v r="@r$r" '$2 == "PASS" && index($1, r) {c++} END {print c + 0}' runs.txt)
  [ "$n" -gt 0 ] || { echo "FAIL: no run passed at $r rank(s)"; fail=1; }
  echo "ranks $r: $n PASS, $(awk -v r="@r$r" '$2 == "NOT_SUPPORTED" && index($1, r) {c++} END {print c + 0}' runs.txt) NOT_SUPPORTED"
done
skipped=0
while read -r run; do
  case $run in "#"*|"") continue ;; esac
  st=$(awk -v r="$run" '$1 == r {print $2}' runs.txt)
  if [ -z "$st" ] && grep -qx "$run" all-runs.txt && ! grep -qx "$run" sel-runs.txt; then
    skipped=$((skipped + 1)); continue; fi
  case $st in
    PASS|MARGINAL) ;;
    "") echo "FAIL: expected run $run did not run"; fail=1 ;;
    *) echo "FAIL: $run is $st on cuda-emu (expected PASS)"; fail=1 ;;
  esac
done <"$EXP"
[ "$skipped" = 0 ] || echo "NOTE: $skipped expected runs are outside this selection (make test-cuda-emu-full runs them)"
awk '$2 == "PASS" || $2 == "MARGINAL" {print $1}' runs.txt | while read -r run; do
  grep -qx "$run" "$EXP" || echo "NOTE: $run now passes on cuda-emu: add it to $(basename "$EXP")"
done
# NOT_SUPPORTED only with the candidate's reason
bad_ns=$(awk '$1 ~ /^\[[0-9]+\/[0-9]+\]$/ && $3 == "NOT_SUPPORTED" && $0 !~ /not supported: / {print $2}' conform.txt)
[ -z "$bad_ns" ] || { echo "FAIL: NOT_SUPPORTED without a reason: $bad_ns"; fail=1; }
other=$(awk '$2 != "PASS" && $2 != "MARGINAL" && $2 != "NOT_SUPPORTED" {print}' runs.txt)
[ -z "$other" ] || { echo "FAIL: runs neither passing nor not supported:"; echo "$other"; fail=1; }
n=$(wc -l <runs.txt)
nb=$(( $(grep -c '"backend": "cuda-emu"' rep/report.json) + $(cat rep4/report.json 2>/dev/null | grep -c '"backend": "cuda-emu"') ))
[ "$nb" -eq "$n" ] || { echo "FAIL: report.json names the backend cuda-emu in $nb of $n runs"; fail=1; }
grep -q "Candidate backend: \`cuda-emu\`" rep/report.md || { echo "FAIL: report.md does not name cuda-emu"; fail=1; }
grep -q "backend cuda-emu" conform.txt || { echo "FAIL: conform output does not name cuda-emu"; fail=1; }
[ $fail = 0 ] && echo "PASS: cuda-emu conformance ($n runs at 1, 2 and 4 ranks$([ "${CUDA_EMU_CONFORM_FULL:-0}" = 1 ] && echo ", all" || echo ", the make test selection"))"
exit $fail

#!/usr/bin/env bash
# optimized/tests/bench_gpu_step_smoke.sh — G4's benchmark (optimized/bench/bench_gpu_step.c,
# docs/gpu-results.md "G4") cannot rot: on the CPU emulation (--backend cuda-emu) at a tiny
# llama it runs the four configurations side by side (fused single pass, fused chunked, flat,
# non-DP) and prints one RESULT line each and the G4 RATIO lines; each printed ratio must be
# the ratio of the printed medians (or ledger peaks), the output must say that cuda-emu is not
# a GPU; bad usage exits 2; --backend cuda without a device (or without the plugin) exits 77
# with a SKIP line, never a fake measurement. Timing numbers themselves are not judged here
# (the emulation's are not a GPU's).
source "$DPCERT_ROOT/common/tests/check_lib.bash"
BIN=$DPCERT_BUILD/bench/optimized_bench_gpu_step
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
export DPCERT_CUDA_EMU_PLUGIN=$DPCERT_BUILD/libdpcert_cuda_emu.so DPCERT_CUDA_PLUGIN=$DPCERT_BUILD/libdpcert_cuda.so
[ -f "$DPCERT_CUDA_EMU_PLUGIN" ] || { echo "SKIP: no emulation plugin in $DPCERT_BUILD"; exit 77; }
# the SANITIZE=1 build's ranks leak Open MPI components at exit (as conform_ci.sh)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}detect_leaks=0"
SHAPE="--dim 32 --layers 1 --heads 2 --ffn 64 --seq 8 --batch 2 --vocab 64 -w 0 -n 2"
timeout 600 "$BIN" --backend cuda-emu $SHAPE >out.txt 2>err.txt; rc=$?
cat out.txt err.txt
check "cuda-emu run exits 0" test $rc = 0
for s in fused-single fused-chunked flat non-dp; do
  check "RESULT line for $s" grep -Eq "^RESULT tool=dpcert strategy=$s backend=cuda-emu .*median_s=[0-9.e-]+ .*ledger_peak_bytes=[0-9]+" out.txt
done
check "six RATIO lines with numbers" test "$(grep -Ec '^RATIO .* [0-9]+\.[0-9]{3}( |$)' out.txt)" = 6
check "says the emulation is not a GPU" grep -q 'cuda-emu is the CPU emulation: these are not GPU measurements' out.txt
check "prints the harness header" grep -q "^# dpcert-bench bench_gpu_step: .*(the CPU emulation: not a GPU)" out.txt
check "a row per configuration, non-dp the baseline" bash -c "grep -Eq '^non-dp +[0-9.]+ +[0-9.]+ +[0-9.]+ +base ' out.txt && test \$(grep -Ec '^(fused-single|fused-chunked|flat) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ ' out.txt) = 3"
check "prints the reproduce line" grep -q "^# reproduce: .*bench_gpu_step -w 0 -n 2 --backend cuda-emu" out.txt
# every printed ratio is the ratio of the printed values (3 decimals)
awk '
  function num() { match($0, / [0-9]+\.[0-9][0-9][0-9]/); return substr($0, RSTART + 1, RLENGTH - 1) }
  /^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } m[v["strategy"]] = v["median_s"]; p[v["strategy"]] = v["ledger_peak_bytes"] }
  /^RATIO per-layer fused, single pass \/ non-DP/ { want["a"] = m["fused-single"] / m["non-dp"]; got["a"] = num() }
  /^RATIO per-layer fused, chunked/ { want["b"] = m["fused-chunked"] / m["non-dp"]; got["b"] = num() }
  /^RATIO single pass \/ chunked/ { want["c"] = m["fused-single"] / m["fused-chunked"]; got["c"] = num() }
  /^RATIO flat/ { want["d"] = m["flat"] / m["non-dp"]; got["d"] = num() }
  /^RATIO peak memory.*fused single pass/ { want["e"] = p["fused-single"] / p["non-dp"]; got["e"] = num() }
  END { n = 0; bad = 0
        for (k in want) { n++; if (sprintf("%.3f", want[k]) != got[k]) { bad++; print "ratio " k ": printed " got[k] ", the RESULT lines give " want[k] } }
        exit !(n == 5 && bad == 0) }' out.txt
check "the RATIO lines are the ratios of the RESULT lines" test $? = 0
# --budget: each configuration stops taking timed steps once its share is spent (>= 3 steps)
timeout 600 "$BIN" --backend cuda-emu --budget 1 $SHAPE -n 400 >budget.txt 2>&1; rc=$?
check "--budget run exits 0" test $rc = 0
check "--budget: every configuration took between 3 and 399 timed steps" \
  bash -c "test \$(grep -Ec '^RESULT .* reps=([3-9]|[1-9][0-9]|[1-3][0-9][0-9]) ' budget.txt) = 4"
"$BIN" --backend cuda-emu -n 0 >/dev/null 2>&1
check "-n 0 exits 2" test $? = 2
"$BIN" --backend cuda-emu --reps 3 >/dev/null 2>&1
check "an unknown flag (--reps) exits 2" test $? = 2
"$BIN" --backend cuda-emu --dtype f16 >/dev/null 2>&1
check "--dtype f16 exits 2" test $? = 2
if [ -f "$DPCERT_CUDA_PLUGIN" ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "NOTE: a GPU is present: the no-device check does not apply"
else
  timeout 120 "$BIN" --backend cuda $SHAPE >nodev.txt 2>&1; rc=$?
  cat nodev.txt
  check "--backend cuda without a device exits 77" test $rc = 77
  check "... with a SKIP line and no RESULT" bash -c "grep -q '^SKIP: backend cuda' nodev.txt && ! grep -q '^RESULT' nodev.txt"
fi
echo "$checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

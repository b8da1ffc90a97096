#!/usr/bin/env bash
# conformance/tests/losscale_engine_seeds_slow.sh — the losscale check accepts the engine's
# correct loss-scaled pipeline (--loss-scale static:1024, steps 1-2-3-4*-5-6) at fp16 and
# bf16 on 100 seeds without a false alarm, against the f64 reference
# (docs/precision.md "The losscale check"). The check's PASS decision uses the derived
# tolerances of conformance/compare/compare.c: a correct run within them is never rejected, so the
# false-alarm probability is 0 by the derivation (not a statistical test). Power: on every
# tenth seed the injected over-shrink (ls-unscale-after-clip) must FAIL with its diagnosis.
set -u
D=${DPCERT:?DPCERT not set}
alarms=0; runs=0; misses=0; controls=0
for s in $(seq 1 100); do
  A="--model mlp --dataset-size 32 --q 0.25 --steps 1 --clip 1 --sigma 1 --seed $s --noise-key $((s + 1000))"
  rm -rf r c
  "$D" reference dpsgd $A --export r >/dev/null || { echo "FAIL reference seed $s"; exit 1; }
  for p in fp16 bf16; do
    rm -rf c
    "$D" train dpsgd --impl optimized --backend host --precision $p $A --loss-scale static:1024 --export c >/dev/null \
      || { echo "FAIL train seed $s $p"; exit 1; }
    runs=$((runs + 1))
    if ! "$D" losscale --check r c --dtype $p >out.txt; then alarms=$((alarms + 1)); echo "false alarm: seed $s $p: $(tail -1 out.txt)"; fi
  done
  if [ $((s % 10)) -eq 0 ]; then
    rm -rf c
    DPCERT_TEST_INJECT=1 "$D" train dpsgd --impl optimized --backend host --precision fp16 $A --loss-scale static:1024 \
      --inject-bug ls-unscale-after-clip --export c >/dev/null 2>&1
    controls=$((controls + 1))
    "$D" losscale --check r c --dtype fp16 >out.txt
    if [ $? -ne 1 ] || ! grep -q "loss scale applied after clipping, factor 2^10" out.txt; then
      misses=$((misses + 1)); echo "negative control passed: seed $s: $(tail -1 out.txt)"; fi
  fi
done
echo "$runs correct runs, $alarms false alarms; $controls injected over-shrinks, $misses missed"
[ $alarms -eq 0 ] && [ $misses -eq 0 ] && [ $runs -eq 200 ] && [ $controls -eq 10 ]

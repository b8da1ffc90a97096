#!/usr/bin/env bash
# optimized/tests/train_cp1_options.sh — `--cp 1` with a `--cp-*` option (issue 29 item 8,
# docs/longshield.md §3 and its introduction): on the llama it selects the context-parallel
# path with one CP rank (exit 0, the path that the conformance cases cp1-ring-* and cp1-out-*
# compare with the reference); with the mlp or with dpzo it exits 2 naming the option; an
# unknown attention exits 2. Deterministic.
set -u
D=${DPCERT:?}
fail=0
check() { # want-rc pattern args...
  local want=$1 pat=$2; shift 2
  timeout 120 "$D" "$@" >out.txt 2>err.txt; local rc=$?
  if [ "$rc" = "$want" ] && grep -Eq -- "$pat" out.txt err.txt; then echo "ok: exit $rc: $*"
  else echo "FAIL: dpcert $* -> exit $rc (want $want /$pat/): $(head -c 300 err.txt)"; fail=1; fi
}
L="--model llama --seq 5 --dataset-size 8 --q 0.5 --steps 1 --seed 1 --noise-key 2"
check 0 'step 1' train dpsgd $L --cp 1 --cp-attention ring
check 0 'step 1' train dpsgd $L --cp 1 --cp-pattern output
check 2 'mlp has no' train dpsgd --model mlp --dataset-size 8 --q 0.5 --steps 1 --cp 1 --cp-attention ring
check 2 'apply to dpsgd only' train dpzo $L --cp 1 --cp-attention ring
check 2 "cp-attention.*(unknown|expected|one of)" train dpsgd $L --cp 1 --cp-attention spiral
# the one-rank CP path ran (its sums are in another order: the export's bytes differ from the
# single-process engine's) and exports what that engine exports within the tolerance
"$D" train dpsgd $L --cp 1 --cp-attention ring --export e1 >/dev/null 2>&1 &&
  "$D" train dpsgd $L --export e0 >/dev/null 2>&1 &&
  [ "$(ls e1)" = "$(ls e0)" ] && ! cmp -s e0/step-000001.safetensors e1/step-000001.safetensors &&
  "$D" compare e0 e1 >cmp.txt 2>&1 && echo "ok: the CP path ran and matches the engine: $(tail -1 cmp.txt)" ||
  { echo "FAIL: --cp 1 --cp-attention ring: exports $(ls e1) vs $(ls e0), $(tail -2 cmp.txt)"; fail=1; }
exit $fail

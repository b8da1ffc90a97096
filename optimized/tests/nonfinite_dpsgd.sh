#!/usr/bin/env bash
# optimized/tests/nonfinite_dpsgd.sh — non-finite training is refused (issue 15 class 3,
# docs/dpsgd.md "Non-finite training", docs/engine.md): `reference dpsgd` and `train dpsgd`
# exit 2 before any step when the options make the noise std, the private gradient bound
# or the first update non-finite, and exit 2 naming the step and the parameter tensor when
# an update still overflows — never exporting NaN/inf parameters (before the fix both
# exited 0 with infinite noise and NaN parameters). The reference and the engine are
# checked independently (different code, different messages). Positive control: the same
# commands with ordinary hyperparameters exit 0.
set -u
DRV="${DPCERT_BUILD:?}/tests/optimized_test_train_cli"
if "$DPCERT" train --help >/dev/null 2>&1; then TRAIN=("$DPCERT" train); REF=("$DPCERT" reference)
elif [ -x "$DRV" ]; then TRAIN=("$DRV" --as-dpcert train); REF=("$DRV" --as-dpcert reference)
else echo "SKIP: no train command"; exit 77; fi
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
M=(--model mlp --in 4 --hidden 5 --classes 3 --dataset-size 16 --q 0.5 --noise-key 3 --seed 1)
n=0
expect() { # CODE REGEX DESC -- COMMAND...
  local code=$1 re=$2 desc=$3; shift 4
  local dir="ex$((++n))"
  timeout 60 "$@" --export "$dir" >out.log 2>&1
  local rc=$?
  if [ $rc -ne "$code" ]; then bad "$desc: exit $rc, expected $code"; cat out.log; return; fi
  if [ -n "$re" ] && ! grep -Eq "$re" out.log; then bad "$desc: message does not match /$re/"; cat out.log; return; fi
  pass "$desc: exit $rc${re:+ ($(grep -Eo "$re" out.log | head -1))}"
}
for who in REF TRAIN; do
  if [ $who = REF ]; then C=("${REF[@]}" dpsgd); else C=("${TRAIN[@]}" dpsgd); fi
  expect 2 "sigma.*(C_total|not finite)" "$who --sigma 1e308 --clip 10 (sigma C overflows)" -- "${C[@]}" "${M[@]}" --sigma 1e308 --clip 10
  expect 2 "lr 1e\+308.*overflows" "$who --lr 1e308" -- "${C[@]}" "${M[@]}" --lr 1e308
  expect 2 "q 1e-300.*(not finite|non-finite)" "$who --sigma 1e300 --q 1e-300 (private gradient bound)" -- "${C[@]}" "${M[@]/0.5/1e-300}" --sigma 1e300
  expect 2 "lr 1e\+308.*overflows" "$who adamw --lr 1e308" -- "${C[@]}" "${M[@]}" --optimizer adamw --lr 1e308
  # not decidable from the options: AdamW's decay 1 - lr wd = -1e305 overflows the parameters at step 2
  expect 2 "step 2: .*parameter tensor 'layers.0.weight'.*(non-finite|not finite)" "$who adamw --lr 1e307 (update overflows)" -- \
    "${C[@]}" "${M[@]}" --optimizer adamw --lr 1e307 --steps 4
  d="ex$n"
  if [ -f "$d/step-000001.safetensors" ] && [ ! -e "$d/step-000002.safetensors" ]; then pass "$who: no export of the overflowing step"
  else bad "$who: exports after the overflow: $(ls "$d" 2>&1)"; fi
  expect 0 "" "$who control: adamw --lr 0.01" -- "${C[@]}" "${M[@]}" --optimizer adamw --lr 0.01 --steps 4
  expect 0 "" "$who control: sgd --sigma 1e6 --lr 0.1" -- "${C[@]}" "${M[@]}" --sigma 1e6 --steps 2
done
exit $fail

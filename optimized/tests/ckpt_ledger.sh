#!/usr/bin/env bash
# optimized/tests/ckpt_ledger.sh — DP-safe activation checkpointing (--checkpoint block,
# docs/longshield.md "Activation checkpointing") measured with the memory ledger
# (--memory-report, one rank, one step, the same Poisson batch at every depth):
#   1. with checkpointing the activation peak is one block plus the L kept block inputs:
#      peak(L) - L e (B T D + 2 B D) is the same at L = 1, 2, 4 (B T D: the block input,
#      2 B D: the block's two per-example gain gradients), and without checkpointing the
#      peak grows by more than one whole block per layer;
#   2. the injected dangling-reference bug (--inject-bug ckpt-keep-forward: the first
#      forward's block activations are kept) leaves activations allocated after the run
#      that grow step over step (1, 2, 3 steps), which the correct run never does.
# The exports with and without checkpointing are compared element by element by the
# conformance cases ckpt-ci-*, cp-ckpt-*, cp4-out-ckpt-* and full-ckpt-*.
set -u
DRV="${DPCERT_BUILD:?}/tests/optimized_test_train_cli"
if "$DPCERT" train --help >/dev/null 2>&1; then TRAIN=("$DPCERT" train)
elif [ -x "$DRV" ]; then TRAIN=("$DRV" --as-dpcert train)
else echo "SKIP: no train command"; exit 77; fi
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
D=8; T=16
BASE=(dpsgd --seed 5 --noise-key 9 --model llama --vocab 16 --dim $D --heads 2 --ffn 12 --seq $T --dataset-size 16 --q 0.25 --clip 1 --sigma 1 --memory-report --threads 1)
# field: peak (5) or current (4) bytes of an activations line; batch of step 1
act() { awk -v f="$2" '$1 == "rank" && $2 == "0:" && $3 == "activations" { print $f }' "$1"; }
batch() { awk '$1 == "step" && $2 == "1" { print $4 }' "$1"; }
declare -A PK PN
for L in 1 2 4; do
  for ck in none block; do
    "${TRAIN[@]}" "${BASE[@]}" --layers $L --steps 1 --checkpoint $ck >run.log 2>&1 || { bad "run L=$L --checkpoint $ck"; tail -3 run.log; continue; }
    b=$(batch run.log)
    if [ $ck = block ]; then PK[$L]=$(act run.log 5); else PN[$L]=$(act run.log 5); fi
  done
done
e=8
kept=$(( e * (b * T * D + 2 * b * D) ))
c1=$(( ${PK[1]:-0} - 1 * kept )); c2=$(( ${PK[2]:-0} - 2 * kept )); c4=$(( ${PK[4]:-0} - 4 * kept ))
if [ -n "${PK[4]:-}" ] && [ "$c1" = "$c2" ] && [ "$c2" = "$c4" ]; then
  pass "checkpointing: activation peak = one block ($c1 bytes) + L x $kept (kept inputs) at L = 1, 2, 4: ${PK[1]}, ${PK[2]}, ${PK[4]}"
else bad "checkpointing: activation peak not one block + L kept inputs: peaks ${PK[1]:-} ${PK[2]:-} ${PK[4]:-}, kept $kept, residuals $c1 $c2 $c4"; fi
# without checkpointing every layer adds its whole block: the slope exceeds one block
slope_none=$(( (${PN[4]:-0} - ${PN[1]:-0}) / 3 )); slope_ck=$(( (${PK[4]:-0} - ${PK[1]:-0}) / 3 ))
if [ "$slope_none" -gt $(( slope_ck + c1 / 2 )) ]; then
  pass "no checkpointing: $slope_none bytes per layer vs $slope_ck with --checkpoint block (peaks at L = 4: ${PN[4]} vs ${PK[4]})"
else bad "no checkpointing: $slope_none bytes per layer is not above $slope_ck + half a block ($c1 / 2)"; fi
# the dangling-reference negative control: activations left allocated grow step over step
prev=0; grow=1; cur=""
for s in 1 2 3; do
  DPCERT_TEST_INJECT=1 "${TRAIN[@]}" "${BASE[@]}" --layers 2 --steps $s --checkpoint block --inject-bug ckpt-keep-forward >bug.log 2>&1 || { bad "bug run ($s steps)"; tail -3 bug.log; grow=0; break; }
  c=$(act bug.log 4); cur="$cur $c"
  [ "$c" -gt "$prev" ] || grow=0
  prev=$c
done
if [ $grow = 1 ]; then pass "negative control ckpt-keep-forward caught: activations still allocated after 1, 2, 3 steps:$cur bytes"
else bad "negative control ckpt-keep-forward not caught: activations after 1, 2, 3 steps:$cur"; fi
"${TRAIN[@]}" "${BASE[@]}" --layers 2 --steps 3 --checkpoint block >ok.log 2>&1 || bad "correct 3-step run"
c=$(act ok.log 4)
if [ "$c" = 0 ]; then pass "correct --checkpoint block: no activation left after 3 steps"; else bad "correct run leaves $c activation bytes"; fi
# refused combinations exit 2 naming the option
expect2() { # desc args...
  local desc=$1; shift
  "${TRAIN[@]}" "$@" >bad.log 2>&1; local rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$desc" bad.log; then pass "exit 2: $desc"; else bad "expected exit 2 with '$desc', got $rc"; tail -2 bad.log; fi
}
expect2 "--checkpoint block: the mlp has no transformer blocks" dpsgd --model mlp --in 3 --hidden 4 --classes 2 --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --checkpoint block
expect2 "--checkpoint block needs --strategy grad-sample" "${BASE[@]}" --layers 1 --steps 1 --checkpoint block --strategy ghost
expect2 "--checkpoint" "${BASE[@]}" --layers 1 --steps 1 --checkpoint blocks
DPCERT_TEST_INJECT=1 expect2 "applies to --checkpoint block only" "${BASE[@]}" --layers 1 --steps 1 --inject-bug ckpt-keep-forward
exit $fail

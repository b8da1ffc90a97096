#!/usr/bin/env bash
# reference/tests/dpsgd_binary.sh — `dpcert reference dpsgd` through the dpcert binary:
# bit-identical exports for the same seed and noise key (negative control: another key
# differs), micro-batch equivalence (every tensor hash equal, only the micro_batches
# metadata differs), log-line format, exit code 2 on bad input.
# Skips (77) only when the binary reports the command as not built into it.
set -u
DPCERT=${DPCERT:?DPCERT must point to the dpcert binary}
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

out=$("$DPCERT" reference dpsgd --model mlp --dataset-size 4 --q 0.5 --noise-key 1 2>&1); rc=$?
if [ $rc -eq 3 ] && grep -q "not built into this binary" <<<"$out"; then
  echo "SKIP: dpcert was linked without the reference module's command (see the link-anchor request)"; exit 77
fi
args="--model llama --dataset-size 16 --q 0.5 --steps 2 --seed 5 --clipping per-layer --groups block"
"$DPCERT" reference dpsgd $args --noise-key 77 --export a > a.log; check "[ $? -eq 0 ]" "run a"
"$DPCERT" reference dpsgd $args --noise-key 77 --export b > b.log; check "[ $? -eq 0 ]" "run b"
"$DPCERT" reference dpsgd $args --noise-key 78 --export c > /dev/null; check "[ $? -eq 0 ]" "run c"
"$DPCERT" reference dpsgd $args --noise-key 77 --micro-batches 3 --export d > d.log; check "[ $? -eq 0 ]" "run d"
check "cmp -s a/step-000002.safetensors b/step-000002.safetensors" "same seed and key: identical export"
check "! cmp -s a/step-000002.safetensors c/step-000002.safetensors" "negative control: another key differs"
check "cmp -s a.log d.log" "micro-batches: same log"
"$DPCERT" inspect a/step-000002.safetensors | grep -v -e '^file' -e '^sha256' -e micro_batches > ia.txt
"$DPCERT" inspect d/step-000002.safetensors | grep -v -e '^file' -e '^sha256' -e micro_batches > id.txt
check "cmp -s ia.txt id.txt && [ \$(grep -c '^tensor' ia.txt) -gt 100 ]" "micro-batches: every tensor identical"
check "grep -Eq '^step 2 batch [0-9]+ loss [0-9.]+ mean_clip [0-9.]+$' a.log" "log line format"
for bad in "--model llama --sigma -1" "--model llama --q 2" "--model llama --heads 5" "--model llama --clip nan" \
           "--model llama --nope" "--model mlp --dataset-size 0"; do
  "$DPCERT" reference dpsgd $bad > /dev/null 2> err.txt; rc=$?
  check "[ $rc -eq 2 ] && [ -s err.txt ]" "'$bad' exits 2 with a message (got $rc)"
done
exit $fail

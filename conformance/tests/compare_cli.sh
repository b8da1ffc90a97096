#!/usr/bin/env bash
# conformance/tests/compare_cli.sh — `dpcert compare` on real reference exports: the
# double-precision reference against the 256-bit MPFR reference passes (exit 0, every
# tensor compared within its derived bound), a different noise key fails naming
# a tensor (exit 1); bad input exits 2.
set -u
D=${DPCERT:?}
for c in "compare --help" "reference dpsgd --help"; do
  out=$($D $c 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "SKIP: 'dpcert $c' is not available in $D (exit $rc: $out)"; exit 77; fi
done
fail=0
check() { # expected-exit description command...
  local want=$1 what=$2; shift 2
  "$@" > out.txt 2>&1; local rc=$?
  if [ $rc -ne $want ]; then echo "FAIL: $what: exit $rc, expected $want"; sed 's/^/  | /' out.txt | tail -8; fail=1
  else echo "ok: $what (exit $rc)"; fi
}
base="--model mlp --in 5 --hidden 4 --classes 3 --dataset-size 12 --q 0.5 --steps 2 --seed 3 --optimizer adamw"
$D reference dpsgd $base --noise-key 9 --export ref >/dev/null || { echo "FAIL: reference run"; exit 1; }
$D reference dpsgd $base --noise-key 9 --precision mpfr --export mp >/dev/null || { echo "FAIL: mpfr reference run"; exit 1; }
$D reference dpsgd $base --noise-key 10 --export key2 >/dev/null || { echo "FAIL: reference run"; exit 1; }
check 0 "double vs MPFR reference" $D compare ref mp
grep -q "overall: PASS" out.txt || { echo "FAIL: double vs MPFR not PASS"; fail=1; }
check 0 "one step file vs itself, JSON output" $D compare ref/step-000001.safetensors ref/step-000001.safetensors --json
check 1 "different noise key" $D compare ref key2
grep -q "FAIL" out.txt || { echo "FAIL: no FAIL line for a different noise key"; fail=1; }
check 2 "one argument" $D compare ref
check 2 "unknown option" $D compare ref mp --colour
check 2 "bad dtype" $D compare ref mp --dtype f8
check 2 "warn out of range" $D compare ref mp --warn 1.5
check 2 "NaN warn" $D compare ref mp --warn nan
check 2 "missing file" $D compare nothere.safetensors ref/step-000001.safetensors
printf 'garbage' > bad.safetensors
check 2 "malformed file" $D compare bad.safetensors ref/step-000001.safetensors
check 2 "file vs directory" $D compare ref ref/step-000001.safetensors
mkdir -p empty
check 2 "empty export directory" $D compare empty ref
check 2 "conform without --suite" $D conform
check 2 "conform unknown backend" $D conform --suite ci --backend tpu
check 2 "conform bad regex" $D conform --suite ci --filter '('
check 2 "conform bad ranks" $D conform --suite ci --ranks 0
check 2 "conform no matching case" $D conform --suite ci --filter 'no-such-case-xyz'
# issue 13: a candidate that adds no noise, compared as noise shares against a reference without
# its noise key (q = 1: the same batch whatever the key), is INCOMPLETE (exit 1), never PASS
nb="--model mlp --in 5 --hidden 4 --classes 3 --dataset-size 6 --q 1 --steps 1 --seed 3 --clip 0.5"
$D reference dpsgd $nb --sigma 1 --export nokey >/dev/null && $D reference dpsgd $nb --sigma 0 --noise-key 5 --export quiet >/dev/null \
  || { echo "FAIL: reference runs for the no-noise case"; fail=1; }
check 1 "no-noise candidate under --noise-shares" $D compare nokey quiet --noise-shares --noise-ranks 1
grep -q "overall: INCOMPLETE" out.txt || { echo "FAIL: no-noise candidate not INCOMPLETE"; fail=1; }
# issue 29 item 13: an engine export made with --precision bf16 declares dtype=bf16 (the mixed
# recipe); compare reads it (exit 0 without a precision option, and with --precision bf16) and
# refuses a contradicting --dtype bf16 / --dtype f64 / --precision fp16 (exit 2), which before
# formed NaN bounds at step 2 (FAIL "inf%" for every parameter)
mb="--model mlp --dataset-size 8 --q 0.5 --steps 2 --seed 1 --noise-key 2"
$D reference dpsgd $mb --export r16 >/dev/null && $D train dpsgd $mb --precision bf16 --export c16 >/dev/null \
  || { echo "FAIL: exports for the precision checks"; fail=1; }
check 0 "declared bf16 recipe read from the metadata" $D compare r16 c16
grep -q 'overall: PASS' out.txt && ! grep -q 'nan' out.txt || { echo "FAIL: declared precision: not PASS"; fail=1; }
check 0 "--precision bf16 agrees with the declaration" $D compare r16 c16 --precision bf16
for bad in "--dtype bf16" "--dtype f64" "--precision fp16"; do
  check 2 "$bad contradicts dtype=bf16" $D compare r16 c16 $bad
  grep -q "contradicts the candidate's declared precision" out.txt || { echo "FAIL: $bad: message"; fail=1; }
done
exit $fail

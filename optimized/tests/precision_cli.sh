#!/usr/bin/env bash
# optimized/tests/precision_cli.sh — `train dpsgd --precision` on the command line
# (docs/precision.md): bad input exits 2 with a message naming it (unknown precision,
# --dtype contradicting --precision, dpzo with --loss-scale or an injected bug other than
# master-half, an fp16 --data file whose input overflows
# fp16, the master-half bug without a half precision, compare --precision garbage);
# positive controls: the same data file at bf16 trains, a bf16 and an fp16 run export
# dtype=bf16/fp16 and agree with the reference under `compare --precision`, --dtype bf16
# is the alias, and --memory-report shows the f32 master weights; `train dpzo` at
# bf16/fp16 passes compare --precision, and a vacuous bound (>= 2C) is INCOMPLETE.
set -u
D=${DPCERT:?}
$D train --help >/dev/null 2>&1 || { echo "SKIP: no train command"; exit 77; }
fail=0
bad() { echo "FAIL  $*"; fail=1; }
expect() { # CODE REGEX DESC -- COMMAND...
  local code=$1 re=$2 desc=$3; shift 4
  local out rc
  out=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne "$code" ]; then bad "$desc: exit $rc, expected $code ($out)"; return; fi
  if [ -n "$re" ] && ! grep -Eq -- "$re" <<<"$out"; then bad "$desc: message lacks /$re/: $out"; return; fi
  echo "PASS  $desc"
}
M=(--model mlp --in 2 --hidden 3 --classes 2 --dataset-size 2 --q 0.9 --steps 1 --clip 1 --sigma 1 --seed 1 --noise-key 3)
expect 2 "--precision" "unknown precision" -- $D train dpsgd "${M[@]}" --precision fp32
expect 2 "--dtype" "unknown --dtype" -- $D train dpsgd "${M[@]}" --dtype half
expect 2 "disagree" "--dtype contradicting --precision" -- $D train dpsgd "${M[@]}" --dtype f32 --precision bf16
Z=(--model mlp --in 2 --hidden 3 --classes 2 --dataset-size 2 --q 0.9 --steps 1 --clip 1 --sigma 1 --phi 1e-1 --lr 1e-3
   --seed 1 --noise-key 3 --noise gaussian)
expect 2 "--loss-scale.*no backward" "dpzo with --loss-scale" -- $D train dpzo "${Z[@]}" --precision fp16 --loss-scale static:1024
expect 2 "clip-after-sum.*dpsgd only" "dpzo with --inject-bug clip-after-sum" -- env DPCERT_TEST_INJECT=1 $D train dpzo "${Z[@]}" \
  --precision bf16 --inject-bug clip-after-sum
expect 2 "master-half" "dpzo master-half bug at f32" -- env DPCERT_TEST_INJECT=1 $D train dpzo "${Z[@]}" --precision f32 \
  --inject-bug master-half
expect 0 "" "control: dpzo at bf16" -- $D train dpzo "${Z[@]}" --precision bf16
expect 2 "master-half" "master-half bug at f32" -- env DPCERT_TEST_INJECT=1 $D train dpsgd "${M[@]}" --precision f32 \
  --inject-bug master-half
# a data file: x F64 [2, 2] = (1e5, 1; 0.5, -0.25), y I32 [2] = (0, 1)
h='{"x":{"dtype":"F64","shape":[2,2],"data_offsets":[0,32]},"y":{"dtype":"I32","shape":[2],"data_offsets":[32,40]}}'
while [ $(( ${#h} % 8 )) -ne 0 ]; do h="$h "; done
n=${#h}
{ printf "$(printf '\\x%02x' $((n & 255)) $(((n >> 8) & 255)) 0 0 0 0 0 0)"; printf '%s' "$h"
  printf '\x00\x00\x00\x00\x00\x6a\xf8\x40\x00\x00\x00\x00\x00\x00\xf0\x3f'
  printf '\x00\x00\x00\x00\x00\x00\xe0\x3f\x00\x00\x00\x00\x00\x00\xd0\xbf'
  printf '\x00\x00\x00\x00\x01\x00\x00\x00'; } > big.safetensors
expect 2 "big.safetensors.*example 0.*65504" "fp16 --data input 1e5 beyond 65504" -- $D train dpsgd "${M[@]}" \
  --data big.safetensors --precision fp16
expect 2 "big.safetensors.*example 0.*65504" "dpzo: fp16 --data input 1e5 beyond 65504" -- $D train dpzo "${Z[@]}" \
  --data big.safetensors --precision fp16
expect 0 "" "control: the same file at bf16" -- $D train dpsgd "${M[@]}" --data big.safetensors --precision bf16
expect 0 "" "control: the same file at f32" -- $D train dpsgd "${M[@]}" --data big.safetensors --dtype f32
out=$($D train dpsgd --model mlp --in 2 --hidden 3 --classes 2 --dataset-size 16 --q 0.5 --steps 1 --clip 1 --sigma 1 --precision bf16 --memory-report 2>&1 >/dev/null)
grep -Eq "master_weights +[1-9]" <<<"$out" || bad "--memory-report at bf16 lacks the master weights: $out"
A=(--model mlp --in 7 --hidden 5,3 --classes 4 --dataset-size 16 --q 0.25 --steps 2 --clip 0.862 --sigma 1 --seed 11 --noise-key 12345)
$D reference dpsgd "${A[@]}" --export ref >/dev/null || bad "reference run"
for p in bf16 fp16; do
  $D train dpsgd "${A[@]}" --precision $p --strategy fused --export c_$p >/dev/null || bad "train --precision $p"
  $D inspect c_$p/step-000001.safetensors 2>&1 | grep -q "dtype.*$p" || bad "$p export lacks dtype=$p metadata"
  $D compare ref c_$p --precision $p >/dev/null || bad "compare --precision $p of a correct run"
done
$D train dpsgd "${A[@]}" --dtype bf16 --strategy fused --export c_alias >/dev/null || bad "train --dtype bf16"
cmp -s c_alias/step-000002.safetensors c_bf16/step-000002.safetensors || bad "--dtype bf16 is not --precision bf16"
expect 2 "--precision" "compare --precision fp8" -- $D compare ref c_bf16 --precision fp8
expect 2 "contradicts" "compare --precision bf16 --dtype f64" -- $D compare ref c_bf16 --precision bf16 --dtype f64
# compare reads the declared precision (metadata dtype=bf16, issue 29 item 13): no option needed
$D compare ref c_bf16 >/dev/null 2>&1 || bad "compare of a bf16 run without options (its declared precision)"
# negative control of the comparison: the bf16 run compared as an f64 candidate fails (its
# declaration removed: a --dtype f64 contradicting it is refused, exit 2)
strip_dtype() { # SRC DST: the export with "dtype" left out of every file's metadata
  python3 - "$1" "$2" <<'PY'
import json, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for f in sorted(os.listdir(src)):
    b = open(os.path.join(src, f), "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.get("__metadata__", {}).pop("dtype", None)
    e = json.dumps(h, separators=(",", ":")).encode()
    e += b" " * (-len(e) % 8)
    open(os.path.join(dst, f), "wb").write(struct.pack("<Q", len(e)) + e + b[8 + n:])
PY
}
strip_dtype c_bf16 c_bf16_undeclared || bad "stripping the dtype metadata"
$D compare ref c_bf16_undeclared >/dev/null 2>&1 && bad "a bf16 run passes under f64 tolerances"
$D compare ref c_bf16 --dtype f64 >/dev/null 2>&1; [ $? = 2 ] || bad "--dtype f64 contradicting dtype=bf16 is not refused"
# DP-ZO at bf16/fp16 (docs/precision.md "DP-ZO"): agrees with the f64 reference under
# compare --precision, exports dtype=bf16/fp16, is bit-identical at 1 and 2 threads; the
# same run fails under f64 tolerances; a case whose loss-difference bound is >= 2C is
# INCOMPLETE (exit 1), never a pass
ZA=(--model mlp --in 7 --hidden 5,3 --classes 4 --dataset-size 16 --q 0.25 --steps 2 --sigma 1 --seed 11 --noise-key 12345
    --phi 0.3 --lr 0.1)
$D reference dpzo "${ZA[@]}" --clip 0.3 --export zref >/dev/null || bad "reference dpzo"
for p in bf16 fp16; do
  $D train dpzo "${ZA[@]}" --clip 0.3 --precision $p --export z_$p >/dev/null || bad "train dpzo --precision $p"
  $D inspect z_$p/step-000001.safetensors 2>&1 | grep -q "dtype.*$p" || bad "dpzo $p export lacks dtype=$p metadata"
  $D compare zref z_$p --precision $p >/dev/null || bad "compare --precision $p of a correct dpzo run"
done
$D train dpzo "${ZA[@]}" --clip 0.3 --precision bf16 --threads 2 --export z_t2 >/dev/null || bad "train dpzo bf16 --threads 2"
cmp -s z_t2/step-000002.safetensors z_bf16/step-000002.safetensors || bad "dpzo bf16 differs between 1 and 2 threads"
strip_dtype z_bf16 z_bf16_undeclared || bad "stripping the dtype metadata (dpzo)"
$D compare zref z_bf16_undeclared >/dev/null 2>&1 && bad "a bf16 dpzo run passes under f64 tolerances"
$D reference dpzo "${ZA[@]}" --clip 0.05 --export zref_v >/dev/null || bad "reference dpzo (C 0.05)"
$D train dpzo "${ZA[@]}" --clip 0.05 --precision bf16 --export z_v >/dev/null || bad "train dpzo bf16 (C 0.05)"
out=$($D compare zref_v z_v --precision bf16 2>&1); rc=$?
{ [ $rc -eq 1 ] && grep -q "overall: INCOMPLETE" <<<"$out" && grep -q "bound is >= 2C" <<<"$out"; } ||
  bad "bf16 dpzo with C 0.05 (bound >= 2C): expected INCOMPLETE, exit 1 (got $rc)"
echo "PASS  dpzo at bf16/fp16 (compare, dtype, threads, f64 tolerance fails, vacuous bound INCOMPLETE)"
[ $fail -eq 0 ] && echo "PASS: precision CLI" || exit 1

#!/usr/bin/env bash
# conformance/tests/losscale_cli.sh — `dpcert losscale` and `--loss-scale` on the engine
# (docs/precision.md "Loss scaling"): the side-by-side table (every pipeline with its
# verdict, Table 3, Table 4, the neighbouring datasets), JSON and --report; bad input exits
# 2; on the engine, static:S is bit-identical to none (powers of two are exact) and the
# losscale check PASSes it, while each injected pipeline error (DPCERT_TEST_INJECT=1) and
# dynamic scaling FAIL with their own diagnosis (negative controls that must fail).
set -u
D=${DPCERT:?DPCERT not set}
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

"$D" losscale >t.txt 2>t.err; rc=$?
check "losscale: exit 0, every row as derived" '[ $rc -eq 0 ] && grep -q "^losscale: every row as derived" t.txt'
for p in nondp nondp-scaled dp-standard dp-scaled-threshold dp-zero dp-no-unscale dp-dynamic; do
  check "losscale prints $p on 3 batches x 2 half types" '[ "$(grep -c "^$p " t.txt)" -ge 6 ]'
done
check "dp-standard bf16: over-shrink 2^10" 'grep -Eq "^dp-standard .* typical +bf16 .*loss scale applied after clipping, factor 2\^10" t.txt'
check "dp-zero fp16 small: PASS (underflow)" 'grep -Eq "^dp-zero .* small +fp16 .*PASS \(underflow\)" t.txt'
check "neighbouring datasets: only D' skips" 'grep -q "D skipped: no, D. = D + 1 example skipped: yes" t.txt'
check "Table 3 and Table 4 all match (exactly); dp-dynamic is not in Table 4" '! grep -q "DIFFERS" t.txt && [ "$(grep -c " match$" t.txt)" -ge 18 ] && grep -Eq "^  dp-dynamic .*paper: - .*n/a \(not in the paper\)$" t.txt'
"$D" losscale --json --report rep >t.json 2>t.err; rc=$?
check "--json and --report" '[ $rc -eq 0 ] && python3 -c "
import json; d=json.load(open(\"t.json\")); r=json.load(open(\"rep/losscale.json\"))
assert d==r and len(d[\"rows\"])==42 and all(x[\"as_expected\"] for x in d[\"rows\"])
assert d[\"neighbours\"][\"demonstrated\"] and all(t[\"verdict\"]!=\"differs\" for t in d[\"table3\"])"'
"$D" losscale --pipelines dp-zero --dtype bf16 >p.txt; rc=$?
check "--pipelines and --dtype filter" '[ $rc -eq 0 ] && [ "$(grep -c "^dp-" p.txt)" -eq 3 ]'

bad() { "$D" "$@" >/dev/null 2>err.txt; local rc=$?; check "exit 2: $* ($(head -c 120 err.txt))" "[ $rc -eq 2 ] && [ -s err.txt ]"; }
for s in 1000 0 -4 inf nan 2^2000 2^x 3; do bad losscale --loss-scale "$s"; done
bad losscale --pipelines dp-zero,bogus
bad losscale --dtype f8
bad losscale --batch-size 0
bad losscale --check onlyone
A="--model mlp --dataset-size 64 --q 0.25 --steps 2 --clip 1 --sigma 1 --seed 1 --noise-key 2"
T="train dpsgd --impl optimized --backend host --dtype f32 $A"
for s in static:1000 static:0 static:-2 static:inf bogus dynamic:3 dynamic:1024:0 static:2^128; do bad $T --loss-scale "$s"; done
bad train dpsgd --impl optimized --backend host --dtype f32 --model mlp --dataset-size 8 --q 0.5 --clip 4 --loss-scale static:2^127
bad train dpzo --model mlp --dataset-size 8 --q 0.5 --loss-scale static:2
DPCERT_TEST_INJECT=1 "$D" $T --inject-bug ls-no-unscale >/dev/null 2>err.txt; rc=$?
check "a loss-scale bug needs static:S: exit 2" '[ $rc -eq 2 ] && grep -q "needs --loss-scale static:S" err.txt'

# the engine: correct pipelines against the reference
"$D" reference dpsgd $A --export ref >/dev/null || fail=1
"$D" $T --export none >/dev/null || fail=1
"$D" $T --loss-scale static:1024 --export st >/dev/null || fail=1
check "static:1024 is bit-identical to none (every tensor)" 'python3 -c "
import json,struct,sys
def load(p):
    b=open(p,\"rb\").read(); n=struct.unpack(\"<Q\",b[:8])[0]; h=json.loads(b[8:8+n]); d=b[8+n:]
    return {k:d[v[\"data_offsets\"][0]:v[\"data_offsets\"][1]] for k,v in h.items() if k!=\"__metadata__\"}, h[\"__metadata__\"]
for s in (\"000001\",\"000002\"):
    a,ma=load(\"none/step-%s.safetensors\"%s); b,mb=load(\"st/step-%s.safetensors\"%s)
    assert a==b and mb[\"loss_scale\"]==\"static:1024\" and mb[\"loss_scale_skipped\"]==\"0\"
"'
"$D" compare ref st --dtype f32 >cmp.txt; rc=$?
check "static:1024: compare PASS" '[ $rc -eq 0 ]'
"$D" losscale --check ref st >ck.txt; rc=$?
check "static:1024: losscale check PASS" '[ $rc -eq 0 ] && grep -q "^losscale: PASS" ck.txt'
"$D" losscale --check ref none --json >ck.json; rc=$?
check "none: losscale check PASS (JSON)" '[ $rc -eq 0 ] && grep -q "\"verdict\": \"PASS\"" ck.json'

# negative controls: each wrong pipeline FAILs with its own diagnosis
DPCERT_TEST_INJECT=1 "$D" $T --loss-scale static:1024 --inject-bug ls-unscale-after-clip --export b1 >/dev/null 2>&1 || fail=1
"$D" losscale --check ref b1 >c1.txt; rc=$?
check "ls-unscale-after-clip (1-2-3-4-5-6): FAIL over-shrink 2^10" '[ $rc -eq 1 ] && grep -q "^losscale: FAIL: over-shrink .*loss scale applied after clipping, factor 2^10" c1.txt'
# a third party that exports no per-example norms: the clipped sums alone show the
# over-shrink when it is exact (every example clipped: --clip 0.01)
AT="--model mlp --dataset-size 64 --q 0.25 --steps 1 --clip 0.01 --sigma 1 --seed 1 --noise-key 2"
"$D" reference dpsgd $AT --export reft >/dev/null || fail=1
DPCERT_TEST_INJECT=1 "$D" train dpsgd --impl optimized --backend host --dtype f32 $AT --loss-scale static:1024 \
  --inject-bug ls-unscale-after-clip --export bt >/dev/null 2>&1 || fail=1
python3 - <<'PY' || fail=1
import json, struct, os
def rewrite(src, dst, drop):
    b = open(src, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    out, data, off = {}, b"", 0
    for k, v in h.items():
        if k == "__metadata__": out[k] = v; continue
        if k == drop: continue
        blob = d[v["data_offsets"][0]:v["data_offsets"][1]]
        out[k] = dict(v, data_offsets=[off, off + len(blob)]); data += blob; off += len(blob)
    hdr = json.dumps(out).encode(); hdr += b" " * (-len(hdr) % 8)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    open(dst, "wb").write(struct.pack("<Q", len(hdr)) + hdr + data)
rewrite("bt/step-000001.safetensors", "tp/step-000001.safetensors", "per_sample.norm")
PY
"$D" losscale --check reft/step-000001.safetensors tp/step-000001.safetensors >c5.txt; rc=$?
check "no per_sample.norm (third party): over-shrink 2^10 from the sums alone" '[ $rc -eq 1 ] && grep -q "^losscale: FAIL: over-shrink .*factor 2^10$" c5.txt'
DPCERT_TEST_INJECT=1 "$D" $T --loss-scale static:2^20 --inject-bug ls-no-unscale --export b2 >/dev/null 2>&1 || fail=1
"$D" losscale --check ref b2 >c2.txt; rc=$?
check "ls-no-unscale (1-2-3-4-6): FAIL loss scale not removed 2^20" '[ $rc -eq 1 ] && grep -q "^losscale: FAIL: loss scale not removed .*2^20 x the reference" c2.txt'
A3="--model mlp --dataset-size 64 --q 0.25 --steps 3 --clip 1 --sigma 1 --seed 1 --noise-key 2"
"$D" reference dpsgd $A3 --export ref3 >/dev/null || fail=1
"$D" train dpsgd --impl optimized --backend host --dtype f32 $A3 --loss-scale dynamic:2^127:1000 --export dyn >dyn.log 2>&1 || fail=1
check "dynamic: the step log shows the skip of step 3" 'grep -q "^step 3 skipped: overflow at loss scale 1.7014118346046923e+38 (dynamic)" dyn.log && [ "$(grep -c skipped dyn.log)" -eq 1 ]'
"$D" losscale --check ref3 dyn >c3.txt; rc=$?
check "dynamic: step 3 skipped on overflow, FAIL data-dependent release" \
  '[ $rc -eq 1 ] && grep -q "^step-000003.safetensors .*a step was skipped on overflow" c3.txt && grep -q "^step-000001.safetensors .*skip decision reads" c3.txt'
"$D" train dpsgd --impl optimized --backend host --dtype f32 $A --loss-scale dynamic --export dyn2 >/dev/null 2>&1 || fail=1
"$D" losscale --check ref dyn2 >c4.txt; rc=$?
check "dynamic without a skip: still FAIL (the decision is data-dependent)" '[ $rc -eq 1 ] && grep -q "FAIL: data-dependent skip" c4.txt'

# half precision (--precision bf16|fp16): the correct pipeline passes compare and the check;
# each injected pipeline error FAILs with its own diagnosis; fp16 with S = 2^24 overflows
for p in bf16 fp16; do
  H="train dpsgd --impl optimized --backend host --precision $p $A"
  "$D" $H --loss-scale static:1024 --export h_$p >/dev/null 2>&1 || fail=1
  "$D" compare ref h_$p --precision $p >/dev/null; rc1=$?
  "$D" losscale --check ref h_$p --dtype $p >h.txt; rc=$?
  check "$p static:1024: compare and losscale PASS" '[ $rc1 -eq 0 ] && [ $rc -eq 0 ]'
  DPCERT_TEST_INJECT=1 "$D" $H --loss-scale static:1024 --inject-bug ls-unscale-after-clip --export hb1_$p >/dev/null 2>&1 || fail=1
  "$D" losscale --check ref hb1_$p --dtype $p >h.txt; rc=$?
  check "$p ls-unscale-after-clip: over-shrink 2^10" '[ $rc -eq 1 ] && grep -q "^losscale: FAIL: over-shrink .*factor 2^10" h.txt'
  DPCERT_TEST_INJECT=1 "$D" $H --loss-scale static:1024 --inject-bug ls-no-unscale --export hb2_$p >/dev/null 2>&1 || fail=1
  "$D" losscale --check ref hb2_$p --dtype $p >h.txt; rc=$?
  check "$p ls-no-unscale: loss scale not removed" '[ $rc -eq 1 ] && grep -q "^losscale: FAIL: loss scale not removed" h.txt'
done
"$D" train dpsgd --impl optimized --backend host --precision fp16 $A --loss-scale static:2^24 --export ovf >/dev/null 2>&1 || fail=1
"$D" losscale --check ref ovf --dtype fp16 >h.txt; rc=$?
check "fp16 static:2^24 (1-2-3-4*-5-6): FAIL overflow (inf/NaN norms)" '[ $rc -eq 1 ] && grep -q "^losscale: FAIL: overflow .*inf/NaN" h.txt'
"$D" train dpsgd --impl optimized --backend host --precision bf16 $A --loss-scale static:2^24 --export novf >/dev/null 2>&1 || fail=1
"$D" losscale --check ref novf --dtype bf16 >h.txt; rc=$?
check "bf16 static:2^24: PASS (bf16 has f32's range)" '[ $rc -eq 0 ]'
exit $fail

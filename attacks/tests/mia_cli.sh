#!/usr/bin/env bash
# attacks/tests/mia_cli.sh — `dpcert mia` from the command line on a small configuration
# (64 examples, 4 models, 1 DP run, no DP-ZO): report.json and roc.svg are written and
# parse; the reference (--impl reference) passes like the engine; so does the reference as a
# certification candidate (--candidate), and failing candidates give INVALID; bad input exits 2 naming the option; the planted no-noise run needs
# DPCERT_TEST_INJECT=1. (The statistical behaviour is test_mia_slow's.)
set -u
D=${DPCERT:?}
. "${DPCERT_ROOT:?}/attacks/tests/cli_check.inc"
cli_require mia
small="--population 64 --models 4 --steps 200 --epsilons 8 --no-dpzo --quiet --noise-key 2"
$D mia $small --report rep --signals sig.safetensors > out.txt 2>&1; rc=$?
[ $rc -eq 0 ] || { echo "FAIL: mia exit $rc"; cat out.txt; fail=1; }
# --signals (docs/audits.md "Signals"): loss [runs, R, P] F64, member [R, P] I32 with every
# example in exactly R/2 models, the runs named in the metadata, every loss finite
python3 - <<'PY' || fail=1
import json, math, struct, sys
raw = open("sig.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); buf = raw[8 + n:]
meta = h.pop("__metadata__")
L, M = h["loss"], h["member"]
ok = (meta["format"] == "dpcert-mia-signals/1" and meta["runs"].startswith("non-dp:inf;dp-sgd:")
      and len(meta["runs"].split(";")) == 2 and L["dtype"] == "F64" and L["shape"] == [2, 4, 64]
      and M["dtype"] == "I32" and M["shape"] == [4, 64])
loss = struct.unpack("<512d", buf[L["data_offsets"][0]:L["data_offsets"][1]])
mem = struct.unpack("<256i", buf[M["data_offsets"][0]:M["data_offsets"][1]])
ok = ok and all(math.isfinite(x) and x >= 0 for x in loss) and set(mem) == {0, 1}
ok = ok and all(sum(mem[r * 64 + x] for r in range(4)) == 2 for x in range(64))
print("ok: signals" if ok else f"FAIL: signals content {meta} {L} {M}")
sys.exit(0 if ok else 1)
PY
python3 - <<'PY' || fail=1
import json, sys
r = json.load(open("rep/report.json"))
ok = (r["format"] == "dpcert-mia-report/1" and len(r["runs"]) == 2 and r["runs"][0]["kind"] == "non-dp"
      and all(len(r["runs"][k]["attacks"]["lira-online"]["roc"]["fpr"]) >= 2 for k in range(2))
      and r["runs"][1]["attacks"]["loss-threshold"]["at_fpr"][1]["fpr_target"] == 0.01)
print("ok: report.json" if ok else "FAIL: report.json content")
sys.exit(0 if ok else 1)
PY
grep -q "<polyline" rep/roc.svg || { echo "FAIL: roc.svg has no curve"; fail=1; }
# the reference trains the same models (f64, same keys); rounding differences grow through 200
# memorising non-private steps, so the comparison is qualitative: the reference run is valid
# (its control leaks) and passes, like the engine's
$D mia $small --impl reference --report ref > out.txt 2>&1; rc=$?
[ $rc -eq 0 ] || { echo "FAIL: mia --impl reference exit $rc"; cat out.txt; fail=1; }
python3 - <<'PY' || fail=1
import json, sys
a = json.load(open("rep/report.json")); b = json.load(open("ref/report.json"))
ok = b["config"]["impl"] == "reference" and a["verdict"] == b["verdict"] == "PASS"
print(("ok" if ok else "FAIL") + ": reference and engine runs: %s, %s" % (a["verdict"], b["verdict"]))
sys.exit(0 if ok else 1)
PY
# a certification candidate (docs/audits.md "Candidates"): the reference as a candidate
# (`dpcert audit reference-candidate`, one process per step: 2 runs x 4 models x 20 steps) on a
# configuration whose non-DP control leaks; the numpy candidate: mia_candidate_slow.sh
csmall="--population 32 --models 4 --steps 20 --q 0.5 --epsilons 8 --quiet --noise-key 2"
check 0 "reference as a candidate" $D mia $csmall --candidate "$D audit reference-candidate" --report cand
grep -q "models/s" out.txt || { echo "FAIL: no models/s line"; fail=1; }
python3 - <<'PY' || fail=1
import json, sys
r = json.load(open("cand/report.json"))
ok = (r["config"]["impl"] == "candidate" and "reference-candidate" in r["config"]["candidate"]
      and r["verdict"] == "PASS" and [x["kind"] for x in r["runs"]] == ["non-dp", "dpsgd"])
print(("ok" if ok else "FAIL") + ": candidate report: %s %s" % (r["config"]["impl"], r["verdict"]))
sys.exit(0 if ok else 1)
PY
# q 0.01 on 16 members: most batches are empty (B = 0 step vectors, pure noise); 3 steps
# teach the control nothing, so the run is INVALID (the negative control of the leak check)
check 1 "candidate on empty batches: the control does not leak" $D mia --population 32 --models 4 --steps 3 \
  --q 0.01 --epsilons 8 --quiet --noise-key 2 --candidate "$D audit reference-candidate"
grep -q "INVALID (non-DP control does not leak" out.txt || { echo "FAIL: no INVALID leak verdict"; fail=1; }
check 1 "candidate exits 1" $D mia $csmall --candidate "false"
grep -q "INVALID.*EXIT" out.txt || { echo "FAIL: no INVALID verdict naming EXIT"; fail=1; }
printf '#!/bin/sh\necho garbage > "$2"\n' > garbage.sh; chmod +x garbage.sh
check 1 "candidate writes garbage" $D mia $csmall --candidate "./garbage.sh"
grep -q "INVALID.*BAD_OUTPUT" out.txt || { echo "FAIL: no INVALID verdict naming BAD_OUTPUT"; fail=1; }
printf '#!/bin/sh\nsleep 5\n' > slow.sh; chmod +x slow.sh
check 1 "candidate past its time limit" $D mia $csmall --candidate "./slow.sh" --timeout 0.5
grep -q "INVALID.*TIMEOUT" out.txt || { echo "FAIL: no INVALID verdict naming TIMEOUT"; fail=1; }
check 2 "candidate with --impl" $D mia $csmall --candidate "true" --impl reference
check 2 "candidate with a zero timeout" $D mia $csmall --candidate "true" --timeout 0
check 2 "delta 0" $D mia $small --delta 0
grep -q -- "--delta" out.txt || { echo "FAIL: message does not name --delta"; fail=1; }
check 2 "odd model count" $D mia --models 5
check 2 "zero steps" $D mia --steps 0
check 2 "bad epsilon list" $D mia --epsilons 1,x
check 2 "planted run without DPCERT_TEST_INJECT" $D mia $small --plant no-noise
check 2 "unknown level" $D mia --level nightly
exit $fail

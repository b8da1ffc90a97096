#!/usr/bin/env bash
# conformance/tests/certify_numpy_slow.sh — `dpcert certify` end to end on the numpy candidate
# (conformance/adapters/python/examples/numpy_candidate.py): the correct candidate is
# CERTIFIED (ci suite; certify suite, llama included; other modes: certify_modes_slow.sh) and
# its signed bundle verifies (the mutants and a filtered run:
# certify_mutants_slow.sh); tampering with an output, the
# report, the signature, or a re-signed report whose verdicts were edited makes
# verify-report exit 1. Skipped (77) without python3 + numpy (Debian: python3-numpy).
set -u
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
$D keygen --private k.pem --public k.pub || { echo "FAIL: keygen"; exit 1; }
run 0 "numpy candidate, ci suite" $D certify --candidate "$PY $CAND" --suite ci --report good --sign k.pem
expect "^verdict: CERTIFIED" "numpy candidate CERTIFIED"
expect "false-reject bound \(union\)" "union bound printed"
run 0 "verify-report of the signed bundle" $D verify-report good --pubkey k.pub
for f in report.json report.md junit.xml; do [ -s good/$f ] || { echo "FAIL: good/$f missing"; fail=1; }; done
"$PY" -c "import json,sys; r=json.load(open('good/report.json')); assert r['verdict']=='CERTIFIED' and r['files'] and r['checks'] and r['git_revision'] and r['command']" \
  || { echo "FAIL: report.json content"; fail=1; }

# the certify suite (mlp and llama DP-SGD, DP-ZO, sampling; alpha 1e-9): the llama's
# per-example gradients come from numpy_llama.py
run 0 "numpy candidate, certify suite" $D certify --candidate "$PY $CAND" --suite certify --report cert
expect "^verdict: CERTIFIED" "numpy candidate CERTIFIED on the certify suite"
expect "suite certify, 2 repeats, alpha 1e-09" "certify suite at alpha 1e-9"
for v in step-llama-flat-abadi step-llama-perlayer-abadi; do
  grep -q "\"scope\": \"$v r1\"" cert/report.json || { echo "FAIL: no deterministic check of $v in cert/report.json"; fail=1; }
done
# tampering
cp -r good t1
victim=$(ls t1/outputs/step-mlp-flat-abadi.r1.safetensors)
"$PY" -c "import sys; b=bytearray(open(sys.argv[1],'rb').read()); b[-1]^=1; open(sys.argv[1],'wb').write(b)" "$victim"
run 1 "tampered output" $D verify-report t1 --pubkey k.pub
expect "SHA-256 differs" "tampered output named"
cp -r good t2
sed -i 's/"verdict": "CERTIFIED"/"verdict": "FAILED"/' t2/report.json
run 1 "tampered report" $D verify-report t2 --pubkey k.pub
expect "signature does not verify" "tampered report"
cp -r good t3
"$PY" -c "import sys; s=open('t3/report.json.sig').read(); open('t3/report.json.sig','w').write(('0' if s[0]!='0' else '1')+s[1:])"
run 1 "tampered signature" $D verify-report t3 --pubkey k.pub
$D keygen --private k2.pem --public k2.pub >/dev/null
run 1 "another signer's key" $D verify-report good --pubkey k2.pub
# a signer who edits a check: the signature is valid, the recomputation disagrees
if command -v openssl >/dev/null 2>&1 && command -v xxd >/dev/null 2>&1; then
  cp -r good t4
  "$PY" - <<'PYEOF'
import json
r = json.load(open("t4/report.json"))
r["checks"][0]["status"] = "FAIL" if r["checks"][0]["status"] != "FAIL" else "PASS"
open("t4/report.json", "w").write(json.dumps(r, indent=1, sort_keys=True))
PYEOF
  openssl pkeyutl -sign -inkey k.pem -rawin -in t4/report.json -out t4/sig.bin 2>/dev/null && { xxd -p -c 64 t4/sig.bin > t4/report.json.sig; rm t4/sig.bin; }
  run 0 "re-signed edited report: signature alone verifies" openssl pkeyutl -verify -pubin -inkey k.pub -rawin -in t4/report.json -sigfile <(xxd -r -p t4/report.json.sig)
  run 1 "re-signed edited report" $D verify-report t4 --pubkey k.pub
  expect "differs" "edited check detected by recomputation"
fi
run 2 "certify without --candidate" $D certify --suite ci
run 2 "certify bad suite" $D certify --candidate true --suite full
run 2 "verify-report without key" $D verify-report good
exit $fail

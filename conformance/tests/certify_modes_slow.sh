#!/usr/bin/env bash
# conformance/tests/certify_modes_slow.sh — other correct modes of the numpy candidate
# (conformance/adapters/python/examples/numpy_candidate.py) are CERTIFIED on the ci suite:
# exporting params_after = params - lr G instead of the private gradient (SGD vectors, the
# derived gradient's subtraction bound of docs/tolerances.md), and computing the DP-SGD step
# in float32 and declaring dtype f32 (no false alarm from the f32 tolerances, confident and
# dropped examples included). Their mutants: certify_mutants_slow.sh. And --scope: a DP-SGD-only
# run (no DP-ZO vector given to the candidate) is CERTIFIED naming its scope, verifies, and
# still FAILs the no-noise mutant; a bad scope exits 2. About 35 s.
# Skipped (77) without python3 + numpy (Debian: python3-numpy).
set -u
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
run 0 "numpy candidate exporting params_after, ci suite" $D certify --candidate "$PY $CAND --params-after" --suite ci --report pa
expect "^verdict: CERTIFIED" "params_after mode CERTIFIED"
grep -q '"check": "params_after precision"' pa/report.json || { echo "FAIL: no params_after precision check in pa/report.json"; fail=1; }
"$PY" -c "
import sys; sys.path.insert(0, sys.argv[1])
from dpcert_adapter import load_file
t, m = load_file('pa/outputs/step-mlp-flat-abadi.r1.safetensors')
assert any(k.startswith('params_after.') for k in t) and not any(k.startswith('step.private_grad.') for k in t), sorted(t)
" "$ROOT/conformance/adapters/python" || { echo "FAIL: the params_after run exported a private gradient"; fail=1; }
run 0 "numpy candidate in float32, ci suite" $D certify --candidate "$PY $CAND --f32" --suite ci --report f32
expect "^verdict: CERTIFIED" "f32 mode CERTIFIED"
expect "clip_fn=abadi dtype=f32" "f32 declared and listed"
# negative control: the same float32 computation declared as f64 is judged at f64 bounds
run 1 "numpy candidate in float32 declaring f64" $D certify --candidate "$PY $CAND --f32 --declare-dtype f64" --suite ci --filter 'step-mlp-flat-abadi' --report f32bad
expect "^verdict: FAILED -- deterministic" "f32 results declared f64 FAILED by a deterministic check"
# --scope dpsgd: the step and sampling vectors only; the verdict names the scope
"$D" keygen --private k.pem --public k.pub.pem >/dev/null || { echo "FAIL: keygen"; fail=1; }
run 0 "numpy candidate, --scope dpsgd, ci suite" $D certify --candidate "$PY $CAND" --suite ci --scope dpsgd --sign k.pem --report sc
expect "^verdict: CERTIFIED \(scope dpsgd\)" "scope dpsgd CERTIFIED, scope named"
ls sc/vectors | grep -q '^dpzo-' && { echo "FAIL: --scope dpsgd gave the candidate a DP-ZO vector"; fail=1; }
grep -q '"scope": "dpsgd"' sc/report.json && grep -q '"check": "scope"' sc/report.json ||
  { echo "FAIL: report.json does not record the scope"; fail=1; }
run 0 "verify-report of the scoped bundle" $D verify-report sc --pubkey k.pub.pem
run 1 "no-noise mutant under --scope dpsgd" $D certify --candidate "$PY $CAND --mutant no-noise" --suite ci --scope dpsgd --report sc-nn
expect "^verdict: FAILED \(scope dpsgd\) -- noise" "no-noise FAILED under --scope dpsgd"
run 2 "unknown --scope" $D certify --candidate "$PY $CAND" --scope dpsgd2
expect "unknown scope 'dpsgd2'" "bad scope named"
exit $fail

#!/usr/bin/env bash
# conformance/tests/certify_modes_slow.sh — other correct modes of the numpy candidate
# (conformance/adapters/python/examples/numpy_candidate.py) are CERTIFIED on the ci suite:
# exporting params_after = params - lr G instead of the private gradient (SGD vectors, the
# derived gradient's subtraction bound of docs/tolerances.md), and computing the DP-SGD step
# in float32 and declaring dtype f32 (no false alarm from the f32 tolerances, confident and
# dropped examples included). Their mutants: certify_mutants_slow.sh. About 25 s.
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
exit $fail

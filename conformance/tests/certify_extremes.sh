#!/usr/bin/env bash
# conformance/tests/certify_extremes.sh — a plot never decides certify (issue 27 §1, issue 29
# item 14): candidates far off the claim — 1000x the noise (the epsilon-vs-steps curve of the
# measured noise reaches epsilon 0, which a logarithmic axis cannot show), 100x, no noise, no
# clipping at all — each end FAILED (exit 1) with report.json, report.html (with its plots, a
# value the log axis cannot show left out with a note) and a signed bundle that verify-report
# verifies (exit 0, verdict FAILED recomputed). Before the fix, noise-scale:1000 exited 2 with
# "svg: y value 0 on a logarithmic axis" and no report.json. Deterministic given the verdicts
# (each mutant is off by orders of magnitude; the correct candidate's false-reject bound is the
# suite's union bound, 7e-6, and it is not run here).
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
"$D" keygen --private k.pem --public k.pub >/dev/null || { echo "FAIL: keygen"; exit 1; }
for m in noise-scale:1000 noise-scale:100 no-noise no-clip; do
  b="b-${m/:/-}"
  run 1 "certify --mutant $m" timeout 300 "$D" certify --candidate "$PY $CAND --mutant $m" --suite ci \
    --filter '^step-mlp-flat-abadi$' --report "$b" --sign k.pem
  expect '^verdict: FAILED' "$m: verdict FAILED"
  for f in report.json report.html report.json.sig; do
    [ -s "$b/$f" ] || { echo "FAIL: $m: no $f"; fail=1; }
  done
  grep -q '<svg' "$b/report.html" || { echo "FAIL: $m: report.html has no plot"; fail=1; }
  if grep -q 'not drawn:' "$b/report.html"; then echo "FAIL: $m: a plot was not drawn: $(grep -o 'not drawn:[^<]*' "$b/report.html")"; fail=1; fi
  run 0 "verify-report of the $m bundle" "$D" verify-report "$b" --pubkey k.pub
  expect 'verdict FAILED' "$m: verify-report recomputes FAILED"
done
grep -q 'not drawn on the logarithmic axis' b-noise-scale-1000/report.html ||
  { echo "FAIL: noise-scale:1000: no note for the epsilon values the log axis cannot show"; fail=1; }
exit $fail

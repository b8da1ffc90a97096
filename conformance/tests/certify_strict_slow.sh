#!/usr/bin/env bash
# conformance/tests/certify_strict_slow.sh — the strict level (docs/certification.md "Levels"):
# `--suite strict` runs the certify vectors with the repeats that give the pooled variance test
# power >= 0.999 against noise std 0.99 of the claim at alpha 1e-9 (6 repeats, 587 352 draws with
# the numpy candidate's vectors; about 25 s in persistent mode on the 2-core machine). A planted
# candidate at 0.99 of the claimed noise must be FAILED by the pooled noise variance test (it
# wrongly passes with probability <= 1e-3, the stated power); the correct candidate CERTIFIED
# (a false FAIL has probability <= the printed union bound, ~1e-7); noise missing on 1-D
# tensors FAILED by the per-tensor test. The report prints the smallest under-noising it detects.
# Skipped (77) without python3 + numpy.
set -u
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
run 1 "planted noise 0.99 of the claim, strict level" $D certify --candidate "$PY $CAND --mutant noise-scale:0.99" --candidate-mode persistent --suite strict --report under
expect "suite strict, [0-9]+ repeats, alpha 1e-09" "strict level: alpha 1e-9"
# the pooled test is the one with the stated power; a per-vector variance test (checked first,
# with less power) may also FAIL a 0.99 candidate and then names the verdict
expect "^verdict: FAILED -- noise variance \[" "noise 0.99 FAILED by a noise variance test"
expect "^FAIL +noise variance \[all step vectors and repeats\]" "noise 0.99 FAILED by the pooled variance test"
expect "^power: noise std <= 0\.99[0-9]* of the claim is FAILED with probability >= 0.999" "the smallest detectable under-noising is >= 0.99"
"$PY" - <<'PYEOF' || { echo "FAIL: power bound in under/report.json"; fail=1; }
import json
p = json.load(open("under/report.json"))["power_lower_bounds"]
print("power lower bounds:", {k: v for k, v in p.items() if "std" in k})
assert p["variance_vs_std_0.99"] >= 0.999 and p["detectable_std_at_power_0.999"] >= 0.99, p
PYEOF
run 0 "correct candidate, strict level" $D certify --candidate "$PY $CAND" --candidate-mode persistent --suite strict --report good
expect "^verdict: CERTIFIED$" "correct candidate CERTIFIED at the strict level"
run 1 "no noise on 1-D tensors, strict level" $D certify --candidate "$PY $CAND --mutant no-noise-1d" --candidate-mode persistent --suite strict --report n1d
expect "^FAIL +noise variance per tensor \[step-[a-z]+-[a-z0-9-]+ (layers.*bias|.*norm)" "strict: the per-tensor test names a 1-D tensor"
exit $fail

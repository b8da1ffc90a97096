#!/usr/bin/env bash
# conformance/tests/certify_level_slow.sh — the certify level's power claim end to end
# (docs/certification.md "Levels"): `dpcert certify --suite certify` restricted with --filter
# to the mlp DP-SGD step vectors (10 vectors, 17 540 noise draws per repeat; certify then
# raises the repeats to 4, n = 70 160, so that the variance test's guaranteed power against
# noise std 0.97 of the claim is >= 0.999 at alpha 1e-9: 0.999992). A planted candidate whose
# noise std is 0.97 of the claim must be FAILED by a noise check; the correct candidate must
# not be FAILED (its filtered run is INCOMPLETE, by coverage only). About 30-60 s.
# Skipped (77) without python3 + numpy (Debian: python3-numpy).
set -u
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
F='^step-(mlp|lin)-'
run 1 "planted noise 0.97 of the claim, certify level" $D certify --candidate "$PY $CAND --mutant noise-scale:0.97" --suite certify --filter "$F" --report under
expect "suite certify, 4 repeats, alpha 1e-09" "certify level: 4 repeats at alpha 1e-9"
expect "^verdict: FAILED -- noise variance" "noise 0.97 FAILED by the noise variance test"
"$PY" - <<'PYEOF' || { echo "FAIL: power bound in under/report.json"; fail=1; }
import json
r = json.load(open("under/report.json"))
p = r["power_lower_bounds"]
print("power lower bounds:", p)
k = [v for k, v in p.items() if "0.97" in k]
assert k and min(k) >= 0.999, "power against std 0.97 below 0.999"
pooled = [c for c in r["checks"] if c["check"] == "noise variance" and c["scope"].startswith("all")]
assert pooled and pooled[0]["status"] == "FAIL" and pooled[0]["n"] == 70160, pooled
PYEOF
run 1 "correct candidate, certify level" $D certify --candidate "$PY $CAND" --suite certify --filter "$F" --report good
expect "^verdict: INCOMPLETE -- coverage" "correct candidate: INCOMPLETE only because of the filter"
if grep -q "^FAIL" out.txt; then echo "FAIL: the correct candidate failed a check"; grep "^FAIL" out.txt | head -3; fail=1; fi
exit $fail

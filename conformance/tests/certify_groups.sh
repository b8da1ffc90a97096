#!/usr/bin/env bash
# conformance/tests/certify_groups.sh — group clipping in `dpcert certify` (docs/certification.md
# "Noise by tensor, clipping group and class"): the vector step-mlp-group-abadi (one clipping group
# per layer, weight and bias, each with its own threshold) makes the per-clipping-group family run.
# The numpy candidate passes every check of it (its filtered run of one vector is INCOMPLETE),
# with one `noise variance per clipping group` test per group; two deliberate group-clipping bugs
# are FAILED: every group clipped at C_total instead of its own R_m (group-thresh-total: the
# deterministic checks) and each group's noise sized by its own threshold, sigma R_m instead of
# sigma C_total (group-noise-own-r: the per-group noise test names the group). About 10 s.
# Skipped (77) without python3 + numpy (Debian: python3-numpy).
set -u
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
V='^step-mlp-group-abadi$'
$D vectors --suite ci --out vec >/dev/null || { echo "FAIL: dpcert vectors"; exit 1; }
"$PY" - <<'PYEOF' || { echo "FAIL: the group vector's metadata"; fail=1; }
import sys
sys.path.insert(0, __import__("os").environ["DPCERT_ROOT"] + "/conformance/adapters/python")
from dpcert_adapter import Vector
v = Vector.load("vec/step-mlp-group-abadi.safetensors")
pg, th = v.groups()
assert v.meta["clipping"] == "group", v.meta["clipping"]
members = {g: [p for p in pg if pg[p] == g] for g in th}
print("groups:", {g: (members[g], round(th[g], 4)) for g in th})
assert len(th) == 3 and all(len(m) == 2 for m in members.values()), members  # neither one tensor nor the whole model
assert len(set(round(r, 9) for r in th.values())) == 3, th                     # thresholds differ from group to group
assert abs(v.c_total - sum(r * r for r in th.values()) ** 0.5) < 1e-12 * v.c_total
PYEOF
run 1 "correct candidate on the group vector" $D certify --candidate "$PY $CAND" --suite ci --filter "$V" --report good
expect "^verdict: INCOMPLETE" "correct candidate: INCOMPLETE (a filtered run of one vector), not FAILED"
if grep -q "^FAIL" out.txt; then echo "FAIL: the correct candidate failed a check"; grep "^FAIL" out.txt | head -3; fail=1; fi
n=$(grep -cE "^\| noise variance per clipping group \| step-mlp-group-abadi group layers\.[0-2] \| PASS" good/report.md)
[ "$n" = 3 ] || { echo "FAIL: expected 3 passing per-group tests, got $n"; grep "per clipping group" good/report.md | head; fail=1; }
run 1 "group-thresh-total (every group clipped at C_total)" $D certify --candidate "$PY $CAND --mutant group-thresh-total" --suite ci --filter "$V" --report thresh
expect "^verdict: FAILED -- deterministic \[step-mlp-group-abadi r1 (per_sample.clip_factor.layers|step.clipped_sum)" "group-thresh-total caught by the deterministic checks"
run 1 "group-noise-own-r (noise sigma R_m per group)" $D certify --candidate "$PY $CAND --mutant group-noise-own-r" --suite ci --filter "$V" --report ownr
expect "^verdict: FAILED -- noise" "group-noise-own-r FAILED by a noise test"
expect "^FAIL +noise variance per clipping group \[step-mlp-group-abadi group layers\.[0-2]\]" "the per-group test names a group"
exit $fail

#!/usr/bin/env bash
# accountant/tests/acct_inputs.sh — the accountant's JSON inputs (docs/accounting.md): `account
# --schedule FILE` (a JSON array of 1..64 segments {mechanism, q, sigma|scale|epsilon0, steps})
# and `audit-accounting FILE.json` (an array of claims, or {"claims": [...]}), fast: each defect
# of a schedule exits 2 naming the file, the segment and the field; each defective claim row is
# INVALID naming the row and the field (exit 2), a whole file that is not claims exits 2. A
# two-segment pure schedule composes (basic epsilon the sum, 3), and its exact
# randomized-response answer is "n/a" with the reason (regression: it printed "nan").
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
# sched JSON PATTERN WHAT: `account --schedule` of JSON exits 2 with PATTERN
sched() {
  printf '%s' "$1" > s.json
  expect_exit 2 "s.json: $2" account --schedule s.json --delta 1e-5 --accountant rdp
}
sched '{"a": 1}' "expected a JSON array of segments"
sched '[]' "1\.\.64 segments expected \(got 0\)"
sched "[$(for i in $(seq 65); do printf '{"mechanism":"pure","q":1,"epsilon0":1,"steps":1},'; done | sed 's/,$//')]" "1\.\.64 segments expected \(got 65\)"
sched '[1]' "segment 1 is not an object"
sched '[{"q": 1}]' "segment 1: missing string field 'mechanism'"
sched '[{"mechanism": 3}]' "segment 1: missing string field 'mechanism'"
sched '[{"mechanism": "poisson"}]' "segment 1: unknown mechanism 'poisson'"
P='"mechanism": "pure", "q": 1, "epsilon0": 1'
sched "[{$P, \"steps\": 2.5}]" "segment 1: steps must be an integer in \[1, 1e12\] \(got 2.5\)"
sched "[{$P, \"steps\": 0}]" "segment 1: steps must be an integer in \[1, 1e12\]"
sched "[{$P, \"steps\": 2, \"sigma\": 1}]" "segment 1: field 'sigma' is not allowed for mechanism pure"
sched '[{"mechanism": "pure", "q": 1, "steps": 2}]' "segment 1: missing field 'epsilon0'"
sched '[{"mechanism": "laplace", "q": 1, "scale": "2", "steps": 2}]' "segment 1: field 'scale' is not a number"
sched '[{"mechanism": "gaussian", "q": 2, "sigma": 1, "steps": 2}]' "segment 1: q must be in \(0, 1\] \(got 2\)"
sched "[{\"mechanism\": \"pure\", \"q\": 1, \"epsilon0\": 0, \"steps\": 2}]" "segment 1: epsilon0 must be > 0 and finite \(got 0\)"
sched '[{"mechanism": "pure", "q": 1, "epsilon0": 1e999, "steps": 2}]' "'1e999' is not a finite number"
sched '[{"mechanism": ' "line 1: "
# two pure segments: basic composition 4 x 0.5 + 4 x 0.25 = 3; exact RR needs one per-step epsilon
printf '[{"mechanism":"pure","q":1,"epsilon0":0.5,"steps":4},{"mechanism":"pure","q":1,"epsilon0":0.25,"steps":4}]' > two.json
"$D" account --schedule two.json --delta 1e-5 --accountant pure >out.txt 2>err.txt; rc=$?
check "two pure segments: exit 0 (got $rc), basic 3" [ $rc = 0 ] && grep -q '^pure  epsilon: basic 3, advanced ' out.txt
check "  exact RR of unequal segments: n/a with the reason, never nan" \
  grep -q 'exact (randomized-response composition) n/a (exact pure-DP composition needs one per-step epsilon (segments 1 and 2 differ)' out.txt
check "  no nan printed" bash -c '! grep -qi "nan" out.txt'

# claims files in JSON
claims() { printf '%s' "$1" > c.json; expect_exit "$2" "$3" audit-accounting c.json; }
G='"mechanism": "gaussian", "q": 0.01, "sigma": 1, "steps": 10, "delta": 1e-5, "epsilon": 5'
claims "{\"claims\": [{$G, \"label\": \"mine\"}]}" 0 ""
check "a JSON claim with a label: CONSISTENT, the label shown" grep -Eq '^1 +mine +gaussian .*CONSISTENT' out.txt
claims '{"x": 1}' 2 "c.json: expected an array of claims \(or \{\"claims\": \[\.\.\.\]\}\)"
claims '[1]' 2 ""
check "a claim that is not an object: INVALID naming the row" grep -q 'INVALID row 1: not an object' out.txt
claims '[{"mechanism": "gaussian", "q": 0.01, "steps": 10, "delta": 1e-5, "epsilon": 5}]' 2 ""
check "a missing field: INVALID naming it" grep -q "INVALID row 1: field 'sigma': missing or not a number" out.txt
claims '[{"mechanism": "gaussian", "q": 0.01, "sigma": 1, "steps": 1.5, "delta": 1e-5, "epsilon": 5}]' 2 ""
check "fractional steps: INVALID naming them" grep -q "INVALID row 1: field 'steps': must be an integer >= 1 (got 1.5)" out.txt
claims '[{"mechanism": "bogus", "q": 0.01, "sigma": 1, "steps": 1, "delta": 1e-5, "epsilon": 5}]' 2 ""
check "an unknown mechanism: INVALID naming it" grep -q "INVALID row 1: field 'mechanism': missing or unknown" out.txt
claims "[{$G}, 7]" 2 ""
check "one bad row of two: the good row still judged, 1 invalid" grep -q '2 claims: 0 under-reported, 1 invalid' out.txt
echo "acct_inputs: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

#!/usr/bin/env bash
# conformance/tests/certify_dpzo_traj.sh — DP-ZO trajectory vectors (docs/certification.md
# "Trajectory tests"): dpzo-traj-lin asks for 12 consecutive DP-ZO steps of one run (256
# directions each). The numpy candidate passes every check of it (its filtered run is INCOMPLETE
# of one vector is INCOMPLETE) and both across-steps tests; its scalar noise drawn once per process and
# reused at every step (same-noise-steps) is FAILED by the scalar-noise test across steps, and a
# generator reseeded every epoch (reseed-epoch: directions and noise repeat after 10 steps) by
# the direction test across steps, in one-call and in persistent mode. About 20 s.
# Skipped (77) without python3 + numpy (Debian: python3-numpy).
set -u
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
V='^dpzo-traj-lin$'
run 1 "correct candidate on the DP-ZO trajectory" $D certify --candidate "$PY $CAND" --suite ci --filter "$V" --report good
expect "^verdict: INCOMPLETE" "correct candidate: INCOMPLETE (a filtered run of one vector), not FAILED"
if grep -q "^FAIL" out.txt; then echo "FAIL: the correct candidate failed a check"; grep "^FAIL" out.txt | head -3; fail=1; fi
for c in "dpzo direction" "dpzo scalar noise"; do
  grep -qE "^\| $c independence across trajectory steps \(every pair, worst\) \| dpzo-traj-lin r[0-9]+ steps [0-9]+ and [0-9]+ \| PASS" good/report.md ||
    { echo "FAIL: no passing '$c independence across trajectory steps' check"; fail=1; }
done
for mode in one-call persistent; do
  run 1 "$mode: same-noise-steps (DP-ZO)" $D certify --candidate "$PY $CAND --mutant same-noise-steps" --candidate-mode $mode --suite ci --filter "$V" --report sn-$mode
  expect "^verdict: FAILED" "$mode: same-noise-steps FAILED"
  expect "^FAIL +dpzo scalar noise independence across trajectory steps \(every pair, worst\) \[dpzo-traj-lin r[0-9]+ steps" "$mode: same-noise-steps caught across steps"
  run 1 "$mode: reseed-epoch (DP-ZO)" $D certify --candidate "$PY $CAND --mutant reseed-epoch" --candidate-mode $mode --suite ci --filter "$V" --report re-$mode
  expect "^verdict: FAILED" "$mode: reseed-epoch FAILED"
  expect "^FAIL +dpzo direction independence across trajectory steps \(every pair, worst\) \[dpzo-traj-lin r[0-9]+ steps [0-9] and 1[01]\]" "$mode: reseed-epoch caught across steps (an epoch apart)"
done
exit $fail

#!/usr/bin/env bash
# conformance/tests/certify_mutants_slow.sh — `dpcert certify` FAILs each deliberate mutant of the numpy candidate
# (conformance/adapters/python/examples/numpy_candidate.py), naming the check that caught it:
# no noise, clip after summing, noise 0.9 of the claim, the same noise every run, shuffled
# fixed-size batches, a wrong q; DP-ZO without noise on the scalars and with reused directions. Each run is filtered to the vectors that matter (about 60 s
# in all). Skipped (77) without python3 + numpy (Debian: python3-numpy).
set -u
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
mut() { # mutant filter pattern
  run 1 "mutant $1" $D certify --candidate "$PY $CAND --mutant $1" --suite ci --filter "$2" --report "m-$1"
  expect "^verdict: FAILED -- $3" "mutant $1 caught by $3"
}
mut no-noise 'step-mlp-batch1' "(noise|deterministic)"
mut clip-after-sum 'step-mlp-flat-abadi' "deterministic"
mut noise-scale:0.9 'step-mlp-flat-abadi' "noise variance"
mut fixed-noise 'step-mlp-flat-' "noise"
mut shuffle 'sampling' "batch sizes"
mut wrong-q:1.3 'sampling' "sampling rate"
# DP-ZO: no noise on the released scalars; the same directions in every run
mut no-noise 'dpzo-mlp$' "dpzo scalar noise variance"
mut fixed-dirs 'dpzo-mlp$' "dpzo direction freshness"
mut no-drop 'dpzo-mlp-nonfinite' "deterministic \[dpzo-mlp-nonfinite r1 per_sample.diff_clipped"
# params_after in place of the private gradient (SGD vectors): the derived gradient is judged
# like an exported one
run 1 "params-after clip-after-sum" $D certify --candidate "$PY $CAND --params-after --mutant clip-after-sum" --suite ci --filter 'step-mlp-flat-abadi' --report pa-cas
expect "^verdict: FAILED -- deterministic" "params-after clip-after-sum caught by deterministic"
run 1 "params-after noise 0.9" $D certify --candidate "$PY $CAND --params-after --mutant noise-scale:0.9" --suite ci --filter 'step-mlp-flat-abadi' --report pa-ns
expect "^verdict: FAILED -- noise variance" "params-after noise 0.9 caught by noise variance"
# the correct candidate on a filtered run is at best INCOMPLETE
run 1 "filtered run" $D certify --candidate "$PY $CAND" --suite ci --filter sampling --report part
expect "^verdict: INCOMPLETE" "a partial run is INCOMPLETE"
expect "^INCOMPLETE coverage" "the coverage check says why"

exit $fail

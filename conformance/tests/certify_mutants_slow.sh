#!/usr/bin/env bash
# conformance/tests/certify_mutants_slow.sh — `dpcert certify` FAILs each deliberate mutant of the numpy candidate
# (conformance/adapters/python/examples/numpy_candidate.py), naming the check that caught it:
# no noise, clip after summing, noise 0.9 of the claim, the same noise every run, shuffled
# fixed-size batches, a wrong q. Each run is filtered to the vectors that matter (about 60 s
# in all). Skipped (77) without python3 + numpy (Debian: python3-numpy).
set -u
D=${DPCERT:?}
ROOT=${DPCERT_ROOT:?}
CAND=$ROOT/conformance/adapters/python/examples/numpy_candidate.py
$D certify --help >/dev/null 2>&1 || { echo "SKIP: dpcert certify not available"; exit 77; }
PY=""
for p in ${DPCERT_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' >/dev/null 2>&1; then PY=$(command -v "$p"); break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy (apt-get install python3-numpy)"; exit 77; }
echo "python: $PY"
fail=0
run() { # expected-exit description args...
  local want=$1 what=$2; shift 2
  "$@" > out.txt 2>&1; local rc=$?
  if [ $rc -ne $want ]; then echo "FAIL: $what: exit $rc, expected $want"; sed 's/^/  | /' out.txt | tail -12; fail=1
  else echo "ok: $what (exit $rc)"; fi
}
expect() { # pattern description
  grep -qE "$1" out.txt || { echo "FAIL: $2: no line matching '$1'"; sed 's/^/  | /' out.txt | tail -8; fail=1; }
}
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
# the correct candidate on a filtered run is at best INCOMPLETE
run 1 "filtered run" $D certify --candidate "$PY $CAND" --suite ci --filter sampling --report part
expect "^verdict: INCOMPLETE -- coverage" "a partial run is INCOMPLETE"

exit $fail

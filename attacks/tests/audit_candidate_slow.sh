#!/usr/bin/env bash
# attacks/tests/audit_candidate_slow.sh — `dpcert audit --candidate CMD`: the certification
# protocol (CMD IN OUT, common/candidate.h) with the reference as the candidate
# (`dpcert audit reference-candidate`). 60 trials per side (18 to pick the threshold; one
# process per trial): the
# correct candidate PASSes (false FAIL <= 0.05 over its noise), a candidate that clips at
# 1e6 C with the noise of C (negative control: the input canary's gradient norm >= 4 C is
# unclipped, mu >= 4 against the claimed 1, caught with probability > 0.999 at 42 evaluation
# trials per side) FAILs; candidates that fail (exit 1, no output, garbage output) give an
# INVALID verdict (exit 1) naming the outcome; bad input exits 2.
set -u
D=${DPCERT:?}
. "${DPCERT_ROOT:?}/attacks/tests/cli_check.inc"
cli_require audit
small="--in 8 --hidden 16 --classes 4 --dataset-size 8 --level custom --trials 60 --calib-frac 0.3 --quiet --noise-key 1"
check 0 "reference as a candidate" $D audit --candidate "$D audit reference-candidate" $small --report rep
sed 's/^/  | /' out.txt
grep -q '"impl": "candidate"' rep/report.json || { echo "FAIL: report.json does not name the candidate"; fail=1; }
DPCERT_TEST_INJECT=1 DPCERT_AUDIT_CANDIDATE_BUG=no-clip check 1 "candidate without clipping caught" \
  $D audit --candidate "$D audit reference-candidate" $small
grep -q "verdict: FAIL" out.txt || { echo "FAIL: no FAIL verdict"; fail=1; }
check 1 "candidate exits 1" $D audit --candidate "false" $small
grep -q "INVALID.*EXIT" out.txt || { echo "FAIL: no INVALID verdict naming EXIT"; fail=1; }
check 1 "candidate writes nothing" $D audit --candidate "true" $small
grep -q "INVALID.*NO_OUTPUT" out.txt || { echo "FAIL: no INVALID verdict naming NO_OUTPUT"; fail=1; }
printf '#!/bin/sh\necho garbage > "$2"\n' > garbage.sh; chmod +x garbage.sh
check 1 "candidate writes garbage" $D audit --candidate "./garbage.sh" $small
grep -q "INVALID.*BAD_OUTPUT" out.txt || { echo "FAIL: no INVALID verdict naming BAD_OUTPUT"; fail=1; }
check 2 "candidate with q < 1" $D audit --candidate "true" $small --q 0.5
check 2 "candidate with --impl reference" $D audit --candidate "true" --impl reference $small
check 2 "candidate with a dirac canary" $D audit --candidate "true" $small --canary dirac
exit $fail

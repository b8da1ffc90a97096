#!/usr/bin/env bash
# attacks/tests/mia_options.sh — `dpcert mia`'s option rules (attacks/mia_cmd.c, mia_train.c,
# docs/audits.md "Membership inference"), fast (each is refused before any model is trained):
# every out-of-range value and every combination mia does not define exits 2 with the message
# naming the option and the rule; the test-only --plant is refused without DPCERT_TEST_INJECT=1.
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
"$D" mia --help >/dev/null 2>&1 || { echo "SKIP: dpcert mia not built"; exit 77; }
unset DPCERT_TEST_INJECT
expect() { expect_exit 2 "$1" mia --quiet "${@:2}"; } # expect PATTERN ARGS...: `dpcert mia --quiet ARGS` exits 2 with PATTERN
expect "--plant: unknown 'bogus' \(expected no-noise\)" --plant bogus
expect "--plant no-noise is a test-only broken run: it needs DPCERT_TEST_INJECT=1" --plant no-noise
expect "--threads must be in \[1, 256\] \(got 0\)" --threads 0
expect "--threads must be in \[1, 256\] \(got 257\)" --threads 257
expect "--hidden must be in \[1, 65536\] \(got 0\)" --hidden 0
expect "--population must be >= 8 \(got 4\)" --population 4
for m in 2 5 2048; do expect "--models must be even and in \[4, 1024\] \(got $m\)" --models $m; done
expect "--zo-steps must be >= 1 \(got 0\)" --zo-steps 0
expect "--epsilons must be > 0 \(got -1\)" --epsilons -1
expect "--epsilons must be > 0 \(got 0\)" --epsilons 8,0
expect "--epsilons: more than 8 elements" --epsilons 1,2,3,4,5,6,7,8,9
expect "--epsilons: 'none' is not a number" --epsilons none
expect "--candidate and --impl exclude each other" --candidate true --impl reference
expect "--level: unknown value 'weekly' \(expected ci\|certify\)" --level weekly
expect "--q must be in \(0, 1\] \(got 2\)" --q 2
expect "--impl" --impl gpu
echo "mia_options: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

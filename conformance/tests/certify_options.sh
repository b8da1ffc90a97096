#!/usr/bin/env bash
# conformance/tests/certify_options.sh — the option rules of `dpcert certify`, `keygen` and
# `verify-report` (conformance/certify/cmd_certify.c, docs/certification.md), fast (no vector is
# run): a missing --candidate, an unknown --suite, --repeats / --timeout / --run-timeout /
# --alpha out of range, an unknown --scope, an invalid --filter regular expression, and a
# --filter/--scope that leaves no vector each exit 2 with a message naming the option; bad usage
# leaves nothing behind (regression: the emptied REPORT/vectors and, without --report, a
# dpcert-certify-* directory in TMPDIR were left); keygen without --public and verify-report
# without DIR or --pubkey, or with a second DIR, exit 2.
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
expect() { expect_exit "$@"; }
C=(certify --candidate true --suite ci)
expect 2 "--candidate CMD is required" certify --suite ci
expect 2 "option --candidate needs a value" certify --candidate "" --suite ci
expect 2 "--suite must be ci, certify or strict, got 'weekly'" certify --candidate true --suite weekly
expect 2 "--repeats must be in \[1, 1000\] \(got 0\)" "${C[@]}" --repeats 0
expect 2 "--repeats must be in \[1, 1000\]" "${C[@]}" --repeats 1001
expect 2 "--timeout must be in \(0, 86400\] \(got -1\)" "${C[@]}" --timeout -1
expect 2 "--timeout must be in \(0, 86400\]" "${C[@]}" --timeout 0
expect 2 "--run-timeout must be in \(0, 604800\] \(got -1\)" "${C[@]}" --run-timeout -1
expect 2 "--alpha must be in \(0, 0.01\] \(got 0.5\)" "${C[@]}" --alpha 0.5
expect 2 "--alpha must be in \(0, 0.01\]" "${C[@]}" --alpha -1e-3
expect 2 "--candidate-mode" "${C[@]}" --candidate-mode forked
expect 2 "--scope: unknown scope 'dpxx' \(all, dpsgd or dpzo\)" "${C[@]}" --scope dpxx
expect 2 "--filter: invalid regular expression '\('" "${C[@]}" --filter "("
mkdir -p tmp
TMPDIR=$PWD/tmp expect 2 "--filter '\^nomatch\\$' --scope all: no vector left" "${C[@]}" --filter '^nomatch$' --report r1
check "  no vector left: the report directory holds nothing (no empty vectors/)" [ -z "$(ls -A r1 2>/dev/null)" ]
expect 2 "--filter '\^step-mlp-batch1\\$' --scope dpzo: no vector left" "${C[@]}" --filter '^step-mlp-batch1$' --scope dpzo --report r2
check "  a DP-SGD vector under --scope dpzo: nothing left behind" [ -z "$(ls -A r2 2>/dev/null)" ]
TMPDIR=$PWD/tmp "$D" "${C[@]}" --filter '^nomatch$' >out.txt 2>err.txt; rc=$?
check "without --report: exit 2 (got $rc) and no dpcert-certify-* directory left in TMPDIR" [ $rc = 2 ] && [ -z "$(ls -A tmp)" ]
expect 2 "--private and --public are required" keygen --private k.pem
expect 2 "--private and --public are required" keygen --public k.pub
check "  keygen with a missing option writes no key" [ ! -e k.pem ] && [ ! -e k.pub ]
expect 2 "expected DIR and --pubkey FILE" verify-report
expect 2 "expected DIR and --pubkey FILE" verify-report r1
expect 2 "unexpected argument 'b'" verify-report a b --pubkey x
echo "certify_options: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

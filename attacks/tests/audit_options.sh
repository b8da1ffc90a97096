#!/usr/bin/env bash
# attacks/tests/audit_options.sh — `dpcert audit`'s configuration rules (attacks/audit_setup.c
# audit_config_check, docs/audits.md), fast (each is refused before any trial runs): every
# out-of-range value and every combination the audit does not define exits 2 with the message
# naming the option and the rule (attacks/tests/audit_cli.sh checks the exit codes of a few of
# these; this checks the words, and the rules it leaves out: K-step audits, threads, the
# calibration split, canaries per implementation and model, clip-after-sum, the candidate's needs).
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
"$D" audit --help >/dev/null 2>&1 || { echo "SKIP: dpcert audit not built"; exit 77; }
unset DPCERT_TEST_INJECT
# expect PATTERN ARGS...: `dpcert audit --level custom --trials 100 --quiet ARGS` exits 2 with PATTERN
expect() { expect_exit 2 "$1" audit --level custom --trials 100 --quiet "${@:2}"; }
expect "--steps must be in \[1, 10\^6\] \(got 0\)" --steps 0
expect "--steps must be in \[1, 10\^6\] \(got 1000001\)" --steps 1000001
expect "--steps 2: K-step audits are DP-SGD on the reference or the engine" --steps 2 --algo dpzo
expect "--steps 2: K-step audits are DP-SGD on the reference or the engine" --steps 2 --impl candidate --candidate true
expect "--dataset-size must be >= 1 \(got 0\)" --dataset-size 0
expect "--threads must be in \[1, 256\] \(got 0\)" --threads 0
expect "--threads must be in \[1, 256\] \(got 300\)" --threads 300
expect "--trials 100 with --calib-frac 0.001 leaves 0 calibration and 100 evaluation trials" --calib-frac 0.001
expect "--calib-frac must be in \(0, 1\)" --calib-frac 1
expect "--confidence must be in \(0, 1\) \(got 1\)" --confidence 1
expect "--q must be in \(0, 1\]" --q 0
expect "--clip must be > 0" --clip 0
expect "--sigma must be > 0" --sigma 0
expect "--phi must be > 0" --algo dpzo --phi 0
expect "--canary-scale must be >= 1 \(got 0.5\)" --canary-scale 0.5
expect "--canary anti needs the reference's gradient hook; --impl optimized takes --canary input" --impl optimized --canary anti
expect "--canary dirac: the DP-ZO release is a scalar; only --canary input applies" --algo dpzo --canary dirac
expect "--canary input is defined for --model mlp only" --model llama --canary input
expect "--impl candidate needs --candidate 'CMD'" --impl candidate
expect "--impl candidate: the step vectors carry the batch \(DP-SGD, --q 1, no --plant\)" --impl candidate --candidate true --q 0.5
expect "--impl candidate: the step vectors carry the batch" --impl candidate --candidate true --algo dpzo
expect "--timeout must be > 0" --impl candidate --candidate true --timeout 0
expect "--canary-param nosuch: the model has no such parameter" --canary-param nosuch
expect "--canary-param/--canary-elem: the model has no element 99999" --canary-elem 99999
echo "audit_options: $checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

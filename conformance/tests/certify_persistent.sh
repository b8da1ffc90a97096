#!/usr/bin/env bash
# conformance/tests/certify_persistent.sh — `--candidate-mode persistent` (docs/certification.md
# "Persistent candidates") and the newcomer's messages (§4 of issue 27):
#  - the numpy candidate (dpcert_adapter.run) CERTIFIED on the ci suite by ONE process
#    (outputs/candidate.p1.log only), the whole run's verdict the same as in one-call mode;
#  - hostile persistent candidates, each named in the verdict: no READY (exits 0: PROTOCOL;
#    every call alike: "could not start"), a crash during a request (EXIT, the request named),
#    a wrong reply (PROTOCOL), an ERROR reply (FAILED, the process serves on), a hang
#    (TIMEOUT: INCOMPLETE), the whole-run limit (TIMEOUT);
#  - a one-call candidate that cannot start (every call exits 1 before writing output): the
#    verdict says "could not start" and quotes its stderr;
#  - `dpcert audit --candidate-mode persistent` with the reference candidate: PASS, and its
#    no-clip bug FAILed (the same as one-call mode).
# Skipped (77) without python3 + numpy.
set -u
. "${DPCERT_ROOT:?}/conformance/tests/certify_lib.bash"
one='^step-mlp-batch1$'
run 0 "numpy candidate, persistent, ci suite" $D certify --candidate "$PY $CAND" --candidate-mode persistent --suite ci --report pers
expect "^verdict: CERTIFIED$" "persistent numpy candidate CERTIFIED"
expect "candidate mode persistent" "the mode is printed"
[ -e pers/outputs/candidate.p1.log ] && [ ! -e pers/outputs/candidate.p2.log ] || { echo "FAIL: not exactly one candidate process"; ls pers/outputs | grep log; fail=1; }
ls pers/outputs | grep -q '\.r1\.log$' && { echo "FAIL: per-run logs in persistent mode"; fail=1; }
mk() { printf '#!/bin/sh\n%s\n' "$2" > "$1"; chmod +x "$1"; }
T='IFS="$(printf "\\t")"'
mk noready.sh 'echo hello; exit 0'
run 1 "no READY" $D certify --candidate ./noready.sh --candidate-mode persistent --suite ci --filter "$one" --report h1
expect "^verdict: FAILED -- candidate start .*could not start.*PROTOCOL persistent candidate exited 0 without READY" "no READY: could not start"
mk crash.sh "echo READY >&3; while $T read -r s i o; do echo 'about to crash' >&2; kill -SEGV \$\$; done"
run 1 "crash during a request" $D certify --candidate ./crash.sh --candidate-mode persistent --suite ci --filter "$one" --report h2
expect "^verdict: FAILED -- candidate output \[step-mlp-batch1 r1\]: EXIT: .*signal 11.* during request 1 \(.*step-mlp-batch1.safetensors\); its output ends: about to crash" "crash: request named, stderr quoted"
[ -s h2/outputs/candidate.p2.log ] || { echo "FAIL: no fresh process after the crash"; fail=1; }
mk wrong.sh "echo READY >&3; while $T read -r s i o; do echo 'x' > \"\$o\"; echo \"7\$s OK\" >&3; done"
run 1 "wrong reply" $D certify --candidate ./wrong.sh --candidate-mode persistent --suite ci --filter "$one" --report h3
expect "PROTOCOL: request 1 \(.*\): wrong reply '71 OK'" "wrong reply named"
mk err.sh "echo READY >&3; while $T read -r s i o; do echo \"\$s ERROR ValueError: bad vector\" >&3; done"
run 1 "ERROR reply" $D certify --candidate ./err.sh --candidate-mode persistent --suite ci --filter "$one" --report h4
expect "EXIT: request 1: candidate replied ERROR ValueError: bad vector" "ERROR reply named"
[ ! -e h4/outputs/candidate.p2.log ] || { echo "FAIL: an ERROR reply restarted the process"; fail=1; }
mk hang.sh "echo READY >&3; while $T read -r s i o; do sleep 30; done"
run 1 "hang" $D certify --candidate ./hang.sh --candidate-mode persistent --suite ci --filter "$one" --timeout 1 --report h5
expect "^verdict: INCOMPLETE -- candidate output \[step-mlp-batch1 r1\]: TIMEOUT: request 1 .*no reply within the time limit" "hang: TIMEOUT"
run 1 "whole-run limit" $D certify --candidate ./hang.sh --candidate-mode persistent --suite ci --filter "$one" --timeout 30 --run-timeout 1 --report h6
expect "TIMEOUT: .*whole-run time limit" "whole-run limit"
# one-call mode: a candidate that cannot start (a missing module, say)
mk nostart.sh "echo 'Traceback (most recent call last):' >&2; echo \"ModuleNotFoundError: No module named 'numpy'\" >&2; exit 1"
run 1 "one-call candidate that cannot start" $D certify --candidate ./nostart.sh --suite ci --filter 'step-mlp-(batch1|empty)' --report h7
expect "^verdict: FAILED -- candidate start \[every vector and repeat\]: every call \(4\) failed the same way .*could not start.*ModuleNotFoundError: No module named 'numpy'" "could not start, stderr quoted"
# negative control: a candidate failing one vector only is not "could not start"
mk some.sh "case \"\$1\" in *empty*) exit 1;; esac; exec $PY $CAND \"\$@\""
run 1 "one vector fails" $D certify --candidate ./some.sh --suite ci --filter 'step-mlp-(batch1|empty)' --report h8
if grep -q "candidate start" out.txt; then echo "FAIL: one failing vector reported as could not start"; fail=1; fi
# audit through a persistent candidate
small="--in 8 --hidden 16 --classes 4 --dataset-size 8 --level custom --trials 60 --calib-frac 0.3 --quiet --noise-key 1"
run 0 "audit, reference candidate, persistent" $D audit --candidate "$D audit reference-candidate" --candidate-mode persistent $small --report aud
expect "^verdict: PASS" "persistent audit PASS"
grep -q '"candidate_mode": "persistent"' aud/report.json || { echo "FAIL: report.json lacks the candidate mode"; fail=1; }
DPCERT_TEST_INJECT=1 DPCERT_AUDIT_CANDIDATE_BUG=no-clip run 1 "audit, no-clip bug, persistent" \
  $D audit --candidate "$D audit reference-candidate" --candidate-mode persistent $small
expect "verdict: FAIL" "persistent audit catches the no-clip candidate"
exit $fail

#!/usr/bin/env bash
# conformance/tests/conform_inject.sh — each injected bug of the optimized engine
# (--inject-bug clip-after-sum | noise-every-rank | realized-batch-divisor) makes the
# runner's comparison FAIL naming the broken tensor. The negative-control cases are copied
# with their "expect" clause (the runner sets DPCERT_TEST_INJECT=1, which --inject-bug
# requires, for negative controls only) but with the tensor prefix removed, so the raw
# verdict is checked here: the detail must name the tensor. A correct run of the same case
# (no bug, no "expect") must PASS (the control for this test). Exit 77 when the commands are absent.
set -u
D=${DPCERT:?}
R=${DPCERT_ROOT:?}
for c in "conform --help" "reference dpsgd --help" "train --help"; do
  out=$($D $c 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "SKIP: 'dpcert $c' is not available in $D (exit $rc: $out)"; exit 77; fi
done
command -v python3 >/dev/null || { echo "SKIP: python3 needed to edit the case files"; exit 77; }
mkdir -p cases
python3 - "$R/conformance/cases" <<'PY'
import json, sys
for name, bug in [("neg-clip-after-sum", "clip-after-sum"), ("neg-noise-every-rank", "noise-every-rank"),
                  ("neg-realized-batch-divisor", "realized-batch-divisor")]:
    c = json.load(open(f"{sys.argv[1]}/{name}.json"))
    c["expect"] = {"status": "FAIL"}
    c["name"] = "bug-" + bug; c["suites"] = ["inject"]
    json.dump(c, open(f"cases/bug-{bug}.json", "w"))
    # the control is about the bug; clip coverage of these cases is not the question here
    c.pop("candidate_args"); c.pop("expect"); c["clip_mix"] = False; c["name"] = "nobug-" + bug; c["suites"] = ["control"]
    json.dump(c, open(f"cases/nobug-{bug}.json", "w"))
PY
fail=0
if ldd "$D" 2>/dev/null | grep -q libasan; then
  # ASan build: Open MPI's dlopen'ed components leak at exit under mpirun (LSan cannot name
  # them), and the noise-every-rank bug needs 2 ranks: leak detection off for this test.
  echo "ASan build: detect_leaks=0 for the mpirun runs (Open MPI components)"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
$D conform --suite control --cases cases > control.out 2>&1; rc=$?
cat control.out
[ $rc -eq 0 ] || { echo "FAIL: the cases without the bug do not pass (exit $rc)"; fail=1; }
$D conform --suite inject --cases cases > inject.out 2>&1; rc=$?
cat inject.out
[ $rc -eq 0 ] || { echo "FAIL: injected bugs: conform exited $rc, expected 0 (every bug caught)"; fail=1; }
for pat in "bug-clip-after-sum@r1 .*PASS .*failed as expected: FAIL step-[0-9]+/step.clipped_sum\." \
           "bug-noise-every-rank@r2 .*PASS .*failed as expected: FAIL step-[0-9]+/step.noise\." \
           "bug-realized-batch-divisor@r1 .*PASS .*failed as expected: FAIL step-[0-9]+/step.private_grad\."; do
  grep -Eq "$pat" inject.out || { echo "FAIL: no line matching '$pat'"; fail=1; }
done
[ $fail -eq 0 ] && echo "PASS: every injected bug caught, naming its tensor"
exit $fail

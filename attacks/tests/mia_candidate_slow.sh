#!/usr/bin/env bash
# attacks/tests/mia_candidate_slow.sh — `dpcert mia --candidate CMD` with the numpy candidate
# of the certification protocol (conformance/adapters/python/examples/numpy_candidate.py): one
# python process per training step, so the configuration is small (32 generated examples with
# random labels, 4 models per run, 10 full-batch steps: 2 runs x 4 models x 10 = 80 calls, about
# 25 s on the shared 2-core machine). The non-DP control leaks (AUC 0.94 on the engine at this
# configuration; the leak check is at alpha 1e-3), the DP-SGD run at eps 8 respects its bound
# (a false FAIL has probability <= 0.05), the verdict is PASS and models/s is stated. Skipped
# (77) without python3 + numpy (Debian: python3-numpy, ci/install-deps.sh).
set -u
D=${DPCERT:?}
. "${DPCERT_ROOT:?}/attacks/tests/cli_check.inc"
cli_require mia
CAND=$DPCERT_ROOT/conformance/adapters/python/examples/numpy_candidate.py
PY=""
for p in ${DPCERT_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' >/dev/null 2>&1; then PY=$(command -v "$p"); break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy (apt-get install python3-numpy)"; exit 77; }
small="--population 32 --models 4 --steps 10 --q 1 --epsilons 8 --noise-key 2"
check 0 "numpy candidate" $D mia $small --candidate "$PY $CAND" --report rep
sed 's/^/  | /' out.txt | grep -v "models trained"
grep -q "^verdict: PASS" out.txt || { echo "FAIL: no PASS verdict"; fail=1; }
grep -q "candidate .*models/s" out.txt || { echo "FAIL: no models/s"; fail=1; }
grep -q "mia: [0-9]*/8 models trained" out.txt || { echo "FAIL: no progress lines"; fail=1; }
grep -q '"impl": "candidate"' rep/report.json || { echo "FAIL: report.json does not name the candidate"; fail=1; }
exit $fail

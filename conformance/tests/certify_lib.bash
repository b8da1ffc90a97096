# conformance/tests/certify_lib.bash — sourced by the certify scripts that need the numpy
# candidate (not a test: run-tests.sh runs *.sh only). Sets D, ROOT, CAND, PY (a python3 with
# numpy, else exit 77), fail=0, and run / expect.
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

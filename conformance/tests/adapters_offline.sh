#!/usr/bin/env bash
# conformance/tests/adapters_offline.sh — what the library adapters of `make test-peers`
# (conformance/adapters/python, docs/certification.md "Peers") can check without PyPI:
# their shared model (array_models) and helpers against the numpy candidate
# (tests/offline_check.py), the adapters and peer scripts compile, and `make test` never
# reaches the peers (no pip, no venv). Skipped (77) without python3 + numpy.
set -u
. "$(dirname "$0")/certify_lib.bash"
A=$ROOT/conformance/adapters/python
export PYTHONPYCACHEPREFIX="$PWD/pycache"  # byte code into this test's directory, never the source tree
$D vectors --suite certify --out vec >/dev/null || { echo "FAIL: dpcert vectors"; exit 1; }
"$PY" "$A/tests/offline_check.py" vec || fail=1
# every adapter and peer script is valid Python (they import their libraries, so no import here)
"$PY" -m py_compile "$A"/examples/*_candidate.py "$A"/peers_io_check.py "$ROOT"/ci/peers/*.py || { echo "FAIL: py_compile"; fail=1; }
bash -n "$A/peers.sh" || { echo "FAIL: peers.sh syntax"; fail=1; }
# the peers stay out of make test: no test script installs from PyPI or runs peers.sh
if grep -lE 'pip install|peers\.sh|peers-venv' "$ROOT"/*/tests/*.sh | grep -v adapters_offline.sh; then
  echo "FAIL: a make-test script reaches PyPI or the peers (listed above)"; fail=1
fi
[ $fail = 0 ] && echo "adapters_offline: ok"
exit $fail

#!/usr/bin/env bash
# conformance/tests/readme_venv.sh — the README tour's Python lines run as written (issue 27 §4):
# they are taken from README.md (the venv creation and adapter install, keygen, certify through
# the installed `dpcert-numpy-candidate` entry point in persistent mode, verify-report, and
# audit-accounting on the shipped claims file) and run in a scratch copy of the files they name,
# with `build/dpcert` -> $DPCERT and PATH without any python3 (a machine whose python3 is not
# the one with the adapter: the entry point names its own interpreter). The venv uses the
# system's numpy (--system-site-packages) and pip builds without isolation: nothing is fetched
# from PyPI. Skipped (77) without /usr/bin/python3 with numpy, venv and setuptools.
set -u
D=${DPCERT:?}
ROOT=${DPCERT_ROOT:?}
/usr/bin/python3 -c 'import numpy, setuptools, venv, ensurepip' >/dev/null 2>&1 ||
  { echo "SKIP: /usr/bin/python3 with numpy, setuptools, venv and ensurepip needed"; exit 77; }
mkdir -p conformance/adapters accountant && cp -r "$ROOT/conformance/adapters/python" conformance/adapters/ &&
  cp -r "$ROOT/accountant/examples" accountant/ || { echo "FAIL: cannot copy the adapter"; exit 1; }
# the tour's lines (continuation lines joined), from the keygen line to the audit-accounting line
awk '/^```sh$/{on=1; next} /^```$/{on=0} on' "$ROOT/README.md" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' |
  grep -E '^(build/dpcert (keygen|certify|verify-report|audit-accounting)|python3 -m venv)' | sed 's/ *#.*$//' > tour.txt
n=$(wc -l < tour.txt)
[ "$n" -eq 5 ] || { echo "FAIL: expected 5 tour lines in README.md, found $n"; cat tour.txt; exit 1; }
fail=0
mkdir -p out bin
ln -s /usr/bin/python3 bin/python3 # only for the line that creates the venv; the certify line finds none
while IFS= read -r line; do
  cmd=${line//build\/dpcert/$D}
  if [[ $line == python3* ]]; then p=$PWD/bin:/usr/bin:/bin; else p=/nonexistent-python-dir:/bin; fi
  echo "\$ $line"
  env PATH="$p" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 bash -c "$cmd" > step.txt 2>&1; rc=$?  # no PyPI
  tail -3 step.txt | sed 's/^/  | /'
  case "$line" in
    *certify*) grep -q '^verdict: CERTIFIED$' step.txt && [ $rc -eq 0 ] || { echo "FAIL: certify not CERTIFIED (exit $rc)"; fail=1; } ;;
    *audit-accounting*) grep -q '7 claims: 0 under-reported, 0 invalid' step.txt && [ $rc -eq 0 ] || { echo "FAIL: audit-accounting (exit $rc)"; fail=1; } ;;
    *) [ $rc -eq 0 ] || { echo "FAIL: exit $rc"; fail=1; } ;;
  esac
done < tour.txt
[ -x out/venv/bin/dpcert-numpy-candidate ] || { echo "FAIL: no dpcert-numpy-candidate entry point"; fail=1; }
# negative control: without the venv's entry point, python3 from a PATH without numpy cannot start
printf '#!/bin/sh\nexec /usr/bin/env python3 -c "import numpy_missing_module_xyz"\n' > bin/nonumpy; chmod +x bin/nonumpy
"$D" certify --candidate bin/nonumpy --suite ci --filter '^step-mlp-batch1$' --report out/bad > bad.txt 2>&1
grep -q "could not start.*No module named 'numpy_missing_mod" bad.txt || { echo "FAIL: no could-not-start message"; tail -2 bad.txt; fail=1; }
exit $fail

#!/usr/bin/env bash
# common/tests/fuzz_parsers_slow.sh — build every libFuzzer target (`make fuzz`), then run that
# of every parser (safetensors; issue 15, class 9: case files, DP-ZO update logs, claims CSV/JSON)
# for FUZZ_SECONDS (default 10) from its seed corpus. Skipped (77) without clang's libFuzzer.
# A crash or a violated property fails the test; the reproducer is printed in hex (save it
# as bad_<name> in the target's corpus directory so test_safetensors_corpus / test_fuzz_corpora
# replay it from then on).
set -u
ROOT=${DPCERT_ROOT:?run through ci/run-tests.sh}
BUILD=${DPCERT_BUILD:?run through ci/run-tests.sh}
SECS=${FUZZ_SECONDS:-10}
if ! grep -q '^HAVE_LIBFUZZER := 1' "$BUILD/config.mk" 2>/dev/null; then
  echo "SKIP: clang libFuzzer not available (see $BUILD/banner.txt)"
  exit 77
fi
targets="common/fuzz/fuzz_safetensors:common/tests/data/safetensors-corpus
conformance/fuzz/fuzz_cases:conformance/tests/data/cases-corpus
reference/fuzz/fuzz_dpzo_log:reference/tests/data/dpzo-log-corpus
accountant/fuzz/fuzz_claims:accountant/tests/data/claims-corpus"
# `make fuzz` builds every target (<module>/fuzz/fuzz_*.c, also one not run below): none can rot
make -C "$ROOT" --no-print-directory BUILD="$BUILD" fuzz >build.log 2>&1 || { tail -40 build.log; echo "FAIL: make fuzz"; exit 1; }
fails=0
for t in $targets; do
  name=$(basename "${t%%:*}"); F="$BUILD/fuzz/${t%%:*}"; seeds="$ROOT/${t##*:}"
  mkdir -p "corpus-$name" "art-$name"
  "$F" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="art-$name/" \
    "corpus-$name" "$seeds" >"$name.log" 2>&1
  rc=$?
  runs=$(grep -m1 'stat::number_of_executed_units' "$name.log" | awk '{print $2}')
  if [ "$rc" != 0 ]; then
    fails=$((fails + 1)); tail -n 20 "$name.log"; echo "FAIL: $name exited with $rc"
    for c in art-$name/*; do [ -f "$c" ] && { echo "reproducer $c:"; od -An -tx1 -v "$c" | head -n 40; }; done
  elif [ -z "$runs" ] || [ "$runs" -lt 1000 ]; then
    fails=$((fails + 1)); echo "FAIL: $name ran only '${runs}' inputs"
  else
    echo "ok   $name: $runs inputs in ${SECS}s, no crash, no violated property"
  fi
done
[ "$fails" = 0 ]

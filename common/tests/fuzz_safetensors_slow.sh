#!/usr/bin/env bash
# common/tests/fuzz_safetensors_slow.sh — build the libFuzzer target for the
# safetensors reader (`make fuzz`) and run it for FUZZ_SECONDS (default 20)
# starting from the seed corpus. Skipped (77) when clang's libFuzzer is absent.
# A crash or property violation fails the test; the reproducer is printed in hex
# (save it as common/tests/data/safetensors-corpus/crash_<name>.safetensors so
# test_safetensors_corpus replays it from then on).
set -u
ROOT=${DPCERT_ROOT:?run through ci/run-tests.sh}
BUILD=${DPCERT_BUILD:?run through ci/run-tests.sh}
SECS=${FUZZ_SECONDS:-20}
if ! grep -q '^HAVE_LIBFUZZER := 1' "$BUILD/config.mk" 2>/dev/null; then
  echo "SKIP: clang libFuzzer not available (see $BUILD/banner.txt)"
  exit 77
fi
F="$BUILD/fuzz/common/fuzz/fuzz_safetensors"
# only this target (the parser targets are built by conformance/tests/fuzz_parsers_slow.sh)
make -C "$ROOT" --no-print-directory BUILD="$BUILD" "$F" >build.log 2>&1 || { cat build.log; echo "FAIL: make $F"; exit 1; }
[ -x "$F" ] || { echo "FAIL: $F was not built"; exit 1; }
mkdir -p corpus
"$F" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 corpus \
  "$ROOT/common/tests/data/safetensors-corpus" >fuzz.log 2>&1
rc=$?
tail -n 12 fuzz.log
runs=$(grep -m1 'stat::number_of_executed_units' fuzz.log | awk '{print $2}')
if [ "$rc" != 0 ]; then
  echo "FAIL: fuzzer exited with $rc"
  for c in crash-* leak-* timeout-* oom-*; do [ -f "$c" ] && { echo "reproducer $c:"; od -An -tx1 -v "$c" | head -n 40; }; done
  exit 1
fi
if [ -z "$runs" ] || [ "$runs" -lt 1000 ]; then echo "FAIL: fuzzer ran only '${runs}' inputs"; exit 1; fi
echo "fuzz_safetensors: $runs inputs in ${SECS}s, no crash"
exit 0

#!/usr/bin/env bash
# optimized/tests/plugin_openblas.sh — the OpenBLAS plugin (optimized/plugins/openblas,
# docs/plugin-abi.md) through the operation harness: built against dpcert_backend.h only
# (no dpcert symbol among its undefined ones), its six operations (gemm, clip_accum,
# bk_gemm, ghost_sqnorm, fused_sqnorm, fused_clip_accum) PASS at f64 and f32 under its
# declaration (order unknown, FMA allowed, run-to-run determinism), at 1 rank and at 2 ranks
# under mpirun; every other operation is NOT_SUPPORTED (inherited from the host backend in
# train and conform). SKIP (77) when the plugin was not built (no libopenblas-dev).
# conform --suite ci on it: plugin_openblas_conform_slow.sh.
set -u
D=${DPCERT:?}
P=$(dirname "$D")/plugins/libdpcert_openblas.so
[ -f "$P" ] || { echo "SKIP: $P not built (libopenblas-dev missing at build time)"; exit 77; }
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
undef=$(nm -D --undefined-only "$P" | grep -E ' (dp|opt|ref|conf)_' || true)
[ -z "$undef" ] && pass "the plugin refers to no dpcert symbol" || bad "the plugin refers to dpcert symbols: $undef"
OWN="bk_gemm clip_accum fused_clip_accum fused_sqnorm gemm ghost_sqnorm "
check() { # check WHAT OUTPUT RC
  local passed; passed=$(grep -E '^  PASS ' <<< "$2" | awk '{print $2}' | sort | tr '\n' ' ')
  if [ "$3" = 0 ] && [ "$passed" = "$OWN" ] && ! grep -qE '^  (FAIL|SKIPPED) ' <<< "$2" &&
     grep -q "declaration: openblas (plugin .*): order unknown, FMA allowed" <<< "$2"; then pass "$1: its 6 operations PASS"
  else bad "$1: exit $3, PASS: '$passed': $(grep -E 'FAIL|SKIPPED|rror' <<< "$2" | head -3)"; fi
}
for dt in f64 f32; do
  out=$("$D" ops --backend plugin:openblas --dtype $dt 2>&1); check "openblas $dt, 1 rank" "$out" $?
done
if command -v mpirun >/dev/null 2>&1; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
  out=$(mpirun -n 2 "$D" ops --backend plugin:openblas --dtype f32 2>&1); check "openblas f32, 2 ranks" "$out" $?
fi
exit $fail

#!/usr/bin/env bash
# optimized/tests/cuda_emu_negative.sh — the negative controls of the CUDA emulation
# (docs/cuda.md "What the emulation proves"): optimized_test_cuda_emu_neg runs a correct
# kernel (must pass) and, with --broken, a deliberately broken copy that must be caught:
#   barrier  (a removed __syncthreads)   wrong sums in every build, a data race under TSan;
#   grid     (an off-by-one grid bound)  the redzone check (the kernel named) in the plain
#                                        build, an AddressSanitizer report under ASan;
#   drop     (a factor-0 example multiplied, 0 * inf) a NaN in the gradient, every build;
#   gridbarrier (the single-pass fused kernel's grid barrier arrives but does not wait)
#            wrong clip factors in every build, a data race under TSan.
# A broken kernel that passes is a failure of this test (the checks could not catch it).
set -u
B=${DPCERT_BUILD:?}
export TSAN_OPTIONS="halt_on_error=0:exitcode=66${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
# variant, test directory
VARIANTS=("plain $B/tests")
[ -d "$B/emu-asan/tests" ] && VARIANTS+=("asan $B/emu-asan/tests")
[ -d "$B/emu-tsan/tests" ] && VARIANTS+=("tsan $B/emu-tsan/tests")
for vt in "${VARIANTS[@]}"; do
  v=${vt%% *} dir=${vt#* }
  bin="$dir/optimized_test_cuda_emu_neg"
  [ -x "$bin" ] || { bad "$bin not built"; continue; }
  # the SANITIZE=1 build's emulation is itself ASan-instrumented
  [ "$v" = plain ] && ldd "$bin" 2>/dev/null | grep -q libasan && v=asan
  if "$bin" >"$v-control.log" 2>&1; then pass "$v: the correct kernels pass"
  else bad "$v: the correct kernels fail"; tail -5 "$v-control.log"; continue; fi
  for k in barrier grid drop gridbarrier; do
    log="$v-$k.log"
    timeout 300 "$bin" --broken "$k" >"$log" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then bad "$v: broken '$k' was NOT caught"; tail -5 "$log"; continue; fi
    if [ $rc -eq 124 ] || [ $rc -eq 2 ]; then bad "$v: broken '$k' exited $rc"; tail -5 "$log"; continue; fi
    # the mechanism expected to catch it
    case "$v/$k" in
      tsan/barrier|tsan/gridbarrier) want='WARNING: ThreadSanitizer: data race' ;;
      asan/grid) want='ERROR: AddressSanitizer' ;;
      */grid) want='written [0-9]+ bytes past its end' ;;
      */barrier) want='block sums wrong' ;;
      */drop) want='differ from the sum without the dropped example' ;;
      */gridbarrier) want='differ from the single pass with its grid barrier' ;;
    esac
    if grep -q -E "$want" "$log"; then pass "$v: broken '$k' caught (exit $rc): $(grep -m1 -o -E "$want" "$log")"
    else bad "$v: broken '$k' failed (exit $rc) without the expected '$want'"; tail -8 "$log"; fi
  done
done
[ $fail = 0 ] && echo "every broken kernel was caught"
exit $fail

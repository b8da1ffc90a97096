#!/usr/bin/env bash
# optimized/tests/cuda_configure.sh — ci/configure.sh finds NCCL outside $CUDA_HOME and a
# requested CUDA build that cannot be built is an error (docs/cuda.md "Building"; the defect
# was: NCCL/cuBLAS looked for under $CUDA_HOME only, so every GPU test skipped silently):
#   - a toolkit without NCCL ($CUDA_HOME made of links to the real one, NCCL left out) and
#     NCCL in a Python wheel layout (a venv's site-packages/nvidia/nccl/lib holding only
#     libnccl.so.2, as the wheels ship it): NCCL found there, linked by its versioned name;
#   - the same toolkit without the wheel: CUDA not built; exit 0 (optional), but with
#     CUDA=1 exit 1 naming NCCL; CUDA=0 never builds CUDA.
# Needs a CUDA toolkit with NCCL on this machine (else 77).
set -u
REAL=${CUDA_HOME:-/usr/local/cuda}
CFG="${DPCERT_ROOT:?}/ci/configure.sh"
[ -x "$REAL/bin/nvcc" ] || { echo "SKIP: no CUDA toolkit at $REAL"; exit 77; }
NCCLSO=$(ls "$REAL"/lib64/libnccl.so.[0-9]* 2>/dev/null | head -n 1)
[ -n "$NCCLSO" ] && [ -f "$REAL/include/nccl.h" ] || { echo "SKIP: no NCCL in $REAL to build the fake layouts from"; exit 77; }
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
W=$PWD
# a toolkit without NCCL: every entry of the real one linked, NCCL's left out
mkdir -p fakecuda/include fakecuda/lib64
ln -s "$REAL/bin" fakecuda/bin
for f in "$REAL"/include/*; do case $(basename "$f") in nccl*) ;; *) ln -s "$f" fakecuda/include/ ;; esac; done
for f in "$REAL"/lib64/*; do case $(basename "$f") in libnccl*) ;; *) ln -s "$f" fakecuda/lib64/ ;; esac; done
# a venv with the NCCL wheel's layout (versioned library only)
SP=venv/lib/python3.11/site-packages/nvidia/nccl
mkdir -p "$SP/lib" "$SP/include"
ln -s "$NCCLSO" "$SP/lib/$(basename "$NCCLSO")"
ln -s "$REAL/include/nccl.h" "$SP/include/nccl.h"
# probes run in a fresh build dir; the system's own NCCL would be found last, so hide it only
# from the NCCL search by checking where the result points
run_cfg() { # dir, env...
  local d=$1; shift
  env "$@" bash "$CFG" "$d" >"$d.log" 2>&1
}
run_cfg wheel CUDA_HOME="$W/fakecuda" VIRTUAL_ENV="$W/venv"; rc=$?
if [ $rc -ne 0 ]; then bad "configure with the wheel exited $rc"; tail -5 wheel.log
elif grep -q "^CUDA_LINK_LIBS := .*$W/venv/.*nvidia/nccl/lib.* -l:libnccl.so" wheel/config.mk; then
  pass "NCCL found in the wheel layout: $(grep -o -- "-L[^ ]*nvidia/nccl/lib[^ ]* -Wl[^ ]* -l:[^ ]*" wheel/config.mk | head -1)"
  grep -q '^HAVE_CUDA := 1' wheel/config.mk && pass "CUDA build enabled with the wheel's NCCL" || { bad "HAVE_CUDA not 1"; grep HAVE wheel/config.mk; }
elif grep -q "^CUDA_LINK_LIBS := .*/usr/lib/x86_64-linux-gnu.*nccl" wheel/config.mk; then
  echo "NOTE: NCCL is installed in /usr/lib/x86_64-linux-gnu, which comes after the wheel: checking order"
  bad "the wheel's NCCL was not taken before the system's"
else bad "NCCL not found in the wheel layout"; grep -E 'HAVE_NCCL|CUDA_LINK' wheel/config.mk; tail -5 wheel.log; fi
if [ -e /usr/lib/x86_64-linux-gnu/libnccl.so.2 ] || [ -e /usr/lib/x86_64-linux-gnu/libnccl.so ]; then
  echo "NOTE: NCCL in /usr/lib/x86_64-linux-gnu: the without-NCCL checks cannot run here"
else
  run_cfg nowheel CUDA_HOME="$W/fakecuda" VIRTUAL_ENV=; rc=$?
  if [ $rc -eq 0 ] && grep -q '^HAVE_CUDA := 0' nowheel/config.mk && grep -q 'CUDA backend not built, missing: NCCL' nowheel/banner.txt; then
    pass "without NCCL and not requested: CUDA not built, the banner names NCCL, exit 0"
  else bad "without NCCL, not requested: exit $rc"; tail -5 nowheel.log; fi
  run_cfg required CUDA_HOME="$W/fakecuda" VIRTUAL_ENV= CUDA=1; rc=$?
  if [ $rc -eq 1 ] && grep -q "CUDA=1 was requested but the CUDA backend cannot be built: missing NCCL" required.log; then
    pass "CUDA=1 without NCCL: exit 1 naming NCCL"
  else bad "CUDA=1 without NCCL: exit $rc"; tail -5 required.log; fi
fi
run_cfg off CUDA=0; rc=$?
if [ $rc -eq 0 ] && grep -q '^HAVE_CUDA := 0' off/config.mk; then pass "CUDA=0: not built"; else bad "CUDA=0: exit $rc"; grep HAVE_CUDA off/config.mk; fi
run_cfg badval CUDA=yes; rc=$?
[ $rc -eq 2 ] && pass "CUDA=yes: usage error (exit 2)" || bad "CUDA=yes: exit $rc"
[ $fail = 0 ] && echo "all configure checks passed"
exit $fail

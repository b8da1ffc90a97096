#!/usr/bin/env bash
# ci/install-deps.sh — installs dpcert's build dependencies on Debian 12. Idempotent:
# installs only what is missing and runs 'apt-get update' at most once.
# Reports the CUDA toolkit under /usr/local/cuda without failing when it is absent.
set -eu
PKGS="build-essential libmpfr-dev libgmp-dev libssl-dev lcov libopenmpi-dev openmpi-bin libfftw3-dev clang libclang-rt-14-dev libjansson-dev python3-numpy libopenblas-dev pkg-config"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install-deps: installing:$missing"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else echo "install-deps: not root and no sudo; install:$missing" >&2; exit 1; fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $missing
else
  echo "install-deps: all Debian packages present"
fi
# optional: headless Chromium renders the HTML reports (conformance/tests/report_html_chromium_slow.sh,
# which is skipped with 77 only where Chromium cannot be installed). A failure here is not fatal.
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  CSUDO=""; [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && CSUDO="sudo"
  if [ "$(id -u)" = 0 ] || [ -n "$CSUDO" ]; then
    echo "install-deps: installing: chromium (optional)"
    { [ -n "$missing" ] || DEBIAN_FRONTEND=noninteractive $CSUDO apt-get update -qq; } &&
      DEBIAN_FRONTEND=noninteractive $CSUDO apt-get install -y -qq --no-install-recommends chromium ||
      echo "install-deps: chromium could not be installed (the HTML rendering test will be skipped)"
  else
    echo "install-deps: not root and no sudo; chromium (optional) not installed"
  fi
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ -x "$CUDA_HOME/bin/nvcc" ]; then
  echo "install-deps: CUDA toolkit: $("$CUDA_HOME/bin/nvcc" --version | tail -n 2 | head -n 1)"
  ls "$CUDA_HOME"/lib64/libcublas.so* >/dev/null 2>&1 && echo "install-deps: cuBLAS found" || echo "install-deps: cuBLAS not found (CUDA backend will not be built)"
  ls "$CUDA_HOME"/lib64/libnccl.so* /usr/lib/x86_64-linux-gnu/libnccl.so* >/dev/null 2>&1 && echo "install-deps: NCCL found" || echo "install-deps: NCCL not found (CUDA backend will not be built)"
else
  echo "install-deps: no CUDA toolkit at $CUDA_HOME (the CUDA backend will not be built; everything else works)"
fi

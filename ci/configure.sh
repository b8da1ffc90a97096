#!/usr/bin/env bash
# ci/configure.sh BUILD_DIR [--install] [--quiet]
# Probes each dependency by compiling (and linking) a tiny program, writes
# BUILD_DIR/config.mk for the Makefile and prints a one-screen banner.
# With --install, a failing required probe runs ci/install-deps.sh once and probes again.
# CUDA (optional): nvcc from $CUDA_HOME (default /usr/local/cuda) or PATH; cuBLAS(Lt) and NCCL
# from $CUDA_HOME, $NCCL_HOME / $CUBLAS_HOME, a Python wheel (nvidia/nccl/lib,
# nvidia/cublas/lib in the site-packages of python3, of $VIRTUAL_ENV and of venvs under
# BUILD_DIR) or /usr/lib/x86_64-linux-gnu (docs/cuda.md "Building"). CUDA=1 in the
# environment (make CUDA=1) requires the CUDA build: missing pieces are an error (exit 1),
# not a silent skip; CUDA=0 leaves CUDA out even when present.
set -u
BUILD=${1:?usage: ci/configure.sh BUILD_DIR [--install] [--quiet]}
shift
INSTALL=0; QUIET=0
for a in "$@"; do case $a in --install) INSTALL=1 ;; --quiet) QUIET=1 ;; *) echo "configure: unknown option $a" >&2; exit 2 ;; esac; done
CC=${CC:-cc}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUDA_REQ=${CUDA:-}
case "$CUDA_REQ" in ""|0|1) ;; *) echo "configure: CUDA must be 0, 1 or unset (got '$CUDA_REQ')" >&2; exit 2 ;; esac
mkdir -p "$BUILD/probe"
T=$BUILD/probe

probe() { # name, code, flags...
  local name=$1 code=$2; shift 2
  printf '%s\n' "$code" > "$T/$name.c"
  "$CC" "$T/$name.c" -o "$T/$name" "$@" >"$T/$name.log" 2>&1
}

# Directories that may hold a CUDA library (lib/) and its headers (include/), by kind
# (nccl or cublas), in order: the explicit homes, $CUDA_HOME, Python wheels, the system.
cuda_lib_roots() { # kind
  local kind=$1 py sp
  [ "$kind" = nccl ] && [ -n "${NCCL_HOME:-}" ] && echo "$NCCL_HOME/lib $NCCL_HOME/include"
  [ "$kind" = cublas ] && [ -n "${CUBLAS_HOME:-}" ] && echo "$CUBLAS_HOME/lib $CUBLAS_HOME/include"
  echo "$CUDA_HOME/lib64 $CUDA_HOME/include"
  {
    for py in python3 /usr/bin/python3; do
      command -v "$py" >/dev/null 2>&1 && "$py" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
    done
    [ -n "${VIRTUAL_ENV:-}" ] && ls -d "$VIRTUAL_ENV"/lib/python3*/site-packages 2>/dev/null
    ls -d "$BUILD"/*venv*/lib/python3*/site-packages 2>/dev/null
  } | awk '!seen[$0]++' | while read -r sp; do
    [ -d "$sp/nvidia/$kind/lib" ] && echo "$sp/nvidia/$kind/lib $sp/nvidia/$kind/include"
  done
  echo "/usr/lib/x86_64-linux-gnu /usr/include"
}
# find_cuda_lib VAR kind lib header: sets VAR_LINK (-L/-rpath/-l, versioned .so.N too: wheels
# ship no unversioned name) and VAR_INC (-I) from the first root holding both, else empties.
find_cuda_lib() {
  local var=$1 kind=$2 lib=$3 hdr=$4 libdir incdir f link
  eval "${var}_LINK=''; ${var}_INC=''"
  while read -r libdir incdir; do
    [ -f "$incdir/$hdr" ] || continue
    link=""
    if [ -e "$libdir/lib$lib.so" ]; then link="-l$lib"
    else
      f=$(ls "$libdir"/lib"$lib".so.[0-9]* 2>/dev/null | sort -V | tail -n 1)
      [ -n "$f" ] && link="-l:$(basename "$f")"
    fi
    [ -n "$link" ] || continue
    eval "${var}_LINK='-L$libdir -Wl,-rpath,$libdir $link'; ${var}_INC='-I$incdir'"
    return 0
  done < <(cuda_lib_roots "$kind")
  return 1
}

run_probes() {
  HAVE_MPFR=0; HAVE_SSL=0; HAVE_FFTW=0; HAVE_JANSSON=0; HAVE_MPI=0; HAVE_LIBFUZZER=0; HAVE_LCOV=0
  HAVE_NVCC=0; HAVE_CUBLAS=0; HAVE_NCCL=0; NCCL_LINK=""; NCCL_INC=""; CUBLAS_LINK=""; CUBLAS_INC=""; CUBLASLT_LINK=""
  probe mpfr '#include <mpfr.h>
int main(void){mpfr_t x; mpfr_init2(x,256); mpfr_set_d(x,1.0,MPFR_RNDU); mpfr_clear(x); return 0;}' -lmpfr -lgmp && HAVE_MPFR=1
  probe ssl '#include <openssl/evp.h>
#include <openssl/rand.h>
int main(void){unsigned char b[4]; EVP_MD_CTX *c=EVP_MD_CTX_new(); EVP_MD_CTX_free(c); return RAND_bytes(b,4)!=1;}' -lcrypto && HAVE_SSL=1
  probe fftw '#include <fftw3.h>
int main(void){fftw_complex *a=fftw_malloc(sizeof(fftw_complex)*4); fftw_free(a); return 0;}' -lfftw3 -lm && HAVE_FFTW=1
  probe jansson '#include <jansson.h>
int main(void){json_t *j=json_object(); json_decref(j); return 0;}' -ljansson && HAVE_JANSSON=1
  MPI_CFLAGS=$(mpicc --showme:compile 2>/dev/null || true)
  MPI_LIBS=$(mpicc --showme:link 2>/dev/null || true)
  [ -n "$MPI_LIBS" ] && probe mpi '#include <mpi.h>
int main(int c,char**v){(void)c;(void)v; return MPI_VERSION < 3;}' $MPI_CFLAGS $MPI_LIBS && HAVE_MPI=1
  if command -v clang >/dev/null 2>&1; then
    printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n){(void)d;(void)n;return 0;}\n' > "$T/fuzz.c"
    clang -fsanitize=fuzzer "$T/fuzz.c" -o "$T/fuzz" >"$T/fuzz.log" 2>&1 && HAVE_LIBFUZZER=1
  fi
  command -v lcov >/dev/null 2>&1 && command -v genhtml >/dev/null 2>&1 && HAVE_LCOV=1
  HAVE_CHROMIUM=0
  command -v chromium >/dev/null 2>&1 && chromium --version >"$T/chromium.log" 2>&1 && HAVE_CHROMIUM=1
  HAVE_OPENBLAS=0 # optional: the OpenBLAS backend plugin (optimized/plugins/openblas, docs/plugin-abi.md)
  OPENBLAS_FLAGS=$(pkg-config --cflags --libs openblas 2>/dev/null || true)
  [ -n "$OPENBLAS_FLAGS" ] && probe openblas '#include <cblas.h>
int main(void){double a=1,b=2,c=0; cblas_dgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,1,1,1,1.0,&a,1,&b,1,0.0,&c,1); return c!=2;}' $OPENBLAS_FLAGS && HAVE_OPENBLAS=1
  HAVE_PY_NUMPY=0 # optional: the certify tests' numpy candidate (conformance/adapters/python)
  for py in python3 /usr/bin/python3; do "$py" -c 'import numpy' >/dev/null 2>&1 && HAVE_PY_NUMPY=1 && break; done
  NVCC=""
  if [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC=$CUDA_HOME/bin/nvcc; elif command -v nvcc >/dev/null 2>&1; then NVCC=$(command -v nvcc); fi
  if [ -n "$NVCC" ]; then
    printf '__global__ void k(float *x){x[threadIdx.x]=1.0f;}\nint main(){return 0;}\n' > "$T/cu.cu"
    "$NVCC" -arch=sm_90 -c "$T/cu.cu" -o "$T/cu.o" >"$T/cu.log" 2>&1 && HAVE_NVCC=1
    if find_cuda_lib CUBLAS cublas cublas cublas_v2.h && find_cuda_lib CUBLASLT cublas cublasLt cublasLt.h; then
      # shellcheck disable=SC2086
      probe cublas '#include <cublas_v2.h>
int main(void){cublasHandle_t h; return cublasCreate(&h) == CUBLAS_STATUS_SUCCESS && 0;}' -I"$CUDA_HOME/include" $CUBLAS_INC $CUBLAS_LINK $CUBLASLT_LINK && HAVE_CUBLAS=1
    fi
    if find_cuda_lib NCCL nccl nccl nccl.h; then
      # shellcheck disable=SC2086
      probe nccl '#include <nccl.h>
int main(void){int v; return ncclGetVersion(&v) != ncclSuccess && 0;}' -I"$CUDA_HOME/include" $NCCL_INC $NCCL_LINK && HAVE_NCCL=1
    fi
  fi
}

run_probes
REQUIRED_OK=$(( HAVE_MPFR && HAVE_SSL && HAVE_FFTW && HAVE_JANSSON && HAVE_MPI ))
if [ "$REQUIRED_OK" = 0 ] && [ "$INSTALL" = 1 ]; then
  echo "configure: a required library is missing; running ci/install-deps.sh"
  bash "$(dirname "$0")/install-deps.sh" || { echo "configure: ci/install-deps.sh failed" >&2; exit 1; }
  run_probes
  REQUIRED_OK=$(( HAVE_MPFR && HAVE_SSL && HAVE_FFTW && HAVE_JANSSON && HAVE_MPI ))
fi
if { [ "$HAVE_PY_NUMPY" = 0 ] || [ "$HAVE_OPENBLAS" = 0 ]; } && [ "$INSTALL" = 1 ] && [ "$REQUIRED_OK" = 1 ]; then # optional: never fails the build
  bash "$(dirname "$0")/install-deps.sh" >/dev/null 2>&1 || echo "configure: could not install python3-numpy / libopenblas-dev (their tests will be skipped)"
  run_probes
fi
HAVE_CUDA=$(( HAVE_NVCC && HAVE_CUBLAS && HAVE_NCCL ))
CUDA_MISSING=""
[ "$HAVE_NVCC" = 1 ] || CUDA_MISSING="$CUDA_MISSING nvcc (sm_90) under $CUDA_HOME/bin or in PATH;"
[ "$HAVE_NVCC" = 1 ] && [ "$HAVE_CUBLAS" = 0 ] && CUDA_MISSING="$CUDA_MISSING cuBLAS/cuBLASLt (libcublas, cublas_v2.h);"
[ "$HAVE_NVCC" = 1 ] && [ "$HAVE_NCCL" = 0 ] && CUDA_MISSING="$CUDA_MISSING NCCL (libnccl, nccl.h);"
[ "$CUDA_REQ" = 0 ] && HAVE_CUDA=0
GIT_REV=$(git -C "$(dirname "$0")/.." rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

cat > "$BUILD/config.mk.tmp" <<MK
# generated by ci/configure.sh — do not edit
HAVE_MPFR := $HAVE_MPFR
HAVE_SSL := $HAVE_SSL
HAVE_FFTW := $HAVE_FFTW
HAVE_JANSSON := $HAVE_JANSSON
HAVE_MPI := $HAVE_MPI
HAVE_LIBFUZZER := $HAVE_LIBFUZZER
HAVE_LCOV := $HAVE_LCOV
HAVE_CHROMIUM := $HAVE_CHROMIUM
HAVE_OPENBLAS := $HAVE_OPENBLAS
HAVE_NVCC := $HAVE_NVCC
HAVE_CUDA := $HAVE_CUDA
NVCC := $NVCC
CUDA_HOME := $CUDA_HOME
CUDA_INC := $NCCL_INC $CUBLAS_INC
CUDA_LINK_LIBS := $CUBLASLT_LINK $CUBLAS_LINK $NCCL_LINK
MPI_CFLAGS := $MPI_CFLAGS
MPI_LIBS := $MPI_LIBS
REQUIRED_OK := $REQUIRED_OK
MK
mv "$BUILD/config.mk.tmp" "$BUILD/config.mk"

yn() { [ "$1" = 1 ] && echo "yes" || echo "NO "; }
{
echo "---------------------------------------------------------------- dpcert configuration"
echo " required  MPFR+GMP (exact arithmetic)      $(yn $HAVE_MPFR)"
echo " required  OpenSSL libcrypto (SHA-256, RNG) $(yn $HAVE_SSL)"
echo " required  FFTW3 (PLD accountant)           $(yn $HAVE_FFTW)"
echo " required  jansson (JSON)                   $(yn $HAVE_JANSSON)"
echo " required  Open MPI (host collectives)      $(yn $HAVE_MPI)"
echo " optional  clang libFuzzer (make fuzz)      $(yn $HAVE_LIBFUZZER)"
echo " optional  lcov (make coverage)             $(yn $HAVE_LCOV)"
echo " optional  chromium (HTML report test)      $(yn $HAVE_CHROMIUM)"
echo " optional  python3 + numpy (certify tests)  $(yn $HAVE_PY_NUMPY)"
echo " optional  OpenBLAS (the openblas plugin)   $(yn $HAVE_OPENBLAS)"
echo " optional  nvcc sm_90 ($CUDA_HOME)     $(yn $HAVE_NVCC)"
echo " optional  cuBLAS / NCCL                    $(yn $HAVE_CUBLAS) / $(yn $HAVE_NCCL)"
[ "$HAVE_NCCL" = 1 ] && echo "           NCCL: $NCCL_LINK"
[ "$HAVE_CUBLAS" = 1 ] && echo "           cuBLAS: $CUBLAS_LINK"
[ "$CUDA_REQ" = 0 ] && echo " CUDA=0: the CUDA backend is not built"
[ "$HAVE_CUDA" = 0 ] && [ "$CUDA_REQ" != 0 ] && echo " CUDA backend not built, missing:$CUDA_MISSING (make CUDA=1 makes this an error)"
echo " will build: dpcert (host backend$( [ "$HAVE_CUDA" = 1 ] && echo ', cuda backend: sm_90 SASS + compute_90 PTX'), cuda-emu: the CUDA sources on the CPU emulation), tests$( [ "$HAVE_LIBFUZZER" = 1 ] && echo ', fuzzers')"
[ "$REQUIRED_OK" = 1 ] || echo " MISSING required libraries: run 'make test' or 'make run' (they install them), or ci/install-deps.sh"
echo "--------------------------------------------------------------------------------------"
} > "$BUILD/banner.txt"
[ "$QUIET" = 1 ] || cat "$BUILD/banner.txt"
[ "$REQUIRED_OK" = 1 ] || exit 1
if [ "$CUDA_REQ" = 1 ] && [ "$HAVE_CUDA" = 0 ]; then
  echo "configure: CUDA=1 was requested but the CUDA backend cannot be built: missing$CUDA_MISSING (searched \$CUDA_HOME=$CUDA_HOME, \$NCCL_HOME, \$CUBLAS_HOME, Python wheels nvidia/nccl and nvidia/cublas, /usr/lib/x86_64-linux-gnu; see docs/cuda.md \"Building\")" >&2
  exit 1
fi
exit 0

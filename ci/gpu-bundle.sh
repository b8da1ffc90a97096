#!/usr/bin/env bash
# ci/gpu-bundle.sh — the one-command GPU run (docs/gpu-results.md "The bundle").
#
# A GPU machine (one H100/H200) is lent only some of the time, for 15 minutes of device time
# in all, with no network and none of our Debian libraries. Everything that can be done
# without it is done here, once: `pack` builds nothing itself but copies what `make` built
# (dpcert, the CUDA plugin, the GPU test programs, the GPU benchmark) with the non-CUDA
# runtime libraries they need (resolved with ldd), the host verdicts of the ci suite (for the
# diff against the device's), the glibc/GLIBCXX versions the binaries need, and the Opacus
# wheel. `run` executes the steps on the device in order of value, each under its own time
# limit, so that the whole call ends inside its budget; it never needs make, apt-get or the
# network. cuBLAS, NCCL and cudart are not carried (hundreds of MB): they are found on the
# device at run time (CUDA_HOME, /usr/local/cuda, the Python wheels' nvidia/*/lib).
#
#   ci/gpu-bundle.sh pack [--build DIR] [--out DIR] [--offline]   (default: build, .gpu-bundle)
#   ci/gpu-bundle.sh run BUNDLE OUT [--dry-run] [--budget SECONDS] (default budget 540)
#   ci/gpu-bundle.sh call [BUNDLE]       prints the device call (command, carry, time limit)
#
# run writes OUT/summary.txt (one line per step: NAME STATUS SECONDS NOTE, then the verdict),
# OUT/steps.log (every step's output, in order), OUT/logs.tar.gz (one log file per step and
# the reports), OUT/conform-cuda.txt, OUT/bench.txt and OUT/env.txt: six files, inside the
# device tool's limit of eight. Step statuses: PASS, FAIL, SKIP (the step cannot run here:
# no GPU, exit 77), NA (a tool the device runtime refuses, e.g. compute-sanitizer: recorded,
# not a failure), TIMEOUT, NOTIME (the budget was spent before the step began).
# --dry-run (no GPU expected, used by ci/tests/gpu_bundle_dry_run.sh in `make test`) runs every
# step up to the device; a step that needs the device then reports SKIP, and the run exits 0
# when no step FAILed. Without --dry-run a missing GPU is a failure (exit 1).
set -u
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "gpu-bundle: $*" >&2; exit 2; }

# Libraries every Linux image has (never carried: carrying libc or libstdc++ would break the
# device's own programs) and the CUDA libraries the device provides.
BASE_RE='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libgcc_s\.|libstdc\+\+\.|libz\.|libresolv\.|libutil\.)'
CUDA_RE='^(libcuda\.|libcudart\.|libcublas|libcublasLt|libnccl\.|libnvidia)'

# ------------------------------------------------------------------------------------------
pack() {
  local build=build out=.gpu-bundle offline=0
  while [ $# -gt 0 ]; do
    case $1 in
      --build) build=$2; shift ;;
      --out) out=$2; shift ;;
      --offline) offline=1 ;;
      *) die "pack: unknown option $1" ;;
    esac
    shift
  done
  case $build in /*) ;; *) build=$ROOT/$build ;; esac
  case $out in /*) ;; *) out=$ROOT/$out ;; esac
  [ -x "$build/dpcert" ] || die "pack: $build/dpcert is not built (run make first)"
  [ -f "$build/libdpcert_cuda.so" ] || die "pack: $build/libdpcert_cuda.so is not built: the CUDA backend needs nvcc, cuBLAS and NCCL at build time (ci/configure.sh banner; docs/cuda.md)"
  [ -e "$out" ] && { [ -f "$out/MANIFEST" ] || die "pack: $out exists and is not a bundle (no MANIFEST); remove it"; rm -rf "$out"; }
  mkdir -p "$out/bin" "$out/tests" "$out/bench" "$out/lib" "$out/wheels" "$out/host"
  cp "$build/dpcert" "$build/libdpcert_cuda.so" "$out/bin/"
  local t n=0
  for t in "$build"/tests/*gpu*; do [ -x "$t" ] && { cp "$t" "$out/tests/"; n=$((n+1)); }; done
  [ $n -gt 0 ] || die "pack: no GPU test program in $build/tests (*gpu*)"
  for t in "$build"/bench/*gpu*; do [ -x "$t" ] && cp "$t" "$out/bench/"; done
  # host debug info is not needed on the device (the CUDA line info lives in the fatbin)
  local f
  for f in "$out"/bin/* "$out"/tests/* "$out"/bench/*; do strip --strip-debug "$f" 2>/dev/null || true; done
  # the non-CUDA, non-base runtime libraries, as resolved here
  local missing=""
  for f in "$out"/bin/* "$out"/tests/* "$out"/bench/*; do
    while read -r name _ path _; do
      [ -n "$name" ] || continue
      [[ $name =~ $BASE_RE ]] && continue
      [[ $name =~ $CUDA_RE ]] && continue
      if [ "$path" = "not" ] || [ ! -f "$path" ]; then missing="$missing $name"; continue; fi
      [ -f "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
    done < <(ldd "$f" 2>/dev/null | awk '/=>/ {print $1, $2, $3, $4}')
  done
  [ -z "$missing" ] || die "pack: libraries not found here:$missing"
  # Open MPI's components and data (used only if MPI is initialised: not at one rank)
  local ompi=/usr/lib/x86_64-linux-gnu/openmpi
  if [ -d "$ompi/lib/openmpi3" ]; then
    mkdir -p "$out/ompi/lib/x86_64-linux-gnu/openmpi/lib" "$out/ompi/share"
    cp -r "$ompi/lib/openmpi3" "$out/ompi/lib/x86_64-linux-gnu/openmpi/lib/"
    [ -d /usr/share/openmpi ] && cp -r /usr/share/openmpi "$out/ompi/share/"
  fi
  # what the device's glibc and libstdc++ must provide
  local glibc glibcxx
  glibc=$(for f in "$out"/bin/* "$out"/tests/* "$out"/bench/* "$out"/lib/*; do objdump -T "$f" 2>/dev/null; done |
          grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n -u | tail -n 1)
  glibcxx=$(for f in "$out"/bin/* "$out"/tests/* "$out"/bench/* "$out"/lib/*; do objdump -T "$f" 2>/dev/null; done |
          grep -o 'GLIBCXX_[0-9.]*' | sed 's/GLIBCXX_//' | sort -t. -k1,1n -k2,2n -k3,3n -u | tail -n 1)
  [ -n "$glibcxx" ] || glibcxx=none
  # the host backend's verdicts of the gate's suite, computed here once (deterministic), so the
  # device spends no time on them
  local t0=$SECONDS
  DPCERT_ROOT=$ROOT "$build/dpcert" conform --suite ci --backend host --ranks 1 --report "$out/host/conform-host" \
      >"$out/host/conform-host.txt" 2>&1
  local hrc=$?
  [ $hrc = 0 ] || die "pack: the host backend's ci suite does not pass here (exit $hrc; $out/host/conform-host.txt)"
  awk '$1 ~ /^\[[0-9]+\/[0-9]+\]$/ {print $2, $3}' "$out/host/conform-host.txt" | sort >"$out/host/verdicts.txt"
  rm -rf "$out/host/conform-host"
  # Opacus is pure Python (the device has torch); its wheel travels
  local wheel="no (--offline)"
  if [ $offline = 0 ]; then
    if python3 -m pip download -q --no-deps --only-binary=:all: -d "$out/wheels" opacus >/dev/null 2>&1; then
      wheel=$(ls "$out/wheels" | head -n 1)
    else
      wheel="no (pip download failed)"
    fi
  fi
  local rev; rev=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  {
    echo "bundle: dpcert GPU run (ci/gpu-bundle.sh)"
    echo "git: $rev$( [ -n "$(git -C "$ROOT" status --porcelain 2>/dev/null)" ] && echo ' (with uncommitted changes)')"
    echo "packed: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
    echo "build: $build ($(sed -n 's/^ will build: //p' "$build/banner.txt" 2>/dev/null))"
    echo "needs: GLIBC_$glibc GLIBCXX_$glibcxx"
    echo "host-verdicts: $(wc -l <"$out/host/verdicts.txt") runs of the ci suite at 1 rank, $((SECONDS - t0)) s here"
    echo "opacus-wheel: $wheel"
    echo "files:"
    (cd "$out" && find . -type f ! -name MANIFEST | sort | xargs sha256sum)
  } >"$out/MANIFEST"
  echo "gpu-bundle: packed $out ($(du -sh "$out" | cut -f1)); needs GLIBC_$glibc, GLIBCXX_$glibcxx; opacus wheel: $wheel"
  local kb; kb=$(du -sk "$out" | cut -f1)
  [ "$kb" -le $((48 * 1024)) ] || die "pack: the bundle is $kb KiB; the device call carries at most 64 MiB with the working tree (keep it under 48 MiB)"
}

# ------------------------------------------------------------------------------------------
# run: steps in order of value, each with its own limit inside the budget.
B= OUT= DRY=0 BUDGET=540 T0=0
declare -a SUMMARY=()
remaining() { echo $((BUDGET - (SECONDS - T0))); }

# step NAME LIMIT CMD...: runs CMD with a limit of min(LIMIT, what is left - 15 s) and records
# the status; the exit code maps 0 PASS, 77 SKIP, 124/137 TIMEOUT, 3 NA (tool refused: only for
# steps whose command prints NA itself), anything else FAIL.
step() {
  local name=$1 limit=$2; shift 2
  local left; left=$(( $(remaining) - 15 ))
  local log="$OUT/logs/$name.log"
  if [ "$left" -lt 10 ]; then
    SUMMARY+=("$name NOTIME 0 budget spent before the step began")
    echo "==> $name: no time left" >>"$OUT/steps.log"; return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "==> $name (limit ${limit}s): $*" | tee -a "$OUT/steps.log"
  local s=$SECONDS rc
  # the step functions run in a child bash (timeout cannot run a shell function itself)
  timeout -k 5 "$limit" bash -c '"$@"' step-"$name" "$@" >"$log" 2>&1; rc=$?
  local dt=$((SECONDS - s)) st note
  case $rc in
    0) st=PASS ;; 77) st=SKIP ;; 124|137) st=TIMEOUT ;;
    *) st=FAIL ;;
  esac
  grep -q '^NA: ' "$log" && st=NA
  note=$(grep -E '^(NOTE|NA|SKIP|FAIL)[: ]' "$log" | tail -n 1 | cut -c1-160)
  [ -n "$note" ] || note="exit $rc"
  cat "$log" >>"$OUT/steps.log"
  SUMMARY+=("$name $st $dt $note")
}

st_env() { # what the device has: GPU, driver, CUDA, glibc, the libraries the bundle resolves
  local rc=0
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; uname -a
  sed -n '1,6p' "$B/MANIFEST"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  else
    echo "nvidia-smi: not found"
  fi
  command -v nvcc >/dev/null 2>&1 && nvcc --version | tail -n 2
  local have; have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  local need; need=$(sed -n 's/^needs: GLIBC_\([0-9.]*\).*/\1/p' "$B/MANIFEST")
  echo "glibc here: $have, needed: $need"
  if [ -n "$have" ] && [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -t. -k1,1n -k2,2n | tail -n 1)" != "$have" ]; then
    echo "FAIL: the device's glibc $have is older than the bundle's $need"; rc=1
  fi
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  local f miss outside
  for f in "$B"/bin/* "$B"/tests/* "$B"/bench/*; do
    # every carried kind of library must resolve from the bundle itself: the device has none
    # of them, and a copy found on this machine's system path would hide a gap in the bundle
    outside=$(ldd "$f" 2>&1 | awk -v b="$B/lib/" -v base="$BASE_RE" -v cu="$CUDA_RE" \
      '/=>/ && $3 != "not" && $1 !~ base && $1 !~ cu && index($3, b) != 1 {printf "%s (%s) ", $1, $3}')
    [ -z "$outside" ] || { echo "FAIL: $(basename "$f") resolves outside the bundle: $outside"; rc=1; }
    miss=$(ldd "$f" 2>&1 | awk '/not found/ {print $1}' | tr '\n' ' ')
    if [ -n "$miss" ]; then
      if [[ $miss =~ (cublas|nccl|cudart) ]] && [ $DRY = 1 ] && ! have_gpu; then
        echo "NOTE: $(basename "$f") lacks $miss(CUDA libraries: expected without a device in a dry run)"
      else
        echo "FAIL: $(basename "$f") cannot resolve: $miss"; rc=1
      fi
    fi
  done
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -n 1
  return $rc
}

have_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }

st_gpu_tests() { # every GPU test program; a failing one again with DPCERT_CUDA_SYNC=1 (names the kernel)
  local t rc=0 r any=0
  for t in "$B"/tests/*; do
    echo "--- $(basename "$t")"
    "$t"; r=$?
    if [ $r = 77 ]; then continue; fi
    any=1
    if [ $r != 0 ]; then
      rc=1
      echo "FAIL: $(basename "$t") exited $r; again with DPCERT_CUDA_SYNC=1 (synchronise after each launch)"
      DPCERT_CUDA_SYNC=1 "$t"; echo "(debug pass exit $?)"
    fi
  done
  [ $any = 1 ] || { echo "SKIP: no GPU test program could run (no device)"; return 77; }
  return $rc
}

st_ops() { # the operation harness on the device: every op against its double evaluation
  local r rc=0 dt
  if ! have_gpu; then # a rehearsal: the harness must stop at the device probe
    "$B/bin/dpcert" ops --backend cuda --dtype f32 2>&1 | tail -n 2
    echo "SKIP: no GPU: the harness reached the device probe"; return 77
  fi
  for dt in f32 f64; do
    echo "--- dpcert ops --backend cuda --dtype $dt"
    "$B/bin/dpcert" ops --backend cuda --dtype "$dt"; r=$?
    [ $r = 77 ] && { echo "SKIP: the harness could create no cuda backend (no device)"; return 77; }
    [ $r = 0 ] || rc=1
  done
  "$B/bin/dpcert" ops --support --backends host,cuda || rc=1
  return $rc
}

st_conform() { # the gate: ci suite on the device at one rank, every run required, diff vs host
  local rep=$OUT/logs/conform-cuda
  "$B/bin/dpcert" conform --suite ci --backend cuda --ranks 1 --require-all --report "$rep" >"$OUT/conform-cuda.txt" 2>&1
  local rc=$?
  cat "$OUT/conform-cuda.txt"
  echo "NOTE: one GPU holds one rank (NCCL refuses two ranks on one device): the multi-rank cases of the gate run on the CPU emulation (cuda-emu) in make test"
  [ $rc = 77 ] && { echo "SKIP: conform could compare no case on the cuda backend"; return 77; }
  if ! have_gpu; then # a rehearsal: every run must have stopped at the device (or a stated refusal)
    local reached; reached=$(grep -c 'no CUDA device' "$OUT/conform-cuda.txt")
    echo "SKIP: no GPU: $reached runs reached the device probe, the others were refused before it (listed above)"
    return 77
  fi
  awk '$1 ~ /^\[[0-9]+\/[0-9]+\]$/ {print $2, $3}' "$OUT/conform-cuda.txt" | sort >"$OUT/logs/verdicts-cuda.txt"
  local diff; diff=$(join -a 1 "$B/host/verdicts.txt" "$OUT/logs/verdicts-cuda.txt" | awk '$2 != $3 {print "  " $1 ": host " $2 ", cuda " ($3 == "" ? "(not run)" : $3)}')
  if [ -n "$diff" ]; then
    echo "FAIL: verdicts that differ from the host backend's:"; echo "$diff"; [ $rc = 0 ] && rc=1
  else
    echo "NOTE: every run has the host backend's verdict"
  fi
  return $rc
}

st_sanitizer() { # compute-sanitizer memcheck and racecheck on the DP kernel and backend tests
  local cs; cs=$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")
  [ -x "$cs" ] || { echo "NA: compute-sanitizer not found on this machine"; return 3; }
  have_gpu || { echo "SKIP: no GPU"; return 77; }
  local t tool r rc=0 out
  for t in optimized_test_cuda_gpu_dp optimized_test_cuda_gpu_fused optimized_test_cuda_gpu_backend; do
    [ -x "$B/tests/$t" ] || { echo "FAIL: $t not in the bundle"; rc=1; continue; }
    for tool in memcheck racecheck; do
      echo "--- compute-sanitizer --tool $tool $t"
      out=$("$cs" --tool "$tool" --error-exitcode 99 "$B/tests/$t" 2>&1); r=$?
      echo "$out" | tail -n 20
      if echo "$out" | grep -qE 'Device not supported|error 999|Unable to (find|initialize)'; then
        echo "NA: compute-sanitizer $tool refused by this device runtime"; return 3
      fi
      [ $r = 0 ] || { echo "FAIL: $tool on $t exited $r"; rc=1; }
    done
  done
  return $rc
}

st_bench() { # G1-G3 ratios (CUDA events); MODE quick or full
  local b n=0 r rc=0
  for b in "$B"/bench/*; do
    case $b in *gpu_step*) continue ;; esac # G4: its own step (st_g4)
    n=$((n+1))
    if [ "$1" = quick ]; then "$b" --quick; else "$b" -n 20; fi; r=$?
    [ $r = 77 ] && { echo "SKIP: $(basename "$b"): no GPU"; return 77; }
    [ $r = 0 ] || rc=1
  done
  [ $n -gt 0 ] || { echo "FAIL: no GPU benchmark in the bundle"; return 1; }
  return $rc
}

st_g4() { # G4: the engine's whole DP step / its non-DP step on the device (bench_gpu_step), side by side
  local g; g=$(ls "$B"/bench/*gpu_step* 2>/dev/null | head -n 1)
  [ -n "$g" ] || { echo "FAIL: no bench/*gpu_step* program in the bundle"; return 1; }
  # the G4 shape (D 1024, L 8, H 16, F 2816, T 1024, B 8, V 32000), f32 (the CUDA backend has no
  # bf16 path yet), 3 warm-ups and up to 20 timed steps per configuration within 100 s in all;
  # without a GPU it stops at the device probe (exit 77: SKIP)
  DPCERT_CUDA_PLUGIN="$B/bin/libdpcert_cuda.so" "$g" --backend cuda --dtype f32 --budget 100 >"$OUT/logs/g4-results.txt" 2>&1
  local r=$?
  cat "$OUT/logs/g4-results.txt"
  return $r
}

st_peers() { # G4 end to end and the PyTorch/Opacus peers on the same GPU (ci/peers/gpu_step.sh)
  have_gpu || { echo "SKIP: no GPU"; return 77; }
  bash "$ROOT/ci/peers/gpu_step.sh" "$B" "$OUT/logs"
}

run() {
  [ $# -ge 2 ] || die "usage: ci/gpu-bundle.sh run BUNDLE OUT [--dry-run] [--budget SECONDS]"
  B=$1 OUT=$2; shift 2
  while [ $# -gt 0 ]; do
    case $1 in
      --dry-run) DRY=1 ;;
      --budget) BUDGET=$2; shift; [[ $BUDGET =~ ^[0-9]+$ ]] && [ "$BUDGET" -ge 60 ] || die "--budget needs whole seconds >= 60" ;;
      *) die "run: unknown option $1" ;;
    esac
    shift
  done
  case $B in /*) ;; *) B=$PWD/$B ;; esac
  [ -f "$B/MANIFEST" ] || die "run: $B is not a bundle (no MANIFEST; make one with ci/gpu-bundle.sh pack)"
  mkdir -p "$OUT/logs" || die "run: cannot create $OUT"
  T0=$SECONDS
  : >"$OUT/steps.log"
  # libraries: the bundle's, then the device's CUDA libraries wherever they are
  local libs="$B/lib" d py_nv
  for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && [[ ":$libs:" != *":$d:"* ]] && libs="$libs:$d"
  done
  py_nv=$(python3 -c 'import os, nvidia; print("\n".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in sorted(os.listdir(p))))' 2>/dev/null)
  for d in $py_nv; do [ -d "$d" ] && libs="$libs:$d"; done
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -d "$B/ompi" ] && export OPAL_PREFIX="$B/ompi"
  export DPCERT_ROOT=$ROOT DPCERT="$B/bin/dpcert" DPCERT_BUILD="$B"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export B OUT DRY ROOT BASE_RE CUDA_RE
  export -f have_gpu st_env st_gpu_tests st_ops st_conform st_sanitizer st_bench st_g4 st_peers

  step env 30 st_env
  cp "$OUT/logs/env.log" "$OUT/env.txt"
  if ! have_gpu && [ $DRY = 0 ]; then
    SUMMARY+=("gpu FAIL 0 no GPU on this machine (nvidia-smi lists none); use --dry-run to rehearse without one")
  fi
  step gpu-tests 150 st_gpu_tests
  step ops 60 st_ops
  step conform 240 st_conform
  step sanitizer 150 st_sanitizer
  step bench-quick 60 st_bench quick
  step g4 130 st_g4
  step peers 150 st_peers
  step bench-full 150 st_bench full
  grep -h '' "$OUT/logs/bench-quick.log" "$OUT/logs/g4.log" "$OUT/logs/bench-full.log" >"$OUT/bench.txt" 2>/dev/null || true
  [ -f "$OUT/conform-cuda.txt" ] || echo "(conform did not run)" >"$OUT/conform-cuda.txt"

  local nfail=0 line
  {
    echo "dpcert GPU run: $(sed -n 's/^git: //p' "$B/MANIFEST"), $( [ $DRY = 1 ] && echo 'DRY RUN (no device expected)' || echo 'device run'), budget ${BUDGET}s, used $((SECONDS - T0))s"
    for line in "${SUMMARY[@]}"; do
      printf '%-12s %-8s %4ss  %s\n' $(echo "$line" | cut -d' ' -f1-3) "$(echo "$line" | cut -d' ' -f4-)"
      case $(echo "$line" | cut -d' ' -f2) in FAIL|TIMEOUT) nfail=$((nfail+1)) ;; esac
    done
    echo "verdict: $( [ $nfail = 0 ] && echo OK || echo "$nfail step(s) failed")"
  } >"$OUT/summary.txt"
  (cd "$OUT" && tar czf logs.tar.gz logs && rm -rf logs)
  cat "$OUT/summary.txt"
  [ $nfail = 0 ]
}

call() {
  local b=${1:-.gpu-bundle}
  cat <<EOF
device call (docs/gpu-results.md "The bundle"):
  run(command="bash ci/gpu-bundle.sh run $b \$OUT", carry=["$b"], timeout_s=570)
the command's own budget is 540 s (steps stop starting when it is spent); the files that come
back: summary.txt, steps.log, logs.tar.gz, conform-cuda.txt, bench.txt, env.txt
EOF
}

cmd=${1:-}
[ -n "$cmd" ] && shift
case $cmd in
  pack) pack "$@" ;;
  run) run "$@" ;;
  call) call "$@" ;;
  *) die "usage: ci/gpu-bundle.sh pack|run|call ... (see the header of ci/gpu-bundle.sh)" ;;
esac

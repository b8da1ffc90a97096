#!/usr/bin/env bash
# ci/peers/bench-peers.sh BUILD — `make bench-peers` (not part of make test): dpcert's
# host engine against the same llama in PyTorch (non-DP) and Opacus (hooks, ghost
# clipping), f32 and f64, 1 and 2 threads, at five sizes; prints the ratios and writes
# them into docs/performance.md (ci/peers/peers_report.py). Installs torch and opacus
# from PyPI into BUILD/peers-venv on first use (about 5.5 GB: the PyPI torch wheel
# brings the CUDA libraries; about 2 minutes here).
# Knobs (environment): SIZES ("D,L,T,B ..."), DTYPES, THREADS, STRATEGIES (dpcert),
# MODES (PyTorch), OMP_WAIT (PyTorch's OMP_WAIT_POLICY), WARMUP, REPS, ROUNDS (every
# configuration ROUNDS times, rounds interleaved; the report takes medians), DOC.
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$BUILD/peers-venv
SIZES=${SIZES:-"64,2,64,16 128,4,128,16 256,4,256,8 512,4,512,8 1024,2,512,4"}
DTYPES=${DTYPES:-"f32 f64"}
THREADS=${THREADS:-"1 2"}
STRATEGIES=${STRATEGIES:-"grad-sample ghost mixed-ghost book-keeping fused non-dp"}
MODES=${MODES:-"nondp opacus-hooks opacus-ghost"}
# PyTorch's OpenMP workers sleep while waiting (as dpcert's pool workers do); spinning
# (OMP_WAIT=active, libgomp's default) collapses when the cores are oversubscribed.
OMP_WAIT=${OMP_WAIT:-passive}
WARMUP=${WARMUP:-2}
REPS=${REPS:-5}
ROUNDS=${ROUNDS:-1}
DOC=${DOC:-$ROOT/docs/performance.md}
RES=$BUILD/peers-results.txt
GEMM=$BUILD/peers-gemm.txt

if ! "$VENV/bin/python" -c 'import torch, opacus' 2>/dev/null; then
  echo "bench-peers: installing torch and opacus from PyPI into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --progress-bar off torch opacus
fi

# GEMM kernels against OpenBLAS (when libopenblas-dev is installed)
rm -f "$GEMM"
OB_INC=$(ls -d /usr/include/x86_64-linux-gnu/openblas*-pthread 2>/dev/null | head -1 || true)
if [ -n "$OB_INC" ] && [ -f "$OB_INC/cblas.h" ]; then
  cc -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -fno-fast-math -Wall -Wextra -Werror -I"$ROOT" -I"$OB_INC" \
    "$ROOT/ci/peers/gemm_vs_openblas.c" "$BUILD/lib/libdpoptimized.a" -lopenblas -lm -o "$BUILD/peers-gemm"
  for sz in $SIZES; do
    IFS=, read -r D L T B <<< "$sz"
    "$BUILD/peers-gemm" "$D" "$T" "$B" | tee -a "$GEMM"
  done
else
  echo "bench-peers: libopenblas-dev not installed; GEMM comparison skipped (apt-get install libopenblas-dev)"
fi

: > "$RES"
for round in $(seq 1 "$ROUNDS"); do
for sz in $SIZES; do
  IFS=, read -r D L T B <<< "$sz"
  for dt in $DTYPES; do
    for th in $THREADS; do
      for s in $STRATEGIES; do
        echo "LOAD $(cut -d' ' -f1 /proc/loadavg)" >> "$RES"
        "$BUILD/bench/optimized_bench_step" -t "$th" -w "$WARMUP" -n "$REPS" --dtype "$dt" --dim "$D" --layers "$L" --seq "$T" \
          --batch "$B" --strategy "$s" | tee -a "$RES"
      done
      for m in $MODES; do
        export OMP_NUM_THREADS=$th OMP_WAIT_POLICY=$OMP_WAIT
        echo "LOAD $(cut -d' ' -f1 /proc/loadavg)" >> "$RES"
        "$VENV/bin/python" -W ignore "$ROOT/ci/peers/llama_peers.py" --mode "$m" --dtype "$dt" --threads "$th" \
          --dim "$D" --layers "$L" --seq "$T" --batch "$B" --warmup "$WARMUP" --reps "$REPS" | tee -a "$RES"
      done
    done
  done
done
done
CMD="make bench-peers"
KNOBS="SIZES='$SIZES' DTYPES='$DTYPES' THREADS='$THREADS' STRATEGIES='$STRATEGIES' MODES='$MODES' OMP_WAIT=$OMP_WAIT WARMUP=$WARMUP REPS=$REPS ROUNDS=$ROUNDS"
[ "$KNOBS" = "SIZES='64,2,64,16 128,4,128,16 256,4,256,8 512,4,512,8 1024,2,512,4' DTYPES='f32 f64' THREADS='1 2' STRATEGIES='grad-sample ghost mixed-ghost book-keeping fused non-dp' MODES='nondp opacus-hooks opacus-ghost' OMP_WAIT=passive WARMUP=2 REPS=5 ROUNDS=1" ] || \
  CMD="$KNOBS make bench-peers"
"$VENV/bin/python" "$ROOT/ci/peers/peers_report.py" "$RES" "$GEMM" "$DOC" "$CMD"

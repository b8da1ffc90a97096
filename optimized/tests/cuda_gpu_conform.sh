#!/usr/bin/env bash
# optimized/tests/cuda_gpu_conform.sh — the conformance gate of the CUDA backend:
# `dpcert conform --suite ci` on the host backend and on the cuda backend; every case that
# passes on the host must pass on cuda (against the reference, under the derived
# tolerances), no cuda case may fail, and at least one must have run.
# SUITE=full runs the full suite instead. Exits 77 without a GPU.
set -u
export LC_ALL=C
SUITE=${SUITE:-ci}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no GPU (nvidia-smi lists none)"; exit 77
fi
if ! "$DPCERT" version | grep -q "cuda (plugin"; then
  echo "SKIP: dpcert built without the cuda backend"; exit 77
fi
nvidia-smi -L
T=${TMPDIR:-/tmp}
"$DPCERT" conform --suite "$SUITE" --backend host >"$T/host.txt" 2>&1; rh=$?
"$DPCERT" conform --suite "$SUITE" --backend cuda --report "$T/conform-cuda" >"$T/cuda.txt" 2>&1; rc=$?
cat "$T/cuda.txt"
tail -n 1 "$T/host.txt"
# per-run lines: "[i/n] NAME STATUS ..."
awk '$1 ~ /^\[[0-9]+\/[0-9]+\]$/ {print $2, $3}' "$T/host.txt" | sort >"$T/host.st"
awk '$1 ~ /^\[[0-9]+\/[0-9]+\]$/ {print $2, $3}' "$T/cuda.txt" | sort >"$T/cuda.st"
fail=0
npass=$(awk '$2 == "PASS"' "$T/cuda.st" | wc -l)
[ "$npass" -gt 0 ] || { echo "FAIL: no case passed on the cuda backend"; fail=1; }
if awk '$2 == "FAIL"' "$T/cuda.st" | grep -q .; then
  echo "FAIL: cases failing on cuda:"; awk '$2 == "FAIL" {print "  " $1}' "$T/cuda.st"; fail=1
fi
missing=$(join "$T/host.st" "$T/cuda.st" | awk '$2 == "PASS" && $3 != "PASS" {print "  " $1 " (cuda: " $3 ")"}')
if [ -n "$missing" ]; then echo "FAIL: cases passing on host but not on cuda:"; echo "$missing"; fail=1; fi
echo "host conform exit $rh, cuda conform exit $rc, cuda PASS: $npass"
[ $fail = 0 ] && [ $rc = 0 ]

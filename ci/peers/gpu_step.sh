#!/usr/bin/env bash
# ci/peers/gpu_step.sh BUNDLE LOGDIR — G4 and the peers on the GPU (a step of
# ci/gpu-bundle.sh run; docs/gpu-results.md "G4 and the peers"). One llama configuration
# (issue 25: D=1024, L=8, H=16, F=2816, T=1024, batch 8, V=32000, bf16), timed with CUDA
# events, median of 20 steps after 3 warm-up steps, each configuration in its own process:
#   dpcert: the RESULT lines of the bundle's g4 step (LOGDIR/g4-results.txt: bench_gpu_step, the
#           engine's DP step per configuration and its non-DP step on the same batch, f32);
#   PyTorch non-DP bf16, Opacus hooks and Opacus ghost clipping bf16 (ci/peers/llama_peers.py
#           --device cuda; Opacus from the wheel the bundle carries).
# Prints every RESULT line and the ratios G4 asks for that its inputs allow; a configuration
# that fails is reported with its reason and the others still run.
set -u
B=${1:?usage: gpu_step.sh BUNDLE LOGDIR}
L=${2:?usage: gpu_step.sh BUNDLE LOGDIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$L"
CFG="--dim 1024 --layers 8 --heads 16 --ffn 2816 --seq 1024 --batch 8 --vocab 32000 --warmup 3 --reps 20"
rc=0
res=$L/peers-results.txt
: >"$res"
# dpcert's side: the RESULT lines of the bundle's g4 step (ci/gpu-bundle.sh st_g4, the same
# shape, f32), measured just before in the same call; not measured a second time here
if grep -q '^RESULT' "$L/g4-results.txt" 2>/dev/null; then
  echo "--- dpcert: the g4 step's results ($L/g4-results.txt)"
  grep '^RESULT' "$L/g4-results.txt" | tee -a "$res"
else
  echo "NOTE: G4 (dpcert's end-to-end DP step / its non-DP step): no RESULT from the g4 step (see its log)"
fi
SITE=${TMPDIR:-/tmp}/dpcert-peers-site
if ls "$B"/wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$B"/wheels/*.whl \
    || echo "NOTE: the Opacus wheel did not install; the Opacus modes will fail"
  export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
for mode in nondp opacus-hooks opacus-ghost; do
  echo "--- pytorch $mode bf16 cuda"
  PYTHONUNBUFFERED=1 timeout 90 python3 "$ROOT/ci/peers/llama_peers.py" --mode "$mode" --dtype bf16 --device cuda $CFG \
    >"$L/peer-$mode.log" 2>&1
  r=$?
  cat "$L/peer-$mode.log" | tail -n 5
  grep '^RESULT' "$L/peer-$mode.log" >>"$res" || { echo "NOTE: pytorch $mode gave no result (exit $r)"; }
done
# ratios from the RESULT lines: median_s of each configuration
awk '
  /^RESULT/ { tool=""; strat=""; med="";
    for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == "tool") tool = kv[2];
      if (kv[1] == "strategy") strat = kv[2]; if (kv[1] == "median_s") med = kv[2] }
    t[tool "/" strat] = med }
  END {
    base = ("pytorch/nondp" in t) ? t["pytorch/nondp"] : ""; ours = ("dpcert/non-dp" in t) ? t["dpcert/non-dp"] : ""
    for (k in t) {
      line = sprintf("%-28s median %.4f s", k, t[k])
      if (ours != "" && k ~ /^dpcert\// && k != "dpcert/non-dp") line = line sprintf("  G4 vs dpcert non-DP %.3f", t[k] / ours)
      if (base != "" && k != "pytorch/nondp") line = line sprintf("  vs PyTorch non-DP %.3f", t[k] / base)
      print line
    }
  }' "$res" | sort
exit $rc

#!/bin/sh
# optimized/cuda/emu/cu_emu_rewrite.sh IN.cu OUT — the launch rewriter of the CUDA emulation
# (docs/cuda.md "The emulation"): copies IN.cu to OUT with every kernel launch
#     kernel<<<grid, block, smem, stream>>>(args)
# turned into
#     kernel| cu_emu::cfg(grid, block, smem, stream)(args)
# (cu_emu_kernel.h: the operator | launches), and a #line directive so that diagnostics
# and __FILE__ name IN.cu. Only the two tokens change, so a launch may span lines; a
# file whose '<<<' and '>>>' do not pair up is refused.
set -eu
in=$1 out=$2
n1=$(grep -o '<<<' "$in" | wc -l)
n2=$(grep -o '>>>' "$in" | wc -l)
if [ "$n1" != "$n2" ]; then
  echo "cu_emu_rewrite: $in has $n1 '<<<' but $n2 '>>>' (not a launch the rewriter understands)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
{ printf '#line 1 "%s"\n' "$in"; sed -e 's/<<</| cu_emu::cfg(/g' -e 's/>>>/)/g' "$in"; } >"$out.tmp"
mv "$out.tmp" "$out"

#!/usr/bin/env bash
# ci/run-bench.sh BUILD [--gpu] — runs every benchmark program ($BUILD/bench/*).
# Each prints its own ratios with the command that reproduces them (docs/benchmarks.md).
set -u
BUILD=${1:?usage: ci/run-bench.sh BUILD [--gpu]}
MODE=${2:-cpu}
export DPCERT="$BUILD/dpcert" DPCERT_ROOT=$(cd "$(dirname "$0")/.." && pwd)
rc=0; n=0
for b in "$BUILD"/bench/*; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  if [ "$MODE" = --gpu ]; then [[ $name == *gpu* ]] || continue; else [[ $name == *gpu* ]] && continue; fi
  n=$((n+1))
  echo "==> $name   (reproduce: $b)"
  "$b"; r=$?
  [ $r = 0 ] || [ $r = 77 ] || rc=$r
done
[ $n -gt 0 ] || echo "no benchmarks built"
exit $rc

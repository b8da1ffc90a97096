#!/usr/bin/env bash
# ci/tests/gpu_bundle_dry_run.sh — the GPU run's bundle cannot rot (issue 25 A): packs the
# bundle from this build (offline: no Opacus wheel) and rehearses `ci/gpu-bundle.sh run
# --dry-run` on this machine, which has no GPU: every step runs up to the device and must
# end PASS, SKIP or NA (never FAIL or TIMEOUT), the six result files must exist, the bundle
# must stay under its carry budget and match its MANIFEST. Negative control: the same bundle
# with one carried library removed must FAIL its env step (ldd cannot resolve it).
# Exits 77 where the CUDA plugin is not built (no nvcc/cuBLAS/NCCL, or the sanitizer build).
set -u
[ -f "$DPCERT_BUILD/libdpcert_cuda.so" ] || { echo "SKIP: $DPCERT_BUILD has no CUDA plugin (built only with nvcc, cuBLAS and NCCL, not under SANITIZE)"; exit 77; }
source "$DPCERT_ROOT/common/tests/check_lib.bash"
W=$PWD
bash "$DPCERT_ROOT/ci/gpu-bundle.sh" pack --build "$DPCERT_BUILD" --out "$W/bundle" --offline >pack.log 2>&1
check "pack exits 0" test $? = 0
cat pack.log
check "bundle has a MANIFEST" test -f "$W/bundle/MANIFEST"
check "bundle is under 48 MiB" test "$(du -sk "$W/bundle" | cut -f1)" -le $((48 * 1024))
check "MANIFEST hashes match the files" bash -c "cd '$W/bundle' && sed -n '/^files:/,\$p' MANIFEST | tail -n +2 | sha256sum --quiet -c -"
check "host verdicts recorded" test -s "$W/bundle/host/verdicts.txt"
bash "$DPCERT_ROOT/ci/gpu-bundle.sh" run "$W/bundle" "$W/out" --dry-run >run.log 2>&1; rc=$?
cat run.log
check "dry run exits 0" test $rc = 0
for f in summary.txt steps.log logs.tar.gz conform-cuda.txt bench.txt env.txt; do
  check "dry run wrote $f" test -f "$W/out/$f"
done
check "no more than 8 result files" test "$(find "$W/out" -type f | wc -l)" -le 8
for s in env gpu-tests ops conform sanitizer bench-quick g4 peers bench-full; do
  check "summary has step $s (PASS/SKIP/NA)" grep -Eq "^$s +(PASS|SKIP|NA) " "$W/out/summary.txt"
done
check "conform step reached the device probe" grep -q 'reached the device probe' "$W/out/summary.txt"
check "the bundle carries G4's benchmark" bash -c "ls '$W/bundle'/bench/*gpu_step* >/dev/null"
check "g4 step loaded the CUDA plugin and stopped at the device probe" grep -Eq '^g4 +SKIP .*(no CUDA device|SKIP: backend cuda)' "$W/out/summary.txt"
# negative control: a carried library missing
rm -f "$W/bundle/lib/libmpfr.so.6"
bash "$DPCERT_ROOT/ci/gpu-bundle.sh" run "$W/bundle" "$W/out2" --dry-run >run2.log 2>&1; rc=$?
check "control: a missing library fails the run (exit 1)" test $rc = 1
check "control: the env step names the library" grep -q 'libmpfr.so.6' "$W/out2/summary.txt"
# bad usage
bash "$DPCERT_ROOT/ci/gpu-bundle.sh" run "$W/nope" "$W/out3" >/dev/null 2>&1
check "run on a folder that is not a bundle exits 2" test $? = 2
echo "$checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

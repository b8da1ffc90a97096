#!/usr/bin/env bash
# optimized/tests/startup_host.sh — host-only commands start light (issue 15 "Also",
# docs/development.md "Start-up cost", docs/cuda.md "Plugin"):
#   - build/dpcert links no CUDA library (no libcublas, libcublasLt, libnccl, libcudart
#     in its ldd output; the CUDA backend is the plugin libdpcert_cuda.so);
#   - `dpcert account ...`, `rng`, `version`, `inspect` peak RSS < 20 MiB (GNU time, or
#     python3's getrusage as an upper bound; before: about 220 MiB with CUDA mapped);
#   - start-up time: the minimum over 20 runs of `dpcert version` is printed and must be
#     under 50 ms (a regression guard only: the loaded CI machine is too noisy for the
#     10 ms target, which docs/development.md reports measured on an idle machine; the
#     binary that linked CUDA took about 100 ms);
#   - --backend cuda without the plugin (the binary copied alone into this directory):
#     exit 3 "not built into this binary"; with DPCERT_CUDA_PLUGIN naming a missing file:
#     exit 3 "cannot load plugin" (both lines the conformance runner maps to NOT_SUPPORTED).
set -u
[ -x "${DPCERT:-}" ] || { echo "SKIP: no dpcert binary"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
if command -v ldd >/dev/null 2>&1; then
  if ldd "$DPCERT" | grep -Eiq 'libcublas|libnccl|libcudart'; then bad "dpcert links CUDA libraries:"; ldd "$DPCERT" | grep -Ei 'cublas|nccl|cudart'
  else pass "ldd dpcert: no libcublas/libnccl/libcudart ($(ldd "$DPCERT" | wc -l) libraries)"; fi
else echo "ldd not found: library check not run"; fail=77; fi
# peak RSS of a command, "RC KIB": GNU time's %M when installed, else python3's getrusage
# of its child, which also counts the forked interpreter before exec (an upper bound)
if /usr/bin/time -f %M true >/dev/null 2>&1; then
  echo "peak RSS by /usr/bin/time"
  rss() { local rc; /usr/bin/time -o rss.txt -f %M "$@" >/dev/null 2>&1; rc=$?; echo "$rc $(tail -n1 rss.txt)"; }
else
  echo "peak RSS by python3 getrusage (an upper bound: includes the forked interpreter)"
  rss() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
  }
fi
printf 'not safetensors' > bad.safetensors
# a sanitizer build (ASan shadow memory and start-up) cannot meet the budgets: its RSS and
# time are not measured (the plain build's run of this test measures them)
if command -v ldd >/dev/null 2>&1 && ldd "$DPCERT" | grep -q libasan; then
  echo "sanitizer build: RSS and start-up budgets not measured here"
else
while IFS= read -r cmd; do
  # shellcheck disable=SC2086
  read -r rc kib < <(rss "$DPCERT" $cmd)
  if [ "$kib" -lt 20480 ]; then pass "peak RSS $kib KiB < 20 MiB: dpcert $cmd (exit $rc)"
  else bad "peak RSS $kib KiB >= 20 MiB: dpcert $cmd (exit $rc)"; fi
done <<'CMDS'
account --mechanism gaussian --q 0.01 --sigma 1 --steps 100 --delta 1e-5 --accountant rdp
version
rng philox --key 1,2 --counter 0,0,0,0
inspect bad.safetensors
CMDS
ms=$(python3 - "$DPCERT" <<'PY'
import subprocess, sys, time
best = 1e9
for _ in range(20):
    t = time.perf_counter(); subprocess.run([sys.argv[1], "version"], stdout=subprocess.DEVNULL); best = min(best, time.perf_counter() - t)
print("%.2f" % (best * 1e3))
PY
)
# The wall-clock guard means something only on a machine that is not oversubscribed (a
# loaded machine delays every exec alike); the deterministic guards above (ldd, RSS) run
# always.
load=$(cut -d' ' -f1 /proc/loadavg); cores=$(nproc)
if python3 -c "import sys; sys.exit(0 if float('$load') > float('$cores') else 1)"; then
  echo "NOTE  start-up: min of 20 runs of 'dpcert version' $ms ms (not asserted: load average $load > $cores cores)"
elif python3 -c "import sys; sys.exit(0 if float('$ms') < 50 else 1)"; then pass "start-up: min of 20 runs of 'dpcert version' $ms ms (< 50 ms guard; target 10 ms on an idle machine)"
else bad "start-up: min of 20 runs of 'dpcert version' $ms ms >= 50 ms"; fi
fi
cp "$DPCERT" ./dpcert-alone
env -u DPCERT_CUDA_PLUGIN ./dpcert-alone train dpsgd --model mlp --backend cuda >nop.log 2>&1; rc=$?
if [ $rc = 3 ] && grep -q "not built into this binary" nop.log; then pass "no plugin: exit 3, $(cat nop.log)"
else bad "no plugin: exit $rc"; cat nop.log; fi
DPCERT_CUDA_PLUGIN="$PWD/missing.so" ./dpcert-alone train dpzo --model mlp --backend cuda --dataset-size 8 --q 0.5 --steps 1 \
  --clip 1 --sigma 1 --phi 0.1 --lr 0.1 --seed 1 >nop.log 2>&1; rc=$?
if [ $rc = 3 ] && grep -q "not supported: backend 'cuda': cannot load plugin .*missing.so" nop.log; then pass "missing DPCERT_CUDA_PLUGIN: exit 3"
else bad "missing DPCERT_CUDA_PLUGIN: exit $rc"; cat nop.log; fi
exit $fail

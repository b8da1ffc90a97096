#!/usr/bin/env bash
# optimized/tests/ops_harness.sh — the operation harness (`dpcert ops`, docs/engine.md
# "The operation harness"):
#  1. the host backend PASSes every operation of the registry at f64, f32, bf16 and fp16
#     values, at 1 thread (determinism also checked at 3) and at 2 threads, and at 2 ranks
#     under mpirun (collectives on 2 ranks); the run time is printed; where a `cuda` or
#     `cuda-emu` backend can be created, the harness runs on it too (f32, f64: no FAIL;
#     cuda-emu also at 2 ranks under mpirun);
#  2. an operation without a case FAILs (the test hook DPCERT_OPS_DROP_CASE hides one; the
#     hook is inert without DPCERT_TEST_INJECT=1); bad usage exits 2;
#  3. the support table of docs/engine.md and docs/cuda.md (between the markers
#     <!-- ops-support:begin --> and <!-- ops-support:end -->; both copies equal) lists the
#     registry's operations in order and agrees with `dpcert ops --support` for every
#     column this machine can produce (host, the plugins built here; cuda from a device or
#     its emulation when one can be created, else from the table that
#     optimized/cuda/*.cu's opt_backend_cuda_create fills); negative control: a table with
#     one cell changed is caught.
# OPS_TABLE_PRINT=1 optimized/tests/ops_harness.sh prints the table the docs must hold.
set -u
D=${DPCERT:?}
R=${DPCERT_ROOT:?}
"$D" ops --help >/dev/null 2>&1 || { echo "SKIP: this dpcert has no 'ops' command"; exit 77; }
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
PL=$(dirname "$D")/plugins
NOPS=$("$D" ops --support --backends host | tail -n +2 | grep -c .)

# ---- 3 first (it also serves OPS_TABLE_PRINT) ----
COLS="host cuda"
[ -f "$PL/libdpcert_openblas.so" ] && COLS="$COLS plugin:openblas"
[ -f "$PL/libdpcert_skeleton.so" ] && COLS="$COLS plugin:skeleton"
live=$("$D" ops --support --markdown --backends "$(tr ' ' ',' <<< "$COLS")" 2>&1) || { bad "ops --support failed: $live"; exit 1; }
# the cuda column: a backend that can be created (cuda, else cuda-emu), else the source's table
# (opt_backend_cuda_create's assignments and those of the cb_*_ops functions it calls)
cuda_src=$(awk '/opt_backend_cuda_create\(opt_backend \*be|^void cb_[a-z_]+_ops\(opt_backend_ops \*o\)/ { on = 1 } on { print } on && /^}/ { on = 0 }' "$R"/optimized/cuda/*.cu 2>/dev/null |
           grep -oE 'o->[a-z0-9_]+ = [A-Za-z_]' | grep -v '= NULL' | sed -E 's/o->([a-z0-9_]+) = .*/\1/' | sort -u)
cuda_live=""
if grep -q '^| `alloc` | [a-z-]* | ?' <<< "$live"; then
  if "$D" ops --support --backends cuda-emu >/dev/null 2>&1 && ! "$D" ops --support --markdown --backends cuda-emu | grep -q '| ? |'; then
    cuda_live=$("$D" ops --support --markdown --backends cuda-emu)
  fi
fi
# expected[op] = "host|cuda|openblas|skeleton" marks (ops in registry order)
table() {
  echo "| operation | host | cuda | plugin:openblas | plugin:skeleton |"
  echo "|---|---|---|---|---|"
  awk -F'|' -v cols="$COLS" -v cudasrc="$(tr '\n' ' ' <<< "$cuda_src")" -v cudalive="$(grep '^| `' <<< "$cuda_live" | tr '\n' '#')" '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    BEGIN { n = split(cols, cn, " "); split(cudasrc, cs, " "); for (i in cs) insrc[cs[i]] = 1
            m = split(cudalive, cl, "#"); for (i = 1; i <= m; i++) { split(cl[i], f, "|"); cudal[trim(f[2])] = trim(f[3]) } }
    /^\| `/ { op = trim($2); for (i = 1; i <= n; i++) v[cn[i]] = trim($(i + 2))
      bare = op; gsub(/`/, "", bare)
      c = v["cuda"]; if (c == "?") c = (op in cudal) ? cudal[op] : (bare in insrc ? "yes" : "-")
      o = ("plugin:openblas" in v) ? v["plugin:openblas"] : "n/a"; s = ("plugin:skeleton" in v) ? v["plugin:skeleton"] : "n/a"
      printf "| %s | %s | %s | %s | %s |\n", op, v["host"], c, o, s }' <<< "$live"
}
if [ "${OPS_TABLE_PRINT:-0}" = 1 ]; then table; exit 0; fi
want=$(table)
[ -n "$cuda_live" ] && pass "cuda column from a live cuda-emu backend" ||
  { [ -n "$cuda_src" ] && echo "NOTE  cuda column from opt_backend_cuda_create's table in optimized/cuda/*.cu (no device or emulation here)" ||
    echo "NOTE  cuda column not checked: neither a cuda backend nor its source table here"; }
docblock() { awk '/<!-- ops-support:begin/ { on = 1; next } /<!-- ops-support:end/ { on = 0 } on && /^\|/' "$1"; }
check_block() { # check_block FILE-OF-A-DOC-TABLE NAME: every producible cell equals $want's
  local doc=$1 name=$2 bad_cells
  if [ "$(awk -F'|' '/^\| `/ { print $2 }' "$doc" | tr -d ' `')" != "$(awk -F'|' '/^\| `/ { print $2 }' <<< "$want" | tr -d ' `')" ]; then
    echo "$name: its operations are not the registry's, in order"; return 1; fi
  bad_cells=$(paste -d'\n' <(grep '^| `' "$doc") <(grep '^| `' <<< "$want") | awk -F'|' '
    NR % 2 == 1 { for (i = 2; i <= 6; i++) { d[i] = $i; gsub(/ /, "", d[i]) } next }
    { for (i = 3; i <= 6; i++) { w = $i; gsub(/ /, "", w); if (w != "n/a" && w != d[i]) printf "%s column %d: docs %s, backend %s\n", d[2], i - 2, d[i], w } }')
  [ -z "$bad_cells" ] || { echo "$name: $bad_cells"; return 1; }
  return 0
}
docblock "$R/docs/engine.md" > t_engine.md
docblock "$R/docs/cuda.md" > t_cuda.md
if [ ! -s t_engine.md ] || [ ! -s t_cuda.md ]; then bad "docs/engine.md or docs/cuda.md has no ops-support table (markers)"
else
  cmp -s t_engine.md t_cuda.md && pass "docs/engine.md and docs/cuda.md hold the same support table" ||
    bad "docs/engine.md and docs/cuda.md support tables differ"
  if msg=$(check_block t_engine.md docs/engine.md); then pass "the docs' support table agrees with 'dpcert ops --support' ($COLS)"
  else bad "$msg (regenerate: OPS_TABLE_PRINT=1 DPCERT=$D DPCERT_ROOT=$R optimized/tests/ops_harness.sh)"; fi
  sed '0,/^| `gemm` | yes |/s//| `gemm` | - |/' t_engine.md > t_neg.md
  if cmp -s t_neg.md t_engine.md; then bad "negative control: could not change the gemm host cell"
  elif check_block t_neg.md mutated >/dev/null; then bad "negative control: a changed cell was not caught"
  else pass "negative control: a changed cell of the table is caught"; fi
fi

# ---- 1. the host backend ----
t0=$(date +%s.%N)
for dt in f64 f32 bf16 fp16; do
  out=$("$D" ops --dtype $dt 2>&1); rc=$?
  if [ $rc = 0 ] && grep -q "ops: $NOPS operations: $NOPS PASS, 0 FAIL" <<< "$out"; then pass "host $dt: $NOPS of $NOPS operations PASS"
  else bad "host $dt: exit $rc: $(grep -E 'FAIL|SKIPPED|ops:' <<< "$out" | head -5)"; fi
done
t1=$(date +%s.%N)
echo "NOTE  host harness at four value types: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s"
out=$("$D" ops --threads 2 --dtype f32 2>&1); rc=$?
[ $rc = 0 ] && grep -q "determinism also at 1 thread" <<< "$out" && pass "host at 2 threads (determinism also at 1)" ||
  bad "host at 2 threads: exit $rc: $(grep -E 'FAIL|ops:' <<< "$out" | head -3)"
if command -v mpirun >/dev/null 2>&1; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
  for dt in f64 f32; do
    out=$(mpirun -n 2 "$D" ops --dtype $dt 2>&1); rc=$?
    if [ $rc = 0 ] && grep -q "2 ranks" <<< "$out" && grep -q "$NOPS PASS, 0 FAIL" <<< "$out"; then
      pass "host $dt at 2 ranks under mpirun: every operation PASSes (collectives on 2 ranks)"
    else bad "host $dt at 2 ranks: exit $rc: $(grep -E 'FAIL|ops:|rror' <<< "$out" | head -5)"; fi
  done
else echo "NOTE  mpirun not found: the 2-rank collectives are not checked here"; fi

# the CUDA backend and its emulation, wherever one can be created here (a GPU, or once
# `cuda-emu` is registered): the same harness, no change needed
for b in cuda cuda-emu; do
  if "$D" ops --support --backends "$b" 2>/dev/null | grep -q '^alloc .*yes'; then
    for dt in f32 f64; do
      out=$(timeout 600 "$D" ops --backend $b --dtype $dt 2>&1); rc=$?
      [ $rc = 0 ] && pass "$b $dt: $(grep '^ops:' <<< "$out")" || bad "$b $dt: exit $rc: $(grep -E 'FAIL|ops:|rror' <<< "$out" | head -8)"
    done
    # the collectives, process groups and counters over NCCL at 2 ranks (emulated: NCCL over MPI)
    if [ "$b" = cuda-emu ] && command -v mpirun >/dev/null 2>&1; then
      out=$(CU_EMU_THREADS=1 timeout 600 mpirun -n 2 "$D" ops --backend $b --dtype f64 2>&1); rc=$?
      if [ $rc = 0 ] && grep -q "2 ranks" <<< "$out" && grep -q "$NOPS PASS, 0 FAIL" <<< "$out"; then
        pass "$b f64 at 2 ranks under mpirun: every operation PASSes (collectives and groups on 2 ranks)"
      else bad "$b f64 at 2 ranks: exit $rc: $(grep -E 'FAIL|ops:|rror' <<< "$out" | head -5)"; fi
    fi
  else echo "NOTE  backend $b cannot be created here: not run"; fi
done

# ---- 2. no case, bad usage ----
out=$(DPCERT_TEST_INJECT=1 DPCERT_OPS_DROP_CASE=gemm "$D" ops --filter '^gemm$' 2>&1); rc=$?
[ $rc = 1 ] && grep -qE '^  FAIL +gemm +no case for this operation' <<< "$out" && pass "an operation without a case FAILs (exit 1)" ||
  bad "dropped case: exit $rc: $out"
out=$(DPCERT_OPS_DROP_CASE=gemm "$D" ops --filter '^gemm$' 2>&1); rc=$?
[ $rc = 0 ] && pass "the drop hook is inert without DPCERT_TEST_INJECT=1" || bad "drop hook without DPCERT_TEST_INJECT: exit $rc"
for a in "--dtype f16x" "--backend nope" "--markdown" "--threads 0" "--filter (" "--seed -1" "--support --backends host,nope"; do
  # shellcheck disable=SC2086
  out=$("$D" ops $a 2>&1); rc=$?
  [ $rc = 2 ] && pass "ops $a: exit 2" || bad "ops $a: exit $rc (expected 2): $out"
done
exit $fail

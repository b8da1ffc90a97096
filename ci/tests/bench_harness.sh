#!/usr/bin/env bash
# ci/tests/bench_harness.sh — every benchmark program is on the one harness (common/bench.h,
# docs/benchmarks.md). For each source <module>/bench/bench_*.c / *.cu (none may be missing
# from the table below or from $DPCERT_BUILD/bench/):
#   -h prints the harness's usage (-w/-n/-t and "columns: docs/benchmarks.md") and exits 0;
#   an unknown flag exits 2 and names it;
#   `-w 0 -n 1` at the program's smallest size prints the header (program, then git, backend,
#   dtype, ranks, threads, warmup 0, iters 1, clock), the column names, at least one row with
#   the seven columns (numbers, "base"/"n/a"/a ratio, "n/a" or an integer) and ends with the
#   reproduce line; or exits 77 with a SKIP line where it needs what this machine lacks (a GPU,
#   mpirun, the OpenBLAS plugin).
# Negative controls: two stand-ins that are not on the harness (a program with its own flags and
# table; one with the header but neither rows nor the reproduce line) must fail the same checks.
source "$DPCERT_ROOT/common/tests/check_lib.bash"
B=$DPCERT_BUILD/bench
# the smallest size of each program (its own arguments after -w 0 -n 1)
declare -A ARGS=(
  [optimized_bench_strategies]="mlp"
  [optimized_bench_precision]=""
  [optimized_bench_step]="--dim 16 --layers 1 --seq 8 --heads 2 --vocab 32 --batch 2"
  [optimized_bench_zero]=""
  [optimized_bench_cp]=""
  [optimized_bench_ranks]="--rounds 1"
  [optimized_bench_startup]=""
  [optimized_bench_plugin]="--dim 16 --seq 8 --batch 2"
  [optimized_bench_gpu_dp]="--quick"
  [optimized_bench_gpu_step]="--backend host --dim 16 --layers 1 --heads 2 --ffn 32 --seq 8 --batch 2 --vocab 32"
  [optimized_bench_cuda_emu]="4 4096"
  [accountant_bench_accountant]=""
  [accountant_bench_pld_grid]="--only gaussian:0.01:1000"
)

# harness_ok NAME BIN ARGS...: 0 when BIN behaves as a harness program (messages on stdout)
harness_ok() {
  local name=$1 bin=$2; shift 2
  local tmp rc f=0
  tmp=$(mktemp -d)
  "$bin" -h >"$tmp/h.out" 2>&1; rc=$?
  [ $rc = 0 ] || { echo "  $name: -h exits $rc"; f=1; }
  grep -q "^usage: .*\[-w WARMUP\] \[-n ITERS\] \[-t THREADS\]" "$tmp/h.out" &&
    grep -q "^columns: docs/benchmarks.md" "$tmp/h.out" || { echo "  $name: -h does not print the harness's usage"; f=1; }
  "$bin" --no-such-flag >"$tmp/bad.out" 2>&1; rc=$?
  [ $rc = 2 ] || { echo "  $name: an unknown flag exits $rc, not 2"; f=1; }
  grep -q -- "--no-such-flag" "$tmp/bad.out" || { echo "  $name: the refusal does not name the flag"; f=1; }
  (cd "$tmp" && env -u DPCERT timeout 600 "$bin" -w 0 -n 1 "$@" >run.out 2>run.err); rc=$?
  if [ $rc = 77 ]; then
    grep -q "SKIP" "$tmp/run.out" "$tmp/run.err" || { echo "  $name: exit 77 without a SKIP line"; f=1; }
    echo "  $name: skipped here ($(grep -h SKIP "$tmp/run.out" "$tmp/run.err" | head -n 1))"
  elif [ $rc != 0 ]; then
    echo "  $name: -w 0 -n 1 $* exits $rc"; sed 's/^/    /' "$tmp/run.err" | tail -n 5; f=1
  else
    awk -v prog="${name#*_}" '
      NR == 1 { if (index($0, "# dpcert-bench " prog ": ") != 1) { print "  first line is not the header: " $0; bad = 1 } next }
      NR == 2 { if ($0 !~ /^# git: [^ ]+  backend: .+  dtype: .+  ranks: [^ ]+  threads: [^ ]+  warmup: 0  iters: 1  clock: (wall|cpu)$/) {
                  print "  second line is not the configuration: " $0; bad = 1 } next }
      NR == 3 { if ($0 !~ /^# name +median_s +p10_s +p90_s +ratio +bytes\/step +peak_ledger_B$/) { print "  no column names: " $0; bad = 1 } next }
      /^# reproduce: / { last = NR; repro = $0; next }
      /^#/ || /^RESULT / || /^RATIO / || /^NOTE/ || /^\{/ { next }
      { n = NF; if (n < 7) next
        num = "^[0-9]+(\\.[0-9]+)?(e[-+]?[0-9]+)?$"
        if ($(n-5) ~ num && $(n-4) ~ num && $(n-3) ~ num && ($(n-2) == "base" || $(n-2) == "n/a" || $(n-2) ~ num) &&
            ($(n-1) == "n/a" || $(n-1) ~ /^[0-9]+$/) && ($n == "n/a" || $n ~ /^[0-9]+$/)) rows++ }
      END { if (!rows) { print "  no row with the seven columns"; bad = 1 }
            if (last != NR || repro !~ / -w 0 -n 1( |$)/) { print "  does not end with the reproduce line (-w 0 -n 1)"; bad = 1 }
            exit bad }' "$tmp/run.out" || { f=1; sed 's/^/    | /' "$tmp/run.out" | head -n 12; }
  fi
  rm -rf "$tmp"
  return $f
}

# every benchmark source has a built program and a line in ARGS
n=0
for src in "$ROOT"/*/bench/bench_*.c "$ROOT"/*/bench/bench_*.cu; do
  [ -f "$src" ] || continue
  mod=$(basename "$(dirname "$(dirname "$src")")"); base=$(basename "$src"); base=${base%.*}
  name=${mod}_$base
  n=$((n+1))
  if [ -z "${ARGS[$name]+set}" ]; then bad "$name: not in this test's table (add its smallest size)"; continue; fi
  if [ ! -x "$B/$name" ]; then bad "$name: not built ($B/$name)"; continue; fi
  # shellcheck disable=SC2086 # the arguments are words
  check "$name is on the harness" harness_ok "$name" "$B/$name" ${ARGS[$name]}
done
check "found the benchmark sources (13 or more)" test "$n" -ge 13

# negative controls: programs not on the harness fail the same checks
mkdir -p ctl
cat >ctl/bench_own_format <<'EOF'
#!/usr/bin/env bash
# its own flags and its own table
case ${1:-} in
  -h) echo "usage: bench_own_format [--reps N]"; exit 0 ;;
  -w|"") echo "stage  N  s/step  ratio"; echo "replicated 1 0.0123 1.000"; echo "reproduce: bench_own_format"; exit 0 ;;
  *) echo "unknown option $1" >&2; exit 1 ;;
esac
EOF
cat >ctl/bench_header_only <<'EOF'
#!/usr/bin/env bash
# the harness's usage and header, but no rows and no reproduce line
case ${1:-} in
  -h) printf 'usage: bench_header_only [-w WARMUP] [-n ITERS] [-t THREADS]\ncolumns: docs/benchmarks.md\n'; exit 0 ;;
  -w) echo "# dpcert-bench bench_header_only: nothing"
      echo "# git: x  backend: host  dtype: f64  ranks: 1  threads: 1  warmup: 0  iters: 1  clock: wall"
      echo "# name  median_s  p10_s  p90_s  ratio  bytes/step  peak_ledger_B"; exit 0 ;;
  *) echo "unknown flag '$1'" >&2; exit 2 ;;
esac
EOF
chmod +x ctl/*
harness_ok ctl_bench_own_format "$PWD/ctl/bench_own_format" >ctl.out 2>&1; rc=$?
check "negative control: a program with its own format fails" test $rc != 0
check "... on -h, the refusal and the header" bash -c "grep -q 'usage' ctl.out && grep -q 'exits 1, not 2' ctl.out && grep -q 'first line is not the header' ctl.out"
harness_ok ctl_bench_header_only "$PWD/ctl/bench_header_only" >ctl2.out 2>&1; rc=$?
check "negative control: the header without rows or the reproduce line fails" test $rc != 0
check "... on the rows and the reproduce line" bash -c "grep -q 'no row' ctl2.out && grep -q 'reproduce line' ctl2.out"
echo "$checks checks, $fails failed"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

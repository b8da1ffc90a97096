# common/tests/fault_lib.bash — the representative runs of the fault-injection tests (sourced by
# common/tests/fault_alloc.sh, fault_alloc_all_slow.sh and fault_io.sh; not a test itself:
# ci/run-tests.sh runs *.sh under tests/ only by their own names, and this one is .bash).
# Issue 29 (SQLite's discipline): a failed allocation or I/O operation anywhere in a run ends
# it with exit 3 and a message, no crash, no sanitizer report (ASan/UBSan/LSan in the
# sanitizer pass: a leak makes LSan exit 23), and no partial output file: every file left in
# the output directory is byte-identical to the same file of the undisturbed run (atomic
# writes: the old file or none, never half), and no temporary file is left.
#
# Scenarios (one command each, the same words in every run; OUT is the output directory):
#   reference      reference dpsgd, mlp, one step, --export OUT
#   train2         mpirun -n 2 train dpsgd (the engine at 2 ranks), --export OUT (skipped without mpirun)
#   refdpzo        reference dpzo, mlp, two steps, --export OUT
#   traindpzo      train dpzo (the engine, one rank), two steps, --export OUT
#   plan           plan --search over 4 devices on the builtin h100 (no output file)
#   train1         train dpsgd at one rank, --export OUT (not in the default set: `make
#                  coverage`'s sweep, ci/coverage.sh, runs every N of it, faster than train2's mpirun)
#   compare        compare of a reference and an engine export (made once, undisturbed)
#   certify        certify of one vector (step-mlp-batch1, 2 repeats; the candidate copies its
#                  input: verdict INCOMPLETE, exit 1), --report OUT
#   account        account --accountant all (RDP, PLD, pure n/a, GDP)
#   audit          audit-accounting of a two-claim CSV file
# FAULT_ONLY="certify account" restricts the scenarios (a debugging aid).
. "${DPCERT_ROOT:?run through ci/run-tests.sh}/common/tests/check_lib.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
M="--model mlp --in 4 --hidden 8 --classes 3 --dataset-size 8 --q 0.5 --steps 1 --seed 1 --noise-key 2"
FAULT_SCENARIOS=${FAULT_ONLY:-"reference train2 refdpzo traindpzo compare certify account audit plan"}
WORK=$PWD

# fault_cmd NAME: sets CMD (an array) and HAS_OUT (1: the command writes OUT) for scenario NAME
fault_cmd() {
  HAS_OUT=0
  case $1 in
    reference) CMD=("$D" reference dpsgd $M --export out); HAS_OUT=1 ;;
    # mpirun's pid in DIR/mpirun.pid, so that its own crash or hang is told from a rank's
    train2) CMD=(sh -c 'echo $$ > mpirun.pid; exec "$@"' sh mpirun -n 2 "$D" train dpsgd $M --export out); HAS_OUT=1 ;;
    train1) CMD=("$D" train dpsgd $M --export out); HAS_OUT=1 ;;
    refdpzo) CMD=("$D" reference dpzo ${M/--steps 1/--steps 2} --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3 --export out); HAS_OUT=1 ;;
    traindpzo) CMD=("$D" train dpzo ${M/--steps 1/--steps 2} --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3 --export out); HAS_OUT=1 ;;
    plan) CMD=("$D" plan --device h100 --search --devices 4) ;;
    compare) CMD=("$D" compare "$WORK/cmp-ref" "$WORK/cmp-cand") ;;
    certify) CMD=("$D" certify --candidate "sh -c 'cp \"\$1\" \"\$2\"' x" --suite ci --filter '^step-mlp-batch1$'
                  --repeats 2 --report out); HAS_OUT=1 ;;
    account) CMD=("$D" account --sigma 1 --q 0.01 --steps 10 --delta 1e-5 --accountant all) ;;
    audit) CMD=("$D" audit-accounting "$WORK/claims.csv") ;;
    *) echo "fault_cmd: unknown scenario $1" >&2; return 2 ;;
  esac
}

# fault_available NAME: 0 when the scenario can run here
fault_available() {
  [ "$1" != train2 ] || command -v mpirun >/dev/null 2>&1
}

# Inputs shared by the scenarios (undisturbed).
fault_prepare() {
  printf 'mechanism,q,sigma,steps,delta,epsilon\ngaussian,0.01,1,10,1e-5,5\npure,0.5,1,10,1e-5,20\n' > "$WORK/claims.csv"
  "$D" reference dpsgd $M --export "$WORK/cmp-ref" >/dev/null 2>&1 &&
    "$D" train dpsgd $M --export "$WORK/cmp-cand" >/dev/null 2>&1
}

# fault_run NAME DIR ENV...: run the scenario in DIR (made fresh) with the environment
# assignments ENV; sets RC, and DIR/err.txt, DIR/out.txt. Open MPI's own allocations leak at
# exit by design: LeakSanitizer is off for the ranks (as in optimized/tests/mpi_lib.bash).
fault_run() {
  local name=$1 dir=$2; shift 2
  rm -rf "$dir"; mkdir -p "$dir"
  fault_cmd "$name"
  local asan=${ASAN_OPTIONS:-}
  [ "$name" = train2 ] && asan="${asan:+$asan:}detect_leaks=0"
  (cd "$dir" && env ASAN_OPTIONS="$asan" "$@" timeout 300 "${CMD[@]}" >out.txt 2>err.txt); RC=$?
}

# fault_baseline NAME: the undisturbed run in $WORK/base-NAME; sets K (allocations: the largest
# count of any process) and RC0 (its exit code)
fault_baseline() {
  fault_run "$1" "$WORK/base-$1" DPCERT_ALLOC_COUNT=1
  RC0=$RC
  # the whole files a failed certify may leave before its filter removes them: every ci vector
  [ "$1" = certify ] && "$D" vectors --suite ci --out "$WORK/base-$1/extra/vectors" >/dev/null 2>&1
  K=$(sed -n 's/^dpcert: \([0-9]*\) allocations$/\1/p' "$WORK/base-$1/err.txt" | sort -n | tail -1)
  [ -n "$K" ] || K=0
}

# mpirun_teardown_crash FILE: 0 when FILE shows a rank ending with MPI_Abort(3) and the launcher
# itself (frames of mpirun, e.g. PMIx_server_finalize) crashing while it tears the job down: a
# known Open MPI 4.1 / PMIx defect (open-mpi/ompi#13650, #6222), seen about 2 times in 400 runs
# of train2 on this machine; the ranks ended as a fault must, so the launcher's crash is not
# dpcert's. A crash block without an mpirun frame (a rank's crash) is never excused.
mpirun_teardown_crash() {
  grep -q 'MPI_ABORT was invoked on rank [0-9]* in communicator MPI_COMM_WORLD' "$1" &&
    grep -q '^with errorcode 3\.' "$1" && grep -q '\*\*\* Process received signal \*\*\*' "$1" &&
    awk '/\*\*\* Process received signal \*\*\*/ { b = 1; m = 0; next }
         b && /\] mpirun\(/ { m = 1 }
         b && /\*\*\* End of error message \*\*\*/ { b = 0; if (!m) bad = 1 }
         END { exit (bad || b) }' "$1"
}

# fault_launcher_failed DIR: 0 when the train2 run in DIR ended with the launcher itself failing:
# mpirun hung until the timeout (exit 124) or a crash report names mpirun's own pid
# (DIR/mpirun.pid; Open MPI prints "[host:PID] Signal: ..."). The injected failure is
# deterministic, so such a run is made again (fault_alloc_loop) rather than judged: a rank that
# hangs or crashes does so again, and the rerun is judged like any run.
fault_launcher_failed() {
  local pid
  [ "$RC" = 124 ] && return 0
  pid=$(cat "$1/mpirun.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && grep -Eq "^\[[^]]*:0*$pid\] Signal: " "$1/err.txt"
}

# fault_judge NAME DIR PATTERN: "" when the run in DIR ended as a fault must (exit 3, stderr
# matching PATTERN, no sanitizer report or crash, no temporary file, every output file equal to
# the baseline's), else the reason
fault_judge() {
  local name=$1 dir=$2 pat=$3 rc=$RC err=$2/err.txt
  if [ "$name" = train2 ] && [ "$rc" != 3 ] && mpirun_teardown_crash "$err"; then
    echo "note: $dir: mpirun crashed in its teardown after MPI_Abort(3) (Open MPI defect); judged by the ranks" >&2
    sed '/\*\*\* Process received signal \*\*\*/,/\*\*\* End of error message \*\*\*/d' "$err" > "$dir/err-ranks.txt"
    err=$dir/err-ranks.txt rc=3
  fi
  # the launcher hanging in its teardown after a rank's MPI_Abort(3) (the same Open MPI defect: Open
  # MPI kills every rank on MPI_Abort, so what the timeout ends is mpirun itself): judged by the ranks
  if [ "$name" = train2 ] && [ "$rc" = 124 ] && grep -q 'MPI_ABORT was invoked on rank [0-9]* in communicator MPI_COMM_WORLD' "$err" &&
    grep -q '^with errorcode 3\.' "$err"; then
    echo "note: $dir: mpirun hung in its teardown after MPI_Abort(3) (Open MPI defect); judged by the ranks" >&2
    rc=3
  fi
  if grep -Eq 'AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|Segmentation fault|core dumped' "$err"; then
    echo "sanitizer report or crash: $(grep -Em1 'Sanitizer|runtime error|Segmentation|core' "$err" | cut -c1-200)"; return
  fi
  if [ "$rc" != 3 ]; then echo "exit $rc (want 3): $(head -c 300 "$err" | tr '\n' ' ')"; return; fi
  if ! grep -Eq -- "$pat" "$err"; then echo "exit 3 without a message matching /$pat/: $(head -c 300 "$err" | tr '\n' ' ')"; return; fi
  if [ -d "$dir/out" ]; then
    local f
    while IFS= read -r f; do
      case $f in *.tmp.*) echo "temporary file left: $f"; return ;; esac
      # a file the undisturbed run also leaves must be the same; one it removes later (certify keeps
      # only the vectors its --filter selects) must be the whole file it wrote (base-NAME/extra)
      local want="$WORK/base-$name/out/$f"
      [ -e "$want" ] || want="$WORK/base-$name/extra/$f"
      if ! cmp -s "$dir/out/$f" "$want"; then echo "partial or different output file: out/$f"; return; fi
    done < <(cd "$dir/out" && find . -type f | sed 's|^\./||')
  fi
  echo ""
}

# fault_samples K COUNT [SUFFIX]: appends to the array SPECS COUNT distinct allocation numbers in
# [1, K] (each followed by SUFFIX), always with 1 and K, drawn with bash's RANDOM (seeded by the
# caller: RANDOM=$seed). No subshell: bash reseeds RANDOM in one, and the printed seed would not
# reproduce the draws.
fault_samples() {
  local k=$1 c=$2 suf=${3:-} i n; declare -A seen=()
  SPECS+=("1$suf"); seen[1]=1
  [ "$k" -gt 1 ] && { SPECS+=("$k$suf"); seen[$k]=1; }
  for ((i = 0; i < c * 4 && ${#seen[@]} < c && ${#seen[@]} < k; i++)); do
    n=$(( (RANDOM * 32768 + RANDOM) % k + 1 ))
    [ -n "${seen[$n]:-}" ] && continue
    seen[$n]=1; SPECS+=("$n$suf")
  done
}

# fault_every K NAME: appends to SPECS every N in [1, K] (one-shot), and the sticky N+ every
# FAULT_STICKY_STRIDE-th (default 7); certify, about 21,000 allocations at 0.5 s a run, every
# FAULT_CERTIFY_STRIDE-th N (default 41, about 520 runs) and its last
fault_every() {
  local k=$1 stride=1 n sstride
  [ "$2" = certify ] && stride=${FAULT_CERTIFY_STRIDE:-41}
  sstride=$((stride * ${FAULT_STICKY_STRIDE:-7}))
  for ((n = 1; n <= k; n++)); do
    (( (n - 1) % stride == 0 || n == k )) && SPECS+=("$n")
    (( (n - 1) % sstride == 0 )) && SPECS+=("$n+")
  done
  return 0
}

# fault_alloc_loop SPECS_FN: the allocation-failure loop. For every scenario that can run here:
# the undisturbed run (K allocations, exit RC0), the control DPCERT_FAIL_ALLOC=K+1 (fails nothing:
# exit RC0), then DPCERT_FAIL_ALLOC=SPEC for every SPEC that SPECS_FN K NAME puts in the array
# SPECS, each judged by fault_judge.
fault_alloc_loop() {
  local specs_fn=$1 s spec why n_bad retry t0=$SECONDS
  fault_prepare || { bad "preparing the compare inputs"; return; }
  for s in $FAULT_SCENARIOS; do
    fault_available "$s" || { echo "skip $s (mpirun not found)"; continue; }
    fault_baseline "$s"
    check "$s: undisturbed run counts its allocations (K=$K, exit $RC0)" [ "$K" -gt 0 ]
    fault_run "$s" "$WORK/run" DPCERT_FAIL_ALLOC=$((K + 1))
    check "$s: control N = K + 1 fails nothing (exit $RC, want $RC0)" [ "$RC" = "$RC0" ]
    SPECS=()
    "$specs_fn" "$K" "$s"
    [ "${#SPECS[@]}" -le 64 ] && echo "  $s: N = ${SPECS[*]}"
    n_bad=0
    for spec in "${SPECS[@]}"; do
      fault_run "$s" "$WORK/run" DPCERT_FAIL_ALLOC="$spec"
      for retry in 1 2; do
        [ "$s" = train2 ] && fault_launcher_failed "$WORK/run" || break
        echo "  note: $s: DPCERT_FAIL_ALLOC=$spec: mpirun itself crashed or hung (exit $RC; Open MPI defect): run again ($retry)"
        fault_run "$s" "$WORK/run" DPCERT_FAIL_ALLOC="$spec"
      done
      why=$(fault_judge "$s" "$WORK/run" 'out of memory')
      if [ -n "$why" ]; then bad "$s: DPCERT_FAIL_ALLOC=$spec: $why"; n_bad=$((n_bad + 1)); fi
    done
    [ "$n_bad" = 0 ] && ok "$s: ${#SPECS[@]} injected allocation failures (K=$K), each exit 3 with a message and no partial file"
    echo "  $s: $((SECONDS - t0)) s so far"
  done
}

# the judge's own controls: it must reject a run that succeeds, one that crashes, one without
# the message, and a half-written output file
fault_judge_selftest() {
  mkdir -p "$WORK/base-selftest/out" "$WORK/st/out"
  printf 'whole file\n' > "$WORK/base-selftest/out/f"
  RC=3; echo "dpcert x: out of memory" > "$WORK/st/err.txt"; printf 'whole file\n' > "$WORK/st/out/f"
  check "fault judge: accepts exit 3 with the message and a whole file" [ -z "$(fault_judge selftest "$WORK/st" 'out of memory')" ]
  RC=0
  check "fault judge: rejects exit 0" [ -n "$(fault_judge selftest "$WORK/st" 'out of memory')" ]
  RC=3; printf 'whole' > "$WORK/st/out/f"
  check "fault judge: rejects a half file" [ -n "$(fault_judge selftest "$WORK/st" 'out of memory')" ]
  printf 'whole file\n' > "$WORK/st/out/f"; : > "$WORK/st/out/.f.tmp.abc"
  check "fault judge: rejects a temporary file" [ -n "$(fault_judge selftest "$WORK/st" 'out of memory')" ]
  rm -f "$WORK/st/out/.f.tmp.abc"; echo "dpcert x: failed" > "$WORK/st/err.txt"
  check "fault judge: rejects exit 3 without the message" [ -n "$(fault_judge selftest "$WORK/st" 'out of memory')" ]
  echo "==1==ERROR: LeakSanitizer: detected memory leaks" >> "$WORK/st/err.txt"
  check "fault judge: rejects a sanitizer report" [ -n "$(fault_judge selftest "$WORK/st" 'failed')" ]
  # the launcher's own crash in its teardown after MPI_Abort(3) is excused; a rank's crash is not
  rm -rf "$WORK/st/out"
  { echo "dpcert train: out of memory allocating 8 bytes"
    printf -- '-----\nMPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 3.\n'
    printf '[vm:9] *** Process received signal ***\n[vm:9] Signal: Segmentation fault (11)\n'
    printf '[vm:9] [ 1] /lib/libpmix.so.2(PMIx_server_finalize+0xb08)[0x7f]\n[vm:9] [ 6] mpirun(+0x13ea)[0x55]\n'
    printf '[vm:9] *** End of error message ***\n'; } > "$WORK/st/err.txt"
  RC=139
  check "fault judge: excuses mpirun's teardown crash after MPI_Abort(3)" [ -z "$(fault_judge train2 "$WORK/st" 'out of memory' 2>/dev/null)" ]
  sed -i 's/mpirun(+0x13ea)/dpcert(dp_tset_add+0x13b)/' "$WORK/st/err.txt"
  check "fault judge: rejects a rank's crash" [ -n "$(fault_judge train2 "$WORK/st" 'out of memory' 2>/dev/null)" ]
  # the launcher's own failure (its pid in the crash report, or a hang) is run again, a rank's is not
  echo 9 > "$WORK/st/mpirun.pid"; RC=139
  check "fault launcher: mpirun's own crash (its pid) is recognised" fault_launcher_failed "$WORK/st"
  echo 10 > "$WORK/st/mpirun.pid"
  fault_launcher_failed "$WORK/st"; local lf=$?
  check "fault launcher: a rank's crash (another pid) is not" [ "$lf" = 1 ]
  RC=124
  check "fault launcher: a hang is recognised" fault_launcher_failed "$WORK/st"
  rm -f "$WORK/st/mpirun.pid"
  RC=3
}

#!/usr/bin/env bash
# optimized/tests/mpi_collective_timeout.sh — a rank that stalls or dies must end the
# others within a bounded time, never hang (docs/engine.md "Collective timeout"):
#   - stall: rank 1 of a 2-rank `dpcert train dpsgd --collective-timeout 3` run is stopped
#     (SIGSTOP) mid-run; rank 0 must fail naming the collective that timed out and the
#     whole job must end non-zero within the bound (timeout + start-up slack);
#   - death: rank 1 is killed (SIGKILL) mid-run; the job must end non-zero within the bound;
#   - cp-stall: the same stall in a `--cp 2 --cp-attention ring` llama run;
#   - control: the same run without interference finishes with exit 0 (so the test can
#     tell a timeout from a run that fails anyway).
# CTMO_BACKEND (default host) selects the backend (cuda_emu_collective_timeout.sh: cuda-emu,
# which has no context parallelism: the cp-stall case is then left out).
# Bound: 3 s timeout + 30 s slack (MPI start-up, abort propagation on 2 shared cores).
set -u
DRV="${DPCERT_BUILD:?}/tests/optimized_test_train_cli"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if [ -n "${DPCERT:-}" ] && "$DPCERT" train --help >/dev/null 2>&1; then TRAIN=("$DPCERT" train)
elif [ -x "$DRV" ]; then TRAIN=("$DRV" --as-dpcert train)
else echo "SKIP: no dpcert train"; exit 77; fi
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
TMO=3
BOUND=33
BACKEND=${CTMO_BACKEND:-host}
ARGS=(dpsgd --backend "$BACKEND" --model mlp --in 6 --hidden 7,5 --classes 4 --dataset-size 40 --q 0.3 --clip 0.3
      --sigma 0.8 --seed 4 --noise-key 9 --collective-timeout "$TMO")

# pid of world rank $2 among this test's processes (environment CTMO_MARKER=$1), from /proc
rank_pid() {
  local marker=$1 rank=$2 d p env
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$$" ] && continue
    env=$(tr '\0' '\n' 2>/dev/null <"$d/environ") || continue
    grep -qx "CTMO_MARKER=$marker" <<<"$env" || continue
    grep -qx "OMPI_COMM_WORLD_RANK=$rank" <<<"$env" || continue
    echo "$p"; return 0
  done
  return 1
}

# run_disturbed NAME SIGNAL: 2 ranks, many steps; once rank 0 has printed a step, send
# SIGNAL to rank 1; the job must end non-zero within BOUND seconds
run_disturbed() {
  local name=$1 sig=$2 marker="ctmo-$1-$$"
  local log="$name.log"
  ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" \
    CTMO_MARKER=$marker timeout 120 mpirun -x ASAN_OPTIONS -x CTMO_MARKER -n 2 "${TRAIN[@]}" "${ARGS[@]}" --steps 1000000 >"$log" 2>&1 &
  local job=$! t=0 pid=""
  while [ $t -lt 600 ]; do # up to 60 s for the first step line
    if grep -q "step" "$log" 2>/dev/null; then pid=$(rank_pid "$marker" 1) && break; fi
    sleep 0.1; t=$((t + 1))
  done
  if [ -z "$pid" ]; then bad "$name: rank 1 not found running"; kill "$job" 2>/dev/null; wait "$job"; cat "$log" | tail -5; return; fi
  local t0=$(date +%s.%N)
  kill "-$sig" "$pid"
  wait "$job"; local rc=$?
  local dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  [ "$sig" = STOP ] && kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
  if [ "$rc" -eq 0 ]; then bad "$name: the job exited 0"; tail -5 "$log"; return; fi
  if [ "$rc" -eq 124 ]; then bad "$name: the job hung (killed by the 120 s guard)"; tail -5 "$log"; return; fi
  if awk -v d="$dt" -v b="$BOUND" 'BEGIN { exit !(d > b) }'; then bad "$name: the job took ${dt}s to end (bound ${BOUND}s)"; return; fi
  pass "$name: the job ended with exit $rc after ${dt}s (bound ${BOUND}s)"
  [ "$sig" = STOP ] && { if grep -q "collective '.*' timed out" "$log"; then pass "$name: rank 0 named the collective: $(grep -o "collective '[a-z_]*' timed out[^:]*" "$log" | head -1)"; else bad "$name: no timeout message"; tail -5 "$log"; fi; }
}

# control: no interference, exit 0
# (ASan builds: no leak checking in the ranks, whose Open MPI components leak by design,
# as in run_disturbed and mpi_dpsgd.sh)
if ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" \
    timeout 120 mpirun -x ASAN_OPTIONS -n 2 "${TRAIN[@]}" "${ARGS[@]}" --steps 3 >control.log 2>&1; then pass "control: undisturbed 2-rank run exits 0"
else bad "control: undisturbed run failed"; tail -5 control.log; fi
run_disturbed stall STOP
run_disturbed death KILL
# context parallelism (docs/longshield.md): a CP rank stalled inside ring attention's
# send/recv or the CP collectives ends the run the same way
if [ "$BACKEND" = host ]; then
ARGS=(dpsgd --model llama --vocab 11 --dim 8 --layers 1 --heads 2 --ffn 12 --seq 6 --dataset-size 16 --q 0.3 --clip 1
      --sigma 1 --seed 4 --noise-key 9 --cp 2 --cp-attention ring --collective-timeout "$TMO")
run_disturbed cp-stall STOP
fi
[ $fail = 0 ] && echo "all collective-timeout checks passed"
exit $fail

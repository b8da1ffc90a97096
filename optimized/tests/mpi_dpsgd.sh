#!/usr/bin/env bash
# optimized/tests/mpi_dpsgd.sh — data-parallel DP-SGD and DP-ZO on 1, 2 and 4 MPI ranks
# against the exact reference (docs/engine.md "Data-parallel"):
#   - every strategy, flat / per-layer / group clipping, micro-batches, empty batches,
#     mlp and llama: exports agree with `reference` tensor by tensor (noise exactly);
#   - --noise-mode shares: signal agrees, noise differs from the reference element by
#     element and has the right variance (chi-square, false reject < 1e-8 per file);
#   - negative controls: --inject-bug noise-every-rank and clip-after-sum must FAIL the
#     same comparison, and noise-every-rank must fail the variance check.
# Uses `dpcert train` / `dpcert reference` when the binary links them, else the test
# driver build/tests/optimized_test_train_cli --as-dpcert (same code, same library).
set -u
DRV="${DPCERT_BUILD:?}/tests/optimized_test_train_cli"
[ -x "$DRV" ] || { echo "SKIP: $DRV not built"; exit 77; }
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if "$DPCERT" train --help >/dev/null 2>&1; then TRAIN=("$DPCERT" train); else TRAIN=("$DRV" --as-dpcert train); fi
if "$DPCERT" reference dpsgd --help >/dev/null 2>&1; then REF=("$DPCERT" reference); else REF=("$DRV" --as-dpcert reference); fi
echo "train: ${TRAIN[*]}"; echo "reference: ${REF[*]}"
SEED=${DPCERT_TEST_SEED:-4}
echo "seed: $SEED (set DPCERT_TEST_SEED to replay another)"
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }

ref() { # dir alg args...
  local dir=$1; shift; local alg=$1; shift
  "${REF[@]}" "$alg" "$@" --seed "$SEED" --noise-key 9 --export "$dir" >"$dir.log" 2>&1 || { bad "reference $alg $*"; cat "$dir.log"; }
}
# Under the sanitizer build, LeakSanitizer is off inside mpirun'd processes only: Open MPI's
# dlopen'd components leak at exit from "<unknown module>" frames that no suppression can
# name. Leaks of our own code are checked by the in-process tests (test_dpsgd_strategies,
# test_train_cli), which run the same engine code with leak detection on.
opt() { # ranks dir alg args...
  local r=$1 dir=$2 alg=$3; shift 3
  ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" \
    timeout 120 mpirun -x ASAN_OPTIONS ${DPCERT_TEST_INJECT:+-x DPCERT_TEST_INJECT} -n "$r" "${TRAIN[@]}" "$alg" "$@" --seed "$SEED" --noise-key 9 --export "$dir" >"$dir.log" 2>&1
}
same() { # desc dir refdir steps [--skip P]...
  local desc=$1 d=$2 r=$3 n=$4; shift 4
  for s in $(seq 1 "$n"); do
    f=$(printf 'step-%06d.safetensors' "$s")
    if ! "$DRV" --compare "$d/$f" "$r/$f" "$@" >"$d.cmp$s" 2>&1; then bad "$desc step $s"; cat "$d.cmp$s"; return; fi
  done
  pass "$desc ($(tail -n1 "$d.cmp$n" | sed 's/.*(//; s/)//'))"
}
run_same() { # desc ranks refdir steps alg args...
  local desc=$1 r=$2 rd=$3 n=$4; shift 4
  local d="o$((++NRUN))"
  if opt "$r" "$d" "$@"; then same "$desc" "$d" "$rd" "$n"; else bad "$desc: exit $?"; cat "$d.log"; fi
}
NRUN=0

# ---- the collectives themselves on 3 and 4 ranks (test_collectives under mpirun) ----
COLL="$DPCERT_BUILD/tests/optimized_test_collectives"
for r in 3 4; do
  if [ -x "$COLL" ] && ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" \
       timeout 120 mpirun -x ASAN_OPTIONS -n $r "$COLL" >coll$r.log 2>&1; then pass "collectives on $r ranks"
  else bad "collectives on $r ranks"; tail -20 coll$r.log; fi
done

MLPB="--model mlp --in 6 --hidden 7,5 --classes 4 --dataset-size 40 --steps 2 --clip 0.3 --sigma 0.8"
MLP="$MLPB --q 0.3"
# the noise checks use the default mlp (1994 parameters -> M = 1994 noise elements per file)
BIG="--model mlp --dataset-size 40 --q 0.3 --steps 2 --clip 0.3 --sigma 0.8"
LLAMA="--model llama --vocab 13 --dim 8 --layers 2 --heads 2 --ffn 10 --seq 5 --dataset-size 24 --q 0.3 --steps 2 --clip 0.05 --sigma 0.8"

# ---- mlp, flat clipping, every strategy on 2 ranks, some on 1 and 4 ----
ref rm dpsgd $MLP
for st in grad-sample ghost mixed-ghost book-keeping fused; do run_same "mlp flat $st R=2" 2 rm 2 dpsgd $MLP --strategy $st; done
run_same "mlp flat book-keeping R=1 (mpirun)" 1 rm 2 dpsgd $MLP --strategy book-keeping
run_same "mlp flat grad-sample R=4" 4 rm 2 dpsgd $MLP --strategy grad-sample
run_same "mlp flat fused R=4 threads 2" 4 rm 2 dpsgd $MLP --strategy fused --threads 2
# micro-batches (same bits as k = 1 in the reference)
ref rmk dpsgd $MLP --micro-batches 3
run_same "mlp flat mixed-ghost R=2 micro-batches 3" 2 rmk 2 dpsgd $MLP --strategy mixed-ghost --micro-batches 3
# automatic clipping, adamw
ref ra dpsgd $MLP --clip-fn automatic --optimizer adamw
run_same "mlp automatic adamw ghost R=4" 4 ra 2 dpsgd $MLP --clip-fn automatic --optimizer adamw --strategy ghost

# ---- llama: per-layer and group clipping ----
ref rl dpsgd $LLAMA --clipping per-layer
run_same "llama per-layer ghost R=2" 2 rl 2 dpsgd $LLAMA --clipping per-layer --strategy ghost
run_same "llama per-layer fused R=4" 4 rl 2 dpsgd $LLAMA --clipping per-layer --strategy fused
G='emb=tok_emb|lm_head:0.05;attn=*.w[qkvo]:0.03;rest=*:0.04'
ref rg dpsgd $LLAMA --clipping group --groups "$G"
run_same "llama group book-keeping R=2" 2 rg 2 dpsgd $LLAMA --clipping group --groups "$G" --strategy book-keeping
run_same "llama group grad-sample R=4 micro 2" 4 rg 2 dpsgd $LLAMA --clipping group --groups "$G" --strategy grad-sample --micro-batches 2

# ---- empty Poisson batches on every rank: noise only ----
ref re dpsgd $MLPB --q 1e-9
run_same "empty batches R=2" 2 re 2 dpsgd $MLPB --q 1e-9 --strategy ghost
run_same "empty batches R=4" 4 re 2 dpsgd $MLPB --q 1e-9 --strategy fused
# batches smaller than the rank count (some ranks hold no example)
ref rs dpsgd $MLPB --q 0.06
run_same "tiny batches R=4" 4 rs 2 dpsgd $MLPB --q 0.06 --strategy book-keeping

# ---- noise modes (default mlp: M = 1994 noise elements per step; the chi-square test
# |X - M| <= 6 sqrt(2M) has false-reject probability < 1e-8 at this M) ----
ref rb dpsgd $BIG
SCALE=$(awk 'BEGIN{print 0.8*0.3}')
d="o$((++NRUN))"
if opt 4 "$d" dpsgd $BIG --strategy ghost --noise-mode shares; then
  # step 1 only: after it the parameters legitimately differ (different noise)
  same "shares R=4: signal agrees" "$d" rb 1 --skip step.noise --skip step.private_grad --skip params_after
  if "$DRV" --compare "$d/step-000001.safetensors" rb/step-000001.safetensors >/dev/null 2>&1; then
    bad "shares R=4: noise equals the reference's (shares must come from other lanes)"
  else pass "shares R=4: noise differs from the single-rank draw"; fi
  for s in 1 2; do
    f=$(printf 'step-%06d.safetensors' $s)
    if "$DRV" --noise-stat "$d/$f" "$SCALE"; then pass "shares R=4 step $s: noise variance sigma^2 C^2"; else bad "shares R=4 step $s: noise variance"; fi
  done
else bad "shares R=4 run"; cat "$d.log"; fi
run_same "single mode R=2 (noise exact)" 2 rb 2 dpsgd $BIG --strategy fused
if "$DRV" --noise-stat rb/step-000001.safetensors "$SCALE"; then pass "single-mode noise variance"; else bad "single-mode noise variance"; fi

# ---- negative controls: injected bugs must be caught ----
d="o$((++NRUN))"
if DPCERT_TEST_INJECT=1 opt 2 "$d" dpsgd $BIG --inject-bug noise-every-rank; then
  if "$DRV" --compare "$d/step-000001.safetensors" rb/step-000001.safetensors >"$d.cmp" 2>&1; then
    bad "noise-every-rank R=2 not caught"
  else pass "noise-every-rank R=2 caught: $(grep -m1 FAIL "$d.cmp")"; fi
  if "$DRV" --noise-stat "$d/step-000001.safetensors" "$SCALE" >/dev/null; then bad "noise-every-rank passes the variance check"
  else pass "noise-every-rank fails the variance check (negative control)"; fi
else bad "noise-every-rank run"; fi
d="o$((++NRUN))"
if DPCERT_TEST_INJECT=1 opt 2 "$d" dpsgd $MLP --inject-bug clip-after-sum; then
  if "$DRV" --compare "$d/step-000001.safetensors" rm/step-000001.safetensors >"$d.cmp" 2>&1; then bad "clip-after-sum R=2 not caught"
  else pass "clip-after-sum R=2 caught: $(grep -m1 FAIL "$d.cmp")"; fi
else bad "clip-after-sum run"; fi

# ---- DP-ZO: one scalar all-reduce per step ----
ZO="--model mlp --in 5 --hidden 6 --classes 3 --dataset-size 30 --q 0.4 --steps 2 --clip 0.5 --sigma 0.7 --phi 0.01 --lr 0.05 --n-spsa 2"
ref rz dpzo $ZO
run_same "dpzo R=2" 2 rz 2 dpzo $ZO
run_same "dpzo R=4" 4 rz 2 dpzo $ZO
ZL="--model llama --vocab 11 --dim 8 --layers 1 --heads 2 --ffn 6 --seq 4 --dataset-size 20 --q 0.5 --steps 1 --clip 0.5 --sigma 0.5 --phi 0.01 --lr 0.05"
ref rzl dpzo $ZL --noise laplace
run_same "dpzo llama laplace R=2" 2 rzl 1 dpzo $ZL --noise laplace

[ "$fail" = 0 ] && echo "all MPI checks passed"
exit "$fail"

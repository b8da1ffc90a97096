#!/usr/bin/env bash
# optimized/tests/mem_precheck.sh — the memory pre-check (issue 15 class 4, docs/memory.md):
#   - a llama with 64 layers at dim 4096 (each dimension within its cap, the total far
#     beyond any host) is refused at once by reference dpsgd|dpzo and train dpsgd|dpzo:
#     exit 2 within 10 s printing the estimate and the limit, without growing (peak RSS
#     below 512 MiB) — before the fix it grew toward the OOM killer;
#   - --max-memory: a limit below a small run's estimate refuses it naming --max-memory;
#     a generous one lets it run (positive control: the check does not refuse everything);
#     malformed values exit 2 naming the option;
#   - the estimate is an upper estimate: for small runs of every command and strategy
#     (and --export with reference dpsgd, train dpsgd grad-sample and f32), the measured peak RSS growth over `dpcert version` stays
#     below the printed estimate (python3's getrusage of the child).
set -u
DRV="${DPCERT_BUILD:?}/tests/optimized_test_train_cli"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
if "$DPCERT" train --help >/dev/null 2>&1; then DP=("$DPCERT")
elif [ -x "$DRV" ]; then DP=("$DRV" --as-dpcert)
else echo "SKIP: no train command"; exit 77; fi
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }
# peak RSS (KiB) and exit code of a command: prints "RC KIB"; output in run.log
peak() {
  python3 - "$@" <<'PY'
import resource, subprocess, sys
with open('run.log', 'wb') as f:
    rc = subprocess.call(sys.argv[1:], stdout=f, stderr=subprocess.STDOUT)
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
# under a sanitizer (ASan shadow memory and quarantine) RSS says nothing about the
# estimate: the RSS bounds are then not checked (the plain build's run checks them)
SAN=0
if command -v ldd >/dev/null 2>&1 && ldd "${DP[0]}" | grep -q libasan; then SAN=1; echo "sanitizer build: RSS bounds not checked"; fi
read -r _ BASE < <(peak "${DP[@]}" version)
echo "baseline peak RSS of 'dpcert version': $BASE KiB"
Z="--steps 1 --clip 1 --sigma 1 --phi 0.01 --lr 0.01 --seed 1"
BIG="--model llama --layers 64 --dim 4096 --heads 32 --dataset-size 8 --q 0.5"
for c in "reference dpsgd" "reference dpzo" "train dpsgd" "train dpzo"; do
  extra=""; case $c in *dpzo) extra=$Z;; esac
  t0=$SECONDS
  # shellcheck disable=SC2086
  read -r rc kib < <(peak timeout 60 "${DP[@]}" $c $BIG $extra)
  dt=$((SECONDS - t0))
  if [ "$rc" = 2 ] && grep -q "needs an estimated .* GiB.*more than the limit" run.log && [ "$dt" -le 10 ] && { [ $SAN = 1 ] || [ "$kib" -lt 524288 ]; }; then
    pass "$c llama 64 x 4096 refused in ${dt} s, peak RSS $kib KiB: $(grep -o 'needs an estimated [^(]*' run.log)"
  else bad "$c llama 64 x 4096: exit $rc in ${dt} s, peak RSS $kib KiB"; cat run.log; fi
done
SMALL="--model mlp --in 8 --hidden 16 --classes 3 --dataset-size 32 --q 0.25 --steps 1"
for c in "reference dpsgd" "train dpsgd"; do
  # shellcheck disable=SC2086
  "${DP[@]}" $c $SMALL --max-memory 1M >run.log 2>&1; rc=$?
  if [ $rc = 2 ] && grep -q "limit of .*--max-memory" run.log; then pass "$c --max-memory 1M refused"; else bad "$c --max-memory 1M: exit $rc"; cat run.log; fi
  # shellcheck disable=SC2086
  if "${DP[@]}" $c $SMALL --max-memory 8G >run.log 2>&1; then pass "$c --max-memory 8G runs"; else bad "$c --max-memory 8G"; cat run.log; fi
  for v in 12X 0 -5 1.5G 99999999999T ""; do
    # shellcheck disable=SC2086
    "${DP[@]}" $c $SMALL --max-memory "$v" >run.log 2>&1; rc=$?
    if [ $rc = 2 ] && grep -q -- "--max-memory" run.log; then pass "$c --max-memory '$v' rejected"; else bad "$c --max-memory '$v': exit $rc"; cat run.log; fi
  done
done
[ $SAN = 1 ] && exit $fail
# upper estimate: the estimate printed with --max-memory 1 versus the measured growth
L="--model llama --vocab 128 --dim 64 --layers 2 --heads 4 --ffn 128 --seq 16 --dataset-size 128 --q 0.25 --noise-key 1"
M="--model mlp --in 128 --hidden 128,128 --dataset-size 1024 --q 0.25 --noise-key 1"
n=0
for c in "reference dpsgd $L" "reference dpsgd $M" "train dpsgd $L" "train dpsgd --strategy ghost $L" \
         "train dpsgd --strategy fused $L" "train dpsgd --strategy book-keeping $L" "train dpsgd --strategy mixed-ghost $L" \
         "train dpsgd --dtype f32 $M" "reference dpzo $L $Z" "train dpzo $L $Z"; do
  exports=("")
  case $c in "reference dpsgd"*|"train dpsgd $L"|*f32*) exports+=("--export ex$((++n))");; esac # the export terms
  for ex in "${exports[@]}"; do
    # shellcheck disable=SC2086
    est=$("${DP[@]}" $c $ex --max-memory 1 2>&1 | sed -n 's/.*needs an estimated .*(\([0-9]*\) bytes;.*/\1/p')
    # shellcheck disable=SC2086
    read -r rc kib < <(peak "${DP[@]}" $c $ex)
    grow=$(( (kib - BASE) * 1024 ))
    if [ -n "$est" ] && [ "$rc" = 0 ] && [ "$grow" -lt "$est" ]; then
      pass "upper estimate: $c $ex: growth $((grow >> 10)) KiB < estimate $((est >> 10)) KiB"
    else bad "upper estimate: $c $ex: exit $rc, growth $grow bytes, estimate '${est}'"; cat run.log; fi
  done
done
exit $fail

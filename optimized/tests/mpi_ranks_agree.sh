#!/usr/bin/env bash
# optimized/tests/mpi_ranks_agree.sh — MPI ranks that disagree (issue 15 class 1,
# docs/ranks.md): two ranks started with different options (mpirun MPMD "-n 1 A : -n 1 B")
# must both exit 2 within seconds, each naming the first differing option and both
# values ("rank 1 has --steps 3, rank 0 has --steps 2"); before the digest existed these
# runs hung, corrupted the heap, gave a raw MPI error or silently ran to exit 0.
# Positive controls: identical options (the same --data file under two paths, --threads
# that differ: legitimately per-rank) run to exit 0 — so the check cannot pass by
# refusing everything.
set -u
DRV="${DPCERT_BUILD:?}/tests/optimized_test_train_cli"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if "$DPCERT" train --help >/dev/null 2>&1; then TRAIN=("$DPCERT" train)
elif [ -x "$DRV" ]; then TRAIN=("$DRV" --as-dpcert train)
else echo "SKIP: no train command"; exit 77; fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" # Open MPI components (see mpi_dpsgd.sh)
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }

# two mlp datasets of 16 examples (in 4, classes 3) that differ in one label
python3 - <<'EOF'
import json, struct
def write(path, flip):
    n, d = 16, 4
    x = [((i * 7 + j * 3) % 11) / 11.0 - 0.5 for i in range(n) for j in range(d)]
    y = [i % 3 for i in range(n)]
    if flip: y[5] = (y[5] + 1) % 3
    xb = struct.pack('<%dd' % len(x), *x); yb = struct.pack('<%di' % n, *y)
    h = json.dumps({"x": {"dtype": "F64", "shape": [n, d], "data_offsets": [0, len(xb)]},
                    "y": {"dtype": "I32", "shape": [n], "data_offsets": [len(xb), len(xb) + len(yb)]}}).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(h)) + h + xb + yb)
write('d1.safetensors', 0); write('d2.safetensors', 1)
EOF
cp d1.safetensors d1copy.safetensors

# disagree DESC OPTION ALG "ARGS OF RANK 0" "ARGS OF RANK 1": both ranks exit 2 within
# 60 s (wall time printed) and each rank's message names OPTION
disagree() {
  local desc=$1 opt=$2 alg=$3 a=$4 b=$5
  local t0=$SECONDS
  # shellcheck disable=SC2086
  timeout 60 mpirun -x ASAN_OPTIONS -n 1 "${TRAIN[@]}" $alg $a : -n 1 "${TRAIN[@]}" $alg $b >out.log 2>&1
  local rc=$? dt=$((SECONDS - t0))
  if [ $rc -eq 124 ]; then bad "$desc: hung (timeout 60 s)"; return; fi
  if [ $rc -ne 2 ]; then bad "$desc: exit $rc, expected 2"; cat out.log; return; fi
  for r in 0 1; do
    if ! grep -q "rank $r of 2: the MPI ranks disagree.*rank 1 has $opt .*rank 0 has $opt " out.log; then
      bad "$desc: rank $r did not name $opt"; cat out.log; return
    fi
  done
  pass "$desc: exit 2 on both ranks in ${dt} s ($(grep -m1 -o "rank 1 has.*rank 0 has [^;]*" out.log))"
}
agree() { # DESC ALG "ARGS 0" "ARGS 1": runs to exit 0
  local desc=$1 alg=$2 a=$3 b=$4
  # shellcheck disable=SC2086
  if timeout 120 mpirun -x ASAN_OPTIONS -n 1 "${TRAIN[@]}" $alg $a : -n 1 "${TRAIN[@]}" $alg $b >ok.log 2>&1; then pass "$desc: exit 0"
  else bad "$desc: exit $?"; cat ok.log; fi
}

M="--model mlp --in 4 --hidden 5 --classes 3 --dataset-size 16 --q 0.5 --noise-key 3"
L="--model llama --dim 8 --layers 1 --heads 2 --ffn 8 --seq 4 --dataset-size 8 --q 0.5 --noise-key 3"
ZH="--clip 1 --sigma 1 --lr 0.05 --seed 7"
Z0="--model mlp --in 4 --hidden 5 --classes 3 --dataset-size 16 --q 0.5 --noise-key 3 --phi 0.01 $ZH"
Z="$Z0 --steps 1"
MD="--model mlp --in 4 --hidden 5 --classes 3 --q 0.5 --noise-key 3"

disagree "dpsgd --steps" --steps dpsgd "$M --steps 2" "$M --steps 3"
disagree "dpzo --steps" --steps dpzo "$Z0 --steps 2" "$Z0 --steps 3"
disagree "dpsgd --hidden" --hidden dpsgd "$M --steps 1" "--model mlp --in 4 --hidden 7 --classes 3 --dataset-size 16 --q 0.5 --noise-key 3"
disagree "dpsgd --dtype" --dtype dpsgd "$M --dtype f64" "$M --dtype f32"
disagree "dpsgd --vocab" --vocab dpsgd "$L --vocab 16" "$L --vocab 17"
disagree "dpsgd --clip" --clip dpsgd "$M --clip 1" "$M --clip 2"
disagree "dpsgd --seed" --seed dpsgd "$M --seed 1" "$M --seed 2"
disagree "dpsgd --q" --q dpsgd "$M" "${M/--q 0.5/--q 0.25}"
disagree "dpsgd --data file contents" --data dpsgd "$MD --data d1.safetensors" "$MD --data d2.safetensors"
disagree "dpzo --phi" --phi dpzo "$Z" "${Z/--phi 0.01/--phi 0.02}"
disagree "dpzo --data file contents" --data dpzo "$MD --phi 0.01 $ZH --steps 1 --data d1.safetensors" "$MD --phi 0.01 $ZH --steps 1 --data d2.safetensors"
disagree "dpsgd --export on rank 0 only" --export dpsgd "$M --export ex" "$M"
disagree "dpzo --export on rank 0 only" --export dpzo "$Z --export ex" "$Z"
disagree "dpsgd --strategy" --strategy dpsgd "$M --strategy ghost" "$M"

# positive controls: these must run
agree "identical options" dpsgd "$M --steps 2" "$M --steps 2"
agree "same data file under two paths, --threads per rank" dpsgd "$MD --data d1.safetensors --threads 2" "$MD --data d1copy.safetensors"
agree "--export path differs (only rank 0 writes)" dpzo "$Z --export ex0" "$Z --export ex1"
[ -f ex0/step-000001.safetensors ] && [ ! -e ex1 ] && pass "only rank 0 wrote its export" || bad "exports: $(ls -d ex* 2>&1)"
exit $fail

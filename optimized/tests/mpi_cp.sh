#!/usr/bin/env bash
# optimized/tests/mpi_cp.sh — LongShield context parallelism (docs/longshield.md): the
# layouts --cp refuses exit 2 naming the option, a --cp 2 run reports its reduce-scatter
# over the CP group in --memory-report, and the byte counters of a step equal the
# communication formulas of docs/longshield.md section 6 (reduce-scatter constant in T), and
# zero1/zero2 over the DP group (section 5: zero2's ledger grads and DP-group bytes exact). The element-wise agreement with
# the reference is the conformance cases cp-ci-*, cp4-ci-* and neg-cp-* (conform_ci.sh).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/mpi_lib.bash"
LL=(dpsgd --model llama --vocab 11 --dim 8 --layers 1 --heads 2 --ffn 12 --seq 3 --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1)
expect_exit() { # want desc ranks args...
  local want=$1 desc=$2 r=$3; shift 3
  timeout 60 mpirun -x ASAN_OPTIONS -n "$r" "${TRAIN[@]}" "$@" >bad.log 2>&1; local rc=$?
  if [ "$rc" -eq "$want" ] && grep -q -- "$desc" bad.log; then pass "exit $want: $desc"
  else bad "expected exit $want with '$desc', got $rc"; tail -3 bad.log; fi
}
expect_exit 2 "the mlp has no positions and no attention" 2 dpsgd --model mlp --in 3 --hidden 4 --classes 2 \
  --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --cp 2
expect_exit 2 "--cp 4 is larger than --seq 3" 4 "${LL[@]}" --cp 4
expect_exit 2 "the layout needs 2 ranks, but the run has 3" 3 "${LL[@]}" --cp 2
# zero3 under CP (docs/longshield.md section 5): the layer's segment gathered over the DP
# group, the tensor over the CP group; its exports are the conformance cases cp-zero3-*
if timeout 60 mpirun -x ASAN_OPTIONS -n 2 "${TRAIN[@]}" "${LL[@]}" --cp 2 --sharding zero3 --memory-report >z3.log 2>&1 &&
   awk '$2 == "1:" && $3 == "gathered_params" && $5 > 0 { f = 1 } END { exit !f }' z3.log; then
  pass "--cp 2 --sharding zero3 runs, CP rank 1 gathers its layers' tensors"
else bad "--cp 2 --sharding zero3"; tail -5 z3.log; fi
# (every norm strategy runs under CP: the conformance cases cp-ghost-*, cp-mixed-ghost-*,
# cp-book-keeping-*, cp-fused-* compare them with the reference)
expect_exit 2 "--cp-pattern" 2 "${LL[@]}" --cp 2 --cp-pattern outputs
expect_exit 2 "--cp-attention" 2 "${LL[@]}" --cp 2 --cp-attention rings
DPCERT_TEST_INJECT=1 expect_exit 2 "--inject-bug cp-local-norms applies to context parallelism only" 1 "${LL[@]}" --inject-bug cp-local-norms
DPCERT_TEST_INJECT=1 expect_exit 2 "--inject-bug clip-after-sum has no injection point under context parallelism" 2 "${LL[@]}" --cp 2 --inject-bug clip-after-sum
DPCERT_TEST_INJECT=1 expect_exit 2 "--inject-bug cp-zero2-local-noise applies to --sharding zero2 only" 2 "${LL[@]}" --cp 2 --inject-bug cp-zero2-local-noise
DPCERT_TEST_INJECT=1 expect_exit 2 "--sharding zero2: --inject-bug noise-every-rank has no injection point" 2 "${LL[@]}" --cp 2 --sharding zero2 --inject-bug noise-every-rank
# the input-stationary reduce-scatter runs over the CP group: rank 1 reports its calls
timeout 60 mpirun -x ASAN_OPTIONS -n 2 "${TRAIN[@]}" "${LL[@]}" --cp 2 --memory-report >rep.log 2>&1 || { bad "--cp 2 run"; tail -3 rep.log; }
rs=$(awk '$1 == "rank" && $2 == "1:" && $3 == "reduce_scatter_sum" { print $4 }' rep.log)
if [ "${rs:-0}" -ge 1 ]; then pass "--cp 2 --memory-report: rank 1 made $rs reduce-scatter call(s)"
else bad "--cp 2 --memory-report: reduce-scatter calls '${rs:-}'"; tail -20 rep.log; fi
# (stdout and stderr go to separate files: mpirun may split a line where both share one)
source "$(dirname "${BASH_SOURCE[0]}")/cp_comm_lib.bash" # CM, comm_check, out_check (the formulas of section 6)
# CP composed with zero1 over the DP group (2 x 2): the optimizer states of every rank
# hold ceil(L / 2) of the L = P / 2 packed slice elements (every row count even; values:
# case cp-zero1-*)
timeout 60 mpirun -x ASAN_OPTIONS -n 4 "${TRAIN[@]}" "${CM[@]}" --seq 8 --cp 2 --sharding zero1 >z1.log 2>z1.err || { bad "--cp 2 --sharding zero1 run"; tail -3 z1.err; }
n=$(awk '$1 == "rank" && $3 == "params" { P[$2] = $4 / 8 } $1 == "rank" && $3 == "optimizer_state" { o[$2] = $5 }
  END { for (r in o) { L = P[r] / 2; if (o[r] == 8 * int((L + 1) / 2)) k++ } print k + 0 }' z1.err)
if [ "$n" -eq 4 ]; then pass "--cp 2 --sharding zero1 (2 x 2): optimizer states ceil(L / 2) per rank on all 4 ranks"
else bad "--cp 2 --sharding zero1: $n of 4 ranks hold ceil(L / 2) optimizer states"; grep optimizer_state z1.err; fi
# zero2 over the DP group (2 x 2, docs/longshield.md sections 5, 6 and 6b): the same run with
# --sharding zero2; on every rank (L = P / 2 packed slice elements, c = ceil(L / 2), e = 8)
# the ledger's grads are exactly (N c + 2 c) e (S [N c] | Z [c] | private gradient [c]),
# against zero1's (2 L + c) e, the optimizer states c e; and the byte counters differ from
# zero1's by exactly the DP-group formulas: the all-reduce of 2 L is gone (-2 L e (N - 1)),
# one reduce-scatter of c per rank (+c e (N - 1)), two all-gathers of c for the exported S
# and Z (+2 c e (N - 1)), N = 2.
timeout 60 mpirun -x ASAN_OPTIONS -n 4 "${TRAIN[@]}" "${CM[@]}" --seq 8 --cp 2 --sharding zero2 >z2.log 2>z2.err || { bad "--cp 2 --sharding zero2 run"; tail -3 z2.err; }
n=$(awk 'FNR == 1 { f++ } $1 != "rank" { next } f == 1 { k1[$2 " " $3] = ($3 == "params" || $3 == "grads") ? $4 : $5 }
  f == 2 { k2[$2 " " $3] = ($3 == "params" || $3 == "grads" || $3 == "optimizer_state") ? $4 : $5 }
  END { for (r = 0; r < 4; r++) { R = r ":"; P = k2[R " params"] / 8; L = P / 2; c = int((L + 1) / 2);
      ok = k2[R " grads"] == 8 * (2 * c + 2 * c) && k1[R " grads"] == 8 * (2 * L + c) && k2[R " optimizer_state"] == 8 * c &&
        k1[R " allreduce_sum"] - k2[R " allreduce_sum"] == 2 * L * 8 &&
        k2[R " reduce_scatter_sum"] - k1[R " reduce_scatter_sum"] == c * 8 &&
        k2[R " allgather"] - k1[R " allgather"] == 2 * c * 8;
      if (ok && P > 0) k++; else printf "rank %d: P %d grads %d (zero1 %d) state %d allreduce %d/%d rs %d/%d ag %d/%d\n", r, P,
        k2[R " grads"], k1[R " grads"], k2[R " optimizer_state"], k1[R " allreduce_sum"], k2[R " allreduce_sum"],
        k1[R " reduce_scatter_sum"], k2[R " reduce_scatter_sum"], k1[R " allgather"], k2[R " allgather"] > "/dev/stderr" }
    print k + 0 }' z1.err z2.err)
if [ "$n" -eq 4 ]; then pass "--cp 2 --sharding zero2 (2 x 2): grads (N c + 2 c) e < zero1's (2 L + c) e and the DP-group bytes exact on all 4 ranks"
else bad "--cp 2 --sharding zero2: $n of 4 ranks match the ledger and byte formulas"; grep -E 'grads|reduce_scatter' z2.err; fi
rm -f rs.txt mem.txt
for T in 64 256 1024; do comm_check 2 $T ring; done
comm_check 2 256 allgather; comm_check 4 64 allgather; comm_check 4 1024 allgather; comm_check 4 64 ring; comm_check 4 1024 ring
rm -f gather.txt
for T in 64 256 1024; do out_check 2 $T allgather; done
out_check 4 64 ring; out_check 4 1024 ring
# the gathered bytes (all-to-all + activation all-gathers) are proportional to T at fixed M
if awk '{ k = $1; if (!(k in t0)) { t0[k] = $2; g0[k] = $4 } else if ($4 * t0[k] != g0[k] * $2) { bad = 1 } } END { exit bad }' gather.txt && [ "$(wc -l <gather.txt)" -eq 5 ]; then
  pass "output-stationary gather bytes proportional to T (M = 2: T = 64, 256, 1024; M = 4: T = 64, 1024)"
else bad "output-stationary gather bytes not proportional to T: $(tr '\n' ';' <gather.txt 2>/dev/null)"; fi
# negative control cp-drop-partial under --cp-pattern output (the case neg-cp-out-drop-partial
# FAILs at the first differing tensor, per_sample.norm): the dropped all-to-all blocks also
# reach the column-sliced w_down, whose exported per-example gradient differs from a correct
# run's, while w_gate (row slice) differs too
NG=(dpsgd --seed 11 --noise-key 12345 --model llama --vocab 16 --dim 8 --layers 1 --heads 2 --ffn 12 --seq 5 --dataset-size 16 --q 0.25 --steps 1 --clip 1 --sigma 1 --cp 2 --cp-pattern output)
rm -rf ng_ok ng_bug
timeout 60 mpirun -x ASAN_OPTIONS -n 2 "${TRAIN[@]}" "${NG[@]}" --export ng_ok >/dev/null 2>&1 || bad "cp-drop-partial reference run"
DPCERT_TEST_INJECT=1 timeout 60 mpirun -x ASAN_OPTIONS -x DPCERT_TEST_INJECT -n 2 "${TRAIN[@]}" "${NG[@]}" --inject-bug cp-drop-partial --export ng_bug >/dev/null 2>&1 || bad "cp-drop-partial run"
for t in w_down w_gate; do
  h_ok=$("${DPCERT:-$DPCERT_BUILD/dpcert}" inspect ng_ok/step-000001.safetensors 2>/dev/null | grep " per_sample.grad.layers.0.$t ")
  h_bug=$("${DPCERT:-$DPCERT_BUILD/dpcert}" inspect ng_bug/step-000001.safetensors 2>/dev/null | grep " per_sample.grad.layers.0.$t ")
  if [ -n "$h_ok" ] && [ -n "$h_bug" ] && [ "$h_ok" != "$h_bug" ]; then pass "cp-drop-partial (output) changes the per-example gradient of $t"
  else bad "cp-drop-partial (output) leaves per_sample.grad.layers.0.$t unchanged or missing ('$h_ok' / '$h_bug')"; fi
done
# overlap (section 4c): each layer's reduce-scatter posted during the backward changes no
# bit of the exports (against --cp-overlap off, both patterns, 2 layers, ring, 2 x 2
# layout), and --memory-report prints every rank's hidden fraction of every step in [0, 1]
OV=(dpsgd --seed 11 --noise-key 12345 --model llama --vocab 16 --dim 8 --layers 2 --heads 2 --ffn 12 --seq 13 --dataset-size 16 --q 0.25 --steps 2 --clip 1 --sigma 1 --cp 2 --cp-attention ring)
for pat in input output; do
  rm -rf ov_on ov_off
  timeout 120 mpirun -x ASAN_OPTIONS -n 4 "${TRAIN[@]}" "${OV[@]}" --cp-pattern $pat --export ov_on --memory-report >ov.log 2>ov.err || { bad "overlap run ($pat)"; tail -3 ov.err; continue; }
  timeout 120 mpirun -x ASAN_OPTIONS -n 4 "${TRAIN[@]}" "${OV[@]}" --cp-pattern $pat --export ov_off --cp-overlap off >/dev/null 2>&1 || { bad "--cp-overlap off run ($pat)"; continue; }
  same=1
  for f in ov_on/*.safetensors; do cmp -s "$f" "ov_off/$(basename "$f")" || same=0; done
  [ -s ov_on/step-000002.safetensors ] || same=0
  if [ $same = 1 ]; then pass "overlap on/off: exports bit-identical ($pat, 2 x 2)"; else bad "overlap changes the exports ($pat)"; fi
  n=$(awk '/reduce-scatter overlap: hidden fraction/ { f = $7 + 0; if (f >= 0 && f <= 1) n++ } END { print n + 0 }' ov.log)
  if [ "$n" -eq 8 ]; then pass "--memory-report: hidden fraction of 4 ranks x 2 steps in [0, 1] ($pat; e.g. $(grep -m1 'hidden fraction' ov.log))"
  else bad "--memory-report: $n of 8 hidden-fraction lines ($pat)"; grep overlap ov.log; fi
done
# zero2 over the DP group (section 5): --cp-overlap on and off give bit-identical exports
rm -rf ovz_on ovz_off
timeout 120 mpirun -x ASAN_OPTIONS -n 4 "${TRAIN[@]}" "${OV[@]}" --sharding zero2 --export ovz_on >/dev/null 2>&1 || bad "zero2 overlap run"
timeout 120 mpirun -x ASAN_OPTIONS -n 4 "${TRAIN[@]}" "${OV[@]}" --sharding zero2 --export ovz_off --cp-overlap off >/dev/null 2>&1 || bad "zero2 --cp-overlap off run"
same=1
for f in ovz_on/*.safetensors; do cmp -s "$f" "ovz_off/$(basename "$f")" || same=0; done
[ -s ovz_on/step-000002.safetensors ] || same=0
if [ $same = 1 ]; then pass "overlap on/off: exports bit-identical (--sharding zero2, 2 x 2)"; else bad "overlap changes the exports (zero2)"; fi
# the reduce-scatter bytes do not depend on T (same batch: the sampling does not see T)
n=$(awk '{ print $1, $3 }' rs.txt 2>/dev/null | sort -u | awk '{ print $1 }' | sort | uniq -d | wc -l)
if [ -s rs.txt ] && [ "$n" -eq 0 ]; then pass "reduce-scatter bytes constant over T = 64..1024 at M = 2 and 4"
else bad "reduce-scatter bytes vary with T: $(tr '\n' ';' <rs.txt 2>/dev/null)"; fi
# memory (ring attention): the activation peak of a rank is exactly affine in its shard
# length T/M, act = a T/M + c (c: the per-example buffers that do not grow with T), over
# M = 2, 4 and T = 64..1024; the exponents of the fit are reported
if awk '$3 == "ring" { n++; x[n] = $2 / $1; y[n] = $4; m[n] = $1; t[n] = $2 }
  END {
    if (n < 5) { print "only " n " ring points"; exit 1 }
    lo = 1; hi = 1
    for (i = 1; i <= n; i++) { if (x[i] < x[lo]) lo = i; if (x[i] > x[hi]) hi = i }
    if ((y[hi] - y[lo]) % (x[hi] - x[lo]) != 0) { print "slope not an integer"; exit 1 }
    a = (y[hi] - y[lo]) / (x[hi] - x[lo]); c = y[lo] - a * x[lo]
    for (i = 1; i <= n; i++) if (a * x[i] + c != y[i]) { print "M=" m[i] " T=" t[i] ": " y[i] " != " a " T/M + " c; exit 1 }
    for (i = 1; i <= n; i++) { if (m[i] == 2 && t[i] == 64) p64 = y[i]; if (m[i] == 2 && t[i] == 1024) p1k = y[i]; if (m[i] == 4 && t[i] == 1024) q1k = y[i] }
    printf "act = %d T/M + %d bytes at %d points; exponent in T (M = 2, T = 64..1024) %.4f, in M (T = 1024, M = 2..4) %.4f, worst deviation from proportionality c/act = %.2f%%\n", a, c, n, log(p1k / p64) / log(16), log(q1k / p1k) / log(2), 100 * c / y[lo]
  }' mem.txt >mem.out; then pass "activation peak per rank proportional to T/M (ring): $(cat mem.out)"
else bad "activation peak per rank not affine in T/M: $(cat mem.out)"; cat mem.txt; fi
# memory scaling (section 6b), ring attention, input-stationary, one step, the last CP
# rank's ledger at M = 1 (the CP path: --cp 1 --cp-attention ring), 2, 4 and T = 64, 256,
# 1024: activations exactly affine in T/M over all 9 points; per-example-gradient peak
# (slices, the round partials and the send buffers holding them) independent of T, at
# least the rank's slices e b L, and exactly 1/M of the M = 1 peak: x_M = x_1 / M (the
# rounds of ceil(b / M) examples, section 4c; exact when M divides b, which the seed's
# batch b = 4 does; a batch the test cannot use fails naming it); exponents reported
rm -f scale.txt
for M in 1 2 4; do for T in 64 256 1024; do
  timeout 120 mpirun -x ASAN_OPTIONS -n "$M" "${TRAIN[@]}" "${CM[@]}" --seq "$T" --cp "$M" --cp-attention ring >sc.log 2>sc.err || { bad "scaling run M=$M T=$T"; tail -3 sc.err; continue; }
  cat sc.err >>sc.log
  r=$((M - 1))
  awk -v M=$M -v T=$T -v r="$r:" '$1 == "step" && $2 == "1" { b = $4 } $1 == "rank" && $2 == r && $3 == "activations" { a = $5 }
    $1 == "rank" && $2 == r && $3 == "per_example" { x = $5 } $1 == "rank" && $2 == r && $3 == "params" { P = $4 / 8 }
    END { print M, T, b, a, x, P }' sc.log >>scale.txt
done; done
if awk '{ n++; m[n] = $1; t[n] = $2; b[n] = $3; a[n] = $4; x[n] = $5; P[n] = $6 }
  END {
    if (n != 9) { print "only " n " points"; exit 1 }
    if (b[1] % 4 != 0) { print "the batch of step 1 is " b[1] ", not a multiple of 4: choose a --seed whose batch is"; exit 1 }
    # activations: exactly affine in T/M
    lo = 1; hi = 1
    for (i = 1; i <= n; i++) { if (t[i] / m[i] < t[lo] / m[lo]) lo = i; if (t[i] / m[i] > t[hi] / m[hi]) hi = i }
    sl = (a[hi] - a[lo]) / (t[hi] / m[hi] - t[lo] / m[lo]); c = a[lo] - sl * t[lo] / m[lo]
    for (i = 1; i <= n; i++) if (sl * t[i] / m[i] + c != a[i]) { print "activations M=" m[i] " T=" t[i] ": " a[i] " != " sl " T/M + " c; exit 1 }
    # per-example: independent of T at fixed M; at least the slices e b P / M; exactly x_1 / M
    for (i = 1; i <= n; i++) {
      if (m[i] == 1) x1 = x[i]
      if (x[i] != x[1 + 3 * int((i - 1) / 3)]) { print "per-example bytes vary with T at M=" m[i]; exit 1 }
    }
    for (i = 1; i <= n; i++) {
      L = 8 * b[i] * P[1] / m[i]
      if (x[i] < L) { print "per-example M=" m[i] ": " x[i] " below the slices " L; exit 1 }
      if (x[i] * m[i] != x1) { print "per-example M=" m[i] " T=" t[i] ": " x[i] " x " m[i] " != " x1 " (M = 1)"; exit 1 }
      if (m[i] == 1 && t[i] == 1024) s1 = a[i] + x[i]; if (m[i] == 4 && t[i] == 1024) { x4 = x[i]; s4 = a[i] + x[i] }
      if (m[i] == 2 && t[i] == 64) s64 = a[i] + x[i]; if (m[i] == 2 && t[i] == 1024) s1k = a[i] + x[i]
      if (m[i] == 2) x2 = x[i]
      d = 1 - (sl * t[i] / m[i]) / (a[i] + x[i]); if (d > worst) worst = d
    }
    printf "act = %d T/M + %d bytes (9 points, M = 1, 2, 4, T = 64..1024); activation + per-example peak: exponent in T %.4f (M = 2, T = 64..1024), in M %.4f (T = 1024, M = 1..4), worst deviation from proportionality to T/M %.2f%%; per-example peak = %d / M exactly (%d, %d, %d bytes at M = 1, 2, 4; slices e b P / M = %d / M), exponent in M %.4f (M = 1..4)\n", sl, c, log(s1k / s64) / log(16), log(s4 / s1) / log(4), 100 * worst, x1, x1, x2, x4, 8 * b[1] * P[1], log(x4 / x1) / log(4)
  }' scale.txt >scale.out; then pass "memory scaling: $(cat scale.out)"
else bad "memory scaling: $(cat scale.out)"; cat scale.txt; fi
[ $fail = 0 ] && echo "all context-parallel layout checks passed"
exit $fail

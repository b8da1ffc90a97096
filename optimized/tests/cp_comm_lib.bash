# optimized/tests/cp_comm_lib.bash — the communication checks of context parallelism,
# shared by mpi_cp.sh (host backend) and cuda_emu_cp_comm.sh (the CUDA backend on its
# emulation): one step's byte counters of CP rank 1 (--memory-report) against the formulas
# of docs/longshield.md section 6 (sourced after mpi_lib.bash; not a test itself). The
# backend is CP_BACKEND (extra `dpcert train` arguments; empty: the default, host). Each
# check appends what later checks of mpi_cp.sh use to rs.txt, mem.txt and gather.txt.
CP_BACKEND=(${CP_BACKEND[@]+"${CP_BACKEND[@]}"})
# communication per step = the formulas of docs/longshield.md section 6, from the byte
# counters of CP rank 1 (one step, --dp 1, no export; every parameter's rows divisible by M
# so L = P / M): reduce_scatter_sum sends b L e (M - 1) whatever T; allgather sends
# (4 layers b Tmax D + 4 L) e (M - 1) (q, k, v, dy and parameters + S, Z, private gradient);
# ring: allgather 4 L e (M - 1) and send (2 (M - 1) + 4 (M - 1) + 2) layers b Tmax D e
CM=(dpsgd --seed 11 --noise-key 12345 --model llama --vocab 16 --dim 8 --layers 1 --heads 2 --ffn 12 --dataset-size 16 --q 0.25 --steps 1 --clip 1 --sigma 1 --memory-report)
comm_check() { # M T attention
  local M=$1 T=$2 att=$3
  timeout 120 mpirun -x ASAN_OPTIONS -n "$M" "${TRAIN[@]}" "${CM[@]}" "${CP_BACKEND[@]}" --seq "$T" --cp "$M" --cp-attention "$att" >comm.log 2>comm.err || { bad "comm run M=$M T=$T $att"; tail -3 comm.err; return; }
  cat comm.err >>comm.log
  local b P rs ag sd Tmax L want_rs want_ag want_sd
  b=$(awk '$1 == "step" && $2 == "1" { print $4 }' comm.log)
  P=$(awk '$1 == "rank" && $2 == "1:" && $3 == "params" { print $4 / 8 }' comm.log)
  rs=$(awk '$1 == "rank" && $2 == "1:" && $3 == "reduce_scatter_sum" { print $5 }' comm.log)
  ag=$(awk '$1 == "rank" && $2 == "1:" && $3 == "allgather" { print $5 }' comm.log)
  sd=$(awk '$1 == "rank" && $2 == "1:" && $3 == "send" { print $5 }' comm.log)
  Tmax=$(( (T + M - 1) / M )); L=$(( P / M ))
  want_rs=$(( b * L * 8 * (M - 1) ))
  if [ "$att" = ring ]; then want_ag=$(( 4 * L * 8 * (M - 1) )); want_sd=$(( (6 * (M - 1) + 2) * b * Tmax * 8 * 8 ))
  else want_ag=$(( (4 * b * Tmax * 8 + 4 * L) * 8 * (M - 1) )); want_sd=0; fi
  if [ "$rs" = "$want_rs" ] && [ "$ag" = "$want_ag" ] && [ "$sd" = "$want_sd" ]; then
    pass "communication M=$M T=$T $att (batch $b): reduce-scatter $rs, allgather $ag, send $sd bytes = the formulas"
    echo "$M $att $rs" >>rs.txt
    echo "$M $T $att $(awk '$1 == "rank" && $2 == "1:" && $3 == "activations" { print $5 }' comm.log)" >>mem.txt
  else bad "communication M=$M T=$T $att (batch $b, P $P): reduce-scatter $rs (want $want_rs), allgather $ag (want $want_ag), send $sd (want $want_sd)"; fi
}
# output-stationary (section 4b): the narrower of a linear parameter's input activations
# A [d] and output gradients G [P] is all-gathered, the other exchanged by all-to-all. Here
# (D 8, F 12, V 16) every parameter but down has P >= d (row slice: all-to-all of
# b Tmax ceil(P / M) G columns; all-gather of b Tmax d per distinct input: a, y, m [D] and
# the final norm's output [D]); down has P = D < d = F (column slice: all-gather of its G,
# b Tmax D; all-to-all of b Tmax ceil(F / M) A columns); the reduce-scatter only for the
# token embedding (ceil(V / M) D) and the 3 gains (ceil(D / M) each); all bytes e (M - 1).
# --memory-report prints the orientation: down by columns [floor(F j / M), floor(F (j + 1) / M)).
out_check() { # M T attention
  local M=$1 T=$2 att=$3
  timeout 120 mpirun -x ASAN_OPTIONS -n "$M" "${TRAIN[@]}" "${CM[@]}" "${CP_BACKEND[@]}" --seq "$T" --cp "$M" --cp-attention "$att" --cp-pattern output >comm.log 2>comm.err || { bad "output-stationary run M=$M T=$T $att"; tail -3 comm.err; return; }
  cat comm.err >>comm.log
  local b P rs ag a2a Tmax L cD cF cV want_rs want_ag want_a2a att_ag
  b=$(awk '$1 == "step" && $2 == "1" { print $4 }' comm.log)
  P=$(awk '$1 == "rank" && $2 == "1:" && $3 == "params" { print $4 / 8 }' comm.log)
  rs=$(awk '$1 == "rank" && $2 == "1:" && $3 == "reduce_scatter_sum" { print $5 }' comm.log)
  ag=$(awk '$1 == "rank" && $2 == "1:" && $3 == "allgather" { print $5 }' comm.log)
  a2a=$(awk '$1 == "rank" && $2 == "1:" && $3 == "alltoall" { print $5 }' comm.log)
  Tmax=$(( (T + M - 1) / M )); L=$(( P / M )); cD=$(( (8 + M - 1) / M )); cF=$(( (12 + M - 1) / M )); cV=$(( (16 + M - 1) / M ))
  att_ag=$(( 4 * b * Tmax * 8 )); [ "$att" = ring ] && att_ag=0
  want_rs=$(( b * (cV * 8 + 3 * cD) * 8 * (M - 1) ))
  want_a2a=$(( b * Tmax * (4 * cD + 3 * cF + cV) * 8 * (M - 1) ))
  want_ag=$(( (att_ag + b * Tmax * 5 * 8 + 4 * L) * 8 * (M - 1) ))
  local cols="" ncol j
  for ((j = 0; j < M; j++)); do cols+=" [$(( 12 * j / M )), $(( 12 * (j + 1) / M )))"; done
  ncol=$(grep -c '^cp slice .*: columns' comm.log)
  if grep -qxF "cp slice layers.0.w_down [8, 12]: columns$cols" comm.log && [ "$ncol" -eq 1 ]; then
    pass "output-stationary M=$M: w_down column-sliced ($cols), every other parameter by rows"
  else bad "output-stationary M=$M: orientation (want w_down columns$cols and no other column slice)"; grep '^cp slice' comm.log; fi
  if [ "$rs" = "$want_rs" ] && [ "$ag" = "$want_ag" ] && [ "$a2a" = "$want_a2a" ]; then
    pass "output-stationary communication M=$M T=$T $att (batch $b): all-to-all $a2a, allgather $ag, reduce-scatter $rs bytes = the formulas"
    echo "$M $T $b $(( a2a + b * Tmax * 40 * 8 * (M - 1) ))" >>gather.txt
  else bad "output-stationary communication M=$M T=$T $att (batch $b, P $P): all-to-all $a2a (want $want_a2a), allgather $ag (want $want_ag), reduce-scatter $rs (want $want_rs)"; fi
}

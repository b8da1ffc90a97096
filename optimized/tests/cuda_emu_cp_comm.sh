#!/usr/bin/env bash
# optimized/tests/cuda_emu_cp_comm.sh — the CUDA backend's byte counters and memory ledger
# under context parallelism, on its emulation (docs/cuda.md "Process groups and
# collectives", "Memory ledger on CUDA"):
#   - the communication formulas of docs/longshield.md section 6 hold on cuda-emu exactly as
#     on the host (cp_comm_lib.bash: one step's reduce-scatter, all-gather, send and
#     all-to-all bytes of CP rank 1; both patterns, ring and all-gather attention, M = 2, 4);
#   - for DP x CP layouts (2 x 2: zero2, zero3, the output-stationary pattern with ring
#     attention) every rank's counters (calls, bytes sent and received per collective) and
#     every ledger tag but backend_scratch are identical to the host backend's for the same
#     run: the CUDA backend counts as the host does, and the engine allocates the same;
#   - the CUDA backend's own device memory (scratch slots, cuBLAS workspace) is in the
#     ledger: backend_scratch > 0 on every rank.
# Needs mpirun (else 77) and the emulation plugin (always built by make).
set -u
source "$(dirname "$0")/mpi_lib.bash"
[ -f "$DPCERT_BUILD/libdpcert_cuda_emu.so" ] || { echo "FAIL: $DPCERT_BUILD/libdpcert_cuda_emu.so not built"; exit 1; }
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1 CU_EMU_THREADS=${CU_EMU_THREADS:-1}
CP_BACKEND=(--backend cuda-emu)
source "$(dirname "$0")/cp_comm_lib.bash"
comm_check 2 64 ring; comm_check 2 64 allgather; comm_check 4 64 ring
out_check 2 64 allgather; out_check 4 64 ring
# host vs cuda-emu: the report lines of every rank, backend_scratch and the totals left out
for layout in "--sharding zero2" "--sharding zero3" "--cp-pattern output --cp-attention ring"; do
  # shellcheck disable=SC2086
  for b in host cuda-emu; do
    timeout 120 mpirun -x ASAN_OPTIONS -n 4 "${TRAIN[@]}" "${CM[@]}" --seq 8 --cp 2 $layout --backend $b >"id-$b.log" 2>"id-$b.err" ||
      { bad "$layout on $b"; tail -3 "id-$b.err"; }
    awk '$1 == "rank" && $3 != "backend_scratch" && $3 != "total" && $3 != "memory" && $3 != "communicated"' "id-$b.err" | sort >"id-$b.txt"
  done
  nl=$(grep -cE '^rank [0-3]: +(allreduce_sum|reduce_scatter_sum|allgather|send|grads|activations) ' id-host.txt)
  if [ "$nl" -ge 16 ] && cmp -s id-host.txt id-cuda-emu.txt; then
    pass "$layout (2 x 2): counters and ledger of 4 ranks identical on host and cuda-emu ($(wc -l <id-host.txt) lines)"
  else bad "$layout (2 x 2): host and cuda-emu differ ($nl lines checked)"; diff id-host.txt id-cuda-emu.txt | head -10; fi
  n=$(awk '$1 == "rank" && $3 == "backend_scratch" && $5 > 0 { n++ } END { print n + 0 }' id-cuda-emu.err)
  [ "$n" -eq 4 ] && pass "$layout: backend_scratch (device scratch, cuBLAS workspace) in the ledger of 4 ranks" ||
    bad "$layout: backend_scratch reported by $n of 4 ranks"
done
exit $fail

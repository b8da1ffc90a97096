#!/usr/bin/env bash
# optimized/tests/cuda_emu_collective_timeout.sh — the collective timeout of the CUDA backend
# (docs/engine.md "Collective timeout", docs/cuda.md "Known defects, fixed"): the checks of
# optimized/tests/mpi_collective_timeout.sh (a 2-rank run whose rank 1 is stopped or killed
# mid-run must end non-zero within the bound, rank 0 naming the collective; an undisturbed
# run exits 0) with `dpcert train --backend cuda-emu`, whose collectives are NCCL over MPI.
CTMO_BACKEND=cuda-emu exec bash "$(dirname "$0")/mpi_collective_timeout.sh"

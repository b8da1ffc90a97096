// optimized/cuda/emu/include/nccl.h — stand-in: NCCL over MPI
// (optimized/cuda/emu/cu_emu_nccl.h).
#pragma once
#include "optimized/cuda/emu/cu_emu_nccl.h"

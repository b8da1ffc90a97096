// optimized/cuda/emu/include/cublasLt.h — stand-in: cuBLASLt matmul
// (optimized/cuda/emu/cu_emu_blas.h).
#pragma once
#include "optimized/cuda/emu/cu_emu_blas.h"

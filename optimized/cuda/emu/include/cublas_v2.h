// optimized/cuda/emu/include/cublas_v2.h — stand-in: the cuBLAS GEMMs
// (optimized/cuda/emu/cu_emu_blas.h).
#pragma once
#include "optimized/cuda/emu/cu_emu_blas.h"

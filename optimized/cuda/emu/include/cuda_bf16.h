// optimized/cuda/emu/include/cuda_bf16.h — stand-in: __nv_bfloat16 and its conversions
// (optimized/cuda/emu/cu_emu_half.h).
#pragma once
#include "optimized/cuda/emu/cu_emu_half.h"

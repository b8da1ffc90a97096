// optimized/cuda/emu/include/cuda_fp16.h — stand-in: __half and its conversions
// (optimized/cuda/emu/cu_emu_half.h).
#pragma once
#include "optimized/cuda/emu/cu_emu_half.h"

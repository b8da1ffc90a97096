// optimized/cuda/emu/include/mma.h — stand-in: nvcuda::wmma element by element
// (optimized/cuda/emu/cu_emu_wmma.h).
#pragma once
#include "optimized/cuda/emu/cu_emu_wmma.h"

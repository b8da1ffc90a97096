// optimized/cuda/emu/include/cuda_runtime.h — stand-in for the CUDA toolkit header in the
// emulated build (docs/cuda.md "The emulation"): the runtime API and the kernel model.
#pragma once
#include "optimized/cuda/emu/cu_emu_runtime.h"

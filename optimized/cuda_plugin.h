/* optimized/cuda_plugin.h — the CUDA backend as a plugin (docs/cuda.md "Plugin").
 *
 * build/dpcert links no CUDA library: on first use of --backend cuda,
 * opt_cuda_plugin_load() dlopens libdpcert_cuda.so (the optimized/cuda/ objects linked
 * against cuBLAS, NCCL and cudart), looked for next to the running binary
 * (/proc/self/exe), then at $DPCERT_CUDA_PLUGIN, and takes its opt_backend_cuda_create.
 * Programs that link the CUDA objects themselves (GPU tests) use them directly
 * (optimized/backend.c's weak hook). */
#ifndef OPT_CUDA_PLUGIN_H
#define OPT_CUDA_PLUGIN_H

#include "optimized/backend.h"

#define OPT_CUDA_PLUGIN_NAME "libdpcert_cuda.so"
#define OPT_CUDA_PLUGIN_ENV "DPCERT_CUDA_PLUGIN"
/* --backend cuda-emu: the CUDA backend on the CPU emulation (docs/cuda.md "The emulation") */
#define OPT_CUDA_EMU_PLUGIN_NAME "libdpcert_cuda_emu.so"
#define OPT_CUDA_EMU_PLUGIN_ENV "DPCERT_CUDA_EMU_PLUGIN"

typedef dp_status (*opt_backend_create_fn)(opt_backend *be, const opt_backend_config *cfg);

/* Loads the plugin of --backend cuda (emu = 0) or cuda-emu (emu = 1) once (later calls
 * return the same result): DP_OK and *fn, or DP_ERR_NOT_SUPPORTED with "backend 'cuda' is
 * not built into this binary ..." (no plugin found), "cannot load plugin PATH: DLERROR",
 * or, when the library found is of the other kind (an emulated build offered for cuda, or
 * a GPU build for cuda-emu), a message saying so (exit 3 in every case): an emulated run is
 * never taken for a GPU run. */
dp_status opt_cuda_plugin_load(opt_backend_create_fn *fn, int emu);
/* 1 when the CUDA objects linked into this program are the emulation's. */
int opt_cuda_linked_is_emulated(void);

#endif

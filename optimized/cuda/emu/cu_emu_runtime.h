// optimized/cuda/emu/cu_emu_runtime.h — the CUDA runtime API of the emulation (the part of
// cuda_runtime.h the .cu files call), implemented in cu_emu_runtime.cc and cu_emu_mem.cc
// (docs/cuda.md "The emulation").
//
// Devices: CU_EMU_DEVICES (default: the number of MPI ranks on this node, at least 1)
// emulated devices named "cuda-emu (CPU emulation of sm_90)", compute capability 9.0.
// Memory: device allocations live in one arena of host memory (CU_EMU_MEMORY bytes,
// default min(16 GiB, half the RAM)) that host code cannot touch outside a kernel (the
// arena is PROT_NONE between launches, CU_EMU_GUARD=0 turns this off); copies and sets
// check that the device range lies inside one live allocation (wrong size, use after
// free, host pointer given as device pointer: loud message + error). Streams execute
// their work at enqueue time, in order; NCCL operations stay pending on their stream
// (MPI requests) until something waits for them. Errors follow CUDA: configuration
// errors are returned by cudaGetLastError, faults of a kernel are sticky (every later
// call returns them) until cudaDeviceReset.
#ifndef CU_EMU_RUNTIME_H
#define CU_EMU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "optimized/cuda/emu/cu_emu_kernel.h"

#define CUDART_VERSION 13000
#define CU_EMU 1 /* this is the emulation, not a CUDA toolkit */

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchTimeout = 702,
    cudaErrorAssert = 710,
    cudaErrorLaunchFailure = 719,
    cudaErrorCooperativeLaunchTooLarge = 720,
    cudaErrorUnknown = 999
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef struct CUevent_st *cudaEvent_t;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int major, minor;
    int multiProcessorCount;
    int l2CacheSize;
    int integrated;
};

const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceReset(void);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrCooperativeLaunch = 95 };
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
/* Cooperative launches (cudaLaunchCooperativeKernel, cu_emu_kernel.h): every block of the
 * grid is resident at once, each on its own OS thread of the pool, so blocks may wait for
 * each other (grid-wide barriers by atomics). Blocks per "SM" that a cooperative launch
 * may have: the pool's workers / multiProcessorCount (1, or 0 in the TSan build when
 * CU_EMU_THREADS exceeds its two workers). */
int cu_emu_coop_blocks_per_sm(void);
/* Cooperative launch (CUDA runtime API): all blocks co-resident (the pool runs each on its
 * own OS thread); more blocks than can be resident is cudaErrorCooperativeLaunchTooLarge. */
template <class... P>
inline cudaError_t cudaLaunchCooperativeKernel(void (*k)(P...), dim3 grid, dim3 block, void **args, size_t smem = 0,
                                       cudaStream_t stream = nullptr) {
    cu_emu::launch_coop(k, cu_emu::launch_cfg{grid, block, smem, stream}, args, std::index_sequence_for<P...>{});
    return (cudaError_t)cu_emu::last_launch_error();
}

template <class F>
inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, F func, int block_size, size_t smem) {
    (void)func;
    if (block_size < 1 || block_size > 1024 || smem > (size_t)(48 << 10)) return cudaErrorInvalidValue;
    *n = cu_emu_coop_blocks_per_sm();
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes);
template <class T> inline cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s = nullptr);
cudaError_t cudaMemset(void *dst, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop);

/* ---- emulation only (no CUDA counterpart) ---- */
extern "C" {
/* present only in an emulated build: the plugin loader refuses to take such a library
 * for --backend cuda (docs/cuda.md "Runtime selection") */
extern const int cu_emu_runtime_marker;
}
namespace cu_emu {
/* bytes of the live device allocation containing [p, p + bytes), or -1 (for tests) */
long long device_range_ok(const void *p, size_t bytes);
} // namespace cu_emu

#endif

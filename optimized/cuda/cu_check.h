/* optimized/cuda/cu_check.h — turn every CUDA, cuBLAS and NCCL call into a dp_status
 * (C++/CUDA only; included by the .cu files).
 *
 *   CU_CHECK(cudaMalloc(&p, n));          // returns DP_ERR_DEVICE from the function on failure
 *   CUBLAS_CHECK(cublasSgemm(...));
 *   NCCL_CHECK(ncclAllReduce(...));
 *   CU_CHECK_LAUNCH();                    // after a <<<...>>> launch (cudaGetLastError)
 *
 * The message names the failing expression, the library's error name and string,
 * and file:line, e.g.
 *   "CUDA call cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of memory) at optimized/cuda/cu_runtime.cu:42".
 * The *_ST variants evaluate to a dp_status instead of returning (for cleanup paths). */
#ifndef CU_CHECK_H
#define CU_CHECK_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "common/status.h"
}

const char *cu_cublas_status_name(cublasStatus_t s);

static inline dp_status cu_check_cuda_(cudaError_t e, const char *expr, const char *file, int line) {
    if (e == cudaSuccess) return DP_OK;
    return dp_error(DP_ERR_DEVICE, "CUDA call %s failed: %s (%s) at %s:%d", expr, cudaGetErrorName(e),
                    cudaGetErrorString(e), file, line);
}
static inline dp_status cu_check_cublas_(cublasStatus_t e, const char *expr, const char *file, int line) {
    if (e == CUBLAS_STATUS_SUCCESS) return DP_OK;
    return dp_error(DP_ERR_DEVICE, "cuBLAS call %s failed: %s at %s:%d", expr, cu_cublas_status_name(e), file, line);
}

#define CU_CHECK_ST(expr) cu_check_cuda_((expr), #expr, __FILE__, __LINE__)
#define CUBLAS_CHECK_ST(expr) cu_check_cublas_((expr), #expr, __FILE__, __LINE__)
#define CU_CHECK(expr) DP_TRY(CU_CHECK_ST(expr))
#define CUBLAS_CHECK(expr) DP_TRY(CUBLAS_CHECK_ST(expr))
/* After a kernel launch (CU_CHECK_LAUNCH(kernel_name)): configuration errors (bad grid, too
 * much shared memory) name the kernel. With DPCERT_CUDA_SYNC=1 in the environment (a debug
 * mode, docs/cuda.md "Errors") the device is also synchronised after every launch, so a
 * fault of the kernel (illegal address, trap) is reported naming it, instead of surfacing
 * at a later synchronisation as "cudaStreamSynchronize failed". */
int cu_sync_debug(void); /* 1 when DPCERT_CUDA_SYNC=1 (read once; cu_runtime.cu) */
static inline dp_status cu_check_launch_(const char *kernel, const char *file, int line) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return dp_error(DP_ERR_DEVICE, "CUDA kernel %s failed to launch: %s (%s) at %s:%d", kernel, cudaGetErrorName(e),
                        cudaGetErrorString(e), file, line);
    if (cu_sync_debug() && (e = cudaDeviceSynchronize()) != cudaSuccess)
        return dp_error(DP_ERR_DEVICE, "CUDA kernel %s failed: %s (%s) (DPCERT_CUDA_SYNC=1: synchronised after its launch "
                        "at %s:%d)", kernel, cudaGetErrorName(e), cudaGetErrorString(e), file, line);
    return DP_OK;
}
#define CU_CHECK_LAUNCH(kernel) DP_TRY(cu_check_launch_(#kernel, __FILE__, __LINE__))

#ifdef CU_WITH_NCCL
#include <nccl.h>
static inline dp_status cu_check_nccl_(ncclResult_t e, const char *expr, const char *file, int line) {
    if (e == ncclSuccess) return DP_OK;
    return dp_error(DP_ERR_DEVICE, "NCCL call %s failed: %s at %s:%d", expr, ncclGetErrorString(e), file, line);
}
#define NCCL_CHECK_ST(expr) cu_check_nccl_((expr), #expr, __FILE__, __LINE__)
#define NCCL_CHECK(expr) DP_TRY(NCCL_CHECK_ST(expr))
#endif

/* Argument checks shared by the API functions (DP_ERR_INVALID, message names the argument). */
#define CU_ARG(cond, ...)                                          \
    do {                                                           \
        if (!(cond)) return dp_error(DP_ERR_INVALID, __VA_ARGS__); \
    } while (0)

struct cu_ctx;
/* Internal accessors (cu_runtime.cu). */
cudaStream_t cu_ctx_stream_(struct cu_ctx *ctx);
cublasHandle_t cu_ctx_cublas_(struct cu_ctx *ctx);
cublasLtHandle_t cu_ctx_cublaslt_(struct cu_ctx *ctx);
void *cu_ctx_workspace_(struct cu_ctx *ctx, size_t *bytes);
/* Context-owned scratch of at least `bytes` (grown on demand, reused; one user at a time). */
dp_status cu_ctx_scratch_(struct cu_ctx *ctx, void **out, size_t bytes, int slot);
/* fn(arg, delta) is told every change of the scratch slots' device bytes (+ grown, - freed),
 * e.g. for the engine's memory ledger; NULL: none. */
void cu_ctx_set_scratch_note_(struct cu_ctx *ctx, void (*fn)(void *arg, int64_t delta), void *arg);

#endif

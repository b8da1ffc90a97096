// optimized/cuda/cu_runtime.cu — devices, the context (streams, cuBLAS/cuBLASLt
// handles, workspace, scratch), memory, events.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/cuda/cu_api.h"
#include "common/alloc.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_plan.h"

#define CU_NSCRATCH 8
#define CU_CUBLAS_WS (32u << 20) /* fixed cuBLAS(Lt) workspace: fixed algorithms run to run */

struct cu_ctx {
    cu_device_info info;
    cudaStream_t stream, comm;
    cudaEvent_t ev_compute, ev_comm;
    cublasHandle_t cublas;
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    void *scratch[CU_NSCRATCH];
    size_t scratch_bytes[CU_NSCRATCH];
};

struct cu_event {
    cudaEvent_t e;
};

const char *cu_cublas_status_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_(unknown)";
    }
}

int cu_sync_debug(void) {
    static int v = -1; /* same value in every thread: a benign race */
    if (v < 0) {
        const char *e = getenv("DPCERT_CUDA_SYNC");
        v = e && strcmp(e, "1") == 0;
    }
    return v;
}

extern "C" dp_status cu_device_probe(cu_device_info *out, int device) {
    memset(out, 0, sizeof *out);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInitializationError ||
        (e == cudaSuccess && n == 0)) {
        (void)cudaGetLastError(); /* clear the sticky-free error state */
        return dp_error(DP_ERR_NOT_SUPPORTED, "no CUDA device (%s)",
                        e == cudaSuccess ? "device count is 0" : cudaGetErrorString(e));
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return dp_error(DP_ERR_NOT_SUPPORTED, "no CUDA device (cudaGetDeviceCount: %s: %s)", cudaGetErrorName(e),
                        cudaGetErrorString(e));
    }
    if (device < 0) device = 0;
    if (device >= n) return dp_error(DP_ERR_INVALID, "CUDA device %d requested but only %d present", device, n);
    cudaDeviceProp pr;
    CU_CHECK(cudaGetDeviceProperties(&pr, device));
    out->count = n;
    out->device = device;
    snprintf(out->name, sizeof out->name, "%s", pr.name);
    out->cc_major = pr.major;
    out->cc_minor = pr.minor;
    out->sm_count = pr.multiProcessorCount;
    out->global_mem = pr.totalGlobalMem;
    out->l2_bytes = (size_t)pr.l2CacheSize;
    out->smem_per_block_optin = pr.sharedMemPerBlockOptin;
    CU_CHECK(cudaDriverGetVersion(&out->driver_version));
    CU_CHECK(cudaRuntimeGetVersion(&out->runtime_version));
    if (pr.major < 9)
        return dp_error(DP_ERR_NOT_SUPPORTED, "CUDA device %d (%s) has compute capability %d.%d; this build targets sm_90",
                        device, pr.name, pr.major, pr.minor);
    return DP_OK;
}

extern "C" void cu_ctx_destroy(cu_ctx *ctx) {
    if (!ctx) return;
    if (ctx->stream) cudaStreamSynchronize(ctx->stream);
    if (ctx->comm) cudaStreamSynchronize(ctx->comm);
    for (int i = 0; i < CU_NSCRATCH; i++)
        if (ctx->scratch[i]) cudaFree(ctx->scratch[i]);
    if (ctx->ws) cudaFree(ctx->ws);
    if (ctx->lt) cublasLtDestroy(ctx->lt);
    if (ctx->cublas) cublasDestroy(ctx->cublas);
    if (ctx->ev_compute) cudaEventDestroy(ctx->ev_compute);
    if (ctx->ev_comm) cudaEventDestroy(ctx->ev_comm);
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    if (ctx->comm) cudaStreamDestroy(ctx->comm);
    dp_free(ctx);
}

static dp_status ctx_init(cu_ctx *c, int device) {
    DP_TRY(cu_device_probe(&c->info, device));
    CU_CHECK(cudaSetDevice(c->info.device));
    CU_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CU_CHECK(cudaStreamCreateWithFlags(&c->comm, cudaStreamNonBlocking));
    CU_CHECK(cudaEventCreateWithFlags(&c->ev_compute, cudaEventDisableTiming));
    CU_CHECK(cudaEventCreateWithFlags(&c->ev_comm, cudaEventDisableTiming));
    CUBLAS_CHECK(cublasCreate(&c->cublas));
    CUBLAS_CHECK(cublasSetStream(c->cublas, c->stream));
    /* Pedantic math: no TF32 down-conversion of f32 GEMMs (the f32 tolerances assume f32 products). */
    CUBLAS_CHECK(cublasSetMathMode(c->cublas, CUBLAS_PEDANTIC_MATH));
    CUBLAS_CHECK(cublasLtCreate(&c->lt));
    c->ws_bytes = CU_CUBLAS_WS;
    CU_CHECK(cudaMalloc(&c->ws, c->ws_bytes));
    CUBLAS_CHECK(cublasSetWorkspace(c->cublas, c->ws, c->ws_bytes));
    return DP_OK;
}

extern "C" dp_status cu_ctx_create(cu_ctx **out, int device) {
    *out = NULL;
    cu_ctx *c = (cu_ctx *)dp_calloc(1, sizeof *c);
    if (!c) return dp_error(DP_ERR_NOMEM, "cu_ctx_create: out of host memory");
    dp_status st = ctx_init(c, device);
    if (st != DP_OK) {
        cu_ctx_destroy(c);
        return st;
    }
    *out = c;
    return DP_OK;
}

extern "C" const cu_device_info *cu_ctx_info(const cu_ctx *ctx) { return &ctx->info; }
extern "C" void *cu_ctx_stream(cu_ctx *ctx) { return (void *)ctx->stream; }
extern "C" void *cu_ctx_comm_stream(cu_ctx *ctx) { return (void *)ctx->comm; }
cudaStream_t cu_ctx_stream_(cu_ctx *ctx) { return ctx->stream; }
cublasHandle_t cu_ctx_cublas_(cu_ctx *ctx) { return ctx->cublas; }
cublasLtHandle_t cu_ctx_cublaslt_(cu_ctx *ctx) { return ctx->lt; }
void *cu_ctx_workspace_(cu_ctx *ctx, size_t *bytes) {
    *bytes = ctx->ws_bytes;
    return ctx->ws;
}

dp_status cu_ctx_scratch_(cu_ctx *ctx, void **out, size_t bytes, int slot) {
    if (slot < 0 || slot >= CU_NSCRATCH) return dp_error(DP_ERR_INTERNAL, "scratch slot %d out of range", slot);
    if (bytes == 0) bytes = 16;
    if (ctx->scratch_bytes[slot] < bytes) {
        if (ctx->scratch[slot]) {
            CU_CHECK(cudaStreamSynchronize(ctx->stream));
            CU_CHECK(cudaFree(ctx->scratch[slot]));
            ctx->scratch[slot] = NULL;
            ctx->scratch_bytes[slot] = 0;
        }
        CU_CHECK(cudaMalloc(&ctx->scratch[slot], bytes));
        ctx->scratch_bytes[slot] = bytes;
    }
    *out = ctx->scratch[slot];
    return DP_OK;
}

extern "C" dp_status cu_malloc(void **out, size_t bytes) {
    *out = NULL;
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *out = NULL;
        return dp_error(e == cudaErrorMemoryAllocation ? DP_ERR_NOMEM : DP_ERR_DEVICE,
                        "cudaMalloc of %zu bytes failed: %s (%s)", bytes, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    return DP_OK;
}
extern "C" void cu_free(void *p) {
    if (p) cudaFree(p);
}
extern "C" dp_status cu_memset0(cu_ctx *ctx, void *dst, size_t bytes) {
    CU_CHECK(cudaMemsetAsync(dst, 0, bytes, ctx->stream));
    return DP_OK;
}
extern "C" dp_status cu_h2d(cu_ctx *ctx, void *dst, const void *src, size_t bytes) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, ctx->stream));
    CU_CHECK(cudaStreamSynchronize(ctx->stream));
    return DP_OK;
}
extern "C" dp_status cu_d2h(cu_ctx *ctx, void *dst, const void *src, size_t bytes) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, ctx->stream));
    CU_CHECK(cudaStreamSynchronize(ctx->stream));
    return DP_OK;
}
extern "C" dp_status cu_d2d(cu_ctx *ctx, void *dst, const void *src, size_t bytes) {
    CU_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    return DP_OK;
}
extern "C" dp_status cu_sync(cu_ctx *ctx) {
    CU_CHECK(cudaStreamSynchronize(ctx->stream));
    return DP_OK;
}
extern "C" dp_status cu_mem_info(size_t *free_b, size_t *total_b, cu_ctx *ctx) {
    CU_CHECK(cudaSetDevice(ctx->info.device));
    CU_CHECK(cudaMemGetInfo(free_b, total_b));
    return DP_OK;
}

extern "C" dp_status cu_event_create(cu_event **out) {
    *out = NULL;
    cu_event *e = (cu_event *)dp_calloc(1, sizeof *e);
    if (!e) return dp_error(DP_ERR_NOMEM, "cu_event_create: out of host memory");
    dp_status st = CU_CHECK_ST(cudaEventCreate(&e->e));
    if (st != DP_OK) {
        dp_free(e);
        return st;
    }
    *out = e;
    return DP_OK;
}
extern "C" void cu_event_destroy(cu_event *e) {
    if (!e) return;
    cudaEventDestroy(e->e);
    dp_free(e);
}
extern "C" dp_status cu_event_record(cu_event *e, cu_ctx *ctx) {
    CU_CHECK(cudaEventRecord(e->e, ctx->stream));
    return DP_OK;
}
extern "C" dp_status cu_event_elapsed_ms(float *ms, cu_event *start, cu_event *stop) {
    CU_CHECK(cudaEventSynchronize(stop->e));
    CU_CHECK(cudaEventElapsedTime(ms, start->e, stop->e));
    return DP_OK;
}
extern "C" dp_status cu_comm_wait_compute(cu_ctx *ctx) {
    CU_CHECK(cudaEventRecord(ctx->ev_compute, ctx->stream));
    CU_CHECK(cudaStreamWaitEvent(ctx->comm, ctx->ev_compute, 0));
    return DP_OK;
}
extern "C" dp_status cu_compute_wait_comm(cu_ctx *ctx) {
    CU_CHECK(cudaEventRecord(ctx->ev_comm, ctx->comm));
    CU_CHECK(cudaStreamWaitEvent(ctx->stream, ctx->ev_comm, 0));
    return DP_OK;
}

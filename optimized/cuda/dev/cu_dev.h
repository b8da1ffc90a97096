/* optimized/cuda/dev/cu_dev.h — the C API of the CUDA development variants (docs/cuda.md
 * "Development variants"): kernels not used by the engine yet, with their tests
 * (optimized/tests/test_cuda_gpu_dev.c) and benchmark (optimized/bench/bench_gpu_dp.c).
 * They are promoted into optimized/cuda/ and cu_api.h when the engine uses them (a bf16
 * path through the engine). Declared once in the X-macro CU_DEV_API (the same X_ macros
 * as CU_API in cu_api.h): the prototypes below and the stubs of cu_stub.c (a build
 * without CUDA) are generated from it. Conventions as cu_api.h (bf16 as uint16_t bit
 * patterns, row-major, outputs first). */
#ifndef CU_DEV_H
#define CU_DEV_H

#include "optimized/cuda/cu_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CU_DEV_API(X_STATUS, X_STATUS_OUT, X_VOID, X_VALUE)                                                          \
    /* f32 <-> bf16 conversion on the device (round to nearest even, as common/tensor.h). */                         \
    X_STATUS(cu_f32_to_bf16, (cu_ctx *ctx, uint16_t *out, const float *in, int64_t n))                               \
    X_STATUS(cu_bf16_to_f32, (cu_ctx *ctx, float *out, const uint16_t *in, int64_t n))                               \
    /* C[M,N] = alpha op(A) op(B) + beta C: bf16 inputs, f32 output, f32 compute (cuBLASLt matmul,                   \
     * cublasGemmEx fallback); strided-batched: matrices at A + i*sa, B + i*sb, C + i*sc. K >= 1. */                 \
    X_STATUS(cu_gemm_bf16, (cu_ctx *ctx, float *C, const uint16_t *A, const uint16_t *B, int ta, int tb,             \
                            float alpha, float beta, int M, int N, int K))                                           \
    X_STATUS(cu_gemm_bf16_batched, (cu_ctx *ctx, float *C, const uint16_t *A, const uint16_t *B, int ta, int tb,     \
                                    float alpha, float beta, int M, int N, int K, int64_t sa, int64_t sb,            \
                                    int64_t sc, int batch))                                                          \
    /* Fused per-layer DP weight gradient from bf16 A[B,T,d], G[B,T,p]:                                              \
     *   grad[p,d] += sum_b c_b g_b, g_b = G_b^T A_b, c_b = the engine's abadi factor of ||g_b||^2                   \
     * (n > C ? C/n : 1; an infinite norm gives 0 and the example is skipped); sqnorm[b] receives                    \
     * ||g_b||^2 (may be NULL). Chunks of `chunk` examples (0 = automatic, cu_fused_chunk): one                      \
     * bf16 strided-batched GEMM into an f32 workspace, then the engine's norm and accumulation                      \
     * kernels (cu_internal.cuh cu_rows_sqnorm_t, cu_fused_chunk_t). */                                              \
    X_STATUS(cu_dp_fused_wgrad_bf16, (cu_ctx *ctx, float *grad, double *sqnorm, const uint16_t *A,                   \
                                      const uint16_t *G, double clip, int B, int T, int d, int p, int chunk))        \
    /* Ghost norm from bf16 A, G on the tensor cores (WMMA 16x16x16, f32 accumulation): 64 x 64                      \
     * Gram tiles, only the upper triangle of tile pairs; `accumulate` = 1 adds to sq. */                            \
    X_STATUS(cu_dp_ghost_sqnorm_bf16, (cu_ctx *ctx, double *sq, const uint16_t *A, const uint16_t *G,                \
                                       int accumulate, int B, int T, int d, int p))                                  \
    /* Book-keeping with bf16 rows: Gs[B*T,p] = bf16(c_b G) (scratch), grad[p,d] += Gs^T A (cuBLASLt). */           \
    X_STATUS(cu_dp_bk_wgrad_bf16, (cu_ctx *ctx, float *grad, uint16_t *Gs, const uint16_t *A, const uint16_t *G,     \
                                   const float *c, int B, int T, int d, int p))

#define CU_DEV_PROTO_STATUS_(name, params) dp_status name params;
#define CU_DEV_PROTO_STATUS_OUT_(name, params, out) dp_status name params;
#define CU_DEV_PROTO_VOID_(name, params) void name params;
#define CU_DEV_PROTO_VALUE_(type, name, params, value) type name params;
CU_DEV_API(CU_DEV_PROTO_STATUS_, CU_DEV_PROTO_STATUS_OUT_, CU_DEV_PROTO_VOID_, CU_DEV_PROTO_VALUE_)
#undef CU_DEV_PROTO_STATUS_
#undef CU_DEV_PROTO_STATUS_OUT_
#undef CU_DEV_PROTO_VOID_
#undef CU_DEV_PROTO_VALUE_

#ifdef __cplusplus
}
#endif

#endif

// optimized/cuda/cu_gemm.cu — row-major GEMMs through cuBLAS in the engine's dtype: f32
// (Sgemm) and f64 (Dgemm), plain and strided-batched, and the empty sum K = 0 as the host
// writes it (C = alpha 0 + beta C). The bf16 (cuBLASLt) GEMM is a development variant:
// dev/cu_dev_bf16.cu.
//
// Row-major C[M,N] = op(A) op(B) is computed as the column-major product
// C^T[N,M] = op(B)^T op(A)^T: cuBLAS's first operand is our B, its second our A.
// Column-major views: B (tb=0) [K,N] row-major = N x K col-major, ld N;
// B (tb=1) [N,K] = K x N col-major, ld K and transposed; likewise for A with M.
#include <stdint.h>
#include <string.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

static dp_status gemm_args(const char *fn, int M, int N, int K, int batch) {
    if (M < 0 || N < 0 || K < 0 || batch < 0)
        return dp_error(DP_ERR_INVALID, "%s: negative size (M=%d N=%d K=%d batch=%d)", fn, M, N, K, batch);
    return DP_OK;
}

static cublasStatus_t gemm_call(cublasHandle_t h, cublasOperation_t oa, cublasOperation_t ob, int m, int n, int k,
                                double alpha, const float *A, int lda, int64_t sa, const float *B, int ldb, int64_t sb,
                                double beta, float *C, int ldc, int64_t sc, int batch) {
    float al = (float)alpha, be = (float)beta;
    if (batch == 1) return cublasSgemm(h, oa, ob, m, n, k, &al, A, lda, B, ldb, &be, C, ldc);
    return cublasSgemmStridedBatched(h, oa, ob, m, n, k, &al, A, lda, sa, B, ldb, sb, &be, C, ldc, sc, batch);
}
static cublasStatus_t gemm_call(cublasHandle_t h, cublasOperation_t oa, cublasOperation_t ob, int m, int n, int k,
                                double alpha, const double *A, int lda, int64_t sa, const double *B, int ldb, int64_t sb,
                                double beta, double *C, int ldc, int64_t sc, int batch) {
    if (batch == 1) return cublasDgemm(h, oa, ob, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc);
    return cublasDgemmStridedBatched(h, oa, ob, m, n, k, &alpha, A, lda, sa, B, ldb, sb, &beta, C, ldc, sc, batch);
}

/* f32 or f64 (alpha, beta rounded to T), row-major through the column-major swap. */
template <typename T>
dp_status cu_gemm_t(cu_ctx *ctx, T *C, const T *A, const T *B, int ta, int tb, double alpha, double beta, int M, int N,
                    int K, int64_t sa, int64_t sb, int64_t sc, int batch) {
    DP_TRY(gemm_args("cu_gemm", M, N, K, batch));
    if (M == 0 || N == 0 || batch == 0) return DP_OK;
    if (K == 0) return dp_error(DP_ERR_INVALID, "cu_gemm: K must be >= 1");
    cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ldb = tb ? K : N, lda = ta ? M : K;
    CUBLAS_CHECK(gemm_call(cu_ctx_cublas_(ctx), opB, opA, N, M, K, alpha, B, ldb, sb, A, lda, sa, beta, C, N, sc, batch));
    return DP_OK;
}
template dp_status cu_gemm_t<float>(cu_ctx *, float *, const float *, const float *, int, int, double, double, int, int,
                                    int, int64_t, int64_t, int64_t, int);
template dp_status cu_gemm_t<double>(cu_ctx *, double *, const double *, const double *, int, int, double, double, int,
                                     int, int, int64_t, int64_t, int64_t, int);

extern "C" dp_status cu_gemm_f32_batched(cu_ctx *ctx, float *C, const float *A, const float *B, int ta, int tb,
                                         float alpha, float beta, int M, int N, int K, int64_t sa, int64_t sb,
                                         int64_t sc, int batch) {
    return cu_gemm_t<float>(ctx, C, A, B, ta, tb, (double)alpha, (double)beta, M, N, K, sa, sb, sc, batch);
}

extern "C" dp_status cu_gemm_f32(cu_ctx *ctx, float *C, const float *A, const float *B, int ta, int tb, float alpha,
                                 float beta, int M, int N, int K) {
    return cu_gemm_f32_batched(ctx, C, A, B, ta, tb, alpha, beta, M, N, K, 0, 0, 0, 1);
}

/* K = 0 with beta != 0: C[i] = alpha * 0 + beta * C[i] (two roundings, as the host) */
template <typename R> __global__ void k_gemm_k0(R *C, R alpha, R beta, int64_t n) {
    CU_FOR_I(n) C[i] = rn_add(rn_mul(alpha, (R)0), rn_mul(beta, C[i]));
}
template <typename R> dp_status cu_gemm_k0_t(cu_ctx *ctx, R *C, double alpha, double beta, int64_t n) {
    if (beta == 0.0) {
        CU_CHECK(cudaMemsetAsync(C, 0, (size_t)n * sizeof(R), cu_ctx_stream_(ctx)));
        return DP_OK;
    }
    k_gemm_k0<R><<<cu_grid_1d(n, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(C, (R)alpha, (R)beta, n);
    CU_CHECK_LAUNCH(k_gemm_k0);
    return DP_OK;
}
template dp_status cu_gemm_k0_t<float>(cu_ctx *, float *, double, double, int64_t);
template dp_status cu_gemm_k0_t<double>(cu_ctx *, double *, double, double, int64_t);

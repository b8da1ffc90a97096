// optimized/cuda/dev/cu_dev_bf16.cu — development variants (not used by the engine yet;
// docs/cuda.md "Development variants"): the bf16-input GEMM through cuBLASLt (f32 output
// and accumulation, plain and strided-batched, with the cublasGemmEx fallback) and the
// f32 <-> bf16 conversions of the C API (over the engine's kernel, cu_prec.cu). Promoted into optimized/cuda/ when the engine
// uses them (a bf16 path through the engine).
#include <cuda_bf16.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "optimized/backend.h"
}
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/dev/cu_dev.h"

static dp_status gemm_args(const char *fn, int M, int N, int K, int batch) {
    if (M < 0 || N < 0 || K < 0 || batch < 0)
        return dp_error(DP_ERR_INVALID, "%s: negative size (M=%d N=%d K=%d batch=%d)", fn, M, N, K, batch);
    return DP_OK;
}

/* Largest power of two (<= 256) dividing the address: what cuBLASLt may assume. */
static uint32_t align_of(const void *p) {
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (a % al) != 0) al >>= 1;
    return al;
}

struct lt_descs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~lt_descs() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (lc) cublasLtMatrixLayoutDestroy(lc);
        if (lb) cublasLtMatrixLayoutDestroy(lb);
        if (la) cublasLtMatrixLayoutDestroy(la);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

static dp_status set_batch(cublasLtMatrixLayout_t l, int batch, int64_t stride) {
    if (batch <= 1) return DP_OK;
    int32_t b = batch;
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    return DP_OK;
}

extern "C" dp_status cu_gemm_bf16_batched(cu_ctx *ctx, float *C, const uint16_t *A, const uint16_t *B, int ta, int tb,
                                          float alpha, float beta, int M, int N, int K, int64_t sa, int64_t sb,
                                          int64_t sc, int batch) {
    DP_TRY(gemm_args("cu_gemm_bf16", M, N, K, batch));
    if (M == 0 || N == 0 || batch == 0) return DP_OK;
    if (K == 0) return dp_error(DP_ERR_INVALID, "cu_gemm_bf16: K must be >= 1");
    lt_descs d;
    cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA));
    /* Lt's A = our B: stored col-major as (tb ? K x N, ld K : N x K, ld N). */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.la, CUDA_R_16BF, tb ? K : N, tb ? N : K, tb ? K : N));
    /* Lt's B = our A: (ta ? M x K, ld M : K x M, ld K). */
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.lb, CUDA_R_16BF, ta ? M : K, ta ? K : M, ta ? M : K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.lc, CUDA_R_32F, N, M, N));
    DP_TRY(set_batch(d.la, batch, sb));
    DP_TRY(set_batch(d.lb, batch, sa));
    DP_TRY(set_batch(d.lc, batch, sc));
    size_t wsb = 0;
    void *ws = cu_ctx_workspace_(ctx, &wsb);
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    uint32_t alA = align_of(B), alB = align_of(A), alC = align_of(C);
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alA, sizeof alA));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alB, sizeof alB));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alC, sizeof alC));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alC, sizeof alC));
    cublasLtMatmulHeuristicResult_t h;
    memset(&h, 0, sizeof h);
    int found = 0;
    /* cublasLt.h: NOT_SUPPORTED means "no heuristic for this configuration" (not an error
     * here: the fallback below handles it); SUCCESS means inspect results [0, found) and
     * each result's .state. Anything else (INVALID_VALUE, ...) is a real failure. */
    cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(cu_ctx_cublaslt_(ctx), d.op, d.la, d.lb, d.lc, d.lc, d.pref, 1, &h, &found);
    if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED)
        return cu_check_cublas_(hs, "cublasLtMatmulAlgoGetHeuristic(...)", __FILE__, __LINE__);
    if (hs == CUBLAS_STATUS_SUCCESS && found >= 1 && h.state == CUBLAS_STATUS_SUCCESS) {
        CUBLAS_CHECK(cublasLtMatmul(cu_ctx_cublaslt_(ctx), d.op, &alpha, B, d.la, A, d.lb, &beta, C, d.lc, C, d.lc,
                                    &h.algo, ws, wsb, cu_ctx_stream_(ctx)));
        return DP_OK;
    }
    /* No Lt algorithm for this shape/alignment (NOT_SUPPORTED, zero results, or a result
     * whose state is not SUCCESS): cublasGemmEx, same types and compute. */
    int ldb = tb ? K : N, lda = ta ? M : K;
    if (batch == 1)
        CUBLAS_CHECK(cublasGemmEx(cu_ctx_cublas_(ctx), opB, opA, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF,
                                  lda, &beta, C, CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(cu_ctx_cublas_(ctx), opB, opA, N, M, K, &alpha, B, CUDA_R_16BF, ldb, sb,
                                                A, CUDA_R_16BF, lda, sa, &beta, C, CUDA_R_32F, N, sc, batch,
                                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return DP_OK;
}

extern "C" dp_status cu_gemm_bf16(cu_ctx *ctx, float *C, const uint16_t *A, const uint16_t *B, int ta, int tb,
                                  float alpha, float beta, int M, int N, int K) {
    return cu_gemm_bf16_batched(ctx, C, A, B, ta, tb, alpha, beta, M, N, K, 0, 0, 0, 1);
}

/* ---- conversions: the engine's kernel (cu_prec.cu, the backend's half_convert) ---- */
extern "C" dp_status cu_f32_to_bf16(cu_ctx *ctx, uint16_t *out, const float *in, int64_t n) {
    return cu_half_convert(ctx, out, NULL, in, OPT_HALF_BF16, OPT_HALF_ENCODE, n);
}
extern "C" dp_status cu_bf16_to_f32(cu_ctx *ctx, float *out, const uint16_t *in, int64_t n) {
    return cu_half_convert(ctx, out, NULL, in, OPT_HALF_BF16, OPT_HALF_DECODE, n);
}

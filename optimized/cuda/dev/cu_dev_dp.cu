// optimized/cuda/dev/cu_dev_dp.cu — development variants of the DP kernels with bf16
// inputs (not used by the engine yet; docs/cuda.md "Development variants"): the fused
// per-layer DP weight gradient from bf16 activations (per chunk: one bf16 strided-batched
// GEMM of per-example blocks, then the engine's own norm, factor and clipped-accumulation
// kernels, cu_rows_sqnorm_t and cu_fused_chunk_t), the ghost norm on the tensor cores
// (WMMA), and book-keeping's reweighted GEMM with bf16 scaled rows. Used by
// optimized/bench/bench_gpu_dp.c (G1-G2) and optimized/tests/test_cuda_gpu_dev.c.
#include <cuda_bf16.h>
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"
#include "optimized/cuda/dev/cu_dev.h"

/* ---------------- fused per-layer DP weight gradient, bf16 inputs ---------------- */
extern "C" dp_status cu_dp_fused_wgrad_bf16(cu_ctx *ctx, float *grad, double *sqnorm, const uint16_t *A,
                                            const uint16_t *G, double clip, int B, int T, int d, int p, int chunk) {
    if (!(clip > 0.0) || !isfinite(clip))
        return dp_error(DP_ERR_INVALID, "cu_dp_fused_wgrad_bf16: clip norm must be finite and > 0 (got %g)", clip);
    CU_ARG(B >= 0 && T > 0 && d > 0 && p > 0 && chunk >= 0, "cu_dp_fused_wgrad_bf16: bad sizes B=%d T=%d d=%d p=%d chunk=%d",
           B, T, d, p, chunk);
    if (B == 0) return DP_OK;
    int64_t n = (int64_t)p * d;
    int bc = chunk > 0 ? (chunk < B ? chunk : B) : cu_fused_chunk(CU_FUSED_WS_BYTES, B, p, d);
    void *ws, *sqd;
    DP_TRY(cu_ctx_scratch_(ctx, &ws, (size_t)(n * bc) * sizeof(float), CU_SLOT_WS));
    DP_TRY(cu_ctx_scratch_(ctx, &sqd, (size_t)bc * sizeof(double), CU_SLOT_SQD));
    for (int b0 = 0; b0 < B; b0 += bc) {
        int nb = B - b0 < bc ? B - b0 : bc;
        /* per-example tiles g_b[p,d] = G_b^T A_b for the chunk: one strided-batched GEMM */
        DP_TRY(cu_gemm_bf16_batched(ctx, (float *)ws, G + (int64_t)b0 * T * p, A + (int64_t)b0 * T * d, 1, 0, 1.0f,
                                    0.0f, p, d, T, (int64_t)T * p, (int64_t)T * d, n, nb));
        /* the engine's hierarchical norms, factors (abadi) and clipped accumulation */
        DP_TRY(cu_rows_sqnorm_t<float>(ctx, (double *)sqd, (const float *)ws, n, nb));
        if (sqnorm)
            CU_CHECK(cudaMemcpyAsync(sqnorm + b0, sqd, (size_t)nb * sizeof(double), cudaMemcpyDeviceToDevice,
                                     cu_ctx_stream_(ctx)));
        DP_TRY(cu_fused_chunk_t<float>(ctx, grad, NULL, NULL, (const double *)sqd, (const float *)ws, NULL, clip, 0, 0.0,
                                       nb, n));
    }
    return DP_OK;
}

/* ---------------- book-keeping with bf16 scaled rows ---------------- */
// Gs[b*T + t, :] = bf16(c[b] * G[b, t, :])
__global__ void k_scale_rows_bf16(uint16_t *Gs, const uint16_t *G, const float *c, int T, int p, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float g = __uint_as_float((uint32_t)G[i] << 16);
        __nv_bfloat16 h = __float2bfloat16_rn(c[i / ((int64_t)T * p)] * g);
        Gs[i] = *reinterpret_cast<uint16_t *>(&h);
    }
}
extern "C" dp_status cu_dp_bk_wgrad_bf16(cu_ctx *ctx, float *grad, uint16_t *Gs, const uint16_t *A, const uint16_t *G,
                                         const float *c, int B, int T, int d, int p) {
    CU_ARG(B >= 0 && T > 0 && d > 0 && p > 0 && (int64_t)B * T <= 0x7fffffff,
           "cu_dp_bk_wgrad_bf16: bad sizes B=%d T=%d d=%d p=%d", B, T, d, p);
    if (B == 0) return DP_OK;
    int64_t n = (int64_t)B * T * p;
    k_scale_rows_bf16<<<cu_grid_1d(n, 4), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(Gs, G, c, T, p, n);
    CU_CHECK_LAUNCH(k_scale_rows_bf16);
    return cu_gemm_bf16(ctx, grad, Gs, A, 1, 0, 1.0f, 1.0f, p, d, B * T);
}

/* ---------------- (2b) ghost norm on the tensor cores (bf16 in, f32 accumulation) ---------------- */
#include <mma.h>
#define TT CU_GHOST_TILE_TC
#define TK CU_GHOST_KCHUNK_TC
#define TLD (TK + 8) /* smem row pitch in bf16 elements: a multiple of 8 (WMMA), padded against bank conflicts */
// Warp w of 8 owns the 16x16 output fragments (w>>1, 2(w&1)) and (w>>1, 2(w&1)+1) of the 64x64 tile.
// acc[q] += X[ti + 16 r .. , :] . X[tj + 16 c .., :]^T over the whole inner dimension `width`.
__device__ __forceinline__ void gram_tile_tc(
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> acc[2], __nv_bfloat16 (*sI)[TLD],
    __nv_bfloat16 (*sJ)[TLD], const uint16_t *X, int T, int width, int ti, int tj) {
    using namespace nvcuda;
    int w = threadIdx.x >> 5, r = w >> 1, c0 = (w & 1) * 2;
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    for (int k0 = 0; k0 < width; k0 += TK) {
        __syncthreads();
        for (int e = threadIdx.x; e < TT * TK; e += blockDim.x) {
            int row = e / TK, col = e % TK, k = k0 + col;
            uint16_t vi = (ti + row < T && k < width) ? X[(int64_t)(ti + row) * width + k] : (uint16_t)0;
            uint16_t vj = (tj + row < T && k < width) ? X[(int64_t)(tj + row) * width + k] : (uint16_t)0;
            sI[row][col] = __ushort_as_bfloat16(vi);
            sJ[row][col] = __ushort_as_bfloat16(vj);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
            wmma::load_matrix_sync(fa, &sI[16 * r][kk], TLD);
#pragma unroll
            for (int q = 0; q < 2; q++) {
                /* B[k][n] = X[tj + n][k]: the J rows read column-major */
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
                wmma::load_matrix_sync(fb, &sJ[16 * (c0 + q)][kk], TLD);
                wmma::mma_sync(acc[q], fa, fb, acc[q]);
            }
        }
    }
}
// Block (pair, b), 256 threads: partial[b, pair] = weight * sum over the 64x64 tile of (A A^T)(G G^T).
// Both accumulators have the same fragment type and tile position, so their elements pair up.
__global__ void __launch_bounds__(256) k_ghost_tiles_tc(double *partial, const uint16_t *A, const uint16_t *G, int T,
                                                        int d, int p, int64_t nt, int64_t npairs) {
    using namespace nvcuda;
    __shared__ __align__(32) __nv_bfloat16 sI[TT][TLD];
    __shared__ __align__(32) __nv_bfloat16 sJ[TT][TLD];
    __shared__ double sh[33];
    int64_t k = blockIdx.x, b = blockIdx.y;
    int i, j;
    cu_ghost_pair(k, nt, &i, &j);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> ga[2], gg[2];
    gram_tile_tc(ga, sI, sJ, A + b * (int64_t)T * d, T, d, i * TT, j * TT);
    gram_tile_tc(gg, sI, sJ, G + b * (int64_t)T * p, T, p, i * TT, j * TT);
    double s = 0.0;
#pragma unroll
    for (int q = 0; q < 2; q++)
        for (int e = 0; e < ga[q].num_elements; e++) s += (double)ga[q].x[e] * (double)gg[q].x[e];
    s = cu_block_sum(s, sh);
    if (threadIdx.x == 0) partial[b * npairs + k] = (i == j ? 1.0 : 2.0) * s;
}

extern "C" dp_status cu_dp_ghost_sqnorm_bf16(cu_ctx *ctx, double *sq, const uint16_t *A, const uint16_t *G,
                                             int accumulate, int B, int T, int d, int p) {
    CU_ARG(B >= 0 && B <= CU_MAX_GRID && T > 0 && d > 0 && p > 0,
           "cu_dp_ghost_sqnorm_bf16: bad sizes B=%d T=%d d=%d p=%d", B, T, d, p);
    if (B == 0) return DP_OK;
    int64_t nt = cu_ghost_ntile_tc(T), np = cu_ghost_npairs_tc(T);
    CU_ARG(np <= 0x7fffffff, "cu_dp_ghost_sqnorm_bf16: T=%d too long", T);
    void *part;
    DP_TRY(cu_ctx_scratch_(ctx, &part, (size_t)(np * B) * sizeof(double), CU_SLOT_PARTIAL));
    k_ghost_tiles_tc<<<dim3((unsigned)np, B), 256, 0, cu_ctx_stream_(ctx)>>>((double *)part, A, G, T, d, p, nt, np);
    CU_CHECK_LAUNCH(k_ghost_tiles_tc);
    return cu_rowsum_f64_(ctx, sq, (const double *)part, np, B, accumulate);
}

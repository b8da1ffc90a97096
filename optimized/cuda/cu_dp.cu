// optimized/cuda/cu_dp.cu — the DP clipping kernels of the CUDA backend (f32 and f64;
// docs/cuda.md "DP kernels"): hierarchical row squared norms (no atomics), the tiled ghost
// norm, the host's clip functions, the clipped accumulation, book-keeping's reweighted
// GEMM, and the fused per-layer clipping (fused_clip_accum / fused_sqnorm: per chunk one
// strided-batched GEMM of per-example blocks, their norms, factors and the clipped sum).
// All pointers are device pointers. Every reduction has a fixed order.
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

/* ---------------- hierarchical squared norms ---------------- */
// Level 1: block (blk, b) sums x[b, blk*CHUNK .. +CHUNK)^2 in double -> partial[b, blk].
template <typename R>
__global__ void k_sqnorm_partial(double *partial, const R *x, int64_t n, int64_t nblk) {
    __shared__ double sh[33];
    int64_t blk = blockIdx.x, b = blockIdx.y;
    const R *xr = x + b * n;
    int64_t lo = blk * CU_SQNORM_CHUNK, hi = lo + CU_SQNORM_CHUNK < n ? lo + CU_SQNORM_CHUNK : n;
    double s = 0.0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        double v = xr[i];
        s += v * v;
    }
    s = cu_block_sum(s, sh);
    if (threadIdx.x == 0) partial[b * nblk + blk] = s;
}
// Level 2: one block per row b: out[b] (+)= sum_k partial[b, k] (fixed tree order).
__global__ void k_rowsum_f64(double *out, const double *partial, int64_t m, int accumulate) {
    __shared__ double sh[33];
    int64_t b = blockIdx.x;
    double s = 0.0;
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) s += partial[b * m + k];
    s = cu_block_sum(s, sh);
    if (threadIdx.x == 0) out[b] = accumulate ? out[b] + s : s;
}

template <typename R> dp_status cu_rows_sqnorm_t(cu_ctx *ctx, double *sq, const R *x, int64_t n, int nb) {
    CU_ARG(n >= 0 && nb >= 0 && nb <= CU_MAX_GRID, "cu_dp_rows_sqnorm: bad sizes n=%lld nb=%d", (long long)n, nb);
    if (nb == 0) return DP_OK;
    int64_t nblk = cu_sqnorm_nblk(n);
    CU_ARG(nblk <= 0x7fffffff, "cu_dp_rows_sqnorm: row of %lld elements too long", (long long)n);
    void *part;
    DP_TRY(cu_ctx_scratch_(ctx, &part, (size_t)(nblk * nb) * sizeof(double), CU_SLOT_PARTIAL));
    cudaStream_t s = cu_ctx_stream_(ctx);
    if (n == 0) {
        CU_CHECK(cudaMemsetAsync(sq, 0, (size_t)nb * sizeof(double), s));
        return DP_OK;
    }
    k_sqnorm_partial<R><<<dim3((unsigned)nblk, nb), CU_BLOCK, 0, s>>>((double *)part, x, n, nblk);
    CU_CHECK_LAUNCH(k_sqnorm_partial);
    k_rowsum_f64<<<nb, CU_BLOCK, 0, s>>>(sq, (const double *)part, nblk, 0);
    CU_CHECK_LAUNCH(k_rowsum_f64);
    return DP_OK;
}

dp_status cu_rowsum_f64_(cu_ctx *ctx, double *out, const double *partial, int64_t m, int rows, int accumulate) {
    k_rowsum_f64<<<rows, CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(out, partial, m, accumulate);
    CU_CHECK_LAUNCH(k_rowsum_f64);
    return DP_OK;
}
/* sq[b] += (R) sqd[b] */
template <typename R> __global__ void k_add_sq(R *sq, const double *sqd, int64_t B) { CU_FOR_I(B) sq[i] = rn_add(sq[i], (R)sqd[i]); }
template <typename R> dp_status cu_add_sq_t(cu_ctx *ctx, R *sq, const double *sqd, int64_t B) {
    k_add_sq<R><<<cu_grid_1d(B, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(sq, sqd, B);
    CU_CHECK_LAUNCH(k_add_sq);
    return DP_OK;
}

/* ---------------- clip factors (cu_clipfn: the host backend's clip functions) ---------------- */
template <typename R, typename S>
__global__ void k_clip_factors_fn(R *c, const S *sq, double C, int automatic, double gamma, int64_t B) {
    CU_FOR_I(B) c[i] = cu_clipfn<R>((double)sq[i], C, automatic, gamma);
}
template <typename R, typename S>
dp_status cu_clip_factors_t(cu_ctx *ctx, R *c, const S *sq, double C, int automatic, double gamma, int64_t B) {
    if (!B) return DP_OK;
    k_clip_factors_fn<R, S><<<cu_grid_1d(B, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(c, sq, C, automatic, gamma, B);
    CU_CHECK_LAUNCH(k_clip_factors_fn);
    return DP_OK;
}

/* ---------------- clipped accumulation ---------------- */
// sum[j] = (((sum[j] + c0 g0j) + c1 g1j) + ...), b in order (the host's order)
template <typename R> __global__ void k_clip_accum(R *sum, const R *g, const R *c, int64_t B, int64_t n) {
    CU_FOR_I(n) {
        R acc = sum[i];
        for (int64_t b = 0; b < B; b++) acc = rn_add(acc, rn_mul(c[b], g[b * n + i]));
        sum[i] = acc;
    }
}
template <typename R> dp_status cu_clip_accum_t(cu_ctx *ctx, R *sum, const R *g, const R *c, int64_t B, int64_t n) {
    k_clip_accum<R><<<cu_grid_1d(n, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(sum, g, c, B, n);
    CU_CHECK_LAUNCH(k_clip_accum);
    return DP_OK;
}

/* ---------------- fused per-layer clipping: one chunk's factors and clipped sum ---------------- */
// per example of the chunk: sq = (R)||g_b||^2 (+ extra), c = clipfn(sq); outputs when asked
template <typename R>
__global__ void k_chunk_factors(R *cs, R *sq_out, R *c_out, const double *sqd, const R *extra, double C, int automatic,
                                double gamma, int64_t nb) {
    CU_FOR_I(nb) {
        R sq = (R)sqd[i];
        if (extra) sq = rn_add(sq, extra[i]);
        R c = cu_clipfn<R>((double)sq, C, automatic, gamma);
        cs[i] = c;
        if (sq_out) sq_out[i] = sq;
        if (c_out) c_out[i] = c;
    }
}
// dW[j] = ((dW[j] + c0 g0j) + c1 g1j) + ... over the chunk (the host's per-example order).
// A dropped example (c_b = 0: an infinite norm) is skipped, never multiplied: its block may
// hold inf or NaN, and 0 * inf is NaN (issue 23's defect of the former bf16 kernel).
template <typename R> __global__ void k_chunk_accum(R *dW, const R *ws, const R *cs, int64_t nb, int64_t n) {
    CU_FOR_I(n) {
        R acc = dW[i];
        for (int64_t b = 0; b < nb; b++) {
            const R c = cs[b];
            if (c != (R)0) acc = rn_add(acc, rn_mul(c, ws[b * n + i]));
        }
        dW[i] = acc;
    }
}
template <typename R>
dp_status cu_fused_chunk_t(cu_ctx *ctx, R *dW, R *sq_out, R *c_out, const double *sqd, const R *ws, const R *extra,
                           double C, int automatic, double gamma, int64_t nb, int64_t n) {
    void *cs;
    DP_TRY(cu_ctx_scratch_(ctx, &cs, (size_t)nb * sizeof(R), CU_SLOT_C));
    k_chunk_factors<R><<<cu_grid_1d(nb, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>((R *)cs, sq_out, c_out, sqd, extra, C,
                                                                                automatic, gamma, nb);
    CU_CHECK_LAUNCH(k_chunk_factors);
    k_chunk_accum<R><<<cu_grid_1d(n, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(dW, ws, (const R *)cs, nb, n);
    CU_CHECK_LAUNCH(k_chunk_accum);
    return DP_OK;
}

/* ---------------- (2) ghost norm, tiled ---------------- */
#define GT CU_GHOST_TILE
#define GK CU_GHOST_KCHUNK
// Accumulate the 32x32 Gram tile X[ti..ti+32) . X[tj..tj+32)^T over k < width into acc[4]
// (entries (r, c0..c0+3) of thread tid: r = tid/8, c0 = 4 (tid%8)). X = [T, width] of example b.
template <typename R>
__device__ __forceinline__ void gram_tile(R acc[4], R (*sI)[GK + 1], R (*sJ)[GK + 1], const R *X, int T, int width, int ti,
                                          int tj) {
    int tid = threadIdx.x, r = tid >> 3, c0 = (tid & 7) * 4;
    for (int k0 = 0; k0 < width; k0 += GK) {
        __syncthreads();
        for (int e = tid; e < GT * GK; e += blockDim.x) {
            int row = e / GK, col = e % GK;
            int k = k0 + col;
            sI[row][col] = (ti + row < T && k < width) ? X[(int64_t)(ti + row) * width + k] : (R)0;
            sJ[row][col] = (tj + row < T && k < width) ? X[(int64_t)(tj + row) * width + k] : (R)0;
        }
        __syncthreads();
#pragma unroll 4
        for (int k = 0; k < GK; k++) {
            R a = sI[r][k];
#pragma unroll
            for (int q = 0; q < 4; q++) acc[q] += a * sJ[c0 + q][k];
        }
    }
}
// Block (pair k, example b): partial[b, k] = w * sum_{tile} (A A^T)_{ts} (G G^T)_{ts}, w = 1 on the
// diagonal tiles, 2 off it (both Grams are symmetric). Needs blockDim.x = 256.
template <typename R>
__global__ void __launch_bounds__(256) k_ghost_tiles(double *partial, const R *A, const R *G, int T, int d, int p,
                                                     int64_t nt, int64_t npairs) {
    __shared__ R sI[GT][GK + 1], sJ[GT][GK + 1];
    __shared__ double sh[33];
    int64_t k = blockIdx.x, b = blockIdx.y;
    int i, j;
    cu_ghost_pair(k, nt, &i, &j);
    int ti = i * GT, tj = j * GT;
    R ga[4] = {0, 0, 0, 0}, gg[4] = {0, 0, 0, 0};
    gram_tile(ga, sI, sJ, A + b * (int64_t)T * d, T, d, ti, tj);
    gram_tile(gg, sI, sJ, G + b * (int64_t)T * p, T, p, ti, tj);
    double s = 0.0;
#pragma unroll
    for (int q = 0; q < 4; q++) s += (double)ga[q] * (double)gg[q];
    s = cu_block_sum(s, sh);
    if (threadIdx.x == 0) partial[b * npairs + k] = (i == j ? 1.0 : 2.0) * s;
}

template <typename R>
dp_status cu_ghost_sqnorm_t(cu_ctx *ctx, double *sq, const R *A, const R *G, int accumulate, int B, int T, int d, int p) {
    CU_ARG(B >= 0 && B <= CU_MAX_GRID && T > 0 && d > 0 && p > 0, "cu_dp_ghost_sqnorm: bad sizes B=%d T=%d d=%d p=%d", B,
           T, d, p);
    if (B == 0) return DP_OK;
    int64_t nt = cu_ghost_ntile(T), np = cu_ghost_npairs(T);
    CU_ARG(np <= 0x7fffffff, "cu_dp_ghost_sqnorm: T=%d too long", T);
    void *part;
    DP_TRY(cu_ctx_scratch_(ctx, &part, (size_t)(np * B) * sizeof(double), CU_SLOT_PARTIAL));
    k_ghost_tiles<R><<<dim3((unsigned)np, B), 256, 0, cu_ctx_stream_(ctx)>>>((double *)part, A, G, T, d, p, nt, np);
    CU_CHECK_LAUNCH(k_ghost_tiles);
    return cu_rowsum_f64_(ctx, sq, (const double *)part, np, B, accumulate);
}
/* ---------------- (3) book-keeping ---------------- */
// Gs[b*T + t, :] = c[b] * G[b, t, :]
template <typename R> __global__ void k_scale_rows(R *Gs, const R *G, const R *c, int T, int p, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        Gs[i] = c[i / ((int64_t)T * p)] * G[i];
}
template <typename R>
dp_status cu_bk_wgrad_t(cu_ctx *ctx, R *grad, R *Gs, const R *A, const R *G, const R *c, int B, int T, int d, int p) {
    CU_ARG(B >= 0 && T > 0 && d > 0 && p > 0 && (int64_t)B * T <= 0x7fffffff, "cu_dp_bk_wgrad: bad sizes B=%d T=%d d=%d p=%d",
           B, T, d, p);
    if (B == 0) return DP_OK;
    int64_t n = (int64_t)B * T * p;
    k_scale_rows<R><<<cu_grid_1d(n, 4), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(Gs, G, c, T, p, n);
    CU_CHECK_LAUNCH(k_scale_rows);
    /* grad[p,d] += Gs^T [p, B*T] x A [B*T, d] */
    return cu_gemm_t<R>(ctx, grad, Gs, A, 1, 0, 1.0, 1.0, p, d, B * T, 0, 0, 0, 1);
}
#define INST(R)                                                                                                        \
    template dp_status cu_rows_sqnorm_t<R>(cu_ctx *, double *, const R *, int64_t, int);                               \
    template dp_status cu_add_sq_t<R>(cu_ctx *, R *, const double *, int64_t);                                         \
    template dp_status cu_ghost_sqnorm_t<R>(cu_ctx *, double *, const R *, const R *, int, int, int, int, int);        \
    template dp_status cu_clip_factors_t<R, R>(cu_ctx *, R *, const R *, double, int, double, int64_t);                \
    template dp_status cu_clip_accum_t<R>(cu_ctx *, R *, const R *, const R *, int64_t, int64_t);                      \
    template dp_status cu_bk_wgrad_t<R>(cu_ctx *, R *, R *, const R *, const R *, const R *, int, int, int, int);      \
    template dp_status cu_fused_chunk_t<R>(cu_ctx *, R *, R *, R *, const double *, const R *, const R *, double, int, \
                                           double, int64_t, int64_t);
CU_INST2(INST)
template dp_status cu_clip_factors_t<float, double>(cu_ctx *, float *, const double *, double, int, double, int64_t);

/* ---------------- the f32 C API (cu_api.h) ---------------- */
extern "C" dp_status cu_dp_rows_sqnorm(cu_ctx *ctx, double *sq, const float *x, int64_t n, int nb) {
    return cu_rows_sqnorm_t<float>(ctx, sq, x, n, nb);
}
extern "C" dp_status cu_dp_ghost_sqnorm(cu_ctx *ctx, double *sq, const float *A, const float *G, int accumulate, int B,
                                        int T, int d, int p) {
    return cu_ghost_sqnorm_t<float>(ctx, sq, A, G, accumulate, B, T, d, p);
}
extern "C" dp_status cu_dp_clip_factors(cu_ctx *ctx, float *c, const double *sq, double clip, int B) {
    if (!(clip > 0.0) || !isfinite(clip))
        return dp_error(DP_ERR_INVALID, "cu_dp_clip_factors: clip norm must be finite and > 0 (got %g)", clip);
    CU_ARG(B >= 0, "cu_dp_clip_factors: negative batch %d", B);
    return cu_clip_factors_t<float, double>(ctx, c, sq, clip, 0, 0.0, B);
}
extern "C" dp_status cu_dp_bk_wgrad(cu_ctx *ctx, float *grad, float *Gs, const float *A, const float *G, const float *c,
                                    int B, int T, int d, int p) {
    return cu_bk_wgrad_t<float>(ctx, grad, Gs, A, G, c, B, T, d, p);
}

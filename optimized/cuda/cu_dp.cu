// optimized/cuda/cu_dp.cu — the DP kernels (docs/cuda.md):
//   row squared norms (hierarchical, no atomics), the fused per-layer DP weight
//   gradient, the tiled ghost norm, book-keeping (clip factors + one reweighted
//   GEMM), and in-kernel Philox Gaussian noise matching the CPU streams.
// All pointers are device pointers. Every reduction has a fixed order.
#include <cuda_bf16.h>
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_noise.h"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

/* scratch slots of the context used here */
enum { SLOT_WS = 0, SLOT_PARTIAL = 1, SLOT_SQ = 2, SLOT_C = 3 };

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
    DP_TRY(cu_ctx_scratch_(ctx, &part, (size_t)(nblk * nb) * sizeof(double), SLOT_PARTIAL));
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
template dp_status cu_rows_sqnorm_t<float>(cu_ctx *, double *, const float *, int64_t, int);
template dp_status cu_rows_sqnorm_t<double>(cu_ctx *, double *, const double *, int64_t, int);
extern "C" dp_status cu_dp_rows_sqnorm(cu_ctx *ctx, double *sq, const float *x, int64_t n, int nb) {
    return cu_rows_sqnorm_t<float>(ctx, sq, x, n, nb);
}

/* ---------------- clip factors ---------------- */
__global__ void k_clip_factors(float *c, const double *sq, double clip, int B) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) c[b] = (float)cu_clip_factor(sq[b], clip);
}
static dp_status check_clip(const char *fn, double clip) {
    if (!(clip > 0.0) || !isfinite(clip)) return dp_error(DP_ERR_INVALID, "%s: clip norm must be finite and > 0 (got %g)", fn, clip);
    return DP_OK;
}
extern "C" dp_status cu_dp_clip_factors(cu_ctx *ctx, float *c, const double *sq, double clip, int B) {
    DP_TRY(check_clip("cu_dp_clip_factors", clip));
    CU_ARG(B >= 0, "cu_dp_clip_factors: negative batch %d", B);
    if (B == 0) return DP_OK;
    k_clip_factors<<<(unsigned)cu_ceil_div(B, CU_BLOCK), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(c, sq, clip, B);
    CU_CHECK_LAUNCH(k_clip_factors);
    return DP_OK;
}

/* ---------------- (1) fused per-layer DP weight gradient ---------------- */
// grad[j] += sum_{b < bc, c[b] != 0} c[b] * ws[b, j]  (f32, b in increasing order), j < n.
// A dropped example (c[b] = 0: its norm was not finite) is skipped, never multiplied: its
// block may hold inf or NaN, and 0 * inf is NaN.
__global__ void k_clip_accumulate(float *grad, const float *ws, const float *c, int bc, int64_t n) {
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < bc; b++) {
            const float cb = __ldg(&c[b]);
            if (cb != 0.0f) s += cb * ws[(int64_t)b * n + j];
        }
        grad[j] += s;
    }
}

extern "C" dp_status cu_dp_fused_wgrad_bf16(cu_ctx *ctx, float *grad, double *sqnorm, const uint16_t *A,
                                            const uint16_t *G, double clip, int B, int T, int d, int p, int chunk) {
    DP_TRY(check_clip("cu_dp_fused_wgrad_bf16", clip));
    CU_ARG(B >= 0 && T > 0 && d > 0 && p > 0 && chunk >= 0, "cu_dp_fused_wgrad_bf16: bad sizes B=%d T=%d d=%d p=%d chunk=%d",
           B, T, d, p, chunk);
    if (B == 0) return DP_OK;
    int64_t n = (int64_t)p * d;
    int bc = chunk > 0 ? (chunk < B ? chunk : B) : cu_fused_chunk(CU_FUSED_WS_BYTES, B, p, d);
    void *ws, *sqs, *cs;
    DP_TRY(cu_ctx_scratch_(ctx, &ws, (size_t)(n * bc) * sizeof(float), SLOT_WS));
    DP_TRY(cu_ctx_scratch_(ctx, &sqs, (size_t)B * sizeof(double), SLOT_SQ));
    DP_TRY(cu_ctx_scratch_(ctx, &cs, (size_t)B * sizeof(float), SLOT_C));
    for (int b0 = 0; b0 < B; b0 += bc) {
        int nb = B - b0 < bc ? B - b0 : bc;
        /* per-example tiles g_b[p,d] = G_b^T A_b for the chunk: one strided-batched GEMM */
        DP_TRY(cu_gemm_bf16_batched(ctx, (float *)ws, G + (int64_t)b0 * T * p, A + (int64_t)b0 * T * d, 1, 0, 1.0f,
                                    0.0f, p, d, T, (int64_t)T * p, (int64_t)T * d, n, nb));
        /* hierarchical squared norms of the chunk, then its clip factors */
        double *sqc = (double *)sqs + b0;
        DP_TRY(cu_dp_rows_sqnorm(ctx, sqc, (const float *)ws, n, nb));
        DP_TRY(cu_dp_clip_factors(ctx, (float *)cs + b0, sqc, clip, nb));
        /* clipped accumulation: one read of the chunk, one read-modify-write of grad */
        k_clip_accumulate<<<cu_grid_1d(n, 4), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(grad, (const float *)ws,
                                                                                    (const float *)cs + b0, nb, n);
        CU_CHECK_LAUNCH(k_clip_accumulate);
    }
    if (sqnorm)
        CU_CHECK(cudaMemcpyAsync(sqnorm, sqs, (size_t)B * sizeof(double), cudaMemcpyDeviceToDevice, cu_ctx_stream_(ctx)));
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
    DP_TRY(cu_ctx_scratch_(ctx, &part, (size_t)(np * B) * sizeof(double), SLOT_PARTIAL));
    k_ghost_tiles<R><<<dim3((unsigned)np, B), 256, 0, cu_ctx_stream_(ctx)>>>((double *)part, A, G, T, d, p, nt, np);
    CU_CHECK_LAUNCH(k_ghost_tiles);
    k_rowsum_f64<<<B, CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(sq, (const double *)part, np, accumulate);
    CU_CHECK_LAUNCH(k_rowsum_f64);
    return DP_OK;
}
template dp_status cu_ghost_sqnorm_t<float>(cu_ctx *, double *, const float *, const float *, int, int, int, int, int);
template dp_status cu_ghost_sqnorm_t<double>(cu_ctx *, double *, const double *, const double *, int, int, int, int, int);
extern "C" dp_status cu_dp_ghost_sqnorm(cu_ctx *ctx, double *sq, const float *A, const float *G, int accumulate, int B,
                                        int T, int d, int p) {
    return cu_ghost_sqnorm_t<float>(ctx, sq, A, G, accumulate, B, T, d, p);
}

/* ---------------- (3) book-keeping ---------------- */
// Gs[b*T + t, :] = c[b] * G[b, t, :]
template <typename R> __global__ void k_scale_rows(R *Gs, const R *G, const R *c, int T, int p, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        Gs[i] = c[i / ((int64_t)T * p)] * G[i];
}
__global__ void k_scale_rows_bf16(uint16_t *Gs, const uint16_t *G, const float *c, int T, int p, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float g = __uint_as_float((uint32_t)G[i] << 16);
        __nv_bfloat16 h = __float2bfloat16_rn(c[i / ((int64_t)T * p)] * g);
        Gs[i] = *reinterpret_cast<uint16_t *>(&h);
    }
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
template dp_status cu_bk_wgrad_t<float>(cu_ctx *, float *, float *, const float *, const float *, const float *, int, int,
                                        int, int);
template dp_status cu_bk_wgrad_t<double>(cu_ctx *, double *, double *, const double *, const double *, const double *,
                                         int, int, int, int);
extern "C" dp_status cu_dp_bk_wgrad(cu_ctx *ctx, float *grad, float *Gs, const float *A, const float *G, const float *c,
                                    int B, int T, int d, int p) {
    return cu_bk_wgrad_t<float>(ctx, grad, Gs, A, G, c, B, T, d, p);
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

/* ---------------- (4) Philox Gaussian noise ---------------- */
// Work item u = Philox block offset/2 + u; mode 0: x += std z; 1: out = (x + std z) * scale; 2: out = std z.
/* x + std z rounded per operation: float as cu_noise_apply; double keeps the double sum */
__device__ __forceinline__ float cu_noise_apply_t(float x, double std, double z) { return cu_noise_apply(x, std, z); }
__device__ __forceinline__ double cu_noise_apply_t(double x, double std, double z) { return __dadd_rn(x, __dmul_rn(std, z)); }
template <typename R, int MODE>
__global__ void k_noise(R *out, const R *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset,
                        double std, double scale, int64_t n, int64_t nblocks) {
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < nblocks; u += (int64_t)gridDim.x * blockDim.x) {
        int64_t k0, k1;
        uint64_t j;
        cu_noise_item(&k0, &k1, &j, offset, n, u);
        double z0, z1;
        cu_noise_pair(&z0, &z1, key, step, lane, j);
        if (MODE == 0) {
            if (k0 >= 0) out[k0] = (R)cu_noise_apply_t(out[k0], std, z0);
            if (k1 >= 0) out[k1] = (R)cu_noise_apply_t(out[k1], std, z1);
        } else if (MODE == 1) {
            if (k0 >= 0) out[k0] = cu_noise_apply_scaled(x[k0], std, z0, scale);
            if (k1 >= 0) out[k1] = cu_noise_apply_scaled(x[k1], std, z1, scale);
        } else {
            if (k0 >= 0) out[k0] = cu_noise_apply(0.0f, std, z0);
            if (k1 >= 0) out[k1] = cu_noise_apply(0.0f, std, z1);
        }
    }
}

static dp_status noise_args(const char *fn, uint32_t lane, double std, double scale, int64_t n, uint64_t offset) {
    if (lane >= (1u << 24)) return dp_error(DP_ERR_INVALID, "%s: lane %u must be < 2^24", fn, lane);
    if (!(std >= 0.0) || !isfinite(std)) return dp_error(DP_ERR_INVALID, "%s: noise std must be finite and >= 0 (got %g)", fn, std);
    if (!isfinite(scale)) return dp_error(DP_ERR_INVALID, "%s: scale must be finite (got %g)", fn, scale);
    if (n < 0) return dp_error(DP_ERR_INVALID, "%s: negative size %lld", fn, (long long)n);
    if (offset > ((uint64_t)1 << 62)) return dp_error(DP_ERR_INVALID, "%s: element offset %llu too large", fn, (unsigned long long)offset);
    return DP_OK;
}

/* Check the arguments, then launch k_noise<R, MODE> over the Philox blocks that cover
 * elements [offset, offset + n): MODE 0 adds noise in place (out == x), 1 writes
 * scale * x + noise to out, 2 fills out with noise. */
template <typename R, int MODE>
static dp_status noise_launch(cu_ctx *ctx, const char *fn, R *out, const R *x, uint64_t key, uint32_t step,
                              uint32_t lane, uint64_t offset, double std, double scale, int64_t n) {
    DP_TRY(noise_args(fn, lane, std, scale, n, offset));
    int64_t nbk = cu_noise_nblocks(offset, n);
    if (nbk == 0) return DP_OK;
    k_noise<R, MODE><<<cu_grid_1d(nbk, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(out, x, key, step, lane, offset, std,
                                                                              scale, n, nbk);
    CU_CHECK_LAUNCH(k_noise);
    return DP_OK;
}
extern "C" dp_status cu_dp_noise_add(cu_ctx *ctx, float *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset,
                                     double std, int64_t n) {
    return noise_launch<float, 0>(ctx, "cu_dp_noise_add", x, x, key, step, lane, offset, std, 1.0, n);
}
template <typename R>
dp_status cu_noise_add_t(cu_ctx *ctx, R *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset, double std, int64_t n) {
    return noise_launch<R, 0>(ctx, "cu_dp_noise_add", x, x, key, step, lane, offset, std, 1.0, n);
}
template dp_status cu_noise_add_t<float>(cu_ctx *, float *, uint64_t, uint32_t, uint32_t, uint64_t, double, int64_t);
template dp_status cu_noise_add_t<double>(cu_ctx *, double *, uint64_t, uint32_t, uint32_t, uint64_t, double, int64_t);
extern "C" dp_status cu_dp_noise_scale(cu_ctx *ctx, float *out, const float *x, uint64_t key, uint32_t step,
                                       uint32_t lane, uint64_t offset, double std, double scale, int64_t n) {
    return noise_launch<float, 1>(ctx, "cu_dp_noise_scale", out, x, key, step, lane, offset, std, scale, n);
}
extern "C" dp_status cu_dp_noise_fill(cu_ctx *ctx, float *z, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset,
                                      double std, int64_t n) {
    return noise_launch<float, 2>(ctx, "cu_dp_noise_fill", z, z, key, step, lane, offset, std, 1.0, n);
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
    DP_TRY(cu_ctx_scratch_(ctx, &part, (size_t)(np * B) * sizeof(double), SLOT_PARTIAL));
    k_ghost_tiles_tc<<<dim3((unsigned)np, B), 256, 0, cu_ctx_stream_(ctx)>>>((double *)part, A, G, T, d, p, nt, np);
    CU_CHECK_LAUNCH(k_ghost_tiles_tc);
    k_rowsum_f64<<<B, CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(sq, (const double *)part, np, accumulate);
    CU_CHECK_LAUNCH(k_rowsum_f64);
    return DP_OK;
}

// optimized/cuda/cu_fused.cuh — the single-pass fused per-layer clipping kernel (FlashDP's
// single-pass design; docs/cuda.md "(1b) Single pass"): one cooperative launch computes,
// for every example b in order, the per-example gradient g_b = G_b^T A_b tile by tile in
// registers, reduces its squared norm hierarchically (thread -> CTA by the block tree ->
// grid: one double per CTA, a grid-wide barrier by atomics, then every CTA sums the
// partials in CTA order), and adds c_b g_b to the dW tiles it keeps in registers, so that no
// per-example block ever reaches device memory. A header (not a .cu file) so that the
// emulation's negative control (optimized/tests/test_cuda_emu_fused.cu) can instantiate the
// same kernel with a broken barrier policy; production code instantiates it only with
// cu_grid_barrier (cu_fused.cu).
//
// Shapes: A[B,T,d], G[B,T,p] (row-major), dW[p,d]; R = float or double.
// Grid: nblk CTAs of CU_FS_THREADS threads, all resident at once (cudaLaunchCooperativeKernel);
// CTA k owns the 32 x 32 tiles k, k + nblk, ... (at most CU_FS_MAXT) of dW; thread t owns
// row t / 4 and the 8 columns 8 (t % 4) .. + 8 of each of its CTA's tiles.
#ifndef CU_FUSED_CUH
#define CU_FUSED_CUH

#include <stdint.h>

#include "optimized/cuda/cu_reduce.cuh"

#define CU_FS_THREADS 128 /* threads per CTA: 32 rows x 4 groups of 8 columns */
#define CU_FS_TILE 32     /* dW tile side */
#define CU_FS_TK 32       /* rows of A and G staged in shared memory per step */
#define CU_FS_MAXT 4      /* tiles per CTA: registers 2 x 8 x CU_FS_MAXT elements per thread */

/* The grid-wide barrier of example b, called by thread 0 of each CTA after its partial is
 * written: the fence makes the partial visible device-wide before the arrival is counted;
 * the counter of example b reaches nblk when every CTA has arrived (counters are zeroed
 * before the launch, one per example, so none is ever reset while a CTA may read it); the
 * second fence orders the partials' reads after the observed count. The counter is read
 * with an atomic (never a cached plain load). */
struct cu_grid_barrier {
    static __device__ __forceinline__ void arrive_wait(unsigned int *count, unsigned int nblk) {
        __threadfence();
        atomicAdd(count, 1u);
        while (atomicAdd(count, 0u) < nblk) __nanosleep(64);
        __threadfence();
    }
};

template <typename R, class Barrier>
__global__ void __launch_bounds__(CU_FS_THREADS)
    k_fused_single(R *dW, R *sq_out, R *c_out, double *partial, unsigned int *count, const R *A, const R *G,
                   const R *extra, double C, int automatic, double gamma, int B, int T, int d, int p) {
    __shared__ R sG[CU_FS_TK][CU_FS_TILE], sA[CU_FS_TK][CU_FS_TILE];
    __shared__ double sh[33];
    const int tid = threadIdx.x, row = tid >> 2, c0 = (tid & 3) * 8;
    const int tj = (d + CU_FS_TILE - 1) / CU_FS_TILE, ntiles = ((p + CU_FS_TILE - 1) / CU_FS_TILE) * tj;
    const int nblk = (int)gridDim.x;
    R acc[CU_FS_MAXT][8], g[CU_FS_MAXT][8];
    for (int s = 0; s < CU_FS_MAXT; s++) {
        const int tile = (int)blockIdx.x + s * nblk, i = (tile / tj) * CU_FS_TILE + row;
        for (int q = 0; q < 8; q++) {
            const int j = (tile % tj) * CU_FS_TILE + c0 + q;
            acc[s][q] = tile < ntiles && i < p && j < d ? dW[(int64_t)i * d + j] : (R)0;
        }
    }
    for (int b = 0; b < B; b++) {
        /* 1. this CTA's tiles of g_b, each element a sum over t in order */
        double s2 = 0.0;
        for (int s = 0; s < CU_FS_MAXT; s++) {
            const int tile = (int)blockIdx.x + s * nblk; /* the same for every thread of the CTA */
            if (tile >= ntiles) break;
            const int i0 = (tile / tj) * CU_FS_TILE, j0 = (tile % tj) * CU_FS_TILE;
            R v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int t0 = 0; t0 < T; t0 += CU_FS_TK) {
                __syncthreads(); /* the previous step's reads of sG, sA are done */
                for (int e = tid; e < CU_FS_TK * CU_FS_TILE; e += blockDim.x) {
                    const int tt = e / CU_FS_TILE, col = e % CU_FS_TILE, t = t0 + tt;
                    const int64_t r = (int64_t)b * T + t;
                    sG[tt][col] = t < T && i0 + col < p ? G[r * p + i0 + col] : (R)0;
                    sA[tt][col] = t < T && j0 + col < d ? A[r * d + j0 + col] : (R)0;
                }
                __syncthreads();
                const int tn = T - t0 < CU_FS_TK ? T - t0 : CU_FS_TK;
                for (int tt = 0; tt < tn; tt++) {
                    const R gi = sG[tt][row];
                    for (int q = 0; q < 8; q++) v[q] = rn_add(v[q], rn_mul(gi, sA[tt][c0 + q]));
                }
            }
            for (int q = 0; q < 8; q++) { /* padding elements are exactly 0 */
                g[s][q] = v[q];
                s2 += (double)v[q] * (double)v[q];
            }
        }
        /* read before this CTA arrives: extra may alias sq_out, which CTA 0 writes after the barrier */
        const R ex = extra ? extra[b] : (R)0;
        /* 2. thread -> CTA: the block tree; CTA -> grid: one partial per CTA, the barrier, and
         * every CTA sums the nblk partials in CTA order (the same double in every CTA) */
        s2 = cu_block_sum(s2, sh);
        if (tid == 0) {
            partial[(int64_t)b * nblk + blockIdx.x] = s2;
            Barrier::arrive_wait(count + b, (unsigned int)nblk);
        }
        __syncthreads();
        double sqd = 0.0;
        for (int k = 0; k < nblk; k++) sqd += ((volatile const double *)partial)[(int64_t)b * nblk + k];
        R sq = (R)sqd;
        if (extra) sq = rn_add(sq, ex);
        const R c = cu_clipfn<R>((double)sq, C, automatic, gamma);
        if (blockIdx.x == 0 && tid == 0) {
            if (sq_out) sq_out[b] = sq;
            if (c_out) c_out[b] = c;
        }
        /* 3. dW += c_b g_b in registers (the host's per-element order); a dropped example
         * (c_b = 0: an infinite norm) is skipped, never multiplied */
        if (c != (R)0)
            for (int s = 0; s < CU_FS_MAXT; s++)
                for (int q = 0; q < 8; q++) acc[s][q] = rn_add(acc[s][q], rn_mul(c, g[s][q]));
    }
    for (int s = 0; s < CU_FS_MAXT; s++) {
        const int tile = (int)blockIdx.x + s * nblk, i = (tile / tj) * CU_FS_TILE + row;
        if (tile >= ntiles || i >= p) continue;
        for (int q = 0; q < 8; q++) {
            const int j = (tile % tj) * CU_FS_TILE + c0 + q;
            if (j < d) dW[(int64_t)i * d + j] = acc[s][q];
        }
    }
}

#endif

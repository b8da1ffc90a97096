/* optimized/cuda/cu_plan.h — launch-configuration and tiling arithmetic of the CUDA
 * kernels, in plain functions compiled for both host and
 * device (__host__ __device__ under nvcc, static inline in C). Host tests
 * (optimized/tests/test_cuda_host.c) check this arithmetic without a GPU, and the
 * .cu files use exactly the same functions. See docs/cuda.md. */
#ifndef CU_PLAN_H
#define CU_PLAN_H

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define CU_HD __host__ __device__ __forceinline__
#else
#define CU_HD static inline
#endif

/* Threads per block of the elementwise and reduction kernels. */
#define CU_BLOCK 256
/* Each thread of an elementwise kernel handles CU_ELEMS_PER_THREAD consecutive
 * elements (the noise kernel: one Philox block = 2 elements per call). */
#define CU_ELEMS_PER_THREAD 4
/* Grid-size cap of grid-stride kernels (65535 keeps it legal on y/z as well). */
#define CU_MAX_GRID 65535
/* Ghost-norm Gram tile (T x T split into CU_GHOST_TILE^2 tiles) and its K chunk. */
#define CU_GHOST_TILE 32
#define CU_GHOST_KCHUNK 32
/* Tensor-core (WMMA bf16) ghost-norm tile: 64 x 64 Gram tiles, K chunks of 32. */
#define CU_GHOST_TILE_TC 64
#define CU_GHOST_KCHUNK_TC 32
/* Elements per block of the row squared-norm reduction (partials per row = ceil(n / this)). */
#define CU_SQNORM_CHUNK (CU_BLOCK * 16)
/* Default workspace cap of the fused per-layer kernel (bytes of per-example tiles). */
#define CU_FUSED_WS_BYTES ((int64_t)1 << 30)

CU_HD int64_t cu_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Blocks of an elementwise kernel over n elements (each thread does `per` elements),
 * capped at CU_MAX_GRID (the kernels are grid-stride loops); at least 1. */
CU_HD int cu_grid_1d(int64_t n, int per) {
    int64_t b = cu_ceil_div(n, (int64_t)CU_BLOCK * per);
    if (b < 1) b = 1;
    if (b > CU_MAX_GRID) b = CU_MAX_GRID;
    return (int)b;
}

/* Partials per row of the row squared-norm reduction. */
CU_HD int64_t cu_sqnorm_nblk(int64_t n) { return n <= 0 ? 1 : cu_ceil_div(n, CU_SQNORM_CHUNK); }

/* Ghost-norm tiles: the T x T Gram matrix is split into nt x nt tiles (nt = ceil(T/TILE));
 * only the upper triangle (i <= j) is visited: nt (nt + 1) / 2 tiles, the off-diagonal
 * ones counted twice (both Gram matrices are symmetric). */
CU_HD int64_t cu_ghost_ntile(int T) { return cu_ceil_div(T, CU_GHOST_TILE); }
CU_HD int64_t cu_ghost_npairs(int T) { int64_t n = cu_ghost_ntile(T); return n * (n + 1) / 2; }
/* The same for the tensor-core kernel's 64 x 64 tiles. */
CU_HD int64_t cu_ghost_ntile_tc(int T) { return cu_ceil_div(T, CU_GHOST_TILE_TC); }
CU_HD int64_t cu_ghost_npairs_tc(int T) { int64_t n = cu_ghost_ntile_tc(T); return n * (n + 1) / 2; }
/* Tile pair k (0 <= k < npairs) -> (i, j), i <= j, row-major over the upper triangle:
 * k = 0 -> (0,0), 1 -> (0,1), ..., nt-1 -> (0,nt-1), nt -> (1,1), ... */
CU_HD void cu_ghost_pair(int64_t k, int64_t nt, int *i, int *j) {
    int64_t r = 0, rowlen = nt;
    while (k >= rowlen) { k -= rowlen; r++; rowlen--; }
    *i = (int)r;
    *j = (int)(r + k);
}

/* Examples per chunk of the fused per-layer kernel: as many as fit in ws_bytes of f32
 * per-example gradients (p*d floats each), at least 1, at most B. */
CU_HD int cu_fused_chunk(int64_t ws_bytes, int B, int64_t p, int64_t d) {
    int64_t per = p * d * 4;
    int64_t c = per > 0 ? ws_bytes / per : B;
    if (c < 1) c = 1;
    if (c > B) c = B;
    return (int)c;
}

/* Noise kernel: thread u handles Philox block (offset/2 + u) and the elements of it that
 * fall in [offset, offset + n). Blocks touched: */
CU_HD int64_t cu_noise_nblocks(uint64_t offset, int64_t n) {
    if (n <= 0) return 0;
    uint64_t first = offset >> 1, last = (offset + (uint64_t)n - 1) >> 1;
    return (int64_t)(last - first + 1);
}

#endif

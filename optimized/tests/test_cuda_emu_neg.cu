// optimized/tests/test_cuda_emu_neg.cu — negative controls of the CUDA emulation
// (docs/cuda.md "What the emulation proves"): each check runs a correct kernel, which must
// pass, and, with --broken NAME, a deliberately broken copy of it, which the same check
// (or the sanitizer of the build) must catch. The broken kernels live here, never in the
// production .cu files.
//   barrier  a block sum with the __syncthreads between the per-warp writes to shared memory
//            and warp 0's reads removed: wrong sums (every build), a data race (TSan build);
//   grid     a scaling kernel whose bound is off by one (i <= n): it writes one element
//            past the buffer: the redzone check of the emulation (every build) and ASan;
//   drop     the fused clip-accumulate before the fix: a dropped example (factor 0) whose
//            block holds +inf is multiplied, 0 * inf = NaN enters the gradient;
//   gridbarrier  the single-pass fused kernel (cu_fused.cuh) with a grid barrier that
//            arrives but does not wait: a CTA reads the other CTAs' norm partials before
//            they are written (CU_EMU_COOP_STAGGER_MS starts them late; the partials are
//            poisoned with NaN): wrong clip factors (every build), a data race (TSan).
// Without arguments the correct kernels run (exit 0 when every check passes); with --broken
// NAME the broken one runs and the program exits 1 when its check fails (as it must), 0 if
// the broken kernel went unnoticed. optimized/tests/cuda_emu_negative.sh runs every case in
// the plain, ASan and TSan builds and requires each broken one to be caught.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "common/test.h"
#include "optimized/cuda/cu_testutil.h"
}
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"
#include "optimized/cuda/cu_fused.cuh"

/* ---------------- barrier ---------------- */
/* out[b] = sum of x[b, :n] (integers: exact in float), one block per row */
template <bool BROKEN> __global__ void k_row_sum(float *out, const float *x, int n) {
    __shared__ float sh[33];
    const float *xr = x + (int64_t)blockIdx.x * n;
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += xr[i];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = cu_warp_sum(v);
    if (lane == 0) sh[wid] = v;
    if (!BROKEN) __syncthreads(); /* the barrier the broken copy lacks */
    if (wid == 0) {
        float t = lane < nw ? sh[lane] : 0.0f;
        t = cu_warp_sum(t);
        if (lane == 0) out[blockIdx.x] = t;
    }
}

static int check_barrier(cu_ctx *ctx, bool broken) {
    const int rows = 8, n = 1000;
    float *x = (float *)malloc(sizeof(float) * rows * n), sums[8];
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) x[r * n + i] = (float)((r * 7 + i * 3) % 11);
    float *dx = NULL, *dout = NULL;
    T_OK(cu_malloc((void **)&dx, sizeof(float) * rows * n));
    T_OK(cu_malloc((void **)&dout, sizeof sums));
    T_OK(cu_h2d(ctx, dx, x, sizeof(float) * rows * n));
    cudaStream_t s = (cudaStream_t)cu_ctx_stream(ctx);
    if (broken) k_row_sum<true><<<rows, 256, 0, s>>>(dout, dx, n);
    else k_row_sum<false><<<rows, 256, 0, s>>>(dout, dx, n);
    T_CHECK(cudaGetLastError() == cudaSuccess, "launch");
    T_OK(cu_d2h(ctx, sums, dout, sizeof sums));
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        double ref = 0;
        for (int i = 0; i < n; i++) ref += x[r * n + i];
        bad += sums[r] != (float)ref;
    }
    T_CHECK(bad == 0, "barrier: %d of %d block sums wrong", bad, rows);
    cu_free(dx); cu_free(dout); free(x);
    return bad;
}

/* ---------------- grid ---------------- */
template <bool BROKEN> __global__ void k_scale(float *y, const float *x, float a, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; BROKEN ? i <= n : i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = a * x[i];
}

static int check_grid(cu_ctx *ctx, bool broken) {
    const int64_t n = 1000; /* a multiple of 8 but not of the block: the extra thread exists */
    float *x = (float *)malloc(sizeof(float) * n), *y = (float *)malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)i;
    float *dx = NULL, *dy = NULL;
    T_OK(cu_malloc((void **)&dx, sizeof(float) * n));
    T_OK(cu_malloc((void **)&dy, sizeof(float) * n));
    T_OK(cu_h2d(ctx, dx, x, sizeof(float) * n));
    cudaStream_t s = (cudaStream_t)cu_ctx_stream(ctx);
    if (broken) k_scale<true><<<cu_grid_1d(n, 1), CU_BLOCK, 0, s>>>(dy, dx, 2.0f, n);
    else k_scale<false><<<cu_grid_1d(n, 1), CU_BLOCK, 0, s>>>(dy, dx, 2.0f, n);
    dp_status st = cu_d2h(ctx, y, dy, sizeof(float) * n); /* the fault surfaces at this synchronisation */
    int bad = st != DP_OK;
    T_CHECK(st == DP_OK, "grid: %s", dp_last_error());
    for (int64_t i = 0; !bad && i < n; i++) bad += y[i] != 2.0f * x[i];
    T_CHECK(bad == 0, "grid: %d wrong elements", bad);
    cu_free(dx); cu_free(dy); free(x); free(y);
    return bad;
}

/* ---------------- drop ---------------- */
/* the production kernel (optimized/cuda/cu_dp.cu: the fused clipping's accumulation, the
 * only clipped-accumulation kernel of the fused paths) */
template <typename R> __global__ void k_chunk_accum(R *dW, const R *ws, const R *cs, int64_t nb, int64_t n);
/* the same before the fix: every example multiplied by its factor, also a dropped one */
__global__ void k_chunk_accum_unfixed(float *dW, const float *ws, const float *cs, int64_t nb, int64_t n) {
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
        float acc = dW[j];
        for (int64_t b = 0; b < nb; b++) acc = __fadd_rn(acc, __fmul_rn(cs[b], ws[b * n + j]));
        dW[j] = acc;
    }
}

static int check_drop(cu_ctx *ctx, bool broken) {
    const int bc = 3;
    const int64_t n = 500;
    float ws[3 * 500], c[3] = {0.5f, 0.0f, 0.25f}, grad[500], out[500];
    for (int64_t j = 0; j < n; j++) {
        ws[j] = (float)(j % 7) - 3.0f;
        ws[n + j] = j % 5 == 0 ? INFINITY : (float)j; /* example 1: non-finite, dropped (c = 0) */
        ws[2 * n + j] = (float)(j % 3);
        grad[j] = 1.0f;
    }
    float *dws = (float *)cu_test_up(ctx, ws, sizeof ws), *dc = (float *)cu_test_up(ctx, c, sizeof c),
          *dg = (float *)cu_test_up(ctx, grad, sizeof grad);
    cudaStream_t s = (cudaStream_t)cu_ctx_stream(ctx);
    if (broken) k_chunk_accum_unfixed<<<cu_grid_1d(n, 1), CU_BLOCK, 0, s>>>(dg, dws, dc, bc, n);
    else k_chunk_accum<float><<<cu_grid_1d(n, 1), CU_BLOCK, 0, s>>>(dg, dws, dc, bc, n);
    T_OK(cu_d2h(ctx, out, dg, sizeof out));
    int bad = 0;
    for (int64_t j = 0; j < n; j++) { /* the dropped example contributes nothing */
        float ref = (1.0f + 0.5f * ws[j]) + 0.25f * ws[2 * n + j]; /* exact: small integers and halves */
        bad += !(out[j] == ref);
    }
    T_CHECK(bad == 0, "drop: %d of %lld elements differ from the sum without the dropped example (NaN: 0 * inf)",
            bad, (long long)n);
    cu_free(dws); cu_free(dc); cu_free(dg);
    return bad;
}

/* ---------------- gridbarrier ---------------- */
/* the broken policy: every CTA counts its arrival, none waits for the others */
struct arrive_only_barrier {
    static __device__ __forceinline__ void arrive_wait(unsigned int *count, unsigned int nblk) {
        (void)nblk;
        __threadfence();
        atomicAdd(count, 1u);
    }
};
template <class Barrier>
static int fused_run(cu_ctx *ctx, float *out, const float *A, const float *G, int B, int T, int d, int p, int nblk,
                     double C) {
    cudaStream_t s = (cudaStream_t)cu_ctx_stream(ctx);
    float *dA = (float *)cu_test_up(ctx, A, sizeof(float) * B * T * d), *dG = (float *)cu_test_up(ctx, G, sizeof(float) * B * T * p);
    float *dW = NULL, *sq = NULL, *c = NULL;
    double *partial = NULL;
    unsigned int *count = NULL;
    T_OK(cu_malloc((void **)&dW, sizeof(float) * p * d));
    T_OK(cu_malloc((void **)&sq, sizeof(float) * B));
    T_OK(cu_malloc((void **)&c, sizeof(float) * B));
    T_OK(cu_malloc((void **)&partial, sizeof(double) * B * nblk));
    T_OK(cu_malloc((void **)&count, sizeof(unsigned int) * B));
    T_OK(cu_memset0(ctx, dW, sizeof(float) * p * d));
    T_OK(cu_memset0(ctx, count, sizeof(unsigned int) * B));
    T_CHECK(cudaMemset(partial, 0xff, sizeof(double) * B * nblk) == cudaSuccess, "poison the partials (NaN)");
    const float *ex = NULL;
    double gamma = 0.0;
    int automatic = 0;
    void *args[] = {&dW, &sq, &c, &partial, &count, &dA, &dG, &ex, &C, &automatic, &gamma, &B, &T, &d, &p};
    T_CHECK(cudaLaunchCooperativeKernel(k_fused_single<float, Barrier>, dim3((unsigned)nblk), dim3(CU_FS_THREADS), args, 0,
                                        s) == cudaSuccess, "cooperative launch of %d CTAs", nblk);
    T_OK(cu_d2h(ctx, out, dW, sizeof(float) * p * d));
    cu_free(dA); cu_free(dG); cu_free(dW); cu_free(sq); cu_free(c); cu_free(partial); cu_free(count);
    return 0;
}
static int check_gridbarrier(cu_ctx *ctx, bool broken) {
    const int B = 3, T = 9, d = 70, p = 40, nblk = 2; /* 6 tiles: 3 per CTA */
    float A[3 * 9 * 70], G[3 * 9 * 40], ref[40 * 70], got[40 * 70];
    for (int i = 0; i < B * T * d; i++) A[i] = (float)((i * 7) % 13) - 6.0f;
    for (int i = 0; i < B * T * p; i++) G[i] = (float)((i * 5) % 11) - 5.0f;
    const double C = 1.0; /* every example clipped (its norm is far above 1) */
    /* the production kernel (cu_grid_barrier) once, then the candidate: the same bits */
    fused_run<cu_grid_barrier>(ctx, ref, A, G, B, T, d, p, nblk, C);
    if (broken) fused_run<arrive_only_barrier>(ctx, got, A, G, B, T, d, p, nblk, C);
    else fused_run<cu_grid_barrier>(ctx, got, A, G, B, T, d, p, nblk, C);
    int bad = 0;
    for (int i = 0; i < p * d; i++) bad += memcmp(&ref[i], &got[i], sizeof(float)) != 0;
    T_CHECK(bad == 0, "gridbarrier: %d of %d dW elements differ from the single pass with its grid barrier (clip factors "
            "from norm partials read before they were written)", bad, p * d);
    return bad;
}

int main(int argc, char **argv) {
    const char *broken = argc == 3 && strcmp(argv[1], "--broken") == 0 ? argv[2] : NULL;
    if (argc != 1 && !broken) {
        fprintf(stderr, "usage: %s [--broken barrier|grid|drop|gridbarrier]\n", argv[0]);
        return 2;
    }
    /* two CTAs resident (a cooperative launch needs an OS thread per CTA); CTA 1 starts late */
    setenv("CU_EMU_THREADS", "2", 1);
    setenv("CU_EMU_COOP_STAGGER_MS", "100", 1);
    cu_ctx *ctx = cu_test_ctx();
    if (!ctx) return t_skip("no CUDA context");
    if (!broken) {
        check_barrier(ctx, false);
        check_grid(ctx, false);
        check_drop(ctx, false);
        check_gridbarrier(ctx, false);
        cu_ctx_destroy(ctx);
        return t_finish();
    }
    int bad = strcmp(broken, "barrier") == 0 ? check_barrier(ctx, true)
              : strcmp(broken, "grid") == 0  ? check_grid(ctx, true)
              : strcmp(broken, "drop") == 0  ? check_drop(ctx, true)
              : strcmp(broken, "gridbarrier") == 0 ? check_gridbarrier(ctx, true)
                                             : -1;
    if (bad < 0) {
        fprintf(stderr, "unknown broken kernel '%s'\n", broken);
        return 2;
    }
    printf("broken kernel '%s': %s\n", broken, bad ? "caught" : "NOT caught");
    return bad ? 1 : 0;
}

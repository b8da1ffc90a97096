// optimized/cuda/cu_fused.cu — the launcher of the single-pass fused per-layer clipping
// (cu_fused.cuh; docs/cuda.md "(1b) Single pass"), f32 and f64: the engine's
// fused_clip_accum runs it when the layer fits (every CTA resident at once with at most
// CU_FS_MAXT tiles each), the chunked path of cu_backend.cu otherwise.
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_fused.cuh"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"

/* CTAs of the single pass for a p x d layer on this device: one per tile, at most what can be
 * resident at once (occupancy x SMs, a cooperative launch's limit); 0 when the layer needs
 * more than CU_FS_MAXT tiles per CTA or the device has no cooperative launch. */
template <typename R> dp_status cu_fused_single_ctas(cu_ctx *ctx, int *nblk, int64_t d, int64_t p) {
    (void)ctx;
    *nblk = 0;
    int dev = 0, coop = 0, sms = 0, occ = 0;
    CU_CHECK(cudaGetDevice(&dev));
    CU_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    CU_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CU_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_fused_single<R, cu_grid_barrier>, CU_FS_THREADS, 0));
    const int64_t ntiles = cu_ceil_div(p, CU_FS_TILE) * cu_ceil_div(d, CU_FS_TILE), cap = (int64_t)occ * sms;
    if (!coop || cap < 1 || ntiles < 1) return DP_OK;
    const int64_t n = ntiles < cap ? ntiles : cap;
    if (cu_ceil_div(ntiles, n) <= CU_FS_MAXT) *nblk = (int)n;
    return DP_OK;
}

template <typename R>
dp_status cu_fused_single_t(cu_ctx *ctx, int *used, R *dW, R *sq_out, R *c_out, const R *A, const R *G, const R *extra,
                            double C, int automatic, double gamma, int64_t B, int64_t T, int64_t d, int64_t p) {
    *used = 0;
    CU_ARG(B >= 0 && B <= 0x7fffffff && T > 0 && T <= 0x7fffffff && d > 0 && d <= 0x7fffffff && p > 0 && p <= 0x7fffffff,
           "cu_fused_single: bad sizes B=%lld T=%lld d=%lld p=%lld", (long long)B, (long long)T, (long long)d, (long long)p);
    int nblk = 0;
    DP_TRY(cu_fused_single_ctas<R>(ctx, &nblk, d, p));
    if (nblk < 1) return DP_OK; /* does not fit: the caller takes the chunked path */
    if (B == 0) {
        *used = 1;
        return DP_OK;
    }
    void *partial, *count;
    DP_TRY(cu_ctx_scratch_(ctx, &partial, (size_t)(B * nblk) * sizeof(double), CU_SLOT_PARTIAL));
    DP_TRY(cu_ctx_scratch_(ctx, &count, (size_t)B * sizeof(unsigned int), CU_SLOT_SYNC));
    CU_CHECK(cudaMemsetAsync(count, 0, (size_t)B * sizeof(unsigned int), cu_ctx_stream_(ctx)));
    double *pp = (double *)partial;
    unsigned int *cp = (unsigned int *)count;
    int iB = (int)B, iT = (int)T, id = (int)d, ip = (int)p;
    void *args[] = {&dW, &sq_out, &c_out, &pp, &cp, &A, &G, &extra, &C, &automatic, &gamma, &iB, &iT, &id, &ip};
    CU_CHECK(cudaLaunchCooperativeKernel(k_fused_single<R, cu_grid_barrier>, dim3((unsigned)nblk), dim3(CU_FS_THREADS), args,
                                         0, cu_ctx_stream_(ctx)));
    CU_CHECK_LAUNCH(k_fused_single);
    *used = nblk;
    return DP_OK;
}

#define INST(R)                                                                                                     \
    template dp_status cu_fused_single_ctas<R>(cu_ctx *, int *, int64_t, int64_t);                                  \
    template dp_status cu_fused_single_t<R>(cu_ctx *, int *, R *, R *, R *, const R *, const R *, const R *, double, \
                                            int, double, int64_t, int64_t, int64_t, int64_t);
CU_INST2(INST)

extern "C" dp_status cu_dp_fused_single_ctas(cu_ctx *ctx, int *nblk, int64_t d, int64_t p) {
    CU_ARG(d > 0 && p > 0, "cu_dp_fused_single_ctas: bad sizes d=%lld p=%lld", (long long)d, (long long)p);
    return cu_fused_single_ctas<float>(ctx, nblk, d, p);
}

// optimized/cuda/cu_rmsnorm.cu — RMSNorm forward and backward (f32 and f64), one block of
// ROW_THREADS threads per row and the fixed-order block reduction of cu_reduce.cuh:
//   forward  rstd = 1 / sqrt(sum x^2 / D + eps), y = x rstd w;
//   backward dx = rstd w dy - x rstd^3 (sum_k w_k dy_k x_k) / D and the per-row gain
//            gradients dg_rows = dy x rstd (the engine sums them: per example or per batch).
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

#define ROW_THREADS 128

// y[n,:] = x[n,:] * rstd[n] * w, rstd[n] = 1/sqrt(mean_d x[n,d]^2 + eps)
template <typename T> __global__ void k_rmsnorm_fwd(T *y, T *rstd, const T *x, const T *w, T eps, int D) {
    __shared__ T sh[33];
    int64_t n = blockIdx.x;
    const T *xr = x + n * D;
    T s = 0;
    for (int d = threadIdx.x; d < D; d += blockDim.x) s += xr[d] * xr[d];
    s = cu_block_sum(s, sh);
    T r = (T)1 / cu_sqrt(s / (T)D + eps);
    if (threadIdx.x == 0) rstd[n] = r;
    for (int d = threadIdx.x; d < D; d += blockDim.x) y[n * D + d] = xr[d] * r * w[d];
}
// block per row: dx (may be NULL) and dg (may be NULL)
template <typename R>
__global__ void k_rmsnorm_bwd_rows(R *dx, R *dg, const R *dy, const R *x, const R *rstd, const R *g, int64_t D) {
    __shared__ R sh[33];
    int64_t r = blockIdx.x;
    const R *xr = x + r * D, *dyr = dy + r * D;
    R s = rstd[r], dot = 0;
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x) dot += dyr[k] * g[k] * xr[k];
    dot = cu_block_sum(dot, sh);
    R coef = s * s * s * dot / (R)D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
        if (dx) dx[r * D + j] = s * g[j] * dyr[j] - xr[j] * coef;
        if (dg) dg[r * D + j] = dyr[j] * xr[j] * s;
    }
}

template <typename T> dp_status cu_rmsnorm_fwd_t(cu_ctx *ctx, T *y, T *rstd, const T *x, const T *w, double eps, int N, int D) {
    CU_ARG(N >= 0 && D > 0, "cu_rmsnorm_fwd: bad sizes N=%d D=%d", N, D);
    CU_ARG(eps >= 0.0 && isfinite(eps), "cu_rmsnorm_fwd: eps must be finite and >= 0 (got %g)", eps);
    if (N == 0) return DP_OK;
    k_rmsnorm_fwd<T><<<N, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(y, rstd, x, w, (T)eps, D);
    CU_CHECK_LAUNCH(k_rmsnorm_fwd);
    return DP_OK;
}
template <typename R>
dp_status cu_rmsnorm_bwd_t(cu_ctx *ctx, R *dx, R *dg_rows, const R *dy, const R *x, const R *rstd, const R *w, int64_t N,
                           int64_t D) {
    CU_ARG(N >= 0 && N <= 0x7fffffff && D >= 0, "cu_rmsnorm_bwd: bad sizes N=%lld D=%lld", (long long)N, (long long)D);
    if (!N || !D) return DP_OK;
    k_rmsnorm_bwd_rows<R><<<(unsigned)N, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(dx, dg_rows, dy, x, rstd, w, D);
    CU_CHECK_LAUNCH(k_rmsnorm_bwd_rows);
    return DP_OK;
}

#define INST(R)                                                                                              \
    template dp_status cu_rmsnorm_fwd_t<R>(cu_ctx *, R *, R *, const R *, const R *, double, int, int);      \
    template dp_status cu_rmsnorm_bwd_t<R>(cu_ctx *, R *, R *, const R *, const R *, const R *, const R *, int64_t, int64_t);
CU_INST2(INST)

extern "C" dp_status cu_rmsnorm_fwd(cu_ctx *ctx, float *y, float *rstd, const float *x, const float *w, float eps,
                                    int N, int D) {
    return cu_rmsnorm_fwd_t<float>(ctx, y, rstd, x, w, (double)eps, N, D);
}
extern "C" dp_status cu_rmsnorm_bwd(cu_ctx *ctx, float *dx, float *dg_rows, const float *dy, const float *x,
                                    const float *w, const float *rstd, int N, int D) {
    CU_ARG(D > 0, "cu_rmsnorm_bwd: bad size D=%d", D);
    return cu_rmsnorm_bwd_t<float>(ctx, dx, dg_rows, dy, x, rstd, w, N, D);
}

// optimized/cuda/cu_attention.cu — rotary position embedding and causal attention (f32 and
// f64), straightforward kernels (docs/cuda.md "Model operations"): rotary in place on
// x[B,T,H,hd] with the angle in double; attention with one block per (t, h, b), the
// probabilities saved in att[B,H,T,T], and a backward pass of a row kernel and a column
// kernel in which every output has one writer and every sum runs in index order.
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

#define ROW_THREADS 128

/* ---------------- rotary ---------------- */
// x[B,T,H,hd]: pair j of head h at position t rotated by t * theta^(-2j/hd) (angle in double).
template <typename R>
__global__ void k_rope(R *x, double theta, int inverse, int B, int T, int H, int hd) {
    int64_t half = hd / 2;
    int64_t total = (int64_t)B * T * H * half;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = i % half;
        int64_t t = (i / half / H) % T;
        double ang = (double)t * pow(theta, -2.0 * (double)j / (double)hd);
        double c = cos(ang), s = sin(ang);
        if (inverse) s = -s;
        R *p = x + (i / half) * hd + 2 * j;
        double a = p[0], b = p[1];
        p[0] = (R)(a * c - b * s);
        p[1] = (R)(a * s + b * c);
    }
}
template <typename R>
dp_status cu_rope_t(cu_ctx *ctx, R *x, double theta, int inverse, int B, int T, int H, int hd) {
    CU_ARG(B >= 0 && T >= 0 && H > 0 && hd > 0 && hd % 2 == 0, "cu_rope: bad sizes B=%d T=%d H=%d hd=%d (hd must be even)",
           B, T, H, hd);
    CU_ARG(theta > 0.0 && isfinite(theta), "cu_rope: theta must be finite and > 0 (got %g)", theta);
    int64_t total = (int64_t)B * T * H * (hd / 2);
    if (total == 0) return DP_OK;
    k_rope<R><<<cu_grid_1d(total, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(x, theta, inverse, B, T, H, hd);
    CU_CHECK_LAUNCH(k_rope);
    return DP_OK;
}
template dp_status cu_rope_t<float>(cu_ctx *, float *, double, int, int, int, int, int);
template dp_status cu_rope_t<double>(cu_ctx *, double *, double, int, int, int, int, int);
extern "C" dp_status cu_rope(cu_ctx *ctx, float *x, float theta, int inverse, int B, int T, int H, int hd) {
    return cu_rope_t<float>(ctx, x, (double)theta, inverse, B, T, H, hd);
}

/* ---------------- causal attention ---------------- */
// One block per (b, h, t): scores over s <= t, softmax, out[b,t,h,:] = sum_s att[s] v[b,s,h,:].
template <typename R>
__global__ void k_attn_fwd(R *out, R *att, const R *q, const R *k, const R *v, int T, int H,
                           int hd) {
    __shared__ R sh[33];
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int64_t rs = (int64_t)H * hd; /* stride between positions */
    const R *qt = q + ((int64_t)b * T + t) * rs + (int64_t)h * hd;
    R *arow = att + (((int64_t)b * H + h) * T + t) * T;
    R scale = (R)1 / cu_sqrt((R)hd);
    R mx = (R)-INFINITY;
    for (int s = threadIdx.x; s < T; s += blockDim.x) {
        if (s > t) { arow[s] = (R)0; continue; }
        const R *ks = k + ((int64_t)b * T + s) * rs + (int64_t)h * hd;
        R dot = (R)0;
        for (int e = 0; e < hd; e++) dot += qt[e] * ks[e];
        dot *= scale;
        arow[s] = dot;
        mx = cu_max(mx, dot);
    }
    mx = cu_block_max(mx, sh, (R)-INFINITY);
    R sum = (R)0;
    for (int s = threadIdx.x; s <= t; s += blockDim.x) {
        R e = cu_exp(arow[s] - mx);
        arow[s] = e;
        sum += e;
    }
    sum = cu_block_sum(sum, sh);
    R inv = (R)1 / sum;
    for (int s = threadIdx.x; s <= t; s += blockDim.x) arow[s] *= inv;
    __syncthreads(); /* the row is read by other threads below */
    R *ot = out + ((int64_t)b * T + t) * rs + (int64_t)h * hd;
    for (int e = threadIdx.x; e < hd; e += blockDim.x) {
        R acc = (R)0;
        for (int s = 0; s <= t; s++) acc += arow[s] * v[((int64_t)b * T + s) * rs + (int64_t)h * hd + e];
        ot[e] = acc;
    }
}

// Row pass, one block per (b,h,t): datt[s] = dout_t . v_s; dpre[t,s] = att (datt - sum att datt);
// dq[t] = scale * sum_s dpre[t,s] k_s.
template <typename R>
__global__ void k_attn_bwd_rows(R *dq, R *dpre, const R *dout, const R *k, const R *v,
                                const R *att, int T, int H, int hd) {
    __shared__ R sh[33];
    int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int64_t rs = (int64_t)H * hd;
    const R *dot_ = dout + ((int64_t)b * T + t) * rs + (int64_t)h * hd;
    const R *arow = att + (((int64_t)b * H + h) * T + t) * T;
    R *drow = dpre + (((int64_t)b * H + h) * T + t) * T;
    R scale = (R)1 / cu_sqrt((R)hd);
    R acc = (R)0;
    for (int s = threadIdx.x; s < T; s += blockDim.x) {
        if (s > t) { drow[s] = (R)0; continue; }
        const R *vs = v + ((int64_t)b * T + s) * rs + (int64_t)h * hd;
        R d = (R)0;
        for (int e = 0; e < hd; e++) d += dot_[e] * vs[e];
        drow[s] = d;
        acc += arow[s] * d;
    }
    acc = cu_block_sum(acc, sh);
    for (int s = threadIdx.x; s <= t; s += blockDim.x) drow[s] = arow[s] * (drow[s] - acc);
    __syncthreads();
    R *dqt = dq + ((int64_t)b * T + t) * rs + (int64_t)h * hd;
    for (int e = threadIdx.x; e < hd; e += blockDim.x) {
        R a = (R)0;
        for (int s = 0; s <= t; s++) a += drow[s] * k[((int64_t)b * T + s) * rs + (int64_t)h * hd + e];
        dqt[e] = a * scale;
    }
}
// Column pass, one block per (b,h,s): dk[s] = scale sum_{t>=s} dpre[t,s] q_t; dv[s] = sum_{t>=s} att[t,s] dout_t.
template <typename R>
__global__ void k_attn_bwd_cols(R *dk, R *dv, const R *dpre, const R *dout, const R *q,
                                const R *att, int T, int H, int hd) {
    int s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int64_t rs = (int64_t)H * hd;
    const R *A = att + ((int64_t)b * H + h) * T * T, *P = dpre + ((int64_t)b * H + h) * T * T;
    R scale = (R)1 / cu_sqrt((R)hd);
    for (int e = threadIdx.x; e < hd; e += blockDim.x) {
        R ak = (R)0, av = (R)0;
        for (int t = s; t < T; t++) {
            int64_t o = ((int64_t)b * T + t) * rs + (int64_t)h * hd + e;
            ak += P[(int64_t)t * T + s] * q[o];
            av += A[(int64_t)t * T + s] * dout[o];
        }
        int64_t os = ((int64_t)b * T + s) * rs + (int64_t)h * hd + e;
        dk[os] = ak * scale;
        dv[os] = av;
    }
}

template <typename R>
dp_status cu_attention_fwd_t(cu_ctx *ctx, R *out, R *att, const R *q, const R *k, const R *v, int B, int T, int H,
                            int hd) {
    CU_ARG(B >= 0 && T >= 0 && H > 0 && hd > 0 && T <= CU_MAX_GRID && H <= CU_MAX_GRID && B <= CU_MAX_GRID,
           "cu_attention_fwd: bad sizes B=%d T=%d H=%d hd=%d", B, T, H, hd);
    if (B == 0 || T == 0) return DP_OK;
    dim3 g(T, H, B);
    k_attn_fwd<R><<<g, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(out, att, q, k, v, T, H, hd);
    CU_CHECK_LAUNCH(k_attn_fwd);
    return DP_OK;
}
template <typename R>
dp_status cu_attention_bwd_t(cu_ctx *ctx, R *dq, R *dk, R *dv, R *dpre, const R *dout, const R *q, const R *k,
                            const R *v, const R *att, int B, int T, int H, int hd) {
    CU_ARG(B >= 0 && T >= 0 && H > 0 && hd > 0 && T <= CU_MAX_GRID && H <= CU_MAX_GRID && B <= CU_MAX_GRID,
           "cu_attention_bwd: bad sizes B=%d T=%d H=%d hd=%d", B, T, H, hd);
    if (B == 0 || T == 0) return DP_OK;
    dim3 g(T, H, B);
    k_attn_bwd_rows<R><<<g, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(dq, dpre, dout, k, v, att, T, H, hd);
    CU_CHECK_LAUNCH(k_attn_bwd_rows);
    k_attn_bwd_cols<R><<<g, 64, 0, cu_ctx_stream_(ctx)>>>(dk, dv, dpre, dout, q, att, T, H, hd);
    CU_CHECK_LAUNCH(k_attn_bwd_cols);
    return DP_OK;
}

template dp_status cu_attention_fwd_t<float>(cu_ctx *, float *, float *, const float *, const float *, const float *, int,
                                             int, int, int);
template dp_status cu_attention_fwd_t<double>(cu_ctx *, double *, double *, const double *, const double *,
                                              const double *, int, int, int, int);
template dp_status cu_attention_bwd_t<float>(cu_ctx *, float *, float *, float *, float *, const float *, const float *,
                                             const float *, const float *, const float *, int, int, int, int);
template dp_status cu_attention_bwd_t<double>(cu_ctx *, double *, double *, double *, double *, const double *,
                                              const double *, const double *, const double *, const double *, int, int,
                                              int, int);
extern "C" dp_status cu_attention_fwd(cu_ctx *ctx, float *out, float *att, const float *q, const float *k,
                                      const float *v, int B, int T, int H, int hd) {
    return cu_attention_fwd_t<float>(ctx, out, att, q, k, v, B, T, H, hd);
}
extern "C" dp_status cu_attention_bwd(cu_ctx *ctx, float *dq, float *dk, float *dv, float *dpre, const float *dout,
                                      const float *q, const float *k, const float *v, const float *att, int B, int T,
                                      int H, int hd) {
    return cu_attention_bwd_t<float>(ctx, dq, dk, dv, dpre, dout, q, k, v, att, B, T, H, hd);
}


// optimized/cuda/cu_pointwise.cu — the elementwise operations of the CUDA backend (f32 and
// f64): add_bias, sum_rows, axpby, add, div_scalar, mul, tanh, silu, swiglu, forward and
// backward. Grid-stride loops of CU_BLOCK-thread blocks (cu_grid_1d). Where the host
// backend's formula is a fixed sequence of elementary operations the kernel repeats it with
// correctly rounded intrinsics (rn_*: no fused multiply-add), so those operations agree
// with the host bit for bit (docs/cuda.md "Bit-identical operations"); transcendental
// functions are evaluated in double and rounded once.
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

#define GRID1(n) cu_grid_1d((n), 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)

// y[rows, n] += bias[n]
template <typename R> __global__ void k_add_bias(R *y, const R *bias, int64_t rows, int64_t n) {
    CU_FOR_I(rows * n) y[i] = rn_add(y[i], bias[i % n]);
}
// thread per (g, j): out[g,j] (+)= sum_r x[g*per + r, j], r in order (the host's order)
template <typename R>
__global__ void k_sum_rows(R *out, const R *x, int accumulate, int64_t groups, int64_t per, int64_t n) {
    CU_FOR_I(groups * n) {
        int64_t g = i / n, j = i % n;
        R acc = accumulate ? out[i] : (R)0;
        for (int64_t r = 0; r < per; r++) acc = rn_add(acc, x[(g * per + r) * n + j]);
        out[i] = acc;
    }
}
template <typename R> __global__ void k_axpby(R *y, const R *x, R a, R b, int64_t n) {
    CU_FOR_I(n) y[i] = rn_add(rn_mul(a, x[i]), b == (R)0 ? (R)0 : rn_mul(b, y[i]));
}
template <typename R> __global__ void k_add(R *y, const R *a, const R *b, int64_t n) { CU_FOR_I(n) y[i] = rn_add(a[i], b[i]); }
template <typename R> __global__ void k_div_scalar(R *y, const R *x, R s, int64_t n) { CU_FOR_I(n) y[i] = rn_div(x[i], s); }
template <typename R> __global__ void k_mul(R *y, const R *x, int64_t n) { CU_FOR_I(n) y[i] = rn_mul(y[i], x[i]); }

template <typename R> dp_status cu_add_bias_t(cu_ctx *ctx, R *y, const R *bias, int64_t rows, int64_t n) {
    k_add_bias<R><<<GRID1(rows * n)>>>(y, bias, rows, n);
    CU_CHECK_LAUNCH(k_add_bias);
    return DP_OK;
}
template <typename R> dp_status cu_sum_rows_t(cu_ctx *ctx, R *out, const R *x, int accumulate, int64_t groups, int64_t per, int64_t n) {
    k_sum_rows<R><<<GRID1(groups * n)>>>(out, x, accumulate, groups, per, n);
    CU_CHECK_LAUNCH(k_sum_rows);
    return DP_OK;
}
template <typename R> dp_status cu_axpby_t(cu_ctx *ctx, R *y, const R *x, double a, double b, int64_t n) {
    k_axpby<R><<<GRID1(n)>>>(y, x, (R)a, (R)b, n);
    CU_CHECK_LAUNCH(k_axpby);
    return DP_OK;
}
template <typename R> dp_status cu_add_t(cu_ctx *ctx, R *y, const R *a, const R *b, int64_t n) {
    k_add<R><<<GRID1(n)>>>(y, a, b, n);
    CU_CHECK_LAUNCH(k_add);
    return DP_OK;
}
template <typename R> dp_status cu_div_scalar_t(cu_ctx *ctx, R *y, const R *x, double s, int64_t n) {
    k_div_scalar<R><<<GRID1(n)>>>(y, x, (R)s, n);
    CU_CHECK_LAUNCH(k_div_scalar);
    return DP_OK;
}
template <typename R> dp_status cu_mul_t(cu_ctx *ctx, R *y, const R *x, int64_t n) {
    k_mul<R><<<GRID1(n)>>>(y, x, n);
    CU_CHECK_LAUNCH(k_mul);
    return DP_OK;
}

/* ---------------- activations (the host's formulas; transcendental functions in double) ---------------- */
template <typename R> __device__ __forceinline__ R cb_sigmoid(R a) { return (R)(1.0 / (1.0 + exp(-(double)a))); }
template <typename R> __global__ void k_tanh_fwd(R *y, const R *x, int64_t n) { CU_FOR_I(n) y[i] = (R)tanh((double)x[i]); }
template <typename R> __global__ void k_tanh_bwd(R *dx, const R *dy, const R *y, int64_t n) {
    CU_FOR_I(n) dx[i] = rn_mul(dy[i], rn_sub((R)1, rn_mul(y[i], y[i])));
}
template <typename R> __global__ void k_silu_fwd(R *y, const R *x, int64_t n) { CU_FOR_I(n) y[i] = rn_mul(x[i], cb_sigmoid(x[i])); }
template <typename R> __global__ void k_silu_bwd(R *dx, const R *dy, const R *x, int64_t n) {
    CU_FOR_I(n) {
        R s = cb_sigmoid(x[i]);
        dx[i] = rn_mul(dy[i], rn_mul(s, rn_add((R)1, rn_mul(x[i], rn_sub((R)1, s)))));
    }
}
template <typename R> dp_status cu_tanh_fwd_t(cu_ctx *ctx, R *y, const R *x, int64_t n) {
    k_tanh_fwd<R><<<GRID1(n)>>>(y, x, n);
    CU_CHECK_LAUNCH(k_tanh_fwd);
    return DP_OK;
}
template <typename R> dp_status cu_tanh_bwd_t(cu_ctx *ctx, R *dx, const R *dy, const R *y, int64_t n) {
    k_tanh_bwd<R><<<GRID1(n)>>>(dx, dy, y, n);
    CU_CHECK_LAUNCH(k_tanh_bwd);
    return DP_OK;
}
template <typename R> dp_status cu_silu_fwd_t(cu_ctx *ctx, R *y, const R *x, int64_t n) {
    k_silu_fwd<R><<<GRID1(n)>>>(y, x, n);
    CU_CHECK_LAUNCH(k_silu_fwd);
    return DP_OK;
}
template <typename R> dp_status cu_silu_bwd_t(cu_ctx *ctx, R *dx, const R *dy, const R *x, int64_t n) {
    k_silu_bwd<R><<<GRID1(n)>>>(dx, dy, x, n);
    CU_CHECK_LAUNCH(k_silu_bwd);
    return DP_OK;
}

/* ---------------- swiglu ---------------- */
template <typename R> __device__ __forceinline__ R sigm(R a) { return (R)1 / ((R)1 + cu_exp(-a)); }
// h = silu(a) * b
template <typename R> __global__ void k_swiglu_fwd(R *h, const R *a, const R *b, int64_t n) {
    CU_FOR_I(n) {
        R x = a[i];
        h[i] = x * sigm(x) * b[i];
    }
}
// da = dh * b * sig(a) (1 + a (1 - sig(a))), db = dh * silu(a)
template <typename R> __global__ void k_swiglu_bwd(R *da, R *db, const R *dh, const R *a, const R *b, int64_t n) {
    CU_FOR_I(n) {
        R x = a[i], s = sigm(x), g = dh[i];
        da[i] = g * b[i] * s * ((R)1 + x * ((R)1 - s));
        db[i] = g * x * s;
    }
}
template <typename R> dp_status cu_swiglu_fwd_t(cu_ctx *ctx, R *h, const R *a, const R *b, int64_t n) {
    CU_ARG(n >= 0, "cu_swiglu_fwd: negative size");
    if (n == 0) return DP_OK;
    k_swiglu_fwd<R><<<GRID1(n)>>>(h, a, b, n);
    CU_CHECK_LAUNCH(k_swiglu_fwd);
    return DP_OK;
}
template <typename R> dp_status cu_swiglu_bwd_t(cu_ctx *ctx, R *da, R *db, const R *dh, const R *a, const R *b, int64_t n) {
    CU_ARG(n >= 0, "cu_swiglu_bwd: negative size");
    if (n == 0) return DP_OK;
    k_swiglu_bwd<R><<<GRID1(n)>>>(da, db, dh, a, b, n);
    CU_CHECK_LAUNCH(k_swiglu_bwd);
    return DP_OK;
}

#define INST(R)                                                                                                         \
    template dp_status cu_add_bias_t<R>(cu_ctx *, R *, const R *, int64_t, int64_t);                                    \
    template dp_status cu_sum_rows_t<R>(cu_ctx *, R *, const R *, int, int64_t, int64_t, int64_t);                      \
    template dp_status cu_axpby_t<R>(cu_ctx *, R *, const R *, double, double, int64_t);                                \
    template dp_status cu_add_t<R>(cu_ctx *, R *, const R *, const R *, int64_t);                                       \
    template dp_status cu_div_scalar_t<R>(cu_ctx *, R *, const R *, double, int64_t);                                   \
    template dp_status cu_mul_t<R>(cu_ctx *, R *, const R *, int64_t);                                                  \
    template dp_status cu_tanh_fwd_t<R>(cu_ctx *, R *, const R *, int64_t);                                             \
    template dp_status cu_tanh_bwd_t<R>(cu_ctx *, R *, const R *, const R *, int64_t);                                  \
    template dp_status cu_silu_fwd_t<R>(cu_ctx *, R *, const R *, int64_t);                                             \
    template dp_status cu_silu_bwd_t<R>(cu_ctx *, R *, const R *, const R *, int64_t);                                  \
    template dp_status cu_swiglu_fwd_t<R>(cu_ctx *, R *, const R *, const R *, int64_t);                                \
    template dp_status cu_swiglu_bwd_t<R>(cu_ctx *, R *, R *, const R *, const R *, const R *, int64_t);
CU_INST2(INST)

extern "C" dp_status cu_swiglu_fwd(cu_ctx *ctx, float *h, const float *a, const float *b, int64_t n) {
    return cu_swiglu_fwd_t<float>(ctx, h, a, b, n);
}
extern "C" dp_status cu_swiglu_bwd(cu_ctx *ctx, float *da, float *db, const float *dh, const float *a, const float *b,
                                   int64_t n) {
    return cu_swiglu_bwd_t<float>(ctx, da, db, dh, a, b, n);
}

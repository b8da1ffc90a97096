// optimized/cuda/cu_model.cu — model operations of the mlp and llama models as
// straightforward kernels (f32): embedding, rmsnorm, rotary, causal attention,
// swiglu, cross-entropy; forward and backward. Every reduction is a fixed-order
// block reduction or a per-thread loop in index order (no atomics), so results are
// bit-identical run to run. Shapes are in the comments (llm.c style).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/cuda/cu_api.h"
#include "common/alloc.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

#define ROW_THREADS 128

/* A device int flag (scratch slot 7) for index checks done inside kernels. */
static dp_status flag_reset(cu_ctx *ctx, int **flag) {
    void *p;
    DP_TRY(cu_ctx_scratch_(ctx, &p, sizeof(int), 7));
    *flag = (int *)p;
    CU_CHECK(cudaMemsetAsync(p, 0, sizeof(int), cu_ctx_stream_(ctx)));
    return DP_OK;
}
static dp_status flag_read(cu_ctx *ctx, int *flag, int *v) {
    CU_CHECK(cudaMemcpyAsync(v, flag, sizeof(int), cudaMemcpyDeviceToHost, cu_ctx_stream_(ctx)));
    CU_CHECK(cudaStreamSynchronize(cu_ctx_stream_(ctx)));
    return DP_OK;
}

/* ---------------- embedding ---------------- */
// out[N,D] = table[tokens[n], :]; a token outside [0,V) sets *bad = n+1 and writes zeros.
template <typename T>
__global__ void k_embed_fwd(T *out, int *bad, const int32_t *tokens, const T *table, int N, int V, int D) {
    int n = blockIdx.x;
    int32_t t = tokens[n];
    bool ok = t >= 0 && t < V;
    if (!ok && threadIdx.x == 0) atomicMax(bad, n + 1); /* integer flag: order-independent */
    for (int d = threadIdx.x; d < D; d += blockDim.x) out[(int64_t)n * D + d] = ok ? table[(int64_t)t * D + d] : (T)0;
}

template <typename T>
dp_status cu_embedding_fwd_t(cu_ctx *ctx, T *out, const int32_t *tokens, const T *table, int N, int V, int D) {
    CU_ARG(N >= 0 && V > 0 && D > 0, "cu_embedding_fwd: bad sizes N=%d V=%d D=%d", N, V, D);
    if (N == 0) return DP_OK;
    int *flag;
    DP_TRY(flag_reset(ctx, &flag));
    k_embed_fwd<T><<<N, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(out, flag, tokens, table, N, V, D);
    CU_CHECK_LAUNCH(k_embed_fwd);
    int bad = 0;
    DP_TRY(flag_read(ctx, flag, &bad));
    if (bad) return dp_error(DP_ERR_INVALID, "cu_embedding_fwd: token at position %d outside [0, %d)", bad - 1, V);
    return DP_OK;
}

template dp_status cu_embedding_fwd_t<float>(cu_ctx *, float *, const int32_t *, const float *, int, int, int);
template dp_status cu_embedding_fwd_t<double>(cu_ctx *, double *, const int32_t *, const double *, int, int, int);
extern "C" dp_status cu_embedding_fwd(cu_ctx *ctx, float *out, const int32_t *tokens, const float *table, int N, int V,
                                      int D) {
    return cu_embedding_fwd_t<float>(ctx, out, tokens, table, N, V, D);
}

// dtable[v, d] += sum_{k in [off[v], off[v+1])} dout[order[k], d], order sorted by (token, n).
__global__ void k_embed_bwd(float *dtable, const float *dout, const int32_t *order, const int32_t *off, int V, int D) {
    int v = blockIdx.x;
    int b = off[v], e = off[v + 1];
    if (b == e) return;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float s = dtable[(int64_t)v * D + d];
        for (int k = b; k < e; k++) s += dout[(int64_t)order[k] * D + d];
        dtable[(int64_t)v * D + d] = s;
    }
}

extern "C" dp_status cu_embedding_bwd(cu_ctx *ctx, float *dtable, const float *dout, const int32_t *tokens, int N,
                                      int V, int D) {
    CU_ARG(N >= 0 && V > 0 && D > 0, "cu_embedding_bwd: bad sizes N=%d V=%d D=%d", N, V, D);
    if (N == 0) return DP_OK;
    /* Counting sort of the tokens on the host (stable: increasing n within a token). */
    int32_t *ht = (int32_t *)dp_malloc((size_t)N * sizeof(int32_t));
    int32_t *hoff = (int32_t *)dp_calloc((size_t)V + 1, sizeof(int32_t));
    int32_t *hord = (int32_t *)dp_malloc((size_t)N * sizeof(int32_t));
    dp_status st = DP_OK;
    if (!ht || !hoff || !hord) {
        st = dp_error(DP_ERR_NOMEM, "cu_embedding_bwd: out of host memory");
        goto done;
    }
    st = cu_d2h(ctx, ht, tokens, (size_t)N * sizeof(int32_t));
    if (st != DP_OK) goto done;
    for (int n = 0; n < N; n++) {
        if (ht[n] < 0 || ht[n] >= V) {
            st = dp_error(DP_ERR_INVALID, "cu_embedding_bwd: token %d at position %d outside [0, %d)", ht[n], n, V);
            goto done;
        }
        hoff[ht[n] + 1]++;
    }
    for (int v = 0; v < V; v++) hoff[v + 1] += hoff[v];
    {
        int32_t *pos = (int32_t *)dp_malloc((size_t)V * sizeof(int32_t));
        if (!pos) {
            st = dp_error(DP_ERR_NOMEM, "cu_embedding_bwd: out of host memory");
            goto done;
        }
        memcpy(pos, hoff, (size_t)V * sizeof(int32_t));
        for (int n = 0; n < N; n++) hord[pos[ht[n]]++] = n;
        dp_free(pos);
    }
    {
        void *dord, *doff;
        st = cu_ctx_scratch_(ctx, &dord, (size_t)N * sizeof(int32_t), 5);
        if (st == DP_OK) st = cu_ctx_scratch_(ctx, &doff, ((size_t)V + 1) * sizeof(int32_t), 6);
        if (st == DP_OK) st = cu_h2d(ctx, dord, hord, (size_t)N * sizeof(int32_t));
        if (st == DP_OK) st = cu_h2d(ctx, doff, hoff, ((size_t)V + 1) * sizeof(int32_t));
        if (st == DP_OK) {
            k_embed_bwd<<<V, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(dtable, dout, (const int32_t *)dord,
                                                                    (const int32_t *)doff, V, D);
            st = cu_check_launch_("k_embed_bwd", __FILE__, __LINE__);
        }
        /* the host arrays are freed below: make sure the synchronous copies are done (they are) */
    }
done:
    dp_free(ht);
    dp_free(hoff);
    dp_free(hord);
    return st;
}

/* ---------------- rmsnorm ---------------- */
// y[n,:] = x[n,:] * rstd[n] * w, rstd[n] = 1/sqrt(mean_d x[n,d]^2 + eps)
template <typename T>
__global__ void k_rmsnorm_fwd(T *y, T *rstd, const T *x, const T *w, T eps, int D) {
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
// dx[n,d] = r w_d dy_d - x_d r^3 (sum_e w_e dy_e x_e) / D
__global__ void k_rmsnorm_bwd_dx(float *dx, const float *dy, const float *x, const float *w, const float *rstd, int D) {
    __shared__ float sh[33];
    int64_t n = blockIdx.x;
    const float *xr = x + n * D, *dyr = dy + n * D;
    float r = rstd[n];
    float s = 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) s += w[d] * dyr[d] * xr[d];
    s = cu_block_sum(s, sh);
    float c = r * r * r * s / (float)D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) dx[n * D + d] = r * w[d] * dyr[d] - xr[d] * c;
}
// dw[d] += sum_n dy[n,d] x[n,d] rstd[n], one thread per d, rows in order.
__global__ void k_rmsnorm_bwd_dw(float *dw, const float *dy, const float *x, const float *rstd, int N, int D) {
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= D) return;
    float s = 0.0f;
    for (int n = 0; n < N; n++) s += dy[(int64_t)n * D + d] * x[(int64_t)n * D + d] * rstd[n];
    dw[d] += s;
}

template <typename T>
dp_status cu_rmsnorm_fwd_t(cu_ctx *ctx, T *y, T *rstd, const T *x, const T *w, double eps, int N, int D) {
    CU_ARG(N >= 0 && D > 0, "cu_rmsnorm_fwd: bad sizes N=%d D=%d", N, D);
    CU_ARG(eps >= 0.0 && isfinite(eps), "cu_rmsnorm_fwd: eps must be finite and >= 0 (got %g)", eps);
    if (N == 0) return DP_OK;
    k_rmsnorm_fwd<T><<<N, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(y, rstd, x, w, (T)eps, D);
    CU_CHECK_LAUNCH(k_rmsnorm_fwd);
    return DP_OK;
}
template dp_status cu_rmsnorm_fwd_t<float>(cu_ctx *, float *, float *, const float *, const float *, double, int, int);
template dp_status cu_rmsnorm_fwd_t<double>(cu_ctx *, double *, double *, const double *, const double *, double, int, int);
extern "C" dp_status cu_rmsnorm_fwd(cu_ctx *ctx, float *y, float *rstd, const float *x, const float *w, float eps,
                                    int N, int D) {
    return cu_rmsnorm_fwd_t<float>(ctx, y, rstd, x, w, (double)eps, N, D);
}
extern "C" dp_status cu_rmsnorm_bwd(cu_ctx *ctx, float *dx, float *dw, const float *dy, const float *x, const float *w,
                                    const float *rstd, int N, int D) {
    CU_ARG(N >= 0 && D > 0, "cu_rmsnorm_bwd: bad sizes N=%d D=%d", N, D);
    if (N == 0) return DP_OK;
    k_rmsnorm_bwd_dx<<<N, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(dx, dy, x, w, rstd, D);
    CU_CHECK_LAUNCH(k_rmsnorm_bwd_dx);
    if (dw) {
        k_rmsnorm_bwd_dw<<<(int)cu_ceil_div(D, CU_BLOCK), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(dw, dy, x, rstd, N, D);
        CU_CHECK_LAUNCH(k_rmsnorm_bwd_dw);
    }
    return DP_OK;
}

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

/* ---------------- swiglu ---------------- */
template <typename R> __device__ __forceinline__ R sigm(R a) { return (R)1 / ((R)1 + cu_exp(-a)); }
// h = silu(a) * b
template <typename R>
__global__ void k_swiglu_fwd(R *h, const R *a, const R *b, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        R x = a[i];
        h[i] = x * sigm(x) * b[i];
    }
}
// da = dh * b * sig(a) (1 + a (1 - sig(a))), db = dh * silu(a)
template <typename R>
__global__ void k_swiglu_bwd(R *da, R *db, const R *dh, const R *a, const R *b, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        R x = a[i], s = sigm(x), g = dh[i];
        da[i] = g * b[i] * s * ((R)1 + x * ((R)1 - s));
        db[i] = g * x * s;
    }
}
template <typename R> dp_status cu_swiglu_fwd_t(cu_ctx *ctx, R *h, const R *a, const R *b, int64_t n) {
    CU_ARG(n >= 0, "cu_swiglu_fwd: negative size");
    if (n == 0) return DP_OK;
    k_swiglu_fwd<R><<<cu_grid_1d(n, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(h, a, b, n);
    CU_CHECK_LAUNCH(k_swiglu_fwd);
    return DP_OK;
}
template <typename R>
dp_status cu_swiglu_bwd_t(cu_ctx *ctx, R *da, R *db, const R *dh, const R *a, const R *b, int64_t n) {
    CU_ARG(n >= 0, "cu_swiglu_bwd: negative size");
    if (n == 0) return DP_OK;
    k_swiglu_bwd<R><<<cu_grid_1d(n, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(da, db, dh, a, b, n);
    CU_CHECK_LAUNCH(k_swiglu_bwd);
    return DP_OK;
}

template dp_status cu_swiglu_fwd_t<float>(cu_ctx *, float *, const float *, const float *, int64_t);
template dp_status cu_swiglu_fwd_t<double>(cu_ctx *, double *, const double *, const double *, int64_t);
template dp_status cu_swiglu_bwd_t<float>(cu_ctx *, float *, float *, const float *, const float *, const float *, int64_t);
template dp_status cu_swiglu_bwd_t<double>(cu_ctx *, double *, double *, const double *, const double *, const double *,
                                           int64_t);
extern "C" dp_status cu_swiglu_fwd(cu_ctx *ctx, float *h, const float *a, const float *b, int64_t n) {
    return cu_swiglu_fwd_t<float>(ctx, h, a, b, n);
}
extern "C" dp_status cu_swiglu_bwd(cu_ctx *ctx, float *da, float *db, const float *dh, const float *a, const float *b,
                                   int64_t n) {
    return cu_swiglu_bwd_t<float>(ctx, da, db, dh, a, b, n);
}

/* ---------------- cross-entropy ---------------- */
// loss[n] = log sum_v exp(l_v - m) + m - l_target, one block per row.
// Row statistics shared by both passes: m = max_v l_v and s = sum_v exp(l_v - m), in the
// same reduction order in the forward and the backward kernel (the whole block calls it).
__device__ void xent_row_stats(float *m_out, float *s_out, const float *l, float *sh, int V) {
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, l[v]);
    m = cu_block_max(m, sh, -INFINITY);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(l[v] - m);
    *m_out = m;
    *s_out = cu_block_sum(s, sh);
}
__global__ void k_xent_fwd(float *loss, int *bad, const float *logits, const int32_t *targets, int V) {
    __shared__ float sh[33];
    int64_t n = blockIdx.x;
    const float *l = logits + n * V;
    int32_t y = targets[n];
    float m, s;
    xent_row_stats(&m, &s, l, sh, V);
    if (threadIdx.x == 0) {
        if (y < 0 || y >= V) {
            atomicMax(bad, (int)n + 1);
            loss[n] = NAN;
        } else {
            loss[n] = logf(s) + m - l[y];
        }
    }
}
__global__ void k_xent_bwd(float *dlogits, const float *logits, const int32_t *targets, const float *dloss, int V) {
    __shared__ float sh[33];
    int64_t n = blockIdx.x;
    const float *l = logits + n * V;
    int32_t y = targets[n];
    float m, s;
    xent_row_stats(&m, &s, l, sh, V);
    float inv = 1.0f / s, g = dloss[n];
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        dlogits[n * V + v] = (expf(l[v] - m) * inv - (v == y ? 1.0f : 0.0f)) * g;
}
extern "C" dp_status cu_xent_fwd(cu_ctx *ctx, float *loss, const float *logits, const int32_t *targets, int N, int V) {
    CU_ARG(N >= 0 && V > 0, "cu_xent_fwd: bad sizes N=%d V=%d", N, V);
    if (N == 0) return DP_OK;
    int *flag;
    DP_TRY(flag_reset(ctx, &flag));
    k_xent_fwd<<<N, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(loss, flag, logits, targets, V);
    CU_CHECK_LAUNCH(k_xent_fwd);
    int bad = 0;
    DP_TRY(flag_read(ctx, flag, &bad));
    if (bad) return dp_error(DP_ERR_INVALID, "cu_xent_fwd: target of row %d outside [0, %d)", bad - 1, V);
    return DP_OK;
}
extern "C" dp_status cu_xent_bwd(cu_ctx *ctx, float *dlogits, const float *logits, const int32_t *targets,
                                 const float *dloss, int N, int V) {
    CU_ARG(N >= 0 && V > 0, "cu_xent_bwd: bad sizes N=%d V=%d", N, V);
    if (N == 0) return DP_OK;
    k_xent_bwd<<<N, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(dlogits, logits, targets, dloss, V);
    CU_CHECK_LAUNCH(k_xent_bwd);
    return DP_OK;
}

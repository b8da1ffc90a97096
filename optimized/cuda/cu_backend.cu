// optimized/cuda/cu_backend.cu — the CUDA backend behind the engine's interface
// (optimized/backend.h): opt_backend_cuda_create fills the operation table with the
// cu_ kernels, in the engine's dtype (f32 or f64: every kernel below is a template
// instantiated for both, dispatched on the context's dtype). Buffers are device
// pointers; integer buffers (ids, labels) are device int32.
//
// Where the host backend's arithmetic is a fixed sequence of elementary operations
// (axpby, clip_accum, the fused accumulation, optimizers, ...) the kernels repeat it
// with correctly rounded intrinsics (rn_mul/rn_add: no fused multiply-add), so those
// operations agree with the host backend bit for bit.
//
// Collectives: one rank (use_mpi = 0) or NCCL over MPI_COMM_WORLD's ranks (use_mpi = 1;
// the caller initialised MPI). A collective first makes the comm stream wait for the
// compute stream, runs on the comm stream, and completes (async == NULL) or returns a
// handle whose wait() polls an event recorded after it; every wait (and the MPI ones of
// allgatherv_bytes and barrier) fails after the collective timeout (set_collective_timeout,
// docs/engine.md "Collective timeout") naming the collective, and aborts the communicator.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "optimized/backend.h"
#include "common/alloc.h"
#include "optimized/opt_poll.h"
}
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

/* Strong symbol that a strong reference can use to pull this object out of
 * libdpoptimized.a (a weak reference to opt_backend_cuda_create alone does not). */
extern "C" {
extern const int cu_backend_linked;
const int cu_backend_linked = 1;
}

enum { SLOT_WS = 0, SLOT_SQD = 2, SLOT_C = 3, SLOT_TMP = 4, SLOT_FLAG = 7 };

typedef struct {
    cu_ctx *cu;
    cu_comm *comm; /* NULL for one rank */
    int use_mpi, rank, size;
    int f64;       /* dtype: 1 = F64, 0 = F32 */
    size_t es;     /* element size */
    double timeout; /* collective timeout, seconds */
    int aborted;    /* a collective timed out: the communicator was aborted */
} cb_ctx;

#define CB(ctx) ((cb_ctx *)(ctx))
#define STREAM(ctx) cu_ctx_stream_(CB(ctx)->cu)
#define GRID(n) cu_grid_1d((n), 1), CU_BLOCK, 0, STREAM(ctx)
#define FOR_I(n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
/* call fn<float>(args) or fn<double>(args) by the context's dtype */
#define DISPATCH(fn, ...) (CB(ctx)->f64 ? fn<double>(__VA_ARGS__) : fn<float>(__VA_ARGS__))

static dp_status ck_n(const char *op, int64_t n) {
    if (n < 0) return dp_error(DP_ERR_INVALID, "cuda %s: negative size %lld", op, (long long)n);
    return DP_OK;
}
static dp_status ck_int(const char *op, int64_t v, const char *what) {
    if (v < 0 || v > 0x7fffffff) return dp_error(DP_ERR_INVALID, "cuda %s: %s = %lld out of range [0, 2^31)", op, what, (long long)v);
    return DP_OK;
}
static dp_status launched(const char *k) { return cu_check_launch_(k, __FILE__, __LINE__); }

/* ---------------- memory ---------------- */
static dp_status cb_alloc(void *ctx, void **out, size_t nbytes) {
    DP_TRY(cu_malloc(out, nbytes));
    dp_status st = cu_memset0(CB(ctx)->cu, *out, nbytes ? nbytes : 16);
    if (st == DP_OK) st = cu_sync(CB(ctx)->cu);
    if (st != DP_OK) { cu_free(*out); *out = NULL; }
    return st;
}
static void cb_free(void *ctx, void *p) {
    cu_sync(CB(ctx)->cu);
    cu_free(p);
}
static dp_status cb_to_device(void *ctx, void *dst, const void *src, size_t nbytes) {
    return nbytes ? cu_h2d(CB(ctx)->cu, dst, src, nbytes) : DP_OK;
}
static dp_status cb_to_host(void *ctx, void *dst, const void *src, size_t nbytes) {
    return nbytes ? cu_d2h(CB(ctx)->cu, dst, src, nbytes) : DP_OK;
}
static dp_status cb_copy(void *ctx, void *dst, const void *src, size_t nbytes) {
    if (!nbytes || dst == src) return DP_OK;
    return cu_d2d(CB(ctx)->cu, dst, src, nbytes);
}
static dp_status cb_zero(void *ctx, void *dst, size_t nbytes) { return nbytes ? cu_memset0(CB(ctx)->cu, dst, nbytes) : DP_OK; }
static dp_status cb_upload_f64(void *ctx, void *dst, const double *src, int64_t n) {
    DP_TRY(ck_n("upload_f64", n));
    if (n == 0) return DP_OK;
    if (CB(ctx)->f64) return cu_h2d(CB(ctx)->cu, dst, src, (size_t)n * 8);
    float *tmp = (float *)dp_malloc((size_t)n * sizeof(float));
    if (!tmp) return dp_error(DP_ERR_NOMEM, "cuda upload_f64: out of host memory");
    for (int64_t i = 0; i < n; i++) tmp[i] = (float)src[i];
    dp_status st = cu_h2d(CB(ctx)->cu, dst, tmp, (size_t)n * sizeof(float));
    dp_free(tmp);
    return st;
}
static dp_status cb_download_f64(void *ctx, double *dst, const void *src, int64_t n) {
    DP_TRY(ck_n("download_f64", n));
    if (n == 0) return DP_OK;
    if (CB(ctx)->f64) return cu_d2h(CB(ctx)->cu, dst, src, (size_t)n * 8);
    float *tmp = (float *)dp_malloc((size_t)n * sizeof(float));
    if (!tmp) return dp_error(DP_ERR_NOMEM, "cuda download_f64: out of host memory");
    dp_status st = cu_d2h(CB(ctx)->cu, tmp, src, (size_t)n * sizeof(float));
    for (int64_t i = 0; st == DP_OK && i < n; i++) dst[i] = tmp[i];
    dp_free(tmp);
    return st;
}

static dp_status cb_half_convert(void *ctx, void *y, uint64_t *counts, const void *x, int half, int mode, int64_t n) {
    if (CB(ctx)->f64) return dp_error(DP_ERR_INVALID, "cuda half_convert: needs an f32 backend");
    return cu_half_convert(CB(ctx)->cu, y, counts, x, half, mode, n); /* cu_prec.cu */
}

/* ---------------- dense linear algebra ---------------- */
/* gemm with K = 0 and beta != 0: C[i] = alpha * 0 + beta * C[i] (two roundings, as the host) */
template <typename R> __global__ void k_gemm_k0(R *C, R alpha, R beta, int64_t n) {
    FOR_I(n) C[i] = rn_add(rn_mul(alpha, (R)0), rn_mul(beta, C[i]));
}
static dp_status cb_gemm(void *ctx, void *C, const void *A, const void *B, int ta, int tb, int64_t M, int64_t N,
                         int64_t K, double alpha, double beta, int64_t batch, int64_t sA, int64_t sB, int64_t sC) {
    DP_TRY(ck_int("gemm", M, "M")); DP_TRY(ck_int("gemm", N, "N")); DP_TRY(ck_int("gemm", K, "K"));
    DP_TRY(ck_int("gemm", batch, "batch"));
    if (M == 0 || N == 0 || batch == 0) return DP_OK;
    if (K == 0) { /* the empty sum: C = alpha 0 + beta C, as the host writes it back (beta = 0: overwrite) */
        for (int64_t b = 0; b < batch; b++) {
            if (beta == 0.0) {
                DP_TRY(cu_memset0(CB(ctx)->cu, (char *)C + (size_t)(b * sC) * CB(ctx)->es, (size_t)(M * N) * CB(ctx)->es));
                continue;
            }
            if (CB(ctx)->f64) k_gemm_k0<double><<<GRID(M * N)>>>((double *)C + b * sC, alpha, beta, M * N);
            else k_gemm_k0<float><<<GRID(M * N)>>>((float *)C + b * sC, (float)alpha, (float)beta, M * N);
            DP_TRY(launched("k_gemm_k0"));
        }
        return DP_OK;
    }
    if (CB(ctx)->f64)
        return cu_gemm_t<double>(CB(ctx)->cu, (double *)C, (const double *)A, (const double *)B, ta, tb, alpha, beta,
                                 (int)M, (int)N, (int)K, sA, sB, sC, (int)batch);
    return cu_gemm_t<float>(CB(ctx)->cu, (float *)C, (const float *)A, (const float *)B, ta, tb, alpha, beta, (int)M,
                            (int)N, (int)K, sA, sB, sC, (int)batch);
}

template <typename R> __global__ void k_add_bias(R *y, const R *bias, int64_t rows, int64_t n) {
    FOR_I(rows * n) y[i] = rn_add(y[i], bias[i % n]);
}
/* thread per (g, j): out[g,j] (+)= sum_r x[g*per + r, j], r in order (the host's order) */
template <typename R>
__global__ void k_sum_rows(R *out, const R *x, int accumulate, int64_t groups, int64_t per, int64_t n) {
    FOR_I(groups * n) {
        int64_t g = i / n, j = i % n;
        R acc = accumulate ? out[i] : (R)0;
        for (int64_t r = 0; r < per; r++) acc = rn_add(acc, x[(g * per + r) * n + j]);
        out[i] = acc;
    }
}
template <typename R> __global__ void k_axpby(R *y, const R *x, R a, R b, int64_t n) {
    FOR_I(n) y[i] = rn_add(rn_mul(a, x[i]), b == (R)0 ? (R)0 : rn_mul(b, y[i]));
}
template <typename R> __global__ void k_add(R *y, const R *a, const R *b, int64_t n) { FOR_I(n) y[i] = rn_add(a[i], b[i]); }
template <typename R> __global__ void k_div_scalar(R *y, const R *x, R s, int64_t n) { FOR_I(n) y[i] = rn_div(x[i], s); }
template <typename R> __global__ void k_mul(R *y, const R *x, int64_t n) { FOR_I(n) y[i] = rn_mul(y[i], x[i]); }

template <typename R> static dp_status l_add_bias(void *ctx, void *y, const void *b, int64_t rows, int64_t n) {
    k_add_bias<R><<<GRID(rows * n)>>>((R *)y, (const R *)b, rows, n);
    return launched("k_add_bias");
}
template <typename R>
static dp_status l_sum_rows(void *ctx, void *out, const void *x, int acc, int64_t groups, int64_t per, int64_t n) {
    k_sum_rows<R><<<GRID(groups * n)>>>((R *)out, (const R *)x, acc, groups, per, n);
    return launched("k_sum_rows");
}
template <typename R> static dp_status l_axpby(void *ctx, void *y, const void *x, double a, double b, int64_t n) {
    k_axpby<R><<<GRID(n)>>>((R *)y, (const R *)x, (R)a, (R)b, n);
    return launched("k_axpby");
}
template <typename R> static dp_status l_add(void *ctx, void *y, const void *a, const void *b, int64_t n) {
    k_add<R><<<GRID(n)>>>((R *)y, (const R *)a, (const R *)b, n);
    return launched("k_add");
}
template <typename R> static dp_status l_div(void *ctx, void *y, const void *x, double s, int64_t n) {
    k_div_scalar<R><<<GRID(n)>>>((R *)y, (const R *)x, (R)s, n);
    return launched("k_div_scalar");
}
template <typename R> static dp_status l_mul(void *ctx, void *y, const void *x, int64_t n) {
    k_mul<R><<<GRID(n)>>>((R *)y, (const R *)x, n);
    return launched("k_mul");
}
static dp_status cb_add_bias(void *ctx, void *y, const void *bias, int64_t rows, int64_t n) {
    DP_TRY(ck_n("add_bias", rows)); DP_TRY(ck_n("add_bias", n));
    return (rows > 0 && n > 0) ? DISPATCH(l_add_bias, ctx, y, bias, rows, n) : DP_OK;
}
static dp_status cb_sum_rows(void *ctx, void *out, const void *x, int accumulate, int64_t groups, int64_t per, int64_t n) {
    DP_TRY(ck_n("sum_rows", groups)); DP_TRY(ck_n("sum_rows", per)); DP_TRY(ck_n("sum_rows", n));
    return (groups > 0 && n > 0) ? DISPATCH(l_sum_rows, ctx, out, x, accumulate, groups, per, n) : DP_OK;
}
static dp_status cb_axpby(void *ctx, void *y, const void *x, double alpha, double beta, int64_t n) {
    DP_TRY(ck_n("axpby", n));
    return n ? DISPATCH(l_axpby, ctx, y, x, alpha, beta, n) : DP_OK;
}
static dp_status cb_add(void *ctx, void *y, const void *a, const void *b, int64_t n) {
    DP_TRY(ck_n("add", n));
    return n ? DISPATCH(l_add, ctx, y, a, b, n) : DP_OK;
}
static dp_status cb_div_scalar(void *ctx, void *y, const void *x, double s, int64_t n) {
    DP_TRY(ck_n("div_scalar", n));
    if (!(s != 0) || !isfinite(s)) return dp_error(DP_ERR_INVALID, "cuda div_scalar: divisor must be finite and nonzero (got %g)", s);
    return n ? DISPATCH(l_div, ctx, y, x, s, n) : DP_OK;
}
static dp_status cb_mul(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("mul", n));
    return n ? DISPATCH(l_mul, ctx, y, x, n) : DP_OK;
}

/* ---------------- pointwise (the host's formulas; transcendental functions in double) ---------------- */
template <typename R> __device__ __forceinline__ R cb_sigmoid(R a) { return (R)(1.0 / (1.0 + exp(-(double)a))); }
template <typename R> __global__ void k_tanh_fwd(R *y, const R *x, int64_t n) { FOR_I(n) y[i] = (R)tanh((double)x[i]); }
template <typename R> __global__ void k_tanh_bwd(R *dx, const R *dy, const R *y, int64_t n) {
    FOR_I(n) dx[i] = rn_mul(dy[i], rn_sub((R)1, rn_mul(y[i], y[i])));
}
template <typename R> __global__ void k_silu_fwd(R *y, const R *x, int64_t n) { FOR_I(n) y[i] = rn_mul(x[i], cb_sigmoid(x[i])); }
template <typename R> __global__ void k_silu_bwd(R *dx, const R *dy, const R *x, int64_t n) {
    FOR_I(n) {
        R s = cb_sigmoid(x[i]);
        dx[i] = rn_mul(dy[i], rn_mul(s, rn_add((R)1, rn_mul(x[i], rn_sub((R)1, s)))));
    }
}
template <typename R> static dp_status l_tanh_fwd(void *ctx, void *y, const void *x, int64_t n) {
    k_tanh_fwd<R><<<GRID(n)>>>((R *)y, (const R *)x, n);
    return launched("k_tanh_fwd");
}
template <typename R> static dp_status l_tanh_bwd(void *ctx, void *dx, const void *dy, const void *y, int64_t n) {
    k_tanh_bwd<R><<<GRID(n)>>>((R *)dx, (const R *)dy, (const R *)y, n);
    return launched("k_tanh_bwd");
}
template <typename R> static dp_status l_silu_fwd(void *ctx, void *y, const void *x, int64_t n) {
    k_silu_fwd<R><<<GRID(n)>>>((R *)y, (const R *)x, n);
    return launched("k_silu_fwd");
}
template <typename R> static dp_status l_silu_bwd(void *ctx, void *dx, const void *dy, const void *x, int64_t n) {
    k_silu_bwd<R><<<GRID(n)>>>((R *)dx, (const R *)dy, (const R *)x, n);
    return launched("k_silu_bwd");
}
static dp_status cb_tanh_fwd(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("tanh_fwd", n));
    return n ? DISPATCH(l_tanh_fwd, ctx, y, x, n) : DP_OK;
}
static dp_status cb_tanh_bwd(void *ctx, void *dx, const void *dy, const void *y, int64_t n) {
    DP_TRY(ck_n("tanh_bwd", n));
    return n ? DISPATCH(l_tanh_bwd, ctx, dx, dy, y, n) : DP_OK;
}
static dp_status cb_silu_fwd(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("silu_fwd", n));
    return n ? DISPATCH(l_silu_fwd, ctx, y, x, n) : DP_OK;
}
static dp_status cb_silu_bwd(void *ctx, void *dx, const void *dy, const void *x, int64_t n) {
    DP_TRY(ck_n("silu_bwd", n));
    return n ? DISPATCH(l_silu_bwd, ctx, dx, dy, x, n) : DP_OK;
}
static dp_status cb_swiglu_fwd(void *ctx, void *h, const void *a, const void *b, int64_t n) {
    if (CB(ctx)->f64) return cu_swiglu_fwd_t<double>(CB(ctx)->cu, (double *)h, (const double *)a, (const double *)b, n);
    return cu_swiglu_fwd_t<float>(CB(ctx)->cu, (float *)h, (const float *)a, (const float *)b, n);
}
static dp_status cb_swiglu_bwd(void *ctx, void *da, void *db, const void *dh, const void *a, const void *b, int64_t n) {
    if (CB(ctx)->f64)
        return cu_swiglu_bwd_t<double>(CB(ctx)->cu, (double *)da, (double *)db, (const double *)dh, (const double *)a,
                                       (const double *)b, n);
    return cu_swiglu_bwd_t<float>(CB(ctx)->cu, (float *)da, (float *)db, (const float *)dh, (const float *)a,
                                  (const float *)b, n);
}

/* ---------------- rmsnorm / rope / attention ---------------- */
static dp_status cb_rmsnorm_fwd(void *ctx, void *y, void *rstd, const void *x, const void *g, double eps, int64_t rows,
                                int64_t D) {
    DP_TRY(ck_int("rmsnorm_fwd", rows, "rows")); DP_TRY(ck_int("rmsnorm_fwd", D, "D"));
    if (CB(ctx)->f64)
        return cu_rmsnorm_fwd_t<double>(CB(ctx)->cu, (double *)y, (double *)rstd, (const double *)x, (const double *)g,
                                        eps, (int)rows, (int)D);
    return cu_rmsnorm_fwd_t<float>(CB(ctx)->cu, (float *)y, (float *)rstd, (const float *)x, (const float *)g, eps,
                                   (int)rows, (int)D);
}
/* block per row: dx (may be NULL) and dg_rows (may be NULL) */
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
template <typename R>
static dp_status l_rmsnorm_bwd(void *ctx, void *dx, void *dg, const void *dy, const void *x, const void *rstd, const void *g,
                               int64_t rows, int64_t D) {
    k_rmsnorm_bwd_rows<R><<<(unsigned)rows, 128, 0, STREAM(ctx)>>>((R *)dx, (R *)dg, (const R *)dy, (const R *)x,
                                                                    (const R *)rstd, (const R *)g, D);
    return launched("k_rmsnorm_bwd_rows");
}
static dp_status cb_rmsnorm_bwd(void *ctx, void *dx, void *dg_rows, const void *dy, const void *x, const void *rstd,
                                const void *g, int64_t rows, int64_t D) {
    DP_TRY(ck_int("rmsnorm_bwd", rows, "rows")); DP_TRY(ck_n("rmsnorm_bwd", D));
    if (!rows || !D) return DP_OK;
    return DISPATCH(l_rmsnorm_bwd, ctx, dx, dg_rows, dy, x, rstd, g, rows, D);
}
static dp_status cb_rope(void *ctx, void *y, const void *x, double theta, int64_t B, int64_t T, int64_t H, int64_t hd,
                         int inverse) {
    DP_TRY(ck_int("rope", B, "B")); DP_TRY(ck_int("rope", T, "T")); DP_TRY(ck_int("rope", H, "H")); DP_TRY(ck_int("rope", hd, "hd"));
    if (y != x) DP_TRY(cb_copy(ctx, y, x, (size_t)(B * T * H * hd) * CB(ctx)->es));
    if (CB(ctx)->f64) return cu_rope_t<double>(CB(ctx)->cu, (double *)y, theta, inverse, (int)B, (int)T, (int)H, (int)hd);
    return cu_rope_t<float>(CB(ctx)->cu, (float *)y, theta, inverse, (int)B, (int)T, (int)H, (int)hd);
}
static dp_status cb_rope_fwd(void *ctx, void *y, const void *x, double theta, int64_t B, int64_t T, int64_t H, int64_t hd) {
    return cb_rope(ctx, y, x, theta, B, T, H, hd, 0);
}
static dp_status cb_rope_bwd(void *ctx, void *dx, const void *dy, double theta, int64_t B, int64_t T, int64_t H, int64_t hd) {
    return cb_rope(ctx, dx, dy, theta, B, T, H, hd, 1);
}
static dp_status cb_attn_fwd(void *ctx, void *out, void *probs, const void *q, const void *k, const void *v, int64_t B,
                             int64_t T, int64_t H, int64_t hd) {
    DP_TRY(ck_int("attn_fwd", B, "B")); DP_TRY(ck_int("attn_fwd", T, "T")); DP_TRY(ck_int("attn_fwd", H, "H"));
    DP_TRY(ck_int("attn_fwd", hd, "hd"));
    if (CB(ctx)->f64)
        return cu_attention_fwd_t<double>(CB(ctx)->cu, (double *)out, (double *)probs, (const double *)q,
                                          (const double *)k, (const double *)v, (int)B, (int)T, (int)H, (int)hd);
    return cu_attention_fwd_t<float>(CB(ctx)->cu, (float *)out, (float *)probs, (const float *)q, (const float *)k,
                                     (const float *)v, (int)B, (int)T, (int)H, (int)hd);
}
static dp_status cb_attn_bwd(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                             const void *v, const void *probs, int64_t B, int64_t T, int64_t H, int64_t hd) {
    DP_TRY(ck_int("attn_bwd", B, "B")); DP_TRY(ck_int("attn_bwd", T, "T")); DP_TRY(ck_int("attn_bwd", H, "H"));
    DP_TRY(ck_int("attn_bwd", hd, "hd"));
    void *dpre;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &dpre, (size_t)(B * H * T * T) * CB(ctx)->es, SLOT_TMP));
    if (CB(ctx)->f64)
        return cu_attention_bwd_t<double>(CB(ctx)->cu, (double *)dq, (double *)dk, (double *)dv, (double *)dpre,
                                          (const double *)dout, (const double *)q, (const double *)k, (const double *)v,
                                          (const double *)probs, (int)B, (int)T, (int)H, (int)hd);
    return cu_attention_bwd_t<float>(CB(ctx)->cu, (float *)dq, (float *)dk, (float *)dv, (float *)dpre, (const float *)dout,
                                     (const float *)q, (const float *)k, (const float *)v, (const float *)probs, (int)B,
                                     (int)T, (int)H, (int)hd);
}

/* ---------------- cross-entropy and embedding ---------------- */
static dp_status flag_get(void *ctx, int **flag) {
    void *p;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &p, sizeof(int), SLOT_FLAG));
    *flag = (int *)p;
    CU_CHECK(cudaMemsetAsync(p, 0, sizeof(int), STREAM(ctx)));
    return DP_OK;
}
static dp_status flag_read(void *ctx, int *flag, int *v) {
    CU_CHECK(cudaMemcpyAsync(v, flag, sizeof(int), cudaMemcpyDeviceToHost, STREAM(ctx)));
    CU_CHECK(cudaStreamSynchronize(STREAM(ctx)));
    return DP_OK;
}
/* block per row; BWD 0: loss, 1: dz (the host's formulas, exp/log in double). Labels < 0
 * give 0; labels >= V set the flag. */
template <typename R, int BWD>
__global__ void k_xent(R *out, int *bad, const R *z, const int32_t *y, const R *w, int64_t V) {
    __shared__ R sh[33];
    int64_t r = blockIdx.x;
    int32_t lab = y[r];
    const R *zr = z + r * V;
    if (lab < 0 || lab >= V) {
        if (lab >= V && threadIdx.x == 0) atomicMax(bad, (int)r + 1);
        if (BWD) for (int64_t j = threadIdx.x; j < V; j += blockDim.x) out[r * V + j] = (R)0;
        else if (threadIdx.x == 0) out[r] = (R)0;
        return;
    }
    R mx = (R)-INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) mx = cu_max(mx, zr[j]);
    mx = cu_block_max(mx, sh, (R)-INFINITY);
    R s = 0;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) s += (R)exp((double)(zr[j] - mx));
    s = cu_block_sum(s, sh);
    if (!BWD) {
        if (threadIdx.x == 0) out[r] = w[r] * (mx + (R)log((double)s) - zr[lab]);
    } else {
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
            out[r * V + j] = w[r] * ((R)exp((double)(zr[j] - mx)) / s - (j == lab ? (R)1 : (R)0));
    }
}
template <typename R>
static dp_status l_xent(void *ctx, void *out, int *flag, const void *z, const int32_t *y, const void *w, int64_t rows,
                        int64_t V, int bwd) {
    if (bwd) k_xent<R, 1><<<(unsigned)rows, 128, 0, STREAM(ctx)>>>((R *)out, flag, (const R *)z, y, (const R *)w, V);
    else k_xent<R, 0><<<(unsigned)rows, 128, 0, STREAM(ctx)>>>((R *)out, flag, (const R *)z, y, (const R *)w, V);
    return launched("k_xent");
}
static dp_status cb_xent(void *ctx, void *out, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V,
                         int bwd) {
    DP_TRY(ck_int("xent", rows, "rows")); DP_TRY(ck_n("xent", V));
    if (!rows) return DP_OK;
    if (V == 0) return dp_error(DP_ERR_INVALID, "cuda xent: V must be >= 1");
    int *flag;
    DP_TRY(flag_get(ctx, &flag));
    DP_TRY(DISPATCH(l_xent, ctx, out, flag, z, y, w, rows, V, bwd));
    int bad = 0;
    DP_TRY(flag_read(ctx, flag, &bad));
    if (bad) return dp_error(DP_ERR_INVALID, "xent: label of row %d out of range [0, %lld)", bad - 1, (long long)V);
    return DP_OK;
}
static dp_status cb_xent_fwd(void *ctx, void *loss, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V) {
    return cb_xent(ctx, loss, z, y, w, rows, V, 0);
}
static dp_status cb_xent_bwd(void *ctx, void *dz, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V) {
    return cb_xent(ctx, dz, z, y, w, rows, V, 1);
}
static dp_status cb_embed_fwd(void *ctx, void *out, const void *table, const int32_t *ids, int64_t rows, int64_t V, int64_t D) {
    DP_TRY(ck_int("embed_fwd", rows, "rows")); DP_TRY(ck_int("embed_fwd", V, "V")); DP_TRY(ck_int("embed_fwd", D, "D"));
    if (CB(ctx)->f64)
        return cu_embedding_fwd_t<double>(CB(ctx)->cu, (double *)out, ids, (const double *)table, (int)rows, (int)V, (int)D);
    return cu_embedding_fwd_t<float>(CB(ctx)->cu, (float *)out, ids, (const float *)table, (int)rows, (int)V, (int)D);
}
/* thread per (g, j): walks the group's rows in order, so each dtable element has one writer */
template <typename R>
__global__ void k_embed_bwd(R *dt, int *bad, const R *dy, const int32_t *ids, int64_t rows, int64_t per, int64_t V, int64_t D) {
    int64_t groups = (rows + per - 1) / per;
    FOR_I(groups * D) {
        int64_t g = i / D, j = i % D;
        for (int64_t r = g * per; r < rows && r < (g + 1) * per; r++) {
            int32_t id = ids[r];
            if (id < 0 || id >= V) { atomicMax(bad, (int)(r + 1)); continue; }
            dt[(g * V + id) * D + j] = rn_add(dt[(g * V + id) * D + j], dy[r * D + j]);
        }
    }
}
template <typename R>
static dp_status l_embed_bwd(void *ctx, void *dt, int *flag, const void *dy, const int32_t *ids, int64_t rows, int64_t per,
                             int64_t V, int64_t D) {
    int64_t groups = (rows + per - 1) / per;
    k_embed_bwd<R><<<GRID(groups * D)>>>((R *)dt, flag, (const R *)dy, ids, rows, per, V, D);
    return launched("k_embed_bwd");
}
static dp_status cb_embed_bwd(void *ctx, void *dtable, const void *dy, const int32_t *ids, int64_t rows, int64_t per,
                              int64_t V, int64_t D) {
    DP_TRY(ck_int("embed_bwd", rows, "rows")); DP_TRY(ck_n("embed_bwd", V)); DP_TRY(ck_n("embed_bwd", D));
    if (per <= 0) return dp_error(DP_ERR_INVALID, "embed_bwd: per must be >= 1");
    if (!rows || !D) return DP_OK;
    int *flag;
    DP_TRY(flag_get(ctx, &flag));
    DP_TRY(DISPATCH(l_embed_bwd, ctx, dtable, flag, dy, ids, rows, per, V, D));
    int bad = 0;
    DP_TRY(flag_read(ctx, flag, &bad));
    if (bad) return dp_error(DP_ERR_INVALID, "embedding: token at row %d out of range [0, %lld)", bad - 1, (long long)V);
    return DP_OK;
}

/* ---------------- DP operations ---------------- */
/* sq[b] += (R) sqd[b] */
template <typename R> __global__ void k_add_sq(R *sq, const double *sqd, int64_t B) { FOR_I(B) sq[i] = rn_add(sq[i], (R)sqd[i]); }
template <typename R> static dp_status l_add_sq(void *ctx, void *sq, const double *sqd, int64_t B) {
    k_add_sq<R><<<GRID(B)>>>((R *)sq, sqd, B);
    return launched("k_add_sq");
}
static dp_status cb_sqnorm_rows(void *ctx, void *sq, const void *g, int64_t B, int64_t n) {
    DP_TRY(ck_int("sqnorm_rows", B, "B")); DP_TRY(ck_n("sqnorm_rows", n));
    if (!B) return DP_OK;
    void *sqd;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &sqd, (size_t)B * sizeof(double), SLOT_SQD));
    if (CB(ctx)->f64) DP_TRY(cu_rows_sqnorm_t<double>(CB(ctx)->cu, (double *)sqd, (const double *)g, n, (int)B));
    else DP_TRY(cu_rows_sqnorm_t<float>(CB(ctx)->cu, (double *)sqd, (const float *)g, n, (int)B));
    return DISPATCH(l_add_sq, ctx, sq, (const double *)sqd, B);
}
static dp_status cb_ghost_sqnorm(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d, int64_t p) {
    DP_TRY(ck_int("ghost_sqnorm", B, "B")); DP_TRY(ck_int("ghost_sqnorm", T, "T"));
    DP_TRY(ck_int("ghost_sqnorm", d, "d")); DP_TRY(ck_int("ghost_sqnorm", p, "p"));
    if (!B) return DP_OK;
    void *sqd;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &sqd, (size_t)B * sizeof(double), SLOT_SQD));
    if (CB(ctx)->f64)
        DP_TRY(cu_ghost_sqnorm_t<double>(CB(ctx)->cu, (double *)sqd, (const double *)A, (const double *)G, 0, (int)B,
                                         (int)T, (int)d, (int)p));
    else
        DP_TRY(cu_ghost_sqnorm_t<float>(CB(ctx)->cu, (double *)sqd, (const float *)A, (const float *)G, 0, (int)B, (int)T,
                                        (int)d, (int)p));
    return DISPATCH(l_add_sq, ctx, sq, (const double *)sqd, B);
}
/* the host backend's clip function (optimized/host/host_kern.h) */
template <typename R> __device__ __forceinline__ R cb_clipfn(R sq, double C, int automatic, double gamma) {
    double n = sqrt((double)sq);
    if (automatic) return (R)(C / (n + gamma));
    return (R)(n > C ? C / n : 1.0);
}
template <typename R> __global__ void k_clip_factors_fn(R *c, const R *sq, double C, int automatic, double gamma, int64_t B) {
    FOR_I(B) c[i] = cb_clipfn(sq[i], C, automatic, gamma);
}
static dp_status clip_args(const char *op, double C, opt_clip_fn fn, double gamma) {
    if (!(C > 0) || !isfinite(C)) return dp_error(DP_ERR_INVALID, "cuda %s: clip norm must be finite and > 0 (got %g)", op, C);
    if (fn != OPT_CLIP_ABADI && fn != OPT_CLIP_AUTOMATIC) return dp_error(DP_ERR_INVALID, "cuda %s: unknown clip function %d", op, (int)fn);
    if (fn == OPT_CLIP_AUTOMATIC && (!(gamma > 0) || !isfinite(gamma)))
        return dp_error(DP_ERR_INVALID, "cuda %s: automatic clipping needs gamma > 0 (got %g)", op, gamma);
    return DP_OK;
}
template <typename R>
static dp_status l_clip_factors(void *ctx, void *c, const void *sq, double C, int automatic, double gamma, int64_t B) {
    k_clip_factors_fn<R><<<GRID(B)>>>((R *)c, (const R *)sq, C, automatic, gamma, B);
    return launched("k_clip_factors_fn");
}
static dp_status cb_clip_factors(void *ctx, void *c, const void *sq, double C, opt_clip_fn fn, double gamma, int64_t B) {
    DP_TRY(clip_args("clip_factors", C, fn, gamma)); DP_TRY(ck_n("clip_factors", B));
    return B ? DISPATCH(l_clip_factors, ctx, c, sq, C, fn == OPT_CLIP_AUTOMATIC, gamma, B) : DP_OK;
}
/* sum[j] = (((sum[j] + c0 g0j) + c1 g1j) + ...), b in order (the host's order) */
template <typename R> __global__ void k_clip_accum(R *sum, const R *g, const R *c, int64_t B, int64_t n) {
    FOR_I(n) {
        R acc = sum[i];
        for (int64_t b = 0; b < B; b++) acc = rn_add(acc, rn_mul(c[b], g[b * n + i]));
        sum[i] = acc;
    }
}
template <typename R> static dp_status l_clip_accum(void *ctx, void *sum, const void *g, const void *c, int64_t B, int64_t n) {
    k_clip_accum<R><<<GRID(n)>>>((R *)sum, (const R *)g, (const R *)c, B, n);
    return launched("k_clip_accum");
}
static dp_status cb_clip_accum(void *ctx, void *sum, const void *g, const void *c, int64_t B, int64_t n) {
    DP_TRY(ck_n("clip_accum", B)); DP_TRY(ck_n("clip_accum", n));
    return (n && B) ? DISPATCH(l_clip_accum, ctx, sum, g, c, B, n) : DP_OK;
}
static dp_status cb_bk_gemm(void *ctx, void *dW, const void *A, const void *G, const void *c, int64_t B, int64_t T,
                            int64_t d, int64_t p) {
    DP_TRY(ck_int("bk_gemm", B * T, "B*T")); DP_TRY(ck_int("bk_gemm", d, "d")); DP_TRY(ck_int("bk_gemm", p, "p"));
    if (!B || !T || !d || !p) return DP_OK;
    void *Gs;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &Gs, (size_t)(B * T * p) * CB(ctx)->es, SLOT_TMP));
    if (CB(ctx)->f64)
        return cu_bk_wgrad_t<double>(CB(ctx)->cu, (double *)dW, (double *)Gs, (const double *)A, (const double *)G,
                                     (const double *)c, (int)B, (int)T, (int)d, (int)p);
    return cu_bk_wgrad_t<float>(CB(ctx)->cu, (float *)dW, (float *)Gs, (const float *)A, (const float *)G,
                                (const float *)c, (int)B, (int)T, (int)d, (int)p);
}
/* per example of the chunk: sq = (R)||g_b||^2 (+ extra), c = clipfn(sq); outputs when asked */
template <typename R>
__global__ void k_chunk_factors(R *cs, R *sq_out, R *c_out, const double *sqd, const R *extra, double C, int automatic,
                                double gamma, int64_t nb) {
    FOR_I(nb) {
        R sq = (R)sqd[i];
        if (extra) sq = rn_add(sq, extra[i]);
        R c = cb_clipfn(sq, C, automatic, gamma);
        cs[i] = c;
        if (sq_out) sq_out[i] = sq;
        if (c_out) c_out[i] = c;
    }
}
/* dW[j] = ((dW[j] + c0 g0j) + c1 g1j) + ... over the chunk (the host's per-example order) */
template <typename R> __global__ void k_chunk_accum(R *dW, const R *ws, const R *cs, int64_t nb, int64_t n) {
    FOR_I(n) {
        R acc = dW[i];
        for (int64_t b = 0; b < nb; b++) acc = rn_add(acc, rn_mul(cs[b], ws[b * n + i]));
        dW[i] = acc;
    }
}
/* The fused path in the engine's dtype: per chunk one strided-batched GEMM of per-example
 * blocks, the hierarchical norms, the factors, and the clipped accumulation
 * (cu_dp_fused_wgrad_bf16 is the bf16 form of the same pipeline). sq_acc != NULL: norms only. */
template <typename R>
static dp_status fused_t(void *ctx, R *dW, R *sq_out, R *c_out, const R *A, const R *G, const R *extra, double C,
                         opt_clip_fn fn, double gamma, int64_t B, int64_t T, int64_t d, int64_t p, R *sq_acc) {
    cu_ctx *cu = CB(ctx)->cu;
    int64_t n = p * d;
    /* the same byte budget for f32 and f64 blocks (cu_fused_chunk counts 4-byte elements) */
    int bc = cu_fused_chunk(CU_FUSED_WS_BYTES * 4 / (int64_t)sizeof(R), (int)B, p, d);
    void *ws, *sqd, *cs;
    DP_TRY(cu_ctx_scratch_(cu, &ws, (size_t)(n * bc) * sizeof(R), SLOT_WS));
    DP_TRY(cu_ctx_scratch_(cu, &sqd, (size_t)bc * sizeof(double), SLOT_SQD));
    DP_TRY(cu_ctx_scratch_(cu, &cs, (size_t)bc * sizeof(R), SLOT_C));
    for (int64_t b0 = 0; b0 < B; b0 += bc) {
        int64_t nb = B - b0 < bc ? B - b0 : bc;
        DP_TRY(cu_gemm_t<R>(cu, (R *)ws, G + b0 * T * p, A + b0 * T * d, 1, 0, 1.0, 0.0, (int)p, (int)d, (int)T, T * p,
                            T * d, n, (int)nb));
        DP_TRY(cu_rows_sqnorm_t<R>(cu, (double *)sqd, (const R *)ws, n, (int)nb));
        if (sq_acc) {
            k_add_sq<R><<<GRID(nb)>>>(sq_acc + b0, (const double *)sqd, nb);
            DP_TRY(launched("k_add_sq"));
            continue;
        }
        k_chunk_factors<R><<<GRID(nb)>>>((R *)cs, sq_out ? sq_out + b0 : NULL, c_out ? c_out + b0 : NULL, (const double *)sqd,
                                         extra ? extra + b0 : NULL, C, fn == OPT_CLIP_AUTOMATIC, gamma, nb);
        DP_TRY(launched("k_chunk_factors"));
        k_chunk_accum<R><<<GRID(n)>>>(dW, (const R *)ws, (const R *)cs, nb, n);
        DP_TRY(launched("k_chunk_accum"));
    }
    return DP_OK;
}
static dp_status fused_args(int64_t B, int64_t T, int64_t d, int64_t p) {
    DP_TRY(ck_int("fused", B, "B")); DP_TRY(ck_int("fused", T, "T")); DP_TRY(ck_int("fused", d, "d")); DP_TRY(ck_int("fused", p, "p"));
    if (B && (!T || !d || !p)) return dp_error(DP_ERR_INVALID, "cuda fused: T, d, p must be >= 1");
    return DP_OK;
}
static dp_status cb_fused_clip_accum(void *ctx, void *dW, void *sq_out, void *c_out, const void *A, const void *G,
                                     const void *extra_sq, double C, opt_clip_fn fn, double gamma, int64_t B, int64_t T,
                                     int64_t d, int64_t p) {
    DP_TRY(clip_args("fused_clip_accum", C, fn, gamma));
    DP_TRY(fused_args(B, T, d, p));
    if (!B) return DP_OK;
    if (CB(ctx)->f64)
        return fused_t<double>(ctx, (double *)dW, (double *)sq_out, (double *)c_out, (const double *)A, (const double *)G,
                               (const double *)extra_sq, C, fn, gamma, B, T, d, p, NULL);
    return fused_t<float>(ctx, (float *)dW, (float *)sq_out, (float *)c_out, (const float *)A, (const float *)G,
                          (const float *)extra_sq, C, fn, gamma, B, T, d, p, NULL);
}
static dp_status cb_fused_sqnorm(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d, int64_t p) {
    DP_TRY(fused_args(B, T, d, p));
    if (!B) return DP_OK;
    if (CB(ctx)->f64)
        return fused_t<double>(ctx, NULL, NULL, NULL, (const double *)A, (const double *)G, NULL, 1.0, OPT_CLIP_ABADI, 0.0,
                               B, T, d, p, (double *)sq);
    return fused_t<float>(ctx, NULL, NULL, NULL, (const float *)A, (const float *)G, NULL, 1.0, OPT_CLIP_ABADI, 0.0, B, T,
                          d, p, (float *)sq);
}
static dp_status cb_noise_add(void *ctx, void *x, dp_noise_key key, uint32_t stream, uint32_t lane, double std,
                              uint64_t offset, int64_t n) {
    if (CB(ctx)->f64) return cu_noise_add_t<double>(CB(ctx)->cu, (double *)x, key.k, stream, lane, offset, std, n);
    return cu_noise_add_t<float>(CB(ctx)->cu, (float *)x, key.k, stream, lane, offset, std, n);
}

/* ---------------- optimizers (the host's formulas, operation by operation) ----------------
 * optimized/host/host_kern.h, sgd_momentum and adamw, f32 or f64 (R):
 *   sgd:   gi = wd != 0 ? g + (R)wd * p : g;  buf = (R)mu * buf + gi;  p = p - (R)lr * buf
 *          (buf always updated, no first-step special case, t unused)
 *   adamw: bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t) (double, glibc pow on the host side of
 *          both backends); decay = (R)(1 - lr*wd), step = (R)(lr / bc1), sbc2 = (R)sqrt(bc2);
 *          p = p * decay; m = (R)b1 * m + (R)(1 - b1) * g; v = (R)b2 * v + (R)(1 - b2) * (g * g);
 *          denom = (R)sqrt((double)v) / sbc2 + (R)eps; p = p - step * (m / denom)
 * Every product, sum, quotient is one correctly rounded rn_ operation (the host is compiled
 * with -ffp-contract=off); the scalars are computed on the host exactly as host_kern.h does. */
template <typename R>
__global__ void k_sgd(R *p, R *buf, const R *g, R lr, R mu, int use_wd, R wd, int64_t n) {
    FOR_I(n) {
        R gi = use_wd ? rn_add(g[i], rn_mul(wd, p[i])) : g[i];
        R bi = rn_add(rn_mul(mu, buf[i]), gi);
        buf[i] = bi;
        p[i] = rn_sub(p[i], rn_mul(lr, bi));
    }
}
template <typename R>
static dp_status l_sgd(void *ctx, void *param, void *buf, const void *grad, double lr, double mu, double wd, int64_t n) {
    k_sgd<R><<<GRID(n)>>>((R *)param, (R *)buf, (const R *)grad, (R)lr, (R)mu, wd != 0, (R)wd, n);
    return launched("k_sgd");
}
static dp_status cb_sgd_momentum(void *ctx, void *param, void *buf, const void *grad, double lr, double mu, double wd,
                                 int64_t t, int64_t n) {
    (void)t; /* unused, as on the host */
    DP_TRY(ck_n("sgd_momentum", n));
    return n ? DISPATCH(l_sgd, ctx, param, buf, grad, lr, mu, wd, n) : DP_OK;
}
template <typename R>
__global__ void k_adamw(R *p, R *m, R *v, const R *g, R decay, R b1, R omb1, R b2, R omb2, R step, R sbc2, R eps, int64_t n) {
    FOR_I(n) {
        R gr = g[i];
        R pi = rn_mul(p[i], decay);
        R mi = rn_add(rn_mul(b1, m[i]), rn_mul(omb1, gr));
        R vi = rn_add(rn_mul(b2, v[i]), rn_mul(omb2, rn_mul(gr, gr)));
        m[i] = mi;
        v[i] = vi;
        R denom = rn_add(rn_div((R)sqrt((double)vi), sbc2), eps); /* double sqrt: IEEE, correctly rounded */
        p[i] = rn_sub(pi, rn_mul(step, rn_div(mi, denom)));
    }
}
/* the host's scalars: volatile stops the host compiler from contracting 1 - lr*wd */
template <typename R>
static dp_status l_adamw(void *ctx, void *param, void *m, void *v, const void *grad, double lr, double b1, double b2,
                         double eps, double wd, double bc1, double bc2, int64_t n) {
    volatile double lrwd = lr * wd;
    const R decay = (R)(1.0 - lrwd), step = (R)(lr / bc1), sbc2 = (R)sqrt(bc2);
    k_adamw<R><<<GRID(n)>>>((R *)param, (R *)m, (R *)v, (const R *)grad, decay, (R)b1, (R)(1.0 - b1), (R)b2,
                            (R)(1.0 - b2), step, sbc2, (R)eps, n);
    return launched("k_adamw");
}
static dp_status cb_adamw(void *ctx, void *param, void *m, void *v, const void *grad, double lr, double b1, double b2,
                          double eps, double wd, int64_t t, int64_t n) {
    DP_TRY(ck_n("adamw", n));
    if (t < 1) return dp_error(DP_ERR_INVALID, "cuda adamw: step t must be >= 1 (got %lld)", (long long)t);
    if (!n) return DP_OK;
    const double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    return DISPATCH(l_adamw, ctx, param, m, v, grad, lr, b1, b2, eps, wd, bc1, bc2, n);
}

/* ---------------- collectives ---------------- */
typedef struct {
    cudaEvent_t ev;
    const char *what; /* the collective, for the timeout message */
} cb_async;

/* Polls an event (or, ev == NULL, the comm stream) until the collective timeout. */
typedef struct {
    cudaEvent_t ev;
    cudaStream_t s;
} cb_pending;
static int cb_test(void *arg, dp_status *err) {
    cb_pending *p = (cb_pending *)arg;
    cudaError_t e = p->ev ? cudaEventQuery(p->ev) : cudaStreamQuery(p->s);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    *err = cu_check_cuda_(e, p->ev ? "cudaEventQuery(collective)" : "cudaStreamQuery(comm stream)", __FILE__, __LINE__);
    return -1;
}
static dp_status cb_wait_done(void *ctx, cudaEvent_t ev, const char *what) {
    cb_pending p = {ev, (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu)};
    dp_status st = opt_poll_until(cb_test, &p, CB(ctx)->timeout, what, CB(ctx)->rank);
    if (st != DP_OK && CB(ctx)->comm && !CB(ctx)->aborted) {
        /* the collective stays in flight: abort it, so that the streams can be destroyed */
        cu_comm_abort(CB(ctx)->comm);
        CB(ctx)->aborted = 1;
    }
    return st;
}
static dp_status cb_finish(void *ctx, opt_async **async, const char *what) {
    cu_ctx *cu = CB(ctx)->cu;
    cudaStream_t cs = (cudaStream_t)cu_ctx_comm_stream(cu);
    if (!async) return cb_wait_done(ctx, NULL, what);
    cb_async *a = (cb_async *)dp_calloc(1, sizeof *a);
    if (!a) return dp_error(DP_ERR_NOMEM, "cuda collective: out of host memory");
    a->what = what;
    dp_status st = CU_CHECK_ST(cudaEventCreateWithFlags(&a->ev, cudaEventDisableTiming));
    if (st == DP_OK) st = CU_CHECK_ST(cudaEventRecord(a->ev, cs));
    if (st != DP_OK) {
        if (a->ev) cudaEventDestroy(a->ev);
        dp_free(a);
        return st;
    }
    *async = (opt_async *)a;
    return DP_OK;
}
static dp_status cb_wait(void *ctx, opt_async *h) {
    if (!h) return DP_OK;
    cb_async *a = (cb_async *)h;
    dp_status st = cb_wait_done(ctx, a->ev, a->what);
    cudaEventDestroy(a->ev);
    dp_free(a);
    return st;
}
static dp_status cb_set_timeout(void *ctx, double seconds) {
    if (!(seconds > 0) || seconds > 1e6)
        return dp_error(DP_ERR_USAGE, "--collective-timeout must be in (0, 1e6] seconds (got %g)", seconds);
    CB(ctx)->timeout = seconds;
    return DP_OK;
}
/* An MPI request of allgatherv_bytes / barrier, completed under the collective timeout. */
static int cb_mpi_test(void *req, dp_status *err) {
    int done = 0;
    if (MPI_Test((MPI_Request *)req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        *err = dp_error(DP_ERR_DEVICE, "MPI_Test failed");
        return -1;
    }
    return done;
}
static dp_status cb_mpi_wait(void *ctx, int rc, MPI_Request *req, const char *what) {
    if (rc != MPI_SUCCESS) return dp_error(DP_ERR_DEVICE, "%s: MPI call failed", what);
    return opt_poll_until(cb_mpi_test, req, CB(ctx)->timeout, what, CB(ctx)->rank);
}
/* Process groups other than the world are not supported yet (docs/cuda.md). */
static dp_status world_only(const opt_group *g, const char *op) {
    if (!g) return DP_OK;
    return dp_error(DP_ERR_NOT_SUPPORTED, "the CUDA backend does not support operation '%s' on a process group "
                    "other than the world (use --backend host for --dp/--cp layouts)", op);
}
static dp_status coll_begin(void *ctx, const opt_group *g, opt_async **async, int64_t n, const char *op) {
    if (async) *async = NULL;
    DP_TRY(world_only(g, op));
    DP_TRY(ck_n(op, n));
    if (CB(ctx)->aborted)
        return dp_error(DP_ERR_DEVICE, "cuda %s: the communicator was aborted after a collective timed out", op);
    return cu_comm_wait_compute(CB(ctx)->cu);
}
static int multi(void *ctx) { return CB(ctx)->comm && CB(ctx)->size > 1; }
static dp_status local_copy(void *ctx, void *dst, const void *src, int64_t n) {
    if (dst == src || !n) return DP_OK;
    CU_CHECK(cudaMemcpyAsync(dst, src, (size_t)n * CB(ctx)->es, cudaMemcpyDeviceToDevice,
                             (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu)));
    return DP_OK;
}
static dp_status nccl(void *ctx, cu_coll kind, void *out, const void *in, int64_t n, int peer) {
    return cu_comm_coll_(CB(ctx)->comm, kind, out, in, n, CB(ctx)->f64, peer);
}

static dp_status cb_allreduce(void *ctx, const opt_group *g, void *buf, int64_t n, opt_async **async) {
    DP_TRY(coll_begin(ctx, g, async, n, "allreduce_sum"));
    if (multi(ctx)) DP_TRY(nccl(ctx, CU_COLL_ALLREDUCE, buf, buf, n, 0));
    return cb_finish(ctx, async, "allreduce_sum");
}
static dp_status cb_reduce_scatter(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async) {
    DP_TRY(coll_begin(ctx, g, async, n, "reduce_scatter_sum"));
    DP_TRY(multi(ctx) ? nccl(ctx, CU_COLL_REDUCE_SCATTER, recv, send, n, 0) : local_copy(ctx, recv, send, n));
    return cb_finish(ctx, async, "reduce_scatter_sum");
}
static dp_status cb_allgather(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async) {
    DP_TRY(coll_begin(ctx, g, async, n, "allgather"));
    DP_TRY(multi(ctx) ? nccl(ctx, CU_COLL_ALLGATHER, recv, send, n, 0) : local_copy(ctx, recv, send, n));
    return cb_finish(ctx, async, "allgather");
}
static dp_status cb_alltoall(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async) {
    DP_TRY(coll_begin(ctx, g, async, n, "alltoall"));
    DP_TRY(multi(ctx) ? nccl(ctx, CU_COLL_ALLTOALL, recv, send, n, 0) : local_copy(ctx, recv, send, n));
    return cb_finish(ctx, async, "alltoall");
}
static dp_status cb_broadcast(void *ctx, const opt_group *g, void *buf, int64_t n, int root, opt_async **async) {
    DP_TRY(coll_begin(ctx, g, async, n, "broadcast"));
    if (root < 0 || root >= CB(ctx)->size) return dp_error(DP_ERR_INVALID, "broadcast: root %d out of range", root);
    if (multi(ctx)) DP_TRY(nccl(ctx, CU_COLL_BROADCAST, buf, buf, n, root));
    return cb_finish(ctx, async, "broadcast");
}
static dp_status p2p(void *ctx, const opt_group *g, cu_coll kind, void *out, const void *in, int64_t n, int peer, opt_async **async) {
    if (!multi(ctx) || peer < 0 || peer >= CB(ctx)->size || peer == CB(ctx)->rank) {
        if (async) *async = NULL;
        return dp_error(DP_ERR_INVALID, "%s: peer %d invalid (rank %d of %d)", kind == CU_COLL_SEND ? "send" : "recv", peer,
                        CB(ctx)->rank, CB(ctx)->size);
    }
    DP_TRY(coll_begin(ctx, g, async, n, kind == CU_COLL_SEND ? "send" : "recv"));
    DP_TRY(nccl(ctx, kind, out, in, n, peer));
    return cb_finish(ctx, async, kind == CU_COLL_SEND ? "send" : "recv");
}
static dp_status cb_send(void *ctx, const opt_group *g, const void *buf, int64_t n, int peer, int tag, opt_async **async) {
    return p2p(ctx, g, CU_COLL_SEND, NULL, buf, n, peer, async);
}
static dp_status cb_recv(void *ctx, const opt_group *g, void *buf, int64_t n, int peer, int tag, opt_async **async) {
    return p2p(ctx, g, CU_COLL_RECV, buf, NULL, n, peer, async);
}
static dp_status cb_allgatherv_bytes(void *ctx, void **recv, size_t *recv_len, const void *send, size_t nbytes) {
    *recv = NULL;
    *recv_len = 0;
    if (nbytes > 2147483647u) return dp_error(DP_ERR_INVALID, "allgatherv: %zu bytes is too large", nbytes);
    if (!multi(ctx)) {
        *recv = dp_malloc(nbytes ? nbytes : 1);
        if (!*recv) return dp_error(DP_ERR_NOMEM, "allgatherv: out of memory");
        if (nbytes) memcpy(*recv, send, nbytes);
        *recv_len = nbytes;
        return DP_OK;
    }
    int size = CB(ctx)->size, mine = (int)nbytes;
    int *counts = (int *)dp_calloc((size_t)size, sizeof(int)), *displs = (int *)dp_calloc((size_t)size, sizeof(int));
    if (!counts || !displs) { dp_free(counts); dp_free(displs); return dp_error(DP_ERR_NOMEM, "allgatherv: out of memory"); }
    dp_status st = DP_OK;
    MPI_Request req = MPI_REQUEST_NULL;
    st = cb_mpi_wait(ctx, MPI_Iallgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD, &req), &req,
                     "allgatherv_bytes");
    size_t total = 0;
    for (int r = 0; st == DP_OK && r < size; r++) {
        if (total + (size_t)counts[r] > 2147483647u) st = dp_error(DP_ERR_INVALID, "allgatherv: total too large");
        displs[r] = (int)total;
        total += (size_t)counts[r];
    }
    char *buf = NULL;
    if (st == DP_OK && !(buf = (char *)dp_malloc(total ? total : 1))) st = dp_error(DP_ERR_NOMEM, "allgatherv: out of memory");
    if (st == DP_OK)
        st = cb_mpi_wait(ctx, MPI_Iallgatherv(send, mine, MPI_BYTE, buf, counts, displs, MPI_BYTE, MPI_COMM_WORLD, &req),
                         &req, "allgatherv_bytes");
    if (st != DP_OK && req != MPI_REQUEST_NULL) return st; /* still in flight: its buffers stay (the run ends) */
    dp_free(counts);
    dp_free(displs);
    if (st != DP_OK) { dp_free(buf); return st; }
    *recv = buf;
    *recv_len = total;
    return DP_OK;
}
static dp_status cb_barrier(void *ctx, const opt_group *g) {
    DP_TRY(world_only(g, "barrier"));
    DP_TRY(cu_sync(CB(ctx)->cu));
    if (!multi(ctx)) return DP_OK;
    MPI_Request req = MPI_REQUEST_NULL;
    return cb_mpi_wait(ctx, MPI_Ibarrier(MPI_COMM_WORLD, &req), &req, "barrier");
}

/* ---------------- lifetime ---------------- */
static void cb_destroy(void *ctx) {
    if (!ctx) return;
    cu_comm_destroy(CB(ctx)->comm);
    cu_ctx_destroy(CB(ctx)->cu);
    dp_free(ctx);
}

extern "C" dp_status opt_backend_cuda_create(opt_backend *be, const opt_backend_config *cfg) {
    if (cfg->dtype != DP_F32 && cfg->dtype != DP_F64)
        return dp_error(DP_ERR_NOT_SUPPORTED, "backend 'cuda': dtype %s not supported (f32 or f64)", dp_dtype_name(cfg->dtype));
    cb_ctx *c = (cb_ctx *)dp_calloc(1, sizeof *c);
    if (!c) return dp_error(DP_ERR_NOMEM, "cuda backend: out of host memory");
    c->use_mpi = cfg->use_mpi;
    c->rank = 0;
    c->size = 1;
    c->f64 = cfg->dtype == DP_F64;
    c->es = c->f64 ? 8 : 4;
    c->timeout = OPT_COLLECTIVE_TIMEOUT_DEFAULT;
    int device = 0;
    dp_status st = DP_OK;
    if (cfg->use_mpi) {
        int inited = 0;
        MPI_Initialized(&inited);
        if (!inited) st = dp_error(DP_ERR_INTERNAL, "cuda backend: MPI requested but not initialised");
        if (st == DP_OK) st = cu_comm_local_device(&device);
    }
    if (st == DP_OK) st = cu_ctx_create(&c->cu, device);
    if (st == DP_OK && cfg->use_mpi) {
        st = cu_comm_create(&c->comm, c->cu);
        if (st == DP_OK) {
            c->rank = cu_comm_rank(c->comm);
            c->size = cu_comm_size(c->comm);
        }
    }
    if (st != DP_OK) {
        cb_destroy(c);
        return st;
    }
    memset(be, 0, sizeof *be);
    be->name = "cuda";
    be->dtype = cfg->dtype;
    be->threads = cfg->threads;
    be->comm.rank = c->rank;
    be->comm.size = c->size;
    be->ctx = c;
    opt_backend_ops *o = &be->ops;
    o->alloc = cb_alloc; o->free = cb_free; o->to_device = cb_to_device; o->to_host = cb_to_host;
    o->copy = cb_copy; o->zero = cb_zero; o->upload_f64 = cb_upload_f64; o->download_f64 = cb_download_f64;
    o->half_convert = cb_half_convert;
    o->gemm = cb_gemm; o->add_bias = cb_add_bias; o->sum_rows = cb_sum_rows; o->axpby = cb_axpby; o->add = cb_add;
    o->div_scalar = cb_div_scalar;
    o->tanh_fwd = cb_tanh_fwd; o->tanh_bwd = cb_tanh_bwd; o->silu_fwd = cb_silu_fwd; o->silu_bwd = cb_silu_bwd;
    o->swiglu_fwd = cb_swiglu_fwd; o->swiglu_bwd = cb_swiglu_bwd; o->rmsnorm_fwd = cb_rmsnorm_fwd;
    o->rmsnorm_bwd = cb_rmsnorm_bwd; o->rope_fwd = cb_rope_fwd; o->rope_bwd = cb_rope_bwd; o->attn_fwd = cb_attn_fwd;
    o->attn_bwd = cb_attn_bwd; o->xent_fwd = cb_xent_fwd; o->xent_bwd = cb_xent_bwd; o->embed_fwd = cb_embed_fwd;
    o->embed_bwd = cb_embed_bwd;
    o->sqnorm_rows = cb_sqnorm_rows; o->ghost_sqnorm = cb_ghost_sqnorm; o->clip_factors = cb_clip_factors;
    o->mul = cb_mul; o->clip_accum = cb_clip_accum; o->bk_gemm = cb_bk_gemm; o->fused_clip_accum = cb_fused_clip_accum;
    o->fused_sqnorm = cb_fused_sqnorm; o->noise_add = cb_noise_add;
    o->sgd_momentum = cb_sgd_momentum; o->adamw = cb_adamw;
    o->allreduce_sum = cb_allreduce; o->reduce_scatter_sum = cb_reduce_scatter; o->allgather = cb_allgather;
    o->alltoall = cb_alltoall; o->broadcast = cb_broadcast; o->send = cb_send; o->recv = cb_recv; o->wait = cb_wait;
    o->allgatherv_bytes = cb_allgatherv_bytes; o->barrier = cb_barrier; o->set_collective_timeout = cb_set_timeout;
    o->destroy = cb_destroy;
    return DP_OK;
}

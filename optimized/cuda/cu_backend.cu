// optimized/cuda/cu_backend.cu — the CUDA backend behind the engine's interface
// (optimized/backend.h): opt_backend_cuda_create fills the operation table with the
// cu_ kernels. f32 only (an f64 request is DP_ERR_NOT_SUPPORTED). Buffers are device
// pointers; integer buffers (ids, labels) are device int32.
//
// Collectives: one rank (use_mpi = 0) or NCCL over MPI_COMM_WORLD's ranks (use_mpi = 1;
// the caller initialised MPI). A collective first makes the comm stream wait for the
// compute stream, runs on the comm stream, and completes (async == NULL) or returns a
// handle whose wait() blocks on an event recorded after it.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "optimized/backend.h"
}
#define CU_WITH_NCCL 1
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
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
} cb_ctx;

#define CB(ctx) ((cb_ctx *)(ctx))
#define STREAM(ctx) cu_ctx_stream_(CB(ctx)->cu)
#define GRID(n) cu_grid_1d((n), 1), CU_BLOCK, 0, STREAM(ctx)
#define FOR_I(n) for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static dp_status ck_n(const char *op, int64_t n) {
    if (n < 0) return dp_error(DP_ERR_INVALID, "cuda %s: negative size %lld", op, (long long)n);
    return DP_OK;
}
static dp_status ck_int(const char *op, int64_t v, const char *what) {
    if (v < 0 || v > 0x7fffffff) return dp_error(DP_ERR_INVALID, "cuda %s: %s = %lld out of range [0, 2^31)", op, what, (long long)v);
    return DP_OK;
}
static dp_status launched(const char *k) { return cu_check_cuda_(cudaGetLastError(), k, __FILE__, __LINE__); }

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
    float *tmp = (float *)malloc((size_t)n * sizeof(float));
    if (!tmp) return dp_error(DP_ERR_NOMEM, "cuda upload_f64: out of host memory");
    for (int64_t i = 0; i < n; i++) tmp[i] = (float)src[i];
    dp_status st = cu_h2d(CB(ctx)->cu, dst, tmp, (size_t)n * sizeof(float));
    free(tmp);
    return st;
}
static dp_status cb_download_f64(void *ctx, double *dst, const void *src, int64_t n) {
    DP_TRY(ck_n("download_f64", n));
    if (n == 0) return DP_OK;
    float *tmp = (float *)malloc((size_t)n * sizeof(float));
    if (!tmp) return dp_error(DP_ERR_NOMEM, "cuda download_f64: out of host memory");
    dp_status st = cu_d2h(CB(ctx)->cu, tmp, src, (size_t)n * sizeof(float));
    for (int64_t i = 0; st == DP_OK && i < n; i++) dst[i] = tmp[i];
    free(tmp);
    return st;
}

/* ---------------- dense linear algebra ---------------- */
static dp_status cb_gemm(void *ctx, void *C, const void *A, const void *B, int ta, int tb, int64_t M, int64_t N,
                         int64_t K, double alpha, double beta, int64_t batch, int64_t sA, int64_t sB, int64_t sC) {
    DP_TRY(ck_int("gemm", M, "M")); DP_TRY(ck_int("gemm", N, "N")); DP_TRY(ck_int("gemm", K, "K"));
    DP_TRY(ck_int("gemm", batch, "batch"));
    if (M == 0 || N == 0 || batch == 0) return DP_OK;
    if (K == 0) { /* C = beta * C (beta = 0 overwrites) */
        for (int64_t b = 0; b < batch; b++) {
            float *Cb = (float *)C + b * sC;
            if (beta == 0.0) DP_TRY(cu_memset0(CB(ctx)->cu, Cb, (size_t)(M * N) * sizeof(float)));
            else return dp_error(DP_ERR_NOT_SUPPORTED, "cuda gemm: K = 0 with beta != 0");
        }
        return DP_OK;
    }
    return cu_gemm_f32_batched(CB(ctx)->cu, (float *)C, (const float *)A, (const float *)B, ta, tb, (float)alpha,
                               (float)beta, (int)M, (int)N, (int)K, sA, sB, sC, (int)batch);
}
__global__ void k_add_bias(float *y, const float *bias, int64_t rows, int64_t n) {
    FOR_I(rows * n) y[i] += bias[i % n];
}
static dp_status cb_add_bias(void *ctx, void *y, const void *bias, int64_t rows, int64_t n) {
    DP_TRY(ck_n("add_bias", rows)); DP_TRY(ck_n("add_bias", n));
    if (rows * n == 0) return DP_OK;
    k_add_bias<<<GRID(rows * n)>>>((float *)y, (const float *)bias, rows, n);
    return launched("k_add_bias");
}
/* thread per (g, j): out[g,j] (+)= sum_r x[g*per + r, j], r in order */
__global__ void k_sum_rows(float *out, const float *x, int accumulate, int64_t groups, int64_t per, int64_t n) {
    FOR_I(groups * n) {
        int64_t g = i / n, j = i % n;
        float acc = accumulate ? out[i] : 0.0f;
        for (int64_t r = 0; r < per; r++) acc += x[(g * per + r) * n + j];
        out[i] = acc;
    }
}
static dp_status cb_sum_rows(void *ctx, void *out, const void *x, int accumulate, int64_t groups, int64_t per, int64_t n) {
    DP_TRY(ck_n("sum_rows", groups)); DP_TRY(ck_n("sum_rows", per)); DP_TRY(ck_n("sum_rows", n));
    if (groups * n == 0) return DP_OK;
    k_sum_rows<<<GRID(groups * n)>>>((float *)out, (const float *)x, accumulate, groups, per, n);
    return launched("k_sum_rows");
}
__global__ void k_axpby(float *y, const float *x, float a, float b, int64_t n) {
    FOR_I(n) y[i] = __fadd_rn(__fmul_rn(a, x[i]), b == 0.0f ? 0.0f : __fmul_rn(b, y[i]));
}
static dp_status cb_axpby(void *ctx, void *y, const void *x, double alpha, double beta, int64_t n) {
    DP_TRY(ck_n("axpby", n));
    if (n == 0) return DP_OK;
    k_axpby<<<GRID(n)>>>((float *)y, (const float *)x, (float)alpha, (float)beta, n);
    return launched("k_axpby");
}
__global__ void k_add(float *y, const float *a, const float *b, int64_t n) { FOR_I(n) y[i] = a[i] + b[i]; }
static dp_status cb_add(void *ctx, void *y, const void *a, const void *b, int64_t n) {
    DP_TRY(ck_n("add", n));
    if (n == 0) return DP_OK;
    k_add<<<GRID(n)>>>((float *)y, (const float *)a, (const float *)b, n);
    return launched("k_add");
}
/* y = x / s: one IEEE division per element (as the host backend) */
__global__ void k_div_scalar(float *y, const float *x, float s, int64_t n) { FOR_I(n) y[i] = __fdiv_rn(x[i], s); }
static dp_status cb_div_scalar(void *ctx, void *y, const void *x, double s, int64_t n) {
    DP_TRY(ck_n("div_scalar", n));
    if (!(s != 0) || !isfinite(s)) return dp_error(DP_ERR_INVALID, "cuda div_scalar: divisor must be finite and nonzero (got %g)", s);
    if (n == 0) return DP_OK;
    k_div_scalar<<<GRID(n)>>>((float *)y, (const float *)x, (float)s, n);
    return launched("k_div_scalar");
}
__global__ void k_mul(float *y, const float *x, int64_t n) { FOR_I(n) y[i] *= x[i]; }
static dp_status cb_mul(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("mul", n));
    if (n == 0) return DP_OK;
    k_mul<<<GRID(n)>>>((float *)y, (const float *)x, n);
    return launched("k_mul");
}

/* ---------------- pointwise ---------------- */
__device__ __forceinline__ float cb_sigmoid(float a) { return (float)(1.0 / (1.0 + exp(-(double)a))); }
__global__ void k_tanh_fwd(float *y, const float *x, int64_t n) { FOR_I(n) y[i] = (float)tanh((double)x[i]); }
__global__ void k_tanh_bwd(float *dx, const float *dy, const float *y, int64_t n) {
    FOR_I(n) dx[i] = __fmul_rn(dy[i], __fsub_rn(1.0f, __fmul_rn(y[i], y[i])));
}
__global__ void k_silu_fwd(float *y, const float *x, int64_t n) { FOR_I(n) y[i] = __fmul_rn(x[i], cb_sigmoid(x[i])); }
__global__ void k_silu_bwd(float *dx, const float *dy, const float *x, int64_t n) {
    FOR_I(n) {
        float s = cb_sigmoid(x[i]);
        dx[i] = __fmul_rn(dy[i], __fmul_rn(s, __fadd_rn(1.0f, __fmul_rn(x[i], __fsub_rn(1.0f, s)))));
    }
}
static dp_status cb_tanh_fwd(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("tanh_fwd", n)); if (!n) return DP_OK;
    k_tanh_fwd<<<GRID(n)>>>((float *)y, (const float *)x, n);
    return launched("k_tanh_fwd");
}
static dp_status cb_tanh_bwd(void *ctx, void *dx, const void *dy, const void *y, int64_t n) {
    DP_TRY(ck_n("tanh_bwd", n)); if (!n) return DP_OK;
    k_tanh_bwd<<<GRID(n)>>>((float *)dx, (const float *)dy, (const float *)y, n);
    return launched("k_tanh_bwd");
}
static dp_status cb_silu_fwd(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("silu_fwd", n)); if (!n) return DP_OK;
    k_silu_fwd<<<GRID(n)>>>((float *)y, (const float *)x, n);
    return launched("k_silu_fwd");
}
static dp_status cb_silu_bwd(void *ctx, void *dx, const void *dy, const void *x, int64_t n) {
    DP_TRY(ck_n("silu_bwd", n)); if (!n) return DP_OK;
    k_silu_bwd<<<GRID(n)>>>((float *)dx, (const float *)dy, (const float *)x, n);
    return launched("k_silu_bwd");
}
static dp_status cb_swiglu_fwd(void *ctx, void *h, const void *a, const void *b, int64_t n) {
    return cu_swiglu_fwd(CB(ctx)->cu, (float *)h, (const float *)a, (const float *)b, n);
}
static dp_status cb_swiglu_bwd(void *ctx, void *da, void *db, const void *dh, const void *a, const void *b, int64_t n) {
    return cu_swiglu_bwd(CB(ctx)->cu, (float *)da, (float *)db, (const float *)dh, (const float *)a, (const float *)b, n);
}

/* ---------------- rmsnorm / rope / attention ---------------- */
static dp_status cb_rmsnorm_fwd(void *ctx, void *y, void *rstd, const void *x, const void *g, double eps, int64_t rows,
                                int64_t D) {
    DP_TRY(ck_int("rmsnorm_fwd", rows, "rows")); DP_TRY(ck_int("rmsnorm_fwd", D, "D"));
    return cu_rmsnorm_fwd(CB(ctx)->cu, (float *)y, (float *)rstd, (const float *)x, (const float *)g, (float)eps,
                          (int)rows, (int)D);
}
/* block per row: dx (may be NULL) and dg_rows (may be NULL) */
__global__ void k_rmsnorm_bwd_rows(float *dx, float *dg, const float *dy, const float *x, const float *rstd,
                                   const float *g, int64_t D) {
    __shared__ float sh[33];
    int64_t r = blockIdx.x;
    const float *xr = x + r * D, *dyr = dy + r * D;
    float s = rstd[r], dot = 0.0f;
    for (int64_t k = threadIdx.x; k < D; k += blockDim.x) dot += dyr[k] * g[k] * xr[k];
    dot = cu_block_sum(dot, sh);
    float coef = s * s * s * dot / (float)D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
        if (dx) dx[r * D + j] = s * g[j] * dyr[j] - xr[j] * coef;
        if (dg) dg[r * D + j] = dyr[j] * xr[j] * s;
    }
}
static dp_status cb_rmsnorm_bwd(void *ctx, void *dx, void *dg_rows, const void *dy, const void *x, const void *rstd,
                                const void *g, int64_t rows, int64_t D) {
    DP_TRY(ck_int("rmsnorm_bwd", rows, "rows")); DP_TRY(ck_n("rmsnorm_bwd", D));
    if (!rows || !D) return DP_OK;
    k_rmsnorm_bwd_rows<<<(unsigned)rows, 128, 0, STREAM(ctx)>>>((float *)dx, (float *)dg_rows, (const float *)dy,
                                                                 (const float *)x, (const float *)rstd, (const float *)g, D);
    return launched("k_rmsnorm_bwd_rows");
}
static dp_status cb_rope(void *ctx, void *y, const void *x, double theta, int64_t B, int64_t T, int64_t H, int64_t hd,
                         int inverse) {
    DP_TRY(ck_int("rope", B, "B")); DP_TRY(ck_int("rope", T, "T")); DP_TRY(ck_int("rope", H, "H")); DP_TRY(ck_int("rope", hd, "hd"));
    if (y != x) DP_TRY(cb_copy(ctx, y, x, (size_t)(B * T * H * hd) * sizeof(float)));
    return cu_rope(CB(ctx)->cu, (float *)y, (float)theta, inverse, (int)B, (int)T, (int)H, (int)hd);
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
    return cu_attention_fwd(CB(ctx)->cu, (float *)out, (float *)probs, (const float *)q, (const float *)k,
                            (const float *)v, (int)B, (int)T, (int)H, (int)hd);
}
static dp_status cb_attn_bwd(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                             const void *v, const void *probs, int64_t B, int64_t T, int64_t H, int64_t hd) {
    DP_TRY(ck_int("attn_bwd", B, "B")); DP_TRY(ck_int("attn_bwd", T, "T")); DP_TRY(ck_int("attn_bwd", H, "H"));
    DP_TRY(ck_int("attn_bwd", hd, "hd"));
    void *dpre;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &dpre, (size_t)(B * H * T * T) * sizeof(float), SLOT_TMP));
    return cu_attention_bwd(CB(ctx)->cu, (float *)dq, (float *)dk, (float *)dv, (float *)dpre, (const float *)dout,
                            (const float *)q, (const float *)k, (const float *)v, (const float *)probs, (int)B, (int)T,
                            (int)H, (int)hd);
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
/* block per row; mode 0: loss, 1: dz. Labels < 0 give 0; labels >= V set the flag. */
template <int BWD>
__global__ void k_xent(float *out, int *bad, const float *z, const int32_t *y, const float *w, int64_t V) {
    __shared__ float sh[33];
    int64_t r = blockIdx.x;
    int32_t lab = y[r];
    const float *zr = z + r * V;
    if (lab < 0 || lab >= V) {
        if (lab >= V && threadIdx.x == 0) atomicMax(bad, (int)r + 1);
        if (BWD) for (int64_t j = threadIdx.x; j < V; j += blockDim.x) out[r * V + j] = 0.0f;
        else if (threadIdx.x == 0) out[r] = 0.0f;
        return;
    }
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, zr[j]);
    mx = cu_block_max(mx, sh, -INFINITY);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) s += (float)exp((double)(zr[j] - mx));
    s = cu_block_sum(s, sh);
    if (!BWD) {
        if (threadIdx.x == 0) out[r] = w[r] * (mx + (float)log((double)s) - zr[lab]);
    } else {
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
            out[r * V + j] = w[r] * ((float)exp((double)(zr[j] - mx)) / s - (j == lab ? 1.0f : 0.0f));
    }
}
static dp_status cb_xent(void *ctx, void *out, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V,
                         int bwd) {
    DP_TRY(ck_int("xent", rows, "rows")); DP_TRY(ck_n("xent", V));
    if (!rows) return DP_OK;
    if (V == 0) return dp_error(DP_ERR_INVALID, "cuda xent: V must be >= 1");
    int *flag;
    DP_TRY(flag_get(ctx, &flag));
    if (bwd) k_xent<1><<<(unsigned)rows, 128, 0, STREAM(ctx)>>>((float *)out, flag, (const float *)z, y, (const float *)w, V);
    else k_xent<0><<<(unsigned)rows, 128, 0, STREAM(ctx)>>>((float *)out, flag, (const float *)z, y, (const float *)w, V);
    DP_TRY(launched("k_xent"));
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
    return cu_embedding_fwd(CB(ctx)->cu, (float *)out, ids, (const float *)table, (int)rows, (int)V, (int)D);
}
/* thread per (g, j): walks the group's rows in order, so each dtable element has one writer */
__global__ void k_embed_bwd(float *dt, int *bad, const float *dy, const int32_t *ids, int64_t rows, int64_t per,
                            int64_t V, int64_t D) {
    int64_t groups = (rows + per - 1) / per;
    FOR_I(groups * D) {
        int64_t g = i / D, j = i % D;
        for (int64_t r = g * per; r < rows && r < (g + 1) * per; r++) {
            int32_t id = ids[r];
            if (id < 0 || id >= V) { atomicMax(bad, (int)(r + 1)); continue; }
            dt[(g * V + id) * D + j] += dy[r * D + j];
        }
    }
}
static dp_status cb_embed_bwd(void *ctx, void *dtable, const void *dy, const int32_t *ids, int64_t rows, int64_t per,
                              int64_t V, int64_t D) {
    DP_TRY(ck_int("embed_bwd", rows, "rows")); DP_TRY(ck_n("embed_bwd", V)); DP_TRY(ck_n("embed_bwd", D));
    if (per <= 0) return dp_error(DP_ERR_INVALID, "embed_bwd: per must be >= 1");
    if (!rows || !D) return DP_OK;
    int *flag;
    DP_TRY(flag_get(ctx, &flag));
    int64_t groups = (rows + per - 1) / per;
    k_embed_bwd<<<GRID(groups * D)>>>((float *)dtable, flag, (const float *)dy, ids, rows, per, V, D);
    DP_TRY(launched("k_embed_bwd"));
    int bad = 0;
    DP_TRY(flag_read(ctx, flag, &bad));
    if (bad) return dp_error(DP_ERR_INVALID, "embedding: token at row %d out of range [0, %lld)", bad - 1, (long long)V);
    return DP_OK;
}

/* ---------------- DP operations ---------------- */
/* sq[b] += (float) sqd[b] */
__global__ void k_add_sq(float *sq, const double *sqd, int64_t B) { FOR_I(B) sq[i] += (float)sqd[i]; }
static dp_status cb_sqnorm_rows(void *ctx, void *sq, const void *g, int64_t B, int64_t n) {
    DP_TRY(ck_int("sqnorm_rows", B, "B")); DP_TRY(ck_n("sqnorm_rows", n));
    if (!B) return DP_OK;
    void *sqd;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &sqd, (size_t)B * sizeof(double), SLOT_SQD));
    DP_TRY(cu_dp_rows_sqnorm(CB(ctx)->cu, (double *)sqd, (const float *)g, n, (int)B));
    k_add_sq<<<GRID(B)>>>((float *)sq, (const double *)sqd, B);
    return launched("k_add_sq");
}
static dp_status cb_ghost_sqnorm(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d, int64_t p) {
    DP_TRY(ck_int("ghost_sqnorm", B, "B")); DP_TRY(ck_int("ghost_sqnorm", T, "T"));
    DP_TRY(ck_int("ghost_sqnorm", d, "d")); DP_TRY(ck_int("ghost_sqnorm", p, "p"));
    if (!B) return DP_OK;
    void *sqd;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &sqd, (size_t)B * sizeof(double), SLOT_SQD));
    DP_TRY(cu_dp_ghost_sqnorm(CB(ctx)->cu, (double *)sqd, (const float *)A, (const float *)G, 0, (int)B, (int)T, (int)d, (int)p));
    k_add_sq<<<GRID(B)>>>((float *)sq, (const double *)sqd, B);
    return launched("k_add_sq");
}
/* the host backend's clip function (optimized/host/host_kern.h) */
__device__ __forceinline__ float cb_clipfn(float sq, double C, int automatic, double gamma) {
    double n = sqrt((double)sq);
    if (automatic) return (float)(C / (n + gamma));
    return (float)(n > C ? C / n : 1.0);
}
__global__ void k_clip_factors_fn(float *c, const float *sq, double C, int automatic, double gamma, int64_t B) {
    FOR_I(B) c[i] = cb_clipfn(sq[i], C, automatic, gamma);
}
static dp_status clip_args(const char *op, double C, opt_clip_fn fn, double gamma) {
    if (!(C > 0) || !isfinite(C)) return dp_error(DP_ERR_INVALID, "cuda %s: clip norm must be finite and > 0 (got %g)", op, C);
    if (fn != OPT_CLIP_ABADI && fn != OPT_CLIP_AUTOMATIC) return dp_error(DP_ERR_INVALID, "cuda %s: unknown clip function %d", op, (int)fn);
    if (fn == OPT_CLIP_AUTOMATIC && (!(gamma > 0) || !isfinite(gamma)))
        return dp_error(DP_ERR_INVALID, "cuda %s: automatic clipping needs gamma > 0 (got %g)", op, gamma);
    return DP_OK;
}
static dp_status cb_clip_factors(void *ctx, void *c, const void *sq, double C, opt_clip_fn fn, double gamma, int64_t B) {
    DP_TRY(clip_args("clip_factors", C, fn, gamma)); DP_TRY(ck_n("clip_factors", B));
    if (!B) return DP_OK;
    k_clip_factors_fn<<<GRID(B)>>>((float *)c, (const float *)sq, C, fn == OPT_CLIP_AUTOMATIC, gamma, B);
    return launched("k_clip_factors_fn");
}
/* sum[j] = (((sum[j] + c0 g0j) + c1 g1j) + ...), b in order (the host's order) */
__global__ void k_clip_accum(float *sum, const float *g, const float *c, int64_t B, int64_t n) {
    FOR_I(n) {
        float acc = sum[i];
        for (int64_t b = 0; b < B; b++) acc = __fadd_rn(acc, __fmul_rn(c[b], g[b * n + i]));
        sum[i] = acc;
    }
}
static dp_status cb_clip_accum(void *ctx, void *sum, const void *g, const void *c, int64_t B, int64_t n) {
    DP_TRY(ck_n("clip_accum", B)); DP_TRY(ck_n("clip_accum", n));
    if (!n || !B) return DP_OK;
    k_clip_accum<<<GRID(n)>>>((float *)sum, (const float *)g, (const float *)c, B, n);
    return launched("k_clip_accum");
}
static dp_status cb_bk_gemm(void *ctx, void *dW, const void *A, const void *G, const void *c, int64_t B, int64_t T,
                            int64_t d, int64_t p) {
    DP_TRY(ck_int("bk_gemm", B * T, "B*T")); DP_TRY(ck_int("bk_gemm", d, "d")); DP_TRY(ck_int("bk_gemm", p, "p"));
    if (!B || !T || !d || !p) return DP_OK;
    void *Gs;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &Gs, (size_t)(B * T * p) * sizeof(float), SLOT_TMP));
    return cu_dp_bk_wgrad(CB(ctx)->cu, (float *)dW, (float *)Gs, (const float *)A, (const float *)G, (const float *)c,
                          (int)B, (int)T, (int)d, (int)p);
}
/* per example of the chunk: sq = (float)||g_b||^2 (+ extra), c = clipfn(sq); outputs when asked */
__global__ void k_chunk_factors(float *cs, float *sq_out, float *c_out, const double *sqd, const float *extra, double C,
                                int automatic, double gamma, int64_t nb) {
    FOR_I(nb) {
        float sq = (float)sqd[i];
        if (extra) sq += extra[i];
        float c = cb_clipfn(sq, C, automatic, gamma);
        cs[i] = c;
        if (sq_out) sq_out[i] = sq;
        if (c_out) c_out[i] = c;
    }
}
/* dW[j] = ((dW[j] + c0 g0j) + c1 g1j) + ... over the chunk (the host's per-example order) */
__global__ void k_chunk_accum(float *dW, const float *ws, const float *cs, int64_t nb, int64_t n) {
    FOR_I(n) {
        float acc = dW[i];
        for (int64_t b = 0; b < nb; b++) acc = __fadd_rn(acc, __fmul_rn(cs[b], ws[b * n + i]));
        dW[i] = acc;
    }
}
/* The f32 fused path: per chunk one strided-batched GEMM of per-example blocks, the
 * hierarchical norms, the factors, and the clipped accumulation (cu_dp_fused_wgrad_bf16
 * is the bf16 form of the same pipeline). */
static dp_status fused_common(void *ctx, float *dW, float *sq_out, float *c_out, const float *A, const float *G,
                              const float *extra, double C, opt_clip_fn fn, double gamma, int64_t B, int64_t T,
                              int64_t d, int64_t p, float *sq_acc) {
    DP_TRY(ck_int("fused", B, "B")); DP_TRY(ck_int("fused", T, "T")); DP_TRY(ck_int("fused", d, "d")); DP_TRY(ck_int("fused", p, "p"));
    if (!B) return DP_OK;
    if (!T || !d || !p) return dp_error(DP_ERR_INVALID, "cuda fused: T, d, p must be >= 1");
    cu_ctx *cu = CB(ctx)->cu;
    int64_t n = p * d;
    int bc = cu_fused_chunk(CU_FUSED_WS_BYTES, (int)B, p, d);
    void *ws, *sqd, *cs;
    DP_TRY(cu_ctx_scratch_(cu, &ws, (size_t)(n * bc) * sizeof(float), SLOT_WS));
    DP_TRY(cu_ctx_scratch_(cu, &sqd, (size_t)bc * sizeof(double), SLOT_SQD));
    DP_TRY(cu_ctx_scratch_(cu, &cs, (size_t)bc * sizeof(float), SLOT_C));
    for (int64_t b0 = 0; b0 < B; b0 += bc) {
        int64_t nb = B - b0 < bc ? B - b0 : bc;
        DP_TRY(cu_gemm_f32_batched(cu, (float *)ws, G + b0 * T * p, A + b0 * T * d, 1, 0, 1.0f, 0.0f, (int)p, (int)d,
                                   (int)T, T * p, T * d, n, (int)nb));
        DP_TRY(cu_dp_rows_sqnorm(cu, (double *)sqd, (const float *)ws, n, (int)nb));
        if (sq_acc) {
            k_add_sq<<<GRID(nb)>>>(sq_acc + b0, (const double *)sqd, nb);
            DP_TRY(launched("k_add_sq"));
            continue;
        }
        k_chunk_factors<<<GRID(nb)>>>((float *)cs, sq_out ? sq_out + b0 : NULL, c_out ? c_out + b0 : NULL,
                                      (const double *)sqd, extra ? extra + b0 : NULL, C, fn == OPT_CLIP_AUTOMATIC, gamma, nb);
        DP_TRY(launched("k_chunk_factors"));
        k_chunk_accum<<<GRID(n)>>>(dW, (const float *)ws, (const float *)cs, nb, n);
        DP_TRY(launched("k_chunk_accum"));
    }
    return DP_OK;
}
static dp_status cb_fused_clip_accum(void *ctx, void *dW, void *sq_out, void *c_out, const void *A, const void *G,
                                     const void *extra_sq, double C, opt_clip_fn fn, double gamma, int64_t B, int64_t T,
                                     int64_t d, int64_t p) {
    DP_TRY(clip_args("fused_clip_accum", C, fn, gamma));
    return fused_common(ctx, (float *)dW, (float *)sq_out, (float *)c_out, (const float *)A, (const float *)G,
                        (const float *)extra_sq, C, fn, gamma, B, T, d, p, NULL);
}
static dp_status cb_fused_sqnorm(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d, int64_t p) {
    return fused_common(ctx, NULL, NULL, NULL, (const float *)A, (const float *)G, NULL, 1.0, OPT_CLIP_ABADI, 0.0, B, T,
                        d, p, (float *)sq);
}
static dp_status cb_noise_add(void *ctx, void *x, dp_noise_key key, uint32_t stream, uint32_t lane, double std,
                              uint64_t offset, int64_t n) {
    return cu_dp_noise_add(CB(ctx)->cu, (float *)x, key.k, stream, lane, offset, std, n);
}

/* ---------------- optimizers (the host's formulas, f32) ---------------- */
__global__ void k_sgd(float *p, float *buf, const float *g, float lr, float mu, int use_mu, float wd, int first, int64_t n) {
    FOR_I(n) {
        float gi = __fadd_rn(g[i], __fmul_rn(wd, p[i]));
        if (use_mu) {
            buf[i] = first ? gi : __fadd_rn(__fmul_rn(mu, buf[i]), gi);
            gi = buf[i];
        }
        p[i] = __fsub_rn(p[i], __fmul_rn(lr, gi));
    }
}
static dp_status cb_sgd_momentum(void *ctx, void *param, void *buf, const void *grad, double lr, double mu, double wd,
                                 int64_t t, int64_t n) {
    DP_TRY(ck_n("sgd_momentum", n));
    if (!n) return DP_OK;
    k_sgd<<<GRID(n)>>>((float *)param, (float *)buf, (const float *)grad, (float)lr, (float)mu, mu != 0, (float)wd, t <= 1, n);
    return launched("k_sgd");
}
__global__ void k_adamw(float *p, float *m, float *v, const float *g, float decay, float b1, float omb1, float b2,
                        float omb2, float bc1, float bc2, float lr, float eps, int64_t n) {
    FOR_I(n) {
        float pi = __fmul_rn(p[i], decay);
        float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(omb1, g[i]));
        float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(omb2, g[i]), g[i]));
        m[i] = mi;
        v[i] = vi;
        float mh = __fdiv_rn(mi, bc1), vh = __fdiv_rn(vi, bc2);
        p[i] = __fsub_rn(pi, __fdiv_rn(__fmul_rn(lr, mh), __fadd_rn((float)sqrt((double)vh), eps)));
    }
}
static dp_status cb_adamw(void *ctx, void *param, void *m, void *v, const void *grad, double lr, double b1, double b2,
                          double eps, double wd, int64_t t, int64_t n) {
    DP_TRY(ck_n("adamw", n));
    if (t < 1) return dp_error(DP_ERR_INVALID, "cuda adamw: step t must be >= 1 (got %lld)", (long long)t);
    if (!n) return DP_OK;
    double bc1 = 1 - pow(b1, (double)t), bc2 = 1 - pow(b2, (double)t);
    k_adamw<<<GRID(n)>>>((float *)param, (float *)m, (float *)v, (const float *)grad, (float)(1 - lr * wd), (float)b1,
                         (float)(1 - b1), (float)b2, (float)(1 - b2), (float)bc1, (float)bc2, (float)lr, (float)eps, n);
    return launched("k_adamw");
}

/* ---------------- collectives ---------------- */
typedef struct {
    cudaEvent_t ev;
} cb_async;

static dp_status cb_finish(void *ctx, opt_async **async) {
    cu_ctx *cu = CB(ctx)->cu;
    cudaStream_t cs = (cudaStream_t)cu_ctx_comm_stream(cu);
    if (!async) {
        CU_CHECK(cudaStreamSynchronize(cs));
        return DP_OK;
    }
    cb_async *a = (cb_async *)calloc(1, sizeof *a);
    if (!a) return dp_error(DP_ERR_NOMEM, "cuda collective: out of host memory");
    dp_status st = CU_CHECK_ST(cudaEventCreateWithFlags(&a->ev, cudaEventDisableTiming));
    if (st == DP_OK) st = CU_CHECK_ST(cudaEventRecord(a->ev, cs));
    if (st != DP_OK) {
        if (a->ev) cudaEventDestroy(a->ev);
        free(a);
        return st;
    }
    *async = (opt_async *)a;
    return DP_OK;
}
static dp_status cb_wait(void *ctx, opt_async *h) {
    if (!h) return DP_OK;
    cb_async *a = (cb_async *)h;
    dp_status st = CU_CHECK_ST(cudaEventSynchronize(a->ev));
    cudaEventDestroy(a->ev);
    free(a);
    return st;
}
static dp_status coll_begin(void *ctx, opt_async **async, int64_t n, const char *op) {
    if (async) *async = NULL;
    DP_TRY(ck_n(op, n));
    return cu_comm_wait_compute(CB(ctx)->cu);
}
static int multi(void *ctx) { return CB(ctx)->comm && CB(ctx)->size > 1; }

static dp_status cb_allreduce(void *ctx, void *buf, int64_t n, opt_async **async) {
    DP_TRY(coll_begin(ctx, async, n, "allreduce_sum"));
    if (multi(ctx)) DP_TRY(cu_comm_allreduce_sum_f32(CB(ctx)->comm, (float *)buf, n));
    return cb_finish(ctx, async);
}
static dp_status cb_reduce_scatter(void *ctx, void *recv, const void *send, int64_t n, opt_async **async) {
    DP_TRY(coll_begin(ctx, async, n, "reduce_scatter_sum"));
    if (multi(ctx)) DP_TRY(cu_comm_reduce_scatter_sum_f32(CB(ctx)->comm, (float *)recv, (const float *)send, n));
    else if (recv != send && n) CU_CHECK(cudaMemcpyAsync(recv, send, (size_t)n * 4, cudaMemcpyDeviceToDevice, (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu)));
    return cb_finish(ctx, async);
}
static dp_status cb_allgather(void *ctx, void *recv, const void *send, int64_t n, opt_async **async) {
    DP_TRY(coll_begin(ctx, async, n, "allgather"));
    if (multi(ctx)) DP_TRY(cu_comm_allgather_f32(CB(ctx)->comm, (float *)recv, (const float *)send, n));
    else if (recv != send && n) CU_CHECK(cudaMemcpyAsync(recv, send, (size_t)n * 4, cudaMemcpyDeviceToDevice, (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu)));
    return cb_finish(ctx, async);
}
static dp_status cb_alltoall(void *ctx, void *recv, const void *send, int64_t n, opt_async **async) {
    DP_TRY(coll_begin(ctx, async, n, "alltoall"));
    if (multi(ctx)) DP_TRY(cu_comm_alltoall_f32(CB(ctx)->comm, (float *)recv, (const float *)send, n));
    else if (recv != send && n) CU_CHECK(cudaMemcpyAsync(recv, send, (size_t)n * 4, cudaMemcpyDeviceToDevice, (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu)));
    return cb_finish(ctx, async);
}
static dp_status cb_broadcast(void *ctx, void *buf, int64_t n, int root, opt_async **async) {
    DP_TRY(coll_begin(ctx, async, n, "broadcast"));
    if (root < 0 || root >= CB(ctx)->size) return dp_error(DP_ERR_INVALID, "broadcast: root %d out of range", root);
    if (multi(ctx)) DP_TRY(cu_comm_broadcast_f32(CB(ctx)->comm, (float *)buf, n, root));
    return cb_finish(ctx, async);
}
static dp_status cb_send(void *ctx, const void *buf, int64_t n, int peer, int tag, opt_async **async) {
    if (!multi(ctx) || peer < 0 || peer >= CB(ctx)->size || peer == CB(ctx)->rank) {
        if (async) *async = NULL;
        return dp_error(DP_ERR_INVALID, "send: peer %d invalid (rank %d of %d)", peer, CB(ctx)->rank, CB(ctx)->size);
    }
    DP_TRY(coll_begin(ctx, async, n, "send"));
    DP_TRY(cu_comm_send_f32(CB(ctx)->comm, (const float *)buf, n, peer));
    return cb_finish(ctx, async);
}
static dp_status cb_recv(void *ctx, void *buf, int64_t n, int peer, int tag, opt_async **async) {
    if (!multi(ctx) || peer < 0 || peer >= CB(ctx)->size || peer == CB(ctx)->rank) {
        if (async) *async = NULL;
        return dp_error(DP_ERR_INVALID, "recv: peer %d invalid (rank %d of %d)", peer, CB(ctx)->rank, CB(ctx)->size);
    }
    DP_TRY(coll_begin(ctx, async, n, "recv"));
    DP_TRY(cu_comm_recv_f32(CB(ctx)->comm, (float *)buf, n, peer));
    return cb_finish(ctx, async);
}
static dp_status cb_allgatherv_bytes(void *ctx, void **recv, size_t *recv_len, const void *send, size_t nbytes) {
    *recv = NULL;
    *recv_len = 0;
    if (nbytes > 2147483647u) return dp_error(DP_ERR_INVALID, "allgatherv: %zu bytes is too large", nbytes);
    if (!multi(ctx)) {
        *recv = malloc(nbytes ? nbytes : 1);
        if (!*recv) return dp_error(DP_ERR_NOMEM, "allgatherv: out of memory");
        if (nbytes) memcpy(*recv, send, nbytes);
        *recv_len = nbytes;
        return DP_OK;
    }
    int size = CB(ctx)->size, mine = (int)nbytes;
    int *counts = (int *)calloc((size_t)size, sizeof(int)), *displs = (int *)calloc((size_t)size, sizeof(int));
    if (!counts || !displs) { free(counts); free(displs); return dp_error(DP_ERR_NOMEM, "allgatherv: out of memory"); }
    dp_status st = DP_OK;
    if (MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS)
        st = dp_error(DP_ERR_DEVICE, "allgatherv: MPI_Allgather failed");
    size_t total = 0;
    for (int r = 0; st == DP_OK && r < size; r++) {
        if (total + (size_t)counts[r] > 2147483647u) st = dp_error(DP_ERR_INVALID, "allgatherv: total too large");
        displs[r] = (int)total;
        total += (size_t)counts[r];
    }
    char *buf = NULL;
    if (st == DP_OK && !(buf = (char *)malloc(total ? total : 1))) st = dp_error(DP_ERR_NOMEM, "allgatherv: out of memory");
    if (st == DP_OK && MPI_Allgatherv(send, mine, MPI_BYTE, buf, counts, displs, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS)
        st = dp_error(DP_ERR_DEVICE, "allgatherv: MPI_Allgatherv failed");
    free(counts);
    free(displs);
    if (st != DP_OK) { free(buf); return st; }
    *recv = buf;
    *recv_len = total;
    return DP_OK;
}
static dp_status cb_barrier(void *ctx) {
    DP_TRY(cu_sync(CB(ctx)->cu));
    if (!multi(ctx)) return DP_OK;
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) return dp_error(DP_ERR_DEVICE, "MPI_Barrier failed");
    return DP_OK;
}

/* ---------------- lifetime ---------------- */
static void cb_destroy(void *ctx) {
    if (!ctx) return;
    cu_comm_destroy(CB(ctx)->comm);
    cu_ctx_destroy(CB(ctx)->cu);
    free(ctx);
}

extern "C" dp_status opt_backend_cuda_create(opt_backend *be, const opt_backend_config *cfg) {
    if (cfg->dtype != DP_F32)
        return dp_error(DP_ERR_NOT_SUPPORTED, "backend 'cuda': dtype %s not supported (the CUDA backend computes in f32; use --dtype f32)",
                        dp_dtype_name(cfg->dtype));
    cb_ctx *c = (cb_ctx *)calloc(1, sizeof *c);
    if (!c) return dp_error(DP_ERR_NOMEM, "cuda backend: out of host memory");
    c->use_mpi = cfg->use_mpi;
    c->rank = 0;
    c->size = 1;
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
    be->dtype = DP_F32;
    be->threads = cfg->threads;
    be->comm.rank = c->rank;
    be->comm.size = c->size;
    be->ctx = c;
    opt_backend_ops *o = &be->ops;
    o->alloc = cb_alloc; o->free = cb_free; o->to_device = cb_to_device; o->to_host = cb_to_host;
    o->copy = cb_copy; o->zero = cb_zero; o->upload_f64 = cb_upload_f64; o->download_f64 = cb_download_f64;
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
    o->allgatherv_bytes = cb_allgatherv_bytes; o->barrier = cb_barrier;
    o->destroy = cb_destroy;
    return DP_OK;
}

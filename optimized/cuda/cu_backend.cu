// optimized/cuda/cu_backend.cu — the CUDA backend behind the engine's interface
// (optimized/backend.h): opt_backend_cuda_create fills the operation table. This file
// holds the wiring only: per operation the argument checks and the call of its launcher
// in the engine's dtype (f32 or f64: cu_internal.cuh, one kernel per operation, kernels
// by concern in cu_pointwise.cu, cu_rmsnorm.cu, cu_attention.cu, cu_tokens.cu, cu_dp.cu,
// cu_noise.cu, cu_optim.cu, cu_gemm.cu, cu_attn_ring.cu), memory; the collectives, process
// groups and byte counters are cu_coll.cu's, the ledger notes cu_ledger.cu's (the shared
// context: cu_adapter.cuh). Buffers are device pointers; integer buffers (ids, labels) are
// device int32.
//
// Where the host backend's arithmetic is a fixed sequence of elementary operations
// (axpby, clip_accum, the fused accumulation, optimizers, ...) the kernels repeat it
// with correctly rounded intrinsics (rn_mul/rn_add: no fused multiply-add), so those
// operations agree with the host backend bit for bit.
//
// Collectives (cu_coll.cu): one rank (use_mpi = 0) or NCCL over MPI_COMM_WORLD's ranks
// (use_mpi = 1; the caller initialised MPI) and ncclCommSplit's communicators of process
// groups; every wait fails after the collective timeout naming the collective.
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
#include "optimized/cuda/cu_adapter.cuh"
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"

/* Strong symbol that a strong reference can use to pull this object out of
 * libdpoptimized.a (a weak reference to opt_backend_cuda_create alone does not). */
extern "C" {
extern const int cu_backend_linked;
const int cu_backend_linked = 1;
}

#define CU (CB(ctx)->cu)
/* evaluate the expression with R = double or R = float by the context's dtype, e.g.
 * BY_DTYPE(cu_add_t<R>(CU, (R *)y, (const R *)a, (const R *)b, n)) */
#define BY_DTYPE(...) \
    (CB(ctx)->f64 ? [&] { typedef double R; return __VA_ARGS__; }() : [&] { typedef float R; return __VA_ARGS__; }())

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

/* ---------------- dense linear algebra and pointwise (cu_gemm.cu, cu_pointwise.cu) ---------------- */
static dp_status cb_gemm(void *ctx, void *C, const void *A, const void *B, int ta, int tb, int64_t M, int64_t N,
                         int64_t K, double alpha, double beta, int64_t batch, int64_t sA, int64_t sB, int64_t sC) {
    DP_TRY(ck_int("gemm", M, "M")); DP_TRY(ck_int("gemm", N, "N")); DP_TRY(ck_int("gemm", K, "K"));
    DP_TRY(ck_int("gemm", batch, "batch"));
    if (M == 0 || N == 0 || batch == 0) return DP_OK;
    if (K == 0) { /* the empty sum: C = alpha 0 + beta C, as the host writes it back (beta = 0: overwrite) */
        for (int64_t b = 0; b < batch; b++)
            DP_TRY(BY_DTYPE(cu_gemm_k0_t<R>(CU, (R *)C + b * sC, alpha, beta, M * N)));
        return DP_OK;
    }
    return BY_DTYPE(cu_gemm_t<R>(CU, (R *)C, (const R *)A, (const R *)B, ta, tb, alpha, beta, (int)M, (int)N, (int)K, sA,
                                 sB, sC, (int)batch));
}
static dp_status cb_add_bias(void *ctx, void *y, const void *bias, int64_t rows, int64_t n) {
    DP_TRY(ck_n("add_bias", rows)); DP_TRY(ck_n("add_bias", n));
    return (rows > 0 && n > 0) ? BY_DTYPE(cu_add_bias_t<R>(CU, (R *)y, (const R *)bias, rows, n)) : DP_OK;
}
static dp_status cb_sum_rows(void *ctx, void *out, const void *x, int accumulate, int64_t groups, int64_t per, int64_t n) {
    DP_TRY(ck_n("sum_rows", groups)); DP_TRY(ck_n("sum_rows", per)); DP_TRY(ck_n("sum_rows", n));
    return (groups > 0 && n > 0) ? BY_DTYPE(cu_sum_rows_t<R>(CU, (R *)out, (const R *)x, accumulate, groups, per, n)) : DP_OK;
}
static dp_status cb_axpby(void *ctx, void *y, const void *x, double alpha, double beta, int64_t n) {
    DP_TRY(ck_n("axpby", n));
    return n ? BY_DTYPE(cu_axpby_t<R>(CU, (R *)y, (const R *)x, alpha, beta, n)) : DP_OK;
}
static dp_status cb_add(void *ctx, void *y, const void *a, const void *b, int64_t n) {
    DP_TRY(ck_n("add", n));
    return n ? BY_DTYPE(cu_add_t<R>(CU, (R *)y, (const R *)a, (const R *)b, n)) : DP_OK;
}
static dp_status cb_div_scalar(void *ctx, void *y, const void *x, double s, int64_t n) {
    DP_TRY(ck_n("div_scalar", n));
    if (!(s != 0) || !isfinite(s)) return dp_error(DP_ERR_INVALID, "cuda div_scalar: divisor must be finite and nonzero (got %g)", s);
    return n ? BY_DTYPE(cu_div_scalar_t<R>(CU, (R *)y, (const R *)x, s, n)) : DP_OK;
}
static dp_status cb_mul(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("mul", n));
    return n ? BY_DTYPE(cu_mul_t<R>(CU, (R *)y, (const R *)x, n)) : DP_OK;
}
static dp_status cb_tanh_fwd(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("tanh_fwd", n));
    return n ? BY_DTYPE(cu_tanh_fwd_t<R>(CU, (R *)y, (const R *)x, n)) : DP_OK;
}
static dp_status cb_tanh_bwd(void *ctx, void *dx, const void *dy, const void *y, int64_t n) {
    DP_TRY(ck_n("tanh_bwd", n));
    return n ? BY_DTYPE(cu_tanh_bwd_t<R>(CU, (R *)dx, (const R *)dy, (const R *)y, n)) : DP_OK;
}
static dp_status cb_silu_fwd(void *ctx, void *y, const void *x, int64_t n) {
    DP_TRY(ck_n("silu_fwd", n));
    return n ? BY_DTYPE(cu_silu_fwd_t<R>(CU, (R *)y, (const R *)x, n)) : DP_OK;
}
static dp_status cb_silu_bwd(void *ctx, void *dx, const void *dy, const void *x, int64_t n) {
    DP_TRY(ck_n("silu_bwd", n));
    return n ? BY_DTYPE(cu_silu_bwd_t<R>(CU, (R *)dx, (const R *)dy, (const R *)x, n)) : DP_OK;
}
static dp_status cb_swiglu_fwd(void *ctx, void *h, const void *a, const void *b, int64_t n) {
    return BY_DTYPE(cu_swiglu_fwd_t<R>(CU, (R *)h, (const R *)a, (const R *)b, n));
}
static dp_status cb_swiglu_bwd(void *ctx, void *da, void *db, const void *dh, const void *a, const void *b, int64_t n) {
    return BY_DTYPE(cu_swiglu_bwd_t<R>(CU, (R *)da, (R *)db, (const R *)dh, (const R *)a, (const R *)b, n));
}

/* ---------------- rmsnorm, rope, attention (cu_rmsnorm.cu, cu_attention.cu) ---------------- */
static dp_status cb_rmsnorm_fwd(void *ctx, void *y, void *rstd, const void *x, const void *g, double eps, int64_t rows,
                                int64_t D) {
    DP_TRY(ck_int("rmsnorm_fwd", rows, "rows")); DP_TRY(ck_int("rmsnorm_fwd", D, "D"));
    return BY_DTYPE(cu_rmsnorm_fwd_t<R>(CU, (R *)y, (R *)rstd, (const R *)x, (const R *)g, eps, (int)rows, (int)D));
}
static dp_status cb_rmsnorm_bwd(void *ctx, void *dx, void *dg_rows, const void *dy, const void *x, const void *rstd,
                                const void *g, int64_t rows, int64_t D) {
    DP_TRY(ck_int("rmsnorm_bwd", rows, "rows")); DP_TRY(ck_n("rmsnorm_bwd", D));
    if (!rows || !D) return DP_OK;
    return BY_DTYPE(cu_rmsnorm_bwd_t<R>(CU, (R *)dx, (R *)dg_rows, (const R *)dy, (const R *)x, (const R *)rstd,
                                        (const R *)g, rows, D));
}
static dp_status cb_rope(void *ctx, void *y, const void *x, double theta, int64_t B, int64_t T, int64_t H, int64_t hd,
                         int inverse) {
    DP_TRY(ck_int("rope", B, "B")); DP_TRY(ck_int("rope", T, "T")); DP_TRY(ck_int("rope", H, "H")); DP_TRY(ck_int("rope", hd, "hd"));
    if (y != x) DP_TRY(cb_copy(ctx, y, x, (size_t)(B * T * H * hd) * CB(ctx)->es));
    return BY_DTYPE(cu_rope_t<R>(CU, (R *)y, theta, inverse, (int)B, (int)T, (int)H, (int)hd));
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
    return BY_DTYPE(cu_attention_fwd_t<R>(CU, (R *)out, (R *)probs, (const R *)q, (const R *)k, (const R *)v, (int)B, (int)T,
                                          (int)H, (int)hd));
}
static dp_status cb_attn_bwd(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                             const void *v, const void *probs, int64_t B, int64_t T, int64_t H, int64_t hd) {
    DP_TRY(ck_int("attn_bwd", B, "B")); DP_TRY(ck_int("attn_bwd", T, "T")); DP_TRY(ck_int("attn_bwd", H, "H"));
    DP_TRY(ck_int("attn_bwd", hd, "hd"));
    void *dpre;
    DP_TRY(cu_ctx_scratch_(CU, &dpre, (size_t)(B * H * T * T) * CB(ctx)->es, CU_SLOT_TMP));
    return BY_DTYPE(cu_attention_bwd_t<R>(CU, (R *)dq, (R *)dk, (R *)dv, (R *)dpre, (const R *)dout, (const R *)q,
                                          (const R *)k, (const R *)v, (const R *)probs, (int)B, (int)T, (int)H, (int)hd));
}

/* ---------------- cross-entropy and embedding (cu_tokens.cu) ---------------- */
static dp_status cb_xent(void *ctx, void *out, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V,
                         int bwd) {
    DP_TRY(ck_int("xent", rows, "rows")); DP_TRY(ck_n("xent", V));
    return BY_DTYPE(cu_xent_t<R>(CU, (R *)out, (const R *)z, y, (const R *)w, rows, V, bwd));
}
static dp_status cb_xent_fwd(void *ctx, void *loss, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V) {
    return cb_xent(ctx, loss, z, y, w, rows, V, 0);
}
static dp_status cb_xent_bwd(void *ctx, void *dz, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V) {
    return cb_xent(ctx, dz, z, y, w, rows, V, 1);
}
static dp_status cb_embed_fwd(void *ctx, void *out, const void *table, const int32_t *ids, int64_t rows, int64_t V, int64_t D) {
    DP_TRY(ck_int("embed_fwd", rows, "rows")); DP_TRY(ck_int("embed_fwd", V, "V")); DP_TRY(ck_int("embed_fwd", D, "D"));
    return BY_DTYPE(cu_embedding_fwd_t<R>(CU, (R *)out, ids, (const R *)table, (int)rows, (int)V, (int)D));
}
static dp_status cb_embed_bwd(void *ctx, void *dtable, const void *dy, const int32_t *ids, int64_t rows, int64_t per,
                              int64_t V, int64_t D) {
    DP_TRY(ck_int("embed_bwd", rows, "rows")); DP_TRY(ck_n("embed_bwd", V)); DP_TRY(ck_n("embed_bwd", D));
    return BY_DTYPE(cu_embedding_bwd_t<R>(CU, (R *)dtable, (const R *)dy, ids, rows, per, V, D));
}

/* ---------------- DP operations (cu_dp.cu, cu_noise.cu) ---------------- */
static dp_status cb_sqnorm_rows(void *ctx, void *sq, const void *g, int64_t B, int64_t n) {
    DP_TRY(ck_int("sqnorm_rows", B, "B")); DP_TRY(ck_n("sqnorm_rows", n));
    if (!B) return DP_OK;
    void *sqd;
    DP_TRY(cu_ctx_scratch_(CU, &sqd, (size_t)B * sizeof(double), CU_SLOT_SQD));
    DP_TRY(BY_DTYPE(cu_rows_sqnorm_t<R>(CU, (double *)sqd, (const R *)g, n, (int)B)));
    return BY_DTYPE(cu_add_sq_t<R>(CU, (R *)sq, (const double *)sqd, B));
}
static dp_status cb_ghost_sqnorm(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d, int64_t p) {
    DP_TRY(ck_int("ghost_sqnorm", B, "B")); DP_TRY(ck_int("ghost_sqnorm", T, "T"));
    DP_TRY(ck_int("ghost_sqnorm", d, "d")); DP_TRY(ck_int("ghost_sqnorm", p, "p"));
    if (!B) return DP_OK;
    void *sqd;
    DP_TRY(cu_ctx_scratch_(CU, &sqd, (size_t)B * sizeof(double), CU_SLOT_SQD));
    DP_TRY(BY_DTYPE(cu_ghost_sqnorm_t<R>(CU, (double *)sqd, (const R *)A, (const R *)G, 0, (int)B, (int)T, (int)d, (int)p)));
    return BY_DTYPE(cu_add_sq_t<R>(CU, (R *)sq, (const double *)sqd, B));
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
    return BY_DTYPE((cu_clip_factors_t<R, R>(CU, (R *)c, (const R *)sq, C, fn == OPT_CLIP_AUTOMATIC, gamma, B)));
}
static dp_status cb_clip_accum(void *ctx, void *sum, const void *g, const void *c, int64_t B, int64_t n) {
    DP_TRY(ck_n("clip_accum", B)); DP_TRY(ck_n("clip_accum", n));
    return (n && B) ? BY_DTYPE(cu_clip_accum_t<R>(CU, (R *)sum, (const R *)g, (const R *)c, B, n)) : DP_OK;
}
static dp_status cb_bk_gemm(void *ctx, void *dW, const void *A, const void *G, const void *c, int64_t B, int64_t T,
                            int64_t d, int64_t p) {
    DP_TRY(ck_int("bk_gemm", B * T, "B*T")); DP_TRY(ck_int("bk_gemm", d, "d")); DP_TRY(ck_int("bk_gemm", p, "p"));
    if (!B || !T || !d || !p) return DP_OK;
    void *Gs;
    DP_TRY(cu_ctx_scratch_(CU, &Gs, (size_t)(B * T * p) * CB(ctx)->es, CU_SLOT_TMP));
    return BY_DTYPE(cu_bk_wgrad_t<R>(CU, (R *)dW, (R *)Gs, (const R *)A, (const R *)G, (const R *)c, (int)B, (int)T, (int)d,
                                     (int)p));
}
/* The fused path in the engine's dtype. fused_clip_accum: the single pass (cu_fused.cu: one
 * cooperative launch, no per-example block in device memory) when the layer fits and
 * DPCERT_CUDA_FUSED is not "chunked"; otherwise, and for fused_sqnorm (sq_acc != NULL: norms
 * only), the chunked path: per chunk one strided-batched GEMM of per-example blocks, their
 * hierarchical norms, then the factors and the clipped accumulation (cu_fused_chunk_t). */
template <typename R>
static dp_status fused_t(void *ctx, R *dW, R *sq_out, R *c_out, const R *A, const R *G, const R *extra, double C,
                         opt_clip_fn fn, double gamma, int64_t B, int64_t T, int64_t d, int64_t p, R *sq_acc) {
    if (!sq_acc && CB(ctx)->fused_single) {
        int used = 0;
        DP_TRY(cu_fused_single_t<R>(CU, &used, dW, sq_out, c_out, A, G, extra, C, fn == OPT_CLIP_AUTOMATIC, gamma, B, T, d, p));
        if (used) return DP_OK;
    }
    int64_t n = p * d;
    /* the same byte budget for f32 and f64 blocks (cu_fused_chunk counts 4-byte elements) */
    int bc = cu_fused_chunk(CU_FUSED_WS_BYTES * 4 / (int64_t)sizeof(R), (int)B, p, d);
    void *ws, *sqd;
    DP_TRY(cu_ctx_scratch_(CU, &ws, (size_t)(n * bc) * sizeof(R), CU_SLOT_WS));
    DP_TRY(cu_ctx_scratch_(CU, &sqd, (size_t)bc * sizeof(double), CU_SLOT_SQD));
    for (int64_t b0 = 0; b0 < B; b0 += bc) {
        int64_t nb = B - b0 < bc ? B - b0 : bc;
        DP_TRY(cu_gemm_t<R>(CU, (R *)ws, G + b0 * T * p, A + b0 * T * d, 1, 0, 1.0, 0.0, (int)p, (int)d, (int)T, T * p,
                            T * d, n, (int)nb));
        DP_TRY(cu_rows_sqnorm_t<R>(CU, (double *)sqd, (const R *)ws, n, (int)nb));
        if (sq_acc) {
            DP_TRY(cu_add_sq_t<R>(CU, sq_acc + b0, (const double *)sqd, nb));
            continue;
        }
        DP_TRY(cu_fused_chunk_t<R>(CU, dW, sq_out ? sq_out + b0 : NULL, c_out ? c_out + b0 : NULL, (const double *)sqd,
                                   (const R *)ws, extra ? extra + b0 : NULL, C, fn == OPT_CLIP_AUTOMATIC, gamma, nb, n));
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
    return BY_DTYPE(fused_t<R>(ctx, (R *)dW, (R *)sq_out, (R *)c_out, (const R *)A, (const R *)G, (const R *)extra_sq, C, fn,
                               gamma, B, T, d, p, NULL));
}
static dp_status cb_fused_sqnorm(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d, int64_t p) {
    DP_TRY(fused_args(B, T, d, p));
    if (!B) return DP_OK;
    return BY_DTYPE(fused_t<R>(ctx, NULL, NULL, NULL, (const R *)A, (const R *)G, NULL, 1.0, OPT_CLIP_ABADI, 0.0, B, T, d, p,
                               (R *)sq));
}
static dp_status cb_noise_add(void *ctx, void *x, dp_noise_key key, uint32_t stream, uint32_t lane, double std,
                              uint64_t offset, int64_t n) {
    return BY_DTYPE(cu_noise_add_t<R>(CU, (R *)x, key.k, stream, lane, offset, std, n));
}

/* ---------------- optimizers (cu_optim.cu) ---------------- */
static dp_status cb_sgd_momentum(void *ctx, void *param, void *buf, const void *grad, double lr, double mu, double wd,
                                 int64_t t, int64_t n) {
    (void)t; /* unused, as on the host */
    DP_TRY(ck_n("sgd_momentum", n));
    return n ? BY_DTYPE(cu_sgd_t<R>(CU, (R *)param, (R *)buf, (const R *)grad, lr, mu, wd, n)) : DP_OK;
}
static dp_status cb_adamw(void *ctx, void *param, void *m, void *v, const void *grad, double lr, double b1, double b2,
                          double eps, double wd, int64_t t, int64_t n) {
    DP_TRY(ck_n("adamw", n));
    if (t < 1) return dp_error(DP_ERR_INVALID, "cuda adamw: step t must be >= 1 (got %lld)", (long long)t);
    if (!n) return DP_OK;
    const double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    return BY_DTYPE(cu_adamw_t<R>(CU, (R *)param, (R *)m, (R *)v, (const R *)grad, lr, b1, b2, eps, wd, bc1, bc2, n));
}

/* ---------------- collectives, process groups, counters: cu_coll.cu ---------------- */

/* ---------------- lifetime ---------------- */
static void cb_destroy(void *ctx) {
    if (!ctx) return;
    cb_coll_destroy(CB(ctx));
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
    const char *fm = getenv("DPCERT_CUDA_FUSED"); /* docs/cuda.md "(1b) Single pass" */
    if (fm && *fm && strcmp(fm, "single") && strcmp(fm, "chunked")) {
        dp_free(c);
        return dp_error(DP_ERR_USAGE, "DPCERT_CUDA_FUSED must be 'single' or 'chunked' (got '%s')", fm);
    }
    c->fused_single = !(fm && strcmp(fm, "chunked") == 0);
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
    cb_coll_ops(o);
    cb_ring_ops(o);
    cb_ledger_attach(c, be);
    o->destroy = cb_destroy;
    return DP_OK;
}

/* openblas_backend.c — a dpcert backend plugin whose GEMM-based operations run on
 * OpenBLAS (README.md; docs/plugin-abi.md). Built from this directory against
 * dpcert_backend.h and cblas.h only, as a team outside dpcert would build its own.
 *
 * Its own operations: gemm (cblas_?gemm per batch entry), bk_gemm (one GEMM over the B T
 * rows with the clip factors folded into a scaled copy of G), clip_accum (cblas_?gemv),
 * ghost_sqnorm (two Gram GEMMs per example), fused_sqnorm and fused_clip_accum (one
 * G_b^T A_b GEMM per example into a block, its squared norm, the factor, dW += c_b g_b;
 * a dropped example, c_b = 0, is skipped, never multiplied). Every other operation is
 * NULL: with inherit_host dpcert runs its host backend's there (same host memory).
 *
 * Declared arithmetic: OpenBLAS chooses the summation order and blocking of its kernels
 * and uses fused multiply-adds (order unknown, FMA allowed); the element-wise sums of
 * squares here accumulate in double (more accurate than the dtype: inside the bounds).
 * Determinism: the same bits at a fixed thread count (OpenBLAS's partition depends on
 * its thread count): run-to-run. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "dpcert_backend.h"

typedef struct {
    int f64;                 /* DPCERT_F64 buffers (else F32) */
    size_t es;               /* element size */
    const dpcert_host *host;
    void *scratch;           /* grown on demand */
    size_t scratch_bytes;
} ob_ctx;

static dpcert_status ob_sizes(ob_ctx *c, const char *op, int64_t a, int64_t b, int64_t d) {
    if (a < 0 || b < 0 || d < 0 || a > INT_MAX || b > INT_MAX || d > INT_MAX)
        return c->host->error(DPCERT_ERR_INVALID, "openblas %s: size out of range [0, 2^31): %lld, %lld, %lld", op,
                              (long long)a, (long long)b, (long long)d);
    return DPCERT_OK;
}
static void *ob_scratch(ob_ctx *c, size_t bytes) {
    if (bytes > c->scratch_bytes) {
        void *p = realloc(c->scratch, bytes);
        if (!p) return NULL;
        c->scratch = p;
        c->scratch_bytes = bytes;
    }
    return c->scratch;
}
static double ld(const ob_ctx *c, const void *p, int64_t i) { return c->f64 ? ((const double *)p)[i] : ((const float *)p)[i]; }
static void st(const ob_ctx *c, void *p, int64_t i, double v) {
    if (c->f64) ((double *)p)[i] = v;
    else ((float *)p)[i] = (float)v;
}
static int imax1(int64_t x) { return x > 1 ? (int)x : 1; }

/* row-major C[M,N] = alpha op(A) op(B) + beta C with leading dimensions lda, ldb, ldc */
static void ob_gemm1(const ob_ctx *c, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const void *A,
                     int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc) {
    if (M == 0 || N == 0) return;
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    if (c->f64)
        cblas_dgemm(CblasRowMajor, TA, TB, (int)M, (int)N, (int)K, alpha, A, imax1(lda), B, imax1(ldb), beta, C, imax1(ldc));
    else
        cblas_sgemm(CblasRowMajor, TA, TB, (int)M, (int)N, (int)K, (float)alpha, A, imax1(lda), B, imax1(ldb), (float)beta, C,
                    imax1(ldc));
}

/* C_b[M,N] = alpha op(A_b) op(B_b) + beta C_b, b < batch */
static dpcert_status ob_gemm(void *ctx, void *C, const void *A, const void *B, int ta, int tb, int64_t M, int64_t N,
                             int64_t K, double alpha, double beta, int64_t batch, int64_t sA, int64_t sB, int64_t sC) {
    ob_ctx *c = ctx;
    dpcert_status s = ob_sizes(c, "gemm", M, N, K);
    if (s != DPCERT_OK) return s;
    if (batch < 0 || sA < 0 || sB < 0 || sC < 0)
        return c->host->error(DPCERT_ERR_INVALID, "openblas gemm: negative batch or stride");
    for (int64_t b = 0; b < batch; b++)
        ob_gemm1(c, ta, tb, M, N, K, alpha, (const char *)A + (size_t)(b * sA) * c->es, ta ? M : K,
                 (const char *)B + (size_t)(b * sB) * c->es, tb ? K : N, beta, (char *)C + (size_t)(b * sC) * c->es, N);
    return DPCERT_OK;
}

/* sum[j] += sum_b c[b] g[b, j]: sum += g^T c   g [B, n] */
static dpcert_status ob_clip_accum(void *ctx, void *sum, const void *g, const void *cf, int64_t B, int64_t n) {
    ob_ctx *c = ctx;
    dpcert_status s = ob_sizes(c, "clip_accum", B, n, 0);
    if (s != DPCERT_OK || B == 0 || n == 0) return s;
    if (c->f64) cblas_dgemv(CblasRowMajor, CblasTrans, (int)B, (int)n, 1.0, g, (int)n, cf, 1, 1.0, sum, 1);
    else cblas_sgemv(CblasRowMajor, CblasTrans, (int)B, (int)n, 1.0f, g, (int)n, cf, 1, 1.0f, sum, 1);
    return DPCERT_OK;
}

/* dW[p, d] += (diag(c) G)^T A over the B T rows   A [B, T, d], G [B, T, p] */
static dpcert_status ob_bk_gemm(void *ctx, void *dW, const void *A, const void *G, const void *cf, int64_t B, int64_t T,
                                int64_t d, int64_t p) {
    ob_ctx *c = ctx;
    dpcert_status s = ob_sizes(c, "bk_gemm", B * T, d, p);
    if (s != DPCERT_OK || B * T == 0) return s;
    void *gc = ob_scratch(c, (size_t)(B * T * p) * c->es);
    if (!gc) return c->host->error(DPCERT_ERR_NOMEM, "openblas bk_gemm: out of memory");
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T * p; i++) st(c, gc, b * T * p + i, ld(c, cf, b) * ld(c, G, b * T * p + i));
    ob_gemm1(c, 1, 0, p, d, B * T, 1.0, gc, p, A, d, 1.0, dW, d);
    return DPCERT_OK;
}

/* sq[b] += sum_{t,s} (A_b A_b^T)[t,s] (G_b G_b^T)[t,s] */
static dpcert_status ob_ghost_sqnorm(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d,
                                     int64_t p) {
    ob_ctx *c = ctx;
    dpcert_status s = ob_sizes(c, "ghost_sqnorm", B, T * T, d > p ? d : p);
    if (s != DPCERT_OK) return s;
    char *ga = ob_scratch(c, (size_t)(2 * T * T + 1) * c->es);
    if (!ga) return c->host->error(DPCERT_ERR_NOMEM, "openblas ghost_sqnorm: out of memory");
    char *gg = ga + (size_t)(T * T) * c->es;
    for (int64_t b = 0; b < B; b++) {
        ob_gemm1(c, 0, 1, T, T, d, 1.0, (const char *)A + (size_t)(b * T * d) * c->es, d,
                 (const char *)A + (size_t)(b * T * d) * c->es, d, 0.0, ga, T);
        ob_gemm1(c, 0, 1, T, T, p, 1.0, (const char *)G + (size_t)(b * T * p) * c->es, p,
                 (const char *)G + (size_t)(b * T * p) * c->es, p, 0.0, gg, T);
        double acc = 0;
        for (int64_t i = 0; i < T * T; i++) acc += ld(c, ga, i) * ld(c, gg, i);
        st(c, sq, b, ld(c, sq, b) + acc);
    }
    return DPCERT_OK;
}

/* the block g_b = G_b^T A_b [p, d] into blk; returns ||g_b||^2 */
static double ob_block(const ob_ctx *c, void *blk, const void *A, const void *G, int64_t b, int64_t T, int64_t d, int64_t p) {
    ob_gemm1(c, 1, 0, p, d, T, 1.0, (const char *)G + (size_t)(b * T * p) * c->es, p,
             (const char *)A + (size_t)(b * T * d) * c->es, d, 0.0, blk, d);
    double sq = 0;
    for (int64_t i = 0; i < p * d; i++) sq += ld(c, blk, i) * ld(c, blk, i);
    return sq;
}
static dpcert_status ob_fused_sqnorm(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d,
                                     int64_t p) {
    ob_ctx *c = ctx;
    dpcert_status s = ob_sizes(c, "fused_sqnorm", B * T, d, p);
    void *blk = s == DPCERT_OK ? ob_scratch(c, (size_t)(p * d + 1) * c->es) : NULL;
    if (s != DPCERT_OK) return s;
    if (!blk) return c->host->error(DPCERT_ERR_NOMEM, "openblas fused_sqnorm: out of memory");
    for (int64_t b = 0; b < B; b++) st(c, sq, b, ld(c, sq, b) + ob_block(c, blk, A, G, b, T, d, p));
    return DPCERT_OK;
}

static double ob_clip(double sq, double C, dpcert_clip_fn fn, double gamma) {
    double n = sqrt(sq);
    if (fn == DPCERT_CLIP_AUTOMATIC) return C / (n + gamma);
    return n > C ? C / n : 1.0;
}
static dpcert_status ob_fused_clip_accum(void *ctx, void *dW, void *sq_out, void *c_out, const void *A, const void *G,
                                         const void *extra, double C, dpcert_clip_fn fn, double gamma, int64_t B, int64_t T,
                                         int64_t d, int64_t p) {
    ob_ctx *c = ctx;
    dpcert_status s = ob_sizes(c, "fused_clip_accum", B * T, d, p);
    void *blk = s == DPCERT_OK ? ob_scratch(c, (size_t)(p * d + 1) * c->es) : NULL;
    if (s != DPCERT_OK) return s;
    if (!blk) return c->host->error(DPCERT_ERR_NOMEM, "openblas fused_clip_accum: out of memory");
    for (int64_t b = 0; b < B; b++) {
        double sq = ob_block(c, blk, A, G, b, T, d, p);
        if (extra) sq += ld(c, extra, b);
        if (!c->f64) sq = (float)sq; /* the squared norm as stored */
        double cb = ob_clip(sq, C, fn, gamma);
        if (!c->f64) cb = (float)cb;
        if (sq_out) st(c, sq_out, b, sq);
        if (c_out) st(c, c_out, b, cb);
        if (cb == 0) continue; /* a dropped example is skipped, never multiplied */
        if (c->f64) cblas_daxpy((int)(p * d), cb, blk, 1, dW, 1);
        else cblas_saxpy((int)(p * d), (float)cb, blk, 1, dW, 1);
    }
    return DPCERT_OK;
}

static void ob_destroy(void *ctx) {
    ob_ctx *c = ctx;
    if (!c) return;
    free(c->scratch);
    free(c);
}

/* ---- the entry points ---- */
uint32_t dpcert_backend_abi_version(void) { return DPCERT_BACKEND_ABI_VERSION; }

dpcert_status dpcert_backend_query(dpcert_caps *caps) {
    memset(caps, 0, sizeof *caps);
    caps->abi_version = DPCERT_BACKEND_ABI_VERSION;
    caps->abi_layout = DPCERT_BACKEND_ABI_LAYOUT;
    strcpy(caps->name, "openblas");
    strcpy(caps->description, "dpcert's host kernels with the GEMM-based operations on OpenBLAS");
    caps->dtypes = DPCERT_DTYPE_BIT(DPCERT_F64) | DPCERT_DTYPE_BIT(DPCERT_F32);
    static const dpcert_op own[] = {DPCERT_OP_GEMM, DPCERT_OP_CLIP_ACCUM, DPCERT_OP_BK_GEMM, DPCERT_OP_GHOST_SQNORM,
                                    DPCERT_OP_FUSED_SQNORM, DPCERT_OP_FUSED_CLIP_ACCUM};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) caps->ops[own[i]] = 1;
    caps->memory = DPCERT_MEMORY_HOST;
    caps->inherit_host = 1;
    caps->collectives = DPCERT_COLLECTIVES_NONE; /* the host backend's (MPI) are inherited */
    caps->determinism = DPCERT_DET_RUN_TO_RUN;
    for (int t = DPCERT_F64; t <= DPCERT_F32; t++)
        caps->arith[t] = (dpcert_arith){.u_in = 0, .u_acc = 0, .order = DPCERT_ORDER_UNKNOWN, .fma = 1, .libm_ulps = 1};
    return DPCERT_OK;
}

dpcert_status dpcert_backend_create(dpcert_backend_ops *ops, void **ctx, const dpcert_backend_config *cfg,
                                    const dpcert_host *host) {
    ob_ctx *c = calloc(1, sizeof *c);
    if (!c) return host->error(DPCERT_ERR_NOMEM, "openblas: out of memory");
    c->f64 = cfg->dtype == DPCERT_F64;
    c->es = c->f64 ? sizeof(double) : sizeof(float);
    c->host = host;
    openblas_set_num_threads(cfg->threads);
    ops->gemm = ob_gemm;
    ops->clip_accum = ob_clip_accum;
    ops->bk_gemm = ob_bk_gemm;
    ops->ghost_sqnorm = ob_ghost_sqnorm;
    ops->fused_sqnorm = ob_fused_sqnorm;
    ops->fused_clip_accum = ob_fused_clip_accum;
    ops->destroy = ob_destroy;
    *ctx = c;
    return DPCERT_OK;
}

/* skeleton.c — a dpcert backend plugin to start from (README.md, docs/gating-kernels.md).
 *
 * Three operations are implemented — axpby, sqnorm_rows and clip_factors, for f64 and
 * f32 buffers in host memory — and every other entry is left NULL. The declaration
 * (dpcert_backend_query) says exactly that; with inherit_host = 1 dpcert runs its own host
 * backend's operation wherever this table is NULL, so `dpcert train` and `dpcert conform`
 * run a whole training step with these three kernels in it, while `dpcert ops` judges
 * only these three (the others are reported NOT_SUPPORTED). Replace the bodies with calls
 * into your kernels, fill more entries, and declare what you fill.
 *
 * Built against dpcert_backend.h only (no other dpcert header, no dpcert library). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dpcert_backend.h"

typedef struct {
    dpcert_dtype dtype;
    const dpcert_host *host; /* host->error(status, fmt, ...) records the message dpcert prints */
} sk_ctx;

/* y[i] = alpha * x[i] + beta * y[i] */
static dpcert_status sk_axpby(void *ctx, void *y, const void *x, double alpha, double beta, int64_t n) {
    sk_ctx *c = ctx;
    if (n < 0) return c->host->error(DPCERT_ERR_INVALID, "axpby: negative size %lld", (long long)n);
    if (c->dtype == DPCERT_F64) {
        double *yy = y;
        const double *xx = x;
        for (int64_t i = 0; i < n; i++) yy[i] = alpha * xx[i] + (beta == 0 ? 0 : beta * yy[i]);
    } else {
        float *yy = y, a = (float)alpha, b = (float)beta;
        const float *xx = x;
        for (int64_t i = 0; i < n; i++) yy[i] = a * xx[i] + (b == 0 ? 0 : b * yy[i]);
    }
    return DPCERT_OK;
}

/* sq[b] += sum_j g[b, j]^2      g [B, n] */
static dpcert_status sk_sqnorm_rows(void *ctx, void *sq, const void *g, int64_t B, int64_t n) {
    sk_ctx *c = ctx;
    for (int64_t b = 0; b < B; b++) {
        if (c->dtype == DPCERT_F64) {
            const double *gb = (const double *)g + b * n;
            double acc = 0;
            for (int64_t j = 0; j < n; j++) acc += gb[j] * gb[j];
            ((double *)sq)[b] += acc;
        } else {
            const float *gb = (const float *)g + b * n;
            float acc = 0;
            for (int64_t j = 0; j < n; j++) acc += gb[j] * gb[j];
            ((float *)sq)[b] += acc;
        }
    }
    return DPCERT_OK;
}

/* c[b] = clipfn(sqrt(sq[b])): abadi min(1, C / n) (1 when n = 0), automatic C / (n + gamma) */
static double sk_clip(double sq, double C, dpcert_clip_fn fn, double gamma) {
    double n = sqrt(sq);
    if (fn == DPCERT_CLIP_AUTOMATIC) return C / (n + gamma);
    return n > C ? C / n : 1.0;
}
static dpcert_status sk_clip_factors(void *ctx, void *cf, const void *sq, double C, dpcert_clip_fn fn, double gamma,
                                     int64_t B) {
    sk_ctx *c = ctx;
    for (int64_t b = 0; b < B; b++) {
        if (c->dtype == DPCERT_F64) ((double *)cf)[b] = sk_clip(((const double *)sq)[b], C, fn, gamma);
        else ((float *)cf)[b] = (float)sk_clip(((const float *)sq)[b], C, fn, gamma);
    }
    return DPCERT_OK;
}

static void sk_destroy(void *ctx) { free(ctx); }

/* ---- the three entry points ---- */
uint32_t dpcert_backend_abi_version(void) { return DPCERT_BACKEND_ABI_VERSION; }

dpcert_status dpcert_backend_query(dpcert_caps *caps) {
    memset(caps, 0, sizeof *caps);
    caps->abi_version = DPCERT_BACKEND_ABI_VERSION;
    caps->abi_layout = DPCERT_BACKEND_ABI_LAYOUT;
    strcpy(caps->name, "skeleton");
    strcpy(caps->description, "the plugin template: axpby, sqnorm_rows, clip_factors in C");
    caps->dtypes = DPCERT_DTYPE_BIT(DPCERT_F64) | DPCERT_DTYPE_BIT(DPCERT_F32);
    caps->ops[DPCERT_OP_AXPBY] = 1;
    caps->ops[DPCERT_OP_SQNORM_ROWS] = 1;
    caps->ops[DPCERT_OP_CLIP_FACTORS] = 1;
    caps->memory = DPCERT_MEMORY_HOST;
    caps->inherit_host = 1;
    caps->collectives = DPCERT_COLLECTIVES_NONE; /* none of our own; inherited from the host backend */
    caps->determinism = DPCERT_DET_BITWISE;      /* one thread, fixed order: the same bits every time */
    for (int t = DPCERT_F64; t <= DPCERT_F32; t++)
        caps->arith[t] = (dpcert_arith){.u_in = 0, .u_acc = 0, .order = DPCERT_ORDER_DOCUMENTED, .fma = 0, .libm_ulps = 1};
    return DPCERT_OK;
}

dpcert_status dpcert_backend_create(dpcert_backend_ops *ops, void **ctx, const dpcert_backend_config *cfg,
                                    const dpcert_host *host) {
    sk_ctx *c = calloc(1, sizeof *c);
    if (!c) return host->error(DPCERT_ERR_NOMEM, "skeleton: out of memory");
    c->dtype = cfg->dtype;
    c->host = host;
    ops->axpby = sk_axpby;
    ops->sqnorm_rows = sk_sqnorm_rows;
    ops->clip_factors = sk_clip_factors;
    ops->destroy = sk_destroy;
    *ctx = c;
    return DPCERT_OK;
}

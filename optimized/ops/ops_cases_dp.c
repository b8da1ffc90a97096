/* optimized/ops/ops_cases_dp.c — harness cases of the DP operations (row norms, ghost
 * norms, clip factors, clipped accumulation, book-keeping GEMM, fused clip-accumulate,
 * Philox noise) and the optimizers (definitions: optimized/backend.h; bounds:
 * docs/tolerances.md "Operation harness"). Dropped examples (factor 0, or a non-finite
 * extra squared norm in the fused operation) must add an exact 0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ops/ops.h"
#include "common/alloc.h"

/* ---- clip functions: abadi n > C ? C / n : 1, automatic C / (n + gamma), n = sqrt(sq) ---- */
static double clipfn(double n, double C, opt_clip_fn fn, double g) {
    return fn == OPT_CLIP_AUTOMATIC ? C / (n + g) : (n > C ? C / n : 1.0);
}
/* c is decreasing in n and gamma, increasing in C: its extremes over the intervals of n
 * and of the rounded scalars, plus the addition and the division (two roundings) */
static opt_rd rd_clip(const opt_rd_env *e, opt_rd sq, double C, opt_clip_fn fn, double gamma) {
    if (isinf(sq.v) && sq.v > 0) return opt_rd_x(0); /* C / inf = 0 in every precision: a dropped example */
    opt_rd n = opt_rd_sqrt(e, sq);
    double v = clipfn(n.v, C, fn, gamma);
    if (!(n.r < INFINITY)) return (opt_rd){v, INFINITY};
    double s = e->scal;
    double lo = clipfn(n.v + n.r, C * (1 - s), fn, gamma * (1 + s));
    double hi = clipfn(fmax(n.v - n.r, 0), C * (1 + s), fn, gamma * (1 - s));
    double d = fmax(fabs(hi - v), fabs(lo - v));
    return (opt_rd){v, d + 2 * e->u * (fabs(v) + d) + e->eta};
}

/* per-example block g_b[i, e] = sum_t G[b, t, i] A[b, t, e] (a GEMM-like product) */
static opt_rd blk_elem(const opt_rd_env *e, const double *A, const double *G, int64_t b, int64_t T, int64_t d, int64_t p,
                       int64_t i, int64_t f) {
    return opt_rd_dot(e, G + b * T * p + i, p, A + b * T * d + f, d, T);
}

typedef struct { int64_t B, T, d, p, n; opt_clip_fn fn; double C, gamma; int extra, outs; } dp_p;

/* ---- sqnorm_rows, mul, clip_accum ---- */
static dp_status rows_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const dp_p *p = c->params;
    if (c->op == OPT_OP_SQNORM_ROWS) return OPS_CALL(be, sqnorm_rows, d[0], d[1], p->B, p->n);
    if (c->op == OPT_OP_MUL) return OPS_CALL(be, mul, d[0], d[1], p->n);
    return OPS_CALL(be, clip_accum, d[0], d[1], d[2], p->B, p->n);
}
static dp_status rows_one(opt_ops_h *h, opt_op op, dp_p p, opt_ops_fill fill, double scale) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, op, "B=%lld n=%lld%s", (long long)p.B, (long long)p.n,
                      fill == OPT_FILL_SPECIAL ? " NaN/inf" : fill == OPT_FILL_TINY ? " tiny" : scale > 1e3 ? " huge" : "");
    const opt_rd_env *e = &h->env;
    if (op == OPT_OP_MUL) {
        const double *y = opt_ops_buf_f(&c, "y", OPT_OPS_INOUT, p.n, fill, scale);
        const double *x = opt_ops_buf_f(&c, "x", OPT_OPS_IN, p.n, OPT_FILL_NORMAL, 1);
        c.invoke = rows_inv;
        c.params = &p;
        DP_TRY(opt_ops_exec(&c));
        for (int64_t i = 0; i < p.n; i++) OPS_REF(&c, 0, i) = opt_rd_mul(e, opt_rd_x(y[i]), opt_rd_x(x[i]));
        opt_ops_finish(&c);
        return DP_OK;
    }
    const int sq = op == OPT_OP_SQNORM_ROWS;
    const double *acc = opt_ops_buf_f(&c, sq ? "sq" : "sum", OPT_OPS_INOUT, sq ? p.B : p.n, sq ? OPT_FILL_POS : OPT_FILL_NORMAL, 1);
    const double *g = opt_ops_buf_f(&c, "g", OPT_OPS_IN, p.B * p.n, fill, scale);
    double *cf = sq ? NULL : opt_ops_buf_f(&c, "c", OPT_OPS_IN, p.B, OPT_FILL_POS, 0.5);
    for (int64_t b = 0; cf && b < p.B; b++) if (b % 3 == 1) cf[b] = 0; /* dropped examples */
    c.invoke = rows_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    opt_rd *t = dp_malloc(sizeof(opt_rd) * (size_t)((sq ? p.n : p.B) + 1));
    if (!t) return DP_ERR_NOMEM;
    if (sq)
        for (int64_t b = 0; b < p.B; b++) {
            for (int64_t j = 0; j < p.n; j++) t[j] = opt_rd_mul(e, opt_rd_x(g[b * p.n + j]), opt_rd_x(g[b * p.n + j]));
            OPS_REF(&c, 0, b) = opt_rd_acc(e, opt_rd_x(acc[b]), t, p.n);
        }
    else
        for (int64_t j = 0; j < p.n; j++) {
            for (int64_t b = 0; b < p.B; b++) t[b] = opt_rd_mul(e, opt_rd_x(cf[b]), opt_rd_x(g[b * p.n + j]));
            OPS_REF(&c, 0, j) = opt_rd_acc(e, opt_rd_x(acc[j]), t, p.B);
        }
    dp_free(t);
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status rows_cases(opt_ops_h *h, opt_op op) {
    static const int64_t sz[][2] = {{1, 1}, {3, 7}, {17, 33}, {0, 5}, {4, 0}, {5, 4099}};
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++)
        DP_TRY(rows_one(h, op, (dp_p){.B = sz[s][0], .n = sz[s][1] * (op == OPT_OP_MUL ? sz[s][0] : 1)}, OPT_FILL_NORMAL, 1));
    DP_TRY(rows_one(h, op, (dp_p){.B = 4, .n = 9}, OPT_FILL_TINY, 1));
    DP_TRY(rows_one(h, op, (dp_p){.B = 4, .n = 9}, OPT_FILL_NORMAL, opt_ops_huge(h) / 64));
    /* NaN/inf: only where the clip factor is not 0 (0 * inf is not specified: the engine zeroes dropped rows) */
    return op == OPT_OP_CLIP_ACCUM ? DP_OK : rows_one(h, op, (dp_p){.B = 4, .n = 9}, OPT_FILL_SPECIAL, 1);
}
static dp_status case_sqnorm_rows(opt_ops_h *h) { return rows_cases(h, OPT_OP_SQNORM_ROWS); }
static dp_status case_mul(opt_ops_h *h) { return rows_cases(h, OPT_OP_MUL); }
static dp_status case_clip_accum(opt_ops_h *h) { return rows_cases(h, OPT_OP_CLIP_ACCUM); }

/* ---- clip_factors ---- */
static dp_status cf_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const dp_p *p = c->params;
    return OPS_CALL(be, clip_factors, d[0], d[1], p->C, p->fn, p->gamma, p->B);
}
static dp_status cf_one(opt_ops_h *h, dp_p p) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, OPT_OP_CLIP_FACTORS, "B=%lld C=%g %s gamma=%g", (long long)p.B, p.C,
                      p.fn == OPT_CLIP_AUTOMATIC ? "automatic" : "abadi", p.gamma);
    opt_ops_buf_f(&c, "c", OPT_OPS_OUT, p.B, OPT_FILL_POISON, 1);
    double *sq = opt_ops_buf_f(&c, "sq", OPT_OPS_IN, p.B, OPT_FILL_POS, p.C * p.C);
    /* edges: 0, C^2 exactly (the kink), +inf (dropped), tiny, huge */
    const double edge[] = {0, opt_ops_round(h, p.C * p.C), INFINITY, 1e-30, opt_ops_huge(h)};
    for (int64_t b = 0; sq && b < p.B && b < 5; b++) sq[b] = opt_ops_round(h, edge[b]);
    c.invoke = cf_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    for (int64_t b = 0; b < p.B; b++) OPS_REF(&c, 0, b) = rd_clip(&h->env, opt_rd_x(sq[b]), p.C, p.fn, p.gamma);
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status case_clip_factors(opt_ops_h *h) {
    DP_TRY(cf_one(h, (dp_p){.B = 17, .C = 1.0, .fn = OPT_CLIP_ABADI}));
    DP_TRY(cf_one(h, (dp_p){.B = 9, .C = 0.37, .fn = OPT_CLIP_ABADI}));
    DP_TRY(cf_one(h, (dp_p){.B = 17, .C = 1.0, .fn = OPT_CLIP_AUTOMATIC, .gamma = 0.01}));
    DP_TRY(cf_one(h, (dp_p){.B = 1, .C = 2.5, .fn = OPT_CLIP_AUTOMATIC, .gamma = 1e-6}));
    return cf_one(h, (dp_p){.B = 0, .C = 1.0, .fn = OPT_CLIP_ABADI});
}

/* ---- ghost_sqnorm, fused_sqnorm, bk_gemm, fused_clip_accum ---- */
static dp_status blk_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const dp_p *p = c->params;
    switch (c->op) {
    case OPT_OP_GHOST_SQNORM: return OPS_CALL(be, ghost_sqnorm, d[0], d[1], d[2], p->B, p->T, p->d, p->p);
    case OPT_OP_FUSED_SQNORM: return OPS_CALL(be, fused_sqnorm, d[0], d[1], d[2], p->B, p->T, p->d, p->p);
    case OPT_OP_BK_GEMM: return OPS_CALL(be, bk_gemm, d[0], d[1], d[2], d[3], p->B, p->T, p->d, p->p);
    default:
        return OPS_CALL(be, fused_clip_accum, d[0], p->outs ? d[1] : NULL, p->outs ? d[2] : NULL, d[3], d[4],
                        p->extra ? d[5] : NULL, p->C, p->fn, p->gamma, p->B, p->T, p->d, p->p);
    }
}
static dp_status blk_one(opt_ops_h *h, opt_op op, dp_p p, opt_ops_fill fill, double scale) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, op, "B=%lld T=%lld d=%lld p=%lld%s%s%s%s", (long long)p.B, (long long)p.T, (long long)p.d,
                      (long long)p.p, op == OPT_OP_FUSED_CLIP_ACCUM ? (p.fn == OPT_CLIP_AUTOMATIC ? " automatic" : " abadi") : "",
                      p.extra ? " extra_sq with dropped examples" : "", !p.outs && op == OPT_OP_FUSED_CLIP_ACCUM ? " no sq/c out" : "",
                      fill == OPT_FILL_TINY ? " tiny A" : scale > 1e3 ? " huge A" : "");
    const opt_rd_env *e = &h->env;
    const int64_t nA = p.B * p.T * p.d, nG = p.B * p.T * p.p, nW = p.p * p.d;
    const double *sq0 = NULL, *dW0 = NULL, *extra = NULL;
    double *cf = NULL;
    if (op == OPT_OP_GHOST_SQNORM || op == OPT_OP_FUSED_SQNORM) sq0 = opt_ops_buf_f(&c, "sq", OPT_OPS_INOUT, p.B, OPT_FILL_POS, 1);
    else if (op == OPT_OP_BK_GEMM) dW0 = opt_ops_buf_f(&c, "dW", OPT_OPS_INOUT, nW, OPT_FILL_NORMAL, 1);
    else {
        dW0 = opt_ops_buf_f(&c, "dW", OPT_OPS_INOUT, nW, OPT_FILL_NORMAL, 1);
        opt_ops_buf_f(&c, "sq_out", OPT_OPS_OUT, p.outs ? p.B : 0, OPT_FILL_POISON, 1);
        opt_ops_buf_f(&c, "c_out", OPT_OPS_OUT, p.outs ? p.B : 0, OPT_FILL_POISON, 1);
    }
    const double *A = opt_ops_buf_f(&c, "A", OPT_OPS_IN, nA, fill, scale);
    const double *G = opt_ops_buf_f(&c, "G", OPT_OPS_IN, nG, OPT_FILL_NORMAL, 1);
    if (op == OPT_OP_BK_GEMM) {
        cf = opt_ops_buf_f(&c, "c", OPT_OPS_IN, p.B, OPT_FILL_POS, 0.5);
        for (int64_t b = 0; cf && b < p.B; b++) if (b % 3 == 1) cf[b] = 0; /* dropped */
    }
    if (op == OPT_OP_FUSED_CLIP_ACCUM) {
        double *x = opt_ops_buf_f(&c, "extra_sq", OPT_OPS_IN, p.extra ? p.B : 0, OPT_FILL_POS, 1);
        for (int64_t b = 0; x && b < (p.extra ? p.B : 0); b++) if (b % 3 == 1) x[b] = INFINITY; /* dropped examples */
        extra = p.extra ? x : NULL;
    }
    c.invoke = blk_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    opt_rd *g = dp_malloc(sizeof(opt_rd) * (size_t)(p.B * nW + 1));                          /* the blocks g_b */
    opt_rd *t2 = dp_malloc(sizeof(opt_rd) * (size_t)(nW + p.T * p.T + p.B * p.T + p.B + 1)); /* terms of one sum */
    if (!g || !t2) { dp_free(g); dp_free(t2); return DP_ERR_NOMEM; }
    if (op == OPT_OP_GHOST_SQNORM) {
        for (int64_t b = 0; b < p.B; b++) {
            int64_t k = 0;
            for (int64_t ti = 0; ti < p.T; ti++)
                for (int64_t s = 0; s < p.T; s++) {
                    opt_rd ga = opt_rd_dot(e, A + (b * p.T + ti) * p.d, 1, A + (b * p.T + s) * p.d, 1, p.d);
                    opt_rd gg = opt_rd_dot(e, G + (b * p.T + ti) * p.p, 1, G + (b * p.T + s) * p.p, 1, p.p);
                    t2[k++] = opt_rd_mul(e, ga, gg);
                }
            OPS_REF(&c, 0, b) = opt_rd_acc(e, opt_rd_x(sq0[b]), t2, k);
        }
    } else if (op == OPT_OP_BK_GEMM) {
        for (int64_t i = 0; i < p.p; i++)
            for (int64_t f = 0; f < p.d; f++) {
                int64_t k = 0;
                for (int64_t b = 0; b < p.B; b++)
                    for (int64_t ti = 0; ti < p.T; ti++) {
                        int64_t r = b * p.T + ti;
                        opt_rd cg = opt_rd_mul(e, opt_rd_x(cf[b]), opt_rd_x(G[r * p.p + i]));
                        t2[k++] = opt_rd_mul(e, opt_rd_in_rd(e, cg), opt_rd_in(e, A[r * p.d + f]));
                    }
                OPS_REF(&c, 0, i * p.d + f) = opt_rd_acc(e, opt_rd_x(dW0[i * p.d + f]), t2, k);
            }
    } else { /* fused: the blocks, their squared norms (+ extra), factors, dW += c_b g_b */
        opt_rd *cb = dp_malloc(sizeof(opt_rd) * (size_t)(p.B + 1));
        if (!cb) { dp_free(g); dp_free(t2); return DP_ERR_NOMEM; }
        for (int64_t b = 0; b < p.B; b++) {
            for (int64_t i = 0; i < p.p; i++)
                for (int64_t f = 0; f < p.d; f++) g[b * nW + i * p.d + f] = blk_elem(e, A, G, b, p.T, p.d, p.p, i, f);
            for (int64_t k = 0; k < nW; k++) t2[k] = opt_rd_mul(e, g[b * nW + k], g[b * nW + k]);
            if (op == OPT_OP_FUSED_SQNORM) { OPS_REF(&c, 0, b) = opt_rd_acc(e, opt_rd_x(sq0[b]), t2, nW); continue; }
            opt_rd sq = extra ? opt_rd_acc(e, opt_rd_x(extra[b]), t2, nW) : opt_rd_sum(e, t2, nW);
            cb[b] = rd_clip(e, sq, p.C, p.fn, p.gamma);
            if (p.outs) { OPS_REF(&c, 1, b) = sq; OPS_REF(&c, 2, b) = cb[b]; }
        }
        for (int64_t k = 0; op == OPT_OP_FUSED_CLIP_ACCUM && k < nW; k++) {
            for (int64_t b = 0; b < p.B; b++)
                t2[b] = cb[b].v == 0 && cb[b].r == 0 ? opt_rd_x(0) : opt_rd_mul(e, cb[b], g[b * nW + k]);
            OPS_REF(&c, 0, k) = opt_rd_acc(e, opt_rd_x(dW0[k]), t2, p.B);
        }
        dp_free(cb);
    }
    dp_free(g);
    dp_free(t2);
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status blk_cases(opt_ops_h *h, opt_op op) {
    static const int64_t sz[][4] = {{1, 1, 1, 1}, {3, 5, 7, 4}, {2, 9, 3, 17}, {4, 1, 6, 5}, {0, 3, 2, 2}, {6, 4, 8, 6}};
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) {
        dp_p p = {.B = sz[s][0], .T = sz[s][1], .d = sz[s][2], .p = sz[s][3], .C = 0.9, .fn = OPT_CLIP_ABADI,
                  .gamma = 0.01, .extra = 0, .outs = 1};
        if (op == OPT_OP_FUSED_CLIP_ACCUM) {
            p.fn = s % 2 ? OPT_CLIP_AUTOMATIC : OPT_CLIP_ABADI;
            p.C = s == 2 ? 50.0 : 0.9; /* some examples unclipped */
            p.extra = s >= 3;
            p.outs = s != 1;
        }
        DP_TRY(blk_one(h, op, p, OPT_FILL_NORMAL, 1));
    }
    dp_p big = {.B = 5, .T = 7, .d = 5, .p = 6, .C = 1, .fn = OPT_CLIP_ABADI, .outs = 1};
    DP_TRY(blk_one(h, op, big, OPT_FILL_TINY, 1));
    return blk_one(h, op, big, OPT_FILL_NORMAL, opt_ops_huge(h) / 256);
}
static dp_status case_ghost_sqnorm(opt_ops_h *h) { return blk_cases(h, OPT_OP_GHOST_SQNORM); }
static dp_status case_fused_sqnorm(opt_ops_h *h) { return blk_cases(h, OPT_OP_FUSED_SQNORM); }
static dp_status case_bk_gemm(opt_ops_h *h) { return blk_cases(h, OPT_OP_BK_GEMM); }
static dp_status case_fused_clip_accum(opt_ops_h *h) { return blk_cases(h, OPT_OP_FUSED_CLIP_ACCUM); }

/* ---- noise_add ---- */
typedef struct { dp_noise_key key; uint32_t stream, lane; double std; uint64_t offset; int64_t n; } noise_p;
static dp_status noise_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const noise_p *p = c->params;
    return OPS_CALL(be, noise_add, d[0], p->key, p->stream, p->lane, p->std, p->offset, p->n);
}
static dp_status noise_one(opt_ops_h *h, noise_p p) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, OPT_OP_NOISE_ADD, "n=%lld stream=%u lane=0x%x std=%g offset=%llu", (long long)p.n, p.stream,
                      p.lane, p.std, (unsigned long long)p.offset);
    const double *x = opt_ops_buf_f(&c, "x", OPT_OPS_INOUT, p.n, OPT_FILL_NORMAL, 1);
    int bad = p.lane >= (1u << 24);
    if (bad) c.expect = DP_ERR_INVALID;
    c.invoke = noise_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    if (!bad) {
        dp_stream s;
        DP_TRY(dp_stream_secret(&s, p.key, DP_PURPOSE_NOISE, p.stream, p.lane));
        const opt_rd_env *e = &h->env;
        /* Box-Muller with the declared arithmetic (docs/tolerances.md "Operation harness", noise_add):
         * |dz| <= R_max u (5 L + 2 + 4 pi) + sqrt(2 u), L the libm ulps, R_max = sqrt(-2 ln 2^-53) */
        const double rmax = sqrt(-2 * log(ldexp(1.0, -53))), L = e->libm / 2;
        const double bz = rmax * e->u * (5 * L + 2 + 4 * M_PI) + sqrt(2 * e->u);
        for (int64_t j = 0; j < p.n; j++) {
            opt_rd z = {dp_rng_gaussian(&s, p.offset + (uint64_t)j), bz};
            OPS_REF(&c, 0, j) = opt_rd_add(e, opt_rd_x(x[j]), opt_rd_mul(e, opt_rd_scalar(e, p.std), z));
        }
    }
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status case_noise_add(opt_ops_h *h) {
    const dp_noise_key key = {0x6f70735f6e6f6973ull}; /* a fixed test key, unrelated to --seed */
    DP_TRY(noise_one(h, (noise_p){key, 1, 0, 1.0, 0, 1031}));
    DP_TRY(noise_one(h, (noise_p){key, 77, 3, 2.5, 5, 7}));
    DP_TRY(noise_one(h, (noise_p){key, 2, (1u << 16) | 2, 1e-3, (uint64_t)1 << 40, 33}));
    DP_TRY(noise_one(h, (noise_p){key, 3, 5, 0.0, 0, 9}));
    DP_TRY(noise_one(h, (noise_p){key, 3, 5, 1.0, 0, 0}));
    return noise_one(h, (noise_p){key, 3, 1u << 24, 1.0, 0, 4}); /* lane >= 2^24: refused */
}

/* ---- optimizers ---- */
typedef struct { double lr, mu, wd, b1, b2, eps; int64_t t, n; int adam; } opt_p;
static dp_status optim_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const opt_p *p = c->params;
    if (!p->adam) return OPS_CALL(be, sgd_momentum, d[0], d[1], d[2], p->lr, p->mu, p->wd, p->t, p->n);
    return OPS_CALL(be, adamw, d[0], d[1], d[2], d[3], p->lr, p->b1, p->b2, p->eps, p->wd, p->t, p->n);
}
static double pow_t_;
static double pow_t(double b) { return pow(b, pow_t_); }
static dp_status optim_one(opt_ops_h *h, opt_p p) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, p.adam ? OPT_OP_ADAMW : OPT_OP_SGD_MOMENTUM, "n=%lld lr=%g %s wd=%g t=%lld", (long long)p.n, p.lr,
                      p.adam ? "adam" : "momentum", p.wd, (long long)p.t);
    const double *prm = opt_ops_buf_f(&c, "param", OPT_OPS_INOUT, p.n, OPT_FILL_NORMAL, 1);
    const double *m = opt_ops_buf_f(&c, p.adam ? "m" : "buf", OPT_OPS_INOUT, p.n, OPT_FILL_NORMAL, 0.1);
    const double *v = p.adam ? opt_ops_buf_f(&c, "v", OPT_OPS_INOUT, p.n, OPT_FILL_POS, 0.01) : NULL;
    const double *g = opt_ops_buf_f(&c, "grad", OPT_OPS_IN, p.n, OPT_FILL_NORMAL, 1);
    c.invoke = optim_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    const opt_rd_env *e = &h->env;
    opt_rd one = opt_rd_x(1), lr = opt_rd_scalar(e, p.lr), wd = opt_rd_scalar(e, p.wd);
    if (!p.adam) {
        for (int64_t i = 0; i < p.n; i++) {
            opt_rd gi = p.wd != 0 ? opt_rd_add(e, opt_rd_x(g[i]), opt_rd_mul(e, wd, opt_rd_x(prm[i]))) : opt_rd_x(g[i]);
            opt_rd b = opt_rd_add(e, opt_rd_mul(e, opt_rd_scalar(e, p.mu), opt_rd_x(m[i])), gi);
            OPS_REF(&c, 1, i) = b;
            OPS_REF(&c, 0, i) = opt_rd_sub(e, opt_rd_x(prm[i]), opt_rd_mul(e, lr, b));
        }
    } else {
        opt_rd b1 = opt_rd_scalar(e, p.b1), b2 = opt_rd_scalar(e, p.b2);
        pow_t_ = (double)p.t;
        opt_rd bc1 = opt_rd_sub(e, one, opt_rd_mono(e, pow_t, b1)), bc2 = opt_rd_sub(e, one, opt_rd_mono(e, pow_t, b2));
        opt_rd decay = opt_rd_sub(e, one, opt_rd_mul(e, lr, wd)), step = opt_rd_div(e, lr, bc1), sbc2 = opt_rd_sqrt(e, bc2);
        opt_rd c1 = opt_rd_sub(e, one, b1), c2 = opt_rd_sub(e, one, b2);
        for (int64_t i = 0; i < p.n; i++) {
            opt_rd gi = opt_rd_x(g[i]);
            opt_rd pd = opt_rd_mul(e, opt_rd_x(prm[i]), decay);
            opt_rd mi = opt_rd_add(e, opt_rd_mul(e, b1, opt_rd_x(m[i])), opt_rd_mul(e, c1, gi));
            opt_rd vi = opt_rd_add(e, opt_rd_mul(e, b2, opt_rd_x(v[i])), opt_rd_mul(e, c2, opt_rd_mul(e, gi, gi)));
            opt_rd den = opt_rd_add(e, opt_rd_div(e, opt_rd_sqrt(e, vi), sbc2), opt_rd_scalar(e, p.eps));
            OPS_REF(&c, 0, i) = opt_rd_sub(e, pd, opt_rd_mul(e, step, opt_rd_div(e, mi, den)));
            OPS_REF(&c, 1, i) = mi;
            OPS_REF(&c, 2, i) = vi;
        }
    }
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status case_sgd_momentum(opt_ops_h *h) {
    DP_TRY(optim_one(h, (opt_p){.lr = 0.5, .mu = 0.9, .wd = 0, .t = 1, .n = 33}));
    DP_TRY(optim_one(h, (opt_p){.lr = 0.01, .mu = 0, .wd = 1e-2, .t = 3, .n = 1031}));
    return optim_one(h, (opt_p){.lr = 0.1, .mu = 0.5, .wd = 0, .t = 2, .n = 0});
}
static dp_status case_adamw(opt_ops_h *h) {
    DP_TRY(optim_one(h, (opt_p){.lr = 1e-3, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0, .t = 1, .n = 33, .adam = 1}));
    DP_TRY(optim_one(h, (opt_p){.lr = 1e-2, .b1 = 0.8, .b2 = 0.99, .eps = 1e-6, .wd = 0.1, .t = 7, .n = 1031, .adam = 1}));
    return optim_one(h, (opt_p){.lr = 1e-3, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0, .t = 2, .n = 0, .adam = 1});
}

const opt_ops_entry opt_ops_cases_dp[] = {
    {OPT_OP_SQNORM_ROWS, case_sqnorm_rows}, {OPT_OP_GHOST_SQNORM, case_ghost_sqnorm},
    {OPT_OP_CLIP_FACTORS, case_clip_factors}, {OPT_OP_MUL, case_mul}, {OPT_OP_CLIP_ACCUM, case_clip_accum},
    {OPT_OP_BK_GEMM, case_bk_gemm}, {OPT_OP_FUSED_CLIP_ACCUM, case_fused_clip_accum},
    {OPT_OP_FUSED_SQNORM, case_fused_sqnorm}, {OPT_OP_NOISE_ADD, case_noise_add},
    {OPT_OP_SGD_MOMENTUM, case_sgd_momentum}, {OPT_OP_ADAMW, case_adamw}, {OPT_OP_COUNT, NULL},
};

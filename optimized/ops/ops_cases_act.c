/* optimized/ops/ops_cases_act.c — harness cases of the model operations without
 * attention: tanh, silu, swiglu (forward, backward), rmsnorm, rope (and rope_at),
 * cross-entropy, embedding (definitions: optimized/backend.h; bounds: docs/tolerances.md
 * "Operation harness"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ops/ops.h"
#include "common/alloc.h"

/* ---- point-wise activations ---- */
typedef enum { PW_TANH_F, PW_TANH_B, PW_SILU_F, PW_SILU_B, PW_SWIGLU_F, PW_SWIGLU_B } pw_kind;
typedef struct { pw_kind k; int64_t n; } pw_p;
static const opt_op pw_ops[] = {OPT_OP_TANH_FWD, OPT_OP_TANH_BWD, OPT_OP_SILU_FWD, OPT_OP_SILU_BWD, OPT_OP_SWIGLU_FWD,
                                OPT_OP_SWIGLU_BWD};

static dp_status pw_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const pw_p *p = c->params;
    switch (p->k) {
    case PW_TANH_F: return OPS_CALL(be, tanh_fwd, d[0], d[1], p->n);
    case PW_TANH_B: return OPS_CALL(be, tanh_bwd, d[0], d[1], d[2], p->n);
    case PW_SILU_F: return OPS_CALL(be, silu_fwd, d[0], d[1], p->n);
    case PW_SILU_B: return OPS_CALL(be, silu_bwd, d[0], d[1], d[2], p->n);
    case PW_SWIGLU_F: return OPS_CALL(be, swiglu_fwd, d[0], d[1], d[2], p->n);
    default: return OPS_CALL(be, swiglu_bwd, d[0], d[1], d[2], d[3], d[4], p->n);
    }
}

/* s (1 + a (1 - s)), s = sigmoid(a): d silu / da */
static opt_rd dsilu(const opt_rd_env *e, opt_rd a) {
    opt_rd s = opt_rd_sigmoid(e, a);
    opt_rd one = opt_rd_x(1);
    return opt_rd_mul(e, s, opt_rd_add(e, one, opt_rd_mul(e, a, opt_rd_sub(e, one, s))));
}

static dp_status pw_one(opt_ops_h *h, pw_p p, opt_ops_fill fill, double scale) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, pw_ops[p.k], "n=%lld%s", (long long)p.n,
                      fill == OPT_FILL_SPECIAL ? " NaN/inf" : fill == OPT_FILL_TINY ? " tiny" : fill == OPT_FILL_ZERO ? " zeros" : "");
    const double *x = NULL, *dy = NULL, *y = NULL, *a = NULL, *b = NULL;
    int nout = 1;
    switch (p.k) {
    case PW_TANH_F: case PW_SILU_F:
        opt_ops_buf_f(&c, "y", OPT_OPS_OUT, p.n, OPT_FILL_POISON, 1);
        x = opt_ops_buf_f(&c, "x", OPT_OPS_IN, p.n, fill, scale);
        break;
    case PW_TANH_B:
        opt_ops_buf_f(&c, "dx", OPT_OPS_OUT, p.n, OPT_FILL_POISON, 1);
        dy = opt_ops_buf_f(&c, "dy", OPT_OPS_IN, p.n, fill, 1);
        y = opt_ops_buf_f(&c, "y", OPT_OPS_IN, p.n, OPT_FILL_UNIT, 1); /* tanh values in (-1, 1) */
        break;
    case PW_SILU_B:
        opt_ops_buf_f(&c, "dx", OPT_OPS_OUT, p.n, OPT_FILL_POISON, 1);
        dy = opt_ops_buf_f(&c, "dy", OPT_OPS_IN, p.n, OPT_FILL_NORMAL, 1);
        x = opt_ops_buf_f(&c, "x", OPT_OPS_IN, p.n, fill, scale);
        break;
    case PW_SWIGLU_F:
        opt_ops_buf_f(&c, "h", OPT_OPS_OUT, p.n, OPT_FILL_POISON, 1);
        a = opt_ops_buf_f(&c, "a", OPT_OPS_IN, p.n, fill, scale);
        b = opt_ops_buf_f(&c, "b", OPT_OPS_IN, p.n, OPT_FILL_NORMAL, 1);
        break;
    case PW_SWIGLU_B:
        opt_ops_buf_f(&c, "da", OPT_OPS_OUT, p.n, OPT_FILL_POISON, 1);
        opt_ops_buf_f(&c, "db", OPT_OPS_OUT, p.n, OPT_FILL_POISON, 1);
        dy = opt_ops_buf_f(&c, "dh", OPT_OPS_IN, p.n, OPT_FILL_NORMAL, 1);
        a = opt_ops_buf_f(&c, "a", OPT_OPS_IN, p.n, fill, scale);
        b = opt_ops_buf_f(&c, "b", OPT_OPS_IN, p.n, OPT_FILL_NORMAL, 1);
        nout = 2;
        break;
    }
    c.invoke = pw_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    const opt_rd_env *e = &h->env;
    for (int64_t i = 0; i < p.n; i++) {
        opt_rd r = {0, 0};
        switch (p.k) {
        case PW_TANH_F: r = opt_rd_tanh(e, opt_rd_x(x[i])); break;
        case PW_TANH_B: {
            opt_rd yy = opt_rd_x(y[i]);
            r = opt_rd_mul(e, opt_rd_x(dy[i]), opt_rd_sub(e, opt_rd_x(1), opt_rd_mul(e, yy, yy)));
            break;
        }
        case PW_SILU_F: r = opt_rd_mul(e, opt_rd_x(x[i]), opt_rd_sigmoid(e, opt_rd_x(x[i]))); break;
        case PW_SILU_B: r = opt_rd_mul(e, opt_rd_x(dy[i]), dsilu(e, opt_rd_x(x[i]))); break;
        case PW_SWIGLU_F:
            r = opt_rd_mul(e, opt_rd_mul(e, opt_rd_x(a[i]), opt_rd_sigmoid(e, opt_rd_x(a[i]))), opt_rd_x(b[i]));
            break;
        case PW_SWIGLU_B: {
            opt_rd ai = opt_rd_x(a[i]), dh = opt_rd_x(dy[i]);
            r = opt_rd_mul(e, opt_rd_mul(e, dh, opt_rd_x(b[i])), dsilu(e, ai));
            OPS_REF(&c, 1, i) = opt_rd_mul(e, dh, opt_rd_mul(e, ai, opt_rd_sigmoid(e, ai)));
            break;
        }
        }
        OPS_REF(&c, 0, i) = r;
    }
    (void)nout;
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status pw_cases(opt_ops_h *h, pw_kind k) {
    static const int64_t ns[] = {0, 1, 7, 1031};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) DP_TRY(pw_one(h, (pw_p){k, ns[i]}, OPT_FILL_NORMAL, 3));
    DP_TRY(pw_one(h, (pw_p){k, 64}, OPT_FILL_SPECIAL, 3));
    DP_TRY(pw_one(h, (pw_p){k, 17}, OPT_FILL_ZERO, 1));
    DP_TRY(pw_one(h, (pw_p){k, 33}, OPT_FILL_TINY, 1));
    return pw_one(h, (pw_p){k, 33}, OPT_FILL_UNIT, 40); /* exp(-a) up to e^40: large but finite in f32 */
}
static dp_status case_tanh_fwd(opt_ops_h *h) { return pw_cases(h, PW_TANH_F); }
static dp_status case_tanh_bwd(opt_ops_h *h) { return pw_cases(h, PW_TANH_B); }
static dp_status case_silu_fwd(opt_ops_h *h) { return pw_cases(h, PW_SILU_F); }
static dp_status case_silu_bwd(opt_ops_h *h) { return pw_cases(h, PW_SILU_B); }
static dp_status case_swiglu_fwd(opt_ops_h *h) { return pw_cases(h, PW_SWIGLU_F); }
static dp_status case_swiglu_bwd(opt_ops_h *h) { return pw_cases(h, PW_SWIGLU_B); }

/* ---- RMSNorm ---- */
typedef struct { int64_t rows, D; double eps; int bwd; } rms_p;
static dp_status rms_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const rms_p *p = c->params;
    if (!p->bwd) return OPS_CALL(be, rmsnorm_fwd, d[0], d[1], d[2], d[3], p->eps, p->rows, p->D);
    return OPS_CALL(be, rmsnorm_bwd, d[0], d[1], d[2], d[3], d[4], d[5], p->rows, p->D);
}
/* s = 1 / sqrt(sum_j x_j^2 / D + eps) of one row */
static opt_rd rms_rstd(const opt_rd_env *e, const double *x, int64_t D, double eps) {
    opt_rd ss = opt_rd_dot_plain(e, x, 1, x, 1, D);
    opt_rd mean = opt_rd_div(e, ss, opt_rd_x((double)D));
    return opt_rd_div(e, opt_rd_x(1), opt_rd_sqrt(e, opt_rd_add(e, mean, opt_rd_scalar(e, eps))));
}
static dp_status rms_one(opt_ops_h *h, rms_p p, double scale) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, p.bwd ? OPT_OP_RMSNORM_BWD : OPT_OP_RMSNORM_FWD, "rows=%lld D=%lld eps=%g%s", (long long)p.rows,
                      (long long)p.D, p.eps, scale > 1e3 ? " huge" : scale < 1e-3 ? " small" : "");
    const opt_rd_env *e = &h->env;
    if (!p.bwd) {
        opt_ops_buf_f(&c, "y", OPT_OPS_OUT, p.rows * p.D, OPT_FILL_POISON, 1);
        opt_ops_buf_f(&c, "rstd", OPT_OPS_OUT, p.rows, OPT_FILL_POISON, 1);
        const double *x = opt_ops_buf_f(&c, "x", OPT_OPS_IN, p.rows * p.D, OPT_FILL_NORMAL, scale);
        const double *g = opt_ops_buf_f(&c, "g", OPT_OPS_IN, p.D, OPT_FILL_NORMAL, 1);
        c.invoke = rms_inv;
        c.params = &p;
        DP_TRY(opt_ops_exec(&c));
        for (int64_t r = 0; r < p.rows; r++) {
            opt_rd s = rms_rstd(e, x + r * p.D, p.D, p.eps);
            OPS_REF(&c, 1, r) = s;
            for (int64_t j = 0; j < p.D; j++)
                OPS_REF(&c, 0, r * p.D + j) = opt_rd_mul(e, opt_rd_mul(e, opt_rd_x(x[r * p.D + j]), s), opt_rd_x(g[j]));
        }
    } else {
        opt_ops_buf_f(&c, "dx", OPT_OPS_OUT, p.rows * p.D, OPT_FILL_POISON, 1);
        opt_ops_buf_f(&c, "dg_rows", OPT_OPS_OUT, p.rows * p.D, OPT_FILL_POISON, 1);
        const double *dy = opt_ops_buf_f(&c, "dy", OPT_OPS_IN, p.rows * p.D, OPT_FILL_NORMAL, 1);
        const double *x = opt_ops_buf_f(&c, "x", OPT_OPS_IN, p.rows * p.D, OPT_FILL_NORMAL, scale);
        double *rs = opt_ops_buf_f(&c, "rstd", OPT_OPS_IN, p.rows, OPT_FILL_ZERO, 1);
        const double *g = opt_ops_buf_f(&c, "g", OPT_OPS_IN, p.D, OPT_FILL_NORMAL, 1);
        for (int64_t r = 0; rs && r < p.rows; r++) rs[r] = opt_ops_round(h, rms_rstd(e, x + r * p.D, p.D, p.eps).v);
        c.invoke = rms_inv;
        c.params = &p;
        DP_TRY(opt_ops_exec(&c));
        opt_rd *t = dp_malloc(sizeof(opt_rd) * (size_t)(p.D + 1));
        if (!t) return DP_ERR_NOMEM;
        for (int64_t r = 0; r < p.rows; r++) {
            const double *xr = x + r * p.D, *dyr = dy + r * p.D;
            opt_rd s = opt_rd_x(rs[r]);
            for (int64_t k = 0; k < p.D; k++) t[k] = opt_rd_mul(e, opt_rd_mul(e, opt_rd_x(dyr[k]), opt_rd_x(g[k])), opt_rd_x(xr[k]));
            opt_rd dot = opt_rd_sum(e, t, p.D);
            opt_rd coef = opt_rd_div(e, opt_rd_mul(e, opt_rd_mul(e, opt_rd_mul(e, s, s), s), dot), opt_rd_x((double)p.D));
            for (int64_t j = 0; j < p.D; j++) {
                opt_rd xj = opt_rd_x(xr[j]);
                OPS_REF(&c, 0, r * p.D + j) = opt_rd_sub(e, opt_rd_mul(e, opt_rd_mul(e, s, opt_rd_x(g[j])), opt_rd_x(dyr[j])),
                                                         opt_rd_mul(e, xj, coef));
                OPS_REF(&c, 1, r * p.D + j) = opt_rd_mul(e, opt_rd_mul(e, opt_rd_x(dyr[j]), xj), s);
            }
        }
        dp_free(t);
    }
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status rms_cases(opt_ops_h *h, int bwd) {
    static const int64_t sz[][2] = {{1, 1}, {3, 7}, {5, 64}, {2, 33}, {0, 8}};
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++) DP_TRY(rms_one(h, (rms_p){sz[s][0], sz[s][1], 1e-5, bwd}, 1));
    DP_TRY(rms_one(h, (rms_p){4, 9, 1e-6, bwd}, opt_ops_huge(h) / 64));
    return rms_one(h, (rms_p){4, 9, 0.5, bwd}, 1e-4); /* eps dominates */
}
static dp_status case_rmsnorm_fwd(opt_ops_h *h) { return rms_cases(h, 0); }
static dp_status case_rmsnorm_bwd(opt_ops_h *h) { return rms_cases(h, 1); }

/* ---- rotary embedding ---- */
typedef struct { int kind; int64_t B, T, H, hd, t0; int sign, inplace; double theta; } rope_p; /* kind 0 fwd, 1 bwd, 2 at */
static dp_status rope_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const rope_p *p = c->params;
    void *y = p->inplace ? d[1] : d[0];
    if (p->kind == 0) return OPS_CALL(be, rope_fwd, y, d[1], p->theta, p->B, p->T, p->H, p->hd);
    if (p->kind == 1) return OPS_CALL(be, rope_bwd, y, d[1], p->theta, p->B, p->T, p->H, p->hd);
    return OPS_CALL(be, rope_at, y, d[1], p->theta, p->t0, p->sign, p->B, p->T, p->H, p->hd);
}
static double rope_theta_;
static double rope_pow(double ex) { return pow(rope_theta_, ex); }
static dp_status rope_one(opt_ops_h *h, rope_p p) {
    static const opt_op ops[] = {OPT_OP_ROPE_FWD, OPT_OP_ROPE_BWD, OPT_OP_ROPE_AT};
    opt_ops_case c;
    opt_ops_case_init(&c, h, ops[p.kind], "B=%lld T=%lld H=%lld hd=%lld theta=%g t0=%lld sign=%d%s", (long long)p.B,
                      (long long)p.T, (long long)p.H, (long long)p.hd, p.theta, (long long)p.t0, p.sign,
                      p.inplace ? " in place" : "");
    int64_t n = p.B * p.T * p.H * p.hd;
    opt_ops_buf_f(&c, "y", OPT_OPS_OUT, p.inplace ? 0 : n, OPT_FILL_POISON, 1);
    const double *x = opt_ops_buf_f(&c, "x", p.inplace ? OPT_OPS_INOUT : OPT_OPS_IN, n, OPT_FILL_NORMAL, 1);
    c.invoke = rope_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    const opt_rd_env *e = &h->env;
    int ob = p.inplace ? 1 : 0;
    double sg = p.kind == 1 ? -1 : p.kind == 2 && p.sign < 0 ? -1 : 1;
    rope_theta_ = p.theta;
    for (int64_t t = 0; t < p.T; t++)
        for (int64_t i = 0; i < p.hd / 2; i++) {
            /* angle = (t0 + t) theta^(-2i/hd): the exponent one division, the power one libm call */
            opt_rd ex = opt_rd_div(e, opt_rd_x(-2.0 * (double)i), opt_rd_x((double)p.hd));
            opt_rd ang = opt_rd_mul(e, opt_rd_x((double)(p.t0 + t)), opt_rd_mono(e, rope_pow, ex));
            opt_rd cs = opt_rd_cos(e, ang), sn = opt_rd_sin(e, ang);
            if (sg < 0) sn = opt_rd_neg(sn);
            for (int64_t b = 0; b < p.B; b++)
                for (int64_t hh = 0; hh < p.H; hh++) {
                    int64_t o = ((b * p.T + t) * p.H + hh) * p.hd + 2 * i;
                    opt_rd x0 = opt_rd_x(x[o]), x1 = opt_rd_x(x[o + 1]);
                    OPS_REF(&c, ob, o) = opt_rd_sub(e, opt_rd_mul(e, x0, cs), opt_rd_mul(e, x1, sn));
                    OPS_REF(&c, ob, o + 1) = opt_rd_add(e, opt_rd_mul(e, x0, sn), opt_rd_mul(e, x1, cs));
                }
        }
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status rope_cases(opt_ops_h *h, int kind) {
    DP_TRY(rope_one(h, (rope_p){kind, 1, 1, 1, 2, 0, 1, 0, 10000}));
    DP_TRY(rope_one(h, (rope_p){kind, 2, 7, 3, 8, 0, 1, 0, 10000}));
    DP_TRY(rope_one(h, (rope_p){kind, 1, 33, 2, 6, 0, 1, 0, 500}));
    DP_TRY(rope_one(h, (rope_p){kind, 2, 5, 1, 4, 0, 1, 1, 10000})); /* y == x */
    if (kind == 2) {
        DP_TRY(rope_one(h, (rope_p){kind, 2, 5, 3, 8, 11, 1, 0, 10000}));
        DP_TRY(rope_one(h, (rope_p){kind, 2, 5, 3, 8, 11, -1, 0, 10000}));
        DP_TRY(rope_one(h, (rope_p){kind, 1, 3, 2, 4, 1000, -1, 1, 10000}));
    }
    return rope_one(h, (rope_p){kind, 0, 4, 2, 4, 0, 1, 0, 10000});
}
static dp_status case_rope_fwd(opt_ops_h *h) { return rope_cases(h, 0); }
static dp_status case_rope_bwd(opt_ops_h *h) { return rope_cases(h, 1); }
static dp_status case_rope_at(opt_ops_h *h) { return rope_cases(h, 2); }

/* ---- cross-entropy ---- */
typedef struct { int64_t rows, V; int bwd; } xent_p;
static dp_status xent_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const xent_p *p = c->params;
    if (!p->bwd) return OPS_CALL(be, xent_fwd, d[0], d[1], (const int32_t *)d[2], d[3], p->rows, p->V);
    return OPS_CALL(be, xent_bwd, d[0], d[1], (const int32_t *)d[2], d[3], p->rows, p->V);
}
static dp_status xent_one(opt_ops_h *h, xent_p p, double zscale, int bad_label) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, p.bwd ? OPT_OP_XENT_BWD : OPT_OP_XENT_FWD, "rows=%lld V=%lld logits x%g%s", (long long)p.rows,
                      (long long)p.V, zscale, bad_label ? " label = V (must be refused)" : "");
    opt_ops_buf_f(&c, p.bwd ? "dz" : "loss", OPT_OPS_OUT, p.bwd ? p.rows * p.V : p.rows, OPT_FILL_POISON, 1);
    const double *z = opt_ops_buf_f(&c, "z", OPT_OPS_IN, p.rows * p.V, OPT_FILL_NORMAL, zscale);
    int32_t *y = opt_ops_buf_i(&c, "y", p.rows);
    double *w = opt_ops_buf_f(&c, "w", OPT_OPS_IN, p.rows, OPT_FILL_POS, 0.5);
    if (!y || !w) return DP_ERR_NOMEM;
    for (int64_t r = 0; r < p.rows; r++) {
        y[r] = r % 4 == 3 ? -1 : (int32_t)opt_ops_draw_below(h, (uint64_t)p.V); /* some rows ignored */
        if (r % 5 == 2) w[r] = 0;
    }
    if (bad_label) { y[p.rows - 1] = (int32_t)p.V; c.expect = DP_ERR_INVALID; }
    c.invoke = xent_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    if (bad_label) { opt_ops_finish(&c); return DP_OK; } /* the status is the check */
    const opt_rd_env *e = &h->env;
    opt_rd *t = dp_malloc(sizeof(opt_rd) * (size_t)(2 * p.V + 1));
    if (!t) return DP_ERR_NOMEM;
    opt_rd *ex = t + p.V;
    for (int64_t r = 0; r < p.rows; r++) {
        const double *zr = z + r * p.V;
        if (y[r] < 0) {
            if (!p.bwd) OPS_REF(&c, 0, r) = opt_rd_x(0);
            else for (int64_t j = 0; j < p.V; j++) OPS_REF(&c, 0, r * p.V + j) = opt_rd_x(0);
            continue;
        }
        for (int64_t j = 0; j < p.V; j++) t[j] = opt_rd_x(zr[j]);
        opt_rd m = opt_rd_max_exact(t, p.V); /* the shift: any shift gives the same mathematical value */
        for (int64_t j = 0; j < p.V; j++) ex[j] = opt_rd_exp(e, opt_rd_sub(e, t[j], m));
        opt_rd s = opt_rd_sum(e, ex, p.V);
        opt_rd wr = opt_rd_x(w[r]);
        if (!p.bwd) {
            opt_rd lse = opt_rd_add(e, m, opt_rd_log(e, s));
            OPS_REF(&c, 0, r) = opt_rd_mul(e, wr, opt_rd_sub(e, lse, opt_rd_x(zr[y[r]])));
        } else {
            for (int64_t j = 0; j < p.V; j++)
                OPS_REF(&c, 0, r * p.V + j) = opt_rd_mul(e, wr, opt_rd_sub(e, opt_rd_div(e, ex[j], s), opt_rd_x(j == y[r])));
        }
    }
    dp_free(t);
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status xent_cases(opt_ops_h *h, int bwd) {
    DP_TRY(xent_one(h, (xent_p){1, 1, bwd}, 1, 0));
    DP_TRY(xent_one(h, (xent_p){7, 5, bwd}, 1, 0));
    DP_TRY(xent_one(h, (xent_p){9, 33, bwd}, 3, 0));
    DP_TRY(xent_one(h, (xent_p){5, 17, bwd}, 40, 0)); /* confident rows: softmax near one-hot */
    DP_TRY(xent_one(h, (xent_p){0, 7, bwd}, 1, 0));
    return xent_one(h, (xent_p){4, 6, bwd}, 1, 1);
}
static dp_status case_xent_fwd(opt_ops_h *h) { return xent_cases(h, 0); }
static dp_status case_xent_bwd(opt_ops_h *h) { return xent_cases(h, 1); }

/* ---- embedding ---- */
typedef struct { int64_t rows, per, V, D; int bwd; } emb_p;
static dp_status emb_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const emb_p *p = c->params;
    if (!p->bwd) return OPS_CALL(be, embed_fwd, d[0], d[1], (const int32_t *)d[2], p->rows, p->V, p->D);
    return OPS_CALL(be, embed_bwd, d[0], d[1], (const int32_t *)d[2], p->rows, p->per, p->V, p->D);
}
static dp_status emb_one(opt_ops_h *h, emb_p p, int bad_id) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, p.bwd ? OPT_OP_EMBED_BWD : OPT_OP_EMBED_FWD, "rows=%lld per=%lld V=%lld D=%lld%s",
                      (long long)p.rows, (long long)p.per, (long long)p.V, (long long)p.D,
                      bad_id ? " id = V (must be refused)" : "");
    int64_t ng = p.bwd ? p.rows / p.per : 0;
    const double *dt0 = opt_ops_buf_f(&c, p.bwd ? "dtable" : "out", p.bwd ? OPT_OPS_INOUT : OPT_OPS_OUT,
                                      p.bwd ? ng * p.V * p.D : p.rows * p.D, p.bwd ? OPT_FILL_NORMAL : OPT_FILL_POISON, 1);
    const double *src = opt_ops_buf_f(&c, p.bwd ? "dy" : "table", OPT_OPS_IN, p.bwd ? p.rows * p.D : p.V * p.D,
                                      OPT_FILL_SPECIAL, 1);
    int32_t *ids = opt_ops_buf_i(&c, "ids", p.rows);
    if (!ids) return DP_ERR_NOMEM;
    for (int64_t r = 0; r < p.rows; r++) ids[r] = (int32_t)opt_ops_draw_below(h, (uint64_t)(p.V < 3 ? p.V : 3)); /* repeats */
    if (bad_id) { ids[p.rows - 1] = (int32_t)p.V; c.expect = DP_ERR_INVALID; }
    c.invoke = emb_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    if (bad_id) { opt_ops_finish(&c); return DP_OK; } /* the status is the check */
    const opt_rd_env *e = &h->env;
    if (!p.bwd) {
        for (int64_t r = 0; r < p.rows; r++)
            for (int64_t j = 0; j < p.D; j++) OPS_REF(&c, 0, r * p.D + j) = opt_rd_x(src[(int64_t)ids[r] * p.D + j]);
    } else {
        opt_rd *t = dp_malloc(sizeof(opt_rd) * (size_t)(p.rows + 1));
        if (!t) return DP_ERR_NOMEM;
        for (int64_t g = 0; g < ng; g++)
            for (int64_t v = 0; v < p.V; v++)
                for (int64_t j = 0; j < p.D; j++) {
                    int64_t k = 0;
                    for (int64_t r = g * p.per; r < (g + 1) * p.per; r++)
                        if (ids[r] == v) t[k++] = opt_rd_x(src[r * p.D + j]);
                    int64_t o = (g * p.V + v) * p.D + j;
                    OPS_REF(&c, 0, o) = opt_rd_acc(e, opt_rd_x(dt0[o]), t, k);
                }
        dp_free(t);
    }
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status emb_cases(opt_ops_h *h, int bwd) {
    DP_TRY(emb_one(h, (emb_p){1, 1, 1, 1, bwd}, 0));
    DP_TRY(emb_one(h, (emb_p){12, 4, 5, 7, bwd}, 0));   /* per-example tables */
    DP_TRY(emb_one(h, (emb_p){12, 12, 5, 7, bwd}, 0));  /* one summed table */
    DP_TRY(emb_one(h, (emb_p){9, 1, 3, 33, bwd}, 0));
    DP_TRY(emb_one(h, (emb_p){0, 1, 4, 3, bwd}, 0));
    return emb_one(h, (emb_p){6, 3, 4, 5, bwd}, 1);
}
static dp_status case_embed_fwd(opt_ops_h *h) { return emb_cases(h, 0); }
static dp_status case_embed_bwd(opt_ops_h *h) { return emb_cases(h, 1); }

const opt_ops_entry opt_ops_cases_act[] = {
    {OPT_OP_TANH_FWD, case_tanh_fwd}, {OPT_OP_TANH_BWD, case_tanh_bwd}, {OPT_OP_SILU_FWD, case_silu_fwd},
    {OPT_OP_SILU_BWD, case_silu_bwd}, {OPT_OP_SWIGLU_FWD, case_swiglu_fwd}, {OPT_OP_SWIGLU_BWD, case_swiglu_bwd},
    {OPT_OP_RMSNORM_FWD, case_rmsnorm_fwd}, {OPT_OP_RMSNORM_BWD, case_rmsnorm_bwd}, {OPT_OP_ROPE_FWD, case_rope_fwd},
    {OPT_OP_ROPE_BWD, case_rope_bwd}, {OPT_OP_ROPE_AT, case_rope_at}, {OPT_OP_XENT_FWD, case_xent_fwd},
    {OPT_OP_XENT_BWD, case_xent_bwd}, {OPT_OP_EMBED_FWD, case_embed_fwd}, {OPT_OP_EMBED_BWD, case_embed_bwd},
    {OPT_OP_COUNT, NULL},
};

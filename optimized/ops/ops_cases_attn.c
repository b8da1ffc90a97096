/* optimized/ops/ops_cases_attn.c — harness cases of attention: causal attention forward
 * and backward, and the ring-attention blocks (attn_block_fwd, _finish, _bwd)
 * (definitions: optimized/backend.h; bounds: docs/tolerances.md "Operation harness"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ops/ops.h"
#include "common/alloc.h"

/* element (b, t, h, e) of a [B, T, H, hd] tensor */
#define AT(x, b, t, h, e) ((x)[(((b) * T + (t)) * H + (h)) * hd + (e)])

static opt_rd attn_scale(const opt_rd_env *e, int64_t hd) {
    return opt_rd_div(e, opt_rd_x(1), opt_rd_sqrt(e, opt_rd_x((double)hd)));
}

typedef struct { int64_t B, T, H, hd; int bwd; } attn_p;
static dp_status attn_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const attn_p *p = c->params;
    if (!p->bwd) return OPS_CALL(be, attn_fwd, d[0], d[1], d[2], d[3], d[4], p->B, p->T, p->H, p->hd);
    return OPS_CALL(be, attn_bwd, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], p->B, p->T, p->H, p->hd);
}

/* The forward of one (b, h): probabilities P [T, T] (0 above the diagonal) and, when
 * out != NULL, out [T, hd] (rows of the head, dense). */
static dp_status attn_fwd_ref(const opt_rd_env *e, opt_rd *P, opt_rd *out, const double *q, const double *k,
                              const double *v, int64_t b, int64_t h, const attn_p *p) {
    const int64_t T = p->T, H = p->H, hd = p->hd;
    opt_rd sc = attn_scale(e, hd);
    opt_rd *s = dp_malloc(sizeof(opt_rd) * (size_t)(2 * T + 1));
    if (!s) return DP_ERR_NOMEM;
    opt_rd *t2 = s + T;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t u = 0; u <= t; u++) s[u] = opt_rd_mul(e, sc, opt_rd_dot(e, &AT(q, b, t, h, 0), 1, &AT(k, b, u, h, 0), 1, hd));
        opt_rd m = opt_rd_max_exact(s, t + 1); /* the softmax shift: any shift gives the same value */
        for (int64_t u = 0; u <= t; u++) s[u] = opt_rd_exp(e, opt_rd_sub(e, s[u], m));
        opt_rd z = opt_rd_sum(e, s, t + 1);
        for (int64_t u = 0; u < T; u++) P[t * T + u] = u <= t ? opt_rd_div(e, s[u], z) : opt_rd_x(0);
        for (int64_t f = 0; out && f < hd; f++) {
            for (int64_t u = 0; u <= t; u++) t2[u] = opt_rd_mul(e, opt_rd_in_rd(e, P[t * T + u]), opt_rd_in(e, AT(v, b, u, h, f)));
            out[t * hd + f] = opt_rd_sum(e, t2, t + 1);
        }
    }
    dp_free(s);
    return DP_OK;
}

static dp_status attn_one(opt_ops_h *h, attn_p p) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, p.bwd ? OPT_OP_ATTN_BWD : OPT_OP_ATTN_FWD, "B=%lld T=%lld H=%lld hd=%lld", (long long)p.B,
                      (long long)p.T, (long long)p.H, (long long)p.hd);
    const int64_t B = p.B, T = p.T, H = p.H, hd = p.hd, n = B * T * H * hd;
    const opt_rd_env *e = &h->env;
    const double *q, *k, *v, *dout = NULL;
    double *probs = NULL;
    if (!p.bwd) {
        opt_ops_buf_f(&c, "out", OPT_OPS_OUT, n, OPT_FILL_POISON, 1);
        opt_ops_buf_f(&c, "probs", OPT_OPS_OUT, B * H * T * T, OPT_FILL_POISON, 1);
    } else {
        opt_ops_buf_f(&c, "dq", OPT_OPS_OUT, n, OPT_FILL_POISON, 1);
        opt_ops_buf_f(&c, "dk", OPT_OPS_OUT, n, OPT_FILL_POISON, 1);
        opt_ops_buf_f(&c, "dv", OPT_OPS_OUT, n, OPT_FILL_POISON, 1);
        dout = opt_ops_buf_f(&c, "dout", OPT_OPS_IN, n, OPT_FILL_NORMAL, 1);
    }
    q = opt_ops_buf_f(&c, "q", OPT_OPS_IN, n, OPT_FILL_NORMAL, 1);
    k = opt_ops_buf_f(&c, "k", OPT_OPS_IN, n, OPT_FILL_NORMAL, 1);
    v = opt_ops_buf_f(&c, "v", OPT_OPS_IN, n, OPT_FILL_NORMAL, 1);
    opt_rd *P = dp_malloc(sizeof(opt_rd) * (size_t)(B * H * T * T + 1));
    opt_rd *O = dp_malloc(sizeof(opt_rd) * (size_t)(T * hd + 1));
    if (!P || !O) { dp_free(P); dp_free(O); return DP_ERR_NOMEM; }
    for (int64_t b = 0; p.bwd && b < B; b++) /* the forward's probabilities, for the backward's input */
        for (int64_t hh = 0; hh < H; hh++) {
            dp_status st = attn_fwd_ref(e, P + (b * H + hh) * T * T, NULL, q, k, v, b, hh, &p);
            if (st != DP_OK) { dp_free(P); dp_free(O); return st; }
        }
    if (p.bwd) { /* probs: the reference forward's, rounded (an input; a backend may also recompute them) */
        probs = opt_ops_buf_f(&c, "probs", OPT_OPS_IN, B * H * T * T, OPT_FILL_ZERO, 1);
        for (int64_t i = 0; probs && i < B * H * T * T; i++) probs[i] = opt_ops_round(h, P[i].v);
    }
    c.invoke = attn_inv;
    c.params = &p;
    dp_status st = opt_ops_exec(&c);
    if (st != DP_OK) { dp_free(P); dp_free(O); return st; }
    opt_rd *t2 = dp_malloc(sizeof(opt_rd) * (size_t)(T + 1)), *cc = dp_malloc(sizeof(opt_rd) * (size_t)(T * T + 1));
    if (!t2 || !cc) { dp_free(P); dp_free(O); dp_free(t2); dp_free(cc); return DP_ERR_NOMEM; }
    opt_rd sc = attn_scale(e, hd);
    for (int64_t b = 0; b < B; b++)
        for (int64_t hh = 0; hh < H; hh++) {
            opt_rd *Pb = P + (b * H + hh) * T * T;
            if (!p.bwd) {
                if ((st = attn_fwd_ref(e, Pb, O, q, k, v, b, hh, &p)) != DP_OK) { dp_free(P); dp_free(O); dp_free(t2); dp_free(cc); return st; }
                for (int64_t t = 0; t < T; t++) {
                    for (int64_t f = 0; f < hd; f++) OPS_REF(&c, 0, ((b * T + t) * H + hh) * hd + f) = O[t * hd + f];
                    for (int64_t u = 0; u < T; u++) OPS_REF(&c, 1, ((b * H + hh) * T + t) * T + u) = Pb[t * T + u];
                }
                continue;
            }
            /* the probabilities as read: the stored value, within the forward's radius of the exact one */
            for (int64_t i = 0; i < T * T; i++) {
                double pin = probs[(b * H + hh) * T * T + i];
                Pb[i] = (opt_rd){pin, Pb[i].r + fabs(pin - Pb[i].v)};
            }
            for (int64_t t = 0; t < T; t++) { /* c[t, s] = scale P (dP - sum_s P dP), dP = dout_t . v_s */
                for (int64_t u = 0; u <= t; u++)
                    cc[t * T + u] = opt_rd_dot(e, &AT(dout, b, t, hh, 0), 1, &AT(v, b, u, hh, 0), 1, hd);
                for (int64_t u = 0; u <= t; u++) t2[u] = opt_rd_mul(e, Pb[t * T + u], cc[t * T + u]);
                opt_rd rs = opt_rd_sum(e, t2, t + 1);
                for (int64_t u = 0; u <= t; u++)
                    cc[t * T + u] = opt_rd_mul(e, sc, opt_rd_mul(e, Pb[t * T + u], opt_rd_sub(e, cc[t * T + u], rs)));
            }
            for (int64_t t = 0; t < T; t++)
                for (int64_t f = 0; f < hd; f++) {
                    for (int64_t u = 0; u <= t; u++) t2[u] = opt_rd_mul(e, opt_rd_in_rd(e, cc[t * T + u]), opt_rd_in(e, AT(k, b, u, hh, f)));
                    OPS_REF(&c, 0, ((b * T + t) * H + hh) * hd + f) = opt_rd_sum(e, t2, t + 1);
                }
            for (int64_t u = 0; u < T; u++)
                for (int64_t f = 0; f < hd; f++) {
                    int64_t nt = 0;
                    for (int64_t t = u; t < T; t++) t2[nt++] = opt_rd_mul(e, opt_rd_in_rd(e, cc[t * T + u]), opt_rd_in(e, AT(q, b, t, hh, f)));
                    OPS_REF(&c, 1, ((b * T + u) * H + hh) * hd + f) = opt_rd_sum(e, t2, nt);
                    nt = 0;
                    for (int64_t t = u; t < T; t++) t2[nt++] = opt_rd_mul(e, opt_rd_in_rd(e, Pb[t * T + u]), opt_rd_in(e, AT(dout, b, t, hh, f)));
                    OPS_REF(&c, 2, ((b * T + u) * H + hh) * hd + f) = opt_rd_sum(e, t2, nt);
                }
        }
    dp_free(P); dp_free(O); dp_free(t2); dp_free(cc);
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status attn_cases(opt_ops_h *h, int bwd) {
    DP_TRY(attn_one(h, (attn_p){1, 1, 1, 2, bwd}));
    DP_TRY(attn_one(h, (attn_p){2, 5, 3, 4, bwd}));
    DP_TRY(attn_one(h, (attn_p){1, 13, 2, 8, bwd}));
    return attn_one(h, (attn_p){0, 4, 2, 4, bwd});
}
static dp_status case_attn_fwd(opt_ops_h *h) { return attn_cases(h, 0); }
static dp_status case_attn_bwd(opt_ops_h *h) { return attn_cases(h, 1); }

/* ---- ring attention blocks ---- */
typedef struct { int kind; int64_t B, Tq, Tk, H, hd, q0, k0; int fresh; } blk_p; /* kind 0 fwd, 1 finish, 2 bwd */
static dp_status blk_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const blk_p *p = c->params;
    if (p->kind == 0)
        return OPS_CALL(be, attn_block_fwd, d[0], d[1], d[2], d[3], d[4], d[5], p->B, p->Tq, p->Tk, p->H, p->hd, p->q0, p->k0);
    if (p->kind == 1) return OPS_CALL(be, attn_block_finish, d[0], d[1], d[2], d[3], d[4], p->B, p->Tq, p->H, p->hd);
    return OPS_CALL(be, attn_block_bwd, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], p->B, p->Tq, p->Tk, p->H,
                    p->hd, p->q0, p->k0);
}
/* keys j < nk are visible to query i (global q0 + i sees k0 + j <= q0 + i) */
static int64_t visible(const blk_p *p, int64_t i) {
    int64_t nk = p->q0 + i - p->k0 + 1;
    return nk > p->Tk ? p->Tk : nk < 0 ? 0 : nk;
}
#define QI(x, b, i, h) ((x) + (((b) * p.Tq + (i)) * p.H + (h)) * p.hd)
#define KJ(x, b, j, h) ((x) + (((b) * p.Tk + (j)) * p.H + (h)) * p.hd)
#define ST(b, h, i) (((b) * p.H + (h)) * p.Tq + (i))

static dp_status blk_fwd(opt_ops_h *h, blk_p p) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, OPT_OP_ATTN_BLOCK_FWD, "B=%lld Tq=%lld Tk=%lld H=%lld hd=%lld q0=%lld k0=%lld %s",
                      (long long)p.B, (long long)p.Tq, (long long)p.Tk, (long long)p.H, (long long)p.hd,
                      (long long)p.q0, (long long)p.k0, p.fresh ? "first block" : "running state");
    const int64_t nq = p.B * p.Tq * p.H * p.hd, nk = p.B * p.Tk * p.H * p.hd, ns = p.B * p.H * p.Tq;
    double *o = opt_ops_buf_f(&c, "o", OPT_OPS_INOUT, nq, p.fresh ? OPT_FILL_ZERO : OPT_FILL_NORMAL, 1);
    double *m = opt_ops_buf_f(&c, "m", OPT_OPS_INOUT, ns, OPT_FILL_NORMAL, 0.5);
    double *l = opt_ops_buf_f(&c, "l", OPT_OPS_INOUT, ns, OPT_FILL_POS, 2);
    const double *q = opt_ops_buf_f(&c, "q", OPT_OPS_IN, nq, OPT_FILL_NORMAL, 1);
    const double *k = opt_ops_buf_f(&c, "k", OPT_OPS_IN, nk, OPT_FILL_NORMAL, 1);
    const double *v = opt_ops_buf_f(&c, "v", OPT_OPS_IN, nk, OPT_FILL_NORMAL, 1);
    if (!o || !m || !l) return DP_ERR_NOMEM;
    for (int64_t i = 0; p.fresh && i < ns; i++) { m[i] = -INFINITY; l[i] = 0; }
    c.invoke = blk_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    const opt_rd_env *e = &h->env;
    opt_rd sc = attn_scale(e, p.hd);
    opt_rd *s = dp_malloc(sizeof(opt_rd) * (size_t)(2 * p.Tk + 1));
    if (!s) return DP_ERR_NOMEM;
    opt_rd *t2 = s + p.Tk;
    for (int64_t b = 0; b < p.B; b++)
        for (int64_t hh = 0; hh < p.H; hh++)
            for (int64_t i = 0; i < p.Tq; i++) {
                int64_t n = visible(&p, i), si = ST(b, hh, i);
                if (n == 0) continue; /* no visible key: the state is unchanged */
                opt_rd mb = {-INFINITY, 0};
                for (int64_t j = 0; j < n; j++) {
                    s[j] = opt_rd_mul(e, opt_rd_dot(e, QI(q, b, i, hh), 1, KJ(k, b, j, hh), 1, p.hd), sc);
                    mb = opt_rd_max(mb, s[j]);
                }
                opt_rd mn = opt_rd_max(opt_rd_x(m[si]), mb); /* a state, compared: its radius is the scores' */
                opt_rd a = m[si] == -INFINITY ? opt_rd_x(0) : opt_rd_exp(e, opt_rd_sub(e, opt_rd_x(m[si]), mn));
                for (int64_t j = 0; j < n; j++) s[j] = opt_rd_exp(e, opt_rd_sub(e, s[j], mn));
                OPS_REF(&c, 2, si) = opt_rd_add(e, opt_rd_mul(e, a, opt_rd_x(l[si])), opt_rd_sum(e, s, n));
                OPS_REF(&c, 1, si) = mn;
                for (int64_t f = 0; f < p.hd; f++) {
                    for (int64_t j = 0; j < n; j++) t2[j] = opt_rd_mul(e, opt_rd_in_rd(e, s[j]), opt_rd_in(e, KJ(v, b, j, hh)[f]));
                    double o0 = QI(o, b, i, hh)[f];
                    OPS_REF(&c, 0, QI(o, b, i, hh) - o + f) = opt_rd_add(e, opt_rd_mul(e, a, opt_rd_x(o0)), opt_rd_sum(e, t2, n));
                }
            }
    dp_free(s);
    opt_ops_finish(&c);
    return DP_OK;
}

static dp_status blk_finish(opt_ops_h *h, blk_p p) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, OPT_OP_ATTN_BLOCK_FINISH, "B=%lld Tq=%lld H=%lld hd=%lld", (long long)p.B, (long long)p.Tq,
                      (long long)p.H, (long long)p.hd);
    const int64_t nq = p.B * p.Tq * p.H * p.hd, ns = p.B * p.H * p.Tq;
    opt_ops_buf_f(&c, "y", OPT_OPS_OUT, nq, OPT_FILL_POISON, 1);
    opt_ops_buf_f(&c, "lse", OPT_OPS_OUT, ns, OPT_FILL_POISON, 1);
    const double *o = opt_ops_buf_f(&c, "o", OPT_OPS_IN, nq, OPT_FILL_NORMAL, 3);
    const double *m = opt_ops_buf_f(&c, "m", OPT_OPS_IN, ns, OPT_FILL_NORMAL, 2);
    const double *l = opt_ops_buf_f(&c, "l", OPT_OPS_IN, ns, OPT_FILL_POS, 3);
    c.invoke = blk_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    const opt_rd_env *e = &h->env;
    for (int64_t b = 0; b < p.B; b++)
        for (int64_t i = 0; i < p.Tq; i++)
            for (int64_t hh = 0; hh < p.H; hh++) {
                int64_t si = ST(b, hh, i), r = ((b * p.Tq + i) * p.H + hh) * p.hd;
                for (int64_t f = 0; f < p.hd; f++) OPS_REF(&c, 0, r + f) = opt_rd_div(e, opt_rd_x(o[r + f]), opt_rd_x(l[si]));
                OPS_REF(&c, 1, si) = opt_rd_add(e, opt_rd_x(m[si]), opt_rd_log(e, opt_rd_x(l[si])));
            }
    opt_ops_finish(&c);
    return DP_OK;
}

static dp_status blk_bwd(opt_ops_h *h, blk_p p) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, OPT_OP_ATTN_BLOCK_BWD, "B=%lld Tq=%lld Tk=%lld H=%lld hd=%lld q0=%lld k0=%lld", (long long)p.B,
                      (long long)p.Tq, (long long)p.Tk, (long long)p.H, (long long)p.hd, (long long)p.q0, (long long)p.k0);
    const int64_t nq = p.B * p.Tq * p.H * p.hd, nk = p.B * p.Tk * p.H * p.hd, ns = p.B * p.H * p.Tq;
    const double *dq = opt_ops_buf_f(&c, "dq", OPT_OPS_INOUT, nq, OPT_FILL_NORMAL, 1);
    const double *dk = opt_ops_buf_f(&c, "dk", OPT_OPS_INOUT, nk, OPT_FILL_NORMAL, 1);
    const double *dv = opt_ops_buf_f(&c, "dv", OPT_OPS_INOUT, nk, OPT_FILL_NORMAL, 1);
    const double *dout = opt_ops_buf_f(&c, "dout", OPT_OPS_IN, nq, OPT_FILL_NORMAL, 1);
    const double *q = opt_ops_buf_f(&c, "q", OPT_OPS_IN, nq, OPT_FILL_NORMAL, 1);
    const double *k = opt_ops_buf_f(&c, "k", OPT_OPS_IN, nk, OPT_FILL_NORMAL, 1);
    const double *v = opt_ops_buf_f(&c, "v", OPT_OPS_IN, nk, OPT_FILL_NORMAL, 1);
    const double *out = opt_ops_buf_f(&c, "out", OPT_OPS_IN, nq, OPT_FILL_NORMAL, 1);
    double *lse = opt_ops_buf_f(&c, "lse", OPT_OPS_IN, ns, OPT_FILL_POS, 1);
    const opt_rd_env *e = &h->env;
    opt_rd sc = attn_scale(e, p.hd);
    /* lse: log-sum-exp of the visible scores plus a positive share from other blocks (p <= 1) */
    for (int64_t b = 0; lse && b < p.B; b++)
        for (int64_t hh = 0; hh < p.H; hh++)
            for (int64_t i = 0; i < p.Tq; i++) {
                double z = lse[ST(b, hh, i)];
                for (int64_t j = 0; j < visible(&p, i); j++)
                    z += exp(sc.v * opt_rd_dot(e, QI(q, b, i, hh), 1, KJ(k, b, j, hh), 1, p.hd).v);
                lse[ST(b, hh, i)] = opt_ops_round(h, log(z));
            }
    c.invoke = blk_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    const int64_t T2 = p.Tq * p.Tk;
    opt_rd *P = dp_malloc(sizeof(opt_rd) * (size_t)(2 * T2 + p.Tq + p.Tk + 2));
    if (!P) return DP_ERR_NOMEM;
    opt_rd *DS = P + T2, *t2 = DS + T2;
    for (int64_t b = 0; b < p.B; b++)
        for (int64_t hh = 0; hh < p.H; hh++) {
            for (int64_t i = 0; i < p.Tq; i++) {
                opt_rd D = opt_rd_dot(e, QI(dout, b, i, hh), 1, QI(out, b, i, hh), 1, p.hd);
                for (int64_t j = 0; j < visible(&p, i); j++) {
                    opt_rd s = opt_rd_mul(e, opt_rd_dot(e, QI(q, b, i, hh), 1, KJ(k, b, j, hh), 1, p.hd), sc);
                    opt_rd pp = opt_rd_exp(e, opt_rd_sub(e, s, opt_rd_x(lse[ST(b, hh, i)])));
                    opt_rd dp = opt_rd_dot(e, QI(dout, b, i, hh), 1, KJ(v, b, j, hh), 1, p.hd);
                    P[i * p.Tk + j] = pp;
                    DS[i * p.Tk + j] = opt_rd_mul(e, sc, opt_rd_mul(e, pp, opt_rd_sub(e, dp, D)));
                }
            }
            for (int64_t i = 0; i < p.Tq; i++)
                for (int64_t f = 0; f < p.hd; f++) {
                    int64_t n = visible(&p, i);
                    for (int64_t j = 0; j < n; j++) t2[j] = opt_rd_mul(e, opt_rd_in_rd(e, DS[i * p.Tk + j]), opt_rd_in(e, KJ(k, b, j, hh)[f]));
                    int64_t o = QI(dq, b, i, hh) - dq + f;
                    OPS_REF(&c, 0, o) = opt_rd_acc(e, opt_rd_x(dq[o]), t2, n);
                }
            for (int64_t j = 0; j < p.Tk; j++)
                for (int64_t f = 0; f < p.hd; f++) {
                    int64_t n = 0, n2 = 0;
                    for (int64_t i = 0; i < p.Tq; i++)
                        if (j < visible(&p, i)) t2[n++] = opt_rd_mul(e, opt_rd_in_rd(e, DS[i * p.Tk + j]), opt_rd_in(e, QI(q, b, i, hh)[f]));
                    int64_t o = KJ(dk, b, j, hh) - dk + f;
                    OPS_REF(&c, 1, o) = opt_rd_acc(e, opt_rd_x(dk[o]), t2, n);
                    for (int64_t i = 0; i < p.Tq; i++)
                        if (j < visible(&p, i)) t2[n2++] = opt_rd_mul(e, opt_rd_in_rd(e, P[i * p.Tk + j]), opt_rd_in(e, QI(dout, b, i, hh)[f]));
                    OPS_REF(&c, 2, o) = opt_rd_acc(e, opt_rd_x(dv[o]), t2, n2);
                }
        }
    dp_free(P);
    opt_ops_finish(&c);
    return DP_OK;
}

static const blk_p blk_shapes[] = {
    {0, 2, 5, 5, 2, 4, 0, 0, 1},  /* the diagonal block, first */
    {0, 2, 5, 5, 2, 4, 5, 0, 0},  /* a block entirely in the past, running state */
    {0, 1, 4, 6, 3, 2, 3, 1, 0},  /* partly visible */
    {0, 2, 3, 3, 1, 4, 0, 5, 0},  /* entirely in the future: nothing changes */
    {0, 1, 1, 1, 1, 2, 0, 0, 1},
};
static dp_status case_blk_fwd(opt_ops_h *h) {
    for (size_t i = 0; i < sizeof blk_shapes / sizeof blk_shapes[0]; i++) DP_TRY(blk_fwd(h, blk_shapes[i]));
    return DP_OK;
}
static dp_status case_blk_finish(opt_ops_h *h) {
    DP_TRY(blk_finish(h, (blk_p){1, 2, 5, 0, 3, 4, 0, 0, 0}));
    return blk_finish(h, (blk_p){1, 1, 1, 0, 1, 2, 0, 0, 0});
}
static dp_status case_blk_bwd(opt_ops_h *h) {
    for (size_t i = 0; i < sizeof blk_shapes / sizeof blk_shapes[0]; i++) {
        blk_p p = blk_shapes[i];
        p.kind = 2;
        DP_TRY(blk_bwd(h, p));
    }
    return DP_OK;
}

const opt_ops_entry opt_ops_cases_attn[] = {
    {OPT_OP_ATTN_FWD, case_attn_fwd}, {OPT_OP_ATTN_BWD, case_attn_bwd}, {OPT_OP_ATTN_BLOCK_FWD, case_blk_fwd},
    {OPT_OP_ATTN_BLOCK_FINISH, case_blk_finish}, {OPT_OP_ATTN_BLOCK_BWD, case_blk_bwd}, {OPT_OP_COUNT, NULL},
};

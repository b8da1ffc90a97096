/* optimized/engine.c — the reference models batched over examples on a backend
 * (docs/engine.md). Every tensor is a device buffer of the backend's dtype; shapes in
 * comments use B examples, T positions, rows = B*T. A linear layer is y = x W^T with
 * W [p, d]: forward gemm(y [rows,p] = x [rows,d] W^T), input gradient
 * gemm(dx [rows,d] = dy [rows,p] W), weight gradient G^T A (per example or summed). */
#include "optimized/engine.h"
#include "common/alloc.h"
#include "optimized/ledger.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dp_status opt_block_release_none(opt_model *om, opt_arena *blk) {
    (void)om; (void)blk;
    return DP_OK;
}

/* ---------------------------------------------------------------- parameter fetch */
dp_status opt_params_use(const opt_model *om, int first, int n, int next_first, int next_n) {
    if (!om->fetch) return DP_OK;
    opt_model *m = (opt_model *)om; /* only w[] changes */
    for (int p = first; p < first + n; p++) DP_TRY(om->fetch->acquire(om->fetch->ctx, m, p, 0));
    for (int p = next_first; next_first >= 0 && p < next_first + next_n; p++)
        DP_TRY(om->fetch->acquire(om->fetch->ctx, m, p, 1));
    return DP_OK;
}

dp_status opt_params_drop(const opt_model *om, int first, int n) {
    if (!om->fetch) return DP_OK;
    for (int p = first; p < first + n; p++) DP_TRY(om->fetch->release(om->fetch->ctx, (opt_model *)om, p));
    return DP_OK;
}

/* ---------------------------------------------------------------- model */
dp_status opt_model_create(opt_model *om, opt_backend *be, const dp_model *m) {
    memset(om, 0, sizeof *om);
    om->be = be;
    om->cfg = m->cfg;
    om->np = m->nparams;
    om->T = m->cfg.kind == DP_LLAMA ? m->cfg.seq : 1;
    om->t0 = 0;
    om->Tl = om->T;
    om->attn = &opt_attn_local;
    om->block_release = opt_block_release_none;
    om->name = dp_calloc((size_t)om->np, sizeof *om->name);
    om->numel = dp_calloc((size_t)om->np, sizeof *om->numel);
    om->shape = dp_calloc((size_t)om->np, sizeof *om->shape);
    om->w = dp_calloc((size_t)om->np, sizeof *om->w);
    om->src = dp_calloc((size_t)om->np, sizeof *om->src);
    if (!om->name || !om->numel || !om->shape || !om->w || !om->src) {
        opt_model_free(om);
        return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    }
    size_t es = opt_backend_esize(be);
    for (int p = 0; p < om->np; p++) {
        const dp_param *P = &m->params[p];
        snprintf(om->name[p], DP_MAX_NAME, "%s", P->name);
        om->numel[p] = P->numel;
        om->shape[p][0] = P->shape[0];
        om->shape[p][1] = P->ndim > 1 ? P->shape[1] : 0;
        dp_status st = opt_mem_alloc(be, &om->w[p], es * (size_t)P->numel, OPT_MEM_PARAMS);
        if (st != DP_OK) { opt_model_free(om); return st; }
        st = OPT_CALL(be, upload_f64, om->w[p], P->data, P->numel);
        if (st != DP_OK) { opt_model_free(om); return st; }
        om->src[p] = P->ndim > 1 ? OPT_SRC_LINEAR : OPT_SRC_DIRECT;
    }
    if (m->cfg.kind == DP_LLAMA) {
        om->src[0] = m->cfg.tied ? OPT_SRC_BOTH : OPT_SRC_DIRECT; /* tok_emb */
    }
    return DP_OK;
}

void opt_model_free(opt_model *om) {
    if (om->retained.be) opt_arena_free(&om->retained);
    if (om->w)
        for (int p = 0; p < om->np; p++)
            opt_mem_free(om->be, om->w[p]);
    dp_free(om->name); dp_free(om->numel); dp_free(om->shape); dp_free(om->w); dp_free(om->src);
    memset(om, 0, sizeof *om);
}

dp_status opt_model_set_params(opt_model *om, double *const *host) {
    for (int p = 0; p < om->np; p++) DP_TRY(OPT_CALL(om->be, upload_f64, om->w[p], host[p], om->numel[p]));
    return DP_OK;
}

dp_status opt_model_get_params(const opt_model *om, double *const *host) {
    for (int p = 0; p < om->np; p++) {
        DP_TRY(opt_params_use(om, p, 1, -1, 0));
        DP_TRY(OPT_CALL(om->be, download_f64, host[p], om->w[p], om->numel[p]));
        DP_TRY(opt_params_drop(om, p, 1));
    }
    return DP_OK;
}

/* ---------------------------------------------------------------- forward state */
typedef struct {
    void *hin, *a, *r1, *q, *k, *v, *probs, *y, *h1, *m, *r2, *gt, *up, *act;
} opt_llama_layer;

typedef struct {
    /* mlp: h[i] [B, width_i] (h[0] = x), z-after-activation kept in h[i+1]; logits = h[L+1] */
    void *h[DP_MAX_HIDDEN + 2];
    /* llama */
    opt_llama_layer *ly;
    void *hfin, *nf, *rf, *logits;
    int32_t *targets; /* [rows] next token or -1 */
    void *wrow;       /* [rows] loss weights 1/(T-1) (tape pass) */
    void *lrows;      /* [rows] per-position losses */
} opt_fwd;

typedef enum { MODE_TAPE = 0, MODE_SUM = 1 } opt_mode;

/* The tape entries of [first, first + n) are final (opt_model.tape_hook). */
static dp_status tape_ready(const opt_tape *tp, const opt_model *om, opt_mode mode, int first, int n) {
    if (mode == MODE_TAPE && om->checkpoint && !om->tape_hook)
        return dp_error(DP_ERR_INTERNAL, "engine: --checkpoint block without a consumer of the per-example terms");
    if (mode != MODE_TAPE || !om->tape_hook) return DP_OK;
    return om->tape_hook->ready(om->tape_hook->ctx, tp, first, n);
}

static dp_status AA_(opt_arena *ar, void **out, int64_t nelem) {
    return opt_arena_alloc(ar, out, opt_backend_esize(ar->be) * (size_t)(nelem > 0 ? nelem : 1));
}

static dp_status A_(opt_tape *tp, void **out, int64_t nelem) {
    return opt_arena_alloc(&tp->ar, out, opt_backend_esize(tp->ar.be) * (size_t)(nelem > 0 ? nelem : 1));
}

static int mlp_width(const dp_model_config *c, int i) {
    return i == 0 ? c->in : (i <= c->nhidden ? c->hidden[i - 1] : c->classes);
}

dp_status opt_prec_round(const opt_model *om, void *x, int64_t n, int kind) {
    if (!opt_prec_is_half(om->prec)) return DP_OK;
    opt_prec_count *cnt = !om->pstats ? NULL : kind == OPT_PREC_KIND_PE ? &om->pstats->pe
                                             : kind == OPT_PREC_KIND_GRAD ? &om->pstats->grad : NULL;
    return opt_prec_round_dev(om->be, om->prec, x, n, cnt);
}

/* ---------------------------------------------------------------- half tape
 * docs/precision.md section 2: at bf16/fp16 the linear inputs (point A) and output
 * gradients (point G) the tape keeps move, once every f32 kernel that reads them in the
 * pass has run, from the rounded f32 buffer into a 2-byte container (tag activations);
 * a later reader decodes one tensor into an f32 workspace (tag workspace) and frees it
 * right after. Not under --checkpoint block (the tape lives one block) nor CP (refused). */
static int tape_half(const opt_model *om) { return opt_prec_is_half(om->prec) && !om->checkpoint; }

/* *buf [n] (f32 of ar, already rounded to the half type) becomes a 2-byte container of
 * ar holding the same values (encode of a rounded value is exact); tape entries of tp
 * (may be NULL) that point at the f32 buffer follow. No-op unless tape_half. */
static dp_status stash(opt_arena *ar, opt_tape *tp, const opt_model *om, void **buf, int64_t n) {
    if (!tape_half(om)) return DP_OK;
    void *h;
    DP_TRY(opt_arena_alloc(ar, &h, sizeof(uint16_t) * (size_t)(n > 0 ? n : 1)));
    DP_TRY(opt_prec_to_half(om->be, om->prec, h, *buf, n));
    for (int p = 0; tp && p < om->np; p++) {
        if (tp->A[p] == *buf) tp->A[p] = h;
        if (tp->G[p] == *buf) tp->G[p] = h;
    }
    opt_arena_drop(ar, *buf);
    *buf = h;
    return DP_OK;
}

/* *out = f32 values of x [n]: x itself (f32 tape) or a decoded workspace copy in ws */
#define expand opt_tape_f32_view
dp_status opt_tape_f32_view(opt_arena *ws, const void **out, const opt_model *om, int half, const void *x, int64_t n) {
    *out = x;
    if (!half) return DP_OK;
    void *w;
    DP_TRY(opt_arena_alloc_tag(ws, &w, sizeof(float) * (size_t)(n > 0 ? n : 1), OPT_MEM_WORKSPACE));
    DP_TRY(opt_prec_from_half(om->be, om->prec, w, x, n));
    *out = w;
    return DP_OK;
}

dp_status opt_tape_lin_f32(const void **A, const void **G, opt_arena *ws, const opt_model *om, const opt_tape *tp,
                           int pi) {
    const int64_t rows = tp->B * tp->T;
    DP_TRY(expand(ws, A, om, tp->half, tp->A[pi], rows * tp->din[pi]));
    return expand(ws, G, om, tp->half, tp->G[pi], rows * tp->dout[pi]);
}

/* linear forward: y [rows, p] = x [rows, d] W^T. Mixed precision (docs/precision.md,
 * points A and Y): the input activation x is rounded to the half type in place (it is
 * the stored activation the tape keeps), and so is the output y. */
static dp_status lin_fwd(const opt_model *om, void *y, const void *x, const void *W, int64_t rows, int64_t d,
                         int64_t p) {
    DP_TRY(opt_prec_round(om, (void *)x, rows * d, OPT_PREC_KIND_ACT));
    DP_TRY(OPT_CALL(om->be, gemm, y, x, W, 0, 1, rows, p, d, 1.0, 0.0, 1, 0, 0, 0));
    return opt_prec_round(om, y, rows * p, OPT_PREC_KIND_ACT);
}
/* input gradient: dx [rows, d] (+)= dy [rows, p] W [p, d] */
static dp_status lin_bwd_x(opt_backend *be, void *dx, const void *dy, const void *W, int64_t rows, int64_t d,
                           int64_t p, double beta) {
    return OPT_CALL(be, gemm, dx, dy, W, 0, 0, rows, d, p, 1.0, beta, 1, 0, 0, 0);
}

/* Record (tape) or accumulate (sum) the gradient of linear parameter pi. */
static dp_status lin_grad(opt_tape *tp, const opt_model *om, opt_mode mode, void *const *grads, int pi,
                          const void *A, const void *G, int64_t d, int64_t p) {
    /* mixed precision, point G: the layer's output gradient is held in the half type
     * before the weight and input gradients read it (in place; rounding is idempotent
     * when several layers share it) */
    DP_TRY(opt_prec_round(om, (void *)G, tp->B * tp->T * p, OPT_PREC_KIND_GRAD));
    if (mode == MODE_TAPE) {
        tp->A[pi] = A; tp->G[pi] = G; tp->din[pi] = d; tp->dout[pi] = p;
        return DP_OK;
    }
    /* dW [p, d] += G^T A over all rows (a half-stored A decoded into workspace) */
    int64_t rows = tp->B * tp->T;
    opt_arena ws = {.be = om->be};
    dp_status st = expand(&ws, &A, om, tp->half, A, rows * d);
    if (st == DP_OK) st = OPT_CALL(om->be, gemm, grads[pi], G, A, 1, 0, p, d, rows, 1.0, 1.0, 1, 0, 0, 0);
    opt_arena_free(&ws);
    return st;
}

/* Per-row gradient rows [rows, n] of a direct parameter: tape -> per-example sums
 * [B, n] (sum over T), sum -> accumulated into grads[pi]. */
static dp_status direct_grad(opt_tape *tp, const opt_model *om, opt_mode mode, void *const *grads, int pi,
                             const void *rowsbuf, int64_t n) {
    if (mode == MODE_TAPE) {
        if (!tp->direct[pi]) DP_TRY(A_(tp, &tp->direct[pi], tp->B * n));
        DP_TRY(OPT_CALL(om->be, sum_rows, tp->direct[pi], rowsbuf, 0, tp->B, tp->T, n));
        DP_TRY(opt_prec_round(om, tp->direct[pi], tp->B * n, OPT_PREC_KIND_PE)); /* point P */
        return stash(&tp->ar, NULL, om, &tp->direct[pi], tp->B * n);
    }
    return OPT_CALL(om->be, sum_rows, grads[pi], rowsbuf, 1, 1, tp->B * tp->T, n);
}

static dp_status upload_batch(opt_tape *tp, const opt_model *om, const dp_dataset *d, const int64_t *idx) {
    opt_backend *be = om->be;
    int64_t B = tp->B;
    if (om->cfg.kind == DP_MLP) {
        int in = om->cfg.in;
        double *hx = dp_malloc(sizeof(double) * (size_t)(B * in + 1));
        int32_t *hy = dp_malloc(sizeof(int32_t) * (size_t)(B + 1));
        if (!hx || !hy) { dp_free(hx); dp_free(hy); return dp_error(DP_ERR_NOMEM, "engine: out of memory"); }
        for (int64_t b = 0; b < B; b++) {
            memcpy(hx + b * in, d->x + idx[b] * in, sizeof(double) * (size_t)in);
            hy[b] = d->y[idx[b]];
        }
        dp_status st = A_(tp, &tp->x_dev, B * in);
        if (st == DP_OK) st = OPT_CALL(be, upload_f64, tp->x_dev, hx, B * in);
        if (st == DP_OK) st = opt_arena_alloc(&tp->ar, (void **)&tp->y_dev, sizeof(int32_t) * (size_t)(B + 1));
        if (st == DP_OK) st = OPT_CALL(be, to_device, tp->y_dev, hy, sizeof(int32_t) * (size_t)B);
        dp_free(hx); dp_free(hy);
        return st;
    }
    /* this rank's positions [t0, t0 + T) of examples of Tg positions (CP: a shard) */
    const int64_t T = tp->T, Tg = om->cfg.seq, t0 = om->t0;
    int32_t *ht = dp_malloc(sizeof(int32_t) * (size_t)(B * T + 1));
    if (!ht) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    for (int64_t b = 0; b < B; b++) memcpy(ht + b * T, d->tokens + idx[b] * Tg + t0, sizeof(int32_t) * (size_t)T);
    dp_status st = opt_arena_alloc(&tp->ar, &tp->x_dev, sizeof(int32_t) * (size_t)(B * T + 1));
    if (st == DP_OK) st = OPT_CALL(be, to_device, tp->x_dev, ht, sizeof(int32_t) * (size_t)(B * T));
    /* targets: next token, -1 at the last position */
    for (int64_t b = 0; st == DP_OK && b < B; b++)
        for (int64_t t = 0; t < T; t++) ht[b * T + t] = t0 + t + 1 < Tg ? d->tokens[idx[b] * Tg + t0 + t + 1] : -1;
    if (st == DP_OK) st = opt_arena_alloc(&tp->ar, (void **)&tp->y_dev, sizeof(int32_t) * (size_t)(B * T + 1));
    if (st == DP_OK) st = OPT_CALL(be, to_device, tp->y_dev, ht, sizeof(int32_t) * (size_t)(B * T));
    dp_free(ht);
    return st;
}

/* ---------------------------------------------------------------- mlp */
static dp_status mlp_forward(opt_fwd *f, opt_tape *tp, const opt_model *om) {
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    int L = c->nhidden;
    int64_t B = tp->B;
    f->h[0] = tp->x_dev;
    for (int i = 0; i <= L; i++) {
        int64_t din = mlp_width(c, i), dout = mlp_width(c, i + 1);
        DP_TRY(A_(tp, &f->h[i + 1], B * dout));
        DP_TRY(opt_params_use(om, 2 * i, 2, i < L ? 2 * i + 2 : -1, 2));
        DP_TRY(lin_fwd(om, f->h[i + 1], f->h[i], om->w[2 * i], B, din, dout)); /* [B, out] */
        DP_TRY(stash(&tp->ar, NULL, om, &f->h[i], B * din)); /* point A: the tape's copy */
        if (i == 0) tp->x_dev = f->h[0];
        DP_TRY(OPT_CALL(be, add_bias, f->h[i + 1], om->w[2 * i + 1], B, dout));
        DP_TRY(opt_params_drop(om, 2 * i, 2));
        if (i < L) DP_TRY(OPT_CALL(be, tanh_fwd, f->h[i + 1], f->h[i + 1], B * dout));
    }
    DP_TRY(A_(tp, &f->wrow, B));
    DP_TRY(A_(tp, &f->lrows, B));
    double *ones = dp_malloc(sizeof(double) * (size_t)(B + 1));
    if (!ones) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    for (int64_t b = 0; b < B; b++) ones[b] = 1.0;
    dp_status st = OPT_CALL(be, upload_f64, f->wrow, ones, B);
    dp_free(ones);
    DP_TRY(st);
    return OPT_CALL(be, xent_fwd, f->lrows, f->h[L + 1], tp->y_dev, f->wrow, B, c->classes); /* [B] */
}

/* w: per-row loss weights [B] (tape: ones; sum: clip factors) */
static dp_status mlp_backward(opt_tape *tp, const opt_model *om, opt_fwd *f, opt_mode mode, void *const *grads,
                              const void *w) {
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    int L = c->nhidden;
    int64_t B = tp->B;
    void *dz;
    DP_TRY(A_(tp, &dz, B * c->classes));
    DP_TRY(OPT_CALL(be, xent_bwd, dz, f->h[L + 1], tp->y_dev, w, B, c->classes)); /* [B, classes] */
    for (int i = L; i >= 0; i--) {
        int64_t din = mlp_width(c, i), dout = mlp_width(c, i + 1);
        /* dz [B, dout] is the gradient w.r.t. the pre-activation of layer i */
        DP_TRY(lin_grad(tp, om, mode, grads, 2 * i, f->h[i], dz, din, dout));
        DP_TRY(direct_grad(tp, om, mode, grads, 2 * i + 1, dz, dout));
        void *dh = NULL;
        if (i > 0) {
            DP_TRY(A_(tp, &dh, B * din));
            DP_TRY(opt_params_use(om, 2 * i, 1, i > 1 ? 2 * i - 2 : -1, 1));
            DP_TRY(lin_bwd_x(be, dh, dz, om->w[2 * i], B, din, dout, 0.0));
            DP_TRY(opt_params_drop(om, 2 * i, 1));
            opt_arena ws = {.be = be};
            const void *hi;
            dp_status st = expand(&ws, &hi, om, tape_half(om), f->h[i], B * din);
            if (st == DP_OK) st = OPT_CALL(be, tanh_bwd, dh, dh, hi, B * din); /* through h_i = tanh(.) */
            opt_arena_free(&ws);
            DP_TRY(st);
        }
        if (mode == MODE_TAPE) DP_TRY(stash(&tp->ar, tp, om, &dz, B * dout)); /* point G: the tape's copy */
        dz = dh;
    }
    return DP_OK;
}

/* The forward of llama layer l from y->hin: its activations in ar, its output *hout
 * [rows, D] in out_ar (the layer's parameters acquired). */
static dp_status layer_fwd(opt_arena *ar, opt_arena *out_ar, void **hout, opt_llama_layer *y, const opt_model *om,
                           int64_t l, int64_t B, int64_t T) {
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    const int64_t D = c->dim, F = c->ffn, rows = B * T;
    const double eps = c->norm_eps;
    void *const *W = om->w + 1 + 9 * l;
    DP_TRY(AA_(ar, &y->a, rows * D)); DP_TRY(AA_(ar, &y->r1, rows));
    DP_TRY(AA_(ar, &y->q, rows * D)); DP_TRY(AA_(ar, &y->k, rows * D)); DP_TRY(AA_(ar, &y->v, rows * D));
    DP_TRY(om->attn->alloc(ar, &y->probs, om, B));
    DP_TRY(AA_(ar, &y->y, rows * D));
    DP_TRY(AA_(ar, &y->h1, rows * D)); DP_TRY(AA_(ar, &y->m, rows * D)); DP_TRY(AA_(ar, &y->r2, rows));
    DP_TRY(AA_(ar, &y->gt, rows * F)); DP_TRY(AA_(ar, &y->up, rows * F)); DP_TRY(AA_(ar, &y->act, rows * F));
    DP_TRY(OPT_CALL(be, rmsnorm_fwd, y->a, y->r1, y->hin, W[0], eps, rows, D));
    DP_TRY(lin_fwd(om, y->q, y->a, W[1], rows, D, D));
    DP_TRY(lin_fwd(om, y->k, y->a, W[2], rows, D, D));
    DP_TRY(lin_fwd(om, y->v, y->a, W[3], rows, D, D));
    DP_TRY(stash(ar, NULL, om, &y->a, rows * D));
    DP_TRY(om->attn->fwd(ar, y->y, &y->q, &y->k, &y->v, &y->probs, om, B)); /* the attention seam */
    DP_TRY(lin_fwd(om, y->h1, y->y, W[4], rows, D, D));
    DP_TRY(stash(ar, NULL, om, &y->y, rows * D));
    DP_TRY(OPT_CALL(be, add, y->h1, y->h1, y->hin, rows * D)); /* h1 = hin + y Wo^T */
    DP_TRY(OPT_CALL(be, rmsnorm_fwd, y->m, y->r2, y->h1, W[5], eps, rows, D));
    DP_TRY(lin_fwd(om, y->gt, y->m, W[6], rows, D, F));
    DP_TRY(lin_fwd(om, y->up, y->m, W[7], rows, D, F));
    DP_TRY(stash(ar, NULL, om, &y->m, rows * D));
    DP_TRY(OPT_CALL(be, swiglu_fwd, y->act, y->gt, y->up, rows * F));
    DP_TRY(AA_(out_ar, hout, rows * D));
    DP_TRY(lin_fwd(om, *hout, y->act, W[8], rows, F, D));
    DP_TRY(stash(ar, NULL, om, &y->act, rows * F));
    return OPT_CALL(be, add, *hout, *hout, y->h1, rows * D); /* h = h1 + act Wdown^T */
}

/* ---------------------------------------------------------------- llama */
static dp_status llama_forward(opt_fwd *f, opt_tape *tp, const opt_model *om) {
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    const int64_t V = c->vocab, D = c->dim, L = c->layers, T = tp->T;
    const int64_t B = tp->B, rows = B * T;
    const double eps = c->norm_eps;
    f->ly = dp_calloc((size_t)L, sizeof *f->ly);
    if (!f->ly) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    void *h;
    DP_TRY(A_(tp, &h, rows * D));
    const int ifin = (int)(1 + 9 * L), iout = c->tied ? 0 : (int)(2 + 9 * L);
    DP_TRY(opt_params_use(om, 0, 1, L > 0 ? 1 : ifin, L > 0 ? 9 : 1));
    DP_TRY(OPT_CALL(be, embed_fwd, h, om->w[0], (const int32_t *)tp->x_dev, rows, V, D)); /* [rows, D] */
    DP_TRY(opt_params_drop(om, 0, 1));
    for (int64_t l = 0; l < L; l++) {
        opt_llama_layer *y = &f->ly[l];
        DP_TRY(opt_params_use(om, (int)(1 + 9 * l), 9, l + 1 < L ? (int)(10 + 9 * l) : ifin, l + 1 < L ? 9 : 1));
        y->hin = h;
        void *hn;
        if (!om->checkpoint) DP_TRY(layer_fwd(&tp->ar, &tp->ar, &hn, y, om, l, B, T));
        else { /* --checkpoint block: only the block's input survives the forward */
            opt_arena blk = {.be = be};
            dp_status st = layer_fwd(&blk, &tp->ar, &hn, y, om, l, B, T);
            if (st == DP_OK) st = om->block_release((opt_model *)om, &blk);
            opt_arena_free(&blk);
            DP_TRY(st);
            *y = (opt_llama_layer){.hin = y->hin};
        }
        DP_TRY(opt_params_drop(om, (int)(1 + 9 * l), 9));
        h = hn;
    }
    f->hfin = h;
    DP_TRY(opt_params_use(om, ifin, 1, iout, 1));
    DP_TRY(opt_params_use(om, iout, 1, -1, 0));
    const void *Wout = om->w[iout];
    DP_TRY(A_(tp, &f->nf, rows * D)); DP_TRY(A_(tp, &f->rf, rows)); DP_TRY(A_(tp, &f->logits, rows * V));
    DP_TRY(OPT_CALL(be, rmsnorm_fwd, f->nf, f->rf, f->hfin, om->w[1 + 9 * L], eps, rows, D));
    DP_TRY(lin_fwd(om, f->logits, f->nf, Wout, rows, D, V)); /* [rows, V] */
    DP_TRY(stash(&tp->ar, NULL, om, &f->nf, rows * D));
    DP_TRY(opt_params_drop(om, ifin, 1));
    DP_TRY(opt_params_drop(om, iout, 1));
    /* per-position losses with weight 1/(T-1) (mean over the T-1 predicted positions) */
    DP_TRY(A_(tp, &f->wrow, rows)); DP_TRY(A_(tp, &f->lrows, rows));
    double *wr = dp_malloc(sizeof(double) * (size_t)(rows + 1));
    if (!wr) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    for (int64_t r = 0; r < rows; r++) wr[r] = 1.0 / (double)(c->seq - 1); /* c->seq = T unless CP */
    dp_status st = OPT_CALL(be, upload_f64, f->wrow, wr, rows);
    dp_free(wr);
    DP_TRY(st);
    return OPT_CALL(be, xent_fwd, f->lrows, f->logits, tp->y_dev, f->wrow, rows, V);
}

/* The backward of llama layer l (activations y, parameters acquired) from dh = d loss /
 * d (layer output): its temporaries and *dhn_out = d loss / d y->hin in ar; the tape
 * records (MODE_TAPE) or grads accumulates (MODE_SUM) its parameters' gradients. */
static dp_status layer_bwd(opt_tape *tp, opt_arena *ar, const opt_model *om, opt_mode mode, void *const *grads,
                           const opt_llama_layer *y, int64_t l, void *dh, void *dg, void **dhn_out) {
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    const int64_t D = c->dim, F = c->ffn, T = tp->T, B = tp->B, rows = B * T;
    void *const *W = om->w + 1 + 9 * l;
    const int base = (int)(1 + 9 * l);
    void *dact, *dgt, *dup, *dm, *dx, *dh1, *dy, *dq, *dk, *dv, *da;
    DP_TRY(AA_(ar, &dact, rows * F)); DP_TRY(AA_(ar, &dgt, rows * F)); DP_TRY(AA_(ar, &dup, rows * F));
    DP_TRY(AA_(ar, &dm, rows * D)); DP_TRY(AA_(ar, &dx, rows * D)); DP_TRY(AA_(ar, &dh1, rows * D));
    DP_TRY(AA_(ar, &dy, rows * D)); DP_TRY(AA_(ar, &dq, rows * D)); DP_TRY(AA_(ar, &dk, rows * D));
    DP_TRY(AA_(ar, &dv, rows * D)); DP_TRY(AA_(ar, &da, rows * D)); DP_TRY(AA_(ar, dhn_out, rows * D));
    /* MLP block: h = h1 + act Wdown^T */
    DP_TRY(lin_grad(tp, om, mode, grads, base + 8, y->act, dh, F, D));
    DP_TRY(lin_bwd_x(be, dact, dh, W[8], rows, F, D, 0.0));
    DP_TRY(OPT_CALL(be, swiglu_bwd, dgt, dup, dact, y->gt, y->up, rows * F));
    DP_TRY(lin_grad(tp, om, mode, grads, base + 6, y->m, dgt, D, F));
    DP_TRY(lin_grad(tp, om, mode, grads, base + 7, y->m, dup, D, F));
    DP_TRY(lin_bwd_x(be, dm, dgt, W[6], rows, D, F, 0.0));
    DP_TRY(lin_bwd_x(be, dm, dup, W[7], rows, D, F, 1.0));
    DP_TRY(OPT_CALL(be, rmsnorm_bwd, dx, dg, dm, y->h1, y->r2, W[5], rows, D));
    DP_TRY(direct_grad(tp, om, mode, grads, base + 5, dg, D));
    DP_TRY(OPT_CALL(be, add, dh1, dh, dx, rows * D)); /* d loss / d h1 */
    /* attention block: h1 = hin + y Wo^T */
    DP_TRY(lin_grad(tp, om, mode, grads, base + 4, y->y, dh1, D, D));
    DP_TRY(lin_bwd_x(be, dy, dh1, W[4], rows, D, D, 0.0));
    DP_TRY(om->attn->bwd(ar, dq, dk, dv, dy, y->q, y->k, y->v, y->probs, y->y, om, B)); /* the attention seam */
    DP_TRY(lin_grad(tp, om, mode, grads, base + 1, y->a, dq, D, D));
    DP_TRY(lin_grad(tp, om, mode, grads, base + 2, y->a, dk, D, D));
    DP_TRY(lin_grad(tp, om, mode, grads, base + 3, y->a, dv, D, D));
    DP_TRY(lin_bwd_x(be, da, dq, W[1], rows, D, D, 0.0));
    DP_TRY(lin_bwd_x(be, da, dk, W[2], rows, D, D, 1.0));
    DP_TRY(lin_bwd_x(be, da, dv, W[3], rows, D, D, 1.0));
    DP_TRY(OPT_CALL(be, rmsnorm_bwd, dx, dg, da, y->hin, y->r1, W[0], rows, D));
    DP_TRY(direct_grad(tp, om, mode, grads, base + 0, dg, D));
    DP_TRY(OPT_CALL(be, add, *dhn_out, dh1, dx, rows * D)); /* d loss / d hin */
    if (mode != MODE_TAPE) return DP_OK;
    /* point G: the layer's output gradients move into the tape's 2-byte copies */
    void **gs[] = {&dh, &dgt, &dup, &dh1, &dq, &dk, &dv};
    const int64_t gn[] = {D, F, F, D, D, D, D};
    for (int i = 0; i < 7; i++) DP_TRY(stash(ar, tp, om, gs[i], rows * gn[i]));
    return DP_OK;
}

static dp_status llama_backward(opt_tape *tp, const opt_model *om, opt_fwd *f, opt_mode mode, void *const *grads,
                                const void *wrow) {
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    const int64_t V = c->vocab, D = c->dim, L = c->layers, F = c->ffn, T = tp->T;
    const int64_t B = tp->B, rows = B * T;
    const int iout = c->tied ? 0 : (int)(2 + 9 * L), ifin = (int)(1 + 9 * L);
    DP_TRY(opt_params_use(om, iout, 1, ifin, 1));
    DP_TRY(opt_params_use(om, ifin, 1, L > 0 ? (int)(1 + 9 * (L - 1)) : -1, 9));
    const void *Wout = om->w[iout];
    void *dlog, *dnf, *dh, *dg;
    DP_TRY(A_(tp, &dlog, rows * V)); DP_TRY(A_(tp, &dnf, rows * D)); DP_TRY(A_(tp, &dh, rows * D));
    DP_TRY(A_(tp, &dg, rows * (D > F ? D : F)));
    DP_TRY(OPT_CALL(be, xent_bwd, dlog, f->logits, tp->y_dev, wrow, rows, V)); /* [rows, V] */
    DP_TRY(lin_grad(tp, om, mode, grads, iout, f->nf, dlog, D, V));
    DP_TRY(lin_bwd_x(be, dnf, dlog, Wout, rows, D, V, 0.0));
    if (mode == MODE_TAPE) DP_TRY(stash(&tp->ar, tp, om, &dlog, rows * V));
    DP_TRY(OPT_CALL(be, rmsnorm_bwd, dh, dg, dnf, f->hfin, f->rf, om->w[1 + 9 * L], rows, D));
    DP_TRY(direct_grad(tp, om, mode, grads, (int)(1 + 9 * L), dg, D));
    DP_TRY(opt_params_drop(om, iout, 1));
    DP_TRY(opt_params_drop(om, ifin, 1));
    DP_TRY(tape_ready(tp, om, mode, ifin, c->tied ? 1 : 2));
    for (int64_t l = L - 1; l >= 0; l--) {
        const int base = (int)(1 + 9 * l);
        DP_TRY(opt_params_use(om, base, 9, l > 0 ? base - 9 : -1, 9));
        /* --checkpoint block: the block's forward recomputed from its kept input; its
         * activations, temporaries and tape entries live until the tape hook has consumed
         * them (the per-example terms), then are freed */
        opt_arena blk = {.be = be};
        opt_llama_layer ry = f->ly[l];
        void *dhn = NULL, *hre = NULL;
        dp_status st = DP_OK;
        if (om->checkpoint) st = layer_fwd(&blk, &blk, &hre, &ry, om, l, B, T);
        if (st == DP_OK) st = layer_bwd(tp, om->checkpoint ? &blk : &tp->ar, om, mode, grads, &ry, l, dh, dg, &dhn);
        if (st == DP_OK) st = opt_params_drop(om, base, 9);
        if (st == DP_OK) st = tape_ready(tp, om, mode, base, 9);
        if (st == DP_OK && om->checkpoint) { /* dh (down's output gradient, consumed) takes d loss / d hin */
            st = OPT_CALL(be, copy, dh, dhn, opt_backend_esize(be) * (size_t)(rows * D));
            for (int p = base; p < base + 9; p++) tp->A[p] = tp->G[p] = NULL;
            dhn = dh;
        }
        opt_arena_free(&blk);
        DP_TRY(st);
        dh = dhn;
    }
    /* token embedding: per-example tables [B, V, D] (tape) or the summed table */
    if (mode == MODE_TAPE && tape_half(om)) { /* half tape: example by example through one f32 [V, D] */
        DP_TRY(opt_arena_alloc(&tp->ar, &tp->direct[0], sizeof(uint16_t) * (size_t)(B > 0 ? B * V * D : 1)));
        opt_arena ws = {.be = be};
        void *one;
        dp_status st = opt_arena_alloc_tag(&ws, &one, sizeof(float) * (size_t)(V * D), OPT_MEM_WORKSPACE);
        for (int64_t b = 0; st == DP_OK && b < B; b++) {
            st = OPT_CALL(be, zero, one, sizeof(float) * (size_t)(V * D));
            if (st == DP_OK)
                st = OPT_CALL(be, embed_bwd, one, (const char *)dh + sizeof(float) * (size_t)(b * T * D),
                              (const int32_t *)tp->x_dev + b * T, T, T, V, D);
            if (st == DP_OK) st = opt_prec_round(om, one, V * D, OPT_PREC_KIND_PE); /* point P */
            if (st == DP_OK)
                st = opt_prec_to_half(be, om->prec, (char *)tp->direct[0] + sizeof(uint16_t) * (size_t)(b * V * D), one, V * D);
        }
        opt_arena_free(&ws);
        DP_TRY(st);
        return tape_ready(tp, om, mode, 0, 1);
    }
    if (mode == MODE_TAPE) {
        if (!tp->direct[0]) DP_TRY(A_(tp, &tp->direct[0], B * V * D));
        DP_TRY(OPT_CALL(be, embed_bwd, tp->direct[0], dh, (const int32_t *)tp->x_dev, rows, T, V, D));
        DP_TRY(opt_prec_round(om, tp->direct[0], B * V * D, OPT_PREC_KIND_PE)); /* point P */
        return tape_ready(tp, om, mode, 0, 1);
    }
    return OPT_CALL(be, embed_bwd, grads[0], dh, (const int32_t *)tp->x_dev, rows, rows, V, D);
}

/* ---------------------------------------------------------------- entry points */
static dp_status tape_init(opt_tape *tp, const opt_model *om, int64_t B) {
    memset(tp, 0, sizeof *tp);
    tp->ar.be = om->be;
    tp->B = B;
    tp->T = om->Tl;
    tp->half = tape_half(om);
    int np = om->np;
    tp->A = dp_calloc((size_t)np, sizeof *tp->A);
    tp->G = dp_calloc((size_t)np, sizeof *tp->G);
    tp->din = dp_calloc((size_t)np, sizeof *tp->din);
    tp->dout = dp_calloc((size_t)np, sizeof *tp->dout);
    tp->direct = dp_calloc((size_t)np, sizeof *tp->direct);
    if (!tp->A || !tp->G || !tp->din || !tp->dout || !tp->direct) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    return DP_OK;
}

void opt_tape_free(opt_tape *tp) {
    if (tp->ar.be) opt_arena_free(&tp->ar);
    dp_free(tp->A); dp_free(tp->G); dp_free(tp->din); dp_free(tp->dout); dp_free(tp->direct);
    opt_fwd *f = (opt_fwd *)tp->fwd_;
    if (f) { dp_free(f->ly); dp_free(f); }
    memset(tp, 0, sizeof *tp);
}

dp_status opt_forward_backward(opt_tape *tp, const opt_model *om, const dp_dataset *d, const int64_t *idx,
                               int64_t B) {
    DP_TRY(tape_init(tp, om, B));
    DP_TRY(A_(tp, &tp->loss, B));
    if (B == 0 && !opt_fetch_collective(om)) return DP_OK; /* zero3: every rank walks the layers (gathers are collective) */
    opt_fwd *f = dp_calloc(1, sizeof *f);
    if (!f) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    tp->fwd_ = f;
    DP_TRY(upload_batch(tp, om, d, idx));
    /* loss scaling (step 2): the loss weights of the backward x S (exact: a power of two) */
    const int scaled = om->loss_scale > 0 && om->loss_scale != 1;
    if (om->cfg.kind == DP_MLP) {
        DP_TRY(mlp_forward(f, tp, om));
        DP_TRY(OPT_CALL(om->be, copy, tp->loss, f->lrows, opt_backend_esize(om->be) * (size_t)B));
        if (scaled) DP_TRY(OPT_CALL(om->be, div_scalar, f->wrow, f->wrow, 1.0 / om->loss_scale, B));
        return mlp_backward(tp, om, f, MODE_TAPE, NULL, f->wrow);
    }
    DP_TRY(llama_forward(f, tp, om));
    DP_TRY(OPT_CALL(om->be, sum_rows, tp->loss, f->lrows, 0, B, tp->T, 1)); /* [B] */
    if (scaled) DP_TRY(OPT_CALL(om->be, div_scalar, f->wrow, f->wrow, 1.0 / om->loss_scale, B * tp->T));
    return llama_backward(tp, om, f, MODE_TAPE, NULL, f->wrow);
}

dp_status opt_backward_weighted(void *const *grads, const opt_model *om, opt_tape *tp, const void *c) {
    opt_fwd *f = (opt_fwd *)tp->fwd_;
    if (tp->B == 0) return DP_OK;
    if (!f) return dp_error(DP_ERR_INTERNAL, "engine: weighted backward without a forward pass");
    opt_backend *be = om->be;
    int64_t B = tp->B, T = tp->T;
    if (om->cfg.kind == DP_MLP) return mlp_backward(tp, om, f, MODE_SUM, grads, c);
    /* per-row weights c[b] / (T - 1): rows of example b = c[b] * wrow */
    void *w;
    DP_TRY(A_(tp, &w, B * T));
    double *hc = dp_malloc(sizeof(double) * (size_t)(B + 1)), *hw = dp_malloc(sizeof(double) * (size_t)(B * T + 1));
    if (!hc || !hw) { dp_free(hc); dp_free(hw); return dp_error(DP_ERR_NOMEM, "engine: out of memory"); }
    dp_status st = OPT_CALL(be, download_f64, hc, c, B);
    for (int64_t b = 0; st == DP_OK && b < B; b++)
        for (int64_t t = 0; t < T; t++) hw[b * T + t] = hc[b] / (double)(om->cfg.seq - 1);
    if (st == DP_OK) st = OPT_CALL(be, upload_f64, w, hw, B * T);
    dp_free(hc); dp_free(hw);
    DP_TRY(st);
    return llama_backward(tp, om, f, MODE_SUM, grads, w);
}

dp_status opt_forward_loss(double *loss_host, const opt_model *om, const dp_dataset *d, const int64_t *idx,
                           int64_t B) {
    opt_tape tp;
    dp_status st = tape_init(&tp, om, B);
    opt_fwd *f = NULL;
    if (st == DP_OK && B > 0) {
        f = dp_calloc(1, sizeof *f);
        tp.fwd_ = f;
        if (!f) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
    }
    if (st == DP_OK && B > 0) st = upload_batch(&tp, om, d, idx);
    if (st == DP_OK && B > 0) st = A_(&tp, &tp.loss, B);
    if (st == DP_OK && B > 0) {
        if (om->cfg.kind == DP_MLP) {
            st = mlp_forward(f, &tp, om);
            if (st == DP_OK) st = OPT_CALL(om->be, download_f64, loss_host, f->lrows, B);
        } else {
            st = llama_forward(f, &tp, om);
            if (st == DP_OK) st = OPT_CALL(om->be, sum_rows, tp.loss, f->lrows, 0, B, tp.T, 1);
            if (st == DP_OK) st = OPT_CALL(om->be, download_f64, loss_host, tp.loss, B);
        }
    }
    opt_tape_free(&tp);
    return st;
}

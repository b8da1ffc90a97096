/* optimized/clip/source_local.c — the local norm source of the clipping pipeline
 * (optimized/clip/clip.h, docs/engine.md section 4): the whole sequence of every example
 * on this rank; each parameter by the mode the norm strategy chose (instantiated
 * per-example gradients, ghost norms, streaming FlashDP norms, or the FlashDP single pass
 * that clips and accumulates inside the factor pass); clipped sums into the full layout's
 * vector by clip_accum / bk_gemm, or by the weighted second backward (ghost clipping,
 * flat, when nothing in the chunk is dropped). --checkpoint block instantiates each
 * block's per-example gradients inside the backward (the tape hook). */
#include <stdlib.h>
#include <string.h>

#include "optimized/clip/clip.h"
#include "common/alloc.h"
#include "optimized/ledger.h"

enum { M_DIRECT = OPT_LM_DIRECT, M_INST = OPT_LM_INST, M_GHOST = OPT_LM_GHOST, M_FUSEDNORM = OPT_LM_FUSEDNORM,
       M_FUSED1 = OPT_LM_FUSED1 };

typedef struct {
    void **inst;   /* [np] instantiated per-example gradients (or NULL) */
    opt_arena ci;  /* --checkpoint block: the blocks' instantiated gradients */
    void **fbak;   /* [np] the single-pass fused layers' sums before the factor pass */
} local_state;

/* sqg [B] += the squared norms of parameter p's per-example gradients (mode m). M_INST
 * forms them into inst[p] unless there (--checkpoint block: formed in the backward); a
 * half tape forms them in an f32 workspace, reads their norms there and holds them in 2
 * bytes (point E), and decodes whatever else it reads into an f32 workspace
 * (docs/precision.md section 2 "Storage"). */
static dp_status norm_term(void *sqg, void **inst, const opt_model *om, opt_tape *tp, int m, int p) {
    opt_backend *be = om->be;
    const int64_t B = tp->B, n = B * om->numel[p];
    opt_arena ws = {.be = be};
    const void *x, *A, *G;
    void *f = NULL;
    dp_status st = DP_OK;
    switch (m) {
    case M_DIRECT:
        st = opt_tape_f32_view(&ws, &x, om, tp->half, tp->direct[p], n);
        if (st == DP_OK) st = OPT_CALL(be, sqnorm_rows, sqg, x, B, om->numel[p]);
        break;
    case M_INST:
        f = inst[p];
        if (!f)
            st = opt_arena_alloc_tag(tp->half ? &ws : &tp->ar, &f, opt_backend_esize(be) * (size_t)n,
                                     tp->half ? OPT_MEM_WORKSPACE : OPT_MEM_PER_EXAMPLE);
        if (st == DP_OK && !inst[p]) st = opt_instantiate(f, om, tp, p);
        if (st == DP_OK) st = OPT_CALL(be, sqnorm_rows, sqg, f, B, om->numel[p]);
        if (st == DP_OK && !inst[p] && tp->half) {
            st = opt_arena_alloc_tag(&tp->ar, &inst[p], sizeof(uint16_t) * (size_t)n, OPT_MEM_PER_EXAMPLE);
            if (st == DP_OK) st = opt_prec_to_half(be, om->prec, inst[p], f, n);
        } else if (!inst[p] && !tp->half)
            inst[p] = f;
        break;
    case M_GHOST:
    case M_FUSEDNORM:
        st = opt_tape_lin_f32(&A, &G, &ws, om, tp, p);
        if (st == DP_OK && m == M_GHOST) st = OPT_CALL(be, ghost_sqnorm, sqg, A, G, B, tp->T, tp->din[p], tp->dout[p]);
        else if (st == DP_OK) st = OPT_CALL(be, fused_sqnorm, sqg, A, G, B, tp->T, tp->din[p], tp->dout[p]);
        break;
    default: break;
    }
    opt_arena_free(&ws);
    return st;
}

/* sp [numel] += sum_b cg[b] g_b of parameter p (mode m; M_FUSED1: nothing, done with the
 * clip factors); a half tape decodes what it reads into an f32 workspace. */
static dp_status accum_term(void *sp, const void *cg, void *const *inst, const opt_model *om, opt_tape *tp, int m,
                            int p) {
    opt_backend *be = om->be;
    const int64_t B = tp->B;
    opt_arena ws = {.be = be};
    const void *x, *A, *G;
    dp_status st = DP_OK;
    switch (m) {
    case M_DIRECT:
    case M_INST:
        st = opt_tape_f32_view(&ws, &x, om, tp->half, m == M_DIRECT ? tp->direct[p] : inst[p], B * om->numel[p]);
        if (st == DP_OK) st = OPT_CALL(be, clip_accum, sp, x, cg, B, om->numel[p]);
        break;
    case M_GHOST:
    case M_FUSEDNORM:
        st = opt_tape_lin_f32(&A, &G, &ws, om, tp, p);
        if (st == DP_OK) st = OPT_CALL(be, bk_gemm, sp, A, G, cg, B, tp->T, tp->din[p], tp->dout[p]);
        break;
    default: break;
    }
    opt_arena_free(&ws);
    return st;
}

/* Zero row b of every instantiated per-example gradient (a dropped or host-handled
 * example then adds an exact 0 even where its row held NaN/inf: 0 * NaN would be NaN). */
static dp_status zero_inst_row(const opt_model *om, void *const *inst, int half, int64_t b) {
    size_t es = half ? sizeof(uint16_t) : opt_backend_esize(om->be); /* half tape: 2-byte rows */
    for (int p = 0; p < om->np; p++)
        if (inst[p])
            DP_TRY(OPT_CALL(om->be, zero, (char *)inst[p] + es * (size_t)(b * om->numel[p]), es * (size_t)om->numel[p]));
    return DP_OK;
}

/* --checkpoint block: the per-example gradients of a block instantiated from its
 * recomputed tape inside the backward (opt_model.tape_hook), before the block's
 * activations are freed. */
static dp_status ckpt_ready(void *ctx, const opt_tape *tp, int first, int n) {
    opt_clip_ctx *k = ctx;
    local_state *ls = k->st;
    const opt_model *om = &k->s->om;
    for (int p = first; p < first + n; p++) {
        if (om->src[p] == OPT_SRC_DIRECT || ls->inst[p]) continue;
        DP_TRY(opt_arena_alloc_tag(&ls->ci, &ls->inst[p], opt_backend_esize(om->be) * (size_t)(tp->B * om->numel[p]),
                                   OPT_MEM_PER_EXAMPLE));
        DP_TRY(opt_instantiate(ls->inst[p], om, tp, p));
    }
    return DP_OK;
}

static dp_status local_begin(opt_clip_ctx *k, const dp_dataset *d, const int64_t *idx) {
    opt_model *om = &k->s->om;
    local_state *ls = dp_calloc(1, sizeof *ls);
    if (ls) ls->inst = dp_calloc((size_t)k->np, sizeof(void *));
    if (!ls || !ls->inst) { dp_free(ls); memset(&k->tp, 0, sizeof k->tp); return dp_error(DP_ERR_NOMEM, "engine: out of memory"); }
    ls->ci.be = k->s->be;
    k->st = ls;
    const opt_tape_hook hook = {k, ckpt_ready};
    if (om->checkpoint) om->tape_hook = &hook;
    dp_status st = opt_forward_backward(&k->tp, om, d, idx, k->Bc);
    om->tape_hook = NULL;
    return st;
}

static dp_status local_losses(opt_clip_ctx *k, double *loss) {
    return OPT_CALL(k->s->be, download_f64, loss, k->tp.loss, k->Bc);
}

/* the norm pass (everything but the single-pass fused layers), then the sums of the
 * single-pass fused layers saved: an example found special sends them back to two passes */
static dp_status local_norms(opt_clip_ctx *k) {
    opt_dpsgd *s = k->s;
    local_state *ls = k->st;
    const opt_model *om = &s->om;
    const size_t es = opt_backend_esize(s->be);
    for (int p = 0; p < k->np; p++)
        DP_TRY(norm_term(opt_dev_at(s, k->sq, s->groups.group_of[p] * k->Bc), ls->inst, om, &k->tp, k->mode[p], p));
    ls->fbak = dp_calloc((size_t)k->np, sizeof(void *));
    if (!ls->fbak) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    for (int p = 0; p < k->np; p++)
        if (k->mode[p] == M_FUSED1) {
            DP_TRY(opt_arena_alloc_tag(&k->tp.ar, &ls->fbak[p], es * (size_t)om->numel[p], OPT_MEM_WORKSPACE));
            DP_TRY(OPT_CALL(s->be, copy, ls->fbak[p], opt_dev_at(s, s->flat, s->voff[p]), es * (size_t)om->numel[p]));
        }
    return DP_OK;
}

/* group g's factors; a group whose only linear tensor is single-pass fused clips and
 * accumulates it here */
static dp_status local_factors(opt_clip_ctx *k, int g, double C, double gamma) {
    opt_dpsgd *s = k->s;
    const opt_model *om = &s->om;
    void *sqg = opt_dev_at(s, k->sq, g * k->Bc), *cg = opt_dev_at(s, k->cdev, g * k->Bc);
    int fused_p = -1;
    for (int p = 0; p < k->np; p++)
        if (k->mode[p] == M_FUSED1 && s->groups.group_of[p] == g) fused_p = p;
    if (fused_p < 0) return OPT_CALL(s->be, clip_factors, cg, sqg, C, s->cfg.clip_fn, gamma, k->Bc);
    opt_arena ws = {.be = s->be};
    const void *A, *Gr;
    dp_status st = opt_tape_lin_f32(&A, &Gr, &ws, om, &k->tp, fused_p);
    if (st == DP_OK)
        st = OPT_CALL(s->be, fused_clip_accum, opt_dev_at(s, s->flat, s->voff[fused_p]), sqg, cg, A, Gr, sqg, C,
                      s->cfg.clip_fn, gamma, k->Bc, k->tp.T, k->tp.din[fused_p], k->tp.dout[fused_p]);
    opt_arena_free(&ws);
    return st;
}

/* back to two passes for the single-pass fused layers */
static dp_status local_fallback(opt_clip_ctx *k) {
    opt_dpsgd *s = k->s;
    local_state *ls = k->st;
    const size_t es = opt_backend_esize(s->be);
    for (int p = 0; p < k->np; p++)
        if (k->mode[p] == M_FUSED1) {
            DP_TRY(OPT_CALL(s->be, copy, opt_dev_at(s, s->flat, s->voff[p]), ls->fbak[p], es * (size_t)s->om.numel[p]));
            k->mode[p] = M_FUSEDNORM;
        }
    return DP_OK;
}

static dp_status local_rows(opt_clip_ctx *k, double *h, int p) {
    local_state *ls = k->st;
    return opt_pe_download(h, &k->s->om, &k->tp, k->mode[p] == M_DIRECT ? k->tp.direct[p] : ls->inst[p], p);
}

static dp_status local_drop(opt_clip_ctx *k, int64_t b) {
    local_state *ls = k->st;
    DP_TRY(opt_tape_zero_example(&k->s->om, &k->tp, b));
    return zero_inst_row(&k->s->om, ls->inst, k->tp.half, b);
}

/* flat clipping by the weighted second backward (ghost clipping) unless the chunk holds a
 * dropped or special example (its forward may hold NaN/inf), a loss scale is on (its
 * weights would need S too) or the parameter gathers are collective (zero3: the choice is
 * per rank, the passes must be the same on every rank); else per parameter */
static dp_status local_accumulate(opt_clip_ctx *k, int any_bad) {
    opt_dpsgd *s = k->s;
    local_state *ls = k->st;
    const opt_model *om = &s->om;
    const int second_pass = s->norm->second_pass && k->G == 1 && !any_bad && !opt_fetch_collective(om) && s->ls_used == 1;
    if (second_pass) {
        void **gp = dp_calloc((size_t)k->np, sizeof(void *));
        if (!gp) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
        for (int p = 0; p < k->np; p++) gp[p] = opt_dev_at(s, s->flat, s->voff[p]);
        dp_status st = opt_backward_weighted(gp, om, &k->tp, k->cdev);
        dp_free(gp);
        return st;
    }
    for (int p = 0; p < k->np; p++) {
        void *cg = opt_dev_at(s, k->cdev, s->groups.group_of[p] * k->Bc), *sp = opt_dev_at(s, s->flat, s->voff[p]);
        DP_TRY(accum_term(sp, cg, ls->inst, om, &k->tp, k->mode[p], p)); /* M_FUSED1: done */
    }
    return DP_OK;
}

static dp_status local_add_rows(opt_clip_ctx *k, int p, const double *terms, int nb) {
    opt_dpsgd *s = k->s;
    const int64_t n = s->om.numel[p];
    void *dt = NULL, *sp = opt_dev_at(s, s->flat, s->voff[p]);
    DP_TRY(opt_arena_alloc_tag(&k->tp.ar, &dt, opt_backend_esize(s->be) * (size_t)(n + 1), OPT_MEM_WORKSPACE));
    for (int i = 0; i < nb; i++) {
        DP_TRY(OPT_CALL(s->be, upload_f64, dt, terms + (int64_t)i * n, n));
        DP_TRY(OPT_CALL(s->be, add, sp, sp, dt, n));
    }
    return DP_OK;
}

static dp_status local_grads(opt_clip_ctx *k, double *h, int p) {
    local_state *ls = k->st;
    return opt_pe_download(h, &k->s->om, &k->tp, ls->inst[p], p);
}

static void local_end(opt_clip_ctx *k) {
    local_state *ls = k->st;
    if (!ls) return;
    opt_arena_free(&ls->ci);
    dp_free(ls->inst);
    dp_free(ls->fbak);
    dp_free(ls);
    k->st = NULL;
}

const opt_norm_source opt_source_local = {"local", 1, local_begin, local_losses, local_norms, local_factors,
                                          local_fallback, local_rows, local_drop, local_accumulate, local_add_rows,
                                          local_grads, local_end};

/* optimized/dpsgd.c — DP-SGD on the engine (docs/engine.md): strategies, clipping
 * groups, noise modes, data-parallel shares and micro-batches. */
#include "optimized/dpsgd.h"
#include "common/alloc.h"
#include "optimized/opt_spec.h"
#include "optimized/ledger.h"
#include "optimized/shard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPT_NAME3_(ID, sym, name) name,
#define OPT_NAME2_(ID, name) name,
const char *const opt_strategy_names[] = {OPT_NORM_STRATEGIES(OPT_NAME3_) NULL};
const char *const opt_sharding_names[] = {OPT_SHARDINGS(OPT_NAME3_) NULL};
const char *const opt_bug_names[] = {OPT_BUGS(OPT_NAME2_) NULL};
#undef OPT_NAME3_
#undef OPT_NAME2_
#define OPT_TABLE_(ID, sym, name) &opt_norm_##sym,
const opt_norm_strategy *const opt_norm_strategies[] = {OPT_NORM_STRATEGIES(OPT_TABLE_)};
#undef OPT_TABLE_
#define OPT_TABLE_(ID, sym, name) &opt_shard_##sym,
const opt_shard_strategy *const opt_shard_strategies[] = {OPT_SHARDINGS(OPT_TABLE_)};
#undef OPT_TABLE_
const char *const opt_mixed_rule_names[] = {"flop", "memory", NULL};
const char *const opt_noise_mode_names[] = {"single", "shares", NULL};
const char *const opt_cp_attention_names[] = {"allgather", "ring", NULL};
const char *const opt_cp_pattern_names[] = {"input", "output", NULL};
const char *const opt_cp_overlap_names[] = {"on", "off", NULL};
const char *const opt_checkpoint_names[] = {"none", "block", NULL};

void opt_rank_share(int64_t *lo, int64_t *hi, int64_t b, int rank, int size) {
    *lo = b * rank / size;
    *hi = b * (rank + 1) / size;
}

#define dev_at opt_dev_at

/* The engine's own pre-check of the options (docs/engine.md "Non-finite training"; not
 * the reference's code): noise std, largest private gradient element, first update. The
 * Gaussian sampler's largest |z| is the Box-Muller radius at u1 = 2^-53, sqrt(106 ln 2)
 * (docs/rng.md). */
static dp_status opt_dpsgd_bounds(const dp_dpsgd_config *c, double c_total) {
    const double zmax = sqrt(106.0 * log(2.0));
    const double std = c->sigma * c_total;
    if (!isfinite(std))
        return dp_error(DP_ERR_INVALID, "engine: the noise std --sigma %g x C_total %g is not finite", c->sigma, c_total);
    const double gbound = ((double)c->n * c_total + std * zmax) / (c->q * (double)c->n);
    if (!isfinite(std * zmax) || !isfinite(gbound))
        return dp_error(DP_ERR_INVALID, "engine: --sigma %g, C_total %g, --q %g and N = %lld bound the private gradient by "
                        "a non-finite value", c->sigma, c_total, c->q, (long long)c->n);
    const double upd = c->opt == DP_OPT_SGD ? c->lr * (gbound / (1.0 - c->momentum)) : c->lr / (1.0 - c->beta1);
    if (!isfinite(upd) || (c->opt == DP_OPT_ADAMW && !isfinite(gbound * gbound)))
        return dp_error(DP_ERR_INVALID, "engine: --lr %g with a private gradient bound %g overflows the parameter update",
                        c->lr, gbound);
    return DP_OK;
}

/* First element of vals[p] (the shapes of m's parameters) that is not finite while
 * prev (NULL: every element) is finite there; *pp = -1 when none. */
static void first_nonfinite(int *pp, int64_t *pe, const dp_model *m, double *const *vals, const dp_model *prev) {
    *pp = -1;
    for (int p = 0; p < m->nparams; p++)
        for (int64_t e = 0; e < m->params[p].numel; e++)
            if (!isfinite(vals[p][e]) && (!prev || isfinite(prev->params[p].data[e]))) { *pp = p; *pe = e; return; }
}

dp_status opt_check_update_finite(const dp_model *after, const dp_model *before, int64_t step) {
    int p;
    int64_t e;
    double **vals = dp_calloc((size_t)after->nparams + 1, sizeof *vals);
    if (!vals) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    for (int q = 0; q < after->nparams; q++) vals[q] = after->params[q].data;
    first_nonfinite(&p, &e, after, vals, before);
    dp_free(vals);
    if (p < 0) return DP_OK;
    return dp_error(DP_ERR_INVALID, "step %lld: the update made parameter tensor '%s' (element %lld) non-finite (%g): "
                    "--lr and the private gradient overflow", (long long)step, after->params[p].name, (long long)e,
                    after->params[p].data[e]);
}

dp_status opt_dpsgd_init(opt_dpsgd *s, opt_backend *be, const dp_dpsgd_config *cfg, const opt_dp_options *o,
                         const dp_model *m) {
    memset(s, 0, sizeof *s);
    DP_TRY(opt_dpsgd_config_check(cfg));
    if (cfg->precision != DP_PREC_DOUBLE)
        return dp_error(DP_ERR_NOT_SUPPORTED, "--precision mpfr is a reference-only mode (the engine computes in %s)",
                        be->dtype == DP_F64 ? "f64" : "f32");
    if (opt_prec_is_half(o->prec)) DP_TRY(opt_prec_check(be, o, m));
    if (m->nparams >= (1 << 16))
        return dp_error(DP_ERR_INVALID, "too many parameter tensors (%d) for noise lanes (< 2^16)", m->nparams);
    if (o->strategy < 0 || o->strategy >= OPT_STRAT_COUNT) return dp_error(DP_ERR_USAGE, "--strategy: unknown strategy");
    if (o->sharding < 0 || o->sharding >= OPT_SHARD_COUNT) return dp_error(DP_ERR_USAGE, "--sharding: unknown stage");
    s->norm = opt_norm_strategies[o->strategy];
    s->shard = opt_shard_strategies[o->sharding];
    const int cp_path = o->cp > 1 || o->cp_path;
    if (cp_path) { DP_TRY(opt_cp_check(cfg, o, m)); s->shard = o->sharding == OPT_SHARD_ZERO2 ? &opt_shard_cp_zero2 : &opt_shard_cp; }
    s->hooks = opt_bug_hooks(o->bug);
    if (!cp_path && (s->hooks->cp_drop_partial || s->hooks->cp_local_norms || s->hooks->cp_full_noise ||
                     s->hooks->cp_zero2_local_noise))
        return dp_error(DP_ERR_USAGE, "--inject-bug %s applies to context parallelism only (--cp M > 1, or --cp 1 with "
                        "--cp-attention)",
                        opt_bug_names[o->bug]);
    if (s->hooks->master_half && !opt_prec_is_half(o->prec))
        return dp_error(DP_ERR_USAGE, "--inject-bug master-half applies to --precision bf16 or fp16 only");
    if (s->hooks->ckpt_keep_forward && !o->checkpoint)
        return dp_error(DP_ERR_USAGE, "--inject-bug %s applies to --checkpoint block only", opt_bug_names[o->bug]);
    if (o->checkpoint && m->cfg.kind != DP_LLAMA)
        return dp_error(DP_ERR_USAGE, "--checkpoint block: the mlp has no transformer blocks to checkpoint (use --model llama)");
    if (o->checkpoint && o->strategy != OPT_STRAT_GRAD_SAMPLE)
        return dp_error(DP_ERR_USAGE, "--checkpoint block needs --strategy grad-sample (got %s): the other strategies read "
                        "the whole tape after the backward, but a checkpointed block's tape lives only until its "
                        "per-example gradients are instantiated", opt_strategy_names[o->strategy]);
    if (o->checkpoint && o->sharding == OPT_SHARD_ZERO3)
        return dp_error(DP_ERR_USAGE, "--checkpoint block with --sharding zero3 is not implemented");
    if (s->shard->shard_states && o->noise_mode == OPT_NOISE_SHARES)
        return dp_error(DP_ERR_USAGE, "--noise-mode shares applies to --sharding replicated only (got --sharding %s)",
                        s->shard->name);
    int64_t total = 0;
    for (int p = 0; p < m->nparams; p++) total += m->params[p].numel;
    DP_TRY(opt_parallel_make(&s->par, be, o->dp, o->cp > 0 ? o->cp : 1));
    const int N = s->par.dp;
    if (s->shard->shard_states && total < N) {
        opt_parallel_free(&s->par);
        return dp_error(DP_ERR_USAGE, "--sharding %s --dp %d: %d shards but the model has only %lld parameters",
                        s->shard->name, N, N, (long long)total);
    }
    if (s->shard->shard_states && !be->ops.allgather) {
        opt_parallel_free(&s->par);
        return dp_error(DP_ERR_USAGE, "--sharding %s needs the backend operation 'allgather', which backend '%s' lacks",
                        s->shard->name, be->name);
    }
    s->be = be;
    s->cfg = *cfg;
    s->o = *o;
    s->total = total;
    s->chunk = s->shard->shard_states ? (total + N - 1) / N : total;
    if (s->shard->shard_states) opt_shard_range(&s->lo, &s->hi, total, s->chunk, s->par.dp_rank);
    else { s->lo = 0; s->hi = total; }
    s->zoff = s->shard->shard_states ? s->chunk * N : total;
    s->zlo = s->shard->noise_partition ? s->lo : 0;
    dp_status st = opt_clip_groups_make(&s->groups, cfg, m);
    if (st != DP_OK) { opt_parallel_free(&s->par); return st; }
    st = opt_ls_init(s);
    if (st != DP_OK) { opt_clip_groups_free(&s->groups); opt_parallel_free(&s->par); return st; }
    st = opt_dpsgd_bounds(cfg, s->groups.c_total);
    if (st != DP_OK) { opt_clip_groups_free(&s->groups); opt_parallel_free(&s->par); return st; }
    st = opt_model_create(&s->om, be, m);
    if (st != DP_OK) { opt_clip_groups_free(&s->groups); opt_parallel_free(&s->par); return st; }
    s->om.prec = o->prec;
    s->om.pstats = &s->pstats;
    s->om.checkpoint = o->checkpoint;
    s->om.ckpt_keep_forward = s->hooks->ckpt_keep_forward;
    s->off = dp_calloc((size_t)m->nparams, sizeof *s->off);
    if (!s->off) { opt_dpsgd_free(s); return dp_error(DP_ERR_NOMEM, "engine: out of memory"); }
    for (int p = 1; p < m->nparams; p++) s->off[p] = s->off[p - 1] + m->params[p - 1].numel;
    if ((st = s->shard->setup(s)) != DP_OK) { opt_dpsgd_free(s); return st; }
    int64_t zlen = s->shard->noise_partition ? s->chunk : s->zoff; /* Z: the partition or all positions */
    size_t es = opt_backend_esize(be);
    if ((st = opt_mem_alloc(be, &s->flat, es * (size_t)(s->zoff + zlen), OPT_MEM_GRADS)) != DP_OK ||
        (st = opt_mem_alloc(be, &s->pgrad, es * (size_t)s->chunk, OPT_MEM_GRADS)) != DP_OK ||
        (st = opt_mem_alloc(be, &s->m1, es * (size_t)s->chunk, OPT_MEM_OPTSTATE)) != DP_OK ||
        (cfg->opt != DP_OPT_SGD && (st = opt_mem_alloc(be, &s->m2, es * (size_t)s->chunk, OPT_MEM_OPTSTATE)) != DP_OK)) {
        opt_dpsgd_free(s);
        return st;
    }
    return DP_OK;
}

void opt_dpsgd_free(opt_dpsgd *s) {
    if (!s->be) return;
    if (s->shard) s->shard->teardown(s);
    void *bufs[5] = {s->flat, s->pgrad, s->m1, s->m2, s->master};
    for (int i = 0; i < 5; i++) opt_mem_free(s->be, bufs[i]);
    if (s->om.be) opt_model_free(&s->om);
    opt_clip_groups_free(&s->groups);
    opt_parallel_free(&s->par);
    dp_free(s->off);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- one chunk */
enum { M_DIRECT = OPT_LM_DIRECT, M_INST = OPT_LM_INST, M_GHOST = OPT_LM_GHOST, M_FUSEDNORM = OPT_LM_FUSEDNORM,
       M_FUSED1 = OPT_LM_FUSED1 };

/* Linear layer (T, d, p): ghost norm is chosen by the rule (docs/engine.md). */
int opt_mixed_pick_ghost(int rule, int64_t T, int64_t d, int64_t p) {
    if (rule == OPT_MIXED_MEMORY) return 2.0 * (double)T * (double)T <= (double)p * (double)d;
    return (double)T < (double)p * (double)d / (double)(p + d);
}

/* out [B, numel] = per-example gradient of parameter pi (linear: G_b^T A_b batched). */
#define instantiate opt_instantiate
dp_status opt_instantiate(void *out, const opt_model *om, const opt_tape *tp, int pi) {
    return opt_instantiate_examples(out, om, tp, pi, 0, tp->B);
}

/* out [ne, numel] = the per-example gradients of examples [e0, e0 + ne) of parameter pi. */
dp_status opt_instantiate_examples(void *out, const opt_model *om, const opt_tape *tp, int pi, int64_t e0, int64_t ne) {
    opt_backend *be = om->be;
    const size_t es = opt_backend_esize(be);
    int64_t T = tp->T, n = om->numel[pi];
    if (ne <= 0) return DP_OK;
    /* a half tape's 2-byte elements are decoded (docs/precision.md section 2) */
    if (om->src[pi] == OPT_SRC_DIRECT && tp->half)
        return opt_prec_from_half(be, om->prec, out, (const char *)tp->direct[pi] + 2 * (size_t)(e0 * n), ne * n);
    if (om->src[pi] == OPT_SRC_DIRECT)
        return OPT_CALL(be, copy, out, (const char *)tp->direct[pi] + es * (size_t)(e0 * n), es * (size_t)(ne * n));
    int64_t d = tp->din[pi], p = tp->dout[pi];
    /* out_b [p, d] = G_b^T [p, T] A_b [T, d] (a half tape decoded into workspace) */
    opt_arena ws = {.be = be};
    const void *A, *G;
    dp_status st = opt_tape_lin_f32(&A, &G, &ws, om, tp, pi);
    if (st == DP_OK)
        st = OPT_CALL(be, gemm, out, (const char *)G + es * (size_t)(e0 * T * p), (const char *)A + es * (size_t)(e0 * T * d),
                      1, 0, p, d, T, 1.0, 0.0, ne, T * p, T * d, p * d);
    opt_arena_free(&ws);
    DP_TRY(st);
    if (om->src[pi] == OPT_SRC_BOTH) {
        const void *dir;
        ws = (opt_arena){.be = be};
        st = opt_tape_f32_view(&ws, &dir, om, tp->half, tp->direct[pi], tp->B * n);
        if (st == DP_OK) st = OPT_CALL(be, add, out, out, (const char *)dir + es * (size_t)(e0 * n), ne * p * d);
        opt_arena_free(&ws);
        DP_TRY(st);
    }
    /* mixed precision, point P: an instantiated per-example gradient is held in the half
     * type (docs/precision.md) */
    return opt_prec_round(om, out, ne * p * d, OPT_PREC_KIND_PE);
}

/* Zero every tape slice of example b (its terms then contribute nothing). */
static dp_status zero_example(const opt_model *om, opt_tape *tp, int64_t b) {
    opt_backend *be = om->be;
    size_t es = opt_backend_esize(be), el = tp->half ? sizeof(uint16_t) : es; /* half tape: 2-byte A, G */
    int64_t T = tp->T;
    for (int p = 0; p < om->np; p++) {
        if (om->src[p] != OPT_SRC_DIRECT && tp->A[p]) { /* (--checkpoint block: freed blocks are NULL) */
            DP_TRY(OPT_CALL(be, zero, (char *)tp->A[p] + el * (size_t)(b * T * tp->din[p]), el * (size_t)(T * tp->din[p])));
            DP_TRY(OPT_CALL(be, zero, (char *)tp->G[p] + el * (size_t)(b * T * tp->dout[p]), el * (size_t)(T * tp->dout[p])));
        }
        if (om->src[p] != OPT_SRC_LINEAR)
            DP_TRY(OPT_CALL(be, zero, (char *)tp->direct[p] + el * (size_t)(b * om->numel[p]), el * (size_t)om->numel[p]));
    }
    return DP_OK;
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

/* host [B, numel] = the per-example gradient of p: held (f32, or a 2-byte container on a
 * half tape) or, held NULL, instantiated from the tape into a per-example buffer of its
 * arena. */
static dp_status pe_download(double *host, const opt_model *om, opt_tape *tp, const void *held, int p) {
    const int64_t n = tp->B * om->numel[p];
    if (!held) {
        void *buf;
        DP_TRY(opt_arena_alloc_tag(&tp->ar, &buf, opt_backend_esize(om->be) * (size_t)n, OPT_MEM_PER_EXAMPLE));
        DP_TRY(instantiate(buf, om, tp, p));
        return OPT_CALL(om->be, download_f64, host, buf, n);
    }
    opt_arena ws = {.be = om->be};
    const void *v;
    dp_status st = opt_tape_f32_view(&ws, &v, om, tp->half, held, n);
    if (st == DP_OK) st = OPT_CALL(om->be, download_f64, host, v, n);
    opt_arena_free(&ws);
    return st;
}

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
        if (st == DP_OK && !inst[p]) st = instantiate(f, om, tp, p);
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

typedef opt_chunk_out chunk_out;

/* --checkpoint block: the per-example gradients of a block instantiated from its
 * recomputed tape inside the backward (opt_model.tape_hook), before the block's
 * activations are freed. */
typedef struct {
    const opt_model *om;
    void **inst;
    opt_arena ar;
} ckpt_inst;

static dp_status ckpt_ready(void *ctx, const opt_tape *tp, int first, int n) {
    ckpt_inst *ci = ctx;
    const opt_model *om = ci->om;
    for (int p = first; p < first + n; p++) {
        if (om->src[p] == OPT_SRC_DIRECT || ci->inst[p]) continue;
        DP_TRY(opt_arena_alloc_tag(&ci->ar, &ci->inst[p], opt_backend_esize(om->be) * (size_t)(tp->B * om->numel[p]),
                                   OPT_MEM_PER_EXAMPLE));
        DP_TRY(instantiate(ci->inst[p], om, tp, p));
    }
    return DP_OK;
}

static dp_status run_chunk(chunk_out *co, opt_dpsgd *s, const dp_dataset *d, const int64_t *idx, int64_t Bc) {
    opt_backend *be = s->be;
    opt_model *om = &s->om;
    const dp_clip_groups *gr = &s->groups;
    const int G = gr->ngroups, np = om->np;
    size_t es = opt_backend_esize(be);
    opt_tape tp;
    void **inst = dp_calloc((size_t)np, sizeof(void *));
    ckpt_inst ci = {om, inst, {.be = be}};
    const opt_tape_hook hook = {&ci, ckpt_ready};
    if (om->checkpoint) om->tape_hook = &hook;
    if (!inst) memset(&tp, 0, sizeof tp);
    dp_status st = inst ? opt_forward_backward(&tp, om, d, idx, Bc) : dp_error(DP_ERR_NOMEM, "engine: out of memory");
    om->tape_hook = NULL;
    int *mode = dp_calloc((size_t)np, sizeof(int));
    int *nlin = dp_calloc((size_t)G, sizeof(int));
    int *special = dp_calloc((size_t)Bc + 1, sizeof(int)), changed = 0;
    double **hrow = NULL;      /* [np] -> [Bc, numel] host rows (dropped / special examples) */
    double *hcx = dp_malloc(sizeof(double) * (size_t)(G * Bc + 1)); /* exported factors of special examples */
    void **fbak = NULL;
    double *hsq = dp_malloc(sizeof(double) * (size_t)(G * Bc + 1)), *hc = dp_malloc(sizeof(double) * (size_t)(G * Bc + 1));
    void *sq = NULL, *cdev = NULL;
    if (!mode || !inst || !nlin || !hsq || !hc || !special || !hcx) { if (st == DP_OK) st = dp_error(DP_ERR_NOMEM, "engine: out of memory"); }
    /* loss scaling: the tape holds S x the gradients; clipping at S C (and gamma S) gives the
     * unscaled factors exactly; exported norms and gradients / S (ls_clip_unscaled: a
     * test-only bug clips at C and exports what it saw) */
    const double lsS = opt_ls_clip_scale(s), lsE = opt_ls_export_scale(s);
    if (st == DP_OK) st = opt_arena_alloc_tag(&tp.ar, &sq, es * (size_t)(G * Bc + 1), OPT_MEM_WORKSPACE);   /* [G, Bc] */
    if (st == DP_OK) st = opt_arena_alloc_tag(&tp.ar, &cdev, es * (size_t)(G * Bc + 1), OPT_MEM_WORKSPACE); /* [G, Bc] */
    if (st != DP_OK) goto done;

    /* ---- mode of every parameter ---- */
    for (int p = 0; p < np; p++)
        if (om->src[p] == OPT_SRC_LINEAR) nlin[gr->group_of[p]]++;
        else if (om->src[p] == OPT_SRC_BOTH) nlin[gr->group_of[p]] += 2; /* never single-pass fused */
    for (int p = 0; p < np; p++) {
        if (om->src[p] == OPT_SRC_DIRECT) { mode[p] = M_DIRECT; continue; }
        if (om->src[p] == OPT_SRC_BOTH) { mode[p] = M_INST; continue; }
        int alone = nlin[gr->group_of[p]] == 1 && s->hooks->fused_single_pass;
        mode[p] = (int)s->norm->linear_mode(&s->o, tp.T, tp.din[p], tp.dout[p], alone);
    }

    /* ---- losses; an example with a non-finite loss is dropped (c = 0, its terms zeroed
     * after its norms are recorded; single-pass fused layers then redo their sums) ---- */
    int any_fused1 = 0;
    for (int p = 0; p < np; p++) any_fused1 |= mode[p] == M_FUSED1;
    st = OPT_CALL(be, download_f64, co->loss, tp.loss, Bc);
    for (int64_t b = 0; st == DP_OK && b < Bc; b++) {
        co->dropped[b] = !isfinite(co->loss[b]);
    }

    /* ---- norm pass (everything but the single-pass fused layers) ---- */
    if (st == DP_OK) st = OPT_CALL(be, zero, sq, es * (size_t)(G * Bc));
    for (int p = 0; st == DP_OK && p < np; p++) {
        void *sqg = (char *)sq + es * (size_t)(gr->group_of[p] * Bc);
        st = norm_term(sqg, inst, om, &tp, mode[p], p);
    }
    void *const sum0 = s->flat;
    /* the sums of single-pass fused layers are saved: an example found special below
     * (non-finite squared norm) sends those layers back to the two-pass path */
    fbak = dp_calloc((size_t)np, sizeof(void *));
    if (!fbak && st == DP_OK) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
    for (int p = 0; st == DP_OK && p < np; p++)
        if (mode[p] == M_FUSED1) {
            st = opt_arena_alloc_tag(&tp.ar, &fbak[p], es * (size_t)om->numel[p], OPT_MEM_WORKSPACE);
            if (st == DP_OK) st = OPT_CALL(be, copy, fbak[p], dev_at(s, sum0, s->off[p]), es * (size_t)om->numel[p]);
        }
    /* ---- clip factors (single-pass fused layers clip and accumulate here) ---- */
    for (int g = 0; st == DP_OK && g < G; g++) {
        void *sqg = (char *)sq + es * (size_t)(g * Bc), *cg = (char *)cdev + es * (size_t)(g * Bc);
        int fused_p = -1;
        for (int p = 0; p < np; p++)
            if (mode[p] == M_FUSED1 && gr->group_of[p] == g) fused_p = p;
        if (fused_p >= 0) {
            opt_arena ws = {.be = be};
            const void *A, *Gr;
            st = opt_tape_lin_f32(&A, &Gr, &ws, om, &tp, fused_p);
            if (st == DP_OK)
                st = OPT_CALL(be, fused_clip_accum, dev_at(s, sum0, s->off[fused_p]), sqg, cg, A, Gr, sqg,
                              lsS * gr->thresh[g], (opt_clip_fn)s->cfg.clip_fn, lsS * s->cfg.gamma, Bc, tp.T,
                              tp.din[fused_p], tp.dout[fused_p]);
            opt_arena_free(&ws);
        } else
            st = OPT_CALL(be, clip_factors, cg, sqg, lsS * gr->thresh[g], (opt_clip_fn)s->cfg.clip_fn, lsS * s->cfg.gamma, Bc);
    }
    /* ---- special examples: a finite loss but a non-finite squared group norm. Either a
     * gradient element is not finite (dropped, as the reference), or the squares / ghost
     * Gram products overflowed for a finite gradient: then the norms follow the
     * definition of docs/dpsgd.md step 4 (opt_norms_double, scaled form), computed on the host from
     * the example's instantiated gradient, and its clipped terms are added from it.
     * Every dropped or special example then has its tape and instantiated rows zeroed and
     * c = 0 in the batched path (docs/engine.md "Dropped and overflowing examples"). ---- */
    if (st == DP_OK) st = OPT_CALL(be, download_f64, hsq, sq, G * Bc);
    if (st == DP_OK) st = OPT_CALL(be, download_f64, hc, cdev, G * Bc);
    int nspecial = 0;
    for (int64_t b = 0; st == DP_OK && b < Bc; b++) {
        int bad = 0;
        for (int g = 0; g < G; g++) bad |= !isfinite(hsq[g * Bc + b]);
        special[b] = bad && !co->dropped[b];
        nspecial += special[b];
    }
    int any_bad = nspecial;
    for (int64_t b = 0; b < Bc; b++) any_bad |= co->dropped[b];
    if (st == DP_OK && any_bad && any_fused1) /* back to two passes for the fused layers */
        for (int p = 0; st == DP_OK && p < np; p++)
            if (mode[p] == M_FUSED1) {
                st = OPT_CALL(be, copy, dev_at(s, sum0, s->off[p]), fbak[p], es * (size_t)om->numel[p]);
                mode[p] = M_FUSEDNORM;
            }
    /* host rows of every dropped or special example: hrow[p] [Bc, numel] (only those rows used) */
    if (st == DP_OK && any_bad) {
        hrow = dp_calloc((size_t)np, sizeof(double *));
        if (!hrow) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
        for (int p = 0; st == DP_OK && p < np; p++) {
            hrow[p] = dp_malloc(sizeof(double) * (size_t)(Bc * om->numel[p]));
            if (st == DP_OK && !hrow[p]) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
            if (st == DP_OK) st = pe_download(hrow[p], om, &tp, mode[p] == M_DIRECT ? tp.direct[p] : inst[p], p);
        }
    }
    dp_model hm = {0}; /* a shape-only model for opt_norms_double */
    if (st == DP_OK && nspecial) {
        hm.nparams = np;
        hm.params = dp_calloc((size_t)np, sizeof(dp_param));
        if (!hm.params) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
        for (int p = 0; st == DP_OK && p < np; p++) hm.params[p].numel = om->numel[p];
    }
    for (int64_t b = 0; st == DP_OK && b < Bc; b++) {
        /* exported norms: sqrt of the squared ones (total: their sum in group order) */
        double tot = 0;
        for (int g = 0; g < G; g++) {
            tot += hsq[g * Bc + b];
            co->gn[b * (G + 1) + g] = sqrt(hsq[g * Bc + b]);
        }
        co->gn[b * (G + 1) + G] = sqrt(tot);
        if (special[b]) {
            double *gi[np > 0 ? np : 1];
            int fin = 1;
            for (int p = 0; p < np; p++) {
                gi[p] = hrow[p] + b * om->numel[p];
                for (int64_t e = 0; e < om->numel[p]; e++) fin &= isfinite(gi[p][e]) != 0;
            }
            if (!fin) { special[b] = 0; co->dropped[b] = 1; }
            else {
                st = opt_norms_double(&co->gn[b * (G + 1) + G], &co->gn[b * (G + 1)], &hm, gr, gi, 1);
                for (int g = 0; g < G; g++)
                    hcx[g * Bc + b] = opt_clip_factor((dp_clip_fn)s->cfg.clip_fn, co->gn[b * (G + 1) + g],
                                                      lsS * gr->thresh[g], lsS * s->cfg.gamma);
            }
        }
        if (co->dropped[b] || special[b]) {
            if (st == DP_OK) st = zero_example(om, &tp, b);
            if (st == DP_OK) st = zero_inst_row(om, inst, tp.half, b);
            for (int g = 0; g < G; g++) hc[g * Bc + b] = 0.0;
            changed = 1;
        }
    }
    dp_free(hm.params);
    for (int64_t i = 0; lsE != 1 && i < Bc * (G + 1); i++) co->gn[i] /= lsE;
    if (st == DP_OK) s->hooks->factors(hc, co->dropped, G, Bc); /* identity unless a test-only bug (bugs.c) */
    if (st == DP_OK && (changed || s->hooks != &opt_hooks_correct)) st = OPT_CALL(be, upload_f64, cdev, hc, G * Bc);

    /* ---- clipped sums ---- */
    int any_drop = 0;
    for (int64_t b = 0; b < Bc; b++) any_drop |= co->dropped[b] | special[b];
    /* the weighted second pass is a per-rank choice (any_drop): not with per-layer
     * parameter gathers (zero3), whose passes must be the same on every rank */
    int second_pass = s->norm->second_pass && G == 1 && !any_drop && !opt_fetch_collective(om) && s->ls_used == 1;
    if (st == DP_OK && second_pass) {
        void **gp = dp_calloc((size_t)np, sizeof(void *));
        if (!gp) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
        for (int p = 0; st == DP_OK && p < np; p++) gp[p] = dev_at(s, sum0, s->off[p]);
        if (st == DP_OK) st = opt_backward_weighted(gp, om, &tp, cdev);
        dp_free(gp);
    }
    for (int p = 0; st == DP_OK && !second_pass && p < np; p++) {
        void *cg = (char *)cdev + es * (size_t)(gr->group_of[p] * Bc), *sp = dev_at(s, sum0, s->off[p]);
        st = accum_term(sp, cg, inst, om, &tp, mode[p], p); /* M_FUSED1: done */
    }

    /* ---- special examples: their clipped terms c * g_b, computed on the host ---- */
    for (int p = 0; st == DP_OK && nspecial && p < np; p++) {
        int64_t n = om->numel[p];
        double *t = dp_malloc(sizeof(double) * (size_t)(n + 1));
        void *dt = NULL;
        if (!t) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
        if (st == DP_OK) st = opt_arena_alloc_tag(&tp.ar, &dt, es * (size_t)(n + 1), OPT_MEM_WORKSPACE);
        for (int64_t b = 0; st == DP_OK && b < Bc; b++) {
            if (!special[b]) continue;
            double cb = hcx[gr->group_of[p] * Bc + b];
            for (int64_t e = 0; e < n; e++) t[e] = cb * hrow[p][b * n + e];
            st = OPT_CALL(be, upload_f64, dt, t, n);
            if (st == DP_OK) st = OPT_CALL(be, add, dev_at(s, sum0, s->off[p]), dev_at(s, sum0, s->off[p]), dt, n);
        }
        dp_free(t);
    }

    /* ---- host copies: [b, G] layout as the reference ---- */
    for (int64_t b = 0; st == DP_OK && b < Bc; b++)
        for (int g = 0; g < G; g++) co->c[b * G + g] = special[b] ? hcx[g * Bc + b] : hc[g * Bc + b];
    if (co->grad) {
        for (int p = 0; st == DP_OK && p < np; p++) {
            st = pe_download(co->grad[p], om, &tp, inst[p], p);
            /* rows zeroed above: export the gradients as they were */
            for (int64_t b = 0; st == DP_OK && hrow && b < Bc; b++)
                if (co->dropped[b] || special[b])
                    memcpy(co->grad[p] + b * om->numel[p], hrow[p] + b * om->numel[p], sizeof(double) * (size_t)om->numel[p]);
            for (int64_t e = 0; lsE != 1 && e < Bc * om->numel[p]; e++) co->grad[p][e] /= lsE;
        }
    }
done:
    opt_tape_free(&tp);
    opt_arena_free(&ci.ar);
    dp_free(mode); dp_free(inst); dp_free(nlin); dp_free(hsq); dp_free(hc); dp_free(special); dp_free(hcx); dp_free(fbak);
    if (hrow) { for (int p = 0; p < np; p++) dp_free(hrow[p]); dp_free(hrow); }
    return st;
}

/* ---------------------------------------------------------------- gathering */
/* Every rank contributes n_local items of `each` bytes; rank 0 (and every rank) gets
 * the concatenation in rank order into *out (malloc'd). */
static dp_status gather(opt_dpsgd *s, void **out, const void *mine, size_t nbytes) {
    size_t len = 0; /* under CP the ranks of a CP group hold the same examples: its rank 0 gives them */
    return OPT_CALL(s->be, allgatherv_bytes, out, &len, mine, s->par.cp_rank == 0 ? nbytes : 0);
}

/* The engine's own check of the downloaded private gradient hp [total] (docs/engine.md
 * "Non-finite training"). */
static dp_status pgrad_finite(const opt_dpsgd *s, const double *hp, int64_t step) {
    for (int p = 0; p < s->om.np; p++)
        for (int64_t e = 0; e < s->om.numel[p]; e++)
            if (!isfinite(hp[s->off[p] + e]))
                return dp_error(DP_ERR_INVALID, "step %lld: the private gradient of parameter tensor '%s' (element %lld) "
                                "is not finite (%g): the hyperparameters overflow", (long long)step, s->om.name[p],
                                (long long)e, hp[s->off[p] + e]);
    return DP_OK;
}

/* ---------------------------------------------------------------- step */
dp_status opt_dpsgd_step(dp_dpsgd_step_out *out, opt_dpsgd *s, const dp_dataset *d, int64_t step) {
    dp_dpsgd_step_free(out);
    memset(out, 0, sizeof *out);
    opt_backend *be = s->be;
    opt_model *om = &s->om;
    const dp_dpsgd_config *c = &s->cfg;
    const int G = s->groups.ngroups, np = om->np, R = s->par.dp, rank = s->par.dp_rank;
    size_t es = opt_backend_esize(be);
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %lld out of range", (long long)step);
    if (d->n != c->n) return dp_error(DP_ERR_INVALID, "dataset has %lld examples, config says %lld", (long long)d->n, (long long)c->n);

    int64_t *idx = dp_malloc(sizeof(int64_t) * (size_t)(c->n + 1));
    if (!idx) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    int64_t b = 0;
    dp_status st = opt_poisson(idx, &b, c->key, step, c->q, c->n); /* global, same on every rank */
    int64_t lo, hi;
    opt_rank_share(&lo, &hi, b, rank, R);
    int64_t nl = hi - lo;
    chunk_out co = {0};
    co.loss = dp_malloc(sizeof(double) * (size_t)(nl + 1));
    co.gn = dp_malloc(sizeof(double) * (size_t)(nl * (G + 1) + 1));
    co.c = dp_malloc(sizeof(double) * (size_t)(nl * G + 1));
    co.dropped = dp_calloc((size_t)(nl + 1), sizeof(int));
    double **pgr = NULL;
    if (s->o.keep_per_sample) {
        pgr = dp_calloc((size_t)np, sizeof(double *));
        for (int p = 0; pgr && p < np; p++) {
            pgr[p] = dp_malloc(sizeof(double) * (size_t)(nl * om->numel[p] + 1));
            if (!pgr[p]) { for (int q = 0; q < p; q++) dp_free(pgr[q]); dp_free(pgr); pgr = NULL; st = DP_ERR_NOMEM; break; }
        }
        if (!pgr && st == DP_OK) st = DP_ERR_NOMEM;
    }
    if (!co.loss || !co.gn || !co.c || !co.dropped) st = DP_ERR_NOMEM;
    if (st == DP_ERR_NOMEM) dp_error(DP_ERR_NOMEM, "engine: out of memory");
    if (st == DP_OK) st = OPT_CALL(be, zero, s->flat, es * (size_t)(s->zoff + (s->shard->noise_partition ? s->chunk : s->zoff)));

    memset(&s->pstats, 0, sizeof s->pstats);
    s->ls_used = s->ls_S > 0 ? s->ls_S : 1;
    s->om.loss_scale = s->ls_used;
    /* micro-batches: the local share in k contiguous chunks; sums carry across chunks */
    int64_t k = c->micro_batches;
    double **cg = pgr ? dp_calloc((size_t)np, sizeof(double *)) : NULL;
    for (int64_t j = 0; st == DP_OK && j < k; j++) {
        int64_t clo = nl * j / k, chi = nl * (j + 1) / k, Bc = chi - clo;
        /* with per-layer parameter gathers (zero3) every rank runs every chunk, empty or
         * not, so that the gathers stay collective */
        if (Bc == 0 && !opt_fetch_collective(om)) continue;
        chunk_out cc = {co.loss + clo, co.gn + clo * (G + 1), co.c + clo * G, co.dropped + clo, NULL};
        if (pgr) {
            if (!cg) { st = dp_error(DP_ERR_NOMEM, "engine: out of memory"); break; }
            for (int p = 0; p < np; p++) cg[p] = pgr[p] + clo * om->numel[p];
            cc.grad = cg;
        }
        st = opt_shard_is_cp(s) ? opt_cp_run_chunk(&cc, s, d, idx + lo + clo, Bc) : run_chunk(&cc, s, d, idx + lo + clo, Bc);
    }
    dp_free(cg);

    /* ---- after per-sample clipping, before the reduction: the loss-scaling seam
     * (optimized/precision.h; no-op without a loss scale) ---- */
    if (st == DP_OK) st = opt_prec_after_clip(be, s->om.prec, s->flat, s->zoff);
    /* ---- loss scaling: step 5 (clipped sums / S, before the noise) and the dynamic
     * scaler's decision (optimized/opt_losscale.c) ---- */
    int skip = 0;
    if (st == DP_OK) st = opt_ls_after_chunks(&skip, s, co.loss, co.dropped, nl);
    /* ---- the sharding's reduction: S and Z (noise exactly once) of positions [lo, hi) ---- */
    if (st == DP_OK) st = s->shard->reduce(s, step);
    /* host copies of S and Z (the whole gradient, for the outputs) */
    double *hS = dp_malloc(sizeof(double) * (size_t)(2 * s->total + 1));
    if (!hS && st == DP_OK) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
    if (st == DP_OK) st = s->shard->gather_sums(s, hS);
    if (st == DP_OK) st = s->hooks->post_sum(s, hS); /* no-op unless a test-only bug (bugs.c) */
    /* ---- private gradient (S + Z) / (q N), optimizer and parameter sync of the rank's
     * positions (the sharding's) ---- */
    if (st == DP_OK && !skip) s->t++;
    if (st == DP_OK && !skip) st = s->shard->update(s, s->hooks->divisor(s, b));

    /* ---- outputs (per-example arrays gathered in global order) ---- */
    out->step = step;
    out->b = b;
    out->nparams = np;
    out->ngroups = G;
    if (st == DP_OK) {
        void *gl = NULL, *gsq = NULL, *gc = NULL, *gd = NULL;
        st = gather(s, &gl, co.loss, sizeof(double) * (size_t)nl);
        if (st == DP_OK) st = gather(s, &gsq, co.gn, sizeof(double) * (size_t)(nl * (G + 1)));
        if (st == DP_OK) st = gather(s, &gc, co.c, sizeof(double) * (size_t)(nl * G));
        if (st == DP_OK) st = gather(s, &gd, co.dropped, sizeof(int) * (size_t)nl);
        out->loss = gl; out->clip_factor = gc; out->dropped = gd;
        out->indices = idx; idx = NULL;
        out->norm = dp_malloc(sizeof(double) * (size_t)(b + 1));
        out->group_norm = dp_malloc(sizeof(double) * (size_t)(b * G + 1));
        if (st == DP_OK && (!out->norm || !out->group_norm)) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
        double *hgn = gsq; /* [b, G + 1] */
        double lsum = 0, csum = 0;
        int64_t nok = 0;
        for (int64_t i = 0; st == DP_OK && i < b; i++) {
            for (int g = 0; g < G; g++) {
                out->group_norm[i * G + g] = hgn[i * (G + 1) + g];
                csum += out->clip_factor[i * G + g];
            }
            out->norm[i] = hgn[i * (G + 1) + G];
            if (out->dropped[i]) out->ndropped++;
            else { lsum += out->loss[i]; nok++; }
        }
        dp_free(gsq);
        out->mean_loss = nok ? lsum / (double)nok : NAN;
        out->mean_clip = b ? csum / (double)(b * G) : NAN;
    }
    if (st == DP_OK && pgr) {
        out->grad = dp_calloc((size_t)np, sizeof(double *));
        if (!out->grad) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
        for (int p = 0; st == DP_OK && p < np; p++) {
            void *gp = NULL;
            st = gather(s, &gp, pgr[p], sizeof(double) * (size_t)(nl * om->numel[p]));
            out->grad[p] = gp;
        }
    }
    if (st == DP_OK) {
        out->clipped_sum = dp_calloc((size_t)np, sizeof(double *));
        out->noise = dp_calloc((size_t)np, sizeof(double *));
        out->private_grad = dp_calloc((size_t)np, sizeof(double *));
        double *hp = dp_malloc(sizeof(double) * (size_t)(s->total + 1));
        if (!out->clipped_sum || !out->noise || !out->private_grad || !hp) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
        if (st == DP_OK && !skip) st = s->shard->gather_pgrad(s, hp);
        if (st == DP_OK && skip) memset(hp, 0, sizeof(double) * (size_t)s->total); /* nothing released */
        if (st == DP_OK && !skip) st = pgrad_finite(s, hp, step);
        for (int p = 0; st == DP_OK && p < np; p++) {
            size_t nb = sizeof(double) * (size_t)om->numel[p];
            out->clipped_sum[p] = dp_malloc(nb); out->noise[p] = dp_malloc(nb); out->private_grad[p] = dp_malloc(nb);
            if (!out->clipped_sum[p] || !out->noise[p] || !out->private_grad[p]) { st = dp_error(DP_ERR_NOMEM, "engine: out of memory"); break; }
            memcpy(out->clipped_sum[p], hS + s->off[p], nb);
            memcpy(out->noise[p], hS + s->total + s->off[p], nb);
            memcpy(out->private_grad[p], hp + s->off[p], nb);
        }
        dp_free(hp);
    }
    dp_free(hS);
    dp_free(idx);
    dp_free(co.loss); dp_free(co.gn); dp_free(co.c); dp_free(co.dropped);
    if (pgr) { for (int p = 0; p < np; p++) dp_free(pgr[p]); dp_free(pgr); }
    return st;
}

/* ---------------------------------------------------------------- mixed precision */
/* The layouts --precision bf16|fp16 supports, and fp16's range at load (docs/precision.md). */
dp_status opt_prec_check(const opt_backend *be, const opt_dp_options *o, const dp_model *m) {
    const char *pn = opt_prec_names[o->prec];
    if (be->dtype != DP_F32)
        return dp_error(DP_ERR_INTERNAL, "--precision %s needs an f32 backend (got %s)", pn, dp_dtype_name(be->dtype));
    if (o->cp > 1 || o->cp_path)
        return dp_error(DP_ERR_USAGE, "--precision %s with --cp %d: mixed precision is not implemented under context "
                        "parallelism (docs/precision.md \"Limits\")", pn, o->cp);
    const double hmax = opt_prec_max_finite(o->prec);
    for (int p = 0; p < m->nparams; p++)
        for (int64_t e = 0; e < m->params[p].numel; e++) {
            double v = m->params[p].data[e];
            if (!(fabs(v) <= hmax))
                return dp_error(DP_ERR_INVALID, "--precision %s: parameter tensor '%s' element %lld = %g at load is "
                                "beyond the largest finite %s value %g (it would overflow to inf)", pn,
                                m->params[p].name, (long long)e, v, pn, hmax);
        }
    return DP_OK;
}

dp_status opt_prec_check_data(const opt_dp_options *o, const dp_dataset *d, const char *src) {
    if (!opt_prec_is_half(o->prec) || !d->x) return DP_OK; /* llama tokens are integers */
    const double hmax = opt_prec_max_finite(o->prec);
    for (int64_t i = 0; i < d->n * d->in; i++)
        if (!(fabs(d->x[i]) <= hmax))
            return dp_error(DP_ERR_INVALID, "--precision %s: %s: input 'x' of example %lld (feature %lld) = %g is beyond the "
                            "largest finite %s value %g (the stored activation would overflow to inf)",
                            opt_prec_names[o->prec], src, (long long)(i / d->in), (long long)(i % d->in), d->x[i],
                            opt_prec_names[o->prec], hmax);
    return DP_OK;
}

dp_status opt_dpsgd_get_params(opt_dpsgd *s, double *const *host) {
    if (!s->master) return opt_model_get_params(&s->om, host);
    double *h = dp_malloc(sizeof(double) * (size_t)(s->total + 1));
    if (!h) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    /* the master weights are laid out as the private gradient: its gather serves them */
    void *pg = s->pgrad;
    s->pgrad = s->master;
    dp_status st = s->shard->gather_pgrad(s, h);
    s->pgrad = pg;
    for (int p = 0; st == DP_OK && p < s->om.np; p++)
        memcpy(host[p], h + s->off[p], sizeof(double) * (size_t)s->om.numel[p]);
    dp_free(h);
    return st;
}

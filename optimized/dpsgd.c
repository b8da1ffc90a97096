/* optimized/dpsgd.c — DP-SGD on the engine (docs/engine.md): strategies, clipping
 * groups, noise modes, data-parallel shares and micro-batches. */
#include "optimized/dpsgd.h"
#include "common/alloc.h"
#include "optimized/opt_spec.h"
#include "optimized/ledger.h"
#include "optimized/clip/clip.h"

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
    /* context parallelism is a layout of the gradient vector, under any range sharding */
    const int cp_path = o->cp > 1 || o->cp_path;
    s->layout = cp_path ? &opt_layout_cp : &opt_layout_full;
    if (cp_path) DP_TRY(opt_cp_check(cfg, o, m));
    DP_TRY(opt_bug_check(o, cp_path));
    s->hooks = opt_bug_hooks(o->bug);
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
    s->om.block_release = s->hooks->block_release;
    s->off = dp_calloc((size_t)m->nparams, sizeof *s->off);
    if (!s->off) { opt_dpsgd_free(s); return dp_error(DP_ERR_NOMEM, "engine: out of memory"); }
    for (int p = 1; p < m->nparams; p++) s->off[p] = s->off[p - 1] + m->params[p - 1].numel;
    if ((st = s->layout->setup(s)) != DP_OK) { opt_dpsgd_free(s); return st; }
    /* the sharding's partition of the layout's vector [0, nvec) over the DP group (zero3's
     * setup replaces it with its per-tensor one) */
    const int64_t n = s->nvec;
    s->chunk = s->shard->shard_states ? (n + N - 1) / N : n;
    if (s->shard->shard_states) opt_shard_range(&s->lo, &s->hi, n, s->chunk, s->par.dp_rank);
    else { s->lo = 0; s->hi = n; }
    s->sums_ranged = s->shard->noise_partition || (s->shard->shard_states && s->layout->sums_in_ranges);
    s->zoff = s->sums_ranged ? s->chunk * N : n;
    s->zlo = s->shard->noise_partition ? s->lo : 0;
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
    opt_mem_note(s->be, OPT_MEM_HOST, -s->out_bytes);
    if (s->shard) s->shard->teardown(s);
    if (s->layout) s->layout->teardown(s);
    void *bufs[5] = {s->flat, s->pgrad, s->m1, s->m2, s->master};
    for (int i = 0; i < 5; i++) opt_mem_free(s->be, bufs[i]);
    if (s->om.be) opt_model_free(&s->om);
    opt_clip_groups_free(&s->groups);
    opt_parallel_free(&s->par);
    dp_free(s->off);
    memset(s, 0, sizeof *s);
}

/* Linear layer (T, d, p): ghost norm is chosen by the rule (docs/engine.md). */
int opt_mixed_pick_ghost(int rule, int64_t T, int64_t d, int64_t p) {
    if (rule == OPT_MIXED_MEMORY) return 2.0 * (double)T * (double)T <= (double)p * (double)d;
    return (double)T < (double)p * (double)d / (double)(p + d);
}

/* ---------------------------------------------------------------- gathering */
/* Every rank contributes n_local items of `each` bytes; rank 0 (and every rank) gets
 * the concatenation in rank order into *out (malloc'd). */
static dp_status gather(opt_dpsgd *s, void **out, const void *mine, size_t nbytes) {
    size_t len = 0; /* under CP the ranks of a CP group hold the same examples: its rank 0 gives them */
    return OPT_CALL(s->be, allgatherv_bytes, out, &len, mine, s->par.cp_rank == 0 ? nbytes : 0);
}

/* The engine's own check of the private gradient (docs/engine.md "Non-finite
 * training"): hp [total] downloaded, or hp NULL: the device's whole private gradient
 * (replicated layouts) read in blocks of 65536 elements. */
static dp_status pgrad_finite(opt_dpsgd *s, const double *hp, int64_t step) {
    enum { BLK = 65536 };
    double *blk = NULL;
    if (!hp) DP_TRY(opt_mem_host_alloc(s->be, (void **)&blk, sizeof(double) * BLK, OPT_MEM_HOST));
    dp_status st = DP_OK;
    for (int p = 0; st == DP_OK && p < s->om.np; p++)
        for (int64_t e0 = 0; st == DP_OK && e0 < s->om.numel[p]; e0 += BLK) {
            int64_t n = s->om.numel[p] - e0 < BLK ? s->om.numel[p] - e0 : BLK;
            const double *v = hp ? hp + s->off[p] + e0 : blk;
            if (!hp) st = OPT_CALL(s->be, download_f64, blk, opt_dev_at(s, s->pgrad, s->off[p] + e0), n);
            for (int64_t e = 0; st == DP_OK && e < n; e++)
                if (!isfinite(v[e]))
                    st = dp_error(DP_ERR_INVALID, "step %lld: the private gradient of parameter tensor '%s' (element %lld) "
                                  "is not finite (%g): the hyperparameters overflow", (long long)step, s->om.name[p],
                                  (long long)(e0 + e), v[e]);
        }
    opt_mem_host_free(s->be, blk);
    return st;
}

/* The step's per-example outputs (every rank's share gathered in global order): losses,
 * norms, clip factors, dropped flags, the means of the log line and (exporting) the
 * per-sample gradients pgr. */
static dp_status step_examples_out(dp_dpsgd_step_out *out, opt_dpsgd *s, const opt_chunk_out *co, double *const *pgr,
                                   int64_t nl) {
    const int G = s->groups.ngroups, np = s->om.np;
    const int64_t b = out->b;
    void *gl = NULL, *gsq = NULL, *gc = NULL, *gd = NULL;
    dp_status st = gather(s, &gl, co->loss, sizeof(double) * (size_t)nl);
    if (st == DP_OK) st = gather(s, &gsq, co->gn, sizeof(double) * (size_t)(nl * (G + 1)));
    if (st == DP_OK) st = gather(s, &gc, co->c, sizeof(double) * (size_t)(nl * G));
    if (st == DP_OK) st = gather(s, &gd, co->dropped, sizeof(int) * (size_t)nl);
    out->loss = gl; out->clip_factor = gc; out->dropped = gd;
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
    if (st == DP_OK && pgr) {
        out->grad = dp_calloc((size_t)np, sizeof(double *));
        if (!out->grad) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
        for (int p = 0; st == DP_OK && p < np; p++) {
            void *gp = NULL;
            st = gather(s, &gp, pgr[p], sizeof(double) * (size_t)(nl * s->om.numel[p]));
            out->grad[p] = gp;
        }
    }
    return st;
}

/* The step's sums per tensor: clipped sum and noise (host hS [2 total], NULL without the
 * vectors) and the private gradient (gathered; zeros for a skipped step, which releases
 * nothing). Without the vectors, a replicated layout checks the device's private gradient
 * in blocks; a sharded one gathers it (every rank then sees the same verdict). */
static dp_status step_sums_out(dp_dpsgd_step_out *out, opt_dpsgd *s, const double *hS, int vectors, int skip,
                               int64_t step) {
    const int np = s->om.np;
    const int dev_check = !vectors && !s->shard->shard_states && !opt_shard_is_cp(s);
    if (dev_check) return skip ? DP_OK : pgrad_finite(s, NULL, step);
    double *hp = NULL;
    dp_status st = opt_mem_host_alloc(s->be, (void **)&hp, sizeof(double) * (size_t)(s->total + 1), OPT_MEM_HOST);
    if (st == DP_OK && !skip) st = s->shard->gather_pgrad(s, hp);
    if (st == DP_OK && skip) memset(hp, 0, sizeof(double) * (size_t)s->total); /* nothing released */
    if (st == DP_OK && !skip) st = pgrad_finite(s, hp, step);
    if (st == DP_OK && vectors) {
        out->clipped_sum = dp_calloc((size_t)np, sizeof(double *));
        out->noise = dp_calloc((size_t)np, sizeof(double *));
        out->private_grad = dp_calloc((size_t)np, sizeof(double *));
        if (!out->clipped_sum || !out->noise || !out->private_grad) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
    }
    for (int p = 0; st == DP_OK && vectors && p < np; p++) {
        size_t nb = sizeof(double) * (size_t)s->om.numel[p];
        out->clipped_sum[p] = dp_malloc(nb); out->noise[p] = dp_malloc(nb); out->private_grad[p] = dp_malloc(nb);
        if (!out->clipped_sum[p] || !out->noise[p] || !out->private_grad[p]) { st = dp_error(DP_ERR_NOMEM, "engine: out of memory"); break; }
        memcpy(out->clipped_sum[p], hS + s->off[p], nb);
        memcpy(out->noise[p], hS + s->total + s->off[p], nb);
        memcpy(out->private_grad[p], hp + s->off[p], nb);
        s->out_bytes += 3 * (int64_t)nb;
    }
    opt_mem_host_free(s->be, hp);
    return st;
}

/* ---------------------------------------------------------------- step */
dp_status opt_dpsgd_step(dp_dpsgd_step_out *out, opt_dpsgd *s, const dp_dataset *d, int64_t step) {
    dp_dpsgd_step_free(out);
    memset(out, 0, sizeof *out);
    opt_mem_note(s->be, OPT_MEM_HOST, -s->out_bytes); /* the previous step's out vectors */
    s->out_bytes = 0;
    /* the host copies of the step's vectors: wanted, needed by a test-only hook, or
     * under context parallelism (its byte formulas count their gathers, docs/longshield.md) */
    const int vectors = !s->o.no_step_vectors || s->hooks != &opt_hooks_correct || opt_shard_is_cp(s);
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
    opt_chunk_out co = {0};
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
        opt_chunk_out cc = {co.loss + clo, co.gn + clo * (G + 1), co.c + clo * G, co.dropped + clo, NULL};
        if (pgr) {
            if (!cg) { st = dp_error(DP_ERR_NOMEM, "engine: out of memory"); break; }
            for (int p = 0; p < np; p++) cg[p] = pgr[p] + clo * om->numel[p];
            cc.grad = cg;
        }
        st = opt_clip_chunk(&cc, s, s->layout->source, d, idx + lo + clo, Bc); /* the clipping pipeline */
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
    double *hS = NULL;
    if (st == DP_OK && vectors) st = opt_mem_host_alloc(be, (void **)&hS, sizeof(double) * (size_t)(2 * s->total + 1), OPT_MEM_HOST);
    if (st == DP_OK && vectors) st = s->shard->gather_sums(s, hS);
    if (st == DP_OK && vectors) st = s->hooks->post_sum(s, hS); /* no-op unless a test-only bug (bugs.c) */
    /* ---- private gradient (S + Z) / (q N), optimizer and parameter sync of the rank's
     * positions (the sharding's) ---- */
    if (st == DP_OK && !skip) s->t++;
    if (st == DP_OK && !skip) st = s->shard->update(s, s->hooks->divisor(s, b));

    /* ---- outputs (per-example arrays gathered in global order) ---- */
    out->step = step;
    out->b = b;
    out->nparams = np;
    out->ngroups = G;
    if (st == DP_OK) { out->indices = idx; idx = NULL; }
    if (st == DP_OK) st = step_examples_out(out, s, &co, pgr, nl);
    if (st == DP_OK) st = step_sums_out(out, s, hS, vectors, skip, step);
    opt_mem_host_free(be, hS);
    if (out->grad) /* the per-sample gradients gathered above */
        for (int p = 0; p < np; p++) s->out_bytes += (int64_t)sizeof(double) * b * om->numel[p];
    opt_mem_note(be, OPT_MEM_HOST, s->out_bytes);
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

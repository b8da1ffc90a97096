/* optimized/strategies/bugs.c — the step hooks: the correct ones, and the test-only
 * injected bugs as tables that replace the hooks of named seams (docs/engine.md "Injected
 * bugs"). This file is the only place a bug exists: the step and the strategies call every
 * hook unconditionally and test no bug flag. Every bug must make a conformance comparison
 * (or its own test) FAIL; never use them for training. */
#include <math.h>
#include <string.h>

#include "optimized/ledger.h"
#include "optimized/opt_spec.h"
#include "optimized/shard.h"

/* ---------------------------------------------------------------- correct hooks */
static opt_layer_mode mode_keep(opt_layer_mode m) { return m; }

static int factors_keep(double *c, const int *dropped, int G, int64_t Bc) {
    (void)c; (void)dropped; (void)G; (void)Bc;
    return 0;
}

static void span_keep(const opt_dpsgd *s, int64_t *lo, int64_t *hi) { (void)s; (void)lo; (void)hi; }

static int64_t elem_global(int p, int64_t x, int64_t u, int64_t e, int64_t lo) {
    (void)p; (void)x; (void)u; (void)lo;
    return e;
}

static dp_status post_sum_keep(opt_dpsgd *s, double *hS) { (void)s; (void)hS; return DP_OK; }

static double divisor_expected(const opt_dpsgd *s, int64_t b) { (void)b; return s->cfg.q * (double)s->cfg.n; }

static int owner_self(const opt_dpsgd *s) { return s->par.dp_rank; }

static dp_status sync_run(opt_dpsgd *s, dp_status (*sync)(opt_dpsgd *s)) { return sync(s); }

static dp_status source_self(opt_dpsgd *s, void **src, void *w, int64_t n) {
    (void)s; (void)n;
    *src = w;
    return DP_OK;
}

static dp_status source_update_none(opt_dpsgd *s, void *src, const void *w, int64_t n) {
    (void)s; (void)src; (void)w; (void)n;
    return DP_OK;
}

static dp_status partial_keep(opt_dpsgd *s, void *send, size_t nbytes) { (void)s; (void)send; (void)nbytes; return DP_OK; }

static dp_status norm_allreduce(opt_dpsgd *s, void *sq, int64_t n) {
    const opt_cp_state *cs = s->layout_state;
    return OPT_CALL(s->be, allreduce_sum, cs->cp.g, sq, n, NULL);
}

static dp_status master_keep(opt_dpsgd *s, void *master_at, int64_t n) { (void)s; (void)master_at; (void)n; return DP_OK; }

static double scale_used(const opt_dpsgd *s) { return s->ls_used; }

static dp_status unscale_div(opt_dpsgd *s, void *S, int64_t n) {
    if (s->ls_used == 1) return DP_OK;
    return OPT_CALL(s->be, div_scalar, S, S, s->ls_used, n); /* exact for a power of two */
}

/* The correct seams; a bug's table names the hooks it replaces (designated initializers
 * after these). */
#define OPT_HOOKS_CORRECT_FNS                                                                                  \
    .layer_mode = mode_keep, .factors = factors_keep, .noise_span = span_keep, .noise = opt_noise_runs,         \
    .noise_elem = elem_global, .post_sum = post_sum_keep, .divisor = divisor_expected, .update_owner = owner_self, \
    .param_sync = sync_run, .gather_source = source_self, .gather_source_update = source_update_none,             \
    .cp_partial = partial_keep, .norm_reduce = norm_allreduce, .master_store = master_keep,                      \
    .block_release = opt_block_release_none, .clip_scale = scale_used, .export_scale = scale_used,               \
    .unscale = unscale_div

const opt_step_hooks opt_hooks_correct = {OPT_HOOKS_CORRECT_FNS};

/* A bug's table is the correct one with the named seams replaced: the later designated
 * initializers override the earlier ones on purpose. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Winitializer-overrides"
#else
#pragma GCC diagnostic ignored "-Woverride-init"
#endif

/* ---------------------------------------------------------------- the bugs */
/* clip-after-sum: no per-example clipping (c = 1; the FlashDP single pass, which clips
 * inside, is not used); each group's batch sum is clipped after the reduction */
static opt_layer_mode mode_no_single_pass(opt_layer_mode m) { return m == OPT_LM_FUSED1 ? OPT_LM_FUSEDNORM : m; }

static int factors_unit(double *c, const int *dropped, int G, int64_t Bc) {
    for (int64_t i = 0; i < G * Bc; i++) c[i] = dropped[i % Bc] ? 0.0 : 1.0;
    return 1;
}

static dp_status post_sum_clip(opt_dpsgd *s, double *hS) {
    const opt_model *om = &s->om;
    for (int g = 0; g < s->groups.ngroups; g++) {
        double sq = 0;
        for (int p = 0; p < om->np; p++)
            if (s->groups.group_of[p] == g)
                for (int64_t e = 0; e < om->numel[p]; e++) sq += hS[s->off[p] + e] * hS[s->off[p] + e];
        double f = opt_clip_factor((dp_clip_fn)s->cfg.clip_fn, sqrt(sq), s->groups.thresh[g], s->cfg.gamma);
        for (int p = 0; p < om->np; p++)
            if (s->groups.group_of[p] == g)
                for (int64_t e = 0; e < om->numel[p]; e++) hS[s->off[p] + e] *= f;
    }
    /* back into this rank's partition of S (the full layout: vector = tensor positions) */
    return OPT_CALL(s->be, upload_f64, opt_dev_at(s, s->flat, s->lo), hS + s->lo, s->hi - s->lo);
}

/* noise-every-rank: every rank draws the noise of the whole vector (counted R times) */
static void span_all(const opt_dpsgd *s, int64_t *lo, int64_t *hi) { *lo = 0; *hi = s->nvec; }

/* realized-batch-divisor: the realized batch size instead of q N */
static double divisor_realized(const opt_dpsgd *s, int64_t b) { return b > 0 ? (double)b : s->cfg.q * (double)s->cfg.n; }

/* zero-noise-same-seed: each rank's partition noise starts at the stream's start (the
 * seed-flag pitfall) */
static int64_t elem_span_relative(int p, int64_t x, int64_t u, int64_t e, int64_t lo) {
    (void)p; (void)u; (void)e;
    return x - lo;
}

/* zero-wrong-slice: the update writes the next rank's partition */
static int owner_next(const opt_dpsgd *s) { return (s->par.dp_rank + 1) % s->par.dp; }

/* zero-stale-params: the parameters are not re-gathered after the update; under zero3 the
 * per-layer gathers read a copy of the partition taken before each update */
static dp_status sync_skip(opt_dpsgd *s, dp_status (*sync)(opt_dpsgd *s)) { (void)s; (void)sync; return DP_OK; }

static dp_status source_stale(opt_dpsgd *s, void **src, void *w, int64_t n) {
    DP_TRY(opt_mem_alloc(s->be, src, opt_backend_esize(s->be) * (size_t)n, OPT_MEM_GATHERED));
    return OPT_CALL(s->be, copy, *src, w, opt_backend_esize(s->be) * (size_t)n);
}

static dp_status source_update_stale(opt_dpsgd *s, void *src, const void *w, int64_t n) {
    return OPT_CALL(s->be, copy, src, w, opt_backend_esize(s->be) * (size_t)n);
}

/* cp-drop-partial: the last CP rank's partials (or exchanged columns) are lost */
static dp_status partial_drop(opt_dpsgd *s, void *send, size_t nbytes) {
    const opt_cp_state *cs = s->layout_state;
    return cs->cp.r == cs->cp.M - 1 ? OPT_CALL(s->be, zero, send, nbytes) : DP_OK;
}

/* cp-local-norms: per-example norms from the local slice only (no all-reduce) */
static dp_status norm_local(opt_dpsgd *s, void *sq, int64_t n) { (void)s; (void)sq; (void)n; return DP_OK; }

/* cp-full-noise: every CP rank adds the whole layer's noise, summed over the CP group (the
 * noise counted M times) */
static dp_status noise_cp_full(opt_dpsgd *s, void *z, int64_t zlo, int64_t step, int64_t lo, int64_t hi, double std) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const opt_cp_state *cs = s->layout_state;
    const size_t es = opt_backend_esize(be);
    for (int p = 0; p < om->np; p++) {
        void *full = NULL;
        opt_cp_geom g;
        opt_cp_geom_of(&g, s, p, cs->cp.r);
        dp_status st = opt_mem_alloc(be, &full, es * (size_t)om->numel[p], OPT_MEM_WORKSPACE);
        if (st == DP_OK && hi > lo)
            st = OPT_CALL(be, noise_add, full, s->cfg.key, (uint32_t)step, (uint32_t)p, std, 0, om->numel[p]);
        if (st == DP_OK) st = OPT_CALL(be, allreduce_sum, cs->cp.g, full, om->numel[p], NULL);
        if (st == DP_OK) st = opt_cp_geom_copy(s, &g, full, opt_dev_at(s, z, s->voff[p] - zlo), 0, g.nseg * g.w, 0);
        opt_mem_free(be, full);
        DP_TRY(st);
    }
    return DP_OK;
}

/* cp-zero2-local-noise: a range's noise drawn at the slice-local packed position instead of
 * the global one (every CP rank's slice gets CP rank 0's noise) */
static int64_t elem_slice_local(int p, int64_t x, int64_t u, int64_t e, int64_t lo) {
    (void)p; (void)x; (void)e; (void)lo;
    return u;
}

/* master-half: the master weights rounded to the half type after every update */
static dp_status master_round(opt_dpsgd *s, void *master_at, int64_t n) {
    return opt_prec_round_dev(s->be, s->om.prec, master_at, n, NULL);
}

/* ckpt-keep-forward: a checkpointed block's first-forward activations kept until the model
 * is freed (a dangling reference: the ledger's activations grow step over step) */
static dp_status block_keep(opt_model *om, opt_arena *blk) { return opt_arena_move(&om->retained, blk); }

/* ls-unscale-after-clip (1-2-3-4-5-6) and ls-no-unscale (1-2-3-4-6): clipping at C on
 * the scaled gradient, norms exported as seen; the second also leaves out step 5 */
static double scale_one(const opt_dpsgd *s) { (void)s; return 1.0; }
static dp_status unscale_none(opt_dpsgd *s, void *S, int64_t n) { (void)s; (void)S; (void)n; return DP_OK; }

static const opt_step_hooks hooks_clip_after_sum = {OPT_HOOKS_CORRECT_FNS, .layer_mode = mode_no_single_pass,
                                                    .factors = factors_unit, .post_sum = post_sum_clip};
static const opt_step_hooks hooks_noise_every_rank = {OPT_HOOKS_CORRECT_FNS, .noise_span = span_all};
static const opt_step_hooks hooks_realized_divisor = {OPT_HOOKS_CORRECT_FNS, .divisor = divisor_realized};
static const opt_step_hooks hooks_same_seed = {OPT_HOOKS_CORRECT_FNS, .noise_elem = elem_span_relative};
static const opt_step_hooks hooks_wrong_slice = {OPT_HOOKS_CORRECT_FNS, .update_owner = owner_next};
static const opt_step_hooks hooks_stale_params = {OPT_HOOKS_CORRECT_FNS, .param_sync = sync_skip,
                                                  .gather_source = source_stale,
                                                  .gather_source_update = source_update_stale};
static const opt_step_hooks hooks_cp_drop_partial = {OPT_HOOKS_CORRECT_FNS, .cp_partial = partial_drop};
static const opt_step_hooks hooks_cp_local_norms = {OPT_HOOKS_CORRECT_FNS, .norm_reduce = norm_local};
static const opt_step_hooks hooks_cp_full_noise = {OPT_HOOKS_CORRECT_FNS, .noise = noise_cp_full};
static const opt_step_hooks hooks_cp_zero2_local_noise = {OPT_HOOKS_CORRECT_FNS, .noise_elem = elem_slice_local};
static const opt_step_hooks hooks_master_half = {OPT_HOOKS_CORRECT_FNS, .master_store = master_round};
static const opt_step_hooks hooks_ckpt_keep_forward = {OPT_HOOKS_CORRECT_FNS, .block_release = block_keep};
static const opt_step_hooks hooks_ls_unscale_after_clip = {OPT_HOOKS_CORRECT_FNS, .clip_scale = scale_one,
                                                           .export_scale = scale_one};
static const opt_step_hooks hooks_ls_no_unscale = {OPT_HOOKS_CORRECT_FNS, .clip_scale = scale_one,
                                                   .export_scale = scale_one, .unscale = unscale_none};

/* ---------------------------------------------------------------- where each bug applies */
static dp_status applies_always(const opt_dp_options *o, int cp) { (void)o; (void)cp; return DP_OK; }

static dp_status applies_without_cp(const opt_dp_options *o, int cp) {
    if (cp) return dp_error(DP_ERR_USAGE, "--cp %d: --inject-bug %s has no injection point under context parallelism",
                            o->cp, opt_bug_names[o->bug]);
    return DP_OK;
}

static dp_status applies_cp(const opt_dp_options *o, int cp) {
    if (!cp) return dp_error(DP_ERR_USAGE, "--inject-bug %s applies to context parallelism only (--cp M > 1, or --cp 1 "
                             "with --cp-attention)", opt_bug_names[o->bug]);
    return DP_OK;
}

/* the noise of every position drawn by more than its owner: not under zero2 with CP */
static dp_status applies_noise_all(const opt_dp_options *o, int cp) {
    if (o->bug == OPT_BUG_CP_FULL_NOISE) DP_TRY(applies_cp(o, cp));
    if (cp && o->sharding == OPT_SHARD_ZERO2)
        return dp_error(DP_ERR_USAGE, "--cp %d --sharding zero2: --inject-bug %s has no injection point (each DP rank "
                        "draws the noise of its own range)", o->cp, opt_bug_names[o->bug]);
    return DP_OK;
}

static dp_status applies_cp_zero2(const opt_dp_options *o, int cp) {
    DP_TRY(applies_cp(o, cp));
    if (o->sharding != OPT_SHARD_ZERO2)
        return dp_error(DP_ERR_USAGE, "--inject-bug %s applies to --sharding zero2 only", opt_bug_names[o->bug]);
    return DP_OK;
}

static dp_status applies_half(const opt_dp_options *o, int cp) {
    (void)cp;
    if (!opt_prec_is_half(o->prec))
        return dp_error(DP_ERR_USAGE, "--inject-bug master-half applies to --precision bf16 or fp16 only");
    return DP_OK;
}

static dp_status applies_checkpoint(const opt_dp_options *o, int cp) {
    (void)cp;
    if (!o->checkpoint) return dp_error(DP_ERR_USAGE, "--inject-bug %s applies to --checkpoint block only", opt_bug_names[o->bug]);
    return DP_OK;
}

static dp_status applies_loss_scale(const opt_dp_options *o, int cp) {
    (void)cp;
    if (!(o->ls.mode == OPT_LS_STATIC && o->ls.S > 1))
        return dp_error(DP_ERR_USAGE, "--inject-bug %s needs --loss-scale static:S with S > 1", opt_bug_names[o->bug]);
    return DP_OK;
}

typedef struct {
    const opt_step_hooks *hooks;
    dp_status (*applies)(const opt_dp_options *o, int cp);
} bug_entry;

static const bug_entry *bug_of(opt_bug bug) {
    static const bug_entry table[OPT_BUG_COUNT] = {
        [OPT_BUG_NONE] = {&opt_hooks_correct, applies_always},
        [OPT_BUG_CLIP_AFTER_SUM] = {&hooks_clip_after_sum, applies_without_cp},
        [OPT_BUG_NOISE_EVERY_RANK] = {&hooks_noise_every_rank, applies_noise_all},
        [OPT_BUG_REALIZED_DIVISOR] = {&hooks_realized_divisor, applies_always},
        [OPT_BUG_ZERO_NOISE_SAME_SEED] = {&hooks_same_seed, applies_always},
        [OPT_BUG_ZERO_WRONG_SLICE] = {&hooks_wrong_slice, applies_always},
        [OPT_BUG_ZERO_STALE_PARAMS] = {&hooks_stale_params, applies_always},
        [OPT_BUG_CP_DROP_PARTIAL] = {&hooks_cp_drop_partial, applies_cp},
        [OPT_BUG_CP_LOCAL_NORMS] = {&hooks_cp_local_norms, applies_cp},
        [OPT_BUG_CP_FULL_NOISE] = {&hooks_cp_full_noise, applies_noise_all},
        [OPT_BUG_MASTER_HALF] = {&hooks_master_half, applies_half},
        [OPT_BUG_CKPT_KEEP_FORWARD] = {&hooks_ckpt_keep_forward, applies_checkpoint},
        [OPT_BUG_LS_UNSCALE_AFTER_CLIP] = {&hooks_ls_unscale_after_clip, applies_loss_scale},
        [OPT_BUG_LS_NO_UNSCALE] = {&hooks_ls_no_unscale, applies_loss_scale},
        [OPT_BUG_CP_ZERO2_LOCAL_NOISE] = {&hooks_cp_zero2_local_noise, applies_cp_zero2},
    };
    return (bug >= 0 && bug < OPT_BUG_COUNT && table[bug].hooks) ? &table[bug] : &table[OPT_BUG_NONE];
}

const opt_step_hooks *opt_bug_hooks(opt_bug bug) { return bug_of(bug)->hooks; }

dp_status opt_bug_check(const opt_dp_options *o, int cp_path) { return bug_of(o->bug)->applies(o, cp_path); }

/* ---------------------------------------------------------------- DP-ZO */
static float dpzo_round_bf16(float x) { return opt_prec_round_value(OPT_PREC_BF16, x); }
static float dpzo_round_fp16(float x) { return opt_prec_round_value(OPT_PREC_FP16, x); }

dp_status opt_dpzo_bug_check(opt_bug bug) {
    if (bug != OPT_BUG_NONE && bug != OPT_BUG_MASTER_HALF)
        return dp_error(DP_ERR_USAGE, "--inject-bug %s applies to dpsgd only (dpzo: master-half)", opt_bug_names[bug]);
    return DP_OK;
}

dp_status opt_dpzo_bug(float (**master_round_fn)(float), opt_bug bug, opt_prec prec) {
    *master_round_fn = NULL;
    DP_TRY(opt_dpzo_bug_check(bug));
    if (bug == OPT_BUG_NONE) return DP_OK;
    DP_TRY(applies_half(&(opt_dp_options){.bug = bug, .prec = prec}, 0));
    /* master-half: the f32 master weights rounded to the half type after every update */
    *master_round_fn = prec == OPT_PREC_FP16 ? dpzo_round_fp16 : dpzo_round_bf16;
    return DP_OK;
}

/* optimized/strategies/bugs.c — the step hooks: the correct ones, and the test-only
 * injected bugs as wrappers that replace one hook each (docs/engine.md "Injected bugs").
 * Every bug must make a conformance comparison FAIL; never use them for training. */
#include <math.h>

#include "optimized/shard.h"
#include "optimized/opt_spec.h"

static void factors_keep(double *c, const int *dropped, int G, int64_t Bc) {}

static void span_keep(const opt_dpsgd *s, int64_t *lo, int64_t *hi) {}

/* Z[i] += std N(key, NOISE, step, lane p, element i - off[p]) for i in [lo, hi);
 * rel = 1 draws element i - lo instead (the seed-flag pitfall: every rank starts its
 * partition's noise at the same stream position). */
static dp_status noise_positions(opt_dpsgd *s, void *z, int64_t zlo, int64_t step, int64_t lo, int64_t hi, double std,
                                 int rel) {
    const opt_model *om = &s->om;
    for (int p = 0; p < om->np; p++) {
        int64_t a = s->off[p] > lo ? s->off[p] : lo, b = s->off[p] + om->numel[p] < hi ? s->off[p] + om->numel[p] : hi;
        if (a >= b) continue;
        uint64_t elem = (uint64_t)(rel ? a - lo : a - s->off[p]);
        DP_TRY(OPT_CALL(s->be, noise_add, opt_dev_at(s, z, a - zlo), s->cfg.key, (uint32_t)step, (uint32_t)p, std, elem, b - a));
    }
    return DP_OK;
}

static dp_status noise_global(opt_dpsgd *s, void *z, int64_t zlo, int64_t step, int64_t lo, int64_t hi, double std) {
    return noise_positions(s, z, zlo, step, lo, hi, std, 0);
}

static dp_status post_sum_keep(opt_dpsgd *s, double *hS) { return DP_OK; }

static double divisor_expected(const opt_dpsgd *s, int64_t b) { return s->cfg.q * (double)s->cfg.n; }

static int owner_self(const opt_dpsgd *s) { return s->par.dp_rank; }

/* The correct points; a bug's table names the fields it changes (designated initializers:
 * a flag added to opt_step_hooks is 0 everywhere it is not named). */
#define OPT_HOOKS_CORRECT_FNS                                                                              \
    .fused_single_pass = 1, .factors = factors_keep, .noise_span = span_keep, .noise = noise_global,          \
    .post_sum = post_sum_keep, .divisor = divisor_expected, .update_owner = owner_self

const opt_step_hooks opt_hooks_correct = {OPT_HOOKS_CORRECT_FNS};

/* ---- clip-after-sum: no per-example clipping; the batch sum is clipped per group ---- */
static void factors_unit(double *c, const int *dropped, int G, int64_t Bc) {
    for (int64_t i = 0; i < G * Bc; i++) c[i] = dropped[i % Bc] ? 0.0 : 1.0;
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
    /* back into this rank's partition of S */
    return OPT_CALL(s->be, upload_f64, opt_dev_at(s, s->flat, s->lo), hS + s->lo, s->hi - s->lo);
}

/* ---- noise-every-rank: every rank draws the full noise (noise counted R times) ---- */
static void span_all(const opt_dpsgd *s, int64_t *lo, int64_t *hi) { *lo = 0; *hi = s->total; }

/* ---- realized-batch-divisor: divide by the realized batch size instead of q N ---- */
static double divisor_realized(const opt_dpsgd *s, int64_t b) { return b > 0 ? (double)b : s->cfg.q * (double)s->cfg.n; }

/* ---- zero-noise-same-seed: each rank's partition noise starts at the stream's start ---- */
static dp_status noise_same_seed(opt_dpsgd *s, void *z, int64_t zlo, int64_t step, int64_t lo, int64_t hi,
                                 double std) {
    return noise_positions(s, z, zlo, step, lo, hi, std, 1);
}

/* ---- zero-wrong-slice: the update writes the next rank's partition ---- */
static int owner_next(const opt_dpsgd *s) { return (s->par.dp_rank + 1) % s->par.dp; }

static const opt_step_hooks hooks_clip_after_sum = {.fused_single_pass = 0, .factors = factors_unit, .noise_span = span_keep, .noise = noise_global,
    .post_sum = post_sum_clip, .divisor = divisor_expected, .update_owner = owner_self};
static const opt_step_hooks hooks_noise_every_rank = {.fused_single_pass = 1, .factors = factors_keep, .noise_span = span_all, .noise = noise_global,
    .post_sum = post_sum_keep, .divisor = divisor_expected, .update_owner = owner_self};
static const opt_step_hooks hooks_realized_divisor = {.fused_single_pass = 1, .factors = factors_keep, .noise_span = span_keep, .noise = noise_global,
    .post_sum = post_sum_keep, .divisor = divisor_realized, .update_owner = owner_self};
static const opt_step_hooks hooks_same_seed = {.fused_single_pass = 1, .factors = factors_keep, .noise_span = span_keep, .noise = noise_same_seed,
    .post_sum = post_sum_keep, .divisor = divisor_expected, .update_owner = owner_self};
static const opt_step_hooks hooks_wrong_slice = {.fused_single_pass = 1, .factors = factors_keep, .noise_span = span_keep, .noise = noise_global,
    .post_sum = post_sum_keep, .divisor = divisor_expected, .update_owner = owner_next};
static const opt_step_hooks hooks_stale_params = {OPT_HOOKS_CORRECT_FNS, .skip_param_sync = 1};

/* ---- context parallelism (docs/longshield.md "Negative controls") ---- */
static const opt_step_hooks hooks_cp_drop_partial = {OPT_HOOKS_CORRECT_FNS, .cp_drop_partial = 1};
static const opt_step_hooks hooks_cp_local_norms = {OPT_HOOKS_CORRECT_FNS, .cp_local_norms = 1};
static const opt_step_hooks hooks_cp_full_noise = {OPT_HOOKS_CORRECT_FNS, .cp_full_noise = 1};
static const opt_step_hooks hooks_cp_zero2_local_noise = {OPT_HOOKS_CORRECT_FNS, .cp_zero2_local_noise = 1};

/* ---- master-half: master weights kept in the half type (small updates lost) ---- */
static const opt_step_hooks hooks_master_half = {OPT_HOOKS_CORRECT_FNS, .master_half = 1};

/* ---- loss scaling: 1-2-3-4-5-6 (unscale after clipping at C: over-shrink) and 1-2-3-4-6
 * (no unscale: examples below S C keep S) ---- */
static const opt_step_hooks hooks_ls_unscale_after_clip = {OPT_HOOKS_CORRECT_FNS, .ls_clip_unscaled = 1};
static const opt_step_hooks hooks_ls_no_unscale = {OPT_HOOKS_CORRECT_FNS, .ls_clip_unscaled = 1, .ls_no_unscale = 1};

/* ---- activation checkpointing (docs/longshield.md "Activation checkpointing") ---- */
static const opt_step_hooks hooks_ckpt_keep_forward = {OPT_HOOKS_CORRECT_FNS, .ckpt_keep_forward = 1};

const opt_step_hooks *opt_bug_hooks(opt_bug bug) {
    static const opt_step_hooks *const table[OPT_BUG_COUNT] = {
        [OPT_BUG_NONE] = &opt_hooks_correct,
        [OPT_BUG_CLIP_AFTER_SUM] = &hooks_clip_after_sum,
        [OPT_BUG_NOISE_EVERY_RANK] = &hooks_noise_every_rank,
        [OPT_BUG_REALIZED_DIVISOR] = &hooks_realized_divisor,
        [OPT_BUG_ZERO_NOISE_SAME_SEED] = &hooks_same_seed,
        [OPT_BUG_ZERO_WRONG_SLICE] = &hooks_wrong_slice,
        [OPT_BUG_ZERO_STALE_PARAMS] = &hooks_stale_params,
        [OPT_BUG_CP_DROP_PARTIAL] = &hooks_cp_drop_partial,
        [OPT_BUG_CP_LOCAL_NORMS] = &hooks_cp_local_norms,
        [OPT_BUG_CP_FULL_NOISE] = &hooks_cp_full_noise,
        [OPT_BUG_MASTER_HALF] = &hooks_master_half,
        [OPT_BUG_CKPT_KEEP_FORWARD] = &hooks_ckpt_keep_forward,
        [OPT_BUG_LS_UNSCALE_AFTER_CLIP] = &hooks_ls_unscale_after_clip,
        [OPT_BUG_LS_NO_UNSCALE] = &hooks_ls_no_unscale,
        [OPT_BUG_CP_ZERO2_LOCAL_NOISE] = &hooks_cp_zero2_local_noise,
    };
    return (bug >= 0 && bug < OPT_BUG_COUNT && table[bug]) ? table[bug] : &opt_hooks_correct;
}

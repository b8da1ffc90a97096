/* optimized/dpzo.h — DP-ZO on the engine, data-parallel over ranks (docs/engine.md
 * "DP-ZO"). The same algorithm as reference/dpzo.h (exact step of Algorithm 1):
 * the Poisson batch is decided once (every rank evaluates the same secret stream), rank
 * r takes the contiguous share [floor(b r / R), floor(b (r+1) / R)) of it, evaluates the
 * losses at theta +- phi z_j with the batched engine forward, clips the differences,
 * and ONE all-reduce of n + 2 scalars per step (the n clipped sums, the loss sum over
 * the kept pairs and the count of dropped pairs: non-finite differences contribute 0)
 * completes the step. The noise Z_j is the single draw of docs/dpzo.md (every rank
 * evaluates the same elements of the DPZO_NOISE stream, so it enters the release once);
 * the update is the public update of docs/dpzo.md step 3 on every rank. Sampling,
 * directions, clipping, noise, scalars and update are the engine's own
 * (optimized/opt_spec.h), not the reference's. */
#ifndef OPT_DPZO_H
#define OPT_DPZO_H

#include "optimized/dpsgd.h"
#include "optimized/engine.h"
#include "common/spec_dpzo.h"

typedef struct {
    opt_backend *be;
    opt_model om;
    dp_dpzo_hparams hp;
    int nparams;
    int64_t *numel;
    double **theta;   /* host f64 parameters (theta of docs/dpzo.md) */
    double **work;    /* host theta +- phi z */
    double **z;       /* [n][nparams] -> numel: directions of the current step */
    /* --precision (docs/precision.md "DP-ZO"): bf16/fp16 keep theta as the f32 master
     * weights (f32 values in doubles), perturb in f32 and round the perturbed parameters
     * to the half type; 0 (f64) after opt_dpzo_init. master_half: test-only bug. */
    opt_prec prec;
    /* the master-store seam of DP-ZO: NULL, or (test-only bug, optimized/strategies/bugs.c)
     * a rounding of the f32 master weights after every update */
    float (*master_round)(float);
} opt_dpzo;

dp_status opt_dpzo_init(opt_dpzo *s, opt_backend *be, const dp_dpzo_hparams *hp, const dp_model *m);
void opt_dpzo_free(opt_dpzo *s);
/* Switch an initialised s to precision p (f64/f32: nothing to do; bf16/fp16: the master
 * weights rounded to f32, the forward's half rounding points on) and install --inject-bug
 * bug's hook (opt_dpzo_bug: none, or master-half, which needs a half p). Call before the
 * first step. */
dp_status opt_dpzo_set_precision(opt_dpzo *s, opt_prec p, opt_bug bug);
/* The bugs of optimized/strategies/bugs.c that apply to DP-ZO: DP_OK for none and
 * master-half, else a usage error; opt_dpzo_bug also gives the master-half rounding
 * (*fn, NULL without a bug) and refuses it without a half prec. */
dp_status opt_dpzo_bug_check(opt_bug bug);
dp_status opt_dpzo_bug(float (**fn)(float), opt_bug bug, opt_prec prec);

/* One step on every rank. `out` must be allocated with dp_dpzo_step_out_alloc; rank 0
 * receives the whole batch's per-example arrays (global order) when gather != 0, other
 * ranks (and gather == 0) only b, idx, sum, noise, scalar and loss. */
dp_status opt_dpzo_step(dp_dpzo_step_out *out, opt_dpzo *s, const dp_dataset *d, int64_t step, int gather);


#endif

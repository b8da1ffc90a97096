/* optimized/dpzo.h — DP-ZO on the engine, data-parallel over ranks (docs/engine.md
 * "DP-ZO"). The same algorithm as reference/dpzo.h (exact step of Algorithm 1):
 * the Poisson batch is decided once (every rank evaluates the same secret stream), rank
 * r takes the contiguous share [floor(b r / R), floor(b (r+1) / R)) of it, evaluates the
 * losses at theta +- phi z_j with the batched engine forward, clips the differences,
 * and ONE all-reduce of n + 2 scalars per step (the n clipped sums, the loss sum over
 * the kept pairs and the count of dropped pairs: non-finite differences contribute 0)
 * completes the step. The noise Z_j is the reference's single draw (every rank evaluates
 * the same element of the DPZO_NOISE stream, so it enters the release once); the update
 * is the reference's public update (ref_dpzo_update) on every rank. */
#ifndef OPT_DPZO_H
#define OPT_DPZO_H

#include "optimized/engine.h"
#include "reference/dpzo.h"

typedef struct {
    opt_backend *be;
    opt_model om;
    ref_dpzo_hparams hp;
    int nparams;
    int64_t *numel;
    double **theta;   /* host f64 parameters (the reference's theta) */
    double **work;    /* host theta +- phi z */
    double **z;       /* [n][nparams] -> numel: directions of the current step */
} opt_dpzo;

dp_status opt_dpzo_init(opt_dpzo *s, opt_backend *be, const ref_dpzo_hparams *hp, const ref_model *m);
void opt_dpzo_free(opt_dpzo *s);

/* One step on every rank. `out` must be allocated with ref_dpzo_step_out_alloc; rank 0
 * receives the whole batch's per-example arrays (global order) when gather != 0, other
 * ranks (and gather == 0) only b, idx, sum, noise, scalar and loss. */
dp_status opt_dpzo_step(ref_dpzo_step_out *out, opt_dpzo *s, const ref_dataset *d, int64_t step, int gather);

/* `dpcert train dpzo ...` (called by dp_cmd_train). */
dp_status opt_dpzo_run_cmd(int argc, char **argv, int *help, int *use_mpi);

#endif

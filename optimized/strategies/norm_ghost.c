/* optimized/strategies/norm_ghost.c — ghost norms (Li et al.); flat clipping sums by the
 * weighted second backward (docs/engine.md "DP-SGD strategies"). */
#include "optimized/dpsgd.h"

static opt_layer_mode ghost_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return OPT_LM_GHOST;
}

static double ghost_mem(const opt_mem_shape *m) { return opt_ghost_gram_elems(m->T) * m->nlin; } /* Gram products */

static void ghost_cost(double *persistent, double *transient, double b, int64_t t, int64_t p, int64_t d, double e,
                       opt_mixed_rule rule) {
    (void)persistent; (void)p; (void)d; (void)rule;
    *transient = b * opt_ghost_gram_elems((double)t) * e;
}

const opt_norm_strategy opt_norm_ghost = {"ghost",
                                            "two T x T Gram matrices per example, one layer at a time",
                                            ghost_mode, 1, 0, ghost_mem, ghost_cost};

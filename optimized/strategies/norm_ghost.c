/* optimized/strategies/norm_ghost.c — ghost norms (Li et al.); flat clipping sums by the
 * weighted second backward (docs/engine.md "DP-SGD strategies"). */
#include "optimized/dpsgd.h"

static opt_layer_mode ghost_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return OPT_LM_GHOST;
}

const opt_norm_strategy opt_norm_ghost = {"ghost", ghost_mode, 1, 0};

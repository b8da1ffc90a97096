/* optimized/strategies/norm_mixed_ghost.c — per layer ghost or instantiation by
 * --mixed-rule; flat clipping sums by the second backward (docs/engine.md). */
#include "optimized/dpsgd.h"

static opt_layer_mode mixed_ghost_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return opt_mixed_pick_ghost(o->mixed_rule, T, d, p) ? OPT_LM_GHOST : OPT_LM_INST;
}

const opt_norm_strategy opt_norm_mixed_ghost = {"mixed-ghost", mixed_ghost_mode, 1, 1};

/* optimized/strategies/norm_book_keeping.c — mixed norms and one reweighted GEMM per
 * layer, no second backward (Bu et al. 2023; docs/engine.md). */
#include "optimized/dpsgd.h"

static opt_layer_mode book_keeping_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return opt_mixed_pick_ghost(o->mixed_rule, T, d, p) ? OPT_LM_GHOST : OPT_LM_INST;
}

const opt_norm_strategy opt_norm_book_keeping = {"book-keeping", book_keeping_mode, 0, 1};

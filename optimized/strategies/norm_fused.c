/* optimized/strategies/norm_fused.c — FlashDP-style streaming blocks: a group's only
 * linear tensor is clipped in one pass, others stream norms then bk_gemm (docs/engine.md). */
#include "optimized/dpsgd.h"

static opt_layer_mode fused_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return alone ? OPT_LM_FUSED1 : OPT_LM_FUSEDNORM;
}

const opt_norm_strategy opt_norm_fused = {"fused", fused_mode, 0, 0};

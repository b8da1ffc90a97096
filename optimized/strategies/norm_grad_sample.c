/* optimized/strategies/norm_grad_sample.c — instantiate every per-example gradient
 * (docs/engine.md "DP-SGD strategies"). */
#include "optimized/dpsgd.h"

static opt_layer_mode grad_sample_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return OPT_LM_INST;
}

const opt_norm_strategy opt_norm_grad_sample = {"grad-sample", grad_sample_mode, 0, 0};

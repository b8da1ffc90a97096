/* optimized/strategies/norm_grad_sample.c — instantiate every per-example gradient
 * (docs/engine.md "DP-SGD strategies"). */
#include "optimized/dpsgd.h"

static opt_layer_mode grad_sample_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return OPT_LM_INST;
}

static double grad_sample_mem(const opt_mem_shape *m) { return m->P; } /* instantiated gradients */

static void grad_sample_cost(double *persistent, double *transient, double b, int64_t t, int64_t p, int64_t d, double e,
                             opt_mixed_rule rule) {
    (void)t; (void)transient; (void)rule;
    *persistent += b * ((double)p * (double)d) * e;
}

const opt_norm_strategy opt_norm_grad_sample = {"grad-sample",
                                            "all per-example gradients [B, Psi_linear] at once",
                                            grad_sample_mode, 0, 0, grad_sample_mem, grad_sample_cost};

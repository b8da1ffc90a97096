/* optimized/strategies/norm_fused.c — FlashDP-style streaming blocks: a group's only
 * linear tensor is clipped in one pass, others stream norms then bk_gemm (docs/engine.md). */
#include "optimized/dpsgd.h"

static opt_layer_mode fused_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return alone ? OPT_LM_FUSED1 : OPT_LM_FUSEDNORM;
}

static double fused_mem(const opt_mem_shape *m) { return m->P / m->bc + opt_ghost_gram_elems(m->T) * m->nlin; } /* one block per layer */

static void fused_cost(double *persistent, double *transient, double b, int64_t t, int64_t p, int64_t d, double e,
                       opt_mixed_rule rule) {
    (void)persistent; (void)b; (void)t; (void)rule;
    *transient = ((double)p * (double)d) * e;
}

const opt_norm_strategy opt_norm_fused = {"fused",
                                            "one per-example [p, d] block at a time (FlashDP), norms only",
                                            fused_mode, 0, 0, fused_mem, fused_cost};

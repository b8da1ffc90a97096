/* optimized/strategies/norm_mixed_ghost.c — per layer ghost or instantiation by
 * --mixed-rule; flat clipping sums by the second backward (docs/engine.md). */
#include "optimized/dpsgd.h"

static opt_layer_mode mixed_ghost_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return opt_mixed_pick_ghost(o->mixed_rule, T, d, p) ? OPT_LM_GHOST : OPT_LM_INST;
}

static double mixed_ghost_mem(const opt_mem_shape *m) { return m->P + opt_ghost_gram_elems(m->T) * m->nlin; } /* either, per layer */

/* the layer's buffer by the mixed rule: its Gram matrices or its instantiated gradient */
void opt_mixed_cost_transient(double *transient, double b, int64_t t, int64_t p, int64_t d, double e,
                              opt_mixed_rule rule) {
    *transient = b * (opt_mixed_pick_ghost(rule, t, d, p) ? opt_ghost_gram_elems((double)t) : (double)p * (double)d) * e;
}

static void mixed_ghost_cost(double *persistent, double *transient, double b, int64_t t, int64_t p, int64_t d, double e,
                             opt_mixed_rule rule) {
    (void)persistent;
    opt_mixed_cost_transient(transient, b, t, p, d, e, rule);
}

const opt_norm_strategy opt_norm_mixed_ghost = {"mixed-ghost",
                                            "per layer the cheaper of ghost and instantiation, one at a time",
                                            mixed_ghost_mode, 1, 1, mixed_ghost_mem, mixed_ghost_cost};

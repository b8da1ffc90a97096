/* optimized/strategies/norm_book_keeping.c — mixed norms and one reweighted GEMM per
 * layer, no second backward (Bu et al. 2023; docs/engine.md). */
#include "optimized/dpsgd.h"

static opt_layer_mode book_keeping_mode(const opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone) {
    return opt_mixed_pick_ghost(o->mixed_rule, T, d, p) ? OPT_LM_GHOST : OPT_LM_INST;
}

static double book_keeping_mem(const opt_mem_shape *m) { return m->P + m->act; } /* instantiated layers, reweighted G */

static void book_keeping_cost(double *persistent, double *transient, double b, int64_t t, int64_t p, int64_t d, double e,
                              opt_mixed_rule rule) {
    *persistent += b * (double)t * (double)p * e; /* the output gradients kept for the reweighted GEMM */
    opt_mixed_cost_transient(transient, b, t, p, d, e, rule);
}

const opt_norm_strategy opt_norm_book_keeping = {"book-keeping",
                                            "output gradients G of every layer kept + mixed-ghost transient",
                                            book_keeping_mode, 0, 1, book_keeping_mem, book_keeping_cost};

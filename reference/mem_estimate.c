/* reference/mem_estimate.c — memory estimates of the reference's runs
 * (reference/mem_estimate.h, docs/memory.md). */
#include "reference/mem_estimate.h"

#include <math.h>

double ref_mem_example(const ref_model_config *mc) {
    if (mc->kind == REF_MLP) {
        double w = mc->in + mc->classes;
        for (int i = 0; i < mc->nhidden; i++) w += mc->hidden[i];
        return 4 * w;
    }
    /* reference/model.c llama_example: per layer 9 [T, D] + 3 [T, F] + 2 [T] + [H, T, T];
     * final 3 [T, D] + [T] + [T, V]; backward 8 [T, D] + 3 [T, F] + [H, T, T] */
    const double T = mc->seq, D = mc->dim, F = mc->ffn, H = mc->heads, V = mc->vocab, L = mc->layers;
    const double per_layer = 9 * T * D + 3 * T * F + 2 * T + H * T * T;
    return per_layer * L + 11 * T * D + T + T * V + 3 * T * F + H * T * T;
}

double ref_mem_dpsgd(const ref_model_config *mc, const ref_dpsgd_config *c, double n_data, int exporting) {
    const double P = dp_mem_params(mc), n = n_data > 0 ? n_data : (double)c->n;
    const double b = dp_mem_batch_bound(c->q, n);
    /* model, m1, m2, example gradient, two Neumaier accumulators, clipped sum, noise,
     * private gradient (+ the copy before the step when exporting); per-sample gradients
     * [b, P]; with MPFR a 256-bit accumulator per element (64 bytes with its header) */
    double d = P * (9 + (exporting ? 1 : 0)) + b * P + ref_mem_example(mc) + 8 * b;
    double bytes = 8 * d + (c->precision == REF_PREC_MPFR ? 64 * P : 0);
    if (exporting) bytes += 2 * 8 * (b * P + 5 * P); /* the export set and its file image */
    return dp_mem_margin(bytes + (n_data > 0 ? dp_mem_dataset(mc, n_data) : 0));
}

double ref_mem_dpzo(const ref_model_config *mc, const ref_dpzo_hparams *hp, double n_data, int exporting) {
    const double P = dp_mem_params(mc), n = n_data > 0 ? n_data : (double)hp->n_data;
    /* theta (the model), perturbed copy, direction (+ before and an in-place run's second
     * state when exporting), the per-example loss arrays [n_spsa, N] x 3 */
    double d = P * (3 + (exporting ? 2 : 0)) + ref_mem_example(mc) + 3.0 * hp->n_spsa * n;
    double bytes = 8 * d;
    if (exporting) bytes += 2 * 8 * (2 * P + 3.0 * hp->n_spsa * n);
    return dp_mem_margin(bytes + (n_data > 0 ? dp_mem_dataset(mc, n_data) : 0));
}

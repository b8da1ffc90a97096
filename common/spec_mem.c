/* common/spec_mem.c — configuration-only memory estimates (common/spec_mem.h). */
#include "common/spec_mem.h"

#include <math.h>

double dp_mem_params(const dp_model_config *mc) {
    if (mc->kind == DP_MLP) {
        double p = 0, prev = mc->in;
        for (int i = 0; i <= mc->nhidden; i++) {
            double out = i < mc->nhidden ? mc->hidden[i] : mc->classes;
            p += prev * out + out;
            prev = out;
        }
        return p;
    }
    const double V = mc->vocab, D = mc->dim, F = mc->ffn, L = mc->layers;
    return V * D + L * (2 * D + 4 * D * D + 3 * F * D) + D + (mc->tied ? 0 : V * D);
}

double dp_mem_dataset(const dp_model_config *mc, double n) {
    return mc->kind == DP_MLP ? n * (8.0 * mc->in + 4) : n * 4.0 * mc->seq;
}

double dp_mem_batch_bound(double q, double n) {
    const double L = log(1e15), mu = q * n;
    const double b = mu + L / 3 + sqrt(L * L / 9 + 2 * L * mu);
    return b < n ? ceil(b) : n;
}

double dp_mem_margin(double bytes) { return 1.25 * bytes + 64.0 * 1048576.0; }

/* optimized/opt_mem.c — memory estimates of the engine's runs (optimized/opt_mem.h,
 * docs/memory.md). */
#include "optimized/opt_mem.h"
#include "optimized/ledger.h"

#include <math.h>

double opt_mem_example(const dp_model_config *mc) {
    if (mc->kind == DP_MLP) { /* per linear layer: input A, output, output gradient G, input gradient */
        double w = mc->in + mc->classes;
        for (int i = 0; i < mc->nhidden; i++) w += mc->hidden[i];
        return 4 * w;
    }
    /* per layer: the tape's A and G of the 7 linear layers (A: 4 [T, D] + [T, F]; G: 4 [T, D]
     * + 2 [T, F] + [T, D]), norms, rope and swiglu buffers (8 [T, D] + 3 [T, F] + 2 [T]) and the
     * attention probabilities and their gradient 2 [H, T, T]; head: logits and their
     * gradient 2 [T, V], final norm 3 [T, D] */
    const double T = mc->seq, D = mc->dim, F = mc->ffn, H = mc->heads, V = mc->vocab, L = mc->layers;
    return L * (17 * T * D + 6 * T * F + 2 * T + 2 * H * T * T) + 2 * T * V + 3 * T * D;
}

/* Linear layers of the model (ghost norms: 2 T^2 scratch each per example) and T. */
static void linear_layers(double *nlin, double *T, const dp_model_config *mc) {
    if (mc->kind == DP_MLP) { *nlin = mc->nhidden + 1; *T = 1; return; }
    *nlin = 7.0 * mc->layers + 1;
    *T = mc->seq;
}

double opt_mem_dpsgd(const dp_model_config *mc, const dp_dpsgd_config *c, const opt_dp_options *o, double esize,
                     int R, double n_data, int exporting) {
    const double P = dp_mem_params(mc), n = n_data > 0 ? n_data : (double)c->n;
    const double b = dp_mem_batch_bound(c->q, n);
    const double bl = ceil(b / R), bc = ceil(bl / (double)c->micro_batches); /* local share, one chunk */
    double nlin, T;
    linear_layers(&nlin, &T, mc);
    /* per-example elements of the strategy in one chunk: its descriptor's */
    const opt_mem_shape shape = {P, T, nlin, bc, opt_mem_example(mc)};
    const double strat = opt_norm_strategies[o->strategy]->mem_per_example(&shape);
    /* backend (device) buffers in the dtype: weights, their gradients, [S | Z], private
     * gradient, two optimizer states; the chunk's activations, tape and strategy buffers */
    double dev = esize * (7 * P + bc * (opt_mem_example(mc) + strat + 8));
    /* --precision bf16|fp16 (docs/precision.md): the f32 master weights (at most P per
     * rank) and the rounding's host scratch (one block of 65536 doubles) */
    if (opt_prec_is_half(o->prec)) dev += 4 * P + 8 * 65536.0;
    /* host f64 (ledger tags host_model, host_buffers): the model and the private gradient's
     * check (gathered, sharded layouts); exporting: also the copy before the step, S and Z,
     * and the step's outputs (clipped sum, noise, private gradient); per-example arrays */
    double host = 8 * ((exporting ? 8 : 2) * P + 16 * b);
    if (exporting) /* per-sample gradients (local share, gathered on rank 0), the export set and its file image */
        host += 8 * (bl * P + b * P) + 2 * 8 * (b * P + 5 * P);
    return dp_mem_margin(dev + host + (n_data > 0 ? dp_mem_dataset(mc, n_data) : 0));
}

double opt_mem_dpzo(const dp_model_config *mc, const dp_dpzo_hparams *hp, double esize, int R, double n_data,
                    int exporting) {
    const double P = dp_mem_params(mc), n = n_data > 0 ? n_data : (double)hp->n_data;
    const double bl = ceil(dp_mem_batch_bound(hp->q, n) / R);
    /* host f64: the model, theta, the perturbed copy, the direction (+ before when
     * exporting), the loss arrays [n_spsa, N] x 3; backend: the weights and one forward
     * of the local share */
    double host = 8 * (P * (4 + (exporting ? 1 : 0)) + 3.0 * hp->n_spsa * n);
    if (exporting) host += 2 * 8 * (2 * P + 3.0 * hp->n_spsa * n);
    double dev = esize * (P + bl * opt_mem_example(mc));
    return dp_mem_margin(host + dev + (n_data > 0 ? dp_mem_dataset(mc, n_data) : 0));
}

double opt_mem_dataset_bytes(const dp_dataset *d) {
    double n = (double)d->n, b = 0;
    if (d->tokens) b += 4.0 * n * d->seq;
    if (d->x) b += 8.0 * n * d->in;
    if (d->y) b += 4.0 * n;
    return b;
}

double opt_mem_model_bytes(const dp_model *m) {
    double b = 0;
    for (int p = 0; p < m->nparams; p++) b += 8.0 * (double)m->params[p].numel;
    return b;
}

void opt_mem_note_run(opt_backend *be, const dp_dataset *d, const dp_model *m, int copies) {
    if (d) opt_mem_note(be, OPT_MEM_DATASET, (int64_t)opt_mem_dataset_bytes(d));
    if (m) opt_mem_note(be, OPT_MEM_HOST_MODEL, (int64_t)(copies * opt_mem_model_bytes(m)));
}

/* optimized/bench/bench_strategies.c — time of one DP-SGD step per strategy on the host
 * backend, measured side by side in one run (same model, batch, seed), reported as
 * ratios to grad-sample and to a non-private step (forward + backward + summed
 * gradient, no per-example work). Usage: bench_strategies [mlp|llama] [threads]
 * Reproduce: make BUILD=build-opt build-opt/bench/optimized_bench_strategies &&
 *            build-opt/bench/optimized_bench_strategies llama 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimized/dpsgd.h"
#include "optimized/opt_spec.h"
#include "optimized/bench/bench_util.h"

int main(int argc, char **argv) {
    int llama = argc < 2 || strcmp(argv[1], "mlp") != 0;
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (threads < 1) threads = 1;
    dp_model_config mc;
    dp_model_config_default(&mc, llama ? DP_LLAMA : DP_MLP);
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 256; c.q = 0.125; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2;
    dp_model m;
    dp_dataset d;
    if (dp_model_init(&m, &mc, c.seed) != DP_OK || dp_dataset_generate(&d, &mc, c.n, c.seed) != DP_OK) {
        fprintf(stderr, "bench: %s\n", dp_last_error());
        return 3;
    }
    opt_backend_config bc = {"host", DP_F64, threads, 0};
    opt_backend *be = NULL;
    if (opt_backend_create(&be, &bc) != DP_OK) { fprintf(stderr, "bench: %s\n", dp_last_error()); return 3; }
    const int reps = 3;
    double t[OPT_STRAT_COUNT + 1];
    /* non-private baseline on the same Poisson batches: forward + backward + one summed
     * backward (c = 1) */
    {
        opt_model om;
        opt_model_create(&om, be, &m);
        int64_t *idx = malloc(sizeof(int64_t) * (size_t)c.n), B = 0;
        void **g = calloc((size_t)om.np, sizeof(void *)), *ones = NULL;
        for (int p = 0; p < om.np; p++) be->ops.alloc(be->ctx, &g[p], sizeof(double) * (size_t)om.numel[p]);
        double *h1 = malloc(sizeof(double) * (size_t)c.n);
        for (int64_t i = 0; i < c.n; i++) h1[i] = 1.0;
        be->ops.alloc(be->ctx, &ones, sizeof(double) * (size_t)c.n);
        be->ops.upload_f64(be->ctx, ones, h1, c.n);
        double t0 = opt_bench_now();
        for (int r = 1; r <= reps; r++) {
            opt_tape tp;
            opt_poisson(idx, &B, c.key, r, c.q, c.n);
            opt_forward_backward(&tp, &om, &d, idx, B);
            opt_backward_weighted(g, &om, &tp, ones);
            opt_tape_free(&tp);
        }
        free(idx); free(h1);
        t[OPT_STRAT_COUNT] = (opt_bench_now() - t0) / reps;
        for (int p = 0; p < om.np; p++) be->ops.free(be->ctx, g[p]);
        be->ops.free(be->ctx, ones);
        free(g);
        opt_model_free(&om);
    }
    for (int k = 0; k < OPT_STRAT_COUNT; k++) {
        opt_dp_options o = {.strategy = (opt_strategy)k, .mixed_rule = OPT_MIXED_FLOP, .noise_mode = OPT_NOISE_SINGLE, .bug = OPT_BUG_NONE};
        opt_dpsgd s;
        if (opt_dpsgd_init(&s, be, &c, &o, &m) != DP_OK) { fprintf(stderr, "bench: %s\n", dp_last_error()); return 3; }
        dp_dpsgd_step_out out;
        memset(&out, 0, sizeof out);
        double t0 = opt_bench_now();
        for (int r = 1; r <= reps; r++) opt_dpsgd_step(&out, &s, &d, r);
        t[k] = (opt_bench_now() - t0) / reps;
        dp_dpsgd_step_free(&out);
        opt_dpsgd_free(&s);
    }
    printf("host backend, %s (default config), N=%lld q=%g (expected batch %g; same batches for all rows), "
           "%d thread(s), %d reps\n", llama ? "llama" : "mlp", (long long)c.n, c.q, c.q * (double)c.n, threads, reps);
    printf("%-14s %12s %14s %16s\n", "strategy", "s/step", "/grad-sample", "/non-private");
    for (int k = 0; k < OPT_STRAT_COUNT; k++)
        printf("%-14s %12.4f %14.2f %16.2f\n", opt_strategy_names[k], t[k], t[k] / t[0], t[k] / t[OPT_STRAT_COUNT]);
    printf("%-14s %12.4f\n", "non-private", t[OPT_STRAT_COUNT]);
    printf("reproduce: %s %s %d\n", argv[0], llama ? "llama" : "mlp", threads);
    opt_backend_destroy(be);
    dp_dataset_free(&d);
    dp_model_free(&m);
    return 0;
}

/* optimized/bench/bench_strategies.c — seconds per DP-SGD step of each norm strategy on the
 * host backend, measured side by side in one run (same model, batches, seed), each row's
 * ratio to a non-private step (forward + backward + summed gradient, no per-example work:
 * the baseline), with the bytes sent per step and the ledger's peak (common/bench.h,
 * docs/benchmarks.md). Usage: bench_strategies [-w W] [-n N] [-t THREADS] [mlp|llama]
 * Reproduce: make build/bench/optimized_bench_strategies &&
 *            build/bench/optimized_bench_strategies -w 1 -n 5 -t 1 llama */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench.h"
#include "optimized/dpsgd.h"
#include "optimized/ledger.h"
#include "optimized/opt_spec.h"
#include "optimized/bench/bench_util.h"

#define MAX_ITERS 1000

/* The non-private step: forward, backward and one summed backward (c = 1) on the same Poisson
 * batches; iteration r uses the batch of step r. */
static dp_status nonprivate(double *t, double *bytes, double *peak, const dp_bench_opts *bo, const opt_backend_config *bc,
                            const dp_model *m, const dp_dataset *d, const dp_dpsgd_config *c) {
    opt_backend *be = NULL;
    DP_TRY(opt_backend_create(&be, bc));
    opt_model om;
    dp_status st = opt_model_create(&om, be, m);
    if (st != DP_OK) { opt_backend_destroy(be); return st; }
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)c->n), B = 0;
    void **g = calloc((size_t)om.np, sizeof(void *)), *ones = NULL;
    double *h1 = malloc(sizeof(double) * (size_t)c->n);
    if (!idx || !g || !h1) st = DP_ERR_NOMEM;
    for (int p = 0; st == DP_OK && p < om.np; p++) st = be->ops.alloc(be->ctx, &g[p], sizeof(double) * (size_t)om.numel[p]);
    for (int64_t i = 0; st == DP_OK && i < c->n; i++) h1[i] = 1.0;
    if (st == DP_OK) st = be->ops.alloc(be->ctx, &ones, sizeof(double) * (size_t)c->n);
    if (st == DP_OK) st = be->ops.upload_f64(be->ctx, ones, h1, c->n);
    for (int r = 1; st == DP_OK && r <= bo->warmup + bo->iters; r++) {
        opt_tape tp;
        if (r == bo->warmup + 1) opt_bench_sent_bytes(be); /* bytes of the timed iterations only */
        const double t0 = dp_bench_now();
        opt_poisson(idx, &B, c->key, r, c->q, c->n);
        st = opt_forward_backward(&tp, &om, d, idx, B);
        if (st == DP_OK) st = opt_backward_weighted(g, &om, &tp, ones);
        opt_tape_free(&tp);
        if (r > bo->warmup) t[r - bo->warmup - 1] = dp_bench_now() - t0;
    }
    *bytes = st == DP_OK ? opt_bench_sent_bytes(be) / bo->iters : -1;
    *peak = opt_bench_peak(be);
    free(idx);
    free(h1);
    for (int p = 0; g && p < om.np; p++) if (g[p]) be->ops.free(be->ctx, g[p]);
    if (ones) be->ops.free(be->ctx, ones);
    free(g);
    opt_model_free(&om);
    opt_backend_destroy(be);
    return st;
}

/* One strategy: warm-up steps, then each timed step alone; a fresh backend, so the peak is its own. */
static dp_status strategy(double *t, double *bytes, double *peak, const dp_bench_opts *bo, const opt_backend_config *bc,
                          const dp_model *m, const dp_dataset *d, const dp_dpsgd_config *c, opt_strategy k) {
    opt_backend *be = NULL;
    DP_TRY(opt_backend_create(&be, bc));
    opt_dp_options o = {.strategy = k, .mixed_rule = OPT_MIXED_FLOP, .noise_mode = OPT_NOISE_SINGLE, .bug = OPT_BUG_NONE};
    opt_dpsgd s;
    dp_status st = opt_dpsgd_init(&s, be, c, &o, m);
    if (st != DP_OK) { opt_backend_destroy(be); return st; }
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    opt_bench_sent_bytes(be);
    for (int r = 1; st == DP_OK && r <= bo->warmup + bo->iters; r++) {
        if (r == bo->warmup + 1) opt_bench_sent_bytes(be); /* bytes of the timed steps only */
        const double t0 = dp_bench_now();
        st = opt_dpsgd_step(&out, &s, d, r);
        if (r > bo->warmup) t[r - bo->warmup - 1] = dp_bench_now() - t0;
    }
    *bytes = st == DP_OK ? opt_bench_sent_bytes(be) / bo->iters : -1;
    *peak = opt_bench_peak(be);
    dp_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    opt_backend_destroy(be);
    return st;
}

int main(int argc, char **argv) {
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse(&bo, &help, argc, argv, 1, 3, "[mlp|llama]") != DP_OK) {
        fprintf(stderr, "bench_strategies: %s\n", dp_last_error());
        return 2;
    }
    if (help) return 0;
    if (bo.iters > MAX_ITERS) { fprintf(stderr, "bench_strategies: -n at most %d\n", MAX_ITERS); return 2; }
    const int llama = bo.npos < 1 || strcmp(bo.pos[0], "mlp") != 0;
    const int threads = bo.threads ? bo.threads : 1;
    dp_model_config mc;
    dp_model_config_default(&mc, llama ? DP_LLAMA : DP_MLP);
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 256; c.q = 0.125; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2;
    dp_model m;
    dp_dataset d;
    const int mrc = opt_bench_model_data(&m, &d, &mc, &c, "bench_strategies");
    if (mrc != 0) return mrc;
    const opt_backend_config bc = {"host", DP_F64, threads, 0};
    char what[160];
    snprintf(what, sizeof what, "one DP-SGD step per norm strategy, %s (default config), N=%lld q=%g, same batches",
             llama ? "llama" : "mlp", (long long)c.n, c.q);
    dp_bench_header("bench_strategies", what, "host", "f64", 1, threads, &bo);
    double t[MAX_ITERS], bytes, peak, base;
    dp_bench_stats s;
    dp_status st = nonprivate(t, &bytes, &peak, &bo, &bc, &m, &d, &c);
    if (st == DP_OK) {
        dp_bench_stats_of(&s, t, bo.iters);
        base = s.median;
        dp_bench_row("non-private", &s, 0, 1, bytes, peak);
    }
    for (int k = 0; st == DP_OK && k < OPT_STRAT_COUNT; k++) {
        if ((st = strategy(t, &bytes, &peak, &bo, &bc, &m, &d, &c, (opt_strategy)k)) != DP_OK) break;
        dp_bench_stats_of(&s, t, bo.iters);
        dp_bench_row(opt_strategy_names[k], &s, base, 0, bytes, peak);
    }
    dp_bench_reproduce(argv[0], &bo);
    dp_dataset_free(&d);
    dp_model_free(&m);
    if (st != DP_OK) { fprintf(stderr, "bench_strategies: %s\n", dp_last_error()); return 3; }
    return 0;
}

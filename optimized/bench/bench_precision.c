/* optimized/bench/bench_precision.c — mixed precision on the host backend
 * (docs/precision.md "Memory"): seconds per DP-SGD step and the memory ledger's peaks
 * (all tags, the model states, the activations, the workspace) at f32, bf16 and fp16, as ratios to f32, measured side
 * by side in one run: the precisions take turns step by step (round robin), so machine
 * load affects them alike; the medians of the timed steps are compared.
 *
 * Model: llama V 64, D 64, L 2, H 4, F 128, T 16 (P = 90,432), 64 examples, q = 0.5,
 * flat abadi C = 1, sigma = 1, AdamW, one thread, strategies grad-sample and book-keeping;
 * 1 warm-up step, then 5 timed steps per precision.
 *
 * What to expect on the host: bf16/fp16 are SLOWER than f32. The parameters are 2-byte
 * half tensors (2 P bytes saved) but the f32 master weights add 4 P (tag master_weights;
 * DP-ZeRO shards them, test_zero_memory shows the saving at N > 2); the tape's linear
 * inputs and output gradients are 2-byte containers (the activations peak drops), the
 * other activations and the per-example gradients stay f32 (docs/precision.md "Memory");
 * every rounding point, every stash into the half tape and every decode into an f32
 * workspace is a host conversion pass, so the half types cost time. The time saving
 * needs half GEMMs on a GPU (the GPU issue).
 * DP-ZO rows (docs/precision.md "DP-ZO"): the same model and data, one direction, phi 0.1,
 * C 1, sigma 1, lr 1e-3, round robin as above. Its half parameters live in the forward's
 * f32 containers and its f32 master on the host (not in the ledger), so its ledger peak
 * is the f32 run's; the perturbation rounding and the A/Y rounding points cost time.
 * Rows on the harness (common/bench.h, docs/benchmarks.md): STRATEGY/PREC, the f32 row of each
 * group its baseline; the ledger's peaks of the model states, activations and workspace follow
 * each group as "# peaks" lines.
 * Reproduce: make -j2 && build/bench/optimized_bench_precision -w 1 -n 5 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimized/dpsgd.h"
#include "optimized/dpzo.h"
#include "optimized/ledger.h"
#include "common/bench.h"
#include "optimized/bench/bench_util.h"

enum { NPREC = 3, MAX_ITERS = 1000 };
static int WARM = 1, REPS = 5; /* -w, -n */

/* The rows of one group (ratios to precs[0] = f32, its baseline) and their ledger peaks by tag. */
static void print_rows(const char *what, const opt_prec *precs, double t[NPREC][MAX_ITERS], opt_backend *const *be) {
    dp_bench_stats st[NPREC];
    opt_mem_report r[NPREC];
    for (int i = 0; i < NPREC; i++) {
        dp_bench_stats_of(&st[i], t[i], REPS);
        opt_mem_get(&r[i], be[i]);
    }
    for (int i = 0; i < NPREC; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s/%s", what, opt_prec_names[precs[i]]);
        dp_bench_row(name, &st[i], st[0].median, i == 0, -1, (double)r[i].peak_total);
    }
    for (int i = 0; i < NPREC; i++)
        printf("# peaks %s/%s: model states %llu B (%.3f of f32), activations %llu B (%.3f), workspace %llu B\n", what,
               opt_prec_names[precs[i]], (unsigned long long)r[i].peak_model_states,
               (double)r[i].peak_model_states / (double)r[0].peak_model_states,
               (unsigned long long)r[i].peak[OPT_MEM_ACTIVATIONS],
               r[0].peak[OPT_MEM_ACTIVATIONS] ? (double)r[i].peak[OPT_MEM_ACTIVATIONS] / (double)r[0].peak[OPT_MEM_ACTIVATIONS] : 0.0,
               (unsigned long long)r[i].peak[OPT_MEM_WORKSPACE]);
}

/* DP-ZO: seconds per step and ledger peaks at f32, bf16, fp16, round robin. */
static int bench_dpzo(const opt_prec *precs, const dp_model *m, const dp_dataset *d, int64_t n) {
    dp_dpzo_hparams hp = {.n_data = n, .q = 0.5, .steps = WARM + REPS, .clip = 1, .sigma = 1, .mech = DP_DPZO_GAUSSIAN,
                          .phi = 0.1, .lr = 1e-3, .n_spsa = 1, .seed = {.k = 1}, .key = {.k = 2}};
    opt_backend *be[NPREC] = {0};
    opt_dpzo s[NPREC];
    memset(s, 0, sizeof s);
    static double t[NPREC][MAX_ITERS];
    dp_dpzo_step_out out;
    memset(&out, 0, sizeof out);
    dp_status st = dp_dpzo_step_out_alloc(&out, hp.n_data, hp.n_spsa);
    for (int i = 0; i < NPREC && st == DP_OK; i++) {
        opt_backend_config bc = {.name = "host", .dtype = opt_prec_backend_dtype(precs[i]), .threads = 1, .use_mpi = 0};
        st = opt_backend_create(&be[i], &bc);
        if (st == DP_OK) st = opt_dpzo_init(&s[i], be[i], &hp, m);
        if (st == DP_OK) st = opt_dpzo_set_precision(&s[i], precs[i], OPT_BUG_NONE);
    }
    for (int64_t k = 1; st == DP_OK && k <= WARM + REPS; k++)
        for (int i = 0; st == DP_OK && i < NPREC; i++) {
            double t0 = dp_bench_now();
            st = opt_dpzo_step(&out, &s[i], d, k, 0);
            if (k > WARM) t[i][k - WARM - 1] = dp_bench_now() - t0;
        }
    int rc = st == DP_OK ? 0 : 3;
    if (rc) fprintf(stderr, "bench_precision (dpzo): %s\n", dp_last_error());
    else print_rows("dpzo", precs, t, be);
    dp_dpzo_step_out_free(&out);
    for (int i = 0; i < NPREC; i++) {
        if (s[i].be) opt_dpzo_free(&s[i]);
        if (be[i]) opt_backend_destroy(be[i]);
    }
    return rc;
}

int main(int argc, char **argv) {
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse(&bo, &help, argc, argv, 1, 5, "") != DP_OK) {
        fprintf(stderr, "bench_precision: %s\n", dp_last_error());
        return 2;
    }
    if (help) return 0;
    if (bo.iters > MAX_ITERS || bo.npos) { fprintf(stderr, "bench_precision: -n at most %d, no arguments\n", MAX_ITERS); return 2; }
    WARM = bo.warmup;
    REPS = bo.iters;
    static const opt_prec precs[NPREC] = {OPT_PREC_F32, OPT_PREC_BF16, OPT_PREC_FP16};
    static const opt_strategy strats[] = {OPT_STRAT_GRAD_SAMPLE, OPT_STRAT_BOOK_KEEPING};
    dp_model_config mc;
    dp_model_config_default(&mc, DP_LLAMA);
    mc.vocab = 64; mc.dim = 64; mc.layers = 2; mc.heads = 4; mc.ffn = 128; mc.seq = 16;
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 64; c.q = 0.5; c.steps = WARM + REPS; c.clip = 1; c.sigma = 1; c.opt = DP_OPT_ADAMW;
    c.seed.k = 1; c.key.k = 2;
    dp_model m;
    dp_dataset d;
    const int mrc = opt_bench_model_data(&m, &d, &mc, &c, "bench_precision");
    if (mrc != 0) return mrc;
    char what[200];
    snprintf(what, sizeof what, "one step per precision (f32, bf16, fp16 in turn), llama V%d D%d L%d T%d, P = %lld, "
             "%lld examples, q = %g, AdamW", mc.vocab, mc.dim, mc.layers, mc.seq, (long long)m.total, (long long)c.n, c.q);
    dp_bench_header("bench_precision", what, "host", "f32|bf16|fp16", 1, 1, &bo);
    int rc = 0;
    for (size_t si = 0; si < sizeof strats / sizeof strats[0] && rc == 0; si++) {
        opt_backend *be[NPREC] = {0};
        opt_dpsgd s[NPREC];
        memset(s, 0, sizeof s);
        static double t[NPREC][MAX_ITERS];
        dp_dpsgd_step_out out;
        memset(&out, 0, sizeof out);
        dp_status st = DP_OK;
        for (int i = 0; i < NPREC && st == DP_OK; i++) {
            opt_backend_config bc = {.name = "host", .dtype = opt_prec_backend_dtype(precs[i]), .threads = 1, .use_mpi = 0};
            opt_dp_options o = {.strategy = strats[si], .prec = precs[i]};
            st = opt_backend_create(&be[i], &bc);
            if (st == DP_OK) st = opt_dpsgd_init(&s[i], be[i], &c, &o, &m);
        }
        for (int64_t k = 1; st == DP_OK && k <= WARM + REPS; k++)
            for (int i = 0; st == DP_OK && i < NPREC; i++) {
                double t0 = dp_bench_now();
                st = opt_dpsgd_step(&out, &s[i], &d, k);
                if (k > WARM) t[i][k - WARM - 1] = dp_bench_now() - t0;
            }
        if (st != DP_OK) { fprintf(stderr, "bench_precision: %s\n", dp_last_error()); rc = 3; }
        else print_rows(opt_strategy_names[strats[si]], precs, t, be);
        dp_dpsgd_step_free(&out);
        for (int i = 0; i < NPREC; i++) {
            opt_dpsgd_free(&s[i]);
            if (be[i]) opt_backend_destroy(be[i]);
        }
    }
    if (rc == 0) rc = bench_dpzo(precs, &m, &d, c.n);
    printf("# host: half parameters and half tape (linear inputs, output gradients) but f32 master weights on top; the "
           "rounding, stash and decoding passes cost time, not saved: docs/precision.md \"Memory\"\n");
    dp_bench_reproduce(argv[0], &bo);
    dp_model_free(&m);
    dp_dataset_free(&d);
    return rc;
}

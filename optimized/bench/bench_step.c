/* optimized/bench/bench_step.c — seconds per DP-SGD step of the llama on the host
 * backend, per strategy and for a non-private step on the same batch, as medians of
 * timed steps after warm-up, with the process's peak RSS; the dpcert side of
 * `make bench-peers` (ci/peers/bench-peers.sh, docs/performance.md).
 *
 * The batch is the whole dataset (N = B, q = 1: every step has exactly B examples),
 * flat abadi clipping C = 1, sigma = 1, SGD lr 0.1. The non-private step ("non-dp") is
 * forward + backward on the same tape, the summed gradient of each linear layer as one
 * GEMM over the B T rows (bk_gemm with c = 1), of each other parameter as a sum over
 * examples (clip_accum with c = 1), then the SGD update: no norms, clipping or noise.
 *
 * One iteration: one step (a DP-SGD step of the strategy, or the non-private step), timed
 * alone. Rows (common/bench.h, docs/benchmarks.md): non-dp (the baseline, when selected)
 * then each strategy, each on a fresh backend (its ledger peak its own); after each row its
 * "RESULT tool=dpcert strategy=S dtype=... median_s=X cpu_s=Y peak_rss_mb=Z ..." line, the
 * format ci/peers/bench-peers.sh and peers_report.py parse (cpu_s: the median of the process
 * CPU seconds of a step, all threads).
 *
 * Usage: bench_step [-w W] [-n N] [-t THREADS] [--dtype f64|f32] [--dim D] [--layers L]
 *                   [--seq T] [--batch B] [--ffn F] [--heads H] [--vocab V]
 *                   [--strategy NAME|non-dp|all] [--perf-ctl FIFO]
 * --perf-ctl FIFO: writes "enable" to FIFO once the warm-up steps are done, so that
 * `perf record -D -1 --control fifo:FIFO` profiles the timed steps only (the profiles of
 * docs/performance.md).
 * Peak RSS is the process's (ru_maxrss): with --strategy all it is the maximum over
 * all strategies run so far, so run one strategy per process to compare memory.
 * Reproduce (defaults, quick): make build/bench/optimized_bench_step && build/bench/optimized_bench_step */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "optimized/dpsgd.h"
#include "optimized/ledger.h"
#include "optimized/opt_mem.h"
#include "optimized/host/host_gemm.h"
#include "optimized/bench/bench_util.h"
#include "optimized/bench/bench_nondp.h"

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}
/* the process's resident set now (VmRSS of /proc/self/status), MB; 0 if unreadable */
static double rss_now_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atof(line + 6);
    if (f) fclose(f);
    return kb / 1024.0;
}

/* "enable" into the perf control fifo (if any) after the warm-up */
static void perf_enable(const char *fifo) {
    if (!fifo) return;
    FILE *f = fopen(fifo, "w");
    if (f) { fputs("enable\n", f); fclose(f); }
}

enum { MAX_ITERS = 1000 };

/* W + N iterations of row k (a strategy, or k == OPT_STRAT_COUNT: non-dp) on a fresh backend:
 * t[], cpu[] the N timed ones; *peak the ledger's peak, *bytes the bytes sent per step */
static dp_status run_row(double *t, double *cpu, double *bytes, double *peak, int k, const opt_backend_config *bc,
                         const dp_model *m, const dp_dataset *d, const dp_dpsgd_config *c, const dp_bench_opts *bo,
                         const char *perf_ctl) {
    opt_backend *be = NULL;
    DP_TRY(opt_backend_create(&be, bc));
    opt_mem_note_run(be, d, m, 1); /* the data set and the host model, in the ledger */
    dp_status st;
    opt_dpsgd s;
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    opt_bench_nondp nd;
    memset(&s, 0, sizeof s);
    memset(&nd, 0, sizeof nd);
    /* as `dpcert train` without --export: no host copies of the step's P-vectors */
    opt_dp_options o = {.strategy = (opt_strategy)k, .mixed_rule = OPT_MIXED_FLOP, .noise_mode = OPT_NOISE_SINGLE,
                        .bug = OPT_BUG_NONE, .no_step_vectors = 1};
    st = k < OPT_STRAT_COUNT ? opt_dpsgd_init(&s, be, c, &o, m) : opt_bench_nondp_init(&nd, be, m, c->n);
    if (st != DP_OK) memset(&s, 0, sizeof s); /* a failed init cleans up after itself */
    for (int r = 0; r < bo->warmup + bo->iters && st == DP_OK; r++) {
        if (r == bo->warmup) { perf_enable(perf_ctl); opt_bench_sent_bytes(be); }
        double t0 = dp_bench_now(), c0 = dp_bench_cpu_now();
        st = k < OPT_STRAT_COUNT ? opt_dpsgd_step(&out, &s, d, r + 1) : opt_bench_nondp_run(&nd, d);
        if (r >= bo->warmup) {
            t[r - bo->warmup] = dp_bench_now() - t0;
            cpu[r - bo->warmup] = dp_bench_cpu_now() - c0;
        }
    }
    *bytes = st == DP_OK ? opt_bench_sent_bytes(be) / bo->iters : -1;
    *peak = opt_bench_peak(be);
    dp_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    opt_bench_nondp_free(&nd);
    opt_backend_destroy(be);
    return st;
}

int main(int argc, char **argv) {
    const char *dt = "f64", *strat = "all", *perf_ctl = NULL;
    opt_bench_llama la = {.dim = "32", .layers = "2", .heads = "4", .ffn = "0", .seq = "16", .vocab = "64", .batch = "16"};
    const dp_bench_flag flags[] = {{"--dtype", &dt, NULL}, {"--strategy", &strat, NULL}, {"--perf-ctl", &perf_ctl, NULL},
                                   OPT_BENCH_LLAMA_FLAGS(la)};
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse_flags(&bo, &help, argc, argv, 1, 3,
                             "[--dtype f64|f32] " OPT_BENCH_LLAMA_USAGE " [--strategy NAME|non-dp|all] [--perf-ctl FIFO]",
                             flags, (int)(sizeof flags / sizeof flags[0])) != DP_OK) {
        fprintf(stderr, "bench_step: %s\n", dp_last_error());
        return 2;
    }
    if (help) return 0;
    const int threads = bo.threads ? bo.threads : 1;
    dp_model_config mc;
    int64_t B = 0;
    if (opt_bench_llama_config(&mc, &B, &la) != DP_OK) {
        fprintf(stderr, "bench_step: %s\n", dp_last_error());
        return 2;
    }
    const double base_rss = rss_now_mb(); /* the binary's baseline, before the run's memory */
    int known = strcmp(strat, "all") == 0 || strcmp(strat, "non-dp") == 0;
    for (int k = 0; k < OPT_STRAT_COUNT; k++) known |= strcmp(strat, opt_strategy_names[k]) == 0;
    if (bo.iters > MAX_ITERS || (strcmp(dt, "f64") && strcmp(dt, "f32")) || !known) {
        fprintf(stderr, "bench_step: bad -n (at most %d), --dtype or --strategy\n", MAX_ITERS);
        return 2;
    }
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = B; c.q = 1.0; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2;
    dp_model m;
    dp_dataset d;
    const int mrc = opt_bench_model_data(&m, &d, &mc, &c, "bench_step");
    if (mrc != 0) return mrc;
    opt_backend_config bc = {"host", strcmp(dt, "f32") == 0 ? DP_F32 : DP_F64, threads, 0};
    char what[200];
    snprintf(what, sizeof what, "one step of the llama D=%d L=%d T=%d H=%d F=%d V=%d, B=%lld (q = 1), per strategy and "
             "non-dp (the baseline)", mc.dim, mc.layers, mc.seq, mc.heads, mc.ffn, mc.vocab, (long long)B);
    dp_bench_header("bench_step", what, "host", dt, 1, threads, &bo);
    static double t[MAX_ITERS], cpu[MAX_ITERS];
    double base = 0;
    int rc = 0;
    for (int i = 0; i <= OPT_STRAT_COUNT; i++) {
        const int k = (i + OPT_STRAT_COUNT) % (OPT_STRAT_COUNT + 1); /* non-dp first: the baseline */
        const char *name = k < OPT_STRAT_COUNT ? opt_strategy_names[k] : "non-dp";
        if (strcmp(strat, "all") && strcmp(strat, name)) continue;
        double bytes = -1, peak = -1;
        if (run_row(t, cpu, &bytes, &peak, k, &bc, &m, &d, &c, &bo, perf_ctl) != DP_OK) {
            fprintf(stderr, "bench_step: %s: %s\n", name, dp_last_error());
            rc = 3;
            continue;
        }
        const double med = dp_bench_row_of(name, t, bo.iters, base, k == OPT_STRAT_COUNT, bytes, peak);
        if (k == OPT_STRAT_COUNT) base = med;
        dp_bench_stats cs;
        dp_bench_stats_of(&cs, cpu, bo.iters); /* t[] is sorted by the row */
        printf("RESULT tool=dpcert strategy=%s dtype=%s threads=%d D=%d L=%d T=%d B=%lld F=%d H=%d V=%d reps=%d "
               "median_s=%.6f min_s=%.6f max_s=%.6f cpu_s=%.6f peak_rss_mb=%.1f base_rss_mb=%.1f ledger_peak_mb=%.1f "
               "isa=%s\n",
               name, dt, threads, mc.dim, mc.layers, mc.seq, (long long)B, mc.ffn, mc.heads, mc.vocab, bo.iters, med,
               t[0], t[bo.iters - 1], cs.median, peak_rss_mb(), base_rss, peak / (1024.0 * 1024.0),
               opt_hgemm_isa_name(OPT_HGEMM_ISA_AUTO));
        fflush(stdout);
    }
    dp_bench_reproduce(argv[0], &bo);
    dp_dataset_free(&d);
    dp_model_free(&m);
    return rc;
}

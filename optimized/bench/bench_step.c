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
 * Usage: bench_step [--dtype f64|f32] [--threads N] [--dim D] [--layers L] [--seq T]
 *                   [--batch B] [--ffn F] [--heads H] [--vocab V] [--warmup W] [--reps R]
 *                   [--strategy NAME|non-dp|all] [--perf-ctl FIFO]
 * --perf-ctl FIFO: writes "enable" to FIFO once the warm-up steps are done, so that
 * `perf record -D -1 --control fifo:FIFO` profiles the timed steps only (the profiles of
 * docs/performance.md).
 * One line per strategy: "RESULT strategy=S dtype=... median_s=X cpu_s=Y peak_rss_mb=Z ..."
 * (cpu_s: the median of the process CPU seconds of a step, all threads).
 * Peak RSS is the process's (ru_maxrss): with --strategy all it is the maximum over
 * all strategies run so far, so run one strategy per process to compare memory.
 * Reproduce (defaults, quick): make build/bench/optimized_bench_step && build/bench/optimized_bench_step */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "optimized/dpsgd.h"
#include "optimized/ledger.h"
#include "optimized/opt_mem.h"
#include "optimized/host/host_gemm.h"
#include "optimized/bench/bench_util.h"
#include "optimized/bench/bench_nondp.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
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

static const char *arg(int argc, char **argv, const char *name, const char *dflt) {
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return argv[i + 1];
    return dflt;
}

int main(int argc, char **argv) {
    const char *dt = arg(argc, argv, "--dtype", "f64"), *strat = arg(argc, argv, "--strategy", "all");
    int threads = atoi(arg(argc, argv, "--threads", "1")), warm = atoi(arg(argc, argv, "--warmup", "1"));
    int reps = atoi(arg(argc, argv, "--reps", "3"));
    const char *perf_ctl = arg(argc, argv, "--perf-ctl", NULL);
    dp_model_config mc;
    dp_model_config_default(&mc, DP_LLAMA);
    mc.dim = atoi(arg(argc, argv, "--dim", "32"));
    mc.layers = atoi(arg(argc, argv, "--layers", "2"));
    mc.seq = atoi(arg(argc, argv, "--seq", "16"));
    mc.heads = atoi(arg(argc, argv, "--heads", "4"));
    mc.ffn = atoi(arg(argc, argv, "--ffn", "0"));
    mc.vocab = atoi(arg(argc, argv, "--vocab", "64"));
    if (mc.ffn <= 0) mc.ffn = 2 * mc.dim;
    int64_t B = atoll(arg(argc, argv, "--batch", "16"));
    const double base_rss = rss_now_mb(); /* the binary's baseline, before the run's memory */
    if (threads < 1 || reps < 1 || warm < 0 || B < 1 || (strcmp(dt, "f64") && strcmp(dt, "f32"))) {
        fprintf(stderr, "bench_step: bad --threads/--reps/--warmup/--batch/--dtype\n");
        return 2;
    }
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = B; c.q = 1.0; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2;
    dp_model m;
    dp_dataset d;
    if (dp_model_init(&m, &mc, c.seed) != DP_OK || dp_dataset_generate(&d, &mc, c.n, c.seed) != DP_OK) {
        fprintf(stderr, "bench_step: %s\n", dp_last_error());
        return 2;
    }
    opt_backend_config bc = {"host", strcmp(dt, "f32") == 0 ? DP_F32 : DP_F64, threads, 0};
    opt_backend *be = NULL;
    if (opt_backend_create(&be, &bc) != DP_OK) { fprintf(stderr, "bench_step: %s\n", dp_last_error()); return 3; }
    opt_mem_note_run(be, &d, &m, 1); /* the data set and the host model, in the ledger */
    double *t = malloc(sizeof(double) * (size_t)(warm + reps)), *cpu = malloc(sizeof(double) * (size_t)(warm + reps));
    int rc = 0;
    for (int k = 0; k <= OPT_STRAT_COUNT; k++) {
        const char *name = k < OPT_STRAT_COUNT ? opt_strategy_names[k] : "non-dp";
        if (strcmp(strat, "all") && strcmp(strat, name)) continue;
        dp_status st = DP_OK;
        if (k < OPT_STRAT_COUNT) {
            /* as `dpcert train` without --export: no host copies of the step's P-vectors */
            opt_dp_options o = {.strategy = (opt_strategy)k, .mixed_rule = OPT_MIXED_FLOP, .noise_mode = OPT_NOISE_SINGLE,
                                .bug = OPT_BUG_NONE, .no_step_vectors = 1};
            opt_dpsgd s;
            if ((st = opt_dpsgd_init(&s, be, &c, &o, &m)) == DP_OK) {
                dp_dpsgd_step_out out;
                memset(&out, 0, sizeof out);
                for (int r = 0; r < warm + reps && st == DP_OK; r++) {
                    if (r == warm) perf_enable(perf_ctl);
                    double t0 = opt_bench_now(), c0 = cpu_now();
                    st = opt_dpsgd_step(&out, &s, &d, r + 1);
                    t[r] = opt_bench_now() - t0;
                    cpu[r] = cpu_now() - c0;
                }
                dp_dpsgd_step_free(&out);
                opt_dpsgd_free(&s);
            }
        } else {
            opt_bench_nondp nd;
            if ((st = opt_bench_nondp_init(&nd, be, &m, B)) == DP_OK) {
                for (int r = 0; r < warm + reps && st == DP_OK; r++) {
                    if (r == warm) perf_enable(perf_ctl);
                    double t0 = opt_bench_now(), c0 = cpu_now();
                    st = opt_bench_nondp_run(&nd, &d);
                    t[r] = opt_bench_now() - t0;
                    cpu[r] = cpu_now() - c0;
                }
                opt_bench_nondp_free(&nd);
            }
        }
        if (st != DP_OK) { fprintf(stderr, "bench_step: %s: %s\n", name, dp_last_error()); rc = 3; continue; }
        qsort(t + warm, (size_t)reps, sizeof(double), opt_bench_cmp_double);
        qsort(cpu + warm, (size_t)reps, sizeof(double), opt_bench_cmp_double);
        opt_mem_report mr;
        opt_mem_get(&mr, be);
        printf("RESULT tool=dpcert strategy=%s dtype=%s threads=%d D=%d L=%d T=%d B=%lld F=%d H=%d V=%d reps=%d "
               "median_s=%.6f min_s=%.6f max_s=%.6f cpu_s=%.6f peak_rss_mb=%.1f base_rss_mb=%.1f ledger_peak_mb=%.1f "
               "isa=%s\n",
               name, dt, threads, mc.dim, mc.layers, mc.seq, (long long)B, mc.ffn, mc.heads, mc.vocab, reps,
               t[warm + reps / 2], t[warm], t[warm + reps - 1], cpu[warm + reps / 2], peak_rss_mb(), base_rss,
               (double)mr.peak_total / (1024.0 * 1024.0), opt_hgemm_isa_name(OPT_HGEMM_ISA_AUTO));
        fflush(stdout);
    }
    free(t); free(cpu);
    opt_backend_destroy(be);
    dp_dataset_free(&d);
    dp_model_free(&m);
    return rc;
}

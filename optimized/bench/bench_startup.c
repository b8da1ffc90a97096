/* optimized/bench/bench_startup.c — start-up of a training run (issue 30, goal 3): a
 * DP-SGD run of one step whose Poisson batch is empty, llama D = 512 (L = 4, T = 512,
 * H = 4, F = 1024, V = 64, P = 10.5 M parameters), f32 and f64, 1 and 2 threads:
 *   - end to end: the wall time of `$DPCERT train dpsgd ... --q 1e-4 --steps 1` (goal:
 *     <= 0.3 s), -n runs (default 3) after -w (default 1), the configurations interleaved;
 *   - where the time goes: the same calls in this process, each phase timed (wall and
 *     process CPU): the data set, the model's initialisation (P Gaussians), the engine's
 *     set-up (device buffers, the parameters' upload), the step (the noise of P
 *     positions, the optimizer, the private gradient's check), reading the parameters
 *     back and the update check, and the teardown; -n in-process runs after -w.
 * One iteration: one run (end to end: one `dpcert train` process; in process: one run of the
 * phases). Rows (common/bench.h, docs/benchmarks.md): e2e-f32-1t (the baseline of the
 * end-to-end rows), e2e-f32-2t, e2e-f64-1t, e2e-f64-2t; per in-process configuration its total
 * (inproc-f32-1t, ...: the baseline) then each phase (inproc-f32-1t/step, ...; ratio: the
 * phase's share of the total); after each total a
 * "# cpu" line (the phases' median CPU seconds). bytes/step and peak_ledger_B n/a
 * (end to end: another process; in process: a backend per run, destroyed in the run).
 * Reproduce: make -j2 && DPCERT=build/dpcert build/bench/optimized_bench_startup -w 1 -n 3
 * (make bench sets DPCERT). Without DPCERT the end-to-end rows are skipped (a "#" line). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench.h"
#include "optimized/dpsgd.h"


enum { PH_DATA, PH_INIT, PH_SETUP, PH_STEP, PH_CHECK, PH_FREE, NPH };
/* data set; model init (P Gaussians); engine set-up (alloc, upload); step (noise, optimizer,
 * check); parameters back and the update check; teardown */
static const char *const k_phase[NPH] = {"data-set", "model-init", "engine-setup", "step", "params-back+check",
                                          "teardown"};

/* One in-process run: wall[ph], cpu[ph] seconds. */
static int phases(double *wall, double *cpu, dp_dtype dt, int threads) {
    dp_model_config mc;
    dp_model_config_default(&mc, DP_LLAMA);
    mc.dim = 512; mc.layers = 4; mc.seq = 512; mc.heads = 4; mc.ffn = 1024; mc.vocab = 64;
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 16; c.q = 1e-4; c.clip = 1.0; c.sigma = 1.0; c.key.k = 2; c.seed.k = 1;
    opt_backend_config bc = {"host", dt, threads, 0};
    opt_backend *be = NULL;
    dp_dataset d;
    dp_model m;
    opt_dpsgd s;
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    opt_dp_options o = {.strategy = OPT_STRAT_BOOK_KEEPING, .no_step_vectors = 1};
    double w0 = dp_bench_now(), c0 = dp_bench_cpu_now();
#define LAP(ph)                                                                                    \
    do {                                                                                           \
        double w1 = dp_bench_now(), c1 = dp_bench_cpu_now();                                               \
        wall[ph] = w1 - w0; cpu[ph] = c1 - c0; w0 = w1; c0 = c1;                                   \
    } while (0)
    if (opt_backend_create(&be, &bc) != DP_OK || dp_dataset_generate(&d, &mc, c.n, c.seed) != DP_OK) return 3;
    LAP(PH_DATA);
    if (dp_model_init(&m, &mc, c.seed) != DP_OK) return 3;
    LAP(PH_INIT);
    dp_status st = opt_dpsgd_init(&s, be, &c, &o, &m);
    LAP(PH_SETUP);
    if (st == DP_OK) st = opt_dpsgd_step(&out, &s, &d, 1);
    LAP(PH_STEP);
    double **host = calloc((size_t)m.nparams, sizeof(double *));
    for (int p = 0; host && p < m.nparams; p++) host[p] = m.params[p].data;
    if (st == DP_OK) st = host ? opt_dpsgd_get_params(&s, host) : DP_ERR_NOMEM;
    if (st == DP_OK) st = opt_check_update_finite(&m, NULL, 1);
    LAP(PH_CHECK);
    free(host);
    dp_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    dp_model_free(&m);
    dp_dataset_free(&d);
    opt_backend_destroy(be);
    LAP(PH_FREE);
#undef LAP
    if (st != DP_OK) fprintf(stderr, "bench_startup: %s\n", dp_last_error());
    return st == DP_OK ? 0 : 3;
}

enum { MAX_ITERS = 100 };

int main(int argc, char **argv) {
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse(&bo, &help, argc, argv, 1, 3, "") != DP_OK || bo.iters > MAX_ITERS || bo.threads) {
        fprintf(stderr, "bench_startup: %s\n", dp_last_error()[0] ? dp_last_error() : "-n at most 100; no -t (rows name "
                "their threads)");
        return 2;
    }
    if (help) return 0;
    const char *dpcert = getenv("DPCERT");
    dp_bench_header("bench_startup", "one training run of one step with an empty batch, llama D=512 L=4 T=512 F=1024 "
                    "(P = 10.5 M), book-keeping", "host", "f32|f64", 1, 0, &bo);
    static double t[4][MAX_ITERS], w[4][NPH][MAX_ITERS], c[4][NPH][MAX_ITERS], tot[4][MAX_ITERS];
    if (dpcert) {
        for (int r = 0; r < bo.warmup + bo.iters; r++)
            for (int k = 0; k < 4; k++) {
                char cmd[1024];
                snprintf(cmd, sizeof cmd,
                         "'%s' train dpsgd --impl optimized --backend host --strategy book-keeping --model llama "
                         "--dim 512 --layers 4 --heads 4 --ffn 1024 --seq 512 --vocab 64 --dataset-size 16 --q 1e-4 "
                         "--steps 1 --seed 1 --noise-key 2 --threads %d --dtype %s --max-memory 64G >/dev/null",
                         dpcert, 1 + k % 2, k < 2 ? "f32" : "f64");
                double t0 = dp_bench_now();
                int rc = system(cmd);
                if (r >= bo.warmup) t[k][r - bo.warmup] = dp_bench_now() - t0;
                if (rc != 0) { printf("# the run failed (%s)\n", cmd); return 1; }
            }
        double base = 0;
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof name, "e2e-%s-%dt", k < 2 ? "f32" : "f64", 1 + k % 2);
            const double med = dp_bench_row_of(name, t[k], bo.iters, base, k == 0, -1, -1);
            if (k == 0) base = med;
        }
        printf("# goal: end to end <= 0.3 s\n");
    } else
        printf("# end to end: skipped (set DPCERT to the dpcert binary)\n");
    for (int r = 0; r < bo.warmup + bo.iters; r++)
        for (int k = 0; k < 4; k++) {
            double pw[NPH], pc[NPH];
            if (phases(pw, pc, k < 2 ? DP_F32 : DP_F64, 1 + k % 2) != 0) return 3;
            if (r < bo.warmup) continue;
            tot[k][r - bo.warmup] = 0;
            for (int ph = 0; ph < NPH; ph++) {
                w[k][ph][r - bo.warmup] = pw[ph];
                c[k][ph][r - bo.warmup] = pc[ph];
                tot[k][r - bo.warmup] += pw[ph];
            }
        }
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "inproc-%s-%dt", k < 2 ? "f32" : "f64", 1 + k % 2);
        const double base = dp_bench_row_of(name, tot[k], bo.iters, 0, 1, -1, -1);
        for (int ph = 0; ph < NPH; ph++) {
            snprintf(name, sizeof name, "inproc-%s-%dt/%s", k < 2 ? "f32" : "f64", 1 + k % 2, k_phase[ph]);
            dp_bench_row_of(name, w[k][ph], bo.iters, base, 0, -1, -1);
        }
        printf("# cpu %s %dt (median s):", k < 2 ? "f32" : "f64", 1 + k % 2);
        for (int ph = 0; ph < NPH; ph++) {
            dp_bench_stats s;
            dp_bench_stats_of(&s, c[k][ph], bo.iters);
            printf(" %s %.3f;", k_phase[ph], s.median);
        }
        printf("\n");
    }
    dp_bench_reproduce(argv[0], &bo);
    return 0;
}

/* optimized/bench/bench_startup.c — start-up of a training run (issue 30, goal 3): a
 * DP-SGD run of one step whose Poisson batch is empty, llama D = 512 (L = 4, T = 512,
 * H = 4, F = 1024, V = 64, P = 10.5 M parameters), f32 and f64, 1 and 2 threads:
 *   - end to end: the wall time of `$DPCERT train dpsgd ... --q 1e-4 --steps 1` (goal:
 *     <= 0.3 s), the median of RUNS (environment, default 5) runs, interleaved;
 *   - where the time goes: the same calls in this process, each phase timed (wall and
 *     process CPU): the data set, the model's initialisation (P Gaussians), the engine's
 *     set-up (device buffers, the parameters' upload), the step (the noise of P
 *     positions, the optimizer, the private gradient's check), reading the parameters
 *     back and the update check, and the teardown.
 * Reproduce: make -j2 && DPCERT=build/dpcert build/bench/optimized_bench_startup
 * (make bench sets DPCERT). Without DPCERT the end-to-end part is skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimized/bench/bench_util.h"
#include "optimized/dpsgd.h"

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { PH_DATA, PH_INIT, PH_SETUP, PH_STEP, PH_CHECK, PH_FREE, NPH };
static const char *const k_phase[NPH] = {"data set", "model init (P Gaussians)", "engine set-up (alloc, upload)",
                                          "step (noise, optimizer, check)", "parameters back, update check",
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
    double w0 = opt_bench_now(), c0 = cpu_now();
#define LAP(ph)                                                                                    \
    do {                                                                                           \
        double w1 = opt_bench_now(), c1 = cpu_now();                                               \
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

int main(void) {
    const char *dpcert = getenv("DPCERT");
    const int runs = getenv("RUNS") ? atoi(getenv("RUNS")) : 5;
    printf("Start-up of a training run: one step with an empty batch, llama D=512 L=4 T=512 F=1024 (P = 10.5 M)\n");
    if (dpcert) {
        enum { MAXRUNS = 64 };
        double t[4][MAXRUNS];
        const int nr = runs < 1 ? 1 : runs > MAXRUNS ? MAXRUNS : runs;
        for (int r = 0; r < nr; r++)
            for (int k = 0; k < 4; k++) {
                char cmd[1024];
                snprintf(cmd, sizeof cmd,
                         "'%s' train dpsgd --impl optimized --backend host --strategy book-keeping --model llama "
                         "--dim 512 --layers 4 --heads 4 --ffn 1024 --seq 512 --vocab 64 --dataset-size 16 --q 1e-4 "
                         "--steps 1 --seed 1 --noise-key 2 --threads %d --dtype %s --max-memory 64G >/dev/null",
                         dpcert, 1 + k % 2, k < 2 ? "f32" : "f64");
                double t0 = opt_bench_now();
                int rc = system(cmd);
                t[k][r] = opt_bench_now() - t0;
                if (rc != 0) { printf("the run failed (%s)\n", cmd); return 1; }
            }
        printf("end to end, `dpcert train` (wall, median of %d interleaved runs; goal <= 0.3 s):\n", nr);
        for (int k = 0; k < 4; k++) {
            qsort(t[k], (size_t)nr, sizeof(double), opt_bench_cmp_double);
            printf("  %s, %d thread(s): %.3f s (min %.3f)\n", k < 2 ? "f32" : "f64", 1 + k % 2, t[k][nr / 2], t[k][0]);
        }
    } else
        printf("end to end: skipped (set DPCERT to the dpcert binary)\n");
    printf("where the time goes (this process, the same calls; wall / CPU seconds):\n");
    for (int k = 0; k < 4; k++) {
        double w[NPH], c[NPH], tw = 0, tc = 0;
        if (phases(w, c, k < 2 ? DP_F32 : DP_F64, 1 + k % 2) != 0) return 3;
        printf("  %s, %d thread(s):\n", k < 2 ? "f32" : "f64", 1 + k % 2);
        for (int ph = 0; ph < NPH; ph++) {
            printf("    %-32s %7.3f / %7.3f\n", k_phase[ph], w[ph], c[ph]);
            tw += w[ph]; tc += c[ph];
        }
        printf("    %-32s %7.3f / %7.3f\n", "total", tw, tc);
    }
    return 0;
}

/* optimized/bench/bench_ranks.c — the MPI path on one machine (issue 30, goal 4): seconds
 * per DP-SGD step of the llama with 2 MPI ranks x 1 thread against 1 rank x 2 threads on
 * the same batch, replicated (data parallel) and zero2, as the ratio
 *     t(2 ranks x 1 thread) / t(1 rank x 2 threads)   (goal: <= 1.1)
 * and 1 rank x 1 thread for scale. Model: llama D = 128, L = 4, T = 128, H = 4, F = 256,
 * V = 64; N = B = 16 examples, q = 1 (every step the same 16); book-keeping, f32, SGD;
 * no host copies of the step's vectors (as `dpcert train` without --export). Each
 * configuration runs as `mpirun -n R bench_ranks --worker LAYOUT THREADS` (1 warm-up
 * step, then 3 timed between barriers); rounds interleave the configurations and the
 * ratios are of the medians over ROUNDS (environment, default 3).
 * Reproduce: make -j2 && build/bench/optimized_bench_ranks
 * Without mpirun: SKIP (exit 77). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/bench/bench_mpi.h"
#include "optimized/bench/bench_util.h"
#include "optimized/dpsgd.h"

static int worker(const char *layout, int threads) {
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return 3;
    int k = -1;
    for (int i = 0; opt_sharding_names[i]; i++)
        if (strcmp(opt_sharding_names[i], layout) == 0) k = i;
    dp_model_config mc;
    dp_model_config_default(&mc, DP_LLAMA);
    mc.dim = 128; mc.layers = 4; mc.seq = 128; mc.heads = 4; mc.ffn = 256; mc.vocab = 64;
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 16; c.q = 1.0; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2;
    dp_model m;
    dp_dataset d;
    opt_backend *be = NULL;
    opt_backend_config bc = {.name = "host", .dtype = DP_F32, .threads = threads, .use_mpi = 1};
    opt_dp_options o = {.strategy = OPT_STRAT_BOOK_KEEPING, .mixed_rule = OPT_MIXED_FLOP,
                        .sharding = (opt_sharding)(k < 0 ? 0 : k), .no_step_vectors = 1};
    opt_dpsgd s;
    memset(&s, 0, sizeof s);
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    dp_status st = k < 0 ? dp_error(DP_ERR_USAGE, "unknown layout %s", layout) : DP_OK;
    if (st == DP_OK) st = bench_worker_start(&m, &d, &be, &s, &out, &mc, &c, &bc, &o);
    double sec = 0;
    if (st == DP_OK) st = bench_timed_steps(&sec, &out, &s, &d, be, 2, 3);
    if (st == DP_OK && be->comm.rank == 0) printf("RESULT %s %d %d %.6f\n", layout, be->comm.size, threads, sec);
    if (st == DP_OK) { dp_model_free(&m); dp_dataset_free(&d); }
    return bench_worker_end(st, "bench_ranks", &out, &s, be);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--worker") == 0) return worker(argv[2], atoi(argv[3]));
    if (system("command -v mpirun >/dev/null 2>&1") != 0) { printf("SKIP: mpirun not found\n"); return 77; }
    const int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 3;
    /* ranks, threads, layout */
    static const struct { int n, th; const char *layout; } cf[] = {
        {1, 2, "replicated"}, {2, 1, "replicated"}, {1, 2, "zero2"}, {2, 1, "zero2"}, {1, 1, "replicated"}};
    enum { NC = sizeof cf / sizeof cf[0], MAXR = 64 };
    double t[NC][MAXR];
    int rc = 0;
    printf("DP-SGD step on one machine: 2 MPI ranks x 1 thread against 1 rank x 2 threads, same batch\n");
    printf("(llama D=128 L=4 T=128 B=16, f32, book-keeping, %d interleaved rounds, medians; reproduce: %s)\n",
           rounds < 1 ? 1 : rounds > MAXR ? MAXR : rounds, argv[0]);
    for (int r = 0; r < rounds && r < MAXR; r++)
        for (int i = 0; i < NC; i++) {
            char line[512], args[64], lay[32];
            int n = 0, th = 0;
            snprintf(args, sizeof args, "%s %d", cf[i].layout, cf[i].th);
            t[i][r] = -1;
            if (bench_run_worker(line, sizeof line, cf[i].n, argv[0], args) == 0 &&
                sscanf(line, "RESULT %31s %d %d %lf", lay, &n, &th, &t[i][r]) != 4)
                t[i][r] = -1;
            if (t[i][r] < 0) { printf("%s %d x %d failed\n", cf[i].layout, cf[i].n, cf[i].th); rc = 1; }
        }
    if (rc) return rc;
    const int nr = rounds < 1 ? 1 : rounds > MAXR ? MAXR : rounds;
    double med[NC];
    for (int i = 0; i < NC; i++) {
        qsort(t[i], (size_t)nr, sizeof(double), opt_bench_cmp_double);
        med[i] = t[i][nr / 2];
    }
    printf("%-11s %5s %7s %10s\n", "layout", "ranks", "threads", "s/step");
    for (int i = 0; i < NC; i++) printf("%-11s %5d %7d %10.4f\n", cf[i].layout, cf[i].n, cf[i].th, med[i]);
    printf("ratio t(2 ranks x 1 thread) / t(1 rank x 2 threads): replicated %.3f, zero2 %.3f (goal <= 1.1)\n",
           med[1] / med[0], med[3] / med[2]);
    return 0;
}

/* optimized/bench/bench_ranks.c — the MPI path on one machine (issue 30, goal 4): seconds
 * per DP-SGD step of the llama with 2 MPI ranks x 1 thread against 1 rank x 2 threads on
 * the same batch, replicated (data parallel) and zero2, as the ratio
 *     t(2 ranks x 1 thread) / t(1 rank x 2 threads)   (goal: <= 1.1)
 * and 1 rank x 1 thread for scale. Model: llama D = 128, L = 4, T = 128, H = 4, F = 256,
 * V = 64; N = B = 16 examples, q = 1 (every step the same 16); book-keeping, f32, SGD;
 * no host copies of the step's vectors (as `dpcert train` without --export). Each
 * configuration runs as `mpirun -n R bench_ranks --worker W N LAYOUT THREADS` (-w warm-up
 * steps, default 1, then -n timed, default 3, each between barriers); --rounds R (default 3)
 * rounds interleave the configurations, and a row's statistics are over the R x N steps.
 * One iteration: one DP-SGD step between two barriers (rank 0's clock). Rows (common/bench.h,
 * docs/benchmarks.md): replicated 1 rank x 2 threads (the baseline of the replicated rows),
 * replicated 2 x 1, zero2 1 x 2 (the baseline of the zero2 rows), zero2 2 x 1, replicated
 * 1 x 1; then the "# goal" line.
 * Usage: bench_ranks [-w W] [-n N] [--rounds R]
 * Reproduce: make -j2 && build/bench/optimized_bench_ranks -w 1 -n 3 --rounds 3
 * Without mpirun: SKIP (exit 77). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/bench/bench_mpi.h"
#include "optimized/dpsgd.h"

static int worker(const dp_bench_opts *bo, const char *layout, int threads) {
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
    if (st == DP_OK) st = bench_worker_start(&m, &d, &be, &s, &out, &mc, &c, &bc, &o, bo->warmup);
    double t[BENCH_MPI_MAX_ITERS], bytes = 0;
    if (st == DP_OK) st = bench_timed_steps(t, &bytes, &out, &s, &d, be, bo->warmup + 1, bo->iters);
    double mine[2] = {bytes, be ? opt_bench_peak(be) : 0}, most[2] = {0, 0};
    MPI_Reduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    char fields[96];
    snprintf(fields, sizeof fields, "%.0f %.0f", most[0], most[1]);
    if (st == DP_OK) bench_worker_result(be, fields, t, bo->iters);
    if (st == DP_OK) { dp_model_free(&m); dp_dataset_free(&d); }
    return bench_worker_end(st, "bench_ranks", &out, &s, be);
}

enum { MAX_ROUNDS = 16 };

int main(int argc, char **argv) {
    dp_bench_opts bo;
    if (argc == 6 && strcmp(argv[1], "--worker") == 0) {
        bench_worker_opts(&bo, argv);
        return worker(&bo, argv[4], atoi(argv[5]));
    }
    const char *rounds_s = "3";
    const dp_bench_flag flags[] = {{"--rounds", &rounds_s, NULL}};
    int r = bench_mpi_parse(&bo, argc, argv, "bench_ranks", 1, 3, "[--rounds R]", flags, 1);
    if (r) return r == 1 ? 0 : r;
    const int rounds = atoi(rounds_s);
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "bench_ranks: --rounds needs an integer in [1, %d] (got '%s')\n", MAX_ROUNDS, rounds_s);
        return 2;
    }
    /* ranks, threads, layout, the row of its baseline */
    static const struct { int n, th; const char *layout; int base; } cf[] = {
        {1, 2, "replicated", 0}, {2, 1, "replicated", 0}, {1, 2, "zero2", 2}, {2, 1, "zero2", 2}, {1, 1, "replicated", 0}};
    enum { NC = sizeof cf / sizeof cf[0] };
    static double t[NC][MAX_ROUNDS * BENCH_MPI_MAX_ITERS];
    double by[NC], peak[NC];
    int rc = 0;
    char what[240];
    snprintf(what, sizeof what, "one DP-SGD step between barriers, llama D=128 L=4 T=128 B=16, book-keeping, SGD; 2 MPI "
             "ranks x 1 thread against 1 rank x 2 threads, %d interleaved rounds", rounds);
    dp_bench_header("bench_ranks", what, "host (MPI)", "f32", 0, 0, &bo);
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i < NC; i++) {
            static char line[BENCH_MPI_LINE];
            char args[64];
            snprintf(args, sizeof args, "%s %d", cf[i].layout, cf[i].th);
            if (bench_run_worker(line, sizeof line, cf[i].n, argv[0], &bo, args) != 0 ||
                sscanf(line, "RESULT %lf %lf", &by[i], &peak[i]) != 2 ||
                bench_result_times(t[i] + k * bo.iters, bo.iters, line, 2) != 0) {
                printf("# %s %d x %d failed\n", cf[i].layout, cf[i].n, cf[i].th);
                rc = 1;
            }
        }
    if (rc) return rc;
    double med[NC] = {0};
    for (int i = 0; i < NC; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s-%drx%dt", cf[i].layout, cf[i].n, cf[i].th);
        med[i] = dp_bench_row_of(name, t[i], rounds * bo.iters, med[cf[i].base], cf[i].base == i, by[i], peak[i]);
    }
    printf("# goal: t(2 ranks x 1 thread) / t(1 rank x 2 threads): replicated %.3f, zero2 %.3f (goal <= 1.1)\n",
           med[1] / med[0], med[3] / med[2]);
    dp_bench_reproduce(argv[0], &bo);
    return 0;
}

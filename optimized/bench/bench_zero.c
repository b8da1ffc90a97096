/* optimized/bench/bench_zero.c — DP-ZeRO: seconds per DP-SGD step and bytes communicated
 * per rank per step for replicated, zero1, zero2 and zero3 at N = 1, 2, 4 MPI ranks,
 * reported as ratios to the replicated run at the same N (docs/zero.md "Benchmark").
 * Model: mlp 256-512-512-10 (P = 399,114 parameters, AdamW, f64), 512 examples,
 * q = 0.125 (about 64 examples per step), ghost norms; -w warm-up steps (default 1), then -n
 * timed (default 4). One iteration: one DP-SGD step between two barriers (rank 0's clock).
 * Rows (common/bench.h, docs/benchmarks.md): per N, replicated (the baseline), zero1, zero2,
 * zero3; bytes/step the largest bytes sent by a rank, peak_ledger_B the largest ledger peak;
 * after each row a "# model states" line (the ledger's peak of the model states, the ratio to
 * replicated at the same N). The parent runs every configuration side by side in one
 * invocation, each as `mpirun -n N bench_zero --worker W N STAGE`.
 * Reproduce: make -j2 && build/bench/optimized_bench_zero -w 1 -n 4
 * Without mpirun: SKIP (exit 77). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include "optimized/dpsgd.h"
#include "optimized/bench/bench_mpi.h"
#include "optimized/ledger.h"

static int worker(const dp_bench_opts *bo, const char *stage) {
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return 3;
    int k = -1;
    for (int i = 0; opt_sharding_names[i]; i++)
        if (strcmp(opt_sharding_names[i], stage) == 0) k = i;
    dp_model_config mc;
    dp_model_config_default(&mc, DP_MLP);
    mc.in = 256; mc.nhidden = 2; mc.hidden[0] = 512; mc.hidden[1] = 512; mc.classes = 10;
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 512; c.q = 0.125; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2; c.opt = DP_OPT_ADAMW;
    dp_model m;
    dp_dataset d;
    opt_backend *be = NULL;
    opt_backend_config bc = {.name = "host", .dtype = DP_F64, .threads = 1, .use_mpi = 1};
    opt_dp_options o = {.strategy = OPT_STRAT_GHOST, .sharding = (opt_sharding)(k < 0 ? 0 : k)};
    opt_dpsgd s;
    memset(&s, 0, sizeof s);
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    dp_status st = k < 0 ? dp_error(DP_ERR_USAGE, "unknown stage %s", stage) : DP_OK;
    if (st == DP_OK) st = bench_worker_start(&m, &d, &be, &s, &out, &mc, &c, &bc, &o, bo->warmup);
    double t[BENCH_MPI_MAX_ITERS], bytes = 0;
    if (st == DP_OK) st = bench_timed_steps(t, &bytes, &out, &s, &d, be, bo->warmup + 1, bo->iters);
    opt_mem_report mr;
    if (be) opt_mem_get(&mr, be);
    /* the largest over the ranks: bytes sent per step, ledger peak, model states */
    double mine[3] = {bytes, be ? (double)mr.peak_total : 0, be ? (double)mr.peak_model_states : 0}, most[3] = {0, 0, 0};
    MPI_Reduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    char fields[128];
    snprintf(fields, sizeof fields, "%.0f %.0f %.0f", most[0], most[1], most[2]);
    if (st == DP_OK) bench_worker_result(be, fields, t, bo->iters);
    return bench_worker_end(st, "bench_zero", &out, &s, be);
}

int main(int argc, char **argv) {
    dp_bench_opts bo;
    if (argc == 5 && strcmp(argv[1], "--worker") == 0) {
        bench_worker_opts(&bo, argv);
        return worker(&bo, argv[4]);
    }
    int r = bench_mpi_parse(&bo, argc, argv, "bench_zero", 1, 4, "", NULL, 0);
    if (r) return r == 1 ? 0 : r;
    static const int ns[] = {1, 2, 4};
    static const char *const stages[] = {"replicated", "zero1", "zero2", "zero3"};
    dp_bench_header("bench_zero",
                    "one DP-SGD step between barriers, mlp 256-512-512-10 (P = 399,114), AdamW, ghost, ~64 "
                    "examples/step, per stage at N = 1, 2, 4 ranks (replicated the baseline at each N)",
                    "host (MPI)", "f64", 0, 1, &bo);
    int rc = 0;
    for (int a = 0; a < 3; a++) {
        double base = 0, ms_rep = 0;
        for (int b = 0; b < 4; b++) {
            static char line[BENCH_MPI_LINE];
            double t[BENCH_MPI_MAX_ITERS], by = -1, peak = -1, ms = -1;
            char name[64];
            snprintf(name, sizeof name, "%s-N%d", stages[b], ns[a]);
            if (bench_run_worker(line, sizeof line, ns[a], argv[0], &bo, stages[b]) != 0 ||
                sscanf(line, "RESULT %lf %lf %lf", &by, &peak, &ms) != 3 ||
                bench_result_times(t, bo.iters, line, 3) != 0) {
                printf("# %s failed\n", name);
                rc = 1;
                continue;
            }
            const double med = dp_bench_row_of(name, t, bo.iters, base, b == 0, by, peak);
            if (b == 0) { base = med; ms_rep = ms; }
            printf("# model states %s: %.0f B (%.3f of replicated)\n", name, ms, ms_rep > 0 ? ms / ms_rep : NAN);
        }
    }
    dp_bench_reproduce(argv[0], &bo);
    return rc;
}

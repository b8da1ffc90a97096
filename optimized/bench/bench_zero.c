/* optimized/bench/bench_zero.c — DP-ZeRO: seconds per DP-SGD step and bytes communicated
 * per rank per step for replicated, zero1, zero2 and zero3 at N = 1, 2, 4 MPI ranks,
 * reported as ratios to the replicated run at the same N (docs/zero.md "Benchmark").
 * Model: mlp 256-512-512-10 (P = 399,114 parameters, AdamW, f64), 512 examples,
 * q = 0.125 (about 64 examples per step), ghost norms; 1 warm-up step, then 4 timed.
 * The parent runs every configuration side by side in one invocation, each as
 * `mpirun -n N bench_zero --worker STAGE` (a worker times its steps with a barrier
 * before and after, and reports rank 0's time and the largest bytes sent by a rank).
 * Reproduce: make -j2 && build/bench/optimized_bench_zero
 * Without mpirun: SKIP (exit 77). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimized/dpsgd.h"
#include "optimized/bench/bench_mpi.h"
#include "optimized/ledger.h"
#include "optimized/bench/bench_util.h"

static uint64_t bytes_sent(const opt_comm_stats *cs) {
    uint64_t t = 0;
    for (int k = 0; k < OPT_COLL_COUNT; k++) t += cs->sent[k];
    return t;
}

static int worker(const char *stage) {
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
    if (st == DP_OK) st = bench_worker_start(&m, &d, &be, &s, &out, &mc, &c, &bc, &o);
    opt_comm_stats cs;
    const int steps = 4;
    double sec = 0;
    if (st == DP_OK) st = bench_timed_steps(&sec, &out, &s, &d, be, 2, steps);
    if (st == DP_OK) st = OPT_CALL(be, comm_stats, &cs, 0);
    unsigned long long mine = st == DP_OK ? (unsigned long long)(bytes_sent(&cs) / steps) : 0, most = 0;
    MPI_Reduce(&mine, &most, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    opt_mem_report mr;
    opt_mem_get(&mr, be);
    if (st == DP_OK && be->comm.rank == 0)
        printf("RESULT %s %d %.6f %llu %llu\n", stage, be->comm.size, sec, most,
               (unsigned long long)mr.peak_model_states);
    return bench_worker_end(st, "bench_zero", &out, &s, be);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--worker") == 0) return worker(argv[2]);
    if (system("command -v mpirun >/dev/null 2>&1") != 0) { printf("SKIP: mpirun not found\n"); return 77; }
    static const int ns[] = {1, 2, 4};
    static const char *const stages[] = {"replicated", "zero1", "zero2", "zero3"};
    printf("DP-ZeRO step time and bytes sent per rank per step, ratios to replicated at the same N\n");
    printf("(mlp 256-512-512-10, AdamW f64, ghost, ~64 examples/step; reproduce: %s)\n", argv[0]);
    printf("%-11s %2s %10s %8s %14s %8s %16s %8s\n", "stage", "N", "s/step", "ratio", "bytes/step", "ratio",
           "model states B", "ratio");
    int rc = 0;
    for (int a = 0; a < 3; a++) {
        double t_rep = 0, b_rep = 0, m_rep = 0;
        for (int b = 0; b < 4; b++) {
            char line[512], st[32];
            int n = 0;
            double t = -1;
            unsigned long long by = 0, ms = 0;
            if (bench_run_worker(line, sizeof line, ns[a], argv[0], stages[b]) == 0 &&
                sscanf(line, "RESULT %31s %d %lf %llu %llu", st, &n, &t, &by, &ms) != 5)
                t = -1;
            if (t < 0) { printf("%-11s %2d  failed\n", stages[b], ns[a]); rc = 1; continue; }
            if (b == 0) { t_rep = t; b_rep = (double)by; m_rep = (double)ms; }
            char rb[32] = "-"; /* one rank: no bytes, no ratio */
            if (b_rep > 0) snprintf(rb, sizeof rb, "%.3f", (double)by / b_rep);
            printf("%-11s %2d %10.4f %8.3f %14llu %8s %16llu %8.3f\n", stages[b], ns[a], t, t / t_rep, by, rb, ms,
                   (double)ms / m_rep);
            fflush(stdout);
        }
    }
    return rc;
}

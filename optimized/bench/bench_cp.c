/* optimized/bench/bench_cp.c — LongShield context parallelism: seconds per DP-SGD step,
 * the hidden-communication fraction of the reduce-scatters (docs/longshield.md
 * "Overlap"), bytes sent per rank per step and the per-rank peak of activation +
 * per-example-gradient bytes, for M = 1, 2, 4 CP ranks (M = 1: the CP path with one
 * rank) and both patterns (input- and output-stationary), ring attention; time ratios to
 * M = 1 of the same pattern (docs/longshield.md "Benchmark").
 * Model: llama vocab 64, dim 32, 2 layers, 4 heads, ffn 64, T = 256 (AdamW, f64,
 * grad-sample), 64 examples, q = 0.125 (about 8 examples per step); 1 warm-up step, then
 * 3 timed. The parent runs every configuration side by side in one invocation, each as
 * `mpirun -n M bench_cp --worker M PATTERN`.
 * Reproduce: make -j2 && build/bench/optimized_bench_cp
 * Without mpirun: SKIP (exit 77). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimized/dpsgd.h"
#include "optimized/bench/bench_mpi.h"
#include "optimized/ledger.h"

static int worker(int M, const char *pattern) {
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return 3;
    dp_model_config mc;
    dp_model_config_default(&mc, DP_LLAMA);
    mc.vocab = 64; mc.dim = 32; mc.layers = 2; mc.heads = 4; mc.ffn = 64; mc.seq = 256;
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 64; c.q = 0.125; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2; c.opt = DP_OPT_ADAMW;
    dp_model m;
    dp_dataset d;
    opt_backend *be = NULL;
    opt_backend_config bc = {.name = "host", .dtype = DP_F64, .threads = 1, .use_mpi = 1};
    opt_dp_options o = {.strategy = OPT_STRAT_GRAD_SAMPLE, .cp = M, .cp_path = 1, .cp_ring = 1,
                        .cp_output = strcmp(pattern, "output") == 0};
    opt_dpsgd s;
    memset(&s, 0, sizeof s);
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    dp_status st = bench_worker_start(&m, &d, &be, &s, &out, &mc, &c, &bc, &o);
    opt_comm_stats cs;
    double hid = 0, tot = 0, sec = 0;
    if (st == DP_OK) opt_dpsgd_comm_overlap(&s, &hid, &tot); /* reset */
    const int steps = 3;
    if (st == DP_OK) st = bench_timed_steps(&sec, &out, &s, &d, be, 2, steps);
    if (st == DP_OK) st = OPT_CALL(be, comm_stats, &cs, 0);
    if (st == DP_OK) opt_dpsgd_comm_overlap(&s, &hid, &tot);
    unsigned long long mine[2] = {0, 0}, most[2] = {0, 0};
    for (int k = 0; st == DP_OK && k < OPT_COLL_COUNT; k++) mine[0] += cs.sent[k] / steps;
    opt_mem_report mr;
    opt_mem_get(&mr, be);
    mine[1] = mr.peak[OPT_MEM_ACTIVATIONS] + mr.peak[OPT_MEM_PER_EXAMPLE];
    double f = tot > 0 ? hid / tot : 0.0, fmin = 0;
    MPI_Reduce(mine, most, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&f, &fmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    if (st == DP_OK && be->comm.rank == 0)
        printf("RESULT %d %s %.6f %.4f %llu %llu\n", M, pattern, sec, fmin, most[0], most[1]);
    return bench_worker_end(st, "bench_cp", &out, &s, be);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--worker") == 0) return worker(atoi(argv[2]), argv[3]);
    if (system("command -v mpirun >/dev/null 2>&1") != 0) { printf("SKIP: mpirun not found\n"); return 77; }
    static const int ms[] = {1, 2, 4};
    static const char *const patterns[] = {"input", "output"};
    printf("LongShield CP: step time (ratio to M = 1, same pattern), hidden fraction of the reduce-scatters (min over\n");
    printf("ranks), bytes sent per rank per step (max), peak activation + per-example bytes per rank (max)\n");
    printf("(llama V 64 D 32 L 2 H 4 F 64 T 256, AdamW f64, grad-sample, ring, ~8 examples/step; reproduce: %s)\n",
           argv[0]);
    printf("%-7s %2s %10s %8s %8s %14s %14s\n", "pattern", "M", "s/step", "ratio", "hidden", "bytes/step",
           "act+per-ex B");
    int rc = 0;
    for (int p = 0; p < 2; p++) {
        double t1 = 0;
        for (int a = 0; a < 3; a++) {
            char line[512], pat[32], args[64];
            int M = 0;
            double t = -1, h = 0;
            unsigned long long by = 0, mem = 0;
            snprintf(args, sizeof args, "%d %s", ms[a], patterns[p]);
            if (bench_run_worker(line, sizeof line, ms[a], argv[0], args) == 0 &&
                sscanf(line, "RESULT %d %31s %lf %lf %llu %llu", &M, pat, &t, &h, &by, &mem) != 6)
                t = -1;
            if (t < 0) { printf("%-7s %2d  failed\n", patterns[p], ms[a]); rc = 1; continue; }
            if (a == 0) t1 = t;
            printf("%-7s %2d %10.4f %8.3f %8.4f %14llu %14llu\n", patterns[p], ms[a], t, t / t1, h, by, mem);
            fflush(stdout);
        }
    }
    return rc;
}

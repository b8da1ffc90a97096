/* optimized/bench/bench_cp.c — LongShield context parallelism: seconds per DP-SGD step,
 * the hidden-communication fraction of the reduce-scatters (docs/longshield.md
 * "Overlap"), bytes sent per rank per step and the per-rank peak of activation +
 * per-example-gradient bytes, for M = 1, 2, 4 CP ranks (M = 1: the CP path with one
 * rank) and both patterns (input- and output-stationary), ring attention; time ratios to
 * M = 1 of the same pattern (docs/longshield.md "Benchmark").
 * Model: llama vocab 64, dim 32, 2 layers, 4 heads, ffn 64, T = 256 (AdamW, f64,
 * grad-sample), 64 examples, q = 0.125 (about 8 examples per step); -w warm-up steps
 * (default 1), then -n timed (default 3). One iteration: one DP-SGD step between two barriers
 * (rank 0's clock). Rows (common/bench.h, docs/benchmarks.md): per pattern, M = 1 (the
 * baseline), 2, 4; bytes/step and peak_ledger_B the largest over the ranks; after each row a
 * "# hidden" line: the hidden fraction of the reduce-scatters (min over ranks) and the peak of
 * activation + per-example bytes (max over ranks). The parent runs every configuration side
 * by side in one invocation, each as `mpirun -n M bench_cp --worker W N M PATTERN`.
 * Reproduce: make -j2 && build/bench/optimized_bench_cp -w 1 -n 3
 * Without mpirun: SKIP (exit 77). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/dpsgd.h"
#include "optimized/bench/bench_mpi.h"
#include "optimized/ledger.h"

static int worker(const dp_bench_opts *bo, int M, const char *pattern) {
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
    dp_status st = bench_worker_start(&m, &d, &be, &s, &out, &mc, &c, &bc, &o, bo->warmup);
    double hid = 0, tot = 0, t[BENCH_MPI_MAX_ITERS], bytes = 0;
    if (st == DP_OK) opt_dpsgd_comm_overlap(&s, &hid, &tot); /* reset */
    if (st == DP_OK) st = bench_timed_steps(t, &bytes, &out, &s, &d, be, bo->warmup + 1, bo->iters);
    if (st == DP_OK) opt_dpsgd_comm_overlap(&s, &hid, &tot);
    opt_mem_report mr;
    if (be) opt_mem_get(&mr, be);
    /* the largest over the ranks: bytes per step, ledger peak, activations + per-example; the smallest hidden fraction */
    double mine[3] = {bytes, be ? (double)mr.peak_total : 0,
                      be ? (double)(mr.peak[OPT_MEM_ACTIVATIONS] + mr.peak[OPT_MEM_PER_EXAMPLE]) : 0},
           most[3] = {0, 0, 0};
    double f = tot > 0 ? hid / tot : 0.0, fmin = 0;
    MPI_Reduce(mine, most, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&f, &fmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    char fields[160];
    snprintf(fields, sizeof fields, "%.0f %.0f %.0f %.4f", most[0], most[1], most[2], fmin);
    if (st == DP_OK) bench_worker_result(be, fields, t, bo->iters);
    return bench_worker_end(st, "bench_cp", &out, &s, be);
}

int main(int argc, char **argv) {
    dp_bench_opts bo;
    if (argc == 6 && strcmp(argv[1], "--worker") == 0) {
        bench_worker_opts(&bo, argv);
        return worker(&bo, atoi(argv[4]), argv[5]);
    }
    int r = bench_mpi_parse(&bo, argc, argv, "bench_cp", 1, 3, "", NULL, 0);
    if (r) return r == 1 ? 0 : r;
    static const int ms[] = {1, 2, 4};
    static const char *const patterns[] = {"input", "output"};
    dp_bench_header("bench_cp",
                    "one DP-SGD step between barriers, LongShield CP, llama V 64 D 32 L 2 H 4 F 64 T 256, AdamW, "
                    "grad-sample, ring, ~8 examples/step; per pattern M = 1 (the baseline), 2, 4 ranks",
                    "host (MPI)", "f64", 0, 1, &bo);
    int rc = 0;
    for (int p = 0; p < 2; p++) {
        double base = 0;
        for (int a = 0; a < 3; a++) {
            static char line[BENCH_MPI_LINE];
            char args[64], name[64];
            double t[BENCH_MPI_MAX_ITERS], by = -1, peak = -1, act = -1, hid = -1;
            snprintf(args, sizeof args, "%d %s", ms[a], patterns[p]);
            snprintf(name, sizeof name, "%s-M%d", patterns[p], ms[a]);
            if (bench_run_worker(line, sizeof line, ms[a], argv[0], &bo, args) != 0 ||
                sscanf(line, "RESULT %lf %lf %lf %lf", &by, &peak, &act, &hid) != 4 ||
                bench_result_times(t, bo.iters, line, 4) != 0) {
                printf("# %s failed\n", name);
                rc = 1;
                continue;
            }
            const double med = dp_bench_row_of(name, t, bo.iters, base, a == 0, by, peak);
            if (a == 0) base = med;
            printf("# hidden %s: %.4f of the reduce-scatters; activations + per-example peak %.0f B\n", name, hid, act);
        }
    }
    dp_bench_reproduce(argv[0], &bo);
    return rc;
}

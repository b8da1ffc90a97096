/* accountant/bench/bench_pld_grid.c — the PLD accountant per call on the fixed grid of issue 30
 * goal 6 (docs/accounting.md §10 "PLD grid against the peers"): the Poisson-subsampled Gaussian
 * (sigma 1) and Laplace (b 2) mechanisms, q in {0.001, 0.01, 0.1}, T in {1000, 10000, 100000},
 * epsilon at delta 1e-5, add/remove neighbours, the default (automatic) grid.
 *
 * One iteration: one acct_pld_epsilon call of the row's query. Rows (common/bench.h,
 * docs/benchmarks.md), one per query "MECH:Q:T" (no baseline: ratio n/a), of the CPU time of
 * this process (clock: cpu; the machine is shared: wall time would measure the neighbours);
 * after each row a "# " line: the interval [lower, upper], h, the FFT length and the median
 * wall time. bytes/step and peak_ledger_B are n/a (no engine). `--json` adds one JSON object
 * per query, a line starting with "{" (read by ci/peers/pld_peers.py, which times
 * dp_accounting and prv_accountant on the same queries).
 *
 * Reproduce: make -j2 build/bench/accountant_bench_pld_grid && build/bench/accountant_bench_pld_grid
 *            [-w W] [-n N] [--json] [--only MECH:Q:T]   (defaults -w 0 -n 3) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accountant/acct.h"
#include "common/bench.h"

int main(int argc, char **argv) {
    int json = 0;
    const char *only = NULL;
    const dp_bench_flag flags[] = {{"--json", NULL, &json}, {"--only", &only, NULL}};
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse_flags(&bo, &help, argc, argv, 0, 3, "[--json] [--only gaussian|laplace:Q:T]", flags, 2) != DP_OK ||
        bo.iters > 1000 || bo.threads) {
        fprintf(stderr, "bench_pld_grid: %s\n", dp_last_error()[0] ? dp_last_error() : "-n at most 1000; no -t");
        return 2;
    }
    if (help) return 0;
    bo.clock = "cpu";
    const int reps = bo.iters;
    const struct { acct_mech m; const char *name; double par; } mech[2] = {{ACCT_GAUSSIAN, "gaussian", 1.0},
                                                                           {ACCT_LAPLACE, "laplace", 2.0}};
    const double Q[3] = {0.001, 0.01, 0.1};
    const int64_t T[3] = {1000, 10000, 100000};
    const double delta = 1e-5;
    char what[160];
    snprintf(what, sizeof what, "one PLD call per query MECH:Q:T, epsilon at delta %g, add/remove, default grid", delta);
    dp_bench_header("bench_pld_grid", what, "host", "f64", 1, 1, &bo);
    int fails = 0;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++) {
                char key[64];
                snprintf(key, sizeof key, "%s:%g:%lld", mech[a].name, Q[b], (long long)T[c]);
                if (only && strcmp(only, key) != 0) continue;
                acct_schedule s = {.n = 1};
                s.seg[0] = (acct_segment){mech[a].m, Q[b], mech[a].par, T[c]};
                double cpu[1000], wall[1000];
                acct_pld_result r;
                dp_status st = DP_OK;
                for (int k = 0; k < bo.warmup + reps && st == DP_OK; k++) {
                    double c0 = dp_bench_cpu_now(), w0 = dp_bench_now();
                    st = acct_pld_epsilon(&r, &s, delta, NULL);
                    if (k < bo.warmup) continue;
                    cpu[k - bo.warmup] = dp_bench_cpu_now() - c0;
                    wall[k - bo.warmup] = dp_bench_now() - w0;
                }
                if (st != DP_OK) {
                    fprintf(stderr, "%s: %s\n", key, dp_last_error());
                    fails++;
                    continue;
                }
                dp_bench_stats ws;
                dp_bench_stats_of(&ws, wall, reps);
                const double cm = 1e3 * dp_bench_row_of(key, cpu, reps, 0, 0, -1, -1), wm = 1e3 * ws.median;
                if (json)
                    printf("{\"mechanism\": \"%s\", \"param\": %g, \"q\": %g, \"T\": %lld, \"delta\": %g, "
                           "\"lower\": %.10g, \"upper\": %.10g, \"h\": %.6g, \"n_fft\": %zu, \"cpu_ms\": %.4f, "
                           "\"wall_ms\": %.4f}\n",
                           mech[a].name, mech[a].par, Q[b], (long long)T[c], delta, r.lower, r.upper, r.h, r.n_fft,
                           cm, wm);
                printf("#   %s: [%.6f, %.6f] h %.3g n_fft %zu wall %.2f ms\n", key, r.lower, r.upper, r.h, r.n_fft, wm);
                fflush(stdout);
            }
    dp_bench_reproduce(argv[0], &bo);
    return fails ? 3 : 0;
}

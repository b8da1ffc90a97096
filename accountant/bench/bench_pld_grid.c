/* accountant/bench/bench_pld_grid.c — the PLD accountant per call on the fixed grid of issue 30
 * goal 6 (docs/accounting.md §10 "PLD grid against the peers"): the Poisson-subsampled Gaussian
 * (sigma 1) and Laplace (b 2) mechanisms, q in {0.001, 0.01, 0.1}, T in {1000, 10000, 100000},
 * epsilon at delta 1e-5, add/remove neighbours, the default (automatic) grid.
 *
 * Per query: the median over --reps calls of the CPU time of this process (the machine is
 * shared: wall time would measure the neighbours) and of the wall time, the interval
 * [lower, upper], h and the FFT length. `--json` prints one JSON object per line (read by
 * ci/peers/pld_peers.py, which times dp_accounting and prv_accountant on the same queries).
 *
 * Reproduce: make -j2 build/bench/accountant_bench_pld_grid && build/bench/accountant_bench_pld_grid
 *            [--reps N] [--json] [--only MECH:Q:T] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accountant/acct.h"

static double now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int reps = 3, json = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--reps N] [--json] [--only gaussian|laplace:Q:T]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 1000) { fprintf(stderr, "--reps must be in [1, 1000]\n"); return 2; }
    const struct { acct_mech m; const char *name; double par; } mech[2] = {{ACCT_GAUSSIAN, "gaussian", 1.0},
                                                                           {ACCT_LAPLACE, "laplace", 2.0}};
    const double Q[3] = {0.001, 0.01, 0.1};
    const int64_t T[3] = {1000, 10000, 100000};
    const double delta = 1e-5;
    if (!json)
        printf("PLD per call (median of %d; CPU and wall ms), epsilon at delta %g, default grid\n"
               "%-9s %6s %7s %12s %12s %10s %9s %9s %9s\n",
               reps, delta, "mechanism", "q", "T", "lower", "upper", "h", "n_fft", "cpu_ms", "wall_ms");
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
                for (int k = 0; k < reps && st == DP_OK; k++) {
                    double c0 = now(CLOCK_PROCESS_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
                    st = acct_pld_epsilon(&r, &s, delta, NULL);
                    cpu[k] = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
                    wall[k] = now(CLOCK_MONOTONIC) - w0;
                }
                if (st != DP_OK) {
                    fprintf(stderr, "%s: %s\n", key, dp_last_error());
                    fails++;
                    continue;
                }
                qsort(cpu, (size_t)reps, sizeof *cpu, cmp_d);
                qsort(wall, (size_t)reps, sizeof *wall, cmp_d);
                const double cm = 1e3 * cpu[reps / 2], wm = 1e3 * wall[reps / 2];
                if (json)
                    printf("{\"mechanism\": \"%s\", \"param\": %g, \"q\": %g, \"T\": %lld, \"delta\": %g, "
                           "\"lower\": %.10g, \"upper\": %.10g, \"h\": %.6g, \"n_fft\": %zu, \"cpu_ms\": %.4f, "
                           "\"wall_ms\": %.4f}\n",
                           mech[a].name, mech[a].par, Q[b], (long long)T[c], delta, r.lower, r.upper, r.h, r.n_fft,
                           cm, wm);
                else
                    printf("%-9s %6g %7lld %12.6f %12.6f %10.3g %9zu %9.2f %9.2f\n", mech[a].name, Q[b],
                           (long long)T[c], r.lower, r.upper, r.h, r.n_fft, cm, wm);
                fflush(stdout);
            }
    return fails ? 1 : 0;
}

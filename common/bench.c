/* common/bench.c — the benchmark harness of common/bench.h (docs/benchmarks.md): flags,
 * header, percentile statistics and the uniform row. */
#include "common/bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef DPCERT_GIT_REV
#define DPCERT_GIT_REV "unknown"
#endif

double dp_bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double dp_bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static dp_status int_flag(int *v, const char *flag, const char *s, int lo) {
    char *end = NULL;
    long x = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || x < lo || x > 1000000)
        return dp_error(DP_ERR_USAGE, "%s needs an integer in [%d, 1000000] (got '%s')", flag, lo, s ? s : "");
    *v = (int)x;
    return DP_OK;
}

/* one of the program's own options at argv[*i] (advancing *i past its value); 0 if none matches */
static int own_flag(dp_status *st, dp_bench_opts *o, int *i, int argc, char **argv, const dp_bench_flag *flags,
                    int nflags) {
    for (int k = 0; k < nflags; k++) {
        if (strcmp(argv[*i], flags[k].name) != 0) continue;
        if (o->nown + 2 > 32) { *st = dp_error(DP_ERR_USAGE, "too many options ('%s')", argv[*i]); return 1; }
        o->own[o->nown++] = argv[*i];
        if (flags[k].is_set) *flags[k].is_set = 1;
        if (flags[k].value) {
            if (*i + 1 >= argc) { *st = dp_error(DP_ERR_USAGE, "%s needs a value", argv[*i]); return 1; }
            *flags[k].value = o->own[o->nown++] = argv[++*i];
        }
        return 1;
    }
    return 0;
}

dp_status dp_bench_parse(dp_bench_opts *o, int *help, int argc, char **argv, int warmup, int iters,
                         const char *usage) {
    return dp_bench_parse_flags(o, help, argc, argv, warmup, iters, usage, NULL, 0);
}

dp_status dp_bench_parse_flags(dp_bench_opts *o, int *help, int argc, char **argv, int warmup, int iters,
                               const char *usage, const dp_bench_flag *flags, int nflags) {
    memset(o, 0, sizeof *o);
    o->clock = "wall";
    o->warmup = warmup;
    o->iters = iters;
    *help = 0;
    dp_status st = DP_OK;
    for (int i = 1; i < argc && st == DP_OK; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) *help = 1;
        else if (strcmp(a, "-w") == 0) st = int_flag(&o->warmup, "-w", i + 1 < argc ? argv[++i] : NULL, 0);
        else if (strcmp(a, "-n") == 0) st = int_flag(&o->iters, "-n", i + 1 < argc ? argv[++i] : NULL, 1);
        else if (strcmp(a, "-t") == 0) st = int_flag(&o->threads, "-t", i + 1 < argc ? argv[++i] : NULL, 1);
        else if (own_flag(&st, o, &i, argc, argv, flags, nflags)) continue;
        else if (a[0] == '-' && a[1]) st = dp_error(DP_ERR_USAGE, "unknown flag '%s'", a);
        else if (o->npos < 8) o->pos[o->npos++] = a;
        else st = dp_error(DP_ERR_USAGE, "too many arguments ('%s')", a);
    }
    if (*help || st != DP_OK)
        fprintf(*help ? stdout : stderr, "usage: %s [-w WARMUP] [-n ITERS] [-t THREADS] %s\n"
                "  -w N  untimed warm-up iterations (default %d)\n  -n N  timed iterations (default %d)\n"
                "  -t N  host threads\ncolumns: docs/benchmarks.md\n", argv[0], usage ? usage : "", warmup, iters);
    return st;
}

void dp_bench_header(const char *program, const char *what, const char *backend, const char *dtype, int ranks,
                     int threads, const dp_bench_opts *o) {
    char r[16] = "per-row", t[16] = "per-row"; /* <= 0: the rows name them */
    if (ranks > 0) snprintf(r, sizeof r, "%d", ranks);
    if (threads > 0) snprintf(t, sizeof t, "%d", threads);
    printf("# dpcert-bench %s: %s\n", program, what);
    printf("# git: %s  backend: %s  dtype: %s  ranks: %s  threads: %s  warmup: %d  iters: %d  clock: %s\n",
           DPCERT_GIT_REV, backend, dtype, r, t, o->warmup, o->iters, o->clock ? o->clock : "wall");
    printf("%-28s %12s %12s %12s %10s %14s %14s\n", "# name", "median_s", "p10_s", "p90_s", "ratio", "bytes/step",
           "peak_ledger_B");
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* nearest rank: the smallest sample with at least p n samples at or below it */
static double pct(const double *x, int n, double p) {
    int k = (int)ceil(p * n) - 1;
    return x[k < 0 ? 0 : k >= n ? n - 1 : k];
}

void dp_bench_stats_of(dp_bench_stats *s, double *x, int n) {
    if (n < 1) { s->median = s->p10 = s->p90 = NAN; return; }
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    s->median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
    s->p10 = pct(x, n, 0.1);
    s->p90 = pct(x, n, 0.9);
}

void dp_bench_row(const char *name, const dp_bench_stats *s, double base_median, int is_base, double bytes_per_step,
                  double peak_bytes) {
    char ratio[32], bytes[32], peak[32], field[128];
    /* the name is one field: spaces print as '_' (the columns can be read by position) */
    size_t k = 0;
    for (const char *c = name; *c && k + 1 < sizeof field; c++) field[k++] = *c == ' ' ? '_' : *c;
    field[k] = '\0';
    if (is_base) snprintf(ratio, sizeof ratio, "base");
    else if (base_median > 0 && isfinite(s->median)) snprintf(ratio, sizeof ratio, "%.3f", s->median / base_median);
    else snprintf(ratio, sizeof ratio, "n/a");
    if (bytes_per_step >= 0) snprintf(bytes, sizeof bytes, "%.0f", bytes_per_step);
    else snprintf(bytes, sizeof bytes, "n/a");
    if (peak_bytes >= 0) snprintf(peak, sizeof peak, "%.0f", peak_bytes);
    else snprintf(peak, sizeof peak, "n/a");
    printf("%-28s %12.6f %12.6f %12.6f %10s %14s %14s\n", field, s->median, s->p10, s->p90, ratio, bytes, peak);
    fflush(stdout);
}

double dp_bench_row_of(const char *name, double *x, int n, double base_median, int is_base, double bytes_per_step,
                       double peak_bytes) {
    dp_bench_stats s;
    dp_bench_stats_of(&s, x, n);
    dp_bench_row(name, &s, base_median, is_base, bytes_per_step, peak_bytes);
    return s.median;
}

void dp_bench_reproduce(const char *argv0, const dp_bench_opts *o) {
    printf("# reproduce: %s -w %d -n %d", argv0, o->warmup, o->iters);
    if (o->threads) printf(" -t %d", o->threads);
    for (int i = 0; i < o->nown; i++) printf(" %s", o->own[i]);
    for (int i = 0; i < o->npos; i++) printf(" %s", o->pos[i]);
    printf("\n");
}

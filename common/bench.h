/* common/bench.h — the one benchmark harness (docs/benchmarks.md), in the style of
 * nccl-tests: every benchmark program parses the same flags (-w warm-up iterations, -n timed
 * iterations, -t threads), prints the same header (program, git revision, backend/device,
 * dtype, ranks, threads, warm-up, iterations) and one row per configuration with the same
 * columns: median, p10 and p90 of the timed iterations, the ratio of the median to the row's
 * baseline (measured side by side in the same run), bytes sent per step and the peak of the
 * engine's memory ledger. A value a benchmark cannot measure prints "n/a", never 0. */
#ifndef DP_BENCH_H
#define DP_BENCH_H

#include <stddef.h>

#include "common/status.h"

/* A program's own long option: "--name VALUE" (value != NULL: *value points at the argument)
 * or a switch "--name" (is_set != NULL: *is_set = 1). Unset options keep what the caller put. */
typedef struct {
    const char *name;
    const char **value;
    int *is_set;
} dp_bench_flag;

typedef struct {
    int warmup;        /* -w N: untimed iterations before the timed ones */
    int iters;         /* -n N: timed iterations (each one timed alone) */
    int threads;       /* -t N: threads of the host backend (0: not given) */
    const char *pos[8]; /* positional arguments, in order */
    int npos;
    const char *own[32]; /* the program's own options as given (name, then value), for the reproduce line */
    int nown;
    const char *clock; /* what the seconds are: "wall" (CLOCK_MONOTONIC, the default) or "cpu" (process CPU time) */
} dp_bench_opts;

/* Parses -w N, -n N, -t N (N >= 0 for -w, >= 1 for -n and -t) and up to 8 positional arguments
 * into o (defaults: warmup, iters, threads 0). `usage` (the program's own arguments) is printed
 * on -h / --help (*help = 1) and on bad usage (DP_ERR_USAGE naming the flag). */
dp_status dp_bench_parse(dp_bench_opts *o, int *help, int argc, char **argv, int warmup, int iters,
                         const char *usage);

/* dp_bench_parse, also accepting the program's own long options flags[0..nflags) (any other
 * "-..." is refused with DP_ERR_USAGE naming it). */
dp_status dp_bench_parse_flags(dp_bench_opts *o, int *help, int argc, char **argv, int warmup, int iters,
                               const char *usage, const dp_bench_flag *flags, int nflags);

/* The header: "# dpcert-bench PROGRAM: WHAT" then one line of "key: value" pairs
 * (git, backend, dtype, ranks, threads, warmup, iters, clock) and the column names; ranks or
 * threads <= 0 print "per-row" (the rows' names carry them). */
void dp_bench_header(const char *program, const char *what, const char *backend, const char *dtype, int ranks,
                     int threads, const dp_bench_opts *o);

/* Median, 10th and 90th percentiles of x[0..n) (sorted in place; nearest rank). */
typedef struct { double median, p10, p90; } dp_bench_stats;
void dp_bench_stats_of(dp_bench_stats *s, double *x, int n);

/* One row: name (one field: spaces print as '_'), the statistics of its seconds per iteration, the median of its baseline
 * (<= 0: it is the baseline or has none, printed "base" / "n/a" by is_base), bytes sent per
 * step (< 0: n/a) and the peak ledger bytes (< 0: n/a). */
void dp_bench_row(const char *name, const dp_bench_stats *s, double base_median, int is_base, double bytes_per_step,
                  double peak_bytes);

/* dp_bench_stats_of(x, n) then dp_bench_row; returns the row's median (a later row's baseline). */
double dp_bench_row_of(const char *name, double *x, int n, double base_median, int is_base, double bytes_per_step,
                       double peak_bytes);

/* The closing line: "# reproduce: ARGV0 -w W -n N [-t T] [OWN OPTIONS] ARGS..." */
void dp_bench_reproduce(const char *argv0, const dp_bench_opts *o);

/* Wall-clock seconds of the monotonic clock. */
double dp_bench_now(void);

/* CPU seconds of this process, all threads (the clock of programs whose header says "clock: cpu"). */
double dp_bench_cpu_now(void);

#endif

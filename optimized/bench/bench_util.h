/* optimized/bench/bench_util.h — helpers the engine's benchmarks share (static, one
 * copy per benchmark program). */
#ifndef OPT_BENCH_UTIL_H
#define OPT_BENCH_UTIL_H

#include <time.h>

/* wall-clock seconds of the monotonic clock */
static inline double opt_bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort comparison of doubles, ascending (medians of timed steps) */
static inline int opt_bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif

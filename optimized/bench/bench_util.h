/* optimized/bench/bench_util.h — what the engine's benchmarks share on top of the harness
 * (common/bench.h, docs/benchmarks.md): the bytes a backend sent since the last reading
 * (the bytes/step column) and the peak of its memory ledger (the peak_ledger_B column).
 * Header-only (static inline): each benchmark is one program. */
#ifndef OPT_BENCH_UTIL_H
#define OPT_BENCH_UTIL_H

#include "common/bench.h"
#include "optimized/dpsgd.h"
#include "optimized/ledger.h"

/* Bytes this rank sent to other ranks since the last call (the counters restart: comm_stats
 * with reset 1); one rank: 0, a measurement. -1 (printed n/a) when the backend cannot count. */
static inline double opt_bench_sent_bytes(opt_backend *be) {
    opt_comm_stats cs;
    if (OPT_CALL(be, comm_stats, &cs, 1) != DP_OK) { dp_clear_error(); return -1; }
    double b = 0;
    for (int k = 0; k < OPT_COLL_COUNT; k++) b += (double)cs.sent[k];
    return b;
}

/* The peak of be's memory ledger over its lifetime, every tag, bytes. */
static inline double opt_bench_peak(const opt_backend *be) {
    opt_mem_report r;
    opt_mem_get(&r, be);
    return (double)r.peak_total;
}

#endif

/* optimized/bench/bench_util.h — what the engine's benchmarks share on top of the harness
 * (common/bench.h, docs/benchmarks.md): the bytes a backend sent since the last reading
 * (the bytes/step column), the peak of its memory ledger (the peak_ledger_B column), and the
 * llama shape options of the step benchmarks (bench_step.c, bench_gpu_step.c), and the model and
 * data set every single-process benchmark builds.
 * Header-only (static inline): each benchmark is one program. */
#ifndef OPT_BENCH_UTIL_H
#define OPT_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>

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

/* The llama shape options (strings as given; the defaults the caller's) */
typedef struct { const char *dim, *layers, *heads, *ffn, *seq, *vocab, *batch; } opt_bench_llama;
#define OPT_BENCH_LLAMA_FLAGS(a)                                                                                       \
    {"--dim", &(a).dim, NULL}, {"--layers", &(a).layers, NULL}, {"--heads", &(a).heads, NULL},                         \
        {"--ffn", &(a).ffn, NULL}, {"--seq", &(a).seq, NULL}, {"--vocab", &(a).vocab, NULL}, {"--batch", &(a).batch, NULL}
#define OPT_BENCH_LLAMA_USAGE "[--dim D] [--layers L] [--heads H] [--ffn F (0: 2 D)] [--seq T] [--vocab V] [--batch B]"

/* mc (a llama) and the batch *B from a; --ffn 0 gives 2 D. DP_ERR_USAGE when a value is out of
 * range (the model's own checks follow in dp_model_init). */
static inline dp_status opt_bench_llama_config(dp_model_config *mc, int64_t *B, const opt_bench_llama *a) {
    dp_model_config_default(mc, DP_LLAMA);
    mc->dim = atoi(a->dim);
    mc->layers = atoi(a->layers);
    mc->heads = atoi(a->heads);
    mc->ffn = atoi(a->ffn);
    mc->seq = atoi(a->seq);
    mc->vocab = atoi(a->vocab);
    if (mc->ffn == 0) mc->ffn = 2 * mc->dim;
    *B = atoll(a->batch);
    if (*B < 1 || mc->dim < 1 || mc->layers < 1 || mc->heads < 1 || mc->ffn < 1 || mc->seq < 1 || mc->vocab < 2)
        return dp_error(DP_ERR_USAGE, "bad --batch/--dim/--layers/--heads/--ffn/--seq/--vocab");
    return DP_OK;
}

/* The model and data set of mc and c for the benchmark `prog`: 0, or the exit code of the
 * failure (dp_status_exit_code) after its message on stderr, with nothing left allocated. */
static inline int opt_bench_model_data(dp_model *m, dp_dataset *d, const dp_model_config *mc,
                                       const dp_dpsgd_config *c, const char *prog) {
    dp_status st = dp_model_init(m, mc, c->seed);
    if (st == DP_OK && (st = dp_dataset_generate(d, mc, c->n, c->seed)) != DP_OK) dp_model_free(m);
    if (st == DP_OK) return 0;
    fprintf(stderr, "%s: %s\n", prog, dp_last_error());
    return dp_status_exit_code(st);
}

#endif

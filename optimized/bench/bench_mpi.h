/* optimized/bench/bench_mpi.h — what the MPI benchmarks (bench_zero.c, bench_cp.c,
 * bench_ranks.c) share: running one configuration as `mpirun -n N SELF --worker W N ARGS`
 * and reading its RESULT line (rank 0's: a program's own fields, then the seconds of each
 * timed step), and a worker's start, timed steps and teardown. Header-only: each benchmark
 * is one program. */
#ifndef OPT_BENCH_MPI_H
#define OPT_BENCH_MPI_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench.h"
#include "optimized/bench/bench_util.h"
#include "optimized/dpsgd.h"

/* the most timed steps a worker reports (its RESULT line holds them all) */
enum { BENCH_MPI_MAX_ITERS = 200, BENCH_MPI_LINE = 32 + 24 * BENCH_MPI_MAX_ITERS };

/* Runs `mpirun --bind-to none -n n self --worker W N args` (as root, oversubscribed; unbound,
 * because Open MPI binds each rank to one core by default when there are at most 2 ranks,
 * which puts every thread of a 1-rank, 2-thread worker on one core) and copies its first
 * line starting with "RESULT " into line [cap]; 0 when found, -1 otherwise. */
static inline int bench_run_worker(char *line, size_t cap, int n, const char *self, const dp_bench_opts *bo,
                                   const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
             "OMPI_MCA_mpi_yield_when_idle=1 mpirun --bind-to none -n %d '%s' --worker %d %d %s 2>&1",
             n, self, bo->warmup, bo->iters, args);
    FILE *f = popen(cmd, "r");
    int found = -1;
    while (f && found < 0 && fgets(line, (int)cap, f))
        if (strncmp(line, "RESULT ", 7) == 0) found = 0;
    if (f) pclose(f);
    return found;
}

/* The parent's start: the flags (-w, -n at most BENCH_MPI_MAX_ITERS); 2 on bad usage, 1 after
 * -h, 77 (SKIP) without mpirun, 0 to go on. */
static inline int bench_mpi_parse(dp_bench_opts *bo, int argc, char **argv, const char *who, int warmup, int iters,
                                  const char *usage, const dp_bench_flag *flags, int nflags) {
    int help = 0;
    if (dp_bench_parse_flags(bo, &help, argc, argv, warmup, iters, usage, flags, nflags) != DP_OK) {
        fprintf(stderr, "%s: %s\n", who, dp_last_error());
        return 2;
    }
    if (help) return 1;
    if (bo->iters > BENCH_MPI_MAX_ITERS || bo->threads) {
        fprintf(stderr, "%s: -n at most %d; -t is not an option here (each row names its threads)\n", who,
                BENCH_MPI_MAX_ITERS);
        return 2;
    }
    if (system("command -v mpirun >/dev/null 2>&1") != 0) { printf("SKIP: mpirun not found\n"); return 77; }
    return 0;
}

/* The worker's -w and -n (argv[2], argv[3] after "--worker"). */
static inline void bench_worker_opts(dp_bench_opts *bo, char **argv) {
    memset(bo, 0, sizeof *bo);
    bo->warmup = atoi(argv[2]);
    bo->iters = atoi(argv[3]);
    if (bo->warmup < 0) bo->warmup = 0;
    if (bo->iters < 1) bo->iters = 1;
    if (bo->iters > BENCH_MPI_MAX_ITERS) bo->iters = BENCH_MPI_MAX_ITERS;
}

/* A worker's start: the model and data set of mc and c, the backend bc, the DP-SGD run
 * (options o) and `warmup` warm-up steps (steps 1..warmup); stops at the first failure. */
static inline dp_status bench_worker_start(dp_model *m, dp_dataset *d, opt_backend **be, opt_dpsgd *s,
                                           dp_dpsgd_step_out *out, const dp_model_config *mc,
                                           const dp_dpsgd_config *c, const opt_backend_config *bc,
                                           const opt_dp_options *o, int warmup) {
    DP_TRY(dp_model_init(m, mc, c->seed));
    DP_TRY(dp_dataset_generate(d, mc, c->n, c->seed));
    DP_TRY(opt_backend_create(be, bc));
    dp_status st = opt_dpsgd_init(s, *be, c, o, m);
    if (st != DP_OK) { memset(s, 0, sizeof *s); return st; } /* init cleans up after itself */
    for (int i = 1; i <= warmup; i++) DP_TRY(opt_dpsgd_step(out, s, d, i));
    return DP_OK;
}

/* steps timed steps (first, first + 1, ...), each between two barriers: t[i] = seconds of
 * step i on this rank; *bytes = the bytes this rank sent per timed step (the counters
 * restart before them). */
static inline dp_status bench_timed_steps(double *t, double *bytes, dp_dpsgd_step_out *out, opt_dpsgd *s,
                                          const dp_dataset *d, opt_backend *be, int64_t first, int steps) {
    opt_bench_sent_bytes(be);
    for (int i = 0; i < steps; i++) {
        DP_TRY(OPT_CALL(be, barrier, NULL));
        const double t0 = dp_bench_now();
        DP_TRY(opt_dpsgd_step(out, s, d, first + i));
        DP_TRY(OPT_CALL(be, barrier, NULL));
        t[i] = dp_bench_now() - t0;
    }
    *bytes = opt_bench_sent_bytes(be) / steps;
    return DP_OK;
}

/* Rank 0 prints "RESULT FIELDS t_1 ... t_n" (fields: the program's own, without spaces
 * counted by the parent). */
static inline void bench_worker_result(const opt_backend *be, const char *fields, const double *t, int n) {
    if (be->comm.rank != 0) return;
    printf("RESULT %s", fields);
    for (int i = 0; i < n; i++) printf(" %.9g", t[i]);
    printf("\n");
    fflush(stdout);
}

/* The parent's reading of a RESULT line: skips "RESULT" and `nfields` fields, then reads n
 * seconds into t; 0 when all n are there. */
static inline int bench_result_times(double *t, int n, const char *line, int nfields) {
    const char *p = line;
    for (int k = 0; k <= nfields; k++) {
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
    }
    for (int i = 0; i < n; i++) {
        char *end = NULL;
        t[i] = strtod(p, &end);
        if (end == p) return -1;
        p = end;
    }
    return 0;
}

/* A worker's end: its error (if any) on stderr, everything freed, MPI finalized; the
 * worker's exit status. */
static inline int bench_worker_end(dp_status st, const char *who, dp_dpsgd_step_out *out, opt_dpsgd *s,
                                   opt_backend *be) {
    if (st != DP_OK) fprintf(stderr, "%s worker: %s\n", who, dp_last_error());
    dp_dpsgd_step_free(out);
    opt_dpsgd_free(s);
    opt_backend_destroy(be);
    MPI_Finalize();
    return st == DP_OK ? 0 : 3;
}
#endif

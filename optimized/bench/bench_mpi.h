/* optimized/bench/bench_mpi.h — what the MPI benchmarks (bench_zero.c, bench_cp.c) share:
 * running one configuration as `mpirun -n N SELF --worker ARGS` and reading
 * its RESULT line, and a worker's teardown. Header-only: each benchmark is one program. */
#ifndef OPT_BENCH_MPI_H
#define OPT_BENCH_MPI_H
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "optimized/bench/bench_util.h"
#include "optimized/dpsgd.h"

/* Runs `mpirun --bind-to none -n n self --worker args` (as root, oversubscribed; unbound,
 * because Open MPI binds each rank to one core by default when there are at most 2 ranks,
 * which puts every thread of a 1-rank, 2-thread worker on one core) and copies its first
 * line starting with "RESULT " into line [cap]; 0 when found, -1 otherwise. */
static inline int bench_run_worker(char *line, size_t cap, int n, const char *self, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
             "OMPI_MCA_mpi_yield_when_idle=1 mpirun --bind-to none -n %d '%s' --worker %s 2>&1",
             n, self, args);
    FILE *f = popen(cmd, "r");
    int found = -1;
    while (f && found < 0 && fgets(line, (int)cap, f))
        if (strncmp(line, "RESULT ", 7) == 0) found = 0;
    if (f) pclose(f);
    return found;
}

/* A worker's start: the model and data set of mc and c, the backend bc, the DP-SGD run
 * (options o) and one warm-up step (step 1); stops at the first failure. */
static inline dp_status bench_worker_start(dp_model *m, dp_dataset *d, opt_backend **be, opt_dpsgd *s,
                                           dp_dpsgd_step_out *out, const dp_model_config *mc,
                                           const dp_dpsgd_config *c, const opt_backend_config *bc,
                                           const opt_dp_options *o) {
    DP_TRY(dp_model_init(m, mc, c->seed));
    DP_TRY(dp_dataset_generate(d, mc, c->n, c->seed));
    DP_TRY(opt_backend_create(be, bc));
    DP_TRY(opt_dpsgd_init(s, *be, c, o, m));
    return opt_dpsgd_step(out, s, d, 1);
}

/* steps timed steps (first, first + 1, ...) between two barriers: *sec = seconds per
 * step; the byte counters restart before them. */
static inline dp_status bench_timed_steps(double *sec, dp_dpsgd_step_out *out, opt_dpsgd *s, const dp_dataset *d,
                                          opt_backend *be, int64_t first, int steps) {
    opt_comm_stats cs;
    DP_TRY(OPT_CALL(be, comm_stats, &cs, 1));
    DP_TRY(OPT_CALL(be, barrier, NULL));
    const double t0 = opt_bench_now();
    for (int i = 0; i < steps; i++) DP_TRY(opt_dpsgd_step(out, s, d, first + i));
    DP_TRY(OPT_CALL(be, barrier, NULL));
    *sec = (opt_bench_now() - t0) / steps;
    return DP_OK;
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

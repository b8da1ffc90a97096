/* conformance/tests/plan_time.h — the step-time validation of `dpcert plan` (docs/plan.md §9),
 * shared by test_plan_time.c (fast: one model, 1, 2 and 4 ranks) and test_plan_time_slow.c (more
 * models, strategies and shardings). Header-only: each test is one program.
 *
 * For every configuration and rank count R the program runs itself as `mpirun -n R SELF
 * --worker ARGS`: a worker builds the engine's llama (host backend, one thread, the whole
 * dataset as the batch: q = 1, so every step has exactly B examples), measures the host
 * backend's all-reduce at 8 bytes and 1 MiB (the link: latency per algorithm step and
 * bandwidth), runs one warm-up step and PT_STEPS timed steps between barriers and prints
 * "RESULT compute_s collectives_s latency_s bandwidth_Bps". The parent calibrates the per-operation
 * costs (plan_calibrate, in process, right before the run), projects the same layout with the
 * measured link (one core per rank) and compares the compute: |projected / measured - 1| <= the
 * stated bound. Negative control: the projection without the per-example work (a model that
 * forgot the DP terms) must miss the measurement by more than the bound for a grad-sample
 * configuration whose per-example work is a large share of the step. */
#ifndef PLAN_TIME_H
#define PLAN_TIME_H

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/test.h"
#include "conformance/plan/plan.h"
#include "optimized/dpsgd.h"

#define PT_STEPS 7

typedef struct {
    const char *what;
    int64_t V, D, L, H, F, T, B, k;
    const char *strategy, *sharding;
    int f32;
} pt_cfg;

static double pt_clock(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
/* the CPU time of this rank: the machine is shared (docs/plan.md §9) */
static double pt_cpu(void) { return pt_clock(CLOCK_PROCESS_CPUTIME_ID); }

static int pt_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int pt_find(const char *const *names, const char *s) {
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

/* The worker's collectives, wrapped: the CPU and wall seconds this rank spends inside them. A rank
 * that waits for a descheduled peer polls (host_poll: up to 1 ms spinning), which the CPU time
 * of the step would count as work: the step is measured as the CPU seconds outside the
 * collectives plus the wall seconds inside them of the rank that waited least (docs/plan.md §9). */
static opt_backend_ops pt_inner;
static double pt_in_cpu, pt_in_wall;
#define PT_WRAP(name, params, args)                                                                  \
    static dp_status pt_##name params {                                                            \
        const double c0 = pt_cpu(), w0 = pt_clock(CLOCK_MONOTONIC);                                \
        dp_status st_ = pt_inner.name args;                                                        \
        pt_in_cpu += pt_cpu() - c0;                                                                \
        pt_in_wall += pt_clock(CLOCK_MONOTONIC) - w0;                                              \
        return st_;                                                                                \
    }
PT_WRAP(allreduce_sum, (void *ctx, const opt_group *g, void *buf, int64_t n, opt_async **a), (ctx, g, buf, n, a))
PT_WRAP(reduce_scatter_sum, (void *ctx, const opt_group *g, void *r, const void *s, int64_t n, opt_async **a),
        (ctx, g, r, s, n, a))
PT_WRAP(allgather, (void *ctx, const opt_group *g, void *r, const void *s, int64_t n, opt_async **a), (ctx, g, r, s, n, a))
PT_WRAP(alltoall, (void *ctx, const opt_group *g, void *r, const void *s, int64_t n, opt_async **a), (ctx, g, r, s, n, a))
PT_WRAP(wait, (void *ctx, opt_async *a), (ctx, a))
PT_WRAP(allgatherv_bytes, (void *ctx, void **r, size_t *rl, const void *s, size_t n), (ctx, r, rl, s, n))
PT_WRAP(barrier, (void *ctx, const opt_group *g), (ctx, g))

static void pt_wrap(opt_backend *be) {
    pt_inner = be->ops;
    be->ops.allreduce_sum = pt_allreduce_sum;
    be->ops.reduce_scatter_sum = pt_reduce_scatter_sum;
    be->ops.allgather = pt_allgather;
    be->ops.alltoall = pt_alltoall;
    be->ops.wait = pt_wait;
    be->ops.allgatherv_bytes = pt_allgatherv_bytes;
    be->ops.barrier = pt_barrier;
}

/* the worker: argv = V D L H F T B k strategy sharding f32 */
static int pt_worker(int argc, char **argv) {
    if (argc != 13 || MPI_Init(NULL, NULL) != MPI_SUCCESS) return 3;
    dp_model_config mc;
    dp_model_config_default(&mc, DP_LLAMA);
    mc.vocab = atoi(argv[2]); mc.dim = atoi(argv[3]); mc.layers = atoi(argv[4]); mc.heads = atoi(argv[5]);
    mc.ffn = atoi(argv[6]); mc.seq = atoi(argv[7]);
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = atoll(argv[8]); c.q = 1.0; c.clip = 1.0; c.sigma = 1.0; c.key.k = 7; c.seed.k = 3; c.opt = DP_OPT_ADAMW;
    c.micro_batches = atoi(argv[9]);
    const int si = pt_find(opt_strategy_names, argv[10]), zi = pt_find(opt_sharding_names, argv[11]);
    opt_backend *be = NULL;
    opt_backend_config bc = {.name = "host", .dtype = atoi(argv[12]) ? DP_F32 : DP_F64, .threads = 1, .use_mpi = 1};
    opt_dp_options o;
    memset(&o, 0, sizeof o);
    o.strategy = (opt_strategy)(si < 0 ? 0 : si);
    o.sharding = (opt_sharding)(zi < 0 ? 0 : zi);
    opt_dpsgd s;
    memset(&s, 0, sizeof s);
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    dp_model m;
    dp_dataset d;
    dp_status st = si < 0 || zi < 0 ? dp_error(DP_ERR_USAGE, "unknown strategy or sharding") : DP_OK;
    if (st == DP_OK) st = dp_model_init(&m, &mc, c.seed);
    if (st == DP_OK) st = dp_dataset_generate(&d, &mc, c.n, c.seed);
    if (st == DP_OK) st = opt_backend_create(&be, &bc);
    /* the link: the host all-reduce of 1 and 131072 doubles (median of 9, between barriers) */
    double lat = 0, bw = 0;
    if (st == DP_OK && be->comm.size > 1) {
        double *buf = calloc(131072, sizeof *buf), t[2][9];
        void *dev = NULL;
        st = buf ? be->ops.alloc(be->ctx, &dev, sizeof(double) * 131072) : DP_ERR_NOMEM;
        for (int z = 0; z < 2 && st == DP_OK; z++)
            for (int r = 0; r < 9 && st == DP_OK; r++) {
                st = OPT_CALL(be, barrier, NULL);
                const double t0 = pt_cpu();
                if (st == DP_OK) st = OPT_CALL(be, allreduce_sum, NULL, dev, z ? 131072 : 1, NULL);
                t[z][r] = pt_cpu() - t0;
            }
        if (dev) be->ops.free(be->ctx, dev);
        free(buf);
        qsort(t[0], 9, sizeof(double), pt_cmp);
        qsort(t[1], 9, sizeof(double), pt_cmp);
        const double steps = (double)(be->comm.size - 1), bytes = 131072.0 * 8 * steps;
        lat = t[0][4] / steps;
        bw = t[1][4] > t[0][4] ? bytes / (t[1][4] - t[0][4]) : 1e12;
    }
    if (st == DP_OK) st = opt_dpsgd_init(&s, be, &c, &o, &m);
    if (st == DP_OK) st = opt_dpsgd_step(&out, &s, &d, 1); /* warm-up */
    /* per step: the CPU seconds outside the collectives of the rank with the most (the critical
     * path's compute on dedicated cores), and the wall seconds inside them of the rank that
     * waited least */
    if (st == DP_OK) pt_wrap(be);
    double ts[PT_STEPS], tc[PT_STEPS];
    for (int i = 0; i < PT_STEPS && st == DP_OK; i++) {
        st = OPT_CALL(be, barrier, NULL);
        pt_in_cpu = pt_in_wall = 0;
        const double t0 = pt_cpu();
        if (st == DP_OK) st = opt_dpsgd_step(&out, &s, &d, 2 + i);
        double mine[2] = {-(pt_cpu() - t0 - pt_in_cpu), pt_in_wall}, ext[2];
        MPI_Allreduce(mine, ext, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        ts[i] = -ext[0];
        tc[i] = ext[1];
    }
    if (st == DP_OK && be->comm.rank == 0) {
        qsort(ts, PT_STEPS, sizeof(double), pt_cmp);
        qsort(tc, PT_STEPS, sizeof(double), pt_cmp);
        /* compute: the median step; collectives: the least step (waiting for a descheduled peer only
         * adds) */
        printf("RESULT %.9f %.9f %.9g %.9g\n", ts[PT_STEPS / 2], tc[0], lat, bw);
    }
    if (st != DP_OK) fprintf(stderr, "plan time worker: %s\n", dp_last_error());
    dp_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    if (be) opt_backend_destroy(be);
    MPI_Finalize();
    return st == DP_OK ? 0 : 3;
}

/* runs the worker on R ranks: 0 and the measured compute (CPU outside the collectives), the
 * collectives' wall time and the link, or -1 */
static int pt_measure(double *comp, double *comm, double *lat, double *bw, const char *self, const pt_cfg *c, int R) {
    char cmd[1024], line[512];
    snprintf(cmd, sizeof cmd,
             "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
             "OMPI_MCA_mpi_yield_when_idle=1 ASAN_OPTIONS=detect_odr_violation=0:detect_leaks=0 "
             "%s -n %d '%s' --worker %lld %lld %lld %lld %lld %lld %lld %lld %s %s %d 2>&1",
             R > 1 ? "mpirun" : "mpirun", R, self, (long long)c->V, (long long)c->D, (long long)c->L, (long long)c->H,
             (long long)c->F, (long long)c->T, (long long)c->B, (long long)c->k, c->strategy, c->sharding, c->f32);
    FILE *f = popen(cmd, "r");
    int found = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (found < 0 && sscanf(line, "RESULT %lf %lf %lf %lf", comp, comm, lat, bw) == 4) found = 0;
        else if (found < 0) fprintf(stderr, "  worker: %s", line);
    }
    if (f) pclose(f);
    return found;
}

/* the projection of c on R ranks with the link measured by the worker: *t the compute, *tc the
 * collectives; dp_terms 0: the negative control without the per-example work */
static dp_status pt_project(double *t, double *tc, const pt_cfg *c, int R, double lat, double bw, int dp_terms) {
    plan_job job;
    memset(&job, 0, sizeof job);
    job.model = (opt_cost_llama){"llama", c->V, c->D, c->L, c->H, c->H, c->F, 0};
    job.batch = c->B;
    job.seq = c->T;
    job.micro_batches = c->k;
    if (!opt_cost_strategy_parse(&job.strategy, c->strategy)) return DP_ERR_INVALID;
    job.elem_bytes = c->f32 ? 4 : 8;
    job.n_states = 2;
    job.dp = 1;
    plan_layout lay = {R, 1, 0, 0};
    for (int z = 0; z < 4; z++)
        if (strcmp(c->sharding, (const char *[]){"replicated", "zero1", "zero2", "zero3"}[z]) == 0) lay.zero = z;
    plan_device dev;
    plan_device_builtin(&dev, "host");
    plan_result r;
    DP_TRY(plan_project(&r, &job, &lay, &dev, PLAN_ENGINE)); /* its memory: the working set */
    DP_TRY(plan_calibrate(&dev, &job, plan_chunk(job.batch, R, job.micro_batches), r.mem_total));
    if (R > 1) { dev.intra.bw = bw; dev.intra.lat = lat; }
    dev.cores = 0; /* CPU seconds: one core per rank */
    DP_TRY(plan_project(&r, &job, &lay, &dev, PLAN_ENGINE));
    *t = r.t_compute;
    *tc = r.t_exposed;
    if (!dp_terms) *t -= r.t_op[PLAN_OP_BGEMM] + r.t_op[PLAN_OP_PEELEM] + r.t_op[PLAN_OP_GHOST] + r.t_op[PLAN_OP_NOISE];
    return DP_OK;
}

/* every configuration at R = 1, 2, 4: the projected compute over the measured one within bound (the
 * collectives are printed: their bytes are exact (test_plan.c), their wall time on this shared
 * machine measures the neighbours); returns the worst error */
static double pt_validate(const char *self, const pt_cfg *cfgs, int n, double bound) {
    double worst = 0;
    printf("# step time, projected (dpcert plan, per-operation costs calibrated here) vs measured (median of %d steps):\n"
           "# compute = CPU seconds outside the collectives of the busiest rank; collectives = wall seconds inside them\n"
           "# of the rank that waited least (not a measurement of the link here: load 20-40 on 2 cores)\n", PT_STEPS);
    printf("# %-44s %2s %10s %10s %10s %10s %8s\n", "configuration", "R", "meas comp", "meas coll", "proj comp", "proj coll",
           "error");
    for (int i = 0; i < n; i++)
        for (int R = 1; R <= 4; R *= 2) {
            double mc = 0, mm = 0, lat = 0, bw = 0, pc = 0, pm = 0;
            if (pt_measure(&mc, &mm, &lat, &bw, self, &cfgs[i], R) != 0) {
                T_CHECK(0, "%s on %d rank(s): the worker failed", cfgs[i].what, R);
                continue;
            }
            T_OK(pt_project(&pc, &pm, &cfgs[i], R, lat, bw, 1));
            double err = pc / mc - 1;
            if (fabs(err) > bound) { /* interference only adds CPU time (caches, frequency): measure once more */
                double mc2 = 0, mm2 = 0, lat2 = 0, bw2 = 0;
                if (pt_measure(&mc2, &mm2, &lat2, &bw2, self, &cfgs[i], R) == 0 && mc2 < mc) mc = mc2;
                err = pc / mc - 1;
            }
            printf("# %-44s %2d %10.6f %10.6f %10.6f %10.6f %+7.1f%% (link %.3g us, %.3g GB/s)\n", cfgs[i].what, R, mc,
                   mm, pc, pm, 100 * err, 1e6 * lat, bw / 1e9);
            fflush(stdout);
            if (fabs(err) > worst) worst = fabs(err);
            T_CHECK(fabs(err) <= bound, "%s on %d rank(s): projected compute %.6f s, measured %.6f s: error %.1f%% > %.0f%%",
                    cfgs[i].what, R, pc, mc, 100 * err, 100 * bound);
        }
    return worst;
}

/* A test program's start: the worker (`--worker`), or a skip without mpirun or under sanitizers
 * (their step times are not the engine's); 1 with *rc its exit status, 0 to go on. */
static int pt_prelude(int *rc, int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--worker") == 0) { *rc = pt_worker(argc, argv); return 1; }
    if (system("command -v mpirun >/dev/null 2>&1") != 0) { *rc = t_skip("mpirun not found: no measured step time"); return 1; }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
    *rc = t_skip("a sanitizer build: its step times are not the engine's (the projection is checked in the plain build)");
    return 1;
#else
    return 0;
#endif
}

#endif

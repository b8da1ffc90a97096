// optimized/tests/test_cuda_emu_comm.cu — the CUDA backend's communicator and collectives
// on the emulation's NCCL (over MPI), and the regression tests of its known defects
// (docs/cuda.md "Known defects, fixed"). Run alone (one rank) by ci/run-tests.sh, and under
// mpirun by optimized/tests/cuda_emu_comm.sh, which gives the mode:
//   (none)    every collective of the communicator (cu_comm_coll_: allreduce, reduce-scatter, allgather,
//             alltoall, broadcast, send/recv around a ring) and of the backend's operation
//             table (async allreduce + wait, allgatherv_bytes, barrier) on integer data:
//             exact results on every rank;
//   idfail    (with CU_EMU_FAULT=ncclGetUniqueId) rank 0 cannot make the NCCL id: every
//             rank must fail cu_comm_create with a message (before the fix the others
//             waited forever in the id broadcast);
//   overfull  (with CU_EMU_DEVICES=1, two or more ranks) more ranks than devices on the
//             node: every rank gets DP_ERR_NOT_SUPPORTED naming the cause, from
//             cu_comm_local_device and from cu_comm_create, before any NCCL call;
//   groups    (also part of the default mode) process groups of the backend: color
//             rank % 2, key -rank; every collective on the group on exact integer data
//             (allreduce sync and async, reduce-scatter, allgather, alltoall, broadcast
//             from group rank 1, the engine's ring: async recv from r - 1 and async send
//             to r + 1, then both waits, barrier), and comm_stats counting exactly the
//             bytes of docs/engine.md "Byte counters" for each;
//   p2pcross  the emulated NCCL's point-to-point semantics (nccl.h: blocking for the GPU):
//             every rank issues ncclRecv from r - 1 then ncclSend to r + 1 on one stream;
//             outside a group the stream wait must time out (CU_EMU_WAIT_TIMEOUT = 2: a
//             hang on a GPU, the negative control of the backend's batching), fused in
//             ncclGroupStart / ncclGroupEnd it must complete with the right data;
//   timeout   rank 1 joins an allreduce 4 s late; with --collective-timeout 1 (the
//             backend's set_collective_timeout) rank 0 must fail within [1, 4) s naming
//             the collective, and the backend must be destroyed without hanging.
// Exit 0 when this rank's checks pass.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "common/test.h"
#include "optimized/backend.h"
}
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_internal.cuh"
#include <cuda_runtime.h>
#include <nccl.h>

static int rank = 0, size = 1;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static float *up(cu_ctx *ctx, const float *h, int64_t n) {
    float *d = NULL;
    T_OK(cu_malloc((void **)&d, (size_t)n * 4));
    T_OK(cu_h2d(ctx, d, h, (size_t)n * 4));
    return d;
}
static int diff(const float *a, const float *b, int64_t n) {
    int d = 0;
    for (int64_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

static void test_api(void) {
    int dev = -1;
    T_OK(cu_comm_local_device(&dev));
    cu_ctx *ctx = NULL;
    cu_comm *c = NULL;
    T_OK(cu_ctx_create(&ctx, dev));
    T_OK(cu_comm_create(&c, ctx));
    if (!ctx || !c) return;
    T_CHECK(cu_comm_rank(c) == rank && cu_comm_size(c) == size, "rank %d of %d", cu_comm_rank(c), cu_comm_size(c));
    const int64_t n = 6;
    float *h = (float *)malloc(sizeof(float) * n * size), *r = (float *)malloc(sizeof(float) * n * size),
          *want = (float *)malloc(sizeof(float) * n * size);
    /* rank q contributes v(q, i) = 100 q + i to element i */
    for (int64_t i = 0; i < n * size; i++) h[i] = (float)(100 * rank + i);
    float *d = up(ctx, h, n * size), *o = up(ctx, h, n * size);
    T_OK(cu_comm_wait_compute(ctx));
    T_OK(cu_comm_coll_(c, CU_COLL_ALLREDUCE, d, d, n * size, 0, 0));
    T_OK(cu_comm_sync(c));
    T_OK(cu_d2h(ctx, r, d, sizeof(float) * n * size));
    for (int64_t i = 0; i < n * size; i++) want[i] = (float)(100 * (size * (size - 1) / 2) + size * i);
    T_CHECK(diff(r, want, n * size) == 0, "allreduce");
    T_OK(cu_h2d(ctx, d, h, sizeof(float) * n * size));
    T_OK(cu_comm_coll_(c, CU_COLL_REDUCE_SCATTER, o, d, n, 0, 0));
    T_OK(cu_comm_sync(c));
    T_OK(cu_d2h(ctx, r, o, sizeof(float) * n));
    T_CHECK(diff(r, want + rank * n, n) == 0, "reduce_scatter: this rank's block of the sum");
    T_OK(cu_comm_coll_(c, CU_COLL_ALLGATHER, o, d, n, 0, 0));
    T_OK(cu_comm_sync(c));
    T_OK(cu_d2h(ctx, r, o, sizeof(float) * n * size));
    for (int q = 0; q < size; q++)
        for (int64_t i = 0; i < n; i++) want[q * n + i] = (float)(100 * q + i);
    T_CHECK(diff(r, want, n * size) == 0, "allgather: rank order");
    T_OK(cu_comm_coll_(c, CU_COLL_ALLTOALL, o, d, n, 0, 0));
    T_OK(cu_comm_sync(c));
    T_OK(cu_d2h(ctx, r, o, sizeof(float) * n * size));
    for (int q = 0; q < size; q++)
        for (int64_t i = 0; i < n; i++) want[q * n + i] = (float)(100 * q + rank * n + i);
    T_CHECK(diff(r, want, n * size) == 0, "alltoall: block i of recv is rank i's block for me");
    T_OK(cu_comm_coll_(c, CU_COLL_BROADCAST, d, d, n, 0, size - 1));
    T_OK(cu_comm_sync(c));
    T_OK(cu_d2h(ctx, r, d, sizeof(float) * n));
    for (int64_t i = 0; i < n; i++) want[i] = (float)(100 * (size - 1) + i);
    T_CHECK(diff(r, want, n) == 0, "broadcast from the last rank");
    if (size > 1) { /* ring: send to the next rank, receive from the previous (ordered by rank parity) */
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        T_OK(cu_h2d(ctx, d, h, sizeof(float) * n));
        if (rank % 2 == 0) {
            T_OK(cu_comm_coll_(c, CU_COLL_SEND, NULL, d, n, 0, next));
            T_OK(cu_comm_coll_(c, CU_COLL_RECV, o, NULL, n, 0, prev));
        } else {
            T_OK(cu_comm_coll_(c, CU_COLL_RECV, o, NULL, n, 0, prev));
            T_OK(cu_comm_coll_(c, CU_COLL_SEND, NULL, d, n, 0, next));
        }
        T_OK(cu_comm_sync(c));
        T_OK(cu_d2h(ctx, r, o, sizeof(float) * n));
        for (int64_t i = 0; i < n; i++) want[i] = (float)(100 * prev + i);
        T_CHECK(diff(r, want, n) == 0, "send/recv around the ring");
    }
    cu_free(d); cu_free(o);
    free(h); free(r); free(want);
    cu_comm_destroy(c);
    cu_ctx_destroy(ctx);
}

static void test_backend(void) {
    opt_backend_config cfg = {"cuda-emu", DP_F64, 1, size > 1};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &cfg));
    if (!be) return;
    T_CHECK(strcmp(be->name, "cuda-emu") == 0 && be->comm.rank == rank && be->comm.size == size, "backend %s, rank %d of %d",
            be->name, be->comm.rank, be->comm.size);
    T_CHECK(be->ops.set_collective_timeout != NULL, "the CUDA backend has a collective timeout");
    T_OK(be->ops.set_collective_timeout(be->ctx, 60.0));
    double h[4] = {1.0 + rank, 2.0, 3.0, 4.0 * rank}, r[4];
    void *d = NULL;
    T_OK(be->ops.alloc(be->ctx, &d, sizeof h));
    T_OK(be->ops.upload_f64(be->ctx, d, h, 4));
    opt_async *a = NULL;
    T_OK(be->ops.allreduce_sum(be->ctx, NULL, d, 4, &a));
    T_OK(be->ops.wait(be->ctx, a));
    T_OK(be->ops.download_f64(be->ctx, r, d, 4));
    double s = size * (size - 1) / 2.0;
    T_CHECK(r[0] == size + s && r[1] == 2.0 * size && r[3] == 4.0 * s, "backend allreduce: %g %g %g", r[0], r[1], r[3]);
    void *all = NULL;
    size_t len = 0;
    T_OK(be->ops.allgatherv_bytes(be->ctx, &all, &len, &rank, sizeof rank));
    int ok = len == sizeof(int) * (size_t)size;
    for (int q = 0; ok && q < size; q++) ok = ((int *)all)[q] == q;
    T_CHECK(ok, "allgatherv_bytes in rank order");
    free(all);
    T_OK(be->ops.barrier(be->ctx, NULL));
    be->ops.free(be->ctx, d);
    opt_backend_destroy(be);
}

/* upload v [n] as doubles, run fn, download into out */
static void g_put(opt_backend *be, void *d, const double *v, int64_t n) { T_OK(be->ops.upload_f64(be->ctx, d, v, n)); }
static void g_get(opt_backend *be, double *v, const void *d, int64_t n) { T_OK(be->ops.download_f64(be->ctx, v, d, n)); }
static int g_eq(const double *a, const double *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) if (a[i] != b[i]) return 0;
    return 1;
}
/* world rank of group rank q in the group of color c (key -rank: larger world ranks first) */
static int g_world(int c, int q) {
    for (int w = size - 1; w >= 0; w--)
        if (w % 2 == c && q-- == 0) return w;
    return -1;
}
static void test_groups(void) {
    opt_backend_config cfg = {"cuda-emu", DP_F64, 1, size > 1};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &cfg));
    if (!be) return;
    T_CHECK(be->ops.group_split && be->ops.group_free && be->ops.comm_stats, "groups and counters are supported");
    if (!be->ops.group_split || !be->ops.comm_stats) { opt_backend_destroy(be); return; }
    const int color = rank % 2;
    opt_group *g = NULL;
    T_OK(be->ops.group_split(be->ctx, &g, color, -rank));
    if (!g) { opt_backend_destroy(be); return; }
    int R = 0, me = 0;
    for (int w = 0; w < size; w++) if (w % 2 == color) { R++; if (w > rank) me++; }
    T_CHECK(g->size == R && g->rank == me && g->color == color, "rank %d: group rank %d of %d (expected %d of %d)", rank,
            g->rank, g->size, me, R);
    opt_comm_stats st;
    T_OK(be->ops.comm_stats(be->ctx, &st, 1));
    enum { N = 5 };
    const uint64_t e = 8, nb = e * N;
    double *x = (double *)calloc((size_t)(N * R), sizeof(double)), *y = (double *)calloc((size_t)(N * R), sizeof(double)),
           *want = (double *)calloc((size_t)(N * R), sizeof(double));
    void *dx = NULL, *dy = NULL;
    T_OK(be->ops.alloc(be->ctx, &dx, (size_t)(N * R) * 8));
    T_OK(be->ops.alloc(be->ctx, &dy, (size_t)(N * R) * 8));
    /* allreduce (sync, then async + wait): sum over the group of world rank + 1 + i */
    for (int async = 0; async < 2; async++) {
        for (int i = 0; i < N; i++) { x[i] = rank + 1 + i; want[i] = 0; }
        for (int q = 0; q < R; q++) for (int i = 0; i < N; i++) want[i] += g_world(color, q) + 1 + i;
        g_put(be, dx, x, N);
        opt_async *a = NULL;
        T_OK(be->ops.allreduce_sum(be->ctx, g, dx, N, async ? &a : NULL));
        T_OK(be->ops.wait(be->ctx, a));
        g_get(be, y, dx, N);
        T_CHECK(g_eq(y, want, N), "rank %d: group allreduce (%s)", rank, async ? "async" : "sync");
    }
    /* reduce-scatter: block q of rank w's input = 100 w + 10 q + i; my block summed */
    for (int q = 0; q < R; q++) for (int i = 0; i < N; i++) x[q * N + i] = 100 * rank + 10 * q + i;
    for (int i = 0; i < N; i++) { want[i] = 0; for (int q = 0; q < R; q++) want[i] += 100 * g_world(color, q) + 10 * me + i; }
    g_put(be, dx, x, N * R);
    T_OK(be->ops.reduce_scatter_sum(be->ctx, g, dy, dx, N, NULL));
    g_get(be, y, dy, N);
    T_CHECK(g_eq(y, want, N), "rank %d: group reduce-scatter", rank);
    /* allgather: block q = group rank q's input (its world rank + i) */
    for (int i = 0; i < N; i++) x[i] = 1000 * rank + i;
    for (int q = 0; q < R; q++) for (int i = 0; i < N; i++) want[q * N + i] = 1000 * g_world(color, q) + i;
    g_put(be, dx, x, N);
    T_OK(be->ops.allgather(be->ctx, g, dy, dx, N, NULL));
    g_get(be, y, dy, N * R);
    T_CHECK(g_eq(y, want, N * R), "rank %d: group allgather", rank);
    /* alltoall: block q of my send goes to group rank q; block q of recv is from group rank q */
    for (int q = 0; q < R; q++) for (int i = 0; i < N; i++) {
        x[q * N + i] = 1000 * rank + 10 * q + i;
        want[q * N + i] = 1000 * g_world(color, q) + 10 * me + i;
    }
    g_put(be, dx, x, N * R);
    T_OK(be->ops.alltoall(be->ctx, g, dy, dx, N, NULL));
    g_get(be, y, dy, N * R);
    T_CHECK(g_eq(y, want, N * R), "rank %d: group alltoall", rank);
    /* broadcast from group rank R - 1 */
    const int root = R - 1;
    for (int i = 0; i < N; i++) { x[i] = 7 * rank + i; want[i] = 7 * g_world(color, root) + i; }
    g_put(be, dx, x, N);
    T_OK(be->ops.broadcast(be->ctx, g, dx, N, root, NULL));
    g_get(be, y, dx, N);
    T_CHECK(g_eq(y, want, N), "rank %d: group broadcast", rank);
    /* the engine's ring (optimized/attn_cp_ring.c): async recv from r - 1, async send to r + 1, wait both */
    if (R > 1) {
        for (int i = 0; i < N; i++) { x[i] = 3 * rank + i; want[i] = 3 * g_world(color, (me + R - 1) % R) + i; }
        g_put(be, dx, x, N);
        opt_async *rq = NULL, *sq = NULL;
        T_OK(be->ops.recv(be->ctx, g, dy, N, (me + R - 1) % R, 5, &rq));
        T_OK(be->ops.send(be->ctx, g, dx, N, (me + 1) % R, 5, &sq));
        T_OK(be->ops.wait(be->ctx, rq));
        T_OK(be->ops.wait(be->ctx, sq));
        g_get(be, y, dy, N);
        T_CHECK(g_eq(y, want, N), "rank %d: ring on the group", rank);
        /* a synchronous send joins the batch of an earlier asynchronous receive */
        T_OK(be->ops.recv(be->ctx, g, dy, N, (me + R - 1) % R, 6, &rq));
        T_OK(be->ops.send(be->ctx, g, dx, N, (me + 1) % R, 6, NULL));
        T_OK(be->ops.wait(be->ctx, rq));
        g_get(be, y, dy, N);
        T_CHECK(g_eq(y, want, N), "rank %d: ring with a synchronous send", rank);
    } else {
        T_CHECK(be->ops.send(be->ctx, g, dx, N, 0, 5, NULL) == DP_ERR_INVALID, "send to itself in a one-rank group refused");
    }
    T_OK(be->ops.barrier(be->ctx, g));
    /* the counters (docs/engine.md "Byte counters"), R ranks in the group */
    T_OK(be->ops.comm_stats(be->ctx, &st, 0));
    const uint64_t r1 = (uint64_t)(R - 1);
    struct { opt_coll_kind k; uint64_t calls, sent, recv; } exp[] = {
        {OPT_COLL_ALLREDUCE_SUM, 2, 2 * nb * r1, 2 * nb * r1},
        {OPT_COLL_REDUCE_SCATTER_SUM, 1, nb * r1, nb * r1},
        {OPT_COLL_ALLGATHER, 1, nb * r1, nb * r1},
        {OPT_COLL_ALLTOALL, 1, nb * r1, nb * r1},
        {OPT_COLL_BROADCAST, 1, me == root ? nb * r1 : 0, me == root ? 0 : nb},
        {OPT_COLL_SEND, R > 1 ? 2u : 0u, R > 1 ? 2 * nb : 0, 0},
        {OPT_COLL_RECV, R > 1 ? 2u : 0u, 0, R > 1 ? 2 * nb : 0},
        {OPT_COLL_BARRIER, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof exp / sizeof exp[0]; i++)
        T_CHECK(st.calls[exp[i].k] == exp[i].calls && st.sent[exp[i].k] == exp[i].sent && st.recv[exp[i].k] == exp[i].recv,
                "rank %d: %s: %llu calls, %llu sent, %llu received (expected %llu, %llu, %llu)", rank,
                opt_coll_names[exp[i].k], (unsigned long long)st.calls[exp[i].k], (unsigned long long)st.sent[exp[i].k],
                (unsigned long long)st.recv[exp[i].k], (unsigned long long)exp[i].calls, (unsigned long long)exp[i].sent,
                (unsigned long long)exp[i].recv);
    be->ops.free(be->ctx, dx);
    be->ops.free(be->ctx, dy);
    be->ops.group_free(be->ctx, g);
    free(x); free(y); free(want);
    opt_backend_destroy(be);
}

/* raw emulated NCCL: recv from r - 1, then send to r + 1, on one stream (grouped or not) */
static void test_p2pcross(void) {
    T_CHECK(cudaSetDevice(rank) == cudaSuccess, "rank %d: device %d (a device per rank)", rank, rank);
    for (int grouped = 1; grouped >= 0; grouped--) {
        ncclUniqueId id;
        if (rank == 0) T_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "id");
        MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        ncclComm_t c = NULL;
        T_CHECK(ncclCommInitRank(&c, size, id, rank) == ncclSuccess, "ncclCommInitRank");
        cudaStream_t s;
        T_CHECK(cudaStreamCreate(&s) == cudaSuccess, "stream");
        float h[4] = {(float)rank, 1, 2, 3}, r[4] = {0, 0, 0, 0};
        float *dx = NULL, *dy = NULL;
        cudaMalloc((void **)&dx, sizeof h);
        cudaMalloc((void **)&dy, sizeof h);
        cudaMemcpy(dx, h, sizeof h, cudaMemcpyHostToDevice);
        if (grouped) T_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        T_CHECK(ncclRecv(dy, 4, ncclFloat32, (rank + size - 1) % size, c, s) == ncclSuccess, "recv");
        T_CHECK(ncclSend(dx, 4, ncclFloat32, (rank + 1) % size, c, s) == ncclSuccess, "send");
        if (grouped) T_CHECK(ncclGroupEnd() == ncclSuccess, "group end");
        double t0 = now();
        cudaError_t e = cudaStreamSynchronize(s);
        if (grouped) {
            cudaMemcpy(r, dy, sizeof r, cudaMemcpyDeviceToHost);
            T_CHECK(e == cudaSuccess && r[0] == (float)((rank + size - 1) % size) && r[3] == 3.0f,
                    "rank %d: grouped recv/send completes (%s, got %g)", rank, cudaGetErrorName(e), r[0]);
            T_CHECK(ncclGroupEnd() == ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart is invalid usage");
            cudaFree(dx); cudaFree(dy);
            cudaStreamDestroy(s);
            ncclCommDestroy(c);
        } else { /* a hang on a GPU: the wait times out; the communicator is abandoned */
            T_CHECK(e != cudaSuccess && now() - t0 >= 1.5, "rank %d: ungrouped recv then send must not complete (%s after "
                    "%.1f s)", rank, cudaGetErrorName(e), now() - t0);
            printf("rank %d: ungrouped recv/send: %s after %.1f s (as a GPU hangs)\n", rank, cudaGetErrorName(e), now() - t0);
            ncclCommAbort(c);
        }
    }
}

static void test_idfail(void) {
    cu_ctx *ctx = NULL;
    cu_comm *c = NULL;
    T_OK(cu_ctx_create(&ctx, 0));
    dp_status st = cu_comm_create(&c, ctx);
    const char *e = dp_last_error();
    T_CHECK(st == DP_ERR_DEVICE && c == NULL, "rank %d: cu_comm_create must fail (status %d)", rank, (int)st);
    T_CHECK(strstr(e, rank == 0 ? "ncclGetUniqueId" : "rank 0 could not create the NCCL unique id") != NULL,
            "rank %d names the cause: %s", rank, e);
    printf("rank %d: %s\n", rank, e);
    cu_ctx_destroy(ctx);
}

static void test_overfull(void) {
    int dev = -1;
    dp_status st = cu_comm_local_device(&dev);
    T_CHECK(st == DP_ERR_NOT_SUPPORTED && strstr(dp_last_error(), "share 1 CUDA device") != NULL,
            "rank %d: local device: %s", rank, dp_last_error());
    cu_ctx *ctx = NULL;
    cu_comm *c = NULL;
    T_OK(cu_ctx_create(&ctx, 0));
    st = cu_comm_create(&c, ctx);
    T_CHECK(st == DP_ERR_NOT_SUPPORTED && strstr(dp_last_error(), "NCCL needs a device per rank") != NULL,
            "rank %d: cu_comm_create: %s", rank, dp_last_error());
    printf("rank %d: %s\n", rank, dp_last_error());
    cu_ctx_destroy(ctx);
    opt_backend_config cfg = {"cuda-emu", DP_F32, 1, 1};
    opt_backend *be = NULL;
    st = opt_backend_create(&be, &cfg);
    T_CHECK(st == DP_ERR_NOT_SUPPORTED && be == NULL, "rank %d: the backend refuses too: %s", rank, dp_last_error());
}

static void test_timeout(void) {
    opt_backend_config cfg = {"cuda-emu", DP_F32, 1, 1};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &cfg));
    if (!be) return;
    T_OK(be->ops.set_collective_timeout(be->ctx, 1.0));
    T_CHECK(be->ops.set_collective_timeout(be->ctx, 0.0) == DP_ERR_USAGE, "timeout 0 refused");
    double h[3] = {1, 2, 3};
    void *d = NULL;
    T_OK(be->ops.alloc(be->ctx, &d, sizeof h));
    T_OK(be->ops.upload_f64(be->ctx, d, h, 3));
    if (rank == 1) sleep(4);
    double t0 = now();
    dp_status st = be->ops.allreduce_sum(be->ctx, NULL, d, 3, NULL);
    double dt = now() - t0;
    if (rank == 0) {
        T_CHECK(st == DP_ERR_DEVICE && strstr(dp_last_error(), "collective 'allreduce_sum' timed out on rank 0") != NULL,
                "rank 0 fails naming the collective: %s", dp_last_error());
        T_CHECK(dt >= 1.0 && dt < 4.0, "after the timeout (1 s), before the late rank joins (4 s): %.2f s", dt);
        printf("rank 0: %s (%.2f s)\n", dp_last_error(), dt);
    }
    double t1 = now();
    be->ops.free(be->ctx, d);
    opt_backend_destroy(be); /* must not wait for the abandoned collective */
    T_CHECK(now() - t1 < 2.0, "rank %d: the backend is destroyed at once after a timeout", rank);
    MPI_Barrier(MPI_COMM_WORLD); /* the late rank completes its side, then both end */
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE")) {
        int prov = 0;
        MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &prov);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
    }
    if (!*mode) {
        test_api();
        test_backend();
        test_groups();
    } else if (strcmp(mode, "groups") == 0) {
        test_groups();
    } else if (strcmp(mode, "p2pcross") == 0 && size > 1) {
        test_p2pcross();
    } else if (strcmp(mode, "idfail") == 0) {
        test_idfail();
    } else if (strcmp(mode, "overfull") == 0) {
        test_overfull();
    } else if (strcmp(mode, "timeout") == 0 && size == 2) {
        test_timeout();
    } else {
        fprintf(stderr, "usage: [mpirun -n R] %s [groups|p2pcross (2+ ranks)|idfail|overfull|timeout (2 ranks)]\n", argv[0]);
        return 2;
    }
    int rc = t_finish();
    int fin = 0;
    MPI_Finalized(&fin);
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited && !fin) MPI_Finalize();
    return rc;
}

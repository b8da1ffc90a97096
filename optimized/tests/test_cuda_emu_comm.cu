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
    } else if (strcmp(mode, "idfail") == 0) {
        test_idfail();
    } else if (strcmp(mode, "overfull") == 0) {
        test_overfull();
    } else if (strcmp(mode, "timeout") == 0 && size == 2) {
        test_timeout();
    } else {
        fprintf(stderr, "usage: [mpirun -n R] %s [idfail|overfull|timeout (2 ranks)]\n", argv[0]);
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

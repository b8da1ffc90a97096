/* optimized/tests/test_collectives.c — the host backend's collectives. Run alone it
 * tests the one-rank communicator (MPI not initialised); optimized/tests/mpi_dpsgd.sh also
 * runs it under `mpirun -n 3` and `-n 4`, where it initialises MPI and checks every
 * collective on every rank, in f64 and f32, blocking and asynchronous:
 *   all-reduce       = the sum in rank order ((x_0 + x_1) + x_2) + ..., bit for bit;
 *   reduce-scatter   = my block of that sum;
 *   all-gather / all-to-all / broadcast / send-recv ring = exact copies;
 *   async handles    = started, overlapped with local work, completed by wait.
 * Inputs are values from the TEST stream, distinct per rank and element. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "common/test.h"
#include "optimized/tests/mpi_test.h"
#include "optimized/backend.h"

static uint64_t g_seed;
static double val(int rank, int64_t i) { return dp_stream_uniform(g_seed, DP_PURPOSE_TEST, 40 + (uint32_t)rank, 0, (uint64_t)i) - 0.5; }

static void run(dp_dtype dt, int use_mpi) {
    opt_backend_config cfg = {"host", dt, 1, use_mpi};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &cfg));
    if (!be) return;
    const int R = be->comm.size, me = be->comm.rank;
    const int64_t n = 5;
    size_t es = opt_backend_esize(be);
    double h[64], want[64], got[64];
    void *buf, *big, *out;
    be->ops.alloc(be->ctx, &buf, es * (size_t)(n * R));
    be->ops.alloc(be->ctx, &big, es * (size_t)(n * R));
    be->ops.alloc(be->ctx, &out, es * (size_t)(n * R));
    /* all-reduce, blocking and async (overlapped with a local GEMM) */
    for (int async = 0; async < 2; async++) {
        for (int64_t i = 0; i < n; i++) h[i] = val(me, i);
        be->ops.upload_f64(be->ctx, buf, h, n);
        opt_async *a = NULL;
        T_OK(be->ops.allreduce_sum(be->ctx, NULL, buf, n, async ? &a : NULL));
        if (async) {
            T_CHECK(R == 1 || a != NULL, "no async handle");
            T_OK(be->ops.gemm(be->ctx, out, big, big, 0, 1, 1, 1, n, 1.0, 0.0, 1, 0, 0, 0)); /* overlap */
            T_OK(be->ops.wait(be->ctx, a));
        }
        be->ops.download_f64(be->ctx, got, buf, n);
        for (int64_t i = 0; i < n; i++) {
            if (dt == DP_F64) { double s = val(0, i); for (int r = 1; r < R; r++) s += val(r, i); want[i] = s; }
            else { float s = (float)val(0, i); for (int r = 1; r < R; r++) s += (float)val(r, i); want[i] = s; }
            T_CHECK(got[i] == want[i], "allreduce (async %d) rank %d elem %lld: %.17g vs %.17g", async, me, (long long)i, got[i], want[i]);
        }
    }
    /* reduce-scatter: send [R, n], recv my block of the sum */
    for (int64_t i = 0; i < n * R; i++) h[i] = val(me, 100 + i);
    be->ops.upload_f64(be->ctx, big, h, n * R);
    T_OK(be->ops.reduce_scatter_sum(be->ctx, NULL, out, big, n, NULL));
    be->ops.download_f64(be->ctx, got, out, n);
    for (int64_t i = 0; i < n; i++) {
        double s;
        if (dt == DP_F64) { s = val(0, 100 + me * n + i); for (int r = 1; r < R; r++) s += val(r, 100 + me * n + i); }
        else { float f = (float)val(0, 100 + me * n + i); for (int r = 1; r < R; r++) f += (float)val(r, 100 + me * n + i); s = f; }
        T_CHECK(got[i] == s, "reduce_scatter rank %d elem %lld", me, (long long)i);
    }
    /* all-gather */
    for (int64_t i = 0; i < n; i++) h[i] = val(me, 200 + i);
    be->ops.upload_f64(be->ctx, buf, h, n);
    opt_async *a = NULL;
    T_OK(be->ops.allgather(be->ctx, NULL, out, buf, n, &a));
    T_OK(be->ops.wait(be->ctx, a));
    be->ops.download_f64(be->ctx, got, out, n * R);
    for (int r = 0; r < R; r++)
        for (int64_t i = 0; i < n; i++) {
            double w = dt == DP_F64 ? val(r, 200 + i) : (double)(float)val(r, 200 + i);
            T_CHECK(got[r * n + i] == w, "allgather rank %d block %d", me, r);
        }
    /* all-to-all: block j of my send goes to rank j */
    for (int j = 0; j < R; j++)
        for (int64_t i = 0; i < n; i++) h[j * n + i] = me * 1000 + j * 10 + (double)i;
    be->ops.upload_f64(be->ctx, big, h, n * R);
    T_OK(be->ops.alltoall(be->ctx, NULL, out, big, n, NULL));
    be->ops.download_f64(be->ctx, got, out, n * R);
    for (int r = 0; r < R; r++)
        for (int64_t i = 0; i < n; i++) T_CHECK(got[r * n + i] == r * 1000 + me * 10 + (double)i, "alltoall rank %d from %d", me, r);
    /* broadcast from the last rank */
    for (int64_t i = 0; i < n; i++) h[i] = me == R - 1 ? 7.0 + (double)i : -1;
    be->ops.upload_f64(be->ctx, buf, h, n);
    T_OK(be->ops.broadcast(be->ctx, NULL, buf, n, R - 1, NULL));
    be->ops.download_f64(be->ctx, got, buf, n);
    for (int64_t i = 0; i < n; i++) T_CHECK(got[i] == 7.0 + (double)i, "broadcast rank %d", me);
    T_CHECK(be->ops.broadcast(be->ctx, NULL, buf, n, R, NULL) == DP_ERR_INVALID, "broadcast root out of range accepted");
    /* send/recv ring: rank r sends to r+1, receives from r-1 (async both, then wait) */
    if (R > 1) {
        for (int64_t i = 0; i < n; i++) h[i] = me + 0.25 * (double)i;
        be->ops.upload_f64(be->ctx, buf, h, n);
        opt_async *s = NULL, *rv = NULL;
        T_OK(be->ops.recv(be->ctx, NULL, out, n, (me + R - 1) % R, 3, &rv));
        T_OK(be->ops.send(be->ctx, NULL, buf, n, (me + 1) % R, 3, &s));
        T_OK(be->ops.wait(be->ctx, s));
        T_OK(be->ops.wait(be->ctx, rv));
        be->ops.download_f64(be->ctx, got, out, n);
        for (int64_t i = 0; i < n; i++) T_CHECK(got[i] == (me + R - 1) % R + 0.25 * (double)i, "ring rank %d", me);
    }
    /* variable-size gather in rank order */
    char mine[8];
    int len = snprintf(mine, sizeof mine, "r%d;", me);
    void *all = NULL;
    size_t alen = 0;
    T_OK(be->ops.allgatherv_bytes(be->ctx, &all, &alen, mine, (size_t)(me == 0 ? 0 : len)));
    char expect[256] = "";
    for (int r = 1; r < R; r++) snprintf(expect + strlen(expect), sizeof expect - strlen(expect), "r%d;", r);
    T_CHECK(alen == strlen(expect) && (alen == 0 || memcmp(all, expect, alen) == 0), "allgatherv rank %d", me);
    free(all);
    T_OK(be->ops.barrier(be->ctx, NULL));
    be->ops.free(be->ctx, buf); be->ops.free(be->ctx, big); be->ops.free(be->ctx, out);
    opt_backend_destroy(be);
}

int main(void) {
    int use_mpi = t_mpi_start();
    if (use_mpi < 0) return 1;
    int rank = 0, size = 1;
    if (use_mpi) { MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size); }
    g_seed = t_seed(21);
    printf("rank %d of %d (%s)\n", rank, size, use_mpi ? "MPI" : "no MPI");
    run(DP_F64, use_mpi);
    run(DP_F32, use_mpi);
    return t_mpi_finish(use_mpi);
}

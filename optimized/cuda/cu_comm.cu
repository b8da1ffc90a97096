// optimized/cuda/cu_comm.cu — NCCL communicator: rank and world size from MPI when
// launched by mpirun, otherwise a single GPU (rank 0 of 1). Collectives run on the
// context's comm stream so a reduce-scatter can overlap the backward pass on the
// compute stream (order them with cu_comm_wait_compute / cu_compute_wait_comm). The
// collectives themselves: cu_comm_coll_ (cu_internal.cuh), f32 or f64.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define CU_WITH_NCCL 1
#include "optimized/cuda/cu_api.h"
#include "common/alloc.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"

struct cu_comm {
    cu_ctx *ctx;
    ncclComm_t nccl;
    int rank, size;
    int own_mpi; /* MPI_Init was called here: finalise in destroy */
};

static int launched_by_mpirun(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

static int env_int(const char *a, const char *b, int dflt) {
    const char *e = getenv(a);
    if (!e) e = getenv(b);
    return e && *e ? atoi(e) : dflt;
}

static dp_status mpi_check(int rc, const char *expr) {
    if (rc == MPI_SUCCESS) return DP_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return dp_error(DP_ERR_DEVICE, "MPI call %s failed: %s", expr, msg);
}
#define MPI_CHECK(expr) DP_TRY(mpi_check((expr), #expr))

static int mpi_up(void) {
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    return inited && !fin;
}

/* NCCL needs one device per rank: two ranks of a node on one device fail inside
 * ncclCommInitRank ("Duplicate GPU detected"). Refuse first, on every rank alike: the ranks
 * of each node are counted with MPI (else the launcher's environment), and under MPI the
 * verdict is agreed (any node over-full fails every rank, so no rank goes on to wait for
 * the others in the id broadcast). ndev: devices visible to this rank. */
static dp_status ranks_fit(int ndev) {
    int node = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", 1), worst = 0;
    if (mpi_up()) {
        MPI_Comm nc;
        MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &nc));
        int rc = MPI_Comm_size(nc, &node);
        MPI_Comm_free(&nc);
        MPI_CHECK(rc);
        int mine = node > ndev ? node : 0;
        MPI_CHECK(MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    } else if (node > ndev) {
        worst = node;
    }
    if (worst)
        return dp_error(DP_ERR_NOT_SUPPORTED,
                        "%d ranks on one node share %d CUDA device%s: NCCL needs a device per rank (two ranks on one "
                        "device fail in ncclCommInitRank); start at most %d rank%s per node, or use --backend host",
                        worst, ndev, ndev == 1 ? "" : "s", ndev, ndev == 1 ? "" : "s");
    return DP_OK;
}

extern "C" dp_status cu_comm_local_device(int *device) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        return dp_error(DP_ERR_NOT_SUPPORTED, "no CUDA device (%s)", e == cudaSuccess ? "device count is 0" : cudaGetErrorString(e));
    }
    DP_TRY(ranks_fit(n));
    int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", 0);
    *device = local % n;
    return DP_OK;
}

extern "C" void cu_comm_abort(cu_comm *c) {
    if (!c || !c->nccl) return;
    ncclCommAbort(c->nccl);
    c->nccl = NULL;
}

extern "C" void cu_comm_destroy(cu_comm *c) {
    if (!c) return;
    if (c->nccl) ncclCommDestroy(c->nccl);
    if (c->own_mpi) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) MPI_Finalize();
    }
    dp_free(c);
}

static dp_status comm_init(cu_comm *c) {
    int inited = 0;
    MPI_CHECK(MPI_Initialized(&inited));
    if (!inited && launched_by_mpirun()) {
        int provided = 0;
        MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
        c->own_mpi = 1;
        inited = 1;
    }
    /* rank 0's id and whether making it worked: sent together, so that a failure on rank 0
     * fails every rank instead of leaving them in the broadcast */
    struct {
        int32_t rc;
        ncclUniqueId id;
    } msg;
    memset(&msg, 0, sizeof msg);
    c->rank = 0;
    c->size = 1;
    if (inited) {
        MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank));
        MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &c->size));
    }
    int ndev = 0;
    CU_CHECK(cudaGetDeviceCount(&ndev));
    DP_TRY(ranks_fit(ndev));
    if (c->rank == 0) msg.rc = (int32_t)ncclGetUniqueId(&msg.id);
    if (inited) MPI_CHECK(MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (msg.rc != ncclSuccess) {
        if (c->rank == 0) return cu_check_nccl_((ncclResult_t)msg.rc, "ncclGetUniqueId(&id)", __FILE__, __LINE__);
        return dp_error(DP_ERR_DEVICE, "rank 0 could not create the NCCL unique id (ncclGetUniqueId: %s): no "
                        "communicator", ncclGetErrorString((ncclResult_t)msg.rc));
    }
    CU_CHECK(cudaSetDevice(cu_ctx_info(c->ctx)->device));
    NCCL_CHECK(ncclCommInitRank(&c->nccl, c->size, msg.id, c->rank));
    return DP_OK;
}

extern "C" dp_status cu_comm_create(cu_comm **out, cu_ctx *ctx) {
    *out = NULL;
    cu_comm *c = (cu_comm *)dp_calloc(1, sizeof *c);
    if (!c) return dp_error(DP_ERR_NOMEM, "cu_comm_create: out of host memory");
    c->ctx = ctx;
    dp_status st = comm_init(c);
    if (st != DP_OK) {
        cu_comm_destroy(c);
        return st;
    }
    *out = c;
    return DP_OK;
}

extern "C" int cu_comm_rank(const cu_comm *c) { return c->rank; }
extern "C" int cu_comm_size(const cu_comm *c) { return c->size; }

static cudaStream_t cs(cu_comm *c) { return (cudaStream_t)cu_ctx_comm_stream(c->ctx); }

extern "C" dp_status cu_comm_sync(cu_comm *c) {
    CU_CHECK(cudaStreamSynchronize(cs(c)));
    return DP_OK;
}

/* The collectives (f32 or f64) of the backend adapter and of the tests: one NCCL call (a
 * grouped send/recv per peer for alltoall) on the comm stream. */
dp_status cu_comm_coll_(cu_comm *c, cu_coll kind, void *out, const void *in, int64_t n, int f64, int peer) {
    CU_ARG(n >= 0, "NCCL collective: negative size");
    ncclDataType_t t = f64 ? ncclFloat64 : ncclFloat32;
    size_t es = f64 ? 8 : 4;
    switch (kind) {
    case CU_COLL_ALLREDUCE: NCCL_CHECK(ncclAllReduce(out, out, (size_t)n, t, ncclSum, c->nccl, cs(c))); break;
    case CU_COLL_REDUCE_SCATTER: NCCL_CHECK(ncclReduceScatter(in, out, (size_t)n, t, ncclSum, c->nccl, cs(c))); break;
    case CU_COLL_ALLGATHER: NCCL_CHECK(ncclAllGather(in, out, (size_t)n, t, c->nccl, cs(c))); break;
    case CU_COLL_BROADCAST:
        CU_ARG(peer >= 0 && peer < c->size, "broadcast: root %d out of range", peer);
        NCCL_CHECK(ncclBroadcast(out, out, (size_t)n, t, peer, c->nccl, cs(c)));
        break;
    case CU_COLL_ALLTOALL: {
        NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < c->size; r++) {
            ncclResult_t e = ncclSend((const char *)in + (size_t)r * n * es, (size_t)n, t, r, c->nccl, cs(c));
            if (e == ncclSuccess) e = ncclRecv((char *)out + (size_t)r * n * es, (size_t)n, t, r, c->nccl, cs(c));
            if (e != ncclSuccess) {
                ncclGroupEnd();
                return cu_check_nccl_(e, "ncclSend/ncclRecv (alltoall)", __FILE__, __LINE__);
            }
        }
        NCCL_CHECK(ncclGroupEnd());
        break;
    }
    case CU_COLL_SEND:
        CU_ARG(peer >= 0 && peer < c->size && peer != c->rank, "send: bad peer %d", peer);
        NCCL_CHECK(ncclSend(in, (size_t)n, t, peer, c->nccl, cs(c)));
        break;
    case CU_COLL_RECV:
        CU_ARG(peer >= 0 && peer < c->size && peer != c->rank, "recv: bad peer %d", peer);
        NCCL_CHECK(ncclRecv(out, (size_t)n, t, peer, c->nccl, cs(c)));
        break;
    }
    return DP_OK;
}

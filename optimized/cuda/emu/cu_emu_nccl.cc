// optimized/cuda/emu/cu_emu_nccl.cc — the emulated NCCL (cu_emu_nccl.h): communicators over
// MPI_COMM_WORLD (one MPI communicator per NCCL communicator, split by the unique id),
// every collective the MPI non-blocking operation of the same meaning on the runtime
// view of the device buffers, pending on its stream until a wait (stream / event
// queries test the requests: a stalled peer looks like a GPU still working).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <vector>

#include "optimized/cuda/emu/cu_emu_internal.h"
#include "optimized/cuda/emu/cu_emu_nccl.h"

namespace {
const uint32_t COMM_MAGIC = 0x4e43434cu, ID_MAGIC = 0x63755f65u;
const int P2P_TAG = 0x6e63;

struct mpi_op : cu_emu::pending_op {
    std::vector<MPI_Request> reqs;
    std::vector<char> staged; /* a copy of the send buffer when it overlaps the receive buffer */
    uint64_t group = 0;       /* the ncclGroupStart/End section it was issued in (0: none) */
    bool test() override {
        int flag = 0;
        MPI_Testall((int)reqs.size(), reqs.data(), &flag, MPI_STATUSES_IGNORE);
        return flag != 0;
    }
};
/* A send or receive: "blocking for the GPU" (nccl.h), so it starts only when the work its
 * stream had before it is complete (stream order), except work of its own group section
 * (fused: they progress together); a send outside a group completes only when the peer's
 * receive has started (MPI_Issend: the rendezvous). Two ranks that each issue a receive and
 * then a send to the other, outside a group, therefore wait for each other as on a GPU. */
struct p2p_op : mpi_op {
    std::deque<cu_emu::pend> before;
    bool started = false, is_send = false;
    void *buf = nullptr;
    int n = 0, peer = 0;
    MPI_Datatype mt = MPI_FLOAT;
    MPI_Comm comm = MPI_COMM_NULL;
    bool test() override {
        if (!started) {
            for (auto &p : before) {
                if (!p->done && !p->abandoned) p->done = p->test();
                if (!p->done && !p->abandoned) return false;
            }
            before.clear();
            started = true;
            if (!is_send) MPI_Irecv(buf, n, mt, peer, P2P_TAG, comm, &reqs[0]);
            else if (group) MPI_Isend(buf, n, mt, peer, P2P_TAG, comm, &reqs[0]);
            else MPI_Issend(buf, n, mt, peer, P2P_TAG, comm, &reqs[0]);
        }
        return mpi_op::test();
    }
};
} // namespace

struct ncclComm {
    uint32_t magic;
    int rank, size;
    bool local; /* one rank: no MPI */
    MPI_Comm comm;
    std::vector<std::weak_ptr<cu_emu::pending_op>> ops; /* for ncclCommAbort */
    std::deque<std::vector<char>> selfq; /* one rank: sends to itself not yet received */
};

using namespace cu_emu;

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    }
    return "unknown result code";
}
ncclResult_t ncclGetVersion(int *v) {
    *v = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    if (strcmp(env().fault, "ncclGetUniqueId") == 0) {
        fprintf(stderr, "cu_emu: ncclGetUniqueId fails (CU_EMU_FAULT=ncclGetUniqueId)\n");
        return ncclSystemError;
    }
    memset(id, 0, sizeof *id);
    memcpy(id->internal, &ID_MAGIC, sizeof ID_MAGIC);
    uint64_t r[2] = {0, 0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) { r[0] = (uint64_t)getpid(); r[1] = (uint64_t)now_s(); }
    memcpy(id->internal + 4, r, sizeof r);
    return ncclSuccess;
}

static bool mpi_ready() {
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    return inited && !fin;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
    *out = NULL;
    uint32_t mg;
    memcpy(&mg, id.internal, sizeof mg);
    if (mg != ID_MAGIC || nranks < 1 || rank < 0 || rank >= nranks) {
        fprintf(stderr, "cu_emu: ncclCommInitRank: invalid id, nranks %d or rank %d\n", nranks, rank);
        return ncclInvalidArgument;
    }
    if (sticky()) return ncclUnhandledCudaError;
    ncclComm *c = new ncclComm{COMM_MAGIC, rank, nranks, nranks == 1, MPI_COMM_NULL, {}, {}};
    if (c->local) {
        *out = c;
        return ncclSuccess;
    }
    if (!mpi_ready()) {
        fprintf(stderr, "cu_emu: ncclCommInitRank: the emulated NCCL runs over MPI, which is not initialised\n");
        delete c;
        return ncclInvalidUsage;
    }
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof id.internal; i++) h = (h ^ (unsigned char)id.internal[i]) * 1099511628211ull;
    int color = (int)(h & 0x3fffffff);
    if (MPI_Comm_split(MPI_COMM_WORLD, color, rank, &c->comm) != MPI_SUCCESS) {
        delete c;
        return ncclSystemError;
    }
    int sz = 0, me = -1;
    MPI_Comm_size(c->comm, &sz);
    MPI_Comm_rank(c->comm, &me);
    if (sz != nranks || me != rank) {
        fprintf(stderr, "cu_emu: ncclCommInitRank: %d ranks joined with this id (expected %d; rank %d is %d here)\n", sz,
                nranks, rank, me);
        MPI_Comm_free(&c->comm);
        delete c;
        return ncclInvalidUsage;
    }
    /* NCCL's duplicate-GPU check: two ranks of one node on one device */
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint64_t hh = 1469598103934665603ull;
    for (const char *p = host; *p; p++) hh = (hh ^ (unsigned char)*p) * 1099511628211ull;
    int dev = 0;
    cudaGetDevice(&dev);
    long long mine[2] = {(long long)(hh >> 1), dev};
    std::vector<long long> all((size_t)2 * nranks);
    MPI_Allgather(mine, 2, MPI_LONG_LONG, all.data(), 2, MPI_LONG_LONG, c->comm);
    for (int r = 0; r < nranks; r++)
        for (int q = r + 1; q < nranks; q++)
            if (all[2 * r] == all[2 * q] && all[2 * r + 1] == all[2 * q + 1]) {
                fprintf(stderr, "cu_emu: ncclCommInitRank: Duplicate GPU detected : rank %d and rank %d both on CUDA "
                        "device %lld (as NCCL refuses)\n", r, q, all[2 * r + 1]);
                MPI_Comm_free(&c->comm);
                delete c;
                return ncclInvalidUsage;
            }
    *out = c;
    return ncclSuccess;
}

static void abandon_ops(ncclComm *c) {
    for (auto &w : c->ops)
        if (auto p = w.lock()) p->abandoned = true;
    c->ops.clear();
}
ncclResult_t ncclCommAbort(ncclComm_t c) {
    if (!c || c->magic != COMM_MAGIC) return ncclInvalidArgument;
    abandon_ops(c); /* their MPI requests are left behind (the process is ending) */
    c->magic = 0;
    delete c;
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t c) {
    if (!c || c->magic != COMM_MAGIC) return ncclInvalidArgument;
    bool pending = false;
    for (auto &w : c->ops)
        if (auto p = w.lock()) pending |= !p->done && !p->abandoned && !(p->done = p->test());
    if (pending) { /* NCCL's destroy would wait for the device; nothing will wait here */
        fprintf(stderr, "cu_emu: ncclCommDestroy with collectives still in flight: they are abandoned\n");
        abandon_ops(c);
    } else if (!c->local && c->comm != MPI_COMM_NULL && mpi_ready()) {
        MPI_Comm_free(&c->comm);
    }
    c->magic = 0;
    delete c;
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r) {
    if (!c || c->magic != COMM_MAGIC) return ncclInvalidArgument;
    *r = ncclSuccess;
    return ncclSuccess;
}
ncclResult_t ncclCommCount(ncclComm_t c, int *n) {
    if (!c || c->magic != COMM_MAGIC) return ncclInvalidArgument;
    *n = c->size;
    return ncclSuccess;
}
ncclResult_t ncclCommUserRank(ncclComm_t c, int *r) {
    if (!c || c->magic != COMM_MAGIC) return ncclInvalidArgument;
    *r = c->rank;
    return ncclSuccess;
}
/* every operation is non-blocking already: a group only has to be well nested (per thread, as
 * NCCL's group state) */
static thread_local int group_depth = 0;
static thread_local uint64_t group_id = 0, group_next = 0; /* the open section (0: none) */
ncclResult_t ncclGroupStart(void) {
    if (group_depth++ == 0) group_id = ++group_next;
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
    if (group_depth == 0) {
        fprintf(stderr, "cu_emu: ncclGroupEnd without ncclGroupStart\n");
        return ncclInvalidUsage;
    }
    if (--group_depth == 0) group_id = 0;
    return ncclSuccess;
}

/* NCCL's ncclCommSplit: collective over the parent; the new communicator's MPI
 * communicator is MPI_Comm_split of the parent's (same key order, ties by parent rank) */
ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out, ncclConfig_t *config) {
    if (out) *out = NULL;
    if (!c || c->magic != COMM_MAGIC || !out) {
        fprintf(stderr, "cu_emu: ncclCommSplit: invalid or aborted communicator\n");
        return ncclInvalidArgument;
    }
    if (config) {
        fprintf(stderr, "cu_emu: ncclCommSplit: a configuration is not emulated (pass NULL: inherit the parent's)\n");
        return ncclInvalidArgument;
    }
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
        fprintf(stderr, "cu_emu: ncclCommSplit: color %d must be >= 0 or NCCL_SPLIT_NOCOLOR\n", color);
        return ncclInvalidArgument;
    }
    if (sticky()) return ncclUnhandledCudaError;
    if (c->local) {
        if (color != NCCL_SPLIT_NOCOLOR) *out = new ncclComm{COMM_MAGIC, 0, 1, true, MPI_COMM_NULL, {}, {}};
        return ncclSuccess;
    }
    if (!mpi_ready()) return ncclInvalidUsage;
    MPI_Comm nc = MPI_COMM_NULL;
    if (MPI_Comm_split(c->comm, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &nc) != MPI_SUCCESS)
        return ncclSystemError;
    if (nc == MPI_COMM_NULL) return ncclSuccess;
    int sz = 0, me = 0;
    MPI_Comm_size(nc, &sz);
    MPI_Comm_rank(nc, &me);
    ncclComm *n = new ncclComm{COMM_MAGIC, me, sz, sz == 1, nc, {}, {}};
    if (n->local) { /* one rank: no MPI from here on, as ncclCommInitRank's */
        MPI_Comm_free(&nc);
        n->comm = MPI_COMM_NULL;
    }
    *out = n;
    return ncclSuccess;
}

namespace {
/* checks common to every collective; sets *so and *mt */
ncclResult_t begin(const char *fn, ncclComm_t c, ncclDataType_t t, size_t n, cudaStream_t s, stream_obj **so,
                   MPI_Datatype *mt) {
    if (!c || c->magic != COMM_MAGIC) {
        fprintf(stderr, "cu_emu: %s: invalid or aborted communicator\n", fn);
        return ncclInvalidArgument;
    }
    if (t != ncclFloat32 && t != ncclFloat64) {
        fprintf(stderr, "cu_emu: %s: data type %d not emulated (float32 and float64 are)\n", fn, (int)t);
        return ncclInvalidArgument;
    }
    if (n > (size_t)0x7fffffff / (size_t)(c->size > 0 ? c->size : 1)) {
        fprintf(stderr, "cu_emu: %s: count %zu too large for MPI\n", fn, n);
        return ncclInvalidArgument;
    }
    *so = stream_of(s);
    if (!*so) return ncclInvalidArgument;
    if (sticky()) return ncclUnhandledCudaError;
    *mt = t == ncclFloat64 ? MPI_DOUBLE : MPI_FLOAT;
    return ncclSuccess;
}
size_t esize(ncclDataType_t t) { return t == ncclFloat64 ? 8 : 4; }
bool overlap(const void *a, size_t na, const void *b, size_t nb) {
    const char *x = (const char *)a, *y = (const char *)b;
    return na && nb && x < y + nb && y < x + na;
}
ncclResult_t post(ncclComm_t c, stream_obj *so, const std::shared_ptr<mpi_op> &op, const char *what) {
    op->what = what;
    pend p = op;
    stream_add(so, p);
    c->ops.push_back(p);
    if (c->ops.size() > 64) /* forget completed ones */
        for (auto it = c->ops.begin(); it != c->ops.end();) it = it->expired() ? c->ops.erase(it) : it + 1;
    return ncclSuccess;
}
/* a send or receive (p2p_op): after the stream's earlier work outside its own group section */
ncclResult_t post_p2p(ncclComm_t c, stream_obj *so, bool is_send, void *buf, size_t n, MPI_Datatype mt, int peer,
                      const char *what) {
    auto o = std::make_shared<p2p_op>();
    o->reqs.assign(1, MPI_REQUEST_NULL);
    o->group = group_id;
    o->is_send = is_send;
    o->buf = buf;
    o->n = (int)n;
    o->mt = mt;
    o->peer = peer;
    o->comm = c->comm;
    for (auto &p : stream_pending(so)) {
        auto *m = dynamic_cast<mpi_op *>(p.get());
        if (!(group_id && m && m->group == group_id)) o->before.push_back(p);
    }
    ncclResult_t r = post(c, so, o, what);
    o->test(); /* starts now when nothing is before it */
    return r;
}
/* the runtime view of device range [p, p + bytes) (p itself when empty) */
bool alias_of(void **out, const void *p, size_t bytes, const char *what) {
    *out = bytes ? dev_alias(p, bytes, what) : (void *)p;
    return !bytes || *out;
}
#define ALIAS(var, ptr, bytes, what) \
    void *var;                        \
    if (!alias_of(&var, (ptr), (bytes), (what))) return ncclInvalidArgument
} // namespace

namespace {
enum coll_kind { C_ALLREDUCE, C_REDUCE_SCATTER, C_ALLGATHER };
/* allreduce (n each), reduce-scatter (n received, size * n sent), allgather (n sent, size * n
 * received): the buffers checked, one rank a copy, else the MPI operation on a staged copy of
 * the send buffer when the two overlap (other than the in-place allreduce) */
ncclResult_t collective(const char *fn, coll_kind k, const void *send, void *recv, size_t n, ncclDataType_t t,
                        ncclRedOp_t op, ncclComm_t c, cudaStream_t s) {
    stream_obj *so;
    MPI_Datatype mt;
    ncclResult_t r = begin(fn, c, t, n, s, &so, &mt);
    if (r != ncclSuccess) return r;
    if (op != ncclSum) return ncclInvalidArgument;
    const size_t b = n * esize(t), sb = k == C_REDUCE_SCATTER ? b * (size_t)c->size : b,
                 rb = k == C_ALLGATHER ? b * (size_t)c->size : b;
    char what[64];
    snprintf(what, sizeof what, "%s (send buffer)", fn);
    ALIAS(sa, send, sb, what);
    snprintf(what, sizeof what, "%s (receive buffer)", fn);
    ALIAS(ra, recv, rb, what);
    if (c->local) {
        if (sa != ra) memmove(ra, sa, b);
        return ncclSuccess;
    }
    auto o = std::make_shared<mpi_op>();
    o->reqs.resize(1);
    bool inplace = k == C_ALLREDUCE && sa == ra;
    if (!inplace && overlap(sa, sb, ra, rb)) {
        o->staged.assign((char *)sa, (char *)sa + sb);
        sa = o->staged.data();
    }
    if (k == C_ALLREDUCE) MPI_Iallreduce(inplace ? MPI_IN_PLACE : sa, ra, (int)n, mt, MPI_SUM, c->comm, &o->reqs[0]);
    else if (k == C_REDUCE_SCATTER) MPI_Ireduce_scatter_block(sa, ra, (int)n, mt, MPI_SUM, c->comm, &o->reqs[0]);
    else MPI_Iallgather(sa, (int)n, mt, ra, (int)n, mt, c->comm, &o->reqs[0]);
    return post(c, so, o, fn);
}
} // namespace

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s) {
    return collective("ncclAllReduce", C_ALLREDUCE, send, recv, n, t, op, c, s);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t rc, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                               cudaStream_t s) {
    return collective("ncclReduceScatter", C_REDUCE_SCATTER, send, recv, rc, t, op, c, s);
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t s) {
    return collective("ncclAllGather", C_ALLGATHER, send, recv, n, t, ncclSum, c, s);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s) {
    stream_obj *so;
    MPI_Datatype mt;
    ncclResult_t r = begin("ncclBroadcast", c, t, n, s, &so, &mt);
    if (r != ncclSuccess) return r;
    if (root < 0 || root >= c->size) return ncclInvalidArgument;
    size_t b = n * esize(t);
    ALIAS(ra, recv, b, "ncclBroadcast (receive buffer)");
    if (c->rank == root && send != recv) {
        ALIAS(sa, send, b, "ncclBroadcast (send buffer)");
        memmove(ra, sa, b);
    }
    if (c->local) return ncclSuccess;
    auto o = std::make_shared<mpi_op>();
    o->reqs.resize(1);
    MPI_Ibcast(ra, (int)n, mt, root, c->comm, &o->reqs[0]);
    return post(c, so, o, "ncclBroadcast");
}
ncclResult_t ncclSend(const void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    stream_obj *so;
    MPI_Datatype mt;
    ncclResult_t r = begin("ncclSend", c, t, n, s, &so, &mt);
    if (r != ncclSuccess) return r;
    if (peer < 0 || peer >= c->size) return ncclInvalidArgument;
    ALIAS(a, buf, n * esize(t), "ncclSend (buffer)");
    if (c->local) { /* to itself: kept until the matching receive */
        c->selfq.emplace_back((char *)a, (char *)a + n * esize(t));
        return ncclSuccess;
    }
    return post_p2p(c, so, true, a, n, mt, peer, "ncclSend");
}
ncclResult_t ncclRecv(void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    stream_obj *so;
    MPI_Datatype mt;
    ncclResult_t r = begin("ncclRecv", c, t, n, s, &so, &mt);
    if (r != ncclSuccess) return r;
    if (peer < 0 || peer >= c->size) return ncclInvalidArgument;
    ALIAS(a, buf, n * esize(t), "ncclRecv (buffer)");
    if (c->local) {
        if (c->selfq.empty() || c->selfq.front().size() != n * esize(t)) {
            fprintf(stderr, "cu_emu: ncclRecv from itself without a matching earlier ncclSend (a hang in NCCL)\n");
            return ncclInvalidUsage;
        }
        memcpy(a, c->selfq.front().data(), c->selfq.front().size());
        c->selfq.pop_front();
        return ncclSuccess;
    }
    return post_p2p(c, so, false, a, n, mt, peer, "ncclRecv");
}

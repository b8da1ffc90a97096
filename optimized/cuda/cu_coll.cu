// optimized/cuda/cu_coll.cu — the CUDA backend's collectives over process groups, the
// groups themselves, the byte counters and the collective timeout (docs/cuda.md "Process
// groups and collectives"; the semantics are backend.h's, the counters docs/engine.md
// "Byte counters").
//
// Communicators: the world's NCCL communicator (cu_comm.cu) and, per group, ncclCommSplit
// of it (same color = one communicator, ranked by key, ties by world rank) together with an
// MPI communicator split the same way (barrier). Every NCCL operation runs on the context's
// one comm stream, in issue order, so communicators never interleave differently on two
// ranks. A collective first makes the comm stream wait for the compute stream, then either
// completes (async == NULL: the comm stream is polled) or returns a handle whose wait()
// polls an event recorded after it.
//
// Point-to-point: NCCL's send and receive block the GPU until the peer's matching call
// runs (nccl.h), so the engine's ring (recv from r - 1, send to r + 1, then wait both)
// would deadlock on one stream. Asynchronous sends and receives are therefore batched: they
// are issued together, fused in one ncclGroupStart / ncclGroupEnd, when a handle of the
// batch is waited for, a synchronous send or receive joins it, or any other collective
// starts (which keeps the issue order of every communicator).
//
// Timeout: every wait polls (opt_poll_until) and fails after set_collective_timeout's
// seconds naming the collective; every communicator is then aborted (ncclCommAbort), so
// that destroying the backend does not wait for the lost collective, and later collectives
// fail at once.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "common/alloc.h"
#include "optimized/opt_poll.h"
}
#include "optimized/cuda/cu_adapter.cuh"
#include "optimized/cuda/cu_internal.cuh"

/* An asynchronous handle: ev is recorded after the operation (NULL while a batched
 * send / receive has not been issued yet). */
typedef struct {
    cudaEvent_t ev;
    const char *what; /* the collective, for the timeout message */
} cb_async;

/* A process group's communicators (opt_group.impl); comm is NULL in a one-rank run. */
typedef struct cb_grp {
    cu_comm *comm;
    MPI_Comm mpi;
    struct cb_grp *next;
} cb_grp;

#define CB_BATCH_MAX 64
struct cb_coll {
    cu_p2p ops[CB_BATCH_MAX];   /* sends and receives not yet issued */
    cb_async *hs[CB_BATCH_MAX]; /* their handles (NULL: a synchronous one) */
    int nops;
    cb_grp *groups; /* live groups */
};

static dp_status coll_state(cb_ctx *c) {
    if (c->coll) return DP_OK;
    c->coll = (struct cb_coll *)dp_calloc(1, sizeof *c->coll);
    return c->coll ? DP_OK : dp_error(DP_ERR_NOMEM, "cuda collectives: out of host memory");
}

/* ---------------- waits, timeout ---------------- */
typedef struct {
    cudaEvent_t ev;
    cudaStream_t s;
} cb_pending;
static int cb_test(void *arg, dp_status *err) {
    cb_pending *p = (cb_pending *)arg;
    cudaError_t e = p->ev ? cudaEventQuery(p->ev) : cudaStreamQuery(p->s);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) return 0;
    *err = cu_check_cuda_(e, p->ev ? "cudaEventQuery(collective)" : "cudaStreamQuery(comm stream)", __FILE__, __LINE__);
    return -1;
}
/* the collective stays in flight: abort every communicator, so that the streams can be destroyed */
static void abort_all(cb_ctx *c) {
    if (c->aborted) return;
    c->aborted = 1;
    for (cb_grp *g = c->coll ? c->coll->groups : NULL; g; g = g->next)
        if (g->comm) cu_comm_abort(g->comm);
    if (c->comm) cu_comm_abort(c->comm);
}
static dp_status cb_wait_done(void *ctx, cudaEvent_t ev, const char *what) {
    cb_pending p = {ev, (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu)};
    dp_status st = opt_poll_until(cb_test, &p, CB(ctx)->timeout, what, CB(ctx)->rank);
    if (st != DP_OK && CB(ctx)->comm) abort_all(CB(ctx));
    return st;
}
static dp_status new_handle(cb_async **out, const char *what) {
    *out = (cb_async *)dp_calloc(1, sizeof **out);
    if (!*out) return dp_error(DP_ERR_NOMEM, "cuda collective: out of host memory");
    (*out)->what = what;
    return DP_OK;
}
static dp_status record(cb_async *a, cudaStream_t cs) {
    dp_status st = CU_CHECK_ST(cudaEventCreateWithFlags(&a->ev, cudaEventDisableTiming));
    if (st == DP_OK) st = CU_CHECK_ST(cudaEventRecord(a->ev, cs));
    if (st != DP_OK && a->ev) { cudaEventDestroy(a->ev); a->ev = NULL; }
    return st;
}
static dp_status cb_finish(void *ctx, opt_async **async, const char *what) {
    if (!async) return cb_wait_done(ctx, NULL, what);
    cb_async *a;
    DP_TRY(new_handle(&a, what));
    dp_status st = record(a, (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu));
    if (st != DP_OK) { dp_free(a); return st; }
    *async = (opt_async *)a;
    return DP_OK;
}

/* Issues the batched sends and receives, fused in one NCCL group; each handle gets its event. */
static dp_status flush(void *ctx) {
    struct cb_coll *b = CB(ctx)->coll;
    if (!b || !b->nops) return DP_OK;
    int n = b->nops;
    b->nops = 0;
    dp_status st = cu_comm_wait_compute(CB(ctx)->cu);
    if (st == DP_OK) st = cu_comm_p2p_group_(b->ops, n, CB(ctx)->f64);
    cudaStream_t cs = (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu);
    for (int i = 0; st == DP_OK && i < n; i++) /* not issued: the handles keep no event, their waits fail */
        if (b->hs[i]) st = record(b->hs[i], cs);
    return st;
}

static dp_status cb_wait(void *ctx, opt_async *h) {
    if (!h) return DP_OK;
    cb_async *a = (cb_async *)h;
    dp_status st = a->ev ? DP_OK : flush(ctx);
    if (st == DP_OK) st = a->ev ? cb_wait_done(ctx, a->ev, a->what) : dp_error(DP_ERR_DEVICE, "cuda %s: not issued", a->what);
    if (a->ev) cudaEventDestroy(a->ev);
    dp_free(a);
    return st;
}
static dp_status cb_set_timeout(void *ctx, double seconds) {
    if (!(seconds > 0) || seconds > 1e6)
        return dp_error(DP_ERR_USAGE, "--collective-timeout must be in (0, 1e6] seconds (got %g)", seconds);
    CB(ctx)->timeout = seconds;
    return DP_OK;
}
/* An MPI request of allgatherv_bytes / barrier, completed under the collective timeout. */
static int cb_mpi_test(void *req, dp_status *err) {
    int done = 0;
    if (MPI_Test((MPI_Request *)req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        *err = dp_error(DP_ERR_DEVICE, "MPI_Test failed");
        return -1;
    }
    return done;
}
static dp_status cb_mpi_wait(void *ctx, int rc, MPI_Request *req, const char *what) {
    if (rc != MPI_SUCCESS) return dp_error(DP_ERR_DEVICE, "%s: MPI call failed", what);
    return opt_poll_until(cb_mpi_test, req, CB(ctx)->timeout, what, CB(ctx)->rank);
}

/* ---------------- groups, counters ---------------- */
/* The communicator, rank and size of group g (NULL = the world); multi = 0 when the
 * collective is local (one rank, or a one-rank group). */
typedef struct {
    cu_comm *comm;
    MPI_Comm mpi;
    int rank, size, multi;
} cb_where;
static cb_where where(void *ctx, const opt_group *g) {
    cb_where w = {CB(ctx)->comm, MPI_COMM_WORLD, CB(ctx)->rank, CB(ctx)->size, 0};
    if (g) {
        const cb_grp *G = (const cb_grp *)g->impl;
        w.comm = G ? G->comm : NULL;
        w.mpi = G ? G->mpi : MPI_COMM_NULL;
        w.rank = g->rank;
        w.size = g->size;
    }
    w.multi = w.comm && w.size > 1;
    return w;
}
static void count(void *ctx, opt_coll_kind k, uint64_t sent, uint64_t recv) {
    opt_comm_stats *s = &CB(ctx)->stats;
    s->calls[k]++;
    s->sent[k] += sent;
    s->recv[k] += recv;
}
static dp_status check_count(int64_t n, int64_t mult, const char *what) {
    if (n < 0 || (double)n * (double)mult > 2147483647.0)
        return dp_error(DP_ERR_INVALID, "cuda %s: count %lld out of range", what, (long long)n);
    return DP_OK;
}
static dp_status coll_begin(void *ctx, opt_async **async, const char *op) {
    if (async) *async = NULL;
    if (CB(ctx)->aborted)
        return dp_error(DP_ERR_DEVICE, "cuda %s: the communicator was aborted after a collective timed out", op);
    DP_TRY(flush(ctx));
    return cu_comm_wait_compute(CB(ctx)->cu);
}
static dp_status local_copy(void *ctx, void *dst, const void *src, int64_t n) {
    if (dst == src || !n) return DP_OK;
    CU_CHECK(cudaMemcpyAsync(dst, src, (size_t)n * CB(ctx)->es, cudaMemcpyDeviceToDevice,
                             (cudaStream_t)cu_ctx_comm_stream(CB(ctx)->cu)));
    return DP_OK;
}

/* ---------------- collectives ---------------- */
/* allreduce, reduce-scatter, allgather, alltoall: n elements per rank, each rank sends and
 * receives n e (R - 1) bytes (the host's count); one rank: a copy (reduce-scatter, allgather,
 * alltoall) or nothing */
static dp_status coll_sym(void *ctx, const opt_group *g, cu_coll kind, opt_coll_kind ck, void *out, const void *in,
                          int64_t n, opt_async **async, const char *op) {
    cb_where w = where(ctx, g);
    if (async) *async = NULL;
    DP_TRY(check_count(n, w.size, op));
    uint64_t nb = CB(ctx)->es * (uint64_t)n * (uint64_t)(w.size - 1);
    count(ctx, ck, nb, nb);
    DP_TRY(coll_begin(ctx, async, op));
    if (w.multi) DP_TRY(cu_comm_coll_(w.comm, kind, out, in, n, CB(ctx)->f64, 0));
    else if (kind != CU_COLL_ALLREDUCE) DP_TRY(local_copy(ctx, out, in, n));
    return cb_finish(ctx, async, op);
}
static dp_status cb_allreduce(void *ctx, const opt_group *g, void *buf, int64_t n, opt_async **async) {
    return coll_sym(ctx, g, CU_COLL_ALLREDUCE, OPT_COLL_ALLREDUCE_SUM, buf, buf, n, async, "allreduce_sum");
}
static dp_status cb_reduce_scatter(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async) {
    return coll_sym(ctx, g, CU_COLL_REDUCE_SCATTER, OPT_COLL_REDUCE_SCATTER_SUM, recv, send, n, async, "reduce_scatter_sum");
}
static dp_status cb_allgather(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async) {
    return coll_sym(ctx, g, CU_COLL_ALLGATHER, OPT_COLL_ALLGATHER, recv, send, n, async, "allgather");
}
static dp_status cb_alltoall(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async) {
    return coll_sym(ctx, g, CU_COLL_ALLTOALL, OPT_COLL_ALLTOALL, recv, send, n, async, "alltoall");
}
static dp_status cb_broadcast(void *ctx, const opt_group *g, void *buf, int64_t n, int root, opt_async **async) {
    cb_where w = where(ctx, g);
    if (async) *async = NULL;
    DP_TRY(check_count(n, 1, "broadcast"));
    if (root < 0 || root >= w.size) return dp_error(DP_ERR_INVALID, "broadcast: root %d out of range", root);
    uint64_t nb = CB(ctx)->es * (uint64_t)n;
    count(ctx, OPT_COLL_BROADCAST, w.rank == root ? nb * (uint64_t)(w.size - 1) : 0, w.rank == root ? 0 : nb);
    DP_TRY(coll_begin(ctx, async, "broadcast"));
    if (w.multi) DP_TRY(cu_comm_coll_(w.comm, CU_COLL_BROADCAST, buf, buf, n, CB(ctx)->f64, root));
    return cb_finish(ctx, async, "broadcast");
}
/* send / recv: queued in the batch (above); a synchronous one issues the batch with it and waits */
static dp_status p2p(void *ctx, const opt_group *g, cu_coll kind, void *buf, int64_t n, int peer, opt_async **async) {
    const char *what = kind == CU_COLL_SEND ? "send" : "recv";
    cb_where w = where(ctx, g);
    if (async) *async = NULL;
    DP_TRY(check_count(n, 1, what));
    if (!w.multi || peer < 0 || peer >= w.size || peer == w.rank)
        return dp_error(DP_ERR_INVALID, "%s: peer %d invalid (rank %d of %d)", what, peer, w.rank, w.size);
    uint64_t nb = CB(ctx)->es * (uint64_t)n;
    count(ctx, kind == CU_COLL_SEND ? OPT_COLL_SEND : OPT_COLL_RECV, kind == CU_COLL_SEND ? nb : 0,
          kind == CU_COLL_SEND ? 0 : nb);
    if (CB(ctx)->aborted)
        return dp_error(DP_ERR_DEVICE, "cuda %s: the communicator was aborted after a collective timed out", what);
    DP_TRY(coll_state(CB(ctx)));
    struct cb_coll *b = CB(ctx)->coll;
    if (b->nops == CB_BATCH_MAX) DP_TRY(flush(ctx));
    cb_async *a = NULL;
    if (async) DP_TRY(new_handle(&a, what));
    b->ops[b->nops] = (cu_p2p){w.comm, kind, buf, n, peer};
    b->hs[b->nops++] = a;
    if (async) {
        *async = (opt_async *)a;
        return DP_OK;
    }
    DP_TRY(flush(ctx));
    return cb_wait_done(ctx, NULL, what);
}
static dp_status cb_send(void *ctx, const opt_group *g, const void *buf, int64_t n, int peer, int tag, opt_async **async) {
    return p2p(ctx, g, CU_COLL_SEND, (void *)buf, n, peer, async);
}
static dp_status cb_recv(void *ctx, const opt_group *g, void *buf, int64_t n, int peer, int tag, opt_async **async) {
    return p2p(ctx, g, CU_COLL_RECV, buf, n, peer, async);
}
/* host bytes over the world (MPI) */
static dp_status cb_allgatherv_bytes(void *ctx, void **recv, size_t *recv_len, const void *send, size_t nbytes) {
    *recv = NULL;
    *recv_len = 0;
    if (nbytes > 2147483647u) return dp_error(DP_ERR_INVALID, "allgatherv: %zu bytes is too large", nbytes);
    if (!CB(ctx)->comm || CB(ctx)->size == 1) {
        count(ctx, OPT_COLL_ALLGATHERV_BYTES, 0, 0);
        *recv = dp_malloc(nbytes ? nbytes : 1);
        if (!*recv) return dp_error(DP_ERR_NOMEM, "allgatherv: out of memory");
        if (nbytes) memcpy(*recv, send, nbytes);
        *recv_len = nbytes;
        return DP_OK;
    }
    DP_TRY(flush(ctx));
    int size = CB(ctx)->size, mine = (int)nbytes;
    int *counts = (int *)dp_calloc((size_t)size, sizeof(int)), *displs = (int *)dp_calloc((size_t)size, sizeof(int));
    if (!counts || !displs) { dp_free(counts); dp_free(displs); return dp_error(DP_ERR_NOMEM, "allgatherv: out of memory"); }
    dp_status st = DP_OK;
    MPI_Request req = MPI_REQUEST_NULL;
    st = cb_mpi_wait(ctx, MPI_Iallgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD, &req), &req,
                     "allgatherv_bytes");
    size_t total = 0;
    for (int r = 0; st == DP_OK && r < size; r++) {
        if (total + (size_t)counts[r] > 2147483647u) st = dp_error(DP_ERR_INVALID, "allgatherv: total too large");
        displs[r] = (int)total;
        total += (size_t)counts[r];
    }
    char *buf = NULL;
    if (st == DP_OK && !(buf = (char *)dp_malloc(total ? total : 1))) st = dp_error(DP_ERR_NOMEM, "allgatherv: out of memory");
    if (st == DP_OK) {
        count(ctx, OPT_COLL_ALLGATHERV_BYTES, (uint64_t)nbytes * (uint64_t)(size - 1), (uint64_t)(total - nbytes));
        st = cb_mpi_wait(ctx, MPI_Iallgatherv(send, mine, MPI_BYTE, buf, counts, displs, MPI_BYTE, MPI_COMM_WORLD, &req),
                         &req, "allgatherv_bytes");
    }
    if (st != DP_OK && req != MPI_REQUEST_NULL) return st; /* still in flight: its buffers stay (the run ends) */
    dp_free(counts);
    dp_free(displs);
    if (st != DP_OK) { dp_free(buf); return st; }
    *recv = buf;
    *recv_len = total;
    return DP_OK;
}
static dp_status cb_barrier(void *ctx, const opt_group *g) {
    cb_where w = where(ctx, g);
    count(ctx, OPT_COLL_BARRIER, 0, 0);
    DP_TRY(flush(ctx));
    DP_TRY(cu_sync(CB(ctx)->cu));
    if (!w.multi) return DP_OK;
    MPI_Request req = MPI_REQUEST_NULL;
    return cb_mpi_wait(ctx, MPI_Ibarrier(w.mpi, &req), &req, "barrier");
}

/* ---------------- process groups ---------------- */
static void grp_release(cb_ctx *c, cb_grp *G) {
    if (G->comm) {
        if (!c->aborted) (void)cb_wait_done(c, NULL, "group_free"); /* nothing of it left on the comm stream */
        cu_comm_destroy(G->comm);
    }
    int fin = 0;
    MPI_Finalized(&fin);
    if (G->mpi != MPI_COMM_NULL && !fin) MPI_Comm_free(&G->mpi);
    dp_free(G);
}
/* Collective over the world: the ranks are first met in a barrier under the timeout (so a
 * dead rank fails here rather than inside ncclCommSplit, which has none), then the NCCL and
 * the MPI communicators are split alike. */
static dp_status cb_group_split(void *ctx, opt_group **out, int color, int key) {
    cb_ctx *c = CB(ctx);
    *out = NULL;
    if (color < 0) return dp_error(DP_ERR_INVALID, "group_split: color %d must be >= 0", color);
    DP_TRY(coll_state(c));
    opt_group *g = (opt_group *)dp_calloc(1, sizeof *g);
    cb_grp *G = (cb_grp *)dp_calloc(1, sizeof *G);
    if (!g || !G) { dp_free(g); dp_free(G); return dp_error(DP_ERR_NOMEM, "group_split: out of memory"); }
    G->mpi = MPI_COMM_NULL;
    g->color = color;
    g->rank = 0;
    g->size = 1;
    g->impl = G;
    dp_status st = DP_OK;
    if (c->comm) {
        st = flush(ctx);
        if (st == DP_OK && c->size > 1) {
            MPI_Request req = MPI_REQUEST_NULL;
            st = cb_mpi_wait(ctx, MPI_Ibarrier(MPI_COMM_WORLD, &req), &req, "group_split");
        }
        if (st == DP_OK) st = cu_comm_split_(&G->comm, c->comm, color, key);
        if (st == DP_OK && MPI_Comm_split(MPI_COMM_WORLD, color, key, &G->mpi) != MPI_SUCCESS)
            st = dp_error(DP_ERR_DEVICE, "group_split: MPI_Comm_split failed");
        if (st == DP_OK) {
            g->rank = cu_comm_rank(G->comm);
            g->size = cu_comm_size(G->comm);
            int mr = -1, ms = -1;
            MPI_Comm_rank(G->mpi, &mr);
            MPI_Comm_size(G->mpi, &ms);
            if (mr != g->rank || ms != g->size)
                st = dp_error(DP_ERR_INTERNAL, "group_split: NCCL made rank %d of %d, MPI rank %d of %d", g->rank, g->size,
                              mr, ms);
        }
    }
    if (st != DP_OK) {
        grp_release(c, G);
        dp_free(g);
        return st;
    }
    G->next = c->coll->groups;
    c->coll->groups = G;
    *out = g;
    return DP_OK;
}
static void cb_group_free(void *ctx, opt_group *g) {
    if (!g) return;
    cb_ctx *c = CB(ctx);
    cb_grp *G = (cb_grp *)g->impl;
    (void)flush(ctx);
    for (cb_grp **p = c->coll ? &c->coll->groups : NULL; p && *p; p = &(*p)->next)
        if (*p == G) { *p = G->next; break; }
    if (G) grp_release(c, G);
    dp_free(g);
}
static dp_status cb_comm_stats(void *ctx, opt_comm_stats *out, int reset) {
    *out = CB(ctx)->stats;
    if (reset) memset(&CB(ctx)->stats, 0, sizeof CB(ctx)->stats);
    return DP_OK;
}

void cb_coll_destroy(cb_ctx *c) {
    if (!c->coll) return;
    (void)flush(c);
    while (c->coll->groups) { /* groups the caller did not free */
        cb_grp *G = c->coll->groups;
        c->coll->groups = G->next;
        grp_release(c, G);
    }
    dp_free(c->coll);
    c->coll = NULL;
}

void cb_coll_ops(opt_backend_ops *o) {
    o->allreduce_sum = cb_allreduce; o->reduce_scatter_sum = cb_reduce_scatter; o->allgather = cb_allgather;
    o->alltoall = cb_alltoall; o->broadcast = cb_broadcast; o->send = cb_send; o->recv = cb_recv; o->wait = cb_wait;
    o->allgatherv_bytes = cb_allgatherv_bytes; o->barrier = cb_barrier; o->set_collective_timeout = cb_set_timeout;
    o->group_split = cb_group_split; o->group_free = cb_group_free; o->comm_stats = cb_comm_stats;
}

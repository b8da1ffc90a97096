/* optimized/host/host_backend.c — the host backend: C kernels (host_kern.h, for f64
 * and f32), optional pthread threading over independent outputs, and collectives
 * over MPI_COMM_WORLD (or a trivial one-rank communicator without MPI).
 *
 * Determinism: a kernel's work is split into contiguous ranges of independent items
 * (rows of a GEMM, (example, head) pairs, examples); no reduction crosses a split, so
 * the thread count never changes a result bit. Collective sums are computed as an
 * allgather followed by a sum in rank order 0..R-1, so they do not depend on MPI's
 * reduction algorithm either. */
#include <math.h>
#include <mpi.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>

#include "common/philox.h"
#include "common/alloc.h"
#include "common/rng.h"
#include "optimized/backend.h"
#include "optimized/ledger.h"
#include "optimized/opt_poll.h"
#include "optimized/precision.h"
#include "optimized/host/host_gemm.h"
#include "optimized/host/host_pool.h"

/* a block mapped by host_alloc: the pointer handed out and its mapping */
typedef struct { void *p; void *base; size_t len; } host_big;

typedef struct {
    opt_backend *be;      /* the backend this context serves (its ledger records the scratch) */
    host_big *big;        /* blocks mapped by host_alloc (>= HOST_BIG bytes) */
    size_t nbig, big_cap;
    int threads;
    opt_host_pool *pool;  /* persistent workers (NULL with one thread) */
    void **gemm_ws;       /* [threads] GEMM workspaces, allocated on first use */
    int use_mpi;
    int rank, size;
    dp_dtype dtype;
    size_t esize;
    double timeout;        /* collective timeout, seconds */
    opt_comm_stats stats;  /* byte counters */
} host_ctx;

typedef opt_pool_fn host_range_fn;

/* Run fn over items [0, n) on at most `threads` threads of the persistent pool
 * (host_pool.h); small jobs (n * cost_per_item below ~1e5) run on the calling thread.
 * Items are independent outputs, so the split never changes a result. */
static void host_parallel(void *ctx, host_range_fn fn, void *arg, int64_t n, int64_t cost) {
    host_ctx *hc = ctx;
    int nt = hc->threads;
    if (n <= 0) return;
    if (nt > n) nt = (int)n;
    if (nt <= 1 || !hc->pool || (double)n * (double)(cost > 0 ? cost : 1) < 1e5) { fn(arg, 0, n, 0); return; }
    opt_host_pool_run(hc->pool, fn, arg, n, nt);
}

/* GEMM workspace of thread tid (allocated on the calling thread before a parallel call
 * by host_gemm_ws_ready; NULL if that failed). */
static void *host_gemm_ws(void *ctx, int tid) { return ((host_ctx *)ctx)->gemm_ws[tid]; }
static size_t host_gemm_ws_size(const host_ctx *hc) { return (opt_hgemm_ws_bytes(hc->esize) + 63) / 64 * 64; }
static dp_status host_gemm_ws_ready(void *ctx) {
    host_ctx *hc = ctx;
    size_t bytes = host_gemm_ws_size(hc);
    for (int t = 0; t < hc->threads; t++) {
        if (hc->gemm_ws[t]) continue;
        if (!(hc->gemm_ws[t] = aligned_alloc(64, bytes))) return dp_error(DP_ERR_NOMEM, "gemm: out of memory (workspace)");
        opt_mem_note(hc->be, OPT_MEM_SCRATCH, (int64_t)bytes);
    }
    return DP_OK;
}

typedef struct { const opt_hgemm_problem *p; host_ctx *hc; } host_gemm_job;
static void host_gemm_tiles(void *arg, int64_t lo, int64_t hi, int tid) {
    host_gemm_job *j = arg;
    if (j->hc->dtype == DP_F64) opt_hgemm_run_f64(j->p, lo, hi, j->hc->gemm_ws[tid]);
    else opt_hgemm_run_f32(j->p, lo, hi, j->hc->gemm_ws[tid]);
}
/* The GEMM of host_gemm.h, its output tiles split across the pool. */
static dp_status host_gemm_run(void *ctx, const opt_hgemm_problem *p) {
    host_ctx *hc = ctx;
    if (p->M < 0 || p->N < 0 || p->K < 0 || p->batch < 0) return dp_error(DP_ERR_INVALID, "gemm: negative size");
    DP_TRY(host_gemm_ws_ready(ctx));
    host_gemm_job j = {p, hc};
    host_parallel(ctx, host_gemm_tiles, &j, opt_hgemm_tiles(p), (int64_t)opt_hgemm_tile_cost(p));
    return DP_OK;
}

/* Backend scratch of `bytes` (NULL on failure), recorded in the ledger (tag
 * backend_scratch) until host_tmp_free(ctx, p, bytes). Calling thread only. */
static void *host_tmp(void *ctx, size_t bytes) {
    host_ctx *hc = ctx;
    void *p = dp_malloc(bytes ? bytes : 1);
    if (p) opt_mem_note(hc->be, OPT_MEM_SCRATCH, (int64_t)bytes);
    return p;
}
static void host_tmp_free(void *ctx, void *p, size_t bytes) {
    if (!p) return;
    opt_mem_note(((host_ctx *)ctx)->be, OPT_MEM_SCRATCH, -(int64_t)bytes);
    dp_free(p);
}
/* threads * per_thread bytes of scratch (host_tmp; free with host_scratch_free). */
static size_t host_scratch_size(void *ctx, size_t per_thread) { return per_thread * (size_t)((host_ctx *)ctx)->threads + 16; }
static void *host_scratch(void *ctx, size_t per_thread) { return host_tmp(ctx, host_scratch_size(ctx, per_thread)); }
static void host_scratch_free(void *ctx, void *p, size_t per_thread) { host_tmp_free(ctx, p, host_scratch_size(ctx, per_thread)); }

/* ---- kernels for both dtypes ---- */
#define R double
#define K(name) name##_f64
#include "optimized/host/host_kern.h"
#include "optimized/host/host_kern_ring.h"
#undef R
#undef K
#define R float
#define K(name) name##_f32
#include "optimized/host/host_kern.h"
#include "optimized/host/host_kern_ring.h"
#undef R
#undef K

/* ---- memory ----
 * A training step allocates and frees the same buffers (tape, per-example blocks,
 * scratch) every step. glibc would serve each one above its mmap threshold by a fresh
 * mmap and return freed heap tops to the kernel, so every step paid page faults and
 * kernel page zeroing again (docs/performance.md "Where the remaining time goes").
 * host_keep_heap (once per process, on backend creation) keeps blocks up to 32 MiB in
 * the heap and freed pages mapped, so later steps reuse them: calloc then zeroes
 * memory it reuses, so contents are unchanged, and the peak RSS stays the peak of
 * live blocks (freed memory is reused, not added to). Values never depend on this. */
#if defined(__GLIBC__)
static void host_keep_heap_once(void) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2) */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}
#endif
static void host_keep_heap(void) {
#if defined(__GLIBC__)
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, host_keep_heap_once);
#endif
}
/* Blocks of HOST_BIG bytes or more (those glibc would map afresh anyway) are mapped by
 * the backend itself, 2 MiB-aligned and advised as transparent huge pages
 * (MADV_HUGEPAGE; the kernel's "madvise" mode): a fresh mapping is zero, so no memset,
 * and its first touch faults once per 2 MiB instead of once per 4 KiB (the start-up of
 * a D = 512 run faults 300 MB in; the attention probabilities of D = 512 are 34 MB per
 * layer and step). Values never depend on this. */
#define HOST_BIG ((size_t)32 << 20)
#define HOST_HUGE ((size_t)2 << 20)
static dp_status host_alloc(void *ctx, void **out, size_t nbytes) {
    host_ctx *hc = ctx;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (nbytes >= HOST_BIG) {
        DP_TRY(DP_GROW(hc->big, hc->big_cap, hc->nbig + 1, 8, "host backend"));
        size_t len = (nbytes + HOST_HUGE - 1) / HOST_HUGE * HOST_HUGE + HOST_HUGE;
        char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base != MAP_FAILED) {
            char *p = (char *)(((uintptr_t)base + HOST_HUGE - 1) / HOST_HUGE * HOST_HUGE);
            madvise(p, len - (size_t)(p - base) - ((len - (size_t)(p - base)) % HOST_HUGE), MADV_HUGEPAGE);
            hc->big[hc->nbig++] = (host_big){p, base, len};
            *out = p;
            return DP_OK;
        }
    }
#endif
    *out = dp_calloc(1, nbytes ? nbytes : 1);
    return *out ? DP_OK : dp_error(DP_ERR_NOMEM, "host backend: out of memory allocating %zu bytes", nbytes);
}
static void host_free(void *ctx, void *p) {
    host_ctx *hc = ctx;
    for (size_t i = 0; p && i < hc->nbig; i++)
        if (hc->big[i].p == p) {
            munmap(hc->big[i].base, hc->big[i].len);
            hc->big[i] = hc->big[--hc->nbig];
            return;
        }
    dp_free(p);
}
static dp_status host_copy(void *ctx, void *dst, const void *src, size_t nbytes) {
    if (nbytes && dst != src) memmove(dst, src, nbytes);
    return DP_OK;
}
static dp_status host_zero(void *ctx, void *dst, size_t nbytes) {
    if (nbytes) memset(dst, 0, nbytes);
    return DP_OK;
}

/* half_convert: the conversion of optimized/precision.c on the host memory (common/tensor.h) */
static dp_status host_half_convert(void *ctx, void *y, uint64_t *counts, const void *x, int half, int mode, int64_t n) {
    if (((host_ctx *)ctx)->dtype != DP_F32) return dp_error(DP_ERR_INVALID, "half_convert: needs an f32 backend");
    return opt_half_convert_host(y, counts, x, half, mode, n);
}

/* ---- collectives ----
 * Every collective runs on a process group (NULL = the world), is started
 * non-blocking and completed by host_poll, which tests the request until it completes
 * or the collective timeout expires (docs/engine.md "Collective timeout"): a rank that
 * died or stalled then makes the waiting ranks fail with a message naming the
 * collective, instead of hanging. */
typedef enum { HA_PLAIN, HA_ALLREDUCE, HA_REDSCAT } host_async_kind;
struct opt_async {
    MPI_Request req;
    host_async_kind kind;
    const char *what; /* collective name, for the timeout message */
    int size;         /* the group's size (rank-order sums) */
    void *out;        /* where the reduction result goes */
    void *scratch;    /* gathered contributions [size, n] */
    size_t scratch_bytes;
    host_ctx *hc;     /* its ledger records the scratch */
    int64_t n;
};

static MPI_Datatype host_mpi_type(const host_ctx *hc) { return hc->dtype == DP_F64 ? MPI_DOUBLE : MPI_FLOAT; }

static dp_status host_mpi_err(int rc, const char *what) {
    if (rc == MPI_SUCCESS) return DP_OK;
    char msg[MPI_MAX_ERROR_STRING]; int len = 0;
    MPI_Error_string(rc, msg, &len);
    return dp_error(DP_ERR_DEVICE, "MPI %s failed: %s", what, msg);
}

static dp_status host_check_count(int64_t n, int64_t mult, const char *what) {
    if (n < 0 || (double)n * (double)mult > 2147483647.0)
        return dp_error(DP_ERR_INVALID, "%s: count %lld out of range for MPI", what, (long long)n);
    return DP_OK;
}

/* The communicator, rank and size of group g (NULL = the world). multi = 0 when the
 * collective is local (no MPI, or a one-rank group). */
typedef struct {
    MPI_Comm comm;
    int rank, size, multi;
} host_grp;

static host_grp host_group(const host_ctx *hc, const opt_group *g) {
    host_grp r = {MPI_COMM_WORLD, hc->rank, hc->size, 0};
    if (g) { r.rank = g->rank; r.size = g->size; if (g->impl) r.comm = *(const MPI_Comm *)g->impl; }
    r.multi = hc->use_mpi && r.size > 1;
    return r;
}

/* Byte counters: the payload this rank sends to / receives from other ranks. */
static void host_count(host_ctx *hc, opt_coll_kind k, uint64_t sent, uint64_t recv) {
    hc->stats.calls[k]++;
    hc->stats.sent[k] += sent;
    hc->stats.recv[k] += recv;
}

/* Complete req, or fail once the collective timeout has passed (opt_poll_until). */
static int host_test(void *req, dp_status *err) {
    int done = 0;
    int rc = MPI_Test((MPI_Request *)req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        *err = host_mpi_err(rc, "MPI_Test");
        return -1;
    }
    return done;
}
static dp_status host_poll(const host_ctx *hc, MPI_Request *req, const char *what) {
    if (*req == MPI_REQUEST_NULL) return DP_OK;
    return opt_poll_until(host_test, req, hc->timeout, what, hc->rank);
}

/* sum in rank order: out[j] = ((s0[j] + s1[j]) + s2[j]) + ... */
static void host_rank_sum(const host_ctx *hc, int size, void *out, const void *scratch, int64_t n, int64_t stride) {
    if (hc->dtype == DP_F64) {
        const double *s = scratch; double *o = out;
        for (int64_t j = 0; j < n; j++) {
            double acc = s[j];
            for (int r = 1; r < size; r++) acc += s[r * stride + j];
            o[j] = acc;
        }
    } else {
        const float *s = scratch; float *o = out;
        for (int64_t j = 0; j < n; j++) {
            float acc = s[j];
            for (int r = 1; r < size; r++) acc += s[r * stride + j];
            o[j] = acc;
        }
    }
}

static dp_status host_wait(void *ctx, opt_async *a) {
    host_ctx *hc = ctx;
    if (!a) return DP_OK;
    dp_status st = host_poll(hc, &a->req, a->what);
    if (st != DP_OK) return st; /* a and its buffers stay with the pending request */
    /* allreduce: scratch [size, n] = every rank's buffer; reduce-scatter: block r =
     * rank r's contribution to my block. Both: the sum in rank order. */
    if (a->kind != HA_PLAIN) host_rank_sum(hc, a->size, a->out, a->scratch, a->n, a->n);
    host_tmp_free(hc, a->scratch, a->scratch_bytes);
    dp_free(a);
    return DP_OK;
}

static dp_status host_finish(host_ctx *hc, opt_async *a, opt_async **async) {
    if (async) { *async = a; return DP_OK; }
    return host_wait(hc, a);
}

static dp_status host_new_async(host_ctx *hc, opt_async **out, host_async_kind kind, const char *what, int size, void *o,
                                int64_t n, size_t scratch_bytes) {
    opt_async *a = dp_calloc(1, sizeof *a);
    if (!a) return dp_error(DP_ERR_NOMEM, "collective: out of memory");
    a->req = MPI_REQUEST_NULL; a->kind = kind; a->what = what; a->size = size; a->out = o; a->n = n; a->hc = hc;
    if (scratch_bytes) {
        a->scratch = host_tmp(hc, scratch_bytes);
        if (!a->scratch) { dp_free(a); return dp_error(DP_ERR_NOMEM, "collective: out of memory"); }
        a->scratch_bytes = scratch_bytes;
    }
    *out = a;
    return DP_OK;
}

static void host_drop_async(opt_async *a) {
    host_tmp_free(a->hc, a->scratch, a->scratch_bytes);
    dp_free(a);
}

/* A started MPI call: finish (or hand back) the handle, or report the failure. */
static dp_status host_started(host_ctx *hc, int rc, opt_async *a, opt_async **async, const char *what) {
    if (rc != MPI_SUCCESS) { host_drop_async(a); return host_mpi_err(rc, what); }
    return host_finish(hc, a, async);
}

static dp_status host_allreduce(void *ctx, const opt_group *g, void *buf, int64_t n, opt_async **async) {
    host_ctx *hc = ctx;
    host_grp G = host_group(hc, g);
    if (async) *async = NULL;
    DP_TRY(host_check_count(n, G.size, "allreduce_sum"));
    uint64_t nb = hc->esize * (uint64_t)n * (uint64_t)(G.size - 1);
    host_count(hc, OPT_COLL_ALLREDUCE_SUM, nb, nb);
    opt_async *a = NULL;
    if (!G.multi) { DP_TRY(host_new_async(hc, &a, HA_PLAIN, "allreduce_sum", 1, buf, n, 0)); return host_finish(hc, a, async); }
    DP_TRY(host_new_async(hc, &a, HA_ALLREDUCE, "allreduce_sum", G.size, buf, n, hc->esize * (size_t)(n * G.size + 1)));
    int rc = MPI_Iallgather(buf, (int)n, host_mpi_type(hc), a->scratch, (int)n, host_mpi_type(hc), G.comm, &a->req);
    return host_started(hc, rc, a, async, "allgather (allreduce_sum)");
}

static dp_status host_reduce_scatter(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n,
                                     opt_async **async) {
    host_ctx *hc = ctx;
    host_grp G = host_group(hc, g);
    if (async) *async = NULL;
    DP_TRY(host_check_count(n, G.size, "reduce_scatter_sum"));
    uint64_t nb = hc->esize * (uint64_t)n * (uint64_t)(G.size - 1);
    host_count(hc, OPT_COLL_REDUCE_SCATTER_SUM, nb, nb);
    opt_async *a = NULL;
    if (!G.multi) {
        memmove(recv, send, hc->esize * (size_t)n);
        DP_TRY(host_new_async(hc, &a, HA_PLAIN, "reduce_scatter_sum", 1, recv, n, 0));
        return host_finish(hc, a, async);
    }
    DP_TRY(host_new_async(hc, &a, HA_REDSCAT, "reduce_scatter_sum", G.size, recv, n, hc->esize * (size_t)(n * G.size + 1)));
    int rc = MPI_Ialltoall(send, (int)n, host_mpi_type(hc), a->scratch, (int)n, host_mpi_type(hc), G.comm, &a->req);
    return host_started(hc, rc, a, async, "alltoall (reduce_scatter_sum)");
}

/* allgather and alltoall: recv [size * n] from send [size * n] or [n] */
static dp_status host_gather_like(host_ctx *hc, const opt_group *g, void *recv, const void *send, int64_t n,
                                  opt_async **async, int to_all) {
    const char *what = to_all ? "alltoall" : "allgather";
    host_grp G = host_group(hc, g);
    if (async) *async = NULL;
    DP_TRY(host_check_count(n, G.size, what));
    uint64_t nb = hc->esize * (uint64_t)n * (uint64_t)(G.size - 1);
    host_count(hc, to_all ? OPT_COLL_ALLTOALL : OPT_COLL_ALLGATHER, nb, nb);
    opt_async *a = NULL;
    DP_TRY(host_new_async(hc, &a, HA_PLAIN, what, G.size, recv, n, 0));
    if (!G.multi) {
        memmove(recv, send, hc->esize * (size_t)n);
        return host_finish(hc, a, async);
    }
    int rc = to_all ? MPI_Ialltoall(send, (int)n, host_mpi_type(hc), recv, (int)n, host_mpi_type(hc), G.comm, &a->req)
                    : MPI_Iallgather(send, (int)n, host_mpi_type(hc), recv, (int)n, host_mpi_type(hc), G.comm, &a->req);
    return host_started(hc, rc, a, async, what);
}

static dp_status host_allgather(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n,
                                opt_async **async) {
    return host_gather_like(ctx, g, recv, send, n, async, 0);
}

static dp_status host_alltoall(void *ctx, const opt_group *g, void *recv, const void *send, int64_t n,
                               opt_async **async) {
    return host_gather_like(ctx, g, recv, send, n, async, 1);
}

static dp_status host_broadcast(void *ctx, const opt_group *g, void *buf, int64_t n, int root, opt_async **async) {
    host_ctx *hc = ctx;
    host_grp G = host_group(hc, g);
    if (async) *async = NULL;
    DP_TRY(host_check_count(n, 1, "broadcast"));
    if (root < 0 || root >= G.size) return dp_error(DP_ERR_INVALID, "broadcast: root %d out of range", root);
    uint64_t nb = hc->esize * (uint64_t)n;
    host_count(hc, OPT_COLL_BROADCAST, G.rank == root ? nb * (uint64_t)(G.size - 1) : 0, G.rank == root ? 0 : nb);
    opt_async *a = NULL;
    DP_TRY(host_new_async(hc, &a, HA_PLAIN, "broadcast", G.size, buf, n, 0));
    if (!G.multi) return host_finish(hc, a, async);
    return host_started(hc, MPI_Ibcast(buf, (int)n, host_mpi_type(hc), root, G.comm, &a->req), a, async, "broadcast");
}

static dp_status host_p2p(host_ctx *hc, const opt_group *g, void *buf, int64_t n, int peer, int tag, opt_async **async,
                          int is_send) {
    const char *what = is_send ? "send" : "recv";
    host_grp G = host_group(hc, g);
    if (async) *async = NULL;
    DP_TRY(host_check_count(n, 1, what));
    if (!G.multi || peer < 0 || peer >= G.size || peer == G.rank)
        return dp_error(DP_ERR_INVALID, "%s: peer %d invalid (rank %d of %d)", what, peer, G.rank, G.size);
    uint64_t nb = hc->esize * (uint64_t)n;
    host_count(hc, is_send ? OPT_COLL_SEND : OPT_COLL_RECV, is_send ? nb : 0, is_send ? 0 : nb);
    opt_async *a = NULL;
    DP_TRY(host_new_async(hc, &a, HA_PLAIN, what, G.size, is_send ? NULL : buf, n, 0));
    int rc = is_send ? MPI_Isend(buf, (int)n, host_mpi_type(hc), peer, tag, G.comm, &a->req)
                     : MPI_Irecv(buf, (int)n, host_mpi_type(hc), peer, tag, G.comm, &a->req);
    return host_started(hc, rc, a, async, what);
}

static dp_status host_send(void *ctx, const opt_group *g, const void *buf, int64_t n, int peer, int tag,
                           opt_async **async) {
    return host_p2p(ctx, g, (void *)buf, n, peer, tag, async, 1);
}

static dp_status host_recv(void *ctx, const opt_group *g, void *buf, int64_t n, int peer, int tag, opt_async **async) {
    return host_p2p(ctx, g, buf, n, peer, tag, async, 0);
}

/* Over the world group (host bytes: per-example exports, configuration digests). */
static dp_status host_allgatherv_bytes(void *ctx, void **recv, size_t *recv_len, const void *send, size_t nbytes) {
    host_ctx *hc = ctx;
    *recv = NULL; *recv_len = 0;
    if (nbytes > 2147483647u) return dp_error(DP_ERR_INVALID, "allgatherv: %zu bytes is too large for MPI", nbytes);
    if (!hc->use_mpi || hc->size == 1) {
        host_count(hc, OPT_COLL_ALLGATHERV_BYTES, 0, 0);
        *recv = dp_malloc(nbytes ? nbytes : 1);
        if (!*recv) return dp_error(DP_ERR_NOMEM, "allgatherv: out of memory");
        if (nbytes) memcpy(*recv, send, nbytes);
        *recv_len = nbytes;
        return DP_OK;
    }
    int mine = (int)nbytes;
    int *counts = dp_calloc((size_t)hc->size, sizeof(int)), *displs = dp_calloc((size_t)hc->size, sizeof(int));
    if (!counts || !displs) { dp_free(counts); dp_free(displs); return dp_error(DP_ERR_NOMEM, "allgatherv: out of memory"); }
    MPI_Request req = MPI_REQUEST_NULL;
    dp_status st = host_mpi_err(MPI_Iallgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD, &req), "allgather");
    if (st == DP_OK) st = host_poll(hc, &req, "allgatherv_bytes");
    if (st != DP_OK) return st; /* counts stay with a pending request */
    size_t total = 0;
    for (int r = 0; st == DP_OK && r < hc->size; r++) {
        if (total + (size_t)counts[r] > 2147483647u) st = dp_error(DP_ERR_INVALID, "allgatherv: total too large");
        displs[r] = (int)total;
        total += (size_t)counts[r];
    }
    char *buf = NULL;
    if (st == DP_OK) {
        buf = dp_malloc(total ? total : 1);
        if (!buf) st = dp_error(DP_ERR_NOMEM, "allgatherv: out of memory");
    }
    if (st == DP_OK) {
        host_count(hc, OPT_COLL_ALLGATHERV_BYTES, (uint64_t)nbytes * (uint64_t)(hc->size - 1), (uint64_t)(total - nbytes));
        st = host_mpi_err(MPI_Iallgatherv(send, mine, MPI_BYTE, buf, counts, displs, MPI_BYTE, MPI_COMM_WORLD, &req),
                          "allgatherv");
        if (st == DP_OK) st = host_poll(hc, &req, "allgatherv_bytes");
        if (st != DP_OK && req != MPI_REQUEST_NULL) return st; /* buffers stay with the pending request */
    }
    dp_free(counts); dp_free(displs);
    if (st != DP_OK) { dp_free(buf); return st; }
    *recv = buf; *recv_len = total;
    return DP_OK;
}

static dp_status host_barrier(void *ctx, const opt_group *g) {
    host_ctx *hc = ctx;
    host_grp G = host_group(hc, g);
    host_count(hc, OPT_COLL_BARRIER, 0, 0);
    if (!G.multi) return DP_OK;
    MPI_Request req = MPI_REQUEST_NULL;
    DP_TRY(host_mpi_err(MPI_Ibarrier(G.comm, &req), "barrier"));
    return host_poll(hc, &req, "barrier");
}

/* ---- process groups ---- */
static dp_status host_group_split(void *ctx, opt_group **out, int color, int key) {
    host_ctx *hc = ctx;
    *out = NULL;
    if (color < 0) return dp_error(DP_ERR_INVALID, "group_split: color %d must be >= 0", color);
    opt_group *g = dp_calloc(1, sizeof *g);
    if (!g) return dp_error(DP_ERR_NOMEM, "group_split: out of memory");
    g->color = color; g->rank = 0; g->size = 1;
    if (hc->use_mpi) {
        MPI_Comm *c = dp_malloc(sizeof *c);
        if (!c) { dp_free(g); return dp_error(DP_ERR_NOMEM, "group_split: out of memory"); }
        dp_status st = host_mpi_err(MPI_Comm_split(MPI_COMM_WORLD, color, key, c), "comm_split");
        if (st != DP_OK) { dp_free(c); dp_free(g); return st; }
        MPI_Comm_rank(*c, &g->rank);
        MPI_Comm_size(*c, &g->size);
        g->impl = c;
    }
    *out = g;
    return DP_OK;
}

static void host_group_free(void *ctx, opt_group *g) {
    if (!g) return;
    if (g->impl) { MPI_Comm_free((MPI_Comm *)g->impl); dp_free(g->impl); }
    dp_free(g);
}

static dp_status host_set_timeout(void *ctx, double seconds) {
    if (!(seconds > 0) || seconds > 1e6)
        return dp_error(DP_ERR_USAGE, "--collective-timeout must be in (0, 1e6] seconds (got %g)", seconds);
    ((host_ctx *)ctx)->timeout = seconds;
    return DP_OK;
}

static dp_status host_comm_stats(void *ctx, opt_comm_stats *out, int reset) {
    host_ctx *hc = ctx;
    *out = hc->stats;
    if (reset) memset(&hc->stats, 0, sizeof hc->stats);
    return DP_OK;
}

static dp_status host_identity_xfer(void *ctx, void *dst, const void *src, size_t nbytes) {
    return host_copy(ctx, dst, src, nbytes);
}

static void host_destroy(void *ctx) {
    host_ctx *hc = ctx;
    opt_host_pool_destroy(hc->pool);
    for (int t = 0; hc->gemm_ws && t < hc->threads; t++)
        if (hc->gemm_ws[t]) { opt_mem_note(hc->be, OPT_MEM_SCRATCH, -(int64_t)host_gemm_ws_size(hc)); dp_free(hc->gemm_ws[t]); }
    dp_free(hc->gemm_ws);
    for (size_t i = 0; i < hc->nbig; i++) munmap(hc->big[i].base, hc->big[i].len);
    dp_free(hc->big);
    dp_free(hc);
}

/* ---- the operation table, generated from OPT_BACKEND_OPS (optimized/backend.h) ----
 * Every operation of the list is the function <name>_f64 / <name>_f32: the kernels of
 * host_kern.h and host_kern_ring.h (K(name)), and the operations below that do not depend
 * on the dtype under both names. An operation added to the list without a host
 * implementation is a compile error here, never a NULL entry. */
#define HOST_ANY_DTYPE_(name, fn) \
    static __typeof__(&fn) const name##_f64 = fn;  \
    static __typeof__(&fn) const name##_f32 = fn;
HOST_ANY_DTYPE_(alloc, host_alloc)
HOST_ANY_DTYPE_(free, host_free)
HOST_ANY_DTYPE_(to_device, host_identity_xfer)
HOST_ANY_DTYPE_(to_host, host_identity_xfer)
HOST_ANY_DTYPE_(copy, host_copy)
HOST_ANY_DTYPE_(zero, host_zero)
HOST_ANY_DTYPE_(half_convert, host_half_convert)
HOST_ANY_DTYPE_(allreduce_sum, host_allreduce)
HOST_ANY_DTYPE_(reduce_scatter_sum, host_reduce_scatter)
HOST_ANY_DTYPE_(allgather, host_allgather)
HOST_ANY_DTYPE_(alltoall, host_alltoall)
HOST_ANY_DTYPE_(broadcast, host_broadcast)
HOST_ANY_DTYPE_(send, host_send)
HOST_ANY_DTYPE_(recv, host_recv)
HOST_ANY_DTYPE_(wait, host_wait)
HOST_ANY_DTYPE_(allgatherv_bytes, host_allgatherv_bytes)
HOST_ANY_DTYPE_(barrier, host_barrier)
HOST_ANY_DTYPE_(group_split, host_group_split)
HOST_ANY_DTYPE_(group_free, host_group_free)
HOST_ANY_DTYPE_(comm_stats, host_comm_stats)
HOST_ANY_DTYPE_(set_collective_timeout, host_set_timeout)
#undef HOST_ANY_DTYPE_

static void host_fill_ops_f64(opt_backend_ops *o) {
#define HOST_OP_(ID, name, ret, args) o->name = name##_f64;
    OPT_BACKEND_OPS(HOST_OP_)
#undef HOST_OP_
}

static void host_fill_ops_f32(opt_backend_ops *o) {
#define HOST_OP_(ID, name, ret, args) o->name = name##_f32;
    OPT_BACKEND_OPS(HOST_OP_)
#undef HOST_OP_
}

dp_status opt_backend_host_create(opt_backend *be, const opt_backend_config *cfg) {
    host_keep_heap();
    host_ctx *hc = dp_calloc(1, sizeof *hc);
    if (!hc) return dp_error(DP_ERR_NOMEM, "host backend: out of memory");
    hc->threads = cfg->threads;
    hc->gemm_ws = dp_calloc((size_t)(cfg->threads > 0 ? cfg->threads : 1), sizeof(void *));
    if (!hc->gemm_ws) { dp_free(hc); return dp_error(DP_ERR_NOMEM, "host backend: out of memory"); }
    if (cfg->threads > 1) {
        dp_status st = opt_host_pool_create(&hc->pool, cfg->threads);
        if (st != DP_OK) { dp_free(hc->gemm_ws); dp_free(hc); return st; }
    }
    hc->dtype = cfg->dtype;
    hc->esize = dp_dtype_size(cfg->dtype);
    hc->use_mpi = cfg->use_mpi;
    hc->timeout = OPT_COLLECTIVE_TIMEOUT_DEFAULT;
    hc->rank = 0; hc->size = 1;
    if (cfg->use_mpi) {
        int inited = 0;
        MPI_Initialized(&inited);
        if (!inited) { host_destroy(hc); return dp_error(DP_ERR_INTERNAL, "host backend: MPI requested but not initialised"); }
        MPI_Comm_rank(MPI_COMM_WORLD, &hc->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &hc->size);
    }
    memset(be, 0, sizeof *be);
    hc->be = be;
    be->name = "host";
    be->dtype = cfg->dtype;
    be->threads = cfg->threads;
    be->comm.rank = hc->rank;
    be->comm.size = hc->size;
    be->ctx = hc;
    if (cfg->dtype == DP_F64) host_fill_ops_f64(&be->ops); else host_fill_ops_f32(&be->ops);
    be->ops.destroy = host_destroy;
    return DP_OK;
}

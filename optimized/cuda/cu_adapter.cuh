// optimized/cuda/cu_adapter.cuh — what the files of the CUDA backend adapter share
// (opt_backend_cuda_create in cu_backend.cu, the collectives and process groups of
// cu_coll.cu, the ring-attention operations of cu_attn_ring.cu, the ledger notes of
// cu_ledger.cu): the context, argument checks, and the functions by which each file fills
// its entries of the operation table.
#ifndef CU_ADAPTER_CUH
#define CU_ADAPTER_CUH

#include <stdint.h>

extern "C" {
#include "optimized/backend.h"
}
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"

struct cb_coll; /* the collectives' state (cu_coll.cu) */

typedef struct {
    cu_ctx *cu;
    cu_comm *comm; /* NULL for one rank */
    int use_mpi, rank, size;
    int f64;       /* dtype: 1 = F64, 0 = F32 */
    size_t es;     /* element size */
    double timeout; /* collective timeout, seconds */
    int aborted;    /* a collective timed out: the communicators were aborted */
    int fused_single; /* fused_clip_accum: the single pass where the layer fits (DPCERT_CUDA_FUSED) */
    opt_comm_stats stats;  /* byte counters (docs/engine.md "Byte counters") */
    struct cb_coll *coll;  /* pending point-to-point batch, live groups */
    int ws_noted;          /* the cuBLAS workspace is in the ledger (cu_ledger.cu) */
} cb_ctx;

#define CB(ctx) ((cb_ctx *)(ctx))
static inline dp_status ck_n(const char *op, int64_t n) {
    if (n < 0) return dp_error(DP_ERR_INVALID, "cuda %s: negative size %lld", op, (long long)n);
    return DP_OK;
}
static inline dp_status ck_int(const char *op, int64_t v, const char *what) {
    if (v < 0 || v > 0x7fffffff) return dp_error(DP_ERR_INVALID, "cuda %s: %s = %lld out of range [0, 2^31)", op, what, (long long)v);
    return DP_OK;
}

/* cu_coll.cu: the collectives, process groups, byte counters and timeout entries; the
 * state they keep is made on first use and released by cb_coll_destroy (before the
 * world communicator). */
void cb_coll_ops(opt_backend_ops *o);
void cb_coll_destroy(cb_ctx *c);
/* cu_ledger.cu: the backend's own device memory (scratch slots, cuBLAS workspace) noted in
 * be's memory ledger as backend_scratch */
void cb_ledger_attach(cb_ctx *c, opt_backend *be);
/* cu_attn_ring.cu: rope_at and the ring-attention blocks */
void cb_ring_ops(opt_backend_ops *o);

#endif

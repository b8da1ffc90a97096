// optimized/cuda/cu_internal.cuh — precision-generic launchers (T = float or double)
// shared by the .cu files: the f32 C API (cu_api.h) calls the float instances, the
// backend adapter (cu_backend.cu) the instance of the engine's dtype. Explicitly
// instantiated for float and double where they are defined.
#ifndef CU_INTERNAL_CUH
#define CU_INTERNAL_CUH

#include <stdint.h>

#include "optimized/cuda/cu_api.h"

/* cu_model.cu */
template <typename T> dp_status cu_embedding_fwd_t(cu_ctx *ctx, T *out, const int32_t *tokens, const T *table, int N, int V, int D);
template <typename T> dp_status cu_rmsnorm_fwd_t(cu_ctx *ctx, T *y, T *rstd, const T *x, const T *w, double eps, int N, int D);
template <typename T> dp_status cu_rope_t(cu_ctx *ctx, T *x, double theta, int inverse, int B, int Tn, int H, int hd);
template <typename T>
dp_status cu_attention_fwd_t(cu_ctx *ctx, T *out, T *att, const T *q, const T *k, const T *v, int B, int Tn, int H, int hd);
template <typename T>
dp_status cu_attention_bwd_t(cu_ctx *ctx, T *dq, T *dk, T *dv, T *dpre, const T *dout, const T *q, const T *k, const T *v,
                             const T *att, int B, int Tn, int H, int hd);
template <typename T> dp_status cu_swiglu_fwd_t(cu_ctx *ctx, T *h, const T *a, const T *b, int64_t n);
template <typename T> dp_status cu_swiglu_bwd_t(cu_ctx *ctx, T *da, T *db, const T *dh, const T *a, const T *b, int64_t n);

/* cu_dp.cu */
template <typename T> dp_status cu_rows_sqnorm_t(cu_ctx *ctx, double *sq, const T *x, int64_t n, int nb);
template <typename T>
dp_status cu_ghost_sqnorm_t(cu_ctx *ctx, double *sq, const T *A, const T *G, int accumulate, int B, int Tn, int d, int p);
template <typename T>
dp_status cu_bk_wgrad_t(cu_ctx *ctx, T *grad, T *Gs, const T *A, const T *G, const T *c, int B, int Tn, int d, int p);
template <typename T>
dp_status cu_noise_add_t(cu_ctx *ctx, T *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset, double std, int64_t n);

/* cu_gemm.cu: f32 (cuBLAS Sgemm) or f64 (Dgemm), row-major, strided-batched */
template <typename T>
dp_status cu_gemm_t(cu_ctx *ctx, T *C, const T *A, const T *B, int ta, int tb, double alpha, double beta, int M, int N, int K,
                    int64_t sa, int64_t sb, int64_t sc, int batch);

/* cu_comm.cu: one NCCL operation of either element type on the comm stream (out == buffer of
 * allreduce / broadcast; peer = root of broadcast, peer of send / recv). */
typedef enum {
    CU_COLL_ALLREDUCE, CU_COLL_REDUCE_SCATTER, CU_COLL_ALLGATHER, CU_COLL_ALLTOALL, CU_COLL_BROADCAST, CU_COLL_SEND,
    CU_COLL_RECV
} cu_coll;
dp_status cu_comm_coll_(cu_comm *c, cu_coll kind, void *out, const void *in, int64_t n, int f64, int peer);
/* The communicator of the ranks of c that pass the same color (ncclCommSplit, collective
 * over c: ranked by key, ties by the rank in c; color >= 0), on the same context. */
dp_status cu_comm_split_(cu_comm **out, cu_comm *c, int color, int key);
/* Point-to-point operations fused in one ncclGroupStart / ncclGroupEnd on the comm stream:
 * NCCL's send and receive block the GPU until the peer's matching call runs, so a ring
 * (every rank sends to r + 1 and receives from r - 1) progresses only when they are fused. */
typedef struct {
    cu_comm *comm;
    cu_coll kind; /* CU_COLL_SEND or CU_COLL_RECV */
    void *buf;
    int64_t n;
    int peer;
} cu_p2p;
dp_status cu_comm_p2p_group_(const cu_p2p *ops, int nops, int f64);

#endif

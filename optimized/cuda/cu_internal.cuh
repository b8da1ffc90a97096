// optimized/cuda/cu_internal.cuh — what the .cu files of the CUDA backend share: the
// scratch slots of a context, the grid-stride loop, and the precision-generic launchers
// (R = float or double), one per operation, each defined (and instantiated for float and
// double) in the file of its concern. The backend adapter (cu_backend.cu) calls the
// instance of the engine's dtype; the C API (cu_api.h) the float instance; the
// development variants (dev/) reuse them. One kernel per operation: a launcher here is
// the only way to its kernel.
#ifndef CU_INTERNAL_CUH
#define CU_INTERNAL_CUH

#include <stdint.h>

#include "optimized/cuda/cu_api.h"

/* Scratch slots of a context (cu_ctx_scratch_; docs/cuda.md "Context, streams, memory"). */
enum {
    CU_SLOT_WS = 0,      /* per-example blocks of the fused kernels */
    CU_SLOT_PARTIAL = 1, /* reduction partials */
    CU_SLOT_SQD = 2,     /* squared norms (double) */
    CU_SLOT_C = 3,       /* clip factors */
    CU_SLOT_TMP = 4,     /* attention's dpre, book-keeping's scaled G */
    CU_SLOT_SYNC = 5,    /* grid-barrier counters of the single-pass fused kernel */
    CU_SLOT_COUNTS = 6,  /* half_convert's rounding counters (cu_prec.cu) */
    CU_SLOT_FLAG = 7     /* the integer error flag of index checks */
};

/* grid-stride loop over [0, n) */
#define CU_FOR_I(n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- cu_gemm.cu: f32 (cuBLAS Sgemm) or f64 (Dgemm), row-major, strided-batched (K >= 1) ---- */
template <typename R>
dp_status cu_gemm_t(cu_ctx *ctx, R *C, const R *A, const R *B, int ta, int tb, double alpha, double beta, int M, int N, int K,
                    int64_t sa, int64_t sb, int64_t sc, int batch);
/* K = 0: C[n] = alpha 0 + beta C (two roundings, as the host); beta = 0 a zero fill */
template <typename R> dp_status cu_gemm_k0_t(cu_ctx *ctx, R *C, double alpha, double beta, int64_t n);

/* ---- cu_pointwise.cu (the host's formulas, one rounding per operation) ---- */
template <typename R> dp_status cu_add_bias_t(cu_ctx *ctx, R *y, const R *bias, int64_t rows, int64_t n);
template <typename R> dp_status cu_sum_rows_t(cu_ctx *ctx, R *out, const R *x, int accumulate, int64_t groups, int64_t per, int64_t n);
template <typename R> dp_status cu_axpby_t(cu_ctx *ctx, R *y, const R *x, double a, double b, int64_t n);
template <typename R> dp_status cu_add_t(cu_ctx *ctx, R *y, const R *a, const R *b, int64_t n);
template <typename R> dp_status cu_div_scalar_t(cu_ctx *ctx, R *y, const R *x, double s, int64_t n);
template <typename R> dp_status cu_mul_t(cu_ctx *ctx, R *y, const R *x, int64_t n);
template <typename R> dp_status cu_tanh_fwd_t(cu_ctx *ctx, R *y, const R *x, int64_t n);
template <typename R> dp_status cu_tanh_bwd_t(cu_ctx *ctx, R *dx, const R *dy, const R *y, int64_t n);
template <typename R> dp_status cu_silu_fwd_t(cu_ctx *ctx, R *y, const R *x, int64_t n);
template <typename R> dp_status cu_silu_bwd_t(cu_ctx *ctx, R *dx, const R *dy, const R *x, int64_t n);
template <typename R> dp_status cu_swiglu_fwd_t(cu_ctx *ctx, R *h, const R *a, const R *b, int64_t n);
template <typename R> dp_status cu_swiglu_bwd_t(cu_ctx *ctx, R *da, R *db, const R *dh, const R *a, const R *b, int64_t n);

/* ---- cu_rmsnorm.cu ---- */
template <typename R> dp_status cu_rmsnorm_fwd_t(cu_ctx *ctx, R *y, R *rstd, const R *x, const R *w, double eps, int N, int D);
/* dx[N,D] (may be NULL) overwritten; dg_rows[N,D] (may be NULL) = dy x rstd per row */
template <typename R>
dp_status cu_rmsnorm_bwd_t(cu_ctx *ctx, R *dx, R *dg_rows, const R *dy, const R *x, const R *rstd, const R *w, int64_t N,
                           int64_t D);

/* ---- cu_attention.cu ---- */
template <typename R> dp_status cu_rope_t(cu_ctx *ctx, R *x, double theta, int inverse, int B, int Tn, int H, int hd);
template <typename R>
dp_status cu_attention_fwd_t(cu_ctx *ctx, R *out, R *att, const R *q, const R *k, const R *v, int B, int Tn, int H, int hd);
template <typename R>
dp_status cu_attention_bwd_t(cu_ctx *ctx, R *dq, R *dk, R *dv, R *dpre, const R *dout, const R *q, const R *k, const R *v,
                             const R *att, int B, int Tn, int H, int hd);

/* ---- cu_tokens.cu: token-indexed operations (an index outside [0, V) is DP_ERR_INVALID) ---- */
template <typename R> dp_status cu_embedding_fwd_t(cu_ctx *ctx, R *out, const int32_t *tokens, const R *table, int N, int V, int D);
/* per-example tables: dtable[g, ids[r], :] += dy[r, :], g = r / per, rows r in order */
template <typename R>
dp_status cu_embedding_bwd_t(cu_ctx *ctx, R *dtable, const R *dy, const int32_t *ids, int64_t rows, int64_t per, int64_t V,
                             int64_t D);
/* bwd = 0: out[rows] = w (logsumexp - z_y); bwd = 1: out[rows, V] = w (softmax - onehot);
 * labels < 0 give 0 */
template <typename R>
dp_status cu_xent_t(cu_ctx *ctx, R *out, const R *z, const int32_t *y, const R *w, int64_t rows, int64_t V, int bwd);

/* ---- cu_dp.cu ---- */
/* sq[b] = ||x[b,:]||^2 (double), hierarchical, no atomics */
template <typename R> dp_status cu_rows_sqnorm_t(cu_ctx *ctx, double *sq, const R *x, int64_t n, int nb);
/* out[b] (+)= sum_k partial[b, k], k < m, for b < rows (one block per row, fixed tree order) */
dp_status cu_rowsum_f64_(cu_ctx *ctx, double *out, const double *partial, int64_t m, int rows, int accumulate);
/* sq[b] += (R) sqd[b] */
template <typename R> dp_status cu_add_sq_t(cu_ctx *ctx, R *sq, const double *sqd, int64_t B);
template <typename R>
dp_status cu_ghost_sqnorm_t(cu_ctx *ctx, double *sq, const R *A, const R *G, int accumulate, int B, int Tn, int d, int p);
/* c[b] = the host's clip function of sq[b] (S = R or double): abadi n > C ? C/n : 1,
 * automatic C / (n + gamma), n = sqrt(sq) in double */
template <typename R, typename S>
dp_status cu_clip_factors_t(cu_ctx *ctx, R *c, const S *sq, double C, int automatic, double gamma, int64_t B);
template <typename R> dp_status cu_clip_accum_t(cu_ctx *ctx, R *sum, const R *g, const R *c, int64_t B, int64_t n);
template <typename R>
dp_status cu_bk_wgrad_t(cu_ctx *ctx, R *grad, R *Gs, const R *A, const R *G, const R *c, int B, int Tn, int d, int p);
/* One chunk of the fused per-layer clipping, after its per-example blocks ws[nb, n] and
 * their squared norms sqd[nb] (double) exist: sq = (R)sqd (+ extra), c = clipfn(sq), the
 * outputs when asked (sq_out, c_out may be NULL), and dW[j] += sum_b c_b ws[b, j], b in
 * order, an example with c_b = 0 skipped (dropped: never multiplied). */
template <typename R>
dp_status cu_fused_chunk_t(cu_ctx *ctx, R *dW, R *sq_out, R *c_out, const double *sqd, const R *ws, const R *extra,
                           double C, int automatic, double gamma, int64_t nb, int64_t n);

/* ---- cu_fused.cu: the single-pass fused per-layer clipping (cu_fused.cuh) ---- */
/* *nblk = the CTAs of the single pass for a p x d layer on this device (one per 32 x 32 tile,
 * at most the resident ones), 0 when it does not fit */
template <typename R> dp_status cu_fused_single_ctas(cu_ctx *ctx, int *nblk, int64_t d, int64_t p);
/* dW += sum_b c_b G_b^T A_b with c_b = clipfn((R)||g_b||^2 (+ extra[b])), sq_out / c_out when
 * asked, in one cooperative launch; *used = the CTAs it ran on, 0 (nothing done) when the
 * layer does not fit (then the caller takes the chunked path) */
template <typename R>
dp_status cu_fused_single_t(cu_ctx *ctx, int *used, R *dW, R *sq_out, R *c_out, const R *A, const R *G, const R *extra,
                            double C, int automatic, double gamma, int64_t B, int64_t T, int64_t d, int64_t p);

/* ---- cu_noise.cu ---- */
template <typename R>
dp_status cu_noise_add_t(cu_ctx *ctx, R *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset, double std, int64_t n);

/* ---- cu_optim.cu (the host's scalars and formulas) ---- */
template <typename R>
dp_status cu_sgd_t(cu_ctx *ctx, R *param, R *buf, const R *grad, double lr, double mu, double wd, int64_t n);
template <typename R>
dp_status cu_adamw_t(cu_ctx *ctx, R *param, R *m, R *v, const R *grad, double lr, double b1, double b2, double eps,
                     double wd, double bc1, double bc2, int64_t n);

/* ---- cu_comm.cu: one NCCL operation of either element type on the comm stream (out ==
 * buffer of allreduce / broadcast; peer = root of broadcast, peer of send / recv) ---- */
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

/* explicit instantiation of a launcher for float and double */
#define CU_INST2(decl) decl(float) decl(double)

#endif

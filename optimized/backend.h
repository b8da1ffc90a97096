/* optimized/backend.h — the engine's backend interface (docs/engine.md, docs/architecture.md).
 *
 * A backend = a context (void *ctx) + a table of operations (opt_backend_ops), as in
 * ggml's backends or BLIS's reference-then-override kernels. The engine
 * (optimized/engine.c, optimized/strategy.c) only calls these entries; the host
 * backend (optimized/host/) fills them with C loops batched over the examples, the
 * CUDA backend (optimized/cuda/) with kernels. A NULL entry means NOT_SUPPORTED:
 * opt_backend_supports() answers per operation and opt_call-style wrappers in the
 * engine return DP_ERR_NOT_SUPPORTED with the operation's name.
 *
 * Conventions for every operation:
 *   - floating-point buffers are device pointers holding be->dtype (F64 or F32)
 *     elements, row-major; integer buffers (token ids, labels) are int32;
 *   - scalars (alpha, eps, lr, ...) are passed as double and rounded to the dtype
 *     where they are used;
 *   - arguments: the context, outputs first, inputs next, sizes last;
 *   - "+=" in a comment means the operation accumulates into its output;
 *   - every operation is deterministic: same inputs, same backend, same thread
 *     count or not, bit-identical outputs (the host backend never splits a
 *     reduction across threads).
 * Shapes are in comments: B examples, T positions, rows = B*T, d inputs, p outputs. */
#ifndef OPT_BACKEND_H
#define OPT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "common/status.h"
#include "common/tensor.h"

/* Clip functions (docs/engine.md): factor c = min(1, C / ||g||) (abadi; c = 1 when
 * ||g|| = 0) or c = C / (||g|| + gamma) (automatic, Bu et al.). */
typedef enum { OPT_CLIP_ABADI = 0, OPT_CLIP_AUTOMATIC = 1 } opt_clip_fn;

/* An asynchronous collective; wait() completes it and frees the handle. */
typedef struct opt_async opt_async;

/* The communicator a backend runs its collectives over (host: MPI_COMM_WORLD). */
typedef struct {
    int rank, size;
} opt_comm_info;

typedef struct opt_backend_ops {
    /* ---------------- memory ---------------- */
    dp_status (*alloc)(void *ctx, void **out, size_t nbytes);            /* zeroed */
    void (*free)(void *ctx, void *p);
    dp_status (*to_device)(void *ctx, void *dst, const void *src_host, size_t nbytes);
    dp_status (*to_host)(void *ctx, void *dst_host, const void *src, size_t nbytes);
    dp_status (*copy)(void *ctx, void *dst, const void *src, size_t nbytes);
    dp_status (*zero)(void *ctx, void *dst, size_t nbytes);
    /* host f64 <-> device dtype conversions (n elements) */
    dp_status (*upload_f64)(void *ctx, void *dst, const double *src_host, int64_t n);
    dp_status (*download_f64)(void *ctx, double *dst_host, const void *src, int64_t n);

    /* ---------------- dense linear algebra ---------------- */
    /* Strided-batched GEMM, b < batch:
     *   C_b[M,N] = alpha * op(A_b) op(B_b) + beta * C_b
     * op(A_b) is [M,K]: A_b stored [M,K] (ta = 0) or [K,M] (ta = 1); op(B_b) is [K,N]:
     * B_b stored [K,N] (tb = 0) or [N,K] (tb = 1). X_b = X + b * strideX elements.
     * beta = 0 overwrites C (NaN in C is not propagated). Each C element is one dot
     * product accumulated in k order. */
    dp_status (*gemm)(void *ctx, void *C, const void *A, const void *B, int ta, int tb, int64_t M,
                      int64_t N, int64_t K, double alpha, double beta, int64_t batch, int64_t strideA,
                      int64_t strideB, int64_t strideC);
    /* y[r, j] += bias[j]                                 y [rows, n], bias [n] */
    dp_status (*add_bias)(void *ctx, void *y, const void *bias, int64_t rows, int64_t n);
    /* out[g, j] (+)= sum_{r < per} x[g*per + r, j]        x [groups*per, n], out [groups, n];
     * accumulate = 0 overwrites. (bias gradients, per-example reductions over T) */
    dp_status (*sum_rows)(void *ctx, void *out, const void *x, int accumulate, int64_t groups, int64_t per,
                          int64_t n);
    /* y[i] = alpha * x[i] + beta * y[i] */
    dp_status (*axpby)(void *ctx, void *y, const void *x, double alpha, double beta, int64_t n);
    /* y[i] = a[i] + b[i] */
    dp_status (*add)(void *ctx, void *y, const void *a, const void *b, int64_t n);
    /* y[i] = x[i] / s (a true division, as the reference divides by q N) */
    dp_status (*div_scalar)(void *ctx, void *y, const void *x, double s, int64_t n);

    /* ---------------- model operations (forward / backward) ---------------- */
    /* y = tanh(x); dx = dy * (1 - y^2) */
    dp_status (*tanh_fwd)(void *ctx, void *y, const void *x, int64_t n);
    dp_status (*tanh_bwd)(void *ctx, void *dx, const void *dy, const void *y, int64_t n);
    /* silu(a) = a / (1 + exp(-a)); swiglu: h = silu(a) * b   a, b, h [n] */
    dp_status (*silu_fwd)(void *ctx, void *y, const void *x, int64_t n);
    dp_status (*silu_bwd)(void *ctx, void *dx, const void *dy, const void *x, int64_t n);
    dp_status (*swiglu_fwd)(void *ctx, void *h, const void *a, const void *b, int64_t n);
    dp_status (*swiglu_bwd)(void *ctx, void *da, void *db, const void *dh, const void *a, const void *b,
                            int64_t n);
    /* RMSNorm over the last dim: rstd[r] = 1/sqrt(mean_j x[r,j]^2 + eps),
     * y[r,j] = x[r,j] * rstd[r] * g[j].                  x, y [rows, D], g [D], rstd [rows]
     * bwd: dx [rows, D]; dg_rows[r, j] = dy[r,j] * x[r,j] * rstd[r] (the gain gradient per
     * row, so per-example gain gradients are a sum_rows over T). */
    dp_status (*rmsnorm_fwd)(void *ctx, void *y, void *rstd, const void *x, const void *g, double eps,
                             int64_t rows, int64_t D);
    dp_status (*rmsnorm_bwd)(void *ctx, void *dx, void *dg_rows, const void *dy, const void *x,
                             const void *rstd, const void *g, int64_t rows, int64_t D);
    /* Rotary embedding on x [B, T, H, hd] (hd even): for position t and pair i < hd/2,
     * angle = t * theta^(-2i/hd); (x[2i], x[2i+1]) rotated by +angle (fwd) or -angle
     * (bwd, the transpose). In place allowed (y == x). */
    dp_status (*rope_fwd)(void *ctx, void *y, const void *x, double theta, int64_t B, int64_t T, int64_t H,
                          int64_t hd);
    dp_status (*rope_bwd)(void *ctx, void *dx, const void *dy, double theta, int64_t B, int64_t T,
                          int64_t H, int64_t hd);
    /* Causal softmax attention, scale 1/sqrt(hd).  q, k, v, out [B, T, H, hd],
     * probs [B, H, T, T] (saved for backward; entries s > t are 0). */
    dp_status (*attn_fwd)(void *ctx, void *out, void *probs, const void *q, const void *k, const void *v,
                          int64_t B, int64_t T, int64_t H, int64_t hd);
    dp_status (*attn_bwd)(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q,
                          const void *k, const void *v, const void *probs, int64_t B, int64_t T, int64_t H,
                          int64_t hd);
    /* Softmax cross-entropy. loss[r] = w[r] * (logsumexp(z[r,:]) - z[r, y[r]]); rows with
     * y[r] < 0 give 0. bwd: dz[r, :] = w[r] * (softmax(z[r,:]) - onehot(y[r])) (0 when y < 0).
     * z, dz [rows, V], y int32 [rows], w [rows] */
    dp_status (*xent_fwd)(void *ctx, void *loss, const void *z, const int32_t *y, const void *w,
                          int64_t rows, int64_t V);
    dp_status (*xent_bwd)(void *ctx, void *dz, const void *z, const int32_t *y, const void *w, int64_t rows,
                          int64_t V);
    /* out[r, :] = table[ids[r], :]                          table [V, D], ids int32 [rows] */
    dp_status (*embed_fwd)(void *ctx, void *out, const void *table, const int32_t *ids, int64_t rows,
                           int64_t V, int64_t D);
    /* dtable[g, ids[r], :] += dy[r, :] with g = r / per (per-example tables when
     * per = T, one summed table when per = rows).  dtable [rows/per, V, D] */
    dp_status (*embed_bwd)(void *ctx, void *dtable, const void *dy, const int32_t *ids, int64_t rows,
                           int64_t per, int64_t V, int64_t D);

    /* ---------------- DP operations ---------------- */
    /* sq[b] += sum_j g[b, j]^2                              g [B, n] (instantiated) */
    dp_status (*sqnorm_rows)(void *ctx, void *sq, const void *g, int64_t B, int64_t n);
    /* Ghost norm (Li et al.): per-example squared Frobenius norm of G_b^T A_b without
     * forming it: sq[b] += sum_{t,s} (A_b A_b^T)[t,s] (G_b G_b^T)[t,s].
     * A [B, T, d], G [B, T, p]; needs 2*T*T scratch per example (internal). */
    dp_status (*ghost_sqnorm)(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T,
                              int64_t d, int64_t p);
    /* Clip factors from squared norms: c[b] = clipfn(sqrt(sq[b]), C, gamma). */
    dp_status (*clip_factors)(void *ctx, void *c, const void *sq, double C, opt_clip_fn fn, double gamma,
                              int64_t B);
    /* c[b] *= f[b]  (combining factors) */
    dp_status (*mul)(void *ctx, void *y, const void *x, int64_t n);
    /* Clipped accumulation: sum[j] += sum_b c[b] * g[b, j]     g [B, n], sum [n] */
    dp_status (*clip_accum)(void *ctx, void *sum, const void *g, const void *c, int64_t B, int64_t n);
    /* Book-keeping reweighted GEMM: dW[p, d] += sum_b c[b] sum_t G[b,t,:]^T A[b,t,:]
     * A [B, T, d], G [B, T, p] (one GEMM over the B*T rows with c folded into G). */
    dp_status (*bk_gemm)(void *ctx, void *dW, const void *A, const void *G, const void *c, int64_t B,
                         int64_t T, int64_t d, int64_t p);
    /* Fused per-layer clip-accumulate (FlashDP style): for each example b, form the
     * block g_b = G_b^T A_b [p, d] in scratch, sq_b = ||g_b||^2 + extra_sq[b]
     * (extra_sq may be NULL), c_b = clipfn(sqrt(sq_b)), dW += c_b g_b; sq_out[b] = sq_b,
     * c_out[b] = c_b (either may be NULL). Per-example gradients never exist for the
     * whole batch at once (scratch of one block). */
    dp_status (*fused_clip_accum)(void *ctx, void *dW, void *sq_out, void *c_out, const void *A,
                                  const void *G, const void *extra_sq, double C, opt_clip_fn fn,
                                  double gamma, int64_t B, int64_t T, int64_t d, int64_t p);
    /* Fused norms only (streaming blocks, no accumulation): sq[b] += ||G_b^T A_b||^2. */
    dp_status (*fused_sqnorm)(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T,
                              int64_t d, int64_t p);
    /* Philox noise: x[j] += std * N_j, N_j = element (offset + j) of the standard
     * Gaussian stream (key, DP_PURPOSE_NOISE, stream, lane) of common/philox.h.   x [n] */
    dp_status (*noise_add)(void *ctx, void *x, dp_noise_key key, uint32_t stream, uint32_t lane, double std,
                           uint64_t offset, int64_t n);

    /* ---------------- optimizers ---------------- */
    /* SGD with momentum: buf = mu*buf + (grad + wd*param) (buf starts at 0);
     * param = param - lr * buf. (t is unused; kept for backends with bias corrections.) */
    dp_status (*sgd_momentum)(void *ctx, void *param, void *buf, const void *grad, double lr, double mu,
                              double wd, int64_t t, int64_t n);
    /* AdamW (decoupled), evaluated exactly as reference/dpsgd.c:
     * param = param * (1 - lr*wd); m = b1 m + (1-b1) g; v = b2 v + (1-b2) (g g);
     * param = param - (lr / (1-b1^t)) * (m / (sqrt(v) / sqrt(1-b2^t) + eps)). */
    dp_status (*adamw)(void *ctx, void *param, void *m, void *v, const void *grad, double lr, double b1,
                       double b2, double eps, double wd, int64_t t, int64_t n);

    /* ---------------- collectives (over the backend's communicator) ----------------
     * Every call is collective (all ranks call it, same sizes); with async != NULL the
     * operation is started and *async receives a handle to pass to wait(); with
     * async == NULL it completes before returning. Sums are deterministic: the host
     * backend reduces in rank order (0, 1, ..., R-1), independent of arrival order. */
    dp_status (*allreduce_sum)(void *ctx, void *buf, int64_t n, opt_async **async);
    /* recv [n] = the rank's block of sum over ranks of send [size * n] */
    dp_status (*reduce_scatter_sum)(void *ctx, void *recv, const void *send, int64_t n, opt_async **async);
    /* recv [size * n] = concatenation of every rank's send [n] */
    dp_status (*allgather)(void *ctx, void *recv, const void *send, int64_t n, opt_async **async);
    /* block j of send [size * n] goes to rank j; block i of recv is rank i's block */
    dp_status (*alltoall)(void *ctx, void *recv, const void *send, int64_t n, opt_async **async);
    dp_status (*broadcast)(void *ctx, void *buf, int64_t n, int root, opt_async **async);
    dp_status (*send)(void *ctx, const void *buf, int64_t n, int peer, int tag, opt_async **async);
    dp_status (*recv)(void *ctx, void *buf, int64_t n, int peer, int tag, opt_async **async);
    dp_status (*wait)(void *ctx, opt_async *async);
    /* Allgather of a variable number of bytes per rank (host memory; used to gather
     * per-example exports in global order): *recv_host = malloc'd concatenation of
     * every rank's bytes in rank order (caller frees), *recv_len its length. */
    dp_status (*allgatherv_bytes)(void *ctx, void **recv_host, size_t *recv_len, const void *send_host,
                                  size_t nbytes);
    dp_status (*barrier)(void *ctx);

    /* ---------------- lifetime ---------------- */
    void (*destroy)(void *ctx);
} opt_backend_ops;

/* Operation ids for opt_backend_supports (one per table entry, same order). */
typedef enum {
    OPT_OP_ALLOC, OPT_OP_FREE, OPT_OP_TO_DEVICE, OPT_OP_TO_HOST, OPT_OP_COPY, OPT_OP_ZERO,
    OPT_OP_UPLOAD_F64, OPT_OP_DOWNLOAD_F64,
    OPT_OP_GEMM, OPT_OP_ADD_BIAS, OPT_OP_SUM_ROWS, OPT_OP_AXPBY, OPT_OP_ADD, OPT_OP_DIV_SCALAR,
    OPT_OP_TANH_FWD, OPT_OP_TANH_BWD, OPT_OP_SILU_FWD, OPT_OP_SILU_BWD, OPT_OP_SWIGLU_FWD,
    OPT_OP_SWIGLU_BWD, OPT_OP_RMSNORM_FWD, OPT_OP_RMSNORM_BWD, OPT_OP_ROPE_FWD, OPT_OP_ROPE_BWD,
    OPT_OP_ATTN_FWD, OPT_OP_ATTN_BWD, OPT_OP_XENT_FWD, OPT_OP_XENT_BWD, OPT_OP_EMBED_FWD,
    OPT_OP_EMBED_BWD,
    OPT_OP_SQNORM_ROWS, OPT_OP_GHOST_SQNORM, OPT_OP_CLIP_FACTORS, OPT_OP_MUL, OPT_OP_CLIP_ACCUM,
    OPT_OP_BK_GEMM, OPT_OP_FUSED_CLIP_ACCUM, OPT_OP_FUSED_SQNORM, OPT_OP_NOISE_ADD,
    OPT_OP_SGD_MOMENTUM, OPT_OP_ADAMW,
    OPT_OP_ALLREDUCE_SUM, OPT_OP_REDUCE_SCATTER_SUM, OPT_OP_ALLGATHER, OPT_OP_ALLTOALL,
    OPT_OP_BROADCAST, OPT_OP_SEND, OPT_OP_RECV, OPT_OP_WAIT, OPT_OP_ALLGATHERV_BYTES, OPT_OP_BARRIER,
    OPT_OP_COUNT
} opt_op;

typedef struct {
    const char *name;     /* "host", "cuda" */
    dp_dtype dtype;       /* F64 or F32 */
    int threads;          /* host: worker threads (1 = none) */
    opt_comm_info comm;   /* rank / size of the backend's communicator */
    void *ctx;
    opt_backend_ops ops;
} opt_backend;

typedef struct {
    const char *name;  /* "host" or "cuda" */
    dp_dtype dtype;    /* DP_F64 or DP_F32 */
    int threads;       /* >= 1 */
    int use_mpi;       /* 1: collectives over MPI_COMM_WORLD (MPI must be initialised); 0: one rank */
} opt_backend_config;

/* Create a backend by name. "cuda" goes through the weak hook opt_backend_cuda_create
 * (defined by optimized/cuda/ when built); without it: DP_ERR_NOT_SUPPORTED. */
dp_status opt_backend_create(opt_backend **out, const opt_backend_config *cfg);
void opt_backend_destroy(opt_backend *be);

/* 1 if the backend implements op, else 0. */
int opt_backend_supports(const opt_backend *be, opt_op op);
const char *opt_op_name(opt_op op);
/* DP_OK if every op in ops[0..n) is supported, else DP_ERR_NOT_SUPPORTED naming the first missing. */
dp_status opt_backend_require(const opt_backend *be, const opt_op *ops, size_t n);

/* Host backend constructor (optimized/host/host_backend.c). */
dp_status opt_backend_host_create(opt_backend *be, const opt_backend_config *cfg);
/* CUDA backend constructor: weak; defined by optimized/cuda/ when it exists. */
dp_status opt_backend_cuda_create(opt_backend *be, const opt_backend_config *cfg) __attribute__((weak));

/* Element size of the backend's dtype. */
size_t opt_backend_esize(const opt_backend *be);

#endif

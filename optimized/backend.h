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
#include "common/spec_clip.h"
#include "common/status.h"
#include "common/tensor.h"

/* Clip functions: the one enum of common/spec_clip.h (dp_clip_fn). opt_clip_fn and
 * OPT_CLIP_* are its names for the backends (the CUDA backend spells them so). */
typedef dp_clip_fn opt_clip_fn;
#define OPT_CLIP_ABADI DP_CLIPFN_ABADI
#define OPT_CLIP_AUTOMATIC DP_CLIPFN_AUTOMATIC

/* An asynchronous collective; wait() completes it and frees the handle. */
typedef struct opt_async opt_async;

/* The communicator a backend runs its collectives over (host: MPI_COMM_WORLD). */
typedef struct {
    int rank, size;
} opt_comm_info;

/* A process group: a subset of the world ranks with its own communicator (host:
 * MPI_Comm_split), made by the backend's group_split. NULL = the world group. */
typedef struct opt_group {
    int rank, size;   /* this rank's position in the group, and the group's size */
    int color;        /* the color it was split with */
    void *impl;       /* the backend's communicator */
} opt_group;

/* Collective kinds counted by the byte counters (docs/engine.md "Byte counters"). */
#define OPT_COLL_KINDS(X) \
    X(ALLREDUCE_SUM, allreduce_sum) X(REDUCE_SCATTER_SUM, reduce_scatter_sum) X(ALLGATHER, allgather) \
    X(ALLTOALL, alltoall) X(BROADCAST, broadcast) X(SEND, send) X(RECV, recv) \
    X(ALLGATHERV_BYTES, allgatherv_bytes) X(BARRIER, barrier)
typedef enum {
#define OPT_COLL_ID_(ID, name) OPT_COLL_##ID,
    OPT_COLL_KINDS(OPT_COLL_ID_)
#undef OPT_COLL_ID_
    OPT_COLL_COUNT
} opt_coll_kind;
extern const char *const opt_coll_names[OPT_COLL_COUNT];

typedef struct {
    uint64_t calls[OPT_COLL_COUNT];
    uint64_t sent[OPT_COLL_COUNT];  /* bytes this rank sent to other ranks */
    uint64_t recv[OPT_COLL_COUNT];  /* bytes this rank received from other ranks */
} opt_comm_stats;

/* half_convert's half types and modes (the operation's comment below) */
#define OPT_HALF_BF16 0
#define OPT_HALF_FP16 1
#define OPT_HALF_ROUND 0
#define OPT_HALF_ENCODE 1
#define OPT_HALF_DECODE 2

/* The operation list, declared once (docs/engine.md "The operation registry"):
 * X(ID, name, return type, (parameters)). It generates the table struct
 * opt_backend_ops, the ids OPT_OP_<ID>, the names (opt_op_name) and the support query
 * (opt_backend_supports). A backend fills the entries it implements; NULL = not
 * supported. Collectives take the process group they run on (NULL = the world). */
#define OPT_BACKEND_OPS(X) \
    /* ---------------- memory ---------------- */ \
    /* alloc returns zeroed memory (the engine allocates through opt_mem_alloc, which \
     * tags every allocation in the memory ledger) */ \
    X(ALLOC, alloc, dp_status, (void *ctx, void **out, size_t nbytes)) \
    X(FREE, free, void, (void *ctx, void *p)) \
    X(TO_DEVICE, to_device, dp_status, (void *ctx, void *dst, const void *src_host, size_t nbytes)) \
    X(TO_HOST, to_host, dp_status, (void *ctx, void *dst_host, const void *src, size_t nbytes)) \
    X(COPY, copy, dp_status, (void *ctx, void *dst, const void *src, size_t nbytes)) \
    X(ZERO, zero, dp_status, (void *ctx, void *dst, size_t nbytes)) \
    /* host f64 <-> device dtype conversions (n elements) */ \
    X(UPLOAD_F64, upload_f64, dp_status, (void *ctx, void *dst, const double *src_host, int64_t n)) \
    X(DOWNLOAD_F64, download_f64, dp_status, (void *ctx, double *dst_host, const void *src, int64_t n)) \
    /* Half conversions of mixed precision (docs/precision.md section 1), an F32 backend \
     * only (F64: an invalid-argument error). half: 0 bf16, 1 fp16; round to \
     * nearest, ties to even, overflow to +-inf, fp16 subnormals rounded the same way, as \
     * common/tensor.h (a NaN stays a NaN; its payload is not specified). mode: \
     *   0 round:  y[i] = the f32 value of x[i] rounded to the half type   x, y f32 [n] \
     *             (in place allowed); counts (host, may be NULL) [0] += the elements \
     *             that overflowed (finite x, infinite y), [1] += the ones that \
     *             underflowed (x != 0, |y| below the half type's smallest normal); \
     *   1 encode: y[i] = the 2-byte half bits of x[i]             x f32 [n], y 2-byte [n]; \
     *   2 decode: y[i] = the f32 value of the half bits x[i] (exact) x 2-byte, y f32. */ \
    X(HALF_CONVERT, half_convert, dp_status, (void *ctx, void *y, uint64_t *counts, const void *x, int half, int mode, int64_t n)) \
 \
    /* ---------------- dense linear algebra ---------------- */ \
    /* Strided-batched GEMM, b < batch: \
     *   C_b[M,N] = alpha * op(A_b) op(B_b) + beta * C_b \
     * op(A_b) is [M,K]: A_b stored [M,K] (ta = 0) or [K,M] (ta = 1); op(B_b) is [K,N]: \
     * B_b stored [K,N] (tb = 0) or [N,K] (tb = 1). X_b = X + b * strideX elements. \
     * beta = 0 overwrites C (NaN in C is not propagated). Each C element is one dot \
     * product accumulated in k order. */ \
    X(GEMM, gemm, dp_status, (void *ctx, void *C, const void *A, const void *B, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, double beta, int64_t batch, int64_t strideA, int64_t strideB, int64_t strideC)) \
    /* y[r, j] += bias[j]                                 y [rows, n], bias [n] */ \
    X(ADD_BIAS, add_bias, dp_status, (void *ctx, void *y, const void *bias, int64_t rows, int64_t n)) \
    /* out[g, j] (+)= sum_{r < per} x[g*per + r, j]        x [groups*per, n], out [groups, n]; \
     * accumulate = 0 overwrites. (bias gradients, per-example reductions over T) */ \
    X(SUM_ROWS, sum_rows, dp_status, (void *ctx, void *out, const void *x, int accumulate, int64_t groups, int64_t per, int64_t n)) \
    /* y[i] = alpha * x[i] + beta * y[i] */ \
    X(AXPBY, axpby, dp_status, (void *ctx, void *y, const void *x, double alpha, double beta, int64_t n)) \
    /* y[i] = a[i] + b[i] */ \
    X(ADD, add, dp_status, (void *ctx, void *y, const void *a, const void *b, int64_t n)) \
    /* y[i] = x[i] / s (a true division, as the reference divides by q N) */ \
    X(DIV_SCALAR, div_scalar, dp_status, (void *ctx, void *y, const void *x, double s, int64_t n)) \
 \
    /* ---------------- model operations (forward / backward) ---------------- */ \
    /* y = tanh(x); dx = dy * (1 - y^2) */ \
    X(TANH_FWD, tanh_fwd, dp_status, (void *ctx, void *y, const void *x, int64_t n)) \
    X(TANH_BWD, tanh_bwd, dp_status, (void *ctx, void *dx, const void *dy, const void *y, int64_t n)) \
    /* silu(a) = a / (1 + exp(-a)); swiglu: h = silu(a) * b   a, b, h [n] */ \
    X(SILU_FWD, silu_fwd, dp_status, (void *ctx, void *y, const void *x, int64_t n)) \
    X(SILU_BWD, silu_bwd, dp_status, (void *ctx, void *dx, const void *dy, const void *x, int64_t n)) \
    X(SWIGLU_FWD, swiglu_fwd, dp_status, (void *ctx, void *h, const void *a, const void *b, int64_t n)) \
    X(SWIGLU_BWD, swiglu_bwd, dp_status, (void *ctx, void *da, void *db, const void *dh, const void *a, const void *b, int64_t n)) \
    /* RMSNorm over the last dim: rstd[r] = 1/sqrt(mean_j x[r,j]^2 + eps), \
     * y[r,j] = x[r,j] * rstd[r] * g[j].                  x, y [rows, D], g [D], rstd [rows] \
     * bwd: dx [rows, D]; dg_rows[r, j] = dy[r,j] * x[r,j] * rstd[r] (the gain gradient per \
     * row, so per-example gain gradients are a sum_rows over T). */ \
    X(RMSNORM_FWD, rmsnorm_fwd, dp_status, (void *ctx, void *y, void *rstd, const void *x, const void *g, double eps, int64_t rows, int64_t D)) \
    X(RMSNORM_BWD, rmsnorm_bwd, dp_status, (void *ctx, void *dx, void *dg_rows, const void *dy, const void *x, const void *rstd, const void *g, int64_t rows, int64_t D)) \
    /* Rotary embedding on x [B, T, H, hd] (hd even): for position t and pair i < hd/2, \
     * angle = t * theta^(-2i/hd); (x[2i], x[2i+1]) rotated by +angle (fwd) or -angle \
     * (bwd, the transpose). In place allowed (y == x). */ \
    X(ROPE_FWD, rope_fwd, dp_status, (void *ctx, void *y, const void *x, double theta, int64_t B, int64_t T, int64_t H, int64_t hd)) \
    X(ROPE_BWD, rope_bwd, dp_status, (void *ctx, void *dx, const void *dy, double theta, int64_t B, int64_t T, int64_t H, int64_t hd)) \
    /* Causal softmax attention, scale 1/sqrt(hd).  q, k, v, out [B, T, H, hd], \
     * probs [B, H, T, T] (saved for backward; entries s > t are 0). */ \
    X(ATTN_FWD, attn_fwd, dp_status, (void *ctx, void *out, void *probs, const void *q, const void *k, const void *v, int64_t B, int64_t T, int64_t H, int64_t hd)) \
    X(ATTN_BWD, attn_bwd, dp_status, (void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k, const void *v, const void *probs, int64_t B, int64_t T, int64_t H, int64_t hd)) \
    /* Ring attention pieces (context parallelism, docs/longshield.md "Ring attention"). \
     * rope_at: RoPE of x [B, T, H, hd] at the positions t0 + t (sign +1: fwd, -1: bwd). \
     * attn_block_fwd: online-softmax update of the queries q [B, Tq, H, hd] (global \
     * positions q0 + i) by the keys/values k, v [B, Tk, H, hd] (positions k0 + j), causal: \
     * running max m and sum l [B, H, Tq] (start -inf, 0), unnormalised o [B, Tq, H, hd] \
     * (start 0). attn_block_finish: y = o / l, lse = m + log l. attn_block_bwd: dq, dk, dv \
     * += the block's gradients from dout, the output out and lse (FlashAttention's \
     * backward with D = dout . out). */ \
    X(ROPE_AT, rope_at, dp_status, (void *ctx, void *y, const void *x, double theta, int64_t t0, int sign, int64_t B, int64_t T, int64_t H, int64_t hd)) \
    X(ATTN_BLOCK_FWD, attn_block_fwd, dp_status, (void *ctx, void *o, void *m, void *l, const void *q, const void *k, const void *v, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t hd, int64_t q0, int64_t k0)) \
    X(ATTN_BLOCK_FINISH, attn_block_finish, dp_status, (void *ctx, void *y, void *lse, const void *o, const void *m, const void *l, int64_t B, int64_t Tq, int64_t H, int64_t hd)) \
    X(ATTN_BLOCK_BWD, attn_block_bwd, dp_status, (void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k, const void *v, const void *out, const void *lse, int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t hd, int64_t q0, int64_t k0)) \
    /* Softmax cross-entropy. loss[r] = w[r] * (logsumexp(z[r,:]) - z[r, y[r]]); rows with \
     * y[r] < 0 give 0. bwd: dz[r, :] = w[r] * (softmax(z[r,:]) - onehot(y[r])) (0 when y < 0). \
     * z, dz [rows, V], y int32 [rows], w [rows] */ \
    X(XENT_FWD, xent_fwd, dp_status, (void *ctx, void *loss, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V)) \
    X(XENT_BWD, xent_bwd, dp_status, (void *ctx, void *dz, const void *z, const int32_t *y, const void *w, int64_t rows, int64_t V)) \
    /* out[r, :] = table[ids[r], :]                          table [V, D], ids int32 [rows] */ \
    X(EMBED_FWD, embed_fwd, dp_status, (void *ctx, void *out, const void *table, const int32_t *ids, int64_t rows, int64_t V, int64_t D)) \
    /* dtable[g, ids[r], :] += dy[r, :] with g = r / per (per-example tables when \
     * per = T, one summed table when per = rows).  dtable [rows/per, V, D] */ \
    X(EMBED_BWD, embed_bwd, dp_status, (void *ctx, void *dtable, const void *dy, const int32_t *ids, int64_t rows, int64_t per, int64_t V, int64_t D)) \
 \
    /* ---------------- DP operations ---------------- */ \
    /* sq[b] += sum_j g[b, j]^2                              g [B, n] (instantiated) */ \
    X(SQNORM_ROWS, sqnorm_rows, dp_status, (void *ctx, void *sq, const void *g, int64_t B, int64_t n)) \
    /* Ghost norm (Li et al.): per-example squared Frobenius norm of G_b^T A_b without \
     * forming it: sq[b] += sum_{t,s} (A_b A_b^T)[t,s] (G_b G_b^T)[t,s]. \
     * A [B, T, d], G [B, T, p]; needs 2*T*T scratch per example (internal). */ \
    X(GHOST_SQNORM, ghost_sqnorm, dp_status, (void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d, int64_t p)) \
    /* Clip factors from squared norms: c[b] = clipfn(sqrt(sq[b]), C, gamma). */ \
    X(CLIP_FACTORS, clip_factors, dp_status, (void *ctx, void *c, const void *sq, double C, opt_clip_fn fn, double gamma, int64_t B)) \
    /* c[b] *= f[b]  (combining factors) */ \
    X(MUL, mul, dp_status, (void *ctx, void *y, const void *x, int64_t n)) \
    /* Clipped accumulation: sum[j] += sum_b c[b] * g[b, j]     g [B, n], sum [n] */ \
    X(CLIP_ACCUM, clip_accum, dp_status, (void *ctx, void *sum, const void *g, const void *c, int64_t B, int64_t n)) \
    /* Book-keeping reweighted GEMM: dW[p, d] += sum_b c[b] sum_t G[b,t,:]^T A[b,t,:] \
     * A [B, T, d], G [B, T, p] (one GEMM over the B*T rows with c folded into G). */ \
    X(BK_GEMM, bk_gemm, dp_status, (void *ctx, void *dW, const void *A, const void *G, const void *c, int64_t B, int64_t T, int64_t d, int64_t p)) \
    /* Fused per-layer clip-accumulate (FlashDP style): for each example b, form the \
     * block g_b = G_b^T A_b [p, d] in scratch, sq_b = ||g_b||^2 + extra_sq[b] \
     * (extra_sq may be NULL), c_b = clipfn(sqrt(sq_b)), dW += c_b g_b; sq_out[b] = sq_b, \
     * c_out[b] = c_b (either may be NULL). Per-example gradients never exist for the \
     * whole batch at once (scratch of one block). */ \
    X(FUSED_CLIP_ACCUM, fused_clip_accum, dp_status, (void *ctx, void *dW, void *sq_out, void *c_out, const void *A, const void *G, const void *extra_sq, double C, opt_clip_fn fn, double gamma, int64_t B, int64_t T, int64_t d, int64_t p)) \
    /* Fused norms only (streaming blocks, no accumulation): sq[b] += ||G_b^T A_b||^2. */ \
    X(FUSED_SQNORM, fused_sqnorm, dp_status, (void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T, int64_t d, int64_t p)) \
    /* Philox noise: x[j] += std * N_j, N_j = element (offset + j) of the standard \
     * Gaussian stream (key, DP_PURPOSE_NOISE, stream, lane) of common/philox.h.   x [n] */ \
    X(NOISE_ADD, noise_add, dp_status, (void *ctx, void *x, dp_noise_key key, uint32_t stream, uint32_t lane, double std, uint64_t offset, int64_t n)) \
 \
    /* ---------------- optimizers ---------------- */ \
    /* SGD with momentum: buf = mu*buf + (grad + wd*param) (buf starts at 0); \
     * param = param - lr * buf. (t is unused; kept for backends with bias corrections.) */ \
    X(SGD_MOMENTUM, sgd_momentum, dp_status, (void *ctx, void *param, void *buf, const void *grad, double lr, double mu, double wd, int64_t t, int64_t n)) \
    /* AdamW (decoupled), evaluated exactly as reference/dpsgd.c: \
     * param = param * (1 - lr*wd); m = b1 m + (1-b1) g; v = b2 v + (1-b2) (g g); \
     * param = param - (lr / (1-b1^t)) * (m / (sqrt(v) / sqrt(1-b2^t) + eps)). */ \
    X(ADAMW, adamw, dp_status, (void *ctx, void *param, void *m, void *v, const void *grad, double lr, double b1, double b2, double eps, double wd, int64_t t, int64_t n)) \
 \
    /* ---------------- collectives (over a process group) ---------------- \
     * Every call is collective (all ranks call it, same sizes); with async != NULL the \
     * operation is started and *async receives a handle to pass to wait(); with \
     * async == NULL it completes before returning. Sums are deterministic: the host \
     * backend reduces in rank order (0, 1, ..., R-1), independent of arrival order. */ \
    X(ALLREDUCE_SUM, allreduce_sum, dp_status, (void *ctx, const opt_group *g, void *buf, int64_t n, opt_async **async)) \
    /* recv [n] = the rank's block of sum over ranks of send [size * n] */ \
    X(REDUCE_SCATTER_SUM, reduce_scatter_sum, dp_status, (void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async)) \
    /* recv [size * n] = concatenation of every rank's send [n] */ \
    X(ALLGATHER, allgather, dp_status, (void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async)) \
    /* block j of send [size * n] goes to rank j; block i of recv is rank i's block */ \
    X(ALLTOALL, alltoall, dp_status, (void *ctx, const opt_group *g, void *recv, const void *send, int64_t n, opt_async **async)) \
    X(BROADCAST, broadcast, dp_status, (void *ctx, const opt_group *g, void *buf, int64_t n, int root, opt_async **async)) \
    X(SEND, send, dp_status, (void *ctx, const opt_group *g, const void *buf, int64_t n, int peer, int tag, opt_async **async)) \
    X(RECV, recv, dp_status, (void *ctx, const opt_group *g, void *buf, int64_t n, int peer, int tag, opt_async **async)) \
    X(WAIT, wait, dp_status, (void *ctx, opt_async *async)) \
    /* Allgather of a variable number of bytes per rank (host memory; used to gather \
     * per-example exports in global order): *recv_host = malloc'd concatenation of \
     * every rank's bytes in rank order (caller frees), *recv_len its length. */ \
    X(ALLGATHERV_BYTES, allgatherv_bytes, dp_status, (void *ctx, void **recv_host, size_t *recv_len, const void *send_host, size_t nbytes)) \
    X(BARRIER, barrier, dp_status, (void *ctx, const opt_group *g)) \
 \
    /* ---------------- process groups ---------------- \
     * Collective over the world: every rank calls it; ranks passing the same color form \
     * one group, ranked by key (ties by world rank). *out is freed by group_free. */ \
    X(GROUP_SPLIT, group_split, dp_status, (void *ctx, opt_group **out, int color, int key)) \
    X(GROUP_FREE, group_free, void, (void *ctx, opt_group *g)) \
    /* Bytes this rank sent / received per collective kind since creation (or the last \
     * reset = 1), definitions in docs/engine.md "Byte counters". */ \
    X(COMM_STATS, comm_stats, dp_status, (void *ctx, opt_comm_stats *out, int reset)) \
    /* Seconds a collective waits for the other ranks before it fails naming itself \
     * (default OPT_COLLECTIVE_TIMEOUT_DEFAULT; docs/engine.md "Collective timeout"). */ \
    X(SET_COLLECTIVE_TIMEOUT, set_collective_timeout, dp_status, (void *ctx, double seconds)) \
/* (end of OPT_BACKEND_OPS) */

typedef struct opt_backend_ops {
#define OPT_OP_FIELD_(ID, name, ret, args) ret(*name) args;
    OPT_BACKEND_OPS(OPT_OP_FIELD_)
#undef OPT_OP_FIELD_
    /* lifetime (not an operation: every backend has it) */
    void (*destroy)(void *ctx);
} opt_backend_ops;

/* Operation ids for opt_backend_supports (one per table entry, same order). */
typedef enum {
#define OPT_OP_ID_(ID, name, ret, args) OPT_OP_##ID,
    OPT_BACKEND_OPS(OPT_OP_ID_)
#undef OPT_OP_ID_
    OPT_OP_COUNT
} opt_op;

typedef struct {
    const char *name;     /* "host", "cuda", "cuda-emu" */
    dp_dtype dtype;       /* F64 or F32 */
    int threads;          /* host: worker threads (1 = none) */
    opt_comm_info comm;   /* rank / size of the backend's communicator */
    void *ctx;
    opt_backend_ops ops;
    struct opt_ledger *ledger; /* memory ledger (optimized/ledger.c), made by opt_backend_create */
    struct opt_backend_decl *decl; /* what the backend declares (optimized/backend_decl.h), set by opt_backend_create */
} opt_backend;

typedef struct {
    const char *name;  /* "host", "cuda", "cuda-emu" or "plugin:PATH" (optimized/plugin_loader.h) */
    dp_dtype dtype;    /* DP_F64 or DP_F32 */
    int threads;       /* >= 1 */
    int use_mpi;       /* 1: collectives over MPI_COMM_WORLD (MPI must be initialised); 0: one rank */
} opt_backend_config;

/* Default --collective-timeout in seconds (docs/engine.md "Collective timeout"). */
#define OPT_COLLECTIVE_TIMEOUT_DEFAULT 600.0

/* 1 for "cuda" and "cuda-emu" (the CUDA backend, on a GPU or emulated). */
int opt_backend_is_cuda(const char *name);

/* Create a backend by name. "cuda" goes through the weak hook opt_backend_cuda_create
 * (defined by optimized/cuda/ when built), else the plugin; "cuda-emu" through the hook
 * when the linked CUDA objects are the emulation's, else the emulation plugin; without
 * them: DP_ERR_NOT_SUPPORTED. be->name is the name asked for.
 * "plugin:PATH" / "plugin:NAME" loads a plugin (optimized/plugin_loader.h). */
dp_status opt_backend_create(opt_backend **out, const opt_backend_config *cfg);
/* Check a --backend value before any work: a built-in name, or plugin:SPEC (the plugin is
 * loaded and its declaration checked: DP_ERR_INVALID, exit 2, naming what is wrong). The
 * canonical name (plugin:ABSOLUTE-PATH) goes to canon. Unknown names: DP_ERR_USAGE. */
dp_status opt_backend_name_check(char *canon, size_t cap, const char *name);
/* The built-in backend names (--backend of train, conform, audit), NULL-terminated: "host",
 * "cuda" (a GPU: the CUDA objects linked in, or the plugin libdpcert_cuda.so) and "cuda-emu"
 * (the same CUDA sources compiled against the CPU emulation, plugin libdpcert_cuda_emu.so;
 * docs/cuda.md "The emulation"). An emulated backend is never taken for "cuda". */
extern const char *const opt_backend_builtin_names[];
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

/* Call a backend operation, or fail with NOT_SUPPORTED naming it ("backend 'X' does not
 * support operation 'Y'"). */
dp_status opt_unsupported(const opt_backend *be, const char *op);
#define OPT_CALL(be, op, ...) \
    ((be)->ops.op ? (be)->ops.op((be)->ctx, __VA_ARGS__) : opt_unsupported((be), #op))

#endif

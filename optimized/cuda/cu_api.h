/* optimized/cuda/cu_api.h — the C API of the CUDA backend (docs/cuda.md).
 *
 * Usable from C11 and from the .cu files (extern "C"). Every function returns a
 * dp_status; a failing CUDA / cuBLAS / NCCL call becomes DP_ERR_DEVICE with the
 * failing expression, file and line in dp_last_error(). Without CUDA in the build
 * (no nvcc, or SANITIZE=1) every function is defined in cu_stub.c and returns
 * DP_ERR_NOT_SUPPORTED ("built without CUDA"). With CUDA but no device,
 * cu_device_probe returns DP_ERR_NOT_SUPPORTED with "no CUDA device" and nothing
 * aborts.
 *
 * What is here is what the engine's adapter (cu_backend.cu) and the tests call: the f32
 * entry points run the engine's own kernels (one kernel per operation; the adapter calls
 * the f32/f64 launchers of cu_internal.cuh). Development variants (bf16, tensor cores)
 * are declared in dev/cu_dev.h.
 *
 * Conventions: all matrices are row-major; device pointers are plain pointers
 * (float * for f32, int32_t * for tokens);
 * outputs first, inputs next, sizes last. Every kernel runs on the context's
 * compute stream; collectives run on its comm stream. Every kernel is
 * deterministic: no floating-point atomics, fixed reduction orders, so the same
 * inputs on the same device give bit-identical outputs.
 *
 * The API is declared once, in the X-macro CU_API below: the prototypes at the end
 * of this header and the stubs of cu_stub.c are both generated from it, so adding a
 * function is one line of CU_API (plus its definition in a .cu file). */
#ifndef CU_API_H
#define CU_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "common/status.h"

/* ---------------- types ---------------- */

typedef struct cu_device_info {
    int count;               /* devices visible */
    int device;              /* the one used */
    char name[256];
    int cc_major, cc_minor;
    int sm_count;
    size_t global_mem;       /* bytes */
    size_t l2_bytes;
    size_t smem_per_block_optin;
    int driver_version, runtime_version;  /* 12080 = 12.8 */
} cu_device_info;

typedef struct cu_ctx cu_ctx;      /* device, compute + comm streams, cuBLAS(Lt) handles, workspace */
typedef struct cu_event cu_event;
typedef struct cu_comm cu_comm;    /* NCCL communicator (see the NCCL section of CU_API) */

/* ---------------- the API, declared once ----------------
 * CU_API(X_STATUS, X_STATUS_OUT, X_VOID, X_VALUE) expands one macro per function;
 * params is the parenthesised parameter list, with names:
 *   X_STATUS(name, params)               dp_status name params;
 *   X_STATUS_OUT(name, params, out)      the same; the stub also sets *out = NULL
 *   X_VOID(name, params)                 void name params;
 *   X_VALUE(type, name, params, value)   type name params; the stub returns value
 * Without CUDA every dp_status stub returns DP_ERR_NOT_SUPPORTED naming itself. */
#define CU_API(X_STATUS, X_STATUS_OUT, X_VOID, X_VALUE)                                                              \
    /* ---------------- devices, context, memory, streams, events ---------------- */                             \
                                                                                                                     \
    /* Fills `out` for device `device` (or the first one when device < 0). Returns                                   \
     * DP_ERR_NOT_SUPPORTED with "no CUDA device ..." when none is usable (no driver,                                \
     * no device, insufficient driver), DP_ERR_NOT_SUPPORTED "built without CUDA" in a                               \
     * build without CUDA. Never aborts. */                                                                          \
    X_STATUS(cu_device_probe, (cu_device_info *out, int device))                                                     \
                                                                                                                     \
    X_STATUS_OUT(cu_ctx_create, (cu_ctx **out, int device), out)                                                     \
    X_VOID(cu_ctx_destroy, (cu_ctx *ctx))                                                                            \
    X_VALUE(const cu_device_info *, cu_ctx_info, (const cu_ctx *ctx), NULL)                                          \
    /* The cudaStream_t of the compute / comm stream as an opaque pointer. */                                        \
    X_VALUE(void *, cu_ctx_stream, (cu_ctx *ctx), NULL)                                                              \
    X_VALUE(void *, cu_ctx_comm_stream, (cu_ctx *ctx), NULL)                                                         \
                                                                                                                     \
    X_STATUS_OUT(cu_malloc, (void **out, size_t bytes), out)                                                         \
    X_VOID(cu_free, (void *p))                                                                                       \
    X_STATUS(cu_memset0, (cu_ctx *ctx, void *dst, size_t bytes))                                                     \
    X_STATUS(cu_h2d, (cu_ctx *ctx, void *dst, const void *src, size_t bytes)) /* synchronous */                      \
    X_STATUS(cu_d2h, (cu_ctx *ctx, void *dst, const void *src, size_t bytes)) /* synchronous */                      \
    X_STATUS(cu_d2d, (cu_ctx *ctx, void *dst, const void *src, size_t bytes)) /* async on the stream */              \
    X_STATUS(cu_sync, (cu_ctx *ctx))                                          /* compute stream */                   \
    /* Bytes free / total on the context's device (cudaMemGetInfo). */                                               \
    X_STATUS(cu_mem_info, (size_t *free_b, size_t *total_b, cu_ctx *ctx))                                            \
                                                                                                                     \
    X_STATUS_OUT(cu_event_create, (cu_event **out), out)                                                             \
    X_VOID(cu_event_destroy, (cu_event *e))                                                                          \
    X_STATUS(cu_event_record, (cu_event *e, cu_ctx *ctx))                      /* on the compute stream */           \
    X_STATUS(cu_event_elapsed_ms, (float *ms, cu_event *start, cu_event *stop)) /* waits for stop */                 \
    /* The comm stream waits for all work queued so far on the compute stream (and back). */                         \
    X_STATUS(cu_comm_wait_compute, (cu_ctx *ctx))                                                                    \
    X_STATUS(cu_compute_wait_comm, (cu_ctx *ctx))                                                                    \
                                                                                                                     \
    /* The backend operation half_convert (optimized/backend.h, cu_prec.cu): f32 <-> bf16 / fp16,                   \
     * half 0 bf16, 1 fp16; mode 0 round (f32 -> f32, in place allowed; counts host [2] += overflowed,               \
     * underflowed, may be NULL), 1 encode (f32 -> 2-byte), 2 decode (2-byte -> f32). */                             \
    X_STATUS(cu_half_convert, (cu_ctx *ctx, void *y, uint64_t *counts, const void *x, int half, int mode, int64_t n)) \
                                                                                                                     \
    /* ---------------- GEMMs (cuBLAS; the bf16 GEMM: dev/cu_dev.h) ----------------                                 \
     * C[M,N] = alpha * op(A) op(B) + beta * C, row-major, f32 accumulation.                                         \
     * op(A) is A[M,K] (ta = 0) or A[K,M]^T (ta = 1); op(B) is B[K,N] or B[N,K]^T.                                   \
     * Strided-batched: batch matrices at A + i*sa, B + i*sb, C + i*sc (elements). */                                \
    X_STATUS(cu_gemm_f32, (cu_ctx *ctx, float *C, const float *A, const float *B, int ta, int tb, float alpha,       \
                           float beta, int M, int N, int K))                                                         \
    X_STATUS(cu_gemm_f32_batched, (cu_ctx *ctx, float *C, const float *A, const float *B, int ta, int tb,            \
                                   float alpha, float beta, int M, int N, int K, int64_t sa, int64_t sb, int64_t sc, \
                                   int batch))                                                                       \
                                                                                                                     \
    /* ---------------- model operations (f32; shapes in the comments) ---------------- */                          \
                                                                                                                     \
    /* out[N,D] = table[tokens[n], :]; tokens are checked against V (DP_ERR_INVALID). */                             \
    X_STATUS(cu_embedding_fwd, (cu_ctx *ctx, float *out, const int32_t *tokens, const float *table, int N, int V,    \
                                int D))                                                                              \
    /* Per-example tables: dtable[g, tokens[n], :] += dout[n, :], g = n / per ([ceil(N/per), V, D];                 \
     * per = N: one table), n in increasing order within a group (one writer per element). */                      \
    X_STATUS(cu_embedding_bwd, (cu_ctx *ctx, float *dtable, const float *dout, const int32_t *tokens, int N,         \
                                int per, int V, int D))                                                              \
    /* y[N,D] = x * rstd * w, rstd[N] = 1 / sqrt(mean(x^2) + eps). */                                                \
    X_STATUS(cu_rmsnorm_fwd, (cu_ctx *ctx, float *y, float *rstd, const float *x, const float *w, float eps, int N,  \
                              int D))                                                                                \
    /* dx[N,D] (may be NULL) overwritten; dg_rows[N,D] (may be NULL) = dy * x * rstd per row                        \
     * (the gain gradient of each row; the caller sums the rows it needs). */                                      \
    X_STATUS(cu_rmsnorm_bwd, (cu_ctx *ctx, float *dx, float *dg_rows, const float *dy, const float *x,              \
                              const float *w, const float *rstd, int N, int D))                                      \
    /* Rotary embedding in place on x[B,T,H,hd]: the pair (x[2j], x[2j+1]) at position t is                          \
     * rotated by angle t * theta^(-2j/hd). inverse = 1 rotates by minus the angle (backward). */                    \
    X_STATUS(cu_rope, (cu_ctx *ctx, float *x, float theta, int inverse, int B, int T, int H, int hd))                \
    /* Causal attention, straightforward: q,k,v,out [B,T,H,hd]; att[B,H,T,T] saves the                               \
     * softmax probabilities (row t holds s <= t, zeros above) for the backward pass. */                             \
    X_STATUS(cu_attention_fwd, (cu_ctx *ctx, float *out, float *att, const float *q, const float *k, const float *v, \
                                int B, int T, int H, int hd))                                                        \
    /* dq, dk, dv [B,T,H,hd] overwritten; dpre [B,H,T,T] scratch. */                                                 \
    X_STATUS(cu_attention_bwd, (cu_ctx *ctx, float *dq, float *dk, float *dv, float *dpre, const float *dout,        \
                                const float *q, const float *k, const float *v, const float *att, int B, int T,      \
                                int H, int hd))                                                                      \
    /* h[N,F] = silu(a) * b, silu(a) = a / (1 + exp(-a)). */                                                         \
    X_STATUS(cu_swiglu_fwd, (cu_ctx *ctx, float *h, const float *a, const float *b, int64_t n))                      \
    X_STATUS(cu_swiglu_bwd, (cu_ctx *ctx, float *da, float *db, const float *dh, const float *a, const float *b,     \
                             int64_t n))                                                                             \
    /* loss[N] = w[n] (logsumexp(logits[n,:]) - logits[n, target[n]]); a target < 0 gives 0, a                    \
     * target >= V is DP_ERR_INVALID naming the row. */                                                              \
    X_STATUS(cu_xent_fwd, (cu_ctx *ctx, float *loss, const float *logits, const int32_t *targets, const float *w,    \
                           int N, int V))                                                                            \
    /* dlogits[N,V] = w[n] (softmax(logits[n]) - onehot(target[n])). */                                             \
    X_STATUS(cu_xent_bwd, (cu_ctx *ctx, float *dlogits, const float *logits, const int32_t *targets,                 \
                           const float *w, int N, int V))                                                            \
                                                                                                                     \
    /* ---------------- DP kernels (docs/cuda.md) ---------------- */                                                \
                                                                                                                     \
    /* sq[b] = ||x[b, :]||^2 for x[nb, n] (f32), hierarchically: per-block sums written                              \
     * to partial[nb, nblk] (no atomics), then a fixed-order sum per row. */                                         \
    X_STATUS(cu_dp_rows_sqnorm, (cu_ctx *ctx, double *sq, const float *x, int64_t n, int nb))                        \
                                                                                                                     \
    /* (2) Ghost norm, tiled: sq[b] = sum_{t,s} (a_t . a_s)(g_t . g_s) = ||G_b^T A_b||_F^2                           \
     * for A[B,T,d], G[B,T,p] (f32), without writing any T x T Gram matrix to global                                 \
     * memory (32 x 32 Gram tiles live in shared memory; per-tile partials in an O(B * tiles)                        \
     * buffer). `accumulate` = 1 adds to sq (summing layers for flat clipping). */                                   \
    X_STATUS(cu_dp_ghost_sqnorm, (cu_ctx *ctx, double *sq, const float *A, const float *G, int accumulate, int B,    \
                                  int T, int d, int p))                                                              \
                                                                                                                     \
    /* (3) Book-keeping: per-example clip factors from the summed squared norms with the                             \
     * engine's abadi function, c[b] = n > C ? C / n : 1 (n = sqrt(sq[b]); NaN gives 1, +inf 0,                      \
     * as the host backend); then one GEMM per layer with the output-gradient rows scaled:                           \
     * grad[p,d] += (diag(c) G)^T A with K = B*T (Gs[B*T,p] is scratch). */                                          \
    X_STATUS(cu_dp_clip_factors, (cu_ctx *ctx, float *c, const double *sq, double clip, int B))                      \
    X_STATUS(cu_dp_bk_wgrad, (cu_ctx *ctx, float *grad, float *Gs, const float *A, const float *G, const float *c,   \
                              int B, int T, int d, int p))                                                           \
    /* (1b) The single-pass fused per-layer clipping (the engine's fused_clip_accum where the layer                  \
     * fits; docs/cuda.md "(1b) Single pass"): *nblk = the CTAs of its cooperative launch for a                      \
     * p x d layer on this device (one per 32 x 32 tile of dW, at most the resident ones), 0 when                    \
     * the layer does not fit (then fused_clip_accum takes the chunked path). */                                     \
    X_STATUS(cu_dp_fused_single_ctas, (cu_ctx *ctx, int *nblk, int64_t d, int64_t p))                                \
    /* (4) Philox Gaussian noise, element by element as the CPU streams define it                                    \
     * (docs/cuda.md, cu_noise.h): z_i = dp_stream_gaussian(key, DP_PURPOSE_NOISE,                                   \
     * step, lane, offset + i) in double, and                                                                        \
     *   x[i] = (float)((double)x[i] + std * z_i)           (cu_dp_noise_add), or                                    \
     *   out[i] = (float)(((double)x[i] + std * z_i) * scale)  (cu_dp_noise_scale: fused epilogue).                  \
     * lane must be < 2^24. */                                                                                       \
    X_STATUS(cu_dp_noise_add, (cu_ctx *ctx, float *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset,   \
                               double std, int64_t n))                                                               \
    X_STATUS(cu_dp_noise_scale, (cu_ctx *ctx, float *out, const float *x, uint64_t key, uint32_t step,               \
                                 uint32_t lane, uint64_t offset, double std, double scale, int64_t n))               \
    /* The noise alone (x = 0): z[i] = (float)(std * z_i). */                                                        \
    X_STATUS(cu_dp_noise_fill, (cu_ctx *ctx, float *z, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset,  \
                                double std, int64_t n))                                                              \
                                                                                                                     \
    /* ---------------- NCCL communicator ----------------                                                           \
     * Rank and world size from MPI when launched by mpirun (MPI already initialised by                              \
     * the caller, or OMPI_COMM_WORLD_SIZE / PMI_SIZE in the environment: then MPI is                                \
     * initialised here and finalised by cu_comm_destroy), otherwise rank 0 of 1. The                                \
     * device is local rank mod device count. Collectives run on ctx's comm stream. More                             \
     * ranks on a node than devices: DP_ERR_NOT_SUPPORTED on every rank before any NCCL call                         \
     * (NCCL refuses two ranks on one device); rank 0 failing to make the NCCL id fails                              \
     * every rank (none waits for an id that never comes). */                                                        \
    X_STATUS_OUT(cu_comm_create, (cu_comm **out, cu_ctx *ctx), out)                                                  \
    X_VOID(cu_comm_destroy, (cu_comm *c))                                                                            \
    /* After a timed-out collective: ncclCommAbort (pending operations are dropped, so the                           \
     * streams can be synchronised and destroyed); the communicator is unusable afterwards. */                       \
    X_VOID(cu_comm_abort, (cu_comm *c))                                                                              \
    X_VALUE(int, cu_comm_rank, (const cu_comm *c), 0)                                                                \
    X_VALUE(int, cu_comm_size, (const cu_comm *c), 0)                                                                \
    /* The rank's device to pass to cu_ctx_create (before a context exists). */                                      \
    X_STATUS(cu_comm_local_device, (int *device))                                                                    \
    /* Waits for the comm stream (the collectives of the backend adapter: cu_internal.cuh cu_comm_coll_). */         \
    X_STATUS(cu_comm_sync, (cu_comm *c))

/* ---------------- the prototypes, generated ---------------- */
#define CU_API_PROTO_STATUS_(name, params) dp_status name params;
#define CU_API_PROTO_STATUS_OUT_(name, params, out) dp_status name params;
#define CU_API_PROTO_VOID_(name, params) void name params;
#define CU_API_PROTO_VALUE_(type, name, params, value) type name params;
CU_API(CU_API_PROTO_STATUS_, CU_API_PROTO_STATUS_OUT_, CU_API_PROTO_VOID_, CU_API_PROTO_VALUE_)
#undef CU_API_PROTO_STATUS_
#undef CU_API_PROTO_STATUS_OUT_
#undef CU_API_PROTO_VOID_
#undef CU_API_PROTO_VALUE_

#ifdef __cplusplus
}
#endif

#endif

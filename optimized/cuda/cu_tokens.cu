// optimized/cuda/cu_tokens.cu — the token-indexed operations (f32 and f64): embedding
// forward and backward (per-example tables) and cross-entropy forward and backward (with
// per-row weights). An index outside [0, V) is detected inside the kernel with an integer
// flag (atomicMax on an int: order-independent), read back, and reported as DP_ERR_INVALID
// naming the row. No floating-point atomics: every output element has one writer.
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

#define ROW_THREADS 128

/* The device int flag (scratch slot CU_SLOT_FLAG), zeroed before a kernel and read after. */
static dp_status flag_reset(cu_ctx *ctx, int **flag) {
    void *p;
    DP_TRY(cu_ctx_scratch_(ctx, &p, sizeof(int), CU_SLOT_FLAG));
    *flag = (int *)p;
    CU_CHECK(cudaMemsetAsync(p, 0, sizeof(int), cu_ctx_stream_(ctx)));
    return DP_OK;
}
static dp_status flag_read(cu_ctx *ctx, int *flag, int *v) {
    CU_CHECK(cudaMemcpyAsync(v, flag, sizeof(int), cudaMemcpyDeviceToHost, cu_ctx_stream_(ctx)));
    CU_CHECK(cudaStreamSynchronize(cu_ctx_stream_(ctx)));
    return DP_OK;
}

/* ---------------- embedding ---------------- */
// out[N,D] = table[tokens[n], :]; a token outside [0,V) sets *bad = n+1 and writes zeros.
template <typename T>
__global__ void k_embed_fwd(T *out, int *bad, const int32_t *tokens, const T *table, int N, int V, int D) {
    int n = blockIdx.x;
    int32_t t = tokens[n];
    bool ok = t >= 0 && t < V;
    if (!ok && threadIdx.x == 0) atomicMax(bad, n + 1); /* integer flag: order-independent */
    for (int d = threadIdx.x; d < D; d += blockDim.x) out[(int64_t)n * D + d] = ok ? table[(int64_t)t * D + d] : (T)0;
}
template <typename T>
dp_status cu_embedding_fwd_t(cu_ctx *ctx, T *out, const int32_t *tokens, const T *table, int N, int V, int D) {
    CU_ARG(N >= 0 && V > 0 && D > 0, "cu_embedding_fwd: bad sizes N=%d V=%d D=%d", N, V, D);
    if (N == 0) return DP_OK;
    int *flag;
    DP_TRY(flag_reset(ctx, &flag));
    k_embed_fwd<T><<<N, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(out, flag, tokens, table, N, V, D);
    CU_CHECK_LAUNCH(k_embed_fwd);
    int bad = 0;
    DP_TRY(flag_read(ctx, flag, &bad));
    if (bad) return dp_error(DP_ERR_INVALID, "cu_embedding_fwd: token at position %d outside [0, %d)", bad - 1, V);
    return DP_OK;
}
// thread per (g, j): walks the group's rows in order, so each dtable element has one writer
template <typename R>
__global__ void k_embed_bwd(R *dt, int *bad, const R *dy, const int32_t *ids, int64_t rows, int64_t per, int64_t V, int64_t D) {
    int64_t groups = (rows + per - 1) / per;
    CU_FOR_I(groups * D) {
        int64_t g = i / D, j = i % D;
        for (int64_t r = g * per; r < rows && r < (g + 1) * per; r++) {
            int32_t id = ids[r];
            if (id < 0 || id >= V) { atomicMax(bad, (int)(r + 1)); continue; }
            dt[(g * V + id) * D + j] = rn_add(dt[(g * V + id) * D + j], dy[r * D + j]);
        }
    }
}
template <typename R>
dp_status cu_embedding_bwd_t(cu_ctx *ctx, R *dtable, const R *dy, const int32_t *ids, int64_t rows, int64_t per, int64_t V,
                             int64_t D) {
    CU_ARG(rows >= 0 && rows <= 0x7fffffff && V >= 0 && D >= 0, "cu_embedding_bwd: bad sizes rows=%lld V=%lld D=%lld",
           (long long)rows, (long long)V, (long long)D);
    if (per <= 0) return dp_error(DP_ERR_INVALID, "embed_bwd: per must be >= 1");
    if (!rows || !D) return DP_OK;
    int *flag;
    DP_TRY(flag_reset(ctx, &flag));
    int64_t groups = (rows + per - 1) / per;
    k_embed_bwd<R><<<cu_grid_1d(groups * D, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(dtable, flag, dy, ids, rows, per, V, D);
    CU_CHECK_LAUNCH(k_embed_bwd);
    int bad = 0;
    DP_TRY(flag_read(ctx, flag, &bad));
    if (bad) return dp_error(DP_ERR_INVALID, "embedding: token at row %d out of range [0, %lld)", bad - 1, (long long)V);
    return DP_OK;
}

/* ---------------- cross-entropy ---------------- */
// block per row; BWD 0: loss, 1: dz (the host's formulas, exp/log in double). Labels < 0
// give 0; labels >= V set the flag.
template <typename R, int BWD>
__global__ void k_xent(R *out, int *bad, const R *z, const int32_t *y, const R *w, int64_t V) {
    __shared__ R sh[33];
    int64_t r = blockIdx.x;
    int32_t lab = y[r];
    const R *zr = z + r * V;
    if (lab < 0 || lab >= V) {
        if (lab >= V && threadIdx.x == 0) atomicMax(bad, (int)r + 1);
        if (BWD) for (int64_t j = threadIdx.x; j < V; j += blockDim.x) out[r * V + j] = (R)0;
        else if (threadIdx.x == 0) out[r] = (R)0;
        return;
    }
    R mx = (R)-INFINITY;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) mx = cu_max(mx, zr[j]);
    mx = cu_block_max(mx, sh, (R)-INFINITY);
    R s = 0;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) s += (R)exp((double)(zr[j] - mx));
    s = cu_block_sum(s, sh);
    if (!BWD) {
        if (threadIdx.x == 0) out[r] = w[r] * (mx + (R)log((double)s) - zr[lab]);
    } else {
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x)
            out[r * V + j] = w[r] * ((R)exp((double)(zr[j] - mx)) / s - (j == lab ? (R)1 : (R)0));
    }
}
template <typename R>
dp_status cu_xent_t(cu_ctx *ctx, R *out, const R *z, const int32_t *y, const R *w, int64_t rows, int64_t V, int bwd) {
    CU_ARG(rows >= 0 && rows <= 0x7fffffff && V >= 0, "cu_xent: bad sizes rows=%lld V=%lld", (long long)rows, (long long)V);
    if (!rows) return DP_OK;
    if (V == 0) return dp_error(DP_ERR_INVALID, "cuda xent: V must be >= 1");
    int *flag;
    DP_TRY(flag_reset(ctx, &flag));
    if (bwd) k_xent<R, 1><<<(unsigned)rows, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(out, flag, z, y, w, V);
    else k_xent<R, 0><<<(unsigned)rows, ROW_THREADS, 0, cu_ctx_stream_(ctx)>>>(out, flag, z, y, w, V);
    CU_CHECK_LAUNCH(k_xent);
    int bad = 0;
    DP_TRY(flag_read(ctx, flag, &bad));
    if (bad) return dp_error(DP_ERR_INVALID, "xent: label of row %d out of range [0, %lld)", bad - 1, (long long)V);
    return DP_OK;
}

#define INST(R)                                                                                                       \
    template dp_status cu_embedding_fwd_t<R>(cu_ctx *, R *, const int32_t *, const R *, int, int, int);               \
    template dp_status cu_embedding_bwd_t<R>(cu_ctx *, R *, const R *, const int32_t *, int64_t, int64_t, int64_t, int64_t); \
    template dp_status cu_xent_t<R>(cu_ctx *, R *, const R *, const int32_t *, const R *, int64_t, int64_t, int);
CU_INST2(INST)

extern "C" dp_status cu_embedding_fwd(cu_ctx *ctx, float *out, const int32_t *tokens, const float *table, int N, int V,
                                      int D) {
    return cu_embedding_fwd_t<float>(ctx, out, tokens, table, N, V, D);
}
extern "C" dp_status cu_embedding_bwd(cu_ctx *ctx, float *dtable, const float *dout, const int32_t *tokens, int N, int per,
                                      int V, int D) {
    return cu_embedding_bwd_t<float>(ctx, dtable, dout, tokens, N, per, V, D);
}
extern "C" dp_status cu_xent_fwd(cu_ctx *ctx, float *loss, const float *logits, const int32_t *targets, const float *w,
                                 int N, int V) {
    return cu_xent_t<float>(ctx, loss, logits, targets, w, N, V, 0);
}
extern "C" dp_status cu_xent_bwd(cu_ctx *ctx, float *dlogits, const float *logits, const int32_t *targets, const float *w,
                                 int N, int V) {
    return cu_xent_t<float>(ctx, dlogits, logits, targets, w, N, V, 1);
}

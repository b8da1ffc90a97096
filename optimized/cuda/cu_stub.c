/* optimized/cuda/cu_stub.c — the CUDA backend's C API in a build without CUDA (no
 * nvcc/cuBLAS/NCCL, or the SANITIZE=1 build): every function returns
 * DP_ERR_NOT_SUPPORTED naming itself, so callers and tests fail or skip cleanly.
 * Generated from cu_api.h's declarations; keep the two in step. */
#ifndef DP_HAVE_CUDA
#include <stddef.h>

#include "optimized/cuda/cu_api.h"

/* Present in both builds (see cu_backend.cu). */
const int cu_backend_linked = 0;

dp_status cu_device_probe(cu_device_info *out, int device) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_ctx_create(cu_ctx **out, int device) {
    *out = NULL;
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
void cu_ctx_destroy(cu_ctx *ctx) {}
const cu_device_info *cu_ctx_info(const cu_ctx *ctx) { return NULL; }
void *cu_ctx_stream(cu_ctx *ctx) { return NULL; }
void *cu_ctx_comm_stream(cu_ctx *ctx) { return NULL; }
dp_status cu_malloc(void **out, size_t bytes) {
    *out = NULL;
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
void cu_free(void *p) {}
dp_status cu_memset0(cu_ctx *ctx, void *dst, size_t bytes) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_h2d(cu_ctx *ctx, void *dst, const void *src, size_t bytes) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_d2h(cu_ctx *ctx, void *dst, const void *src, size_t bytes) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_d2d(cu_ctx *ctx, void *dst, const void *src, size_t bytes) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_sync(cu_ctx *ctx) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_mem_info(size_t *free_b, size_t *total_b, cu_ctx *ctx) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_event_create(cu_event **out) {
    *out = NULL;
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
void cu_event_destroy(cu_event *e) {}
dp_status cu_event_record(cu_event *e, cu_ctx *ctx) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_event_elapsed_ms(float *ms, cu_event *start, cu_event *stop) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_wait_compute(cu_ctx *ctx) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_compute_wait_comm(cu_ctx *ctx) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_f32_to_bf16(cu_ctx *ctx, uint16_t *out, const float *in, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_bf16_to_f32(cu_ctx *ctx, float *out, const uint16_t *in, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_gemm_f32(cu_ctx *ctx, float *C, const float *A, const float *B, int ta, int tb, float alpha, float beta, int M, int N, int K) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_gemm_f32_batched(cu_ctx *ctx, float *C, const float *A, const float *B, int ta, int tb, float alpha, float beta, int M, int N, int K, int64_t sa, int64_t sb, int64_t sc, int batch) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_gemm_bf16(cu_ctx *ctx, float *C, const uint16_t *A, const uint16_t *B, int ta, int tb, float alpha, float beta, int M, int N, int K) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_gemm_bf16_batched(cu_ctx *ctx, float *C, const uint16_t *A, const uint16_t *B, int ta, int tb, float alpha, float beta, int M, int N, int K, int64_t sa, int64_t sb, int64_t sc, int batch) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_embedding_fwd(cu_ctx *ctx, float *out, const int32_t *tokens, const float *table, int N, int V, int D) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_embedding_bwd(cu_ctx *ctx, float *dtable, const float *dout, const int32_t *tokens, int N, int V, int D) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_rmsnorm_fwd(cu_ctx *ctx, float *y, float *rstd, const float *x, const float *w, float eps, int N, int D) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_rmsnorm_bwd(cu_ctx *ctx, float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd, int N, int D) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_rope(cu_ctx *ctx, float *x, float theta, int inverse, int B, int T, int H, int hd) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_attention_fwd(cu_ctx *ctx, float *out, float *att, const float *q, const float *k, const float *v, int B, int T, int H, int hd) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_attention_bwd(cu_ctx *ctx, float *dq, float *dk, float *dv, float *dpre, const float *dout, const float *q, const float *k, const float *v, const float *att, int B, int T, int H, int hd) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_swiglu_fwd(cu_ctx *ctx, float *h, const float *a, const float *b, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_swiglu_bwd(cu_ctx *ctx, float *da, float *db, const float *dh, const float *a, const float *b, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_xent_fwd(cu_ctx *ctx, float *loss, const float *logits, const int32_t *targets, int N, int V) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_xent_bwd(cu_ctx *ctx, float *dlogits, const float *logits, const int32_t *targets, const float *dloss, int N, int V) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_rows_sqnorm(cu_ctx *ctx, double *sq, const float *x, int64_t n, int nb) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_fused_wgrad_bf16(cu_ctx *ctx, float *grad, double *sqnorm, const uint16_t *A, const uint16_t *G, double clip, int B, int T, int d, int p, int chunk) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_ghost_sqnorm(cu_ctx *ctx, double *sq, const float *A, const float *G, int accumulate, int B, int T, int d, int p) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_ghost_sqnorm_bf16(cu_ctx *ctx, double *sq, const uint16_t *A, const uint16_t *G, int accumulate, int B, int T, int d, int p) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_clip_factors(cu_ctx *ctx, float *c, const double *sq, double clip, int B) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_bk_wgrad(cu_ctx *ctx, float *grad, float *Gs, const float *A, const float *G, const float *c, int B, int T, int d, int p) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_bk_wgrad_bf16(cu_ctx *ctx, float *grad, uint16_t *Gs, const uint16_t *A, const uint16_t *G, const float *c, int B, int T, int d, int p) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_noise_add(cu_ctx *ctx, float *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset, double std, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_noise_scale(cu_ctx *ctx, float *out, const float *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset, double std, double scale, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_dp_noise_fill(cu_ctx *ctx, float *z, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset, double std, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_create(cu_comm **out, cu_ctx *ctx) {
    *out = NULL;
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
void cu_comm_destroy(cu_comm *c) {}
int cu_comm_rank(const cu_comm *c) { return 0; }
int cu_comm_size(const cu_comm *c) { return 0; }
dp_status cu_comm_local_device(int *device) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_allreduce_sum_f32(cu_comm *c, float *buf, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_reduce_scatter_sum_f32(cu_comm *c, float *out, const float *in, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_allgather_f32(cu_comm *c, float *out, const float *in, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_alltoall_f32(cu_comm *c, float *out, const float *in, int64_t n) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_broadcast_f32(cu_comm *c, float *buf, int64_t n, int root) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_send_f32(cu_comm *c, const float *buf, int64_t n, int peer) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_recv_f32(cu_comm *c, float *buf, int64_t n, int peer) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}
dp_status cu_comm_sync(cu_comm *c) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__);
}

#else
typedef int cu_stub_unused_;
#endif

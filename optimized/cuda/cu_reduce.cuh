// optimized/cuda/cu_reduce.cuh — deterministic block reductions (fixed tree order:
// warp shuffle-down butterfly, then warp 0 over the per-warp results). The result
// depends only on the inputs and blockDim, never on scheduling: no atomics.
#ifndef CU_REDUCE_CUH
#define CU_REDUCE_CUH

template <typename T> __device__ __forceinline__ T cu_warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
template <typename T> __device__ __forceinline__ T cu_warp_max(T v) {
    for (int o = 16; o > 0; o >>= 1) {
        T w = __shfl_down_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
 * the result. `sh` is shared scratch of 33 elements. */
template <typename T> __device__ __forceinline__ T cu_block_sum(T v, T *sh) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = cu_warp_sum(v);
    __syncthreads(); /* sh may still be read by a previous call */
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        T x = lane < nw ? sh[lane] : (T)0;
        x = cu_warp_sum(x);
        if (lane == 0) sh[32] = x;
    }
    __syncthreads();
    return sh[32];
}
template <typename T> __device__ __forceinline__ T cu_block_max(T v, T *sh, T lowest) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = cu_warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        T x = lane < nw ? sh[lane] : lowest;
        x = cu_warp_max(x);
        if (lane == 0) sh[32] = x;
    }
    __syncthreads();
    return sh[32];
}

/* Precision-generic math used by the templated kernels (float or double). */
__device__ __forceinline__ float cu_exp(float x) { return expf(x); }
__device__ __forceinline__ double cu_exp(double x) { return exp(x); }
__device__ __forceinline__ float cu_log(float x) { return logf(x); }
__device__ __forceinline__ double cu_log(double x) { return log(x); }
__device__ __forceinline__ float cu_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double cu_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float cu_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double cu_max(double a, double b) { return fmax(a, b); }
/* Correctly rounded single operations (never contracted into a fused multiply-add). */
__device__ __forceinline__ float rn_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double rn_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float rn_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double rn_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float rn_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double rn_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float rn_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double rn_div(double a, double b) { return __ddiv_rn(a, b); }

/* The host backend's clip functions (optimized/host/host_kern.h), n = sqrt(sq) in double,
 * rounded once to R: abadi n > C ? C / n : 1 (NaN gives 1, +inf 0), automatic C / (n + gamma). */
template <typename R> __device__ __forceinline__ R cu_clipfn(double sq, double C, int automatic, double gamma) {
    double n = sqrt(sq);
    if (automatic) return (R)(C / (n + gamma));
    return (R)(n > C ? C / n : 1.0);
}

#endif

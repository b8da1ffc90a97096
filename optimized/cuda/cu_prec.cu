// optimized/cuda/cu_prec.cu — mixed precision on the device (docs/precision.md section 1,
// docs/cuda.md "The backend adapter"): the one conversion between f32 and the half types,
// bf16 and fp16, that the engine's rounding points use through the backend operation
// half_convert (the development C API's cu_f32_to_bf16 / cu_bf16_to_f32, dev/, call it too).
//
// f32 -> half is the device's cvt.rn (__float2bfloat16_rn / __float2half_rn: round to
// nearest, ties to even, overflow to infinity, fp16 subnormals rounded the same way);
// half -> f32 is exact. For every non-NaN f32 input these are the bits of common/tensor.h's
// dp_f32_to_bf16 / dp_f32_to_f16 (the host backend's rounding); a NaN stays a NaN, its
// bits not specified (the emulation writes the canonical 0x7fff, the host keeps the sign
// and payload bits).
// Integer counters only (atomicAdd of per-thread counts): the counts are order-independent,
// the values elementwise, so every output is deterministic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

extern "C" {
#include "optimized/backend.h"
}
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"


template <int FP16> __device__ __forceinline__ uint16_t cu_half_bits(float x) {
    if (FP16) return __half_as_ushort(__float2half_rn(x));
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}
template <int FP16> __device__ __forceinline__ float cu_half_value(uint16_t h) {
    if (FP16) return __half2float(__ushort_as_half(h));
    return __bfloat162float(__ushort_as_bfloat16(h));
}

/* y[i] = round_h(x[i]) (in place allowed); cnt (may be NULL): [0] += overflowed (finite ->
 * inf), [1] += underflowed (nonzero -> |y| below the smallest normal `tiny`) */
template <int FP16>
__global__ void cu_k_half_round(float *y, unsigned long long *cnt, const float *x, float tiny, int64_t n) {
    unsigned long long over = 0, under = 0;
    CU_FOR_I(n) {
        const float v = x[i], r = cu_half_value<FP16>(cu_half_bits<FP16>(v));
        over += isfinite(v) && isinf(r);
        under += v != 0.0f && fabsf(r) < tiny;
        y[i] = r;
    }
    if (cnt && over) atomicAdd(&cnt[0], over);
    if (cnt && under) atomicAdd(&cnt[1], under);
}
template <int FP16> __global__ void cu_k_half_encode(uint16_t *y, const float *x, int64_t n) {
    CU_FOR_I(n) y[i] = cu_half_bits<FP16>(x[i]);
}
template <int FP16> __global__ void cu_k_half_decode(float *y, const uint16_t *x, int64_t n) {
    CU_FOR_I(n) y[i] = cu_half_value<FP16>(x[i]);
}

template <int FP16>
static dp_status cu_half_launch(cu_ctx *ctx, void *y, unsigned long long *cnt, const void *x, int mode, int64_t n) {
    cudaStream_t s = cu_ctx_stream_(ctx);
    const int grid = cu_grid_1d(n, 1);
    if (mode == OPT_HALF_ROUND) {
        const float tiny = FP16 ? 0x1p-14f : 0x1p-126f;
        cu_k_half_round<FP16><<<grid, CU_BLOCK, 0, s>>>((float *)y, cnt, (const float *)x, tiny, n);
        CU_CHECK_LAUNCH(cu_k_half_round);
    } else if (mode == OPT_HALF_ENCODE) {
        cu_k_half_encode<FP16><<<grid, CU_BLOCK, 0, s>>>((uint16_t *)y, (const float *)x, n);
        CU_CHECK_LAUNCH(cu_k_half_encode);
    } else {
        cu_k_half_decode<FP16><<<grid, CU_BLOCK, 0, s>>>((float *)y, (const uint16_t *)x, n);
        CU_CHECK_LAUNCH(cu_k_half_decode);
    }
    return DP_OK;
}

extern "C" dp_status cu_half_convert(cu_ctx *ctx, void *y, uint64_t *counts, const void *x, int half, int mode, int64_t n) {
    CU_ARG(n >= 0, "cu_half_convert: negative size %lld", (long long)n);
    CU_ARG(half == OPT_HALF_BF16 || half == OPT_HALF_FP16, "cu_half_convert: half type %d (0 bf16, 1 fp16)", half);
    CU_ARG(mode == OPT_HALF_ROUND || mode == OPT_HALF_ENCODE || mode == OPT_HALF_DECODE,
           "cu_half_convert: mode %d (0 round, 1 encode, 2 decode)", mode);
    if (n == 0) return DP_OK;
    unsigned long long *cnt = NULL;
    if (counts && mode == OPT_HALF_ROUND) {
        void *p;
        DP_TRY(cu_ctx_scratch_(ctx, &p, 2 * sizeof(unsigned long long), CU_SLOT_COUNTS));
        cnt = (unsigned long long *)p;
        CU_CHECK(cudaMemsetAsync(cnt, 0, 2 * sizeof(unsigned long long), cu_ctx_stream_(ctx)));
    }
    DP_TRY(half == OPT_HALF_FP16 ? cu_half_launch<1>(ctx, y, cnt, x, mode, n) : cu_half_launch<0>(ctx, y, cnt, x, mode, n));
    if (cnt) {
        unsigned long long h[2];
        CU_CHECK(cudaMemcpyAsync(h, cnt, sizeof h, cudaMemcpyDeviceToHost, cu_ctx_stream_(ctx)));
        CU_CHECK(cudaStreamSynchronize(cu_ctx_stream_(ctx)));
        counts[0] += h[0];
        counts[1] += h[1];
    }
    return DP_OK;
}

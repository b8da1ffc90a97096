// optimized/cuda/cu_noise.cu — Philox Gaussian noise on the device (docs/cuda.md "(4)"),
// element by element as the CPU streams define it (cu_noise.h: the element mapping, shared
// with the host test): add in place (the engine's noise_add, f32 and f64), the fused
// epilogue (x + std z) * scale and the noise alone (f32 C API). The key is a secret
// dp_noise_key; nothing here derives it from public randomness.
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_noise.h"
#include "optimized/cuda/cu_plan.h"

// Work item u = Philox block offset/2 + u; mode 0: x += std z; 1: out = (x + std z) * scale; 2: out = std z.
/* x + std z rounded per operation: float as cu_noise_apply; double keeps the double sum */
__device__ __forceinline__ float cu_noise_apply_t(float x, double std, double z) { return cu_noise_apply(x, std, z); }
__device__ __forceinline__ double cu_noise_apply_t(double x, double std, double z) { return __dadd_rn(x, __dmul_rn(std, z)); }
template <typename R, int MODE>
__global__ void k_noise(R *out, const R *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset,
                        double std, double scale, int64_t n, int64_t nblocks) {
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < nblocks; u += (int64_t)gridDim.x * blockDim.x) {
        int64_t k0, k1;
        uint64_t j;
        cu_noise_item(&k0, &k1, &j, offset, n, u);
        double z0, z1;
        cu_noise_pair(&z0, &z1, key, step, lane, j);
        if (MODE == 0) {
            if (k0 >= 0) out[k0] = (R)cu_noise_apply_t(out[k0], std, z0);
            if (k1 >= 0) out[k1] = (R)cu_noise_apply_t(out[k1], std, z1);
        } else if (MODE == 1) {
            if (k0 >= 0) out[k0] = cu_noise_apply_scaled(x[k0], std, z0, scale);
            if (k1 >= 0) out[k1] = cu_noise_apply_scaled(x[k1], std, z1, scale);
        } else {
            if (k0 >= 0) out[k0] = cu_noise_apply(0.0f, std, z0);
            if (k1 >= 0) out[k1] = cu_noise_apply(0.0f, std, z1);
        }
    }
}

static dp_status noise_args(const char *fn, uint32_t lane, double std, double scale, int64_t n, uint64_t offset) {
    if (lane >= (1u << 24)) return dp_error(DP_ERR_INVALID, "%s: lane %u must be < 2^24", fn, lane);
    if (!(std >= 0.0) || !isfinite(std)) return dp_error(DP_ERR_INVALID, "%s: noise std must be finite and >= 0 (got %g)", fn, std);
    if (!isfinite(scale)) return dp_error(DP_ERR_INVALID, "%s: scale must be finite (got %g)", fn, scale);
    if (n < 0) return dp_error(DP_ERR_INVALID, "%s: negative size %lld", fn, (long long)n);
    if (offset > ((uint64_t)1 << 62)) return dp_error(DP_ERR_INVALID, "%s: element offset %llu too large", fn, (unsigned long long)offset);
    return DP_OK;
}

/* Check the arguments, then launch k_noise<R, MODE> over the Philox blocks that cover
 * elements [offset, offset + n): MODE 0 adds noise in place (out == x), 1 writes
 * scale * x + noise to out, 2 fills out with noise. */
template <typename R, int MODE>
static dp_status noise_launch(cu_ctx *ctx, const char *fn, R *out, const R *x, uint64_t key, uint32_t step,
                              uint32_t lane, uint64_t offset, double std, double scale, int64_t n) {
    DP_TRY(noise_args(fn, lane, std, scale, n, offset));
    int64_t nbk = cu_noise_nblocks(offset, n);
    if (nbk == 0) return DP_OK;
    k_noise<R, MODE><<<cu_grid_1d(nbk, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(out, x, key, step, lane, offset, std,
                                                                              scale, n, nbk);
    CU_CHECK_LAUNCH(k_noise);
    return DP_OK;
}
extern "C" dp_status cu_dp_noise_add(cu_ctx *ctx, float *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset,
                                     double std, int64_t n) {
    return noise_launch<float, 0>(ctx, "cu_dp_noise_add", x, x, key, step, lane, offset, std, 1.0, n);
}
template <typename R>
dp_status cu_noise_add_t(cu_ctx *ctx, R *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset, double std, int64_t n) {
    return noise_launch<R, 0>(ctx, "cu_dp_noise_add", x, x, key, step, lane, offset, std, 1.0, n);
}
template dp_status cu_noise_add_t<float>(cu_ctx *, float *, uint64_t, uint32_t, uint32_t, uint64_t, double, int64_t);
template dp_status cu_noise_add_t<double>(cu_ctx *, double *, uint64_t, uint32_t, uint32_t, uint64_t, double, int64_t);
extern "C" dp_status cu_dp_noise_scale(cu_ctx *ctx, float *out, const float *x, uint64_t key, uint32_t step,
                                       uint32_t lane, uint64_t offset, double std, double scale, int64_t n) {
    return noise_launch<float, 1>(ctx, "cu_dp_noise_scale", out, x, key, step, lane, offset, std, scale, n);
}
extern "C" dp_status cu_dp_noise_fill(cu_ctx *ctx, float *z, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset,
                                      double std, int64_t n) {
    return noise_launch<float, 2>(ctx, "cu_dp_noise_fill", z, z, key, step, lane, offset, std, 1.0, n);
}


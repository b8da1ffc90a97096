/* optimized/cuda/cu_noise.h — the element mapping of the in-kernel Philox Gaussian
 * noise, as __host__ __device__ functions (static inline in C), so that the host
 * test compiles exactly the code the noise kernel runs (docs/cuda.md, "Noise").
 *
 * Noise element i of parameter `lane` at step `step` under the secret noise key:
 *   z_i = dp_stream_gaussian(key, DP_PURPOSE_NOISE, step, lane, i)   (common/philox.h)
 * i.e. Philox block i/2 of counter (block lo, block hi, step, 0x81 << 24 | lane),
 * Box-Muller in double, the cosine branch for even i and the sine branch for odd i.
 * The noisy value is (float)(x + std * z_i) with one rounding to double for the
 * product, one for the sum and one to float: no fused multiply-add (the device
 * code uses __dmul_rn/__dadd_rn, the host is compiled with -ffp-contract=off). */
#ifndef CU_NOISE_H
#define CU_NOISE_H

#include <stdint.h>

#include "common/philox.h"
#include "optimized/cuda/cu_plan.h"

#if defined(__CUDA_ARCH__)
#define CU_DMUL(a, b) __dmul_rn((a), (b))
#define CU_DADD(a, b) __dadd_rn((a), (b))
#else
#define CU_DMUL(a, b) ((a) * (b))
#define CU_DADD(a, b) ((a) + (b))
#endif

/* The two Gaussians of Philox block j (elements 2j and 2j+1). */
CU_HD void cu_noise_pair(double *z0, double *z1, uint64_t key, uint32_t step, uint32_t lane, uint64_t j) {
    dp_box_muller(dp_stream_block(key, DP_PURPOSE_NOISE, step, lane, j), z0, z1);
}

/* x + std * z, rounded once per operation, then to float. */
CU_HD float cu_noise_apply(float x, double std, double z) {
    return (float)CU_DADD((double)x, CU_DMUL(std, z));
}

/* (x + std * z) * scale: the fused-epilogue form (e.g. 1/B or -lr/B). */
CU_HD float cu_noise_apply_scaled(float x, double std, double z, double scale) {
    return (float)CU_DMUL(CU_DADD((double)x, CU_DMUL(std, z)), scale);
}

/* Work item u of a noise launch over elements [offset, offset + n): Philox block
 * j = offset/2 + u; writes the local indices (into x[0..n)) of the block's two
 * elements, -1 where the element falls outside the range. */
CU_HD void cu_noise_item(int64_t *k0, int64_t *k1, uint64_t *j, uint64_t offset, int64_t n, int64_t u) {
    uint64_t blk = (offset >> 1) + (uint64_t)u;
    int64_t e0 = (int64_t)(2 * blk) - (int64_t)offset; /* local index of element 2*blk (may be -1) */
    *j = blk;
    *k0 = (e0 >= 0 && e0 < n) ? e0 : -1;
    *k1 = (e0 + 1 >= 0 && e0 + 1 < n) ? e0 + 1 : -1;
}

#endif

/* common/philox.h — Philox4x32-10 counter-based RNG and the dpcert stream
 * layout, in one header usable from C11 and CUDA (functions are
 * __host__ __device__ when compiled by nvcc). See docs/rng.md.
 *
 * Philox4x32-10 (Salmon et al., SC'11): counter = 4 x uint32, key = 2 x uint32,
 * 10 rounds, multipliers 0xD2511F53 / 0xCD9E8D57, Weyl key increments
 * 0x9E3779B9 / 0xBB67AE85. Output = 4 x uint32.
 *
 * dpcert stream layout: key = 64-bit (k0 = low 32 bits, k1 = high 32 bits);
 * counter = (block index low, block index high, stream id, tag) with
 * tag = (purpose << 24) | lane (lane < 2^24). Element i of a stream of doubles
 * uses block i/2: the block's words (w0,w1) give element 2j and (w2,w3) give
 * element 2j+1, so any element is computable on its own on CPU or GPU. */
#ifndef DP_PHILOX_H
#define DP_PHILOX_H

#include <stdint.h>
#if !defined(__CUDACC__)
#include <math.h>
#endif

#if defined(__CUDACC__)
#define DP_HD __host__ __device__ __forceinline__
#else
#define DP_HD static inline
#endif

typedef struct { uint32_t v[4]; } dp_philox_ctr;
typedef struct { uint32_t v[2]; } dp_philox_key;

DP_HD uint32_t dp_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* One Philox4x32-10 evaluation. */
DP_HD dp_philox_ctr dp_philox4x32_10(dp_philox_ctr c, dp_philox_key k) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k.v[0] += 0x9E3779B9u; k.v[1] += 0xBB67AE85u; }
        uint32_t hi0, hi1;
        uint32_t lo0 = dp_mulhilo32(0xD2511F53u, c.v[0], &hi0);
        uint32_t lo1 = dp_mulhilo32(0xCD9E8D57u, c.v[2], &hi1);
        dp_philox_ctr o;
        o.v[0] = hi1 ^ c.v[1] ^ k.v[0];
        o.v[1] = lo1;
        o.v[2] = hi0 ^ c.v[3] ^ k.v[1];
        o.v[3] = lo0;
        c = o;
    }
    return c;
}

/* ---- purposes (the high byte of counter word 3). Public purposes are keyed by
 * the public seed, secret purposes by the noise key (docs/rng.md). ---- */
enum {
    DP_PURPOSE_DATA        = 0x01, /* public: dataset generation; stream = example index     */
    DP_PURPOSE_INIT        = 0x02, /* public: parameter init; stream = parameter index       */
    DP_PURPOSE_DPZO_DIR    = 0x03, /* public: DP-ZO directions; stream = step, lane = param | dir<<16 */
    DP_PURPOSE_ATTACK_DATA = 0x04, /* public: attack / canary data                           */
    DP_PURPOSE_TEST        = 0x05, /* public: test-only inputs                               */
    DP_PURPOSE_NOISE       = 0x81, /* secret: DP-SGD noise; stream = step, lane = param | share<<16 */
    DP_PURPOSE_SAMPLING    = 0x82, /* secret: Poisson sampling; stream = step, element = example */
    DP_PURPOSE_DPZO_NOISE  = 0x83, /* secret: DP-ZO scalar noise; stream = step, element = direction */
    DP_PURPOSE_AUDIT_NOISE = 0x84  /* secret: noise drawn by audits / statistical tests      */
};
#define DP_PURPOSE_IS_SECRET(p) (((p) & 0x80) != 0)

DP_HD dp_philox_key dp_key_from_u64(uint64_t k) {
    dp_philox_key key; key.v[0] = (uint32_t)k; key.v[1] = (uint32_t)(k >> 32); return key;
}

/* Block j of stream (purpose, stream, lane). */
DP_HD dp_philox_ctr dp_stream_block(uint64_t key, uint32_t purpose, uint32_t stream,
                                    uint32_t lane, uint64_t block) {
    dp_philox_ctr c;
    c.v[0] = (uint32_t)block;
    c.v[1] = (uint32_t)(block >> 32);
    c.v[2] = stream;
    c.v[3] = (purpose << 24) | (lane & 0xFFFFFFu);
    return dp_philox4x32_10(c, dp_key_from_u64(key));
}

/* 64-bit word -> double in the open interval (0,1): u = (2j + 1) * 2^-53 with
 * j = w >> 12 (the top 52 bits). Every value is exact (2j+1 < 2^53), u is never 0
 * or 1, and the grid is symmetric: 1 - u is also on it, so u - 1/2 is exact and
 * never 0. (The earlier (w>>11 + 0.5) * 2^-53 rounded to exactly 1.0 for
 * w>>11 = 2^53 - 1, which made the Laplace sampler return infinity; no grid of
 * 2^53 equally spaced points fits strictly inside (0,1) in double, see docs/rng.md.) */
DP_HD double dp_u64_to_open01(uint64_t w) {
    return (double)(((w >> 12) << 1) | 1u) * (1.0 / 9007199254740992.0);
}

/* The 64-bit word of element i: (w0 | w1<<32) for even i, (w2 | w3<<32) for odd i
 * (w0..w3 = the four Philox output words of block i/2). */
DP_HD uint64_t dp_stream_u64(uint64_t key, uint32_t purpose, uint32_t stream, uint32_t lane,
                             uint64_t i) {
    dp_philox_ctr b = dp_stream_block(key, purpose, stream, lane, i >> 1);
    return (i & 1) ? ((uint64_t)b.v[2] | ((uint64_t)b.v[3] << 32))
                   : ((uint64_t)b.v[0] | ((uint64_t)b.v[1] << 32));
}

/* Uniform element i in (0,1). */
DP_HD double dp_stream_uniform(uint64_t key, uint32_t purpose, uint32_t stream, uint32_t lane,
                               uint64_t i) {
    return dp_u64_to_open01(dp_stream_u64(key, purpose, stream, lane, i));
}

/* Box-Muller on one block: u1 from (w0,w1), u2 from (w2,w3), both in (0,1);
 * r = sqrt(-2 ln u1), z0 = r cos(2 pi u2), z1 = r sin(2 pi u2). */
DP_HD void dp_box_muller(dp_philox_ctr b, double *z0, double *z1) {
    double u1 = dp_u64_to_open01((uint64_t)b.v[0] | ((uint64_t)b.v[1] << 32));
    double u2 = dp_u64_to_open01((uint64_t)b.v[2] | ((uint64_t)b.v[3] << 32));
    double r = sqrt(-2.0 * log(u1));
    double a = 6.283185307179586476925286766559 * u2;
    *z0 = r * cos(a);
    *z1 = r * sin(a);
}

/* Standard Gaussian element i: block j = i/2 through dp_box_muller;
 * element 2j = z0 (cosine branch), element 2j+1 = z1 (sine branch). */
DP_HD double dp_stream_gaussian(uint64_t key, uint32_t purpose, uint32_t stream, uint32_t lane,
                                uint64_t i) {
    double z0, z1;
    dp_box_muller(dp_stream_block(key, purpose, stream, lane, i >> 1), &z0, &z1);
    return (i & 1) ? z1 : z0;
}

/* Standard Laplace (scale 1) by inversion of u = dp_u64_to_open01(w):
 * d = u - 1/2 (exact, never 0), x = -sgn(d) ln(1 - 2|d|) (1 - 2|d| is exact and
 * >= 2^-52, so |x| <= 52 ln 2 ~ 36.04). */
DP_HD double dp_laplace_from_u64(uint64_t w) {
    double d = dp_u64_to_open01(w) - 0.5;
    double m = -log(1.0 - 2.0 * fabs(d));
    return d < 0 ? -m : m;
}

/* Standard Laplace element i: dp_laplace_from_u64 of the 64-bit word of element i. */
DP_HD double dp_stream_laplace(uint64_t key, uint32_t purpose, uint32_t stream, uint32_t lane,
                               uint64_t i) {
    return dp_laplace_from_u64(dp_stream_u64(key, purpose, stream, lane, i));
}

#endif

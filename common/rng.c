/* common/rng.c — typed stream constructors and bulk samplers (docs/rng.md). */
#include "rng.h"

#include <math.h>
#include <string.h>

#include <openssl/rand.h>

static const struct { const char *name; uint32_t purpose; } dp_purposes[] = {
    {"data", DP_PURPOSE_DATA},         {"init", DP_PURPOSE_INIT},
    {"dpzo-dir", DP_PURPOSE_DPZO_DIR}, {"attack-data", DP_PURPOSE_ATTACK_DATA},
    {"test", DP_PURPOSE_TEST},         {"noise", DP_PURPOSE_NOISE},
    {"sampling", DP_PURPOSE_SAMPLING}, {"dpzo-noise", DP_PURPOSE_DPZO_NOISE},
    {"audit-noise", DP_PURPOSE_AUDIT_NOISE},
};

uint32_t dp_purpose_from_name(const char *name) {
    for (size_t i = 0; i < sizeof dp_purposes / sizeof dp_purposes[0]; i++)
        if (strcmp(name, dp_purposes[i].name) == 0) return dp_purposes[i].purpose;
    return 0;
}

const char *dp_purpose_name(uint32_t purpose) {
    for (size_t i = 0; i < sizeof dp_purposes / sizeof dp_purposes[0]; i++)
        if (dp_purposes[i].purpose == purpose) return dp_purposes[i].name;
    return "unknown";
}

static dp_status dp_stream_make(dp_stream *out, uint64_t key, uint32_t purpose, uint32_t stream,
                                uint32_t lane, int want_secret) {
    if (strcmp(dp_purpose_name(purpose), "unknown") == 0)
        return dp_error(DP_ERR_INVALID, "unknown RNG purpose tag 0x%02x", purpose);
    if ((DP_PURPOSE_IS_SECRET(purpose) != 0) != (want_secret != 0))
        return dp_error(DP_ERR_INVALID, "RNG purpose '%s' is %s but was keyed by the %s",
                        dp_purpose_name(purpose), DP_PURPOSE_IS_SECRET(purpose) ? "secret" : "public",
                        want_secret ? "secret noise key" : "public seed");
    if (lane >= (1u << 24)) return dp_error(DP_ERR_INVALID, "RNG lane %u does not fit in 24 bits", lane);
    out->key = key;
    out->purpose = purpose;
    out->stream = stream;
    out->lane = lane;
    return DP_OK;
}

dp_status dp_stream_public(dp_stream *out, dp_seed seed, uint32_t purpose, uint32_t stream, uint32_t lane) {
    return dp_stream_make(out, seed.k, purpose, stream, lane, 0);
}

dp_status dp_stream_secret(dp_stream *out, dp_noise_key key, uint32_t purpose, uint32_t stream, uint32_t lane) {
    return dp_stream_make(out, key.k, purpose, stream, lane, 1);
}

uint64_t dp_rng_u64(const dp_stream *s, uint64_t i) {
    return dp_stream_u64(s->key, s->purpose, s->stream, s->lane, i);
}
double dp_rng_uniform(const dp_stream *s, uint64_t i) {
    return dp_stream_uniform(s->key, s->purpose, s->stream, s->lane, i);
}
double dp_rng_gaussian(const dp_stream *s, uint64_t i) {
    return dp_stream_gaussian(s->key, s->purpose, s->stream, s->lane, i);
}
double dp_rng_laplace(const dp_stream *s, uint64_t i) {
    return dp_stream_laplace(s->key, s->purpose, s->stream, s->lane, i);
}

uint64_t dp_rng_below(const dp_stream *s, uint64_t i, uint64_t n) {
    unsigned __int128 p = (unsigned __int128)dp_rng_u64(s, i) * n;
    return (uint64_t)(p >> 64);
}

void dp_rng_fill_uniform(double *out, const dp_stream *s, uint64_t offset, size_t n) {
    for (size_t k = 0; k < n; k++) out[k] = dp_rng_uniform(s, offset + k);
}

/* w[i][j] = word i of block b0 + j of the stream, j < 8: dp_philox4x32_10 eight blocks
 * at a time (32-bit lanes; the same integer arithmetic, so the same words). AVX2 where
 * present, else the scalar function. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
__attribute__((target("avx2"))) static void philox8_avx2(uint32_t w[4][8], const dp_stream *s, uint64_t b0) {
    uint32_t lo[8], hi[8];
    for (int j = 0; j < 8; j++) { lo[j] = (uint32_t)(b0 + (uint64_t)j); hi[j] = (uint32_t)((b0 + (uint64_t)j) >> 32); }
    __m256i c0 = _mm256_loadu_si256((const __m256i *)lo), c1 = _mm256_loadu_si256((const __m256i *)hi);
    __m256i c2 = _mm256_set1_epi32((int)s->stream), c3 = _mm256_set1_epi32((int)((s->purpose << 24) | (s->lane & 0xFFFFFFu)));
    uint32_t k0 = (uint32_t)s->key, k1 = (uint32_t)(s->key >> 32);
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
        __m256i e0 = _mm256_mul_epu32(c0, m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
        __m256i e1 = _mm256_mul_epu32(c2, m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
        __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
        __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
        __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
        __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
        __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    }
    _mm256_storeu_si256((__m256i *)w[0], c0);
    _mm256_storeu_si256((__m256i *)w[1], c1);
    _mm256_storeu_si256((__m256i *)w[2], c2);
    _mm256_storeu_si256((__m256i *)w[3], c3);
}
#define DP_RNG_X86 1
#else
#define DP_RNG_X86 0
#endif
static void philox8(uint32_t w[4][8], const dp_stream *s, uint64_t b0) {
#if DP_RNG_X86
    static int avx2 = -1; /* a benign race: every thread computes the same value */
    if (avx2 < 0) avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (avx2) { philox8_avx2(w, s, b0); return; }
#endif
    for (int j = 0; j < 8; j++) {
        dp_philox_ctr b = dp_stream_block(s->key, s->purpose, s->stream, s->lane, b0 + (uint64_t)j);
        for (int i = 0; i < 4; i++) w[i][j] = b.v[i];
    }
}

void dp_rng_fill_gaussian(double *out, const dp_stream *s, uint64_t offset, size_t n) {
    /* Same values as dp_rng_gaussian element by element; one Philox block per pair,
     * eight blocks at a time (philox8), then Box-Muller per block (libm, docs/rng.md). */
    size_t k = 0;
    if (n && (offset & 1)) { out[k++] = dp_rng_gaussian(s, offset); }
    for (; k + 16 <= n; k += 16) {
        uint32_t w[4][8];
        philox8(w, s, (offset + k) >> 1);
        for (int j = 0; j < 8; j++) {
            dp_philox_ctr b = {{w[0][j], w[1][j], w[2][j], w[3][j]}};
            dp_box_muller(b, &out[k + 2 * (size_t)j], &out[k + 2 * (size_t)j + 1]);
        }
    }
    for (; k + 1 < n; k += 2) {
        uint64_t i = offset + k;
        dp_box_muller(dp_stream_block(s->key, s->purpose, s->stream, s->lane, i >> 1), &out[k], &out[k + 1]);
    }
    if (k < n) out[k] = dp_rng_gaussian(s, offset + k);
}

void dp_rng_fill_laplace(double *out, const dp_stream *s, uint64_t offset, size_t n) {
    for (size_t k = 0; k < n; k++) out[k] = dp_rng_laplace(s, offset + k);
}

dp_status dp_noise_key_random(dp_noise_key *out) {
    unsigned char b[8];
    if (RAND_bytes(b, sizeof b) != 1) return dp_error(DP_ERR_INTERNAL, "OpenSSL RAND_bytes failed");
    uint64_t k = 0;
    for (int i = 0; i < 8; i++) k |= (uint64_t)b[i] << (8 * i);
    out->k = k;
    return DP_OK;
}

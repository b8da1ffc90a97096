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

void dp_rng_fill_gaussian(double *out, const dp_stream *s, uint64_t offset, size_t n) {
    /* Same values as dp_rng_gaussian element by element; one Philox block per pair. */
    size_t k = 0;
    if (n && (offset & 1)) { out[k++] = dp_rng_gaussian(s, offset); }
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

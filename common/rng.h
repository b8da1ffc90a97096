/* common/rng.h — typed keys and streams over the Philox layout of philox.h.
 *
 * Two keys, never derived from one another (docs/rng.md):
 *   dp_seed       the public seed: keys data, init, DP-ZO directions, attack data;
 *   dp_noise_key  the secret noise key: keys DP noise and Poisson sampling.
 * They are distinct types, so passing the public seed where a secret stream is
 * built does not compile; dp_stream_public/secret also check the purpose's class. */
#ifndef DP_RNG_H
#define DP_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "philox.h"
#include "status.h"

typedef struct { uint64_t k; } dp_seed;
typedef struct { uint64_t k; } dp_noise_key;

typedef struct {
    uint64_t key;
    uint32_t purpose, stream, lane;
} dp_stream;

/* Fails with DP_ERR_INVALID if the purpose is secret (resp. public) or lane >= 2^24. */
dp_status dp_stream_public(dp_stream *out, dp_seed seed, uint32_t purpose, uint32_t stream, uint32_t lane);
dp_status dp_stream_secret(dp_stream *out, dp_noise_key key, uint32_t purpose, uint32_t stream, uint32_t lane);

uint64_t dp_rng_u64(const dp_stream *s, uint64_t i);
double dp_rng_uniform(const dp_stream *s, uint64_t i);   /* (0,1) */
double dp_rng_gaussian(const dp_stream *s, uint64_t i);  /* N(0,1) */
/* The largest |x| dp_rng_gaussian can return (docs/rng.md): the Box-Muller radius at
 * u1 = 2^-53, sqrt(-2 ln 2^-53) = sqrt(106 ln 2). */
#define DP_RNG_GAUSS_MAX 8.571674348652905
double dp_rng_laplace(const dp_stream *s, uint64_t i);   /* Laplace(0,1) */
/* Integer in [0, n) from the 64-bit word of element i: floor(w * n / 2^64). */
uint64_t dp_rng_below(const dp_stream *s, uint64_t i, uint64_t n);

/* out[k] = element (offset + k), k < n. */
void dp_rng_fill_uniform(double *out, const dp_stream *s, uint64_t offset, size_t n);
void dp_rng_fill_gaussian(double *out, const dp_stream *s, uint64_t offset, size_t n);
void dp_rng_fill_laplace(double *out, const dp_stream *s, uint64_t offset, size_t n);

/* A fresh secret key from OpenSSL's RAND_bytes (never printed unless asked). */
dp_status dp_noise_key_random(dp_noise_key *out);

/* Purpose names used on the command line and in docs: "data", "init",
 * "dpzo-dir", "attack-data", "test", "noise", "sampling", "dpzo-noise",
 * "audit-noise". Returns 0 for an unknown name. */
uint32_t dp_purpose_from_name(const char *name);
const char *dp_purpose_name(uint32_t purpose);

#endif

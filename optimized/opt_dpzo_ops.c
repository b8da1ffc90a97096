/* optimized/opt_dpzo_ops.c — the engine's DP-ZO pieces, written from docs/dpzo.md:
 * the hyperparameter check, directions, the noise of a step, clipping, the released
 * scalars, the public update and the SHA-256 of theta. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/cli.h"
#include "common/alloc.h"
#include "common/hash.h"
#include "optimized/opt_spec.h"

/* Largest |x| of the samplers (docs/dpzo.md "Hyperparameters whose computation cannot be
 * finite", docs/rng.md): Box-Muller at u1 = 2^-53 gives sqrt(-2 ln 2^-53); the Laplace
 * inversion of a 52-bit uniform gives 52 ln 2. */
#define OPT_GAUSS_ABS_MAX 8.571674348652905
#define OPT_LAPLACE_ABS_MAX 36.04365338911715

static double denominator(const dp_dpzo_hparams *hp) { return ((hp->q * (double)hp->n_data) * 2.0) * hp->phi; }

/* The scale of Z_j: sigma C sqrt(n) (Gaussian) or sigma C n (Laplace). */
static double noise_scale(const dp_dpzo_hparams *hp) {
    double sc = hp->sigma * hp->clip;
    return hp->mech == DP_DPZO_GAUSSIAN ? sc * sqrt((double)hp->n_spsa) : sc * (double)hp->n_spsa;
}

dp_status opt_dpzo_check(const dp_dpzo_hparams *hp) {
    if (hp->n_data < 1) return dp_error(DP_ERR_INVALID, "--dataset-size must be >= 1 (got %" PRId64 ")", hp->n_data);
    if (hp->steps < 1 || hp->steps > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "--steps must be in [1, 2^32 - 1] (got %" PRId64 ")", hp->steps);
    if (hp->n_spsa < 1 || hp->n_spsa > DP_DPZO_MAX_N)
        return dp_error(DP_ERR_INVALID, "--n-spsa must be in [1, %d] (got %d)", DP_DPZO_MAX_N, hp->n_spsa);
    if (hp->mech != DP_DPZO_GAUSSIAN && hp->mech != DP_DPZO_LAPLACE)
        return dp_error(DP_ERR_INVALID, "--noise must be gaussian or laplace");
    struct { const char *opt; double v; int zero_ok; } pos[] = {
        {"--clip", hp->clip, 0}, {"--sigma", hp->sigma, 1}, {"--phi", hp->phi, 0},
        {"--lr", hp->lr, 1},     {"--weight-decay", hp->weight_decay, 1}};
    DP_TRY(dp_check_range("--q", hp->q, 0.0, 0, 1.0, 1));
    for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) DP_TRY(dp_check_min(pos[k].opt, pos[k].v, 0.0, pos[k].zero_ok));
    double den = denominator(hp);
    if (!isfinite(den) || den < DBL_MIN)
        return dp_error(DP_ERR_INVALID, "--q, --dataset-size and --phi: (q N) 2 phi = %g is not a normal finite number", den);
    if (!isfinite(hp->phi * OPT_GAUSS_ABS_MAX))
        return dp_error(DP_ERR_INVALID, "--phi %g: phi z overflows for |z| = %g", hp->phi, OPT_GAUSS_ABS_MAX);
    double zmax = noise_scale(hp) * (hp->mech == DP_DPZO_GAUSSIAN ? OPT_GAUSS_ABS_MAX : OPT_LAPLACE_ABS_MAX);
    if (!isfinite(((double)hp->n_data * hp->clip + zmax) / den))
        return dp_error(DP_ERR_INVALID, "--clip, --sigma, --phi, --q and --dataset-size allow a released scalar "
                        "(N C + max|Z|) / ((q N) 2 phi) that is not finite");
    return DP_OK;
}

dp_status opt_dpzo_direction(double *z, dp_seed seed, int64_t step, int p, int j, int64_t numel) {
    if (p < 0 || p >= DP_DPZO_MAX_PARAMS || j < 0 || j >= DP_DPZO_MAX_N || step < 1 || step > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "DP-ZO direction (step %" PRId64 ", parameter %d, direction %d) out of range",
                        step, p, j);
    dp_stream s;
    DP_TRY(dp_stream_public(&s, seed, DP_PURPOSE_DPZO_DIR, (uint32_t)step, (uint32_t)p | (uint32_t)j << 16));
    dp_rng_fill_gaussian(z, &s, 0, (size_t)numel);
    return DP_OK;
}

dp_status opt_dpzo_noise(double *noise, const dp_dpzo_hparams *hp, int64_t step) {
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "DP-ZO noise: step %" PRId64 " out of range", step);
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, hp->key, DP_PURPOSE_DPZO_NOISE, (uint32_t)step, 0));
    if (hp->mech == DP_DPZO_GAUSSIAN) dp_rng_fill_gaussian(noise, &s, 0, (size_t)hp->n_spsa);
    else dp_rng_fill_laplace(noise, &s, 0, (size_t)hp->n_spsa);
    double scale = noise_scale(hp);
    for (int j = 0; j < hp->n_spsa; j++) noise[j] = scale * noise[j];
    return DP_OK;
}

double opt_dpzo_clip(double d, double c) { return fmin(fmax(d, -c), c); }

dp_status opt_dpzo_scalars(double *scalar, const dp_dpzo_hparams *hp, const double *sum, const double *noise,
                           int64_t step) {
    double den = denominator(hp);
    for (int j = 0; j < hp->n_spsa; j++) {
        scalar[j] = (sum[j] + noise[j]) / den;
        if (!isfinite(scalar[j]))
            return dp_error(DP_ERR_INVALID, "step %" PRId64 ", direction %d: released scalar not finite (sum %g, noise %g, "
                            "(q N) 2 phi %g): --clip, --sigma, --phi or --q too extreme", step, j, sum[j], noise[j], den);
    }
    return DP_OK;
}

double **opt_f64_arrays_alloc(const int64_t *numel, int nparams) {
    double **a = dp_calloc((size_t)(nparams > 0 ? nparams : 1), sizeof *a);
    for (int p = 0; a && p < nparams; p++)
        if (!(a[p] = dp_calloc((size_t)(numel[p] > 0 ? numel[p] : 1), sizeof(double)))) { opt_f64_arrays_free(a, p); a = NULL; }
    return a;
}

void opt_f64_arrays_free(double **a, int nparams) {
    for (int p = 0; a && p < nparams; p++) dp_free(a[p]);
    dp_free(a);
}

/* x rounded to f32 when f32 != 0 (else unchanged). Every operand below is an f32 value
 * in that case, and one f64 operation (+, -, *, /) on two f32 values followed by this
 * rounding gives the correctly rounded f32 result (53 >= 2 * 24 + 2 bits), so this is
 * the f32 arithmetic of the mixed-precision update (docs/precision.md "DP-ZO"). */
static double r32(double x, int f32) { return f32 ? (double)(float)x : x; }

/* Direction-major: u accumulates s_j z_j over all parameters for j = 0, 1, ... (per
 * element the order is j ascending, as docs/dpzo.md step 3), then theta is updated.
 * f32: every value rounded to f32 after each operation (the master weights of a
 * bf16/fp16 run); half_round (test-only bug master-half): the result rounded again
 * to the half type. */
static dp_status update_impl(double *const *theta, const int64_t *numel, int nparams, dp_seed seed, int64_t step,
                             const double *scalar, int n, double lr, double weight_decay, int f32,
                             float (*half_round)(float)) {
    if (n < 1 || n > DP_DPZO_MAX_N) return dp_error(DP_ERR_INVALID, "DP-ZO update: n-spsa %d out of range", n);
    double **u = opt_f64_arrays_alloc(numel, nparams), **z = opt_f64_arrays_alloc(numel, nparams);
    dp_status st = u && z ? DP_OK : dp_error(DP_ERR_NOMEM, "DP-ZO update: out of memory");
    const double lr_ = r32(lr, f32), wd_ = r32(weight_decay, f32), n_ = (double)n;
    for (int j = 0; st == DP_OK && j < n; j++)
        for (int p = 0; st == DP_OK && p < nparams; p++) {
            st = opt_dpzo_direction(z[p], seed, step, p, j, numel[p]);
            const double sj = r32(scalar[j], f32);
            for (int64_t e = 0; st == DP_OK && e < numel[p]; e++)
                u[p][e] = r32(u[p][e] + r32(sj * r32(z[p][e], f32), f32), f32);
        }
    for (int p = 0; st == DP_OK && p < nparams; p++)
        for (int64_t e = 0; e < numel[p]; e++) {
            double th = theta[p][e];
            double t = r32(th - r32(lr_ * r32(r32(u[p][e] / n_, f32) + r32(wd_ * th, f32), f32), f32), f32);
            if (half_round) t = (double)half_round((float)t);
            if (!isfinite(t)) {
                st = dp_error(DP_ERR_INVALID, "step %" PRId64 ": parameter %d element %" PRId64 " becomes non-finite in "
                              "the update (lr %g, weight decay %g, s_0 %g): --lr, --phi, --clip, --sigma or "
                              "--weight-decay overflow", step, p, e, lr, weight_decay, scalar[0]);
                break;
            }
            theta[p][e] = t;
        }
    opt_f64_arrays_free(u, nparams);
    opt_f64_arrays_free(z, nparams);
    return st;
}

dp_status opt_dpzo_update(double *const *theta, const int64_t *numel, int nparams, dp_seed seed, int64_t step,
                          const double *scalar, int n, double lr, double weight_decay) {
    return update_impl(theta, numel, nparams, seed, step, scalar, n, lr, weight_decay, 0, NULL);
}

dp_status opt_dpzo_update_f32(double *const *theta, const int64_t *numel, int nparams, dp_seed seed, int64_t step,
                              const double *scalar, int n, double lr, double weight_decay, float (*half_round)(float)) {
    return update_impl(theta, numel, nparams, seed, step, scalar, n, lr, weight_decay, 1, half_round);
}

dp_status opt_theta_sha256(char hex[65], double *const *theta, const int64_t *numel, int nparams) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        return dp_error(DP_ERR_INTERNAL, "SHA-256 of theta: OpenSSL digest unavailable");
    }
    unsigned char chunk[8 * 512]; /* little-endian bytes of up to 512 doubles */
    int ok = 1;
    for (int p = 0; ok && p < nparams; p++)
        for (int64_t e0 = 0; ok && e0 < numel[p]; e0 += 512) {
            int64_t len = numel[p] - e0 < 512 ? numel[p] - e0 : 512;
            for (int64_t k = 0; k < len; k++) {
                uint64_t bits;
                memcpy(&bits, &theta[p][e0 + k], sizeof bits);
                for (int byte = 0; byte < 8; byte++) chunk[8 * k + byte] = (unsigned char)(bits >> (8 * byte));
            }
            ok = EVP_DigestUpdate(ctx, chunk, (size_t)(8 * len)) == 1;
        }
    unsigned char md[DP_SHA256_LEN];
    unsigned int mdlen = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == DP_SHA256_LEN;
    EVP_MD_CTX_free(ctx);
    if (!ok) return dp_error(DP_ERR_INTERNAL, "SHA-256 of theta: OpenSSL digest failed");
    dp_hex(hex, md, DP_SHA256_LEN);
    return DP_OK;
}

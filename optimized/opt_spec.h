/* optimized/opt_spec.h — the engine's own implementation of the pieces of the
 * specification that the reference also implements (docs/engine.md "Independence
 * from the reference"): Poisson sampling, clipping groups, per-example norms and
 * clip factors, the DP-SGD and DP-ZO configuration checks, and DP-ZO's directions,
 * clipping, noise, released scalars, public update and theta digest.
 *
 * Written from docs/dpsgd.md, docs/dpzo.md and docs/rng.md, not from reference/:
 * the engine is the candidate the reference checks, so a bug on either side must
 * show up as a disagreement (optimized/tests/test_spec_independent.c). The two
 * sides share only Philox (common/philox.h, common/rng.h) and the plain data
 * structures (configs, groups, models, step outputs).
 *
 * The DP-SGD functions have exactly the parameter lists of the reference functions
 * they replace (ref_dpsgd_poisson -> opt_poisson, ref_clip_groups_make/free ->
 * opt_clip_groups_make/free, ref_norms_double -> opt_norms_double, ref_clip_factor ->
 * opt_clip_factor, ref_dpsgd_config_check -> opt_dpsgd_config_check). */
#ifndef OPT_SPEC_H
#define OPT_SPEC_H

#include <stdint.h>

#include "common/rng.h"
#include "common/status.h"
#include "common/spec_dpsgd.h"
#include "common/spec_dpzo.h"

/* ---- sampling (opt_sampling.c) ---- */
/* The Poisson batch of step `step` (1-based, < 2^32): idx[0..*b) = the ascending
 * i < n with uniform(SAMPLING, key, stream step, lane 0, element i) < q (strict);
 * idx must hold n entries. Drawn in blocks of Philox elements. */
dp_status opt_poisson(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n);

/* ---- DP-SGD clipping (opt_clip.c) ---- */
/* Every range of docs/dpsgd.md "Command" (messages name the option). */
dp_status opt_dpsgd_config_check(const dp_dpsgd_config *c);
/* Clipping groups of docs/dpsgd.md "Clipping groups": flat, per-layer tensor|block
 * (blocks recognised by parameter name), explicit thresholds, group globs; C_total. */
dp_status opt_clip_groups_make(dp_clip_groups *g, const dp_dpsgd_config *c, const dp_model *m);
void opt_clip_groups_free(dp_clip_groups *g);
/* abadi: 1 when norm <= thresh, else thresh / norm; automatic: thresh / (norm + gamma). */
double opt_clip_factor(dp_clip_fn fn, double norm, double thresh, double gamma);
/* Norms of one example (docs/dpsgd.md step 4): gnorm[G] and the total norm, each the
 * sqrt of a Neumaier sum of squares (parameters in order, elements in order); for a
 * finite example (finite = 1) a non-finite sum is replaced by the scaled form
 * s sqrt(NS((x/s)^2)), s = max |x|. Only m->nparams and m->params[p].numel are read. */
dp_status opt_norms_double(double *norm, double *gnorm, const dp_model *m, const dp_clip_groups *g,
                           double *const *gi, int finite);

/* ---- DP-ZO (opt_dpzo_ops.c) ---- */
/* Every range of docs/dpzo.md, including the finiteness of the denominator, of
 * phi * max|z| and of the worst-case released scalar. */
dp_status opt_dpzo_check(const dp_dpzo_hparams *hp);
/* z[e] = gaussian(DPZO_DIR, seed, stream step, lane p | j << 16, element e), e < numel. */
dp_status opt_dpzo_direction(double *z, dp_seed seed, int64_t step, int p, int j, int64_t numel);
/* noise[j] = Z_j for j < n_spsa: the scaled Gaussian or Laplace elements 0..n-1 of
 * DPZO_NOISE(key, stream step, lane 0). */
dp_status opt_dpzo_noise(double *noise, const dp_dpzo_hparams *hp, int64_t step);
/* clip(d, [-C, C]) for a finite d. */
double opt_dpzo_clip(double d, double c);
/* scalar[j] = (sum[j] + noise[j]) / (((q N) 2) phi), j < n_spsa; DP_ERR_INVALID if one
 * is not finite. */
dp_status opt_dpzo_scalars(double *scalar, const dp_dpzo_hparams *hp, const double *sum, const double *noise,
                           int64_t step);
/* theta <- theta - lr (u / n + wd theta), u[p][e] = sum over j ascending of s_j z_j[p][e]
 * (directions regenerated from the seed); DP_ERR_INVALID if an element becomes non-finite. */
dp_status opt_dpzo_update(double *const *theta, const int64_t *numel, int nparams, dp_seed seed, int64_t step,
                          const double *scalar, int n, double lr, double weight_decay);
/* The same update in f32 arithmetic (theta, scalar: f32 values held in doubles; every
 * operation rounded to f32; docs/precision.md "DP-ZO"), for the f32 master weights of
 * --precision bf16|fp16; half_round != NULL (test-only bug master-half) rounds the result
 * to the half type. */
dp_status opt_dpzo_update_f32(double *const *theta, const int64_t *numel, int nparams, dp_seed seed, int64_t step,
                              const double *scalar, int n, double lr, double weight_decay, float (*half_round)(float));
/* SHA-256 (hex) of theta's little-endian f64 bytes, parameters in order (streamed). */
dp_status opt_theta_sha256(char hex[65], double *const *theta, const int64_t *numel, int nparams);

/* [nparams][numel[p]] zeroed f64 arrays (NULL when out of memory), and their release. */
double **opt_f64_arrays_alloc(const int64_t *numel, int nparams);
void opt_f64_arrays_free(double **a, int nparams);

#endif

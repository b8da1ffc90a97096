/* reference/dpzo.h — the exact CPU reference of DP-ZO (docs/dpzo.md):
 * zeroth-order DP fine-tuning that privatizes one scalar per direction and step
 * (Tang et al., "Private fine-tuning of LLMs with zeroth-order optimization",
 * Algorithms 1 and 2).
 *
 * Step t (t = 1..K, the integer t is the RNG stream id of every stream below):
 *   batch      B_t = { i < N : uniform(SAMPLING, key, stream t, lane 0, element i) < q }
 *   direction  z_j[p][e] = gaussian(DPZO_DIR, seed, stream t, lane p | j<<16, element e)
 *   per example l_ij = clip(L_i(theta + phi z_j) - L_i(theta - phi z_j), [-C, C])
 *   noise      Z_j = sigma C sqrt(n) g_j (Gaussian)  or  sigma C n l_j (Laplace),
 *              g_j / l_j = gaussian / laplace(DPZO_NOISE, key, stream t, lane 0, element j)
 *   release    s_j = (sum_i l_ij + Z_j) / ((q N) 2 phi)
 *   update     theta <- theta - lr ((sum_j s_j z_j) / n + wd theta)
 * The reference evaluates the losses on f64 copies theta +- phi z_j, so theta
 * never drifts; ref_dpzo_inplace_* is Algorithm 2 (perturb in place) in f32/bf16. */
#ifndef REF_DPZO_H
#define REF_DPZO_H

#include <stdint.h>
#include <stdio.h>

#include "common/rng.h"
#include "common/status.h"
#include "common/cli.h"
#include "common/spec_dpzo.h"
#include "common/tensor.h"
#include "reference/model.h"
#include "reference/model_cli.h"

/* The hyperparameter and step-output structures, the option table and the export writer
 * are the neutral module common/spec_dpzo.h; the ref_ names are its aliases. */
#define REF_DPZO_MAX_N DP_DPZO_MAX_N
#define REF_DPZO_MAX_PARAMS DP_DPZO_MAX_PARAMS
typedef dp_dpzo_mech ref_dpzo_mech;
#define REF_DPZO_GAUSSIAN DP_DPZO_GAUSSIAN
#define REF_DPZO_LAPLACE DP_DPZO_LAPLACE
typedef dp_dpzo_hparams ref_dpzo_hparams;
typedef dp_dpzo_step_out ref_dpzo_step_out;
#define ref_dpzo_step_out_alloc dp_dpzo_step_out_alloc
#define ref_dpzo_step_out_free dp_dpzo_step_out_free
typedef dp_dpzo_cli ref_dpzo_cli;
#define REF_DPZO_NOPTS DP_DPZO_NOPTS
#define REF_DPZO_KEY_EXPORTED DP_DPZO_KEY_EXPORTED
#define ref_dpzo_cli_init dp_dpzo_cli_init
#define ref_dpzo_cli_add_opts dp_dpzo_cli_add_opts
#define ref_dpzo_mech_name dp_dpzo_mech_name
#define ref_dpzo_export_write dp_dpzo_export_write
#define ref_dpzo_print_step dp_dpzo_print_step


/* Checks every field; messages name the command-line option (--phi must be > 0 ...). */
dp_status ref_dpzo_check(const ref_dpzo_hparams *hp);

/* What the algorithm needs of a model: the trainable tensors as flat f64 arrays
 * and the per-example loss at arbitrary parameters. */
typedef dp_status (*ref_dpzo_loss_fn)(double *loss, void *ctx, double *const *params, int64_t i);
typedef struct {
    int nparams;
    int64_t *numel;       /* [nparams]                                   */
    double **theta;       /* [nparams][numel[p]], updated in place by a step */
    ref_dpzo_loss_fn loss;
    void *ctx;
} ref_dpzo_problem;

/* A problem over a reference model and dataset (theta aliases m's parameters;
 * numel is allocated, free with ref_dpzo_problem_free). */
typedef struct { ref_model *m; const ref_dataset *d; } ref_dpzo_model_ctx;
dp_status ref_dpzo_problem_model(ref_dpzo_problem *pb, ref_dpzo_model_ctx *ctx, ref_model *m,
                                 const ref_dataset *d);
void ref_dpzo_problem_free(ref_dpzo_problem *pb);

/* ---- the RNG conventions ---- */
/* z[e] = N(0,1) element e of DPZO_DIR(seed), stream = step, lane = p | j << 16; e < numel. */
dp_status ref_dpzo_direction(double *z, dp_seed seed, int64_t step, int p, int j, int64_t numel);
/* Poisson batch of step `step`: idx[0..*b) increasing (idx holds n entries). */
dp_status ref_dpzo_poisson(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n);
/* The noise Z_j added to the clipped sum of direction j (scale included). */
dp_status ref_dpzo_noise(double *noise, const ref_dpzo_hparams *hp, int64_t step, int j);
/* (q N) 2 phi, evaluated as ((q * N) * 2.0) * phi. */
double ref_dpzo_denominator(const ref_dpzo_hparams *hp);
/* clip(d, [-C, C]); d must be finite (a non-finite difference is dropped by the caller). */
double ref_dpzo_clip(double d, double c);
/* Largest |x| the samplers can return (docs/rng.md): Laplace 52 ln 2, Gaussian
 * sqrt(-2 ln 2^-53) = sqrt(106 ln 2) (Box-Muller radius at u1 = 2^-53). */
#define REF_DPZO_LAPLACE_MAX 36.04365338911715
#define REF_DPZO_GAUSS_MAX DP_RNG_GAUSS_MAX /* common/rng.h */
/* Worst-case |s_j| over every batch and noise draw: (N C + max|Z_j|) / ((q N) 2 phi). */
double ref_dpzo_scalar_bound(const ref_dpzo_hparams *hp);
/* delta of the implemented (truncated) Laplace sampler per step (docs/dpzo.md):
 * q n 2^-53 e^(1/sigma) (inf when sigma = 0). */
double ref_dpzo_laplace_delta_impl(double q, double sigma, int n);
/* Pure-epsilon of one Laplace step, log(1 + q (e^(1/sigma) - 1)) (inf when sigma = 0). */
double ref_dpzo_laplace_eps0(double q, double sigma);

/* ---- one step ---- */

/* The privatized part of step t: batch, losses, clipping, noise, released scalars.
 * theta is not modified. */
dp_status ref_dpzo_release(ref_dpzo_step_out *out, const ref_dpzo_problem *pb, const ref_dpzo_hparams *hp,
                           int64_t step);
/* The public part: theta <- theta - lr ((sum_j s_j z_j) / n + wd theta), z regenerated
 * from (seed, step). Used by the step and by replay. */
dp_status ref_dpzo_update(double *const *theta, const int64_t *numel, int nparams, dp_seed seed, int64_t step,
                          const double *scalar, int n, double lr, double weight_decay);
/* release + update. */
dp_status ref_dpzo_step(ref_dpzo_step_out *out, ref_dpzo_problem *pb, const ref_dpzo_hparams *hp, int64_t step);

/* ---- update log (docs/dpzo.md): a text file, scalars as C99 hex floats ---- */
/* The model configuration as one line of tokens ("mlp in 16 hidden 32,32 classes 10" or
 * "llama vocab .. norm_eps %a"); written to and compared against the log. */
dp_status ref_dpzo_model_desc(char *buf, size_t cap, const ref_model_config *mc);
/* theta0_hex: ref_dpzo_theta_sha256 of theta_0. */
dp_status ref_dpzo_log_header(FILE *f, const ref_dpzo_hparams *hp, const ref_model_config *mc, const char *theta0_hex,
                              int64_t total_params);
dp_status ref_dpzo_log_step(FILE *f, const ref_dpzo_hparams *hp, int64_t step, const double *scalar);
/* The end record "end steps T sha256 H" (H: SHA-256 of all bytes before it, body[0..body_len):
 * what f has written so far); a log without it, or whose bytes do not match it, is refused. */
dp_status ref_dpzo_log_end(FILE *f, const void *body, size_t body_len, int64_t nsteps);
typedef struct {
    dp_seed seed;
    int n_spsa;
    double lr, weight_decay;
    int64_t total_params;
    char theta0[65];       /* SHA-256 of theta_0 (hex) */
    char model[512];       /* ref_dpzo_model_desc of the training run */
    double q, clip, sigma, phi; /* for the record */
    ref_dpzo_mech mech;
    int64_t n_data;
    int64_t nsteps;
    int64_t *step;   /* [nsteps] */
    double *scalar;  /* [nsteps][n_spsa] */
} ref_dpzo_log;
dp_status ref_dpzo_log_read(ref_dpzo_log *log, const char *path);
/* The same from a file image img[0..n) (the fuzz target's entry); `name` for messages. */
dp_status ref_dpzo_log_parse(ref_dpzo_log *log, const uint8_t *img, size_t n, const char *name);
void ref_dpzo_log_free(ref_dpzo_log *log);

/* ---- Algorithm 2: in-place perturbation in a low-precision storage dtype ---- */
typedef enum { REF_DPZO_F32 = 0, REF_DPZO_BF16 = 1 } ref_dpzo_store;
typedef struct {
    ref_dpzo_store dtype;
    int nparams;
    int64_t *numel;   /* [nparams] */
    float **w32;      /* f32 storage (dtype F32) */
    uint16_t **w16;   /* bf16 storage (dtype BF16) */
    double **wide;    /* [nparams][numel] exact widening of the storage (loss evaluation) */
} ref_dpzo_inplace;
dp_status ref_dpzo_inplace_init(ref_dpzo_inplace *ip, ref_dpzo_store dt, const ref_dpzo_problem *pb);
void ref_dpzo_inplace_free(ref_dpzo_inplace *ip);
/* Storage value of element e of parameter p, widened to double. */
double ref_dpzo_inplace_get(const ref_dpzo_inplace *ip, int p, int64_t e);
/* Unit roundoff of one in-place operation (docs/dpzo.md, "Drift bound"). */
double ref_dpzo_inplace_unit(ref_dpzo_store dt);
/* One step of Algorithm 2 on the storage: same batch and noise as the exact step
 * (same key and step), losses at the perturbed storage. If `force_scalar` is not
 * NULL the update uses those [n] scalars instead of its own (to isolate rounding).
 * restore_drift = max_e |w after +phi z, -2 phi z, +phi z  -  w before| over the
 * step; restore_violations counts elements beyond the derived bound. */
dp_status ref_dpzo_inplace_step(ref_dpzo_step_out *out, double *restore_drift, int64_t *restore_violations,
                                ref_dpzo_inplace *ip, const ref_dpzo_problem *pb, const ref_dpzo_hparams *hp,
                                int64_t step, const double *force_scalar);

/* Internal pieces shared by the exact and in-place steps (not an interface). */
dp_status ref_dpzo_release_losses_(double *out, const ref_dpzo_problem *pb, double *const *params, const int64_t *idx,
                                   int64_t b);
dp_status ref_dpzo_finish_direction_(ref_dpzo_step_out *out, const ref_dpzo_hparams *hp, int64_t step, int j);
/* s = (sum + noise) / denominator, DP_ERR_INVALID naming the hyperparameters if not finite. */
dp_status ref_dpzo_scalar_(double *s, const ref_dpzo_hparams *hp, double sum, double noise, int64_t step, int j);
void ref_dpzo_finish_loss_(ref_dpzo_step_out *out);

/* SHA-256 of the little-endian f64 bytes of theta, parameters in order, as 64 hex chars. */
dp_status ref_dpzo_theta_sha256(char hex[65], double *const *theta, const int64_t *numel, int nparams);

/* Per-parameter scratch arrays [nparams][numel[p]] of zeros (NULL when out of memory). */
double **ref_dpzo_arrays_alloc(const int64_t *numel, int nparams);
void ref_dpzo_arrays_free(double **a, int nparams);

/* The option table's parsing (common/spec_dpzo.h) checked by ref_dpzo_check. */
dp_status ref_dpzo_cli_finish(ref_model_config *mc, ref_dpzo_hparams *hp, const ref_dpzo_cli *c);
dp_status ref_dpzo_cli_dataset(ref_dataset *d, ref_dpzo_hparams *hp, const ref_model_config *mc,
                               const ref_dpzo_cli *c);
/* The export set of common/spec_dpzo.h with the reference's directions (ref_dpzo_direction). */
dp_status ref_dpzo_export_set(dp_tensor_set *ts, const ref_model *m, const ref_dpzo_hparams *hp, int key_given,
                              int data_file, double *const *before, double *const *after, const ref_dpzo_step_out *o);


/* `dpcert reference dpzo ...` */
int dp_cmd_reference_dpzo(int argc, char **argv);

#endif

/* common/spec_dpzo.h — DP-ZO's neutral plumbing, included by the reference
 * (reference/dpzo.h) and the engine (optimized/dpzo.h): the hyperparameter and step-output
 * structures, the option table and its parsing, the export set and writer (docs/dpzo.md
 * "Exports") and the per-step log line. Nothing here computes a DP quantity: the
 * hyperparameter check and the directions are passed in by each side. Depends on common/
 * only; the reference's names (ref_dpzo_hparams, ...) remain as aliases in reference/dpzo.h. */
#ifndef DP_SPEC_DPZO_H
#define DP_SPEC_DPZO_H

#include <stddef.h>
#include <stdint.h>

#include "common/cli.h"
#include "common/rng.h"
#include "common/spec_model.h"
#include "common/status.h"
#include "common/tensor.h"

#define DP_DPZO_MAX_N 256        /* direction index j < 2^8 (lane = p | j << 16) */
#define DP_DPZO_MAX_PARAMS 65536 /* parameter index p < 2^16                      */

typedef enum { DP_DPZO_GAUSSIAN = 0, DP_DPZO_LAPLACE = 1 } dp_dpzo_mech;

typedef struct {
    int64_t n_data;      /* N, dataset size                          */
    double q;            /* Poisson sampling rate, (0, 1]             */
    int64_t steps;       /* K >= 1                                    */
    double clip;         /* C > 0                                     */
    double sigma;        /* noise multiplier >= 0                     */
    dp_dpzo_mech mech;  /* Gaussian or Laplace                       */
    double phi;          /* perturbation scale > 0                    */
    double lr;           /* learning rate eta >= 0                    */
    double weight_decay; /* lambda >= 0 (Algorithm 2, MeZO form)      */
    int n_spsa;          /* directions per step, 1..DP_DPZO_MAX_N     */
    dp_seed seed;        /* public: init, data, directions            */
    dp_noise_key key;    /* secret: sampling and noise                */
} dp_dpzo_hparams;

typedef struct {
    int64_t step;          /* t, 1-based                                      */
    int n;                 /* directions                                      */
    int64_t b;             /* |B_t|                                           */
    int64_t *idx;          /* [b] increasing example indices                  */
    double *loss_plus;     /* [n][b] L_i(theta + phi z_j)                     */
    double *loss_minus;    /* [n][b] L_i(theta - phi z_j)                     */
    double *diff_clipped;  /* [n][b] clip(loss_plus - loss_minus)             */
    double *sum;           /* [n] sum of diff_clipped over the batch, in idx order */
    double *noise;         /* [n] Z_j                                         */
    double *scalar;        /* [n] released s_j                                */
    int64_t ndropped;      /* pairs (j, k) whose difference l+ - l- is not finite (contribute 0) */
    double loss;           /* mean of (l+ + l-)/2 over the kept pairs (j, k); NaN if none */
    int64_t cap_n_data;    /* allocated for this N                            */
} dp_dpzo_step_out;

dp_status dp_dpzo_step_out_alloc(dp_dpzo_step_out *o, int64_t n_data, int n);
void dp_dpzo_step_out_free(dp_dpzo_step_out *o);

/* ---- the command-line surface shared by `reference dpzo` and `train dpzo` ----
 * Usage:
 *   dp_dpzo_cli cli; dp_dpzo_cli_init(&cli);
 *   DP_TRY(dp_dpzo_cli_add_opts(opts, &n, cap, &cli));  ... append your own, dp_opts_parse ...
 *   DP_TRY(dp_dpzo_cli_finish(&model_cfg, &hp, &cli));           (validated)
 *   DP_TRY(dp_dpzo_cli_dataset(&data, &hp, &model_cfg, &cli));   (sets hp.n_data)
 * Options: the model and dataset group of reference/model_cli.h (--model ... --tied, --data,
 * --dataset-size), then --q --steps --clip --sigma --noise --phi --lr --weight-decay --n-spsa
 * --seed --noise-key. Required: --model, --dataset-size or --data, --q, --steps, --clip,
 * --sigma, --phi, --lr, --seed. */
typedef struct {
    dp_model_cli m;
    const char *noise, *noise_key, *seed;
    int64_t steps, n_spsa;
    double q, clip, sigma, phi, lr, wd;
    int seen_q, seen_steps, seen_clip, seen_sigma, seen_noise, seen_phi, seen_lr, seen_wd, seen_n_spsa, seen_seed,
        seen_key;
    int reveal_key; /* --reveal-noise-key: a random key is exported and printed by the command */
} dp_dpzo_cli;
#define DP_DPZO_NOPTS (DP_MODEL_NOPTS + 12)
/* The noise key goes into exports when given on the command line or revealed. */
#define DP_DPZO_KEY_EXPORTED(c) ((c)->seen_key || (c)->reveal_key)

/* A side's own check of the hyperparameters (reference: ref_dpzo_check, engine:
 * opt_dpzo_check); messages name the option. */
typedef dp_status (*dp_dpzo_check_fn)(const dp_dpzo_hparams *hp);
void dp_dpzo_cli_init(dp_dpzo_cli *c);
/* Appends DP_DPZO_NOPTS entries to opts[*n..] (cap = capacity of opts). */
dp_status dp_dpzo_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, dp_dpzo_cli *c);
/* Model config and hyperparameters, checked by `check`; a missing required option is
 * DP_ERR_USAGE naming it; without --noise-key the key is fresh (dp_noise_key_random). With
 * --data and no --dataset-size, hp->n_data is 1 until dp_dpzo_cli_dataset. */
dp_status dp_dpzo_cli_finish(dp_model_config *mc, dp_dpzo_hparams *hp, const dp_dpzo_cli *c, dp_dpzo_check_fn check);
/* The dataset (dp_model_cli_dataset with the public seed); sets hp->n_data and checks hp again. */
dp_status dp_dpzo_cli_dataset(dp_dataset *d, dp_dpzo_hparams *hp, const dp_model_config *mc,
                              const dp_dpzo_cli *c, dp_dpzo_check_fn check);
/* "gaussian" | "laplace" */
const char *dp_dpzo_mech_name(dp_dpzo_mech mech);

/* ---- exports (docs/dpzo.md "Exports") ---- */
/* A side's own generator of direction j of parameter p at a step (reference:
 * ref_dpzo_direction, engine: opt_dpzo_direction): z[e], e < numel. */
typedef dp_status (*dp_dpzo_dir_fn)(double *z, dp_seed seed, int64_t step, int p, int j, int64_t numel);
/* Initialises ts with one step's tensors (params, dpzo.z from `dir`, batch.indices, per_sample.*,
 * step.noise, step.scalar, params_after) and the hyperparameter metadata (algorithm ..
 * noise_key, the key only when key_given; data=file|generated). The caller appends its own
 * metadata (model keys, engine keys), writes, and frees ts (freed here on failure). */
dp_status dp_dpzo_export_set(dp_tensor_set *ts, const dp_model *m, const dp_dpzo_hparams *hp, int key_given,
                             int data_file, double *const *before, double *const *after, const dp_dpzo_step_out *o,
                             dp_dpzo_dir_fn dir);
/* The pieces of the export set, also used by `reference dpzo --replay`: parameters as
 * PREFIX.<name> (theta[p] with m's shapes), dpzo.z.<name> ([shape] for n = 1, [n, shape]
 * otherwise), a vector ([] scalar for n = 1, [n] otherwise), the model-config metadata
 * (model, in/hidden/classes or vocab..norm_eps) and one number (%.17g) or integer. */
dp_status dp_dpzo_export_params(dp_tensor_set *s, const char *prefix, const dp_model *m, double *const *theta);
dp_status dp_dpzo_export_directions(dp_tensor_set *s, const dp_model *m, dp_seed seed, int64_t step, int n,
                                    dp_dpzo_dir_fn dir);
dp_status dp_dpzo_export_vec(dp_tensor_set *s, const char *name, const double *v, int n);
dp_status dp_dpzo_meta_model(dp_tensor_set *s, const dp_model_config *c);
dp_status dp_dpzo_meta_num(dp_tensor_set *s, const char *k, double v);
dp_status dp_dpzo_meta_int(dp_tensor_set *s, const char *k, int64_t v);
/* Writes ts to DIR/step-%06d.safetensors. */
dp_status dp_dpzo_export_write(const char *dir, int64_t step, const dp_tensor_set *ts);
/* The line printed per step: "step T batch B scalar s_0[,s_1...] loss L" (s_j and L with
 * %.10e; "loss n/a" when b = 0). */
void dp_dpzo_print_step(const dp_dpzo_step_out *o);
/* s_0[,s_1...] with %.10e (no newline). */
void dp_dpzo_print_scalars(const double *s, int n);

#endif

/* reference/dpsgd.h — the exact CPU reference of DP-SGD with per-sample clipping
 * (docs/dpsgd.md; Abadi et al. 2016, Algorithm 1 of papers/longshield.txt).
 *
 * Logical step s (s = 1..K, the 1-based step number is the RNG stream id):
 *   batch     B_s = { i < N : uniform(SAMPLING, noise key, stream s, lane 0, element i) < q }
 *   per example g_i = ref_example_grad (one backward pass per example);
 *             group norms n_im = ||g_i restricted to group m||, clip factors c_im (abadi or
 *             automatic); an example with a non-finite loss or gradient is dropped
 *             (c_im = 0, its terms are not added) and counted;
 *   sum       S[p][e] = Neumaier sum over i in B_s (ascending) of c_{i,m(p)} g_i[p][e]
 *   noise     Z[p][e] = (sigma C_total) * gaussian(NOISE, noise key, stream s, lane p, element e)
 *   private   G[p][e] = (S[p][e] + Z[p][e]) / (q N)      (expected batch size, never |B_s|)
 *   update    SGD with momentum or AdamW on G.
 * Micro-batches split B_s into k contiguous chunks; the sums carry across chunks and the
 * noise is drawn once, so any k gives the same bits as k = 1.
 * --precision mpfr computes norms, clip factors, sums, noise scaling and the private
 * gradient in 256-bit MPFR and rounds each exported value once. */
#ifndef REF_DPSGD_H
#define REF_DPSGD_H

#include <stddef.h>
#include <stdint.h>

#include "common/cli.h"
#include "common/rng.h"
#include "common/status.h"
#include "common/tensor.h"
#include "reference/model.h"
#include "reference/model_cli.h"

typedef enum { REF_CLIP_FLAT = 0, REF_CLIP_PER_LAYER = 1, REF_CLIP_GROUP = 2 } ref_clip_style;
typedef enum { REF_CLIPFN_ABADI = 0, REF_CLIPFN_AUTOMATIC = 1 } ref_clip_fn;
typedef enum { REF_OPT_SGD = 0, REF_OPT_ADAMW = 1 } ref_optimizer;
typedef enum { REF_PREC_DOUBLE = 0, REF_PREC_MPFR = 1 } ref_precision;

#define REF_MAX_SPEC 1024
#define REF_MPFR_BITS 256

typedef struct {
    int64_t n;             /* N, dataset size >= 1                                   */
    double q;              /* Poisson rate in (0, 1]                                 */
    int64_t steps;         /* K >= 1                                                 */
    double clip;           /* C > 0                                                  */
    double sigma;          /* noise multiplier >= 0                                  */
    ref_clip_style style;  /* flat | per-layer | group                               */
    char groups[REF_MAX_SPEC]; /* --groups spec ("" = default for the style)         */
    ref_clip_fn clip_fn;   /* abadi | automatic                                      */
    double gamma;          /* automatic clipping stability constant (0.01)          */
    int64_t micro_batches; /* k >= 1                                                 */
    ref_optimizer opt;     /* sgd | adamw                                            */
    double lr;             /* >= 0                                                   */
    double momentum;       /* sgd: [0, 1)                                            */
    double beta1, beta2;   /* adamw: [0, 1)                                          */
    double adam_eps;       /* adamw: > 0                                             */
    double weight_decay;   /* adamw: >= 0 (decoupled)                                */
    dp_seed seed;          /* public: init, data                                     */
    dp_noise_key key;      /* secret: sampling, noise                                */
    int key_given;         /* 1 when the key came from the command line (exported)  */
    ref_precision precision;
} ref_dpsgd_config;

/* Defaults (docs/dpsgd.md): N 64, q 0.125, K 1, C 1, sigma 1, flat, abadi, gamma 0.01,
 * k 1, sgd, lr 0.1, momentum 0, beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.01
 * (adamw only), seed 0, key 0 (not given), double. */
void ref_dpsgd_config_default(ref_dpsgd_config *c);
/* Every range check of the command line (messages name the option). */
dp_status ref_dpsgd_config_check(const ref_dpsgd_config *c);

/* ---- clipping groups, resolved against a model ---- */
typedef struct {
    int ngroups;
    char (*name)[REF_MAX_NAME]; /* [ngroups] */
    double *thresh;             /* [ngroups] R_m */
    int *group_of;              /* [nparams] group index of each parameter */
    double c_total;             /* C (flat) or sqrt(sum_m R_m^2) (Neumaier) */
} ref_clip_groups;

/* Resolves the style and --groups spec (docs/dpsgd.md "Clipping groups"):
 *   flat:      one group "all" with R = C ("" spec only);
 *   per-layer: "" or "tensor" = one group per parameter tensor (named as the tensor),
 *              "block" = tok_emb | layers.{l} | head (final_norm, lm_head) for llama,
 *              layers.{i} for mlp; thresholds C / sqrt(#groups), or explicit:
 *              "tensor:R1,R2,..." / "block:R1,..." (one per group, in order);
 *   group:     "NAME=GLOB[|GLOB...]:R;NAME=...:R" — each parameter joins the first group
 *              whose glob (fnmatch) matches its name; every parameter must match and
 *              every group must own at least one parameter. */
dp_status ref_clip_groups_make(ref_clip_groups *g, const ref_dpsgd_config *c, const ref_model *m);
void ref_clip_groups_free(ref_clip_groups *g);

/* Bounds decidable from the options (docs/dpsgd.md "Non-finite training"), checked by
 * ref_dpsgd_init before any step: the noise std sigma C_total, the largest private
 * gradient element (N C_total + sigma C_total max|z|) / (q N) with max|z| the sampler's
 * REF_DPZO_GAUSS_MAX, and the first update lr * that / (1 - momentum) (sgd) or lr /
 * (1 - beta1) and its square (adamw) must be finite; else DP_ERR_INVALID naming the
 * options. A step whose private gradient is still non-finite, or that turns a finite
 * parameter element non-finite, fails with DP_ERR_INVALID naming the step and the
 * parameter tensor (nothing of that step is exported). */
dp_status ref_dpsgd_check_bounds(const ref_dpsgd_config *c, const ref_clip_groups *g);

/* Clip factor of one norm: abadi min(1, R/n) (1 when n = 0, i.e. when n <= R), automatic
 * R/(n + gamma). */
double ref_clip_factor(ref_clip_fn fn, double norm, double thresh, double gamma);

/* Norms of one example (docs/dpsgd.md step 4): gnorm[k] for each group [G] and the total
 * norm, each sqrt of the Neumaier sum of squares in canonical order; for a finite example
 * (finite = 1) a sum that is not finite (overflow) is replaced by the scaled form
 * ref_norm_scaled. gi[p] = g_i[p] [numel]. */
dp_status ref_norms_double(double *norm, double *gnorm, const ref_model *m, const ref_clip_groups *g,
                           double *const *gi, int finite);
/* s * sqrt(NS((x / s)^2)), s = max |x|, over group grp (grp < 0: all parameters). */
double ref_norm_scaled(const ref_model *m, const ref_clip_groups *g, int grp, double *const *gi);

/* Poisson batch of step s (1-based): idx[0..*b) ascending; idx must hold n entries. */
dp_status ref_dpsgd_poisson(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n);
/* Standard normal z of the noise at (step, parameter p, element e); noise = (sigma C_total) z. */
double ref_dpsgd_noise_z(dp_noise_key key, int64_t step, int p, int64_t e);

/* Per-example loss and gradient provider (default: ref_example_grad on (m, d)). Tests
 * substitute zeros or non-finite values; grads[p] has m->params[p].numel doubles. */
typedef dp_status (*ref_grad_fn)(double *loss, double *const *grads, const ref_model *m, const ref_dataset *d,
                                 int64_t i, void *ctx);

/* Everything one step produces (the export set). Arrays are owned (ref_dpsgd_step_free). */
typedef struct {
    int64_t step;          /* 1-based */
    int64_t b;             /* realized batch size */
    int nparams, ngroups;
    int64_t *indices;      /* [b] ascending */
    double *loss;          /* [b] */
    double *norm;          /* [b] norm over all parameters */
    double *group_norm;    /* [b, ngroups] */
    double *clip_factor;   /* [b, ngroups] (0 for a dropped example) */
    int *dropped;          /* [b] 1 when the example was dropped (non-finite) */
    int64_t ndropped;
    double **grad;         /* [nparams][b * numel] per-sample gradients (unclipped) */
    double **clipped_sum;  /* [nparams][numel] */
    double **noise;        /* [nparams][numel] */
    double **private_grad; /* [nparams][numel] */
    double mean_loss;      /* over the non-dropped examples (NaN when none) */
    double mean_clip;      /* over all examples and groups (NaN when b = 0) */
} ref_dpsgd_step_out;
void ref_dpsgd_step_free(ref_dpsgd_step_out *o);

/* Optimizer state and run context. */
typedef struct {
    ref_dpsgd_config cfg;
    ref_clip_groups groups;
    double **m1, **m2; /* sgd: m1 = momentum buffer; adamw: first and second moments */
    int64_t t;         /* optimizer steps taken */
    int nparams;       /* of the model the state was made for */
    ref_grad_fn grad_fn;
    void *grad_ctx;
} ref_dpsgd_state;

dp_status ref_dpsgd_init(ref_dpsgd_state *st, const ref_dpsgd_config *cfg, const ref_model *m);
void ref_dpsgd_free(ref_dpsgd_state *st);

/* One logical step s (1-based): fills `out` and updates m in place. `out` must be zeroed
 * ({0}) before the first call; a previous step's contents are freed first. */
dp_status ref_dpsgd_step(ref_dpsgd_step_out *out, ref_model *m, ref_dpsgd_state *st, const ref_dataset *d,
                         int64_t step);

/* The optimizer alone: params <- update(params, private_grad) (state st, step counter t+1).
 * DP_ERR_INVALID naming the tensor when an element finite before the update is not
 * after it (the update is complete; the caller stops). */
dp_status ref_dpsgd_apply_optimizer(ref_model *m, ref_dpsgd_state *st, double *const *private_grad);

/* ---- exports (docs/dpsgd.md "Exports") ---- */
/* Builds one step's export set: params.<name> (from `before`), batch.*, per_sample.*,
 * step.*, params_after.<name> (from `after`) and __metadata__ (every hyperparameter of
 * mc and c, seed, noise key only when c->key_given, step, expected batch size q N, dpcert
 * version, and `extra` key/value pairs, NULL-terminated, may be NULL). The optimized engine
 * fills a ref_dpsgd_step_out with its own values to write identically named exports. */
dp_status ref_dpsgd_export_set(dp_tensor_set *s, const ref_model_config *mc, const ref_dpsgd_config *c,
                               const ref_clip_groups *g, const ref_model *before, const ref_model *after,
                               const ref_dataset *d, const ref_dpsgd_step_out *o, const char *const *extra);
/* DIR/step-%06lld.safetensors */
dp_status ref_dpsgd_export_write(const char *dir, const ref_model_config *mc, const ref_dpsgd_config *c,
                                 const ref_clip_groups *g, const ref_model *before, const ref_model *after,
                                 const ref_dataset *d, const ref_dpsgd_step_out *o, const char *const *extra);

/* ---- the shared command-line surface (also used by `dpcert train`) ----
 * Usage:
 *   ref_dpsgd_cli cli; ref_dpsgd_cli_init(&cli);
 *   dp_opt opts[64]; size_t n = 0;
 *   ... append your own options to opts ...
 *   DP_TRY(ref_dpsgd_cli_add_opts(opts, &n, 64, &cli));
 *   DP_TRY(dp_opts_parse(opts, n, argc, argv, NULL, 0, NULL, &help));
 *   DP_TRY(ref_dpsgd_cli_finish(&model_cfg, &dpsgd_cfg, &cli));   (validated)
 *   then ref_dpsgd_cli_dataset(&data, &model_cfg, &dpsgd_cfg, &cli) (generated or --data FILE).
 * Options: the model and dataset group of reference/model_cli.h (--model --in --hidden
 * --classes --vocab --dim --layers --heads --ffn --seq --tied --data --dataset-size), then --q --steps --clip --sigma --clipping --groups --clip-fn --gamma
 * --micro-batches --optimizer --lr --momentum --beta1 --beta2 --adam-eps --weight-decay
 * --seed --noise-key. (`reference dpsgd` adds --precision double|mpfr and --export DIR
 * itself; cli->precision stays "double" when the caller has no --precision.) */
typedef struct {
    ref_model_cli m; /* --model ... --tied, --data, --dataset-size (reference/model_cli.h) */
    const char *clipping, *groups, *clip_fn, *optimizer, *precision;
    int64_t steps, micro_batches;
    double q, clip, sigma, gamma, lr, momentum, beta1, beta2, adam_eps, weight_decay;
    uint64_t seed, key;
    int seen_groups, seen_gamma, seen_momentum, seen_beta1, seen_beta2, seen_adam_eps, seen_wd, seen_key;
    int reveal_key; /* --reveal-noise-key: a random key is exported (key_given) and printed by the command */
} ref_dpsgd_cli;
#define REF_DPSGD_NOPTS (REF_MODEL_NOPTS + 19)

void ref_dpsgd_cli_init(ref_dpsgd_cli *cli);
/* Appends REF_DPSGD_NOPTS entries to opts[*n..] (cap = capacity of opts). */
dp_status ref_dpsgd_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, ref_dpsgd_cli *cli);
/* Turns parsed values into validated configs (bad values: DP_ERR_INVALID / DP_ERR_USAGE
 * naming the option). With --data FILE, N is the file's example count (--dataset-size, if
 * also given, must agree) and is set by ref_dpsgd_cli_dataset. */
dp_status ref_dpsgd_cli_finish(ref_model_config *mc, ref_dpsgd_config *c, const ref_dpsgd_cli *cli);
/* The dataset: --data FILE or N examples generated from the seed; sets c->n. */
dp_status ref_dpsgd_cli_dataset(ref_dataset *d, const ref_model_config *mc, ref_dpsgd_config *c,
                                const ref_dpsgd_cli *cli);

/* The line printed per step: "step S batch B loss L mean_clip F [dropped D]" (L, F with
 * %.6f, "-" when NaN; "dropped D" only when D > 0). */
void ref_dpsgd_print_step(const ref_dpsgd_step_out *o);

/* `dpcert reference dpsgd ...` */
int dp_cmd_reference_dpsgd(int argc, char **argv);

#endif

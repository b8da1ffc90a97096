/* common/spec_dpsgd.h — DP-SGD's neutral plumbing, included by the reference
 * (reference/dpsgd.h) and the engine (optimized/): the configuration structure and its
 * defaults, the resolved clipping groups (a plain structure; each side resolves them
 * itself), the per-step output structure (the export set), the export writer
 * (docs/dpsgd.md "Exports"), the command-line option table and its parsing, and the
 * per-step log line. Nothing here computes a DP quantity; it depends on common/ only.
 * The reference's names (ref_dpsgd_config, ...) remain as aliases in reference/dpsgd.h. */
#ifndef DP_SPEC_DPSGD_H
#define DP_SPEC_DPSGD_H

#include <stddef.h>
#include <stdint.h>

#include "common/cli.h"
#include "common/rng.h"
#include "common/spec_clip.h"
#include "common/status.h"
#include "common/spec_model.h"
#include "common/tensor.h"

typedef enum { DP_CLIP_FLAT = 0, DP_CLIP_PER_LAYER = 1, DP_CLIP_GROUP = 2 } dp_clip_style;
typedef enum { DP_OPT_SGD = 0, DP_OPT_ADAMW = 1 } dp_optimizer;
typedef enum { DP_PREC_DOUBLE = 0, DP_PREC_MPFR = 1 } dp_precision;

#define DP_MAX_SPEC 1024

typedef struct {
    int64_t n;             /* N, dataset size >= 1                                   */
    double q;              /* Poisson rate in (0, 1]                                 */
    int64_t steps;         /* K >= 1                                                 */
    double clip;           /* C > 0                                                  */
    double sigma;          /* noise multiplier >= 0                                  */
    dp_clip_style style;  /* flat | per-layer | group                               */
    char groups[DP_MAX_SPEC]; /* --groups spec ("" = default for the style)         */
    dp_clip_fn clip_fn;   /* abadi | automatic                                      */
    double gamma;          /* automatic clipping stability constant (0.01)          */
    int64_t micro_batches; /* k >= 1                                                 */
    dp_optimizer opt;     /* sgd | adamw                                            */
    double lr;             /* >= 0                                                   */
    double momentum;       /* sgd: [0, 1)                                            */
    double beta1, beta2;   /* adamw: [0, 1)                                          */
    double adam_eps;       /* adamw: > 0                                             */
    double weight_decay;   /* adamw: >= 0 (decoupled)                                */
    dp_seed seed;          /* public: init, data                                     */
    dp_noise_key key;      /* secret: sampling, noise                                */
    int key_given;         /* 1 when the key came from the command line (exported)  */
    dp_precision precision;
} dp_dpsgd_config;

/* Defaults (docs/dpsgd.md): N 64, q 0.125, K 1, C 1, sigma 1, flat, abadi, gamma 0.01,
 * k 1, sgd, lr 0.1, momentum 0, beta1 0.9, beta2 0.999, eps 1e-8, weight decay 0.01
 * (adamw only), seed 0, key 0 (not given), double. */
void dp_dpsgd_config_default(dp_dpsgd_config *c);

/* ---- clipping groups, resolved against a model ---- */
typedef struct {
    int ngroups;
    char (*name)[DP_MAX_NAME]; /* [ngroups] */
    double *thresh;             /* [ngroups] R_m */
    int *group_of;              /* [nparams] group index of each parameter */
    double c_total;             /* C (flat) or sqrt(sum_m R_m^2) (Neumaier) */
} dp_clip_groups;

/* Everything one step produces (the export set). Arrays are owned (dp_dpsgd_step_free). */
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
} dp_dpsgd_step_out;
void dp_dpsgd_step_free(dp_dpsgd_step_out *o);

/* ---- exports (docs/dpsgd.md "Exports") ---- */
/* Builds one step's export set: params.<name> (from `before`), batch.*, per_sample.*,
 * step.*, params_after.<name> (from `after`) and __metadata__ (every hyperparameter of
 * mc and c, seed, noise key only when c->key_given, step, expected batch size q N, dpcert
 * version, and `extra` key/value pairs, NULL-terminated, may be NULL). The optimized engine
 * fills a dp_dpsgd_step_out with its own values to write identically named exports. */
dp_status dp_dpsgd_export_set(dp_tensor_set *s, const dp_model_config *mc, const dp_dpsgd_config *c,
                               const dp_clip_groups *g, const dp_model *before, const dp_model *after,
                               const dp_dataset *d, const dp_dpsgd_step_out *o, const char *const *extra);
/* DIR/step-%06lld.safetensors */
dp_status dp_dpsgd_export_write(const char *dir, const dp_model_config *mc, const dp_dpsgd_config *c,
                                 const dp_clip_groups *g, const dp_model *before, const dp_model *after,
                                 const dp_dataset *d, const dp_dpsgd_step_out *o, const char *const *extra);

/* ---- the shared command-line surface (also used by `dpcert train`) ----
 * Usage:
 *   dp_dpsgd_cli cli; dp_dpsgd_cli_init(&cli);
 *   dp_opt opts[64]; size_t n = 0;
 *   ... append your own options to opts ...
 *   DP_TRY(dp_dpsgd_cli_add_opts(opts, &n, 64, &cli));
 *   DP_TRY(dp_opts_parse(opts, n, argc, argv, NULL, 0, NULL, &help));
 *   DP_TRY(dp_dpsgd_cli_finish(&model_cfg, &dpsgd_cfg, &cli));   (validated)
 *   then dp_dpsgd_cli_dataset(&data, &model_cfg, &dpsgd_cfg, &cli) (generated or --data FILE).
 * Options: the model and dataset group of reference/model_cli.h (--model --in --hidden
 * --classes --vocab --dim --layers --heads --ffn --seq --tied --data --dataset-size), then --q --steps --clip --sigma --clipping --groups --clip-fn --gamma
 * --micro-batches --optimizer --lr --momentum --beta1 --beta2 --adam-eps --weight-decay
 * --seed --noise-key. (`reference dpsgd` adds --precision double|mpfr and --export DIR
 * itself; cli->precision stays "double" when the caller has no --precision.) */
typedef struct {
    dp_model_cli m; /* --model ... --tied, --data, --dataset-size (reference/model_cli.h) */
    const char *clipping, *groups, *clip_fn, *optimizer, *precision;
    int64_t steps, micro_batches;
    double q, clip, sigma, gamma, lr, momentum, beta1, beta2, adam_eps, weight_decay;
    uint64_t seed, key;
    int seen_groups, seen_gamma, seen_momentum, seen_beta1, seen_beta2, seen_adam_eps, seen_wd, seen_key;
    int reveal_key; /* --reveal-noise-key: a random key is exported (key_given) and printed by the command */
} dp_dpsgd_cli;
#define DP_DPSGD_NOPTS (DP_MODEL_NOPTS + 19)

void dp_dpsgd_cli_init(dp_dpsgd_cli *cli);
/* Appends DP_DPSGD_NOPTS entries to opts[*n..] (cap = capacity of opts). */
dp_status dp_dpsgd_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, dp_dpsgd_cli *cli);
/* A side's own range check of a configuration (reference: ref_dpsgd_config_check,
 * engine: opt_dpsgd_config_check); messages name the option. */
typedef dp_status (*dp_dpsgd_check_fn)(const dp_dpsgd_config *c);
/* Turns parsed values into configs validated by `check` (bad values: DP_ERR_INVALID /
 * DP_ERR_USAGE naming the option). With --data FILE, N is the file's example count
 * (--dataset-size, if also given, must agree) and is set by dp_dpsgd_cli_dataset. */
dp_status dp_dpsgd_cli_finish(dp_model_config *mc, dp_dpsgd_config *c, const dp_dpsgd_cli *cli, dp_dpsgd_check_fn check);
/* The dataset: --data FILE or N examples generated from the seed; sets c->n (then `check`). */
dp_status dp_dpsgd_cli_dataset(dp_dataset *d, const dp_model_config *mc, dp_dpsgd_config *c,
                               const dp_dpsgd_cli *cli, dp_dpsgd_check_fn check);

/* The line printed per step: "step S batch B loss L mean_clip F [dropped D]" (L, F with
 * %.6f, "-" when NaN; "dropped D" only when D > 0). */
void dp_dpsgd_print_step(const dp_dpsgd_step_out *o);

#endif

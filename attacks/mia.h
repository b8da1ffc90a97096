/* attacks/mia.h — membership-inference sanity runs (docs/audits.md "Membership inference").
 *
 * A population P of `pop` generated mlp examples (Gaussian inputs, uniform random labels:
 * nothing to learn but the examples themselves, so a non-DP model memorises). R models per
 * run are trained with the engine (host backend, public API) or the reference, each on the examples whose
 * membership bit for that model is 1; every example is in exactly R/2 of the R models
 * (bits from the secret key, so the assignment is balanced and unpredictable). Runs: the
 * non-DP control (sigma 0, no clipping), DP-SGD at each target epsilon (sigma calibrated by
 * the PLD accountant), and DP-ZO at the largest target epsilon. Every model is the target in
 * turn with the other R - 1 as shadow models (leave-one-out); scores are pooled over
 * targets. Attacks: loss threshold, LiRA offline and LiRA online (fixed variance). */
#ifndef MIA_H
#define MIA_H

#include <stdint.h>

#include "attacks/audit.h"
#include "attacks/audit_stats.h"
#include "common/rng.h"
#include "common/status.h"
#include "reference/model.h"

#define MIA_ATTACKS(X) X(LOSS, "loss-threshold") X(LIRA_OFFLINE, "lira-offline") X(LIRA_ONLINE, "lira-online")
#define MIA_ENUM_(n, s) MIA_ATTACK_##n,
typedef enum { MIA_ATTACKS(MIA_ENUM_) MIA_NATTACKS } mia_attack;
#undef MIA_ENUM_
extern const char *const mia_attack_names[];

/* Registered real data sets (attacks/data/, docs/audits.md "Data"): id, --dataset NAME,
 * file, SHA-256 of the file. */
#define MIA_DATASETS(X) \
    X(BREAST_CANCER, "breast-cancer", "breast_cancer.csv", "fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed")
extern const char *const mia_dataset_names[]; /* NULL-terminated */
/* --dataset NAME|FILE (mia_data.c): d = the first max_rows (<= 0: all) examples, features
 * standardised over them; *classes = the number of class names. Bad files: DP_ERR_FORMAT
 * naming the file and line; max_rows > the file's rows: DP_ERR_INVALID. */
dp_status mia_dataset_load(ref_dataset *d, int *classes, const char *spec, int64_t max_rows);

#define MIA_MAX_EPS 8
/* Level of the DP-ZO "AUC ~ 0.5" interval (docs/audits.md): two-sided, per attack. */
#define MIA_HALF_ALPHA 1e-3
#define MIA_NFPR 2
extern const double mia_fpr_targets[MIA_NFPR]; /* 1e-3, 1e-2 */

/* Models per run of the levels (docs/audits.md "Levels"). */
#define MIA_MODELS_CI 8
#define MIA_MODELS_CERTIFY 32

typedef struct {
    ref_model_config mc;
    int64_t pop;             /* |P| */
    int64_t models;          /* R, even, >= 4 */
    int64_t steps;
    double q, lr, momentum, clip, delta;
    double eps[MIA_MAX_EPS]; /* DP-SGD target epsilons */
    int neps;
    int dpzo;                /* 1: a DP-ZO run at the largest target epsilon */
    double zo_phi, zo_lr;
    int64_t zo_steps;
    double alpha;            /* non-DP leak check: AUC significantly above 0.5 at this level */
    double confidence;       /* of the TPR/FPR intervals */
    dp_seed seed;
    dp_noise_key key;
    int threads;
    int progress;
    int plant_no_noise;      /* test-only: DP runs trained with sigma 0 while claiming their epsilon */
    int reference;           /* 1: models trained by the reference (reference/dpsgd.h, dpzo.h), else the engine */
    const ref_dataset *data; /* non-NULL: the population (a loaded data set, pop = data->n); else generated */
    const char *data_name;   /* its --dataset NAME|FILE */
    const char *candidate;   /* non-NULL: DP-SGD private gradients from this certification candidate (CMD IN OUT),
                                one call per step; batches, update and losses are the auditor's */
    const char *work;        /* candidate: directory of the step vectors and outputs */
    double timeout_s;        /* candidate: seconds per call */
    const char *signals;     /* non-NULL: write every model's losses and membership here (safetensors,
                                docs/audits.md "Signals"), for attacks run outside dpcert */
    int candidate_persistent; /* candidate: --candidate-mode persistent (one process per model trained) */
} mia_config;

void mia_config_default(mia_config *c);
dp_status mia_config_check(const mia_config *c);

typedef enum { MIA_RUN_NONDP = 0, MIA_RUN_DPSGD = 1, MIA_RUN_DPZO = 2 } mia_run_kind;

typedef struct {
    audit_test t;            /* the test at this FPR target (bounds at alpha/2 each) */
    double tpr_lo, tpr_hi, fpr_hi;
    double bound;            /* e^eps fpr_hi + delta (DP runs) */
    int violated;            /* tpr_lo > bound */
} mia_fpr_point;

typedef struct {
    double auc, auc_se, auc_lo, auc_hi; /* Hanley-McNeil interval at the run's confidence */
    mia_fpr_point at[MIA_NFPR];
    size_t roc_n;
    double roc_fpr[AUDIT_ROC_POINTS], roc_tpr[AUDIT_ROC_POINTS];
} mia_attack_result;

typedef struct {
    mia_run_kind kind;
    double eps_target, sigma, eps;  /* eps: accountant (PLD upper) epsilon of the run; inf for non-DP */
    double train_acc;               /* mean over models of the accuracy on their members */
    mia_attack_result a[MIA_NATTACKS];
    int auc_near_half;              /* every attack's 99.9% AUC interval contains 0.5 (DP-ZO: the paper's AUC ~ 0.5) */
    audit_verdict verdict;          /* DP runs: FAIL on a bound violation; non-DP: INVALID when it does not leak */
    char message[512];
} mia_run_result;

typedef struct {
    int nruns;
    mia_run_result run[MIA_MAX_EPS + 2];
    audit_verdict verdict;
    char message[512 + 64]; /* a run's message whole, after its "run K (KIND, eps E): " */
    double seconds, models_per_s;
} mia_result;

dp_status mia_run_all(mia_result *res, const mia_config *c);

/* Leave-one-out scores of one run: loss[r][x] is model r's loss on example x, in[r][x] its
 * membership bit; neg/pos receive the pooled scores of each attack (size R pop / 2 each). */
dp_status mia_scores(double *const *neg, double *const *pos, const double *loss, const unsigned char *in,
                     int64_t models, int64_t pop);
/* Statistics of one attack's pooled scores (sorted in place). */
dp_status mia_attack_stats(mia_attack_result *a, double *neg, size_t n_neg, double *pos, size_t n_pos, double eps,
                           double delta, double confidence);

#endif

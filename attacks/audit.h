/* attacks/audit.h — the white-box step audit of a DP-SGD or DP-ZO release
 * (docs/audits.md): neighbouring datasets D and D' = D + one canary, the release run
 * `trials` times on each with a fresh secret key per trial, a one-dimensional statistic
 * (the privatized gradient projected on the canary direction, or the released DP-ZO
 * scalar), a threshold chosen on a calibration split, Clopper-Pearson bounds on the false
 * positive and false negative rates of the remaining trials, and two epsilon lower bounds
 * (the standard conversion and the Gaussian trade-off) against the accountant's epsilon.
 *
 * Trials run in one process over data and model set up once, threaded across trials;
 * trial i on side s (0 = D, 1 = D') uses the noise key
 *   u64(AUDIT_NOISE stream of the audit key, stream s + 1, lane 0, element i),
 * so results do not depend on the thread count. */
#ifndef AUDIT_H
#define AUDIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "attacks/audit_stats.h"
#include "common/rng.h"
#include "common/status.h"
#include "reference/dpsgd.h"
#include "reference/model.h"

/* X-macro registries: one concept, one place. */
#define AUDIT_IMPLS(X) X(REFERENCE, "reference") X(OPTIMIZED, "optimized") X(CANDIDATE, "candidate")
#define AUDIT_ALGOS(X) X(DPSGD, "dpsgd") X(DPZO, "dpzo")
/* dirac: a gradient canary g = scale C e_k (reference only: it needs the gradient hook);
 * anti: a gradient canary -(||S|| + scale C) S/||S|| against the sum S of D's raw gradients
 *       (reference only; the strongest canary against clipping after summing);
 * input: an input-space example of the mlp, scaled until its gradient (DP-SGD) or loss
 *       difference (DP-ZO) is large; the direction is its clipped gradient at theta_0. */
#define AUDIT_CANARIES(X) X(DIRAC, "dirac") X(ANTI, "anti") X(INPUT, "input")
/* Planted bugs (test-only, DPCERT_TEST_INJECT=1): the release's claim stays the correct
 * one while the release itself is broken. */
#define AUDIT_PLANTS(X)                                                                                   \
    X(NONE, "none") X(HALF_NOISE, "half-noise") X(NO_CLIP, "no-clip") X(CLIP_AFTER_SUM, "clip-after-sum") \
    X(PUBLIC_SEED_NOISE, "public-seed-noise")
#define AUDIT_LEVELS(X) X(CI, "ci") X(CERTIFY, "certify") X(CUSTOM, "custom")

#define AUDIT_ENUM_(n, s) AUDIT_IMPL_##n,
typedef enum { AUDIT_IMPLS(AUDIT_ENUM_) AUDIT_IMPL_COUNT } audit_impl;
#undef AUDIT_ENUM_
#define AUDIT_ENUM_(n, s) AUDIT_ALGO_##n,
typedef enum { AUDIT_ALGOS(AUDIT_ENUM_) AUDIT_ALGO_COUNT } audit_algo;
#undef AUDIT_ENUM_
#define AUDIT_ENUM_(n, s) AUDIT_CANARY_##n,
typedef enum { AUDIT_CANARIES(AUDIT_ENUM_) AUDIT_CANARY_COUNT } audit_canary;
#undef AUDIT_ENUM_
#define AUDIT_ENUM_(n, s) AUDIT_PLANT_##n,
typedef enum { AUDIT_PLANTS(AUDIT_ENUM_) AUDIT_PLANT_COUNT } audit_plant;
#undef AUDIT_ENUM_
#define AUDIT_ENUM_(n, s) AUDIT_LEVEL_##n,
typedef enum { AUDIT_LEVELS(AUDIT_ENUM_) AUDIT_LEVEL_COUNT } audit_level;
#undef AUDIT_ENUM_

extern const char *const audit_impl_names[];   /* NULL-terminated, index = enum */
extern const char *const audit_algo_names[];
extern const char *const audit_canary_names[];
extern const char *const audit_plant_names[];
extern const char *const audit_level_names[];

/* Trials per side of the levels (docs/audits.md "Levels"). */
#define AUDIT_TRIALS_CI 4000
#define AUDIT_TRIALS_CERTIFY 50000

typedef struct {
    audit_algo algo;
    audit_impl impl;
    const char *backend;     /* optimized: "host" | "cuda" */
    int strategy;            /* optimized DP-SGD: opt_strategy */
    const char *candidate;   /* candidate: the command line CMD (run as CMD IN OUT) */
    const char *work;        /* candidate: directory of the step vectors and outputs */
    double timeout_s;        /* candidate: seconds per run */
    int candidate_persistent; /* candidate: --candidate-mode persistent (one process per thread) */
    audit_canary canary;
    double canary_scale;     /* >= 1: canary size in units of C (dirac, anti, input target) */
    int canary_param;        /* dirac: parameter index (-1: the last parameter) */
    int64_t canary_elem;     /* dirac: element in that parameter */
    audit_plant plant;
    ref_model_config mc;
    int64_t n;               /* |D| */
    double q, clip, sigma, delta;
    int64_t steps;           /* K >= 1 steps per trial (DP-SGD reference/engine; 1 otherwise) */
    double phi;              /* DP-ZO perturbation scale */
    int64_t trials;          /* per side */
    double confidence;       /* of the two Clopper-Pearson bounds together, in (0, 1) */
    double calib_frac;       /* fraction of each side's trials used to pick the threshold */
    dp_seed seed;            /* public: model, data, canary input */
    dp_noise_key key;        /* secret: the per-trial noise keys */
    int threads;             /* >= 1 */
    int progress;            /* 1: progress lines on stderr */
} audit_config;

void audit_config_default(audit_config *c);
/* Every range check; messages name the option (--delta must be in (0, 1), --trials >= ...). */
dp_status audit_config_check(const audit_config *c);

/* What the auditor knows and sets up once (public): model, D, D', the canary. */
typedef struct {
    audit_config cfg;
    ref_model m0;            /* theta_0 */
    ref_dataset d0, d1;      /* D (n examples), D' (n + 1, the canary last) */
    double *dir;             /* [total] unit canary direction (DP-SGD) over the flat parameters */
    double *canary_grad;     /* [total] gradient canary (dirac/anti), NULL for input */
    double canary_norm;      /* ||canary gradient|| (DP-SGD) or |canary loss difference| (DP-ZO) */
    double shift;            /* expected shift of the statistic: min(canary_norm, C) */
    double sign;             /* DP-ZO: sign of the canary's clipped loss difference */
    double eps_claim;        /* accountant (PLD upper) epsilon at delta for K steps */
    double mu_claim;         /* sqrt(K)/sigma when q = 1 (K Gaussian mechanisms), else NAN */
} audit_setup;

dp_status audit_setup_make(audit_setup *s, const audit_config *c);
void audit_setup_free(audit_setup *s);

/* One release instance (one per thread). run() writes the statistic of one trial. */
typedef struct audit_release {
    dp_status (*run)(double *stat, struct audit_release *r, int side, dp_noise_key key);
    void (*destroy)(struct audit_release *r);
    const audit_setup *s;
    void *ctx;
} audit_release;

dp_status audit_release_make(audit_release *r, const audit_setup *s, int tid);
/* A zeroed context of `size` bytes installed in r with its run and destroy (NULL: no memory). */
void *audit_release_ctx(audit_release *r, size_t size,
                        dp_status (*run)(double *, struct audit_release *, int, dp_noise_key),
                        void (*destroy)(struct audit_release *));

/* The thread pool (audit_pool.c). Every worker struct begins with an audit_worker. */
typedef struct {
    int tid, nth;            /* set by the pool: worker tid takes indices tid, tid + nth, ... */
    atomic_int *stop;        /* set by the pool; 1 once a worker failed */
    dp_status st;            /* the worker's status */
    char msg[512];           /* its message (dp_error messages are per thread) */
} audit_worker;
/* Runs fn(worker t) for t < nth (worker t at (char *)workers + t * stride; inline when
 * nth == 1); the first failing worker's status and message are returned. */
dp_status audit_pool_run(void *(*fn)(void *), void *workers, size_t stride, int nth, double *seconds);
/* Records the current dp_error message in w and stops the other workers. */
void audit_worker_fail(audit_worker *w);
double audit_now_s(void);

/* The trial statistics: stat[side][i], side 0 = D, 1 = D'. */
dp_status audit_run_trials(double *stat0, double *stat1, const audit_setup *s, double *seconds);
/* Key of trial i on side s. */
dp_status audit_trial_key(dp_noise_key *out, dp_noise_key audit_key, int side, int64_t i);

typedef enum { AUDIT_PASS = 0, AUDIT_FAIL = 1, AUDIT_INVALID = 2 } audit_verdict;
extern const char *const audit_verdict_names[];

#define AUDIT_ROC_POINTS 200
typedef struct {
    audit_test std;          /* the test chosen for the standard conversion (fresh trials) */
    audit_test gauss;        /* the test chosen for the Gaussian trade-off (fresh trials) */
    double eps_lb_std;       /* standard conversion */
    double eps_lb_gauss;     /* epsilon of the Gaussian mechanism with mu = mu_lb */
    double mu_lb;
    double eps_claim, mu_claim;
    double tightness;        /* eps_lb_gauss / eps_claim */
    int gauss_binding;       /* 1 when the Gaussian bound takes part in the verdict (q = 1) */
    audit_verdict verdict;
    char message[512];
    int64_t n_cal, n_eval;   /* per side */
    double seconds, trials_per_s;
    double auc;
    size_t roc_n;
    double roc_fpr[AUDIT_ROC_POINTS], roc_tpr[AUDIT_ROC_POINTS];
} audit_result;

/* Threshold choice on the first n_cal trials of each side, bounds on the rest, verdict. */
dp_status audit_analyze(audit_result *res, const audit_setup *s, const double *stat0, const double *stat1);
/* The whole audit: setup, trials, analysis. */
dp_status audit_run(audit_result *res, const audit_config *c);

/* The one-run audit (audit_onerun.c): m Dirac canaries, r guesses, K steps. */
typedef struct {
    int64_t m, r, v, included, steps;
    double eps_lb, eps_claim;
    audit_verdict verdict;
    char canary[16];         /* "dirac" (reference) or "input" (engine) */
    double seconds;
    char message[320];
} audit_onerun_result;
/* Reference: Dirac gradient canaries (gradient hook); engine (--impl optimized): input
 * canaries scored through the dual basis of their clipped gradients (audit_onerun_engine.c). */
dp_status audit_onerun(audit_onerun_result *res, const audit_config *c, int64_t m, int64_t r, int64_t steps);
dp_status audit_onerun_engine(audit_onerun_result *res, const audit_config *c, int64_t m, int64_t r, int64_t steps);
/* The one training run's configuration (both one-run audits): n examples, K steps, q, lr 0.1,
 * sigma and C of the audit through the plants, noise key key_{2,0}. */
dp_status audit_onerun_train_config(ref_dpsgd_config *rc, const audit_setup *s, int64_t n, int64_t steps);
/* Range checks of m, r, K (messages name --onerun-*). */
dp_status audit_onerun_check(int64_t m, int64_t r, int64_t steps);
/* The guesses (IN for the r/2 highest scores, OUT for the r/2 lowest), the epsilon lower
 * bound, the claim (PLD, K steps) and the verdict; in[k] the secret inclusion bits. */
dp_status audit_onerun_finish(audit_onerun_result *res, const audit_config *c, const int *in, const double *score,
                              int64_t m, int64_t r, int64_t steps, const char *kind);

/* The planted bugs that are a change of configuration (audit_release.c): sigma', C', key'. */
void audit_plant_params(double *sigma, double *clip, dp_noise_key *key, const audit_setup *s);

/* DP-SGD planted clip-after-sum release built from the reference's pieces (audit_plant.c). */
dp_status audit_plant_cas_release(double **private_grad, const audit_setup *s, const ref_dataset *d,
                                  dp_noise_key key, int64_t step);

#endif

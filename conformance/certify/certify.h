/* conformance/certify/certify.h — certifying third-party DP-SGD implementations
 * (docs/certification.md): test vectors, the reference of a step vector, black-box
 * statistical tests with stated false-reject probabilities and power, the run and evaluate
 * phases of `dpcert certify`, verdicts, and the report bundle (signed with Ed25519). */
#ifndef CONF_CERTIFY_H
#define CONF_CERTIFY_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/status.h"
#include "common/tensor.h"
#include "conformance/certify/certify_figs.h"
#include "conformance/compare/compare.h"
#include "reference/dpsgd.h"

#define CERT_VECTOR_FORMAT "dpcert-vector/1"
#define CERT_REPORT_FORMAT "dpcert-certification/1"

/* ---- test vectors (vectors.c) ---- */
/* ci: seconds, alpha 1e-6; certify: alpha 1e-9, power 0.999 against noise std 0.97 of the
 * claim; strict: the certify vectors, power 0.999 against 0.99 (docs/certification.md "Levels"). */
typedef enum { CERT_SUITE_CI = 0, CERT_SUITE_CERTIFY = 1, CERT_SUITE_STRICT = 2 } cert_suite;
dp_status cert_suite_parse(cert_suite *s, const char *what, const char *name);
const char *cert_suite_name(cert_suite s);
/* Writes every vector of `suite` to DIR/<name>.safetensors (atomically); names[] (malloc'd,
 * sorted) receive the file names when names != NULL. */
dp_status cert_vectors_write(const char *dir, cert_suite suite, char ***names, size_t *n);
/* SHA-256 (hex) of a vector: of its safetensors serialization without the vector_sha256
 * metadata entry. */
dp_status cert_vector_digest(char hex[65], const dp_tensor_set *v);
/* Sorted base names (without .safetensors) of the vector files of a directory. */
dp_status cert_list_vector_files(char ***names, size_t *n, const char *dir);

/* ---- the reference of a step vector (vecref.c) ---- */
typedef struct {
    ref_model_config mc;
    ref_dpsgd_config c;
    ref_model m;
    ref_dataset d;          /* the batch: n = B examples */
    ref_clip_groups g;
    conf_clip_conv conv;    /* the convention the factors were computed with */
    int64_t B;
    int G;
    double qn;              /* expected batch size (denominator) */
    double *loss, *norm;    /* [B] */
    double *gnorm, *cf;     /* [B, G] */
    int *dropped;           /* [B] */
    double **grad;          /* [P][B * numel] */
    double **sum;           /* [P][numel] clipped sums */
} cert_vecref;
/* Model and DP configuration of a step vector's metadata (docs/certification.md "Vectors"). */
dp_status cert_vector_config(ref_model_config *mc, ref_dpsgd_config *c, double *qn, const dp_tensor_set *v);
/* The model configuration of a step or dpzo vector's metadata. */
dp_status cert_vector_model(ref_model_config *mc, const dp_tensor_set *v);
/* The model (initialised here; free with ref_model_free, also on error) with the vector's
 * params.* and the batch (ref_dataset_free) of B examples. */
dp_status cert_vector_load(ref_model *m, ref_dataset *d, int64_t *B, const ref_model_config *mc, const dp_tensor_set *v);
/* Reference of step vector v under convention cv (NULL: the vector's own clip_fn). */
dp_status cert_vecref_compute(cert_vecref *r, const dp_tensor_set *v, const conf_clip_conv *cv);
void cert_vecref_free(cert_vecref *r);
/* The reference as an export set (names of docs/conformance.md) for `compare`. */
dp_status cert_vecref_export(dp_tensor_set *s, const cert_vecref *r, const dp_tensor_set *v, const char *clip_fn);

/* ---- the reference of a DP-ZO vector (certify_dpzo.c; docs/certification.md "DP-ZO") ----
 * For the directions z[p][j * numel_p + e] (n of them): the per-example losses at
 * theta +- phi z_j, the clipped differences (0 for a dropped, non-finite difference) and
 * their sums S_j in increasing example order, exactly as docs/dpzo.md step 2. */
typedef struct {
    int64_t B;
    int n;
    double *lp, *lm, *dc;   /* [n, B] */
    double *S;              /* [n] */
    int64_t dropped;
} cert_dpzo_ref;
dp_status cert_dpzo_reference(cert_dpzo_ref *r, const ref_model *m, const ref_dataset *d, double *const *z, int n,
                              double phi, double clip);
void cert_dpzo_ref_free(cert_dpzo_ref *r);

/* ---- statistics (certify_stats.c); every test is of the null hypothesis "iid N(0, 1)"
 * (noise, standardized) or "iid Bernoulli(q)" (sampling); alpha is a guaranteed bound on
 * the false-reject probability (no asymptotic approximation) ---- */
typedef struct {
    char name[96];          /* e.g. "noise variance" */
    char scope[160];        /* vector / tensor / repeats it covers */
    int status;             /* CERT_PASS / CERT_FAIL / CERT_INCOMPLETE */
    double statistic, lo, hi; /* accept iff lo <= statistic <= hi */
    double alpha;           /* false-reject bound */
    int64_t n;              /* samples */
    int vacuous;            /* sides of [lo, hi] that cannot reject any value the statistic can take:
                               1 the lower, 2 the upper (a negative lower bound for a count) */
    int need;               /* sides the check's purpose relies on (0: both, the default) */
    char msg[320];
} cert_check;
/* Sides a check relies on (cert_check.need; 0 means both). */
enum { CERT_NEED_LO = 1, CERT_NEED_HI = 2 };
enum { CERT_PASS = 0, CERT_INCOMPLETE = 1, CERT_FAIL = 2 };
const char *cert_status_name(int s); /* "PASS", "INCOMPLETE", "FAIL" */

/* Variance of standardized samples: sum z^2 / n in [lo, hi], the chi^2 Chernoff bound at alpha/2
 * per side (cert_variance_region). */
void cert_test_variance(cert_check *k, const double *z, int64_t n, double alpha);
/* The same from the sum of squares ss of n samples. */
void cert_test_variance_ss(cert_check *k, double ss, int64_t n, double alpha);
void cert_variance_region(double *lo, double *hi, int64_t n, double alpha);
/* The 1 - conf_alpha interval [lo, hi] of the std ratio from the variance statistic V of n draws. */
void cert_std_ratio_interval(double *lo, double *hi, double V, int64_t n, double conf_alpha);
/* Lower bound on the power of the variance test against std ratio s (variance s^2 times the claim). */
double cert_power_variance(int64_t n, double alpha, double s);
/* The largest std ratio s < 1 caught with probability >= power (the smallest under-noising a
 * run of n draws detects). */
double cert_detectable_std(int64_t n, double alpha, double power);
/* Mean: sum z / sqrt(n) in [-t, t], t = sqrt(2 ln(2/alpha)) (Chernoff). */
void cert_test_mean(cert_check *k, const double *z, int64_t n, double alpha);
/* Kolmogorov-Smirnov distance to Phi, threshold sqrt(ln(2/alpha) / (2n)) (DKW, Massart's constant). */
void cert_test_ks(cert_check *k, const double *z, int64_t n, double alpha);
/* Power lower bound of the KS test against an alternative at KS distance D from Phi. */
double cert_power_ks(int64_t n, double alpha, double D);
/* KS distance of N(0,1) to uniform / Laplace of variance 1 / N(0,1) rounded to a grid of step h. */
double cert_ks_distance_alt(int which, double h);
/* Products: T = sum a_k b_k of m pairs (independent N(0,1) under the null); two-sided Chernoff
 * threshold from E exp(l a b) = (1 - l^2)^(-1/2). */
void cert_test_products(cert_check *k, const double *a, const double *b, int64_t m, double alpha);
double cert_products_threshold(int64_t m, double alpha);
/* Bernoulli count: X of n trials with rate p, binomial Chernoff (relative entropy) two-sided. */
void cert_test_count(cert_check *k, int64_t x, int64_t n, double p, double alpha);
/* Power lower bound of that test against a rate p1. */
double cert_power_count(int64_t n, double p, double alpha, double p1);
/* Dispersion lower tail: S = sum_j (c_j - t p)^2 / (J t p q) over J independent Binomial(t, p)
 * counts, rejected below the Chernoff bound with the exact binomial moment generating
 * function. Catches fixed-size batches and epoch shuffling. */
void cert_test_dispersion(cert_check *k, const int64_t *c, int64_t J, int64_t t, double p, double alpha);
/* 1 when counts all equal to round(t p) are rejected (power against fixed sizes), else 0. */
double cert_power_dispersion_fixed(int64_t J, int64_t t, double p, double alpha);

/* ---- the certification (certify.c) ---- */
typedef struct {
    cert_suite suite;
    int64_t repeats;
    double alpha;           /* per test */
    double timeout_s;
    const char *candidate;  /* the command */
    const char *filter;     /* NULL, or a POSIX extended regex on vector names: a partial run,
                               whose verdict is at best INCOMPLETE */
    int persistent;         /* 1: --candidate-mode persistent (one process serves every request) */
    double run_timeout_s;   /* whole-run limit (0: none) */
    const char *scope;      /* NULL or "all"; "dpsgd": the step and sampling vectors only,
                               "dpzo": the dpzo vectors only (a complete run of that scope,
                               whose verdict names it; docs/certification.md "Scope") */
} cert_opts;
/* 1 when vector `name` belongs to scope (NULL or "all": every vector). */
int cert_scope_has(const char *scope, const char *name);
/* DP_ERR_USAGE naming --scope unless s is all, dpsgd or dpzo. */
dp_status cert_scope_check(const char *s);
/* The certify level's power claim: noise std <= CERT_CERTIFY_STD of the claim is caught with
 * probability >= CERT_CERTIFY_POWER (variance test, guaranteed lower bound). */
#define CERT_CERTIFY_STD 0.97
#define CERT_CERTIFY_POWER 0.999
/* The strict level's: std <= CERT_STRICT_STD caught with probability >= CERT_CERTIFY_POWER. */
#define CERT_STRICT_STD 0.99
/* The std ratio a suite's power claim is about (0: none, the ci level). */
double cert_suite_power_std(cert_suite s);
/* Noise draws per repeat: the parameters of the step vectors in `dir`. */
dp_status cert_noise_draws(int64_t *n, const char *dir);
/* The smallest repeats >= 2 meeting the power claim at alpha (capped at 1000); 2 when
 * per_repeat is 0 (no DP-SGD step vector, e.g. a run filtered to DP-ZO or sampling vectors).
 * The claim is power >= CERT_CERTIFY_POWER against noise std `std` of the claim. */
int64_t cert_repeats_needed(int64_t per_repeat, double alpha, double std);
/* Alpha per test and the repeats needed for the suite's power claim. */
void cert_suite_defaults(cert_opts *o);

/* A sampling test's guaranteed power against one deviation (docs/certification.md "Sampling"). */
typedef struct { char vector[48], deviation[80], test[80]; double power; } cert_spower;
#define CERT_MAX_SPOWER 24

typedef struct {
    cert_check *items;
    size_t n, cap;
    cert_spower spow[CERT_MAX_SPOWER];
    int nspow;
    int verdict;            /* CERT_PASS (CERTIFIED) / CERT_INCOMPLETE / CERT_FAIL (FAILED) */
    char first[600];        /* the first FAIL (or INCOMPLETE): check, scope, statistic */
    double sigma_eff_ratio, ratio_lo, ratio_hi; /* measured noise std / claimed, with a 1 - 1e-3 interval */
    double eps_claimed, eps_supported; /* cert_implied_epsilon at 1 and at ratio_lo (NaN without noise draws) */
    int64_t noise_n;
    double dpzo_ratio, dpzo_lo, dpzo_hi; /* DP-ZO scalar noise std / claimed and its 1 - 1e-3 interval */
    double dpzo_eps_supported; /* cert_implied_epsilon at dpzo_lo (NaN without DP-ZO draws) */
    int64_t dpzo_n;
    int64_t tensor_min_n;   /* draws of the smallest tensor tested alone (certify_noise.c) */
    double tensor_alpha;    /* the alpha of each per-tensor test */
    char conventions[512];  /* declared conventions of the candidate (dtype, clip_fn) */
    cert_figs figs;         /* the data of the report's plots (certify_figs.h) */
} cert_result;
void cert_result_init(cert_result *r);
void cert_result_free(cert_result *r);
dp_status cert_result_push(cert_result *r, const cert_check *k);
const char *cert_verdict_name(int v); /* "CERTIFIED", "INCOMPLETE", "FAILED" */
/* The "checks" array of report.json (result.c). */
json_t *cert_checks_json(const cert_result *r);

/* Run phase: for each vector in BUNDLE/vectors and each repeat, run the candidate into
 * BUNDLE/outputs/<vector>.r<k>.safetensors (kept); failures become records in
 * BUNDLE/outputs/<vector>.r<k>.status (one line "OUTCOME message"). */
dp_status cert_run(const char *bundle, const cert_opts *o, int verbose);
/* Evaluate phase: every check from the stored vectors and outputs (no candidate run). */
dp_status cert_evaluate(cert_result *r, const char *bundle, const cert_opts *o);

/* ---- reports and signatures (certify_report.c) ---- */
/* report.json (hashes of every vector and output, every check, verdict), report.md, junit.xml. */
dp_status cert_report_write(const char *bundle, const cert_result *r, const cert_opts *o, const char *command);
/* RDP epsilon of the reference run (q 0.01, 1000 steps, delta 1e-5) at noise multiplier sigma
 * (+inf when sigma <= 0 or the accountant has no finite bound); DP_ERR_NOMEM propagates (an
 * implied epsilon is never silently replaced). */
dp_status cert_implied_epsilon(double *eps, double sigma);
/* Ed25519 key pair (PEM, private key mode 0600). */
dp_status cert_keygen(const char *priv_path, const char *pub_path);
/* BUNDLE/report.json.sig = Ed25519(report.json bytes). */
dp_status cert_sign(const char *bundle, const char *priv_path);
/* 0 ok; DP_ERR_CHECK_FAILED with a message naming what does not verify. */
dp_status cert_verify_signature(const char *bundle, const char *pub_path);

#endif

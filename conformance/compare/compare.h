/* conformance/compare/compare.h — the comparison core (prefix conf_): tolerances derived
 * from forward error bounds (docs/tolerances.md), clip conventions, tensor-by-tensor
 * comparison of a reference export with a candidate export, its JSON form, the statistical
 * checks, and `dpcert compare` (docs/conformance.md). The bottom of conformance/: the
 * runner, certification, loss scaling and reproduction build on it, it on none of them.
 *
 * An export is a safetensors file (one step) or a directory of
 * step-NNNNNN.safetensors files written by `dpcert reference ... --export DIR` or
 * `dpcert train ... --export DIR` (tensor names in docs/conformance.md). */
#ifndef CONF_COMPARE_H
#define CONF_COMPARE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "common/tensor.h"

/* ---- statuses (ordered by severity, so the worst of several is the max) ---- */
typedef enum {
    CONF_PASS = 0,
    CONF_SKIPPED,        /* not compared (optional tensor absent, or compared statistically elsewhere) */
    CONF_NOT_SUPPORTED,  /* the candidate/backend cannot run this case */
    CONF_MARGINAL,       /* warn < fraction of budget used <= 1 */
    CONF_FAIL            /* fraction > 1, missing tensor, shape/dtype mismatch, NaN where the reference is finite */
} conf_status;
const char *conf_status_name(conf_status s); /* "PASS", "SKIPPED", "NOT_SUPPORTED", "MARGINAL", "FAIL" */
/* The worse of two statuses for a case: FAIL > MARGINAL > PASS; NOT_SUPPORTED and
 * SKIPPED only win over PASS when nothing passed (see conf_status_merge in compare.c). */
conf_status conf_status_worse(conf_status a, conf_status b);

/* ---- error-bound building blocks (tolerance.c; derivations in docs/tolerances.md) ---- */
/* Unit roundoff u of a dtype: 2^-53 (F64), 2^-24 (F32), 2^-8 (BF16), 2^-11 (F16); 0 for integers. */
double conf_unit_roundoff(dp_dtype dt);
/* gamma_n = n u / (1 - n u); +inf when n u >= 1 (no bound). */
double conf_gamma(double n, double u);
/* Bound on |fl(sum x_i) - sum x_i| for n terms in any order: gamma_{n-1} * sum|x_i|. */
double conf_bound_sum(double n, double sum_abs, double u);
/* Box-Muller standard normal evaluated in double on both sides (different libm
 * allowed, <= CONF_LIBM_ULPS ulps per call): absolute bound on |z~ - z|. */
#define CONF_LIBM_ULPS 4.0
#define CONF_BOXMULLER_RMAX 8.58 /* sqrt(-2 ln 2^-53): the largest radius an open-(0,1) uniform gives */
double conf_bound_boxmuller(double u_double);
/* fraction of budget used: |a-b| / bound (0 when a == b, +inf when bound == 0 and a != b,
 * +inf when exactly one is NaN or they are non-finite and differ). */
double conf_fraction(double ref, double cand, double bound);
/* Cancellation factor of the per-example gradient (docs/tolerances.md "Confident examples"):
 * the backward pass starts from p - e_y, whose y entry p_y - 1 cancels when the loss l is small;
 * kappa(l) = 1 / (1 - e^-l) (>= 1) multiplies the normwise relative error gamma_K. 1 for a
 * non-finite or negative l (the example is dropped or the value is not a loss), +inf for l = 0. */
double conf_cancel_factor(double loss);
/* Clip conventions a candidate may declare (metadata clip_fn, docs/certification.md):
 * "abadi" min(1, R/n); "abadi_eps:E" min(1, R/(n + E)) (Opacus: E = 1e-6);
 * "automatic" / "automatic:G" R/(n + G) (G default 0.01). */
typedef struct { int automatic; double eps; } conf_clip_conv;
/* 1 and *v when metadata `key` of s is a complete finite number, else 0 (*v untouched). */
int conf_meta_double(const dp_tensor_set *s, const char *key, double *v);
/* Parses a clip_fn string; DP_ERR_INVALID naming `what` on anything else. */
dp_status conf_clip_conv_parse(conf_clip_conv *c, const char *what, const char *s);
double conf_clip_conv_factor(const conf_clip_conv *c, double norm, double thresh);
/* The reference step `ref` re-clipped under convention `cv` (convention.c): clip factors
 * c'_i = f(n_i, R), clipped sums S' = S + sum_i (c'_i - c_i) g_i, private gradients
 * G' = G + (S' - S) / qN, and params_after of plain SGD shifted by -lr (G' - G) (other
 * optimizers' params_after are left out). Dropped examples keep factor 0. When the export
 * lacks what this needs (per-example gradients, thresholds), `why` says so and *out is a
 * plain copy. */
dp_status conf_ref_reclip(dp_tensor_set *out, char *why, size_t whylen, const dp_tensor_set *ref,
                          const conf_clip_conv *cv);

/* ---- comparison of one step ---- */
typedef struct {
    dp_dtype cand_dtype;   /* candidate's working precision (F64, F32 or BF16); the reference is F64 */
    double warn;           /* MARGINAL above this fraction of the budget (default 0.5) */
    int noise_statistical; /* 1: the candidate's noise is independent shares (not element-wise
                              comparable): step.noise is SKIPPED here (checked statistically) and
                              the private gradient is compared with the candidate's noise substituted */
    int64_t model_k;       /* reduction length K of the model's forward+backward (0: derive from the export) */
    int64_t noise_ranks;   /* noise shares: the candidate's rank count R (0: the candidate's metadata "ranks").
                              With the reference's noise_key in its metadata the summed shares are
                              recomputed and compared element by element (docs/tolerances.md) */
    int mixed;             /* 1: the candidate follows the mixed-precision recipe of docs/precision.md
                              (half storage in half_dtype, f32 compute: cand_dtype F32); the
                              per-example gradient model adds gamma_H(u_half) (docs/tolerances.md
                              "Mixed precision") */
    dp_dtype half_dtype;   /* DP_BF16 or DP_F16 when mixed */
    int dtype_given;       /* 1: cand_dtype/mixed/half_dtype were chosen (--dtype, --precision, a case's
                              dtype) and must agree with the candidate's declared precision (its
                              metadata "dtype": f64, f32, or bf16/fp16 = the mixed recipe), else
                              DP_ERR_INVALID; 0: taken from that metadata when present */
} conf_cmp_opts;
void conf_cmp_opts_default(conf_cmp_opts *o);

typedef struct {
    char name[160];        /* tensor name (prefixed "step-000003/" in directory comparisons) */
    conf_status status;
    double worst_frac;     /* max over elements of |cand - ref| / bound */
    double max_abs_err;
    int64_t worst_index;   /* flat index of the worst element (-1 if none) */
    double ref_val, cand_val, bound; /* at the worst element */
    int64_t numel;
    char msg[256];         /* why, for FAIL/SKIPPED/NOT_SUPPORTED */
} conf_tensor_result;

typedef struct {
    conf_tensor_result *items;
    size_t n, cap;
    size_t ncompared;      /* items with PASS, MARGINAL or FAIL */
    conf_status status;    /* worst over compared items; SKIPPED/NOT_SUPPORTED only if none compared */
    double worst_frac;     /* max over compared items */
    char first_fail[200];  /* name of the first FAIL tensor (in comparison order), "" if none */
    int incomplete;        /* > 0: a required check could not run (noise neither recomputed nor tested
                              statistically): the overall verdict is INCOMPLETE unless something FAILs */
    char incomplete_why[256];
    char arith[640];       /* the candidate's declared arithmetic (export metadata "arithmetic"; docs/tolerances.md
                              "Declared arithmetic"), "" when it declares none */
    double arith_u;        /* its u_eff (metadata "arith_u") when it exceeds the dtype's and was used as u_c, else 0 */
} conf_cmp_result;
/* "PASS", "MARGINAL", "FAIL" or "INCOMPLETE" (a FAIL wins over INCOMPLETE; INCOMPLETE over the rest). */
const char *conf_cmp_overall(const conf_cmp_result *r);
void conf_cmp_result_init(conf_cmp_result *r);
void conf_cmp_result_free(conf_cmp_result *r);
dp_status conf_cmp_result_push(conf_cmp_result *r, const conf_tensor_result *t);

/* Compare one reference step with one candidate step (both already read), appending
 * per-tensor results to `out` in the order of the issue: batch, per-example norms,
 * clip factors, clipped sums, noise, private gradients, updated parameters, loss.
 * `prefix` (may be "") is prepended to the names. Only bad options are errors;
 * disagreements are results. */
dp_status conf_compare_sets(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                            const conf_cmp_opts *o, const char *prefix);
/* The comparison's stages as data (compare_step.c): one line per row, tab-separated:
 * algorithm, stage number, tensor family, the docs/tolerances.md section deriving its bound. */
void conf_compare_stages_print(void *file);
/* Files or directories (each step-*.safetensors of ref must exist in cand). */
dp_status conf_compare_paths(conf_cmp_result *out, const char *ref_path, const char *cand_path,
                             const conf_cmp_opts *o);
/* Human-readable table of a result on f. */
void conf_cmp_print(const conf_cmp_result *r, void *file, int verbose);

/* ---- statistical checks (stats.c) ---- */
typedef struct {
    char name[128];
    conf_status status;    /* PASS or FAIL */
    double statistic, lo, hi; /* the statistic and its acceptance interval [lo, hi] */
    double alpha;          /* false-reject probability bound of the test */
    char msg[256];
} conf_stat_result;
/* Noise variance: x[0..n) should be iid N(0, var). Accept iff S = sum x^2 / var lies in
 * [n - 2 sqrt(n t), n + 2 sqrt(n t) + 2 t], t = ln(2/alpha) (Laurent-Massart 2000):
 * false-reject probability <= alpha. */
void conf_stat_noise_variance(conf_stat_result *r, const double *x, size_t n, double var, double alpha);
/* Poisson sampling: total inclusions X over `trials` Bernoulli(q) draws (N examples x S
 * steps). Accept iff |X - trials q| <= h, h = x/3 + sqrt(x^2/9 + 2 x trials q (1-q)),
 * x = ln(2/alpha) (Bernstein): false-reject probability <= alpha. */
void conf_stat_poisson(conf_stat_result *r, int64_t total, int64_t trials, double q, double alpha);

/* The JSON form of a comparison (report.json's "tensors" of a case, `compare --json`;
 * compare_json.c). */
json_t *conf_cmp_json(const conf_cmp_result *r);
/* A JSON number, or null where it is not finite (JSON has no infinity). */
json_t *conf_json_num(double v);

#endif

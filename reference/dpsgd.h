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
#include "common/spec_dpsgd.h"
#include "common/status.h"
#include "common/tensor.h"
#include "reference/model.h"
#include "reference/model_cli.h"

/* The configuration, groups and step-output structures, the option table and the export
 * writer are the neutral module common/spec_dpsgd.h; the ref_ names are its aliases. */
typedef dp_clip_style ref_clip_style;
#define REF_CLIP_FLAT DP_CLIP_FLAT
#define REF_CLIP_PER_LAYER DP_CLIP_PER_LAYER
#define REF_CLIP_GROUP DP_CLIP_GROUP
typedef dp_clip_fn ref_clip_fn;
#define REF_CLIPFN_ABADI DP_CLIPFN_ABADI
#define REF_CLIPFN_AUTOMATIC DP_CLIPFN_AUTOMATIC
typedef dp_optimizer ref_optimizer;
#define REF_OPT_SGD DP_OPT_SGD
#define REF_OPT_ADAMW DP_OPT_ADAMW
typedef dp_precision ref_precision;
#define REF_PREC_DOUBLE DP_PREC_DOUBLE
#define REF_PREC_MPFR DP_PREC_MPFR
#define REF_MAX_SPEC DP_MAX_SPEC
typedef dp_dpsgd_config ref_dpsgd_config;
#define ref_dpsgd_config_default dp_dpsgd_config_default
typedef dp_clip_groups ref_clip_groups;
typedef dp_dpsgd_step_out ref_dpsgd_step_out;
#define ref_dpsgd_step_free dp_dpsgd_step_free
#define ref_dpsgd_export_set dp_dpsgd_export_set
#define ref_dpsgd_export_write dp_dpsgd_export_write
typedef dp_dpsgd_cli ref_dpsgd_cli;
#define REF_DPSGD_NOPTS DP_DPSGD_NOPTS
#define ref_dpsgd_cli_init dp_dpsgd_cli_init
#define ref_dpsgd_cli_add_opts dp_dpsgd_cli_add_opts
#define ref_dpsgd_print_step dp_dpsgd_print_step

#define REF_MPFR_BITS 256

/* Every range check of the command line (messages name the option). */
dp_status ref_dpsgd_config_check(const ref_dpsgd_config *c);


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
 * DP_RNG_GAUSS_MAX (common/rng.h), and the first update lr * that / (1 - momentum) (sgd) or lr /
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

/* The option table's parsing (common/spec_dpsgd.h) validated by ref_dpsgd_config_check. */
dp_status ref_dpsgd_cli_finish(ref_model_config *mc, ref_dpsgd_config *c, const ref_dpsgd_cli *cli);
dp_status ref_dpsgd_cli_dataset(ref_dataset *d, const ref_model_config *mc, ref_dpsgd_config *c,
                                const ref_dpsgd_cli *cli);

/* `dpcert reference dpsgd ...` */
int dp_cmd_reference_dpsgd(int argc, char **argv);

#endif

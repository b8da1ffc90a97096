/* conformance/losscale/losscale.h — loss scaling under DP (docs/precision.md "Loss scaling").
 *
 * The pipelines of DP-ZeRO Table 4 (steps numbered as its Appendix C: 1 half forward,
 * 2 loss scaled by S, 3 half backward, 4 per-sample clipping and noise, 4* clipping at
 * threshold S C, 5 unscale by 1/S, 6 f32 update) and dynamic loss scaling, simulated on a
 * ghost-norm linear layer (per-example gradient g_i = a_i^T delta_i) with the half
 * rounding points of a real implementation; the check `losscale` that recognises each
 * mistake from what an export shows (norms, clipped sums, skipped steps); the
 * first-principles derivation of DP-ZeRO Table 3. */
#ifndef LS_LOSSCALE_H
#define LS_LOSSCALE_H

#include <stdint.h>
#include <stdio.h>

#include "common/status.h"
#include "common/tensor.h"

/* X(ID, "name", "steps", dp, scale, thresh_scaled, unscale, dynamic, "Table 4 fp16 issue")
 * dp: per-sample clipping (step 4); scale: step 2; thresh_scaled: 4* (threshold S C);
 * unscale: step 5; dynamic: S adapted, step skipped on overflow. */
#define LS_PIPELINES(X)                                                                 \
    X(NONDP, "nondp", "1-3-6", 0, 0, 0, 0, 0, "underflow")                                 \
    X(NONDP_SCALED, "nondp-scaled", "1-2-3-5-6", 0, 1, 0, 1, 0, "none")                    \
    X(STANDARD, "dp-standard", "1-2-3-4-5-6", 1, 1, 0, 1, 0, "overflow")                   \
    X(SCALED_CLIP, "dp-scaled-threshold", "1-2-3-4*-5-6", 1, 1, 1, 1, 0, "overflow")       \
    X(DPZERO, "dp-zero", "1-3-4-6", 1, 0, 0, 0, 0, "underflow")                            \
    X(NO_UNSCALE, "dp-no-unscale", "1-2-3-4-6", 1, 1, 0, 0, 0, "overflow")                 \
    X(DYNAMIC, "dp-dynamic", "1-2-3-4*-5-6 dyn", 1, 1, 1, 1, 1, NULL)

typedef enum {
#define LS_ID_(ID, ...) LS_##ID,
    LS_PIPELINES(LS_ID_)
#undef LS_ID_
    LS_COUNT
} ls_pipeline;

typedef struct {
    const char *name, *steps;
    int dp, scale, thresh_scaled, unscale, dynamic;
    const char *paper_issue; /* Table 4's "fp16 issue" column; NULL: not in the paper (dp-dynamic) */
} ls_pipeline_info;
extern const ls_pipeline_info ls_pipelines[LS_COUNT];
/* NULL-terminated names, index = ls_pipeline */
extern const char *const ls_pipeline_names[];

/* Verdicts of the check, most serious first (ls_verdict_name). */
#define LS_VERDICTS(X)                                                                  \
    X(PASS, "PASS")                                                                        \
    X(PASS_UNDERFLOW, "PASS (underflow)")                                                  \
    X(SKIP_RELEASE, "FAIL: data-dependent skip")                                           \
    X(OVERFLOW, "FAIL: overflow")                                                          \
    X(OVERSHRINK, "FAIL: over-shrink")                                                     \
    X(NOT_UNSCALED, "FAIL: loss scale not removed")                                        \
    X(MISMATCH, "FAIL: mismatch")                                                          \
    X(NONDP, "NON-DP")

typedef enum {
#define LS_V_(ID, s) LSV_##ID,
    LS_VERDICTS(LS_V_)
#undef LS_V_
    LSV_COUNT
} ls_verdict;
const char *ls_verdict_name(ls_verdict v);
static inline int ls_verdict_fails(ls_verdict v) {
    return v != LSV_PASS && v != LSV_PASS_UNDERFLOW && v != LSV_NONDP;
}

/* ---- the check on arrays (losscale_check.c) ----
 * cand_norm/ref_norm [B] per-example (total) norms, cand_sum/ref_sum [n] clipped sums
 * (all parameters concatenated), bound: the largest admissible ||cand_sum - ref_sum||_2
 * of a correct pipeline (derived by the caller), skipped: the step was skipped. */
typedef struct {
    ls_verdict verdict;
    int k;          /* the power of two of the signature (over-shrink / not unscaled) */
    double ratio;   /* <cand, ref> / <ref, ref> of the clipped sums */
    double rel_err; /* ||cand - ref|| / ||ref|| */
    double bound_frac; /* ||cand - ref|| / bound */
    char diag[256];
} ls_check;
/* ratio = <cs, rs> / <rs, rs>, rel_err = ||cs - rs|| / ||rs|| (NaN when rs = 0) */
void ls_ratio_err(double *ratio, double *rel_err, const double *cs, const double *rs, int64_t n);
void ls_check_arrays(ls_check *out, const double *cand_norm, const double *ref_norm, int64_t B,
                          const double *cand_sum, const double *ref_sum, int64_t n, double bound, int skipped,
                          int underflowed);

/* The check on exports: REF and CAND are step files or directories (dpsgd exports, the
 * engine's or a third party's); `dtype` the candidate's precision for the derived
 * tolerances of conformance/compare/compare.c. One line per step on `txt` (may be NULL); *worst
 * the most serious verdict over the steps. */
dp_status ls_check_exports(ls_verdict *worst, char *diag, size_t diaglen, const char *ref_path,
                                const char *cand_path, dp_dtype dtype, FILE *txt);

/* ---- the simulation (losscale_sim.c) ---- */
#define LS_BATCHES(X)                                                                   \
    X(TYPICAL, "typical", "DP-ZeRO Table 3 ranges: activations 1e-1..1e1, output grads 1e-3..1e-1") \
    X(SMALL, "small", "output grads 1e-9..1e-7: below fp16's smallest subnormal without scaling")   \
    X(LARGE, "large", "per-example gradient elements up to ~1.3e4: fp16 overflow once scaled")
typedef enum {
#define LS_B_(ID, ...) LSB_##ID,
    LS_BATCHES(LS_B_)
#undef LS_B_
    LSB_COUNT
} ls_batch_kind;
extern const char *const ls_batch_names[]; /* NULL-terminated */
extern const char *const ls_batch_what[];

/* A batch of B examples of one linear layer: a [B, T, d], delta [B, T, p] (f64). */
typedef struct {
    int64_t B, T, d, p;
    double *a, *delta;
} ls_batch;
/* Generated from the public seed (purpose DATA, stream = example, lane = kind). */
dp_status ls_batch_make(ls_batch *b, ls_batch_kind kind, uint64_t seed, int64_t B);
/* b with one example appended (the neighbouring dataset): a copy of example `like` whose
 * output gradient is multiplied by `factor`. */
dp_status ls_batch_neighbour(ls_batch *out, const ls_batch *b, int64_t like, double factor);
void ls_batch_free(ls_batch *b);

/* Dynamic loss scaling (torch GradScaler's rule): on overflow S /= 2 and the step is
 * skipped; after K steps without overflow S *= 2 (within [1, 2^24]). */
typedef struct {
    double S;
    int64_t K, good;
} ls_dynamic;
/* returns 1 when the step is skipped */
int ls_dynamic_update(ls_dynamic *d, int overflow);

typedef struct {
    ls_pipeline pipe;
    dp_dtype dtype;          /* DP_F16 or DP_BF16 */
    double S;                /* loss scale used (1 where the pipeline does not scale) */
    int64_t overflow;        /* half elements (scaled output grads, per-example grads) that became inf */
    int64_t underflow;       /* nonzero exact values stored as zero or subnormal halves */
    int64_t nonfinite_norms; /* per-example norms that are inf or NaN */
    int skipped;             /* dynamic: the step was skipped */
    double ratio, rel_err;   /* clipped sum against the f64 reference */
    ls_check check;     /* the losscale check on this pipeline's outputs (DP pipelines) */
} ls_result;

/* Runs pipeline `pipe` on batch b at `dtype` (DP_F16 or DP_BF16) with threshold C and
 * loss scale S (a power of two; the dynamic pipeline starts from *dyn's S and updates it).
 * The f64 reference: clipped sum of the exact a, delta at threshold C (non-DP pipelines:
 * the plain sum). */
dp_status ls_run(ls_result *r, ls_pipeline pipe, const ls_batch *b, dp_dtype dtype, double C,
                      double S, ls_dynamic *dyn);

/* ---- DP-ZeRO Table 3 from first principles (losscale_sim.c) ----
 * Columns: activation, output grad, ghost vec(a a^T), ghost vec(dL/ds dL/ds^T), clip
 * factor, param grad (not scaled down), param grad (scaled down); each a decade range
 * [lo, hi] (log10). Rows: standard w/o scaling, standard w/ scaling, DP w/o, DP w/. */
enum { LS_T3_ROWS = 4, LS_T3_COLS = 7 };
typedef struct {
    int na;            /* 1: "N/A" */
    int lo, hi;        /* log10 of the range */
} ls_t3_cell;
extern const char *const ls_t3_row_names[LS_T3_ROWS];
extern const char *const ls_t3_col_names[LS_T3_COLS];
/* The paper's Table 3 as printed. */
extern const ls_t3_cell ls_t3_paper[LS_T3_ROWS][LS_T3_COLS];
/* Derived: rows 0 and 2 (no scaling) are the paper's measured inputs; rows 1 and 3 follow
 * by multiplying by S = 10^s_log10 (output grad x S, ghost output product x S^2, clip
 * factor x 1/S when clipping is active, param grad not scaled down x S (standard) or x 1
 * (DP: the clip factor absorbs S), scaled down x 1/S more). */
void ls_t3_derive(ls_t3_cell out[LS_T3_ROWS][LS_T3_COLS], int s_log10);
/* fp16's range check of a decade range: 1 overflow (10^hi > 65504), -1 underflow
 * (10^lo < 2^-24), 0 inside. */
int ls_t3_fp16_issue(const ls_t3_cell *c);

/* ---- `dpcert losscale` pieces shared with the reproduce target (cmd_losscale.c) ---- */
struct json_t;
/* The side-by-side table as JSON rows (every pipeline x batch x dtype; keep[pipeline] = 0
 * leaves a pipeline out, keep NULL keeps all), the neighbouring datasets demonstration and
 * the Table 3 rows; prints the table on txt (may be NULL). dtypes_mask: 1 fp16, 2 bf16.
 * *nfail: rows whose verdict differs from the expected one (docs/precision.md). */
dp_status ls_report(struct json_t *root, int *nfail, uint64_t seed, double S, double C, int64_t B,
                         int dtypes_mask, const int *keep, FILE *txt);

#endif

/* conformance/losscale/losscale_sim.c — the loss-scaling pipelines of DP-ZeRO Table 4 simulated
 * on one linear layer with the half rounding points of a real implementation, the
 * dynamic scaler, and Table 3 derived from first principles (docs/precision.md "Loss
 * scaling"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/alloc.h"
#include "conformance/compare/compare.h"
#include "conformance/losscale/losscale.h"

#define LS_INFO_(ID, name, steps, dp, sc, ts, un, dyn, issue) {name, steps, dp, sc, ts, un, dyn, issue},
const ls_pipeline_info ls_pipelines[LS_COUNT] = {LS_PIPELINES(LS_INFO_)};
#undef LS_INFO_
#define LS_NAME_(ID, name, ...) name,
const char *const ls_pipeline_names[] = {LS_PIPELINES(LS_NAME_) NULL};
#undef LS_NAME_
#define LSB_NAME_(ID, name, what) name,
const char *const ls_batch_names[] = {LS_BATCHES(LSB_NAME_) NULL};
#undef LSB_NAME_
#define LSB_WHAT_(ID, name, what) what,
const char *const ls_batch_what[] = {LS_BATCHES(LSB_WHAT_) NULL};
#undef LSB_WHAT_

/* The layer: T positions, d inputs, p outputs (per-example gradient [d, p]). */
enum { LS_T = 4, LS_D = 8, LS_P = 8 };

/* log10 ranges of |a| (per element) and of the per-example output-gradient magnitude */
static const double KIND_RANGE[LSB_COUNT][4] = {
    [LSB_TYPICAL] = {-1, 1, -2.5, 0},
    [LSB_SMALL] = {-1, 1, -8, -6.5},
    [LSB_LARGE] = {0, 1, 0.5, 1.5},
};

void ls_batch_free(ls_batch *b) {
    dp_free(b->a);
    dp_free(b->delta);
    memset(b, 0, sizeof *b);
}

static dp_status batch_alloc(ls_batch *b, int64_t B) {
    memset(b, 0, sizeof *b);
    if (B < 1 || B > 1000000) return dp_error(DP_ERR_INVALID, "losscale: batch size must be in [1, 1000000], got %lld", (long long)B);
    b->B = B; b->T = LS_T; b->d = LS_D; b->p = LS_P;
    b->a = dp_malloc(sizeof(double) * (size_t)(B * LS_T * LS_D));
    b->delta = dp_malloc(sizeof(double) * (size_t)(B * LS_T * LS_P));
    if (!b->a || !b->delta) { ls_batch_free(b); return dp_error(DP_ERR_NOMEM, "losscale: out of memory"); }
    return DP_OK;
}

/* v = sign * 10^(lo + (hi - lo) U) from two uniforms of the stream */
static double log_uniform(const dp_stream *s, uint64_t i, double lo, double hi) {
    double sg = dp_rng_uniform(s, 2 * i) < 0.5 ? -1.0 : 1.0;
    return sg * pow(10.0, lo + (hi - lo) * dp_rng_uniform(s, 2 * i + 1));
}

dp_status ls_batch_make(ls_batch *b, ls_batch_kind kind, uint64_t seed, int64_t B) {
    if (kind < 0 || kind >= LSB_COUNT) return dp_error(DP_ERR_INVALID, "losscale: unknown batch kind");
    DP_TRY(batch_alloc(b, B));
    const double *r = KIND_RANGE[kind];
    for (int64_t i = 0; i < B; i++) {
        dp_stream s;
        dp_status st = dp_stream_public(&s, (dp_seed){seed}, DP_PURPOSE_DATA, (uint32_t)i, (uint32_t)kind);
        if (st != DP_OK) { ls_batch_free(b); return st; }
        for (int64_t e = 0; e < LS_T * LS_D; e++) b->a[i * LS_T * LS_D + e] = log_uniform(&s, (uint64_t)e, r[0], r[1]);
        /* the example's magnitude m, then delta = m * (+-U(0.5, 1)) */
        double m = fabs(log_uniform(&s, 1000, r[2], r[3]));
        for (int64_t e = 0; e < LS_T * LS_P; e++)
            b->delta[i * LS_T * LS_P + e] = m * log_uniform(&s, 2000 + (uint64_t)e, log10(0.5), 0);
    }
    return DP_OK;
}

dp_status ls_batch_neighbour(ls_batch *out, const ls_batch *b, int64_t like, double factor) {
    if (like < 0 || like >= b->B) return dp_error(DP_ERR_INVALID, "losscale: no example %lld to copy", (long long)like);
    DP_TRY(batch_alloc(out, b->B + 1));
    const int64_t na = b->T * b->d, nd = b->T * b->p;
    memcpy(out->a, b->a, sizeof(double) * (size_t)(b->B * na));
    memcpy(out->delta, b->delta, sizeof(double) * (size_t)(b->B * nd));
    memcpy(out->a + b->B * na, b->a + like * na, sizeof(double) * (size_t)na);
    for (int64_t e = 0; e < nd; e++) out->delta[b->B * nd + e] = factor * b->delta[like * nd + e];
    return DP_OK;
}

int ls_dynamic_update(ls_dynamic *d, int overflow) {
    if (overflow) {
        if (d->S > 1) d->S *= 0.5;
        d->good = 0;
        return 1;
    }
    if (++d->good >= d->K) {
        if (d->S < 16777216.0) d->S *= 2;
        d->good = 0;
    }
    return 0;
}

/* ---------------------------------------------------------------- rounding points */
typedef struct {
    dp_dtype dt;
    int64_t overflow, underflow;
} half_ctx;

/* x (exact, f64) stored in the half type: f64 -> f32 (C cast) -> half (common/tensor.h,
 * round to nearest even); counts inf from a finite x and zero from a nonzero x. */
static float to_half(half_ctx *h, double x) {
    float f = (float)x;
    float v = h->dt == DP_F16 ? dp_f16_to_f32(dp_f32_to_f16(f)) : dp_bf16_to_f32(dp_f32_to_bf16(f));
    if (isfinite(x) && !isfinite(v)) h->overflow++;
    else if (x != 0 && v == 0) h->underflow++;
    return v;
}

/* half of the smallest subnormal: the absolute rounding error of a value that underflows */
static double half_eta(dp_dtype dt) { return dt == DP_F16 ? ldexp(1.0, -25) : ldexp(1.0, -134); }
static double half_max(dp_dtype dt) { return dt == DP_F16 ? 65504.0 : (double)3.3895313892515355e38; }

/* ---------------------------------------------------------------- one pipeline */
dp_status ls_run(ls_result *r, ls_pipeline pipe, const ls_batch *b, dp_dtype dtype, double C,
                      double S, ls_dynamic *dyn) {
    memset(r, 0, sizeof *r);
    if (pipe < 0 || pipe >= LS_COUNT) return dp_error(DP_ERR_INVALID, "losscale: unknown pipeline");
    if (dtype != DP_F16 && dtype != DP_BF16) return dp_error(DP_ERR_INVALID, "losscale: dtype must be fp16 or bf16");
    const ls_pipeline_info *pi = &ls_pipelines[pipe];
    if (pi->dynamic && !dyn) return dp_error(DP_ERR_INVALID, "losscale: the dynamic pipeline needs a scaler state");
    const double Se = !pi->scale ? 1.0 : pi->dynamic ? dyn->S : S;
    int ex;
    if (!(Se > 0) || !isfinite(Se) || frexp(Se, &ex) != 0.5)
        return dp_error(DP_ERR_INVALID, "losscale: the loss scale must be a positive finite power of two (got %g)", Se);
    const int64_t B = b->B, T = b->T, d = b->d, p = b->p, n = d * p;
    r->pipe = pipe; r->dtype = dtype; r->S = Se;
    half_ctx h = {dtype, 0, 0};
    double *ref = dp_calloc((size_t)n, sizeof(double)), *g = dp_malloc(sizeof(double) * (size_t)n);
    double *sum64 = dp_calloc((size_t)n, sizeof(double));
    float *sum = dp_calloc((size_t)n, sizeof(float)), *gh = dp_malloc(sizeof(float) * (size_t)n);
    float *ah = dp_malloc(sizeof(float) * (size_t)(T * d)), *dh = dp_malloc(sizeof(float) * (size_t)(T * p));
    double *cn = dp_malloc(sizeof(double) * (size_t)B), *rn = dp_malloc(sizeof(double) * (size_t)B);
    if (!ref || !g || !sum64 || !sum || !gh || !ah || !dh || !cn || !rn) {
        dp_free(ref); dp_free(g); dp_free(sum64); dp_free(sum); dp_free(gh); dp_free(ah); dp_free(dh); dp_free(cn); dp_free(rn);
        return dp_error(DP_ERR_NOMEM, "losscale: out of memory");
    }
    const double u = conf_unit_roundoff(dtype), u32 = conf_unit_roundoff(DP_F32), eta = half_eta(dtype);
    const double eps_el = 4 * u + 2 * conf_gamma((double)T, u32), gam_n = conf_gamma((double)(n + 2), u32);
    double bound = 0, bsum = 0;
    int nonfinite_any = 0;
    for (int64_t i = 0; i < B; i++) {
        const double *a = b->a + i * T * d, *dl = b->delta + i * T * p;
        /* step 1/3: half activations and (scaled, step 2) output gradients */
        for (int64_t e = 0; e < T * d; e++) { half_ctx q = {dtype, 0, 0}; ah[e] = to_half(&q, a[e]); }
        for (int64_t e = 0; e < T * p; e++) dh[e] = to_half(&h, Se * dl[e]);
        /* per-example gradient: f32 accumulation over T, stored in half; the f64 reference
         * and the element bound E (docs/precision.md) alongside */
        double gn2 = 0, e2 = 0;
        float nsq = 0;
        for (int64_t j = 0; j < d; j++)
            for (int64_t k = 0; k < p; k++) {
                float acc = 0;
                double ex64 = 0, M = 0, A1 = 0;
                for (int64_t t = 0; t < T; t++) {
                    acc += ah[t * d + j] * dh[t * p + k];
                    ex64 += a[t * d + j] * dl[t * p + k];
                    M += fabs(a[t * d + j]) * fabs(Se * dl[t * p + k]);
                    A1 += fabs(a[t * d + j]) + fabs(Se * dl[t * p + k]);
                }
                /* overflow counted here, underflow only on the output gradients (what loss
                 * scaling protects; a per-example gradient element may cancel to 0 anyway) */
                half_ctx q = {dtype, 0, 0};
                gh[j * p + k] = to_half(&q, (double)acc);
                h.overflow += q.overflow;
                g[j * p + k] = ex64;
                gn2 += ex64 * ex64;
                double E = eps_el * M + eta * ((1 + u) * A1 + (double)T * eta + 1);
                e2 += E * E;
                nsq += gh[j * p + k] * gh[j * p + k];
            }
        /* DP only: the ghost-norm Gram of the (scaled) output gradients, formed in half as
         * in Table 3; an overflowing entry makes the norm inf, as in a ghost-norm
         * implementation (its overflows are counted; the norm's value is taken from the
         * instantiated half gradient, so its underflows are not) */
        int gram_ovf = 0;
        for (int64_t t = 0; pi->dp && t < T; t++)
            for (int64_t t2 = 0; t2 <= t; t2++) {
                float acc = 0;
                half_ctx q = {dtype, 0, 0};
                for (int64_t k = 0; k < p; k++) acc += dh[t * p + k] * dh[t2 * p + k];
                if (!isfinite(to_half(&q, (double)acc))) gram_ovf = 1;
                h.overflow += q.overflow;
            }
        float nrm = gram_ovf ? INFINITY : sqrtf(nsq);
        const double nref = sqrt(gn2), ei = sqrt(e2) / Se;
        /* step 4 (4*: threshold S C) */
        float c = 1.0f;
        double cref = 1.0;
        if (pi->dp) {
            float thr = (float)(pi->thresh_scaled ? Se * C : C);
            c = nrm > thr ? thr / nrm : (nrm <= thr ? 1.0f : NAN); /* NaN norm: NaN factor */
            cref = nref > C ? C / nref : 1.0;
        }
        for (int64_t e = 0; e < n; e++) {
            sum[e] += c * gh[e];
            ref[e] += cref * g[e];
        }
        if (!isfinite(nrm)) { r->nonfinite_norms++; nonfinite_any = 1; }
        for (int64_t e = 0; e < n; e++) nonfinite_any |= !isfinite(gh[e]);
        /* exported norm: unscaled where the pipeline knows S is in the gradient */
        cn[i] = (pi->thresh_scaled || !pi->scale) ? (double)nrm / Se : (double)nrm;
        rn[i] = nref;
        /* the bound of a correct pipeline's term c g (unscaled units) */
        double dn = ei + gam_n * (nref + ei), dc = 0;
        if (pi->dp) dc = dn / fmax(C, nref - dn) + 2 * u32 * cref;
        bound += dc * (nref + ei) + cref * ei + u32 * cref * (nref + ei);
        bsum += cref * (nref + ei);
    }
    bound += conf_gamma((double)B, u32) * bsum + sqrt((double)n) * ldexp(1.0, -150);
    /* step 5: unscale in f32 (exact for a power of two unless it underflows) */
    const float inv = (float)(1.0 / Se);
    for (int64_t e = 0; e < n; e++) sum64[e] = pi->unscale ? (double)(sum[e] * inv) : (double)sum[e];
    if (pi->dynamic) r->skipped = ls_dynamic_update(dyn, nonfinite_any);
    r->overflow = h.overflow;
    r->underflow = h.underflow;
    ls_ratio_err(&r->ratio, &r->rel_err, sum64, ref, n);
    if (pi->dp)
        ls_check_arrays(&r->check, cn, rn, B, sum64, ref, n, bound, r->skipped || pi->dynamic, h.underflow > 0);
    else {
        r->check.verdict = LSV_NONDP;
        r->check.ratio = r->ratio;
        r->check.rel_err = r->rel_err;
        snprintf(r->check.diag, sizeof r->check.diag, "no per-sample clipping: not DP (a control)");
    }
    if (pi->dynamic && r->check.verdict == LSV_SKIP_RELEASE)
        snprintf(r->check.diag, sizeof r->check.diag,
                 r->skipped ? "data-dependent release: the step was skipped on overflow (S now %g); whether it is "
                              "depends on private examples"
                            : "data-dependent release: the skip decision reads the unclipped, un-noised gradients "
                              "(not skipped this time; S now %g)",
                 dyn->S);
    dp_free(ref); dp_free(g); dp_free(sum64); dp_free(sum); dp_free(gh); dp_free(ah); dp_free(dh); dp_free(cn); dp_free(rn);
    return DP_OK;
}

/* ---------------------------------------------------------------- Table 3 */
const char *const ls_t3_row_names[LS_T3_ROWS] = {"standard w/o scaling", "standard w/ scaling", "DP w/o scaling",
                                                     "DP w/ scaling"};
const char *const ls_t3_col_names[LS_T3_COLS] = {"activation a",         "output grad dL/ds",
                                                     "ghost vec(a a^T)",     "ghost vec(dL/ds dL/ds^T)",
                                                     "clipping factor",      "param grad (not scaled down)",
                                                     "param grad (scaled down)"};
#define NA_ {1, 0, 0}
const ls_t3_cell ls_t3_paper[LS_T3_ROWS][LS_T3_COLS] = {
    {{0, -3, 2}, {0, -8, 1}, NA_, NA_, {0, 0, 0}, {0, -7, 1}, {0, -7, 1}},
    {{0, -3, 2}, {0, -5, 4}, NA_, NA_, {0, 0, 0}, {0, -4, 4}, {0, -7, 1}},
    {{0, -3, 2}, {0, -8, 1}, {0, 2, 3}, {0, -6, 0}, {0, -3, 2}, {0, -7, 1}, {0, -7, 1}},
    {{0, -3, 2}, {0, -5, 4}, {0, 2, 3}, {0, 0, 6}, {0, -6, -1}, {0, -7, 1}, {0, -10, -2}},
};
#undef NA_

static ls_t3_cell shift(ls_t3_cell c, int by) {
    if (!c.na) { c.lo += by; c.hi += by; }
    return c;
}

void ls_t3_derive(ls_t3_cell out[LS_T3_ROWS][LS_T3_COLS], int s) {
    for (int r = 0; r < LS_T3_ROWS; r += 2) {
        const int dp = r == 2;
        memcpy(out[r], ls_t3_paper[r], sizeof out[r]); /* the measured unscaled rows */
        ls_t3_cell *w = out[r + 1];
        const ls_t3_cell *o = ls_t3_paper[r];
        w[0] = o[0];                  /* activations do not see the loss */
        w[1] = shift(o[1], s);        /* dL/ds is linear in L: x S */
        w[2] = o[2];                  /* a a^T: unchanged */
        w[3] = shift(o[3], 2 * s);    /* a product of two scaled gradients: x S^2 */
        /* clip factor C / ||S g|| = (1/S) C / ||g|| when clipping is active; 1 without DP */
        w[4] = dp ? shift(o[4], -s) : o[4];
        /* param grad before step 5: c_S S g = c g (DP: clipping absorbs S) or S g */
        w[5] = dp ? o[5] : shift(o[5], s);
        /* after step 5 (x 1/S): DP over-shrinks by 1/S, standard recovers g */
        w[6] = dp ? shift(o[6], -s) : o[6];
    }
}

int ls_t3_fp16_issue(const ls_t3_cell *c) {
    if (c->na) return 0;
    if (pow(10.0, c->hi) > half_max(DP_F16)) return 1;
    if (pow(10.0, c->lo) < ldexp(1.0, -24)) return -1;
    return 0;
}

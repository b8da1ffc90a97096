/* conformance/compare/compare_step.c — one step of a candidate export against the reference,
 * stage by stage in the order of docs/tolerances.md (a table: each stage a tensor family and
 * its bound), and the entries: two tensor sets (conf_compare_sets), two files or two export
 * directories with the bounds carried from step to step (conf_compare_paths). The element-wise
 * comparison and the result are compare.c's; DP-ZO's stages are compare_dpzo.c's.
 *
 * Notation (as in docs/tolerances.md): u = u_cand + u_ref (u_ref = 2^-53), B the
 * batch size, P the number of trainable scalars, K the model's reduction length,
 * n_i the reference per-example norm, c_i the reference clip factor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "common/alloc.h"
#include "common/safetensors.h"
#include "conformance/compare/compare_int.h"

/* c x, with 0 x inf = 0: a term whose coefficient is exactly zero contributes nothing, even
 * when the error bound it multiplies is infinite. */
static double zmul(double c, double x) { return c == 0 ? 0.0 : c * x; }

/* ---- the model constants K and P (docs/tolerances.md, "model constants") ---- */
static void model_consts(const dp_tensor_set *ref, int64_t k_opt, double *K, double *P, int64_t *T) {
    double k = 0, p = 0;
    int np = 0;
    int64_t seq = 1;
    const dp_tensor *tok = dp_tset_find(ref, "batch.tokens");
    if (tok && tok->ndim == 2) seq = tok->shape[1];
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "params.", 7) != 0) continue;
        const dp_tensor *t = &ref->items[i].t;
        for (int d = 0; d < t->ndim; d++) k += (double)t->shape[d];
        p += (double)dp_tensor_numel(t);
        np++;
    }
    k += (4.0 * (double)seq + 8.0) * np;
    *K = k_opt > 0 ? (double)k_opt : k;
    *P = p;
    *T = seq;
}

/* Mixed precision (docs/tolerances.md "Mixed precision"): the half rounding points on the
 * path of a per-example gradient, H = 5 L + 2 with L the number of params.* tensors of
 * two or more dimensions (the linear layers: input, weight, output, output gradient and
 * the input gradient it passes on; plus the stored per-example gradient and the direct
 * parameters' path). */
static double linear_tensors(const dp_tensor_set *ref) {
    double L = 0;
    for (size_t i = 0; i < ref->n; i++)
        if (strncmp(ref->items[i].name, "params.", 7) == 0 && ref->items[i].t.ndim >= 2) L++;
    return L;
}

static double half_points(const dp_tensor_set *ref) { return 5.0 * linear_tensors(ref) + 2.0; }

/* ---- the step comparison ---- */
static double noise_draw_bound(double u_ref) {
    double bm = conf_bound_boxmuller(u_ref);
    /* Laplace by inversion: x = -sgn(d) ln(1 - 2|d|), 1-2|d| exact, |x| <= 36.04:
       ln <= L ulps relative, negation exact: |dx| <= 36.04 (L + 1) u. */
    double lap = 36.04 * (CONF_LIBM_ULPS + 1.0) * u_ref;
    return bm > lap ? bm : lap;
}

/* The reference values with every element where both sides are non-finite replaced by the
 * candidate's (a dropped example: its norm and loss are NaN or inf on both sides, in whatever
 * combination; docs/tolerances.md "Dropped examples") into *out. NULL when the shapes differ
 * (then the plain comparison runs); DP_ERR_NOMEM when it cannot be had (never a silent fallback). */
static dp_status nonfinite_agree(double **out, const dp_tensor *r, const dp_tensor *c) {
    *out = NULL;
    int64_t n = dp_tensor_numel(r);
    if (!conf_same_shape(r, c)) return DP_OK;
    double *v = *out = dp_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return DP_ERR_NOMEM;
    for (int64_t e = 0; e < n; e++) {
        double a = dp_tensor_get(r, e), b = dp_tensor_get(c, e);
        v[e] = (!isfinite(a) && !isfinite(b)) ? b : a;
    }
    return DP_OK;
}

/* One step's comparison (compare_step_body): the inputs, the constants of the error model
 * (conf_consts), the bounds handed between stages and to the next step (bs), and what the
 * stages share: the batch size B, the per-example relative norm bounds, the clip factor
 * bounds of stage 3 used by stage 4, and two scratch buffers. */
typedef struct {
    conf_cmp_result *out;
    const dp_tensor_set *ref, *cand;
    const conf_cmp_opts *o;
    const char *prefix;
    const conf_bstore *carry_in;
    conf_bstore *carry_out;
    conf_consts k;
    conf_bstore bs;
    int64_t B;            /* examples of the step */
    double step_no;       /* metadata "step" (1 when absent) */
    double *kap, *rhoi;   /* [B] cancellation factor and relative norm bound of each example */
    const dp_tensor *rn;  /* the reference's per_sample.norm (NULL: none) */
    double *nrm;          /* its values in f64 */
    double *cmax, *dcv, *dg, *nv; /* [B] largest clip factor, its bound, the gradient's bound, the norm */
    double *bnd, *tmp;    /* scratch */
} conf_step_cmp;

/* The constants of the error model (docs/tolerances.md): unit roundoffs, the reduction lengths
 * K (with a declared arithmetic) and P, the mixed-precision terms, rho and the noise draw bound. */
static dp_status step_consts(conf_step_cmp *s) {
    if (s->o->cand_dtype != DP_F64 && s->o->cand_dtype != DP_F32 && s->o->cand_dtype != DP_BF16 && s->o->cand_dtype != DP_F16)
        return dp_error(DP_ERR_INVALID, "--dtype must be f64, f32, bf16 or f16");
    if (!(s->o->warn > 0 && s->o->warn < 1)) return dp_error(DP_ERR_INVALID, "warn fraction must be in (0, 1), got %g", s->o->warn);
    s->k.uc = conf_unit_roundoff(s->o->cand_dtype);
    /* a declared arithmetic (docs/tolerances.md "Declared arithmetic"): u_c = max(u(dtype), arith_u); GEMM
     * operands rounded at arith_u_in > 0 add two roundings per product in each of a linear layer's three
     * GEMMs: K += 6 per tensor of two or more dimensions */
    double du = 0, du_in = 0;
    {
        const char *decl = dp_tset_meta(s->cand, "arithmetic");
        if (decl && !s->out->arith[0]) snprintf(s->out->arith, sizeof s->out->arith, "%s", decl);
        static const char *const keys[2] = {"arith_u", "arith_u_in"};
        for (int i = 0; i < 2; i++) {
            const char *a = dp_tset_meta(s->cand, keys[i]);
            char *end = NULL;
            double x = a ? strtod(a, &end) : 0;
            if (a && (!end || *end || !(x >= 0 && x < 0.5)))
                return dp_error(DP_ERR_FORMAT, "candidate metadata %s '%s' is not a number in [0, 0.5)", keys[i], a);
            *(i ? &du_in : &du) = x;
        }
        if (du > s->k.uc) { s->k.uc = du; s->out->arith_u = du; }
    }
    s->k.u = s->k.uc + conf_unit_roundoff(DP_F64);
    int64_t T;
    model_consts(s->ref, s->o->model_k, &s->k.K, &s->k.P, &T);
    if (du_in > 0) s->k.K += 6 * linear_tensors(s->ref);
    s->k.gK = conf_gamma(s->k.K, s->k.u);
    s->k.H = s->k.gH = s->k.L = s->k.uh = 0;
    if (s->o->mixed) {
        if (s->o->cand_dtype != DP_F32 || (s->o->half_dtype != DP_BF16 && s->o->half_dtype != DP_F16))
            return dp_error(DP_ERR_INVALID, "mixed precision: the candidate computes in f32 with bf16 or f16 storage");
        s->k.H = half_points(s->ref);
        s->k.L = linear_tensors(s->ref);
        s->k.uh = conf_unit_roundoff(s->o->half_dtype);
        s->k.gH = conf_gamma(s->k.H, s->k.uh);
        s->k.gK += s->k.gH;
    }
    s->k.rho = s->k.gK + (conf_gamma(s->k.P, s->k.u) / 2 + s->k.u) * (1 + s->k.gK);
    s->k.bz = noise_draw_bound(conf_unit_roundoff(DP_F64));
    s->step_no = 1;
    {
        static const char *const kst[] = {"step", NULL};
        conf_meta_num(s->ref, &s->step_no, kst);
    }
    return DP_OK;
}

/* 1. batch (exact) and data; input parameters. */
static dp_status step_inputs(conf_step_cmp *s) {
    dp_status st = DP_OK;
    static const char *const exact_names[] = {"batch.indices", "batch.tokens", "batch.y", NULL};
    for (int i = 0; exact_names[i]; i++) {
        const dp_tensor *r = dp_tset_find(s->ref, exact_names[i]), *c = dp_tset_find(s->cand, exact_names[i]);
        if (!r) continue;
        if (!c) { DP_TRY(conf_cmp_push_missing(s->out, s->prefix, exact_names[i], "candidate")); continue; }
        DP_TRY(conf_cmp_elems(s->out, s->prefix, exact_names[i], r, c, NULL, NULL, s->o->warn));
    }
    const dp_tensor *bi = dp_tset_find(s->ref, "batch.indices");
    if (bi) s->B = bi->ndim >= 1 ? bi->shape[0] : 0;
    /* rows of per-sample tensors, for references that do not export the indices */
    for (size_t i = 0; s->B < 0 && i < s->ref->n; i++)
        if (strcmp(s->ref->items[i].name, "per_sample.norm") == 0 || strcmp(s->ref->items[i].name, "per_sample.loss") == 0)
            s->B = s->ref->items[i].t.ndim >= 1 ? s->ref->items[i].t.shape[0] : 0;
    if (s->B < 0) s->B = 0;
    /* per-example relative norm bound rho_i with the cancellation factor of confident examples
       (docs/tolerances.md "Confident examples"): rho_i = gamma_K kappa_i + (gamma_P/2 + u)(1 + gamma_K kappa_i) */
    s->kap = dp_malloc((size_t)(s->B ? s->B : 1) * sizeof *s->kap);
    s->rhoi = dp_malloc((size_t)(s->B ? s->B : 1) * sizeof *s->rhoi);
    if (!s->kap || !s->rhoi) return DP_ERR_NOMEM;
    {
        const dp_tensor *rl = dp_tset_find(s->ref, "per_sample.loss");
        int have_l = rl && dp_tensor_numel(rl) == s->B;
        for (int64_t b = 0; b < s->B; b++) {
            s->kap[b] = have_l ? conf_cancel_factor(dp_tensor_get(rl, b)) : 1.0;
            double gk = s->k.gK * s->kap[b];
            s->rhoi[b] = isfinite(gk) ? gk + (conf_gamma(s->k.P, s->k.u) / 2 + s->k.u) * (1 + gk) : INFINITY;
        }
    }

    /* data and input parameters: the candidate stores them in its dtype: |d| <= u_c |x|. */
    for (size_t i = 0; i < s->ref->n; i++) {
        const char *nm = s->ref->items[i].name;
        if (strcmp(nm, "batch.x") != 0 && strncmp(nm, "params.", 7) != 0) continue;
        const dp_tensor *r = &s->ref->items[i].t, *c = dp_tset_find(s->cand, nm);
        if (!c) { DP_TRY(conf_cmp_push_missing(s->out, s->prefix, nm, "candidate")); continue; }
        int64_t n = dp_tensor_numel(r);
        dp_free(s->bnd);
        s->bnd = dp_malloc((size_t)(n ? n : 1) * sizeof *s->bnd);
        if (!s->bnd) return DP_ERR_NOMEM;
        /* later steps: the candidate's parameters are its previous update, whose bound is carried */
        const double *carried = s->carry_in && strncmp(nm, "params.", 7) == 0 ? conf_bstore_get(s->carry_in, nm + 7, CONF_BS_PA, n) : NULL;
        if (strncmp(nm, "params.", 7) == 0 && !s->carry_in && s->step_no > 1) {
            if ((st = conf_cmp_push_skip(s->out, s->prefix, nm, CONF_SKIPPED,
                                "input parameters of a later step: compared in directory mode (bound carried from the previous step)")) != DP_OK)
                return st;
            continue;
        }
        for (int64_t e = 0; e < n; e++) s->bnd[e] = carried ? carried[e] : s->k.uc * fabs(dp_tensor_get(r, e));
        /* one rounding may use its whole budget: no MARGINAL for stored inputs */
        if ((st = conf_cmp_elems(s->out, s->prefix, nm, r, c, NULL, s->bnd, carried ? s->o->warn : 1.0)) != DP_OK) return st;
    }
    return st;
}

/* 2. per-example norms: |dn_i| <= rho n_i, rho = gamma_K + (gamma_P/2 + u)(1 + gamma_K). */
static dp_status step_norms(conf_step_cmp *s) {
    dp_status st = DP_OK;
    s->rn = dp_tset_find(s->ref, "per_sample.norm");
    if (s->rn) {
        s->nrm = conf_as_f64(s->rn);
        if (!s->nrm) return DP_ERR_NOMEM;
    }
    for (size_t i = 0; i < s->ref->n; i++) {
        const char *nm = s->ref->items[i].name;
        if (strncmp(nm, "per_sample.norm", 15) != 0 || (nm[15] != '\0' && nm[15] != '.')) continue;
        const dp_tensor *r = &s->ref->items[i].t, *c = dp_tset_find(s->cand, nm);
        if (!c) { DP_TRY(conf_cmp_push_missing(s->out, s->prefix, nm, "candidate")); continue; }
        int64_t n = dp_tensor_numel(r);
        dp_free(s->bnd);
        s->bnd = dp_malloc((size_t)(n ? n : 1) * sizeof *s->bnd);
        if (!s->bnd) return DP_ERR_NOMEM;
        for (int64_t e = 0; e < n; e++) s->bnd[e] = (n == s->B ? s->rhoi[e] : s->k.rho) * fabs(dp_tensor_get(r, e));
        dp_free(s->tmp);
        if ((st = nonfinite_agree(&s->tmp, r, c)) != DP_OK) return st;
        if ((st = conf_cmp_elems(s->out, s->prefix, nm, r, c, s->tmp, s->bnd, s->o->warn)) != DP_OK) return st;
    }
    return st;
}

/* 3. clip factors (flat: per_sample.clip_factor [B]; per-layer/group:
per_sample.clip_factor.<group> [B]): |dc| <= c rho / (1 - rho) + 2u c, for any
c = f(n) with |f'(n)| <= f(n)/n (abadi min(1, R/n), automatic R/(n + gamma)).
cmax_i = the largest clip factor of example i over groups, dc_i its bound. */
static dp_status step_clip_factors(conf_step_cmp *s) {
    dp_status st = DP_OK;
    s->cmax = dp_calloc((size_t)(s->B ? s->B : 1), sizeof *s->cmax);
    s->dcv = dp_calloc((size_t)(s->B ? s->B : 1), sizeof *s->dcv);
    s->dg = dp_calloc((size_t)(s->B ? s->B : 1), sizeof *s->dg);
    s->nv = dp_calloc((size_t)(s->B ? s->B : 1), sizeof *s->nv);
    if (!s->cmax || !s->dcv || !s->dg || !s->nv) return DP_ERR_NOMEM;
    {
        /* rel_i = rho_i / (1 - rho_i) + 3u: the mean value theorem, then the addition of eps or gamma
           and the division (docs/tolerances.md stage 3) */
#define CONF_REL(rh) ((rh) < 1 ? (rh) / (1 - (rh)) + 3 * s->k.u : INFINITY)
        int any_cf = 0;
        for (size_t i = 0; i < s->ref->n && st == DP_OK; i++) {
            const char *nm = s->ref->items[i].name;
            if (strncmp(nm, "per_sample.clip_factor", 22) != 0 || (nm[22] != '\0' && nm[22] != '.')) continue;
            const dp_tensor *r = &s->ref->items[i].t, *c = dp_tset_find(s->cand, nm);
            int64_t n = dp_tensor_numel(r);
            dp_free(s->bnd);
            s->bnd = dp_malloc((size_t)(n ? n : 1) * sizeof *s->bnd);
            if (!s->bnd) return DP_ERR_NOMEM;
            for (int64_t e = 0; e < n; e++) {
                double cf = fabs(dp_tensor_get(r, e)), rl = CONF_REL(n == s->B ? s->rhoi[e] : s->k.rho);
                s->bnd[e] = cf == 0 ? 0 : rl * cf; /* a dropped example's 0 must be exact */
            }
            if (n == s->B) {
                for (int64_t b = 0; b < s->B; b++) s->cmax[b] = any_cf ? fmax(s->cmax[b], fabs(dp_tensor_get(r, b))) : fabs(dp_tensor_get(r, b));
                any_cf = 1;
            }
            if (!c) st = conf_cmp_push_missing(s->out, s->prefix, nm, "candidate");
            else st = conf_cmp_elems(s->out, s->prefix, nm, r, c, NULL, s->bnd, s->o->warn);
        }
        for (int64_t b = 0; b < s->B; b++) {
            if (!any_cf) s->cmax[b] = 1.0;
            s->dcv[b] = s->cmax[b] == 0 ? 0 : CONF_REL(s->rhoi[b]) * s->cmax[b];
            s->nv[b] = (s->nrm && s->rn->ndim == 1 && s->rn->shape[0] == s->B) ? fabs(s->nrm[b]) : 0;
            /* per-element bound of the per-example gradient (normwise model, cancellation factor) */
            s->dg[b] = s->cmax[b] == 0 ? 0 : s->k.gK * s->kap[b] * s->nv[b];
#undef CONF_REL
        }
    }
    return st;
}

/* 4. clipped sums: |d cs_j| <= sum_i min(c_i dg_i + |g_ij| dc_i + dc_i dg_i, cap) + gamma_B sum_i |c_i g_ij|.
A dropped example (reference factor 0, compared exactly above) adds nothing on either side.
cap = C_total (2 + gamma_{P+4}): both clipped vectors have norm <= C_total (the candidate's up
to the rounding of its norm and factor), so no coordinate of their difference exceeds it. */
static dp_status step_clipped_sums(conf_step_cmp *s) {
    dp_status st = DP_OK;
    double ctot = -1;
    {
        static const char *const kc[] = {"c_total", "clip", NULL};
        if (!conf_meta_num(s->ref, &ctot, kc) || !(ctot > 0)) ctot = -1;
    }
    const double cap = ctot > 0 ? ctot * (2 + conf_gamma(s->k.P + 4, s->k.u)) : INFINITY;
    for (size_t i = 0; i < s->ref->n; i++) {
        const char *nm = s->ref->items[i].name;
        if (strncmp(nm, "step.clipped_sum.", 17) != 0) continue;
        const char *pname = nm + 17;
        const dp_tensor *r = &s->ref->items[i].t, *c = dp_tset_find(s->cand, nm);
        char gname[200];
        snprintf(gname, sizeof gname, "per_sample.grad.%s", pname);
        const dp_tensor *g = dp_tset_find(s->ref, gname);
        int64_t n = dp_tensor_numel(r);
        if (g && (g->ndim < 1 || g->shape[0] != s->B || dp_tensor_numel(g) != s->B * n)) g = NULL;
        double *bd = conf_bstore_new(&s->bs, pname, CONF_BS_CS, n);
        if (!bd) return DP_ERR_NOMEM;
        for (int64_t e = 0; e < n; e++) {
            double sabs = 0, prop = 0;
            for (int64_t b = 0; b < s->B; b++) {
                if (s->cmax[b] == 0) continue;
                /* |g_ij| <= n_i when the per-example gradient is not exported */
                double gij = g ? fabs(dp_tensor_get(g, b * n + e)) : s->nv[b];
                sabs += s->cmax[b] * gij;
                prop += fmin(s->cmax[b] * s->dg[b] + gij * s->dcv[b] + s->dcv[b] * s->dg[b], cap);
            }
            bd[e] = prop + conf_gamma((double)s->B, s->k.u) * sabs;
        }
        if (!c) { if ((st = conf_cmp_push_missing(s->out, s->prefix, nm, "candidate")) != DP_OK) break; continue; }
        if ((st = conf_cmp_elems(s->out, s->prefix, nm, r, c, NULL, bd, s->o->warn)) != DP_OK) break;
    }
    return st;
}

/* 5. noise: sigma C_total z, z in double on both sides: |d| <= sigma C_total bz + gamma_4 |noise| + u_c |noise|.
sigma C_total from the metadata (sigma, c_total or clip); without it, 4 x the RMS of the reference noise. */
static dp_status step_noise(conf_step_cmp *s) {
    dp_status st = DP_OK;
    double sc = -1;
    {
        static const char *const ks[] = {"sigma", "noise_multiplier", NULL};
        static const char *const kc[] = {"c_total", "clip", "max_grad_norm", "C", NULL};
        double sig, c;
        if (conf_meta_num(s->ref, &sig, ks) && conf_meta_num(s->ref, &c, kc)) sc = fabs(sig * c);
    }
    for (size_t i = 0; i < s->ref->n; i++) {
        const char *nm = s->ref->items[i].name;
        if (strncmp(nm, "step.noise.", 11) != 0) continue;
        const char *pname = nm + 11;
        const dp_tensor *r = &s->ref->items[i].t, *c = dp_tset_find(s->cand, nm);
        int64_t n = dp_tensor_numel(r);
        double scale = sc;
        if (scale < 0) {
            double ss = 0;
            for (int64_t e = 0; e < n; e++) ss += dp_tensor_get(r, e) * dp_tensor_get(r, e);
            scale = n ? 4 * sqrt(ss / (double)n) : 0;
        }
        double *bd = conf_bstore_new(&s->bs, pname, CONF_BS_NOISE, n);
        if (!bd) return DP_ERR_NOMEM;
        for (int64_t e = 0; e < n; e++) {
            double a = fabs(dp_tensor_get(r, e));
            bd[e] = scale * s->k.bz + conf_gamma(4, s->k.u) * a + s->k.uc * a;
        }
        if (!c) { if ((st = conf_cmp_push_missing(s->out, s->prefix, nm, "candidate")) != DP_OK) return st; continue; }
        if (s->o->noise_statistical) {
            /* noise shares (docs/tolerances.md "Noise shares"): rank r adds
               (sigma C_total / sqrt(R)) N(key, NOISE, step, lane p | (r+1) << 16, e); the sum over
               r = 0..R-1 (rank order) is recomputed from the reference's noise key. */
            const char *km = dp_tset_meta(s->ref, "noise_key");
            char *end = NULL;
            uint64_t key = km ? strtoull(km, &end, 10) : 0;
            int have_key = km && end != km && *end == '\0';
            double R = (double)s->o->noise_ranks;
            if (R <= 0) {
                static const char *const kr[] = {"ranks", NULL};
                if (!conf_meta_num(s->cand, &R, kr)) R = 0;
            }
            if (!have_key || sc < 0) {
                if ((st = conf_cmp_push_skip(s->out, s->prefix, nm, CONF_SKIPPED,
                                    "noise shares without noise_key/sigma/c_total in the reference metadata: "
                                    "not recomputable, needs a statistical check (INCOMPLETE)")) != DP_OK)
                    return st;
                conf_cmp_mark_incomplete(s->out, s->prefix, nm, "noise not recomputable (no noise_key/sigma/c_total in the reference)");
                continue;
            }
            if (!(R >= 1 && R < 256 && R == floor(R))) {
                conf_tensor_result t;
                conf_tr_init(&t, s->prefix, nm);
                t.numel = n;
                t.status = CONF_FAIL;
                t.worst_frac = INFINITY;
                snprintf(t.msg, sizeof t.msg, "noise shares: rank count unknown or out of [1, 255] (no 'ranks' in "
                                              "the candidate metadata): pass --noise-ranks R");
                if ((st = conf_cmp_result_push(s->out, &t)) != DP_OK) return st;
                continue;
            }
            /* the parameter's lane: the p whose single-mode draw is the reference's noise */
            int lane = -1;
            for (int p = 0; n > 0 && p < (int)s->ref->n && p < (1 << 16); p++) {
                double z = sc * dp_stream_gaussian(key, DP_PURPOSE_NOISE, (uint32_t)s->step_no, (uint32_t)p, 0);
                if (fabs(z - dp_tensor_get(r, 0)) <= bd[0]) { lane = p; break; }
            }
            if (n > 0 && lane < 0) {
                if ((st = conf_cmp_push_skip(s->out, s->prefix, nm, CONF_SKIPPED,
                                    "noise shares: the reference noise matches no lane of its noise_key (INCOMPLETE)")) != DP_OK)
                    return st;
                conf_cmp_mark_incomplete(s->out, s->prefix, nm, "the reference noise matches no lane of its noise_key");
                continue;
            }
            double *en = conf_bstore_new(&s->bs, pname, CONF_BS_EN, n);
            if (!en) return DP_ERR_NOMEM;
            double sd = sc / sqrt(R), gs = conf_gamma(R + 7, s->k.u);
            for (int64_t e = 0; e < n; e++) {
                double sum = 0, sabs = 0;
                for (int rk = 0; rk < (int)R; rk++) {
                    uint32_t ln = (uint32_t)lane | ((uint32_t)(rk + 1) << 16);
                    double x = sd * dp_stream_gaussian(key, DP_PURPOSE_NOISE, (uint32_t)s->step_no, ln, (uint64_t)e);
                    sum += x;
                    sabs += fabs(x);
                }
                en[e] = sum;
                /* R draws of libm error sd bz each; sigma, C_total, sqrt(R), the division and the
                   product (7 roundings), the R-1 additions in any order; each share and the total
                   stored in the candidate's dtype */
                bd[e] = R * sd * s->k.bz + (gs + 2 * s->k.uc) * sabs + s->k.uc * fabs(sum);
            }
            if ((st = conf_cmp_elems(s->out, s->prefix, nm, r, c, en, bd, s->o->warn)) != DP_OK) return st;
            continue;
        }
        if ((st = conf_cmp_elems(s->out, s->prefix, nm, r, c, NULL, bd, s->o->warn)) != DP_OK) return st;
    }
    return st;
}

/* 6. private gradients: pg = (cs + noise) / d: |d pg| <= (|d cs| + |d noise|) / d + gamma_3 |pg|;
1/d is fitted from the reference at the element with the largest |cs + noise|. With
noise shares the expected value is (cs_ref + noise_cand) / d and |d noise| = 0. */
static dp_status step_private_grads(conf_step_cmp *s) {
    dp_status st = DP_OK;
    for (size_t i = 0; i < s->ref->n; i++) {
        const char *nm = s->ref->items[i].name;
        if (strncmp(nm, "step.private_grad.", 18) != 0) continue;
        const char *pname = nm + 18;
        const dp_tensor *r = &s->ref->items[i].t, *c = dp_tset_find(s->cand, nm);
        char csn[200], nzn[200];
        snprintf(csn, sizeof csn, "step.clipped_sum.%s", pname);
        snprintf(nzn, sizeof nzn, "step.noise.%s", pname);
        const dp_tensor *rcs = dp_tset_find(s->ref, csn), *rnz = dp_tset_find(s->ref, nzn), *cnz = dp_tset_find(s->cand, nzn);
        int64_t n = dp_tensor_numel(r);
        const double *dcs = conf_bstore_get(&s->bs, pname, CONF_BS_CS, n), *dnz = conf_bstore_get(&s->bs, pname, CONF_BS_NOISE, n);
        if (!rcs || !rnz || !dcs || !dnz || dp_tensor_numel(rcs) != n || dp_tensor_numel(rnz) != n) {
            if ((st = conf_cmp_push_skip(s->out, s->prefix, nm, CONF_SKIPPED,
                                "reference lacks the clipped sum or the noise of this tensor: no error model")) != DP_OK)
                return st;
            continue;
        }
        double inv_d = 0, best = 0;
        for (int64_t e = 0; e < n; e++) {
            double sum = dp_tensor_get(rcs, e) + dp_tensor_get(rnz, e);
            if (fabs(sum) > best) { best = fabs(sum); inv_d = dp_tensor_get(r, e) / sum; }
        }
        /* noise shares: with the recomputed summed shares (en) the expected value is
           (cs_ref + en) / d with en's bound; without them the candidate's noise is substituted */
        const double *en = s->o->noise_statistical ? conf_bstore_get(&s->bs, pname, CONF_BS_EN, n) : NULL;
        int subst = s->o->noise_statistical && !en && cnz && dp_tensor_numel(cnz) == n;
        double *bd = conf_bstore_new(&s->bs, pname, CONF_BS_PG, n);
        dp_free(s->tmp);
        s->tmp = dp_malloc((size_t)(n ? n : 1) * sizeof *s->tmp);
        if (!bd || !s->tmp) return DP_ERR_NOMEM;
        for (int64_t e = 0; e < n; e++) {
            s->tmp[e] = en      ? (dp_tensor_get(rcs, e) + en[e]) * inv_d
                   : subst ? (dp_tensor_get(rcs, e) + dp_tensor_get(cnz, e)) * inv_d : dp_tensor_get(r, e);
            bd[e] = (dcs[e] + (subst ? 0 : dnz[e])) * fabs(inv_d) + conf_gamma(3, s->k.u) * fabs(s->tmp[e])
                  + s->k.uc * fabs(s->tmp[e]);
        }
        if (!c) { if ((st = conf_cmp_push_missing(s->out, s->prefix, nm, "candidate")) != DP_OK) return st; continue; }
        if ((st = conf_cmp_elems(s->out, s->prefix, nm, r, c, (subst || en) ? s->tmp : NULL, bd, s->o->warn)) != DP_OK) return st;
    }
    return st;
}

/* 7. updated parameters (docs/tolerances.md, "Optimizer"): the reference's optimizer
state (SGD momentum buffer, AdamW moments) is rebuilt from the reference's private
gradients step by step (directory mode carries it), with element-wise bounds:
SGD   b' = mu b + G;  p' = p - lr b'
AdamW p_d = p (1 - lr wd); m' = b1 m + (1-b1) G; v' = b2 v + (1-b2) G^2;
D = sqrt(v') / sqrt(1-b2^t) + eps; p' = p_d - (lr / (1-b1^t)) m' / D.
|d p| is the measured difference of the input parameters. */
static dp_status step_params_after(conf_step_cmp *s) {
    dp_status st = DP_OK;
    {
        char opt[16] = "sgd";
        const char *ms = dp_tset_meta(s->ref, "optimizer");
        if (ms) snprintf(opt, sizeof opt, "%s", ms);
        double lr = NAN, mu = 0, wd = 0, b1 = 0.9, b2 = 0.999, eps = 1e-8;
        static const char *const klr[] = {"lr", "learning_rate", NULL}, *const kmu[] = {"momentum", NULL},
                                 *const kwd[] = {"weight_decay", NULL}, *const kb1[] = {"beta1", NULL},
                                 *const kb2[] = {"beta2", NULL}, *const keps[] = {"adam_eps", NULL};
        conf_meta_num(s->ref, &lr, klr);
        conf_meta_num(s->ref, &mu, kmu);
        conf_meta_num(s->ref, &wd, kwd);
        conf_meta_num(s->ref, &b1, kb1);
        conf_meta_num(s->ref, &b2, kb2);
        conf_meta_num(s->ref, &eps, keps);
        int adam = strcmp(opt, "adamw") == 0, known = adam || strcmp(opt, "sgd") == 0;
        /* the optimizer state before this step is known at step 1 (zero) or when carried */
        for (size_t i = 0; i < s->ref->n; i++) {
            const char *nm = s->ref->items[i].name;
            if (strncmp(nm, "params_after.", 13) != 0) continue;
            const char *pname = nm + 13;
            const dp_tensor *r = &s->ref->items[i].t, *c = dp_tset_find(s->cand, nm);
            if (!c) { DP_TRY(conf_cmp_push_missing(s->out, s->prefix, nm, "candidate")); continue; }
            char pn[200], pgn[200];
            snprintf(pn, sizeof pn, "params.%s", pname);
            snprintf(pgn, sizeof pgn, "step.private_grad.%s", pname);
            const dp_tensor *rp = dp_tset_find(s->ref, pn), *cp = dp_tset_find(s->cand, pn), *rpg = dp_tset_find(s->ref, pgn);
            const dp_tensor *cpg = dp_tset_find(s->cand, pgn);
            int64_t n = dp_tensor_numel(r);
            const double *dpg = conf_bstore_get(&s->bs, pname, CONF_BS_PG, n);
            const double *m1 = s->carry_in ? conf_bstore_get(s->carry_in, pname, CONF_BS_M1, n) : NULL;
            const double *dm1 = s->carry_in ? conf_bstore_get(s->carry_in, pname, CONF_BS_DM1, n) : NULL;
            const double *m2 = s->carry_in ? conf_bstore_get(s->carry_in, pname, CONF_BS_M2, n) : NULL;
            const double *dm2 = s->carry_in ? conf_bstore_get(s->carry_in, pname, CONF_BS_DM2, n) : NULL;
            int state_known = s->step_no <= 1 || (m1 && dm1 && (!adam || (m2 && dm2))) || (!adam && mu == 0);
            const char *why = !known ? "unknown optimizer in the metadata: no update error model"
                            : isnan(lr) ? "no lr in the reference metadata: no update error model"
                            : (!rp || !rpg || !dpg || dp_tensor_numel(rp) != n || dp_tensor_numel(rpg) != n)
                                ? "no update error model without params and step.private_grad of this tensor"
                            : !state_known ? "optimizer state of a later step unknown: compare the export directory"
                            : NULL;
            if (why) { DP_TRY(conf_cmp_push_skip(s->out, s->prefix, nm, CONF_SKIPPED, why)); continue; }
            int subst = s->o->noise_statistical && cpg && dp_tensor_numel(cpg) == n;
            double *bd = conf_bstore_new(&s->bs, pname, CONF_BS_PA, n), *nm1 = conf_bstore_new(&s->bs, pname, CONF_BS_M1, n);
            double *ndm1 = conf_bstore_new(&s->bs, pname, CONF_BS_DM1, n);
            double *nm2 = adam ? conf_bstore_new(&s->bs, pname, CONF_BS_M2, n) : NULL, *ndm2 = adam ? conf_bstore_new(&s->bs, pname, CONF_BS_DM2, n) : NULL;
            dp_free(s->tmp);
            s->tmp = dp_malloc((size_t)(n ? n : 1) * sizeof *s->tmp);
            if (!bd || !nm1 || !ndm1 || (adam && (!nm2 || !ndm2)) || !s->tmp) return DP_ERR_NOMEM;
            double t = s->step_no, bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t), sbc2 = sqrt(bc2), ssz = lr / bc1;
            double g2 = conf_gamma(2, s->k.u), g3 = conf_gamma(3, s->k.u), g4 = conf_gamma(4, s->k.u);
            for (int64_t e = 0; e < n; e++) {
                double p = dp_tensor_get(rp, e);
                double g = subst ? dp_tensor_get(cpg, e) : dp_tensor_get(rpg, e), dg = subst ? 0 : dpg[e];
                double dp_in = cp && dp_tensor_numel(cp) == n ? fabs(dp_tensor_get(cp, e) - p) : s->k.uc * fabs(p);
                if (!isfinite(dp_in)) dp_in = INFINITY;
                double M1 = m1 ? m1[e] : 0, DM1 = dm1 ? dm1[e] : 0, pnew, b;
                /* zmul: a zero coefficient (momentum 0, beta 0) times an infinite bound carried
                 * from an earlier step is 0, not NaN (the origin of issue 29 item 13's NaN bounds) */
                if (!adam) {
                    nm1[e] = mu * M1 + g;
                    ndm1[e] = zmul(mu, DM1) + dg + zmul(g2, fabs(mu * M1) + fabs(g));
                    pnew = p - lr * nm1[e];
                    b = dp_in + zmul(fabs(lr), ndm1[e]) + zmul(g2, fabs(p) + fabs(lr * nm1[e]));
                } else {
                    double M2 = m2 ? m2[e] : 0, DM2 = dm2 ? dm2[e] : 0;
                    double decay = 1 - lr * wd, pd = p * decay;
                    double dpd = zmul(fabs(decay), dp_in) + zmul(g2, fabs(p));
                    nm1[e] = b1 * M1 + (1 - b1) * g;
                    ndm1[e] = zmul(b1, DM1) + zmul(1 - b1, dg) + zmul(g3, b1 * fabs(M1) + (1 - b1) * fabs(g));
                    nm2[e] = b2 * M2 + (1 - b2) * g * g;
                    ndm2[e] = zmul(b2, DM2) + zmul(1 - b2, 2 * fabs(g) * dg + dg * dg) + zmul(g4, b2 * M2 + (1 - b2) * g * g);
                    double sv = sqrt(nm2[e]), svlo = sqrt(fmax(nm2[e] - ndm2[e], 0));
                    double dsv = ndm2[e] / (sv + svlo > 0 ? sv + svlo : 1) + (sv + svlo > 0 ? 0 : sqrt(ndm2[e]));
                    double D = sv / sbc2 + eps, dD = dsv / sbc2 + g3 * D;
                    double rr = nm1[e] / D;
                    double dr = D > dD ? (ndm1[e] + fabs(rr) * dD) / (D - dD) + s->k.u * fabs(rr) : INFINITY;
                    pnew = pd - ssz * rr;
                    b = dpd + ssz * dr + g2 * (fabs(pd) + fabs(ssz * rr));
                }
                s->tmp[e] = subst ? pnew : dp_tensor_get(r, e);
                bd[e] = b + s->k.uc * fabs(s->tmp[e]);
            }
            if ((st = conf_cmp_elems(s->out, s->prefix, nm, r, c, subst ? s->tmp : NULL, bd, s->o->warn)) != DP_OK) return st;
        }
    }
    return st;
}

/* 8. loss: |d l_i| <= gamma_K (|l_i| + ln P + 1) (log-sum-exp scale; docs/tolerances.md). */
static dp_status step_loss(conf_step_cmp *s) {
    dp_status st = DP_OK;
    static const char *const loss_names[] = {"per_sample.loss", "per_sample.loss_plus", "per_sample.loss_minus", NULL};
    for (int li = 0; loss_names[li]; li++) {
        const dp_tensor *r = dp_tset_find(s->ref, loss_names[li]), *c = dp_tset_find(s->cand, loss_names[li]);
        if (!r) continue;
        if (!c) { DP_TRY(conf_cmp_push_missing(s->out, s->prefix, loss_names[li], "candidate")); continue; }
        int64_t n = dp_tensor_numel(r);
        dp_free(s->bnd);
        s->bnd = dp_malloc((size_t)(n ? n : 1) * sizeof *s->bnd);
        if (!s->bnd) return DP_ERR_NOMEM;
        for (int64_t e = 0; e < n; e++)
            s->bnd[e] = (conf_gamma(s->k.K + 2, s->k.u) + s->k.gH) * (fabs(dp_tensor_get(r, e)) + log(s->k.P > 1 ? s->k.P : 1) + 1);
        dp_free(s->tmp);
        if ((st = nonfinite_agree(&s->tmp, r, c)) != DP_OK) return st;
        if ((st = conf_cmp_elems(s->out, s->prefix, loss_names[li], r, c, s->tmp, s->bnd, s->o->warn)) != DP_OK) return st;
    }
    return st;
}

/* tensors of the candidate the reference does not have: noted, not compared. */
static dp_status step_cand_only(conf_step_cmp *s) {
    dp_status st = DP_OK;
    for (size_t i = 0; i < s->cand->n; i++)
        if (!dp_tset_find(s->ref, s->cand->items[i].name) && strncmp(s->cand->items[i].name, "per_sample.grad.", 16) != 0) {
            char why[200];
            snprintf(why, sizeof why, "only in the candidate export: not compared");
            DP_TRY(conf_cmp_push_skip(s->out, s->prefix, s->cand->items[i].name, CONF_SKIPPED, why));
        }
    return st;
}

/* DP-ZO's stages after the inputs (compare_dpzo.c: scalars, directions, updates). */
static dp_status step_dpzo(conf_step_cmp *s) { return conf_compare_dpzo(s->out, s->ref, s->cand, s->o, s->prefix, &s->k, &s->bs); }

/* The stages as data: one row per tensor family, its bound (the function that forms it and
 * compares) and the place in docs/tolerances.md that derives the bound, in comparison order.
 * An algorithm is one table: DP-SGD's rows, or DP-ZO's (an export with step.scalar). `dpcert
 * compare --stages` prints the rows; conformance/tests/compare_stages.sh checks each `doc`
 * against docs/tolerances.md. */
typedef struct {
    const char *family; /* the tensors the row compares (names as in docs/formats.md) */
    const char *doc;    /* docs/tolerances.md: "## Heading" or "## Heading / N." (a numbered item) */
    dp_status (*run)(conf_step_cmp *s);
} conf_step_stage;

#define CONF_STAGES_DOC "## Stages (DP-SGD), in comparison order"
static const conf_step_stage dpsgd_stages[] = {
    {"batch.indices, batch.tokens, batch.y (exact); batch.x, params.*", CONF_STAGES_DOC " / 1.", step_inputs},
    {"per_sample.norm[.<group>]", CONF_STAGES_DOC " / 2.", step_norms},
    {"per_sample.clip_factor[.<group>]", CONF_STAGES_DOC " / 3.", step_clip_factors},
    {"step.clipped_sum.*", CONF_STAGES_DOC " / 4.", step_clipped_sums},
    {"step.noise.* (element-wise or recomputed shares)", CONF_STAGES_DOC " / 5.", step_noise},
    {"step.private_grad.*", CONF_STAGES_DOC " / 6.", step_private_grads},
    {"params_after.* (the reference's optimizer replayed)", CONF_STAGES_DOC " / 7.", step_params_after},
    {"per_sample.loss", CONF_STAGES_DOC " / 8.", step_loss},
    {"tensors only in the candidate (noted, not compared)", CONF_STAGES_DOC, step_cand_only},
};
static const conf_step_stage dpzo_stages[] = {
    {"batch.indices, batch.tokens, batch.y (exact); batch.x, params.*", CONF_STAGES_DOC " / 1.", step_inputs},
    {"dpzo.z.*, per_sample.loss_plus|minus, per_sample.diff_clipped, step.noise, step.scalar, params_after.*",
     "## DP-ZO (docs/dpzo.md)", step_dpzo},
};
#define CONF_STAGE_TABLES_(X) X("dpsgd", dpsgd_stages) X("dpzo", dpzo_stages)

void conf_compare_stages_print(void *file) {
    FILE *f = file;
    fprintf(f, "# algorithm  stage  tensor family  |  bound derived in docs/tolerances.md\n");
#define CONF_PRINT_(alg, tab)                                                                                  \
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) fprintf(f, "%s\t%zu\t%s\t%s\n", alg, i + 1, tab[i].family, tab[i].doc);
    CONF_STAGE_TABLES_(CONF_PRINT_)
#undef CONF_PRINT_
}

static dp_status compare_step_body(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                                   const conf_cmp_opts *o, const char *prefix, const conf_bstore *carry_in, conf_bstore *carry_out) {
    conf_step_cmp s;
    memset(&s, 0, sizeof s);
    s.out = out;
    s.ref = ref;
    s.cand = cand;
    s.o = o;
    s.prefix = prefix;
    s.carry_in = carry_in;
    s.carry_out = carry_out;
    s.B = -1;
    DP_TRY(step_consts(&s));
    /* DP-ZO exports carry step.scalar (docs/dpzo.md): its table; DP-SGD's otherwise */
    const int zo = dp_tset_find(ref, "step.scalar") != NULL;
    const conf_step_stage *tab = zo ? dpzo_stages : dpsgd_stages;
    const size_t ntab = zo ? sizeof dpzo_stages / sizeof dpzo_stages[0] : sizeof dpsgd_stages / sizeof dpsgd_stages[0];
    dp_status st = DP_OK;
    for (size_t i = 0; st == DP_OK && i < ntab; i++) st = tab[i].run(&s);
    /* reference tensors no rule above compared: listed, so nothing disappears silently */
    for (size_t i = 0; st == DP_OK && i < s.ref->n; i++) {
        char full[200];
        snprintf(full, sizeof full, "%s%s", s.prefix, s.ref->items[i].name);
        int seen = 0;
        for (size_t j = 0; j < s.out->n && !seen; j++) seen = strcmp(s.out->items[j].name, full) == 0;
        if (seen) continue;
        st = conf_cmp_push_skip(s.out, s.prefix, s.ref->items[i].name, CONF_SKIPPED,
                       strncmp(s.ref->items[i].name, "per_sample.grad.", 16) == 0
                           ? "per-example gradient: an input of the clipped sum, compared through it"
                           : "no error model for this tensor: not compared");
    }
    if (st == DP_OK && carry_out) { /* hand the update bounds to the next step */
        conf_bstore_free(carry_out);
        *carry_out = s.bs;
        memset(&s.bs, 0, sizeof s.bs);
    }
    conf_bstore_free(&s.bs);
    dp_free(s.bnd);
    dp_free(s.tmp);
    dp_free(s.nrm);
    dp_free(s.kap);
    dp_free(s.rhoi);
    dp_free(s.cmax);
    dp_free(s.dcv);
    dp_free(s.dg);
    dp_free(s.nv);
    return st;
}

/* A candidate that declares another clip convention (metadata clip_fn, e.g. Opacus's
 * abadi_eps:1e-6) is compared with the reference re-clipped under that convention
 * (conf_ref_reclip, conformance/compare/convention.c). */
dp_status conf_compare_step(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                              const conf_cmp_opts *o, const char *prefix, const conf_bstore *carry_in, conf_bstore *carry_out) {
    if (!prefix) prefix = "";
    const char *cfn = dp_tset_meta(cand, "clip_fn"), *rfn = dp_tset_meta(ref, "clip_fn");
    if (!cfn || !rfn || strcmp(cfn, rfn) == 0 || dp_tset_find(ref, "step.scalar"))
        return compare_step_body(out, ref, cand, o, prefix, carry_in, carry_out);
    conf_clip_conv cv;
    dp_status st = conf_clip_conv_parse(&cv, "candidate metadata clip_fn", cfn);
    if (st != DP_OK) return st;
    dp_tensor_set adj;
    char why[200] = "";
    st = conf_ref_reclip(&adj, why, sizeof why, ref, &cv);
    if (st != DP_OK) return st;
    if (why[0]) { /* could not re-clip: the comparison cannot be trusted either way */
        dp_tset_free(&adj);
        conf_cmp_mark_incomplete(out, prefix, "(clip_fn)", why);
        return compare_step_body(out, ref, cand, o, prefix, carry_in, carry_out);
    }
    st = compare_step_body(out, &adj, cand, o, prefix, carry_in, carry_out);
    dp_tset_free(&adj);
    return st;
}

dp_status conf_compare_sets(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                            const conf_cmp_opts *o, const char *prefix) {
    return conf_compare_step(out, ref, cand, o, prefix, NULL, NULL);
}

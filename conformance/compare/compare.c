/* conformance/compare/compare.c — compare a candidate export with the reference export,
 * tensor by tensor, each element against a forward error bound computed from the
 * reference (derivations: docs/tolerances.md; tensor names: docs/conformance.md).
 *
 * Notation (as in docs/tolerances.md): u = u_cand + u_ref (u_ref = 2^-53), B the
 * batch size, P the number of trainable scalars, K the model's reduction length,
 * n_i the reference per-example norm, c_i the reference clip factor. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/philox.h"
#include "common/alloc.h"
#include "common/safetensors.h"
#include "conformance/compare/compare_int.h"
#include "conformance/compare/compare.h"

void conf_cmp_opts_default(conf_cmp_opts *o) {
    o->cand_dtype = DP_F64;
    o->warn = 0.5;
    o->noise_statistical = 0;
    o->model_k = 0;
    o->noise_ranks = 0;
    o->mixed = 0;
    o->half_dtype = DP_BF16;
    o->dtype_given = 0;
}

/* The candidate's declared precision (metadata "dtype", docs/precision.md: f64, f32, or bf16 /
 * fp16 = half storage with f32 compute) against the options: taken when none was given,
 * refused (DP_ERR_INVALID, exit 2) when the given one contradicts it (issue 29 item 13: --dtype
 * bf16 on an export made with --precision bf16 formed NaN bounds). */
static dp_status declared_precision(conf_cmp_opts *o, const dp_tensor_set *cand, const char *cand_path) {
    const char *d = dp_tset_meta(cand, "dtype");
    if (!d) return DP_OK;
    conf_cmp_opts m = *o;
    if (strcmp(d, "f64") == 0) { m.cand_dtype = DP_F64; m.mixed = 0; }
    else if (strcmp(d, "f32") == 0) { m.cand_dtype = DP_F32; m.mixed = 0; }
    else if (strcmp(d, "bf16") == 0 || strcmp(d, "fp16") == 0) {
        m.cand_dtype = DP_F32;
        m.mixed = 1;
        m.half_dtype = d[0] == 'b' ? DP_BF16 : DP_F16;
    } else {
        return dp_error(DP_ERR_FORMAT, "%s: metadata dtype '%s' is not a precision (f64, f32, bf16, fp16)", cand_path, d);
    }
    if (!o->dtype_given) {
        *o = m;
        return DP_OK;
    }
    if (o->cand_dtype != m.cand_dtype || o->mixed != m.mixed || (m.mixed && o->half_dtype != m.half_dtype)) {
        const char *given = o->mixed ? (o->half_dtype == DP_F16 ? "--precision fp16" : "--precision bf16")
                          : o->cand_dtype == DP_F64 ? "--dtype f64" : o->cand_dtype == DP_F32 ? "--dtype f32" : "--dtype bf16";
        const char *want = m.mixed ? (m.half_dtype == DP_F16 ? "--precision fp16" : "--precision bf16")
                         : m.cand_dtype == DP_F64 ? "--dtype f64 (the default)" : "--dtype f32";
        return dp_error(DP_ERR_INVALID, "%s contradicts the candidate's declared precision (%s: metadata dtype=%s%s): "
                        "compare with %s, or give no precision option", given, cand_path, d,
                        m.mixed ? ", the mixed-precision recipe: half storage, f32 compute" : "", want);
    }
    return DP_OK;
}

void conf_cmp_result_init(conf_cmp_result *r) { memset(r, 0, sizeof *r); }
void conf_cmp_result_free(conf_cmp_result *r) {
    dp_free(r->items);
    memset(r, 0, sizeof *r);
}

dp_status conf_cmp_result_push(conf_cmp_result *r, const conf_tensor_result *t) {
    DP_TRY(DP_GROW(r->items, r->cap, r->n + 1, 32, "comparison results"));
    r->items[r->n++] = *t;
    /* Case status: FAIL > MARGINAL > PASS over compared tensors; SKIPPED and
     * NOT_SUPPORTED tensors only decide when nothing was compared. */
    if (t->status == CONF_FAIL || t->status == CONF_MARGINAL || t->status == CONF_PASS) {
        r->status = r->ncompared++ ? conf_status_worse(r->status, t->status) : t->status;
        if (!(t->worst_frac <= r->worst_frac)) r->worst_frac = t->worst_frac; /* NaN/inf included */
        if (t->status == CONF_FAIL && !r->first_fail[0]) snprintf(r->first_fail, sizeof r->first_fail, "%s", t->name);
    } else if (!r->ncompared) {
        r->status = r->n == 1 ? t->status : conf_status_worse(r->status, t->status);
    }
    return DP_OK;
}

/* ---- small helpers ---- */
static void tr_init(conf_tensor_result *t, const char *prefix, const char *name) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s%s", prefix, name);
    t->worst_index = -1;
}

static int same_shape(const dp_tensor *a, const dp_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

static int is_int(dp_dtype d) { return d == DP_I32 || d == DP_I64; }

/* Reference tensor as a malloc'd double array (NULL on OOM). */
static double *as_f64(const dp_tensor *t) {
    int64_t n = dp_tensor_numel(t);
    double *v = dp_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) v[i] = dp_tensor_get(t, i);
    return v;
}

dp_status conf_cmp_push_missing(conf_cmp_result *out, const char *prefix, const char *name, const char *side) {
    conf_tensor_result t;
    tr_init(&t, prefix, name);
    t.status = CONF_FAIL;
    t.worst_frac = INFINITY;
    snprintf(t.msg, sizeof t.msg, "tensor %s missing in the %s export", name, side);
    return conf_cmp_result_push(out, &t);
}

dp_status conf_cmp_push_skip(conf_cmp_result *out, const char *prefix, const char *name, conf_status st,
                           const char *why) {
    conf_tensor_result t;
    tr_init(&t, prefix, name);
    t.status = st;
    snprintf(t.msg, sizeof t.msg, "%s", why);
    return conf_cmp_result_push(out, &t);
}

/* c x, with 0 x inf = 0: a term whose coefficient is exactly zero contributes nothing, even
 * when the error bound it multiplies is infinite. */
static double zmul(double c, double x) { return c == 0 ? 0.0 : c * x; }

/* Element-wise comparison of cand against ref under bound[] (bound == NULL: exact).
 * `ref_vals` overrides the reference values (used when the candidate's noise is
 * substituted); NULL uses ref. */
dp_status conf_cmp_elems(conf_cmp_result *out, const char *prefix, const char *name, const dp_tensor *ref,
                               const dp_tensor *cand, const double *ref_vals, const double *bound, double warn) {
    conf_tensor_result t;
    tr_init(&t, prefix, name);
    t.numel = dp_tensor_numel(ref);
    if (!same_shape(ref, cand)) {
        char a[96], b[96];
        t.status = CONF_FAIL;
        t.worst_frac = INFINITY;
        snprintf(t.msg, sizeof t.msg, "shape %s in the candidate, %s in the reference", dp_shape_str(b, sizeof b, cand),
                 dp_shape_str(a, sizeof a, ref));
        return conf_cmp_result_push(out, &t);
    }
    if (is_int(ref->dtype) != is_int(cand->dtype)) {
        t.status = CONF_FAIL;
        t.worst_frac = INFINITY;
        snprintf(t.msg, sizeof t.msg, "dtype %s in the candidate, %s in the reference", dp_dtype_name(cand->dtype),
                 dp_dtype_name(ref->dtype));
        return conf_cmp_result_push(out, &t);
    }
    /* a bound that is NaN or negative is a defect of the tolerance model, never a verdict about
     * the candidate: this tensor is INCOMPLETE naming the bound (docs/tolerances.md). Only a bound
     * that decides counts: where both values are finite and differ (equal values, both NaN, or a
     * non-finite value on one side are decided without it: conf_fraction; a dropped example's NaN
     * norm has a NaN bound that never decides). */
    for (int64_t i = 0; bound && i < t.numel; i++) {
        double r = ref_vals ? ref_vals[i] : dp_tensor_get(ref, i), c = dp_tensor_get(cand, i);
        if (!isfinite(r) || !isfinite(c) || r == c) continue;
        if (isnan(bound[i]) || bound[i] < 0) {
            char why[200];
            snprintf(why, sizeof why, "the tolerance bound of element %lld could not be formed (%g): a defect of the "
                     "tolerance model, not a verdict (INCOMPLETE)", (long long)i, bound[i]);
            conf_cmp_mark_incomplete(out, prefix, name, why);
            return conf_cmp_push_skip(out, prefix, name, CONF_SKIPPED, why);
        }
    }
    for (int64_t i = 0; i < t.numel; i++) {
        double r = ref_vals ? ref_vals[i] : dp_tensor_get(ref, i), c = dp_tensor_get(cand, i);
        double b = bound ? bound[i] : 0.0;
        double f = conf_fraction(r, c, b);
        double e = fabs(c - r);
        if (isfinite(e) && e > t.max_abs_err) t.max_abs_err = e;
        if (t.worst_index < 0 || f > t.worst_frac || (isnan(f) && !isnan(t.worst_frac))) {
            t.worst_frac = f;
            t.worst_index = i;
            t.ref_val = r;
            t.cand_val = c;
            t.bound = b;
        }
    }
    if (t.numel == 0) t.worst_frac = 0;
    if (!(t.worst_frac <= 1.0)) {
        t.status = CONF_FAIL;
        snprintf(t.msg, sizeof t.msg, "element %lld: candidate %.17g, reference %.17g, |diff| %.3g > bound %.3g",
                 (long long)t.worst_index, t.cand_val, t.ref_val, fabs(t.cand_val - t.ref_val), t.bound);
    } else if (t.worst_frac > warn) {
        t.status = CONF_MARGINAL;
        snprintf(t.msg, sizeof t.msg, "element %lld uses %.0f%% of its bound", (long long)t.worst_index,
                 100 * t.worst_frac);
    } else {
        t.status = CONF_PASS;
    }
    return conf_cmp_result_push(out, &t);
}

/* Looks up a numeric metadata entry under any of the given keys. */
int conf_meta_num(const dp_tensor_set *s, double *v, const char *const *keys) {
    for (; *keys; keys++) {
        const char *m = dp_tset_meta(s, *keys);
        if (!m) continue;
        char *end;
        double x = strtod(m, &end);
        if (end != m && *end == '\0' && isfinite(x)) { *v = x; return 1; }
    }
    return 0;
}

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

double *conf_bstore_new(conf_bstore *s, const char *name, int kind, int64_t n) {
    if (DP_GROW(s->it, s->cap, s->n + 1, 16, "bound store") != DP_OK) return NULL;
    conf_bstore_item *x = &s->it[s->n];
    x->b = dp_calloc((size_t)(n ? n : 1), sizeof *x->b);
    if (!x->b) return NULL;
    snprintf(x->name, sizeof x->name, "%s", name);
    x->kind = kind;
    x->n = n;
    s->n++;
    return x->b;
}
const double *conf_bstore_get(const conf_bstore *s, const char *name, int kind, int64_t n) {
    for (size_t i = 0; i < s->n; i++)
        if (s->it[i].kind == kind && s->it[i].n == n && strcmp(s->it[i].name, name) == 0) return s->it[i].b;
    return NULL;
}
void conf_bstore_free(conf_bstore *s) {
    for (size_t i = 0; i < s->n; i++) dp_free(s->it[i].b);
    dp_free(s->it);
    memset(s, 0, sizeof *s);
}



/* The reference values with every element where both sides are non-finite replaced by the
 * candidate's (a dropped example: its norm and loss are NaN or inf on both sides, in whatever
 * combination; docs/tolerances.md "Dropped examples") into *out. NULL when the shapes differ
 * (then the plain comparison runs); DP_ERR_NOMEM when it cannot be had (never a silent fallback). */
static dp_status nonfinite_agree(double **out, const dp_tensor *r, const dp_tensor *c) {
    *out = NULL;
    int64_t n = dp_tensor_numel(r);
    if (!same_shape(r, c)) return DP_OK;
    double *v = *out = dp_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) return DP_ERR_NOMEM;
    for (int64_t e = 0; e < n; e++) {
        double a = dp_tensor_get(r, e), b = dp_tensor_get(c, e);
        v[e] = (!isfinite(a) && !isfinite(b)) ? b : a;
    }
    return DP_OK;
}

static void mark_incomplete(conf_cmp_result *out, const char *prefix, const char *name, const char *why) {
    if (!out->incomplete++)
        snprintf(out->incomplete_why, sizeof out->incomplete_why, "%s%s: %s", prefix, name, why);
}
void conf_cmp_mark_incomplete(conf_cmp_result *out, const char *prefix, const char *name, const char *why) {
    mark_incomplete(out, prefix, name, why);
}

const char *conf_cmp_overall(const conf_cmp_result *r) {
    if (r->status == CONF_FAIL) return "FAIL";
    if (r->incomplete) return "INCOMPLETE";
    return conf_status_name(r->status);
}

static dp_status compare_step_body(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                                   const conf_cmp_opts *o, const char *prefix, const conf_bstore *carry_in, conf_bstore *carry_out) {
    if (o->cand_dtype != DP_F64 && o->cand_dtype != DP_F32 && o->cand_dtype != DP_BF16 && o->cand_dtype != DP_F16)
        return dp_error(DP_ERR_INVALID, "--dtype must be f64, f32, bf16 or f16");
    if (!(o->warn > 0 && o->warn < 1)) return dp_error(DP_ERR_INVALID, "warn fraction must be in (0, 1), got %g", o->warn);
    conf_consts k;
    k.uc = conf_unit_roundoff(o->cand_dtype);
    /* a declared arithmetic (docs/tolerances.md "Declared arithmetic"): u_c = max(u(dtype), arith_u); GEMM
     * operands rounded at arith_u_in > 0 add two roundings per product in each of a linear layer's three
     * GEMMs: K += 6 per tensor of two or more dimensions */
    double du = 0, du_in = 0;
    {
        const char *decl = dp_tset_meta(cand, "arithmetic");
        if (decl && !out->arith[0]) snprintf(out->arith, sizeof out->arith, "%s", decl);
        static const char *const keys[2] = {"arith_u", "arith_u_in"};
        for (int i = 0; i < 2; i++) {
            const char *a = dp_tset_meta(cand, keys[i]);
            char *end = NULL;
            double x = a ? strtod(a, &end) : 0;
            if (a && (!end || *end || !(x >= 0 && x < 0.5)))
                return dp_error(DP_ERR_FORMAT, "candidate metadata %s '%s' is not a number in [0, 0.5)", keys[i], a);
            *(i ? &du_in : &du) = x;
        }
        if (du > k.uc) { k.uc = du; out->arith_u = du; }
    }
    k.u = k.uc + conf_unit_roundoff(DP_F64);
    int64_t T;
    model_consts(ref, o->model_k, &k.K, &k.P, &T);
    if (du_in > 0) k.K += 6 * linear_tensors(ref);
    k.gK = conf_gamma(k.K, k.u);
    k.H = k.gH = k.L = k.uh = 0;
    if (o->mixed) {
        if (o->cand_dtype != DP_F32 || (o->half_dtype != DP_BF16 && o->half_dtype != DP_F16))
            return dp_error(DP_ERR_INVALID, "mixed precision: the candidate computes in f32 with bf16 or f16 storage");
        k.H = half_points(ref);
        k.L = linear_tensors(ref);
        k.uh = conf_unit_roundoff(o->half_dtype);
        k.gH = conf_gamma(k.H, k.uh);
        k.gK += k.gH;
    }
    k.rho = k.gK + (conf_gamma(k.P, k.u) / 2 + k.u) * (1 + k.gK);
    k.bz = noise_draw_bound(conf_unit_roundoff(DP_F64));
    dp_status st = DP_OK;
    conf_bstore bs = {0};
    double *bnd = NULL, *tmp = NULL, *nrm = NULL, *kap = NULL, *rhoi = NULL;
    int64_t B = -1;
    double step_no = 1;
    {
        static const char *const kst[] = {"step", NULL};
        conf_meta_num(ref, &step_no, kst);
    }

    /* 1. batch (exact) and data; input parameters. */
    static const char *const exact_names[] = {"batch.indices", "batch.tokens", "batch.y", NULL};
    for (int i = 0; exact_names[i]; i++) {
        const dp_tensor *r = dp_tset_find(ref, exact_names[i]), *c = dp_tset_find(cand, exact_names[i]);
        if (!r) continue;
        if (!c) { DP_TRY(conf_cmp_push_missing(out, prefix, exact_names[i], "candidate")); continue; }
        DP_TRY(conf_cmp_elems(out, prefix, exact_names[i], r, c, NULL, NULL, o->warn));
    }
    const dp_tensor *bi = dp_tset_find(ref, "batch.indices");
    if (bi) B = bi->ndim >= 1 ? bi->shape[0] : 0;
    /* rows of per-sample tensors, for references that do not export the indices */
    for (size_t i = 0; B < 0 && i < ref->n; i++)
        if (strcmp(ref->items[i].name, "per_sample.norm") == 0 || strcmp(ref->items[i].name, "per_sample.loss") == 0)
            B = ref->items[i].t.ndim >= 1 ? ref->items[i].t.shape[0] : 0;
    if (B < 0) B = 0;
    /* per-example relative norm bound rho_i with the cancellation factor of confident examples
       (docs/tolerances.md "Confident examples"): rho_i = gamma_K kappa_i + (gamma_P/2 + u)(1 + gamma_K kappa_i) */
    kap = dp_malloc((size_t)(B ? B : 1) * sizeof *kap);
    rhoi = dp_malloc((size_t)(B ? B : 1) * sizeof *rhoi);
    if (!kap || !rhoi) { st = DP_ERR_NOMEM; goto done; }
    {
        const dp_tensor *rl = dp_tset_find(ref, "per_sample.loss");
        int have_l = rl && dp_tensor_numel(rl) == B;
        for (int64_t b = 0; b < B; b++) {
            kap[b] = have_l ? conf_cancel_factor(dp_tensor_get(rl, b)) : 1.0;
            double gk = k.gK * kap[b];
            rhoi[b] = isfinite(gk) ? gk + (conf_gamma(k.P, k.u) / 2 + k.u) * (1 + gk) : INFINITY;
        }
    }

    /* data and input parameters: the candidate stores them in its dtype: |d| <= u_c |x|. */
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strcmp(nm, "batch.x") != 0 && strncmp(nm, "params.", 7) != 0) continue;
        const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
        if (!c) { DP_TRY(conf_cmp_push_missing(out, prefix, nm, "candidate")); continue; }
        int64_t n = dp_tensor_numel(r);
        dp_free(bnd);
        bnd = dp_malloc((size_t)(n ? n : 1) * sizeof *bnd);
        if (!bnd) { st = DP_ERR_NOMEM; goto done; }
        /* later steps: the candidate's parameters are its previous update, whose bound is carried */
        const double *carried = carry_in && strncmp(nm, "params.", 7) == 0 ? conf_bstore_get(carry_in, nm + 7, CONF_BS_PA, n) : NULL;
        if (strncmp(nm, "params.", 7) == 0 && !carry_in && step_no > 1) {
            if ((st = conf_cmp_push_skip(out, prefix, nm, CONF_SKIPPED,
                                "input parameters of a later step: compared in directory mode (bound carried from the previous step)")) != DP_OK)
                goto done;
            continue;
        }
        for (int64_t e = 0; e < n; e++) bnd[e] = carried ? carried[e] : k.uc * fabs(dp_tensor_get(r, e));
        /* one rounding may use its whole budget: no MARGINAL for stored inputs */
        if ((st = conf_cmp_elems(out, prefix, nm, r, c, NULL, bnd, carried ? o->warn : 1.0)) != DP_OK) goto done;
    }

    /* DP-ZO (docs/dpzo.md; bounds in docs/tolerances.md, "DP-ZO"). */
    if (dp_tset_find(ref, "step.scalar")) {
        st = conf_compare_dpzo(out, ref, cand, o, prefix, &k, &bs);
        goto done;
    }

    /* 2. per-example norms: |dn_i| <= rho n_i, rho = gamma_K + (gamma_P/2 + u)(1 + gamma_K). */
    const dp_tensor *rn = dp_tset_find(ref, "per_sample.norm");
    if (rn) {
        nrm = as_f64(rn);
        if (!nrm) { st = DP_ERR_NOMEM; goto done; }
    }
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "per_sample.norm", 15) != 0 || (nm[15] != '\0' && nm[15] != '.')) continue;
        const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
        if (!c) { DP_TRY(conf_cmp_push_missing(out, prefix, nm, "candidate")); continue; }
        int64_t n = dp_tensor_numel(r);
        dp_free(bnd);
        bnd = dp_malloc((size_t)(n ? n : 1) * sizeof *bnd);
        if (!bnd) { st = DP_ERR_NOMEM; goto done; }
        for (int64_t e = 0; e < n; e++) bnd[e] = (n == B ? rhoi[e] : k.rho) * fabs(dp_tensor_get(r, e));
        dp_free(tmp);
        if ((st = nonfinite_agree(&tmp, r, c)) != DP_OK) goto done;
        if ((st = conf_cmp_elems(out, prefix, nm, r, c, tmp, bnd, o->warn)) != DP_OK) goto done;
    }

    /* 3. clip factors (flat: per_sample.clip_factor [B]; per-layer/group:
       per_sample.clip_factor.<group> [B]): |dc| <= c rho / (1 - rho) + 2u c, for any
       c = f(n) with |f'(n)| <= f(n)/n (abadi min(1, R/n), automatic R/(n + gamma)).
       cmax_i = the largest clip factor of example i over groups, dc_i its bound. */
    double *cmax = dp_calloc((size_t)(B ? B : 1), sizeof *cmax), *dcv = dp_calloc((size_t)(B ? B : 1), sizeof *dcv);
    double *dg = dp_calloc((size_t)(B ? B : 1), sizeof *dg), *nv = dp_calloc((size_t)(B ? B : 1), sizeof *nv);
    if (!cmax || !dcv || !dg || !nv) { dp_free(cmax); dp_free(dcv); dp_free(dg); dp_free(nv); st = DP_ERR_NOMEM; goto done; }
    {
        /* rel_i = rho_i / (1 - rho_i) + 3u: the mean value theorem, then the addition of eps or gamma
           and the division (docs/tolerances.md stage 3) */
#define CONF_REL(rh) ((rh) < 1 ? (rh) / (1 - (rh)) + 3 * k.u : INFINITY)
        int any_cf = 0;
        for (size_t i = 0; i < ref->n && st == DP_OK; i++) {
            const char *nm = ref->items[i].name;
            if (strncmp(nm, "per_sample.clip_factor", 22) != 0 || (nm[22] != '\0' && nm[22] != '.')) continue;
            const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
            int64_t n = dp_tensor_numel(r);
            dp_free(bnd);
            bnd = dp_malloc((size_t)(n ? n : 1) * sizeof *bnd);
            if (!bnd) { st = DP_ERR_NOMEM; break; }
            for (int64_t e = 0; e < n; e++) {
                double cf = fabs(dp_tensor_get(r, e)), rl = CONF_REL(n == B ? rhoi[e] : k.rho);
                bnd[e] = cf == 0 ? 0 : rl * cf; /* a dropped example's 0 must be exact */
            }
            if (n == B) {
                for (int64_t b = 0; b < B; b++) cmax[b] = any_cf ? fmax(cmax[b], fabs(dp_tensor_get(r, b))) : fabs(dp_tensor_get(r, b));
                any_cf = 1;
            }
            if (!c) st = conf_cmp_push_missing(out, prefix, nm, "candidate");
            else st = conf_cmp_elems(out, prefix, nm, r, c, NULL, bnd, o->warn);
        }
        for (int64_t b = 0; b < B; b++) {
            if (!any_cf) cmax[b] = 1.0;
            dcv[b] = cmax[b] == 0 ? 0 : CONF_REL(rhoi[b]) * cmax[b];
            nv[b] = (nrm && rn->ndim == 1 && rn->shape[0] == B) ? fabs(nrm[b]) : 0;
            /* per-element bound of the per-example gradient (normwise model, cancellation factor) */
            dg[b] = cmax[b] == 0 ? 0 : k.gK * kap[b] * nv[b];
#undef CONF_REL
        }
    }
    if (st != DP_OK) { dp_free(cmax); dp_free(dcv); dp_free(dg); dp_free(nv); goto done; }

    /* 4. clipped sums: |d cs_j| <= sum_i min(c_i dg_i + |g_ij| dc_i + dc_i dg_i, cap) + gamma_B sum_i |c_i g_ij|.
       A dropped example (reference factor 0, compared exactly above) adds nothing on either side.
       cap = C_total (2 + gamma_{P+4}): both clipped vectors have norm <= C_total (the candidate's up
       to the rounding of its norm and factor), so no coordinate of their difference exceeds it. */
    double ctot = -1;
    {
        static const char *const kc[] = {"c_total", "clip", NULL};
        if (!conf_meta_num(ref, &ctot, kc) || !(ctot > 0)) ctot = -1;
    }
    const double cap = ctot > 0 ? ctot * (2 + conf_gamma(k.P + 4, k.u)) : INFINITY;
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "step.clipped_sum.", 17) != 0) continue;
        const char *pname = nm + 17;
        const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
        char gname[200];
        snprintf(gname, sizeof gname, "per_sample.grad.%s", pname);
        const dp_tensor *g = dp_tset_find(ref, gname);
        int64_t n = dp_tensor_numel(r);
        if (g && (g->ndim < 1 || g->shape[0] != B || dp_tensor_numel(g) != B * n)) g = NULL;
        double *bd = conf_bstore_new(&bs, pname, CONF_BS_CS, n);
        if (!bd) { st = DP_ERR_NOMEM; break; }
        for (int64_t e = 0; e < n; e++) {
            double sabs = 0, prop = 0;
            for (int64_t b = 0; b < B; b++) {
                if (cmax[b] == 0) continue;
                /* |g_ij| <= n_i when the per-example gradient is not exported */
                double gij = g ? fabs(dp_tensor_get(g, b * n + e)) : nv[b];
                sabs += cmax[b] * gij;
                prop += fmin(cmax[b] * dg[b] + gij * dcv[b] + dcv[b] * dg[b], cap);
            }
            bd[e] = prop + conf_gamma((double)B, k.u) * sabs;
        }
        if (!c) { if ((st = conf_cmp_push_missing(out, prefix, nm, "candidate")) != DP_OK) break; continue; }
        if ((st = conf_cmp_elems(out, prefix, nm, r, c, NULL, bd, o->warn)) != DP_OK) break;
    }
    dp_free(cmax); dp_free(dcv); dp_free(dg); dp_free(nv);
    if (st != DP_OK) goto done;

    /* 5. noise: sigma C_total z, z in double on both sides: |d| <= sigma C_total bz + gamma_4 |noise| + u_c |noise|.
       sigma C_total from the metadata (sigma, c_total or clip); without it, 4 x the RMS of the reference noise. */
    double sc = -1;
    {
        static const char *const ks[] = {"sigma", "noise_multiplier", NULL};
        static const char *const kc[] = {"c_total", "clip", "max_grad_norm", "C", NULL};
        double s, c;
        if (conf_meta_num(ref, &s, ks) && conf_meta_num(ref, &c, kc)) sc = fabs(s * c);
    }
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "step.noise.", 11) != 0) continue;
        const char *pname = nm + 11;
        const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
        int64_t n = dp_tensor_numel(r);
        double scale = sc;
        if (scale < 0) {
            double ss = 0;
            for (int64_t e = 0; e < n; e++) ss += dp_tensor_get(r, e) * dp_tensor_get(r, e);
            scale = n ? 4 * sqrt(ss / (double)n) : 0;
        }
        double *bd = conf_bstore_new(&bs, pname, CONF_BS_NOISE, n);
        if (!bd) { st = DP_ERR_NOMEM; goto done; }
        for (int64_t e = 0; e < n; e++) {
            double a = fabs(dp_tensor_get(r, e));
            bd[e] = scale * k.bz + conf_gamma(4, k.u) * a + k.uc * a;
        }
        if (!c) { if ((st = conf_cmp_push_missing(out, prefix, nm, "candidate")) != DP_OK) goto done; continue; }
        if (o->noise_statistical) {
            /* noise shares (docs/tolerances.md "Noise shares"): rank r adds
               (sigma C_total / sqrt(R)) N(key, NOISE, step, lane p | (r+1) << 16, e); the sum over
               r = 0..R-1 (rank order) is recomputed from the reference's noise key. */
            const char *km = dp_tset_meta(ref, "noise_key");
            char *end = NULL;
            uint64_t key = km ? strtoull(km, &end, 10) : 0;
            int have_key = km && end != km && *end == '\0';
            double R = (double)o->noise_ranks;
            if (R <= 0) {
                static const char *const kr[] = {"ranks", NULL};
                if (!conf_meta_num(cand, &R, kr)) R = 0;
            }
            if (!have_key || sc < 0) {
                if ((st = conf_cmp_push_skip(out, prefix, nm, CONF_SKIPPED,
                                    "noise shares without noise_key/sigma/c_total in the reference metadata: "
                                    "not recomputable, needs a statistical check (INCOMPLETE)")) != DP_OK)
                    goto done;
                mark_incomplete(out, prefix, nm, "noise not recomputable (no noise_key/sigma/c_total in the reference)");
                continue;
            }
            if (!(R >= 1 && R < 256 && R == floor(R))) {
                conf_tensor_result t;
                tr_init(&t, prefix, nm);
                t.numel = n;
                t.status = CONF_FAIL;
                t.worst_frac = INFINITY;
                snprintf(t.msg, sizeof t.msg, "noise shares: rank count unknown or out of [1, 255] (no 'ranks' in "
                                              "the candidate metadata): pass --noise-ranks R");
                if ((st = conf_cmp_result_push(out, &t)) != DP_OK) goto done;
                continue;
            }
            /* the parameter's lane: the p whose single-mode draw is the reference's noise */
            int lane = -1;
            for (int p = 0; n > 0 && p < (int)ref->n && p < (1 << 16); p++) {
                double z = sc * dp_stream_gaussian(key, DP_PURPOSE_NOISE, (uint32_t)step_no, (uint32_t)p, 0);
                if (fabs(z - dp_tensor_get(r, 0)) <= bd[0]) { lane = p; break; }
            }
            if (n > 0 && lane < 0) {
                if ((st = conf_cmp_push_skip(out, prefix, nm, CONF_SKIPPED,
                                    "noise shares: the reference noise matches no lane of its noise_key (INCOMPLETE)")) != DP_OK)
                    goto done;
                mark_incomplete(out, prefix, nm, "the reference noise matches no lane of its noise_key");
                continue;
            }
            double *en = conf_bstore_new(&bs, pname, CONF_BS_EN, n);
            if (!en) { st = DP_ERR_NOMEM; goto done; }
            double sd = sc / sqrt(R), gs = conf_gamma(R + 7, k.u);
            for (int64_t e = 0; e < n; e++) {
                double sum = 0, sabs = 0;
                for (int rk = 0; rk < (int)R; rk++) {
                    uint32_t ln = (uint32_t)lane | ((uint32_t)(rk + 1) << 16);
                    double x = sd * dp_stream_gaussian(key, DP_PURPOSE_NOISE, (uint32_t)step_no, ln, (uint64_t)e);
                    sum += x;
                    sabs += fabs(x);
                }
                en[e] = sum;
                /* R draws of libm error sd bz each; sigma, C_total, sqrt(R), the division and the
                   product (7 roundings), the R-1 additions in any order; each share and the total
                   stored in the candidate's dtype */
                bd[e] = R * sd * k.bz + (gs + 2 * k.uc) * sabs + k.uc * fabs(sum);
            }
            if ((st = conf_cmp_elems(out, prefix, nm, r, c, en, bd, o->warn)) != DP_OK) goto done;
            continue;
        }
        if ((st = conf_cmp_elems(out, prefix, nm, r, c, NULL, bd, o->warn)) != DP_OK) goto done;
    }

    /* 6. private gradients: pg = (cs + noise) / d: |d pg| <= (|d cs| + |d noise|) / d + gamma_3 |pg|;
       1/d is fitted from the reference at the element with the largest |cs + noise|. With
       noise shares the expected value is (cs_ref + noise_cand) / d and |d noise| = 0. */
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "step.private_grad.", 18) != 0) continue;
        const char *pname = nm + 18;
        const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
        char csn[200], nzn[200];
        snprintf(csn, sizeof csn, "step.clipped_sum.%s", pname);
        snprintf(nzn, sizeof nzn, "step.noise.%s", pname);
        const dp_tensor *rcs = dp_tset_find(ref, csn), *rnz = dp_tset_find(ref, nzn), *cnz = dp_tset_find(cand, nzn);
        int64_t n = dp_tensor_numel(r);
        const double *dcs = conf_bstore_get(&bs, pname, CONF_BS_CS, n), *dnz = conf_bstore_get(&bs, pname, CONF_BS_NOISE, n);
        if (!rcs || !rnz || !dcs || !dnz || dp_tensor_numel(rcs) != n || dp_tensor_numel(rnz) != n) {
            if ((st = conf_cmp_push_skip(out, prefix, nm, CONF_SKIPPED,
                                "reference lacks the clipped sum or the noise of this tensor: no error model")) != DP_OK)
                goto done;
            continue;
        }
        double inv_d = 0, best = 0;
        for (int64_t e = 0; e < n; e++) {
            double s = dp_tensor_get(rcs, e) + dp_tensor_get(rnz, e);
            if (fabs(s) > best) { best = fabs(s); inv_d = dp_tensor_get(r, e) / s; }
        }
        /* noise shares: with the recomputed summed shares (en) the expected value is
           (cs_ref + en) / d with en's bound; without them the candidate's noise is substituted */
        const double *en = o->noise_statistical ? conf_bstore_get(&bs, pname, CONF_BS_EN, n) : NULL;
        int subst = o->noise_statistical && !en && cnz && dp_tensor_numel(cnz) == n;
        double *bd = conf_bstore_new(&bs, pname, CONF_BS_PG, n);
        dp_free(tmp);
        tmp = dp_malloc((size_t)(n ? n : 1) * sizeof *tmp);
        if (!bd || !tmp) { st = DP_ERR_NOMEM; goto done; }
        for (int64_t e = 0; e < n; e++) {
            tmp[e] = en      ? (dp_tensor_get(rcs, e) + en[e]) * inv_d
                   : subst ? (dp_tensor_get(rcs, e) + dp_tensor_get(cnz, e)) * inv_d : dp_tensor_get(r, e);
            bd[e] = (dcs[e] + (subst ? 0 : dnz[e])) * fabs(inv_d) + conf_gamma(3, k.u) * fabs(tmp[e])
                  + k.uc * fabs(tmp[e]);
        }
        if (!c) { if ((st = conf_cmp_push_missing(out, prefix, nm, "candidate")) != DP_OK) goto done; continue; }
        if ((st = conf_cmp_elems(out, prefix, nm, r, c, (subst || en) ? tmp : NULL, bd, o->warn)) != DP_OK) goto done;
    }

    /* 7. updated parameters (docs/tolerances.md, "Optimizer"): the reference's optimizer
       state (SGD momentum buffer, AdamW moments) is rebuilt from the reference's private
       gradients step by step (directory mode carries it), with element-wise bounds:
       SGD   b' = mu b + G;  p' = p - lr b'
       AdamW p_d = p (1 - lr wd); m' = b1 m + (1-b1) G; v' = b2 v + (1-b2) G^2;
             D = sqrt(v') / sqrt(1-b2^t) + eps; p' = p_d - (lr / (1-b1^t)) m' / D.
       |d p| is the measured difference of the input parameters. */
    {
        char opt[16] = "sgd";
        const char *ms = dp_tset_meta(ref, "optimizer");
        if (ms) snprintf(opt, sizeof opt, "%s", ms);
        double lr = NAN, mu = 0, wd = 0, b1 = 0.9, b2 = 0.999, eps = 1e-8;
        static const char *const klr[] = {"lr", "learning_rate", NULL}, *const kmu[] = {"momentum", NULL},
                                 *const kwd[] = {"weight_decay", NULL}, *const kb1[] = {"beta1", NULL},
                                 *const kb2[] = {"beta2", NULL}, *const keps[] = {"adam_eps", NULL};
        conf_meta_num(ref, &lr, klr);
        conf_meta_num(ref, &mu, kmu);
        conf_meta_num(ref, &wd, kwd);
        conf_meta_num(ref, &b1, kb1);
        conf_meta_num(ref, &b2, kb2);
        conf_meta_num(ref, &eps, keps);
        int adam = strcmp(opt, "adamw") == 0, known = adam || strcmp(opt, "sgd") == 0;
        /* the optimizer state before this step is known at step 1 (zero) or when carried */
        for (size_t i = 0; i < ref->n; i++) {
            const char *nm = ref->items[i].name;
            if (strncmp(nm, "params_after.", 13) != 0) continue;
            const char *pname = nm + 13;
            const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
            if (!c) { DP_TRY(conf_cmp_push_missing(out, prefix, nm, "candidate")); continue; }
            char pn[200], pgn[200];
            snprintf(pn, sizeof pn, "params.%s", pname);
            snprintf(pgn, sizeof pgn, "step.private_grad.%s", pname);
            const dp_tensor *rp = dp_tset_find(ref, pn), *cp = dp_tset_find(cand, pn), *rpg = dp_tset_find(ref, pgn);
            const dp_tensor *cpg = dp_tset_find(cand, pgn);
            int64_t n = dp_tensor_numel(r);
            const double *dpg = conf_bstore_get(&bs, pname, CONF_BS_PG, n);
            const double *m1 = carry_in ? conf_bstore_get(carry_in, pname, CONF_BS_M1, n) : NULL;
            const double *dm1 = carry_in ? conf_bstore_get(carry_in, pname, CONF_BS_DM1, n) : NULL;
            const double *m2 = carry_in ? conf_bstore_get(carry_in, pname, CONF_BS_M2, n) : NULL;
            const double *dm2 = carry_in ? conf_bstore_get(carry_in, pname, CONF_BS_DM2, n) : NULL;
            int state_known = step_no <= 1 || (m1 && dm1 && (!adam || (m2 && dm2))) || (!adam && mu == 0);
            const char *why = !known ? "unknown optimizer in the metadata: no update error model"
                            : isnan(lr) ? "no lr in the reference metadata: no update error model"
                            : (!rp || !rpg || !dpg || dp_tensor_numel(rp) != n || dp_tensor_numel(rpg) != n)
                                ? "no update error model without params and step.private_grad of this tensor"
                            : !state_known ? "optimizer state of a later step unknown: compare the export directory"
                            : NULL;
            if (why) { DP_TRY(conf_cmp_push_skip(out, prefix, nm, CONF_SKIPPED, why)); continue; }
            int subst = o->noise_statistical && cpg && dp_tensor_numel(cpg) == n;
            double *bd = conf_bstore_new(&bs, pname, CONF_BS_PA, n), *nm1 = conf_bstore_new(&bs, pname, CONF_BS_M1, n);
            double *ndm1 = conf_bstore_new(&bs, pname, CONF_BS_DM1, n);
            double *nm2 = adam ? conf_bstore_new(&bs, pname, CONF_BS_M2, n) : NULL, *ndm2 = adam ? conf_bstore_new(&bs, pname, CONF_BS_DM2, n) : NULL;
            dp_free(tmp);
            tmp = dp_malloc((size_t)(n ? n : 1) * sizeof *tmp);
            if (!bd || !nm1 || !ndm1 || (adam && (!nm2 || !ndm2)) || !tmp) { st = DP_ERR_NOMEM; goto done; }
            double t = step_no, bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t), sbc2 = sqrt(bc2), ssz = lr / bc1;
            double g2 = conf_gamma(2, k.u), g3 = conf_gamma(3, k.u), g4 = conf_gamma(4, k.u);
            for (int64_t e = 0; e < n; e++) {
                double p = dp_tensor_get(rp, e);
                double g = subst ? dp_tensor_get(cpg, e) : dp_tensor_get(rpg, e), dg = subst ? 0 : dpg[e];
                double dp_in = cp && dp_tensor_numel(cp) == n ? fabs(dp_tensor_get(cp, e) - p) : k.uc * fabs(p);
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
                    double dr = D > dD ? (ndm1[e] + fabs(rr) * dD) / (D - dD) + k.u * fabs(rr) : INFINITY;
                    pnew = pd - ssz * rr;
                    b = dpd + ssz * dr + g2 * (fabs(pd) + fabs(ssz * rr));
                }
                tmp[e] = subst ? pnew : dp_tensor_get(r, e);
                bd[e] = b + k.uc * fabs(tmp[e]);
            }
            if ((st = conf_cmp_elems(out, prefix, nm, r, c, subst ? tmp : NULL, bd, o->warn)) != DP_OK) goto done;
        }
    }

    /* 8. loss: |d l_i| <= gamma_K (|l_i| + ln P + 1) (log-sum-exp scale; docs/tolerances.md). */
    static const char *const loss_names[] = {"per_sample.loss", "per_sample.loss_plus", "per_sample.loss_minus", NULL};
    for (int li = 0; loss_names[li]; li++) {
        const dp_tensor *r = dp_tset_find(ref, loss_names[li]), *c = dp_tset_find(cand, loss_names[li]);
        if (!r) continue;
        if (!c) { DP_TRY(conf_cmp_push_missing(out, prefix, loss_names[li], "candidate")); continue; }
        int64_t n = dp_tensor_numel(r);
        dp_free(bnd);
        bnd = dp_malloc((size_t)(n ? n : 1) * sizeof *bnd);
        if (!bnd) { st = DP_ERR_NOMEM; goto done; }
        for (int64_t e = 0; e < n; e++)
            bnd[e] = (conf_gamma(k.K + 2, k.u) + k.gH) * (fabs(dp_tensor_get(r, e)) + log(k.P > 1 ? k.P : 1) + 1);
        dp_free(tmp);
        if ((st = nonfinite_agree(&tmp, r, c)) != DP_OK) goto done;
        if ((st = conf_cmp_elems(out, prefix, loss_names[li], r, c, tmp, bnd, o->warn)) != DP_OK) goto done;
    }
    (void)T;

    /* tensors of the candidate the reference does not have: noted, not compared. */
    for (size_t i = 0; i < cand->n; i++)
        if (!dp_tset_find(ref, cand->items[i].name) && strncmp(cand->items[i].name, "per_sample.grad.", 16) != 0) {
            char why[200];
            snprintf(why, sizeof why, "only in the candidate export: not compared");
            DP_TRY(conf_cmp_push_skip(out, prefix, cand->items[i].name, CONF_SKIPPED, why));
        }
done:
    /* reference tensors no rule above compared: listed, so nothing disappears silently */
    for (size_t i = 0; st == DP_OK && i < ref->n; i++) {
        char full[200];
        snprintf(full, sizeof full, "%s%s", prefix, ref->items[i].name);
        int seen = 0;
        for (size_t j = 0; j < out->n && !seen; j++) seen = strcmp(out->items[j].name, full) == 0;
        if (seen) continue;
        st = conf_cmp_push_skip(out, prefix, ref->items[i].name, CONF_SKIPPED,
                       strncmp(ref->items[i].name, "per_sample.grad.", 16) == 0
                           ? "per-example gradient: an input of the clipped sum, compared through it"
                           : "no error model for this tensor: not compared");
    }
    if (st == DP_OK && carry_out) { /* hand the update bounds to the next step */
        conf_bstore_free(carry_out);
        *carry_out = bs;
        memset(&bs, 0, sizeof bs);
    }
    conf_bstore_free(&bs);
    dp_free(bnd);
    dp_free(tmp);
    dp_free(nrm);
    dp_free(kap);
    dp_free(rhoi);
    return st;
}

/* A candidate that declares another clip convention (metadata clip_fn, e.g. Opacus's
 * abadi_eps:1e-6) is compared with the reference re-clipped under that convention
 * (conf_ref_reclip, conformance/compare/convention.c). */
static dp_status compare_step(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
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
        mark_incomplete(out, prefix, "(clip_fn)", why);
        return compare_step_body(out, ref, cand, o, prefix, carry_in, carry_out);
    }
    st = compare_step_body(out, &adj, cand, o, prefix, carry_in, carry_out);
    dp_tset_free(&adj);
    return st;
}

dp_status conf_compare_sets(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                            const conf_cmp_opts *o, const char *prefix) {
    return compare_step(out, ref, cand, o, prefix, NULL, NULL);
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted step-*.safetensors names of a directory. */
static dp_status list_steps(char ***names, size_t *n, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return dp_error(DP_ERR_IO, "cannot open directory %s", dir);
    char **v = NULL;
    size_t k = 0, cap = 0;
    struct dirent *e;
    dp_status st = DP_OK;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "step-", 5) != 0 || l < 17 || strcmp(e->d_name + l - 12, ".safetensors") != 0) continue;
        if ((st = DP_GROW(v, cap, k + 1, 16, "step list")) != DP_OK) break;
        v[k] = dp_strdup(e->d_name);
        if (!v[k]) { st = dp_error(DP_ERR_NOMEM, "out of memory"); break; }
        k++;
    }
    closedir(d);
    if (st != DP_OK) {
        for (size_t i = 0; i < k; i++) dp_free(v[i]);
        dp_free(v);
        return st;
    }
    if (k) qsort(v, k, sizeof *v, cmp_str);
    *names = v;
    *n = k;
    return DP_OK;
}

dp_status conf_compare_paths(conf_cmp_result *out, const char *ref_path, const char *cand_path,
                             const conf_cmp_opts *o) {
    int rd = is_dir(ref_path), cd = is_dir(cand_path);
    dp_tensor_set rs, cs;
    conf_cmp_opts eff = *o;
    if (!rd && !cd) {
        DP_TRY(dp_st_read(&rs, ref_path));
        dp_status st = dp_st_read(&cs, cand_path);
        if (st != DP_OK) { dp_tset_free(&rs); return st; }
        st = declared_precision(&eff, &cs, cand_path);
        if (st == DP_OK) st = compare_step(out, &rs, &cs, &eff, "", NULL, NULL);
        dp_tset_free(&rs);
        dp_tset_free(&cs);
        return st;
    }
    if (!rd || !cd)
        return dp_error(DP_ERR_INVALID, "%s is a %s but %s is a %s: compare two files or two export directories",
                        ref_path, rd ? "directory" : "file", cand_path, cd ? "directory" : "file");
    char **names = NULL;
    size_t n = 0;
    DP_TRY(list_steps(&names, &n, ref_path));
    dp_status st = DP_OK;
    if (n == 0) st = dp_error(DP_ERR_FORMAT, "no step-*.safetensors in the reference export %s", ref_path);
    conf_bstore carry = {0};
    for (size_t i = 0; i < n && st == DP_OK; i++) {
        char rp[4096], cp[4096], pfx[64];
        snprintf(rp, sizeof rp, "%s/%s", ref_path, names[i]);
        snprintf(cp, sizeof cp, "%s/%s", cand_path, names[i]);
        snprintf(pfx, sizeof pfx, "%.*s/", (int)(strlen(names[i]) - 12), names[i]);
        if ((st = dp_st_read(&rs, rp)) != DP_OK) break;
        struct stat sb;
        if (stat(cp, &sb) != 0) {
            dp_tset_free(&rs);
            conf_tensor_result t;
            tr_init(&t, pfx, "(step file)");
            t.status = CONF_FAIL;
            t.worst_frac = INFINITY;
            snprintf(t.msg, sizeof t.msg, "%s missing in the candidate export %s", names[i], cand_path);
            st = conf_cmp_result_push(out, &t);
            break; /* later steps depend on this one */
        }
        if ((st = dp_st_read(&cs, cp)) != DP_OK) { dp_tset_free(&rs); break; }
        eff = *o; /* every step's declared precision */
        st = declared_precision(&eff, &cs, cp);
        if (st == DP_OK) st = compare_step(out, &rs, &cs, &eff, pfx, i ? &carry : NULL, &carry);
        dp_tset_free(&rs);
        dp_tset_free(&cs);
    }
    conf_bstore_free(&carry);
    for (size_t i = 0; i < n; i++) dp_free(names[i]);
    dp_free(names);
    return st;
}

void conf_cmp_print(const conf_cmp_result *r, void *file, int verbose) {
    FILE *f = file;
    fprintf(f, "%-56s %-13s %12s %12s  %s\n", "tensor", "status", "budget used", "max |diff|", "detail");
    for (size_t i = 0; i < r->n; i++) {
        const conf_tensor_result *t = &r->items[i];
        if (!verbose && t->status == CONF_SKIPPED) continue;
        char frac[32];
        if (t->status == CONF_SKIPPED || t->status == CONF_NOT_SUPPORTED) snprintf(frac, sizeof frac, "-");
        else if (isfinite(t->worst_frac)) snprintf(frac, sizeof frac, "%.3g%%", 100 * t->worst_frac);
        else snprintf(frac, sizeof frac, "inf");
        fprintf(f, "%-56s %-13s %12s %12.3g  %s\n", t->name, conf_status_name(t->status), frac, t->max_abs_err, t->msg);
    }
    if (r->arith[0])
        fprintf(f, "judged under the candidate's declared arithmetic: %s%s\n", r->arith,
                r->arith_u > 0 ? " (u_c raised to the declared u_eff)" : "");
    fprintf(f, "overall: %s, worst fraction of budget %.3g%%%s%s\n", conf_cmp_overall(r),
            isfinite(r->worst_frac) ? 100 * r->worst_frac : INFINITY, r->first_fail[0] ? ", first FAIL: " : "",
            r->first_fail);
    if (r->incomplete && r->status != CONF_FAIL)
        fprintf(f, "INCOMPLETE: %s (%d check(s) could not run; never a pass by omission)\n", r->incomplete_why,
                r->incomplete);
}

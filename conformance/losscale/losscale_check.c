/* conformance/losscale/losscale_check.c — the `losscale` check (docs/precision.md "Loss
 * scaling", "The losscale check"): recognises a skipped step (dynamic loss scaling's
 * data-dependent release), overflowed per-example norms, the over-shrink signature (the
 * clipped sum is the reference's divided by 2^k) and a loss scale left in the norms, on
 * arrays (the simulation) and on dpsgd exports (the engine's or a third party's). */
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/safetensors.h"
#include "common/alloc.h"
#include "conformance/compare/compare.h"
#include "conformance/losscale/losscale.h"

static const char *const VERDICT_NAMES[LSV_COUNT] = {
#define LS_VN_(ID, s) s,
    LS_VERDICTS(LS_VN_)
#undef LS_VN_
};

const char *ls_verdict_name(ls_verdict v) {
    return v >= 0 && v < LSV_COUNT ? VERDICT_NAMES[v] : "?";
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* k = round(log2 of the median of cand/ref) over the examples with positive finite norms
 * on both sides; only k >= 1 (norms larger than the reference's by a power of two: a
 * loss scale left in) is a signature, since underflow can only shrink a norm. A correct
 * pipeline's norms are within their rounding bound (a few u of the half type, far
 * below sqrt(2)), so the rounding of log2 gives 0. */
static int norm_scale_k(const double *cn, const double *rn, int64_t B) {
    double *l = dp_malloc(sizeof(double) * (size_t)(B + 1));
    if (!l) return 0;
    int64_t m = 0;
    for (int64_t i = 0; i < B; i++)
        if (isfinite(cn[i]) && isfinite(rn[i]) && cn[i] > 0 && rn[i] > 0) l[m++] = log2(cn[i] / rn[i]);
    int k = 0;
    if (m > 0) {
        qsort(l, (size_t)m, sizeof *l, cmp_dbl);
        double med = m % 2 ? l[m / 2] : 0.5 * (l[m / 2 - 1] + l[m / 2]);
        k = med >= 0.5 && med < 1100 ? (int)lround(med) : 0;
    }
    dp_free(l);
    return k;
}

/* The verdict from what was measured (one place for arrays and exports). */
typedef struct {
    int skipped, dynamic;  /* the step was skipped / the pipeline scales dynamically */
    int64_t nonfinite;     /* non-finite per-example norms or clipped-sum elements */
    int64_t B;
    int kn;                /* norm_scale_k */
    int sum_ok;            /* the clipped sum agrees with the reference within the bound */
    int k;                 /* round(-log2 ratio) of the clipped sums */
    int shrunk_ok;         /* 2^k x the clipped sum agrees with the reference (k >= 1) */
    int underflowed;
    double e0, ek;         /* ||cand - ref|| and ||2^k cand - ref|| of the clipped sums */
} ls_facts;

/* The over-shrink hypothesis fits better than the correct one (a bound that admits both,
 * as a worst-case bound can at low precision, does not decide alone). */
static int shrink_fits(const ls_facts *f) { return f->k >= 1 && f->shrunk_ok && f->ek < f->e0; }

static void decide(ls_check *o, const ls_facts *f) {
    o->k = 0;
    if (f->skipped || f->dynamic) {
        o->verdict = LSV_SKIP_RELEASE;
        snprintf(o->diag, sizeof o->diag, "%s",
                 f->skipped ? "data-dependent release: a step was skipped on overflow (dynamic loss scaling); "
                              "whether it is depends on private examples"
                            : "data-dependent release: dynamic loss scaling's skip decision reads the unclipped, "
                              "un-noised gradients");
    } else if (f->nonfinite) {
        o->verdict = LSV_OVERFLOW;
        snprintf(o->diag, sizeof o->diag,
                 "per-example norms or clipped sums are inf/NaN (%lld values): the scaled gradient overflowed",
                 (long long)f->nonfinite);
    } else if (f->sum_ok && f->kn == 0 && !shrink_fits(f)) {
        o->verdict = f->underflowed ? LSV_PASS_UNDERFLOW : LSV_PASS;
        snprintf(o->diag, sizeof o->diag, "%s",
                 f->underflowed ? "clipped sum within the bound; some half values underflowed to zero"
                                : "clipped sum within the bound");
    } else if (shrink_fits(f)) {
        /* the norms, when they show S, name it exactly (examples below C / S keep their size
         * and can pull the sum's ratio off 2^-k) */
        o->verdict = LSV_OVERSHRINK;
        o->k = f->kn >= 1 ? f->kn : f->k;
        snprintf(o->diag, sizeof o->diag, "loss scale applied after clipping, factor 2^%d", o->k);
    } else if (f->kn >= 1 && o->ratio <= 0.5) {
        /* norms carry S and the sum shrank at least by half: clipping saw S g, then step 5
         * divided by S (examples with n >= C lose the factor S exactly, those below C / S
         * keep their size). Without step 5 no example's factor shrinks (min(S, C / n) >=
         * min(1, C / n)), so a halved sum is not that mistake. */
        o->verdict = LSV_OVERSHRINK;
        o->k = f->kn;
        snprintf(o->diag, sizeof o->diag,
                 "loss scale applied after clipping, factor 2^%d (per-example norms are 2^%d x the reference's, "
                 "clipped sum ratio %.6g)", f->kn, f->kn, o->ratio);
    } else if (f->kn >= 1) {
        o->verdict = LSV_NOT_UNSCALED;
        o->k = f->kn;
        snprintf(o->diag, sizeof o->diag,
                 "loss scale not removed: per-example norms are 2^%d x the reference's (clipping saw the scaled "
                 "gradient)%s", f->kn, f->sum_ok ? "" : "; the clipped sum differs");
    } else {
        o->verdict = LSV_MISMATCH;
        snprintf(o->diag, sizeof o->diag,
                 "clipped sum differs from the reference (ratio %.6g, relative error %.3g): not a loss-scale "
                 "signature (see dpcert compare)", o->ratio, o->rel_err);
    }
}

void ls_ratio_err(double *ratio, double *rel_err, const double *cs, const double *rs, int64_t n) {
    double rr = 0, cr = 0, dd = 0;
    for (int64_t e = 0; e < n; e++) {
        rr += rs[e] * rs[e];
        cr += cs[e] * rs[e];
        dd += (cs[e] - rs[e]) * (cs[e] - rs[e]);
    }
    *ratio = rr > 0 ? cr / rr : NAN;
    *rel_err = rr > 0 ? sqrt(dd / rr) : NAN;
}

static void ratio_err(ls_check *o, const double *cs, const double *rs, int64_t n) {
    ls_ratio_err(&o->ratio, &o->rel_err, cs, rs, n);
}

static double scaled_err(const double *cs, const double *rs, int64_t n, int k) {
    double s = ldexp(1.0, k), ds = 0;
    for (int64_t e = 0; e < n; e++) ds += (s * cs[e] - rs[e]) * (s * cs[e] - rs[e]);
    return sqrt(ds);
}

static int ratio_k(double ratio) {
    if (!(ratio > 0) || !isfinite(ratio)) return 0;
    double l = -log2(ratio);
    return l >= 0.5 && l < 1100 ? (int)lround(l) : 0;
}

void ls_check_arrays(ls_check *out, const double *cand_norm, const double *ref_norm, int64_t B,
                          const double *cand_sum, const double *ref_sum, int64_t n, double bound, int skipped,
                          int underflowed) {
    memset(out, 0, sizeof *out);
    ls_facts f = {0};
    f.skipped = skipped;
    f.B = B;
    f.underflowed = underflowed;
    for (int64_t i = 0; i < B; i++) f.nonfinite += !isfinite(cand_norm[i]);
    for (int64_t e = 0; e < n; e++) f.nonfinite += !isfinite(cand_sum[e]);
    ratio_err(out, cand_sum, ref_sum, n);
    double dd = 0;
    for (int64_t e = 0; e < n; e++) dd += (cand_sum[e] - ref_sum[e]) * (cand_sum[e] - ref_sum[e]);
    dd = sqrt(dd);
    out->bound_frac = bound > 0 ? dd / bound : (dd > 0 ? INFINITY : 0);
    f.sum_ok = dd <= bound;
    f.kn = norm_scale_k(cand_norm, ref_norm, B);
    f.k = ratio_k(out->ratio);
    f.e0 = dd;
    f.ek = scaled_err(cand_sum, ref_sum, n, f.k);
    f.shrunk_ok = f.k >= 1 && f.ek <= bound;
    decide(out, &f);
}

/* ---------------------------------------------------------------- exports */
static int clipped_sums_pass(int *any, const conf_cmp_result *r) {
    int ok = 1;
    *any = 0;
    for (size_t i = 0; i < r->n; i++)
        if (strstr(r->items[i].name, "step.clipped_sum.")) {
            *any = 1;
            ok &= r->items[i].status == CONF_PASS || r->items[i].status == CONF_MARGINAL;
        }
    return ok;
}

/* the clipped sums of a set concatenated (cs) and the reference's (rs), in ref's order */
static dp_status gather_sums(double **cs, double **rs, int64_t *n, const dp_tensor_set *ref, const dp_tensor_set *cand) {
    int64_t tot = 0;
    for (size_t i = 0; i < ref->n; i++)
        if (!strncmp(ref->items[i].name, "step.clipped_sum.", 17)) tot += dp_tensor_numel(&ref->items[i].t);
    *cs = dp_malloc(sizeof(double) * (size_t)(tot + 1));
    *rs = dp_malloc(sizeof(double) * (size_t)(tot + 1));
    if (!*cs || !*rs) return dp_error(DP_ERR_NOMEM, "losscale: out of memory");
    int64_t m = 0;
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "step.clipped_sum.", 17)) continue;
        const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
        if (!c || dp_tensor_numel(c) != dp_tensor_numel(r))
            return dp_error(DP_ERR_FORMAT, "losscale: the candidate lacks tensor '%s' (or its shape differs)", nm);
        for (int64_t e = 0; e < dp_tensor_numel(r); e++, m++) {
            (*rs)[m] = dp_tensor_get(r, e);
            (*cs)[m] = dp_tensor_get(c, e);
        }
    }
    *n = m;
    return DP_OK;
}

/* scale every step.clipped_sum.* of s by f (exact for a power of two in f64/f32) */
static dp_status scale_sums(dp_tensor_set *s, double f) {
    for (size_t i = 0; i < s->n; i++)
        if (!strncmp(s->items[i].name, "step.clipped_sum.", 17))
            for (int64_t e = 0; e < dp_tensor_numel(&s->items[i].t); e++)
                DP_TRY(dp_tensor_put(&s->items[i].t, e, f * dp_tensor_get(&s->items[i].t, e)));
    return DP_OK;
}

/* A step skipped without metadata: the candidate's parameters did not move although its
 * private gradient is nonzero and lr > 0. */
static int params_unmoved(const dp_tensor_set *c) {
    double lr = 0;
    if (!conf_meta_double(c, "lr", &lr) || !(lr > 0)) return 0;
    int any_param = 0, moved = 0, grad_nonzero = 0;
    for (size_t i = 0; i < c->n; i++) {
        const char *nm = c->items[i].name;
        if (!strncmp(nm, "step.private_grad.", 18))
            for (int64_t e = 0; e < dp_tensor_numel(&c->items[i].t); e++) grad_nonzero |= dp_tensor_get(&c->items[i].t, e) != 0;
        if (strncmp(nm, "params_after.", 13)) continue;
        char bn[200];
        snprintf(bn, sizeof bn, "params.%s", nm + 13);
        const dp_tensor *b = dp_tset_find(c, bn);
        if (!b || dp_tensor_numel(b) != dp_tensor_numel(&c->items[i].t)) continue;
        any_param = 1;
        for (int64_t e = 0; e < dp_tensor_numel(b); e++) moved |= dp_tensor_get(b, e) != dp_tensor_get(&c->items[i].t, e);
    }
    return any_param && grad_nonzero && !moved;
}

static dp_status check_step(ls_check *o, const dp_tensor_set *ref, dp_tensor_set *cand, dp_dtype dtype,
                            int first) {
    memset(o, 0, sizeof *o);
    ls_facts f = {0};
    const char *sk = dp_tset_meta(cand, "loss_scale_skipped"), *mode = dp_tset_meta(cand, "loss_scale");
    f.skipped = (sk && !strcmp(sk, "1")) || params_unmoved(cand);
    f.dynamic = mode && !strncmp(mode, "dynamic", 7);
    /* per-example norms are optional (a third party may not export them): without them
     * only the clipped sums, the metadata and the parameters speak */
    const dp_tensor *cn = dp_tset_find(cand, "per_sample.norm"), *rn = dp_tset_find(ref, "per_sample.norm");
    if (cn && rn && dp_tensor_numel(cn) != dp_tensor_numel(rn))
        return dp_error(DP_ERR_FORMAT, "losscale: per_sample.norm has %lld examples in the candidate, %lld in the "
                        "reference (not the same batch)", (long long)dp_tensor_numel(cn), (long long)dp_tensor_numel(rn));
    if (!rn) cn = NULL;
    f.B = cn ? dp_tensor_numel(cn) : 0;
    double *cnv = dp_malloc(sizeof(double) * (size_t)(f.B + 1)), *rnv = dp_malloc(sizeof(double) * (size_t)(f.B + 1));
    double *cs = NULL, *rs = NULL;
    int64_t n = 0;
    dp_status st = cnv && rnv ? DP_OK : dp_error(DP_ERR_NOMEM, "losscale: out of memory");
    for (int64_t i = 0; st == DP_OK && i < f.B; i++) {
        cnv[i] = dp_tensor_get(cn, i);
        rnv[i] = dp_tensor_get(rn, i);
        f.nonfinite += !isfinite(cnv[i]);
    }
    if (st == DP_OK) st = gather_sums(&cs, &rs, &n, ref, cand);
    for (int64_t e = 0; st == DP_OK && e < n; e++) f.nonfinite += !isfinite(cs[e]);
    if (st == DP_OK) {
        ratio_err(o, cs, rs, n);
        f.kn = norm_scale_k(cnv, rnv, f.B);
        f.k = ratio_k(o->ratio);
        f.e0 = scaled_err(cs, rs, n, 0);
        f.ek = scaled_err(cs, rs, n, f.k);
    }
    /* the clipped-sum tolerances of conformance/compare/compare.c (docs/tolerances.md); later steps
     * start from parameters the candidate moved itself: only the first is compared */
    if (st == DP_OK && first && !f.nonfinite) {
        conf_cmp_opts co;
        conf_cmp_opts_default(&co);
        co.cand_dtype = dtype;
        conf_cmp_result r;
        conf_cmp_result_init(&r);
        int any = 0;
        st = conf_compare_sets(&r, ref, cand, &co, "");
        f.sum_ok = st == DP_OK && clipped_sums_pass(&any, &r) && any;
        conf_cmp_result_free(&r);
        if (st == DP_OK && f.k >= 1 && (st = scale_sums(cand, ldexp(1.0, f.k))) == DP_OK) {
            conf_cmp_result_init(&r);
            st = conf_compare_sets(&r, ref, cand, &co, "");
            f.shrunk_ok = st == DP_OK && clipped_sums_pass(&any, &r) && any;
            conf_cmp_result_free(&r);
        }
    } else if (st == DP_OK) {
        f.sum_ok = 1; /* not compared: only the overflow, skip and norm signatures apply */
    }
    if (st == DP_OK) decide(o, &f);
    dp_free(cnv); dp_free(rnv); dp_free(cs); dp_free(rs);
    return st;
}

static dp_status list_steps(glob_t *g, const char *dir) {
    char pat[4200];
    if (snprintf(pat, sizeof pat, "%s/step-*.safetensors", dir) >= (int)sizeof pat)
        return dp_error(DP_ERR_INVALID, "losscale: path too long: %s", dir);
    int rc = glob(pat, 0, NULL, g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g->gl_pathc == 0)) {
        if (rc == 0) globfree(g);
        return dp_error(DP_ERR_FORMAT, "losscale: no step-*.safetensors in %s", dir);
    }
    if (rc != 0) return dp_error(DP_ERR_IO, "losscale: cannot list %s", dir);
    return DP_OK;
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

dp_status ls_check_exports(ls_verdict *worst, char *diag, size_t diaglen, const char *ref_path,
                                const char *cand_path, dp_dtype dtype, FILE *txt) {
    *worst = LSV_PASS;
    if (diaglen) diag[0] = 0;
    int rd = is_dir(ref_path), cd = is_dir(cand_path);
    if (rd != cd)
        return dp_error(DP_ERR_INVALID, "losscale: %s and %s: compare two files or two export directories", ref_path,
                        cand_path);
    glob_t g = {0};
    size_t nsteps = 1;
    if (rd) { DP_TRY(list_steps(&g, ref_path)); nsteps = g.gl_pathc; }
    dp_status st = DP_OK;
    int rank_worst = -1;
    static const int RANK[LSV_COUNT] = {[LSV_PASS] = 0, [LSV_PASS_UNDERFLOW] = 1, [LSV_NONDP] = 2,
                                             [LSV_MISMATCH] = 3, [LSV_NOT_UNSCALED] = 4,
                                             [LSV_OVERSHRINK] = 5, [LSV_OVERFLOW] = 6,
                                             [LSV_SKIP_RELEASE] = 7};
    for (size_t i = 0; i < nsteps && st == DP_OK; i++) {
        char rp[4200], cp[4200];
        const char *base = rd ? strrchr(g.gl_pathv[i], '/') + 1 : NULL;
        snprintf(rp, sizeof rp, "%s", rd ? g.gl_pathv[i] : ref_path);
        if (rd) snprintf(cp, sizeof cp, "%s/%s", cand_path, base);
        else snprintf(cp, sizeof cp, "%s", cand_path);
        dp_tensor_set rs, cs;
        if ((st = dp_st_read(&rs, rp)) != DP_OK) break;
        if ((st = dp_st_read(&cs, cp)) != DP_OK) { dp_tset_free(&rs); break; }
        ls_check c;
        st = check_step(&c, &rs, &cs, dtype, i == 0);
        dp_tset_free(&rs);
        dp_tset_free(&cs);
        if (st != DP_OK) break;
        if (txt) fprintf(txt, "%-28s %-30s %s\n", rd ? base : cp, ls_verdict_name(c.verdict), c.diag);
        /* the most serious verdict; on a tie a step that was actually skipped names it */
        if (RANK[c.verdict] > rank_worst || (diaglen && RANK[c.verdict] == rank_worst && strstr(c.diag, "was skipped") &&
                                             !strstr(diag, "was skipped"))) {
            rank_worst = RANK[c.verdict];
            *worst = c.verdict;
            if (diaglen) snprintf(diag, diaglen, "%s: %s", rd ? base : cp, c.diag);
        }
    }
    if (rd) globfree(&g);
    return st;
}

/* conformance/compare/compare.c — the element-wise comparison under a bound (docs/tolerances.md)
 * and the result of a comparison (rows, statuses, the carried bounds, the printed table). The
 * stages of a step and the entries (sets, files, directories) are compare_step.c's.
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
void conf_tr_init(conf_tensor_result *t, const char *prefix, const char *name) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s%s", prefix, name);
    t->worst_index = -1;
}

int conf_same_shape(const dp_tensor *a, const dp_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

static int is_int(dp_dtype d) { return d == DP_I32 || d == DP_I64; }

/* Reference tensor as a malloc'd double array (NULL on OOM). */
double *conf_as_f64(const dp_tensor *t) {
    int64_t n = dp_tensor_numel(t);
    double *v = dp_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) v[i] = dp_tensor_get(t, i);
    return v;
}

dp_status conf_cmp_push_missing(conf_cmp_result *out, const char *prefix, const char *name, const char *side) {
    conf_tensor_result t;
    conf_tr_init(&t, prefix, name);
    t.status = CONF_FAIL;
    t.worst_frac = INFINITY;
    snprintf(t.msg, sizeof t.msg, "tensor %s missing in the %s export", name, side);
    return conf_cmp_result_push(out, &t);
}

dp_status conf_cmp_push_skip(conf_cmp_result *out, const char *prefix, const char *name, conf_status st,
                           const char *why) {
    conf_tensor_result t;
    conf_tr_init(&t, prefix, name);
    t.status = st;
    snprintf(t.msg, sizeof t.msg, "%s", why);
    return conf_cmp_result_push(out, &t);
}

/* Element-wise comparison of cand against ref under bound[] (bound == NULL: exact).
 * `ref_vals` overrides the reference values (used when the candidate's noise is
 * substituted); NULL uses ref. */
dp_status conf_cmp_elems(conf_cmp_result *out, const char *prefix, const char *name, const dp_tensor *ref,
                               const dp_tensor *cand, const double *ref_vals, const double *bound, double warn) {
    conf_tensor_result t;
    conf_tr_init(&t, prefix, name);
    t.numel = dp_tensor_numel(ref);
    if (!conf_same_shape(ref, cand)) {
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

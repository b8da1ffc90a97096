/* reference/dpsgd.c — the exact CPU reference of DP-SGD (docs/dpsgd.md).
 *
 * Textbook loops in double (or 256-bit MPFR for the DP stage), one backward pass per
 * example, Neumaier summation for norms and sums. Shapes in comments: b = realized
 * batch size, G = number of clipping groups, numel = elements of one parameter. */
#include "reference/dpsgd.h"
#include "common/alloc.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpfr.h>

#include "common/safetensors.h"
#include "common/rng.h" /* DP_RNG_GAUSS_MAX: the largest |z| the Gaussian sampler returns */

/* ---------------------------------------------------------------- config */

dp_status ref_dpsgd_config_check(const ref_dpsgd_config *c) {
    if (c->n < 1 || c->n > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "--dataset-size must be in [1, 2^32 - 1] (got %lld)", (long long)c->n);
    DP_TRY(dp_check_range("--q", c->q, 0.0, 0, 1.0, 1));
    if (c->steps < 1 || c->steps > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "--steps must be in [1, 2^32 - 1] (got %lld)", (long long)c->steps);
    DP_TRY(dp_check_min("--clip", c->clip, 0.0, 0));
    DP_TRY(dp_check_min("--sigma", c->sigma, 0.0, 1));
    if (!isfinite(c->clip) || !isfinite(c->sigma)) return dp_error(DP_ERR_INVALID, "--clip and --sigma must be finite");
    if ((unsigned)c->style > REF_CLIP_GROUP) return dp_error(DP_ERR_INVALID, "unknown clipping style");
    if (c->style == REF_CLIP_FLAT && c->groups[0])
        return dp_error(DP_ERR_USAGE, "--groups applies to --clipping per-layer or group only");
    if (c->style == REF_CLIP_GROUP && !c->groups[0])
        return dp_error(DP_ERR_USAGE, "--clipping group needs --groups NAME=GLOB[|GLOB...]:R;...");
    if ((unsigned)c->clip_fn > REF_CLIPFN_AUTOMATIC) return dp_error(DP_ERR_INVALID, "unknown clip function");
    DP_TRY(dp_check_min("--gamma", c->gamma, 0.0, 0));
    if (!isfinite(c->gamma)) return dp_error(DP_ERR_INVALID, "--gamma must be finite");
    if (c->micro_batches < 1 || c->micro_batches > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "--micro-batches must be in [1, 2^32 - 1] (got %lld)", (long long)c->micro_batches);
    if ((unsigned)c->opt > REF_OPT_ADAMW) return dp_error(DP_ERR_INVALID, "unknown optimizer");
    DP_TRY(dp_check_min("--lr", c->lr, 0.0, 1));
    DP_TRY(dp_check_range("--momentum", c->momentum, 0.0, 1, 1.0, 0));
    DP_TRY(dp_check_range("--beta1", c->beta1, 0.0, 1, 1.0, 0));
    DP_TRY(dp_check_range("--beta2", c->beta2, 0.0, 1, 1.0, 0));
    DP_TRY(dp_check_min("--adam-eps", c->adam_eps, 0.0, 0));
    DP_TRY(dp_check_min("--weight-decay", c->weight_decay, 0.0, 1));
    if (!isfinite(c->lr) || !isfinite(c->adam_eps) || !isfinite(c->weight_decay))
        return dp_error(DP_ERR_INVALID, "--lr, --adam-eps and --weight-decay must be finite");
    if ((unsigned)c->precision > REF_PREC_MPFR) return dp_error(DP_ERR_INVALID, "unknown precision");
    return DP_OK;
}

/* ---------------------------------------------------------------- Neumaier */

typedef struct { double s, c; } neum;
static void neum_add(neum *a, double x) {
    double t = a->s + x;
    if (fabs(a->s) >= fabs(x)) a->c += (a->s - t) + x;
    else a->c += (x - t) + a->s;
    a->s = t;
}
static double neum_get(const neum *a) { return a->s + a->c; }

/* ---------------------------------------------------------------- groups */

void ref_clip_groups_free(ref_clip_groups *g) {
    if (!g) return;
    dp_free(g->name);
    dp_free(g->thresh);
    dp_free(g->group_of);
    memset(g, 0, sizeof *g);
}

static dp_status groups_alloc(ref_clip_groups *g, int ngroups, int nparams) {
    g->ngroups = ngroups;
    g->name = dp_calloc((size_t)ngroups, sizeof *g->name);
    g->thresh = dp_calloc((size_t)ngroups, sizeof(double));
    g->group_of = dp_calloc((size_t)nparams, sizeof(int));
    if (!g->name || !g->thresh || !g->group_of) return DP_ERR_NOMEM;
    return DP_OK;
}

/* block index of parameter p: llama tok_emb -> 0, layers.{l}.* -> 1 + l, final_norm / lm_head -> L + 1;
 * mlp layers.{i}.* -> i. */
static int block_of(const ref_model *m, int p) {
    if (m->cfg.kind == REF_MLP) return p / 2;
    if (p == 0) return 0;
    if (p <= 9 * m->cfg.layers) return 1 + (p - 1) / 9;
    return m->cfg.layers + 1;
}

static dp_status parse_thresholds(ref_clip_groups *g, const char *list, const char *spec) {
    size_t n = 0;
    double *vals = dp_calloc((size_t)g->ngroups + 1, sizeof(double));
    if (!vals) return DP_ERR_NOMEM;
    dp_status st = dp_parse_double_list(vals, (size_t)g->ngroups + 1, &n, "--groups", list);
    if (st == DP_OK && n != (size_t)g->ngroups)
        st = dp_error(DP_ERR_INVALID, "--groups '%s': %zu thresholds given for %d groups", spec, n, g->ngroups);
    for (size_t k = 0; st == DP_OK && k < n; k++) {
        if (!(vals[k] > 0) || !isfinite(vals[k]))
            st = dp_error(DP_ERR_INVALID, "--groups '%s': threshold %zu must be finite and > 0 (got %g)", spec, k + 1,
                          vals[k]);
        else g->thresh[k] = vals[k];
    }
    dp_free(vals);
    return st;
}

static dp_status make_per_layer(ref_clip_groups *g, const ref_dpsgd_config *c, const ref_model *m) {
    const char *spec = c->groups;
    const char *colon = strchr(spec, ':');
    size_t kl = colon ? (size_t)(colon - spec) : strlen(spec);
    int block;
    if (kl == 0 || (kl == 6 && strncmp(spec, "tensor", 6) == 0)) block = 0;
    else if (kl == 5 && strncmp(spec, "block", 5) == 0) block = 1;
    else return dp_error(DP_ERR_INVALID, "--groups '%s': per-layer clipping takes tensor|block[:R1,R2,...]", spec);
    if (kl == 0 && colon) return dp_error(DP_ERR_INVALID, "--groups '%s': missing tensor|block before ':'", spec);
    int ng = block ? block_of(m, m->nparams - 1) + 1 : m->nparams;
    DP_TRY(groups_alloc(g, ng, m->nparams));
    for (int p = 0; p < m->nparams; p++) g->group_of[p] = block ? block_of(m, p) : p;
    for (int k = 0; k < ng; k++) {
        if (!block) snprintf(g->name[k], REF_MAX_NAME, "%s", m->params[k].name);
        else if (m->cfg.kind == REF_MLP) snprintf(g->name[k], REF_MAX_NAME, "layers.%d", k);
        else if (k == 0) snprintf(g->name[k], REF_MAX_NAME, "tok_emb");
        else if (k <= m->cfg.layers) snprintf(g->name[k], REF_MAX_NAME, "layers.%d", k - 1);
        else snprintf(g->name[k], REF_MAX_NAME, "head");
    }
    if (colon) return parse_thresholds(g, colon + 1, spec);
    for (int k = 0; k < ng; k++) g->thresh[k] = c->clip / sqrt((double)ng);
    return DP_OK;
}

static dp_status make_group(ref_clip_groups *g, const ref_dpsgd_config *c, const ref_model *m) {
    char buf[REF_MAX_SPEC];
    snprintf(buf, sizeof buf, "%s", c->groups);
    int ng = 1;
    for (const char *s = buf; *s; s++) ng += *s == ';';
    DP_TRY(groups_alloc(g, ng, m->nparams));
    for (int p = 0; p < m->nparams; p++) g->group_of[p] = -1;
    char *save = NULL, *item = strtok_r(buf, ";", &save);
    int k = 0;
    for (; item; item = strtok_r(NULL, ";", &save), k++) {
        char *eq = strchr(item, '='), *colon = strrchr(item, ':');
        if (!eq || !colon || colon < eq || eq == item)
            return dp_error(DP_ERR_INVALID, "--groups: group '%s' is not NAME=GLOB[|GLOB...]:R", item);
        *eq = '\0';
        *colon = '\0';
        if (strlen(item) >= REF_MAX_NAME) return dp_error(DP_ERR_INVALID, "--groups: group name '%s' too long", item);
        for (int j = 0; j < k; j++)
            if (strcmp(g->name[j], item) == 0) return dp_error(DP_ERR_INVALID, "--groups: group '%s' repeated", item);
        snprintf(g->name[k], REF_MAX_NAME, "%s", item);
        double r;
        DP_TRY(dp_parse_double(&r, "--groups threshold", colon + 1));
        if (!(r > 0)) return dp_error(DP_ERR_INVALID, "--groups: threshold of group '%s' must be > 0 (got %g)", item, r);
        g->thresh[k] = r;
        char *save2 = NULL;
        for (char *pat = strtok_r(eq + 1, "|", &save2); pat; pat = strtok_r(NULL, "|", &save2))
            for (int p = 0; p < m->nparams; p++)
                if (g->group_of[p] < 0 && fnmatch(pat, m->params[p].name, 0) == 0) g->group_of[p] = k;
    }
    if (k != ng) return dp_error(DP_ERR_INVALID, "--groups '%s': empty group", c->groups);
    for (int p = 0; p < m->nparams; p++)
        if (g->group_of[p] < 0)
            return dp_error(DP_ERR_INVALID, "--groups: parameter '%s' belongs to no group", m->params[p].name);
    for (int j = 0; j < ng; j++) {
        int owned = 0;
        for (int p = 0; p < m->nparams; p++) owned += g->group_of[p] == j;
        if (!owned) return dp_error(DP_ERR_INVALID, "--groups: group '%s' matches no parameter", g->name[j]);
    }
    return DP_OK;
}

dp_status ref_clip_groups_make(ref_clip_groups *g, const ref_dpsgd_config *c, const ref_model *m) {
    memset(g, 0, sizeof *g);
    dp_status st;
    if (c->style == REF_CLIP_FLAT) {
        if (c->groups[0]) return dp_error(DP_ERR_USAGE, "--groups applies to --clipping per-layer or group only");
        st = groups_alloc(g, 1, m->nparams);
        if (st == DP_OK) { snprintf(g->name[0], REF_MAX_NAME, "all"); g->thresh[0] = c->clip; }
    } else if (c->style == REF_CLIP_PER_LAYER) {
        st = make_per_layer(g, c, m);
    } else {
        st = make_group(g, c, m);
    }
    if (st != DP_OK) { ref_clip_groups_free(g); return st; }
    if (c->style == REF_CLIP_FLAT) g->c_total = c->clip;
    else {
        neum a = {0, 0};
        for (int k = 0; k < g->ngroups; k++) neum_add(&a, g->thresh[k] * g->thresh[k]);
        g->c_total = sqrt(neum_get(&a));
    }
    return DP_OK;
}

double ref_clip_factor(ref_clip_fn fn, double norm, double thresh, double gamma) {
    if (fn == REF_CLIPFN_AUTOMATIC) return thresh / (norm + gamma);
    return norm <= thresh ? 1.0 : thresh / norm;
}

/* ---------------------------------------------------------------- streams */

dp_status ref_dpsgd_poisson(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n) {
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %lld out of range", (long long)step);
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, key, DP_PURPOSE_SAMPLING, (uint32_t)step, 0));
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (dp_rng_uniform(&s, (uint64_t)i) < q) idx[k++] = i;
    *b = k;
    return DP_OK;
}

double ref_dpsgd_noise_z(dp_noise_key key, int64_t step, int p, int64_t e) {
    return dp_stream_gaussian(key.k, DP_PURPOSE_NOISE, (uint32_t)step, (uint32_t)p, (uint64_t)e);
}

/* ---------------------------------------------------------------- state */

static void free_arrays(double **a, int n) {
    if (!a) return;
    for (int p = 0; p < n; p++) dp_free(a[p]);
    dp_free(a);
}

static double **alloc_arrays(const ref_model *m, int64_t rows) {
    double **a = dp_calloc((size_t)m->nparams, sizeof *a);
    if (!a) return NULL;
    for (int p = 0; p < m->nparams; p++) {
        a[p] = dp_calloc((size_t)(rows * m->params[p].numel), sizeof(double));
        if (!a[p]) { free_arrays(a, p); return NULL; }
    }
    return a;
}

static dp_status default_grad(double *loss, double *const *grads, const ref_model *m, const ref_dataset *d, int64_t i,
                              void *ctx) {
    (void)ctx;
    return ref_example_grad(loss, grads, m, d, i);
}

dp_status ref_dpsgd_check_bounds(const ref_dpsgd_config *c, const ref_clip_groups *g) {
    const double std = c->sigma * g->c_total;
    if (!isfinite(std))
        return dp_error(DP_ERR_INVALID, "--sigma %g times the clipping threshold C_total %g overflows: the noise std "
                        "sigma C_total is not finite", c->sigma, g->c_total);
    const double zmax = std * DP_RNG_GAUSS_MAX, qn = c->q * (double)c->n;
    const double gmax = ((double)c->n * g->c_total + zmax) / qn;
    if (!isfinite(zmax) || !isfinite(gmax))
        return dp_error(DP_ERR_INVALID, "--sigma %g, --clip (C_total %g), --q %g and N = %lld allow a private gradient "
                        "element (N C_total + sigma C_total max|z|) / (q N) that is not finite", c->sigma, g->c_total, c->q,
                        (long long)c->n);
    if (c->opt == REF_OPT_SGD && !isfinite(c->lr * (gmax / (1.0 - c->momentum))))
        return dp_error(DP_ERR_INVALID, "--lr %g times the largest momentum buffer element %g / (1 - %g) overflows the "
                        "parameter update", c->lr, gmax, c->momentum);
    if (c->opt == REF_OPT_ADAMW && (!isfinite(c->lr / (1.0 - c->beta1)) || !isfinite(gmax * gmax)))
        return dp_error(DP_ERR_INVALID, "--lr %g / (1 - --beta1 %g) or the square of the largest private gradient element "
                        "%g overflows the AdamW update", c->lr, c->beta1, gmax);
    return DP_OK;
}

/* The private gradient of step `step` must be finite (docs/dpsgd.md "Non-finite
 * training"); the parameters are checked by ref_dpsgd_apply_optimizer. */
static dp_status check_private_grad(const ref_model *m, double *const *pg, int64_t step) {
    for (int p = 0; p < m->nparams; p++)
        for (int64_t e = 0; e < m->params[p].numel; e++)
            if (!isfinite(pg[p][e]))
                return dp_error(DP_ERR_INVALID, "step %lld: the private gradient of parameter tensor '%s' (element %lld) "
                                "is not finite (%g): the hyperparameters overflow", (long long)step, m->params[p].name,
                                (long long)e, pg[p][e]);
    return DP_OK;
}

/* A parameter element that was finite before the update and is not after it. */
static dp_status became_nonfinite(const ref_model *m, int p, int64_t e, int64_t t) {
    return dp_error(DP_ERR_INVALID, "step %lld: parameter tensor '%s' (element %lld) became non-finite (%g) in the "
                    "update: --lr and the private gradient overflow", (long long)t, m->params[p].name, (long long)e,
                    m->params[p].data[e]);
}

dp_status ref_dpsgd_init(ref_dpsgd_state *st, const ref_dpsgd_config *cfg, const ref_model *m) {
    memset(st, 0, sizeof *st);
    DP_TRY(ref_dpsgd_config_check(cfg));
    if (m->nparams >= (1 << 16))
        return dp_error(DP_ERR_INVALID, "%d parameter tensors: the noise lane holds at most 65535", m->nparams);
    st->cfg = *cfg;
    st->nparams = m->nparams;
    DP_TRY(ref_clip_groups_make(&st->groups, cfg, m));
    dp_status bst = ref_dpsgd_check_bounds(cfg, &st->groups);
    if (bst != DP_OK) { ref_clip_groups_free(&st->groups); return bst; }
    st->m1 = alloc_arrays(m, 1);
    st->m2 = alloc_arrays(m, 1);
    if (!st->m1 || !st->m2) { ref_dpsgd_free(st); return DP_ERR_NOMEM; }
    st->grad_fn = default_grad;
    return DP_OK;
}

void ref_dpsgd_free(ref_dpsgd_state *st) {
    if (!st) return;
    ref_clip_groups_free(&st->groups);
    free_arrays(st->m1, st->nparams);
    free_arrays(st->m2, st->nparams);
    memset(st, 0, sizeof *st);
}

/* ---------------------------------------------------------------- the DP stage */

/* Norm of the elements of one group (grp >= 0) or of all parameters (grp < 0) of a
 * finite example whose sum of squares overflowed: the scaled form (as BLAS nrm2)
 * s * sqrt(NS((x / s)^2)) with s = max |x|, finite unless the true norm exceeds DBL_MAX. */
double ref_norm_scaled(const ref_model *m, const ref_clip_groups *g, int grp, double *const *gi) {
    double s = 0;
    for (int p = 0; p < m->nparams; p++)
        if (grp < 0 || g->group_of[p] == grp)
            for (int64_t e = 0; e < m->params[p].numel; e++) s = fmax(s, fabs(gi[p][e]));
    if (s == 0) return 0;
    neum a = {0, 0};
    for (int p = 0; p < m->nparams; p++)
        if (grp < 0 || g->group_of[p] == grp)
            for (int64_t e = 0; e < m->params[p].numel; e++) {
                double y = gi[p][e] / s;
                neum_add(&a, y * y);
            }
    return s * sqrt(neum_get(&a));
}

/* Double path for one example: group norms (Neumaier over the group's parameters in
 * canonical order, elements in order), total norm. gi[p] = g_i[p] [numel]. For a finite
 * example (finite = 1) a sum of squares that is not finite (it overflowed) is replaced by
 * the scaled form above (docs/dpsgd.md step 4); a dropped example keeps the plain sums. */
dp_status ref_norms_double(double *norm, double *gnorm, const ref_model *m, const ref_clip_groups *g,
                           double *const *gi, int finite) {
    neum tot = {0, 0};
    neum *ss = dp_calloc((size_t)g->ngroups, sizeof *ss); /* [G] */
    if (!ss) return DP_ERR_NOMEM;
    for (int p = 0; p < m->nparams; p++)
        for (int64_t e = 0; e < m->params[p].numel; e++) {
            double x = gi[p][e];
            neum_add(&ss[g->group_of[p]], x * x);
            neum_add(&tot, x * x);
        }
    for (int k = 0; k < g->ngroups; k++) {
        double v = neum_get(&ss[k]);
        gnorm[k] = finite && !isfinite(v) ? ref_norm_scaled(m, g, k, gi) : sqrt(v);
    }
    double v = neum_get(&tot);
    *norm = finite && !isfinite(v) ? ref_norm_scaled(m, g, -1, gi) : sqrt(v);
    dp_free(ss);
    return DP_OK;
}

static int example_finite(double loss, const ref_model *m, double *const *gi) {
    if (!isfinite(loss)) return 0;
    for (int p = 0; p < m->nparams; p++)
        for (int64_t e = 0; e < m->params[p].numel; e++)
            if (!isfinite(gi[p][e])) return 0;
    return 1;
}

/* MPFR accumulators of the clipped sum, one per element. */
typedef struct { mpfr_t *v; int64_t n; } mp_vec;
static dp_status mp_vec_init(mp_vec *a, int64_t n) {
    a->n = 0;
    a->v = dp_calloc((size_t)n, sizeof(mpfr_t));
    if (!a->v) return DP_ERR_NOMEM;
    for (int64_t i = 0; i < n; i++) { mpfr_init2(a->v[i], REF_MPFR_BITS); mpfr_set_zero(a->v[i], 1); }
    a->n = n;
    return DP_OK;
}
static void mp_vec_clear(mp_vec *a) {
    for (int64_t i = 0; i < a->n; i++) mpfr_clear(a->v[i]);
    dp_free(a->v);
    a->v = NULL;
    a->n = 0;
}

/* MPFR path for one example: exact-to-256-bit sums of squares, sqrt, clip factors
 * (cf[k] receives the MPFR factors), exported norms and factors rounded once. A group
 * norm that rounds to +inf in double (it exceeds DBL_MAX) gets the factor 0, as the
 * double path's R / inf (docs/dpsgd.md step 4). */
static dp_status norms_clip_mpfr(double *norm, double *gnorm, double *cfd, mpfr_t *cf, const ref_model *m,
                                 const ref_clip_groups *g, const ref_dpsgd_config *c, double *const *gi) {
    mpfr_t tot, x, *ss = dp_calloc((size_t)g->ngroups, sizeof(mpfr_t));
    if (!ss) return DP_ERR_NOMEM;
    mpfr_inits2(REF_MPFR_BITS, tot, x, (mpfr_ptr)0);
    mpfr_set_zero(tot, 1);
    for (int k = 0; k < g->ngroups; k++) { mpfr_init2(ss[k], REF_MPFR_BITS); mpfr_set_zero(ss[k], 1); }
    for (int p = 0; p < m->nparams; p++)
        for (int64_t e = 0; e < m->params[p].numel; e++) {
            mpfr_set_d(x, gi[p][e], MPFR_RNDN);
            mpfr_sqr(x, x, MPFR_RNDN);
            mpfr_add(ss[g->group_of[p]], ss[g->group_of[p]], x, MPFR_RNDN);
            mpfr_add(tot, tot, x, MPFR_RNDN);
        }
    mpfr_sqrt(tot, tot, MPFR_RNDN);
    *norm = mpfr_get_d(tot, MPFR_RNDN);
    for (int k = 0; k < g->ngroups; k++) {
        mpfr_sqrt(ss[k], ss[k], MPFR_RNDN); /* n_k */
        gnorm[k] = mpfr_get_d(ss[k], MPFR_RNDN);
        mpfr_set_d(x, g->thresh[k], MPFR_RNDN); /* R_k */
        if (isinf(gnorm[k])) {
            mpfr_set_zero(cf[k], 1); /* n_k > DBL_MAX: c = R / inf = 0, as in double */
        } else if (c->clip_fn == REF_CLIPFN_AUTOMATIC) {
            mpfr_add_d(ss[k], ss[k], c->gamma, MPFR_RNDN);
            mpfr_div(cf[k], x, ss[k], MPFR_RNDN);
        } else if (mpfr_cmp(ss[k], x) <= 0) {
            mpfr_set_ui(cf[k], 1, MPFR_RNDN);
        } else {
            mpfr_div(cf[k], x, ss[k], MPFR_RNDN);
        }
        cfd[k] = mpfr_get_d(cf[k], MPFR_RNDN);
        mpfr_clear(ss[k]);
    }
    mpfr_clears(tot, x, (mpfr_ptr)0);
    dp_free(ss);
    return DP_OK;
}

static dp_status alloc_out(ref_dpsgd_step_out *o, const ref_model *m, int ngroups, int64_t b) {
    o->nparams = m->nparams;
    o->ngroups = ngroups;
    o->b = b;
    size_t nb = (size_t)(b > 0 ? b : 1);
    o->indices = dp_calloc(nb, sizeof(int64_t));
    o->loss = dp_calloc(nb, sizeof(double));
    o->norm = dp_calloc(nb, sizeof(double));
    o->group_norm = dp_calloc(nb * (size_t)ngroups, sizeof(double));
    o->clip_factor = dp_calloc(nb * (size_t)ngroups, sizeof(double));
    o->dropped = dp_calloc(nb, sizeof(int));
    o->grad = alloc_arrays(m, b);
    o->clipped_sum = alloc_arrays(m, 1);
    o->noise = alloc_arrays(m, 1);
    o->private_grad = alloc_arrays(m, 1);
    if (!o->indices || !o->loss || !o->norm || !o->group_norm || !o->clip_factor || !o->dropped || !o->grad ||
        !o->clipped_sum || !o->noise || !o->private_grad)
        return DP_ERR_NOMEM;
    return DP_OK;
}

dp_status ref_dpsgd_step(ref_dpsgd_step_out *out, ref_model *m, ref_dpsgd_state *st, const ref_dataset *d,
                         int64_t step) {
    ref_dpsgd_step_free(out);
    const ref_dpsgd_config *c = &st->cfg;
    const ref_clip_groups *g = &st->groups;
    const int G = g->ngroups, P = m->nparams;
    const int mp = c->precision == REF_PREC_MPFR;
    if (P != st->nparams) return dp_error(DP_ERR_INVALID, "model does not match the DP-SGD state");
    if (d->kind != m->cfg.kind) return dp_error(DP_ERR_INVALID, "dataset kind does not match the model");
    if (d->n != c->n)
        return dp_error(DP_ERR_INVALID, "dataset has %lld examples but N (--dataset-size) is %lld", (long long)d->n,
                        (long long)c->n);
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %lld out of range", (long long)step);

    /* 1. Poisson sampling (secret SAMPLING stream, stream = step) */
    int64_t *idx = dp_malloc((size_t)c->n * sizeof(int64_t)), b = 0;
    if (!idx) return DP_ERR_NOMEM;
    dp_status rc = ref_dpsgd_poisson(idx, &b, c->key, step, c->q, c->n);
    if (rc == DP_OK) rc = alloc_out(out, m, G, b);
    if (rc != DP_OK) { dp_free(idx); ref_dpsgd_step_free(out); return rc; }
    out->step = step;
    memcpy(out->indices, idx, (size_t)b * sizeof(int64_t));
    dp_free(idx);

    /* accumulators of the clipped sum: Neumaier (s, c) per element, or MPFR */
    double **acc_s = alloc_arrays(m, 1), **acc_c = alloc_arrays(m, 1);
    mp_vec *macc = mp ? dp_calloc((size_t)P, sizeof(mp_vec)) : NULL;
    mpfr_t *cf = mp ? dp_calloc((size_t)G, sizeof(mpfr_t)) : NULL;
    int ncf = 0; /* cf[0..ncf) are initialised (cleared at done) */
    double **gi = dp_calloc((size_t)P, sizeof(double *));
    if (!acc_s || !acc_c || !gi || (mp && (!macc || !cf))) { rc = DP_ERR_NOMEM; goto done; }
    if (mp) {
        for (; ncf < G; ncf++) mpfr_init2(cf[ncf], REF_MPFR_BITS);
        for (int p = 0; p < P && rc == DP_OK; p++) rc = mp_vec_init(&macc[p], m->params[p].numel);
        if (rc != DP_OK) goto done;
    }

    /* 2. micro-batches: chunk j holds batch positions [j b / k, (j + 1) b / k) */
    const int64_t k = c->micro_batches;
    for (int64_t j = 0; j < k && rc == DP_OK; j++) {
        int64_t lo = (int64_t)((__int128)j * b / k), hi = (int64_t)((__int128)(j + 1) * b / k);
        for (int64_t i = lo; i < hi && rc == DP_OK; i++) {
            for (int p = 0; p < P; p++) gi[p] = out->grad[p] + i * m->params[p].numel; /* g_i[p] [numel] */
            rc = st->grad_fn(&out->loss[i], gi, m, d, out->indices[i], st->grad_ctx);
            if (rc != DP_OK) break;
            double *gn = out->group_norm + i * G, *cfi = out->clip_factor + i * G; /* [G] */
            if (!example_finite(out->loss[i], m, gi)) {
                /* dropped: contributes nothing, sensitivity unchanged, reported */
                rc = ref_norms_double(&out->norm[i], gn, m, g, gi, 0);
                if (rc != DP_OK) break;
                for (int q = 0; q < G; q++) cfi[q] = 0.0;
                out->dropped[i] = 1;
                out->ndropped++;
                continue;
            }
            if (!mp) {
                rc = ref_norms_double(&out->norm[i], gn, m, g, gi, 1);
                if (rc != DP_OK) break;
                for (int q = 0; q < G; q++) cfi[q] = ref_clip_factor(c->clip_fn, gn[q], g->thresh[q], c->gamma);
                for (int p = 0; p < P; p++) {
                    double cp = cfi[g->group_of[p]];
                    for (int64_t e = 0; e < m->params[p].numel; e++) {
                        neum a = {acc_s[p][e], acc_c[p][e]};
                        neum_add(&a, cp * gi[p][e]);
                        acc_s[p][e] = a.s;
                        acc_c[p][e] = a.c;
                    }
                }
            } else {
                rc = norms_clip_mpfr(&out->norm[i], gn, cfi, cf, m, g, c, gi);
                if (rc != DP_OK) break;
                mpfr_t t;
                mpfr_init2(t, REF_MPFR_BITS);
                for (int p = 0; p < P; p++)
                    for (int64_t e = 0; e < m->params[p].numel; e++) {
                        mpfr_mul_d(t, cf[g->group_of[p]], gi[p][e], MPFR_RNDN);
                        mpfr_add(macc[p].v[e], macc[p].v[e], t, MPFR_RNDN);
                    }
                mpfr_clear(t);
            }
        }
    }
    if (rc != DP_OK) goto done;

    /* 3. noise once per logical step and 4. the private gradient */
    const double qn = c->q * (double)c->n;
    if (!mp) {
        const double scale = c->sigma * g->c_total;
        for (int p = 0; p < P; p++)
            for (int64_t e = 0; e < m->params[p].numel; e++) {
                double s = acc_s[p][e] + acc_c[p][e];
                double z = scale * ref_dpsgd_noise_z(c->key, step, p, e);
                out->clipped_sum[p][e] = s;
                out->noise[p][e] = z;
                out->private_grad[p][e] = (s + z) / qn;
            }
    } else {
        mpfr_t scale, den, t, x;
        mpfr_inits2(REF_MPFR_BITS, scale, den, t, x, (mpfr_ptr)0);
        /* C_total: C (flat) or sqrt(sum_k R_k^2) */
        if (c->style == REF_CLIP_FLAT) mpfr_set_d(scale, c->clip, MPFR_RNDN);
        else {
            mpfr_set_zero(scale, 1);
            for (int q = 0; q < G; q++) {
                mpfr_set_d(x, g->thresh[q], MPFR_RNDN);
                mpfr_sqr(x, x, MPFR_RNDN);
                mpfr_add(scale, scale, x, MPFR_RNDN);
            }
            mpfr_sqrt(scale, scale, MPFR_RNDN);
        }
        mpfr_mul_d(scale, scale, c->sigma, MPFR_RNDN);
        mpfr_set_d(den, c->q, MPFR_RNDN);
        mpfr_mul_si(den, den, (long)c->n, MPFR_RNDN); /* q N */
        for (int p = 0; p < P; p++)
            for (int64_t e = 0; e < m->params[p].numel; e++) {
                mpfr_mul_d(t, scale, ref_dpsgd_noise_z(c->key, step, p, e), MPFR_RNDN);
                out->clipped_sum[p][e] = mpfr_get_d(macc[p].v[e], MPFR_RNDN);
                out->noise[p][e] = mpfr_get_d(t, MPFR_RNDN);
                mpfr_add(x, macc[p].v[e], t, MPFR_RNDN);
                mpfr_div(x, x, den, MPFR_RNDN);
                out->private_grad[p][e] = mpfr_get_d(x, MPFR_RNDN);
            }
        mpfr_clears(scale, den, t, x, (mpfr_ptr)0);
    }

    /* summaries for the log line */
    {
        neum l = {0, 0}, f = {0, 0};
        int64_t nl = 0;
        for (int64_t i = 0; i < b; i++) {
            if (!out->dropped[i]) { neum_add(&l, out->loss[i]); nl++; }
            for (int q = 0; q < G; q++) neum_add(&f, out->clip_factor[i * G + q]);
        }
        out->mean_loss = nl ? neum_get(&l) / (double)nl : NAN;
        out->mean_clip = b ? neum_get(&f) / (double)(b * G) : NAN;
    }

    /* 5. the optimizer on the private gradient */
    rc = check_private_grad(m, out->private_grad, step);
    if (rc == DP_OK) rc = ref_dpsgd_apply_optimizer(m, st, out->private_grad);

done:
    free_arrays(acc_s, P);
    free_arrays(acc_c, P);
    dp_free(gi);
    if (macc) for (int p = 0; p < P; p++) if (macc[p].v) mp_vec_clear(&macc[p]);
    dp_free(macc);
    if (cf) { for (int q = 0; q < ncf; q++) mpfr_clear(cf[q]); dp_free(cf); }
    if (rc != DP_OK) ref_dpsgd_step_free(out);
    return rc;
}

/* SGD:   buf = momentum * buf + G;  theta = theta - lr * buf.
 * AdamW: t = t + 1; theta = theta * (1 - lr * wd);
 *        m = beta1 * m + (1 - beta1) * G;  v = beta2 * v + (1 - beta2) * (G * G);
 *        theta = theta - (lr / (1 - beta1^t)) * (m / (sqrt(v) / sqrt(1 - beta2^t) + eps)). */
dp_status ref_dpsgd_apply_optimizer(ref_model *m, ref_dpsgd_state *st, double *const *pg) {
    const ref_dpsgd_config *c = &st->cfg;
    if (m->nparams != st->nparams) return dp_error(DP_ERR_INVALID, "model does not match the optimizer state");
    st->t++;
    int bad_p = -1;
    int64_t bad_e = 0;
    if (c->opt == REF_OPT_SGD) {
        for (int p = 0; p < m->nparams; p++)
            for (int64_t e = 0; e < m->params[p].numel; e++) {
                const double old = m->params[p].data[e];
                st->m1[p][e] = c->momentum * st->m1[p][e] + pg[p][e];
                m->params[p].data[e] = old - c->lr * st->m1[p][e];
                if (bad_p < 0 && isfinite(old) && !isfinite(m->params[p].data[e])) { bad_p = p; bad_e = e; }
            }
        return bad_p < 0 ? DP_OK : became_nonfinite(m, bad_p, bad_e, st->t);
    }
    const double bc1 = 1.0 - pow(c->beta1, (double)st->t), bc2 = 1.0 - pow(c->beta2, (double)st->t);
    const double decay = 1.0 - c->lr * c->weight_decay, step_size = c->lr / bc1, sbc2 = sqrt(bc2);
    for (int p = 0; p < m->nparams; p++)
        for (int64_t e = 0; e < m->params[p].numel; e++) {
            double gr = pg[p][e], *th = &m->params[p].data[e];
            const double old = *th;
            *th = *th * decay;
            st->m1[p][e] = c->beta1 * st->m1[p][e] + (1.0 - c->beta1) * gr;
            st->m2[p][e] = c->beta2 * st->m2[p][e] + (1.0 - c->beta2) * (gr * gr);
            double denom = sqrt(st->m2[p][e]) / sbc2 + c->adam_eps;
            *th = *th - step_size * (st->m1[p][e] / denom);
            if (bad_p < 0 && isfinite(old) && !isfinite(*th)) { bad_p = p; bad_e = e; }
        }
    return bad_p < 0 ? DP_OK : became_nonfinite(m, bad_p, bad_e, st->t);
}

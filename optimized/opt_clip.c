/* optimized/opt_clip.c — the engine's clipping pieces, written from docs/dpsgd.md:
 * the configuration check, the clipping groups, the clip factor and the per-example
 * norms (with the scaled form on overflow). */
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/alloc.h"
#include "optimized/opt_spec.h"

/* ---------------------------------------------------------------- configuration */

/* One real-valued option: lo < v (or <=), v < hi (or <=), finite. hi = INFINITY: no upper bound. */
typedef struct { const char *opt; double v, lo; int lo_incl; double hi; int hi_incl; } opt_real_range;
/* One integer option in [1, 2^32 - 1] (the step and the example index are 32-bit stream ids). */
typedef struct { const char *opt; int64_t v; } opt_count_range;

static dp_status check_reals(const opt_real_range *r, size_t n) {
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(r[k].v)) return dp_error(DP_ERR_INVALID, "%s must be finite (got %g)", r[k].opt, r[k].v);
        if (isinf(r[k].hi)) DP_TRY(dp_check_min(r[k].opt, r[k].v, r[k].lo, r[k].lo_incl));
        else DP_TRY(dp_check_range(r[k].opt, r[k].v, r[k].lo, r[k].lo_incl, r[k].hi, r[k].hi_incl));
    }
    return DP_OK;
}

static dp_status check_counts(const opt_count_range *r, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (r[k].v < 1 || r[k].v > (int64_t)UINT32_MAX)
            return dp_error(DP_ERR_INVALID, "%s must be in [1, 2^32 - 1] (got %" PRId64 ")", r[k].opt, r[k].v);
    return DP_OK;
}

dp_status opt_dpsgd_config_check(const dp_dpsgd_config *c) {
    const opt_count_range counts[] = {
        {"--dataset-size", c->n}, {"--steps", c->steps}, {"--micro-batches", c->micro_batches}};
    DP_TRY(check_counts(counts, sizeof counts / sizeof counts[0]));
    const opt_real_range reals[] = {
        {"--q", c->q, 0.0, 0, 1.0, 1},           {"--clip", c->clip, 0.0, 0, INFINITY, 0},
        {"--sigma", c->sigma, 0.0, 1, INFINITY, 0}, {"--gamma", c->gamma, 0.0, 0, INFINITY, 0},
        {"--lr", c->lr, 0.0, 1, INFINITY, 0},    {"--momentum", c->momentum, 0.0, 1, 1.0, 0},
        {"--beta1", c->beta1, 0.0, 1, 1.0, 0},   {"--beta2", c->beta2, 0.0, 1, 1.0, 0},
        {"--adam-eps", c->adam_eps, 0.0, 0, INFINITY, 0}, {"--weight-decay", c->weight_decay, 0.0, 1, INFINITY, 0}};
    DP_TRY(check_reals(reals, sizeof reals / sizeof reals[0]));
    switch (c->style) {
    case DP_CLIP_FLAT:
        if (c->groups[0]) return dp_error(DP_ERR_USAGE, "--groups applies to --clipping per-layer or group only");
        break;
    case DP_CLIP_PER_LAYER: break;
    case DP_CLIP_GROUP:
        if (!c->groups[0]) return dp_error(DP_ERR_USAGE, "--clipping group needs --groups NAME=GLOB[|GLOB...]:R;...");
        break;
    default: return dp_error(DP_ERR_INVALID, "--clipping: unknown style %d", (int)c->style);
    }
    if (c->clip_fn != DP_CLIPFN_ABADI && c->clip_fn != DP_CLIPFN_AUTOMATIC)
        return dp_error(DP_ERR_INVALID, "--clip-fn: unknown clip function %d", (int)c->clip_fn);
    if (c->opt != DP_OPT_SGD && c->opt != DP_OPT_ADAMW)
        return dp_error(DP_ERR_INVALID, "--optimizer: unknown optimizer %d", (int)c->opt);
    if (c->precision != DP_PREC_DOUBLE && c->precision != DP_PREC_MPFR)
        return dp_error(DP_ERR_INVALID, "--precision: unknown precision %d", (int)c->precision);
    return DP_OK;
}

/* ---------------------------------------------------------------- groups */

void opt_clip_groups_free(dp_clip_groups *g) {
    if (!g) return;
    dp_free(g->name);
    dp_free(g->thresh);
    dp_free(g->group_of);
    memset(g, 0, sizeof *g);
}

static dp_status groups_new(dp_clip_groups *g, int ngroups, int nparams) {
    g->ngroups = ngroups;
    g->name = dp_calloc((size_t)(ngroups > 0 ? ngroups : 1), sizeof *g->name);
    g->thresh = dp_calloc((size_t)(ngroups > 0 ? ngroups : 1), sizeof *g->thresh);
    g->group_of = dp_calloc((size_t)(nparams > 0 ? nparams : 1), sizeof *g->group_of);
    if (!g->name || !g->thresh || !g->group_of) return dp_error(DP_ERR_NOMEM, "clipping groups: out of memory");
    return DP_OK;
}

/* The block a parameter belongs to, from its name (docs/dpsgd.md "Clipping groups"):
 * "layers.{i}.*" -> "layers.{i}"; llama "tok_emb" -> "tok_emb"; anything else of the llama
 * (final_norm, lm_head) -> "head". */
static void block_name(char out[DP_MAX_NAME], const char *param) {
    if (strncmp(param, "layers.", 7) == 0) {
        size_t len = 7 + strspn(param + 7, "0123456789");
        snprintf(out, DP_MAX_NAME, "%.*s", (int)len, param);
    } else if (strcmp(param, "tok_emb") == 0) {
        snprintf(out, DP_MAX_NAME, "tok_emb");
    } else {
        snprintf(out, DP_MAX_NAME, "head");
    }
}

/* "tensor" or "block" groups: each parameter joins the group of its key (the tensor's
 * own name or its block), groups in order of first appearance. */
static dp_status per_layer(dp_clip_groups *g, const dp_dpsgd_config *c, const dp_model *m) {
    const char *spec = c->groups, *colon = strchr(spec, ':');
    size_t kind_len = colon ? (size_t)(colon - spec) : strlen(spec);
    int by_block;
    if (kind_len == 0 && !colon) by_block = 0;
    else if (kind_len == strlen("tensor") && strncmp(spec, "tensor", kind_len) == 0) by_block = 0;
    else if (kind_len == strlen("block") && strncmp(spec, "block", kind_len) == 0) by_block = 1;
    else return dp_error(DP_ERR_INVALID, "--groups '%s': per-layer clipping takes tensor|block[:R1,R2,...]", spec);
    DP_TRY(groups_new(g, m->nparams, m->nparams)); /* at most one group per tensor */
    g->ngroups = 0;
    for (int p = 0; p < m->nparams; p++) {
        char key[DP_MAX_NAME];
        if (by_block) block_name(key, m->params[p].name);
        else snprintf(key, sizeof key, "%s", m->params[p].name);
        int k = 0;
        while (k < g->ngroups && strcmp(g->name[k], key) != 0) k++;
        if (k == g->ngroups) snprintf(g->name[g->ngroups++], DP_MAX_NAME, "%s", key); /* a new group */
        g->group_of[p] = k;
    }
    if (!colon) {
        double r = c->clip / sqrt((double)g->ngroups);
        for (int k = 0; k < g->ngroups; k++) g->thresh[k] = r;
        return DP_OK;
    }
    size_t got = 0;
    double *vals = dp_calloc((size_t)g->ngroups + 1, sizeof *vals);
    if (!vals) return dp_error(DP_ERR_NOMEM, "clipping groups: out of memory");
    dp_status st = dp_parse_double_list(vals, (size_t)g->ngroups + 1, &got, "--groups", colon + 1);
    if (st == DP_OK && got != (size_t)g->ngroups)
        st = dp_error(DP_ERR_INVALID, "--groups '%s': %zu thresholds for %d groups", spec, got, g->ngroups);
    for (int k = 0; st == DP_OK && k < g->ngroups; k++) {
        if (!isfinite(vals[k]) || !(vals[k] > 0))
            st = dp_error(DP_ERR_INVALID, "--groups '%s': threshold %d must be finite and > 0 (got %g)", spec, k + 1, vals[k]);
        g->thresh[k] = vals[k];
    }
    dp_free(vals);
    return st;
}

/* "NAME=GLOB[|GLOB...]:R;..." — a parameter joins the first group (spec order) with a matching glob. */
static dp_status named_groups(dp_clip_groups *g, const dp_dpsgd_config *c, const dp_model *m) {
    const char *spec = c->groups;
    int ng = 1;
    for (const char *s = spec; *s; s++) ng += *s == ';';
    DP_TRY(groups_new(g, ng, m->nparams));
    for (int p = 0; p < m->nparams; p++) g->group_of[p] = -1;
    const char *item = spec;
    for (int k = 0; k < ng; k++) {
        const char *end = strchr(item, ';');
        size_t len = end ? (size_t)(end - item) : strlen(item);
        char buf[DP_MAX_SPEC];
        snprintf(buf, sizeof buf, "%.*s", (int)len, item);
        item = end ? end + 1 : item + len;
        if (len == 0) return dp_error(DP_ERR_INVALID, "--groups '%s': empty group", spec);
        char *eq = strchr(buf, '='), *colon = strrchr(buf, ':');
        if (!eq || eq == buf || !colon || colon < eq)
            return dp_error(DP_ERR_INVALID, "--groups: group '%s' is not NAME=GLOB[|GLOB...]:R", buf);
        *eq = '\0';
        *colon = '\0';
        size_t name_len = strlen(buf);
        if (name_len >= DP_MAX_NAME) return dp_error(DP_ERR_INVALID, "--groups: group name '%s' too long", buf);
        for (int j = 0; j < k; j++)
            if (strcmp(g->name[j], buf) == 0) return dp_error(DP_ERR_INVALID, "--groups: group '%s' repeated", buf);
        memcpy(g->name[k], buf, name_len + 1);
        DP_TRY(dp_parse_double(&g->thresh[k], "--groups threshold", colon + 1));
        if (!(g->thresh[k] > 0))
            return dp_error(DP_ERR_INVALID, "--groups: threshold of group '%s' must be > 0 (got %g)", buf, g->thresh[k]);
        for (char *glob = eq + 1; glob; ) {
            char *bar = strchr(glob, '|');
            if (bar) *bar = '\0';
            if (*glob)
                for (int p = 0; p < m->nparams; p++)
                    if (g->group_of[p] < 0 && fnmatch(glob, m->params[p].name, 0) == 0) g->group_of[p] = k;
            glob = bar ? bar + 1 : NULL;
        }
    }
    int *owned = dp_calloc((size_t)ng, sizeof *owned);
    if (!owned) return dp_error(DP_ERR_NOMEM, "clipping groups: out of memory");
    dp_status st = DP_OK;
    for (int p = 0; st == DP_OK && p < m->nparams; p++) {
        if (g->group_of[p] < 0)
            st = dp_error(DP_ERR_INVALID, "--groups: parameter '%s' belongs to no group", m->params[p].name);
        else owned[g->group_of[p]]++;
    }
    for (int k = 0; st == DP_OK && k < ng; k++)
        if (!owned[k]) st = dp_error(DP_ERR_INVALID, "--groups: group '%s' matches no parameter", g->name[k]);
    dp_free(owned);
    return st;
}

/* Neumaier (compensated) accumulator: docs/dpsgd.md "Neumaier sum". */
typedef struct { double s, comp; } opt_neum;
static inline void neum_push(opt_neum *a, double x) {
    double t = a->s + x;
    a->comp += fabs(a->s) >= fabs(x) ? (a->s - t) + x : (x - t) + a->s;
    a->s = t;
}

dp_status opt_clip_groups_make(dp_clip_groups *g, const dp_dpsgd_config *c, const dp_model *m) {
    memset(g, 0, sizeof *g);
    dp_status st = DP_OK;
    switch (c->style) {
    case DP_CLIP_FLAT:
        if (c->groups[0]) return dp_error(DP_ERR_USAGE, "--groups applies to --clipping per-layer or group only");
        st = groups_new(g, 1, m->nparams); /* group_of all 0 */
        if (st == DP_OK) { snprintf(g->name[0], DP_MAX_NAME, "all"); g->thresh[0] = c->clip; }
        break;
    case DP_CLIP_PER_LAYER: st = per_layer(g, c, m); break;
    case DP_CLIP_GROUP: st = named_groups(g, c, m); break;
    default: st = dp_error(DP_ERR_INVALID, "--clipping: unknown style %d", (int)c->style);
    }
    if (st != DP_OK) { opt_clip_groups_free(g); return st; }
    if (c->style == DP_CLIP_FLAT) { g->c_total = c->clip; return DP_OK; }
    opt_neum a = {0, 0}; /* C_total = sqrt(NS(R_m^2)), groups in order */
    for (int k = 0; k < g->ngroups; k++) neum_push(&a, g->thresh[k] * g->thresh[k]);
    g->c_total = sqrt(a.s + a.comp);
    return DP_OK;
}

double opt_clip_factor(dp_clip_fn fn, double norm, double thresh, double gamma) {
    switch (fn) {
    case DP_CLIPFN_AUTOMATIC: return thresh / (norm + gamma);
    default: return norm <= thresh ? 1.0 : thresh / norm; /* abadi (a NaN norm gives NaN) */
    }
}

/* ---------------------------------------------------------------- norms */

/* The scaled norm of the selected elements (sel[p] != 0): s sqrt(NS((x/s)^2)), s = max |x|. */
static double scaled_norm(const dp_model *m, const unsigned char *sel, double *const *gi) {
    double s = 0;
    for (int p = 0; p < m->nparams; p++)
        if (sel[p])
            for (int64_t e = 0; e < m->params[p].numel; e++) {
                double a = fabs(gi[p][e]);
                if (a > s) s = a;
            }
    if (s == 0) return 0;
    opt_neum a = {0, 0};
    for (int p = 0; p < m->nparams; p++)
        if (sel[p])
            for (int64_t e = 0; e < m->params[p].numel; e++) {
                double y = gi[p][e] / s;
                neum_push(&a, y * y);
            }
    return s * sqrt(a.s + a.comp);
}

dp_status opt_norms_double(double *norm, double *gnorm, const dp_model *m, const dp_clip_groups *g,
                           double *const *gi, int finite) {
    const int G = g->ngroups, P = m->nparams;
    opt_neum *acc = dp_calloc((size_t)G + 1, sizeof *acc); /* [G groups | total] */
    unsigned char *sel = dp_calloc((size_t)(P > 0 ? P : 1), 1);
    if (!acc || !sel) { dp_free(acc); dp_free(sel); return dp_error(DP_ERR_NOMEM, "norms: out of memory"); }
    for (int p = 0; p < P; p++) {
        opt_neum *grp = &acc[g->group_of[p]], *tot = &acc[G];
        const double *x = gi[p];
        for (int64_t e = 0; e < m->params[p].numel; e++) {
            double sq = x[e] * x[e];
            neum_push(grp, sq);
            neum_push(tot, sq);
        }
    }
    for (int k = 0; k <= G; k++) {
        double v = acc[k].s + acc[k].comp, *dst = k < G ? &gnorm[k] : norm;
        if (isfinite(v) || !finite) { *dst = sqrt(v); continue; }
        for (int p = 0; p < P; p++) sel[p] = k == G || g->group_of[p] == k; /* overflow: the scaled form */
        *dst = scaled_norm(m, sel, gi);
    }
    dp_free(acc);
    dp_free(sel);
    return DP_OK;
}

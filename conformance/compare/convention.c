/* conformance/compare/convention.c — re-clip a reference step under a candidate's declared clip
 * convention (docs/tolerances.md "Declared clip conventions"): the candidate is compared
 * with what the reference computes under the candidate's own rule, e.g. Opacus's
 * min(1, C / (n + 1e-6)), instead of failing at every clip factor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/compare/compare.h"
#include "common/alloc.h"

typedef struct {
    char name[96];          /* "" for the flat factor */
    const dp_tensor *cf;    /* per_sample.clip_factor[.name] [B] */
    const dp_tensor *norm;  /* per_sample.norm[.name] [B] */
    double thresh;          /* R */
    double *cnew;           /* [B] re-clipped factors */
} rc_group;

int conf_meta_double(const dp_tensor_set *s, const char *key, double *v) {
    const char *m = dp_tset_meta(s, key);
    if (!m) return 0;
    char *end;
    double x = strtod(m, &end);
    if (end == m || *end || !isfinite(x)) return 0;
    *v = x;
    return 1;
}

/* R of group `name` from "name:R;name:R" (metadata group_thresholds). */
static int group_thresh(const char *spec, const char *name, double *v) {
    size_t ln = strlen(name);
    for (const char *p = spec; p && *p;) {
        const char *colon = strchr(p, ':'), *semi = strchr(p, ';');
        if (!colon || (semi && semi < colon)) return 0;
        if ((size_t)(colon - p) == ln && strncmp(p, name, ln) == 0) {
            char *end;
            *v = strtod(colon + 1, &end);
            return end != colon + 1 && isfinite(*v) && *v > 0;
        }
        p = semi ? semi + 1 : NULL;
    }
    return 0;
}

dp_status conf_ref_reclip(dp_tensor_set *out, char *why, size_t whylen, const dp_tensor_set *ref,
                          const conf_clip_conv *cv) {
    dp_tset_init(out);
    why[0] = '\0';
    rc_group grp[64];
    int ng = 0;
    dp_status st = DP_OK;
    const char *gspec = dp_tset_meta(ref, "group_thresholds");
    const dp_tensor *flat = dp_tset_find(ref, "per_sample.clip_factor");
    int64_t B = flat && flat->ndim == 1 ? flat->shape[0] : -1;
    for (size_t i = 0; i < ref->n && ng < 64; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "per_sample.clip_factor", 22) != 0 || (nm[22] && nm[22] != '.')) continue;
        rc_group *g = &grp[ng];
        memset(g, 0, sizeof *g);
        snprintf(g->name, sizeof g->name, "%s", nm[22] ? nm + 23 : "");
        char nn[200];
        snprintf(nn, sizeof nn, "per_sample.norm%s%s", nm[22] ? "." : "", g->name);
        g->cf = &ref->items[i].t;
        g->norm = dp_tset_find(ref, nn);
        if (B < 0 && g->cf->ndim == 1) B = g->cf->shape[0];
        int ok = g->name[0] ? (gspec && group_thresh(gspec, g->name, &g->thresh)) : conf_meta_double(ref, "clip", &g->thresh);
        if (!ok || !g->norm || dp_tensor_numel(g->norm) != B || dp_tensor_numel(g->cf) != B) {
            snprintf(why, whylen, "cannot re-clip group '%s': threshold or norms missing in the reference",
                     g->name[0] ? g->name : "all");
            break;
        }
        g->cnew = dp_malloc((size_t)(B ? B : 1) * sizeof *g->cnew);
        if (!g->cnew) { st = dp_error(DP_ERR_NOMEM, "out of memory (re-clipping)"); break; }
        ng++;
        for (int64_t b = 0; b < B; b++) {
            double c = dp_tensor_get(g->cf, b), n = dp_tensor_get(g->norm, b);
            g->cnew[b] = (c == 0 || !isfinite(n)) ? c : conf_clip_conv_factor(cv, n, g->thresh);
        }
    }
    double d = NAN, lr = NAN, mu = 0, step = 1;
    if (!conf_meta_double(ref, "expected_batch_size", &d)) {
        double q, n;
        if (conf_meta_double(ref, "q", &q) && conf_meta_double(ref, "dataset_size", &n)) d = q * n;
    }
    conf_meta_double(ref, "lr", &lr);
    conf_meta_double(ref, "momentum", &mu);
    conf_meta_double(ref, "step", &step);
    const char *opt = dp_tset_meta(ref, "optimizer");
    int sgd_plain = opt && strcmp(opt, "sgd") == 0 && (mu == 0 || step <= 1) && isfinite(lr);
    if (st == DP_OK && !why[0] && (ng == 0 || B < 0)) snprintf(why, whylen, "the reference exports no clip factors");
    if (st == DP_OK && !why[0] && !(d > 0)) snprintf(why, whylen, "no expected batch size in the reference metadata");
    /* the group of each parameter: the one whose factors reproduce the reference clipped sum */
    double *delta = NULL; /* (S' - S) of the current parameter */
    for (size_t i = 0; st == DP_OK && i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        const dp_tensor *t = &ref->items[i].t;
        if (why[0]) { st = dp_tset_add(out, nm, t); continue; }
        int kind = strncmp(nm, "per_sample.clip_factor", 22) == 0 && (!nm[22] || nm[22] == '.') ? 1
                 : strncmp(nm, "step.clipped_sum.", 17) == 0 ? 2
                 : strncmp(nm, "step.private_grad.", 18) == 0 ? 3
                 : strncmp(nm, "params_after.", 13) == 0 ? 4 : 0;
        if (kind == 0) { st = dp_tset_add(out, nm, t); continue; }
        if (kind == 1) {
            for (int k = 0; k < ng; k++)
                if (grp[k].cf == t) st = dp_tset_add_f64(out, nm, grp[k].cnew, 1, t->shape);
            continue;
        }
        const char *pname = strchr(nm + (kind == 4 ? 0 : 5), '.') + 1;
        char gn[200], sn[200];
        snprintf(gn, sizeof gn, "per_sample.grad.%s", pname);
        snprintf(sn, sizeof sn, "step.clipped_sum.%s", pname);
        const dp_tensor *g = dp_tset_find(ref, gn), *S = dp_tset_find(ref, sn);
        int64_t n = dp_tensor_numel(t);
        if (!g || !S || dp_tensor_numel(g) != B * n || dp_tensor_numel(S) != n) {
            snprintf(why, whylen, "cannot re-clip %s: per_sample.grad or step.clipped_sum missing", pname);
            st = dp_tset_add(out, nm, t);
            continue;
        }
        if (kind == 4 && !sgd_plain) continue; /* left out: no closed form for the shifted update */
        dp_free(delta);
        delta = dp_calloc((size_t)(n ? n : 1), sizeof *delta);
        double *v = dp_malloc((size_t)(n ? n : 1) * sizeof *v);
        if (!delta || !v) { dp_free(v); st = dp_error(DP_ERR_NOMEM, "out of memory (re-clipping)"); break; }
        int best = 0;
        double besterr = INFINITY;
        for (int k = 0; k < ng && ng > 1; k++) { /* which group's factors made S */
            double err = 0;
            for (int64_t e = 0; e < n; e++) {
                double s = 0;
                for (int64_t b = 0; b < B; b++) {
                    double c = dp_tensor_get(grp[k].cf, b);
                    if (c != 0) s += c * dp_tensor_get(g, b * n + e);
                }
                err += fabs(s - dp_tensor_get(S, e));
            }
            if (err < besterr) { besterr = err; best = k; }
        }
        for (int64_t e = 0; e < n; e++)
            for (int64_t b = 0; b < B; b++) {
                double dc = grp[best].cnew[b] - dp_tensor_get(grp[best].cf, b);
                if (dc != 0) delta[e] += dc * dp_tensor_get(g, b * n + e);
            }
        for (int64_t e = 0; e < n; e++) {
            double x = dp_tensor_get(t, e);
            v[e] = kind == 2 ? x + delta[e] : kind == 3 ? x + delta[e] / d : x - lr * delta[e] / d;
        }
        st = dp_tset_add_f64(out, nm, v, t->ndim, t->shape);
        dp_free(v);
    }
    dp_free(delta);
    for (size_t i = 0; st == DP_OK && i < ref->nmeta; i++) st = dp_tset_set_meta(out, ref->meta[i].key, ref->meta[i].value);
    for (int k = 0; k < ng; k++) dp_free(grp[k].cnew);
    if (st != DP_OK) dp_tset_free(out);
    return st;
}

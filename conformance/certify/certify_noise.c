/* conformance/certify/certify_noise.c — the noise variance tests by part of the model
 * (docs/certification.md "Noise by tensor, group and class"): the pooled tests of certify.c
 * dilute a whole tensor without noise among the others (a llama's norm gains are 0.3 % of its
 * parameters), so each tensor of each step vector is also tested alone (all repeats and
 * trajectory steps together), each clipping group that is neither one tensor nor the whole
 * model, and each parameter class pooled over every vector (1-D tensors: biases and norm
 * gains; tensors of 2 or more dimensions). Each family shares one false-reject budget alpha,
 * split evenly over its tests (Bonferroni), so a family adds alpha to the union bound however
 * many tensors it has. Only sums of squares are kept: the variance test needs nothing else. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/certify/certify_int.h"
#include "common/alloc.h"

dp_status cert_fam_add(cert_fam *f, const char *scope, double ss, int64_t n) {
    if (n <= 0) return DP_OK;
    for (size_t i = 0; i < f->n; i++) /* the same scope again (another repeat): pool it */
        if (strcmp(f->items[i].scope, scope) == 0) {
            f->items[i].ss += ss;
            f->items[i].n += n;
            return DP_OK;
        }
    DP_TRY(DP_GROW(f->items, f->cap, f->n + 1, 32, "noise families"));
    cert_fam_item *it = &f->items[f->n++];
    snprintf(it->scope, sizeof it->scope, "%s", scope);
    it->ss = ss;
    it->n = n;
    return DP_OK;
}

void cert_fams_free(cert_noise_fams *f) {
    dp_free(f->tensor.items);
    dp_free(f->group.items);
    dp_free(f->pclass.items);
    memset(f, 0, sizeof *f);
}

dp_status cert_fams_add_step(cert_noise_fams *f, const char *vec, const ref_model *m, const dp_clip_groups *g,
                             const double *z) {
    int64_t off = 0;
    char sc[200];
    for (int p = 0; p < m->nparams; p++) {
        const ref_param *P = &m->params[p];
        double ss = 0;
        for (int64_t e = 0; e < P->numel; e++) ss += z[off + e] * z[off + e];
        snprintf(sc, sizeof sc, "%.90s %.100s", vec, P->name);
        DP_TRY(cert_fam_add(&f->tensor, sc, ss, P->numel));
        snprintf(sc, sizeof sc, "%s", P->ndim == 1 ? "1-D tensors (biases, norm gains)" : "tensors of 2 or more dimensions");
        DP_TRY(cert_fam_add(&f->pclass, sc, ss, P->numel));
        off += P->numel;
    }
    /* clipping groups of more than one tensor that are not the whole model (group clipping) */
    for (int k = 0; g && g->ngroups > 1 && k < g->ngroups; k++) {
        int members = 0;
        double ss = 0;
        int64_t n = 0;
        off = 0;
        for (int p = 0; p < m->nparams; p++) {
            if (g->group_of[p] == k) {
                members++;
                for (int64_t e = 0; e < m->params[p].numel; e++) ss += z[off + e] * z[off + e];
                n += m->params[p].numel;
            }
            off += m->params[p].numel;
        }
        if (members < 2) continue;
        snprintf(sc, sizeof sc, "%.90s group %.100s", vec, g->name[k]);
        DP_TRY(cert_fam_add(&f->group, sc, ss, n));
    }
    return DP_OK;
}

/* One family: every member tested at alpha / m. */
static dp_status push_family(cert_result *r, const cert_fam *f, const char *name, double alpha) {
    for (size_t i = 0; i < f->n; i++) {
        cert_check k;
        double a = alpha / (double)f->n;
        cert_test_variance_ss(&k, f->items[i].ss, f->items[i].n, a);
        snprintf(k.name, sizeof k.name, "%s", name);
        snprintf(k.scope, sizeof k.scope, "%.159s", f->items[i].scope);
        size_t l = strlen(k.msg);
        snprintf(k.msg + l, sizeof k.msg - l, "; %lld draws, alpha %.2g (%.2g / %zu tests)", (long long)f->items[i].n, a,
                 alpha, f->n);
        DP_TRY(cert_result_push(r, &k));
    }
    return DP_OK;
}

dp_status cert_fams_finish(cert_result *r, const cert_noise_fams *f, double alpha) {
    DP_TRY(push_family(r, &f->tensor, "noise variance per tensor", alpha));
    DP_TRY(push_family(r, &f->group, "noise variance per clipping group", alpha));
    DP_TRY(push_family(r, &f->pclass, "noise variance per parameter class", alpha));
    /* the weakest member's power against a tensor whose noise is half the claim or missing */
    int64_t nmin = 0;
    for (size_t i = 0; i < f->tensor.n; i++)
        if (!nmin || f->tensor.items[i].n < nmin) nmin = f->tensor.items[i].n;
    r->tensor_min_n = nmin;
    r->tensor_alpha = f->tensor.n ? alpha / (double)f->tensor.n : 0;
    return DP_OK;
}

/* attacks/audit_plant.c — the planted "clip after summing" DP-SGD release (test-only;
 * docs/audits.md "Planted bugs"), built from the reference's own pieces: the Poisson batch
 * (ref_dpsgd_poisson), per-example gradients (ref_example_grad, or the gradient canary),
 * the clip factor (ref_clip_factor, abadi) applied to the SUM of the raw gradients instead
 * of each example, and the reference's noise (ref_dpsgd_noise_z, scale sigma C). Flat
 * clipping only. Output: the private gradient (S_clipped + Z) / (q N) over the flat
 * parameters, malloc'd. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/audit.h"
#include "common/alloc.h"
#include "reference/dpsgd.h"

dp_status audit_plant_cas_release(double **private_grad, const audit_setup *s, const ref_dataset *d,
                                  dp_noise_key key, int64_t step) {
    const audit_config *c = &s->cfg;
    const ref_model *m = &s->m0;
    int64_t total = m->total, b = 0;
    double *sum = dp_calloc((size_t)total, sizeof *sum), *g = dp_malloc((size_t)total * sizeof *g);
    int64_t *idx = dp_malloc((size_t)d->n * sizeof *idx);
    double **gp = dp_calloc((size_t)m->nparams, sizeof *gp);
    dp_status st = (sum && g && idx && gp) ? DP_OK : DP_ERR_NOMEM;
    for (int p = 0, off = 0; st == DP_OK && p < m->nparams; p++) { gp[p] = g + off; off += (int)m->params[p].numel; }
    if (st == DP_OK) st = ref_dpsgd_poisson(idx, &b, key, step, c->q, d->n);
    for (int64_t k = 0; st == DP_OK && k < b; k++) {
        double loss;
        if (d == &s->d1 && idx[k] == c->n && s->canary_grad) memcpy(g, s->canary_grad, (size_t)total * sizeof *g);
        else st = ref_example_grad(&loss, gp, m, d, idx[k]);
        for (int64_t e = 0; st == DP_OK && e < total; e++) sum[e] += g[e];
    }
    if (st == DP_OK) {
        double nrm = 0;
        for (int64_t e = 0; e < total; e++) nrm += sum[e] * sum[e];
        double f = ref_clip_factor(REF_CLIPFN_ABADI, sqrt(nrm), c->clip, 0.0); /* THE BUG: clip of the sum */
        double denom = c->q * (double)d->n;
        int64_t off = 0;
        for (int p = 0; p < m->nparams; p++) {
            for (int64_t e = 0; e < m->params[p].numel; e++)
                sum[off + e] = (f * sum[off + e] + c->sigma * c->clip * ref_dpsgd_noise_z(key, step, p, e)) / denom;
            off += m->params[p].numel;
        }
    }
    dp_free(g); dp_free(idx); dp_free(gp);
    if (st != DP_OK) { dp_free(sum); return st; }
    *private_grad = sum;
    return DP_OK;
}

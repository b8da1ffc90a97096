/* conformance/compare/compare_dpzo.c — the DP-ZO step of `compare` (docs/tolerances.md "DP-ZO"):
 * directions, clipped loss differences, noise, released scalars, update, losses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/compare/compare_int.h"
#include "common/alloc.h"

/* DP-ZO step: z, clipped differences, noise, released scalars, update, losses. */
dp_status conf_compare_dpzo(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                              const conf_cmp_opts *o, const char *prefix, const conf_consts *k, conf_bstore *bs) {
    dp_status st = DP_OK;
    double nsp = 1, sigma = 0, clip = 0, den = NAN, lr = NAN, wd = 0;
    static const char *const kn[] = {"n_spsa", NULL}, *const ks[] = {"sigma", NULL}, *const kc[] = {"clip", NULL},
                             *const kd[] = {"denominator", NULL}, *const klr[] = {"lr", NULL},
                             *const kwd[] = {"weight_decay", NULL};
    conf_meta_num(ref, &nsp, kn);
    conf_meta_num(ref, &sigma, ks);
    conf_meta_num(ref, &clip, kc);
    conf_meta_num(ref, &den, kd);
    conf_meta_num(ref, &lr, klr);
    conf_meta_num(ref, &wd, kwd);
    int64_t n = (int64_t)nsp;
    const dp_tensor *lp = dp_tset_find(ref, "per_sample.loss_plus"), *lm = dp_tset_find(ref, "per_sample.loss_minus");
    const dp_tensor *dc = dp_tset_find(ref, "per_sample.diff_clipped"), *nz = dp_tset_find(ref, "step.noise");
    const dp_tensor *sc = dp_tset_find(ref, "step.scalar");
    int64_t nb = dc ? dp_tensor_numel(dc) : 0, b = n > 0 ? nb / n : 0;
    if (!lp || !lm || !dc || !nz || n < 1 || dp_tensor_numel(lp) != nb || dp_tensor_numel(lm) != nb ||
        dp_tensor_numel(nz) != n || dp_tensor_numel(sc) != n || !(den > 0) || isnan(lr))
        return dp_error(DP_ERR_FORMAT, "DP-ZO reference export is incomplete (losses, diff_clipped, noise, scalar, "
                                       "n_spsa, denominator, lr)");
    double *bl = dp_malloc((size_t)(nb ? nb : 1) * 2 * sizeof *bl), *bd = dp_malloc((size_t)(nb ? nb : 1) * sizeof *bd);
    double *bz = dp_malloc((size_t)n * sizeof *bz), *bs_ = dp_malloc((size_t)n * sizeof *bs_), *tmp = NULL;
    if (!bl || !bd || !bz || !bs_) { st = DP_ERR_NOMEM; goto out; }
    /* mixed precision (docs/tolerances.md "DP-ZO in bf16 and fp16"): the half forward's
       A, W (the perturbed parameters), Y rounding points, 3 per linear layer */
    double gl = conf_gamma(k->K + 2, k->u) + (o->mixed ? conf_gamma(3.0 * k->L, k->uh) : 0.0);
    double lnP = log(k->P > 1 ? k->P : 1);
    /* directions: |dz| <= bz (Box-Muller in double) + u_c |z| */
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "dpzo.z.", 7) != 0) continue;
        const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
        int64_t m = dp_tensor_numel(r);
        double *x = conf_bstore_new(bs, nm + 7, CONF_BS_Z, m);
        if (!x) { st = DP_ERR_NOMEM; goto out; }
        for (int64_t e = 0; e < m; e++) x[e] = k->bz + k->uc * fabs(dp_tensor_get(r, e));
        if (!c) { if ((st = conf_cmp_push_missing(out, prefix, nm, "candidate")) != DP_OK) goto out; continue; }
        if ((st = conf_cmp_elems(out, prefix, nm, r, c, NULL, x, o->warn)) != DP_OK) goto out;
    }
    /* losses at theta +- phi z: gamma_{K+2} (|l| + ln P + 1) */
    for (int64_t e = 0; e < nb; e++) {
        bl[e] = gl * (fabs(dp_tensor_get(lp, e)) + lnP + 1);
        bl[nb + e] = gl * (fabs(dp_tensor_get(lm, e)) + lnP + 1);
    }
    /* clipped differences: the candidate's l+ - l- lies within b = b_{l+} + b_{l-} of the
       reference's d, and clip is monotone and 1-Lipschitz, so its clip lies in
       [clip(d - b), clip(d + b)]: at most min(b, 2C) from clip(d); plus u |d| and the
       candidate's rounding of C (u_c C). b >= 2C is vacuous: INCOMPLETE. */
    int64_t nvac = 0;
    for (int64_t e = 0; e < nb; e++) { /* a dropped pair (non-finite l+ - l-) is exactly 0 on both sides */
        double d = dp_tensor_get(lp, e) - dp_tensor_get(lm, e), b = bl[e] + bl[nb + e], cl = fmin(fmax(d, -clip), clip);
        if (!isfinite(d)) { bd[e] = 0.0; continue; }
        double up = fmin(fmax(d + b, -clip), clip) - cl, dn = cl - fmin(fmax(d - b, -clip), clip);
        bd[e] = fmax(up, dn) + k->u * fabs(dp_tensor_get(dc, e)) + k->uc * fabs(clip);
        if (!(b < 2 * fabs(clip))) nvac++;
    }
    if (nvac > 0) {
        char why[200];
        snprintf(why, sizeof why, "the loss-difference bound is >= 2C for %lld of %lld pairs (vacuous: raise --phi or "
                 "--clip, docs/tolerances.md \"DP-ZO in bf16 and fp16\")", (long long)nvac, (long long)nb);
        conf_cmp_mark_incomplete(out, prefix, "per_sample.diff_clipped", why);
    }
    {
        const dp_tensor *c = dp_tset_find(cand, "per_sample.diff_clipped");
        if (!c) st = conf_cmp_push_missing(out, prefix, "per_sample.diff_clipped", "candidate");
        else st = conf_cmp_elems(out, prefix, "per_sample.diff_clipped", dc, c, NULL, bd, o->warn);
        if (st != DP_OK) goto out;
    }
    /* noise: sigma C sqrt(n) g (Gaussian) or sigma C n l (Laplace): scale <= sigma C n */
    for (int64_t j = 0; j < n; j++) {
        double a = fabs(dp_tensor_get(nz, j));
        bz[j] = fabs(sigma * clip) * (double)n * k->bz + conf_gamma(3, k->u) * a + k->uc * a;
    }
    {
        const dp_tensor *c = dp_tset_find(cand, "step.noise");
        if (!c) st = conf_cmp_push_missing(out, prefix, "step.noise", "candidate");
        else st = conf_cmp_elems(out, prefix, "step.noise", nz, c, NULL, bz, o->warn);
        if (st != DP_OK) goto out;
    }
    /* released scalars: s_j = (sum_i d_ij + Z_j) / den */
    for (int64_t j = 0; j < n; j++) {
        double sabs = 0, sd = 0;
        for (int64_t i = 0; i < b; i++) { sabs += fabs(dp_tensor_get(dc, j * b + i)); sd += bd[j * b + i]; }
        double s = fabs(dp_tensor_get(sc, j));
        bs_[j] = (sd + conf_bound_sum((double)b + 1, sabs + fabs(dp_tensor_get(nz, j)), k->u) + bz[j]) / den
               + conf_gamma(2, k->u) * s + k->uc * s;
    }
    {
        const dp_tensor *c = dp_tset_find(cand, "step.scalar");
        if (!c) st = conf_cmp_push_missing(out, prefix, "step.scalar", "candidate");
        else st = conf_cmp_elems(out, prefix, "step.scalar", sc, c, NULL, bs_, o->warn);
        if (st != DP_OK) goto out;
    }
    /* update: theta' = theta - lr ((sum_j s_j z_j) / n + wd theta) */
    for (size_t i = 0; i < ref->n; i++) {
        const char *nm = ref->items[i].name;
        if (strncmp(nm, "params_after.", 13) != 0) continue;
        const char *pname = nm + 13;
        const dp_tensor *r = &ref->items[i].t, *c = dp_tset_find(cand, nm);
        char pn[200], zn[200];
        snprintf(pn, sizeof pn, "params.%s", pname);
        snprintf(zn, sizeof zn, "dpzo.z.%s", pname);
        const dp_tensor *rp = dp_tset_find(ref, pn), *cp = dp_tset_find(cand, pn), *rz = dp_tset_find(ref, zn);
        int64_t m = dp_tensor_numel(r);
        const double *dz = conf_bstore_get(bs, zn + 7, CONF_BS_Z, m * n);
        if (!c) { if ((st = conf_cmp_push_missing(out, prefix, nm, "candidate")) != DP_OK) goto out; continue; }
        if (!rp || !rz || !dz || dp_tensor_numel(rp) != m || dp_tensor_numel(rz) != m * n) {
            if ((st = conf_cmp_push_skip(out, prefix, nm, CONF_SKIPPED, "no update error model without params and dpzo.z of this tensor")) != DP_OK)
                goto out;
            continue;
        }
        double *x = conf_bstore_new(bs, pname, CONF_BS_PA, m);
        if (!x) { st = DP_ERR_NOMEM; goto out; }
        /* mixed precision: the f32 update also rounds lr and wd theta (n + 5 roundings) */
        double gn = conf_gamma((double)n + (o->mixed ? 5 : 3), k->u);
        for (int64_t e = 0; e < m; e++) {
            double p = dp_tensor_get(rp, e), prop = 0, sz = 0;
            for (int64_t j = 0; j < n; j++) {
                double zj = dp_tensor_get(rz, j * m + e), sj = dp_tensor_get(sc, j);
                prop += bs_[j] * fabs(zj) + fabs(sj) * dz[j * m + e];
                sz += fabs(sj * zj);
            }
            double dp_in = cp && dp_tensor_numel(cp) == m ? fabs(dp_tensor_get(cp, e) - p) : k->uc * fabs(p);
            if (!isfinite(dp_in)) dp_in = INFINITY;
            x[e] = dp_in * (1 + fabs(lr * wd)) + fabs(lr) / (double)n * prop
                 + gn * (fabs(p) + fabs(lr) / (double)n * sz + fabs(lr * wd * p)) + k->uc * fabs(dp_tensor_get(r, e));
        }
        if ((st = conf_cmp_elems(out, prefix, nm, r, c, NULL, x, o->warn)) != DP_OK) goto out;
    }
    /* losses last (the order) */
    {
        const dp_tensor *c = dp_tset_find(cand, "per_sample.loss_plus");
        if (!c) st = conf_cmp_push_missing(out, prefix, "per_sample.loss_plus", "candidate");
        else st = conf_cmp_elems(out, prefix, "per_sample.loss_plus", lp, c, NULL, bl, o->warn);
        if (st != DP_OK) goto out;
        c = dp_tset_find(cand, "per_sample.loss_minus");
        if (!c) st = conf_cmp_push_missing(out, prefix, "per_sample.loss_minus", "candidate");
        else st = conf_cmp_elems(out, prefix, "per_sample.loss_minus", lm, c, NULL, bl + nb, o->warn);
    }
out:

    dp_free(bl); dp_free(bd); dp_free(bz); dp_free(bs_); dp_free(tmp);
    return st;
}

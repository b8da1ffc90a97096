/* conformance/certify/certify_traj.c — trajectory vectors (docs/certification.md "Trajectory vectors"):
 * K consecutive DP-SGD steps of one training run in one call (or one persistent process) at
 * fixed parameters, batch k given. Each step's private gradient is judged like a step vector's
 * residual (z_k = (qN G_k - S_ref,k) / (sigma C_total), pooled with every other step vector's),
 * and the steps are tested against each other: a candidate whose noise does not move on from
 * step to step (drawn once and reused, a generator reseeded every epoch) has perfectly
 * correlated steps. Test: for every pair of steps (a, b) of a repeat, the mean product of
 * z_a and z_b (cert_test_products) at alpha / (pairs x repeats); the worst pair is the check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/certify/certify_int.h"
#include "common/alloc.h"

/* Step k of trajectory v as a step vector (tensors shared with v, not copied). */
static dp_status step_view(dp_tensor_set *w, const dp_tensor_set *v, int k) {
    dp_tset_init(w);
    char pre[32];
    int pl = snprintf(pre, sizeof pre, "batch.%d.", k);
    dp_status st = DP_OK;
    for (size_t i = 0; i < v->n && st == DP_OK; i++) {
        const char *nm = v->items[i].name;
        if (strncmp(nm, "params.", 7) == 0) st = dp_tset_add(w, nm, &v->items[i].t);
        else if (strncmp(nm, pre, (size_t)pl) == 0) {
            char bn[96];
            snprintf(bn, sizeof bn, "batch.%s", nm + pl);
            st = dp_tset_add(w, bn, &v->items[i].t);
        }
    }
    for (size_t i = 0; i < v->nmeta && st == DP_OK; i++)
        st = dp_tset_set_meta(w, v->meta[i].key, strcmp(v->meta[i].key, "kind") == 0 ? "step" : v->meta[i].value);
    return st;
}

dp_status cert_eval_traj(cert_result *r, cert_pool *all, cert_pool *rep, cert_noise_fams *fams, const char *bundle,
                         const char *name, const dp_tensor_set *v, const cert_opts *o) {
    int K = 0;
    double sigma = 0, ctot = 0;
    DP_TRY(cert_traj_steps(&K, v));
    if (!conf_meta_double(v, "sigma", &sigma) || !conf_meta_double(v, "c_total", &ctot) || !(sigma * ctot > 0))
        return dp_error(DP_ERR_FORMAT, "vector %s: sigma and c_total must be positive", name);
    double **zs = dp_calloc((size_t)K * (size_t)o->repeats, sizeof *zs);
    if (!zs) return DP_ERR_NOMEM;
    int64_t n = 0;
    double worst = -1, wlim = 0;
    int wa = 0, wb = 0;
    int64_t wr = 0, npairs = 0;
    dp_status st = DP_OK;
    const double ap = o->alpha / ((double)K * (K - 1) / 2 * (double)o->repeats);
    for (int64_t k = 1; k <= o->repeats && st == DP_OK; k++) {
        char sc[160];
        dp_tensor_set out;
        if (!cert_read_repeat(r, &st, &out, sc, sizeof sc, bundle, name, k, v)) continue;
        const char *clip_fn = dp_tset_meta(&out, "clip_fn");
        if (!clip_fn) clip_fn = dp_tset_meta(v, "clip_fn");
        conf_clip_conv cv;
        if (conf_clip_conv_parse(&cv, "output metadata clip_fn", clip_fn) != DP_OK) {
            st = cert_push(r, CERT_FAIL, "declared conventions", sc, "output metadata: clip_fn must be abadi, abadi_eps:E or "
                                                                  "automatic[:G]");
            dp_tset_free(&out);
            continue;
        }
        if (cv.automatic && strcmp(clip_fn, "automatic") == 0) conf_meta_double(v, "gamma", &cv.eps);
        cert_note_convention(r, name, clip_fn, dp_tset_meta(&out, "dtype") ? dp_tset_meta(&out, "dtype") : "f64");
        double **z = zs + (k - 1) * K;
        for (int s = 0; s < K && st == DP_OK; s++) {
            dp_tensor_set w;
            cert_vecref ref;
            if ((st = step_view(&w, v, s)) != DP_OK) { dp_tset_free(&w); break; }
            st = cert_vecref_compute(&ref, &w, &cv);
            dp_tset_free(&w);
            if (st != DP_OK) break;
            n = 0;
            for (int p = 0; p < ref.m.nparams; p++) n += ref.m.params[p].numel;
            if (!(z[s] = dp_malloc((size_t)n * sizeof **z))) { cert_vecref_free(&ref); st = DP_ERR_NOMEM; break; }
            int64_t j = 0;
            int bad = 0;
            for (int p = 0; p < ref.m.nparams; p++) {
                char pg[220];
                snprintf(pg, sizeof pg, "step.%d.private_grad.%s", s, ref.m.params[p].name);
                const dp_tensor *G = dp_tset_find(&out, pg);
                for (int64_t e = 0; e < ref.m.params[p].numel; e++, j++) {
                    z[s][j] = G ? (ref.qn * dp_tensor_get(G, e) - ref.sum[p][e]) / (sigma * ctot) : NAN;
                    if (!isfinite(z[s][j])) bad = 1;
                }
            }
            if (bad) {
                char s2[200];
                snprintf(s2, sizeof s2, "%.120s step %d", sc, s);
                st = cert_push(r, CERT_FAIL, "private gradient finite", s2, "a private gradient element is not finite");
                dp_free(z[s]);
                z[s] = NULL;
            } else {
                st = cert_fams_add_step(fams, name, &ref.m, &ref.g, z[s]);
                for (int64_t e = 0; e < n && st == DP_OK; e++) st = cert_pool_push(all, z[s][e]);
                for (int64_t e = 0; k >= 2 && zs[(k - 2) * K + s] && e < n && st == DP_OK; e++)
                    st = cert_pair_push(rep, z[s][e], zs[(k - 2) * K + s][e]);
            }
            cert_vecref_free(&ref);
        }
        dp_tset_free(&out);
        /* every pair of steps of this repeat */
        for (int a = 0; a < K && st == DP_OK; a++)
            for (int b = a + 1; b < K; b++) {
                if (!z[a] || !z[b]) continue;
                cert_check c;
                cert_test_products(&c, z[a], z[b], n, ap);
                npairs++;
                if (fabs(c.statistic) > worst) { worst = fabs(c.statistic); wlim = c.hi; wa = a; wb = b; wr = k; }
            }
    }
    if (st == DP_OK) {
        cert_check c;
        memset(&c, 0, sizeof c);
        snprintf(c.name, sizeof c.name, "noise independence across trajectory steps (every pair, worst)");
        c.alpha = o->alpha;
        c.need = CERT_NEED_HI;
        if (npairs == 0) {
            c.status = CERT_INCOMPLETE;
            snprintf(c.scope, sizeof c.scope, "%s", name);
            snprintf(c.msg, sizeof c.msg, "no pair of steps could be read: not tested");
        } else {
            c.statistic = worst;
            c.lo = 0;
            c.hi = wlim;
            c.n = n;
            c.status = worst <= wlim ? CERT_PASS : CERT_FAIL;
            snprintf(c.scope, sizeof c.scope, "%.100s r%lld steps %d and %d", name, (long long)wr, wa, wb);
            snprintf(c.msg, sizeof c.msg, "largest |mean product| of two steps' standardized noise %.5f over %lld pairs of "
                     "steps (%lld elements each), accept <= %.5f (alpha %.2g per pair)%s", worst, (long long)npairs,
                     (long long)n, wlim, ap, worst > 0.5 ? ": the noise repeats from step to step" : "");
        }
        st = cert_result_push(r, &c);
    }
    for (int64_t i = 0; i < K * o->repeats; i++) dp_free(zs[i]);
    dp_free(zs);
    return st;
}

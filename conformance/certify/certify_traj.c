/* conformance/certify/certify_traj.c — trajectory vectors (docs/certification.md "Trajectory vectors"):
 * K consecutive DP-SGD or DP-ZO steps of one training run in one call (or one persistent
 * process) at fixed parameters, batch k given. DP-SGD: each step's private gradient is judged
 * like a step vector's residual (z_k = (qN G_k - S_ref,k) / (sigma C_total), pooled with every
 * other step vector's). DP-ZO: each step is judged like a DP-ZO vector (its directions and the
 * standardized noise of its released scalars join the DP-ZO pools). Then the steps are tested
 * against each other: a candidate whose randomness does not move on from step to step (drawn
 * once and reused, a generator reseeded every epoch) has perfectly correlated steps. Test: for
 * every pair of steps (a, b) of a repeat, the mean product of their standardized noise (DP-ZO:
 * also of their directions) (cert_test_products) at alpha / (pairs x repeats); the worst pair
 * is the check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/certify/certify_int.h"
#include "common/alloc.h"

static int traj_is_dpzo(const dp_tensor_set *v) {
    const char *a = dp_tset_meta(v, "algorithm");
    return a && strcmp(a, "dpzo") == 0;
}

/* Step k of trajectory v as a step vector (kind step, or dpzo for a DP-ZO trajectory; copies). */
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
        st = dp_tset_set_meta(w, v->meta[i].key, strcmp(v->meta[i].key, "kind") != 0 ? v->meta[i].value
                                                  : traj_is_dpzo(v) ? "dpzo" : "step");
    return st;
}

/* The worst pair of steps (a, b) of any repeat under the product test at ap per pair. */
typedef struct { double worst, lim, ap; int a, b; int64_t r, npairs, n; } traj_worst;

static void worst_update(traj_worst *t, const double *za, const double *zb, int64_t n, int a, int b, int64_t rep) {
    cert_check c;
    cert_test_products(&c, za, zb, n, t->ap);
    t->npairs++;
    t->n = n;
    if (fabs(c.statistic) > t->worst) { t->worst = fabs(c.statistic); t->lim = c.hi; t->a = a; t->b = b; t->r = rep; }
}

static dp_status worst_push(cert_result *r, const traj_worst *t, const char *check, const char *name, const char *what,
                            double alpha) {
    cert_check c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", check);
    c.alpha = alpha;
    c.need = CERT_NEED_HI;
    if (t->npairs == 0) {
        c.status = CERT_INCOMPLETE;
        snprintf(c.scope, sizeof c.scope, "%s", name);
        snprintf(c.msg, sizeof c.msg, "no pair of steps could be read: not tested");
    } else {
        c.statistic = t->worst;
        c.lo = 0;
        c.hi = t->lim;
        c.n = t->n;
        c.status = t->worst <= t->lim ? CERT_PASS : CERT_FAIL;
        snprintf(c.scope, sizeof c.scope, "%.100s r%lld steps %d and %d", name, (long long)t->r, t->a, t->b);
        snprintf(c.msg, sizeof c.msg, "largest |mean product| of two steps' %s %.5f over %lld pairs of steps (%lld "
                 "elements each), accept <= %.5f (alpha %.2g per pair)%s", what, t->worst, (long long)t->npairs,
                 (long long)t->n, t->lim, t->ap, t->worst > 0.5 ? ": it repeats from step to step" : "");
    }
    return cert_result_push(r, &c);
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
    dp_status st = DP_OK;
    traj_worst tw = {.worst = -1, .ap = o->alpha / ((double)K * (K - 1) / 2 * (double)o->repeats)};
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
            for (int b = a + 1; b < K; b++)
                if (z[a] && z[b]) worst_update(&tw, z[a], z[b], n, a, b, k);
    }
    if (st == DP_OK)
        st = worst_push(r, &tw, "noise independence across trajectory steps (every pair, worst)", name,
                        "standardized noise", o->alpha);
    for (int64_t i = 0; i < K * o->repeats; i++) dp_free(zs[i]);
    dp_free(zs);
    return st;
}

/* Step k's outputs of a DP-ZO trajectory as a DP-ZO vector's (copies; metadata of the output). */
static dp_status dpzo_out_view(dp_tensor_set *w, const dp_tensor_set *out, const ref_model *m, int k) {
    static const char *const fixed[] = {"step.scalar", "step.noise", "per_sample.diff_clipped", "per_sample.loss_plus",
                                        "per_sample.loss_minus", NULL};
    dp_tset_init(w);
    dp_status st = DP_OK;
    char nm[220], tn[260];
    for (int p = 0; p < m->nparams + 5 && st == DP_OK; p++) {
        if (p < m->nparams) snprintf(nm, sizeof nm, "dpzo.z.%s", m->params[p].name);
        else snprintf(nm, sizeof nm, "%s", fixed[p - m->nparams]);
        cert_traj_out_name(tn, sizeof tn, k, nm);
        const dp_tensor *t = dp_tset_find(out, tn);
        if (t) st = dp_tset_add(w, nm, t);
    }
    for (size_t i = 0; i < out->nmeta && st == DP_OK; i++) st = dp_tset_set_meta(w, out->meta[i].key, out->meta[i].value);
    return st;
}

dp_status cert_eval_traj_dpzo(cert_result *r, cert_dpzo_pools *pl, const char *bundle, const char *name,
                              const dp_tensor_set *v, const cert_opts *o) {
    int K = 0;
    DP_TRY(cert_traj_steps(&K, v));
    cert_dpzo_track *t = dp_calloc((size_t)K, sizeof *t);
    dp_tensor_set *sv = dp_calloc((size_t)K, sizeof *sv);
    dp_status st = t && sv ? DP_OK : DP_ERR_NOMEM;
    int ready = 0;
    for (; ready < K && st == DP_OK; ready++) {
        char sn[200];
        snprintf(sn, sizeof sn, "%.150s step %d", name, ready);
        if ((st = step_view(&sv[ready], v, ready)) != DP_OK) { dp_tset_free(&sv[ready]); break; }
        if ((st = cert_dpzo_track_init(&t[ready], &sv[ready], sn, o->repeats)) != DP_OK) { dp_tset_free(&sv[ready]); break; }
    }
    pl->vectors++;
    const double ap = o->alpha / ((double)K * (K - 1) / 2 * (double)o->repeats);
    traj_worst dirs = {.worst = -1, .ap = ap}, noise = {.worst = -1, .ap = ap};
    for (int64_t k = 1; k <= o->repeats && st == DP_OK; k++) {
        char sc[160];
        dp_tensor_set out;
        if (!cert_read_repeat(r, &st, &out, sc, sizeof sc, bundle, name, k, v)) {
            for (int s = 0; s < K; s++) t[s].valid = 0;
            continue;
        }
        for (int s = 0; s < K && st == DP_OK; s++) {
            char s2[160];
            dp_tensor_set w;
            snprintf(s2, sizeof s2, "%.140s step %d", sc, s);
            if ((st = dpzo_out_view(&w, &out, &t[s].m, s)) == DP_OK) st = cert_dpzo_track_repeat(r, pl, &t[s], k, &sv[s], &w, s2);
            dp_tset_free(&w);
        }
        dp_tset_free(&out);
        for (int a = 0; a < K && st == DP_OK; a++)
            for (int b = a + 1; b < K; b++) {
                if (!t[a].valid || !t[b].valid) continue;
                worst_update(&dirs, t[a].z, t[b].z, t[a].nz, a, b, k);
                worst_update(&noise, t[a].w, t[b].w, t[a].q.n, a, b, k);
            }
    }
    if (st == DP_OK)
        st = worst_push(r, &dirs, "dpzo direction independence across trajectory steps (every pair, worst)", name,
                        "directions", o->alpha);
    if (st == DP_OK)
        st = worst_push(r, &noise, "dpzo scalar noise independence across trajectory steps (every pair, worst)", name,
                        "standardized scalar noise", o->alpha);
    for (int s = 0; s < ready; s++) {
        cert_dpzo_track_free(&t[s]);
        dp_tset_free(&sv[s]);
    }
    dp_free(t);
    dp_free(sv);
    return st;
}

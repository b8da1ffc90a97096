/* attacks/audit_run.c — trials threaded across a pool (one release instance per thread,
 * trial i of side s keyed by audit_trial_key, so the statistics do not depend on the
 * thread count), then the analysis and the verdict (docs/audits.md). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "attacks/audit.h"
#include "attacks/audit_candidate.h"

typedef struct {
    audit_worker base;
    const audit_setup *s;
    double *stat[2];
    atomic_llong *done;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    audit_worker *b = &w->base;
    const audit_setup *s = w->s;
    int64_t n = s->cfg.trials, tot = 2 * n;
    audit_release r;
    b->st = audit_release_make(&r, s, b->tid);
    int64_t step = tot / 10 > 0 ? tot / 10 : 1, next_report = step;
    for (int64_t j = b->tid; b->st == DP_OK && j < tot; j += b->nth) {
        if (atomic_load(b->stop)) break;
        int side = (int)(j / n);
        int64_t i = j % n;
        dp_noise_key k;
        b->st = audit_trial_key(&k, s->cfg.key, side, i);
        if (b->st == DP_OK) b->st = r.run(&w->stat[side][i], &r, side, k);
        if (b->st == DP_OK && !isfinite(w->stat[side][i]))
            b->st = dp_error(DP_ERR_NUMERIC, "trial %lld on %s: the statistic is not finite", (long long)i,
                             side ? "D'" : "D");
        long long d = atomic_fetch_add(w->done, 1) + 1;
        if (b->tid == 0 && s->cfg.progress && d >= next_report) {
            fprintf(stderr, "audit: %lld/%lld trials\n", d, (long long)tot);
            while (next_report <= d) next_report += step;
        }
    }
    if (b->st != DP_OK) audit_worker_fail(b);
    if (r.destroy) r.destroy(&r);
    return NULL;
}

dp_status audit_run_trials(double *stat0, double *stat1, const audit_setup *s, double *seconds) {
    int nth = s->cfg.threads;
    worker *w = dp_calloc((size_t)nth, sizeof *w);
    if (!w) return DP_ERR_NOMEM;
    atomic_llong done = 0;
    for (int t = 0; t < nth; t++) w[t] = (worker){.s = s, .stat = {stat0, stat1}, .done = &done};
    dp_status st = audit_pool_run(work, w, sizeof *w, nth, seconds);
    dp_free(w);
    return st;
}

static double *copy_sorted(const double *v, size_t n) {
    double *c = dp_malloc(n * sizeof *c);
    if (!c) return NULL;
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, audit_cmp_double);
    return c;
}

dp_status audit_analyze(audit_result *res, const audit_setup *s, const double *stat0, const double *stat1) {
    const audit_config *c = &s->cfg;
    memset(res, 0, sizeof *res);
    int64_t n = c->trials, ncal = (int64_t)floor(c->calib_frac * (double)n), ne = n - ncal;
    res->n_cal = ncal;
    res->n_eval = ne;
    /* two tests (standard, Gaussian) share the error budget: alpha/2 each, alpha/4 per rate */
    double alpha = 1.0 - c->confidence, a_test = alpha / 2;
    double *c0 = copy_sorted(stat0, (size_t)ncal), *c1 = copy_sorted(stat1, (size_t)ncal);
    double *e0 = copy_sorted(stat0 + ncal, (size_t)ne), *e1 = copy_sorted(stat1 + ncal, (size_t)ne);
    dp_status st = (c0 && c1 && e0 && e1) ? DP_OK : DP_ERR_NOMEM;
    double tau_std = 0, tau_g = 0;
    if (st == DP_OK) st = audit_pick_threshold(&tau_std, c0, (size_t)ncal, c1, (size_t)ncal, a_test, c->delta, AUDIT_PICK_EPS);
    if (st == DP_OK) st = audit_pick_threshold(&tau_g, c0, (size_t)ncal, c1, (size_t)ncal, a_test, c->delta, AUDIT_PICK_MU);
    if (st == DP_OK) {
        audit_eval_threshold(&res->std, e0, (size_t)ne, e1, (size_t)ne, tau_std, a_test, c->delta);
        audit_eval_threshold(&res->gauss, e0, (size_t)ne, e1, (size_t)ne, tau_g, a_test, c->delta);
        res->eps_lb_std = res->std.eps_lb;
        res->mu_lb = res->gauss.mu_lb;
        res->eps_lb_gauss = res->mu_lb > 0 ? acct_gdp_epsilon(res->mu_lb, c->delta) : 0.0;
        res->eps_claim = s->eps_claim;
        res->mu_claim = s->mu_claim;
        res->tightness = res->eps_lb_gauss / s->eps_claim;
        res->gauss_binding = c->q == 1.0;
        st = audit_roc(res->roc_fpr, res->roc_tpr, &res->roc_n, AUDIT_ROC_POINTS, &res->auc, e0, (size_t)ne, e1,
                       (size_t)ne);
    }
    dp_free(c0); dp_free(c1); dp_free(e0); dp_free(e1);
    if (st != DP_OK) return st;
    if (res->eps_lb_std > res->eps_claim)
        res->verdict = AUDIT_FAIL;
    else if (res->gauss_binding && res->mu_lb > res->mu_claim)
        res->verdict = AUDIT_FAIL;
    else
        res->verdict = AUDIT_PASS;
    if (res->verdict == AUDIT_FAIL)
        snprintf(res->message, sizeof res->message,
                 "epsilon lower bound above the claim: standard %.4f, Gaussian trade-off %.4f (mu_lb %.4f vs claimed mu "
                 "%.4f) > claimed epsilon %.4f at delta %g",
                 res->eps_lb_std, res->eps_lb_gauss, res->mu_lb, res->mu_claim, res->eps_claim, c->delta);
    else
        snprintf(res->message, sizeof res->message,
                 "epsilon lower bounds %.4f (standard) and %.4f (Gaussian trade-off%s) <= claimed epsilon %.4f; "
                 "tightness %.3f",
                 res->eps_lb_std, res->eps_lb_gauss, res->gauss_binding ? "" : ", an estimate since q < 1",
                 res->eps_claim, res->tightness);
    return DP_OK;
}

dp_status audit_run(audit_result *res, const audit_config *c) {
    audit_setup s;
    DP_TRY(audit_setup_make(&s, c));
    if (c->impl == AUDIT_IMPL_CANDIDATE) {
        dp_status pst = audit_candidate_prepare(&s, c->work);
        if (pst != DP_OK) { audit_setup_free(&s); return pst; }
    }
    size_t n = (size_t)c->trials;
    double *s0 = dp_malloc(n * sizeof *s0), *s1 = dp_malloc(n * sizeof *s1), secs = 0;
    dp_status st = (s0 && s1) ? DP_OK : DP_ERR_NOMEM;
    if (st == DP_OK) st = audit_run_trials(s0, s1, &s, &secs);
    if (st == DP_OK) st = audit_analyze(res, &s, s0, s1);
    if (st == DP_OK) {
        res->seconds = secs;
        res->trials_per_s = secs > 0 ? 2.0 * (double)n / secs : 0;
    }
    dp_free(s0); dp_free(s1);
    audit_setup_free(&s);
    return st;
}

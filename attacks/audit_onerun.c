/* attacks/audit_onerun.c — the one-run audit (Steinke, Nasr and Jagielski 2023;
 * docs/audits.md "One-run audit"): m Dirac gradient canaries on distinct coordinates of the
 * mlp, each included with probability 1/2 (a secret bit from the audit key), ONE DP-SGD
 * training run of K steps on the generated data plus the included canaries (reference,
 * gradient hook), every intermediate private gradient observed (white box); canary c's
 * score is sum_t (q N) G_t[k_c]; the auditor guesses IN for the r/2 highest scores and OUT
 * for the r/2 lowest and abstains on the rest; v correct guesses give the epsilon lower
 * bound of audit_onerun_eps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "attacks/audit.h"
#include "reference/dpsgd.h"

typedef struct {
    int64_t n_base;
    const int64_t *coord; /* [number included] flat coordinate of each included canary */
    double mag;
    const ref_model *m;
} onerun_hook;

static dp_status hook(double *loss, double *const *grads, const ref_model *m, const ref_dataset *d, int64_t i,
                      void *ctx) {
    const onerun_hook *h = ctx;
    if (i < h->n_base) return ref_example_grad(loss, grads, m, d, i);
    int64_t k = h->coord[i - h->n_base], off = 0;
    for (int p = 0; p < m->nparams; p++) {
        memset(grads[p], 0, (size_t)m->params[p].numel * sizeof(double));
        if (k >= off && k < off + m->params[p].numel) grads[p][k - off] = h->mag;
        off += m->params[p].numel;
    }
    *loss = 0;
    return DP_OK;
}

dp_status audit_onerun_check(int64_t m, int64_t r, int64_t steps) {
    if (steps < 1) return dp_error(DP_ERR_INVALID, "--onerun-steps must be >= 1 (got %lld)", (long long)steps);
    if (r < 2 || r > m || r % 2)
        return dp_error(DP_ERR_INVALID, "--onerun-guesses must be even and in [2, m = %lld] (got %lld)", (long long)m,
                        (long long)r);
    return DP_OK;
}

dp_status audit_onerun_train_config(ref_dpsgd_config *rc, const audit_setup *s, int64_t n, int64_t steps) {
    const audit_config *c = &s->cfg;
    ref_dpsgd_config_default(rc);
    rc->n = n;
    rc->q = c->q;
    rc->steps = steps;
    rc->seed = c->seed;
    rc->key_given = 1;
    rc->lr = 0.1;
    DP_TRY(audit_trial_key(&rc->key, c->key, 2, 0));
    audit_plant_params(&rc->sigma, &rc->clip, &rc->key, s);
    return DP_OK;
}

typedef struct { double score; int64_t c; } scored;
static int cmp_scored(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->score != y->score) return (x->score > y->score) - (x->score < y->score);
    return (x->c > y->c) - (x->c < y->c);
}

dp_status audit_onerun_finish(audit_onerun_result *res, const audit_config *c, const int *in, const double *score,
                              int64_t m, int64_t r, int64_t steps, const char *kind) {
    scored *sc = dp_malloc((size_t)m * sizeof *sc);
    if (!sc) return DP_ERR_NOMEM;
    int64_t nin = 0;
    for (int64_t k = 0; k < m; k++) { sc[k] = (scored){score[k], k}; nin += in[k]; }
    qsort(sc, (size_t)m, sizeof *sc, cmp_scored);
    int64_t half = r / 2, v = 0;
    for (int64_t k = 0; k < half; k++) v += !in[sc[k].c];         /* lowest: guess OUT */
    for (int64_t k = m - half; k < m; k++) v += in[sc[k].c];      /* highest: guess IN */
    dp_free(sc);
    res->m = m;
    res->r = r;
    res->v = v;
    res->included = nin;
    res->steps = steps;
    snprintf(res->canary, sizeof res->canary, "%s", kind);
    res->eps_lb = audit_onerun_eps(m, r, v, c->delta, 1.0 - c->confidence);
    acct_schedule sch = {.n = 1};
    sch.seg[0] = (acct_segment){ACCT_GAUSSIAN, c->q, c->sigma, steps};
    DP_TRY(acct_epsilon_by(&res->eps_claim, &sch, ACCT_PLD, c->delta, NULL, 0));
    res->verdict = res->eps_lb > res->eps_claim ? AUDIT_FAIL : AUDIT_PASS;
    snprintf(res->message, sizeof res->message,
             "one-run (%s, %s canaries): %lld of %lld guesses correct (m = %lld, %lld included, K = %lld steps): epsilon "
             "lower bound %.4f %s claimed %.4f",
             audit_impl_names[c->impl], kind, (long long)v, (long long)r, (long long)m, (long long)nin,
             (long long)steps, res->eps_lb, res->verdict == AUDIT_FAIL ? ">" : "<=", res->eps_claim);
    return DP_OK;
}

dp_status audit_onerun(audit_onerun_result *res, const audit_config *c, int64_t m, int64_t r, int64_t steps) {
    memset(res, 0, sizeof *res);
    DP_TRY(audit_config_check(c));
    if (c->algo == AUDIT_ALGO_DPSGD && c->impl == AUDIT_IMPL_OPTIMIZED) return audit_onerun_engine(res, c, m, r, steps);
    if (c->impl != AUDIT_IMPL_REFERENCE || c->algo != AUDIT_ALGO_DPSGD)
        return dp_error(DP_ERR_NOT_SUPPORTED, "the one-run audit runs DP-SGD on the reference or the engine");
    if (c->plant == AUDIT_PLANT_CLIP_AFTER_SUM)
        return dp_error(DP_ERR_INVALID, "--plant clip-after-sum: not a one-run release");
    DP_TRY(audit_onerun_check(m, r, steps));
    audit_setup s;
    DP_TRY(audit_setup_make(&s, c));
    int64_t total = s.m0.total;
    dp_status st = DP_OK;
    if (m < 2 || m > total)
        st = dp_error(DP_ERR_INVALID,
                      "--onerun-canaries %lld: the model has %lld parameters (one Dirac canary per coordinate; the "
                      "canaries cannot be represented)",
                      (long long)m, (long long)total);
    int *in = NULL;
    int64_t *coord = NULL, nin = 0;
    scored *sc = NULL;
    ref_dataset d = {0};
    ref_model model = {0};
    ref_dpsgd_state ds = {0};
    ref_dpsgd_step_out out = {0};
    if (st == DP_OK) {
        in = dp_calloc((size_t)m, sizeof *in);
        coord = dp_calloc((size_t)m, sizeof *coord);
        sc = dp_calloc((size_t)m, sizeof *sc);
        if (!in || !coord || !sc) st = DP_ERR_NOMEM;
    }
    dp_stream bits;
    if (st == DP_OK) st = dp_stream_secret(&bits, c->key, DP_PURPOSE_AUDIT_NOISE, 3, 0);
    int64_t stride = total / (m > 0 ? m : 1);
    for (int64_t k = 0; st == DP_OK && k < m; k++) {
        in[k] = dp_rng_uniform(&bits, (uint64_t)k) < 0.5;
        if (in[k]) coord[nin++] = k * stride;
    }
    if (st == DP_OK) { /* D = base + included canaries (their inputs are placeholders: hooked) */
        d = s.d0;
        d.n = c->n + nin;
        d.x = NULL; d.y = NULL; d.tokens = NULL;
        if (s.d0.kind == REF_MLP) {
            d.x = dp_malloc((size_t)d.n * (size_t)d.in * sizeof *d.x);
            d.y = dp_malloc((size_t)d.n * sizeof *d.y);
            if (!d.x || !d.y) st = DP_ERR_NOMEM;
            for (int64_t i = 0; st == DP_OK && i < d.n; i++) {
                int64_t src = i < c->n ? i : 0;
                memcpy(d.x + i * d.in, s.d0.x + src * d.in, (size_t)d.in * sizeof *d.x);
                d.y[i] = s.d0.y[src];
            }
        } else {
            d.tokens = dp_malloc((size_t)d.n * (size_t)d.seq * sizeof *d.tokens);
            if (!d.tokens) st = DP_ERR_NOMEM;
            for (int64_t i = 0; st == DP_OK && i < d.n; i++)
                memcpy(d.tokens + i * d.seq, s.d0.tokens + (i < c->n ? i : 0) * d.seq, (size_t)d.seq * sizeof *d.tokens);
        }
    }
    onerun_hook h = {.n_base = c->n, .coord = coord, .mag = c->canary_scale * c->clip};
    if (st == DP_OK) st = ref_model_copy(&model, &s.m0);
    if (st == DP_OK) {
        ref_dpsgd_config rc;
        st = audit_onerun_train_config(&rc, &s, d.n, steps);
        if (st == DP_OK) st = ref_dpsgd_init(&ds, &rc, &model);
        ds.grad_fn = hook;
        ds.grad_ctx = &h;
    }
    for (int64_t k = 0; k < m && st == DP_OK; k++) sc[k] = (scored){0.0, k};
    for (int64_t t = 1; st == DP_OK && t <= steps; t++) {
        st = ref_dpsgd_step(&out, &model, &ds, &d, t);
        for (int64_t k = 0; st == DP_OK && k < m; k++) {
            int64_t kk = k * stride, off = 0;
            for (int p = 0; p < model.nparams; p++) {
                if (kk >= off && kk < off + model.params[p].numel) {
                    sc[k].score += c->q * (double)d.n * out.private_grad[p][kk - off];
                    break;
                }
                off += model.params[p].numel;
            }
        }
    }
    if (st == DP_OK) {
        double *score = dp_malloc((size_t)m * sizeof *score);
        if (!score) st = DP_ERR_NOMEM;
        for (int64_t k = 0; st == DP_OK && k < m; k++) score[k] = sc[k].score;
        if (st == DP_OK) st = audit_onerun_finish(res, c, in, score, m, r, steps, "dirac");
        dp_free(score);
    }
    ref_dpsgd_step_free(&out);
    ref_dpsgd_free(&ds);
    ref_model_free(&model);
    dp_free(d.x); dp_free(d.y); dp_free(d.tokens);
    dp_free(in); dp_free(coord); dp_free(sc);
    audit_setup_free(&s);
    return st;
}

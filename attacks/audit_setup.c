/* attacks/audit_setup.c — audit configuration, and what the auditor sets up once:
 * theta_0, D, D' = D + canary, the canary direction and the claimed epsilon
 * (docs/audits.md "White-box step audit"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "attacks/audit.h"
#include "reference/dpzo.h"

#define AUDIT_NAME_(n, s) s,
const char *const audit_impl_names[] = {AUDIT_IMPLS(AUDIT_NAME_) NULL};
const char *const audit_algo_names[] = {AUDIT_ALGOS(AUDIT_NAME_) NULL};
const char *const audit_canary_names[] = {AUDIT_CANARIES(AUDIT_NAME_) NULL};
const char *const audit_plant_names[] = {AUDIT_PLANTS(AUDIT_NAME_) NULL};
const char *const audit_level_names[] = {AUDIT_LEVELS(AUDIT_NAME_) NULL};
#undef AUDIT_NAME_
const char *const audit_verdict_names[] = {"PASS", "FAIL", "INVALID", NULL};

void audit_config_default(audit_config *c) {
    memset(c, 0, sizeof *c);
    c->algo = AUDIT_ALGO_DPSGD;
    c->impl = AUDIT_IMPL_REFERENCE;
    c->backend = "host";
    c->canary = AUDIT_CANARY_DIRAC;
    c->canary_scale = 4.0;
    c->canary_param = -1;
    ref_config_default(&c->mc, REF_MLP);
    c->n = 16;
    c->q = 1.0;
    c->clip = 1.0;
    c->sigma = 1.0;
    c->delta = 1e-5;
    c->steps = 1;
    c->phi = 1.0;
    c->trials = AUDIT_TRIALS_CI;
    c->confidence = 0.95;
    c->calib_frac = 0.1;
    c->threads = 1;
    c->timeout_s = 120;
}

dp_status audit_config_check(const audit_config *c) {
    DP_TRY(dp_check_range("--delta", c->delta, 0, 0, 1, 0));
    DP_TRY(dp_check_range("--confidence", c->confidence, 0, 0, 1, 0));
    DP_TRY(dp_check_range("--calib-frac", c->calib_frac, 0, 0, 1, 0));
    DP_TRY(dp_check_range("--q", c->q, 0, 0, 1, 1));
    DP_TRY(dp_check_min("--clip", c->clip, 0, 0));
    DP_TRY(dp_check_min("--sigma", c->sigma, 0, 0));
    DP_TRY(dp_check_min("--canary-scale", c->canary_scale, 1, 1));
    DP_TRY(dp_check_min("--phi", c->phi, 0, 0));
    if (c->steps < 1 || c->steps > 1000000)
        return dp_error(DP_ERR_INVALID, "--steps must be in [1, 10^6] (got %lld)", (long long)c->steps);
    if (c->steps > 1 && (c->algo != AUDIT_ALGO_DPSGD || c->impl == AUDIT_IMPL_CANDIDATE))
        return dp_error(DP_ERR_INVALID, "--steps %lld: K-step audits are DP-SGD on the reference or the engine",
                        (long long)c->steps);
    if (c->n < 1) return dp_error(DP_ERR_INVALID, "--dataset-size must be >= 1 (got %lld)", (long long)c->n);
    if (c->threads < 1 || c->threads > 256)
        return dp_error(DP_ERR_INVALID, "--threads must be in [1, 256] (got %d)", c->threads);
    int64_t ncal = (int64_t)floor(c->calib_frac * (double)c->trials);
    if (c->trials < 1)
        return dp_error(DP_ERR_INVALID, "--trials must be >= 1 (got %lld)", (long long)c->trials);
    if (ncal < 1 || c->trials - ncal < 1)
        return dp_error(DP_ERR_INVALID,
                        "--trials %lld with --calib-frac %g leaves %lld calibration and %lld evaluation trials per side "
                        "(each must be >= 1)",
                        (long long)c->trials, c->calib_frac, (long long)ncal, (long long)(c->trials - ncal));
    if (c->algo == AUDIT_ALGO_DPZO && c->canary != AUDIT_CANARY_INPUT)
        return dp_error(DP_ERR_INVALID, "--canary %s: the DP-ZO release is a scalar; only --canary input applies",
                        audit_canary_names[c->canary]);
    if (c->impl != AUDIT_IMPL_REFERENCE && c->canary != AUDIT_CANARY_INPUT)
        return dp_error(DP_ERR_INVALID,
                        "--canary %s needs the reference's gradient hook; --impl %s takes --canary input",
                        audit_canary_names[c->canary], audit_impl_names[c->impl]);
    if (c->canary == AUDIT_CANARY_INPUT && c->mc.kind != REF_MLP)
        return dp_error(DP_ERR_INVALID, "--canary input is defined for --model mlp only");
    if (c->plant == AUDIT_PLANT_CLIP_AFTER_SUM && (c->algo != AUDIT_ALGO_DPSGD || c->impl != AUDIT_IMPL_REFERENCE))
        return dp_error(DP_ERR_INVALID, "--plant clip-after-sum is a DP-SGD reference release");
    if (c->impl == AUDIT_IMPL_CANDIDATE) {
        if (!c->candidate || !c->candidate[0]) return dp_error(DP_ERR_USAGE, "--impl candidate needs --candidate 'CMD'");
        if (!c->work || !c->work[0]) return dp_error(DP_ERR_USAGE, "--impl candidate needs a work directory (--work)");
        if (c->algo != AUDIT_ALGO_DPSGD || c->q != 1.0 || c->plant != AUDIT_PLANT_NONE)
            return dp_error(DP_ERR_INVALID, "--impl candidate: the step vectors carry the batch (DP-SGD, --q 1, no "
                                            "--plant)");
        DP_TRY(dp_check_min("--timeout", c->timeout_s, 0, 0));
    }
    return DP_OK;
}

/* D' = D plus one example (copied from `extra_x`/`extra_y`, or D's example 0 for llama). */
static dp_status dataset_plus(ref_dataset *out, const ref_dataset *d, const double *extra_x, int32_t extra_y) {
    memset(out, 0, sizeof *out);
    out->kind = d->kind;
    out->n = d->n + 1;
    out->seq = d->seq;
    out->in = d->in;
    if (d->kind == REF_MLP) {
        out->x = dp_malloc((size_t)out->n * (size_t)d->in * sizeof *out->x);
        out->y = dp_malloc((size_t)out->n * sizeof *out->y);
        if (!out->x || !out->y) return DP_ERR_NOMEM;
        memcpy(out->x, d->x, (size_t)d->n * (size_t)d->in * sizeof *out->x);
        memcpy(out->y, d->y, (size_t)d->n * sizeof *out->y);
        for (int k = 0; k < d->in; k++) out->x[d->n * d->in + k] = extra_x ? extra_x[k] : d->x[k];
        out->y[d->n] = extra_x ? extra_y : d->y[0];
    } else {
        out->tokens = dp_malloc((size_t)out->n * (size_t)d->seq * sizeof *out->tokens);
        if (!out->tokens) return DP_ERR_NOMEM;
        memcpy(out->tokens, d->tokens, (size_t)d->n * (size_t)d->seq * sizeof *out->tokens);
        memcpy(out->tokens + d->n * d->seq, d->tokens, (size_t)d->seq * sizeof *out->tokens);
    }
    return DP_OK;
}

/* Gradient of example i of d at theta_0, flattened into g[total]. */
static dp_status flat_grad(double *g, double *loss, const ref_model *m, const ref_dataset *d, int64_t i) {
    double **gp = dp_calloc((size_t)m->nparams, sizeof *gp);
    if (!gp) return DP_ERR_NOMEM;
    int64_t off = 0;
    for (int p = 0; p < m->nparams; p++) { gp[p] = g + off; off += m->params[p].numel; }
    dp_status st = ref_example_grad(loss, gp, m, d, i);
    dp_free(gp);
    return st;
}

static double norm2(const double *v, int64_t n) {
    double s = 0;
    for (int64_t k = 0; k < n; k++) s += v[k] * v[k];
    return sqrt(s);
}

/* The mlp input canary: x = lambda * (attack-data Gaussian vector, seed, stream 1), label =
 * a class; lambda doubles from 1 (at most 2^30) and every class is tried until the
 * quantity the release sees (gradient norm, |DP-ZO loss difference|) reaches scale * C;
 * the (lambda, class) of the largest finite value is kept. */
static dp_status input_canary(audit_setup *s, double *x, int32_t *y) {
    const audit_config *c = &s->cfg;
    dp_stream st;
    DP_TRY(dp_stream_public(&st, c->seed, DP_PURPOSE_ATTACK_DATA, 1, 0));
    int in = c->mc.in;
    double *x0 = dp_malloc((size_t)in * sizeof *x0);
    double *g = dp_calloc((size_t)s->m0.total, sizeof *g);
    if (!x0 || !g) { dp_free(x0); dp_free(g); return DP_ERR_NOMEM; }
    dp_rng_fill_gaussian(x0, &st, 0, (size_t)in);
    dp_status rc = DP_OK;
    double target = c->canary_scale * c->clip, best = 0, best_lambda = 1.0, best_sign = 1.0;
    int32_t best_y = 0;
    ref_dataset one = {.kind = REF_MLP, .n = 1, .in = in, .x = x, .y = y};
    /* DP-ZO: the direction of step 1, j = 0 */
    double **z = NULL, **pp = NULL, **pm = NULL;
    if (c->algo == AUDIT_ALGO_DPZO) {
        z = dp_calloc((size_t)s->m0.nparams, sizeof *z);
        pp = dp_calloc((size_t)s->m0.nparams, sizeof *pp);
        pm = dp_calloc((size_t)s->m0.nparams, sizeof *pm);
        if (!z || !pp || !pm) rc = DP_ERR_NOMEM;
        for (int p = 0; rc == DP_OK && p < s->m0.nparams; p++) {
            int64_t ne = s->m0.params[p].numel;
            z[p] = dp_malloc((size_t)ne * sizeof **z);
            pp[p] = dp_malloc((size_t)ne * sizeof **pp);
            pm[p] = dp_malloc((size_t)ne * sizeof **pm);
            if (!z[p] || !pp[p] || !pm[p]) { rc = DP_ERR_NOMEM; break; }
            rc = ref_dpzo_direction(z[p], c->seed, 1, p, 0, ne);
            for (int64_t e = 0; rc == DP_OK && e < ne; e++) {
                pp[p][e] = s->m0.params[p].data[e] + c->phi * z[p][e];
                pm[p][e] = s->m0.params[p].data[e] - c->phi * z[p][e];
            }
        }
    }
    /* every (lambda, label): keep the pair of largest finite value, stop at the target */
    for (double lambda = 1.0; rc == DP_OK && best < target && lambda <= 0x1p30; lambda *= 2.0) {
        for (int k = 0; k < in; k++) x[k] = lambda * x0[k];
        for (int32_t cl = 0; rc == DP_OK && cl < c->mc.classes; cl++) {
            *y = cl;
            double v, sg = 1.0;
            if (c->algo == AUDIT_ALGO_DPSGD) {
                double l;
                rc = flat_grad(g, &l, &s->m0, &one, 0);
                v = norm2(g, s->m0.total);
            } else {
                double lp, lm;
                rc = ref_example_loss(&lp, &s->m0, pp, &one, 0);
                if (rc == DP_OK) rc = ref_example_loss(&lm, &s->m0, pm, &one, 0);
                v = lp - lm;
                sg = v < 0 ? -1.0 : 1.0;
                v = fabs(v);
            }
            if (rc != DP_OK || !isfinite(v) || v <= best) continue;
            best = v;
            best_lambda = lambda;
            best_y = cl;
            best_sign = sg;
            if (c->algo == AUDIT_ALGO_DPSGD)
                for (int64_t k = 0; k < s->m0.total; k++) s->dir[k] = g[k];
        }
    }
    s->sign = best_sign;
    if (rc == DP_OK && !(best > 0))
        rc = dp_error(DP_ERR_INVALID,
                      "--canary input: the model cannot represent the canary (its %s is %g at theta_0 for every input "
                      "scale up to 2^30)",
                      c->algo == AUDIT_ALGO_DPSGD ? "gradient norm" : "loss difference", best);
    if (rc == DP_OK && c->algo == AUDIT_ALGO_DPSGD)
        for (int64_t k = 0; k < s->m0.total; k++) s->dir[k] /= best;
    for (int k = 0; k < in; k++) x[k] = best_lambda * x0[k]; /* the accepted canary */
    *y = best_y;
    s->canary_norm = best;
    if (z)
        for (int p = 0; p < s->m0.nparams; p++) { dp_free(z[p]); dp_free(pp[p]); dp_free(pm[p]); }
    dp_free(z); dp_free(pp); dp_free(pm); dp_free(x0); dp_free(g);
    return rc;
}

dp_status audit_setup_make(audit_setup *s, const audit_config *c) {
    memset(s, 0, sizeof *s);
    s->cfg = *c;
    s->sign = 1.0;
    DP_TRY(audit_config_check(c));
    dp_status rc = ref_model_init(&s->m0, &c->mc, c->seed);
    if (rc == DP_OK) rc = ref_dataset_generate(&s->d0, &c->mc, c->n, c->seed);
    if (rc != DP_OK) { audit_setup_free(s); return rc; }
    int64_t total = s->m0.total;
    s->dir = dp_calloc((size_t)total, sizeof *s->dir);
    if (!s->dir) { audit_setup_free(s); return DP_ERR_NOMEM; }
    if (c->canary == AUDIT_CANARY_INPUT) {
        double *x = dp_malloc((size_t)c->mc.in * sizeof *x);
        int32_t y = 0;
        if (!x) { audit_setup_free(s); return DP_ERR_NOMEM; }
        rc = input_canary(s, x, &y);
        if (rc == DP_OK) rc = dataset_plus(&s->d1, &s->d0, x, y);
        dp_free(x);
    } else {
        s->canary_grad = dp_calloc((size_t)total, sizeof *s->canary_grad);
        rc = s->canary_grad ? dataset_plus(&s->d1, &s->d0, NULL, 0) : DP_ERR_NOMEM;
        if (rc == DP_OK && c->canary == AUDIT_CANARY_DIRAC) {
            int p = c->canary_param < 0 ? s->m0.nparams - 1 : c->canary_param;
            if (p >= s->m0.nparams || c->canary_elem < 0 || c->canary_elem >= s->m0.params[p].numel)
                rc = dp_error(DP_ERR_INVALID,
                              "--canary-param/--canary-elem: the model has no element %lld in parameter %d (the "
                              "canary cannot be represented)",
                              (long long)c->canary_elem, p);
            int64_t off = 0;
            for (int k = 0; k < p && rc == DP_OK; k++) off += s->m0.params[k].numel;
            if (rc == DP_OK) {
                s->dir[off + c->canary_elem] = 1.0;
                s->canary_grad[off + c->canary_elem] = c->canary_scale * c->clip;
            }
        } else if (rc == DP_OK) { /* anti: against the sum of D's raw gradients */
            double *g = dp_malloc((size_t)total * sizeof *g), l;
            if (!g) rc = DP_ERR_NOMEM;
            for (int64_t i = 0; rc == DP_OK && i < s->d0.n; i++) {
                rc = flat_grad(g, &l, &s->m0, &s->d0, i);
                for (int64_t k = 0; rc == DP_OK && k < total; k++) s->dir[k] -= g[k];
            }
            double nS = rc == DP_OK ? norm2(s->dir, total) : 0;
            if (rc == DP_OK && !(nS > 0 && isfinite(nS)))
                rc = dp_error(DP_ERR_INVALID, "--canary anti: the sum of D's gradients is %g (no direction)", nS);
            for (int64_t k = 0; rc == DP_OK && k < total; k++) {
                s->dir[k] /= nS; /* -S/||S|| */
                s->canary_grad[k] = (nS + c->canary_scale * c->clip) * s->dir[k];
            }
            dp_free(g);
        }
        if (rc == DP_OK) s->canary_norm = norm2(s->canary_grad, total);
    }
    if (rc == DP_OK) {
        s->shift = s->canary_norm < c->clip ? s->canary_norm : c->clip;
        acct_schedule sch = {.n = 1};
        sch.seg[0] = (acct_segment){ACCT_GAUSSIAN, c->q, c->sigma, c->steps};
        rc = acct_epsilon_by(&s->eps_claim, &sch, ACCT_PLD, c->delta, NULL, 0);
        s->mu_claim = c->q == 1.0 ? sqrt((double)c->steps) / c->sigma : NAN;
    }
    if (rc != DP_OK) audit_setup_free(s);
    return rc;
}

void audit_setup_free(audit_setup *s) {
    ref_model_free(&s->m0);
    ref_dataset_free(&s->d0);
    ref_dataset_free(&s->d1);
    dp_free(s->dir);
    dp_free(s->canary_grad);
    memset(s, 0, sizeof *s);
}

dp_status audit_trial_key(dp_noise_key *out, dp_noise_key audit_key, int side, int64_t i) {
    dp_stream st;
    DP_TRY(dp_stream_secret(&st, audit_key, DP_PURPOSE_AUDIT_NOISE, (uint32_t)side + 1, 0));
    out->k = dp_rng_u64(&st, (uint64_t)i);
    return DP_OK;
}

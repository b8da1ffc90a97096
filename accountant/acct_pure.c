/* accountant/acct_pure.c — schedules, pure DP (basic, advanced, exact randomized-
 * response composition), the analytic Gaussian / GDP, and the discrete-PLD
 * epsilon/delta evaluation shared with the PLD accountant. docs/accounting.md. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "accountant/acct_internal.h"
#include "common/cli.h"

const char *acct_mech_name(acct_mech m) {
    return m == ACCT_GAUSSIAN ? "gaussian" : m == ACCT_LAPLACE ? "laplace" : m == ACCT_PURE ? "pure" : "?";
}
const char *acct_adjacency_name(acct_adjacency a) {
    return a == ACCT_REPLACE_ONE ? "replace-one (sensitivity doubled)" : "add/remove one (Poisson sampling)";
}

dp_status acct_schedule_validate(const acct_schedule *s) {
    if (s->n < 1 || s->n > ACCT_MAX_SEGMENTS)
        return dp_error(DP_ERR_INVALID, "schedule must have 1..%d segments (got %d)", ACCT_MAX_SEGMENTS, s->n);
    for (int i = 0; i < s->n; i++) {
        const acct_segment *g = &s->seg[i];
        const char *pn = g->mech == ACCT_GAUSSIAN ? "sigma" : g->mech == ACCT_LAPLACE ? "scale" : "epsilon0";
        if (!(g->q > 0.0 && g->q <= 1.0))
            return dp_error(DP_ERR_INVALID, "segment %d: q must be in (0, 1] (got %g)", i + 1, g->q);
        if (!(g->param > 0.0) || !isfinite(g->param))
            return dp_error(DP_ERR_INVALID, "segment %d: %s must be > 0 and finite (got %g)", i + 1, pn, g->param);
        if (g->steps < 1) return dp_error(DP_ERR_INVALID, "segment %d: steps must be >= 1 (got %lld)", i + 1,
                                          (long long)g->steps);
        if (g->steps > (int64_t)1e12)
            return dp_error(DP_ERR_INVALID, "segment %d: steps must be <= 1e12 (got %lld)", i + 1,
                            (long long)g->steps);
    }
    return DP_OK;
}

void acct_schedule_adjacency(acct_schedule *out, const acct_schedule *in, acct_adjacency adj) {
    *out = *in;
    if (adj != ACCT_REPLACE_ONE) return;
    for (int i = 0; i < out->n; i++) {
        if (out->seg[i].mech == ACCT_PURE) out->seg[i].param *= 2.0; /* eps0-DP per record -> 2 eps0 */
        else out->seg[i].param *= 0.5;                               /* sensitivity 2 */
    }
}

static dp_status json_num(double *out, json_t *o, const char *key, int row, const char *path) {
    json_t *v = json_object_get(o, key);
    if (!v) return dp_error(DP_ERR_FORMAT, "%s: segment %d: missing field '%s'", path, row, key);
    if (!json_is_number(v)) return dp_error(DP_ERR_FORMAT, "%s: segment %d: field '%s' is not a number", path, row, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return dp_error(DP_ERR_FORMAT, "%s: segment %d: field '%s' is not finite", path, row, key);
    return DP_OK;
}

dp_status acct_schedule_read_json(acct_schedule *out, const char *path) {
    json_error_t err;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!root) return dp_error(DP_ERR_FORMAT, "%s: line %d: %s", path, err.line, err.text);
    dp_status st = DP_OK;
    if (!json_is_array(root)) { st = dp_error(DP_ERR_FORMAT, "%s: expected a JSON array of segments", path); goto done; }
    size_t n = json_array_size(root);
    if (n < 1 || n > ACCT_MAX_SEGMENTS) {
        st = dp_error(DP_ERR_FORMAT, "%s: 1..%d segments expected (got %zu)", path, ACCT_MAX_SEGMENTS, n);
        goto done;
    }
    out->n = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(root, i);
        int row = (int)i + 1;
        acct_segment *g = &out->seg[i];
        if (!json_is_object(o)) { st = dp_error(DP_ERR_FORMAT, "%s: segment %d is not an object", path, row); goto done; }
        json_t *m = json_object_get(o, "mechanism");
        const char *ms = json_is_string(m) ? json_string_value(m) : NULL;
        if (!ms) { st = dp_error(DP_ERR_FORMAT, "%s: segment %d: missing string field 'mechanism'", path, row); goto done; }
        const char *key;
        if (strcmp(ms, "gaussian") == 0) { g->mech = ACCT_GAUSSIAN; key = "sigma"; }
        else if (strcmp(ms, "laplace") == 0) { g->mech = ACCT_LAPLACE; key = "scale"; }
        else if (strcmp(ms, "pure") == 0) { g->mech = ACCT_PURE; key = "epsilon0"; }
        else { st = dp_error(DP_ERR_FORMAT, "%s: segment %d: unknown mechanism '%s'", path, row, ms); goto done; }
        double steps;
        if ((st = json_num(&g->q, o, "q", row, path)) != DP_OK) goto done;
        if ((st = json_num(&g->param, o, key, row, path)) != DP_OK) goto done;
        if ((st = json_num(&steps, o, "steps", row, path)) != DP_OK) goto done;
        if (steps != floor(steps) || steps < 1 || steps > 1e12) {
            st = dp_error(DP_ERR_INVALID, "%s: segment %d: steps must be an integer in [1, 1e12] (got %g)", path, row,
                          steps);
            goto done;
        }
        g->steps = (int64_t)steps;
    }
    st = acct_schedule_validate(out);
    if (st != DP_OK) dp_error_context(st, "%s", path);
done:
    json_decref(root);
    return st;
}

/* ---------------------------------------------------------------- pure DP ---- */
dp_status acct_pure_step_eps(double *eps, const acct_segment *seg) {
    double e;
    if (seg->mech == ACCT_LAPLACE) e = 1.0 / seg->param;
    else if (seg->mech == ACCT_PURE) e = seg->param;
    else return dp_error(DP_ERR_NOT_SUPPORTED, "the Gaussian mechanism has no pure-DP guarantee");
    /* amplification by Poisson subsampling: log(1 + q (e^eps - 1)) */
    if (seg->q < 1.0) e = e > 700 ? e + log(seg->q) + log1p((1.0 - seg->q) * exp(-e) / seg->q) : log1p(seg->q * expm1(e));
    *eps = e;
    return DP_OK;
}

dp_status acct_pure_basic(double *eps, const acct_schedule *s) {
    double t = 0;
    for (int i = 0; i < s->n; i++) {
        double e;
        DP_TRY(acct_pure_step_eps(&e, &s->seg[i]));
        t += e * (double)s->seg[i].steps;
    }
    *eps = t;
    return DP_OK;
}

dp_status acct_pure_advanced(double *eps, const acct_schedule *s, double delta) {
    /* Dwork-Rothblum-Vadhan 2010 (heterogeneous form): sqrt(2 log(1/delta) sum e_i^2) + sum e_i (e^{e_i} - 1);
     * the result is min(advanced, basic). */
    double s2 = 0, lin = 0, basic;
    for (int i = 0; i < s->n; i++) {
        double e;
        DP_TRY(acct_pure_step_eps(&e, &s->seg[i]));
        double T = (double)s->seg[i].steps;
        s2 += T * e * e;
        lin += T * e * expm1(e);
    }
    DP_TRY(acct_pure_basic(&basic, s));
    double adv = sqrt(2.0 * log(1.0 / delta) * s2) + lin;
    *eps = adv < basic ? adv : basic;
    return DP_OK;
}

/* T-fold randomized response: loss (2k - T) eps0 with k ~ Binomial(T, p), p = e^eps0/(1+e^eps0).
 * Masses in log space from lgamma; returned as doubles (those below 1e-308 are negligible). */
static dp_status rr_pmf(double **p_out, double eps0, int64_t T) {
    if (T > 100000000) return dp_error(DP_ERR_INVALID, "exact RR composition supports at most 1e8 steps (got %lld)",
                                       (long long)T);
    double *p = dp_malloc((size_t)(T + 1) * sizeof *p);
    if (!p) return DP_ERR_NOMEM;
    double lp = -log1p(exp(-eps0)), l1p = -eps0 - log1p(exp(-eps0)), lgT = lgamma((double)T + 1.0);
    for (int64_t k = 0; k <= T; k++)
        p[k] = exp(lgT - lgamma((double)k + 1.0) - lgamma((double)(T - k) + 1.0) + (double)k * lp + (double)(T - k) * l1p);
    *p_out = p;
    return DP_OK;
}

dp_status acct_rr_delta(double *delta, double eps0, int64_t T, double eps) {
    double *p = NULL;
    DP_TRY(rr_pmf(&p, eps0, T));
    *delta = acct_pmf_delta(p, (size_t)T + 1, -(double)T * eps0, 2.0 * eps0, 0.0, eps);
    free(p);
    return DP_OK;
}

dp_status acct_rr_epsilon(double *eps, double eps0, int64_t T, double delta) {
    double *p = NULL;
    DP_TRY(rr_pmf(&p, eps0, T));
    *eps = acct_pmf_epsilon(p, (size_t)T + 1, -(double)T * eps0, 2.0 * eps0, 0.0, delta);
    double basic = (double)T * eps0;
    if (*eps > basic) *eps = basic; /* cannot exceed basic composition; guards rounding at the top atom */
    free(p);
    return DP_OK;
}

dp_status acct_pure_exact(double *eps, const acct_schedule *s, double delta) {
    double e0 = 0;
    int64_t T = 0;
    for (int i = 0; i < s->n; i++) {
        double e;
        DP_TRY(acct_pure_step_eps(&e, &s->seg[i]));
        if (i > 0 && e != e0)
            return dp_error(DP_ERR_NOT_SUPPORTED, "exact pure-DP composition needs one per-step epsilon "
                                                  "(segments 1 and %d differ); use --accountant pld", i + 1);
        e0 = e;
        T += s->seg[i].steps;
    }
    return acct_rr_epsilon(eps, e0, T, delta);
}

/* --------------------------------------------------- discrete PLD helpers ---- */
double acct_pmf_delta(const double *p, size_t n, double l0, double h, double p_inf, double eps) {
    double d = p_inf;
    for (size_t k = n; k-- > 0;) {
        double l = l0 + (double)k * h;
        if (l <= eps) break;
        if (p[k] > 0) d += p[k] * -expm1(eps - l);
    }
    return d > 1.0 ? 1.0 : d;
}

double acct_pmf_epsilon(const double *p, size_t n, double l0, double h, double p_inf, double delta) {
    if (p_inf > delta) return INFINITY;
    /* s1 = sum_{k>=j} p_k; S2 = sum_{k>=j} p_k e^{-l_k} kept as e^{-ref} * s2 (rescaled, no overflow) */
    double s1 = 0.0, s2 = 0.0, ref = NAN;
    for (size_t j = n; j-- > 0;) {
        double l = l0 + (double)j * h;
        if (p[j] > 0) {
            s1 += p[j];
            if (isnan(ref)) ref = l;
            double ex = ref - l;
            if (ex > 600.0) { s2 *= exp(-ex); ref = l; ex = 0.0; }
            s2 += p[j] * exp(ex);
        }
        /* on (l_{j-1}, l_j] the losses above eps are exactly {k >= j}:
         * delta(eps) = p_inf + s1 - e^{eps} S2 */
        double lo = j == 0 ? -INFINITY : l - h;
        double x = lo > 0.0 ? lo : 0.0;
        double d = s2 > 0 ? p_inf + s1 - s2 * exp(x - ref) : p_inf;
        if (d > delta) {
            double e = log(p_inf + s1 - delta) - (log(s2) - ref);
            return e < x ? x : e;
        }
        if (lo <= 0.0) return 0.0;
    }
    return 0.0;
}

/* ---------------------------------------------------------------- GDP ---- */
double acct_log_ndtr(double x) {
    if (x > -5.0) return log(0.5 * erfc(-x / M_SQRT2));
    /* log(0.5 erfc(t)), t = -x/sqrt2 > 3.5: erfc(t) = e^{-t^2} erfcx(t); use continued series */
    double t = -x / M_SQRT2;
    if (t < 25.0) return log(0.5) + log(erfc(t));
    double it2 = 1.0 / (t * t);
    double s = 1.0 - 0.5 * it2 + 0.75 * it2 * it2 - 1.875 * it2 * it2 * it2 + 6.5625 * it2 * it2 * it2 * it2;
    return log(0.5) - t * t - log(t) - 0.5 * log(M_PI) + log(s);
}

double acct_gdp_delta(double mu, double eps) {
    /* Balle-Wang 2018 / Dong-Roth-Su: delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) */
    double a = exp(acct_log_ndtr(-eps / mu + mu / 2.0));
    double b = exp(eps + acct_log_ndtr(-eps / mu - mu / 2.0));
    double d = a - b;
    return d < 0 ? 0 : d;
}

double acct_gdp_epsilon(double mu, double delta) {
    if (acct_gdp_delta(mu, 0.0) <= delta) return 0.0;
    double lo = 0.0, hi = 1.0;
    while (acct_gdp_delta(mu, hi) > delta && hi < 1e15) hi *= 2.0;
    if (acct_gdp_delta(mu, hi) > delta) return INFINITY; /* beyond 1e15 */
    for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; it++) {
        double m = 0.5 * (lo + hi);
        if (acct_gdp_delta(mu, m) > delta) lo = m; else hi = m;
    }
    return hi;
}

dp_status acct_gdp_mu(double *mu, const acct_schedule *s) {
    double m2 = 0;
    for (int i = 0; i < s->n; i++) {
        const acct_segment *g = &s->seg[i];
        if (g->mech != ACCT_GAUSSIAN) return dp_error(DP_ERR_NOT_SUPPORTED, "GDP supports the Gaussian mechanism only");
        double T = (double)g->steps, sg = g->param;
        if (g->q >= 1.0) m2 += T / (sg * sg);                         /* exact: mu = sqrt(T)/sigma */
        else m2 += T * g->q * g->q * expm1(1.0 / (sg * sg));          /* CLT (Bu et al. 2020) */
    }
    *mu = sqrt(m2);
    return DP_OK;
}

/* accountant/acct_pure.c — schedules, pure DP (basic, advanced, exact randomized-
 * response composition), the analytic Gaussian / GDP, and the discrete-PLD
 * epsilon/delta evaluation shared with the PLD accountant. docs/accounting.md. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "common/fsutil.h"
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
    char *img = NULL;
    size_t ilen = 0;
    DP_TRY(dp_read_file_max(&img, &ilen, "--schedule", path, DP_MAX_TEXT_INPUT));
    dp_status nst = dp_json_numbers_check(img, ilen, path);
    json_t *root = nst == DP_OK ? json_loadb(img, ilen, JSON_REJECT_DUPLICATES, &err) : NULL;
    dp_free(img);
    if (nst != DP_OK) return nst;
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
        {   /* strict schema: exactly mechanism, q, steps and the mechanism's own parameter */
            const char *k;
            json_t *v;
            json_object_foreach(o, k, v) {
                if (strcmp(k, "mechanism") && strcmp(k, "q") && strcmp(k, "steps") && strcmp(k, key)) {
                    st = dp_error(DP_ERR_FORMAT, "%s: segment %d: field '%s' is not allowed for mechanism %s (expected "
                                  "mechanism, q, %s, steps)", path, row, k, ms, key);
                    goto done;
                }
            }
        }
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

/* T-fold randomized response: loss l_k = (2k - T) eps0 with k ~ Binomial(T, p), p = e^eps0/(1+e^eps0)
 * (docs/accounting.md §5). Masses relative to the mode m = floor((T+1) p), by the recurrence
 *   log(p_{k+1}/p_k) = log1p((T - 2k - 1)/(k + 1)) + eps0,
 * walking outward from the mode; the log1p terms are summed with Neumaier compensation and
 * j eps0 is added once, so log w_k = log(p_k / p_m) carries an absolute error of about
 * 2u (sum |terms| + |j| eps0) ~ 2u (|log w_k| + |j| eps0): a relative error of ~1e-12 at most
 * for T <= 1e8 (no lgamma(T) ~ 1e9 whose ulp is 2e-7). The window stops where log w < -760
 * (the mass beyond is below (T+1) e^-760, zero in double). p_k = w_k / Z, Z = sum w (compensated). */
typedef struct {
    double *p;
    int64_t k0;
    size_t n;
} rrwin;

static dp_status rr_pmf(rrwin *o, double eps0, int64_t T) {
    if (T > 100000000) return dp_error(DP_ERR_INVALID, "exact RR composition supports at most 1e8 steps (got %lld)",
                                       (long long)T);
    double pr = 1.0 / (1.0 + exp(-eps0));
    int64_t m = (int64_t)floor(((double)T + 1.0) * pr);
    if (m > T) m = T;
    /* upward and downward walks: log w */
    size_t cap = 1024, nu = 0, nd = 0;
    double *up = dp_malloc(cap * sizeof *up), *dn = dp_malloc(cap * sizeof *dn);
    size_t capd = cap;
    if (!up || !dn) { dp_free(up); dp_free(dn); return DP_ERR_NOMEM; }
    double sum = 0, c = 0;
    for (int64_t k = m; k < T; k++) { /* w_{k+1} from w_k */
        double t = log1p((double)(T - 2 * k - 1) / (double)(k + 1));
        double y = sum + t;
        c += fabs(sum) >= fabs(t) ? (sum - y) + t : (t - y) + sum;
        sum = y;
        double lw = sum + c + (double)(k + 1 - m) * eps0;
        if (lw < -760.0) break;
        if (nu == cap) { double *q = dp_realloc(up, 2 * cap * sizeof *q); if (!q) { dp_free(up); dp_free(dn); return DP_ERR_NOMEM; } up = q; cap *= 2; }
        up[nu++] = lw;
    }
    sum = 0; c = 0;
    for (int64_t k = m; k > 0; k--) { /* w_{k-1} from w_k: log(p_{k-1}/p_k) = -log1p((T - 2k + 1)/k) - eps0 */
        double t = -log1p((double)(T - 2 * k + 1) / (double)k);
        double y = sum + t;
        c += fabs(sum) >= fabs(t) ? (sum - y) + t : (t - y) + sum;
        sum = y;
        double lw = sum + c - (double)(m - k + 1) * eps0;
        if (lw < -760.0) break;
        if (nd == capd) { double *q = dp_realloc(dn, 2 * capd * sizeof *q); if (!q) { dp_free(up); dp_free(dn); return DP_ERR_NOMEM; } dn = q; capd *= 2; }
        dn[nd++] = lw;
    }
    size_t n = nd + 1 + nu;
    double *p = dp_malloc(n * sizeof *p);
    if (!p) { dp_free(up); dp_free(dn); return DP_ERR_NOMEM; }
    for (size_t i = 0; i < nd; i++) p[nd - 1 - i] = exp(dn[i]);
    p[nd] = 1.0;
    for (size_t i = 0; i < nu; i++) p[nd + 1 + i] = exp(up[i]);
    dp_free(up); dp_free(dn);
    double z = 0, cz = 0;
    for (size_t i = 0; i < n; i++) {
        double y = z + p[i];
        cz += z >= p[i] ? (z - y) + p[i] : (p[i] - y) + z;
        z = y;
    }
    z += cz;
    for (size_t i = 0; i < n; i++) p[i] /= z;
    o->p = p;
    o->k0 = m - (int64_t)nd;
    o->n = n;
    return DP_OK;
}

/* delta(eps) = sum_{l_k > eps} p_k (1 - e^{eps - l_k}), compensated, from the top */
static double rr_delta_win(const rrwin *w, double eps0, int64_t T, double eps) {
    double d = 0, c = 0;
    for (size_t i = w->n; i-- > 0;) {
        double l = (double)(2 * (w->k0 + (int64_t)i) - T) * eps0;
        if (l <= eps) break;
        double t = w->p[i] * -expm1(eps - l), y = d + t;
        c += d >= t ? (d - y) + t : (t - y) + d;
        d = y;
    }
    d += c;
    return d > 1 ? 1 : d;
}

/* eps0 > 700: e^-eps0 underflows, the losses (2k - T) eps0 may overflow; all the mass but at most
 * T e^-eps0 (the atoms below the top, each loss <= (T - 2) eps0) sits on the top atom T eps0. */
#define RR_HUGE_EPS0 700.0

dp_status acct_rr_delta(double *delta, double eps0, int64_t T, double eps) {
    if (eps0 > RR_HUGE_EPS0) {
        /* upper bound: the top atom's contribution plus all the other mass */
        double d = -expm1(eps - (double)T * eps0);
        d = (d > 0 ? d : 0) + (double)T * exp(-eps0);
        *delta = d > 1 ? 1 : d;
        return DP_OK;
    }
    rrwin w;
    DP_TRY(rr_pmf(&w, eps0, T));
    *delta = rr_delta_win(&w, eps0, T, eps);
    dp_free(w.p);
    return DP_OK;
}

dp_status acct_rr_epsilon(double *eps, double eps0, int64_t T, double delta) {
    double basic = (double)T * eps0;
    if (eps0 > RR_HUGE_EPS0) {
        /* the top atom holds mass >= 1 - T e^-eps0 > delta: epsilon is the top loss T eps0 exactly
         * (basic composition), +inf when it overflows */
        *eps = basic;
        return DP_OK;
    }
    rrwin w;
    DP_TRY(rr_pmf(&w, eps0, T));
    /* delta(eps) is decreasing and convex; on (l_{j-1}, l_j] it is s1 - e^eps S2 with the sums over
     * k >= j (compensated); find the first interval from the top whose left end exceeds delta */
    double s1 = 0, c1 = 0, s2 = 0, c2 = 0, ref = NAN, res = 0;
    int found = 0;
    for (size_t i = w.n; i-- > 0 && !found;) {
        double l = (double)(2 * (w.k0 + (int64_t)i) - T) * eps0;
        if (isnan(ref)) ref = l;
        double t = w.p[i], y = s1 + t;
        c1 += s1 >= t ? (s1 - y) + t : (t - y) + s1;
        s1 = y;
        t = w.p[i] * exp(ref - l); /* ref - l <= 0 .. grows: rescale when large */
        if (ref - l > 600.0) { s2 *= exp(l - ref); c2 *= exp(l - ref); ref = l; t = w.p[i]; }
        y = s2 + t;
        c2 += s2 >= t ? (s2 - y) + t : (t - y) + s2;
        s2 = y;
        double lo = i == 0 ? -INFINITY : l - 2.0 * eps0;
        double x = lo > 0.0 ? lo : 0.0;
        double S1 = s1 + c1, S2 = s2 + c2;
        double d = S1 - S2 * exp(x - ref);
        if (d > delta) {
            double e = log(S1 - delta) - (log(S2) - ref);
            res = e < x ? x : e;
            found = 1;
        } else if (lo <= 0.0) found = 1;
    }
    dp_free(w.p);
    if (!found || isnan(res)) res = basic; /* no interval decided (rounding): basic composition is an upper bound */
    *eps = res > basic ? basic : res; /* cannot exceed basic composition; guards rounding at the top atom */
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

dp_status acct_sampler_delta(double *total, double *step_max, const acct_schedule *s) {
    double t = 0, mx = 0;
    int any = 0;
    for (int i = 0; i < s->n; i++) {
        const acct_segment *g = &s->seg[i];
        double d;
        if (g->mech == ACCT_LAPLACE) d = 0.5 * exp(-(ACCT_LAPLACE_SAMPLER_BOUND - 1.0 / g->param));
        else if (g->mech == ACCT_GAUSSIAN) d = 0.5 * erfc((ACCT_GAUSS_SAMPLER_BOUND - 1.0 / g->param) / M_SQRT2);
        else continue;
        any = 1;
        d *= g->q;
        if (d > g->q) d = g->q;
        if (d > mx) mx = d;
        t += d * (double)g->steps;
    }
    if (!any) return dp_error(DP_ERR_NOT_SUPPORTED, "no Gaussian or Laplace segment (pure-DP mechanisms are abstract)");
    *total = t > 1 ? 1 : t;
    *step_max = mx;
    return DP_OK;
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

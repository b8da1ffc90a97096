/* accountant/acct_rdp.c — Renyi DP (Mironov 2017; Mironov, Talwar, Zhang 2019)
 * and the RDP -> (epsilon, delta) conversions. Definitions: docs/accounting.md §RDP. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/cli.h"

/* log(e^a + e^b) */
static double lae(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

/* log(erfc(x)), accurate in the far right tail where erfc underflows. */
static double log_erfc(double x) {
    if (x < 20.0) return log(erfc(x));
    double x2 = x * x, ix2 = 1.0 / x2;
    /* asymptotic series erfc(x) = e^{-x^2}/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6) + 105/(16x^8)) */
    double s = 1.0 - 0.5 * ix2 + 0.75 * ix2 * ix2 - 1.875 * ix2 * ix2 * ix2 + 6.5625 * ix2 * ix2 * ix2 * ix2;
    return -x2 - log(x) - 0.5 * log(M_PI) + log(s);
}

/* Integer alpha >= 2: A = sum_{i=0}^{alpha} C(alpha,i) (1-q)^{alpha-i} q^i exp((i^2-i)/(2 sigma^2)),
 * all terms positive, summed in log space. */
static double log_a_int(double q, double sigma, int64_t alpha) {
    double lq = log(q), l1q = log1p(-q), acc = -INFINITY, lbin = 0.0; /* lbin = log C(alpha, i) */
    for (int64_t i = 0; i <= alpha; i++) {
        if (i > 0) lbin += log((double)(alpha - i + 1)) - log((double)i);
        double di = (double)i;
        double t = lbin + di * lq + (double)(alpha - i) * l1q + (di * di - di) / (2.0 * sigma * sigma);
        acc = lae(acc, t);
    }
    return acc;
}

/* Fractional alpha > 1: the two-sided signed series of Mironov-Talwar-Zhang 2019 §3.3.
 * Positive and negative terms are accumulated separately in log space and subtracted
 * once at the end (never |binom|: that over-estimates). Returns NAN if it does not
 * converge in 400 terms (small sigma: the terms then decay only like |binom(alpha, i)|)
 * or cancels catastrophically; the caller then integrates numerically (log_a_quad). */
static double log_a_frac(double q, double sigma, double alpha) {
    double lq = log(q), l1q = log1p(-q);
    double z0 = sigma * sigma * (log(1.0 / q - 1.0)) + 0.5;
    double pos = -INFINITY, neg = -INFINITY, lbin = 0.0;
    int sign = 1;
    for (int i = 0; i < 400; i++) {
        if (i > 0) {
            double f = alpha - (double)i + 1.0; /* binom(a,i) = binom(a,i-1) (a-i+1)/i */
            if (f < 0) sign = -sign;
            lbin += log(fabs(f)) - log((double)i);
        }
        double di = (double)i, j = alpha - di;
        double lt0 = lbin + di * lq + j * l1q, lt1 = lbin + j * lq + di * l1q;
        double le0 = log(0.5) + log_erfc((di - z0) / (M_SQRT2 * sigma));
        double le1 = log(0.5) + log_erfc((z0 - j) / (M_SQRT2 * sigma));
        double ls0 = lt0 + (di * di - di) / (2.0 * sigma * sigma) + le0;
        double ls1 = lt1 + (j * j - j) / (2.0 * sigma * sigma) + le1;
        double ls = lae(ls0, ls1);
        if (sign > 0) pos = lae(pos, ls); else neg = lae(neg, ls);
        /* past alpha the terms alternate; stop once they are negligible (e^-44 ~ 1e-19 relative) */
        if (di > alpha + 1.0 && ls < pos - 44.0) {
            if (neg == -INFINITY) return pos;
            if (neg >= pos) return NAN;
            return pos + log1p(-exp(neg - pos));
        }
    }
    return NAN;
}

/* g(x) = (1+x)^alpha - 1 - alpha x >= 0 (x > -1), in log space */
static double log_g(double x, double alpha) {
    if (fabs(x) < 1e-4) { /* Taylor: a(a-1)/2 x^2 (1 + (a-2)/3 x + (a-2)(a-3)/12 x^2) */
        double c = alpha * (alpha - 1.0) / 2.0 * x * x;
        double t = 1.0 + (alpha - 2.0) / 3.0 * x + (alpha - 2.0) * (alpha - 3.0) / 12.0 * x * x;
        return c > 0 ? log(c) + log(t) : -INFINITY;
    }
    double la = alpha * log1p(x);
    if (la > 30.0) return la + log1p(-(1.0 + alpha * x) * exp(-la));
    double v = expm1(la) - alpha * x;
    return v > 0 ? log(v) : -INFINITY;
}

/* Fractional alpha by quadrature of the definition: A = E_{z~N(0,s^2)} (1 + q (r(z) - 1))^alpha,
 * r(z) = e^{(2z-1)/(2 s^2)}; since E r = 1, A - 1 = E g(q (r - 1)) with g >= 0 and smooth, so the
 * trapezoid rule (step s/20 over [-40 s, alpha + 40 s + 1]) converges geometrically and A - 1
 * keeps full relative precision. Log space throughout. */
static double log_a_quad(double q, double s, double alpha) {
    double hz = s / 20.0, z0 = -40.0 * s, z1 = alpha + 40.0 * s + 1.0;
    size_t n = (size_t)((z1 - z0) / hz) + 1;
    if (n > 4000000) return NAN;
    double m = -INFINITY, acc = 0.0; /* running log-sum-exp */
    for (size_t k = 0; k < n; k++) {
        double z = z0 + (double)k * hz;
        double le = (2.0 * z - 1.0) / (2.0 * s * s); /* log r */
        double x = le < 700.0 ? q * expm1(le) : INFINITY;
        double lg;
        if (isinf(x)) lg = alpha * (log(q) + le); /* (q r)^alpha dominates */
        else lg = log_g(x, alpha);
        double lw = -z * z / (2.0 * s * s) - log(s) - 0.5 * log(2.0 * M_PI) + lg + log(hz);
        if (lw == -INFINITY) continue;
        if (lw > m) { acc = acc * exp(m - lw) + 1.0; m = lw; }
        else acc += exp(lw - m);
    }
    double lam1 = m + log(acc); /* log(A - 1) */
    if (m == -INFINITY) return 0.0;
    return lam1 > 0 ? lam1 + log1p(exp(-lam1)) : log1p(exp(lam1));
}

double acct_rdp_sgm_log_a(double q, double sigma, double alpha) {
    if (q >= 1.0) return (alpha - 1.0) * alpha / (2.0 * sigma * sigma);
    if (alpha == floor(alpha) && alpha <= 1e6) return log_a_int(q, sigma, (int64_t)alpha);
    double v = log_a_frac(q, sigma, alpha);
    if (isnan(v)) v = log_a_quad(q, sigma, alpha);
    return v;
}

double acct_rdp_laplace(double b, double alpha) {
    /* Mironov 2017 Prop. 6, sensitivity 1, scale b */
    if (alpha == 1.0) return 1.0 / b + exp(-1.0 / b) - 1.0;
    double t1 = log(alpha / (2.0 * alpha - 1.0)) + (alpha - 1.0) / b;
    double t2 = log((alpha - 1.0) / (2.0 * alpha - 1.0)) - alpha / b;
    return lae(t1, t2) / (alpha - 1.0);
}

double acct_rdp_rr(double eps0, double alpha) {
    /* randomized response with p = e^eps0/(1+e^eps0): the dominating pair of any eps0-DP mechanism */
    double c = log1p(exp(-eps0));
    return (-c + lae((alpha - 1.0) * eps0, -alpha * eps0)) / (alpha - 1.0);
}

dp_status acct_rdp_step(double *rdp, const acct_segment *seg, double alpha) {
    if (!(alpha > 1.0)) return dp_error(DP_ERR_INVALID, "RDP order must be > 1 (got %g)", alpha);
    switch (seg->mech) {
    case ACCT_GAUSSIAN: {
        double la = acct_rdp_sgm_log_a(seg->q, seg->param, alpha);
        if (isnan(la))
            return dp_error(DP_ERR_NUMERIC, "RDP series for q=%g sigma=%g did not converge at order %g", seg->q,
                            seg->param, alpha);
        *rdp = la / (alpha - 1.0);
        if (*rdp < 0) *rdp = 0; /* log A >= 0 mathematically; only rounding can make it negative */
        return DP_OK;
    }
    case ACCT_LAPLACE:
        if (seg->q < 1.0)
            return dp_error(DP_ERR_NOT_SUPPORTED, "RDP of the Poisson-subsampled Laplace mechanism is not supported "
                                                  "(use --accountant pld or pure)");
        *rdp = acct_rdp_laplace(seg->param, alpha);
        return DP_OK;
    case ACCT_PURE: {
        double e0;
        DP_TRY(acct_pure_step_eps(&e0, seg));
        *rdp = acct_rdp_rr(e0, alpha);
        return DP_OK;
    }
    }
    return dp_error(DP_ERR_INTERNAL, "unknown mechanism");
}

dp_status acct_rdp_schedule(double *rdp, const acct_schedule *s, const double *orders, size_t n) {
    for (size_t k = 0; k < n; k++) {
        rdp[k] = 0.0;
        for (int j = 0; j < s->n; j++) {
            double r;
            dp_status st = acct_rdp_step(&r, &s->seg[j], orders[k]);
            if (st == DP_ERR_NUMERIC) { r = INFINITY; dp_clear_error(); } /* this order is unusable: skip it */
            else if (st != DP_OK) return st;
            rdp[k] += r * (double)s->seg[j].steps;
        }
    }
    return DP_OK;
}

/* ---- conversions ---- */
static double eps_at_order(double a, double r, double delta, acct_conv conv) {
    if (isnan(r) || r == INFINITY) return INFINITY;
    if (r < 0) r = 0;
    if (conv == ACCT_CONV_CLASSIC) return r + (-log(delta)) / (a - 1.0);
    /* dp_accounting / Balle et al. 2020 Thm 21, with the KL/TV shortcut */
    if (delta * delta + expm1(-r) > 0) return 0.0;
    if (a <= 1.01) return INFINITY;
    return r + log1p(-1.0 / a) - log(delta * a) / (a - 1.0);
}

double acct_rdp_to_eps(double *opt_order, const double *rdp, const double *orders, size_t n, double delta,
                       acct_conv conv) {
    double best = INFINITY, bo = NAN;
    for (size_t k = 0; k < n; k++) {
        double e = eps_at_order(orders[k], rdp[k], delta, conv);
        if (e < best) { best = e; bo = orders[k]; }
    }
    if (opt_order) *opt_order = bo;
    return best < 0 ? 0.0 : best;
}

double acct_rdp_to_delta(double *opt_order, const double *rdp, const double *orders, size_t n, double eps,
                         acct_conv conv) {
    double best = INFINITY, bo = NAN;
    for (size_t k = 0; k < n; k++) {
        double a = orders[k], r = rdp[k], ld;
        if (isnan(r) || r == INFINITY) continue;
        if (r < 0) r = 0;
        if (conv == ACCT_CONV_CLASSIC) {
            ld = (a - 1.0) * (r - eps);
        } else {
            ld = r == 0 ? -INFINITY : 0.5 * log1p(-exp(-r));
            if (a > 1.01) {
                double b = (a - 1.0) * (r - eps + log1p(-1.0 / a)) - log(a);
                if (b < ld) ld = b;
            }
        }
        if (ld < best) { best = ld; bo = a; }
    }
    if (opt_order) *opt_order = bo;
    double d = exp(best);
    return d > 1.0 ? 1.0 : d;
}

dp_status acct_rdp_epsilon(double *eps, double *opt_order, const acct_schedule *s, const double *orders, size_t n,
                           double delta, acct_conv conv) {
    double *r = dp_malloc(n * sizeof *r);
    if (!r) return DP_ERR_NOMEM;
    dp_status st = acct_rdp_schedule(r, s, orders, n);
    if (st == DP_OK) *eps = acct_rdp_to_eps(opt_order, r, orders, n, delta, conv);
    free(r);
    return st;
}

dp_status acct_rdp_delta(double *delta, double *opt_order, const acct_schedule *s, const double *orders, size_t n,
                         double eps, acct_conv conv) {
    double *r = dp_malloc(n * sizeof *r);
    if (!r) return DP_ERR_NOMEM;
    dp_status st = acct_rdp_schedule(r, s, orders, n);
    if (st == DP_OK) *delta = acct_rdp_to_delta(opt_order, r, orders, n, eps, conv);
    free(r);
    return st;
}

/* ---- order grids ---- */
size_t acct_orders_grid(double *o, acct_grid g) {
    size_t n = 0;
    if (g == ACCT_GRID_TFPRIVACY) {
        static const double lo[] = {1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5};
        for (size_t i = 0; i < 10; i++) o[n++] = lo[i];
        for (int a = 5; a <= 63; a++) o[n++] = a;
        o[n++] = 128; o[n++] = 256; o[n++] = 512;
        return n;
    }
    /* 1 + x/10. for x = 1..99, exactly as both libraries compute it */
    for (int x = 1; x < 100; x++) o[n++] = 1.0 + (double)x / 10.0;
    for (int a = g == ACCT_GRID_OPACUS ? 12 : 11; a <= 63; a++) o[n++] = a;
    if (g != ACCT_GRID_OPACUS) { o[n++] = 128; o[n++] = 256; o[n++] = 512; o[n++] = 1024; }
    return n;
}

dp_status acct_orders_parse(double *orders, size_t *n, const char *spec) {
    if (strcmp(spec, "opacus") == 0) { *n = acct_orders_grid(orders, ACCT_GRID_OPACUS); return DP_OK; }
    if (strcmp(spec, "dp-accounting") == 0 || strcmp(spec, "default") == 0) {
        *n = acct_orders_grid(orders, ACCT_GRID_DPACCOUNTING);
        return DP_OK;
    }
    if (strcmp(spec, "tf-privacy") == 0) { *n = acct_orders_grid(orders, ACCT_GRID_TFPRIVACY); return DP_OK; }
    DP_TRY(dp_parse_double_list(orders, ACCT_MAX_ORDERS, n, "--orders", spec));
    if (*n == 0) return dp_error(DP_ERR_INVALID, "--orders: empty list");
    for (size_t k = 0; k < *n; k++)
        if (!(orders[k] > 1.0) || orders[k] > 1e6)
            return dp_error(DP_ERR_INVALID, "--orders: order %zu must be in (1, 1e6] (got %g)", k + 1, orders[k]);
    return DP_OK;
}

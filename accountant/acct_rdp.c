/* accountant/acct_rdp.c — Renyi DP (Mironov 2017; Mironov, Talwar, Zhang 2019)
 * and the RDP -> (epsilon, delta) conversions. Definitions: docs/accounting.md §RDP. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
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
    double lq = log(q), l1q = log1p(-q), lbin = 0.0, m = -INFINITY; /* lbin = log C(alpha, i) */
    double buf[1100], *t = alpha < 1099 ? buf : dp_malloc((size_t)(alpha + 1) * sizeof *t);
    if (!t) return NAN;
    for (int64_t i = 0; i <= alpha; i++) { /* pass 1: log terms and their maximum */
        if (i > 0) lbin += log((double)(alpha - i + 1) / (double)i);
        double di = (double)i;
        t[i] = lbin + di * lq + (double)(alpha - i) * l1q + (di * di - di) / (2.0 * sigma * sigma);
        if (t[i] > m) m = t[i];
    }
    double acc = 0.0;
    for (int64_t i = 0; i <= alpha; i++) /* pass 2: scaled sum; exp(x) is exactly 0 for x < -746 */
        if (t[i] - m > -750.0) acc += exp(t[i] - m);
    if (t != buf) dp_free(t);
    return m + log(acc);
}

/* Per-(q, sigma) quantities of the fractional series that do not depend on alpha, shared by all
 * fractional orders of a segment: the i-side erfc factor le0[i] = log(1/2) + log erfc((i - z0)/(sqrt2 s))
 * and log(i). Filled lazily (n = entries filled); values are bit-identical to computing them per order. */
#define FRAC_MAX_TERMS 100
typedef struct {
    double q, sigma, lq, l1q, z0;
    int n;
    double le0[FRAC_MAX_TERMS], logi[FRAC_MAX_TERMS];
} frac_ctx;

static void frac_ctx_init(frac_ctx *c, double q, double sigma) {
    c->q = q; c->sigma = sigma; c->n = 0;
    c->lq = log(q); c->l1q = log1p(-q);
    c->z0 = sigma * sigma * (log(1.0 / q - 1.0)) + 0.5;
}

/* Fractional alpha > 1: the two-sided signed series of Mironov-Talwar-Zhang 2019 §3.3.
 * Positive and negative terms are accumulated separately (never |binom|: that over-estimates),
 * each as e^m (1{max term has that sign} + sum of e^(ls - m) over its other terms), where m is the
 * largest log term seen so far; log A = m + log1p(sp - sn) (or m + log(sp - 1 - sn) when the largest
 * term is negative) is formed once at the end. One exp per log term; no log-add-exp chain.
 * Returns NAN if it does not converge in 100 terms (small sigma: the terms then decay only like
 * |binom(alpha, i)|) or cancels catastrophically; the caller then integrates numerically (log_a_quad). */
static double log_a_frac_ctx(frac_ctx *c, double alpha) {
    const double sigma = c->sigma, lq = c->lq, l1q = c->l1q, z0 = c->z0;
    const double rs = M_SQRT2 * sigma, l05 = log(0.5);
    /* sp, sn: Neumaier-compensated sums (cp, cn the compensations): the first terms nearly cancel
     * m (log A << |m| when q is small), so the sums must not lose the small later terms */
    double m = -INFINITY, sp = 0.0, sn = 0.0, cp = 0.0, cn = 0.0, lbin = 0.0;
    int ms = 0, sign = 1;
#define FRAC_ADD(s_, c_, v_) do { double v__ = (v_), t__ = s_ + v__; \
        c_ += fabs(s_) >= fabs(v__) ? (s_ - t__) + v__ : (v__ - t__) + s_; s_ = t__; } while (0)
    for (int i = 0; i < FRAC_MAX_TERMS; i++) {
        if (i >= c->n) { /* extend the per-segment tables */
            double di = (double)i;
            c->le0[i] = l05 + log_erfc((di - z0) / rs);
            c->logi[i] = i > 0 ? log(di) : 0.0;
            c->n = i + 1;
        }
        if (i > 0) {
            double f = alpha - (double)i + 1.0; /* binom(a,i) = binom(a,i-1) (a-i+1)/i */
            if (f < 0) sign = -sign;
            lbin += log(fabs(f)) - c->logi[i];
        }
        double di = (double)i, j = alpha - di;
        double lt0 = lbin + di * lq + j * l1q, lt1 = lbin + j * lq + di * l1q;
        double le1 = l05 + log_erfc((z0 - j) / rs);
        double ls0 = lt0 + (di * di - di) / (2.0 * sigma * sigma) + c->le0[i];
        double ls1 = lt1 + (j * j - j) / (2.0 * sigma * sigma) + le1;
        double lmax = ls0 > ls1 ? ls0 : ls1, lmin = ls0 > ls1 ? ls1 : ls0, et;
        if (!(lmax > -INFINITY)) continue; /* both terms vanish */
        if (lmax > m) { /* new largest term: rescale both sums to it (the old largest joins its sum) */
            double sc = exp(m - lmax); /* 0 when m = -inf */
            sp *= sc; cp *= sc; sn *= sc; cn *= sc;
            if (ms > 0) FRAC_ADD(sp, cp, sc); else if (ms < 0) FRAC_ADD(sn, cn, sc);
            m = lmax; ms = sign;
            double e = exp(lmin - m);
            if (sign > 0) FRAC_ADD(sp, cp, e); else FRAC_ADD(sn, cn, e);
            et = 1.0 + e;
        } else {
            double e0 = exp(ls0 - m), e1 = exp(ls1 - m);
            if (sign > 0) { FRAC_ADD(sp, cp, e0); FRAC_ADD(sp, cp, e1); }
            else { FRAC_ADD(sn, cn, e0); FRAC_ADD(sn, cn, e1); }
            et = e0 + e1;
        }
        double pn = sp + cp + (ms > 0 ? 1.0 : 0.0); /* (positive sum) / e^m */
        /* slow (polynomial) decay: give up early and integrate instead (term > P e^-12) */
        if (di >= alpha + 12.0 && et > pn * 6.14421235332821e-06) return NAN;
        /* past alpha the terms alternate; stop once they are negligible (term < P e^-44 ~ 1e-19 P) */
        if (di > alpha + 1.0 && et < pn * 7.781132241133797e-20) {
            double nn = sn + cn + (ms < 0 ? 1.0 : 0.0), d = (sp - sn) + (cp - cn);
            if (nn >= pn) return NAN;
            return ms > 0 ? m + log1p(d) : m + log(d - 1.0);
        }
    }
#undef FRAC_ADD
    return NAN;
}

static double log_a_frac(double q, double sigma, double alpha) {
    frac_ctx c;
    frac_ctx_init(&c, q, sigma);
    return log_a_frac_ctx(&c, alpha);
}

/* g(x) = (1+x)^alpha - 1 - alpha x >= 0 (x > -1), in log space */
static double log_g(double x, double alpha) {
    if (fabs(x) * (fabs(alpha) + 2.0) < 1e-4) { /* Taylor: a(a-1)/2 x^2 (1 + (a-2)/3 x + (a-2)(a-3)/12 x^2), rest < 1e-14 rel */
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
 * trapezoid rule (step min(s/4, s^2/4) over [-12 s, alpha + 12 s + 1]) converges geometrically and A - 1
 * keeps full relative precision. Log space throughout. Several orders share one z grid (out[k] =
 * log A at alphas[k]; the grid reaches the largest order). */
static void log_a_quad_batch(double *out, double q, double s, const double *alphas, size_t n) {
    /* step: the integrand is analytic in the strip |Im z| < pi s^2 (poles of log(1 + q (r - 1))); on
     * Im z = y = pi s^2 / 2 it grows by at most e^{y^2/(2 s^2)}, so the trapezoid error is
     * <~ exp(-2 pi y / h + y^2 / (2 s^2)) <= e^-38 for h = min(s/4, s^2/4) */
    double amax = 0;
    for (size_t k = 0; k < n; k++) if (alphas[k] > amax) amax = alphas[k];
    double hz = s / 4.0 < s * s / 4.0 ? s / 4.0 : s * s / 4.0, z0 = -12.0 * s, z1 = amax + 12.0 * s + 1.0;
    size_t np = (size_t)((z1 - z0) / hz) + 1;
    double m[ACCT_MAX_ORDERS], acc[ACCT_MAX_ORDERS]; /* n <= ACCT_MAX_ORDERS: nothing to allocate, nothing to fail */
    if (n > ACCT_MAX_ORDERS || np > 4000000) { /* the order is unusable (NaN: skipped as +inf) */
        for (size_t k = 0; k < n; k++) out[k] = NAN;
        return;
    }
    for (size_t k = 0; k < n; k++) { m[k] = -INFINITY; acc[k] = 0.0; }
    double lq = log(q), c0 = -log(s) - 0.5 * log(2.0 * M_PI) + log(hz);
    for (size_t p = 0; p < np; p++) {
        double z = z0 + (double)p * hz;
        double le = (2.0 * z - 1.0) / (2.0 * s * s); /* log r */
        double lphi = -z * z / (2.0 * s * s) + c0;
        double x = le < 700.0 ? q * expm1(le) : INFINITY;
        double l1x = isinf(x) ? lq + le : log1p(x);
        for (size_t k = 0; k < n; k++) {
            double a = alphas[k], lg;
            if (isinf(x)) lg = a * (lq + le); /* (q r)^alpha dominates */
            else if (fabs(x) * (fabs(a) + 2.0) < 1e-4) lg = log_g(x, a);
            else {
                double la = a * l1x;
                lg = la > 30.0 ? la + log1p(-(1.0 + a * x) * exp(-la)) : log(expm1(la) - a * x);
            }
            double lw = lphi + lg;
            if (!(lw > -INFINITY)) continue;
            if (lw > m[k]) { acc[k] = acc[k] * exp(m[k] - lw) + 1.0; m[k] = lw; }
            else acc[k] += exp(lw - m[k]);
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (m[k] == -INFINITY) { out[k] = 0.0; continue; }
        double lam1 = m[k] + log(acc[k]); /* log(A - 1) */
        out[k] = lam1 > 0 ? lam1 + log1p(exp(-lam1)) : log1p(exp(lam1));
    }
}

static double log_a_quad(double q, double s, double alpha) {
    double v;
    log_a_quad_batch(&v, q, s, &alpha, 1);
    return v;
}

double acct_rdp_sgm_log_a(double q, double sigma, double alpha) {
    if (q >= 1.0) return (alpha - 1.0) * alpha / (2.0 * sigma * sigma);
    if (alpha == floor(alpha) && alpha <= 1e6) return log_a_int(q, sigma, (int64_t)alpha);
    double v = log_a_frac(q, sigma, alpha);
    if (isnan(v)) v = log_a_quad(q, sigma, alpha);
    return v;
}

/* Gauss-Legendre nodes/weights on [-1, 1] by Newton's method on P_n (n even) */
static void gl_nodes(double *x, double *w, int n) {
    for (int i = 0; i < n / 2; i++) {
        double z = cos(M_PI * (i + 0.75) / (n + 0.5)), pp = 1.0;
        for (int it = 0; it < 100; it++) {
            double p1 = 1.0, p2 = 0.0;
            for (int j = 1; j <= n; j++) {
                double p3 = p2;
                p2 = p1;
                p1 = ((2.0 * j - 1.0) * z * p2 - (j - 1.0) * p3) / j;
            }
            pp = n * (z * p1 - p2) / (z * z - 1.0);
            double dz = p1 / pp;
            z -= dz;
            if (fabs(dz) < 1e-16) break;
        }
        x[i] = -z; x[n - 1 - i] = z;
        w[i] = w[n - 1 - i] = 2.0 / ((1.0 - z * z) * pp * pp);
    }
}

/* Poisson-subsampled Laplace (scale b, sensitivity 1), both directions, worse one returned.
 * With P0 = Lap(0,b), P1 = Lap(1,b), r = P1/P0 (e^{-1/b} for x <= 0, e^{1/b} for x >= 1,
 * e^{(2x-1)/b} between), x_q = q (r - 1):
 *   remove: A = E_P0 (1 + x_q)^alpha,      D = log A / (alpha - 1)
 *   add:    A = E_P0 (1 + x_q)^(1-alpha),  D = log A / (alpha - 1)
 * Since E_P0 r = 1, A - 1 = E_P0 g_beta(x_q) with g_beta(x) = (1+x)^beta - 1 - beta x >= 0
 * (beta = alpha or 1 - alpha): the two atoms exactly, (0, 1) by composite 16-point Gauss-Legendre
 * with panels of width <= 4 / (2 |beta| / b + 1/b) (error < 1e-16 relative), in log space. */
static double laplace_sub_log_a(double q, double b, double beta) {
    static double gx[16], gw[16];
    static int init = 0;
    if (!init) { gl_nodes(gx, gw, 16); init = 1; }
    double m = -INFINITY, acc = 0.0;
#define ACC_LOG(v) do { double v_ = (v); if (v_ > -INFINITY) { if (v_ > m) { acc = acc * exp(m - v_) + 1.0; m = v_; } else acc += exp(v_ - m); } } while (0)
    ACC_LOG(log(0.5) + log_g(q * expm1(-1.0 / b), beta));
    ACC_LOG(log(0.5) - 1.0 / b + log_g(q * expm1(1.0 / b), beta));
    double c = 2.0 * fabs(beta) / b + 1.0 / b;
    long M = (long)ceil(c / 4.0);
    if (M < 4) M = 4;
    if (M > ACCT_LAPLACE_MAX_PANELS) return NAN; /* too costly: the caller falls back to the pure-DP bound */
    double wd = 1.0 / (double)M;
    for (long p = 0; p < M; p++) {
        double x0 = p * wd;
        for (int k = 0; k < 16; k++) {
            double x = x0 + 0.5 * wd * (gx[k] + 1.0);
            double le = (2.0 * x - 1.0) / b;
            ACC_LOG(log(0.5 * wd * gw[k]) - log(2.0 * b) - x / b + log_g(q * expm1(le), beta));
        }
    }
#undef ACC_LOG
    if (m == -INFINITY) return 0.0;
    double lam1 = m + log(acc);
    return lam1 > 0 ? lam1 + log1p(exp(-lam1)) : log1p(exp(lam1));
}

double acct_rdp_laplace_sub(double q, double b, double alpha) {
    if (q >= 1.0) return acct_rdp_laplace(b, alpha);
    double r1 = laplace_sub_log_a(q, b, alpha), r2 = laplace_sub_log_a(q, b, 1.0 - alpha);
    double r = (r1 > r2 ? r1 : r2) / (alpha - 1.0);
    return r < 0 ? 0 : r;
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

/* The exponent alpha (alpha - 1) / (2 sigma^2) of the largest term of A_alpha overflows a double
 * (sigma below ~1e-154, or a huge order): the RDP at that order is at least alpha / (2 sigma^2)
 * + alpha log q / (alpha - 1), beyond the double range, so +inf is its (correct) upper bound.
 * Without this, sigma^2 underflowing to 0 turns every term into inf - inf = NaN (docs §2). */
int acct_sgm_exponent_overflows(double sigma, double alpha) {
    return !isfinite(alpha * (alpha - 1.0) * 0.5 / sigma / sigma);
}

dp_status acct_rdp_step(double *rdp, const acct_segment *seg, double alpha) {
    if (!(alpha > 1.0)) return dp_error(DP_ERR_INVALID, "RDP order must be > 1 (got %g)", alpha);
    switch (seg->mech) {
    case ACCT_GAUSSIAN: {
        if (acct_sgm_exponent_overflows(seg->param, alpha)) { *rdp = INFINITY; return DP_OK; }
        double la = acct_rdp_sgm_log_a(seg->q, seg->param, alpha);
        if (isnan(la))
            return dp_error(DP_ERR_NUMERIC, "RDP series for q=%g sigma=%g did not converge at order %g", seg->q,
                            seg->param, alpha);
        *rdp = la / (alpha - 1.0);
        if (*rdp < 0) *rdp = 0; /* log A >= 0 mathematically; only rounding can make it negative */
        return DP_OK;
    }
    case ACCT_LAPLACE:
        *rdp = acct_rdp_laplace_sub(seg->q, seg->param, alpha);
        if (isnan(*rdp)) {
            /* quadrature too costly (2 alpha / b large): the mechanism is eps'-DP with the amplified
             * eps' = log(1 + q (e^(1/b) - 1)), and randomized response with eps' dominates every
             * eps'-DP mechanism, so its RDP is an upper bound (docs/accounting.md §12) */
            double e0;
            DP_TRY(acct_pure_step_eps(&e0, seg));
            *rdp = acct_rdp_rr(e0, alpha);
        }
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
    for (size_t k = 0; k < n; k++) rdp[k] = 0.0;
    double *fa = dp_malloc((n ? n : 1) * sizeof *fa), *fv = dp_malloc((n ? n : 1) * sizeof *fv);
    size_t *fi = dp_malloc((n ? n : 1) * sizeof *fi);
    if (!fa || !fv || !fi) { dp_free(fa); dp_free(fv); dp_free(fi); return dp_error(DP_ERR_NOMEM, "out of memory"); }
    for (int j = 0; j < s->n; j++) {
        const acct_segment *g = &s->seg[j];
        size_t nf = 0; /* fractional orders whose series did not converge: integrated together */
        frac_ctx fc;
        frac_ctx_init(&fc, g->q, g->param);
        for (size_t k = 0; k < n; k++) {
            double r, a = orders[k];
            if (g->mech == ACCT_GAUSSIAN && acct_sgm_exponent_overflows(g->param, a)) {
                r = INFINITY; /* see acct_sgm_exponent_overflows */
            } else if (g->mech == ACCT_GAUSSIAN && g->q < 1.0 && a != floor(a) && a > 1.0) {
                double la = log_a_frac_ctx(&fc, a);
                if (isnan(la)) { fa[nf] = a; fi[nf] = k; nf++; continue; }
                r = la / (a - 1.0);
                if (r < 0) r = 0;
            } else {
                dp_status st = acct_rdp_step(&r, g, a);
                if (st == DP_ERR_NUMERIC) { r = INFINITY; dp_clear_error(); } /* unusable order: skipped */
                else if (st != DP_OK) { dp_free(fa); dp_free(fv); dp_free(fi); return st; }
            }
            rdp[k] += r * (double)g->steps;
        }
        if (nf) {
            log_a_quad_batch(fv, g->q, g->param, fa, nf);
            for (size_t t = 0; t < nf; t++) {
                double r = isnan(fv[t]) ? INFINITY : fv[t] / (fa[t] - 1.0);
                rdp[fi[t]] += (r < 0 ? 0 : r) * (double)g->steps;
            }
        }
    }
    dp_free(fa); dp_free(fv); dp_free(fi);
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
    dp_free(r);
    return st;
}

dp_status acct_rdp_delta(double *delta, double *opt_order, const acct_schedule *s, const double *orders, size_t n,
                         double eps, acct_conv conv) {
    double *r = dp_malloc(n * sizeof *r);
    if (!r) return DP_ERR_NOMEM;
    dp_status st = acct_rdp_schedule(r, s, orders, n);
    if (st == DP_OK) *delta = acct_rdp_to_delta(opt_order, r, orders, n, eps, conv);
    dp_free(r);
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

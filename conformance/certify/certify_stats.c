/* conformance/certify/certify_stats.c — the black-box statistical tests of `dpcert certify`
 * (docs/certification.md "Statistical tests"). Every acceptance region comes from a
 * non-asymptotic tail bound, so `alpha` is a guaranteed false-reject probability, and every
 * power figure is a guaranteed lower bound (the same inequalities applied under the
 * alternative). Normal CDF through libm's erfc. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/certify/certify.h"
#include "common/alloc.h"

const char *cert_status_name(int s) { return s == CERT_PASS ? "PASS" : s == CERT_FAIL ? "FAIL" : "INCOMPLETE"; }

static void init(cert_check *k, const char *name, double alpha, int64_t n) {
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->alpha = alpha;
    k->n = n;
}

static void decide(cert_check *k) {
    k->status = (k->statistic >= k->lo && k->statistic <= k->hi) ? CERT_PASS : CERT_FAIL;
}

static int too_few(cert_check *k, int64_t n, int64_t need) {
    if (n >= need) return 0;
    k->status = CERT_INCOMPLETE;
    snprintf(k->msg, sizeof k->msg, "%lld samples, at least %lld needed", (long long)n, (long long)need);
    return 1;
}

/* Chernoff for chi^2_n: P(chi^2_n <= n y) <= exp(-(n/2) h(y)) for y < 1 and
 * P(chi^2_n >= n y) <= exp(-(n/2) h(y)) for y > 1, h(y) = y - 1 - ln y (the moment generating
 * function (1 - 2l)^(-n/2) minimised over l). Unlike Laurent-Massart's relaxation, the lower
 * acceptance bound is positive for every n >= 1: a tensor of 10 elements still rejects a
 * missing noise. */
static double chi2_h(double y) { return y - 1 - log(y); }
/* y on the side (lower: y < 1, upper: y > 1) with (n/2) h(y) = L. */
static double chi2_solve(double n, double L, int upper) {
    double lo = upper ? 1 : 0, hi = upper ? 2 : 1;
    if (upper) while ((n / 2) * chi2_h(hi) < L) hi *= 2;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (mid <= 0 || (n / 2) * chi2_h(mid) < L) { if (upper) lo = mid; else hi = mid; }
        else { if (upper) hi = mid; else lo = mid; }
    }
    return upper ? hi : lo; /* outward: the region never shrinks below the bound */
}
void cert_variance_region(double *lo, double *hi, int64_t n, double alpha) {
    double L = log(2 / alpha);
    *lo = chi2_solve((double)n, L, 0);
    *hi = chi2_solve((double)n, L, 1);
}

void cert_test_variance(cert_check *k, const double *z, int64_t n, double alpha) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += z[i] * z[i];
    cert_test_variance_ss(k, s, n, alpha);
}

void cert_test_variance_ss(cert_check *k, double s, int64_t n, double alpha) {
    init(k, "noise variance", alpha, n);
    if (too_few(k, n, 1)) return;
    double dn = (double)n;
    k->statistic = s / dn;
    cert_variance_region(&k->lo, &k->hi, n, alpha);
    k->vacuous = k->lo <= 0 ? 1 : 0;
    decide(k);
    snprintf(k->msg, sizeof k->msg, "measured/claimed variance %.5f (std ratio %.5f), accept [%.5f, %.5f]", k->statistic,
             sqrt(k->statistic), k->lo, k->hi);
}

void cert_std_ratio_interval(double *lo, double *hi, double V, int64_t n, double conf_alpha) {
    double a, b;
    cert_variance_region(&a, &b, n, conf_alpha);
    *lo = sqrt(V / b);
    *hi = sqrt(V / a);
}

/* Under the alternative S = s^2 chi^2_n. s < 1: accepted only if chi^2_n >= n lo / s^2, at most
 * exp(-(n/2) h(lo / s^2)) when lo / s^2 > 1; s > 1: the lower tail at hi / s^2. */
double cert_power_variance(int64_t n, double alpha, double s) {
    double lo, hi, r = s * s;
    if (s <= 0) return 1;
    cert_variance_region(&lo, &hi, n, alpha);
    double y = r < 1 ? lo / r : hi / r;
    if ((r < 1 && y <= 1) || (r >= 1 && y >= 1)) return 0;
    return -expm1(-((double)n / 2) * chi2_h(y));
}

/* The largest std ratio s < 1 that the variance test at (n, alpha) catches with probability
 * >= power (bisection on the monotone power bound). */
double cert_detectable_std(int64_t n, double alpha, double power) {
    double lo = 0, hi = 1;
    for (int i = 0; i < 100; i++) {
        double mid = 0.5 * (lo + hi);
        if (cert_power_variance(n, alpha, mid) >= power) lo = mid; else hi = mid;
    }
    return lo;
}

/* sum z / sqrt(n) ~ N(0, 1): P(|Z| >= t) <= 2 exp(-t^2 / 2) = alpha. */
void cert_test_mean(cert_check *k, const double *z, int64_t n, double alpha) {
    init(k, "noise mean", alpha, n);
    if (too_few(k, n, 1)) return;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += z[i];
    k->statistic = s / sqrt((double)n);
    k->hi = sqrt(2 * log(2 / alpha));
    k->lo = -k->hi;
    decide(k);
    snprintf(k->msg, sizeof k->msg, "sum z / sqrt(n) = %.4f (mean %.3g of the claimed std), accept |.| <= %.4f",
             k->statistic, k->statistic / sqrt((double)n), k->hi);
}

static double phi_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* DKW with Massart's constant: P(sup |F_n - F| > e) <= 2 exp(-2 n e^2) = alpha. */
void cert_test_ks(cert_check *k, const double *z, int64_t n, double alpha) {
    init(k, "noise normality (Kolmogorov-Smirnov)", alpha, n);
    if (too_few(k, n, 1)) return;
    double *v = dp_malloc((size_t)n * sizeof *v);
    if (!v) { k->status = CERT_INCOMPLETE; snprintf(k->msg, sizeof k->msg, "out of memory"); return; }
    memcpy(v, z, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    double d = 0, dn = (double)n;
    for (int64_t i = 0; i < n; i++) {
        double f = isfinite(v[i]) ? phi_cdf(v[i]) : (v[i] > 0 ? 1 : 0);
        if (isnan(v[i])) { d = INFINITY; break; }
        double a = fabs((double)(i + 1) / dn - f), b = fabs(f - (double)i / dn);
        if (a > d) d = a;
        if (b > d) d = b;
    }
    dp_free(v);
    k->statistic = d;
    k->lo = 0;
    k->hi = sqrt(log(2 / alpha) / (2 * dn));
    k->vacuous = k->hi >= 1 ? 2 : 0;
    decide(k);
    snprintf(k->msg, sizeof k->msg, "KS distance to N(0,1) %.5f, accept <= %.5f", d, k->hi);
}

double cert_power_ks(int64_t n, double alpha, double D) {
    double e = sqrt(log(2 / alpha) / (2 * (double)n));
    if (D <= e) return 0;
    double p = 1 - 2 * exp(-2 * (double)n * (D - e) * (D - e));
    return p > 0 ? p : 0;
}

/* which: 0 uniform on [-sqrt 3, sqrt 3]; 1 Laplace with b = 1/sqrt 2; 2 N(0,1) rounded to
 * multiples of h and rescaled to variance 1 (var of the rounded variable computed exactly on
 * a fine sum). sup |F - Phi| on a grid of 2e5 points in [-8, 8] (and at the atoms' edges). */
double cert_ks_distance_alt(int which, double h) {
    double d = 0, s = 1;
    if (which == 2) { /* variance of round(Z / h) h */
        double v = 0;
        for (int j = -400; j <= 400; j++) {
            double a = (j - 0.5) * h, b = (j + 0.5) * h;
            v += (j * h) * (j * h) * (phi_cdf(b) - phi_cdf(a));
        }
        s = sqrt(v);
    }
    for (int i = 0; i <= 200000; i++) {
        double x = -8 + 16.0 * i / 200000, f, f2 = -1;
        if (which == 0) f = x < -sqrt(3.0) ? 0 : x > sqrt(3.0) ? 1 : (x + sqrt(3.0)) / (2 * sqrt(3.0));
        else if (which == 1) f = x < 0 ? 0.5 * exp(x * sqrt(2.0)) : 1 - 0.5 * exp(-x * sqrt(2.0));
        else { /* atoms at j h / s: F just below and at the atom */
            double j = floor(x * s / h + 0.5);
            f = phi_cdf((j + 0.5) * h);
            f2 = phi_cdf((j - 0.5) * h);
            double xa = j * h / s;
            double g = phi_cdf(xa);
            if (fabs(f - g) > d) d = fabs(f - g);
            if (fabs(f2 - g) > d) d = fabs(f2 - g);
            continue;
        }
        double g = phi_cdf(x);
        if (fabs(f - g) > d) d = fabs(f - g);
    }
    return d;
}

/* Chernoff for T = sum of m products of independent N(0,1) pairs: log P(T >= t) <=
 * -l t - (m/2) ln(1 - l^2), minimised at l = (-m + sqrt(m^2 + 4 t^2)) / (2t). The threshold
 * is found by bisection so that this bound is alpha/2 (two-sided: alpha). */
static double prod_logbound(double m, double t) {
    if (t <= 0) return 0;
    double l = (-m + sqrt(m * m + 4 * t * t)) / (2 * t);
    return -l * t - 0.5 * m * log1p(-l * l);
}
double cert_products_threshold(int64_t m, double alpha) {
    double lo = 0, hi = 10 * sqrt((double)m) + 100, target = log(alpha / 2);
    while (prod_logbound((double)m, hi) > target) hi *= 2;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (prod_logbound((double)m, mid) > target) lo = mid; else hi = mid;
    }
    return hi;
}
void cert_test_products(cert_check *k, const double *a, const double *b, int64_t m, double alpha) {
    init(k, "noise independence", alpha, m);
    if (too_few(k, m, 1)) return;
    double t = 0;
    for (int64_t i = 0; i < m; i++) t += a[i] * b[i];
    k->statistic = t / (double)m;
    k->hi = cert_products_threshold(m, alpha) / (double)m;
    k->lo = -k->hi;
    decide(k);
    snprintf(k->msg, sizeof k->msg, "mean product (correlation) %.5f over %lld pairs, accept |.| <= %.5f", k->statistic,
             (long long)m, k->hi);
}

/* Binomial Chernoff (Hoeffding 1963, the relative-entropy form): for X ~ Binomial(n, p),
 * P(X <= n x) <= exp(-n KL(x || p)) for x < p and P(X >= n x) <= exp(-n KL(x || p)) for x > p.
 * The acceptance region [lo, hi] puts alpha/2 on each side; a side that cannot reject even the
 * extreme count (0 or n) is vacuous and flagged (docs/certification.md "Acceptance regions"). */
static double kl_bern(double x, double p) {
    double a = x > 0 ? x * log(x / p) : 0, b = x < 1 ? (1 - x) * log((1 - x) / (1 - p)) : 0;
    return a + b;
}
static double kl_solve(double n, double p, double L, int upper) {
    double lo = upper ? p : 0, hi = upper ? 1 : p;
    if (n * kl_bern(upper ? 1 : 0, p) < L) return upper ? 1 : 0; /* even the extreme is accepted */
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (n * kl_bern(mid, p) < L) { if (upper) lo = mid; else hi = mid; }
        else { if (upper) hi = mid; else lo = mid; }
    }
    return upper ? hi : lo;
}
void cert_test_count(cert_check *k, int64_t x, int64_t n, double p, double alpha) {
    init(k, "inclusion count", alpha, n);
    if (too_few(k, n, 1)) return;
    double dn = (double)n, L = log(2 / alpha);
    k->statistic = (double)x;
    k->lo = dn * kl_solve(dn, p, L, 0);
    k->hi = dn * kl_solve(dn, p, L, 1);
    k->vacuous = (k->lo <= 0 ? 1 : 0) | (k->hi >= dn ? 2 : 0);
    decide(k);
    snprintf(k->msg, sizeof k->msg, "%lld of %lld (rate %.5f, expected %.5f), accept [%.1f, %.1f]", (long long)x,
             (long long)n, (double)x / dn, p, k->lo, k->hi);
}
/* Power of the count test (n, p, alpha) against X ~ Binomial(n, p1): the alternative is
 * accepted only inside [lo, hi], at most exp(-n KL(edge / n || p1)) from the nearer edge. */
double cert_power_count(int64_t n, double p, double alpha, double p1) {
    double dn = (double)n, L = log(2 / alpha), lo = kl_solve(dn, p, L, 0), hi = kl_solve(dn, p, L, 1);
    if (p1 > hi) return -expm1(-dn * kl_bern(hi, p1));
    if (p1 < lo) return -expm1(-dn * kl_bern(lo, p1));
    return 0;
}

/* Lower tail of S = sum_j Y_j, Y_j = (c_j - t p)^2 / (t p q), c_j iid Binomial(t, p): Chernoff
 * with the exact moment generating function, P(S <= a) <= exp(l a + J ln M(l)) with
 * M(l) = E exp(-l Y) summed over the binomial pmf (log-sum-exp), minimised over l >= 0. It is
 * tight enough that fixed-size batches (S ~ 0) are rejected as soon as the binomial's mode has
 * probability below alpha^(1/J); Maurer's inequality, used before, needed J > 6 ln(1/alpha). */
typedef struct { double *lp, *y; int64_t m; } disp_pmf;
static int disp_pmf_make(disp_pmf *d, int64_t t, double p) {
    double q = 1 - p, mu = (double)t * p, v = mu * q;
    d->lp = dp_malloc((size_t)(t + 1) * sizeof *d->lp);
    d->y = dp_malloc((size_t)(t + 1) * sizeof *d->y);
    d->m = 0;
    if (!d->lp || !d->y) return 0;
    for (int64_t c = 0; c <= t; c++) {
        double lp = lgamma((double)t + 1) - lgamma((double)c + 1) - lgamma((double)(t - c) + 1) + (double)c * log(p) +
                    (double)(t - c) * log(q);
        if (lp < -745) continue; /* below the smallest double: no mass */
        d->lp[d->m] = lp;
        d->y[d->m++] = ((double)c - mu) * ((double)c - mu) / v;
    }
    return 1;
}
static double disp_logM(const disp_pmf *d, double l) { /* ln E exp(-l Y) */
    double mx = -INFINITY, s = 0;
    for (int64_t i = 0; i < d->m; i++) if (d->lp[i] - l * d->y[i] > mx) mx = d->lp[i] - l * d->y[i];
    for (int64_t i = 0; i < d->m; i++) s += exp(d->lp[i] - l * d->y[i] - mx);
    return mx + log(s);
}
/* min over l >= 0 of l a + J ln M(l) (convex in l): golden-section search on [0, 1e6]. */
static double disp_bound(const disp_pmf *d, double a, double J) {
    double x0 = 0, x1 = 1e6, g = (sqrt(5.0) - 1) / 2;
    for (int i = 0; i < 200; i++) {
        double c = x1 - g * (x1 - x0), e = x0 + g * (x1 - x0);
        if (c * a + J * disp_logM(d, c) < e * a + J * disp_logM(d, e)) x1 = e; else x0 = c;
    }
    double l = 0.5 * (x0 + x1), b = l * a + J * disp_logM(d, l);
    return b < 0 ? b : 0;
}
/* The lower acceptance bound a/J (per count) with bound(a) = ln(alpha); 0 (vacuous) when even
 * S = 0 cannot be rejected. */
static double disp_lo(const disp_pmf *d, double J, double alpha) {
    double L = log(alpha);
    if (disp_bound(d, 0, J) > L) return 0;
    double lo = 0, hi = J;
    for (int i = 0; i < 100; i++) {
        double mid = 0.5 * (lo + hi);
        if (disp_bound(d, mid, J) <= L) lo = mid; else hi = mid;
    }
    return lo / J;
}

void cert_test_dispersion(cert_check *k, const int64_t *c, int64_t J, int64_t t, double p, double alpha) {
    init(k, "dispersion", alpha, J);
    if (too_few(k, J, 1)) return;
    double mu = (double)t * p, v = mu * (1 - p), s = 0;
    for (int64_t j = 0; j < J; j++) s += ((double)c[j] - mu) * ((double)c[j] - mu);
    disp_pmf d;
    if (!disp_pmf_make(&d, t, p)) {
        dp_free(d.lp); dp_free(d.y);
        k->status = CERT_INCOMPLETE;
        snprintf(k->msg, sizeof k->msg, "out of memory");
        return;
    }
    k->statistic = s / ((double)J * v);
    k->lo = disp_lo(&d, (double)J, alpha);
    k->hi = INFINITY;
    k->vacuous = k->lo <= 0 ? 1 : 0;
    dp_free(d.lp); dp_free(d.y);
    decide(k);
    snprintf(k->msg, sizeof k->msg, "variance of the counts / binomial variance = %.4f, accept >= %.4f (one-sided)",
             k->statistic, k->lo);
}

/* Power against counts that are all equal to round(t p) (fixed-size batches, epoch shuffling):
 * the statistic is then (round(t p) - t p)^2 / (t p q), known exactly: 1 below lo, else 0. */
double cert_power_dispersion_fixed(int64_t J, int64_t t, double p, double alpha) {
    disp_pmf d;
    if (!disp_pmf_make(&d, t, p)) { dp_free(d.lp); dp_free(d.y); return 0; }
    double lo = disp_lo(&d, (double)J, alpha), mu = (double)t * p, r = round(mu);
    dp_free(d.lp); dp_free(d.y);
    return (r - mu) * (r - mu) / (mu * (1 - p)) < lo ? 1 : 0;
}

/* conformance/certify_stats.c — the black-box statistical tests of `dpcert certify`
 * (docs/certification.md "Statistical tests"). Every acceptance region comes from a
 * non-asymptotic tail bound, so `alpha` is a guaranteed false-reject probability, and every
 * power figure is a guaranteed lower bound (the same inequalities applied under the
 * alternative). Normal CDF through libm's erfc. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/certify.h"
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

/* Laurent-Massart (2000) Lemma 1 with t = ln(2/alpha). */
void cert_test_variance(cert_check *k, const double *z, int64_t n, double alpha) {
    init(k, "noise variance", alpha, n);
    if (too_few(k, n, 2)) return;
    double s = 0, t = log(2 / alpha), dn = (double)n;
    for (int64_t i = 0; i < n; i++) s += z[i] * z[i];
    k->statistic = s / dn;
    k->lo = (dn - 2 * sqrt(dn * t)) / dn;
    k->hi = (dn + 2 * sqrt(dn * t) + 2 * t) / dn;
    decide(k);
    snprintf(k->msg, sizeof k->msg, "measured/claimed variance %.5f (std ratio %.5f), accept [%.5f, %.5f]", k->statistic,
             sqrt(k->statistic), k->lo, k->hi);
}

/* Under the alternative S = s^2 chi^2_n. s < 1: accepted only if chi^2_n >= lo n / s^2; the
 * upper Laurent-Massart tail P(chi^2 >= n + 2 sqrt(n x) + 2x) <= e^-x at the x solving
 * n + 2 sqrt(n x) + 2x = lo n / s^2 bounds that. s > 1: the lower tail at hi n / s^2. */
double cert_power_variance(int64_t n, double alpha, double s) {
    double t = log(2 / alpha), dn = (double)n, r = s * s;
    double lo = dn - 2 * sqrt(dn * t), hi = dn + 2 * sqrt(dn * t) + 2 * t, x;
    if (r < 1) {
        double a = lo / r - dn;
        if (a <= 0) return 0;
        double sq = (-2 * sqrt(dn) + sqrt(4 * dn + 8 * a)) / 4; /* 2 y^2 + 2 sqrt(n) y - a = 0, y = sqrt(x) */
        x = sq * sq;
    } else {
        double a = dn - hi / r;
        if (a <= 0) return 0;
        x = a * a / (4 * dn);
    }
    return 1 - exp(-x);
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

/* Bernstein, as conf_stat_poisson: h = x/3 + sqrt(x^2/9 + 2 x n p (1-p)), x = ln(2/alpha). */
void cert_test_count(cert_check *k, int64_t x, int64_t n, double p, double alpha) {
    init(k, "inclusion count", alpha, n);
    if (too_few(k, n, 1)) return;
    double m = (double)n * p, v = m * (1 - p), l = log(2 / alpha);
    double h = l / 3 + sqrt(l * l / 9 + 2 * l * v);
    k->statistic = (double)x;
    k->lo = m - h;
    k->hi = m + h;
    decide(k);
    snprintf(k->msg, sizeof k->msg, "%lld of %lld (rate %.5f, expected %.5f), accept [%.1f, %.1f]", (long long)x,
             (long long)n, (double)x / (double)n, p, k->lo, k->hi);
}

/* Maurer (2003): for independent Y_j >= 0, P(sum E Y - sum Y >= t) <= exp(-t^2 / (2 sum E Y^2)).
 * Y_j = (c_j - t p)^2 with c_j ~ Binomial(t, p): E Y = t p q, E Y^2 = t p q (1 + 3 (t - 2) p q). */
void cert_test_dispersion(cert_check *k, const int64_t *c, int64_t J, int64_t t, double p, double alpha) {
    init(k, "dispersion", alpha, J);
    if (too_few(k, J, 2)) return;
    double q = 1 - p, mu = (double)t * p, ey = (double)t * p * q, ey2 = ey * (1 + 3 * ((double)t - 2) * p * q);
    double s = 0;
    for (int64_t j = 0; j < J; j++) s += ((double)c[j] - mu) * ((double)c[j] - mu);
    double tt = sqrt(2 * (double)J * ey2 * log(1 / alpha));
    k->statistic = s / ((double)J * ey);
    k->lo = ((double)J * ey - tt) / ((double)J * ey);
    k->hi = INFINITY;
    decide(k);
    snprintf(k->msg, sizeof k->msg, "variance of the counts / binomial variance = %.4f, accept >= %.4f (one-sided)",
             k->statistic, k->lo);
}

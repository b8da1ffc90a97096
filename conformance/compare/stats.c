/* conformance/compare/stats.c — statistical checks where element-wise agreement is not
 * the question (docs/conformance.md, "Statistical checks"). Both tests use
 * distribution-free tail bounds, so the stated false-reject probability is a
 * guarantee, not an asymptotic approximation. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/compare/compare.h"

/* Laurent & Massart (2000), Lemma 1: for S ~ chi^2_n and t > 0,
 *   P(S - n >= 2 sqrt(n t) + 2 t) <= e^-t,   P(n - S >= 2 sqrt(n t)) <= e^-t.
 * With t = ln(2 / alpha) the two-sided false-reject probability is <= alpha. */
void conf_stat_noise_variance(conf_stat_result *r, const double *x, size_t n, double var, double alpha) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "noise variance");
    r->alpha = alpha;
    if (n == 0 || !(var > 0) || !(alpha > 0 && alpha < 1)) {
        r->status = CONF_FAIL;
        snprintf(r->msg, sizeof r->msg, "no samples (%zu) or invalid variance %g / alpha %g", n, var, alpha);
        return;
    }
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i] * x[i] / var;
    double t = log(2.0 / alpha), dn = (double)n;
    r->statistic = s;
    r->lo = dn - 2 * sqrt(dn * t);
    r->hi = dn + 2 * sqrt(dn * t) + 2 * t;
    r->status = (s >= r->lo && s <= r->hi) ? CONF_PASS : CONF_FAIL;
    snprintf(r->msg, sizeof r->msg,
             "sum x^2/var = %.6g over %zu draws (empirical var ratio %.4f), accept [%.6g, %.6g], false-reject <= %.1e",
             s, n, s / dn, r->lo, r->hi, alpha);
}

/* Bernstein: X = sum of `trials` independent Bernoulli(q), variance v = trials q (1-q), each
 * term within 1 of its mean: P(|X - trials q| >= h) <= 2 exp(-h^2 / (2 (v + h/3))). With
 * x = ln(2/alpha), h = x/3 + sqrt(x^2/9 + 2 x v) makes the bound exactly alpha. */
void conf_stat_poisson(conf_stat_result *r, int64_t total, int64_t trials, double q, double alpha) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "Poisson batch sizes");
    r->alpha = alpha;
    if (trials <= 0 || !(q >= 0 && q <= 1) || !(alpha > 0 && alpha < 1)) {
        r->status = CONF_FAIL;
        snprintf(r->msg, sizeof r->msg, "invalid trials %lld / q %g / alpha %g", (long long)trials, q, alpha);
        return;
    }
    double m = (double)trials * q, v = m * (1 - q), x = log(2.0 / alpha);
    double h = x / 3 + sqrt(x * x / 9 + 2 * x * v);
    r->statistic = (double)total;
    r->lo = m - h;
    r->hi = m + h;
    r->status = (r->statistic >= r->lo && r->statistic <= r->hi) ? CONF_PASS : CONF_FAIL;
    snprintf(r->msg, sizeof r->msg, "%lld inclusions in %lld draws (expected %.6g), accept [%.6g, %.6g], false-reject <= %.1e",
             (long long)total, (long long)trials, m, r->lo, r->hi, alpha);
}

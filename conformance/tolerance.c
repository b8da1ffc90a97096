/* conformance/tolerance.c — forward-error-bound building blocks (docs/tolerances.md). */
#include <math.h>

#include "conformance/conf.h"

double conf_unit_roundoff(dp_dtype dt) {
    switch (dt) {
    case DP_F64: return ldexp(1.0, -53);
    case DP_F32: return ldexp(1.0, -24);
    case DP_BF16: return ldexp(1.0, -8);
    case DP_F16: return ldexp(1.0, -11);
    default: return 0.0; /* integers are compared exactly */
    }
}

/* gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability, Lemma 3.1). */
double conf_gamma(double n, double u) {
    if (n <= 0) return 0.0;
    double nu = n * u;
    if (nu >= 1.0) return INFINITY;
    return nu / (1.0 - nu);
}

/* Recursive summation (any order, any tree) of n terms: n-1 additions, each error
 * bounded by gamma_{n-1} sum |x_i| (Higham eq. 4.4 generalised to any tree). */
double conf_bound_sum(double n, double sum_abs, double u) {
    if (n <= 1) return 0.0;
    return conf_gamma(n - 1, u) * sum_abs;
}

/* z = r cos(2 pi u2), r = sqrt(-2 ln u1), both in double (docs/tolerances.md, noise):
 *   ln: <= L ulps relative, |ln u1| <= 36.8; -2 ln: exact scaling; sqrt: <= L ulps, and a
 *   relative error e in its argument gives e/2 in r; 2 pi u2: 2 roundings (pi rounded,
 *   product) -> absolute error <= 2 pi * 2u in theta, so cos changes by <= 4 pi u;
 *   cos: <= L ulps relative plus ... absolute u; product r*c: one rounding.
 *   |dz| <= r * (L u / 2 + L u + 4 pi u + L u + u) + |z| u <= RMAX u (2.5 L + 4 pi + 2). */
double conf_bound_boxmuller(double u_double) {
    return CONF_BOXMULLER_RMAX * u_double * (2.5 * CONF_LIBM_ULPS + 4.0 * M_PI + 2.0);
}

double conf_fraction(double ref, double cand, double bound) {
    if (ref == cand) return 0.0;                   /* also equal infinities */
    if (isnan(ref) && isnan(cand)) return 0.0;
    if (isnan(ref) || isnan(cand) || isinf(ref) || isinf(cand)) return INFINITY;
    double d = fabs(cand - ref);
    if (!(bound > 0)) return INFINITY;
    return d / bound;
}

const char *conf_status_name(conf_status s) {
    switch (s) {
    case CONF_PASS: return "PASS";
    case CONF_SKIPPED: return "SKIPPED";
    case CONF_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case CONF_MARGINAL: return "MARGINAL";
    case CONF_FAIL: return "FAIL";
    }
    return "?";
}

conf_status conf_status_worse(conf_status a, conf_status b) { return a > b ? a : b; }

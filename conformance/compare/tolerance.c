/* conformance/compare/tolerance.c — forward-error-bound building blocks (docs/tolerances.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/compare/compare.h"

double conf_unit_roundoff(dp_dtype dt) { return dp_dtype_unit_roundoff(dt); } /* integers: 0, compared exactly */

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

/* docs/tolerances.md "Confident examples": the output gradient p - e_y is computed with an
 * absolute error of a few u relative to max(p_y, 1) = 1, while its norm is at least
 * |p_y - 1| = 1 - e^-l: the ratio (||p||_1 + 1) / ||p - e_y|| <= 2 / (1 - e^-l). The normwise
 * model's slack is calibrated on unconfident examples (ratio 2, 1 - p_y -> 1), so the
 * amplification beyond it is kappa = 1 / (1 - e^-l). */
double conf_cancel_factor(double loss) {
    if (!(loss >= 0) || !isfinite(loss)) return 1.0;
    if (loss == 0) return INFINITY;
    return 1.0 / -expm1(-loss);
}

dp_status conf_clip_conv_parse(conf_clip_conv *c, const char *what, const char *s) {
    c->automatic = 0;
    c->eps = 0;
    if (!s) return dp_error(DP_ERR_INVALID, "%s: missing clip_fn", what);
    const char *arg = NULL;
    if (strcmp(s, "abadi") == 0) return DP_OK;
    if (strcmp(s, "automatic") == 0) { c->automatic = 1; c->eps = 0.01; return DP_OK; }
    if (strncmp(s, "abadi_eps:", 10) == 0) arg = s + 10;
    else if (strncmp(s, "automatic:", 10) == 0) { arg = s + 10; c->automatic = 1; }
    if (!arg) return dp_error(DP_ERR_INVALID, "%s: unknown clip_fn '%s' (abadi, abadi_eps:E, automatic[:G])", what, s);
    char *end;
    double v = strtod(arg, &end);
    if (end == arg || *end || !isfinite(v) || v < 0 || v > 1e6)
        return dp_error(DP_ERR_INVALID, "%s: clip_fn '%s': the constant must be a number in [0, 1e6]", what, s);
    c->eps = v;
    return DP_OK;
}

double conf_clip_conv_factor(const conf_clip_conv *c, double norm, double thresh) {
    if (c->automatic) return thresh / (norm + c->eps);
    double d = norm + c->eps;
    return d <= thresh ? 1.0 : thresh / d;
}

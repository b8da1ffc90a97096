/* accountant/acct_internal.h — helpers shared inside the accountant module. */
#ifndef ACCT_INTERNAL_H
#define ACCT_INTERNAL_H

#include <math.h>
#include <stddef.h>

/* log(e^a + e^b) */
static inline double acct_lae(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

/* A discrete privacy-loss distribution on the uniform grid l_k = l0 + k h,
 * k = 0..n-1, masses p[k] (under P), plus an atom p_inf at +infinity.
 * delta(eps) = p_inf + sum_{l_k > eps} p_k (1 - e^{eps - l_k}).
 * eps(delta) = the smallest eps >= 0 with delta(eps) <= delta (INFINITY if p_inf > delta);
 * evaluated in log space, so losses above 700 do not overflow. */
double acct_pmf_delta(const double *p, size_t n, double l0, double h, double p_inf, double eps);
double acct_pmf_epsilon(const double *p, size_t n, double l0, double h, double p_inf, double delta);

/* log Phi(x) (standard normal cdf), accurate for very negative x */
double acct_log_ndtr(double x);

#endif

/* accountant/acct_lower.c — a certified lower bound on epsilon from one step alone
 * (docs/accounting.md §8 "audit-accounting"; issue 29 items 6 and 11): the T-step mechanism
 * releases its first step, and post-processing cannot lower epsilon, so any (eps, delta) the
 * composition satisfies, one step satisfies too. The same bounds as accountant/tests/
 * test_extremes.c (which checks every accountant against its own copy), with margins so that
 * the floating-point evaluation never rises above the true value. */
#include <float.h>
#include <math.h>

#include "accountant/acct.h"

/* log erfc(x), or an upper bound of it beyond x = 20 (erfc(x) <= e^{-x^2} / (x sqrt(pi)), no underflow) */
static double log_erfc_upper(double x) {
    if (x < 20.0) return log(erfc(x));
    return -x * x - log(x) - 0.5 * log(M_PI);
}

/* The margins: the computed bound lowered by 1e-9 relative and 1e-12 absolute (the logs and
 * erfc are within a few ulp; the terms are at most |log delta| + x^2 in size), delta raised by
 * 1e-9 relative. */
static double margin(double lb) {
    if (lb > DBL_MAX) return DBL_MAX; /* the true value exceeds every double: the largest is a lower bound */
    lb = lb * (1.0 - 1e-9) - 1e-12;
    return lb > 0 ? lb : 0.0;
}

dp_status acct_one_step_lower(double *eps, const acct_segment *seg, double delta) {
    *eps = 0;
    if (!(delta >= 0 && delta < 1)) return dp_error(DP_ERR_INVALID, "delta must be in [0, 1) (got %g)", delta);
    const double q = seg->q, d = delta * (1.0 + 1e-9);
    if (seg->mech == ACCT_GAUSSIAN) {
        /* remove direction, P = (1-q) N(0, s^2) + q N(1, s^2) vs Q = N(0, s^2) on E = {z > 1/2}:
         * Q(E) = erfc(x)/2, x = 1/(2 sqrt2 s) (bounded above), P(E) >= q (1 - Q(E)) */
        double x = 1.0 / (2.0 * M_SQRT2 * seg->param);
        double lq = log(0.5) + log_erfc_upper(x), pe = q * (1.0 - exp(lq));
        if (!(pe > d) || isnan(lq)) return DP_OK; /* lq = -inf: x^2 overflows, the bound exceeds DBL_MAX */
        *eps = margin(log(pe - d) - lq);
        return DP_OK;
    }
    if (seg->mech == ACCT_PURE) {
        /* randomized response (the worst eps0-DP mechanism, the accountant's model, docs §5),
         * Poisson q, remove direction, outcome o1: Q(o1) = 1/(1 + e^eps0),
         * P(o1) = q + (1 - 2q) Q(o1); log Q(o1) = -(eps0 + log1p(e^-eps0)) without overflow */
        double e0 = seg->param, lqo = -(e0 + log1p(exp(-e0))), qo = exp(lqo), po = q + (1.0 - 2.0 * q) * qo;
        if (!(po > d)) return DP_OK;
        *eps = margin(log(po - d) - lqo);
        return DP_OK;
    }
    return DP_OK; /* Laplace: none here (0 is a lower bound) */
}

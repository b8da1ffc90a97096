/* accountant/tests/test_pld_grid.c — the PLD accountant's grid choice (docs/accounting.md §4
 * "Automatic grid", "Atoms on the grid", "Coarse tails"):
 *   1. the default (accuracy-driven) interval is consistent with a fine fixed grid: both are
 *      rigorous, so each lower bound is below the other's upper bound; and the default upper bound
 *      is within the aim max(1e-4, min(1e-3 eps, 1e-2)) of the fine lower bound (its accuracy,
 *      certified by the fine interval), on Gaussian and Laplace queries of the issue-30 grid;
 *   2. atoms on the grid: the subsampled Laplace at an h that divides its atom distance gives a
 *      lower bound at least 3 times tighter than at an h that does not (the coupling fallback, the negative
 *      control), at the same cost;
 *   3. a composed loss beyond the doubles (pure DP, epsilon0 1e308) is [inf, inf], not an error.
 * Deterministic: no false-reject probability. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "accountant/acct.h"
#include "common/test.h"

static acct_schedule one(acct_mech m, double q, double p, int64_t T) {
    acct_schedule s = {.n = 1};
    s.seg[0] = (acct_segment){m, q, p, T};
    return s;
}

int main(void) {
    /* 1. default against a fine fixed grid */
    const struct { acct_mech m; double q, p; int64_t T; double hf; } q[] = {
        {ACCT_GAUSSIAN, 0.001, 1.0, 1000, 1e-5},  {ACCT_GAUSSIAN, 0.01, 1.0, 10000, 5e-5},
        {ACCT_GAUSSIAN, 0.1, 1.0, 1000, 2e-4},    {ACCT_LAPLACE, 0.001, 2.0, 10000, 0},
        {ACCT_LAPLACE, 0.01, 2.0, 1000, 0},       {ACCT_LAPLACE, 0.1, 2.0, 10000, 0},
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        acct_schedule s = one(q[i].m, q[i].q, q[i].p, q[i].T);
        acct_pld_result d, f;
        T_OK(acct_pld_epsilon(&d, &s, 1e-5, NULL));
        acct_pld_opts o;
        acct_pld_default_opts(&o);
        if (q[i].hf > 0) o.h = q[i].hf;
        else o.target_points = (size_t)1 << 20; /* Laplace: the fixed rule, atoms snapped */
        T_OK(acct_pld_epsilon(&f, &s, 1e-5, &o));
        const double aim = fmax(1e-4, fmin(1e-3 * d.upper, 1e-2));
        printf("# %s q %g T %lld: default [%.9f, %.9f] (h %.3g, N %zu), fine [%.9f, %.9f] (h %.3g); aim %.3g\n",
               q[i].m == ACCT_GAUSSIAN ? "gaussian" : "laplace", q[i].q, (long long)q[i].T, d.lower, d.upper, d.h,
               d.n_fft, f.lower, f.upper, f.h, aim);
        T_CHECK(d.lower <= d.upper && f.lower <= f.upper, "interval order");
        T_CHECK(d.lower <= f.upper + 1e-9 && f.lower <= d.upper + 1e-9, "default [%.9f, %.9f] and fine [%.9f, %.9f] "
                "are both rigorous but disjoint", d.lower, d.upper, f.lower, f.upper);
        T_CHECK(d.upper - f.lower <= aim, "the default upper bound %.9f is %.3g above the fine lower bound %.9f: "
                "more than the aim %.3g", d.upper, d.upper - f.lower, f.lower, aim);
    }
    /* 2. the subsampled Laplace's atoms on the grid */
    {
        const double qq = 0.01, b = 2.0, dist = log1p(qq * expm1(1 / b)) - log1p(qq * expm1(-1 / b));
        acct_schedule s = one(ACCT_LAPLACE, qq, b, 10000);
        acct_pld_opts o;
        acct_pld_default_opts(&o);
        acct_pld_result on, off;
        o.h = dist / 40.0;
        T_OK(acct_pld_epsilon(&on, &s, 1e-5, &o));
        o.h = dist / 40.37; /* not a divisor: the atoms lie off the grid */
        T_OK(acct_pld_epsilon(&off, &s, 1e-5, &o));
        printf("# laplace q 0.01 b 2 T 1e4: atoms on the grid [%.9f, %.9f] (h %.4g), off [%.9f, %.9f] (h %.4g)\n",
               on.lower, on.upper, on.h, off.lower, off.upper, off.h);
        T_CHECK(on.upper - on.lower < 0.35 * (off.upper - off.lower), "atoms on the grid: width %.3g, not a third of the "
                "off-grid width %.3g", on.upper - on.lower, off.upper - off.lower);
        T_CHECK(on.lower <= off.upper + 1e-9 && off.lower <= on.upper + 1e-9, "on/off intervals disjoint");
    }
    /* 3. beyond the doubles */
    {
        acct_schedule s = one(ACCT_PURE, 1.0, 1e308, 10);
        acct_pld_result r;
        T_OK(acct_pld_epsilon(&r, &s, 1e-5, NULL));
        /* epsilon is about 1e309, above every double: the lower bound is the largest double, the upper +inf */
        T_CHECK(r.lower == DBL_MAX && isinf(r.upper), "pure eps0 1e308 x 10: [%g, %g], want [DBL_MAX, inf]", r.lower,
                r.upper);
    }
    return t_finish();
}

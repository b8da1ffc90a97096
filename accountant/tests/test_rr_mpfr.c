/* accountant/tests/test_rr_mpfr.c — the exact randomized-response composition (docs/accounting.md §5)
 * against an MPFR (160-bit) evaluation of delta(eps) = sum_{l_k > eps} p_k (1 - e^{eps - l_k}) at large
 * T (1e4, 1e6, 1e8), tolerance 1e-10 relative (the derived bound is ~1e-12, §5); negative control: the
 * former lgamma masses (exp(lgT - lgamma - lgamma)) in double miss the MPFR value by more than that at
 * T = 1e8. The PLD floating-point budget (§4) is positive and widens the interval. Deterministic. */
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>

#include "accountant/acct.h"
#include "common/test.h"

/* MPFR delta of T-fold RR(eps0) at eps: masses by lngamma at the first k above eps, then the ratio
 * recurrence p_{k+1} = p_k (T - k)/(k + 1) e^{eps0}, until the term is below 1e-40 of the sum */
static double rr_delta_mpfr(double eps0, int64_t T, double eps) {
    mpfr_t lp, t, u, acc, ee, l;
    mpfr_inits2(160, lp, t, u, acc, ee, l, (mpfr_ptr)0);
    int64_t k = (int64_t)floor((eps / eps0 + (double)T) / 2.0);
    while ((double)(2 * k - T) * eps0 <= eps) k++;
    /* log p_k = lgamma(T+1) - lgamma(k+1) - lgamma(T-k+1) + k log p + (T - k) log(1 - p), p = 1/(1+e^-eps0) */
    mpfr_set_si(t, T + 1, MPFR_RNDN); mpfr_lngamma(lp, t, MPFR_RNDN);
    mpfr_set_si(t, k + 1, MPFR_RNDN); mpfr_lngamma(t, t, MPFR_RNDN); mpfr_sub(lp, lp, t, MPFR_RNDN);
    mpfr_set_si(t, T - k + 1, MPFR_RNDN); mpfr_lngamma(t, t, MPFR_RNDN); mpfr_sub(lp, lp, t, MPFR_RNDN);
    mpfr_set_d(ee, eps0, MPFR_RNDN);
    mpfr_neg(t, ee, MPFR_RNDN); mpfr_exp(t, t, MPFR_RNDN); mpfr_log1p(t, t, MPFR_RNDN); /* log(1 + e^-e0) = -log p */
    mpfr_mul_si(u, t, k, MPFR_RNDN); mpfr_sub(lp, lp, u, MPFR_RNDN);
    mpfr_add(u, t, ee, MPFR_RNDN); /* -log(1 - p) = e0 + log(1 + e^-e0) */
    mpfr_mul_si(u, u, T - k, MPFR_RNDN); mpfr_sub(lp, lp, u, MPFR_RNDN);
    mpfr_exp(lp, lp, MPFR_RNDN); /* p_k */
    mpfr_exp(ee, ee, MPFR_RNDN); /* e^{eps0} */
    mpfr_set_zero(acc, 1);
    for (; k <= T; k++) {
        mpfr_set_si(l, 2 * k - T, MPFR_RNDN);
        mpfr_mul_d(l, l, eps0, MPFR_RNDN);
        mpfr_d_sub(l, eps, l, MPFR_RNDN);
        mpfr_expm1(l, l, MPFR_RNDN);
        mpfr_mul(t, lp, l, MPFR_RNDN);
        mpfr_sub(acc, acc, t, MPFR_RNDN); /* += p_k (1 - e^{eps - l_k}) */
        mpfr_div(u, t, acc, MPFR_RNDN);
        if (mpfr_cmp_d(u, 1e-40) > 0 || mpfr_cmp_d(u, -1e-40) < 0 || mpfr_zero_p(acc)) {}
        else if (k > 0) break;
        mpfr_mul_si(lp, lp, T - k, MPFR_RNDN);
        mpfr_div_si(lp, lp, k + 1, MPFR_RNDN);
        mpfr_mul(lp, lp, ee, MPFR_RNDN);
    }
    double d = mpfr_get_d(acc, MPFR_RNDN);
    mpfr_clears(lp, t, u, acc, ee, l, (mpfr_ptr)0);
    return d;
}

/* the former masses: exp(lgT - lgamma(k+1) - lgamma(T-k+1) + ...) in double, summed plainly */
static double rr_delta_lgamma(double eps0, int64_t T, double eps) {
    double lp = -log1p(exp(-eps0)), l1p = -eps0 - log1p(exp(-eps0)), lgT = lgamma((double)T + 1.0), d = 0;
    for (int64_t k = T; k >= 0; k--) {
        double l = (double)(2 * k - T) * eps0;
        if (l <= eps) break;
        double p = exp(lgT - lgamma((double)k + 1.0) - lgamma((double)(T - k) + 1.0) + (double)k * lp + (double)(T - k) * l1p);
        d += p * -expm1(eps - l);
    }
    return d;
}

int main(void) {
    struct { double e0; int64_t T; double eps; } cs[] = {
        {0.05, 10000, 20.0}, {0.01, 1000000, 60.0}, {1e-3, 100000000, 60.0}, {1e-3, 100000000, 75.0},
    };
    double worst_old = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        double ours = NAN, ref = rr_delta_mpfr(cs[i].e0, cs[i].T, cs[i].eps);
        T_OK(acct_rr_delta(&ours, cs[i].e0, cs[i].T, cs[i].eps));
        double rel = fabs(ours - ref) / ref;
        printf("RR e0=%g T=%lld eps=%g: ours %.17g mpfr %.17g rel %.2e\n", cs[i].e0, (long long)cs[i].T, cs[i].eps, ours, ref, rel);
        T_CHECK(ref > 1e-12 && rel <= 1e-10, "RR delta e0=%g T=%lld: rel error %.3g > 1e-10", cs[i].e0, (long long)cs[i].T, rel);
        /* round trip eps(delta(eps)) = eps */
        double e = NAN;
        T_OK(acct_rr_epsilon(&e, cs[i].e0, cs[i].T, ref));
        T_CHECK(fabs(e - cs[i].eps) <= 1e-8 * cs[i].eps, "RR round trip %g vs %g", e, cs[i].eps);
        if (cs[i].T == 100000000) {
            double old = rr_delta_lgamma(cs[i].e0, cs[i].T, cs[i].eps), ro = fabs(old - ref) / ref;
            printf("  negative control (lgamma masses in double): rel %.2e\n", ro);
            if (ro > worst_old) worst_old = ro;
        }
    }
    T_CHECK(worst_old > 1e-10, "negative control: the lgamma masses must miss the MPFR value at T = 1e8 (rel %.3g)", worst_old);

    /* PLD floating-point budget: positive, small, and the rigorous interval contains the plain one */
    acct_schedule s = {.n = 1};
    s.seg[0] = (acct_segment){ACCT_GAUSSIAN, 0.004, 2.0, 75000};
    acct_pld_result r;
    T_OK(acct_pld_epsilon(&r, &s, 1e-5, NULL));
    printf("PLD (2, 0.004, 75000, 1e-5): [%.9f, %.9f], with fp budget %.3g: [%.9f, %.9f]\n", r.lower, r.upper, r.fp_budget,
           r.lower_fp, r.upper_fp);
    T_CHECK(r.fp_budget > 0 && r.fp_budget < 1e-2 * 1e-5, "fp budget %g (must be > 0 and well below delta)", r.fp_budget);
    T_CHECK(r.upper_fp > r.upper && r.lower_fp < r.lower && r.lower_fp >= 0, "fp interval [%g, %g] vs [%g, %g]", r.lower_fp,
            r.upper_fp, r.lower, r.upper);
    T_CHECK(r.upper_fp - r.lower_fp < 0.005, "rigorous interval width %g (issue accuracy target 0.005)", r.upper_fp - r.lower_fp);
    acct_pld_result rd;
    T_OK(acct_pld_delta(&rd, &s, 2.38, NULL));
    T_CHECK(rd.upper_fp > rd.upper && rd.lower_fp <= rd.lower && rd.fp_budget > 0, "delta fp interval [%g, %g] vs [%g, %g]", rd.lower_fp, rd.upper_fp, rd.lower, rd.upper);

    /* sampler implementation delta (docs §10) */
    double tot, st;
    T_OK(acct_sampler_delta(&tot, &st, &s));
    double want = 0.004 * 0.5 * erfc((sqrt(2.0 * 53.0 * log(2.0)) - 0.5) / sqrt(2.0));
    T_CHECK(fabs(st - want) <= 1e-12 * want && fabs(tot - 75000 * want) <= 1e-12 * 75000 * want, "gaussian delta_impl %g vs %g", st, want);
    s.seg[0] = (acct_segment){ACCT_LAPLACE, 0.01, 2.0, 1000};
    T_OK(acct_sampler_delta(&tot, &st, &s));
    want = 0.01 * 0.5 * exp(-(52.0 * log(2.0) - 0.5));
    T_CHECK(fabs(st - want) <= 1e-12 * want, "laplace delta_impl %g vs %g", st, want);
    s.seg[0] = (acct_segment){ACCT_PURE, 0.01, 2.0, 1000};
    T_CHECK(acct_sampler_delta(&tot, &st, &s) == DP_ERR_NOT_SUPPORTED, "pure: not applicable");
    return t_finish();
}

/* accountant/tests/test_extremes.c — accountant answers at the extremes (issue 15, class 2):
 * over sigma 1e-300 .. 1e300, q 1e-300 .. 1, T 1 .. 1e12 every path returns an upper bound that
 * is not below a certified lower bound, +inf, or a clear refusal — never NaN, never a wrong
 * finite number. Deterministic (no randomness, so no false-reject probability).
 *
 * The lower bound (one step suffices: the T-step mechanism releases the first step, and
 * post-processing cannot lower epsilon): for the Poisson-subsampled Gaussian, remove direction,
 * P = (1-q) N(0, s^2) + q N(1, s^2) vs Q = N(0, s^2) on the event E = {z > 1/2}:
 *   Q(E) = Phi(-1/(2s)) = erfc(x)/2 with x = 1/(2 sqrt2 s), P(E) >= q (1 - Q(E)),
 *   (eps, delta)-DP needs P(E) <= e^eps Q(E) + delta, so eps >= log(P(E) - delta) - log Q(E);
 * log Q(E) is bounded above by erfc(x) <= e^{-x^2} / (x sqrt(pi)) beyond x = 20 (underflow-free).
 * For pure eps0 (randomized response, p = e^eps0 / (1 + e^eps0)): eps >= log((p - delta) / (1 - p)).
 * Negative control: the bound rejects epsilon = 0 at sigma 1e-200 (the old answer of rdp) and at
 * eps0 = 1e308 (the old answer of the exact RR composition). */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "accountant/acct.h"
#include "common/test.h"

static double log_erfc_upper(double x) {
    if (x < 20.0) return log(erfc(x));
    return -x * x - log(x) - 0.5 * log(M_PI);
}

static double gauss_lower(double q, double sigma, double delta) {
    double x = 1.0 / (2.0 * M_SQRT2 * sigma);
    double lq = log(0.5) + log_erfc_upper(x); /* >= log Q(E) */
    double qe = exp(lq);
    double pe = q * (1.0 - qe);
    if (!(pe > delta)) return 0.0;
    double lb = log(pe - delta) - lq;
    return lb > 0 ? lb : 0.0;
}

static double pure_lower(double eps0, double delta) {
    double p = 1.0 / (1.0 + exp(-eps0));
    if (!(p > delta)) return 0.0;
    double lb = log(p - delta) + eps0 + log1p(exp(-eps0)); /* - log(1 - p), no underflow */
    return lb > 0 ? lb : 0.0;
}

/* an answer is acceptable when it is >= the lower bound (up to 1e-9 relative, the accountants'
 * documented precision being far tighter) and not NaN; +inf is always acceptable */
static int acceptable(double eps, double lb) { return !isnan(eps) && eps >= lb * (1.0 - 1e-9); }

int main(void) {
    const double delta = 1e-5;
    double orders[ACCT_MAX_ORDERS];
    size_t no = acct_orders_grid(orders, ACCT_GRID_DPACCOUNTING);
    /* negative controls: the bound must reject the old wrong answers */
    T_CHECK(!acceptable(0.0, gauss_lower(0.01, 1e-200, delta)), "epsilon 0 at sigma 1e-200 must be rejected");
    T_CHECK(!acceptable(0.0, pure_lower(1e308, delta)), "epsilon 0 at eps0 1e308 must be rejected");
    T_CHECK(!acceptable(NAN, 0.0), "NaN must be rejected");

    static const double qs[] = {1e-300, 1e-10, 0.01, 0.5, 1.0};
    static const int64_t Ts[] = {1, 1000, 1000000000000LL};
    int n_rdp = 0, n_inf = 0;
    for (size_t iq = 0; iq < sizeof qs / sizeof qs[0]; iq++)
        for (size_t it = 0; it < sizeof Ts / sizeof Ts[0]; it++) {
            double prev = INFINITY;
            for (int e = -300; e <= 300; e += 20) {
                double sigma = pow(10.0, e);
                acct_schedule s = {.n = 1};
                s.seg[0] = (acct_segment){ACCT_GAUSSIAN, qs[iq], sigma, Ts[it]};
                double eps, ord;
                dp_status st = acct_rdp_epsilon(&eps, &ord, &s, orders, no, delta, ACCT_CONV_BALLE);
                T_CHECK(st == DP_OK, "rdp q=%g sigma=%g T=%lld: status %d (%s)", qs[iq], sigma, (long long)Ts[it], st,
                        dp_last_error());
                if (st != DP_OK) continue;
                double lb = gauss_lower(qs[iq], sigma, delta);
                T_CHECK(acceptable(eps, lb), "rdp q=%g sigma=%g T=%lld: epsilon %g below the lower bound %g", qs[iq],
                        sigma, (long long)Ts[it], eps, lb);
                /* more noise never raises epsilon */
                T_CHECK(eps <= prev * (1 + 1e-12) || isinf(prev), "rdp q=%g T=%lld: epsilon rises from %g to %g at sigma %g",
                        qs[iq], (long long)Ts[it], prev, eps, sigma);
                prev = eps;
                n_rdp++;
                if (isinf(eps)) n_inf++;
            }
        }
    T_CHECK(n_inf > 0 && n_inf < n_rdp, "both +inf (%d) and finite answers expected over the grid (%d)", n_inf, n_rdp);

    /* Laplace: RDP answers (never NaN) across b 1e-300 .. 1e300, also where its quadrature is too
     * costly (the RR bound of the amplified epsilon takes over), and not below the one-step bound
     * of q = 1 (Laplace with scale b is exactly (1/b)-DP: the pure lower bound applies) */
    static const double lb_b[] = {1e-300, 1e-5, 0.05, 1.0, 1e5, 1e300};
    for (size_t i = 0; i < sizeof lb_b / sizeof lb_b[0]; i++)
        for (int full = 0; full < 2; full++) {
            acct_schedule s = {.n = 1};
            s.seg[0] = (acct_segment){ACCT_LAPLACE, full ? 1.0 : 0.01, lb_b[i], 10};
            double eps, ord;
            dp_status st = acct_rdp_epsilon(&eps, &ord, &s, orders, no, delta, ACCT_CONV_BALLE);
            T_CHECK(st == DP_OK && !isnan(eps), "laplace rdp b=%g q=%g: status %d eps %g", lb_b[i], s.seg[0].q, st, eps);
            if (full) T_CHECK(eps >= pure_lower(1.0 / lb_b[i], delta) * (1 - 1e-9) || isinf(1.0 / lb_b[i]),
                              "laplace rdp b=%g q=1: epsilon %g below the pure lower bound %g", lb_b[i], eps,
                              pure_lower(1.0 / lb_b[i], delta));
        }

    /* PLD: an upper bound not below the lower bound, or a clear refusal (NOT_SUPPORTED) */
    static const double psig[] = {1e-300, 1e-200, 1e-5, 0.5, 1.0, 1e5, 1e160, 1e300};
    for (size_t i = 0; i < sizeof psig / sizeof psig[0]; i++) {
        acct_schedule s = {.n = 1};
        s.seg[0] = (acct_segment){ACCT_GAUSSIAN, 0.01, psig[i], 10};
        acct_pld_result r;
        acct_pld_opts po;
        acct_pld_default_opts(&po);
        po.upper_only = 1;
        dp_status st = acct_pld_epsilon(&r, &s, delta, &po);
        T_CHECK(st == DP_OK || st == DP_ERR_NOT_SUPPORTED, "pld sigma=%g: status %d (%s)", psig[i], st, dp_last_error());
        if (st == DP_OK)
            T_CHECK(acceptable(r.upper, gauss_lower(0.01, psig[i], delta)), "pld sigma=%g: upper %g below the lower bound",
                    psig[i], r.upper);
        else T_CHECK(dp_last_error()[0] != 0, "pld sigma=%g: a refusal names its reason", psig[i]);
        dp_clear_error();
    }

    /* pure: basic and exact RR composition */
    static const double e0s[] = {1e-300, 1e-5, 1.0, 699.0, 701.0, 1e10, 1e308};
    for (size_t i = 0; i < sizeof e0s / sizeof e0s[0]; i++)
        for (size_t it = 0; it < 2; it++) {
            int64_t T = it ? 1000 : 1;
            acct_schedule s = {.n = 1};
            s.seg[0] = (acct_segment){ACCT_PURE, 1.0, e0s[i], T};
            double ex, basic;
            T_OK(acct_pure_basic(&basic, &s));
            dp_status st = acct_pure_exact(&ex, &s, delta);
            T_CHECK(st == DP_OK, "pure exact eps0=%g T=%lld: %s", e0s[i], (long long)T, dp_last_error());
            double lb = pure_lower(e0s[i], delta);
            T_CHECK(acceptable(ex, lb) && ex <= basic, "pure exact eps0=%g T=%lld: %g not in [%g, basic %g]", e0s[i],
                    (long long)T, ex, lb, basic);
            double d;
            T_OK(acct_rr_delta(&d, e0s[i], T, ex));
            /* |d delta / d eps| <= 1, so rounding eps (|ex| * DBL_EPSILON) moves delta by as much */
            T_CHECK(d <= delta * (1 + 1e-6) + 4.0 * DBL_EPSILON * ex || ex == basic, "pure eps0=%g T=%lld: delta(eps(delta)) = %.17g > %g (eps %.17g)", e0s[i],
                    (long long)T, d, delta, ex);
        }

    /* acct_one_step_lower (audit-accounting's lower bound, issue 29 items 6 and 11): never above a
     * rigorous upper bound of one step (certified RDP; for pure the exact per-step epsilon
     * log(1 + q (e^eps0 - 1)) at delta 0, which bounds every delta), and within 1e-8 of this
     * test's own bound where that applies (q = 1 pure; the Gaussian at q); negative control: the
     * old lower bound 0 of a pure eps0 = 1e308 claim at q = 0.5 is below it */
    {
        int n_lb = 0;
        for (size_t iq = 1; iq < sizeof qs / sizeof qs[0]; iq++)
            for (int e = -300; e <= 300; e += 20) {
                acct_segment g = {ACCT_GAUSSIAN, qs[iq], pow(10.0, e), 1};
                double lb, up;
                T_OK(acct_one_step_lower(&lb, &g, delta));
                acct_schedule s = {.n = 1, .seg = {g}};
                if (acct_rdp_epsilon_certified(&up, NULL, &s, orders, no, delta) != DP_OK) { dp_clear_error(); continue; }
                T_CHECK(lb <= up && lb >= fmin(gauss_lower(qs[iq], g.param, delta), DBL_MAX) * (1 - 1e-8) - 1e-11,
                        "gauss q=%g sigma=%g: one-step lower %g outside [test bound %g, certified upper %g]", qs[iq],
                        g.param, lb, gauss_lower(qs[iq], g.param, delta), up);
                n_lb++;
            }
        static const double e0[] = {1e-300, 1e-6, 0.1, 1, 10, 700, 1e3, 1e308};
        for (size_t iq = 1; iq < sizeof qs / sizeof qs[0]; iq++)
            for (size_t i = 0; i < sizeof e0 / sizeof e0[0]; i++) {
                acct_segment p = {ACCT_PURE, qs[iq], e0[i], 1};
                double lb, step;
                T_OK(acct_one_step_lower(&lb, &p, delta));
                T_OK(acct_pure_step_eps(&step, &p));
                T_CHECK(lb <= step, "pure q=%g eps0=%g: one-step lower %g above the step's epsilon %g", qs[iq], e0[i], lb,
                        step);
                if (qs[iq] == 1.0)
                    T_CHECK(lb >= pure_lower(e0[i], delta) * (1 - 1e-8) - 1e-11, "pure eps0=%g: lower %g below %g", e0[i],
                            lb, pure_lower(e0[i], delta));
                n_lb++;
            }
        double lb;
        acct_segment big = {ACCT_PURE, 0.5, 1e308, 10};
        T_OK(acct_one_step_lower(&lb, &big, delta));
        T_CHECK(lb > 1e307 && !acceptable(0.0, lb), "eps0 1e308 at q 0.5: one-step lower %g rejects the old lower 0", lb);
        T_CHECK(n_lb > 100, "one-step lower bounds checked: %d", n_lb);
    }

    /* calibration: a precision below the double spacing is refused, never a hang */
    {
        acct_schedule s = {.n = 1};
        s.seg[0] = (acct_segment){ACCT_GAUSSIAN, 0.01, 1.0, 100};
        double p, e;
        T_CHECK(acct_calibrate(&p, &e, &s, ACCT_RDP, 1.0, delta, 1e-16, NULL, 0) == DP_ERR_INVALID,
                "precision 1e-16 must be refused");
        dp_clear_error();
        T_OK(acct_calibrate(&p, &e, &s, ACCT_RDP, 1.0, delta, ACCT_CALIB_MIN_PREC, NULL, 0));
        T_CHECK(e <= 1.0, "calibrated epsilon %g <= target", e);
    }
    return t_finish();
}

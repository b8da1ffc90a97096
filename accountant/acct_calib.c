/* accountant/acct_calib.c — epsilon by accountant and calibration of the noise. */
#include <math.h>
#include <stdlib.h>

#include "accountant/acct.h"

dp_status acct_epsilon_by(double *eps, const acct_schedule *s, acct_kind kind, double delta, const double *orders,
                          size_t n_orders) {
    switch (kind) {
    case ACCT_RDP: {
        double grid[ACCT_MAX_ORDERS];
        if (!orders || n_orders == 0) { n_orders = acct_orders_grid(grid, ACCT_GRID_DPACCOUNTING); orders = grid; }
        return acct_rdp_epsilon(eps, NULL, s, orders, n_orders, delta, ACCT_CONV_BALLE);
    }
    case ACCT_PLD: {
        acct_pld_result r;
        acct_pld_opts po;
        acct_pld_default_opts(&po);
        po.upper_only = 1; /* only the upper end is used: skip the optimistic pass */
        DP_TRY(acct_pld_epsilon(&r, s, delta, &po));
        *eps = r.upper;
        return DP_OK;
    }
    case ACCT_PURE_ACC: {
        dp_status st = acct_pure_exact(eps, s, delta);
        if (st == DP_ERR_NOT_SUPPORTED && s->seg[0].mech != ACCT_GAUSSIAN) { dp_clear_error(); return acct_pure_basic(eps, s); }
        return st;
    }
    case ACCT_GDP: {
        double mu;
        DP_TRY(acct_gdp_mu(&mu, s));
        *eps = acct_gdp_epsilon(mu, delta);
        return DP_OK;
    }
    }
    return dp_error(DP_ERR_INTERNAL, "unknown accountant");
}

/* epsilon with every segment parameter scaled so that seg[0].param == x */
static dp_status eps_at(double *e, const acct_schedule *s, double x, acct_kind kind, double delta, const double *orders,
                        size_t n) {
    acct_schedule t = *s;
    double f = x / s->seg[0].param;
    for (int i = 0; i < t.n; i++) t.seg[i].param = s->seg[i].param * f;
    return acct_epsilon_by(e, &t, kind, delta, orders, n);
}

dp_status acct_calibrate(double *param, double *eps_at_out, const acct_schedule *s, acct_kind kind, double target_eps,
                         double delta, double rel_prec, const double *orders, size_t n_orders) {
    DP_TRY(acct_schedule_validate(s));
    if (!(target_eps > 0) || !isfinite(target_eps))
        return dp_error(DP_ERR_INVALID, "--target-epsilon must be > 0 and finite (got %g)", target_eps);
    if (!(rel_prec >= ACCT_CALIB_MIN_PREC && rel_prec < 1))
        return dp_error(DP_ERR_INVALID, "--precision must be in [%g, 1) (got %g): a double cannot resolve a finer "
                        "relative step", ACCT_CALIB_MIN_PREC, rel_prec);
    int pure = s->seg[0].mech == ACCT_PURE; /* epsilon increases with the parameter */
    /* "good" = eps(x) <= target. noise: good is [x*, inf); pure: (0, x*] */
    double x = s->seg[0].param, good = NAN, bad = NAN, e;
    if (kind == ACCT_PLD && !pure) {
        /* start from the RDP calibration: RDP is looser, so its sigma is good for PLD too */
        double xr, er;
        if (acct_calibrate(&xr, &er, s, ACCT_RDP, target_eps, delta, 1e-3, NULL, 0) == DP_OK) x = xr;
        else dp_clear_error();
    }
    DP_TRY(eps_at(&e, s, x, kind, delta, orders, n_orders));
    if (e <= target_eps) good = x; else bad = x;
    double step = kind == ACCT_PLD && !pure ? 0.9 : 0.5; /* factor towards the other side */
    for (int it = 0; it < 200 && (isnan(good) || isnan(bad)); it++) {
        double y;
        if (isnan(good)) y = pure ? bad * step : bad / step; /* move towards more noise / smaller eps0 */
        else y = pure ? good / step : good * step;
        if (y < 1e-8 || y > 1e8) break;
        DP_TRY(eps_at(&e, s, y, kind, delta, orders, n_orders));
        if (e <= target_eps) good = y; else bad = y;
        if (it > 8) step = 0.5;
    }
    if (isnan(good)) return dp_error(DP_ERR_INVALID, "calibration: no parameter in [1e-8, 1e8] reaches epsilon %g", target_eps);
    if (isnan(bad)) { /* the whole range is good: report the boundary */
        DP_TRY(eps_at(&e, s, good, kind, delta, orders, n_orders));
        *param = good;
        *eps_at_out = e;
        return DP_OK;
    }
    /* bisection in log space: each pass halves log(bad/good) from at most log(1e16), so 64 passes
     * reach any precision >= ACCT_CALIB_MIN_PREC; the cap and the "no double in between" stop make
     * the loop end whatever rounding does */
    for (int it = 0; fabs(good / bad - 1.0) > rel_prec; it++) {
        double m = sqrt(good * bad);
        if (it >= ACCT_CALIB_MAX_ITER || m == good || m == bad)
            return dp_error(DP_ERR_NUMERIC, "calibration: precision %g not reached after %d bisections (bracket [%.17g, "
                            "%.17g])", rel_prec, it, pure ? bad : good, pure ? good : bad);
        DP_TRY(eps_at(&e, s, m, kind, delta, orders, n_orders));
        if (e <= target_eps) good = m; else bad = m;
    }
    DP_TRY(eps_at(&e, s, good, kind, delta, orders, n_orders));
    *param = good;
    *eps_at_out = e;
    return DP_OK;
}

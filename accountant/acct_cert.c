/* accountant/acct_cert.c — certified RDP: the integer-order RDP and the Balle et
 * al. conversion evaluated in MPFR (128 bits) with every operation rounded in the
 * direction that can only increase the final epsilon (docs/accounting.md §certified). */
#include <gmp.h>
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>

#include "accountant/acct.h"

#define PREC 128

/* out >= log(1 + q (e^{e0} - 1)) (up = 1) or <= (up = 0) */
static void amplified(mpfr_t out, double e0, double q, int up) {
    mpfr_rnd_t r = up ? MPFR_RNDU : MPFR_RNDD;
    mpfr_set_d(out, e0, r);
    if (q >= 1.0) return;
    mpfr_expm1(out, out, r);
    mpfr_mul_d(out, out, q, r);
    mpfr_log1p(out, out, r);
}

/* per-step pure epsilon as an interval [lo, hi] */
static dp_status pure_eps(mpfr_t lo, mpfr_t hi, const acct_segment *g) {
    mpfr_t e;
    mpfr_init2(e, PREC);
    if (g->mech == ACCT_LAPLACE) {
        mpfr_set_ui(e, 1, MPFR_RNDN);
        mpfr_div_d(e, e, g->param, MPFR_RNDU);
        amplified(hi, mpfr_get_d(e, MPFR_RNDU), g->q, 1);
        mpfr_set_ui(e, 1, MPFR_RNDN);
        mpfr_div_d(e, e, g->param, MPFR_RNDD);
        amplified(lo, mpfr_get_d(e, MPFR_RNDD), g->q, 0);
    } else {
        amplified(hi, g->param, g->q, 1);
        amplified(lo, g->param, g->q, 0);
    }
    mpfr_clear(e);
    return DP_OK;
}

dp_status acct_rdp_step_certified(double *rdp_up, const acct_segment *g, int64_t alpha) {
    if (alpha < 2) return dp_error(DP_ERR_INVALID, "certified RDP needs an integer order >= 2 (got %lld)", (long long)alpha);
    mpfr_t acc, t, u, v, l1q, s2;
    mpfr_inits2(PREC, acc, t, u, v, l1q, s2, (mpfr_ptr)0);
    dp_status st = DP_OK;
    if (g->mech == ACCT_GAUSSIAN) {
        mpfr_set_d(s2, g->param, MPFR_RNDD);
        mpfr_sqr(s2, s2, MPFR_RNDD);
        mpfr_mul_ui(s2, s2, 2, MPFR_RNDD); /* 2 sigma^2, rounded down */
        if (g->q >= 1.0) {
            mpfr_set_si(acc, alpha, MPFR_RNDN);
            mpfr_div(acc, acc, s2, MPFR_RNDU); /* rdp = alpha / (2 sigma^2) */
        } else {
            mpz_t bin;
            mpz_init(bin);
            mpfr_set_zero(acc, 1);
            mpfr_set_d(l1q, 1.0, MPFR_RNDN);
            mpfr_sub_d(l1q, l1q, g->q, MPFR_RNDU); /* 1 - q, up */
            for (int64_t i = 0; i <= alpha; i++) {
                mpz_bin_uiui(bin, (unsigned long)alpha, (unsigned long)i);
                mpfr_set_z(t, bin, MPFR_RNDU);
                mpfr_pow_ui(u, l1q, (unsigned long)(alpha - i), MPFR_RNDU);
                mpfr_mul(t, t, u, MPFR_RNDU);
                mpfr_set_d(u, g->q, MPFR_RNDU);
                mpfr_pow_ui(u, u, (unsigned long)i, MPFR_RNDU);
                mpfr_mul(t, t, u, MPFR_RNDU);
                mpfr_set_si(v, i, MPFR_RNDN);
                mpfr_mul_si(v, v, i - 1, MPFR_RNDU); /* i^2 - i, exact */
                mpfr_div(v, v, s2, MPFR_RNDU);
                mpfr_exp(v, v, MPFR_RNDU);
                mpfr_mul(t, t, v, MPFR_RNDU);
                mpfr_add(acc, acc, t, MPFR_RNDU);
            }
            mpz_clear(bin);
            mpfr_log(acc, acc, MPFR_RNDU);
            mpfr_div_si(acc, acc, alpha - 1, MPFR_RNDU);
        }
    } else if (g->mech == ACCT_LAPLACE && g->q >= 1.0) {
        /* (1/(a-1)) log( a/(2a-1) e^{(a-1)/b} + (a-1)/(2a-1) e^{-a/b} ) */
        mpfr_set_si(t, alpha, MPFR_RNDN);
        mpfr_div_si(t, t, 2 * alpha - 1, MPFR_RNDU);
        mpfr_set_si(u, alpha - 1, MPFR_RNDN);
        mpfr_div_d(u, u, g->param, MPFR_RNDU);
        mpfr_exp(u, u, MPFR_RNDU);
        mpfr_mul(t, t, u, MPFR_RNDU);
        mpfr_set_si(v, alpha - 1, MPFR_RNDN);
        mpfr_div_si(v, v, 2 * alpha - 1, MPFR_RNDU);
        mpfr_set_si(u, alpha, MPFR_RNDN);
        mpfr_div_d(u, u, g->param, MPFR_RNDD);
        mpfr_neg(u, u, MPFR_RNDN);
        mpfr_exp(u, u, MPFR_RNDU);
        mpfr_mul(v, v, u, MPFR_RNDU);
        mpfr_add(acc, t, v, MPFR_RNDU);
        mpfr_log(acc, acc, MPFR_RNDU);
        mpfr_div_si(acc, acc, alpha - 1, MPFR_RNDU);
    } else if (g->mech == ACCT_PURE || g->mech == ACCT_LAPLACE) {
        /* RR bound: (1/(a-1)) [ -log1p(e^{-e}) + log(e^{(a-1)e} + e^{-a e}) ], e in [lo, hi] */
        mpfr_t lo, hi;
        mpfr_inits2(PREC, lo, hi, (mpfr_ptr)0);
        pure_eps(lo, hi, g);
        mpfr_mul_si(t, hi, alpha - 1, MPFR_RNDU);
        mpfr_exp(t, t, MPFR_RNDU);
        mpfr_mul_si(u, lo, alpha, MPFR_RNDD);
        mpfr_neg(u, u, MPFR_RNDN);
        mpfr_exp(u, u, MPFR_RNDU);
        mpfr_add(t, t, u, MPFR_RNDU);
        mpfr_log(t, t, MPFR_RNDU);
        mpfr_neg(v, hi, MPFR_RNDN); /* c = log1p(e^{-e}) >= log1p(e^{-hi}), rounded down */
        mpfr_exp(v, v, MPFR_RNDD);
        mpfr_log1p(v, v, MPFR_RNDD);
        mpfr_sub(acc, t, v, MPFR_RNDU);
        mpfr_div_si(acc, acc, alpha - 1, MPFR_RNDU);
        mpfr_clears(lo, hi, (mpfr_ptr)0);
    } else {
        st = dp_error(DP_ERR_NOT_SUPPORTED, "certified RDP: unsupported mechanism");
    }
    if (st == DP_OK) *rdp_up = mpfr_get_d(acc, MPFR_RNDU);
    mpfr_clears(acc, t, u, v, l1q, s2, (mpfr_ptr)0);
    return st;
}

dp_status acct_rdp_epsilon_certified(double *eps, double *opt_order, const acct_schedule *s, const double *orders,
                                     size_t n, double delta) {
    DP_TRY(acct_schedule_validate(s));
    if (!(delta > 0 && delta < 1)) return dp_error(DP_ERR_INVALID, "delta must be in (0, 1) (got %g)", delta);
    double best = INFINITY, bo = NAN;
    mpfr_t r, t, w;
    mpfr_inits2(PREC, r, t, w, (mpfr_ptr)0);
    int used = 0;
    for (size_t k = 0; k < n; k++) {
        double a = orders[k];
        if (a != floor(a) || a < 2 || a > 100000) continue; /* integer orders only */
        int64_t ai = (int64_t)a;
        mpfr_set_zero(r, 1);
        dp_status st = DP_OK;
        for (int j = 0; j < s->n && st == DP_OK; j++) {
            double x;
            st = acct_rdp_step_certified(&x, &s->seg[j], ai);
            if (st != DP_OK) break;
            mpfr_set_d(t, x, MPFR_RNDU);
            mpfr_mul_si(t, t, (long)s->seg[j].steps, MPFR_RNDU);
            mpfr_add(r, r, t, MPFR_RNDU);
        }
        if (st != DP_OK) { mpfr_clears(r, t, w, (mpfr_ptr)0); return st; }
        /* eps = r + log1p(-1/a) - (log delta + log a)/(a - 1) */
        mpfr_set_si(t, ai, MPFR_RNDN);
        mpfr_ui_div(t, 1, t, MPFR_RNDD);
        mpfr_neg(t, t, MPFR_RNDN);
        mpfr_log1p(t, t, MPFR_RNDU);
        mpfr_add(r, r, t, MPFR_RNDU);
        mpfr_set_d(t, delta, MPFR_RNDN);
        mpfr_log(t, t, MPFR_RNDD);
        mpfr_set_si(w, ai, MPFR_RNDN);
        mpfr_log(w, w, MPFR_RNDD);
        mpfr_add(t, t, w, MPFR_RNDD);
        mpfr_neg(t, t, MPFR_RNDN);
        mpfr_div_si(t, t, ai - 1, MPFR_RNDU);
        mpfr_add(r, r, t, MPFR_RNDU);
        double e = mpfr_get_d(r, MPFR_RNDU);
        used++;
        if (e < best) { best = e; bo = a; }
    }
    mpfr_clears(r, t, w, (mpfr_ptr)0);
    if (!used) return dp_error(DP_ERR_INVALID, "certified RDP needs at least one integer order >= 2 in the grid");
    *eps = best < 0 ? 0 : best;
    if (opt_order) *opt_order = bo;
    return DP_OK;
}

/* attacks/audit_stats.h — the statistics of the privacy audits and membership-inference
 * runs (docs/audits.md): regularized incomplete beta, binomial tails, Clopper-Pearson
 * intervals, the normal quantile, the (FPR, FNR) -> epsilon conversions (standard and
 * Gaussian trade-off), threshold selection on a calibration split, the one-run bound of
 * Steinke, Nasr and Jagielski (2023), ROC curves and the AUC with its confidence bound.
 * Every function is pure (no global state), so it is safe in threads. */
#ifndef AUDIT_STATS_H
#define AUDIT_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* I_x(a, b), a, b > 0, x in [0, 1]: continued fraction (modified Lentz), evaluated on the
 * side where it converges fast (x < (a+1)/(a+b+2), else 1 - I_{1-x}(b, a)). NaN on bad input. */
double audit_betainc(double a, double b, double x);
/* P[Bin(n, p) <= k] and P[Bin(n, p) >= k] (0 <= k <= n). */
double audit_binom_cdf(int64_t k, int64_t n, double p);
double audit_binom_sf(int64_t k, int64_t n, double p);
/* Clopper-Pearson one-sided bounds at level alpha (0 < alpha < 1) for k successes in n:
 * upper = the p with P[Bin(n, p) <= k] = alpha (1 when k = n),
 * lower = the p with P[Bin(n, p) >= k] = alpha (0 when k = 0); bisection to 2^-60. */
double audit_cp_upper(int64_t k, int64_t n, double alpha);
double audit_cp_lower(int64_t k, int64_t n, double alpha);

/* Standard normal cdf, upper tail and quantile (Acklam's start + two Halley steps on erfc). */
double audit_phi(double x);
double audit_phi_inv(double p);

/* (FPR, FNR) -> epsilon at delta (Kairouz et al. 2015): the largest of
 * ln((1 - delta - fpr) / fnr) and ln((1 - delta - fnr) / fpr), at least 0. */
double audit_eps_from_rates(double fpr, double fnr, double delta);
/* Gaussian trade-off: the mu for which (fpr, fnr) lies on G_mu, mu = Phi^-1(1 - fpr) - Phi^-1(fnr)
 * (0 when negative). */
double audit_mu_from_rates(double fpr, double fnr);

/* One threshold test "member iff score > tau" and its counts. */
typedef struct {
    double tau;
    int64_t fp, n_neg;  /* negatives (without the canary / non-members) scored > tau */
    int64_t fn, n_pos;  /* positives (with the canary / members) scored <= tau      */
    double fpr_hi, fnr_hi;   /* Clopper-Pearson upper bounds, alpha/2 each          */
    double fpr_lo, fnr_lo;   /* Clopper-Pearson lower bounds, alpha/2 each          */
    double eps_lb;           /* audit_eps_from_rates(fpr_hi, fnr_hi, delta)         */
    double mu_lb;            /* audit_mu_from_rates(fpr_hi, fnr_hi)                 */
} audit_test;

typedef enum { AUDIT_PICK_EPS = 0, AUDIT_PICK_MU = 1 } audit_pick;
/* Threshold (among the pooled scores at up to 400 evenly spaced ranks) maximising eps_lb
 * (AUDIT_PICK_EPS) or mu_lb (AUDIT_PICK_MU) with Clopper-Pearson bounds at alpha/2 per rate;
 * when no candidate has a positive bound (tiny splits), the one maximising the point estimate
 * with rates smoothed to (k + 1/2) / (n + 1). Used on the calibration split only. neg and pos
 * are sorted in place. */
dp_status audit_pick_threshold(double *tau, double *neg, size_t n_neg, double *pos, size_t n_pos, double alpha,
                               double delta, audit_pick pick);
/* Counts and bounds of the test at tau on (fresh) scores. */
void audit_eval_threshold(audit_test *t, const double *neg, size_t n_neg, const double *pos, size_t n_pos,
                          double tau, double alpha, double delta);

/* Steinke-Nasr-Jagielski one-run audit: p-value of >= v correct out of r guesses among m
 * canaries under (eps, delta)-DP: P[Bin(r, s) >= v] + 2 m delta max_{i=1..v} P[v-i <= Bin(r, s) < v] / i,
 * s = e^eps / (1 + e^eps) (capped at 1). */
double audit_onerun_pvalue(int64_t m, int64_t r, int64_t v, double eps, double delta);
/* Largest eps with p-value < alpha (bisection on [0, 50] to 1e-6; 0 when none). */
double audit_onerun_eps(int64_t m, int64_t r, int64_t v, double delta, double alpha);

/* ROC of "member iff score > tau" over every tau: fpr/tpr get at most cap points (the
 * full curve thinned evenly, endpoints (0,0) and (1,1) kept), *npts their number. AUC by
 * the Mann-Whitney statistic (ties count 1/2). neg and pos are sorted in place. */
dp_status audit_roc(double *fpr, double *tpr, size_t *npts, size_t cap, double *auc, double *neg, size_t n_neg,
                    double *pos, size_t n_pos);
/* Hanley-McNeil standard error of an AUC. */
double audit_auc_se(double auc, size_t n_neg, size_t n_pos);
/* The test at empirical FPR <= target (docs/audits.md "TPR at FPR"): tau is the
 * (n_neg - 1 - floor(target n_neg))-th smallest negative score (-inf when every negative may
 * pass), so at most floor(target n_neg) negatives score above it; bounds at alpha/2 each. */
void audit_tpr_at_fpr(audit_test *t, const double *neg_sorted, size_t n_neg, const double *pos_sorted, size_t n_pos,
                      double target, double alpha);

int audit_cmp_double(const void *a, const void *b);

#endif

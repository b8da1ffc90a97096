/* attacks/audit_stats.c — statistics of the audits (definitions in docs/audits.md). */
#include "attacks/audit_stats.h"
#include "common/alloc.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

int audit_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Continued fraction of I_x(a, b) (modified Lentz), converging for x < (a+1)/(a+b+2). */
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300, eps = 1e-16;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0;
    double c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double h = d;
    /* the number of terms grows like sqrt(max(a, b)); the cap covers a, b up to ~1e12 */
    for (int64_t m = 1; m <= 10000000; m++) {
        double m2 = 2.0 * (double)m, md = (double)m;
        double aa = md * (b - md) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + md) * (qab + md) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < eps) break;
    }
    return h;
}

double audit_betainc(double a, double b, double x) {
    if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1)) return NAN;
    if (x == 0) return 0.0;
    if (x == 1) return 1.0;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1.0) / (a + b + 2.0)) return exp(lbt) * betacf(a, b, x) / a;
    return 1.0 - exp(lbt) * betacf(b, a, 1.0 - x) / b;
}

double audit_binom_cdf(int64_t k, int64_t n, double p) {
    if (k < 0) return 0.0;
    if (k >= n) return 1.0;
    return audit_betainc((double)(n - k), (double)(k + 1), 1.0 - p);
}

double audit_binom_sf(int64_t k, int64_t n, double p) {
    if (k <= 0) return 1.0;
    if (k > n) return 0.0;
    return audit_betainc((double)k, (double)(n - k + 1), p);
}

/* Bisection for the root of a function of p decreasing (dir = -1) or increasing (+1) on
 * [0, 1], to 2^-60 absolute or until the midpoint stops moving. */
static double bisect_p(int64_t k, int64_t n, double alpha, int upper) {
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 200; it++) {
        double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi || hi - lo < 0x1p-60) break;
        /* upper: P[Bin <= k](p) decreases in p; lower: P[Bin >= k](p) increases in p */
        double f = upper ? audit_binom_cdf(k, n, mid) : audit_binom_sf(k, n, mid);
        if (upper ? (f > alpha) : (f < alpha)) lo = mid; else hi = mid;
    }
    return upper ? hi : lo; /* conservative end */
}

double audit_cp_upper(int64_t k, int64_t n, double alpha) {
    if (n <= 0 || k < 0 || k > n || !(alpha > 0 && alpha < 1)) return NAN;
    if (k == n) return 1.0;
    if (k == 0) return -expm1(log(alpha) / (double)n); /* closed form 1 - alpha^(1/n) */
    return bisect_p(k, n, alpha, 1);
}

double audit_cp_lower(int64_t k, int64_t n, double alpha) {
    if (n <= 0 || k < 0 || k > n || !(alpha > 0 && alpha < 1)) return NAN;
    if (k == 0) return 0.0;
    if (k == n) return exp(log(alpha) / (double)n); /* alpha^(1/n) */
    return bisect_p(k, n, alpha, 0);
}

double audit_phi(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

double audit_phi_inv(double p) {
    if (!(p > 0 && p < 1)) return p == 0 ? -INFINITY : p == 1 ? INFINITY : NAN;
    if (p > 0.5) return -audit_phi_inv(1.0 - p); /* 1 - p is exact for p >= 0.5 */
    /* p <= 0.5: x <= 0, Phi(x) = erfc(|x|/sqrt2)/2 is accurate in the tail; bisection */
    double lo = -40.0, hi = 0.0;
    for (int it = 0; it < 200; it++) {
        double mid = 0.5 * (lo + hi);
        if (mid <= lo || mid >= hi) break;
        if (audit_phi(mid) < p) lo = mid; else hi = mid;
    }
    return 0.5 * (lo + hi);
}

double audit_eps_from_rates(double fpr, double fnr, double delta) {
    double e1 = (fnr > 0) ? log((1.0 - delta - fpr) / fnr) : INFINITY;
    double e2 = (fpr > 0) ? log((1.0 - delta - fnr) / fpr) : INFINITY;
    if (1.0 - delta - fpr <= 0) e1 = 0;
    if (1.0 - delta - fnr <= 0) e2 = 0;
    double e = e1 > e2 ? e1 : e2;
    return (e > 0) ? e : 0.0;
}

double audit_mu_from_rates(double fpr, double fnr) {
    double mu = audit_phi_inv(1.0 - fpr) - audit_phi_inv(fnr);
    return (mu > 0) ? mu : 0.0;
}

/* Number of sorted values v[0..n) that are <= x. */
static size_t count_le(const double *v, size_t n, double x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] <= x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

void audit_eval_threshold(audit_test *t, const double *neg, size_t n_neg, const double *pos, size_t n_pos,
                          double tau, double alpha, double delta) {
    /* neg and pos must be sorted ascending */
    t->tau = tau;
    t->n_neg = (int64_t)n_neg;
    t->n_pos = (int64_t)n_pos;
    t->fp = (int64_t)(n_neg - count_le(neg, n_neg, tau));
    t->fn = (int64_t)count_le(pos, n_pos, tau);
    t->fpr_hi = audit_cp_upper(t->fp, t->n_neg, alpha / 2);
    t->fnr_hi = audit_cp_upper(t->fn, t->n_pos, alpha / 2);
    t->fpr_lo = audit_cp_lower(t->fp, t->n_neg, alpha / 2);
    t->fnr_lo = audit_cp_lower(t->fn, t->n_pos, alpha / 2);
    t->eps_lb = audit_eps_from_rates(t->fpr_hi, t->fnr_hi, delta);
    t->mu_lb = audit_mu_from_rates(t->fpr_hi, t->fnr_hi);
}

#define AUDIT_MAX_CANDIDATES 400

dp_status audit_pick_threshold(double *tau, double *neg, size_t n_neg, double *pos, size_t n_pos, double alpha,
                               double delta, audit_pick pick) {
    if (n_neg == 0 || n_pos == 0) return dp_error(DP_ERR_INVALID, "threshold selection needs scores on both sides");
    qsort(neg, n_neg, sizeof *neg, audit_cmp_double);
    qsort(pos, n_pos, sizeof *pos, audit_cmp_double);
    /* candidates: the pooled scores at AUDIT_MAX_CANDIDATES evenly spaced ranks */
    size_t ntot = n_neg + n_pos, ncand = ntot < AUDIT_MAX_CANDIDATES ? ntot : AUDIT_MAX_CANDIDATES;
    double *all = dp_malloc(ntot * sizeof *all);
    if (!all) return DP_ERR_NOMEM;
    for (size_t i = 0, j = 0, k = 0; k < ntot; k++)
        all[k] = (j >= n_pos || (i < n_neg && neg[i] <= pos[j])) ? neg[i++] : pos[j++];
    double best = -1.0, best_pt = -1.0, tau_pt = neg[n_neg - 1];
    *tau = neg[n_neg - 1];
    for (size_t c = 0; c < ncand; c++) {
        size_t r = (ncand == 1) ? 0 : (size_t)((double)c * (double)(ntot - 1) / (double)(ncand - 1));
        double cand = all[r];
        /* primary: the bound itself (Clopper-Pearson at alpha/2 per rate) */
        audit_test t;
        audit_eval_threshold(&t, neg, n_neg, pos, n_pos, cand, alpha, delta);
        double v = pick == AUDIT_PICK_EPS ? t.eps_lb : t.mu_lb;
        if (v > best) { best = v; *tau = cand; }
        /* fallback when no candidate has a positive bound (tiny calibration splits): the point
         * estimate with rates smoothed to (k + 1/2) / (n + 1) */
        double fpr = ((double)t.fp + 0.5) / ((double)n_neg + 1), fnr = ((double)t.fn + 0.5) / ((double)n_pos + 1);
        double w = pick == AUDIT_PICK_EPS ? audit_eps_from_rates(fpr, fnr, delta) : audit_mu_from_rates(fpr, fnr);
        if (w > best_pt) { best_pt = w; tau_pt = cand; }
    }
    if (!(best > 0)) *tau = tau_pt;
    dp_free(all);
    return DP_OK;
}

/* ---------------------------------------------------------------- one run ---- */
static double binom_logpmf(int64_t j, int64_t r, double ls, double l1s) {
    return lgamma((double)r + 1) - lgamma((double)j + 1) - lgamma((double)(r - j) + 1) + (double)j * ls +
           (double)(r - j) * l1s;
}

double audit_onerun_pvalue(int64_t m, int64_t r, int64_t v, double eps, double delta) {
    if (v <= 0) return 1.0;
    double s = 1.0 / (1.0 + exp(-eps));
    double ls = -log1p(exp(-eps)), l1s = -log1p(exp(eps)); /* ln s, ln(1 - s) */
    double p = audit_binom_sf(v, r, s);
    if (delta > 0) {
        double alpha = 0.0, sum = 0.0;
        for (int64_t i = 1; i <= v; i++) {
            sum += exp(binom_logpmf(v - i, r, ls, l1s)); /* P[v - i <= Bin(r, s) < v] */
            if (sum > (double)i * alpha) alpha = sum / (double)i;
        }
        p += alpha * delta * 2.0 * (double)m;
    }
    return p < 1.0 ? p : 1.0;
}

double audit_onerun_eps(int64_t m, int64_t r, int64_t v, double delta, double alpha) {
    if (r <= 0 || audit_onerun_pvalue(m, r, v, 0.0, delta) >= alpha) return 0.0;
    double lo = 0.0, hi = 50.0;
    if (audit_onerun_pvalue(m, r, v, hi, delta) < alpha) return hi;
    while (hi - lo > 1e-6) {
        double mid = 0.5 * (lo + hi);
        if (audit_onerun_pvalue(m, r, v, mid, delta) < alpha) lo = mid; else hi = mid;
    }
    return lo;
}

/* -------------------------------------------------------------------- ROC ---- */
dp_status audit_roc(double *fpr, double *tpr, size_t *npts, size_t cap, double *auc, double *neg, size_t n_neg,
                    double *pos, size_t n_pos) {
    if (n_neg == 0 || n_pos == 0) return dp_error(DP_ERR_INVALID, "a ROC curve needs scores on both sides");
    if (cap < 2) return dp_error(DP_ERR_INVALID, "a ROC curve needs room for 2 points");
    qsort(neg, n_neg, sizeof *neg, audit_cmp_double);
    qsort(pos, n_pos, sizeof *pos, audit_cmp_double);
    /* Mann-Whitney: sum over positives of #neg < x + 1/2 #neg == x */
    double u = 0.0;
    for (size_t j = 0; j < n_pos; j++) {
        size_t le = count_le(neg, n_neg, pos[j]);
        size_t lt = le;
        while (lt > 0 && neg[lt - 1] == pos[j]) lt--;
        u += (double)lt + 0.5 * (double)(le - lt);
    }
    *auc = u / ((double)n_neg * (double)n_pos);
    /* the curve: thresholds at each distinct score, descending */
    size_t full = 1, i = n_neg, j = n_pos;
    while (i > 0 || j > 0) {
        double x = (i > 0 && (j == 0 || neg[i - 1] >= pos[j - 1])) ? neg[i - 1] : pos[j - 1];
        while (i > 0 && neg[i - 1] == x) i--;
        while (j > 0 && pos[j - 1] == x) j--;
        full++;
    }
    size_t want = full < cap ? full : cap;
    size_t k = 0, next = 0, t = 0;
    i = n_neg; j = n_pos;
    /* point idx (0..full-1) is kept when it is the next of round(t (full-1)/(want-1)) */
    for (size_t idx = 0; idx < full; idx++) {
        if (idx > 0) {
            double x = (i > 0 && (j == 0 || neg[i - 1] >= pos[j - 1])) ? neg[i - 1] : pos[j - 1];
            while (i > 0 && neg[i - 1] == x) i--;
            while (j > 0 && pos[j - 1] == x) j--;
        }
        if (idx == next) {
            fpr[k] = (double)(n_neg - i) / (double)n_neg;
            tpr[k] = (double)(n_pos - j) / (double)n_pos;
            k++;
            t++;
            next = (want == 1) ? full : (size_t)llround((double)t * (double)(full - 1) / (double)(want - 1));
            if (next <= idx) next = idx + 1;
        }
    }
    *npts = k;
    return DP_OK;
}

double audit_auc_se(double auc, size_t n_neg, size_t n_pos) {
    double q1 = auc / (2.0 - auc), q2 = 2.0 * auc * auc / (1.0 + auc);
    double v = (auc * (1 - auc) + ((double)n_pos - 1) * (q1 - auc * auc) + ((double)n_neg - 1) * (q2 - auc * auc)) /
               ((double)n_neg * (double)n_pos);
    return v > 0 ? sqrt(v) : 0.0;
}

void audit_tpr_at_fpr(audit_test *t, const double *neg_sorted, size_t n_neg, const double *pos_sorted, size_t n_pos,
                      double target, double alpha) {
    size_t allowed = (size_t)floor(target * (double)n_neg);
    double tau = (allowed >= n_neg) ? -INFINITY : neg_sorted[n_neg - 1 - allowed];
    audit_eval_threshold(t, neg_sorted, n_neg, pos_sorted, n_pos, tau, alpha, 0.0);
}

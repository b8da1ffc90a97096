/* attacks/tests/test_audit_stats.c — the audit statistics against known values:
 * Clopper-Pearson intervals (R's binom.test), the closed forms at k = 0 and k = n, the
 * incomplete beta against a direct binomial sum, normal quantiles, the conversions, the
 * perfect-separation ceilings of the notes (5.81 at N = 1000), the one-run ceiling (3.49 at
 * r = 100), AUC and ROC on a small example. Deterministic: no false-reject probability. */
#include <math.h>
#include <stdlib.h>

#include "attacks/audit_stats.h"
#include "common/test.h"

static double binom_cdf_direct(int64_t k, int64_t n, double p) {
    double s = 0;
    for (int64_t j = 0; j <= k; j++)
        s += exp(lgamma((double)n + 1) - lgamma((double)j + 1) - lgamma((double)(n - j) + 1) + (double)j * log(p) +
                 (double)(n - j) * log1p(-p));
    return s;
}

int main(void) {
    /* incomplete beta through the binomial cdf, against a direct sum */
    T_CLOSE(audit_binom_cdf(17, 50, 0.3), binom_cdf_direct(17, 50, 0.3), 1e-12, "cdf(17; 50, 0.3)");
    T_CLOSE(audit_binom_cdf(2, 200, 0.05), binom_cdf_direct(2, 200, 0.05), 1e-13, "cdf(2; 200, 0.05)");
    T_CLOSE(audit_binom_sf(180, 200, 0.8), 1.0 - binom_cdf_direct(179, 200, 0.8), 1e-12, "sf(180; 200, 0.8)");
    T_CHECK(isnan(audit_betainc(-1, 2, 0.5)), "betainc rejects a <= 0");
    /* Clopper-Pearson, two-sided 95% (alpha 0.025 per side), R binom.test values */
    T_CLOSE(audit_cp_lower(5, 10, 0.025), 0.187086028, 1e-8, "CP lower 5/10");
    T_CLOSE(audit_cp_upper(5, 10, 0.025), 0.812913972, 1e-8, "CP upper 5/10");
    T_CLOSE(audit_cp_lower(1, 10, 0.025), 0.002528579, 1e-8, "CP lower 1/10");
    T_CLOSE(audit_cp_upper(1, 10, 0.025), 0.445016117, 1e-8, "CP upper 1/10");
    T_CLOSE(audit_cp_upper(0, 1000, 0.05), 1.0 - pow(0.05, 1e-3), 1e-15, "CP upper 0/1000 closed form");
    T_CLOSE(audit_cp_lower(1000, 1000, 0.05), pow(0.05, 1e-3), 1e-15, "CP lower 1000/1000 closed form");
    /* symmetry lower(k, n) = 1 - upper(n - k, n), and bisection vs closed form at large n */
    T_CLOSE(audit_cp_lower(700, 100000, 0.01), 1.0 - audit_cp_upper(100000 - 700, 100000, 0.01), 1e-12, "symmetry");
    double u = audit_cp_upper(3, 1000000, 0.025);
    T_CLOSE(audit_binom_cdf(3, 1000000, u), 0.025, 1e-7, "CP upper at n = 1e6 solves the equation");
    T_CHECK(isnan(audit_cp_upper(3, 2, 0.05)), "k > n rejected");
    /* normal quantiles */
    T_CLOSE(audit_phi_inv(0.975), 1.959963984540054, 1e-12, "Phi^-1(0.975)");
    T_CLOSE(audit_phi_inv(1e-10), -6.361340902404056, 1e-10, "Phi^-1(1e-10)");
    T_CLOSE(audit_phi(audit_phi_inv(0.3)), 0.3, 1e-14, "Phi(Phi^-1(0.3))");
    /* conversions: perfect separation ceilings of the notes (one-sided 95% per rate) */
    double c1000 = audit_cp_upper(0, 1000, 0.05), c100 = audit_cp_upper(0, 100, 0.05);
    T_CLOSE(audit_eps_from_rates(c1000, c1000, 0), 5.81, 0.005, "ceiling N = 1000");
    T_CLOSE(audit_eps_from_rates(c100, c100, 0), 3.49, 0.005, "ceiling N = 100");
    T_CLOSE(audit_mu_from_rates(audit_phi(-0.5), audit_phi(-0.5)), 1.0, 1e-12, "mu of the symmetric point of G_1");
    T_CHECK(audit_eps_from_rates(0.5, 0.5, 1e-5) == 0.0, "coin flip gives eps 0");
    /* one-run ceiling (delta = 0, all r correct, 95%) */
    T_CLOSE(audit_onerun_eps(1000, 100, 100, 0.0, 0.05), 3.49, 0.005, "one-run ceiling r = 100");
    T_CLOSE(audit_onerun_eps(10000, 1000, 1000, 0.0, 0.05), 5.81, 0.005, "one-run ceiling r = 1000");
    T_CHECK(audit_onerun_eps(1000, 100, 50, 1e-5, 0.05) == 0.0, "chance-level guesses give 0");
    T_CHECK(audit_onerun_pvalue(1000, 100, 90, 1.0, 1e-5) > audit_onerun_pvalue(1000, 100, 90, 1.0, 0),
            "delta raises the p-value");
    /* AUC and ROC */
    double neg[3] = {3, 1, 2}, pos[2] = {4, 2}, fpr[8], tpr[8], auc;
    size_t np;
    T_OK(audit_roc(fpr, tpr, &np, 8, &auc, neg, 3, pos, 2));
    T_CLOSE(auc, 0.75, 1e-15, "AUC of the small example");
    T_CHECK(np == 5 && fpr[0] == 0 && tpr[0] == 0 && fpr[np - 1] == 1 && tpr[np - 1] == 1, "ROC endpoints (%zu)", np);
    T_CLOSE(tpr[1], 0.5, 0, "ROC after the top score");
    audit_test t;
    double ns[4] = {1, 2, 3, 4}, ps[2] = {3.5, 5};
    audit_tpr_at_fpr(&t, ns, 4, ps, 2, 0.25, 0.05);
    T_CHECK(t.fp == 1 && t.fn == 0 && t.tau == 3, "TPR at FPR 0.25 (fp %lld fn %lld tau %g)", (long long)t.fp,
            (long long)t.fn, t.tau);
    return t_finish();
}

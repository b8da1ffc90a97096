/* attacks/tests/test_audit_tight_slow.c — tightness of the white-box step audit at the
 * trial count of --level certify (AUDIT_TRIALS_CERTIFY = 50000 per side): one step of the
 * Gaussian mechanism (reference DP-SGD, q 1, sigma 1, Dirac canary of 4 C, claimed epsilon
 * 4.377 at delta 1e-5) must give epsilon_LB / epsilon_claimed >= 0.8 with the Gaussian
 * trade-off conversion, and PASS. Expected: the CP bounds on 45000 evaluation trials move
 * * the rates by ~0.006, mu_LB ~ 0.95, ratio ~ 0.93; below 0.8 needs mu_LB < 0.85, a 9-sigma
 * deviation of the rate estimates, so a correct reference fails this with probability
 * < 1e-12. Negative control: the same audit at 100 trials per side cannot reach 0.8
 * (10 calibration and 90 evaluation trials: the Clopper-Pearson widths alone keep mu_LB far
 * below 0.85), which the test checks too. */
#include <stdio.h>

#include "attacks/audit.h"
#include "attacks/tests/audit_test_small.h"
#include "common/test.h"

int main(void) {
    audit_config c;
    audit_config_default(&c);
    audit_test_small_model(&c);
    c.trials = AUDIT_TRIALS_CERTIFY;
    c.threads = 2;
    c.key.k = t_seed(7);
    audit_result r;
    T_OK(audit_run(&r, &c));
    printf("certify (%d trials/side): eps_lb %.4f (Gaussian), %.4f (standard), claim %.4f, tightness %.3f, "
           "%.1f s, %.0f trials/s\n",
           AUDIT_TRIALS_CERTIFY, r.eps_lb_gauss, r.eps_lb_std, r.eps_claim, r.tightness, r.seconds, r.trials_per_s);
    T_CHECK(r.verdict == AUDIT_PASS, "correct reference passes at the certify level");
    T_CHECK(r.tightness >= 0.8, "tightness >= 0.8 at the certify level");
    c.trials = 100;
    T_OK(audit_run(&r, &c));
    printf("100 trials/side: tightness %.3f\n", r.tightness);
    T_CHECK(r.tightness < 0.8, "negative control: 100 trials per side cannot reach 0.8");
    return t_finish();
}

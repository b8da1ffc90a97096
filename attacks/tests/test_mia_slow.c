/* attacks/tests/test_mia_slow.c — membership-inference sanity runs on the host engine:
 *   - the CI configuration (256 generated examples with random labels, 8 models per run,
 *     non-DP control + DP-SGD at eps 1 and 8 + DP-ZO at eps 8) PASSes: the non-DP control
 *     leaks (AUC lower bound at alpha 1e-3 > 0.5; observed AUC ~0.96), no DP run violates
 *     TPR <= e^eps FPR + delta (each of the 6 tests per run at (1 - 0.95) / 6, so a correct
 *     run FAILs with probability <= 0.05, up to the pooling approximation of docs/audits.md),
 *     and DP-ZO has AUC ~ 0.5 (every attack's 1e-3-level interval contains 0.5);
 *   - negative controls: a non-DP control trained for 1 step does not leak -> INVALID;
 *     DP runs trained without noise while claiming eps 1 -> FAIL (bound violated);
 *     perfectly separated scores against eps 1 violate the bound (deterministic);
 *   - results are identical for 1 and 2 threads.
 * The key is fixed (DPCERT_TEST_SEED changes it), so the test is deterministic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/mia.h"
#include "common/test.h"

int main(void) {
    uint64_t key = t_seed(3);
    mia_config c;
    mia_config_default(&c);
    c.key.k = key;
    mia_result r;
    T_OK(mia_run_all(&r, &c));
    T_CHECK(r.verdict == AUDIT_PASS, "CI configuration passes");
    T_CHECK(r.nruns == 4 && r.run[0].kind == MIA_RUN_NONDP && r.run[3].kind == MIA_RUN_DPZO, "runs");
    T_CHECK(r.run[0].a[MIA_ATTACK_LOSS].auc > 0.8, "non-DP control memorises");
    T_CHECK(r.run[3].auc_near_half, "DP-ZO AUC ~ 0.5");
    for (int k = 0; k < r.nruns; k++)
        printf("run %d: %s, AUC loss %.3f lira-off %.3f lira-on %.3f: %s\n", k, audit_verdict_names[r.run[k].verdict],
               r.run[k].a[0].auc, r.run[k].a[1].auc, r.run[k].a[2].auc, r.run[k].message);

    /* negative control 1: a control that cannot leak makes the whole run INVALID */
    mia_config s = c;
    s.pop = 64; s.models = 4; s.steps = 1; s.neps = 1; s.dpzo = 0;
    T_OK(mia_run_all(&r, &s));
    T_CHECK(r.verdict == AUDIT_INVALID, "1-step control does not leak: INVALID");
    /* negative control 2: no noise while claiming eps 1 */
    s = c;
    s.eps[0] = 1; s.neps = 1; s.dpzo = 0; s.plant_no_noise = 1;
    T_OK(mia_run_all(&r, &s));
    T_CHECK(r.verdict == AUDIT_FAIL, "noise-free run claiming eps 1 FAILs");
    printf("no-noise: %s\n", r.message);
    /* the bound check on perfectly separated scores */
    double neg[2000], pos[2000];
    for (int i = 0; i < 2000; i++) { neg[i] = i; pos[i] = 10000 + i; }
    mia_attack_result a;
    T_OK(mia_attack_stats(&a, neg, 2000, pos, 2000, 1.0, 1e-5, 0.95));
    T_CHECK(a.at[0].violated && a.at[1].violated && a.auc == 1.0, "separated scores violate the eps-1 bound");
    T_OK(mia_attack_stats(&a, neg, 2000, pos, 2000, 20.0, 1e-5, 0.95));
    T_CHECK(!a.at[0].violated && !a.at[1].violated, "... but not an eps-20 bound");
    /* thread independence */
    s = c;
    s.pop = 64; s.models = 4; s.steps = 20; s.neps = 1; s.threads = 1;
    mia_result r1, r2;
    T_OK(mia_run_all(&r1, &s));
    s.threads = 2;
    T_OK(mia_run_all(&r2, &s));
    int same = 1;
    for (int k = 0; k < r1.nruns; k++)
        for (int x = 0; x < MIA_NATTACKS; x++) same &= r1.run[k].a[x].auc == r2.run[k].a[x].auc;
    T_CHECK(same, "AUCs identical for 1 and 2 threads");
    /* bad input */
    s = c;
    s.models = 5;
    T_CHECK(mia_config_check(&s) == DP_ERR_INVALID && strstr(dp_last_error(), "--models"), "odd model count");
    s = c;
    s.delta = 1.5;
    T_CHECK(mia_config_check(&s) == DP_ERR_INVALID && strstr(dp_last_error(), "--delta"), "delta outside (0, 1)");
    return t_finish();
}

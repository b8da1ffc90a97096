/* attacks/tests/test_audit_step.c — the white-box step audit and the one-run audit on
 * small mlps (in 8, hidden 16, classes 4, |D| = 8; sigma 1, q 1, one step: claimed epsilon
 * 4.377 at delta 1e-5):
 *   - correct releases PASS: reference (dirac, anti, input canaries), host engine (input),
 *     DP-ZO reference and engine (input). Each audit runs at confidence 0.999, so a correct
 *     release FAILs with probability <= 1e-3 over the audit key (docs/audits.md); the key is
 *     fixed (DPCERT_TEST_SEED changes it), so the test is deterministic;
 *   - negative controls, the planted bugs, must FAIL from the statistic alone at 2000 trials
 *     per side: half-noise (true mu 2: expected Gaussian epsilon_LB ~ 9 > 4.38), no-clip
 *     (canary 4 C unclipped: mu 4), public-seed-noise (no randomness: perfect separation),
 *     clip-after-sum with the anti canary (shift C + min(||S||, C) > C), half-noise on the
 *     engine and on DP-ZO; the one-run audit catches no-clip at sigma 2 (claim 1.99);
 *   - K = 4 steps at sigma 2 (mu 1 again): the reference and the engine pass, half-noise FAILs;
 *   - trial statistics are bit-identical for 1 and 3 threads;
 *   - bad configurations are DP_ERR_INVALID naming the option. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/audit.h"
#include "attacks/tests/audit_test_small.h"
#include "common/test.h"

static audit_config small(uint64_t key) {
    audit_config c;
    audit_config_default(&c);
    audit_test_small_model(&c);
    c.trials = 2000;
    c.confidence = 0.999;
    c.threads = 2;
    c.seed.k = 11;
    c.key.k = key;
    return c;
}

static audit_verdict run(audit_config c, const char *what) {
    audit_result r;
    dp_status st = audit_run(&r, &c);
    T_OK(st);
    if (st != DP_OK) return AUDIT_INVALID;
    printf("%-34s %s  eps_lb std %.3f gauss %.3f (mu %.3f) claim %.3f tightness %.3f auc %.3f\n", what,
           audit_verdict_names[r.verdict], r.eps_lb_std, r.eps_lb_gauss, r.mu_lb, r.eps_claim, r.tightness, r.auc);
    return r.verdict;
}

int main(void) {
    uint64_t key = t_seed(20261123);
    audit_config c = small(key);
    T_CHECK(run(c, "reference dirac") == AUDIT_PASS, "correct reference, dirac canary");
    c.canary = AUDIT_CANARY_ANTI;
    T_CHECK(run(c, "reference anti") == AUDIT_PASS, "correct reference, anti canary");
    c.canary = AUDIT_CANARY_INPUT;
    T_CHECK(run(c, "reference input") == AUDIT_PASS, "correct reference, input canary");
    c.impl = AUDIT_IMPL_OPTIMIZED;
    T_CHECK(run(c, "engine host input") == AUDIT_PASS, "correct host engine, input canary");
    c.plant = AUDIT_PLANT_HALF_NOISE;
    T_CHECK(run(c, "engine host input, half-noise") == AUDIT_FAIL, "engine with half noise caught");
    c = small(key);
    c.algo = AUDIT_ALGO_DPZO;
    c.canary = AUDIT_CANARY_INPUT;
    T_CHECK(run(c, "dpzo reference input") == AUDIT_PASS, "correct DP-ZO reference");
    c.impl = AUDIT_IMPL_OPTIMIZED;
    T_CHECK(run(c, "dpzo engine input") == AUDIT_PASS, "correct DP-ZO engine");
    c.plant = AUDIT_PLANT_HALF_NOISE;
    T_CHECK(run(c, "dpzo engine input, half-noise") == AUDIT_FAIL, "DP-ZO engine with half noise caught");

    /* planted bugs on the reference */
    static const struct { audit_plant p; audit_canary k; const char *name; } bugs[] = {
        {AUDIT_PLANT_HALF_NOISE, AUDIT_CANARY_DIRAC, "reference dirac, half-noise"},
        {AUDIT_PLANT_NO_CLIP, AUDIT_CANARY_DIRAC, "reference dirac, no-clip"},
        {AUDIT_PLANT_PUBLIC_SEED_NOISE, AUDIT_CANARY_DIRAC, "reference dirac, public-seed-noise"},
        {AUDIT_PLANT_CLIP_AFTER_SUM, AUDIT_CANARY_ANTI, "reference anti, clip-after-sum"},
    };
    for (size_t i = 0; i < sizeof bugs / sizeof bugs[0]; i++) {
        c = small(key);
        c.plant = bugs[i].p;
        c.canary = bugs[i].k;
        T_CHECK(run(c, bugs[i].name) == AUDIT_FAIL, "planted bug %s caught", bugs[i].name);
    }
    /* K-step audits: K = 4 steps at sigma 2 is mu = 1 again (claim 4.377) */
    c = small(key);
    c.steps = 4;
    c.sigma = 2;
    T_CHECK(run(c, "reference dirac, K = 4") == AUDIT_PASS, "K-step reference passes");
    c.plant = AUDIT_PLANT_HALF_NOISE;
    T_CHECK(run(c, "reference dirac, K = 4, half-noise") == AUDIT_FAIL, "K-step half noise caught");
    c.plant = AUDIT_PLANT_NONE;
    c.impl = AUDIT_IMPL_OPTIMIZED;
    c.canary = AUDIT_CANARY_INPUT;
    T_CHECK(run(c, "engine input, K = 4") == AUDIT_PASS, "K-step engine passes");

    /* thread-count independence */
    c = small(key);
    c.trials = 300;
    audit_setup s;
    T_OK(audit_setup_make(&s, &c));
    double *a0 = calloc(300, sizeof(double)), *a1 = calloc(300, sizeof(double));
    double *b0 = calloc(300, sizeof(double)), *b1 = calloc(300, sizeof(double)), secs;
    s.cfg.threads = 1;
    T_OK(audit_run_trials(a0, a1, &s, &secs));
    s.cfg.threads = 3;
    T_OK(audit_run_trials(b0, b1, &s, &secs));
    T_CHECK(memcmp(a0, b0, 300 * sizeof(double)) == 0 && memcmp(a1, b1, 300 * sizeof(double)) == 0,
            "statistics independent of the thread count");
    audit_setup_free(&s);
    free(a0); free(a1); free(b0); free(b1);

    /* one-run audit: sigma 2 (claim 1.99) */
    c = small(key);
    c.mc.hidden[0] = 128; /* 1668 parameters: room for 1000 Dirac canaries */
    c.sigma = 2;
    audit_onerun_result o;
    T_OK(audit_onerun(&o, &c, 1000, 200, 1));
    printf("one-run correct: %s\n", o.message);
    T_CHECK(o.verdict == AUDIT_PASS, "one-run: correct reference passes");
    c.plant = AUDIT_PLANT_NO_CLIP;
    T_OK(audit_onerun(&o, &c, 1000, 200, 1));
    printf("one-run no-clip: %s\n", o.message);
    T_CHECK(o.verdict == AUDIT_FAIL, "one-run: no-clip caught");
    c.plant = AUDIT_PLANT_NONE;
    T_CHECK(audit_onerun(&o, &c, 5000, 200, 1) == DP_ERR_INVALID, "one-run: more canaries than coordinates");

    /* bad input */
    c = small(key);
    c.delta = 0;
    T_CHECK(audit_config_check(&c) == DP_ERR_INVALID && strstr(dp_last_error(), "--delta"), "delta 0 rejected");
    c.delta = 1;
    T_CHECK(audit_config_check(&c) == DP_ERR_INVALID, "delta 1 rejected");
    c = small(key);
    c.trials = 0;
    T_CHECK(audit_config_check(&c) == DP_ERR_INVALID && strstr(dp_last_error(), "--trials"), "zero trials rejected");
    c = small(key);
    c.canary_elem = 1000000;
    T_CHECK(audit_setup_make(&s, &c) == DP_ERR_INVALID && strstr(dp_last_error(), "cannot be represented"),
            "a canary element outside the model rejected");
    c = small(key);
    c.algo = AUDIT_ALGO_DPZO;
    T_CHECK(audit_config_check(&c) == DP_ERR_INVALID, "DP-ZO with a dirac canary rejected");
    c = small(key);
    c.impl = AUDIT_IMPL_OPTIMIZED;
    T_CHECK(audit_config_check(&c) == DP_ERR_INVALID, "engine with a gradient canary rejected");
    c = small(key);
    c.algo = AUDIT_ALGO_DPZO;
    c.canary = AUDIT_CANARY_INPUT;
    c.steps = 2;
    T_CHECK(audit_config_check(&c) == DP_ERR_INVALID && strstr(dp_last_error(), "--steps"), "K-step DP-ZO rejected");
    return t_finish();
}

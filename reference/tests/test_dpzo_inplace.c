/* reference/tests/test_dpzo_inplace.c — Algorithm 2 (in-place perturbation, f32 and
 * bf16 storage) against the exact f64 path (docs/dpzo.md, "In-place variant and
 * drift bound"):
 *   1. restore drift of +phi z, -2 phi z, +phi z stays within the derived bound
 *      3 eps (|w| + 3 phi |z|) (1 + 3 eps) on every element of every step, and is
 *      non-zero in bf16; an independent re-computation shows the bound is within a
 *      factor 64 of the worst element (negative control: eps / 64 is violated);
 *   2. with the exact path's released scalars forced, the trajectory drift
 *      |w_t - theta_t| stays within the accumulated bound, and the f32 bound is
 *      violated by the bf16 run (negative control);
 *   3. the drift of the true Algorithm 2 (own scalars) is reported. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/tensor.h"
#include "common/test.h"
#include "reference/dpzo.h"

static const double UD = 1.0 / 9007199254740992.0;

static double max_abs_storage(const ref_dpzo_inplace *ip) {
    double m = 0;
    for (int p = 0; p < ip->nparams; p++)
        for (int64_t e = 0; e < ip->numel[p]; e++) m = fmax(m, fabs(ref_dpzo_inplace_get(ip, p, e)));
    return m;
}
static double max_abs_theta(const ref_dpzo_problem *pb) {
    double m = 0;
    for (int p = 0; p < pb->nparams; p++)
        for (int64_t e = 0; e < pb->numel[p]; e++) m = fmax(m, fabs(pb->theta[p][e]));
    return m;
}
static double max_diff(const ref_dpzo_inplace *ip, const ref_dpzo_problem *pb) {
    double m = 0;
    for (int p = 0; p < pb->nparams; p++)
        for (int64_t e = 0; e < pb->numel[p]; e++) m = fmax(m, fabs(ref_dpzo_inplace_get(ip, p, e) - pb->theta[p][e]));
    return m;
}

/* Runs K steps of the exact path and the in-place path side by side. */
static void run_pair(uint64_t seed, ref_dpzo_store dt, double lr, int forced, double *final_drift, int *bound_ok,
                     int *f32_bound_ok, double *max_restore) {
    ref_model_config cfg;
    ref_config_default(&cfg, REF_MLP);
    cfg.in = 4; cfg.nhidden = 1; cfg.hidden[0] = 8; cfg.classes = 3;
    ref_model m;
    ref_dataset d;
    T_OK(ref_model_init(&m, &cfg, (dp_seed){seed}));
    T_OK(ref_dataset_generate(&d, &cfg, 16, (dp_seed){seed}));
    ref_dpzo_hparams hp = {.n_data = 16, .q = 0.5, .steps = 8, .clip = 1.0, .sigma = 0.5, .mech = REF_DPZO_GAUSSIAN,
                           .phi = 1e-2, .lr = lr, .weight_decay = 0.0, .n_spsa = 2, .seed = {seed}, .key = {seed + 3}};
    ref_dpzo_model_ctx ctx;
    ref_dpzo_problem pb;
    ref_dpzo_step_out oe, oi;
    ref_dpzo_inplace ip;
    T_OK(ref_dpzo_problem_model(&pb, &ctx, &m, &d));
    T_OK(ref_dpzo_step_out_alloc(&oe, 16, 2));
    T_OK(ref_dpzo_step_out_alloc(&oi, 16, 2));
    T_OK(ref_dpzo_inplace_init(&ip, dt, &pb));
    double eps = ref_dpzo_inplace_unit(dt), eps32 = ref_dpzo_inplace_unit(REF_DPZO_F32);
    double E = max_diff(&ip, &pb), E32 = E, R = 0;
    *bound_ok = 1;
    *f32_bound_ok = 1;
    *max_restore = 0;
    for (int t = 1; t <= hp.steps; t++) {
        double wt = max_abs_storage(&ip), th = max_abs_theta(&pb), rd = 0;
        int64_t viol = -1;
        T_OK(ref_dpzo_release(&oe, &pb, &hp, t));
        T_OK(ref_dpzo_inplace_step(&oi, &rd, &viol, &ip, &pb, &hp, t, forced ? oe.scalar : NULL));
        T_OK(ref_dpzo_update(pb.theta, pb.numel, pb.nparams, hp.seed, t, oe.scalar, 2, hp.lr, hp.weight_decay));
        T_CHECK(viol == 0, "step %d: %lld elements beyond the restore-drift bound", t, (long long)viol);
        T_CHECK(oi.b == oe.b && !memcmp(oi.idx, oe.idx, (size_t)oe.b * sizeof(int64_t)) &&
                !memcmp(oi.noise, oe.noise, 2 * sizeof(double)), "in-place step drew another batch or noise");
        R = fmax(R, rd);
        *max_restore = R;
        /* E_{t+1} <= E_t + R_t + eps (1 + eps) (2 max|w~_t| + max|w_{t+1}|) + 3 u (2 max|theta_t| + max|theta_{t+1}|),
         * max|w~_t| <= max|w_t| + R_t (docs/dpzo.md) */
        double w1 = max_abs_storage(&ip), th1 = max_abs_theta(&pb);
        E = E + rd + eps * (1 + eps) * (2 * (wt + rd) + w1) + 3 * UD * (2 * th + th1);
        E32 = E32 + rd + eps32 * (1 + eps32) * (2 * (wt + rd) + w1) + 3 * UD * (2 * th + th1);
        double D = max_diff(&ip, &pb);
        if (forced && D > E) *bound_ok = 0;
        if (forced && D > E32) *f32_bound_ok = 0;
        *final_drift = D;
    }
    ref_dpzo_inplace_free(&ip);
    ref_dpzo_step_out_free(&oe);
    ref_dpzo_step_out_free(&oi);
    ref_dpzo_problem_free(&pb);
    ref_dataset_free(&d);
    ref_model_free(&m);
}

/* Independent re-computation of one bf16 cycle on random values. */
static void test_cycle_bf16(uint64_t seed) {
    const int n = 4096;
    dp_stream s;
    dp_stream_public(&s, (dp_seed){seed}, DP_PURPOSE_TEST, 7, 0);
    double eps = ref_dpzo_inplace_unit(REF_DPZO_BF16), phi = 1e-2, worst = 0;
    int ok = 1;
    for (int e = 0; e < n; e++) {
        uint16_t w0 = dp_f32_to_bf16((float)(0.05 * dp_rng_gaussian(&s, (uint64_t)e)));
        double z = dp_rng_gaussian(&s, (uint64_t)(n + e)), w = dp_bf16_to_f32(w0);
        uint16_t w1 = dp_f32_to_bf16((float)((double)dp_bf16_to_f32(w0) + phi * z));
        uint16_t w2 = dp_f32_to_bf16((float)((double)dp_bf16_to_f32(w1) + (-2.0 * phi) * z));
        uint16_t w3 = dp_f32_to_bf16((float)((double)dp_bf16_to_f32(w2) + phi * z));
        double dd = fabs((double)dp_bf16_to_f32(w3) - w), a = phi * fabs(z);
        double B = 3 * eps * (fabs(w) + 3 * a) * (1 + 3 * eps);
        if (dd > B) ok = 0;
        worst = fmax(worst, dd / B);
    }
    printf("bf16 cycle: worst drift / bound = %.3f over %d elements\n", worst, n);
    T_CHECK(ok, "bf16 restore drift beyond the derived bound");
    T_CHECK(worst > 1.0 / 64, "negative control: the bound with eps/64 was not violated (worst ratio %g)", worst);
}

int main(void) {
    uint64_t seed = t_seed(99);
    test_cycle_bf16(seed);
    double d32, d16, r32, r16;
    int ok32, ok16, f32ok32, f32ok16;
    /* 1. lr = 0: theta does not move; only restore drift accumulates */
    run_pair(seed, REF_DPZO_F32, 0.0, 1, &d32, &ok32, &f32ok32, &r32);
    run_pair(seed, REF_DPZO_BF16, 0.0, 1, &d16, &ok16, &f32ok16, &r16);
    printf("lr=0: restore drift max f32 %.3e bf16 %.3e; |w_T - theta_T| f32 %.3e bf16 %.3e\n", r32, r16, d32, d16);
    T_CHECK(ok32 && ok16, "lr=0: drift beyond the accumulated bound");
    T_CHECK(r16 > 0 && r16 > r32, "bf16 restore drift should be non-zero and above f32's");
    /* 2. forced scalars, lr > 0 */
    run_pair(seed, REF_DPZO_F32, 0.05, 1, &d32, &ok32, &f32ok32, &r32);
    run_pair(seed, REF_DPZO_BF16, 0.05, 1, &d16, &ok16, &f32ok16, &r16);
    printf("forced scalars, lr=0.05: |w_T - theta_T| f32 %.3e bf16 %.3e\n", d32, d16);
    T_CHECK(ok32, "f32 trajectory drift beyond the accumulated bound");
    T_CHECK(ok16, "bf16 trajectory drift beyond the accumulated bound");
    T_CHECK(!f32ok16, "negative control: the bf16 run stayed within the f32 bound");
    /* 3. the true Algorithm 2: reported (its scalars depend on the drifted losses) */
    run_pair(seed, REF_DPZO_F32, 0.05, 0, &d32, &ok32, &f32ok32, &r32);
    run_pair(seed, REF_DPZO_BF16, 0.05, 0, &d16, &ok16, &f32ok16, &r16);
    printf("Algorithm 2 (own scalars), lr=0.05, 8 steps: |w_T - theta_T| f32 %.3e bf16 %.3e (reported)\n", d32, d16);
    T_CHECK(isfinite(d32) && isfinite(d16), "non-finite drift");
    return t_finish();
}

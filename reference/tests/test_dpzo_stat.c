/* reference/tests/test_dpzo_stat.c — statistical tests of the DP-ZO reference
 * (docs/dpzo.md, "Tests"):
 *   1. the noise in the released scalar: variance and KS test against Gaussian
 *      N(0, sigma^2 C^2) and Laplace(sigma C), with negative controls;
 *   2. n-SPSA noise scale: sqrt(n) sigma C (Gaussian), n sigma C (Laplace), with a
 *      negative control at the 1-SPSA scale;
 *   3. on a quadratic loss, without clipping and noise, s z is an unbiased estimate
 *      of the gradient (statistical) and s equals the central finite difference
 *      (exactly by definition, and within the derived rounding bound of z.grad for
 *      phi = 1e-1 .. 1e-5), with a negative control (the quotient by phi, not 2 phi).
 *
 * False-reject probability: every KS test uses alpha = 1e-4 and every z-test the
 * threshold 4.42 (two-sided normal tail 1e-5); there are 4 KS tests and 17 z-tests
 * (4 variances, 1 correlation, 3 x 4 gradient coordinates) on correct code, so the
 * whole program falsely fails with probability below 4e-4 + 1.7e-4 < 1e-3. Negative controls must reject; their
 * rejection margins (stated at each) make a false accept improbable (< 1e-6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "reference/dpzo.h"

#define ALPHA 1e-4
#define ZMAX 4.42

/* ---- a quadratic problem: L_i(theta) = 0.5 sum_k a_k (theta_k - c_ik)^2 ---- */
#define QD 4
#define QN 8
typedef struct {
    double a[QD];
    double c[QN][QD];
} quadprob;

static dp_status quad_loss(double *loss, void *ctx, double *const *params, int64_t i) {
    const quadprob *q = ctx;
    double acc = 0.0;
    for (int k = 0; k < QD; k++) {
        double r = params[0][k] - q->c[i][k];
        acc += q->a[k] * r * r;
    }
    *loss = 0.5 * acc;
    return DP_OK;
}

static void quad_setup(quadprob *q, ref_dpzo_problem *pb, double *theta, int64_t *numel, double **tp, uint64_t seed) {
    dp_stream s;
    dp_stream_public(&s, (dp_seed){seed}, DP_PURPOSE_TEST, 0, 0);
    for (int k = 0; k < QD; k++) {
        q->a[k] = 0.5 + dp_rng_uniform(&s, (uint64_t)k);
        theta[k] = dp_rng_gaussian(&s, (uint64_t)(100 + k));
    }
    for (int i = 0; i < QN; i++)
        for (int k = 0; k < QD; k++) q->c[i][k] = dp_rng_gaussian(&s, (uint64_t)(1000 + QD * i + k));
    numel[0] = QD;
    tp[0] = theta;
    pb->nparams = 1;
    pb->numel = numel;
    pb->theta = tp;
    pb->loss = quad_loss;
    pb->ctx = q;
}

/* ---- KS test ---- */
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double cdf_gauss(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double cdf_laplace(double x) { return x < 0 ? 0.5 * exp(x) : 1.0 - 0.5 * exp(-x); }

/* p-value of the one-sample KS statistic of x[0..n) (scaled by 1/scale) against cdf
 * (Kolmogorov limit distribution with Stephens' small-sample correction). */
static double ks_pvalue(double *x, size_t n, double scale, double (*cdf)(double)) {
    double *y = malloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = x[i] / scale;
    qsort(y, n, sizeof *y, cmp_d);
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        double f = cdf(y[i]);
        double a = f - (double)i / (double)n, b = (double)(i + 1) / (double)n - f;
        if (a > d) d = a;
        if (b > d) d = b;
    }
    free(y);
    double sn = sqrt((double)n), t = d * (sn + 0.12 + 0.11 / sn), p = 0.0;
    for (int k = 1; k <= 100; k++) p += 2.0 * ((k & 1) ? 1.0 : -1.0) * exp(-2.0 * k * k * t * t);
    return p < 0 ? 0 : p > 1 ? 1 : p;
}

/* z statistic of the mean square of zero-mean samples against variance s2:
 * Var(x^2) = (kurt - 1) s2^2 with kurt = 3 (Gaussian) or 6 (Laplace). */
static double var_z(const double *x, size_t n, double s2, double kurt) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m += x[i] * x[i];
    m /= (double)n;
    return (m - s2) / sqrt((kurt - 1.0) * s2 * s2 / (double)n);
}

/* Noise samples through the pipeline: M steps of the quadratic problem, lr = 0. */
static void collect_noise(double *out, int M, ref_dpzo_mech mech, int n, uint64_t seed, uint64_t key) {
    quadprob q;
    double theta[QD], *tp[1];
    int64_t numel[1];
    ref_dpzo_problem pb;
    quad_setup(&q, &pb, theta, numel, tp, seed);
    ref_dpzo_hparams hp = {.n_data = QN, .q = 0.5, .steps = M, .clip = 0.7, .sigma = 1.3, .mech = mech, .phi = 1e-2,
                           .lr = 0.0, .weight_decay = 0.0, .n_spsa = n, .seed = {seed}, .key = {key}};
    ref_dpzo_step_out o;
    T_OK(ref_dpzo_step_out_alloc(&o, QN, n));
    int exact = 1;
    for (int t = 1; t <= M; t++) {
        T_OK(ref_dpzo_step(&o, &pb, &hp, t));
        for (int j = 0; j < n; j++) {
            out[(size_t)(t - 1) * (size_t)n + (size_t)j] = o.noise[j];
            /* the released scalar is (sum + noise) / ((q N) 2 phi), bit for bit */
            if (o.scalar[j] != (o.sum[j] + o.noise[j]) / (((hp.q * (double)hp.n_data) * 2.0) * hp.phi)) exact = 0;
        }
    }
    T_CHECK(exact, "released scalar != (clipped sum + noise) / ((q N) 2 phi) for some step");
    ref_dpzo_step_out_free(&o);
}

static void test_noise(uint64_t seed) {
    const int M = 8000;
    const double sc = 1.3 * 0.7; /* sigma C */
    double *g = malloc((size_t)M * sizeof *g), *l = malloc((size_t)M * sizeof *l);
    collect_noise(g, M, REF_DPZO_GAUSSIAN, 1, seed, seed ^ 0x5eed5eedULL);
    collect_noise(l, M, REF_DPZO_LAPLACE, 1, seed, seed ^ 0x1a91ace5ULL);
    double pg = ks_pvalue(g, M, sc, cdf_gauss), pl = ks_pvalue(l, M, sc, cdf_laplace);
    double zg = var_z(g, M, sc * sc, 3.0), zl = var_z(l, M, 2.0 * sc * sc, 6.0);
    printf("noise: Gaussian KS p=%.3g var z=%.2f; Laplace KS p=%.3g var z=%.2f (M=%d)\n", pg, zg, pl, zl, M);
    T_CHECK(pg > ALPHA, "Gaussian noise fails KS against N(0, (sigma C)^2): p=%g", pg);
    T_CHECK(pl > ALPHA, "Laplace noise fails KS against Laplace(sigma C): p=%g", pl);
    T_CHECK(fabs(zg) < ZMAX, "Gaussian noise variance off: z=%g", zg);
    T_CHECK(fabs(zl) < ZMAX, "Laplace noise variance off: z=%g", zl);
    /* Negative controls. (a) Gaussian samples vs a Laplace of the same variance
     * (b = sigma C / sqrt 2): sup |Phi - F_L| = 0.058 while the alpha = 1e-4
     * critical distance at M = 8000 is 0.025 (margin > 5 standard deviations of D). */
    double pn1 = ks_pvalue(g, M, sc / sqrt(2.0), cdf_laplace);
    /* (b) Laplace samples vs a Gaussian of the same variance (sigma C sqrt 2). */
    double pn2 = ks_pvalue(l, M, sc * sqrt(2.0), cdf_gauss);
    /* (c) the scale 1.25 sigma C: variance ratio 1.56, z about 30 (Gaussian). */
    double zn = var_z(g, M, 1.25 * 1.25 * sc * sc, 3.0);
    printf("negative controls: Gaussian-as-Laplace p=%.3g, Laplace-as-Gaussian p=%.3g, wrong scale z=%.1f\n", pn1, pn2, zn);
    T_CHECK(pn1 < ALPHA, "negative control: KS accepted Gaussian noise as Laplace (p=%g)", pn1);
    T_CHECK(pn2 < ALPHA, "negative control: KS accepted Laplace noise as Gaussian (p=%g)", pn2);
    T_CHECK(fabs(zn) > ZMAX, "negative control: variance test accepted scale 1.25 sigma C (z=%g)", zn);
    free(g);
    free(l);
}

static void test_nspsa(uint64_t seed) {
    const int M = 2000, n = 4;
    const double sc = 1.3 * 0.7;
    double *g = malloc((size_t)M * n * sizeof *g), *l = malloc((size_t)M * n * sizeof *l);
    collect_noise(g, M, REF_DPZO_GAUSSIAN, n, seed + 1, seed ^ 0xabcdefULL);
    collect_noise(l, M, REF_DPZO_LAPLACE, n, seed + 1, seed ^ 0xfedcbaULL);
    size_t K = (size_t)M * n;
    double pg = ks_pvalue(g, K, sc * sqrt((double)n), cdf_gauss), pl = ks_pvalue(l, K, sc * n, cdf_laplace);
    double zg = var_z(g, K, n * sc * sc, 3.0), zl = var_z(l, K, 2.0 * n * n * sc * sc, 6.0);
    printf("n-SPSA (n=%d): Gaussian KS p=%.3g var z=%.2f; Laplace KS p=%.3g var z=%.2f\n", n, pg, zg, pl, zl);
    T_CHECK(pg > ALPHA, "n-SPSA Gaussian noise is not N(0, n sigma^2 C^2): p=%g", pg);
    T_CHECK(pl > ALPHA, "n-SPSA Laplace noise is not Laplace(n sigma C): p=%g", pl);
    T_CHECK(fabs(zg) < ZMAX, "n-SPSA Gaussian variance off: z=%g", zg);
    T_CHECK(fabs(zl) < ZMAX, "n-SPSA Laplace variance off: z=%g", zl);
    /* The n directions of one step draw independent noise: correlation of
     * directions 0 and 1 within a step, |r| < ZMAX / sqrt(M). */
    double r = 0.0, s0 = 0.0, s1 = 0.0;
    for (int t = 0; t < M; t++) {
        r += g[t * n] * g[t * n + 1];
        s0 += g[t * n] * g[t * n];
        s1 += g[t * n + 1] * g[t * n + 1];
    }
    r /= sqrt(s0 * s1);
    T_CHECK(fabs(r) < ZMAX / sqrt((double)M), "noise of directions 0 and 1 correlated: r=%g", r);
    /* Negative control: the 1-SPSA scale (the DPZero n-fold bug) must be rejected:
     * variance ratio n = 4, z about 160. */
    double zn = var_z(g, K, sc * sc, 3.0), pn = ks_pvalue(g, K, sc, cdf_gauss);
    printf("negative control (1-SPSA scale): z=%.1f KS p=%.3g\n", zn, pn);
    T_CHECK(fabs(zn) > ZMAX && pn < ALPHA, "negative control: n-SPSA noise accepted at the 1-SPSA scale");
    free(g);
    free(l);
}

/* The exact gradient of the batch mean (q = 1) and the finite-difference check. */
static void test_quadratic(uint64_t seed) {
    quadprob q;
    double theta[QD], *tp[1];
    int64_t numel[1];
    ref_dpzo_problem pb;
    quad_setup(&q, &pb, theta, numel, tp, seed + 2);
    double gbar[QD] = {0}, g2 = 0.0;
    for (int k = 0; k < QD; k++) {
        for (int i = 0; i < QN; i++) gbar[k] += q.a[k] * (theta[k] - q.c[i][k]);
        gbar[k] /= QN;
        g2 += gbar[k] * gbar[k];
    }
    const double U = 1.0 / 9007199254740992.0;
    const int M = 4000;
    double phis[3] = {1e-1, 1e-3, 1e-5};
    for (int f = 0; f < 3; f++) {
        ref_dpzo_hparams hp = {.n_data = QN, .q = 1.0, .steps = M, .clip = 1e300, .sigma = 0.0,
                               .mech = REF_DPZO_GAUSSIAN, .phi = phis[f], .lr = 0.0, .weight_decay = 0.0,
                               .n_spsa = 1, .seed = {seed + 3}, .key = {seed + 4}};
        ref_dpzo_step_out o;
        T_OK(ref_dpzo_step_out_alloc(&o, QN, 1));
        double mean[QD] = {0}, bad[QD] = {0};
        int exact_fd = 1, within = 1;
        double worst = 0.0;
        for (int t = 1; t <= M; t++) {
            T_OK(ref_dpzo_step(&o, &pb, &hp, t));
            double z[QD];
            T_OK(ref_dpzo_direction(z, hp.seed, t, 0, 0, QD));
            /* the finite-difference definition, evaluated independently */
            double tpz[QD], tmz[QD], *pp[1] = {tpz}, *pm[1] = {tmz}, sum = 0.0, lsum = 0.0;
            for (int k = 0; k < QD; k++) { tpz[k] = theta[k] + hp.phi * z[k]; tmz[k] = theta[k] - hp.phi * z[k]; }
            for (int i = 0; i < QN; i++) {
                double lp, lm;
                quad_loss(&lp, &q, pp, i);
                quad_loss(&lm, &q, pm, i);
                sum += lp - lm;
                lsum += lp + lm + fabs(lp - lm);
            }
            /* rounding of theta +- phi z itself moves each loss by up to a_k |r_k| u |theta'_k| */
            for (int i = 0; i < QN; i++)
                for (int k = 0; k < QD; k++)
                    lsum += 4.0 * q.a[k] * (fabs(theta[k] - q.c[i][k]) + hp.phi * fabs(z[k])) * (fabs(theta[k]) + hp.phi * fabs(z[k]));
            double s_fd = (sum + 0.0) / (((1.0 * QN) * 2.0) * hp.phi);
            if (o.b != QN || o.scalar[0] != s_fd) exact_fd = 0;
            /* against z . gbar: real-arithmetic identity for a quadratic; rounding bound
             * (QD + 8) u (sum_i L+ + L- + |l|) / (N 2 phi) + (QD + 2) u sum_k |z_k gbar_k| */
            double zg = 0.0, zga = 0.0;
            for (int k = 0; k < QD; k++) { zg += z[k] * gbar[k]; zga += fabs(z[k] * gbar[k]); }
            double tol = (QD + 8) * U * lsum / (QN * 2.0 * hp.phi) + (QD + 2) * U * zga + 4 * U * fabs(o.scalar[0]);
            double err = fabs(o.scalar[0] - zg);
            if (err > tol) within = 0;
            if (err / tol > worst) worst = err / tol;
            for (int k = 0; k < QD; k++) {
                mean[k] += o.scalar[0] * z[k];
                bad[k] += (o.sum[0] / ((1.0 * QN) * hp.phi)) * z[k]; /* negative control: quotient by phi */
            }
        }
        T_CHECK(exact_fd, "phi=%g: released scalar differs from the finite-difference definition", hp.phi);
        T_CHECK(within, "phi=%g: |s - z.grad| beyond the rounding bound (worst ratio %g)", hp.phi, worst);
        int ok = 1, neg_rejects = 0;
        for (int k = 0; k < QD; k++) {
            mean[k] /= M;
            bad[k] /= M;
            /* Var(z_k (z . g)) = |g|^2 + g_k^2 for z ~ N(0, I) */
            double sd = sqrt((g2 + gbar[k] * gbar[k]) / M);
            if (fabs(mean[k] - gbar[k]) > ZMAX * sd) ok = 0;
            if (fabs(bad[k] - gbar[k]) > ZMAX * sd) neg_rejects = 1;
            if (f == 0) printf("  k=%d grad %.5f estimate %.5f (sd %.5f), quotient-by-phi control %.5f\n", k, gbar[k], mean[k], sd, bad[k]);
        }
        printf("phi=%g: finite difference exact=%d, rounding worst ratio %.3g, unbiased=%d\n", hp.phi, exact_fd, worst, ok);
        T_CHECK(ok, "phi=%g: mean of s z is not the gradient within %g sd", hp.phi, ZMAX);
        /* the control has mean 2 grad: bias |g_k| / sd >= about 20 for this problem */
        T_CHECK(neg_rejects, "phi=%g: negative control (quotient by phi) was not rejected", hp.phi);
        ref_dpzo_step_out_free(&o);
    }
}

int main(void) {
    uint64_t seed = t_seed(20260601);
    test_noise(seed);
    test_nspsa(seed);
    test_quadratic(seed);
    return t_finish();
}

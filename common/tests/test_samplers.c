/* common/tests/test_samplers.c — statistical tests of the Philox samplers
 * (uniform, Gaussian by Box-Muller, Laplace by inversion) at n = 10^6 draws,
 * with negative controls that must be rejected. Derivations: docs/rng.md,
 * "Statistical tests of the samplers".
 *
 * Every test is two-sided at per-test level alpha = 1e-4:
 *   KS: reject when (sqrt(n) + 0.12 + 0.11/sqrt(n)) * D_n > k_alpha, with k_alpha
 *       solving 2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 x^2) = alpha (the Kolmogorov
 *       limit law; Stephens' finite-n modification), computed below (~2.2239).
 *   moments: z = (sample mean of g(X) - E g(X)) / sqrt(Var g(X) / n), reject when
 *       |z| > z_alpha = Phi^-1(1 - alpha/2) (~3.8906, computed below); g(X) = X
 *       (mean), (X - mu)^2 (variance), (X - mu)^4 (fourth moment, which separates
 *       Gaussian from Laplace), with the exact moments of the target law. The level
 *       is asymptotic (CLT).
 *   independence: sample correlation r of n pairs; under independence sqrt(n) r
 *       is asymptotically N(0,1): reject when sqrt(n) |r| > z_alpha.
 * The program runs 3 x 4 = 12 distribution tests and 12 independence tests on
 * correct samplers, so for a random seed its false-reject probability is at most
 * 24 x 1e-4 = 2.4e-3 (Bonferroni). The seed is fixed (t_seed, replayable with
 * DPCERT_TEST_SEED). Negative controls (scale x1.0625, mean shift 0.0375 sigma,
 * Laplace in place of Gaussian and vice versa, a uniform stretched by 1.0625 or
 * shifted, pairs with correlation 0.01, identical streams) must be rejected:
 * each prints its statistic beside the critical value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/test.h"

#define N 1000000
static const double ALPHA = 1e-4;

/* ---- critical values ---- */
static double kolmogorov_sf(double x) { /* P(K > x) */
    double s = 0;
    for (int k = 1; k <= 100; k++) s += (k & 1 ? 2.0 : -2.0) * exp(-2.0 * k * k * x * x);
    return s;
}
static double bisect(double (*f)(double), double target, double lo, double hi) { /* f decreasing */
    for (int i = 0; i < 200; i++) {
        double m = 0.5 * (lo + hi);
        if (f(m) > target) lo = m; else hi = m;
    }
    return 0.5 * (lo + hi);
}
static double two_sided_normal_sf(double z) { return erfc(z / sqrt(2.0)); } /* P(|Z| > z) */

/* ---- CDFs ---- */
static double cdf_gauss(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double cdf_laplace(double x) { return x < 0 ? 0.5 * exp(x) : 1.0 - 0.5 * exp(-x); }
static double cdf_unif(double x) { return x <= 0 ? 0 : x >= 1 ? 1 : x; }

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double *scratch;
/* Stephens-modified KS statistic of x[0..n) against cdf. */
static double ks_stat(const double *x, size_t n, double (*cdf)(double)) {
    memcpy(scratch, x, n * sizeof *x);
    qsort(scratch, n, sizeof *scratch, cmp_d);
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double F = cdf(scratch[i]);
        double a = F - (double)i / n, b = (double)(i + 1) / n - F;
        if (a > d) d = a;
        if (b > d) d = b;
    }
    double sn = sqrt((double)n);
    return (sn + 0.12 + 0.11 / sn) * d;
}

/* z statistic of mean((x - mu)^power), power 1, 2 or 4, against its exact mean m and variance v. */
static double z_moment(const double *x, size_t n, double mu, int power, double m, double v) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - mu, d2 = d * d;
        s += power == 1 ? d : power == 2 ? d2 : d2 * d2;
    }
    return (s / n - m) / sqrt(v / n);
}

static double corr(const double *x, const double *y, size_t n) {
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) { mx += x[i]; my += y[i]; }
    mx /= n; my /= n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double a = x[i] - mx, b = y[i] - my;
        sxy += a * b; sxx += a * a; syy += b * b;
    }
    return sxy / sqrt(sxx * syy);
}

typedef struct {
    const char *name;
    double (*cdf)(double);
    double mu, var, m4, var_sq, var_4; /* mean, variance, 4th central moment, Var((X-mu)^2), Var((X-mu)^4) */
} law;

static double k_crit, z_crit;

/* All four tests; returns how many rejected. `expect_pass` selects the check. */
static int run_tests(const char *label, const double *x, size_t n, const law *L, int expect_pass, const char *which) {
    double ks = ks_stat(x, n, L->cdf);
    double zm = z_moment(x, n, 0, 1, L->mu, L->var); /* power 1 around 0: the plain mean */
    double zv = z_moment(x, n, L->mu, 2, L->var, L->var_sq);
    double z4 = z_moment(x, n, L->mu, 4, L->m4, L->var_4);
    int rej_ks = ks > k_crit, rej_m = fabs(zm) > z_crit, rej_v = fabs(zv) > z_crit, rej_4 = fabs(z4) > z_crit;
    printf("%-38s vs %-8s KS %8.3f (crit %.4f)%s  z_mean %8.2f  z_var %8.2f  z_m4 %8.2f (crit %.4f)\n", label,
           L->name, ks, k_crit, rej_ks ? " REJECT" : "       ", zm, zv, z4, z_crit);
    if (expect_pass) {
        T_CHECK(!rej_ks, "%s: KS %.4f > %.4f", label, ks, k_crit);
        T_CHECK(!rej_m, "%s: mean z %.3f", label, zm);
        T_CHECK(!rej_v, "%s: variance z %.3f", label, zv);
        T_CHECK(!rej_4, "%s: fourth-moment z %.3f", label, z4);
    } else {
        /* The negative control must be rejected by KS and by the moment test aimed at it. */
        T_CHECK(rej_ks, "negative control %s not rejected by KS (%.4f <= %.4f)", label, ks, k_crit);
        int rej = strcmp(which, "mean") == 0 ? rej_m : strcmp(which, "var") == 0 ? rej_v : rej_4;
        T_CHECK(rej, "negative control %s not rejected by the %s test", label, which);
    }
    return rej_ks + rej_m + rej_v + rej_4;
}

static void indep(const char *label, const double *x, const double *y, size_t n, int expect_independent) {
    double r = corr(x, y, n), s = sqrt((double)n) * fabs(r);
    printf("%-52s sqrt(n)|r| %9.3f (crit %.4f)%s\n", label, s, z_crit, s > z_crit ? " REJECT" : "");
    if (expect_independent) T_CHECK(s <= z_crit, "%s: correlation %.3g, sqrt(n)|r| = %.3f > %.4f", label, r, s, z_crit);
    else T_CHECK(s > z_crit, "negative control %s not rejected: sqrt(n)|r| = %.3f", label, s);
}

int main(void) {
    uint64_t seed = t_seed(20240611);
    k_crit = bisect(kolmogorov_sf, ALPHA, 0.5, 5.0);
    z_crit = bisect(two_sided_normal_sf, ALPHA, 0.0, 10.0);
    printf("alpha = %g per test: KS critical value %.6f, |z| critical value %.6f\n", ALPHA, k_crit, z_crit);
    T_CHECK(fabs(kolmogorov_sf(k_crit) - ALPHA) < 1e-9 && fabs(two_sided_normal_sf(z_crit) - ALPHA) < 1e-9,
            "critical values do not solve their equations");

    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *w = malloc(N * sizeof *w);
    scratch = malloc(N * sizeof *scratch);
    T_CHECK(x && y && w && scratch, "malloc");
    if (!(x && y && w && scratch)) return t_finish();

    /* Exact moments: N(0,1): E X^4 = 3, E X^8 = 105. Laplace(0,1): E X^2 = 2, E X^4 = 24, E X^8 = 8! = 40320.
     * U(0,1): Var = 1/12, E (X-1/2)^4 = 1/80, E (X-1/2)^8 = 1/2304. */
    const law gauss = {"N(0,1)", cdf_gauss, 0, 1, 3, 3 - 1, 105 - 9};
    const law lap = {"Lap(0,1)", cdf_laplace, 0, 2, 24, 24 - 4, 40320 - 576};
    const law unif = {"U(0,1)", cdf_unif, 0.5, 1.0 / 12, 1.0 / 80, 1.0 / 80 - 1.0 / 144, 1.0 / 2304 - 1.0 / 6400};

    dp_stream ps, ss;
    dp_seed sd = {seed};
    dp_noise_key nk = {seed ^ 0x5DEECE66DULL}; /* a different key value, as a real run would have */
    T_OK(dp_stream_public(&ps, sd, DP_PURPOSE_TEST, 0, 0));
    T_OK(dp_stream_secret(&ss, nk, DP_PURPOSE_AUDIT_NOISE, 0, 0));

    /* ---- Gaussian ---- */
    dp_rng_fill_gaussian(x, &ss, 0, N);
    run_tests("gaussian (audit-noise stream)", x, N, &gauss, 1, "");
    for (size_t i = 0; i < N; i++) y[i] = 1.0625 * x[i];
    run_tests("control: gaussian x 1.0625", y, N, &gauss, 0, "var");
    for (size_t i = 0; i < N; i++) y[i] = x[i] + 0.0375;
    run_tests("control: gaussian + 0.0375 sigma", y, N, &gauss, 0, "mean");
    dp_rng_fill_laplace(y, &ss, 0, N);
    for (size_t i = 0; i < N; i++) y[i] /= sqrt(2.0); /* unit variance Laplace */
    run_tests("control: laplace (var 1) as gaussian", y, N, &gauss, 0, "m4");

    /* ---- Laplace ---- */
    dp_rng_fill_laplace(x, &ps, 0, N);
    run_tests("laplace (test stream)", x, N, &lap, 1, "");
    for (size_t i = 0; i < N; i++) y[i] = 1.0625 * x[i];
    run_tests("control: laplace x 1.0625", y, N, &lap, 0, "var");
    for (size_t i = 0; i < N; i++) y[i] = x[i] + 0.0375 * sqrt(2.0);
    run_tests("control: laplace + 0.0375 sigma", y, N, &lap, 0, "mean");
    dp_rng_fill_gaussian(y, &ps, 0, N);
    for (size_t i = 0; i < N; i++) y[i] *= sqrt(2.0); /* variance 2, like Laplace(0,1) */
    run_tests("control: gaussian (var 2) as laplace", y, N, &lap, 0, "m4");

    /* ---- Uniform ---- */
    dp_rng_fill_uniform(x, &ps, 0, N);
    run_tests("uniform (test stream)", x, N, &unif, 1, "");
    for (size_t i = 0; i < N; i++) y[i] = 1.0625 * x[i];
    run_tests("control: uniform x 1.0625", y, N, &unif, 0, "mean");
    for (size_t i = 0; i < N; i++) y[i] = x[i] + 0.0375 * sqrt(1.0 / 12);
    run_tests("control: uniform + 0.0375 sigma", y, N, &unif, 0, "mean");

    /* ---- independence (Gaussian values, n = 10^6 pairs each) ---- */
    dp_stream a;
    dp_rng_fill_gaussian(x, &ps, 0, N);
#define PAIR(label, MAKE)                                                  \
    do {                                                                   \
        MAKE;                                                              \
        dp_rng_fill_gaussian(y, &a, 0, N);                                 \
        indep(label, x, y, N, 1);                                          \
    } while (0)
    PAIR("stream 0 vs stream 1", T_OK(dp_stream_public(&a, sd, DP_PURPOSE_TEST, 1, 0)));
    PAIR("lane 0 vs lane 1", T_OK(dp_stream_public(&a, sd, DP_PURPOSE_TEST, 0, 1)));
    PAIR("purpose test vs data", T_OK(dp_stream_public(&a, sd, DP_PURPOSE_DATA, 0, 0)));
    PAIR("key k vs k+1", do { dp_seed s2 = {seed + 1}; T_OK(dp_stream_public(&a, s2, DP_PURPOSE_TEST, 0, 0)); } while (0));
    PAIR("public test vs secret noise, same key value",
         do { dp_noise_key k2 = {seed}; T_OK(dp_stream_secret(&a, k2, DP_PURPOSE_NOISE, 0, 0)); } while (0));
    PAIR("stream 0 vs stream 2^31 (high bit of counter word 2)",
         T_OK(dp_stream_public(&a, sd, DP_PURPOSE_TEST, 1u << 31, 0)));
    /* lag 1 and the cos/sin pair of one Box-Muller block, on 2N draws */
    double *z = malloc(2 * (size_t)N * sizeof *z);
    T_CHECK(z != NULL, "malloc");
    if (z) {
        dp_rng_fill_gaussian(z, &ps, 0, 2 * (size_t)N);
        for (size_t i = 0; i < N; i++) { x[i] = z[2 * i]; y[i] = z[2 * i + 1]; }
        indep("Box-Muller pair z0 vs z1 (same block)", x, y, N, 1);
        for (size_t i = 0; i < N; i++) { x[i] *= x[i]; y[i] *= y[i]; }
        indep("Box-Muller pair z0^2 vs z1^2 (same block)", x, y, N, 1);
        for (size_t i = 0; i + 1 < N; i++) { x[i] = z[2 * i + 1]; y[i] = z[2 * i + 2]; }
        indep("lag 1 across blocks (z1 of block j vs z0 of j+1)", x, y, N - 1, 1);
        dp_rng_fill_uniform(z, &ps, 0, 2 * (size_t)N);
        for (size_t i = 0; i < N; i++) { x[i] = z[2 * i]; y[i] = z[2 * i + 1]; }
        indep("uniform lag 1 (within a block)", x, y, N, 1);
        dp_rng_fill_uniform(z, &ss, 0, 2 * (size_t)N);
        for (size_t i = 0; i < N; i++) { x[i] = z[i]; y[i] = z[i + N]; }
        indep("uniform elements i vs i + 10^6 (secret stream)", x, y, N, 1);
        for (size_t i = 0; i < N; i++) { x[i] = dp_rng_laplace(&ss, i); y[i] = dp_rng_laplace(&ss, i + 1); }
        indep("laplace lag 1", x, y, N, 1);
        free(z);
    }
    /* negative controls: correlation 0.01, and the same stream twice */
    dp_rng_fill_gaussian(x, &ps, 0, N);
    dp_rng_fill_gaussian(w, &ss, 0, N);
    for (size_t i = 0; i < N; i++) y[i] = (0.01 * x[i] + sqrt(1 - 1e-4) * w[i]);
    indep("control: correlation 0.01", x, y, N, 0);
    T_OK(dp_stream_public(&a, sd, DP_PURPOSE_TEST, 0, 0));
    dp_rng_fill_gaussian(y, &a, 0, N);
    indep("control: the same stream twice", x, y, N, 0);

    /* ---- exactness properties of the transforms ---- */
    T_CHECK(dp_u64_to_open01(0) == ldexp(1, -53) && dp_u64_to_open01(UINT64_MAX) == 1 - ldexp(1, -53),
            "uniform range ends: %.17g %.17g", dp_u64_to_open01(0), dp_u64_to_open01(UINT64_MAX));
    T_CHECK(dp_u64_to_open01(UINT64_MAX) < 1.0 && dp_u64_to_open01(0) > 0.0, "uniform must be in the open interval");
    T_CHECK(dp_laplace_from_u64(UINT64_MAX) == 52 * log(2.0) && dp_laplace_from_u64(0) == -52 * log(2.0),
            "laplace extremes: %.17g %.17g (expected +-52 ln 2)", dp_laplace_from_u64(UINT64_MAX),
            dp_laplace_from_u64(0));
    long asym = 0, bad_grid = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        uint64_t wd = dp_rng_u64(&ss, i);
        double u = dp_u64_to_open01(wd);
        /* u = (2j+1) 2^-53 with j = w >> 12 exactly */
        if (u * 9007199254740992.0 != (double)(((wd >> 12) << 1) | 1)) bad_grid++;
        /* symmetry: the word with j -> 2^52-1-j gives the negated Laplace value */
        uint64_t mirror = ~wd;
        if (dp_laplace_from_u64(mirror) != -dp_laplace_from_u64(wd)) asym++;
    }
    T_CHECK(bad_grid == 0, "%ld uniforms off the (2j+1) 2^-53 grid", bad_grid);
    T_CHECK(asym == 0, "%ld laplace values not antisymmetric under w -> ~w", asym);
    double z0, z1;
    dp_philox_ctr zero = {{0, 0, 0, 0}}, ones = {{~0u, ~0u, ~0u, ~0u}};
    dp_box_muller(zero, &z0, &z1);
    T_CHECK(fabs(z0 - sqrt(106 * log(2.0))) <= 1e-12 * z0 && isfinite(z1), "box-muller at u1 = 2^-53: z0 = %.17g", z0);
    dp_box_muller(ones, &z0, &z1);
    T_CHECK(isfinite(z0) && isfinite(z1) && fabs(z0) < 1e-7, "box-muller at u1 = 1 - 2^-53: %.17g %.17g", z0, z1);

    /* fills equal element-wise access, odd and even offsets */
    double buf[33];
    int same = 1;
    dp_rng_fill_laplace(buf, &ss, 7, 33);
    for (int i = 0; i < 33; i++) same &= buf[i] == dp_rng_laplace(&ss, 7 + (uint64_t)i);
    dp_rng_fill_uniform(buf, &ss, 8, 33);
    for (int i = 0; i < 33; i++) same &= buf[i] == dp_rng_uniform(&ss, 8 + (uint64_t)i);
    dp_rng_fill_gaussian(buf, &ss, 8, 33);
    for (int i = 0; i < 33; i++) same &= buf[i] == dp_rng_gaussian(&ss, 8 + (uint64_t)i);
    T_CHECK(same, "bulk fills differ from element-wise values");
    /* dp_rng_below: floor(w n / 2^64), in range */
    int in_range = 1;
    for (uint64_t i = 0; i < 1000; i++) {
        uint64_t r = dp_rng_below(&ps, i, 7), wd = dp_rng_u64(&ps, i);
        in_range &= r < 7 && r == (uint64_t)(((unsigned __int128)wd * 7) >> 64);
    }
    T_CHECK(in_range, "dp_rng_below out of range or not floor(w n / 2^64)");

    free(x); free(y); free(w); free(scratch);
    return t_finish();
}

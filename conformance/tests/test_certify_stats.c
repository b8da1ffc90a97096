/* conformance/tests/test_certify_stats.c — the statistical tests of `dpcert certify`
 * (conformance/certify/certify_stats.c, docs/certification.md "Statistical tests"):
 *  - false-reject probability: each test run 400 times at alpha = 0.05 on null samples
 *    (iid N(0,1) / Binomial) rejects at most 20 + 4 sd = 37 times (its bound is conservative);
 *  - power at the `ci` level (n = the ci suite's noise draws at 2 repeats, alpha 1e-6):
 *    the power lower bound against noise std 0.9 of the claim is >= 0.999, and 20 planted
 *    under-noised samples (std 0.9) are all rejected; uniform, Laplace and discretised noise
 *    of equal variance are rejected by the KS test; correlated pairs (rho 0.1) by the
 *    independence test; fixed-size batches and epoch shuffling by the dispersion test; a
 *    wrong q (1.3 q) by the count test;
 *  - power at the `certify` level (alpha 1e-9, the repeats `certify` chooses): bound >= 0.999
 *    against std 0.97, and 10 planted samples at 0.97 all rejected; correct noise accepted.
 * Seeds: DPCERT_TEST_SEED. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/safetensors.h"
#include "common/test.h"
#include "conformance/certify/certify.h"

static dp_stream g_st;
static uint64_t g_k;
static double gauss(void) { return dp_rng_gaussian(&g_st, g_k++); }
static double unif(void) { return dp_rng_uniform(&g_st, g_k++); }

/* noise draws per repeat of a suite: the parameters of its step vectors */
static int64_t per_repeat(cert_suite s, const char *dir) {
    T_OK(cert_vectors_write(dir, s, NULL, NULL));
    int64_t n = 0;
    T_OK(cert_noise_draws(&n, dir));
    return n;
}

static void null_rates(void) {
    const int T = 400, n = 2000;
    const double a = 0.05;
    int rv = 0, rm = 0, rk = 0, rp = 0, rc = 0, rd = 0;
    double *z = malloc(n * sizeof *z), *w = malloc(n * sizeof *w);
    int64_t cnt[200];
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < n; i++) { z[i] = gauss(); w[i] = gauss(); }
        cert_check k;
        cert_test_variance(&k, z, n, a); rv += k.status == CERT_FAIL;
        cert_test_mean(&k, z, n, a); rm += k.status == CERT_FAIL;
        cert_test_ks(&k, z, n, a); rk += k.status == CERT_FAIL;
        cert_test_products(&k, z, w, n, a); rp += k.status == CERT_FAIL;
        int64_t x = 0;
        for (int i = 0; i < 200; i++) {
            cnt[i] = 0;
            for (int j = 0; j < 50; j++) cnt[i] += unif() < 0.2;
            x += cnt[i];
        }
        cert_test_count(&k, x, 200 * 50, 0.2, a); rc += k.status == CERT_FAIL;
        cert_test_dispersion(&k, cnt, 200, 50, 0.2, a); rd += k.status == CERT_FAIL;
    }
    printf("null rejections in %d trials at alpha 0.05: variance %d, mean %d, KS %d, products %d, count %d, dispersion %d\n",
           T, rv, rm, rk, rp, rc, rd);
    int lim = 37;
    T_CHECK(rv <= lim && rm <= lim && rk <= lim && rp <= lim && rc <= lim && rd <= lim, "a null rejection rate exceeds alpha");
    free(z);
    free(w);
}

static int rejects_all(int trials, int64_t n, double sd, double alpha) {
    double *z = malloc((size_t)n * sizeof *z);
    int rej = 0;
    for (int t = 0; t < trials; t++) {
        for (int64_t i = 0; i < n; i++) z[i] = sd * gauss();
        cert_check k;
        cert_test_variance(&k, z, n, alpha);
        rej += k.status == CERT_FAIL;
    }
    free(z);
    return rej;
}

int main(void) {
    uint64_t seed = t_seed(1313);
    T_OK(dp_stream_public(&g_st, (dp_seed){seed}, dp_purpose_from_name("test"), 13, 0));
    null_rates();

    /* ci level */
    int64_t nci = 2 * per_repeat(CERT_SUITE_CI, "vci");
    double a = 1e-6;
    double pw = cert_power_variance(nci, a, 0.9);
    printf("ci: %lld noise draws (2 repeats); variance-test power >= %.6f against std 0.9\n", (long long)nci, pw);
    T_CHECK(pw >= 0.999, "ci power against std 0.9 only %.6f", pw);
    T_CHECK(rejects_all(20, nci, 0.9, a) == 20, "a planted std-0.9 sample was accepted at the ci level");
    T_CHECK(rejects_all(5, nci, 1.0, a) == 0, "correct noise rejected at the ci level");
    T_CHECK(rejects_all(5, nci, 1.0 / 0.9, a) == 5, "planted over-noise (1/0.9) accepted");
    /* KS against noise of equal variance but the wrong shape */
    double *z = malloc((size_t)nci * sizeof *z);
    const char *alt[3] = {"uniform", "Laplace", "discretised (step 1 sd)"};
    for (int w = 0; w < 3; w++) {
        for (int64_t i = 0; i < nci; i++) {
            double u = unif();
            z[i] = w == 0 ? sqrt(3.0) * (2 * u - 1)
                 : w == 1 ? (u < 0.5 ? log(2 * u) : -log(2 - 2 * u)) / sqrt(2.0)
                          : round(gauss());
        }
        if (w == 2) { /* rescale to variance 1 (as the alternative of cert_ks_distance_alt) */
            double v = 0;
            for (int64_t i = 0; i < nci; i++) v += z[i] * z[i];
            v = sqrt(v / (double)nci);
            for (int64_t i = 0; i < nci; i++) z[i] /= v;
        }
        double D = cert_ks_distance_alt(w, 1.0), p = cert_power_ks(nci, a, D);
        cert_check k;
        cert_test_ks(&k, z, nci, a);
        printf("ci: KS vs %s noise: distance %.4f, threshold %.4f, power >= %.6f, sample statistic %.4f (%s)\n", alt[w], D,
               k.hi, p, k.statistic, cert_status_name(k.status));
        T_CHECK(k.status == CERT_FAIL, "KS accepted %s noise", alt[w]);
        T_CHECK(p >= 0.999, "KS power against %s only %.6f", alt[w], p);
    }
    /* independence: pairs with correlation 0.1 */
    int64_t m = nci / 2;
    double *b = malloc((size_t)m * sizeof *b);
    for (int64_t i = 0; i < m; i++) { z[i] = gauss(); b[i] = 0.1 * z[i] + sqrt(1 - 0.01) * gauss(); }
    cert_check k;
    cert_test_products(&k, z, b, m, a);
    T_CHECK(k.status == CERT_FAIL, "correlation 0.1 over %lld pairs accepted (%s)", (long long)m, k.msg);
    for (int64_t i = 0; i < m; i++) b[i] = gauss();
    cert_test_products(&k, z, b, m, a);
    T_CHECK(k.status == CERT_PASS, "independent pairs rejected (%s)", k.msg);
    T_CHECK(fabs(cert_products_threshold(m, a) / (double)m - sqrt(2 * log(2 / a) / (double)m)) < 0.2 * sqrt(2 * log(2 / a) / (double)m),
            "products threshold far from its Gaussian approximation");
    /* sampling: the ci sampling vector is N = 200, K = 100, q = 0.1 */
    int64_t cs[100], ce[200];
    for (int s = 0; s < 100; s++) cs[s] = 20; /* fixed-size batches */
    cert_test_dispersion(&k, cs, 100, 200, 0.1, a);
    T_CHECK(k.status == CERT_FAIL, "fixed-size batches accepted (%s)", k.msg);
    for (int i = 0; i < 200; i++) ce[i] = 10; /* epoch shuffling: every example 10 times */
    cert_test_dispersion(&k, ce, 200, 100, 0.1, a);
    T_CHECK(k.status == CERT_FAIL, "epoch shuffling accepted (%s)", k.msg);
    int64_t x = 0;
    for (int s = 0; s < 100; s++) { cs[s] = 0; for (int i = 0; i < 200; i++) cs[s] += unif() < 0.13; x += cs[s]; }
    cert_test_count(&k, x, 20000, 0.1, a);
    T_CHECK(k.status == CERT_FAIL, "q 1.3 x too large accepted (%s)", k.msg);
    cert_test_dispersion(&k, cs, 100, 200, 0.13, a);
    T_CHECK(k.status == CERT_PASS, "Poisson batch sizes rejected by the dispersion test (%s)", k.msg);

    /* certify level */
    double ac = 1e-9;
    int64_t per = per_repeat(CERT_SUITE_CERTIFY, "vcert"), R = cert_repeats_needed(per, ac, CERT_CERTIFY_STD);
    int64_t ncert = per * R;
    double pc = cert_power_variance(ncert, ac, 0.97);
    printf("certify: %lld draws per repeat, %lld repeats, %lld draws; power >= %.6f against std 0.97 at alpha 1e-9\n",
           (long long)per, (long long)R, (long long)ncert, pc);
    T_CHECK(pc >= 0.999, "certify power %.6f", pc);
    T_CHECK(cert_repeats_needed(0, ac, 0.97) == 2 && cert_repeats_needed(per, ac, 0.97) >= 2,
            "no step vector (a filtered run) must give 2 repeats, not the cap");
    T_CHECK(rejects_all(10, ncert, 0.97, ac) == 10, "a planted std-0.97 sample was accepted at the certify level");

    /* strict level: power 0.999 against std 0.99 needs >= 522 459 draws at alpha 1e-9 */
    int64_t Rs = cert_repeats_needed(per, ac, CERT_STRICT_STD), ns = per * Rs;
    double ps = cert_power_variance(ns, ac, 0.99), ds = cert_detectable_std(ns, ac, 0.999);
    printf("strict: %lld repeats, %lld draws; power >= %.6f against std 0.99; detects std <= %.5f\n", (long long)Rs,
           (long long)ns, ps, ds);
    T_CHECK(ps >= 0.999 && ds >= 0.99, "strict power %.6f, detectable %.5f", ps, ds);
    T_CHECK(cert_power_variance(per * (Rs - 1), ac, 0.99) < 0.999, "strict repeats not the smallest");
    T_CHECK(cert_power_variance(522459, ac, 0.99) >= 0.999 && cert_power_variance(522000, ac, 0.99) < 0.999,
            "the stated draw count for power 0.999 at 0.99 (522 459) is wrong");
    T_CHECK(rejects_all(3, ns, 0.99, ac) == 3, "a planted std-0.99 sample was accepted at the strict level");
    T_CHECK(rejects_all(2, ns, 1.0, ac) == 0, "correct noise rejected at the strict level");

    /* per-tensor tests: 20 draws (a 10-element bias, 2 repeats) at alpha 1e-9 / 98 still reject a
       missing noise (the Laurent-Massart region, 1 - 2 sqrt(t/n) < 0, could not) */
    double zt[20];
    for (int i = 0; i < 20; i++) zt[i] = 1e-9 * gauss();
    cert_test_variance(&k, zt, 20, 1e-9 / 98);
    T_CHECK(k.status == CERT_FAIL && k.lo > 0.02 && !k.vacuous, "20 draws without noise accepted (%s)", k.msg);
    T_CHECK(1 - 2 * sqrt(log(2 / (1e-9 / 98)) / 20) < 0, "the Laurent-Massart region was not vacuous here (control)");
    for (int i = 0; i < 20; i++) zt[i] = gauss();
    cert_test_variance(&k, zt, 20, 1e-9 / 98);
    T_CHECK(k.status == CERT_PASS, "20 correct draws rejected (%s)", k.msg);

    /* sampling sizes: the certify vector (K 100, N 1000) left the per-example test
       vacuous below (negative control of the flag); the new ones (ci K 250 N 400, certify K 300
       N 800) are not, and catch a rate 1.1 q with power >= 0.999 */
    cert_test_count(&k, 10, 100, 0.1, 1e-9 / 1000);
    T_CHECK(k.vacuous & 1, "K 100: the per-example lower bound %.3f not flagged vacuous", k.lo);
    cert_test_count(&k, 25, 250, 0.1, 1e-6 / 400);
    T_CHECK(!k.vacuous && k.lo > 0, "ci per-example region vacuous (%s)", k.msg);
    cert_test_count(&k, 30, 300, 0.1, 1e-9 / 800);
    T_CHECK(!k.vacuous && k.lo > 0, "certify per-example region vacuous (%s)", k.msg);
    cert_test_count(&k, 0, 300, 0.1, 1e-9 / 800);
    T_CHECK(k.status == CERT_FAIL, "a never-sampled example accepted at the certify size");
    T_CHECK(cert_power_count(250 * 400, 0.1, 1e-6, 0.11) >= 0.999 && cert_power_count(300 * 800, 0.1, 1e-9, 0.11) >= 0.999,
            "a rate 1.1 q not caught with power 0.999");
    T_CHECK(cert_power_count(100 * 200, 0.1, 1e-6, 0.11) < 0.5, "the old ci size caught 1.1 q (control of the sizing)");
    T_CHECK(cert_power_dispersion_fixed(100, 1000, 0.1, 1e-9) == 1 && cert_power_dispersion_fixed(300, 800, 0.1, 1e-9) == 1,
            "fixed-size batches not caught with certainty by the dispersion test");
    for (int s2 = 0; s2 < 100; s2++) cs[s2] = 20;
    cert_test_dispersion(&k, cs, 100, 200, 0.1, 1e-9);
    T_CHECK(k.status == CERT_FAIL && k.lo > 0 && !k.vacuous, "fixed-size batches accepted at alpha 1e-9 (%s)", k.msg);
    T_CHECK(rejects_all(3, ncert, 1.0, ac) == 0, "correct noise rejected at the certify level");
    free(z);
    free(b);
    return t_finish();
}

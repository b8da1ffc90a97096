/* conformance/tests/test_tolerance.c — the error-bound building blocks on crafted
 * inputs (a perturbation just inside the bound passes, just outside fails), the
 * statistical checks with their negative controls, and the case loader's rejections. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/test.h"
#include "conformance/conform/conform.h"

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

int main(void) {
    uint64_t seed = t_seed(7);
    /* unit roundoffs */
    T_CHECK(conf_unit_roundoff(DP_F64) == ldexp(1, -53), "u f64");
    T_CHECK(conf_unit_roundoff(DP_F32) == ldexp(1, -24), "u f32");
    T_CHECK(conf_unit_roundoff(DP_BF16) == ldexp(1, -8), "u bf16");
    T_CHECK(conf_unit_roundoff(DP_I64) == 0, "integers exact");
    /* gamma_n */
    double u = ldexp(1, -24);
    T_CLOSE(conf_gamma(10, u), 10 * u / (1 - 10 * u), 0, "gamma_10");
    T_CHECK(isinf(conf_gamma(1 << 24, u)), "gamma_n with n u >= 1 is no bound");
    T_CHECK(conf_gamma(0, u) == 0, "gamma_0");

    /* the sum bound holds for the worst f32 sums we can build, and is not vacuous:
       summing n values in float vs double stays inside gamma_{n-1} sum|x| */
    {
        dp_stream st;
        dp_stream_public(&st, (dp_seed){seed}, dp_purpose_from_name("test"), 3, 0);
        for (int n = 2; n <= 4096; n *= 4) {
            float s32 = 0;
            double s64 = 0, sabs = 0;
            for (int i = 0; i < n; i++) {
                float x = (float)(dp_rng_gaussian(&st, (uint64_t)i) * 1e3);
                s32 += x;
                s64 += (double)x;
                sabs += fabs((double)x);
            }
            double b = conf_bound_sum(n, sabs, u);
            T_CHECK(fabs((double)s32 - s64) <= b, "n=%d: f32 sum error %.3g > bound %.3g", n, fabs((double)s32 - s64), b);
        }
        /* a crafted worst case: 1 + n tiny terms each lost (the error is ~ n * u/2 * ... ) */
        float s = 1.0f;
        int n = 1000;
        double exact = 1.0, sabs = 1.0;
        for (int i = 0; i < n; i++) { s += 5.9e-8f; exact += (double)5.9e-8f; sabs += (double)5.9e-8f; }
        T_CHECK(fabs((double)s - exact) <= conf_bound_sum(n + 1, sabs, u), "absorbed terms beyond the bound");
        T_CHECK(fabs((double)s - exact) > conf_bound_sum(n + 1, sabs, u) / 100, "crafted sum should use a visible part of the bound");
    }

    /* conf_fraction: just inside passes, just outside fails; NaN handling */
    {
        double ref = 1.0, b = 1e-10;
        T_CHECK(conf_fraction(ref, ref + 0.999 * b, b) <= 1, "just inside");
        T_CHECK(conf_fraction(ref, ref + 1.001 * b, b) > 1, "just outside");
        T_CHECK(conf_fraction(ref, ref, 0) == 0, "exact match with zero bound");
        T_CHECK(isinf(conf_fraction(ref, nextafter(ref, 2), 0)), "one ulp with zero bound");
        T_CHECK(isinf(conf_fraction(ref, NAN, 1)), "NaN candidate");
        T_CHECK(conf_fraction(NAN, NAN, 1) == 0, "both NaN");
        T_CHECK(isinf(conf_fraction(INFINITY, 1, 1)), "inf vs finite");
    }
    /* the Box-Muller bound covers recomputing z with perturbed transcendental results:
       perturb log, sqrt, cos by up to CONF_LIBM_ULPS ulps and compare */
    {
        double b = conf_bound_boxmuller(ldexp(1, -53));
        double worst = 0;
        for (int i = 1; i < 2000; i++) {
            double u1 = i / 2000.0, u2 = fmod(i * 0.618033988749895, 1.0);
            double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
            double e = CONF_LIBM_ULPS * ldexp(1, -53);
            double zp = sqrt(-2 * log(u1) * (1 + e)) * (1 + e) * (cos(6.283185307179586 * u2) * (1 + e) + e);
            worst = fmax(worst, fabs(zp - z));
        }
        T_CHECK(worst <= b, "perturbed Box-Muller error %.3g beyond the bound %.3g", worst, b);
        T_CHECK(b < 1e-12, "Box-Muller bound %.3g is too loose to catch a wrong stream", b);
    }

    /* statistical checks: the correct distribution passes, a negative control fails */
    {
        size_t n = 20000;
        double *x = malloc(n * sizeof *x);
        dp_stream st;
        dp_stream_public(&st, (dp_seed){seed}, dp_purpose_from_name("test"), 4, 0);
        for (size_t i = 0; i < n; i++) x[i] = 2.0 * dp_rng_gaussian(&st, i); /* variance 4 */
        conf_stat_result r;
        conf_stat_noise_variance(&r, x, n, 4.0, 1e-6);
        T_CHECK(r.status == CONF_PASS, "correct variance rejected: %s", r.msg);
        conf_stat_noise_variance(&r, x, n, 2.0, 1e-6); /* negative control: noise on every one of 2 ranks */
        T_CHECK(r.status == CONF_FAIL, "doubled variance accepted: %s", r.msg);
        conf_stat_noise_variance(&r, x, n, 4.0 * 1.15, 1e-6); /* negative control: 15% too little noise */
        T_CHECK(r.status == CONF_FAIL, "variance 15%% low accepted: %s", r.msg);
        conf_stat_noise_variance(&r, x, 0, 4.0, 1e-6);
        T_CHECK(r.status == CONF_FAIL, "no samples accepted");
        /* Poisson: draw Bernoulli(q) indicators, test with q and with a wrong q */
        int64_t trials = 10240, tot = 0;
        for (int64_t i = 0; i < trials; i++) tot += dp_rng_uniform(&st, (uint64_t)(n + i)) < 0.05;
        conf_stat_poisson(&r, tot, trials, 0.05, 1e-6);
        T_CHECK(r.status == CONF_PASS, "Poisson with the right q rejected: %s", r.msg);
        conf_stat_poisson(&r, tot, trials, 0.075, 1e-6);
        T_CHECK(r.status == CONF_FAIL, "Poisson with q 1.5x accepted: %s", r.msg);
        conf_stat_poisson(&r, tot, trials, 0.035, 1e-6);
        T_CHECK(r.status == CONF_FAIL, "Poisson with q 0.7x accepted: %s", r.msg);
        free(x);
    }

    /* the case loader: a good case loads; each malformed case is DP_ERR_FORMAT naming the key */
    {
        conf_case c;
        write_file("good.json", "{\"name\": \"x-1\", \"suites\": [\"ci\"], \"algorithm\": \"dpsgd\", \"ranks\": [1, 2],"
                                " \"sigma\": 1, \"clip\": 2, \"q\": 0.5, \"dataset_size\": 8, \"steps\": 2,"
                                " \"args\": {\"model\": \"mlp\", \"tied\": true, \"lr\": 0.5}}");
        T_OK(conf_case_load(&c, "good.json"));
        T_CHECK(c.nranks == 2 && c.ranks[1] == 2, "ranks");
        int found_tied = 0, found_sigma = 0;
        for (size_t i = 0; i < c.nargs; i++) {
            found_tied |= strcmp(c.args[i], "--tied") == 0;
            found_sigma |= strcmp(c.args[i], "--sigma") == 0 && i + 1 < c.nargs && strcmp(c.args[i + 1], "1") == 0;
        }
        T_CHECK(found_tied && found_sigma, "args not turned into options");
        conf_case_free(&c);
        struct { const char *text, *needle; } bad[] = {
            {"{\"name\": \"x\", \"suites\": [\"ci\"], \"algorithm\": \"dpsgd\", \"colour\": 1}", "colour"},
            {"{\"name\": \"x\", \"suites\": [\"ci\"], \"algorithm\": \"sgd\"}", "algorithm"},
            {"{\"name\": \"x\", \"suites\": [], \"algorithm\": \"dpsgd\"}", "suites"},
            {"{\"name\": \"x\", \"suites\": [\"ci\"], \"algorithm\": \"dpsgd\", \"ranks\": [0]}", "ranks"},
            {"{\"name\": \"x\", \"suites\": [\"ci\"], \"algorithm\": \"dpsgd\", \"kind\": \"stat-noise\"}", "sigma"},
            {"{\"name\": \"x y\", \"suites\": [\"ci\"], \"algorithm\": \"dpsgd\"}", "name"},
            {"{\"name\": \"x\", \"suites\": [\"ci\"], \"algorithm\": \"dpsgd\", \"args\": {\"lr\": [1]}}", "args.lr"},
            {"{\"name\": \"x\", \"name\": \"y\", \"suites\": [\"ci\"], \"algorithm\": \"dpsgd\"}", "duplicate"},
            {"{\"name\": \"x\", \"suites\": [\"ci\"], \"algorithm\": \"dpsgd\", \"expect\": {\"status\": \"PASS\"}}", "expect"},
            {"[1, 2", "invalid JSON"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            write_file("bad.json", bad[i].text);
            dp_status st = conf_case_load(&c, "bad.json");
            T_CHECK(st == DP_ERR_FORMAT, "bad case %zu accepted (status %d)", i, (int)st);
            T_CHECK(strstr(dp_last_error(), bad[i].needle) != NULL, "bad case %zu: message '%s' does not name '%s'", i,
                    dp_last_error(), bad[i].needle);
        }
        /* every shipped case loads, and each suite is non-empty */
        const char *root = getenv("DPCERT_ROOT");
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/conformance/cases", root ? root : ".");
        const char *suites[] = {"ci", "default", "full"};
        for (int s = 0; s < 3; s++) {
            conf_case *v = NULL;
            size_t n = 0;
            T_OK(conf_cases_load_suite(&v, &n, dir, suites[s]));
            T_CHECK(n > 0, "suite %s is empty", suites[s]);
            for (size_t i = 0; i < n; i++) conf_case_free(&v[i]);
            free(v);
        }
    }
    return t_finish();
}

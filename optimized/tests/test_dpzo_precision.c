/* optimized/tests/test_dpzo_precision.c — DP-ZO at bf16/fp16 (docs/precision.md "DP-ZO"):
 *   - why the perturbation comes from the f32 master: on the bf16 grid in [0.25, 0.5)
 *     (spacing 2^-9) an in-place perturbation round_h(w_h + phi z) with phi = 1e-3 returns
 *     w_h for EVERY |z| < 0.976 (half a spacing), while from off-grid f32 masters fewer
 *     elements keep theta+ == theta- (the doc's numbers: 67 % of Gaussian draws lost in
 *     place; the check counts both on 4096 public draws);
 *   - opt_dpzo_update_f32 is bit for bit the plain float computation of docs/precision.md
 *     "DP-ZO" step 7 (and its master-half hook rounds the result to the half grid); the f64
 *     update differs from it on some element (negative control: the f32 path is f32);
 *   - an engine run (tiny mlp, 2 steps) at bf16 and fp16: the master weights after each
 *     step are f32 values and not all half values (the master is f32); with the test-only
 *     master-half bug they are all half values (negative control); the run is
 *     bit-identical at 1 and 2 threads; master-half without a half precision is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/dpzo.h"
#include "optimized/opt_spec.h"
#include "optimized/precision.h"

enum { NZ = 4096 };

static void check_inplace(void) {
    double z[NZ];
    dp_seed seed = {.k = 7};
    T_OK(opt_dpzo_direction(z, seed, 1, 0, 0, NZ));
    const float phi = 1e-3f, sp = 0x1p-9f; /* bf16 spacing in [0.25, 0.5) */
    int64_t lost_inplace = 0, lost_master = 0, below = 0, bad = 0;
    for (int i = 0; i < NZ; i++) {
        float pz = phi * (float)z[i];
        float wh = 0.25f + (float)(i % 126 + 1) * sp;             /* on the grid, inside the binade */
        float m = wh + sp * (float)((i * 37) % 97 + 1) / 98.0f;   /* off the grid, same cell */
        float ip = opt_prec_round_value(OPT_PREC_BF16, wh + pz), im = opt_prec_round_value(OPT_PREC_BF16, wh - pz);
        float mp = opt_prec_round_value(OPT_PREC_BF16, m + pz), mm = opt_prec_round_value(OPT_PREC_BF16, m - pz);
        if (fabs(z[i]) < 0.976) {
            below++;
            if (ip != wh || im != wh) bad++;
        }
        lost_inplace += ip == im;
        lost_master += mp == mm;
    }
    T_CHECK(bad == 0, "in-place bf16 perturbation kept %lld elements with |phi z| below half a spacing", (long long)bad);
    double f = (double)below / NZ;
    printf("bf16, phi 1e-3, |w| in [0.25, 0.5): in place %.1f %% of elements unperturbed (|z| < 0.976: %.1f %%), "
           "from the f32 master %.1f %%\n", 100.0 * (double)lost_inplace / NZ, 100 * f, 100.0 * (double)lost_master / NZ);
    /* P(|z| < 0.976) = 0.671; on 4096 draws the standard deviation is 0.0073, the window is
     * +-0.04 (5.5 sd; a deterministic draw, so this only guards the doc's number) */
    T_CHECK(f > 0.63 && f < 0.71, "fraction of |z| < 0.976 is %g, expected about 0.671", f);
    T_CHECK(lost_inplace >= below, "in place: %lld unperturbed < %lld", (long long)lost_inplace, (long long)below);
    T_CHECK(lost_master < lost_inplace, "from the master: %lld unperturbed, not fewer than in place (%lld)",
            (long long)lost_master, (long long)lost_inplace);
}

static float round_bf16(float x) { return opt_prec_round_value(OPT_PREC_BF16, x); }

static void check_update(void) {
    const int np = 2, n = 3;
    int64_t numel[2] = {5, 3};
    dp_seed seed = {.k = 99};
    const double scalar[3] = {(float)0.731, (float)-1.29, (float)0.0173};
    const double lr = 0.37, wd = 0.011;
    double **a = opt_f64_arrays_alloc(numel, np), **b = opt_f64_arrays_alloc(numel, np),
           **h = opt_f64_arrays_alloc(numel, np), **z = opt_f64_arrays_alloc(numel, np);
    if (!(a && b && h && z)) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (int p = 0; p < np; p++)
        for (int64_t e = 0; e < numel[p]; e++) a[p][e] = b[p][e] = h[p][e] = (float)(0.1 * (double)(e + 1) - 0.23 * p);
    T_OK(opt_dpzo_update_f32(a, numel, np, seed, 1, scalar, n, lr, wd, NULL));
    T_OK(opt_dpzo_update_f32(h, numel, np, seed, 1, scalar, n, lr, wd, round_bf16));
    T_OK(opt_dpzo_update(b, numel, np, seed, 1, scalar, n, lr, wd));
    int differ64 = 0;
    for (int p = 0; p < np; p++) {
        float u[8] = {0};
        for (int j = 0; j < n; j++) {
            T_OK(opt_dpzo_direction(z[p], seed, 1, p, j, numel[p]));
            for (int64_t e = 0; e < numel[p]; e++) {
                float prod = (float)scalar[j] * (float)z[p][e];
                u[e] = u[e] + prod;
            }
        }
        for (int64_t e = 0; e < numel[p]; e++) {
            float m = (float)(0.1 * (double)(e + 1) - 0.23 * p);
            float g = u[e] / (float)n, w = (float)wd * m, s = g + w, step = (float)lr * s, t = m - step;
            T_CHECK(a[p][e] == (double)t, "f32 update p %d e %lld: %.9g, plain float %.9g", p, (long long)e, a[p][e], (double)t);
            T_CHECK(h[p][e] == (double)round_bf16(t), "master-half hook p %d e %lld", p, (long long)e);
            differ64 += b[p][e] != a[p][e];
        }
    }
    T_CHECK(differ64 > 0, "negative control: the f64 update equals the f32 one on every element");
    opt_f64_arrays_free(a, np); opt_f64_arrays_free(b, np); opt_f64_arrays_free(h, np); opt_f64_arrays_free(z, np);
}

/* Two steps of the tiny mlp at precision p; theta after the run into out (caller frees). */
static double **run(opt_prec p, int master_half, int threads, int64_t **numel, int *np) {
    dp_model_config mc;
    dp_model_config_default(&mc, DP_MLP);
    mc.in = 4; mc.hidden[0] = 5; mc.nhidden = 1; mc.classes = 3;
    dp_dpzo_hparams hp = {.n_data = 16, .q = 0.5, .steps = 2, .clip = 0.3, .sigma = 1, .mech = DP_DPZO_GAUSSIAN,
                          .phi = 0.3, .lr = 0.1, .weight_decay = 0, .n_spsa = 2, .seed = {.k = 5}, .key = {.k = 6}};
    dp_model m;
    dp_dataset d;
    T_OK(dp_model_init(&m, &mc, hp.seed));
    T_OK(dp_dataset_generate(&d, &mc, hp.n_data, hp.seed));
    opt_backend_config bc = {.name = "host", .dtype = opt_prec_backend_dtype(p), .threads = threads, .use_mpi = 0};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &bc));
    opt_dpzo s;
    T_OK(opt_dpzo_init(&s, be, &hp, &m));
    T_OK(opt_dpzo_set_precision(&s, p, master_half ? OPT_BUG_MASTER_HALF : OPT_BUG_NONE));
    dp_dpzo_step_out out;
    memset(&out, 0, sizeof out);
    T_OK(dp_dpzo_step_out_alloc(&out, hp.n_data, hp.n_spsa));
    for (int64_t t = 1; t <= hp.steps; t++) T_OK(opt_dpzo_step(&out, &s, &d, t, 0));
    double **th = opt_f64_arrays_alloc(s.numel, s.nparams);
    *numel = calloc((size_t)s.nparams, sizeof **numel);
    if (!(th && *numel)) { fprintf(stderr, "out of memory\n"); exit(1); }
    *np = s.nparams;
    for (int q = 0; q < s.nparams; q++) {
        (*numel)[q] = s.numel[q];
        memcpy(th[q], s.theta[q], sizeof(double) * (size_t)s.numel[q]);
    }
    dp_dpzo_step_out_free(&out);
    opt_dpzo_free(&s);
    opt_backend_destroy(be);
    dp_dataset_free(&d);
    dp_model_free(&m);
    return th;
}

static void check_engine(opt_prec p) {
    int64_t *numel = NULL, *n2 = NULL, *n3 = NULL;
    int np = 0, np2 = 0, np3 = 0;
    double **a = run(p, 0, 1, &numel, &np), **b = run(p, 0, 2, &n2, &np2), **c = run(p, 1, 1, &n3, &np3);
    int64_t nonf32 = 0, nonhalf = 0, nonhalf_bug = 0, differ = 0;
    for (int q = 0; q < np; q++)
        for (int64_t e = 0; e < numel[q]; e++) {
            double v = a[q][e];
            nonf32 += (double)(float)v != v;
            nonhalf += (double)opt_prec_round_value(p, (float)v) != v;
            nonhalf_bug += (double)opt_prec_round_value(p, (float)c[q][e]) != c[q][e];
            differ += memcmp(&a[q][e], &b[q][e], sizeof v) != 0;
        }
    T_CHECK(nonf32 == 0, "%s: %lld master weights are not f32 values", opt_prec_names[p], (long long)nonf32);
    T_CHECK(nonhalf > 0, "%s: every master weight is a half value (the master is not f32)", opt_prec_names[p]);
    T_CHECK(nonhalf_bug == 0, "%s master-half bug: %lld master weights are not half values", opt_prec_names[p],
            (long long)nonhalf_bug);
    T_CHECK(differ == 0, "%s: %lld parameters differ between 1 and 2 threads", opt_prec_names[p], (long long)differ);
    opt_f64_arrays_free(a, np); opt_f64_arrays_free(b, np2); opt_f64_arrays_free(c, np3);
    free(numel); free(n2); free(n3);
}

static void check_bad(void) {
    dp_model_config mc;
    dp_model_config_default(&mc, DP_MLP);
    dp_dpzo_hparams hp = {.n_data = 4, .q = 0.5, .steps = 1, .clip = 1, .sigma = 1, .mech = DP_DPZO_GAUSSIAN,
                          .phi = 0.1, .lr = 0.1, .n_spsa = 1, .seed = {.k = 1}, .key = {.k = 2}};
    dp_model m;
    T_OK(dp_model_init(&m, &mc, hp.seed));
    opt_backend_config bc = {.name = "host", .dtype = DP_F32, .threads = 1, .use_mpi = 0};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &bc));
    opt_dpzo s;
    T_OK(opt_dpzo_init(&s, be, &hp, &m));
    T_CHECK(opt_dpzo_set_precision(&s, OPT_PREC_F32, OPT_BUG_MASTER_HALF) == DP_ERR_USAGE && strstr(dp_last_error(), "master-half"),
            "master-half at f32 not refused: %s", dp_last_error());
    opt_dpzo_free(&s);
    opt_backend_destroy(be);
    dp_model_free(&m);
}

int main(void) {
    check_inplace();
    check_update();
    check_engine(OPT_PREC_BF16);
    check_engine(OPT_PREC_FP16);
    check_bad();
    return t_finish();
}

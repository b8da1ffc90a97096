/* optimized/tests/test_precision.c — mixed precision in the engine (docs/precision.md):
 *   - the half rounding (opt_prec_round_value) is exactly common/tensor.h's conversion
 *     there and back, at the range edges (fp16 65504 / 65520, subnormals, zero, bf16
 *     FLT_MAX), and opt_prec_round_dev on the host backend gives the same bits and the
 *     overflow / underflow counts of the loss-scaling seam, through the backend's
 *     half_convert and through the generic path of a backend without it (half_convert
 *     NULL: to_host, the host conversion, to_device), and so do the encode / decode
 *     round trips of opt_prec_to_half / opt_prec_from_half; f32/f64 leave bits alone;
 *   - a bf16 and an fp16 DP-SGD run (mlp and llama, grad-sample and fused, replicated and
 *     zero1/zero3 at one rank): after every step each parameter (decoded from the 2-byte
 *     half tensors through the parameter fetch) is a half value,
 *     equal to the rounded master weight that opt_dpsgd_get_params returns; the master
 *     weights are not all half values (else the master is not f32: the negative control
 *     the f32 run gives, where the parameters are not all half values either);
 *     per-example gradients were rounded and counted (grad-sample); the run is
 *     bit-identical at 1 and 3 threads;
 *   - bad input: fp16 with a weight beyond 65504 at load (exact edge: 65504 accepted), an
 *     mlp input beyond it, --cp > 1, an f64 backend: refused with a message naming it;
 *     bf16 accepts the same model. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/dpsgd.h"
#include "optimized/tests/opt_test_tiny.h"

static int is_half(opt_prec p, double v) { return (double)opt_prec_round_value(p, (float)v) == v; }

static void check_values(void) {
    static const float xs[] = {0.0f, -0.0f, 1.0f, 1.0009765625f, 3.14159265f, 65504.0f, 65519.0f, 65520.0f, 70000.0f,
                               -1e5f, 6.1e-5f, 3e-5f, 1e-8f, 1e-39f, 1e30f, FLT_MAX, -FLT_MAX, FLT_MIN};
    const int n = (int)(sizeof xs / sizeof xs[0]);
    for (int i = 0; i < n; i++) {
        float x = xs[i];
        T_CHECK(opt_prec_round_value(OPT_PREC_BF16, x) == dp_bf16_to_f32(dp_f32_to_bf16(x)), "bf16 %g", (double)x);
        T_CHECK(opt_prec_round_value(OPT_PREC_FP16, x) == dp_f16_to_f32(dp_f32_to_f16(x)), "fp16 %g", (double)x);
        T_CHECK(opt_prec_round_value(OPT_PREC_F32, x) == x, "f32 identity %g", (double)x);
    }
    T_CHECK(opt_prec_round_value(OPT_PREC_FP16, 65519.0f) == 65504.0f, "fp16 65519 -> 65504");
    T_CHECK(isinf(opt_prec_round_value(OPT_PREC_FP16, 65520.0f)), "fp16 65520 -> inf");
    T_CHECK(isinf(opt_prec_round_value(OPT_PREC_BF16, FLT_MAX)), "bf16 FLT_MAX -> inf");
    T_CHECK(opt_prec_max_finite(OPT_PREC_FP16) == 65504.0, "fp16 max");
    T_CHECK(is_half(OPT_PREC_BF16, opt_prec_max_finite(OPT_PREC_BF16)) && opt_prec_max_finite(OPT_PREC_BF16) > 3e38,
            "bf16 max %g", opt_prec_max_finite(OPT_PREC_BF16));

    /* through the host backend, with the counts */
    opt_backend_config bc = {.name = "host", .dtype = DP_F32, .threads = 1, .use_mpi = 0};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &bc));
    if (!be) return;
    double h[32], back[32];
    for (int i = 0; i < n; i++) h[i] = (double)xs[i];
    void *dev = NULL;
    void *dh = NULL;
    T_OK(OPT_CALL(be, alloc, &dev, sizeof(float) * (size_t)n));
    T_OK(OPT_CALL(be, alloc, &dh, sizeof(uint16_t) * (size_t)n));
    T_CHECK(be->ops.half_convert != NULL, "the host backend fills half_convert");
    const opt_backend_ops saved = be->ops;
    for (int pg = 0; pg < 2 * OPT_PREC_COUNT; pg++) {
        const int pr = pg / 2, generic = pg % 2;
        if (pr == OPT_PREC_F64) continue;
        be->ops.half_convert = generic ? NULL : saved.half_convert; /* generic: the path of a backend without it */
        opt_prec p = (opt_prec)pr;
        opt_prec_count cnt = {0};
        T_OK(OPT_CALL(be, upload_f64, dev, h, n));
        T_OK(opt_prec_round_dev(be, p, dev, n, &cnt));
        T_OK(OPT_CALL(be, download_f64, back, dev, n));
        uint64_t over = 0, under = 0;
        for (int i = 0; i < n; i++) {
            float want = opt_prec_round_value(p, xs[i]);
            T_CHECK(memcmp(&(float){(float)back[i]}, &want, sizeof want) == 0, "%s device rounding (%s) of %g: %g, want %g",
                    opt_prec_names[p], generic ? "generic" : "half_convert", (double)xs[i], back[i], (double)want);
            over += isinf(want) && isfinite(xs[i]);
            under += xs[i] != 0 && fabsf(want) < (p == OPT_PREC_FP16 ? 0x1p-14f : FLT_MIN);
        }
        if (opt_prec_is_half(p)) {
            T_CHECK(cnt.elements == (uint64_t)n && cnt.overflow == over && cnt.underflow == under,
                    "%s counts: %llu/%llu/%llu, want %d/%llu/%llu", opt_prec_names[p], (unsigned long long)cnt.elements,
                    (unsigned long long)cnt.overflow, (unsigned long long)cnt.underflow, n, (unsigned long long)over,
                    (unsigned long long)under);
            T_CHECK(over >= (p == OPT_PREC_FP16 ? 4u : 2u) && under >= 1, "%s: the edge values overflow (%llu) and "
                    "underflow (%llu)", opt_prec_names[p], (unsigned long long)over, (unsigned long long)under);
            /* encode the original values into 2-byte elements, decode them: the same bits */
            uint16_t bits[32];
            T_OK(OPT_CALL(be, upload_f64, dev, h, n));
            T_OK(opt_prec_to_half(be, p, dh, dev, n));
            T_OK(OPT_CALL(be, to_host, bits, dh, sizeof(uint16_t) * (size_t)n));
            T_OK(OPT_CALL(be, zero, dev, sizeof(float) * (size_t)n));
            T_OK(opt_prec_from_half(be, p, dev, dh, n));
            T_OK(OPT_CALL(be, download_f64, back, dev, n));
            for (int i = 0; i < n; i++) {
                float want = opt_prec_round_value(p, xs[i]);
                T_CHECK(bits[i] == opt_prec_encode(p, xs[i]) && memcmp(&(float){(float)back[i]}, &want, sizeof want) == 0,
                        "%s encode/decode (%s) of %g: bits %04x, value %g", opt_prec_names[p], generic ? "generic" : "half_convert",
                        (double)xs[i], bits[i], back[i]);
            }
        } else
            T_CHECK(cnt.elements == 0, "f32: nothing rounded");
    }
    be->ops = saved;
    OPT_CALL(be, free, dev);
    OPT_CALL(be, free, dh);
    opt_backend_destroy(be);
    /* an f64 backend cannot hold half values for the engine */
    bc.dtype = DP_F64;
    T_OK(opt_backend_create(&be, &bc));
    if (!be) return;
    T_OK(OPT_CALL(be, alloc, &dev, sizeof(double)));
    T_CHECK(opt_prec_round_dev(be, OPT_PREC_BF16, dev, 1, NULL) == DP_ERR_INTERNAL, "bf16 rounding on an f64 backend");
    OPT_CALL(be, free, dev);
    opt_backend_destroy(be);
}

/* One run; *params_out (optional) receives the final master weights (flat). */
static void run(opt_prec p, dp_model_kind kind, opt_strategy strat, opt_sharding sh, int threads, double **params_out,
                int64_t *tot_out, uint64_t seed) {
    dp_model_config mc;
    dp_model_config_default(&mc, kind);
    if (kind == DP_MLP) { mc.in = 7; mc.hidden[0] = 9; mc.hidden[1] = 5; mc.nhidden = 2; mc.classes = 4; }
    else { mc.vocab = 11; mc.dim = 8; mc.layers = 1; mc.heads = 2; mc.ffn = 12; mc.seq = 5; }
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 24; c.q = 0.3; c.steps = 2; c.clip = 0.5; c.sigma = 0.7; c.lr = 0.01;
    c.seed.k = seed; c.key.k = seed ^ 0x5eedULL;
    dp_model m;
    dp_dataset d;
    T_OK(dp_model_init(&m, &mc, c.seed));
    T_OK(dp_dataset_generate(&d, &mc, c.n, c.seed));
    opt_backend_config bc = {.name = "host", .dtype = opt_prec_backend_dtype(p), .threads = threads, .use_mpi = 0};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &bc));
    opt_dp_options o = {.strategy = strat, .sharding = sh, .prec = p};
    opt_dpsgd s;
    memset(&s, 0, sizeof s);
    if (be) T_OK(opt_dpsgd_init(&s, be, &c, &o, &m));
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    double **host = calloc((size_t)m.nparams, sizeof *host), **dev = calloc((size_t)m.nparams, sizeof *dev);
    for (int q = 0; host && dev && q < m.nparams; q++) {
        host[q] = calloc((size_t)m.params[q].numel, sizeof(double));
        dev[q] = calloc((size_t)m.params[q].numel, sizeof(double));
    }
    const char *pn = opt_prec_names[p], *kn = kind == DP_MLP ? "mlp" : "llama";
    for (int64_t k = 1; be && s.be && host && dev && k <= c.steps; k++) {
        T_OK(opt_dpsgd_step(&out, &s, &d, k));
        T_OK(opt_dpsgd_get_params(&s, host));
        if (sh != OPT_SHARD_ZERO3) T_OK(opt_model_get_params(&s.om, dev)); /* the device (half) copies */
        int64_t nonhalf_master = 0, nonhalf_dev = 0, mismatch = 0;
        for (int q = 0; q < m.nparams; q++)
            for (int64_t e = 0; e < m.params[q].numel; e++) {
                nonhalf_master += !is_half(OPT_PREC_BF16, host[q][e]);
                if (sh == OPT_SHARD_ZERO3) continue;
                nonhalf_dev += !is_half(p == OPT_PREC_FP16 ? OPT_PREC_FP16 : OPT_PREC_BF16, dev[q][e]);
                if (opt_prec_is_half(p)) mismatch += dev[q][e] != (double)opt_prec_round_value(p, (float)host[q][e]);
            }
        if (opt_prec_is_half(p)) {
            T_CHECK(nonhalf_master > 0, "%s %s step %lld: every master weight is a bf16 value (master not f32?)", pn, kn,
                    (long long)k);
            T_CHECK(nonhalf_dev == 0 && mismatch == 0, "%s %s step %lld: %lld device parameters not half values, %lld "
                    "differ from the rounded master", pn, kn, (long long)k, (long long)nonhalf_dev, (long long)mismatch);
            if (strat == OPT_STRAT_GRAD_SAMPLE)
                T_CHECK(s.pstats.pe.elements > 0 && s.pstats.grad.elements > 0, "%s %s: per-example gradients (%llu) "
                        "and output gradients (%llu) rounded and counted", pn, kn,
                        (unsigned long long)s.pstats.pe.elements, (unsigned long long)s.pstats.grad.elements);
        } else if (sh != OPT_SHARD_ZERO3)
            T_CHECK(nonhalf_dev > 0, "negative control %s %s: the parameters are not half values", pn, kn);
    }
    if (params_out && host) {
        int64_t tot = 0;
        for (int q = 0; q < m.nparams; q++) tot += m.params[q].numel;
        *params_out = malloc(sizeof(double) * (size_t)(tot + 1));
        *tot_out = tot;
        for (int q = 0, off = 0; *params_out && q < m.nparams; off += (int)m.params[q].numel, q++)
            memcpy(*params_out + off, host[q], sizeof(double) * (size_t)m.params[q].numel);
    }
    for (int q = 0; q < m.nparams; q++) { if (host) free(host[q]); if (dev) free(dev[q]); }
    free(host); free(dev);
    dp_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    if (be) opt_backend_destroy(be);
    dp_model_free(&m);
    dp_dataset_free(&d);
}

static void check_bad_input(void) {
    dp_model_config mc;
    dp_dpsgd_config c;
    dp_model m;
    opt_backend *be;
    if (!opt_test_tiny(&m, &mc, &c, &be, DP_F32)) return;
    opt_dp_options o = {.prec = OPT_PREC_FP16};
    const double vals[] = {65504.0, -65504.0, 65504.5, -70000.0, INFINITY};
    for (int i = 0; i < 5; i++) {
        m.params[1].data[2] = vals[i];
        opt_dpsgd s;
        dp_status st = opt_dpsgd_init(&s, be, &c, &o, &m);
        if (i < 2) { T_CHECK(st == DP_OK, "fp16 weight %g accepted (%s)", vals[i], dp_last_error()); }
        else
            T_CHECK(st == DP_ERR_INVALID && strstr(dp_last_error(), m.params[1].name) && strstr(dp_last_error(), "65504"),
                    "fp16 weight %g at load: status %d (%s)", vals[i], (int)st, dp_last_error());
        if (st == DP_OK) opt_dpsgd_free(&s);
    }
    m.params[1].data[2] = -70000.0; /* control: bf16 holds it */
    o.prec = OPT_PREC_BF16;
    opt_dpsgd s;
    T_OK(opt_dpsgd_init(&s, be, &c, &o, &m));
    opt_dpsgd_free(&s);
    o.prec = OPT_PREC_FP16;
    o.cp = 2;
    T_CHECK(opt_prec_check(be, &o, &m) == DP_ERR_USAGE && strstr(dp_last_error(), "--cp"), "fp16 --cp 2: %s",
            dp_last_error());
    o.cp = 0;
    dp_dataset d;
    T_OK(dp_dataset_generate(&d, &mc, c.n, c.seed));
    T_OK(opt_prec_check_data(&o, &d, "the generated dataset"));
    d.x[5] = 1e5;
    T_CHECK(opt_prec_check_data(&o, &d, "data.safetensors") == DP_ERR_INVALID && strstr(dp_last_error(), "data.safetensors")
            && strstr(dp_last_error(), "example 1"), "fp16 input 1e5: %s", dp_last_error());
    o.prec = OPT_PREC_BF16;
    T_OK(opt_prec_check_data(&o, &d, "data.safetensors"));
    dp_dataset_free(&d);
    opt_backend_destroy(be);
    /* an f64 backend with a half precision */
    opt_backend_config bc = {.name = "host", .dtype = DP_F64, .threads = 1, .use_mpi = 0};
    T_OK(opt_backend_create(&be, &bc));
    if (be) {
        o.prec = OPT_PREC_BF16;
        T_CHECK(opt_prec_check(be, &o, &m) == DP_ERR_INTERNAL, "bf16 on an f64 backend refused");
        opt_backend_destroy(be);
    }
    dp_model_free(&m);
}

int main(void) {
    uint64_t seed = t_seed(23);
    check_values();
    check_bad_input();
    static const opt_strategy strats[] = {OPT_STRAT_GRAD_SAMPLE, OPT_STRAT_FUSED};
    static const opt_sharding shs[] = {OPT_SHARD_REPLICATED, OPT_SHARD_ZERO1, OPT_SHARD_ZERO3};
    for (int pr = OPT_PREC_F32; pr < OPT_PREC_COUNT; pr++)
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++) run((opt_prec)pr, k ? DP_LLAMA : DP_MLP, strats[i], shs[j], 1, NULL, NULL, seed);
    /* same bits at 1 and 3 threads */
    for (int pr = OPT_PREC_BF16; pr < OPT_PREC_COUNT; pr++) {
        double *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        run((opt_prec)pr, DP_LLAMA, OPT_STRAT_GHOST, OPT_SHARD_REPLICATED, 1, &a, &na, seed);
        run((opt_prec)pr, DP_LLAMA, OPT_STRAT_GHOST, OPT_SHARD_REPLICATED, 3, &b, &nb, seed);
        int64_t diff = 0;
        for (int64_t e = 0; a && b && na == nb && e < na; e++) diff += memcmp(&a[e], &b[e], sizeof(double)) != 0;
        T_CHECK(a && b && na == nb && na > 0 && diff == 0, "%s: %lld of %lld parameters differ between 1 and 3 threads",
                opt_prec_names[pr], (long long)diff, (long long)na);
        free(a); free(b);
    }
    return t_finish();
}

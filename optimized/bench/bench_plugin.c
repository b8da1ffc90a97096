/* optimized/bench/bench_plugin.c — the OpenBLAS plugin (optimized/plugins/openblas)
 * against dpcert's own host GEMM, side by side in one run, one thread each (make bench;
 * docs/performance.md "The OpenBLAS plugin"):
 *  1. the backend operation gemm on the GEMM shapes of one llama DP step (as
 *     ci/peers/gemm_vs_openblas.c), f64 and f32: GF/s of each, the time ratio, the
 *     fraction of output elements whose bits differ, and the largest fraction used of the
 *     operation harness's GEMM bound by |C_openblas - C_host| (both sides within the bound
 *     of the exact product, so the difference within twice it: the same tolerance);
 *  2. whole DP-SGD steps of the llama (every strategy) on `host` and on `plugin:openblas`
 *     (its gemm, bk_gemm, clip_accum, ghost and fused norms; the rest inherited): medians
 *     of the step times and their ratio.
 * Every ratio is printed for the medians (t_host_over_openblas) and for the minima
 * (min_ratio: the least disturbed runs, the better estimate on a loaded machine) in the
 * RESULT lines.
 * One iteration: one gemm call (part 1) or one DP-SGD step (part 2), host and OpenBLAS taking
 * turns. Rows (common/bench.h, docs/benchmarks.md): per dtype and shape (fwd, dx, per-ex, bk,
 * gram), then per dtype and strategy: host (the baseline) then openblas (ratio: openblas /
 * host, the inverse of t_host_over_openblas); after each pair its "RESULT bench=plugin-..."
 * line (GF/s, bits that differ, the share of the bound used).
 * Usage: bench_plugin [-w W] [-n N] [--plugin PATH] [--dim D] [--seq T] [--batch B]
 * (default plugin: BUILD/plugins/libdpcert_openblas.so next to BUILD/bench/; exit 77 when
 * it is not built). Reproduce: make bench, or build/bench/optimized_bench_plugin -w 1 -n 7 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bench.h"
#include "optimized/bench/bench_util.h"
#include "optimized/dpsgd.h"

typedef struct { const char *key, *what; int ta, tb; int64_t M, N, K, batch; } shape;

/* rows "DT KEY host" (the baseline) and "DT KEY openblas" of the timed samples th, to; returns
 * the medians; th and to come back sorted (th[0], to[0] the minima) */
static void row_pair(double *mh, double *mo, const char *dt, const char *key, double *th, double *to, int n) {
    char name[64];
    snprintf(name, sizeof name, "%s-%s-host", dt, key);
    *mh = dp_bench_row_of(name, th, n, 0, 1, -1, -1);
    snprintf(name, sizeof name, "%s-%s-openblas", dt, key);
    *mo = dp_bench_row_of(name, to, n, *mh, 0, -1, -1);
}

/* one shape on both backends: times (interleaved), bits, bound */
static int gemm_shape(opt_backend *hb, opt_backend *ob, const shape *h, const dp_bench_opts *bo, int *faster) {
    const int reps = bo->iters;
    const int f64 = hb->dtype == DP_F64;
    const size_t es = f64 ? 8 : 4;
    const int64_t na = h->M * h->K, nb = h->K * h->N, nc = h->M * h->N;
    double *A = malloc(sizeof(double) * (size_t)(na * h->batch)), *B = malloc(sizeof(double) * (size_t)(nb * h->batch));
    double *c1 = malloc(sizeof(double) * (size_t)(nc * h->batch)), *c2 = malloc(sizeof(double) * (size_t)(nc * h->batch));
    void *dA[2] = {0}, *dB[2] = {0}, *dC[2] = {0};
    opt_backend *be[2] = {hb, ob};
    double *t[2] = {malloc(sizeof(double) * (size_t)reps), malloc(sizeof(double) * (size_t)reps)};
    dp_status st = A && B && c1 && c2 && t[0] && t[1] ? DP_OK : DP_ERR_NOMEM;
    srand(1);
    for (int64_t i = 0; st == DP_OK && i < na * h->batch; i++) A[i] = f64 ? 2.0 * rand() / RAND_MAX - 1 : (float)(2.0 * rand() / RAND_MAX - 1);
    for (int64_t i = 0; st == DP_OK && i < nb * h->batch; i++) B[i] = f64 ? 2.0 * rand() / RAND_MAX - 1 : (float)(2.0 * rand() / RAND_MAX - 1);
    for (int k = 0; k < 2 && st == DP_OK; k++) {
        st = be[k]->ops.alloc(be[k]->ctx, &dA[k], es * (size_t)(na * h->batch));
        if (st == DP_OK) st = be[k]->ops.alloc(be[k]->ctx, &dB[k], es * (size_t)(nb * h->batch));
        if (st == DP_OK) st = be[k]->ops.alloc(be[k]->ctx, &dC[k], es * (size_t)(nc * h->batch));
        if (st == DP_OK) st = be[k]->ops.upload_f64(be[k]->ctx, dA[k], A, na * h->batch);
        if (st == DP_OK) st = be[k]->ops.upload_f64(be[k]->ctx, dB[k], B, nb * h->batch);
    }
    for (int r = -bo->warmup; r < reps && st == DP_OK; r++)
        for (int k = 0; k < 2 && st == DP_OK; k++) {
            double t0 = dp_bench_now();
            st = be[k]->ops.gemm(be[k]->ctx, dC[k], dA[k], dB[k], h->ta, h->tb, h->M, h->N, h->K, 1.0, 0.0, h->batch, na, nb, nc);
            if (r >= 0) t[k][r] = dp_bench_now() - t0;
        }
    if (st == DP_OK) st = hb->ops.download_f64(hb->ctx, c1, dC[0], nc * h->batch);
    if (st == DP_OK) st = ob->ops.download_f64(ob->ctx, c2, dC[1], nc * h->batch);
    double used = 0;
    int64_t differ = 0;
    const double u = (f64 ? ldexp(1.0, -53) : ldexp(1.0, -24)) + ldexp(1.0, -53), g = h->K * u / (1 - h->K * u);
    for (int64_t b = 0; st == DP_OK && b < h->batch; b++)
        for (int64_t i = 0; i < h->M; i++)
            for (int64_t j = 0; j < h->N; j++) {
                double m = 0;
                for (int64_t k = 0; k < h->K; k++) {
                    double a = h->ta ? A[b * na + k * h->M + i] : A[b * na + i * h->K + k];
                    double bb = h->tb ? B[b * nb + j * h->K + k] : B[b * nb + k * h->N + j];
                    m += fabs(a * bb);
                }
                int64_t o = b * nc + i * h->N + j;
                differ += c1[o] != c2[o];
                double bound = 2 * g * m; /* each side within gamma_K sum |a b| of the exact value */
                if (bound > 0 && fabs(c1[o] - c2[o]) / bound > used) used = fabs(c1[o] - c2[o]) / bound;
            }
    int rc = 0;
    if (st != DP_OK) { fprintf(stderr, "bench_plugin: %s: %s\n", h->what, dp_last_error()); rc = 3; }
    else {
        double th, to, fl = 2.0 * (double)(h->M * h->N * h->K * h->batch);
        /* (the rows sort: t[k][0] is then the minimum, the least disturbed run on a shared machine) */
        row_pair(&th, &to, f64 ? "f64" : "f32", h->key, t[0], t[1], reps);
        printf("RESULT bench=plugin-gemm shape=\"%s\" dtype=%s M=%lld N=%lld K=%lld batch=%lld host_gflops=%.2f "
               "openblas_gflops=%.2f t_host_over_openblas=%.2f min_ratio=%.2f bits_differ=%.1f%% bound_used=%.2f%%\n",
               h->what, f64 ? "f64" : "f32", (long long)h->M, (long long)h->N, (long long)h->K, (long long)h->batch,
               fl / th * 1e-9, fl / to * 1e-9, th / to, t[0][0] / t[1][0],
               100.0 * (double)differ / (double)(nc * h->batch), 100 * used);
        *faster += th > to;
    }
    for (int k = 0; k < 2; k++) {
        if (dA[k]) be[k]->ops.free(be[k]->ctx, dA[k]);
        if (dB[k]) be[k]->ops.free(be[k]->ctx, dB[k]);
        if (dC[k]) be[k]->ops.free(be[k]->ctx, dC[k]);
        free(t[k]);
    }
    free(A); free(B); free(c1); free(c2);
    return rc;
}

/* the seconds t[0..n) of n DP-SGD steps of one strategy on be, after w warm-up steps */
static dp_status step_times(double *t, opt_backend *be, const dp_dpsgd_config *c, opt_strategy k, const dp_model *m,
                            const dp_dataset *d, const dp_bench_opts *bo) {
    opt_dp_options o = {.strategy = k, .mixed_rule = OPT_MIXED_FLOP, .noise_mode = OPT_NOISE_SINGLE, .bug = OPT_BUG_NONE};
    opt_dpsgd s;
    DP_TRY(opt_dpsgd_init(&s, be, c, &o, m));
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    dp_status st = DP_OK;
    for (int r = 0; r < bo->warmup + bo->iters && st == DP_OK; r++) {
        double t0 = dp_bench_now();
        st = opt_dpsgd_step(&out, &s, d, r + 1);
        if (r >= bo->warmup) t[r - bo->warmup] = dp_bench_now() - t0;
    }
    dp_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    return st;
}

int main(int argc, char **argv) {
    char def[PATH_MAX + 64] = "";
    ssize_t n = readlink("/proc/self/exe", def, PATH_MAX);
    if (n > 0) {
        def[n] = '\0';
        char *sl = strrchr(def, '/');
        if (sl) snprintf(sl, sizeof def - (size_t)(sl - def), "/../plugins/libdpcert_openblas.so");
    }
    const char *plugin = def, *dim = "128", *seq = "128", *batch = "16";
    const dp_bench_flag flags[] = {{"--plugin", &plugin, NULL}, {"--dim", &dim, NULL}, {"--seq", &seq, NULL},
                                   {"--batch", &batch, NULL}};
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse_flags(&bo, &help, argc, argv, 1, 7, "[--plugin PATH] [--dim D] [--seq T] [--batch B]", flags, 4) !=
        DP_OK) {
        fprintf(stderr, "bench_plugin: %s\n", dp_last_error());
        return 2;
    }
    if (help) return 0;
    int64_t D = atoll(dim), T = atoll(seq), B = atoll(batch);
    if (D < 1 || T < 1 || B < 1 || bo.threads > 1) {
        fprintf(stderr, "bench_plugin: bad --dim/--seq/--batch (or -t: one thread each)\n");
        return 2;
    }
    if (access(plugin, R_OK) != 0) {
        printf("SKIP: no OpenBLAS plugin at %s (needs libopenblas-dev at build time)\n", plugin);
        return 77;
    }
    char name[PATH_MAX + 16];
    snprintf(name, sizeof name, "plugin:%s", plugin);
    char what[PATH_MAX + 160];
    snprintf(what, sizeof what, "one gemm call or one DP-SGD step, the OpenBLAS plugin (%s) against the host, taking turns",
             plugin);
    dp_bench_header("bench_plugin", what, "host|plugin:openblas", "f64|f32", 1, 1, &bo);
    int rc = 0, faster = 0, nshapes = 0;
    const shape sh[] = {
        {"fwd", "forward y = x W^T (rows B*T)", 0, 1, B * T, D, D, 1},
        {"dx", "input grad dx = dy W", 0, 0, B * T, D, D, 1},
        {"per-ex", "per-example g_b = G_b^T A_b", 1, 0, D, D, T, B},
        {"bk", "book-keeping dW = G^T diag(c) A", 1, 0, D, D, B * T, 1},
        {"gram", "ghost Gram A_b A_b^T", 0, 1, T, T, D, B},
    };
    for (int dt = 0; dt < 2 && rc == 0; dt++) {
        opt_backend_config hc = {"host", dt ? DP_F32 : DP_F64, 1, 0}, oc = {name, dt ? DP_F32 : DP_F64, 1, 0};
        opt_backend *hb = NULL, *ob = NULL;
        if (opt_backend_create(&hb, &hc) != DP_OK || opt_backend_create(&ob, &oc) != DP_OK) {
            fprintf(stderr, "bench_plugin: %s\n", dp_last_error());
            opt_backend_destroy(hb);
            return 3;
        }
        for (size_t s = 0; s < sizeof sh / sizeof sh[0] && rc == 0; s++, nshapes++) rc = gemm_shape(hb, ob, &sh[s], &bo, &faster);
        opt_backend_destroy(hb);
        opt_backend_destroy(ob);
    }
    if (rc) return rc;
    printf("# gemm: OpenBLAS faster on %d of %d shapes (t_host_over_openblas > 1), every difference within the shared bound "
           "(bound_used <= 100%%)\n", faster, nshapes);

    /* whole steps: a small llama, the whole dataset each step */
    dp_model_config mc;
    dp_model_config_default(&mc, DP_LLAMA);
    mc.dim = (int)(D < 64 ? D : 64);
    mc.layers = 2; mc.seq = (int)(T < 32 ? T : 32); mc.heads = 4; mc.vocab = 64; mc.ffn = 2 * mc.dim;
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = B; c.q = 1.0; c.clip = 1.0; c.sigma = 1.0; c.key.k = 1; c.seed.k = 2;
    dp_model m;
    dp_dataset d;
    const int mrc = opt_bench_model_data(&m, &d, &mc, &c, "bench_plugin");
    if (mrc != 0) return mrc;
    for (int dt = 0; dt < 2 && rc == 0; dt++) {
        opt_backend_config hc = {"host", dt ? DP_F32 : DP_F64, 1, 0}, oc = {name, dt ? DP_F32 : DP_F64, 1, 0};
        opt_backend *hb = NULL, *ob = NULL;
        if (opt_backend_create(&hb, &hc) != DP_OK || opt_backend_create(&ob, &oc) != DP_OK) { rc = 3; opt_backend_destroy(hb); break; }
        static double tt[2][1000];
        if (bo.iters > 1000) { rc = 2; fprintf(stderr, "bench_plugin: -n at most 1000\n"); }
        for (int k = 0; k < OPT_STRAT_COUNT && rc == 0; k++) {
            double th = 0, to = 0;
            if (step_times(tt[0], hb, &c, (opt_strategy)k, &m, &d, &bo) != DP_OK ||
                step_times(tt[1], ob, &c, (opt_strategy)k, &m, &d, &bo) != DP_OK) {
                fprintf(stderr, "bench_plugin: step %s: %s\n", opt_strategy_names[k], dp_last_error());
                rc = 3;
                break;
            }
            char key[64];
            snprintf(key, sizeof key, "step-%s", opt_strategy_names[k]);
            row_pair(&th, &to, dt ? "f32" : "f64", key, tt[0], tt[1], bo.iters);
            const double mh = tt[0][0], mo = tt[1][0];
            printf("RESULT bench=plugin-step strategy=%s dtype=%s D=%d L=%d T=%d B=%lld host_s=%.5f openblas_s=%.5f "
                   "t_host_over_openblas=%.2f min_ratio=%.2f\n", opt_strategy_names[k], dt ? "f32" : "f64", mc.dim,
                   mc.layers, mc.seq, (long long)B, th, to, th / to, mh / mo);
        }
        opt_backend_destroy(hb);
        opt_backend_destroy(ob);
    }
    dp_bench_reproduce(argv[0], &bo);
    dp_dataset_free(&d);
    dp_model_free(&m);
    return rc;
}

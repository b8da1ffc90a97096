/* optimized/tests/test_cuda_gpu_kernels.c — GEMMs and model kernels of the CUDA
 * backend against double-precision CPU references written here (textbook loops),
 * with tolerances derived in docs/cuda.md ("Tolerances on the GPU"): every bound is
 * gamma_m * (sum of absolute values of the terms) for the longest f32 sum m in the
 * computation, plus a few unit roundoffs per elementary operation. Also checks
 * determinism (same inputs, same device: identical bytes) and that bad indices are
 * reported as DP_ERR_INVALID. Exits 77 without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_testutil.h"

static uint64_t seed;
#define U CU_U32

static void test_gemm(cu_ctx *ctx) {
    const int M = 67, N = 45, K = 129, batch = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
            float *A = malloc(na * batch * 4), *B = malloc(nb * batch * 4), *C = malloc(nc * batch * 4), *C2 = malloc(nc * batch * 4);
            cu_test_fill(A, na * batch, seed, 1, 1.0);
            cu_test_fill(B, nb * batch, seed, 2, 1.0);
            void *dA = cu_test_up(ctx, A, na * batch * 4), *dB = cu_test_up(ctx, B, nb * batch * 4), *dC = NULL;
            T_OK(cu_malloc(&dC, nc * batch * 4));
            for (int rep = 0; rep < 2; rep++) {
                T_OK(cu_gemm_f32_batched(ctx, dC, dA, dB, ta, tb, 1.0f, 0.0f, M, N, K, (int64_t)na, (int64_t)nb, (int64_t)nc, batch));
                T_OK(cu_d2h(ctx, rep ? C2 : C, dC, nc * batch * 4));
            }
            T_CHECK(memcmp(C, C2, nc * batch * 4) == 0, "gemm run to run identical (ta=%d tb=%d)", ta, tb);
            int bad = cu_test_gemm_bad(C, A, B, ta, tb, M, N, K, batch, cu_gamma(K, U));
            T_CHECK(bad == 0, "gemm f32 ta=%d tb=%d: %d elements beyond gamma_K bound", ta, tb, bad);
            cu_free(dA); cu_free(dB); cu_free(dC);
            free(A); free(B); free(C); free(C2);
        }
}

static void test_rmsnorm(cu_ctx *ctx) {
    const int N = 37, D = 96;
    const float eps = 1e-5f;
    float *x = malloc(N * D * 4), *w = malloc(D * 4), *dy = malloc(N * D * 4), *y = malloc(N * D * 4), *dx = malloc(N * D * 4),
          *dw = malloc(N * D * 4), *rs = malloc(N * 4);
    cu_test_fill(x, N * D, seed, 3, 2.0);
    cu_test_fill(w, D, seed, 4, 1.5);
    cu_test_fill(dy, N * D, seed, 5, 1.0);
    float *dx_ = cu_test_up(ctx, x, N * D * 4), *dw_ = cu_test_up(ctx, w, D * 4), *ddy = cu_test_up(ctx, dy, N * D * 4);
    float *dyo = NULL, *drs = NULL, *ddx = NULL, *ddw = NULL;
    T_OK(cu_malloc((void **)&dyo, N * D * 4)); T_OK(cu_malloc((void **)&drs, N * 4));
    T_OK(cu_malloc((void **)&ddx, N * D * 4)); T_OK(cu_malloc((void **)&ddw, N * D * 4));
    T_OK(cu_rmsnorm_fwd(ctx, dyo, drs, dx_, dw_, eps, N, D));
    T_OK(cu_rmsnorm_bwd(ctx, ddx, ddw, ddy, dx_, dw_, drs, N, D));
    T_OK(cu_d2h(ctx, y, dyo, N * D * 4)); T_OK(cu_d2h(ctx, dx, ddx, N * D * 4));
    T_OK(cu_d2h(ctx, dw, ddw, N * D * 4)); T_OK(cu_d2h(ctx, rs, drs, N * 4));
    int bad = 0;
    double gD = cu_gamma(D + 8, U);
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int d = 0; d < D; d++) ss += (double)x[n * D + d] * x[n * D + d];
        double r = 1.0 / sqrt(ss / D + eps), s = 0, sabs = 0;
        if (!(fabs(rs[n] - r) <= gD * r)) bad++;
        for (int d = 0; d < D; d++) {
            double yr = x[n * D + d] * r * w[d];
            if (!(fabs(y[n * D + d] - yr) <= gD * fabs(yr))) bad++;
            s += (double)w[d] * dy[n * D + d] * x[n * D + d];
            sabs += fabs((double)w[d] * dy[n * D + d] * x[n * D + d]);
        }
        for (int d = 0; d < D; d++) {
            double a = r * w[d] * dy[n * D + d], c = x[n * D + d] * r * r * r * s / D;
            double tol = cu_gamma(D + 16, U) * (fabs(a) + 3 * fabs(x[n * D + d]) * r * r * r * sabs / D);
            if (!(fabs(dx[n * D + d] - (a - c)) <= tol)) bad++;
            /* per-row gain gradient dy x rstd: two roundings after rstd's own error */
            double g = (double)dy[n * D + d] * x[n * D + d] * r;
            if (!(fabs(dw[n * D + d] - g) <= (gD + 2 * U) * fabs(g))) bad++;
        }
    }
    T_CHECK(bad == 0, "rmsnorm fwd/bwd: %d values beyond the derived bound", bad);
    cu_free(dx_); cu_free(dw_); cu_free(ddy); cu_free(dyo); cu_free(drs); cu_free(ddx); cu_free(ddw);
    free(x); free(w); free(dy); free(y); free(dx); free(dw); free(rs);
}

static void test_rope_swiglu_xent(cu_ctx *ctx) {
    /* rope: pair (2j, 2j+1) of head h at position t rotated by t * theta^(-2j/hd) */
    const int B = 2, T = 9, H = 3, hd = 8;
    const int n = B * T * H * hd;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    cu_test_fill(x, n, seed, 6, 1.0);
    float *dx = cu_test_up(ctx, x, n * 4);
    T_OK(cu_rope(ctx, dx, 10000.0f, 0, B, T, H, hd));
    T_OK(cu_d2h(ctx, y, dx, n * 4));
    int bad = 0;
    for (int i = 0; i < n / 2; i++) {
        int j = i % (hd / 2), t = (i / (hd / 2) / H) % T;
        double ang = t * pow(10000.0, -2.0 * j / hd), a = x[2 * i], b = x[2 * i + 1];
        double y0 = a * cos(ang) - b * sin(ang), y1 = a * sin(ang) + b * cos(ang);
        double tol = 2 * U * (fabs(a) + fabs(b));
        if (!(fabs(y[2 * i] - y0) <= tol && fabs(y[2 * i + 1] - y1) <= tol)) bad++;
    }
    T_CHECK(bad == 0, "rope: %d pairs beyond 2u(|a|+|b|)", bad);
    cu_free(dx);
    free(x); free(y);

    /* swiglu */
    const int m = 1000;
    float *a = malloc(m * 4), *b = malloc(m * 4), *g = malloc(m * 4), *h = malloc(m * 4), *da = malloc(m * 4), *db = malloc(m * 4);
    cu_test_fill(a, m, seed, 7, 8.0);
    cu_test_fill(b, m, seed, 8, 2.0);
    cu_test_fill(g, m, seed, 9, 1.0);
    float *d_a = cu_test_up(ctx, a, m * 4), *d_b = cu_test_up(ctx, b, m * 4), *d_g = cu_test_up(ctx, g, m * 4);
    float *d_h = NULL, *d_da = NULL, *d_db = NULL;
    T_OK(cu_malloc((void **)&d_h, m * 4)); T_OK(cu_malloc((void **)&d_da, m * 4)); T_OK(cu_malloc((void **)&d_db, m * 4));
    T_OK(cu_swiglu_fwd(ctx, d_h, d_a, d_b, m));
    T_OK(cu_swiglu_bwd(ctx, d_da, d_db, d_g, d_a, d_b, m));
    T_OK(cu_d2h(ctx, h, d_h, m * 4)); T_OK(cu_d2h(ctx, da, d_da, m * 4)); T_OK(cu_d2h(ctx, db, d_db, m * 4));
    bad = 0;
    for (int i = 0; i < m; i++) {
        double s = 1.0 / (1.0 + exp(-(double)a[i])), silu = a[i] * s;
        double hr = silu * b[i], dbr = g[i] * silu, dar = g[i] * b[i] * s * (1 + a[i] * (1 - s));
        double tda = 16 * U * (fabs(dar) + fabs((double)g[i] * b[i]) * s * (1 + fabs(a[i])));
        if (!(fabs(h[i] - hr) <= 16 * U * fabs(hr) && fabs(db[i] - dbr) <= 16 * U * fabs(dbr) && fabs(da[i] - dar) <= tda)) bad++;
    }
    T_CHECK(bad == 0, "swiglu: %d elements beyond 16u bounds", bad);
    cu_free(d_a); cu_free(d_b); cu_free(d_g); cu_free(d_h); cu_free(d_da); cu_free(d_db);
    free(a); free(b); free(g); free(h); free(da); free(db);

    /* cross-entropy */
    const int N = 13, V = 300;
    float *z = malloc(N * V * 4), *loss = malloc(N * 4), *dl = malloc(N * 4), *dz = malloc(N * V * 4);
    int32_t tg[13];
    cu_test_fill(z, N * V, seed, 10, 6.0);
    cu_test_fill(dl, N, seed, 11, 1.0);
    for (int r = 0; r < N; r++) tg[r] = (r * 37) % V;
    float *d_z = cu_test_up(ctx, z, N * V * 4), *d_dl = cu_test_up(ctx, dl, N * 4);
    int32_t *d_t = cu_test_up(ctx, tg, sizeof tg);
    float *d_loss = NULL, *d_dz = NULL;
    T_OK(cu_malloc((void **)&d_loss, N * 4)); T_OK(cu_malloc((void **)&d_dz, N * V * 4));
    T_OK(cu_xent_fwd(ctx, d_loss, d_z, d_t, d_dl, N, V));
    T_OK(cu_xent_bwd(ctx, d_dz, d_z, d_t, d_dl, N, V));
    T_OK(cu_d2h(ctx, loss, d_loss, N * 4)); T_OK(cu_d2h(ctx, dz, d_dz, N * V * 4));
    bad = 0;
    for (int r = 0; r < N; r++) {
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, z[r * V + v]);
        for (int v = 0; v < V; v++) s += exp(z[r * V + v] - mx);
        double lr = dl[r] * (log(s) + mx - z[r * V + tg[r]]); /* weighted by w[r] = dl[r] */
        double tol = (cu_gamma(V + 4, U) + 4 * U * (fabs(log(s)) + fabs(mx) + fabs(z[r * V + tg[r]]))) * fabs(dl[r]);
        if (!(fabs(loss[r] - lr) <= tol)) bad++;
        for (int v = 0; v < V; v++) {
            double p = exp(z[r * V + v] - mx) / s, dr = (p - (v == tg[r])) * dl[r];
            if (!(fabs(dz[r * V + v] - dr) <= (cu_gamma(V + 8, U) * p + 4 * U * fabs(p - (v == tg[r]))) * fabs(dl[r]))) bad++;
        }
    }
    T_CHECK(bad == 0, "xent: %d values beyond the derived bound", bad);
    /* a target outside [0, V) is an invalid-input error naming the row */
    tg[5] = V;
    T_OK(cu_h2d(ctx, d_t, tg, sizeof tg));
    T_CHECK(cu_xent_fwd(ctx, d_loss, d_z, d_t, d_dl, N, V) == DP_ERR_INVALID, "bad target: %s", dp_last_error());
    cu_free(d_z); cu_free(d_dl); cu_free(d_t); cu_free(d_loss); cu_free(d_dz);
    free(z); free(loss); free(dl); free(dz);
}

static void test_attention_embedding(cu_ctx *ctx) {
    const int B = 2, T = 19, H = 2, hd = 16;
    const int n = B * T * H * hd;
    float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *o = malloc(n * 4), *o2 = malloc(n * 4);
    cu_test_fill(q, n, seed, 12, 1.0);
    cu_test_fill(k, n, seed, 13, 1.0);
    cu_test_fill(v, n, seed, 14, 1.0);
    float *dq = cu_test_up(ctx, q, n * 4), *dk = cu_test_up(ctx, k, n * 4), *dv = cu_test_up(ctx, v, n * 4);
    float *dout = NULL, *datt = NULL;
    T_OK(cu_malloc((void **)&dout, n * 4)); T_OK(cu_malloc((void **)&datt, (size_t)B * H * T * T * 4));
    T_OK(cu_attention_fwd(ctx, dout, datt, dq, dk, dv, B, T, H, hd));
    T_OK(cu_d2h(ctx, o, dout, n * 4));
    T_OK(cu_attention_fwd(ctx, dout, datt, dq, dk, dv, B, T, H, hd));
    T_OK(cu_d2h(ctx, o2, dout, n * 4));
    T_CHECK(memcmp(o, o2, n * 4) == 0, "attention run to run identical");
    int bad = 0;
    double sc = 1.0 / sqrt((double)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double sco[64], mx = -INFINITY, sum = 0, qk = 0;
                for (int s = 0; s <= t; s++) {
                    double d = 0, da = 0;
                    for (int e = 0; e < hd; e++) {
                        double p = (double)q[((b * T + t) * H + h) * hd + e] * k[((b * T + s) * H + h) * hd + e];
                        d += p;
                        da += fabs(p);
                    }
                    sco[s] = d * sc;
                    qk = fmax(qk, da * sc);
                    mx = fmax(mx, sco[s]);
                }
                for (int s = 0; s <= t; s++) sum += exp(sco[s] - mx);
                /* probability relative error <= 2 * (score abs error) + gamma_{T+4} (docs/cuda.md) */
                double prel = 2 * cu_gamma(hd + 1, U) * qk + cu_gamma(T + 4, U);
                for (int e = 0; e < hd; e++) {
                    double r = 0, ra = 0;
                    for (int s = 0; s <= t; s++) {
                        double p = exp(sco[s] - mx) / sum;
                        r += p * v[((b * T + s) * H + h) * hd + e];
                        ra += p * fabs(v[((b * T + s) * H + h) * hd + e]);
                    }
                    if (!(fabs(o[((b * T + t) * H + h) * hd + e] - r) <= (prel + cu_gamma(T, U)) * ra)) bad++;
                }
            }
    T_CHECK(bad == 0, "attention fwd: %d outputs beyond the derived bound", bad);
    cu_free(dq); cu_free(dk); cu_free(dv); cu_free(dout); cu_free(datt);
    free(q); free(k); free(v); free(o); free(o2);

    /* embedding: forward is a copy (exact); backward sums rows in increasing n (exact
     * match with the same f32 additions in the same order on the host) */
    const int N = 50, V = 11, D = 24;
    float *tab = malloc(V * D * 4), *dy = malloc(N * D * 4), *out = malloc(N * D * 4), *dt = malloc(V * D * 4), *ref = malloc(V * D * 4);
    int32_t tok[50];
    cu_test_fill(tab, V * D, seed, 15, 1.0);
    cu_test_fill(dy, N * D, seed, 16, 1.0);
    for (int i = 0; i < N; i++) tok[i] = (i * 7 + 3) % V;
    float *d_tab = cu_test_up(ctx, tab, V * D * 4), *d_dy = cu_test_up(ctx, dy, N * D * 4), *d_out = NULL;
    int32_t *d_tok = cu_test_up(ctx, tok, sizeof tok);
    T_OK(cu_malloc((void **)&d_out, N * D * 4));
    T_OK(cu_embedding_fwd(ctx, d_out, d_tok, d_tab, N, V, D));
    T_OK(cu_d2h(ctx, out, d_out, N * D * 4));
    bad = 0;
    for (int i = 0; i < N; i++) bad += memcmp(out + i * D, tab + tok[i] * D, D * 4) != 0;
    T_CHECK(bad == 0, "embedding fwd: %d rows differ", bad);
    memcpy(ref, tab, V * D * 4);
    for (int i = 0; i < N; i++)
        for (int d = 0; d < D; d++) ref[tok[i] * D + d] += dy[i * D + d];
    T_OK(cu_embedding_bwd(ctx, d_tab, d_dy, d_tok, N, N, V, D)); /* per = N: one table */
    T_OK(cu_d2h(ctx, dt, d_tab, V * D * 4));
    T_CHECK(memcmp(dt, ref, V * D * 4) == 0, "embedding bwd: bit-identical to the in-order f32 sum");
    tok[7] = -1;
    T_OK(cu_h2d(ctx, d_tok, tok, sizeof tok));
    T_CHECK(cu_embedding_fwd(ctx, d_out, d_tok, d_tab, N, V, D) == DP_ERR_INVALID, "bad token fwd: %s", dp_last_error());
    T_CHECK(cu_embedding_bwd(ctx, d_tab, d_dy, d_tok, N, N, V, D) == DP_ERR_INVALID, "bad token bwd: %s", dp_last_error());
    cu_free(d_tab); cu_free(d_dy); cu_free(d_out); cu_free(d_tok);
    free(tab); free(dy); free(out); free(dt); free(ref);
}

int main(void) {
    seed = t_seed(7001);
    cu_ctx *ctx = cu_test_ctx();
    if (!ctx) return t_skip("no CUDA device (GPU test)");
    test_gemm(ctx);
    test_rmsnorm(ctx);
    test_rope_swiglu_xent(ctx);
    test_attention_embedding(ctx);
    cu_ctx_destroy(ctx);
    return t_finish();
}

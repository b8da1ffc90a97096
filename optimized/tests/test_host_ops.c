/* optimized/tests/test_host_ops.c — the host backend's operations against naive loops
 * written here, in f64 and f32, plus determinism across thread counts, backward ops
 * against central finite differences, the DP ops against their definitions, the
 * support query, and one-rank collectives.
 *
 * Tolerances (docs/engine.md "Test tolerances"):
 *   - same summation order as the naive loop (GEMM in f64, noise): exact;
 *   - a sum of K products in precision u: |err| <= gamma_K * sum |terms| (Higham 3.5),
 *     gamma_K = K u / (1 - K u), computed per element from the naive loop;
 *   - central differences with step h: |err| <= h^2/6 M3 + 2 u |f| / h + gamma_n |f|,
 *     M3 = 100 bounding the third derivative of the tested losses on inputs in [-1, 1]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "common/test.h"
#include "optimized/backend.h"
#include "optimized/tests/opt_test_buf.h"

/* T_CLOSE with a formatted message */
#define CLOSEF(a, b, tol, fmt, ...)                                                                  \
    do {                                                                                             \
        double a_ = (a), b_ = (b), t_ = (tol);                                                       \
        T_CHECK(fabs(a_ - b_) <= t_ || a_ == b_, fmt ": %.17g vs %.17g (tol %.3g)", __VA_ARGS__, a_, b_, t_); \
    } while (0)

static uint64_t g_seed;
static double urand(uint64_t i) { /* uniform in (-1, 1), reproducible */
    return 2.0 * dp_stream_uniform(g_seed, DP_PURPOSE_TEST, 7, 0, i) - 1.0;
}
static double *rvec(int64_t n, uint64_t off) {
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) v[i] = urand(off + (uint64_t)i);
    return v;
}
static double gam(double K, double u) { return K * u / (1 - K * u); }

static void test_gemm(opt_backend *be, double u, int exact) {
    const int64_t M = 5, N = 7, K = 3, batch = 2;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            double *A = rvec(batch * M * K, 100), *B = rvec(batch * K * N, 200), *C = rvec(batch * M * N, 300);
            void *dA = up(be, A, batch * M * K), *dB = up(be, B, batch * K * N), *dC = up(be, C, batch * M * N);
            T_OK(be->ops.gemm(be->ctx, dC, dA, dB, ta, tb, M, N, K, 0.5, 2.0, batch, M * K, K * N, M * N));
            double *r = down(be, dC, batch * M * N);
            for (int64_t b = 0; b < batch; b++)
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) {
                        double s = 0, sa = 0;
                        for (int64_t k = 0; k < K; k++) {
                            double a = ta ? A[b * M * K + k * M + i] : A[b * M * K + i * K + k];
                            double bb = tb ? B[b * K * N + j * K + k] : B[b * K * N + k * N + j];
                            s += a * bb;
                            sa += fabs(a * bb);
                        }
                        double want = 0.5 * s + 2.0 * C[b * M * N + i * N + j];
                        double tol = exact ? 0 : gam(K + 2, u) * (0.5 * sa + 2.0 * fabs(C[b * M * N + i * N + j]));
                        CLOSEF(r[b * M * N + i * N + j], want, tol, "gemm ta=%d tb=%d", ta, tb);
                    }
            free(A); free(B); free(C); free(r);
            be->ops.free(be->ctx, dA); be->ops.free(be->ctx, dB); be->ops.free(be->ctx, dC);
        }
}

/* Threads never change a bit: GEMM, attention, ghost norm, book-keeping. */
static void test_threads(dp_dtype dt) {
    opt_backend *b1 = NULL, *b3 = NULL;
    opt_backend_config c1 = {"host", dt, 1, 0}, c3 = {"host", dt, 3, 0};
    T_OK(opt_backend_create(&b1, &c1));
    T_OK(opt_backend_create(&b3, &c3));
    const int64_t M = 67, N = 45, K = 71, batch = 2;
    double *A = rvec(batch * M * K, 1), *B = rvec(batch * K * N, 2);
    opt_backend *bs[2] = {b1, b3};
    double *res[2], *att[2], *gh[2], *bk[2];
    const int64_t Bx = 6, T = 24, H = 2, hd = 8, d = 16, p = 20;
    double *q = rvec(Bx * T * H * hd, 10), *k = rvec(Bx * T * H * hd, 11), *v = rvec(Bx * T * H * hd, 12);
    double *Aa = rvec(Bx * T * d, 13), *Gg = rvec(Bx * T * p, 14), *c = rvec(Bx, 15);
    for (int i = 0; i < 2; i++) {
        opt_backend *be = bs[i];
        void *dA = up(be, A, batch * M * K), *dB = up(be, B, batch * K * N), *dC = up(be, NULL, batch * M * N);
        T_OK(be->ops.gemm(be->ctx, dC, dA, dB, 1, 0, M, N, K, 1.0, 0.0, batch, M * K, K * N, M * N));
        res[i] = down(be, dC, batch * M * N);
        void *dq = up(be, q, Bx * T * H * hd), *dk = up(be, k, Bx * T * H * hd), *dv = up(be, v, Bx * T * H * hd);
        void *dout = up(be, NULL, Bx * T * H * hd), *dp = up(be, NULL, Bx * H * T * T);
        T_OK(be->ops.attn_fwd(be->ctx, dout, dp, dq, dk, dv, Bx, T, H, hd));
        att[i] = down(be, dout, Bx * T * H * hd);
        void *da = up(be, Aa, Bx * T * d), *dg = up(be, Gg, Bx * T * p), *dsq = up(be, NULL, Bx), *dc = up(be, c, Bx);
        void *dW = up(be, NULL, p * d);
        T_OK(be->ops.ghost_sqnorm(be->ctx, dsq, da, dg, Bx, T, d, p));
        T_OK(be->ops.bk_gemm(be->ctx, dW, da, dg, dc, Bx, T, d, p));
        gh[i] = down(be, dsq, Bx);
        bk[i] = down(be, dW, p * d);
        void *bufs[] = {dA, dB, dC, dq, dk, dv, dout, dp, da, dg, dsq, dc, dW};
        for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++) be->ops.free(be->ctx, bufs[j]);
    }
    T_CHECK(memcmp(res[0], res[1], sizeof(double) * (size_t)(batch * M * N)) == 0, "gemm differs with 3 threads");
    T_CHECK(memcmp(att[0], att[1], sizeof(double) * (size_t)(Bx * T * H * hd)) == 0, "attention differs with 3 threads");
    T_CHECK(memcmp(gh[0], gh[1], sizeof(double) * (size_t)Bx) == 0, "ghost norm differs with 3 threads");
    T_CHECK(memcmp(bk[0], bk[1], sizeof(double) * (size_t)(p * d)) == 0, "bk gemm differs with 3 threads");
    for (int i = 0; i < 2; i++) { free(res[i]); free(att[i]); free(gh[i]); free(bk[i]); }
    free(A); free(B); free(q); free(k); free(v); free(Aa); free(Gg); free(c);
    opt_backend_destroy(b1); opt_backend_destroy(b3);
}

/* DP ops against their definitions (f64). */
static void test_dp_ops(opt_backend *be) {
    const double u = ldexp(1.0, -53);
    const int64_t B = 3, T = 4, d = 5, p = 6;
    double *A = rvec(B * T * d, 20), *G = rvec(B * T * p, 21), *c = rvec(B, 22);
    /* instantiated g_b = G_b^T A_b [p, d] and its norm, by naive loops */
    double g[3][6 * 5], sq[3] = {0, 0, 0}, sqabs[3] = {0, 0, 0};
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < p; i++)
            for (int64_t e = 0; e < d; e++) {
                double s = 0;
                for (int64_t t = 0; t < T; t++) s += G[(b * T + t) * p + i] * A[(b * T + t) * d + e];
                g[b][i * d + e] = s;
                sq[b] += s * s;
            }
    for (int64_t b = 0; b < B; b++) { /* magnitude of the ghost sum: sum |Ga| |Gg| <= (sum |A||A|)(sum |G||G|) */
        double aa = 0, gg = 0;
        for (int64_t i = 0; i < T * d; i++) aa += fabs(A[b * T * d + i]);
        for (int64_t i = 0; i < T * p; i++) gg += fabs(G[b * T * p + i]);
        sqabs[b] = aa * aa * gg * gg;
    }
    void *dA = up(be, A, B * T * d), *dG = up(be, G, B * T * p), *dsq = up(be, NULL, B), *dsq2 = up(be, NULL, B);
    T_OK(be->ops.ghost_sqnorm(be->ctx, dsq, dA, dG, B, T, d, p));
    T_OK(be->ops.fused_sqnorm(be->ctx, dsq2, dA, dG, B, T, d, p));
    double *gs = down(be, dsq, B), *fs = down(be, dsq2, B);
    for (int64_t b = 0; b < B; b++) {
        double tol = gam((double)(T * T + d + p + T * d + p * d), u) * sqabs[b];
        CLOSEF(gs[b], sq[b], tol, "ghost norm of example %lld", (long long)b);
        CLOSEF(fs[b], sq[b], tol, "fused norm of example %lld", (long long)b);
    }
    /* clip factors: abadi / automatic, both branches */
    double sqv[4] = {0.0, 0.25, 4.0, 1.0}, cf[4];
    void *dsqv = up(be, sqv, 4), *dcf = up(be, NULL, 4);
    T_OK(be->ops.clip_factors(be->ctx, dcf, dsqv, 1.0, OPT_CLIP_ABADI, 0.01, 4));
    be->ops.download_f64(be->ctx, cf, dcf, 4);
    T_CHECK(cf[0] == 1 && cf[1] == 1 && cf[2] == 0.5 && cf[3] == 1, "abadi factors %g %g %g %g", cf[0], cf[1], cf[2], cf[3]);
    T_OK(be->ops.clip_factors(be->ctx, dcf, dsqv, 1.0, OPT_CLIP_AUTOMATIC, 0.01, 4));
    be->ops.download_f64(be->ctx, cf, dcf, 4);
    T_CHECK(cf[0] == 1.0 / 0.01 && cf[2] == 1.0 / 2.01, "automatic factors %g %g", cf[0], cf[2]);
    /* book-keeping GEMM and fused clip-accumulate against sum_b c_b g_b */
    void *dc = up(be, c, B), *dW = up(be, NULL, p * d), *dW2 = up(be, NULL, p * d), *dcout = up(be, NULL, B);
    T_OK(be->ops.bk_gemm(be->ctx, dW, dA, dG, dc, B, T, d, p));
    T_OK(be->ops.fused_clip_accum(be->ctx, dW2, NULL, dcout, dA, dG, NULL, 0.3, OPT_CLIP_ABADI, 0.0, B, T, d, p));
    double *W = down(be, dW, p * d), *W2 = down(be, dW2, p * d), *co = down(be, dcout, B);
    for (int64_t b = 0; b < B; b++) T_CLOSE(co[b], fmin(1.0, 0.3 / sqrt(sq[b])), 4 * gam(T * d * p, u), "fused factor");
    for (int64_t j = 0; j < p * d; j++) {
        double s = 0, sa = 0, s2 = 0, sa2 = 0;
        for (int64_t b = 0; b < B; b++) {
            s += c[b] * g[b][j]; s2 += co[b] * g[b][j];
            double ab = 0;
            for (int64_t t = 0; t < T; t++) ab += fabs(G[(b * T + t) * p + j / d] * A[(b * T + t) * d + j % d]);
            sa += fabs(c[b]) * ab; sa2 += fabs(co[b]) * ab;
        }
        CLOSEF(W[j], s, gam(B * T + 2, u) * sa, "bk_gemm element %lld", (long long)j);
        CLOSEF(W2[j], s2, gam(B * T + 2, u) * sa2, "fused accumulate element %lld", (long long)j);
    }
    /* noise: element-exact Philox Gaussians times std, added to what is there */
    double x[9] = {0};
    for (int i = 0; i < 9; i++) x[i] = i;
    void *dx = up(be, x, 9);
    dp_noise_key key = {0x1234};
    T_OK(be->ops.noise_add(be->ctx, dx, key, 7, 3 | (2u << 16), 0.5, 11, 9));
    double *xn = down(be, dx, 9);
    for (int i = 0; i < 9; i++)
        T_CHECK(xn[i] == (double)i + 0.5 * dp_stream_gaussian(key.k, DP_PURPOSE_NOISE, 7, 3 | (2u << 16), 11 + (uint64_t)i),
                "noise element %d", i);
    T_CHECK(be->ops.noise_add(be->ctx, dx, key, 7, 1u << 24, 0.5, 0, 9) == DP_ERR_INVALID, "lane >= 2^24 accepted");
    void *bufs[] = {dA, dG, dsq, dsq2, dsqv, dcf, dc, dW, dW2, dcout, dx};
    for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++) be->ops.free(be->ctx, bufs[j]);
    free(A); free(G); free(c); free(gs); free(fs); free(W); free(W2); free(co); free(xn);
}

/* Backward ops against central differences of L = sum_i w_i y_i (f64). */
typedef void (*fwd_fn)(opt_backend *be, double *y, const double *x);
static int64_t g_n;
static double g_aux[512];
static void f_rms(opt_backend *be, double *y, const double *x) {
    void *dx = up(be, x, g_n), *dy = up(be, NULL, g_n), *dr = up(be, NULL, 3), *dg = up(be, g_aux, 4);
    be->ops.rmsnorm_fwd(be->ctx, dy, dr, dx, dg, 1e-5, 3, 4);
    be->ops.download_f64(be->ctx, y, dy, g_n);
    be->ops.free(be->ctx, dx); be->ops.free(be->ctx, dy); be->ops.free(be->ctx, dr); be->ops.free(be->ctx, dg);
}
static void f_attn(opt_backend *be, double *y, const double *x) { /* x = [q | k | v], B=1 T=3 H=2 hd=2 */
    int64_t n = 12;
    void *dq = up(be, x, n), *dk = up(be, x + n, n), *dv = up(be, x + 2 * n, n), *dout = up(be, NULL, n), *dp = up(be, NULL, 18);
    be->ops.attn_fwd(be->ctx, dout, dp, dq, dk, dv, 1, 3, 2, 2);
    be->ops.download_f64(be->ctx, y, dout, n);
    void *b[] = {dq, dk, dv, dout, dp};
    for (int i = 0; i < 5; i++) be->ops.free(be->ctx, b[i]);
}
static void f_xent(opt_backend *be, double *y, const double *x) { /* 3 rows, V = 5 */
    int32_t lab[3] = {1, 4, -1};
    double w[3] = {0.5, 2.0, 1.0};
    void *dz = up(be, x, 15), *dw = up(be, w, 3), *dl = up(be, NULL, 3);
    be->ops.xent_fwd(be->ctx, dl, dz, lab, dw, 3, 5);
    be->ops.download_f64(be->ctx, y, dl, 3);
    be->ops.free(be->ctx, dz); be->ops.free(be->ctx, dw); be->ops.free(be->ctx, dl);
}
static void f_swiglu(opt_backend *be, double *y, const double *x) {
    void *da = up(be, x, 6), *db = up(be, x + 6, 6), *dh = up(be, NULL, 6);
    be->ops.swiglu_fwd(be->ctx, dh, da, db, 6);
    be->ops.download_f64(be->ctx, y, dh, 6);
    be->ops.free(be->ctx, da); be->ops.free(be->ctx, db); be->ops.free(be->ctx, dh);
}

static void fd_check(opt_backend *be, const char *what, fwd_fn f, const double *x, int64_t nx, int64_t ny,
                     const double *grad, const double *w) {
    const double h = 1e-5, u = ldexp(1.0, -53), M3 = 100;
    double *xp = malloc(sizeof(double) * (size_t)nx), *yp = malloc(sizeof(double) * (size_t)ny),
           *ym = malloc(sizeof(double) * (size_t)ny);
    for (int64_t i = 0; i < nx; i++) {
        memcpy(xp, x, sizeof(double) * (size_t)nx);
        xp[i] = x[i] + h; f(be, yp, xp);
        xp[i] = x[i] - h; f(be, ym, xp);
        double lp = 0, lm = 0, mag = 0;
        for (int64_t j = 0; j < ny; j++) { lp += w[j] * yp[j]; lm += w[j] * ym[j]; mag += fabs(w[j] * yp[j]); }
        double fd = (lp - lm) / (2 * h);
        double tol = h * h / 6 * M3 + 2 * u * mag / h + gam((double)ny, u) * mag;
        CLOSEF(grad[i], fd, tol, "%s: d/dx[%lld]", what, (long long)i);
    }
    free(xp); free(yp); free(ym);
}

static void test_backward(opt_backend *be) {
    double w[64];
    for (int i = 0; i < 64; i++) w[i] = urand(5000 + (uint64_t)i);
    /* rmsnorm [3, 4] */
    {
        g_n = 12;
        for (int j = 0; j < 4; j++) g_aux[j] = 1 + 0.5 * urand(900 + (uint64_t)j);
        double *x = rvec(12, 30);
        void *dx = up(be, x, 12), *dy = up(be, NULL, 12), *dr = up(be, NULL, 3), *dg = up(be, g_aux, 4);
        void *dw = up(be, w, 12), *dxg = up(be, NULL, 12), *dgr = up(be, NULL, 12);
        be->ops.rmsnorm_fwd(be->ctx, dy, dr, dx, dg, 1e-5, 3, 4);
        T_OK(be->ops.rmsnorm_bwd(be->ctx, dxg, dgr, dw, dx, dr, dg, 3, 4));
        double *gx = down(be, dxg, 12);
        fd_check(be, "rmsnorm", f_rms, x, 12, 12, gx, w);
        free(x); free(gx);
        void *b[] = {dx, dy, dr, dg, dw, dxg, dgr};
        for (int i = 0; i < 7; i++) be->ops.free(be->ctx, b[i]);
    }
    /* attention: q, k, v [1, 3, 2, 2] */
    {
        double *x = rvec(36, 40);
        void *dq = up(be, x, 12), *dk = up(be, x + 12, 12), *dv = up(be, x + 24, 12), *dout = up(be, NULL, 12),
             *dp = up(be, NULL, 18), *dw = up(be, w, 12), *gq = up(be, NULL, 12), *gk = up(be, NULL, 12), *gv = up(be, NULL, 12);
        be->ops.attn_fwd(be->ctx, dout, dp, dq, dk, dv, 1, 3, 2, 2);
        T_OK(be->ops.attn_bwd(be->ctx, gq, gk, gv, dw, dq, dk, dv, dp, 1, 3, 2, 2));
        double g[36];
        be->ops.download_f64(be->ctx, g, gq, 12);
        be->ops.download_f64(be->ctx, g + 12, gk, 12);
        be->ops.download_f64(be->ctx, g + 24, gv, 12);
        fd_check(be, "attention", f_attn, x, 36, 12, g, w);
        free(x);
        void *b[] = {dq, dk, dv, dout, dp, dw, gq, gk, gv};
        for (int i = 0; i < 9; i++) be->ops.free(be->ctx, b[i]);
    }
    /* cross-entropy: 3 rows, V = 5, the third ignored */
    {
        double *z = rvec(15, 50), wl[3] = {w[0], w[1], w[2]}, wr[3] = {0.5, 2.0, 1.0};
        int32_t lab[3] = {1, 4, -1};
        void *dz = up(be, z, 15), *dwr = up(be, wr, 3), *dg = up(be, NULL, 15);
        T_OK(be->ops.xent_bwd(be->ctx, dg, dz, lab, dwr, 3, 5));
        double *g = down(be, dg, 15);
        /* dL/dz for L = sum_r wl_r loss_r: the op's row r times wl_r */
        for (int i = 0; i < 15; i++) g[i] *= wl[i / 5];
        fd_check(be, "cross-entropy", f_xent, z, 15, 3, g, wl);
        free(z); free(g);
        be->ops.free(be->ctx, dz); be->ops.free(be->ctx, dwr); be->ops.free(be->ctx, dg);
    }
    /* swiglu */
    {
        double *x = rvec(12, 60);
        void *da = up(be, x, 6), *db = up(be, x + 6, 6), *dw = up(be, w, 6), *ga = up(be, NULL, 6), *gb = up(be, NULL, 6);
        T_OK(be->ops.swiglu_bwd(be->ctx, ga, gb, dw, da, db, 6));
        double g[12];
        be->ops.download_f64(be->ctx, g, ga, 6);
        be->ops.download_f64(be->ctx, g + 6, gb, 6);
        fd_check(be, "swiglu", f_swiglu, x, 12, 6, g, w);
        free(x);
        void *b[] = {da, db, dw, ga, gb};
        for (int i = 0; i < 5; i++) be->ops.free(be->ctx, b[i]);
    }
    /* rotary: the backward is the transpose, <rope(x), y> = <x, rope_bwd(y)> */
    {
        const int64_t B = 2, T = 3, H = 2, hd = 4, n = B * T * H * hd;
        double *x = rvec(n, 70), *y = rvec(n, 71);
        void *dx = up(be, x, n), *dy = up(be, y, n), *rx = up(be, NULL, n), *ry = up(be, NULL, n);
        T_OK(be->ops.rope_fwd(be->ctx, rx, dx, 10000.0, B, T, H, hd));
        T_OK(be->ops.rope_bwd(be->ctx, ry, dy, 10000.0, B, T, H, hd));
        double *a = down(be, rx, n), *b = down(be, ry, n), l = 0, r = 0, mag = 0;
        for (int64_t i = 0; i < n; i++) { l += a[i] * y[i]; r += x[i] * b[i]; mag += fabs(x[i] * y[i]) * 2; }
        T_CLOSE(l, r, gam((double)n + 4, ldexp(1.0, -53)) * 2 * mag, "rope transpose");
        T_CHECK(be->ops.rope_fwd(be->ctx, rx, dx, 10000.0, 1, 1, 1, 3) == DP_ERR_INVALID, "odd head dim accepted");
        free(x); free(y); free(a); free(b);
        be->ops.free(be->ctx, dx); be->ops.free(be->ctx, dy); be->ops.free(be->ctx, rx); be->ops.free(be->ctx, ry);
    }
}

static void test_misc(opt_backend *be) {
    /* embedding: gather, and per-example scatter-add */
    double tab[3 * 2] = {1, 2, 3, 4, 5, 6}, dy[4 * 2] = {1, 1, 2, 2, 3, 3, 4, 4};
    int32_t ids[4] = {2, 0, 2, 2};
    void *dt = up(be, tab, 6), *dout = up(be, NULL, 8), *ddy = up(be, dy, 8), *dtab = up(be, NULL, 12);
    T_OK(be->ops.embed_fwd(be->ctx, dout, dt, ids, 4, 3, 2));
    double *o = down(be, dout, 8);
    T_CHECK(o[0] == 5 && o[1] == 6 && o[2] == 1 && o[3] == 2, "embed gather");
    T_OK(be->ops.embed_bwd(be->ctx, dtab, ddy, ids, 4, 2, 3, 2)); /* 2 examples of 2 rows */
    double *g = down(be, dtab, 12);
    T_CHECK(g[4] == 1 && g[0] == 2 && g[6 + 4] == 7 && g[6 + 5] == 7 && g[6 + 0] == 0, "embed per-example scatter");
    int32_t badid[1] = {3};
    T_CHECK(be->ops.embed_fwd(be->ctx, dout, dt, badid, 1, 3, 2) == DP_ERR_INVALID, "token out of range accepted");
    /* optimizers against their formulas (two steps) */
    double p0[2] = {0.5, -1}, gr[2] = {0.25, 2};
    void *dp = up(be, p0, 2), *m1 = up(be, NULL, 2), *m2 = up(be, NULL, 2), *dg = up(be, gr, 2);
    for (int t = 1; t <= 2; t++) T_OK(be->ops.sgd_momentum(be->ctx, dp, m1, dg, 0.1, 0.9, 0.0, t, 2));
    double *pp = down(be, dp, 2);
    T_CHECK(pp[0] == (0.5 - 0.1 * 0.25) - 0.1 * (0.9 * 0.25 + 0.25), "sgd momentum");
    be->ops.upload_f64(be->ctx, dp, p0, 2);
    be->ops.zero(be->ctx, m1, 16); be->ops.zero(be->ctx, m2, 16);
    T_OK(be->ops.adamw(be->ctx, dp, m1, m2, dg, 0.01, 0.9, 0.999, 1e-8, 0.1, 1, 2));
    double *pa = down(be, dp, 2);
    double th = 0.5 * (1 - 0.01 * 0.1), mm = 0.1 * 0.25, vv = (1 - 0.999) * (0.25 * 0.25);
    th = th - (0.01 / (1 - 0.9)) * (mm / (sqrt(vv) / sqrt(1 - 0.999) + 1e-8));
    T_CHECK(pa[0] == th, "adamw %.17g vs %.17g", pa[0], th);
    /* one-rank collectives: identity, async handles complete on wait */
    double v[3] = {1, 2, 3};
    void *dv = up(be, v, 3), *dr = up(be, NULL, 3);
    opt_async *h = NULL;
    T_OK(be->ops.allreduce_sum(be->ctx, NULL, dv, 3, &h));
    T_OK(be->ops.wait(be->ctx, h));
    T_OK(be->ops.allgather(be->ctx, NULL, dr, dv, 3, NULL));
    double *rv = down(be, dr, 3);
    T_CHECK(rv[0] == 1 && rv[2] == 3, "one-rank allgather");
    T_CHECK(be->ops.send(be->ctx, NULL, dv, 3, 0, 0, NULL) == DP_ERR_INVALID, "send to self accepted");
    void *bufs[] = {dt, dout, ddy, dtab, dp, m1, m2, dg, dv, dr};
    for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++) be->ops.free(be->ctx, bufs[j]);
    free(o); free(g); free(pp); free(pa); free(rv);
}

int main(void) {
    g_seed = t_seed(3);
    opt_backend *be = NULL, *bf = NULL;
    opt_backend_config c64 = {"host", DP_F64, 1, 0}, c32 = {"host", DP_F32, 1, 0};
    T_OK(opt_backend_create(&be, &c64));
    T_OK(opt_backend_create(&bf, &c32));
    test_gemm(be, ldexp(1.0, -53), 1);   /* f64: the naive loop's order, exactly */
    test_gemm(bf, ldexp(1.0, -24), 0);   /* f32: gamma_K bound */
    test_threads(DP_F64);
    test_threads(DP_F32);
    test_dp_ops(be);
    test_backward(be);
    test_misc(be);
    /* support query and registry */
    for (int op = 0; op < OPT_OP_COUNT; op++) T_CHECK(opt_backend_supports(be, (opt_op)op), "host lacks %s", opt_op_name((opt_op)op));
    opt_backend_ops saved = be->ops;
    be->ops.ghost_sqnorm = NULL;
    opt_op need[2] = {OPT_OP_GEMM, OPT_OP_GHOST_SQNORM};
    dp_status st = opt_backend_require(be, need, 2);
    T_CHECK(st == DP_ERR_NOT_SUPPORTED && strstr(dp_last_error(), "ghost_sqnorm"), "missing op not reported: %s", dp_last_error());
    T_CHECK(!opt_backend_supports(be, OPT_OP_GHOST_SQNORM), "NULL entry reported as supported");
    be->ops = saved;
    opt_backend *x = NULL;
    opt_backend_config bad = {"tpu", DP_F64, 1, 0}, bad2 = {"host", DP_BF16, 1, 0}, bad3 = {"host", DP_F64, 0, 0};
    T_CHECK(opt_backend_create(&x, &bad) == DP_ERR_USAGE, "unknown backend accepted");
    T_CHECK(opt_backend_create(&x, &bad2) == DP_ERR_INVALID, "bf16 host backend accepted");
    T_CHECK(opt_backend_create(&x, &bad3) == DP_ERR_INVALID, "0 threads accepted");
    opt_backend_destroy(be);
    opt_backend_destroy(bf);
    return t_finish();
}

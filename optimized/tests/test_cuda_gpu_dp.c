/* optimized/tests/test_cuda_gpu_dp.c — the DP kernels of the CUDA backend against
 * double-precision CPU references (instantiate every per-example gradient, clip,
 * sum), with bounds derived in docs/cuda.md ("Tolerances on the GPU"):
 *   - hierarchical row squared norms;
 *   - tiled ghost norm (no T x T Gram in global memory) incl. accumulation;
 *   - book-keeping clip factors and reweighted GEMM (f32);
 *   - Philox noise element by element against the CPU streams (f32), fused
 *     epilogue, determinism, negative control (neighbouring step must differ).
 * The fused per-layer clipping and the bf16 variants: test_cuda_gpu_dev.c; the engine's
 * operations through the operation table: test_cuda_gpu_backend.c and the op harness.
 * Exits 77 without a GPU (built against the CPU emulation as optimized_test_cuda_emu_dp). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_testutil.h"

static uint64_t seed;
#define U CU_U32

static void test_rows_sqnorm(cu_ctx *ctx) {
    const int nb = 5;
    const int64_t n = 100003;
    float *x = malloc((size_t)(nb * n) * 4);
    cu_test_fill(x, (size_t)(nb * n), seed, 20, 3.0);
    float *dx = cu_test_up(ctx, x, (size_t)(nb * n) * 4);
    double *dsq = NULL, sq[5];
    T_OK(cu_malloc((void **)&dsq, nb * sizeof(double)));
    T_OK(cu_dp_rows_sqnorm(ctx, dsq, dx, n, nb));
    T_OK(cu_d2h(ctx, sq, dsq, sizeof sq));
    for (int b = 0; b < nb; b++) {
        double r = 0;
        for (int64_t i = 0; i < n; i++) r += (double)x[b * n + i] * x[b * n + i];
        /* both sides sum the same non-negative doubles (exact squares of f32 need 48 bits) */
        T_CHECK(fabs(sq[b] - r) <= 2 * cu_gamma((double)n, 1.0 / 9007199254740992.0) * r, "row %d: %.17g vs %.17g", b, sq[b], r);
    }
    cu_free(dx); cu_free(dsq); free(x);
}

static void test_ghost_bk(cu_ctx *ctx) {
    const int B = 4, T = 70, d = 50, p = 20; /* T = 70: 3 tiles, the last partial */
    const int64_t n = (int64_t)p * d;
    size_t na = (size_t)B * T * d, ng = (size_t)B * T * p;
    float *A = malloc(na * 4), *G = malloc(ng * 4), *g0 = malloc(n * 4), *g1 = malloc(n * 4);
    cu_test_fill(A, na, seed, 24, 1.0);
    cu_test_fill(G, ng, seed, 25, 0.5);
    cu_test_fill(g0, (size_t)n, seed, 26, 0.1);
    float *dA = cu_test_up(ctx, A, na * 4), *dG = cu_test_up(ctx, G, ng * 4), *dgrad = cu_test_up(ctx, g0, (size_t)n * 4);
    double *dsq = NULL, sq[4], sq2[4];
    float *dc = NULL, *dGs = NULL, c[4];
    T_OK(cu_malloc((void **)&dsq, sizeof sq));
    T_OK(cu_malloc((void **)&dc, sizeof c));
    T_OK(cu_malloc((void **)&dGs, ng * 4));
    T_OK(cu_dp_ghost_sqnorm(ctx, dsq, dA, dG, 0, B, T, d, p));
    T_OK(cu_d2h(ctx, sq, dsq, sizeof sq));
    T_OK(cu_dp_ghost_sqnorm(ctx, dsq, dA, dG, 1, B, T, d, p)); /* accumulate: doubles exactly */
    T_OK(cu_d2h(ctx, sq2, dsq, sizeof sq2));
    cu_test_ex ex[4];
    cu_test_ref_examples(ex, A, G, B, T, d, p, U);
    for (int b = 0; b < B; b++) {
        /* |d sq| <= sum_{t,s} |dGa||Gg| + |Ga||dGg| + |dGa||dGg|, |dGa_ts| <= gamma_d sum_k |a_tk a_sk| */
        double tol = 0;
        const float *Ab = A + (size_t)b * T * d, *Gb = G + (size_t)b * T * p;
        for (int t = 0; t < T; t++)
            for (int s = 0; s < T; s++) {
                double ga = 0, gaa = 0, gg = 0, gga = 0;
                for (int k = 0; k < d; k++) { ga += (double)Ab[t * d + k] * Ab[s * d + k]; gaa += fabs((double)Ab[t * d + k] * Ab[s * d + k]); }
                for (int k = 0; k < p; k++) { gg += (double)Gb[t * p + k] * Gb[s * p + k]; gga += fabs((double)Gb[t * p + k] * Gb[s * p + k]); }
                double ea = cu_gamma(d, U) * gaa, eg = cu_gamma(p, U) * gga;
                tol += ea * fabs(gg) + fabs(ga) * eg + ea * eg + 1e-15 * fabs(ga * gg);
            }
        T_CHECK(fabs(sq[b] - ex[b].sq) <= tol, "ghost example %d: %.17g vs %.17g (tol %.3g)", b, sq[b], ex[b].sq, tol);
        T_CHECK(sq2[b] == 2 * sq[b], "accumulate adds the same value: %.17g vs %.17g", sq2[b], 2 * sq[b]);
    }
    /* book-keeping: factors from the ghost norms, then one reweighted GEMM */
    double C = 0.7 * sqrt(ex[1].sq);
    T_OK(cu_dp_clip_factors(ctx, dc, dsq, C, B)); /* from 2 sq: a different but valid set of norms */
    T_OK(cu_d2h(ctx, c, dc, sizeof c));
    for (int b = 0; b < B; b++) T_CHECK(c[b] == (float)cu_test_clipfn(sq2[b], C, 0, 0.0), "factor %d", b);
    T_OK(cu_dp_bk_wgrad(ctx, dgrad, dGs, dA, dG, dc, B, T, d, p));
    T_OK(cu_d2h(ctx, g1, dgrad, (size_t)n * 4));
    int bad = 0;
    for (int i = 0; i < p; i++)
        for (int j = 0; j < d; j++) {
            double r = g0[i * d + j], mag = fabs(g0[i * d + j]);
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++) {
                    double v = (double)c[b] * G[((size_t)b * T + t) * p + i] * A[((size_t)b * T + t) * d + j];
                    r += v;
                    mag += fabs(v);
                }
            /* scaling rounds once (u), then an f32 GEMM over K = B*T plus beta = 1 */
            if (!(fabs(g1[i * d + j] - r) <= cu_gamma(B * T + 2, U) * mag)) bad++;
        }
    T_CHECK(bad == 0, "bk f32: %d elements beyond gamma_{BT+2} bound", bad);
    cu_free(dA); cu_free(dG); cu_free(dgrad); cu_free(dsq); cu_free(dc); cu_free(dGs);
    cu_test_ex_free(ex, B);
    free(A); free(G); free(g0); free(g1);
}

/* f32 values a, b differ by at most one unit in the last place */
static int within_1ulp(float a, float b) {
    if (a == b) return 1;
    return nextafterf(a, b) == b;
}

static void test_noise(cu_ctx *ctx) {
    const int64_t n = (1 << 20) + 3;
    const uint64_t key = seed * 0x9E3779B97F4A7C15ULL + 1, offset = 12345;
    const uint32_t step = 42, lane = 17;
    const double std = 1.5;
    float *z = malloc((size_t)n * 4), *z2 = malloc((size_t)n * 4), *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    float *dz = NULL;
    T_OK(cu_malloc((void **)&dz, (size_t)n * 4));
    T_OK(cu_dp_noise_fill(ctx, dz, key, step, lane, offset, std, n));
    T_OK(cu_d2h(ctx, z, dz, (size_t)n * 4));
    T_OK(cu_dp_noise_fill(ctx, dz, key, step, lane, offset, std, n));
    T_OK(cu_d2h(ctx, z2, dz, (size_t)n * 4));
    T_CHECK(memcmp(z, z2, (size_t)n * 4) == 0, "noise run to run identical");
    dp_stream s;
    T_OK(dp_stream_secret(&s, (dp_noise_key){key}, DP_PURPOSE_NOISE, step, lane));
    double *g = malloc((size_t)n * sizeof(double));
    dp_rng_fill_gaussian(g, &s, offset, (size_t)n);
    /* Device and glibc log/sin/cos may differ in the last double bits; an f32 result can
     * then differ by one ulp, with probability <= 2^-26 per element (docs/cuda.md):
     * expected 0.016 of 2^20 elements; at most 3 allowed (P(more) < 1e-6). */
    int mism = 0, far = 0;
    for (int64_t i = 0; i < n; i++) {
        float r = (float)(0.0 + std * g[i]);
        if (z[i] != r) { mism++; if (!within_1ulp(z[i], r)) far++; }
    }
    T_CHECK(far == 0 && mism <= 3, "noise fill vs CPU stream: %d differ, %d by more than 1 ulp", mism, far);
    /* in place on data, and the fused epilogue ((x + std z) * scale) */
    cu_test_fill(x, (size_t)n, seed, 27, 1.0);
    float *dx = cu_test_up(ctx, x, (size_t)n * 4);
    T_OK(cu_dp_noise_add(ctx, dx, key, step, lane, offset, std, n));
    T_OK(cu_d2h(ctx, y, dx, (size_t)n * 4));
    mism = far = 0;
    for (int64_t i = 0; i < n; i++) {
        float r = (float)((double)x[i] + std * g[i]);
        if (y[i] != r) { mism++; if (!within_1ulp(y[i], r)) far++; }
    }
    T_CHECK(far == 0 && mism <= 3, "noise add vs CPU: %d differ, %d by more than 1 ulp", mism, far);
    T_OK(cu_h2d(ctx, dx, x, (size_t)n * 4));
    T_OK(cu_dp_noise_scale(ctx, dz, dx, key, step, lane, offset, std, 0.125, n));
    T_OK(cu_d2h(ctx, y, dz, (size_t)n * 4));
    mism = far = 0;
    for (int64_t i = 0; i < n; i++) {
        float r = (float)(((double)x[i] + std * g[i]) * 0.125);
        if (y[i] != r) { mism++; if (!within_1ulp(y[i], r)) far++; }
    }
    T_CHECK(far == 0 && mism <= 3, "noise scale vs CPU: %d differ, %d by more than 1 ulp", mism, far);
    /* negative control: the neighbouring step must not match */
    T_OK(cu_dp_noise_fill(ctx, dz, key, step + 1, lane, offset, std, n));
    T_OK(cu_d2h(ctx, z2, dz, (size_t)n * 4));
    mism = 0;
    for (int64_t i = 0; i < n; i++) mism += z2[i] != (float)(std * g[i]);
    T_CHECK(mism > n / 2, "negative control: step+1 differs in %d of %lld elements", mism, (long long)n);
    T_CHECK(cu_dp_noise_add(ctx, dx, key, step, 1u << 24, 0, std, n) == DP_ERR_INVALID, "lane 2^24: %s", dp_last_error());
    cu_free(dz); cu_free(dx);
    free(z); free(z2); free(x); free(y); free(g);
}

int main(void) {
    seed = t_seed(7002);
    cu_ctx *ctx = cu_test_ctx();
    if (!ctx) return t_skip("no CUDA device (GPU test)");
    test_rows_sqnorm(ctx);
    test_ghost_bk(ctx);
    test_noise(ctx);
    cu_ctx_destroy(ctx);
    return t_finish();
}

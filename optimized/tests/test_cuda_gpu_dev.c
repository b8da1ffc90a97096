/* optimized/tests/test_cuda_gpu_dev.c — the CUDA development variants (optimized/cuda/dev/,
 * bf16 inputs; not used by the engine yet) against double-precision CPU references, with
 * the bounds of docs/cuda.md ("Tolerances on the GPU"):
 *   - the bf16 GEMM (cuBLASLt), transposes and strided batches, determinism;
 *   - the fused per-layer DP weight gradient (bf16 in, f32 out) over the engine's norm and
 *     accumulation kernels: automatic and forced chunking, norms out, determinism, a
 *     negative control (a wrong clip norm must be caught by the same checker), and an
 *     example with +inf dropped (skipped, never multiplied by its factor 0);
 *   - the tensor-core ghost norm and book-keeping with bf16 scaled rows.
 * Exits 77 without a GPU (built against the CPU emulation as optimized_test_cuda_emu_dev). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_testutil.h"
#include "optimized/cuda/dev/cu_dev.h"

static uint64_t seed;
#define U CU_U32

static void test_gemm_bf16(cu_ctx *ctx) {
    const int M = 67, N = 45, K = 129, batch = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
            float *A = malloc(na * batch * 4), *B = malloc(nb * batch * 4), *C = malloc(nc * batch * 4), *C2 = malloc(nc * batch * 4);
            uint16_t *Ah = malloc(na * batch * 2), *Bh = malloc(nb * batch * 2);
            cu_test_fill_bf16(Ah, A, na * batch, seed, 1, 1.0);
            cu_test_fill_bf16(Bh, B, nb * batch, seed, 2, 1.0);
            void *dA = cu_test_up(ctx, Ah, na * batch * 2), *dB = cu_test_up(ctx, Bh, nb * batch * 2), *dC = NULL;
            T_OK(cu_malloc(&dC, nc * batch * 4));
            for (int rep = 0; rep < 2; rep++) {
                T_OK(cu_gemm_bf16_batched(ctx, dC, dA, dB, ta, tb, 1.0f, 0.0f, M, N, K, (int64_t)na, (int64_t)nb, (int64_t)nc, batch));
                T_OK(cu_d2h(ctx, rep ? C2 : C, dC, nc * batch * 4));
            }
            T_CHECK(memcmp(C, C2, nc * batch * 4) == 0, "bf16 gemm run to run identical (ta=%d tb=%d)", ta, tb);
            /* tensor-core accumulation may truncate: unit roundoff 2u (docs/cuda.md) */
            int bad = cu_test_gemm_bad(C, A, B, ta, tb, M, N, K, batch, cu_gamma(K, 2 * U));
            T_CHECK(bad == 0, "gemm bf16 ta=%d tb=%d: %d elements beyond gamma_K(2u) bound", ta, tb, bad);
            cu_free(dA); cu_free(dB); cu_free(dC);
            free(A); free(B); free(C); free(C2); free(Ah); free(Bh);
        }
}

/* cu_test_clipped_bad (abadi, no extra norms) on f32 gradients */
static int count_bad(const float *grad, const float *grad0, const cu_test_ex *ex, double C, int B, int64_t n) {
    double *g = malloc((size_t)n * sizeof(double)), *g0 = malloc((size_t)n * sizeof(double));
    for (int64_t j = 0; j < n; j++) { g[j] = grad[j]; g0[j] = grad0[j]; }
    int bad = cu_test_clipped_bad(g, g0, ex, NULL, C, 0, 0.0, B, n, U);
    free(g); free(g0);
    return bad;
}

static void test_fused(cu_ctx *ctx) {
    const int B = 6, T = 33, d = 40, p = 24;
    const int64_t n = (int64_t)p * d;
    size_t na = (size_t)B * T * d, ng = (size_t)B * T * p;
    float *A = malloc(na * 4), *G = malloc(ng * 4), *g0 = malloc(n * 4), *g1 = malloc(n * 4), *g2 = malloc(n * 4);
    uint16_t *Ah = malloc(na * 2), *Gh = malloc(ng * 2);
    cu_test_fill_bf16(Ah, A, na, seed, 21, 1.0);
    cu_test_fill_bf16(Gh, G, ng, seed, 22, 1.0);
    for (int b = 0; b < B; b++) /* spread the norms: some examples clipped, some not */
        for (size_t k = 0; k < (size_t)T * p; k++) {
            G[b * (size_t)T * p + k] = dp_bf16_to_f32(Gh[b * (size_t)T * p + k] = dp_f32_to_bf16(G[b * (size_t)T * p + k] * (float)(b + 1) / 3.0f));
        }
    cu_test_fill(g0, (size_t)n, seed, 23, 0.1);
    cu_test_ex ex[6];
    cu_test_ref_examples(ex, A, G, B, T, d, p, 2 * U);
    double norms[6];
    for (int b = 0; b < B; b++) norms[b] = sqrt(ex[b].sq);
    double C = 0.5 * (norms[1] + norms[3]); /* between: examples 0-1 unclipped (norm grows with b), 3-5 clipped */
    uint16_t *dA = cu_test_up(ctx, Ah, na * 2), *dG = cu_test_up(ctx, Gh, ng * 2);
    float *dgrad = cu_test_up(ctx, g0, (size_t)n * 4);
    double *dsq = NULL, sq[6];
    T_OK(cu_malloc((void **)&dsq, sizeof sq));
    for (int chunk = 0; chunk <= 4; chunk += 4) {
        for (int rep = 0; rep < 2; rep++) {
            T_OK(cu_h2d(ctx, dgrad, g0, (size_t)n * 4));
            T_OK(cu_dp_fused_wgrad_bf16(ctx, dgrad, dsq, dA, dG, C, B, T, d, p, chunk));
            T_OK(cu_d2h(ctx, rep ? g2 : g1, dgrad, (size_t)n * 4));
        }
        T_CHECK(memcmp(g1, g2, (size_t)n * 4) == 0, "fused chunk=%d: run to run identical", chunk);
        T_OK(cu_d2h(ctx, sq, dsq, sizeof sq));
        for (int b = 0; b < B; b++) {
            double tol = 0;
            for (int64_t j = 0; j < n; j++) tol += 2 * fabs(ex[b].g[j]) * ex[b].e[j] + ex[b].e[j] * ex[b].e[j];
            T_CHECK(fabs(sq[b] - ex[b].sq) <= tol, "chunk=%d example %d squared norm %.17g vs %.17g (tol %.3g)", chunk, b, sq[b], ex[b].sq, tol);
        }
        int bad = count_bad(g1, g0, ex, C, B, n);
        T_CHECK(bad == 0, "fused chunk=%d: %d elements beyond the derived bound", chunk, bad);
        /* negative control: the same checker with clip 2C must reject the result */
        int neg = count_bad(g1, g0, ex, 2 * C, B, n);
        T_CHECK(neg > 0, "negative control (clip 2C) must be detected, got %d mismatches", neg);
    }
    T_CHECK(cu_dp_fused_wgrad_bf16(ctx, dgrad, dsq, dA, dG, NAN, B, T, d, p, 0) == DP_ERR_INVALID, "NaN clip: %s",
            dp_last_error());
    cu_free(dA); cu_free(dG); cu_free(dgrad); cu_free(dsq);
    cu_test_ex_free(ex, B);
    free(A); free(G); free(Ah); free(Gh); free(g0); free(g1); free(g2);
}

/* A dropped example (non-finite norm, c = 0) is skipped, never multiplied: one +inf input
 * makes its whole block inf/NaN, and 0 * inf = NaN would poison every element of grad
 * (the defect of docs/cuda.md "Known defects, fixed"). grad must equal the clipped sum of the
 * other examples within the same bound as test_fused, and be finite everywhere. */
static void test_fused_dropped(cu_ctx *ctx) {
    const int B = 4, T = 5, d = 12, p = 8, drop = 2;
    const int64_t n = (int64_t)p * d;
    size_t na = (size_t)B * T * d, ng = (size_t)B * T * p;
    float *A = malloc(na * 4), *G = malloc(ng * 4), *g0 = malloc(n * 4), *g1 = malloc(n * 4);
    uint16_t *Ah = malloc(na * 2), *Gh = malloc(ng * 2);
    cu_test_fill_bf16(Ah, A, na, seed, 30, 1.0);
    cu_test_fill_bf16(Gh, G, ng, seed, 31, 1.0);
    cu_test_fill(g0, (size_t)n, seed, 32, 0.1);
    Ah[(size_t)drop * T * d + 3] = 0x7f80; /* +inf in example `drop` */
    cu_test_ex ex[4];
    cu_test_ref_examples(ex, A, G, B, T, d, p, 2 * U); /* the finite values (A still holds the finite draw) */
    double C = 0.5 * sqrt(ex[0].sq);
    uint16_t *dA = cu_test_up(ctx, Ah, na * 2), *dG = cu_test_up(ctx, Gh, ng * 2);
    float *dgrad = cu_test_up(ctx, g0, (size_t)n * 4);
    double *dsq = NULL, sq[4];
    T_OK(cu_malloc((void **)&dsq, sizeof sq));
    T_OK(cu_dp_fused_wgrad_bf16(ctx, dgrad, dsq, dA, dG, C, B, T, d, p, 0));
    T_OK(cu_d2h(ctx, g1, dgrad, (size_t)n * 4));
    T_OK(cu_d2h(ctx, sq, dsq, sizeof sq));
    T_CHECK(!isfinite(sq[drop]), "the example with +inf has a non-finite norm (%g)", sq[drop]);
    int nonfinite = 0;
    for (int64_t j = 0; j < n; j++) nonfinite += !isfinite(g1[j]);
    T_CHECK(nonfinite == 0, "dropped example: %d of %lld grad elements are not finite (0 * inf)", nonfinite, (long long)n);
    cu_test_ex kept[3];
    for (int b = 0, k = 0; b < B; b++)
        if (b != drop) kept[k++] = ex[b];
    int bad = count_bad(g1, g0, kept, C, B - 1, n);
    T_CHECK(bad == 0, "dropped example: %d elements differ from the clipped sum of the other examples", bad);
    cu_free(dA); cu_free(dG); cu_free(dgrad); cu_free(dsq);
    cu_test_ex_free(ex, B);
    free(A); free(G); free(Ah); free(Gh); free(g0); free(g1);
}

/* The tensor-core ghost norm (bf16 in) and the bf16 book-keeping GEMM. T = 150: three
 * 64-tiles, the last partial; d, p not multiples of the 32-wide K chunk. */
static void test_ghost_bk_bf16(cu_ctx *ctx) {
    const int B = 3, T = 150, d = 72, p = 40;
    size_t na = (size_t)B * T * d, ng = (size_t)B * T * p;
    float *A = malloc(na * 4), *G = malloc(ng * 4);
    uint16_t *Ah = malloc(na * 2), *Gh = malloc(ng * 2);
    cu_test_fill_bf16(Ah, A, na, seed, 28, 1.0);
    cu_test_fill_bf16(Gh, G, ng, seed, 29, 0.5);
    uint16_t *dA = cu_test_up(ctx, Ah, na * 2), *dG = cu_test_up(ctx, Gh, ng * 2), *dGs = NULL;
    double *dsq = NULL, sq[3];
    T_OK(cu_malloc((void **)&dsq, sizeof sq));
    T_OK(cu_malloc((void **)&dGs, ng * 2));
    T_OK(cu_dp_ghost_sqnorm_bf16(ctx, dsq, dA, dG, 0, B, T, d, p));
    T_OK(cu_d2h(ctx, sq, dsq, sizeof sq));
    for (int b = 0; b < B; b++) {
        /* exact bf16 products, tensor-core accumulation with unit roundoff 2u */
        const float *Ab = A + (size_t)b * T * d, *Gb = G + (size_t)b * T * p;
        double ref = 0, tol = 0;
        for (int t = 0; t < T; t++)
            for (int s2 = 0; s2 < T; s2++) {
                double ga = 0, gaa = 0, gg = 0, gga = 0;
                for (int k = 0; k < d; k++) { ga += (double)Ab[t * d + k] * Ab[s2 * d + k]; gaa += fabs((double)Ab[t * d + k] * Ab[s2 * d + k]); }
                for (int k = 0; k < p; k++) { gg += (double)Gb[t * p + k] * Gb[s2 * p + k]; gga += fabs((double)Gb[t * p + k] * Gb[s2 * p + k]); }
                double ea = cu_gamma(d, 2 * U) * gaa, eg = cu_gamma(p, 2 * U) * gga;
                ref += ga * gg;
                tol += ea * fabs(gg) + fabs(ga) * eg + ea * eg + 1e-15 * fabs(ga * gg);
            }
        T_CHECK(fabs(sq[b] - ref) <= tol, "bf16 ghost example %d: %.17g vs %.17g (tol %.3g)", b, sq[b], ref, tol);
    }
    /* bk bf16: c from the norms; Gs = bf16(c G) rounds once (bf16 unit roundoff 2^-8 relative) */
    float *dc = NULL, c[3];
    T_OK(cu_malloc((void **)&dc, sizeof c));
    double C = 0.5 * sqrt(sq[0]);
    T_OK(cu_dp_clip_factors(ctx, dc, dsq, C, B));
    T_OK(cu_d2h(ctx, c, dc, sizeof c));
    const int64_t n = (int64_t)p * d;
    float *g1 = malloc((size_t)n * 4), *dgrad = NULL;
    T_OK(cu_malloc((void **)&dgrad, (size_t)n * 4));
    T_OK(cu_memset0(ctx, dgrad, (size_t)n * 4));
    T_OK(cu_dp_bk_wgrad_bf16(ctx, dgrad, dGs, dA, dG, dc, B, T, d, p));
    T_OK(cu_d2h(ctx, g1, dgrad, (size_t)n * 4));
    int bad = 0;
    for (int i = 0; i < p; i++)
        for (int j = 0; j < d; j++) {
            double r = 0, mag = 0;
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++) {
                    double v = (double)c[b] * G[((size_t)b * T + t) * p + i] * A[((size_t)b * T + t) * d + j];
                    r += v;
                    mag += fabs(v);
                }
            if (!(fabs(g1[i * d + j] - r) <= (1.0 / 256 + cu_gamma(B * T + 1, 2 * U)) * mag)) bad++;
        }
    T_CHECK(bad == 0, "bk bf16: %d elements beyond (2^-8 + gamma_{BT+1}(2u)) bound", bad);
    cu_free(dA); cu_free(dG); cu_free(dGs); cu_free(dsq); cu_free(dc); cu_free(dgrad);
    free(A); free(G); free(Ah); free(Gh); free(g1);
}

int main(void) {
    seed = t_seed(7003);
    cu_ctx *ctx = cu_test_ctx();
    if (!ctx) return t_skip("no CUDA device (GPU test)");
    test_gemm_bf16(ctx);
    test_fused(ctx);
    test_fused_dropped(ctx);
    test_ghost_bk_bf16(ctx);
    cu_ctx_destroy(ctx);
    return t_finish();
}

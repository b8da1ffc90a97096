/* optimized/tests/test_cuda_gpu_fused.c — the single-pass fused per-layer clipping
 * (optimized/cuda/cu_fused.cuh, docs/cuda.md "(1b) Single pass") through the engine's
 * interface (fused_clip_accum of the CUDA backend), in f32 and f64, against a double
 * reference and against the chunked path (DPCERT_CUDA_FUSED=chunked) on the same inputs:
 *   - layers of 1, 2 and 6 dW tiles (several CTAs and several tiles per CTA where the device
 *     holds them: cu_dp_fused_single_ctas), T across the shared-memory chunk, abadi and
 *     automatic clipping, with and without extra squared norms (aliasing sq_out, as the
 *     engine calls it), some examples unclipped;
 *   - dW within the bound of cu_test_clipped_bad, sq_out and c_out within the norm bound;
 *   - a dropped example (extra norm +inf): c = 0, dW finite and the clipped sum of the others;
 *   - run to run bit-identical; a layer too large for the single pass falls back (same bound);
 *   - negative control: the same checker with the clip norm doubled must reject the result.
 * Exits 77 without a GPU (built against the CPU emulation as optimized_test_cuda_emu_fused;
 * the emulation's grid-barrier negative control is test_cuda_emu_neg --broken gridbarrier). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/backend.h"
#include "optimized/cuda/cu_testutil.h"

static uint64_t seed;

typedef struct { int B, T, d, p, automatic, extra; double cscale; } fcase;

static void *put(opt_backend *be, const double *h, int64_t n) {
    void *d = NULL;
    T_OK(be->ops.alloc(be->ctx, &d, (size_t)(n > 0 ? n : 1) * opt_backend_esize(be)));
    if (d && n) T_OK(be->ops.upload_f64(be->ctx, d, h, n));
    return d;
}
static void get(opt_backend *be, double *h, const void *d, int64_t n) { T_OK(be->ops.download_f64(be->ctx, h, d, n)); }

/* fused_clip_accum on backend be: dW (from w0), sq_out, c_out come back as doubles */
static void run(opt_backend *be, double *w, double *sq, double *c, const double *A, const double *G, const double *w0,
                const double *ex, const fcase *k, double C) {
    const int64_t nw = (int64_t)k->p * k->d;
    void *dA = put(be, A, (int64_t)k->B * k->T * k->d), *dG = put(be, G, (int64_t)k->B * k->T * k->p), *dW = put(be, w0, nw);
    void *dsq = put(be, ex, k->B), *dc = put(be, ex, k->B); /* dsq holds the extra norms: extra aliases sq_out */
    T_OK(be->ops.fused_clip_accum(be->ctx, dW, dsq, dc, dA, dG, k->extra ? dsq : NULL, C,
                                  k->automatic ? OPT_CLIP_AUTOMATIC : OPT_CLIP_ABADI, 0.05, k->B, k->T, k->d, k->p));
    get(be, w, dW, nw);
    get(be, sq, dsq, k->B);
    get(be, c, dc, k->B);
    be->ops.free(be->ctx, dA); be->ops.free(be->ctx, dG); be->ops.free(be->ctx, dW);
    be->ops.free(be->ctx, dsq); be->ops.free(be->ctx, dc);
}

static void one_case(opt_backend *S, opt_backend *K, cu_ctx *ctx, const fcase *k, double u) {
    const int B = k->B, T = k->T, d = k->d, p = k->p;
    const int64_t na = (int64_t)B * T * d, ng = (int64_t)B * T * p, nw = (int64_t)p * d;
    float *A = malloc(na * 4), *G = malloc(ng * 4), *w0f = malloc(nw * 4);
    double *Ad = malloc(na * 8), *Gd = malloc(ng * 8), *w0 = malloc(nw * 8), *ws = malloc(nw * 8), *ws2 = malloc(nw * 8),
           *wk = malloc(nw * 8), ex[8], sq[8], c[8], sq2[8], c2[8], sqk[8], ck[8];
    cu_test_fill(A, (size_t)na, seed, 60 + p, 1.0);
    cu_test_fill(G, (size_t)ng, seed, 61 + d, 1.0);
    cu_test_fill(w0f, (size_t)nw, seed, 62, 0.1);
    for (int b = 0; b < B; b++) /* spread the norms: example b scaled by (b + 1) / 2 */
        for (int64_t i = 0; i < (int64_t)T * p; i++) G[(int64_t)b * T * p + i] *= (float)(b + 1) / 2.0f;
    for (int64_t i = 0; i < na; i++) Ad[i] = A[i];
    for (int64_t i = 0; i < ng; i++) Gd[i] = G[i];
    for (int64_t i = 0; i < nw; i++) w0[i] = w0f[i];
    cu_test_ex rex[8];
    cu_test_ref_examples(rex, A, G, B, T, d, p, u);
    for (int b = 0; b < B; b++) ex[b] = k->extra ? (b == 1 ? INFINITY : 0.25 * (b + 1)) : 0.0;
    /* C between the norms: the first examples unclipped, the last ones clipped */
    const double C = k->cscale * sqrt(rex[B / 2].sq);
    int nblk = -1;
    T_OK(cu_dp_fused_single_ctas(ctx, &nblk, d, p));
    run(S, ws, sq, c, Ad, Gd, w0, ex, k, C);
    run(S, ws2, sq2, c2, Ad, Gd, w0, ex, k, C);
    run(K, wk, sqk, ck, Ad, Gd, w0, ex, k, C);
    char name[160];
    snprintf(name, sizeof name, "B=%d T=%d d=%d p=%d %s%s C=%.3g (%d CTAs)", B, T, d, p, k->automatic ? "automatic" : "abadi",
             k->extra ? " extra (+inf at b=1)" : "", C, nblk);
    T_CHECK(memcmp(ws, ws2, nw * 8) == 0 && memcmp(sq, sq2, B * 8) == 0 && memcmp(c, c2, B * 8) == 0,
            "%s: single pass run to run bit-identical", name);
    const double *exr = k->extra ? ex : NULL;
    int bs = cu_test_clipped_bad(ws, w0, rex, exr, C, k->automatic, 0.05, B, nw, u);
    int bk = cu_test_clipped_bad(wk, w0, rex, exr, C, k->automatic, 0.05, B, nw, u);
    T_CHECK(bs == 0, "%s: single pass dW: %d elements beyond the bound", name, bs);
    T_CHECK(bk == 0, "%s: chunked dW: %d elements beyond the bound", name, bk);
    int neg = cu_test_clipped_bad(ws, w0, rex, exr, 2 * C, k->automatic, 0.05, B, nw, u);
    T_CHECK(neg > 0, "%s: negative control (clip 2C) must be detected, got %d mismatches", name, neg);
    int nonfinite = 0, badn = 0;
    for (int64_t j = 0; j < nw; j++) nonfinite += !isfinite(ws[j]);
    T_CHECK(nonfinite == 0, "%s: %d dW elements not finite", name, nonfinite);
    for (int b = 0; b < B; b++) {
        double ref = rex[b].sq + ex[b], e2 = 0;
        for (int64_t j = 0; j < nw; j++) e2 += 2 * fabs(rex[b].g[j]) * rex[b].e[j] + rex[b].e[j] * rex[b].e[j];
        /* both sides' errors: the device's (u) and the double reference's (2^-53) */
        double tol = (e2 + cu_gamma(nw + 2, u) * ref) * (1.0 + 0x1p-53 / u), rc = cu_test_clipfn(ref, C, k->automatic, 0.05);
        if (isinf(ref)) {
            badn += !(isinf(sq[b]) && c[b] == 0.0 && isinf(sqk[b]) && ck[b] == 0.0);
            continue;
        }
        badn += !(fabs(sq[b] - ref) <= tol) + !(fabs(sqk[b] - ref) <= tol);
        /* the factor: relative error at most the norm's (tol / ref) plus 4u */
        double ctol = rc * (tol / ref + 4 * u);
        badn += !(fabs(c[b] - rc) <= ctol) + !(fabs(ck[b] - rc) <= ctol);
    }
    T_CHECK(badn == 0, "%s: %d squared norms / factors beyond the bound (single and chunked)", name, badn);
    cu_test_ex_free(rex, B);
    free(A); free(G); free(w0f); free(Ad); free(Gd); free(w0); free(ws); free(ws2); free(wk);
}

static void run_dtype(dp_dtype dt, cu_ctx *ctx) {
    const double u = dt == DP_F32 ? CU_U32 : 1.0 / 9007199254740992.0;
    opt_backend_config cfg = {CU_TEST_BACKEND, dt, 1, 0};
    opt_backend *S = NULL, *K = NULL;
    unsetenv("DPCERT_CUDA_FUSED");
    T_OK(opt_backend_create(&S, &cfg));
    setenv("DPCERT_CUDA_FUSED", "chunked", 1);
    T_OK(opt_backend_create(&K, &cfg));
    unsetenv("DPCERT_CUDA_FUSED");
    if (!S || !K) return;
    printf("dtype %s\n", dp_dtype_name(dt));
    const fcase cases[] = {
        {5, 37, 70, 40, 0, 0, 1.0}, /* 6 tiles: several CTAs, several tiles per CTA; T over two chunks */
        {4, 5, 33, 1, 1, 0, 1.0},   /* 2 tiles of one row each, automatic */
        {6, 9, 20, 17, 0, 1, 1.0},  /* one tile, extra norms aliasing sq_out, one of them +inf */
        {3, 12, 40, 40, 1, 1, 0.5}, /* 4 tiles, automatic, extra */
        {3, 3, 300, 150, 0, 0, 1.0} /* 50 tiles: beyond the emulation's resident CTAs (the fallback) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) one_case(S, K, ctx, &cases[i], u);
    setenv("DPCERT_CUDA_FUSED", "bogus", 1);
    opt_backend *X = NULL;
    T_CHECK(opt_backend_create(&X, &cfg) == DP_ERR_USAGE, "DPCERT_CUDA_FUSED=bogus is refused: %s", dp_last_error());
    unsetenv("DPCERT_CUDA_FUSED");
    opt_backend_destroy(S);
    opt_backend_destroy(K);
}

int main(void) {
    seed = t_seed(7004);
    setenv("CU_EMU_THREADS", "2", 0); /* the emulation: two resident CTAs at least (ignored on a GPU) */
    cu_ctx *ctx = cu_test_ctx();
    if (!ctx) return t_skip("no CUDA device (GPU test)");
    int n6 = 0;
    T_OK(cu_dp_fused_single_ctas(ctx, &n6, 70, 40));
    printf("single pass: %d CTAs for a 40 x 70 layer (6 tiles)\n", n6);
    T_CHECK(n6 >= 2, "a 6-tile layer runs on several resident CTAs (got %d)", n6);
    run_dtype(DP_F32, ctx);
    run_dtype(DP_F64, ctx);
    cu_ctx_destroy(ctx);
    return t_finish();
}

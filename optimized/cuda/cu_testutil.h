/* optimized/cuda/cu_testutil.h — helpers shared by the GPU tests and the GPU benchmark
 * (C only; static functions). Tolerance formulas are derived in docs/cuda.md
 * ("Tolerances on the GPU"). */
#ifndef CU_TESTUTIL_H
#define CU_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/rng.h"
#include "common/alloc.h"
#include "common/tensor.h"
#include "optimized/cuda/cu_api.h"

/* The backend the GPU tests ask for: "cuda", or "cuda-emu" when they are built against the
 * CPU emulation (-DDP_CUDA_EMU=1: optimized_test_cuda_emu_*, docs/cuda.md "The emulation"). */
#ifdef DP_CUDA_EMU
#define CU_TEST_BACKEND "cuda-emu"
#else
#define CU_TEST_BACKEND "cuda"
#endif

/* unit roundoff of f32 (round to nearest) */
#define CU_U32 (1.0 / 16777216.0)

/* gamma_n = n u / (1 - n u) (Higham): bound on the relative error of an n-term sum
 * (or dot product) in any order, relative to the sum of absolute values. */
static inline double cu_gamma(double n, double u) { return n * u / (1.0 - n * u); }

/* A context on device 0, or NULL after printing why (the test then skips with 77). */
static inline cu_ctx *cu_test_ctx(void) {
    cu_device_info info;
    dp_status st = cu_device_probe(&info, -1);
    if (st != DP_OK) {
        printf("no usable GPU: %s\n", dp_last_error());
        return NULL;
    }
    printf("device: %s (cc %d.%d, %d SMs, driver %d, runtime %d)\n", info.name, info.cc_major, info.cc_minor,
           info.sm_count, info.driver_version, info.runtime_version);
    cu_ctx *ctx = NULL;
    if (cu_ctx_create(&ctx, info.device) != DP_OK) {
        printf("context: %s\n", dp_last_error());
        return NULL;
    }
    return ctx;
}

/* Device copy of n host floats (NULL on failure, message printed). */
static inline void *cu_test_up(cu_ctx *ctx, const void *h, size_t bytes) {
    void *d = NULL;
    if (cu_malloc(&d, bytes) != DP_OK || cu_h2d(ctx, d, h, bytes) != DP_OK) {
        fprintf(stderr, "upload of %zu bytes: %s\n", bytes, dp_last_error());
        cu_free(d);
        return NULL;
    }
    return d;
}

/* x[k] = uniform(-a, a) from the public TEST stream (seed, stream id, lane 0). */
static inline void cu_test_fill(float *x, size_t n, uint64_t seed, uint32_t id, double a) {
    dp_stream s;
    dp_stream_public(&s, (dp_seed){seed}, DP_PURPOSE_TEST, id, 0);
    for (size_t k = 0; k < n; k++) x[k] = (float)((2.0 * dp_rng_uniform(&s, k) - 1.0) * a);
}
/* Same values rounded to bf16 (bit patterns) and the exact f32 of them. */
static inline void cu_test_fill_bf16(uint16_t *h, float *x, size_t n, uint64_t seed, uint32_t id, double a) {
    cu_test_fill(x, n, seed, id, a);
    for (size_t k = 0; k < n; k++) {
        h[k] = dp_f32_to_bf16(x[k]);
        x[k] = dp_bf16_to_f32(h[k]);
    }
}


/* Elements of C[batch][M,N] = op(A) op(B) (row-major, op by ta/tb) farther than g * sum |terms|
 * from the double reference. */
static inline int cu_test_gemm_bad(const float *C, const float *A, const float *B, int ta, int tb, int M, int N, int K,
                                   int batch, double g) {
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    int bad = 0;
    for (int b = 0; b < batch; b++)
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double s = 0, sa = 0;
                for (int k = 0; k < K; k++) {
                    double av = ta ? A[b * na + (size_t)k * M + m] : A[b * na + (size_t)m * K + k];
                    double bv = tb ? B[b * nb + (size_t)n * K + k] : B[b * nb + (size_t)k * N + n];
                    s += av * bv;
                    sa += fabs(av * bv);
                }
                double got = C[b * nc + (size_t)m * N + n];
                if (!(fabs(got - s) <= g * sa)) bad++;
            }
    return bad;
}

/* Reference per-example gradients g_b = G_b^T A_b [p, d] in double and the bound E_b
 * of the f32 (tensor-core, 2u) GEMM error per element: gamma_T(2u) sum_t |G||A|. */
typedef struct { double *g, *e, sq, esq; } cu_test_ex;
static inline void cu_test_ref_examples(cu_test_ex *ex, const float *A, const float *G, int B, int T, int d, int p, double uacc) {
    double gT = cu_gamma(T, uacc);
    for (int b = 0; b < B; b++) {
        ex[b].g = (double *)dp_calloc((size_t)p * d, sizeof(double));
        ex[b].e = (double *)dp_calloc((size_t)p * d, sizeof(double));
        ex[b].sq = 0;
        double e2 = 0;
        for (int i = 0; i < p; i++)
            for (int j = 0; j < d; j++) {
                double s = 0, sa = 0;
                for (int t = 0; t < T; t++) {
                    double v = (double)G[((size_t)b * T + t) * p + i] * A[((size_t)b * T + t) * d + j];
                    s += v;
                    sa += fabs(v);
                }
                ex[b].g[(size_t)i * d + j] = s;
                ex[b].e[(size_t)i * d + j] = gT * sa;
                ex[b].sq += s * s;
                e2 += gT * sa * gT * sa;
            }
        ex[b].esq = sqrt(e2);
    }
}
static inline void cu_test_ex_free(cu_test_ex *ex, int B) {
    for (int b = 0; b < B; b++) {
        dp_free(ex[b].g);
        dp_free(ex[b].e);
    }
}



/* The clip functions in double: abadi n > C ? C/n : 1, automatic C / (n + gamma); an
 * infinite squared norm gives 0 (the example is dropped). */
static inline double cu_test_clipfn(double sq, double C, int automatic, double gamma) {
    double n = sqrt(sq);
    if (automatic) return C / (n + gamma);
    return n > C ? C / n : 1.0;
}

/* Elements of grad[n] outside the bound of docs/cuda.md for grad0 + sum_b c_b g_b, c_b the
 * clip factor of the exact squared norm ex[b].sq + extra[b] (extra may be NULL):
 *   |grad - ref| <= sum_b (c_b E_b + |dc_b| |g_b| + 2u c_b |g_b|) + gamma_{B+1}(u) (|grad0| + sum_b c_b |g_b|),
 * E_b the GEMM bound of cu_test_ref_examples, dc_b the factor's first-order change under a
 * norm error delta_b = ||E_b|| + (2u + gamma_{n+2}(2^-53)) ||g_b|| (the device sums the n
 * squares in double; abadi: c delta / (n - delta) when n + delta > C;
 * automatic: c delta / (n - delta + gamma)); u the unit roundoff of the accumulation. The
 * reference is computed in double: its own error (the same bound at u = 2^-53) is added. */
static inline int cu_test_clipped_bad(const double *grad, const double *grad0, const cu_test_ex *ex, const double *extra,
                                      double C, int automatic, double gamma, int B, int64_t n, double u) {
    int bad = 0;
    for (int64_t j = 0; j < n; j++) {
        double r = grad0[j], tol = 0, mag = fabs(grad0[j]);
        for (int b = 0; b < B; b++) {
            double sq = ex[b].sq + (extra ? extra[b] : 0.0), nrm = sqrt(sq), c = cu_test_clipfn(sq, C, automatic, gamma);
            double delta = ex[b].esq + (2 * u + cu_gamma((double)n + 2, 0x1p-53)) * nrm, dc = 0;
            if (automatic) dc = c * delta / fmax(nrm - delta + gamma, 1e-300);
            else if (nrm + delta > C) dc = c * delta / fmax(nrm - delta, 1e-300);
            if (!(c > 0)) continue; /* dropped */
            r += c * ex[b].g[j];
            tol += c * ex[b].e[j] + dc * fabs(ex[b].g[j]) + 2 * u * c * fabs(ex[b].g[j]);
            mag += c * fabs(ex[b].g[j]);
        }
        tol += cu_gamma(B + 1, u) * mag;
        tol *= 1.0 + 0x1p-53 / u; /* the reference's own double rounding: the same bound at u = 2^-53 */
        if (!(fabs(grad[j] - r) <= tol)) bad++;
    }
    return bad;
}

#endif

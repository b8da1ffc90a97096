/* optimized/host/host_gemm.c — the host GEMM (host_gemm.h): AVX2 micro-kernels chosen
 * at run time with a portable C fallback, and the packing driver of host_gemm_kern.h
 * for double and float.
 *
 * Register blocks: HG_MR = 6 rows x NR columns (f64: 8 = two 4-lane vectors, f32:
 * 16 = two 8-lane vectors): 12 vector accumulators, 2 vectors of B, one broadcast of A,
 * one product. Each lane is a different C element: per k the lane computes
 * prod = a * b (rounded) then acc = acc + prod (rounded) — the scalar loop's order.
 * The micro-kernels are compiled with target("avx2") only (not "fma") and the whole
 * project with -ffp-contract=off, so no multiply-add is ever fused. AVX-512 is not
 * used: the CPUs this was measured on lack it (docs/performance.md). */
#include "optimized/host/host_gemm.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HG_X86 1
#else
#define HG_X86 0
#endif

#define HG_MR 6
#define NR_f64 8
#define NR_f32 16
#define HG_KC 256
#define HG_MC 96  /* multiple of HG_MR */
#define HG_NC 256 /* multiple of NR_f64 and NR_f32 */

opt_hgemm_isa opt_hgemm_isa_best(void) {
#if HG_X86
    return __builtin_cpu_supports("avx2") ? OPT_HGEMM_ISA_AVX2 : OPT_HGEMM_ISA_GENERIC;
#else
    return OPT_HGEMM_ISA_GENERIC;
#endif
}

const char *opt_hgemm_isa_name(opt_hgemm_isa isa) {
    if (isa == OPT_HGEMM_ISA_AUTO) isa = opt_hgemm_isa_best();
    return isa == OPT_HGEMM_ISA_AVX2 ? "avx2" : "generic";
}

int64_t opt_hgemm_tiles(const opt_hgemm_problem *p) {
    if (p->M <= 0 || p->N <= 0 || p->batch <= 0) return 0;
    return p->batch * ((p->M + HG_MC - 1) / HG_MC) * ((p->N + HG_NC - 1) / HG_NC);
}

size_t opt_hgemm_ws_bytes(size_t esize) {
    return esize * (size_t)(HG_MC * HG_KC + HG_NC * HG_KC + HG_MC * HG_NC) + 64;
}

double opt_hgemm_tile_cost(const opt_hgemm_problem *p) {
    double m = (double)(p->M < HG_MC ? p->M : HG_MC), n = (double)(p->N < HG_NC ? p->N : HG_NC);
    return m * n * (double)(p->K > 0 ? p->K : 1);
}

#if HG_X86
/* 6 x 8 doubles: c[r][0..3], c[r][4..7] */
__attribute__((target("avx2"))) static void ukr_avx2_f64(int64_t kc, const double *restrict a,
                                                          const double *restrict b, double *restrict acc, int first) {
    __m256d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (first) {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_pd();
    } else {
        c00 = _mm256_loadu_pd(acc + 0); c01 = _mm256_loadu_pd(acc + 4);
        c10 = _mm256_loadu_pd(acc + 8); c11 = _mm256_loadu_pd(acc + 12);
        c20 = _mm256_loadu_pd(acc + 16); c21 = _mm256_loadu_pd(acc + 20);
        c30 = _mm256_loadu_pd(acc + 24); c31 = _mm256_loadu_pd(acc + 28);
        c40 = _mm256_loadu_pd(acc + 32); c41 = _mm256_loadu_pd(acc + 36);
        c50 = _mm256_loadu_pd(acc + 40); c51 = _mm256_loadu_pd(acc + 44);
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4), x;
#define HG_ROW(r, c0, c1)                          \
    x = _mm256_broadcast_sd(a + r);                \
    c0 = _mm256_add_pd(c0, _mm256_mul_pd(x, b0));  \
    c1 = _mm256_add_pd(c1, _mm256_mul_pd(x, b1));
        HG_ROW(0, c00, c01) HG_ROW(1, c10, c11) HG_ROW(2, c20, c21)
        HG_ROW(3, c30, c31) HG_ROW(4, c40, c41) HG_ROW(5, c50, c51)
#undef HG_ROW
        a += HG_MR;
        b += NR_f64;
    }
    _mm256_storeu_pd(acc + 0, c00); _mm256_storeu_pd(acc + 4, c01);
    _mm256_storeu_pd(acc + 8, c10); _mm256_storeu_pd(acc + 12, c11);
    _mm256_storeu_pd(acc + 16, c20); _mm256_storeu_pd(acc + 20, c21);
    _mm256_storeu_pd(acc + 24, c30); _mm256_storeu_pd(acc + 28, c31);
    _mm256_storeu_pd(acc + 32, c40); _mm256_storeu_pd(acc + 36, c41);
    _mm256_storeu_pd(acc + 40, c50); _mm256_storeu_pd(acc + 44, c51);
}
/* 6 x 16 floats */
__attribute__((target("avx2"))) static void ukr_avx2_f32(int64_t kc, const float *restrict a,
                                                          const float *restrict b, float *restrict acc, int first) {
    __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (first) {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
    } else {
        c00 = _mm256_loadu_ps(acc + 0); c01 = _mm256_loadu_ps(acc + 8);
        c10 = _mm256_loadu_ps(acc + 16); c11 = _mm256_loadu_ps(acc + 24);
        c20 = _mm256_loadu_ps(acc + 32); c21 = _mm256_loadu_ps(acc + 40);
        c30 = _mm256_loadu_ps(acc + 48); c31 = _mm256_loadu_ps(acc + 56);
        c40 = _mm256_loadu_ps(acc + 64); c41 = _mm256_loadu_ps(acc + 72);
        c50 = _mm256_loadu_ps(acc + 80); c51 = _mm256_loadu_ps(acc + 88);
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), x;
#define HG_ROW(r, c0, c1)                          \
    x = _mm256_broadcast_ss(a + r);                \
    c0 = _mm256_add_ps(c0, _mm256_mul_ps(x, b0));  \
    c1 = _mm256_add_ps(c1, _mm256_mul_ps(x, b1));
        HG_ROW(0, c00, c01) HG_ROW(1, c10, c11) HG_ROW(2, c20, c21)
        HG_ROW(3, c30, c31) HG_ROW(4, c40, c41) HG_ROW(5, c50, c51)
#undef HG_ROW
        a += HG_MR;
        b += NR_f32;
    }
    _mm256_storeu_ps(acc + 0, c00); _mm256_storeu_ps(acc + 8, c01);
    _mm256_storeu_ps(acc + 16, c10); _mm256_storeu_ps(acc + 24, c11);
    _mm256_storeu_ps(acc + 32, c20); _mm256_storeu_ps(acc + 40, c21);
    _mm256_storeu_ps(acc + 48, c30); _mm256_storeu_ps(acc + 56, c31);
    _mm256_storeu_ps(acc + 64, c40); _mm256_storeu_ps(acc + 72, c41);
    _mm256_storeu_ps(acc + 80, c50); _mm256_storeu_ps(acc + 88, c51);
}
#else
#define ukr_avx2_f64 ukr_generic_f64 /* never chosen: opt_hgemm_isa_best() is generic */
#define ukr_avx2_f32 ukr_generic_f32
#endif

/* y = y + a x, lane-wise (no FMA) */
#if HG_X86
__attribute__((target("avx2"))) static void axpy_avx2_f64(double *y, double a, const double *x, int64_t n) {
    __m256d va = _mm256_set1_pd(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm256_storeu_pd(y + i, _mm256_add_pd(_mm256_loadu_pd(y + i), _mm256_mul_pd(va, _mm256_loadu_pd(x + i))));
    for (; i < n; i++) y[i] = y[i] + a * x[i];
}
__attribute__((target("avx2"))) static void axpy_avx2_f32(float *y, float a, const float *x, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) y[i] = y[i] + a * x[i];
}
#endif
void opt_hgemm_axpy_f64(double *y, double a, const double *x, int64_t n) {
#if HG_X86
    if (opt_hgemm_isa_best() == OPT_HGEMM_ISA_AVX2) { axpy_avx2_f64(y, a, x, n); return; }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = y[i] + a * x[i];
}
void opt_hgemm_axpy_f32(float *y, float a, const float *x, int64_t n) {
#if HG_X86
    if (opt_hgemm_isa_best() == OPT_HGEMM_ISA_AVX2) { axpy_avx2_f32(y, a, x, n); return; }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = y[i] + a * x[i];
}

#define R double
#define GK(name) name##_f64
#include "optimized/host/host_gemm_kern.h"
#undef R
#undef GK
#define R float
#define GK(name) name##_f32
#include "optimized/host/host_gemm_kern.h"
#undef R
#undef GK

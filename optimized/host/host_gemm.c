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
/* The 6 x NR AVX2 micro-kernel for one element type: vector type V, intrinsic suffix S
 * (pd / ps), W lanes per vector (NR = 2 W); c[r][0] and c[r][1] hold row r. */
#define HG_UKR_AVX2(NAME, R, V, S, W, BCAST)                                                          \
    __attribute__((target("avx2"))) static void NAME(int64_t kc, const R *restrict a, const R *restrict b, \
                                                     R *restrict acc, int first) {                   \
        V c[HG_MR][2];                                                                              \
        _Pragma("GCC unroll 6") for (int r = 0; r < HG_MR; r++)                                      \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)                                      \
                c[r][h] = first ? _mm256_setzero_##S() : _mm256_loadu_##S(acc + (2 * r + h) * (W));      \
        for (int64_t k = 0; k < kc; k++) {                                                           \
            V b0 = _mm256_loadu_##S(b), b1 = _mm256_loadu_##S(b + (W));                              \
            _Pragma("GCC unroll 6") for (int r = 0; r < HG_MR; r++) {                                \
                V x = BCAST(a + r);                                                                  \
                c[r][0] = _mm256_add_##S(c[r][0], _mm256_mul_##S(x, b0));                            \
                c[r][1] = _mm256_add_##S(c[r][1], _mm256_mul_##S(x, b1));                            \
            }                                                                                        \
            a += HG_MR;                                                                              \
            b += 2 * (W);                                                                            \
        }                                                                                            \
        _Pragma("GCC unroll 6") for (int r = 0; r < HG_MR; r++)                                      \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) _mm256_storeu_##S(acc + (2 * r + h) * (W), c[r][h]);            \
    }
HG_UKR_AVX2(ukr_avx2_f64, double, __m256d, pd, 4, _mm256_broadcast_sd)
HG_UKR_AVX2(ukr_avx2_f32, float, __m256, ps, 8, _mm256_broadcast_ss)
#else
#define ukr_avx2_f64 ukr_generic_f64 /* never chosen: opt_hgemm_isa_best() is generic */
#define ukr_avx2_f32 ukr_generic_f32
#endif

/* y = y + a x, lane-wise (no FMA): AVX2 where present, else the scalar loop */
#if HG_X86
#define HG_AXPY_AVX2(NAME, R, V, S, W)                                                                \
    __attribute__((target("avx2"))) static void NAME(R *y, R a, const R *x, int64_t n) {               \
        V va = _mm256_set1_##S(a);                                                                     \
        int64_t i = 0;                                                                                 \
        for (; i + (W) <= n; i += (W))                                                                 \
            _mm256_storeu_##S(y + i, _mm256_add_##S(_mm256_loadu_##S(y + i), _mm256_mul_##S(va, _mm256_loadu_##S(x + i)))); \
        for (; i < n; i++) y[i] = y[i] + a * x[i];                                                      \
    }
HG_AXPY_AVX2(axpy_avx2_f64, double, __m256d, pd, 4)
HG_AXPY_AVX2(axpy_avx2_f32, float, __m256, ps, 8)
#define HG_AXPY_PICK(SFX)                                                                             \
    if (opt_hgemm_isa_best() == OPT_HGEMM_ISA_AVX2) { axpy_avx2_##SFX(y, a, x, n); return; }
#else
#define HG_AXPY_PICK(SFX)
#endif
#define HG_AXPY(SFX, R)                                                                                \
    void opt_hgemm_axpy_##SFX(R *y, R a, const R *x, int64_t n) {                                      \
        HG_AXPY_PICK(SFX)                                                                              \
        for (int64_t i = 0; i < n; i++) y[i] = y[i] + a * x[i];                                         \
    }
HG_AXPY(f64, double)
HG_AXPY(f32, float)

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

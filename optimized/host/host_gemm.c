/* optimized/host/host_gemm.c — the host GEMM (host_gemm.h): micro-kernels and packing
 * primitives for each instruction set (AVX2, portable C), chosen at run time, and the
 * driver of host_gemm_kern.h instantiated for every (element type, ISA).
 *
 * Register blocks: HG_MR = 6 rows x NR columns (f64: 8 = two 4-lane vectors, f32:
 * 16 = two 8-lane vectors): 12 vector accumulators, 2 vectors of B, one broadcast of
 * A, one product. Each lane is a different C element: per k the lane computes
 * prod = a * b (rounded) then acc = acc + prod (rounded) — the scalar loop's order.
 * The micro-kernels are compiled with target("avx2") only (not "fma") and the whole
 * project with -ffp-contract=off, so no multiply-add is ever fused. On the development
 * CPU (AMD Zen 4: two multiply and two add pipes) this kernel runs at the same peak as
 * a fused multiply-add one (112 against 113 GFLOP/s f32 in L1), while AVX-512 with
 * separate multiplies and adds reaches only 78 (docs/performance.md): so AVX-512 is not
 * used. The packing (host_gemm_kern.h) transposes with in-register 4 x 8 / 4 x 4 and
 * 2 x 8 / 2 x 4 blocks and the write-back is vectorised; both only move values. */
#include "optimized/host/host_gemm.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HG_X86 1
#else
#define HG_X86 0
#endif

#define HG_MR 6   /* rows of a register block (every ISA) */
#define HG_KC 256
#define HG_MC 96  /* multiple of 2 HG_MR */
#define HG_NC 256 /* multiple of every NR (16, 8) */

/* The best ISA of the CPU, optionally capped by DPCERT_HOST_ISA=generic (benchmarks
 * and tests: the bits do not depend on it). Resolved once. */
static opt_hgemm_isa hg_isa_probe(void) {
    opt_hgemm_isa best = OPT_HGEMM_ISA_GENERIC;
#if HG_X86
    if (__builtin_cpu_supports("avx2")) best = OPT_HGEMM_ISA_AVX2;
#endif
    const char *cap = getenv("DPCERT_HOST_ISA");
    if (cap && strcmp(cap, "generic") == 0) best = OPT_HGEMM_ISA_GENERIC;
    return best;
}

opt_hgemm_isa opt_hgemm_isa_best(void) {
    static int cached = -1; /* a benign race: every thread computes the same value */
    if (cached < 0) cached = (int)hg_isa_probe();
    return (opt_hgemm_isa)cached;
}

const char *opt_hgemm_isa_name(opt_hgemm_isa isa) {
    if (isa == OPT_HGEMM_ISA_AUTO) isa = opt_hgemm_isa_best();
    return isa == OPT_HGEMM_ISA_AVX2 ? "avx2" : "generic";
}

/* The ISA a problem runs on: its request, never beyond what the CPU supports. */
static opt_hgemm_isa hg_isa_of(const opt_hgemm_problem *p) {
    opt_hgemm_isa best = opt_hgemm_isa_best();
    if (p->isa == OPT_HGEMM_ISA_AUTO || p->isa > best) return best;
    return p->isa;
}

/* Rows of a macro-tile: HG_MC, or half of it when the problem has fewer than 8 tiles
 * (a weight gradient of a small layer: 3 tiles would keep one of 2 threads idle a third
 * of the time). The tiling never changes a result (each C element is computed whole
 * inside one tile), only how the work is cut. */
static int64_t hg_mc(const opt_hgemm_problem *p) {
    int64_t tiles = p->batch * ((p->M + HG_MC - 1) / HG_MC) * ((p->N + HG_NC - 1) / HG_NC);
    return tiles >= 8 ? HG_MC : HG_MC / 2;
}

int64_t opt_hgemm_tiles(const opt_hgemm_problem *p) {
    if (p->M <= 0 || p->N <= 0 || p->batch <= 0) return 0;
    int64_t mcz = hg_mc(p);
    return p->batch * ((p->M + mcz - 1) / mcz) * ((p->N + HG_NC - 1) / HG_NC);
}

size_t opt_hgemm_ws_bytes(size_t esize) {
    return esize * (size_t)(HG_MC * HG_KC + HG_NC * HG_KC + HG_MC * HG_NC) + 64;
}

double opt_hgemm_tile_cost(const opt_hgemm_problem *p) {
    double m = (double)(p->M < hg_mc(p) ? p->M : hg_mc(p)), n = (double)(p->N < HG_NC ? p->N : HG_NC);
    return m * n * (double)(p->K > 0 ? p->K : 1);
}

/* ---- y = y + a x, lane-wise (no FMA): AVX2 where present, else the scalar loop ---- */
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
    if (opt_hgemm_isa_best() != OPT_HGEMM_ISA_GENERIC) { axpy_avx2_##SFX(y, a, x, n); return; }
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

/* ---- portable primitives (scalar), any MR x NR ---- */
#define HG_GENERIC_PRIMS(SFX, R)                                                                       \
    /* acc[r][c] (+)= sum over k of a[k][r] * b[k][c], a rounded product then a rounded add */        \
    static inline void ukr_any_##SFX(int64_t kc, const R *restrict a, const R *restrict b, R *restrict acc,    \
                                     int first, int mr, int nr) {                                      \
        R c[12 * 32];                                                                                  \
        if (first) memset(c, 0, sizeof(R) * (size_t)(mr * nr));                                        \
        else memcpy(c, acc, sizeof(R) * (size_t)(mr * nr));                                            \
        for (int64_t k = 0; k < kc; k++)                                                               \
            for (int r = 0; r < mr; r++) {                                                             \
                R ar = a[k * mr + r];                                                                  \
                for (int j = 0; j < nr; j++) {                                                         \
                    R prod = ar * b[k * nr + j];                                                       \
                    c[r * nr + j] = c[r * nr + j] + prod;                                              \
                }                                                                                      \
            }                                                                                          \
        memcpy(acc, c, sizeof(R) * (size_t)(mr * nr));                                                 \
    }                                                                                                  \
    /* d[k * ldd + r] = s[r][k] for 4 (trans2: 2) row streams, k < kc */                                           \
    static inline void trans4_generic_##SFX(R *restrict d, int64_t ldd, const R *const *s, int64_t kc) { \
        for (int64_t k = 0; k < kc; k++)                                                               \
            for (int r = 0; r < 4; r++) d[k * ldd + r] = s[r][k];                                      \
    }                                                                                                  \
    static inline void trans2_generic_##SFX(R *restrict d, int64_t ldd, const R *const *s, int64_t kc) { \
        for (int64_t k = 0; k < kc; k++) { d[k * ldd] = s[0][k]; d[k * ldd + 1] = s[1][k]; }              \
    }                                                                                                  \
    /* c[j] = alpha a[j] (+ beta c[j]), j < n */                                                       \
    static inline void wb_generic_##SFX(R *restrict c, const R *restrict a, int64_t n, R alpha, R beta) { \
        if (beta == 0) for (int64_t j = 0; j < n; j++) c[j] = alpha * a[j];                             \
        else for (int64_t j = 0; j < n; j++) { R v = alpha * a[j]; c[j] = v + beta * c[j]; }            \
    }
HG_GENERIC_PRIMS(f64, double)
HG_GENERIC_PRIMS(f32, float)
/* the portable micro-kernels with the AVX2 ones' signature (HG_MR x 8, HG_MR x 16) */
static void ukr_generic_f64(int64_t kc, const double *a, const double *b, double *acc, int first) {
    ukr_any_f64(kc, a, b, acc, first, HG_MR, 8);
}
static void ukr_generic_f32(int64_t kc, const float *a, const float *b, float *acc, int first) {
    ukr_any_f32(kc, a, b, acc, first, HG_MR, 16);
}

/* The packing loops copy a few elements per k: without this, GCC turns them into a
 * memmove call each (loop distribution), which costs more than the copy. */
#pragma GCC optimize("no-tree-loop-distribute-patterns")

#if HG_X86
/* ---- vector primitives (AVX2) ---- */
/* 4 row streams x 8 k (f32) per step: a 4 x 8 in-register transpose, 8 stores of 4 */
__attribute__((target("avx2"))) static inline void trans4_avx2_f32(float *restrict d, int64_t ldd,
                                                                  const float *const *s, int64_t kc) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 r0 = _mm256_loadu_ps(s[0] + k), r1 = _mm256_loadu_ps(s[1] + k);
        __m256 r2 = _mm256_loadu_ps(s[2] + k), r3 = _mm256_loadu_ps(s[3] + k);
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
        __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        float *o = d + k * ldd;
        _mm_storeu_ps(o, _mm256_castps256_ps128(u0));
        _mm_storeu_ps(o + ldd, _mm256_castps256_ps128(u1));
        _mm_storeu_ps(o + 2 * ldd, _mm256_castps256_ps128(u2));
        _mm_storeu_ps(o + 3 * ldd, _mm256_castps256_ps128(u3));
        _mm_storeu_ps(o + 4 * ldd, _mm256_extractf128_ps(u0, 1));
        _mm_storeu_ps(o + 5 * ldd, _mm256_extractf128_ps(u1, 1));
        _mm_storeu_ps(o + 6 * ldd, _mm256_extractf128_ps(u2, 1));
        _mm_storeu_ps(o + 7 * ldd, _mm256_extractf128_ps(u3, 1));
    }
    for (; k < kc; k++)
        for (int r = 0; r < 4; r++) d[k * ldd + r] = s[r][k];
}
/* 4 row streams x 4 k (f64) per step: a 4 x 4 in-register transpose, 4 stores of 4 */
__attribute__((target("avx2"))) static inline void trans4_avx2_f64(double *restrict d, int64_t ldd,
                                                                  const double *const *s, int64_t kc) {
    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
        __m256d r0 = _mm256_loadu_pd(s[0] + k), r1 = _mm256_loadu_pd(s[1] + k);
        __m256d r2 = _mm256_loadu_pd(s[2] + k), r3 = _mm256_loadu_pd(s[3] + k);
        __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
        __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
        double *o = d + k * ldd;
        _mm256_storeu_pd(o, _mm256_permute2f128_pd(t0, t2, 0x20));
        _mm256_storeu_pd(o + ldd, _mm256_permute2f128_pd(t1, t3, 0x20));
        _mm256_storeu_pd(o + 2 * ldd, _mm256_permute2f128_pd(t0, t2, 0x31));
        _mm256_storeu_pd(o + 3 * ldd, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
    for (; k < kc; k++)
        for (int r = 0; r < 4; r++) d[k * ldd + r] = s[r][k];
}
/* 2 row streams x 8 k (f32): pairs (s0[k], s1[k]) stored as 64-bit halves */
__attribute__((target("avx2"))) static inline void trans2_avx2_f32(float *restrict d, int64_t ldd,
                                                                  const float *const *s, int64_t kc) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 r0 = _mm256_loadu_ps(s[0] + k), r1 = _mm256_loadu_ps(s[1] + k);
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1); /* k 0 1 4 5 / 2 3 6 7 */
        __m128 l0 = _mm256_castps256_ps128(t0), l1 = _mm256_castps256_ps128(t1);
        __m128 h0 = _mm256_extractf128_ps(t0, 1), h1 = _mm256_extractf128_ps(t1, 1);
        float *o = d + k * ldd;
        _mm_storel_pi((__m64 *)o, l0);
        _mm_storeh_pi((__m64 *)(o + ldd), l0);
        _mm_storel_pi((__m64 *)(o + 2 * ldd), l1);
        _mm_storeh_pi((__m64 *)(o + 3 * ldd), l1);
        _mm_storel_pi((__m64 *)(o + 4 * ldd), h0);
        _mm_storeh_pi((__m64 *)(o + 5 * ldd), h0);
        _mm_storel_pi((__m64 *)(o + 6 * ldd), h1);
        _mm_storeh_pi((__m64 *)(o + 7 * ldd), h1);
    }
    for (; k < kc; k++) { d[k * ldd] = s[0][k]; d[k * ldd + 1] = s[1][k]; }
}
/* 2 row streams x 4 k (f64): pairs stored as 128-bit halves */
__attribute__((target("avx2"))) static inline void trans2_avx2_f64(double *restrict d, int64_t ldd,
                                                                  const double *const *s, int64_t kc) {
    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
        __m256d r0 = _mm256_loadu_pd(s[0] + k), r1 = _mm256_loadu_pd(s[1] + k);
        __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1); /* k 0 2 / 1 3 */
        double *o = d + k * ldd;
        _mm_storeu_pd(o, _mm256_castpd256_pd128(t0));
        _mm_storeu_pd(o + ldd, _mm256_castpd256_pd128(t1));
        _mm_storeu_pd(o + 2 * ldd, _mm256_extractf128_pd(t0, 1));
        _mm_storeu_pd(o + 3 * ldd, _mm256_extractf128_pd(t1, 1));
    }
    for (; k < kc; k++) { d[k * ldd] = s[0][k]; d[k * ldd + 1] = s[1][k]; }
}
#define HG_WB_AVX2(SFX, R, V, S, W)                                                                     \
    __attribute__((target("avx2"))) static inline void wb_avx2_##SFX(R *restrict c, const R *restrict a, int64_t n, \
                                                                     R alpha, R beta) {                \
        V va = _mm256_set1_##S(alpha), vb = _mm256_set1_##S(beta);                                     \
        int64_t j = 0;                                                                                 \
        if (beta == 0)                                                                                 \
            for (; j + (W) <= n; j += (W)) _mm256_storeu_##S(c + j, _mm256_mul_##S(va, _mm256_loadu_##S(a + j))); \
        else                                                                                           \
            for (; j + (W) <= n; j += (W)) {                                                           \
                V v = _mm256_mul_##S(va, _mm256_loadu_##S(a + j));                                     \
                _mm256_storeu_##S(c + j, _mm256_add_##S(v, _mm256_mul_##S(vb, _mm256_loadu_##S(c + j)))); \
            }                                                                                          \
        wb_generic_##SFX(c + j, a + j, n - j, alpha, beta);                                            \
    }
HG_WB_AVX2(f64, double, __m256d, pd, 4)
HG_WB_AVX2(f32, float, __m256, ps, 8)

/* The MR x (2 W) micro-kernel of one ISA: vector type V, intrinsic prefix P (_mm256 /
 * _mm512), suffix S (pd / ps), W lanes; c[r][0..1] hold row r of the tile. */
#define HG_UKR(NAME, TGT, R, V, P, S, W, MR)                                                           \
    __attribute__((target(TGT))) static void NAME(int64_t kc, const R *restrict a, const R *restrict b,  \
                                                  R *restrict acc, int first) {                       \
        V c[MR][2];                                                                                    \
        _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++)                                          \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)                                        \
                c[r][h] = first ? P##_setzero_##S() : P##_loadu_##S(acc + (2 * r + h) * (W));             \
        for (int64_t k = 0; k < kc; k++) {                                                             \
            V b0 = P##_loadu_##S(b), b1 = P##_loadu_##S(b + (W));                                      \
            _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++) {                                    \
                V x = P##_set1_##S(a[r]);                                                              \
                c[r][0] = P##_add_##S(c[r][0], P##_mul_##S(x, b0));                                    \
                c[r][1] = P##_add_##S(c[r][1], P##_mul_##S(x, b1));                                    \
            }                                                                                          \
            a += MR;                                                                                   \
            b += 2 * (W);                                                                              \
        }                                                                                              \
        _Pragma("GCC unroll 12") for (int r = 0; r < MR; r++)                                          \
            _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) P##_storeu_##S(acc + (2 * r + h) * (W), c[r][h]); \
    }
HG_UKR(ukr_avx2_f64, "avx2", double, __m256d, _mm256, pd, 4, HG_MR)
HG_UKR(ukr_avx2_f32, "avx2", float, __m256, _mm256, ps, 8, HG_MR)
#endif

/* ---- driver instances (host_gemm_inst.h): element type R, suffix HG_SFX, ISA HG_ISA,
 * register block HG_MR x NR ---- */
#define R double
#define HG_SFX f64
#define NR 8
#define HG_ISA generic
#include "optimized/host/host_gemm_inst.h"
#define R float
#define HG_SFX f32
#define NR 16
#define HG_ISA generic
#include "optimized/host/host_gemm_inst.h"
#if HG_X86
#pragma GCC push_options
#pragma GCC target("avx2")
#define R double
#define HG_SFX f64
#define NR 8
#define HG_ISA avx2
#include "optimized/host/host_gemm_inst.h"
#define R float
#define HG_SFX f32
#define NR 16
#define HG_ISA avx2
#include "optimized/host/host_gemm_inst.h"
#pragma GCC pop_options
#endif

/* ---- dispatch ---- */
#if HG_X86
#define HG_DISPATCH(SFX)                                                                               \
    void opt_hgemm_run_##SFX(const opt_hgemm_problem *p, int64_t lo, int64_t hi, void *ws) {            \
        switch (hg_isa_of(p)) {                                                                        \
        case OPT_HGEMM_ISA_AVX2: hg_run_##SFX##_avx2(p, lo, hi, ws); return;                            \
        default: hg_run_##SFX##_generic(p, lo, hi, ws); return;                                        \
        }                                                                                              \
    }
#else
#define HG_DISPATCH(SFX)                                                                               \
    void opt_hgemm_run_##SFX(const opt_hgemm_problem *p, int64_t lo, int64_t hi, void *ws) {            \
        hg_run_##SFX##_generic(p, lo, hi, ws);                                                         \
    }
#endif
HG_DISPATCH(f64)
HG_DISPATCH(f32)
